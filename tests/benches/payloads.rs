//! Benchmark (not a test): payload compile time (stages 5-8) for 1, 100,
//! 1,000 and 10,000 instrumentation points in one code object: the seed's
//! instruction counter (vector hook on vector instructions, scalar hook on
//! scalar ones) over every instruction of rocRAND's largest gfx90a code
//! object, cycling when there are fewer instructions than points. All points
//! share one IR module and two llc runs, so time must grow linearly.
//!
//! cargo bench -p gpuinstr-tests --bench payloads [-- --verify] [--shared]
//! (--verify: LLVM's machine verifier after every pass and the machine-code
//! preservation check; llc always verifies the MIR it parses, and the
//! library checks preservation by default. Each point gets its own
//! payload, to measure the stages; --shared lets alike points share one,
//! as `instrument` does.)

use std::time::Instant;

use gpuinstr::stages::lift::lift;
use gpuinstr::stages::liveness::analyze;
use gpuinstr::stages::load;
use gpuinstr::stages::payload::PayloadPoint;
use gpuinstr::stages::payload::{HookArgument, HookCall};
use gpuinstr::stages::payloads::{compile_payloads, PayloadOptions};
use gpuinstr::stages::sva::FunctionRegisters;
use gpuinstr_intrinsics::Registry;
use gpuinstr_tests::{debian_package_file, example, run_ok, scratch, tool_compile_command, Compiler};

fn main() {
    let verify = std::env::args().any(|a| a == "--verify");
    let dir = scratch();
    let tool_path = dir.path().join("counter.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &example("instruction-counter"), "-O3", &tool_path));
    let tool = load::load(&tool_path).unwrap().code_objects.remove(0);

    let library = debian_package_file("librocrand1", "/usr/lib/x86_64-linux-gnu/librocrand.so.1.1");
    let input = load::load_for_target(&library, Some("gfx90a")).unwrap();
    let app = input.code_objects.into_iter().max_by_key(|c| c.bytes.len()).unwrap();
    let lifted = lift(&app).unwrap();
    let liveness = analyze(&lifted).unwrap();
    // Every instruction of every kernel, with the hook its kind calls for.
    let mut sites = Vec::new();
    for (index, function) in lifted.functions.iter().enumerate().filter(|(_, f)| f.is_kernel()) {
        for (position, instruction) in function.instructions().enumerate() {
            let name = instruction.name(&lifted.isa);
            let scalar = name.starts_with("S_") || name.starts_with("V_READLANE") || name.starts_with("V_WRITELANE");
            sites.push((index, position, scalar));
        }
    }
    println!(
        "tool: instruction-counter; application: {} ({} kernels, {} instructions); verifier {}",
        app.origin.join(": "),
        lifted.functions.iter().filter(|f| f.is_kernel()).count(),
        sites.len(),
        if verify { "on" } else { "off" }
    );
    println!("points     total s   ms/point   per stage (s)");
    let share_payloads = std::env::args().any(|a| a == "--shared");
    let mut options =
        PayloadOptions { verify_each_pass: verify, check_preservation: verify, share_payloads, ..Default::default() };
    if let Some(i) = std::env::args().position(|a| a == "--chunk") {
        options.payloads_per_chunk = std::env::args().nth(i + 1).and_then(|n| n.parse().ok()).expect("a number");
    }
    for index in 0..lifted.functions.len() {
        // The SVA is not read by the counter's hooks; any VGPR will do.
        options.registers.insert(index, FunctionRegisters::default());
    }
    let registry = Registry::with_builtins();
    for count in counts() {
        let points: Vec<PayloadPoint> = sites
            .iter()
            .cycle()
            .take(count)
            .map(|&(function, instruction, scalar)| PayloadPoint {
                function,
                instruction,
                calls: vec![if scalar {
                    HookCall { hook: "countInstructionsScalar".into(), arguments: vec![] }
                } else {
                    HookCall { hook: "countInstructionsVector".into(), arguments: vec![HookArgument::Int(0)] }
                }],
            })
            .collect();
        let start = Instant::now();
        let compiled = compile_payloads(&tool, &lifted, &liveness, &points, &registry, &options).unwrap();
        let seconds = start.elapsed().as_secs_f64();
        if let Ok(dump) = std::env::var("GPUINSTR_BENCH_DUMP") {
            std::fs::write(format!("{dump}/payloads-{count}.ll"), &compiled.compilations[0].texts.lowered_ir).unwrap();
            std::fs::write(format!("{dump}/payloads-{count}.in.ll"), &compiled.compilations[0].texts.payload_ir)
                .unwrap();
            std::fs::write(format!("{dump}/payloads-{count}.mir"), &compiled.compilations[0].texts.lowered_mir)
                .unwrap();
        }
        let stages: Vec<String> =
            compiled.timings.iter().map(|(name, time)| format!("{name} {:.2}", time.as_secs_f64())).collect();
        println!(
            "{count:>6} {seconds:>11.2} {:>10.2}   {} payloads compiled; {}",
            seconds * 1000.0 / count as f64,
            compiled.distinct_payloads(),
            stages.join(", ")
        );
        let instructions: usize =
            compiled.payloads.iter().map(|p| p.code.iter().filter(|l| !l.ends_with(':')).count()).sum();
        println!("{:>6}   instructions per payload: {:.1}", "", instructions as f64 / count as f64);
    }
}

/// The point counts to measure (`--points 1,100` to choose).
fn counts() -> Vec<usize> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--points") {
        Some(i) => args[i + 1].split(',').map(|n| n.parse().expect("a number")).collect(),
        None => vec![1, 100, 1_000, 10_000],
    }
}
