//! The State Value Array kept in memory, one slot per wave the GPU can hold
//! at once (docs/sva.md, "Wave slots"): the last resort when no register is
//! free for it across the kernel.
//!
//! A wave's hardware id (`HW_REG_HW_ID`: wave slot, SIMD, CU, shader array,
//! shader engine) is unique among the waves resident on one XCC, and on
//! gfx940 and later, whose waves spread over several XCCs, `HW_REG_XCC_ID`
//! says which: together they index an area in the instrumented code
//! object's `.bss` that needs no register to find. The kernel preamble
//! stores the SVA (and the packed work-item ids) in the wave's slot, and
//! every payload that reads them loads them into a VGPR dead at its point.
//! The address is computed without touching SCC (VALU arithmetic, a
//! pc-relative literal), so the application's SCC may be live across it.

use crate::stages::load::processor::Processor;

/// The area's symbol (defined in `.bss` when a kernel uses it).
pub const SYMBOL: &str = "gpuinstr_wave_slots";

/// HW_ID bits 5:0 (wave slot, SIMD) and 15:8 (CU, shader array, shader
/// engine): 14 bits of slot index.
const LOW_BITS: u32 = 6;
const HIGH_BITS: u32 = 8;
/// XCC_ID bits 2:0 above them where waves spread over XCCs (MI300X and
/// MI355X have 8).
const XCC_BITS: u32 = 3;

/// Bytes per slot: the SVA's 64 lanes, the work-item ids' 64 lanes, and a
/// VGPR saved where no VGPR is dead to load the SVA into (a rescue).
pub const SLOT_BYTES: u64 = 1024;
const SLOT_SHIFT: u32 = 10;
pub const WORK_ITEM_IDS_OFFSET: u32 = 256;
pub const RESCUE_OFFSET: u32 = 512;

/// How a processor's waves find their slot: by their hardware id, and on
/// processors with several XCCs by the XCC's id too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Indexing {
    pub xcc: bool,
}

impl Indexing {
    /// The processor's indexing, if its waves have GFX9's HW_ID (RDNA's
    /// HW_ID1 lays the ids out otherwise).
    pub fn for_processor(processor: &Processor) -> Option<Indexing> {
        processor.name.starts_with("gfx9").then_some(Indexing { xcc: processor.xccs })
    }

    /// Bits of slot index.
    fn bits(self) -> u32 {
        LOW_BITS + HIGH_BITS + if self.xcc { XCC_BITS } else { 0 }
    }

    /// Slots in the area: one per wave the GPU can hold at once.
    pub fn slots(self) -> u64 {
        1 << self.bits()
    }

    /// The area's size in bytes (16 MiB, 128 MiB with XCCs; `.bss`, so
    /// only device memory, and pages a GPU never touches cost nothing on
    /// the emulated device).
    pub fn area_bytes(self) -> u64 {
        self.slots() * SLOT_BYTES
    }

    /// The SGPR code adding the slot index's XCC bits to `offset`, an
    /// SGPR holding the HW_ID index (`scratch` is overwritten).
    fn scalar_xcc(self, offset: u16, scratch: u16) -> Vec<String> {
        if !self.xcc {
            return Vec::new();
        }
        vec![
            format!("s_getreg_b32 s{scratch}, hwreg(HW_REG_XCC_ID, 0, {XCC_BITS})"),
            format!("s_lshl_b32 s{scratch}, s{scratch}, {}", LOW_BITS + HIGH_BITS),
            format!("s_or_b32 s{offset}, s{offset}, s{scratch}"),
        ]
    }
}

/// Whole-wave code (EXEC all lanes) leaving in `vgpr` the offset of each
/// lane's dword in this wave's slot from the end of an `s_getpc_b64` into
/// `pair`, which it leaves holding that pc: a `global_` access through
/// `vgpr` and `pair` then reaches the lane's dword. Writes `vgpr` and
/// `pair`, nothing else (no SCC, no VCC).
pub fn address(indexing: Indexing, vgpr: u16, pair: u16) -> Vec<String> {
    let high = LOW_BITS + SLOT_SHIFT;
    let mut code = vec![
        format!("v_mbcnt_lo_u32_b32 v{vgpr}, -1, 0"),
        format!("v_mbcnt_hi_u32_b32 v{vgpr}, -1, v{vgpr}"),
        format!("v_lshlrev_b32_e32 v{vgpr}, 2, v{vgpr}"),
        format!("s_getreg_b32 s{pair}, hwreg(HW_REG_HW_ID, 8, {HIGH_BITS})"),
        format!("v_lshl_add_u32 v{vgpr}, s{pair}, {high}, v{vgpr}"),
        format!("s_getreg_b32 s{pair}, hwreg(HW_REG_HW_ID, 0, {LOW_BITS})"),
        format!("v_lshl_add_u32 v{vgpr}, s{pair}, {SLOT_SHIFT}, v{vgpr}"),
    ];
    if indexing.xcc {
        code.extend([
            format!("s_getreg_b32 s{pair}, hwreg(HW_REG_XCC_ID, 0, {XCC_BITS})"),
            format!("v_lshl_add_u32 v{vgpr}, s{pair}, {}, v{vgpr}", LOW_BITS + HIGH_BITS + SLOT_SHIFT),
        ]);
    }
    code.extend([
        format!("s_getpc_b64 s[{pair}:{}]", pair + 1),
        // The literal is 4 bytes past the end of s_getpc_b64.
        format!("v_add_u32_e32 v{vgpr}, {SYMBOL}@rel32@lo+4, v{vgpr}"),
    ]);
    code
}

/// Whole-wave code loading the SVA (and the work-item ids) from this wave's
/// slot into `sva` (and `work_item_ids`), waiting for them.
pub fn load(indexing: Indexing, sva: Option<u16>, work_item_ids: Option<u16>, pair: u16) -> Vec<String> {
    let global = format!("s[{pair}:{}]", pair + 1);
    let ids_load = |ids: u16, address: u16| {
        format!("global_load_dword v{ids}, v{address}, {global} offset:{WORK_ITEM_IDS_OFFSET}")
    };
    let mut code = match (sva, work_item_ids) {
        (None, None) => return Vec::new(),
        // The ids' load reads the address before the SVA's overwrites it.
        (Some(sva), Some(ids)) => {
            let mut code = address(indexing, ids, pair);
            code.push(format!("global_load_dword v{sva}, v{ids}, {global}"));
            code.push(ids_load(ids, ids));
            code
        }
        (Some(sva), None) => {
            let mut code = address(indexing, sva, pair);
            code.push(format!("global_load_dword v{sva}, v{sva}, {global}"));
            code
        }
        (None, Some(ids)) => {
            let mut code = address(indexing, ids, pair);
            code.push(ids_load(ids, ids));
            code
        }
    };
    code.push("s_waitcnt vmcnt(0)".into());
    code
}

/// Whole-wave code storing the SVA (and the work-item ids) in this wave's
/// slot, through `address` (a VGPR) and `pair`.
pub fn store(indexing: Indexing, sva: u16, work_item_ids: Option<u16>, address_vgpr: u16, pair: u16) -> Vec<String> {
    let mut code = self::address(indexing, address_vgpr, pair);
    let global = format!("s[{pair}:{}]", pair + 1);
    code.push(format!("global_store_dword v{address_vgpr}, v{sva}, {global}"));
    if let Some(ids) = work_item_ids {
        code.push(format!("global_store_dword v{address_vgpr}, v{ids}, {global} offset:{WORK_ITEM_IDS_OFFSET}"));
    }
    // Before any payload of this wave loads them.
    code.push("s_waitcnt vmcnt(0)".into());
    code
}

/// SGPRs a rescue never takes: s[0:3] and s32 (the payloads' frame,
/// swapped around spills) and s30:s31 (their return address).
pub const RESERVED_SGPRS: [u16; 7] = [0, 1, 2, 3, 30, 31, 32];

/// Registers for saving one live VGPR in the wave's slot where no VGPR is
/// dead (every one live at the point): a buffer resource adding each
/// lane's id (`ADD_TID_ENABLE`, stride 4) needs no VGPR for the address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rescue {
    /// The live VGPR saved (and then free for the SVA's load).
    pub vgpr: u16,
    /// First of four aligned SGPRs dead at the point: the resource.
    pub resource: u16,
    /// An SGPR dead at the point: the slot's offset.
    pub offset: u16,
    /// An SGPR dead at the point keeping SCC, when SCC is live (building
    /// the resource takes scalar adds).
    pub scc: Option<u16>,
    pub indexing: Indexing,
}

impl Rescue {
    fn resource_code(&self) -> Vec<String> {
        let (r, o) = (self.resource, self.offset);
        let mut code = Vec::new();
        if let Some(scc) = self.scc {
            code.push(format!("s_cselect_b32 s{scc}, 1, 0"));
        }
        code.extend([
            format!("s_getpc_b64 s[{r}:{}]", r + 1),
            // The literals are 4 and 12 bytes past the end of s_getpc_b64.
            format!("s_add_u32 s{r}, s{r}, {SYMBOL}@rel32@lo+4"),
            format!("s_addc_u32 s{}, s{}, {SYMBOL}@rel32@hi+12", r + 1, r + 1),
            // Base bits 47:32, stride 4 in bits 61:48 of the resource.
            format!("s_and_b32 s{}, s{}, 0xffff", r + 1, r + 1),
            format!("s_or_b32 s{}, s{}, 0x40000", r + 1, r + 1),
            format!("s_getreg_b32 s{o}, hwreg(HW_REG_HW_ID, 8, {HIGH_BITS})"),
            format!("s_lshl_b32 s{o}, s{o}, {LOW_BITS}"),
            format!("s_getreg_b32 s{}, hwreg(HW_REG_HW_ID, 0, {LOW_BITS})", r + 2),
            format!("s_or_b32 s{o}, s{o}, s{}", r + 2),
        ]);
        code.extend(self.indexing.scalar_xcc(o, r + 2));
        code.extend([
            format!("s_lshl_b32 s{o}, s{o}, {SLOT_SHIFT}"),
            // Every record, and the lane's id added to the index.
            format!("s_mov_b32 s{}, -1", r + 2),
            format!("s_mov_b32 s{}, 0x800000", r + 3),
        ]);
        code
    }

    fn restore_scc(&self, code: &mut Vec<String>) {
        if let Some(scc) = self.scc {
            code.push(format!("s_cmp_lg_u32 s{scc}, 0"));
        }
    }

    /// Whole-wave code saving the VGPR in the wave's slot.
    pub fn save(&self) -> Vec<String> {
        let mut code = self.resource_code();
        code.push(format!(
            "buffer_store_dword v{}, off, s[{}:{}], s{} offset:{RESCUE_OFFSET}",
            self.vgpr,
            self.resource,
            self.resource + 3,
            self.offset
        ));
        self.restore_scc(&mut code);
        code
    }

    /// Whole-wave code loading it back, waiting for it.
    pub fn restore(&self) -> Vec<String> {
        let mut code = self.resource_code();
        code.push(format!(
            "buffer_load_dword v{}, off, s[{}:{}], s{} offset:{RESCUE_OFFSET}",
            self.vgpr,
            self.resource,
            self.resource + 3,
            self.offset
        ));
        code.push("s_waitcnt vmcnt(0)".into());
        self.restore_scc(&mut code);
        code
    }
}

/// The area's definition, appended to the instrumented code object: a
/// local symbol (a global one could be preempted, and a pc-relative
/// reference to it would not link), or, where code assembled apart reaches
/// it (`across_parts`), a hidden global one (which cannot be preempted).
pub fn definition(indexing: Indexing, across_parts: bool) -> String {
    let bytes = indexing.area_bytes();
    let binding = if across_parts { format!("\t.globl\t{SYMBOL}\n\t.hidden\t{SYMBOL}\n") } else { String::new() };
    format!(
        "\n\t.section\t.bss.gpuinstr_wave_slots,\"aw\",@nobits\n{binding}\t.type\t{SYMBOL},@object\n\
         \t.p2align\t{}\n{SYMBOL}:\n\t.zero\t{bytes}\n\t.size\t{SYMBOL}, {bytes}\n",
        SLOT_SHIFT
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cover_every_hw_id_a_gfx9_wave_can_have() {
        // Wave slot 4 bits, SIMD 2, (pipe 2 skipped), CU 4, SH 1, SE 3.
        assert_eq!(Indexing::default().slots(), 1 << 14);
        assert!(u64::from(RESCUE_OFFSET) + 256 <= SLOT_BYTES);
        assert_eq!(1u64 << SLOT_SHIFT, SLOT_BYTES);
        assert!(u64::from(WORK_ITEM_IDS_OFFSET) + 256 <= SLOT_BYTES);
        let code = address(Indexing::default(), 7, 4);
        assert!(code.iter().all(|l| !l.starts_with("s_add") && !l.starts_with("s_lshl")), "SCC untouched");
        assert_eq!(code.last().unwrap(), "v_add_u32_e32 v7, gpuinstr_wave_slots@rel32@lo+4, v7");
        assert_eq!(code[code.len() - 2], "s_getpc_b64 s[4:5]");
    }

    #[test]
    fn the_ids_address_is_read_before_it_is_overwritten() {
        let code = load(Indexing::default(), Some(9), Some(10), 6);
        assert_eq!(code[code.len() - 3], "global_load_dword v9, v10, s[6:7]");
        assert_eq!(code[code.len() - 2], "global_load_dword v10, v10, s[6:7] offset:256");
        let code = load(Indexing::default(), None, Some(10), 6);
        assert_eq!(code[code.len() - 2], "global_load_dword v10, v10, s[6:7] offset:256");
        assert!(load(Indexing::default(), None, None, 6).is_empty());
    }

    #[test]
    fn waves_on_several_xccs_add_the_xcc_id_above_the_hw_id() {
        let indexing = |name: &str| Indexing::for_processor(Processor::named(name).unwrap()).unwrap();
        let gfx942 = indexing("gfx942");
        assert!(gfx942.xcc && !indexing("gfx90a").xcc && indexing("gfx9-4-generic").xcc);
        assert_eq!(gfx942.slots(), 1 << 17);
        let code = address(gfx942, 7, 4);
        let xcc = code.iter().position(|l| l == "s_getreg_b32 s4, hwreg(HW_REG_XCC_ID, 0, 3)").expect("read");
        assert_eq!(code[xcc + 1], "v_lshl_add_u32 v7, s4, 24, v7", "bits 16:14 of the slot index");
        assert!(code.iter().all(|l| !l.starts_with("s_add") && !l.starts_with("s_lshl")), "SCC untouched");
        let rescue = Rescue { vgpr: 9, resource: 8, offset: 12, scc: None, indexing: gfx942 };
        let saved = rescue.save();
        let shift = saved.iter().position(|l| l == "s_lshl_b32 s12, s12, 10").expect("the slot's bytes");
        assert_eq!(
            saved[shift - 3..shift],
            ["s_getreg_b32 s10, hwreg(HW_REG_XCC_ID, 0, 3)", "s_lshl_b32 s10, s10, 14", "s_or_b32 s12, s12, s10"]
        );
    }
}
