// rocPRIM's device-wide algorithms (a header-only library, so compiled for
// whatever GPU the program targets): reduce, inclusive scan and radix
// sort, each checked on the CPU. Prints one line per algorithm and
// "PASSED" when all hold.
#include <hip/hip_runtime.h>
#include <cstring>  // rocPRIM 7.2's texture iterator calls memset without it
#include <rocprim/rocprim.hpp>

#include <algorithm>
#include <cstdio>
#include <vector>

#define CHECK(call)                                                  \
  do {                                                               \
    hipError_t e = (call);                                           \
    if (e != hipSuccess) {                                           \
      printf("%s failed: %s\n", #call, hipGetErrorString(e));         \
      return 1;                                                      \
    }                                                                \
  } while (0)

int main() {
  const size_t n = 3000;
  std::vector<int> input(n);
  for (size_t i = 0; i < n; i++) input[i] = static_cast<int>((i * 7919) % 1000) - 500;
  int *in, *out;
  CHECK(hipMalloc(&in, n * sizeof(int)));
  CHECK(hipMalloc(&out, n * sizeof(int)));
  CHECK(hipMemcpy(in, input.data(), n * sizeof(int), hipMemcpyHostToDevice));
  int failures = 0;
  auto report = [&](const char* what, bool ok) {
    printf("%s: %s\n", what, ok ? "ok" : "FAILED");
    failures += !ok;
  };

  // Each algorithm asks for its temporary storage first.
  size_t bytes = 0;
  void* temporary = nullptr;
  CHECK(rocprim::reduce(nullptr, bytes, in, out, 0, n, rocprim::plus<int>()));
  CHECK(hipMalloc(&temporary, bytes));
  CHECK(rocprim::reduce(temporary, bytes, in, out, 0, n, rocprim::plus<int>()));
  int sum = 0;
  CHECK(hipMemcpy(&sum, out, sizeof(int), hipMemcpyDeviceToHost));
  int expected_sum = 0;
  for (int v : input) expected_sum += v;
  report("reduce", sum == expected_sum);
  CHECK(hipFree(temporary));

  CHECK(rocprim::inclusive_scan(nullptr, bytes, in, out, n, rocprim::plus<int>()));
  CHECK(hipMalloc(&temporary, bytes));
  CHECK(rocprim::inclusive_scan(temporary, bytes, in, out, n, rocprim::plus<int>()));
  std::vector<int> scanned(n);
  CHECK(hipMemcpy(scanned.data(), out, n * sizeof(int), hipMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0, running = 0; i < static_cast<int>(n); i++) ok &= scanned[i] == (running += input[i]);
  report("inclusive scan", ok);
  CHECK(hipFree(temporary));

  CHECK(rocprim::radix_sort_keys(nullptr, bytes, in, out, n));
  CHECK(hipMalloc(&temporary, bytes));
  CHECK(rocprim::radix_sort_keys(temporary, bytes, in, out, n));
  std::vector<int> sorted(n);
  CHECK(hipMemcpy(sorted.data(), out, n * sizeof(int), hipMemcpyDeviceToHost));
  std::vector<int> expected = input;
  std::sort(expected.begin(), expected.end());
  report("radix sort", sorted == expected);
  CHECK(hipFree(temporary));

  CHECK(hipFree(in));
  CHECK(hipFree(out));
  printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures != 0;
}
