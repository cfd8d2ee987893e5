//! Benchmark (not a test): lift, emit and link throughput on rocSPARSE's
//! gfx90a code objects, and how it scales with code object size. Single
//! threaded, one pass per code object.
//!
//! cargo bench -p gpuinstr-tests --bench roundtrip [-- --every N]

use std::time::Instant;

use gpuinstr::stages::codegen::assemble;
use gpuinstr::stages::emit::link::{link, Linker};
use gpuinstr::stages::emit::EmitOptions;
use gpuinstr::stages::lift::lift;
use gpuinstr::stages::load;
use gpuinstr_tests::debian_package_file;

struct Sample {
    instructions: usize,
    lift: f64,
    emit: f64,
    assemble_link: f64,
}

fn main() {
    let every: usize = std::env::args().skip_while(|a| a != "--every").nth(1).and_then(|n| n.parse().ok()).unwrap_or(1);
    let library = debian_package_file("librocsparse0", "/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1");
    let start = Instant::now();
    let input = load::load_for_target(&library, Some("gfx90a:xnack-")).expect("rocSPARSE loads");
    let load_seconds = start.elapsed().as_secs_f64();
    let scratch = tempfile::tempdir().unwrap();
    let mut samples = Vec::new();
    for code_object in input.code_objects.iter().step_by(every.max(1)) {
        let t = Instant::now();
        let lifted = lift(code_object).expect("lifts");
        let lift_seconds = t.elapsed().as_secs_f64();
        let instructions = lifted.statistics().instructions;
        let t = Instant::now();
        let assembly = lifted.emit_assembly(&EmitOptions::default());
        let emit_seconds = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let relocatable = assemble(&lifted, &assembly.text, scratch.path(), None).expect("assembles");
        link(&relocatable, "amdgcn-amd-amdhsa--gfx90a:xnack-", Linker::Comgr, None, scratch.path()).expect("links");
        let assemble_link_seconds = t.elapsed().as_secs_f64();
        samples.push(Sample {
            instructions,
            lift: lift_seconds,
            emit: emit_seconds,
            assemble_link: assemble_link_seconds,
        });
    }

    let total = |f: &dyn Fn(&Sample) -> f64| samples.iter().map(f).sum::<f64>();
    let instructions: usize = samples.iter().map(|s| s.instructions).sum();
    println!(
        "rocSPARSE gfx90a:xnack-: {} code objects, {instructions} instructions (load {load_seconds:.1} s)",
        samples.len()
    );
    println!("stage            seconds   instructions/s");
    for (name, seconds) in [
        ("lift", total(&|s| s.lift)),
        ("emit (text)", total(&|s| s.emit)),
        ("llvm-mc + CoMGR", total(&|s| s.assemble_link)),
        ("all", total(&|s| s.lift + s.emit + s.assemble_link)),
    ] {
        println!("{name:16} {seconds:7.2}   {:>12.0}", instructions as f64 / seconds);
    }

    // Scaling: throughput per size class, and a least-squares line of
    // lift + emit time against instructions (linear work has a constant slope
    // and a straight fit).
    println!("\ncode object size (instructions)   count   lift+emit instr/s   all instr/s");
    let classes = [(0, 10_000), (10_000, 50_000), (50_000, 100_000), (100_000, 200_000), (200_000, usize::MAX)];
    for (low, high) in classes {
        let class: Vec<&Sample> = samples.iter().filter(|s| s.instructions >= low && s.instructions < high).collect();
        if class.is_empty() {
            continue;
        }
        let n: usize = class.iter().map(|s| s.instructions).sum();
        let ours: f64 = class.iter().map(|s| s.lift + s.emit).sum();
        let all: f64 = class.iter().map(|s| s.lift + s.emit + s.assemble_link).sum();
        let label = if high == usize::MAX { format!("{low}+") } else { format!("{low}..{high}") };
        println!("{label:32} {:6} {:19.0} {:13.0}", class.len(), n as f64 / ours, n as f64 / all);
    }
    let xs: Vec<f64> = samples.iter().map(|s| s.instructions as f64).collect();
    let ys: Vec<f64> = samples.iter().map(|s| s.lift + s.emit).collect();
    let (mx, my) = (xs.iter().sum::<f64>() / xs.len() as f64, ys.iter().sum::<f64>() / ys.len() as f64);
    let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    let syy: f64 = ys.iter().map(|y| (y - my).powi(2)).sum();
    let slope = sxy / sxx;
    let r2 = sxy * sxy / (sxx * syy);
    println!(
        "\nlift+emit time = {:.3} us/instruction x instructions + {:.1} ms; R^2 = {r2:.3}",
        slope * 1e6,
        (my - slope * mx) * 1e3
    );
}
