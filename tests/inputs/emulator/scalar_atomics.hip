#include <hip/hip_runtime.h>

// Scalar (SMEM) atomics. hipcc does not emit them for ordinary code, so
// inline assembly does: every wave of every workgroup applies each
// operation once, with values that depend on the workgroup.
typedef unsigned resource_t __attribute__((ext_vector_type(4)));

__global__ void scalarAtomics(unsigned* counters, unsigned long long* wide, unsigned* returned) {
  const unsigned wave = __builtin_amdgcn_readfirstlane(blockIdx.x * (blockDim.x / 64) + threadIdx.x / 64);
  unsigned old = 1;
  asm volatile("s_atomic_add %0, %1, 0x0 glc\n s_waitcnt lgkmcnt(0)" : "+s"(old) : "s"(counters) : "memory");
  unsigned block = blockIdx.x;
  asm volatile("s_atomic_umax %0, %1, 0x4\n s_waitcnt lgkmcnt(0)" : : "s"(block), "s"(counters) : "memory");
  unsigned bit = 1u << blockIdx.x;
  asm volatile("s_atomic_xor %0, %1, 0x8\n s_waitcnt lgkmcnt(0)" : : "s"(bit), "s"(counters) : "memory");
  // Compare-and-swap: only the first wave finds 0 there.
  unsigned long long swap = ((unsigned long long)0 << 32) | (wave + 100);
  asm volatile("s_atomic_cmpswap %0, %1, 0xc glc\n s_waitcnt lgkmcnt(0)" : "+s"(swap) : "s"(counters) : "memory");
  unsigned long long add = 0x100000001ull;
  asm volatile("s_atomic_add_x2 %0, %1, 0x0\n s_waitcnt lgkmcnt(0)" : : "s"(add), "s"(wide) : "memory");
  // An offset in an SGPR and a buffer resource over counters[4..8).
  unsigned limit = 2, offset = 16;
  asm volatile("s_atomic_inc %0, %1, %2\n s_waitcnt lgkmcnt(0)" : : "s"(limit), "s"(counters), "s"(offset) : "memory");
  unsigned long long base = (unsigned long long)(counters + 4);
  resource_t resource = {(unsigned)base, (unsigned)(base >> 32) & 0xffff, 16, 0x00027000};
  unsigned three = 3;
  asm volatile("s_buffer_atomic_sub %0, %1, 0x4 glc\n s_waitcnt lgkmcnt(0)" : "+s"(three) : "s"(resource) : "memory");
  if (threadIdx.x % 64 == 0) {
    returned[2 * wave] = old;
    returned[2 * wave + 1] = (unsigned)swap;
  }
}
