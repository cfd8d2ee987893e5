//! Benchmark (not a test): liveness time per 1,000 instructions, on
//! rocSPARSE's gfx90a code objects (the largest kernels included) and on
//! generated kernels of 10^3 to 2*10^5 instructions with divergent branches
//! and loops, to show the analysis stays linear.
//!
//! cargo bench -p gpuinstr-tests --bench liveness

use std::fmt::Write;
use std::time::Instant;

use gpuinstr::stages::lift::lift;
use gpuinstr::stages::liveness::analyze;
use gpuinstr::stages::load;
use gpuinstr_tests::{debian_package_file, kernel_from_assembly};

/// A kernel of about `blocks * 12` instructions: if/else regions under EXEC
/// and a loop every 8 blocks, with values live across them.
fn generated_kernel(blocks: usize) -> String {
    let mut body = String::new();
    for b in 0..blocks {
        let v = 4 + (b % 20);
        writeln!(
            body,
            "\tv_cmp_gt_u32_e32 vcc, {b}, v0\n\ts_and_saveexec_b64 s[2:3], vcc\n\ts_cbranch_execz .LB{b}_end\n\
             \tv_add_u32_e32 v{v}, v{v}, v1\n\tv_mul_lo_u32 v{v}, v{v}, v2\n\ts_add_u32 s{s}, s{s}, 1\n\
             .LB{b}_end:\n\ts_or_b64 exec, exec, s[2:3]\n\tv_add_u32_e32 v3, v3, v{v}",
            s = 8 + b % 16
        )
        .unwrap();
        if b % 8 == 7 {
            writeln!(
                body,
                "\ts_mov_b32 s30, 0\n.LL{b}:\n\ts_add_u32 s30, s30, 1\n\tv_add_u32_e32 v{v}, v{v}, v3\n\
                 \ts_cmp_lt_u32 s30, s31\n\ts_cbranch_scc1 .LL{b}"
            )
            .unwrap();
        }
    }
    body.push_str("\tglobal_store_dword v[0:1], v3, off\n\ts_endpgm");
    body
}

fn main() {
    println!("generated kernels (divergent if regions, loops)");
    println!("instructions   liveness ms   us per 1000 instructions");
    for blocks in [100, 1_000, 10_000, 20_000] {
        let code_object = kernel_from_assembly("gfx90a", &generated_kernel(blocks), "");
        let lifted = lift(&code_object).unwrap();
        let instructions = lifted.statistics().instructions;
        let start = Instant::now();
        let liveness = analyze(&lifted).unwrap();
        let seconds = start.elapsed().as_secs_f64();
        assert_eq!(liveness.functions[0].live_in.len(), instructions);
        println!("{instructions:12}   {:11.1}   {:8.1}", seconds * 1e3, seconds * 1e9 / instructions as f64);
    }

    let library = debian_package_file("librocsparse0", "/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1");
    let input = load::load_for_target(&library, Some("gfx90a:xnack-")).unwrap();
    let mut rows = Vec::new();
    for code_object in &input.code_objects {
        let lifted = lift(code_object).unwrap();
        let instructions = lifted.statistics().instructions;
        let largest = lifted.functions.iter().map(|f| f.instructions().count()).max().unwrap_or(0);
        let start = Instant::now();
        let _ = analyze(&lifted).unwrap();
        rows.push((instructions, largest, start.elapsed().as_secs_f64()));
    }
    let total_instructions: usize = rows.iter().map(|r| r.0).sum();
    let total_seconds: f64 = rows.iter().map(|r| r.2).sum();
    println!(
        "\nrocSPARSE gfx90a:xnack-: {} code objects, {total_instructions} instructions: {:.2} s, {:.1} us per 1000 instructions",
        rows.len(),
        total_seconds,
        total_seconds * 1e9 / total_instructions as f64
    );
    rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    println!("code objects with the largest kernels:");
    println!("largest kernel   code object instructions   liveness ms   us per 1000 instructions");
    for (instructions, largest, seconds) in rows.iter().take(8) {
        println!(
            "{largest:14}   {instructions:24}   {:11.1}   {:8.1}",
            seconds * 1e3,
            seconds * 1e9 / *instructions as f64
        );
    }
}
