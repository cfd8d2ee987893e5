//! Compiles the driver's C++ (cpp/gpuinstr_native.cpp, LLVM 15's MC layer)
//! and links libLLVM-15. The plugin crate in the same workspace asks llvm-sys
//! not to link LLVM (a plugin uses its host's copy) and Cargo unifies that
//! feature into this crate's llvm-sys, so LLVM is linked here explicitly.
use std::process::Command;

fn main() {
    let prefix = std::env::var("LLVM_SYS_150_PREFIX").unwrap_or_else(|_| "/usr/lib/llvm-15".to_string());
    let config = format!("{prefix}/bin/llvm-config");
    let include = Command::new(&config)
        .arg("--includedir")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {config}: {e}; install llvm-15-dev"));
    let include = String::from_utf8_lossy(&include.stdout).trim().to_string();

    cc::Build::new()
        .cpp(true)
        .file("cpp/gpuinstr_native.cpp")
        .flag("-isystem")
        .flag(&include)
        .flag("-std=c++17")
        .flag("-fno-rtti")
        .warnings(true)
        .compile("gpuinstr_native");

    println!("cargo:rustc-link-search=native={prefix}/lib");
    println!("cargo:rustc-link-lib=dylib=LLVM-15");
    println!("cargo:rerun-if-changed=cpp/gpuinstr_native.cpp");
    println!("cargo:rerun-if-changed=cpp/gpuinstr_native.h");
    println!("cargo:rerun-if-env-changed=LLVM_SYS_150_PREFIX");
}
