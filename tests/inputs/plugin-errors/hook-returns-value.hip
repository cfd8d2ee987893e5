// expect: hook `answer` returns a value; hooks return void
#include <gpuinstr/gpuinstr.h>
GPUINSTR_DEVICE_MODULE

extern "C" __device__ __attribute__((used, annotate("gpuinstr_hook"))) int answer() { return 42; }
