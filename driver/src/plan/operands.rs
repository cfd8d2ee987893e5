//! Point values read from the instruction's operands: `{ source = N }`
//! (the value of its Nth source register) and `memory-address` (the address
//! a flat or global instruction accesses). MC operand order puts the results
//! first, then the sources; for flat and global: `vaddr`, then (stores,
//! atomics) `vdata`, then `saddr` in the `_SADDR` forms, then the offset.

use gpuinstr_intrinsics::{Register, SpecialRegister};

use crate::native::Operand;
use crate::stages::lift::{Flag, Instruction, Isa};
use crate::stages::payload::HookArgument;

/// `s4`, `v2`, `vcc` from an LLVM register name (`SGPR4_SGPR5`, `VGPR2`,
/// `VCC`): the first register of a tuple.
fn first_register(isa: &Isa, reg: u32) -> Option<Register> {
    let name = isa.register_name(isa.canonical(reg));
    match name {
        "VCC" => return Some(Register::Special(SpecialRegister::Vcc)),
        "VCC_LO" => return Some(Register::Special(SpecialRegister::VccLo)),
        "EXEC" => return Some(Register::Special(SpecialRegister::Exec)),
        "EXEC_LO" => return Some(Register::Special(SpecialRegister::ExecLo)),
        "M0" => return Some(Register::Special(SpecialRegister::M0)),
        _ => {}
    }
    let first = name.split('_').next()?;
    if let Some(index) = first.strip_prefix("VGPR") {
        return index.parse().ok().map(Register::Vgpr);
    }
    if let Some(index) = first.strip_prefix("SGPR") {
        return index.parse().ok().map(Register::Sgpr);
    }
    if let Some(index) = first.strip_prefix("AGPR") {
        return index.parse().ok().map(Register::Agpr);
    }
    None
}

/// The instruction's `n`th source register (0 is the first operand after
/// the results), when it is a register.
pub fn source_register(isa: &Isa, instruction: &Instruction, n: usize) -> Option<HookArgument> {
    if !instruction.decoded {
        return None;
    }
    let operands = instruction.raw.operands.iter().filter(|o| !matches!(o, Operand::Register(0)));
    let sources = operands.skip(instruction.defs.len());
    match sources.clone().nth(n)? {
        Operand::Register(reg) => first_register(isa, *reg).map(HookArgument::Register),
        _ => None,
    }
}

/// The address a flat or global instruction accesses (per lane), or `None`
/// for every other instruction (scratch, buffer, LDS and scalar memory
/// addresses are not flat addresses).
pub fn memory_address(isa: &Isa, instruction: &Instruction) -> Option<HookArgument> {
    let has = |flag| isa.has_flag(instruction.opcode, flag);
    if !instruction.decoded || !has(Flag::Flat) || has(Flag::FlatScratch) {
        return None;
    }
    let mut registers = 0usize;
    let mut vaddr = None;
    let mut saddr = None;
    let mut offset = None;
    for operand in &instruction.raw.operands {
        match *operand {
            Operand::Register(0) => {}
            Operand::Register(reg) => {
                registers += 1;
                if registers <= instruction.defs.len() {
                    continue;
                }
                match first_register(isa, reg) {
                    Some(r @ Register::Vgpr(_)) if vaddr.is_none() => vaddr = Some(r),
                    Some(r @ Register::Sgpr(_)) if offset.is_none() => saddr = Some(r),
                    _ => {}
                }
            }
            Operand::Immediate(value) if vaddr.is_some() && offset.is_none() => offset = Some(value),
            _ => {}
        }
    }
    let (vaddr, offset) = (vaddr?, offset?);
    // GLOBAL offsets are 13-bit signed on GFX9, and LLVM 15's decoder leaves
    // the raw field (`offset:-8` decodes as 8184); FLAT's are unsigned.
    let offset = if has(Flag::FlatGlobal) { (offset << 51) >> 51 } else { offset };
    Some(match saddr {
        Some(base) => HookArgument::MemoryAddress { base, index: Some(vaddr), offset },
        None => HookArgument::MemoryAddress { base: vaddr, index: None, offset },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::load::TargetId;

    /// The address argument of one encoded instruction.
    fn address_of(bytes: &[u8]) -> Option<HookArgument> {
        let target = TargetId::processor("gfx90a");
        let isa = Isa::new(&target).unwrap();
        let raw = isa.mc.decode(bytes, 0).unwrap();
        memory_address(&isa, &Instruction::new(&isa, 0, bytes, raw))
    }

    #[test]
    fn global_offsets_are_signed_and_flat_offsets_are_not() {
        // global_store_dwordx4 v[18:19], v[8:11], off offset:-8
        let global = address_of(&[0xf8, 0x9f, 0x7c, 0xdc, 0x12, 0x08, 0x7f, 0x00]);
        assert!(matches!(global, Some(HookArgument::MemoryAddress { offset: -8, index: None, .. })), "{global:?}");
        // flat_load_dword v0, v[2:3] offset:4095
        let flat = address_of(&[0xff, 0x0f, 0x50, 0xdc, 0x02, 0x00, 0x00, 0x00]);
        assert!(matches!(flat, Some(HookArgument::MemoryAddress { offset: 4095, .. })), "{flat:?}");
    }
}
