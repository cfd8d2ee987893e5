//! The embed pass: clone the tool's device module, run every step on the
//! clone, and put the clone's bitcode into the `.llvmbc` section of the
//! original module. The original compilation goes on undisturbed.

use gpuinstr_intrinsics::naming::{
    EMBEDDED_GLOBAL, EMBEDDED_SECTION, HOOK_ANNOTATION, HOOK_ATTRIBUTE, RESERVED_VARIABLE,
};

use crate::ir::Module;
use crate::steps::{hide_bindings, Step};

/// Whether this module is (part of) a gpuinstr tool: it has the reserved
/// variable of GPUINSTR_DEVICE_MODULE or at least one hook. Other modules
/// compiled with the plugin loaded are left alone.
pub fn is_tool_module(module: Module<'_>) -> bool {
    module.global(RESERVED_VARIABLE).is_some()
        || module.global_annotations().iter().any(|a| a.text == HOOK_ANNOTATION)
        || module.functions().iter().any(|f| f.string_attribute(HOOK_ATTRIBUTE).is_some())
}

/// The early pass (pipeline start, full LTO early): calls to intrinsic
/// bindings go to stand-ins the optimiser cannot see through
/// ([`crate::steps::hide_bindings`]). Returns whether the module changed.
pub fn hide_bindings(module: Module<'_>) -> bool {
    module.target_triple().starts_with("amdgcn") && is_tool_module(module) && hide_bindings::hide(module) > 0
}

/// Runs the embed pass; returns whether the module changed.
pub fn run(module: Module<'_>) -> bool {
    if !module.target_triple().starts_with("amdgcn") || !is_tool_module(module) {
        return false;
    }
    // The calls the early pass hid go back to their bindings, in the
    // module that is compiled on as in the clone.
    let restored = hide_bindings::restore(module) > 0;
    let foreign_bitcode = module.global("llvm.embedded.module").is_some()
        || module
            .globals()
            .iter()
            .any(|g| g.section().as_deref() == Some(EMBEDDED_SECTION) && !g.name().starts_with(EMBEDDED_GLOBAL));
    if foreign_bitcode {
        module.report_error(
            None,
            None,
            "gpuinstr: this device module already carries embedded bitcode (is -fembed-bitcode on?); \
             gpuinstr stores the tool's hooks in the .llvmbc section: remove -fembed-bitcode when compiling a tool",
        );
        return restored;
    }
    // A module linked from several already-embedded ones (-fgpu-rdc) gets
    // one fresh copy for the whole tool.
    let removed = module.remove_globals_with_prefix(EMBEDDED_GLOBAL);

    let mut clone = module.clone_module();
    let bitcode = {
        let tool = clone.module();
        let mut failed = false;
        for step in Step::PIPELINE {
            let outcome = step.run(tool);
            outcome.report(tool);
            failed |= !outcome.errors.is_empty();
        }
        if failed {
            return removed > 0 || restored;
        }
        if let Err(problem) = tool.verify() {
            module.report_error(
                None,
                None,
                &format!("gpuinstr: internal error: the preprocessed tool module is invalid IR: {problem}"),
            );
            return removed > 0 || restored;
        }
        tool.write_bitcode()
    };
    drop(clone);
    module.embed_buffer(EMBEDDED_GLOBAL, &bitcode, EMBEDDED_SECTION);
    true
}
