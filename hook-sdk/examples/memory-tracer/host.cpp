// The memory tracer's host part (gpuinstr/host.h): every record, streamed
// from the ring while the dispatch runs, is kept by the run's database
// (its `records` table), and on request (`gpuinstr-run --tool-file
// memory-trace.tsv`, or where the database keeps no records) also goes to
// the file `memory-trace.tsv` beside the report (dispatch, instruction,
// wavefront, lane, address, space: 0 flat, 1 global, 2 buffer, 3 LDS); per dispatch the report gets, per memory
// instruction, its wavefront executions, lane accesses and the distinct
// 64-byte lines they touched (summed over executions: lines per execution
// near 1 is a coalesced access, near the active lanes a scattered one). At
// exit the run's totals per instruction and how many of the instrumented
// memory instructions never ran are reported, and the instructions
// touching the most lines are printed.
#include <gpuinstr/host.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {
// As in tool.hip.
struct MemoryAccess {
  uint64_t Address;
  uint32_t Instruction;
  uint32_t WavefrontLane;
};
constexpr uint32_t LaneBits = 0x3f, FirstOfExecution = 0x40, SpaceShift = 7, SpaceBits = 3, WavefrontShift = 9;
constexpr uint64_t LineBytes = 64;

struct Instruction {
  std::string Function;
  std::string Text;
  /// `file:line` when the code object has line tables (-g).
  std::string Location;
  uint64_t Executions = 0;
  uint64_t Accesses = 0;
  uint64_t Lines = 0;
};
/// The run's memory instructions by (function, address).
std::map<std::pair<std::string, uint64_t>, Instruction> Totals;
/// Memory instructions selected and left out (--allow-partial): never traced.
std::set<std::pair<std::string, uint64_t>> LeftOut;
/// Every memory instruction instrumented in the code objects the program loaded.
std::set<std::pair<std::string, uint64_t>> Instrumented;
bool HeaderWritten = false;

/// Per instruction of a dispatch: executions, accesses, distinct lines per execution.
struct Counts {
  uint64_t Executions = 0, Accesses = 0, Lines = 0;
};
/// A dispatch whose records are arriving. A wavefront's execution of an
/// instruction is consecutive records (the first flagged), and may span
/// two batches.
struct Streaming {
  std::map<uint32_t, Counts> PerInstruction;
  /// The 64-byte lines of the execution being read, and its instruction.
  std::vector<uint64_t> Lines;
  uint32_t Instruction = 0;
  uint64_t Records = 0;

  void endExecution() {
    if (Lines.empty())
      return;
    std::sort(Lines.begin(), Lines.end());
    PerInstruction[Instruction].Lines += std::unique(Lines.begin(), Lines.end()) - Lines.begin();
    Lines.clear();
  }
};
std::map<uint64_t, Streaming> Dispatches;

/// Whether the records' text copy is wanted (else the database is their
/// one store).
bool textWanted() {
  static const bool Wanted = gpuinstr_file_requested("memory-trace.tsv");
  return Wanted;
}
void write(const std::string &Text) { gpuinstr_write("memory-trace.tsv", Text.data(), Text.size()); }
} // namespace

extern "C" void gpuinstr_tool_load(const gpuinstr_code_object *CodeObject) {
  size_t Count = 0;
  const gpuinstr_site *Sites = gpuinstr_code_object_sites(CodeObject, &Count);
  for (size_t Site = 0; Site < Count; ++Site)
    if (!Sites[Site].LeftOut)
      Instrumented.insert({Sites[Site].Function, Sites[Site].Address});
}

extern "C" void gpuinstr_tool_records(const gpuinstr_records *Records) {
  size_t Count = 0;
  const MemoryAccess *Trace = gpuinstr::records<MemoryAccess>(Records, &Count);
  if (!Trace)
    return; // another ring's (the dispatch call checks the counts)
  const bool Text = textWanted();
  if (Text && !HeaderWritten) {
    write("dispatch\tinstruction\twavefront\tlane\taddress\tspace\n");
    HeaderWritten = true;
  }
  const uint64_t Id = gpuinstr_records_dispatch_id(Records);
  Streaming &S = Dispatches[Id];
  std::string Lines;
  for (size_t K = 0; K < Count; ++K) {
    const MemoryAccess &R = Trace[K];
    if (R.WavefrontLane & FirstOfExecution) {
      S.endExecution();
      S.Instruction = R.Instruction;
      S.PerInstruction[R.Instruction].Executions += 1;
    }
    S.PerInstruction[R.Instruction].Accesses += 1;
    S.Lines.push_back(R.Address / LineBytes);
    if (!Text)
      continue;
    char Line[96];
    std::snprintf(Line, sizeof Line, "%" PRIu64 "\t0x%" PRIx32 "\t%" PRIu32 "\t%" PRIu32 "\t0x%" PRIx64 "\t%" PRIu32 "\n",
                  Id, R.Instruction, R.WavefrontLane >> WavefrontShift, R.WavefrontLane & LaneBits, R.Address,
                  (R.WavefrontLane >> SpaceShift) & SpaceBits);
    Lines += Line;
    if (Lines.size() > (1 << 20)) {
      write(Lines);
      Lines.clear();
    }
  }
  if (Text)
    write(Lines);
  S.Records += Count;
}

/// Records the hooks dropped because the ring was full (only with
/// `gpuinstr-run --ring-full drop`).
uint64_t Dropped = 0;

extern "C" void gpuinstr_tool_dispatch(gpuinstr_dispatch *Dispatch) {
  size_t RingSize = 0;
  if (!gpuinstr_global(Dispatch, "Trace", &RingSize) || RingSize != 8) {
    gpuinstr_report_warning(Dispatch, "the dispatch's code object lacks the memory tracer's ring");
    return;
  }
  const uint64_t Id = gpuinstr_dispatch_id(Dispatch);
  Streaming S;
  if (auto Found = Dispatches.find(Id); Found != Dispatches.end()) {
    S = std::move(Found->second);
    Dispatches.erase(Found);
  }
  S.endExecution();
  const uint64_t Appended = gpuinstr_dispatch_records(Dispatch, "Trace");
  if (S.Records != Appended)
    gpuinstr_report_warning(Dispatch, (std::to_string(S.Records) + " memory records read of the " +
                                       std::to_string(Appended) + " the dispatch appended")
                                          .c_str());
  uint32_t Grid[3], Block[3];
  gpuinstr_dispatch_grid(Dispatch, Grid);
  gpuinstr_dispatch_workgroup(Dispatch, Block);
  uint64_t Wavefronts = 1;
  for (int D = 0; D < 3; ++D)
    Wavefronts *= (Grid[D] + Block[D] - 1) / Block[D];
  Wavefronts *= (uint64_t(Block[0]) * Block[1] * Block[2] + 63) / 64;
  if (Wavefronts > (uint64_t(1) << 23))
    gpuinstr_report_warning(Dispatch, "more than 2^23 wavefronts: the trace's wavefront ids wrap");

  // Sites name the instructions.
  size_t SiteCount = 0;
  const gpuinstr_site *Sites = gpuinstr_sites(Dispatch, &SiteCount);
  if (gpuinstr_dispatch_points_left_out(Dispatch))
    for (size_t K = 0; K < SiteCount; ++K)
      if (Sites[K].LeftOut)
        LeftOut.insert({Sites[K].Function, Sites[K].Address});
  std::map<uint64_t, const gpuinstr_site *> SiteAt;
  for (const auto &[Address, C] : S.PerInstruction)
    SiteAt[Address] = nullptr;
  for (size_t K = 0; K < SiteCount; ++K) {
    auto Found = SiteAt.find(Sites[K].Address);
    if (Found != SiteAt.end())
      Found->second = &Sites[K];
  }
  std::string Json = "[";
  for (const auto &[Address, C] : S.PerInstruction) {
    const gpuinstr_site *Site = SiteAt[Address];
    const std::string Function = Site ? Site->Function : "?";
    Instruction &Total = Totals[{Function, Address}];
    Total.Function = Function;
    Total.Text = Site ? Site->Text : "(not in the site table)";
    Total.Location = Site ? Site->Location : "";
    Total.Executions += C.Executions;
    Total.Accesses += C.Accesses;
    Total.Lines += C.Lines;
    char Hex[32];
    std::snprintf(Hex, sizeof Hex, "\"0x%" PRIx32 "\"", Address);
    if (Json.size() > 1)
      Json += ", ";
    Json += std::string("{\"address\": ") + Hex + ", \"function\": " + gpuinstr::jsonString(Function) +
            (Total.Location.empty() ? "" : ", \"location\": " + gpuinstr::jsonString(Total.Location)) +
            ", \"executions\": " + std::to_string(C.Executions) + ", \"accesses\": " + std::to_string(C.Accesses) +
            ", \"lines\": " + std::to_string(C.Lines) + "}";
  }
  gpuinstr_report_json(Dispatch, "instructions", (Json + "]").c_str());
  gpuinstr_report_u64(Dispatch, "records", Appended);
  if (const uint64_t DroppedHere = gpuinstr_dispatch_dropped(Dispatch, "Trace")) {
    gpuinstr_report_u64(Dispatch, "dropped", DroppedHere);
    Dropped += DroppedHere;
  }
}

extern "C" void gpuinstr_tool_exit(void) {
  // A file asked for is written even when nothing was traced: its header.
  if (textWanted() && !HeaderWritten) {
    write("dispatch\tinstruction\twavefront\tlane\taddress\tspace\n");
    HeaderWritten = true;
  }
  std::vector<std::pair<const std::pair<std::string, uint64_t>, Instruction> *> Sorted;
  uint64_t Accesses = 0;
  for (auto &Entry : Totals) {
    Sorted.push_back(&Entry);
    Accesses += Entry.second.Accesses;
  }
  size_t NeverExecuted = 0;
  for (const auto &Key : Instrumented)
    NeverExecuted += !Totals.count(Key);

  std::string Json = "[";
  for (const auto *Entry : Sorted) {
    const Instruction &I = Entry->second;
    char Hex[32];
    std::snprintf(Hex, sizeof Hex, "\"0x%" PRIx64 "\"", Entry->first.second);
    Json += std::string(Json.size() > 1 ? ", " : "") + "{\"address\": " + Hex +
            ", \"function\": " + gpuinstr::jsonString(I.Function) +
            (I.Location.empty() ? "" : ", \"location\": " + gpuinstr::jsonString(I.Location)) +
            ", \"text\": " + gpuinstr::jsonString(I.Text) + ", \"executions\": " + std::to_string(I.Executions) +
            ", \"accesses\": " + std::to_string(I.Accesses) + ", \"lines\": " + std::to_string(I.Lines) + "}";
  }
  gpuinstr_report_run_json("instructions", (Json + "]").c_str());
  gpuinstr_report_run_u64("instrumented_instructions", Instrumented.size());
  gpuinstr_report_run_u64("never_executed", NeverExecuted);
  gpuinstr_report_run_u64("accesses", Accesses);
  if (!LeftOut.empty())
    gpuinstr_report_run_u64("left_out", LeftOut.size());
  if (Dropped)
    gpuinstr_report_run_u64("dropped", Dropped);

  std::sort(Sorted.begin(), Sorted.end(), [](const auto *A, const auto *B) { return A->second.Lines > B->second.Lines; });
  std::fprintf(stderr, "memory tracer: %llu lane accesses by %zu instructions (%zu of %zu instrumented never ran); "
               "the most 64-byte lines touched:\n",
               static_cast<unsigned long long>(Accesses), Sorted.size(), NeverExecuted, Instrumented.size());
  for (size_t K = 0; K < Sorted.size() && K < 10; ++K) {
    const Instruction &I = Sorted[K]->second;
    std::fprintf(stderr, "  %10llu lines %10llu accesses %8.2f lines/execution  %s%s%s at 0x%llx: %s\n",
                 static_cast<unsigned long long>(I.Lines), static_cast<unsigned long long>(I.Accesses),
                 I.Executions ? double(I.Lines) / double(I.Executions) : 0.0, I.Location.c_str(),
                 I.Location.empty() ? "" : " ", I.Function.c_str(),
                 static_cast<unsigned long long>(Sorted[K]->first.second), I.Text.c_str());
  }
  if (!LeftOut.empty())
    std::fprintf(stderr, "  PARTIAL: %zu memory instructions of the kernels run were left out, not traced\n",
                 LeftOut.size());
  if (Dropped)
    std::fprintf(stderr, "  PARTIAL: %llu lane accesses were dropped because the ring was full (--ring-full drop); "
                 "the numbers above count only the rest\n",
                 static_cast<unsigned long long>(Dropped));
}
