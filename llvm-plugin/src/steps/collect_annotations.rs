//! Step 1: hooks and intrinsics from `llvm.global.annotations` become
//! function attributes; the annotation list and the `llvm.used` lists go.

use gpuinstr_intrinsics::naming::{HOOK_ANNOTATION, HOOK_ATTRIBUTE, INTRINSIC_ANNOTATION, INTRINSIC_ATTRIBUTE};

use super::{display_name, Outcome, StepError};
use crate::ir::Module;

pub fn run(module: Module<'_>) -> Outcome<'_> {
    let mut outcome = Outcome::default();
    for annotation in module.global_annotations() {
        let is_ours = annotation.text == HOOK_ANNOTATION || annotation.text == INTRINSIC_ANNOTATION;
        let Some(function) = annotation.function else {
            if is_ours {
                // No function to attach the diagnostic to: the message
                // carries the place clang recorded in the annotation.
                let place = annotation.location.as_ref().map(|l| format!(" at {l}")).unwrap_or_default();
                module.report_error(
                    None,
                    None,
                    &format!(
                        "gpuinstr: a non-function value{place} is annotated `{}`; only device functions can be hooks or intrinsics",
                        annotation.text
                    ),
                );
            }
            continue;
        };
        if annotation.text == HOOK_ANNOTATION {
            function.set_string_attribute(HOOK_ATTRIBUTE, "");
            outcome.changed = true;
        } else if annotation.text == INTRINSIC_ANNOTATION {
            let name = function.name();
            let qualified = Module::demangle_qualified_name(&name).unwrap_or(name);
            function.set_string_attribute(INTRINSIC_ATTRIBUTE, &qualified);
            outcome.changed = true;
        }
        if function.string_attribute(HOOK_ATTRIBUTE).is_some()
            && function.string_attribute(INTRINSIC_ATTRIBUTE).is_some()
        {
            outcome.errors.push(StepError::in_function(
                function,
                format!(
                    "gpuinstr: `{}` is annotated both as a hook and as an intrinsic; use either GPUINSTR_HOOK or GPUINSTR_INTRINSIC",
                    display_name(&function)
                ),
            ));
        }
    }

    for list in ["llvm.global.annotations", "llvm.used", "llvm.compiler.used"] {
        if let Some(global) = module.global(list) {
            global.erase();
            outcome.changed = true;
        }
    }
    // The annotation strings and file names, now unused.
    for global in module.globals() {
        if global.section().as_deref() == Some("llvm.metadata") && !global.has_uses() {
            global.erase();
        }
    }
    outcome
}
