//! SMEM: scalar loads, stores and atomics through a 64-bit address or a
//! buffer resource, cache controls and the time counters.

use super::vector_memory::atomic_result;
use super::{Context, Handler};
use crate::error::Fault;
use crate::operands::Operand;
use crate::program::Inst;

/// Dwords moved by an opcode (`S_LOAD_DWORDX4_IMM` -> 4).
fn dwords(name: &str) -> u32 {
    for (tag, n) in [("DWORDX16", 16), ("DWORDX8", 8), ("DWORDX4", 4), ("DWORDX2", 2)] {
        if name.contains(tag) {
            return n;
        }
    }
    1
}

/// The byte offset: an immediate (`_IMM`), a register (`_SGPR`), or both
/// added (`_SGPR_IMM`, GFX9's encoding with SOE set, which LLVM 16 and
/// newer emit).
fn offset(c: &Context<'_>, i: &Inst, register_source: usize) -> u64 {
    let register = || u64::from(c.wave.scalar32(&i.srcs[register_source].operand));
    if i.name.ends_with("_SGPR_IMM") {
        register().wrapping_add(i.imm(0) as u64)
    } else if i.name.ends_with("_SGPR") {
        register()
    } else {
        i.imm(0) as u64
    }
}

/// A buffer resource's base and record count.
fn buffer(c: &Context<'_>, resource: &Operand) -> (u64, u64) {
    let word = |k| c.wave.scalar_dword(resource, k);
    let base = u64::from(word(0)) | (u64::from(word(1) & 0xffff) << 32);
    (base, u64::from(word(2)))
}

fn load(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let n = dwords(&i.name);
    let base = c.wave.scalar64(&i.srcs[0].operand);
    let address = base.wrapping_add(offset(c, i, 1)) & !3;
    for k in 0..n {
        let value = c.memory.read_u32(address + u64::from(k) * 4)?;
        c.wave.write_scalar_dword(&i.defs[0], k as usize, value);
    }
    Ok(())
}

fn buffer_load(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let n = dwords(&i.name);
    let (base, records) = buffer(c, &i.srcs[0].operand);
    let start = offset(c, i, 1) & !3;
    for k in 0..n {
        let at = start + u64::from(k) * 4;
        // Out of range reads return zero, as the hardware's range check does.
        let value = if at + 4 <= records { c.memory.read_u32(base + at)? } else { 0 };
        c.wave.write_scalar_dword(&i.defs[0], k as usize, value);
    }
    Ok(())
}

fn store(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let n = dwords(&i.name);
    let data = i.srcs[0].operand;
    let base = c.wave.scalar64(&i.srcs[1].operand);
    let address = base.wrapping_add(offset(c, i, 2)) & !3;
    for k in 0..n {
        let value = c.wave.scalar_dword(&data, k as usize);
        c.memory.write_u32(address + u64::from(k) * 4, value)?;
    }
    Ok(())
}

/// `S_BUFFER_ATOMIC_CMPSWAP_X2_IMM_RTN` -> ("CMPSWAP", wide, buffer, returns).
fn atomic_kind(name: &str) -> Option<(&str, bool, bool, bool)> {
    let (buffer, rest) = match name.strip_prefix("S_BUFFER_ATOMIC_") {
        Some(rest) => (true, rest),
        None => (false, name.strip_prefix("S_ATOMIC_")?),
    };
    let (rest, returns) = match rest.strip_suffix("_RTN") {
        Some(rest) => (rest, true),
        None => (rest, false),
    };
    let op = ["_SGPR_IMM", "_IMM", "_SGPR"].iter().find_map(|form| rest.strip_suffix(form))?;
    let (op, wide) = match op.strip_suffix("_X2") {
        Some(op) => (op, true),
        None => (op, false),
    };
    atomic_result(op, 0, [0, 0], wide)?;
    Some((op, wide, buffer, returns))
}

/// One read-modify-write by the whole wave. Operands: [sdata, sbase or
/// resource, soffset for `_SGPR`]; CMPSWAP's sdata holds the new value then
/// the compare value; `_RTN` returns the old value in sdst.
fn atomic(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let (op, wide, buffer_form, returns) = atomic_kind(&i.name).ok_or(Fault::Unimplemented)?;
    let data = i.srcs[0].operand;
    let offset = offset(c, i, 2);
    let address = if buffer_form {
        let (base, records) = buffer(c, &i.srcs[1].operand);
        let size = if wide { 8 } else { 4 };
        // Out of range: nothing is written and the old value reads as zero.
        (offset + size <= records).then_some(base + offset)
    } else {
        Some(c.wave.scalar64(&i.srcs[1].operand).wrapping_add(offset))
    };
    let value = |k: usize| {
        if wide {
            u64::from(c.wave.scalar_dword(&data, 2 * k)) | (u64::from(c.wave.scalar_dword(&data, 2 * k + 1)) << 32)
        } else {
            u64::from(c.wave.scalar_dword(&data, k))
        }
    };
    let operands = [value(0), if op == "CMPSWAP" { value(1) } else { 0 }];
    let old = match address {
        Some(address) => {
            let address = address & !if wide { 7 } else { 3 };
            let old = if wide { c.memory.read_u64(address)? } else { u64::from(c.memory.read_u32(address)?) };
            let new = atomic_result(op, old, operands, wide).ok_or(Fault::Unimplemented)?;
            if wide {
                c.memory.write_u64(address, new)?;
            } else {
                c.memory.write_u32(address, new as u32)?;
            }
            old
        }
        None => 0,
    };
    if returns {
        c.wave.write_scalar_dword(&i.defs[0], 0, old as u32);
        if wide {
            c.wave.write_scalar_dword(&i.defs[0], 1, (old >> 32) as u32);
        }
    }
    Ok(())
}

pub fn handler(name: &str) -> Option<Handler> {
    if name.starts_with("S_ATOMIC_") || name.starts_with("S_BUFFER_ATOMIC_") {
        atomic_kind(name)?;
        return Some(atomic);
    }
    let base = name.trim_end_matches("_ci");
    let base = ["_SGPR_IMM", "_IMM", "_SGPR"].iter().find_map(|form| base.strip_suffix(form)).unwrap_or(base);
    Some(match base {
        "S_LOAD_DWORD" | "S_LOAD_DWORDX2" | "S_LOAD_DWORDX4" | "S_LOAD_DWORDX8" | "S_LOAD_DWORDX16" => load,
        "S_SCRATCH_LOAD_DWORD" | "S_SCRATCH_LOAD_DWORDX2" | "S_SCRATCH_LOAD_DWORDX4" => return None,
        "S_BUFFER_LOAD_DWORD"
        | "S_BUFFER_LOAD_DWORDX2"
        | "S_BUFFER_LOAD_DWORDX4"
        | "S_BUFFER_LOAD_DWORDX8"
        | "S_BUFFER_LOAD_DWORDX16" => buffer_load,
        "S_STORE_DWORD" | "S_STORE_DWORDX2" | "S_STORE_DWORDX4" => store,
        "S_DCACHE_INV" | "S_DCACHE_WB" | "S_DCACHE_INV_VOL" | "S_DCACHE_WB_VOL" => |_, _| Ok(()),
        // A deterministic clock: the instructions this wave has run, so an
        // original and an instrumented run differ only where they should.
        "S_MEMTIME" | "S_MEMREALTIME" => |c, i| {
            let now = c.wave.instructions;
            c.wave.write_scalar64(&i.defs[0], now);
            Ok(())
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::atomic_kind;

    #[test]
    fn atomic_names_decompose() {
        assert_eq!(atomic_kind("S_ATOMIC_ADD_IMM_RTN"), Some(("ADD", false, false, true)));
        assert_eq!(atomic_kind("S_ATOMIC_CMPSWAP_X2_SGPR"), Some(("CMPSWAP", true, false, false)));
        assert_eq!(atomic_kind("S_BUFFER_ATOMIC_SUB_IMM_RTN"), Some(("SUB", false, true, true)));
        assert_eq!(atomic_kind("S_ATOMIC_NAND_IMM"), None);
        assert_eq!(atomic_kind("S_LOAD_DWORD_IMM"), None);
        assert_eq!(atomic_kind("S_ATOMIC_ADD_SGPR_IMM_RTN"), Some(("ADD", false, false, true)));
    }
}
