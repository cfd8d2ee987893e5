// Which LLVM a build uses, shared by the build scripts of the driver and the
// plugin (included with `include!`). Exactly one `llvmNN` Cargo feature is
// on; its prefix is LLVM_SYS_<NN>0_PREFIX (llvm-sys's convention; Debian's
// paths are set in .cargo/config.toml, and a prefix the user names, such as
// ROCm's /opt/rocm/llvm, wins).

/// The LLVM this build is for.
struct Llvm {
    major: u32,
    /// `llvm-config --version`.
    version: String,
    prefix_variable: &'static str,
    config: std::path::PathBuf,
}

impl Llvm {
    fn selected() -> Llvm {
        let features: Vec<(u32, &'static str)> = [(15, "LLVM_SYS_150_PREFIX"), (17, "LLVM_SYS_170_PREFIX"), (21, "LLVM_SYS_211_PREFIX"), (22, "LLVM_SYS_221_PREFIX")]
            .into_iter()
            .filter(|(major, _)| std::env::var_os(format!("CARGO_FEATURE_LLVM{major}")).is_some())
            .collect();
        let (major, prefix_variable) = match features.as_slice() {
            [one] => *one,
            [] => panic!("no LLVM selected: enable one of the features llvm15, llvm17, llvm21, llvm22"),
            _ => panic!("several LLVM majors selected ({features:?}): build with --no-default-features --features llvmNN"),
        };
        println!("cargo:rerun-if-env-changed={prefix_variable}");
        let prefix = std::env::var(prefix_variable).unwrap_or_else(|_| format!("/usr/lib/llvm-{major}"));
        let config = std::path::Path::new(&prefix).join("bin/llvm-config");
        let llvm = Llvm { major, version: String::new(), prefix_variable, config };
        let version = llvm.query(&["--version"]);
        let found: u32 = version.split('.').next().and_then(|m| m.parse().ok()).unwrap_or(0);
        if found != major {
            panic!(
                "the llvm{major} feature is on but {} is LLVM {version}: set {prefix_variable} to an LLVM {major} prefix or choose the feature llvm{found}",
                llvm.config.display()
            );
        }
        Llvm { version, ..llvm }
    }

    /// One line of `llvm-config` output.
    fn query(&self, arguments: &[&str]) -> String {
        let output = std::process::Command::new(&self.config).args(arguments).output().unwrap_or_else(|e| {
            panic!(
                "cannot run {}: {e}; install llvm-{}-dev or point {} at an LLVM {} prefix",
                self.config.display(),
                self.major,
                self.prefix_variable,
                self.major
            )
        });
        if !output.status.success() {
            panic!("{} {arguments:?} failed: {}", self.config.display(), String::from_utf8_lossy(&output.stderr));
        }
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }

    /// A C++ build against this LLVM's headers.
    fn cpp_build(&self) -> cc::Build {
        let mut build = cc::Build::new();
        build.cpp(true).flag("-isystem").flag(self.query(&["--includedir"])).flag("-std=c++17").flag("-fno-rtti").warnings(true);
        build
    }
}
