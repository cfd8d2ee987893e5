// Hooks that compile but that gpuinstr-link must refuse, each with a clear
// message: wrong intrinsic argument types, a register that is not a
// constant, a register the target does not have, an intrinsic nobody
// registered a lowering for.
#include <gpuinstr/gpuinstr.h>

GPUINSTR_DEVICE_MODULE

__device__ float FloatCount;
__device__ uint32_t Sink;
__device__ uint32_t WhichRegister;

namespace mytool {
GPUINSTR_INTRINSIC uint32_t notRegistered() { return gpuinstr::detail::opaqueValue<uint32_t>(); }
} // namespace mytool

GPUINSTR_HOOK floatAtomic() { gpuinstr::sAtomicAdd(&FloatCount, 1.0f); }

GPUINSTR_HOOK runtimeRegister() { Sink = gpuinstr::readReg<uint32_t>(gpuinstr::sgpr(WhichRegister)); }

GPUINSTR_HOOK registerOutOfRange() { Sink = gpuinstr::readReg<uint32_t>(gpuinstr::sgpr(120)); }

GPUINSTR_HOOK unknownIntrinsic() { Sink = mytool::notRegistered(); }
