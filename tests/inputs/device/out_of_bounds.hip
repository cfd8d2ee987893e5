#include <hip/hip_runtime.h>
#include <cstdio>
__global__ void poke(int* p) { p[threadIdx.x + (1 << 28)] = 1; }
int main() {
  int* p;
  hipMalloc(&p, 256 * 4);
  // Buffered (stdout is a pipe in the test): still printed when the
  // emulated GPU stops the program.
  printf("before\n");
  poke<<<1, 64>>>(p);
  hipDeviceSynchronize();
  printf("after\n");
  return 0;
}
