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

use crate::native::Operand;
use crate::stages::lift::{Flow, Function, Instruction, Isa};

use super::units::{RegisterUnits, Unit, UnitSet};

/// The state before an instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    full: bool,
    /// SGPR pairs (canonical LLVM registers) holding a copy of a full mask.
    full_copies: Vec<u32>,
}

impl State {
    fn meet(&self, other: &State) -> State {
        State {
            full: self.full && other.full,
            full_copies: self.full_copies.iter().copied().filter(|c| other.full_copies.contains(c)).collect(),
        }
    }
}

/// What the transfer function needs, looked up once.
struct Context<'a> {
    isa: &'a Isa,
    units: &'a RegisterUnits,
    exec_reg: Option<u32>,
    exec_units: UnitSet,
}

fn register_operand(instruction: &Instruction, isa: &Isa, index: usize) -> Option<u32> {
    match instruction.raw.operands.get(index) {
        Some(Operand::Register(reg)) => Some(isa.canonical(*reg)),
        _ => None,
    }
}

fn transfer(context: &Context<'_>, instruction: &Instruction, state: &mut State, call_clobbers: &dyn Fn() -> UnitSet) {
    let Context { isa, units, exec_reg, exec_units: exec } = context;
    let name = isa.opcode_name(instruction.opcode);
    let operand = |index| register_operand(instruction, isa, index);
    let defines_exec = instruction.all_defs().any(|r| units.units(r).iter().any(|u| exec.contains(*u)));
    let was_full = state.full;
    let held_full: Vec<bool> =
        [1, 2].iter().map(|i| operand(*i).is_some_and(|r| state.full_copies.contains(&r))).collect();

    // Saved masks: a pair written by anything else loses its copy.
    if !state.full_copies.is_empty() {
        let written: UnitSet = instruction.all_defs().flat_map(|r| units.units(r).iter().copied()).collect();
        let clobbered = if instruction.flow == Flow::Call { written.union(&call_clobbers()) } else { written };
        state.full_copies.retain(|pair| units.units(*pair).iter().all(|u| !clobbered.contains(*u)));
    }

    if name.ends_with("_SAVEEXEC_B64") {
        // dst = old EXEC; EXEC = op(old EXEC, src).
        if let Some(dst) = operand(0) {
            if was_full && !state.full_copies.contains(&dst) {
                state.full_copies.push(dst);
            }
        }
        state.full = name == "S_OR_SAVEEXEC_B64" && (was_full || held_full[0]);
        return;
    }
    if !defines_exec {
        // Copies of a full EXEC.
        if name == "S_MOV_B64" && was_full && operand(1) == *exec_reg {
            if let Some(dst) = operand(0) {
                if !state.full_copies.contains(&dst) {
                    state.full_copies.push(dst);
                }
            }
        }
        return;
    }
    let to_exec = operand(0) == *exec_reg;
    state.full = match name {
        "S_MOV_B64" if to_exec => {
            held_full[0] || matches!(instruction.raw.operands.get(1), Some(Operand::Immediate(-1)))
        }
        "S_OR_B64" if to_exec => {
            held_full[0] || held_full[1] || (was_full && [operand(1), operand(2)].contains(exec_reg))
        }
        _ => false,
    };
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
    let context = Context {
        isa,
        units,
        exec_reg: isa.register_by_name("EXEC"),
        exec_units: [Unit::special("EXEC_LO"), Unit::special("EXEC_HI")].into_iter().collect(),
    };
    let blocks = &function.blocks;
    let mut predecessors = vec![Vec::new(); blocks.len()];
    for block in blocks {
        for successor in &block.successors {
            predecessors[*successor].push(block.index);
        }
    }
    let partial = State { full: false, full_copies: Vec::new() };
    let mut block_in: Vec<Option<State>> = vec![None; blocks.len()];
    let mut block_out: Vec<Option<State>> = vec![None; blocks.len()];
    block_in[0] = Some(State { full: entry_full, full_copies: Vec::new() });
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
                transfer(&context, instruction, &mut state, &|| call_clobbers(instruction.address));
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
            transfer(&context, instruction, &mut state, &|| call_clobbers(instruction.address));
        }
    }
    full
}
