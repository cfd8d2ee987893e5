// Memory address tracer: one record per active lane for every flat, global,
// buffer and LDS memory instruction executed, streamed to the host part while the
// kernel runs (a ring: nothing is dropped).
#include <gpuinstr/gpuinstr.h>

GPUINSTR_DEVICE_MODULE

struct MemoryAccess {
  uint64_t Address;     // what the lane accessed
  uint32_t Instruction; // the instruction's address in the original code object
  /// Bits 0-5: the lane. Bit 6: the first record of the wavefront's
  /// execution of the instruction (its lowest active lane). Bits 7-8: the
  /// address's space (0 flat, 1 global, 2 buffer, 3 LDS). Bits 9-31: the
  /// global wavefront id (modulo 2^23): workgroups in order (x fastest),
  /// then the wavefronts of a workgroup.
  uint32_t WavefrontLane;
};

GPUINSTR_RING(MemoryAccess, Trace)

GPUINSTR_HOOK traceMemory(uint32_t Instruction, uint64_t Address, uint32_t Space) {
  const uint32_t Rank = gpuinstr::activeLaneRank();
  const uint32_t Group = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const uint32_t GroupSize = blockDim.x * blockDim.y * blockDim.z;
  const uint32_t Flat = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const uint32_t Wavefront = Group * ((GroupSize + 63) / 64) + __builtin_amdgcn_readfirstlane(Flat) / 64;
  // A wavefront's records are consecutive, its lanes in ascending order.
  const uint32_t Bits = (Wavefront << 9) | ((Space & 3) << 7) | (Rank == 0 ? 64u : 0u) | __lane_id();
  gpuinstr::append(Trace, MemoryAccess{Address, Instruction, Bits});
}

GPUINSTR_EXPORT_HOOK_HANDLE(traceMemory);
