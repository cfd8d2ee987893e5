//! Vector ALU, floating point: 32- and 64-bit arithmetic with VOP3 source
//! modifiers (neg, abs), output modifiers (omod, clamp), the MODE
//! register's denormal flushing, the division helpers and gfx90a's packed
//! 32-bit operations.
//!
//! Transcendentals (rcp, rsq, sqrt, exp, log, sin, cos) are computed
//! correctly rounded; the hardware is within 1 ULP of that. Rounding modes
//! other than round-to-nearest-even stop the run.

use super::{base_name, Context, Handler};
use crate::error::Fault;
use crate::operands::modifiers::{ABS, DST_OP_SEL, NEG, NEG_HI, OP_SEL_0, OP_SEL_1};
use crate::program::{Inst, Source};
use crate::wave::active_lanes;

/// MODE bits: FP_ROUND [3:0], FP_DENORM [7:4] (single in [5:4]).
fn check_rounding(c: &Context<'_>) -> Result<(), Fault> {
    if c.wave.mode & 0xf != 0 {
        return Err(Fault::UnimplementedCase(format!("rounding mode {:#x}", c.wave.mode & 0xf)));
    }
    Ok(())
}

/// f16 and f64 denormals are kept (MODE FP_DENORM[7:6] = 3, what HIP
/// kernels ask for); flushing them is not modelled.
fn check_wide_denormals(c: &Context<'_>) -> Result<(), Fault> {
    if (c.wave.mode >> 6) & 3 != 3 {
        return Err(Fault::UnimplementedCase("flushing f16/f64 denormals (MODE FP_DENORM[7:6] != 3)".into()));
    }
    Ok(())
}

fn flush32(c: &Context<'_>) -> bool {
    (c.wave.mode >> 4) & 3 == 0
}

fn flush_denormal(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

fn f32_source(c: &Context<'_>, s: &Source, lane: usize, flush: bool) -> f32 {
    let mut bits = c.wave.lane32(&s.operand, lane);
    if s.mods & ABS != 0 {
        bits &= 0x7fff_ffff;
    }
    if s.mods & NEG != 0 {
        bits ^= 0x8000_0000;
    }
    let x = f32::from_bits(bits);
    if flush {
        flush_denormal(x)
    } else {
        x
    }
}

fn f64_source(c: &Context<'_>, s: &Source, lane: usize) -> f64 {
    let mut bits = c.wave.lane64(&s.operand, lane);
    if s.mods & ABS != 0 {
        bits &= !(1 << 63);
    }
    if s.mods & NEG != 0 {
        bits ^= 1 << 63;
    }
    f64::from_bits(bits)
}

/// (clamp, omod) of a VOP3 form; VOP1/VOP2 forms have neither.
fn output_modifiers(i: &Inst) -> (bool, i64) {
    if i.name.ends_with("_e64") {
        (i.imm(0) != 0, i.imm(1))
    } else {
        (false, 0)
    }
}

fn omod_scale(omod: i64) -> f64 {
    match omod {
        1 => 2.0,
        2 => 4.0,
        3 => 0.5,
        _ => 1.0,
    }
}

/// The clamp modifier: into [0, 1], NaN to 0.
fn clamp_unit(x: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

fn finish32(x: f32, clamp: bool, omod: i64, flush: bool) -> u32 {
    let mut x = if omod != 0 { x * omod_scale(omod) as f32 } else { x };
    if clamp {
        x = clamp_unit(f64::from(x)) as f32;
    }
    if flush {
        x = flush_denormal(x);
    }
    x.to_bits()
}

fn finish64(x: f64, clamp: bool, omod: i64) -> u64 {
    let mut x = if omod != 0 { x * omod_scale(omod) } else { x };
    if clamp {
        x = clamp_unit(x);
    }
    x.to_bits()
}

/// `vdst = f(src0, src1, src2)` on f32 lanes.
macro_rules! f32_op {
    ($f:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            check_rounding(c)?;
            let f: fn(f32, f32, f32) -> f32 = $f;
            let flush = flush32(c);
            let (clamp, omod) = output_modifiers(i);
            let n = i.srcs.len().min(3);
            for lane in active_lanes(c.wave.exec()) {
                let mut a = [0f32; 3];
                for (k, slot) in a.iter_mut().enumerate().take(n) {
                    *slot = f32_source(c, &i.srcs[k], lane, flush);
                }
                let r = finish32(f(a[0], a[1], a[2]), clamp, omod, flush);
                c.wave.write_lane32(&i.defs[0], lane, r);
            }
            Ok(())
        }
    };
}

macro_rules! f64_op {
    ($f:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            check_rounding(c)?;
            check_wide_denormals(c)?;
            let f: fn(f64, f64, f64) -> f64 = $f;
            let (clamp, omod) = output_modifiers(i);
            let n = i.srcs.len().min(3);
            for lane in active_lanes(c.wave.exec()) {
                let mut a = [0f64; 3];
                for (k, slot) in a.iter_mut().enumerate().take(n) {
                    *slot = f64_source(c, &i.srcs[k], lane);
                }
                let r = finish64(f(a[0], a[1], a[2]), clamp, omod);
                c.wave.write_lane64(&i.defs[0], lane, r);
            }
            Ok(())
        }
    };
}

/// f64 with a 32-bit integer second source (ldexp).
macro_rules! f64_int_op {
    ($f:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            let f: fn(f64, i32) -> f64 = $f;
            let (clamp, omod) = output_modifiers(i);
            for lane in active_lanes(c.wave.exec()) {
                let a = f64_source(c, &i.srcs[0], lane);
                let b = c.wave.lane32(&i.srcs[1].operand, lane) as i32;
                c.wave.write_lane64(&i.defs[0], lane, finish64(f(a, b), clamp, omod));
            }
            Ok(())
        }
    };
}

/// A float result of one source written as a 32-bit integer (frexp_exp).
macro_rules! f_to_int {
    ($wide:expr, $f:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            let f: fn(f64) -> i32 = $f;
            for lane in active_lanes(c.wave.exec()) {
                let x = if $wide {
                    f64_source(c, &i.srcs[0], lane)
                } else {
                    f64::from(f32_source(c, &i.srcs[0], lane, false))
                };
                c.wave.write_lane32(&i.defs[0], lane, f(x) as u32);
            }
            Ok(())
        }
    };
}

/// A 16-bit source: the low half, or the high half when op_sel selects it
/// (VOP3 forms), after neg/abs.
fn f16_source(c: &Context<'_>, s: &Source, lane: usize) -> f64 {
    let word = c.wave.lane32(&s.operand, lane);
    let mut bits = if s.mods & OP_SEL_0 != 0 { (word >> 16) as u16 } else { word as u16 };
    if s.mods & ABS != 0 {
        bits &= 0x7fff;
    }
    if s.mods & NEG != 0 {
        bits ^= 0x8000;
    }
    f64::from(half::f16::from_bits(bits))
}

/// `vdst.f16 = f(src0, src1, src2)`, computed exactly in f64 and rounded
/// once; the destination's high half is zeroed (GFX9), or, with the VOP3
/// destination op_sel, the result goes to the high half and the low half
/// is kept.
macro_rules! f16_op {
    ($f:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            check_rounding(c)?;
            check_wide_denormals(c)?;
            let f: fn(f64, f64, f64) -> f64 = $f;
            let (clamp, omod) = output_modifiers(i);
            let high = i.name.ends_with("_e64") && i.srcs.first().is_some_and(|s| s.mods & DST_OP_SEL != 0);
            let n = i.srcs.len().min(3);
            for lane in active_lanes(c.wave.exec()) {
                let mut a = [0f64; 3];
                for (k, slot) in a.iter_mut().enumerate().take(n) {
                    *slot = f16_source(c, &i.srcs[k], lane);
                }
                let mut r = f(a[0], a[1], a[2]) * omod_scale(omod);
                if clamp {
                    r = clamp_unit(r);
                }
                let bits = u32::from(half::f16::from_f64(r).to_bits());
                let old = c.wave.lane32(&i.defs[0], lane);
                let value = if high { (old & 0xffff) | (bits << 16) } else { bits };
                c.wave.write_lane32(&i.defs[0], lane, value);
            }
            Ok(())
        }
    };
}

/// Packed f16 (VOP3P): each half picks its source half by op_sel (low) /
/// op_sel_hi (high) and negates by neg_lo / neg_hi.
macro_rules! pk_f16 {
    ($f:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            check_rounding(c)?;
            check_wide_denormals(c)?;
            let f: fn(f64, f64, f64) -> f64 = $f;
            let clamp = i.imm(0) != 0;
            let n = i.srcs.len().min(3);
            for lane in active_lanes(c.wave.exec()) {
                let mut out = 0u32;
                for half in 0..2 {
                    let mut a = [0f64; 3];
                    for (k, slot) in a.iter_mut().enumerate().take(n) {
                        let s = &i.srcs[k];
                        let select = if half == 0 { OP_SEL_0 } else { OP_SEL_1 };
                        let word = c.wave.lane32(&s.operand, lane);
                        let mut bits = if s.mods & select != 0 { (word >> 16) as u16 } else { word as u16 };
                        let negate = if half == 0 { NEG } else { NEG_HI };
                        if s.mods & negate != 0 {
                            bits ^= 0x8000;
                        }
                        *slot = f64::from(half::f16::from_bits(bits));
                    }
                    let mut r = f(a[0], a[1], a[2]);
                    if clamp {
                        r = clamp_unit(r);
                    }
                    out |= u32::from(half::f16::from_f64(r).to_bits()) << (16 * half);
                }
                c.wave.write_lane32(&i.defs[0], lane, out);
            }
            Ok(())
        }
    };
}

/// The fractional bits of 2/pi the hardware holds (1201 of them, most
/// significant first, in 32-bit words; the last word's low 15 bits are not
/// part of the table and are zero).
const TWO_OVER_PI: [u32; 38] = [
    0xa2f9836e, 0x4e441529, 0xfc2757d1, 0xf534ddc0, 0xdb629599, 0x3c439041, 0xfe5163ab, 0xdebbc561, 0xb7246e3a,
    0x424dd2e0, 0x06492eea, 0x09d1921c, 0xfe1deb1c, 0xb129a73e, 0xe88235f5, 0x2ebb4484, 0xe99c7026, 0xb45f7e41,
    0x3991d639, 0x835339f4, 0x9c845f8b, 0xbdf9283b, 0x1ff897ff, 0xde05980f, 0xef2f118b, 0x5a0a6d1f, 0x6d367ecf,
    0x27cb09b7, 0x4f463f66, 0x9e5fea2d, 0x7527bac7, 0xebe5f17b, 0x3d0739f7, 0x8a5292ea, 0x6bfb5fb1, 0x1f8d5d08,
    0x56033046, 0xfc7b0000,
];
const TWO_OVER_PI_BITS: u32 = 1201;

/// `v_trig_preop_f64`: 53 bits of 2/pi, the `segment`-th group (further
/// along for large `x`, so that `x` times the piece stays exact), as a
/// double scaled to its place (and by 2^128 more for huge `x`).
pub fn trig_preop(x: f64, segment: u32) -> f64 {
    let exponent = ((x.to_bits() >> 52) & 0x7ff) as u32;
    let mut shift = (segment & 31) * 53;
    if exponent > 1077 {
        shift += exponent - 1077;
    }
    // Fraction bits shift .. shift+52 (bit 0 the most significant); past the table, zeros.
    let bit = |k: u32| k < TWO_OVER_PI_BITS && (TWO_OVER_PI[(k / 32) as usize] >> (31 - k % 32)) & 1 != 0;
    let piece = (shift..shift + 53).fold(0u64, |acc, k| (acc << 1) | u64::from(bit(k)));
    let mut scale = -53 - shift as i32;
    if exponent >= 1968 {
        scale += 128;
    }
    ldexp(piece as f64, scale)
}

pub fn ldexp(x: f64, e: i32) -> f64 {
    // Two steps keep intermediate powers of two representable.
    let e = e.clamp(-2200, 2200);
    let half = e / 2;
    x * 2f64.powi(half) * 2f64.powi(e - half)
}

fn ldexp32(x: f32, e: i32) -> f32 {
    ldexp(f64::from(x), e) as f32
}

fn frexp(x: f64) -> (f64, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let mut e = x.abs().log2().floor() as i32 + 1;
    let mut m = ldexp(x, -e);
    // Correct log2 rounding at the edges.
    if m.abs() >= 1.0 {
        m /= 2.0;
        e += 1;
    } else if m.abs() < 0.5 {
        m *= 2.0;
        e -= 1;
    }
    (m, e)
}

fn fract32(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    (x - x.floor()).min(f32::from_bits(0x3f7f_ffff))
}

fn fract64(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    (x - x.floor()).min(f64::from_bits(0x3fef_ffff_ffff_ffff))
}

/// IEEE-mode min/max: a quiet NaN input loses to the other operand, and
/// -0 is below +0 (the ISA's LT_NEG_ZERO/GT_NEG_ZERO comparisons; Rust's
/// own min/max may return either zero).
fn min64(a: f64, b: f64) -> f64 {
    if a == 0.0 && b == 0.0 {
        if a.is_sign_negative() {
            a
        } else {
            b
        }
    } else {
        a.min(b)
    }
}

fn max64(a: f64, b: f64) -> f64 {
    if a == 0.0 && b == 0.0 {
        if a.is_sign_negative() {
            b
        } else {
            a
        }
    } else {
        a.max(b)
    }
}

fn min32(a: f32, b: f32) -> f32 {
    min64(a.into(), b.into()) as f32
}

fn max32(a: f32, b: f32) -> f32 {
    max64(a.into(), b.into()) as f32
}

/// IEEE 754-2019 minimum and maximum (gfx950's `v_minimum3`,
/// `v_maximum3`): NaN when either is, else as min/max (-0 below +0).
fn minimum(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        min64(a, b)
    }
}

fn maximum(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        max64(a, b)
    }
}

fn med3(a: f32, b: f32, c: f32) -> f32 {
    if a.is_nan() || b.is_nan() || c.is_nan() {
        return min32(min32(a, b), c);
    }
    a.max(b).min(a.min(b).max(c))
}

/// v_div_fixup: the quotient's sign and the special cases of num / den.
fn div_fixup64(quotient: f64, den: f64, num: f64) -> f64 {
    let negative = den.is_sign_negative() != num.is_sign_negative();
    let signed = |x: f64| if negative { -x } else { x };
    if den.is_nan() {
        den
    } else if num.is_nan() {
        num
    } else if (den == 0.0 && num == 0.0) || (den.is_infinite() && num.is_infinite()) {
        f64::NAN
    } else if den == 0.0 || num.is_infinite() {
        signed(f64::INFINITY)
    } else if den.is_infinite() || num == 0.0 {
        signed(0.0)
    } else if quotient.is_nan() {
        // The scaled quotient overflowed inside the sequence: the hardware
        // returns infinity here, not the NaN the ISA's pseudo-code gives.
        signed(f64::INFINITY)
    } else {
        signed(quotient.abs())
    }
}

/// Finite, nonzero operands pass v_div_scale/v_div_fmas unchanged unless
/// the quotient needs scaling (tiny operands, far-apart exponents), which
/// is not modelled.
/// The biased exponent field of a value in the instruction's format.
fn biased_exponent(x: f64, wide: bool) -> i32 {
    if wide {
        ((x.to_bits() >> 52) & 0x7ff) as i32
    } else {
        (((x as f32).to_bits() >> 23) & 0xff) as i32
    }
}

fn is_denormal(x: f64, wide: bool) -> bool {
    if wide {
        x != 0.0 && x.abs() < f64::MIN_POSITIVE
    } else {
        let x = x as f32;
        x != 0.0 && x.abs() < f32::MIN_POSITIVE
    }
}

/// `v_div_scale`: S0 (the value to scale: the numerator or the
/// denominator), S1 the denominator, S2 the numerator. Operands whose
/// quotient would overflow, be denormal or lose bits are scaled by 2^64
/// (2^128 for f64) and the flag (VCC or sdst) tells `v_div_fmas` to undo
/// it; the cases follow the ISA's pseudo-code. Zero, infinite and NaN
/// operands give NaN: `v_div_fixup` decides the result from the operands.
fn div_scale(c: &mut Context<'_>, i: &Inst, wide: bool) -> Result<(), Fault> {
    let (span, tiny, scale) = if wide { (768, 53, 128) } else { (96, 23, 64) };
    let mut flags = 0u64;
    for lane in active_lanes(c.wave.exec()) {
        let (value, den, num) = if wide {
            (f64_source(c, &i.srcs[0], lane), f64_source(c, &i.srcs[1], lane), f64_source(c, &i.srcs[2], lane))
        } else {
            let f = |k| f64::from(f32_source(c, &i.srcs[k], lane, false));
            (f(0), f(1), f(2))
        };
        let special = |x: f64| x == 0.0 || !x.is_finite();
        let (result, flag) = if special(den) || special(num) {
            (f64::NAN, false)
        } else {
            // Quotients in the instruction's format.
            let divide = |a: f64, b: f64| if wide { a / b } else { f64::from(a as f32 / b as f32) };
            let exponent = |x: f64| biased_exponent(x, wide);
            let reciprocal_denormal = is_denormal(divide(1.0, den), wide);
            let quotient_denormal = is_denormal(divide(num, den), wide);
            if exponent(num) - exponent(den) >= span {
                (if value == den { ldexp(value, scale) } else { value }, true)
            } else if is_denormal(den, wide) {
                (ldexp(value, scale), false)
            } else if reciprocal_denormal && quotient_denormal {
                // Only the denominator, down: the quotient comes out 2^scale
                // too big and v_div_fmas scales it back.
                (if value == den { ldexp(value, -scale) } else { value }, true)
            } else if reciprocal_denormal {
                (ldexp(value, -scale), false)
            } else if quotient_denormal {
                (if value == num { ldexp(value, scale) } else { value }, true)
            } else if exponent(num) <= tiny {
                (ldexp(value, scale), false)
            } else {
                (value, false)
            }
        };
        if wide {
            c.wave.write_lane64(&i.defs[0], lane, result.to_bits());
        } else {
            c.wave.write_lane32(&i.defs[0], lane, (result as f32).to_bits());
        }
        flags |= u64::from(flag) << lane;
    }
    match i.defs.get(1) {
        Some(sdst) => c.wave.write_scalar64(sdst, flags),
        None => c.wave.set_vcc(flags),
    }
    Ok(())
}

/// `v_div_fmas`: fma(S0, S1, S2), and where VCC is set (`v_div_scale`
/// scaled the operands) rescaled by 2^64 (2^128 for f64) up when S2's
/// exponent says the quotient is at least 2, else down.
fn div_fmas(c: &mut Context<'_>, i: &Inst, wide: bool) -> Result<(), Fault> {
    // The scaled lanes, from the sources before the destination (often one
    // of them) is written.
    let scale = if wide { 128 } else { 64 };
    let flush = flush32(c);
    let scaled: Vec<(usize, u64)> = active_lanes(c.wave.exec() & c.wave.vcc())
        .map(|lane| {
            if wide {
                let [a, b, addend] = [0, 1, 2].map(|k| f64_source(c, &i.srcs[k], lane));
                let up = biased_exponent(addend, true) > 1023;
                (lane, ldexp(a.mul_add(b, addend), if up { scale } else { -scale }).to_bits())
            } else {
                // Fused in f64 (the product is exact) and scaled before the
                // one rounding to f32, so a denormal quotient is rounded once.
                let [a, b, addend] = [0, 1, 2].map(|k| f64::from(f32_source(c, &i.srcs[k], lane, flush)));
                let up = biased_exponent(addend, false) > 127;
                let value = ldexp(a.mul_add(b, addend), if up { scale } else { -scale }) as f32;
                (lane, u64::from(finish32(value, false, 0, flush)))
            }
        })
        .collect();
    if wide {
        f64_op!(|a, b, c| a.mul_add(b, c))(c, i)?;
    } else {
        f32_op!(|a, b, c| a.mul_add(b, c))(c, i)?;
    }
    for (lane, bits) in scaled {
        if wide {
            c.wave.write_lane64(&i.defs[0], lane, bits);
        } else {
            c.wave.write_lane32(&i.defs[0], lane, bits as u32);
        }
    }
    Ok(())
}

/// gfx90a's packed f32 operations: each half picks its source dwords by
/// op_sel (low) / op_sel_hi (high) and negates by neg_lo / neg_hi.
macro_rules! pk_f32 {
    ($f:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            check_rounding(c)?;
            let f: fn(f32, f32, f32) -> f32 = $f;
            let flush = flush32(c);
            let clamp = i.imm(0) != 0;
            let n = i.srcs.len().min(3);
            for lane in active_lanes(c.wave.exec()) {
                // Both halves read before either is written: the high half
                // may read the register the low half writes.
                let mut results = [0u32; 2];
                for (half, result) in results.iter_mut().enumerate() {
                    let mut a = [0f32; 3];
                    for (k, slot) in a.iter_mut().enumerate().take(n) {
                        let s = &i.srcs[k];
                        let select = if half == 0 { OP_SEL_0 } else { OP_SEL_1 };
                        let dword = usize::from(s.mods & select != 0);
                        let mut bits = c.wave.lane32_at(&s.operand, lane, dword);
                        let negate = if half == 0 { NEG } else { NEG_HI };
                        if s.mods & negate != 0 {
                            bits ^= 0x8000_0000;
                        }
                        let x = f32::from_bits(bits);
                        *slot = if flush { flush_denormal(x) } else { x };
                    }
                    *result = finish32(f(a[0], a[1], a[2]), clamp, 0, flush);
                }
                for (half, result) in results.into_iter().enumerate() {
                    c.wave.write_lane32_at(&i.defs[0], lane, half, result);
                }
            }
            Ok(())
        }
    };
}

/// A mixed-precision (VOP3P `v_fma_mix*`) source: f16 where op_sel_hi is
/// set (the half op_sel picks), else f32; neg_lo negates, neg_hi takes the
/// absolute value.
fn mix_source(c: &Context<'_>, s: &Source, lane: usize) -> f64 {
    let word = c.wave.lane32(&s.operand, lane);
    let mut x = if s.mods & OP_SEL_1 != 0 {
        let bits = if s.mods & OP_SEL_0 != 0 { (word >> 16) as u16 } else { word as u16 };
        f64::from(half::f16::from_bits(bits))
    } else {
        f64::from(f32::from_bits(word))
    };
    if s.mods & NEG_HI != 0 {
        x = x.abs();
    }
    if s.mods & NEG != 0 {
        x = -x;
    }
    x
}

/// `v_fma_mix_f32`, `v_fma_mixlo_f16`, `v_fma_mixhi_f16`: a fused
/// multiply-add of mixed f16/f32 sources, rounded once to the result type
/// (the f16 forms write one half and keep the other).
fn fma_mix(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    check_rounding(c)?;
    check_wide_denormals(c)?;
    let clamp = i.imm(0) != 0;
    let half_result = if i.name.starts_with("V_FMA_MIXLO") {
        Some(0)
    } else if i.name.starts_with("V_FMA_MIXHI") {
        Some(16)
    } else {
        None
    };
    for lane in active_lanes(c.wave.exec()) {
        let [a, b, d] = [0, 1, 2].map(|k| mix_source(c, &i.srcs[k], lane));
        let value = match half_result {
            None => {
                let r = (a as f32).mul_add(b as f32, d as f32);
                finish32(r, clamp, 0, false)
            }
            Some(shift) => {
                let mut r = a.mul_add(b, d);
                if clamp {
                    r = clamp_unit(r);
                }
                let bits = u32::from(half::f16::from_f64(r).to_bits());
                let old = c.wave.lane32(&i.defs[0], lane);
                (old & !(0xffff << shift)) | (bits << shift)
            }
        };
        c.wave.write_lane32(&i.defs[0], lane, value);
    }
    Ok(())
}

/// `v_pack_b32_f16`: two f16 halves (op_sel picks each source's half,
/// neg/abs apply) into one dword, src0 low.
fn pack_f16(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    for lane in active_lanes(c.wave.exec()) {
        let mut out = 0u32;
        for (k, s) in i.srcs.iter().take(2).enumerate() {
            let word = c.wave.lane32(&s.operand, lane);
            let mut bits = if s.mods & OP_SEL_0 != 0 { word >> 16 } else { word } & 0xffff;
            if s.mods & ABS != 0 {
                bits &= 0x7fff;
            }
            if s.mods & NEG != 0 {
                bits ^= 0x8000;
            }
            out |= bits << (16 * k);
        }
        c.wave.write_lane32(&i.defs[0], lane, out);
    }
    Ok(())
}

pub fn handler(name: &str) -> Option<Handler> {
    if name.ends_with("_sdwa") || name.ends_with("_dpp") {
        return None;
    }
    Some(match base_name(name) {
        "V_ADD_F32" => f32_op!(|a, b, _| a + b),
        "V_SUB_F32" => f32_op!(|a, b, _| a - b),
        "V_SUBREV_F32" => f32_op!(|a, b, _| b - a),
        "V_MUL_F32" => f32_op!(|a, b, _| a * b),
        "V_MUL_LEGACY_F32" => f32_op!(|a, b, _| if a == 0.0 || b == 0.0 { 0.0 } else { a * b }),
        "V_MIN_F32" => f32_op!(|a, b, _| min32(a, b)),
        "V_MAX_F32" => f32_op!(|a, b, _| max32(a, b)),
        "V_MIN3_F32" => f32_op!(|a, b, c| min32(min32(a, b), c)),
        "V_MAX3_F32" => f32_op!(|a, b, c| max32(max32(a, b), c)),
        "V_MED3_F32" => f32_op!(med3),
        "V_FMA_F32" | "V_FMAC_F32" | "V_FMAMK_F32" | "V_FMAAK_F32" => f32_op!(|a, b, c| a.mul_add(b, c)),
        "V_MINIMUM3_F32" => f32_op!(|a, b, c| minimum(minimum(a.into(), b.into()), c.into()) as f32),
        "V_MAXIMUM3_F32" => f32_op!(|a, b, c| maximum(maximum(a.into(), b.into()), c.into()) as f32),
        // mad/mac round the product, and never keep denormals.
        "V_MAD_F32" | "V_MAC_F32" | "V_MADMK_F32" | "V_MADAK_F32" => {
            f32_op!(|a, b, c| flush_denormal(flush_denormal(flush_denormal(a) * flush_denormal(b)) + flush_denormal(c)))
        }
        "V_LDEXP_F32" => |c, i| {
            let (clamp, omod) = output_modifiers(i);
            let flush = flush32(c);
            for lane in active_lanes(c.wave.exec()) {
                let a = f32_source(c, &i.srcs[0], lane, flush);
                let e = c.wave.lane32(&i.srcs[1].operand, lane) as i32;
                let r = finish32(ldexp32(a, e), clamp, omod, flush);
                c.wave.write_lane32(&i.defs[0], lane, r);
            }
            Ok(())
        },
        "V_RCP_F32" | "V_RCP_IFLAG_F32" => f32_op!(|a, _, _| 1.0 / a),
        "V_RSQ_F32" => f32_op!(|a, _, _| (1.0 / f64::from(a).sqrt()) as f32),
        "V_SQRT_F32" => f32_op!(|a, _, _| a.sqrt()),
        "V_EXP_F32" => f32_op!(|a, _, _| a.exp2()),
        "V_LOG_F32" => f32_op!(|a, _, _| a.log2()),
        "V_SIN_F32" => f32_op!(|a, _, _| (f64::from(a) * std::f64::consts::TAU).sin() as f32),
        "V_COS_F32" => f32_op!(|a, _, _| (f64::from(a) * std::f64::consts::TAU).cos() as f32),
        "V_FRACT_F32" => f32_op!(|a, _, _| fract32(a)),
        "V_TRUNC_F32" => f32_op!(|a, _, _| a.trunc()),
        "V_CEIL_F32" => f32_op!(|a, _, _| a.ceil()),
        "V_FLOOR_F32" => f32_op!(|a, _, _| a.floor()),
        "V_RNDNE_F32" => f32_op!(|a, _, _| a.round_ties_even()),
        "V_FREXP_MANT_F32" => f32_op!(|a, _, _| frexp(f64::from(a)).0 as f32),
        "V_FREXP_EXP_I32_F32" => f_to_int!(false, |a| frexp(a).1),
        "V_DIV_FIXUP_F32" => f32_op!(|q, d, n| div_fixup64(f64::from(q), f64::from(d), f64::from(n)) as f32),
        "V_DIV_SCALE_F32" => |c, i| div_scale(c, i, false),
        "V_DIV_FMAS_F32" => |c, i| div_fmas(c, i, false),
        "V_ADD_F64" => f64_op!(|a, b, _| a + b),
        "V_MUL_F64" => f64_op!(|a, b, _| a * b),
        "V_FMA_F64" | "V_FMAC_F64" => f64_op!(|a, b, c| a.mul_add(b, c)),
        "V_MIN_F64" => f64_op!(|a, b, _| min64(a, b)),
        "V_MAX_F64" => f64_op!(|a, b, _| max64(a, b)),
        "V_LDEXP_F64" => f64_int_op!(ldexp),
        "V_TRIG_PREOP_F64" => f64_int_op!(|x, segment| trig_preop(x, segment as u32)),
        "V_RCP_F64" => f64_op!(|a, _, _| 1.0 / a),
        "V_RSQ_F64" => f64_op!(|a, _, _| 1.0 / a.sqrt()),
        "V_SQRT_F64" => f64_op!(|a, _, _| a.sqrt()),
        "V_FRACT_F64" => f64_op!(|a, _, _| fract64(a)),
        "V_TRUNC_F64" => f64_op!(|a, _, _| a.trunc()),
        "V_CEIL_F64" => f64_op!(|a, _, _| a.ceil()),
        "V_FLOOR_F64" => f64_op!(|a, _, _| a.floor()),
        "V_RNDNE_F64" => f64_op!(|a, _, _| a.round_ties_even()),
        "V_FREXP_MANT_F64" => f64_op!(|a, _, _| frexp(a).0),
        "V_FREXP_EXP_I32_F64" => f_to_int!(true, |a| frexp(a).1),
        "V_DIV_FIXUP_F64" => f64_op!(div_fixup64),
        "V_DIV_SCALE_F64" => |c, i| div_scale(c, i, true),
        "V_DIV_FMAS_F64" => |c, i| div_fmas(c, i, true),
        "V_ADD_F16" => f16_op!(|a, b, _| a + b),
        "V_SUB_F16" => f16_op!(|a, b, _| a - b),
        "V_SUBREV_F16" => f16_op!(|a, b, _| b - a),
        "V_MUL_F16" => f16_op!(|a, b, _| a * b),
        "V_MIN_F16" => f16_op!(|a, b, _| min64(a, b)),
        "V_MAX_F16" => f16_op!(|a, b, _| max64(a, b)),
        // In f64 (the f16 product is exact there), then rounded to f16.
        "V_FMA_F16" | "V_FMAC_F16" | "V_MAC_F16" | "V_MAD_F16" => f16_op!(|a, b, c| a * b + c),
        "V_SQRT_F16" => f16_op!(|a, _, _| a.sqrt()),
        "V_RCP_F16" => f16_op!(|a, _, _| 1.0 / a),
        "V_RSQ_F16" => f16_op!(|a, _, _| 1.0 / a.sqrt()),
        "V_EXP_F16" => f16_op!(|a, _, _| a.exp2()),
        "V_LOG_F16" => f16_op!(|a, _, _| a.log2()),
        "V_FLOOR_F16" => f16_op!(|a, _, _| a.floor()),
        "V_CEIL_F16" => f16_op!(|a, _, _| a.ceil()),
        "V_TRUNC_F16" => f16_op!(|a, _, _| a.trunc()),
        "V_RNDNE_F16" => f16_op!(|a, _, _| a.round_ties_even()),
        "V_MIN3_F16" => f16_op!(|a, b, c| min64(min64(a, b), c)),
        "V_MAX3_F16" => f16_op!(|a, b, c| max64(max64(a, b), c)),
        "V_MED3_F16" => f16_op!(|a, b, c| f64::from(med3(a as f32, b as f32, c as f32))),
        // Every f16 quotient, and its special cases, is exact in f64.
        "V_DIV_FIXUP_F16" => f16_op!(div_fixup64),
        // Below 1 in f16: at most 0x3bff, whatever f64 rounding would give.
        "V_FRACT_F16" => f16_op!(|a, _, _| if a.is_finite() { (a - a.floor()).min(0.999_511_718_75) } else { a }),
        "V_SIN_F16" => f16_op!(|a, _, _| (a * std::f64::consts::TAU).sin()),
        "V_COS_F16" => f16_op!(|a, _, _| (a * std::f64::consts::TAU).cos()),
        "V_FREXP_MANT_F16" => f16_op!(|a, _, _| frexp(a).0),
        "V_FREXP_EXP_I16_F16" => |c, i| {
            for lane in active_lanes(c.wave.exec()) {
                let exponent = frexp(f16_source(c, &i.srcs[0], lane)).1 as i16;
                c.wave.write_lane32(&i.defs[0], lane, u32::from(exponent as u16));
            }
            Ok(())
        },
        "V_LDEXP_F16" => |c, i| {
            check_rounding(c)?;
            check_wide_denormals(c)?;
            let (clamp, omod) = output_modifiers(i);
            if clamp || omod != 0 {
                return Err(super::unsupported_modifier("clamp/omod on v_ldexp_f16"));
            }
            let high = i.name.ends_with("_e64") && i.srcs.first().is_some_and(|s| s.mods & DST_OP_SEL != 0);
            for lane in active_lanes(c.wave.exec()) {
                let a = f16_source(c, &i.srcs[0], lane);
                // The exponent is the source's low 16 bits, signed.
                let e = c.wave.lane32(&i.srcs[1].operand, lane) as i16;
                let bits = u32::from(half::f16::from_f64(ldexp(a, i32::from(e))).to_bits());
                let old = c.wave.lane32(&i.defs[0], lane);
                c.wave.write_lane32(&i.defs[0], lane, if high { (old & 0xffff) | bits << 16 } else { bits });
            }
            Ok(())
        },
        "V_PK_ADD_F16" => pk_f16!(|a, b, _| a + b),
        "V_PK_MUL_F16" => pk_f16!(|a, b, _| a * b),
        "V_PK_FMA_F16" => pk_f16!(|a, b, c| a * b + c),
        "V_PK_MIN_F16" => pk_f16!(|a, b, _| min64(a, b)),
        "V_PK_MAX_F16" => pk_f16!(|a, b, _| max64(a, b)),
        "V_PK_MINIMUM3_F16" => pk_f16!(|a, b, c| minimum(minimum(a, b), c)),
        "V_PK_MAXIMUM3_F16" => pk_f16!(|a, b, c| maximum(maximum(a, b), c)),
        "V_PK_FMA_F32" => pk_f32!(|a, b, c| a.mul_add(b, c)),
        "V_FMA_MIX_F32" | "V_FMA_MIXLO_F16" | "V_FMA_MIXHI_F16" => fma_mix,
        "V_PACK_B32_F16" => pack_f16,
        "V_PK_MUL_F32" => pk_f32!(|a, b, _| a * b),
        "V_PK_ADD_F32" => pk_f32!(|a, b, _| a + b),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_match_libm() {
        assert_eq!(frexp(8.0), (0.5, 4));
        assert_eq!(frexp(-0.75), (-0.75, 0));
        assert_eq!(ldexp(1.0, -1074), f64::from_bits(1));
        assert_eq!(fract32(-0.25), 0.75);
        assert_eq!(div_fixup64(2.0, -1.0, 2.0), -2.0);
        assert!(div_fixup64(0.0, 0.0, 0.0).is_nan());
        assert_eq!(div_fixup64(0.0, 0.0, 1.0), f64::INFINITY);
        assert_eq!(med3(1.0, 3.0, 2.0), 2.0);
    }

    #[test]
    fn trig_preop_pieces_add_up_to_two_over_pi() {
        // The first piece is 2/pi truncated to 53 bits.
        assert_eq!(trig_preop(1.0, 0).to_bits(), 0x3fe4_5f30_6dc9_c882);
        assert_eq!(trig_preop(1.0, 0) + trig_preop(1.0, 1), std::f64::consts::FRAC_2_PI);
        // Each piece continues where the last stopped, 53 bits further.
        assert!(trig_preop(1.0, 1) < trig_preop(1.0, 0) * f64::EPSILON);
        assert!(trig_preop(1.0, 2) < trig_preop(1.0, 1) * f64::EPSILON);
        // Large arguments start further into the table; beyond it, zeros.
        // 2^60 starts 6 bits in: what 2/pi has after its first six bits (0.101000).
        let late = trig_preop(2f64.powi(60), 0);
        assert!(late < 2f64.powi(-6) && (std::f64::consts::FRAC_2_PI - 0.625 - late).abs() < 2f64.powi(-52));
        assert_eq!(trig_preop(1.0, 31), 0.0);
    }
}
