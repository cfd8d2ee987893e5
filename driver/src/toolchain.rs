//! The toolchain this build of gpuinstr works with: the LLVM it was built
//! against (one per build, chosen by a Cargo feature: docs/toolchains.md)
//! and where that LLVM's own tools are. Payloads are compiled by that LLVM's
//! llc, assembled by its llvm-mc and linked by its ld.lld or the CoMGR this
//! build compiled against, so that one build never mixes two LLVMs.

use std::path::PathBuf;
use std::process::Command;

/// The LLVM major this build is for (15, 17 or 21).
pub const LLVM_MAJOR: u32 = parse_major(env!("GPUINSTR_LLVM_MAJOR"));

/// The full LLVM version (`llvm-config --version`).
pub const LLVM_VERSION: &str = env!("GPUINSTR_LLVM_VERSION");

/// The directory of that LLVM's tools (`llvm-config --bindir`).
pub const LLVM_BINDIR: &str = env!("GPUINSTR_LLVM_BINDIR");

/// The directory of that LLVM's libraries (`llvm-config --libdir`).
pub const LLVM_LIBDIR: &str = env!("GPUINSTR_LLVM_LIBDIR");

/// The CoMGR interface (amd_comgr.h) this build compiled against.
pub const COMGR_INTERFACE: (u32, u32) = crate::native::comgr::INTERFACE_VERSION;

const fn parse_major(text: &str) -> u32 {
    let bytes = text.as_bytes();
    let mut value = 0;
    let mut i = 0;
    while i < bytes.len() {
        value = value * 10 + (bytes[i] - b'0') as u32;
        i += 1;
    }
    value
}

/// One of that LLVM's tools (`llc`, `llvm-mc`, `ld.lld`, `clang++`, ...).
pub fn llvm_tool_path(name: &str) -> PathBuf {
    PathBuf::from(LLVM_BINDIR).join(name)
}

/// A command running one of that LLVM's tools.
pub fn llvm_tool(name: &str) -> Command {
    Command::new(llvm_tool_path(name))
}

/// Where the ROCm device libraries (`ocml.bc`, ...) for this LLVM's clang
/// are: Debian 12 ships them beside ROCm (`rocm-device-libs`), newer
/// Debian releases inside clang's resource directory.
pub fn rocm_device_library_dir() -> PathBuf {
    let beside_clang = PathBuf::from(LLVM_LIBDIR).join(format!("clang/{LLVM_MAJOR}/amdgcn/bitcode"));
    if beside_clang.join("ocml.bc").exists() {
        beside_clang
    } else {
        PathBuf::from("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode")
    }
}

/// The hipcc arguments for kernels launched on grids that end in partial
/// workgroups: clang 18+ marks HIP kernels `uniform_work_group_size` unless
/// told otherwise, and HIP 6.4's runtime then refuses such launches (tests
/// that build such kernels; hipcc is asked once whether it knows the flag).
pub fn hipcc_non_uniform_workgroups() -> &'static [&'static str] {
    static ARGUMENTS: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    ARGUMENTS.get_or_init(|| {
        let flag = "-fno-offload-uniform-block";
        let help = Command::new("hipcc").arg("--help").output();
        let knows = help.is_ok_and(|help| String::from_utf8_lossy(&help.stdout).contains(flag));
        if knows {
            vec![flag]
        } else {
            Vec::new()
        }
    })
}

/// The Cargo arguments that build another gpuinstr crate for the same
/// LLVM as this one (tests that build a binary they need).
pub fn cargo_feature_arguments() -> Vec<String> {
    if LLVM_MAJOR == 15 {
        Vec::new()
    } else {
        vec!["--no-default-features".into(), "--features".into(), format!("llvm{LLVM_MAJOR}")]
    }
}

/// One line for `--version` and reports: "LLVM 15.0.6 (/usr/lib/llvm-15/bin), CoMGR 2.4".
pub fn describe() -> String {
    format!("LLVM {LLVM_VERSION} ({LLVM_BINDIR}), CoMGR {}.{}", COMGR_INTERFACE.0, COMGR_INTERFACE.1)
}
