// The opcode histogram's host part (gpuinstr/host.h): each dispatch's
// executions per opcode, named with the code object's point table, go into
// the runtime's report; the run's most executed opcodes are printed at exit.
#include <gpuinstr/host.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace {
constexpr size_t OpcodeSlots = size_t(1) << 15; // as in tool.hip
std::map<std::string, uint64_t> Totals;

std::string quoted(const std::string &Text) {
  std::string Out = "\"";
  for (char C : Text) {
    if (C == '"' || C == '\\')
      Out += '\\';
    Out += C;
  }
  return Out + "\"";
}
} // namespace

extern "C" void gpuinstr_tool_dispatch(gpuinstr_dispatch *Dispatch) {
  size_t Size = 0;
  const auto *Histogram = static_cast<const uint64_t *>(gpuinstr_global(Dispatch, "OpcodeHistogram", &Size));
  if (!Histogram || Size != OpcodeSlots * sizeof(uint64_t)) {
    gpuinstr_report_text(Dispatch, "error", "the dispatch's code object has no OpcodeHistogram of 32768 counters");
    return;
  }
  // Slot -> opcode name, from the points the plan instrumented.
  size_t Count = 0;
  const gpuinstr_site *Sites = gpuinstr_sites(Dispatch, &Count);
  std::map<size_t, std::string> Names;
  for (size_t K = 0; K < Count; ++K) {
    std::string &Name = Names[Sites[K].Opcode % OpcodeSlots];
    if (Name.empty())
      Name = Sites[K].OpcodeName;
    else if (Name != Sites[K].OpcodeName)
      Name += "|" + std::string(Sites[K].OpcodeName); // two opcodes share a slot: said, not merged quietly
  }
  std::string Json = "{";
  for (size_t Slot = 0; Slot < OpcodeSlots; ++Slot) {
    if (!Histogram[Slot])
      continue;
    auto Named = Names.find(Slot);
    std::string Name = Named != Names.end() ? Named->second : "opcode slot " + std::to_string(Slot);
    Totals[Name] += Histogram[Slot];
    if (Json.size() > 1)
      Json += ", ";
    Json += quoted(Name) + ": " + std::to_string(Histogram[Slot]);
  }
  gpuinstr_report_json(Dispatch, "opcodes", (Json + "}").c_str());
}

extern "C" void gpuinstr_tool_exit(void) {
  std::vector<std::pair<uint64_t, std::string>> Sorted;
  for (const auto &[Name, Executions] : Totals)
    Sorted.emplace_back(Executions, Name);
  std::sort(Sorted.rbegin(), Sorted.rend());
  std::fprintf(stderr, "opcode histogram: %zu opcodes executed; the most executed:\n", Sorted.size());
  for (size_t K = 0; K < Sorted.size() && K < 10; ++K)
    std::fprintf(stderr, "  %-32s %16llu\n", Sorted[K].second.c_str(),
                 static_cast<unsigned long long>(Sorted[K].first));
}
