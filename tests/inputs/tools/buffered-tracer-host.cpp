// The host part of the memory tracer as it was before rings
// (buffered-tracer.hip): the benchmark's baseline. Every record goes to the
// file `memory-trace.tsv` beside the report (dispatch, instruction,
// wavefront, lane, address); per dispatch the report gets, per memory
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
constexpr uint64_t TraceCapacity = uint64_t(1) << 20;
struct MemoryAccess {
  uint64_t Address;
  uint32_t Instruction;
  uint32_t WavefrontLane;
};
constexpr uint32_t LaneBits = 0x3f, FirstOfExecution = 0x40, WavefrontShift = 7;
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


void write(const std::string &Text) { gpuinstr_write("memory-trace.tsv", Text.data(), Text.size()); }
} // namespace

extern "C" void gpuinstr_tool_load(const gpuinstr_code_object *CodeObject) {
  size_t Count = 0;
  const gpuinstr_site *Sites = gpuinstr_code_object_sites(CodeObject, &Count);
  for (size_t Site = 0; Site < Count; ++Site)
    if (!Sites[Site].LeftOut)
      Instrumented.insert({Sites[Site].Function, Sites[Site].Address});
}

extern "C" void gpuinstr_tool_dispatch(gpuinstr_dispatch *Dispatch) {
  const auto *Trace = gpuinstr::array<MemoryAccess>(Dispatch, "Trace", TraceCapacity);
  uint64_t Count = 0;
  if (!Trace || !gpuinstr::read(Dispatch, "TraceCount", Count)) {
    gpuinstr_report_warning(Dispatch, "the dispatch's code object lacks the memory tracer's globals");
    return;
  }
  const uint64_t Kept = std::min(Count, TraceCapacity);
  if (Kept < Count)
    gpuinstr_report_warning(Dispatch, (std::to_string(Count - Kept) + " memory records of " + std::to_string(Count) +
                                       " dropped (the buffer holds " + std::to_string(TraceCapacity) +
                                       "); the summary counts the kept ones")
                                          .c_str());
  uint32_t Grid[3], Block[3];
  gpuinstr_dispatch_grid(Dispatch, Grid);
  gpuinstr_dispatch_workgroup(Dispatch, Block);
  uint64_t Wavefronts = 1;
  for (int D = 0; D < 3; ++D)
    Wavefronts *= (Grid[D] + Block[D] - 1) / Block[D];
  Wavefronts *= (uint64_t(Block[0]) * Block[1] * Block[2] + 63) / 64;
  if (Wavefronts > (uint64_t(1) << 25))
    gpuinstr_report_warning(Dispatch, "more than 2^25 wavefronts: the trace's wavefront ids wrap");

  // Per instruction: executions, accesses, distinct lines per execution.
  struct Counts {
    uint64_t Executions = 0, Accesses = 0, Lines = 0;
  };
  std::map<uint32_t, Counts> PerInstruction;
  std::vector<uint64_t> Lines;
  auto EndExecution = [&](uint32_t Instruction) {
    std::sort(Lines.begin(), Lines.end());
    PerInstruction[Instruction].Lines += std::unique(Lines.begin(), Lines.end()) - Lines.begin();
    Lines.clear();
  };
  if (!HeaderWritten) {
    write("dispatch\tinstruction\twavefront\tlane\taddress\n");
    HeaderWritten = true;
  }
  const uint64_t Id = gpuinstr_dispatch_id(Dispatch);
  std::string Text;
  for (uint64_t K = 0; K < Kept; ++K) {
    const MemoryAccess &R = Trace[K];
    if ((R.WavefrontLane & FirstOfExecution) && K > 0)
      EndExecution(Trace[K - 1].Instruction);
    Counts &C = PerInstruction[R.Instruction];
    C.Executions += (R.WavefrontLane & FirstOfExecution) != 0;
    C.Accesses += 1;
    Lines.push_back(R.Address / LineBytes);
    char Line[96];
    std::snprintf(Line, sizeof Line, "%" PRIu64 "\t0x%" PRIx32 "\t%" PRIu32 "\t%" PRIu32 "\t0x%" PRIx64 "\n", Id,
                  R.Instruction, R.WavefrontLane >> WavefrontShift, R.WavefrontLane & LaneBits, R.Address);
    Text += Line;
    if (Text.size() > (1 << 20)) {
      write(Text);
      Text.clear();
    }
  }
  if (Kept > 0)
    EndExecution(Trace[Kept - 1].Instruction);
  write(Text);

  // Sites name the instructions.
  size_t SiteCount = 0;
  const gpuinstr_site *Sites = gpuinstr_sites(Dispatch, &SiteCount);
  if (gpuinstr_dispatch_points_left_out(Dispatch))
    for (size_t K = 0; K < SiteCount; ++K)
      if (Sites[K].LeftOut)
        LeftOut.insert({Sites[K].Function, Sites[K].Address});
  std::map<uint64_t, const gpuinstr_site *> SiteAt;
  for (const auto &[Address, C] : PerInstruction)
    SiteAt[Address] = nullptr;
  for (size_t K = 0; K < SiteCount; ++K) {
    auto Found = SiteAt.find(Sites[K].Address);
    if (Found != SiteAt.end())
      Found->second = &Sites[K];
  }
  std::string Json = "[";
  for (const auto &[Address, C] : PerInstruction) {
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
  gpuinstr_report_u64(Dispatch, "records", Count);
}

extern "C" void gpuinstr_tool_exit(void) {
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
}
