// Loads one code object file every way HIP loads code: hipModuleLoad (the
// file), hipModuleLoadData and hipModuleLoadDataEx (its bytes in memory),
// and runs a kernel of each module; a kernel of the program's own fat
// binary runs too. Each launch fills its own slice of a buffer, checked.
#include <hip/hip_runtime.h>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#define CHECK(call)                                                               \
  do {                                                                            \
    hipError_t e = (call);                                                        \
    if (e != hipSuccess) {                                                        \
      printf("%s failed: %s\n", #call, hipGetErrorString(e));                      \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

__global__ void add_one(int* data) { data[blockIdx.x * blockDim.x + threadIdx.x] += 1; }

int main(int argc, char** argv) {
  if (argc != 2) {
    printf("usage: module_load_ways CODE-OBJECT\n");
    return 2;
  }
  std::ifstream file(argv[1], std::ios::binary);
  std::vector<char> image((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  hipModule_t modules[3];
  CHECK(hipModuleLoad(&modules[0], argv[1]));
  CHECK(hipModuleLoadData(&modules[1], image.data()));
  hipJitOption options[] = {hipJitOptionMaxRegisters};
  void* values[] = {reinterpret_cast<void*>(static_cast<size_t>(128))};
  CHECK(hipModuleLoadDataEx(&modules[2], image.data(), 1, options, values));
  const int n = 256;
  int* numbers;
  CHECK(hipMalloc(&numbers, 3 * n * sizeof(int)));
  for (int m = 0; m < 3; m++) {
    hipFunction_t iota;
    CHECK(hipModuleGetFunction(&iota, modules[m], "iota"));
    int* slice = numbers + m * n;
    void* parameters[] = {&slice};
    CHECK(hipModuleLaunchKernel(iota, n / 128, 1, 1, 128, 1, 1, 0, 0, parameters, nullptr));
  }
  add_one<<<3, n>>>(numbers);
  std::vector<int> host(3 * n);
  CHECK(hipMemcpy(host.data(), numbers, host.size() * sizeof(int), hipMemcpyDeviceToHost));
  int wrong = 0;
  for (int m = 0; m < 3; m++)
    for (int i = 0; i < n; i++) wrong += host[m * n + i] != i + 1;
  for (auto module : modules) CHECK(hipModuleUnload(module));
  printf("%s: %d wrong\n", wrong ? "FAILED" : "PASSED", wrong);
  return wrong != 0;
}
