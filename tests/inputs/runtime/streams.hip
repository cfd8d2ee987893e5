// Two streams run a kernel each, with nothing ordering them, then the
// null stream runs one: HIP makes a null-stream (legacy default stream)
// launch wait for the other blocking streams, with barrier packets on
// signals of theirs. Each launch fills its own slice, checked.
#include <hip/hip_runtime.h>
#include <cstdio>
#include <vector>

__global__ void fill(unsigned* out, unsigned value, int rounds) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x, x = value + i;
  for (int k = 0; k < rounds; k++) x = x * 1664525u + 1013904223u;
  out[i] = x;
}

unsigned expected(unsigned value, unsigned i, int rounds) {
  unsigned x = value + i;
  for (int k = 0; k < rounds; k++) x = x * 1664525u + 1013904223u;
  return x;
}

int main() {
  const int n = 256, rounds = 3000;
  unsigned* out;
  hipMalloc(&out, 3 * n * sizeof(unsigned));
  hipStream_t a, b;
  hipStreamCreate(&a);
  hipStreamCreate(&b);
  fill<<<n / 64, 64, 0, a>>>(out, 1, rounds);
  fill<<<n / 64, 64, 0, b>>>(out + n, 2, rounds);
  // The legacy default stream: after both, whatever they still run.
  fill<<<n / 64, 64>>>(out + 2 * n, 3, rounds);
  std::vector<unsigned> host(3 * n);
  hipMemcpy(host.data(), out, host.size() * sizeof(unsigned), hipMemcpyDeviceToHost);
  int wrong = 0;
  for (int s = 0; s < 3; s++)
    for (int i = 0; i < n; i++) wrong += host[s * n + i] != expected(s + 1, i, rounds);
  hipStreamDestroy(a);
  hipStreamDestroy(b);
  hipFree(out);
  printf("%s: %d wrong\n", wrong ? "FAILED" : "PASSED", wrong);
  return wrong != 0;
}
