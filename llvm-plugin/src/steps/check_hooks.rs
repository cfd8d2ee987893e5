//! Step 2: hooks and every function they call must be free of inline
//! assembly: gpuinstr allocates registers around the application's live
//! registers, and the registers an asm statement touches cannot be known
//! before the very end of code generation. Framework intrinsics replace
//! inline assembly in hooks.

use std::collections::{HashMap, HashSet};

use gpuinstr_intrinsics::naming::{HOOK_ATTRIBUTE, INTRINSIC_ATTRIBUTE};

use super::{display_name, Outcome, StepError};
use crate::ir::{Callee, Function, Module};

pub fn run(module: Module<'_>) -> Outcome<'_> {
    let mut outcome = Outcome::default();
    let hooks: Vec<Function> =
        module.functions().into_iter().filter(|f| f.string_attribute(HOOK_ATTRIBUTE).is_some()).collect();

    // Each function is searched once; the first hook reaching it names the path.
    let mut visited: HashSet<String> = HashSet::new();
    for hook in hooks {
        let mut stack = vec![(hook, vec![display_name(&hook)])];
        let mut parents: HashMap<String, Vec<String>> = HashMap::new();
        while let Some((function, path)) = stack.pop() {
            if !visited.insert(function.name()) {
                continue;
            }
            parents.insert(function.name(), path.clone());
            for call in function.calls() {
                match call.callee() {
                    Callee::InlineAsm => {
                        let place = call
                            .location()
                            .or_else(|| function.location())
                            .map(|l| format!(" at {l}"))
                            .unwrap_or_default();
                        let via = if path.len() == 1 {
                            format!("hook `{}` uses inline assembly{place}", path[0])
                        } else {
                            format!(
                                "hook `{}` calls `{}` (via {}), which uses inline assembly{place}",
                                path[0],
                                path.last().expect("path has the hook"),
                                path.join(" -> ")
                            )
                        };
                        outcome.errors.push(StepError::at_call(
                            function,
                            call,
                            format!(
                                "gpuinstr: {via}; hooks and the functions they call must not use inline assembly \
                                 because its register use cannot be analysed: use a gpuinstr intrinsic instead \
                                 (see docs/intrinsics.md)"
                            ),
                        ));
                    }
                    Callee::Function(callee) => {
                        if callee.is_declaration() || callee.string_attribute(INTRINSIC_ATTRIBUTE).is_some() {
                            continue;
                        }
                        let mut callee_path = path.clone();
                        callee_path.push(display_name(&callee));
                        stack.push((callee, callee_path));
                    }
                    Callee::Indirect => {}
                }
            }
        }
    }
    outcome
}
