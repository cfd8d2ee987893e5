//! The State Value Array kept in memory, one slot per wave the GPU can hold
//! at once (docs/sva.md, "Wave slots"): the last resort when no register is
//! free for it across the kernel.
//!
//! A wave's hardware id (`HW_REG_HW_ID`: wave slot, SIMD, CU, shader array,
//! shader engine) is unique among the waves resident on the GPU, so it
//! indexes an area in the instrumented code object's `.bss` that needs no
//! register to find: the kernel preamble stores the SVA (and the packed
//! work-item ids) in the wave's slot, and every payload that reads them
//! loads them into a VGPR dead at its point. The address is computed
//! without touching SCC (VALU arithmetic, a pc-relative literal), so the
//! application's SCC may be live across it.

/// The area's symbol (defined in `.bss` when a kernel uses it).
pub const SYMBOL: &str = "gpuinstr_wave_slots";

/// HW_ID bits 5:0 (wave slot, SIMD) and 15:8 (CU, shader array, shader
/// engine): 14 bits of slot index.
const LOW_BITS: u32 = 6;
const HIGH_BITS: u32 = 8;
pub const SLOTS: u64 = 1 << (LOW_BITS + HIGH_BITS);

/// Bytes per slot: the SVA's 64 lanes, then the work-item ids' 64 lanes.
pub const SLOT_BYTES: u64 = 512;
const SLOT_SHIFT: u32 = 9;
pub const WORK_ITEM_IDS_OFFSET: u32 = 256;

/// The area's size in bytes.
pub const AREA_BYTES: u64 = SLOTS * SLOT_BYTES;

/// Whole-wave code (EXEC all lanes) leaving in `vgpr` the offset of each
/// lane's dword in this wave's slot from the end of an `s_getpc_b64` into
/// `pair`, which it leaves holding that pc: a `global_` access through
/// `vgpr` and `pair` then reaches the lane's dword. Writes `vgpr` and
/// `pair`, nothing else (no SCC, no VCC).
pub fn address(vgpr: u16, pair: u16) -> Vec<String> {
    let high = LOW_BITS + SLOT_SHIFT;
    vec![
        format!("v_mbcnt_lo_u32_b32 v{vgpr}, -1, 0"),
        format!("v_mbcnt_hi_u32_b32 v{vgpr}, -1, v{vgpr}"),
        format!("v_lshlrev_b32_e32 v{vgpr}, 2, v{vgpr}"),
        format!("s_getreg_b32 s{pair}, hwreg(HW_REG_HW_ID, 8, {HIGH_BITS})"),
        format!("v_lshl_add_u32 v{vgpr}, s{pair}, {high}, v{vgpr}"),
        format!("s_getreg_b32 s{pair}, hwreg(HW_REG_HW_ID, 0, {LOW_BITS})"),
        format!("v_lshl_add_u32 v{vgpr}, s{pair}, {SLOT_SHIFT}, v{vgpr}"),
        format!("s_getpc_b64 s[{pair}:{}]", pair + 1),
        // The literal is 4 bytes past the end of s_getpc_b64.
        format!("v_add_u32_e32 v{vgpr}, {SYMBOL}@rel32@lo+4, v{vgpr}"),
    ]
}

/// Whole-wave code loading the SVA (and the work-item ids) from this wave's
/// slot into `sva` (and `work_item_ids`), waiting for them.
pub fn load(sva: Option<u16>, work_item_ids: Option<u16>, pair: u16) -> Vec<String> {
    let global = format!("s[{pair}:{}]", pair + 1);
    let ids_load = |ids: u16, address: u16| {
        format!("global_load_dword v{ids}, v{address}, {global} offset:{WORK_ITEM_IDS_OFFSET}")
    };
    let mut code = match (sva, work_item_ids) {
        (None, None) => return Vec::new(),
        // The ids' load reads the address before the SVA's overwrites it.
        (Some(sva), Some(ids)) => {
            let mut code = address(ids, pair);
            code.push(format!("global_load_dword v{sva}, v{ids}, {global}"));
            code.push(ids_load(ids, ids));
            code
        }
        (Some(sva), None) => {
            let mut code = address(sva, pair);
            code.push(format!("global_load_dword v{sva}, v{sva}, {global}"));
            code
        }
        (None, Some(ids)) => {
            let mut code = address(ids, pair);
            code.push(ids_load(ids, ids));
            code
        }
    };
    code.push("s_waitcnt vmcnt(0)".into());
    code
}

/// Whole-wave code storing the SVA (and the work-item ids) in this wave's
/// slot, through `address` (a VGPR) and `pair`.
pub fn store(sva: u16, work_item_ids: Option<u16>, address_vgpr: u16, pair: u16) -> Vec<String> {
    let mut code = self::address(address_vgpr, pair);
    let global = format!("s[{pair}:{}]", pair + 1);
    code.push(format!("global_store_dword v{address_vgpr}, v{sva}, {global}"));
    if let Some(ids) = work_item_ids {
        code.push(format!("global_store_dword v{address_vgpr}, v{ids}, {global} offset:{WORK_ITEM_IDS_OFFSET}"));
    }
    // Before any payload of this wave loads them.
    code.push("s_waitcnt vmcnt(0)".into());
    code
}

/// The area's definition, appended to the instrumented code object: a
/// local symbol (a global one could be preempted, and a pc-relative
/// reference to it would not link).
pub fn definition() -> String {
    format!(
        "\n\t.section\t.bss.gpuinstr_wave_slots,\"aw\",@nobits\n\t.type\t{SYMBOL},@object\n\
         \t.p2align\t{}\n{SYMBOL}:\n\t.zero\t{AREA_BYTES}\n\t.size\t{SYMBOL}, {AREA_BYTES}\n",
        SLOT_SHIFT
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cover_every_hw_id_a_gfx9_wave_can_have() {
        // Wave slot 4 bits, SIMD 2, (pipe 2 skipped), CU 4, SH 1, SE 3.
        assert_eq!(SLOTS, 1 << 14);
        assert_eq!(1u64 << SLOT_SHIFT, SLOT_BYTES);
        assert!(u64::from(WORK_ITEM_IDS_OFFSET) + 256 <= SLOT_BYTES);
        let code = address(7, 4);
        assert!(code.iter().all(|l| !l.starts_with("s_add") && !l.starts_with("s_lshl")), "SCC untouched");
        assert_eq!(code.last().unwrap(), "v_add_u32_e32 v7, gpuinstr_wave_slots@rel32@lo+4, v7");
        assert_eq!(code[code.len() - 2], "s_getpc_b64 s[4:5]");
    }

    #[test]
    fn the_ids_address_is_read_before_it_is_overwritten() {
        let code = load(Some(9), Some(10), 6);
        assert_eq!(code[code.len() - 3], "global_load_dword v9, v10, s[6:7]");
        assert_eq!(code[code.len() - 2], "global_load_dword v10, v10, s[6:7] offset:256");
        let code = load(None, Some(10), 6);
        assert_eq!(code[code.len() - 2], "global_load_dword v10, v10, s[6:7] offset:256");
        assert!(load(None, None, 6).is_empty());
    }
}
