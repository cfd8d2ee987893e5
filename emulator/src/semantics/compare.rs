//! VOPC: per-lane comparisons into a lane mask (VCC for the 32-bit form,
//! any SGPR pair for the 64-bit form); the CMPX forms also write EXEC.
//! Lanes that are not active produce 0.

use half::f16;

use super::{base_name, Context, Handler};
use crate::error::Fault;
use crate::operands::modifiers::{ABS, NEG};
use crate::program::{Inst, Source};
use crate::wave::active_lanes;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    F16,
    F32,
    F64,
    I16,
    I32,
    I64,
    U16,
    U32,
    U64,
}

fn kind(text: &str) -> Option<Kind> {
    Some(match text {
        "F16" => Kind::F16,
        "F32" => Kind::F32,
        "F64" => Kind::F64,
        "I16" => Kind::I16,
        "I32" => Kind::I32,
        "I64" => Kind::I64,
        "U16" => Kind::U16,
        "U32" => Kind::U32,
        "U64" => Kind::U64,
        _ => return None,
    })
}

fn float_source(c: &Context<'_>, s: &Source, lane: usize, kind: Kind) -> f64 {
    let mut x = match kind {
        Kind::F16 => f64::from(f16::from_bits(c.wave.lane32(&s.operand, lane) as u16)),
        Kind::F32 => f64::from(f32::from_bits(c.wave.lane32(&s.operand, lane))),
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

/// The float comparison `op` (LT, NGE, ...) of two values.
fn compare_float(op: &str, a: f64, b: f64) -> Option<bool> {
    let unordered = a.is_nan() || b.is_nan();
    Some(match op {
        "F" => false,
        "LT" => a < b,
        "EQ" => a == b,
        "LE" => a <= b,
        "GT" => a > b,
        "LG" => !unordered && a != b,
        "GE" => a >= b,
        "O" => !unordered,
        "U" => unordered,
        "NGE" => unordered || a < b,
        "NLG" => unordered || a == b,
        "NGT" => unordered || a <= b,
        "NLE" => unordered || a > b,
        "NEQ" => a != b,
        "NLT" => unordered || a >= b,
        "TRU" => true,
        _ => return None,
    })
}

fn compare_int<T: Ord>(op: &str, a: T, b: T) -> Option<bool> {
    Some(match op {
        "F" => false,
        "LT" => a < b,
        "EQ" => a == b,
        "LE" => a <= b,
        "GT" => a > b,
        "NE" | "LG" => a != b,
        "GE" => a >= b,
        "T" | "TRU" => true,
        _ => return None,
    })
}

/// One lane's result, or None for an unknown operation.
fn lane_result(c: &Context<'_>, i: &Inst, op: &str, kind: Kind, lane: usize) -> Option<bool> {
    let (s0, s1) = (&i.srcs[0], &i.srcs[1]);
    match kind {
        Kind::F16 | Kind::F32 | Kind::F64 => {
            compare_float(op, float_source(c, s0, lane, kind), float_source(c, s1, lane, kind))
        }
        Kind::I16 => compare_int(op, c.wave.lane32(&s0.operand, lane) as i16, c.wave.lane32(&s1.operand, lane) as i16),
        Kind::U16 => compare_int(op, c.wave.lane32(&s0.operand, lane) as u16, c.wave.lane32(&s1.operand, lane) as u16),
        Kind::I32 => compare_int(op, c.wave.lane32(&s0.operand, lane) as i32, c.wave.lane32(&s1.operand, lane) as i32),
        Kind::U32 => compare_int(op, c.wave.lane32(&s0.operand, lane), c.wave.lane32(&s1.operand, lane)),
        Kind::I64 => compare_int(op, c.wave.lane64(&s0.operand, lane) as i64, c.wave.lane64(&s1.operand, lane) as i64),
        Kind::U64 => compare_int(op, c.wave.lane64(&s0.operand, lane), c.wave.lane64(&s1.operand, lane)),
    }
}

/// IEEE class bits of v_cmp_class: 0 sNaN, 1 qNaN, 2 -inf, 3 -normal,
/// 4 -denormal, 5 -0, 6 +0, 7 +denormal, 8 +normal, 9 +inf.
fn class_bit(bits: u64, exponent_bits: u32, mantissa_bits: u32) -> u32 {
    let mantissa = bits & ((1 << mantissa_bits) - 1);
    let exponent = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1);
    let negative = (bits >> (mantissa_bits + exponent_bits)) & 1 != 0;
    let all_ones = (1 << exponent_bits) - 1;
    if exponent == all_ones {
        if mantissa == 0 {
            return if negative { 2 } else { 9 };
        }
        return if mantissa >> (mantissa_bits - 1) != 0 { 1 } else { 0 };
    }
    match (exponent, mantissa, negative) {
        (0, 0, true) => 5,
        (0, 0, false) => 6,
        (0, _, true) => 4,
        (0, _, false) => 7,
        (_, _, true) => 3,
        (_, _, false) => 8,
    }
}

fn write_mask(c: &mut Context<'_>, i: &Inst, mask: u64, cmpx: bool) {
    match i.defs.first() {
        Some(sdst) => c.wave.write_scalar64(sdst, mask),
        None => c.wave.set_vcc(mask),
    }
    if cmpx {
        c.wave.set_exec(mask);
    }
}

fn execute(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let base = base_name(&i.name);
    let (cmpx, rest) = match base.strip_prefix("V_CMPX_") {
        Some(rest) => (true, rest),
        None => (false, base.strip_prefix("V_CMP_").ok_or(Fault::Unimplemented)?),
    };
    let (op, kind_text) = rest.rsplit_once('_').ok_or(Fault::Unimplemented)?;
    let kind = kind(kind_text).ok_or(Fault::Unimplemented)?;
    let mut mask = 0u64;
    for lane in active_lanes(c.wave.exec()) {
        let result = if op == "CLASS" {
            let classes = c.wave.lane32(&i.srcs[1].operand, lane);
            let bit = match kind {
                Kind::F16 => class_bit(u64::from(c.wave.lane32(&i.srcs[0].operand, lane) as u16), 5, 10),
                Kind::F32 => class_bit(u64::from(c.wave.lane32(&i.srcs[0].operand, lane)), 8, 23),
                _ => class_bit(c.wave.lane64(&i.srcs[0].operand, lane), 11, 52),
            };
            classes >> bit & 1 != 0
        } else {
            lane_result(c, i, op, kind, lane).ok_or(Fault::Unimplemented)?
        };
        mask |= u64::from(result) << lane;
    }
    write_mask(c, i, mask, cmpx);
    Ok(())
}

pub fn handler(name: &str) -> Option<Handler> {
    if name.ends_with("_sdwa") || name.ends_with("_dpp") {
        return None;
    }
    let base = base_name(name);
    let known = base.strip_prefix("V_CMPX_").or_else(|| base.strip_prefix("V_CMP_"))?;
    let (op, kind_text) = known.rsplit_once('_')?;
    kind(kind_text)?;
    let sample = if op == "CLASS" { Some(true) } else { compare_float(op, 0.0, 1.0).or(compare_int(op, 0, 1)) };
    sample.map(|_| execute as Handler)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_unordered_comparisons() {
        assert_eq!(class_bit(f32::NAN.to_bits().into(), 8, 23), 1);
        assert_eq!(class_bit((-0.0f32).to_bits().into(), 8, 23), 5);
        assert_eq!(class_bit(f64::NEG_INFINITY.to_bits(), 11, 52), 2);
        assert_eq!(class_bit(1u64, 11, 52), 7);
        assert_eq!(compare_float("NGE", f64::NAN, 1.0), Some(true));
        assert_eq!(compare_float("LG", f64::NAN, 1.0), Some(false));
        assert_eq!(compare_int("NE", 1, 2), Some(true));
        assert!(handler("V_CMPX_NGT_F64_e64").is_some());
        assert!(handler("V_CMP_BOGUS_F32_e32").is_none());
    }
}
