// Kernels loaded at run time with hipModuleLoad (built with hipcc --genco).
#include <hip/hip_runtime.h>

extern "C" __global__ void scale_by(float* data, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}

extern "C" __global__ void iota(int* out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = blockIdx.x * blockDim.x + threadIdx.x;
}

// Records, per work-item, its position in its workgroup and the workgroup's
// shape (`blockDim` is the partial workgroup's own in the last workgroup of
// a dimension): launched with hipExtModuleLaunchKernel on a grid that is not
// a whole number of workgroups. `group_width` and `group_height` are the
// full workgroup's.
extern "C" __global__ void shape(int4* out, int width, int group_width, int group_height) {
  int x = blockIdx.x * group_width + threadIdx.x;
  int y = blockIdx.y * group_height + threadIdx.y;
  out[y * width + x] = make_int4(threadIdx.x, threadIdx.y, blockDim.x, blockDim.y);
}
