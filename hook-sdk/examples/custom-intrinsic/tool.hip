// A tool with intrinsics of its own: where each wavefront runs (HW_ID:
// wave slot, SIMD, compute unit, shader engine) and when (the shader
// clock). The lowerings are Rust code, in src/lib.rs of this example.
#include <gpuinstr/gpuinstr.h>

GPUINSTR_DEVICE_MODULE

namespace mytool {
/// The wave's HW_ID register (s_getreg_b32 hwreg(HW_REG_HW_ID)).
GPUINSTR_INTRINSIC uint32_t hwId() { return gpuinstr::detail::opaqueValue<uint32_t>(); }
/// The 64-bit shader clock (s_memtime).
GPUINSTR_INTRINSIC uint64_t clock() { return gpuinstr::detail::opaqueValue<uint64_t>(); }
} // namespace mytool

constexpr uint32_t Capacity = 4096;
__device__ uint32_t Recorded;
__device__ uint32_t Placement[Capacity];
__device__ uint64_t Time[Capacity];

/// Once per wavefront: where and when it reached the instrumented point.
GPUINSTR_HOOK recordPlacement() {
  if (__lane_id() == 0) {
    uint32_t Slot = atomicAdd(&Recorded, 1u);
    if (Slot < Capacity) {
      Placement[Slot] = mytool::hwId();
      Time[Slot] = mytool::clock();
    }
  }
}

GPUINSTR_EXPORT_HOOK_HANDLE(recordPlacement);
