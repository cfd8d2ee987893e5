//! The payload compiler: stages 5 to 8 for all instrumentation points of
//! one code object, batched into one LLVM module and two llc runs.
//!
//! tool bitcode + points -> (payload) IR module -> (lower-ir) O3, placeholders
//! -> (codegen) MIR -> (lower-mir) intrinsics lowered, live registers kept
//! -> (codegen) register allocation, assembly -> one instruction list per point.

pub mod label;
pub mod placement;
pub mod register_counts;
pub mod shared;
pub mod sharing;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};

use gpuinstr_intrinsics::{KernelArgument, Registry, TargetInfo};
use inkwell::context::Context;
use inkwell::values::BasicValue;
use thiserror::Error;

use crate::error::ToolProblem;
use crate::stages::codegen::{self, CodegenError};
use crate::stages::lift::{FunctionKind, LiftedCodeObject};
use crate::stages::liveness::pending::Counters;
use crate::stages::liveness::{Liveness, RegisterUnits, Unit, UnitSet};
use crate::stages::load::CodeObject;
use crate::stages::lower_ir::{self, LowerIrError};
use crate::stages::lower_mir::final_code::{self, FinalCodeError, Parking, SlotLoads};
use crate::stages::lower_mir::physical::Frame;
use crate::stages::lower_mir::{self, LowerMirError, PayloadSite, RegisterClasses};
use crate::stages::payload::{self, HookArgument, PayloadError, PayloadPoint, PayloadRequest, PointConstantArgument};
use crate::stages::sva::counts::CountRegisters;
use crate::stages::sva::{AgprHomes, FunctionRegisters};
use crate::tool::read_tool_module;
use label::Labeller;
pub use label::PointLabel;

/// VGPRs a payload gets at least where AGPRs allow: at points with fewer
/// dead VGPRs, live ones are parked in dead AGPRs for the payload's time.
pub const PAYLOAD_VGPRS: usize = 12;

/// VGPRs in aligned pairs a payload LLVM found no registers for gets on
/// its second try: dead VGPRs scattered between live ones leave no pair
/// for a 64-bit value (an address).
pub const STARVED_PAYLOAD_VGPRS: usize = 2 * PAYLOAD_VGPRS;

/// The starved retry's room for a payload whose widest VGPR tuple is
/// `widest` registers: [`STARVED_PAYLOAD_VGPRS`] in aligned pairs, or, for
/// wider tuples (a 128-bit store's data), two runs that wide and pairs for
/// the rest. Dead VGPRs between live ones (Tensile's kernels keep every
/// third VGPR of a range live) may hold many pairs and no run of four.
fn starved_room(widest: u16) -> PayloadRoom {
    let width = usize::from(widest);
    if width <= 2 {
        return PayloadRoom::AlignedPairs(STARVED_PAYLOAD_VGPRS);
    }
    let mut lengths = vec![width; (STARVED_PAYLOAD_VGPRS / width).clamp(1, 2)];
    while lengths.len() < VgprRuns::MAX && lengths.iter().sum::<usize>() + 2 <= STARVED_PAYLOAD_VGPRS {
        lengths.push(2);
    }
    match VgprRuns::new(lengths) {
        Some(runs) => PayloadRoom::Runs(runs),
        None => PayloadRoom::AlignedPairs(STARVED_PAYLOAD_VGPRS),
    }
}

/// How many VGPRs a payload gets at least (parking live ones in dead AGPRs
/// where fewer are dead).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PayloadRoom {
    /// This many dead VGPRs.
    Vgprs(usize),
    /// This many dead VGPRs in dead even-odd pairs.
    AlignedPairs(usize),
    /// Dead VGPRs in runs of these lengths, each run contiguous (a run of
    /// two or more starting at an even register): what a template's
    /// renamed copy needs, whose tuples overlap into runs longer than a
    /// pair.
    Runs(VgprRuns),
    /// Nothing parked: code that needs no dead VGPR and reads no kernel
    /// input (a count kept in registers), which parking would only wrap
    /// in copies of live registers, the count's own among them.
    Unparked,
}

impl PayloadRoom {
    /// Rooms of the starved retry's kind (a second try, which may spill
    /// live VGPRs to scratch memory).
    fn is_roomy(self) -> bool {
        matches!(self, PayloadRoom::AlignedPairs(_) | PayloadRoom::Runs(_))
    }
}

/// The lengths of the VGPR runs a payload needs, longest first (at most
/// [`VgprRuns::MAX`]; unused entries are 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VgprRuns([u8; VgprRuns::MAX]);

impl VgprRuns {
    pub const MAX: usize = 8;

    /// The runs of `lengths`, or `None` when there are more than
    /// [`VgprRuns::MAX`] or one is longer than 255.
    pub fn new(lengths: impl IntoIterator<Item = usize>) -> Option<VgprRuns> {
        let mut sorted: Vec<u8> = lengths.into_iter().map(u8::try_from).collect::<Result<_, _>>().ok()?;
        if sorted.len() > Self::MAX {
            return None;
        }
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let mut runs = [0; Self::MAX];
        runs[..sorted.len()].copy_from_slice(&sorted);
        Some(VgprRuns(runs))
    }

    /// Each run's length, longest first.
    pub fn lengths(self) -> impl Iterator<Item = u16> {
        self.0.into_iter().take_while(|l| *l > 0).map(u16::from)
    }

    pub fn total(self) -> usize {
        self.lengths().map(usize::from).sum()
    }
}

/// How a rejection for want of registers begins.
const NO_REGISTERS: &str = "LLVM found no registers for the payload";

/// A VGPR site and what to copy around the payload there.
struct SiteParking {
    sva: Option<u16>,
    work_item_ids: Option<u16>,
    parking: Parking,
}

/// The VGPRs a point's hooks read (registers, address operands).
fn vgprs_read(point: &PayloadPoint) -> UnitSet {
    let mut read = UnitSet::EMPTY;
    let mut add = |register: gpuinstr_intrinsics::Register, width: u16| {
        if let gpuinstr_intrinsics::Register::Vgpr(first) = register {
            for index in first..first.saturating_add(width).min(256) {
                read.insert(Unit::vgpr(index));
            }
        }
    };
    for argument in point.calls.iter().flat_map(|call| &call.arguments) {
        match argument {
            // (A 64-bit parameter reads the pair: both kept.)
            HookArgument::Register(register) => add(*register, 2),
            HookArgument::MemoryAddress { base, index, .. } => {
                add(*base, 2);
                if let Some(index) = index {
                    add(*index, 1);
                }
            }
            HookArgument::LdsAddress { address, .. } => add(*address, 1),
            HookArgument::BufferAddress(buffer) => buffer.registers().for_each(|register| add(register, 1)),
            HookArgument::Int(_) | HookArgument::Float(_) => {}
        }
    }
    read
}

/// Plans the whole-wave copies at a point with `live` registers, in a wave
/// that may have `wave_vgprs` VGPRs: AGPR homes load into the highest dead
/// VGPRs of the allocation (payloads allocate from the bottom), else the
/// lowest past it; where the VGPRs that stay dead in the whole wave are
/// fewer than `room` asks, the highest live ones are parked in dead AGPRs;
/// where aligned pairs are still short, live VGPRs move into dead VGPRs
/// whose partners are live, so that their own partners pair up (a payload
/// with a 64-bit address needs a dead even-odd pair, and dead VGPRs
/// scattered between live ones may hold none). With `spill_frame` (the
/// starved retry, an SVA in a VGPR), live VGPRs no dead AGPR can take are
/// saved in scratch memory instead. EXEC is saved in the lowest dead
/// aligned SGPR pair (not a frame register when spilling: the frame is
/// swapped around the spills). VGPRs the hooks read (`read`) are never
/// parked or moved: the payload reads them where they are. `None`:
/// nothing to copy.
fn plan_parking(
    registers: &FunctionRegisters,
    live: &UnitSet,
    read: &UnitSet,
    wave_vgprs: u16,
    max_agprs: u16,
    room: PayloadRoom,
    spill_frame: Option<Frame>,
) -> Result<Option<SiteParking>, String> {
    if room == PayloadRoom::Unparked {
        return Ok(None);
    }
    let homes: Vec<u16> = registers.sva.iter().chain(&registers.work_item_ids).copied().collect();
    // The usual case, counted on the set's words: nothing to load and
    // enough VGPRs dead (as below, without listing them).
    if let (0, PayloadRoom::Vgprs(wanted)) = (registers.values_loaded(), room) {
        let live_in_wave =
            live.intersection(&UnitSet::range(crate::stages::liveness::RegisterFile::Vgpr, 0, wave_vgprs)).len();
        let dead_homes = homes.iter().filter(|v| **v < wave_vgprs && !live.contains(Unit::vgpr(**v))).count();
        if usize::from(wave_vgprs) - live_in_wave - dead_homes >= wanted {
            return Ok(None);
        }
    }
    let dead = |v: &u16| !live.contains(Unit::vgpr(*v)) && !homes.contains(v);
    let limit = registers.vgpr_limit.min(wave_vgprs);
    let mut dead_vgprs: Vec<u16> = (0..limit).rev().filter(dead).chain((limit..wave_vgprs).filter(dead)).collect();
    let loads_wanted = registers.values_loaded();
    let short = match room {
        PayloadRoom::Vgprs(wanted) => (wanted + loads_wanted).saturating_sub(dead_vgprs.len()),
        PayloadRoom::Unparked => 0, // (returned above)
        PayloadRoom::Runs(runs) => (runs.total() + loads_wanted).saturating_sub(dead_vgprs.len()),
        PayloadRoom::AlignedPairs(wanted) => {
            let paired = dead_vgprs.iter().filter(|v| dead_vgprs.contains(&(*v ^ 1))).count();
            (wanted + 2 * loads_wanted).saturating_sub(paired)
        }
    };
    // Runs need their windows dead too, not only as many dead VGPRs.
    let runs_fit = match room {
        PayloadRoom::Runs(runs) => {
            let dead: BTreeSet<u16> = dead_vgprs.iter().copied().collect();
            run_windows(runs, wave_vgprs, &dead, |_| false).len() == runs.total()
        }
        _ => true,
    };
    if loads_wanted == 0 && short == 0 && runs_fit {
        return Ok(None);
    }
    let agpr_homes: Vec<u16> = registers.in_agprs.iter().flat_map(AgprHomes::agprs).collect();
    // Lowest first: inside the allocation before past it.
    let mut dead_agprs =
        (0..registers.agpr_limit.min(max_agprs)).filter(|a| !live.contains(Unit::agpr(*a)) && !agpr_homes.contains(a));
    let mut borrowed = Vec::new();
    let mut spilled = Vec::new();
    // The SVA kept in memory, spills wanted and no VGPR dead to load it
    // into: one live VGPR is saved in the wave's slot first (a rescue).
    let parkable = |v: &u16| live.contains(Unit::vgpr(*v)) && !homes.contains(v) && !read.contains(Unit::vgpr(*v));
    let rescued = (registers.in_wave_slot.is_some() && spill_frame.is_some() && dead_vgprs.is_empty())
        .then(|| (0..limit).rev().find(parkable))
        .flatten();
    let mut live_vgprs = (0..limit).rev().filter(|v| parkable(v) && Some(*v) != rescued);
    // The SVA in an AGPR: spills read the frame from its copy, loaded
    // first into a VGPR dead here; none dead, no spills.
    let spill_frame = spill_frame.filter(|_| registers.in_agprs.is_none() || !dead_vgprs.is_empty());
    for _ in 0..short {
        match (live_vgprs.next(), dead_agprs.next()) {
            (Some(vgpr), Some(agpr)) => borrowed.push((vgpr, agpr)),
            (Some(vgpr), None) if spill_frame.is_some() => spilled.push(vgpr),
            _ => break,
        }
    }
    let frame_requested = spill_frame;
    let mut spill_frame = match (spill_frame, registers.sva) {
        (Some(frame), Some(sva)) if !spilled.is_empty() => Some((sva, frame)),
        _ => None,
    };
    let mut moved = Vec::new();
    if let PayloadRoom::AlignedPairs(wanted) = room {
        let mut free: BTreeSet<u16> =
            dead_vgprs.iter().copied().chain(borrowed.iter().map(|(v, _)| *v)).chain(spilled.iter().copied()).collect();
        let paired = |free: &BTreeSet<u16>| free.iter().filter(|v| free.contains(&(*v ^ 1))).count();
        while paired(&free) < wanted + 2 * loads_wanted {
            // Two dead VGPRs with live partners: the first's partner moves
            // into the second, and the first's pair is dead.
            let mut lone = free.iter().copied().filter(|v| {
                let partner = *v ^ 1;
                !free.contains(&partner)
                    && !homes.contains(&partner)
                    && !read.contains(Unit::vgpr(partner))
                    && partner < wave_vgprs
            });
            let (Some(keep), Some(fill)) = (lone.next(), lone.next()) else { break };
            moved.push((keep ^ 1, fill));
            free.insert(keep ^ 1);
            free.remove(&fill);
        }
    }
    if let PayloadRoom::Runs(runs) = room {
        let free: BTreeSet<u16> =
            dead_vgprs.iter().copied().chain(borrowed.iter().map(|(v, _)| *v)).chain(spilled.iter().copied()).collect();
        let movable =
            |v: u16| v < wave_vgprs && !homes.contains(&v) && !read.contains(Unit::vgpr(v)) && Some(v) != rescued;
        let windows = run_windows(runs, wave_vgprs, &free, movable);
        // Loads take free VGPRs outside the windows first; the live ones
        // in the windows move into the free ones loads leave.
        dead_vgprs.sort_by_key(|v| windows.contains(v));
        let mut spare: Vec<u16> = dead_vgprs
            .iter()
            .chain(borrowed.iter().map(|(v, _)| v))
            .chain(&spilled)
            .copied()
            .filter(|v| !windows.contains(v))
            .collect();
        for from in windows.iter().copied().filter(|v| !free.contains(v)) {
            let Some(to) = spare.pop() else { break };
            moved.push((from, to));
        }
    }
    // Loads take dead VGPRs first, then borrowed ones.
    // Never a VGPR a live one moved into (it holds that value), whatever
    // freed it (a spilled one may be moved into too).
    let mut targets = rescued
        .into_iter()
        .chain(dead_vgprs.iter().copied())
        .chain(borrowed.iter().map(|(v, _)| *v))
        .chain(spilled.iter().copied())
        .filter(|v| !moved.iter().any(|(_, to)| to == v))
        .chain(moved.iter().map(|(from, _)| *from));
    let mut loads = Vec::new();
    let (mut sva, mut work_item_ids) = (registers.sva, registers.work_item_ids);
    if let Some(h) = registers.in_agprs {
        let Some(target) = targets.next() else {
            return Err(format!(
                "the State Value Array is kept in a{}, and no VGPR is dead here to load it into, nor an AGPR to \
                 park a live one in",
                h.sva
            ));
        };
        loads.push((h.sva, target));
        sva = Some(target);
        if let (Some(frame), false) = (frame_requested, spilled.is_empty()) {
            if !dead_vgprs.contains(&target) || moved.iter().any(|(_, to)| *to == target) {
                return Err(format!(
                    "the State Value Array is kept in a{}, and no VGPR is dead here to copy it into before live \
                     VGPRs are saved in scratch memory",
                    h.sva
                ));
            }
            spill_frame = Some((target, frame));
        }
        if let Some(ids) = h.work_item_ids {
            let target = targets.next().ok_or_else(|| {
                "the work-item ids are kept in an AGPR, and no second VGPR is free here to load them into".to_string()
            })?;
            loads.push((ids, target));
            work_item_ids = Some(target);
        }
    }
    let mut slot_targets = None;
    if let Some(h) = registers.in_wave_slot {
        let Some(target) = targets.next() else {
            return Err(
                "the State Value Array is kept in memory (no register is free for it across the kernel), and no \
                 VGPR is dead here to load it into, nor an AGPR to park a live one in"
                    .to_string(),
            );
        };
        sva = Some(target);
        if h.work_item_ids {
            let ids = targets.next().ok_or_else(|| {
                "the work-item ids are kept in memory, and no second VGPR is free here to load them into".to_string()
            })?;
            work_item_ids = Some(ids);
        }
        slot_targets = Some((target, work_item_ids.filter(|_| h.work_item_ids), h.indexing));
        // Spills read the instrumentation frame from the SVA: from the
        // copy loaded first, into a VGPR dead here (not one spilled).
        if let (Some(frame), false) = (frame_requested, spilled.is_empty()) {
            if !dead_vgprs.contains(&target) && Some(target) != rescued {
                return Err(
                    "the State Value Array is kept in memory, and no VGPR is dead here to load it into before \
                     live VGPRs are saved in scratch memory"
                        .to_string(),
                );
            }
            spill_frame = Some((target, frame));
        }
    }
    if loads.is_empty() && borrowed.is_empty() && moved.is_empty() && spilled.is_empty() && slot_targets.is_none() {
        return Ok(None);
    }
    let swapped = |s: u16| spill_frame.is_some_and(|(_, frame)| frame.contains(Unit::sgpr(s)));
    let mut dead_pairs = (0..crate::stages::load::allocation::MAX_SGPRS - 1).step_by(2).filter(|s| {
        !live.contains(Unit::sgpr(*s)) && !live.contains(Unit::sgpr(s + 1)) && !swapped(*s) && !swapped(s + 1)
    });
    let exec_pair = dead_pairs
        .next()
        .ok_or_else(|| "no SGPR pair is dead here to save EXEC in around whole-wave copies".to_string())?;
    let slot_loads = match slot_targets {
        Some((sva, work_item_ids, indexing)) => {
            let pair = dead_pairs.next().ok_or_else(|| {
                "the State Value Array is kept in memory, and no second SGPR pair is dead here to address it with"
                    .to_string()
            })?;
            Some(SlotLoads { sva, work_item_ids, pair, indexing })
        }
        None => None,
    };
    let rescue = match (rescued, slot_loads) {
        (Some(vgpr), Some(loads)) => {
            let taken = [exec_pair, exec_pair + 1, loads.pair, loads.pair + 1];
            let dead = |s: u16| {
                s < crate::stages::load::allocation::MAX_SGPRS
                    && !live.contains(Unit::sgpr(s))
                    && !swapped(s)
                    && !taken.contains(&s)
                    && !crate::stages::sva::wave_slots::RESERVED_SGPRS.contains(&s)
            };
            let no_room = || {
                "every VGPR is live here, and too few SGPRs are dead to save one in the wave's slot for the State \
                 Value Array kept in memory"
                    .to_string()
            };
            let resource = (0..crate::stages::load::allocation::MAX_SGPRS)
                .step_by(4)
                .find(|r| (*r..r + 4).all(dead))
                .ok_or_else(no_room)?;
            let mut singles = (0..crate::stages::load::allocation::MAX_SGPRS)
                .filter(|s| dead(*s) && !(resource..resource + 4).contains(s));
            let offset = singles.next().ok_or_else(no_room)?;
            let scc = match live.contains(Unit::special("SCC")) {
                true => Some(singles.next().ok_or_else(no_room)?),
                false => None,
            };
            Some(crate::stages::sva::wave_slots::Rescue { vgpr, resource, offset, scc, indexing: loads.indexing })
        }
        _ => None,
    };
    Ok(Some(SiteParking {
        sva,
        work_item_ids,
        parking: Parking { exec_pair, loads, borrowed, moved, spilled, spill_frame, slot_loads, rescue },
    }))
}

/// Where runs of `runs`' lengths go among `wave_vgprs` VGPRs: for each
/// run, longest first, the window (a run of two or more starts at an even
/// register) of `free` or `movable` VGPRs in no earlier window that holds
/// the fewest live ones (not `free`), the lowest on ties. A run no window
/// takes is left out: the renaming then finds no room, as before.
fn run_windows(runs: VgprRuns, wave_vgprs: u16, free: &BTreeSet<u16>, movable: impl Fn(u16) -> bool) -> BTreeSet<u16> {
    let mut windows = BTreeSet::new();
    for length in runs.lengths() {
        let align = if length >= 2 { 2 } else { 1 };
        let best = (0..wave_vgprs.saturating_sub(length - 1))
            .step_by(align)
            .filter(|base| (*base..base + length).all(|v| (free.contains(&v) || movable(v)) && !windows.contains(&v)))
            .min_by_key(|base| (*base..base + length).filter(|v| !free.contains(v)).count());
        if let Some(base) = best {
            windows.extend(base..base + length);
        }
    }
    windows
}

#[derive(Clone, Debug)]
pub struct PayloadOptions {
    /// Run LLVM's machine verifier after every codegen pass, not only on
    /// the MIR llc parses (codegen::finish; tests do, by default it is off:
    /// it takes about half of llc's time).
    pub verify_each_pass: bool,
    /// Prove on the final machine code that every payload leaves the
    /// registers live at its point as it found them (crate::preservation).
    pub check_preservation: bool,
    /// Per function index.
    pub registers: BTreeMap<usize, FunctionRegisters>,
    /// Payload functions per llc run (see [`PAYLOADS_PER_CHUNK`]).
    pub payloads_per_chunk: usize,
    /// Functions stage sva found no register for, and why.
    pub unplaced: BTreeMap<usize, String>,
    /// Alike points share one payload (see [`sharing`]).
    pub share_payloads: bool,
    /// Points whose hooks read no application register get a template
    /// renamed per point (see [`placement`]; with `share_payloads`).
    pub templates: bool,
    /// Functions whose SVA and work-item ids slide between registers
    /// (stage sva): where they are at each instruction.
    pub sliding: BTreeMap<usize, crate::stages::sva::sliding::Sliding>,
    /// VGPRs a payload gets at least, parking live ones where too few are
    /// dead ([`PAYLOAD_VGPRS`]; payloads LLVM found no registers for are
    /// compiled again with [`STARVED_PAYLOAD_VGPRS`] in aligned pairs).
    pub payload_room: PayloadRoom,
    /// Where to keep the inputs of llc runs that fail (payloads LLVM cannot
    /// compile are left out of an otherwise good run); None: nowhere.
    pub keep_failed: Option<std::path::PathBuf>,
    /// Keep every stage's text for [`CompiledPayloads::render_stages`].
    /// Instrumenting does not: for a large code object the texts take
    /// gigabytes.
    pub keep_stage_texts: bool,
    /// Let LLVM's AMDGPU atomic optimizer rewrite the hooks' atomics. It
    /// must not (stages::codegen::meaning_preserving_arguments): this is
    /// for the test that shows what it does to a counter.
    pub atomic_optimizer: bool,
    /// The code object's progress, advanced as llc batches finish.
    pub progress: crate::progress::CodeObjectProgress,
    /// Where no register is left for a payload even with AGPRs parked,
    /// save live VGPRs in scratch memory around it (on by default; off
    /// to compare).
    pub spill_to_scratch: bool,
    /// A plan's count kept in registers: its points get register
    /// arithmetic instead of the hook where their kernel has the registers.
    pub counts: Option<std::sync::Arc<CountsInRegisters>>,
    /// Payloads compiled by the other groups of kernels of the code object
    /// (`pipeline/pieces.rs`), taken instead of compiled again (see
    /// [`shared`]); None: each compilation on its own.
    pub shared: Option<std::sync::Arc<shared::SharedPayloads>>,
}

/// What a plan counts in registers and where each kernel keeps the count.
#[derive(Clone, Debug, Default)]
pub struct CountsInRegisters {
    /// The plan's counting hooks (`crate::plan::RegisterCount`).
    pub hooks: BTreeSet<String>,
    pub placement: crate::stages::sva::counts::CountPlacement,
}

impl CountsInRegisters {
    /// The registers `point` counts into, when all its calls count and its
    /// kernel keeps the count; with the sums of what the wave and each
    /// active lane add.
    fn of(&self, point: &PayloadPoint) -> Option<(CountRegisters, u32, u32)> {
        let registers = self.placement.registers(point.function)?;
        let (scalar, vector) = count_amounts(&self.hooks, point)?;
        Some((registers, scalar, vector))
    }
}

/// What `point` adds once per wave and once per active lane, when all its
/// calls are to the counting `hooks` with amounts known when instrumenting.
pub fn count_amounts(hooks: &BTreeSet<String>, point: &PayloadPoint) -> Option<(u32, u32)> {
    let (mut scalar, mut vector) = (0u32, 0u32);
    for call in &point.calls {
        if !hooks.contains(&call.hook) {
            return None;
        }
        let [HookArgument::Int(s), HookArgument::Int(v)] = call.arguments.as_slice() else { return None };
        scalar = scalar.checked_add(u32::try_from(*s).ok()?)?;
        vector = vector.checked_add(u32::try_from(*v).ok()?)?;
    }
    Some((scalar, vector))
}

impl Default for PayloadOptions {
    fn default() -> Self {
        PayloadOptions {
            verify_each_pass: false,
            check_preservation: true,
            registers: BTreeMap::new(),
            payloads_per_chunk: PAYLOADS_PER_CHUNK,
            unplaced: BTreeMap::new(),
            share_payloads: true,
            templates: true,
            sliding: BTreeMap::new(),
            payload_room: PayloadRoom::Vgprs(PAYLOAD_VGPRS),
            keep_failed: None,
            keep_stage_texts: true,
            atomic_optimizer: false,
            progress: Default::default(),
            spill_to_scratch: true,
            counts: None,
            shared: None,
        }
    }
}

/// One line of payload code (an instruction or a label). Shared: points
/// whose payloads are copies of one template hold the same lines, and
/// splicing them copies pointers, not text.
pub type CodeLine = std::sync::Arc<str>;

/// A payload's code: shared whole by the points whose copies are alike
/// (a point's copy is a pointer, not 28 of them).
pub type PayloadCode = std::sync::Arc<[CodeLine]>;

/// One point's payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompiledPayload {
    pub label: PointLabel,
    pub function: usize,
    pub instruction: usize,
    /// Instructions and labels to splice in front of the instruction.
    pub code: PayloadCode,
    pub scratch_bytes: u32,
    pub sgprs: u32,
    pub vgprs: u32,
    pub agprs: u32,
    pub kernel_arguments: BTreeSet<KernelArgument>,
    /// Live registers copied in and out, and those kept untouched.
    pub copied: UnitSet,
    pub pinned: UnitSet,
    /// Registers the hooks write on purpose (`writeReg`): the application
    /// sees their new values.
    pub written: UnitSet,
    /// Every register the final code writes (from its machine code).
    pub writes: UnitSet,
    /// Every register it reads or writes, implicit operands included (a
    /// flat instruction reads FLAT_SCRATCH: the allocation's extra SGPRs
    /// depend on it).
    pub touches: UnitSet,
    /// Bytes of the final code, encoded.
    pub bytes: usize,
    /// The counters the code waits for before anything else: those of the
    /// loads in flight at the point whose registers it reads or writes
    /// (decided per point, after payloads are shared; `None` until then).
    pub entry_wait: Option<Counters>,
    /// Live VGPRs the code saves in scratch memory and loads back (no
    /// register was left for it otherwise).
    pub spilled_vgprs: usize,
    /// Why this point cannot be instrumented (then it has no code and is
    /// left out).
    pub rejected: Option<Rejection>,
    /// The code the machine-code check refused, never spliced: `--dump-after
    /// payloads` shows it, for a defect report.
    pub refused_code: Vec<CodeLine>,
}

/// Why a selected point is left out: what a report counts by, and what
/// says what to do about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeftOutCause {
    /// The function's code cannot move (lift found something it cannot relocate).
    NotRelocatable,
    /// The payload needs the State Value Array (or the kernel preamble), and
    /// the kernel has no register for it.
    NoSvaRegister,
    /// LLVM found no registers for the payload around the live ones.
    NoPayloadRegisters,
    /// The payload would push the kernel past the registers a wave may have.
    RegisterLimit,
    /// The payload's machine code would change a live register (a defect of
    /// gpuinstr; never spliced).
    WouldChangeLiveRegister,
    /// An intrinsic cannot be lowered at this point (a hidden argument the
    /// kernel lacks, ...).
    Intrinsic,
}

impl LeftOutCause {
    pub fn describe(self) -> &'static str {
        match self {
            LeftOutCause::NotRelocatable => "the function's code cannot move",
            LeftOutCause::NoSvaRegister => "no register for the State Value Array",
            LeftOutCause::NoPayloadRegisters => "no registers for the payload",
            LeftOutCause::RegisterLimit => "past the registers a wave may have",
            LeftOutCause::WouldChangeLiveRegister => "the payload would change a live register",
            LeftOutCause::Intrinsic => "an intrinsic cannot be lowered there",
        }
    }

    /// What the user can do about it.
    pub fn remedy(self) -> &'static str {
        match self {
            LeftOutCause::NotRelocatable => {
                "`gpuinstr-link lift --emit stats` says why; leave the function out of the plan (`kernels = ...`)"
            }
            LeftOutCause::NoSvaRegister | LeftOutCause::NoPayloadRegisters => {
                "--grow-registers=always lets the allocation grow at a cost in occupancy"
            }
            LeftOutCause::RegisterLimit => {
                "a smaller work-group bound (`__launch_bounds__`) leaves a wave more registers"
            }
            LeftOutCause::WouldChangeLiveRegister => "this is a gpuinstr defect: please report it with the files",
            LeftOutCause::Intrinsic => "see the message; the hook cannot run at that point",
        }
    }
}

/// A point left out: why, and the details.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Rejection {
    pub cause: LeftOutCause,
    pub message: String,
    /// The widest VGPR tuple (in registers) of the payload LLVM found no
    /// registers for: the starved retry makes runs that wide.
    #[serde(skip)]
    pub widest_vgpr_tuple: u16,
}

impl Rejection {
    pub fn new(cause: LeftOutCause, message: impl Into<String>) -> Self {
        Rejection { cause, message: message.into(), widest_vgpr_tuple: 1 }
    }
}

/// A selected point that is not instrumented.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LeftOutPoint {
    /// "kernel k, instruction 3 (S_LOAD_DWORDX2_IMM)".
    pub point: String,
    /// The kernel or device function the point is in.
    pub function: String,
    /// The kernels whose dispatches may run it (their numbers miss it),
    /// filled in once all points are placed.
    pub kernels: Vec<String>,
    pub cause: LeftOutCause,
    pub why: String,
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl CompiledPayload {
    /// A point left alone, and why.
    fn refused(label: PointLabel, point: &PayloadPoint, reason: Rejection) -> CompiledPayload {
        CompiledPayload {
            label,
            function: point.function,
            instruction: point.instruction,
            code: PayloadCode::from([]),
            scratch_bytes: 0,
            sgprs: 0,
            vgprs: 0,
            agprs: 0,
            kernel_arguments: Default::default(),
            copied: UnitSet::EMPTY,
            pinned: UnitSet::EMPTY,
            written: UnitSet::EMPTY,
            writes: UnitSet::EMPTY,
            touches: UnitSet::EMPTY,
            bytes: 0,
            entry_wait: None,
            spilled_vgprs: 0,
            rejected: Some(reason),
            refused_code: Vec::new(),
        }
    }
}

impl CompiledPayload {
    /// Whether the payload reads the State Value Array (kernel arguments or stack).
    pub fn uses_sva(&self) -> bool {
        self.scratch_bytes > 0 || reads_sva_lanes(&self.kernel_arguments)
    }
}

/// The storage of every `__managed__` global of the tool, by the global's
/// name in the tool: clang defines `NAME.managed` beside the pointer `NAME`.
/// The embedded module declares it (the plugin keeps it); for a tool built
/// by an older plugin, which dropped it, the tool's own code object still
/// defines the symbol, and its size and address give the rest. `renamed`
/// maps names given to avoid the application's symbols back.
fn managed_storage_of(
    module: &inkwell::module::Module<'_>,
    renamed: &BTreeMap<String, String>,
    machine: &inkwell::targets::TargetMachine,
    tool: &CodeObject,
    application_symbols: &BTreeSet<&str>,
) -> BTreeMap<String, ManagedStorage> {
    let data = machine.get_target_data();
    let original = |name: &str| renamed.get(name).cloned().unwrap_or_else(|| name.to_string());
    let names: BTreeSet<String> = module.get_globals().map(|g| original(&g.get_name().to_string_lossy())).collect();
    let mut storage: BTreeMap<String, ManagedStorage> = module
        .get_globals()
        .filter_map(|g| {
            let name = g.get_name().to_string_lossy().into_owned();
            let base = original(&name).strip_suffix(".managed")?.to_string();
            names.contains(&base).then(|| {
                let ty = g.get_value_type();
                let storage = ManagedStorage {
                    name,
                    size: data.get_store_size(&ty),
                    alignment: data.get_abi_alignment(&ty).max(g.get_alignment()),
                };
                (base, storage)
            })
        })
        .collect();
    for base in &names {
        let storage_name = format!("{base}.managed");
        if storage.contains_key(base) {
            continue;
        }
        let Some(symbol) = tool.symbols.iter().find(|s| s.name == storage_name && s.section.is_some() && s.size > 0)
        else {
            continue;
        };
        let name = if application_symbols.contains(storage_name.as_str()) {
            format!("gpuinstr.tool.{storage_name}")
        } else {
            storage_name
        };
        // The storage's address in the tool's code object bounds its alignment.
        let alignment = 1u32 << symbol.value.trailing_zeros().min(4);
        storage.insert(base.clone(), ManagedStorage { name, size: symbol.size, alignment });
    }
    storage
}

/// The initial value of the tool's global `name` (`size` bytes) in the
/// tool's own code object: None when it is zero or the tool does not define
/// it; an error when it holds an address, which would be the tool's, not
/// the instrumented code object's.
/// One of the tool's globals as the instrumented code object defines it.
fn tool_global(
    tool: &CodeObject,
    global: inkwell::values::GlobalValue<'_>,
    renamed: &BTreeMap<String, String>,
    managed: &BTreeMap<String, ManagedStorage>,
    machine: &inkwell::targets::TargetMachine,
) -> Result<ToolGlobal, ToolProblem> {
    let target_data = machine.get_target_data();
    let ty = global.get_value_type();
    let name = global.get_name().to_string_lossy().into_owned();
    let tool_name = renamed.get(&name).cloned().unwrap_or_else(|| name.clone());
    let mut g = ToolGlobal {
        initial: None,
        managed_storage: managed.get(&tool_name).cloned(),
        tool_name,
        name,
        size: target_data.get_store_size(&ty),
        alignment: target_data.get_abi_alignment(&ty).max(global.get_alignment()),
        address_space: crate::tool::address_space_of(global),
        records: None,
        ring: None,
    };
    let (data, size) = match &g.managed_storage {
        Some(storage) => (format!("{}.managed", g.tool_name), storage.size),
        None => (g.tool_name.clone(), g.size),
    };
    g.initial = initial_value(tool, &data, size)?;
    Ok(g)
}

/// The global a plan counts into in registers (`count-in-registers`): a
/// 64-bit integer of the tool's, renamed like the payloads' globals where
/// the application has a symbol of its name.
fn count_global(tool: &CodeObject, lifted: &LiftedCodeObject<'_>, name: &str) -> Result<ToolGlobal, CompileError> {
    let context = Context::create();
    let module = read_tool_module(&context, tool)?;
    let Some(global) = module.get_global(name) else {
        return Err(CompileError::CountGlobal(format!(
            "the plan counts into `{name}`, which the tool does not define (a 64-bit __device__ or __managed__ \
             global; `gpuinstr-link inspect --tool` lists its globals)"
        )));
    };
    let application_symbols: BTreeSet<&str> = lifted.code_object.symbols.iter().map(|s| s.name.as_str()).collect();
    let mut renamed = BTreeMap::new();
    if application_symbols.contains(name) {
        let new = format!("gpuinstr.tool.{name}");
        global.as_pointer_value().set_name(&new);
        renamed.insert(new, name.to_string());
    }
    let machine = lower_ir::target_machine(&lifted.code_object.target)?;
    let managed = managed_storage_of(&module, &renamed, &machine, tool, &application_symbols);
    let global = tool_global(tool, global, &renamed, &managed, &machine)?;
    let size = global.managed_storage.as_ref().map_or(global.size, |storage| storage.size);
    if size != 8 {
        return Err(CompileError::CountGlobal(format!(
            "the plan counts into `{name}`, which holds {size} bytes: a count in registers is added to a 64-bit integer"
        )));
    }
    Ok(global)
}

fn initial_value(tool: &CodeObject, name: &str, size: u64) -> Result<Option<Vec<u8>>, ToolProblem> {
    let bytes = crate::tool::defined_bytes(tool, name, size)?;
    Ok(bytes.filter(|bytes| bytes.iter().any(|&b| b != 0)).map(<[u8]>::to_vec))
}

/// The tool's record buffers (`GPUINSTR_RECORDS`) among the globals the
/// payloads use, each checked: its count is a 64-bit global they use too,
/// and the buffer holds whole records.
fn attach_records(tool: &CodeObject, globals: &mut [ToolGlobal]) -> Result<(), ToolProblem> {
    for declaration in crate::tool::records_declarations(tool)? {
        let bad = |why: String| ToolProblem::BadRecordsDeclaration { buffer: declaration.buffer.clone(), why };
        let Some(buffer) = globals.iter().position(|g| g.tool_name == declaration.buffer) else {
            continue; // no payload writes it
        };
        let count = globals.iter().find(|g| g.tool_name == declaration.count).ok_or_else(|| {
            bad(format!("the hooks write `{}` but never its count `{}`", declaration.buffer, declaration.count))
        })?;
        if count.size != 8 {
            return Err(bad(format!(
                "the count `{}` is {} bytes, not a 64-bit integer",
                declaration.count, count.size
            )));
        }
        let size = globals[buffer].data().1;
        if !size.is_multiple_of(declaration.record_bytes) {
            return Err(bad(format!("{size} bytes are not whole records of {} bytes", declaration.record_bytes)));
        }
        globals[buffer].records = Some(crate::stages::load::instrumented::Records {
            count: declaration.count,
            record_bytes: declaration.record_bytes,
        });
    }
    Ok(())
}

/// The tool's rings (`GPUINSTR_RING`) among the globals the payloads use,
/// each checked to be a plain 64-bit pointer.
fn attach_rings(tool: &CodeObject, globals: &mut [ToolGlobal]) -> Result<(), ToolProblem> {
    for declaration in crate::tool::ring_declarations(tool)? {
        let Some(ring) = globals.iter_mut().find(|g| g.tool_name == declaration.ring) else {
            continue; // no payload appends to it
        };
        if ring.managed_storage.is_some() || ring.size != 8 {
            return Err(ToolProblem::BadRingDeclaration {
                ring: declaration.ring,
                why: "the ring is not the 64-bit __device__ pointer GPUINSTR_RING declares".into(),
            });
        }
        ring.ring = Some(declaration.record_bytes);
    }
    Ok(())
}

/// Whether hooks reading `arguments` read SVA lanes (kernel arguments the
/// preamble stored, or the kernarg pointer for hidden ones).
fn reads_sva_lanes(arguments: &BTreeSet<KernelArgument>) -> bool {
    use gpuinstr_intrinsics::Storage;
    arguments.iter().any(|a| matches!(a.storage(), Storage::Lanes { .. } | Storage::Hidden { .. }))
}

fn reads_work_item_ids(arguments: &BTreeSet<KernelArgument>) -> bool {
    arguments.iter().any(|a| matches!(a.storage(), gpuinstr_intrinsics::Storage::WorkItemId { .. }))
}

/// Every intermediate text, for `--dump` and snapshot tests.
#[derive(Clone, Debug, Default)]
pub struct StageTexts {
    /// Stage 5: the payload module as built.
    pub payload_ir: String,
    /// Stage 6: after O3 and the placeholders.
    pub lowered_ir: String,
    /// Stage 7: MIR after instruction selection.
    pub selected_mir: String,
    /// Stage 8: MIR with intrinsics lowered and live registers in place.
    pub lowered_mir: String,
    /// llc's assembly of all payloads.
    pub assembly: String,
}

/// A global variable of the tool that payloads use: the instrumented code
/// object defines it (with the tool's initial value) so the code links and
/// the host can find it by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolGlobal {
    /// The tool's initial value of the data (for a managed global, of its
    /// storage), from the tool's own code object; None when it is zero.
    pub initial: Option<Vec<u8>>,
    /// For a `__managed__` variable (device code reads it through a pointer
    /// that HIP fills in only for variables the host registered): the
    /// storage the pointer is made to point at, so payloads write real
    /// memory with no help from the application.
    pub managed_storage: Option<ManagedStorage>,
    /// The name in the instrumented code object.
    pub name: String,
    /// The name in the tool: different when the application has a symbol of
    /// that name (the tool's global is then `gpuinstr.tool.<name>`).
    pub tool_name: String,
    pub size: u64,
    pub alignment: u32,
    pub address_space: u32,
    /// A buffer of records (`GPUINSTR_RECORDS`): the runtime copies only
    /// the records its count says were written.
    pub records: Option<crate::stages::load::instrumented::Records>,
    /// A ring of records (`GPUINSTR_RING`; this global points at its
    /// head): bytes per record.
    pub ring: Option<u64>,
}

impl ToolGlobal {
    /// Where its data lives in the instrumented code object: its own
    /// symbol, or a managed global's storage (name, size, alignment).
    pub fn data(&self) -> (&str, u64, u32) {
        match &self.managed_storage {
            Some(storage) => (&storage.name, storage.size, storage.alignment),
            None => (&self.name, self.size, self.alignment),
        }
    }
}

/// Where a `__managed__` tool global's value lives: clang's `NAME.managed`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedStorage {
    /// The storage's name in the instrumented code object.
    pub name: String,
    pub size: u64,
    pub alignment: u32,
}

pub struct CompiledPayloads {
    pub payloads: Vec<CompiledPayload>,
    /// The tool's globals the payloads' code refers to.
    pub globals: Vec<ToolGlobal>,
    /// Each LLVM compilation of payloads, in the order they ran.
    pub compilations: Vec<Compilation>,
    /// Per point: which payload function of which compilation is its code.
    pub compiled_as: Vec<PayloadSource>,
    /// Wall time of each step, in pipeline order.
    pub timings: Vec<(&'static str, std::time::Duration)>,
    /// Points whose payload adds to a count kept in registers (no hook
    /// compiled for them).
    pub counted: BTreeSet<usize>,
    /// Kernels whose first instruction's counting point sets the count
    /// (their entry clears nothing).
    pub counts_set_at_entry: BTreeSet<usize>,
}

/// Why payloads are compiled (again).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CompilePass {
    /// Every point, at its own site.
    #[default]
    First,
    /// Points LLVM gave AGPRs past the kernel's allowance, with those
    /// taken.
    WithoutAgprs,
    /// Points LLVM found no registers for, with more VGPRs parked.
    MoreRegisters,
    /// Points whose code the machine-code check refused, with the pinned
    /// VGPRs kept through the blocks' terminators
    /// ([`lower_mir::PinnedUntil::TheLastTerminator`]).
    PinnedThroughTerminators,
}

/// Which points one compilation gives one payload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sharing {
    /// Points whose payloads read no application register, one template
    /// per hook shape renamed per point (see [`placement`]).
    Template,
    /// Alike points (see [`sharing`]).
    #[default]
    Alike,
    /// Alike points with the same live VGPRs: the members of a group LLVM
    /// could not compile for the union, and every retry with more room.
    SameVgprs,
    /// Each point its own payload.
    OneByOne,
}

impl Sharing {
    /// Who shares when a group of this sharing could not be compiled in
    /// `pass`, if anyone. Members of a group with the same live VGPRs
    /// rarely fare better alone: before the pass with more VGPRs they wait
    /// for it (compiling them one by one cost more than the rest of the
    /// stage on rocRAND); in it, they are compiled one by one.
    fn narrower(self, pass: CompilePass) -> Option<Sharing> {
        match (self, pass) {
            (Sharing::Template, _) => None,
            (Sharing::Alike, _) => Some(Sharing::SameVgprs),
            (Sharing::SameVgprs, CompilePass::MoreRegisters) => Some(Sharing::OneByOne),
            (
                Sharing::SameVgprs,
                CompilePass::First | CompilePass::WithoutAgprs | CompilePass::PinnedThroughTerminators,
            )
            | (Sharing::OneByOne, _) => None,
        }
    }
}

/// One llc compilation of payload functions and its texts (empty unless
/// [`PayloadOptions::keep_stage_texts`]).
pub struct Compilation {
    pub pass: CompilePass,
    pub sharing: Sharing,
    /// Payload functions compiled, and how many of them were refused.
    pub payloads: usize,
    pub refused: usize,
    /// Wall time of the compilation, O3 to the machine-code check.
    pub seconds: f64,
    pub texts: StageTexts,
    /// Its payloads were taken from another group of kernels' compilation
    /// ([`shared`]), not compiled here.
    pub shared: bool,
}

/// Where a point's payload was compiled: function `position` of
/// compilation `compilation`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PayloadSource {
    pub compilation: usize,
    pub position: usize,
}

impl CompiledPayloads {
    /// The payload stage's text form (`gpuinstr-link instrument
    /// --dump-after payloads`): each point's final code with what it waits
    /// for and spills, or why it is left out.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for (index, payload) in self.payloads.iter().enumerate() {
            if let Some(rejected) = &payload.rejected {
                writeln!(out, "point {index} ({}): left out: {rejected}", payload.label).unwrap();
                // What the check refused, commented out: never spliced.
                for line in &payload.refused_code {
                    writeln!(out, "  ; {line}").unwrap();
                }
                continue;
            }
            let wait = payload.entry_wait.and_then(|w| w.wait_instruction()).unwrap_or_else(|| "nothing".into());
            let counted = if self.counted.contains(&index) { ", counted in registers" } else { "" };
            writeln!(
                out,
                "point {index} ({}): waits for {wait}, {} bytes, {} spilled VGPRs, stack {} bytes{counted}",
                payload.label, payload.bytes, payload.spilled_vgprs, payload.scratch_bytes
            )
            .unwrap();
            for line in payload.code.iter() {
                writeln!(out, "{}{line}", if line.ends_with(':') { "" } else { "  " }).unwrap();
            }
        }
        out
    }

    /// The compilation point `index`'s payload comes from.
    pub fn compilation_of(&self, index: usize) -> &Compilation {
        &self.compilations[self.compiled_as[index].compilation]
    }

    /// How many payload functions LLVM compiled for the points.
    pub fn distinct_payloads(&self) -> usize {
        let compiled = self.compiled_as.iter().enumerate().filter(|(i, _)| !self.counted.contains(i));
        let compiled =
            compiled.filter(|(_, source)| !self.compilations.get(source.compilation).is_some_and(|c| c.shared));
        compiled.map(|(_, source)| source).collect::<BTreeSet<_>>().len()
    }
}

#[derive(Debug, Error)]
pub enum CompileError {
    #[error("{0}")]
    Tool(#[from] ToolProblem),
    #[error("{0}")]
    CountGlobal(String),
    #[error(transparent)]
    Payload(#[from] PayloadError),
    #[error(transparent)]
    LowerIr(#[from] LowerIrError),
    #[error(transparent)]
    Codegen(#[from] CodegenError),
    #[error(transparent)]
    LowerMir(#[from] LowerMirError),
    #[error(transparent)]
    FinalCode(#[from] FinalCodeError),
    #[error("point {index}: {why}")]
    BadPoint { index: usize, why: String },
    #[error(transparent)]
    Preservation(#[from] crate::preservation::PreservationError),
    #[error("the payload module is invalid after {stage}: {message}")]
    InvalidModule { stage: &'static str, message: String },
    #[error("temporary files: {0}")]
    Io(#[from] std::io::Error),
}

impl CompileError {
    /// The error of a compilation over some of the points, with point
    /// indices of that compilation (`indices[i]` for its point `i`).
    fn at_points(self, indices: &[usize]) -> CompileError {
        match self {
            CompileError::BadPoint { index, why } => {
                CompileError::BadPoint { index: indices.get(index).copied().unwrap_or(index), why }
            }
            other => other,
        }
    }
}

/// Payload functions per llc run: large enough that process start-up does
/// not matter, small enough that LLVM's per-module costs stay flat.
pub const PAYLOADS_PER_CHUNK: usize = 256;

/// Splits printed IR into modules of at most `per_chunk` function
/// definitions each, all with the whole rest of the module (declarations,
/// globals, attributes, metadata).
fn chunk_ir(ir: &str, per_chunk: usize) -> Vec<String> {
    let mut header = String::new();
    let mut functions: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    for line in ir.lines() {
        if let Some(function) = current.as_mut() {
            function.push_str(line);
            function.push('\n');
            if line == "}" {
                functions.push(current.take().expect("inside a function"));
            }
            continue;
        }
        if line.starts_with("define ") {
            current = Some(format!("{line}\n"));
        } else if !line.starts_with("; Function Attrs:") {
            header.push_str(line);
            header.push('\n');
        }
    }
    if functions.is_empty() {
        return vec![header];
    }
    functions.chunks(per_chunk.max(1)).map(|chunk| format!("{header}\n{}", chunk.join("\n"))).collect()
}

/// llc's allocation and emission of a lowered chunk. When it fails, the
/// chunk is split in halves until the payloads LLVM cannot compile stand
/// alone; those are left out, named in `rejected` with llc's message.
fn finish_rejecting(
    module: &lower_mir::MirModule,
    target: &crate::stages::load::TargetId,
    version: u32,
    verify_each_pass: bool,
    directory: &std::path::Path,
    keep_failed: Option<&std::path::Path>,
    rejected: &mut Vec<(String, String)>,
) -> Result<String, CompileError> {
    // Every payload of the chunk was refused while lowering (their reasons
    // are reported): nothing for llc, which rejects a module without one.
    if module.functions.is_empty() {
        return Ok(String::new());
    }
    match codegen::finish(&module.print(), target, version, verify_each_pass, directory, keep_failed) {
        Ok(assembly) => Ok(assembly),
        Err(CodegenError::Llc { step, message, kept }) => {
            let names: Vec<String> = module.functions.iter().map(|f| f.name.clone()).collect();
            let again = |part: &lower_mir::MirModule, rejected: &mut Vec<(String, String)>| {
                finish_rejecting(part, target, version, verify_each_pass, directory, keep_failed, rejected)
            };
            // Out of registers in some functions: find them in one more
            // run, leave them out, and compile the rest (if any).
            if names.len() > 1 && ran_out_of_registers(&message) {
                let failing =
                    codegen::failing_functions(&module.print(), target, version, verify_each_pass, directory)?;
                let placed = !failing.is_empty()
                    && failing.iter().all(|(name, why)| names.contains(name) && ran_out_of_registers(why));
                if placed {
                    let rest = module.retain(|n| !failing.iter().any(|(f, _)| f == n));
                    rejected.extend(failing);
                    return again(&rest, rejected);
                }
            }
            if names.len() <= 1 {
                // Only a register allocator's failure leaves the point out;
                // anything else is our MIR or llc failing, and says so.
                if !ran_out_of_registers(&message) {
                    return Err(CodegenError::Llc { step, message, kept }.into());
                }
                rejected.extend(names.into_iter().map(|n| (n, message.clone())));
                return Ok(String::new());
            }
            let (left, right) = names.split_at(names.len() / 2);
            let mut halves = Vec::with_capacity(2);
            for half in [left, right] {
                halves.push(again(&module.retain(|n| half.iter().any(|h| h == n)), rejected)?);
            }
            Ok(halves.join("\n"))
        }
        Err(other) => Err(other.into()),
    }
}

/// Whether llc failed because the register allocator found no registers
/// (the messages of LLVM 15 to 21).
fn ran_out_of_registers(message: &str) -> bool {
    ["ran out of registers", "no registers from class", "register allocation failed", "couldn't allocate"]
        .iter()
        .any(|phrase| message.contains(phrase))
}

/// Runs `work` on every item, on as many threads as there are cores; the
/// results in item order.
fn parallel<T: Sync, R: Send>(
    items: &[T],
    work: impl Fn(usize, &T) -> Result<R, CompileError> + Sync,
) -> Result<Vec<R>, CompileError> {
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len()).max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Result<R, CompileError>>>> =
        items.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(item) = items.get(index) else { break };
                *results[index].lock().expect("result slot") = Some(work(index, item));
            });
        }
    });
    results.into_iter().map(|r| r.into_inner().expect("result slot").expect("every item ran")).collect()
}

/// A hook argument as written on a command line or in a plan: `true`,
/// `false`, an integer (`12`, `-3`, `0x40`), a float (`1.5`), or a register
/// (`s4`, `v0`, `exec`).
pub fn parse_hook_argument(text: &str) -> Result<HookArgument, String> {
    let text = text.trim();
    match text {
        "true" => return Ok(HookArgument::Int(1)),
        "false" => return Ok(HookArgument::Int(0)),
        _ => {}
    }
    let hex = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X"));
    if let Some(value) = hex.and_then(|h| u64::from_str_radix(h, 16).ok()) {
        return Ok(HookArgument::Int(value as i64));
    }
    if let Ok(value) = text.parse::<i64>() {
        return Ok(HookArgument::Int(value));
    }
    if let Ok(value) = text.parse::<f64>() {
        return Ok(HookArgument::Float(value));
    }
    text.parse::<gpuinstr_intrinsics::Register>().map(HookArgument::Register).map_err(|_| {
        format!(
            "`{text}` is not a hook argument (expected true, false, an integer, a float, or a register like s4 or v0)"
        )
    })
}

/// The function and instruction index of `FUNCTION:INDEX`.
pub fn parse_point(lifted: &LiftedCodeObject<'_>, at: &str) -> Result<(usize, usize), String> {
    let (name, index) = at
        .rsplit_once(':')
        .and_then(|(name, index)| Some((name, index.parse::<usize>().ok()?)))
        .ok_or_else(|| format!("`{at}` is not FUNCTION:INDEX (e.g. my_kernel:12)"))?;
    let function = lifted
        .functions
        .iter()
        .position(|f| f.name == name)
        .ok_or_else(|| format!("no kernel or device function named `{name}` (gpuinstr-link inspect lists them)"))?;
    let count = lifted.functions[function].instructions().count();
    if index >= count {
        return Err(format!("`{name}` has {count} instructions; {index} is out of range"));
    }
    Ok((function, index))
}

/// "kernel k, instruction 3 (S_LOAD_DWORDX2_IMM)".
fn label(lifted: &LiftedCodeObject<'_>, point: &PayloadPoint) -> Result<String, String> {
    Labeller::default().label(lifted, point).map(|label| label.to_string())
}

/// Every point's label; a point that names no instruction is an error.
fn point_labels(lifted: &LiftedCodeObject<'_>, points: &[PayloadPoint]) -> Result<Vec<PointLabel>, CompileError> {
    let mut labeller = Labeller::default();
    let mut labels = Vec::with_capacity(points.len());
    for (index, point) in points.iter().enumerate() {
        labels.push(labeller.label(lifted, point).map_err(|why| CompileError::BadPoint { index, why })?);
    }
    Ok(labels)
}

/// What each point offers its payload: the registers live there (from
/// liveness), the function's SVA and work-item id registers, and the hidden
/// argument offsets of its kernel.
pub fn payload_sites(
    lifted: &LiftedCodeObject<'_>,
    liveness: &Liveness,
    points: &[PayloadPoint],
    options: &PayloadOptions,
) -> Result<Vec<PayloadSite>, CompileError> {
    let code_object = lifted.code_object;
    let mut sites = Vec::with_capacity(points.len());
    let mut pending = std::collections::HashMap::new();
    let exports = crate::stages::liveness::pending::exports_anywhere(&lifted.functions, &lifted.isa);
    let mut hidden_of_kernel: std::collections::HashMap<usize, std::sync::Arc<BTreeMap<String, u32>>> =
        std::collections::HashMap::new();
    let mut instruction_counts: rustc_hash::FxHashMap<usize, usize> = Default::default();
    let mut agpr_caps: rustc_hash::FxHashMap<(u16, u16), u16> = Default::default();
    for (index, point) in points.iter().enumerate() {
        let Some(function) = lifted.functions.get(point.function) else {
            return Err(CompileError::BadPoint { index, why: "no such function".into() });
        };
        let count = *instruction_counts.entry(point.function).or_insert_with(|| function.instructions().count());
        if point.instruction >= count {
            // The label says what is wrong.
            label(lifted, point).map_err(|why| CompileError::BadPoint { index, why })?;
        }
        let mut registers = options.registers.get(&point.function).copied().unwrap_or_default();
        if let Some(slid) = options.sliding.get(&point.function) {
            registers.sva = Some(slid.sva.location[point.instruction]);
            registers.work_item_ids = slid.work_item_ids.as_ref().map(|t| t.location[point.instruction]);
        }
        let (hidden_arguments, max_flat_workgroup_size) = match function.kind {
            FunctionKind::Kernel(kernel) => {
                let metadata = &code_object.kernels[kernel].metadata;
                let hidden = hidden_of_kernel.entry(kernel).or_insert_with(|| {
                    std::sync::Arc::new(
                        metadata
                            .arguments
                            .iter()
                            .filter(|a| a.is_hidden())
                            .map(|a| (a.value_kind.clone(), a.offset as u32))
                            .collect(),
                    )
                });
                (Some(hidden.clone()), metadata.max_flat_workgroup_size as u32)
            }
            FunctionKind::DeviceFunction => (None, 1024),
        };
        let pending = pending.entry(point.function).or_insert_with(|| {
            crate::stages::liveness::pending::pending_before(
                function,
                &lifted.isa,
                &liveness.functions[point.function],
                exports,
            )
        })[point.instruction]
            .clone();
        // Registers loads may still write are not the payloads' (they would
        // wait for the loads first).
        let mut live = liveness.functions[point.function].live_in[point.instruction];
        live.union_with(&pending.known_vector_registers());
        // (Whether a branch goes back to the entry is asked only there: it
        // reads the whole function.)
        let at_entry = point.instruction == function.entry && !function.entry_is_branch_target();
        if let (FunctionKind::Kernel(kernel), true) = (function.kind, at_entry) {
            // At a kernel's first instruction only what the hardware set
            // holds anything: registers read before any write are undefined.
            live = live.intersection(&crate::stages::liveness::kernel_inputs(
                &code_object.kernels[kernel].descriptor,
                liveness.processor,
            ));
            // A count kept in registers is set before the entry's payloads.
            if let Some(registers) = options.counts.as_ref().and_then(|c| c.placement.registers(point.function)) {
                live.union_with(&registers.units());
            }
        }
        let processor = liveness.processor;
        let (wave_vgprs, _) = crate::stages::load::occupancy::wave_register_limit(processor, max_flat_workgroup_size);
        let max_vgprs = match registers.payload_vgprs {
            0 => wave_vgprs as u16,
            cap => cap.min(wave_vgprs as u16),
        };
        let max_agprs = match registers.allocation_cap {
            0 => 256,
            cap => *agpr_caps
                .entry((max_vgprs, cap))
                .or_insert_with(|| crate::stages::sva::agprs_within(processor, max_vgprs, cap)),
        };
        let mut site = PayloadSite {
            live,
            sva: registers.sva,
            work_item_ids: registers.work_item_ids,
            hidden_arguments,
            max_flat_workgroup_size,
            max_vgprs,
            max_agprs,
            unplaced: options.unplaced.get(&point.function).cloned(),
            parking: None,
            pending,
        };
        // AGPR homes stay put: LLVM spills to free AGPRs on gfx908/gfx90a.
        for home in registers.in_agprs.iter().flat_map(AgprHomes::agprs) {
            site.live.insert(Unit::agpr(home));
        }
        // Spilling to scratch is the last resort (the starved retry), and
        // reaches the instrumentation frame through an SVA in a VGPR (its
        // home, or a copy loaded from its AGPR or its wave's slot).
        let spill_frame = (options.payload_room.is_roomy()
            && options.spill_to_scratch
            && (registers.sva.is_some() || registers.in_wave_slot.is_some() || registers.in_agprs.is_some()))
        .then(|| Frame::new(lifted.code_object.target.has_architected_flat_scratch()));
        let read = vgprs_read(point);
        match plan_parking(&registers, &live, &read, max_vgprs, max_agprs, options.payload_room, spill_frame) {
            Ok(Some(planned)) => {
                site.sva = planned.sva;
                site.work_item_ids = planned.work_item_ids;
                // Parked VGPRs are the payload's; the AGPRs holding them are not.
                for (vgpr, agpr) in &planned.parking.borrowed {
                    site.live.remove(Unit::vgpr(*vgpr));
                    site.live.insert(Unit::agpr(*agpr));
                }
                for vgpr in planned.parking.spilled.iter().chain(planned.parking.rescue.as_ref().map(|r| &r.vgpr)) {
                    site.live.remove(Unit::vgpr(*vgpr));
                }
                for (from, to) in &planned.parking.moved {
                    site.live.remove(Unit::vgpr(*from));
                    site.live.insert(Unit::vgpr(*to));
                }
                site.parking = Some(planned.parking);
            }
            Ok(None) => {}
            Err(why) => {
                if registers.loads_sva() {
                    site.sva = None;
                    site.work_item_ids = None;
                }
                site.unplaced = Some(why);
            }
        }
        sites.push(site);
    }
    Ok(sites)
}

/// Compiles the payloads of every point of one code object.
pub fn compile_payloads(
    tool: &CodeObject,
    lifted: &LiftedCodeObject<'_>,
    liveness: &Liveness,
    points: &[PayloadPoint],
    registry: &Registry,
    options: &PayloadOptions,
) -> Result<CompiledPayloads, CompileError> {
    let Some(counts) = &options.counts else {
        return compile_hook_payloads(tool, lifted, liveness, points, registry, options);
    };
    let started = std::time::Instant::now();
    let (counted, called): (Vec<usize>, Vec<usize>) = (0..points.len()).partition(|i| counts.of(&points[*i]).is_some());
    if counted.is_empty() {
        return compile_hook_payloads(tool, lifted, liveness, points, registry, options);
    }
    let counted_points: Vec<PayloadPoint> = counted.iter().map(|i| points[*i].clone()).collect();
    let labels = point_labels(lifted, &counted_points)?;
    // The counting code needs no room: parked, the count's registers would
    // be saved and given back around the add.
    let unparked = PayloadOptions { payload_room: PayloadRoom::Unparked, ..options.clone() };
    let sites = payload_sites(lifted, liveness, &counted_points, &unparked)?;
    let scc = Unit::special("SCC");
    let amounts = block_scalars_first(lifted, &counted_points, |point| {
        let (_, scalar, vector) = counts.of(point).expect("partitioned");
        (scalar, vector)
    });
    let mut set_at_entry = BTreeSet::new();
    let mut payloads: Vec<CompiledPayload> = counted_points
        .iter()
        .zip(labels)
        .zip(&sites)
        .zip(amounts)
        .map(|(((point, label), site), (scalar, vector))| {
            let registers = counts.placement.registers(point.function).expect("partitioned");
            let carry_wait = liveness.processor.architected_flat_scratch;
            let at_entry = point.instruction == lifted.functions[point.function].entry;
            if at_entry && register_counts::sets_at_entry(registers, vector) {
                set_at_entry.insert(point.function);
            }
            let code =
                register_counts::point_code(registers, scalar, vector, site.live.contains(scc), carry_wait, at_entry);
            CompiledPayload {
                code: code.into(),
                rejected: None,
                // The count's registers change on purpose.
                written: registers.units(),
                ..CompiledPayload::refused(label, point, Rejection::new(LeftOutCause::Intrinsic, String::new()))
            }
        })
        .collect();
    let site_refs: Vec<&PayloadSite> = sites.iter().collect();
    measure_and_check(lifted, &mut payloads, &site_refs, options)?;
    wait_for_loads_in_flight(&mut payloads, &sites);
    let counting_time = started.elapsed();

    let mut compiled = CompiledPayloads::not_yet(points, &point_labels(lifted, points)?);
    if !called.is_empty() {
        let called_points: Vec<PayloadPoint> = called.iter().map(|i| points[*i].clone()).collect();
        let others = compile_hook_payloads(tool, lifted, liveness, &called_points, registry, options)
            .map_err(|error| error.at_points(&called))?;
        compiled.adopt(&called, others);
    }
    for (index, payload) in counted.iter().zip(payloads) {
        compiled.payloads[*index] = payload;
        compiled.counted.insert(*index);
    }
    compiled.counts_set_at_entry = set_at_entry;
    let global = count_global(tool, lifted, &counts.placement.global)?;
    if !compiled.globals.iter().any(|g| g.name == global.name) {
        compiled.globals.push(global);
    }
    compiled.timings.insert(0, ("payload: count in registers", counting_time));
    Ok(compiled)
}

/// What each counting point adds (`amount` of each, in the same order):
/// a wave runs every instruction of a basic block it enters, so the
/// scalar amounts of a block's points are all added at its first one;
/// the vector amounts stay where they are (EXEC may change between them).
/// Points after the first with nothing vector to add cost nothing.
fn block_scalars_first(
    lifted: &LiftedCodeObject<'_>,
    points: &[PayloadPoint],
    amount: impl Fn(&PayloadPoint) -> (u32, u32),
) -> Vec<(u32, u32)> {
    let mut blocks_of: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut block_of = |point: &PayloadPoint| -> usize {
        let blocks = blocks_of.entry(point.function).or_insert_with(|| {
            let function = &lifted.functions[point.function];
            function
                .blocks
                .iter()
                .enumerate()
                .flat_map(|(b, block)| std::iter::repeat_n(b, block.instructions.len()))
                .collect()
        });
        blocks[point.instruction]
    };
    let mut amounts: Vec<(u32, u32)> = points.iter().map(&amount).collect();
    let mut first_in_block: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    for (index, point) in points.iter().enumerate() {
        let key = (point.function, block_of(point));
        let Some(&first) = first_in_block.get(&key) else {
            first_in_block.insert(key, index);
            continue;
        };
        // The first point of a block is the one with the lowest index.
        let (into, from) = if points[first].instruction < point.instruction { (first, index) } else { (index, first) };
        // (A sum past 32 bits stays where it is.)
        if let Some(sum) = amounts[into].0.checked_add(amounts[from].0) {
            (amounts[into].0, amounts[from].0) = (sum, 0);
        }
        first_in_block.insert(key, into);
    }
    amounts
}

/// The payloads of points that call hooks (stages 5 to 8).
fn compile_hook_payloads(
    tool: &CodeObject,
    lifted: &LiftedCodeObject<'_>,
    liveness: &Liveness,
    points: &[PayloadPoint],
    registry: &Registry,
    options: &PayloadOptions,
) -> Result<CompiledPayloads, CompileError> {
    let compiler = Compiler { tool, lifted, registry };
    // A template needs a few registers: it tries each point's own dead
    // registers first, with nothing parked (parking costs code at run time).
    let templates = options.templates && options.share_payloads;
    let first_room = match templates {
        true => PayloadOptions { payload_room: PayloadRoom::Vgprs(0), ..options.clone() },
        false => options.clone(),
    };
    // Each point's site as it was compiled for: the bare one where a
    // template placed it, else the payload room's (computed only there).
    let mut sites = payload_sites(lifted, liveness, points, &first_room)?;
    let (mut compiled, rest) = compile_templates(compiler, liveness, points, &sites, options)?;

    if !rest.is_empty() {
        let rest_points: Vec<PayloadPoint> = rest.iter().map(|i| points[*i].clone()).collect();
        let rest_sites: Vec<PayloadSite> = match templates {
            true => payload_sites(lifted, liveness, &rest_points, options)?,
            false => rest.iter().map(|i| sites[*i].clone()).collect(),
        };
        // AGPRs past the kernel's allowance would be refused after llc
        // (and compiled again without them): taken from the start.
        let rest_sites: Vec<PayloadSite> = rest_sites.iter().map(with_agprs_past_allowance_taken).collect();
        let others = compile_shared(compiler, &rest_points, &rest_sites, options, CompilePass::First, Sharing::Alike)
            .map_err(|error| error.at_points(&rest))?;
        compiled.adopt(&rest, others);
        for (index, site) in rest.iter().zip(rest_sites) {
            sites[*index] = site;
        }
    }
    compile_again_without_agprs(tool, lifted, points, &sites, registry, options, &mut compiled)?;

    // Points LLVM found no registers for: once more, with more VGPRs
    // parked (one batch, so the work stays linear).
    let starved: Vec<usize> = (0..points.len())
        .filter(|i| {
            // Also a point with too few dead VGPRs to load the SVA kept in
            // memory into: the retry frees live ones.
            let loads_sva = options.registers.get(&points[*i].function).is_some_and(|r| r.in_wave_slot.is_some());
            compiled.payloads[*i].rejected.as_ref().is_some_and(|r| {
                r.cause == LeftOutCause::NoPayloadRegisters || (loads_sva && r.cause == LeftOutCause::NoSvaRegister)
            })
        })
        .collect();
    if !starved.is_empty() && !options.payload_room.is_roomy() {
        // Each point's room as wide as its payload's tuples; the sites of
        // points alike in room planned together.
        let rooms: Vec<PayloadRoom> = starved
            .iter()
            .map(|i| starved_room(compiled.payloads[*i].rejected.as_ref().map_or(1, |r| r.widest_vgpr_tuple)))
            .collect();
        let mut starved_sites: Vec<Option<PayloadSite>> = vec![None; starved.len()];
        for room in rooms.iter().copied().collect::<BTreeSet<_>>() {
            let members: Vec<usize> = (0..starved.len()).filter(|k| rooms[*k] == room).collect();
            let member_points: Vec<PayloadPoint> = members.iter().map(|k| points[starved[*k]].clone()).collect();
            let roomier = PayloadOptions { payload_room: room, ..options.clone() };
            // AGPRs past the kernel's allowance taken, as for the first
            // pass (this retry comes after compile_again_without_agprs).
            for (k, site) in members.iter().zip(payload_sites(lifted, liveness, &member_points, &roomier)?) {
                starved_sites[*k] = Some(with_agprs_past_allowance_taken(&site));
            }
        }
        let starved_sites: Vec<PayloadSite> = starved_sites.into_iter().flatten().collect();
        let roomier =
            PayloadOptions { payload_room: PayloadRoom::AlignedPairs(STARVED_PAYLOAD_VGPRS), ..options.clone() };
        let also = format!("with {STARVED_PAYLOAD_VGPRS} VGPRs in aligned pairs, or in runs as wide as its tuples");
        let retry = Retry { pass: CompilePass::MoreRegisters, also: &also };
        retry.compile(compiler, &starved, points, starved_sites, &roomier, &mut compiled, &mut sites)?;
    }
    compile_again_pinned_through_terminators(compiler, liveness, points, &mut sites, options, &mut compiled)?;

    wait_for_loads_in_flight(&mut compiled.payloads, &sites);
    Ok(compiled)
}

/// Points whose llc code the machine-code check refused: once more, with
/// the pinned VGPRs kept through the blocks' terminators. (LLVM's allocator
/// may give a value living only between the pins' uses and the terminators
/// a pinned register, e.g. a reload it found dead after SI_IF's lowering;
/// rocSPARSE's branch-divergence points at `S_AND_SAVEEXEC_B64` met it.)
/// A point a template was placed at is compiled at its own site.
fn compile_again_pinned_through_terminators(
    compiler: Compiler<'_, '_>,
    liveness: &Liveness,
    points: &[PayloadPoint],
    sites: &mut [PayloadSite],
    options: &PayloadOptions,
    compiled: &mut CompiledPayloads,
) -> Result<(), CompileError> {
    let refused: Vec<usize> = (0..points.len())
        .filter(|i| {
            compiled.payloads[*i].rejected.as_ref().is_some_and(|r| r.cause == LeftOutCause::WouldChangeLiveRegister)
        })
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    let refused_points: Vec<PayloadPoint> = refused.iter().map(|i| points[*i].clone()).collect();
    let placed_by_template = |i: &usize| {
        let source = compiled.compiled_as.get(*i);
        source.and_then(|s| compiled.compilations.get(s.compilation)).is_some_and(|c| c.sharing == Sharing::Template)
    };
    // The pins hold registers longer, so LLVM may turn to AGPRs: those past
    // the kernel's allowance are taken from the start (one retry only).
    let refused_sites: Vec<PayloadSite> = match refused.iter().any(placed_by_template) {
        true => {
            let own = payload_sites(compiler.lifted, liveness, &refused_points, options)?;
            refused
                .iter()
                .zip(own)
                .map(|(i, own)| if placed_by_template(i) { own } else { sites[*i].clone() })
                .collect()
        }
        false => refused.iter().map(|i| sites[*i].clone()).collect(),
    };
    let refused_sites: Vec<PayloadSite> = refused_sites.iter().map(with_agprs_past_allowance_taken).collect();
    let retry = Retry {
        pass: CompilePass::PinnedThroughTerminators,
        also: "with the pinned registers kept through the terminators",
    };
    retry.compile(compiler, &refused, points, refused_sites, options, compiled, sites)
}

/// Points compiled once more in another pass, alike points with the same
/// live VGPRs sharing.
struct Retry<'a> {
    pass: CompilePass,
    /// What the pass tried, for the message of points it still refuses.
    also: &'a str,
}

impl Retry<'_> {
    /// Compiles `points[indices[i]]` at `retry_sites[i]`; their payloads
    /// and sites replace those in `compiled` and `sites`.
    #[allow(clippy::too_many_arguments)]
    fn compile(
        &self,
        compiler: Compiler<'_, '_>,
        indices: &[usize],
        points: &[PayloadPoint],
        retry_sites: Vec<PayloadSite>,
        options: &PayloadOptions,
        compiled: &mut CompiledPayloads,
        sites: &mut [PayloadSite],
    ) -> Result<(), CompileError> {
        let retry_points: Vec<PayloadPoint> = indices.iter().map(|i| points[*i].clone()).collect();
        let mut again = compile_shared(compiler, &retry_points, &retry_sites, options, self.pass, Sharing::SameVgprs)
            .map_err(|error| error.at_points(indices))?;
        for payload in &mut again.payloads {
            if let Some(why) = &mut payload.rejected {
                why.message = format!("{} (also {})", why.message, self.also);
            }
        }
        compiled.adopt(indices, again);
        for (index, site) in indices.iter().zip(retry_sites) {
            sites[*index] = site;
        }
        Ok(())
    }
}

/// The distinct codes renamed copies have, each once.
#[derive(Default)]
struct DistinctCodes {
    codes: Vec<PayloadCode>,
    index_of: rustc_hash::FxHashMap<(usize, Vec<CodeLine>), usize>,
}

impl DistinctCodes {
    /// The index of `renamed` (a copy of template variant `variant`),
    /// its labels unique in the one assembly: each distinct code its own.
    fn intern(&mut self, variant: usize, renamed: Vec<CodeLine>) -> usize {
        let codes = &mut self.codes;
        *self.index_of.entry((variant, renamed)).or_insert_with_key(|(variant, renamed)| {
            codes.push(sharing::relabel(renamed, *variant, codes.len()).into());
            codes.len() - 1
        })
    }
}

/// The VGPRs of their own tight templates get, round by round, where too
/// few are dead for a group's template (LLVM spreads a payload's values
/// over every VGPR it may use; told fewer, it packs them).
const TIGHT_TEMPLATE_VGPRS: [u16; 2] = [PAYLOAD_VGPRS as u16, 8];

/// A compiled template: its code, the site it was compiled for, its
/// group of points and where it was compiled.
struct Variant {
    payload: CompiledPayload,
    site: PayloadSite,
    group: usize,
    source: PayloadSource,
}

/// The payloads templates give (see [`placement`]): one compilation of a
/// template per hook shape, each point's copy renamed onto its dead
/// registers and checked on its machine code. Returns every point's
/// payload (those without one refused for now) and the points left to
/// compile as before: sites that park registers, sites without room for
/// the renaming, copies the check refuses. Off with
/// `templates` or `share_payloads`.
fn compile_templates(
    compiler: Compiler<'_, '_>,
    liveness: &Liveness,
    points: &[PayloadPoint],
    sites: &[PayloadSite],
    options: &PayloadOptions,
) -> Result<(CompiledPayloads, Vec<usize>), CompileError> {
    let started = std::time::Instant::now();
    let labels = point_labels(compiler.lifted, points)?;
    let mut compiled = CompiledPayloads::not_yet(points, &labels);
    let mut groups: Vec<Vec<usize>> = Vec::new();
    // The registers each group's template reads (stand-ins for the
    // points'), and its calls reading them.
    let mut reads: Vec<UnitSet> = Vec::new();
    let mut template_points: Vec<PayloadPoint> = Vec::new();
    // Each point's registers for its template's stand-ins.
    let mut reads_at_point: Vec<placement::ReadMap> = vec![Default::default(); points.len()];
    let mut rest = Vec::new();
    if options.share_payloads && options.templates {
        let mut group_of_key: rustc_hash::FxHashMap<String, usize> = Default::default();
        let mut keys = placement::TemplateKeys::default();
        for (index, (point, site)) in points.iter().zip(sites).enumerate() {
            match keys.key(point, site) {
                Some(key) => {
                    let next = groups.len();
                    let group = *group_of_key.entry(key.key).or_insert(next);
                    if group == next {
                        groups.push(Vec::new());
                        reads.push(key.read);
                        template_points.push(PayloadPoint { calls: key.calls, ..point.clone() });
                    }
                    groups[group].push(index);
                    reads_at_point[index] = key.reads_at_point;
                }
                None => rest.push(index),
            }
        }
    } else {
        rest.extend(0..points.len());
    }
    if groups.is_empty() {
        return Ok((compiled, rest));
    }
    let first_members: Vec<usize> = groups.iter().map(|g| g[0]).collect();
    let template_sites: Vec<PayloadSite> =
        first_members.iter().zip(&reads).map(|(m, read)| placement::template_site(&sites[*m], read, None)).collect();
    let constants: Vec<Vec<PointConstantArgument>> =
        groups.iter().map(|members| sharing::varying_constants(points, members)).collect();
    let grouping_time = started.elapsed();
    let mut templates =
        compile_each(compiler, &template_points, &template_sites, &constants, options, CompilePass::First)
            .map_err(|error| error.at_points(&first_members))?;
    // Templates whose machine code the check refused: once more with the
    // pins kept through the terminators (see
    // `compile_again_pinned_through_terminators`; LLVM 21 met it on
    // Tensile's kernels), else their groups' points are compiled one
    // stretch at a time.
    let refused: Vec<usize> = (0..templates.payloads.len())
        .filter(|i| {
            templates.payloads[*i].rejected.as_ref().is_some_and(|r| r.cause == LeftOutCause::WouldChangeLiveRegister)
        })
        .collect();
    if !refused.is_empty() {
        let pick = |i: &usize| (template_points[*i].clone(), template_sites[*i].clone(), constants[*i].clone());
        let (again_points, (again_sites, again_constants)): (Vec<_>, (Vec<_>, Vec<_>)) =
            refused.iter().map(pick).map(|(p, s, c)| (p, (s, c))).unzip();
        let again = compile_each(
            compiler,
            &again_points,
            &again_sites,
            &again_constants,
            options,
            CompilePass::PinnedThroughTerminators,
        )
        .map_err(|error| error.at_points(&refused.iter().map(|i| first_members[*i]).collect::<Vec<_>>()))?;
        templates.adopt(&refused, again);
    }
    // Each compiled template (a variant: a group's, or its tight one
    // below), its site, its group and where it was compiled.
    let mut variants: Vec<Variant> = templates
        .payloads
        .iter()
        .zip(template_sites)
        .enumerate()
        .map(|(position, (payload, site))| Variant {
            payload: payload.clone(),
            site,
            group: position,
            source: templates.compiled_as[position],
        })
        .collect();
    let mut compilations = templates.compilations;
    let mut globals = templates.globals;
    let mut timings = templates.timings;
    let clock = std::time::Instant::now();
    // Each point's renaming of its template, checked as machine code: one
    // decoding per distinct renamed code (alike sites rename alike), one
    // check per distinct code, live registers and SVA register.
    let mut codes = DistinctCodes::default();
    // A renaming depends only on what of the site it reads: sites alike
    // there (many, in large kernels) are renamed once.
    type SiteKey = (usize, UnitSet, Option<u16>, Option<u16>, u16, u16, placement::ReadMap);
    let mut renamed_at: rustc_hash::FxHashMap<SiteKey, Option<usize>> = Default::default();
    // (member, variant, distinct code)
    let mut placed: Vec<(usize, usize, usize)> = Vec::new();
    // (member, group)
    let mut crowded: Vec<(usize, usize)> = Vec::new();
    // (member, variant, distinct code, bytes of stack its spills take)
    let mut parked_placed: Vec<(usize, usize, usize, u32)> = Vec::new();
    let mut parked_sites: BTreeMap<usize, PayloadSite> = BTreeMap::new();
    // The copy of a variant renamed onto a site that parks (loads the SVA
    // from the wave's slot, parks live VGPRs), wrapped in the parking:
    // its distinct code and stack bytes.
    let wrapped = |variant: &Variant,
                   variant_index: usize,
                   parked: &PayloadSite,
                   member: usize,
                   codes: &mut DistinctCodes|
     -> Option<(usize, u32)> {
        // Parking that could not be planned leaves the point as it was.
        if parked.unplaced.is_some() && sites[member].unplaced.is_none() {
            return None;
        }
        let renamed = placement::rename(
            &variant.payload.code,
            &variant.site,
            parked,
            &reads[variant.group],
            &reads_at_point[member],
        )?;
        let mut code = final_code::FinalPayload {
            code: renamed.iter().map(|line| line.to_string()).collect(),
            ..Default::default()
        };
        if let Some(parking) = &parked.parking {
            let arguments = &variant.payload.kernel_arguments;
            let reads =
                final_code::Reads { sva: reads_sva_lanes(arguments), work_item_ids: reads_work_item_ids(arguments) };
            let used = parking.used_by(&code.code, parked.sva, parked.work_item_ids, reads);
            used.wrap(&mut code, &final_code::end_label(variant_index));
            if code.scratch_bytes > final_code::MAX_SPILL_OFFSET {
                return None;
            }
        }
        let lines = code.code.into_iter().map(CodeLine::from).collect();
        Some((codes.intern(variant_index, lines), code.scratch_bytes))
    };
    type UsualKey = (usize, usize, Option<u16>, Option<u16>, u16, u16, placement::ReadMap);
    let mut usual: rustc_hash::FxHashMap<UsualKey, Option<(usize, UnitSet)>> = Default::default();
    // Each function's registers in the order its sites take them.
    let mut orders: rustc_hash::FxHashMap<usize, placement::RegisterOrder> = Default::default();
    for (position, members) in groups.iter().enumerate() {
        let variant = &variants[position];
        let (template, template_site, read) = (&variant.payload, &variant.site, &reads[position]);
        if !placement::renameable(template, template_site, read) {
            rest.extend(members);
            continue;
        }
        let renamer = placement::Renamer::new(&template.code);
        for member in members {
            let site = &sites[*member];
            if site.parking.is_some() {
                // The SVA loaded from the wave's slot around the copy.
                match wrapped(variant, position, site, *member, &mut codes) {
                    Some((code, scratch_bytes)) => {
                        parked_placed.push((*member, position, code, scratch_bytes));
                        parked_sites.insert(*member, site.clone());
                    }
                    None => crowded.push((*member, position)),
                }
                continue;
            }
            let function = points[*member].function;
            let order = orders
                .entry(function)
                .or_insert_with(|| placement::RegisterOrder::of(compiler.lifted, liveness, function));
            // The kernel's usual renaming, where none of its registers is live.
            let at_point = &reads_at_point[*member];
            let usual_key =
                (position, function, site.sva, site.work_item_ids, site.max_vgprs, site.max_agprs, at_point.clone());
            let usual = *usual.entry(usual_key).or_insert_with(|| {
                let nothing_live = PayloadSite { live: UnitSet::EMPTY, ..site.clone() };
                let (renamed, chosen) =
                    renamer.rename_choosing(template_site, &nothing_live, read, at_point, Some(order))?;
                Some((codes.intern(position, renamed), chosen))
            });
            let code = match usual {
                Some((code, chosen)) if chosen.intersection(&site.live).is_empty() => Some(code),
                _ => {
                    let key = (
                        position,
                        site.live,
                        site.sva,
                        site.work_item_ids,
                        site.max_vgprs,
                        site.max_agprs,
                        at_point.clone(),
                    );
                    *renamed_at.entry(key).or_insert_with(|| {
                        let renamed = renamer.rename(template_site, site, read, at_point, Some(order))?;
                        Some(codes.intern(position, renamed))
                    })
                }
            };
            match code {
                Some(code) => placed.push((*member, position, code)),
                None => crowded.push((*member, position)),
            }
        }
    }
    // Too few dead registers for a template's runs: the group's tight
    // templates (compiled with fewer VGPRs of their own, once per group
    // that has such points, tighter each round), each renamed onto the
    // site as it is, else with live VGPRs parked for just the room it
    // needs (in aligned pairs, in dead AGPRs or scratch memory, as the
    // starved pass parks for llc), whole-wave copies around the renamed
    // copy; checked like every copy. What no round places is compiled
    // as before.
    let mut pending = crowded;
    for (round, own_vgprs) in TIGHT_TEMPLATE_VGPRS.into_iter().enumerate() {
        if pending.is_empty() {
            break;
        }
        let crowded_groups: Vec<usize> =
            pending.iter().map(|(_, group)| *group).collect::<BTreeSet<usize>>().into_iter().collect();
        let tight_points: Vec<PayloadPoint> = crowded_groups.iter().map(|g| template_points[*g].clone()).collect();
        // LLVM gives a template short of VGPRs AGPRs (gfx90a): where some
        // crowded point of its group has too few AGPRs free for that (MFMA
        // kernels keep their accumulators there), the tight template has none.
        let short_of_agprs: BTreeSet<usize> = pending
            .iter()
            .filter(|(member, _)| free_agprs(&sites[*member]) < own_vgprs)
            .map(|(_, group)| *group)
            .collect();
        let tight_sites: Vec<PayloadSite> = crowded_groups
            .iter()
            .map(|g| {
                let site = placement::template_site(&sites[first_members[*g]], &reads[*g], Some(own_vgprs));
                match short_of_agprs.contains(g) {
                    true => without_agprs(&site),
                    false => site,
                }
            })
            .collect();
        let tight_constants: Vec<Vec<PointConstantArgument>> =
            crowded_groups.iter().map(|g| constants[*g].clone()).collect();
        let tight = compile_each(compiler, &tight_points, &tight_sites, &tight_constants, options, CompilePass::First)
            .map_err(|error| error.at_points(&crowded_groups.iter().map(|g| first_members[*g]).collect::<Vec<_>>()))?;
        let compilation = compilations.len();
        // Each group's variant this round: its tight template where that
        // renames, else (the first round) its own for parking.
        let mut variant_of: BTreeMap<usize, usize> = BTreeMap::new();
        for (position, ((group, payload), site)) in
            crowded_groups.iter().zip(tight.payloads).zip(tight_sites).enumerate()
        {
            if placement::renameable(&payload, &site, &reads[*group]) {
                // Its labels named by its variant, like the others'.
                let payload = CompiledPayload {
                    code: sharing::relabel(&payload.code, position, variants.len()).into(),
                    ..payload
                };
                variant_of.insert(*group, variants.len());
                variants.push(Variant {
                    payload,
                    site,
                    group: *group,
                    source: PayloadSource { compilation, position },
                });
            } else if round == 0 {
                variant_of.insert(*group, *group);
            }
        }
        compilations.extend(tight.compilations);
        add_globals(&mut globals, tight.globals);
        timings.extend(tight.timings);
        let mut next_round = Vec::new();
        let mut by_room: BTreeMap<PayloadRoom, Vec<(usize, usize, usize)>> = BTreeMap::new();
        for (member, group) in pending {
            let Some(&variant_index) = variant_of.get(&group) else {
                next_round.push((member, group));
                continue;
            };
            let variant = &variants[variant_index];
            let site = &sites[member];
            if variant_index != group {
                match &site.parking {
                    Some(_) => {
                        if let Some((code, scratch_bytes)) = wrapped(variant, variant_index, site, member, &mut codes) {
                            parked_placed.push((member, variant_index, code, scratch_bytes));
                            parked_sites.insert(member, site.clone());
                            continue;
                        }
                    }
                    None => {
                        let at_point = &reads_at_point[member];
                        if let Some(renamed) =
                            placement::rename(&variant.payload.code, &variant.site, site, &reads[group], at_point)
                        {
                            placed.push((member, variant_index, codes.intern(variant_index, renamed)));
                            continue;
                        }
                    }
                }
            }
            // Parked for: the tight variant, unless it took AGPRs the
            // site may not have (LLVM's spills on gfx90a) and the group's
            // own template took none.
            let variant_index = if placement::agprs_used(&variant.payload.code) > site.max_agprs
                && placement::agprs_used(&variants[group].payload.code) == 0
            {
                group
            } else {
                variant_index
            };
            let variant = &variants[variant_index];
            let room = placement::room_needed(&variant.payload.code, &variant.site, &reads[group]);
            by_room.entry(room).or_default().push((member, group, variant_index));
        }
        for (room, members) in by_room {
            let roomy = PayloadOptions { payload_room: room, ..options.clone() };
            let member_points: Vec<PayloadPoint> = members.iter().map(|(m, _, _)| points[*m].clone()).collect();
            let roomy_sites = payload_sites(compiler.lifted, liveness, &member_points, &roomy)?;
            for ((member, group, variant_index), parked) in members.into_iter().zip(roomy_sites) {
                match wrapped(&variants[variant_index], variant_index, &parked, member, &mut codes) {
                    Some((code, scratch_bytes)) => {
                        parked_placed.push((member, variant_index, code, scratch_bytes));
                        parked_sites.insert(member, parked);
                    }
                    None => next_round.push((member, group)),
                }
            }
        }
        pending = next_round;
    }
    rest.extend(pending.into_iter().map(|(member, _)| member));
    let distinct = codes.codes;
    let decoded = crate::preservation::decode_code(compiler.lifted, &distinct, options.keep_failed.as_deref())?;
    let units = RegisterUnits::new(&compiler.lifted.isa);
    let mut measures: rustc_hash::FxHashMap<usize, (usize, UnitSet, UnitSet)> = Default::default();
    let mut verdicts: rustc_hash::FxHashMap<(usize, UnitSet, Option<u16>), bool> = Default::default();
    let placed = placed.into_iter().map(|(member, position, code)| (member, position, code, None));
    let parked = parked_placed.into_iter().map(|(member, position, code, bytes)| (member, position, code, Some(bytes)));
    let mut outcomes: rustc_hash::FxHashMap<usize, crate::preservation::Outcome> = Default::default();
    // Each template without its code, to copy per point.
    let bare: Vec<CompiledPayload> = variants
        .iter()
        .map(|variant| &variant.payload)
        .map(|template| CompiledPayload {
            code: PayloadCode::from([]),
            writes: UnitSet::EMPTY,
            touches: UnitSet::EMPTY,
            bytes: 0,
            label: PointLabel::default(),
            ..template.clone()
        })
        .collect();
    for (member, variant, code, parked_stack) in placed.chain(parked) {
        let mut copy = CompiledPayload {
            label: labels[member].clone(),
            function: points[member].function,
            instruction: points[member].instruction,
            ..bare[variant].clone()
        };
        let site = match parked_stack {
            Some(_) => &parked_sites[&member],
            None => &sites[member],
        };
        let (bytes, writes, touches) = *measures.entry(code).or_insert_with(|| {
            let mut measured = copy.clone();
            measure_and_check_one(compiler.lifted, &units, &mut measured, &decoded[code], site, false);
            (measured.bytes, measured.writes, measured.touches)
        });
        // One interpretation per distinct code, checked per live set.
        let mut check = || {
            let isa = &compiler.lifted.isa;
            let outcome = outcomes.entry(code).or_insert_with(|| {
                crate::preservation::interpret(isa, &units, &decoded[code], &crate::preservation::Entry::default())
            });
            let (keep, sva) = must_keep(&copy, site);
            outcome.check(isa, &decoded[code], &keep, sva).is_ok()
        };
        // The same code at the same live registers: the same verdict (a
        // parked copy is held to the registers its site parks too).
        let verdict = match parked_stack {
            Some(_) => check(),
            None => *verdicts.entry((code, site.live, site.sva)).or_insert_with(check),
        };
        (copy.bytes, copy.writes, copy.touches) = (bytes, writes, touches);
        if let Some(stack) = parked_stack {
            copy.scratch_bytes = stack;
            copy.spilled_vgprs = (stack / 4) as usize;
        }
        if !verdict {
            // The check refused this renaming: compiled as before.
            rest.push(member);
            continue;
        }
        // Copies of one code share its lines, labels included (the emitter
        // makes each site's labels its own where it writes them as text).
        let group = variants[variant].group;
        copy.code = sharing::with_point_constants(&distinct[code], &constants[group], &points[member])
            .map_err(|why| CompileError::BadPoint { index: member, why })?;
        compiled.payloads[member] = copy;
        compiled.compiled_as[member] = variants[variant].source;
    }
    rest.sort_unstable();
    for compilation in &mut compilations {
        compilation.sharing = Sharing::Template;
    }
    compiled.compilations = compilations;
    compiled.globals = globals;
    compiled.timings = vec![("payload: group points by hook shape", grouping_time)];
    compiled.timings.extend(timings);
    compiled.timings.push(("payload: rename and check templates per point", clock.elapsed()));
    Ok((compiled, rest))
}

/// Puts each payload's wait first: for the counters of the loads in flight
/// at its point whose registers its code reads or writes (none when it
/// touches none: the application's loads stay in flight across it). Per
/// point, after sharing, since alike points can differ in what is in flight.
fn wait_for_loads_in_flight(payloads: &mut [CompiledPayload], sites: &[PayloadSite]) {
    for (payload, site) in payloads.iter_mut().zip(sites) {
        if payload.rejected.is_some() || payload.entry_wait.is_some() {
            continue;
        }
        let wait = site.pending.waits_for(&payload.touches);
        if let Some(instruction) = wait.wait_instruction() {
            payload.code = std::iter::once(instruction.into()).chain(payload.code.iter().cloned()).collect();
            payload.bytes += 4;
        }
        payload.entry_wait = Some(wait);
    }
}

/// The AGPRs a point's payload may take: below its allowance, not live.
fn free_agprs(site: &PayloadSite) -> u16 {
    (0..site.max_agprs).filter(|a| !site.live.contains(Unit::agpr(*a))).count() as u16
}

/// `site` with no AGPR for the payload (every one LLVM could give taken).
fn without_agprs(site: &PayloadSite) -> PayloadSite {
    with_agprs_past_allowance_taken(&PayloadSite { max_agprs: 0, ..site.clone() })
}

/// `site` with the AGPRs past what the kernel may have taken (pinned).
fn with_agprs_past_allowance_taken(site: &PayloadSite) -> PayloadSite {
    let mut site = site.clone();
    for agpr in site.max_agprs..site.max_vgprs.max(site.max_agprs) {
        site.live.insert(Unit::agpr(agpr));
    }
    site
}

/// Points whose payloads LLVM gave AGPRs past what the kernel may have
/// (gfx90a allocates payload values in AGPRs when VGPRs run short): once
/// more, with those AGPRs taken (pinned), so LLVM keeps to the VGPRs or
/// finds no registers.
fn compile_again_without_agprs(
    tool: &CodeObject,
    lifted: &LiftedCodeObject<'_>,
    points: &[PayloadPoint],
    sites: &[PayloadSite],
    registry: &Registry,
    options: &PayloadOptions,
    compiled: &mut CompiledPayloads,
) -> Result<(), CompileError> {
    let over_agprs = |payload: &CompiledPayload, site: &PayloadSite| {
        payload.rejected.is_none()
            && payload
                .writes
                .in_file(crate::stages::liveness::RegisterFile::Agpr)
                .iter()
                .any(|u| u.index() >= site.max_agprs)
    };
    let again: Vec<usize> = (0..points.len()).filter(|i| over_agprs(&compiled.payloads[*i], &sites[*i])).collect();
    if again.is_empty() {
        return Ok(());
    }
    let again_points: Vec<PayloadPoint> = again.iter().map(|i| points[*i].clone()).collect();
    let again_sites: Vec<PayloadSite> = again.iter().map(|i| with_agprs_past_allowance_taken(&sites[*i])).collect();
    let recompiled = compile_shared(
        Compiler { tool, lifted, registry },
        &again_points,
        &again_sites,
        options,
        CompilePass::WithoutAgprs,
        Sharing::SameVgprs,
    )
    .map_err(|error| error.at_points(&again))?;
    compiled.adopt(&again, recompiled);
    Ok(())
}

/// What every compilation of one code object's payloads reads.
#[derive(Clone, Copy)]
struct Compiler<'c, 'l> {
    tool: &'c CodeObject,
    lifted: &'c LiftedCodeObject<'l>,
    registry: &'c Registry,
}

/// Compiles payloads for points whose sites are given (`sites[i]` for
/// `points[i]`); alike points share one payload (see [`sharing`]) unless
/// `options.share_payloads` is off.
pub fn compile_payloads_at(
    tool: &CodeObject,
    lifted: &LiftedCodeObject<'_>,
    points: &[PayloadPoint],
    sites: &[PayloadSite],
    registry: &Registry,
    options: &PayloadOptions,
) -> Result<CompiledPayloads, CompileError> {
    let mut compiled = compile_shared(
        Compiler { tool, lifted, registry },
        points,
        sites,
        options,
        CompilePass::First,
        Sharing::Alike,
    )?;
    wait_for_loads_in_flight(&mut compiled.payloads, sites);
    Ok(compiled)
}

/// Compiles one payload per group of points that share (`sharing`); the
/// members of a group LLVM could not compile for their union are compiled
/// again with narrower sharing ([`Sharing::narrower`]) or keep its
/// refusal, so each point is compiled at most three times.
fn compile_shared(
    compiler: Compiler<'_, '_>,
    points: &[PayloadPoint],
    sites: &[PayloadSite],
    options: &PayloadOptions,
    pass: CompilePass,
    sharing: Sharing,
) -> Result<CompiledPayloads, CompileError> {
    let lifted = compiler.lifted;
    if sites.len() != points.len() {
        return Err(CompileError::BadPoint {
            index: sites.len().min(points.len()),
            why: format!("{} points but {} sites", points.len(), sites.len()),
        });
    }
    let started = std::time::Instant::now();
    let slack = match sharing {
        Sharing::Alike | Sharing::Template => sharing::Slack::ALIKE,
        Sharing::SameVgprs => sharing::Slack::SAME_VGPRS,
        Sharing::OneByOne => return compile_each(compiler, points, sites, &[], options, pass),
    };
    if !options.share_payloads {
        return compile_each(compiler, points, sites, &[], options, pass);
    }
    let groups = sharing::group_points(points, sites, slack);
    if groups.len() == points.len() {
        return compile_each(compiler, points, sites, &[], options, pass);
    }
    let labels = point_labels(lifted, points)?;
    let grouping_time = started.elapsed();
    let first_members: Vec<usize> = groups.iter().map(|g| g.members[0]).collect();
    let group_points: Vec<PayloadPoint> = first_members.iter().map(|m| points[*m].clone()).collect();
    let group_sites: Vec<PayloadSite> = groups.iter().map(|g| g.site.clone()).collect();
    let group_constants: Vec<Vec<PointConstantArgument>> =
        groups.iter().map(|g| sharing::varying_constants(points, &g.members)).collect();
    let mut shared = compile_each(compiler, &group_points, &group_sites, &group_constants, options, pass)
        .map_err(|error| error.at_points(&first_members))?;
    for compilation in &mut shared.compilations {
        compilation.sharing = sharing;
    }
    // A group LLVM could not compile for the union: its points again.
    let retried_points: Vec<usize> = groups
        .iter()
        .zip(&shared.payloads)
        .filter(|(group, payload)| payload.rejected.is_some() && group.members.len() > 1)
        .flat_map(|(group, _)| group.members.iter().copied())
        .collect();

    // Each point's own copy of its group's code (labels and point
    // constants its own); a retried point holds its group's refusal until
    // the retry replaces it.
    let mut payloads = Vec::with_capacity(points.len());
    let mut compiled_as = vec![PayloadSource::default(); points.len()];
    let mut group_of = vec![0; points.len()];
    for (position, group) in groups.iter().enumerate() {
        for member in &group.members {
            group_of[*member] = position;
        }
    }
    for (member, position) in group_of.into_iter().enumerate() {
        let compiled = &shared.payloads[position];
        if let (Some(why), true) = (&compiled.rejected, groups[position].members.len() > 1) {
            payloads.push(CompiledPayload::refused(labels[member].clone(), &points[member], why.clone()));
            continue;
        }
        let code = sharing::relabel(&compiled.code, position, member).into();
        let code = sharing::with_point_constants(&code, &group_constants[position], &points[member])
            .map_err(|why| CompileError::BadPoint { index: member, why })?;
        payloads.push(CompiledPayload {
            label: labels[member].clone(),
            function: points[member].function,
            instruction: points[member].instruction,
            code,
            ..compiled.clone()
        });
        compiled_as[member] = PayloadSource { compilation: 0, position };
    }
    let mut timings = std::mem::take(&mut shared.timings);
    timings.insert(0, ("payload: group alike points", grouping_time));
    let mut compiled = CompiledPayloads {
        payloads,
        globals: std::mem::take(&mut shared.globals),
        compilations: std::mem::take(&mut shared.compilations),
        compiled_as,
        timings,
        counted: BTreeSet::new(),
        counts_set_at_entry: BTreeSet::new(),
    };
    let narrower = sharing.narrower(pass);
    if let (false, Some(narrower)) = (retried_points.is_empty(), narrower) {
        let retry_points: Vec<PayloadPoint> = retried_points.iter().map(|i| points[*i].clone()).collect();
        let retry_sites: Vec<PayloadSite> = retried_points.iter().map(|i| sites[*i].clone()).collect();
        let retried = compile_shared(compiler, &retry_points, &retry_sites, options, pass, narrower)
            .map_err(|error| error.at_points(&retried_points))?;
        compiled.adopt(&retried_points, retried);
    }
    Ok(compiled)
}

impl CompiledPayloads {
    /// Every point refused as "not compiled", to be filled in.
    fn not_yet(points: &[PayloadPoint], labels: &[PointLabel]) -> CompiledPayloads {
        let not_yet = || Rejection::new(LeftOutCause::Intrinsic, "not compiled".to_string());
        CompiledPayloads {
            payloads: points
                .iter()
                .zip(labels)
                .map(|(point, label)| CompiledPayload::refused(label.clone(), point, not_yet()))
                .collect(),
            globals: Vec::new(),
            compilations: Vec::new(),
            compiled_as: vec![PayloadSource::default(); points.len()],
            timings: Vec::new(),
            counted: BTreeSet::new(),
            counts_set_at_entry: BTreeSet::new(),
        }
    }

    /// Takes `other`'s payloads for points `indices` (`other`'s point `i`
    /// is this one's `indices[i]`): its code relabelled for them, its
    /// compilations, globals and timings after this one's.
    fn adopt(&mut self, indices: &[usize], other: CompiledPayloads) {
        let offset = self.compilations.len();
        for (position, ((index, payload), source)) in
            indices.iter().zip(other.payloads).zip(other.compiled_as).enumerate()
        {
            self.payloads[*index] =
                CompiledPayload { code: sharing::relabel(&payload.code, position, *index).into(), ..payload };
            self.compiled_as[*index] =
                PayloadSource { compilation: offset + source.compilation, position: source.position };
        }
        self.compilations.extend(other.compilations);
        add_globals(&mut self.globals, other.globals);
        self.timings.extend(other.timings);
    }
}

/// The tool globals another compilation's payloads use, each once.
fn add_globals(globals: &mut Vec<ToolGlobal>, more: Vec<ToolGlobal>) {
    for global in more {
        if !globals.iter().any(|g| g.name == global.name) {
            globals.push(global);
        }
    }
}

/// Each payload's size and the registers its machine code writes and
/// touches (decoded with LLVM's disassembler, one llvm-mc run for all),
/// and, when `check`, the proof that it gives every register live at its
/// site back (`crate::preservation`): a payload that would not is
/// rejected, never spliced.
fn measure_and_check(
    lifted: &LiftedCodeObject<'_>,
    payloads: &mut [CompiledPayload],
    sites: &[&PayloadSite],
    options: &PayloadOptions,
) -> Result<(), CompileError> {
    let codes: Vec<PayloadCode> = payloads.iter().map(|p| p.code.clone()).collect();
    let decoded = crate::preservation::decode_code(lifted, &codes, options.keep_failed.as_deref())?;
    let check = options.check_preservation;
    let units = RegisterUnits::new(&lifted.isa);
    for ((payload, code), site) in payloads.iter_mut().zip(&decoded).zip(sites.iter().copied()) {
        measure_and_check_one(lifted, &units, payload, code, site, check);
    }
    Ok(())
}

/// What a payload's code must give back at `site` (the live registers it
/// does not write for the application, parked ones included) and the SVA
/// register it may change only in the frame save lanes.
fn must_keep(payload: &CompiledPayload, site: &PayloadSite) -> (UnitSet, Option<u16>) {
    let mut must_keep = site.live.difference(&payload.written);
    // Parked VGPRs come back; a loaded SVA is a copy in a dead VGPR, and
    // its AGPR home must stay.
    let sva = match &site.parking {
        Some(parking) => {
            for (vgpr, agpr) in &parking.borrowed {
                must_keep.remove(Unit::agpr(*agpr));
                must_keep.insert(Unit::vgpr(*vgpr));
            }
            for vgpr in parking.spilled.iter().chain(parking.rescue.as_ref().map(|r| &r.vgpr)) {
                must_keep.insert(Unit::vgpr(*vgpr));
            }
            // Moved VGPRs come back; their stand-ins were dead.
            for (from, to) in &parking.moved {
                must_keep.remove(Unit::vgpr(*to));
                must_keep.insert(Unit::vgpr(*from));
            }
            for (agpr, _) in &parking.loads {
                must_keep.insert(Unit::agpr(*agpr));
            }
            if parking.loads.is_empty() && parking.slot_loads.is_none() {
                site.sva
            } else {
                None
            }
        }
        None => site.sva,
    };
    (must_keep, sva)
}

/// [`measure_and_check`] of one payload whose machine code is decoded.
fn measure_and_check_one(
    lifted: &LiftedCodeObject<'_>,
    units: &RegisterUnits,
    payload: &mut CompiledPayload,
    code: &[crate::stages::lift::Instruction],
    site: &PayloadSite,
    check: bool,
) {
    payload.bytes = code.iter().map(|i| i.size() as usize).sum();
    for instruction in code {
        for reg in instruction.all_defs() {
            for unit in units.units(reg) {
                payload.writes.insert(*unit);
                payload.touches.insert(*unit);
            }
        }
        for reg in instruction.all_uses() {
            for unit in units.units(reg) {
                payload.touches.insert(*unit);
            }
        }
    }
    if !check || payload.rejected.is_some() {
        return;
    }
    let (must_keep, sva) = must_keep(payload, site);
    if let Err(violation) = crate::preservation::check(&lifted.isa, units, code, &must_keep, sva) {
        // Never splice code that would change the application's state.
        payload.rejected = Some(Rejection::new(
            LeftOutCause::WouldChangeLiveRegister,
            format!("its machine code would leave a live register changed: {violation}"),
        ));
        payload.refused_code = payload.code.to_vec();
        payload.code = PayloadCode::from([]);
        payload.writes = UnitSet::EMPTY;
    }
}

/// Compiles one payload per point (`sites[i]` for `points[i]`); a point's
/// `point_constants[i]` (none if the slice is shorter) are left as symbols
/// in its code.
fn compile_each(
    compiler: Compiler<'_, '_>,
    points: &[PayloadPoint],
    sites: &[PayloadSite],
    point_constants: &[Vec<PointConstantArgument>],
    options: &PayloadOptions,
    pass: CompilePass,
) -> Result<CompiledPayloads, CompileError> {
    if let Some(shared) = options.shared.as_deref().filter(|_| !options.keep_stage_texts) {
        return shared::compile_each_shared(shared, compiler, points, sites, point_constants, options, pass);
    }
    let Compiler { tool, lifted, registry } = compiler;
    let code_object = lifted.code_object;
    let point_labels = point_labels(lifted, points)?;
    // Written out: llc compiles few payloads, and messages name them.
    let labels: Vec<String> = point_labels.iter().map(PointLabel::to_string).collect();
    let requests: Vec<PayloadRequest> = points
        .iter()
        .zip(&labels)
        .zip(sites)
        .enumerate()
        .map(|(index, ((point, label), site))| PayloadRequest {
            label: label.clone(),
            calls: point.calls.clone(),
            max_flat_workgroup_size: site.max_flat_workgroup_size,
            max_vgprs: site.max_vgprs,
            point_constants: point_constants.get(index).cloned().unwrap_or_default(),
        })
        .collect();
    let mut target = TargetInfo::for_processor(&code_object.target.processor);
    // gfx900 and gfx906 have no AGPRs: a hook reading one is refused by name.
    if code_object.target.model().is_some_and(|p| !p.has_agprs()) {
        target.agprs = 0;
    }
    let mut texts = StageTexts::default();
    let mut timings = Vec::new();
    let mut clock = std::time::Instant::now();
    let mut lap = |name: &'static str| {
        let now = std::time::Instant::now();
        timings.push((name, now - clock));
        clock = now;
    };

    // Stages 5 and 6 in one LLVM context.
    let context = Context::create();
    let module = read_tool_module(&context, tool)?;
    lower_ir::check_intrinsics_known(&module, registry, &payload::used_hooks(&requests))?;
    // The tool's globals must not take the application's symbols.
    let application_symbols: BTreeSet<&str> = code_object.symbols.iter().map(|s| s.name.as_str()).collect();
    let mut renamed: BTreeMap<String, String> = BTreeMap::new();
    for global in module.get_globals() {
        let name = global.get_name().to_string_lossy().into_owned();
        if application_symbols.contains(name.as_str()) {
            let new = format!("gpuinstr.tool.{name}");
            global.as_pointer_value().set_name(&new);
            renamed.insert(new, name);
        }
    }
    let machine = lower_ir::target_machine(&code_object.target)?;
    let managed = managed_storage_of(&module, &renamed, &machine, tool, &application_symbols);
    payload::build_payload_module(&context, &module, &requests)?;
    verify(&module, "building the payloads")?;
    if options.keep_stage_texts {
        texts.payload_ir = module.print_to_string().to_string();
    }
    lap("payload: build the IR module");
    lower_ir::optimize(&module, &machine)?;
    lap("lower-ir: O3");
    let placeholders = lower_ir::insert_placeholders(&context, &module, registry, &target, &labels)?;
    verify(&module, "inserting the intrinsic placeholders")?;
    let lowered_ir = module.print_to_string().to_string();
    lap("lower-ir: placeholders");
    let mut all_globals: Vec<ToolGlobal> = module
        .get_globals()
        .filter(|g| g.as_pointer_value().get_first_use().is_some())
        .filter(|g| !g.get_name().to_string_lossy().starts_with("llvm."))
        .map(|g| tool_global(tool, g, &renamed, &managed, &machine))
        .collect::<Result<_, ToolProblem>>()?;
    attach_records(tool, &mut all_globals)?;
    attach_rings(tool, &mut all_globals)?;

    // Stages 7 and 8, in chunks of the module run in parallel: LLVM's MIR
    // printer costs time proportional to the whole module for every
    // function, so one llc run over N payloads costs N^2.
    let directory = tempfile::tempdir()?;
    let version = code_object.code_object_version;
    let chunks = chunk_ir(&lowered_ir, options.payloads_per_chunk);
    // Moved either way: without the texts, the IR is freed here.
    texts.lowered_ir = if options.keep_stage_texts { lowered_ir } else { String::new() };
    // Of the stage's time, O3 and instruction selection take about a third,
    // register allocation and emission half, the checks the rest.
    let selected_chunks = AtomicUsize::new(0);
    let selected = parallel(&chunks, |index, ir| {
        let directory = directory.path().join(format!("chunk{index}"));
        std::fs::create_dir_all(&directory)?;
        let mir = codegen::select_instructions(
            ir,
            &code_object.target,
            version,
            options.atomic_optimizer,
            &directory,
            options.keep_failed.as_deref(),
        )?;
        let done = selected_chunks.fetch_add(1, Ordering::Relaxed) + 1;
        options.progress.batches((0.15, 0.35), done, chunks.len());
        Ok(mir)
    })?;
    if options.keep_stage_texts {
        texts.selected_mir = selected.join("\n");
    }
    lap("codegen: instruction selection (llc)");
    let classes = RegisterClasses::new(&lifted.isa);
    let frame = Frame::new(code_object.target.has_architected_flat_scratch());
    let mut context = lower_mir::LoweringContext::new(&lifted.isa, &classes, &target, registry, &placeholders);
    if pass == CompilePass::PinnedThroughTerminators {
        context.pinned_until = lower_mir::PinnedUntil::TheLastTerminator;
    }
    let mut lowered_modules = Vec::with_capacity(selected.len());
    let mut lowered: Vec<Option<lower_mir::LoweredPayload>> = vec![None; points.len()];
    let mut rejected: BTreeMap<usize, Rejection> = BTreeMap::new();
    // Each payload's widest VGPR tuple, for the room of a retry.
    let mut widest_vgpr_tuples = vec![1u16; points.len()];
    for mir_text in &selected {
        let mut mir = lower_mir::MirModule::parse(mir_text).map_err(LowerMirError::from)?;
        for function in &mir.functions {
            let index = function.name.strip_prefix("gpuinstr.payload.").and_then(|n| n.parse::<usize>().ok());
            if let Some(widest) = index.and_then(|i| widest_vgpr_tuples.get_mut(i)) {
                *widest = classes.widest_vgpr_tuple(function.registers.values());
            }
        }
        for (index, outcome) in lower_mir::lower_module(&mut mir, &context, sites, &labels)? {
            match outcome {
                lower_mir::LoweredOrRejected::Lowered(payload) => lowered[index] = Some(*payload),
                lower_mir::LoweredOrRejected::Rejected(why) => {
                    lowered[index] = Some(lower_mir::LoweredPayload::default());
                    // Without an SVA register here, that is what an intrinsic missed.
                    let cause = if sites[index].unplaced.is_some() && sites[index].sva.is_none() {
                        LeftOutCause::NoSvaRegister
                    } else {
                        LeftOutCause::Intrinsic
                    };
                    rejected.insert(index, Rejection::new(cause, why));
                }
            }
        }
        lowered_modules.push(mir);
    }
    if options.keep_stage_texts {
        texts.lowered_mir = lowered_modules.iter().map(lower_mir::MirModule::print).collect::<Vec<_>>().join("\n");
    }
    drop(selected);
    lap("lower-mir: registers and intrinsics");
    let finished_chunks = AtomicUsize::new(0);
    let finished = parallel(&lowered_modules, |index, mir| {
        let directory = directory.path().join(format!("chunk{index}"));
        let mut rejected = Vec::new();
        let assembly = finish_rejecting(
            mir,
            &code_object.target,
            version,
            options.verify_each_pass,
            &directory,
            options.keep_failed.as_deref(),
            &mut rejected,
        )?;
        let done = finished_chunks.fetch_add(1, Ordering::Relaxed) + 1;
        options.progress.batches((0.4, 0.9), done, lowered_modules.len());
        Ok((assembly, rejected))
    })?;
    let mut assemblies = Vec::with_capacity(finished.len());
    for (assembly, chunk_rejected) in finished {
        assemblies.push(assembly);
        for (name, message) in chunk_rejected {
            if let Some(index) = name.strip_prefix("gpuinstr.payload.").and_then(|n| n.parse::<usize>().ok()) {
                let live = &sites[index].live;
                rejected.insert(
                    index,
                    Rejection {
                        widest_vgpr_tuple: widest_vgpr_tuples.get(index).copied().unwrap_or(1),
                        ..Rejection::new(
                            LeftOutCause::NoPayloadRegisters,
                            format!(
                                "{NO_REGISTERS} ({} VGPRs, {} AGPRs and {} SGPRs are live here, {} VGPRs allowed): {}",
                                live.count_in(crate::stages::liveness::RegisterFile::Vgpr),
                                live.count_in(crate::stages::liveness::RegisterFile::Agpr),
                                live.count_in(crate::stages::liveness::RegisterFile::Sgpr),
                                sites[index].max_vgprs,
                                message.split(" | ").next().unwrap_or(&message)
                            ),
                        )
                    },
                );
            }
        }
    }
    texts.assembly = assemblies.join("\n");
    lap("codegen: allocation and emission (llc)");

    let mut payloads = Vec::with_capacity(points.len());
    let functions = final_code::AssemblyFunctions::parse(&texts.assembly);
    for (index, ((point, site), lowered)) in points.iter().zip(sites).zip(lowered).enumerate() {
        let lowered = lowered.ok_or_else(|| CompileError::BadPoint {
            index,
            why: "its payload function is missing from llc's output".into(),
        })?;
        if let Some(reason) = rejected.get(&index) {
            payloads.push(CompiledPayload::refused(point_labels[index].clone(), point, reason.clone()));
            continue;
        }
        let name = payload::payload_name(index);
        let mut code = match final_code::extract(
            &functions,
            &name,
            index,
            frame,
            &site.live,
            site.sva,
            &lowered.saves_frame,
            !lowered.written.is_empty(),
        ) {
            Ok(code) => code,
            // A spill needs the SVA's stack: without one, only this point is left alone.
            Err(FinalCodeError::StackWithoutSva(_, bytes)) => {
                let why = match &site.unplaced {
                    Some(problem) => format!(": {problem}"),
                    None => String::new(),
                };
                let reason = Rejection::new(
                    LeftOutCause::NoSvaRegister,
                    format!(
                        "LLVM spills {bytes} bytes of the payload's registers here, and the stack is reached through \
                         the State Value Array, which this function has no register for{why}"
                    ),
                );
                payloads.push(CompiledPayload::refused(point_labels[index].clone(), point, reason));
                continue;
            }
            Err(other) => return Err(other.into()),
        };
        let mut spilled_vgprs = 0;
        if let Some(parking) = &site.parking {
            // Load only what the payload reads.
            let reads_sva =
                code.scratch_bytes > 0 || !lowered.saves_frame.is_empty() || reads_sva_lanes(&lowered.kernel_arguments);
            let reads =
                final_code::Reads { sva: reads_sva, work_item_ids: reads_work_item_ids(&lowered.kernel_arguments) };
            let used = parking.used_by(&code.code, site.sva, site.work_item_ids, reads);
            used.wrap(&mut code, &final_code::end_label(index));
            spilled_vgprs = used.spilled.len();
            if spilled_vgprs > 0 && code.scratch_bytes > final_code::MAX_SPILL_OFFSET {
                let why = format!(
                    "{NO_REGISTERS}, and its {spilled_vgprs} spill slots would lie past the {} bytes per lane a \
                     scratch instruction's offset reaches above the payload's own {} bytes of stack",
                    final_code::MAX_SPILL_OFFSET,
                    code.scratch_bytes - 4 * spilled_vgprs as u32
                );
                let reason = Rejection::new(LeftOutCause::NoPayloadRegisters, why);
                payloads.push(CompiledPayload::refused(point_labels[index].clone(), point, reason));
                continue;
            }
        }
        if code.scratch_bytes > 0 && !lowered.frame_reads.is_empty() {
            let why = format!(
                "its hooks read {}, which holds the payload's stack frame: the payload needs {} bytes of stack here",
                lowered.frame_reads, code.scratch_bytes
            );
            payloads.push(CompiledPayload::refused(
                point_labels[index].clone(),
                point,
                Rejection::new(LeftOutCause::Intrinsic, why),
            ));
            continue;
        }
        payloads.push(CompiledPayload {
            label: point_labels[index].clone(),
            function: point.function,
            instruction: point.instruction,
            code: code.code.into_iter().map(CodeLine::from).collect(),
            scratch_bytes: code.scratch_bytes,
            sgprs: code.sgprs,
            vgprs: code.vgprs,
            agprs: code.agprs,
            kernel_arguments: lowered.kernel_arguments,
            copied: lowered.copied,
            pinned: lowered.pinned,
            written: lowered.written,
            writes: UnitSet::EMPTY,
            touches: UnitSet::EMPTY,
            bytes: 0,
            entry_wait: None,
            spilled_vgprs,
            rejected: None,
            refused_code: Vec::new(),
        });
    }
    lap("final code");

    // What each payload writes, from its machine code; and the proof that
    // it gives every live register back.
    let site_refs: Vec<&PayloadSite> = sites.iter().collect();
    measure_and_check(lifted, &mut payloads, &site_refs, options)?;
    lap("machine code check");
    let globals = all_globals
        .into_iter()
        .filter(|g| {
            texts.assembly.contains(&format!("{}@", g.name)) || texts.assembly.contains(&format!("{}+", g.name))
        })
        .collect();
    if !options.keep_stage_texts {
        texts.assembly = String::new();
    }
    let compiled_as = (0..payloads.len()).map(|position| PayloadSource { compilation: 0, position }).collect();
    let compilation = Compilation {
        pass,
        sharing: Sharing::OneByOne,
        payloads: payloads.len(),
        refused: payloads.iter().filter(|p| p.rejected.is_some()).count(),
        seconds: timings.iter().map(|(_, time)| time.as_secs_f64()).sum(),
        texts,
        shared: false,
    };
    Ok(CompiledPayloads {
        payloads,
        globals,
        compilations: vec![compilation],
        compiled_as,
        timings,
        counted: BTreeSet::new(),
        counts_set_at_entry: BTreeSet::new(),
    })
}

fn verify(module: &inkwell::module::Module<'_>, stage: &'static str) -> Result<(), CompileError> {
    module.verify().map_err(|message| CompileError::InvalidModule { stage, message: message.to_string() })
}

/// The lines of `text` from the one starting with `start` to the first
/// line equal to `end` (inclusive).
fn section<'t>(text: &'t str, start: &str, end: &str) -> Vec<&'t str> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(start));
    let mut out = Vec::new();
    for line in lines.by_ref() {
        out.push(line);
        if line.trim_end() == end {
            break;
        }
    }
    out
}

/// An IR line without its attribute-group references (` #12`): their
/// numbers depend on everything else in the module.
fn without_attribute_groups(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(" #") {
        let digits = rest[at + 2..].chars().take_while(char::is_ascii_digit).count();
        let after = &rest[at + 2 + digits..];
        let strip = digits > 0 && (after.is_empty() || after.starts_with(' ') || after.starts_with(','));
        out.push_str(&rest[..at]);
        if !strip {
            out.push_str(&rest[at..at + 2 + digits]);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The body of MIR function `name`.
fn mir_body<'t>(mir: &'t str, name: &str) -> Vec<&'t str> {
    let document = mir.split("\n---\n").find(|d| d.starts_with(&format!("name:            {name}\n")));
    let Some(document) = document else { return Vec::new() };
    document
        .lines()
        .skip_while(|l| !l.starts_with("body:"))
        .skip(1)
        .take_while(|l| l.trim() != "...")
        .filter(|l| !l.trim().is_empty())
        .collect()
}

impl CompiledPayloads {
    /// Every stage's text of payload `index`, for reading and snapshots.
    pub fn render_stages(&self, index: usize) -> String {
        use std::fmt::Write;
        let source = self.compiled_as[index];
        let texts = &self.compilations[source.compilation].texts;
        let name = payload::payload_name(source.position);
        let payload = &self.payloads[index];
        let define = format!("define void @{name}()");
        let mut out = String::new();
        writeln!(out, "{}", payload.label).unwrap();
        if self.compilations[source.compilation].sharing == Sharing::Template {
            writeln!(
                out,
                "(stages 5-8: the template of this hook shape, compiled with only special registers live; the final \
                 code is it renamed onto this point's dead registers)"
            )
            .unwrap();
        }
        writeln!(out, "\n== stage 5, payload IR").unwrap();
        for line in section(&texts.payload_ir, &define, "}") {
            writeln!(out, "{}", without_attribute_groups(line)).unwrap();
        }
        writeln!(out, "\n== stage 6, after O3 with intrinsic placeholders").unwrap();
        for line in section(&texts.lowered_ir, &define, "}") {
            writeln!(out, "{}", without_attribute_groups(line)).unwrap();
        }
        writeln!(out, "\n== stage 7, MIR after instruction selection").unwrap();
        for line in mir_body(&texts.selected_mir, &name) {
            writeln!(out, "{line}").unwrap();
        }
        writeln!(out, "\n== stage 8, intrinsics lowered, live registers in place").unwrap();
        for line in mir_body(&texts.lowered_mir, &name) {
            writeln!(out, "{line}").unwrap();
        }
        writeln!(out, "\n== final code").unwrap();
        for line in payload.code.iter() {
            writeln!(out, "{}{line}", if line.ends_with(':') { "" } else { "  " }).unwrap();
        }
        writeln!(out, "\n== resources").unwrap();
        let units = |set: &UnitSet| if set.is_empty() { "none".to_string() } else { set.to_string() };
        writeln!(out, "copied in and out: {}", units(&payload.copied)).unwrap();
        writeln!(out, "pinned: {}", units(&payload.pinned)).unwrap();
        writeln!(out, "written for the application: {}", units(&payload.written)).unwrap();
        writeln!(out, "written by the code: {}", units(&payload.writes)).unwrap();
        let arguments: Vec<String> = payload.kernel_arguments.iter().map(|a| a.to_string()).collect();
        writeln!(out, "kernel arguments: {}", if arguments.is_empty() { "none".into() } else { arguments.join(", ") })
            .unwrap();
        writeln!(out, "stack: {} bytes", payload.scratch_bytes).unwrap();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dump_shows_code_the_check_refused_commented_out() {
        let point = PayloadPoint { function: 0, instruction: 3, calls: Vec::new() };
        let mut compiled = CompiledPayloads::not_yet(&[point], &[PointLabel::in_kernel("k", 3, "S_NOP")]);
        let payload = &mut compiled.payloads[0];
        payload.rejected = Some(Rejection::new(LeftOutCause::WouldChangeLiveRegister, "v0 is live here"));
        payload.refused_code = vec!["buffer_load_dword v0, off, s[0:3], s32".into()];
        assert_eq!(
            compiled.render(),
            "point 0 (kernel k, instruction 3 (S_NOP)): left out: v0 is live here\n  ; buffer_load_dword v0, off, s[0:3], s32\n"
        );
    }

    #[test]
    fn spills_with_the_sva_in_an_agpr_read_the_frame_from_its_copy() {
        use crate::stages::liveness::RegisterFile;
        use crate::stages::lower_mir::physical::Frame;
        let registers = FunctionRegisters {
            in_agprs: Some(AgprHomes { sva: 5, work_item_ids: None }),
            vgpr_limit: 64,
            agpr_limit: 8,
            ..FunctionRegisters::default()
        };
        // Every VGPR live but v10 and v11, every AGPR but the SVA's home taken
        // (a0-a7 live), and the hook reads v[20:21].
        let mut live = UnitSet::range(RegisterFile::Vgpr, 0, 64);
        live.remove(Unit::vgpr(10));
        live.remove(Unit::vgpr(11));
        for a in 0..8 {
            live.insert(Unit::agpr(a));
        }
        let read = UnitSet::range(RegisterFile::Vgpr, 20, 22);
        let frame = Some(Frame::new(false));
        let planned = plan_parking(&registers, &live, &read, 64, 8, PayloadRoom::AlignedPairs(6), frame)
            .expect("a parking")
            .expect("copies");
        let parking = planned.parking;
        // The SVA's copy goes into a VGPR dead here, and the spills read
        // the frame from it; the address the hook reads is never spilled.
        let (copy, _) = parking.spill_frame.expect("spills have a frame");
        assert_eq!(parking.loads, vec![(5, copy)]);
        assert!(copy == 10 || copy == 11, "{copy}");
        assert!(!parking.spilled.is_empty());
        assert!(!parking.spilled.iter().any(|v| (20..22).contains(v)), "{:?}", parking.spilled);
        // The copy is made before the spills read it.
        let mut payload = final_code::FinalPayload { code: vec!["v_mov_b32_e32 v1, 0".into()], ..Default::default() };
        parking.wrap(&mut payload, ".Lend");
        let position = |prefix: &str| payload.code.iter().position(|l| l.starts_with(prefix)).unwrap();
        assert!(position("v_accvgpr_read_b32") < position("buffer_store_dword"), "{:#?}", payload.code);
        // No dead VGPR to copy it into: no spills (llc gets what there is).
        live.insert(Unit::vgpr(10));
        live.insert(Unit::vgpr(11));
        let starved = plan_parking(&registers, &live, &read, 64, 8, PayloadRoom::AlignedPairs(6), frame);
        assert!(starved.map_or(true, |p| p.is_none_or(|p| p.parking.spilled.is_empty())));
    }

    #[test]
    fn a_starved_payload_with_wide_tuples_gets_runs_that_wide() {
        use crate::stages::liveness::RegisterFile;
        assert_eq!(starved_room(1), PayloadRoom::AlignedPairs(STARVED_PAYLOAD_VGPRS));
        assert_eq!(starved_room(2), PayloadRoom::AlignedPairs(STARVED_PAYLOAD_VGPRS));
        let runs = |room| match room {
            PayloadRoom::Runs(runs) => runs.lengths().collect::<Vec<u16>>(),
            other => panic!("{other:?}"),
        };
        assert_eq!(runs(starved_room(4)), [4, 4, 2, 2, 2, 2, 2, 2]);
        assert_eq!(runs(starved_room(8)), [8, 8, 2, 2, 2, 2]);
        assert_eq!(runs(starved_room(16)), [16, 2, 2, 2, 2]);
        // Tensile's memory instructions: v0-v103 live, then every third
        // VGPR up to v254, all AGPRs live. Dead aligned pairs abound, so
        // pairs move nothing, and no run of four is dead.
        let registers = FunctionRegisters { vgpr_limit: 256, agpr_limit: 256, ..FunctionRegisters::default() };
        let mut live = UnitSet::range(RegisterFile::Vgpr, 0, 104);
        for v in (104..256).step_by(3) {
            live.insert(Unit::vgpr(v));
        }
        let live = live.union(&UnitSet::range(RegisterFile::Agpr, 0, 256));
        let read = UnitSet::EMPTY;
        let dead_run = |taken: &UnitSet, length: u16| {
            (0..=256 - length).step_by(2).any(|b| (b..b + length).all(|v| !taken.contains(Unit::vgpr(v))))
        };
        assert!(!dead_run(&live, 4) && dead_run(&live, 2));
        let paired = plan_parking(&registers, &live, &read, 256, 256, starved_room(2), None).unwrap();
        assert!(paired.is_none_or(|p| p.parking.moved.is_empty()));
        let planned =
            plan_parking(&registers, &live, &read, 256, 256, starved_room(4), None).expect("a parking").expect("moves");
        let mut after = live;
        for (from, to) in &planned.parking.moved {
            after.remove(Unit::vgpr(*from));
            after.insert(Unit::vgpr(*to));
        }
        assert!(dead_run(&after, 4), "{:?}", planned.parking.moved);
    }

    #[test]
    fn runs_a_template_needs_are_made_by_moving_live_vgprs_out_of_one_window() {
        use crate::stages::liveness::RegisterFile;
        let registers = FunctionRegisters { vgpr_limit: 32, ..FunctionRegisters::default() };
        // Every other VGPR dead (v1, v3, ..., v31): sixteen dead, no two
        // side by side; the hook reads v[10:11].
        let mut live = UnitSet::EMPTY;
        for v in (0..32).step_by(2) {
            live.insert(Unit::vgpr(v));
        }
        live.insert(Unit::vgpr(11));
        let read = UnitSet::range(RegisterFile::Vgpr, 10, 12);
        let runs = VgprRuns::new([6, 4]).unwrap();
        let planned = plan_parking(&registers, &live, &read, 32, 0, PayloadRoom::Runs(runs), None)
            .expect("a parking")
            .expect("moves");
        let moved = &planned.parking.moved;
        assert!(planned.parking.borrowed.is_empty() && planned.parking.spilled.is_empty());
        // Live ones move out of two windows into dead ones elsewhere.
        let mut after = live;
        for (from, to) in moved {
            assert!(live.contains(Unit::vgpr(*from)) && !live.contains(Unit::vgpr(*to)), "{moved:?}");
            assert!(!read.contains(Unit::vgpr(*from)), "{moved:?}");
            after.remove(Unit::vgpr(*from));
            after.insert(Unit::vgpr(*to));
        }
        let free_run = |length: u16, taken: &UnitSet| {
            (0..=32 - length).step_by(2).find(|b| (*b..b + length).all(|v| !taken.contains(Unit::vgpr(v))))
        };
        let six = free_run(6, &after).expect("a window of six");
        for v in six..six + 6 {
            after.insert(Unit::vgpr(v));
        }
        assert!(free_run(4, &after).is_some(), "{moved:?}");
        assert_eq!(moved.len(), 5, "three live in the six, two in the four: {moved:?}");
        // Too few dead VGPRs for both runs, and nothing to park them in: no
        // moves that could not make them.
        let crowded = UnitSet::range(RegisterFile::Vgpr, 0, 28);
        let planned = plan_parking(&registers, &crowded, &read, 32, 0, PayloadRoom::Runs(runs), None).unwrap();
        assert!(planned.is_none_or(|p| p.parking.moved.len() <= 4));
    }

    #[test]
    fn only_the_register_allocators_failure_means_no_registers() {
        assert!(ran_out_of_registers("error: <unknown>:0:0: ran out of registers during register allocation"));
        // A MIR the parser rejects (LLVM 20+'s wrapped entries before they were read).
        assert!(!ran_out_of_registers("error: YAML:431:12: Unexpected token. Expected Block Entry or Block End."));
        assert!(!ran_out_of_registers("*** Bad machine code: No live segment at use ***"));
    }

    #[test]
    fn attribute_groups_are_left_out_of_rendered_ir() {
        assert_eq!(without_attribute_groups("define void @p() #19 {"), "define void @p() {");
        assert_eq!(without_attribute_groups("  call void @f(i32 1) #14"), "  call void @f(i32 1)");
        assert_eq!(
            without_attribute_groups("  %1 = load i32, ptr %0, align 4, !tbaa !5"),
            "  %1 = load i32, ptr %0, align 4, !tbaa !5"
        );
        assert_eq!(
            without_attribute_groups("  call void asm \"; x #3\", \"\"()"),
            "  call void asm \"; x #3\", \"\"()"
        );
    }

    #[test]
    fn hook_arguments_parse() {
        use gpuinstr_intrinsics::{Register, SpecialRegister};
        assert_eq!(parse_hook_argument("true"), Ok(HookArgument::Int(1)));
        assert_eq!(parse_hook_argument("-3"), Ok(HookArgument::Int(-3)));
        assert_eq!(parse_hook_argument("0x40"), Ok(HookArgument::Int(64)));
        assert_eq!(parse_hook_argument("1.5"), Ok(HookArgument::Float(1.5)));
        assert_eq!(parse_hook_argument("s4"), Ok(HookArgument::Register(Register::Sgpr(4))));
        assert_eq!(parse_hook_argument("exec"), Ok(HookArgument::Register(Register::Special(SpecialRegister::Exec))));
        assert!(parse_hook_argument("banana").unwrap_err().contains("is not a hook argument"));
    }

    #[test]
    fn chunks_keep_the_module_header() {
        let ir = "; ModuleID = 'm'\n@G = external global i32\n; Function Attrs: nounwind\ndefine void @a() {\nentry:\n  ret void\n}\n\ndefine void @b() {\nentry:\n  ret void\n}\nattributes #0 = { nounwind }\n";
        let chunks = chunk_ir(ir, 1);
        assert_eq!(chunks.len(), 2);
        for chunk in &chunks {
            assert!(chunk.contains("@G = external global i32") && chunk.contains("attributes #0"), "{chunk}");
            assert!(!chunk.contains("; Function Attrs"));
        }
        assert!(chunks[0].contains("define void @a()") && !chunks[0].contains("define void @b()"));
        assert!(chunks[1].contains("define void @b()"));
    }
}
