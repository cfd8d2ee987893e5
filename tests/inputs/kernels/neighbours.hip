// Neighbouring loads: one base address register, several immediate offsets
// (one of them negative).
#include <hip/hip_runtime.h>

__global__ void stencil(float *Out, const float *In, int N, int Shift) {
  int I = blockIdx.x * blockDim.x + threadIdx.x;
  if (I >= N)
    return;
  const float *P = In + 4 * I + Shift; // Shift >= 1: P[-1] is in bounds
  Out[I] = P[0] + 2.0f * P[1] - 3.0f * P[2] + 4.0f * P[3] + P[-1];
}
