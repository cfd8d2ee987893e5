// One kernel name, a value per build (-DTAG=N): two code objects whose
// kernels are alike but for what they write, so that running the one for
// the other shows.
#include <hip/hip_runtime.h>

extern "C" __global__ void tagged(int* out) { out[threadIdx.x] = TAG; }
