//! The emulator as the oracle of instrumentation (issue 7): an original and
//! an instrumented code object run on the same inputs; the application's
//! memory must come out identical and the tool's results must equal what
//! the emulator itself observed running the original.

use gpuinstr::instrument::{instrument_code_object, InstrumentOptions};
use gpuinstr::plan::Plan;
use gpuinstr::stages::lift::lift;
use gpuinstr::stages::load::{self, CodeObject};
use gpuinstr_emulator::{Device, Launch, RunReport};
use gpuinstr_intrinsics::Registry;
use gpuinstr_tests::*;

fn example_tool(example_name: &str, dir: &std::path::Path) -> CodeObject {
    let path = dir.join(format!("{example_name}.hsaco"));
    run_ok(&mut tool_compile_command(Compiler::Clang, &example(example_name), "-O3", &path));
    load::load(&path).unwrap().code_objects.remove(0)
}

fn example_plan(example_name: &str) -> Plan {
    Plan::load(&repo().join(format!("hook-sdk/examples/{example_name}/plan.toml"))).unwrap()
}

fn instrumented(tool: &CodeObject, app: &CodeObject, plan: &Plan) -> CodeObject {
    let (bytes, _) =
        instrument_code_object(tool, app, plan, &Registry::with_builtins(), &InstrumentOptions::default()).unwrap();
    CodeObject::parse(bytes, Vec::new()).unwrap()
}

/// One launch: the buffers (bytes) its arguments point at, the scalar
/// arguments, and the shape.
struct Case {
    kernel: &'static str,
    launch: Launch,
    /// Some(bytes): a buffer argument; None: the next scalar argument.
    buffers: Vec<Option<Vec<u8>>>,
    scalars: Vec<Vec<u8>>,
}

/// Runs a case; returns every buffer's bytes after the run and the report.
fn run_case(device: &mut Device, case: &Case) -> (Vec<Vec<u8>>, RunReport) {
    let mut scalars = case.scalars.iter();
    let mut addresses = Vec::new();
    let arguments: Vec<Vec<u8>> = case
        .buffers
        .iter()
        .map(|argument| match argument {
            Some(bytes) => {
                let address = device.allocate("buffer", bytes);
                addresses.push((address, bytes.len()));
                address.to_le_bytes().to_vec()
            }
            None => scalars.next().expect("a scalar argument").clone(),
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
            buffers: vec![Some(words([0; 384])), Some(words((0..384).map(|i| i * 37 % 101 - 20))), None],
            scalars: vec![300i32.to_le_bytes().to_vec()],
        },
        Case {
            kernel: "_Z13loopReductionPfPKfii",
            launch: Launch::linear(1, 64),
            buffers: vec![
                Some(words([0; 64])),
                Some((0..500).flat_map(|i| ((i % 23) as f32 - 11.0).to_le_bytes()).collect()),
                None,
                None,
            ],
            scalars: vec![500i32.to_le_bytes().to_vec(), 64i32.to_le_bytes().to_vec()],
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

#[test]
fn the_instruction_counter_counts_what_the_emulator_ran() {
    let dir = scratch();
    let tool = example_tool("instruction-counter", dir.path());
    let plan = example_plan("instruction-counter");
    for target in ["gfx90a", "gfx908"] {
        let app = load::load_for_target(&test_kernels("control_flow"), Some(target)).unwrap().code_objects.remove(0);
        let output = instrumented(&tool, &app, &plan);
        for case in control_flow_cases() {
            let name = format!("{target} {}", case.kernel);
            let mut original = Device::new(app.clone(), "original".into()).unwrap();
            let (memory, report) = run_case(&mut original, &case);
            let mut instrumented = Device::new(output.clone(), "instrumented".into()).unwrap();
            // Counter is __managed__: the global points at host-shared memory.
            let counter = instrumented.bind_managed("Counter", 8).expect("the tool's Counter global");
            let (instrumented_memory, instrumented_report) = run_case(&mut instrumented, &case);
            assert_eq!(memory, instrumented_memory, "{name}: the application's memory");
            let counted = instrumented.memory.read_u64(counter).unwrap();
            let expected = expected_count(&app, &plan, &report);
            assert!(expected > 0);
            assert_eq!(counted, expected, "{name}: Counter");
            assert!(
                instrumented_report.counts.instructions() > report.counts.instructions(),
                "{name}: the payloads ran"
            );
        }
    }
}
