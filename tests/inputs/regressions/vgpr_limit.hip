// Near the per-wave VGPR limit of a kernel without __launch_bounds__ (128
// on gfx90a, 64 on gfx908 for 1,024 work-items): many values live at once.
#include <hip/hip_runtime.h>

#define N 100
__global__ void pressure(const float *In, float *Out, int Steps) {
  float V[N];
  int T = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
  for (int I = 0; I < N; ++I)
    V[I] = In[T * N + I];
  for (int S = 0; S < Steps; ++S) {
#pragma unroll
    for (int I = 0; I < N; ++I)
      V[I] = V[I] * V[(I + 1) % N] + V[(I + 7) % N];
  }
  float Sum = 0;
#pragma unroll
  for (int I = 0; I < N; ++I)
    Sum += V[I] * (I + 1);
  Out[T] = Sum;
}
