//! Physical registers in payload MIR: their MIR spelling, the liveness unit
//! of an intrinsic's register, and which ones may be copied.

use gpuinstr_intrinsics::sva::{FrameValue, FRAME_VALUES};
use gpuinstr_intrinsics::{IntrinsicError, Register, SpecialRegister};

use crate::stages::liveness::units::{units_of_name, SPECIALS, SPECIAL_BASE, TTMP_BASE};
use crate::stages::liveness::{RegisterFile, Unit};

/// s0-s3 (scratch V#) and s32 (stack pointer): the payload's frame in the
/// AMDGPU calling convention; reserved, so the allocator never uses them.
const FRAME_UNITS: [Unit; 5] = [Unit(0), Unit(1), Unit(2), Unit(3), Unit(32)];

/// The registers that hold a payload's stack frame, which a payload with
/// stack swaps for the instrumentation frame kept in the SVA. With
/// architected flat scratch (gfx940+) scratch is addressed through
/// FLAT_SCRATCH, which the hardware sets and nobody writes: the frame is
/// the stack pointer s32 alone, and s0-s3 are ordinary SGPRs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    units: &'static [Unit],
}

impl Frame {
    pub fn new(architected_flat_scratch: bool) -> Frame {
        Frame { units: if architected_flat_scratch { &FRAME_UNITS[4..] } else { &FRAME_UNITS } }
    }

    pub fn contains(&self, unit: Unit) -> bool {
        self.units.contains(&unit)
    }

    /// `(frame SGPR, its save lane, its instrumentation-frame lane)`.
    pub fn lanes(&self) -> Vec<(u16, u8, u8)> {
        self.units.iter().map(|unit| (unit.index(), self.saved_lane(*unit), Self::frame_lane(*unit))).collect()
    }

    /// The SVA lane the application's value of a frame register is saved
    /// in while a payload runs.
    pub fn saved_lane(&self, unit: Unit) -> u8 {
        match unit.index() {
            32 => lane(FrameValue::ApplicationStackPointer),
            n => lane(FrameValue::ApplicationScratchResource) + n as u8,
        }
    }

    fn frame_lane(unit: Unit) -> u8 {
        match unit.index() {
            32 => lane(FrameValue::StackPointer),
            n => lane(FrameValue::ScratchResource) + n as u8,
        }
    }

    /// How the frame registers are named in messages.
    pub fn describe(&self) -> &'static str {
        if self.units.len() == 1 {
            "s32"
        } else {
            "s0-s3, s32"
        }
    }
}

fn lane(value: FrameValue) -> u8 {
    FRAME_VALUES.iter().find(|e| e.value == value).expect("frame value in the table").first
}

/// Whether a unit is copied into a virtual register rather than pinned:
/// scalar registers whose copies are exact (no lanes), the frame's aside.
pub fn copyable(unit: Unit, frame: Frame) -> bool {
    match unit.file() {
        RegisterFile::Sgpr => !frame.contains(unit),
        RegisterFile::Special => {
            ["VCC_LO", "VCC_HI", "EXEC_LO", "EXEC_HI", "SCC", "M0"].iter().any(|name| Unit::special(name) == unit)
        }
        _ => false,
    }
}

/// `$sgpr4`, `$vgpr0`, `$vcc_lo`, `$scc`.
pub fn mir_name(unit: Unit) -> String {
    match unit.file() {
        RegisterFile::Sgpr => format!("$sgpr{}", unit.index()),
        RegisterFile::Vgpr => format!("$vgpr{}", unit.index()),
        RegisterFile::Agpr => format!("$agpr{}", unit.index()),
        RegisterFile::Special if unit.0 < SPECIAL_BASE => format!("$ttmp{}", unit.0 - TTMP_BASE),
        RegisterFile::Special => format!("${}", SPECIALS[(unit.0 - SPECIAL_BASE) as usize].to_ascii_lowercase()),
    }
}

/// A register as MIR spells it (64-bit specials whole: `$exec`).
pub fn mir_register(register: Register) -> String {
    match register {
        Register::Sgpr(i) => format!("$sgpr{i}"),
        Register::Vgpr(i) => format!("$vgpr{i}"),
        Register::Agpr(i) => format!("$agpr{i}"),
        Register::Ttmp(i) => format!("$ttmp{i}"),
        Register::Special(SpecialRegister::FlatScratch) => "$flat_scr".into(),
        Register::Special(SpecialRegister::FlatScratchLo) => "$flat_scr_lo".into(),
        Register::Special(SpecialRegister::FlatScratchHi) => "$flat_scr_hi".into(),
        Register::Special(special) => format!("${}", special.assembler_name()),
    }
}

/// The liveness unit of a 32-bit register.
pub fn unit_of(register: Register) -> Result<Unit, IntrinsicError> {
    let name = mir_register(register);
    match units_of_mir_name(&name).as_slice() {
        [unit] => Ok(*unit),
        _ => Err(IntrinsicError::Builder(format!("{register} is not a 32-bit register; access its halves"))),
    }
}

/// The units of a MIR physical register name (`$sgpr4_sgpr5`, `$exec`).
pub fn units_of_mir_name(name: &str) -> Vec<Unit> {
    units_of_name(&name.trim_start_matches('$').to_ascii_uppercase()).0
}

/// For a half of EXEC or VCC: the pair's MIR name and both halves.
pub fn pair_of(unit: Unit) -> Option<(&'static str, Unit, Unit)> {
    [("exec", "EXEC_LO", "EXEC_HI"), ("vcc", "VCC_LO", "VCC_HI")].into_iter().find_map(|(pair, lo, hi)| {
        let (lo, hi) = (Unit::special(lo), Unit::special(hi));
        (unit == lo || unit == hi).then_some((pair, lo, hi))
    })
}

/// Physical registers an instruction line defines: explicit defs before
/// ` = ` and `implicit-def` operands.
pub fn defined_registers(line: &str) -> Vec<String> {
    let mut names = Vec::new();
    if let Some((defs, _)) = line.split_once(" = ") {
        for def in defs.split(", ") {
            if let Some(name) = def.split_whitespace().last().filter(|n| n.starts_with('$')) {
                names.push(name.to_string());
            }
        }
    }
    let mut rest = line;
    while let Some(at) = rest.find("implicit-def ") {
        rest = &rest[at + "implicit-def ".len()..];
        let operand = rest.trim_start_matches("dead ").trim_start_matches("early-clobber ");
        let name: String =
            operand.chars().take_while(|c| *c == '$' || c.is_ascii_alphanumeric() || *c == '_').collect();
        if name.starts_with('$') {
            names.push(name);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_units_agree() {
        for unit in [Unit::sgpr(4), Unit::vgpr(255), Unit::agpr(3), Unit::special("VCC_HI"), Unit::special("SCC")] {
            assert_eq!(units_of_mir_name(&mir_name(unit)), vec![unit], "{}", mir_name(unit));
        }
        assert_eq!(mir_name(Unit(TTMP_BASE + 2)), "$ttmp2");
        assert_eq!(units_of_mir_name("$exec"), vec![Unit::special("EXEC_LO"), Unit::special("EXEC_HI")]);
        assert_eq!(unit_of(Register::Special(SpecialRegister::FlatScratchHi)).unwrap(), Unit::special("FLAT_SCR_HI"));
        assert!(unit_of(Register::Special(SpecialRegister::Exec)).is_err());
    }

    #[test]
    fn frame_registers_are_pinned_and_scalars_copied() {
        let frame = Frame::new(false);
        assert!(!copyable(Unit::sgpr(0), frame));
        assert!(!copyable(Unit::sgpr(32), frame));
        assert!(copyable(Unit::sgpr(33), frame));
        assert!(copyable(Unit::special("SCC"), frame));
        assert!(!copyable(Unit::special("MODE"), frame));
        assert!(!copyable(Unit::vgpr(0), frame));
        assert_eq!(frame.lanes(), [(0, 5, 0), (1, 6, 1), (2, 7, 2), (3, 8, 3), (32, 9, 4)]);
        // Architected flat scratch: s32 alone.
        let architected = Frame::new(true);
        assert!(copyable(Unit::sgpr(0), architected));
        assert!(!copyable(Unit::sgpr(32), architected));
        assert_eq!(architected.lanes(), [(32, 9, 4)]);
    }

    #[test]
    fn defs_are_found_in_instruction_lines() {
        assert_eq!(defined_registers("$exec = COPY %4"), vec!["$exec"]);
        assert_eq!(
            defined_registers(
                "%1:sreg_64 = SI_IF killed %20, %bb.2, implicit-def dead $exec, implicit-def dead $scc, implicit $exec"
            ),
            vec!["$exec", "$scc"]
        );
        assert!(defined_registers("S_CMP_LG_U64 %2, killed %18, implicit $scc").is_empty());
        assert_eq!(defined_registers("dead $vcc = V_CMP_EQ_U32_e32 %1, %2, implicit $exec"), vec!["$vcc"]);
    }
}
