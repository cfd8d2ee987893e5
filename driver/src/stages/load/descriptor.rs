//! The 64-byte kernel descriptor of code objects v3+, every field named as
//! in the LLVM AMDGPU usage guide (LLVM 15's AMDHSAKernelDescriptor.h), and
//! its `.amdhsa_kernel` directive form.

use serde::Serialize;

use super::target::{FeatureSetting, TargetId};

pub const SIZE: usize = 64;

/// SGPRs a GFX9 kernel can name (LLVM's getAddressableNumSGPRs).
const MAX_ADDRESSABLE_SGPRS: u64 = 102;

/// A bit field of one of the descriptor's 32-bit words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub shift: u32,
    pub width: u32,
}

impl Field {
    const fn new(name: &'static str, shift: u32, width: u32) -> Self {
        Field { name, shift, width }
    }

    pub fn get(self, word: u32) -> u32 {
        (word >> self.shift) & (((1u64 << self.width) - 1) as u32)
    }

    pub fn set(self, word: u32, value: u32) -> u32 {
        let mask = (((1u64 << self.width) - 1) as u32) << self.shift;
        (word & !mask) | ((value << self.shift) & mask)
    }
}

/// COMPUTE_PGM_RSRC1 fields.
pub const RSRC1: [Field; 18] = [
    Field::new("GRANULATED_WORKITEM_VGPR_COUNT", 0, 6),
    Field::new("GRANULATED_WAVEFRONT_SGPR_COUNT", 6, 4),
    Field::new("PRIORITY", 10, 2),
    Field::new("FLOAT_ROUND_MODE_32", 12, 2),
    Field::new("FLOAT_ROUND_MODE_16_64", 14, 2),
    Field::new("FLOAT_DENORM_MODE_32", 16, 2),
    Field::new("FLOAT_DENORM_MODE_16_64", 18, 2),
    Field::new("PRIV", 20, 1),
    Field::new("ENABLE_DX10_CLAMP", 21, 1),
    Field::new("DEBUG_MODE", 22, 1),
    Field::new("ENABLE_IEEE_MODE", 23, 1),
    Field::new("BULKY", 24, 1),
    Field::new("CDBG_USER", 25, 1),
    Field::new("FP16_OVFL", 26, 1),
    Field::new("RESERVED0", 27, 2),
    Field::new("WGP_MODE", 29, 1),
    Field::new("MEM_ORDERED", 30, 1),
    Field::new("FWD_PROGRESS", 31, 1),
];

/// COMPUTE_PGM_RSRC2 fields.
pub const RSRC2: [Field; 19] = [
    Field::new("ENABLE_PRIVATE_SEGMENT", 0, 1),
    Field::new("USER_SGPR_COUNT", 1, 5),
    Field::new("ENABLE_TRAP_HANDLER", 6, 1),
    Field::new("ENABLE_SGPR_WORKGROUP_ID_X", 7, 1),
    Field::new("ENABLE_SGPR_WORKGROUP_ID_Y", 8, 1),
    Field::new("ENABLE_SGPR_WORKGROUP_ID_Z", 9, 1),
    Field::new("ENABLE_SGPR_WORKGROUP_INFO", 10, 1),
    Field::new("ENABLE_VGPR_WORKITEM_ID", 11, 2),
    Field::new("ENABLE_EXCEPTION_ADDRESS_WATCH", 13, 1),
    Field::new("ENABLE_EXCEPTION_MEMORY", 14, 1),
    Field::new("GRANULATED_LDS_SIZE", 15, 9),
    Field::new("ENABLE_EXCEPTION_IEEE_754_FP_INVALID_OPERATION", 24, 1),
    Field::new("ENABLE_EXCEPTION_FP_DENORMAL_SOURCE", 25, 1),
    Field::new("ENABLE_EXCEPTION_IEEE_754_FP_DIVISION_BY_ZERO", 26, 1),
    Field::new("ENABLE_EXCEPTION_IEEE_754_FP_OVERFLOW", 27, 1),
    Field::new("ENABLE_EXCEPTION_IEEE_754_FP_UNDERFLOW", 28, 1),
    Field::new("ENABLE_EXCEPTION_IEEE_754_FP_INEXACT", 29, 1),
    Field::new("ENABLE_EXCEPTION_INT_DIVIDE_BY_ZERO", 30, 1),
    Field::new("RESERVED0", 31, 1),
];

/// COMPUTE_PGM_RSRC3 fields on gfx90a.
pub const RSRC3_GFX90A: [Field; 4] = [
    Field::new("ACCUM_OFFSET", 0, 6),
    Field::new("RESERVED0", 6, 10),
    Field::new("TG_SPLIT", 16, 1),
    Field::new("RESERVED1", 17, 15),
];

/// KERNEL_CODE_PROPERTIES fields (16 bits).
pub const KERNEL_CODE_PROPERTIES: [Field; 11] = [
    Field::new("ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER", 0, 1),
    Field::new("ENABLE_SGPR_DISPATCH_PTR", 1, 1),
    Field::new("ENABLE_SGPR_QUEUE_PTR", 2, 1),
    Field::new("ENABLE_SGPR_KERNARG_SEGMENT_PTR", 3, 1),
    Field::new("ENABLE_SGPR_DISPATCH_ID", 4, 1),
    Field::new("ENABLE_SGPR_FLAT_SCRATCH_INIT", 5, 1),
    Field::new("ENABLE_SGPR_PRIVATE_SEGMENT_SIZE", 6, 1),
    Field::new("RESERVED0", 7, 3),
    Field::new("ENABLE_WAVEFRONT_SIZE32", 10, 1),
    Field::new("USES_DYNAMIC_STACK", 11, 1),
    Field::new("RESERVED1", 12, 4),
];

fn field(table: &[Field], name: &str) -> Field {
    *table.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("no descriptor field {name}"))
}

/// A kernel descriptor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KernelDescriptor {
    pub group_segment_fixed_size: u32,
    pub private_segment_fixed_size: u32,
    pub kernarg_size: u32,
    pub reserved0: [u8; 4],
    /// Byte offset from the descriptor to the kernel's entry (may be negative).
    pub kernel_code_entry_byte_offset: i64,
    pub reserved1: [u8; 20],
    pub compute_pgm_rsrc3: u32,
    pub compute_pgm_rsrc1: u32,
    pub compute_pgm_rsrc2: u32,
    pub kernel_code_properties: u16,
    pub reserved2: [u8; 6],
}

fn u32_at(bytes: &[u8; SIZE], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

impl KernelDescriptor {
    pub fn decode(bytes: &[u8; SIZE]) -> Self {
        KernelDescriptor {
            group_segment_fixed_size: u32_at(bytes, 0),
            private_segment_fixed_size: u32_at(bytes, 4),
            kernarg_size: u32_at(bytes, 8),
            reserved0: bytes[12..16].try_into().expect("4 bytes"),
            kernel_code_entry_byte_offset: i64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes")),
            reserved1: bytes[24..44].try_into().expect("20 bytes"),
            compute_pgm_rsrc3: u32_at(bytes, 44),
            compute_pgm_rsrc1: u32_at(bytes, 48),
            compute_pgm_rsrc2: u32_at(bytes, 52),
            kernel_code_properties: u16::from_le_bytes(bytes[56..58].try_into().expect("2 bytes")),
            reserved2: bytes[58..64].try_into().expect("6 bytes"),
        }
    }

    pub fn encode(&self) -> [u8; SIZE] {
        let mut out = [0u8; SIZE];
        out[0..4].copy_from_slice(&self.group_segment_fixed_size.to_le_bytes());
        out[4..8].copy_from_slice(&self.private_segment_fixed_size.to_le_bytes());
        out[8..12].copy_from_slice(&self.kernarg_size.to_le_bytes());
        out[12..16].copy_from_slice(&self.reserved0);
        out[16..24].copy_from_slice(&self.kernel_code_entry_byte_offset.to_le_bytes());
        out[24..44].copy_from_slice(&self.reserved1);
        out[44..48].copy_from_slice(&self.compute_pgm_rsrc3.to_le_bytes());
        out[48..52].copy_from_slice(&self.compute_pgm_rsrc1.to_le_bytes());
        out[52..56].copy_from_slice(&self.compute_pgm_rsrc2.to_le_bytes());
        out[56..58].copy_from_slice(&self.kernel_code_properties.to_le_bytes());
        out[58..64].copy_from_slice(&self.reserved2);
        out
    }

    pub fn rsrc1(&self, name: &str) -> u32 {
        field(&RSRC1, name).get(self.compute_pgm_rsrc1)
    }

    pub fn rsrc2(&self, name: &str) -> u32 {
        field(&RSRC2, name).get(self.compute_pgm_rsrc2)
    }

    pub fn rsrc3_gfx90a(&self, name: &str) -> u32 {
        field(&RSRC3_GFX90A, name).get(self.compute_pgm_rsrc3)
    }

    /// KERNARG_PRELOAD_SPEC_LENGTH (bits 464-470, gfx940+): the dwords of the
    /// kernel argument segment the command processor loads into SGPRs after
    /// the user SGPRs; when not zero it enters the kernel 256 bytes past its
    /// entry (the first 256 bytes load them for firmware that does not).
    pub fn kernarg_preload_length(&self) -> u16 {
        u16::from_le_bytes([self.reserved2[0], self.reserved2[1]]) & 0x7f
    }

    /// KERNARG_PRELOAD_SPEC_OFFSET (bits 471-479): the dword of the kernel
    /// argument segment preloading starts at.
    pub fn kernarg_preload_offset(&self) -> u16 {
        u16::from_le_bytes([self.reserved2[0], self.reserved2[1]]) >> 7
    }

    pub fn property(&self, name: &str) -> u32 {
        field(&KERNEL_CODE_PROPERTIES, name).get(u32::from(self.kernel_code_properties))
    }

    /// Every named bit field with its value (reserved ones included), for
    /// reports and tests: `("COMPUTE_PGM_RSRC1.GRANULATED_WORKITEM_VGPR_COUNT", 3)`.
    pub fn fields(&self, target: &TargetId) -> Vec<(String, u64)> {
        let mut out = vec![
            ("GROUP_SEGMENT_FIXED_SIZE".to_string(), u64::from(self.group_segment_fixed_size)),
            ("PRIVATE_SEGMENT_FIXED_SIZE".to_string(), u64::from(self.private_segment_fixed_size)),
            ("KERNARG_SIZE".to_string(), u64::from(self.kernarg_size)),
            ("KERNEL_CODE_ENTRY_BYTE_OFFSET".to_string(), self.kernel_code_entry_byte_offset as u64),
        ];
        let mut add = |prefix: &str, table: &[Field], word: u32| {
            for f in table {
                out.push((format!("{prefix}.{}", f.name), u64::from(f.get(word))));
            }
        };
        if target.has_unified_register_file() {
            add("COMPUTE_PGM_RSRC3", &RSRC3_GFX90A, self.compute_pgm_rsrc3);
        }
        add("COMPUTE_PGM_RSRC1", &RSRC1, self.compute_pgm_rsrc1);
        add("COMPUTE_PGM_RSRC2", &RSRC2, self.compute_pgm_rsrc2);
        add("KERNEL_CODE_PROPERTIES", &KERNEL_CODE_PROPERTIES, u32::from(self.kernel_code_properties));
        out
    }

    /// The `.amdhsa_*` directives that make LLVM's assembler produce this
    /// descriptor (all but the entry offset, which the assembler computes
    /// from where the kernel's code is). An error lists the fields the
    /// directives cannot express; such descriptors are emitted as bytes
    /// (RDNA's, for one: its mode bits are not modelled here).
    pub fn directives(&self, target: &TargetId) -> Result<Vec<(&'static str, u64)>, Vec<String>> {
        let unified = target.has_unified_register_file();
        let architected = target.has_architected_flat_scratch();
        let mut inexpressible = Vec::new();
        let mut nonzero = |what: &str, value: u64| {
            if value != 0 {
                inexpressible.push(format!("{what} = {value:#x}"));
            }
        };
        nonzero(
            "reserved bytes",
            self.reserved0.iter().chain(&self.reserved1).chain(&self.reserved2).any(|b| *b != 0) as u64,
        );
        for name in [
            "PRIORITY",
            "PRIV",
            "DEBUG_MODE",
            "BULKY",
            "CDBG_USER",
            "RESERVED0",
            "WGP_MODE",
            "MEM_ORDERED",
            "FWD_PROGRESS",
        ] {
            nonzero(&format!("COMPUTE_PGM_RSRC1.{name}"), u64::from(self.rsrc1(name)));
        }
        for name in [
            "ENABLE_TRAP_HANDLER",
            "ENABLE_EXCEPTION_ADDRESS_WATCH",
            "ENABLE_EXCEPTION_MEMORY",
            "GRANULATED_LDS_SIZE",
            "RESERVED0",
        ] {
            nonzero(&format!("COMPUTE_PGM_RSRC2.{name}"), u64::from(self.rsrc2(name)));
        }
        for name in ["RESERVED0", "ENABLE_WAVEFRONT_SIZE32", "USES_DYNAMIC_STACK", "RESERVED1"] {
            nonzero(&format!("KERNEL_CODE_PROPERTIES.{name}"), u64::from(self.property(name)));
        }
        if architected {
            for name in ["ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER", "ENABLE_SGPR_FLAT_SCRATCH_INIT"] {
                nonzero(&format!("KERNEL_CODE_PROPERTIES.{name}"), u64::from(self.property(name)));
            }
        }
        if unified {
            for name in ["RESERVED0", "RESERVED1"] {
                nonzero(&format!("COMPUTE_PGM_RSRC3.{name}"), u64::from(self.rsrc3_gfx90a(name)));
            }
        } else {
            nonzero("COMPUTE_PGM_RSRC3", u64::from(self.compute_pgm_rsrc3));
        }

        // Granulated register counts: LLVM 15 encodes next_free_vgpr as
        // ceil(n / granule) - 1 (8 on gfx90a, unified VGPR+AGPR; 4 on gfx908)
        // and next_free_sgpr plus the SGPRs it reserves as ceil(n / 8) - 1,
        // with at most 102 addressable SGPRs. The XNACK mask reservation must
        // match the target id (on or "any": 4 extra SGPRs); reserving flat
        // scratch makes the extra 6.
        let vgpr_blocks = self.rsrc1("GRANULATED_WORKITEM_VGPR_COUNT");
        let next_free_vgpr = u64::from(vgpr_blocks + 1) * if unified { 8 } else { 4 };
        let reserve_xnack = u64::from(!matches!(target.xnack, FeatureSetting::Off | FeatureSetting::Unsupported));
        let sgpr_blocks = u64::from(self.rsrc1("GRANULATED_WAVEFRONT_SGPR_COUNT"));
        // With architected flat scratch there is no directive for it, and
        // the assembler reserves FLAT_SCRATCH's 6 as if asked.
        let choices: &[(u64, u64)] = if architected { &[(6, 0)] } else { &[(reserve_xnack * 4, 0), (6, 1)] };
        let sgprs = choices.iter().copied().find_map(|(extra, flat_scratch)| {
            let highest = (sgpr_blocks + 1) * 8 - extra;
            let next_free = highest.min(MAX_ADDRESSABLE_SGPRS);
            (next_free + extra > sgpr_blocks * 8 && next_free > 0).then_some((next_free, flat_scratch))
        });
        let (next_free_sgpr, reserve_flat_scratch) = sgprs.unwrap_or_else(|| {
            inexpressible.push(format!("COMPUTE_PGM_RSRC1.GRANULATED_WAVEFRONT_SGPR_COUNT = {sgpr_blocks}"));
            (0, 0)
        });
        if !inexpressible.is_empty() {
            return Err(inexpressible);
        }

        let p = |name| u64::from(self.property(name));
        let r1 = |name| u64::from(self.rsrc1(name));
        let r2 = |name| u64::from(self.rsrc2(name));
        let mut out = vec![
            (".amdhsa_group_segment_fixed_size", u64::from(self.group_segment_fixed_size)),
            (".amdhsa_private_segment_fixed_size", u64::from(self.private_segment_fixed_size)),
            (".amdhsa_kernarg_size", u64::from(self.kernarg_size)),
            (".amdhsa_user_sgpr_count", r2("USER_SGPR_COUNT")),
        ];
        if !architected {
            out.push((".amdhsa_user_sgpr_private_segment_buffer", p("ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER")));
        }
        out.extend([
            (".amdhsa_user_sgpr_dispatch_ptr", p("ENABLE_SGPR_DISPATCH_PTR")),
            (".amdhsa_user_sgpr_queue_ptr", p("ENABLE_SGPR_QUEUE_PTR")),
            (".amdhsa_user_sgpr_kernarg_segment_ptr", p("ENABLE_SGPR_KERNARG_SEGMENT_PTR")),
            (".amdhsa_user_sgpr_dispatch_id", p("ENABLE_SGPR_DISPATCH_ID")),
        ]);
        if !architected {
            out.push((".amdhsa_user_sgpr_flat_scratch_init", p("ENABLE_SGPR_FLAT_SCRATCH_INIT")));
        }
        out.push((".amdhsa_user_sgpr_private_segment_size", p("ENABLE_SGPR_PRIVATE_SEGMENT_SIZE")));
        // The same bit: the scratch wave offset's SGPR, or with architected
        // flat scratch whether the kernel uses scratch at all.
        out.push(if architected {
            (".amdhsa_enable_private_segment", r2("ENABLE_PRIVATE_SEGMENT"))
        } else {
            (".amdhsa_system_sgpr_private_segment_wavefront_offset", r2("ENABLE_PRIVATE_SEGMENT"))
        });
        out.extend([
            (".amdhsa_system_sgpr_workgroup_id_x", r2("ENABLE_SGPR_WORKGROUP_ID_X")),
            (".amdhsa_system_sgpr_workgroup_id_y", r2("ENABLE_SGPR_WORKGROUP_ID_Y")),
            (".amdhsa_system_sgpr_workgroup_id_z", r2("ENABLE_SGPR_WORKGROUP_ID_Z")),
            (".amdhsa_system_sgpr_workgroup_info", r2("ENABLE_SGPR_WORKGROUP_INFO")),
            (".amdhsa_system_vgpr_workitem_id", r2("ENABLE_VGPR_WORKITEM_ID")),
            (".amdhsa_next_free_vgpr", next_free_vgpr),
            (".amdhsa_next_free_sgpr", next_free_sgpr),
        ]);
        if unified {
            out.push((".amdhsa_accum_offset", u64::from(self.rsrc3_gfx90a("ACCUM_OFFSET") + 1) * 4));
        }
        out.push((".amdhsa_reserve_vcc", 0));
        if !architected {
            out.push((".amdhsa_reserve_flat_scratch", reserve_flat_scratch));
        }
        out.extend([
            (".amdhsa_reserve_xnack_mask", reserve_xnack),
            (".amdhsa_float_round_mode_32", r1("FLOAT_ROUND_MODE_32")),
            (".amdhsa_float_round_mode_16_64", r1("FLOAT_ROUND_MODE_16_64")),
            (".amdhsa_float_denorm_mode_32", r1("FLOAT_DENORM_MODE_32")),
            (".amdhsa_float_denorm_mode_16_64", r1("FLOAT_DENORM_MODE_16_64")),
            (".amdhsa_dx10_clamp", r1("ENABLE_DX10_CLAMP")),
            (".amdhsa_ieee_mode", r1("ENABLE_IEEE_MODE")),
            (".amdhsa_fp16_overflow", r1("FP16_OVFL")),
        ]);
        if unified {
            out.push((".amdhsa_tg_split", u64::from(self.rsrc3_gfx90a("TG_SPLIT"))));
        }
        out.extend([
            (".amdhsa_exception_fp_ieee_invalid_op", r2("ENABLE_EXCEPTION_IEEE_754_FP_INVALID_OPERATION")),
            (".amdhsa_exception_fp_denorm_src", r2("ENABLE_EXCEPTION_FP_DENORMAL_SOURCE")),
            (".amdhsa_exception_fp_ieee_div_zero", r2("ENABLE_EXCEPTION_IEEE_754_FP_DIVISION_BY_ZERO")),
            (".amdhsa_exception_fp_ieee_overflow", r2("ENABLE_EXCEPTION_IEEE_754_FP_OVERFLOW")),
            (".amdhsa_exception_fp_ieee_underflow", r2("ENABLE_EXCEPTION_IEEE_754_FP_UNDERFLOW")),
            (".amdhsa_exception_fp_ieee_inexact", r2("ENABLE_EXCEPTION_IEEE_754_FP_INEXACT")),
            (".amdhsa_exception_int_div_zero", r2("ENABLE_EXCEPTION_INT_DIVIDE_BY_ZERO")),
        ]);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gfx90a() -> TargetId {
        TargetId { xnack: FeatureSetting::Off, ..TargetId::processor("gfx90a") }
    }

    #[test]
    fn decode_encode_round_trips_and_fields_are_named() {
        let mut bytes = [0u8; SIZE];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i * 37 % 251) as u8;
        }
        let descriptor = KernelDescriptor::decode(&bytes);
        assert_eq!(descriptor.encode(), bytes);
        let fields = descriptor.fields(&gfx90a());
        assert!(fields.iter().any(|(n, _)| n == "COMPUTE_PGM_RSRC3.ACCUM_OFFSET"));
        assert!(fields.iter().any(|(n, _)| n == "KERNEL_CODE_PROPERTIES.ENABLE_SGPR_KERNARG_SEGMENT_PTR"));
    }

    #[test]
    fn field_access_matches_the_bit_layout() {
        let f = Field::new("X", 6, 4);
        assert_eq!(f.get(0b11_1100_0000), 0b1111);
        assert_eq!(f.set(0, 0b1010), 0b10_1000_0000);
        assert_eq!(f.set(u32::MAX, 0), !(0b1111 << 6));
    }

    #[test]
    fn granulated_counts_become_next_free_registers() {
        let mut descriptor = KernelDescriptor::decode(&[0u8; SIZE]);
        descriptor.compute_pgm_rsrc1 = field(&RSRC1, "GRANULATED_WORKITEM_VGPR_COUNT").set(0, 3);
        let sgpr = field(&RSRC1, "GRANULATED_WAVEFRONT_SGPR_COUNT");
        let with_sgpr_blocks = |blocks| {
            let mut d = descriptor.clone();
            d.compute_pgm_rsrc1 = sgpr.set(d.compute_pgm_rsrc1, blocks);
            d.directives(&gfx90a())
        };
        let get = |directives: &[(&str, u64)], name: &str| directives.iter().find(|(n, _)| *n == name).unwrap().1;
        let small = with_sgpr_blocks(1).unwrap();
        assert_eq!(get(&small, ".amdhsa_next_free_vgpr"), 32);
        assert_eq!(get(&small, ".amdhsa_next_free_sgpr"), 16);
        assert_eq!(get(&small, ".amdhsa_reserve_flat_scratch"), 0);
        // 13 blocks: at most 102 addressable SGPRs, so 102 (ceil(102/8) - 1 = 12).
        assert_eq!(get(&with_sgpr_blocks(12).unwrap(), ".amdhsa_next_free_sgpr"), 102);
        // 14 blocks: 102 addressable + 6 reserved for flat scratch = 108.
        let large = with_sgpr_blocks(13).unwrap();
        assert_eq!(get(&large, ".amdhsa_next_free_sgpr"), 102);
        assert_eq!(get(&large, ".amdhsa_reserve_flat_scratch"), 1);
        // 15 blocks cannot be reached with directives.
        assert!(with_sgpr_blocks(14).is_err());
    }

    #[test]
    fn bits_without_a_directive_are_reported() {
        let mut descriptor = KernelDescriptor::decode(&[0u8; SIZE]);
        descriptor.compute_pgm_rsrc1 = field(&RSRC1, "DEBUG_MODE").set(0, 1);
        let problems = descriptor.directives(&gfx90a()).unwrap_err();
        assert_eq!(problems, vec!["COMPUTE_PGM_RSRC1.DEBUG_MODE = 0x1".to_string()]);
    }
}
