// An application kernel to instrument: the classic vector add, with a
// divergent tail (threads past n do nothing).
#include <hip/hip_runtime.h>

__global__ void vectorAdd(float *Out, const float *A, const float *B, int N) {
  int I = blockIdx.x * blockDim.x + threadIdx.x;
  if (I < N)
    Out[I] = A[I] + B[I];
}
