//! How hooks and intrinsics are marked and named in a tool's embedded module.

/// Function attribute on every hook of an embedded tool module.
pub const HOOK_ATTRIBUTE: &str = "gpuinstr_hook";

/// Function attribute on every intrinsic declaration; its value is the
/// intrinsic's qualified name (`gpuinstr::readReg`).
pub const INTRINSIC_ATTRIBUTE: &str = "gpuinstr_intrinsic";

/// The annotation strings `GPUINSTR_HOOK` and `GPUINSTR_INTRINSIC` attach.
pub const HOOK_ANNOTATION: &str = "gpuinstr_hook";
pub const INTRINSIC_ANNOTATION: &str = "gpuinstr_intrinsic";

/// The reserved managed variable of `GPUINSTR_DEVICE_MODULE`.
pub const RESERVED_VARIABLE: &str = "__gpuinstr_reserved";

/// Prefix of the host-handle kernels of `GPUINSTR_EXPORT_HOOK_HANDLE`.
pub const HOOK_HANDLE_PREFIX: &str = "__gpuinstr_hook_handle_";

/// Section holding the embedded tool module in a tool's device code object.
pub const EMBEDDED_SECTION: &str = ".llvmbc";

/// Name of the global holding the embedded module in the tool's IR.
pub const EMBEDDED_GLOBAL: &str = "gpuinstr.embedded.tool";

/// The IR function name of an intrinsic: its qualified name, then the
/// return type (`void` when there is none), then each argument type, joined
/// by dots. Types use LLVM's intrinsic spelling (`i32`, `f32`, `p4`, `v2i32`),
/// so `T gpuinstr::readReg<uint32_t>(Reg)` is `gpuinstr::readReg.i32.i32` and
/// `void gpuinstr::writeExec(uint64_t)` is `gpuinstr::writeExec.void.i64`.
pub fn intrinsic_function_name(qualified_name: &str, return_type: &str, argument_types: &[String]) -> String {
    let mut name = format!("{qualified_name}.{return_type}");
    for argument in argument_types {
        name.push('.');
        name.push_str(argument);
    }
    name
}

/// Splits an intrinsic function name into its qualified name and type list,
/// given the qualified name from its attribute.
pub fn intrinsic_types<'a>(function_name: &'a str, qualified_name: &str) -> Option<Vec<&'a str>> {
    let rest = function_name.strip_prefix(qualified_name)?.strip_prefix('.')?;
    Some(rest.split('.').collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_return_and_argument_types() {
        assert_eq!(intrinsic_function_name("gpuinstr::readReg", "i32", &["i32".into()]), "gpuinstr::readReg.i32.i32");
        assert_eq!(
            intrinsic_function_name("gpuinstr::writeExec", "void", &["i64".into()]),
            "gpuinstr::writeExec.void.i64"
        );
        assert_eq!(intrinsic_function_name("gpuinstr::workgroupIdX", "i32", &[]), "gpuinstr::workgroupIdX.i32");
    }

    #[test]
    fn names_split_back_into_types() {
        assert_eq!(
            intrinsic_types("gpuinstr::sAtomicAdd.void.p0.i64", "gpuinstr::sAtomicAdd"),
            Some(vec!["void", "p0", "i64"])
        );
        assert_eq!(intrinsic_types("gpuinstr::readReg.i32.i32", "gpuinstr::writeReg"), None);
    }
}
