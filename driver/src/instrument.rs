//! `gpuinstr-link instrument`: a tool and a plan applied to an application
//! code object, through every stage: load -> lift -> liveness -> plan ->
//! sva -> payloads (5-8) -> patch -> emit + link.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use gpuinstr_intrinsics::Registry;
use inkwell::context::Context;
use serde::Serialize;
use thiserror::Error;

use crate::plan::{hook_counts, Plan};
use crate::stages::emit::link::{build, EmitError, Linker};
use crate::stages::emit::EmitOptions;
use crate::stages::lift::{lift, FunctionKind, LiftError, LiftedCodeObject};
use crate::stages::liveness::analyze;
use crate::stages::load::hidden_arguments::{declare_launch_shape, DeclaredHiddenArguments};
use crate::stages::load::instrumented::PartialKernel;
use crate::stages::load::lines::SourceLineNames;
use crate::stages::load::CodeObject;
use crate::stages::patch::{patch, KernelPatch, PatchError};
use crate::stages::payload::PayloadPoint;
use crate::stages::payloads::{
    compile_payloads, CompileError, CompiledPayload, LeftOutCause, LeftOutPoint, PayloadOptions,
};
use crate::stages::sva::{place, RegisterGrowth, SvaRequest};

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
}

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
    /// What the instrumented points' payloads wait for before they start.
    pub waits: PayloadWaits,
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
    pub seconds: f64,
    /// Wall time per step, in pipeline order.
    pub steps: Vec<(String, f64)>,
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
    #[error(
        "kernel {kernel} preloads {dwords} dwords of its arguments into SGPRs (gfx940+ kernarg preload), so the \
         hardware enters it 256 bytes past its entry; instrumenting such kernels is not supported yet: select other \
         kernels, or build without preloading (no -amdgpu-kernarg-preload-count)"
    )]
    PreloadedKernelArguments { kernel: String, dwords: u16 },
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

/// What instrumenting a whole file did: one report per code object
/// instrumented, and the code objects left as they were.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FileReport {
    /// Points left out in all code objects, when any were (the output is
    /// partial: only with `allow_partial`).
    pub partial: Option<Partial>,
    pub code_objects: Vec<InstrumentReport>,
    /// `(where in the file, why)`.
    pub unchanged: Vec<(String, String)>,
}

/// What a partial output misses.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Partial {
    pub selected: usize,
    pub left_out: usize,
    /// Points left out by cause.
    pub by_cause: BTreeMap<LeftOutCause, usize>,
    /// Each cause with its count, an example and what to do.
    pub summary: Vec<String>,
}

/// What to do about points left out for `cause` when registers grew as
/// `grow` let them: growing further is no help once it was `always`.
fn remedy(cause: LeftOutCause, grow: RegisterGrowth) -> &'static str {
    match (cause, grow) {
        (LeftOutCause::NoSvaRegister | LeftOutCause::NoPayloadRegisters, RegisterGrowth::Always) => {
            "the allocation already grew as far as the kernel's work-group bound lets it (--grow-registers=always): \
             a smaller bound (`__launch_bounds__`) leaves a wave more registers, or leave the kernel out of the plan"
        }
        _ => cause.remedy(),
    }
}

/// Left-out points by cause, and each cause with its count, an example and
/// what to do.
fn left_out_summary(
    reports: &[InstrumentReport],
    grow: RegisterGrowth,
) -> (BTreeMap<LeftOutCause, usize>, Vec<String>) {
    let mut by_cause: BTreeMap<LeftOutCause, (usize, &LeftOutPoint)> = BTreeMap::new();
    for point in reports.iter().flat_map(|r| &r.left_out) {
        by_cause.entry(point.cause).or_insert((0, point)).0 += 1;
    }
    let parts: Vec<String> = by_cause
        .iter()
        .map(|(cause, (count, example))| {
            format!(
                "{count} {} {} (e.g. {}: {}): {}",
                if *count == 1 { "point:" } else { "points:" },
                cause.describe(),
                example.point,
                example.why,
                remedy(*cause, grow)
            )
        })
        .collect();
    (by_cause.into_iter().map(|(c, (n, _))| (c, n)).collect(), parts)
}

impl FileReport {
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        if let Some(partial) = &self.partial {
            writeln!(
                out,
                "PARTIAL: {} of {} selected points are left out (--allow-partial): the tool's numbers miss what \
                 they would have counted",
                partial.left_out, partial.selected
            )
            .unwrap();
            for part in &partial.summary {
                writeln!(out, "  {part}").unwrap();
            }
        }
        for report in &self.code_objects {
            if !report.origin.is_empty() {
                writeln!(out, "{}:", report.origin).unwrap();
            }
            out.push_str(&report.render_text());
        }
        for (origin, why) in &self.unchanged {
            writeln!(out, "{origin}: left as it was: {why}").unwrap();
        }
        out
    }
}

/// Instruments every code object of a file (matching `target` when given)
/// and puts them back where they came from: a code object gives a code
/// object, a bundle a bundle, a host file with `.hip_fatbin` the same host
/// file with its device code instrumented. Code objects the plan selects
/// nothing in stay as they were (a file with no point at all is an error
/// with `require_points`). Any selected point left out is an error unless
/// `allow_partial`.
pub fn instrument_file(
    tool: &crate::tool::Tool,
    path: &std::path::Path,
    bytes: &[u8],
    plan: &Plan,
    registry: &Registry,
    options: &InstrumentOptions,
    target: Option<&str>,
) -> Result<(Vec<u8>, FileReport), InstrumentError> {
    use crate::stages::emit::container::{rewrite_bundle, rewrite_host_file};
    use crate::stages::load::{bundle, load_bytes_for_target, InputKind};
    // A plan calling a hook the tool lacks is about the plan and the tool.
    for hooks in &tool.hooks {
        plan.check_hooks(hooks.iter().map(String::as_str), &tool.path.display().to_string())?;
    }
    // Bundle entries that cannot match the target are not even parsed (a
    // whole library holds hundreds of code objects per target).
    let input = load_bytes_for_target(path, bytes, target)?;
    let single = input.code_objects.len() == 1;
    let mut report = FileReport::default();
    // Instrumented code objects by (bundle index, entry triple); code
    // objects are independent, so they are instrumented on a few threads.
    let mut replaced: HashMap<(usize, String), Vec<u8>> = HashMap::new();
    let outcomes = std::sync::Mutex::new(Vec::new());
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get()).min(input.code_objects.len());
    // Each code object with the tool's code object for its target.
    let mut items: Vec<(usize, &CodeObject, &CodeObject)> = Vec::new();
    for (index, code_object) in input.code_objects.iter().enumerate().rev() {
        items.push((index, code_object, tool.for_target(&code_object.target)?));
    }
    crate::parallel::for_each_on_threads(items, jobs, |(index, code_object, tool)| {
        let outcome = instrument_code_object_partially(tool, code_object, plan, registry, options);
        outcomes.lock().expect("outcomes").push((index, outcome));
    });
    let mut outcomes = outcomes.into_inner().expect("outcomes");
    outcomes.sort_by_key(|(index, _)| *index);
    for (index, outcome) in outcomes {
        let code_object = &input.code_objects[index];
        let origin = code_object.origin.join(", ");
        match outcome {
            Ok((new, mut one)) => {
                one.origin = origin;
                report.code_objects.push(one);
                let bundle_index = code_object
                    .origin
                    .iter()
                    .find_map(|o| o.strip_prefix("bundle ").and_then(|n| n.parse().ok()))
                    .unwrap_or(0);
                let triple =
                    code_object.origin.iter().find_map(|o| o.strip_prefix("entry ")).unwrap_or_default().to_string();
                replaced.insert((bundle_index, triple), new);
            }
            Err(InstrumentError::NothingSelected(why)) => report
                .unchanged
                .push((if single && origin.is_empty() { "the code object".into() } else { origin }, why)),
            Err(error) => {
                let error = blame(error, plan, tool);
                if origin.is_empty() {
                    return Err(error);
                }
                return Err(InstrumentError::InCodeObject { origin, source: Box::new(error) });
            }
        }
    }
    let replace_in = |bundle_index: usize, data: &[u8]| -> Result<Vec<u8>, InstrumentError> {
        let parsed = bundle::parse_bundle(data)
            .map_err(|p| crate::Error::Load { location: crate::Location::file(path), problem: p })?;
        let replacements: HashMap<usize, Vec<u8>> = parsed
            .entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| replaced.get(&(bundle_index, e.triple.clone())).map(|b| (i, b.clone())))
            .collect();
        if replacements.is_empty() {
            return Ok(data[..parsed.size].to_vec());
        }
        Ok(rewrite_bundle(data, &replacements)?)
    };
    if report.code_objects.is_empty() && options.require_points {
        return Err(InstrumentError::NothingSelectedInFile);
    }
    check_left_out(&mut report, options)?;
    if replaced.is_empty() {
        // Nothing instrumented: the file comes back as it was.
        return Ok((bytes.to_vec(), report));
    }
    let bytes = match input.kind {
        InputKind::CodeObject => replaced.into_values().next().unwrap_or_else(|| bytes.to_vec()),
        InputKind::OffloadBundle => replace_in(0, bytes)?,
        InputKind::HostWithFatbin { .. } => {
            let fatbin = fatbin_section(bytes).ok_or_else(|| crate::Error::Load {
                location: crate::Location::file(path),
                problem: crate::LoadProblem::EmptyFatbin,
            })?;
            let found = bundle::fatbin_bundles(fatbin)
                .map_err(|problem| crate::Error::Load { location: crate::Location::file(path), problem })?;
            let mut bundles = Vec::with_capacity(found.len());
            for (index, (start, _)) in found.iter().enumerate() {
                bundles.push(replace_in(index, &fatbin[*start..])?);
            }
            rewrite_host_file(bytes, &bundles)?
        }
    };
    Ok((bytes, report))
}

/// An error about the plan's hook calls names the plan; one about the
/// tool's hooks names the tool.
fn blame(error: InstrumentError, plan: &Plan, tool: &crate::tool::Tool) -> InstrumentError {
    use crate::stages::lower_ir::LowerIrError;
    use crate::stages::payload::PayloadError;
    match error {
        InstrumentError::Compile(CompileError::Payload(
            e @ (PayloadError::MissingHook { .. }
            | PayloadError::ArgumentCount { .. }
            | PayloadError::ArgumentType { .. }),
        )) => InstrumentError::About { file: plan.file.clone(), message: e.to_string() },
        InstrumentError::Compile(CompileError::Payload(e @ PayloadError::InlineAssembly { .. })) => {
            InstrumentError::About { file: tool.path.display().to_string(), message: e.to_string() }
        }
        InstrumentError::Compile(CompileError::LowerIr(
            e @ (LowerIrError::NotInlined { .. }
            | LowerIrError::IndirectCall { .. }
            | LowerIrError::UnknownIntrinsic { .. }),
        )) => InstrumentError::About { file: tool.path.display().to_string(), message: e.to_string() },
        other => other,
    }
}

/// Whether points were left out: an error unless `allow_partial`, else the
/// report's `partial` says what is missing.
fn check_left_out(report: &mut FileReport, options: &InstrumentOptions) -> Result<(), InstrumentError> {
    let left_out: usize = report.code_objects.iter().map(|r| r.left_out.len()).sum();
    if left_out == 0 {
        return Ok(());
    }
    let selected = report.code_objects.iter().map(|r| r.selected).sum();
    let (by_cause, summary) = left_out_summary(&report.code_objects, options.grow_registers);
    if !options.allow_partial {
        return Err(InstrumentError::PointsLeftOut { left_out, selected, summary: summary.join("; ") });
    }
    report.partial = Some(Partial { selected, left_out, by_cause, summary });
    Ok(())
}

/// Hooks that read the kernel's hidden arguments (through
/// `implicitArgPtr`: HIP's `blockDim`/`gridDim` from code object v5) must
/// find them where their tool's code object version put them, and the
/// kernel must have them. From v5 a kernel declares only the hidden
/// arguments its own code reads; one that declares none is given the launch
/// shape (the kernels returned, indices into `app.kernels`). Up to v4, or
/// with some hidden arguments but not the launch shape, it is refused.
fn kernels_lacking_hidden_arguments(
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
    for point in points {
        let Some(hook) = point.calls.iter().map(|c| c.hook.as_str()).find(|hook| reads_hidden(hook)) else { continue };
        if v5_layout(tool.code_object_version) != v5_layout(app.code_object_version) {
            return Err(InstrumentError::HiddenArgumentLayout {
                hook: hook.to_string(),
                tool: tool.code_object_version,
                app: app.code_object_version,
                app_layout: if v5_layout(app.code_object_version) { "from v5 on" } else { "up to v4" },
            });
        }
        // A device function's hook runs in whichever kernel may call it.
        let may_run = may_run.get_or_insert_with(|| crate::stages::lift::kernels_that_may_run(lifted));
        for function in &may_run[point.function] {
            let FunctionKind::Kernel(index) = lifted.functions[*function].kind else { continue };
            let kernel = &app.kernels[index];
            let arguments = &kernel.metadata.arguments;
            if arguments.iter().any(|a| a.value_kind == first_hidden) {
                continue;
            }
            if v5_layout(app.code_object_version) && !arguments.iter().any(|a| a.is_hidden()) {
                lacking.insert(index);
                continue;
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

/// Kernels that preload arguments start 256 bytes past their entry: code
/// inserted before that point would move where the hardware enters. Refused
/// before anything is compiled, for every point that may run in one.
fn refuse_preloaded_arguments(
    app: &CodeObject,
    lifted: &crate::stages::lift::LiftedCodeObject<'_>,
    points: &[PayloadPoint],
) -> Result<(), InstrumentError> {
    if app.kernels.iter().all(|k| k.descriptor.kernarg_preload_length() == 0) {
        return Ok(());
    }
    let may_run = crate::stages::lift::kernels_that_may_run(lifted);
    for point in points {
        for function in &may_run[point.function] {
            let FunctionKind::Kernel(index) = lifted.functions[*function].kind else { continue };
            let kernel = &app.kernels[index];
            let dwords = kernel.descriptor.kernarg_preload_length();
            if dwords > 0 {
                return Err(InstrumentError::PreloadedKernelArguments { kernel: kernel.name().to_string(), dwords });
            }
        }
    }
    Ok(())
}

/// Instruments one code object; the new code object's bytes and a report.
/// Points left out are an error unless `options.allow_partial`.
pub fn instrument_code_object(
    tool: &CodeObject,
    app: &CodeObject,
    plan: &Plan,
    registry: &Registry,
    options: &InstrumentOptions,
) -> Result<(Vec<u8>, InstrumentReport), InstrumentError> {
    let (bytes, report) = instrument_code_object_partially(tool, app, plan, registry, options)?;
    let mut file = FileReport { code_objects: vec![report], ..FileReport::default() };
    check_left_out(&mut file, options)?;
    Ok((bytes, file.code_objects.remove(0)))
}

/// Instruments one code object, leaving out the points that cannot be
/// instrumented (listed in the report).
fn instrument_code_object_partially(
    tool: &CodeObject,
    app: &CodeObject,
    plan: &Plan,
    registry: &Registry,
    options: &InstrumentOptions,
) -> Result<(Vec<u8>, InstrumentReport), InstrumentError> {
    let start = std::time::Instant::now();
    let mut steps = Vec::new();
    let mut clock = start;
    let mut lap = |name: &str| {
        let now = std::time::Instant::now();
        steps.push((name.to_string(), (now - clock).as_secs_f64()));
        clock = now;
    };
    let lifted = lift(app)?;
    lap("lift");
    let liveness = analyze(&lifted)?;
    lap("liveness");
    let mut report = InstrumentReport { target: app.target.to_string(), ..InstrumentReport::default() };
    for function in lifted.functions.iter().filter(|f| !f.relocatable()) {
        report.skipped.push(format!("{}: its code cannot move (see gpuinstr-link lift --emit stats)", function.name));
    }
    let points = plan.select(&lifted);
    // Points in functions whose code cannot move are selected and left out.
    let unmovable = plan.select_where_code_cannot_move(&lifted);
    for point in &unmovable {
        let function = &lifted.functions[point.function];
        let instruction = function.instructions().nth(point.instruction);
        report.left_out.push(LeftOutPoint {
            function: function.name.clone(),
            kernels: Vec::new(),
            point: format!(
                "{} {}, instruction {} ({})",
                if function.is_kernel() { "kernel" } else { "function" },
                function.name,
                point.instruction,
                instruction.map_or("?", |i| i.name(&lifted.isa))
            ),
            cause: LeftOutCause::NotRelocatable,
            why: function
                .problems
                .iter()
                .find(|p| p.kind.blocks_relocation())
                .map_or_else(String::new, |p| format!("{:#x}: {}", p.address, p.detail)),
        });
    }
    report.selected = points.len() + unmovable.len();
    if points.is_empty() && unmovable.is_empty() {
        let kernels: Vec<&str> = lifted.functions.iter().filter(|f| f.is_kernel()).map(|f| f.name.as_str()).collect();
        return Err(InstrumentError::NothingSelected(format!("kernels: {}", kernels.join(", "))));
    }
    refuse_preloaded_arguments(app, &lifted, &points)?;

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
    let lacking = kernels_lacking_hidden_arguments(tool, app, &lifted, &points, &summary)?;
    drop(module);
    // Kernels given the hidden arguments hooks read: the same code, lifted
    // once, with a copy of the code object whose metadata declares them.
    let declared_app;
    let lifted = if lacking.is_empty() {
        lifted
    } else {
        (declared_app, report.hidden_arguments_declared) = declare_launch_shape(app, &lacking);
        lifted.with_code_object(&declared_app)
    };

    let request = SvaRequest {
        instrumented: points.iter().map(|p| p.function).collect(),
        work_item_ids,
        grow: options.grow_registers,
    };
    let placement = place(&lifted, &liveness, &request);
    lap("plan and sva");
    let mut payload_options = options.payloads.clone();
    payload_options.keep_stage_texts = false;
    payload_options.registers.extend(placement.functions.iter().map(|(f, r)| (*f, *r)));
    payload_options.sliding.extend(placement.sliding.iter().map(|(f, s)| (*f, s.clone())));
    for kernel in &placement.kernels {
        if let Some(problem) = &kernel.problem {
            let why = format!("{}: {problem}", lifted.functions[kernel.kernel].name);
            for function in crate::stages::lift::reachable_functions(&lifted, kernel.kernel) {
                payload_options.unplaced.entry(function).or_insert_with(|| why.clone());
            }
        }
    }
    let compiled = compile_payloads(tool, &lifted, &liveness, &points, registry, &payload_options)?;
    lap("payloads");
    let payload_steps: Vec<(String, f64)> =
        compiled.timings.iter().map(|(name, time)| (format!("payloads/{name}"), time.as_secs_f64())).collect();
    let define = options.tool_globals == ToolGlobals::Defined;
    let (mut patch, patch_report) = patch(&lifted, &liveness, &points, &compiled, &placement, define)?;
    report.left_out.extend(patch_report.left_out);
    patch.partial = partial_kernels(&lifted, &mut report.left_out);
    lap("patch");

    let emit = EmitOptions {
        patch: Some(patch),
        keep_failed: options.payloads.keep_failed.clone(),
        keep_originals: options.keep_originals,
        ..EmitOptions::default()
    };
    // Globals a loader defines stay undefined: not a link CoMGR makes.
    let external = options.tool_globals == ToolGlobals::External && !patch_report.globals.is_empty();
    let linker = if external { Linker::LldLeavingUndefined } else { options.linker };
    let (bytes, _assembly) = build(&lifted, &emit, linker)?;
    if external {
        only_tool_globals_undefined(&bytes, &patch_report.globals)?;
    }
    lap("emit and link");
    report.hooks = hook_counts(&points);
    report.points = points.len();
    report.payloads_compiled = compiled.distinct_payloads();
    report.waits = PayloadWaits::count(&compiled.payloads);
    report.kernels = patch_report.kernels;
    report.globals = patch_report.globals;
    report.tool_globals = options.tool_globals;
    report.source_lines = patch_report.source_lines;
    report.seconds = start.elapsed().as_secs_f64();
    report.steps = steps;
    let at = report.steps.iter().position(|(name, _)| name == "payloads").map_or(0, |i| i + 1);
    report.steps.splice(at..at, payload_steps);
    Ok((bytes, report))
}

/// Names in each left-out point the kernels whose dispatches may run it,
/// and counts per kernel the points it misses (the code object's partial
/// table: the runtime marks those kernels' dispatches).
fn partial_kernels(lifted: &LiftedCodeObject<'_>, left_out: &mut [LeftOutPoint]) -> Vec<PartialKernel> {
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
        writeln!(out, "  payloads compiled: {} (alike points share one)", self.payloads_compiled).unwrap();
        writeln!(out, "  {}", self.waits.render()).unwrap();
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
fn only_tool_globals_undefined(bytes: &[u8], globals: &[String]) -> Result<(), InstrumentError> {
    use object::{Object, ObjectSymbol};
    let file = object::File::parse(bytes).map_err(|e| InstrumentError::Undefined(e.to_string()))?;
    let others: Vec<String> = file
        .dynamic_symbols()
        .filter(|s| s.is_undefined() && !s.name().unwrap_or_default().is_empty())
        .filter_map(|s| s.name().ok().map(String::from))
        .filter(|name| !globals.contains(name))
        .collect();
    if others.is_empty() {
        Ok(())
    } else {
        Err(InstrumentError::Undefined(others.join(", ")))
    }
}

/// The bytes of a host ELF file's `.hip_fatbin` section.
fn fatbin_section(bytes: &[u8]) -> Option<&[u8]> {
    use object::{Object, ObjectSection};
    let file = object::File::parse(bytes).ok()?;
    file.section_by_name(".hip_fatbin")?.data().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_grew_registers_fully_is_not_told_to_grow_them() {
        for cause in [LeftOutCause::NoSvaRegister, LeftOutCause::NoPayloadRegisters] {
            assert!(remedy(cause, RegisterGrowth::FreeOfOccupancy).contains("--grow-registers=always lets"));
            let grown = remedy(cause, RegisterGrowth::Always);
            assert!(grown.contains("already grew") && grown.contains("__launch_bounds__"), "{grown}");
        }
    }
}
