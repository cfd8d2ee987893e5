// A HIP program for the runtime's tests: two kernels, four dispatches of
// different shapes (one with a partial last wave, one divergent loop), and
// checks of its own results. Instrumented, its tools report per dispatch.
#include <hip/hip_runtime.h>
#include <cstdio>
#include <vector>

__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

// Each thread sums a row whose length depends on the row: lanes of a wave
// leave the loop at different times.
__global__ void rowSums(const float* x, float* sums, int rows) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  float sum = 0;
  for (int k = 0; k <= row % 17; k++) sum += x[(row + k) % rows];
  sums[row] = sum;
}

int main() {
  const int n = 1000;
  std::vector<float> host(n);
  for (int i = 0; i < n; i++) host[i] = float(i % 10);
  float *x, *sums;
  hipMalloc(&x, n * sizeof(float));
  hipMalloc(&sums, n * sizeof(float));
  hipMemcpy(x, host.data(), n * sizeof(float), hipMemcpyHostToDevice);
  scale<<<(n + 255) / 256, 256>>>(x, 2.0f, n);
  scale<<<1, 64>>>(x, 0.5f, 50);
  rowSums<<<(n + 127) / 128, 128>>>(x, sums, n);
  scale<<<1, 96>>>(x, 3.0f, 70);
  std::vector<float> result(n), rowSum(n);
  hipMemcpy(result.data(), x, n * sizeof(float), hipMemcpyDeviceToHost);
  hipMemcpy(rowSum.data(), sums, n * sizeof(float), hipMemcpyDeviceToHost);
  int wrong = 0;
  std::vector<float> expected(n);
  for (int i = 0; i < n; i++) expected[i] = host[i] * 2.0f * (i < 50 ? 0.5f : 1.0f);
  for (int row = 0; row < n; row++) {
    float sum = 0;
    for (int k = 0; k <= row % 17; k++) sum += expected[(row + k) % n];
    wrong += rowSum[row] != sum;
  }
  for (int i = 0; i < n; i++) wrong += result[i] != expected[i] * (i < 70 ? 3.0f : 1.0f);
  printf("%s: %d wrong\n", wrong ? "FAILED" : "PASSED", wrong);
  hipFree(x);
  hipFree(sums);
  return wrong != 0;
}
