//! The driver's pipeline on one screen: the stages in order (each a module
//! under `stages/`), and [`instrument`], the walk of one code object through
//! them. Every stage has a text form that can be dumped and snapshot-tested.
//!
//! | # | stage      | in -> out                                                     | landed |
//! |---|------------|---------------------------------------------------------------|--------|
//! | 1 | load       | ELF / offload bundle / host ELF with .hip_fatbin -> code objects | yes (`stages::load`) |
//! | 2 | lift       | code object -> functions, blocks, instructions                 | yes (`stages::lift`) |
//! | 3 | liveness   | lifted module -> live registers per instruction                | yes (`stages::liveness`) |
//! | 4 | sva        | lifted module + liveness -> SVA storage plan                   | yes (`stages::sva`) |
//! | 5 | payload    | hook bitcode + plan -> one instrumentation IR module           | yes (`stages::payload`) |
//! | 6 | lower-ir   | payload IR -> IR with intrinsic placeholders                   | yes (`stages::lower_ir`) |
//! | 7 | codegen    | IR -> pre-RA MIR, lowered MIR -> assembly (llc)                | yes (`stages::codegen`) |
//! | 8 | lower-mir  | MIR -> MIR with intrinsics lowered -> final code per point     | yes (`stages::lower_mir`) |
//! | 9 | patch      | lifted module + payload code -> instrumented module            | yes (`stages::patch`) |
//! | 10| emit+link  | instrumented module -> code object (llvm-mc, CoMGR)            | yes (`stages::emit`) |
//!
//! Beside the stages: `tool` reads a tool's embedded hook module (the input
//! of stage 5), `plan` selects points, `stages::payloads` runs stages 5-8
//! for all points of a code object and `preservation` checks their machine
//! code. Above them the subcommands: `inspect` reports what a file holds,
//! `roundtrip` and `corpus` run load -> lift -> emit + link with no changes
//! and check the result, `analyze` reports register availability from
//! liveness, `instrument` runs everything and `verify` checks its output
//! against the original. [`MODULES_BOTTOM_UP`] is the order imports follow.
//! [`pieces`] walks a code object of kernels alone a group of kernels at a
//! time, the same stages per group (memory bounded by a group).

pub mod pieces;
pub mod report;

use std::collections::BTreeMap;

use gpuinstr_intrinsics::Registry;
use inkwell::context::Context;

use crate::error::Error;
use crate::plan::{hook_counts, Plan};
use crate::progress::CodeObjectProgress;
use crate::stages::emit::link::Linker;
use crate::stages::emit::{EmitOptions, CODE_FILE};
use crate::stages::lift::LiftedCodeObject;
use crate::stages::load::hidden_arguments::declare_launch_shape;
use crate::stages::load::{CodeObject, LoadedInput};
use crate::stages::patch::{patch, Patch};
use crate::stages::payload::PayloadPoint;
use crate::stages::payloads::{count_amounts, CountsInRegisters, LeftOutCause, LeftOutPoint, PayloadOptions};
use crate::stages::sva::counts::{CountWay, CountedPoint};
use crate::stages::sva::{place, SvaPlacement, SvaRequest};

pub use crate::stages::emit::link::build as emit_and_link;
pub use crate::stages::lift::lift;
pub use crate::stages::liveness::analyze as liveness;
pub use crate::stages::load::load;
pub use crate::stages::payloads::compile_payloads;
pub use crate::tool::read_tool_module;
use report::{kernels_lacking_hidden_arguments, only_tool_globals_undefined, partial_kernels};
pub use report::{
    CompilationSummary, CountsInRegistersReport, Grouping, InstrumentError, InstrumentOptions, InstrumentReport,
    PayloadSpills, PayloadWaits, PreloadPrologues, ToolGlobals, GROUP_BYTES,
};

/// The steps one code object's walk times, in order (the report's `steps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Lift,
    Liveness,
    /// The plan's points, what their hooks read, and stage 4 (sva).
    PlanAndSva,
    /// Stages 5 to 8 for every point.
    Payloads,
    Patch,
    EmitAndLink,
}

impl Stage {
    pub const ALL: [Stage; 6] =
        [Stage::Lift, Stage::Liveness, Stage::PlanAndSva, Stage::Payloads, Stage::Patch, Stage::EmitAndLink];

    /// The share of a typical walk's time the stage spans, for the
    /// progress estimate (rocRAND's gfx908 code object with the counter:
    /// payloads about half, emit and link most of the rest).
    pub fn span(self) -> (f64, f64) {
        match self {
            Stage::Lift => (0.0, 0.02),
            Stage::Liveness => (0.02, 0.03),
            Stage::PlanAndSva => (0.03, 0.04),
            Stage::Payloads => (0.04, 0.55),
            Stage::Patch => (0.55, 0.57),
            Stage::EmitAndLink => (0.57, 1.0),
        }
    }

    /// The stage's name on the command line (`--dump-after`).
    pub fn key(self) -> &'static str {
        match self {
            Stage::Lift => "lift",
            Stage::Liveness => "liveness",
            Stage::PlanAndSva => "sva",
            Stage::Payloads => "payloads",
            Stage::Patch => "patch",
            Stage::EmitAndLink => "emit",
        }
    }

    pub fn from_key(key: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|stage| stage.key() == key)
    }

    pub fn name(self) -> &'static str {
        match self {
            Stage::Lift => "lift",
            Stage::Liveness => "liveness",
            Stage::PlanAndSva => "plan and sva",
            Stage::Payloads => "payloads",
            Stage::Patch => "patch",
            Stage::EmitAndLink => "emit and link",
        }
    }
}

/// Wall time per stage of one walk, and its progress.
struct Clock {
    start: std::time::Instant,
    last: std::time::Instant,
    steps: Vec<(String, f64)>,
    progress: CodeObjectProgress,
}

impl Clock {
    fn start(progress: CodeObjectProgress) -> Clock {
        let now = std::time::Instant::now();
        progress.stage(Stage::Lift.name(), Stage::Lift.span());
        Clock { start: now, last: now, steps: Vec::new(), progress }
    }

    /// `stage` is over; the next one begins.
    fn lap(&mut self, stage: Stage) {
        let now = std::time::Instant::now();
        self.steps.push((stage.name().to_string(), (now - self.last).as_secs_f64()));
        self.last = now;
        if let Some(next) = Stage::ALL.iter().skip_while(|s| **s != stage).nth(1) {
            self.progress.stage(next.name(), next.span());
        }
    }
}

/// One application code object through every stage with a tool and a plan:
/// the instrumented code object and what was done. Points that cannot be
/// instrumented are left out and listed in the report (callers decide
/// whether that is an error: `instrument::instrument_code_object`).
pub fn instrument(
    tool: &CodeObject,
    app: &CodeObject,
    plan: &Plan,
    registry: &Registry,
    options: &InstrumentOptions,
) -> Result<(Vec<u8>, InstrumentReport), InstrumentError> {
    if let Some(groups) = pieces::kernel_groups(app, options) {
        return pieces::instrument(tool, app, plan, registry, options, &groups);
    }
    let mut clock = Clock::start(options.progress.code_object(app.bytes.len() as u64));
    let lifted = lift(app)?;
    clock.lap(Stage::Lift);
    let link_whole =
        |lifted: &LiftedCodeObject<'_>, patch: Patch, globals: &[String]| emit(lifted, patch, options, globals);
    let code = LiftedCode { tool, app, lifted, first_site: 0 };
    instrument_lifted(code, plan, registry, options, clock, link_whole)
}

/// Lifted code (a code object's, or a group of its kernels') and what it
/// is instrumented with.
struct LiftedCode<'c> {
    tool: &'c CodeObject,
    app: &'c CodeObject,
    lifted: LiftedCodeObject<'c>,
    /// The `site` number of its first point.
    first_site: usize,
}

/// Stages 3 to 9 over lifted code, then `emit` (stage 10, or its part):
/// what it made and the report.
fn instrument_lifted<T>(
    code: LiftedCode<'_>,
    plan: &Plan,
    registry: &Registry,
    options: &InstrumentOptions,
    mut clock: Clock,
    emit: impl FnOnce(&LiftedCodeObject<'_>, Patch, &[String]) -> Result<Emitted<T>, InstrumentError>,
) -> Result<(T, InstrumentReport), InstrumentError> {
    let LiftedCode { tool, app, mut lifted, first_site } = code;
    // Kernels entered past a library's own argument-loading code get
    // loads there instead, so their entry's instrumentation runs on any
    // firmware.
    let replaced_prologues = crate::stages::lift::replace_library_prologues(&mut lifted);
    let mut report = InstrumentReport { target: app.target.to_string(), ..InstrumentReport::default() };
    // The text form of the stage `--dump-after` names, taken as it ends.
    let mut dumped = None;
    let mut dump = |stage: Stage, text: &dyn Fn() -> String| {
        if options.dump_after == Some(stage) {
            dumped = Some(text());
        }
    };
    dump(Stage::Lift, &|| crate::stages::lift::print::mir(&lifted, None));
    let mut liveness = liveness(&lifted)?;
    clock.lap(Stage::Liveness);
    dump(Stage::Liveness, &|| crate::stages::liveness::print::render(&lifted, &liveness));

    let points = select_points(plan, &lifted, first_site, &mut report)?;
    clock.progress.selected(report.selected);
    report.preload_prologues = PreloadPrologues::of(&lifted, &points, &replaced_prologues);
    let (work_item_ids, lacking) = what_hooks_read(tool, app, &lifted, &points)?;
    // Kernels given the hidden arguments hooks read: the same code, lifted
    // once, with a copy of the code object whose metadata declares them.
    let declared_app;
    let mut lifted = if lacking.is_empty() {
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
    let counts = place_counts(plan, &lifted, &liveness, &placement, &points, options.count_way)?;
    if let Some(counts) = &counts {
        // Every later stage sees the count's registers taken.
        counts.placement.keep_live(&mut liveness);
    }
    clock.lap(Stage::PlanAndSva);
    dump(Stage::PlanAndSva, &|| {
        let counted = counts.as_ref().map(|c| crate::stages::sva::counts::render(&lifted, &c.placement));
        crate::stages::sva::render(&lifted, &placement) + &counted.unwrap_or_default()
    });

    let mut payload_options = payload_options(options, &lifted, &placement);
    payload_options.progress = clock.progress.clone();
    payload_options.counts = counts.clone().map(std::sync::Arc::new);
    let compiled = compile_payloads(tool, &lifted, &liveness, &points, registry, &payload_options)?;
    clock.lap(Stage::Payloads);
    dump(Stage::Payloads, &|| compiled.render());

    let define = options.tool_globals == ToolGlobals::Defined;
    let count_placement = counts.as_ref().map(|c| c.placement.clone()).unwrap_or_default();
    let (mut patch, patch_report) =
        patch(&lifted, &liveness, &points, &compiled, &placement, &count_placement, define)?;
    report.left_out.extend(patch_report.left_out);
    patch.partial = partial_kernels(&lifted, &mut report.left_out);
    crate::stages::patch::write_moved_prologues(&mut lifted, &patch)?;
    clock.lap(Stage::Patch);
    dump(Stage::Patch, &|| patch.render());

    let Emitted { made, assembly, timings: emit_timings } = emit(&lifted, patch, &patch_report.globals)?;
    clock.lap(Stage::EmitAndLink);
    dump(Stage::EmitAndLink, &|| assembly.clone());
    report.dump = dumped;

    report.hooks = hook_counts(&points);
    report.points = points.len();
    report.payloads_compiled = compiled.distinct_payloads();
    report.compilations = CompilationSummary::of(&compiled);
    report.waits = PayloadWaits::count(&compiled.payloads);
    report.spills = PayloadSpills::count(&compiled.payloads);
    report.counts_in_registers = counts.map(|c| CountsInRegistersReport {
        global: c.placement.global.clone(),
        points: compiled.counted.len(),
        kernels: c.placement.kernels.len(),
        kernels_per_wave: c.placement.kernels.values().filter(|(r, _)| r.lanes.is_none()).count(),
        hooks_called: c
            .placement
            .hooks_called
            .iter()
            .map(|(kernel, why)| format!("{}: {why}", lifted.functions[*kernel].name))
            .collect(),
    });
    report.kernels = patch_report.kernels;
    report.globals = patch_report.globals;
    report.tool_globals = options.tool_globals;
    report.source_lines = patch_report.source_lines;
    report.seconds = clock.start.elapsed().as_secs_f64();
    // The payload compiler's own steps follow its stage.
    let payload_steps = compiled.timings.iter().map(|(name, time)| (format!("payloads/{name}"), time.as_secs_f64()));
    let at = clock.steps.iter().position(|(name, _)| name == Stage::Payloads.name()).map_or(0, |i| i + 1);
    clock.steps.splice(at..at, payload_steps);
    let emit_steps = emit_timings.iter().map(|(name, time)| (format!("emit and link/{name}"), time.as_secs_f64()));
    clock.steps.extend(emit_steps);
    report.steps = clock.steps;
    Ok((made, report))
}

/// What stage 10 (or its part) made, with its text form when asked for
/// (`--dump-after emit`) and its steps' times.
pub(crate) struct Emitted<T> {
    made: T,
    assembly: String,
    timings: crate::stages::emit::StepTimes,
}

/// The plan's points in code that can move; those in code that cannot are
/// selected and left out (in the report).
fn select_points(
    plan: &Plan,
    lifted: &LiftedCodeObject<'_>,
    first_site: usize,
    report: &mut InstrumentReport,
) -> Result<Vec<PayloadPoint>, InstrumentError> {
    for function in lifted.functions.iter().filter(|f| !f.relocatable()) {
        report.skipped.push(format!("{}: its code cannot move (see gpuinstr-link lift --emit stats)", function.name));
    }
    let points = plan.select_from(lifted, first_site);
    let unmovable = plan.select_where_code_cannot_move(lifted);
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
    Ok(points)
}

/// Where the plan's count in registers (`count-in-registers`) is kept in
/// each kernel with counting points, if the plan keeps one.
fn place_counts(
    plan: &Plan,
    lifted: &LiftedCodeObject<'_>,
    liveness: &crate::stages::liveness::Liveness,
    placement: &SvaPlacement,
    points: &[PayloadPoint],
    way: CountWay,
) -> Result<Option<CountsInRegisters>, InstrumentError> {
    let Some(count) = plan.register_count()? else { return Ok(None) };
    let mut counted: BTreeMap<usize, Vec<CountedPoint>> = BTreeMap::new();
    for point in points.iter().filter(|p| p.calls.iter().any(|c| count.hooks.contains(&c.hook))) {
        let counted = counted.entry(point.function).or_default();
        // (A point that calls other hooks too keeps calling them all.)
        if let Some((scalar, vector)) = count_amounts(&count.hooks, point) {
            counted.push(CountedPoint { instruction: point.instruction, scalar, vector });
        }
    }
    let placement = crate::stages::sva::counts::place_counts(lifted, liveness, placement, &counted, &count.global, way);
    Ok(Some(CountsInRegisters { hooks: count.hooks, placement }))
}

/// What the points' hooks read that the code object must provide: whether
/// any reads the work-item ids (they then need a register), and the kernels
/// that must be given the hidden arguments hooks read.
fn what_hooks_read(
    tool: &CodeObject,
    app: &CodeObject,
    lifted: &LiftedCodeObject<'_>,
    points: &[PayloadPoint],
) -> Result<(bool, Vec<usize>), InstrumentError> {
    let context = Context::create();
    let module = read_tool_module(&context, tool)?;
    let summary = crate::tool::summarize(&module, 1);
    let used: Vec<&str> = points.iter().flat_map(|p| p.calls.iter().map(|c| c.hook.as_str())).collect();
    let work_item_ids = summary
        .hooks
        .iter()
        .filter(|h| used.contains(&h.name.as_str()))
        .any(|h| h.intrinsics.iter().any(|i| i.starts_with("gpuinstr::workitemId")));
    let lacking = kernels_lacking_hidden_arguments(tool, app, lifted, points, &summary)?;
    Ok((work_item_ids, lacking))
}

/// The payload compiler's options: the user's, with the registers and
/// sliding the sva stage placed, and why it placed none where it did not.
fn payload_options(
    options: &InstrumentOptions,
    lifted: &LiftedCodeObject<'_>,
    placement: &SvaPlacement,
) -> PayloadOptions {
    let mut payload_options = options.payloads.clone();
    payload_options.keep_stage_texts = false;
    payload_options.registers.extend(placement.functions.iter().map(|(f, r)| (*f, *r)));
    payload_options.sliding.extend(placement.sliding.iter().map(|(f, s)| (*f, s.clone())));
    for kernel in &placement.kernels {
        if let Some(problem) = &kernel.problem {
            let why = format!("{}: {problem}", lifted.functions[kernel.kernel].name);
            for function in crate::stages::lift::reachable_functions(lifted, kernel.kernel) {
                payload_options.unplaced.entry(function).or_insert_with(|| why.clone());
            }
        }
    }
    payload_options
}

/// Stage 10: the patched code object assembled and linked. Globals a
/// loader defines stay undefined: not a link CoMGR makes.
fn emit(
    lifted: &LiftedCodeObject<'_>,
    patch: Patch,
    options: &InstrumentOptions,
    globals: &[String],
) -> Result<Emitted<Vec<u8>>, InstrumentError> {
    let emit = EmitOptions {
        code: options.emit_code,
        listing: options.dump_after == Some(Stage::EmitAndLink),
        patch: Some(patch),
        keep_failed: options.payloads.keep_failed.clone(),
        keep_originals: options.keep_originals,
        ..EmitOptions::default()
    };
    let external = options.tool_globals == ToolGlobals::External && !globals.is_empty();
    let linker = if external { Linker::LldLeavingUndefined } else { options.linker };
    let (bytes, assembly) = emit_and_link(lifted, &emit, linker)?;
    if external {
        only_tool_globals_undefined(&bytes, globals, &lifted.code_object.bytes)?;
    }
    if options.dump_after != Some(Stage::EmitAndLink) {
        return Ok(Emitted { made: bytes, assembly: String::new(), timings: assembly.timings });
    }
    // The dump: the assembly, then what its `.incbin` lines read, listed.
    let mut text = assembly.text;
    if !assembly.deferred.is_empty() {
        let listing = assembly.deferred.listing();
        text.push_str(&format!(
            "\n; relocations added to the object, not read by llvm-mc:\n; {}",
            listing.trim_end().replace('\n', "\n; ")
        ));
        text.push('\n');
    }
    if let Some(listing) = assembly.listing {
        text.push_str(&format!("\n; {CODE_FILE}, listed:{}", listing.replace('\n', "\n; ")));
    }
    Ok(Emitted { made: bytes, assembly: text, timings: assembly.timings })
}

/// The one code object of an input a command works on: the only one, or the
/// one `--target` selects.
pub fn one_code_object(input: LoadedInput, target: Option<&str>) -> Result<CodeObject, Error> {
    let input = match target {
        Some(target) => input.select_target(target)?,
        None => input,
    };
    if input.code_objects.len() > 1 {
        let targets: Vec<String> = input.code_objects.iter().map(|c| c.target.to_string()).collect();
        return Err(Error::SeveralCodeObjects { file: input.path, targets: targets.join(", ") });
    }
    let path = input.path;
    input
        .code_objects
        .into_iter()
        .next()
        .ok_or_else(|| Error::NoCodeObject { file: path, target: target.unwrap_or_default().to_string() })
}

/// The driver's modules from the bottom up. A module uses only modules
/// before it in this list: support first, then the stages in pipeline
/// order (with the tool reader before the payload stage and point
/// selection after it), then what runs the stages for a whole code object,
/// then the subcommands, which no module below them uses. A test holds the
/// source to it.
pub const MODULES_BOTTOM_UP: &[&str] = &[
    "native",
    "process",
    "toolchain",
    "error",
    "output",
    "progress",
    "stages::load",
    "stages::lift",
    "stages::liveness",
    "stages::sva",
    "tool",
    "stages::payload",
    "plan",
    "stages::lower_ir",
    "stages::codegen",
    "stages::lower_mir",
    "preservation",
    "stages::payloads",
    "stages::patch",
    "stages::emit",
    "stages",
    "parallel",
    "pipeline",
    "inspect",
    "roundtrip",
    "corpus",
    "analyze",
    "verify",
    "instrument",
];

/// Modules that check instrumented code. A checker that shares the code
/// it checks cannot see that code's mistakes: they read the facts of load,
/// lift and liveness and run the real tools, and use no module from
/// `stages::sva` to `stages::emit` but `preservation` (a checker too).
pub const CHECKERS: &[&str] = &["verify"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::load::InputKind;

    /// A host file whose `.hip_fatbin` bundles hold no device code (a
    /// damaged one did): an error naming the file, not a panic.
    #[test]
    fn an_input_without_code_objects_is_an_error() {
        let input = LoadedInput {
            path: "app.o".into(),
            kind: InputKind::HostWithFatbin { bundles: 1 },
            code_objects: Vec::new(),
        };
        let error = one_code_object(input, None).unwrap_err().to_string();
        assert_eq!(error, "app.o: the input holds no code object");
    }

    /// The module a source file belongs to: its crate-level module, or for
    /// files under `stages/`, its stage.
    fn module_of(relative: &std::path::Path) -> String {
        let parts: Vec<String> =
            relative.with_extension("").components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        match parts.as_slice() {
            [stages, stage, ..] if stages == "stages" && stage != "mod" => format!("stages::{stage}"),
            [first, ..] => first.clone(),
            [] => unreachable!("a file has a name"),
        }
    }

    fn sources(directory: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(directory).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// Every `crate::` path in the source, outside comments, names a module
    /// before the file's own in [`MODULES_BOTTOM_UP`] (imports run one way),
    /// and no checker uses what wrote the code it checks.
    #[test]
    fn imports_run_one_way() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let rank = |module: &str| MODULES_BOTTOM_UP.iter().position(|m| *m == module);
        let path_pattern = regex::Regex::new(r"crate::(?:\{\s*)?(stages::)?(\w+)").unwrap();
        let mut files = Vec::new();
        sources(&root, &mut files);
        let mut wrong = Vec::new();
        for file in files {
            let relative = file.strip_prefix(&root).unwrap();
            if relative == std::path::Path::new("lib.rs") || relative == std::path::Path::new("main.rs") {
                continue;
            }
            let module = module_of(relative);
            let own = rank(&module)
                .unwrap_or_else(|| panic!("{}: module `{module}` is not in MODULES_BOTTOM_UP", relative.display()));
            let text = std::fs::read_to_string(&file).unwrap();
            for (number, line) in text.lines().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                for found in path_pattern.captures_iter(line) {
                    let used = match found.get(1) {
                        Some(_) => format!("stages::{}", &found[2]),
                        None => found[2].to_string(),
                    };
                    // Re-exports at the crate root (`crate::Error`) are the error module's.
                    let used = if used.starts_with(char::is_uppercase) { "error".to_string() } else { used };
                    let Some(theirs) = rank(&used) else {
                        wrong.push(format!(
                            "{}:{}: `{used}` is not in MODULES_BOTTOM_UP",
                            relative.display(),
                            number + 1
                        ));
                        continue;
                    };
                    if theirs > own {
                        wrong.push(format!(
                            "{}:{}: {module} uses {used}, which comes after it",
                            relative.display(),
                            number + 1
                        ));
                    }
                    let writes_code = (rank("stages::sva").unwrap()..=rank("stages::emit").unwrap()).contains(&theirs)
                        && used != "preservation";
                    if CHECKERS.contains(&module.as_str()) && writes_code {
                        wrong.push(format!(
                            "{}:{}: {module} checks what {used} writes and must not use it",
                            relative.display(),
                            number + 1
                        ));
                    }
                }
            }
        }
        assert!(wrong.is_empty(), "imports that break the layering:\n{}", wrong.join("\n"));
    }
}
