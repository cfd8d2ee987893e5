// Opcode histogram: how many times each instruction opcode was issued, per
// wavefront (an instruction executed by a wavefront counts once, whatever
// its EXEC mask).
#include <gpuinstr/gpuinstr.h>

GPUINSTR_DEVICE_MODULE

/// Indexed by LLVM 15's AMDGPU pseudo opcode number (the plan passes it).
constexpr uint32_t OpcodeSlots = 1u << 15;
__attribute__((managed)) uint64_t OpcodeHistogram[OpcodeSlots];

GPUINSTR_HOOK countOpcode(uint32_t Opcode) {
  uint64_t ExecMask = __builtin_amdgcn_read_exec();
  // One lane counts for the wavefront, even where EXEC is zero: the first
  // active one, lane 63 when none is.
  gpuinstr::writeExec(gpuinstr::firstActiveLane(ExecMask));
  atomicAdd(reinterpret_cast<unsigned long long *>(&OpcodeHistogram[Opcode % OpcodeSlots]), 1ull);
  gpuinstr::writeExec(ExecMask);
}

GPUINSTR_EXPORT_HOOK_HANDLE(countOpcode);
