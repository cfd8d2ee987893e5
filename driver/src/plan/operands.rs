//! Point values read from the instruction's operands: `{ source = N }`
//! (the value of its Nth source register) and `memory-address` (the address
//! a flat or global instruction accesses). MC operand order puts the results
//! first, then the sources; for flat and global: `vaddr`, then (stores,
//! atomics) `vdata`, then `saddr` in the `_SADDR` forms, then the offset.

use gpuinstr_intrinsics::{Register, SpecialRegister};

use crate::native::Operand;
use crate::stages::lift::{Flag, Instruction, Isa};
use crate::stages::payload::{BufferAddress, HookArgument};

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

/// The space a memory instruction's address is in, as `memory-space`
/// gives it (0 flat, 1 global, 2 buffer, 3 LDS): where `memory_address`
/// gives an address.
pub fn memory_space(isa: &Isa, instruction: &Instruction) -> Option<HookArgument> {
    let has = |flag| isa.has_flag(instruction.opcode, flag);
    let space = match memory_address(isa, instruction)? {
        HookArgument::MemoryAddress { .. } if has(Flag::FlatGlobal) => 1,
        HookArgument::MemoryAddress { .. } => 0,
        HookArgument::BufferAddress(_) => 2,
        HookArgument::LdsAddress { .. } => 3,
        _ => return None,
    };
    Some(HookArgument::Int(space))
}

/// How many bytes one lane's access covers from its `memory-address`, as
/// `memory-bytes` gives it: 1, 2, 4, 8, 12 or 16 (a two-address LDS form's
/// one element; an atomic's operand). `None` where there is no
/// `memory-address` or the name says no width.
pub fn memory_bytes(isa: &Isa, instruction: &Instruction) -> Option<HookArgument> {
    memory_address(isa, instruction)?;
    access_bytes(instruction.name(isa)).map(|bytes| HookArgument::Int(i64::from(bytes)))
}

/// An access's bytes per lane from its pseudo opcode name: the width word
/// of a load or store (`DWORDX4`, `UBYTE_D16`, `B128`, `U16`), or an
/// atomic's (64-bit for `X2`, `B64`/`U64`/`I64`/`F64`; packed halves 4).
fn access_bytes(name: &str) -> Option<u32> {
    let words: Vec<&str> = name.split('_').collect();
    if name.starts_with("DS_") {
        if words.contains(&"PK") {
            return Some(4);
        }
        return words.iter().find_map(|word| match *word {
            "B8" | "U8" | "I8" => Some(1),
            "B16" | "U16" | "I16" | "F16" | "BF16" => Some(2),
            "B32" | "U32" | "I32" | "F32" => Some(4),
            "B64" | "U64" | "I64" | "F64" => Some(8),
            "B96" => Some(12),
            "B128" => Some(16),
            _ => None,
        });
    }
    if name.contains("_ATOMIC_") {
        let wide = words.iter().any(|w| matches!(*w, "X2" | "F64" | "B64" | "U64" | "I64"));
        return Some(if wide { 8 } else { 4 });
    }
    let at = words.iter().position(|w| matches!(*w, "LOAD" | "STORE"))?;
    match *words.get(at + 1)? {
        "DWORD" => Some(4),
        "DWORDX2" => Some(8),
        "DWORDX3" => Some(12),
        "DWORDX4" => Some(16),
        "BYTE" | "UBYTE" | "SBYTE" => Some(1),
        "SHORT" | "USHORT" | "SSHORT" => Some(2),
        // gfx940's loads into LDS name the width after LDS.
        "LDS" => access_bytes(&format!("X_LOAD_{}", words.get(at + 2)?)),
        _ => None,
    }
}

/// The address a memory instruction accesses (per lane): a flat or global
/// instruction's, a buffer instruction's (MUBUF, but for format
/// conversions) or an LDS instruction's; `None` for every other
/// instruction (scratch and scalar memory, GDS, LDS instructions that
/// access no LDS address such as `ds_swizzle`, `ds_permute`, `ds_append`).
pub fn memory_address(isa: &Isa, instruction: &Instruction) -> Option<HookArgument> {
    let has = |flag| isa.has_flag(instruction.opcode, flag);
    if !instruction.decoded {
        return None;
    }
    if has(Flag::Ds) {
        return lds_address(isa, instruction);
    }
    if has(Flag::Mubuf) {
        return buffer_address(isa, instruction);
    }
    if !has(Flag::Flat) || has(Flag::FlatScratch) {
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

/// The registers and immediates after the results, in MC order.
fn sources<'a>(isa: &'a Isa, instruction: &'a Instruction) -> impl Iterator<Item = Source> + 'a {
    let mut registers = 0usize;
    instruction.raw.operands.iter().filter_map(move |operand| match *operand {
        Operand::Register(0) => None,
        Operand::Register(reg) => {
            registers += 1;
            (registers > instruction.defs.len()).then(|| Source::Register(reg, first_register(isa, reg)))
        }
        Operand::Immediate(value) => Some(Source::Immediate(value)),
        _ => None,
    })
}

#[derive(Clone, Copy, Debug)]
enum Source {
    /// LLVM's register, and its first register when it is one we name.
    Register(u32, Option<Register>),
    Immediate(i64),
}

/// LDS instructions that access no LDS address of their own: data shares
/// between lanes, counters, GDS and those whose address is M0's.
const NO_LDS_ADDRESS: &[&str] =
    &["SWIZZLE", "PERMUTE", "APPEND", "CONSUME", "GWS", "ORDERED_COUNT", "NOP", "ADDTID", "GS_REG"];

/// An LDS instruction's address: its address VGPR plus its offset (of a
/// two-address form, the first address: `offset0` in elements, x64 for
/// ST64). GDS accesses (`gds` set) have none.
fn lds_address(isa: &Isa, instruction: &Instruction) -> Option<HookArgument> {
    let name = instruction.name(isa);
    if NO_LDS_ADDRESS.iter().any(|part| name.contains(part)) {
        return None;
    }
    let mut sources = sources(isa, instruction);
    let address = match sources.next()? {
        Source::Register(_, Some(register @ Register::Vgpr(_))) => register,
        _ => return None,
    };
    let immediates: Vec<i64> =
        sources.filter_map(|s| if let Source::Immediate(value) = s { Some(value) } else { None }).collect();
    let two_addresses = ["READ2", "WRITE2", "WRXCHG2"].iter().any(|form| name.contains(form));
    let offset = if two_addresses {
        let element = if name.contains("B64") { 8 } else { 4 };
        let unit = if name.contains("ST64") { element * 64 } else { element };
        (immediates.first()? & 0xff) * unit
    } else {
        immediates.first()? & 0xffff
    };
    (!accesses_gds(isa, instruction)).then_some(HookArgument::LdsAddress { address, offset })
}

/// Whether a DS instruction's `gds` bit is set, read from its encoding
/// (LLVM 18 and later no longer decode it as an operand): bit 16 on GFX9,
/// 17 on RDNA.
fn accesses_gds(isa: &Isa, instruction: &Instruction) -> bool {
    let bit = if isa.generation.is_gfx9() { 16 } else { 17 };
    instruction.bytes.get(bit / 8).is_some_and(|byte| byte & (1 << (bit % 8)) != 0)
}

/// Bytes a buffer access's range check covers: its first dword's (1, 2 or
/// 4 bytes), or a 64-bit atomic's 8; `None` for format conversions.
fn buffer_checked_bytes(name: &str) -> Option<u8> {
    if name.contains("FORMAT") {
        return None;
    }
    if let Some(op) = name.strip_prefix("BUFFER_ATOMIC_") {
        return Some(if op.contains("X2") || op.contains("F64") { 8 } else { 4 });
    }
    let op = name.strip_prefix("BUFFER_LOAD_").or_else(|| name.strip_prefix("BUFFER_STORE_"))?;
    Some(if op.starts_with("DWORD") {
        4
    } else if op.contains("SHORT") {
        2
    } else if op.contains("BYTE") {
        1
    } else {
        return None;
    })
}

/// A buffer instruction's address operands: in MC order, the data (stores
/// and atomics), `vaddr` (the index, the offset, or both as a pair), the
/// resource (four SGPRs), the SGPR offset (or an inline constant) and the
/// instruction's offset.
fn buffer_address(isa: &Isa, instruction: &Instruction) -> Option<HookArgument> {
    let name = instruction.name(isa);
    let checked_bytes = buffer_checked_bytes(name)?;
    let both = name.contains("_BOTHEN");
    let (idxen, offen) = (both || name.contains("_IDXEN"), both || name.contains("_OFFEN"));
    let sources: Vec<Source> = sources(isa, instruction).collect();
    let quad = |reg: u32| isa.register_name(isa.canonical(reg)).split('_').count() == 4;
    let at = sources.iter().position(|s| matches!(s, Source::Register(reg, Some(Register::Sgpr(_))) if quad(*reg)))?;
    let Source::Register(_, Some(Register::Sgpr(first))) = sources[at] else { return None };
    let resource = [0, 1, 2, 3].map(|k| Register::Sgpr(first + k));
    let vaddr = match (idxen || offen, at.checked_sub(1).map(|k| sources[k])) {
        (false, _) => None,
        (true, Some(Source::Register(_, Some(register @ Register::Vgpr(_))))) => Some(register),
        (true, _) => return None,
    };
    let (index, voffset) = match (idxen, offen, vaddr) {
        (true, true, Some(Register::Vgpr(v))) => (Some(Register::Vgpr(v)), Some(Register::Vgpr(v + 1))),
        (true, false, vaddr) => (vaddr, None),
        (false, true, vaddr) => (None, vaddr),
        _ => (None, None),
    };
    let (soffset, soffset_constant) = match *sources.get(at + 1)? {
        Source::Register(_, Some(register @ Register::Sgpr(_))) => (Some(register), 0),
        Source::Immediate(value) => (None, value),
        // An M0 or special register offset: not modelled.
        Source::Register(..) => return None,
    };
    let offset = match *sources.get(at + 2)? {
        Source::Immediate(value) => value & 0xfff,
        Source::Register(..) => return None,
    };
    let buffer = BufferAddress { resource, index, voffset, soffset, soffset_constant, offset, checked_bytes };
    Some(HookArgument::BufferAddress(buffer))
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

    fn buffer_of(bytes: &[u8]) -> BufferAddress {
        match address_of(bytes) {
            Some(HookArgument::BufferAddress(buffer)) => buffer,
            other => panic!("not a buffer address: {other:?}"),
        }
    }

    #[test]
    fn buffer_addresses_take_the_resource_vaddr_soffset_and_offset() {
        let resource = [8, 9, 10, 11].map(Register::Sgpr);
        // buffer_load_dwordx4 v[0:3], v4, s[8:11], 0 offen offset:16
        let offen = buffer_of(&[0x10, 0x10, 0x5c, 0xe0, 0x04, 0x00, 0x02, 0x80]);
        let expected = BufferAddress {
            resource,
            index: None,
            voffset: Some(Register::Vgpr(4)),
            soffset: None,
            soffset_constant: 0,
            offset: 16,
            checked_bytes: 4,
        };
        assert_eq!(offen, expected);
        // buffer_load_dword v0, v[4:5], s[8:11], s12 idxen offen offset:16
        let both = buffer_of(&[0x10, 0x30, 0x50, 0xe0, 0x04, 0x00, 0x02, 0x0c]);
        assert_eq!(
            (both.index, both.voffset, both.soffset),
            (Some(Register::Vgpr(4)), Some(Register::Vgpr(5)), Some(Register::Sgpr(12)))
        );
        // buffer_store_short v0, off, s[8:11], s12 offset:6: the data is not an address.
        let store = buffer_of(&[0x06, 0x00, 0x68, 0xe0, 0x00, 0x00, 0x02, 0x0c]);
        assert_eq!((store.index, store.voffset, store.offset, store.checked_bytes), (None, None, 6, 2));
        assert_eq!(store.resource, resource);
        // buffer_atomic_add_x2 v[0:1], v4, s[8:11], 0 idxen glc
        let atomic = buffer_of(&[0x00, 0x60, 0x88, 0xe1, 0x04, 0x00, 0x02, 0x80]);
        assert_eq!((atomic.index, atomic.voffset, atomic.checked_bytes), (Some(Register::Vgpr(4)), None, 8));
        // buffer_load_format_x v0, v4, s[8:11], 0 offen: a conversion, none.
        assert_eq!(address_of(&[0x00, 0x10, 0x00, 0xe0, 0x04, 0x00, 0x02, 0x80]), None);
    }

    #[test]
    fn access_bytes_come_from_the_width_in_the_name() {
        let cases = [
            ("GLOBAL_LOAD_DWORDX4_SADDR", 16),
            ("FLAT_STORE_BYTE_D16_HI", 1),
            ("BUFFER_LOAD_USHORT_OFFEN", 2),
            ("BUFFER_LOAD_DWORD_LDS_OFFEN", 4),
            ("GLOBAL_LOAD_LDS_DWORDX4", 16),
            ("GLOBAL_ATOMIC_ADD_F32_SADDR_RTN", 4),
            ("BUFFER_ATOMIC_CMPSWAP_X2_OFFEN", 8),
            ("FLAT_ATOMIC_ADD_F64", 8),
            ("DS_READ_B128", 16),
            ("DS_READ_U8_D16_HI", 1),
            ("DS_READ2ST64_B64", 8),
            ("DS_WRITE_B96", 12),
            ("DS_ADD_RTN_U32", 4),
            ("DS_CMPST_RTN_B64", 8),
            ("DS_PK_ADD_RTN_F16", 4),
            ("DS_ADD_F32", 4),
        ];
        for (name, bytes) in cases {
            assert_eq!(access_bytes(name), Some(bytes), "{name}");
        }
        assert_eq!(access_bytes("BUFFER_LOAD_FORMAT_X_OFFEN"), None);
    }

    #[test]
    fn lds_addresses_are_the_address_vgpr_and_the_first_offset() {
        let lds = |bytes: &[u8]| address_of(bytes);
        // ds_read_b128 v[0:3], v4 offset:64
        let read = lds(&[0x40, 0x00, 0xfe, 0xd9, 0x04, 0x00, 0x00, 0x00]);
        assert_eq!(read, Some(HookArgument::LdsAddress { address: Register::Vgpr(4), offset: 64 }));
        // ds_write2st64_b64 v4, v[0:1], v[2:3] offset0:3 offset1:2: 3 * 64 * 8.
        let write2 = lds(&[0x03, 0x02, 0x9e, 0xd8, 0x04, 0x00, 0x02, 0x00]);
        assert_eq!(write2, Some(HookArgument::LdsAddress { address: Register::Vgpr(4), offset: 1536 }));
        // ds_add_rtn_u32 v6, v4, v5 offset:4: the result is not the address.
        let atomic = lds(&[0x04, 0x00, 0x40, 0xd8, 0x04, 0x05, 0x00, 0x06]);
        assert_eq!(atomic, Some(HookArgument::LdsAddress { address: Register::Vgpr(4), offset: 4 }));
        // ds_read_b32 v0, v4 offset:4 gds; ds_bpermute_b32 v0, v1, v2: none.
        assert_eq!(lds(&[0x04, 0x00, 0x6d, 0xd8, 0x04, 0x00, 0x00, 0x00]), None);
        assert_eq!(lds(&[0x00, 0x00, 0x7e, 0xd8, 0x01, 0x02, 0x00, 0x00]), None);
    }
}
