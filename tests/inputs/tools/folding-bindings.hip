// Intrinsic bindings whose bodies an optimiser can see through (issue 20,
// item 3): a constant return, an uninitialised return, and a side-effect-
// free void one whose result nothing reads. Every source call must reach
// the embedded module as a call to the intrinsic.
#include <gpuinstr/gpuinstr.h>

GPUINSTR_DEVICE_MODULE

namespace mytool {
GPUINSTR_INTRINSIC unsigned hwId() { return 0; }
GPUINSTR_INTRINSIC unsigned uninitialised() {
  unsigned Value;
  return Value;
}
GPUINSTR_INTRINSIC void mark(unsigned) {}
} // namespace mytool

__device__ unsigned Seen[4];

GPUINSTR_HOOK record() {
  Seen[0] = mytool::hwId();
  Seen[1] = mytool::hwId() + mytool::uninitialised();
  mytool::mark(7);
}
