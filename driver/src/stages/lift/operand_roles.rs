//! What an operand's type in LLVM's instruction description says about
//! reading its value: an immediate field, a pc-relative offset, source
//! modifiers, or a 64-bit floating-point or integer source (whose 32-bit
//! literal the hardware widens differently). The AMDGPU operand type
//! numbers are not written down here: LLVM 21 renumbered them (INPUT_MODS
//! 46 -> 42), so each role's numbers are found in the LLVM this build runs,
//! from witness instructions whose operand layout is known, and every
//! 64-bit source type of the GFX9 instructions must get a role.

use std::collections::BTreeSet;

use thiserror::Error;

use crate::native::{GenericOperandTypes, OpcodeInfo};

/// What an operand of a given type is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperandRole {
    /// An immediate field (offsets, cache policy, simm16, ...).
    Immediate,
    /// A pc-relative branch offset.
    PcRelative,
    /// The neg/abs/sext/op_sel modifiers of the next source.
    InputModifiers,
    /// A 64-bit floating-point source: a 32-bit literal is the high half.
    Float64,
    /// A 64-bit integer source: a 32-bit literal is zero-extended.
    Int64,
    /// A 64-bit source of two packed 32-bit values.
    Packed64,
    /// Anything else (registers and 32-bit or 16-bit sources).
    Other,
}

/// Witnesses: (opcode, operand indices) whose types have the role.
const INPUT_MODIFIERS: &[(&str, &[usize])] = &[("V_ADD_F32_e64", &[1, 3]), ("V_FMA_F32_e64", &[1, 3, 5])];

/// Opcodes whose every target-typed source is of the role.
const FLOAT64: &[&str] = &[
    "V_ADD_F64_e64",
    "V_FMA_F64_e64",
    "V_MUL_F64_e64",
    "V_CVT_F32_F64_e32",
    "V_CVT_F32_F64_e64",
    "V_FRACT_F64_e32",
    "V_MFMA_F64_16X16X4F64_e64",
    "V_MFMA_F64_4X4X4F64_e64",
    "V_MFMA_F64_4X4X4F64_vgprcd_e64",
    "V_MFMA_F64_16X16X4F64_vgprcd_e64",
];
const INT64: &[&str] = &[
    "S_MOV_B64",
    "S_AND_B64",
    "S_CMP_EQ_U64",
    "S_CBRANCH_G_FORK",
    "V_CMP_EQ_U64_e64",
    "V_CMP_EQ_U64_e32",
    "V_MOV_B64_e32",
    "V_MOV_B64_e64",
];
const PACKED64: &[&str] = &["V_PK_FMA_F32", "V_PK_MUL_F32", "V_PK_ADD_F32", "V_PK_MOV_B32"];

#[derive(Debug, Error)]
pub enum OperandRoleError {
    #[error(
        "this LLVM's instruction descriptions do not single out {what}: gpuinstr cannot read operands with LLVM {}; \
         build it against a supported LLVM (docs/toolchains.md)",
        crate::toolchain::LLVM_VERSION
    )]
    NotFound { what: String },
}

/// The operand types of each role in this LLVM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperandRoles {
    generic: GenericOperandTypes,
    input_modifiers: u8,
    float64: BTreeSet<u8>,
    int64: BTreeSet<u8>,
    packed64: BTreeSet<u8>,
}

impl OperandRoles {
    /// Finds every role's types. `info` describes an opcode by name (None
    /// for a name this LLVM does not know); `class_bits` is a register
    /// class's width; `all` is every opcode's description.
    pub fn find<'a>(
        info: impl Fn(&str) -> Option<&'a OpcodeInfo>,
        class_bits: impl Fn(i16) -> u32,
        all: impl Iterator<Item = (&'a str, &'a OpcodeInfo)>,
    ) -> Result<OperandRoles, OperandRoleError> {
        let generic = GenericOperandTypes::of_this_llvm();
        let not_found = |what: &str| OperandRoleError::NotFound { what: what.to_string() };

        let mut modifiers = BTreeSet::new();
        for (name, indices) in INPUT_MODIFIERS {
            let info = info(name).ok_or_else(|| not_found(&format!("the source modifiers ({name} is unknown)")))?;
            modifiers.extend(indices.iter().filter_map(|i| info.operand_types.get(*i).copied()));
        }
        let input_modifiers = match modifiers.iter().collect::<Vec<_>>().as_slice() {
            [one] if **one >= generic.first_target => **one,
            other => return Err(not_found(&format!("the source modifiers (types {other:?})"))),
        };

        // The types of an opcode's target-specific source operands.
        let sources = |info: &OpcodeInfo| -> Vec<(u8, i16)> {
            (info.num_defs as usize..info.operand_types.len().min(info.num_operands as usize))
                .filter(|&i| info.operand_types[i] >= generic.first_target && info.operand_types[i] != input_modifiers)
                .map(|i| (info.operand_types[i], info.operand_register_classes[i]))
                .collect()
        };
        let collect = |names: &[&str], what: &str| -> Result<BTreeSet<u8>, OperandRoleError> {
            let types: BTreeSet<u8> =
                names.iter().filter_map(|name| info(name)).flat_map(sources).map(|(t, _)| t).collect();
            if types.is_empty() {
                return Err(not_found(&format!("{what} sources (none of {names:?})")));
            }
            Ok(types)
        };
        let float64 = collect(FLOAT64, "64-bit floating-point")?;
        let int64 = collect(INT64, "64-bit integer")?;
        let packed64 = collect(PACKED64, "packed 64-bit")?;
        if !float64.is_disjoint(&int64) || !float64.is_disjoint(&packed64) || !int64.is_disjoint(&packed64) {
            return Err(not_found(&format!(
                "64-bit source kinds (floating-point {float64:?}, integer {int64:?} and packed {packed64:?} overlap)"
            )));
        }
        let roles = OperandRoles { generic, input_modifiers, float64, int64, packed64 };

        // Every 64-bit source of a vector or scalar instruction of the ISA
        // (`all`: a GFX9 one's) must have a role: one left out would read
        // its literal wrongly. Matrix instructions take no literal (GFX9's
        // VOP3P encoding has no literal field), so their sources cannot
        // misread one; LLVM 22 types their 64-bit packed sources as 32-bit
        // inline constants.
        let mut unknown = BTreeSet::new();
        for (name, info) in all {
            if !(name.starts_with("V_") || name.starts_with("S_"))
                || name.starts_with("V_MFMA_")
                || name.starts_with("V_SMFMAC_")
            {
                continue;
            }
            for (operand_type, class) in sources(info) {
                if class_bits(class) == 64 && roles.role(operand_type) == OperandRole::Other {
                    unknown.insert((operand_type, name.to_string()));
                }
            }
        }
        if let Some((operand_type, name)) = unknown.into_iter().next() {
            return Err(not_found(&format!("what operand type {operand_type} of {name} (a 64-bit source) is")));
        }
        Ok(roles)
    }

    pub fn role(&self, operand_type: u8) -> OperandRole {
        if operand_type == self.generic.immediate {
            OperandRole::Immediate
        } else if operand_type == self.generic.pc_relative {
            OperandRole::PcRelative
        } else if operand_type == self.input_modifiers {
            OperandRole::InputModifiers
        } else if self.float64.contains(&operand_type) {
            OperandRole::Float64
        } else if self.int64.contains(&operand_type) {
            OperandRole::Int64
        } else if self.packed64.contains(&operand_type) {
            OperandRole::Packed64
        } else {
            OperandRole::Other
        }
    }
}
