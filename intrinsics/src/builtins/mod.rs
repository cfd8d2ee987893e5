//! The built-in intrinsics every tool can call, and the kernel-state
//! `llvm.amdgcn.*` intrinsics the plugin rewrites into them. One file per
//! lowering; the kernel-state ones share one.

pub mod kernel_state;
pub mod point_constant;
pub mod read_reg;
pub mod s_atomic_add;
pub mod write_exec;
pub mod write_reg;

use crate::lowering::Intrinsic;

/// The lowering of every built-in.
pub fn lowerings() -> Vec<Box<dyn Intrinsic>> {
    let mut all: Vec<Box<dyn Intrinsic>> = vec![
        Box::new(read_reg::ReadReg),
        Box::new(write_reg::WriteReg),
        Box::new(write_exec::WriteExec),
        Box::new(s_atomic_add::SAtomicAdd),
        Box::new(kernel_state::ImplicitArgPtr),
    ];
    for state in kernel_state::KERNEL_STATE {
        all.push(Box::new(kernel_state::KernelState { name: state.name, argument: state.argument }));
    }
    all
}

/// The driver's own intrinsics: lowered like the built-ins, but not for
/// tools (the SDK does not declare them).
pub fn internal_lowerings() -> Vec<Box<dyn Intrinsic>> {
    vec![Box::new(point_constant::PointConstant)]
}

/// A built-in intrinsic binding declared in `hook-sdk/include/gpuinstr/gpuinstr.h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuiltinIntrinsic {
    /// Qualified name, as in the `gpuinstr_intrinsic` attribute.
    pub name: &'static str,
    /// The C++ declaration tool authors see.
    pub signature: &'static str,
    pub summary: &'static str,
}

macro_rules! builtin {
    ($name:literal, $signature:literal, $summary:literal) => {
        BuiltinIntrinsic { name: $name, signature: $signature, summary: $summary }
    };
}

/// Every built-in intrinsic, in the order docs/intrinsics.md lists them.
pub const BUILTIN_INTRINSICS: &[BuiltinIntrinsic] = &[
    builtin!(
        "gpuinstr::readReg",
        "template <typename T> T readReg(Reg)",
        "value of an application register at the instrumentation point"
    ),
    builtin!("gpuinstr::writeReg", "template <typename T> void writeReg(Reg, T)", "writes an application register"),
    builtin!("gpuinstr::writeExec", "void writeExec(uint64_t)", "sets EXEC for the rest of the hook"),
    builtin!(
        "gpuinstr::sAtomicAdd",
        "template <typename T> void sAtomicAdd(T *, T)",
        "scalar atomic add to global memory"
    ),
    builtin!("gpuinstr::implicitArgPtr", "const void *implicitArgPtr()", "start of the kernel's hidden arguments"),
    builtin!("gpuinstr::kernargPtr", "const void *kernargPtr()", "start of the kernel argument segment"),
    builtin!("gpuinstr::dispatchPtr", "const void *dispatchPtr()", "the AQL dispatch packet"),
    builtin!("gpuinstr::queuePtr", "const void *queuePtr()", "the AQL queue"),
    builtin!("gpuinstr::implicitBufferPtr", "const void *implicitBufferPtr()", "the implicit buffer pointer"),
    builtin!("gpuinstr::dispatchId", "uint64_t dispatchId()", "the 64-bit dispatch id"),
    builtin!("gpuinstr::ldsKernelId", "uint32_t ldsKernelId()", "the kernel id used for LDS lookup"),
    builtin!("gpuinstr::workgroupIdX", "uint32_t workgroupIdX()", "workgroup id, x"),
    builtin!("gpuinstr::workgroupIdY", "uint32_t workgroupIdY()", "workgroup id, y"),
    builtin!("gpuinstr::workgroupIdZ", "uint32_t workgroupIdZ()", "workgroup id, z"),
    builtin!("gpuinstr::workitemIdX", "uint32_t workitemIdX()", "work-item id in the workgroup, x"),
    builtin!("gpuinstr::workitemIdY", "uint32_t workitemIdY()", "work-item id in the workgroup, y"),
    builtin!("gpuinstr::workitemIdZ", "uint32_t workitemIdZ()", "work-item id in the workgroup, z"),
];

/// `(llvm.amdgcn intrinsic, gpuinstr intrinsic)`: the amdgcn intrinsics whose
/// value depends on the kernel's launch state. In a hook they would read the
/// state of a payload function, not of the instrumented kernel, so the plugin
/// rewrites each call into the framework intrinsic that gpuinstr-link lowers
/// through the State Value Array.
pub const AMDGCN_SUBSTITUTIONS: &[(&str, &str)] = &[
    ("llvm.amdgcn.implicitarg.ptr", "gpuinstr::implicitArgPtr"),
    ("llvm.amdgcn.kernarg.segment.ptr", "gpuinstr::kernargPtr"),
    ("llvm.amdgcn.dispatch.ptr", "gpuinstr::dispatchPtr"),
    ("llvm.amdgcn.queue.ptr", "gpuinstr::queuePtr"),
    ("llvm.amdgcn.implicit.buffer.ptr", "gpuinstr::implicitBufferPtr"),
    ("llvm.amdgcn.dispatch.id", "gpuinstr::dispatchId"),
    ("llvm.amdgcn.lds.kernel.id", "gpuinstr::ldsKernelId"),
    ("llvm.amdgcn.workgroup.id.x", "gpuinstr::workgroupIdX"),
    ("llvm.amdgcn.workgroup.id.y", "gpuinstr::workgroupIdY"),
    ("llvm.amdgcn.workgroup.id.z", "gpuinstr::workgroupIdZ"),
    ("llvm.amdgcn.workitem.id.x", "gpuinstr::workitemIdX"),
    ("llvm.amdgcn.workitem.id.y", "gpuinstr::workitemIdY"),
    ("llvm.amdgcn.workitem.id.z", "gpuinstr::workitemIdZ"),
];

/// The built-in with this qualified name.
pub fn builtin(name: &str) -> Option<&'static BuiltinIntrinsic> {
    BUILTIN_INTRINSICS.iter().find(|b| b.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_substitution_targets_a_builtin() {
        for (llvm_name, ours) in AMDGCN_SUBSTITUTIONS {
            assert!(llvm_name.starts_with("llvm.amdgcn."), "{llvm_name}");
            assert!(builtin(ours).is_some(), "{llvm_name} maps to unknown {ours}");
        }
    }

    /// Every built-in has a lowering, and every lowering is a documented built-in.
    #[test]
    fn every_builtin_has_a_lowering() {
        let lowered: Vec<String> = lowerings().iter().map(|l| l.name().to_string()).collect();
        for b in BUILTIN_INTRINSICS {
            assert!(lowered.iter().any(|n| n == b.name), "{} has no lowering", b.name);
        }
        for name in &lowered {
            assert!(builtin(name).is_some(), "{name} is lowered but not in BUILTIN_INTRINSICS");
        }
        assert_eq!(lowered.len(), BUILTIN_INTRINSICS.len());
    }

    #[test]
    fn builtin_names_are_unique() {
        let mut names: Vec<_> = BUILTIN_INTRINSICS.iter().map(|b| b.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), BUILTIN_INTRINSICS.len());
    }

    /// The SDK header declares every built-in (and nothing we do not know).
    #[test]
    fn sdk_header_declares_every_builtin() {
        let header = include_str!("../../../hook-sdk/include/gpuinstr/gpuinstr.h");
        for b in BUILTIN_INTRINSICS {
            let short = b.name.strip_prefix("gpuinstr::").unwrap();
            let declared = header.lines().any(|l| {
                l.contains("GPUINSTR_INTRINSIC") && l.contains(&format!(" {short}("))
                    || l.contains(&format!("*{short}("))
            });
            assert!(declared, "gpuinstr.h does not declare {}", b.name);
        }
        let declared_count =
            header.lines().filter(|l| l.contains("GPUINSTR_INTRINSIC ") && !l.trim_start().starts_with('#')).count();
        assert_eq!(declared_count, BUILTIN_INTRINSICS.len(), "gpuinstr.h declares intrinsics the table lacks");
    }

    /// docs/intrinsics.md lists every built-in and every substitution.
    #[test]
    fn docs_list_every_builtin_and_substitution() {
        let docs = include_str!("../../../docs/intrinsics.md");
        for b in BUILTIN_INTRINSICS {
            assert!(docs.contains(&format!("`{}`", b.name)), "docs/intrinsics.md lacks {}", b.name);
        }
        for (llvm_name, _) in AMDGCN_SUBSTITUTIONS {
            assert!(docs.contains(&format!("`{llvm_name}`")), "docs/intrinsics.md lacks {llvm_name}");
        }
    }
}
