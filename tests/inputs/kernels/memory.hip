// Memory: LDS with barriers, global and LDS atomics, constant data reached
// through a pc-relative computation, a device global.
#include <hip/hip_runtime.h>

__constant__ float Coefficients[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
__device__ unsigned int Histogram[64];

__global__ void ldsReduction(float *Out, const float *In) {
  __shared__ float Partial[256];
  unsigned T = threadIdx.x;
  Partial[T] = In[blockIdx.x * 256 + T] * Coefficients[T & 15];
  __syncthreads();
  for (unsigned S = 128; S > 0; S >>= 1) {
    if (T < S)
      Partial[T] += Partial[T + S];
    __syncthreads();
  }
  if (T == 0)
    Out[blockIdx.x] = Partial[0];
}

__global__ void atomics(const unsigned *Values, int N, unsigned *Maximum) {
  __shared__ unsigned LocalCount;
  if (threadIdx.x == 0)
    LocalCount = 0;
  __syncthreads();
  int I = blockIdx.x * blockDim.x + threadIdx.x;
  if (I < N) {
    atomicAdd(&Histogram[Values[I] & 63], 1u);
    atomicMax(Maximum, Values[I]);
    atomicAdd(&LocalCount, 1u);
  }
  __syncthreads();
  if (threadIdx.x == 0)
    atomicCAS(Maximum + 1, 0u, LocalCount);
}
