// expect: a non-function value at 
// expect: annotated-variable.hip:6 is annotated `gpuinstr_hook`; only device functions can be hooks or intrinsics
#include <gpuinstr/gpuinstr.h>
GPUINSTR_DEVICE_MODULE

__device__ __attribute__((annotate("gpuinstr_hook"))) int NotAHook;
GPUINSTR_HOOK realHook() { NotAHook = 1; }
