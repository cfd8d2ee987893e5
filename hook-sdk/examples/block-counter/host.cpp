// The block counter's host part (gpuinstr/host.h): each dispatch's
// count goes into the runtime's report, and the counts per kernel are
// printed and reported when the program ends. Built as a shared library:
//   c++ -shared -fPIC -I hook-sdk/include host.cpp -o libblock-counter-host.so
//   gpuinstr-run --tool-host ./libblock-counter-host.so -- ./app.instrumented
#include <gpuinstr/host.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

namespace {
struct KernelTotal {
  uint64_t Dispatches = 0;
  uint64_t Instructions = 0;
  /// Points the kernel may run that were left out (--allow-partial).
  uint32_t PointsLeftOut = 0;
};
std::map<std::string, KernelTotal> PerKernel;
} // namespace

extern "C" void gpuinstr_tool_dispatch(gpuinstr_dispatch *Dispatch) {
  uint64_t Count = 0;
  if (!gpuinstr::read(Dispatch, "Counter", Count)) {
    gpuinstr_report_warning(Dispatch, "the dispatch's code object has no 8-byte Counter");
    return;
  }
  gpuinstr_report_u64(Dispatch, "instructions", Count);
  KernelTotal &Total = PerKernel[gpuinstr_dispatch_kernel(Dispatch)];
  Total.Dispatches += 1;
  Total.Instructions += Count;
  Total.PointsLeftOut = std::max(Total.PointsLeftOut, gpuinstr_dispatch_points_left_out(Dispatch));
}

extern "C" void gpuinstr_tool_exit(void) {
  std::string Json = "{";
  for (const auto &[Kernel, Total] : PerKernel) {
    Json += (Json.size() > 1 ? ", " : "") + gpuinstr::jsonString(Kernel) +
            ": {\"dispatches\": " + std::to_string(Total.Dispatches) +
            ", \"instructions\": " + std::to_string(Total.Instructions);
    if (Total.PointsLeftOut)
      Json += ", \"points_left_out\": " + std::to_string(Total.PointsLeftOut);
    Json += "}";
  }
  gpuinstr_report_run_json("kernels", (Json + "}").c_str());

  std::fprintf(stderr, "block counter: %zu kernels\n", PerKernel.size());
  for (const auto &[Kernel, Total] : PerKernel) {
    std::fprintf(stderr, "  %-40s %6llu dispatches %16llu instructions", Kernel.c_str(),
                 static_cast<unsigned long long>(Total.Dispatches),
                 static_cast<unsigned long long>(Total.Instructions));
    if (Total.PointsLeftOut)
      std::fprintf(stderr, "  PARTIAL: %u points left out, not counted", Total.PointsLeftOut);
    std::fprintf(stderr, "\n");
  }
}
