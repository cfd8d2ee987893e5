// Tool globals with initial values: gpuinstr-link carries them into the
// instrumented code object (a plain global and a managed one's storage).
#include <gpuinstr/gpuinstr.h>

__device__ uint32_t Start = 1000;
__attribute__((managed)) uint64_t Budget = 77;

GPUINSTR_DEVICE_MODULE

GPUINSTR_HOOK spend() {
  if (__lane_id() == 0) {
    atomicAdd(&Start, 1u);
    atomicAdd(reinterpret_cast<unsigned long long *>(&Budget), ~0ull);
  }
}

GPUINSTR_EXPORT_HOOK_HANDLE(spend);
