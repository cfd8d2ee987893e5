//! The stable register encoding of `gpuinstr::Reg` (hook-sdk/include/gpuinstr/gpuinstr.h).
//!
//! A register is a 32-bit code: bits 31..16 are the kind, bits 15..0 the
//! index within the kind. The encoding never depends on LLVM's register
//! numbers, which change between LLVM builds.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

pub const KIND_SGPR: u32 = 1;
pub const KIND_VGPR: u32 = 2;
pub const KIND_AGPR: u32 = 3;
pub const KIND_TTMP: u32 = 4;
pub const KIND_SPECIAL: u32 = 5;

/// Registers that are not numbered in a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SpecialRegister {
    Exec,
    ExecLo,
    ExecHi,
    Vcc,
    VccLo,
    VccHi,
    Scc,
    M0,
    FlatScratch,
    FlatScratchLo,
    FlatScratchHi,
    Mode,
}

impl SpecialRegister {
    /// All special registers with their index in the encoding and their
    /// names (the header's constant, the assembler's spelling).
    pub const ALL: [(SpecialRegister, u16, &'static str, &'static str); 12] = [
        (SpecialRegister::Exec, 0, "EXEC", "exec"),
        (SpecialRegister::ExecLo, 1, "EXEC_LO", "exec_lo"),
        (SpecialRegister::ExecHi, 2, "EXEC_HI", "exec_hi"),
        (SpecialRegister::Vcc, 3, "VCC", "vcc"),
        (SpecialRegister::VccLo, 4, "VCC_LO", "vcc_lo"),
        (SpecialRegister::VccHi, 5, "VCC_HI", "vcc_hi"),
        (SpecialRegister::Scc, 6, "SCC", "scc"),
        (SpecialRegister::M0, 7, "M0", "m0"),
        (SpecialRegister::FlatScratch, 8, "FLAT_SCRATCH", "flat_scratch"),
        (SpecialRegister::FlatScratchLo, 9, "FLAT_SCRATCH_LO", "flat_scratch_lo"),
        (SpecialRegister::FlatScratchHi, 10, "FLAT_SCRATCH_HI", "flat_scratch_hi"),
        (SpecialRegister::Mode, 11, "MODE", "mode"),
    ];

    fn entry(self) -> (SpecialRegister, u16, &'static str, &'static str) {
        *Self::ALL.iter().find(|e| e.0 == self).expect("every special register is in ALL")
    }

    pub fn index(self) -> u16 {
        self.entry().1
    }

    pub fn header_name(self) -> &'static str {
        self.entry().2
    }

    pub fn assembler_name(self) -> &'static str {
        self.entry().3
    }

    /// Width in bits.
    pub fn width(self) -> u32 {
        match self {
            SpecialRegister::Exec | SpecialRegister::Vcc | SpecialRegister::FlatScratch => 64,
            SpecialRegister::Scc => 1,
            _ => 32,
        }
    }
}

/// A register in gpuinstr's encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Register {
    Sgpr(u16),
    Vgpr(u16),
    Agpr(u16),
    Ttmp(u16),
    Special(SpecialRegister),
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum RegisterError {
    #[error("register code {0:#x} has unknown kind {1}")]
    UnknownKind(u32, u32),
    #[error("register code {0:#x} names no special register")]
    UnknownSpecial(u32),
    #[error("`{0}` is not a register name (expected s4, v0, a1, ttmp2, exec, vcc, scc, m0, ...)")]
    BadName(String),
    #[error("{0} cannot be accessed as a {1}-bit value")]
    Width(Register, u32),
}

impl Register {
    pub fn encode(self) -> u32 {
        let (kind, index) = match self {
            Register::Sgpr(i) => (KIND_SGPR, i),
            Register::Vgpr(i) => (KIND_VGPR, i),
            Register::Agpr(i) => (KIND_AGPR, i),
            Register::Ttmp(i) => (KIND_TTMP, i),
            Register::Special(s) => (KIND_SPECIAL, s.index()),
        };
        (kind << 16) | u32::from(index)
    }

    pub fn decode(code: u32) -> Result<Self, RegisterError> {
        let kind = code >> 16;
        let index = (code & 0xffff) as u16;
        Ok(match kind {
            KIND_SGPR => Register::Sgpr(index),
            KIND_VGPR => Register::Vgpr(index),
            KIND_AGPR => Register::Agpr(index),
            KIND_TTMP => Register::Ttmp(index),
            KIND_SPECIAL => Register::Special(
                SpecialRegister::ALL
                    .iter()
                    .find(|e| e.1 == index)
                    .map(|e| e.0)
                    .ok_or(RegisterError::UnknownSpecial(code))?,
            ),
            other => return Err(RegisterError::UnknownKind(code, other)),
        })
    }
}

impl Register {
    /// The 32-bit registers a `bits`-wide access starting at this register
    /// covers, low first: `s4` with 64 bits is s4, s5; `exec` with 64 bits is
    /// exec_lo, exec_hi. SCC reads and writes as 32 bits (0 or 1).
    pub fn pieces(self, bits: u32) -> Result<Vec<Register>, RegisterError> {
        use SpecialRegister as S;
        let wide = |lo, hi| match bits {
            64 => Ok(vec![Register::Special(lo), Register::Special(hi)]),
            _ => Err(RegisterError::Width(self, bits)),
        };
        match (self, bits) {
            (Register::Special(S::Exec), _) => wide(S::ExecLo, S::ExecHi),
            (Register::Special(S::Vcc), _) => wide(S::VccLo, S::VccHi),
            (Register::Special(S::FlatScratch), _) => wide(S::FlatScratchLo, S::FlatScratchHi),
            (Register::Special(_), 32) => Ok(vec![self]),
            (Register::Special(_), _) => Err(RegisterError::Width(self, bits)),
            (_, 32) => Ok(vec![self]),
            (_, 64) => {
                let next = match self {
                    Register::Sgpr(i) => Register::Sgpr(i + 1),
                    Register::Vgpr(i) => Register::Vgpr(i + 1),
                    Register::Agpr(i) => Register::Agpr(i + 1),
                    Register::Ttmp(i) => Register::Ttmp(i + 1),
                    Register::Special(_) => unreachable!("handled above"),
                };
                Ok(vec![self, next])
            }
            _ => Err(RegisterError::Width(self, bits)),
        }
    }

    /// Vector registers hold one value per lane.
    pub fn is_vector(self) -> bool {
        matches!(self, Register::Vgpr(_) | Register::Agpr(_))
    }
}

impl fmt::Display for Register {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Register::Sgpr(i) => write!(f, "s{i}"),
            Register::Vgpr(i) => write!(f, "v{i}"),
            Register::Agpr(i) => write!(f, "a{i}"),
            Register::Ttmp(i) => write!(f, "ttmp{i}"),
            Register::Special(s) => f.write_str(s.assembler_name()),
        }
    }
}

impl FromStr for Register {
    type Err = RegisterError;

    /// Parses the assembler spelling: `s4`, `v0`, `a1`, `ttmp2`, `exec`, ...
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let lower = text.trim().to_ascii_lowercase();
        if let Some(entry) = SpecialRegister::ALL.iter().find(|e| e.3 == lower) {
            return Ok(Register::Special(entry.0));
        }
        let numbered = |prefix: &str| -> Option<u16> { lower.strip_prefix(prefix)?.parse().ok() };
        if let Some(i) = numbered("ttmp") {
            return Ok(Register::Ttmp(i));
        }
        if let Some(i) = numbered("s") {
            return Ok(Register::Sgpr(i));
        }
        if let Some(i) = numbered("v") {
            return Ok(Register::Vgpr(i));
        }
        if let Some(i) = numbered("a") {
            return Ok(Register::Agpr(i));
        }
        Err(RegisterError::BadName(text.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips() {
        for reg in [
            Register::Sgpr(0),
            Register::Sgpr(105),
            Register::Vgpr(255),
            Register::Agpr(7),
            Register::Ttmp(15),
            Register::Special(SpecialRegister::Exec),
            Register::Special(SpecialRegister::Mode),
        ] {
            assert_eq!(Register::decode(reg.encode()), Ok(reg));
            assert_eq!(reg.to_string().parse::<Register>(), Ok(reg));
        }
        assert_eq!(Register::Sgpr(4).encode(), 0x1_0004);
        assert_eq!(Register::decode(0x9_0000), Err(RegisterError::UnknownKind(0x9_0000, 9)));
        assert!("q3".parse::<Register>().is_err());
    }

    #[test]
    fn wide_accesses_split_into_32_bit_pieces() {
        use SpecialRegister as S;
        assert_eq!(Register::Sgpr(4).pieces(64), Ok(vec![Register::Sgpr(4), Register::Sgpr(5)]));
        assert_eq!(Register::Vgpr(7).pieces(32), Ok(vec![Register::Vgpr(7)]));
        assert_eq!(
            Register::Special(S::Exec).pieces(64),
            Ok(vec![Register::Special(S::ExecLo), Register::Special(S::ExecHi)])
        );
        assert_eq!(Register::Special(S::Scc).pieces(32), Ok(vec![Register::Special(S::Scc)]));
        assert!(Register::Special(S::Exec).pieces(32).is_err());
        assert!(Register::Special(S::M0).pieces(64).is_err());
        assert!(Register::Sgpr(0).pieces(16).is_err());
    }

    /// The header's `RegKind` values and special-register constants must
    /// match this encoding exactly: tools compiled against the header talk
    /// to a driver built from this file.
    #[test]
    fn header_matches_encoding() {
        let header = include_str!("../../hook-sdk/include/gpuinstr/gpuinstr.h");
        for (name, kind) in [
            ("SGPR", KIND_SGPR),
            ("VGPR", KIND_VGPR),
            ("AGPR", KIND_AGPR),
            ("TTMP", KIND_TTMP),
            ("Special", KIND_SPECIAL),
        ] {
            assert!(header.contains(&format!("  {name} = {kind},")), "RegKind::{name} is not {kind} in gpuinstr.h");
        }
        for (_, index, header_name, _) in SpecialRegister::ALL {
            let line = format!("constexpr Reg {header_name} = makeReg(RegKind::Special, {index});");
            assert!(header.contains(&line), "gpuinstr.h lacks `{line}`");
        }
        let declared = header.matches("makeReg(RegKind::Special,").count();
        assert_eq!(declared, SpecialRegister::ALL.len(), "gpuinstr.h declares special registers the table lacks");
    }
}
