// The kernel-argument tool's host part (gpuinstr/host.h): each dispatch's
// gridDim and blockDim, as its hook read them from the kernel's launch
// state, go into the runtime's report; at exit, each kernel's launch shapes
// and how often each was used.
#include <gpuinstr/host.h>

#include <cstdio>
#include <map>
#include <string>
#include <tuple>

namespace {
struct Dim3 {
  uint32_t X, Y, Z;
  bool operator<(const Dim3 &O) const { return std::tie(X, Y, Z) < std::tie(O.X, O.Y, O.Z); }
  std::string json() const {
    return "[" + std::to_string(X) + ", " + std::to_string(Y) + ", " + std::to_string(Z) + "]";
  }
};
uint64_t Dispatches = 0;
uint64_t PartialDispatches = 0;
/// Per kernel, dispatches per (gridDim, blockDim).
std::map<std::string, std::map<std::pair<Dim3, Dim3>, uint64_t>> Shapes;
} // namespace

extern "C" void gpuinstr_tool_dispatch(gpuinstr_dispatch *Dispatch) {
  // The hook runs at the kernel's entry: left out, it wrote nothing, and
  // zeros would read as a launch (the runtime marks the dispatch partial).
  if (gpuinstr_dispatch_points_left_out(Dispatch)) {
    ++PartialDispatches;
    return;
  }
  Dim3 Grid{}, Block{};
  if (!gpuinstr::read(Dispatch, "GridDim", Grid) || !gpuinstr::read(Dispatch, "BlockDim", Block)) {
    gpuinstr_report_warning(Dispatch, "the dispatch's code object has no 12-byte GridDim and BlockDim");
    return;
  }
  gpuinstr_report_json(Dispatch, "gridDim", Grid.json().c_str());
  gpuinstr_report_json(Dispatch, "blockDim", Block.json().c_str());
  ++Shapes[gpuinstr_dispatch_kernel(Dispatch)][{Grid, Block}];
  ++Dispatches;
}

extern "C" void gpuinstr_tool_exit(void) {
  std::string Json = "{";
  for (const auto &[Kernel, Launches] : Shapes) {
    std::string List;
    for (const auto &[Shape, Count] : Launches)
      List += (List.empty() ? "" : ", ") + std::string("{\"gridDim\": ") + Shape.first.json() +
              ", \"blockDim\": " + Shape.second.json() + ", \"dispatches\": " + std::to_string(Count) + "}";
    Json += (Json.size() > 1 ? ", " : "") + gpuinstr::jsonString(Kernel) + ": [" + List + "]";
  }
  gpuinstr_report_run_json("launches", (Json + "}").c_str());
  if (PartialDispatches)
    gpuinstr_report_run_u64("partial_dispatches", PartialDispatches);

  std::fprintf(stderr, "kernel arguments: %llu dispatches of %zu kernels\n",
               static_cast<unsigned long long>(Dispatches), Shapes.size());
  for (const auto &[Kernel, Launches] : Shapes)
    for (const auto &[Shape, Count] : Launches)
      std::fprintf(stderr, "  %-40s grid %s block %s: %llu dispatches\n", Kernel.c_str(),
                   Shape.first.json().c_str(), Shape.second.json().c_str(), static_cast<unsigned long long>(Count));
  if (PartialDispatches)
    std::fprintf(stderr, "  PARTIAL: %llu dispatches of kernels whose entry point was left out, not read\n",
                 static_cast<unsigned long long>(PartialDispatches));
}
