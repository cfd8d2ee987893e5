//! A count kept in registers (a plan's `count-in-registers`, docs/plan.md):
//! instead of calling the hook, each counting point adds its two constants
//! to registers stage sva set aside for the kernel (stages::sva::counts),
//! the kernel's entry clears them and each exit adds them to the tool's
//! global, once per wave. The hook adds `scalar + vector * popcount(EXEC)`
//! to the global; here every active lane adds `vector` to its own count and
//! the wave adds `scalar` to its own, which sum to the same.
//!
//! A point costs two to five instructions (none touch EXEC, VCC or memory;
//! SCC is saved where it is live), where a hook's payload costs a global
//! atomic and some thirty instructions.

use crate::stages::payloads::CodeLine;
use crate::stages::sva::counts::CountRegisters;

/// The largest constant a VOP3 instruction takes inline (GFX9 VOP3 takes
/// no literal).
const INLINE_MAX: u32 = 64;

/// A counting point's code: the lanes add `vector`, the wave `scalar`.
/// `carry_wait`: wait states between the carry's VALU write and its VALU
/// read (gfx940+ have VALU-written SGPR forwarding hazards; taken as
/// applying to a carry, to be safe).
pub fn point_code(
    registers: CountRegisters,
    scalar: u32,
    vector: u32,
    scc_live: bool,
    carry_wait: bool,
) -> Vec<CodeLine> {
    let CountRegisters { lanes, wave, scratch } = registers;
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
    code.into_iter().map(CodeLine::from).collect()
}

/// `s_movk_i32` (4 bytes) where the constant fits its signed 16 bits.
fn constant_to_sgpr(sgpr: u16, value: u32) -> String {
    if value < 0x8000 {
        format!("s_movk_i32 s{sgpr}, 0x{value:x}")
    } else {
        format!("s_mov_b32 s{sgpr}, 0x{value:x}")
    }
}

/// The kernel's entry, after the preamble: both counts zero, in every lane
/// (lanes off at the entry may be turned on later).
pub fn entry_code(registers: CountRegisters) -> Vec<String> {
    let CountRegisters { lanes, wave, scratch } = registers;
    vec![
        format!("s_mov_b64 s[{scratch}:{}], exec", scratch + 1),
        "s_mov_b64 exec, -1".into(),
        format!("v_mov_b32_e32 v{lanes}, 0"),
        format!("v_mov_b32_e32 v{}, 0", lanes + 1),
        format!("s_mov_b64 exec, s[{scratch}:{}]", scratch + 1),
        format!("s_mov_b64 s[{wave}:{}], 0", wave + 1),
    ]
}

/// Before each `s_endpgm`: every lane's count, lane 0's with the wave's
/// added, to `global` (its symbol; `managed`: a `__managed__` variable, a
/// pointer to the storage). `offset` and `high` are VGPRs dead there.
/// EXEC and SCC, which nothing reads any more, are left changed.
/// `carry_wait` as for [`point_code`].
pub fn exit_code(
    registers: CountRegisters,
    global: &str,
    managed: bool,
    (offset, high): (u16, u16),
    carry_wait: bool,
) -> Vec<String> {
    let CountRegisters { lanes, wave, scratch } = registers;
    let address = format!("s[{wave}:{}]", wave + 1);
    let carry = format!("s[{scratch}:{}]", scratch + 1);
    let mut code = vec![
        // Lane 0 takes the wave's count (VOP3 reads one SGPR on GFX9: the
        // high half goes through a VGPR).
        "s_mov_b64 exec, 1".into(),
        format!("v_mov_b32_e32 v{high}, s{}", wave + 1),
        format!("v_add_co_u32_e64 v{lanes}, {carry}, s{wave}, v{lanes}"),
        (if carry_wait { "s_nop 1" } else { "" }).into(),
        format!("v_addc_co_u32_e64 v{}, {carry}, v{high}, v{}, {carry}", lanes + 1, lanes + 1),
        "s_mov_b64 exec, -1".into(),
        format!("v_mov_b32_e32 v{offset}, 0"),
        // The wave's count is in lane 0 now: its SGPRs take the address.
        format!("s_getpc_b64 {address}"),
        format!("s_add_u32 s{wave}, s{wave}, {global}@gotpcrel32@lo+4"),
        format!("s_addc_u32 s{}, s{}, {global}@gotpcrel32@hi+12", wave + 1, wave + 1),
        format!("s_load_dwordx2 {address}, {address}, 0x0"),
        "s_waitcnt lgkmcnt(0)".into(),
    ];
    if managed {
        code.push(format!("s_load_dwordx2 {address}, {address}, 0x0"));
        code.push("s_waitcnt lgkmcnt(0)".into());
    }
    code.push(format!("global_atomic_add_x2 v{offset}, v[{lanes}:{}], {address}", lanes + 1));
    code.retain(|line| !line.is_empty());
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    const REGISTERS: CountRegisters = CountRegisters { lanes: 40, wave: 60, scratch: 62 };

    #[test]
    fn a_point_adds_only_what_it_counts_and_saves_scc_where_it_is_live() {
        let text = |code: Vec<CodeLine>| code.iter().map(|l| l.to_string()).collect::<Vec<_>>().join("\n");
        insta::assert_snapshot!(text(point_code(REGISTERS, 3, 5, false, false)), @r"
        v_add_co_u32_e64 v40, s[62:63], 5, v40
        v_addc_co_u32_e64 v41, s[62:63], 0, v41, s[62:63]
        s_add_u32 s60, s60, 3
        s_addc_u32 s61, s61, 0
        ");
        insta::assert_snapshot!(text(point_code(REGISTERS, 2, 0, true, false)), @r"
        s_cselect_b64 s[62:63], -1, 0
        s_add_u32 s60, s60, 2
        s_addc_u32 s61, s61, 0
        s_cmp_lg_u64 s[62:63], 0
        ");
        insta::assert_snapshot!(text(point_code(REGISTERS, 0, 100, true, true)), @r"
        s_movk_i32 s62, 0x64
        v_add_co_u32_e64 v40, s[62:63], s62, v40
        s_nop 1
        v_addc_co_u32_e64 v41, s[62:63], 0, v41, s[62:63]
        ");
        assert!(point_code(REGISTERS, 0, 0, true, true).is_empty());
    }
}
