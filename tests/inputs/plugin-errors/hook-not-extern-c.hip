// expect: hook `notExternC` is not extern "C" (its symbol is `_Z10notExternCi`)
// expect: declare it with GPUINSTR_HOOK
#include <gpuinstr/gpuinstr.h>
GPUINSTR_DEVICE_MODULE

__device__ __attribute__((used, annotate("gpuinstr_hook"))) void notExternC(int X) {}
