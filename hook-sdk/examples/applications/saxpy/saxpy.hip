// A whole HIP program for the emulated GPU: y = a * x + y on a million
// floats, checked on the CPU. `scripts/run-example.sh` builds it with hipcc
// and runs it, unchanged, under gpuinstr-run.
#include <hip/hip_runtime.h>
#include <cmath>
#include <cstdio>
#include <vector>

__global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
  const int n = 1 << 20;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; i++) {
    x[i] = float(i % 1000) / 10.0f;
    y[i] = float(i % 7);
  }
  float *dx, *dy;
  hipMalloc(&dx, n * sizeof(float));
  hipMalloc(&dy, n * sizeof(float));
  hipMemcpy(dx, x.data(), n * sizeof(float), hipMemcpyHostToDevice);
  hipMemcpy(dy, y.data(), n * sizeof(float), hipMemcpyHostToDevice);
  saxpy<<<n / 256, 256>>>(n, 2.0f, dx, dy);
  std::vector<float> result(n);
  hipMemcpy(result.data(), dy, n * sizeof(float), hipMemcpyDeviceToHost);
  int wrong = 0;
  for (int i = 0; i < n; i++) wrong += std::fabs(result[i] - (2.0f * x[i] + y[i])) > 1e-5f;
  hipDeviceProp_t properties;
  hipGetDeviceProperties(&properties, 0);
  printf("saxpy of %d floats on %s: %s\n", n, properties.gcnArchName, wrong ? "FAILED" : "PASSED");
  hipFree(dx);
  hipFree(dy);
  return wrong != 0;
}
