#include <hip/hip_runtime.h>

// Two kernels alike but for their names and constants: instrumented a
// group of kernels at a time, the second group takes the payloads the
// first compiled (driver/src/stages/payloads/shared.rs).
__global__ void firstTwin(int *Out, const int *In, int N) {
  int I = blockIdx.x * blockDim.x + threadIdx.x;
  if (I < N)
    Out[I] = In[I] * 3 + 1;
}

__global__ void secondTwin(int *Out, const int *In, int N) {
  int I = blockIdx.x * blockDim.x + threadIdx.x;
  if (I < N)
    Out[I] = In[I] * 5 + 2;
}
