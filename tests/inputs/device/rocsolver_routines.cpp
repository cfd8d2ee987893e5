// rocSOLVER routines whose kernels are rocSOLVER's own (sid's rocBLAS
// carries no gfx942 or gfx9-4-generic code), checked against the CPU.
#include <hip/hip_runtime.h>
#include <rocsolver/rocsolver.h>
#include <cmath>
#include <cstdio>
#include <vector>

#define CHECK(call)                                        \
  do {                                                     \
    auto status_ = (call);                                 \
    if (status_ != 0) {                                    \
      std::printf("%s failed: %d\n", #call, (int)status_); \
      return false;                                        \
    }                                                      \
  } while (0)

template <typename T>
static T* to_device(const std::vector<T>& host) {
  T* device = nullptr;
  if (hipMalloc(&device, host.size() * sizeof(T)) != hipSuccess) return nullptr;
  if (hipMemcpy(device, host.data(), host.size() * sizeof(T), hipMemcpyHostToDevice) != hipSuccess) return nullptr;
  return device;
}

template <typename T>
static bool to_host(std::vector<T>& host, const T* device) {
  return hipMemcpy(host.data(), device, host.size() * sizeof(T), hipMemcpyDeviceToHost) == hipSuccess;
}

// laswp: rows k1..k2 interchanged in order with the rows ipiv names.
static bool laswp(rocblas_handle handle) {
  const rocblas_int m = 300, n = 70, lda = 320, k1 = 1, k2 = 250;
  std::vector<float> a(lda * n);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < lda; ++i) a[i + j * lda] = i * 1000.0f + j;
  std::vector<rocblas_int> ipiv(k2);
  for (int i = 0; i < k2; ++i) ipiv[i] = 1 + (i * 37 + 11) % m;
  std::vector<float> expected = a;
  for (int i = k1 - 1; i < k2; ++i)
    for (int j = 0; j < n; ++j) std::swap(expected[i + j * lda], expected[ipiv[i] - 1 + j * lda]);
  float* da = to_device(a);
  rocblas_int* dipiv = to_device(ipiv);
  CHECK(da == nullptr || dipiv == nullptr);
  CHECK(rocsolver_slaswp(handle, n, da, lda, k1, k2, dipiv, 1));
  CHECK(!to_host(a, da));
  CHECK(hipFree(da));
  CHECK(hipFree(dipiv));
  return a == expected;
}

// lacgv: a complex vector conjugated in place, with a stride.
static bool lacgv(rocblas_handle handle) {
  const rocblas_int n = 1000, inc = 3;
  std::vector<rocblas_float_complex> x(n * inc);
  for (int i = 0; i < n * inc; ++i) x[i] = rocblas_float_complex(i, 0.5f * i + 1);
  std::vector<rocblas_float_complex> expected = x;
  for (int i = 0; i < n; ++i) expected[i * inc] = std::conj(expected[i * inc]);
  rocblas_float_complex* dx = to_device(x);
  CHECK(dx == nullptr);
  CHECK(rocsolver_clacgv(handle, n, dx, inc));
  CHECK(!to_host(x, dx));
  CHECK(hipFree(dx));
  return x == expected;
}

// getf2: LU with partial pivoting of a small matrix; P*A = L*U within rounding.
static bool getf2(rocblas_handle handle) {
  const rocblas_int n = 24, lda = 24;
  std::vector<double> a(lda * n);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) a[i + j * lda] = std::sin(1.0 + i * 7 + j * 13) + (i == j ? 4.0 : 0.0);
  std::vector<double> lu = a;
  std::vector<rocblas_int> ipiv(n, 0), info(1, -1);
  double* da = to_device(lu);
  rocblas_int* dipiv = to_device(ipiv);
  rocblas_int* dinfo = to_device(info);
  CHECK(da == nullptr || dipiv == nullptr || dinfo == nullptr);
  CHECK(rocsolver_dgetf2(handle, n, n, da, lda, dipiv, dinfo));
  CHECK(!to_host(lu, da) || !to_host(ipiv, dipiv) || !to_host(info, dinfo));
  CHECK(hipFree(da));
  CHECK(hipFree(dipiv));
  CHECK(hipFree(dinfo));
  if (info[0] != 0) return false;
  std::vector<double> pa = a;  // P*A: the recorded interchanges applied in order
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) std::swap(pa[i + j * lda], pa[ipiv[i] - 1 + j * lda]);
  double worst = 0;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int k = 0; k <= std::min(i, j); ++k) sum += (k == i ? 1.0 : lu[i + k * lda]) * lu[k + j * lda];
      worst = std::max(worst, std::fabs(sum - pa[i + j * lda]));
    }
  return worst < 1e-12;
}

int main() {
  rocblas_handle handle;
  if (rocblas_create_handle(&handle) != rocblas_status_success) return 1;
  bool all = true;
  const struct {
    const char* name;
    bool (*routine)(rocblas_handle);
  } routines[] = {{"laswp", laswp}, {"lacgv", lacgv}, {"getf2", getf2}};
  for (auto [name, routine] : routines) {
    bool ok = routine(handle);
    std::printf("%s: %s\n", name, ok ? "ok" : "FAILED");
    all = all && ok;
  }
  rocblas_destroy_handle(handle);
  std::printf(all ? "PASSED\n" : "FAILED\n");
  return all ? 0 : 1;
}
