//! What holds a value when a wave of a kernel starts.

use super::{Unit, UnitSet};
use crate::stages::load::descriptor::KernelDescriptor;
use crate::stages::load::kernel_inputs::layout;
use crate::stages::load::processor::Processor;

/// The registers the hardware sets when a wave of the kernel starts: the
/// enabled input SGPRs, the work-item id VGPRs, EXEC (and FLAT_SCRATCH
/// where it is architected). Every other register holds nothing defined
/// there.
pub fn kernel_inputs(descriptor: &KernelDescriptor, processor: &Processor) -> UnitSet {
    let mut inputs = UnitSet::EMPTY;
    for (_, first, count) in layout(descriptor, processor) {
        for part in 0..count {
            inputs.insert(Unit::sgpr(first + part));
        }
    }
    let dimensions = descriptor.rsrc2("ENABLE_VGPR_WORKITEM_ID");
    let vgprs = if processor.packed_work_item_ids { 0 } else { dimensions.min(2) as u16 };
    for v in 0..=vgprs {
        inputs.insert(Unit::vgpr(v));
    }
    inputs.insert(Unit::special("EXEC_LO"));
    inputs.insert(Unit::special("EXEC_HI"));
    if processor.architected_flat_scratch && descriptor.rsrc2("ENABLE_PRIVATE_SEGMENT") != 0 {
        inputs.insert(Unit::special("FLAT_SCR_LO"));
        inputs.insert(Unit::special("FLAT_SCR_HI"));
    }
    inputs
}
