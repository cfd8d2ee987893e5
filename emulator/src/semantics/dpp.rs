//! DPP (data parallel primitives, GFX9): `src0` is read from another lane
//! of the wave through DPP_CTRL, then the plain operation runs. Lanes whose
//! row or bank is masked off are not written; a lane whose source lane is
//! out of range or inactive reads 0 with bound_ctrl, else is not written.

use super::Context;
use crate::error::Fault;
use crate::program::Inst;
use crate::wave::LANES;

/// The lane DPP_CTRL reads for `lane`; None when out of range.
pub fn source_lane(control: u32, lane: usize) -> Result<Option<usize>, Fault> {
    let row = lane & !15;
    let in_row = lane & 15;
    Ok(match control {
        0x000..=0x0ff => Some((lane & !3) | ((control as usize >> (2 * (lane & 3))) & 3)),
        0x101..=0x10f => Some(in_row + (control as usize & 15)).filter(|l| *l < 16).map(|l| row + l),
        0x111..=0x11f => in_row.checked_sub(control as usize & 15).map(|l| row + l),
        0x121..=0x12f => Some(row + (in_row + 16 - (control as usize & 15)) % 16),
        0x130 => Some(lane + 1).filter(|l| *l < LANES),
        0x134 => Some((lane + 1) % LANES),
        0x138 => lane.checked_sub(1),
        0x13c => Some((lane + LANES - 1) % LANES),
        0x140 => Some(row + 15 - in_row),
        0x141 => Some((lane & !7) + 7 - (lane & 7)),
        0x142 => (row >= 16).then(|| row - 1),
        0x143 => (row >= 32).then_some(31),
        other => return Err(Fault::UnimplementedCase(format!("DPP control {other:#x}"))),
    })
}

pub fn execute(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let dpp = i.dpp.as_ref().expect("decoded as DPP");
    let exec = c.wave.exec();
    let mut enabled = 0u64;
    for lane in 0..LANES {
        let masked = dpp.row_mask >> (lane / 16) & 1 == 0 || dpp.bank_mask >> ((lane % 16) / 4) & 1 == 0;
        if exec >> lane & 1 == 0 || masked {
            continue;
        }
        let value = match source_lane(dpp.control, lane)? {
            Some(source) if exec >> source & 1 != 0 => Some(c.wave.lane32(&dpp.source, source)),
            _ if dpp.bound_ctrl => Some(0),
            _ => None,
        };
        if let Some(value) = value {
            c.wave.staged[0][lane] = value;
            enabled |= 1 << lane;
        }
    }
    c.wave.set_exec(enabled);
    let outcome = (dpp.base.handler)(c, &dpp.base);
    c.wave.set_exec(exec);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_pick_the_lanes_the_manual_names() {
        assert_eq!(source_lane(0x1b, 5).unwrap(), Some(6)); // quad_perm:[3,2,1,0]
        assert_eq!(source_lane(0x111, 16).unwrap(), None); // row_shr:1 at a row start
        assert_eq!(source_lane(0x111, 17).unwrap(), Some(16));
        assert_eq!(source_lane(0x101, 15).unwrap(), None); // row_shl:1 at a row end
        assert_eq!(source_lane(0x121, 16).unwrap(), Some(31)); // row_ror:1
        assert_eq!(source_lane(0x140, 17).unwrap(), Some(30)); // row_mirror
        assert_eq!(source_lane(0x142, 20).unwrap(), Some(15)); // row_bcast:15
        assert_eq!(source_lane(0x143, 40).unwrap(), Some(31)); // row_bcast:31
        assert_eq!(source_lane(0x143, 20).unwrap(), None);
        assert_eq!(source_lane(0x138, 0).unwrap(), None); // wave_shr:1
    }
}
