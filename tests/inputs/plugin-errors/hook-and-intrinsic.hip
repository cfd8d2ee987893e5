// expect: `both` is annotated both as a hook and as an intrinsic
#include <gpuinstr/gpuinstr.h>
GPUINSTR_DEVICE_MODULE

extern "C" __device__ __attribute__((used, noinline, annotate("gpuinstr_hook"), annotate("gpuinstr_intrinsic"))) void both() {}
