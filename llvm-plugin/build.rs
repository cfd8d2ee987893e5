//! Compiles the plugin's C++ (the shim and the pass registration) against
//! the headers of the LLVM whose clang will load it. Nothing is linked: the
//! plugin uses the compiler's own LLVM.

include!("../driver/build_llvm.rs");

fn main() {
    let llvm = Llvm::selected();
    llvm.cpp_build()
        .file("cpp/llvm_shim.cpp")
        .file("cpp/registration.cpp")
        .flag("-fno-exceptions")
        .compile("gpuinstr_llvm_shim");
    println!("cargo:rustc-env=GPUINSTR_LLVM_VERSION={}", llvm.version);
    println!("cargo:rerun-if-changed=cpp");
    println!("cargo:rerun-if-changed=../driver/build_llvm.rs");
}
