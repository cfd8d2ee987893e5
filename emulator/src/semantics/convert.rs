//! Conversions between integers, f16, f32 and f64. Float -> integer
//! conversions saturate and turn NaN into 0, as the hardware does.

use half::f16;

use super::{base_name, Context, Handler};
use crate::error::Fault;
use crate::operands::modifiers::{ABS, NEG};
use crate::program::{Inst, Source};
use crate::wave::active_lanes;

/// The source as f64, after neg/abs, read as `kind` ("F16", "F32", "F64").
fn float_in(c: &Context<'_>, s: &Source, lane: usize, kind: &str) -> f64 {
    let mut x = match kind {
        "F16" => f64::from(f16::from_bits(c.wave.lane32(&s.operand, lane) as u16)),
        "F32" => f64::from(f32::from_bits(c.wave.lane32(&s.operand, lane))),
        _ => f64::from_bits(c.wave.lane64(&s.operand, lane)),
    };
    if s.mods & ABS != 0 {
        x = x.abs();
    }
    if s.mods & NEG != 0 {
        x = -x;
    }
    x
}

fn saturate_i32(x: f64) -> u32 {
    if x.is_nan() {
        0
    } else {
        x.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32 as u32
    }
}

fn saturate_u32(x: f64) -> u32 {
    if x.is_nan() {
        0
    } else {
        x.clamp(0.0, f64::from(u32::MAX)) as u32
    }
}

/// Writes a 16-bit result; GFX9 zeroes the destination's high half.
fn write16(c: &mut Context<'_>, i: &Inst, lane: usize, value: u16) {
    c.wave.write_lane32(&i.defs[0], lane, u32::from(value));
}

macro_rules! convert {
    ($from:expr, $to:expr) => {
        |c: &mut Context<'_>, i: &Inst| {
            no_output_modifiers(i)?;
            for lane in active_lanes(c.wave.exec()) {
                let s = &i.srcs[0];
                let value: f64 = match $from {
                    "I32" => f64::from(c.wave.lane32(&s.operand, lane) as i32),
                    "U32" => f64::from(c.wave.lane32(&s.operand, lane)),
                    "I16" => f64::from(c.wave.lane32(&s.operand, lane) as i16),
                    "U16" => f64::from(c.wave.lane32(&s.operand, lane) as u16),
                    kind => float_in(c, s, lane, kind),
                };
                match $to {
                    "F64" => c.wave.write_lane64(&i.defs[0], lane, value.to_bits()),
                    "F32" => c.wave.write_lane32(&i.defs[0], lane, (value as f32).to_bits()),
                    "F16" => write16(c, i, lane, f16::from_f64(value).to_bits()),
                    "I32" => c.wave.write_lane32(&i.defs[0], lane, saturate_i32(value)),
                    "U32" => c.wave.write_lane32(&i.defs[0], lane, saturate_u32(value)),
                    "I16" => {
                        let v = if value.is_nan() { 0 } else { value.clamp(-32768.0, 32767.0) as i16 };
                        write16(c, i, lane, v as u16)
                    }
                    _ => {
                        let v = if value.is_nan() { 0 } else { value.clamp(0.0, 65535.0) as u16 };
                        write16(c, i, lane, v)
                    }
                }
            }
            Ok(())
        }
    };
}

/// Conversions with a VOP3 clamp or omod set are not modelled.
fn no_output_modifiers(i: &Inst) -> Result<(), Fault> {
    if i.name.ends_with("_e64") && i.imms.iter().any(|v| *v != 0) {
        return Err(super::unsupported_modifier("clamp/omod on a conversion"));
    }
    Ok(())
}

fn ubyte(c: &mut Context<'_>, i: &Inst, byte: u32) -> Result<(), Fault> {
    no_output_modifiers(i)?;
    for lane in active_lanes(c.wave.exec()) {
        let v = (c.wave.lane32(&i.srcs[0].operand, lane) >> (8 * byte)) & 0xff;
        c.wave.write_lane32(&i.defs[0], lane, (v as f32).to_bits());
    }
    Ok(())
}

fn f32_to_i32_rounded(c: &mut Context<'_>, i: &Inst, round: fn(f64) -> f64) -> Result<(), Fault> {
    no_output_modifiers(i)?;
    for lane in active_lanes(c.wave.exec()) {
        let x = float_in(c, &i.srcs[0], lane, "F32");
        c.wave.write_lane32(&i.defs[0], lane, saturate_i32(round(x)));
    }
    Ok(())
}

/// Two f32 sources, each rounded by `round`, packed low then high.
fn pack_rounded(c: &mut Context<'_>, i: &Inst, round: fn(f32) -> u16) -> Result<(), Fault> {
    no_output_modifiers(i)?;
    if c.wave.mode & 0xf != 0 {
        return Err(Fault::UnimplementedCase(format!("rounding mode {:#x}", c.wave.mode & 0xf)));
    }
    for lane in active_lanes(c.wave.exec()) {
        let a = float_in(c, &i.srcs[0], lane, "F32") as f32;
        let b = float_in(c, &i.srcs[1], lane, "F32") as f32;
        c.wave.write_lane32(&i.defs[0], lane, u32::from(round(a)) | u32::from(round(b)) << 16);
    }
    Ok(())
}

pub fn handler(name: &str) -> Option<Handler> {
    if name.ends_with("_sdwa") || name.ends_with("_dpp") {
        return None;
    }
    Some(match base_name(name) {
        "V_CVT_F32_I32" => convert!("I32", "F32"),
        "V_CVT_F32_U32" => convert!("U32", "F32"),
        "V_CVT_I32_F32" => convert!("F32", "I32"),
        "V_CVT_U32_F32" => convert!("F32", "U32"),
        "V_CVT_F64_F32" => convert!("F32", "F64"),
        "V_CVT_F32_F64" => convert!("F64", "F32"),
        "V_CVT_I32_F64" => convert!("F64", "I32"),
        "V_CVT_U32_F64" => convert!("F64", "U32"),
        "V_CVT_F64_I32" => convert!("I32", "F64"),
        "V_CVT_F64_U32" => convert!("U32", "F64"),
        "V_CVT_F16_F32" => convert!("F32", "F16"),
        "V_CVT_F32_F16" => convert!("F16", "F32"),
        "V_CVT_F16_U16" => convert!("U16", "F16"),
        "V_CVT_F16_I16" => convert!("I16", "F16"),
        "V_CVT_U16_F16" => convert!("F16", "U16"),
        "V_CVT_I16_F16" => convert!("F16", "I16"),
        "V_CVT_F32_UBYTE0" => |c, i| ubyte(c, i, 0),
        "V_CVT_F32_UBYTE1" => |c, i| ubyte(c, i, 1),
        "V_CVT_F32_UBYTE2" => |c, i| ubyte(c, i, 2),
        "V_CVT_F32_UBYTE3" => |c, i| ubyte(c, i, 3),
        "V_CVT_RPI_I32_F32" => |c, i| f32_to_i32_rounded(c, i, |x| (x + 0.5).floor()),
        "V_CVT_FLR_I32_F32" => |c, i| f32_to_i32_rounded(c, i, f64::floor),
        // gfx950: two f32 rounded to nearest even into bf16 (or f16)
        // halves (what clang 21 emits for `__bf16` conversions and for a
        // pair of `_Float16` ones; its bf16 -> f32 is a shift, and
        // v_cvt_f32_bf16 stays unmodelled until code that uses it can
        // test it).
        "V_CVT_PK_BF16_F32" => |c, i| pack_rounded(c, i, |x| half::bf16::from_f32(x).to_bits()),
        "V_CVT_PK_F16_F32" => |c, i| pack_rounded(c, i, |x| f16::from_f32(x).to_bits()),
        "V_CVT_PKRTZ_F16_F32" => |c, i| {
            // Round toward zero: truncate the f32 -> f16 rounding.
            let rtz = |x: f32| {
                let h = f16::from_f32(x);
                if f32::from(h).abs() > x.abs() && x.is_finite() {
                    f16::from_bits(h.to_bits() - 1)
                } else {
                    h
                }
            };
            for lane in active_lanes(c.wave.exec()) {
                let a = float_in(c, &i.srcs[0], lane, "F32") as f32;
                let b = float_in(c, &i.srcs[1], lane, "F32") as f32;
                let packed = u32::from(rtz(a).to_bits()) | (u32::from(rtz(b).to_bits()) << 16);
                c.wave.write_lane32(&i.defs[0], lane, packed);
            }
            Ok(())
        },
        _ => return None,
    })
}
