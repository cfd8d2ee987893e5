// A tool declaring a buffer of records (GPUINSTR_RECORDS) with plain
// __device__ globals: `logCounted` fills it as declared, `logUncounted`
// writes records and never the count the declaration names; and a ring
// (GPUINSTR_RING) that `stream` appends to.
#include <gpuinstr/gpuinstr.h>

GPUINSTR_DEVICE_MODULE

struct Entry {
  uint32_t Lane;
  uint32_t Value;
};
constexpr uint32_t Capacity = 256;
__device__ Entry Log[Capacity];
__device__ uint64_t LogCount = 0;
GPUINSTR_RECORDS(Log, LogCount)

GPUINSTR_HOOK logCounted(uint32_t Value) {
  const uint64_t Slot = atomicAdd(reinterpret_cast<unsigned long long *>(&LogCount), 1ull);
  if (Slot < Capacity)
    Log[Slot] = Entry{__lane_id(), Value};
}

GPUINSTR_HOOK logUncounted(uint32_t Value) { Log[__lane_id()] = Entry{__lane_id(), Value}; }

GPUINSTR_RING(Entry, Stream)

GPUINSTR_HOOK stream(uint32_t Value) { gpuinstr::append(Stream, Entry{__lane_id(), Value}); }

GPUINSTR_EXPORT_HOOK_HANDLE(logCounted);
GPUINSTR_EXPORT_HOOK_HANDLE(logUncounted);
GPUINSTR_EXPORT_HOOK_HANDLE(stream);
