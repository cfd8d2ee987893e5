//! The command processor: reads AQL packets from the rings of the queues
//! the runtime created, as the hardware's would when a doorbell rings, and
//! carries them out: kernel dispatches on the emulator, barrier-AND/OR
//! packets, completion signals (value, timestamps, event mailbox and the
//! interrupt that wakes waiters). One thread serves every queue, packets in
//! order per queue.
//!
//! Kernels see only memory the runtime allocated or registered with the
//! driver (and the scratch the command processor gives the dispatch): any
//! other access stops the program with the kernel, the address and the
//! instruction.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use gpuinstr_emulator::memory::{AddressSpace, Memory};
use gpuinstr_emulator::packet::{self, DispatchPacket, PacketPlace};
use gpuinstr_emulator::program::Program;
use gpuinstr_emulator::semantics::Interrupts;
use gpuinstr_emulator::{Fault, LdsOutOfRange, Options, RunReport};

use crate::kfd::{Backing, Errno, Kfd, ProcessMemory, Queue};

/// AQL packet types (`hsa_packet_type_t`).
const PACKET_VENDOR: u16 = 0;
const PACKET_INVALID: u16 = 1;
const PACKET_KERNEL_DISPATCH: u16 = 2;
const PACKET_BARRIER_AND: u16 = 3;
const PACKET_AGENT_DISPATCH: u16 = 4;
const PACKET_BARRIER_OR: u16 = 5;
/// AMD's vendor packet formats (`hsa_amd_packet_type_t`): wait for a
/// signal's value to meet a condition.
const AMD_BARRIER_VALUE: u8 = 2;
/// ROCr's own format: a jump to an indirect buffer of PM4 commands.
const AMD_PM4_INDIRECT_BUFFER: u8 = 1;
/// PM4 type-3 opcodes the emulated GPU carries out: cache maintenance,
/// which coherent host memory does not need.
const PM4_NOP: u32 = 0x10;
const PM4_ACQUIRE_MEM: u32 = 0x58;
const PM4_INDIRECT_BUFFER: u32 = 0x3f;
/// `amd_signal_t` fields.
const SIGNAL_VALUE: u64 = 8;
const SIGNAL_MAILBOX: u64 = 16;
const SIGNAL_EVENT_ID: u64 = 24;
const SIGNAL_START: u64 = 32;
const SIGNAL_END: u64 = 40;
/// `amd_queue_t.write_dispatch_id`: the queue starts this far before it.
const QUEUE_WRITE_DISPATCH_ID: u64 = 56;

/// What the command processor did, for `GPUINSTR_DEVICE_STATS`.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub dispatches: u64,
    /// Wave instructions the emulator executed.
    pub instructions: u64,
    /// Time spent running dispatches.
    pub busy: Duration,
    /// LDS accesses past a workgroup's allocation, done as the hardware
    /// does them (writes dropped, reads 0), and the dispatches with any.
    pub lds_out_of_range: u64,
    pub lds_writes_out_of_range: u64,
    pub lds_out_of_range_dispatches: u64,
    /// The first kernel that made one.
    pub lds_out_of_range_kernel: Option<String>,
}

static STATS: std::sync::Mutex<Stats> = std::sync::Mutex::new(Stats {
    dispatches: 0,
    instructions: 0,
    busy: Duration::ZERO,
    lds_out_of_range: 0,
    lds_writes_out_of_range: 0,
    lds_out_of_range_dispatches: 0,
    lds_out_of_range_kernel: None,
});

/// The totals so far.
pub fn stats() -> Stats {
    STATS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The process's memory, shared with the front end.
pub type SharedMemory = Arc<dyn ProcessMemory + Send + Sync>;

/// Why the command processor stopped the program.
pub type Stop = Box<dyn Fn(&str) + Send + Sync>;

/// Where the packets it carries out are told, when the front end traces.
pub type Trace = Option<Box<dyn Fn(&str) + Send + Sync>>;

/// How many instructions a wave may run before the device takes it for an
/// endless loop (`gpuinstr-run --max-instructions`).
#[derive(Clone, Debug)]
pub struct InstructionLimit {
    pub per_wave: u64,
    /// How the user raises it, for the message.
    pub how_to_raise: String,
}

/// The emulator's own limit, when the user sets none.
pub const DEFAULT_MAX_INSTRUCTIONS: u64 = gpuinstr_emulator::dispatch::DEFAULT_MAX_INSTRUCTIONS;

/// How many times as many instructions a wave of an instrumented kernel
/// may run: instrumentation multiplies a wave's instructions 25 to 30
/// times (a hook on every instruction), and the limit is meant for the
/// program's own loops.
pub const INSTRUMENTED_FACTOR: u64 = 32;

/// Kernel objects (descriptor addresses) of kernels that run instrumented
/// code, as gpuinstr's runtime says when it loads them.
static INSTRUMENTED: std::sync::Mutex<Option<std::collections::HashSet<u64>>> = std::sync::Mutex::new(None);

/// gpuinstr's runtime says that `kernel_object` runs instrumented code
/// (or, when its executable is destroyed, no longer): its waves get
/// [`INSTRUMENTED_FACTOR`] times the limit.
pub fn kernel_instrumented(kernel_object: u64, instrumented: bool) {
    let mut set = INSTRUMENTED.lock().unwrap_or_else(|e| e.into_inner());
    let set = set.get_or_insert_with(Default::default);
    if instrumented {
        set.insert(kernel_object);
    } else {
        set.remove(&kernel_object);
    }
}

fn is_instrumented(kernel_object: u64) -> bool {
    INSTRUMENTED.lock().unwrap_or_else(|e| e.into_inner()).as_ref().is_some_and(|s| s.contains(&kernel_object))
}

/// Where each dispatch's counts go, as one JSON line, when the front end
/// asks (`GPUINSTR_DEVICE_DISPATCH_LOG`): the oracle for tools' numbers.
pub type DispatchLog = Option<DispatchLogging>;

pub struct DispatchLogging {
    /// Takes each dispatch's line.
    pub write: Box<dyn Fn(&str) + Send + Sync>,
    /// Also log EXEC before and after every execution of these opcodes
    /// (the emulator's pseudo opcode names): the oracle for branch records.
    pub exec_history: Vec<String>,
    /// Also log every lane's flat and global access: the oracle for
    /// memory traces (large).
    pub accesses: bool,
    /// Log digests of the accesses and the EXEC history instead of the
    /// lists (`access_digest`, `exec_digest`: count and FNV-1a): for
    /// dispatches of tens of millions of accesses.
    pub digests: bool,
}

pub struct CommandProcessor {
    kfd: &'static Kfd,
    memory: SharedMemory,
    stop: Stop,
    trace: Trace,
    dispatch_log: DispatchLog,
    limit: InstructionLimit,
    /// Decoded code and kernel names, per loaded code buffer (its handle:
    /// a runtime that frees code and loads other code at the same address
    /// gets a new buffer, and the old decoding must not run it).
    programs: HashMap<u64, (Program, HashMap<u64, String>)>,
}

/// Starts the command processor's thread (once per process).
pub fn start(
    kfd: &'static Kfd,
    memory: SharedMemory,
    stop: Stop,
    trace: Trace,
    dispatch_log: DispatchLog,
    limit: InstructionLimit,
) {
    std::thread::Builder::new()
        .name("gpuinstr-cp".into())
        .spawn(move || {
            CommandProcessor { kfd, memory, stop, trace, dispatch_log, limit, programs: HashMap::new() }.serve()
        })
        .expect("the command processor's thread starts");
}

impl CommandProcessor {
    fn serve(mut self) {
        let mut idle = Duration::from_micros(20);
        loop {
            let queues: Vec<u32> = self.kfd.state().queues().map(|q| q.id).collect();
            let mut worked = false;
            for id in queues {
                // Destroyed since listed: its ring may be gone already.
                let Some(queue) = self.kfd.take_queue(id) else { continue };
                let stepped = self.step(&queue);
                self.kfd.release_queue();
                match stepped {
                    Ok(did) => worked |= did,
                    Err(message) => {
                        (self.stop)(&message);
                        return;
                    }
                }
            }
            if worked {
                idle = Duration::from_micros(20);
            } else {
                std::thread::sleep(idle);
                idle = (idle * 2).min(Duration::from_millis(2));
            }
        }
    }

    fn u64_at(&self, address: u64) -> Result<u64, String> {
        let mut bytes = [0; 8];
        self.memory.read(address, &mut bytes).map_err(|e| format!("cannot read {address:#x}: {e:?}"))?;
        Ok(u64::from_le_bytes(bytes))
    }

    fn write_u64(&self, address: u64, value: u64) -> Result<(), String> {
        self.memory.write(address, &value.to_le_bytes()).map_err(|e| format!("cannot write {address:#x}: {e:?}"))
    }

    /// Carries out the next packet of `queue` if there is one ready; true if it did.
    fn step(&mut self, queue: &Queue) -> Result<bool, String> {
        let index = |what: &str, e: String| format!("queue {}: its {what} index: {e}", queue.id);
        let read = self.u64_at(queue.read_pointer).map_err(|e| index("read", e))?;
        let write = self.u64_at(queue.write_pointer).map_err(|e| index("write", e))?;
        if read >= write || queue.ring_bytes < 64 {
            return Ok(false);
        }
        let slots = u64::from(queue.ring_bytes) / 64;
        let at = queue.ring_base + (read % slots) * 64;
        let mut bytes = [0u8; 64];
        self.memory.read(at, &mut bytes).map_err(|e| format!("cannot read the packet at {at:#x}: {e:?}"))?;
        let header = u16::from_le_bytes([bytes[0], bytes[1]]);
        let completion = u64::from_le_bytes(bytes[56..64].try_into().expect("8 bytes"));
        match header & 0xff {
            // Reserved but not written yet.
            PACKET_INVALID => return Ok(false),
            PACKET_KERNEL_DISPATCH => {
                let start = self.kfd.gpu_clock();
                self.dispatch(queue, at, &bytes)?;
                self.consumed(queue, at, read, &bytes, completion)?;
                self.complete(completion, start)?;
            }
            PACKET_BARRIER_AND | PACKET_BARRIER_OR => {
                let mut values = Vec::new();
                for k in 0..5 {
                    let signal = u64::from_le_bytes(bytes[8 + 8 * k..16 + 8 * k].try_into().expect("8 bytes"));
                    if signal != 0 {
                        values.push(self.u64_at(signal + SIGNAL_VALUE)? as i64);
                    }
                }
                let satisfied = if header & 0xff == PACKET_BARRIER_AND {
                    values.iter().all(|&v| v == 0)
                } else {
                    values.is_empty() || values.contains(&0)
                };
                if !satisfied {
                    return Ok(false);
                }
                let now = self.kfd.gpu_clock();
                self.consumed(queue, at, read, &bytes, completion)?;
                self.complete(completion, now)?;
            }
            PACKET_VENDOR if bytes[2] == AMD_BARRIER_VALUE => {
                let signal = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
                let value = i64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
                let mask = i64::from_le_bytes(bytes[24..32].try_into().expect("8 bytes"));
                let condition = u32::from_le_bytes(bytes[32..36].try_into().expect("4 bytes"));
                // A null signal reads as 0: HIP 5.7 sends barrier-value
                // packets with no signal and mask 0 as markers.
                let value_now = if signal == 0 { 0 } else { self.u64_at(signal + SIGNAL_VALUE)? as i64 };
                let current = value_now & mask;
                let satisfied = match condition {
                    0 => current == value,
                    1 => current != value,
                    2 => current < value,
                    3 => current >= value,
                    other => {
                        return Err(format!(
                            "queue {} at {at:#x}: a barrier-value packet with condition {other}",
                            queue.id
                        ))
                    }
                };
                if !satisfied {
                    return Ok(false);
                }
                let now = self.kfd.gpu_clock();
                self.consumed(queue, at, read, &bytes, completion)?;
                self.complete(completion, now)?;
            }
            PACKET_VENDOR if bytes[2] == AMD_PM4_INDIRECT_BUFFER => {
                let start = self.kfd.gpu_clock();
                self.indirect_buffer(queue, at, &bytes)?;
                self.consumed(queue, at, read, &bytes, completion)?;
                self.complete(completion, start)?;
            }
            kind @ (PACKET_VENDOR | PACKET_AGENT_DISPATCH) => {
                return Err(format!(
                    "queue {} at {at:#x}: a packet of type {kind} ({}), which the emulated GPU does not carry out",
                    queue.id,
                    if kind == PACKET_VENDOR {
                        format!("vendor-specific, AMD format {}", bytes[2])
                    } else {
                        "agent dispatch".into()
                    }
                ))
            }
            kind => return Err(format!("queue {} at {at:#x}: an AQL packet of unknown type {kind}", queue.id)),
        }
        Ok(true)
    }

    /// A packet carried out: told (a barrier not yet satisfied is looked
    /// at again on every pass), and its slot free again (INVALID, the read
    /// index past it). Before its completion signal: a program that sees
    /// the signal may destroy the queue and unmap its ring at once.
    fn consumed(&self, queue: &Queue, at: u64, read: u64, bytes: &[u8; 64], completion: u64) -> Result<(), String> {
        let header = u16::from_le_bytes([bytes[0], bytes[1]]);
        if let Some(trace) = &self.trace {
            let vendor = if header & 0xff == PACKET_VENDOR { format!(", {bytes:02x?}") } else { String::new() };
            trace(&format!(
                "queue {} packet {read} at {at:#x} carried out: type {}, completion signal {completion:#x}{vendor}",
                queue.id,
                header & 0xff
            ));
        }
        self.memory
            .write(at, &PACKET_INVALID.to_le_bytes())
            .map_err(|e| format!("cannot free the packet slot at {at:#x}: {e:?}"))?;
        self.write_u64(queue.read_pointer, read + 1)
    }

    /// A PM4 indirect buffer: ROCr sends cache invalidations this way
    /// (after loading code, say); anything else stops the program.
    fn indirect_buffer(&self, queue: &Queue, at: u64, bytes: &[u8; 64]) -> Result<(), String> {
        let dword = |k: usize| u32::from_le_bytes(bytes[4 + 4 * k..8 + 4 * k].try_into().expect("4 bytes"));
        let jump = dword(0);
        if (jump >> 30) != 3 || (jump >> 8) & 0xff != PM4_INDIRECT_BUFFER {
            return Err(format!(
                "queue {} at {at:#x}: a PM4 packet that is not a jump to an indirect buffer",
                queue.id
            ));
        }
        let address = u64::from(dword(1)) | (u64::from(dword(2) & 0xffff) << 32);
        let length = (dword(3) & 0xfffff) as usize;
        let mut words = vec![0u8; length * 4];
        self.memory
            .read(address, &mut words)
            .map_err(|e| format!("cannot read the PM4 buffer at {address:#x}: {e:?}"))?;
        let word = |k: usize| u32::from_le_bytes(words[4 * k..4 * k + 4].try_into().expect("4 bytes"));
        let mut k = 0;
        while k < length {
            let header = word(k);
            let opcode = (header >> 8) & 0xff;
            if header >> 30 != 3 || !matches!(opcode, PM4_NOP | PM4_ACQUIRE_MEM) {
                return Err(format!(
                    "queue {} at {at:#x}: PM4 command {header:#010x} (opcode {opcode:#x}), which the emulated GPU does not carry out",
                    queue.id
                ));
            }
            k += 2 + ((header >> 16) & 0x3fff) as usize;
        }
        Ok(())
    }

    fn complete(&self, signal: u64, start: u64) -> Result<(), String> {
        if signal == 0 {
            return Ok(());
        }
        let value = self.u64_at(signal + SIGNAL_VALUE)?;
        self.write_u64(signal + SIGNAL_START, start)?;
        self.write_u64(signal + SIGNAL_END, self.kfd.gpu_clock())?;
        self.write_u64(signal + SIGNAL_VALUE, value.wrapping_sub(1))?;
        let mailbox = self.u64_at(signal + SIGNAL_MAILBOX)?;
        if mailbox != 0 {
            let event = self.u64_at(signal + SIGNAL_EVENT_ID)? as u32;
            self.write_u64(mailbox, u64::from(event))?;
            self.kfd.signal(event);
        }
        Ok(())
    }

    fn dispatch(&mut self, queue: &Queue, at: u64, bytes: &[u8; 64]) -> Result<(), String> {
        let packet = DispatchPacket::decode(bytes);
        let mut scratch = vec![0u8; packet::scratch_bytes_for(&packet) as usize];
        let scratch_address = scratch.as_mut_ptr() as u64;
        let checked = CheckedMemory::new(self.kfd, self.memory.clone(), &[(scratch_address, scratch.len() as u64)]);
        let mut memory = Memory::external(Arc::new(checked));
        let mut kernel = packet::kernel_of(&packet, &memory).map_err(|e| e.to_string())?;
        let (handle, base, size) = self.code_buffer(kernel.code_address)?;
        if !self.programs.contains_key(&handle) {
            let mut bytes = vec![0; size as usize];
            self.memory.read(base, &mut bytes).map_err(|e| format!("cannot read the code at {base:#x}: {e:?}"))?;
            let processor = self.kfd.model.target.to_string();
            let names = crate::loaded_image::kernel_names(base, &bytes);
            let program = Program::loaded(&processor, base, bytes).map_err(|e| e.to_string())?;
            // Programs of freed buffers go.
            let state = self.kfd.state();
            self.programs.retain(|handle, _| state.buffer(*handle).is_some());
            drop(state);
            self.programs.insert(handle, (program, names));
        }
        let (program, names) = self.programs.get_mut(&handle).expect("inserted");
        if let Some(name) = names.get(&packet.kernel_object) {
            kernel.metadata.name = name.clone();
        }
        if let Some(trace) = &self.trace {
            trace(&format!(
                "dispatch {} (code {:#x}): grid {:?}, workgroup {:?}, kernel arguments at {:#x}",
                kernel.metadata.name,
                kernel.code_address,
                packet.grid_size,
                packet.workgroup_size,
                packet.kernarg_address
            ));
        }
        let place =
            PacketPlace { packet: at, queue: queue.write_pointer - QUEUE_WRITE_DISPATCH_ID, scratch: scratch_address };
        let mut trace = Vec::new();
        let interrupts = Some(Self::interrupts(self.kfd));
        // A program's kernels get the hardware's behaviour for LDS accesses
        // past the allocation (rocPRIM relies on it), counted and reported.
        let log = self.dispatch_log.as_ref();
        let (max_instructions, how_to_raise_the_limit) = if is_instrumented(packet.kernel_object) {
            let limit = self.limit.per_wave.saturating_mul(INSTRUMENTED_FACTOR);
            (
                limit,
                format!("{}; instrumented kernels get {INSTRUMENTED_FACTOR} times as many", self.limit.how_to_raise),
            )
        } else {
            (self.limit.per_wave, self.limit.how_to_raise.clone())
        };
        let options = Options {
            max_instructions,
            how_to_raise_the_limit,
            lds_out_of_range: LdsOutOfRange::LikeHardware,
            sram_ecc_on: self.kfd.model.capability & crate::model::CAPABILITY_SRAM_ECC != 0,
            exec_history: log.map(|l| l.exec_history.clone()).unwrap_or_default(),
            accesses: log.is_some_and(|l| l.accesses),
            digest_from: log.filter(|l| l.digests).map(|_| base),
            ..Options::default()
        };
        let started = std::time::Instant::now();
        let result = packet::run(program, &mut memory, &packet, &kernel, &place, interrupts, &options, &mut trace);
        drop(scratch);
        let report = result.map_err(|e| format!("the emulated GPU stopped: {e}"))?;
        if let Some(log) = &self.dispatch_log {
            (log.write)(&dispatch_line(&kernel.metadata.name, &packet, base, &report));
        }
        let mut stats = STATS.lock().unwrap_or_else(|e| e.into_inner());
        stats.dispatches += 1;
        stats.instructions += report.counts.instructions();
        stats.busy += started.elapsed();
        if report.counts.lds_out_of_range > 0 {
            stats.lds_out_of_range += report.counts.lds_out_of_range;
            stats.lds_writes_out_of_range += report.counts.lds_writes_out_of_range;
            stats.lds_out_of_range_dispatches += 1;
            stats.lds_out_of_range_kernel.get_or_insert_with(|| kernel.metadata.name.clone());
        }
        Ok(())
    }

    /// Interrupts from kernels (`s_sendmsg`) signal the event named by
    /// their context id, as the driver's interrupt handler does.
    fn interrupts(kfd: &'static Kfd) -> Interrupts {
        static HANDLER: std::sync::OnceLock<&'static (dyn Fn(u32) + Sync)> = std::sync::OnceLock::new();
        Interrupts(*HANDLER.get_or_init(|| {
            Box::leak(Box::new(move |event: u32| {
                kfd.signal(event);
            }))
        }))
    }

    /// The loaded buffer holding `address` (code): its start and size.
    /// The handle, address and size of the buffer holding code at `address`.
    fn code_buffer(&self, address: u64) -> Result<(u64, u64, u64), String> {
        let found = self
            .kfd
            .state()
            .buffers_by_handle()
            .map(|(handle, b)| (handle, b.va, b.size))
            .find(|(_, va, size)| address >= *va && address < va + size);
        found.ok_or_else(|| format!("kernel code at {address:#x} is in no memory the runtime allocated"))
    }
}

/// One dispatch as a JSON line: the kernel, the packet's grid, the wave
/// instructions run, and per instruction (its address in the code object,
/// from the start of the loaded code) the wave executions and active lanes;
/// when recorded, the EXEC history (`[address, wave, before, after]` in
/// execution order) and the accesses (`[address, wave, lane, memory,
/// space, step, bytes]`, space 0 flat, 1 global, 2 buffer, 3 LDS; step the
/// wave's instructions before this one, which tells a loop's executions
/// apart; bytes what the lane's access covers).
fn dispatch_line(kernel: &str, packet: &DispatchPacket, code_base: u64, report: &RunReport) -> String {
    let counts = &report.counts;
    let mut per_address: Vec<(u64, (u64, u64))> =
        counts.per_address.iter().map(|(&address, &c)| (address.wrapping_sub(code_base), c)).collect();
    per_address.sort_unstable();
    let per_address: Vec<String> = per_address.iter().map(|(a, (w, l))| format!("[{a},{w},{l}]")).collect();
    let name: String = kernel
        .chars()
        .flat_map(|c| match c {
            '"' | '\\' => vec!['\\', c],
            c if (c as u32) < 0x20 => format!("\\u{:04x}", c as u32).chars().collect(),
            c => vec![c],
        })
        .collect();
    let mut line = format!(
        "{{\"kernel\":\"{name}\",\"kernel_object\":{},\"grid_size\":{:?},\"workgroup_size\":{:?},\"instructions\":{},\"per_address\":[{}]",
        packet.kernel_object,
        packet.grid_size,
        packet.workgroup_size,
        counts.instructions(),
        per_address.join(",")
    );
    let relative = |address: u64| address.wrapping_sub(code_base);
    if !report.exec_history.is_empty() {
        let changes: Vec<String> = report
            .exec_history
            .iter()
            .map(|c| format!("[{},{},{},{}]", relative(c.address), c.wave, c.before, c.after))
            .collect();
        line += &format!(",\"exec_history\":[{}]", changes.join(","));
    }
    if !report.accesses.is_empty() {
        let accesses: Vec<String> = report
            .accesses
            .iter()
            .map(|a| {
                let (address, code) = (relative(a.address), a.space.code());
                format!("[{address},{},{},{},{code},{},{}]", a.wave, a.lane, a.memory, a.step, a.bytes)
            })
            .collect();
        line += &format!(",\"accesses\":[{}]", accesses.join(","));
    }
    for (name, digest) in [("exec_digest", report.exec_digest), ("access_digest", report.access_digest)] {
        if digest.count > 0 {
            line += &format!(",\"{name}\":{{\"count\":{},\"fnv1a\":\"{:#018x}\"}}", digest.count, digest.fnv1a);
        }
    }
    line + "}"
}

/// The process's memory as kernels may touch it: what the runtime
/// allocated or registered with the driver when the dispatch started, the
/// shared-virtual-memory ranges it gave the GPU access to, and the
/// dispatch's scratch; any other address is a fault. Registered host
/// memory can have a GPU address of its own (ROCr 5.2 on dGPUs): accesses
/// there reach the host's pages.
pub struct CheckedMemory {
    memory: SharedMemory,
    /// Sorted by start.
    ranges: Vec<Range>,
}

#[derive(Clone, Copy, Debug)]
struct Range {
    start: u64,
    end: u64,
    /// Where `start` is in the process.
    host: u64,
    /// Reached through checked copies: SVM ranges are the process's own
    /// memory, which it may unmap without the device seeing it (a kernel
    /// reading there faults instead of crashing the process).
    checked: bool,
}

impl CheckedMemory {
    /// The buffers of `kfd` now, and `extra` (start, size) ranges the device
    /// allocated itself (scratch).
    pub fn new(kfd: &Kfd, memory: SharedMemory, extra: &[(u64, u64)]) -> CheckedMemory {
        let state = kfd.state();
        let mut ranges: Vec<Range> = state
            .buffers()
            .filter(|b| b.va != 0)
            .filter_map(|b| {
                let host = match b.backing {
                    Backing::Memory => b.va,
                    Backing::UserPointer => b.host_address.unwrap_or(b.va),
                    _ => return None,
                };
                Some(Range { start: b.va, end: b.va + b.size, host, checked: false })
            })
            .chain(state.svm_accessible().into_iter().map(|(start, end)| Range {
                start,
                end,
                host: start,
                checked: true,
            }))
            .chain(extra.iter().map(|&(start, size)| Range { start, end: start + size, host: start, checked: false }))
            .collect();
        drop(state);
        ranges.sort_unstable_by_key(|r| r.start);
        CheckedMemory { memory, ranges }
    }

    /// Where `size` bytes at GPU address `address` are in the process, and
    /// whether they are reached through checked copies.
    fn locate(&self, address: u64, size: usize) -> Result<(u64, bool), Fault> {
        let fault = || Fault::Memory { address, size: size as u64 };
        let end = address.checked_add(size as u64).ok_or_else(fault)?;
        let index = self.ranges.partition_point(|r| r.start <= address);
        match index.checked_sub(1).map(|i| self.ranges[i]) {
            Some(range) if end <= range.end => Ok((range.host + (address - range.start), range.checked)),
            _ => Err(fault()),
        }
    }
}

impl AddressSpace for CheckedMemory {
    fn read(&self, address: u64, out: &mut [u8]) -> Result<(), Fault> {
        let (at, checked) = self.locate(address, out.len())?;
        let copied = if checked { self.memory.read(at, out) } else { self.memory.read_mapped(at, out) };
        copied.map_err(|_: Errno| Fault::Memory { address, size: out.len() as u64 })
    }

    fn write(&self, address: u64, data: &[u8]) -> Result<(), Fault> {
        let (at, checked) = self.locate(address, data.len())?;
        let copied = if checked { self.memory.write(at, data) } else { self.memory.write_mapped(at, data) };
        copied.map_err(|_: Errno| Fault::Memory { address, size: data.len() as u64 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Model, Target};
    use crate::test_memory::TestMemory as Plain;

    /// Process memory from here on: the queue's ring, its pointers and signals.
    const BASE: u64 = 0x10_0000;

    const RING: u64 = BASE;
    const READ: u64 = BASE + 0x400;
    const WRITE: u64 = BASE + 0x408;
    const WAITED: u64 = BASE + 0x500;
    const COMPLETION: u64 = BASE + 0x600;

    fn processor() -> (CommandProcessor, Arc<Plain>, Queue) {
        let kfd: &'static Kfd = Box::leak(Box::new(Kfd::new(Model::new(Target::Gfx90a))));
        let memory = Arc::new(Plain::new(BASE, 0x1000));
        let stop: Stop = Box::new(|_| {});
        let cp = CommandProcessor {
            kfd,
            memory: memory.clone(),
            stop,
            trace: None,
            dispatch_log: None,
            limit: InstructionLimit { per_wave: DEFAULT_MAX_INSTRUCTIONS, how_to_raise: String::new() },
            programs: HashMap::new(),
        };
        let queue = Queue {
            id: 0,
            ring_base: RING,
            ring_bytes: 0x400,
            read_pointer: READ,
            write_pointer: WRITE,
            doorbell_index: 0,
            context_save_area: 0,
        };
        (cp, memory, queue)
    }

    /// One AMD barrier-value packet (header, format, then its fields), its
    /// completion signal at 1, the write index past it.
    fn submit_barrier_value(memory: &Plain, signal: u64, value: i64, mask: i64, condition: u32) {
        let mut packet = [0u8; 64];
        packet[0..2].copy_from_slice(&(PACKET_VENDOR | 0x1500).to_le_bytes());
        packet[2] = AMD_BARRIER_VALUE;
        packet[8..16].copy_from_slice(&signal.to_le_bytes());
        packet[16..24].copy_from_slice(&value.to_le_bytes());
        packet[24..32].copy_from_slice(&mask.to_le_bytes());
        packet[32..36].copy_from_slice(&condition.to_le_bytes());
        packet[56..64].copy_from_slice(&COMPLETION.to_le_bytes());
        memory.write(RING, &packet).unwrap();
        memory.write(COMPLETION + SIGNAL_VALUE, &1u64.to_le_bytes()).unwrap();
        memory.write(WRITE, &1u64.to_le_bytes()).unwrap();
    }

    fn u64_at(memory: &Plain, address: u64) -> u64 {
        let mut bytes = [0; 8];
        memory.read(address, &mut bytes).unwrap();
        u64::from_le_bytes(bytes)
    }

    #[test]
    fn barrier_value_packets_wait_for_their_condition() {
        let (mut cp, memory, queue) = processor();
        // Equal to 5 under mask 0xff: not while the signal is 0x104.
        memory.write(WAITED + SIGNAL_VALUE, &0x104u64.to_le_bytes()).unwrap();
        submit_barrier_value(&memory, WAITED, 5, 0xff, 0);
        assert_eq!(cp.step(&queue), Ok(false));
        assert_eq!(u64_at(&memory, COMPLETION + SIGNAL_VALUE), 1);
        memory.write(WAITED + SIGNAL_VALUE, &0x105u64.to_le_bytes()).unwrap();
        assert_eq!(cp.step(&queue), Ok(true));
        assert_eq!(u64_at(&memory, COMPLETION + SIGNAL_VALUE), 0, "the completion signal is decremented");
        assert_eq!(u64_at(&memory, READ), 1, "the packet is consumed");
    }

    #[test]
    fn a_barrier_value_packet_without_a_signal_compares_zero() {
        // HIP 5.7's markers: no signal, mask 0, "equal to 0".
        let (mut cp, memory, queue) = processor();
        submit_barrier_value(&memory, 0, 0, 0, 0);
        assert_eq!(cp.step(&queue), Ok(true));
        assert_eq!(u64_at(&memory, COMPLETION + SIGNAL_VALUE), 0);
        // And one that can never hold waits instead of reading address 8.
        let (mut cp, memory, queue) = processor();
        submit_barrier_value(&memory, 0, 1, -1, 0);
        assert_eq!(cp.step(&queue), Ok(false));
    }

    #[test]
    fn a_dispatch_log_line_gives_code_object_addresses_and_escapes_the_name() {
        let mut packet = DispatchPacket::decode(&[0; 64]);
        packet.grid_size = [1000, 1, 1];
        packet.workgroup_size = [256, 1, 1];
        packet.kernel_object = 0x7000;
        let counts = gpuinstr_emulator::Counts {
            per_wave: vec![3, 2],
            per_address: HashMap::from([(0x5108, (2, 100)), (0x5100, (2, 128))]),
            ..Default::default()
        };
        let mut report = RunReport { counts, ..Default::default() };
        let line = dispatch_line("odd\"name\\", &packet, 0x5000, &report);
        assert_eq!(
            line,
            r#"{"kernel":"odd\"name\\","kernel_object":28672,"grid_size":[1000, 1, 1],"workgroup_size":[256, 1, 1],"instructions":5,"per_address":[[256,2,128],[264,2,100]]}"#
        );
        // With the EXEC history and the accesses recorded, they follow.
        report.exec_history.push(gpuinstr_emulator::ExecChange { wave: 1, address: 0x5104, before: 3, after: 1 });
        report.accesses.push(gpuinstr_emulator::Access {
            wave: 0,
            address: 0x5108,
            lane: 2,
            memory: 0x9000,
            space: gpuinstr_emulator::Space::Global,
            step: 7,
            bytes: 4,
        });
        let line = dispatch_line("k", &packet, 0x5000, &report);
        assert!(
            line.ends_with(
                r#""per_address":[[256,2,128],[264,2,100]],"exec_history":[[260,1,3,1]],"accesses":[[264,0,2,36864,1,7,4]]}"#
            ),
            "{line}"
        );
        // Digests instead of lists: count and FNV-1a, after the lists' place.
        let mut digested = RunReport { counts: report.counts.clone(), ..Default::default() };
        digested.access_digest.add(&[1, 2]);
        let line = dispatch_line("k", &packet, 0x5000, &digested);
        assert!(line.ends_with(r#"[264,2,100]],"access_digest":{"count":1,"fnv1a":"0x7717980363c8e066"}}"#), "{line}");
    }
}
