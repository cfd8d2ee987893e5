//! A count kept in registers (a plan's `count-in-registers`, docs/plan.md):
//! instead of calling the hook, each counting point adds its two constants
//! to registers stage sva set aside for the kernel (stages::sva::counts),
//! the kernel's entry clears them (or its first point sets them) and each
//! exit adds them to the tool's global, once per wave. The hook adds
//! `scalar + vector * popcount(EXEC)` to the global; counting per lane,
//! every active lane adds `vector` to its own count and the wave `scalar`
//! to its own, which sum to the same; counting per wave, the wave adds
//! `popcount(EXEC) * vector + scalar` to its count.
//!
//! A point costs two to five instructions (none touch EXEC, VCC or memory;
//! SCC is saved where it is live), where a hook's payload costs a global
//! atomic and some thirty instructions.

use crate::stages::payloads::CodeLine;
use crate::stages::sva::counts::{CountRegisters, WAVE_LANES};

/// The largest constant a VOP3 instruction takes inline (GFX9 VOP3 takes
/// no literal).
const INLINE_MAX: u32 = 64;

/// A counting point's code. `at_entry`: the point is the kernel's first
/// instruction, where its code sets the count instead of adding to it (and
/// the kernel's entry clears nothing: see [`sets_at_entry`]). `carry_wait`:
/// wait states between the carry's VALU write and its VALU read (gfx940+
/// have VALU-written SGPR forwarding hazards; taken as applying to a
/// carry, to be safe).
pub fn point_code(
    registers: CountRegisters,
    scalar: u32,
    vector: u32,
    scc_live: bool,
    carry_wait: bool,
    at_entry: bool,
) -> Vec<CodeLine> {
    let at_entry = at_entry && sets_at_entry(registers, vector);
    let code = match (registers.lanes, at_entry) {
        (Some(_), false) => lanes_point(registers, scalar, vector, scc_live, carry_wait),
        (Some(_), true) => lanes_entry_point(registers, scalar, vector),
        (None, false) => wave_point(registers, scalar, vector, scc_live),
        (None, true) => wave_entry_point(registers, scalar, vector),
    };
    code.into_iter().map(CodeLine::from).collect()
}

/// Whether a point at the kernel's first instruction adding `vector` per
/// lane sets the count (so the entry need not clear it). Per lane, a
/// vector amount past the inline constants cannot be selected per lane in
/// one instruction: that entry clears and the point adds.
pub fn sets_at_entry(registers: CountRegisters, vector: u32) -> bool {
    registers.lanes.is_none() || vector <= INLINE_MAX
}

fn lanes_point(registers: CountRegisters, scalar: u32, vector: u32, scc_live: bool, carry_wait: bool) -> Vec<String> {
    let CountRegisters { lanes, wave, scratch } = registers;
    let lanes = lanes.expect("counting per lane");
    let pair = format!("s[{scratch}:{}]", scratch + 1);
    let mut code: Vec<String> = Vec::new();
    if vector > 0 {
        // The carry goes to an SGPR pair (VOP3), not VCC.
        let amount = if vector <= INLINE_MAX {
            vector.to_string()
        } else {
            code.push(constant_to_sgpr(scratch, vector));
            format!("s{scratch}")
        };
        code.push(format!("v_add_co_u32_e64 v{lanes}, {pair}, {amount}, v{lanes}"));
        if carry_wait {
            code.push("s_nop 1".into());
        }
        code.push(format!("v_addc_co_u32_e64 v{}, {pair}, 0, v{}, {pair}", lanes + 1, lanes + 1));
    }
    if scalar > 0 {
        if scc_live {
            code.push(format!("s_cselect_b64 {pair}, -1, 0"));
        }
        code.push(format!("s_add_u32 s{wave}, s{wave}, {scalar}"));
        code.push(format!("s_addc_u32 s{}, s{}, 0", wave + 1, wave + 1));
        if scc_live {
            code.push(format!("s_cmp_lg_u64 {pair}, 0"));
        }
    }
    code
}

/// The first point, per lane: every lane's count set (`vector` in the
/// lanes active at the entry, 0 in the others, which may be turned on
/// later) and the wave's. SCC is not live at a kernel's entry.
fn lanes_entry_point(registers: CountRegisters, scalar: u32, vector: u32) -> Vec<String> {
    let CountRegisters { lanes, wave, scratch } = registers;
    let lanes = lanes.expect("counting per lane");
    let pair = format!("s[{scratch}:{}]", scratch + 1);
    // (Saved by a move, which the payload check follows, then set.)
    let mut code = vec![format!("s_mov_b64 {pair}, exec"), "s_mov_b64 exec, -1".into()];
    code.push(match vector {
        0 => format!("v_mov_b32_e32 v{lanes}, 0"),
        _ => format!("v_cndmask_b32_e64 v{lanes}, 0, {vector}, {pair}"),
    });
    code.push(format!("v_mov_b32_e32 v{}, 0", lanes + 1));
    code.push(format!("s_mov_b64 exec, {pair}"));
    code.extend(set_pair(wave, scalar));
    code
}

fn wave_point(registers: CountRegisters, scalar: u32, vector: u32, scc_live: bool) -> Vec<String> {
    let CountRegisters { wave, scratch, .. } = registers;
    let (count, saved_scc) = (scratch, scratch + 1);
    let mut code: Vec<String> = Vec::new();
    let add = |amount: String| {
        [format!("s_add_u32 s{wave}, s{wave}, {amount}"), format!("s_addc_u32 s{}, s{}, 0", wave + 1, wave + 1)]
    };
    match (vector, popcount_times(count, vector, scalar)) {
        (0, _) if scalar == 0 => return code,
        (0, _) => code.extend(add(scalar.to_string())),
        (_, Some(scale)) => {
            code.extend(scale);
            code.extend(add(format!("s{count}")));
        }
        (_, None) => {
            // The sum could pass 32 bits: the scalar amount on its own.
            code.extend(
                popcount_times(count, vector, 0)
                    .expect("stage sva counts per wave only where 64 lanes times a vector amount fit"),
            );
            code.extend(add(format!("s{count}")));
            code.extend(add(scalar.to_string()));
        }
    }
    if scc_live {
        code.insert(0, format!("s_cselect_b32 s{saved_scc}, 1, 0"));
        code.push(format!("s_cmp_lg_u32 s{saved_scc}, 0"));
    }
    code
}

/// The first point, per wave: the count set to what it adds.
fn wave_entry_point(registers: CountRegisters, scalar: u32, vector: u32) -> Vec<String> {
    let CountRegisters { wave, .. } = registers;
    match (vector, popcount_times(wave, vector, scalar)) {
        (0, _) => set_pair(wave, scalar),
        (_, Some(mut code)) => {
            code.push(format!("s_mov_b32 s{}, 0", wave + 1));
            code
        }
        (_, None) => {
            let mut code = popcount_times(wave, vector, 0)
                .expect("stage sva counts per wave only where 64 lanes times a vector amount fit");
            code.push(format!("s_mov_b32 s{}, 0", wave + 1));
            code.push(format!("s_add_u32 s{wave}, s{wave}, {scalar}"));
            code.push(format!("s_addc_u32 s{}, s{}, 0", wave + 1, wave + 1));
            code
        }
    }
}

/// `s[sgpr] = popcount(EXEC) * vector + scalar` (vector > 0), in two to
/// three SALU instructions; none where the sum could pass 32 bits.
fn popcount_times(sgpr: u16, vector: u32, scalar: u32) -> Option<Vec<String>> {
    vector.checked_mul(WAVE_LANES)?.checked_add(scalar)?;
    let mut code = vec![format!("s_bcnt1_i32_b64 s{sgpr}, exec")];
    match vector {
        1 if scalar == 0 => {}
        1 => code.push(format!("s_add_u32 s{sgpr}, s{sgpr}, {scalar}")),
        2 | 4 | 8 | 16 => {
            let shift = vector.trailing_zeros();
            code.push(match scalar {
                0 => format!("s_lshl_b32 s{sgpr}, s{sgpr}, {shift}"),
                _ => format!("s_lshl{shift}_add_u32 s{sgpr}, s{sgpr}, {scalar}"),
            });
        }
        _ => {
            code.push(format!("s_mul_i32 s{sgpr}, s{sgpr}, {vector}"));
            if scalar > 0 {
                code.push(format!("s_add_u32 s{sgpr}, s{sgpr}, {scalar}"));
            }
        }
    }
    Some(code)
}

/// A 64-bit SGPR pair set to `value`.
fn set_pair(sgpr: u16, value: u32) -> Vec<String> {
    match value {
        0..=64 => vec![format!("s_mov_b64 s[{sgpr}:{}], {value}", sgpr + 1)],
        _ => vec![format!("s_mov_b32 s{sgpr}, {value}"), format!("s_mov_b32 s{}, 0", sgpr + 1)],
    }
}

/// `s_movk_i32` (4 bytes) where the constant fits its signed 16 bits.
fn constant_to_sgpr(sgpr: u16, value: u32) -> String {
    if value < 0x8000 {
        format!("s_movk_i32 s{sgpr}, 0x{value:x}")
    } else {
        format!("s_mov_b32 s{sgpr}, 0x{value:x}")
    }
}

/// The kernel's entry, after the preamble, where no point sets the count:
/// the count zero (per lane: in every lane, as lanes off at the entry may
/// be turned on later). SCC is not live at a kernel's entry.
pub fn entry_code(registers: CountRegisters) -> Vec<String> {
    let CountRegisters { lanes, wave, scratch } = registers;
    let pair = format!("s[{scratch}:{}]", scratch + 1);
    let mut code = Vec::new();
    if let Some(lanes) = lanes {
        code.push(format!("s_mov_b64 {pair}, exec"));
        code.push("s_mov_b64 exec, -1".into());
        code.push(format!("v_mov_b32_e32 v{lanes}, 0"));
        code.push(format!("v_mov_b32_e32 v{}, 0", lanes + 1));
        code.push(format!("s_mov_b64 exec, {pair}"));
    }
    code.push(format!("s_mov_b64 s[{wave}:{}], 0", wave + 1));
    code
}

/// How an exit finds the tool's global.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GlobalAddress {
    /// Defined in the instrumented code object (protected): pc-relative.
    PcRelative,
    /// Defined elsewhere (`--tool-globals external`): through the GOT.
    Got,
}

/// Before each `s_endpgm`: the counts added to `global` (its symbol;
/// `managed`: a `__managed__` variable, a pointer to the storage), once per
/// wave. `dead`: VGPRs dead there, [`CountRegisters::exit_vgprs`] of them
/// (the zero offset, then per lane the wave count's high half, per wave an
/// aligned pair for the count). EXEC and SCC, which nothing reads any
/// more, are left changed. `carry_wait` as for [`point_code`].
pub fn exit_code(
    registers: CountRegisters,
    global: &str,
    address: GlobalAddress,
    managed: bool,
    dead: &[u16],
    carry_wait: bool,
) -> Vec<String> {
    let CountRegisters { lanes, wave, scratch } = registers;
    // The VGPRs it writes are dead at the exit, but a load may still be
    // writing them: once per wave, everything in flight first.
    let mut code = vec!["s_waitcnt vmcnt(0) lgkmcnt(0)".to_string()];
    // Lanes first: the wave's count joins lane 0's (VOP3 reads one SGPR on
    // GFX9: the high half goes through a VGPR), and the wave's SGPRs are
    // free for the address after.
    let (base, data) = match lanes {
        Some(lanes) => {
            let carry = format!("s[{scratch}:{}]", scratch + 1);
            let high = dead[1];
            code.push("s_mov_b64 exec, 1".into());
            code.push(format!("v_mov_b32_e32 v{high}, s{}", wave + 1));
            code.push(format!("v_add_co_u32_e64 v{lanes}, {carry}, s{wave}, v{lanes}"));
            if carry_wait {
                code.push("s_nop 1".into());
            }
            code.push(format!("v_addc_co_u32_e64 v{}, {carry}, v{high}, v{}, {carry}", lanes + 1, lanes + 1));
            code.push("s_mov_b64 exec, -1".into());
            (wave, lanes)
        }
        None => (scratch, dead[1]),
    };
    let base_pair = format!("s[{base}:{}]", base + 1);
    code.push(format!("s_getpc_b64 {base_pair}"));
    let loads = match address {
        GlobalAddress::PcRelative => {
            code.push(format!("s_add_u32 s{base}, s{base}, {global}@rel32@lo+4"));
            code.push(format!("s_addc_u32 s{}, s{}, {global}@rel32@hi+12", base + 1, base + 1));
            usize::from(managed)
        }
        GlobalAddress::Got => {
            code.push(format!("s_add_u32 s{base}, s{base}, {global}@gotpcrel32@lo+4"));
            code.push(format!("s_addc_u32 s{}, s{}, {global}@gotpcrel32@hi+12", base + 1, base + 1));
            1 + usize::from(managed)
        }
    };
    for load in 0..loads {
        code.push(format!("s_load_dwordx2 {base_pair}, {base_pair}, 0x0"));
        if load + 1 < loads {
            code.push("s_waitcnt lgkmcnt(0)".into());
        }
    }
    // (The moves overlap the last load.)
    let offset = dead[0];
    if lanes.is_none() {
        code.push("s_mov_b64 exec, 1".into());
        code.push(format!("v_mov_b32_e32 v{data}, s{wave}"));
        code.push(format!("v_mov_b32_e32 v{}, s{}", data + 1, wave + 1));
    }
    code.push(format!("v_mov_b32_e32 v{offset}, 0"));
    if loads > 0 {
        code.push("s_waitcnt lgkmcnt(0)".into());
    }
    code.push(format!("global_atomic_add_x2 v{offset}, v[{data}:{}], {base_pair}", data + 1));
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    const LANES: CountRegisters = CountRegisters { lanes: Some(40), wave: 60, scratch: 62 };
    const WAVE: CountRegisters = CountRegisters { lanes: None, wave: 60, scratch: 62 };

    fn text(code: Vec<CodeLine>) -> String {
        code.iter().map(|l| l.to_string()).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn a_point_per_lane_adds_only_what_it_counts_and_saves_scc_where_it_is_live() {
        insta::assert_snapshot!(text(point_code(LANES, 3, 5, false, false, false)), @r"
        v_add_co_u32_e64 v40, s[62:63], 5, v40
        v_addc_co_u32_e64 v41, s[62:63], 0, v41, s[62:63]
        s_add_u32 s60, s60, 3
        s_addc_u32 s61, s61, 0
        ");
        insta::assert_snapshot!(text(point_code(LANES, 2, 0, true, false, false)), @r"
        s_cselect_b64 s[62:63], -1, 0
        s_add_u32 s60, s60, 2
        s_addc_u32 s61, s61, 0
        s_cmp_lg_u64 s[62:63], 0
        ");
        insta::assert_snapshot!(text(point_code(LANES, 0, 100, true, true, false)), @r"
        s_movk_i32 s62, 0x64
        v_add_co_u32_e64 v40, s[62:63], s62, v40
        s_nop 1
        v_addc_co_u32_e64 v41, s[62:63], 0, v41, s[62:63]
        ");
        assert!(point_code(LANES, 0, 0, true, true, false).is_empty());
    }

    #[test]
    fn a_point_per_wave_adds_popcount_times_its_vector_amount_and_its_scalar_one() {
        insta::assert_snapshot!(text(point_code(WAVE, 3, 12, true, false, false)), @r"
        s_cselect_b32 s63, 1, 0
        s_bcnt1_i32_b64 s62, exec
        s_mul_i32 s62, s62, 12
        s_add_u32 s62, s62, 3
        s_add_u32 s60, s60, s62
        s_addc_u32 s61, s61, 0
        s_cmp_lg_u32 s63, 0
        ");
        // Powers of two shift; one adds the scalar amount alone.
        insta::assert_snapshot!(text(point_code(WAVE, 0, 4, false, false, false)), @r"
        s_bcnt1_i32_b64 s62, exec
        s_lshl_b32 s62, s62, 2
        s_add_u32 s60, s60, s62
        s_addc_u32 s61, s61, 0
        ");
        insta::assert_snapshot!(text(point_code(WAVE, 5, 8, false, false, false)), @r"
        s_bcnt1_i32_b64 s62, exec
        s_lshl3_add_u32 s62, s62, 5
        s_add_u32 s60, s60, s62
        s_addc_u32 s61, s61, 0
        ");
        insta::assert_snapshot!(text(point_code(WAVE, 7, 1, false, false, false)), @r"
        s_bcnt1_i32_b64 s62, exec
        s_add_u32 s62, s62, 7
        s_add_u32 s60, s60, s62
        s_addc_u32 s61, s61, 0
        ");
        insta::assert_snapshot!(text(point_code(WAVE, 5, 0, false, false, false)), @r"
        s_add_u32 s60, s60, 5
        s_addc_u32 s61, s61, 0
        ");
        // A sum that could pass 32 bits: the scalar amount on its own.
        insta::assert_snapshot!(text(point_code(WAVE, u32::MAX, 2, false, false, false)), @r"
        s_bcnt1_i32_b64 s62, exec
        s_lshl_b32 s62, s62, 1
        s_add_u32 s60, s60, s62
        s_addc_u32 s61, s61, 0
        s_add_u32 s60, s60, 4294967295
        s_addc_u32 s61, s61, 0
        ");
        assert!(point_code(WAVE, 0, 0, true, false, false).is_empty());
    }

    #[test]
    fn the_first_point_sets_the_count_and_the_entry_clears_it_otherwise() {
        insta::assert_snapshot!(text(point_code(LANES, 3, 5, false, false, true)), @r"
        s_mov_b64 s[62:63], exec
        s_mov_b64 exec, -1
        v_cndmask_b32_e64 v40, 0, 5, s[62:63]
        v_mov_b32_e32 v41, 0
        s_mov_b64 exec, s[62:63]
        s_mov_b64 s[60:61], 3
        ");
        // Past the inline constants, per lane: the entry clears, the point adds.
        assert!(!sets_at_entry(LANES, 100));
        assert_eq!(point_code(LANES, 3, 100, false, false, true), point_code(LANES, 3, 100, false, false, false));
        insta::assert_snapshot!(text(point_code(WAVE, 11, 2, false, false, true)), @r"
        s_bcnt1_i32_b64 s60, exec
        s_lshl1_add_u32 s60, s60, 11
        s_mov_b32 s61, 0
        ");
        insta::assert_snapshot!(text(point_code(WAVE, 100, 0, false, false, true)), @r"
        s_mov_b32 s60, 100
        s_mov_b32 s61, 0
        ");
        insta::assert_snapshot!(entry_code(LANES).join("\n"), @r"
        s_mov_b64 s[62:63], exec
        s_mov_b64 exec, -1
        v_mov_b32_e32 v40, 0
        v_mov_b32_e32 v41, 0
        s_mov_b64 exec, s[62:63]
        s_mov_b64 s[60:61], 0
        ");
        insta::assert_snapshot!(entry_code(WAVE).join("\n"), @"s_mov_b64 s[60:61], 0");
    }

    #[test]
    fn an_exit_adds_the_count_to_the_global_from_lane_zero_or_every_lane() {
        insta::assert_snapshot!(
            exit_code(LANES, "Counter", GlobalAddress::PcRelative, true, &[2, 3], false).join("\n"), @r"
        s_waitcnt vmcnt(0) lgkmcnt(0)
        s_mov_b64 exec, 1
        v_mov_b32_e32 v3, s61
        v_add_co_u32_e64 v40, s[62:63], s60, v40
        v_addc_co_u32_e64 v41, s[62:63], v3, v41, s[62:63]
        s_mov_b64 exec, -1
        s_getpc_b64 s[60:61]
        s_add_u32 s60, s60, Counter@rel32@lo+4
        s_addc_u32 s61, s61, Counter@rel32@hi+12
        s_load_dwordx2 s[60:61], s[60:61], 0x0
        v_mov_b32_e32 v2, 0
        s_waitcnt lgkmcnt(0)
        global_atomic_add_x2 v2, v[40:41], s[60:61]
        ");
        insta::assert_snapshot!(
            exit_code(WAVE, "Counter", GlobalAddress::PcRelative, false, &[2, 0, 1], false).join("\n"), @r"
        s_waitcnt vmcnt(0) lgkmcnt(0)
        s_getpc_b64 s[62:63]
        s_add_u32 s62, s62, Counter@rel32@lo+4
        s_addc_u32 s63, s63, Counter@rel32@hi+12
        s_mov_b64 exec, 1
        v_mov_b32_e32 v0, s60
        v_mov_b32_e32 v1, s61
        v_mov_b32_e32 v2, 0
        global_atomic_add_x2 v2, v[0:1], s[62:63]
        ");
        insta::assert_snapshot!(
            exit_code(WAVE, "Counter", GlobalAddress::Got, true, &[2, 0, 1], false).join("\n"), @r"
        s_waitcnt vmcnt(0) lgkmcnt(0)
        s_getpc_b64 s[62:63]
        s_add_u32 s62, s62, Counter@gotpcrel32@lo+4
        s_addc_u32 s63, s63, Counter@gotpcrel32@hi+12
        s_load_dwordx2 s[62:63], s[62:63], 0x0
        s_waitcnt lgkmcnt(0)
        s_load_dwordx2 s[62:63], s[62:63], 0x0
        s_mov_b64 exec, 1
        v_mov_b32_e32 v0, s60
        v_mov_b32_e32 v1, s61
        v_mov_b32_e32 v2, 0
        s_waitcnt lgkmcnt(0)
        global_atomic_add_x2 v2, v[0:1], s[62:63]
        ");
    }
}
