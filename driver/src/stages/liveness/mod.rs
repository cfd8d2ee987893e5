//! Stage 3, liveness: which 32-bit register units are live before and after
//! every instruction (docs/liveness.md explains the model).
//!
//! - Backward dataflow over each function's blocks; a block whose successors
//!   are unknown (indirect branch, branch out of the function) has everything
//!   live after it; `s_endpgm` has nothing.
//! - Vector defs kill only where EXEC is provably full (`exec_mask`): under a
//!   partial EXEC the inactive lanes keep values that may be live. But a
//!   value read only in the lanes the current EXEC enables ("lanes" live) is
//!   dead before a def that writes every one of those lanes, as long as EXEC
//!   does not change in between: crossing a write of EXEC (backwards), lanes
//!   liveness becomes whole-register liveness. Cross-lane reads (readlane,
//!   DPP, permutes, MFMA) count as whole-register reads; single-lane, DPP,
//!   SDWA, D16, high-half and MFMA writes kill no lanes.
//! - Calls use what the callee's entry needs and kill only the return
//!   address they write; an unknown callee uses everything. A device function
//!   returns into what is live after its call sites, or everything when its
//!   callers are not all known. Iterated to a fixpoint over the call graph.

pub mod allocation;
pub mod entry;
pub mod exec_mask;
pub mod local_calls;
pub mod pending;
pub mod print;
pub mod units;

use std::collections::HashMap;

use crate::stages::lift::{BlockExit, Flow, Function, FunctionKind, LiftedCodeObject};
use crate::stages::load::processor::Processor;
pub use allocation::{allocation, Allocation};
pub use entry::kernel_inputs;
pub use units::{RegisterFile, RegisterUnits, Unit, UnitSet};

/// Liveness of one function, per instruction in `Function::instructions` order.
#[derive(Clone, Debug, Default)]
pub struct FunctionLiveness {
    pub live_in: Vec<UnitSet>,
    pub live_out: Vec<UnitSet>,
    /// Units each instruction writes (fully or partly).
    pub defs: Vec<UnitSet>,
    /// Units each instruction reads.
    pub uses: Vec<UnitSet>,
    /// Whether EXEC is full before each instruction.
    pub exec_full: Vec<bool>,
    /// Every unit the function or anything it may call reads or writes.
    pub touched: UnitSet,
    /// Whether every call it makes goes to subroutines of its own
    /// (`local_calls`; false when it makes none).
    pub calls_only_its_own_code: bool,
}

impl FunctionLiveness {
    /// Units not live before, and not written or read by, instruction `index`:
    /// free to use there (the paper's persistent registers).
    pub fn free_at(&self, index: usize, allocated: &UnitSet) -> UnitSet {
        allocated.difference(&self.live_in[index]).difference(&self.defs[index]).difference(&self.uses[index])
    }
}

pub struct Liveness {
    /// The processor's register files (the facts every later stage sizes
    /// registers, occupancy and the preamble by).
    pub processor: &'static Processor,
    /// In `LiftedCodeObject::functions` order.
    pub functions: Vec<FunctionLiveness>,
}

/// What one instruction does to liveness.
#[derive(Clone, Copy)]
struct Effect {
    uses: UnitSet,
    kills: UnitSet,
    defs: UnitSet,
    /// Vector units read only in the lanes EXEC enables.
    lane_uses: UnitSet,
    /// Vector units written in at least every lane EXEC enables.
    lane_kills: UnitSet,
    /// Writes EXEC (or calls code that may).
    exec_change: bool,
}

/// Liveness at a point: units whose value is needed in any lane, and
/// vector units needed only in the lanes the current EXEC enables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Live {
    whole: UnitSet,
    lanes: UnitSet,
}

impl Live {
    fn whole(units: UnitSet) -> Live {
        Live { whole: units, lanes: UnitSet::EMPTY }
    }

    fn all(&self) -> UnitSet {
        self.whole.union(&self.lanes)
    }

    fn join(&mut self, other: &Live) {
        self.whole.union_with(&other.whole);
        self.lanes.union_with(&other.lanes);
        self.lanes = self.lanes.difference(&self.whole);
    }

    /// Liveness before an instruction with `effect`, given it after.
    fn before(&self, effect: &Effect) -> Live {
        let mut whole = self.whole.difference(&effect.kills);
        let mut lanes = self.lanes.difference(&effect.kills).difference(&effect.lane_kills);
        if effect.exec_change {
            whole.union_with(&lanes);
            lanes = UnitSet::EMPTY;
        }
        whole.union_with(&effect.uses.difference(&effect.lane_uses));
        lanes.union_with(&effect.lane_uses);
        Live { lanes: lanes.difference(&whole), whole }
    }
}

/// Opcodes whose vector reads may see lanes EXEC disables, or whose writes
/// may miss enabled lanes.
fn crosses_lanes(name: &str) -> bool {
    ["V_READLANE", "V_READFIRSTLANE", "V_WRITELANE", "V_PERMLANE", "DS_PERMUTE", "DS_BPERMUTE", "DS_SWIZZLE", "V_MFMA"]
        .iter()
        .any(|p| name.starts_with(p))
        || name.contains("_DPP")
        || name.contains("_SDWA")
        || name.contains("D16")
        || name.contains("MIXHI")
        || name.starts_with("V_MOVREL")
}

struct Analysis<'a> {
    lifted: &'a LiftedCodeObject<'a>,
    units: RegisterUnits,
    function_at: HashMap<u64, usize>,
    /// Per function: what is live at its entry (used by calls).
    entry_live: Vec<UnitSet>,
    /// Per function: what is live after it returns.
    return_live: Vec<UnitSet>,
    /// Per function: units it or its callees may write.
    may_def: Vec<UnitSet>,
    /// Every register the code can name: what unknown code may read or
    /// write.
    every: UnitSet,
}

impl<'a> Analysis<'a> {
    fn callee(&self, function: &Function, address: u64) -> Option<usize> {
        function.calls.iter().find(|c| c.address == address)?.target.and_then(|t| self.function_at.get(&t).copied())
    }

    fn effect(&self, function: &Function, instruction: &crate::stages::lift::Instruction, exec_full: bool) -> Effect {
        if !instruction.decoded {
            // Unknown semantics: it may read anything, kills nothing.
            return Effect {
                uses: self.every,
                kills: UnitSet::EMPTY,
                defs: UnitSet::EMPTY,
                lane_uses: UnitSet::EMPTY,
                lane_kills: UnitSet::EMPTY,
                exec_change: true,
            };
        }
        let isa = &self.lifted.isa;
        let mut uses = UnitSet::EMPTY;
        let mut kills = UnitSet::EMPTY;
        let mut defs = UnitSet::EMPTY;
        for reg in instruction.all_uses() {
            uses.extend_units(self.units.units(reg));
        }
        let name = isa.opcode_name(instruction.opcode);
        let single_lane = name.starts_with("V_WRITELANE");
        let per_lane = !crosses_lanes(name);
        let mut lane_uses = UnitSet::EMPTY;
        let mut lane_kills = UnitSet::EMPTY;
        if per_lane {
            lane_uses = uses.in_file(RegisterFile::Vgpr).union(&uses.in_file(RegisterFile::Agpr));
        }
        let exec = [Unit::special("EXEC_LO"), Unit::special("EXEC_HI")];
        let mut exec_change = false;
        for reg in instruction.all_defs() {
            let partial = self.units.is_partial(reg);
            for unit in self.units.units(reg) {
                defs.insert(*unit);
                exec_change |= exec.contains(unit);
                if !partial && (!unit.is_vector() || (exec_full && !single_lane)) {
                    kills.insert(*unit);
                }
                if !partial && unit.is_vector() && per_lane {
                    lane_kills.insert(*unit);
                }
            }
        }
        if instruction.flow == Flow::Call {
            exec_change = true;
            lane_uses = UnitSet::EMPTY;
            match self.callee(function, instruction.address) {
                Some(callee) => {
                    // The call writes the return address before the callee
                    // reads it.
                    uses.union_with(&self.entry_live[callee].difference(&kills));
                    defs.union_with(&self.may_def[callee]);
                }
                None => {
                    uses = self.every;
                    defs = self.every;
                }
            }
        }
        Effect { uses, kills, defs, lane_uses, lane_kills, exec_change }
    }

    /// Liveness of one function given the current summaries; with local
    /// calls (`local_calls`), to a fixpoint over their subroutines' entries
    /// and returns.
    fn function(&self, index: usize) -> FunctionLiveness {
        let function = &self.lifted.functions[index];
        let local = local_calls::find(&self.lifted.isa, &self.units, function);
        let mut summaries = LocalSummaries::default();
        loop {
            let result = self.function_with(index, &local, &summaries);
            let next = LocalSummaries {
                entry_live: local.writes.keys().map(|entry| (*entry, result.live_in[*entry])).collect(),
                return_live: local
                    .returns
                    .iter()
                    .map(|(block, calls)| {
                        let mut live = UnitSet::EMPTY;
                        calls.iter().for_each(|call| live.union_with(&result.live_out[*call]));
                        (*block, live)
                    })
                    .collect(),
            };
            if next == summaries {
                let mut result = result;
                result.calls_only_its_own_code =
                    !function.calls.is_empty() && function.calls.iter().all(|call| local.is_local(call.address));
                return result;
            }
            summaries = next;
        }
    }

    fn function_with(
        &self,
        index: usize,
        local: &local_calls::LocalCalls,
        summaries: &LocalSummaries,
    ) -> FunctionLiveness {
        let function = &self.lifted.functions[index];
        let index_of: HashMap<u64, usize> = match local.is_empty() {
            true => HashMap::new(),
            false => function.instructions().enumerate().map(|(n, i)| (i.address, n)).collect(),
        };
        let local_writes = |call: usize| {
            let mut writes = UnitSet::EMPTY;
            local.callees[&call].iter().for_each(|entry| writes.union_with(&local.writes[entry]));
            writes
        };
        let clobbers = |address: u64| match self.callee(function, address) {
            Some(callee) => self.may_def[callee],
            None => match index_of.get(&address).filter(|n| local.callees.contains_key(n)) {
                Some(call) => local_writes(*call),
                None => self.every,
            },
        };
        let entry_full = function.is_kernel();
        let exec_full = exec_mask::exec_full_before(&self.lifted.isa, &self.units, function, entry_full, &clobbers);
        let mut effects = Vec::with_capacity(exec_full.len());
        for (position, (instruction, full)) in function.instructions().zip(&exec_full).enumerate() {
            let mut effect = self.effect(function, instruction, *full);
            if let Some(entries) = local.callees.get(&position) {
                // A local call: its subroutines' needs and writes.
                let mut uses = UnitSet::EMPTY;
                for reg in instruction.all_uses() {
                    uses.extend_units(self.units.units(reg));
                }
                for entry in entries {
                    let live = summaries.entry_live.get(entry).copied().unwrap_or_default();
                    uses.union_with(&live.difference(&effect.kills));
                }
                effect.uses = uses;
                effect.defs = local_writes(position).union(&effect.kills);
            }
            effects.push(effect);
        }

        let mut starts = Vec::with_capacity(function.blocks.len());
        let mut position = 0;
        for block in &function.blocks {
            starts.push(position);
            position += block.instructions.len();
        }
        let exit_live = |block: &crate::stages::lift::Block| match block.exit {
            BlockExit::Indirect if local.returns.contains_key(&block.index) => {
                summaries.return_live.get(&block.index).copied().unwrap_or_default()
            }
            BlockExit::EndProgram => UnitSet::EMPTY,
            BlockExit::Return => self.return_live[index],
            BlockExit::Indirect | BlockExit::OutsideFunction | BlockExit::FallsOffTheEnd => self.every,
            BlockExit::FallThrough | BlockExit::Branch | BlockExit::ConditionalBranch | BlockExit::Jump => {
                UnitSet::EMPTY
            }
        };
        let block_out_of = |block: &crate::stages::lift::Block, block_in: &[Live]| {
            let mut out = Live::whole(exit_live(block));
            for successor in &block.successors {
                out.join(&block_in[*successor]);
            }
            out
        };
        // Round-robin to a fixpoint, blocks in reverse order.
        let mut block_in = vec![Live::default(); function.blocks.len()];
        let mut changed = true;
        while changed {
            changed = false;
            for block in function.blocks.iter().rev() {
                let mut live = block_out_of(block, &block_in);
                let start = starts[block.index];
                for effect in effects[start..start + block.instructions.len()].iter().rev() {
                    live = live.before(effect);
                }
                if live != block_in[block.index] {
                    block_in[block.index] = live;
                    changed = true;
                }
            }
        }

        let count = effects.len();
        let mut result = FunctionLiveness {
            live_in: vec![UnitSet::EMPTY; count],
            live_out: vec![UnitSet::EMPTY; count],
            defs: effects.iter().map(|e| e.defs).collect(),
            uses: effects.iter().map(|e| e.uses).collect(),
            exec_full,
            touched: UnitSet::EMPTY,
            calls_only_its_own_code: false,
        };
        for (block, start) in function.blocks.iter().zip(&starts) {
            let mut live = block_out_of(block, &block_in);
            for offset in (0..block.instructions.len()).rev() {
                let at = start + offset;
                result.live_out[at] = live.all();
                live = live.before(&effects[at]);
                result.live_in[at] = live.all();
            }
        }
        result
    }
}

/// Whether a call of `function` may go to code outside what the code
/// object's functions and the function's own local subroutines
/// (`local_calls`) are known to be.
fn calls_unknown_code(
    lifted: &LiftedCodeObject<'_>,
    units: &RegisterUnits,
    function_at: &HashMap<u64, usize>,
    function: &Function,
) -> bool {
    let unknown = |call: &&crate::stages::lift::CallSite| call.target.and_then(|t| function_at.get(&t)).is_none();
    if !function.calls.iter().any(|c| unknown(&c)) {
        return false;
    }
    let local = local_calls::find(&lifted.isa, units, function);
    function.calls.iter().filter(unknown).any(|call| !local.is_local(call.address))
}

/// What a function's local subroutines need at their entries (by
/// instruction) and have live after their returns (by block).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct LocalSummaries {
    entry_live: HashMap<usize, UnitSet>,
    return_live: HashMap<usize, UnitSet>,
}

impl UnitSet {
    fn extend_units(&mut self, units: &[Unit]) {
        for unit in units {
            self.insert(*unit);
        }
    }
}

/// Why a code object's liveness is not computed.
#[derive(Debug, thiserror::Error)]
pub enum LivenessError {
    #[error(
        "{processor} code is lifted and round-tripped, not analysed or instrumented: gpuinstr models the register \
         files of {}{}",
        Processor::names(),
        if *.wave32 { " (wave32 RDNA code has its own issue)" } else { "" }
    )]
    Unmodelled { processor: String, wave32: bool },
    #[error(
        "{processor} code with matrix instructions ({instruction} in {function}): LLVM 15 decodes gfx940's MFMAs \
         that accumulate in VGPRs as if they used AGPRs, so their registers cannot be known here; use the LLVM 17 \
         or 21 build (scripts/env.sh trixie or sid)"
    )]
    MisdecodedMatrixInstructions { processor: String, instruction: String, function: String },
}

/// Liveness of every function of a lifted code object.
pub fn analyze<'a>(lifted: &'a LiftedCodeObject<'a>) -> Result<Liveness, LivenessError> {
    // The processors whose register files, wave size and occupancy this
    // analysis and everything after it model: liveness on any other would
    // give wrong registers quietly.
    let target = &lifted.code_object.target;
    let Some(processor) = target.model() else {
        return Err(LivenessError::Unmodelled {
            processor: target.processor.clone(),
            wave32: !lifted.isa.generation.is_gfx9(),
        });
    };
    if crate::toolchain::LLVM_MAJOR < 17 && processor.architected_flat_scratch {
        for function in &lifted.functions {
            if let Some(matrix) = function.instructions().map(|i| i.name(&lifted.isa)).find(|n| n.contains("MFMA")) {
                return Err(LivenessError::MisdecodedMatrixInstructions {
                    processor: target.processor.clone(),
                    instruction: matrix.to_string(),
                    function: function.name.clone(),
                });
            }
        }
    }
    Ok(analyze_modelled(lifted, processor))
}

/// The registers each function's instructions name, with everything it
/// may call (every register where a call's target is unknown or an
/// instruction undecodable): what the allocation of a kernel must cover.
/// Only the code is read, no liveness: a call's effect in the liveness
/// holds the callee's summary, which joins every call site's live
/// registers, and what a kernel touches must not grow with what another
/// kernel keeps live across the same callee.
pub fn touched_registers(lifted: &LiftedCodeObject<'_>) -> Vec<UnitSet> {
    let units = RegisterUnits::new(&lifted.isa);
    let every = UnitSet::every_register(lifted.isa.generation);
    let function_at: HashMap<u64, usize> = lifted.functions.iter().enumerate().map(|(i, f)| (f.address, i)).collect();
    let direct: Vec<UnitSet> = lifted
        .functions
        .iter()
        .map(|function| {
            let mut touched = UnitSet::EMPTY;
            for instruction in function.instructions() {
                if !instruction.decoded {
                    return every;
                }
                for reg in instruction.all_uses().chain(instruction.all_defs()) {
                    touched.extend_units(units.units(reg));
                }
            }
            touched
        })
        .collect();
    let mut all = Vec::with_capacity(direct.len());
    for (index, function) in lifted.functions.iter().enumerate() {
        let mut touched = direct[index];
        let mut stack: Vec<usize> = Vec::new();
        let mut seen = vec![false; direct.len()];
        let mut unknown = false;
        let push_calls = |f: &Function, stack: &mut Vec<usize>, unknown: &mut bool| {
            *unknown |= calls_unknown_code(lifted, &units, &function_at, f);
            stack.extend(f.calls.iter().filter_map(|call| call.target.and_then(|t| function_at.get(&t))));
        };
        push_calls(function, &mut stack, &mut unknown);
        while let Some(callee) = stack.pop() {
            if std::mem::replace(&mut seen[callee], true) {
                continue;
            }
            touched.union_with(&direct[callee]);
            push_calls(&lifted.functions[callee], &mut stack, &mut unknown);
        }
        all.push(if unknown { every } else { touched });
    }
    all
}

fn analyze_modelled<'a>(lifted: &'a LiftedCodeObject<'a>, processor: &'static Processor) -> Liveness {
    let count = lifted.functions.len();
    let function_at: HashMap<u64, usize> = lifted.functions.iter().enumerate().map(|(i, f)| (f.address, i)).collect();
    let units = RegisterUnits::new(&lifted.isa);
    let every = UnitSet::every_register(lifted.isa.generation);

    // Callers of each device function; a function without known callers
    // returns into unknown code.
    let mut callers: Vec<Vec<(usize, u64)>> = vec![Vec::new(); count];
    for (index, function) in lifted.functions.iter().enumerate() {
        for call in &function.calls {
            if let Some(callee) = call.target.and_then(|t| function_at.get(&t)) {
                callers[*callee].push((index, call.address));
            }
        }
    }

    let mut analysis = Analysis {
        lifted,
        units,
        function_at,
        entry_live: vec![UnitSet::EMPTY; count],
        return_live: (0..count)
            .map(|i| {
                if callers[i].is_empty() && lifted.functions[i].kind == FunctionKind::DeviceFunction {
                    every
                } else {
                    UnitSet::EMPTY
                }
            })
            .collect(),
        may_def: vec![UnitSet::EMPTY; count],
        every,
    };

    // May-defs: what each function writes, closed over known callees
    // (unknown callees write anything).
    for (index, function) in lifted.functions.iter().enumerate() {
        let mut defs = UnitSet::EMPTY;
        for instruction in function.instructions() {
            for reg in instruction.all_defs() {
                defs.extend_units(analysis.units.units(reg));
            }
        }
        if calls_unknown_code(lifted, &analysis.units, &analysis.function_at, function) {
            defs = every;
        }
        analysis.may_def[index] = defs;
    }
    let mut changed = true;
    while changed {
        changed = false;
        for (index, function) in lifted.functions.iter().enumerate() {
            let mut defs = analysis.may_def[index];
            for call in &function.calls {
                if let Some(callee) = call.target.and_then(|t| analysis.function_at.get(&t)) {
                    defs.union_with(&analysis.may_def[*callee]);
                }
            }
            if defs != analysis.may_def[index] {
                analysis.may_def[index] = defs;
                changed = true;
            }
        }
    }

    // Liveness, to a fixpoint over entry and return summaries (one pass
    // when nothing calls anything).
    let has_calls = lifted.functions.iter().any(|f| !f.calls.is_empty());
    let mut results: Vec<FunctionLiveness> = vec![FunctionLiveness::default(); count];
    loop {
        let mut changed = false;
        for (index, result) in results.iter_mut().enumerate() {
            *result = analysis.function(index);
            let entry = result.live_in.first().copied().unwrap_or_default();
            if entry != analysis.entry_live[index] {
                analysis.entry_live[index] = entry;
                changed = true;
            }
        }
        for (callee, sites) in callers.iter().enumerate() {
            if sites.is_empty() {
                continue;
            }
            let mut live = UnitSet::EMPTY;
            for (caller, site) in sites {
                let position = lifted.functions[*caller].instructions().position(|i| i.address == *site);
                if let Some(position) = position {
                    live.union_with(&results[*caller].live_out[position]);
                }
            }
            if live != analysis.return_live[callee] {
                analysis.return_live[callee] = live;
                changed = true;
            }
        }
        if !changed || !has_calls {
            break;
        }
    }

    for (result, touched) in results.iter_mut().zip(touched_registers(lifted)) {
        result.touched = touched;
    }
    Liveness { processor, functions: results }
}
