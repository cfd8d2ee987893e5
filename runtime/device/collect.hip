// The runtime's one kernel: after each observed dispatch it copies the
// tool globals of the dispatch's code object out to host memory and puts
// their initial bytes back, before anything later in the queue runs.
#include <hip/hip_runtime.h>
#include <stdint.h>

// One tool global; the layout src/collect.rs writes.
struct Entry {
  uint8_t* global;
  uint8_t* out;
  const uint8_t* initial;
  uint64_t bytes;
};

constexpr uint32_t Lanes = 64;

extern "C" __global__ void __launch_bounds__(Lanes)
    gpuinstr_collect(const Entry* entries, uint32_t count) {
  const uint32_t lane = __builtin_amdgcn_workitem_id_x();
  for (uint32_t e = 0; e < count; ++e) {
    const Entry entry = entries[e];
    const bool words = ((reinterpret_cast<uintptr_t>(entry.global) | reinterpret_cast<uintptr_t>(entry.out) |
                         reinterpret_cast<uintptr_t>(entry.initial) | entry.bytes) & 3) == 0;
    if (words) {
      uint32_t* global = reinterpret_cast<uint32_t*>(entry.global);
      uint32_t* out = reinterpret_cast<uint32_t*>(entry.out);
      const uint32_t* initial = reinterpret_cast<const uint32_t*>(entry.initial);
      for (uint64_t i = lane; i < entry.bytes / 4; i += Lanes) {
        out[i] = global[i];
        global[i] = initial[i];
      }
    } else {
      for (uint64_t i = lane; i < entry.bytes; i += Lanes) {
        entry.out[i] = entry.global[i];
        entry.global[i] = entry.initial[i];
      }
    }
  }
}
