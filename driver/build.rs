//! Compiles the driver's C++ (cpp/gpuinstr_native.cpp, LLVM's MC layer)
//! against the LLVM this build is for and links its shared library; tells
//! the crate which LLVM that is and where its tools are; and reads CoMGR's
//! constants from the amd_comgr.h being built against. The plugin crate in
//! the same workspace asks llvm-sys not to link LLVM (a plugin uses its
//! host's copy) and Cargo unifies that feature into this crate's llvm-sys,
//! so LLVM is linked here explicitly.
use std::path::PathBuf;
use std::process::Command;

include!("build_llvm.rs");

fn main() {
    let llvm = Llvm::selected();
    llvm.cpp_build().file("cpp/gpuinstr_native.cpp").compile("gpuinstr_native");

    println!("cargo:rustc-link-search=native={}", llvm.query(&["--libdir"]));
    // "-lLLVM-15" on Debian, "-lLLVM" where the library has no version in its name.
    let libraries = llvm.query(&["--link-shared", "--libs"]);
    for library in libraries.split_whitespace().filter_map(|flag| flag.strip_prefix("-l")) {
        println!("cargo:rustc-link-lib=dylib={library}");
    }
    println!("cargo:rustc-env=GPUINSTR_LLVM_MAJOR={}", llvm.major);
    println!("cargo:rustc-env=GPUINSTR_LLVM_VERSION={}", llvm.version);
    println!("cargo:rustc-env=GPUINSTR_LLVM_BINDIR={}", llvm.query(&["--bindir"]));
    println!("cargo:rustc-env=GPUINSTR_LLVM_LIBDIR={}", llvm.query(&["--libdir"]));
    println!("cargo:rerun-if-changed=cpp/gpuinstr_native.cpp");
    println!("cargo:rerun-if-changed=cpp/gpuinstr_native.h");
    println!("cargo:rerun-if-changed=build_llvm.rs");

    comgr_constants();
    opcode_tables(&llvm);
}

/// Builds driver/cpp/opcode-table against this LLVM's static AMDGPU
/// archives and runs it: the real -> pseudo tables of this LLVM, one per
/// encoding generation, in OUT_DIR (src/stages/lift/isa.rs includes them).
fn opcode_tables(llvm: &Llvm) {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("Cargo sets OUT_DIR"));
    let generator = out.join("generate-opcode-tables");
    let compiler = cc::Build::new().cpp(true).get_compiler();
    let mut command = compiler.to_command();
    command.arg("cpp/opcode-table/generate.cpp").arg("-o").arg(&generator).args(["-std=c++17", "-O1"]);
    let words = |arguments: &[&str]| llvm.query(arguments).split_whitespace().map(String::from).collect::<Vec<_>>();
    // The C++ flags without the optimisation and warning choices of LLVM's own build.
    command.args(words(&["--cxxflags"]).into_iter().filter(|flag| !flag.starts_with("-W") && !flag.starts_with("-O")));
    command.args(words(&[
        "--link-static",
        "--ldflags",
        "--libs",
        "amdgpuutils",
        "amdgpudesc",
        "amdgpuinfo",
        "mc",
        "support",
    ]));
    command.args(words(&["--link-static", "--system-libs"]));
    let built = command.output().unwrap_or_else(|e| panic!("cannot run the C++ compiler: {e}"));
    if !built.status.success() {
        panic!(
            "cannot build the opcode table generator against {} (it needs LLVM's static AMDGPU archives, \
             in llvm-{}-dev): {}",
            llvm.config.display(),
            llvm.major,
            String::from_utf8_lossy(&built.stderr)
        );
    }
    let ran = Command::new(&generator).arg(&out).output().expect("the opcode table generator runs");
    if !ran.status.success() {
        panic!("the opcode table generator failed: {}", String::from_utf8_lossy(&ran.stderr));
    }
    let _ = std::fs::remove_file(&generator);
    println!("cargo:rerun-if-changed=cpp/opcode-table/generate.cpp");
}

/// Compiles and runs cpp/comgr_constants.c, writing its Rust constants to
/// OUT_DIR/comgr_constants.rs (src/native/comgr.rs includes them).
fn comgr_constants() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("Cargo sets OUT_DIR"));
    let probe = out.join("comgr_constants");
    let compiler = cc::Build::new().get_compiler();
    let built = compiler
        .to_command()
        .arg("cpp/comgr_constants.c")
        .arg("-o")
        .arg(&probe)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler: {e}"));
    if !built.status.success() {
        panic!(
            "cannot compile cpp/comgr_constants.c (install libamd-comgr-dev): {}",
            String::from_utf8_lossy(&built.stderr)
        );
    }
    let constants = Command::new(&probe).output().expect("the CoMGR probe runs");
    assert!(constants.status.success(), "the CoMGR probe failed");
    std::fs::write(out.join("comgr_constants.rs"), constants.stdout).expect("OUT_DIR is writable");
    println!("cargo:rerun-if-changed=cpp/comgr_constants.c");
}
