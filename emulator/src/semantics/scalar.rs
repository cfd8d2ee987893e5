//! Scalar ALU: SOP1, SOP2, SOPC and SOPK (GFX9 semantics; SCC as the
//! "Vega" ISA manual defines it per opcode).

// The macros below bind each opcode's closure to a `fn` pointer and call it
// once; that is how one generic body serves every opcode.
#![allow(clippy::redundant_closure_call)]

use super::{Context, Handler};
use crate::error::Fault;
use crate::operands::M0;
use crate::program::Inst;

fn s32(c: &Context<'_>, i: &Inst, k: usize) -> u32 {
    c.wave.scalar32(&i.srcs[k].operand)
}

fn s64(c: &Context<'_>, i: &Inst, k: usize) -> u64 {
    c.wave.scalar64(&i.srcs[k].operand)
}

fn d32(c: &mut Context<'_>, i: &Inst, value: u32) {
    c.wave.write_scalar32(&i.defs[0], value);
}

fn d64(c: &mut Context<'_>, i: &Inst, value: u64) {
    c.wave.write_scalar64(&i.defs[0], value);
}

/// `sdst = f(src0, src1, scc)`, SCC from the second result when Some.
macro_rules! sop2_32 {
    ($f:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            let f: fn(u32, u32, bool) -> (u32, Option<bool>) = $f;
            let (r, scc) = f(s32(c, i, 0), s32(c, i, 1), c.wave.scc);
            d32(c, i, r);
            if let Some(scc) = scc {
                c.wave.scc = scc;
            }
            Ok(())
        }
    };
}

/// 64-bit `sdst = f(src0, src1)`; `src1` is read as 64 bits.
macro_rules! sop2_64 {
    ($f:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            let f: fn(u64, u64, bool) -> (u64, Option<bool>) = $f;
            let (r, scc) = f(s64(c, i, 0), s64(c, i, 1), c.wave.scc);
            d64(c, i, r);
            if let Some(scc) = scc {
                c.wave.scc = scc;
            }
            Ok(())
        }
    };
}

/// 64-bit `src0` with a 32-bit `src1` (shifts, bit-field extracts).
macro_rules! sop2_64_32 {
    ($f:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            let f: fn(u64, u32) -> u64 = $f;
            let r = f(s64(c, i, 0), s32(c, i, 1));
            d64(c, i, r);
            c.wave.scc = r != 0;
            Ok(())
        }
    };
}

macro_rules! sop1_32 {
    ($f:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            let f: fn(u32, bool) -> (u32, Option<bool>) = $f;
            let (r, scc) = f(s32(c, i, 0), c.wave.scc);
            d32(c, i, r);
            if let Some(scc) = scc {
                c.wave.scc = scc;
            }
            Ok(())
        }
    };
}

macro_rules! sop1_64 {
    ($f:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            let f: fn(u64, bool) -> (u64, Option<bool>) = $f;
            let (r, scc) = f(s64(c, i, 0), c.wave.scc);
            d64(c, i, r);
            if let Some(scc) = scc {
                c.wave.scc = scc;
            }
            Ok(())
        }
    };
}

/// A 64-bit source counted into a 32-bit result (bcnt, ff1, flbit).
macro_rules! sop1_64_to_32 {
    ($f:expr, $scc:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            let f: fn(u64) -> u32 = $f;
            let r = f(s64(c, i, 0));
            d32(c, i, r);
            if $scc {
                c.wave.scc = r != 0;
            }
            Ok(())
        }
    };
}

macro_rules! sopc_32 {
    ($f:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            let f: fn(u32, u32) -> bool = $f;
            c.wave.scc = f(s32(c, i, 0), s32(c, i, 1));
            Ok(())
        }
    };
}

/// SOPK compares: the register against simm16.
macro_rules! sopk_cmp {
    ($f:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            let f: fn(u32, u16) -> bool = $f;
            c.wave.scc = f(s32(c, i, 0), i.imm(0) as u16);
            Ok(())
        }
    };
}

/// `EXEC = f(src0, EXEC)`; `sdst` gets the old EXEC (saveexec) or the new
/// one (wrexec); SCC = EXEC != 0.
macro_rules! saveexec {
    ($f:expr, $write_new:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            let f: fn(u64, u64) -> u64 = $f;
            let source = s64(c, i, 0);
            let old = c.wave.exec();
            let new = f(source, old);
            c.wave.set_exec(new);
            d64(c, i, if $write_new { new } else { old });
            c.wave.scc = new != 0;
            Ok(())
        }
    };
}

fn bfe32(value: u32, control: u32, signed: bool) -> u32 {
    let offset = control & 31;
    let width = (control >> 16) & 0x7f;
    if width == 0 {
        return 0;
    }
    let width = width.min(32);
    // The signed form shifts arithmetically: a field running past bit 31
    // is the value's sign (as V_BFE_I32 and LLVM's constant folding).
    let shifted = if signed { ((value as i32) >> offset) as u32 } else { value >> offset };
    if width >= 32 {
        return shifted;
    }
    let field = shifted & ((1u32 << width) - 1);
    if signed && field & (1 << (width - 1)) != 0 {
        field | !((1u32 << width) - 1)
    } else {
        field
    }
}

fn bfe64(value: u64, control: u32, signed: bool) -> u64 {
    let offset = control & 63;
    let width = (control >> 16) & 0x7f;
    if width == 0 {
        return 0;
    }
    let width = width.min(64);
    let shifted = if signed { ((value as i64) >> offset) as u64 } else { value >> offset };
    if width >= 64 {
        return shifted;
    }
    let field = shifted & ((1u64 << width) - 1);
    if signed && field & (1 << (width - 1)) != 0 {
        field | !((1u64 << width) - 1)
    } else {
        field
    }
}

fn wqm(value: u64) -> u64 {
    let mut out = 0;
    for quad in 0..16 {
        if value & (0xf << (quad * 4)) != 0 {
            out |= 0xf << (quad * 4);
        }
    }
    out
}

fn quadmask(value: u64) -> u64 {
    let mut out = 0;
    for quad in 0..16 {
        if value & (0xf << (quad * 4)) != 0 {
            out |= 1 << quad;
        }
    }
    out
}

fn flbit_signed(value: i64, bits: u32) -> u32 {
    // The first bit from the top that differs from the sign bit.
    let shifted = if value < 0 { !value } else { value };
    if shifted == 0 {
        return u32::MAX;
    }
    shifted.leading_zeros() - (64 - bits)
}

fn lshl_add(a: u32, b: u32, shift: u32) -> (u32, Option<bool>) {
    let wide = (u64::from(a) << shift) + u64::from(b);
    (wide as u32, Some(wide >> 32 != 0))
}

/// A hardware register field of s_getreg/s_setreg: (id, offset, size).
fn hwreg(simm16: i64) -> (u32, u32, u32) {
    let v = simm16 as u32;
    (v & 0x3f, (v >> 6) & 0x1f, ((v >> 11) & 0x1f) + 1)
}

/// HW_ID (gfx9): wave slot [3:0], SIMD [5:4], CU [11:8], shader array
/// [12], shader engine [15:13]. Workgroups run one after another here and
/// the waves of one interleave: each wave of a workgroup is on a SIMD and
/// slot of its own (waves 0-3 on SIMDs 0-3, then the next slot), all on one
/// CU, and the next workgroup on the next CU, as a GPU spreads them. Two
/// resident waves never share an id (code may index memory by it).
fn hw_id(id: &crate::wave::WaveId) -> u32 {
    let group = id.global - id.wave;
    let (slot, simd) = ((id.wave / 4) & 0xf, id.wave % 4);
    let (cu, sh, se) = (group % 16, (group / 16) % 2, (group / 32) % 8);
    slot | (simd << 4) | (cu << 8) | (sh << 12) | (se << 13)
}

/// XCC_ID (gfx940+): the XCC a workgroup runs on, workgroups dealt to the
/// XCCs in turn along X as the dispatcher does. (HW_ID stays unique only
/// within an XCC: waves on two XCCs may share it.)
fn xcc_id(id: &crate::wave::WaveId, xccs: u32) -> u32 {
    id.workgroup[0] % xccs
}

fn get_hwreg(c: &Context<'_>, id: u32) -> Result<u32, Fault> {
    let m = c.machine;
    Ok(match id {
        1 => c.wave.mode,
        4 => hw_id(&c.wave.id),
        20 if m.processor.xccs > 1 => xcc_id(&c.wave.id, m.processor.xccs),
        // GPR_ALLOC: VGPR and SGPR granules.
        5 => {
            let vgpr_blocks = m.vgprs.div_ceil(m.processor.vgpr_granule).saturating_sub(1);
            let sgpr_blocks = m.sgprs.div_ceil(16).saturating_sub(1);
            (vgpr_blocks << 8) | (sgpr_blocks << 24)
        }
        // LDS_ALLOC: size in 64-dword granules.
        6 => ((m.lds_size.div_ceil(256)) as u32) << 12,
        // SH_MEM_BASES: private base [15:0], shared base [31:16] (bits 63:48).
        15 => {
            ((crate::memory::PRIVATE_APERTURE >> 48) as u32) | (((crate::memory::SHARED_APERTURE >> 48) as u32) << 16)
        }
        _ => return Err(Fault::UnimplementedCase(format!("hardware register {id}"))),
    })
}

fn set_hwreg(c: &mut Context<'_>, simm16: i64, value: u32) -> Result<(), Fault> {
    let (id, offset, size) = hwreg(simm16);
    if id != 1 {
        return Err(Fault::UnimplementedCase(format!("writing hardware register {id}")));
    }
    let mask = if size >= 32 { u32::MAX } else { ((1u32 << size) - 1) << offset };
    c.wave.mode = (c.wave.mode & !mask) | ((value << offset) & mask);
    Ok(())
}

pub fn handler(name: &str) -> Option<Handler> {
    Some(match name {
        // SOP2, 32-bit.
        "S_ADD_U32" => sop2_32!(|a, b, _| {
            let (r, carry) = a.overflowing_add(b);
            (r, Some(carry))
        }),
        "S_SUB_U32" => sop2_32!(|a, b, _| {
            let (r, borrow) = a.overflowing_sub(b);
            (r, Some(borrow))
        }),
        "S_ADD_I32" => sop2_32!(|a, b, _| {
            let (r, overflow) = (a as i32).overflowing_add(b as i32);
            (r as u32, Some(overflow))
        }),
        "S_SUB_I32" => sop2_32!(|a, b, _| {
            let (r, overflow) = (a as i32).overflowing_sub(b as i32);
            (r as u32, Some(overflow))
        }),
        "S_ADDC_U32" => sop2_32!(|a, b, scc| {
            let wide = u64::from(a) + u64::from(b) + u64::from(scc);
            (wide as u32, Some(wide >> 32 != 0))
        }),
        "S_SUBB_U32" => sop2_32!(|a, b, scc| {
            let wide = u64::from(a).wrapping_sub(u64::from(b)).wrapping_sub(u64::from(scc));
            (wide as u32, Some(u64::from(b) + u64::from(scc) > u64::from(a)))
        }),
        "S_MIN_I32" => sop2_32!(|a, b, _| ((a as i32).min(b as i32) as u32, Some((a as i32) < (b as i32)))),
        "S_MIN_U32" => sop2_32!(|a, b, _| (a.min(b), Some(a < b))),
        "S_MAX_I32" => sop2_32!(|a, b, _| ((a as i32).max(b as i32) as u32, Some((a as i32) > (b as i32)))),
        "S_MAX_U32" => sop2_32!(|a, b, _| (a.max(b), Some(a > b))),
        "S_CSELECT_B32" => sop2_32!(|a, b, scc| (if scc { a } else { b }, None)),
        "S_AND_B32" => sop2_32!(|a, b, _| (a & b, Some(a & b != 0))),
        "S_OR_B32" => sop2_32!(|a, b, _| (a | b, Some(a | b != 0))),
        "S_XOR_B32" => sop2_32!(|a, b, _| (a ^ b, Some(a ^ b != 0))),
        "S_ANDN2_B32" => sop2_32!(|a, b, _| (a & !b, Some(a & !b != 0))),
        "S_ORN2_B32" => sop2_32!(|a, b, _| (a | !b, Some(a | !b != 0))),
        "S_NAND_B32" => sop2_32!(|a, b, _| (!(a & b), Some(!(a & b) != 0))),
        "S_NOR_B32" => sop2_32!(|a, b, _| (!(a | b), Some(!(a | b) != 0))),
        "S_XNOR_B32" => sop2_32!(|a, b, _| (!(a ^ b), Some(!(a ^ b) != 0))),
        "S_LSHL_B32" => sop2_32!(|a, b, _| (a << (b & 31), Some(a << (b & 31) != 0))),
        "S_LSHR_B32" => sop2_32!(|a, b, _| (a >> (b & 31), Some(a >> (b & 31) != 0))),
        "S_ASHR_I32" => sop2_32!(|a, b, _| {
            let r = ((a as i32) >> (b & 31)) as u32;
            (r, Some(r != 0))
        }),
        "S_BFM_B32" => sop2_32!(|a, b, _| (((1u64 << (a & 31)) as u32).wrapping_sub(1) << (b & 31), None)),
        "S_MUL_I32" => sop2_32!(|a, b, _| ((a as i32).wrapping_mul(b as i32) as u32, None)),
        "S_MUL_HI_U32" => sop2_32!(|a, b, _| (((u64::from(a) * u64::from(b)) >> 32) as u32, None)),
        "S_MUL_HI_I32" => sop2_32!(|a, b, _| (((i64::from(a as i32) * i64::from(b as i32)) >> 32) as u32, None)),
        "S_BFE_U32" => sop2_32!(|a, b, _| {
            let r = bfe32(a, b, false);
            (r, Some(r != 0))
        }),
        "S_BFE_I32" => sop2_32!(|a, b, _| {
            let r = bfe32(a, b, true);
            (r, Some(r != 0))
        }),
        "S_ABSDIFF_I32" => sop2_32!(|a, b, _| {
            let r = (a as i32).wrapping_sub(b as i32).unsigned_abs();
            (r, Some(r != 0))
        }),
        "S_LSHL1_ADD_U32" => sop2_32!(|a, b, _| lshl_add(a, b, 1)),
        "S_LSHL2_ADD_U32" => sop2_32!(|a, b, _| lshl_add(a, b, 2)),
        "S_LSHL3_ADD_U32" => sop2_32!(|a, b, _| lshl_add(a, b, 3)),
        "S_LSHL4_ADD_U32" => sop2_32!(|a, b, _| lshl_add(a, b, 4)),
        "S_PACK_LL_B32_B16" => sop2_32!(|a, b, _| ((a & 0xffff) | (b << 16), None)),
        "S_PACK_LH_B32_B16" => sop2_32!(|a, b, _| ((a & 0xffff) | (b & 0xffff_0000), None)),
        "S_PACK_HH_B32_B16" => sop2_32!(|a, b, _| ((a >> 16) | (b & 0xffff_0000), None)),
        // SOP2, 64-bit.
        "S_AND_B64" => sop2_64!(|a, b, _| (a & b, Some(a & b != 0))),
        "S_OR_B64" => sop2_64!(|a, b, _| (a | b, Some(a | b != 0))),
        "S_XOR_B64" => sop2_64!(|a, b, _| (a ^ b, Some(a ^ b != 0))),
        "S_ANDN2_B64" => sop2_64!(|a, b, _| (a & !b, Some(a & !b != 0))),
        "S_ORN2_B64" => sop2_64!(|a, b, _| (a | !b, Some(a | !b != 0))),
        "S_NAND_B64" => sop2_64!(|a, b, _| (!(a & b), Some(!(a & b) != 0))),
        "S_NOR_B64" => sop2_64!(|a, b, _| (!(a | b), Some(!(a | b) != 0))),
        "S_XNOR_B64" => sop2_64!(|a, b, _| (!(a ^ b), Some(!(a ^ b) != 0))),
        "S_CSELECT_B64" => sop2_64!(|a, b, scc| (if scc { a } else { b }, None)),
        "S_LSHL_B64" => sop2_64_32!(|a, b| a << (b & 63)),
        "S_LSHR_B64" => sop2_64_32!(|a, b| a >> (b & 63)),
        "S_ASHR_I64" => sop2_64_32!(|a, b| ((a as i64) >> (b & 63)) as u64),
        "S_BFE_U64" => sop2_64_32!(|a, b| bfe64(a, b, false)),
        "S_BFE_I64" => sop2_64_32!(|a, b| bfe64(a, b, true)),
        "S_BFM_B64" => |c, i| {
            let (a, b) = (s32(c, i, 0), s32(c, i, 1));
            d64(c, i, ((1u128 << (a & 63)) as u64).wrapping_sub(1) << (b & 63));
            Ok(())
        },
        // SOP1.
        "S_MOV_B32" | "S_MOV_FED_B32" => sop1_32!(|a, _| (a, None)),
        "S_MOV_B64" => sop1_64!(|a, _| (a, None)),
        "S_CMOV_B32" => |c, i| {
            if c.wave.scc {
                let v = s32(c, i, 0);
                d32(c, i, v);
            }
            Ok(())
        },
        "S_CMOV_B64" => |c, i| {
            if c.wave.scc {
                let v = s64(c, i, 0);
                d64(c, i, v);
            }
            Ok(())
        },
        "S_NOT_B32" => sop1_32!(|a, _| (!a, Some(!a != 0))),
        "S_NOT_B64" => sop1_64!(|a, _| (!a, Some(!a != 0))),
        "S_WQM_B32" => sop1_32!(|a, _| (wqm(u64::from(a)) as u32, Some(wqm(u64::from(a)) != 0))),
        "S_WQM_B64" => sop1_64!(|a, _| (wqm(a), Some(wqm(a) != 0))),
        "S_QUADMASK_B32" => sop1_32!(|a, _| (quadmask(u64::from(a)) as u32, Some(quadmask(u64::from(a)) != 0))),
        "S_QUADMASK_B64" => sop1_64!(|a, _| (quadmask(a), Some(quadmask(a) != 0))),
        "S_BREV_B32" => sop1_32!(|a, _| (a.reverse_bits(), None)),
        "S_BREV_B64" => sop1_64!(|a, _| (a.reverse_bits(), None)),
        "S_BCNT0_I32_B32" => sop1_32!(|a, _| (a.count_zeros(), Some(a.count_zeros() != 0))),
        "S_BCNT1_I32_B32" => sop1_32!(|a, _| (a.count_ones(), Some(a.count_ones() != 0))),
        "S_BCNT0_I32_B64" => sop1_64_to_32!(|a| a.count_zeros(), true),
        "S_BCNT1_I32_B64" => sop1_64_to_32!(|a| a.count_ones(), true),
        "S_FF0_I32_B32" => sop1_32!(|a, _| (if a == u32::MAX { u32::MAX } else { a.trailing_ones() }, None)),
        "S_FF1_I32_B32" => sop1_32!(|a, _| (if a == 0 { u32::MAX } else { a.trailing_zeros() }, None)),
        "S_FF0_I32_B64" => sop1_64_to_32!(|a| if a == u64::MAX { u32::MAX } else { a.trailing_ones() }, false),
        "S_FF1_I32_B64" => sop1_64_to_32!(|a| if a == 0 { u32::MAX } else { a.trailing_zeros() }, false),
        "S_FLBIT_I32_B32" => sop1_32!(|a, _| (if a == 0 { u32::MAX } else { a.leading_zeros() }, None)),
        "S_FLBIT_I32_B64" => sop1_64_to_32!(|a| if a == 0 { u32::MAX } else { a.leading_zeros() }, false),
        "S_FLBIT_I32" => sop1_32!(|a, _| (flbit_signed(i64::from(a as i32), 32), None)),
        "S_FLBIT_I32_I64" => sop1_64_to_32!(|a| flbit_signed(a as i64, 64), false),
        "S_SEXT_I32_I8" => sop1_32!(|a, _| (a as u8 as i8 as i32 as u32, None)),
        "S_SEXT_I32_I16" => sop1_32!(|a, _| (a as u16 as i16 as i32 as u32, None)),
        "S_ABS_I32" => sop1_32!(|a, _| ((a as i32).unsigned_abs(), Some(a != 0))),
        "S_BITSET0_B32" | "S_BITSET1_B32" => |c, i| {
            let bit = s32(c, i, 0) & 31;
            let old = c.wave.scalar32(&i.defs[0]);
            let set = i.name == "S_BITSET1_B32";
            d32(c, i, if set { old | (1 << bit) } else { old & !(1 << bit) });
            Ok(())
        },
        "S_BITSET0_B64" | "S_BITSET1_B64" => |c, i| {
            let bit = s32(c, i, 0) & 63;
            let old = c.wave.scalar64(&i.defs[0]);
            let set = i.name == "S_BITSET1_B64";
            d64(c, i, if set { old | (1 << bit) } else { old & !(1 << bit) });
            Ok(())
        },
        "S_MOVRELS_B32" => |c, i| {
            let Some(crate::operands::Operand::Scalar { index, .. }) = i.srcs.first().map(|s| s.operand) else {
                return Err(Fault::UnimplementedCase("s_movrels from a non-SGPR".into()));
            };
            let at = (u32::from(index) + c.wave.sgpr[M0 as usize]) as usize;
            let v = *c.wave.sgpr.get(at).ok_or(Fault::UnimplementedCase("s_movrels past s127".into()))?;
            d32(c, i, v);
            Ok(())
        },
        "S_MOVRELD_B32" => |c, i| {
            let Some(crate::operands::Operand::Scalar { index, .. }) = i.defs.first().copied() else {
                return Err(Fault::UnimplementedCase("s_movreld to a non-SGPR".into()));
            };
            let at = (u32::from(index) + c.wave.sgpr[M0 as usize]) as usize;
            let v = s32(c, i, 0);
            *c.wave.sgpr.get_mut(at).ok_or(Fault::UnimplementedCase("s_movreld past s127".into()))? = v;
            Ok(())
        },
        "S_AND_SAVEEXEC_B64" => saveexec!(|s, e| s & e, false),
        "S_OR_SAVEEXEC_B64" => saveexec!(|s, e| s | e, false),
        "S_XOR_SAVEEXEC_B64" => saveexec!(|s, e| s ^ e, false),
        "S_ANDN2_SAVEEXEC_B64" => saveexec!(|s, e| s & !e, false),
        "S_ORN2_SAVEEXEC_B64" => saveexec!(|s, e| s | !e, false),
        "S_NAND_SAVEEXEC_B64" => saveexec!(|s, e| !(s & e), false),
        "S_NOR_SAVEEXEC_B64" => saveexec!(|s, e| !(s | e), false),
        "S_XNOR_SAVEEXEC_B64" => saveexec!(|s, e| !(s ^ e), false),
        "S_ANDN1_SAVEEXEC_B64" => saveexec!(|s, e| !s & e, false),
        "S_ORN1_SAVEEXEC_B64" => saveexec!(|s, e| !s | e, false),
        "S_ANDN1_WREXEC_B64" => saveexec!(|s, e| !s & e, true),
        "S_ANDN2_WREXEC_B64" => saveexec!(|s, e| s & !e, true),
        // SOPC.
        "S_CMP_EQ_I32" | "S_CMP_EQ_U32" => sopc_32!(|a, b| a == b),
        "S_CMP_LG_I32" | "S_CMP_LG_U32" => sopc_32!(|a, b| a != b),
        "S_CMP_GT_I32" => sopc_32!(|a, b| (a as i32) > (b as i32)),
        "S_CMP_GE_I32" => sopc_32!(|a, b| (a as i32) >= (b as i32)),
        "S_CMP_LT_I32" => sopc_32!(|a, b| (a as i32) < (b as i32)),
        "S_CMP_LE_I32" => sopc_32!(|a, b| (a as i32) <= (b as i32)),
        "S_CMP_GT_U32" => sopc_32!(|a, b| a > b),
        "S_CMP_GE_U32" => sopc_32!(|a, b| a >= b),
        "S_CMP_LT_U32" => sopc_32!(|a, b| a < b),
        "S_CMP_LE_U32" => sopc_32!(|a, b| a <= b),
        "S_BITCMP0_B32" => sopc_32!(|a, b| a & (1 << (b & 31)) == 0),
        "S_BITCMP1_B32" => sopc_32!(|a, b| a & (1 << (b & 31)) != 0),
        "S_CMP_EQ_U64" => |c, i| {
            c.wave.scc = s64(c, i, 0) == s64(c, i, 1);
            Ok(())
        },
        "S_CMP_LG_U64" => |c, i| {
            c.wave.scc = s64(c, i, 0) != s64(c, i, 1);
            Ok(())
        },
        "S_BITCMP0_B64" => |c, i| {
            c.wave.scc = s64(c, i, 0) & (1 << (s32(c, i, 1) & 63)) == 0;
            Ok(())
        },
        "S_BITCMP1_B64" => |c, i| {
            c.wave.scc = s64(c, i, 0) & (1 << (s32(c, i, 1) & 63)) != 0;
            Ok(())
        },
        // SOPK.
        "S_MOVK_I32" => |c, i| {
            d32(c, i, i.imm(0) as u16 as i16 as i32 as u32);
            Ok(())
        },
        "S_CMOVK_I32" => |c, i| {
            if c.wave.scc {
                d32(c, i, i.imm(0) as u16 as i16 as i32 as u32);
            }
            Ok(())
        },
        "S_ADDK_I32" => |c, i| {
            let (r, overflow) = (s32(c, i, 0) as i32).overflowing_add(i32::from(i.imm(0) as u16 as i16));
            d32(c, i, r as u32);
            c.wave.scc = overflow;
            Ok(())
        },
        "S_MULK_I32" => |c, i| {
            let r = (s32(c, i, 0) as i32).wrapping_mul(i32::from(i.imm(0) as u16 as i16));
            d32(c, i, r as u32);
            Ok(())
        },
        "S_CMPK_EQ_I32" => sopk_cmp!(|a, k| a as i32 == i32::from(k as i16)),
        "S_CMPK_LG_I32" => sopk_cmp!(|a, k| a as i32 != i32::from(k as i16)),
        "S_CMPK_GT_I32" => sopk_cmp!(|a, k| a as i32 > i32::from(k as i16)),
        "S_CMPK_GE_I32" => sopk_cmp!(|a, k| a as i32 >= i32::from(k as i16)),
        "S_CMPK_LT_I32" => sopk_cmp!(|a, k| (a as i32) < i32::from(k as i16)),
        "S_CMPK_LE_I32" => sopk_cmp!(|a, k| a as i32 <= i32::from(k as i16)),
        "S_CMPK_EQ_U32" => sopk_cmp!(|a, k| a == u32::from(k)),
        "S_CMPK_LG_U32" => sopk_cmp!(|a, k| a != u32::from(k)),
        "S_CMPK_GT_U32" => sopk_cmp!(|a, k| a > u32::from(k)),
        "S_CMPK_GE_U32" => sopk_cmp!(|a, k| a >= u32::from(k)),
        "S_CMPK_LT_U32" => sopk_cmp!(|a, k| a < u32::from(k)),
        "S_CMPK_LE_U32" => sopk_cmp!(|a, k| a <= u32::from(k)),
        "S_GETREG_B32" => |c, i| {
            let (id, offset, size) = hwreg(i.imm(0));
            let value = get_hwreg(c, id)?;
            let field = if size >= 32 { value >> offset } else { (value >> offset) & ((1u32 << size) - 1) };
            d32(c, i, field);
            Ok(())
        },
        "S_SETREG_B32" => |c, i| {
            let value = s32(c, i, 0);
            set_hwreg(c, i.imm(0), value)
        },
        // MC operand order: the 32-bit literal, then the register field
        // (the assembly writes them the other way round).
        "S_SETREG_IMM32_B32" => |c, i| {
            let (value, hw) = (i.imm(0) as u32, i.imm(1));
            set_hwreg(c, hw, value)
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_field_extracts_follow_the_manual() {
        assert_eq!(bfe32(0xabcd_1234, 4 | (8 << 16), false), 0x23);
        assert_eq!(bfe32(0x0000_0f00, 8 | (4 << 16), true), u32::MAX);
        assert_eq!(bfe64(u64::MAX, 60 | (8 << 16), false), 0xf);
        assert_eq!(flbit_signed(-1, 32), u32::MAX);
        assert_eq!(flbit_signed(1, 32), 31);
        assert_eq!(flbit_signed(-2, 32), 31);
        assert_eq!(wqm(0x0000_0000_0000_0102), 0x0000_0000_0000_0f0f);
    }
}
