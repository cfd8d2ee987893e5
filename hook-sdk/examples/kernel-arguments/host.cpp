// The kernel-argument tool's host part (gpuinstr/host.h): each dispatch's
// gridDim and blockDim, as its hook read them from the kernel's launch
// state, go into the runtime's report.
#include <gpuinstr/host.h>

#include <cstdio>

namespace {
struct Dim3 {
  uint32_t X, Y, Z;
};
uint64_t Dispatches = 0;
uint64_t PartialDispatches = 0;
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
  char Json[160];
  std::snprintf(Json, sizeof Json, "[%u, %u, %u]", Grid.X, Grid.Y, Grid.Z);
  gpuinstr_report_json(Dispatch, "gridDim", Json);
  std::snprintf(Json, sizeof Json, "[%u, %u, %u]", Block.X, Block.Y, Block.Z);
  gpuinstr_report_json(Dispatch, "blockDim", Json);
  ++Dispatches;
}

extern "C" void gpuinstr_tool_exit(void) {
  std::fprintf(stderr, "kernel arguments: %llu dispatches\n", static_cast<unsigned long long>(Dispatches));
  if (PartialDispatches)
    std::fprintf(stderr, "  PARTIAL: %llu dispatches of kernels whose entry point was left out, not read\n",
                 static_cast<unsigned long long>(PartialDispatches));
}
