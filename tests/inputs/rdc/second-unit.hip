// A second translation unit of a tool built with -fgpu-rdc: more hooks, no
// GPUINSTR_DEVICE_MODULE (the first unit has it, once per tool).
#include <gpuinstr/gpuinstr.h>

__device__ uint32_t LastWorkgroup;

GPUINSTR_HOOK recordWorkgroup() { LastWorkgroup = blockIdx.x; }

GPUINSTR_EXPORT_HOOK_HANDLE(recordWorkgroup);
