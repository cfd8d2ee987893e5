//! SMEM: scalar loads and stores through a 64-bit address or a buffer
//! resource, cache controls and the time counters.

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

/// The byte offset: an immediate (`_IMM`) or a register (`_SGPR`).
fn offset(c: &Context<'_>, i: &Inst, register_source: usize) -> u64 {
    if i.name.ends_with("_SGPR") {
        u64::from(c.wave.scalar32(&i.srcs[register_source].operand))
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

pub fn handler(name: &str) -> Option<Handler> {
    let base = name.trim_end_matches("_ci");
    let base = base.strip_suffix("_IMM").or_else(|| base.strip_suffix("_SGPR")).unwrap_or(base);
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
