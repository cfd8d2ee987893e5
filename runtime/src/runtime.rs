//! The runtime's state and what it does on each event ROCr reports: code
//! objects read and loaded, executables destroyed, packets submitted,
//! dispatches completed. HSA itself is behind [`Hsa`], so this file has no
//! unsafe code.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use thiserror::Error;

use gpuinstr::stages::load::hidden_arguments::V5_LAUNCH_SHAPE;

use crate::code_objects::{self, InstrumentedCodeObject, Segments};
use crate::database::{Database, DatabaseError};
use crate::packets::{self, CollectKernel, Dispatch, Packet};
use crate::report::{
    DispatchRecord, GlobalValue, LoadedRecord, Report, ToolValue, ToolValues, UninstrumentedRecord, SCHEMA,
};
use crate::rings::{Appended, Owner, RecordSink, Ring, Rings, ToolRecords, WhenFull};
use crate::selection::Selection;
use crate::tool_files::ToolFiles;

include!(concat!(env!("OUT_DIR"), "/collect_kernels.rs"));

#[derive(Debug, Error)]
#[error("{call}: {status}")]
pub struct HsaError {
    pub call: &'static str,
    pub status: String,
}

/// The HSA calls the runtime makes (ROCr's original entries).
pub trait Hsa {
    fn signal_create(&self, initial: i64) -> Result<u64, HsaError>;
    fn signal_destroy(&self, signal: u64);
    fn signal_load(&self, signal: u64) -> i64;
    /// Arranges for [`dispatch_completed`] with `dispatch` once `signal` is 0.
    fn when_zero(&self, signal: u64, dispatch: u64) -> Result<(), HsaError>;
    fn agent_name(&self, agent: u64) -> Result<String, HsaError>;
    /// Loads the collect kernel's code object for `agent`.
    fn load_collect_kernel(&self, agent: u64, code_object: &[u8]) -> Result<CollectKernel, HsaError>;
    /// Host memory `agent` can read and write; its address. (Kept for the
    /// process: buffers are reused from dispatch to dispatch.)
    fn host_allocate(&self, agent: u64, size: usize) -> Result<u64, HsaError>;
    /// Frees memory from [`Hsa::host_allocate`].
    fn host_free(&self, address: u64);
    /// Destroys an executable the runtime made (its collect kernel's).
    fn executable_destroy(&self, executable: u64);
    /// Reads host memory from [`Hsa::host_allocate`].
    fn host_read(&self, address: u64, into: &mut [u8]);
    fn host_write(&self, address: u64, bytes: &[u8]);
    /// A 64-bit word of host memory from [`Hsa::host_allocate`] that the
    /// GPU writes at system scope (an acquiring load).
    fn host_load_u64(&self, address: u64) -> u64;
    /// Writes such a word for the GPU to read (a releasing store).
    fn host_store_u64(&self, address: u64, value: u64);
    /// Copies `size` bytes of host memory from [`Hsa::host_allocate`] to
    /// memory of the device (a loaded code object's global); returns when
    /// they are there.
    fn copy_to_device(&self, to: u64, from: u64, size: usize) -> Result<(), HsaError>;
    /// Tells the device, when it is gpuinstr's emulated GPU, that the
    /// kernel at `kernel_object` runs instrumented code (or no longer): its
    /// waves may run longer before it takes them for endless loops.
    fn kernel_instrumented(&self, _kernel_object: u64, _instrumented: bool) {}
}

/// A completed dispatch as a tool's host part sees it (`gpuinstr/host.h`).
pub struct ToolDispatch {
    pub id: u64,
    pub kernel: std::ffi::CString,
    pub grid_size: [u32; 3],
    pub workgroup_size: [u32; 3],
    /// Each tool global's name and bytes.
    pub globals: Vec<(String, Vec<u8>)>,
    /// What the tool reported.
    pub values: ToolValues,
    /// What the tool said is missing or may be wrong (records dropped...).
    pub warnings: Vec<String>,
    /// The dispatch's code object (its point table).
    pub code_object: Arc<ToolCodeObject>,
    /// Selected points the kernel may run that were left out (`--allow-partial`).
    pub points_left_out: u32,
    /// The rings of its code object (emptied before the tool sees the
    /// dispatch), and what it appended to each.
    pub rings: Vec<Arc<Ring>>,
    pub ring_records: Vec<(String, Appended)>,
}

/// An instrumented code object as a tool's host part sees it
/// (`gpuinstr_code_object` of `gpuinstr/host.h`): given to it once when the
/// program loads it, and with each dispatch of its kernels. The runtime
/// keeps it until the process ends.
pub struct ToolCodeObject {
    /// Its index in the report's `code_objects`, in load order.
    pub index: u32,
    pub processor: std::ffi::CString,
    /// Its kernels as the program dispatches them (instrumented copies kept
    /// beside originals are not listed).
    pub kernels: Vec<std::ffi::CString>,
    pub code_object: Arc<InstrumentedCodeObject>,
}

impl ToolCodeObject {
    fn of(index: usize, code_object: &Arc<InstrumentedCodeObject>) -> Self {
        let c_string = |text: &str| std::ffi::CString::new(text.replace('\0', " ")).expect("no NUL left");
        let copies: std::collections::HashSet<usize> = code_object.kernels.iter().filter_map(|k| k.copy).collect();
        ToolCodeObject {
            index: index as u32,
            processor: c_string(&code_object.processor),
            kernels: (code_object.kernels.iter().enumerate())
                .filter(|(k, _)| !copies.contains(k))
                .map(|(_, kernel)| c_string(&kernel.name))
                .collect(),
            code_object: code_object.clone(),
        }
    }
}

impl ToolDispatch {
    /// What the dispatch appended to the ring `name` (its records all
    /// handed over before the tool sees the dispatch).
    pub fn ring_records(&self, name: &str) -> Option<Appended> {
        self.ring_records.iter().find(|(n, _)| n == name).map(|(_, appended)| *appended)
    }

    pub fn global(&self, name: &str) -> Option<&[u8]> {
        self.globals.iter().find(|(n, _)| n == name).map(|(_, bytes)| bytes.as_slice())
    }

    pub fn report(&mut self, key: String, value: ToolValue) {
        self.values.0.push((key, value));
    }

    pub fn warn(&mut self, warning: String) {
        self.warnings.push(warning);
    }
}

/// A tool's host part, if one is loaded.
pub trait ToolHost: Sync {
    fn load(&self, code_object: &ToolCodeObject);
    /// Records of a ring, in order, while or after the dispatch runs
    /// (before its `dispatch` call).
    fn records(&self, records: &ToolRecords);
    fn dispatch(&self, dispatch: &mut ToolDispatch);
    fn exit(&self);
}

/// Where the collect kernel's arguments, its table and each global's bytes
/// are in a collection buffer (and each global's initial bytes in the
/// initial image, at the same offsets as its collected bytes).
#[derive(Clone, Debug)]
struct Layout {
    /// Offset of each global's bytes.
    offsets: Vec<usize>,
    /// Offset of each ring's `Reserved` and `Dropped` after the dispatch
    /// (its end), in the order of the code object's ring globals.
    ring_ends: Vec<usize>,
    size: usize,
}

const KERNARG_BYTES: usize = 64;
/// The launch shape's bytes in clang's v5 hidden block (the declared one,
/// `V5_LAUNCH_SHAPE`).
const LAUNCH_SHAPE_BYTES: u64 = {
    let mut end = 0;
    let mut k = 0;
    while k < V5_LAUNCH_SHAPE.len() {
        let (_, offset, size) = V5_LAUNCH_SHAPE[k];
        if offset + size > end {
            end = offset + size;
        }
        k += 1;
    }
    end
};
/// `Entry` of device/collect.hip.
const ENTRY_BYTES: usize = 56;
/// `Entry::through` bits: the global's data, or its count's, is where a
/// pointer at the address given points (a managed global).
const GLOBAL_THROUGH_POINTER: u64 = 1;
const COUNT_THROUGH_POINTER: u64 = 2;

impl Layout {
    fn of(code_object: &InstrumentedCodeObject) -> Self {
        let rings = code_object.globals.iter().filter(|g| g.ring.is_some()).count();
        let mut at = KERNARG_BYTES + ENTRY_BYTES * (code_object.globals.len() + rings);
        let mut offsets = Vec::new();
        for global in &code_object.globals {
            offsets.push(at);
            at = (at + global.size as usize).next_multiple_of(8);
        }
        let end_bytes = crate::rings::END_BYTES as usize;
        let ring_ends = (0..rings).map(|k| at + end_bytes * k).collect();
        Layout { offsets, ring_ends, size: at + end_bytes * rings }
    }
}

/// A kernel of an instrumented code object, as loaded.
#[derive(Clone, Debug)]
struct LoadedKernel {
    slot: usize,
    name: String,
    /// With originals kept: this original's instrumented copy.
    copy: Option<Retarget>,
}

/// How a dispatch of an original is pointed at its instrumented copy.
#[derive(Clone, Copy, Debug)]
struct Retarget {
    kernel_object: u64,
    /// Fixed LDS and scratch bytes of the original and of the copy.
    group_segment: (u32, u32),
    private_segment: (u32, u32),
}

/// A kernel that runs with other sizes than the program was handed (in
/// dynamic mode, the instrumented copy of what the program loaded): its
/// dispatch packets are given the sizes of what runs.
#[derive(Clone, Copy, Debug)]
struct Resize {
    executable: u64,
    agent: u64,
    /// What the program's packets are written from, and what runs.
    seen: Segments,
    running: Segments,
    /// Where the running kernel reads the launch shape the program passes
    /// no room for (gpuinstr declared it for hooks that read it): the
    /// runtime gives its dispatches kernel arguments with it filled in.
    launch_shape: Option<u32>,
}

/// An instrumented code object as loaded.
struct Loaded {
    executable: u64,
    agent: u64,
    code_object: Arc<InstrumentedCodeObject>,
    /// What the tool's host part sees of it.
    tool_view: Arc<ToolCodeObject>,
    /// Index in the report's list of loaded code objects.
    index: usize,
    delta: i64,
    layout: Layout,
    /// Host memory holding each global's initial bytes (at the layout's offsets).
    initial: u64,
    /// Collection buffers no dispatch is using.
    free_buffers: Vec<u64>,
    /// Its rings, in the order of its ring globals.
    rings: Vec<Arc<Ring>>,
    /// Whether its ring globals point at its rings on the device yet (set
    /// once its executable is frozen: the loader writes its data then).
    rings_pointed: bool,
    /// Its host memory was freed at exit ([`Runtime::release`]).
    released: bool,
}

/// A dispatch submitted and not yet read.
struct InFlight {
    queue: u64,
    /// The queue's number in the run (1, 2, ... in order of first use).
    queue_number: u32,
    /// When the runtime saw the packet (seconds since it started).
    submitted: f64,
    kernel: String,
    /// The n-th dispatch of its kernel in the run.
    ordinal: u64,
    slot: usize,
    dispatch: Dispatch,
    done: u64,
    buffer: u64,
    /// Dispatches of the same code object that were on the device at the
    /// same time from other queues (they share its tool globals).
    overlapping: Vec<u64>,
}

pub struct Runtime {
    /// Readers holding an instrumented code object.
    readers: HashMap<u64, Arc<InstrumentedCodeObject>>,
    /// Readers holding a code object that is not: its kernels' names and
    /// descriptor addresses.
    plain_readers: HashMap<u64, Vec<(String, u64)>>,
    /// Kernel object → name and executable of kernels no tool sees.
    plain_kernels: HashMap<u64, (String, u64)>,
    /// Dispatches of kernels that run no instrumented code, per kernel
    /// (HIP's own fills and copies aside).
    uninstrumented: std::collections::BTreeMap<String, u64>,
    loaded: Vec<Loaded>,
    /// Kernel object (descriptor address) → the kernel as loaded.
    kernels: HashMap<u64, LoadedKernel>,
    /// Dynamic mode's replacements (the address of the bytes ROCr gets
    /// instead) → each kernel's sizes in what the program was handed.
    replacements: HashMap<usize, HashMap<String, Segments>>,
    /// Kernel object → sizes to move its dispatch packets to, for every
    /// kernel that runs with others than the program was handed, observed
    /// or not.
    resized: HashMap<u64, Resize>,
    /// Kernel arguments given the launch shape, and their dispatch's
    /// completion signal.
    launch_kernargs: Vec<(u64, u64)>,
    /// What orders dispatches of different queues (barriers the program
    /// put between them).
    ordering: crate::ordering::Ordering,
    /// Per executable, the kernel objects of its instrumented code objects
    /// (the device was told of them).
    instrumented_kernels: Vec<(u64, Vec<u64>)>,
    /// Dispatches so far of each kernel (by name) of instrumented code objects.
    ordinals: HashMap<String, u64>,
    pub selection: Selection,
    collect_kernels: HashMap<u64, CollectKernel>,
    in_flight: HashMap<u64, InFlight>,
    /// Signals whose handler has run (destroyed at the next one: ROCr's
    /// event thread runs handlers one at a time).
    retired_signals: Vec<u64>,
    next_dispatch: u64,
    /// Dispatches taken out of flight whose record is not in the report
    /// yet (their tool handler is running); `finish` waits for them.
    handling: usize,
    pub report: Report,
    /// Files the tool's host part writes, beside the report.
    pub tool_files: ToolFiles,
    /// The run's database, opened when the first instrumented code object
    /// loads.
    database: DatabaseState,
    /// What dispatch times count from, and when that was (seconds since
    /// 1970: the database's `run.started`).
    clock: std::time::Instant,
    started: f64,
    /// Queues by the handle ROCr gives them, numbered in order of first use.
    queue_numbers: HashMap<u64, u32>,
    /// Every ring of the run, and the host memory each may have.
    pub rings: Arc<Rings>,
    pub ring_bytes: u64,
    /// What a wavefront does when a ring is full (`GPUINSTR_RING_FULL`).
    pub ring_full: WhenFull,
    /// Whether the database keeps the rings' records (`records`).
    pub database_records: bool,
    /// Results the user asked for that could not be written (the
    /// database, a tool's file, the report): each fails the run at exit.
    pub lost_outputs: Vec<String>,
}

enum DatabaseState {
    NotYet,
    Open(Database),
    /// Not asked for (`GPUINSTR_DATABASE=none`), or it failed (warned).
    Off,
}

/// Where the run's database goes: `GPUINSTR_DATABASE`, else beside the
/// JSON report with the extension `.sqlite`; none for `none`.
pub fn database_path() -> Option<std::path::PathBuf> {
    match std::env::var_os("GPUINSTR_DATABASE").filter(|p| !p.is_empty()) {
        Some(path) if path == "none" => None,
        Some(path) => Some(path.into()),
        None => Some(crate::report_path().0.with_extension("sqlite")),
    }
}

/// Signalled when a dispatch handled outside the lock is recorded (paired
/// with the runtime's mutex).
static RECORDED: std::sync::Condvar = std::sync::Condvar::new();

/// How long `finish` waits for tool handlers still running at exit.
const HANDLER_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Where `address` of a code object is once loaded `delta` bytes away.
fn located(address: u64, delta: i64) -> u64 {
    address.wrapping_add_signed(delta)
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime {
            readers: HashMap::new(),
            plain_readers: HashMap::new(),
            plain_kernels: HashMap::new(),
            uninstrumented: Default::default(),
            loaded: Vec::new(),
            kernels: HashMap::new(),
            replacements: HashMap::new(),
            resized: HashMap::new(),
            launch_kernargs: Vec::new(),
            instrumented_kernels: Vec::new(),
            ordering: Default::default(),
            ordinals: HashMap::new(),
            selection: Selection::default(),
            collect_kernels: HashMap::new(),
            in_flight: HashMap::new(),
            retired_signals: Vec::new(),
            next_dispatch: 0,
            handling: 0,
            report: Report { schema: SCHEMA, ..Report::default() },
            tool_files: ToolFiles::default(),
            database: DatabaseState::NotYet,
            clock: std::time::Instant::now(),
            started: crate::database::now(),
            queue_numbers: HashMap::new(),
            rings: Arc::default(),
            ring_bytes: crate::rings::DEFAULT_RING_BYTES,
            ring_full: WhenFull::default(),
            database_records: std::env::var_os("GPUINSTR_DATABASE_RECORDS").is_none_or(|v| v != "0"),
            lost_outputs: Vec::new(),
        }
    }
}

impl Runtime {
    /// Dynamic mode hands ROCr the bytes at `replacement` instead of
    /// `original`, which the program (HIP) read its kernels' sizes from.
    pub fn code_object_replaced(&mut self, replacement: *const u8, original: &[u8]) {
        self.replacements.insert(replacement as usize, code_objects::kernel_segments(original));
    }

    /// Whether the run's database keeps the rings' records (the one store
    /// of a tool's records unless the user asks for its files too).
    pub fn database_keeps_records(&self) -> bool {
        self.database_records && database_path().is_some()
    }

    /// A code object reader was created over `bytes`.
    pub fn reader_created(&mut self, reader: u64, bytes: &[u8]) {
        match code_objects::recognise(bytes) {
            Ok(Some(mut code_object)) => {
                if let Some(original) = self.replacements.get(&(bytes.as_ptr() as usize)) {
                    code_object.replaced(original);
                }
                self.readers.insert(reader, Arc::new(code_object));
            }
            Ok(None) => {
                self.plain_readers.insert(reader, code_objects::kernel_descriptors(bytes));
            }
            Err(error) => self.report.warn(format!(
                "a code object the program loads looks instrumented but its tables cannot be read: {error}; its dispatches are not observed"
            )),
        }
    }

    pub fn reader_unreadable(&mut self, error: std::io::Error) {
        self.report.warn(format!(
            "cannot read the file of a code object the program loads ({error}); if it is instrumented, its dispatches are not observed"
        ));
    }

    pub fn reader_destroyed(&mut self, reader: u64) {
        self.readers.remove(&reader);
        self.plain_readers.remove(&reader);
    }

    /// The code object of `reader` was loaded into `executable` for `agent`,
    /// `delta` bytes from its addresses: what the tool's host part is to be
    /// told, when it is instrumented and its dispatches can be observed.
    fn code_object_loaded(
        &mut self,
        hsa: &dyn Hsa,
        executable: u64,
        agent: u64,
        reader: u64,
        delta: Option<i64>,
    ) -> Option<Arc<ToolCodeObject>> {
        let Some(code_object) = self.readers.get(&reader).cloned() else {
            // Not instrumented: its kernels are named when dispatched.
            if let (Some(kernels), Some(delta)) = (self.plain_readers.get(&reader), delta) {
                for (name, descriptor) in kernels {
                    self.plain_kernels.insert(located(*descriptor, delta), (name.clone(), executable));
                }
            }
            return None;
        };
        let not_observed = |why: String| {
            format!(
                "an instrumented {} code object was loaded but {why}; its dispatches are not observed",
                code_object.processor
            )
        };
        let Some(delta) = delta else {
            let resized = code_object.kernels.iter().filter(|k| k.program_sees.is_some()).count();
            let also = if resized > 0 {
                format!(
                    " (and {resized} of its kernels run with more scratch, LDS or kernel arguments than the program \
                     gives them: their results may be wrong)"
                )
            } else {
                String::new()
            };
            self.report.warn(not_observed(format!("ROCr's loader extension did not say where{also}")));
            return None;
        };
        // Before anything can fail: every dispatch of a kernel that runs
        // with other sizes than the program was handed gets them, and the
        // device learns which kernels run instrumented code, whether or
        // not the tool sees them.
        self.resize_dispatches_of(&code_object, executable, agent, delta);
        for kernel in &code_object.kernels {
            hsa.kernel_instrumented(located(kernel.descriptor, delta), true);
        }
        self.instrumented_kernels
            .push((executable, code_object.kernels.iter().map(|k| located(k.descriptor, delta)).collect()));
        let layout = Layout::of(&code_object);
        let initial = match hsa.host_allocate(agent, layout.size) {
            Ok(initial) => initial,
            Err(error) => {
                self.report.warn(not_observed(format!("no host memory for its initial values ({error})")));
                return None;
            }
        };
        for (global, &offset) in code_object.globals.iter().zip(&layout.offsets) {
            hsa.host_write(initial + offset as u64, &global.initial);
        }
        let index = self.report.code_objects.len();
        let tool_view = Arc::new(ToolCodeObject::of(index, &code_object));
        let rings = match self.make_rings(hsa, agent, &code_object, &tool_view, initial, &layout) {
            Ok(rings) => rings,
            Err(error) => {
                self.report.warn(not_observed(format!("its ring of records cannot be set up ({error})")));
                return None;
            }
        };
        self.report.code_objects.push(LoadedRecord {
            processor: code_object.processor.clone(),
            kernels: code_object.kernels.len(),
            sites: code_object.sites,
            globals: code_object.globals.iter().map(|g| g.tool_name.clone()).collect(),
            partial_kernels: code_object.partial.clone(),
        });
        self.write_database(|database, report| {
            database.code_object(index, &report.code_objects[index], &code_object.points)
        });
        if !code_object.partial.is_empty() {
            let total: u32 = code_object.partial.iter().map(|p| p.left_out).sum();
            let kernels: Vec<&str> = code_object.partial.iter().take(5).map(|p| p.kernel.as_str()).collect();
            let more = code_object.partial.len() - kernels.len();
            self.report.warn(format!(
                "PARTIAL: {} code object {index} was instrumented with {total} selected point{} left out \
                 (--allow-partial): dispatches of {} of its kernels ({}{}) may run points that record nothing, \
                 and are marked partial",
                code_object.processor,
                if total == 1 { "" } else { "s" },
                code_object.partial.len(),
                kernels.join(", "),
                if more > 0 { format!(" and {more} more") } else { String::new() },
            ));
        }
        let slot = self.loaded.len();
        let kernels = &code_object.kernels;
        for kernel in kernels {
            let copy = kernel.copy.map(|c| &kernels[c]);
            if let Some(copy) = copy.filter(|c| c.kernarg_size > kernel.kernarg_size) {
                self.report.warn(format!(
                    "{} takes {} bytes of kernel arguments, its original {} only {}: its dispatches run the original and are not observed",
                    copy.name, copy.kernarg_size, kernel.name, kernel.kernarg_size
                ));
                let descriptor = located(kernel.descriptor, delta);
                self.plain_kernels.insert(descriptor, (kernel.name.clone(), executable));
                continue;
            }
            let copy = copy.map(|copy| Retarget {
                kernel_object: located(copy.descriptor, delta),
                group_segment: (kernel.group_segment, copy.group_segment),
                private_segment: (kernel.private_segment, copy.private_segment),
            });
            let loaded = LoadedKernel { slot, name: kernel.name.clone(), copy };
            self.kernels.insert(located(kernel.descriptor, delta), loaded);
        }
        if self.selection.is_narrowed() && !kernels.iter().any(|k| k.copy.is_some()) {
            self.report.warn(format!(
                "a {} code object instrumented without --keep-originals was loaded: the selection ({}) cannot apply to it, every dispatch of its kernels runs instrumented and is reported",
                code_object.processor,
                self.selection.describe()
            ));
        }
        self.loaded.push(Loaded {
            executable,
            agent,
            code_object,
            tool_view: tool_view.clone(),
            index,
            delta,
            layout,
            initial,
            free_buffers: Vec::new(),
            rings_pointed: rings.is_empty(),
            rings,
            released: false,
        });
        Some(tool_view)
    }

    /// Notes the kernels of `code_object` whose dispatch packets must be
    /// moved to their own sizes, and warns of any that reads more kernel
    /// arguments than the program passes (which no packet can fix).
    fn resize_dispatches_of(&mut self, code_object: &InstrumentedCodeObject, executable: u64, agent: u64, delta: i64) {
        for kernel in &code_object.kernels {
            let Some(seen) = kernel.program_sees else { continue };
            let running = kernel.segments();
            // The launch shape gpuinstr declared past what the program
            // passes: the runtime writes it (`with_launch_shape`).
            let launch_shape = kernel
                .launch_shape
                .filter(|at| *at >= seen.kernarg && u64::from(*at) + LAUNCH_SHAPE_BYTES <= u64::from(running.kernarg));
            if running.kernarg > seen.kernarg && launch_shape.is_none() {
                self.report.warn(format!(
                    "the instrumented {} reads {} bytes of kernel arguments where the program passes {}: the bytes \
                     past those are not its arguments",
                    kernel.name, running.kernarg, seen.kernarg
                ));
            }
            let resize = Resize { executable, agent, seen, running, launch_shape };
            self.resized.insert(located(kernel.descriptor, delta), resize);
        }
    }

    /// The code object's rings (`GPUINSTR_RING`), each in host memory of
    /// its own, and each ring global's initial bytes (which the collect
    /// kernel puts back) pointing at its ring; the globals themselves are
    /// pointed when the executable is frozen.
    #[allow(clippy::too_many_arguments)]
    fn make_rings(
        &mut self,
        hsa: &dyn Hsa,
        agent: u64,
        code_object: &InstrumentedCodeObject,
        tool_view: &Arc<ToolCodeObject>,
        initial: u64,
        layout: &Layout,
    ) -> Result<Vec<Arc<Ring>>, HsaError> {
        let mut rings = Vec::new();
        for (global, &offset) in code_object.globals.iter().zip(&layout.offsets) {
            let Some(record_bytes) = global.ring else { continue };
            let capacity = crate::rings::capacity_for(self.ring_bytes, record_bytes);
            let head = hsa.host_allocate(agent, Ring::bytes(capacity, record_bytes) as usize)?;
            let ring =
                Ring::new(hsa, &global.tool_name, tool_view.clone(), head, (capacity, record_bytes), self.ring_full);
            hsa.host_write(initial + offset as u64, &head.to_le_bytes());
            rings.push(Arc::new(ring));
        }
        for ring in &rings {
            self.rings.add(ring.clone());
        }
        Ok(rings)
    }

    /// The loader has written the executable's data to the device: its
    /// ring globals are pointed at their rings there. A ring that cannot be
    /// is a warning, and its code object's dispatches are not observed.
    pub fn executable_frozen(&mut self, hsa: &dyn Hsa, executable: u64) {
        for loaded in self.loaded.iter_mut().filter(|l| l.executable == executable && !l.rings_pointed) {
            let rings =
                (loaded.code_object.globals.iter().zip(&loaded.layout.offsets)).filter(|(g, _)| g.ring.is_some());
            let mut failed = None;
            for (global, &offset) in rings {
                let to = located(global.address, loaded.delta);
                if let Err(error) = hsa.copy_to_device(to, loaded.initial + offset as u64, 8) {
                    failed = Some(error);
                }
            }
            match failed {
                None => loaded.rings_pointed = true,
                Some(error) => self.report.warn(format!(
                    "the rings of records of {} code object {} cannot be set up on the device ({error}); its dispatches are not observed",
                    loaded.code_object.processor, loaded.index
                )),
            }
        }
    }

    /// Its kernels' addresses may be reused by the next code object loaded.
    pub fn executable_destroyed(&mut self, hsa: &dyn Hsa, executable: u64) {
        for (_, kernels) in self.instrumented_kernels.iter().filter(|(e, _)| *e == executable) {
            for kernel in kernels {
                hsa.kernel_instrumented(*kernel, false);
            }
        }
        self.instrumented_kernels.retain(|(e, _)| *e != executable);
        self.kernels.retain(|_, kernel| self.loaded[kernel.slot].executable != executable);
        self.resized.retain(|_, resize| resize.executable != executable);
        self.plain_kernels.retain(|_, (_, loaded_into)| *loaded_into != executable);
    }

    /// A dispatch of `kernel_object`, which is no instrumented kernel:
    /// counted by its name (a kernel the runtime never saw loaded by its
    /// descriptor's address), unless it is one of HIP's own.
    fn dispatch_not_instrumented(&mut self, kernel_object: u64) {
        let name = match self.plain_kernels.get(&kernel_object) {
            Some((name, _)) if name.starts_with(code_objects::HIP_RUNTIME_KERNELS) => return,
            Some((name, _)) => name.clone(),
            None => format!("kernel object {kernel_object:#x} (its code object was not seen loading)"),
        };
        *self.uninstrumented.entry(name).or_default() += 1;
    }

    /// The packets that go to the device for `packets`, submitted to `queue`.
    pub fn packets(&mut self, hsa: &dyn Hsa, queue: u64, packets: &[Packet]) -> Vec<Packet> {
        let mut out = Vec::with_capacity(packets.len());
        for given in packets {
            let packet = &self.resized_packet(hsa, given);
            self.ordering.waits(queue, &packets::waits_for(packet));
            self.forward(hsa, queue, packet, &mut out);
            // Its signal now says that this queue's dispatches so far are done.
            self.ordering.completes(queue, packets::completion_signal(packet));
        }
        out
    }

    /// Puts what stands for `packet` of `queue` in `out`: the packet, or an
    /// observed dispatch's packets.
    fn forward(&mut self, hsa: &dyn Hsa, queue: u64, packet: &Packet, out: &mut Vec<Packet>) {
        let instrumented = packets::dispatch_of(packet)
            .and_then(|dispatch| Some((dispatch, self.kernels.get(&dispatch.kernel_object)?.clone())));
        let Some((mut dispatch, kernel)) = instrumented else {
            if let Some(dispatch) = packets::dispatch_of(packet) {
                self.dispatch_not_instrumented(dispatch.kernel_object);
            }
            out.push(*packet);
            return;
        };
        let ordinal = self.ordinals.entry(kernel.name.clone()).or_default();
        *ordinal += 1;
        let ordinal = *ordinal;
        let mut instrumented = *packet;
        if let Some(copy) = kernel.copy {
            if !self.selection.choose(&kernel.name, ordinal) {
                out.push(*packet);
                return;
            }
            packets::retarget(&mut instrumented, copy.kernel_object, copy.group_segment, copy.private_segment);
            dispatch = packets::dispatch_of(&instrumented).expect("still a dispatch");
        }
        match self.observe(hsa, queue, dispatch, kernel.slot, kernel.name.clone(), ordinal) {
            Ok((collect, kernarg, done)) => out.extend(packets::observed(&instrumented, collect, kernarg, done)),
            Err(error) => {
                // With its original kept, the dispatch runs that instead:
                // no tool data is left behind for the next dispatch.
                self.report.warn(format!("a dispatch of {} is not observed: {error}", kernel.name));
                out.push(if kernel.copy.is_some() { *packet } else { instrumented });
            }
        }
    }

    /// `packet`, with the LDS and scratch sizes of the kernel that runs
    /// where the program wrote another's (dynamic mode's instrumented
    /// copies: HIP writes the original's from the code object it was
    /// handed; what the program added, dynamic LDS or stack, is kept).
    fn resized_packet(&mut self, hsa: &dyn Hsa, packet: &Packet) -> Packet {
        let mut packet = *packet;
        let resize =
            packets::dispatch_of(&packet).and_then(|d| Some((d.kernel_object, *self.resized.get(&d.kernel_object)?)));
        if let Some((kernel_object, r)) = resize {
            let (group, private) = ((r.seen.group, r.running.group), (r.seen.private, r.running.private));
            packets::retarget(&mut packet, kernel_object, group, private);
            if let Some(at) = r.launch_shape {
                if let Err(error) = self.with_launch_shape(hsa, &mut packet, &r, at) {
                    self.report
                        .warn(format!("a dispatch's kernel arguments could not be given its launch shape: {error}"));
                }
            }
        }
        packet
    }

    /// Points `packet` at kernel arguments of the running kernel's size:
    /// the program's, then the launch shape at `at` in clang's v5 layout
    /// (block counts, group sizes, remainders, zero global offsets, the
    /// grid's dimensions), as CLR would fill them had it been handed the
    /// instrumented code object. Buffers are freed once their dispatch's
    /// completion signal says it is done.
    fn with_launch_shape(&mut self, hsa: &dyn Hsa, packet: &mut Packet, r: &Resize, at: u32) -> Result<(), HsaError> {
        let dispatch = packets::dispatch_of(packet).expect("a dispatch");
        self.free_finished_kernargs(hsa);
        let size = r.running.kernarg as usize;
        let buffer = hsa.host_allocate(r.agent, size)?;
        let mut bytes = vec![0u8; size];
        hsa.host_read(dispatch.kernarg_address, &mut bytes[..r.seen.kernarg as usize]);
        let axis = |kind: &str| usize::from(kind.as_bytes()[kind.len() - 1] - b'x');
        let (grid, group) = (dispatch.grid_size, dispatch.workgroup_size.map(|g| g.max(1)));
        for (kind, offset, width) in V5_LAUNCH_SHAPE {
            let value = match *kind {
                "hidden_grid_dims" => u64::from(packets::dimensions(packet)),
                k if k.starts_with("hidden_block_count_") => u64::from(grid[axis(k)].div_ceil(group[axis(k)])),
                k if k.starts_with("hidden_group_size_") => u64::from(group[axis(k)]),
                k if k.starts_with("hidden_remainder_") => u64::from(grid[axis(k)] % group[axis(k)]),
                _ => 0, // the global offsets: HIP launches have none
            };
            let place = at as usize + *offset as usize;
            bytes[place..place + *width as usize].copy_from_slice(&value.to_le_bytes()[..*width as usize]);
        }
        hsa.host_write(buffer, &bytes);
        packets::set_kernarg(packet, buffer);
        self.launch_kernargs.push((buffer, packets::completion_signal(packet)));
        Ok(())
    }

    /// Frees the launch-shape kernel arguments of dispatches whose
    /// completion signal has reached 0 (one without a signal: at exit).
    fn free_finished_kernargs(&mut self, hsa: &dyn Hsa) {
        let (done, running): (Vec<_>, Vec<_>) = std::mem::take(&mut self.launch_kernargs)
            .into_iter()
            .partition(|(_, signal)| *signal != 0 && hsa.signal_load(*signal) == 0);
        for (buffer, _) in done {
            hsa.host_free(buffer);
        }
        self.launch_kernargs = running;
    }

    fn collect_kernel(&mut self, hsa: &dyn Hsa, agent: u64) -> Result<CollectKernel, HsaError> {
        if let Some(kernel) = self.collect_kernels.get(&agent) {
            return Ok(*kernel);
        }
        let name = hsa.agent_name(agent)?;
        let Some((_, code_object)) = COLLECT_KERNELS.iter().find(|(target, _)| *target == name) else {
            let built: Vec<&str> = COLLECT_KERNELS.iter().map(|(t, _)| *t).collect();
            return Err(HsaError {
                call: "the collect kernel",
                status: format!("it is built for {} only, not {name}", built.join(", ")),
            });
        };
        let kernel = hsa.load_collect_kernel(agent, code_object)?;
        self.collect_kernels.insert(agent, kernel);
        Ok(kernel)
    }

    /// A collection buffer for `slot`: its kernel arguments and table filled in.
    fn buffer(&mut self, hsa: &dyn Hsa, slot: usize) -> Result<u64, HsaError> {
        let loaded = &mut self.loaded[slot];
        if let Some(buffer) = loaded.free_buffers.pop() {
            return Ok(buffer);
        }
        let buffer = hsa.host_allocate(loaded.agent, loaded.layout.size)?;
        let globals = &loaded.code_object.globals;
        let mut kernarg = [0u8; KERNARG_BYTES];
        kernarg[0..8].copy_from_slice(&(buffer + KERNARG_BYTES as u64).to_le_bytes());
        let entries = globals.len() + loaded.rings.len();
        kernarg[8..12].copy_from_slice(&(entries as u32).to_le_bytes());
        hsa.host_write(buffer, &kernarg);
        for (k, (global, &offset)) in globals.iter().zip(&loaded.layout.offsets).enumerate() {
            let mut entry = [0u8; ENTRY_BYTES];
            // A managed global's data is where its pointer says when the
            // collect kernel runs (HIP may have moved it), as for payloads.
            let (at, mut through) = match global.pointer {
                Some(pointer) => (pointer, GLOBAL_THROUGH_POINTER),
                None => (global.address, 0),
            };
            entry[0..8].copy_from_slice(&located(at, loaded.delta).to_le_bytes());
            entry[8..16].copy_from_slice(&(buffer + offset as u64).to_le_bytes());
            entry[16..24].copy_from_slice(&(loaded.initial + offset as u64).to_le_bytes());
            entry[24..32].copy_from_slice(&global.size.to_le_bytes());
            if let Some((count, record_bytes)) = global.records {
                let count = &globals[count];
                let at = match count.pointer {
                    Some(pointer) => {
                        through |= COUNT_THROUGH_POINTER;
                        pointer
                    }
                    None => count.address,
                };
                entry[32..40].copy_from_slice(&located(at, loaded.delta).to_le_bytes());
                entry[40..48].copy_from_slice(&record_bytes.to_le_bytes());
            }
            entry[48..56].copy_from_slice(&through.to_le_bytes());
            hsa.host_write(buffer + (KERNARG_BYTES + ENTRY_BYTES * k) as u64, &entry);
        }
        // Then each ring's `Reserved` and `Dropped`, copied out (never
        // reset): where the dispatch's records end, and the drops so far.
        for (k, (ring, &offset)) in loaded.rings.iter().zip(&loaded.layout.ring_ends).enumerate() {
            let mut entry = [0u8; ENTRY_BYTES];
            entry[0..8].copy_from_slice(&ring.reserved_address().to_le_bytes());
            entry[8..16].copy_from_slice(&(buffer + offset as u64).to_le_bytes());
            entry[24..32].copy_from_slice(&crate::rings::END_BYTES.to_le_bytes());
            hsa.host_write(buffer + (KERNARG_BYTES + ENTRY_BYTES * (globals.len() + k)) as u64, &entry);
        }
        Ok(buffer)
    }

    fn observe(
        &mut self,
        hsa: &dyn Hsa,
        queue: u64,
        dispatch: Dispatch,
        slot: usize,
        kernel: String,
        ordinal: u64,
    ) -> Result<(CollectKernel, u64, u64), HsaError> {
        if !self.loaded[slot].rings_pointed {
            return Err(HsaError {
                call: "its rings of records",
                status: "they were never set up on the device (the executable was not frozen, or setting them failed)"
                    .into(),
            });
        }
        let collect = self.collect_kernel(hsa, self.loaded[slot].agent)?;
        let buffer = self.buffer(hsa, slot)?;
        let give_back = |runtime: &mut Self| runtime.loaded[slot].free_buffers.push(buffer);
        let done = match hsa.signal_create(1) {
            Ok(done) => done,
            Err(error) => {
                give_back(self);
                return Err(error);
            }
        };
        self.next_dispatch += 1;
        let id = self.next_dispatch;
        if let Err(error) = hsa.when_zero(done, id) {
            hsa.signal_destroy(done);
            give_back(self);
            return Err(error);
        }
        // Dispatches of the code object on other queues that may run at the
        // same time: not finished (their collect kernel has not), and not
        // ordered before this one by a barrier the program put on its queue.
        let mut overlapping = Vec::new();
        let ordering = &self.ordering;
        let concurrent = |other: u64, flight: &InFlight| {
            flight.slot == slot
                && flight.queue != queue
                && !ordering.after(queue, flight.queue, other)
                && hsa.signal_load(flight.done) != 0
        };
        for (other, flight) in self.in_flight.iter_mut() {
            if concurrent(*other, flight) {
                flight.overlapping.push(id);
                overlapping.push(*other);
            }
        }
        self.ordering.dispatched(queue, id);
        let next_number = self.queue_numbers.len() as u32 + 1;
        let queue_number = *self.queue_numbers.entry(queue).or_insert(next_number);
        let submitted = self.clock.elapsed().as_secs_f64();
        let loaded = &self.loaded[slot];
        let name = Arc::new(std::ffi::CString::new(kernel.replace('\0', " ")).expect("no NUL left"));
        for (ring, &end) in loaded.rings.iter().zip(&loaded.layout.ring_ends) {
            ring.owned_by(Owner { dispatch: id, kernel: name.clone(), done, end: buffer + end as u64 });
        }
        let flight =
            InFlight { queue, queue_number, submitted, kernel, ordinal, slot, dispatch, done, buffer, overlapping };
        self.in_flight.insert(id, flight);
        Ok((collect, buffer, done))
    }

    /// Dispatches submitted whose collect kernel has finished (their
    /// handler may not have run yet) and the number of the others.
    fn finished_and_unread(&self, hsa: &dyn Hsa) -> (Vec<u64>, usize) {
        let finished: Vec<u64> =
            self.in_flight.iter().filter(|(_, f)| hsa.signal_load(f.done) == 0).map(|(id, _)| *id).collect();
        let unread = self.in_flight.len() - finished.len();
        (finished, unread)
    }
}

/// Records of rings go to the run's database (`records`), unless
/// `GPUINSTR_DATABASE_RECORDS=0`.
impl RecordSink for Mutex<Runtime> {
    fn records(&self, records: &ToolRecords) {
        let Ok(mut runtime) = self.lock() else { return };
        if !runtime.database_records {
            return;
        }
        let ring = records.ring.to_string_lossy();
        runtime.write_database(|database, _| {
            database.records(records.dispatch, &ring, records.first, records.record_bytes, records.bytes)
        });
    }
}

/// The code object of `reader` was loaded into `executable` for `agent`,
/// `delta` bytes from its addresses. When it is instrumented, the tool's
/// host part is told (with the runtime unlocked), before any of its
/// dispatches can complete.
pub fn code_object_loaded(
    runtime: &Mutex<Runtime>,
    hsa: &dyn Hsa,
    tool: Option<&dyn ToolHost>,
    (executable, agent, reader): (u64, u64, u64),
    delta: Option<i64>,
) {
    let loaded = runtime.lock().ok().and_then(|mut r| r.code_object_loaded(hsa, executable, agent, reader, delta));
    if let (Some(tool), Some(code_object)) = (tool, loaded) {
        tool.load(&code_object);
    }
}

/// Dispatch `id`'s collect kernel finished: hands what it collected to the
/// tool's host part and records it. Called on ROCr's event thread, and at
/// exit for dispatches whose handler had not run; whichever comes first
/// records it. The tool is called with the runtime unlocked.
pub fn dispatch_completed(runtime: &Mutex<Runtime>, hsa: &dyn Hsa, tool: Option<&dyn ToolHost>, id: u64) {
    let Some((mut dispatch, mut record)) = runtime.lock().ok().and_then(|mut r| r.collected(hsa, tool.is_some(), id))
    else {
        return;
    };
    // Every record the dispatch appended reaches the tool before the
    // dispatch does.
    let mut lost = Vec::new();
    for ring in std::mem::take(&mut dispatch.rings) {
        ring.drain(hsa, tool, runtime);
        let appended = ring.appended_by(id);
        let name = ring.name.to_string_lossy().to_string();
        let dropping = ring.when_full == WhenFull::Drop;
        if let Some(global) = record.globals.iter_mut().find(|g| g.name == name) {
            global.records = Some(appended.records);
            global.dropped = dropping.then_some(appended.dropped);
        }
        if appended.dropped > 0 {
            dispatch.warn(format!(
                "ring {name} was full: its hooks dropped {} of {} records (--ring-full drop); without it they wait and none is lost",
                appended.dropped,
                appended.records + appended.dropped
            ));
        }
        let taken = ring.take_lost();
        if taken.incomplete > 0 {
            dispatch.warn(format!(
                "{} records of ring {name} were reserved and never completed (a hook did not finish them): they are missing",
                taken.incomplete
            ));
        }
        if taken.ownerless > 0 {
            lost.push(format!(
                "{} records of ring {name} came from a dispatch the runtime did not observe; they were dropped",
                taken.ownerless
            ));
        }
        dispatch.ring_records.push((name, appended));
    }
    if let Some(tool) = tool {
        tool.dispatch(&mut dispatch);
        record.tool = dispatch.values;
    }
    if let Ok(mut r) = runtime.lock() {
        for warning in lost {
            r.report.warn(warning);
        }
        for warning in dispatch.warnings {
            r.report.warn(format!("dispatch {id} ({}): {warning}", record.kernel));
            record.problems.push(warning);
        }
        r.write_database(|database, _| database.dispatch(&record));
        r.report.dispatches.push(record);
        r.handling -= 1;
        RECORDED.notify_all();
    }
}

impl Runtime {
    /// Takes dispatch `id` out of flight: its collected bytes for the tool
    /// and its record (the tool's values still to come).
    fn collected(&mut self, hsa: &dyn Hsa, tool: bool, id: u64) -> Option<(ToolDispatch, DispatchRecord)> {
        for signal in std::mem::take(&mut self.retired_signals) {
            hsa.signal_destroy(signal);
        }
        let flight = self.in_flight.remove(&id)?;
        self.handling += 1;
        let loaded = &mut self.loaded[flight.slot];
        let mut globals = Vec::new();
        let mut values = Vec::new();
        let all = &loaded.code_object.globals;
        let read =
            |index: usize, into: &mut [u8]| hsa.host_read(flight.buffer + loaded.layout.offsets[index] as u64, into);
        for (index, global) in all.iter().enumerate() {
            let mut bytes = vec![0u8; global.size as usize];
            // Of a record buffer only the records its count says were
            // written came back (the rest of the copy is an earlier
            // dispatch's): past them the tool sees zeros, as before any.
            let copied = match global.records {
                Some((count, record_bytes)) => {
                    let mut wanted = [0u8; 8];
                    read(count, &mut wanted);
                    let capacity = global.size / record_bytes;
                    (u64::from_le_bytes(wanted).min(capacity) * record_bytes) as usize
                }
                None => bytes.len(),
            };
            read(index, &mut bytes[..copied]);
            // A ring's pointer means nothing to a reader: its records do
            // (counted once the ring is emptied).
            values.push(match tool || global.ring.is_some() {
                true => GlobalValue::named(&global.tool_name, bytes.len()),
                false => GlobalValue::of(&global.tool_name, &bytes),
            });
            globals.push((global.tool_name.clone(), bytes));
        }
        loaded.free_buffers.push(flight.buffer);
        self.retired_signals.push(flight.done);
        let mut problems = Vec::new();
        let points_left_out = loaded.code_object.points_left_out(&flight.kernel);
        if points_left_out > 0 {
            problems.push(format!(
                "partial: {points_left_out} selected point{} this kernel may run {} left out when it was \
                 instrumented (--allow-partial); the tool's values miss what {} would have recorded",
                if points_left_out == 1 { "" } else { "s" },
                if points_left_out == 1 { "was" } else { "were" },
                if points_left_out == 1 { "it" } else { "they" },
            ));
        }
        if !flight.overlapping.is_empty() {
            problems.push(format!(
                "dispatches {:?} of the same code object ran at the same time from other queues; tool globals are per code object, so these values mix theirs",
                flight.overlapping
            ));
        }
        let dispatch = ToolDispatch {
            id,
            kernel: std::ffi::CString::new(flight.kernel.clone()).unwrap_or_default(),
            grid_size: flight.dispatch.grid_size,
            workgroup_size: flight.dispatch.workgroup_size,
            globals,
            values: ToolValues::default(),
            warnings: Vec::new(),
            code_object: loaded.tool_view.clone(),
            points_left_out,
            rings: loaded.rings.clone(),
            ring_records: Vec::new(),
        };
        let record = DispatchRecord {
            id,
            ordinal: flight.ordinal,
            queue: flight.queue_number,
            submitted: flight.submitted,
            completed: self.clock.elapsed().as_secs_f64(),
            kernel: flight.kernel,
            code_object: loaded.index,
            grid_size: flight.dispatch.grid_size,
            workgroup_size: flight.dispatch.workgroup_size,
            globals: values,
            tool: ToolValues::default(),
            problems,
        };
        Some((dispatch, record))
    }
}

impl Runtime {
    /// Appends to the tool file `name` beside the report at `report`; a
    /// file that cannot be written is a warning (once).
    pub fn write_tool_file(&mut self, report: &std::path::Path, name: &str, bytes: &[u8]) {
        if let Err(message) = self.tool_files.write(report, name, bytes) {
            let message = format!("{message}; the tool's later records for it are lost");
            self.lost_outputs.push(message.clone());
            self.report.warn(message);
        }
    }

    /// At the end: the tool's files renamed into place and listed.
    pub fn close_tool_files(&mut self) {
        let (files, errors) = self.tool_files.close();
        self.report.files = files;
        for error in errors {
            self.lost_outputs.push(error.clone());
            self.report.warn(error);
        }
    }
}

/// At exit: records the dispatches that finished and counts the others.
pub fn finish(runtime: &Mutex<Runtime>, hsa: &dyn Hsa, tool: Option<&dyn ToolHost>) {
    let Some((finished, unread)) = runtime.lock().ok().map(|r| r.finished_and_unread(hsa)) else { return };
    for id in finished {
        dispatch_completed(runtime, hsa, tool, id);
    }
    // A handler on ROCr's event thread may have taken a dispatch out of
    // flight and still be in the tool: its record comes before the report.
    let Ok(r) = runtime.lock() else { return };
    let Ok((mut r, waited)) = RECORDED.wait_timeout_while(r, HANDLER_WAIT, |r| r.handling > 0) else { return };
    if waited.timed_out() {
        let still = r.handling;
        r.report.warn(format!(
            "{still} dispatches were still in the tool's host part after {} s at exit: they are missing from the report",
            HANDLER_WAIT.as_secs()
        ));
    }
    r.report.unread_dispatches = unread;
    r.report.dispatches.sort_by_key(|d| d.id);
    // A program run for a tool (something instrumented, a host part, dynamic
    // mode) learns which of its dispatches the tool saw none of; a plain
    // program on the emulated GPU hears nothing.
    let for_a_tool = !r.report.code_objects.is_empty() || tool.is_some() || !r.report.dynamic.is_empty();
    if for_a_tool {
        r.report.uninstrumented_dispatches = std::mem::take(&mut r.uninstrumented)
            .into_iter()
            .map(|(kernel, dispatches)| UninstrumentedRecord { kernel, dispatches })
            .collect();
    }
    if r.selection.is_narrowed() || r.selection.selected + r.selection.not_selected > 0 {
        r.report.selection = Some(r.selection.clone());
    }
}

impl Runtime {
    /// Writes to the run's database (opened on first use) what `write`
    /// writes, after the warnings not written yet. A database that fails
    /// is warned about once and written no more: the JSON report still
    /// holds everything.
    fn write_database(&mut self, write: impl FnOnce(&mut Database, &Report) -> Result<(), DatabaseError>) {
        if matches!(self.database, DatabaseState::NotYet) {
            self.database = match database_path() {
                None => DatabaseState::Off,
                Some(path) => {
                    let arguments: Vec<String> = std::env::args().skip(1).collect();
                    let program = std::env::args().next().unwrap_or_default();
                    match Database::create(&path, &program, &arguments, self.started) {
                        Ok(database) => DatabaseState::Open(database),
                        Err(error) => {
                            let message = format!("{error}: no database is written (the JSON report holds the run)");
                            self.lost_outputs.push(message.clone());
                            self.report.warn(message);
                            DatabaseState::Off
                        }
                    }
                }
            };
        }
        let DatabaseState::Open(database) = &mut self.database else { return };
        if let Err(error) = database.warnings(&self.report).and_then(|()| write(database, &self.report)) {
            self.database = DatabaseState::Off;
            let message = format!("{error}: the database ends here (the JSON report holds the run)");
            self.lost_outputs.push(message.clone());
            self.report.warn(message);
        }
    }

    /// At exit, once every record is in: releases what the runtime made
    /// for the run, before ROCr shuts down (which reports what is left,
    /// ROCr 6's `Resource leak detected by SharedSignalPool`): the signals
    /// of completed dispatches, host buffers and rings, the collect
    /// kernels' executables. What a dispatch still running on the GPU may
    /// use (its signal, buffer, its code object's initial values and rings,
    /// the collect kernel) is left to it.
    pub fn release(&mut self, hsa: &dyn Hsa) {
        for signal in std::mem::take(&mut self.retired_signals) {
            hsa.signal_destroy(signal);
        }
        for (buffer, _) in std::mem::take(&mut self.launch_kernargs) {
            hsa.host_free(buffer);
        }
        let busy: std::collections::HashSet<usize> = self.in_flight.values().map(|f| f.slot).collect();
        for (slot, loaded) in self.loaded.iter_mut().enumerate() {
            for buffer in std::mem::take(&mut loaded.free_buffers) {
                hsa.host_free(buffer);
            }
            if busy.contains(&slot) || loaded.released {
                continue;
            }
            hsa.host_free(loaded.initial);
            for ring in &loaded.rings {
                hsa.host_free(ring.head);
            }
            loaded.released = true;
        }
        if self.in_flight.is_empty() {
            for (_, collect) in std::mem::take(&mut self.collect_kernels) {
                hsa.executable_destroy(collect.executable);
            }
        }
    }

    /// At exit, after the report is complete: the database's last writes;
    /// where it is, if there is one.
    pub fn finish_database(&mut self) -> Option<std::path::PathBuf> {
        if !matches!(self.database, DatabaseState::Open(_)) {
            return None;
        }
        self.write_database(|database, report| database.finish(report));
        matches!(self.database, DatabaseState::Open(_)).then(database_path).flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code_objects::KernelInfo;
    use std::cell::RefCell;
    use std::collections::BTreeSet;

    /// ROCr as far as the runtime's calls go, keeping what was made and
    /// what was released. Every dispatch has finished when asked.
    #[derive(Default)]
    struct Recording {
        next: std::cell::Cell<u64>,
        signals: RefCell<BTreeSet<u64>>,
        memory: RefCell<BTreeSet<u64>>,
        executables: RefCell<BTreeSet<u64>>,
    }

    impl Recording {
        fn make(&self, set: &RefCell<BTreeSet<u64>>) -> u64 {
            self.next.set(self.next.get() + 0x1000);
            set.borrow_mut().insert(self.next.get());
            self.next.get()
        }
    }

    impl Hsa for Recording {
        fn signal_create(&self, _initial: i64) -> Result<u64, HsaError> {
            Ok(self.make(&self.signals))
        }
        fn signal_destroy(&self, signal: u64) {
            assert!(self.signals.borrow_mut().remove(&signal), "signal {signal:#x} destroyed twice");
        }
        fn signal_load(&self, _signal: u64) -> i64 {
            0
        }
        fn when_zero(&self, _signal: u64, _dispatch: u64) -> Result<(), HsaError> {
            Ok(())
        }
        fn agent_name(&self, _agent: u64) -> Result<String, HsaError> {
            Ok("gfx90a".into())
        }
        fn load_collect_kernel(&self, _agent: u64, _code_object: &[u8]) -> Result<CollectKernel, HsaError> {
            let executable = self.make(&self.executables);
            Ok(CollectKernel { executable, kernel_object: 0xc0, private_segment_size: 0, group_segment_size: 0 })
        }
        fn host_allocate(&self, _agent: u64, _size: usize) -> Result<u64, HsaError> {
            Ok(self.make(&self.memory))
        }
        fn host_free(&self, address: u64) {
            assert!(self.memory.borrow_mut().remove(&address), "memory {address:#x} freed twice");
        }
        fn executable_destroy(&self, executable: u64) {
            assert!(self.executables.borrow_mut().remove(&executable));
        }
        fn host_read(&self, _address: u64, into: &mut [u8]) {
            into.fill(0);
        }
        fn host_write(&self, _address: u64, _bytes: &[u8]) {}
        fn host_load_u64(&self, _address: u64) -> u64 {
            0
        }
        fn host_store_u64(&self, _address: u64, _value: u64) {}
        fn copy_to_device(&self, _to: u64, _from: u64, _size: usize) -> Result<(), HsaError> {
            Ok(())
        }
    }

    /// Everything the runtime makes for a run (dispatches' signals and
    /// buffers, the code object's initial values, the collect kernel's
    /// executable) is released at exit, before ROCr shuts down: ROCr 6
    /// reports signals left over as a leak the program did not make.
    #[test]
    fn what_the_runtime_makes_is_released_at_exit() {
        let hsa = Recording::default();
        let mut runtime = Runtime { database: DatabaseState::Off, ..Runtime::default() };
        let kernel = KernelInfo {
            name: "k".into(),
            descriptor: 0x1000,
            group_segment: 0,
            private_segment: 0,
            kernarg_size: 8,
            program_sees: None,
            copy: None,
            launch_shape: None,
        };
        let code_object = InstrumentedCodeObject {
            processor: "gfx90a".into(),
            kernels: vec![kernel],
            globals: Vec::new(),
            sites: 1,
            points: Vec::new(),
            partial: Vec::new(),
        };
        runtime.readers.insert(7, Arc::new(code_object));
        assert!(runtime.code_object_loaded(&hsa, 0xe0, 0xa0, 7, Some(0)).is_some());
        let mut dispatch = [0u8; 64];
        dispatch[0] = 2;
        dispatch[4] = 64;
        dispatch[12] = 64;
        dispatch[32..40].copy_from_slice(&0x1000u64.to_le_bytes());
        let state = Mutex::new(runtime);
        for id in 1..=3 {
            let out = state.lock().unwrap().packets(&hsa, 0x9, &[dispatch]);
            assert_eq!(out.len(), 2, "the dispatch and the collect kernel");
            dispatch_completed(&state, &hsa, None, id);
        }
        assert!(!hsa.signals.borrow().is_empty() && !hsa.memory.borrow().is_empty());
        state.lock().unwrap().release(&hsa);
        assert_eq!(*hsa.signals.borrow(), BTreeSet::new(), "signals left");
        assert_eq!(*hsa.memory.borrow(), BTreeSet::new(), "host memory left");
        assert_eq!(*hsa.executables.borrow(), BTreeSet::new(), "executables left");
    }
}
