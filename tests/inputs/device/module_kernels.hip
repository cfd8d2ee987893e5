// Kernels loaded at run time with hipModuleLoad (built with hipcc --genco).
#include <hip/hip_runtime.h>

extern "C" __global__ void scale_by(float* data, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}

extern "C" __global__ void iota(int* out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = blockIdx.x * blockDim.x + threadIdx.x;
}

// The workgroup's own shape in dimension dim: the full shape, or what the
// grid leaves of it in the last workgroup, from the dispatch packet
// (workgroup_size_* are 16-bit at byte 4, grid_size_* 32-bit at byte 12).
// Neither HIP's blockDim nor the device library's local size says it for
// every ROCm: both give the full shape from ROCm 5.7 on.
__device__ int own_group_size(int dim, int group_id) {
  const char *packet = (const char *)__builtin_amdgcn_dispatch_ptr();
  int group = reinterpret_cast<const unsigned short *>(packet + 4)[dim];
  int grid = reinterpret_cast<const unsigned int *>(packet + 12)[dim];
  return min(group, grid - group_id * group);
}

// Records, per work-item, its position in its workgroup and the workgroup's
// own shape: launched with hipExtModuleLaunchKernel on a grid that is not a
// whole number of workgroups. `group_width` and `group_height` are the full
// workgroup's.
extern "C" __global__ void shape(int4* out, int width, int group_width, int group_height) {
  int x = blockIdx.x * group_width + threadIdx.x;
  int y = blockIdx.y * group_height + threadIdx.y;
  out[y * width + x] = make_int4(threadIdx.x, threadIdx.y, own_group_size(0, blockIdx.x), own_group_size(1, blockIdx.y));
}
