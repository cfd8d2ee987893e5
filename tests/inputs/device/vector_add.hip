#include <hip/hip_runtime.h>
#include <cstdio>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
int main() {
  const int n = 1000;
  float ha[n], hb[n], hc[n];
  for (int i = 0; i < n; i++) { ha[i] = i; hb[i] = 2 * i; }
  float *a, *b, *c;
  hipMalloc(&a, n * 4); hipMalloc(&b, n * 4); hipMalloc(&c, n * 4);
  hipMemcpy(a, ha, n * 4, hipMemcpyHostToDevice);
  hipMemcpy(b, hb, n * 4, hipMemcpyHostToDevice);
  add<<<(n + 255) / 256, 256>>>(a, b, c, n);
  hipMemcpy(hc, c, n * 4, hipMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; i++) bad += hc[i] != 3 * i;
  printf("%s\n", bad ? "FAILED" : "PASSED");
  return bad != 0;
}
