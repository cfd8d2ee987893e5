//! Vector ALU, integer and bitwise: VOP1/VOP2/VOP3 forms share one
//! implementation (the encoding only changes where carries go), plus moves,
//! AGPR access and the cross-lane reads and writes.

use super::{base_name, Context, Handler};
use crate::error::Fault;
use crate::operands::modifiers::{DST_OP_SEL, OP_SEL_0, OP_SEL_1};
use crate::operands::{Operand, M0};
use crate::program::Inst;
use crate::wave::{active_lanes, LANES};

/// A VOP3 form with its clamp bit set.
fn clamped(i: &Inst) -> bool {
    i.name.ends_with("_e64") && i.imms.first().copied().unwrap_or(0) != 0
}

/// VOP3 forms carry a clamp bit; integer clamp (saturation) is modelled
/// only where an operation names its saturating form.
pub(super) fn no_integer_clamp(i: &Inst) -> Result<(), Fault> {
    if clamped(i) {
        return Err(super::unsupported_modifier("integer clamp"));
    }
    Ok(())
}

/// The operation, or with clamp its saturating form (an error if it has none).
fn saturating_if_clamped<T>(i: &Inst, wrapping: T, saturating: Option<T>) -> Result<T, Fault> {
    match saturating {
        Some(saturating) if clamped(i) => Ok(saturating),
        _ => no_integer_clamp(i).map(|()| wrapping),
    }
}

/// `vdst = f(src0, src1, src2)` per active lane, 32-bit; with clamp, the
/// `saturating` form where one is given.
macro_rules! vop_u32 {
    ($f:expr) => {
        vop_u32!($f, None)
    };
    ($f:expr, saturating $g:expr) => {
        vop_u32!($f, Some($g))
    };
    ($f:expr, $g:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            let (wrapping, saturating): (fn(u32, u32, u32) -> u32, Option<fn(u32, u32, u32) -> u32>) = ($f, $g);
            let f = saturating_if_clamped(i, wrapping, saturating)?;
            let n = i.srcs.len().min(3);
            for lane in active_lanes(c.wave.exec()) {
                let mut a = [0u32; 3];
                for (k, slot) in a.iter_mut().enumerate().take(n) {
                    *slot = c.wave.lane32(&i.srcs[k].operand, lane);
                }
                let r = f(a[0], a[1], a[2]);
                c.wave.write_lane32(&i.defs[0], lane, r);
            }
            Ok(())
        }
    };
}

/// `vdst.16 = f(src0, src1, src2)` on 16-bit integers: each source's low
/// half (the high half where a VOP3 op_sel picks it); the result in the
/// low half with the high half zeroed (GFX9), or, with the VOP3
/// destination op_sel, in the high half with the low half kept.
macro_rules! vop_u16 {
    ($f:expr) => {
        vop_u16!($f, None)
    };
    ($f:expr, saturating $g:expr) => {
        vop_u16!($f, Some($g))
    };
    ($f:expr, $g:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            let (wrapping, saturating): (fn(u16, u16, u16) -> u16, Option<fn(u16, u16, u16) -> u16>) = ($f, $g);
            let f = saturating_if_clamped(i, wrapping, saturating)?;
            let vop3 = i.name.ends_with("_e64") || !i.name.contains("_e32");
            let high = vop3 && i.srcs.first().is_some_and(|s| s.mods & DST_OP_SEL != 0);
            let n = i.srcs.len().min(3);
            for lane in active_lanes(c.wave.exec()) {
                let mut a = [0u16; 3];
                for (k, slot) in a.iter_mut().enumerate().take(n) {
                    let s = &i.srcs[k];
                    let word = c.wave.lane32(&s.operand, lane);
                    *slot = if vop3 && s.mods & OP_SEL_0 != 0 { (word >> 16) as u16 } else { word as u16 };
                }
                let r = u32::from(f(a[0], a[1], a[2]));
                let value = if high { (c.wave.lane32(&i.defs[0], lane) & 0xffff) | (r << 16) } else { r };
                c.wave.write_lane32(&i.defs[0], lane, value);
            }
            Ok(())
        }
    };
}

/// Packed 16-bit integers (VOP3P): each half of the result from the halves
/// of the sources that op_sel (low result) and op_sel_hi (high result)
/// pick. `f` gets the operands widened (sign-extended when `signed`) and
/// returns the exact result; it wraps to 16 bits, or with clamp saturates
/// where the operation has a saturating form (an error elsewhere).
macro_rules! vop3p_16 {
    ($signed:expr, $saturates:expr, $f:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            let f: fn(i64, i64, i64) -> i64 = $f;
            let (signed, saturates): (bool, bool) = ($signed, $saturates);
            let clamp = i.imms.first().copied().unwrap_or(0) != 0;
            if clamp && !saturates {
                return Err(super::unsupported_modifier("integer clamp"));
            }
            let n = i.srcs.len().min(3);
            for lane in active_lanes(c.wave.exec()) {
                let mut out = 0u32;
                for half in 0..2 {
                    let select = if half == 0 { OP_SEL_0 } else { OP_SEL_1 };
                    let mut a = [0i64; 3];
                    for (k, slot) in a.iter_mut().enumerate().take(n) {
                        let s = &i.srcs[k];
                        let word = c.wave.lane32(&s.operand, lane);
                        let bits = if s.mods & select != 0 { (word >> 16) as u16 } else { word as u16 };
                        *slot = if signed { i64::from(bits as i16) } else { i64::from(bits) };
                    }
                    let exact = f(a[0], a[1], a[2]);
                    let r = match (clamp, signed) {
                        (true, true) => exact.clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as u16,
                        (true, false) => exact.clamp(0, i64::from(u16::MAX)) as u16,
                        (false, _) => exact as u16,
                    };
                    out |= u32::from(r) << (16 * half);
                }
                c.wave.write_lane32(&i.defs[0], lane, out);
            }
            Ok(())
        }
    };
}

/// 64-bit value shifted by a 32-bit amount (`v_lshlrev_b64 vdst, amount, value`).
macro_rules! vop_shift64 {
    ($f:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            let f: fn(u32, u64) -> u64 = $f;
            for lane in active_lanes(c.wave.exec()) {
                let amount = c.wave.lane32(&i.srcs[0].operand, lane);
                let value = c.wave.lane64(&i.srcs[1].operand, lane);
                c.wave.write_lane64(&i.defs[0], lane, f(amount, value));
            }
            Ok(())
        }
    };
}

/// The carry-out mask goes to VCC (e32) or the scalar destination (e64).
fn write_carry(c: &mut Context<'_>, i: &Inst, mask: u64) {
    let exec = c.wave.exec();
    let mask = mask & exec;
    match i.defs.get(1) {
        Some(sdst) => c.wave.write_scalar64(sdst, mask),
        None => c.wave.set_vcc(mask),
    }
}

/// The carry-in mask: VCC (e32) or the third source (e64).
fn read_carry(c: &Context<'_>, i: &Inst) -> u64 {
    match i.srcs.get(2) {
        Some(source) => c.wave.scalar64(&source.operand),
        None => c.wave.vcc(),
    }
}

/// Add/subtract with carry out (and optionally in): `f(a, b, carry_in)`
/// returns the 64-bit wide result whose bit 32 is the carry/borrow.
macro_rules! vop_carry {
    ($carry_in:expr, $f:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            no_integer_clamp(i)?;
            let f: fn(u64, u64, u64) -> u64 = $f;
            let carry_in = if $carry_in { read_carry(c, i) } else { 0 };
            let mut carry_out = 0u64;
            for lane in active_lanes(c.wave.exec()) {
                let a = u64::from(c.wave.lane32(&i.srcs[0].operand, lane));
                let b = u64::from(c.wave.lane32(&i.srcs[1].operand, lane));
                let wide = f(a, b, (carry_in >> lane) & 1);
                c.wave.write_lane32(&i.defs[0], lane, wide as u32);
                carry_out |= ((wide >> 32) & 1) << lane;
            }
            write_carry(c, i, carry_out);
            Ok(())
        }
    };
}

fn bfe(value: u32, offset: u32, width: u32, signed: bool) -> u32 {
    let (offset, width) = (offset & 31, width & 31);
    if width == 0 {
        return 0;
    }
    if offset + width < 32 {
        let field = (value << (32 - offset - width)) as i32;
        let shift = 32 - width;
        if signed {
            (field >> shift) as u32
        } else {
            (field as u32) >> shift
        }
    } else if signed {
        ((value as i32) >> offset) as u32
    } else {
        value >> offset
    }
}

fn perm(a: u32, b: u32, selector: u32) -> u32 {
    // Bytes 0-3 of b then 4-7 of a; 8-11 sign bits, 12 zero, 13+ 0xff.
    let bytes = (u64::from(a) << 32) | u64::from(b);
    let mut out = 0u32;
    for k in 0..4 {
        let s = (selector >> (8 * k)) & 0xff;
        let byte = match s {
            0..=7 => (bytes >> (8 * s)) as u8 as u32,
            8 => {
                if b & 0x8000 != 0 {
                    0xff
                } else {
                    0
                }
            }
            9 => {
                if b & 0x8000_0000 != 0 {
                    0xff
                } else {
                    0
                }
            }
            10 => {
                if a & 0x8000 != 0 {
                    0xff
                } else {
                    0
                }
            }
            11 => {
                if a & 0x8000_0000 != 0 {
                    0xff
                } else {
                    0
                }
            }
            12 => 0,
            _ => 0xff,
        };
        out |= byte << (8 * k);
    }
    out
}

fn sext24(v: u32) -> i64 {
    i64::from(((v << 8) as i32) >> 8)
}

/// gfx950's `v_permlane16_swap_b32` (`rows` 16: the odd rows of vdst
/// trade places with the even rows of src0) and `v_permlane32_swap_b32`
/// (32: vdst's upper half with src0's lower half); both registers are
/// written. With some lanes inactive, or fetch-inactive / bound control set,
/// what moves is not modelled: the run stops.
fn permlane_swap(c: &mut Context<'_>, i: &Inst, rows: usize) -> Result<(), Fault> {
    let ([vdst, src0_out], [_, src0]) = (i.defs.as_slice(), i.srcs.as_slice()) else {
        return Err(Fault::UnimplementedCase(format!("{} with other operands", i.name)));
    };
    if c.wave.exec() != u64::MAX || i.imms.iter().any(|v| *v != 0) {
        return Err(Fault::UnimplementedCase(format!("{} with inactive lanes or fi/bound_ctrl", i.name)));
    }
    let old_dst: Vec<u32> = (0..LANES).map(|lane| c.wave.lane32(vdst, lane)).collect();
    let old_src: Vec<u32> = (0..LANES).map(|lane| c.wave.lane32(&src0.operand, lane)).collect();
    let (mut new_dst, mut new_src) = (old_dst.clone(), old_src.clone());
    for lane in 0..LANES {
        // The vdst lanes that trade: odd rows of 16, or the upper 32.
        let trades = if rows == 16 { (lane / 16) % 2 == 1 } else { lane >= 32 };
        if trades {
            let partner = lane - rows;
            new_dst[lane] = old_src[partner];
            new_src[partner] = old_dst[lane];
        }
    }
    for lane in 0..LANES {
        c.wave.write_lane32(vdst, lane, new_dst[lane]);
        c.wave.write_lane32(src0_out, lane, new_src[lane]);
    }
    Ok(())
}

pub fn handler(name: &str) -> Option<Handler> {
    if name.ends_with("_sdwa") || name.ends_with("_dpp") {
        return None;
    }
    Some(match base_name(name) {
        "V_NOP" => |_, _| Ok(()),
        "V_PERMLANE16_SWAP_B32" => |c, i| permlane_swap(c, i, 16),
        "V_PERMLANE32_SWAP_B32" => |c, i| permlane_swap(c, i, 32),
        "V_MOV_B32" | "V_ACCVGPR_WRITE_B32" | "V_ACCVGPR_READ_B32" | "V_ACCVGPR_MOV_B32" => vop_u32!(|a, _, _| a),
        "V_ADD_U32" => vop_u32!(|a, b, _| a.wrapping_add(b), saturating | a, b, _ | a.saturating_add(b)),
        "V_SUB_U32" => vop_u32!(|a, b, _| a.wrapping_sub(b), saturating | a, b, _ | a.saturating_sub(b)),
        "V_SUBREV_U32" => vop_u32!(|a, b, _| b.wrapping_sub(a), saturating | a, b, _ | b.saturating_sub(a)),
        "V_ADD_I32" => {
            vop_u32!(|a, b, _| a.wrapping_add(b), saturating | a, b, _ | (a as i32).saturating_add(b as i32) as u32)
        }
        "V_SUB_I32" => {
            vop_u32!(|a, b, _| a.wrapping_sub(b), saturating | a, b, _ | (a as i32).saturating_sub(b as i32) as u32)
        }
        "V_AND_B32" => vop_u32!(|a, b, _| a & b),
        "V_OR_B32" => vop_u32!(|a, b, _| a | b),
        "V_XOR_B32" => vop_u32!(|a, b, _| a ^ b),
        "V_XNOR_B32" => vop_u32!(|a, b, _| !(a ^ b)),
        "V_NOT_B32" => vop_u32!(|a, _, _| !a),
        "V_BFREV_B32" => vop_u32!(|a, _, _| a.reverse_bits()),
        // gfx950: one step of a Galois LFSR (x^32 + x^7 + x^6 + x^2 + 1;
        // the CDNA4 guide's VOP1 opcode 88).
        "V_PRNG_B32" => vop_u32!(|a, _, _| (a << 1) ^ if a >> 31 == 1 { 0xc5 } else { 0 }),
        "V_FFBH_U32" => vop_u32!(|a, _, _| if a == 0 { u32::MAX } else { a.leading_zeros() }),
        "V_FFBL_B32" => vop_u32!(|a, _, _| if a == 0 { u32::MAX } else { a.trailing_zeros() }),
        "V_FFBH_I32" => vop_u32!(|a, _, _| {
            let x = if (a as i32) < 0 { !a } else { a };
            if x == 0 {
                u32::MAX
            } else {
                x.leading_zeros() - 1
            }
        }),
        "V_LSHLREV_B32" => vop_u32!(|a, b, _| b << (a & 31)),
        "V_LSHRREV_B32" => vop_u32!(|a, b, _| b >> (a & 31)),
        "V_ASHRREV_I32" => vop_u32!(|a, b, _| ((b as i32) >> (a & 31)) as u32),
        "V_LSHLREV_B64" => vop_shift64!(|a, b| b << (a & 63)),
        // gfx940+: 64-bit moves and shifted 64-bit adds (pointer arithmetic).
        "V_MOV_B64" => |c: &mut Context<'_>, i: &Inst| {
            for lane in active_lanes(c.wave.exec()) {
                let value = c.wave.lane64(&i.srcs[0].operand, lane);
                c.wave.write_lane64(&i.defs[0], lane, value);
            }
            Ok(())
        },
        "V_LSHL_ADD_U64" => |c: &mut Context<'_>, i: &Inst| {
            for lane in active_lanes(c.wave.exec()) {
                let value = c.wave.lane64(&i.srcs[0].operand, lane);
                let shift = c.wave.lane32(&i.srcs[1].operand, lane) & 7;
                let addend = c.wave.lane64(&i.srcs[2].operand, lane);
                c.wave.write_lane64(&i.defs[0], lane, (value << shift).wrapping_add(addend));
            }
            Ok(())
        },
        "V_LSHRREV_B64" => vop_shift64!(|a, b| b >> (a & 63)),
        "V_ASHRREV_I64" => vop_shift64!(|a, b| ((b as i64) >> (a & 63)) as u64),
        "V_MUL_LO_U32" | "V_MUL_LO_I32" => vop_u32!(|a, b, _| a.wrapping_mul(b)),
        "V_ADD_U16" => vop_u16!(|a, b, _| a.wrapping_add(b), saturating | a, b, _ | a.saturating_add(b)),
        "V_SUB_U16" => vop_u16!(|a, b, _| a.wrapping_sub(b), saturating | a, b, _ | a.saturating_sub(b)),
        "V_SUBREV_U16" => vop_u16!(|a, b, _| b.wrapping_sub(a), saturating | a, b, _ | b.saturating_sub(a)),
        "V_MUL_LO_U16" => vop_u16!(|a, b, _| a.wrapping_mul(b)),
        "V_LSHLREV_B16" => vop_u16!(|a, b, _| b << (a & 15)),
        "V_LSHRREV_B16" => vop_u16!(|a, b, _| b >> (a & 15)),
        "V_ASHRREV_I16" => vop_u16!(|a, b, _| ((b as i16) >> (a & 15)) as u16),
        "V_MIN_U16" => vop_u16!(|a, b, _| a.min(b)),
        "V_MAX_U16" => vop_u16!(|a, b, _| a.max(b)),
        "V_MIN_I16" => vop_u16!(|a, b, _| (a as i16).min(b as i16) as u16),
        "V_MAX_I16" => vop_u16!(|a, b, _| (a as i16).max(b as i16) as u16),
        "V_MIN3_U16" => vop_u16!(|a, b, c| a.min(b).min(c)),
        "V_MAX3_U16" => vop_u16!(|a, b, c| a.max(b).max(c)),
        "V_MED3_U16" => vop_u16!(|a, b, c| a.max(b).min(a.min(b).max(c))),
        "V_MIN3_I16" => vop_u16!(|a, b, c| (a as i16).min(b as i16).min(c as i16) as u16),
        "V_MAX3_I16" => vop_u16!(|a, b, c| (a as i16).max(b as i16).max(c as i16) as u16),
        "V_MED3_I16" => vop_u16!(|a, b, c| {
            let (a, b, c) = (a as i16, b as i16, c as i16);
            a.max(b).min(a.min(b).max(c)) as u16
        }),
        "V_MAD_U16" | "V_MAD_LEGACY_U16" => vop_u16!(|a, b, c| a.wrapping_mul(b).wrapping_add(c)),
        "V_MAD_I16" | "V_MAD_LEGACY_I16" => {
            vop_u16!(|a, b, c| (a as i16).wrapping_mul(b as i16).wrapping_add(c as i16) as u16)
        }
        "V_ADD_I16" => {
            vop_u16!(|a, b, _| a.wrapping_add(b), saturating | a, b, _ | (a as i16).saturating_add(b as i16) as u16)
        }
        "V_SUB_I16" => {
            vop_u16!(|a, b, _| a.wrapping_sub(b), saturating | a, b, _ | (a as i16).saturating_sub(b as i16) as u16)
        }
        "V_MUL_HI_U32" => vop_u32!(|a, b, _| ((u64::from(a) * u64::from(b)) >> 32) as u32),
        "V_MUL_HI_I32" => vop_u32!(|a, b, _| ((i64::from(a as i32) * i64::from(b as i32)) >> 32) as u32),
        "V_MUL_U32_U24" => vop_u32!(|a, b, _| (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff)),
        "V_MUL_I32_I24" => vop_u32!(|a, b, _| (sext24(a) * sext24(b)) as u32),
        "V_MUL_HI_U32_U24" => vop_u32!(|a, b, _| ((u64::from(a & 0xff_ffff) * u64::from(b & 0xff_ffff)) >> 32) as u32),
        "V_MUL_HI_I32_I24" => vop_u32!(|a, b, _| ((sext24(a) * sext24(b)) >> 32) as u32),
        "V_MAD_U32_U24" => vop_u32!(|a, b, c| (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff).wrapping_add(c)),
        "V_MAD_I32_I24" => vop_u32!(|a, b, c| ((sext24(a) * sext24(b)) as u32).wrapping_add(c)),
        "V_MIN_I32" => vop_u32!(|a, b, _| (a as i32).min(b as i32) as u32),
        "V_MAX_I32" => vop_u32!(|a, b, _| (a as i32).max(b as i32) as u32),
        "V_MIN_U32" => vop_u32!(|a, b, _| a.min(b)),
        "V_MAX_U32" => vop_u32!(|a, b, _| a.max(b)),
        "V_MIN3_I32" => vop_u32!(|a, b, c| (a as i32).min(b as i32).min(c as i32) as u32),
        "V_MAX3_I32" => vop_u32!(|a, b, c| (a as i32).max(b as i32).max(c as i32) as u32),
        "V_MIN3_U32" => vop_u32!(|a, b, c| a.min(b).min(c)),
        "V_MAX3_U32" => vop_u32!(|a, b, c| a.max(b).max(c)),
        "V_MED3_I32" => vop_u32!(|a, b, c| {
            let (a, b, c) = (a as i32, b as i32, c as i32);
            a.max(b).min(a.min(b).max(c)) as u32
        }),
        "V_MED3_U32" => vop_u32!(|a, b, c| a.max(b).min(a.min(b).max(c))),
        "V_BFE_U32" => vop_u32!(|a, b, c| bfe(a, b, c, false)),
        "V_BFE_I32" => vop_u32!(|a, b, c| bfe(a, b, c, true)),
        "V_BFI_B32" => vop_u32!(|a, b, c| (a & b) | (!a & c)),
        "V_BFM_B32" => vop_u32!(|a, b, _| (((1u64 << (a & 31)) - 1) as u32) << (b & 31)),
        "V_ALIGNBIT_B32" => ALIGNBIT,
        "V_ALIGNBYTE_B32" => ALIGNBYTE,
        // LLVM 20+ names GFX9's forms `_opsel` (gfx950 gives them op_sel).
        // gfx950: any function of three bits, its truth table the immediate.
        "V_BITOP3_B32" => |c, i| {
            let table = i.imm(0) as u8;
            for lane in active_lanes(c.wave.exec()) {
                let [a, b, s2] = [0, 1, 2].map(|k| c.wave.lane32(&i.srcs[k].operand, lane));
                c.wave.write_lane32(&i.defs[0], lane, bitop3(a, b, s2, table));
            }
            Ok(())
        },
        "V_BITOP3_B16" => |c, i| {
            let table = i.imm(0) as u8;
            let high = i.srcs.first().is_some_and(|s| s.mods & DST_OP_SEL != 0);
            for lane in active_lanes(c.wave.exec()) {
                let [a, b, s2] = [0, 1, 2].map(|k| {
                    let s = &i.srcs[k];
                    let word = c.wave.lane32(&s.operand, lane);
                    if s.mods & OP_SEL_0 != 0 {
                        word >> 16
                    } else {
                        word & 0xffff
                    }
                });
                let r = bitop3(a, b, s2, table) & 0xffff;
                let value = if high { (c.wave.lane32(&i.defs[0], lane) & 0xffff) | (r << 16) } else { r };
                c.wave.write_lane32(&i.defs[0], lane, value);
            }
            Ok(())
        },
        "V_ALIGNBIT_B32_opsel" => |c, i| no_op_sel(i).and_then(|()| ALIGNBIT(c, i)),
        "V_ALIGNBYTE_B32_opsel" => |c, i| no_op_sel(i).and_then(|()| ALIGNBYTE(c, i)),
        "V_LSHL_ADD_U32" => vop_u32!(|a, b, c| (a << (b & 31)).wrapping_add(c)),
        "V_ADD_LSHL_U32" => vop_u32!(|a, b, c| a.wrapping_add(b) << (c & 31)),
        "V_ADD3_U32" => vop_u32!(|a, b, c| a.wrapping_add(b).wrapping_add(c)),
        "V_LSHL_OR_B32" => vop_u32!(|a, b, c| (a << (b & 31)) | c),
        "V_AND_OR_B32" => vop_u32!(|a, b, c| (a & b) | c),
        "V_OR3_B32" => vop_u32!(|a, b, c| a | b | c),
        "V_XAD_U32" => vop_u32!(|a, b, c| (a ^ b).wrapping_add(c)),
        "V_PERM_B32" => vop_u32!(perm),
        "V_BCNT_U32_B32" => vop_u32!(|a, b, _| a.count_ones().wrapping_add(b)),
        "V_ADD_CO_U32" => vop_carry!(false, |a, b, _| a + b),
        "V_SUB_CO_U32" => vop_carry!(false, |a, b, _| a.wrapping_sub(b) & 0x1_ffff_ffff),
        "V_SUBREV_CO_U32" => vop_carry!(false, |a, b, _| b.wrapping_sub(a) & 0x1_ffff_ffff),
        "V_ADDC_U32" | "V_ADDC_CO_U32" => vop_carry!(true, |a, b, c| a + b + c),
        "V_SUBB_U32" | "V_SUBB_CO_U32" => vop_carry!(true, |a, b, c| a.wrapping_sub(b).wrapping_sub(c) & 0x1_ffff_ffff),
        "V_SUBBREV_U32" | "V_SUBBREV_CO_U32" => {
            vop_carry!(true, |a, b, c| b.wrapping_sub(a).wrapping_sub(c) & 0x1_ffff_ffff)
        }
        "V_CNDMASK_B32" => |c, i| {
            let mask = read_carry(c, i);
            for lane in active_lanes(c.wave.exec()) {
                let pick = if mask >> lane & 1 != 0 { 1 } else { 0 };
                let mut value = c.wave.lane32(&i.srcs[pick].operand, lane);
                // VOP3 float modifiers apply to the chosen source.
                let mods = i.srcs[pick].mods;
                if mods & 2 != 0 {
                    value &= 0x7fff_ffff;
                }
                if mods & 1 != 0 {
                    value ^= 0x8000_0000;
                }
                c.wave.write_lane32(&i.defs[0], lane, value);
            }
            Ok(())
        },
        "V_MAD_U64_U32" | "V_MAD_I64_I32" => |c, i| {
            no_integer_clamp_mad(i)?;
            let signed = i.name.starts_with("V_MAD_I64");
            let mut carry = 0u64;
            for lane in active_lanes(c.wave.exec()) {
                let a = c.wave.lane32(&i.srcs[0].operand, lane);
                let b = c.wave.lane32(&i.srcs[1].operand, lane);
                let addend = c.wave.lane64(&i.srcs[2].operand, lane);
                let (r, overflow) = if signed {
                    let product = i128::from(a as i32) * i128::from(b as i32);
                    let sum = product + i128::from(addend as i64);
                    (sum as u64, sum != i128::from(sum as i64))
                } else {
                    let sum = u128::from(a) * u128::from(b) + u128::from(addend);
                    (sum as u64, sum >> 64 != 0)
                };
                c.wave.write_lane64(&i.defs[0], lane, r);
                carry |= u64::from(overflow) << lane;
            }
            write_carry(c, i, carry);
            Ok(())
        },
        "V_MBCNT_LO_U32_B32" => |c, i| {
            for lane in active_lanes(c.wave.exec()) {
                let mask = c.wave.lane32(&i.srcs[0].operand, lane);
                let below = if lane >= 32 { u32::MAX } else { (1u32 << lane) - 1 };
                let add = c.wave.lane32(&i.srcs[1].operand, lane);
                c.wave.write_lane32(&i.defs[0], lane, (mask & below).count_ones().wrapping_add(add));
            }
            Ok(())
        },
        "V_MBCNT_HI_U32_B32" => |c, i| {
            for lane in active_lanes(c.wave.exec()) {
                let mask = c.wave.lane32(&i.srcs[0].operand, lane);
                let below = if lane < 32 { 0 } else { (1u64 << (lane - 32)) as u32 - 1 };
                let add = c.wave.lane32(&i.srcs[1].operand, lane);
                c.wave.write_lane32(&i.defs[0], lane, (mask & below).count_ones().wrapping_add(add));
            }
            Ok(())
        },
        "V_READLANE_B32" => |c, i| {
            let lane = (c.wave.scalar32(&i.srcs[1].operand) & 63) as usize;
            let value = c.wave.lane32(&i.srcs[0].operand, lane);
            c.wave.write_scalar32(&i.defs[0], value);
            Ok(())
        },
        "V_READFIRSTLANE_B32" => |c, i| {
            let exec = c.wave.exec();
            let lane = if exec == 0 { 0 } else { exec.trailing_zeros() as usize };
            let value = c.wave.lane32(&i.srcs[0].operand, lane);
            c.wave.write_scalar32(&i.defs[0], value);
            Ok(())
        },
        "V_WRITELANE_B32" => |c, i| {
            let value = c.wave.scalar32(&i.srcs[0].operand);
            let lane = (c.wave.scalar32(&i.srcs[1].operand) & 63) as usize;
            c.wave.write_lane32(&i.defs[0], lane, value);
            Ok(())
        },
        // Shift amounts are the low four bits of the first source.
        "V_PK_LSHLREV_B16" => vop3p_16!(false, false, |a, b, _| b << (a & 15)),
        "V_PK_LSHRREV_B16" => vop3p_16!(false, false, |a, b, _| b >> (a & 15)),
        "V_PK_ASHRREV_I16" => vop3p_16!(true, false, |a, b, _| b >> (a & 15)),
        "V_PK_ADD_U16" => vop3p_16!(false, true, |a, b, _| a + b),
        "V_PK_ADD_I16" => vop3p_16!(true, true, |a, b, _| a + b),
        "V_PK_SUB_U16" => vop3p_16!(false, true, |a, b, _| a - b),
        "V_PK_SUB_I16" => vop3p_16!(true, true, |a, b, _| a - b),
        "V_PK_MUL_LO_U16" => vop3p_16!(false, false, |a, b, _| a * b),
        "V_PK_MAD_U16" => vop3p_16!(false, true, |a, b, c| a * b + c),
        "V_PK_MAD_I16" => vop3p_16!(true, true, |a, b, c| a * b + c),
        "V_PK_MAX_U16" => vop3p_16!(false, false, |a, b, _| a.max(b)),
        "V_PK_MAX_I16" => vop3p_16!(true, false, |a, b, _| a.max(b)),
        "V_PK_MIN_U16" => vop3p_16!(false, false, |a, b, _| a.min(b)),
        "V_PK_MIN_I16" => vop3p_16!(true, false, |a, b, _| a.min(b)),
        "V_PK_MOV_B32" => |c, i| {
            let low_from_high = i.srcs[0].mods & OP_SEL_0 != 0;
            let high_from_high = i.srcs[1].mods & OP_SEL_0 != 0;
            for lane in active_lanes(c.wave.exec()) {
                let low = c.wave.lane32_at(&i.srcs[0].operand, lane, usize::from(low_from_high));
                let high = c.wave.lane32_at(&i.srcs[1].operand, lane, usize::from(high_from_high));
                c.wave.write_lane32_at(&i.defs[0], lane, 0, low);
                c.wave.write_lane32_at(&i.defs[0], lane, 1, high);
            }
            Ok(())
        },
        "V_SWAP_B32" => |c, i| {
            for lane in active_lanes(c.wave.exec()) {
                let a = c.wave.lane32(&i.srcs[0].operand, lane);
                let b = c.wave.lane32(&i.srcs[1].operand, lane);
                c.wave.write_lane32(&i.defs[0], lane, a);
                c.wave.write_lane32(&i.defs[1], lane, b);
            }
            Ok(())
        },
        "V_MOVRELS_B32" | "V_MOVRELD_B32" | "V_MOVRELSD_B32" => |c, i| {
            let offset = c.wave.sgpr[M0 as usize] as u16;
            let shift = |op: &Operand| match *op {
                Operand::Vector { index, dwords } => Operand::Vector { index: (index + offset) % 256, dwords },
                other => other,
            };
            let (source, dest) = match i.name.as_str() {
                n if n.starts_with("V_MOVRELSD") => (shift(&i.srcs[0].operand), shift(&i.defs[0])),
                n if n.starts_with("V_MOVRELS") => (shift(&i.srcs[0].operand), i.defs[0]),
                _ => (i.srcs[0].operand, shift(&i.defs[0])),
            };
            for lane in active_lanes(c.wave.exec()) {
                let value = c.wave.lane32(&source, lane);
                c.wave.write_lane32(&dest, lane, value);
            }
            Ok(())
        },
        _ => return None,
    })
}

/// The low 32 bits of the 64-bit `src0:src1` shifted right by src2 bits (or bytes).
const ALIGNBIT: Handler = vop_u32!(|a, b, c| (((u64::from(a) << 32) | u64::from(b)) >> (c & 31)) as u32);
const ALIGNBYTE: Handler = vop_u32!(|a, b, c| (((u64::from(a) << 32) | u64::from(b)) >> (8 * (c & 3))) as u32);

/// op_sel on a 32-bit operation (gfx950's byte selects) is not modelled.
/// Each result bit is bit `(a << 2) | (b << 1) | c` of `table` (v_bitop3).
fn bitop3(a: u32, b: u32, c: u32, table: u8) -> u32 {
    (0..8).filter(|index| table >> index & 1 != 0).fold(0, |result, index| {
        let pick = |value: u32, bit: u32| if index & bit != 0 { value } else { !value };
        result | (pick(a, 4) & pick(b, 2) & pick(c, 1))
    })
}

fn no_op_sel(i: &Inst) -> Result<(), Fault> {
    if i.srcs.iter().any(|s| s.mods & (OP_SEL_0 | OP_SEL_1 | DST_OP_SEL) != 0) {
        return Err(super::unsupported_modifier("op_sel"));
    }
    Ok(())
}

fn no_integer_clamp_mad(i: &Inst) -> Result<(), Fault> {
    if i.imms.first().copied().unwrap_or(0) != 0 {
        return Err(super::unsupported_modifier("integer clamp"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_fields_and_permutes() {
        assert_eq!(bfe(0xf0, 4, 4, false), 0xf);
        assert_eq!(bfe(0xf0, 4, 4, true), u32::MAX);
        assert_eq!(bfe(0x8000_0000, 31, 1, true), u32::MAX);
        assert_eq!(perm(0x0403_0201, 0x0807_0605, 0x0706_0504), 0x0403_0201);
        assert_eq!(perm(0, 0x8000, 0x0c0d_0808), 0x00ff_ffff);
    }

    #[test]
    fn bitop3_reads_its_truth_table() {
        let (a, b, c) = (0xf0f0_f0f0u32, 0xcccc_ccccu32, 0xaaaa_aaaau32);
        // The tables LLVM writes: a & b & c is 0x80, a ^ b ^ c 0x96, (a & b) | c 0xea.
        assert_eq!(bitop3(a, b, c, 0x80), a & b & c);
        assert_eq!(bitop3(a, b, c, 0x96), a ^ b ^ c);
        assert_eq!(bitop3(a, b, c, 0xea), (a & b) | c);
        assert_eq!(bitop3(a, b, c, 0xf0), a);
        assert_eq!(bitop3(a, b, c, 0), 0);
    }
}
