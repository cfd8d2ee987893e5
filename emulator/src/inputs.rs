//! The SGPRs the hardware loads when a wave starts, read from the kernel
//! descriptor's bits as the AMDGPU ABI defines them (AMDGPUUsage,
//! "Initial Kernel Execution State"). Written here from the ABI, not taken
//! from the instrumenter's preamble: the oracle must not share the code it
//! checks. User SGPRs come first, in ABI order, as the descriptor's
//! `kernel_code_properties` enables them; system SGPRs start at
//! `COMPUTE_PGM_RSRC2.USER_SGPR_COUNT`, where the hardware puts them.

use gpuinstr::stages::load::descriptor::KernelDescriptor;

use crate::processor::Processor;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    PrivateSegmentBuffer,
    DispatchPtr,
    QueuePtr,
    KernargSegmentPtr,
    DispatchId,
    FlatScratchInit,
    PrivateSegmentSize,
    WorkgroupIdX,
    WorkgroupIdY,
    WorkgroupIdZ,
    WorkgroupInfo,
    PrivateSegmentWaveOffset,
}

/// `kernel_code_properties` bit, SGPRs: the user SGPRs in ABI order.
const USER: [(Input, u16, u16); 7] = [
    (Input::PrivateSegmentBuffer, 1 << 0, 4),
    (Input::DispatchPtr, 1 << 1, 2),
    (Input::QueuePtr, 1 << 2, 2),
    (Input::KernargSegmentPtr, 1 << 3, 2),
    (Input::DispatchId, 1 << 4, 2),
    (Input::FlatScratchInit, 1 << 5, 2),
    (Input::PrivateSegmentSize, 1 << 6, 1),
];

/// `COMPUTE_PGM_RSRC2` bit: the system SGPRs in ABI order, one each.
const SYSTEM: [(Input, u32); 5] = [
    (Input::WorkgroupIdX, 1 << 7),
    (Input::WorkgroupIdY, 1 << 8),
    (Input::WorkgroupIdZ, 1 << 9),
    (Input::WorkgroupInfo, 1 << 10),
    // ENABLE_PRIVATE_SEGMENT (SCRATCH_EN).
    (Input::PrivateSegmentWaveOffset, 1 << 0),
];

/// `COMPUTE_PGM_RSRC2.USER_SGPR_COUNT`, bits 1-5.
pub fn user_sgpr_count(descriptor: &KernelDescriptor) -> u16 {
    ((descriptor.compute_pgm_rsrc2 >> 1) & 0x1f) as u16
}

/// `COMPUTE_PGM_RSRC2.ENABLE_VGPR_WORKITEM_ID`, bits 11-12: how many
/// work-item ids (X; X and Y; X, Y and Z) the hardware writes, as 1 to 3.
pub fn work_item_ids_enabled(descriptor: &KernelDescriptor) -> u32 {
    ((descriptor.compute_pgm_rsrc2 >> 11) & 0x3).min(2) + 1
}

/// Each enabled input and its first SGPR.
/// With architected flat scratch (gfx940+) the hardware loads no scratch
/// wave offset: `ENABLE_PRIVATE_SEGMENT` sets FLAT_SCRATCH instead.
pub fn initial_sgprs(descriptor: &KernelDescriptor, processor: &Processor) -> Vec<(Input, u16)> {
    let mut out = Vec::new();
    let mut next = 0;
    for (input, bit, size) in USER {
        if descriptor.kernel_code_properties & bit != 0 {
            out.push((input, next));
            next += size;
        }
    }
    let mut next = user_sgpr_count(descriptor);
    for (input, bit) in SYSTEM {
        if input == Input::PrivateSegmentWaveOffset && processor.architected_flat_scratch {
            continue;
        }
        if descriptor.compute_pgm_rsrc2 & bit != 0 {
            out.push((input, next));
            next += 1;
        }
    }
    out
}

/// The user SGPRs the descriptor enables, counted: the hardware loads
/// `USER_SGPR_COUNT` of them, so the two must agree.
pub fn enabled_user_sgprs(descriptor: &KernelDescriptor) -> u16 {
    USER.iter().filter(|(_, bit, _)| descriptor.kernel_code_properties & bit != 0).map(|(_, _, size)| size).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_sgprs_start_at_the_user_sgpr_count() {
        let mut bytes = [0u8; 64];
        // Private segment buffer and kernarg pointer: 6 user SGPRs.
        bytes[56] = 0b1001;
        // USER_SGPR_COUNT 6, workgroup id X and Z, SCRATCH_EN.
        let rsrc2: u32 = (6 << 1) | (1 << 7) | (1 << 9) | 1;
        bytes[52..56].copy_from_slice(&rsrc2.to_le_bytes());
        let descriptor = KernelDescriptor::decode(&bytes);
        let gfx90a = Processor::named("gfx90a").unwrap();
        assert_eq!(
            initial_sgprs(&descriptor, gfx90a),
            vec![
                (Input::PrivateSegmentBuffer, 0),
                (Input::KernargSegmentPtr, 4),
                (Input::WorkgroupIdX, 6),
                (Input::WorkgroupIdZ, 7),
                (Input::PrivateSegmentWaveOffset, 8),
            ]
        );
        assert_eq!(enabled_user_sgprs(&descriptor), 6);
        // Architected flat scratch: SCRATCH_EN loads no SGPR.
        let gfx942 = Processor::named("gfx942").unwrap();
        assert_eq!(initial_sgprs(&descriptor, gfx942).last(), Some(&(Input::WorkgroupIdZ, 7)));
    }
}
