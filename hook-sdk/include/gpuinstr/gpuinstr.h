// gpuinstr hook SDK: what a tool author writes hooks against.
//
// A tool is a HIP translation unit compiled with the gpuinstr pass plugin:
//
//   hipcc --offload-arch=gfx90a -fpass-plugin=libembed.so -c tool.hip
//
// The plugin embeds the preprocessed hooks as LLVM bitcode in the tool's
// device code object; `gpuinstr-link` later inlines them into application
// kernels. This header has no LLVM dependency.
//
// Names in this file are a stable interface: the plugin and the driver find
// hooks and intrinsics by the annotations below, and registers by the
// encoding of `gpuinstr::Reg` (kept in step with intrinsics/src/registers.rs
// by a test).
#ifndef GPUINSTR_GPUINSTR_H
#define GPUINSTR_GPUINSTR_H

#include <hip/hip_runtime.h>
#include <stdint.h>

/// Marks a translation unit as a gpuinstr tool device module. The managed
/// variable makes the HIP runtime load the tool's device code object before
/// the first kernel launch, and lets gpuinstr find the tool's code object.
#define GPUINSTR_DEVICE_MODULE                                                 \
  __attribute__((managed, used)) char __gpuinstr_reserved = 0;

/// What GPUINSTR_RECORDS leaves in the tool's code object for gpuinstr-link.
struct gpuinstr_records_declaration {
  uint64_t RecordBytes;
  char Count[64];
};

/// Declares that the tool global `Buffer`, an array of records, is filled
/// from its start and that the 64-bit tool global `Count` counts the
/// records the hooks wanted to write (past the array's end they are
/// dropped: the host part compares the two and says so). After each
/// dispatch the runtime then copies only the records written and resets
/// only the count, not the whole buffer; a host part still sees zeros past
/// the records. Write it after both globals:
///   GPUINSTR_RECORDS(Trace, TraceCount)
#define GPUINSTR_RECORDS(Buffer, Count)                                        \
  static_assert(sizeof(Count) == 8,                                            \
                "GPUINSTR_RECORDS: the count is a 64-bit tool global");        \
  static_assert(sizeof(#Count) <= 64,                                          \
                "GPUINSTR_RECORDS: the count's name has at most 63 bytes");    \
  extern "C" __attribute__((device, used))                                     \
  const gpuinstr_records_declaration __gpuinstr_records_##Buffer = {           \
      sizeof((Buffer)[0]), #Count};

/// What GPUINSTR_RING leaves in the tool's code object for gpuinstr-link.
struct gpuinstr_ring_declaration {
  uint64_t RecordBytes;
};

/// The head of a ring of records, in host memory the runtime allocates for
/// each loaded code object (fine-grained: the host reads it while the
/// kernel runs). The runtime sets `Mask`, `Records` and `Sequences` and
/// moves `Read`; hooks move `Reserved` (through gpuinstr::append). Its
/// layout is an interface with the runtime (runtime/src/rings.rs).
struct gpuinstr_ring_head {
  /// Records reserved so far in the run (hooks add, system scope).
  uint64_t Reserved;
  /// Records dropped so far in the run because the ring was full (only
  /// when `WhenFull` says drop; hooks add, system scope).
  uint64_t Dropped;
  uint64_t Unused[6];
  /// Records the runtime has taken (it alone writes; on its own 64 bytes).
  uint64_t Read;
  /// The capacity in records, a power of two, less one.
  uint64_t Mask;
  /// Where the capacity's records are.
  uint64_t Records;
  /// Where one 64-bit word per record is: record `I` is complete when
  /// the word at `I & Mask` holds `I + 1`.
  uint64_t Sequences;
  /// What a wavefront does when the ring has no room for its records:
  /// GPUINSTR_RING_WAIT (the default) or GPUINSTR_RING_DROP
  /// (`gpuinstr-run --ring-full drop`).
  uint64_t WhenFull;
};

/// Values of gpuinstr_ring_head::WhenFull.
#define GPUINSTR_RING_WAIT 0
#define GPUINSTR_RING_DROP 1

namespace gpuinstr {
/// A ring of `Record`s that the runtime empties while the dispatch runs
/// (declare one with GPUINSTR_RING; append with gpuinstr::append).
template <typename Record> struct Ring {
  gpuinstr_ring_head Head;
};
} // namespace gpuinstr

/// Declares `Name`, a ring of `Record`s streamed to the tool's host part
/// while the dispatch runs (its `gpuinstr_tool_records`): nothing is
/// dropped, memory is bounded by the ring, and a hook appending to a full
/// ring waits until the host has taken enough. The tool global `Name`
/// points at the ring's head (the runtime sets it before the first
/// dispatch; without gpuinstr's runtime it stays null and appends do
/// nothing).
///   GPUINSTR_RING(MemoryAccess, Trace)
#define GPUINSTR_RING(Record, Name)                                            \
  __device__ gpuinstr::Ring<Record> *Name = nullptr;                           \
  extern "C" __attribute__((device, used))                                     \
  const gpuinstr_ring_declaration __gpuinstr_ring_##Name = {sizeof(Record)};

/// Declares a hook: `GPUINSTR_HOOK count(bool WaveLevel) { ... }`.
/// Hooks are C-linkage device functions returning void; they are inlined at
/// every instrumentation point they are inserted at.
#define GPUINSTR_HOOK                                                          \
  extern "C" __attribute__((device, used, annotate("gpuinstr_hook"))) void

/// Gives the host a handle for a hook (an empty kernel the plugin removes
/// from the embedded module).
#define GPUINSTR_EXPORT_HOOK_HANDLE(HookName)                                  \
  extern "C" __attribute__((global, used)) void                                \
      __gpuinstr_hook_handle_##HookName() {}

/// Host-side pointer to a hook's handle.
#define GPUINSTR_GET_HOOK_HANDLE(HookName)                                     \
  reinterpret_cast<const void *>(__gpuinstr_hook_handle_##HookName)

/// Annotates a framework-intrinsic binding. The body only keeps the
/// arguments alive; the plugin deletes it and gpuinstr-link lowers each call.
/// `weak` keeps interprocedural optimisations from looking into the body
/// (it is not the real semantics), `noinline` keeps the call.
#define GPUINSTR_INTRINSIC                                                     \
  __attribute__((device, noinline, weak, annotate("gpuinstr_intrinsic")))

namespace gpuinstr {

namespace detail {
/// Keeps a value alive without generating code (Google Benchmark's
/// DoNotOptimize). Only used inside intrinsic bindings, whose bodies the
/// plugin deletes; hooks themselves must not contain inline assembly. The
/// value's address (a VGPR operand) works for every type, floats included.
template <typename T>
__device__ __attribute__((always_inline)) inline void keepAlive(const T &V) {
  asm volatile("" : : "v"(&V) : "memory");
}

/// A value the optimiser cannot see through. Device functions are
/// internalised in non-RDC HIP, so a binding returning a constant would let
/// interprocedural constant propagation replace every call's result.
template <typename T>
__device__ __attribute__((always_inline)) inline T opaqueValue() {
  T V;
  asm volatile("" : "=v"(V) : : "memory");
  return V;
}
} // namespace detail

/// A hardware register, in gpuinstr's own stable encoding:
/// bits 31..16 are the kind, bits 15..0 the index within the kind.
/// 64-bit accesses (`readReg<uint64_t>(sgpr(4))`) use the aligned pair that
/// starts at the index (s[4:5]).
struct Reg {
  uint32_t Code;
};

enum class RegKind : uint32_t {
  SGPR = 1,
  VGPR = 2,
  AGPR = 3,
  TTMP = 4,
  Special = 5,
};

__device__ __host__ constexpr Reg makeReg(RegKind Kind, uint32_t Index) {
  return Reg{(static_cast<uint32_t>(Kind) << 16) | (Index & 0xffffu)};
}
__device__ __host__ constexpr Reg sgpr(uint32_t Index) {
  return makeReg(RegKind::SGPR, Index);
}
__device__ __host__ constexpr Reg vgpr(uint32_t Index) {
  return makeReg(RegKind::VGPR, Index);
}
__device__ __host__ constexpr Reg agpr(uint32_t Index) {
  return makeReg(RegKind::AGPR, Index);
}
__device__ __host__ constexpr Reg ttmp(uint32_t Index) {
  return makeReg(RegKind::TTMP, Index);
}

// Special registers. A 64-bit name (EXEC, VCC, FLAT_SCRATCH) reads both halves
// with a 64-bit type; the _LO/_HI names are its 32-bit halves.
constexpr Reg EXEC = makeReg(RegKind::Special, 0);
constexpr Reg EXEC_LO = makeReg(RegKind::Special, 1);
constexpr Reg EXEC_HI = makeReg(RegKind::Special, 2);
constexpr Reg VCC = makeReg(RegKind::Special, 3);
constexpr Reg VCC_LO = makeReg(RegKind::Special, 4);
constexpr Reg VCC_HI = makeReg(RegKind::Special, 5);
constexpr Reg SCC = makeReg(RegKind::Special, 6);
constexpr Reg M0 = makeReg(RegKind::Special, 7);
constexpr Reg FLAT_SCRATCH = makeReg(RegKind::Special, 8);
constexpr Reg FLAT_SCRATCH_LO = makeReg(RegKind::Special, 9);
constexpr Reg FLAT_SCRATCH_HI = makeReg(RegKind::Special, 10);
constexpr Reg MODE = makeReg(RegKind::Special, 11);

// ---------------------------------------------------------------------------
// Built-in framework intrinsics. gpuinstr-link lowers each call to machine
// code at the instrumentation point (see docs/intrinsics.md).
// ---------------------------------------------------------------------------

/// Value of an application register at the instrumentation point.
/// T is 32 or 64 bits wide.
template <typename T> GPUINSTR_INTRINSIC T readReg(Reg R) {
  detail::keepAlive(R.Code);
  return detail::opaqueValue<T>();
}

/// Writes an application register; the value is visible to the application
/// after the instrumentation point.
template <typename T> GPUINSTR_INTRINSIC void writeReg(Reg R, T Value) {
  detail::keepAlive(R.Code);
  detail::keepAlive(Value);
}

/// Sets EXEC for the rest of the hook (restored when the hook returns).
/// Narrow EXEC: a lane turned on that was off when the hook started runs on
/// vector registers computed without it (docs/writing-tools.md).
GPUINSTR_INTRINSIC void writeExec(uint64_t Value) { detail::keepAlive(Value); }

/// One lane of Exec for `writeExec`: the first active one, or lane 63 when
/// Exec is zero. Scalar instructions only (s_ff1, s_lshl), so the mask
/// stays in SGPRs: LLVM 15 computes a select or a widened compare in VGPRs,
/// which `writeExec` cannot take.
__device__ inline uint64_t firstActiveLane(uint64_t Exec) {
  return 1ull << __builtin_ctzll(Exec | (1ull << 63));
}

/// Scalar (one per wavefront) atomic add to global memory.
template <typename T> GPUINSTR_INTRINSIC void sAtomicAdd(T *Address, T Value) {
  detail::keepAlive(Address);
  detail::keepAlive(Value);
}

/// Start of the hidden kernel arguments of the instrumented kernel.
GPUINSTR_INTRINSIC const void *implicitArgPtr() {
  return detail::opaqueValue<const void *>();
}
/// Start of the kernel argument segment of the instrumented kernel.
GPUINSTR_INTRINSIC const void *kernargPtr() {
  return detail::opaqueValue<const void *>();
}
/// The AQL dispatch packet of the instrumented dispatch.
GPUINSTR_INTRINSIC const void *dispatchPtr() {
  return detail::opaqueValue<const void *>();
}
/// The AQL queue the instrumented kernel was dispatched on.
GPUINSTR_INTRINSIC const void *queuePtr() {
  return detail::opaqueValue<const void *>();
}
/// The implicit buffer pointer (graphics shaders; rarely used by compute).
GPUINSTR_INTRINSIC const void *implicitBufferPtr() {
  return detail::opaqueValue<const void *>();
}
/// The 64-bit dispatch id of the instrumented dispatch.
GPUINSTR_INTRINSIC uint64_t dispatchId() {
  return detail::opaqueValue<uint64_t>();
}
/// Kernel id used to look up LDS variables (module LDS lowering).
GPUINSTR_INTRINSIC uint32_t ldsKernelId() {
  return detail::opaqueValue<uint32_t>();
}

GPUINSTR_INTRINSIC uint32_t workgroupIdX() {
  return detail::opaqueValue<uint32_t>();
}
GPUINSTR_INTRINSIC uint32_t workgroupIdY() {
  return detail::opaqueValue<uint32_t>();
}
GPUINSTR_INTRINSIC uint32_t workgroupIdZ() {
  return detail::opaqueValue<uint32_t>();
}
GPUINSTR_INTRINSIC uint32_t workitemIdX() {
  return detail::opaqueValue<uint32_t>();
}
GPUINSTR_INTRINSIC uint32_t workitemIdY() {
  return detail::opaqueValue<uint32_t>();
}
GPUINSTR_INTRINSIC uint32_t workitemIdZ() {
  return detail::opaqueValue<uint32_t>();
}

/// EXEC where the call stands. LLVM takes an EXEC read (and a ballot of
/// true, which it folds into one) for a read of memory: with no store
/// between, one before `if (Lane == First)` and one inside it become one,
/// and the code inside sees the lanes outside it (a hook that read EXEC
/// and then appended from one lane reserved room for every lane). A
/// signal fence (no instruction) counts as a store: the read stays here.
__device__ inline uint64_t execHere() {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  return __builtin_amdgcn_read_exec();
}

/// This lane's rank among the wavefront's active lanes (0 for the first).
__device__ inline uint32_t activeLaneRank() {
  const uint64_t Exec = execHere();
  return __builtin_amdgcn_mbcnt_hi(static_cast<uint32_t>(Exec >> 32),
                                   __builtin_amdgcn_mbcnt_lo(static_cast<uint32_t>(Exec), 0));
}

/// The first active lane's `Value`, for the whole wavefront (in SGPRs).
__device__ inline uint64_t uniform(uint64_t Value) {
  const uint32_t Low = __builtin_amdgcn_readfirstlane(static_cast<uint32_t>(Value));
  const uint32_t High = __builtin_amdgcn_readfirstlane(static_cast<uint32_t>(Value >> 32));
  return (static_cast<uint64_t>(High) << 32) | Low;
}

/// Appends one record per active lane to `Into`, the wavefront's records
/// consecutive and in lane order: the first active lane reserves room for
/// all with one system-scope atomic, the wavefront waits (s_sleep, a
/// uniform loop) while the ring has no room for them, then every lane
/// writes its record and, last, its sequence word (a system-scope
/// release), which tells the runtime the record is complete. When the run
/// drops records of full rings (`gpuinstr-run --ring-full drop`), a
/// wavefront that finds no room for its records before reserving counts
/// them in the head's `Dropped` and goes on without them (one that found
/// room may still wait a little, if others reserved it first).
template <typename Record> __device__ inline void append(Ring<Record> *Into, const Record &Value) {
  if (Into == nullptr)
    return;
  gpuinstr_ring_head *Head = &Into->Head;
  const uint64_t Mask = Head->Mask;
  Record *Records = reinterpret_cast<Record *>(Head->Records);
  uint64_t *Sequences = reinterpret_cast<uint64_t *>(Head->Sequences);
  const uint32_t Rank = activeLaneRank();
  // EXEC before the branches below (inside them only the first lane is on).
  const uint64_t Lanes = __popcll(execHere());
  // Where the ring's room ends: the records the runtime has taken, plus
  // its capacity.
  const auto RoomEnd = [Head, Mask] {
    return uniform(__hip_atomic_load(&Head->Read, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM)) + Mask + 1;
  };
  uint64_t End = RoomEnd();
  const bool Dropping =
      uniform(Head->WhenFull) == GPUINSTR_RING_DROP &&
      uniform(__hip_atomic_load(&Head->Reserved, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM)) + Lanes > End;
  // One atomic either way: the first lane adds the wavefront's lanes to
  // `Dropped` when dropping them, else to `Reserved` (one shape for both:
  // an early return of its own made LLVM reload a live register in
  // rocRAND's mtgp32 kernel, and two points were left out).
  uint64_t First = 0;
  if (Rank == 0)
    First = __hip_atomic_fetch_add(Dropping ? &Head->Dropped : &Head->Reserved, Lanes, __ATOMIC_RELAXED,
                                   __HIP_MEMORY_SCOPE_SYSTEM);
  // Read before the branch: the atomic's result is waited for on both
  // paths (none of it is in flight when the hook ends).
  First = uniform(First);
  if (Dropping)
    return;
  // The whole wavefront waits (a uniform loop) while the ring has no room.
  while (First + Lanes > End) {
    __builtin_amdgcn_s_sleep(2);
    End = RoomEnd();
  }
  const uint64_t Index = First + Rank;
  Records[Index & Mask] = Value;
  __hip_atomic_store(Sequences + (Index & Mask), Index + 1, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
}

} // namespace gpuinstr

#endif // GPUINSTR_GPUINSTR_H
