//! 8-bit floats (gfx940+): the formats, and the conversions between them
//! and f32 (`v_cvt_f32_fp8`, `v_cvt_pk_f32_fp8`, `v_cvt_pk_fp8_f32`,
//! `v_cvt_sr_fp8_f32` and their bf8 twins).
//!
//! The same opcodes mean different formats by processor: gfx940/941/942
//! use the FNUZ formats (E4M3 with bias 8, E5M2 with bias 16; 0x80 is the
//! only NaN, no infinity, no negative zero), gfx950 the OCP ones (E4M3FN
//! with bias 7 and NaN S.1111.111, no infinity; E5M2 with bias 15, IEEE
//! like). Sources: the CDNA4 ISA guide (section 7.3, the VOP1/VOP3 opcode
//! pseudocode), LLVM's AMDGPU backend and HIP's `amd_hip_fp8.h`.
//!
//! f32 -> 8-bit rounds to nearest even. What a value past the largest
//! finite one (or an infinity) becomes follows MODE.FP16_OVFL on gfx950 as
//! the CDNA4 guide's table says; for the FNUZ formats no document says, so
//! the run stops there (HIP's own conversions saturate before converting,
//! so its code never gets there). Stochastic rounding adds the top 20 (fp8)
//! or 21 (bf8) bits of its second source below the kept mantissa and
//! truncates, as the guide's prose says; where the result would be
//! subnormal or overflow, which the guide leaves open, the run stops.

use super::{base_name, Context, Handler};
use crate::error::Fault;
use crate::operands::modifiers::{ABS, DST_OP_SEL, NEG, OP_SEL_0};
use crate::processor::Processor;
use crate::program::{Inst, Source};
use crate::wave::active_lanes;

/// An 8-bit float format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fp8Format {
    /// gfx940-gfx942's fp8: E4M3, bias 8, 0x80 the only NaN.
    E4m3Fnuz,
    /// gfx940-gfx942's bf8: E5M2, bias 16, 0x80 the only NaN.
    E5m2Fnuz,
    /// gfx950's fp8 (OCP E4M3FN): bias 7, NaN S.1111.111, no infinity.
    E4m3,
    /// gfx950's bf8 (OCP E5M2): bias 15, infinities and NaNs as IEEE.
    E5m2,
}

/// MODE bit 23 (FP16_OVFL): conversions to 8 bits saturate.
pub(super) const MODE_FP16_OVFL: u32 = 1 << 23;

impl Fp8Format {
    /// The format a processor's `fp8` (or `bf8`) means; None before gfx940.
    pub fn of(processor: &Processor, bf8: bool) -> Option<Self> {
        let name = processor.name;
        if name.starts_with("gfx95") {
            Some(if bf8 { Fp8Format::E5m2 } else { Fp8Format::E4m3 })
        } else if name.starts_with("gfx94") {
            Some(if bf8 { Fp8Format::E5m2Fnuz } else { Fp8Format::E4m3Fnuz })
        } else {
            None
        }
    }

    /// (exponent bits, mantissa bits, bias).
    fn layout(self) -> (u32, u32, i32) {
        match self {
            Fp8Format::E4m3Fnuz => (4, 3, 8),
            Fp8Format::E5m2Fnuz => (5, 2, 16),
            Fp8Format::E4m3 => (4, 3, 7),
            Fp8Format::E5m2 => (5, 2, 15),
        }
    }

    fn fnuz(self) -> bool {
        matches!(self, Fp8Format::E4m3Fnuz | Fp8Format::E5m2Fnuz)
    }

    /// The value of an encoding (exact in f32).
    pub fn decode(self, byte: u8) -> f32 {
        let (exponent_bits, mantissa_bits, bias) = self.layout();
        let negative = byte & 0x80 != 0;
        let exponent = i32::from(byte & 0x7f) >> mantissa_bits;
        let mantissa = u32::from(byte) & ((1 << mantissa_bits) - 1);
        let all_ones = exponent == (1 << exponent_bits) - 1;
        let nan = match self {
            Fp8Format::E4m3Fnuz | Fp8Format::E5m2Fnuz => byte == 0x80,
            Fp8Format::E4m3 => all_ones && mantissa == (1 << mantissa_bits) - 1,
            Fp8Format::E5m2 => all_ones && mantissa != 0,
        };
        if nan {
            return f32::NAN;
        }
        let magnitude = if self == Fp8Format::E5m2 && all_ones {
            f32::INFINITY
        } else if exponent == 0 {
            mantissa as f32 * 2f32.powi(1 - bias - mantissa_bits as i32)
        } else {
            (1.0 + mantissa as f32 / (1 << mantissa_bits) as f32) * 2f32.powi(exponent - bias)
        };
        if negative {
            -magnitude
        } else {
            magnitude
        }
    }

    /// The largest finite value's encoding (positive).
    fn max_code(self) -> u8 {
        match self {
            Fp8Format::E4m3Fnuz | Fp8Format::E5m2Fnuz => 0x7f,
            Fp8Format::E4m3 => 0x7e,
            Fp8Format::E5m2 => 0x7b,
        }
    }

    fn nan_code(self, negative: bool) -> u8 {
        if self.fnuz() {
            0x80
        } else {
            0x7f | if negative { 0x80 } else { 0 }
        }
    }

    /// What an infinity or a value past the largest finite one becomes.
    fn overflow(self, negative: bool, saturate: bool) -> Result<u8, Fault> {
        let sign = if negative { 0x80 } else { 0 };
        match self {
            Fp8Format::E4m3Fnuz | Fp8Format::E5m2Fnuz => Err(Fault::UnimplementedCase(
                "an f32 -> fp8/bf8 conversion past the largest FNUZ value on gfx94x (undocumented)".into(),
            )),
            _ if saturate => Ok(sign | self.max_code()),
            Fp8Format::E4m3 => Ok(self.nan_code(negative)),
            Fp8Format::E5m2 => Ok(sign | 0x7c),
        }
    }

    /// The nearest encoding of `x`, ties to even, in round-to-nearest.
    pub fn encode(self, x: f32, saturate: bool) -> Result<u8, Fault> {
        let negative = x.is_sign_negative();
        if x.is_nan() {
            return Ok(self.nan_code(negative));
        }
        let max = self.decode(self.max_code());
        if x.abs() > max {
            return self.overflow(negative, saturate);
        }
        // The finite non-negative encodings are ordered by value: the
        // nearest, ties to the even encoding.
        let magnitude = x.abs();
        let mut best = 0u8;
        for code in 1..=self.max_code() {
            let (here, there) = (self.decode(code), self.decode(best));
            let (d_here, d_best) = ((here - magnitude).abs(), (there - magnitude).abs());
            if d_here < d_best || (d_here == d_best && code & 1 == 0) {
                best = code;
            }
        }
        Ok(self.signed(best, negative))
    }

    /// An encoding with the sign set: FNUZ has no negative zero.
    fn signed(self, code: u8, negative: bool) -> u8 {
        if negative && !(self.fnuz() && code == 0) {
            code | 0x80
        } else {
            code
        }
    }

    /// Stochastic rounding: the top bits of `random` are added below the
    /// mantissa bits kept, then the rest is dropped.
    pub fn encode_stochastic(self, x: f32, random: u32, saturate: bool) -> Result<u8, Fault> {
        let (_, mantissa_bits, bias) = self.layout();
        let negative = x.is_sign_negative();
        if x.is_nan() {
            return Ok(self.nan_code(negative));
        }
        if x == 0.0 {
            return Ok(self.signed(0, negative));
        }
        let dropped = 23 - mantissa_bits;
        let added = (x.to_bits() & 0x7fff_ffff) + (random >> (32 - dropped));
        let truncated = f32::from_bits(added & !((1 << dropped) - 1));
        let max = self.decode(self.max_code());
        if x.is_infinite() || truncated > max {
            return self.overflow(negative, saturate);
        }
        let smallest_normal = 2f32.powi(1 - bias);
        if x.abs() < smallest_normal || truncated < smallest_normal {
            return Err(Fault::UnimplementedCase(
                "stochastic rounding to a subnormal fp8/bf8 value (undocumented)".into(),
            ));
        }
        self.encode(if negative { -truncated } else { truncated }, saturate)
    }
}

/// gfx950's 6- and 4-bit floats (F8F6F4 MFMAs): no infinity, no NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NarrowFormat {
    /// FP6 E2M3, bias 1 (largest 7.5).
    E2m3,
    /// BF6 E3M2, bias 3 (largest 28).
    E3m2,
    /// FP4 E2M1, bias 1 (largest 6).
    E2m1,
}

impl NarrowFormat {
    pub fn bits(self) -> u32 {
        match self {
            NarrowFormat::E2m3 | NarrowFormat::E3m2 => 6,
            NarrowFormat::E2m1 => 4,
        }
    }

    /// The value of an encoding (the low `bits` of `code`).
    pub fn decode(self, code: u8) -> f32 {
        let (mantissa_bits, bias) = match self {
            NarrowFormat::E2m3 => (3, 1),
            NarrowFormat::E3m2 => (2, 3),
            NarrowFormat::E2m1 => (1, 1),
        };
        let sign_bit = self.bits() - 1;
        let exponent = i32::from(code & ((1 << sign_bit) - 1)) >> mantissa_bits;
        let mantissa = f32::from(code & ((1 << mantissa_bits) - 1));
        let scale = (1u32 << mantissa_bits) as f32;
        let magnitude = if exponent == 0 {
            mantissa / scale * 2f32.powi(1 - bias)
        } else {
            (1.0 + mantissa / scale) * 2f32.powi(exponent - bias)
        };
        if code >> sign_bit & 1 == 1 {
            -magnitude
        } else {
            magnitude
        }
    }
}

/// An MX scale (E8M0): 2^(e - 127), 0xff a NaN.
pub fn e8m0(code: u8) -> f64 {
    if code == 0xff {
        f64::NAN
    } else {
        2f64.powi(i32::from(code) - 127)
    }
}

/// An f32 source after neg/abs.
fn f32_in(c: &Context<'_>, s: &Source, lane: usize) -> f32 {
    let mut x = f32::from_bits(c.wave.lane32(&s.operand, lane));
    if s.mods & ABS != 0 {
        x = x.abs();
    }
    if s.mods & NEG != 0 {
        x = -x;
    }
    x
}

fn format(c: &Context<'_>, bf8: bool) -> Result<Fp8Format, Fault> {
    Fp8Format::of(c.machine.processor, bf8).ok_or_else(|| {
        Fault::UnimplementedCase(format!(
            "fp8/bf8 conversions on {} (gfx940 and newer have them)",
            c.machine.processor.name
        ))
    })
}

/// `v_cvt_f32_fp8`: byte 0 (an SDWA form selects another before).
fn to_f32(c: &mut Context<'_>, i: &Inst, bf8: bool) -> Result<(), Fault> {
    let format = format(c, bf8)?;
    for lane in active_lanes(c.wave.exec()) {
        let byte = c.wave.lane32(&i.srcs[0].operand, lane) as u8;
        c.wave.write_lane32(&i.defs[0], lane, format.decode(byte).to_bits());
    }
    Ok(())
}

/// `v_cvt_pk_f32_fp8`: the low word's two bytes into a register pair.
fn packed_to_f32(c: &mut Context<'_>, i: &Inst, bf8: bool) -> Result<(), Fault> {
    let format = format(c, bf8)?;
    for lane in active_lanes(c.wave.exec()) {
        let word = c.wave.lane32(&i.srcs[0].operand, lane);
        let (low, high) = (format.decode(word as u8), format.decode((word >> 8) as u8));
        c.wave.write_lane64(&i.defs[0], lane, u64::from(low.to_bits()) | u64::from(high.to_bits()) << 32);
    }
    Ok(())
}

fn saturating(c: &Context<'_>) -> bool {
    c.wave.mode & MODE_FP16_OVFL != 0
}

/// `v_cvt_pk_fp8_f32`: two f32 into one word of the destination (op_sel[3]
/// picks the high word), the other word kept.
fn from_f32_packed(c: &mut Context<'_>, i: &Inst, bf8: bool) -> Result<(), Fault> {
    let format = format(c, bf8)?;
    let high = i.srcs[0].mods & DST_OP_SEL != 0;
    let saturate = saturating(c);
    for lane in active_lanes(c.wave.exec()) {
        let low_byte = format.encode(f32_in(c, &i.srcs[0], lane), saturate)?;
        let high_byte = format.encode(f32_in(c, &i.srcs[1], lane), saturate)?;
        let word = u32::from(low_byte) | u32::from(high_byte) << 8;
        let old = c.wave.lane32(&i.defs[0], lane);
        let value = if high { (old & 0xffff) | word << 16 } else { (old & 0xffff_0000) | word };
        c.wave.write_lane32(&i.defs[0], lane, value);
    }
    Ok(())
}

/// `v_cvt_sr_fp8_f32`: one byte of the destination (op_sel[3:2]: bit 1 in
/// src0's modifiers, bit 0 in the tied src2's), the others kept.
fn from_f32_stochastic(c: &mut Context<'_>, i: &Inst, bf8: bool) -> Result<(), Fault> {
    let format = format(c, bf8)?;
    let byte = u32::from(i.srcs[0].mods & DST_OP_SEL != 0) << 1
        | u32::from(i.srcs.get(2).is_some_and(|s| s.mods & OP_SEL_0 != 0));
    let saturate = saturating(c);
    for lane in active_lanes(c.wave.exec()) {
        let random = c.wave.lane32(&i.srcs[1].operand, lane);
        let code = format.encode_stochastic(f32_in(c, &i.srcs[0], lane), random, saturate)?;
        let old = c.wave.lane32(&i.defs[0], lane);
        let shift = 8 * byte;
        c.wave.write_lane32(&i.defs[0], lane, (old & !(0xff << shift)) | u32::from(code) << shift);
    }
    Ok(())
}

/// The conversions' plain forms (the SDWA forms wrap them: `program.rs`).
pub fn handler(name: &str) -> Option<Handler> {
    if name.ends_with("_sdwa") || name.ends_with("_dpp") {
        return None;
    }
    Some(match base_name(name) {
        "V_CVT_F32_FP8" => |c, i| to_f32(c, i, false),
        "V_CVT_F32_BF8" => |c, i| to_f32(c, i, true),
        "V_CVT_PK_F32_FP8" => |c, i| packed_to_f32(c, i, false),
        "V_CVT_PK_F32_BF8" => |c, i| packed_to_f32(c, i, true),
        "V_CVT_PK_FP8_F32" => |c, i| from_f32_packed(c, i, false),
        "V_CVT_PK_BF8_F32" => |c, i| from_f32_packed(c, i, true),
        "V_CVT_SR_FP8_F32" => |c, i| from_f32_stochastic(c, i, false),
        "V_CVT_SR_BF8_F32" => |c, i| from_f32_stochastic(c, i, true),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::Fp8Format::*;

    #[test]
    fn formats_decode_as_their_definitions_say() {
        // Largest finite values, smallest subnormals, NaN and infinity.
        assert_eq!(E4m3Fnuz.decode(0x7f), 240.0);
        assert_eq!(E5m2Fnuz.decode(0x7f), 57344.0);
        assert_eq!(E4m3.decode(0x7e), 448.0);
        assert_eq!(E5m2.decode(0x7b), 57344.0);
        assert_eq!(E4m3Fnuz.decode(0x01), 2f32.powi(-10));
        assert_eq!(E5m2Fnuz.decode(0x01), 2f32.powi(-17));
        assert_eq!(E4m3.decode(0x01), 2f32.powi(-9));
        assert_eq!(E5m2.decode(0x81), -(2f32.powi(-16)));
        assert!(E4m3Fnuz.decode(0x80).is_nan() && E5m2Fnuz.decode(0x80).is_nan());
        assert!(E4m3.decode(0x7f).is_nan() && E4m3.decode(0xff).is_nan());
        assert_eq!(E4m3.decode(0x80), 0.0);
        assert_eq!(E5m2.decode(0xfc), f32::NEG_INFINITY);
        assert!(E5m2.decode(0x7d).is_nan());
        // One: exponent = bias.
        assert_eq!(E4m3Fnuz.decode(0x40), 1.0);
        assert_eq!(E4m3.decode(0x38), 1.0);
        assert_eq!(E5m2Fnuz.decode(0x40), 1.0);
        assert_eq!(E5m2.decode(0x3c), 1.0);
    }

    #[test]
    fn every_finite_encoding_round_trips() {
        for format in [E4m3Fnuz, E5m2Fnuz, E4m3, E5m2] {
            for code in 0..=255u8 {
                let value = format.decode(code);
                if value.is_finite() && !(format.fnuz() && code == 0x80) {
                    let expected = if value == 0.0 && format.fnuz() { 0 } else { code };
                    assert_eq!(format.encode(value, false).unwrap(), expected, "{format:?} {code:#x}");
                }
            }
        }
    }

    #[test]
    fn rounding_overflow_and_signs() {
        // 1.0625 is halfway between 1 and 1.125 in E4M3: ties to even (1.0).
        assert_eq!(E4m3.encode(1.0625, false).unwrap(), 0x38);
        assert_eq!(E4m3.encode(1.1875, false).unwrap(), 0x3a); // between 1.125 and 1.25: to 1.25
        assert_eq!(E4m3.encode(500.0, false).unwrap(), 0x7f); // NaN
        assert_eq!(E4m3.encode(-500.0, true).unwrap(), 0xfe); // -448
        assert_eq!(E5m2.encode(f32::INFINITY, false).unwrap(), 0x7c);
        assert_eq!(E5m2.encode(-1e9, true).unwrap(), 0xfb);
        assert_eq!(E4m3.encode(-0.0, false).unwrap(), 0x80);
        assert_eq!(E4m3Fnuz.encode(-0.0, false).unwrap(), 0x00);
        assert_eq!(E4m3Fnuz.encode(-1e-9, false).unwrap(), 0x00);
        assert_eq!(E4m3Fnuz.encode(f32::NAN, false).unwrap(), 0x80);
        assert!(E4m3Fnuz.encode(241.0, true).is_err());
        assert_eq!(E4m3Fnuz.encode(-240.0, false).unwrap(), 0xff);
    }

    #[test]
    fn narrow_formats_decode_as_their_definitions_say() {
        use super::NarrowFormat::*;
        assert_eq!(E2m3.decode(0x1f), 7.5);
        assert_eq!(E2m3.decode(0x01), 0.125);
        assert_eq!(E2m3.decode(0x28), -1.0);
        assert_eq!(E3m2.decode(0x1f), 28.0);
        assert_eq!(E3m2.decode(0x01), 0.0625);
        assert_eq!(E3m2.decode(0x0c), 1.0);
        assert_eq!(E2m1.decode(0x7), 6.0);
        assert_eq!(E2m1.decode(0x1), 0.5);
        assert_eq!(E2m1.decode(0xa), -1.0);
        assert_eq!(super::e8m0(127), 1.0);
        assert_eq!(super::e8m0(0), 2f64.powi(-127));
        assert!(super::e8m0(0xff).is_nan());
    }

    #[test]
    fn stochastic_rounding_rounds_up_with_the_dropped_fraction() {
        // 1.0625 in E4M3 drops half an ULP: random below half truncates,
        // at or above half rounds up.
        assert_eq!(E4m3.encode_stochastic(1.0625, 0, false).unwrap(), 0x38);
        assert_eq!(E4m3.encode_stochastic(1.0625, 0x7fff_ffff, false).unwrap(), 0x38);
        assert_eq!(E4m3.encode_stochastic(1.0625, 0x8000_0000, false).unwrap(), 0x39);
        assert_eq!(E4m3.encode_stochastic(-1.0625, 0xffff_ffff, false).unwrap(), 0xb9);
        // A carry into the exponent: 1.9375 + half an ULP -> 2.0.
        assert_eq!(E4m3.encode_stochastic(1.9375, 0x8000_0000, false).unwrap(), 0x40);
        // Exact values never move.
        assert_eq!(E5m2Fnuz.encode_stochastic(3.0, 0xffff_ffff, false).unwrap(), E5m2Fnuz.encode(3.0, false).unwrap());
        assert!(E4m3.encode_stochastic(2f32.powi(-8), 0, false).is_err());
    }
}
