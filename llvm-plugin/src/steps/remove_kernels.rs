//! Step 5: kernels go. A tool's kernels are the hook-handle stubs of
//! GPUINSTR_EXPORT_HOOK_HANDLE (and any kernel the tool itself launches);
//! none of them belongs in instrumentation code.

use super::Outcome;
use crate::ir::Module;

pub fn run(module: Module<'_>) -> Outcome<'_> {
    let mut outcome = Outcome::default();
    for function in module.functions() {
        if function.is_kernel() {
            function.erase();
            outcome.changed = true;
        }
    }
    outcome
}
