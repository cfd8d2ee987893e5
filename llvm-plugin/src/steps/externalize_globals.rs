//! Step 6: the tool's variables are defined by the tool's own code object
//! (or by gpuinstr-link in the instrumented one), so the embedded module only
//! declares them. Managed-variable storage (`*.managed`) stays declared
//! too: it tells gpuinstr-link that `NAME` is a pointer to be initialised
//! with the storage's address. The reserved variable and `llvm.metadata`
//! globals go. Constant data (string literals,
//! lookup tables, device-library constants) keeps its initializer: it is
//! never written, so a copy in the instrumented code object is the same data,
//! and payloads can fold it. `__hip_cuid_*` stays as it is.

use gpuinstr_intrinsics::naming::RESERVED_VARIABLE;

use super::Outcome;
use crate::ir::Module;

pub fn run(module: Module<'_>) -> Outcome<'_> {
    let mut outcome = Outcome::default();
    for global in module.globals() {
        let name = global.name();
        if name.starts_with("llvm.") || name.starts_with("__hip_cuid_") {
            continue;
        }
        let metadata = global.section().as_deref() == Some("llvm.metadata");
        let reserved = name == RESERVED_VARIABLE || name.strip_suffix(".managed") == Some(RESERVED_VARIABLE);
        let removable = metadata || reserved;
        if removable && !global.has_uses() {
            global.erase();
            outcome.changed = true;
        } else if !metadata && (removable || name.ends_with(".managed") || !global.is_constant_data()) {
            global.make_external_declaration();
            outcome.changed = true;
        }
    }
    outcome
}
