//! Registers as 32-bit units: the granularity liveness works at. A 64-bit
//! pair is two units, a 16-bit half is a partial write of one unit.

use std::fmt;

use crate::stages::lift::Isa;

pub const SGPR_BASE: u16 = 0;
pub const SGPR_COUNT: u16 = 128;
pub const VGPR_BASE: u16 = 128;
pub const VGPR_COUNT: u16 = 256;
pub const AGPR_BASE: u16 = 384;
pub const AGPR_COUNT: u16 = 256;
pub const TTMP_BASE: u16 = 640;
pub const TTMP_COUNT: u16 = 16;

/// The special registers, in unit order after the TTMPs.
pub const SPECIALS: [&str; 15] = [
    "VCC_LO",
    "VCC_HI",
    "EXEC_LO",
    "EXEC_HI",
    "SCC",
    "M0",
    "MODE",
    "FLAT_SCR_LO",
    "FLAT_SCR_HI",
    "XNACK_MASK_LO",
    "XNACK_MASK_HI",
    "TBA_LO",
    "TBA_HI",
    "TMA_LO",
    "TMA_HI",
];
pub const SPECIAL_BASE: u16 = 656;
pub const UNIT_COUNT: usize = SPECIAL_BASE as usize + SPECIALS.len();
const WORDS: usize = UNIT_COUNT.div_ceil(64);
// Each file on whole words (`UnitSet::in_file` copies words).
const _: () = assert!(VGPR_BASE.is_multiple_of(64) && AGPR_BASE.is_multiple_of(64) && TTMP_BASE.is_multiple_of(64));

/// One 32-bit register unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Unit(pub u16);

impl Unit {
    pub fn sgpr(index: u16) -> Unit {
        Unit(SGPR_BASE + index)
    }
    pub fn vgpr(index: u16) -> Unit {
        Unit(VGPR_BASE + index)
    }
    pub fn agpr(index: u16) -> Unit {
        Unit(AGPR_BASE + index)
    }
    pub fn special(name: &str) -> Unit {
        let index = SPECIALS.iter().position(|s| *s == name).unwrap_or_else(|| panic!("no special register {name}"));
        Unit(SPECIAL_BASE + index as u16)
    }

    pub fn file(self) -> RegisterFile {
        match self.0 {
            n if n < VGPR_BASE => RegisterFile::Sgpr,
            n if n < AGPR_BASE => RegisterFile::Vgpr,
            n if n < TTMP_BASE => RegisterFile::Agpr,
            _ => RegisterFile::Special,
        }
    }

    /// Index within its file (s4 -> 4).
    pub fn index(self) -> u16 {
        match self.file() {
            RegisterFile::Sgpr => self.0 - SGPR_BASE,
            RegisterFile::Vgpr => self.0 - VGPR_BASE,
            RegisterFile::Agpr => self.0 - AGPR_BASE,
            RegisterFile::Special => self.0,
        }
    }

    /// Vector units hold one value per lane.
    pub fn is_vector(self) -> bool {
        matches!(self.file(), RegisterFile::Vgpr | RegisterFile::Agpr)
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.file() {
            RegisterFile::Sgpr => write!(f, "s{}", self.index()),
            RegisterFile::Vgpr => write!(f, "v{}", self.index()),
            RegisterFile::Agpr => write!(f, "a{}", self.index()),
            RegisterFile::Special if self.0 < SPECIAL_BASE => write!(f, "ttmp{}", self.0 - TTMP_BASE),
            RegisterFile::Special => f.write_str(&SPECIALS[(self.0 - SPECIAL_BASE) as usize].to_ascii_lowercase()),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RegisterFile {
    Sgpr,
    Vgpr,
    Agpr,
    Special,
}

/// A set of units (a fixed bitset).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UnitSet([u64; WORDS]);

impl UnitSet {
    pub const EMPTY: UnitSet = UnitSet([0; WORDS]);

    /// Every unit a register can be: SGPRs up to s105 (no processor has
    /// more, and LLVM names none past it).
    pub fn all() -> UnitSet {
        let mut set = UnitSet::EMPTY;
        for unit in 0..UNIT_COUNT as u16 {
            if !(SGPR_BASE + 106..SGPR_BASE + SGPR_COUNT).contains(&unit) {
                set.insert(Unit(unit));
            }
        }
        set
    }

    /// Every register code for `generation` can name: GFX9 addresses
    /// s0-s101 (the SGPRs after hold FLAT_SCRATCH and XNACK_MASK, named so),
    /// RDNA s0-s105. What unknown code may read or write.
    pub fn every_register(generation: crate::stages::lift::isa::Generation) -> UnitSet {
        let mut set = UnitSet::all();
        if generation.is_gfx9() {
            for sgpr in crate::stages::load::allocation::MAX_SGPRS..106 {
                set.remove(Unit::sgpr(sgpr));
            }
        }
        set
    }

    pub fn insert(&mut self, unit: Unit) {
        self.0[unit.0 as usize / 64] |= 1 << (unit.0 % 64);
    }

    pub fn remove(&mut self, unit: Unit) {
        self.0[unit.0 as usize / 64] &= !(1 << (unit.0 % 64));
    }

    pub fn contains(&self, unit: Unit) -> bool {
        self.0[unit.0 as usize / 64] & (1 << (unit.0 % 64)) != 0
    }

    pub fn union(&self, other: &UnitSet) -> UnitSet {
        let mut out = *self;
        out.union_with(other);
        out
    }

    pub fn union_with(&mut self, other: &UnitSet) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a |= b;
        }
    }

    pub fn difference(&self, other: &UnitSet) -> UnitSet {
        let mut out = *self;
        for (a, b) in out.0.iter_mut().zip(&other.0) {
            *a &= !b;
        }
        out
    }

    pub fn intersection(&self, other: &UnitSet) -> UnitSet {
        let mut out = *self;
        for (a, b) in out.0.iter_mut().zip(&other.0) {
            *a &= b;
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn iter(&self) -> impl Iterator<Item = Unit> + '_ {
        self.0.iter().enumerate().flat_map(|(word, &bits)| {
            let mut rest = bits;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let bit = rest.trailing_zeros() as usize;
                    rest &= rest - 1;
                    Unit((word * 64 + bit) as u16)
                })
            })
        })
    }

    /// The words of a file (each file starts and ends on a word boundary).
    fn words_of(file: RegisterFile) -> std::ops::Range<usize> {
        let (base, end) = match file {
            RegisterFile::Sgpr => (SGPR_BASE, VGPR_BASE),
            RegisterFile::Vgpr => (VGPR_BASE, AGPR_BASE),
            RegisterFile::Agpr => (AGPR_BASE, TTMP_BASE),
            RegisterFile::Special => (TTMP_BASE, (WORDS * 64) as u16),
        };
        usize::from(base) / 64..usize::from(end) / 64
    }

    /// The units of one file.
    pub fn in_file(&self, file: RegisterFile) -> UnitSet {
        let mut out = UnitSet::EMPTY;
        let words = UnitSet::words_of(file);
        out.0[words.clone()].copy_from_slice(&self.0[words]);
        out
    }

    pub fn count_in(&self, file: RegisterFile) -> usize {
        self.0[UnitSet::words_of(file)].iter().map(|w| w.count_ones() as usize).sum()
    }

    /// `[first, first + count)` of a file.
    pub fn range(file: RegisterFile, first: u16, count: u16) -> UnitSet {
        let base = match file {
            RegisterFile::Sgpr => SGPR_BASE,
            RegisterFile::Vgpr => VGPR_BASE,
            RegisterFile::Agpr => AGPR_BASE,
            RegisterFile::Special => SPECIAL_BASE,
        };
        let mut set = UnitSet::EMPTY;
        for index in first..first + count {
            set.insert(Unit(base + index));
        }
        set
    }
}

impl FromIterator<Unit> for UnitSet {
    fn from_iter<I: IntoIterator<Item = Unit>>(iter: I) -> Self {
        let mut set = UnitSet::EMPTY;
        for unit in iter {
            set.insert(unit);
        }
        set
    }
}

impl fmt::Debug for UnitSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{}}}", self)
    }
}

impl fmt::Display for UnitSet {
    /// Compact: `s[0:5], s8, v[0:3], exec_lo, exec_hi, scc`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        let units: Vec<Unit> = self.iter().collect();
        let mut i = 0;
        while i < units.len() {
            let unit = units[i];
            let mut j = i;
            if unit.file() != RegisterFile::Special {
                while j + 1 < units.len() && units[j + 1].0 == units[j].0 + 1 && units[j + 1].file() == unit.file() {
                    j += 1;
                }
            }
            if j > i {
                let prefix = match unit.file() {
                    RegisterFile::Sgpr => "s",
                    RegisterFile::Vgpr => "v",
                    _ => "a",
                };
                parts.push(format!("{prefix}[{}:{}]", unit.index(), units[j].index()));
            } else {
                parts.push(unit.to_string());
            }
            i = j + 1;
        }
        f.write_str(&parts.join(", "))
    }
}

/// The units of every LLVM register, and whether writing it covers them
/// only partly (16-bit halves).
pub struct RegisterUnits {
    units: Vec<Vec<Unit>>,
    partial: Vec<bool>,
}

/// Read-only views of registers (`src_vccz` reads VCC).
const VIEWS: [(&str, &[&str]); 3] =
    [("SRC_VCCZ", &["VCC_LO", "VCC_HI"]), ("SRC_EXECZ", &["EXEC_LO", "EXEC_HI"]), ("SRC_SCC", &["SCC"])];

/// Registers with two 32-bit halves.
const PAIRS: [(&str, &str, &str); 6] = [
    ("VCC", "VCC_LO", "VCC_HI"),
    ("EXEC", "EXEC_LO", "EXEC_HI"),
    ("FLAT_SCR", "FLAT_SCR_LO", "FLAT_SCR_HI"),
    ("XNACK_MASK", "XNACK_MASK_LO", "XNACK_MASK_HI"),
    ("TBA", "TBA_LO", "TBA_HI"),
    ("TMA", "TMA_LO", "TMA_HI"),
];

fn numbered(token: &str) -> Option<Unit> {
    for (prefix, base, count) in [
        ("SGPR", SGPR_BASE, SGPR_COUNT),
        ("VGPR", VGPR_BASE, VGPR_COUNT),
        ("AGPR", AGPR_BASE, AGPR_COUNT),
        ("TTMP", TTMP_BASE, TTMP_COUNT),
    ] {
        if let Some(number) = token.strip_prefix(prefix).and_then(|n| n.parse::<u16>().ok()) {
            return (number < count).then_some(Unit(base + number));
        }
    }
    None
}

/// The units of a (canonical) register name and whether it is a 16-bit half.
pub fn units_of_name(name: &str) -> (Vec<Unit>, bool) {
    let (name, partial) = match name.strip_suffix("_LO16").or_else(|| name.strip_suffix("_HI16")) {
        Some(base) => (base, true),
        None => (name, false),
    };
    if let Some(index) = SPECIALS.iter().position(|s| *s == name) {
        return (vec![Unit(SPECIAL_BASE + index as u16)], partial);
    }
    if let Some((_, lo, hi)) = PAIRS.iter().find(|(whole, _, _)| *whole == name) {
        return (vec![Unit::special(lo), Unit::special(hi)], partial);
    }
    if let Some((_, parts)) = VIEWS.iter().find(|(view, _)| *view == name) {
        return (parts.iter().map(|p| Unit::special(p)).collect(), partial);
    }
    let units: Option<Vec<Unit>> = name.split('_').map(numbered).collect();
    (units.unwrap_or_default(), partial)
}

impl RegisterUnits {
    pub fn new(isa: &Isa) -> Self {
        let count = isa.mc.register_count() as usize;
        let mut units = Vec::with_capacity(count);
        let mut partial = Vec::with_capacity(count);
        for reg in 0..count as u32 {
            let (u, p) = units_of_name(isa.register_name(isa.canonical(reg)));
            units.push(u);
            partial.push(p);
        }
        RegisterUnits { units, partial }
    }

    pub fn units(&self, reg: u32) -> &[Unit] {
        self.units.get(reg as usize).map_or(&[], Vec::as_slice)
    }

    pub fn is_partial(&self, reg: u32) -> bool {
        self.partial.get(reg as usize).copied().unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_units() {
        assert_eq!(units_of_name("SGPR4_SGPR5").0, vec![Unit::sgpr(4), Unit::sgpr(5)]);
        assert_eq!(units_of_name("VGPR0_VGPR1_VGPR2_VGPR3").0.len(), 4);
        assert_eq!(units_of_name("AGPR7").0, vec![Unit::agpr(7)]);
        assert_eq!(units_of_name("VCC").0, vec![Unit::special("VCC_LO"), Unit::special("VCC_HI")]);
        assert_eq!(units_of_name("SRC_SCC").0, vec![Unit::special("SCC")]);
        assert_eq!(units_of_name("VGPR3_HI16"), (vec![Unit::vgpr(3)], true));
        assert!(units_of_name("SRC_SHARED_BASE").0.is_empty());
        assert!(units_of_name("SGPR_NULL").0.is_empty());
    }

    #[test]
    fn files_of_a_set_are_its_units_of_each_file() {
        let mut set = UnitSet::EMPTY;
        for unit in [Unit::sgpr(0), Unit::sgpr(127), Unit::vgpr(0), Unit::vgpr(255), Unit::agpr(3)] {
            set.insert(unit);
        }
        set.insert(Unit::special("SCC"));
        set.insert(Unit(TTMP_BASE + 2));
        let units: Vec<Unit> = set.iter().collect();
        assert_eq!(units.len(), 7);
        assert!(units.windows(2).all(|w| w[0] < w[1]), "in order");
        for file in [RegisterFile::Sgpr, RegisterFile::Vgpr, RegisterFile::Agpr, RegisterFile::Special] {
            let naive: Vec<Unit> = units.iter().copied().filter(|u| u.file() == file).collect();
            assert_eq!(set.in_file(file).iter().collect::<Vec<_>>(), naive, "{file:?}");
            assert_eq!(set.count_in(file), naive.len());
        }
    }

    #[test]
    fn sets_print_compactly() {
        let set: UnitSet =
            [Unit::sgpr(0), Unit::sgpr(1), Unit::sgpr(2), Unit::sgpr(5), Unit::vgpr(0), Unit::special("SCC")]
                .into_iter()
                .collect();
        assert_eq!(set.to_string(), "s[0:2], s5, v0, scc");
        assert_eq!(set.len(), 6);
        assert_eq!(set.count_in(RegisterFile::Sgpr), 4);
        assert_eq!(UnitSet::all().len(), UNIT_COUNT - (SGPR_COUNT as usize - 106));
        assert!(UnitSet::all().contains(Unit::sgpr(105)) && !UnitSet::all().contains(Unit::sgpr(106)));
    }
}
