// Memory efficiency's host part (gpuinstr/host.h): every record (site,
// lines or cycles used and ideal, lanes), streamed from the ring while
// the dispatch runs, is kept by the run's database (its `records` table).
// Per dispatch, each instruction's numbers go into the report: the
// `memory` value lists the flat, global and buffer instructions (wavefront
// executions, lanes, 64-byte lines touched, the fewest lines their bytes
// fit in, and the excess), the `lds` value the LDS ones (cycles, cycles
// without bank conflicts, and the conflict cycles). At exit the run's totals
// per instruction are reported, and the most wasteful instructions printed
// with their kernels, source lines and assembly.
#include <gpuinstr/host.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace {
// As in tool.hip.
struct EfficiencyRecord {
  uint32_t Site;
  uint32_t Unused0;
  uint16_t Used;
  uint16_t Ideal;
  uint8_t Lanes;
  uint8_t Space;
  uint8_t Bytes;
  uint8_t Unused1;
};

constexpr uint8_t LdsSpace = 3;
const char *const SpaceNames[] = {"flat", "global", "buffer", "LDS"};

/// One instruction's numbers, summed over wavefront executions.
struct Tally {
  uint64_t Executions = 0, Lanes = 0, Used = 0, Ideal = 0;
  uint8_t Space = 0, Bytes = 0;
  void add(const EfficiencyRecord &R) {
    Executions += 1;
    Lanes += R.Lanes == 0 ? 64 : R.Lanes;
    Used += R.Used;
    Ideal += R.Ideal;
    Space = R.Space;
    Bytes = R.Bytes;
  }
  /// Lines past the fewest, or conflict cycles (never negative: lanes
  /// sharing a line can need fewer lines than their bytes fill).
  uint64_t waste() const { return Used > Ideal ? Used - Ideal : 0; }
};

struct Instruction {
  std::string Function, Text, Location;
  uint64_t Address = 0;
  Tally Total;
};
/// The run's instructions by (function, address): code objects loaded
/// twice add up.
std::map<std::pair<std::string, uint64_t>, Instruction> Totals;
/// Per dispatch whose records are arriving, per site.
std::map<uint64_t, std::map<uint32_t, Tally>> Dispatches;
std::map<uint64_t, uint64_t> Read;
std::set<std::pair<std::string, uint64_t>> LeftOut;
uint64_t Dropped = 0;

std::string hex(uint64_t Value) {
  char Text[32];
  std::snprintf(Text, sizeof Text, "\"0x%" PRIx64 "\"", Value);
  return Text;
}

/// One instruction's JSON object: its place, then its numbers.
std::string json(uint32_t Site, const std::string &Function, uint64_t Address, const std::string &Location,
                 const Tally &T) {
  std::string Out = "{";
  if (Site != UINT32_MAX)
    Out += "\"site\": " + std::to_string(Site) + ", ";
  Out += "\"address\": " + hex(Address) + ", \"function\": " + gpuinstr::jsonString(Function) +
         (Location.empty() ? "" : ", \"location\": " + gpuinstr::jsonString(Location)) +
         ", \"access\": \"" + SpaceNames[T.Space & 3] + ", " + std::to_string(T.Bytes) + " bytes a lane\"" +
         ", \"executions\": " + std::to_string(T.Executions) + ", \"lanes\": " + std::to_string(T.Lanes);
  if (T.Space == LdsSpace)
    Out += ", \"cycles\": " + std::to_string(T.Used) + ", \"ideal_cycles\": " + std::to_string(T.Ideal) +
           ", \"conflict_cycles\": " + std::to_string(T.waste());
  else
    Out += ", \"lines\": " + std::to_string(T.Used) + ", \"ideal_lines\": " + std::to_string(T.Ideal) +
           ", \"excess_lines\": " + std::to_string(T.waste());
  return Out + "}";
}
} // namespace

extern "C" void gpuinstr_tool_records(const gpuinstr_records *Batch) {
  size_t Count = 0;
  const EfficiencyRecord *Records = gpuinstr::records<EfficiencyRecord>(Batch, &Count);
  if (!Records)
    return; // another ring's (the dispatch call checks the counts)
  const uint64_t Id = gpuinstr_records_dispatch_id(Batch);
  auto &PerSite = Dispatches[Id];
  for (size_t K = 0; K < Count; ++K)
    PerSite[Records[K].Site].add(Records[K]);
  Read[Id] += Count;
}

extern "C" void gpuinstr_tool_dispatch(gpuinstr_dispatch *Dispatch) {
  size_t RingSize = 0;
  if (!gpuinstr_global(Dispatch, "Efficiency", &RingSize) || RingSize != 8) {
    gpuinstr_report_warning(Dispatch, "the dispatch's code object lacks memory-efficiency's ring");
    return;
  }
  size_t SiteCount = 0;
  const gpuinstr_site *Sites = gpuinstr_sites(Dispatch, &SiteCount);
  if (gpuinstr_dispatch_points_left_out(Dispatch))
    for (size_t Site = 0; Site < SiteCount; ++Site)
      if (Sites[Site].LeftOut)
        LeftOut.insert({Sites[Site].Function, Sites[Site].Address});
  const uint64_t Id = gpuinstr_dispatch_id(Dispatch);
  const std::map<uint32_t, Tally> PerSite = std::move(Dispatches[Id]);
  Dispatches.erase(Id);
  const uint64_t Count = gpuinstr_dispatch_records(Dispatch, "Efficiency");
  if (Read[Id] != Count)
    gpuinstr_report_warning(Dispatch, (std::to_string(Read[Id]) + " memory-efficiency records read of the " +
                                       std::to_string(Count) + " the dispatch appended")
                                          .c_str());
  Read.erase(Id);

  std::string Memory = "[", Lds = "[";
  uint64_t Lines = 0, IdealLines = 0, Cycles = 0, IdealCycles = 0;
  for (const auto &[Site, T] : PerSite) {
    const bool Known = Site < SiteCount;
    const std::string Function = Known ? Sites[Site].Function : "?";
    const uint64_t Address = Known ? Sites[Site].Address : 0;
    Instruction &Total = Totals[{Function, Address}];
    Total.Function = Function;
    Total.Address = Address;
    Total.Text = Known ? Sites[Site].Text : "site " + std::to_string(Site) + " (not in the site table)";
    Total.Location = Known ? Sites[Site].Location : "";
    Total.Total.Executions += T.Executions;
    Total.Total.Lanes += T.Lanes;
    Total.Total.Used += T.Used;
    Total.Total.Ideal += T.Ideal;
    Total.Total.Space = T.Space;
    Total.Total.Bytes = T.Bytes;
    std::string &List = T.Space == LdsSpace ? Lds : Memory;
    if (List.size() > 1)
      List += ", ";
    List += json(Site, Function, Address, Total.Location, T);
    (T.Space == LdsSpace ? Cycles : Lines) += T.Used;
    (T.Space == LdsSpace ? IdealCycles : IdealLines) += T.Ideal;
  }
  gpuinstr_report_json(Dispatch, "memory", (Memory + "]").c_str());
  gpuinstr_report_json(Dispatch, "lds", (Lds + "]").c_str());
  gpuinstr_report_u64(Dispatch, "lines", Lines);
  gpuinstr_report_u64(Dispatch, "ideal_lines", IdealLines);
  gpuinstr_report_u64(Dispatch, "lds_cycles", Cycles);
  gpuinstr_report_u64(Dispatch, "lds_ideal_cycles", IdealCycles);
  gpuinstr_report_u64(Dispatch, "records", Count);
  if (const uint64_t DroppedHere = gpuinstr_dispatch_dropped(Dispatch, "Efficiency")) {
    gpuinstr_report_u64(Dispatch, "dropped", DroppedHere);
    Dropped += DroppedHere;
  }
}

extern "C" void gpuinstr_tool_exit(void) {
  std::vector<const Instruction *> Sorted;
  uint64_t Lines = 0, IdealLines = 0, Cycles = 0, IdealCycles = 0;
  for (const auto &[Key, I] : Totals) {
    Sorted.push_back(&I);
    (I.Total.Space == LdsSpace ? Cycles : Lines) += I.Total.Used;
    (I.Total.Space == LdsSpace ? IdealCycles : IdealLines) += I.Total.Ideal;
  }
  std::sort(Sorted.begin(), Sorted.end(), [](const Instruction *A, const Instruction *B) {
    return std::make_tuple(A->Total.waste(), A->Total.Used, A->Function, A->Address) >
           std::make_tuple(B->Total.waste(), B->Total.Used, B->Function, B->Address);
  });
  std::string Memory = "[", Lds = "[";
  for (const Instruction *I : Sorted) {
    std::string &List = I->Total.Space == LdsSpace ? Lds : Memory;
    if (List.size() > 1)
      List += ", ";
    std::string Object = json(UINT32_MAX, I->Function, I->Address, I->Location, I->Total);
    Object.insert(Object.size() - 1, ", \"text\": " + gpuinstr::jsonString(I->Text));
    List += Object;
  }
  gpuinstr_report_run_json("memory", (Memory + "]").c_str());
  gpuinstr_report_run_json("lds", (Lds + "]").c_str());
  gpuinstr_report_run_u64("lines", Lines);
  gpuinstr_report_run_u64("ideal_lines", IdealLines);
  gpuinstr_report_run_u64("lds_cycles", Cycles);
  gpuinstr_report_run_u64("lds_ideal_cycles", IdealCycles);
  if (!LeftOut.empty())
    gpuinstr_report_run_u64("left_out", LeftOut.size());
  if (Dropped)
    gpuinstr_report_run_u64("dropped", Dropped);

  std::fprintf(stderr,
               "memory efficiency: %zu instructions executed; global, flat and buffer: %llu 64-byte lines touched, "
               "%llu at best; LDS: %llu cycles, %llu without bank conflicts\n",
               Sorted.size(), static_cast<unsigned long long>(Lines), static_cast<unsigned long long>(IdealLines),
               static_cast<unsigned long long>(Cycles), static_cast<unsigned long long>(IdealCycles));
  if (!LeftOut.empty())
    std::fprintf(stderr, "  PARTIAL: %zu memory instructions of the kernels run were left out, not measured\n",
                 LeftOut.size());
  if (Dropped)
    std::fprintf(stderr, "  PARTIAL: %llu records were dropped because the ring was full (--ring-full drop); "
                 "the numbers above count only the rest\n",
                 static_cast<unsigned long long>(Dropped));
  for (size_t K = 0; K < Sorted.size() && K < 10 && Sorted[K]->Total.waste(); ++K) {
    const Instruction &I = *Sorted[K];
    const bool Lds = I.Total.Space == LdsSpace;
    std::fprintf(stderr, "  %10llu %s (%llu of %llu)  %s%s%s at 0x%llx: %s\n",
                 static_cast<unsigned long long>(I.Total.waste()), Lds ? "conflict cycles" : "excess lines   ",
                 static_cast<unsigned long long>(I.Total.Used), static_cast<unsigned long long>(I.Total.Ideal),
                 I.Location.c_str(), I.Location.empty() ? "" : " ", I.Function.c_str(),
                 static_cast<unsigned long long>(I.Address), I.Text.c_str());
  }
}
