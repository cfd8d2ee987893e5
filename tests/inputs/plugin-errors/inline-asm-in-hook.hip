// expect: hook `usesAsm` uses inline assembly
// expect: use a gpuinstr intrinsic instead
#include <gpuinstr/gpuinstr.h>
GPUINSTR_DEVICE_MODULE

GPUINSTR_HOOK usesAsm() {
  asm volatile("s_nop 1");
}
