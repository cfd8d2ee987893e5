// Branch divergence's host part (gpuinstr/host.h): every record (branch,
// wavefront, OLD MASK, IF MASK), streamed from the ring while the dispatch
// runs, is kept by the run's database (its `records` table), and on
// request (`gpuinstr-run --tool-file branch-records.tsv`, or where the
// database keeps no records) also goes into the file `branch-records.tsv`
// beside the report; per
// dispatch, each executed branch's wavefront executions and divergent ones
// go into the report; at exit the run's totals per branch and
// how many of the instrumented branches never ran are reported, and the
// most divergent branches are printed with their kernels and instructions.
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
struct BranchRecord {
  uint32_t Branch;
  uint32_t Wavefront;
  uint64_t OldMask;
  uint64_t IfMask;
};

struct Branch {
  std::string Function;
  std::string Text;
  /// `file:line` when the code object has line tables (-g).
  std::string Location;
  uint64_t Address = 0;
  uint64_t Executions = 0;
  uint64_t Divergent = 0;
};
/// The run's branches by (function, address): code objects loaded twice
/// add up.
std::map<std::pair<std::string, uint64_t>, Branch> Totals;
/// Branches selected and left out (--allow-partial): never recorded.
std::set<std::pair<std::string, uint64_t>> LeftOut;
/// Every branch instrumented in the code objects the program loaded.
std::set<std::pair<std::string, uint64_t>> Instrumented;
bool HeaderWritten = false;
/// Per dispatch whose records are arriving, per site: executions, divergent ones.
std::map<uint64_t, std::map<uint32_t, std::pair<uint64_t, uint64_t>>> Dispatches;
/// Records read per dispatch.
std::map<uint64_t, uint64_t> Read;

/// Whether the records' text copy is wanted (else the database is their
/// one store).
bool textWanted() {
  static const bool Wanted = gpuinstr_file_requested("branch-records.tsv");
  return Wanted;
}
void write(const std::string &Line) { gpuinstr_write("branch-records.tsv", Line.data(), Line.size()); }
} // namespace

extern "C" void gpuinstr_tool_load(const gpuinstr_code_object *CodeObject) {
  size_t Count = 0;
  const gpuinstr_site *Sites = gpuinstr_code_object_sites(CodeObject, &Count);
  for (size_t Site = 0; Site < Count; ++Site)
    if (!Sites[Site].LeftOut)
      Instrumented.insert({Sites[Site].Function, Sites[Site].Address});
}

extern "C" void gpuinstr_tool_records(const gpuinstr_records *Batch) {
  size_t Count = 0;
  const BranchRecord *Records = gpuinstr::records<BranchRecord>(Batch, &Count);
  if (!Records)
    return; // another ring's (the dispatch call checks the counts)
  size_t SiteCount = 0;
  const gpuinstr_site *Sites = gpuinstr_code_object_sites(gpuinstr_records_code_object(Batch), &SiteCount);
  const uint64_t Id = gpuinstr_records_dispatch_id(Batch);
  auto &PerSite = Dispatches[Id];
  const bool Text = textWanted();
  if (Text && !HeaderWritten) {
    write("dispatch\tsite\taddress\twavefront\told_mask\tif_mask\n");
    HeaderWritten = true;
  }
  std::string Lines;
  for (size_t K = 0; K < Count; ++K) {
    const BranchRecord &R = Records[K];
    auto &[Executed, Divergent] = PerSite[R.Branch];
    Executed += 1;
    Divergent += R.IfMask != R.OldMask && R.IfMask != 0;
    if (!Text)
      continue;
    char Line[128];
    const uint64_t Address = R.Branch < SiteCount ? Sites[R.Branch].Address : 0;
    std::snprintf(Line, sizeof Line, "%" PRIu64 "\t%" PRIu32 "\t0x%" PRIx64 "\t%" PRIu32 "\t0x%016" PRIx64 "\t0x%016" PRIx64 "\n",
                  Id, R.Branch, Address, R.Wavefront, R.OldMask, R.IfMask);
    Lines += Line;
  }
  if (Text)
    write(Lines);
  Read[Id] += Count;
}

/// Records the hooks dropped because the ring was full (only with
/// `gpuinstr-run --ring-full drop`).
uint64_t Dropped = 0;

extern "C" void gpuinstr_tool_dispatch(gpuinstr_dispatch *Dispatch) {
  size_t RingSize = 0;
  if (!gpuinstr_global(Dispatch, "BranchRecords", &RingSize) || RingSize != 8) {
    gpuinstr_report_warning(Dispatch, "the dispatch's code object lacks branch-divergence's ring");
    return;
  }
  size_t SiteCount = 0;
  const gpuinstr_site *Sites = gpuinstr_sites(Dispatch, &SiteCount);
  if (gpuinstr_dispatch_points_left_out(Dispatch))
    for (size_t Site = 0; Site < SiteCount; ++Site)
      if (Sites[Site].LeftOut)
        LeftOut.insert({Sites[Site].Function, Sites[Site].Address});
  const uint64_t Id = gpuinstr_dispatch_id(Dispatch);
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> PerSite = std::move(Dispatches[Id]);
  Dispatches.erase(Id);
  const uint64_t Count = gpuinstr_dispatch_records(Dispatch, "BranchRecords");
  if (Read[Id] != Count)
    gpuinstr_report_warning(Dispatch, (std::to_string(Read[Id]) + " branch records read of the " +
                                       std::to_string(Count) + " the dispatch appended")
                                          .c_str());
  Read.erase(Id);

  std::string Json = "[";
  uint64_t Divergent = 0;
  for (const auto &[Site, Counts] : PerSite) {
    const bool Known = Site < SiteCount;
    const std::string Function = Known ? Sites[Site].Function : "?";
    const uint64_t Address = Known ? Sites[Site].Address : 0;
    Branch &Total = Totals[{Function, Address}];
    Total.Function = Function;
    Total.Address = Address;
    Total.Text = Known ? Sites[Site].Text : "site " + std::to_string(Site) + " (not in the site table)";
    Total.Location = Known ? Sites[Site].Location : "";
    Total.Executions += Counts.first;
    Total.Divergent += Counts.second;
    Divergent += Counts.second;
    char Hex[32];
    std::snprintf(Hex, sizeof Hex, "\"0x%" PRIx64 "\"", Address);
    if (Json.size() > 1)
      Json += ", ";
    Json += "{\"site\": " + std::to_string(Site) + ", \"address\": " + Hex +
            ", \"function\": " + gpuinstr::jsonString(Function) +
            (Total.Location.empty() ? "" : ", \"location\": " + gpuinstr::jsonString(Total.Location)) +
            ", \"executions\": " + std::to_string(Counts.first) + ", \"divergent\": " + std::to_string(Counts.second) +
            "}";
  }
  gpuinstr_report_json(Dispatch, "branches", (Json + "]").c_str());
  gpuinstr_report_u64(Dispatch, "records", Count);
  gpuinstr_report_u64(Dispatch, "divergent", Divergent);
  if (const uint64_t DroppedHere = gpuinstr_dispatch_dropped(Dispatch, "BranchRecords")) {
    gpuinstr_report_u64(Dispatch, "dropped", DroppedHere);
    Dropped += DroppedHere;
  }
}

extern "C" void gpuinstr_tool_exit(void) {
  std::vector<const Branch *> Sorted;
  uint64_t Executions = 0, Divergent = 0;
  for (const auto &[Key, Total] : Totals) {
    Sorted.push_back(&Total);
    Executions += Total.Executions;
    Divergent += Total.Divergent;
  }
  std::sort(Sorted.begin(), Sorted.end(), [](const Branch *A, const Branch *B) {
    return std::make_tuple(A->Divergent, A->Executions) > std::make_tuple(B->Divergent, B->Executions);
  });
  size_t NeverExecuted = 0;
  for (const auto &Key : Instrumented)
    NeverExecuted += !Totals.count(Key);

  std::string Json = "[";
  for (const Branch *B : Sorted) {
    char Hex[32];
    std::snprintf(Hex, sizeof Hex, "\"0x%" PRIx64 "\"", B->Address);
    Json += std::string(Json.size() > 1 ? ", " : "") + "{\"address\": " + Hex +
            ", \"function\": " + gpuinstr::jsonString(B->Function) +
            (B->Location.empty() ? "" : ", \"location\": " + gpuinstr::jsonString(B->Location)) +
            ", \"text\": " + gpuinstr::jsonString(B->Text) + ", \"executions\": " + std::to_string(B->Executions) +
            ", \"divergent\": " + std::to_string(B->Divergent) + "}";
  }
  gpuinstr_report_run_json("branches", (Json + "]").c_str());
  gpuinstr_report_run_u64("instrumented_branches", Instrumented.size());
  gpuinstr_report_run_u64("never_executed", NeverExecuted);
  gpuinstr_report_run_u64("divergent", Divergent);
  if (!LeftOut.empty())
    gpuinstr_report_run_u64("left_out", LeftOut.size());
  if (Dropped)
    gpuinstr_report_run_u64("dropped", Dropped);

  std::fprintf(stderr, "branch divergence: %zu branches executed (%zu of %zu instrumented never ran), %llu of %llu "
               "wavefront executions divergent\n",
               Sorted.size(), NeverExecuted, Instrumented.size(), static_cast<unsigned long long>(Divergent),
               static_cast<unsigned long long>(Executions));
  if (!LeftOut.empty())
    std::fprintf(stderr, "  PARTIAL: %zu branches of the kernels run were left out, not recorded\n", LeftOut.size());
  if (Dropped)
    std::fprintf(stderr, "  PARTIAL: %llu branch records were dropped because the ring was full (--ring-full drop); "
                 "the numbers above count only the rest\n",
                 static_cast<unsigned long long>(Dropped));
  for (size_t K = 0; K < Sorted.size() && K < 10 && Sorted[K]->Divergent; ++K)
    std::fprintf(stderr, "  %10llu of %10llu divergent  %s%s%s at 0x%llx: %s\n",
                 static_cast<unsigned long long>(Sorted[K]->Divergent),
                 static_cast<unsigned long long>(Sorted[K]->Executions), Sorted[K]->Location.c_str(),
                 Sorted[K]->Location.empty() ? "" : " ", Sorted[K]->Function.c_str(),
                 static_cast<unsigned long long>(Sorted[K]->Address), Sorted[K]->Text.c_str());
}
