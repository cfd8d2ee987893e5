// Control flow: divergent branches, loops, an early exit.
#include <hip/hip_runtime.h>

__global__ void divergentBranches(int *Out, const int *In, int N) {
  int I = blockIdx.x * blockDim.x + threadIdx.x;
  if (I >= N)
    return;
  int V = In[I];
  if (V & 1)
    V = V * 3 + 1;
  else
    V = V / 2;
  Out[I] = V;
}

__global__ void loopReduction(float *Out, const float *In, int N, int Stride) {
  float Sum = 0.0f;
  for (int I = threadIdx.x; I < N; I += Stride)
    Sum += In[I] * In[I];
  Out[threadIdx.x] = Sum;
}
