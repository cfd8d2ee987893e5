//! The target id of a code object (`gfx90a:sramecc+:xnack-`), from the ELF
//! header's e_flags as the LLVM AMDGPU usage guide defines them.

use std::fmt;

use serde::Serialize;

use crate::error::LoadProblem;

/// `(e_flags mach value, processor name)`: the AMDGPU ELF ABI's table as
/// LLVM 21's ELF.h defines it, with gfx940 and gfx941 (known to LLVM 15-20,
/// reserved since). The table is the file format's, not an LLVM build's:
/// whether this build can decode a processor is the ISA's question.
const PROCESSORS: &[(u32, &str)] = &[
    (0x20, "gfx600"),
    (0x21, "gfx601"),
    (0x22, "gfx700"),
    (0x23, "gfx701"),
    (0x24, "gfx702"),
    (0x25, "gfx703"),
    (0x26, "gfx704"),
    (0x28, "gfx801"),
    (0x29, "gfx802"),
    (0x2a, "gfx803"),
    (0x2b, "gfx810"),
    (0x2c, "gfx900"),
    (0x2d, "gfx902"),
    (0x2e, "gfx904"),
    (0x2f, "gfx906"),
    (0x30, "gfx908"),
    (0x31, "gfx909"),
    (0x32, "gfx90c"),
    (0x33, "gfx1010"),
    (0x34, "gfx1011"),
    (0x35, "gfx1012"),
    (0x36, "gfx1030"),
    (0x37, "gfx1031"),
    (0x38, "gfx1032"),
    (0x39, "gfx1033"),
    (0x3a, "gfx602"),
    (0x3b, "gfx705"),
    (0x3c, "gfx805"),
    (0x3d, "gfx1035"),
    (0x3e, "gfx1034"),
    (0x3f, "gfx90a"),
    (0x40, "gfx940"),
    (0x41, "gfx1100"),
    (0x42, "gfx1013"),
    (0x43, "gfx1150"),
    (0x44, "gfx1103"),
    (0x45, "gfx1036"),
    (0x46, "gfx1101"),
    (0x47, "gfx1102"),
    (0x48, "gfx1200"),
    (0x49, "gfx1250"),
    (0x4a, "gfx1151"),
    (0x4b, "gfx941"),
    (0x4c, "gfx942"),
    (0x4e, "gfx1201"),
    (0x4f, "gfx950"),
    (0x51, "gfx9-generic"),
    (0x52, "gfx10-1-generic"),
    (0x53, "gfx10-3-generic"),
    (0x54, "gfx11-generic"),
    (0x55, "gfx1152"),
    (0x58, "gfx1153"),
    (0x59, "gfx12-generic"),
    (0x5f, "gfx9-4-generic"),
];

const MACH_MASK: u32 = 0xff;
const XNACK_V3: u32 = 0x100;
const SRAMECC_V3: u32 = 0x200;
const XNACK_V4_MASK: u32 = 0x300;
const SRAMECC_V4_MASK: u32 = 0xc00;
/// Code object v6: the generic version of a generic processor (0 for others).
const GENERIC_VERSION_MASK: u32 = 0xff00_0000;
const GENERIC_VERSION_SHIFT: u32 = 24;

/// A target feature setting (`xnack+`, `xnack-`, or neither).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FeatureSetting {
    Unsupported,
    Any,
    Off,
    On,
}

/// A processor with its xnack and sramecc settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TargetId {
    pub processor: String,
    pub xnack: FeatureSetting,
    pub sramecc: FeatureSetting,
    /// Code object v6's generic version of a generic processor
    /// (`gfx9-4-generic`), which the loader checks; 0 for other processors
    /// and older code objects. Not part of the target id's spelling.
    #[serde(skip_serializing_if = "is_zero")]
    pub generic_version: u8,
}

fn is_zero(version: &u8) -> bool {
    *version == 0
}

impl TargetId {
    /// A processor with no feature settings pinned (as a loaded copy is run).
    pub fn processor(processor: &str) -> TargetId {
        TargetId {
            processor: processor.to_string(),
            xnack: FeatureSetting::Any,
            sramecc: FeatureSetting::Any,
            generic_version: 0,
        }
    }

    /// The register files and preamble facts of an instrumented processor
    /// (None: lifted and round-tripped only).
    pub fn model(&self) -> Option<&'static super::processor::Processor> {
        super::processor::Processor::named(&self.processor)
    }

    /// gfx90a's register file: VGPRs and AGPRs in one allocation split at
    /// ACCUM_OFFSET (gfx90a, gfx940-gfx950, gfx9-4-generic).
    pub fn has_unified_register_file(&self) -> bool {
        matches!(self.processor.as_str(), "gfx90a" | "gfx940" | "gfx941" | "gfx942" | "gfx950" | "gfx9-4-generic")
    }

    /// The hardware sets up FLAT_SCRATCH (gfx940 and newer GFX9, GFX11 and
    /// newer): the descriptor has no private segment buffer or flat
    /// scratch init, and ENABLE_PRIVATE_SEGMENT means the scratch wave
    /// offset's SGPR.
    pub fn has_architected_flat_scratch(&self) -> bool {
        matches!(self.processor.as_str(), "gfx940" | "gfx941" | "gfx942" | "gfx950" | "gfx9-4-generic")
            || self.processor.starts_with("gfx11")
            || self.processor.starts_with("gfx12")
    }

    /// Whether the processor is a generic one (`gfx9-4-generic`): code for
    /// every processor of a family, loadable by any of them.
    pub fn is_generic(&self) -> bool {
        self.processor.ends_with("-generic")
    }

    /// Decodes e_flags for a code object of the given version (3 to 6).
    pub fn from_e_flags(e_flags: u32, code_object_version: u32) -> Result<Self, LoadProblem> {
        let mach = e_flags & MACH_MASK;
        if mach == 0 {
            return Err(LoadProblem::NoProcessor);
        }
        let processor = PROCESSORS
            .iter()
            .find(|(value, _)| *value == mach)
            .map(|(_, name)| name.to_string())
            .ok_or(LoadProblem::UnknownProcessor(mach))?;
        let (xnack, sramecc) = if code_object_version == 3 {
            let v3 = |bit| if e_flags & bit != 0 { FeatureSetting::On } else { FeatureSetting::Any };
            (v3(XNACK_V3), v3(SRAMECC_V3))
        } else {
            let v4 = |bits: u32, shift: u32| match (e_flags & bits) >> shift {
                0 => FeatureSetting::Unsupported,
                1 => FeatureSetting::Any,
                2 => FeatureSetting::Off,
                _ => FeatureSetting::On,
            };
            (v4(XNACK_V4_MASK, 8), v4(SRAMECC_V4_MASK, 10))
        };
        let generic_version = if code_object_version >= 6 {
            ((e_flags & GENERIC_VERSION_MASK) >> GENERIC_VERSION_SHIFT) as u8
        } else {
            0
        };
        let target = TargetId { processor, xnack, sramecc, generic_version };
        // The ABI ties the two: a generic processor carries its version, others none.
        if code_object_version >= 6 && target.is_generic() != (generic_version != 0) {
            return Err(LoadProblem::GenericVersion { processor: target.processor, version: generic_version });
        }
        Ok(target)
    }

    /// The LLVM subtarget feature string (`+xnack,-sramecc`) pinning the
    /// settings the code object was compiled with; empty when none are pinned.
    pub fn llvm_features(&self) -> String {
        let mut features = Vec::new();
        for (name, setting) in [("xnack", self.xnack), ("sramecc", self.sramecc)] {
            match setting {
                FeatureSetting::On => features.push(format!("+{name}")),
                FeatureSetting::Off => features.push(format!("-{name}")),
                _ => {}
            }
        }
        features.join(",")
    }

    /// Whether a bundle entry's triple (`hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-`)
    /// can hold a code object the selector picks; a cheap filter applied
    /// before parsing.
    pub fn triple_may_match(triple: &str, selector: &str) -> bool {
        let Some((_, target)) = triple.rsplit_once("--") else {
            return true;
        };
        let mut parts = target.split(':');
        let processor = parts.next().unwrap_or_default();
        let features: Vec<&str> = parts.collect();
        let mut wanted = selector.split(':');
        if wanted.next() != Some(processor) {
            return false;
        }
        // A feature the selector asks for must not be set the other way.
        wanted.all(|feature| {
            let flipped = match feature.strip_suffix('+') {
                Some(name) => format!("{name}-"),
                None => feature.strip_suffix('-').map(|name| format!("{name}+")).unwrap_or_default(),
            };
            !features.contains(&flipped.as_str())
        })
    }

    /// Whether a `--target` selector (`gfx90a`, `gfx90a:xnack-`) picks this target.
    pub fn matches(&self, selector: &str) -> bool {
        let mut parts = selector.split(':');
        if parts.next() != Some(self.processor.as_str()) {
            return false;
        }
        parts.all(|feature| {
            let (name, want) = match feature.strip_suffix('+') {
                Some(name) => (name, FeatureSetting::On),
                None => match feature.strip_suffix('-') {
                    Some(name) => (name, FeatureSetting::Off),
                    None => return false,
                },
            };
            match name {
                "xnack" => self.xnack == want,
                "sramecc" => self.sramecc == want,
                _ => false,
            }
        })
    }
}

impl fmt::Display for TargetId {
    /// The LLVM target id spelling: features in alphabetical order, only
    /// when set on or off.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.processor)?;
        for (name, setting) in [("sramecc", self.sramecc), ("xnack", self.xnack)] {
            match setting {
                FeatureSetting::On => write!(f, ":{name}+")?,
                FeatureSetting::Off => write!(f, ":{name}-")?,
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_v4_feature_bits() {
        // gfx90a, xnack off (0x200), sramecc any (0x400).
        let target = TargetId::from_e_flags(0x3f | 0x200 | 0x400, 4).unwrap();
        assert_eq!(target.processor, "gfx90a");
        assert_eq!(target.xnack, FeatureSetting::Off);
        assert_eq!(target.sramecc, FeatureSetting::Any);
        assert_eq!(target.to_string(), "gfx90a:xnack-");
        assert!(target.matches("gfx90a"));
        assert!(target.matches("gfx90a:xnack-"));
        assert!(!target.matches("gfx90a:xnack+"));
        assert!(!target.matches("gfx908"));
    }

    #[test]
    fn bundle_triples_filter_by_selector() {
        let triple = "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-";
        assert!(TargetId::triple_may_match(triple, "gfx90a"));
        assert!(TargetId::triple_may_match(triple, "gfx90a:xnack-"));
        assert!(!TargetId::triple_may_match(triple, "gfx90a:xnack+"));
        assert!(!TargetId::triple_may_match(triple, "gfx908"));
        assert!(TargetId::triple_may_match("hipv4-amdgcn-amd-amdhsa--gfx90a", "gfx90a:xnack+"));
    }

    #[test]
    fn decodes_v3_feature_bits() {
        let target = TargetId::from_e_flags(0x30 | XNACK_V3, 3).unwrap();
        assert_eq!(target.to_string(), "gfx908:xnack+");
    }

    #[test]
    fn unknown_processor_is_an_error() {
        assert_eq!(TargetId::from_e_flags(0x7e, 4), Err(LoadProblem::UnknownProcessor(0x7e)));
    }

    /// e_flags as LLVM 19's llvm-mc writes them with code object v6.
    #[test]
    fn decodes_v6_generic_targets_and_their_version() {
        let generic = TargetId::from_e_flags(0x0100_0151, 6).unwrap();
        assert_eq!((generic.processor.as_str(), generic.generic_version), ("gfx9-generic", 1));
        assert_eq!(generic.xnack, FeatureSetting::Any);
        assert!(generic.is_generic());
        assert_eq!(generic.to_string(), "gfx9-generic", "the version is not part of the target id");
        let gfx942 = TargetId::from_e_flags(0x0000_054c, 6).unwrap();
        assert_eq!((gfx942.processor.as_str(), gfx942.generic_version), ("gfx942", 0));
        assert_eq!(TargetId::from_e_flags(0x0100_055f, 6).unwrap().processor, "gfx9-4-generic");
        // A generic processor without its version, or a version on a real one: refused.
        assert!(matches!(TargetId::from_e_flags(0x5f, 6), Err(LoadProblem::GenericVersion { .. })));
        assert!(matches!(TargetId::from_e_flags(0x0100_004c, 6), Err(LoadProblem::GenericVersion { .. })));
        // Before v6 the top byte means nothing.
        assert_eq!(TargetId::from_e_flags(0x0100_004c, 5).unwrap().generic_version, 0);
    }
}
