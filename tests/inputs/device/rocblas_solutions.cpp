// rocBLAS's solutions for an f32 GEMM of size N with both operands
// transposed (TensileLibrary_Type_SS_Contraction_l_Alik_Bjlk_*: some of its
// kernels load straight into LDS, `buffer_load_dword ... lds`), each forced
// with rocblas_gemm_ex's solution index and checked against the CPU (small
// integers: exact). `rocblas_solutions N [INDEX]`: every solution, or the
// one numbered INDEX. Prints one line per solution run; exits 1 on a wrong
// result.
#include <hip/hip_runtime.h>
#define ROCBLAS_BETA_FEATURES_API
#include <rocblas/rocblas.h>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char **argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 256;
  const int only = argc > 2 ? std::atoi(argv[2]) : -1;
  rocblas_handle handle;
  if (rocblas_create_handle(&handle) != rocblas_status_success) return 1;
  std::vector<float> a(n * n), b(n * n), c0(n * n), c(n * n), expected(n * n);
  for (int i = 0; i < n * n; ++i) {
    a[i] = float((i * 7) % 5) - 2;
    b[i] = float((i * 3) % 7) - 3;
    c0[i] = float(i % 3);
  }
  const float alpha = 2, beta = -1;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) {
      float sum = 0;
      for (int l = 0; l < n; ++l) sum += a[l + i * n] * b[j + l * n];
      expected[i + j * n] = alpha * sum + beta * c0[i + j * n];
    }
  float *da, *db, *dc;
  size_t bytes = size_t(n) * n * sizeof(float);
  hipMalloc(&da, bytes);
  hipMalloc(&db, bytes);
  hipMalloc(&dc, bytes);
  hipMemcpy(da, a.data(), bytes, hipMemcpyHostToDevice);
  hipMemcpy(db, b.data(), bytes, hipMemcpyHostToDevice);
  const auto T = rocblas_operation_transpose;
  const auto f = rocblas_datatype_f32_r;
  rocblas_int size = 0;
  if (rocblas_gemm_ex_get_solutions(handle, T, T, n, n, n, &alpha, da, f, n, db, f, n, &beta, dc, f, n, dc, f, n, f,
                                    rocblas_gemm_algo_solution_index, rocblas_gemm_flags_none, nullptr, &size) !=
      rocblas_status_success) {
    std::printf("get_solutions failed\n");
    return 1;
  }
  std::vector<rocblas_int> solutions(size);
  rocblas_gemm_ex_get_solutions(handle, T, T, n, n, n, &alpha, da, f, n, db, f, n, &beta, dc, f, n, dc, f, n, f,
                                rocblas_gemm_algo_solution_index, rocblas_gemm_flags_none, solutions.data(), &size);
  std::printf("%d solutions\n", size);
  int failed = 0;
  for (int s : solutions) {
    if (only >= 0 && s != only) continue;
    hipMemcpy(dc, c0.data(), bytes, hipMemcpyHostToDevice);
    auto status = rocblas_gemm_ex(handle, T, T, n, n, n, &alpha, da, f, n, db, f, n, &beta, dc, f, n, dc, f, n, f,
                                  rocblas_gemm_algo_solution_index, s, rocblas_gemm_flags_none);
    hipMemcpy(c.data(), dc, bytes, hipMemcpyDeviceToHost);
    int wrong = 0;
    for (int i = 0; i < n * n; ++i) wrong += c[i] != expected[i];
    std::printf("solution %d: status %d, %s\n", s, (int)status, wrong ? "FAIL" : "PASS");
    failed += wrong != 0;
  }
  rocblas_destroy_handle(handle);
  return failed ? 1 : 0;
}
