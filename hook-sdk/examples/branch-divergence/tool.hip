// Branch divergence, after seed 003: at each `s_and_saveexec_b64` (where a
// wavefront enters the "if" side of a branch) the EXEC mask before it (the
// OLD MASK) and the condition give the IF MASK; the branch diverges for the
// wavefront unless IF MASK == OLD MASK or IF MASK == 0.
#include <gpuinstr/gpuinstr.h>

GPUINSTR_DEVICE_MODULE

/// Every execution, per wavefront, with its masks, streamed to the host
/// part while the kernel runs (a ring: none is dropped).
struct BranchRecord {
  uint32_t Branch;    // the plan's site number
  uint32_t Wavefront; // global wavefront id: workgroup, then wavefront in it
  uint64_t OldMask;
  uint64_t IfMask;
};
GPUINSTR_RING(BranchRecord, BranchRecords)

GPUINSTR_HOOK recordBranch(uint32_t Branch, uint64_t OldMask, uint64_t Condition) {
  const uint64_t IfMask = OldMask & Condition;
  // Seed 003's global wavefront id: workgroups in order, then the
  // wavefronts of a workgroup by flat work-item id.
  const uint32_t Group = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const uint32_t GroupSize = blockDim.x * blockDim.y * blockDim.z;
  const uint32_t Flat = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const uint32_t Wavefront =
      Group * ((GroupSize + 63) / 64) + __builtin_amdgcn_readfirstlane(Flat) / 64;
  // The first active lane records for the wavefront, through an ordinary
  // branch: turning on a lane that was off (writeExec(1) when lane 0 is
  // inactive) would run it on vector registers the compiler computed
  // without it. A wavefront reaching the branch with no active lane records
  // nothing (it has no work-item to diverge).
  if (static_cast<int>(__lane_id()) != __ffsll(static_cast<unsigned long long>(OldMask)) - 1)
    return;
  gpuinstr::append(BranchRecords, BranchRecord{Branch, Wavefront, OldMask, IfMask});
}

GPUINSTR_EXPORT_HOOK_HANDLE(recordBranch);
