// Three dispatches, then a long wait: the runtime tests kill it there and
// read the run's database (every dispatch completed before the kill).
#include <hip/hip_runtime.h>

#include <cstdio>
#include <unistd.h>

__global__ void step(int *Data, int N) {
  const int I = blockIdx.x * blockDim.x + threadIdx.x;
  if (I < N)
    Data[I] += I;
}

int main() {
  const int N = 256;
  int *Data = nullptr;
  if (hipMalloc(&Data, N * sizeof(int)) != hipSuccess || hipMemset(Data, 0, N * sizeof(int)) != hipSuccess)
    return 1;
  for (int K = 0; K < 3; ++K)
    step<<<N / 64, 64>>>(Data, N);
  if (hipDeviceSynchronize() != hipSuccess)
    return 1;
  printf("ready\n");
  fflush(stdout);
  sleep(600); // killed before it wakes
  return 0;
}
