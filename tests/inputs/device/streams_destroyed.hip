// Streams destroyed while the GPU is busy, as HeCBench's lfib4 does: two
// streams run a kernel each and are waited for, a long kernel goes to the
// null stream, and the two streams are destroyed while it runs, so their
// queues (and the memory of their rings) go while the command processor is
// in another queue's dispatch. The long kernel's results must arrive.
#include <hip/hip_runtime.h>
#include <cstdio>
#include <vector>

__global__ void spin(unsigned* out, int rounds) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x, x = i;
  for (int k = 0; k < rounds; k++) x = x * 1664525u + 1013904223u;
  out[i] = x;
}

unsigned expected(unsigned i, int rounds) {
  unsigned x = i;
  for (int k = 0; k < rounds; k++) x = x * 1664525u + 1013904223u;
  return x;
}

int main() {
  const int n = 256, rounds[3] = {100, 200, 20000};
  unsigned* out;
  hipMalloc(&out, 3 * n * sizeof(unsigned));
  // The null stream's queue first: the streams' queues come after it, so
  // the command processor reaches them after the long kernel.
  spin<<<1, 64>>>(out + 2 * n, 1);
  hipDeviceSynchronize();
  hipStream_t first, second;
  hipStreamCreate(&first);
  hipStreamCreate(&second);
  spin<<<n / 64, 64, 0, first>>>(out, rounds[0]);
  spin<<<n / 64, 64, 0, second>>>(out + n, rounds[1]);
  hipStreamSynchronize(first);
  hipStreamSynchronize(second);
  spin<<<n / 64, 64>>>(out + 2 * n, rounds[2]);
  hipStreamDestroy(first);
  hipStreamDestroy(second);
  std::vector<unsigned> host(3 * n);
  hipMemcpy(host.data(), out, host.size() * sizeof(unsigned), hipMemcpyDeviceToHost);
  int wrong = 0;
  for (int s = 0; s < 3; s++)
    for (int i = 0; i < n; i++) wrong += host[s * n + i] != expected(i, rounds[s]);
  hipFree(out);
  printf("%s: %d wrong\n", wrong ? "FAILED" : "PASSED", wrong);
  return wrong != 0;
}
