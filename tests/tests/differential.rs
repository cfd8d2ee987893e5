//! The emulator as the oracle of instrumentation (issue 7): an original and
//! an instrumented code object run on the same inputs; the application's
//! memory must come out identical and the tool's results must equal what
//! the emulator itself observed running the original.

use gpuinstr::instrument::{instrument_code_object, InstrumentOptions};
use gpuinstr::plan::Plan;
use gpuinstr::stages::lift::{lift, PreloadPrologue, ProblemKind, PRELOAD_PROLOGUE_BYTES};
use gpuinstr::stages::liveness::analyze;
use gpuinstr::stages::load::{self, CodeObject};
use gpuinstr::stages::payload::HookArgument;
use gpuinstr::stages::sva::counts::CountWay;
use gpuinstr::stages::sva::sliding::Sliding;
use gpuinstr::stages::sva::{place, Home, RegisterGrowth, SvaRequest};
use gpuinstr_emulator::{Device, Launch, Options, RunReport};
use gpuinstr_intrinsics::Registry;
use gpuinstr_tests::*;

fn example_tool(example_name: &str, dir: &std::path::Path) -> CodeObject {
    let path = dir.join(format!("{example_name}.hsaco"));
    run_ok(&mut tool_compile_command(Compiler::Clang, &example(example_name), "-O3", &path));
    load::load(&path).unwrap().code_objects.remove(0)
}

/// The example built for the application's code object version (hidden
/// arguments moved in v5: a tool reading them must match), as a user whose
/// compiler writes another version builds it.
fn example_tool_for(example_name: &str, dir: &std::path::Path, app: &CodeObject) -> CodeObject {
    let version = app.code_object_version;
    let path = dir.join(format!("{example_name}-v{version}.hsaco"));
    let mut command = tool_compile_command(Compiler::Clang, &example(example_name), "-O3", &path);
    run_ok(command.arg(format!("-mcode-object-version={version}")));
    load::load(&path).unwrap().code_objects.remove(0)
}

fn example_plan(example_name: &str) -> Plan {
    Plan::load(&repo().join(format!("hook-sdk/examples/{example_name}/plan.toml"))).unwrap()
}

/// The example's plan with every insertion restricted to one kernel.
fn example_plan_for(example_name: &str, kernel: &str) -> Plan {
    let path = repo().join(format!("hook-sdk/examples/{example_name}/plan.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replace("[[insert]]", &format!("[[insert]]\nkernels = \"{kernel}\""));
    Plan::parse(&text, &format!("{example_name} for one kernel")).unwrap()
}

/// The Debian library's gfx90a:xnack- code object that holds `kernel`.
fn debian_code_object(package: &str, library: &str, kernel: &str) -> CodeObject {
    let path = debian_package_file(package, &format!("/usr/lib/x86_64-linux-gnu/{library}"));
    load::load_for_target(&path, Some("gfx90a:xnack-"))
        .unwrap()
        .code_objects
        .into_iter()
        .find(|o| o.kernels.iter().any(|k| k.name() == kernel))
        .unwrap_or_else(|| panic!("{library} has {kernel}"))
}

/// Instruments with registers allowed to grow (as scripts/instrument-corpus.sh
/// does), so every point the plan selects is instrumented.
fn instrumented(tool: &CodeObject, app: &CodeObject, plan: &Plan) -> CodeObject {
    instrumented_growing(tool, app, plan, RegisterGrowth::Always)
}

fn instrumented_growing(tool: &CodeObject, app: &CodeObject, plan: &Plan, grow: RegisterGrowth) -> CodeObject {
    let options = InstrumentOptions { grow_registers: grow, linker: linker_for(app), ..InstrumentOptions::default() };
    let (bytes, report) = instrument_code_object(tool, app, plan, &Registry::with_builtins(), &options).unwrap();
    assert!(report.left_out.is_empty(), "{:?}", report.left_out);
    CodeObject::parse(bytes, Vec::new()).unwrap()
}

/// The same, and `verify` proves what the emulator is about to run (our
/// small code objects: verifying a whole library code object per tool
/// would cost minutes; the corpus scripts verify those).
fn instrumented_verified(tool: &CodeObject, app: &CodeObject, plan: &Plan) -> CodeObject {
    let output = instrumented(tool, app, plan);
    let verified = gpuinstr::verify::verify(app, &output).unwrap();
    assert!(verified.ok(), "{}: {}", app.target, verified.render_text());
    output
}

/// Our control-flow kernels, for [`every_target`], with the example's
/// plan: the plan and each (original, instrumented) pair.
fn instrumented_control_flow(example_name: &str) -> (Plan, Vec<(CodeObject, CodeObject)>) {
    let dir = scratch();
    let tool = example_tool(example_name, dir.path());
    let plan = example_plan(example_name);
    let object = object_for_every_target("kernels/control_flow.hip");
    let pairs = every_target()
        .into_iter()
        .map(|target| {
            let app = load::load_for_target(&object, Some(target)).unwrap().code_objects.remove(0);
            let output = instrumented_verified(&tool, &app, &plan);
            (app, output)
        })
        .collect();
    (plan, pairs)
}

/// One launch: the buffers (bytes) its arguments point at, the scalar
/// arguments, and the shape.
struct Case {
    kernel: &'static str,
    launch: Launch,
    arguments: Vec<Argument>,
}

/// One kernel argument of a [`Case`].
enum Argument {
    /// A pointer to a buffer holding these bytes.
    Buffer(Vec<u8>),
    /// These bytes, by value.
    Value(Vec<u8>),
    /// By value, a structure of pointers to buffers holding these bytes
    /// (rocPRIM passes its scan state so).
    BufferPointers(Vec<Vec<u8>>),
}

/// Runs a case; returns every buffer's bytes after the run and the report.
fn run_case(device: &mut Device, case: &Case) -> (Vec<Vec<u8>>, RunReport) {
    let mut addresses = Vec::new();
    let mut allocate = |bytes: &Vec<u8>| {
        let address = device.allocate("buffer", bytes);
        addresses.push((address, bytes.len()));
        address.to_le_bytes().to_vec()
    };
    let arguments: Vec<Vec<u8>> = case
        .arguments
        .iter()
        .map(|argument| match argument {
            Argument::Buffer(bytes) => allocate(bytes),
            Argument::Value(bytes) => bytes.clone(),
            Argument::BufferPointers(buffers) => buffers.iter().flat_map(&mut allocate).collect(),
        })
        .collect();
    let report = device.launch(case.kernel, case.launch, &arguments).unwrap_or_else(|e| panic!("{e}"));
    let memory = addresses.iter().map(|(a, n)| device.memory.bytes(*a, *n).unwrap()).collect();
    (memory, report)
}

fn words(values: impl IntoIterator<Item = i32>) -> Vec<u8> {
    values.into_iter().flat_map(i32::to_le_bytes).collect()
}

fn control_flow_cases() -> Vec<Case> {
    vec![
        Case {
            kernel: "_Z17divergentBranchesPiPKii",
            launch: Launch::linear(3, 128),
            arguments: vec![
                Argument::Buffer(words([0; 384])),
                Argument::Buffer(words((0..384).map(|i| i * 37 % 101 - 20))),
                Argument::Value(300i32.to_le_bytes().to_vec()),
            ],
        },
        Case {
            kernel: "_Z13loopReductionPfPKfii",
            launch: Launch::linear(1, 64),
            arguments: vec![
                Argument::Buffer(words([0; 64])),
                Argument::Buffer((0..500).flat_map(|i| ((i % 23) as f32 - 11.0).to_le_bytes()).collect()),
                Argument::Value(500i32.to_le_bytes().to_vec()),
                Argument::Value(64i32.to_le_bytes().to_vec()),
            ],
        },
    ]
}

/// What the instruction counter must count for one run of the original:
/// one per wave execution of a scalar or lane-access instruction, the
/// active lanes of each execution of a vector instruction.
fn expected_count(app: &CodeObject, plan: &Plan, report: &RunReport) -> u64 {
    let lifted = lift(app).unwrap();
    let mut total = 0;
    for point in plan.select(&lifted) {
        let instruction = lifted.functions[point.function].instructions().nth(point.instruction).unwrap();
        let (waves, lanes) = report.counts.per_address.get(&instruction.address).copied().unwrap_or((0, 0));
        let scalar = point.calls.iter().all(|call| call.hook == "countInstructionsScalar");
        total += if scalar { waves } else { lanes };
    }
    total
}

/// Both runs of a case: the original's report and both devices (the
/// instrumented one to read the tool's globals from, at `cells`).
struct Runs {
    report: RunReport,
    /// The instrumented run's own counts.
    instrumented_report: RunReport,
    original: Device,
    instrumented: Device,
    cells: Vec<u64>,
}

/// Original and instrumented runs of a case; asserts the application's
/// memory is identical.
fn run_both(app: &CodeObject, output: &CodeObject, case: &Case, managed: &[(&str, u64)], options: Options) -> Runs {
    run_both_with_rings(app, output, case, managed, &[], options)
}

/// A ring (`GPUINSTR_RING`) as the runtime would set it up: its tool
/// global's name, the records it holds (nothing empties it here: all the
/// run's must fit) and their size.
struct RingSetUp<'a> {
    global: &'a str,
    capacity: u64,
    record_bytes: u64,
    /// The head's `WhenFull`: [`RING_WAIT`] or [`RING_DROP`].
    when_full: u64,
}

/// Offsets in a ring's head (`gpuinstr_ring_head` of gpuinstr.h).
const RING_MASK: u64 = 72;
const RING_RECORDS: u64 = 80;
const RING_SEQUENCES: u64 = 88;
const RING_WHEN_FULL: u64 = 96;
const RING_HEAD_BYTES: u64 = 128;
/// Offset of the head's `Dropped`.
const RING_DROPPED: u64 = 8;
/// Values of the head's `WhenFull` (GPUINSTR_RING_WAIT, GPUINSTR_RING_DROP).
const RING_WAIT: u64 = 0;
const RING_DROP: u64 = 1;

/// `run_both`, and each ring of `rings` allocated with its head written
/// and its global pointed at it (the cells after the managed globals' are
/// the rings' heads).
fn run_both_with_rings(
    app: &CodeObject,
    output: &CodeObject,
    case: &Case,
    managed: &[(&str, u64)],
    rings: &[RingSetUp],
    options: Options,
) -> Runs {
    let name = format!("{} {}", app.target.processor, case.kernel);
    let mut original = Device::new(app.clone(), "original".into()).unwrap();
    original.options = options;
    let (memory, report) = run_case(&mut original, case);
    let mut instrumented = Device::new(output.clone(), "instrumented".into()).unwrap();
    // A `__managed__` tool global is a pointer the code object itself
    // initialises to its storage (nothing registers it with HIP): read
    // through it, as the payloads write through it.
    let mut cells: Vec<u64> = managed
        .iter()
        .map(|(global, size)| {
            let pointer = instrumented.symbol_address(global).unwrap_or_else(|| panic!("{name}: no {global}"));
            let storage = instrumented.symbol_address(&format!("{global}.managed"));
            let cell = instrumented.memory.read_u64(pointer).unwrap();
            assert_eq!(Some(cell), storage, "{name}: {global} points at {global}.managed");
            assert!(instrumented.memory.bytes(cell, *size as usize).unwrap().iter().all(|&b| b == 0));
            cell
        })
        .collect();
    for ring in rings {
        let pointer = instrumented.symbol_address(ring.global).unwrap_or_else(|| panic!("{name}: no {}", ring.global));
        assert_eq!(instrumented.memory.read_u64(pointer).unwrap(), 0, "{name}: {} starts null", ring.global);
        let bytes = RING_HEAD_BYTES + ring.capacity * (ring.record_bytes + 8);
        let head = instrumented.allocate("ring", &vec![0; bytes as usize]);
        let records = head + RING_HEAD_BYTES;
        instrumented.memory.write_u64(head + RING_MASK, ring.capacity - 1).unwrap();
        instrumented.memory.write_u64(head + RING_RECORDS, records).unwrap();
        instrumented.memory.write_u64(head + RING_SEQUENCES, records + ring.capacity * ring.record_bytes).unwrap();
        instrumented.memory.write_u64(head + RING_WHEN_FULL, ring.when_full).unwrap();
        instrumented.memory.write_u64(pointer, head).unwrap();
        cells.push(head);
    }
    let (instrumented_memory, instrumented_report) = run_case(&mut instrumented, case);
    assert_eq!(memory, instrumented_memory, "{name}: the application's memory");
    Runs { report, instrumented_report, original, instrumented, cells }
}

/// Where an address lies, independent of the device: the owning
/// allocation's name, its rank among allocations of that name, the offset.
fn place_of(device: &Device, address: u64) -> Option<(String, usize, u64)> {
    let (base, allocation) = device.memory.allocation(address)?;
    let rank = device.memory.allocations().filter(|(b, a)| a.name == allocation.name && *b < base).count();
    Some((allocation.name.clone(), rank, address - base))
}

fn u64s(device: &Device, address: u64, count: usize) -> Vec<u64> {
    let bytes = device.memory.bytes(address, count * 8).unwrap();
    bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect()
}

/// The instruction counter's Counter equals what the emulator counted in
/// the original, and the payloads ran.
fn check_instruction_counter(app: &CodeObject, output: &CodeObject, plan: &Plan, case: &Case) {
    let name = format!("{} {}", app.target.processor, case.kernel);
    // Counter is __managed__: the global points at host-shared memory.
    let Runs { report, instrumented_report, instrumented: device, cells, .. } =
        run_both(app, output, case, &[("Counter", 8)], Options::default());
    let counted = device.memory.read_u64(cells[0]).unwrap();
    let expected = expected_count(app, plan, &report);
    assert!(expected > 0);
    assert_eq!(counted, expected, "{name}: Counter");
    eprintln!(
        "{name}: instruction counter runs {:.2}x the original's wave instructions",
        instrumented_report.counts.instructions() as f64 / report.counts.instructions() as f64
    );
}

/// The block counter's Counter equals what the instruction counter counts
/// (the emulator's executions of the same points) with one payload per EXEC
/// region; the emulated cost is printed (instrumented over original wave
/// instructions).
fn check_block_counter(app: &CodeObject, output: &CodeObject, case: &Case) {
    let name = format!("{} {}", app.target.processor, case.kernel);
    let cost = block_counter_counts(app, output, case);
    // The count kept in registers (the example plan's count-in-registers):
    // a few instructions a region, once per wave an atomic.
    assert!(cost <= 1.5, "{name}: the block counter runs {cost:.2}x the original's wave instructions");
}

/// The block counter's Counter equals the instruction counter's count;
/// what the instrumented run costs (wave instructions over the original's).
fn block_counter_counts(app: &CodeObject, output: &CodeObject, case: &Case) -> f64 {
    let name = format!("{} {}", app.target.processor, case.kernel);
    let Runs { report, instrumented_report, instrumented: device, cells, .. } =
        run_both(app, output, case, &[("Counter", 8)], Options::default());
    let counted = device.memory.read_u64(cells[0]).unwrap();
    let expected = expected_count(app, &example_plan_for("instruction-counter", case.kernel), &report);
    assert!(expected > 0);
    assert_eq!(counted, expected, "{name}: Counter");
    let cost = instrumented_report.counts.instructions() as f64 / report.counts.instructions() as f64;
    eprintln!("{name}: block counter runs {cost:.2}x the original's wave instructions");
    cost
}

/// rocPRIM's kernels use SGPRs past what their descriptor allocates (the
/// granule holds them): `init_lookback_scan_state_kernel` in Debian 12's
/// rocSPARSE reads s[18:21] with 18 allocated. The block counter keeps its
/// count in SGPR pairs past the allocation only where the code does not
/// touch them; with default flags its output verifies, the scan state is
/// the original's and the count is what the emulator ran (whole-rocSPARSE
/// `verify` found 494 clobbered registers before).
#[test]
fn the_block_counter_on_a_kernel_using_sgprs_past_its_allocation() {
    let kernel = "_ZN7rocprim6detail31init_lookback_scan_state_kernelINS0_19lookback_scan_stateIlLb1ELb0EEEEEvT_jNS0_16ordered_block_idIjEEjPNS4_10value_typeE";
    let app = debian_code_object("librocsparse0", "librocsparse.so.0.1", kernel);
    let registers = gpuinstr::analyze::code_object_report(&app).unwrap();
    let sgprs = &registers.kernels.iter().find(|k| k.name == kernel).unwrap().sgpr;
    assert!(sgprs.used_up_to > sgprs.allocated, "the kernel touches SGPRs past its allocation: {sgprs:?}");

    // 300 blocks' state (a warp of padding before them), two workgroups.
    let blocks = 300u32;
    let slots = 64 + blocks as usize;
    let case = Case {
        kernel,
        launch: Launch::linear(2, 256),
        arguments: vec![
            Argument::BufferPointers(vec![vec![0xab; slots * 8], vec![0xcd; slots * 8], vec![0xef; slots * 8]]),
            Argument::Value(blocks.to_le_bytes().to_vec()),
            Argument::Buffer(77u32.to_le_bytes().to_vec()),
            Argument::Value(0u32.to_le_bytes().to_vec()),
            Argument::Value(0u64.to_le_bytes().to_vec()),
        ],
    };
    let mut device = Device::new(app.clone(), "original".into()).unwrap();
    let (memory, _) = run_case(&mut device, &case);
    assert_eq!(memory[3], 0u32.to_le_bytes(), "the ordered block id is reset");
    assert_ne!(memory[0], vec![0xab; slots * 8], "the flags are initialised");

    let dir = scratch();
    let tool = example_tool_for("block-counter", dir.path(), &app);
    let plan = example_plan_for("block-counter", kernel);
    let options = InstrumentOptions { linker: linker_for(&app), ..InstrumentOptions::default() };
    let (bytes, report) = instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &options).unwrap();
    assert!(report.left_out.is_empty(), "{:?}", report.left_out);
    assert_eq!(report.counts_in_registers.expect("the plan counts in registers").kernels, 1);
    let output = CodeObject::parse(bytes, Vec::new()).unwrap();
    let verified = gpuinstr::verify::verify(&app, &output).unwrap();
    assert!(verified.ok(), "{}", verified.render_text());
    // A short kernel (a few dozen instructions a wave): the count's entry
    // and its atomic at the exit weigh more than on the loops elsewhere.
    let cost = block_counter_counts(&app, &output, &case);
    assert!(cost <= 2.5, "the block counter runs {cost:.2}x the original's wave instructions");
}

/// The block counter without `count-in-registers` calls its hook at every
/// region: the same count, at the cost of a payload with an atomic each.
#[test]
fn the_block_counter_calls_its_hook_where_the_count_is_not_kept_in_registers() {
    let (app, case) = philox_half();
    let kernel = case.kernel;
    let dir = scratch();
    let tool = example_tool_for("block-counter", dir.path(), &app);
    let text = std::fs::read_to_string(repo().join("hook-sdk/examples/block-counter/plan.toml")).unwrap();
    let text = text.replace("count-in-registers = \"Counter\"\n", "");
    let text = text.replace("hook = ", &format!("kernels = \"{kernel}\"\nhook = "));
    let plan = Plan::parse(&text, "plan.toml").unwrap();
    assert!(plan.register_count().unwrap().is_none());
    let output = instrumented(&tool, &app, &plan);
    let Runs { report, instrumented_report, instrumented: device, cells, .. } =
        run_both(&app, &output, &case, &[("Counter", 8)], Options::default());
    let expected = expected_count(&app, &example_plan_for("instruction-counter", kernel), &report);
    assert_eq!(device.memory.read_u64(cells[0]).unwrap(), expected);
    let cost = instrumented_report.counts.instructions() as f64 / report.counts.instructions() as f64;
    assert!(cost > 2.0, "a hook call per region costs more than registers: {cost:.2}x");
}

/// Kernel-arguments copies the launch's gridDim and blockDim.
fn check_kernel_arguments(app: &CodeObject, output: &CodeObject, case: &Case) {
    let name = format!("{} {}", app.target.processor, case.kernel);
    let Runs { instrumented: device, cells, .. } =
        run_both(app, output, case, &[("GridDim", 12), ("BlockDim", 12)], Options::default());
    let dims = |address| {
        let b = device.memory.bytes(address, 12).unwrap();
        [0, 4, 8].map(|k| u32::from_le_bytes(b[k..k + 4].try_into().unwrap()))
    };
    assert_eq!(dims(cells[0]), case.launch.workgroups, "{name}: gridDim");
    assert_eq!(dims(cells[1]), case.launch.workgroup_size, "{name}: blockDim");
}

/// The opcode histogram equals the emulator's executions per opcode.
fn check_opcode_histogram(app: &CodeObject, output: &CodeObject, case: &Case) {
    let name = format!("{} {}", app.target.processor, case.kernel);
    let slots = 1usize << 15;
    let lifted = lift(app).unwrap();
    let Runs { report, instrumented: device, cells, .. } =
        run_both(app, output, case, &[("OpcodeHistogram", (slots * 8) as u64)], Options::default());
    let histogram = u64s(&device, cells[0], slots);
    let mut expected = vec![0u64; slots];
    for instruction in lifted.functions.iter().flat_map(|f| f.instructions()) {
        if let Some((waves, _)) = report.counts.per_address.get(&instruction.address) {
            expected[instruction.opcode as usize % slots] += waves;
        }
    }
    assert_eq!(histogram.iter().sum::<u64>(), report.counts.instructions(), "{name}: every instruction");
    for (slot, (got, want)) in histogram.iter().zip(&expected).enumerate() {
        assert_eq!(got, want, "{name}: opcode {}", lifted.isa.opcode_name(slot as u32));
    }
}

/// Branch-divergence's records are the emulator's EXEC history around each
/// executed `s_and_saveexec_b64`; returns how many of them diverged.
fn check_branch_divergence(app: &CodeObject, output: &CodeObject, case: &Case) -> u64 {
    let name = format!("{} {}", app.target.processor, case.kernel);
    let capacity = 1usize << 18;
    let ring = RingSetUp { global: "BranchRecords", capacity: capacity as u64, record_bytes: 24, when_full: RING_WAIT };
    let traced = Options { trace: true, ..Options::default() };
    let Runs { report, instrumented: device, cells, .. } = run_both_with_rings(app, output, case, &[], &[ring], traced);
    let lifted = lift(app).unwrap();
    let branches: std::collections::HashSet<u64> = lifted
        .functions
        .iter()
        .flat_map(|f| f.instructions())
        .filter(|i| i.name(&lifted.isa) == "S_AND_SAVEEXEC_B64")
        .map(|i| i.address)
        .collect();
    // The emulator's own history: EXEC before each s_and_saveexec_b64
    // and EXEC after it (before the wave's next instruction); the tool
    // records executions with some lane active.
    let mut expected = Vec::new();
    for (k, entry) in report.trace.iter().enumerate() {
        if !branches.contains(&entry.address) || entry.exec == 0 {
            continue;
        }
        let after = report.trace[k + 1..].iter().find(|e| e.wave == entry.wave).expect("a next instruction");
        expected.push((entry.wave, entry.exec, after.exec));
    }
    // The ring's `Reserved`, and its records from the head's end.
    let count = u64s(&device, cells[0], 1)[0] as usize;
    assert_eq!(count, expected.len(), "{name}: one record per executed branch");
    assert!(count <= capacity, "{name}: the ring holds them all");
    let raw = device.memory.bytes(cells[0] + RING_HEAD_BYTES, count * 24).unwrap();
    let word = |r: &[u8], at: usize, n: usize| r[at..at + n].iter().rev().fold(0u64, |v, b| (v << 8) | u64::from(*b));
    let mut records: Vec<(u32, u64, u64)> =
        raw.chunks_exact(24).map(|r| (word(r, 4, 4) as u32, word(r, 8, 8), word(r, 16, 8))).collect();
    records.sort();
    expected.sort();
    assert_eq!(records, expected, "{name}: (wavefront, old mask, if mask) per executed branch");
    expected.iter().filter(|(_, old, new)| new != old && *new != 0).count() as u64
}

/// The memory tracer writes one record per lane access the emulator
/// logged for the instructions the plan selects (active lanes, but those a
/// buffer's range check leaves out): the same (instruction, space,
/// address) pairs, each flat, global or buffer address inside an
/// allocation named in `readable` (the launch's buffers, the code object's
/// constants...), each LDS address inside the workgroup's LDS.
fn check_memory_tracer(app: &CodeObject, output: &CodeObject, plan: &Plan, case: &Case, readable: &[&str]) {
    let name = format!("{} {}", app.target.processor, case.kernel);
    let capacity = 1usize << 20;
    let lifted = lift(app).unwrap();
    let ring = RingSetUp { global: "Trace", capacity: capacity as u64, record_bytes: 16, when_full: RING_WAIT };
    let recording = Options { accesses: true, ..Options::default() };
    let Runs { report, original, instrumented: device, cells, .. } =
        run_both_with_rings(app, output, case, &[], &[ring], recording);
    let selected: std::collections::HashSet<u64> = plan
        .select(&lifted)
        .iter()
        .map(|point| lifted.functions[point.function].instructions().nth(point.instruction).unwrap().address)
        .collect();
    let expected = report.accesses.iter().filter(|a| selected.contains(&a.address)).count() as u64;
    // The ring's `Reserved`, its records from the head's end, and each
    // record's sequence word (index + 1: complete).
    let count = u64s(&device, cells[0], 1)[0];
    assert_eq!(count, expected, "{name}: one record per lane access of each memory instruction");
    assert!(count > 0 && count as usize <= capacity, "{name}: {count} records");
    let records = cells[0] + RING_HEAD_BYTES;
    let raw = device.memory.bytes(records, count as usize * 16).unwrap();
    let sequences = u64s(&device, records + capacity as u64 * 16, count as usize);
    assert!(sequences.iter().enumerate().all(|(k, s)| *s == k as u64 + 1), "{name}: every record complete");
    // Exactly the (instruction, space, address) triples the emulator saw
    // the original's lanes access. Addresses compare as places (buffer k,
    // offset): the devices lay out memory differently; LDS addresses as
    // they are.
    const LDS: u8 = 3;
    let place = |device: &Device, space: u8, address: u64| match space {
        LDS => Some(("LDS".to_string(), 0, address)),
        _ => place_of(device, address),
    };
    let mut traced: Vec<_> = raw
        .chunks_exact(16)
        .map(|r| {
            let instruction = u64::from(u32::from_le_bytes(r[8..12].try_into().unwrap()));
            let space = ((u32::from_le_bytes(r[12..16].try_into().unwrap()) >> 7) & 3) as u8;
            (instruction, space, place(&device, space, u64::from_le_bytes(r[..8].try_into().unwrap())))
        })
        .collect();
    let mut accessed: Vec<_> = report
        .accesses
        .iter()
        .filter(|a| selected.contains(&a.address))
        .map(|a| (a.address, a.space.code(), place(&original, a.space.code(), a.memory)))
        .collect();
    traced.sort();
    accessed.sort();
    assert!(!accessed.is_empty(), "{name}: memory accesses");
    assert_eq!(traced, accessed, "{name}: traced (instruction, space, address)");
    // The largest LDS of a GFX9 workgroup (gfx950's 160 KiB).
    let lds_bytes = 160 << 10;
    for (_, space, place) in &traced {
        match (space, place) {
            (&LDS, Some((_, _, address))) => assert!(*address < lds_bytes, "{name}: LDS address {address:#x}"),
            (_, Some((owner, _, _))) => {
                assert!(readable.contains(&owner.as_str()), "{name}: traced address in {owner}")
            }
            (_, None) => panic!("{name}: a traced address in no allocation"),
        }
    }
}

/// The memory-efficiency tool: its records, summed per instruction (wave
/// executions, lanes, lines or LDS cycles used and ideal), are what the
/// model (tests/src/memory_efficiency.rs) computes from the emulator's log
/// of the original's accesses.
fn check_memory_efficiency(app: &CodeObject, output: &CodeObject, plan: &Plan, case: &Case) {
    use gpuinstr_tests::memory_efficiency::{model, Efficiency, LaneAccess};
    let name = format!("{} {}", app.target.processor, case.kernel);
    let capacity = 1usize << 18;
    let lifted = lift(app).unwrap();
    let ring = RingSetUp { global: "Efficiency", capacity: capacity as u64, record_bytes: 16, when_full: RING_WAIT };
    let recording = Options { accesses: true, ..Options::default() };
    let Runs { report, instrumented: device, cells, .. } =
        run_both_with_rings(app, output, case, &[], &[ring], recording);
    // Site k is the plan's k-th point.
    let sites: Vec<u64> = plan
        .select(&lifted)
        .iter()
        .map(|point| lifted.functions[point.function].instructions().nth(point.instruction).unwrap().address)
        .collect();
    let count = u64s(&device, cells[0], 1)[0] as usize;
    assert!(count <= capacity, "{name}: {count} records");
    let raw = device.memory.bytes(cells[0] + RING_HEAD_BYTES, count * 16).unwrap();
    let mut measured: std::collections::BTreeMap<u64, Efficiency> = std::collections::BTreeMap::new();
    for r in raw.chunks_exact(16) {
        let site = u32::from_le_bytes(r[..4].try_into().unwrap()) as usize;
        *measured.entry(sites[site]).or_default() += Efficiency {
            executions: 1,
            lanes: if r[12] == 0 { 64 } else { u64::from(r[12]) },
            used: u64::from(u16::from_le_bytes(r[8..10].try_into().unwrap())),
            ideal: u64::from(u16::from_le_bytes(r[10..12].try_into().unwrap())),
        };
    }
    let selected: std::collections::HashSet<u64> = sites.iter().copied().collect();
    let accesses: Vec<LaneAccess> = report
        .accesses
        .iter()
        .filter(|a| selected.contains(&a.address))
        .map(|a| LaneAccess {
            instruction: a.address,
            wave: u64::from(a.wave),
            step: a.step,
            lane: u64::from(a.lane),
            memory: a.memory,
            space: a.space.code(),
            bytes: u64::from(a.bytes),
        })
        .collect();
    let expected = model(&accesses);
    assert!(!expected.is_empty(), "{name}: memory accesses");
    assert_eq!(measured, expected, "{name}: per instruction (executions, lanes, used, ideal)");
}

/// tests/inputs/kernels/neighbours.hip's `stencil` over `n` of `groups`
/// workgroups of 64, reading `inputs` floats (at least `4 * n + 5`).
fn stencil_case(groups: u32, inputs: usize, n: i32) -> Case {
    Case {
        kernel: "_Z7stencilPfPKfii",
        launch: Launch::linear(groups, 64),
        arguments: vec![
            Argument::Buffer(words(vec![0; groups as usize * 64])),
            Argument::Buffer((0..inputs).flat_map(|i| (i as f32).to_le_bytes()).collect()),
            Argument::Value(n.to_le_bytes().to_vec()),
            Argument::Value(2i32.to_le_bytes().to_vec()),
        ],
    }
}

/// A ring of 64 records that nobody empties (the standalone emulator has no
/// runtime), in a run that drops records of full rings: the wavefronts
/// whose records fit reserve them and write them whole, every other
/// append is counted in `Dropped` and returns at once (a wait would never
/// end here), and reserved plus dropped is every lane access of the
/// instructions traced. A compiler that changed what the drop path means
/// would fail here on its toolchain.
#[test]
fn the_memory_tracer_drops_what_a_full_ring_cannot_take_and_counts_it() {
    let dir = scratch();
    let tool = example_tool("memory-tracer", dir.path());
    let plan = example_plan("memory-tracer");
    let case = stencil_case(4, 1024, 200);
    for target in ["gfx90a", "gfx908"] {
        let name = format!("{target} {}", case.kernel);
        let app = load::load_for_target(&test_kernels("neighbours"), Some(target)).unwrap().code_objects.remove(0);
        let (bytes, _) =
            instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &InstrumentOptions::default())
                .unwrap();
        let output = CodeObject::parse(bytes, Vec::new()).unwrap();
        let capacity = 64;
        let ring = RingSetUp { global: "Trace", capacity, record_bytes: 16, when_full: RING_DROP };
        let recording = Options { accesses: true, ..Options::default() };
        let Runs { report, original, instrumented: device, cells, .. } =
            run_both_with_rings(&app, &output, &case, &[], &[ring], recording);
        let lifted = lift(&app).unwrap();
        let mut expected = 0;
        for point in plan.select(&lifted) {
            let instruction = lifted.functions[point.function].instructions().nth(point.instruction).unwrap();
            expected += report.counts.per_address.get(&instruction.address).map_or(0, |(_, lanes)| *lanes);
        }
        let reserved = device.memory.read_u64(cells[0]).unwrap();
        let dropped = device.memory.read_u64(cells[0] + RING_DROPPED).unwrap();
        assert!(expected > 2 * capacity, "{name}: {expected} accesses, more than the ring holds");
        assert!(reserved <= capacity, "{name}: {reserved} records reserved in a ring of {capacity}");
        assert!(reserved > 0 && dropped > 0, "{name}: {reserved} reserved, {dropped} dropped");
        assert_eq!(reserved + dropped, expected, "{name}: every access reserved or counted as dropped");
        let records = cells[0] + RING_HEAD_BYTES;
        let sequences = u64s(&device, records + capacity * 16, reserved as usize);
        assert!(sequences.iter().enumerate().all(|(k, s)| *s == k as u64 + 1), "{name}: the kept records complete");
        // Each kept record is an access the original made (instruction,
        // and the place: buffer and offset).
        let accessed: std::collections::HashSet<_> =
            report.accesses.iter().map(|a| (a.address, place_of(&original, a.memory))).collect();
        let raw = device.memory.bytes(records, reserved as usize * 16).unwrap();
        for record in raw.chunks_exact(16) {
            let instruction = u64::from(u32::from_le_bytes(record[8..12].try_into().unwrap()));
            let address = u64::from_le_bytes(record[..8].try_into().unwrap());
            assert!(report.accesses.iter().any(|a| a.address == instruction), "{name}: a record of {instruction:#x}");
            assert!(
                accessed.contains(&(instruction, place_of(&device, address))),
                "{name}: a kept record ({instruction:#x}, {address:#x}) the original did not access"
            );
        }
    }
}

/// Loads from one base register at different immediate offsets share a
/// payload that reads its offset as a point constant: each record must
/// still carry its own load's address.
#[test]
fn the_memory_tracer_traces_each_offset_of_a_shared_payload() {
    let dir = scratch();
    let tool = example_tool("memory-tracer", dir.path());
    let plan = example_plan("memory-tracer");
    let case = stencil_case(2, 514, 100);
    for target in ["gfx90a", "gfx908"] {
        let app = load::load_for_target(&test_kernels("neighbours"), Some(target)).unwrap().code_objects.remove(0);
        // The fact under test: two points read one base register at different offsets.
        let lifted = lift(&app).unwrap();
        let mut offsets = std::collections::BTreeMap::<String, Vec<i64>>::new();
        for point in plan.select(&lifted) {
            for argument in &point.calls[0].arguments {
                if let HookArgument::MemoryAddress { base, index, offset } = argument {
                    offsets.entry(format!("{base} {index:?}")).or_default().push(*offset);
                }
            }
        }
        assert!(
            offsets.values().any(|o| o.len() > 1 && o.iter().any(|x| *x != o[0]) && o.iter().any(|x| *x < 0)),
            "{target}: {offsets:?}"
        );
        let options = InstrumentOptions { grow_registers: RegisterGrowth::Always, ..InstrumentOptions::default() };
        let (bytes, report) = instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &options).unwrap();
        assert!(report.payloads_compiled < report.points, "{target}: {} payloads", report.payloads_compiled);
        let output = CodeObject::parse(bytes, Vec::new()).unwrap();
        check_memory_tracer(&app, &output, &plan, &case, &["buffer"]);
    }
}

/// A code object instrumented a group of kernels at a time (here each
/// kernel its own group; Tensile's code objects are split so,
/// driver/src/pipeline/pieces.rs) runs as the one instrumented whole does:
/// every example tool reports what the emulator saw in each kernel,
/// `verify` proves the output, and its sites and points are the whole
/// one's, in the same order (the memory tools' hooks are given the sites'
/// numbers, which count on from group to group). Kernels that reach data
/// by pc-relative address cannot be parts of their own: their code object
/// is instrumented whole, and the report says why.
#[test]
fn every_example_tool_on_a_code_object_instrumented_a_group_at_a_time() {
    use gpuinstr::instrument::Grouping;
    use gpuinstr::stages::load::instrumented::{point_table, site_table};
    let dir = scratch();
    let app = load::load_for_target(&test_kernels("control_flow"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let reaching = load::load_for_target(&test_kernels("memory"), Some("gfx90a")).unwrap().code_objects.remove(0);
    for example in EXAMPLE_TOOLS {
        let tool = example_tool_for(example, dir.path(), &app);
        let plan = example_plan(example);
        let instrument = |app: &CodeObject, group_bytes: u64| {
            let options = InstrumentOptions { group_bytes, ..InstrumentOptions::default() };
            let (bytes, report) = instrument_code_object(&tool, app, &plan, &Registry::with_builtins(), &options)
                .unwrap_or_else(|e| panic!("{example}: {e}"));
            assert!(report.left_out.is_empty(), "{example}: {:?}", report.left_out);
            (CodeObject::parse(bytes, Vec::new()).unwrap(), report)
        };
        let (whole, whole_report) = instrument(&app, 0);
        let (output, report) = instrument(&app, 1);
        assert_eq!(whole_report.grouping, Grouping::Whole, "{example}");
        assert_eq!(report.grouping, Grouping::Groups(2), "{example}");
        assert_eq!(report.points, whole_report.points, "{example}");
        let names =
            |r: &gpuinstr::instrument::InstrumentReport| r.kernels.iter().map(|k| k.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&report), names(&whole_report), "{example}");
        let verified = gpuinstr::verify::verify(&app, &output).unwrap();
        assert!(verified.ok(), "{example}: {}", verified.render_text());
        let originals = |o: &CodeObject| site_table(o).unwrap().iter().map(|s| s.original).collect::<Vec<_>>();
        assert_eq!(originals(&output), originals(&whole), "{example}: the sites");
        assert_eq!(point_table(&output).unwrap(), point_table(&whole).unwrap(), "{example}: the points");
        for case in control_flow_cases() {
            match example {
                // (The count, not its cost: three work-groups of
                // divergentBranches cost 1.84x whole or in groups.)
                "block-counter" => _ = block_counter_counts(&app, &output, &case),
                _ => _ = check_example(example, &app, &output, &plan, &case, &["buffer"]),
            }
        }
        let (_, report) = instrument(&reaching, 1);
        assert!(
            matches!(&report.grouping, Grouping::WholeBecause(why) if why.contains("reaches")),
            "{example}: {:?}",
            report.grouping
        );
    }
}

/// Groups of kernels share what llc compiled (driver/src/stages/payloads/
/// shared.rs): of two kernels alike but for their names and constants,
/// each its own group, the second takes the counter's payloads the first
/// compiled, so no more are compiled than for the whole code object, and
/// the output verifies with the whole one's points.
#[test]
fn a_group_of_kernels_takes_the_payloads_another_group_compiled() {
    use gpuinstr::instrument::Grouping;
    use gpuinstr::stages::load::instrumented::point_table;
    let dir = scratch();
    let app = load::load_for_target(&test_kernels("twins"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let tool = example_tool_for("instruction-counter", dir.path(), &app);
    let plan = example_plan("instruction-counter");
    let instrument = |group_bytes: u64| {
        let options = InstrumentOptions { group_bytes, ..InstrumentOptions::default() };
        let (bytes, report) = instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &options).unwrap();
        assert!(report.left_out.is_empty(), "{:?}", report.left_out);
        (CodeObject::parse(bytes, Vec::new()).unwrap(), report)
    };
    let (whole, whole_report) = instrument(0);
    let (output, report) = instrument(1);
    assert_eq!(report.grouping, Grouping::Groups(2));
    let taken: usize = report.compilations.iter().filter(|c| c.shared).map(|c| c.payloads).sum();
    assert!(taken > 0, "nothing taken: {:?}", report.compilations);
    assert_eq!(report.payloads_compiled, whole_report.payloads_compiled, "{:?}", report.compilations);
    let verified = gpuinstr::verify::verify(&app, &output).unwrap();
    assert!(verified.ok(), "{}", verified.render_text());
    assert_eq!(point_table(&output).unwrap(), point_table(&whole).unwrap());
}

#[test]
fn the_instruction_counter_counts_what_the_emulator_ran() {
    let (plan, pairs) = instrumented_control_flow("instruction-counter");
    for (app, output) in &pairs {
        for case in control_flow_cases() {
            check_instruction_counter(app, output, &plan, &case);
        }
    }
}

/// LLVM's AMDGPU atomic optimizer (on by default from LLVM 17) rewrites the
/// counter's `atomicAdd(Counter, 1)` into a wave-wide sum over the lanes
/// EXEC had before the hook narrowed it to one (`gpuinstr::writeExec`,
/// which LLVM does not see): the count comes out wrong while `verify`
/// passes. Payload codegen turns it off; here it is turned on (it exists
/// on LLVM 15 too, off by default) to show the guard is what keeps the
/// count right on every toolchain.
#[test]
fn the_atomic_optimizer_would_change_what_the_counter_counts() {
    let dir = scratch();
    let tool = example_tool("instruction-counter", dir.path());
    let plan = example_plan("instruction-counter");
    let app = load::load_for_target(&test_kernels("control_flow"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let case = control_flow_cases().remove(0);
    for optimizer in [false, true] {
        let mut options = InstrumentOptions { grow_registers: RegisterGrowth::Always, ..InstrumentOptions::default() };
        options.payloads.atomic_optimizer = optimizer;
        let (bytes, report) = instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &options).unwrap();
        assert!(report.left_out.is_empty(), "{:?}", report.left_out);
        let output = CodeObject::parse(bytes, Vec::new()).unwrap();
        assert!(gpuinstr::verify::verify(&app, &output).unwrap().ok(), "verify passes either way");
        let Runs { report, instrumented: device, cells, .. } =
            run_both(&app, &output, &case, &[("Counter", 8)], Options::default());
        let counted = device.memory.read_u64(cells[0]).unwrap();
        let expected = expected_count(&app, &plan, &report);
        if optimizer {
            assert!(counted > expected, "the optimizer counted {counted}, the emulator ran {expected}");
        } else {
            assert_eq!(counted, expected, "with the guard the counter counts what ran");
        }
    }
}

#[test]
fn the_kernel_argument_tool_reads_the_launch_shape() {
    let (_, pairs) = instrumented_control_flow("kernel-arguments");
    for (app, output) in &pairs {
        let mut case = control_flow_cases().remove(0);
        // A two-dimensional launch: 3x2 workgroups of 64x2 work-items.
        case.launch = Launch::whole([3, 2, 1], [64, 2, 1]);
        check_kernel_arguments(app, output, &case);
    }
}

/// From code object v5 (clang 17's default; v6 from clang 21) a kernel that
/// never reads its launch shape declares no hidden arguments and the
/// runtime passes none; the instrumented kernel declares them (where clang
/// would have) and the hook reads the launch it ran with.
#[test]
fn the_kernel_argument_tool_reads_the_launch_shape_a_v5_kernel_never_declared() {
    let dir = scratch();
    let path = hip_object_with("kernels/control_flow.hip", &["-mcode-object-version=5"]);
    for target in ["gfx90a", "gfx908"] {
        let app = load::load_for_target(&path, Some(target)).unwrap().code_objects.remove(0);
        assert_eq!(app.code_object_version, 5);
        let mut case = control_flow_cases().remove(1);
        let kernel = app.kernels.iter().find(|k| k.name() == case.kernel).unwrap();
        assert!(
            !kernel.metadata.arguments.iter().any(|a| a.is_hidden()),
            "{target}: {} reads no launch shape",
            case.kernel
        );
        let tool = example_tool_for("kernel-arguments", dir.path(), &app);
        let plan = example_plan_for("kernel-arguments", case.kernel);
        let options = InstrumentOptions::default();
        let (bytes, report) = instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &options).unwrap();
        let declared = &report.hidden_arguments_declared;
        assert_eq!(declared.len(), 1, "{target}: {declared:?}");
        assert_eq!((declared[0].offset, declared[0].kernarg_segment_size), (24, (24, 280)), "{target}");
        assert!(report.render_text().contains("hidden arguments declared in 1 kernels"), "{}", report.render_text());
        let output = CodeObject::parse(bytes, Vec::new()).unwrap();
        let copy = output.kernels.iter().find(|k| k.name() == case.kernel).unwrap();
        assert_eq!((copy.metadata.kernarg_segment_size, copy.descriptor.kernarg_size), (280, 280), "{target}");
        let verified = gpuinstr::verify::verify(&app, &output).unwrap();
        assert!(verified.ok(), "{target}: {}", verified.render_text());
        case.launch = Launch::whole([3, 2, 1], [64, 2, 1]);
        check_kernel_arguments(&app, &output, &case);
    }
}

#[test]
fn the_opcode_histogram_counts_every_executed_instruction() {
    let (_, pairs) = instrumented_control_flow("opcode-histogram");
    for (app, output) in &pairs {
        for case in control_flow_cases() {
            check_opcode_histogram(app, output, &case);
        }
    }
}

#[test]
fn the_branch_divergence_tool_records_the_exec_history() {
    let (_, pairs) = instrumented_control_flow("branch-divergence");
    for (app, output) in &pairs {
        let divergent = check_branch_divergence(app, output, &control_flow_cases().remove(0));
        assert!(divergent > 0, "{}: the inputs make some wave diverge", app.target.processor);
    }
}

#[test]
fn the_memory_tracer_traces_every_lane_access() {
    let (plan, pairs) = instrumented_control_flow("memory-tracer");
    for (app, output) in &pairs {
        for case in control_flow_cases() {
            check_memory_tracer(app, output, &plan, &case, &["buffer"]);
        }
    }
}

/// A hook that needs stack (a per-lane table indexed by a run-time value)
/// runs on the instrumentation stack the preamble sets up: the scratch V#
/// in s[0:3] and the wave's offset up to gfx90a, FLAT_SCRATCH as the
/// hardware sets it from gfx940. Every work-item adds one to the bin its
/// table names, and the application's memory is what the original left.
#[test]
fn a_hook_with_a_stack_frame_counts_every_work_item_on_every_target() {
    let dir = scratch();
    let (tool, plan) = stack_hook(dir.path());
    let object = object_for_every_target("kernels/control_flow.hip");
    for target in every_target() {
        let app = load::load_for_target(&object, Some(target)).unwrap().code_objects.remove(0);
        let output = instrumented_verified(&tool, &app, &plan);
        for (before, after) in app.kernels.iter().zip(&output.kernels) {
            let (old, new) = (&before.descriptor, &after.descriptor);
            assert!(new.private_segment_fixed_size > old.private_segment_fixed_size, "{target}: the stack grows");
            assert_eq!(new.rsrc2("ENABLE_PRIVATE_SEGMENT"), 1, "{target}");
            // Architected flat scratch has no private segment buffer.
            let architected = output.target.has_architected_flat_scratch();
            assert_eq!(new.property("ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER"), u32::from(!architected), "{target}");
        }
        for case in control_flow_cases() {
            check_stack_histogram(&app, &output, &case);
        }
    }
}

/// payload-hooks' `histogram` (a per-lane table: it needs stack) and a plan
/// putting it at every kernel's entry with v0, which holds threadIdx.x at
/// the entry of a one-dimensional launch, packed or not.
fn stack_hook(dir: &std::path::Path) -> (CodeObject, Plan) {
    let tool_path = dir.join("payload-hooks.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &input("tools/payload-hooks.hip"), "-O3", &tool_path));
    let tool = load::load(&tool_path).unwrap().code_objects.remove(0);
    let plan = Plan::parse(
        "[[insert]]\nhook = \"histogram\"\nwhere = \"kernel-entry\"\nargs = [{ reg = \"v0\" }]\n",
        "stack.toml",
    )
    .unwrap();
    (tool, plan)
}

/// payload-hooks' `histogram` at the kernel entry with v0 (threadIdx.x of a
/// one-dimensional launch): every work-item adds one to bin
/// `(x * (x % 24) + x) & 63`, and the application's memory is unchanged.
fn check_stack_histogram(app: &CodeObject, output: &CodeObject, case: &Case) {
    let name = format!("{} {}", app.target.processor, case.kernel);
    let Runs { instrumented: device, .. } = run_both(app, output, case, &[], Options::default());
    let address = device.symbol_address("Histogram").unwrap_or_else(|| panic!("{name}: no Histogram"));
    let bytes = device.memory.bytes(address, 64 * 4).unwrap();
    let bins: Vec<u32> = bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    let mut expected = vec![0u32; 64];
    let [groups, _, _] = case.launch.workgroups;
    let [size, _, _] = case.launch.workgroup_size;
    for x in (0..groups).flat_map(|_| 0..size) {
        expected[((x * (x % 24) + x) & 63) as usize] += 1;
    }
    assert_eq!(bins, expected, "{name}: Histogram");
}

/// Generic targets (code object v6, LLVM 19+: sid's hipcc builds them)
/// run on every processor of their family, and are instrumented with what
/// those share: gfx9-generic as gfx900's register files, gfx9-4-generic as
/// gfx940's (architected flat scratch). The counter and a hook with a stack
/// frame report what the emulator ran.
#[test]
fn generic_targets_are_instrumented_like_the_processors_they_stand_for() {
    if gpuinstr::toolchain::LLVM_MAJOR < 21 {
        return; // no hipcc in the other environments builds generic targets
    }
    let dir = scratch();
    let counter = example_tool("instruction-counter", dir.path());
    let counter_plan = example_plan("instruction-counter");
    let (hooks, stack_plan) = stack_hook(dir.path());
    let object =
        hip_object_with("kernels/control_flow.hip", &["--offload-arch=gfx9-generic", "--offload-arch=gfx9-4-generic"]);
    for target in ["gfx9-generic", "gfx9-4-generic"] {
        let app = load::load_for_target(&object, Some(target)).unwrap().code_objects.remove(0);
        assert_eq!((app.target.processor.as_str(), app.code_object_version), (target, 6));
        let output = instrumented_verified(&counter, &app, &counter_plan);
        for case in control_flow_cases() {
            check_instruction_counter(&app, &output, &counter_plan, &case);
        }
        let output = instrumented_verified(&hooks, &app, &stack_plan);
        let architected = target == "gfx9-4-generic";
        for kernel in &output.kernels {
            let d = &kernel.descriptor;
            assert_eq!(d.property("ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER"), u32::from(!architected), "{target}");
        }
        for case in control_flow_cases() {
            check_stack_histogram(&app, &output, &case);
        }
    }
}

/// A kernel nobody here wrote: rocSPARSE's csrmv (gfx90a:xnack-, from
/// Debian's package; rows of different lengths, a DPP wavefront reduction)
/// with every example tool: the same y, and each tool records what the
/// emulator saw the original do.
#[test]
fn every_example_tool_on_rocsparse_csrmv() {
    let (app, case) = csrmv();
    every_example_tool_on(&app, &case, &["buffer"]);
}

/// rocSPARSE's csrmv kernel (Debian's gfx90a code object) and a launch of
/// it: a 40 x 30 matrix in two workgroups of 512.
fn csrmv() -> (CodeObject, Case) {
    let kernel =
        "_ZL21csrmvn_general_kernelILj512ELj64EiidPKdEvbT2_T4_PKT1_PKS2_PKT3_SB_S3_PS9_21rocsparse_index_base_";
    let app = debian_code_object("librocsparse0", "librocsparse.so.0.1", kernel);
    // A 40 x 30 matrix, 0 to 5 entries per row; alpha and beta by pointer.
    let mut row_ptr = vec![0i32];
    let mut col_ind = Vec::new();
    for row in 0..40 {
        col_ind.extend((0..row % 6).map(|k| (row * 7 + k * 5) % 30));
        row_ptr.push(col_ind.len() as i32);
    }
    let doubles = |v: Vec<f64>| v.into_iter().flat_map(f64::to_le_bytes).collect::<Vec<u8>>();
    let case = Case {
        kernel,
        launch: Launch::linear(2, 512),
        arguments: vec![
            Argument::Value(vec![0]),
            Argument::Value(40i32.to_le_bytes().to_vec()),
            Argument::Buffer(doubles(vec![2.0])),
            Argument::Buffer(words(row_ptr.iter().copied())),
            Argument::Buffer(words(col_ind.iter().copied())),
            Argument::Buffer(doubles((0..col_ind.len()).map(|k| k as f64 * 0.5).collect())),
            Argument::Buffer(doubles((0..30).map(f64::from).collect())),
            Argument::Buffer(doubles(vec![0.25])),
            Argument::Buffer(doubles((0..40).map(|i| f64::from(i) - 3.0).collect())),
            Argument::Value(0i32.to_le_bytes().to_vec()),
        ],
    };
    (app, case)
}

/// Both ways of keeping the block counter's count in registers, per lane
/// (VGPRs) and per wave (`popcount(EXEC)` in SGPRs), count what the
/// emulator runs, on kernels that loop; the way chosen by default is the
/// one that runs fewer instructions there.
#[test]
fn the_block_counter_counts_the_same_per_lane_and_per_wave() {
    for (app, case) in [philox_half(), csrmv()] {
        let name = format!("{} {}", app.target.processor, case.kernel);
        let dir = scratch();
        let tool = example_tool_for("block-counter", dir.path(), &app);
        let plan = example_plan_for("block-counter", case.kernel);
        let mut instructions = Vec::new();
        for way in [CountWay::Lanes, CountWay::Wave, CountWay::Cheaper] {
            let options = InstrumentOptions {
                grow_registers: RegisterGrowth::Always,
                linker: linker_for(&app),
                count_way: way,
                ..InstrumentOptions::default()
            };
            let (bytes, report) =
                instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &options).unwrap();
            assert!(report.left_out.is_empty(), "{name}: {:?}", report.left_out);
            let counts = report.counts_in_registers.expect("the plan counts in registers");
            assert_eq!(counts.kernels, 1, "{name}: {:?}", counts.hooks_called);
            match way {
                CountWay::Lanes => assert_eq!(counts.kernels_per_wave, 0, "{name}"),
                CountWay::Wave => assert_eq!(counts.kernels_per_wave, 1, "{name}"),
                CountWay::Cheaper => {}
            }
            let output = CodeObject::parse(bytes, Vec::new()).unwrap();
            let Runs { report, instrumented_report, instrumented: device, cells, .. } =
                run_both(&app, &output, &case, &[("Counter", 8)], Options::default());
            let expected = expected_count(&app, &example_plan_for("instruction-counter", case.kernel), &report);
            assert_eq!(device.memory.read_u64(cells[0]).unwrap(), expected, "{name}: Counter counted {way:?}");
            instructions.push(instrumented_report.counts.instructions());
        }
        eprintln!(
            "{name}: per lane {}, per wave {}, chosen {} wave instructions",
            instructions[0], instructions[1], instructions[2]
        );
        assert_eq!(instructions[2], instructions[0].min(instructions[1]), "{name}: the cheaper way");
    }
}

/// rocRAND's XORWOW init kernel (Debian's gfx90a:xnack- code object): loops
/// over jump matrices read from the code object's constants with per-lane
/// trip counts (so waves diverge), the engine kept in LDS. Instrumented with
/// each example tool (only that kernel selected), it initialises the same
/// engines and every tool records what the emulator saw the original do.
#[test]
fn every_example_tool_on_rocrand_xorwow_init() {
    let kernel = "_ZN12rocrand_host6detailL19init_engines_kernelEPN14rocrand_device13xorwow_engineEjyy";
    let app = debian_code_object("librocrand1", "librocrand.so.1.1", kernel);
    let case = Case {
        kernel,
        launch: Launch::linear(2, 128),
        arguments: vec![
            Argument::Buffer(vec![0; 256 * 24]),
            Argument::Value(100u32.to_le_bytes().to_vec()),
            Argument::Value(0x0123_4567_89ab_cdefu64.to_le_bytes().to_vec()),
            Argument::Value(7u64.to_le_bytes().to_vec()),
        ],
    };
    every_example_tool_on(&app, &case, &["buffer", "code object"]);
}

/// Instruments `case.kernel` of `app` with each example tool in turn (only
/// that kernel selected) and checks each against the emulator's run of the
/// original; the memory tracer's addresses must lie in allocations named in
/// `readable`, and some wave must diverge.
fn every_example_tool_on(app: &CodeObject, case: &Case, readable: &[&str]) {
    every_example_tool_growing(app, case, readable, RegisterGrowth::Always, true);
}

/// The same, with registers growing as `grow` allows; `diverges`: whether
/// some wave must diverge (or none may).
fn every_example_tool_growing(app: &CodeObject, case: &Case, readable: &[&str], grow: RegisterGrowth, diverges: bool) {
    let dir = scratch();
    for example in EXAMPLE_TOOLS {
        let tool = example_tool_for(example, dir.path(), app);
        let plan = example_plan_for(example, case.kernel);
        let output = instrumented_growing(&tool, app, &plan, grow);
        let divergent = check_example(example, app, &output, &plan, case, readable);
        if example == "branch-divergence" {
            assert_eq!(divergent > 0, diverges, "some wave diverges");
        }
    }
}

/// The example's own check of one case; the waves that diverged for
/// branch divergence (0 for the others).
fn check_example(
    example: &str,
    app: &CodeObject,
    output: &CodeObject,
    plan: &Plan,
    case: &Case,
    readable: &[&str],
) -> u64 {
    match example {
        "instruction-counter" => check_instruction_counter(app, output, plan, case),
        "block-counter" => check_block_counter(app, output, case),
        "kernel-arguments" => check_kernel_arguments(app, output, case),
        "opcode-histogram" => check_opcode_histogram(app, output, case),
        "branch-divergence" => return check_branch_divergence(app, output, case),
        "memory-tracer" => check_memory_tracer(app, output, plan, case, readable),
        "memory-efficiency" => check_memory_efficiency(app, output, plan, case),
        other => panic!("no check for the example {other}"),
    }
    0
}

/// Kernels that preload their arguments into SGPRs (clang 18 on; gfx90a
/// and gfx940+): the hardware enters them 256 bytes in, past a prologue
/// that loads the arguments where firmware does not preload. Every example
/// tool and a hook with a stack frame report what the emulator ran there,
/// `verify` proves each output, and where the firmware does not preload
/// (the prologue runs, then the preamble) the application's memory is
/// still the original's.
#[test]
fn every_example_tool_on_kernels_that_preload_their_arguments() {
    if gpuinstr::toolchain::LLVM_MAJOR < 18 {
        return; // -amdgpu-kernarg-preload-count came with LLVM 18
    }
    let dir = scratch();
    let (hooks, stack_plan) = stack_hook(dir.path());
    let without_preloading = Options { firmware_preloads_arguments: false, ..Options::default() };
    for target in ["gfx90a", mi300(), "gfx950"] {
        let object = hip_object_with(
            "kernels/control_flow.hip",
            &[&format!("--offload-arch={target}"), "-mllvm", "-amdgpu-kernarg-preload-count=16"],
        );
        let app = load::load_for_target(&object, Some(target)).unwrap().code_objects.remove(0);
        assert!(app.kernels.iter().all(|k| k.descriptor.kernarg_preload_length() > 0), "{target}: preloads");
        let lifted = lift(&app).unwrap();
        assert!(lifted.functions.iter().filter(|f| f.is_kernel()).all(|f| f.entry > 0), "{target}: prologues");
        for example in EXAMPLE_TOOLS {
            let tool = example_tool_for(example, dir.path(), &app);
            let plan = example_plan(example);
            let options = InstrumentOptions { linker: linker_for(&app), ..InstrumentOptions::default() };
            let (_, report) = instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &options).unwrap();
            assert_eq!(report.preload_prologues.kernels, app.kernels.len(), "{target} {example}: said");
            assert!(report.render_text().contains("argument-preload prologues of"), "{target} {example}");
            let output = instrumented_verified(&tool, &app, &plan);
            for case in control_flow_cases() {
                match example {
                    // Preloaded, these kernels run so few instructions a
                    // wave that the count's entry and exit weigh more
                    // than the 1.5x the other tests hold it to.
                    "block-counter" => drop(block_counter_counts(&app, &output, &case)),
                    _ => drop(check_example(example, &app, &output, &plan, &case, &["buffer"])),
                }
                run_both(&app, &output, &case, &[], without_preloading.clone());
            }
        }
        let output = instrumented_verified(&hooks, &app, &stack_plan);
        for case in control_flow_cases() {
            check_stack_histogram(&app, &output, &case);
            run_both(&app, &output, &case, &[], without_preloading.clone());
        }
    }
}

/// A kernel that preloads arguments whose first 256 bytes are a library's
/// own argument loading, as Tensile writes hipBLASLt's: it loads more than
/// the preloaded dwords, decides, and jumps past the entry to where the
/// preloading path joins it. Instrumenting replaces it by loads of the
/// preloaded dwords and a jump to the (instrumented) entry: every example
/// tool reports what the emulator ran, `verify` proves each output and
/// finds a load of the wrong dwords, and where firmware does not preload
/// the application's memory is still the original's.
#[test]
fn every_example_tool_on_a_kernel_whose_preload_prologue_is_its_own_code() {
    let dir = scratch();
    let body = |back_into_prologue: &str| {
        format!(
            "\ts_load_dwordx4 s[24:27], s[0:1], 0x0\n\ts_load_dword s28, s[0:1], 0x10\n\ts_waitcnt lgkmcnt(0)\n\
             \ts_cmp_eq_u32 s28, 0\n\ts_cbranch_scc0 .Lscaled\n\ts_mov_b32 s28, 1\n.Lscaled:\n\ts_branch .Lcommon\n\
             \t.p2alignl 8, 0xbf800000\n\
             \ts_mov_b64 s[24:25], s[2:3]\n\ts_mov_b64 s[26:27], s[4:5]\n\ts_load_dword s28, s[0:1], 0x10\n\
             \ts_waitcnt lgkmcnt(0)\n\ts_cmp_eq_u32 s28, 0\n\ts_cselect_b32 s28, 1, s28\n{back_into_prologue}\
             .Lcommon:\n\ts_lshl_b32 s29, s6, 8\n\tv_lshlrev_b32_e32 v1, 2, v0\n\tv_add_u32_e32 v1, s29, v1\n\
             \tglobal_load_dword v2, v1, s[24:25]\n\ts_waitcnt vmcnt(0)\n\tv_mul_lo_u32 v2, v2, s28\n\
             \tv_cmp_gt_u32_e32 vcc, 17, v0\n\ts_and_saveexec_b64 s[30:31], vcc\n\ts_cbranch_execz .Ljoin\n\
             \tv_add_u32_e32 v2, 1000, v2\n.Ljoin:\n\ts_or_b64 exec, exec, s[30:31]\n\
             \tglobal_store_dword v1, v2, s[26:27]\n\ts_waitcnt vmcnt(0)"
        )
    };
    let kernel = |body: String| AssemblyKernel {
        name: "library_prologue".into(),
        body,
        arguments: vec![("in", 8), ("out", 8), ("scale", 4)],
        group_segment: 0,
        private_segment: 0,
    };
    // Preloaded: the two pointers (s[2:5]); the workgroup id follows in s6.
    let app = with_preloaded_arguments(&kernels_from_assembly("gfx90a", &[kernel(body(""))]), 4);
    let lifted = lift(&app).unwrap();
    let function = &lifted.functions[0];
    assert_eq!(function.preload_prologue, PreloadPrologue::Library, "{:?}", function.problems);
    assert!(function.relocatable() && function.entry > 0, "{:?}", function.problems);
    drop(lifted);
    let case = Case {
        kernel: "library_prologue",
        launch: Launch::linear(2, 64),
        arguments: vec![
            Argument::Buffer(words((0..128).map(|i| i * 7 - 300))),
            Argument::Buffer(words([0; 128])),
            Argument::Value(3i32.to_le_bytes().to_vec()),
        ],
    };
    let without_preloading = Options { firmware_preloads_arguments: false, ..Options::default() };
    // The test's kernel does the same on both paths.
    let mut preloading = Device::new(app.clone(), "preloading".into()).unwrap();
    let mut loading = Device::new(app.clone(), "loading".into()).unwrap();
    loading.options = without_preloading.clone();
    let (preloaded, ran) = run_case(&mut preloading, &case);
    let entry = app.kernels[0].code_address + PRELOAD_PROLOGUE_BYTES;
    assert!(ran.counts.per_address.contains_key(&entry), "entered 256 bytes in");
    assert_eq!(run_case(&mut loading, &case).0, preloaded, "both paths");
    for example in EXAMPLE_TOOLS {
        let tool = example_tool_for(example, dir.path(), &app);
        let plan = example_plan(example);
        let options = InstrumentOptions { linker: linker_for(&app), ..InstrumentOptions::default() };
        let (_, report) = instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &options).unwrap();
        assert_eq!((report.preload_prologues.kernels, report.preload_prologues.replaced), (1, 1), "{example}");
        assert!(report.render_text().contains("were a library's own code, replaced by loads"), "{example}");
        let output = instrumented_verified(&tool, &app, &plan);
        let lifted = lift(&output).unwrap();
        assert_eq!(lifted.functions[0].preload_prologue, PreloadPrologue::Loads, "{example}");
        match example {
            // As short a kernel as the preloading ones above.
            "block-counter" => drop(block_counter_counts(&app, &output, &case)),
            _ => drop(check_example(example, &app, &output, &plan, &case, &["buffer"])),
        }
        run_both(&app, &output, &case, &[], without_preloading.clone());
        if example == "instruction-counter" {
            // The prologue's first load is `s_load_dwordx2 s[2:3], s[0:1],
            // 0x0`; loading from byte 8 instead is found.
            let code = output.kernels[0].code_address;
            let section = output.section_containing(code).unwrap();
            let mut bytes = output.bytes.clone();
            let at = (section.offset + code - section.address) as usize;
            assert_eq!(bytes[at + 4..at + 8], [0, 0, 0, 0]);
            bytes[at + 4] = 8;
            let broken = CodeObject::parse(bytes, Vec::new()).unwrap();
            let verified = gpuinstr::verify::verify(&app, &broken).unwrap();
            assert!(
                verified.render_text().contains("s[2:3] from byte 8, s[4:5] from byte 8"),
                "{}",
                verified.render_text()
            );
            assert!(verified
                .render_text()
                .contains("firmware that preloads puts s[2:3] from byte 0, s[4:5] from byte 8"));
        }
    }
    // Code past the entry that branches back into the prologue: that code
    // runs on every firmware, so it is not the library's to replace.
    let app =
        with_preloaded_arguments(&kernels_from_assembly("gfx90a", &[kernel(body("\ts_cbranch_scc1 .Lscaled\n"))]), 4);
    let lifted = lift(&app).unwrap();
    let problem = lifted.functions[0].problems.iter().find(|p| p.kind == ProblemKind::NoPreloadEntry);
    assert!(
        problem.is_some_and(|p| p.detail.contains("code of its own that the code past them comes back to")),
        "{:?}",
        lifted.functions[0].problems
    );
}

/// A kernel whose user SGPRs are all taken (its argument pointer and 14
/// preloaded dwords, as hipBLASLt's bigger kernels): hooks that need more
/// inputs (kernel arguments reads the dispatch pointer, a payload's stack
/// the scratch resource) get them by preloading fewer dwords, which the
/// preamble loads where the kernel expects them. Every example tool
/// reports what the emulator ran, `verify` proves each output (the
/// preamble's loads read the dwords the kernel had), and where firmware
/// does not preload, memory is the original's.
#[test]
fn a_kernel_whose_user_sgprs_are_all_taken_gives_preloaded_dwords_up() {
    let body = "\ts_load_dwordx4 s[24:27], s[0:1], 0x0\n\ts_load_dword s33, s[0:1], 0x34\n\ts_waitcnt lgkmcnt(0)\n\
                \ts_branch .Lcommon\n\t.p2alignl 8, 0xbf800000\n\
                \ts_mov_b64 s[24:25], s[2:3]\n\ts_mov_b64 s[26:27], s[4:5]\n\ts_mov_b32 s33, s15\n\
                .Lcommon:\n\ts_lshl_b32 s29, s16, 8\n\tv_lshlrev_b32_e32 v1, 2, v0\n\tv_add_u32_e32 v1, s29, v1\n\
                \tglobal_load_dword v2, v1, s[24:25]\n\ts_waitcnt vmcnt(0)\n\tv_add_u32_e32 v2, s33, v2\n\
                \tv_cmp_gt_u32_e32 vcc, 17, v0\n\ts_and_saveexec_b64 s[30:31], vcc\n\ts_cbranch_execz .Ljoin\n\
                \tv_add_u32_e32 v2, 1000, v2\n.Ljoin:\n\ts_or_b64 exec, exec, s[30:31]\n\
                \tglobal_store_dword v1, v2, s[26:27]\n\ts_waitcnt vmcnt(0)";
    let pads: Vec<(&'static str, u64)> = ["p0", "p1", "p2", "p3", "p4", "p5"].into_iter().map(|p| (p, 8)).collect();
    let kernel = AssemblyKernel {
        name: "all_taken".into(),
        body: body.into(),
        arguments: [vec![("in", 8), ("out", 8)], pads].concat(),
        group_segment: 0,
        private_segment: 0,
    };
    // s[0:1] and s[2:15] preloaded: 16 user SGPRs; the workgroup id in s16.
    let app = with_preloaded_arguments(&kernels_from_assembly("gfx90a", &[kernel]), 14);
    let mut arguments = vec![Argument::Buffer(words((0..128).map(|i| i * 7 - 300))), Argument::Buffer(words([0; 128]))];
    arguments.extend((0..6u64).map(|p| Argument::Value((0x1111_0000_0000_0005 * (p + 1)).to_le_bytes().to_vec())));
    let case = Case { kernel: "all_taken", launch: Launch::linear(2, 64), arguments };
    let without_preloading = Options { firmware_preloads_arguments: false, ..Options::default() };
    let mut loading = Device::new(app.clone(), "loading".into()).unwrap();
    loading.options = without_preloading.clone();
    let mut preloading = Device::new(app.clone(), "preloading".into()).unwrap();
    assert_eq!(run_case(&mut loading, &case).0, run_case(&mut preloading, &case).0, "both paths");
    let dir = scratch();
    let mut given_up = Vec::new();
    for example in EXAMPLE_TOOLS {
        let tool = example_tool_for(example, dir.path(), &app);
        let plan = example_plan(example);
        let output = instrumented_verified(&tool, &app, &plan);
        // (Which hooks need more inputs depends on the compiler: Debian
        // 12's kernel-arguments reads the dispatch pointer, clang 21's the
        // hidden arguments; a payload's stack needs the scratch resource.)
        let preloaded = output.kernels[0].descriptor.kernarg_preload_length();
        if preloaded < 14 {
            given_up.push((example, preloaded));
        }
        match example {
            "block-counter" => drop(block_counter_counts(&app, &output, &case)),
            _ => drop(check_example(example, &app, &output, &plan, &case, &["buffer"])),
        }
        run_both(&app, &output, &case, &[], without_preloading.clone());
    }
    // A hook with a stack frame needs the scratch resource's 4 SGPRs on
    // every toolchain: 4 dwords fewer preloaded.
    let (hooks, stack_plan) = stack_hook(dir.path());
    let output = instrumented_verified(&hooks, &app, &stack_plan);
    assert_eq!(output.kernels[0].descriptor.kernarg_preload_length(), 10);
    check_stack_histogram(&app, &output, &case);
    run_both(&app, &output, &case, &[], without_preloading);
    eprintln!("example tools that gave preloaded dwords up: {given_up:?}");
}

/// rocRAND's Philox half uniform kernel (SDWA word selects, packed f32
/// FMAs, a partial last vector) with every example tool. Its stores use
/// `offset:-8`, which LLVM 15 decodes as the raw 13-bit field: the memory
/// tracer must still report the addresses the lanes access.
#[test]
fn every_example_tool_on_rocrand_philox_half() {
    let (app, case) = philox_half();
    every_example_tool_on(&app, &case, &["buffer"]);
}

/// rocRAND's Philox half uniform kernel (Debian's gfx90a:xnack- code
/// object) and a launch of it: 1,003 halves from two waves.
fn philox_half() -> (CodeObject, Case) {
    let kernel = "_ZN12rocrand_host6detailL15generate_kernelI6__half20uniform_distributionIS2_EEEvNS0_27philox4x32_10_device_engineEPT_mT0_";
    let app = debian_code_object("librocrand1", "librocrand.so.1.1", kernel);
    let mut engine = vec![0u8; 48];
    engine[32..40].copy_from_slice(&0x1357_9bdf_0bad_5eedu64.to_le_bytes());
    let n = 1003u64;
    let case = Case {
        kernel,
        launch: Launch::linear(2, 64),
        arguments: vec![
            Argument::Value(engine),
            Argument::Buffer(vec![0; n as usize * 2]),
            Argument::Value(n.to_le_bytes().to_vec()),
            Argument::Value(vec![0]),
        ],
    };
    (app, case)
}

/// Stage sva places `kernel`'s SVA (and the work-item ids when asked) by
/// sliding; the tracks pass their independent check.
fn assert_slides(app: &CodeObject, kernel: &str, work_item_ids: bool, grow: bool) -> Sliding {
    let lifted = lift(app).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let function = lifted.functions.iter().position(|f| f.name == kernel).unwrap();
    let grow = if grow { RegisterGrowth::Always } else { RegisterGrowth::Never };
    let request = SvaRequest { instrumented: [function].into(), work_item_ids, grow };
    let placement = place(&lifted, &liveness, &request);
    let placed = placement.kernels.iter().find(|k| k.kernel == function).unwrap();
    assert!(matches!(placed.sva, Some(Home::Sliding(_))), "{kernel}: {placed:?}");
    if work_item_ids {
        assert!(matches!(placed.work_item_ids, Some(Home::Sliding(_))), "{kernel}: {placed:?}");
    }
    let slid = placement.sliding[&function].clone();
    slid.check(&lifted.functions[function], &liveness.functions[function]).unwrap();
    slid
}

/// A kernel whose inline assembly writes every VGPR and every AGPR
/// (tests/inputs/kernels/register_pressure.hip): no register is free for
/// the whole kernel, and the allocation cannot grow, so the SVA and the
/// work-item ids slide between VGPRs free where they are (stage sva). Run
/// with every example tool on gfx90a and gfx908, each tool still reads the
/// launch and the lanes right after the values have moved.
#[test]
fn every_example_tool_on_a_kernel_with_no_free_vector_register() {
    let kernel = "_Z19everyVectorRegisterPii";
    for target in ["gfx90a", "gfx908"] {
        let app =
            load::load_for_target(&test_kernels("register_pressure"), Some(target)).unwrap().code_objects.remove(0);
        let slid = assert_slides(&app, kernel, true, true);
        assert!(slid.work_item_ids.is_some(), "{target}");
        assert!(!slid.sva.moves.is_empty(), "{target}: the asm overwrites every VGPR, so the SVA must move");
        let case = Case {
            kernel,
            launch: Launch::linear(2, 256),
            arguments: vec![Argument::Buffer(words([0; 512])), Argument::Value(300i32.to_le_bytes().to_vec())],
        };
        every_example_tool_on(&app, &case, &["buffer"]);
    }
}

/// A kernel holding most of its VGPRs and every AGPR it allocates across
/// its memory instructions, as Tensile's GEMMs hold their MFMA
/// accumulators (tests/inputs/kernels/accumulators_live.hip; its outputs
/// add up every one of those registers). With default flags, every
/// example tool's payloads there park live VGPRs or fit the few dead ones,
/// and each tool reports what the emulator saw, the outputs unchanged.
#[test]
fn every_example_tool_where_the_accumulators_stay_live() {
    let kernel = "_Z16accumulatorsLivePiPKii";
    let n = 300i32;
    let case = Case {
        kernel,
        launch: Launch::linear(2, 256),
        arguments: vec![
            Argument::Buffer(words([0; 512])),
            Argument::Buffer(words(0..512)),
            Argument::Value(n.to_le_bytes().to_vec()),
        ],
    };
    for target in ["gfx90a", "gfx908"] {
        let app =
            load::load_for_target(&test_kernels("accumulators_live"), Some(target)).unwrap().code_objects.remove(0);
        let mut device = Device::new(app.clone(), target.into()).unwrap();
        let (memory, _) = run_case(&mut device, &case);
        // The registers' sum (v12-v127 hold their numbers, a0-a127 copies).
        let held: i32 = (12..128).sum::<i32>() + (0..128).map(|a| 12 + a % 116).sum::<i32>();
        let expected: Vec<i32> = (0..512)
            .map(|i| match i < n {
                true => {
                    let block = i / 256 * 256;
                    let neighbour = block + (i % 256 * 32) % 256;
                    let loaded = |j: i32| if j < n { j } else { 0 };
                    loaded(neighbour) + i + held
                }
                false => 0,
            })
            .collect();
        assert_eq!(memory[0], words(expected), "{target}: the original's results");
        every_example_tool_growing(&app, &case, &["buffer"], RegisterGrowth::FreeOfOccupancy, true);
    }
}

/// One wave of `kernel(out, in)` (the kernels that hold values across a
/// load): `in[lane] = 11 * lane`, and those inputs.
fn one_wave_loading(kernel: &'static str) -> (Case, Vec<i32>) {
    let input: Vec<i32> = (0..64).map(|lane| lane * 11).collect();
    let case = Case {
        kernel,
        launch: Launch::linear(1, 64),
        arguments: vec![Argument::Buffer(words([0; 64])), Argument::Buffer(words(input.iter().copied()))],
    };
    (case, input)
}

/// A kernel at the VGPR limit of a wave with AGPRs in use, as rocSPARSE's
/// csrmmnt_row_split_main_kernel (256 VGPRs, 16 AGPRs) is: across its
/// global load (tests/inputs/kernels/live_across_load.hip) 253 VGPRs and
/// all 16 AGPRs hold values, so the memory tracer's payload fits only if
/// the AGPR part of the allocation grows (VGPRs parked past it). With
/// `--grow-registers=always` it does, and every example tool reports what
/// the emulator saw (the AGPR part once stayed as it was, and rocSPARSE
/// with the memory tracer left 16 points out).
#[test]
fn every_example_tool_on_a_kernel_at_the_vgpr_limit_using_agprs() {
    let kernel = "_Z15liveAcrossALoadPiPKi";
    let (case, input) = one_wave_loading(kernel);
    // v2..v254 hold 7 * n; a0..a15 copies of v2..v17.
    let held: i32 = (2..255).map(|v| 7 * v).sum::<i32>() + (2..18).map(|v| 7 * v).sum::<i32>();
    for target in ["gfx90a", "gfx908"] {
        let app =
            load::load_for_target(&test_kernels("live_across_load"), Some(target)).unwrap().code_objects.remove(0);
        let mut device = Device::new(app.clone(), target.into()).unwrap();
        let (memory, _) = run_case(&mut device, &case);
        assert_eq!(
            memory[0],
            words(input.iter().enumerate().map(|(lane, x)| x + held + i32::from(lane % 3 == 0))),
            "{target}: the original's results"
        );
        let dir = scratch();
        let tool = example_tool("memory-tracer", dir.path());
        let plan = example_plan_for("memory-tracer", kernel);
        let options = InstrumentOptions { grow_registers: RegisterGrowth::Always, ..InstrumentOptions::default() };
        let (_, report) = instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &options).unwrap();
        assert!(report.left_out.is_empty(), "{target}: {:#?}", report.left_out);
        let patched = &report.kernels[0];
        assert!(patched.agprs.1 > patched.agprs.0, "{target}: the AGPR part grows: {patched:?}");
        // gfx908's AGPRs are a file of their own that always could grow.
        if target == "gfx90a" {
            every_example_tool_on(&app, &case, &["buffer"]);
        }
    }
}

/// A kernel at the VGPRs of its occupancy (tests/inputs/kernels/
/// live_at_the_limit.hip: 122 values held across a load, 128 VGPRs
/// allocated, no AGPRs, so none dead to park in), with the default growth
/// (free of occupancy cost: nothing may grow): the memory tracer's payloads
/// must save live VGPRs in scratch memory and load them back, through the
/// scratch V# (gfx906, gfx90a) or architected flat scratch (gfx940+).
/// Every point is placed, the kernel's stack grows by the slots, and with
/// every example tool the original's results stay and each tool reports
/// what the emulator saw. Without spilling the same run leaves points out.
/// (gfx908's AGPRs are a file of their own, where the payload parks
/// instead.)
#[test]
fn payloads_spill_live_registers_to_scratch_where_none_is_free() {
    let object = object_for_every_target("kernels/live_at_the_limit.hip");
    for target in every_target() {
        let app = load::load_for_target(&object, Some(target)).unwrap().code_objects.remove(0);
        spilling_on(&app, target != "gfx908");
    }
}

fn spilling_on(app: &CodeObject, spills: bool) {
    let target = app.target.processor.clone();
    let kernel = "_Z14liveAtTheLimitPiPKi";
    let (case, input) = one_wave_loading(kernel);
    let mut device = Device::new(app.clone(), target.clone()).unwrap();
    let (memory, _) = run_case(&mut device, &case);
    let held: i32 = (2..124).map(|v| 7 * v).sum();
    let expected = words(input.iter().enumerate().map(|(lane, x)| x + held + i32::from(lane % 3 == 0)));
    assert_eq!(memory[0], expected, "{target}: the original's results");
    let dir = scratch();
    let tool = example_tool_for("memory-tracer", dir.path(), app);
    let plan = example_plan_for("memory-tracer", kernel);
    let registry = Registry::with_builtins();
    let options = InstrumentOptions { linker: linker_for(app), ..InstrumentOptions::default() };
    let (_, report) = instrument_code_object(&tool, app, &plan, &registry, &options).unwrap();
    assert!(report.left_out.is_empty(), "{target}: {:#?}", report.left_out);
    if spills {
        assert!(
            report.spills.points > 0 && report.spills.vgprs >= report.spills.points,
            "{target}: {:?}",
            report.spills
        );
        assert!(report.kernels[0].stack_bytes.1 > report.kernels[0].stack_bytes.0, "{target}: {:?}", report.kernels[0]);
        let mut without = InstrumentOptions { allow_partial: true, ..options.clone() };
        without.payloads.spill_to_scratch = false;
        let (_, partial) = instrument_code_object(&tool, app, &plan, &registry, &without).unwrap();
        assert!(!partial.left_out.is_empty(), "{target}: without spills, no register is left for some payload");
    }
    every_example_tool_growing(app, &case, &["buffer"], RegisterGrowth::FreeOfOccupancy, true);
}

/// A kernel at one wave per SIMD (256 VGPRs and 16 AGPRs, every one live
/// at each point, as in rocBLAS's Tensile `MT64x1x64` fallback kernels):
/// growing its allocation costs no occupancy, so with default flags the
/// payloads park live VGPRs in AGPRs past the 16 it allocates (they once
/// were held to those, and points were left out with "no registers").
#[test]
fn payloads_park_in_agprs_past_the_allocation_where_growing_is_free() {
    let adds: String = (1..256).map(|v| format!("\tv_add_u32_e32 v0, v0, v{v}\n")).collect();
    let reads: String =
        (0..16).map(|a| format!("\tv_accvgpr_read_b32 v1, a{a}\n\tv_add_u32_e32 v0, v0, v1\n")).collect();
    let writes: String = (0..256).map(|v| format!("\tv_mov_b32_e32 v{v}, {v}\n")).collect::<String>()
        + &(0..16).map(|a| format!("\tv_accvgpr_write_b32 a{a}, {a}\n")).collect::<String>();
    let body = format!("{writes}\ts_nop 0\n\ts_nop 1\n{adds}{reads}\ts_endpgm");
    let app = kernel_with_registers("gfx90a", &body, "", 272, 256);
    let case = Case { kernel: "test_kernel", launch: Launch::linear(1, 64), arguments: vec![] };
    let dir = scratch();
    let tool = example_tool_for("instruction-counter", dir.path(), &app);
    let plan = example_plan_for("instruction-counter", case.kernel);
    let options = InstrumentOptions { linker: linker_for(&app), ..InstrumentOptions::default() };
    let (_, report) = instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &options).unwrap();
    assert!(report.left_out.is_empty(), "{:#?}", report.left_out);
    assert_eq!(report.spills.points, 0, "parked in AGPRs, not saved in scratch: {:?}", report.spills);
    // And what it counts is what the emulator runs.
    let output = instrumented_growing(&tool, &app, &plan, RegisterGrowth::FreeOfOccupancy);
    check_example("instruction-counter", &app, &output, &plan, &case, &[]);
}

/// A count kept per lane in a kernel whose VGPRs are nearly all live at
/// its points and that cannot grow them without losing a wave (v0-v57 of
/// 64 VGPRs, 64 AGPRs written after the loop: as a rocBLAS Tensile kernel
/// at 62 VGPRs keeps v0-v59 live before its accumulators are cleared): too
/// few VGPRs are dead for a hook's payload, and parking, planned for the
/// counting points too, took the count's own pair, the highest live VGPRs,
/// to save and give back around each add. `verify`'s check refused that,
/// leaving points out (6 points of 3 rocBLAS code objects). The counting
/// code needs no room: nothing is parked, and the count is what the
/// emulator runs.
#[test]
fn a_count_kept_per_lane_is_never_parked() {
    let writes: String = (0..58).map(|v| format!("\tv_mov_b32_e32 v{v}, {v}\n")).collect();
    let accumulators: String = (0..64).map(|a| format!("\tv_accvgpr_write_b32 a{a}, v{}\n", a % 58)).collect();
    let adds: String = (1..58).map(|v| format!("\tv_add_u32_e32 v0, v0, v{v}\n")).collect::<String>()
        + &(0..64).map(|a| format!("\tv_accvgpr_read_b32 v1, a{a}\n\tv_add_u32_e32 v0, v0, v1\n")).collect::<String>();
    let body = format!(
        "{writes}\ts_mov_b32 s4, 5
.Lloop:
\tv_add_u32_e32 v1, v1, v2
\tv_add_u32_e32 v3, v3, v4
\ts_sub_u32 s4, s4, 1
\ts_cmp_lg_u32 s4, 0
\ts_cbranch_scc1 .Lloop
{accumulators}{adds}\ts_endpgm"
    );
    let app = kernel_with_registers("gfx90a", &body, "", 128, 64);
    let case = Case { kernel: "test_kernel", launch: Launch::linear(1, 64), arguments: vec![] };
    let dir = scratch();
    let tool = example_tool_for("block-counter", dir.path(), &app);
    let plan = example_plan_for("block-counter", case.kernel);
    let options =
        InstrumentOptions { linker: linker_for(&app), count_way: CountWay::Lanes, ..InstrumentOptions::default() };
    let (bytes, report) = instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &options).unwrap();
    assert!(report.left_out.is_empty(), "{:#?}", report.left_out);
    let counts = report.counts_in_registers.expect("the plan counts in registers");
    assert_eq!((counts.kernels, counts.kernels_per_wave), (1, 0), "{:?}", counts.hooks_called);
    let output = CodeObject::parse(bytes, Vec::new()).unwrap();
    let verified = gpuinstr::verify::verify(&app, &output).unwrap();
    assert!(verified.ok(), "{}", verified.render_text());
    let Runs { report, instrumented: device, cells, .. } =
        run_both(&app, &output, &case, &[("Counter", 8)], Options::default());
    let expected = expected_count(&app, &example_plan_for("instruction-counter", case.kernel), &report);
    assert_eq!(device.memory.read_u64(cells[0]).unwrap(), expected, "Counter");
}

/// hipBLASLt's kernels keep the address of their activation function, a
/// subroutine at the kernel's end, in `s[12:13]` (`s_getpc_b64`, then
/// `s_add_i32` of the subroutine's offset, `s_add_u32`/`s_addc_u32`, no
/// `s_setpc_b64` after it; one of several, chosen by an argument) and call
/// it with `s_swappc_b64` as they store; it returns with `s_setpc_b64
/// s[30:31]`. The computation is made symbolic, so the instrumented kernel
/// calls the subroutine where it moved; liveness follows the calls into
/// the subroutines and back (what is live at a call is what they read and
/// what is live after it; it was every register, and the points near
/// calls were left out for want of one). Every example tool places every
/// point and reports what the emulator ran, `verify` passes.
#[test]
fn kernels_calling_subroutines_of_their_own_are_instrumented_around_the_calls() {
    let body = "\ts_load_dwordx2 s[20:21], s[0:1], 0x0
\ts_load_dword s22, s[0:1], 0x8
\ts_waitcnt lgkmcnt(0)
\ts_cmp_eq_u32 s22, 0
\ts_cbranch_scc1 .Lto_add
\ts_getpc_b64 s[12:13]
.Lafter_getpc_mul:
\ts_add_i32 s8, .Lmul-.Lafter_getpc_mul-4, 4
\ts_add_u32 s12, s12, s8
\ts_addc_u32 s13, s13, 0
\ts_branch .Lready
.Lto_add:
\ts_getpc_b64 s[12:13]
.Lafter_getpc_add:
\ts_add_i32 s8, .Ladd-.Lafter_getpc_add-4, 4
\ts_add_u32 s12, s12, s8
\ts_addc_u32 s13, s13, 0
\ts_branch .Lready
.Lready:
\tv_lshlrev_b32_e32 v2, 2, v0
\tglobal_load_dword v1, v2, s[20:21]
\ts_waitcnt vmcnt(0)
\tv_add_u32_e32 v1, v1, v0
\ts_mov_b32 s9, 3
.Lloop:
\ts_swappc_b64 s[30:31], s[12:13]
\ts_sub_u32 s9, s9, 1
\ts_cmp_lg_u32 s9, 0
\ts_cbranch_scc1 .Lloop
\tglobal_store_dword v2, v1, s[20:21]
\ts_waitcnt vmcnt(0)
\ts_endpgm
.Lmul:
\tv_mul_lo_u32 v1, v1, 3
\tv_add_u32_e32 v1, 1, v1
\ts_setpc_b64 s[30:31]
.Ladd:
\tv_add_u32_e32 v1, 7, v1
\tv_cmp_gt_u32_e32 vcc, 17, v0
\ts_and_saveexec_b64 s[34:35], vcc
\ts_cbranch_execz .Ladd_done
\tv_add_u32_e32 v1, 100, v1
.Ladd_done:
\ts_or_b64 exec, exec, s[34:35]
\ts_setpc_b64 s[30:31]"
        .to_string();
    let kernel = AssemblyKernel {
        name: "calls_its_own".into(),
        body,
        arguments: vec![("out", 8), ("which", 4)],
        group_segment: 0,
        private_segment: 0,
    };
    let app = kernels_from_assembly("gfx90a", std::slice::from_ref(&kernel));
    let lifted = lift(&app).unwrap();
    let problems = &lifted.functions[0].problems;
    assert!(problems.iter().all(|p| !p.kind.blocks_relocation()), "{problems:?}");
    let liveness = analyze(&lifted).unwrap();
    let function = &lifted.functions[0];
    let live = &liveness.functions[0];
    let named = |name: &str| function.instructions().position(|i| i.name(&lifted.isa) == name).unwrap();
    let (call, returns) = (named("S_SWAPPC_B64"), named("S_SETPC_B64"));
    let units = |names: &[&str]| {
        names.iter().map(|n| gpuinstr::stages::liveness::units::units_of_name(n).0[0]).collect::<Vec<_>>()
    };
    for unit in units(&["VGPR1", "VGPR2", "SGPR9", "SGPR12", "SGPR13", "SGPR20", "SGPR21"]) {
        assert!(live.live_in[call].contains(unit), "{unit} is live at the call");
        assert!(live.live_out[returns].contains(unit), "{unit} is live after the return");
    }
    for unit in units(&["VGPR3", "VGPR40", "SGPR40", "SGPR22", "SGPR8"]) {
        assert!(!live.live_in[call].contains(unit), "{unit} is dead at the call");
        assert!(!live.live_out[returns].contains(unit), "{unit} is dead after the return");
    }
    drop(lifted);
    // What is live at the first call of a variant of the kernel.
    let live_at_call = |body: String| {
        let other = kernels_from_assembly("gfx90a", &[AssemblyKernel { body, ..kernel.clone() }]);
        let lifted = lift(&other).unwrap();
        let liveness = analyze(&lifted).unwrap();
        let call = lifted.functions[0].instructions().position(|i| i.name(&lifted.isa) == "S_SWAPPC_B64").unwrap();
        liveness.functions[0].live_in[call]
    };
    // Some of Tensile's kernels call with s[22:23] as the return address.
    let through_22 = live_at_call(kernel.body.replace("s[30:31]", "s[22:23]"));
    assert!(!through_22.contains(units(&["VGPR40"])[0]), "through s[22:23]");
    // Where the address may come from elsewhere (a pointer the kernel
    // was given), the callee is unknown: everything is live at the call.
    let elsewhere = kernel.body.replacen(
        "\ts_getpc_b64 s[12:13]\n.Lafter_getpc_add:",
        "\ts_mov_b64 s[12:13], s[20:21]\n.Lafter_getpc_add:",
        1,
    );
    let unknown = live_at_call(elsewhere);
    assert!(units(&["VGPR40", "SGPR40"]).iter().all(|u| unknown.contains(*u)));
    for which in [0u32, 1] {
        let case = Case {
            kernel: "calls_its_own",
            launch: Launch::linear(1, 64),
            arguments: vec![Argument::Buffer(words(0..64)), Argument::Value(which.to_le_bytes().to_vec())],
        };
        let mut device = Device::new(app.clone(), "original".into()).unwrap();
        let (memory, _) = run_case(&mut device, &case);
        let expected: Vec<u8> = words((0..64).map(|v| match (which, v < 17) {
            (0, true) => 2 * v + 321,
            (0, false) => 2 * v + 21,
            _ => ((2 * v * 3 + 1) * 3 + 1) * 3 + 1,
        }));
        assert_eq!(memory[0], expected, "which {which}: the subroutine ran three times");
        let dir = scratch();
        for example in EXAMPLE_TOOLS {
            let tool = example_tool_for(example, dir.path(), &app);
            let plan = example_plan_for(example, case.kernel);
            let output = instrumented_verified(&tool, &app, &plan);
            match example {
                // Blocks of two or three instructions: a count's add weighs
                // more than the 1.5x the other tests hold it to.
                "block-counter" => drop(block_counter_counts(&app, &output, &case)),
                _ => {
                    let divergent = check_example(example, &app, &output, &plan, &case, &["buffer"]);
                    assert_eq!(divergent > 0, example == "branch-divergence" && which == 0, "{example}");
                }
            }
        }
    }
    // Two such kernels, each its own group (Tensile's code objects are
    // split so): they were instrumented whole, as if their calls could
    // reach each other.
    use gpuinstr::instrument::Grouping;
    let twin = AssemblyKernel { name: "calls_its_own_too".into(), ..kernel.clone() };
    let twins = kernels_from_separate_assembly("gfx90a", &[kernel.clone(), twin]);
    let dir = scratch();
    let tool = example_tool_for("instruction-counter", dir.path(), &twins);
    let plan = example_plan("instruction-counter");
    let options = InstrumentOptions { group_bytes: 1, linker: linker_for(&twins), ..InstrumentOptions::default() };
    let (bytes, report) = instrument_code_object(&tool, &twins, &plan, &Registry::with_builtins(), &options).unwrap();
    assert_eq!(report.grouping, Grouping::Groups(2));
    let output = CodeObject::parse(bytes, Vec::new()).unwrap();
    let verified = gpuinstr::verify::verify(&twins, &output).unwrap();
    assert!(verified.ok(), "{}", verified.render_text());
    let case = Case {
        kernel: "calls_its_own_too",
        launch: Launch::linear(1, 64),
        arguments: vec![Argument::Buffer(words(0..64)), Argument::Value(0u32.to_le_bytes().to_vec())],
    };
    check_instruction_counter(&twins, &output, &plan, &case);
}

/// A kernel whose every VGPR is written keeps the SVA in an AGPR, and
/// each payload loads it into a VGPR dead at its point (as in Tensile's
/// kernels at 256 VGPRs). The memory tracer's points there still take its
/// template, wrapped in that load, as where the SVA is loaded from memory
/// (they were once compiled by llc, a group of alike points at a time:
/// 172 s instead of 13.5 s on a rocBLAS object), and `verify` passes.
#[test]
fn payloads_loading_the_sva_from_an_agpr_take_templates() {
    use gpuinstr::stages::payloads::Sharing;
    let writes: String =
        (0..32).filter(|v| ![2, 3].contains(v)).map(|v| format!("\tv_mov_b32_e32 v{v}, {v}\n")).collect();
    let body = format!(
        "\ts_load_dwordx2 s[4:5], s[0:1], 0x0
\ts_waitcnt lgkmcnt(0)
\tv_lshlrev_b32_e32 v2, 2, v0
\tv_mov_b32_e32 v3, s5
\tv_add_co_u32_e32 v2, vcc, s4, v2
\tv_addc_co_u32_e32 v3, vcc, 0, v3, vcc
{writes}\tv_accvgpr_write_b32 a0, 0
\tglobal_load_dword v4, v[2:3], off
\ts_waitcnt vmcnt(0)
\tv_add_u32_e32 v4, 1, v4
\tglobal_store_dword v[2:3], v4, off
\ts_endpgm"
    );
    let app = kernel_with_registers("gfx90a", &body, "", 64, 32);
    let lifted = lift(&app).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let request = SvaRequest { instrumented: [0].into(), work_item_ids: true, grow: RegisterGrowth::FreeOfOccupancy };
    assert!(matches!(place(&lifted, &liveness, &request).kernels[0].sva, Some(Home::Agpr(_))));
    let dir = scratch();
    let tool = example_tool_for("memory-tracer", dir.path(), &app);
    let plan = example_plan_for("memory-tracer", "test_kernel");
    let options = InstrumentOptions { linker: linker_for(&app), ..InstrumentOptions::default() };
    let (_, report) = instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &options).unwrap();
    assert!(report.left_out.is_empty(), "{:#?}", report.left_out);
    let sharing: Vec<Sharing> = report.compilations.iter().map(|c| c.sharing).collect();
    assert!(sharing.iter().all(|s| *s == Sharing::Template), "{sharing:?}");
    instrumented_verified(&tool, &app, &plan);
}

/// The classes of width arithmetic the emulator once got wrong, in one
/// compiled kernel (tests/inputs/kernels/widths.hip): LDS reads from bases
/// negative for a quarter of the lanes plus folded offsets, and a MODE
/// field written with `s_setreg_imm32_b32` (and loops, one diverging, that
/// give it some length). The original computes what the CPU does, and
/// every example tool reports what the emulator saw while the original's
/// results stay.
#[test]
fn every_example_tool_on_the_width_classes() {
    let object = object_for_every_target("kernels/widths.hip");
    let input: Vec<i32> = (0..128).map(|i| i * 7 - 100).collect();
    let mixed = |t: usize| {
        (0..128).fold(input[t + 1] + input[t + 9], |sum: i32, j| {
            (sum.wrapping_mul(3).wrapping_add(input[j % 64]) ^ (sum >> 7)).wrapping_add(sum.wrapping_shl(5))
        })
    };
    let diverged = |t: usize| (0..t % 4).map(|j| input[64 + j]).sum::<i32>();
    let expected = words((0..64).map(|t| mixed(t).wrapping_add(diverged(t)) + 1));
    for target in every_target() {
        let app = load::load_for_target(&object, Some(target)).unwrap().code_objects.remove(0);
        let case = Case {
            kernel: "_Z13negativeBasesPiPKii",
            launch: Launch::linear(1, 64),
            arguments: vec![
                Argument::Buffer(words([0; 64])),
                Argument::Buffer(words(input.iter().copied())),
                Argument::Value(16i32.to_le_bytes().to_vec()),
            ],
        };
        let mut device = Device::new(app.clone(), target.to_string()).unwrap();
        let (memory, _) = run_case(&mut device, &case);
        assert_eq!(memory[0], expected, "{target}: the original's results");
        every_example_tool_growing(&app, &case, &["buffer"], RegisterGrowth::FreeOfOccupancy, true);
    }
}

/// A compiled kernel squeezed into 24 VGPRs (`registerSpills` in
/// tests/inputs/kernels/calls_and_scratch.hip: 64 values, unrolled loops,
/// scratch spills on gfx90a): no VGPR is free for the whole kernel, and
/// with growth off stage sva slides the SVA between VGPRs free where it is.
/// Instrumented with the default growth (free of occupancy cost: the SVA
/// and dense payloads get VGPRs past the allocation), every example tool
/// reads the launch right, and the memory tracer sees every lane's global
/// and scratch access.
#[test]
fn every_example_tool_on_a_spilling_kernel_without_growing() {
    let kernel = "_Z14registerSpillsPfPKf";
    let app = load::load_for_target(&test_kernels("calls_and_scratch"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let slid = assert_slides(&app, kernel, false, false);
    assert!(slid.move_points() > 0);
    let case = Case {
        kernel,
        launch: Launch::linear(1, 96),
        arguments: vec![
            Argument::Buffer(words([0; 96])),
            Argument::Buffer((0..96 * 64).flat_map(|i| ((i % 29) as f32 * 0.25 - 3.0).to_le_bytes()).collect()),
        ],
    };
    // Unrolled: no branch diverges.
    every_example_tool_growing(&app, &case, &["buffer", "scratch"], RegisterGrowth::FreeOfOccupancy, false);
}

/// A kernel with every one of its 128 VGPRs busy across a load
/// (tests/inputs/kernels/no_register_anywhere.hip; gfx90a, no AGPRs, one
/// VGPR more would cost a wave): no register holds the SVA for the whole
/// kernel, none can slide across the load, and the default growth may not
/// grow, so stage sva keeps the SVA and the work-item ids in the wave's
/// slot in memory, indexed by its hardware id. With the default flags
/// every point of the tools that read them (the launch shape at the
/// entry, each branch's wave, each memory access, where at the load the
/// payload must also save live VGPRs in scratch memory through the frame
/// in the SVA it loaded) is placed, the preamble stores the values and
/// each payload loads them, `verify` passes, and the tools report
/// what the emulator saw over several workgroups of several waves (the
/// work-item ids differ between the waves of a workgroup: a slot shared by
/// two resident waves would mix them up). The original's results stay.
/// On gfx90a and on MI300, whose waves spread over XCCs: there the slot is
/// found by the XCC's id too (the emulator deals workgroups to 8 XCCs).
#[test]
fn the_sva_lives_in_the_waves_slot_where_no_register_is_free() {
    let object = object_for_every_target("kernels/no_register_anywhere.hip");
    for target in ["gfx90a", mi300()] {
        sva_in_the_waves_slot(&object, target);
    }
}

fn sva_in_the_waves_slot(object: &std::path::Path, target: &str) {
    let kernel = "_Z19noVgprAcrossTheLoadPiPKi";
    let app = load::load_for_target(object, Some(target)).unwrap().code_objects.remove(0);
    let lifted = lift(&app).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let function = lifted.functions.iter().position(|f| f.name == kernel).unwrap();
    let request =
        SvaRequest { instrumented: [function].into(), work_item_ids: true, grow: RegisterGrowth::FreeOfOccupancy };
    let placement = place(&lifted, &liveness, &request);
    let placed = placement.kernels.iter().find(|k| k.kernel == function).unwrap();
    assert_eq!(
        (placed.sva, placed.work_item_ids, placed.problem.as_deref()),
        (Some(Home::WaveSlot), Some(Home::WaveSlot), None)
    );
    let homes = placement.functions[&function].in_wave_slot.expect("in the wave's slot");
    assert!(homes.work_item_ids, "{target}");
    assert_eq!(homes.indexing.xcc, target != "gfx90a", "{target}");

    let (groups, size) = (3u32, 192u32);
    let n = (groups * size) as usize;
    let input: Vec<i32> = (0..n as i32).map(|i| i * 11).collect();
    let case = Case {
        kernel,
        launch: Launch::linear(groups, size),
        arguments: vec![Argument::Buffer(words(vec![0; n])), Argument::Buffer(words(input.iter().copied()))],
    };
    let held: i32 = (2..128).map(|v| 7 * v).sum();
    let mut device = Device::new(app.clone(), target.into()).unwrap();
    let (memory, _) = run_case(&mut device, &case);
    let expected = words(input.iter().enumerate().map(|(i, x)| x + held + i32::from(i % 3 == 0)));
    assert_eq!(memory[0], expected, "{target}: the original's results");

    let dir = scratch();
    for example in ["kernel-arguments", "branch-divergence", "memory-tracer", "instruction-counter"] {
        let tool = example_tool_for(example, dir.path(), &app);
        let plan = example_plan_for(example, kernel);
        let options = InstrumentOptions { linker: linker_for(&app), ..InstrumentOptions::default() };
        let (bytes, report) = instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &options).unwrap();
        assert!(report.left_out.is_empty(), "{target} {example}: {:#?}", report.left_out);
        assert!(report.kernels[0].sva_in_memory, "{example}: {:?}", report.kernels[0]);
        assert!(
            report.render_text().contains("SVA kept in memory, a slot per wave"),
            "{example}: the report says so:\n{}",
            report.render_text()
        );
        let output = CodeObject::parse(bytes, Vec::new()).unwrap();
        let verified = gpuinstr::verify::verify(&app, &output).unwrap();
        assert!(verified.ok(), "{target} {example}: {}", verified.render_text());
        match example {
            "kernel-arguments" => check_kernel_arguments(&app, &output, &case),
            "branch-divergence" => assert!(check_branch_divergence(&app, &output, &case) > 0, "some wave diverges"),
            // Where the load's data is in flight every VGPR is live: the
            // counter's payload there (which spills) first saves one in the
            // wave's slot through a resource adding the lane id, loads the
            // SVA into it, and gives it back last.
            "instruction-counter" => check_instruction_counter(&app, &output, &plan, &case),
            _ => {
                // At the load every VGPR but its destination is live: the
                // payload loads the SVA into that one and saves live VGPRs
                // in scratch through the frame the SVA holds.
                assert!(report.spills.points > 0, "{example}: {:?}", report.spills);
                check_memory_tracer(&app, &output, &plan, &case, &["buffer"]);
            }
        }
    }
}
