//! A code object of many kernels, instrumented a group of kernels at a
//! time: memory bounded by a group (about [`InstrumentOptions::group_bytes`]
//! of code), not by the code object (Tensile's largest in rocBLAS hold 2,294
//! kernels and 11.5 million instructions), and the groups on every core.
//!
//! Each group is lifted alone and goes through stages 3 to 9, then is
//! assembled as a part of its own (emit's [`Part::Kernels`]: its code,
//! descriptors and a block of the site table). The rest of the code object
//! (data, the tool's globals, the groups' point tables joined, the metadata
//! with each group's kernels) is assembled last ([`Part::Rest`]), and ld.lld
//! links the parts (whatever the linker option says: CoMGR would hold a
//! copy of every part and of the output). Only code objects whose functions are
//! all kernels that reach nothing outside their own code are split: a
//! device function may be called by kernels of several groups, and a
//! reference to data would cross the parts by a local name.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use gpuinstr_intrinsics::Registry;

use super::report::{Grouping, InstrumentError, InstrumentOptions, InstrumentReport, ToolGlobals};
use super::{instrument_lifted, Clock, Emitted, LiftedCode, Stage};
use crate::plan::Plan;
use crate::stages::emit::link::{assemble_part, link_parts};
use crate::stages::emit::{CodeForm, EmitOptions, Part};
use crate::stages::lift::{lift_functions, LiftedCodeObject};
use crate::stages::load::instrumented::PartialKernel;
use crate::stages::load::metadata::{kernel_entries, replace_kernel_entries};
use crate::stages::load::CodeObject;
use crate::stages::patch::Patch;
use crate::stages::payloads::ToolGlobal;

/// The groups of kernels (by start address) a code object is instrumented
/// in, when it is split at all: the options allow it (a dump or kept
/// originals want the whole code object in one piece) and its functions
/// are kernels of more than one group.
pub(super) fn kernel_groups(app: &CodeObject, options: &InstrumentOptions) -> Option<Vec<Vec<u64>>> {
    let whole = options.group_bytes == 0
        || options.dump_after.is_some()
        || options.keep_originals
        || options.emit_code != CodeForm::Bytes;
    if whole {
        return None;
    }
    crate::stages::lift::kernel_groups(app, options.group_bytes)
}

/// What a group left for the rest's part and the link.
struct GroupPart {
    /// The assembled part, in its own directory.
    object: PathBuf,
    point_table: Vec<u8>,
    /// The group's kernels' entries of the patched metadata.
    metadata: Vec<rmpv::Value>,
    partial: Vec<PartialKernel>,
    globals: Vec<ToolGlobal>,
    external_globals: Vec<String>,
    wave_slots: Option<crate::stages::sva::wave_slots::Indexing>,
}

/// Why a code object is instrumented whole after all.
enum NotSplit {
    /// A kernel reaches code or data outside itself.
    Reaches(String),
    Failed(InstrumentError),
}

impl From<InstrumentError> for NotSplit {
    fn from(error: InstrumentError) -> NotSplit {
        NotSplit::Failed(error)
    }
}

/// What a code object is instrumented with, for each group alike.
#[derive(Clone, Copy)]
struct Inputs<'a> {
    tool: &'a CodeObject,
    app: &'a CodeObject,
    plan: &'a Plan,
    registry: &'a Registry,
    options: &'a InstrumentOptions,
}

/// [`super::instrument`] a group of kernels at a time; the whole code
/// object at once where a kernel reaches outside its own code.
pub(super) fn instrument(
    tool: &CodeObject,
    app: &CodeObject,
    plan: &Plan,
    registry: &Registry,
    options: &InstrumentOptions,
    groups: &[Vec<u64>],
) -> Result<(Vec<u8>, InstrumentReport), InstrumentError> {
    match in_groups(Inputs { tool, app, plan, registry, options }, groups) {
        Ok(done) => Ok(done),
        Err(NotSplit::Failed(error)) => Err(error),
        Err(NotSplit::Reaches(why)) => {
            let whole = InstrumentOptions { group_bytes: 0, ..options.clone() };
            let (bytes, mut report) = super::instrument(tool, app, plan, registry, &whole)?;
            report.grouping = Grouping::WholeBecause(why);
            Ok((bytes, report))
        }
    }
}

fn in_groups(inputs: Inputs<'_>, groups: &[Vec<u64>]) -> Result<(Vec<u8>, InstrumentReport), NotSplit> {
    let Inputs { app, plan, options, .. } = inputs;
    let start = std::time::Instant::now();
    let first_sites = first_sites(app, plan, groups)?;
    let directory = tempfile::Builder::new().prefix("gpuinstr-parts-").tempdir().map_err(io)?;
    let progress = options.progress.code_object(app.bytes.len() as u64);
    progress.stage("groups of kernels", (0.0, 1.0));
    let done = Mutex::new((Vec::new(), 0usize));
    let items: Vec<(usize, &Vec<u64>)> = groups.iter().enumerate().rev().collect();
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get()).min(groups.len());
    // The groups take the payloads another group compiled.
    let mut group_options = InstrumentOptions { progress: Default::default(), ..options.clone() };
    group_options.payloads.shared = Some(Default::default());
    let group_inputs = Inputs { options: &group_options, ..inputs };
    let whole = std::sync::atomic::AtomicBool::new(false);
    crate::parallel::for_each_on_threads(items, jobs, |(index, group)| {
        if whole.load(std::sync::atomic::Ordering::Relaxed) {
            return; // the code object goes whole: the groups' work is lost
        }
        let place = directory.path().join(format!("group{index}"));
        let outcome = instrument_group(group_inputs, group, first_sites[index], &place);
        if matches!(outcome, Err(NotSplit::Reaches(_))) {
            whole.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let mut done = done.lock().expect("groups");
        done.0.push((index, outcome));
        done.1 += 1;
        progress.batches((0.0, 1.0), done.1, groups.len());
        drop(done);
        // What the group took goes back before the next one grows.
        crate::native::release_free_memory();
    });
    let mut outcomes = done.into_inner().expect("groups").0;
    outcomes.sort_by_key(|(index, _)| *index);
    // A group reaching outside itself decides for the code object, whatever
    // failed in another.
    if let Some(position) = outcomes.iter().position(|(_, o)| matches!(o, Err(NotSplit::Reaches(_)))) {
        return Err(outcomes.swap_remove(position).1.err().expect("an error"));
    }
    let mut parts = Vec::new();
    let mut report = InstrumentReport { target: app.target.to_string(), ..InstrumentReport::default() };
    for (_, outcome) in outcomes {
        let (part, one) = outcome?;
        report.absorb(one);
        parts.push(part);
    }
    if report.selected == 0 {
        let kernels: Vec<&str> = app.kernels.iter().map(|k| k.name()).collect();
        return Err(InstrumentError::NothingSelected(format!("kernels: {}", kernels.join(", "))).into());
    }
    progress.selected(report.selected);

    // The rest, then the link.
    let clock = std::time::Instant::now();
    let rest = directory.path().join("rest");
    std::fs::create_dir(&rest).map_err(io)?;
    let rest_object = assemble_rest(app, options, &parts, &rest)?;
    report.steps.push(("emit and link/the rest".to_string(), clock.elapsed().as_secs_f64()));
    let clock = std::time::Instant::now();
    let external = options.tool_globals == ToolGlobals::External;
    let globals: Vec<String> = distinct(parts.iter().flat_map(|p| p.external_globals.iter().cloned()));
    let mut objects = vec![rest_object];
    objects.extend(parts.iter().map(|p| p.object.clone()));
    let leave_undefined = external && !globals.is_empty();
    let bytes = link_parts(&objects, app, leave_undefined, directory.path()).map_err(InstrumentError::from)?;
    if external && !globals.is_empty() {
        super::report::only_tool_globals_undefined(&bytes, &globals, &app.bytes)?;
    }
    report.steps.push(("emit and link/linking the parts".to_string(), clock.elapsed().as_secs_f64()));
    report.seconds = start.elapsed().as_secs_f64();
    report.grouping = Grouping::Groups(groups.len());
    Ok((bytes, report))
}

/// Each group's first `site` number: the points of the groups before it,
/// when the plan gives hooks the number (each group is lifted here once
/// more to count them); else 0 (the point table's order is the groups'
/// either way).
fn first_sites(app: &CodeObject, plan: &Plan, groups: &[Vec<u64>]) -> Result<Vec<usize>, NotSplit> {
    if !plan.numbers_sites() {
        return Ok(vec![0; groups.len()]);
    }
    let mut first = Vec::with_capacity(groups.len());
    let mut sites = 0;
    for group in groups {
        first.push(sites);
        let lifted = lift_group(app, group).map_err(InstrumentError::from)?;
        sites += plan.select_from(&lifted, 0).len();
    }
    Ok(first)
}

fn lift_group<'c>(app: &'c CodeObject, group: &[u64]) -> Result<LiftedCodeObject<'c>, crate::stages::lift::LiftError> {
    let group: std::collections::HashSet<u64> = group.iter().copied().collect();
    lift_functions(app, |start| group.contains(&start))
}

/// Where a kernel reaches code or data outside its own code by pc-relative
/// address (a call, a constant): the parts would need a name they share.
fn reaches_outside(lifted: &LiftedCodeObject<'_>) -> Option<String> {
    for function in &lifted.functions {
        for instruction in function.instructions() {
            let Some(pc) = &instruction.pc_relative else { continue };
            if pc.target < function.address || pc.target > function.end() {
                return Some(format!("{} reaches {:#x} at {:#x}", function.name, pc.target, instruction.address));
            }
        }
        // Calls of subroutines of its own stay inside it (hipBLASLt's).
        let units = || crate::stages::liveness::RegisterUnits::new(&lifted.isa);
        if !function.calls.is_empty()
            && !crate::stages::liveness::local_calls::calls_only_its_own_code(&lifted.isa, &units(), function)
        {
            return Some(format!("{} calls", function.name));
        }
    }
    None
}

/// One group through stages 2 to 9, assembled as its part in `place`.
fn instrument_group(
    inputs: Inputs<'_>,
    group: &[u64],
    first_site: usize,
    place: &Path,
) -> Result<(GroupPart, InstrumentReport), NotSplit> {
    let Inputs { tool, app, plan, registry, options } = inputs;
    std::fs::create_dir(place).map_err(io)?;
    let mut clock = Clock::start(Default::default());
    let lifted = lift_group(app, group).map_err(InstrumentError::from)?;
    if let Some(why) = reaches_outside(&lifted) {
        return Err(NotSplit::Reaches(why));
    }
    clock.lap(Stage::Lift);
    let kernels: Vec<String> = lifted.functions.iter().map(|f| f.name.clone()).collect();
    let assemble = |lifted: &LiftedCodeObject<'_>, mut patch: Patch, globals: &[String]| {
        let metadata = patch.metadata.take().map_or_else(Vec::new, |document| kernel_entries(&document, &kernels));
        let (partial, tool_globals, wave_slots) =
            (std::mem::take(&mut patch.partial), patch.globals.clone(), patch.wave_slots);
        let emit = EmitOptions {
            part: Part::Kernels,
            code: options.emit_code,
            patch: Some(patch),
            keep_failed: options.payloads.keep_failed.clone(),
            ..EmitOptions::default()
        };
        let (relocatable, assembly) = assemble_part(lifted, &emit, place)?;
        let object = place.join("part.o");
        std::fs::write(&object, relocatable).map_err(io)?;
        let part = GroupPart {
            object,
            point_table: assembly.point_table,
            metadata,
            partial,
            globals: tool_globals,
            external_globals: globals.to_vec(),
            wave_slots,
        };
        Ok(Emitted { made: part, assembly: String::new(), timings: assembly.timings })
    };
    let code = LiftedCode { tool, app, lifted, first_site };
    match instrument_lifted(code, plan, registry, options, clock, assemble) {
        // The plan selects nothing in these kernels: they stay as they are
        // (the code object may still have points in other groups).
        Err(InstrumentError::NothingSelected(_)) => {
            let lifted = lift_group(app, group).map_err(InstrumentError::from)?;
            let Emitted { made, .. } = assemble(&lifted, Patch::default(), &[])?;
            Ok((made, InstrumentReport::default()))
        }
        outcome => Ok(outcome?),
    }
}

/// The rest's part: everything but the groups' code and descriptors.
fn assemble_rest(
    app: &CodeObject,
    options: &InstrumentOptions,
    parts: &[GroupPart],
    place: &Path,
) -> Result<PathBuf, InstrumentError> {
    let lifted = lift_functions(app, |_| false)?;
    let mut metadata = app.metadata.document.clone();
    replace_kernel_entries(&mut metadata, parts.iter().flat_map(|p| p.metadata.iter().cloned()).collect());
    let mut globals: Vec<ToolGlobal> = Vec::new();
    for global in parts.iter().flat_map(|p| &p.globals) {
        if !globals.iter().any(|g| g.name == global.name) {
            globals.push(global.clone());
        }
    }
    let wave_slots = parts.iter().find_map(|p| p.wave_slots);
    let define = options.tool_globals == ToolGlobals::Defined;
    let patch = Patch {
        metadata: Some(metadata),
        appended: crate::stages::patch::appended(&globals, define, wave_slots, true),
        partial: parts.iter().flat_map(|p| p.partial.iter().cloned()).collect(),
        ..Patch::default()
    };
    let tables: Vec<&[u8]> = parts.iter().map(|p| p.point_table.as_slice()).collect();
    let emit = EmitOptions {
        part: Part::Rest { point_table: crate::stages::load::instrumented::join_point_tables(&tables) },
        code: options.emit_code,
        patch: Some(patch),
        keep_failed: options.payloads.keep_failed.clone(),
        ..EmitOptions::default()
    };
    let (relocatable, _) = assemble_part(&lifted, &emit, place)?;
    let object = place.join("rest.o");
    std::fs::write(&object, relocatable).map_err(io)?;
    Ok(object)
}

fn distinct(names: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in names {
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

fn io(source: std::io::Error) -> InstrumentError {
    InstrumentError::Emit(source.into())
}
