// A HIP program for the memory tracer's tests: accesses in every space a
// trace distinguishes. `shared` goes through LDS (single and two-address
// forms, an atomic); `buffers` through buffer resources as Tensile's GEMMs
// do, raw (offsets, `offen`) and structured (indices, `idxen`), with lanes
// past the buffers' ends out of range (loads give 0, stores do nothing).
#include <hip/hip_runtime.h>
#include <cstdint>
#include <cstdio>
#include <vector>

typedef int Resource __attribute__((ext_vector_type(4)));

// A buffer resource (V#) as GFX9 lays it out: base, stride, num_records,
// and a 32-bit data format in the last word.
__device__ Resource resource(const void *base, unsigned records, unsigned stride) {
  const uint64_t address = reinterpret_cast<uint64_t>(base);
  Resource r;
  r.x = int(uint32_t(address));
  r.y = int(uint32_t(address >> 32) & 0xffff) | int(stride << 16);
  r.z = int(records);
  r.w = 0x00027000;
  return r;
}

__global__ void shared(const float *in, float *out, unsigned *hits) {
  __shared__ float tile[512];
  __shared__ unsigned counter;
  const unsigned t = threadIdx.x;
  if (t == 0) counter = 0;
  tile[2 * t] = in[blockIdx.x * 256 + t];
  tile[2 * t + 1] = 1.0f;
  __syncthreads();
  if (t % 3 == 0) atomicAdd(&counter, 1u);
  const unsigned u = 255 - t;
  // tile[(t * 32) % 512]: 16 distinct dwords of one bank for each 32 lanes
  // (a 16-way bank conflict, for memory-efficiency's test).
  out[blockIdx.x * 256 + t] = tile[2 * u] + tile[2 * u + 1] + tile[u] * tile[u + 256] + tile[(t * 32) % 512];
  __syncthreads();
  if (t == 0) hits[blockIdx.x] = counter;
}

// Each of `n` elements doubled; the grid has lanes past `n`.
__global__ void buffers(const float *in, float *out, float *structured, unsigned n) {
  const Resource source = resource(in, n * 4, 0);
  const Resource destination = resource(out, n * 4, 0);
  const Resource elements = resource(structured, n, 4);
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned offset = i * 4;
  float x;
  // Raw: lanes whose dword ends past n * 4 bytes read 0.
  asm volatile("buffer_load_dword %0, %1, %2, 0 offen offset:4\n\ts_waitcnt vmcnt(0)"
               : "=v"(x) : "v"(offset), "s"(source) : "memory");
  asm volatile("buffer_store_dword %0, %1, %2, 0 offen\n\ts_waitcnt vmcnt(0)"
               :: "v"(x * 2.0f), "v"(offset), "s"(destination) : "memory");
  // Structured (stride 4): indices from n on are out of range.
  asm volatile("buffer_store_dword %0, %1, %2, 0 idxen\n\ts_waitcnt vmcnt(0)"
               :: "v"(float(i)), "v"(i), "s"(elements) : "memory");
}

int main() {
  const unsigned groups = 4, n = 1000; // `in` holds 1,024 floats
  std::vector<float> host(groups * 256);
  for (unsigned i = 0; i < host.size(); i++) host[i] = float(i % 7);
  float *in, *out, *doubled, *structured;
  unsigned *hits;
  hipMalloc(&in, host.size() * sizeof(float));
  hipMalloc(&out, host.size() * sizeof(float));
  hipMalloc(&doubled, n * sizeof(float));
  hipMalloc(&structured, n * sizeof(float));
  hipMalloc(&hits, groups * sizeof(unsigned));
  hipMemcpy(in, host.data(), host.size() * sizeof(float), hipMemcpyHostToDevice);
  shared<<<groups, 256>>>(in, out, hits);
  buffers<<<(n + 127) / 128, 128>>>(in, doubled, structured, n);
  std::vector<float> result(host.size()), twice(n), indices(n);
  std::vector<unsigned> counted(groups);
  hipMemcpy(result.data(), out, result.size() * sizeof(float), hipMemcpyDeviceToHost);
  hipMemcpy(twice.data(), doubled, n * sizeof(float), hipMemcpyDeviceToHost);
  hipMemcpy(indices.data(), structured, n * sizeof(float), hipMemcpyDeviceToHost);
  hipMemcpy(counted.data(), hits, groups * sizeof(unsigned), hipMemcpyDeviceToHost);
  int wrong = 0;
  for (unsigned g = 0; g < groups; g++) {
    float tile[512];
    for (unsigned t = 0; t < 256; t++) {
      tile[2 * t] = host[g * 256 + t];
      tile[2 * t + 1] = 1.0f;
    }
    for (unsigned t = 0; t < 256; t++) {
      const unsigned u = 255 - t;
      wrong += result[g * 256 + t] != tile[2 * u] + tile[2 * u + 1] + tile[u] * tile[u + 256] + tile[(t * 32) % 512];
    }
    wrong += counted[g] != 86;
  }
  // Element i reads in[i + 1]; the last reads past the buffer: 0.
  for (unsigned i = 0; i < n; i++) {
    wrong += twice[i] != (i + 1 < n ? 2.0f * host[i + 1] : 0.0f);
    wrong += indices[i] != float(i);
  }
  printf("%s: %d wrong\n", wrong ? "FAILED" : "PASSED", wrong);
  return wrong != 0;
}
