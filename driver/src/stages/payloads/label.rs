//! How messages and text forms name a point: "kernel k, instruction 3
//! (S_LOAD_DWORDX2_IMM)". Tensile's kernel names run to 600 characters and
//! its code objects to millions of points, so a label holds its function's
//! and opcode's names shared, and is written out only where it is shown.

use std::sync::Arc;

use crate::stages::lift::{Function, LiftedCodeObject};
use crate::stages::payload::PayloadPoint;

/// A point's name in messages ([`std::fmt::Display`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PointLabel {
    /// "kernel NAME" or "function NAME".
    function: Arc<str>,
    instruction: usize,
    opcode: Arc<str>,
}

impl std::fmt::Display for PointLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}, instruction {} ({})", self.function, self.instruction, self.opcode)
    }
}

impl PointLabel {
    /// The label of instruction `instruction` of a kernel named `kernel`.
    pub fn in_kernel(kernel: &str, instruction: usize, opcode: &str) -> PointLabel {
        PointLabel { function: format!("kernel {kernel}").into(), instruction, opcode: opcode.into() }
    }
}

fn function_text(function: &Function) -> String {
    let kind = if function.is_kernel() { "kernel" } else { "function" };
    format!("{kind} {}", function.name)
}

/// Labels that share their functions' and opcodes' names (each function's
/// instructions indexed once: finding the nth walks its blocks).
#[derive(Default)]
pub struct Labeller<'l> {
    functions: rustc_hash::FxHashMap<usize, (Arc<str>, Vec<&'l str>)>,
    opcodes: rustc_hash::FxHashMap<&'l str, Arc<str>>,
}

impl<'l> Labeller<'l> {
    /// The label of `point`, or why it names no instruction.
    pub fn label(&mut self, lifted: &'l LiftedCodeObject<'_>, point: &PayloadPoint) -> Result<PointLabel, String> {
        let function = lifted.functions.get(point.function).ok_or("no such function")?;
        let (text, names) = self.functions.entry(point.function).or_insert_with(|| {
            (function_text(function).into(), function.instructions().map(|i| i.name(&lifted.isa)).collect())
        });
        let name = names
            .get(point.instruction)
            .ok_or_else(|| format!("{} has no instruction {}", function.name, point.instruction))?;
        let opcode = self.opcodes.entry(name).or_insert_with(|| Arc::from(*name)).clone();
        Ok(PointLabel { function: text.clone(), instruction: point.instruction, opcode })
    }
}
