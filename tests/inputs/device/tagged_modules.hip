// Loads each code object file named on the command line (compressed offload
// bundles, say) with hipModuleLoad, runs its `tagged` kernel and prints what
// it wrote: a module must run its own code, not another file's.
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

int main(int argc, char** argv) {
  const int n = 64;
  int* out;
  CHECK(hipMalloc(&out, n * sizeof(int)));
  for (int m = 1; m < argc; m++) {
    hipModule_t module;
    hipFunction_t tagged;
    CHECK(hipModuleLoad(&module, argv[m]));
    CHECK(hipModuleGetFunction(&tagged, module, "tagged"));
    void* parameters[] = {&out};
    CHECK(hipModuleLaunchKernel(tagged, 1, 1, 1, n, 1, 1, 0, 0, parameters, nullptr));
    int host[n];
    CHECK(hipMemcpy(host, out, sizeof(host), hipMemcpyDeviceToHost));
    printf("module %d wrote %d\n", m, host[n - 1]);
  }
  return 0;
}
