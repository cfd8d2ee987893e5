// The runtime's one kernel: after each observed dispatch it copies the
// tool globals of the dispatch's code object out to host memory and puts
// their initial bytes back, before anything later in the queue runs. A
// buffer of records (GPUINSTR_RECORDS) is filled from its start and counted
// by another global: only the records written are copied, and the buffer
// is not reset (its count is). A ring's `Reserved` and `Dropped` (in host
// memory) are copied like a global and never reset: where the dispatch's
// records end, and how many were dropped so far.
#include <hip/hip_runtime.h>
#include <stdint.h>

// One tool global; the layout src/runtime.rs writes.
struct Entry {
  uint8_t* global;
  uint8_t* out;
  const uint8_t* initial;
  uint64_t bytes;
  // A record buffer's count (NULL for any other global), and bytes per record.
  const uint64_t* count;
  uint64_t record_bytes;
  // Bits: `global` (1) or `count` (2) is the address of a pointer to the
  // data (a managed global, which HIP may have moved), not the data.
  uint64_t through;
};

constexpr uint64_t GlobalThroughPointer = 1, CountThroughPointer = 2;

__device__ uint8_t* data_of(uint8_t* global, uint64_t through) {
  return (through & GlobalThroughPointer) ? *reinterpret_cast<uint8_t* const*>(global) : global;
}

__device__ const uint64_t* count_of(const uint64_t* count, uint64_t through) {
  return (through & CountThroughPointer) ? *reinterpret_cast<const uint64_t* const*>(count) : count;
}

constexpr uint32_t Lanes = 64;

// Copies `bytes` from `from` to `to`, and `initial` back over `from` if given.
__device__ void copy(uint8_t* from, uint8_t* to, const uint8_t* initial, uint64_t bytes, uint32_t lane) {
  const bool words = ((reinterpret_cast<uintptr_t>(from) | reinterpret_cast<uintptr_t>(to) |
                       reinterpret_cast<uintptr_t>(initial) | bytes) & 3) == 0;
  if (words) {
    uint32_t* global = reinterpret_cast<uint32_t*>(from);
    uint32_t* out = reinterpret_cast<uint32_t*>(to);
    const uint32_t* reset = reinterpret_cast<const uint32_t*>(initial);
    for (uint64_t i = lane; i < bytes / 4; i += Lanes) {
      out[i] = global[i];
      if (reset)
        global[i] = reset[i];
    }
  } else {
    for (uint64_t i = lane; i < bytes; i += Lanes) {
      to[i] = from[i];
      if (initial)
        from[i] = initial[i];
    }
  }
}

extern "C" __global__ void __launch_bounds__(Lanes)
    gpuinstr_collect(const Entry* entries, uint32_t count) {
  const uint32_t lane = __builtin_amdgcn_workitem_id_x();
  // Record buffers first: every lane reads their counts before the second
  // pass resets them.
  for (uint32_t e = 0; e < count; ++e) {
    const Entry entry = entries[e];
    if (!entry.count)
      continue;
    const uint64_t capacity = entry.bytes / entry.record_bytes;
    const uint64_t count = *count_of(entry.count, entry.through);
    const uint64_t written = count < capacity ? count : capacity;
    copy(data_of(entry.global, entry.through), entry.out, nullptr, written * entry.record_bytes, lane);
  }
  __syncthreads();
  for (uint32_t e = 0; e < count; ++e) {
    const Entry entry = entries[e];
    if (!entry.count)
      copy(data_of(entry.global, entry.through), entry.out, entry.initial, entry.bytes, lane);
  }
}
