// The seed's instruction counter: counts executed instructions per
// wavefront (vector instructions) or once per wavefront (scalar ones).
#include <gpuinstr/gpuinstr.h>

/// Number of instructions executed by the instrumented kernels.
__attribute__((managed)) uint64_t Counter = 0;

GPUINSTR_DEVICE_MODULE

GPUINSTR_HOOK countInstructionsVector(bool CountWavefrontLevel) {
  // Exec mask of the wavefront at the instrumentation point.
  uint64_t ExecMask = __builtin_amdgcn_read_exec();
  // Position of this lane in the wavefront, 1-based like __ffsll.
  const uint32_t LaneId = __lane_id() + 1;
  const uint32_t FirstActiveLane = __ffsll(static_cast<unsigned long long>(ExecMask));
  const uint32_t NumActiveLanes = __popcll(ExecMask);
  // Only the first active lane updates the counter.
  if (FirstActiveLane == LaneId) {
    if (CountWavefrontLevel) {
      if (NumActiveLanes > 0)
        atomicAdd(reinterpret_cast<unsigned long long *>(&Counter), 1ull);
    } else {
      atomicAdd(reinterpret_cast<unsigned long long *>(&Counter),
                static_cast<unsigned long long>(NumActiveLanes));
    }
  }
}

GPUINSTR_EXPORT_HOOK_HANDLE(countInstructionsVector);

GPUINSTR_HOOK countInstructionsScalar() {
  uint64_t ExecMask = __builtin_amdgcn_read_exec();
  // One lane does the update for the whole wavefront: the first active one
  // (the seed writes 1, turning lane 0 on where it may have been off).
  gpuinstr::writeExec(gpuinstr::firstActiveLane(ExecMask));
  atomicAdd(reinterpret_cast<unsigned long long *>(&Counter), 1ull);
  gpuinstr::writeExec(ExecMask);
}

GPUINSTR_EXPORT_HOOK_HANDLE(countInstructionsScalar);
