// Loads a code object file with hipModuleLoad and launches its kernels with
// hipModuleLaunchKernel; a kernel of its own (a second code object) runs too;
// hipExtModuleLaunchKernel launches a grid that ends in partial workgroups.
#include <hip/hip_ext.h>
#include <hip/hip_runtime.h>
#include <cstdio>

#define CHECK(call)                                                               \
  do {                                                                            \
    hipError_t e = (call);                                                        \
    if (e != hipSuccess) {                                                        \
      printf("%s failed: %s\n", #call, hipGetErrorString(e));                      \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

__global__ void add_one(int* data) { data[threadIdx.x] += 1; }

int main(int argc, char** argv) {
  if (argc != 2) {
    printf("usage: module_load CODE-OBJECT\n");
    return 2;
  }
  hipModule_t module;
  CHECK(hipModuleLoad(&module, argv[1]));
  hipFunction_t scale_by, iota, shape;
  CHECK(hipModuleGetFunction(&scale_by, module, "scale_by"));
  CHECK(hipModuleGetFunction(&iota, module, "iota"));
  CHECK(hipModuleGetFunction(&shape, module, "shape"));

  const int n = 256;
  float host[n];
  for (int i = 0; i < n; i++) host[i] = i;
  float* data;
  CHECK(hipMalloc(&data, sizeof(host)));
  CHECK(hipMemcpy(data, host, sizeof(host), hipMemcpyHostToDevice));
  struct {
    float* data;
    float factor;
    int n;
  } arguments = {data, 3.0f, n};
  size_t size = sizeof(arguments);
  void* config[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, &arguments, HIP_LAUNCH_PARAM_BUFFER_SIZE, &size,
                    HIP_LAUNCH_PARAM_END};
  CHECK(hipModuleLaunchKernel(scale_by, n / 64, 1, 1, 64, 1, 1, 0, 0, nullptr, config));
  CHECK(hipMemcpy(host, data, sizeof(host), hipMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < n; i++) ok &= host[i] == 3.0f * i;
  printf("hipModuleLaunchKernel with a buffer of arguments: %s\n", ok ? "ok" : "FAILED");

  int* numbers;
  CHECK(hipMalloc(&numbers, n * sizeof(int)));
  void* parameters[] = {&numbers};
  CHECK(hipModuleLaunchKernel(iota, n / 128, 1, 1, 128, 1, 1, 0, 0, parameters, nullptr));
  add_one<<<1, n>>>(numbers);
  int values[n];
  CHECK(hipMemcpy(values, numbers, sizeof(values), hipMemcpyDeviceToHost));
  bool ok2 = true;
  for (int i = 0; i < n; i++) ok2 &= values[i] == i + 1;
  printf("a module kernel and the program's own on one buffer: %s\n", ok2 ? "ok" : "FAILED");

  // 1000 x 3 work-items in workgroups of 256 x 2: the last workgroup of a
  // row holds 232 work-items, the last row of workgroups one row.
  const int width = 1000, height = 3, group_width = 256, group_height = 2;
  int4* shapes;
  CHECK(hipMalloc(&shapes, width * height * sizeof(int4)));
  CHECK(hipMemset(shapes, 0xff, width * height * sizeof(int4)));
  void* shape_parameters[] = {&shapes, (void*)&width, (void*)&group_width, (void*)&group_height};
  CHECK(hipExtModuleLaunchKernel(shape, width, height, 1, group_width, group_height, 1, 0, 0, shape_parameters,
                                 nullptr));
  static int4 seen[width * height];
  CHECK(hipMemcpy(seen, shapes, sizeof(seen), hipMemcpyDeviceToHost));
  bool ok3 = true;
  for (int y = 0; y < height; y++)
    for (int x = 0; x < width; x++) {
      int4 s = seen[y * width + x];
      int expected_width = x >= width / group_width * group_width ? width % group_width : group_width;
      int expected_height = y >= height / group_height * group_height ? height % group_height : group_height;
      ok3 &= s.x == x % group_width && s.y == y % group_height && s.z == expected_width && s.w == expected_height;
    }
  printf("a grid ending in partial workgroups: %s\n", ok3 ? "ok" : "FAILED");
  CHECK(hipModuleUnload(module));
  printf("%s\n", ok && ok2 && ok3 ? "PASSED" : "FAILED");
  return ok && ok2 && ok3 ? 0 : 1;
}
