// Debian 12's rocRAND through its public API, checked on the CPU: the
// Philox generator's numbers against Philox4x32-10 (Random123), uniform
// floats from them, and the MRG32k3a generator's statistics.
#include <hip/hip_runtime.h>
#include <rocrand/rocrand.h>
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

static void philox4x32_10(unsigned counter[4], unsigned key[2], unsigned out[4]) {
  unsigned c[4] = {counter[0], counter[1], counter[2], counter[3]};
  unsigned k[2] = {key[0], key[1]};
  for (int round = 0; round < 10; round++) {
    if (round > 0) {
      k[0] += 0x9E3779B9u;
      k[1] += 0xBB67AE85u;
    }
    unsigned long long p0 = 0xD2511F53ull * c[0];
    unsigned long long p1 = 0xCD9E8D57ull * c[2];
    unsigned next[4] = {unsigned(p1 >> 32) ^ c[1] ^ k[0], unsigned(p1), unsigned(p0 >> 32) ^ c[3] ^ k[1], unsigned(p0)};
    for (int i = 0; i < 4; i++) c[i] = next[i];
  }
  for (int i = 0; i < 4; i++) out[i] = c[i];
}

int main() {
  const size_t n = 4096;
  const unsigned long long seed = 0x9abcdef012345678ull;
  unsigned key[2] = {unsigned(seed), unsigned(seed >> 32)};
  std::vector<unsigned> expected(n);
  for (unsigned c = 0; c < n / 4; c++) {
    unsigned counter[4] = {c, 0, 0, 0};
    philox4x32_10(counter, key, &expected[4 * c]);
  }

  unsigned* numbers;
  float* uniforms;
  CHECK(hipMalloc(&numbers, n * sizeof(unsigned)));
  CHECK(hipMalloc(&uniforms, n * sizeof(float)));
  rocrand_generator philox;
  CHECK(rocrand_create_generator(&philox, ROCRAND_RNG_PSEUDO_PHILOX4_32_10));
  CHECK(rocrand_set_seed(philox, seed));
  CHECK(rocrand_generate(philox, numbers, n));
  std::vector<unsigned> generated(n);
  CHECK(hipMemcpy(generated.data(), numbers, n * sizeof(unsigned), hipMemcpyDeviceToHost));
  size_t same = 0;
  for (size_t i = 0; i < n; i++) same += generated[i] == expected[i];
  printf("philox4x32-10 numbers: %zu of %zu as Random123 computes them\n", same, n);

  CHECK(rocrand_destroy_generator(philox));
  CHECK(rocrand_create_generator(&philox, ROCRAND_RNG_PSEUDO_PHILOX4_32_10));
  CHECK(rocrand_set_seed(philox, seed));
  CHECK(rocrand_generate_uniform(philox, uniforms, n));
  std::vector<float> floats(n);
  CHECK(hipMemcpy(floats.data(), uniforms, n * sizeof(float), hipMemcpyDeviceToHost));
  size_t close = 0;
  const float scale = 2.3283064e-10f;  // 2^-32
  for (size_t i = 0; i < n; i++) close += std::fabs(floats[i] - (scale + expected[i] * scale)) <= 1e-7f;
  printf("uniform floats: %zu of %zu from the same numbers\n", close, n);

  rocrand_generator mrg;
  CHECK(rocrand_create_generator(&mrg, ROCRAND_RNG_PSEUDO_MRG32K3A));
  CHECK(rocrand_generate_uniform(mrg, uniforms, n));
  CHECK(hipMemcpy(floats.data(), uniforms, n * sizeof(float), hipMemcpyDeviceToHost));
  double sum = 0;
  bool in_range = true;
  for (float f : floats) {
    sum += f;
    in_range &= f > 0.0f && f <= 1.0f;
  }
  double mean = sum / n;
  printf("mrg32k3a uniform: mean %.3f, all in (0, 1]: %s\n", mean, in_range ? "yes" : "no");
  bool ok = same == n && close == n && in_range && std::fabs(mean - 0.5) < 0.02;
  CHECK(rocrand_destroy_generator(philox));
  CHECK(rocrand_destroy_generator(mrg));
  printf("%s\n", ok ? "PASSED" : "FAILED");
  return ok ? 0 : 1;
}
