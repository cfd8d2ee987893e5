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
//! writes to its counters' sets, with how many operations of the counter
//! were issued after it; `s_waitcnt` with a count N keeps only what the N
//! youngest write (operations of a counter complete in order: vmcnt always,
//! lgkmcnt while no scalar-memory or flat operation is in flight, else only
//! a wait for zero counts), and blocks join by union, keeping the younger
//! age. What is in flight
//! is unknown (every register, vmcnt and lgkmcnt) at a device function's
//! entry (its callers' loads), after a call, and everywhere in a function
//! whose flow leaves through registers or to unknown addresses; expcnt too
//! only if some function of the code object exports or uses GDS (compute
//! code never does). Exports and GDS (expcnt) read their data registers
//! late: after one, every counter is waited for.

use super::{FunctionLiveness, RegisterFile, Unit, UnitSet};
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

    /// The `s_waitcnt` that waits for these counters to reach zero.
    pub fn wait_instruction(&self) -> Option<String> {
        let fields: Vec<&str> = [(self.vmcnt, "vmcnt(0)"), (self.expcnt, "expcnt(0)"), (self.lgkmcnt, "lgkmcnt(0)")]
            .into_iter()
            .filter_map(|(on, field)| on.then_some(field))
            .collect();
        (!fields.is_empty()).then(|| format!("s_waitcnt {}", fields.join(" ")))
    }
}

/// The counts an `s_waitcnt` waits for (GFX9 immediate: vmcnt is bits 3:0
/// and 15:14, expcnt 6:4, lgkmcnt 11:8): until at most that many
/// operations of each counter are outstanding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitCounts {
    pub vmcnt: u8,
    pub expcnt: u8,
    pub lgkmcnt: u8,
}

impl WaitCounts {
    pub fn decode(bits: i64) -> WaitCounts {
        WaitCounts {
            vmcnt: ((bits & 0xf) | ((bits >> 10) & 0x30)) as u8,
            expcnt: ((bits >> 4) & 0x7) as u8,
            lgkmcnt: ((bits >> 8) & 0xf) as u8,
        }
    }
}

/// Units one counter's operations may still write, each with how many
/// operations of that counter were issued after the one writing it (0:
/// the youngest). Operations of a counter complete in issue order (vmcnt;
/// lgkmcnt while only LDS operations are in flight), so a wait for N leaves
/// only the N youngest in flight.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InFlight {
    /// `(unit, younger operations)`, sorted by unit; the smallest count
    /// where paths join (the least certain to have landed).
    units: Vec<(Unit, u8)>,
    /// Every unit, of unknown age: at a device function's entry, after a
    /// call, where flow is unknown.
    every: bool,
    /// An operation that completes out of order is in flight (scalar memory
    /// or flat under lgkmcnt): only a wait for zero tells anything.
    out_of_order: bool,
}

impl InFlight {
    fn every() -> InFlight {
        InFlight { units: Vec::new(), every: true, out_of_order: true }
    }

    pub fn units(&self) -> UnitSet {
        if self.every {
            return UnitSet::all();
        }
        let mut set = UnitSet::EMPTY;
        for (unit, _) in &self.units {
            set.insert(*unit);
        }
        set
    }

    fn touches(&self, touched: &UnitSet) -> bool {
        if self.every {
            return !touched.is_empty();
        }
        self.units.iter().any(|(unit, _)| touched.contains(*unit))
    }

    /// An operation issued: older ones get one younger; what it writes is
    /// the youngest.
    fn issue(&mut self, writes: &UnitSet, out_of_order: bool) {
        for (_, younger) in &mut self.units {
            *younger = younger.saturating_add(1).min(MAX_COUNT);
        }
        self.out_of_order |= out_of_order;
        if self.every {
            return;
        }
        for unit in writes.iter() {
            match self.units.binary_search_by_key(&unit, |(u, _)| *u) {
                Ok(at) => self.units[at].1 = 0,
                Err(at) => self.units.insert(at, (unit, 0)),
            }
        }
    }

    /// A wait until at most `count` operations are outstanding.
    fn wait(&mut self, count: u8) {
        if count == 0 {
            *self = InFlight::default();
        } else if !self.out_of_order && !self.every {
            self.units.retain(|(_, younger)| *younger < count);
        }
    }

    fn join(&mut self, other: &InFlight) -> bool {
        let before = self.clone();
        self.every |= other.every;
        self.out_of_order |= other.out_of_order;
        if self.every {
            self.units.clear();
        } else {
            for (unit, younger) in &other.units {
                match self.units.binary_search_by_key(unit, |(u, _)| *u) {
                    Ok(at) => self.units[at].1 = self.units[at].1.min(*younger),
                    Err(at) => self.units.insert(at, (*unit, *younger)),
                }
            }
        }
        *self != before
    }

    fn is_empty(&self) -> bool {
        !self.every && self.units.is_empty()
    }
}

/// The largest count an `s_waitcnt` field holds (vmcnt's 6 bits).
const MAX_COUNT: u8 = 63;

/// What may still be in flight before an instruction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pending {
    pub vmcnt: InFlight,
    pub lgkmcnt: InFlight,
    /// An export or GDS operation may still read its data registers.
    pub expcnt: bool,
}

impl Pending {
    pub const NONE: Pending = Pending {
        vmcnt: InFlight { units: Vec::new(), every: false, out_of_order: false },
        lgkmcnt: InFlight { units: Vec::new(), every: false, out_of_order: false },
        expcnt: false,
    };

    /// Anything may be in flight; an export or GDS operation only if the
    /// code object issues any (`exports`: [`exports_anywhere`]), since
    /// what is unknown comes from its own callers and callees.
    pub fn unknown(exports: bool) -> Pending {
        Pending { vmcnt: InFlight::every(), lgkmcnt: InFlight::every(), expcnt: exports }
    }

    /// The counters code that reads or writes `touched` must wait for first
    /// (to zero: the code's own operations are not counted here).
    pub fn waits_for(&self, touched: &UnitSet) -> Counters {
        if self.expcnt && !touched.is_empty() {
            return Counters::ALL;
        }
        Counters { vmcnt: self.vmcnt.touches(touched), lgkmcnt: self.lgkmcnt.touches(touched), expcnt: false }
    }

    /// What is left after `s_waitcnt` with these counts.
    pub fn after_wait(&mut self, counts: WaitCounts) {
        self.vmcnt.wait(counts.vmcnt);
        self.lgkmcnt.wait(counts.lgkmcnt);
        if counts.expcnt == 0 {
            self.expcnt = false;
        }
    }

    /// Joins what may be in flight on another path in; whether it grew.
    pub fn join(&mut self, other: &Pending) -> bool {
        let vm = self.vmcnt.join(&other.vmcnt);
        let lgkm = self.lgkmcnt.join(&other.lgkmcnt);
        let exp = !self.expcnt && other.expcnt;
        self.expcnt |= other.expcnt;
        vm || lgkm || exp
    }

    /// The VGPRs and AGPRs a load may still write (every one where what is
    /// in flight is unknown). Liveness calls a load's registers dead where
    /// nothing reads them, on some path or on all: code that must keep a
    /// value in a register across instructions (the sliding SVA) never
    /// sits in these.
    pub fn vector_registers(&self) -> UnitSet {
        match self.vmcnt.every || self.lgkmcnt.every {
            true => vector_files(&UnitSet::all()),
            false => self.known_vector_registers(),
        }
    }

    /// The VGPRs and AGPRs known to be still written by a load (none where
    /// what is in flight is unknown): a payload's registers avoid these,
    /// and waits first for the rest ([`Pending::waits_for`]).
    pub fn known_vector_registers(&self) -> UnitSet {
        let mut set = UnitSet::EMPTY;
        for (unit, _) in self.vmcnt.units.iter().chain(&self.lgkmcnt.units) {
            set.insert(*unit);
        }
        vector_files(&set)
    }

    /// Nothing in flight.
    pub fn is_empty(&self) -> bool {
        self.vmcnt.is_empty() && self.lgkmcnt.is_empty() && !self.expcnt
    }

    /// The state after `instruction`, which writes `defs` (`exports`: as
    /// for [`Pending::unknown`]).
    pub fn step(&mut self, instruction: &Instruction, isa: &Isa, defs: &UnitSet, exports: bool) {
        if let Some(counts) = waitcnt(instruction, isa) {
            self.after_wait(counts);
            return;
        }
        if instruction.flow == Flow::Call {
            *self = Pending::unknown(exports);
            return;
        }
        let counters = counters_of(instruction, isa);
        if counters.vmcnt {
            self.vmcnt.issue(defs, false);
        }
        if counters.lgkmcnt {
            // Scalar memory and flat complete out of order under lgkmcnt.
            let out_of_order = counters.vmcnt || isa.has_flag(instruction.opcode, Flag::Smrd);
            self.lgkmcnt.issue(defs, out_of_order);
        }
        self.expcnt |= counters.expcnt;
    }
}

fn vector_files(set: &UnitSet) -> UnitSet {
    set.in_file(RegisterFile::Vgpr).union(&set.in_file(RegisterFile::Agpr))
}

/// The counts an `s_waitcnt` waits for, if the instruction is one (one
/// whose immediate cannot be read waits for nothing known).
pub fn waitcnt(instruction: &Instruction, isa: &Isa) -> Option<WaitCounts> {
    if instruction.name(isa) != "S_WAITCNT" {
        return None;
    }
    match instruction.raw.operands.first() {
        Some(Operand::Immediate(bits)) => Some(WaitCounts::decode(*bits)),
        _ => Some(WaitCounts { vmcnt: MAX_COUNT, expcnt: 7, lgkmcnt: 15 }),
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

/// Whether any function issues an export or a GDS operation (expcnt): if
/// none does, no caller or callee leaves one in flight. Compute code never
/// exports.
pub fn exports_anywhere(functions: &[Function], isa: &Isa) -> bool {
    functions.iter().flat_map(|f| f.instructions()).any(|i| counters_of(i, isa).expcnt)
}

/// Whether a jump through registers may land on `address` in `function`:
/// it is the target of a pc-relative computation there, or follows a call.
fn lands_indirectly(function: &Function, address: u64) -> bool {
    let mut instructions = function.instructions().peekable();
    while let Some(instruction) = instructions.next() {
        if instruction.pc_relative.as_ref().is_some_and(|pc| pc.target == address) {
            return true;
        }
        if instruction.flow == Flow::Call && instructions.peek().is_some_and(|next| next.address == address) {
            return true;
        }
    }
    false
}

/// Per instruction of `function` (in block order, as liveness counts):
/// what may be in flight before it (`exports`: [`exports_anywhere`] of its
/// code object).
pub fn pending_before(function: &Function, isa: &Isa, liveness: &FunctionLiveness, exports: bool) -> Vec<Pending> {
    let blocks = &function.blocks;
    let unknown_flow = blocks
        .iter()
        .any(|b| matches!(b.exit, BlockExit::Indirect | BlockExit::OutsideFunction | BlockExit::FallsOffTheEnd));
    // A wave starts a kernel with nothing in flight. Where the function
    // jumps through registers (a subroutine's `s_setpc_b64` return, in
    // hipBLASLt's kernels), it lands on an address a pc-relative
    // computation gave or after a call: the entry stays clean unless it is
    // one of those.
    let entry_clean = function.is_kernel() && (!unknown_flow || !lands_indirectly(function, function.address));
    let entry = if entry_clean { Pending::NONE } else { Pending::unknown(exports) };
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
        block_in.iter_mut().for_each(|slot| *slot = Some(Pending::unknown(exports)));
        if let (true, Some(slot)) = (entry_clean, block_in.first_mut()) {
            *slot = Some(Pending::NONE);
        }
    }
    // Blocks only reached from unknown places (no known predecessor) start
    // unknown; but the padding of a preload prologue never runs (it falls
    // through to where the hardware enters the kernel with nothing in
    // flight).
    let mut reached = vec![false; blocks.len()];
    if let Some(first) = reached.first_mut() {
        *first = true;
    }
    for block in blocks {
        for successor in &block.successors {
            reached[*successor] = true;
        }
    }
    let hardware_entry = function.entry_address();
    for ((slot, reached), block) in block_in.iter_mut().zip(&reached).zip(blocks) {
        if !reached {
            let padding = function.entry > 0 && block.address < hardware_entry;
            *slot = Some(if padding { Pending::NONE } else { Pending::unknown(exports) });
        }
    }
    let mut work: Vec<usize> = (0..blocks.len()).filter(|b| block_in[*b].is_some()).rev().collect();
    while let Some(index) = work.pop() {
        let Some(mut state) = block_in[index].clone() else { continue };
        for (offset, instruction) in blocks[index].instructions.iter().enumerate() {
            state.step(instruction, isa, &liveness.defs[starts[index] + offset], exports);
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
        let mut state = block_in[index].clone().unwrap_or_else(|| Pending::unknown(exports));
        for (offset, instruction) in block.instructions.iter().enumerate() {
            out.push(state.clone());
            state.step(instruction, isa, &liveness.defs[starts[index] + offset], exports);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(units: &[Unit]) -> UnitSet {
        let mut set = UnitSet::EMPTY;
        units.iter().for_each(|u| set.insert(*u));
        set
    }

    /// What a device function's caller left in flight is unknown, but an
    /// export only if the code object has one: code touching a register
    /// waits for vmcnt and lgkmcnt there, not for every counter.
    #[test]
    fn unknown_state_holds_exports_only_where_the_code_object_has_some() {
        let touched = set(&[Unit::vgpr(3)]);
        let both = Counters { vmcnt: true, lgkmcnt: true, expcnt: false };
        assert_eq!(Pending::unknown(false).waits_for(&touched), both);
        assert_eq!(Pending::unknown(true).waits_for(&touched), Counters::ALL);
        assert_eq!(Pending::unknown(false).waits_for(&UnitSet::EMPTY), Counters::default());
    }

    /// vmcnt counts in issue order: a wait for 1 leaves only the youngest
    /// load in flight; a store counts as younger too.
    #[test]
    fn a_wait_for_n_keeps_the_n_youngest() {
        let mut vm = InFlight::default();
        vm.issue(&set(&[Unit::vgpr(0)]), false);
        vm.issue(&set(&[Unit::vgpr(1)]), false);
        vm.wait(1);
        assert_eq!(vm.units(), set(&[Unit::vgpr(1)]));
        vm.issue(&UnitSet::EMPTY, false);
        vm.wait(1);
        assert!(vm.is_empty());
    }

    /// With scalar memory in flight lgkmcnt completes out of order: only a
    /// wait for zero clears anything.
    #[test]
    fn out_of_order_operations_need_a_wait_for_zero() {
        let mut lgkm = InFlight::default();
        lgkm.issue(&set(&[Unit::sgpr(4)]), true);
        lgkm.issue(&set(&[Unit::vgpr(2)]), false);
        lgkm.wait(1);
        assert_eq!(lgkm.units(), set(&[Unit::sgpr(4), Unit::vgpr(2)]));
        lgkm.wait(0);
        assert!(lgkm.is_empty());
    }

    /// Paths join keeping the younger age: the one less sure to have landed.
    #[test]
    fn joins_keep_the_younger_age() {
        let mut a = InFlight::default();
        a.issue(&set(&[Unit::vgpr(0)]), false);
        a.issue(&UnitSet::EMPTY, false);
        let mut b = InFlight::default();
        b.issue(&set(&[Unit::vgpr(0)]), false);
        assert!(a.join(&b));
        a.wait(1);
        assert_eq!(a.units(), set(&[Unit::vgpr(0)]));
        let wait = WaitCounts::decode(0x0f71);
        assert_eq!((wait.vmcnt, wait.expcnt, wait.lgkmcnt), (1, 7, 15));
    }
}
