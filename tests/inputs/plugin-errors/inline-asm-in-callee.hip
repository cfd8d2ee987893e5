// expect: hook `countSomething` calls `readClock` (via countSomething -> step -> readClock), which uses inline assembly
#include <gpuinstr/gpuinstr.h>
GPUINSTR_DEVICE_MODULE

__device__ __attribute__((noinline)) uint64_t readClock() {
  uint64_t Time;
  asm volatile("s_memtime %0" : "=s"(Time));
  return Time;
}
__device__ __attribute__((noinline)) uint64_t step() { return readClock() + 1; }
__device__ uint64_t Sink;

GPUINSTR_HOOK countSomething() { Sink = step(); }
