//! `gpuinstr-link instrument`: a tool and a plan applied to every code
//! object of a file (a code object, a bundle, a host object or library),
//! each through the pipeline's walk (`pipeline::instrument`); the file comes
//! back with them replaced, and points left out are an error unless asked for.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use gpuinstr_intrinsics::Registry;
use serde::Serialize;

use crate::plan::Plan;
use crate::stages::emit::container::Pieces;
use crate::stages::load::CodeObject;
use crate::stages::payloads::{CompileError, LeftOutCause, LeftOutPoint};
use crate::stages::sva::RegisterGrowth;

pub use crate::pipeline::{
    Grouping, InstrumentError, InstrumentOptions, InstrumentReport, PayloadWaits, ToolGlobals, GROUP_BYTES,
};

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
    let mut out = Vec::new();
    let report = instrument_file_into(tool, path, bytes, plan, registry, options, target, &|| {}, &mut |pieces| {
        out = pieces.to_vec()?;
        Ok(())
    })?;
    Ok((out, report))
}

/// [`instrument_file`], handing the output to `deliver` as pieces (the
/// input's unchanged parts, the instrumented code objects, kept in
/// temporary files when there are several) rather than as one buffer: an
/// instrumented library is gigabytes. `deliver` runs only on success;
/// `loaded` once the code objects are copied out of `bytes`.
#[allow(clippy::too_many_arguments)]
pub fn instrument_file_into(
    tool: &crate::tool::Tool,
    path: &std::path::Path,
    bytes: &[u8],
    plan: &Plan,
    registry: &Registry,
    options: &InstrumentOptions,
    target: Option<&str>,
    loaded: &dyn Fn(),
    deliver: &mut dyn FnMut(&Pieces<'_>) -> std::io::Result<()>,
) -> Result<FileReport, InstrumentError> {
    use crate::stages::emit::container::{rewrite_host_file, Piece, Stored};
    use crate::stages::load::{bundle, load_bytes_for_target, InputKind};
    // A plan calling a hook the tool lacks is about the plan and the tool.
    for hooks in &tool.hooks {
        plan.check_hooks(hooks.iter().map(String::as_str), &tool.path.display().to_string())?;
    }
    // Bundle entries that cannot match the target are not even parsed (a
    // whole library holds hundreds of code objects per target).
    let mut input = load_bytes_for_target(path, bytes, target)?;
    let single = input.code_objects.len() == 1;
    // Each code object is dropped once instrumented; its origin stays.
    let code_objects = std::mem::take(&mut input.code_objects);
    let origins: Vec<Vec<String>> = code_objects.iter().map(|c| c.origin.clone()).collect();
    loaded();
    let io = |source: std::io::Error| {
        InstrumentError::Load(crate::Error::Io { location: crate::Location::file(path), source })
    };
    let mut report = FileReport::default();
    // Instrumented code objects by (bundle index, entry triple); code
    // objects are independent, so they are instrumented on a few threads,
    // each kept as soon as it is done (several: in temporary files).
    let mut replaced: HashMap<(usize, String), Stored> = HashMap::new();
    let outcomes = std::sync::Mutex::new(Vec::new());
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get()).min(code_objects.len());
    options.progress.set_code_objects(code_objects.len(), code_objects.iter().map(|c| c.bytes.len() as u64).sum());
    // Each code object with the tool's code object for its target.
    let mut items: Vec<(usize, CodeObject, &CodeObject)> = Vec::new();
    for (index, code_object) in code_objects.into_iter().enumerate().rev() {
        let tool = tool.for_target(&code_object.target)?;
        items.push((index, code_object, tool));
    }
    // Two large code objects at once would need twice the memory of one:
    // a code object's working set is estimated from its size.
    let budget = memory_budget()?;
    let cost =
        |(_, code_object, _): &(usize, CodeObject, &CodeObject)| code_object.bytes.len() as u64 * WORKING_SET_PER_BYTE;
    crate::parallel::for_each_within_budget(items, jobs, budget, cost, |(index, code_object, tool)| {
        let outcome = crate::pipeline::instrument(tool, &code_object, plan, registry, options)
            .and_then(|(new, one)| Ok((Stored::keep(new, !single).map_err(io)?, one)));
        outcomes.lock().expect("outcomes").push((index, outcome));
        // What this code object took goes back before the next one starts.
        drop(code_object);
        crate::native::release_free_memory();
    });
    let mut outcomes = outcomes.into_inner().expect("outcomes");
    outcomes.sort_by_key(|(index, _)| *index);
    for (index, outcome) in outcomes {
        let origin_parts = &origins[index];
        let origin = origin_parts.join(", ");
        match outcome {
            Ok((new, mut one)) => {
                one.origin = origin;
                report.code_objects.push(one);
                let bundle_index = origin_parts
                    .iter()
                    .find_map(|o| o.strip_prefix("bundle ").and_then(|n| n.parse().ok()))
                    .unwrap_or(0);
                let triple = origin_parts.iter().find_map(|o| o.strip_prefix("entry ")).unwrap_or_default().to_string();
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
    if report.code_objects.is_empty() && options.require_points {
        return Err(InstrumentError::NothingSelectedInFile);
    }
    check_left_out(&mut report, options)?;
    let mut out = Pieces::default();
    if replaced.is_empty() {
        // Nothing instrumented: the file comes back as it was.
        out.push(Piece::Borrowed(bytes));
        deliver(&out).map_err(io)?;
        return Ok(report);
    }
    match input.kind {
        InputKind::CodeObject => match replaced.values().next() {
            Some(stored) => out.push(Piece::Stored(stored)),
            None => out.push(Piece::Borrowed(bytes)),
        },
        InputKind::OffloadBundle => out = replace_in(&replaced, path, 0, bytes)?,
        InputKind::HostWithFatbin { .. } => {
            let fatbin = fatbin_section(bytes).ok_or_else(|| crate::Error::Load {
                location: crate::Location::file(path),
                problem: crate::LoadProblem::EmptyFatbin,
            })?;
            let found = bundle::fatbin_bundles(fatbin)
                .map_err(|problem| crate::Error::Load { location: crate::Location::file(path), problem })?;
            let mut bundles = Vec::with_capacity(found.len());
            for (index, (start, _)) in found.iter().enumerate() {
                bundles.push(replace_in(&replaced, path, index, &fatbin[*start..])?);
            }
            out = rewrite_host_file(bytes, bundles)?;
        }
    }
    deliver(&out).map_err(io)?;
    Ok(report)
}

/// Peak memory of instrumenting a code object per byte of it, about: the
/// instruction counter on rocSPARSE's largest gfx90a code object (8.7 MB,
/// half a million points) peaks at 3.1 GB.
const WORKING_SET_PER_BYTE: u64 = 360;

/// How much memory the code objects instrumented at once may take
/// ([`crate::parallel::memory_budget`]).
fn memory_budget() -> Result<u64, InstrumentError> {
    crate::parallel::memory_budget()
        .map_err(|message| InstrumentError::About { file: "GPUINSTR_MEMORY_BUDGET".into(), message })
}

/// A bundle of the input (at `data`) with its instrumented entries.
fn replace_in<'a>(
    replaced: &'a HashMap<(usize, String), crate::stages::emit::container::Stored>,
    path: &std::path::Path,
    bundle_index: usize,
    data: &'a [u8],
) -> Result<Pieces<'a>, InstrumentError> {
    use crate::stages::emit::container::{rewrite_bundle, Piece, Stored};
    let parsed = crate::stages::load::bundle::parse_bundle(data)
        .map_err(|p| crate::Error::Load { location: crate::Location::file(path), problem: p })?;
    let replacements: HashMap<usize, &Stored> = parsed
        .entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| replaced.get(&(bundle_index, e.triple.clone())).map(|b| (i, b)))
        .collect();
    if replacements.is_empty() {
        let mut same = Pieces::default();
        same.push(Piece::Borrowed(&data[..parsed.size]));
        return Ok(same);
    }
    Ok(rewrite_bundle(data, &replacements)?)
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

/// Instruments one code object; the new code object's bytes and a report.
/// Points left out are an error unless `options.allow_partial`.
pub fn instrument_code_object(
    tool: &CodeObject,
    app: &CodeObject,
    plan: &Plan,
    registry: &Registry,
    options: &InstrumentOptions,
) -> Result<(Vec<u8>, InstrumentReport), InstrumentError> {
    let (bytes, report) = crate::pipeline::instrument(tool, app, plan, registry, options)?;
    let mut file = FileReport { code_objects: vec![report], ..FileReport::default() };
    check_left_out(&mut file, options)?;
    Ok((bytes, file.code_objects.remove(0)))
}

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
