//! Stage 9, patch: each payload goes before its instruction (after the
//! block's label, so branches to the instruction run it too); kernel
//! descriptors and metadata grow to cover every register the instrumented
//! code uses; the tool's globals the payloads use are defined.
//!
//! Kernels whose payloads read kernel arguments or use stack get a preamble
//! (preamble.rs) that fills the State Value Array; branches the inserted
//! code pushes out of reach become long jumps (relax.rs).

pub mod inserted;
pub mod preamble;
pub mod relax;

use rustc_hash::FxHashMap as HashMap;
use std::fmt::Write;
use std::sync::Arc;

use serde::Serialize;
use thiserror::Error;

use crate::stages::lift::reachable_functions;
use crate::stages::lift::{FunctionKind, LiftedCodeObject};
use crate::stages::liveness::allocation;
use crate::stages::liveness::{Liveness, RegisterFile, Unit, UnitSet};
use crate::stages::load::descriptor::{KernelDescriptor, RSRC1, RSRC3_GFX90A};
use crate::stages::load::instrumented::{global_table_assembly, ToolGlobalEntry};
use crate::stages::load::lines::{SourceLineNames, SourceLines};
use crate::stages::load::occupancy;
use crate::stages::load::processor::Processor;
use crate::stages::payload::PayloadPoint;
use crate::stages::payloads::{
    register_counts::{self, GlobalAddress},
    CodeLine, CompiledPayloads, LeftOutCause, LeftOutPoint, PayloadCode, ToolGlobal,
};
use crate::stages::sva::counts::CountPlacement;
use crate::stages::sva::SvaPlacement;
pub use inserted::Inserted;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PatchError {
    #[error("{kernel}: its argument-preload prologue cannot be written for the inputs the hooks need: {why}")]
    PreloadPrologue { kernel: String, why: String },
    #[error("{kernel}: the instrumented code needs {needed} {file}s; a wave can address {limit}")]
    TooManyRegisters { kernel: String, file: &'static str, needed: usize, limit: usize },
    #[error("{0}")]
    BranchOutOfRange(String),
}

/// Kernels that preload arguments and whose patched descriptor moves them
/// (hooks need user SGPRs the kernel did not receive) get their prologue
/// written again, to load the arguments where firmware that preloads now
/// puts them: on any firmware the preamble then finds them there. Returns
/// how many.
pub fn write_moved_prologues(lifted: &mut LiftedCodeObject<'_>, patch: &Patch) -> Result<usize, PatchError> {
    use crate::stages::lift::preload_prologue::{loads, write_loads};
    let Some(processor) = lifted.code_object.target.model() else { return Ok(0) };
    let mut written = 0;
    for number in 0..lifted.functions.len() {
        let function = &lifted.functions[number];
        let (FunctionKind::Kernel(index), true) = (function.kind, function.entry > 0) else { continue };
        let Some(descriptor) = patch.descriptors.get(&index) else { continue };
        let original = &lifted.code_object.kernels[index].descriptor;
        if loads(original, processor) == loads(descriptor, processor) {
            continue;
        }
        let kernel = function.name.clone();
        write_loads(lifted, number, &descriptor.clone()).map_err(|why| PatchError::PreloadPrologue { kernel, why })?;
        written += 1;
    }
    Ok(written)
}

/// What the patch stage changes in the emitted code object.
#[derive(Clone, Debug, Default)]
pub struct Patch {
    /// Assembly lines to put before the instruction at an address (after
    /// its block's label, so branches to it run them too), in pieces shared
    /// with the payloads they come from.
    pub before: HashMap<u64, Inserted>,
    /// Replacement descriptors, by index in `CodeObject::kernels`.
    pub descriptors: HashMap<usize, KernelDescriptor>,
    /// The metadata document to write instead of the input's.
    pub metadata: Option<rmpv::Value>,
    /// Assembly appended at the end (definitions of the tool's globals).
    pub appended: String,
    /// What `appended` is made of ([`appended`]): the tool's globals the
    /// payloads use, and the wave slots' indexing where a kernel keeps its
    /// SVA in them. Code patched in groups of kernels joins them.
    pub globals: Vec<ToolGlobal>,
    pub wave_slots: Option<crate::stages::sva::wave_slots::Indexing>,
    /// Branches that no longer reach their targets, emitted as long jumps.
    pub relaxed: HashMap<u64, relax::RelaxedBranch>,
    /// The instrumentation points in site order (`text` is the opcode's
    /// name until emit writes the instruction's assembly there).
    pub points: Vec<crate::stages::load::instrumented::PointEntry>,
    /// The kernels whose dispatches may run points that were left out.
    pub partial: Vec<crate::stages::load::instrumented::PartialKernel>,
}

/// What the patch did to one kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KernelPatch {
    pub name: String,
    /// Instrumentation points in the kernel and the device functions it reaches.
    pub sites: usize,
    /// Instructions added by those points.
    pub instructions_added: usize,
    /// VGPRs a wave may use, before and after (gfx90a: the VGPR part of the
    /// unified file, up to ACCUM_OFFSET or all of it in a kernel without AGPRs).
    pub vgprs: (usize, usize),
    /// AGPRs the code uses (0: none).
    pub agprs: (usize, usize),
    /// SGPRs the kernel may use (extra SGPRs for VCC, flat scratch, XNACK not counted).
    pub sgprs: (usize, usize),
    /// The vector registers of a wave's allocation (gfx90a's unified file),
    /// what occupancy follows.
    pub vector_allocation: (usize, usize),
    /// Waves of the kernel one SIMD holds (occupancy), before and after.
    pub waves_per_simd: (usize, usize),
    pub stack_bytes: (u32, u32),
    /// What changed in the descriptor and why, one line each.
    pub changes: Vec<String>,
    /// Branches turned into long jumps because inserted code pushed their
    /// targets out of reach.
    pub branches_relaxed: usize,
    /// Points where the SVA (or the work-item ids) moves to another VGPR
    /// (sliding placement, stage sva).
    pub sva_moves: usize,
    /// The SVA is kept in the wave's slot in memory (stage sva's last
    /// resort): each payload reading it loads it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub sva_in_memory: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PatchReport {
    pub kernels: Vec<KernelPatch>,
    pub globals: Vec<String>,
    /// Selected points left out, and why.
    pub left_out: Vec<LeftOutPoint>,
    /// How many points the DWARF line table names `file:line`.
    pub source_lines: SourceLineNames,
}

/// A kernel's allocation before and after, and who uses what.
struct RegisterChange<'a> {
    vgprs: (usize, usize),
    agprs: (usize, usize),
    sgprs: (usize, usize),
    vector_allocation: (usize, usize),
    waves: (usize, usize),
    stack: usize,
    by_payloads: &'a UnitSet,
    by_preamble: &'a UnitSet,
    unified_register_file: bool,
}

/// One line per change of a kernel's registers and stack, saying why.
fn register_changes(change: &RegisterChange<'_>) -> Vec<String> {
    let highest = |set: &UnitSet, file: RegisterFile| set.in_file(file).iter().map(|u| u.index() as usize).max();
    let users = |file: RegisterFile, from: usize, prefix: &str| -> String {
        let mut who = Vec::new();
        for (name, set) in [("payloads", change.by_payloads), ("the preamble", change.by_preamble)] {
            if let Some(top) = highest(set, file).filter(|t| *t >= from) {
                who.push(format!("{name} use up to {prefix}{top}"));
            }
        }
        if who.is_empty() {
            "the instrumentation's registers".to_string()
        } else {
            who.join(", ")
        }
    };
    let mut lines = Vec::new();
    let (v0, v1) = change.vgprs;
    if v1 != v0 {
        let moved_only = change.unified_register_file && change.vector_allocation.0 == change.vector_allocation.1;
        let note = if moved_only { " (ACCUM_OFFSET moves; the unified allocation stays the same)" } else { "" };
        lines.push(format!("VGPRs {v0} -> {v1}: {}{note}", users(RegisterFile::Vgpr, v0, "v")));
    }
    let (a0, a1) = change.agprs;
    if a1 != a0 {
        lines.push(format!("AGPRs used {a0} -> {a1}: {}", users(RegisterFile::Agpr, a0, "a")));
    }
    let (s0, s1) = change.sgprs;
    if s1 != s0 {
        let why = if highest(change.by_payloads, RegisterFile::Sgpr).is_some_and(|t| t >= s0)
            || highest(change.by_preamble, RegisterFile::Sgpr).is_some_and(|t| t >= s0)
        {
            users(RegisterFile::Sgpr, s0, "s")
        } else {
            "the instrumentation uses VCC or flat scratch, whose SGPRs sit at the top of the allocation".into()
        };
        lines.push(format!("SGPRs {s0} -> {s1}: {why}"));
    }
    let (r0, r1) = change.vector_allocation;
    let (w0, w1) = change.waves;
    if r1 != r0 || w1 != w0 {
        let cost = if w1 < w0 {
            format!("occupancy drops from {w0} to {w1} waves per SIMD")
        } else {
            format!("no occupancy cost ({w1} waves per SIMD either way)")
        };
        lines.push(format!("vector register allocation {r0} -> {r1}: {cost}"));
    }
    if change.stack > 0 {
        lines.push(format!("stack +{} bytes: the payloads' stack frames (spills, hook locals)", change.stack));
    }
    lines
}

/// The registers an assembly line names (`s4`, `v[2:3]`, `a7`...).
fn registers_named(line: &str) -> UnitSet {
    let mut units = UnitSet::EMPTY;
    let operands = line.split_once(' ').map_or("", |(_, rest)| rest);
    for token in operands.split([',', ' ']).filter(|t| !t.is_empty()) {
        let Some(file) = token.chars().next().filter(|c| matches!(c, 's' | 'v' | 'a')) else { continue };
        let rest = &token[1..];
        let (first, last) = match rest.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            Some(range) => match range.split_once(':') {
                Some((a, b)) => (a.parse::<u16>(), b.parse::<u16>()),
                None => continue,
            },
            None => (rest.parse::<u16>(), rest.parse::<u16>()),
        };
        let (Ok(first), Ok(last)) = (first, last) else { continue };
        for index in first..=last {
            units.insert(match file {
                's' => Unit::sgpr(index),
                'v' => Unit::vgpr(index),
                _ => Unit::agpr(index),
            });
        }
    }
    units
}

/// Instructions in a payload's code (labels excluded).
fn instruction_count(code: &[CodeLine]) -> usize {
    code.iter().filter(|l| !l.ends_with(':')).count()
}

/// The code spliced for one payload, appended to `lines`: gfx9 hazards
/// across the splice are covered with wait states (`s_nop 4`: five), before
/// it (the application's last instruction may be a VALU write the payload's
/// first reads need) and after it when it ends with a vector instruction.
/// Returns how many `s_nop`s it took.
fn splice_into(lines: &mut Inserted, code: &PayloadCode, nop: &PayloadCode) -> usize {
    lines.push(nop.clone());
    lines.push(code.clone());
    let last = code.iter().rev().find(|l| !l.ends_with(':') && !l.starts_with("s_waitcnt"));
    if last.is_some_and(|l| l.starts_with("v_")) {
        lines.push(nop.clone());
        return 2;
    }
    1
}

/// The tool's globals as definitions the host can look up, with the tool's initial values.
/// A `__managed__` one is a pointer: it is initialised with the address of
/// its storage (a relocation the loader applies), which is defined too.
fn global_definitions(globals: &[ToolGlobal]) -> String {
    let mut out = String::new();
    if globals.is_empty() {
        return out;
    }
    let symbol = |name: &str| {
        if name.chars().all(|c| c.is_ascii_alphanumeric() || "_.$".contains(c)) {
            name.to_string()
        } else {
            format!("\"{name}\"")
        }
    };
    // Protected, as compilers make device globals: the host finds them by
    // name, and code here reaches them pc-relatively. (Not a managed
    // global's storage: the loader points the global at it by name.)
    let define = |out: &mut String, name: &str, alignment: u32, body: &str, size: u64, protected: bool| {
        writeln!(out, "\t.globl\t{name}").unwrap();
        if protected {
            writeln!(out, "\t.protected\t{name}").unwrap();
        }
        writeln!(out, "\t.type\t{name},@object").unwrap();
        writeln!(out, "\t.p2align\t{}", alignment.max(1).trailing_zeros()).unwrap();
        writeln!(out, "{name}:\n{body}\t.size\t{name}, {size}").unwrap();
    };
    // Zero data in .bss; data with a value from the tool in .data.
    let body = |initial: &Option<Vec<u8>>, size: u64| match initial {
        None => format!("\t.zero\t{size}\n"),
        Some(bytes) => {
            format!("\t.byte\t{}\n", bytes.iter().map(|b| b.to_string()).collect::<Vec<_>>().join(", "))
        }
    };
    for (section, with_value) in [(".bss.gpuinstr,\"aw\",@nobits", false), (".data.gpuinstr,\"aw\",@progbits", true)] {
        let chosen: Vec<&ToolGlobal> = globals.iter().filter(|g| g.initial.is_some() == with_value).collect();
        if chosen.is_empty() {
            continue;
        }
        writeln!(out, "\n\t.section\t{section}").unwrap();
        for global in chosen {
            let (name, size, alignment) = global.data();
            let size = size.max(1);
            let protected = global.managed_storage.is_none();
            define(&mut out, &symbol(name), alignment, &body(&global.initial, size), size, protected);
        }
    }
    let pointers: Vec<&ToolGlobal> = globals.iter().filter(|g| g.managed_storage.is_some()).collect();
    if !pointers.is_empty() {
        writeln!(out, "\n\t.section\t.data.gpuinstr,\"aw\",@progbits").unwrap();
        for global in pointers {
            let storage = global.managed_storage.as_ref().expect("filtered");
            let body = format!("\t.quad\t{}\n", symbol(&storage.name));
            define(&mut out, &symbol(&global.name), global.alignment.max(8), &body, 8, true);
        }
    }
    out
}

/// The tool-global table's entries: for a managed global, its storage.
/// What the patched code object gets after its code: the tool's globals
/// (defined, or left external: the references stay undefined symbols
/// reached through the GOT, which a loader defines with
/// hsa_executable_agent_global_variable_define), the table saying which
/// symbols are the tool's data, and the wave slots where code keeps its SVA
/// there (`across_parts`: code assembled apart reaches them, by a hidden
/// global name rather than a local one).
pub fn appended(
    globals: &[ToolGlobal],
    define_globals: bool,
    wave_slots: Option<crate::stages::sva::wave_slots::Indexing>,
    across_parts: bool,
) -> String {
    let mut out = String::new();
    if define_globals {
        out = global_definitions(globals);
    }
    if !globals.is_empty() {
        out.push_str(&global_table_assembly(&global_table(globals)));
    }
    if let Some(indexing) = wave_slots {
        out.push_str(&crate::stages::sva::wave_slots::definition(indexing, across_parts));
    }
    out
}

fn global_table(globals: &[ToolGlobal]) -> Vec<ToolGlobalEntry> {
    globals
        .iter()
        .map(|g| {
            let (symbol, size, _) = g.data();
            let managed = g.managed_storage.is_some();
            let (records, ring) = (g.records.clone(), g.ring);
            ToolGlobalEntry { symbol: symbol.to_string(), tool_name: g.tool_name.clone(), size, managed, records, ring }
        })
        .collect()
}

fn round_up(value: usize, granule: usize) -> usize {
    value.div_ceil(granule) * granule
}

/// Sets a field of a kernel's metadata map.
fn set_metadata(document: &mut rmpv::Value, kernel_name: &str, key: &str, value: u64) {
    let rmpv::Value::Map(map) = document else { return };
    let Some((_, rmpv::Value::Array(kernels))) = map.iter_mut().find(|(k, _)| k.as_str() == Some("amdhsa.kernels"))
    else {
        return;
    };
    for kernel in kernels {
        let rmpv::Value::Map(fields) = kernel else { continue };
        if !fields.iter().any(|(k, v)| k.as_str() == Some(".name") && v.as_str() == Some(kernel_name)) {
            continue;
        }
        match fields.iter_mut().find(|(k, _)| k.as_str() == Some(key)) {
            Some((_, old)) => *old = rmpv::Value::from(value),
            None => fields.push((rmpv::Value::from(key), rmpv::Value::from(value))),
        }
    }
}

fn register_limit(
    processor: &Processor,
    code_object: &crate::stages::load::CodeObject,
    kernel: usize,
) -> (usize, usize) {
    let workgroup = code_object.kernels[kernel].metadata.max_flat_workgroup_size as u32;
    crate::stages::load::occupancy::wave_register_limit(processor, workgroup)
}

/// What each point (in site order) stands for, for the point table, and
/// how many of them the DWARF line table names.
fn point_entries(
    lifted: &LiftedCodeObject<'_>,
    points: &[PayloadPoint],
) -> (Vec<crate::stages::load::instrumented::PointEntry>, SourceLineNames) {
    let (lines, mut names) = match SourceLines::read(lifted.code_object) {
        Ok(Some(lines)) => (Some(lines), SourceLineNames::Named { named: 0, points: points.len() }),
        Ok(None) => (None, SourceLineNames::NoLineTable),
        Err(problem) => (None, SourceLineNames::Unreadable { problem: problem.to_string() }),
    };
    // Each function's instructions and name, and each opcode's name, once.
    let mut functions: HashMap<usize, (Vec<&crate::stages::lift::Instruction>, Arc<str>)> = HashMap::default();
    let mut opcodes: HashMap<u32, Arc<str>> = HashMap::default();
    let nowhere: Arc<str> = Arc::from("");
    let entries = points
        .iter()
        .map(|point| {
            let function = &lifted.functions[point.function];
            let (list, name) = functions
                .entry(point.function)
                .or_insert_with(|| (function.instructions().collect(), Arc::from(function.name.as_str())));
            let instruction = list[point.instruction];
            let opcode_name =
                opcodes.entry(instruction.opcode).or_insert_with(|| Arc::from(instruction.name(&lifted.isa))).clone();
            let location = lines.as_ref().and_then(|l| l.at(instruction.address));
            crate::stages::load::instrumented::PointEntry {
                address: instruction.address,
                opcode: instruction.opcode,
                function: name.clone(),
                text: opcode_name.clone(),
                opcode_name,
                location: location.map_or_else(|| nowhere.clone(), Arc::from),
                left_out: false,
            }
        })
        .collect::<Vec<_>>();
    if let SourceLineNames::Named { named, .. } = &mut names {
        *named = entries.iter().filter(|e| !e.location.is_empty()).count();
    }
    (entries, names)
}

/// Splices the payloads and grows what must grow.
pub fn patch(
    lifted: &LiftedCodeObject<'_>,
    liveness: &Liveness,
    points: &[PayloadPoint],
    compiled: &CompiledPayloads,
    placement: &SvaPlacement,
    counts: &CountPlacement,
    define_globals: bool,
) -> Result<(Patch, PatchReport), PatchError> {
    let code_object = lifted.code_object;
    let processor = liveness.processor;
    // One file for VGPRs and AGPRs, split at ACCUM_OFFSET (gfx90a, gfx940+).
    let unified = processor.has_unified_register_file();
    let mut patch = Patch { metadata: Some(code_object.metadata.document.clone()), ..Patch::default() };
    let mut report = PatchReport::default();
    (patch.points, report.source_lines) = point_entries(lifted, points);

    // Where each instruction's payload goes, per function: before the
    // instruction, except inside a pc-relative computation, where code
    // between `s_getpc_b64` and the literal that counts from it would change
    // the address it computes: there, before the `s_getpc_b64`.
    let addresses: Vec<Vec<u64>> = lifted
        .functions
        .iter()
        .map(|f| f.instructions().map(|i| i.pc_relative.as_ref().map_or(i.address, |pc| pc.getpc)).collect())
        .collect();
    // What the instrumentation in each function writes, and how much it adds.
    let mut writes: HashMap<usize, UnitSet> = HashMap::default();
    // And everything it reads or writes (implicit operands included).
    let mut touches: HashMap<usize, UnitSet> = HashMap::default();
    let mut added: HashMap<usize, (usize, usize, u32)> = HashMap::default();
    // Bytes inserted before each address (for branch reach).
    let mut inserted: HashMap<u64, usize> = HashMap::default();
    // The registers a wave of each kernel may have, from its work-group bound.
    let limits: HashMap<usize, (usize, usize)> = lifted
        .functions
        .iter()
        .enumerate()
        .filter_map(|(index, f)| match f.kind {
            FunctionKind::Kernel(kernel) => Some((index, register_limit(processor, code_object, kernel))),
            FunctionKind::DeviceFunction => None,
        })
        .collect();
    // Per kernel: the VGPRs and AGPRs its allocation holds as it grows with
    // the accepted payloads, and the vector allocation it may grow to.
    let mut grown: HashMap<usize, (usize, usize)> = HashMap::default();
    let mut caps: HashMap<usize, usize> = HashMap::default();
    for (index, function) in lifted.functions.iter().enumerate() {
        let FunctionKind::Kernel(kernel) = function.kind else { continue };
        let touched = &liveness.functions[index].touched;
        let allocated = allocation(code_object, &code_object.kernels[kernel], touched);
        let agprs_used = touched.in_file(RegisterFile::Agpr).iter().map(|u| u.index() as usize + 1).max().unwrap_or(0);
        let agprs = if unified && agprs_used > 0 { allocated.agprs.len() } else { agprs_used };
        let vgprs = if unified && agprs_used == 0 {
            allocated.vgprs.len() + allocated.agprs.len()
        } else {
            allocated.vgprs.len()
        };
        grown.insert(index, (vgprs, agprs));
        let current = occupancy::vector_allocation(processor, vgprs, agprs);
        let cap = placement.functions.get(&index).map_or(0, |r| usize::from(r.allocation_cap));
        caps.insert(index, cap.max(current));
    }
    let kernels_reaching: HashMap<usize, Vec<usize>> = {
        let mut map: HashMap<usize, Vec<usize>> = HashMap::default();
        for kernel in limits.keys() {
            for f in reachable_functions(lifted, *kernel) {
                map.entry(f).or_default().push(*kernel);
            }
        }
        map
    };
    // Each kernel's preamble, decided before any code is spliced: a payload
    // that needs the SVA or stack goes in only where every kernel that can
    // reach it has one.
    let mut needs: HashMap<usize, preamble::Needs> = HashMap::default();
    for (point, payload) in points.iter().zip(&compiled.payloads) {
        if payload.rejected.is_some() || (payload.kernel_arguments.is_empty() && payload.scratch_bytes == 0) {
            continue;
        }
        for kernel in kernels_reaching.get(&point.function).into_iter().flatten() {
            let entry = needs.entry(*kernel).or_default();
            entry.arguments.extend(payload.kernel_arguments.iter().copied());
            entry.stack_bytes = entry.stack_bytes.max(payload.scratch_bytes);
        }
    }
    let mut preambles: HashMap<usize, Result<preamble::Preamble, String>> = HashMap::default();
    for (kernel, mut kernel_needs) in needs {
        let FunctionKind::Kernel(index) = lifted.functions[kernel].kind else { continue };
        let registers = placement.functions.get(&kernel);
        let problem = placement.kernels.iter().find(|p| p.kernel == kernel).and_then(|p| p.problem.clone());
        let live = &liveness.functions[kernel].live_in[lifted.functions[kernel].entry];
        kernel_needs.free_sgprs = (0..102u16).filter(|s| !live.contains(Unit::sgpr(*s))).collect();
        let outcome = match registers.map(|r| (r.sva, r.work_item_ids, r.in_agprs)) {
            Some((Some(sva), work_item_ids, _)) => {
                kernel_needs.sva = sva;
                kernel_needs.work_item_ids = work_item_ids;
                preamble::build(&code_object.kernels[index], &kernel_needs, processor)
            }
            Some((None, _, Some(homes))) => {
                // Built in VGPRs dead at the entry, then copied to the AGPRs.
                // Inside the allocation, else (growing) past it.
                let limit = registers.map_or(0, |r| r.vgpr_limit);
                let past = registers.map_or(limit, |r| r.payload_vgprs.max(limit));
                let mut dead = (0..limit).rev().chain(limit..past).filter(|v| !live.contains(Unit::vgpr(*v)));
                match (dead.next(), dead.next()) {
                    (Some(sva), ids) if ids.is_some() || homes.work_item_ids.is_none() => {
                        kernel_needs.sva = sva;
                        kernel_needs.work_item_ids = homes.work_item_ids.and(ids);
                        kernel_needs.agprs = Some((homes.sva, homes.work_item_ids));
                        preamble::build(&code_object.kernels[index], &kernel_needs, processor)
                    }
                    _ => Err("no VGPR is dead at the kernel's entry to build the State Value Array in".into()),
                }
            }
            Some((None, _, None)) if registers.is_some_and(|r| r.in_wave_slot.is_some()) => {
                // Built in VGPRs dead at the entry and stored in the wave's
                // slot through a third.
                let homes = registers.and_then(|r| r.in_wave_slot).expect("matched");
                let limit = registers.map_or(0, |r| r.vgpr_limit);
                let past = registers.map_or(limit, |r| r.payload_vgprs.max(limit));
                let mut dead = (0..limit).rev().chain(limit..past).filter(|v| !live.contains(Unit::vgpr(*v)));
                let (sva, address) = (dead.next(), dead.next());
                let ids = if homes.work_item_ids { dead.next() } else { None };
                match (sva, address) {
                    (Some(sva), Some(address)) if ids.is_some() || !homes.work_item_ids => {
                        kernel_needs.sva = sva;
                        kernel_needs.work_item_ids = ids;
                        kernel_needs.wave_slot = Some(address);
                        preamble::build(&code_object.kernels[index], &kernel_needs, processor)
                    }
                    _ => Err("too few VGPRs are dead at the kernel's entry to build the State Value Array in".into()),
                }
            }
            _ => Err(problem.unwrap_or_else(|| "the State Value Array has no register in this kernel".into())),
        };
        preambles.insert(kernel, outcome);
    }

    let nop = PayloadCode::from([CodeLine::from("s_nop 4")]);
    for (index, (point, payload)) in points.iter().zip(&compiled.payloads).enumerate() {
        let mut leave_out = |cause, why| {
            let entry = &mut patch.points[index];
            entry.left_out = true;
            let (point, function) = (payload.label.to_string(), entry.function.to_string());
            report.left_out.push(LeftOutPoint { point, function, kernels: Vec::new(), cause, why });
        };
        if let Some(reason) = &payload.rejected {
            leave_out(reason.cause, reason.message.clone());
            continue;
        }
        let highest =
            |file: RegisterFile| payload.writes.in_file(file).iter().map(|u| u.index() as usize + 1).max().unwrap_or(0);
        let (vgprs, agprs) = (highest(RegisterFile::Vgpr), highest(RegisterFile::Agpr));
        // The kernel's allocation with everything accepted so far and this
        // payload must stay within what its growth policy and its
        // work-group bound allow (LLVM may also put payload values in AGPRs).
        let over = kernels_reaching.get(&point.function).into_iter().flatten().find_map(|kernel| {
            let (v, a) = grown[kernel];
            let (v, a) = (v.max(vgprs), a.max(agprs));
            let needed = occupancy::vector_allocation(processor, v, a);
            let cap = caps[kernel];
            (needed > cap).then_some((*kernel, v, a, needed, cap))
        });
        if let Some((kernel, v, a, needed, cap)) = over {
            let (_, total_limit) = limits[&kernel];
            let why = if cap >= total_limit {
                format!("past the {total_limit} registers a wave may have with the kernel's work-group size")
            } else {
                format!("past the {cap} registers the kernel's allocation may grow to (--grow-registers)")
            };
            leave_out(
                LeftOutCause::RegisterLimit,
                format!(
                    "with this payload {} would need {v} VGPRs and {a} AGPRs, {needed} vector registers, {why}",
                    lifted.functions[kernel].name
                ),
            );
            continue;
        }
        for kernel in kernels_reaching.get(&point.function).into_iter().flatten() {
            let entry = grown.get_mut(kernel).expect("every kernel has an entry");
            *entry = (entry.0.max(vgprs), entry.1.max(agprs));
        }
        if !payload.kernel_arguments.is_empty() || payload.scratch_bytes > 0 {
            let missing =
                kernels_reaching.get(&point.function).into_iter().flatten().find_map(|kernel| {
                    match preambles.get(kernel) {
                        Some(Ok(_)) => None,
                        Some(Err(why)) => Some(format!("{}: {why}", lifted.functions[*kernel].name)),
                        None => Some(format!("{}: no preamble", lifted.functions[*kernel].name)),
                    }
                });
            if let Some(why) = missing {
                leave_out(LeftOutCause::NoSvaRegister, format!("the payload needs the kernel preamble, and {why}"));
                continue;
            }
        }
        // Counting in registers reads and writes only registers the
        // application never touches, and neither VCC nor memory: no hazard
        // crosses its edges.
        let address = addresses[point.function][point.instruction];
        let before = patch.before.entry(address).or_default();
        let nops = match compiled.counted.contains(&index) {
            true => {
                before.push(payload.code.clone());
                0
            }
            false => splice_into(before, &payload.code, &nop),
        };
        // Bytes: the payload's own, and 4 per wait-state nop around it.
        *inserted.entry(address).or_default() += payload.bytes + 4 * nops;
        let entry = added.entry(point.function).or_default();
        entry.0 += 1;
        entry.1 += instruction_count(&payload.code) + nops;
        entry.2 = entry.2.max(payload.scratch_bytes);
        writes.entry(point.function).or_insert(UnitSet::EMPTY).union_with(&payload.writes);
        touches.entry(point.function).or_insert(UnitSet::EMPTY).union_with(&payload.touches);
    }

    // Sliding values move before the payloads at the same point (where a
    // preamble filled them: payloads that read no SVA need no moves).
    let mut sva_moves: HashMap<usize, usize> = HashMap::default();
    for (function, slid) in &placement.sliding {
        let filled = preambles.get(function).is_some_and(Result::is_ok);
        if !filled || added.get(function).is_none_or(|(sites, _, _)| *sites == 0) {
            continue;
        }
        for index in slid.exec_pairs.keys() {
            let code = slid.code_before(*index);
            let address = addresses[*function][*index];
            *inserted.entry(address).or_default() += 4 * code.len();
            let entry = added.entry(*function).or_default();
            entry.1 += code.len();
            let w = writes.entry(*function).or_insert(UnitSet::EMPTY);
            for line in &code {
                w.union_with(&registers_named(line));
            }
            patch.before.entry(address).or_default().push_front(code.into_iter().map(CodeLine::from).collect());
            *sva_moves.entry(*function).or_default() += 1;
        }
    }

    // A count kept in registers: cleared at the kernel's entry (after the
    // preamble, which is spliced in front later), added to the global
    // after everything else before each s_endpgm.
    if let Some(global) = compiled.globals.iter().find(|g| g.tool_name == counts.global) {
        let managed = global.managed_storage.is_some();
        for (kernel, (registers, exits)) in &counts.kernels {
            if added.get(kernel).is_none_or(|(sites, _, _)| *sites == 0) {
                continue;
            }
            let entry = addresses[*kernel][0];
            let mut code = Vec::new();
            if !compiled.counts_set_at_entry.contains(kernel) {
                code.push((entry, register_counts::entry_code(*registers), true));
            }
            // Defined here, the global is protected: reached pc-relatively.
            let address = if define_globals { GlobalAddress::PcRelative } else { GlobalAddress::Got };
            for exit in exits {
                let lines = register_counts::exit_code(
                    *registers,
                    &global.name,
                    address,
                    managed,
                    &exit.vgprs,
                    processor.architected_flat_scratch,
                );
                code.push((addresses[*kernel][exit.instruction], lines, false));
            }
            for (address, lines, first) in code {
                // At most 8 bytes an instruction (SALU with a literal, VOP3).
                *inserted.entry(address).or_default() += 8 * lines.len();
                added.entry(*kernel).or_default().1 += lines.len();
                let w = writes.entry(*kernel).or_insert(UnitSet::EMPTY);
                for line in &lines {
                    w.union_with(&registers_named(line));
                }
                let before = patch.before.entry(address).or_default();
                let lines = lines.into_iter().map(CodeLine::from).collect();
                match first {
                    true => before.push_front(lines),
                    false => before.push(lines),
                }
            }
        }
    }

    // Branches the inserted code pushes out of reach become long jumps
    // (preambles: at most 8 bytes an instruction, SALU with a literal or
    // v_writelane).
    let mut reach = inserted;
    for (kernel, preamble) in &preambles {
        if let Ok(preamble) = preamble {
            *reach.entry(lifted.functions[*kernel].entry_address()).or_default() += 8 * preamble.code.len();
        }
    }
    patch.relaxed = relax::relax(lifted, liveness, &reach, 102).map_err(PatchError::BranchOutOfRange)?;
    let mut relaxed_in: HashMap<usize, usize> = HashMap::default();
    for branch in patch.relaxed.values() {
        let pair = writes.entry(branch.function).or_insert(UnitSet::EMPTY);
        pair.insert(Unit::sgpr(branch.pair));
        pair.insert(Unit::sgpr(branch.pair + 1));
        *relaxed_in.entry(branch.function).or_default() += 1;
    }

    for (function_index, function) in lifted.functions.iter().enumerate() {
        let FunctionKind::Kernel(kernel_index) = function.kind else { continue };
        let reached = reachable_functions(lifted, function_index);
        let mut used = UnitSet::EMPTY;
        let mut touched_by_payloads = UnitSet::EMPTY;
        let (mut sites, mut instructions, mut stack) = (0, 0, 0u32);
        let branches_relaxed: usize = reached.iter().filter_map(|f| relaxed_in.get(f)).sum();
        for f in &reached {
            if let Some(w) = writes.get(f) {
                used.union_with(w);
            }
            if let Some(t) = touches.get(f) {
                touched_by_payloads.union_with(t);
            }
            if let Some((s, i, b)) = added.get(f) {
                sites += s;
                instructions += i;
                stack = stack.max(*b);
            }
        }
        let by_payloads = used;
        let mut by_preamble = UnitSet::EMPTY;
        let preamble = preambles.get(&function_index).and_then(|p| p.as_ref().ok());
        if let Some(preamble) = preamble {
            for line in &preamble.code {
                by_preamble.union_with(&registers_named(line));
            }
            used.union_with(&by_preamble);
            let lines = patch.before.entry(function.entry_address()).or_default();
            // A payload spliced at the entry starts with the same wait states.
            let mut code = preamble.code.as_slice();
            if code.last().map(String::as_str) == Some("s_nop 4") && lines.first_line().map(|l| &**l) == Some("s_nop 4")
            {
                code = &code[..code.len() - 1];
            }
            instructions += code.len();
            lines.push_front(code.iter().map(|l| CodeLine::from(l.as_str())).collect());
        }
        if sites == 0 && used.is_empty() {
            continue;
        }
        let kernel = &code_object.kernels[kernel_index];
        let touched = &liveness.functions[function_index].touched;
        let before = allocation(code_object, kernel, touched);
        let highest = |file: RegisterFile| used.in_file(file).iter().map(|u| u.index() as usize + 1).max().unwrap_or(0);
        let touched_highest =
            |file: RegisterFile| touched.in_file(file).iter().map(|u| u.index() as usize + 1).max().unwrap_or(0);
        let (vgprs_before, agprs_before, sgprs_before) = (before.vgprs.len(), before.agprs.len(), before.sgprs.len());
        let vgprs_needed = vgprs_before.max(highest(RegisterFile::Vgpr));
        let agprs_needed = agprs_before.max(highest(RegisterFile::Agpr));
        let sgprs_needed = sgprs_before.max(highest(RegisterFile::Sgpr));
        // The extra SGPRs (VCC, flat scratch) sit at the top of the
        // allocation: instrumentation that starts using VCC takes two
        // SGPRs from what the application had.
        let mut touched_after = *touched;
        touched_after.union_with(&used);
        touched_after.union_with(&touched_by_payloads);
        let sgprs_available = allocation(code_object, kernel, &touched_after).sgprs.len();
        let name = kernel.name().to_string();
        let limit = |file: &'static str, needed: usize, max: usize| {
            if needed > max {
                Err(PatchError::TooManyRegisters { kernel: name.clone(), file, needed, limit: max })
            } else {
                Ok(())
            }
        };
        limit("VGPR", vgprs_needed, 256)?;
        limit("SGPR", sgprs_needed, 102)?;

        let mut descriptor: KernelDescriptor =
            preamble.map_or_else(|| kernel.descriptor.clone(), |p| p.descriptor.clone());
        let set1 = |d: &mut KernelDescriptor, field: &str, value: u32| {
            let f = *RSRC1.iter().find(|f| f.name == field).expect("RSRC1 field");
            d.compute_pgm_rsrc1 = f.set(d.compute_pgm_rsrc1, value);
        };
        let (vgprs_after, agprs_after) = if unified {
            // One file: [0, ACCUM_OFFSET) VGPRs, then the AGPRs.
            let uses_agprs = touched_highest(RegisterFile::Agpr) > 0 || highest(RegisterFile::Agpr) > 0;
            let accum = round_up(vgprs_needed.max(1), 4);
            let agprs = if uses_agprs { agprs_needed } else { 0 };
            let total = round_up(accum + agprs, 8).max(vgprs_before + agprs_before);
            let agprs = total - accum;
            set1(&mut descriptor, "GRANULATED_WORKITEM_VGPR_COUNT", (total / 8 - 1) as u32);
            let f = *RSRC3_GFX90A.iter().find(|f| f.name == "ACCUM_OFFSET").expect("ACCUM_OFFSET");
            descriptor.compute_pgm_rsrc3 = f.set(descriptor.compute_pgm_rsrc3, (accum / 4 - 1) as u32);
            (accum, agprs)
        } else {
            let total = round_up(vgprs_needed.max(agprs_needed).max(1), 4);
            set1(&mut descriptor, "GRANULATED_WORKITEM_VGPR_COUNT", (total / 4 - 1) as u32);
            (total, total)
        };
        // SGPRs: the allocation also holds the extra SGPRs (VCC, XNACK mask,
        // flat scratch); 6 covers all of them.
        // The application's own SGPRs count too: instrumentation that
        // starts using flat instructions (FLAT_SCRATCH) or VCC takes extra
        // SGPRs from the top of the allocation the application used.
        let sgprs_highest = highest(RegisterFile::Sgpr).max(touched_highest(RegisterFile::Sgpr));
        if sgprs_highest > sgprs_available {
            let blocks = (sgprs_highest + 6).div_ceil(8).min(16) as u32;
            let old = descriptor.rsrc1("GRANULATED_WAVEFRONT_SGPR_COUNT");
            set1(&mut descriptor, "GRANULATED_WAVEFRONT_SGPR_COUNT", old.max(blocks - 1));
        }
        if preamble.is_none() {
            descriptor.private_segment_fixed_size += stack;
        }
        let after = crate::stages::load::Kernel { descriptor: descriptor.clone(), ..kernel.clone() };
        let sgprs_after = allocation(code_object, &after, &touched_after).sgprs.len();
        let sgpr_block = |d: &KernelDescriptor| (d.rsrc1("GRANULATED_WAVEFRONT_SGPR_COUNT") as usize + 1) * 8;
        let sgpr_blocks = (sgpr_block(&kernel.descriptor), sgpr_block(&descriptor));
        patch.descriptors.insert(kernel_index, descriptor);

        let metadata = patch.metadata.as_mut().expect("set above");
        let vgpr_count = kernel.metadata.vgpr_count.max(highest(RegisterFile::Vgpr) as u64);
        set_metadata(metadata, &name, ".vgpr_count", vgpr_count);
        if let Some(agpr_count) = kernel.metadata.agpr_count {
            set_metadata(metadata, &name, ".agpr_count", agpr_count.max(highest(RegisterFile::Agpr) as u64));
        }
        if kernel.metadata.sgpr_count < sgprs_needed as u64 {
            set_metadata(metadata, &name, ".sgpr_count", sgprs_needed as u64 + 6);
        }
        if stack > 0 {
            set_metadata(
                metadata,
                &name,
                ".private_segment_fixed_size",
                u64::from(kernel.descriptor.private_segment_fixed_size + stack),
            );
        }
        // What changed, in the terms occupancy follows.
        let agprs_used =
            (touched_highest(RegisterFile::Agpr), touched_highest(RegisterFile::Agpr).max(highest(RegisterFile::Agpr)));
        let vector_before = if unified { vgprs_before + agprs_before } else { vgprs_before };
        let vector_after = if unified { vgprs_after + agprs_after } else { vgprs_after };
        let waves = (
            occupancy::waves_per_simd(processor, vector_before, sgpr_blocks.0),
            occupancy::waves_per_simd(processor, vector_after, sgpr_blocks.1),
        );
        let changes = register_changes(&RegisterChange {
            vgprs: (vgprs_before, vgprs_after),
            agprs: agprs_used,
            sgprs: (sgprs_before, sgprs_after),
            vector_allocation: (vector_before, vector_after),
            waves,
            stack: stack as usize,
            by_payloads: &by_payloads,
            by_preamble: &by_preamble,
            unified_register_file: unified,
        });
        report.kernels.push(KernelPatch {
            name,
            sites,
            instructions_added: instructions,
            vgprs: (vgprs_before, vgprs_after),
            agprs: agprs_used,
            sgprs: (sgprs_before, sgprs_after),
            vector_allocation: (vector_before, vector_after),
            waves_per_simd: waves,
            stack_bytes: (
                kernel.descriptor.private_segment_fixed_size,
                kernel.descriptor.private_segment_fixed_size + stack,
            ),
            changes,
            branches_relaxed,
            sva_moves: sva_moves.get(&function_index).copied().unwrap_or(0),
            sva_in_memory: preamble.is_some()
                && placement.functions.get(&function_index).is_some_and(|r| r.in_wave_slot.is_some()),
        });
    }
    patch.globals = compiled.globals.clone();
    let slot_indexing = crate::stages::sva::wave_slots::Indexing::for_processor(processor);
    patch.wave_slots = slot_indexing.filter(|_| report.kernels.iter().any(|k| k.sva_in_memory));
    patch.appended = appended(&patch.globals, define_globals, patch.wave_slots, false);
    report.globals = compiled
        .globals
        .iter()
        .map(|g| {
            if g.name == g.tool_name {
                g.name.clone()
            } else {
                format!("{} (as {}: the application has a {})", g.tool_name, g.name, g.tool_name)
            }
        })
        .collect();
    Ok((patch, report))
}

impl Patch {
    /// The patch stage's text form (`gpuinstr-link instrument --dump-after
    /// patch`): the code that goes before each address, the descriptors
    /// replaced, branches relaxed, what is appended.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut addresses: Vec<&u64> = self.before.keys().collect();
        addresses.sort();
        for address in addresses {
            writeln!(out, "before {address:#x}:").unwrap();
            for line in self.before[address].lines() {
                writeln!(out, "  {line}").unwrap();
            }
        }
        let mut kernels: Vec<&usize> = self.descriptors.keys().collect();
        kernels.sort();
        for kernel in kernels {
            let d = &self.descriptors[kernel];
            writeln!(
                out,
                "descriptor of kernel {kernel}: private segment {} bytes, rsrc1 {:#x}, rsrc2 {:#x}, rsrc3 {:#x}, \
                 properties {:#x}",
                d.private_segment_fixed_size,
                d.compute_pgm_rsrc1,
                d.compute_pgm_rsrc2,
                d.compute_pgm_rsrc3,
                d.kernel_code_properties
            )
            .unwrap();
        }
        let mut relaxed: Vec<&u64> = self.relaxed.keys().collect();
        relaxed.sort();
        for address in relaxed {
            writeln!(out, "branch at {address:#x} relaxed to a long jump").unwrap();
        }
        writeln!(out, "metadata {}", if self.metadata.is_some() { "replaced" } else { "as it was" }).unwrap();
        if !self.appended.is_empty() {
            writeln!(out, "appended:\n{}", self.appended.trim_end()).unwrap();
        }
        out
    }
}
