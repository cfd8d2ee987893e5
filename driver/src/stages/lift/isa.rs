//! One target's instruction set as the lifter sees it: LLVM's MC layer for
//! the processor, LLVM's own real -> pseudo opcode table (generated at build
//! time from the static AMDGPU archives of the LLVM this build uses, by
//! driver/cpp/opcode-table), and register names.

use std::cell::OnceCell;
use std::collections::HashMap;

use thiserror::Error;

use super::flags::{Flag, FlagBits, FlagError};
use super::operand_roles::{OperandRoleError, OperandRoles};
use crate::native::{Mc, McError, OpcodeInfo};
use crate::stages::load::TargetId;

/// The encoding generations gpuinstr decodes: each has its own real ->
/// pseudo table (the encoding families LLVM consults for it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Generation {
    /// gfx900-gfx90c, gfx908, gfx9-generic.
    Gfx9,
    Gfx90a,
    /// gfx940-gfx942, gfx950, gfx9-4-generic (MI300, MI350).
    Gfx940,
    /// RDNA 1 and 2: gfx1010-gfx1036, gfx10-1-generic, gfx10-3-generic.
    Gfx10,
    /// RDNA 3: gfx1100-gfx1153, gfx11-generic.
    Gfx11,
    /// RDNA 4: gfx1200, gfx1201, gfx12-generic (LLVM 21).
    Gfx12,
}

/// Every processor gpuinstr lifts, with its generation.
const PROCESSORS: &[(&str, Generation)] = &[
    ("gfx900", Generation::Gfx9),
    ("gfx902", Generation::Gfx9),
    ("gfx904", Generation::Gfx9),
    ("gfx906", Generation::Gfx9),
    ("gfx908", Generation::Gfx9),
    ("gfx909", Generation::Gfx9),
    ("gfx90c", Generation::Gfx9),
    ("gfx9-generic", Generation::Gfx9),
    ("gfx90a", Generation::Gfx90a),
    ("gfx940", Generation::Gfx940),
    ("gfx941", Generation::Gfx940),
    ("gfx942", Generation::Gfx940),
    ("gfx950", Generation::Gfx940),
    ("gfx9-4-generic", Generation::Gfx940),
    ("gfx1010", Generation::Gfx10),
    ("gfx1011", Generation::Gfx10),
    ("gfx1012", Generation::Gfx10),
    ("gfx1013", Generation::Gfx10),
    ("gfx1030", Generation::Gfx10),
    ("gfx1031", Generation::Gfx10),
    ("gfx1032", Generation::Gfx10),
    ("gfx1033", Generation::Gfx10),
    ("gfx1034", Generation::Gfx10),
    ("gfx1035", Generation::Gfx10),
    ("gfx1036", Generation::Gfx10),
    ("gfx10-1-generic", Generation::Gfx10),
    ("gfx10-3-generic", Generation::Gfx10),
    ("gfx1100", Generation::Gfx11),
    ("gfx1101", Generation::Gfx11),
    ("gfx1102", Generation::Gfx11),
    ("gfx1103", Generation::Gfx11),
    ("gfx1150", Generation::Gfx11),
    ("gfx1151", Generation::Gfx11),
    ("gfx1152", Generation::Gfx11),
    ("gfx1153", Generation::Gfx11),
    ("gfx11-generic", Generation::Gfx11),
    ("gfx1200", Generation::Gfx12),
    ("gfx1201", Generation::Gfx12),
    ("gfx12-generic", Generation::Gfx12),
];

impl Generation {
    /// A processor's generation; None for processors gpuinstr does not lift.
    pub fn of(processor: &str) -> Option<Generation> {
        PROCESSORS.iter().find(|(name, _)| *name == processor).map(|(_, generation)| *generation)
    }

    /// The GFX9 family (wave64 only, what gpuinstr instruments) or RDNA.
    pub fn is_gfx9(self) -> bool {
        matches!(self, Generation::Gfx9 | Generation::Gfx90a | Generation::Gfx940)
    }

    /// This LLVM's real -> pseudo table (built with it; see build.rs), or
    /// None when this LLVM has no encodings of the generation.
    fn opcode_table(self) -> Option<&'static str> {
        let table = match self {
            Generation::Gfx9 => include_str!(concat!(env!("OUT_DIR"), "/opcodes-gfx9.tsv")),
            Generation::Gfx90a => include_str!(concat!(env!("OUT_DIR"), "/opcodes-gfx90a.tsv")),
            Generation::Gfx940 => include_str!(concat!(env!("OUT_DIR"), "/opcodes-gfx940.tsv")),
            Generation::Gfx10 => include_str!(concat!(env!("OUT_DIR"), "/opcodes-gfx10.tsv")),
            Generation::Gfx11 => include_str!(concat!(env!("OUT_DIR"), "/opcodes-gfx11.tsv")),
            Generation::Gfx12 => include_str!(concat!(env!("OUT_DIR"), "/opcodes-gfx12.tsv")),
        };
        table.lines().any(|line| !line.starts_with('#')).then_some(table)
    }
}

/// Where a build that can decode a processor comes from (docs/toolchains.md).
fn newer_llvm_advice(processor: &str) -> &'static str {
    match processor {
        "gfx941" | "gfx942" => "LLVM 17 or newer knows it: use the trixie or sid build (scripts/env.sh trixie)",
        _ => "LLVM 21 knows it: use the sid build (scripts/env.sh sid)",
    }
}

#[derive(Debug, Error)]
pub enum IsaError {
    #[error(
        "gpuinstr lifts the GFX9 family (gfx900-gfx950, gfx9-generic, gfx9-4-generic) and RDNA (gfx1010-gfx1201 and \
         their generic targets); this code object is for {0} (pick another code object with --target)"
    )]
    UnsupportedProcessor(String),
    #[error(
        "this gpuinstr is built against LLVM {}, which does not decode {processor}: {advice}",
        crate::toolchain::LLVM_VERSION
    )]
    ProcessorUnknownToLlvm { processor: String, advice: &'static str },
    #[error(transparent)]
    Mc(#[from] McError),
    #[error(transparent)]
    Flags(#[from] FlagError),
}

/// How a decoded (real) opcode relates to the pseudo opcode MIR uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mapping {
    /// LLVM encodes this pseudo as the decoded real opcode.
    Pseudo(u32),
    /// The decoded opcode is used as is (no pseudo/real split).
    Native,
    /// A real opcode the table has no pseudo for.
    Unmapped,
}

/// Name endings of real (encoding-specific) opcodes.
const REAL_SUFFIXES: [&str; 14] = [
    "_vi",
    "_gfx9",
    "_gfx90a",
    "_gfx940",
    "_gfx10",
    "_gfx11",
    "_si",
    "_ci",
    "_gfx6_gfx7",
    "_gfx8",
    "_gfx90a_acd",
    "_gfx90a_vcd",
    "_gfx940_acd",
    "_gfx940_vcd",
];

pub struct Isa {
    pub target: TargetId,
    pub generation: Generation,
    pub mc: Mc,
    opcode_names: Vec<String>,
    pseudo_of_real: HashMap<u32, u32>,
    infos: Vec<OnceCell<Option<OpcodeInfo>>>,
    register_names: Vec<String>,
    registers_by_name: HashMap<String, u32>,
    opcodes_by_name: HashMap<String, u32>,
    /// Each register's canonical register: the MC-level variants of a
    /// register (FLAT_SCR_LO_vi, TTMP0_vi, SGPR_NULL_gfxpre11) map to the
    /// register MIR and liveness use (FLAT_SCR_LO, TTMP0, SGPR_NULL).
    canonical: Vec<u32>,
    /// SIInstrFlags bits as this LLVM lays them out.
    flag_bits: FlagBits,
}

/// Operand types by role as this LLVM numbers them: found on first use from
/// the descriptions of the GFX9 opcodes, once per process (the instruction
/// descriptions are the same for every processor).
static OPERAND_ROLES: std::sync::OnceLock<Result<OperandRoles, OperandRoleError>> = std::sync::OnceLock::new();

/// Encoding-specific parts of MC register names.
const REGISTER_VARIANTS: [&str; 5] = ["_vi", "_ci", "_gfxpre11", "_gfx11plus", "_gfx9plus"];

/// The opcode table for a processor: `(real, pseudo)` names.
pub fn opcode_table(processor: &str) -> Option<&'static str> {
    Generation::of(processor)?.opcode_table()
}

impl Isa {
    pub fn new(target: &TargetId) -> Result<Self, IsaError> {
        let generation =
            Generation::of(&target.processor).ok_or_else(|| IsaError::UnsupportedProcessor(target.to_string()))?;
        let unknown = || IsaError::ProcessorUnknownToLlvm {
            processor: target.processor.clone(),
            advice: newer_llvm_advice(&target.processor),
        };
        let table = generation.opcode_table().ok_or_else(unknown)?;
        let mc = Mc::new(&target.processor, &target.llvm_features()).map_err(|error| {
            if Mc::knows_processor(&target.processor) {
                IsaError::Mc(error)
            } else {
                unknown()
            }
        })?;
        let opcode_names: Vec<String> = (0..mc.opcode_count()).map(|op| mc.opcode_name(op)).collect();
        let by_name: HashMap<&str, u32> =
            opcode_names.iter().enumerate().map(|(op, name)| (name.as_str(), op as u32)).collect();
        let mut pseudo_of_real = HashMap::new();
        for line in table.lines().filter(|l| !l.starts_with('#')) {
            let mut columns = line.split('\t');
            let (Some(real), Some(pseudo)) = (columns.next(), columns.next()) else {
                continue;
            };
            // Both names come from the same LLVM build; a missing one
            // would mean a different LLVM, and the entry is left out.
            if let (Some(real), Some(pseudo)) = (by_name.get(real), by_name.get(pseudo)) {
                pseudo_of_real.insert(*real, *pseudo);
            }
        }
        let register_names: Vec<String> = (0..mc.register_count()).map(|r| mc.register_name(r)).collect();
        let register_by_name: HashMap<&str, u32> =
            register_names.iter().enumerate().map(|(r, name)| (name.as_str(), r as u32)).collect();
        let canonical = register_names
            .iter()
            .enumerate()
            .map(|(reg, name)| {
                REGISTER_VARIANTS
                    .iter()
                    .filter(|variant| name.contains(*variant))
                    .find_map(|variant| register_by_name.get(name.replacen(variant, "", 1).as_str()).copied())
                    .unwrap_or(reg as u32)
            })
            .collect();
        let flag_bits =
            FlagBits::find(|name| by_name.get(name).and_then(|op| mc.opcode_info(*op)).map(|i| i.target_flags))?;
        let infos = (0..opcode_names.len()).map(|_| OnceCell::new()).collect();
        let registers_by_name = register_names.iter().enumerate().map(|(r, name)| (name.clone(), r as u32)).collect();
        let opcodes_by_name = opcode_names.iter().enumerate().map(|(op, name)| (name.clone(), op as u32)).collect();
        Ok(Isa {
            target: target.clone(),
            generation,
            mc,
            opcode_names,
            pseudo_of_real,
            infos,
            register_names,
            registers_by_name,
            opcodes_by_name,
            canonical,
            flag_bits,
        })
    }

    pub fn opcode_name(&self, opcode: u32) -> &str {
        self.opcode_names.get(opcode as usize).map_or("<unknown opcode>", String::as_str)
    }

    pub fn opcode_by_name(&self, name: &str) -> Option<u32> {
        self.opcodes_by_name.get(name).copied()
    }

    pub fn mapping(&self, real: u32) -> Mapping {
        if let Some(pseudo) = self.pseudo_of_real.get(&real) {
            return Mapping::Pseudo(*pseudo);
        }
        let name = self.opcode_name(real);
        if REAL_SUFFIXES.iter().any(|suffix| name.ends_with(suffix)) {
            Mapping::Unmapped
        } else {
            Mapping::Native
        }
    }

    /// The opcode MIR uses for a decoded opcode (itself when not mapped).
    pub fn pseudo(&self, real: u32) -> u32 {
        match self.mapping(real) {
            Mapping::Pseudo(pseudo) => pseudo,
            _ => real,
        }
    }

    /// Whether an opcode's description carries an SIInstrFlags flag.
    pub fn has_flag(&self, opcode: u32, flag: Flag) -> bool {
        self.info(opcode).is_some_and(|info| self.flag_bits.has(info.target_flags, flag))
    }

    /// What each operand type of this LLVM's instruction descriptions means.
    pub fn operand_roles(&self) -> Result<&OperandRoles, &OperandRoleError> {
        OPERAND_ROLES
            .get_or_init(|| {
                OperandRoles::find(
                    |name| self.opcode_by_name(name).and_then(|op| self.info(op)),
                    |class| u32::try_from(class).map_or(0, |class| self.mc.register_class_bits(class)),
                    // The opcodes of the GFX9 encodings (reals and their
                    // pseudos), whichever ISA asks first: what the emulator
                    // reads, the same in every process. (RDNA's WMMA sources
                    // have types of their own nothing here reads.)
                    [Generation::Gfx9, Generation::Gfx90a, Generation::Gfx940]
                        .into_iter()
                        .filter_map(Generation::opcode_table)
                        .flat_map(str::lines)
                        .filter(|line| !line.starts_with('#'))
                        .flat_map(|line| line.split('\t').take(2))
                        .filter_map(|name| self.opcode_by_name(name))
                        .filter_map(|op| Some((self.opcode_name(op), self.info(op)?))),
                )
            })
            .as_ref()
    }

    pub fn info(&self, opcode: u32) -> Option<&OpcodeInfo> {
        self.infos.get(opcode as usize)?.get_or_init(|| self.mc.opcode_info(opcode)).as_ref()
    }

    /// The canonical register of an MC register (itself for most).
    pub fn canonical(&self, reg: u32) -> u32 {
        self.canonical.get(reg as usize).copied().unwrap_or(reg)
    }

    /// LLVM's TableGen register name ("SGPR0_SGPR1").
    pub fn register_name(&self, reg: u32) -> &str {
        self.register_names.get(reg as usize).map_or("<unknown register>", String::as_str)
    }

    pub fn register_by_name(&self, name: &str) -> Option<u32> {
        self.registers_by_name.get(name).copied()
    }

    /// The register as MIR spells it: `$sgpr0_sgpr1` (canonical).
    pub fn mir_register(&self, reg: u32) -> String {
        format!("${}", self.register_name(self.canonical(reg)).to_ascii_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn isa(processor: &str) -> Isa {
        Isa::new(&TargetId::processor(processor)).unwrap()
    }

    #[test]
    fn real_opcodes_map_to_the_pseudos_llvm_encodes() {
        let isa = isa("gfx90a");
        for (real, pseudo) in [
            ("S_ADD_U32_vi", "S_ADD_U32"),
            ("V_ADD_U32_e32_gfx9", "V_ADD_U32_e32"),
            ("V_ADD_U32_e32_vi", "V_ADD_CO_U32_e32"),
            ("DS_ADD_U32_vi", "DS_ADD_U32_gfx9"),
            ("GLOBAL_LOAD_DWORD_vi", "GLOBAL_LOAD_DWORD"),
            ("V_MFMA_F32_32X32X1F32_gfx90a_vcd", "V_MFMA_F32_32X32X1F32_vgprcd_e64"),
        ] {
            let real = isa.opcode_by_name(real).unwrap();
            assert_eq!(isa.opcode_name(isa.pseudo(real)), pseudo);
        }
    }

    /// The bits found from witnesses are SIDefines.h's of the LLVM in use
    /// (read from the 15.0.6, 17.0.6 and 21.1.8 sources).
    #[test]
    fn flag_bits_found_are_the_ones_llvm_defines() {
        let (flat, ds) = if crate::toolchain::LLVM_MAJOR >= 21 { (24, 25) } else { (22, 23) };
        for processor in ["gfx908", "gfx90a"] {
            let isa = isa(processor);
            for (flag, bit) in [
                (Flag::Salu, 0),
                (Flag::Valu, 1),
                (Flag::Mubuf, 17),
                (Flag::Mtbuf, 18),
                (Flag::Smrd, 19),
                (Flag::Mimg, 20),
                (Flag::Flat, flat),
                (Flag::Ds, ds),
                (Flag::FlatGlobal, 51),
                (Flag::IsMai, 54),
                (Flag::FlatScratch, 56),
                (Flag::IsAtomicNoRet, 57),
                (Flag::IsAtomicRet, 58),
            ] {
                assert_eq!(isa.flag_bits.mask(flag), 1 << bit, "{processor} {flag:?}");
            }
        }
    }

    /// The operand types found from witnesses are SIDefines.h's (15.0.6 and
    /// 17.0.6 number them alike; 21.1.8 renumbered them).
    #[test]
    fn operand_roles_found_are_the_types_llvm_defines() {
        use crate::stages::lift::OperandRole;
        // (INPUT_MODS, REG_IMM_FP64, REG_INLINE_C_FP64, REG_INLINE_AC_FP64, REG_IMM_INT64, REG_INLINE_C_INT64)
        let (mods, fp64, inline_fp64, ac_fp64, int64, inline_int64) =
            if crate::toolchain::LLVM_MAJOR >= 21 { (42, 17, 31, 41, 14, 27) } else { (46, 17, 30, 41, 14, 27) };
        let isa = isa("gfx90a");
        let roles = isa.operand_roles().unwrap();
        assert_eq!(roles.role(mods), OperandRole::InputModifiers);
        for float in [fp64, inline_fp64, ac_fp64] {
            assert_eq!(roles.role(float), OperandRole::Float64, "{float}");
        }
        for integer in [int64, inline_int64] {
            assert_eq!(roles.role(integer), OperandRole::Int64, "{integer}");
        }
        assert_eq!(roles.role(1), OperandRole::Immediate);
        assert_eq!(roles.role(4), OperandRole::PcRelative);
        assert_eq!(roles.role(13), OperandRole::Other, "REG_IMM_INT32");
    }

    #[test]
    fn pseudos_carry_the_implicit_operands() {
        let isa = isa("gfx908");
        let add = isa.pseudo(isa.opcode_by_name("S_ADD_U32_vi").unwrap());
        let scc = isa.register_by_name("SCC").unwrap();
        assert_eq!(isa.info(add).unwrap().implicit_defs, vec![scc as u16]);
        let real = isa.info(isa.opcode_by_name("S_ADD_U32_vi").unwrap()).unwrap();
        // Before LLVM 21 real opcodes lack implicit operands; that is why we map.
        if crate::toolchain::LLVM_MAJOR < 21 {
            assert!(real.implicit_defs.is_empty(), "real opcodes lack implicit operands");
        }
        assert_eq!(isa.mir_register(isa.register_by_name("SGPR0_SGPR1").unwrap()), "$sgpr0_sgpr1");
        for (variant, canonical) in
            [("FLAT_SCR_LO_vi", "FLAT_SCR_LO"), ("TTMP3_vi", "TTMP3"), ("SGPR_NULL_gfxpre11", "SGPR_NULL")]
        {
            let reg = isa.register_by_name(variant).unwrap();
            assert_eq!(isa.register_name(isa.canonical(reg)), canonical);
        }
        let vcc = isa.register_by_name("VCC").unwrap();
        assert_eq!(isa.canonical(vcc), vcc);
    }

    #[test]
    fn other_processors_are_refused_with_a_reason() {
        let error = Isa::new(&TargetId::processor("gfx803")).err().unwrap();
        assert!(error.to_string().contains("gpuinstr lifts the GFX9 family"), "{error}");
        assert!(error.to_string().contains("gfx803"), "{error}");
    }

    /// What each LLVM major decodes: gfx942 from 17, gfx950, RDNA 4 and the
    /// generic targets from 21; a processor this build's LLVM does not know
    /// is refused naming the build that does.
    #[test]
    fn each_llvm_decodes_the_processors_it_knows() {
        let major = crate::toolchain::LLVM_MAJOR;
        for (processor, since) in [
            ("gfx900", 15),
            ("gfx906", 15),
            ("gfx908", 15),
            ("gfx90a", 15),
            ("gfx940", 15),
            ("gfx1030", 15),
            ("gfx1100", 15),
            ("gfx942", 17),
            ("gfx950", 21),
            ("gfx9-4-generic", 21),
            ("gfx9-generic", 21),
            ("gfx1200", 21),
            ("gfx12-generic", 21),
        ] {
            // gfx940 and gfx941 left LLVM with 21.
            let known = major >= since && !(processor == "gfx940" && major >= 21);
            match Isa::new(&TargetId::processor(processor)) {
                Ok(_) => assert!(known, "{processor} decoded by LLVM {major}"),
                Err(error) => {
                    assert!(!known, "{processor}: {error}");
                    assert!(matches!(error, IsaError::ProcessorUnknownToLlvm { .. }), "{processor}: {error}");
                    assert!(error.to_string().contains("scripts/env.sh"), "{error}");
                }
            }
        }
    }
}

/// The suffix-stripping rule the design note measured, kept to compare
/// with LLVM's exact table (docs/lift-and-emit.md reports the numbers).
pub fn suffix_stripping_guess(isa: &Isa, real: u32) -> Option<u32> {
    let name = isa.opcode_name(real);
    let base = ["_gfx90a", "_gfx940", "_gfx9", "_vi", "_alt_gfx9"].iter().find_map(|s| name.strip_suffix(s))?;
    isa.opcode_by_name(base).or_else(|| isa.opcode_by_name(&format!("{base}_e64")))
}

#[cfg(test)]
mod suffix_rule {
    use super::*;

    /// Where the design note's suffix-stripping rule and LLVM's table part.
    #[test]
    fn suffix_stripping_differs_from_llvm_where_gfx9_renamed_instructions() {
        let target = TargetId::processor("gfx90a");
        let isa = Isa::new(&target).unwrap();
        let (mut agree, mut differ, mut no_guess) = (0, Vec::new(), 0);
        for (real, pseudo) in &isa.pseudo_of_real {
            match suffix_stripping_guess(&isa, *real) {
                Some(guess) if guess == *pseudo => agree += 1,
                Some(guess) => differ.push((isa.opcode_name(*real).to_string(), isa.opcode_name(guess).to_string())),
                None => no_guess += 1,
            }
        }
        differ.sort();
        // A rule's pick that LLVM lists as another pseudo of the same
        // encoding (DS_ADD_U32 vs DS_ADD_U32_gfx9) is a choice, not an error.
        let table = opcode_table("gfx90a").expect("gfx90a has a table");
        let alternative = |real: &str, guess: &str| {
            table.lines().any(|l| {
                l.starts_with(&format!("{real}\t"))
                    && l.split('\t').nth(3).is_some_and(|o| o.split(',').any(|a| a == guess))
            })
        };
        let (choices, wrong): (Vec<_>, Vec<_>) = differ.iter().partition(|(real, guess)| alternative(real, guess));
        eprintln!(
            "suffix rule vs LLVM on gfx90a: {agree} agree, {} pick another pseudo of the same encoding, {} wrong, {no_guess} not guessed",
            choices.len(),
            wrong.len()
        );
        for (real, guess) in &wrong {
            eprintln!(
                "  wrong: {real}: rule says {guess}, LLVM says {}",
                isa.opcode_name(isa.pseudo(isa.opcode_by_name(real).unwrap()))
            );
        }
        // The renamed VOP2 carry instructions are where the rule is wrong.
        assert!(differ.iter().any(|(real, guess)| real == "V_ADD_U32_e32_vi" && guess == "V_ADD_U32_e32"));
        assert!(agree > 2000);
    }
}
