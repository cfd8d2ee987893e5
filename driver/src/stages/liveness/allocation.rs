//! The registers a kernel's descriptor allocates, as register units: the
//! counts load reads from the descriptor, given what the code touches.

use super::{RegisterFile, Unit, UnitSet};
use crate::stages::load::allocation::allocated_counts;
use crate::stages::load::{CodeObject, Kernel};

/// Registers allocated to a kernel, per file.
pub struct Allocation {
    pub sgprs: UnitSet,
    pub vgprs: UnitSet,
    pub agprs: UnitSet,
    pub reserved_sgprs: usize,
}

/// The allocation of `kernel`, given the registers its code touches
/// (which decide the SGPRs reserved for VCC and FLAT_SCRATCH).
pub fn allocation(code_object: &CodeObject, kernel: &Kernel, touched: &UnitSet) -> Allocation {
    let touches = |names: &[&str]| names.iter().any(|n| touched.contains(Unit::special(n)));
    let counts =
        allocated_counts(code_object, kernel, touches(&["VCC_LO", "VCC_HI"]), touches(&["FLAT_SCR_LO", "FLAT_SCR_HI"]));
    Allocation {
        sgprs: UnitSet::range(RegisterFile::Sgpr, 0, counts.sgprs),
        vgprs: UnitSet::range(RegisterFile::Vgpr, 0, counts.vgprs),
        agprs: UnitSet::range(RegisterFile::Agpr, 0, counts.agprs),
        reserved_sgprs: counts.reserved_sgprs,
    }
}
