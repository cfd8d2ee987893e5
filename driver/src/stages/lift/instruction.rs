//! A lifted instruction: the decoded MC instruction, its pseudo opcode, the
//! registers it defines and uses (explicit and implicit) and what it does to
//! control flow.

use crate::native::{OpcodeFlags, Operand, RawInstruction};

use super::isa::{Isa, Mapping};

/// What an instruction does to control flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Goes on with the next instruction.
    Next,
    /// `s_branch`: always to `target`.
    Branch { target: u64 },
    /// `s_cbranch_*`: to `target` or the next instruction.
    ConditionalBranch { target: u64 },
    /// `s_endpgm` and friends: the wave ends.
    EndProgram,
    /// `s_setpc_b64`: to an address in registers (a return from a device
    /// function, or an indirect jump).
    IndirectBranch,
    /// `s_setpc_b64` to the address a pc-relative computation just before
    /// it gives (Tensile's long branches): always to `target`, which
    /// travels in the computation's literal, not in this instruction.
    Jump { target: u64 },
    /// `s_swappc_b64`: a call; comes back to the next instruction.
    Call,
}

/// A pc-relative literal made symbolic: the instruction's literal is the
/// low or high half of `target - (getpc result) - addend`, so the emitter
/// writes it as `symbol@rel32@lo+addend` / `@hi`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PcRelative {
    pub half: Half,
    /// The operand index holding the literal.
    pub operand: usize,
    /// Absolute address the computation produces.
    pub target: u64,
    /// Offset of the literal field from the `s_getpc_b64` result.
    pub addend: i64,
    /// Address of the `s_getpc_b64`.
    pub getpc: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Half {
    Low,
    High,
}

/// One instruction of a lifted function.
#[derive(Clone, Debug)]
pub struct Instruction {
    pub address: u64,
    /// False for bytes LLVM could not decode (kept as data).
    pub decoded: bool,
    /// The original encoding.
    pub bytes: Vec<u8>,
    /// As decoded: the real opcode and its operands.
    pub raw: RawInstruction,
    /// The opcode MIR uses (the pseudo of `raw.opcode`, or `raw.opcode`).
    pub opcode: u32,
    pub mapping: Mapping,
    /// Explicit register operands written / read (LLVM register numbers,
    /// canonical: FLAT_SCR_LO rather than its FLAT_SCR_LO_vi encoding).
    pub defs: Vec<u32>,
    pub uses: Vec<u32>,
    /// Implicit operands of the pseudo (SCC, VCC, EXEC, M0, MODE, ...).
    pub implicit_defs: Vec<u32>,
    pub implicit_uses: Vec<u32>,
    pub flags: OpcodeFlags,
    pub flow: Flow,
    pub pc_relative: Option<PcRelative>,
}

impl Instruction {
    pub fn size(&self) -> u64 {
        self.bytes.len() as u64
    }

    pub fn end(&self) -> u64 {
        self.address + self.size()
    }

    /// Builds an instruction from a decoded MC instruction.
    pub fn new(isa: &Isa, address: u64, bytes: &[u8], raw: RawInstruction) -> Self {
        let mapping = isa.mapping(raw.opcode);
        let opcode = isa.pseudo(raw.opcode);
        // Explicit operand roles come from the decoded opcode's description
        // (its operand list is the MCInst's); implicit ones from the pseudo.
        let real_info = isa.info(raw.opcode);
        let pseudo_info = isa.info(opcode);
        let num_defs = real_info.map_or(0, |i| i.num_defs as usize);
        let mut defs = Vec::new();
        let mut uses = Vec::new();
        for (index, operand) in raw.operands.iter().enumerate() {
            if let Operand::Register(reg) = *operand {
                if reg == 0 {
                    continue; // NoRegister (an absent optional operand)
                }
                let reg = isa.canonical(reg);
                if index < num_defs {
                    defs.push(reg);
                } else {
                    uses.push(reg);
                }
            }
        }
        let implicit_defs: Vec<u32> =
            pseudo_info.map(|i| i.implicit_defs.iter().map(|r| u32::from(*r)).collect()).unwrap_or_default();
        let implicit_uses: Vec<u32> =
            pseudo_info.map(|i| i.implicit_uses.iter().map(|r| u32::from(*r)).collect()).unwrap_or_default();
        let flags = pseudo_info.or(real_info).map(|i| i.flags).unwrap_or_default();
        let flow = flow_of(isa, address, &raw, flags);
        Instruction {
            address,
            decoded: true,
            bytes: bytes.to_vec(),
            raw,
            opcode,
            mapping,
            defs,
            uses,
            implicit_defs,
            implicit_uses,
            flags,
            flow,
            pc_relative: None,
        }
    }

    /// Bytes LLVM could not decode, kept in place.
    pub fn undecodable(address: u64, bytes: &[u8]) -> Self {
        Instruction {
            address,
            decoded: false,
            bytes: bytes.to_vec(),
            raw: RawInstruction { opcode: 0, size: bytes.len() as u32, operands: Vec::new() },
            opcode: 0,
            mapping: Mapping::Unmapped,
            defs: Vec::new(),
            uses: Vec::new(),
            implicit_defs: Vec::new(),
            implicit_uses: Vec::new(),
            flags: OpcodeFlags::default(),
            flow: Flow::Next,
            pc_relative: None,
        }
    }

    pub fn name<'a>(&self, isa: &'a Isa) -> &'a str {
        isa.opcode_name(self.opcode)
    }

    /// Every register written, explicit then implicit.
    pub fn all_defs(&self) -> impl Iterator<Item = u32> + '_ {
        self.defs.iter().chain(&self.implicit_defs).copied()
    }

    /// Every register read, explicit then implicit.
    pub fn all_uses(&self) -> impl Iterator<Item = u32> + '_ {
        self.uses.iter().chain(&self.implicit_uses).copied()
    }
}

fn flow_of(isa: &Isa, address: u64, raw: &RawInstruction, flags: OpcodeFlags) -> Flow {
    let name = isa.opcode_name(isa.pseudo(raw.opcode));
    if flags.has(OpcodeFlags::CALL) {
        return Flow::Call;
    }
    if flags.has(OpcodeFlags::INDIRECT_BRANCH) || name.starts_with("S_SETPC_B64") {
        return Flow::IndirectBranch;
    }
    if flags.has(OpcodeFlags::BRANCH) {
        // SOPP branches: a signed 16-bit count of dwords from the next instruction.
        let offset = match raw.operands.first() {
            Some(Operand::Immediate(value)) => i64::from(*value as i16),
            _ => 0,
        };
        let target = address.wrapping_add(4).wrapping_add((offset * 4) as u64);
        return if flags.has(OpcodeFlags::CONDITIONAL_BRANCH) {
            Flow::ConditionalBranch { target }
        } else {
            Flow::Branch { target }
        };
    }
    if name.starts_with("S_ENDPGM") || (flags.has(OpcodeFlags::RETURN) && flags.has(OpcodeFlags::BARRIER)) {
        return Flow::EndProgram;
    }
    Flow::Next
}

/// The opposite of a conditional branch (a relaxed branch's skip over its
/// long jump), by the branch's opcode name.
pub fn inverse_branch(name: &str) -> Option<&'static str> {
    Some(match name {
        "S_CBRANCH_SCC0" => "s_cbranch_scc1",
        "S_CBRANCH_SCC1" => "s_cbranch_scc0",
        "S_CBRANCH_VCCZ" => "s_cbranch_vccnz",
        "S_CBRANCH_VCCNZ" => "s_cbranch_vccz",
        "S_CBRANCH_EXECZ" => "s_cbranch_execnz",
        "S_CBRANCH_EXECNZ" => "s_cbranch_execz",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::inverse_branch;

    #[test]
    fn conditions_invert() {
        for (a, b) in [("S_CBRANCH_SCC0", "s_cbranch_scc1"), ("S_CBRANCH_EXECZ", "s_cbranch_execnz")] {
            assert_eq!(inverse_branch(a), Some(b));
        }
        assert_eq!(inverse_branch("S_CBRANCH_CDBGSYS"), None);
    }
}
