//! Step 3: hooks become always-inline entry points of the module, and
//! `-O0`'s optnone goes so payloads are optimised at instrumentation time.

use gpuinstr_intrinsics::naming::{HOOK_ATTRIBUTE, HOOK_HANDLE_PREFIX, INTRINSIC_ATTRIBUTE};

use super::{display_name, Outcome, StepError};
use crate::ir::{Function, Module, TypeShape};

/// Names gpuinstr generates itself (payload functions, handles, intrinsics).
const RESERVED_PREFIXES: [&str; 3] = ["__gpuinstr", "gpuinstr", "llvm."];

fn validate<'m>(hook: Function<'m>) -> Option<StepError<'m>> {
    let name = hook.name();
    let shown = display_name(&hook);
    let problem = if hook.is_kernel() {
        format!("hook `{shown}` is a kernel (__global__); hooks are device functions: declare it with GPUINSTR_HOOK")
    } else if name.starts_with("_Z") {
        format!(
            "hook `{shown}` is not extern \"C\" (its symbol is `{name}`); hooks are found by their plain name: \
             declare it with GPUINSTR_HOOK, which gives it C linkage"
        )
    } else if let Some(prefix) = RESERVED_PREFIXES.iter().find(|p| name.starts_with(*p)) {
        format!("hook `{shown}` uses the reserved name prefix `{prefix}`; rename the hook")
    } else if hook.string_attribute(INTRINSIC_ATTRIBUTE).is_some() {
        // Reported by collect-annotations; nothing more to say here.
        return None;
    } else if hook.is_declaration() {
        format!("hook `{shown}` is declared but not defined in this translation unit; define the hook where it is annotated")
    } else if hook.function_type().return_type().shape() != TypeShape::Void {
        format!("hook `{shown}` returns a value; hooks return void (GPUINSTR_HOOK declares them so)")
    } else if hook.function_type().is_var_arg() {
        format!("hook `{shown}` takes variable arguments; hooks take a fixed list of constants and register values")
    } else {
        return None;
    };
    Some(StepError::in_function(hook, format!("gpuinstr: {problem}")))
}

pub fn run(module: Module<'_>) -> Outcome<'_> {
    let mut outcome = Outcome::default();
    for function in module.functions() {
        if function.string_attribute(HOOK_ATTRIBUTE).is_some() {
            if let Some(error) = validate(function) {
                outcome.errors.push(error);
                continue;
            }
            if function.name().starts_with(HOOK_HANDLE_PREFIX) {
                continue;
            }
            function.remove_attribute("optnone");
            function.remove_attribute("noinline");
            function.add_attribute("alwaysinline");
            function.make_external();
            outcome.changed = true;
        } else if !function.is_declaration() && !function.is_kernel() && function.has_attribute("optnone") {
            // Compiled at -O0: let the instrumentation-time optimiser at it.
            function.remove_attribute("optnone");
            function.remove_attribute("noinline");
            outcome.changed = true;
        }
    }
    outcome
}
