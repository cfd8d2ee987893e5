// HIP runtime features a program uses, each checked on the CPU: prints one
// line per feature and "PASSED" when every check holds.
#include <hip/hip_runtime.h>
#include <cstdio>
#include <cstring>

#define CHECK(call)                                                               \
  do {                                                                            \
    hipError_t e = (call);                                                        \
    if (e != hipSuccess) {                                                        \
      printf("%s failed: %s\n", #call, hipGetErrorString(e));                      \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

__device__ int table[4];
__device__ float scale_factor;
__managed__ int managed_total;

__global__ void scale(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= scale_factor;
}

__global__ void lookup(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = table[i % 4];
}

// Reverses each block's slice through dynamic shared memory.
__global__ void reverse_blocks(const int* in, int* out) {
  extern __shared__ int slice[];
  int t = threadIdx.x;
  int base = blockIdx.x * blockDim.x;
  slice[t] = in[base + t];
  __syncthreads();
  out[base + t] = slice[blockDim.x - 1 - t];
}

__global__ void count(const int* values, int n, int* histogram) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    atomicAdd(&histogram[values[i] % 8], 1);
    atomicAdd(&managed_total, values[i]);
  }
}

__global__ void fill2d(int* out, int width) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  out[y * width + x] = y * 1000 + x;
}

int main() {
  int failures = 0;
  auto report = [&](const char* what, bool ok) {
    printf("%s: %s\n", what, ok ? "ok" : "FAILED");
    failures += !ok;
  };
  const int n = 512;

  // hipMemset and hipMemcpy device to device.
  int *a, *b;
  CHECK(hipMalloc(&a, n * sizeof(int)));
  CHECK(hipMalloc(&b, n * sizeof(int)));
  CHECK(hipMemset(a, 0x7f, n * sizeof(int)));
  CHECK(hipMemcpy(b, a, n * sizeof(int), hipMemcpyDeviceToDevice));
  int host[n];
  CHECK(hipMemcpy(host, b, n * sizeof(int), hipMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < n; i++) ok &= host[i] == 0x7f7f7f7f;
  report("memset and device-to-device copy", ok);

  // Device globals through hipMemcpyToSymbol / FromSymbol, hipLaunchKernelGGL.
  int values[4] = {11, 22, 33, 44};
  CHECK(hipMemcpyToSymbol(HIP_SYMBOL(table), values, sizeof(values)));
  hipLaunchKernelGGL(lookup, dim3(n / 128), dim3(128), 0, 0, a, n);
  CHECK(hipMemcpy(host, a, n * sizeof(int), hipMemcpyDeviceToHost));
  ok = true;
  for (int i = 0; i < n; i++) ok &= host[i] == values[i % 4];
  int back[4] = {0};
  CHECK(hipMemcpyFromSymbol(back, HIP_SYMBOL(table), sizeof(back)));
  ok &= memcmp(back, values, sizeof(back)) == 0;
  report("device globals and hipLaunchKernelGGL", ok);

  // Streams, async copies from pinned memory, events.
  float* pinned;
  CHECK(hipHostMalloc(&pinned, n * sizeof(float)));
  for (int i = 0; i < n; i++) pinned[i] = i;
  float factor = 2.5f;
  CHECK(hipMemcpyToSymbol(HIP_SYMBOL(scale_factor), &factor, sizeof(factor)));
  float* data;
  CHECK(hipMalloc(&data, n * sizeof(float)));
  hipStream_t stream;
  CHECK(hipStreamCreate(&stream));
  hipEvent_t start, stop;
  CHECK(hipEventCreate(&start));
  CHECK(hipEventCreate(&stop));
  CHECK(hipEventRecord(start, stream));
  CHECK(hipMemcpyAsync(data, pinned, n * sizeof(float), hipMemcpyHostToDevice, stream));
  scale<<<n / 64, 64, 0, stream>>>(data, n);
  CHECK(hipMemcpyAsync(pinned, data, n * sizeof(float), hipMemcpyDeviceToHost, stream));
  CHECK(hipEventRecord(stop, stream));
  CHECK(hipStreamSynchronize(stream));
  CHECK(hipEventSynchronize(stop));
  float elapsed = -1;
  CHECK(hipEventElapsedTime(&elapsed, start, stop));
  ok = elapsed >= 0;
  for (int i = 0; i < n; i++) ok &= pinned[i] == 2.5f * i;
  report("streams, async copies and events", ok);

  // Dynamic shared memory and barriers.
  for (int i = 0; i < n; i++) host[i] = i;
  CHECK(hipMemcpy(a, host, n * sizeof(int), hipMemcpyHostToDevice));
  reverse_blocks<<<n / 256, 256, 256 * sizeof(int)>>>(a, b);
  CHECK(hipDeviceSynchronize());
  CHECK(hipMemcpy(host, b, n * sizeof(int), hipMemcpyDeviceToHost));
  ok = true;
  for (int i = 0; i < n; i++) ok &= host[i] == (i / 256) * 256 + 255 - i % 256;
  report("dynamic shared memory", ok);

  // Atomics on device memory and a __managed__ global.
  int* histogram;
  CHECK(hipMalloc(&histogram, 8 * sizeof(int)));
  CHECK(hipMemset(histogram, 0, 8 * sizeof(int)));
  for (int i = 0; i < n; i++) host[i] = i;
  CHECK(hipMemcpy(a, host, n * sizeof(int), hipMemcpyHostToDevice));
  managed_total = 0;
  count<<<n / 128, 128>>>(a, n, histogram);
  CHECK(hipDeviceSynchronize());
  int bins[8];
  CHECK(hipMemcpy(bins, histogram, sizeof(bins), hipMemcpyDeviceToHost));
  ok = managed_total == n * (n - 1) / 2;
  for (int k = 0; k < 8; k++) ok &= bins[k] == n / 8;
  report("atomics and a managed global", ok);

  // Managed memory with advice, prefetches and attributes read back (SVM
  // ranges in the kernel driver), and host memory registered for the GPU.
  int device = 0;
  CHECK(hipGetDevice(&device));
  float* shared;
  CHECK(hipMallocManaged(&shared, n * sizeof(float)));
  for (int i = 0; i < n; i++) shared[i] = i;
  CHECK(hipMemAdvise(shared, n * sizeof(float), hipMemAdviseSetPreferredLocation, device));
  CHECK(hipMemPrefetchAsync(shared, n * sizeof(float), device, 0));
  const float two = 2.0f;
  CHECK(hipMemcpyToSymbol(HIP_SYMBOL(scale_factor), &two, sizeof(two)));
  scale<<<n / 64, 64>>>(shared, n);
  CHECK(hipMemPrefetchAsync(shared, n * sizeof(float), hipCpuDeviceId, 0));
  CHECK(hipDeviceSynchronize());
  int preferred = -2;
  CHECK(hipMemRangeGetAttribute(&preferred, sizeof(preferred), hipMemRangeAttributePreferredLocation, shared,
                                n * sizeof(float)));
  ok = preferred == device;
  for (int i = 0; i < n; i++) ok &= shared[i] == 2.0f * i;
  report("managed memory with advice and prefetches", ok);
  CHECK(hipFree(shared));

  static float registered[n];
  for (int i = 0; i < n; i++) registered[i] = i;
  CHECK(hipHostRegister(registered, sizeof(registered), hipHostRegisterDefault));
  float* through;
  CHECK(hipHostGetDevicePointer(reinterpret_cast<void**>(&through), registered, 0));
  scale<<<n / 64, 64>>>(through, n);
  CHECK(hipDeviceSynchronize());
  ok = true;
  for (int i = 0; i < n; i++) ok &= registered[i] == 2.0f * i;
  report("registered host memory", ok);
  CHECK(hipHostUnregister(registered));

  // A 2D grid.
  const int width = 64, height = 16;
  int* grid;
  CHECK(hipMalloc(&grid, width * height * sizeof(int)));
  fill2d<<<dim3(width / 16, height / 8), dim3(16, 8)>>>(grid, width);
  static int plane[width * height];
  CHECK(hipMemcpy(plane, grid, sizeof(plane), hipMemcpyDeviceToHost));
  ok = true;
  for (int y = 0; y < height; y++)
    for (int x = 0; x < width; x++) ok &= plane[y * width + x] == y * 1000 + x;
  report("a 2D grid", ok);

  CHECK(hipFree(a));
  CHECK(hipFree(b));
  CHECK(hipFree(data));
  CHECK(hipFree(histogram));
  CHECK(hipFree(grid));
  CHECK(hipHostFree(pinned));
  CHECK(hipStreamDestroy(stream));
  printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures != 0;
}
