// A kernel that calls printf: ROCm's hostcall code has `buffer_wbl2` with
// cache-policy bits that LLVM 15 does not print (issue 20, item 2).
#include <hip/hip_runtime.h>

__global__ void hello(int *Out) {
  printf("thread %d\n", static_cast<int>(threadIdx.x));
  Out[threadIdx.x] = threadIdx.x;
}
