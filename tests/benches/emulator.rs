//! Benchmark (not a test): how fast the emulator runs kernels, so the
//! differential suite stays fast enough for CI. Reports wave instructions
//! per second (one instruction of one wave) and lane operations per second
//! (active lanes summed), original and instrumented with the instruction
//! counter, on our control-flow and memory kernels (gfx90a).
//!
//! cargo bench -p gpuinstr-tests --bench emulator

use std::time::Instant;

use gpuinstr::instrument::{instrument_code_object, InstrumentOptions};
use gpuinstr::plan::Plan;
use gpuinstr::stages::load::{self, CodeObject};
use gpuinstr_emulator::{Device, Launch};
use gpuinstr_intrinsics::Registry;
use gpuinstr_tests::{example, repo, run_ok, scratch, test_kernels, tool_compile_command, Compiler};

fn floats(count: usize) -> Vec<u8> {
    (0..count).flat_map(|i| ((i % 31) as f32 - 7.0).to_le_bytes()).collect()
}

/// Runs a kernel `repeat` times; prints throughput.
fn measure(label: &str, code_object: &CodeObject, kernel: &str, launch: Launch, inputs: usize, scalars: &[Vec<u8>]) {
    let mut device = Device::new(code_object.clone(), label.into()).unwrap();
    device.bind_managed("Counter", 8);
    let out = device.allocate("out", &floats(inputs));
    let input = device.allocate("in", &floats(inputs));
    let mut arguments = vec![out.to_le_bytes().to_vec(), input.to_le_bytes().to_vec()];
    arguments.extend(scalars.iter().cloned());
    let start = Instant::now();
    let mut waves = 0u64;
    let mut lanes = 0u64;
    let mut runs = 0;
    while runs < 3 || start.elapsed().as_secs_f64() < 2.0 {
        let report = device.launch(kernel, launch, &arguments).unwrap();
        waves += report.counts.instructions();
        lanes += report.counts.per_address.values().map(|(_, l)| l).sum::<u64>();
        runs += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "{label:<50} {runs:>4} runs  {:>12.0} wave instructions/s  {:>14.0} lane operations/s",
        waves as f64 / seconds,
        lanes as f64 / seconds
    );
}

fn main() {
    let dir = scratch();
    let tool_path = dir.path().join("counter.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &example("instruction-counter"), "-O3", &tool_path));
    let tool = load::load(&tool_path).unwrap().code_objects.remove(0);
    let plan = Plan::load(&repo().join("hook-sdk/examples/instruction-counter/plan.toml")).unwrap();
    for (file, kernel, launch, inputs, scalars) in [
        (
            "control_flow",
            "_Z13loopReductionPfPKfii",
            Launch::linear(1, 256),
            65536usize,
            vec![65536i32.to_le_bytes().to_vec(), 256i32.to_le_bytes().to_vec()],
        ),
        ("memory", "_Z12ldsReductionPfPKf", Launch::linear(64, 256), 16384, vec![]),
    ] {
        let app = load::load_for_target(&test_kernels(file), Some("gfx90a")).unwrap().code_objects.remove(0);
        let (bytes, _) =
            instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &InstrumentOptions::default())
                .unwrap();
        let output = CodeObject::parse(bytes, Vec::new()).unwrap();
        measure(&format!("{kernel} original"), &app, kernel, launch, inputs, &scalars);
        measure(&format!("{kernel} instrumented (counter)"), &output, kernel, launch, inputs, &scalars);
    }
}
