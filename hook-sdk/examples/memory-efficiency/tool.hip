// Memory efficiency: per wavefront execution of a memory instruction, how
// well its lanes' accesses use the memory system. Global, flat and buffer
// accesses: the distinct cache lines the wavefront touches against the
// fewest its bytes could fit in. LDS accesses: the cycles the banks take
// against the cycles without bank conflicts. One record per wavefront
// execution goes to the host part (a ring: none is dropped).
#include <gpuinstr/gpuinstr.h>

GPUINSTR_DEVICE_MODULE

/// (No wavefront id: the numbers are per instruction, and computing it
/// from the dispatch packet cost a tenth of the hook at every point.)
struct EfficiencyRecord {
  uint32_t Site;      // the plan's site number (the instruction)
  uint32_t Unused0;
  uint16_t Used;      // lines touched, or LDS cycles taken
  uint16_t Ideal;     // the fewest lines, or the cycles without conflicts
  uint8_t Lanes;      // lanes that accessed (64 is stored as 0)
  uint8_t Space;      // 0 flat, 1 global, 2 buffer, 3 LDS
  uint8_t Bytes;      // per lane
  uint8_t Unused1;
};
GPUINSTR_RING(EfficiencyRecord, Efficiency)

namespace {
constexpr uint32_t LdsBanks = 32;

/// Lane `Lane`'s 64-bit `Value` (a uniform lane: the result is in SGPRs).
__device__ uint64_t readLane(uint64_t Value, int Lane) {
  const uint32_t Low = __builtin_amdgcn_readlane(static_cast<uint32_t>(Value), Lane);
  const uint32_t High = __builtin_amdgcn_readlane(static_cast<uint32_t>(Value >> 32), Lane);
  return (static_cast<uint64_t>(High) << 32) | Low;
}

/// Distinct `LineBytes` lines the active lanes' accesses touch: each lane's
/// bytes [Address, Address + Bytes) lie in one line or two. One round per
/// distinct line: the lowest lane with a line not yet counted names it,
/// and every lane holding it drops it.
__device__ uint32_t linesTouched(uint64_t Address, uint32_t Bytes, uint32_t LineBytes) {
  const uint64_t First = Address / LineBytes, Last = (Address + Bytes - 1) / LineBytes;
  bool PendingFirst = true, PendingLast = Last != First;
  uint32_t Lines = 0;
  for (;;) {
    const uint64_t Waiting = __ballot(PendingFirst || PendingLast);
    if (Waiting == 0)
      return Lines;
    const uint64_t Line = readLane(PendingFirst ? First : Last, __ffsll(static_cast<unsigned long long>(Waiting)) - 1);
    PendingFirst = PendingFirst && First != Line;
    PendingLast = PendingLast && Last != Line;
    ++Lines;
  }
}

/// Cycles the LDS takes for the access, and the cycles without bank
/// conflicts. GFX9's LDS has 32 banks of 4 bytes and serves 128 bytes a
/// cycle: the lanes go in groups of 32 (accesses of up to a dword), 16
/// (8 bytes) or 8 (12 and 16 bytes), in lane order; a group takes as many
/// cycles as the most distinct dwords any one bank holds for it (lanes
/// reading one dword share it). The counts per bank stay in scalar
/// registers: eight 8-bit counters in each of four 64-bit words.
__device__ void ldsCycles(uint32_t Address, uint32_t Bytes, uint32_t &Cycles, uint32_t &Ideal) {
  const uint32_t Dwords = Bytes <= 4 ? 1 : (Bytes + 3) / 4;
  const uint32_t GroupLanes = Dwords == 1 ? 32 : (Dwords == 2 ? 16 : 8);
  const uint32_t FirstDword = Address / 4;
  const uint32_t Lane = __lane_id();
  uint32_t Pending = (1u << Dwords) - 1; // which of this lane's dwords are not yet counted
  Cycles = 0;
  Ideal = 0;
  // Loops stay loops: a payload is inlined at every point, and unrolled
  // for a constant access size the hook's code grew eightfold.
#pragma unroll 1
  for (uint32_t Group = 0; Group < 64 / GroupLanes; ++Group) {
    const bool Mine = Lane / GroupLanes == Group;
    if (__ballot(Mine) == 0)
      continue;
    ++Ideal;
    uint64_t Counts[4] = {0, 0, 0, 0};
    for (;;) {
      const uint64_t Waiting = __ballot(Mine && Pending != 0);
      if (Waiting == 0)
        break;
      const uint32_t Next = FirstDword + (Pending != 0 ? __builtin_ctz(Pending) : 0);
      const uint32_t Dword = __builtin_amdgcn_readlane(Next, __ffsll(static_cast<unsigned long long>(Waiting)) - 1);
      if (Mine)
        for (uint32_t K = 0; K < Dwords; ++K)
          if (FirstDword + K == Dword)
            Pending &= ~(1u << K);
      const uint32_t Bank = Dword % LdsBanks;
      const uint64_t One = 1ull << (8 * (Bank % 8));
      // Uniform branches, so that the counters stay scalar.
      if (Bank < 8)
        Counts[0] += One;
      else if (Bank < 16)
        Counts[1] += One;
      else if (Bank < 24)
        Counts[2] += One;
      else
        Counts[3] += One;
    }
    uint32_t Most = 0;
#pragma unroll 1
    for (uint32_t Bank = 0; Bank < LdsBanks; ++Bank)
      Most = max(Most, static_cast<uint32_t>(Counts[Bank / 8] >> (8 * (Bank % 8))) & 0xff);
    Cycles += Most;
  }
}
} // namespace

GPUINSTR_HOOK measureAccess(uint32_t Site, uint64_t Address, uint32_t Space, uint32_t Bytes, uint32_t LineBytes) {
  const uint64_t Active = __builtin_amdgcn_read_exec();
  const uint32_t Lanes = __popcll(Active);
  uint32_t Used = 0, Ideal = 0;
  if (Space == 3) {
    ldsCycles(static_cast<uint32_t>(Address), Bytes, Used, Ideal);
  } else {
    Used = linesTouched(Address, Bytes, LineBytes);
    Ideal = (Lanes * Bytes + LineBytes - 1) / LineBytes;
  }
  // The first active lane records for the wavefront, through an ordinary
  // branch (as branch-divergence does).
  if (static_cast<int>(__lane_id()) != __ffsll(static_cast<unsigned long long>(Active)) - 1)
    return;
  gpuinstr::append(Efficiency,
                   EfficiencyRecord{Site, 0, static_cast<uint16_t>(Used), static_cast<uint16_t>(Ideal),
                                    static_cast<uint8_t>(Lanes), static_cast<uint8_t>(Space),
                                    static_cast<uint8_t>(Bytes), 0});
}

GPUINSTR_EXPORT_HOOK_HANDLE(measureAccess);
