//! Where the hardware puts a kernel's inputs: the SGPR blocks its
//! descriptor enables, in hardware order. Patch builds the preamble from
//! this layout and verify checks against it.

use super::descriptor::KernelDescriptor;
use super::processor::Processor;

/// A kernel input SGPR block, in hardware order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Input {
    PrivateSegmentBuffer,
    DispatchPtr,
    QueuePtr,
    KernargSegmentPtr,
    DispatchId,
    FlatScratchInit,
    PrivateSegmentSize,
    /// Kernel arguments the hardware loads after the other user SGPRs
    /// (gfx90a, gfx940+: `KERNARG_PRELOAD_SPEC_LENGTH` dwords).
    PreloadedArguments,
    WorkgroupIdX,
    WorkgroupIdY,
    WorkgroupIdZ,
    WorkgroupInfo,
    PrivateSegmentWaveOffset,
}

/// `(input, enable bit (properties for user SGPRs, rsrc2 for system), size)`.
pub const INPUTS: [(Input, &str, bool, u16); 12] = [
    (Input::PrivateSegmentBuffer, "ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER", true, 4),
    (Input::DispatchPtr, "ENABLE_SGPR_DISPATCH_PTR", true, 2),
    (Input::QueuePtr, "ENABLE_SGPR_QUEUE_PTR", true, 2),
    (Input::KernargSegmentPtr, "ENABLE_SGPR_KERNARG_SEGMENT_PTR", true, 2),
    (Input::DispatchId, "ENABLE_SGPR_DISPATCH_ID", true, 2),
    (Input::FlatScratchInit, "ENABLE_SGPR_FLAT_SCRATCH_INIT", true, 2),
    (Input::PrivateSegmentSize, "ENABLE_SGPR_PRIVATE_SEGMENT_SIZE", true, 1),
    (Input::WorkgroupIdX, "ENABLE_SGPR_WORKGROUP_ID_X", false, 1),
    (Input::WorkgroupIdY, "ENABLE_SGPR_WORKGROUP_ID_Y", false, 1),
    (Input::WorkgroupIdZ, "ENABLE_SGPR_WORKGROUP_ID_Z", false, 1),
    (Input::WorkgroupInfo, "ENABLE_SGPR_WORKGROUP_INFO", false, 1),
    (Input::PrivateSegmentWaveOffset, "ENABLE_PRIVATE_SEGMENT", false, 1),
];

/// Whether the descriptor enables an input (`user`: a user SGPR, enabled in
/// the kernel code properties; else a system SGPR, enabled in rsrc2).
pub fn enabled(descriptor: &KernelDescriptor, name: &str, user: bool) -> bool {
    if user {
        descriptor.property(name) != 0
    } else {
        descriptor.rsrc2(name) != 0
    }
}

/// Where each enabled input is: `(input, first SGPR, count)`. With
/// architected flat scratch `ENABLE_PRIVATE_SEGMENT` sets FLAT_SCRATCH and
/// loads no SGPR (and the private segment buffer and flat scratch init are
/// never enabled). Preloaded arguments follow the user SGPRs the
/// properties enable, before the system SGPRs.
pub fn layout(descriptor: &KernelDescriptor, processor: &Processor) -> Vec<(Input, u16, u16)> {
    let mut next = 0u16;
    let mut out = Vec::new();
    for (input, name, user, size) in INPUTS {
        if input == Input::PrivateSegmentWaveOffset && processor.architected_flat_scratch {
            continue;
        }
        if input == Input::WorkgroupIdX && descriptor.kernarg_preload_length() > 0 {
            let dwords = descriptor.kernarg_preload_length();
            out.push((Input::PreloadedArguments, next, dwords));
            next += dwords;
        }
        if enabled(descriptor, name, user) {
            out.push((input, next, size));
            next += size;
        }
    }
    out
}

/// Whether the hardware loads `input` into a user SGPR (counted in
/// `USER_SGPR_COUNT`).
pub fn is_user(input: Input) -> bool {
    input == Input::PreloadedArguments || INPUTS.iter().any(|(i, _, user, _)| *i == input && *user)
}
