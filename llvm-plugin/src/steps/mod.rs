//! The preprocessing steps the plugin runs on its clone of a tool's device
//! module, in order. Each step is also a pass of its own under
//! `opt -load-pass-plugin=libembed.so -passes=<name>`, working in place.
//! Steps find hooks and intrinsics by function attribute, so each one works
//! alone once `gpuinstr-collect-annotations` has run (or on hand-written IR
//! that carries the attributes).

use crate::ir::{Call, Function, Module};

mod check_hooks;
mod collect_annotations;
mod externalize_globals;
pub mod hide_bindings;
mod prepare_hooks;
mod remove_kernels;
mod rename_intrinsics;
mod substitute_amdgcn_intrinsics;

/// One preprocessing step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Annotations become `gpuinstr_hook` / `gpuinstr_intrinsic` attributes;
    /// `llvm.global.annotations`, `llvm.used` and `llvm.compiler.used` go.
    CollectAnnotations,
    /// No inline assembly in hooks or anything they call.
    CheckHooks,
    /// Hooks become always-inline, externally visible entry points.
    PrepareHooks,
    /// Intrinsic bindings lose their bodies and get their IR names.
    RenameIntrinsics,
    /// Kernels (the hook-handle stubs) go.
    RemoveKernels,
    /// Mutable globals and managed storage become external declarations;
    /// the reserved variable and `llvm.metadata` globals go.
    ExternalizeGlobals,
    /// Kernel-state `llvm.amdgcn.*` calls become framework intrinsic calls.
    SubstituteAmdgcnIntrinsics,
}

impl Step {
    /// The steps in the order the embed pass runs them.
    pub const PIPELINE: [Step; 7] = [
        Step::CollectAnnotations,
        Step::CheckHooks,
        Step::PrepareHooks,
        Step::RenameIntrinsics,
        Step::RemoveKernels,
        Step::ExternalizeGlobals,
        Step::SubstituteAmdgcnIntrinsics,
    ];

    pub fn pass_name(self) -> &'static str {
        match self {
            Step::CollectAnnotations => "gpuinstr-collect-annotations",
            Step::CheckHooks => "gpuinstr-check-hooks",
            Step::PrepareHooks => "gpuinstr-prepare-hooks",
            Step::RenameIntrinsics => "gpuinstr-rename-intrinsics",
            Step::RemoveKernels => "gpuinstr-remove-kernels",
            Step::ExternalizeGlobals => "gpuinstr-externalize-globals",
            Step::SubstituteAmdgcnIntrinsics => "gpuinstr-substitute-amdgcn-intrinsics",
        }
    }

    pub fn from_pass_name(name: &str) -> Option<Step> {
        Step::PIPELINE.into_iter().find(|s| s.pass_name() == name)
    }

    pub fn run<'m>(self, module: Module<'m>) -> Outcome<'m> {
        match self {
            Step::CollectAnnotations => collect_annotations::run(module),
            Step::CheckHooks => check_hooks::run(module),
            Step::PrepareHooks => prepare_hooks::run(module),
            Step::RenameIntrinsics => rename_intrinsics::run(module),
            Step::RemoveKernels => remove_kernels::run(module),
            Step::ExternalizeGlobals => externalize_globals::run(module),
            Step::SubstituteAmdgcnIntrinsics => substitute_amdgcn_intrinsics::run(module),
        }
    }
}

/// An error in the tool's source, reported as a clang diagnostic.
pub struct StepError<'m> {
    pub function: Option<Function<'m>>,
    pub call: Option<Call<'m>>,
    pub message: String,
}

impl<'m> StepError<'m> {
    pub fn in_function(function: Function<'m>, message: String) -> Self {
        StepError { function: Some(function), call: None, message }
    }

    pub fn at_call(function: Function<'m>, call: Call<'m>, message: String) -> Self {
        StepError { function: Some(function), call: Some(call), message }
    }
}

/// What a step did.
#[derive(Default)]
pub struct Outcome<'m> {
    pub changed: bool,
    pub errors: Vec<StepError<'m>>,
}

impl<'m> Outcome<'m> {
    pub fn report(&self, module: Module<'m>) {
        for error in &self.errors {
            module.report_error(error.function, error.call, &error.message);
        }
    }
}

/// A readable name for a function in messages: C++ names demangled to their
/// qualified name.
pub fn display_name(function: &Function<'_>) -> String {
    let name = function.name();
    Module::demangle_qualified_name(&name).unwrap_or(name)
}
