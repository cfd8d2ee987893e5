//! Instruction classes a plan selects with `where = "class:<name>"`, from
//! LLVM's instruction description (SIInstrFlags in TSFlags, and the generic
//! flags) of each instruction's pseudo opcode.

use crate::native::OpcodeFlags;
use crate::stages::lift::{Instruction, Isa};

/// SIInstrFlags bits (llvm/lib/Target/AMDGPU/SIDefines.h, LLVM 15).
pub(crate) mod si {
    pub const SALU: u64 = 1 << 0;
    pub const VALU: u64 = 1 << 1;
    pub const MUBUF: u64 = 1 << 17;
    pub const MTBUF: u64 = 1 << 18;
    pub const SMRD: u64 = 1 << 19;
    pub const MIMG: u64 = 1 << 20;
    pub const FLAT: u64 = 1 << 22;
    pub const DS: u64 = 1 << 23;
    pub const FLAT_GLOBAL: u64 = 1 << 51;
    pub const IS_MAI: u64 = 1 << 54;
    pub const FLAT_SCRATCH: u64 = 1 << 56;
    pub const IS_ATOMIC_NO_RET: u64 = 1 << 57;
    pub const IS_ATOMIC_RET: u64 = 1 << 58;
}

/// A class of instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InstructionClass {
    /// Executed once per wavefront: SALU and scalar memory (seed 004's "scalar").
    Scalar,
    /// `v_readlane`, `v_writelane`, `v_readfirstlane`: vector registers, one lane.
    LaneAccess,
    /// Everything else: work done per lane (VALU, vector memory, LDS, ...).
    Vector,
    Valu,
    Memory,
    Load,
    Store,
    Atomic,
    Smem,
    Vmem,
    Global,
    Flat,
    Scratch,
    Lds,
    Branch,
    Barrier,
    Waitcnt,
    Mfma,
}

/// Every class with its plan name and what it means, for docs and errors.
pub const CLASSES: &[(&str, InstructionClass, &str)] = &[
    ("scalar", InstructionClass::Scalar, "SALU and scalar memory: executed once per wavefront"),
    ("lane-access", InstructionClass::LaneAccess, "v_readlane, v_writelane, v_readfirstlane"),
    ("vector", InstructionClass::Vector, "per-lane work: not scalar and not lane-access"),
    ("valu", InstructionClass::Valu, "vector ALU"),
    ("memory", InstructionClass::Memory, "any load, store or atomic (scalar, vector, LDS)"),
    ("load", InstructionClass::Load, "reads memory"),
    ("store", InstructionClass::Store, "writes memory"),
    ("atomic", InstructionClass::Atomic, "atomic read-modify-write"),
    ("smem", InstructionClass::Smem, "scalar memory (s_load, s_store, s_atomic)"),
    ("vmem", InstructionClass::Vmem, "vector memory: buffer, image, flat, global, scratch"),
    ("global", InstructionClass::Global, "global_* instructions"),
    ("flat", InstructionClass::Flat, "flat_* instructions (not global_ or scratch_)"),
    ("scratch", InstructionClass::Scratch, "scratch_* instructions"),
    ("lds", InstructionClass::Lds, "LDS and GDS (ds_*)"),
    ("branch", InstructionClass::Branch, "s_branch and s_cbranch_*"),
    ("barrier", InstructionClass::Barrier, "s_barrier"),
    ("waitcnt", InstructionClass::Waitcnt, "s_waitcnt and its variants"),
    ("mfma", InstructionClass::Mfma, "matrix core instructions (v_mfma_*, v_accvgpr_*)"),
];

impl InstructionClass {
    pub fn from_name(name: &str) -> Option<InstructionClass> {
        CLASSES.iter().find(|(n, _, _)| *n == name).map(|(_, c, _)| *c)
    }

    pub fn name(self) -> &'static str {
        CLASSES.iter().find(|(_, c, _)| *c == self).map_or("?", |(n, _, _)| n)
    }

    /// Whether `instruction` is in the class.
    pub fn contains(self, isa: &Isa, instruction: &Instruction) -> bool {
        let flags = instruction.flags;
        let ts = isa.info(instruction.opcode).map_or(0, |i| i.target_flags);
        let name = instruction.name(isa);
        let lane_access = name.starts_with("V_READLANE_B32")
            || name.starts_with("V_WRITELANE_B32")
            || name.starts_with("V_READFIRSTLANE_B32");
        let scalar = ts & (si::SALU | si::SMRD) != 0;
        let memory = flags.has(OpcodeFlags::MAY_LOAD) || flags.has(OpcodeFlags::MAY_STORE);
        match self {
            InstructionClass::Scalar => scalar,
            InstructionClass::LaneAccess => lane_access,
            InstructionClass::Vector => instruction.decoded && !scalar && !lane_access,
            InstructionClass::Valu => ts & si::VALU != 0,
            InstructionClass::Memory => memory,
            InstructionClass::Load => flags.has(OpcodeFlags::MAY_LOAD),
            InstructionClass::Store => flags.has(OpcodeFlags::MAY_STORE),
            InstructionClass::Atomic => {
                ts & (si::IS_ATOMIC_RET | si::IS_ATOMIC_NO_RET) != 0 || name.starts_with("S_ATOMIC")
            }
            InstructionClass::Smem => ts & si::SMRD != 0 && memory,
            InstructionClass::Vmem => ts & (si::MUBUF | si::MTBUF | si::MIMG | si::FLAT) != 0,
            InstructionClass::Global => ts & si::FLAT_GLOBAL != 0,
            InstructionClass::Scratch => ts & si::FLAT_SCRATCH != 0,
            InstructionClass::Flat => ts & si::FLAT != 0 && ts & (si::FLAT_GLOBAL | si::FLAT_SCRATCH) == 0,
            InstructionClass::Lds => ts & si::DS != 0,
            InstructionClass::Branch => flags.has(OpcodeFlags::BRANCH) && name.starts_with("S_"),
            InstructionClass::Barrier => name == "S_BARRIER",
            InstructionClass::Waitcnt => name.starts_with("S_WAITCNT"),
            InstructionClass::Mfma => ts & si::IS_MAI != 0,
        }
    }
}
