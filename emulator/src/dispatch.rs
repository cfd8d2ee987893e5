//! A kernel dispatch: the AQL packet, the kernel argument segment with its
//! hidden arguments, scratch, each wave's initial registers exactly as the
//! hardware sets them from the kernel descriptor, and the run loop
//! (workgroups one after another; the waves of a workgroup interleave at
//! barriers).

use std::collections::HashMap;

use gpuinstr::stages::load::descriptor::{KernelDescriptor, RSRC1};
use gpuinstr::stages::load::Kernel;

use crate::error::{EmulatorError, StopSite};
use crate::inputs::{initial_sgprs, Input};
use crate::memory::{Memory, PRIVATE_APERTURE, SHARED_APERTURE};
use crate::operands::FLAT_SCRATCH;
use crate::processor::Processor;
use crate::program::Program;
use crate::semantics::{Context, LdsOutOfRange, Machine};
use crate::wave::{Wave, WaveId, WaveState, LANES};

/// Grid and workgroup shape, in work-items per workgroup and workgroups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    pub workgroups: [u32; 3],
    pub workgroup_size: [u32; 3],
    /// Work-items per dimension: `workgroups × workgroup_size`, or less when
    /// the last workgroup of a dimension is partial (an AQL grid need not be
    /// a whole number of workgroups).
    pub grid_size: [u32; 3],
    /// Dynamic LDS bytes on top of the kernel's fixed group segment.
    pub dynamic_lds: u32,
}

impl Launch {
    /// `workgroups` whole workgroups of `workgroup_size` work-items.
    pub fn whole(workgroups: [u32; 3], workgroup_size: [u32; 3]) -> Self {
        let grid_size = std::array::from_fn(|d| workgroups[d].saturating_mul(workgroup_size[d]));
        Launch { workgroups, workgroup_size, grid_size, dynamic_lds: 0 }
    }

    pub fn linear(workgroups: u32, workgroup_size: u32) -> Self {
        Launch::whole([workgroups, 1, 1], [workgroup_size, 1, 1])
    }

    /// A grid of `grid_size` work-items in workgroups of `workgroup_size`
    /// (none zero): the last workgroup of a dimension holds the rest.
    pub fn of_grid(grid_size: [u32; 3], workgroup_size: [u32; 3]) -> Self {
        let workgroups = std::array::from_fn(|d| grid_size[d].div_ceil(workgroup_size[d].max(1)));
        Launch { workgroups, workgroup_size, grid_size, dynamic_lds: 0 }
    }

    /// Work-items of workgroup `id` per dimension: the full size, or the
    /// rest of the grid in a partial last workgroup.
    pub fn size_of_workgroup(&self, id: [u32; 3]) -> [u32; 3] {
        std::array::from_fn(|d| {
            let start = u64::from(id[d]) * u64::from(self.workgroup_size[d]);
            (u64::from(self.grid_size[d]).saturating_sub(start)).min(u64::from(self.workgroup_size[d])) as u32
        })
    }

    fn dimensions(&self) -> u16 {
        if self.workgroups[2] > 1 || self.workgroup_size[2] > 1 {
            3
        } else if self.workgroups[1] > 1 || self.workgroup_size[1] > 1 {
            2
        } else {
            1
        }
    }
}

/// What a run counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Instructions executed by each wave, by dispatch-wide wave index.
    pub per_wave: Vec<u64>,
    /// Per instruction address: (times executed by a wave, active lanes
    /// summed over those executions).
    pub per_address: HashMap<u64, (u64, u64)>,
    /// LDS accesses (per lane and dword) past the workgroup's allocation,
    /// dropped or read as 0 (`LdsOutOfRange::LikeHardware`), and how many
    /// of them were writes.
    pub lds_out_of_range: u64,
    pub lds_writes_out_of_range: u64,
}

impl Counts {
    pub fn instructions(&self) -> u64 {
        self.per_wave.iter().sum()
    }
}

/// One executed instruction, for traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEntry {
    pub wave: u32,
    /// Code object address.
    pub address: u64,
    /// EXEC before the instruction.
    pub exec: u64,
}

/// EXEC around one wave execution of an instruction whose opcode
/// `Options::exec_history` names, for checking branch records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ExecChange {
    pub wave: u32,
    /// Code object address of the instruction.
    pub address: u64,
    pub before: u64,
    pub after: u64,
}

pub use crate::access::{Access, Space};

/// Instructions a wave may run before it is taken for an endless loop.
pub const DEFAULT_MAX_INSTRUCTIONS: u64 = 50_000_000;

#[derive(Clone, Debug)]
pub struct Options {
    /// Stop a wave after this many instructions (a hung kernel).
    pub max_instructions: u64,
    /// How the user raises that limit, for the message (the front end's
    /// option).
    pub how_to_raise_the_limit: String,
    /// Record every executed instruction (large).
    pub trace: bool,
    /// Record every lane's FLAT and GLOBAL access address.
    pub accesses: bool,
    /// Record EXEC before and after each execution of these opcodes (the
    /// decoder's pseudo opcode names, `S_AND_SAVEEXEC_B64`).
    pub exec_history: Vec<String>,
    /// With `accesses` or `exec_history`: fold them into digests
    /// ([`RunReport::access_digest`], [`RunReport::exec_digest`]) instead of
    /// listing them, instruction addresses taken from this base: runs of
    /// tens of millions of accesses then cost no memory.
    pub digest_from: Option<u64>,
    /// What an LDS access past the workgroup's allocation does (the
    /// `Device` stops by default; dispatch packets get the hardware's way).
    pub lds_out_of_range: LdsOutOfRange,
    /// The firmware preloads kernel arguments where the processor can
    /// (today's); without, kernels that ask for it run their prologue.
    pub firmware_preloads_arguments: bool,
    /// The board's SRAM ECC is on (every Instinct board's default;
    /// `sramecc+`), where the processor has it: D16 loads then zero the
    /// other half of their register instead of keeping it.
    pub sram_ecc_on: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_instructions: DEFAULT_MAX_INSTRUCTIONS,
            how_to_raise_the_limit: "raise the limit with Options::max_instructions".into(),
            trace: false,
            accesses: false,
            exec_history: Vec::new(),
            digest_from: None,
            lds_out_of_range: LdsOutOfRange::Stop,
            firmware_preloads_arguments: true,
            sram_ecc_on: true,
        }
    }
}

/// What a dispatch produced besides memory.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    pub counts: Counts,
    pub trace: Vec<TraceEntry>,
    /// With `Options::accesses`: every lane's FLAT, GLOBAL, buffer and LDS access.
    pub accesses: Vec<Access>,
    /// With `Options::exec_history`: EXEC around each execution of the
    /// opcodes named, in execution order.
    pub exec_history: Vec<ExecChange>,
    /// With `Options::digest_from`, what the lists would have held:
    /// `[instruction, wave, lane, memory]` per access and `[instruction,
    /// wave, before, after]` per EXEC change, in execution order.
    pub access_digest: Digest,
    pub exec_digest: Digest,
}

/// An order-sensitive digest of a list of records of numbers: how many,
/// and FNV-1a (64-bit) over each number's eight little-endian bytes, record
/// after record. Two lists with the same digest are, for any practical
/// purpose, the same list in the same order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Digest {
    pub count: u64,
    pub fnv1a: u64,
}

impl Default for Digest {
    fn default() -> Self {
        Digest { count: 0, fnv1a: 0xcbf2_9ce4_8422_2325 }
    }
}

impl Digest {
    pub fn add(&mut self, record: &[u64]) {
        for number in record {
            for byte in number.to_le_bytes() {
                self.fnv1a = (self.fnv1a ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        self.count += 1;
    }
}

/// Bytes of scratch each lane gets (the private segment size, 16-aligned).
pub fn private_bytes_per_lane_of(kernel: &Kernel) -> u64 {
    let size = u64::from(kernel.descriptor.private_segment_fixed_size).max(kernel.metadata.private_segment_fixed_size);
    size.next_multiple_of(16)
}

/// The AQL kernel dispatch packet (64 bytes).
pub fn dispatch_packet_for(launch: &Launch, kernel: &Kernel, kernarg: u64, kernel_object: u64) -> [u8; 64] {
    let mut p = [0u8; 64];
    let header: u16 = 2 | (1 << 8) | (2 << 9) | (2 << 11); // KERNEL_DISPATCH, barrier, system scopes
    p[0..2].copy_from_slice(&header.to_le_bytes());
    p[2..4].copy_from_slice(&launch.dimensions().to_le_bytes());
    for d in 0..3 {
        p[4 + 2 * d..6 + 2 * d].copy_from_slice(&(launch.workgroup_size[d] as u16).to_le_bytes());
        p[12 + 4 * d..16 + 4 * d].copy_from_slice(&launch.grid_size[d].to_le_bytes());
    }
    p[24..28].copy_from_slice(&(private_bytes_per_lane_of(kernel) as u32).to_le_bytes());
    let group = kernel.descriptor.group_segment_fixed_size + launch.dynamic_lds;
    p[28..32].copy_from_slice(&group.to_le_bytes());
    p[32..40].copy_from_slice(&kernel_object.to_le_bytes());
    p[40..48].copy_from_slice(&kernarg.to_le_bytes());
    p
}

/// A hidden argument's value, or None for one the emulator does not know.
fn hidden_argument(kind: &str, launch: &Launch, queue: u64) -> Option<u64> {
    let axis = |name: &str| match name.chars().last() {
        Some('x') => Some(0usize),
        Some('y') => Some(1),
        Some('z') => Some(2),
        _ => None,
    };
    Some(match kind {
        // Code object v5: whole workgroups and the partial one's size.
        k if k.starts_with("hidden_block_count_") => {
            let d = axis(k)?;
            u64::from(launch.grid_size[d] / launch.workgroup_size[d].max(1))
        }
        k if k.starts_with("hidden_group_size_") => u64::from(launch.workgroup_size[axis(k)?]),
        k if k.starts_with("hidden_remainder_") => {
            let d = axis(k)?;
            u64::from(launch.grid_size[d] % launch.workgroup_size[d].max(1))
        }
        k if k.starts_with("hidden_global_offset_") => 0,
        "hidden_grid_dims" => u64::from(launch.dimensions()),
        "hidden_dynamic_lds_size" => u64::from(launch.dynamic_lds),
        "hidden_private_base" => PRIVATE_APERTURE >> 32,
        "hidden_shared_base" => SHARED_APERTURE >> 32,
        "hidden_queue_ptr" => queue,
        "hidden_none"
        | "hidden_printf_buffer"
        | "hidden_hostcall_buffer"
        | "hidden_default_queue"
        | "hidden_completion_action"
        | "hidden_multigrid_sync_arg"
        | "hidden_heap_v1" => 0,
        _ => return None,
    })
}

/// The kernel argument segment: explicit arguments as given, hidden ones
/// from the launch.
pub fn kernarg_segment(
    kernel: &Kernel,
    launch: &Launch,
    arguments: &[Vec<u8>],
    queue: u64,
) -> Result<Vec<u8>, EmulatorError> {
    let name = kernel.name().to_string();
    let fail = |message: String| EmulatorError::Dispatch { kernel: name.clone(), message };
    let size = kernel.metadata.kernarg_segment_size.max(u64::from(kernel.descriptor.kernarg_size));
    // Kernels load arguments in wide scalar loads that may run past the
    // last one; the runtime's kernarg memory has room after it, so zeroes
    // follow here too.
    let mut segment = vec![0u8; (size + 64).max(256).next_multiple_of(64) as usize];
    let explicit: Vec<_> = kernel.metadata.arguments.iter().filter(|a| !a.is_hidden()).collect();
    if explicit.len() != arguments.len() {
        let names: Vec<String> = explicit
            .iter()
            .map(|a| match &a.name {
                Some(name) => format!("{name} ({} bytes)", a.size),
                None => format!("{} bytes", a.size),
            })
            .collect();
        return Err(fail(format!(
            "takes {} arguments, {} given: {}",
            explicit.len(),
            arguments.len(),
            names.join(", ")
        )));
    }
    for (index, (argument, value)) in explicit.iter().zip(arguments).enumerate() {
        if value.len() as u64 != argument.size {
            let name = argument.name.as_ref().map(|n| format!(" ({n})")).unwrap_or_default();
            return Err(fail(format!("argument {index}{name} is {} bytes, {} given", argument.size, value.len())));
        }
        let at = argument.offset as usize;
        segment[at..at + value.len()].copy_from_slice(value);
    }
    for argument in kernel.metadata.arguments.iter().filter(|a| a.is_hidden()) {
        let value = hidden_argument(&argument.value_kind, launch, queue)
            .ok_or_else(|| fail(format!("hidden argument {} is not supported", argument.value_kind)))?;
        let at = argument.offset as usize;
        let bytes = value.to_le_bytes();
        let n = (argument.size as usize).min(8);
        if at + n <= segment.len() {
            segment[at..at + n].copy_from_slice(&bytes[..n]);
        }
    }
    Ok(segment)
}

/// The MODE register a wave starts with (from COMPUTE_PGM_RSRC1).
fn initial_mode(descriptor: &KernelDescriptor) -> u32 {
    let get = |name| descriptor.rsrc1(name);
    get("FLOAT_ROUND_MODE_32")
        | (get("FLOAT_ROUND_MODE_16_64") << 2)
        | (get("FLOAT_DENORM_MODE_32") << 4)
        | (get("FLOAT_DENORM_MODE_16_64") << 6)
        | (get("ENABLE_DX10_CLAMP") << 8)
        | (get("ENABLE_IEEE_MODE") << 9)
        | (get("FP16_OVFL") << 23)
}

/// Device addresses a dispatch sets up once.
pub struct DispatchMemory {
    pub packet: u64,
    pub queue: u64,
    pub kernarg: u64,
    pub scratch: u64,
    pub scratch_per_wave: u64,
}

/// A wave's registers at its first instruction.
pub fn initial_wave(
    kernel: &Kernel,
    launch: &Launch,
    dispatch: &DispatchMemory,
    id: WaveId,
    processor: &Processor,
    load_base: u64,
) -> Wave {
    let descriptor = &kernel.descriptor;
    let mut wave = Wave::new(id);
    let wave_offset = dispatch.scratch_per_wave * u64::from(id.global);
    wave.scratch_base = dispatch.scratch + wave_offset;
    wave.mode = initial_mode(descriptor);
    wave.pc = load_base + kernel.code_address;
    let mut set = |first: u16, values: &[u32]| {
        for (k, v) in values.iter().enumerate() {
            wave.sgpr[first as usize + k] = *v;
        }
    };
    let split = |v: u64| [v as u32, (v >> 32) as u32];
    for (input, first) in initial_sgprs(descriptor, processor) {
        match input {
            Input::PrivateSegmentBuffer => {
                // Swizzled, 4-byte elements, index stride 64, lane id added:
                // each lane's private dwords interleave across the wave.
                let [lo, hi] = split(dispatch.scratch);
                let word3 = (4 << 15) | (1 << 19) | (3 << 21) | (1 << 23);
                set(first, &[lo, (hi & 0xffff) | (1 << 31), u32::MAX, word3]);
            }
            Input::DispatchPtr => set(first, &split(dispatch.packet)),
            Input::QueuePtr => set(first, &split(dispatch.queue)),
            Input::KernargSegmentPtr => set(first, &split(dispatch.kernarg)),
            Input::DispatchId => set(first, &[0, 0]),
            Input::FlatScratchInit => set(first, &split(dispatch.scratch)),
            Input::PrivateSegmentSize => set(first, &[private_bytes_per_lane_of(kernel) as u32]),
            Input::WorkgroupIdX => set(first, &[id.workgroup[0]]),
            Input::WorkgroupIdY => set(first, &[id.workgroup[1]]),
            Input::WorkgroupIdZ => set(first, &[id.workgroup[2]]),
            Input::WorkgroupInfo => set(first, &[0]),
            Input::PrivateSegmentWaveOffset => set(first, &[wave_offset as u32]),
        }
    }
    // A partial workgroup's work-items are numbered in its own shape.
    let size = launch.size_of_workgroup(id.workgroup);
    let [bx, by, _] = size;
    let threads = size.iter().product::<u32>();
    let enabled_ids = crate::inputs::work_item_ids_enabled(descriptor) as usize;
    let mut exec = 0u64;
    for lane in 0..LANES {
        let t = id.wave * LANES as u32 + lane as u32;
        if t >= threads {
            break;
        }
        exec |= 1 << lane;
        // Only the ids the descriptor enables are written: a kernel that
        // reads X alone takes v0 whole, even on gfx90a (packed ids).
        let ids = [t % bx, (t / bx) % by, t / (bx * by)];
        for (axis, id) in ids.into_iter().enumerate().take(enabled_ids) {
            if processor.packed_work_item_ids {
                wave.vgpr[0][lane] |= id << (10 * axis);
            } else {
                wave.vgpr[axis][lane] = id;
            }
        }
    }
    wave.set_exec(exec);
    // Without architected flat scratch the kernel sets FLAT_SCRATCH itself;
    // start it at the wave's scratch so flat private accesses work either way.
    let [lo, hi] = split(wave.scratch_base);
    wave.sgpr[FLAT_SCRATCH as usize] = lo;
    wave.sgpr[FLAT_SCRATCH as usize + 1] = hi;
    wave
}

/// The bytes a kernel that asks for preloaded arguments starts with
/// before where firmware that preloads them enters it (AMDGPUUsage,
/// "Preloaded Kernel Arguments").
pub const PRELOAD_PROLOGUE_BYTES: u64 = 256;

/// What the command processor preloads for every wave of a dispatch: the
/// first SGPR (after the user SGPRs the properties enable) and the dwords
/// of the kernel argument segment, from `KERNARG_PRELOAD_SPEC` (length in
/// bits 0-6, offset in dwords in bits 7-15 of the descriptor's bytes
/// 58-59); none where the processor or its firmware does not preload.
fn preloaded_arguments(
    kernel: &Kernel,
    dispatch: &DispatchMemory,
    processor: &Processor,
    options: &Options,
    memory: &Memory,
) -> Result<Option<(u16, Vec<u32>)>, EmulatorError> {
    let descriptor = &kernel.descriptor;
    let spec = u16::from_le_bytes([descriptor.reserved2[0], descriptor.reserved2[1]]);
    let (length, offset) = (u64::from(spec & 0x7f), u64::from(spec >> 7));
    if length == 0 || !processor.preloads_kernel_arguments || !options.firmware_preloads_arguments {
        return Ok(None);
    }
    let first = crate::inputs::enabled_user_sgprs(descriptor);
    if first as u64 + length > 16 {
        return Err(EmulatorError::Isa(format!(
            "the kernel preloads {length} dwords of arguments after {first} user SGPRs; the hardware loads 16 at most"
        )));
    }
    let at = dispatch.kernarg + offset * 4;
    let bytes = memory.bytes(at, (length * 4) as usize).map_err(|fault| {
        EmulatorError::Isa(format!("the preloaded kernel arguments at {at:#x} cannot be read: {fault}"))
    })?;
    let values = bytes.chunks_exact(4).map(|d| u32::from_le_bytes(d.try_into().expect("4 bytes"))).collect();
    Ok(Some((first, values)))
}

/// Runs every workgroup of a dispatch. On a stop, `trace_so_far` gets the
/// trace up to the stopping instruction (when tracing).
#[allow(clippy::too_many_arguments)]
pub fn run(
    program: &mut Program,
    memory: &mut Memory,
    kernel: &Kernel,
    launch: &Launch,
    dispatch: &DispatchMemory,
    machine: &Machine,
    options: &Options,
    trace_so_far: &mut Vec<TraceEntry>,
) -> Result<RunReport, EmulatorError> {
    // Per code slot: (wave executions, active lanes); a map at the end.
    let tally = vec![(0u64, 0u64); program.slots()];
    let report = RunReport::default();
    let preloaded = preloaded_arguments(kernel, dispatch, machine.processor, options, memory)?;
    let mut runner = Runner { program, memory, kernel, machine, options, report, tally, accessed: Vec::new() };
    let mut global = 0u32;
    let [gx, gy, gz] = launch.workgroups;
    // The hardware allocates LDS in 512-byte blocks (gfx7 and later): past
    // the group segment but inside its last block is not out of range there.
    let lds_bytes = match machine.lds_out_of_range {
        LdsOutOfRange::Stop => machine.lds_size,
        LdsOutOfRange::LikeHardware => machine.lds_size.next_multiple_of(512),
    };
    for z in 0..gz {
        for y in 0..gy {
            for x in 0..gx {
                let threads = launch.size_of_workgroup([x, y, z]).iter().product::<u32>();
                let waves_per_group = threads.div_ceil(LANES as u32);
                let mut lds = vec![0u8; lds_bytes as usize];
                let mut waves: Vec<Wave> = (0..waves_per_group)
                    .map(|w| {
                        let id = WaveId { workgroup: [x, y, z], wave: w, global: global + w };
                        let mut wave = initial_wave(kernel, launch, dispatch, id, machine.processor, machine.load_base);
                        if let Some((first, values)) = &preloaded {
                            wave.sgpr[*first as usize..*first as usize + values.len()].copy_from_slice(values);
                            wave.pc += PRELOAD_PROLOGUE_BYTES;
                        }
                        wave
                    })
                    .collect();
                global += waves_per_group;
                if let Err(stop) = runner.run_workgroup(&mut waves, &mut lds) {
                    *trace_so_far = std::mem::take(&mut runner.report.trace);
                    return Err(stop);
                }
                runner.report.counts.per_wave.extend(waves.iter().map(|w| w.instructions));
                runner.report.counts.lds_out_of_range += waves.iter().map(|w| w.lds_out_of_range).sum::<u64>();
                runner.report.counts.lds_writes_out_of_range +=
                    waves.iter().map(|w| w.lds_writes_out_of_range).sum::<u64>();
            }
        }
    }
    let Runner { program, mut report, tally, .. } = runner;
    report.counts.per_address = tally
        .iter()
        .enumerate()
        .filter(|(_, (waves, _))| *waves > 0)
        .map(|(slot, counts)| (program.slot_address(slot), *counts))
        .collect();
    Ok(report)
}

/// One dispatch in progress: what every step reads and what it accumulates.
struct Runner<'a> {
    program: &'a mut Program,
    memory: &'a mut Memory,
    kernel: &'a Kernel,
    machine: &'a Machine,
    options: &'a Options,
    report: RunReport,
    /// The current instruction's accesses (reused).
    accessed: Vec<(u8, u64, Space, u8)>,
    tally: Vec<(u64, u64)>,
}

impl Runner<'_> {
    fn run_workgroup(&mut self, waves: &mut [Wave], lds: &mut [u8]) -> Result<(), EmulatorError> {
        loop {
            for wave in waves.iter_mut() {
                while wave.state == WaveState::Running {
                    self.step(wave, lds)?;
                }
            }
            if waves.iter().all(|w| w.state == WaveState::Ended) {
                return Ok(());
            }
            // Every wave that has not ended waits at the barrier: release them.
            for wave in waves.iter_mut().filter(|w| w.state == WaveState::AtBarrier) {
                wave.state = WaveState::Running;
            }
        }
    }

    fn step(&mut self, wave: &mut Wave, lds: &mut [u8]) -> Result<(), EmulatorError> {
        let kernel = self.kernel.name();
        let address = wave.pc.wrapping_sub(self.machine.load_base);
        let Some(inst) = self.program.fetch(address) else {
            return Err(EmulatorError::Undecodable { kernel: kernel.into(), wave: wave.id.to_string(), address });
        };
        if wave.instructions >= self.options.max_instructions {
            let (limit, how_to_raise) = (self.options.max_instructions, self.options.how_to_raise_the_limit.clone());
            return Err(EmulatorError::InstructionLimit {
                kernel: kernel.into(),
                wave: wave.id.to_string(),
                limit,
                how_to_raise,
            });
        }
        let exec = wave.exec();
        if self.options.trace {
            self.report.trace.push(TraceEntry { wave: wave.id.global, address, exec });
        }
        if let Some(slot) = self.program.slot(address) {
            let entry = &mut self.tally[slot];
            entry.0 += 1;
            entry.1 += u64::from(exec.count_ones());
        }
        let next_pc = wave.pc + u64::from(inst.size);
        let accessed = self.options.accesses.then_some(&mut self.accessed);
        let mut context = Context { wave, memory: self.memory, lds, machine: self.machine, next_pc, accessed };
        let outcome = (inst.handler)(&mut context, &inst);
        let next_pc = context.next_pc;
        if self.options.exec_history.contains(&inst.name) {
            let change = ExecChange { wave: wave.id.global, address, before: exec, after: wave.exec() };
            match self.options.digest_from {
                Some(base) => self.report.exec_digest.add(&[
                    address.wrapping_sub(base),
                    u64::from(change.wave),
                    change.before,
                    change.after,
                ]),
                None => self.report.exec_history.push(change),
            }
        }
        for (lane, memory, space, bytes) in self.accessed.drain(..) {
            match self.options.digest_from {
                Some(base) => self.report.access_digest.add(&[
                    address.wrapping_sub(base),
                    u64::from(wave.id.global),
                    u64::from(lane),
                    memory,
                ]),
                None => self.report.accesses.push(Access {
                    wave: wave.id.global,
                    address,
                    lane,
                    memory,
                    space,
                    step: wave.instructions,
                    bytes,
                }),
            }
        }
        if let Err(fault) = outcome {
            let site = StopSite {
                kernel: kernel.into(),
                wave: wave.id.to_string(),
                address,
                opcode: inst.name.clone(),
                text: self.program.text(address),
            };
            return Err(EmulatorError::Stopped { site: Box::new(site), fault });
        }
        wave.pc = next_pc;
        wave.instructions += 1;
        Ok(())
    }
}

/// Granule-rounded register counts of a descriptor (for HW_REG_GPR_ALLOC).
pub fn allocated_registers(descriptor: &KernelDescriptor, processor: &Processor) -> (u32, u32) {
    let vgpr_granule = processor.vgpr_granule;
    let field = |name| RSRC1.iter().find(|f| f.name == name).map(|f| f.get(descriptor.compute_pgm_rsrc1)).unwrap_or(0);
    let vgprs = (field("GRANULATED_WORKITEM_VGPR_COUNT") + 1) * vgpr_granule;
    let sgprs = (field("GRANULATED_WAVEFRONT_SGPR_COUNT") + 1) * 16;
    (vgprs, sgprs)
}
