// rocBLAS's GEMMs (Tensile's kernels, loaded from its library directory
// as the program runs) at two sizes, single and double precision, each
// checked against the CPU. Prints one line per case and exits 1 on a
// wrong result.
#include <hip/hip_runtime.h>
#include <rocblas/rocblas.h>
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
static rocblas_status gemm(rocblas_handle handle, int n, const T* alpha, const T* a, const T* b, const T* beta, T* c);

template <>
rocblas_status gemm<float>(rocblas_handle handle, int n, const float* alpha, const float* a, const float* b,
                           const float* beta, float* c) {
  return rocblas_sgemm(handle, rocblas_operation_none, rocblas_operation_transpose, n, n, n, alpha, a, n, b, n, beta,
                       c, n);
}

template <>
rocblas_status gemm<double>(rocblas_handle handle, int n, const double* alpha, const double* a, const double* b,
                            const double* beta, double* c) {
  return rocblas_dgemm(handle, rocblas_operation_none, rocblas_operation_transpose, n, n, n, alpha, a, n, b, n, beta,
                       c, n);
}

// C = alpha * A * B^T + beta * C, column-major, small integers so that
// every product and sum is exact in both precisions.
template <typename T>
static bool check(rocblas_handle handle, int n, const char* name) {
  std::vector<T> a(n * n), b(n * n), c(n * n), expected(n * n);
  for (int i = 0; i < n * n; ++i) {
    a[i] = T((i * 7) % 5) - 2;
    b[i] = T((i * 3) % 7) - 3;
    c[i] = T(i % 3);
  }
  const T alpha = 2, beta = -1;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) {
      T sum = 0;
      for (int l = 0; l < n; ++l) sum += a[i + l * n] * b[j + l * n];
      expected[i + j * n] = alpha * sum + beta * c[i + j * n];
    }
  T *da, *db, *dc;
  size_t bytes = n * n * sizeof(T);
  CHECK(hipMalloc(&da, bytes));
  CHECK(hipMalloc(&db, bytes));
  CHECK(hipMalloc(&dc, bytes));
  CHECK(hipMemcpy(da, a.data(), bytes, hipMemcpyHostToDevice));
  CHECK(hipMemcpy(db, b.data(), bytes, hipMemcpyHostToDevice));
  CHECK(hipMemcpy(dc, c.data(), bytes, hipMemcpyHostToDevice));
  CHECK(gemm<T>(handle, n, &alpha, da, db, &beta, dc));
  CHECK(hipMemcpy(c.data(), dc, bytes, hipMemcpyDeviceToHost));
  CHECK(hipFree(da));
  CHECK(hipFree(db));
  CHECK(hipFree(dc));
  int wrong = 0;
  for (int i = 0; i < n * n; ++i)
    if (c[i] != expected[i]) {
      if (wrong++ < 3) std::printf("%s %d: C[%d] = %g, expected %g\n", name, n, i, (double)c[i], (double)expected[i]);
    }
  std::printf("%s %dx%dx%d: %s\n", name, n, n, n, wrong ? "FAIL" : "PASS");
  return wrong == 0;
}

int main() {
  rocblas_handle handle;
  if (rocblas_create_handle(&handle) != rocblas_status_success) {
    std::printf("rocblas_create_handle failed\n");
    return 1;
  }
  bool ok = true;
  for (int n : {64, 200}) {
    ok = check<float>(handle, n, "sgemm") && ok;
    ok = check<double>(handle, n, "dgemm") && ok;
  }
  rocblas_destroy_handle(handle);
  return ok ? 0 : 1;
}
