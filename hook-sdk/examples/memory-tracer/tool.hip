// Memory address tracer: one record per active lane for every flat and
// global memory instruction executed, appended to a managed buffer.
#include <gpuinstr/gpuinstr.h>

GPUINSTR_DEVICE_MODULE

struct MemoryAccess {
  uint64_t Address;     // what the lane accessed
  uint32_t Instruction; // the instruction's address in the original code object
  uint32_t Workgroup;   // blockIdx.x of the accessing wavefront
};

constexpr uint64_t TraceCapacity = 1u << 20;
__attribute__((managed)) MemoryAccess Trace[TraceCapacity];
/// Records wanted so far; more than TraceCapacity means some were dropped.
__attribute__((managed)) uint64_t TraceCount = 0;

GPUINSTR_HOOK traceMemory(uint32_t Instruction, uint64_t Address) {
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
  if (Slot < TraceCapacity)
    Trace[Slot] = MemoryAccess{Address, Instruction, blockIdx.x};
}

GPUINSTR_EXPORT_HOOK_HANDLE(traceMemory);
