//! Where EXEC is provably "full": the kernel's entry mask (or a superset).
//!
//! A vector instruction writes only the lanes EXEC enables; the other lanes
//! keep their values, which may still be live (the `else` side of an if/else
//! reads them after the join). So a vector def kills a VGPR only where EXEC
//! is full. This forward must-analysis finds those places, following the
//! structurizer's idiom: `s_and_saveexec_b64 s[0:1], vcc` saves the full mask
//! in s[0:1] (EXEC becomes partial) and `s_or_b64 exec, exec, s[0:1]`
//! restores it. Lanes inactive at the kernel's entry never become active, so
//! the entry mask counts as full.

use std::collections::BTreeSet;

use crate::native::Operand;
use crate::stages::lift::{Flow, Function, Instruction, Isa};

use super::units::{RegisterUnits, Unit, UnitSet};

/// The state before an instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    full: bool,
    /// SGPR pairs (canonical LLVM registers) holding a copy of a full mask.
    full_copies: BTreeSet<u32>,
}

impl State {
    fn meet(&self, other: &State) -> State {
        State {
            full: self.full && other.full,
            full_copies: self.full_copies.intersection(&other.full_copies).copied().collect(),
        }
    }
}

fn exec_units() -> UnitSet {
    [Unit::special("EXEC_LO"), Unit::special("EXEC_HI")].into_iter().collect()
}

fn register_operand(instruction: &Instruction, isa: &Isa, index: usize) -> Option<u32> {
    match instruction.raw.operands.get(index) {
        Some(Operand::Register(reg)) => Some(isa.canonical(*reg)),
        _ => None,
    }
}

fn transfer(
    isa: &Isa,
    units: &RegisterUnits,
    instruction: &Instruction,
    state: &State,
    call_clobbers: &UnitSet,
) -> State {
    let exec_reg = isa.register_by_name("EXEC");
    let exec = exec_units();
    let name = isa.opcode_name(instruction.opcode);
    let mut next = state.clone();
    let operand = |index| register_operand(instruction, isa, index);
    let holds_full = |reg: Option<u32>| reg.is_some_and(|r| state.full_copies.contains(&r));
    let defines_exec = instruction.all_defs().any(|r| units.units(r).iter().any(|u| exec.contains(*u)));

    // Saved masks: a pair written by anything else loses its copy.
    let written: UnitSet = instruction.all_defs().flat_map(|r| units.units(r).iter().copied()).collect();
    next.full_copies.retain(|pair| units.units(*pair).iter().all(|u| !written.contains(*u)));
    if instruction.flow == Flow::Call {
        next.full_copies.retain(|pair| units.units(*pair).iter().all(|u| !call_clobbers.contains(*u)));
    }

    if name.ends_with("_SAVEEXEC_B64") {
        // dst = old EXEC; EXEC = op(old EXEC, src).
        if let Some(dst) = operand(0) {
            if state.full {
                next.full_copies.insert(dst);
            }
        }
        next.full = name == "S_OR_SAVEEXEC_B64" && (state.full || holds_full(operand(1)));
        return next;
    }
    if !defines_exec {
        // Copies of a full EXEC.
        if name == "S_MOV_B64" && state.full && operand(1) == exec_reg {
            if let Some(dst) = operand(0) {
                next.full_copies.insert(dst);
            }
        }
        return next;
    }
    let to_exec = operand(0) == exec_reg;
    next.full = match name {
        "S_MOV_B64" if to_exec => {
            holds_full(operand(1)) || matches!(instruction.raw.operands.get(1), Some(Operand::Immediate(-1)))
        }
        "S_OR_B64" if to_exec => {
            let sources = [operand(1), operand(2)];
            sources.iter().any(|s| holds_full(*s)) || (state.full && sources.contains(&exec_reg))
        }
        _ => false,
    };
    next
}

/// For each instruction of `function` (in `Function::instructions` order),
/// whether EXEC is full before it. `entry_full` is true for kernels; device
/// functions may be called under any mask. `call_clobbers` are the units a
/// call may write (callees' may-defs).
pub fn exec_full_before(
    isa: &Isa,
    units: &RegisterUnits,
    function: &Function,
    entry_full: bool,
    call_clobbers: &dyn Fn(u64) -> UnitSet,
) -> Vec<bool> {
    let blocks = &function.blocks;
    let mut predecessors = vec![Vec::new(); blocks.len()];
    for block in blocks {
        for successor in &block.successors {
            predecessors[*successor].push(block.index);
        }
    }
    let partial = State { full: false, full_copies: BTreeSet::new() };
    let mut block_in: Vec<Option<State>> = vec![None; blocks.len()];
    let mut block_out: Vec<Option<State>> = vec![None; blocks.len()];
    block_in[0] = Some(State { full: entry_full, full_copies: BTreeSet::new() });
    // Blocks only reachable through unknown edges start partial.
    for (index, preds) in predecessors.iter().enumerate() {
        if index > 0 && preds.is_empty() {
            block_in[index] = Some(partial.clone());
        }
    }
    let mut changed = true;
    while changed {
        changed = false;
        for block in blocks {
            let input = if block.index == 0 || predecessors[block.index].is_empty() {
                block_in[block.index].clone()
            } else {
                predecessors[block.index].iter().filter_map(|p| block_out[*p].clone()).reduce(|a, b| a.meet(&b))
            };
            let Some(mut state) = input else {
                continue;
            };
            if block.index == 0 {
                // The entry may also be a loop header.
                for p in &predecessors[0] {
                    if let Some(out) = &block_out[*p] {
                        state = state.meet(out);
                    }
                }
            }
            block_in[block.index] = Some(state.clone());
            for instruction in &block.instructions {
                state = transfer(isa, units, instruction, &state, &call_clobbers(instruction.address));
            }
            if block_out[block.index].as_ref() != Some(&state) {
                block_out[block.index] = Some(state);
                changed = true;
            }
        }
    }
    let mut full = Vec::new();
    for block in blocks {
        let mut state = block_in[block.index].clone().unwrap_or_else(|| partial.clone());
        for instruction in &block.instructions {
            full.push(state.full);
            state = transfer(isa, units, instruction, &state, &call_clobbers(instruction.address));
        }
    }
    full
}
