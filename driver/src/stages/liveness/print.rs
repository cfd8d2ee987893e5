//! The liveness stage's text form (`gpuinstr-link instrument --dump-after
//! liveness`): per function, each instruction (numbered as `lift --emit
//! mir` numbers them) with the registers live before it.

use std::fmt::Write;

use super::Liveness;
use crate::stages::lift::LiftedCodeObject;

pub fn render(lifted: &LiftedCodeObject<'_>, liveness: &Liveness) -> String {
    let mut out = String::new();
    for (function, live) in lifted.functions.iter().zip(&liveness.functions) {
        writeln!(out, "{} {}", if function.is_kernel() { "kernel" } else { "function" }, function.name).unwrap();
        for (index, instruction) in function.instructions().enumerate() {
            let before = live.live_in.get(index).map(|set| set.to_string()).unwrap_or_default();
            writeln!(
                out,
                "  {index:>5} {:#08x} {:<28} live: {before}",
                instruction.address,
                instruction.name(&lifted.isa)
            )
            .unwrap();
        }
    }
    out
}
