// printf from a kernel: HIP's hostcall buffer, serviced by the runtime's
// listener thread when the kernel signals it.
#include <hip/hip_runtime.h>
#include <cstdio>

__global__ void hello(int base) {
  int thread = threadIdx.x, block = blockIdx.x;
  if (thread % 32 == 0) printf("hello from thread %d of block %d, value %d\n", thread, block, base + thread);
}

int main() {
  hello<<<2, 64>>>(1000);
  hipError_t e = hipDeviceSynchronize();
  // hipGetErrorName: the text of hipGetErrorString changed in HIP 5.7.
  printf("synchronized: %s\n", hipGetErrorName(e));
  return e != hipSuccess;
}
