//! The registers a kernel's descriptor allocates: what instrumented code
//! may use without changing the descriptor, and the most it can grow to.

use super::processor::AgprFile;
use super::{CodeObject, FeatureSetting, Kernel};

/// SGPRs a GFX9 kernel can address.
pub const MAX_SGPRS: u16 = 102;
/// VGPRs (and, separately, AGPRs) a GFX9 kernel can address.
pub const MAX_VGPRS: u16 = 256;

/// Registers allocated to a kernel, per file, as counts from register 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocatedCounts {
    pub sgprs: u16,
    pub vgprs: u16,
    pub agprs: u16,
    /// SGPRs the allocation holds beyond `sgprs` (VCC, XNACK_MASK, FLAT_SCRATCH).
    pub reserved_sgprs: usize,
}

/// What the descriptor allocates. SGPRs: (granulated + 1) * 8, minus the
/// extra SGPRs the allocation also holds (LLVM's getNumExtraSGPRs: 6 when
/// FLAT_SCRATCH is used, else 4 when XNACK is on, else 2 when VCC is used),
/// at most 102. This matches the metadata's `.sgpr_count`, which is the
/// highest SGPR plus one plus the extras. VGPRs: (granulated + 1) times the
/// granule; a unified file (gfx90a, gfx940+) splits at ACCUM_OFFSET into
/// VGPRs and AGPRs; gfx908's AGPR file is allocated like the VGPR file;
/// gfx900 and gfx906 have none. Architected flat scratch reserves 6 always.
///
/// `uses_vcc` and `uses_flat_scratch`: whether the kernel's code names them.
pub fn allocated_counts(
    code_object: &CodeObject,
    kernel: &Kernel,
    uses_vcc: bool,
    uses_flat_scratch: bool,
) -> AllocatedCounts {
    let descriptor = &kernel.descriptor;
    let target = &code_object.target;
    // "xnack any" sets no XNACK feature bit; only an explicit xnack+ reserves.
    let xnack = target.xnack == FeatureSetting::On;
    // Architected flat scratch (gfx940+) always reserves FLAT_SCRATCH's 6.
    let reserved = if uses_flat_scratch || target.has_architected_flat_scratch() {
        6
    } else if xnack {
        4
    } else if uses_vcc {
        2
    } else {
        0
    };
    let sgpr_total = (descriptor.rsrc1("GRANULATED_WAVEFRONT_SGPR_COUNT") as usize + 1) * 8;
    let sgprs = sgpr_total.saturating_sub(reserved).min(MAX_SGPRS as usize) as u16;
    let vgpr_blocks = descriptor.rsrc1("GRANULATED_WORKITEM_VGPR_COUNT") as usize + 1;
    let (vgprs, agprs) = match target.model().map(|p| p.agprs) {
        Some(AgprFile::Unified) => {
            let total = vgpr_blocks * 8;
            let accum = (descriptor.rsrc3_gfx90a("ACCUM_OFFSET") as usize + 1) * 4;
            (accum.min(total), total.saturating_sub(accum))
        }
        Some(AgprFile::Absent) => (vgpr_blocks * 4, 0),
        _ => (vgpr_blocks * 4, vgpr_blocks * 4),
    };
    AllocatedCounts {
        sgprs,
        vgprs: vgprs.min(MAX_VGPRS as usize) as u16,
        agprs: agprs.min(MAX_VGPRS as usize) as u16,
        reserved_sgprs: reserved,
    }
}
