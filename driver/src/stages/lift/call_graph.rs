//! The call graph: which functions a kernel's dispatch may run.

use super::LiftedCodeObject;

/// Instructions a kernel runs: its own and those of everything it may call.
pub fn reachable_functions(lifted: &LiftedCodeObject<'_>, kernel: usize) -> Vec<usize> {
    let mut seen = vec![false; lifted.functions.len()];
    let mut stack = vec![kernel];
    let mut out = Vec::new();
    while let Some(index) = stack.pop() {
        if std::mem::replace(&mut seen[index], true) {
            continue;
        }
        out.push(index);
        for call in &lifted.functions[index].calls {
            if let Some(callee) = call.target.and_then(|t| lifted.functions.iter().position(|f| f.address == t)) {
                stack.push(callee);
            }
        }
    }
    out
}

/// Per function, the kernels whose dispatches may run it: each kernel
/// reaches its own code and its calls' targets; a kernel that reaches a
/// call whose target is not known (an indirect call) may run any function.
pub fn kernels_that_may_run(lifted: &LiftedCodeObject<'_>) -> Vec<Vec<usize>> {
    let mut kernels = vec![Vec::new(); lifted.functions.len()];
    for kernel in lifted.functions.iter().enumerate().filter(|(_, f)| f.is_kernel()).map(|(k, _)| k) {
        let reached = reachable_functions(lifted, kernel);
        let unknown_call = reached
            .iter()
            .flat_map(|f| &lifted.functions[*f].calls)
            .any(|call| !call.target.is_some_and(|target| lifted.functions.iter().any(|f| f.address == target)));
        let functions: Vec<usize> = match unknown_call {
            true => (0..lifted.functions.len()).filter(|f| *f == kernel || !lifted.functions[*f].is_kernel()).collect(),
            false => reached,
        };
        for function in functions {
            kernels[function].push(kernel);
        }
    }
    kernels
}
