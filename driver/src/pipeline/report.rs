//! What one code object's walk through the pipeline takes and gives: its
//! options, its report (with the report's text form), its errors, and the
//! checks the walk makes between stages (hidden arguments a hook reads,
//! kernels that preload arguments, points left out, undefined tool globals).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use serde::Serialize;
use thiserror::Error;

use crate::stages::emit::link::{EmitError, Linker};
use crate::stages::lift::{FunctionKind, LiftError, LiftedCodeObject};
use crate::stages::load::hidden_arguments::DeclaredHiddenArguments;
use crate::stages::load::instrumented::PartialKernel;
use crate::stages::load::lines::SourceLineNames;
use crate::stages::load::CodeObject;
use crate::stages::patch::{KernelPatch, PatchError};
use crate::stages::payload::PayloadPoint;
use crate::stages::payloads::{CompileError, CompiledPayload, LeftOutPoint, PayloadOptions};
use crate::stages::sva::RegisterGrowth;

/// What becomes of the tool's globals (`Counter`) in the output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolGlobals {
    /// Defined, zero-initialised, for the host to find by name.
    #[default]
    Defined,
    /// Undefined symbols a loader defines before it loads the code object.
    External,
}

#[derive(Clone, Debug)]
pub struct InstrumentOptions {
    /// When kernels' register allocations may grow (the SVA's home, payload
    /// registers).
    pub grow_registers: RegisterGrowth,
    pub tool_globals: ToolGlobals,
    pub linker: Linker,
    pub payloads: PayloadOptions,
    /// Accept an output in which selected points are left out (the report
    /// then says so first). Off: any point left out is an error and nothing
    /// is written, since the tool would count less than ran.
    pub allow_partial: bool,
    /// A file in which the plan selects no instruction is an error (off: it
    /// comes back unchanged, and the report says so).
    pub require_points: bool,
    /// Keep the original kernels and functions and add the instrumented
    /// ones as copies beside them (selective instrumentation: the runtime
    /// picks one or the other per dispatch).
    pub keep_originals: bool,
    /// Where the run reports how far it is (silent by default).
    pub progress: crate::progress::Progress,
    /// The stage whose text form the report carries (`--dump-after`).
    pub dump_after: Option<super::Stage>,
    /// Patched code laid out as machine code (the default), or written as
    /// assembly for llvm-mc (`--emit-assembly`: slower, the same code).
    pub emit_code: crate::stages::emit::CodeForm,
    /// How a count kept in registers is counted: the cheaper way per kernel
    /// (the default), or one way everywhere (tests compare them).
    pub count_way: crate::stages::sva::counts::CountWay,
    /// A code object of kernels alone is instrumented in groups of kernels
    /// with about this much code each (memory bounded by a group, the
    /// groups on every core; `pipeline::pieces`); 0: whole.
    pub group_bytes: u64,
}

/// The code per group of kernels by default (the lift stage's).
pub const GROUP_BYTES: u64 = crate::stages::lift::KERNEL_GROUP_BYTES;

impl Default for InstrumentOptions {
    fn default() -> Self {
        InstrumentOptions {
            grow_registers: RegisterGrowth::default(),
            tool_globals: ToolGlobals::Defined,
            linker: Linker::Comgr,
            payloads: PayloadOptions::default(),
            allow_partial: false,
            require_points: false,
            keep_originals: false,
            progress: Default::default(),
            dump_after: None,
            emit_code: crate::stages::emit::CodeForm::Bytes,
            count_way: Default::default(),
            group_bytes: GROUP_BYTES,
        }
    }
}

impl InstrumentReport {
    /// Adds what instrumenting another part of the same code object (a
    /// group of its kernels) did.
    pub fn absorb(&mut self, part: InstrumentReport) {
        for (hook, points) in part.hooks {
            *self.hooks.entry(hook).or_default() += points;
        }
        self.selected += part.selected;
        self.points += part.points;
        self.payloads_compiled += part.payloads_compiled;
        self.compilations.extend(part.compilations);
        let (waits, more) = (&mut self.waits, part.waits);
        waits.none += more.none;
        waits.vmcnt += more.vmcnt;
        waits.lgkmcnt += more.lgkmcnt;
        waits.vmcnt_and_lgkmcnt += more.vmcnt_and_lgkmcnt;
        waits.full_drains += more.full_drains;
        self.spills.points += part.spills.points;
        self.spills.vgprs += part.spills.vgprs;
        if let Some(more) = part.counts_in_registers {
            let counts = self.counts_in_registers.get_or_insert_with(|| CountsInRegistersReport {
                global: more.global.clone(),
                ..CountsInRegistersReport::default()
            });
            counts.points += more.points;
            counts.kernels += more.kernels;
            counts.kernels_per_wave += more.kernels_per_wave;
            counts.hooks_called.extend(more.hooks_called);
        }
        self.kernels.extend(part.kernels);
        self.skipped.extend(part.skipped);
        self.left_out.extend(part.left_out);
        for global in part.globals {
            if !self.globals.contains(&global) {
                self.globals.push(global);
            }
        }
        self.tool_globals = part.tool_globals;
        self.source_lines = self.source_lines.clone().join(part.source_lines);
        self.hidden_arguments_declared.extend(part.hidden_arguments_declared);
        self.preload_prologues.kernels += part.preload_prologues.kernels;
        self.preload_prologues.instructions += part.preload_prologues.instructions;
        self.preload_prologues.replaced += part.preload_prologues.replaced;
        // Steps: summed over the parts, by name, in the order first met; a
        // stage's step one part has and others lack stays with its stage
        // (a group that took every payload from another ran no llc).
        for (name, seconds) in part.steps {
            let stage = name.split('/').next().unwrap_or_default().to_string();
            let of_stage = |n: &String| n.split('/').next() == Some(stage.as_str());
            if !self.steps.iter().any(|(n, _)| *n == name) {
                if let Some(last) = self.steps.iter().rposition(|(n, _)| of_stage(n)) {
                    self.steps.insert(last + 1, (name, seconds));
                    continue;
                }
            }
            match self.steps.iter_mut().find(|(n, _)| *n == name) {
                Some((_, total)) => *total += seconds,
                None => self.steps.push((name, seconds)),
            }
        }
    }
}

/// What a run did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct InstrumentReport {
    /// Where the code object is in its file (empty for a code object file).
    pub origin: String,
    pub target: String,
    /// Points per hook (those in functions that can be instrumented).
    pub hooks: BTreeMap<String, usize>,
    /// Points the plan selects, in every function.
    pub selected: usize,
    /// Points in functions that can be instrumented (the others are left out).
    pub points: usize,
    /// Payloads LLVM compiled for the points (alike points share one).
    pub payloads_compiled: usize,
    /// Each llc compilation of payloads, in order: why, who shared, how
    /// many payload functions and refusals, how long.
    pub compilations: Vec<CompilationSummary>,
    /// What the instrumented points' payloads wait for before they start.
    pub waits: PayloadWaits,
    /// Points whose payload saves live VGPRs in scratch memory (no register
    /// was left for it otherwise), and how many VGPRs they save in all.
    pub spills: PayloadSpills,
    /// A plan's count kept in registers (`count-in-registers`): where it
    /// is, and where the hook is called instead.
    pub counts_in_registers: Option<CountsInRegistersReport>,
    pub kernels: Vec<KernelPatch>,
    /// Functions that were not instrumented, and why.
    pub skipped: Vec<String>,
    /// Selected points that are not instrumented, and why.
    pub left_out: Vec<LeftOutPoint>,
    pub globals: Vec<String>,
    pub tool_globals: ToolGlobals,
    /// How many points the code object's DWARF line table names `file:line`.
    pub source_lines: SourceLineNames,
    /// Kernels given the hidden arguments their hooks read (v5+ kernels
    /// that declared none).
    pub hidden_arguments_declared: Vec<DeclaredHiddenArguments>,
    /// Preload prologues the hardware skips, not instrumented.
    pub preload_prologues: PreloadPrologues,
    pub seconds: f64,
    /// The text form of the stage `dump_after` named, as it left that stage.
    #[serde(skip)]
    pub dump: Option<String>,
    /// Wall time per step, in pipeline order.
    pub steps: Vec<(String, f64)>,
    /// Whether the code object was instrumented in groups of kernels.
    pub grouping: Grouping,
}

/// How a code object was instrumented: whole, or in groups of kernels
/// (`InstrumentOptions::group_bytes`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Grouping {
    /// At once: small enough, or with device functions.
    #[default]
    Whole,
    Groups(usize),
    /// At once, though large enough to split: why.
    WholeBecause(String),
}

/// Where a plan's count is kept in registers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CountsInRegistersReport {
    pub global: String,
    /// Points that add to registers instead of calling the hook.
    pub points: usize,
    /// Kernels keeping the count in registers.
    pub kernels: usize,
    /// Of those, kernels counting per wave (`popcount(EXEC)` in SGPRs;
    /// the others count per lane in VGPRs).
    pub kernels_per_wave: usize,
    /// Kernels whose counting points call the hook, and why.
    pub hooks_called: Vec<String>,
}

/// Instrumented points by the memory counters their payload waits for
/// before it starts: those of the application's loads in flight whose
/// registers it touches. A full drain (every counter) at every point would
/// serialise the latency the application hides.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PayloadWaits {
    pub none: usize,
    pub vmcnt: usize,
    pub lgkmcnt: usize,
    pub vmcnt_and_lgkmcnt: usize,
    /// Every counter, expcnt too (an export or GDS operation in flight, or
    /// flow the analysis cannot follow).
    pub full_drains: usize,
}

/// One compilation of payloads, for the report.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct CompilationSummary {
    pub pass: crate::stages::payloads::CompilePass,
    pub sharing: crate::stages::payloads::Sharing,
    /// Its payloads were taken from another group of kernels' compilation
    /// (`stages::payloads::shared`): none compiled here.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
    pub payloads: usize,
    pub refused: usize,
    pub seconds: f64,
}

impl CompilationSummary {
    pub fn of(compiled: &crate::stages::payloads::CompiledPayloads) -> Vec<CompilationSummary> {
        compiled
            .compilations
            .iter()
            .map(|c| CompilationSummary {
                pass: c.pass,
                sharing: c.sharing,
                shared: c.shared,
                payloads: c.payloads,
                refused: c.refused,
                seconds: c.seconds,
            })
            .collect()
    }
}

impl PayloadWaits {
    pub fn count(payloads: &[CompiledPayload]) -> PayloadWaits {
        let mut waits = PayloadWaits::default();
        for wait in payloads.iter().filter(|p| p.rejected.is_none()).filter_map(|p| p.entry_wait) {
            match (wait.vmcnt, wait.lgkmcnt, wait.expcnt) {
                (_, _, true) => waits.full_drains += 1,
                (true, true, false) => waits.vmcnt_and_lgkmcnt += 1,
                (true, false, false) => waits.vmcnt += 1,
                (false, true, false) => waits.lgkmcnt += 1,
                (false, false, false) => waits.none += 1,
            }
        }
        waits
    }

    fn render(&self) -> String {
        format!(
            "payload waits: {} none, {} vmcnt, {} lgkmcnt, {} both, {} full drains",
            self.none, self.vmcnt, self.lgkmcnt, self.vmcnt_and_lgkmcnt, self.full_drains
        )
    }
}

/// Payloads that spill the application's VGPRs to scratch: each costs a
/// store and a load per VGPR and a wait for its loads, so a report says how
/// many there are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PayloadSpills {
    pub points: usize,
    pub vgprs: usize,
}

impl PayloadSpills {
    pub fn count(payloads: &[CompiledPayload]) -> PayloadSpills {
        let spilling = payloads.iter().filter(|p| p.rejected.is_none() && p.spilled_vgprs > 0);
        spilling.fold(PayloadSpills::default(), |total, p| PayloadSpills {
            points: total.points + 1,
            vgprs: total.vgprs + p.spilled_vgprs,
        })
    }
}

#[derive(Debug, Error)]
pub enum InstrumentError {
    #[error("the instrumented code object refers to symbols nobody defines: {0}")]
    Undefined(String),
    #[error(transparent)]
    Lift(#[from] LiftError),
    #[error(transparent)]
    Liveness(#[from] crate::stages::liveness::LivenessError),
    #[error("{0}")]
    Tool(#[from] crate::error::ToolProblem),
    #[error(transparent)]
    Compile(#[from] CompileError),
    #[error(transparent)]
    Patch(#[from] PatchError),
    #[error(transparent)]
    Emit(#[from] EmitError),
    #[error(
        "hook {hook} reads the kernel's hidden arguments (gridDim, blockDim, global offsets...) as code object v{tool} \
         lays them out, but this code object is v{app}, whose hidden arguments are laid out {app_layout}: the hook \
         would read other values; rebuild the tool with -mcode-object-version={app} (its other code objects may keep \
         theirs)"
    )]
    HiddenArgumentLayout { hook: String, tool: u32, app: u32, app_layout: &'static str },
    #[error(
        "hook {hook} reads the kernel's hidden arguments (gridDim, blockDim, global offsets...), but kernel {kernel} \
         (code object v{version}) does not declare them where the hook looks, so the runtime would not pass them and \
         the hook would read other memory; gpuinstr adds them only to a v5+ kernel that declares no hidden argument \
         (select other kernels, or build the application and the tool with -mcode-object-version=5 or later)"
    )]
    HiddenArgumentsAbsent { hook: String, kernel: String, version: u32 },
    #[error("the plan selects no instruction of this code object ({0})")]
    NothingSelected(String),
    #[error("the plan selects no instruction in the file; nothing to instrument (without --require-points the file would be written unchanged)")]
    NothingSelectedInFile,
    #[error(
        "{left_out} of {selected} selected points would be left out, and the tool would count less than ran, so \
         nothing was written: {summary}; pass --allow-partial to accept an output without them (its report lists them)"
    )]
    PointsLeftOut { left_out: usize, selected: usize, summary: String },
    #[error(transparent)]
    Load(#[from] crate::Error),
    #[error("{origin}: {source}")]
    InCodeObject { origin: String, source: Box<InstrumentError> },
    #[error("{0}")]
    Container(#[from] crate::stages::emit::container::ContainerError),
    #[error(transparent)]
    Plan(#[from] crate::plan::PlanError),
    /// An error about another input than the application (the plan, the tool).
    #[error("{file}: {message}")]
    About { file: String, message: String },
}

impl InstrumentReport {
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        // The payload compiler's own steps are in the JSON report.
        let steps: Vec<String> = self
            .steps
            .iter()
            .filter(|(name, _)| !name.contains('/'))
            .map(|(name, seconds)| format!("{name} {seconds:.2}"))
            .collect();
        let instrumented = self.selected - self.left_out.len();
        writeln!(
            out,
            "target {}: {instrumented} of {} selected points instrumented, {:.2} s ({})",
            self.target,
            self.selected,
            self.seconds,
            steps.join(", ")
        )
        .unwrap();
        if !self.left_out.is_empty() {
            writeln!(out, "  {} points LEFT OUT:", self.left_out.len()).unwrap();
            for point in &self.left_out {
                writeln!(out, "    {}: {}: {}", point.point, point.cause.describe(), point.why).unwrap();
            }
            let mut kernels: BTreeMap<&str, usize> = BTreeMap::new();
            for kernel in self.left_out.iter().flat_map(|p| &p.kernels) {
                *kernels.entry(kernel).or_default() += 1;
            }
            let named: Vec<String> = kernels.iter().take(10).map(|(k, n)| format!("{k} ({n})")).collect();
            let more = kernels.len().saturating_sub(named.len());
            writeln!(
                out,
                "  kernels whose numbers miss points (the runtime marks their dispatches): {}{}",
                named.join(", "),
                if more > 0 { format!(" and {more} more") } else { String::new() }
            )
            .unwrap();
        }
        let taken: usize = self.compilations.iter().filter(|c| c.shared).map(|c| c.payloads).sum();
        match taken {
            0 => writeln!(out, "  payloads compiled: {} (alike points share one)", self.payloads_compiled),
            _ => writeln!(
                out,
                "  payloads compiled: {} (alike points share one; {taken} more taken from other groups of kernels)",
                self.payloads_compiled
            ),
        }
        .unwrap();
        writeln!(out, "  {}", self.waits.render()).unwrap();
        if let Some(counts) = &self.counts_in_registers {
            writeln!(
                out,
                "  {}: {} points add to registers in {} kernels ({} per wave, {} per lane), once per wave to the global \
                 at exit; {} kernels call the hook",
                counts.global,
                counts.points,
                counts.kernels,
                counts.kernels_per_wave,
                counts.kernels - counts.kernels_per_wave,
                counts.hooks_called.len()
            )
            .unwrap();
            for why in counts.hooks_called.iter().take(5) {
                writeln!(out, "    {why}").unwrap();
            }
        }
        if self.spills.points > 0 {
            writeln!(
                out,
                "  {} points save {} live VGPRs in scratch memory around their payloads (no register was free there)",
                self.spills.points, self.spills.vgprs
            )
            .unwrap();
        }
        if !self.hidden_arguments_declared.is_empty() {
            let named: Vec<String> = self
                .hidden_arguments_declared
                .iter()
                .take(3)
                .map(|d| {
                    format!(
                        "{} (kernarg segment {} -> {} bytes)",
                        d.kernel, d.kernarg_segment_size.0, d.kernarg_segment_size.1
                    )
                })
                .collect();
            let more = self.hidden_arguments_declared.len() - named.len();
            writeln!(
                out,
                "  hidden arguments declared in {} kernels, so the runtime passes the launch shape hooks read: {}{}",
                self.hidden_arguments_declared.len(),
                named.join(", "),
                if more > 0 { format!(" and {more} more") } else { String::new() }
            )
            .unwrap();
        }
        if self.preload_prologues.kernels > 0 {
            writeln!(
                out,
                "  WARNING: {} instructions in the argument-preload prologues of {} kernels are not instrumented: the \
                 hardware enters those kernels 256 bytes in, and the prologue runs only where firmware does not \
                 preload kernel arguments",
                self.preload_prologues.instructions, self.preload_prologues.kernels
            )
            .unwrap();
        }
        if self.preload_prologues.replaced > 0 {
            writeln!(
                out,
                "  the argument-preload prologues of {} kernels were a library's own code, replaced by loads of the \
                 preloaded arguments and a jump to the entry: where firmware does not preload, those kernels run \
                 their instrumented entry and then as where it does",
                self.preload_prologues.replaced
            )
            .unwrap();
        }
        match &self.source_lines {
            SourceLineNames::NoLineTable => {}
            SourceLineNames::Named { named, points } => {
                writeln!(out, "  source lines: {named} of {points} points named file:line (DWARF line table)").unwrap()
            }
            SourceLineNames::Unreadable { problem } => {
                writeln!(out, "  WARNING: points are not named file:line: {problem}").unwrap()
            }
        }
        for (hook, count) in &self.hooks {
            writeln!(out, "  hook {hook}: {count} points").unwrap();
        }
        writeln!(
            out,
            "  kernel                                   sites  added instr  per site  VGPRs     AGPRs     SGPRs     \
             waves/SIMD  stack"
        )
        .unwrap();
        let pair = |(before, after): (usize, usize)| {
            if before == after {
                format!("{before}")
            } else {
                format!("{before}->{after}")
            }
        };
        for kernel in &self.kernels {
            let per_site = if kernel.sites > 0 { kernel.instructions_added as f64 / kernel.sites as f64 } else { 0.0 };
            let agprs = if kernel.agprs == (0, 0) { "-".to_string() } else { pair(kernel.agprs) };
            writeln!(
                out,
                "  {:<40} {:>5} {:>12} {:>9.1}  {:<9} {:<9} {:<9} {:<11} {}",
                kernel.name,
                kernel.sites,
                kernel.instructions_added,
                per_site,
                pair(kernel.vgprs),
                agprs,
                pair(kernel.sgprs),
                pair(kernel.waves_per_simd),
                pair((kernel.stack_bytes.0 as usize, kernel.stack_bytes.1 as usize)),
            )
            .unwrap();
        }
        for kernel in self.kernels.iter().filter(|k| !k.changes.is_empty()) {
            writeln!(out, "  {}:", kernel.name).unwrap();
            for change in &kernel.changes {
                writeln!(out, "    {change}").unwrap();
            }
        }
        let relaxed: usize = self.kernels.iter().map(|k| k.branches_relaxed).sum();
        if relaxed > 0 {
            writeln!(out, "  branches relaxed into long jumps: {relaxed}").unwrap();
        }
        let sliding: Vec<&KernelPatch> = self.kernels.iter().filter(|k| k.sva_moves > 0).collect();
        if !sliding.is_empty() {
            let moves: usize = sliding.iter().map(|k| k.sva_moves).sum();
            writeln!(
                out,
                "  SVA sliding between free VGPRs (no register free for the whole kernel): {} kernel{}, {moves} \
                 move point{}",
                sliding.len(),
                if sliding.len() == 1 { "" } else { "s" },
                if moves == 1 { "" } else { "s" }
            )
            .unwrap();
        }
        let in_memory = self.kernels.iter().filter(|k| k.sva_in_memory).count();
        if in_memory > 0 {
            writeln!(
                out,
                "  SVA kept in memory, a slot per wave (no register free for it anywhere): {in_memory} kernel{}; each \
                 payload reading it loads it and waits for memory",
                if in_memory == 1 { "" } else { "s" }
            )
            .unwrap();
        }
        for skipped in &self.skipped {
            writeln!(out, "  not instrumented: {skipped}").unwrap();
        }
        if !self.globals.is_empty() {
            match self.tool_globals {
                ToolGlobals::Defined => writeln!(out, "  tool globals defined: {}", self.globals.join(", ")).unwrap(),
                ToolGlobals::External => {
                    writeln!(out, "  tool globals left external (the loader defines them): {}", self.globals.join(", "))
                        .unwrap()
                }
            }
        }
        out
    }
}

/// What a link leaving symbols undefined left undefined: only the tool's
/// globals, or the instrumented code object refers to something nobody
/// defines.
/// Hooks that read the kernel's hidden arguments (through
/// `implicitArgPtr`: HIP's `blockDim`/`gridDim` from code object v5) must
/// find them where their tool's code object version put them, and the
/// kernel must have them. From v5 a kernel declares only the hidden
/// arguments its own code reads; one that declares none is given the launch
/// shape (the kernels returned, indices into `app.kernels`), and so is a v4
/// kernel that declares none for a v5+ tool (Tensile's kernels: CLR fills
/// hidden arguments by the kinds the metadata lists, whatever the version).
/// A kernel with hidden arguments laid out otherwise, or a v4 tool's hook
/// in a kernel without them, is refused.
pub(crate) fn kernels_lacking_hidden_arguments(
    tool: &CodeObject,
    app: &CodeObject,
    lifted: &crate::stages::lift::LiftedCodeObject<'_>,
    points: &[PayloadPoint],
    summary: &crate::tool::ToolSummary,
) -> Result<Vec<usize>, InstrumentError> {
    use gpuinstr_intrinsics::builtins::kernel_state::IMPLICIT_ARG_PTR;
    let reads_hidden =
        |hook: &str| summary.hooks.iter().any(|h| h.name == hook && h.intrinsics.iter().any(|i| i == IMPLICIT_ARG_PTR));
    // Up to v4 the global offsets come first; from v5 the block counts.
    let v5_layout = |version: u32| version >= 5;
    let first_hidden =
        if v5_layout(app.code_object_version) { "hidden_block_count_x" } else { "hidden_global_offset_x" };
    let mut may_run = None;
    let mut lacking = std::collections::BTreeSet::new();
    let (tool_v5, app_v5) = (v5_layout(tool.code_object_version), v5_layout(app.code_object_version));
    let layout_error = |hook: &str| InstrumentError::HiddenArgumentLayout {
        hook: hook.to_string(),
        tool: tool.code_object_version,
        app: app.code_object_version,
        app_layout: if app_v5 { "from v5 on" } else { "up to v4" },
    };
    for point in points {
        let Some(hook) = point.calls.iter().map(|c| c.hook.as_str()).find(|hook| reads_hidden(hook)) else { continue };
        if !tool_v5 && app_v5 {
            return Err(layout_error(hook));
        }
        // A device function's hook runs in whichever kernel may call it.
        let may_run = may_run.get_or_insert_with(|| crate::stages::lift::kernels_that_may_run(lifted));
        for function in &may_run[point.function] {
            let FunctionKind::Kernel(index) = lifted.functions[*function].kind else { continue };
            let kernel = &app.kernels[index];
            let arguments = &kernel.metadata.arguments;
            if tool_v5 == app_v5 && arguments.iter().any(|a| a.value_kind == first_hidden) {
                continue;
            }
            if tool_v5 && !arguments.iter().any(|a| a.is_hidden()) {
                lacking.insert(index);
                continue;
            }
            if tool_v5 != app_v5 {
                return Err(layout_error(hook));
            }
            return Err(InstrumentError::HiddenArgumentsAbsent {
                hook: hook.to_string(),
                kernel: kernel.name().to_string(),
                version: app.code_object_version,
            });
        }
    }
    Ok(lacking.into_iter().collect())
}

/// Kernels that preload arguments into SGPRs start with a prologue that
/// loads them where firmware does not; the hardware enters them past it,
/// so it is not instrumented (the instructions, counted and said).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PreloadPrologues {
    /// Instrumented kernels that have one.
    pub kernels: usize,
    /// Instructions in those prologues (not their `s_nop` padding), as the
    /// application has them.
    pub instructions: usize,
    /// Of those kernels, the ones whose prologue was a library's own code
    /// (Tensile's), replaced by loads of the preloaded arguments
    /// (`stages::lift::preload_prologue`).
    pub replaced: usize,
}

impl PreloadPrologues {
    /// `replaced`: per function whose prologue was replaced, its index and
    /// how many instructions the application's prologue had.
    pub(crate) fn of(
        lifted: &crate::stages::lift::LiftedCodeObject<'_>,
        points: &[PayloadPoint],
        replaced: &[(usize, usize)],
    ) -> PreloadPrologues {
        let mut kernels: Vec<usize> = points.iter().map(|p| p.function).collect();
        kernels.dedup();
        kernels.retain(|f| lifted.functions[*f].entry > 0);
        // Its instructions, not the s_nop padding up to 256 bytes.
        let decoded = |f: usize| match replaced.iter().find(|(g, _)| *g == f) {
            Some((_, own)) => *own,
            None => {
                let function = &lifted.functions[f];
                function.instructions().take(function.entry).filter(|i| i.name(&lifted.isa) != "S_NOP").count()
            }
        };
        PreloadPrologues {
            kernels: kernels.len(),
            instructions: kernels.iter().map(|f| decoded(*f)).sum(),
            replaced: kernels.iter().filter(|f| replaced.iter().any(|(g, _)| g == *f)).count(),
        }
    }
}

/// Names in each left-out point the kernels whose dispatches may run it,
/// and counts per kernel the points it misses (the code object's partial
/// table: the runtime marks those kernels' dispatches).
pub(crate) fn partial_kernels(lifted: &LiftedCodeObject<'_>, left_out: &mut [LeftOutPoint]) -> Vec<PartialKernel> {
    if left_out.is_empty() {
        return Vec::new();
    }
    let may_run = crate::stages::lift::kernels_that_may_run(lifted);
    let index: HashMap<&str, usize> = lifted.functions.iter().enumerate().map(|(k, f)| (f.name.as_str(), k)).collect();
    let mut per_kernel: BTreeMap<String, u32> = BTreeMap::new();
    for point in left_out.iter_mut() {
        let kernels = index.get(point.function.as_str()).map(|f| may_run[*f].as_slice()).unwrap_or_default();
        point.kernels = kernels.iter().map(|k| lifted.functions[*k].name.clone()).collect();
        for kernel in &point.kernels {
            *per_kernel.entry(kernel.clone()).or_default() += 1;
        }
    }
    per_kernel.into_iter().map(|(kernel, left_out)| PartialKernel { kernel, left_out }).collect()
}

/// The instrumented code object leaves undefined only the tool's globals
/// (`--tool-globals external`) and what the original already left so
/// (LLVM 15 writes a kernel's function-local `__shared__` arrays as
/// undefined dynamic symbols: rocRAND's code objects have 40).
pub(crate) fn only_tool_globals_undefined(
    bytes: &[u8],
    globals: &[String],
    original: &[u8],
) -> Result<(), InstrumentError> {
    use object::{Object, ObjectSymbol};
    let undefined = |bytes: &[u8]| -> Result<Vec<String>, InstrumentError> {
        let file = object::File::parse(bytes).map_err(|e| InstrumentError::Undefined(e.to_string()))?;
        Ok(file
            .dynamic_symbols()
            .filter(|s| s.is_undefined() && !s.name().unwrap_or_default().is_empty())
            .filter_map(|s| s.name().ok().map(String::from))
            .collect())
    };
    let already: std::collections::BTreeSet<String> = undefined(original)?.into_iter().collect();
    let others: Vec<String> =
        undefined(bytes)?.into_iter().filter(|name| !globals.contains(name) && !already.contains(name)).collect();
    if others.is_empty() {
        Ok(())
    } else {
        Err(InstrumentError::Undefined(others.join(", ")))
    }
}
