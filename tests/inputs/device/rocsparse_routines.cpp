// Debian 12's rocSPARSE through its public API, checked on the CPU: csrmv
// (y = alpha A x + beta y) without and with its analysis step, axpyi,
// gthr and csr2coo on a banded random matrix.
#include <hip/hip_runtime.h>
#include <rocsparse/rocsparse.h>
#include <cmath>
#include <cstdio>
#include <vector>

#define CHECK(call)                                                \
  do {                                                             \
    auto status = (call);                                          \
    if (status != 0) {                                             \
      printf("%s failed: %d\n", #call, static_cast<int>(status));  \
      return 1;                                                    \
    }                                                              \
  } while (0)

template <typename T>
static T* to_device(const std::vector<T>& host) {
  T* device = nullptr;
  if (hipMalloc(&device, host.size() * sizeof(T)) != hipSuccess) return nullptr;
  if (hipMemcpy(device, host.data(), host.size() * sizeof(T), hipMemcpyHostToDevice) != hipSuccess) return nullptr;
  return device;
}

template <typename T>
static std::vector<T> to_host(const T* device, size_t n) {
  std::vector<T> host(n);
  hipMemcpy(host.data(), device, n * sizeof(T), hipMemcpyDeviceToHost);
  return host;
}

int main() {
  // A banded m x n matrix with a few entries per row, values from an LCG.
  const int m = 600, n = 500;
  unsigned state = 12345;
  auto next = [&]() { state = state * 1664525u + 1013904223u; return state; };
  std::vector<int> row_ptr{0}, col_ind;
  std::vector<double> val;
  for (int r = 0; r < m; r++) {
    for (int c = std::max(0, r * n / m - 3); c < std::min(n, r * n / m + 4); c++) {
      if (next() % 3 != 0) {
        col_ind.push_back(c);
        val.push_back(double(int(next() % 2001) - 1000) / 100.0);
      }
    }
    row_ptr.push_back(int(col_ind.size()));
  }
  const int nnz = int(val.size());
  std::vector<double> x(n), y(m);
  for (auto& v : x) v = double(int(next() % 201) - 100) / 10.0;
  for (auto& v : y) v = double(int(next() % 201) - 100) / 10.0;
  const double alpha = 1.5, beta = -0.5;
  std::vector<double> expected(m);
  for (int r = 0; r < m; r++) {
    double sum = 0;
    for (int k = row_ptr[r]; k < row_ptr[r + 1]; k++) sum += val[k] * x[col_ind[k]];
    expected[r] = alpha * sum + beta * y[r];
  }
  auto matches = [&](const std::vector<double>& got) {
    for (int r = 0; r < m; r++)
      if (std::fabs(got[r] - expected[r]) > 1e-9 * (1 + std::fabs(expected[r]))) return false;
    return true;
  };

  rocsparse_handle handle;
  CHECK(rocsparse_create_handle(&handle));
  rocsparse_mat_descr descr;
  CHECK(rocsparse_create_mat_descr(&descr));
  rocsparse_mat_info info;
  CHECK(rocsparse_create_mat_info(&info));
  int* d_row_ptr = to_device(row_ptr);
  int* d_col_ind = to_device(col_ind);
  double* d_val = to_device(val);
  double* d_x = to_device(x);
  double* d_y = to_device(y);
  CHECK(rocsparse_dcsrmv(handle, rocsparse_operation_none, m, n, nnz, &alpha, descr, d_val, d_row_ptr, d_col_ind,
                         nullptr, d_x, &beta, d_y));
  bool csrmv = matches(to_host(d_y, m));
  printf("csrmv: %s\n", csrmv ? "ok" : "FAILED");

  CHECK(hipMemcpy(d_y, y.data(), m * sizeof(double), hipMemcpyHostToDevice));
  CHECK(rocsparse_dcsrmv_analysis(handle, rocsparse_operation_none, m, n, nnz, descr, d_val, d_row_ptr, d_col_ind,
                                  info));
  CHECK(rocsparse_dcsrmv(handle, rocsparse_operation_none, m, n, nnz, &alpha, descr, d_val, d_row_ptr, d_col_ind,
                         info, d_x, &beta, d_y));
  bool analysed = matches(to_host(d_y, m));
  printf("csrmv after csrmv_analysis: %s\n", analysed ? "ok" : "FAILED");

  // axpyi: y[x_ind[i]] += alpha * x_val[i]; gthr: x_val[i] = y[x_ind[i]].
  std::vector<int> indices;
  std::vector<double> sparse;
  for (int i = 0; i < n; i += 7) {
    indices.push_back(i);
    sparse.push_back(double(i) / 4.0);
  }
  const int count = int(indices.size());
  std::vector<double> dense(n);
  for (int i = 0; i < n; i++) dense[i] = i * 0.25 - 3;
  int* d_indices = to_device(indices);
  double* d_sparse = to_device(sparse);
  double* d_dense = to_device(dense);
  const double a = 2.0;
  CHECK(rocsparse_daxpyi(handle, count, &a, d_sparse, d_indices, d_dense, rocsparse_index_base_zero));
  std::vector<double> after = to_host(d_dense, n);
  bool axpyi = true;
  for (int k = 0; k < count; k++) dense[indices[k]] += a * sparse[k];
  for (int i = 0; i < n; i++) axpyi &= after[i] == dense[i];
  printf("axpyi: %s\n", axpyi ? "ok" : "FAILED");
  CHECK(rocsparse_dgthr(handle, count, d_dense, d_sparse, d_indices, rocsparse_index_base_zero));
  std::vector<double> gathered = to_host(d_sparse, count);
  bool gthr = true;
  for (int k = 0; k < count; k++) gthr &= gathered[k] == dense[indices[k]];
  printf("gthr: %s\n", gthr ? "ok" : "FAILED");

  int* d_rows;
  CHECK(hipMalloc(&d_rows, nnz * sizeof(int)));
  CHECK(rocsparse_csr2coo(handle, d_row_ptr, nnz, m, d_rows, rocsparse_index_base_zero));
  std::vector<int> rows = to_host(d_rows, nnz);
  bool csr2coo = true;
  for (int r = 0; r < m; r++)
    for (int k = row_ptr[r]; k < row_ptr[r + 1]; k++) csr2coo &= rows[k] == r;
  printf("csr2coo: %s\n", csr2coo ? "ok" : "FAILED");

  CHECK(rocsparse_destroy_mat_info(info));
  CHECK(rocsparse_destroy_mat_descr(descr));
  CHECK(rocsparse_destroy_handle(handle));
  bool ok = csrmv && analysed && axpyi && gthr && csr2coo;
  printf("%s\n", ok ? "PASSED" : "FAILED");
  return ok ? 0 : 1;
}
