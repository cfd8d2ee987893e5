//! DS: the workgroup's LDS (reads, writes, two-address forms, atomics) and
//! the cross-lane DS operations (swizzle, permute, bpermute) that do not
//! touch LDS. An access past the workgroup's LDS stops the run, or does
//! what the hardware does (`LdsOutOfRange`).

use super::{base_name, Context, Handler, LdsOutOfRange};
use crate::access::Space;
use crate::error::Fault;
use crate::program::Inst;
use crate::wave::{active_lanes, LANES};

/// Whether `size` bytes at `offset` lie in the workgroup's LDS; when not,
/// either a fault or (like the hardware) false after counting it.
fn lds_in_range(c: &mut Context<'_>, offset: u64, size: u64, write: bool) -> Result<bool, Fault> {
    if offset + size <= c.lds.len() as u64 {
        return Ok(true);
    }
    match c.machine.lds_out_of_range {
        LdsOutOfRange::Stop => Err(Fault::Lds { offset, size, limit: c.lds.len() as u64 }),
        LdsOutOfRange::LikeHardware => {
            c.wave.lds_out_of_range += 1;
            c.wave.lds_writes_out_of_range += u64::from(write);
            Ok(false)
        }
    }
}

pub(super) fn lds_read(c: &mut Context<'_>, offset: u64, out: &mut [u8]) -> Result<(), Fault> {
    if !lds_in_range(c, offset, out.len() as u64, false)? {
        out.fill(0);
        return Ok(());
    }
    out.copy_from_slice(&c.lds[offset as usize..offset as usize + out.len()]);
    Ok(())
}

pub(super) fn lds_write(c: &mut Context<'_>, offset: u64, data: &[u8]) -> Result<(), Fault> {
    if lds_in_range(c, offset, data.len() as u64, true)? {
        c.lds[offset as usize..offset as usize + data.len()].copy_from_slice(data);
    }
    Ok(())
}

/// A lane's LDS address: the address VGPR plus the instruction's 16-bit
/// offset, added in 32 bits as the hardware adds them (LLVM folds offsets
/// onto bases that may be negative: `-16` plus `offset:32` is byte 16).
fn address(c: &Context<'_>, i: &Inst, lane: usize) -> u32 {
    c.wave.lane32(&i.srcs[0].operand, lane).wrapping_add(i.imm(0) as u32 & 0xffff)
}

/// The `k`-th dword of an access at `at`, in the same 32 bits.
fn dword(at: u32, k: usize) -> u64 {
    u64::from(at.wrapping_add(4 * k as u32))
}

/// The two addresses of a two-address form: the 8-bit `offset0` and
/// `offset1` in units of `unit` bytes (the element size, x64 for ST64).
fn two_addresses(c: &Context<'_>, i: &Inst, lane: usize, unit: u32) -> [u32; 2] {
    let base = c.wave.lane32(&i.srcs[0].operand, lane);
    [i.imm(0), i.imm(1)].map(|offset| base.wrapping_add((offset as u32 & 0xff) * unit))
}

/// Reads of 1-4 dwords into consecutive registers.
fn read_dwords(c: &mut Context<'_>, i: &Inst, n: usize) -> Result<(), Fault> {
    for lane in active_lanes(c.wave.exec()) {
        let at = address(c, i, lane);
        c.log_access(lane, u64::from(at), Space::Lds, 4 * n as u64);
        for k in 0..n {
            let mut b = [0u8; 4];
            lds_read(c, dword(at, k), &mut b)?;
            c.wave.write_lane32_at(&i.defs[0], lane, k, u32::from_le_bytes(b));
        }
    }
    Ok(())
}

fn write_dwords(c: &mut Context<'_>, i: &Inst, n: usize) -> Result<(), Fault> {
    for lane in active_lanes(c.wave.exec()) {
        let at = address(c, i, lane);
        c.log_access(lane, u64::from(at), Space::Lds, 4 * n as u64);
        for k in 0..n {
            let v = c.wave.lane32_at(&i.srcs[1].operand, lane, k);
            lds_write(c, dword(at, k), &v.to_le_bytes())?;
        }
    }
    Ok(())
}

/// Sub-dword reads: `bytes` 1 or 2, sign-extended or not, or into one half.
fn read_small(c: &mut Context<'_>, i: &Inst, bytes: usize, signed: bool, half: Option<bool>) -> Result<(), Fault> {
    for lane in active_lanes(c.wave.exec()) {
        let at = address(c, i, lane);
        c.log_access(lane, u64::from(at), Space::Lds, bytes as u64);
        let mut b = [0u8; 2];
        lds_read(c, u64::from(at), &mut b[..bytes])?;
        let raw = if bytes == 1 { u32::from(b[0]) } else { u32::from(u16::from_le_bytes(b)) };
        let value = match (signed, bytes) {
            (true, 1) => raw as u8 as i8 as i32 as u32,
            (true, _) => raw as u16 as i16 as i32 as u32,
            _ => raw,
        };
        let result = match half {
            None => value,
            Some(high) => {
                let old = if c.machine.d16_zeroes_other_half { 0 } else { c.wave.lane32(&i.defs[0], lane) };
                if high {
                    (old & 0xffff) | (value << 16)
                } else {
                    (old & 0xffff_0000) | (value & 0xffff)
                }
            }
        };
        c.wave.write_lane32(&i.defs[0], lane, result);
    }
    Ok(())
}

fn write_small(c: &mut Context<'_>, i: &Inst, bytes: usize, high: bool) -> Result<(), Fault> {
    for lane in active_lanes(c.wave.exec()) {
        let at = address(c, i, lane);
        c.log_access(lane, u64::from(at), Space::Lds, bytes as u64);
        let v = c.wave.lane32(&i.srcs[1].operand, lane);
        let v = if high { v >> 16 } else { v };
        lds_write(c, u64::from(at), &v.to_le_bytes()[..bytes])?;
    }
    Ok(())
}

/// Two-address forms: offsets in units of the element size (x64 for ST64).
fn read2(c: &mut Context<'_>, i: &Inst, dwords: usize, unit: u32) -> Result<(), Fault> {
    for lane in active_lanes(c.wave.exec()) {
        let addresses = two_addresses(c, i, lane, unit);
        c.log_access(lane, u64::from(addresses[0]), Space::Lds, 4 * dwords as u64);
        for (slot, at) in addresses.into_iter().enumerate() {
            for k in 0..dwords {
                let mut b = [0u8; 4];
                lds_read(c, dword(at, k), &mut b)?;
                c.wave.write_lane32_at(&i.defs[0], lane, slot * dwords + k, u32::from_le_bytes(b));
            }
        }
    }
    Ok(())
}

fn write2(c: &mut Context<'_>, i: &Inst, dwords: usize, unit: u32) -> Result<(), Fault> {
    for lane in active_lanes(c.wave.exec()) {
        let addresses = two_addresses(c, i, lane, unit);
        c.log_access(lane, u64::from(addresses[0]), Space::Lds, 4 * dwords as u64);
        for (slot, at) in addresses.into_iter().enumerate() {
            for k in 0..dwords {
                let v = c.wave.lane32_at(&i.srcs[1 + slot].operand, lane, k);
                lds_write(c, dword(at, k), &v.to_le_bytes())?;
            }
        }
    }
    Ok(())
}

/// The new memory value of a DS atomic (`a`: old, `b`: data, `c`: data2).
fn atomic_value(op: &str, a: u64, b: u64, c2: u64, wide: bool) -> Option<u64> {
    let mask = if wide { u64::MAX } else { u64::from(u32::MAX) };
    let signed = |x: u64| if wide { x as i64 } else { i64::from(x as u32 as i32) };
    let float = |x: u64| f32::from_bits(x as u32);
    Some(
        match op {
            "ADD" => a.wrapping_add(b),
            "SUB" => a.wrapping_sub(b),
            "RSUB" => b.wrapping_sub(a),
            "INC" => {
                if a >= b {
                    0
                } else {
                    a + 1
                }
            }
            "DEC" => {
                if a == 0 || a > b {
                    b
                } else {
                    a - 1
                }
            }
            "MIN_I32" | "MIN_I64" => signed(a).min(signed(b)) as u64,
            "MAX_I32" | "MAX_I64" => signed(a).max(signed(b)) as u64,
            "MIN_U32" | "MIN_U64" => a.min(b),
            "MAX_U32" | "MAX_U64" => a.max(b),
            "AND" => a & b,
            "OR" => a | b,
            "XOR" => a ^ b,
            "MSKOR" => (a & !b) | c2,
            "WRXCHG" => b,
            "CMPST" => {
                if a == b {
                    c2
                } else {
                    a
                }
            }
            "ADD_F32" => u64::from((float(a) + float(b)).to_bits()),
            "MIN_F32" => u64::from(float(a).min(float(b)).to_bits()),
            "MAX_F32" => u64::from(float(a).max(float(b)).to_bits()),
            "ADD_F64" => (f64::from_bits(a) + f64::from_bits(b)).to_bits(),
            _ => return None,
        } & mask,
    )
}

/// `DS_ADD_RTN_U32` -> ("ADD", wide, returns); `DS_MAX_I32` -> ("MAX_I32", ...).
fn atomic_kind(base: &str) -> Option<(String, bool, bool)> {
    let rest = base.strip_prefix("DS_")?;
    let returns = rest.contains("_RTN");
    let rest = rest.replace("_RTN", "");
    let (op, wide) = if let Some(op) = rest.strip_suffix("_B32").or_else(|| rest.strip_suffix("_U32")) {
        (op.to_string(), false)
    } else if let Some(op) = rest.strip_suffix("_B64").or_else(|| rest.strip_suffix("_U64")) {
        (op.to_string(), true)
    } else {
        (rest.clone(), rest.ends_with("64"))
    };
    // min/max keep their signedness in the name.
    let op = match (op.as_str(), rest.as_str()) {
        ("MIN" | "MAX", r) => format!("{op}_{}", &r[r.len() - 3..]),
        _ => op,
    };
    atomic_value(&op, 0, 0, 0, wide)?;
    Some((op, wide, returns))
}

fn atomic(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let (op, wide, returns) = atomic_kind(base_name(&i.name)).ok_or(Fault::Unimplemented)?;
    let size = if wide { 8 } else { 4 };
    for lane in active_lanes(c.wave.exec()) {
        let at = u64::from(address(c, i, lane));
        c.log_access(lane, at, Space::Lds, size as u64);
        let data = |k: usize| -> u64 {
            match i.srcs.get(1 + k) {
                Some(s) if wide => c.wave.lane64(&s.operand, lane),
                Some(s) => u64::from(c.wave.lane32(&s.operand, lane)),
                None => 0,
            }
        };
        let (b, c2) = (data(0), data(1));
        let mut bytes = [0u8; 8];
        lds_read(c, at, &mut bytes[..size])?;
        let old = u64::from_le_bytes(bytes);
        let new = atomic_value(&op, old, b, c2, wide).ok_or(Fault::Unimplemented)?;
        lds_write(c, at, &new.to_le_bytes()[..size])?;
        if returns {
            if wide {
                c.wave.write_lane64(&i.defs[0], lane, old);
            } else {
                c.wave.write_lane32(&i.defs[0], lane, old as u32);
            }
        }
    }
    Ok(())
}

fn swizzle(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let pattern = i.imm(0) as u32 & 0xffff;
    let exec = c.wave.exec();
    let source: Vec<u32> = (0..LANES).map(|lane| c.wave.lane32(&i.srcs[0].operand, lane)).collect();
    for lane in active_lanes(exec) {
        let from = if pattern & 0x8000 != 0 {
            (lane & !3) | ((pattern >> (2 * (lane & 3))) & 3) as usize
        } else {
            let (and, or, xor) = (pattern & 0x1f, (pattern >> 5) & 0x1f, (pattern >> 10) & 0x1f);
            (lane & !31) | ((((lane as u32 & 31) & and) | or) ^ xor) as usize
        };
        let value = if exec >> from & 1 != 0 { source[from] } else { 0 };
        c.wave.write_lane32(&i.defs[0], lane, value);
    }
    Ok(())
}

fn permute(c: &mut Context<'_>, i: &Inst, backward: bool) -> Result<(), Fault> {
    let exec = c.wave.exec();
    let offset = i.imm(0) as u32;
    let target =
        |c: &Context<'_>, lane| ((c.wave.lane32(&i.srcs[0].operand, lane).wrapping_add(offset) / 4) % 64) as usize;
    let data: Vec<u32> = (0..LANES).map(|lane| c.wave.lane32(&i.srcs[1].operand, lane)).collect();
    let mut out = [0u32; LANES];
    for lane in active_lanes(exec) {
        let other = target(c, lane);
        if backward {
            out[lane] = if exec >> other & 1 != 0 { data[other] } else { 0 };
        } else {
            out[other] = data[lane];
        }
    }
    for lane in active_lanes(exec) {
        c.wave.write_lane32(&i.defs[0], lane, out[lane]);
    }
    Ok(())
}

pub fn handler(name: &str) -> Option<Handler> {
    let base = base_name(name);
    Some(match base {
        "DS_NOP" => |_, _| Ok(()),
        "DS_READ_B32" => |c, i| read_dwords(c, i, 1),
        "DS_READ_B64" => |c, i| read_dwords(c, i, 2),
        "DS_READ_B96" => |c, i| read_dwords(c, i, 3),
        "DS_READ_B128" => |c, i| read_dwords(c, i, 4),
        "DS_READ_U8" => |c, i| read_small(c, i, 1, false, None),
        "DS_READ_I8" => |c, i| read_small(c, i, 1, true, None),
        "DS_READ_U16" => |c, i| read_small(c, i, 2, false, None),
        "DS_READ_I16" => |c, i| read_small(c, i, 2, true, None),
        "DS_READ_U8_D16" => |c, i| read_small(c, i, 1, false, Some(false)),
        "DS_READ_U8_D16_HI" => |c, i| read_small(c, i, 1, false, Some(true)),
        "DS_READ_I8_D16" => |c, i| read_small(c, i, 1, true, Some(false)),
        "DS_READ_I8_D16_HI" => |c, i| read_small(c, i, 1, true, Some(true)),
        "DS_READ_U16_D16" => |c, i| read_small(c, i, 2, false, Some(false)),
        "DS_READ_U16_D16_HI" => |c, i| read_small(c, i, 2, false, Some(true)),
        "DS_READ2_B32" => |c, i| read2(c, i, 1, 4),
        "DS_READ2ST64_B32" => |c, i| read2(c, i, 1, 256),
        "DS_READ2_B64" => |c, i| read2(c, i, 2, 8),
        "DS_READ2ST64_B64" => |c, i| read2(c, i, 2, 512),
        "DS_WRITE_B32" => |c, i| write_dwords(c, i, 1),
        "DS_WRITE_B64" => |c, i| write_dwords(c, i, 2),
        "DS_WRITE_B96" => |c, i| write_dwords(c, i, 3),
        "DS_WRITE_B128" => |c, i| write_dwords(c, i, 4),
        "DS_WRITE_B8" => |c, i| write_small(c, i, 1, false),
        "DS_WRITE_B16" => |c, i| write_small(c, i, 2, false),
        "DS_WRITE_B8_D16_HI" => |c, i| write_small(c, i, 1, true),
        "DS_WRITE_B16_D16_HI" => |c, i| write_small(c, i, 2, true),
        "DS_WRITE2_B32" => |c, i| write2(c, i, 1, 4),
        "DS_WRITE2ST64_B32" => |c, i| write2(c, i, 1, 256),
        "DS_WRITE2_B64" => |c, i| write2(c, i, 2, 8),
        "DS_WRITE2ST64_B64" => |c, i| write2(c, i, 2, 512),
        "DS_SWIZZLE_B32" => swizzle,
        "DS_PERMUTE_B32" => |c, i| permute(c, i, false),
        "DS_BPERMUTE_B32" => |c, i| permute(c, i, true),
        _ => {
            atomic_kind(base)?;
            atomic
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_names_decompose() {
        assert_eq!(atomic_kind("DS_ADD_U32"), Some(("ADD".into(), false, false)));
        assert_eq!(atomic_kind("DS_ADD_RTN_U64"), Some(("ADD".into(), true, true)));
        assert_eq!(atomic_kind("DS_MAX_RTN_I32"), Some(("MAX_I32".into(), false, true)));
        assert_eq!(atomic_kind("DS_CMPST_RTN_B32"), Some(("CMPST".into(), false, true)));
        assert_eq!(atomic_kind("DS_ADD_F32"), Some(("ADD_F32".into(), false, false)));
        assert_eq!(atomic_kind("DS_READ_B32"), None);
        assert_eq!(atomic_value("DEC", 0, 5, 0, false), Some(5));
        assert_eq!(atomic_value("MIN_I32", 0xffff_ffff, 3, 0, false), Some(0xffff_ffff));
    }
}
