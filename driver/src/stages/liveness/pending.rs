//! Memory operations still in flight before each instruction, and the
//! registers they may yet write. A GFX9 load writes its registers when its
//! data returns; the program waits for it with `s_waitcnt` on the counter it
//! runs under (vmcnt for buffer, global, scratch and image memory, lgkmcnt
//! for LDS and scalar memory, both for flat). Code spliced before an
//! instruction that reads or writes such a register must first wait for
//! that counter; code that touches none of them need not wait at all, and
//! the application's loads stay in flight across it.
//!
//! A forward analysis over the function's blocks: a load adds the units it
//! writes to its counters' sets, an `s_waitcnt` that waits for a counter to
//! reach zero empties that set (a wait for a non-zero count keeps it: a
//! safe over-approximation), and blocks join by union. What is in flight
//! is unknown (every register, every counter) at a device function's entry
//! (its callers' loads), after a call, and everywhere in a function whose
//! flow leaves through registers or to unknown addresses. Exports and GDS
//! (expcnt) read their data registers late: after one, every counter is
//! waited for.

use super::{FunctionLiveness, UnitSet};
use crate::native::Operand;
use crate::stages::lift::{BlockExit, Flag, Flow, Function, Instruction, Isa};

/// The counters an `s_waitcnt` waits for, or a splice must.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Counters {
    pub vmcnt: bool,
    pub lgkmcnt: bool,
    pub expcnt: bool,
}

impl Counters {
    pub const ALL: Counters = Counters { vmcnt: true, lgkmcnt: true, expcnt: true };

    pub fn any(&self) -> bool {
        self.vmcnt || self.lgkmcnt || self.expcnt
    }

    /// The counters `s_waitcnt` with this (GFX9) immediate waits for to reach
    /// zero: vmcnt is bits 3:0 and 15:14, expcnt 6:4, lgkmcnt 11:8.
    pub fn zeroed_by(bits: i64) -> Counters {
        Counters {
            vmcnt: (bits & 0xf) | ((bits >> 10) & 0x30) == 0,
            expcnt: (bits >> 4) & 0x7 == 0,
            lgkmcnt: (bits >> 8) & 0xf == 0,
        }
    }

    /// The `s_waitcnt` that waits for these counters to reach zero.
    pub fn wait_instruction(&self) -> Option<String> {
        let fields: Vec<&str> = [(self.vmcnt, "vmcnt(0)"), (self.expcnt, "expcnt(0)"), (self.lgkmcnt, "lgkmcnt(0)")]
            .into_iter()
            .filter_map(|(on, field)| on.then_some(field))
            .collect();
        (!fields.is_empty()).then(|| format!("s_waitcnt {}", fields.join(" ")))
    }
}

/// What may still be in flight before an instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// Units loads under vmcnt may still write.
    pub vmcnt: UnitSet,
    /// Units loads under lgkmcnt may still write.
    pub lgkmcnt: UnitSet,
    /// An export or GDS operation may still read its data registers.
    pub expcnt: bool,
}

impl Pending {
    pub const NONE: Pending = Pending { vmcnt: UnitSet::EMPTY, lgkmcnt: UnitSet::EMPTY, expcnt: false };

    pub fn unknown() -> Pending {
        Pending { vmcnt: UnitSet::all(), lgkmcnt: UnitSet::all(), expcnt: true }
    }

    /// The counters code that reads or writes `touched` must wait for first.
    pub fn waits_for(&self, touched: &UnitSet) -> Counters {
        let touches_any = !touched.is_empty();
        let vmcnt = !self.vmcnt.intersection(touched).is_empty();
        let lgkmcnt = !self.lgkmcnt.intersection(touched).is_empty();
        if self.expcnt && touches_any {
            return Counters::ALL;
        }
        Counters { vmcnt, lgkmcnt, expcnt: false }
    }

    /// What is left after an `s_waitcnt` that zeroes `counters`.
    pub fn after_wait(&mut self, counters: Counters) {
        if counters.vmcnt {
            self.vmcnt = UnitSet::EMPTY;
        }
        if counters.lgkmcnt {
            self.lgkmcnt = UnitSet::EMPTY;
        }
        if counters.expcnt {
            self.expcnt = false;
        }
    }

    fn join(&mut self, other: &Pending) -> bool {
        let before = self.clone();
        self.vmcnt.union_with(&other.vmcnt);
        self.lgkmcnt.union_with(&other.lgkmcnt);
        self.expcnt |= other.expcnt;
        *self != before
    }

    /// The state after `instruction`, which writes `defs`.
    pub fn step(&mut self, instruction: &Instruction, isa: &Isa, defs: &UnitSet) {
        if let Some(counters) = waitcnt(instruction, isa) {
            self.after_wait(counters);
            return;
        }
        if instruction.flow == Flow::Call {
            *self = Pending::unknown();
            return;
        }
        let counters = counters_of(instruction, isa);
        if counters.vmcnt {
            self.vmcnt.union_with(defs);
        }
        if counters.lgkmcnt {
            self.lgkmcnt.union_with(defs);
        }
        self.expcnt |= counters.expcnt;
    }
}

/// The counters an `s_waitcnt` zeroes, if the instruction is one.
pub fn waitcnt(instruction: &Instruction, isa: &Isa) -> Option<Counters> {
    if instruction.name(isa) != "S_WAITCNT" {
        return None;
    }
    match instruction.raw.operands.first() {
        Some(Operand::Immediate(bits)) => Some(Counters::zeroed_by(*bits)),
        _ => Some(Counters::default()),
    }
}

/// The counters an instruction's memory operation runs under.
pub fn counters_of(instruction: &Instruction, isa: &Isa) -> Counters {
    let has = |flag| isa.has_flag(instruction.opcode, flag);
    let name = instruction.name(isa);
    let flat = has(Flag::Flat) && !has(Flag::FlatGlobal) && !has(Flag::FlatScratch);
    let gds = name.starts_with("DS_GWS") || name.ends_with("_gds") || name.contains("_GDS");
    Counters {
        vmcnt: flat
            || has(Flag::FlatGlobal)
            || has(Flag::FlatScratch)
            || has(Flag::Mubuf)
            || has(Flag::Mtbuf)
            || has(Flag::Mimg),
        lgkmcnt: flat || has(Flag::Ds) || has(Flag::Smrd),
        expcnt: gds || name.starts_with("EXP"),
    }
}

/// Per instruction of `function` (in block order, as liveness counts):
/// what may be in flight before it.
pub fn pending_before(function: &Function, isa: &Isa, liveness: &FunctionLiveness) -> Vec<Pending> {
    let blocks = &function.blocks;
    let unknown_flow = blocks
        .iter()
        .any(|b| matches!(b.exit, BlockExit::Indirect | BlockExit::OutsideFunction | BlockExit::FallsOffTheEnd));
    let entry = if function.is_kernel() && !unknown_flow { Pending::NONE } else { Pending::unknown() };
    let mut starts = Vec::with_capacity(blocks.len());
    let mut first = 0;
    for block in blocks {
        starts.push(first);
        first += block.instructions.len();
    }
    let mut block_in: Vec<Option<Pending>> = vec![None; blocks.len()];
    if let Some(slot) = block_in.first_mut() {
        *slot = Some(entry.clone());
    }
    if unknown_flow {
        block_in.iter_mut().for_each(|slot| *slot = Some(Pending::unknown()));
    }
    // Blocks only reached from unknown places (no known predecessor) start unknown.
    let mut reached = vec![false; blocks.len()];
    if let Some(first) = reached.first_mut() {
        *first = true;
    }
    for block in blocks {
        for successor in &block.successors {
            reached[*successor] = true;
        }
    }
    for (slot, reached) in block_in.iter_mut().zip(&reached) {
        if !reached {
            *slot = Some(Pending::unknown());
        }
    }
    let mut work: Vec<usize> = (0..blocks.len()).filter(|b| block_in[*b].is_some()).rev().collect();
    while let Some(index) = work.pop() {
        let Some(mut state) = block_in[index].clone() else { continue };
        for (offset, instruction) in blocks[index].instructions.iter().enumerate() {
            state.step(instruction, isa, &liveness.defs[starts[index] + offset]);
        }
        for successor in &blocks[index].successors {
            let changed = match &mut block_in[*successor] {
                Some(existing) => existing.join(&state),
                empty => {
                    *empty = Some(state.clone());
                    true
                }
            };
            if changed && !work.contains(successor) {
                work.push(*successor);
            }
        }
    }
    let mut out = Vec::with_capacity(first);
    for (index, block) in blocks.iter().enumerate() {
        let mut state = block_in[index].clone().unwrap_or_else(Pending::unknown);
        for (offset, instruction) in block.instructions.iter().enumerate() {
            out.push(state.clone());
            state.step(instruction, isa, &liveness.defs[starts[index] + offset]);
        }
    }
    out
}
