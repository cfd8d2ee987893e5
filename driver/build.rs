//! Links libLLVM-15 explicitly. The plugin crate in the same workspace asks
//! llvm-sys not to link LLVM (a plugin uses the host process's copy), and
//! Cargo unifies that feature into this crate's llvm-sys too.
fn main() {
    let prefix = std::env::var("LLVM_SYS_150_PREFIX").unwrap_or_else(|_| "/usr/lib/llvm-15".to_string());
    println!("cargo:rustc-link-search=native={prefix}/lib");
    println!("cargo:rustc-link-lib=dylib=LLVM-15");
    println!("cargo:rerun-if-env-changed=LLVM_SYS_150_PREFIX");
}
