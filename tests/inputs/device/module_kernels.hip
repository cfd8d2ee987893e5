// Kernels loaded at run time with hipModuleLoad (built with hipcc --genco).
#include <hip/hip_runtime.h>

extern "C" __global__ void scale_by(float* data, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}

extern "C" __global__ void iota(int* out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = blockIdx.x * blockDim.x + threadIdx.x;
}
