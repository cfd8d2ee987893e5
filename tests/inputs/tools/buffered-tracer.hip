// The memory tracer as it was before rings (GPUINSTR_RING): one record per
// active lane for every flat and global memory instruction executed, in a
// managed buffer of 2^20 records that the runtime copies after each
// dispatch (GPUINSTR_RECORDS); records past it are counted and dropped.
// Kept for the tests of record buffers and as the benchmark's baseline.
#include <gpuinstr/gpuinstr.h>

GPUINSTR_DEVICE_MODULE

struct MemoryAccess {
  uint64_t Address;     // what the lane accessed
  uint32_t Instruction; // the instruction's address in the original code object
  /// Bits 0-5: the lane. Bit 6: the first record of the wavefront's
  /// execution of the instruction (its lowest active lane). Bits 7-31: the
  /// global wavefront id (modulo 2^25): workgroups in order (x fastest),
  /// then the wavefronts of a workgroup.
  uint32_t WavefrontLane;
};

constexpr uint64_t TraceCapacity = 1u << 20;
__attribute__((managed)) MemoryAccess Trace[TraceCapacity];
/// Records wanted so far; more than TraceCapacity means some were dropped.
__attribute__((managed)) uint64_t TraceCount = 0;
// Records fill Trace from its start: after a dispatch only they are copied.
GPUINSTR_RECORDS(Trace, TraceCount)

GPUINSTR_HOOK traceMemory(uint32_t Instruction, uint64_t Address, uint32_t) {
  const uint64_t ExecMask = __builtin_amdgcn_read_exec();
  // This lane's rank among the active lanes.
  const uint32_t Rank =
      __builtin_amdgcn_mbcnt_hi(static_cast<uint32_t>(ExecMask >> 32),
                                __builtin_amdgcn_mbcnt_lo(static_cast<uint32_t>(ExecMask), 0));
  // The first active lane reserves room for the whole wavefront.
  uint64_t First = 0;
  if (Rank == 0)
    First = atomicAdd(reinterpret_cast<unsigned long long *>(&TraceCount),
                      static_cast<unsigned long long>(__popcll(ExecMask)));
  const uint32_t Low = __builtin_amdgcn_readfirstlane(static_cast<uint32_t>(First));
  const uint32_t High = __builtin_amdgcn_readfirstlane(static_cast<uint32_t>(First >> 32));
  const uint64_t Slot = ((static_cast<uint64_t>(High) << 32) | Low) + Rank;
  const uint32_t Group = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const uint32_t GroupSize = blockDim.x * blockDim.y * blockDim.z;
  const uint32_t Flat = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const uint32_t Wavefront = Group * ((GroupSize + 63) / 64) + __builtin_amdgcn_readfirstlane(Flat) / 64;
  // A wavefront's records are consecutive, its lanes in ascending order.
  if (Slot < TraceCapacity)
    Trace[Slot] = MemoryAccess{Address, Instruction, (Wavefront << 7) | (Rank == 0 ? 64u : 0u) | __lane_id()};
}

GPUINSTR_EXPORT_HOOK_HANDLE(traceMemory);
