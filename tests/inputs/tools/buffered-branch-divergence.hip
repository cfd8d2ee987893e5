// Branch divergence as it was before rings (GPUINSTR_RING), kept because
// its payloads are the ones that once met LLVM's reload through the
// terminators (tests/tests/payloads.rs). After seed 003: at each
// `s_and_saveexec_b64` (where a wavefront enters the "if" side of a branch) the EXEC mask before it (the
// OLD MASK) and the condition give the IF MASK; the branch diverges for the
// wavefront unless IF MASK == OLD MASK or IF MASK == 0.
#include <gpuinstr/gpuinstr.h>

GPUINSTR_DEVICE_MODULE

constexpr uint32_t BranchSlots = 4096;
/// Per branch (the plan's site number): times reached, times divergent.
__attribute__((managed)) uint64_t BranchExecutions[BranchSlots];
__attribute__((managed)) uint64_t BranchDivergences[BranchSlots];

/// Every execution, per wavefront, with its masks.
struct BranchRecord {
  uint32_t Branch;
  uint32_t Wavefront; // global wavefront id: workgroup, then wavefront in it
  uint64_t OldMask;
  uint64_t IfMask;
};
constexpr uint64_t RecordCapacity = 1u << 18;
__attribute__((managed)) BranchRecord BranchRecords[RecordCapacity];
__attribute__((managed)) uint64_t BranchRecordCount = 0;
// Records fill BranchRecords from its start: after a dispatch only they are copied.
GPUINSTR_RECORDS(BranchRecords, BranchRecordCount)

GPUINSTR_HOOK recordBranch(uint32_t Branch, uint64_t OldMask, uint64_t Condition) {
  const uint64_t IfMask = OldMask & Condition;
  const bool Divergent = IfMask != OldMask && IfMask != 0;
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
  const uint32_t Slot = Branch % BranchSlots;
  atomicAdd(reinterpret_cast<unsigned long long *>(&BranchExecutions[Slot]), 1ull);
  if (Divergent)
    atomicAdd(reinterpret_cast<unsigned long long *>(&BranchDivergences[Slot]), 1ull);
  const uint64_t Index = atomicAdd(reinterpret_cast<unsigned long long *>(&BranchRecordCount), 1ull);
  if (Index < RecordCapacity)
    BranchRecords[Index] = BranchRecord{Branch, Wavefront, OldMask, IfMask};
}

GPUINSTR_EXPORT_HOOK_HANDLE(recordBranch);
