//! `gpuinstr-link analyze`: the register availability report of seed 000.
//! Per kernel: registers allocated (descriptor), declared (metadata) and used
//! (the kernel and everything it may call); the globally free ones
//! (allocated, never used); how many are free at each instruction (not live
//! before it, not read or written by it: the paper's persistent registers);
//! and whether a stack base (2 SGPRs) and the SVA (1 VGPR) fit.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::PathBuf;
use std::sync::Mutex;

use serde::Serialize;

use crate::parallel::{for_each_on_threads, load_code_objects};
use crate::stages::lift::{lift, reachable_functions, Flow, FunctionKind, LiftError, LiftedCodeObject};
use crate::stages::liveness::{allocation, analyze as liveness, Liveness, LivenessError, RegisterFile, UnitSet};
use crate::stages::load::allocation::{MAX_SGPRS, MAX_VGPRS};
use crate::stages::load::CodeObject;

/// Where a value that must live through the whole kernel can be kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Availability {
    /// In registers allocated and never used.
    GloballyFree,
    /// In registers the allocation can grow into.
    LargerAllocation,
    /// Only by moving it between registers free at each instruction (the
    /// paper's sliding tile puzzle).
    MovingBetweenFreeRegisters,
    /// Not without spilling application registers.
    NeedsSpilling,
}

impl Availability {
    pub fn describe(self) -> &'static str {
        match self {
            Availability::GloballyFree => "in globally free registers",
            Availability::LargerAllocation => "with a larger allocation",
            Availability::MovingBetweenFreeRegisters => "only by moving between locally free registers",
            Availability::NeedsSpilling => "not without spilling",
        }
    }
}

/// Where stage sva puts the SVA with the allocation as it is (no
/// `--grow-registers`, no work-item ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SvaPlacementKind {
    /// A VGPR nothing uses.
    FreeVgpr,
    /// An AGPR nothing uses (seed 004's fallback).
    FreeAgpr,
    /// Moving between VGPRs free where it is, with this many move points.
    Sliding { move_points: usize },
    /// In memory, in the wave's own slot (no register anywhere).
    WaveSlot,
    /// Nowhere.
    Unplaced,
}

impl SvaPlacementKind {
    fn class(self) -> &'static str {
        match self {
            SvaPlacementKind::FreeVgpr => "a VGPR free for the whole kernel",
            SvaPlacementKind::FreeAgpr => "an AGPR free for the whole kernel",
            SvaPlacementKind::Sliding { .. } => "sliding between locally free VGPRs",
            SvaPlacementKind::WaveSlot => "memory, in the wave's slot",
            SvaPlacementKind::Unplaced => "nowhere without growing the allocation",
        }
    }
}

/// One register file of one kernel.
#[derive(Clone, Debug, Serialize)]
pub struct FileReport {
    pub allocated: usize,
    /// From the metadata (`.sgpr_count`, `.vgpr_count`, `.agpr_count`).
    pub declared: Option<u64>,
    /// Distinct registers read or written.
    pub used: usize,
    /// One past the highest register used.
    pub used_up_to: usize,
    pub globally_free: usize,
    /// The globally free registers, compactly (`s[42:47]`).
    pub globally_free_registers: String,
}

/// Free registers over a kernel's instructions.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FreeDistribution {
    pub min: usize,
    pub median: usize,
    /// Share of instructions with at least 1, 2 and 4 free.
    pub at_least_1: f64,
    pub at_least_2: f64,
    pub at_least_4: f64,
}

impl FreeDistribution {
    fn of(mut counts: Vec<usize>) -> Self {
        if counts.is_empty() {
            return FreeDistribution::default();
        }
        counts.sort_unstable();
        let share = |n: usize| counts.iter().filter(|c| **c >= n).count() as f64 / counts.len() as f64;
        FreeDistribution {
            min: counts[0],
            median: counts[counts.len() / 2],
            at_least_1: share(1),
            at_least_2: share(2),
            at_least_4: share(4),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct KernelReport {
    pub name: String,
    pub instructions: usize,
    /// SGPRs the hardware reserves at the top of the SGPR block (VCC, XNACK
    /// mask, flat scratch), not usable as s registers.
    pub reserved_sgprs: usize,
    pub sgpr: FileReport,
    pub vgpr: FileReport,
    pub agpr: FileReport,
    pub free_sgprs: FreeDistribution,
    pub free_vgprs: FreeDistribution,
    /// A stack base: 2 SGPRs for the whole kernel.
    pub stack_base: Availability,
    /// The SVA: 1 VGPR for the whole kernel.
    pub sva: Availability,
    /// Where stage sva places it.
    pub sva_placement: SvaPlacementKind,
}

#[derive(Clone, Debug, Serialize)]
pub struct CodeObjectReport {
    pub origin: String,
    pub target: String,
    pub kernels: Vec<KernelReport>,
}

fn file_report(allocated: &UnitSet, touched: &UnitSet, file: RegisterFile, declared: Option<u64>) -> FileReport {
    let used = touched.in_file(file);
    let free = allocated.difference(touched);
    FileReport {
        allocated: allocated.len(),
        declared,
        used: used.len(),
        used_up_to: used.iter().map(|u| u.index() as usize + 1).max().unwrap_or(0),
        globally_free: free.len(),
        globally_free_registers: free.to_string(),
    }
}

fn availability(globally_free: usize, growable: usize, min_free: usize, needed: usize) -> Availability {
    if globally_free >= needed {
        Availability::GloballyFree
    } else if growable >= needed {
        Availability::LargerAllocation
    } else if min_free >= needed {
        Availability::MovingBetweenFreeRegisters
    } else {
        Availability::NeedsSpilling
    }
}

/// Where stage sva places the SVA of every kernel (allocations as they
/// are, no work-item ids), by function index.
pub fn sva_placements(lifted: &LiftedCodeObject<'_>, liveness: &Liveness) -> BTreeMap<usize, SvaPlacementKind> {
    use crate::stages::sva::{place, Home, RegisterGrowth, SvaRequest};
    let kernels = (0..lifted.functions.len()).filter(|f| lifted.functions[*f].is_kernel()).collect();
    let placement = place(
        lifted,
        liveness,
        &SvaRequest { instrumented: kernels, work_item_ids: false, grow: RegisterGrowth::Never },
    );
    placement
        .kernels
        .iter()
        .map(|k| {
            let kind = match k.sva {
                _ if k.problem.is_some() => SvaPlacementKind::Unplaced,
                Some(Home::Free(_)) => SvaPlacementKind::FreeVgpr,
                Some(Home::Agpr(_)) => SvaPlacementKind::FreeAgpr,
                Some(Home::Sliding(_)) => SvaPlacementKind::Sliding {
                    move_points: placement.sliding.get(&k.kernel).map_or(0, |s| s.move_points()),
                },
                Some(Home::WaveSlot) => SvaPlacementKind::WaveSlot,
                _ => SvaPlacementKind::Unplaced,
            };
            (k.kernel, kind)
        })
        .collect()
}

/// The report of one kernel (a function of `lifted` that is a kernel);
/// `sva_placement` from [`sva_placements`].
pub fn kernel_report(
    lifted: &LiftedCodeObject<'_>,
    liveness: &Liveness,
    function: usize,
    sva_placement: SvaPlacementKind,
) -> Option<KernelReport> {
    let FunctionKind::Kernel(kernel_index) = lifted.functions[function].kind else {
        return None;
    };
    let code_object = lifted.code_object;
    let kernel = &code_object.kernels[kernel_index];
    let touched = liveness.functions[function].touched;
    let allocation = allocation(code_object, kernel, &touched);
    let metadata = &kernel.metadata;

    let mut free_sgprs = Vec::new();
    let mut free_vgprs = Vec::new();
    let mut instructions = 0;
    for index in reachable_functions(lifted, function) {
        let result = &liveness.functions[index];
        for position in 0..result.live_in.len() {
            free_sgprs.push(result.free_at(position, &allocation.sgprs).len());
            free_vgprs.push(result.free_at(position, &allocation.vgprs).len());
            if index == function {
                instructions += 1;
            }
        }
    }
    let min = |counts: &[usize]| counts.iter().copied().min().unwrap_or(0);
    let (min_sgprs, min_vgprs) = (min(&free_sgprs), min(&free_vgprs));
    let sgpr = file_report(&allocation.sgprs, &touched, RegisterFile::Sgpr, Some(metadata.sgpr_count));
    let vgpr = file_report(&allocation.vgprs, &touched, RegisterFile::Vgpr, Some(metadata.vgpr_count));
    let agpr = file_report(&allocation.agprs, &touched, RegisterFile::Agpr, metadata.agpr_count);
    let growable_sgprs = UnitSet::range(RegisterFile::Sgpr, 0, MAX_SGPRS).difference(&touched).len();
    let growable_vgprs = UnitSet::range(RegisterFile::Vgpr, 0, MAX_VGPRS).difference(&touched).len();
    Some(KernelReport {
        name: kernel.name().to_string(),
        instructions,
        reserved_sgprs: allocation.reserved_sgprs,
        stack_base: availability(sgpr.globally_free, growable_sgprs, min_sgprs, 2),
        sva: availability(vgpr.globally_free, growable_vgprs, min_vgprs, 1),
        sva_placement,
        sgpr,
        vgpr,
        agpr,
        free_sgprs: FreeDistribution::of(free_sgprs),
        free_vgprs: FreeDistribution::of(free_vgprs),
    })
}

/// Why a code object has no register report: it could not be lifted, or
/// its liveness not computed.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    #[error(transparent)]
    Lift(#[from] LiftError),
    #[error(transparent)]
    Liveness(#[from] LivenessError),
}

/// The report of every kernel of a code object.
pub fn code_object_report(code_object: &CodeObject) -> Result<CodeObjectReport, AnalyzeError> {
    let lifted = lift(code_object)?;
    let liveness = liveness(&lifted)?;
    let placements = sva_placements(&lifted, &liveness);
    let mut kernels: Vec<KernelReport> = (0..lifted.functions.len())
        .filter_map(|f| {
            let placement = placements.get(&f).copied().unwrap_or(SvaPlacementKind::Unplaced);
            kernel_report(&lifted, &liveness, f, placement)
        })
        .collect();
    kernels.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(CodeObjectReport { origin: code_object.origin.join(": "), target: code_object.target.to_string(), kernels })
}

fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

pub fn render_kernel(out: &mut String, kernel: &KernelReport) {
    writeln!(out, "kernel {} ({} instructions)", kernel.name, kernel.instructions).unwrap();
    writeln!(out, "  registers  allocated  declared  used  used up to  globally free").unwrap();
    for (name, file) in [("sgpr", &kernel.sgpr), ("vgpr", &kernel.vgpr), ("agpr", &kernel.agpr)] {
        let declared = file.declared.map_or("-".to_string(), |d| d.to_string());
        let free = if file.globally_free == 0 {
            "0".to_string()
        } else {
            format!("{}: {}", file.globally_free, file.globally_free_registers)
        };
        writeln!(
            out,
            "  {name:9}  {:9}  {declared:>8}  {:4}  {:11}  {free}",
            file.allocated, file.used, file.used_up_to
        )
        .unwrap();
    }
    if kernel.reserved_sgprs > 0 {
        writeln!(
            out,
            "  ({} SGPRs at the top of the block are reserved for VCC/XNACK/flat scratch)",
            kernel.reserved_sgprs
        )
        .unwrap();
    }
    writeln!(out, "  free per instruction  min  median  >=1     >=2     >=4").unwrap();
    for (name, d) in [("sgpr", &kernel.free_sgprs), ("vgpr", &kernel.free_vgprs)] {
        writeln!(
            out,
            "  {name:20}  {:3}  {:6}  {:6}  {:6}  {:6}",
            d.min,
            d.median,
            percent(d.at_least_1),
            percent(d.at_least_2),
            percent(d.at_least_4)
        )
        .unwrap();
    }
    writeln!(out, "  stack base (2 SGPRs): {}", kernel.stack_base.describe()).unwrap();
    writeln!(out, "  SVA (1 VGPR): {}", kernel.sva.describe()).unwrap();
    let moves = match kernel.sva_placement {
        SvaPlacementKind::Sliding { move_points } => format!(" ({move_points} move points)"),
        _ => String::new(),
    };
    writeln!(out, "  SVA placed by stage sva (allocation as it is): {}{moves}", kernel.sva_placement.class()).unwrap();
}

pub fn render_text(report: &CodeObjectReport) -> String {
    let mut out = String::new();
    let origin = if report.origin.is_empty() { String::new() } else { format!(" ({})", report.origin) };
    writeln!(out, "target {}{origin}: {} kernels\n", report.target, report.kernels.len()).unwrap();
    for kernel in &report.kernels {
        render_kernel(&mut out, kernel);
        out.push('\n');
    }
    out
}

/// Live and free registers at one instruction.
pub fn at_instruction(code_object: &CodeObject, kernel: &str, index: usize) -> Result<String, String> {
    let lifted = lift(code_object).map_err(|e| e.to_string())?;
    let liveness = liveness(&lifted).map_err(|e| e.to_string())?;
    let function = lifted
        .functions
        .iter()
        .position(|f| f.name == kernel)
        .ok_or_else(|| format!("no kernel or device function named `{kernel}`"))?;
    let result = &liveness.functions[function];
    let instruction = lifted.functions[function].instructions().nth(index).ok_or_else(|| {
        format!("`{kernel}` has {} instructions; index {index} is past the end", result.live_in.len())
    })?;
    let text = lifted.isa.mc.print(&instruction.raw, instruction.address).unwrap_or_else(|| "<undecodable>".into());
    // The allocation of the kernel (device functions: of the first kernel calling them).
    let kernel_function = (0..lifted.functions.len())
        .find(|f| lifted.functions[*f].is_kernel() && reachable_functions(&lifted, *f).contains(&function));
    let mut out = String::new();
    writeln!(out, "{kernel} #{index} at {:#x}: {text}", instruction.address).unwrap();
    writeln!(
        out,
        "  EXEC full before: {}",
        if result.exec_full[index] { "yes" } else { "no (vector writes keep inactive lanes)" }
    )
    .unwrap();
    writeln!(out, "  live before: {}", result.live_in[index]).unwrap();
    writeln!(out, "  reads:       {}", result.uses[index]).unwrap();
    writeln!(out, "  writes:      {}", result.defs[index]).unwrap();
    writeln!(out, "  live after:  {}", result.live_out[index]).unwrap();
    if let Some(k) = kernel_function {
        let FunctionKind::Kernel(kernel_index) = lifted.functions[k].kind else { unreachable!() };
        let allocation = allocation(code_object, &code_object.kernels[kernel_index], &liveness.functions[k].touched);
        for (name, allocated) in
            [("SGPRs", &allocation.sgprs), ("VGPRs", &allocation.vgprs), ("AGPRs", &allocation.agprs)]
        {
            let free = result.free_at(index, allocated);
            writeln!(out, "  free {name}:  {} ({})", free.len(), free).unwrap();
        }
    }
    if instruction.flow == Flow::Call {
        writeln!(out, "  (a call: reads what the callee needs, writes what it may write)").unwrap();
    }
    Ok(out)
}

/// Counts over many kernels.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CorpusSummary {
    pub target: String,
    pub code_objects: usize,
    pub kernels: usize,
    pub instructions: usize,
    pub stack_base: BTreeMap<Availability, usize>,
    pub sva: BTreeMap<Availability, usize>,
    /// Stage sva's placements (allocations as they are), by class; and the
    /// move points of the sliding ones.
    pub sva_placements: BTreeMap<&'static str, usize>,
    #[serde(skip)]
    pub sliding_move_points: Vec<usize>,
    /// Seed 000's reduced requirement: 2 SGPRs or 1 VGPR globally free,
    /// with the allocation as it is and with it raised.
    pub paper_requirement_globally: usize,
    pub paper_requirement_with_larger_allocation: usize,
    /// Kernels with at least N globally free SGPRs / VGPRs.
    pub globally_free_sgprs_at_least: BTreeMap<usize, usize>,
    pub globally_free_vgprs_at_least: BTreeMap<usize, usize>,
    /// Over all instructions: share with at least 1, 2, 4 free SGPRs / VGPRs.
    pub instructions_with_free_sgprs: BTreeMap<usize, f64>,
    pub instructions_with_free_vgprs: BTreeMap<usize, f64>,
    pub failed_code_objects: Vec<String>,
    pub seconds: f64,
}

impl CorpusSummary {
    fn add(&mut self, report: &CodeObjectReport) {
        self.code_objects += 1;
        for kernel in &report.kernels {
            self.kernels += 1;
            self.instructions += kernel.instructions;
            *self.stack_base.entry(kernel.stack_base).or_default() += 1;
            *self.sva.entry(kernel.sva).or_default() += 1;
            *self.sva_placements.entry(kernel.sva_placement.class()).or_default() += 1;
            if let SvaPlacementKind::Sliding { move_points } = kernel.sva_placement {
                self.sliding_move_points.push(move_points);
            }
            let fits = |a: Availability, within: Availability| a <= within;
            self.paper_requirement_globally += usize::from(
                fits(kernel.stack_base, Availability::GloballyFree) || fits(kernel.sva, Availability::GloballyFree),
            );
            self.paper_requirement_with_larger_allocation += usize::from(
                fits(kernel.stack_base, Availability::LargerAllocation)
                    || fits(kernel.sva, Availability::LargerAllocation),
            );
            for n in [1, 2, 4, 8] {
                *self.globally_free_sgprs_at_least.entry(n).or_default() += usize::from(kernel.sgpr.globally_free >= n);
                *self.globally_free_vgprs_at_least.entry(n).or_default() += usize::from(kernel.vgpr.globally_free >= n);
            }
            // Weighted by the kernel's instructions.
            let weight = kernel.instructions as f64;
            for (n, s, v) in [
                (1, kernel.free_sgprs.at_least_1, kernel.free_vgprs.at_least_1),
                (2, kernel.free_sgprs.at_least_2, kernel.free_vgprs.at_least_2),
                (4, kernel.free_sgprs.at_least_4, kernel.free_vgprs.at_least_4),
            ] {
                *self.instructions_with_free_sgprs.entry(n).or_default() += s * weight;
                *self.instructions_with_free_vgprs.entry(n).or_default() += v * weight;
            }
        }
    }

    fn finish(&mut self) {
        let total = self.instructions.max(1) as f64;
        for value in
            self.instructions_with_free_sgprs.values_mut().chain(self.instructions_with_free_vgprs.values_mut())
        {
            *value /= total;
        }
    }

    pub fn render_text(&self) -> String {
        let share = |n: usize| format!("{:6.2}%", 100.0 * n as f64 / self.kernels.max(1) as f64);
        let mut out = String::new();
        writeln!(
            out,
            "target {}: {} code objects, {} kernels, {} instructions ({:.1} s)",
            self.target, self.code_objects, self.kernels, self.instructions, self.seconds
        )
        .unwrap();
        for (what, classes) in [("stack base (2 SGPRs)", &self.stack_base), ("SVA (1 VGPR)", &self.sva)] {
            writeln!(out, "{what}:").unwrap();
            let mut cumulative = 0;
            for class in [
                Availability::GloballyFree,
                Availability::LargerAllocation,
                Availability::MovingBetweenFreeRegisters,
                Availability::NeedsSpilling,
            ] {
                let count = classes.get(&class).copied().unwrap_or(0);
                cumulative += count;
                writeln!(
                    out,
                    "  {:48} {count:7} {}  (cumulative {})",
                    class.describe(),
                    share(count),
                    share(cumulative)
                )
                .unwrap();
            }
        }
        writeln!(
            out,
            "2 SGPRs or 1 VGPR (seed 000's reduced requirement): globally {}, with a larger allocation {}",
            share(self.paper_requirement_globally),
            share(self.paper_requirement_with_larger_allocation)
        )
        .unwrap();
        writeln!(out, "SVA placed by stage sva (allocations as they are):").unwrap();
        for kind in [
            SvaPlacementKind::FreeVgpr,
            SvaPlacementKind::FreeAgpr,
            SvaPlacementKind::Sliding { move_points: 0 },
            SvaPlacementKind::WaveSlot,
            SvaPlacementKind::Unplaced,
        ] {
            let count = self.sva_placements.get(kind.class()).copied().unwrap_or(0);
            writeln!(out, "  {:48} {count:7} {}", kind.class(), share(count)).unwrap();
        }
        if !self.sliding_move_points.is_empty() {
            let mut points = self.sliding_move_points.clone();
            points.sort_unstable();
            writeln!(
                out,
                "  move points per sliding kernel: median {}, max {}",
                points[points.len() / 2],
                points[points.len() - 1]
            )
            .unwrap();
        }
        writeln!(out, "kernels with at least N globally free registers:").unwrap();
        for n in [1, 2, 4, 8] {
            writeln!(
                out,
                "  N = {n}: SGPRs {}  VGPRs {}",
                share(self.globally_free_sgprs_at_least.get(&n).copied().unwrap_or(0)),
                share(self.globally_free_vgprs_at_least.get(&n).copied().unwrap_or(0))
            )
            .unwrap();
        }
        writeln!(out, "instructions with at least N free registers:").unwrap();
        for n in [1, 2, 4] {
            writeln!(
                out,
                "  N = {n}: SGPRs {:6.2}%  VGPRs {:6.2}%",
                100.0 * self.instructions_with_free_sgprs.get(&n).copied().unwrap_or(0.0),
                100.0 * self.instructions_with_free_vgprs.get(&n).copied().unwrap_or(0.0)
            )
            .unwrap();
        }
        for failure in &self.failed_code_objects {
            writeln!(out, "failed: {failure}").unwrap();
        }
        out
    }
}

/// Analyses every code object of `target` in `files` on `jobs` threads.
pub fn corpus(
    files: &[PathBuf],
    target: Option<&str>,
    jobs: usize,
) -> Result<(Vec<CodeObjectReport>, CorpusSummary), crate::error::Error> {
    let start = std::time::Instant::now();
    let summary = Mutex::new(CorpusSummary { target: target.unwrap_or("all").to_string(), ..Default::default() });
    let reports = Mutex::new(Vec::new());
    for_each_on_threads(load_code_objects(files, target)?, jobs, |(file, code_object)| {
        match code_object_report(&code_object) {
            Ok(report) => {
                summary.lock().expect("summary").add(&report);
                reports.lock().expect("reports").push(report);
            }
            Err(error) => {
                summary.lock().expect("summary").failed_code_objects.push(format!("{}: {error}", file.display()))
            }
        }
    });
    let mut summary = summary.into_inner().expect("summary");
    summary.finish();
    summary.seconds = start.elapsed().as_secs_f64();
    let mut reports = reports.into_inner().expect("reports");
    reports.sort_by(|a, b| a.origin.cmp(&b.origin));
    Ok((reports, summary))
}
