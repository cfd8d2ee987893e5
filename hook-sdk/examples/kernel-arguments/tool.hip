// The seed's kernel-argument tool: copies the grid and block dimensions the
// instrumented kernel was launched with into managed variables.
#include <gpuinstr/gpuinstr.h>

GPUINSTR_DEVICE_MODULE

/// Where the hook writes gridDim and blockDim.
__attribute__((managed)) dim3 GridDim{0, 0, 0};
__attribute__((managed)) dim3 BlockDim{0, 0, 0};

GPUINSTR_HOOK accessKernelArguments() {
  GridDim = gridDim;
  BlockDim = blockDim;
}

GPUINSTR_EXPORT_HOOK_HANDLE(accessKernelArguments);
