// The opcode histogram's host part (gpuinstr/host.h): each dispatch's
// executions per opcode, named with the code object's point table, go into
// the runtime's report; at exit the run's executions per opcode are
// reported and the most executed printed.
#include <gpuinstr/host.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {
constexpr size_t OpcodeSlots = size_t(1) << 15; // as in tool.hip
std::map<std::string, uint64_t> Totals;
/// Dispatches of kernels that may run points left out (--allow-partial).
uint64_t PartialDispatches = 0;
/// Per code object (by its index), slot -> the names of the opcodes the
/// plan instrumented that count there.
std::map<uint32_t, std::map<size_t, std::string>> SlotNames;

} // namespace

// Once per code object: its slots' names, from its point table.
extern "C" void gpuinstr_tool_load(const gpuinstr_code_object *CodeObject) {
  size_t Count = 0;
  const gpuinstr_site *Sites = gpuinstr_code_object_sites(CodeObject, &Count);
  std::map<size_t, std::set<std::string>> OpcodesOfSlot;
  for (size_t K = 0; K < Count; ++K)
    OpcodesOfSlot[Sites[K].Opcode % OpcodeSlots].insert(Sites[K].OpcodeName);
  // Two opcodes sharing a slot are named together, not merged quietly.
  std::map<size_t, std::string> &Names = SlotNames[gpuinstr_code_object_index(CodeObject)];
  for (const auto &[Slot, Opcodes] : OpcodesOfSlot)
    for (const std::string &Opcode : Opcodes)
      Names[Slot] += (Names[Slot].empty() ? "" : "|") + Opcode;
}

extern "C" void gpuinstr_tool_dispatch(gpuinstr_dispatch *Dispatch) {
  const auto *Histogram = gpuinstr::array<uint64_t>(Dispatch, "OpcodeHistogram", OpcodeSlots);
  if (!Histogram) {
    gpuinstr_report_warning(Dispatch, "the dispatch's code object has no OpcodeHistogram of 32768 counters");
    return;
  }
  const std::map<size_t, std::string> &Names =
      SlotNames[gpuinstr_code_object_index(gpuinstr_dispatch_code_object(Dispatch))];
  std::string Json = "{";
  for (size_t Slot = 0; Slot < OpcodeSlots; ++Slot) {
    if (!Histogram[Slot])
      continue;
    auto Named = Names.find(Slot);
    std::string Name = Named != Names.end() ? Named->second : "opcode slot " + std::to_string(Slot);
    Totals[Name] += Histogram[Slot];
    if (Json.size() > 1)
      Json += ", ";
    Json += gpuinstr::jsonString(Name) + ": " + std::to_string(Histogram[Slot]);
  }
  gpuinstr_report_json(Dispatch, "opcodes", (Json + "}").c_str());
  PartialDispatches += gpuinstr_dispatch_points_left_out(Dispatch) != 0;
}

extern "C" void gpuinstr_tool_exit(void) {
  std::string Json = "{";
  std::vector<std::pair<uint64_t, std::string>> Sorted;
  for (const auto &[Name, Executions] : Totals) {
    Json += (Json.size() > 1 ? ", " : "") + gpuinstr::jsonString(Name) + ": " + std::to_string(Executions);
    Sorted.emplace_back(Executions, Name);
  }
  gpuinstr_report_run_json("opcodes", (Json + "}").c_str());
  if (PartialDispatches)
    gpuinstr_report_run_u64("partial_dispatches", PartialDispatches);

  std::sort(Sorted.rbegin(), Sorted.rend());
  std::fprintf(stderr, "opcode histogram: %zu opcodes executed; the most executed:\n", Sorted.size());
  for (size_t K = 0; K < Sorted.size() && K < 10; ++K)
    std::fprintf(stderr, "  %-32s %16llu\n", Sorted[K].second.c_str(),
                 static_cast<unsigned long long>(Sorted[K].first));
  if (PartialDispatches)
    std::fprintf(stderr, "  PARTIAL: %llu dispatches ran points that were left out, not counted\n",
                 static_cast<unsigned long long>(PartialDispatches));
}
