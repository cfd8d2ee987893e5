//! `gpuinstr-link instrument`: a tool and a plan applied to an application
//! code object, through every stage: load -> lift -> liveness -> plan ->
//! sva -> payloads (5-8) -> patch -> emit + link.

use std::collections::BTreeMap;
use std::fmt::Write;

use gpuinstr_intrinsics::Registry;
use inkwell::context::Context;
use serde::Serialize;
use thiserror::Error;

use crate::payloads::{compile_payloads, CompileError, PayloadOptions};
use crate::plan::{hook_counts, Plan};
use crate::stages::emit::link::{build, EmitError, Linker};
use crate::stages::emit::EmitOptions;
use crate::stages::lift::{lift, IsaError};
use crate::stages::liveness::analyze;
use crate::stages::load::CodeObject;
use crate::stages::patch::{patch, KernelPatch, PatchError};
use crate::stages::sva::{place, SvaRequest};

#[derive(Clone, Debug)]
pub struct InstrumentOptions {
    /// Let kernels' register allocations grow when the SVA needs a register.
    pub grow_registers: bool,
    pub linker: Linker,
    pub payloads: PayloadOptions,
}

impl Default for InstrumentOptions {
    fn default() -> Self {
        InstrumentOptions { grow_registers: false, linker: Linker::Comgr, payloads: PayloadOptions::default() }
    }
}

/// What a run did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct InstrumentReport {
    pub target: String,
    /// Points per hook.
    pub hooks: BTreeMap<String, usize>,
    pub points: usize,
    pub kernels: Vec<KernelPatch>,
    /// Functions that were not instrumented, and why.
    pub skipped: Vec<String>,
    /// Points left alone, and why.
    pub rejected: Vec<String>,
    pub globals: Vec<String>,
    pub seconds: f64,
}

#[derive(Debug, Error)]
pub enum InstrumentError {
    #[error(transparent)]
    Lift(#[from] IsaError),
    #[error("{0}")]
    Tool(#[from] crate::error::ToolProblem),
    #[error(transparent)]
    Compile(#[from] CompileError),
    #[error(transparent)]
    Patch(#[from] PatchError),
    #[error(transparent)]
    Emit(#[from] EmitError),
    #[error("the plan selects no instruction of this code object ({0})")]
    NothingSelected(String),
}

/// Instruments one code object; the new code object's bytes and a report.
pub fn instrument_code_object(
    tool: &CodeObject,
    app: &CodeObject,
    plan: &Plan,
    registry: &Registry,
    options: &InstrumentOptions,
) -> Result<(Vec<u8>, InstrumentReport), InstrumentError> {
    let start = std::time::Instant::now();
    let lifted = lift(app)?;
    let liveness = analyze(&lifted);
    let mut report = InstrumentReport { target: app.target.to_string(), ..InstrumentReport::default() };
    for function in lifted.functions.iter().filter(|f| !f.relocatable()) {
        report.skipped.push(format!("{}: its code cannot move (see gpuinstr-link lift --emit stats)", function.name));
    }
    let points = plan.select(&lifted);
    if points.is_empty() {
        let kernels: Vec<&str> = lifted.functions.iter().filter(|f| f.is_kernel()).map(|f| f.name.as_str()).collect();
        return Err(InstrumentError::NothingSelected(format!("kernels: {}", kernels.join(", "))));
    }

    // Which hooks read the work-item ids decides whether they need a register.
    let context = Context::create();
    let module = crate::tool::read_tool_module(&context, tool)?;
    let summary = crate::tool::summarize(&module, 1);
    let used: Vec<&str> = points.iter().flat_map(|p| p.calls.iter().map(|c| c.hook.as_str())).collect();
    let work_item_ids = summary
        .hooks
        .iter()
        .filter(|h| used.contains(&h.name.as_str()))
        .any(|h| h.intrinsics.iter().any(|i| i.starts_with("gpuinstr::workitemId")));
    drop(module);

    let request = SvaRequest {
        instrumented: points.iter().map(|p| p.function).collect(),
        work_item_ids,
        grow: options.grow_registers,
    };
    let placement = place(&lifted, &liveness, &request);
    let mut payload_options = options.payloads.clone();
    payload_options.registers.extend(placement.functions.iter().map(|(f, r)| (*f, *r)));
    for kernel in &placement.kernels {
        if let Some(problem) = &kernel.problem {
            let why = format!("{}: {problem}", lifted.functions[kernel.kernel].name);
            for function in crate::analyze::reachable_functions(&lifted, kernel.kernel) {
                payload_options.unplaced.entry(function).or_insert_with(|| why.clone());
            }
        }
    }
    let compiled = compile_payloads(tool, &lifted, &liveness, &points, registry, &payload_options)?;
    let (patch, patch_report) = patch(&lifted, &liveness, &points, &compiled, &placement)?;

    let emit = EmitOptions { patch: Some(patch), ..EmitOptions::default() };
    let (bytes, _assembly) = build(&lifted, &emit, options.linker)?;
    report.hooks = hook_counts(&points);
    report.points = points.len();
    report.kernels = patch_report.kernels;
    report.globals = patch_report.globals;
    report.rejected = patch_report.rejected;
    report.seconds = start.elapsed().as_secs_f64();
    Ok((bytes, report))
}

impl InstrumentReport {
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        writeln!(out, "target {}: {} points, {:.2} s", self.target, self.points, self.seconds).unwrap();
        for (hook, count) in &self.hooks {
            writeln!(out, "  hook {hook}: {count} points").unwrap();
        }
        writeln!(
            out,
            "  kernel                                   sites  added instr  per site  VGPRs    AGPRs    SGPRs    stack"
        )
        .unwrap();
        for kernel in &self.kernels {
            let per_site = if kernel.sites > 0 { kernel.instructions_added as f64 / kernel.sites as f64 } else { 0.0 };
            writeln!(
                out,
                "  {:<40} {:>5} {:>12} {:>9.1}  {:>3}->{:<3}  {:>3}->{:<3}  {:>3}->{:<3}  {}->{}",
                kernel.name,
                kernel.sites,
                kernel.instructions_added,
                per_site,
                kernel.vgprs.0,
                kernel.vgprs.1,
                kernel.agprs.0,
                kernel.agprs.1,
                kernel.sgprs.0,
                kernel.sgprs.1,
                kernel.stack_bytes.0,
                kernel.stack_bytes.1
            )
            .unwrap();
        }
        for skipped in &self.skipped {
            writeln!(out, "  not instrumented: {skipped}").unwrap();
        }
        if !self.rejected.is_empty() {
            writeln!(out, "  {} points rejected:", self.rejected.len()).unwrap();
            for rejected in &self.rejected {
                writeln!(out, "    {rejected}").unwrap();
            }
        }
        if !self.globals.is_empty() {
            writeln!(out, "  tool globals defined: {}", self.globals.join(", ")).unwrap();
        }
        out
    }
}
