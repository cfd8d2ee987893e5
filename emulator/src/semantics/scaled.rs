//! gfx950's scaled conversions (`v_cvt_scalef32_*`): 8-, 6- and 4-bit
//! floats (OCP FP8 E4M3 and BF8 E5M2, FP6 E2M3, BF6 E3M2, FP4 E2M1) from
//! and to f32, f16 and bf16, with an MX block scale.
//!
//! Sources: the CDNA4 ISA guide (the VOP3A opcode pseudocode; section 7.3
//! on the small formats), LLVM's AMDGPU backend (operands, which op_sel
//! bit selects what, as clang 21 encodes its builtins). Only the exponent
//! field of the f32 scale operand counts (an E8M0 value, bias 127):
//! narrowing multiplies by 2^(127-E) (divides by the scale) and rounds
//! once, to nearest even or stochastically; widening multiplies the exact
//! value by 2^(E-127). FP4 and FP6 saturate past their largest value; FP8
//! and BF8 follow MODE.FP16_OVFL as the unscaled conversions do. Element 0
//! takes the low bits. What the guide leaves open stops the run: a scale
//! whose exponent is 0xff (an infinite or NaN scale), a NaN into FP4 or
//! FP6 (no NaN there), a widened value that overflows or is subnormal in
//! its destination, stochastic rounding to a subnormal value.

use super::fp8::{Fp8Format, NarrowFormat, MODE_FP16_OVFL};
use super::{base_name, Context, Handler};
use crate::error::Fault;
use crate::operands::modifiers::{ABS, DST_OP_SEL, NEG, OP_SEL_0};
use crate::program::{Inst, Source};
use crate::wave::active_lanes;

/// A narrow format a scaled conversion reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Narrow {
    Fp8,
    Bf8,
    Fp6,
    Bf6,
    Fp4,
}

impl Narrow {
    fn bits(self) -> u32 {
        match self {
            Narrow::Fp8 | Narrow::Bf8 => 8,
            Narrow::Fp6 | Narrow::Bf6 => 6,
            Narrow::Fp4 => 4,
        }
    }

    fn small(self) -> Option<NarrowFormat> {
        match self {
            Narrow::Fp6 => Some(NarrowFormat::E2m3),
            Narrow::Bf6 => Some(NarrowFormat::E3m2),
            Narrow::Fp4 => Some(NarrowFormat::E2m1),
            Narrow::Fp8 | Narrow::Bf8 => None,
        }
    }

    fn eight(self) -> Option<Fp8Format> {
        match self {
            Narrow::Fp8 => Some(Fp8Format::E4m3),
            Narrow::Bf8 => Some(Fp8Format::E5m2),
            _ => None,
        }
    }

    /// Mantissa bits (for stochastic rounding) and the smallest normal.
    fn mantissa_and_smallest_normal(self) -> (u32, f32) {
        match self {
            Narrow::Fp8 => (3, 2f32.powi(-6)),
            Narrow::Bf8 => (2, 2f32.powi(-14)),
            Narrow::Fp6 => (3, 1.0),
            Narrow::Bf6 => (2, 0.25),
            Narrow::Fp4 => (1, 1.0),
        }
    }

    fn decode(self, code: u32) -> f64 {
        match (self.eight(), self.small()) {
            (Some(eight), _) => f64::from(eight.decode(code as u8)),
            (_, Some(small)) => f64::from(small.decode(code as u8)),
            _ => unreachable!("every format is one or the other"),
        }
    }

    /// The nearest code to `y` (already scaled), ties to the even code.
    fn encode(self, y: f32, saturate_8: bool) -> Result<u32, Fault> {
        if let Some(eight) = self.eight() {
            return eight.encode(y, saturate_8).map(u32::from);
        }
        let small = self.small().expect("not an 8-bit format");
        if y.is_nan() {
            return Err(Fault::UnimplementedCase(format!("a NaN converted to {self:?} (no NaN there; undocumented)")));
        }
        let sign = self.bits() - 1;
        let largest = (1u32 << sign) - 1;
        // Past the largest value (an infinity too): the largest.
        let magnitude = y.abs().min(small.decode(largest as u8));
        let mut best = 0u32;
        for code in 1..=largest {
            let (here, there) = (small.decode(code as u8), small.decode(best as u8));
            let (d_here, d_best) = ((here - magnitude).abs(), (there - magnitude).abs());
            if d_here < d_best || (d_here == d_best && code & 1 == 0) {
                best = code;
            }
        }
        Ok(if y.is_sign_negative() { best | 1 << sign } else { best })
    }

    /// Stochastic rounding: the top bits of `random` added below the
    /// mantissa bits kept, the rest dropped (as the unscaled `v_cvt_sr_*`).
    fn encode_stochastic(self, y: f32, random: u32, saturate_8: bool) -> Result<u32, Fault> {
        if y.is_nan() || y.is_infinite() || y == 0.0 {
            return self.encode(y, saturate_8);
        }
        let (mantissa_bits, smallest_normal) = self.mantissa_and_smallest_normal();
        let dropped = 23 - mantissa_bits;
        let added = (y.to_bits() & 0x7fff_ffff) + (random >> (32 - dropped));
        let truncated = f32::from_bits(added & !((1 << dropped) - 1));
        if y.abs() < smallest_normal || truncated < smallest_normal {
            return Err(Fault::UnimplementedCase(format!(
                "stochastic rounding to a subnormal {self:?} value (undocumented)"
            )));
        }
        self.encode(if y.is_sign_negative() { -truncated } else { truncated }, saturate_8)
    }
}

/// A wide format: what a narrow one comes from or goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wide {
    F32,
    F16,
    Bf16,
}

impl Wide {
    fn value_of(self, bits: u32) -> f32 {
        match self {
            Wide::F32 => f32::from_bits(bits),
            Wide::F16 => half::f16::from_bits(bits as u16).to_f32(),
            Wide::Bf16 => half::bf16::from_bits(bits as u16).to_f32(),
        }
    }

    /// `value` rounded to nearest even in this format; overflow and
    /// subnormal results are undocumented and stop the run.
    fn encode(self, value: f64) -> Result<u32, Fault> {
        let (bits, back, smallest_normal) = match self {
            Wide::F32 => {
                let v = value as f32;
                (v.to_bits(), f64::from(v), f64::from(f32::MIN_POSITIVE))
            }
            Wide::F16 => {
                let v = half::f16::from_f64(value);
                (u32::from(v.to_bits()), v.to_f64(), half::f16::MIN_POSITIVE.to_f64())
            }
            Wide::Bf16 => {
                let v = half::bf16::from_f64(value);
                (u32::from(v.to_bits()), v.to_f64(), half::bf16::MIN_POSITIVE.to_f64())
            }
        };
        if value.is_finite() && back.is_infinite() {
            return Err(Fault::UnimplementedCase(format!("a scaled conversion overflowing {self:?} (undocumented)")));
        }
        if value != 0.0 && value.abs() < smallest_normal {
            return Err(Fault::UnimplementedCase(format!(
                "a scaled conversion to a subnormal {self:?} value (undocumented)"
            )));
        }
        Ok(bits)
    }
}

/// The op_sel bit `k` (0-2: a source's, 3: the destination's).
fn op_sel(i: &Inst, k: usize) -> u32 {
    let bit = match k {
        3 => i.srcs.first().is_some_and(|s| s.mods & DST_OP_SEL != 0),
        _ => i.srcs.get(k).is_some_and(|s| s.mods & OP_SEL_0 != 0),
    };
    u32::from(bit)
}

/// The source byte a widening conversion reads (clang encodes byte b as
/// op_sel[0] = b >> 1, op_sel[1] = b & 1).
fn source_byte(i: &Inst) -> u32 {
    op_sel(i, 0) << 1 | op_sel(i, 1)
}

/// The destination byte a narrowing conversion writes.
fn destination_byte(i: &Inst) -> u32 {
    op_sel(i, 3) << 1 | op_sel(i, 2)
}

/// The power of two the scale operand stands for, as an exponent: only its
/// exponent field counts (E8M0, bias 127).
fn scale_exponent(c: &Context<'_>, s: &Source, lane: usize) -> Result<i32, Fault> {
    let exponent = (c.wave.lane32(&s.operand, lane) >> 23) & 0xff;
    if exponent == 0xff {
        return Err(Fault::UnimplementedCase(
            "a scaled conversion with an infinite or NaN scale (undocumented)".into(),
        ));
    }
    Ok(exponent as i32 - 127)
}

/// A wide value after neg/abs, divided by the scale: exact (a power of
/// two), then in f32 (exact wherever the narrow formats can hold it).
fn scaled_down(value: f32, mods: u32, exponent: i32) -> f32 {
    let mut x = f64::from(value);
    if mods & ABS != 0 {
        x = x.abs();
    }
    if mods & NEG != 0 {
        x = -x;
    }
    (x * 2f64.powi(-exponent)) as f32
}

/// Replaces `width` bits at `at` of `old`.
fn insert(old: u32, value: u32, at: u32, width: u32) -> u32 {
    let mask = ((1u64 << width) - 1) as u32;
    (old & !(mask << at)) | (value & mask) << at
}

/// `V_PRNG_B32`: the next pseudo-random value a stochastic conversion uses
/// for its next element.
fn next_random(x: u32) -> u32 {
    (x << 1) ^ if x >> 31 != 0 { 0xc5 } else { 0 }
}

/// The elements of a packed source: `count` values of `wide`, read from
/// consecutive dwords (two 16-bit values a dword, low half first).
fn wide_elements(c: &Context<'_>, s: &Source, lane: usize, wide: Wide, count: usize) -> Vec<f32> {
    (0..count)
        .map(|e| match wide {
            Wide::F32 => wide.value_of(c.wave.lane32_at(&s.operand, lane, e)),
            Wide::F16 | Wide::Bf16 => {
                let dword = c.wave.lane32_at(&s.operand, lane, e / 2);
                wide.value_of(dword >> (16 * (e % 2)) & 0xffff)
            }
        })
        .collect()
}

/// A conversion's shape: what it reads and writes.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// Two wide values (two f32 sources, or one dword of two halves) into
    /// the narrow codes of one word (8-bit) or one byte (4-bit) of the
    /// destination, the rest kept; `stochastic`: a seed source follows.
    NarrowPair { wide: Wide, narrow: Narrow, separate: bool, stochastic: bool },
    /// One wide value into one byte of the destination, stochastically.
    NarrowOne { wide: Wide, narrow: Narrow },
    /// 32 values into 32 6-bit codes in 6 dwords; `interleaved`: two
    /// sources of 16 f32 each, alternating.
    Narrow32 { wide: Wide, narrow: Narrow, stochastic: bool, interleaved: bool },
    /// Two codes (a source word for 8-bit, a byte for 4-bit) into two wide
    /// values (f32: a register pair; f16/bf16: one dword).
    WidenPair { narrow: Narrow, wide: Wide },
    /// One byte's code into f32, or into one half of the destination (the
    /// other kept) for f16.
    WidenOne { narrow: Narrow, wide: Wide },
    /// 32 6-bit codes from 6 dwords into 32 wide values.
    Widen32 { narrow: Narrow, wide: Wide },
}

fn run(c: &mut Context<'_>, i: &Inst, shape: Shape) -> Result<(), Fault> {
    let saturate = c.wave.mode & MODE_FP16_OVFL != 0;
    let d = &i.defs[0];
    for lane in active_lanes(c.wave.exec()) {
        match shape {
            Shape::NarrowPair { wide, narrow, separate, stochastic } => {
                let scale = &i.srcs[if separate || stochastic { 2 } else { 1 }];
                let exponent = scale_exponent(c, scale, lane)?;
                let (a, b) = if separate {
                    let (a, b) = (&i.srcs[0], &i.srcs[1]);
                    let a = scaled_down(wide.value_of(c.wave.lane32(&a.operand, lane)), a.mods, exponent);
                    (a, scaled_down(wide.value_of(c.wave.lane32(&b.operand, lane)), b.mods, exponent))
                } else {
                    // One dword of two halves, or a register pair of f32
                    // (the stochastic FP4 form).
                    let values = wide_elements(c, &i.srcs[0], lane, wide, 2);
                    (scaled_down(values[0], i.srcs[0].mods, exponent), scaled_down(values[1], i.srcs[0].mods, exponent))
                };
                let (low, high) = if stochastic {
                    let random = c.wave.lane32(&i.srcs[1].operand, lane);
                    (
                        narrow.encode_stochastic(a, random, saturate)?,
                        narrow.encode_stochastic(b, next_random(random), saturate)?,
                    )
                } else {
                    (narrow.encode(a, saturate)?, narrow.encode(b, saturate)?)
                };
                let bits = narrow.bits();
                let pair = low | high << bits;
                let old = c.wave.lane32(d, lane);
                let value = match narrow {
                    Narrow::Fp4 => insert(old, pair, 8 * destination_byte(i), 8),
                    _ => insert(old, pair, 16 * op_sel(i, 3), 16),
                };
                c.wave.write_lane32(d, lane, value);
            }
            Shape::NarrowOne { wide, narrow } => {
                let exponent = scale_exponent(c, &i.srcs[2], lane)?;
                let x = wide_elements(c, &i.srcs[0], lane, wide, 1)[0];
                let random = c.wave.lane32(&i.srcs[1].operand, lane);
                let code = narrow.encode_stochastic(scaled_down(x, i.srcs[0].mods, exponent), random, saturate)?;
                let old = c.wave.lane32(d, lane);
                c.wave.write_lane32(d, lane, insert(old, code, 8 * destination_byte(i), 8));
            }
            Shape::Narrow32 { wide, narrow, stochastic, interleaved } => {
                let scale = &i.srcs[if stochastic || interleaved { 2 } else { 1 }];
                let exponent = scale_exponent(c, scale, lane)?;
                let values: Vec<f32> = if interleaved {
                    let (a, b) =
                        (wide_elements(c, &i.srcs[0], lane, wide, 16), wide_elements(c, &i.srcs[1], lane, wide, 16));
                    a.into_iter().zip(b).flat_map(|(a, b)| [a, b]).collect()
                } else {
                    wide_elements(c, &i.srcs[0], lane, wide, 32)
                };
                let mut random = if stochastic { c.wave.lane32(&i.srcs[1].operand, lane) } else { 0 };
                let mut stream = [0u32; 6];
                for (e, value) in values.into_iter().enumerate() {
                    let y = scaled_down(value, 0, exponent);
                    let code = if stochastic {
                        narrow.encode_stochastic(y, random, saturate)?
                    } else {
                        narrow.encode(y, saturate)?
                    };
                    random = next_random(random);
                    let at = 6 * e as u32;
                    let (dword, shift) = ((at / 32) as usize, at % 32);
                    stream[dword] |= code << shift;
                    if shift > 26 {
                        stream[dword + 1] |= code >> (32 - shift);
                    }
                }
                for (part, dword) in stream.into_iter().enumerate() {
                    c.wave.write_lane32_at(d, lane, part, dword);
                }
            }
            Shape::WidenPair { narrow, wide } => {
                let exponent = scale_exponent(c, &i.srcs[1], lane)?;
                let codes = c.wave.lane32(&i.srcs[0].operand, lane);
                let (low, high) = match narrow {
                    Narrow::Fp4 => {
                        let byte = codes >> (8 * source_byte(i)) & 0xff;
                        (byte & 0xf, byte >> 4)
                    }
                    _ => {
                        let word = codes >> (16 * op_sel(i, 0)) & 0xffff;
                        (word & 0xff, word >> 8)
                    }
                };
                let factor = 2f64.powi(exponent);
                let (low, high) =
                    (wide.encode(narrow.decode(low) * factor)?, wide.encode(narrow.decode(high) * factor)?);
                match wide {
                    Wide::F32 => c.wave.write_lane64(d, lane, u64::from(low) | u64::from(high) << 32),
                    Wide::F16 | Wide::Bf16 => c.wave.write_lane32(d, lane, low | high << 16),
                }
            }
            Shape::WidenOne { narrow, wide } => {
                let exponent = scale_exponent(c, &i.srcs[1], lane)?;
                let code = c.wave.lane32(&i.srcs[0].operand, lane) >> (8 * source_byte(i)) & 0xff;
                let bits = wide.encode(narrow.decode(code) * 2f64.powi(exponent))?;
                match wide {
                    Wide::F32 => c.wave.write_lane32(d, lane, bits),
                    Wide::F16 | Wide::Bf16 => {
                        let old = c.wave.lane32(d, lane);
                        c.wave.write_lane32(d, lane, insert(old, bits, 16 * op_sel(i, 3), 16));
                    }
                }
            }
            Shape::Widen32 { narrow, wide } => {
                let exponent = scale_exponent(c, &i.srcs[1], lane)?;
                let stream: Vec<u32> = (0..6).map(|part| c.wave.lane32_at(&i.srcs[0].operand, lane, part)).collect();
                let factor = 2f64.powi(exponent);
                let mut out = [0u32; 32];
                for (e, slot) in out.iter_mut().enumerate() {
                    let at = 6 * e as u32;
                    let (dword, shift) = ((at / 32) as usize, at % 32);
                    let mut code = stream[dword] >> shift;
                    if shift > 26 {
                        code |= stream[dword + 1] << (32 - shift);
                    }
                    *slot = wide.encode(narrow.decode(code & 0x3f) * factor)?;
                }
                match wide {
                    Wide::F32 => {
                        for (part, value) in out.into_iter().enumerate() {
                            c.wave.write_lane32_at(d, lane, part, value);
                        }
                    }
                    Wide::F16 | Wide::Bf16 => {
                        for part in 0..16 {
                            c.wave.write_lane32_at(d, lane, part, out[2 * part] | out[2 * part + 1] << 16);
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// The shape of a scaled conversion, by its name's part after
/// `V_CVT_SCALEF32_`.
fn shape(operation: &str) -> Option<Shape> {
    use Narrow::*;
    use Wide::*;
    let narrow_of = |name: &str| match name {
        "FP8" => Some(Fp8),
        "BF8" => Some(Bf8),
        "FP6" => Some(Fp6),
        "BF6" => Some(Bf6),
        "FP4" => Some(Fp4),
        _ => None,
    };
    let wide_of = |name: &str| match name {
        "F32" => Some(F32),
        "F16" => Some(F16),
        "BF16" => Some(Bf16),
        _ => None,
    };
    let parts: Vec<&str> = operation.split('_').collect();
    Some(match parts.as_slice() {
        ["PK", to, from] if narrow_of(to).is_some() => {
            let (narrow, wide) = (narrow_of(to)?, wide_of(from)?);
            Shape::NarrowPair { wide, narrow, separate: wide == F32, stochastic: false }
        }
        ["SR", "PK", to, from] => {
            Shape::NarrowPair { wide: wide_of(from)?, narrow: narrow_of(to)?, separate: false, stochastic: true }
        }
        ["SR", to, from] => Shape::NarrowOne { wide: wide_of(from)?, narrow: narrow_of(to)? },
        ["PK", to, from] => Shape::WidenPair { narrow: narrow_of(from)?, wide: wide_of(to)? },
        [to, from] => Shape::WidenOne { narrow: narrow_of(from)?, wide: wide_of(to)? },
        ["2XPK16", to, "F32"] => {
            Shape::Narrow32 { wide: F32, narrow: narrow_of(to)?, stochastic: false, interleaved: true }
        }
        ["SR", "PK32", to, from] => {
            Shape::Narrow32 { wide: wide_of(from)?, narrow: narrow_of(to)?, stochastic: true, interleaved: false }
        }
        ["PK32", to, from] if narrow_of(to).is_some() => {
            Shape::Narrow32 { wide: wide_of(from)?, narrow: narrow_of(to)?, stochastic: false, interleaved: false }
        }
        ["PK32", to, from] => Shape::Widen32 { narrow: narrow_of(from)?, wide: wide_of(to)? },
        _ => return None,
    })
}

/// Every `V_CVT_SCALEF32_*` conversion, by pseudo name.
pub fn handler(name: &str) -> Option<Handler> {
    shape(base_name(name).strip_prefix("V_CVT_SCALEF32_")?)?;
    // A handler is a plain function: the shape is found again by name.
    Some(|c, i| {
        let operation = base_name(&i.name).strip_prefix("V_CVT_SCALEF32_").expect("a scaled conversion");
        run(c, i, shape(operation).expect("a known shape"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_gfx950_scaled_conversion_has_a_shape() {
        let names = [
            "PK_FP8_F32",
            "PK_BF8_F32",
            "SR_FP8_F32",
            "SR_BF8_F32",
            "PK_F32_FP8",
            "PK_F32_BF8",
            "F32_FP8",
            "F32_BF8",
            "PK_FP4_F32",
            "SR_PK_FP4_F32",
            "PK_F32_FP4",
            "PK_FP8_F16",
            "PK_BF8_F16",
            "SR_FP8_F16",
            "SR_BF8_F16",
            "PK_FP8_BF16",
            "PK_BF8_BF16",
            "SR_FP8_BF16",
            "SR_BF8_BF16",
            "PK_F16_FP8",
            "PK_F16_BF8",
            "F16_FP8",
            "F16_BF8",
            "PK_FP4_F16",
            "PK_FP4_BF16",
            "SR_PK_FP4_F16",
            "SR_PK_FP4_BF16",
            "PK_F16_FP4",
            "PK_BF16_FP4",
            "2XPK16_FP6_F32",
            "2XPK16_BF6_F32",
            "SR_PK32_FP6_F32",
            "SR_PK32_BF6_F32",
            "PK32_F32_FP6",
            "PK32_F32_BF6",
            "PK32_FP6_F16",
            "PK32_FP6_BF16",
            "PK32_BF6_F16",
            "PK32_BF6_BF16",
            "SR_PK32_FP6_F16",
            "SR_PK32_FP6_BF16",
            "SR_PK32_BF6_F16",
            "SR_PK32_BF6_BF16",
            "PK32_F16_FP6",
            "PK32_BF16_FP6",
            "PK32_F16_BF6",
            "PK32_BF16_BF6",
            "PK_BF16_FP8",
            "PK_BF16_BF8",
        ];
        assert_eq!(names.len(), 49);
        for name in names {
            assert!(shape(name).is_some(), "{name}");
            assert!(handler(&format!("V_CVT_SCALEF32_{name}_e64")).is_some(), "{name}");
        }
        assert!(matches!(shape("PK_F32_FP4"), Some(Shape::WidenPair { narrow: Narrow::Fp4, wide: Wide::F32 })));
        assert!(matches!(shape("SR_PK_FP4_F32"), Some(Shape::NarrowPair { stochastic: true, separate: false, .. })));
        assert!(matches!(shape("PK32_FP6_F16"), Some(Shape::Narrow32 { interleaved: false, stochastic: false, .. })));
    }

    #[test]
    fn small_formats_round_to_nearest_even_and_saturate() {
        // FP4 E2M1: 0, 0.5, 1, 1.5, 2, 3, 4, 6.
        assert_eq!(Narrow::Fp4.encode(1.25, false).unwrap(), 0x2); // tie: to even 1.0
        assert_eq!(Narrow::Fp4.encode(1.75, false).unwrap(), 0x4); // tie: to even 2.0
        assert_eq!(Narrow::Fp4.encode(5.0, false).unwrap(), 0x6); // tie 4/6: to even 4
        assert_eq!(Narrow::Fp4.encode(100.0, false).unwrap(), 0x7);
        assert_eq!(Narrow::Fp4.encode(f32::NEG_INFINITY, false).unwrap(), 0xf);
        assert_eq!(Narrow::Fp4.encode(0.2, false).unwrap(), 0x0);
        assert!(Narrow::Fp4.encode(f32::NAN, false).is_err());
        // BF6 E3M2's largest, 28; FP6 E2M3's, 7.5.
        assert_eq!(Narrow::Bf6.encode(1000.0, false).unwrap(), 0x1f);
        assert_eq!(Narrow::Fp6.encode(-7.5, false).unwrap(), 0x3f);
        assert_eq!(next_random(0x8000_0001), 0xc7);
        assert_eq!(insert(0xabcd_ef12, 0x76, 0, 8), 0xabcd_ef76);
    }
}
