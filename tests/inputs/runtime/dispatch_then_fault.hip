// Two good dispatches, then one that writes far outside its buffer: the
// emulated GPU stops the program there. The runtime tests read what it
// printed before the stop and the run's database (the two dispatches).
#include <hip/hip_runtime.h>

#include <cstdio>
#include <unistd.h>

__global__ void step(int *Data, int N) {
  const int I = blockIdx.x * blockDim.x + threadIdx.x;
  if (I < N)
    Data[I] += I;
}

__global__ void poke(int *Data) { Data[threadIdx.x + (1 << 28)] = 1; }

int main() {
  const int N = 256;
  int *Data = nullptr;
  if (hipMalloc(&Data, N * sizeof(int)) != hipSuccess || hipMemset(Data, 0, N * sizeof(int)) != hipSuccess)
    return 1;
  for (int K = 0; K < 2; ++K)
    step<<<N / 64, 64>>>(Data, N);
  if (hipDeviceSynchronize() != hipSuccess)
    return 1;
  // Buffered (standard output is a pipe in the test).
  printf("two dispatches done\n");
  // The runtime records a dispatch on ROCr's event thread just after the
  // synchronisation returns: let it, before the stop.
  usleep(300000);
  poke<<<1, 64>>>(Data);
  hipDeviceSynchronize();
  printf("after the fault\n");
  return 0;
}
