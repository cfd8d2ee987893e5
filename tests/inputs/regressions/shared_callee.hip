// One device function called by two kernels: `heavy` keeps many values live
// across the call (in the callee-saved VGPRs), `light` keeps none. The
// callee's liveness summary joins both call sites, so it says those
// registers are live through it; what `light` touches must not include
// them (its descriptor allocates only what it and the callee name).
#include <hip/hip_runtime.h>

__device__ __attribute__((noinline)) int helper(const int *p, int n) {
  int sum = 0;
  for (int k = 0; k < n; ++k) sum += p[threadIdx.x + k] * (k + 1);
  return sum;
}

__global__ void light(int *out) { out[threadIdx.x] = helper(out, 3); }

__global__ void heavy(int *out) {
  int i = threadIdx.x;
  int v[40];
#pragma unroll
  for (int k = 0; k < 40; ++k) v[k] = out[i + 64 * k];
  int r = helper(out, 5);
#pragma unroll
  for (int k = 0; k < 40; ++k) r += v[k] * (k + 3);
  out[i] = r;
}
