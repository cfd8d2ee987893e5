//! Dot products (`v_dot*`, HIP's `__builtin_amdgcn_[su]dot{2,4,8}` and
//! `fdot2`): the products of the packed elements of two sources, summed
//! with an accumulator. The VOP3P forms (`v_dot4_i32_i8`) add their third
//! source and saturate with clamp; the VOP2 "c" forms (`v_dot4c_i32_i8`,
//! gfx908 and newer) add to their destination. Integer sums are exact
//! (wrapping without clamp); `v_dot2_f32_f16` and gfx950's
//! `v_dot2_f32_bf16` sum the exact products and the f32 accumulator and
//! round once (the hardware's internal rounding is not documented; sums
//! that are exact agree in any model).

use super::{base_name, Context, Handler};
use crate::error::Fault;
use crate::operands::modifiers::{NEG, NEG_HI, OP_SEL_0, OP_SEL_1};
use crate::program::{Inst, Source};
use crate::wave::active_lanes;

/// The packed element kinds.
#[derive(Clone, Copy)]
enum Elements {
    /// (count, bits, signed)
    Integer(u32, u32, bool),
    F16,
    Bf16,
}

impl Elements {
    fn of(name: &str) -> Option<(Elements, bool)> {
        let (base, accumulates) = match name.strip_prefix("V_DOT") {
            Some(rest) => match rest.split_once('C') {
                // V_DOT4C_I32_I8: the "c" form.
                Some((count, tail)) if count.len() == 1 && tail.starts_with('_') => (format!("{count}{tail}"), true),
                _ => (rest.to_string(), false),
            },
            None => return None,
        };
        let elements = match base.as_str() {
            "2_F32_F16" => Elements::F16,
            "2_F32_BF16" => Elements::Bf16,
            "2_I32_I16" => Elements::Integer(2, 16, true),
            "2_U32_U16" => Elements::Integer(2, 16, false),
            "4_I32_I8" => Elements::Integer(4, 8, true),
            "4_U32_U8" => Elements::Integer(4, 8, false),
            "8_I32_I4" => Elements::Integer(8, 4, true),
            "8_U32_U4" => Elements::Integer(8, 4, false),
            _ => return None,
        };
        Some((elements, accumulates))
    }
}

/// A 16-bit float source's element `k` (0 low, 1 high) after the VOP3P
/// modifiers `mods`: op_sel (op_sel_hi) picks the half element 0 (1)
/// reads, neg_lo (neg_hi) negates it.
fn half_element(word: u32, mods: u32, k: usize, brain: bool) -> f64 {
    let (select, negate) = if k == 0 { (OP_SEL_0, NEG) } else { (OP_SEL_1, NEG_HI) };
    let bits = if mods & select != 0 { (word >> 16) as u16 } else { word as u16 };
    let value = if brain { half::bf16::from_bits(bits).to_f64() } else { half::f16::from_bits(bits).to_f64() };
    if mods & negate != 0 {
        -value
    } else {
        value
    }
}

fn dot(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let (elements, accumulates) = Elements::of(base_name(&i.name)).ok_or(Fault::Unimplemented)?;
    let vop3p = !accumulates;
    let clamp = vop3p && i.imm(0) != 0;
    if i.imms.len() > usize::from(vop3p) {
        return Err(super::unsupported_modifier("dot product control"));
    }
    let (a, b) = (&i.srcs[0], &i.srcs[1]);
    match elements {
        // Integer elements are whole words: only the default op_sel_hi.
        Elements::Integer(..) => {
            if i.srcs.iter().any(|s| s.mods & !OP_SEL_1 != 0) {
                return Err(super::unsupported_modifier("dot product source"));
            }
        }
        Elements::F16 | Elements::Bf16 => {
            if accumulates && i.srcs.iter().any(|s| s.mods != 0) {
                return Err(super::unsupported_modifier("dot product source"));
            }
            if c.wave.mode & 0xf != 0 {
                return Err(Fault::UnimplementedCase(format!("rounding mode {:#x}", c.wave.mode & 0xf)));
            }
        }
    }
    for lane in active_lanes(c.wave.exec()) {
        let (x, y) = (c.wave.lane32(&a.operand, lane), c.wave.lane32(&b.operand, lane));
        let accumulator =
            if accumulates { c.wave.lane32(&i.defs[0], lane) } else { c.wave.lane32(&i.srcs[2].operand, lane) };
        let result = match elements {
            Elements::Integer(count, bits, signed) => {
                let element = |word: u32, k: u32| -> i64 {
                    let raw = (word >> (k * bits)) & ((1u32 << bits) - 1);
                    if signed && raw >> (bits - 1) == 1 {
                        i64::from(raw) - (1i64 << bits)
                    } else {
                        i64::from(raw)
                    }
                };
                let start = if signed { i64::from(accumulator as i32) } else { i64::from(accumulator) };
                let sum = (0..count).fold(start, |sum, k| sum + element(x, k) * element(y, k));
                match (clamp, signed) {
                    (true, true) => sum.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32 as u32,
                    (true, false) => sum.clamp(0, i64::from(u32::MAX)) as u32,
                    (false, _) => sum as u32,
                }
            }
            Elements::F16 | Elements::Bf16 => {
                let brain = matches!(elements, Elements::Bf16);
                let mut start = f64::from(f32::from_bits(accumulator));
                if vop3p && i.srcs[2].mods & NEG != 0 {
                    start = -start;
                }
                // The VOP2 forms read both halves in place.
                let mods = |s: &Source| if accumulates { OP_SEL_1 } else { s.mods };
                let products: f64 =
                    (0..2).map(|k| half_element(x, mods(a), k, brain) * half_element(y, mods(b), k, brain)).sum();
                let mut r = (products + start) as f32;
                if clamp {
                    r = if r.is_nan() { 0.0 } else { r.clamp(0.0, 1.0) };
                }
                r.to_bits()
            }
        };
        c.wave.write_lane32(&i.defs[0], lane, result);
    }
    Ok(())
}

pub fn handler(name: &str) -> Option<Handler> {
    if name.ends_with("_sdwa") || name.ends_with("_dpp") {
        return None;
    }
    Elements::of(base_name(name)).map(|_| dot as Handler)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_give_elements_and_forms() {
        assert!(matches!(Elements::of("V_DOT4_I32_I8"), Some((Elements::Integer(4, 8, true), false))));
        assert!(matches!(Elements::of("V_DOT4C_I32_I8"), Some((Elements::Integer(4, 8, true), true))));
        assert!(matches!(Elements::of("V_DOT8_U32_U4"), Some((Elements::Integer(8, 4, false), false))));
        assert!(matches!(Elements::of("V_DOT2C_F32_F16"), Some((Elements::F16, true))));
        assert!(matches!(Elements::of("V_DOT2_F32_BF16"), Some((Elements::Bf16, false))));
        assert!(matches!(Elements::of("V_DOT2C_F32_BF16"), Some((Elements::Bf16, true))));
    }
}
