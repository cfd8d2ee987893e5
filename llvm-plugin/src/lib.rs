//! `libembed.so`: the gpuinstr LLVM pass plugin.
//!
//! Loaded into clang (`hipcc -fpass-plugin=libembed.so`), it runs on amdgcn
//! device modules at the optimizer-last extension point (every -O level) and
//! at the full-LTO-last one (-fgpu-rdc, loaded into the offload linker). It
//! preprocesses a clone of the tool's device module ([`steps`]) and embeds
//! the clone's bitcode in the `.llvmbc` section ([`embed`]). Before any
//! optimisation (pipeline start, full LTO early) it hides the calls to
//! intrinsic bindings from the optimiser ([`steps::hide_bindings`]).
//!
//! Every step is also a named pass for `opt-15 -load-pass-plugin`:
//! `gpuinstr-embed` runs the whole thing, `gpuinstr-<step>` one step in place.

pub mod embed;
pub mod ir;
pub mod steps;
pub mod type_names;

use llvm_plugin::inkwell::module::Module as InkwellModule;
use llvm_plugin::{LlvmModulePass, ModuleAnalysisManager, PassBuilder, PipelineParsing, PreservedAnalyses};

use ir::Module;
use steps::Step;

/// Name of the whole-plugin pass under opt.
pub const EMBED_PASS_NAME: &str = "gpuinstr-embed";

/// Name of the early pass (hide-bindings) under opt.
pub const HIDE_BINDINGS_PASS_NAME: &str = "gpuinstr-hide-bindings";

/// Before any optimisation: calls to intrinsic bindings go to stand-ins.
struct HideBindingsPass;

impl LlvmModulePass for HideBindingsPass {
    fn run_pass(&self, module: &mut InkwellModule<'_>, _: &ModuleAnalysisManager) -> PreservedAnalyses {
        if embed::hide_bindings(Module::from_pass(module)) {
            PreservedAnalyses::None
        } else {
            PreservedAnalyses::All
        }
    }
}

struct EmbedPass;

impl LlvmModulePass for EmbedPass {
    fn run_pass(&self, module: &mut InkwellModule<'_>, _: &ModuleAnalysisManager) -> PreservedAnalyses {
        if embed::run(Module::from_pass(module)) {
            PreservedAnalyses::None
        } else {
            PreservedAnalyses::All
        }
    }
}

/// One step, run in place (for testing and inspecting steps one by one).
struct StepPass(Step);

impl LlvmModulePass for StepPass {
    fn run_pass(&self, module: &mut InkwellModule<'_>, _: &ModuleAnalysisManager) -> PreservedAnalyses {
        let module = Module::from_pass(module);
        let outcome = self.0.run(module);
        outcome.report(module);
        if outcome.changed {
            PreservedAnalyses::None
        } else {
            PreservedAnalyses::All
        }
    }
}

#[llvm_plugin::plugin(name = "gpuinstr-embed", version = "0.1")]
fn plugin_registrar(builder: &mut PassBuilder) {
    builder.add_pipeline_start_ep_callback(|manager, _| manager.add_pass(HideBindingsPass));
    builder.add_full_lto_early_ep_callback(|manager, _| manager.add_pass(HideBindingsPass));
    builder.add_optimizer_last_ep_callback(|manager, _| manager.add_pass(EmbedPass));
    builder.add_full_lto_last_ep_callback(|manager, _| manager.add_pass(EmbedPass));
    builder.add_module_pipeline_parsing_callback(|name, manager| {
        if name == EMBED_PASS_NAME {
            manager.add_pass(EmbedPass);
            PipelineParsing::Parsed
        } else if name == HIDE_BINDINGS_PASS_NAME {
            manager.add_pass(HideBindingsPass);
            PipelineParsing::Parsed
        } else if let Some(step) = Step::from_pass_name(name) {
            manager.add_pass(StepPass(step));
            PipelineParsing::Parsed
        } else {
            PipelineParsing::NotParsed
        }
    });
}
