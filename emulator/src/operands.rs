//! Operands of a decoded instruction in the emulator's terms: LLVM MC
//! register numbers become places in the wave's register files.
//!
//! Scalar registers use the hardware's 8-bit source encoding of GFX9, so a
//! 64-bit pair that straddles named registers behaves as the hardware does:
//! s0-s101 are 0-101, FLAT_SCRATCH 102-103, XNACK_MASK 104-105, VCC
//! 106-107, TTMP0-15 108-123, M0 124, NULL 125, EXEC 126-127.

use gpuinstr::stages::lift::isa::Isa;

pub const FLAT_SCRATCH: u16 = 102;
pub const XNACK_MASK: u16 = 104;
pub const VCC: u16 = 106;
pub const TTMP0: u16 = 108;
pub const M0: u16 = 124;
pub const NULL: u16 = 125;
pub const EXEC: u16 = 126;
pub const SCALAR_SLOTS: usize = 128;

/// Registers that read as a value the hardware provides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Special {
    SharedBase,
    SharedLimit,
    PrivateBase,
    PrivateLimit,
    Vccz,
    Execz,
    Scc,
    PopsExitingWaveId,
}

/// Where an operand's value lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// `dwords` consecutive scalar slots from `index`.
    Scalar {
        index: u16,
        dwords: u8,
    },
    Vector {
        index: u16,
        dwords: u8,
    },
    Accum {
        index: u16,
        dwords: u8,
    },
    /// The scalar condition code as a register operand.
    Scc,
    /// An inline constant or a literal (as LLVM decoded it: the value the
    /// operand's type gives it; 32-bit literals as written).
    Constant(i64),
    Special(Special),
    /// A source of a DPP or SDWA instruction as its plain operation reads
    /// it: after the lane permutation (DPP `src0`) or the byte/word select
    /// (SDWA `src0`, `src1`), in `Wave::staged`.
    Staged(u8),
}

/// The operand an LLVM MC register denotes, or None for registers the
/// emulator does not model (LDS_DIRECT, trap registers...).
pub fn register_operand(isa: &Isa, reg: u32) -> Option<Operand> {
    let name = isa.register_name(isa.canonical(reg));
    parse_register_name(name)
}

fn parse_register_name(name: &str) -> Option<Operand> {
    let named = |index: u16, dwords: u8| Some(Operand::Scalar { index, dwords });
    match name {
        "VCC" => return named(VCC, 2),
        "VCC_LO" => return named(VCC, 1),
        "VCC_HI" => return named(VCC + 1, 1),
        "EXEC" => return named(EXEC, 2),
        "EXEC_LO" => return named(EXEC, 1),
        "EXEC_HI" => return named(EXEC + 1, 1),
        "FLAT_SCR" => return named(FLAT_SCRATCH, 2),
        "FLAT_SCR_LO" => return named(FLAT_SCRATCH, 1),
        "FLAT_SCR_HI" => return named(FLAT_SCRATCH + 1, 1),
        "XNACK_MASK" => return named(XNACK_MASK, 2),
        "XNACK_MASK_LO" => return named(XNACK_MASK, 1),
        "XNACK_MASK_HI" => return named(XNACK_MASK + 1, 1),
        "M0" => return named(M0, 1),
        "SGPR_NULL" => return named(NULL, 1),
        "SCC" => return Some(Operand::Scc),
        "SRC_SHARED_BASE" => return Some(Operand::Special(Special::SharedBase)),
        "SRC_SHARED_LIMIT" => return Some(Operand::Special(Special::SharedLimit)),
        "SRC_PRIVATE_BASE" => return Some(Operand::Special(Special::PrivateBase)),
        "SRC_PRIVATE_LIMIT" => return Some(Operand::Special(Special::PrivateLimit)),
        "SRC_VCCZ" => return Some(Operand::Special(Special::Vccz)),
        "SRC_EXECZ" => return Some(Operand::Special(Special::Execz)),
        "SRC_SCC" => return Some(Operand::Special(Special::Scc)),
        "SRC_POPS_EXITING_WAVE_ID" => return Some(Operand::Special(Special::PopsExitingWaveId)),
        _ => {}
    }
    // Tuples: SGPR4_SGPR5, VGPR0_VGPR1_VGPR2_VGPR3, AGPR2, TTMP4_TTMP5.
    let mut parts = name.split('_');
    let first = parts.next()?;
    let dwords = 1 + parts.count() as u8;
    let (kind, number) = ["SGPR", "VGPR", "AGPR", "TTMP"].iter().find_map(|p| Some((*p, first.strip_prefix(p)?)))?;
    let index: u16 = number.parse().ok()?;
    match kind {
        "SGPR" => Some(Operand::Scalar { index, dwords }),
        "TTMP" => Some(Operand::Scalar { index: TTMP0 + index, dwords }),
        "VGPR" => Some(Operand::Vector { index, dwords }),
        _ => Some(Operand::Accum { index, dwords }),
    }
}

/// Source operand modifiers (LLVM's SISrcMods).
pub mod modifiers {
    pub const NEG: u32 = 1;
    pub const ABS: u32 = 2;
    pub const SEXT: u32 = 1;
    /// VOP3P: the low half reads the source's high half.
    pub const OP_SEL_0: u32 = 4;
    /// VOP3P: the high half reads the source's high half.
    pub const OP_SEL_1: u32 = 8;
    pub const NEG_HI: u32 = 2;
    /// VOP3 16-bit operations: the result goes to the destination's high half.
    pub const DST_OP_SEL: u32 = 8;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_names_map_to_hardware_places() {
        assert_eq!(parse_register_name("SGPR4_SGPR5"), Some(Operand::Scalar { index: 4, dwords: 2 }));
        assert_eq!(parse_register_name("VGPR0_VGPR1_VGPR2_VGPR3"), Some(Operand::Vector { index: 0, dwords: 4 }));
        assert_eq!(parse_register_name("AGPR255"), Some(Operand::Accum { index: 255, dwords: 1 }));
        assert_eq!(parse_register_name("VCC"), Some(Operand::Scalar { index: 106, dwords: 2 }));
        assert_eq!(parse_register_name("EXEC_HI"), Some(Operand::Scalar { index: 127, dwords: 1 }));
        assert_eq!(parse_register_name("TTMP4_TTMP5"), Some(Operand::Scalar { index: 112, dwords: 2 }));
        assert_eq!(parse_register_name("SRC_SHARED_BASE"), Some(Operand::Special(Special::SharedBase)));
        assert_eq!(parse_register_name("LDS_DIRECT"), None);
    }
}
