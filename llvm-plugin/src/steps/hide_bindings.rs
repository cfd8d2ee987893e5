//! Before any optimisation (the pipeline-start and full-LTO-early extension
//! points), calls to intrinsic bindings are pointed at external
//! declarations the optimiser knows nothing about, so that no binding body
//! is folded into its callers: HIP device compilation internalises the
//! `weak` binding, and IPSCCP then replaced `hwId() { return 0; }` by 0 and
//! deleted calls whose results nothing read. The embed pass puts the calls
//! back on the bindings (`restore`) before it clones the module, so the
//! device code still links and the clone's steps see the calls as written.

use gpuinstr_intrinsics::naming::INTRINSIC_ANNOTATION;

use crate::ir::{Function, Module};

/// The suffix of a binding's hidden stand-in.
pub const HIDDEN_SUFFIX: &str = ".gpuinstr.hidden";

/// Points every direct call of an annotated binding at its stand-in, an
/// external declaration with the binding's type and function attributes.
/// Returns how many calls moved.
pub fn hide(module: Module<'_>) -> usize {
    let mut moved = 0;
    let bindings: Vec<Function<'_>> = module
        .global_annotations()
        .into_iter()
        .filter(|a| a.text == INTRINSIC_ANNOTATION)
        .filter_map(|a| a.function)
        .collect();
    for binding in bindings {
        let calls = binding.call_sites();
        if calls.is_empty() {
            continue;
        }
        let hidden_name = format!("{}{HIDDEN_SUFFIX}", binding.name());
        let stand_in = match module.function(&hidden_name) {
            Some(existing) => existing,
            None => {
                let declared = module.declare_function(&hidden_name, binding.function_type());
                // convergent and the target attributes come along; a
                // declaration has no body for `noinline` to matter.
                declared.copy_function_attributes_from(binding);
                declared.remove_attribute("optnone");
                declared.remove_attribute("noinline");
                declared
            }
        };
        for call in calls {
            call.redirect_to(stand_in);
            moved += 1;
        }
    }
    moved
}

/// Puts the calls back on the bindings (a stand-in whose binding is gone
/// takes its name). Returns how many stand-ins there were.
pub fn restore(module: Module<'_>) -> usize {
    let mut restored = 0;
    for stand_in in module.functions() {
        let name = stand_in.name();
        let Some(original) = name.strip_suffix(HIDDEN_SUFFIX) else { continue };
        if !stand_in.is_declaration() {
            continue;
        }
        match module.function(original) {
            Some(binding) => {
                stand_in.replace_all_uses_with(binding);
                stand_in.erase();
            }
            None => stand_in.set_name(original),
        }
        restored += 1;
    }
    restored
}
