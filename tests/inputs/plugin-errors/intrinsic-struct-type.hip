// expect: intrinsic `mytool::twoValues` returns unsupported type
// expect: intrinsics take and return integers, floating-point values, pointers or vectors of them
#include <gpuinstr/gpuinstr.h>
GPUINSTR_DEVICE_MODULE

struct Pair {
  uint64_t A, B;
};
namespace mytool {
GPUINSTR_INTRINSIC Pair twoValues(uint64_t Seed) {
  gpuinstr::detail::keepAlive(Seed);
  return Pair{Seed, Seed};
}
} // namespace mytool

GPUINSTR_HOOK usesPair() {
  Pair P = mytool::twoValues(7);
  gpuinstr::writeExec(P.A + P.B);
}
