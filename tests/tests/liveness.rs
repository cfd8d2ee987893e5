//! Liveness on hand-written assembly. Each test states, per instruction,
//! the units live before it (`live_in`); the sets are worked out by hand
//! from the code, not copied from the output.

use gpuinstr::stages::lift::lift;
use gpuinstr::stages::liveness::{analyze, RegisterFile, Unit, UnitSet};
use gpuinstr_tests::{kernel_from_assembly, PREFETCH_LEFT_IN_FLIGHT};

/// Lifts `body` (and `functions`), analyses it, and checks the live-in set
/// before each instruction of `function` against `expected` (in order).
fn check(processor: &str, body: &str, functions: &str, function: &str, expected: &[&str]) -> Vec<UnitSet> {
    let code_object = kernel_from_assembly(processor, body, functions);
    let lifted = lift(&code_object).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let index = lifted.functions.iter().position(|f| f.name == function).unwrap();
    let live_in = &liveness.functions[index].live_in;
    let texts: Vec<String> = lifted.functions[index]
        .instructions()
        .map(|i| lifted.isa.mc.print(&i.raw, i.address).unwrap_or_default())
        .collect();
    assert_eq!(live_in.len(), expected.len(), "{function}: instructions {texts:#?}");
    for (position, (actual, expected)) in live_in.iter().zip(expected).enumerate() {
        assert_eq!(actual.to_string(), *expected, "{function}: live before #{position} `{}`", texts[position]);
    }
    live_in.clone()
}

#[test]
fn straight_line() {
    check(
        "gfx90a",
        "\ts_mov_b32 s0, 1
\ts_mov_b32 s1, 2
\ts_add_u32 s2, s0, s1
\tv_mov_b32_e32 v0, s2
\tv_mov_b32_e32 v1, 0
\tglobal_store_dword v[0:1], v0, off
\ts_endpgm",
        "",
        "test_kernel",
        &[
            "exec_lo, exec_hi",
            "s0, exec_lo, exec_hi",
            "s[0:1], exec_lo, exec_hi",
            "s2, exec_lo, exec_hi",
            "v0, exec_lo, exec_hi",
            "v[0:1], exec_lo, exec_hi",
            "",
        ],
    );
}

#[test]
fn branches_join_their_successors() {
    check(
        "gfx90a",
        "\ts_cmp_eq_u32 s0, 0
\ts_cbranch_scc1 .LBB0_2
\ts_mov_b32 s1, 5
\ts_branch .LBB0_3
.LBB0_2:
\ts_mov_b32 s1, 7
.LBB0_3:
\ts_add_u32 s2, s1, s3
\ts_endpgm",
        "",
        "test_kernel",
        &["s0, s3", "s3, scc", "s3", "s1, s3", "s3", "s1, s3", ""],
    );
}

#[test]
fn loops_keep_values_live_around_the_back_edge() {
    check(
        "gfx90a",
        "\ts_mov_b32 s0, 0
.LBB0_1:
\ts_add_u32 s0, s0, 1
\ts_cmp_lt_u32 s0, s1
\ts_cbranch_scc1 .LBB0_1
\ts_endpgm",
        "",
        "test_kernel",
        &["s1", "s[0:1]", "s[0:1]", "s[0:1], scc", ""],
    );
}

/// The case ordinary liveness gets wrong: v1 is redefined in the `then`
/// side before any use, but only for the active lanes; the other lanes'
/// v1 (from #0) is read after the join. So v1 is live inside the branch.
#[test]
fn divergent_if_keeps_inactive_lanes_live() {
    let body = "\tv_mov_b32_e32 v1, 1
\tv_cmp_gt_u32_e32 vcc, 4, v0
\ts_and_saveexec_b64 s[0:1], vcc
\ts_cbranch_execz .LBB0_2
\tv_mov_b32_e32 v1, 2
.LBB0_2:
\ts_or_b64 exec, exec, s[0:1]
\tglobal_store_dword v[2:3], v1, off
\ts_endpgm";
    let live_in = check(
        "gfx90a",
        body,
        "",
        "test_kernel",
        &[
            // #0 runs with the full mask: its def of v1 kills.
            "v0, v[2:3], exec_lo, exec_hi",
            "v[0:3], exec_lo, exec_hi",
            "v[1:3], vcc_lo, vcc_hi, exec_lo, exec_hi",
            "s[0:1], v[1:3], exec_lo, exec_hi",
            // #4 writes v1 under a partial mask: v1 stays live before it.
            "s[0:1], v[1:3], exec_lo, exec_hi",
            "s[0:1], v[1:3], exec_lo, exec_hi",
            "v[1:3], exec_lo, exec_hi",
            "",
        ],
    );
    let code_object = kernel_from_assembly("gfx90a", body, "");
    let lifted = lift(&code_object).unwrap();
    let liveness = analyze(&lifted).unwrap();
    assert_eq!(liveness.functions[0].exec_full, vec![true, true, true, false, false, false, true, true]);
    // So v1 is never offered as free inside the branch.
    let allocated = UnitSet::range(RegisterFile::Vgpr, 0, 8);
    assert!(!liveness.functions[0].free_at(4, &allocated).contains(gpuinstr::stages::liveness::Unit::vgpr(1)));
    assert!(live_in[4].contains(gpuinstr::stages::liveness::Unit::vgpr(1)));
}

/// A value made and used only inside the `if` (v4) is needed only in the
/// lanes the `if` runs: its write there writes all of them, so v4 is dead
/// before the write and across the whole `if` head, although the write is
/// under a partial mask. v5 is read inside (lanes) but also after the join
/// (whole): the `s_or_b64 exec` turns its liveness whole, so the partial
/// write cannot kill it. A DPP read sees other lanes: v6 stays whole-live
/// across the DPP's own partial write target v7 (a DPP write kills no lanes).
#[test]
fn lanes_liveness_inside_a_divergent_if() {
    check(
        "gfx90a",
        "\tv_cmp_gt_u32_e32 vcc, 4, v0
\ts_and_saveexec_b64 s[0:1], vcc
\ts_cbranch_execz .LBB0_2
\tv_add_u32_e32 v4, 1, v0
\tv_add_u32_e32 v5, v4, v5
\tv_mov_b32_dpp v7, v6 row_shr:1 row_mask:0xf bank_mask:0xf
\tglobal_store_dword v[2:3], v7, off
.LBB0_2:
\ts_or_b64 exec, exec, s[0:1]
\tglobal_store_dword v[2:3], v5, off
\ts_endpgm",
        "",
        "test_kernel",
        &[
            "v0, v[2:3], v[5:7], exec_lo, exec_hi",
            "v0, v[2:3], v[5:7], vcc_lo, vcc_hi, exec_lo, exec_hi",
            // v4 is not live before its partial write (#3), nor above it;
            // v7 is (the DPP write kills no lanes).
            "s[0:1], v0, v[2:3], v[5:7], exec_lo, exec_hi",
            "s[0:1], v0, v[2:3], v[5:7], exec_lo, exec_hi",
            "s[0:1], v[2:7], exec_lo, exec_hi",
            "s[0:1], v[2:3], v[5:7], exec_lo, exec_hi",
            "s[0:1], v[2:3], v5, v7, exec_lo, exec_hi",
            "s[0:1], v[2:3], v5, exec_lo, exec_hi",
            "v[2:3], v5, exec_lo, exec_hi",
            "",
        ],
    );
}

/// if/else as the structurizer writes it: both sides write v1 under a
/// partial mask, so neither kills it; v1 stays live through both sides.
#[test]
fn divergent_if_else() {
    check(
        "gfx90a",
        "\tv_cmp_gt_u32_e32 vcc, 4, v0
\ts_and_saveexec_b64 s[0:1], vcc
\ts_xor_b64 s[0:1], exec, s[0:1]
\tv_mov_b32_e32 v1, 2
\ts_andn2_saveexec_b64 s[0:1], s[0:1]
\tv_mov_b32_e32 v1, 3
\ts_or_b64 exec, exec, s[0:1]
\tglobal_store_dword v[2:3], v1, off
\ts_endpgm",
        "",
        "test_kernel",
        &[
            "v[0:3], exec_lo, exec_hi",
            "v[1:3], vcc_lo, vcc_hi, exec_lo, exec_hi",
            "s[0:1], v[1:3], exec_lo, exec_hi",
            "s[0:1], v[1:3], exec_lo, exec_hi",
            "s[0:1], v[1:3], exec_lo, exec_hi",
            "s[0:1], v[1:3], exec_lo, exec_hi",
            "s[0:1], v[1:3], exec_lo, exec_hi",
            "v[1:3], exec_lo, exec_hi",
            "",
        ],
    );
}

#[test]
fn scc_and_vcc_producers_and_consumers() {
    check(
        "gfx90a",
        "\ts_cmp_lg_u32 s0, 0
\ts_cselect_b32 s1, s2, s3
\ts_add_u32 s4, s4, 1
\ts_addc_u32 s5, s5, 0
\tv_cmp_eq_u32_e32 vcc, s1, v0
\tv_cndmask_b32_e32 v1, v2, v3, vcc
\tglobal_store_dword v[4:5], v1, off
\ts_endpgm",
        "",
        "test_kernel",
        &[
            // s_cmp writes SCC: SCC is not live before it.
            "s0, s[2:5], v0, v[2:5], exec_lo, exec_hi",
            "s[2:5], v0, v[2:5], exec_lo, exec_hi, scc",
            // s_add writes SCC without reading it; s_addc reads it.
            "s1, s[4:5], v0, v[2:5], exec_lo, exec_hi",
            "s1, s5, v0, v[2:5], exec_lo, exec_hi, scc",
            "s1, v0, v[2:5], exec_lo, exec_hi",
            "v[2:5], vcc_lo, vcc_hi, exec_lo, exec_hi",
            "v1, v[4:5], exec_lo, exec_hi",
            "",
        ],
    );
}

#[test]
fn register_pairs_are_two_units() {
    check(
        "gfx90a",
        "\ts_load_dwordx2 s[2:3], s[0:1], 0x0
\ts_waitcnt lgkmcnt(0)
\tv_mov_b32_e32 v0, s2
\tv_lshlrev_b64 v[2:3], 2, v[0:1]
\tglobal_store_dword v[2:3], v0, off
\ts_endpgm",
        "",
        "test_kernel",
        &[
            // s3 is loaded but never read: only s2 of the pair is live.
            "s[0:1], v1, exec_lo, exec_hi",
            "s2, v1, exec_lo, exec_hi",
            "s2, v1, exec_lo, exec_hi",
            "v[0:1], exec_lo, exec_hi",
            "v0, v[2:3], exec_lo, exec_hi",
            "",
        ],
    );
}

#[test]
fn accumulation_registers() {
    check(
        "gfx90a",
        "\tv_accvgpr_write_b32 a0, v0
\tv_mov_b32_e32 v0, 0
\tv_accvgpr_read_b32 v1, a0
\tglobal_store_dword v[2:3], v1, off
\ts_endpgm",
        "",
        "test_kernel",
        &[
            "v0, v[2:3], exec_lo, exec_hi",
            "v[2:3], a0, exec_lo, exec_hi",
            "v[2:3], a0, exec_lo, exec_hi",
            "v[1:3], exec_lo, exec_hi",
            "",
        ],
    );
}

const CALLEE: &str = "\t.p2align 2
\t.type callee,@function
callee:
\tv_add_u32_e32 v0, 1, v0
\ts_setpc_b64 s[30:31]
\t.size callee, .-callee";

const CALLING_KERNEL: &str = "\ts_getpc_b64 s[4:5]
\ts_add_u32 s4, s4, callee@rel32@lo+4
\ts_addc_u32 s5, s5, callee@rel32@hi+12
\tv_mov_b32_e32 v0, 7
\ts_swappc_b64 s[30:31], s[4:5]
\tglobal_store_dword v[2:3], v0, off
\ts_endpgm";

/// The call uses what the callee's entry needs (v0, and v[2:3] that the
/// caller needs after the return and the callee must keep); the callee
/// returns into what is live after the call.
#[test]
fn calls_use_the_callee_and_callees_return_into_the_caller() {
    check(
        "gfx90a",
        CALLING_KERNEL,
        CALLEE,
        "test_kernel",
        &[
            "v[2:3], exec_lo, exec_hi",
            "s[4:5], v[2:3], exec_lo, exec_hi",
            "s[4:5], v[2:3], exec_lo, exec_hi, scc",
            "s[4:5], v[2:3], exec_lo, exec_hi",
            // s[30:31] is written by the call itself, so it is not live before it.
            "s[4:5], v0, v[2:3], exec_lo, exec_hi",
            "v0, v[2:3], exec_lo, exec_hi",
            "",
        ],
    );
    check(
        "gfx90a",
        CALLING_KERNEL,
        CALLEE,
        "callee",
        &["s[30:31], v0, v[2:3], exec_lo, exec_hi", "s[30:31], v0, v[2:3], exec_lo, exec_hi"],
    );
}

/// An indirect jump and a call through a loaded address: nothing is known
/// about what follows, so every register gfx90a code can name is live
/// (not s102-s105, FLAT_SCRATCH and XNACK_MASK there: a payload that
/// saved them as SGPRs would not assemble).
#[test]
fn unknown_flow_makes_everything_live() {
    let code_object = kernel_from_assembly(
        "gfx90a",
        "\ts_load_dwordx2 s[4:5], s[0:1], 0x0
\ts_waitcnt lgkmcnt(0)
\ts_swappc_b64 s[30:31], s[4:5]
\ts_setpc_b64 s[4:5]",
        "",
    );
    let lifted = lift(&code_object).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let kernel = &liveness.functions[0];
    let all = UnitSet::every_register(lifted.isa.generation);
    assert!(!all.contains(Unit::sgpr(102)) && all.contains(Unit::sgpr(101)));
    assert_eq!(kernel.live_out[3], all, "after an indirect jump");
    assert_eq!(kernel.live_in[2], all, "before a call of an unknown function");
    assert_eq!(kernel.touched, all);
}

/// A load whose result is partly unread: v[5:7] are dead after it by
/// liveness, but the load may still be writing them until an `s_waitcnt`
/// waits for vmcnt (only lgkmcnt: to the end of the kernel). And a load
/// read on one path only (Tensile's prefetch at a loop exit): where the
/// other path leaves, liveness calls its registers dead while it is still
/// in flight.
#[test]
fn registers_loads_may_still_write_whatever_liveness_says() {
    use gpuinstr::stages::liveness::pending::pending_before;
    use gpuinstr::stages::liveness::Unit;
    let in_flight = |body: &str| -> (Vec<String>, gpuinstr::stages::liveness::FunctionLiveness) {
        let code_object = kernel_from_assembly("gfx90a", body, "");
        let lifted = lift(&code_object).unwrap();
        let mut liveness = analyze(&lifted).unwrap();
        let pending = pending_before(&lifted.functions[0], &lifted.isa, &liveness.functions[0], false);
        (pending.iter().map(|p| p.vector_registers().to_string()).collect(), liveness.functions.remove(0))
    };
    for (wait, last, landed) in [("vmcnt(0)", "s_waitcnt vmcnt(0)", true), ("lgkmcnt(0)", "s_nop 0", false)] {
        let (texts, liveness) = in_flight(&format!(
            "\tglobal_load_dwordx4 v[4:7], v[2:3], off
\tv_mov_b32_e32 v8, 0
\ts_waitcnt {wait}
\tglobal_store_dword v[2:3], v4, off
\t{last}
\ts_endpgm"
        ));
        let after = if landed { "" } else { "v[4:7]" };
        assert_eq!(texts, ["", "v[4:7]", "v[4:7]", after, after, after], "{wait}");
        // Liveness itself calls v[5:7] dead right after the load.
        assert!(!liveness.live_in[1].contains(Unit::vgpr(5)));
    }
    let (texts, liveness) = in_flight(&format!("{PREFETCH_LEFT_IN_FLIGHT}\ts_endpgm"));
    assert_eq!(texts[8], "v[4:5]", "at the loop's exit: {texts:?}");
    assert!(!liveness.live_in[8].contains(Unit::vgpr(4)), "dead to liveness there");
    assert_eq!(texts[1], "", "before the first load, nothing");
}
