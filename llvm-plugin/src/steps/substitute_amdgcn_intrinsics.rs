//! Step 7: amdgcn intrinsics that read the kernel's launch state
//! (`llvm.amdgcn.implicitarg.ptr`, `workgroup.id.*`, ...) would read the
//! state of a payload function, which has none. Each call becomes a call to
//! the framework intrinsic gpuinstr-link lowers through the State Value
//! Array, so `blockDim`, `gridDim`, `blockIdx` and `threadIdx` work in hooks.

use gpuinstr_intrinsics::builtins::AMDGCN_SUBSTITUTIONS;
use gpuinstr_intrinsics::naming::INTRINSIC_ATTRIBUTE;

use super::rename_intrinsics::ir_name;
use super::{Outcome, StepError};
use crate::ir::Module;

pub fn run(module: Module<'_>) -> Outcome<'_> {
    let mut outcome = Outcome::default();
    for (llvm_name, ours) in AMDGCN_SUBSTITUTIONS {
        let Some(intrinsic) = module.function(llvm_name) else {
            continue;
        };
        let name = match ir_name(&intrinsic, ours) {
            Ok(name) => name,
            Err(problem) => {
                outcome.errors.push(StepError::in_function(intrinsic, format!("gpuinstr: internal error: {problem}")));
                continue;
            }
        };
        let replacement = module.declare_function(&name, intrinsic.function_type());
        // Same value, same semantics: pure and per-wave.
        replacement.copy_function_attributes_from(intrinsic);
        replacement.set_string_attribute(INTRINSIC_ATTRIBUTE, ours);
        for call in intrinsic.call_sites() {
            call.replace_with_call_to(replacement);
        }
        if !intrinsic.has_uses() {
            intrinsic.erase();
        }
        outcome.changed = true;
    }
    outcome
}
