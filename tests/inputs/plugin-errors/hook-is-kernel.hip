// expect: hook `launchMe` is a kernel (__global__); hooks are device functions
#include <gpuinstr/gpuinstr.h>
GPUINSTR_DEVICE_MODULE

extern "C" __global__ __attribute__((annotate("gpuinstr_hook"))) void launchMe() {}
