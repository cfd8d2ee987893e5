// expect: hook `__gpuinstr_payload_0` uses the reserved name prefix `__gpuinstr`
#include <gpuinstr/gpuinstr.h>
GPUINSTR_DEVICE_MODULE

GPUINSTR_HOOK __gpuinstr_payload_0() {}
