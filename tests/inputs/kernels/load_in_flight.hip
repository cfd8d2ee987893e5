// A load whose result is read only after other work: between the
// global_load and its s_waitcnt, v0 is still being written, and v2 and v3
// are computed while it lands. A payload that reads v0 there must wait for
// vmcnt first; one that touches none of the load's registers need not.
#include <hip/hip_runtime.h>

__global__ void loadInFlight(int* out, const int* in) {
    asm volatile(
        "v_mbcnt_lo_u32_b32 v1, -1, 0\n"
        "v_mbcnt_hi_u32_b32 v1, -1, v1\n"
        "v_lshlrev_b32 v1, 2, v1\n"
        "global_load_dword v0, v1, %1\n"
        "v_add_u32 v2, v1, v1\n"
        "v_sub_u32 v3, v2, v1\n"
        "s_waitcnt vmcnt(0)\n"
        "v_add_u32 v0, v0, v2\n"
        "v_add_u32 v0, v0, v3\n"
        "global_store_dword v1, v0, %0\n"
        "s_waitcnt vmcnt(0)"
        :
        : "s"(out), "s"(in)
        : "memory", "v0", "v1", "v2", "v3");
}
