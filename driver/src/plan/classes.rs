//! Instruction classes a plan selects with `where = "class:<name>"`, from
//! LLVM's instruction description (SIInstrFlags in TSFlags, whose bits the
//! ISA finds in the LLVM it runs, and the generic flags) of each
//! instruction's pseudo opcode.

use crate::native::OpcodeFlags;
use crate::stages::lift::{Flag, Instruction, Isa};

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
        let has = |flag| isa.has_flag(instruction.opcode, flag);
        let name = instruction.name(isa);
        let lane_access = name.starts_with("V_READLANE_B32")
            || name.starts_with("V_WRITELANE_B32")
            || name.starts_with("V_READFIRSTLANE_B32");
        let scalar = has(Flag::Salu) || has(Flag::Smrd);
        let memory = flags.has(OpcodeFlags::MAY_LOAD) || flags.has(OpcodeFlags::MAY_STORE);
        match self {
            InstructionClass::Scalar => scalar,
            InstructionClass::LaneAccess => lane_access,
            InstructionClass::Vector => instruction.decoded && !scalar && !lane_access,
            InstructionClass::Valu => has(Flag::Valu),
            InstructionClass::Memory => memory,
            InstructionClass::Load => flags.has(OpcodeFlags::MAY_LOAD),
            InstructionClass::Store => flags.has(OpcodeFlags::MAY_STORE),
            // Atomics read and write; LLVM 15 also marks plain DS stores IsAtomicNoRet.
            InstructionClass::Atomic => {
                let read_write = flags.has(OpcodeFlags::MAY_LOAD) && flags.has(OpcodeFlags::MAY_STORE);
                (read_write && (has(Flag::IsAtomicRet) || has(Flag::IsAtomicNoRet))) || name.starts_with("S_ATOMIC")
            }
            InstructionClass::Smem => has(Flag::Smrd) && memory,
            InstructionClass::Vmem => has(Flag::Mubuf) || has(Flag::Mtbuf) || has(Flag::Mimg) || has(Flag::Flat),
            InstructionClass::Global => has(Flag::FlatGlobal),
            InstructionClass::Scratch => has(Flag::FlatScratch),
            InstructionClass::Flat => has(Flag::Flat) && !has(Flag::FlatGlobal) && !has(Flag::FlatScratch),
            InstructionClass::Lds => has(Flag::Ds),
            InstructionClass::Branch => flags.has(OpcodeFlags::BRANCH) && name.starts_with("S_"),
            InstructionClass::Barrier => name == "S_BARRIER",
            InstructionClass::Waitcnt => name.starts_with("S_WAITCNT"),
            InstructionClass::Mfma => has(Flag::IsMai),
        }
    }
}
