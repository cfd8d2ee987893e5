//! Compiles the plugin's C++ shim against the LLVM 15 headers.
use std::path::PathBuf;
use std::process::Command;

fn llvm_prefix() -> PathBuf {
    std::env::var_os("LLVM_SYS_150_PREFIX").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/usr/lib/llvm-15"))
}

fn main() {
    let llvm_config = llvm_prefix().join("bin/llvm-config");
    let output = Command::new(&llvm_config)
        .arg("--includedir")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}; install llvm-15-dev", llvm_config.display()));
    let include_dir = String::from_utf8_lossy(&output.stdout).trim().to_string();

    cc::Build::new()
        .cpp(true)
        .file("cpp/llvm_shim.cpp")
        .flag("-isystem")
        .flag(&include_dir)
        .flag("-std=c++17")
        .flag("-fno-rtti")
        .flag("-fno-exceptions")
        .warnings(true)
        .compile("gpuinstr_llvm_shim");

    println!("cargo:rerun-if-changed=cpp");
    println!("cargo:rerun-if-env-changed=LLVM_SYS_150_PREFIX");
}
