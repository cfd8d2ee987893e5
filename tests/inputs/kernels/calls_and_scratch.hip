// Device function calls (kept by noinline), a dynamically indexed private
// array (scratch), many live registers with __launch_bounds__, and register
// spills.
#include <hip/hip_runtime.h>

__device__ __attribute__((noinline)) float polynomial(float X, int Degree) {
  float Result = 0.0f;
  for (int I = 0; I < Degree; ++I)
    Result = Result * X + static_cast<float>(I + 1);
  return Result;
}

__global__ void callsDeviceFunction(float *Data, int Degree) {
  unsigned I = blockIdx.x * blockDim.x + threadIdx.x;
  Data[I] = polynomial(Data[I], Degree) + polynomial(Data[I] * 0.5f, Degree + 1);
}

__global__ void scratchArray(int *Out, const int *Indices, int N) {
  int Private[64];
  for (int I = 0; I < 64; ++I)
    Private[I] = I * threadIdx.x;
  int Sum = 0;
  for (int I = 0; I < N; ++I)
    Sum += Private[Indices[I] & 63];
  Out[threadIdx.x] = Sum;
}

__global__ void __launch_bounds__(1024) manyRegisters(float *Out, const float *In) {
  float V[160];
#pragma unroll
  for (int I = 0; I < 160; ++I)
    V[I] = In[threadIdx.x * 160 + I];
  float Acc = 0.0f;
#pragma unroll
  for (int I = 0; I < 160; ++I)
#pragma unroll
    for (int J = 0; J < 160; J += 13)
      Acc += V[I] * V[J];
  Out[threadIdx.x] = Acc;
}

// A VGPR budget too small for the live values: the compiler spills (to
// AGPRs and scratch on gfx908, to scratch on gfx90a).
__global__ void __attribute__((amdgpu_num_vgpr(24))) registerSpills(float *Out, const float *In) {
  float V[64];
#pragma unroll
  for (int I = 0; I < 64; ++I)
    V[I] = In[threadIdx.x * 64 + I];
  float Acc = 0.0f;
#pragma unroll
  for (int I = 0; I < 64; ++I)
#pragma unroll
    for (int J = 0; J < 64; J += 5)
      Acc += V[I] * V[J];
  Out[threadIdx.x] = Acc;
}
