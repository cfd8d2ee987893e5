//! Benchmark (not a test): `instrument` end to end (lift, liveness, plan,
//! sva, payloads, patch, emit, link) with the instruction counter on every
//! instruction of the largest rocSPARSE gfx90a kernels, one kernel at a time
//! in its code object. Prints the time per 1,000 sites and the static
//! overhead per site (instructions inserted before each original
//! instruction: median and max, from the output's site table) next to what
//! the hooks need at minimum: their own instructions as clang compiled them
//! in the tool (without the return).
//!
//! cargo bench -p gpuinstr-tests --bench instrument [-- --kernels N] [--one-by-one]
//!
//! `--one-by-one` compiles one payload per point (no shared payloads), for
//! comparison.

use std::time::Instant;

use gpuinstr::instrument::{instrument_code_object, InstrumentOptions};
use gpuinstr::plan::Plan;
use gpuinstr::stages::lift::lift;
use gpuinstr::stages::load::{self, CodeObject};
use gpuinstr::verify::site_table;
use gpuinstr_intrinsics::Registry;
use gpuinstr_tests::{debian_package_file, example, repo, run_ok, scratch, tool_compile_command, Compiler};

fn main() {
    let kernels: usize = std::env::args()
        .position(|a| a == "--kernels")
        .and_then(|i| std::env::args().nth(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    let mut options = InstrumentOptions::default();
    options.payloads.share_payloads = !std::env::args().any(|a| a == "--one-by-one");
    // The left-out points are a column of the table.
    options.allow_partial = true;
    let dir = scratch();
    let tool_path = dir.path().join("counter.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &example("instruction-counter"), "-O3", &tool_path));
    let tool = load::load(&tool_path).unwrap().code_objects.remove(0);
    let lifted_tool = lift(&tool).unwrap();
    let minimum = |hook: &str| {
        lifted_tool
            .function(hook)
            .map_or(0, |f| f.instructions().filter(|i| !i.name(&lifted_tool.isa).starts_with("S_SETPC")).count())
    };
    let (vector_minimum, scalar_minimum) = (minimum("countInstructionsVector"), minimum("countInstructionsScalar"));
    let plan_text = std::fs::read_to_string(repo().join("hook-sdk/examples/instruction-counter/plan.toml")).unwrap();

    let library = debian_package_file("librocsparse0", "/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1");
    let code_objects = load::load_for_target(&library, Some("gfx90a:xnack-")).unwrap().code_objects;
    // The largest kernels, by instruction count.
    let mut largest: Vec<(usize, usize, String)> = Vec::new();
    for (index, code_object) in code_objects.iter().enumerate() {
        let lifted = lift(code_object).unwrap();
        for function in lifted.functions.iter().filter(|f| f.is_kernel() && f.relocatable()) {
            largest.push((function.instructions().count(), index, function.name.clone()));
        }
    }
    largest.sort_by(|a, b| b.cmp(a));
    println!(
        "tool: instruction-counter (hooks at minimum: vector {vector_minimum}, scalar {scalar_minimum} instructions); \
         rocSPARSE gfx90a:xnack-, {} code objects",
        code_objects.len()
    );
    println!("kernel instructions   sites  payloads   total s   s/1,000 sites   added/site: median  max   left out");
    let registry = Registry::with_builtins();
    for (instructions, index, name) in largest.into_iter().take(kernels) {
        let app: &CodeObject = &code_objects[index];
        // The counter's plan, for this kernel only.
        let plan_text = plan_text.replace("where = ", &format!("kernels = \"{name}\"\nwhere = "));
        let plan = Plan::parse(&plan_text, "bench.toml").unwrap();
        let start = Instant::now();
        let (bytes, report) = instrument_code_object(&tool, app, &plan, &registry, &options).unwrap();
        let seconds = start.elapsed().as_secs_f64();
        let output = CodeObject::parse(bytes, Vec::new()).unwrap();
        let lifted = lift(&output).unwrap();
        let sites = site_table(&output).unwrap();
        let all: Vec<u64> = lifted.functions.iter().flat_map(|f| f.instructions().map(|i| i.address)).collect();
        let mut sizes: Vec<usize> =
            sites.iter().map(|s| all.partition_point(|a| *a < s.end) - all.partition_point(|a| *a < s.begin)).collect();
        sizes.sort_unstable();
        let median = sizes.get(sizes.len() / 2).copied().unwrap_or(0);
        let max = sizes.last().copied().unwrap_or(0);
        println!(
            "{instructions:>18} {:>7} {:>9} {seconds:>9.1} {:>15.2} {median:>20} {max:>4} {:>10}",
            sites.len(),
            report.payloads_compiled,
            seconds * 1000.0 / sites.len().max(1) as f64,
            report.left_out.len()
        );
    }
}
