// The instruction counter, once per EXEC region instead of once per
// instruction: the plan gives each region's first instruction the number of
// scalar and vector instructions the region runs (docs/plan.md), and the
// hook adds them all at once. The count equals the instruction counter's.
#include <gpuinstr/gpuinstr.h>

__attribute__((managed)) uint64_t Counter = 0;

GPUINSTR_DEVICE_MODULE

GPUINSTR_HOOK countRegion(uint32_t Scalar, uint32_t Vector) {
  uint64_t ExecMask = __builtin_amdgcn_read_exec();
  // Scalar instructions run once per wave, vector ones once per active lane:
  // every instruction of the region runs under the EXEC mask seen here.
  uint64_t Total = Scalar + static_cast<uint64_t>(Vector) * __popcll(ExecMask);
  // One lane adds for the wave (lane 63 when EXEC is zero, as the
  // instruction counter's scalar hook does).
  gpuinstr::writeExec(gpuinstr::firstActiveLane(ExecMask));
  atomicAdd(reinterpret_cast<unsigned long long *>(&Counter), static_cast<unsigned long long>(Total));
  gpuinstr::writeExec(ExecMask);
}

GPUINSTR_EXPORT_HOOK_HANDLE(countRegion);
