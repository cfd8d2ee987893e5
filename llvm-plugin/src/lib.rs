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
//! Every step is also a named pass for `opt -load-pass-plugin`:
//! `gpuinstr-embed` runs the whole thing, `gpuinstr-<step>` one step in place.

pub mod embed;
pub mod ir;
pub mod steps;
pub mod type_names;

// The C API bindings of the LLVM whose clang loads the plugin.
#[cfg(feature = "llvm15")]
use llvm_sys_150 as llvm_sys;
#[cfg(feature = "llvm17")]
use llvm_sys_170 as llvm_sys;
#[cfg(feature = "llvm21")]
use llvm_sys_211 as llvm_sys;
#[cfg(feature = "llvm22")]
use llvm_sys_221 as llvm_sys;

use ir::Module;
use steps::Step;

/// The LLVM this plugin was built for (`llvm-config --version`): only a
/// clang of that major can load it.
pub const LLVM_VERSION: &str = env!("GPUINSTR_LLVM_VERSION");

/// Name of the whole-plugin pass under opt.
pub const EMBED_PASS_NAME: &str = "gpuinstr-embed";

/// Name of the early pass (hide-bindings) under opt.
pub const HIDE_BINDINGS_PASS_NAME: &str = "gpuinstr-hide-bindings";

/// The passes LLVM runs for us (cpp/registration.cpp adds them; the numbers
/// are cpp/llvm_shim.h's GPUINSTR_PASS_*).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    /// Before any optimisation: calls to intrinsic bindings go to stand-ins.
    HideBindings,
    /// The whole plugin: preprocess a clone and embed it.
    Embed,
    /// One step, run in place (for testing and inspecting steps one by one).
    Step(Step),
}

impl Pass {
    const STEP_BASE: i32 = 2;

    fn from_kind(kind: i32) -> Option<Pass> {
        match kind {
            0 => Some(Pass::HideBindings),
            1 => Some(Pass::Embed),
            _ => Step::PIPELINE.get(usize::try_from(kind - Self::STEP_BASE).ok()?).copied().map(Pass::Step),
        }
    }

    fn kind(self) -> i32 {
        match self {
            Pass::HideBindings => 0,
            Pass::Embed => 1,
            Pass::Step(step) => {
                Self::STEP_BASE
                    + Step::PIPELINE.iter().position(|s| *s == step).expect("every step is in the pipeline") as i32
            }
        }
    }

    /// The pass an `opt -passes=` name means.
    fn from_name(name: &str) -> Option<Pass> {
        match name {
            EMBED_PASS_NAME => Some(Pass::Embed),
            HIDE_BINDINGS_PASS_NAME => Some(Pass::HideBindings),
            _ => Step::from_pass_name(name).map(Pass::Step),
        }
    }

    /// Runs on a module; whether it changed it.
    fn run(self, module: Module<'_>) -> bool {
        match self {
            Pass::HideBindings => embed::hide_bindings(module),
            Pass::Embed => embed::run(module),
            Pass::Step(step) => {
                let outcome = step.run(module);
                outcome.report(module);
                outcome.changed
            }
        }
    }
}

/// Runs the pass of a kind (ir.rs's entry point); whether it changed the module.
fn run_pass(kind: i32, module: Module<'_>) -> bool {
    Pass::from_kind(kind).is_some_and(|pass| pass.run(module))
}

/// The kind of the pass an `opt -passes=` name means (ir.rs's entry point).
fn pass_kind(name: &str) -> Option<i32> {
    Pass::from_name(name).map(Pass::kind)
}
