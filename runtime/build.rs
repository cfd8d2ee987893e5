//! Compiles the API-table shim (cpp/api_table.cpp) against ROCr's own
//! `hsa_api_trace.h`, so that the table's layout is the runtime's, not a
//! copy of it; and the runtime's collect kernel (device/collect.hip) for
//! each GPU the runtime supports, with hipcc.

use std::path::{Path, PathBuf};
use std::process::Command;

/// GPUs the collect kernel is built for (and so the runtime observes):
/// gfx908 and gfx90a with every hipcc, MI300X (gfx942) with the LLVM 17, 21
/// and 22 builds (trixie's, sid's and experimental's hipcc know it) and
/// MI355X (gfx950) with the LLVM 21 and 22 ones. A dispatch on another GPU
/// is reported as not observed.
fn targets() -> Vec<&'static str> {
    let feature = |name: &str| std::env::var_os(format!("CARGO_FEATURE_{name}")).is_some();
    let mut targets = vec!["gfx908", "gfx90a"];
    if feature("LLVM17") || feature("LLVM21") || feature("LLVM22") {
        targets.push("gfx942");
    }
    if feature("LLVM21") || feature("LLVM22") {
        targets.push("gfx950");
    }
    targets
}

fn main() {
    let include = std::env::var("HSA_INCLUDE_DIR").unwrap_or_else(|_| "/usr/include/hsa".to_string());
    if !Path::new(&include).join("hsa_api_trace.h").exists() {
        panic!("{include}/hsa_api_trace.h is missing: install libhsa-runtime-dev (or name its directory in HSA_INCLUDE_DIR)");
    }
    cc::Build::new()
        .cpp(true)
        .file("cpp/api_table.cpp")
        // The header includes its siblings without the `inc/` prefix only
        // when it believes it is built inside ROCr.
        .define("AMD_INTERNAL_BUILD", None)
        .include(&include)
        .flag("-std=c++17")
        .warnings(true)
        .compile("gpuinstr_rt_api_table");
    // The library's name inside it, so that a tool's host library linked
    // with -lgpuinstr_rt finds the copy ROCr already loaded.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libgpuinstr_rt.so");
    println!("cargo:rerun-if-changed=cpp/api_table.cpp");
    println!("cargo:rerun-if-env-changed=HSA_INCLUDE_DIR");

    source_identity();
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("Cargo sets OUT_DIR"));
    let hipcc = std::env::var("HIPCC").unwrap_or_else(|_| "hipcc".to_string());
    let mut table = String::from(
        "/// The collect kernel's code object per processor.\npub const COLLECT_KERNELS: &[(&str, &[u8])] = &[\n",
    );
    for target in targets() {
        let output = out.join(format!("collect-{target}.hsaco"));
        let built = Command::new(&hipcc)
            .args(["--cuda-device-only", "--no-gpu-bundle-output", "-O2", "-c"])
            .arg(format!("--offload-arch={target}"))
            .arg("device/collect.hip")
            .arg("-o")
            .arg(&output)
            // clang leaves empty directories in TMPDIR.
            .env("TMPDIR", &out)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {hipcc}: {e}; install hipcc (scripts/setup.sh)"));
        if !built.status.success() {
            panic!("{hipcc} device/collect.hip for {target}: {}", String::from_utf8_lossy(&built.stderr));
        }
        table.push_str(&format!("    ({target:?}, include_bytes!({:?})),\n", output.display().to_string()));
    }
    table.push_str("];\n");
    std::fs::write(out.join("collect_kernels.rs"), table).expect("OUT_DIR is writable");
    println!("cargo:rerun-if-changed=device/collect.hip");
    println!("cargo:rerun-if-env-changed=HIPCC");
}

/// A hash of the sources that decide what an instrumented code object is
/// (the driver, the intrinsics, the runtime): dynamic mode's cache keys
/// include it, so a rebuilt gpuinstr never loads what an older one made.
fn source_identity() {
    let mut files = Vec::new();
    for directory in ["../driver/src", "../driver/cpp", "../intrinsics/src", "src", "device"] {
        collect(Path::new(directory), &mut files);
        println!("cargo:rerun-if-changed={directory}");
    }
    files.sort();
    // FNV-1a over names and contents: an identity, not a defence.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for file in files {
        let contents = std::fs::read(&file).unwrap_or_default();
        for byte in file.to_string_lossy().bytes().chain(contents) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
        }
    }
    println!("cargo:rustc-env=GPUINSTR_SOURCE_IDENTITY={hash:016x}");
}

fn collect(directory: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(directory) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, files);
        } else {
            files.push(path);
        }
    }
}
