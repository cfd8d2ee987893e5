// Hooks the payload compiler tests instrument our kernels with: one per
// behaviour the issue names (scalar and vector counters, a register
// argument, kernel arguments, EXEC writes, stack use).
#include <gpuinstr/gpuinstr.h>

GPUINSTR_DEVICE_MODULE

__device__ uint64_t ScalarCount;
__attribute__((managed)) uint64_t VectorCount = 0;
__device__ uint32_t LastValue;
__attribute__((managed)) dim3 GridDim{0, 0, 0};
__attribute__((managed)) dim3 BlockDim{0, 0, 0};
__device__ uint32_t Histogram[64];

/// Seed 002: one scalar atomic per wavefront.
GPUINSTR_HOOK countScalar() { gpuinstr::sAtomicAdd(&ScalarCount, 1ul); }

/// Seed 004: the first active lane adds the wavefront's active lane count.
GPUINSTR_HOOK countVector(bool WaveLevel) {
  uint64_t Exec = __builtin_amdgcn_read_exec();
  const uint32_t Lane = __lane_id() + 1;
  if (__ffsll(static_cast<unsigned long long>(Exec)) == Lane) {
    unsigned long long Count = WaveLevel ? 1ull : __popcll(Exec);
    atomicAdd(reinterpret_cast<unsigned long long *>(&VectorCount), Count);
  }
}

/// A register value as an argument.
GPUINSTR_HOOK recordValue(uint32_t Value) {
  if (__lane_id() == 0)
    LastValue = Value;
}

/// Seed 004's kernel-argument tool: gridDim and blockDim of the dispatch.
GPUINSTR_HOOK recordDimensions() {
  GridDim = gridDim;
  BlockDim = blockDim;
}

/// Seed 004's scalar counter: one lane does the update for the wavefront.
GPUINSTR_HOOK countWithOneLane() {
  uint64_t Exec = __builtin_amdgcn_read_exec();
  gpuinstr::writeExec(1);
  atomicAdd(reinterpret_cast<unsigned long long *>(&VectorCount), 1ull);
  gpuinstr::writeExec(Exec);
}

/// Needs stack: a per-lane table indexed by a runtime value.
GPUINSTR_HOOK histogram(uint32_t Value) {
  uint32_t Local[24];
  for (int I = 0; I < 24; ++I)
    Local[I] = Value * I + threadIdx.x;
  atomicAdd(&Histogram[Local[Value % 24] & 63], 1u);
}

/// Reads and writes application registers.
GPUINSTR_HOOK bumpRegister() {
  uint32_t Value = gpuinstr::readReg<uint32_t>(gpuinstr::sgpr(6));
  gpuinstr::writeReg<uint32_t>(gpuinstr::sgpr(6), Value + 1);
}

/// Register pressure: twelve per-lane values live at once.
GPUINSTR_HOOK pressure(uint32_t Value) {
  uint32_t A[12];
#pragma unroll
  for (int I = 0; I < 12; ++I)
    A[I] = (Value ^ (I * 0x9e3779b9u)) * (threadIdx.x + I);
  uint32_t Sum = 0;
#pragma unroll
  for (int I = 0; I < 12; ++I)
    Sum += A[I] * A[(I * 5) % 12] + (A[(I + 7) % 12] >> I);
  atomicAdd(&Histogram[Sum & 63], Sum);
}

__device__ uint64_t FirstGlobalOffset;

/// The hidden arguments through implicitArgPtr (kernarg pointer + the
/// hidden-argument offset, both from the SVA): code object v4's first
/// hidden argument is hidden_global_offset_x.
GPUINSTR_HOOK readGlobalOffset() {
  const uint64_t *Hidden = static_cast<const uint64_t *>(__builtin_amdgcn_implicitarg_ptr());
  if (__lane_id() == 0)
    FirstGlobalOffset = Hidden[0];
}
