//! What kind of instruction an opcode is, in LLVM's own terms: the
//! SIInstrFlags bits of its description (TSFlags). The bits are not written
//! down here: they moved between LLVM majors (FLAT 22 -> 24 and DS 23 -> 25
//! from LLVM 17 to 21), and a hard-coded mask would quietly select nothing.
//! Each flag's bit is found in the LLVM this build runs, from witnesses:
//! opcodes that must carry the flag and opcodes that must not. Exactly one
//! bit may satisfy them, or the ISA is refused with the reason. The
//! encoding formats (SALU to DS) are sought in the low 32 bits only, where
//! every SIDefines.h keeps them ("basic encoding information"): LLVM 22
//! gives every DS instruction a second shared bit (FIXED_SIZE, bit 40).

use thiserror::Error;

/// The SIInstrFlags gpuinstr reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flag {
    Salu,
    Valu,
    Mubuf,
    Mtbuf,
    Smrd,
    Mimg,
    Flat,
    Ds,
    FlatGlobal,
    FlatScratch,
    IsMai,
    IsAtomicNoRet,
    IsAtomicRet,
}

/// Every flag with the opcodes (pseudos, or real opcodes for MIMG, which
/// has no pseudos) that carry it and opcodes that do not. A name an LLVM
/// does not know is skipped; at least two carriers must remain.
const WITNESSES: &[(Flag, &[&str], &[&str])] = &[
    (
        Flag::Salu,
        &["S_MOV_B32", "S_ADD_U32", "S_CMP_EQ_U32", "S_MOVK_I32", "S_NOP"],
        &["S_LOAD_DWORD_IMM", "V_MOV_B32_e32", "DS_READ_B32"],
    ),
    (
        Flag::Valu,
        &["V_MOV_B32_e32", "V_ADD_F32_e64", "V_CMP_EQ_U32_e32", "V_PK_ADD_F16"],
        &["S_MOV_B32", "DS_READ_B32", "FLAT_LOAD_DWORD", "BUFFER_LOAD_DWORD_OFFSET", "S_LOAD_DWORD_IMM"],
    ),
    (
        Flag::Mubuf,
        &["BUFFER_LOAD_DWORD_OFFSET", "BUFFER_STORE_DWORD_OFFEN", "BUFFER_ATOMIC_ADD_OFFSET"],
        &["TBUFFER_LOAD_FORMAT_X_OFFSET", "FLAT_LOAD_DWORD", "GLOBAL_LOAD_DWORD", "DS_READ_B32", "S_LOAD_DWORD_IMM"],
    ),
    (
        Flag::Mtbuf,
        &["TBUFFER_LOAD_FORMAT_X_OFFSET", "TBUFFER_STORE_FORMAT_X_OFFEN"],
        &["BUFFER_LOAD_DWORD_OFFSET", "FLAT_LOAD_DWORD", "DS_READ_B32", "S_LOAD_DWORD_IMM"],
    ),
    (
        Flag::Smrd,
        &["S_LOAD_DWORD_IMM", "S_LOAD_DWORDX2_IMM", "S_BUFFER_LOAD_DWORD_IMM"],
        &["S_MOV_B32", "BUFFER_LOAD_DWORD_OFFSET", "DS_READ_B32", "FLAT_LOAD_DWORD"],
    ),
    (
        Flag::Mimg,
        &[
            "IMAGE_LOAD_V1_V1_vi",
            "IMAGE_STORE_V1_V1_vi",
            "IMAGE_LOAD_V1_V1_gfx90a",
            "IMAGE_LOAD_V1_V1_gfx10",
            "IMAGE_SAMPLE_V1_V1_vi",
        ],
        &["BUFFER_LOAD_DWORD_OFFSET", "TBUFFER_LOAD_FORMAT_X_OFFSET", "FLAT_LOAD_DWORD", "DS_READ_B32"],
    ),
    (
        Flag::Flat,
        &["FLAT_LOAD_DWORD", "FLAT_STORE_DWORD", "GLOBAL_LOAD_DWORD", "SCRATCH_LOAD_DWORD"],
        &["DS_READ_B32", "BUFFER_LOAD_DWORD_OFFSET", "S_LOAD_DWORD_IMM", "V_MOV_B32_e32"],
    ),
    (
        Flag::Ds,
        &["DS_READ_B32", "DS_WRITE_B32", "DS_ADD_U32", "DS_SWIZZLE_B32"],
        &["FLAT_LOAD_DWORD", "BUFFER_LOAD_DWORD_OFFSET", "S_LOAD_DWORD_IMM", "V_MOV_B32_e32"],
    ),
    (
        Flag::FlatGlobal,
        &["GLOBAL_LOAD_DWORD", "GLOBAL_STORE_DWORD", "GLOBAL_ATOMIC_ADD"],
        &["FLAT_LOAD_DWORD", "FLAT_ATOMIC_ADD", "SCRATCH_LOAD_DWORD"],
    ),
    (Flag::FlatScratch, &["SCRATCH_LOAD_DWORD", "SCRATCH_STORE_DWORD"], &["FLAT_LOAD_DWORD", "GLOBAL_LOAD_DWORD"]),
    (
        Flag::IsMai,
        &["V_MFMA_F32_4X4X1F32_e64", "V_ACCVGPR_READ_B32_e64", "V_ACCVGPR_WRITE_B32_e64"],
        &["V_MOV_B32_e32", "V_FMA_F32_e64", "V_PK_FMA_F16"],
    ),
    (
        Flag::IsAtomicNoRet,
        &["DS_ADD_U32", "GLOBAL_ATOMIC_ADD", "FLAT_ATOMIC_ADD", "BUFFER_ATOMIC_ADD_OFFSET"],
        // Not DS_WRITE_B32: LLVM 15 marks every no-return DS instruction, stores too.
        &["DS_ADD_RTN_U32", "GLOBAL_ATOMIC_ADD_RTN", "FLAT_ATOMIC_ADD_RTN", "GLOBAL_STORE_DWORD", "FLAT_STORE_DWORD"],
    ),
    (
        Flag::IsAtomicRet,
        &["DS_ADD_RTN_U32", "GLOBAL_ATOMIC_ADD_RTN", "FLAT_ATOMIC_ADD_RTN", "BUFFER_ATOMIC_ADD_OFFSET_RTN"],
        &["DS_ADD_U32", "GLOBAL_ATOMIC_ADD", "FLAT_ATOMIC_ADD", "DS_READ_B32", "GLOBAL_LOAD_DWORD"],
    ),
];

#[derive(Debug, Error)]
pub enum FlagError {
    #[error(
        "this LLVM's instruction descriptions do not single out the {flag:?} flag ({reason}); gpuinstr cannot classify \
         instructions with this LLVM {}: build it against a supported LLVM (docs/toolchains.md)",
        crate::toolchain::LLVM_VERSION
    )]
    Ambiguous { flag: Flag, reason: String },
}

/// Each flag's bit in this LLVM's TSFlags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlagBits {
    masks: Vec<(Flag, u64)>,
}

impl Flag {
    /// An encoding format (SALU, VALU, MUBUF, ... DS): a low-word bit.
    fn is_format(self) -> bool {
        matches!(
            self,
            Flag::Salu | Flag::Valu | Flag::Mubuf | Flag::Mtbuf | Flag::Smrd | Flag::Mimg | Flag::Flat | Flag::Ds
        )
    }
}

impl FlagBits {
    /// Finds every flag's bit; `target_flags` gives an opcode's TSFlags by
    /// name (None for a name this LLVM does not know).
    pub fn find(target_flags: impl Fn(&str) -> Option<u64>) -> Result<FlagBits, FlagError> {
        let mut masks = Vec::with_capacity(WITNESSES.len());
        for (flag, carriers, others) in WITNESSES {
            let present: Vec<u64> = carriers.iter().filter_map(|name| target_flags(name)).collect();
            if present.len() < 2 {
                return Err(FlagError::Ambiguous {
                    flag: *flag,
                    reason: format!("fewer than two of {carriers:?} exist"),
                });
            }
            let common = present.iter().fold(u64::MAX, |bits, flags| bits & flags);
            let excluded = others.iter().filter_map(|name| target_flags(name)).fold(0, |bits, flags| bits | flags);
            let within = if flag.is_format() { 0xffff_ffff } else { u64::MAX };
            let candidates = common & !excluded & within;
            if candidates.count_ones() != 1 {
                return Err(FlagError::Ambiguous {
                    flag: *flag,
                    reason: format!("{} candidate bits ({candidates:#x})", candidates.count_ones()),
                });
            }
            masks.push((*flag, candidates));
        }
        Ok(FlagBits { masks })
    }

    /// The flag's mask.
    pub fn mask(&self, flag: Flag) -> u64 {
        self.masks.iter().find(|(f, _)| *f == flag).map_or(0, |(_, mask)| *mask)
    }

    /// Whether TSFlags `target_flags` carry the flag.
    pub fn has(&self, target_flags: u64, flag: Flag) -> bool {
        target_flags & self.mask(flag) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags<'a>(carried: &'a [(&'a str, u64)]) -> impl Fn(&str) -> Option<u64> + 'a {
        move |name| carried.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
    }

    #[test]
    fn a_flag_is_the_one_bit_its_carriers_share_and_the_others_lack() {
        let mut table: Vec<(&str, u64)> = Vec::new();
        // Every witness carries its flags' bits (bit = flag index) and a shared noise bit.
        for (index, (_, carriers, _)) in WITNESSES.iter().enumerate() {
            for name in *carriers {
                match table.iter_mut().find(|(n, _)| n == name) {
                    Some((_, bits)) => *bits |= 1 << index,
                    None => table.push((name, (1 << index) | (1 << 63))),
                }
            }
        }
        for (_, _, others) in WITNESSES {
            for name in *others {
                if !table.iter().any(|(n, _)| n == name) {
                    table.push((name, 1 << 63));
                }
            }
        }
        let bits = FlagBits::find(flags(&table)).unwrap();
        for (index, (flag, _, _)) in WITNESSES.iter().enumerate() {
            assert_eq!(bits.mask(*flag), 1 << index, "{flag:?}");
        }
        // LLVM 22: every DS instruction also carries FIXED_SIZE (bit 40), no
        // other witness does; a format is a low-word bit, so DS stays found.
        for (name, bits) in table.iter_mut() {
            if name.starts_with("DS_") {
                *bits |= 1 << 40;
            }
        }
        let ds = WITNESSES.iter().position(|(flag, _, _)| *flag == Flag::Ds).unwrap();
        assert_eq!(FlagBits::find(flags(&table)).unwrap().mask(Flag::Ds), 1 << ds);
    }

    #[test]
    fn a_bit_every_instruction_carries_is_refused() {
        // LLVM 21 sets maybeAtomic (bit 43) on most instructions: it must not pass for a flag.
        let table: Vec<(&str, u64)> = WITNESSES
            .iter()
            .flat_map(|(_, carriers, others)| carriers.iter().chain(others.iter()))
            .map(|name| (*name, 1u64 << 43))
            .collect();
        let error = FlagBits::find(flags(&table)).unwrap_err();
        assert!(error.to_string().contains("0 candidate bits"), "{error}");
    }
}
