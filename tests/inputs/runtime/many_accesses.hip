// One long dispatch for the rings of records (docs/runtime.md): a gather
// whose every lane makes ROUNDS scattered loads and one store, so a grid
// of THREADS work-items makes THREADS x (ROUNDS + 1) lane accesses (the
// default, 65,536 x 801, is 52,494,336); and a loop whose branch diverges
// data-dependently in every round (a long run of branch records).
//
//   many_accesses gather|diverge [ROUNDS] [THREADS]
//
// Prints the buffer's address (two runs can then compare addresses) and a
// checksum of what the kernels wrote.
#include <hip/hip_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CHECK(call)                                                                                    \
  do {                                                                                                 \
    hipError_t status = (call);                                                                        \
    if (status != hipSuccess) {                                                                        \
      std::fprintf(stderr, "%s: %s\n", #call, hipGetErrorString(status));                             \
      return 1;                                                                                        \
    }                                                                                                  \
  } while (0)

__global__ void gather(const uint32_t *in, uint32_t *out, uint32_t n, uint32_t rounds) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t j = i, sum = 0;
  for (uint32_t r = 0; r < rounds; ++r) {
    j = (j * 1103515245u + 12345u) % n;
    sum += in[j];
  }
  out[i] = sum;
}

__global__ void diverge(uint32_t *out, uint32_t rounds) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t x = i * 2654435761u, sum = 0;
  for (uint32_t r = 0; r < rounds; ++r) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    // A side with a loop of its own stays a branch (an if/else of one
    // instruction each would become a select).
    if (x & 1) {
      for (uint32_t k = 0; k < (x >> 28); ++k)
        sum = sum * 31 + k;
    }
  }
  out[i] = sum;
}

int main(int argc, char **argv) {
  const bool branches = argc > 1 && std::string(argv[1]) == "diverge";
  if (argc < 2 || (!branches && std::string(argv[1]) != "gather")) {
    std::fprintf(stderr, "usage: %s gather|diverge [ROUNDS] [THREADS]\n", argv[0]);
    return 2;
  }
  const uint32_t rounds = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 800;
  const uint32_t threads = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 65536;
  const uint32_t n = 1u << 20, block = 256;
  if (threads == 0 || threads % block != 0) {
    std::fprintf(stderr, "THREADS must be a multiple of %u\n", block);
    return 2;
  }
  std::vector<uint32_t> host(n);
  for (uint32_t k = 0; k < n; ++k)
    host[k] = k * 7 + 1;
  uint32_t *in = nullptr, *out = nullptr;
  CHECK(hipMalloc(&in, n * sizeof(uint32_t)));
  CHECK(hipMalloc(&out, threads * sizeof(uint32_t)));
  CHECK(hipMemcpy(in, host.data(), n * sizeof(uint32_t), hipMemcpyHostToDevice));
  std::printf("buffers at %p and %p\n", static_cast<void *>(in), static_cast<void *>(out));
  if (branches)
    diverge<<<threads / block, block>>>(out, rounds);
  else
    gather<<<threads / block, block>>>(in, out, n, rounds);
  CHECK(hipGetLastError());
  std::vector<uint32_t> result(threads);
  CHECK(hipMemcpy(result.data(), out, threads * sizeof(uint32_t), hipMemcpyDeviceToHost));
  uint64_t checksum = 0;
  for (uint32_t v : result)
    checksum = checksum * 31 + v;
  std::printf("%s: %u work-items, %u rounds, checksum %llu\n", argv[1], threads, rounds,
              static_cast<unsigned long long>(checksum));
  CHECK(hipFree(in));
  CHECK(hipFree(out));
  return 0;
}
