// The plugin's registration with LLVM's new pass manager, for every LLVM
// major gpuinstr builds against (15, 17, 21): a pass that hands the module
// to the Rust side (src/ir.rs: gpuinstr_plugin_run), added at the extension
// points the plugin uses and under its own names for opt's -passes=.
#include "llvm_shim.h"

#include <llvm/Config/llvm-config.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>
#include <llvm/Passes/PassBuilder.h>
// LLVM 22 moved the plugin interface (and gave it API version 2).
#if LLVM_VERSION_MAJOR >= 22
#include <llvm/Plugins/PassPlugin.h>
#else
#include <llvm/Passes/PassPlugin.h>
#endif

using namespace llvm;

namespace {

// A module pass of the Rust side: Kind is one of gpuinstr_pass_kind's values.
struct RustModulePass : PassInfoMixin<RustModulePass> {
  int Kind;
  explicit RustModulePass(int Kind) : Kind(Kind) {}
  PreservedAnalyses run(Module &M, ModuleAnalysisManager &) {
    return gpuinstr_plugin_run(Kind, wrap(&M)) ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
  // Runs at -O0 and on optnone functions' modules too: the embedding is
  // part of building the tool, not an optimisation.
  static bool isRequired() { return true; }
};

void registerCallbacks(PassBuilder &PB) {
  // Before any optimisation: calls to intrinsic bindings go to stand-ins.
  PB.registerPipelineStartEPCallback(
      [](ModulePassManager &MPM, OptimizationLevel) { MPM.addPass(RustModulePass(GPUINSTR_PASS_HIDE_BINDINGS)); });
  PB.registerFullLinkTimeOptimizationEarlyEPCallback(
      [](ModulePassManager &MPM, OptimizationLevel) { MPM.addPass(RustModulePass(GPUINSTR_PASS_HIDE_BINDINGS)); });
  // After optimisation (every -O level, -O0 included): embed.
#if LLVM_VERSION_MAJOR >= 20
  PB.registerOptimizerLastEPCallback([](ModulePassManager &MPM, OptimizationLevel, ThinOrFullLTOPhase) {
    MPM.addPass(RustModulePass(GPUINSTR_PASS_EMBED));
  });
#else
  PB.registerOptimizerLastEPCallback(
      [](ModulePassManager &MPM, OptimizationLevel) { MPM.addPass(RustModulePass(GPUINSTR_PASS_EMBED)); });
#endif
  PB.registerFullLinkTimeOptimizationLastEPCallback(
      [](ModulePassManager &MPM, OptimizationLevel) { MPM.addPass(RustModulePass(GPUINSTR_PASS_EMBED)); });
  PB.registerPipelineParsingCallback(
      [](StringRef Name, ModulePassManager &MPM, ArrayRef<PassBuilder::PipelineElement>) {
        int Kind = gpuinstr_plugin_pass_kind(Name.data(), Name.size());
        if (Kind < 0)
          return false;
        MPM.addPass(RustModulePass(Kind));
        return true;
      });
}

} // namespace

extern "C" uint32_t gpuinstr_plugin_api_version(void) { return LLVM_PLUGIN_API_VERSION; }

extern "C" void gpuinstr_register_pass_builder_callbacks(void *PassBuilder) {
  registerCallbacks(*static_cast<llvm::PassBuilder *>(PassBuilder));
}
