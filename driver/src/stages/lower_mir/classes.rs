//! LLVM's AMDGPU register classes, as MIR names them (`sreg_32_xm0_xexec`),
//! with the sub-class relation computed from their members. The MIR builder
//! uses them to give new virtual registers the class an instruction operand
//! demands, and to copy a value into the right class when it is not.

use std::collections::{BTreeSet, HashMap};

use gpuinstr_intrinsics::{RegisterClass, RegisterKind};

use crate::stages::lift::Isa;

pub struct RegisterClasses {
    names: Vec<String>,
    by_name: HashMap<String, usize>,
    members: Vec<BTreeSet<u16>>,
    bits: Vec<u32>,
    /// Whether the target needs 64-bit+ VGPR tuples even-aligned (gfx90a).
    aligned_vgpr_tuples: bool,
}

impl RegisterClasses {
    pub fn new(isa: &Isa) -> RegisterClasses {
        let count = isa.mc.register_class_count();
        let names: Vec<String> = (0..count).map(|c| isa.mc.register_class_name(c).to_ascii_lowercase()).collect();
        let members = (0..count).map(|c| isa.mc.register_class_registers(c).into_iter().collect()).collect();
        let bits = (0..count).map(|c| isa.mc.register_class_bits(c)).collect();
        let by_name = names.iter().enumerate().map(|(i, n)| (n.clone(), i)).collect();
        RegisterClasses {
            names,
            by_name,
            members,
            bits,
            aligned_vgpr_tuples: isa.target.model().is_some_and(|p| p.aligned_vgpr_tuples),
        }
    }

    pub fn name(&self, class: usize) -> &str {
        &self.names[class]
    }

    pub fn exists(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    pub fn bits(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).map(|c| self.bits[*c])
    }

    /// Every register of `class` is in `of` (unknown classes are not).
    pub fn is_subclass(&self, class: &str, of: &str) -> bool {
        match (self.by_name.get(class), self.by_name.get(of)) {
            (Some(a), Some(b)) => a == b || self.members[*a].is_subset(&self.members[*b]),
            _ => false,
        }
    }

    /// Whether a class holds vector registers (VGPRs or AGPRs).
    pub fn is_vector(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        name.starts_with('v') || name.starts_with('a') || name.starts_with("av_")
    }

    /// How many registers the widest VGPR tuple among `classes` spans (1
    /// without tuples): classes that may be VGPRs (`vreg_*`, `av_*`).
    pub fn widest_vgpr_tuple<'a>(&self, classes: impl IntoIterator<Item = &'a String>) -> u16 {
        classes
            .into_iter()
            .filter(|name| name.starts_with("vreg_") || name.starts_with("av_"))
            .filter_map(|name| self.bits(name))
            .map(|bits| u16::try_from(bits / 32).unwrap_or(u16::MAX))
            .max()
            .unwrap_or(1)
            .max(1)
    }

    /// The MIR class for a builder request.
    pub fn for_request(&self, class: RegisterClass) -> Result<String, String> {
        let align = if self.aligned_vgpr_tuples && class.bits > 32 { "_align2" } else { "" };
        let name = match (class.kind, class.bits) {
            (RegisterKind::Scalar, 32) => "sreg_32".to_string(),
            (RegisterKind::Scalar, 64) => "sreg_64".to_string(),
            (RegisterKind::Scalar, bits) => format!("sgpr_{bits}"),
            (RegisterKind::Vector, 32) => "vgpr_32".to_string(),
            (RegisterKind::Vector, bits) => format!("vreg_{bits}{align}"),
            (RegisterKind::Accumulator, 32) => "agpr_32".to_string(),
            (RegisterKind::Accumulator, bits) => format!("areg_{bits}{align}"),
        };
        if self.exists(&name) {
            Ok(name)
        } else {
            Err(format!("no {}-bit {:?} register class", class.bits, class.kind))
        }
    }
}
