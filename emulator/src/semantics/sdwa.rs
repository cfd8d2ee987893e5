//! SDWA forms (sub-dword addressing): each source is read through a byte or
//! word select, the plain (e32, or e64 for VOPC) operation runs on the
//! selected values, and the result goes into the selected part of `vdst`.

use super::Context;
use crate::error::Fault;
use crate::wave::LANES;

/// SDWA_SEL: BYTE_0..BYTE_3, WORD_0, WORD_1, DWORD.
const DWORD: u32 = 6;
/// DST_UNUSED: pad with zeros, sign extend the result, keep the old bits.
const UNUSED_SEXT: u32 = 1;
const UNUSED_PRESERVE: u32 = 2;

/// (shift, bits) of a select.
fn field(select: u32) -> Option<(u32, u32)> {
    match select {
        0..=3 => Some((8 * select, 8)),
        4 | 5 => Some((16 * (select - 4), 16)),
        DWORD => Some((0, 32)),
        _ => None,
    }
}

/// The selected part of a source, in the low bits, zero or sign extended.
fn select(value: u32, select: u32, sign_extend: bool) -> Option<u32> {
    let (shift, bits) = field(select)?;
    if bits == 32 {
        return Some(value);
    }
    let part = (value >> shift) & ((1 << bits) - 1);
    Some(if sign_extend && part >> (bits - 1) & 1 == 1 { part | !((1 << bits) - 1) } else { part })
}

/// The result placed in the selected part of the destination.
fn place(result: u32, old: u32, select: u32, unused: u32) -> Option<u32> {
    let (shift, bits) = field(select)?;
    if bits == 32 {
        return Some(result);
    }
    let mask = ((1u32 << bits) - 1) << shift;
    let part = (result << shift) & mask;
    Some(match unused {
        UNUSED_PRESERVE => (old & !mask) | part,
        UNUSED_SEXT if part >> (shift + bits - 1) & 1 == 1 => part | !((1u32 << (shift + bits)) - 1),
        _ => part,
    })
}

pub fn execute(c: &mut Context<'_>, i: &crate::program::Inst) -> Result<(), Fault> {
    let sdwa = i.sdwa.as_ref().expect("decoded as SDWA");
    let unknown = || Fault::UnimplementedCase("an SDWA select outside BYTE_0..DWORD".into());
    let exec = c.wave.exec();
    for (k, (operand, sel, sign_extend)) in sdwa.sources.iter().enumerate() {
        for lane in 0..LANES {
            if exec >> lane & 1 == 1 {
                let value = c.wave.lane32(operand, lane);
                c.wave.staged[k][lane] = select(value, *sel, *sign_extend).ok_or_else(unknown)?;
            }
        }
    }
    let Some((dst_sel, unused)) = sdwa.destination.filter(|(sel, _)| *sel != DWORD) else {
        return (sdwa.base.handler)(c, &sdwa.base);
    };
    let destination = sdwa.base.defs[0];
    let old: Vec<u32> = (0..LANES).map(|lane| c.wave.lane32(&destination, lane)).collect();
    (sdwa.base.handler)(c, &sdwa.base)?;
    for (lane, old) in old.into_iter().enumerate() {
        if exec >> lane & 1 == 1 {
            let result = c.wave.lane32(&destination, lane);
            let value = place(result, old, dst_sel, unused).ok_or_else(unknown)?;
            c.wave.write_lane32_at(&destination, lane, 0, value);
        }
    }
    Ok(())
}

/// An SDWA form with clamp or omod set, or operands the decoder does not
/// recognise.
pub fn unsupported(_: &mut Context<'_>, _: &crate::program::Inst) -> Result<(), Fault> {
    Err(Fault::UnimplementedCase(
        "SDWA with clamp on a float operation or omod, or operands it does not recognise".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selects_and_places_as_the_manual_says() {
        assert_eq!(select(0x8765_4321, 3, false), Some(0x87));
        assert_eq!(select(0x8765_4321, 3, true), Some(0xffff_ff87));
        assert_eq!(select(0x8765_4321, 5, false), Some(0x8765));
        assert_eq!(select(0x8765_4321, 4, true), Some(0x4321));
        assert_eq!(select(0x8765_4321, 6, true), Some(0x8765_4321));
        assert_eq!(place(0x1234_00ff, 0xaaaa_bbbb, 5, 0), Some(0x00ff_0000)); // WORD_1, pad
        assert_eq!(place(0x1234_80ff, 0xaaaa_bbbb, 5, 2), Some(0x80ff_bbbb)); // WORD_1, preserve
        assert_eq!(place(0x0000_0080, 0xaaaa_bbbb, 1, 1), Some(0xffff_8000)); // BYTE_1, sign extend
        assert_eq!(place(0x0000_0080, 0xaaaa_bbbb, 1, 2), Some(0xaaaa_80bb));
    }
}
