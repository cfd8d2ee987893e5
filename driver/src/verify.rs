//! `gpuinstr-link verify ORIGINAL INSTRUMENTED`: proves from the two binaries
//! that instrumentation changed nothing the application can observe.
//!
//! - The original instructions appear in the instrumented code in order and
//!   unchanged (branch offsets and pc-relative literals aside: those are
//!   checked by where they land); everything else is an inserted region the
//!   site table (`.gpuinstr.sites`) names, ending at its original instruction.
//! - Every inserted region leaves every register live at its point (SCC,
//!   VCC, EXEC, M0 included) as it found it, by the abstract interpretation
//!   of preservation.rs; at a kernel's entry, the application's inputs must
//!   be back where the original descriptor put them.
//! - Code in a region stays in it: no branch out, no end of program.
//! - Branches and pc-relative computations land on the same original
//!   instruction (or the start of the region before it) or the same symbol.
//! - Every kernel's descriptor allocates every register its code and the
//!   functions it may call use; CoMGR's metadata query lists the original's
//!   kernels and descriptor symbols.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use serde::Serialize;
use thiserror::Error;

use crate::preservation::{check_from, interpret, Entry, Outcome};
use crate::stages::lift::preload_prologue::{loads, PrologueLoad};
use crate::stages::lift::{
    function_starts, kernel_groups, lift, lift_functions, Flow, Function, FunctionKind, Instruction, Isa, LiftError,
    LiftedCodeObject, PreloadPrologue, KERNEL_GROUP_BYTES,
};
use crate::stages::liveness::kernel_inputs;
use crate::stages::liveness::pending::{counters_of, exports_anywhere, pending_before, waitcnt, Pending};
use crate::stages::liveness::{allocation, Allocation};
use crate::stages::liveness::{analyze, touched_registers, RegisterFile, Unit, UnitSet};
use crate::stages::load::descriptor::KernelDescriptor;
use crate::stages::load::instrumented::INSTRUMENTED_SUFFIX;
use crate::stages::load::kernel_inputs::{layout, Input};
use crate::stages::load::processor::Processor;
use crate::stages::load::{CodeObject, LoadedInput};

/// The site table (read in `stages::load::instrumented`, shared with inspect).
pub use crate::stages::load::instrumented::{site_table, Site, SITE_TABLE};

#[derive(Debug, Error)]
pub enum VerifyError {
    #[error(transparent)]
    Lift(#[from] LiftError),
    #[error(transparent)]
    Liveness(#[from] crate::stages::liveness::LivenessError),
    #[error("the two code objects are for different targets ({0} and {1})")]
    Targets(String, String),
    #[error(transparent)]
    SiteTable(#[from] crate::stages::load::instrumented::TableError),
    #[error("the instrumented file has no code object at {0}")]
    Missing(String),
    #[error("the original file holds {original} bundles of device code, the instrumented one {instrumented}: not an instrumented copy of it")]
    Bundles { original: usize, instrumented: usize },
    #[error(transparent)]
    Load(#[from] crate::Error),
    #[error("GPUINSTR_MEMORY_BUDGET: {0}")]
    Budget(String),
}

/// Peak memory of verifying a code object per byte of the original, about:
/// rocSPARSE's object 57 (3.9 MB, 26.5 MB instrumented with the counter)
/// peaks at 2.2 GB, its largest bundle (objects 88 and 89, 12.6 MB each)
/// at 8.7 GB.
const VERIFY_WORKING_SET_PER_BYTE: u64 = 700;

/// Something the instrumented code does that the original would not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub function: String,
    /// Address in the instrumented code object (0 when not about one place).
    pub address: u64,
    pub problem: String,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct VerifyReport {
    pub target: String,
    pub functions: usize,
    pub original_instructions: usize,
    pub regions: usize,
    pub inserted_instructions: usize,
    pub branches: usize,
    pub pc_relative: usize,
    pub kernels: usize,
    /// Kernels CoMGR's metadata query lists (as in the original).
    pub metadata_kernels: usize,
    /// Kernels whose original code already uses registers past what its
    /// descriptor allocates (rocPRIM's, within the hardware's granule):
    /// those registers are not findings, anything the instrumentation
    /// adds past the allocation is.
    pub originals_past_their_allocation: usize,
    pub findings: Vec<Finding>,
}

impl VerifyReport {
    pub fn ok(&self) -> bool {
        self.findings.is_empty()
    }

    pub fn render_text(&self) -> String {
        let mut out = String::new();
        writeln!(out, "target {}: {} functions", self.target, self.functions).unwrap();
        writeln!(out, "  original instructions in order: {}", self.original_instructions).unwrap();
        writeln!(
            out,
            "  inserted regions preserving the live registers: {} ({} instructions)",
            self.regions, self.inserted_instructions
        )
        .unwrap();
        writeln!(out, "  branches landing where they did: {}", self.branches).unwrap();
        writeln!(out, "  pc-relative computations landing where they did: {}", self.pc_relative).unwrap();
        writeln!(out, "  kernel descriptors covering their registers: {}", self.kernels).unwrap();
        if self.originals_past_their_allocation > 0 {
            writeln!(
                out,
                "    (of them, the original code of {} already used registers past its descriptor's: not findings)",
                self.originals_past_their_allocation
            )
            .unwrap();
        }
        writeln!(out, "  kernels in CoMGR's metadata query, as in the original: {}", self.metadata_kernels).unwrap();
        if self.ok() {
            writeln!(out, "verified").unwrap();
        } else {
            writeln!(out, "{} findings:", self.findings.len()).unwrap();
            for finding in &self.findings {
                writeln!(out, "  {} at {:#x}: {}", finding.function, finding.address, finding.problem).unwrap();
            }
        }
        out
    }
}

/// Operands equal, the branch offset and the pc-relative literal aside.
fn same_instruction(original: &Instruction, instrumented: &Instruction) -> bool {
    if original.decoded != instrumented.decoded {
        return false;
    }
    if !original.decoded {
        return original.bytes == instrumented.bytes;
    }
    if original.raw.opcode != instrumented.raw.opcode || original.raw.operands.len() != instrumented.raw.operands.len()
    {
        return false;
    }
    let branch = matches!(original.flow, Flow::Branch { .. } | Flow::ConditionalBranch { .. });
    let literal = original.pc_relative.as_ref().map(|pc| pc.operand);
    original
        .raw
        .operands
        .iter()
        .zip(&instrumented.raw.operands)
        .enumerate()
        .all(|(index, (a, b))| a == b || (branch && index == 0) || literal == Some(index))
}

fn text(lifted: &LiftedCodeObject<'_>, instruction: &Instruction) -> String {
    lifted.isa.mc.print(&instruction.raw, instruction.address).unwrap_or_default().trim().to_string()
}

/// An instruction's bytes as llvm-objdump shows them: 32-bit words, most
/// significant digit first (two instructions that print alike differ here).
fn encoding(instruction: &Instruction) -> String {
    instruction
        .bytes
        .chunks(4)
        .map(|word| word.iter().rev().map(|b| format!("{b:02X}")).collect::<String>())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Where original addresses went.
#[derive(Default)]
struct AddressMap {
    /// Original instruction address -> instrumented address.
    instructions: HashMap<u64, u64>,
    /// Instrumented address of an original instruction -> start of the
    /// region inserted before it.
    region_before: HashMap<u64, u64>,
    /// Original branches emitted as long jumps: original address ->
    /// (where the long jump lands, its SGPR pair).
    relaxed: HashMap<u64, (u64, u16)>,
}

impl AddressMap {
    /// Whether landing on `landed` runs the original instruction at `original`
    /// (directly or through the whole region before it).
    fn lands_on(&self, original: u64, landed: u64) -> bool {
        match self.instructions.get(&original) {
            Some(&mapped) => landed == mapped || self.region_before.get(&mapped) == Some(&landed),
            None => false,
        }
    }
}

/// Checks every code object of an instrumented file (code object, bundle
/// or host file) against the one at the same place in the original file:
/// `(where in the file, report)`, in the original's order.
pub fn verify_files(
    original: &LoadedInput,
    instrumented: &LoadedInput,
) -> Result<Vec<(String, VerifyReport)>, VerifyError> {
    let mut reports = Vec::with_capacity(original.code_objects.len());
    for code_object in &original.code_objects {
        let origin = code_object.origin.join(", ");
        let other = instrumented
            .code_objects
            .iter()
            .find(|c| c.origin == code_object.origin)
            .ok_or_else(|| VerifyError::Missing(origin.clone()))?;
        reports.push((origin, verify(code_object, other)?));
    }
    Ok(reports)
}

/// [`verify_files`] over two files' bytes (mapped), a bundle at a time on
/// a few threads: memory holds the code objects being checked, not the
/// library's. `done` runs after each bundle (the caller lets the pages read
/// of mapped files go).
pub fn verify_file_bytes(
    original: (&std::path::Path, &[u8]),
    instrumented: (&std::path::Path, &[u8]),
    target: Option<&str>,
    done: &(dyn Fn() + Sync),
) -> Result<Vec<(String, VerifyReport)>, VerifyError> {
    use crate::stages::load::code_groups;
    let before = code_groups(original.0, original.1)?;
    let after = code_groups(instrumented.0, instrumented.1)?;
    if before.len() != after.len() {
        return Err(VerifyError::Bundles { original: before.len(), instrumented: after.len() });
    }
    let reports = std::sync::Mutex::new(Vec::new());
    let failure = std::sync::Mutex::new(None);
    let groups: Vec<usize> = (0..before.len()).rev().collect();
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Two large code objects at once would need twice the memory of one:
    // a group's working set is estimated from its bytes in the original.
    let budget = crate::parallel::memory_budget().map_err(VerifyError::Budget)?;
    let cost = |group: &usize| match &before[*group] {
        crate::stages::load::CodeGroup::Whole(bytes) => bytes.len() as u64,
        crate::stages::load::CodeGroup::Bundle(_, parsed) => {
            let wanted = |triple: &str| {
                target.is_none_or(|t| crate::stages::load::TargetId::triple_may_match(triple, t))
            };
            parsed.entries.iter().filter(|e| wanted(&e.triple)).map(|e| e.bytes.len() as u64).sum::<u64>()
        }
    } * VERIFY_WORKING_SET_PER_BYTE;
    crate::parallel::for_each_within_budget(groups, jobs, budget, cost, |group| {
        if failure.lock().expect("failure").is_some() {
            return;
        }
        let outcome = (|| -> Result<Vec<(String, VerifyReport)>, VerifyError> {
            let matching = |mut code_objects: Vec<CodeObject>| {
                code_objects.retain(|c| target.is_none_or(|t| c.target.matches(t)));
                code_objects
            };
            let originals = matching(before[group].code_objects(original.0, target)?);
            if originals.is_empty() {
                return Ok(Vec::new());
            }
            let mut others = matching(after[group].code_objects(instrumented.0, target)?);
            let mut made = Vec::new();
            for code_object in &originals {
                let origin = code_object.origin.join(", ");
                let at = others
                    .iter()
                    .position(|c| c.origin == code_object.origin)
                    .ok_or_else(|| VerifyError::Missing(origin.clone()))?;
                let other = others.swap_remove(at);
                made.push((origin, verify(code_object, &other)?));
            }
            Ok(made)
        })();
        match outcome {
            Ok(made) => reports.lock().expect("reports").extend(made.into_iter().map(|r| (group, r))),
            Err(error) => *failure.lock().expect("failure") = Some(error),
        }
        // What this bundle took goes back before the next one starts.
        crate::native::release_free_memory();
        done();
    });
    if let Some(error) = failure.into_inner().expect("failure") {
        return Err(error);
    }
    let mut reports = reports.into_inner().expect("reports");
    reports.sort_by(|(a, (x, _)), (b, (y, _))| a.cmp(b).then_with(|| x.cmp(y)));
    if reports.is_empty() {
        if let Some(target) = target {
            // What the loader says of a target the file lacks (naming those it has).
            crate::stages::load::load_bytes_for_target(original.0, original.1, None)?.select_target(target)?;
        }
    }
    Ok(reports.into_iter().map(|(_, report)| report).collect())
}

/// Checks `instrumented` against `original`.
pub fn verify(original: &CodeObject, instrumented: &CodeObject) -> Result<VerifyReport, VerifyError> {
    verify_in_groups(original, instrumented, KERNEL_GROUP_BYTES)
}

/// [`verify`] of a code object of kernels alone in groups of about
/// `group_bytes` of code (1: each kernel alone): the same report whatever
/// the size, the memory of one group's.
pub fn verify_in_groups(
    original: &CodeObject,
    instrumented: &CodeObject,
    group_bytes: u64,
) -> Result<VerifyReport, VerifyError> {
    if original.target != instrumented.target {
        return Err(VerifyError::Targets(original.target.to_string(), instrumented.target.to_string()));
    }
    let sites = site_table(instrumented)?;
    let regions: BTreeMap<u64, Site> = sites.iter().map(|s| (s.begin, *s)).collect();
    let mut check = GroupCheck {
        regions: &regions,
        map: AddressMap::default(),
        outcomes: Default::default(),
        functions: Vec::new(),
        report: VerifyReport { target: original.target.to_string(), ..VerifyReport::default() },
    };
    // A code object of kernels alone is checked a group of kernels at a
    // time, as it is instrumented: memory bounded by a group, not by the
    // code object (a 33 MB rocBLAS object took 5.4 GB checked whole). A
    // kernel's code reaching another kernel's would be a finding.
    match kernel_groups(original, group_bytes) {
        None => check.group(original, instrumented, &lift(original)?, &lift(instrumented)?)?,
        Some(groups) => {
            let starts: HashMap<String, u64> = function_starts(instrumented).into_iter().collect();
            let names: HashMap<u64, String> = function_starts(original).into_iter().map(|(n, a)| (a, n)).collect();
            for group in groups {
                // Each kernel's instrumented function, and its copy with
                // originals kept.
                let wanted: std::collections::HashSet<u64> = group
                    .iter()
                    .filter_map(|start| names.get(start))
                    .flat_map(|name| [starts.get(name), starts.get(&format!("{name}{INSTRUMENTED_SUFFIX}"))])
                    .flatten()
                    .copied()
                    .collect();
                let before = lift_functions(original, |start| group.contains(&start))?;
                let after = lift_functions(instrumented, |start| wanted.contains(&start))?;
                check.group(original, instrumented, &before, &after)?;
            }
        }
    }
    // Regions in no function the groups checked.
    for site in &sites {
        let held = check.functions.iter().any(|&(begin, end)| begin <= site.begin && site.begin < end);
        if !held && check.map.instructions.get(&site.original).is_none_or(|m| *m != site.end) {
            check.report.findings.push(Finding {
                function: "(outside every function)".into(),
                address: site.begin,
                problem: format!(
                    "the site table says this region runs before the original instruction at {:#x}, which is not \
                     where it ends",
                    site.original
                ),
            });
        }
    }
    let mut report = check.report;

    // 4. CoMGR's metadata query lists the same kernels and descriptors (and,
    // with originals kept, each one's copy besides).
    let listed = |code_object: &CodeObject| {
        crate::native::metadata_kernels(&code_object.bytes).map(|mut kernels| {
            kernels.sort();
            kernels
        })
    };
    // With originals kept, the copies are set aside: each must be an
    // original's, under its name with the suffix.
    let mut instrumented_kernels = listed(instrumented);
    if let Ok(kernels) = &mut instrumented_kernels {
        let (copies, originals): (Vec<_>, Vec<_>) =
            kernels.drain(..).partition(|(name, _): &(String, String)| name.ends_with(INSTRUMENTED_SUFFIX));
        let copy_of = |(name, _): &(String, String)| {
            let original = name.trim_end_matches(INSTRUMENTED_SUFFIX);
            (original.to_string(), format!("{original}.kd"))
        };
        let mut copied: Vec<(String, String)> = copies.iter().map(copy_of).collect();
        copied.sort();
        let named_as_copies = copies.iter().all(|(name, symbol)| *symbol == format!("{name}.kd"));
        if !copies.is_empty() && (copied != originals || !named_as_copies) {
            report.findings.push(Finding {
                function: String::new(),
                address: 0,
                problem: format!(
                    "CoMGR's metadata lists {} instrumented copies ({INSTRUMENTED_SUFFIX}) that are not one per kernel",
                    copies.len()
                ),
            });
        }
        *kernels = originals;
    }
    match (listed(original), instrumented_kernels) {
        (Ok(a), Ok(b)) if a == b => report.metadata_kernels = b.len(),
        (Ok(a), Ok(b)) => report.findings.push(Finding {
            function: String::new(),
            address: 0,
            problem: format!("CoMGR's metadata lists {} kernels, the original {}", b.len(), a.len()),
        }),
        (_, Err(error)) => report.findings.push(Finding {
            function: String::new(),
            address: 0,
            problem: format!("CoMGR cannot read the metadata: {error}"),
        }),
        (Err(_), Ok(b)) => report.metadata_kernels = b.len(),
    }

    Ok(report)
}

/// What checking the groups of a code object's functions carries from one
/// group to the next.
struct GroupCheck<'r> {
    regions: &'r BTreeMap<u64, Site>,
    map: AddressMap,
    /// What each distinct region code leaves in the registers.
    outcomes: rustc_hash::FxHashMap<Vec<u8>, Outcome>,
    /// The instrumented functions checked, `(start, end)`.
    functions: Vec<(u64, u64)>,
    report: VerifyReport,
}

impl GroupCheck<'_> {
    /// Steps 1 to 3 and 5 on the functions `before` and `after` lifted (a
    /// group of kernels, or every function).
    fn group(
        &mut self,
        original: &CodeObject,
        instrumented: &CodeObject,
        before: &LiftedCodeObject<'_>,
        after: &LiftedCodeObject<'_>,
    ) -> Result<(), VerifyError> {
        let liveness = analyze(before)?;
        let units = crate::stages::liveness::RegisterUnits::new(&after.isa);
        // Pairs of (original function, instrumented function) that aligned.
        let mut aligned: Vec<(usize, usize)> = Vec::new();

        // 1. Alignment: original instructions in order, regions between them.
        for (index, function) in before.functions.iter().enumerate() {
            self.report.functions += 1;
            // With originals kept, the instrumented copy is what to check.
            let copy = format!("{}{INSTRUMENTED_SUFFIX}", function.name);
            let named = |name: &str| after.functions.iter().position(|f| f.name == name);
            let Some(other) = named(&copy).or_else(|| named(&function.name)) else {
                self.report.findings.push(Finding {
                    function: function.name.clone(),
                    address: 0,
                    problem: "the instrumented code object has no function of this name".into(),
                });
                continue;
            };
            let g = &after.functions[other];
            if function.is_kernel() != g.is_kernel() {
                self.report.findings.push(Finding {
                    function: function.name.clone(),
                    address: g.address,
                    problem: "a kernel in one code object and not in the other".into(),
                });
                continue;
            }
            if align(before, function, after, g, self.regions, &mut self.map, &mut self.report) {
                aligned.push((index, other));
            }
        }
        for (g, holder) in after.functions.iter().enumerate() {
            self.functions.push((holder.address, holder.end()));
            if !aligned.iter().any(|(_, a)| *a == g) {
                continue; // already reported: the function did not align
            }
            for site in self.regions.range(holder.address..holder.end()).map(|(_, s)| s) {
                if self.map.instructions.get(&site.original).is_some_and(|m| *m == site.end) {
                    continue;
                }
                self.report.findings.push(Finding {
                    function: holder.name.clone(),
                    address: site.begin,
                    problem: format!(
                        "the site table says this region runs before the original instruction at {:#x}, which is not \
                     where it ends",
                        site.original
                    ),
                });
            }
        }

        // 2. Branches and pc-relative computations land where they did.
        for &(f, g) in &aligned {
            let at: HashMap<u64, &Instruction> = after.functions[g].instructions().map(|i| (i.address, i)).collect();
            let original_index: HashMap<u64, usize> =
                before.functions[f].instructions().enumerate().map(|(n, i)| (i.address, n)).collect();
            for o in before.functions[f].instructions() {
                let Some(i) = self.map.instructions.get(&o.address).and_then(|a| at.get(a)) else { continue };
                let problem = match (o.flow, i.flow, self.map.relaxed.get(&o.address)) {
                    (Flow::Branch { target: t } | Flow::ConditionalBranch { target: t }, _, Some(&(u, pair))) => {
                        self.report.branches += 1;
                        let live = original_index.get(&t).map(|n| liveness.functions[f].live_in[*n]);
                        let clobbered = live.and_then(|live| {
                            [Unit::sgpr(pair), Unit::sgpr(pair + 1), Unit::special("SCC")]
                                .into_iter()
                                .find(|unit| live.contains(*unit))
                        });
                        if !self.map.lands_on(t, u) {
                            Some(format!(
                                "the long jump for the branch at {:#x} lands at {u:#x}, not on {t:#x}",
                                o.address
                            ))
                        } else {
                            clobbered.map(|unit| {
                                format!(
                                    "the long jump for the branch at {:#x} changes {unit}, live at its target",
                                    o.address
                                )
                            })
                        }
                    }
                    (Flow::Branch { target: t }, Flow::Branch { target: u }, None)
                    | (Flow::ConditionalBranch { target: t }, Flow::ConditionalBranch { target: u }, None)
                    | (Flow::Jump { target: t }, Flow::Jump { target: u }, None) => {
                        self.report.branches += 1;
                        (!self.map.lands_on(t, u)).then(|| {
                            format!("`{}` lands at {u:#x}, not on the original's target {t:#x}", text(after, i))
                        })
                    }
                    _ => None,
                };
                let problem = problem.or_else(|| match (&o.pc_relative, &i.pc_relative) {
                    (Some(a), Some(b)) => {
                        self.report.pc_relative += 1;
                        let lands = self.map.lands_on(a.target, b.target)
                            || same_symbol_offset(original, a.target, instrumented, b.target)
                            || before
                                .got_slot_symbol(a.target)
                                .is_some_and(|s| after.got_slot_symbol(b.target) == Some(s));
                        (!lands).then(|| {
                            format!(
                                "`{}` computes {:#x}, which is not what the original's {:#x} became",
                                text(after, i),
                                b.target,
                                a.target
                            )
                        })
                    }
                    (Some(a), None) => Some(format!(
                        "`{}` no longer computes an address from its s_getpc_b64 (the original computed {:#x})",
                        text(after, i),
                        a.target
                    )),
                    _ => None,
                });
                if let Some(problem) = problem {
                    self.report.findings.push(Finding {
                        function: after.functions[g].name.clone(),
                        address: i.address,
                        problem,
                    });
                }
            }
        }

        // 2b. A kernel that preloads arguments is entered 256 bytes in: there
        // must be what its entry became (the preamble, or the instruction).
        for &(f, g) in &aligned {
            let (function, instrumented_function) = (&before.functions[f], &after.functions[g]);
            if function.entry > 0 || instrumented_function.entry > 0 {
                let (t, u) = (function.entry_address(), instrumented_function.entry_address());
                if instrumented_function.entry == 0 || !self.map.lands_on(t, u) {
                    self.report.findings.push(Finding {
                        function: instrumented_function.name.clone(),
                        address: instrumented_function.address,
                        problem: format!(
                            "the hardware enters the kernel 256 bytes in, at {u:#x}, which is not what the original's \
                         entry {t:#x} became"
                        ),
                    });
                }
            }
        }

        // 3. Regions preserve what is live at their point.
        let exports = exports_anywhere(&before.functions, &before.isa);
        // What a region's code leaves in the registers does not depend on where
        // it is (its branches are relative, the addresses it computes are not
        // values the interpretation follows): each distinct code is interpreted
        // once, as the instrumenter's check does, and checked per region
        // against what is live there. (Kernel entries start from their own
        // inputs and are interpreted each.)
        for &(f, g) in &aligned {
            let function = &before.functions[f];
            let instrumented_function = &after.functions[g];
            let index_of: HashMap<u64, usize> =
                function.instructions().enumerate().map(|(n, i)| (i.address, n)).collect();
            let mut pending: Option<Vec<Pending>> = None;
            let mut code: Vec<&Instruction> = instrumented_function.instructions().collect();
            code.sort_by_key(|i| i.address);
            let (begin, end) = (instrumented_function.address, instrumented_function.end());
            // Sites and instructions by address: linear in the function's size.
            for site in self.regions.range(begin..end).map(|(_, s)| s).filter(|s| s.end <= end) {
                let Some(&position) = index_of.get(&site.original) else { continue };
                let first = code.partition_point(|i| i.address < site.begin);
                let region: Vec<&Instruction> =
                    code[first..].iter().take_while(|i| i.address < site.end).copied().collect();
                self.report.regions += 1;
                self.report.inserted_instructions += region.len();
                let finding = |address: u64, problem: String| Finding {
                    function: instrumented_function.name.clone(),
                    address,
                    problem,
                };
                if let Some(escape) = region.iter().find_map(|i| leaves_region(i, site)) {
                    self.report.findings.push(finding(escape.0, escape.1));
                    continue;
                }
                let mut live = liveness.functions[f].live_in[position];
                let mut entry = Entry::default();
                if position == function.entry && !function.entry_is_branch_target() {
                    if let FunctionKind::Kernel(k) = function.kind {
                        let descriptor = &before.code_object.kernels[k].descriptor;
                        let (inputs, kernel_entry) = kernel_entry(
                            descriptor,
                            kernel_descriptor(instrumented, &instrumented_function.name).unwrap_or(descriptor),
                            liveness.processor,
                        );
                        live = live.intersection(&inputs);
                        entry = kernel_entry;
                    }
                }
                let owned = || region.iter().map(|i| (*i).clone()).collect::<Vec<Instruction>>();
                let checked = match entry.is_default() {
                    true => {
                        // Each instruction's length first: keys cannot run into each other.
                        let bytes: Vec<u8> = region
                            .iter()
                            .flat_map(|i| {
                                std::iter::once(i.bytes.len() as u8).chain(interpreted_bytes(i).iter().copied())
                            })
                            .collect();
                        let outcome = self
                            .outcomes
                            .entry(bytes)
                            .or_insert_with(|| interpret(&after.isa, &units, &owned(), &entry));
                        // The culprit of a violation is named from this region's
                        // own code: interpreted again (rare).
                        outcome
                            .check(&after.isa, &[], &live, None)
                            .or_else(|_| check_from(&after.isa, &units, &owned(), &live, None, &entry))
                    }
                    false => check_from(&after.isa, &units, &owned(), &live, None, &entry),
                };
                if let Err(violation) = checked {
                    self.report.findings.push(finding(
                        site.begin,
                        format!("the region before the original instruction at {:#x}: {violation}", site.original),
                    ));
                }
                let pending = pending
                    .get_or_insert_with(|| pending_before(function, &before.isa, &liveness.functions[f], exports))
                    .get(position)
                    .cloned()
                    .unwrap_or_else(|| Pending::unknown(exports));
                if let Some((address, problem)) = memory_waits(&after.isa, &units, &region, pending, &live) {
                    self.report.findings.push(finding(
                        address,
                        format!("the region before the original instruction at {:#x}: {problem}", site.original),
                    ));
                }
            }
        }

        // 5. Descriptors cover every register the code uses.
        // (What the code names: no liveness of the instrumented code needed.)
        let touched_after = touched_registers(after);
        let touched_before = touched_registers(before);
        let inside = |allocated: &Allocation, unit: Unit| match unit.file() {
            RegisterFile::Sgpr => allocated.sgprs.contains(unit),
            RegisterFile::Vgpr => allocated.vgprs.contains(unit),
            RegisterFile::Agpr => allocated.agprs.contains(unit),
            _ => true,
        };
        for (index, function) in after.functions.iter().enumerate() {
            let FunctionKind::Kernel(k) = function.kind else { continue };
            self.report.kernels += 1;
            let touched = &touched_after[index];
            let allocated = allocation(instrumented, &instrumented.kernels[k], touched);
            // What the original kernel itself used past its own allocation.
            let original_past = aligned
                .iter()
                .find(|(_, g)| *g == index)
                .and_then(|&(f, _)| match before.functions[f].kind {
                    FunctionKind::Kernel(ok) => Some((f, ok)),
                    _ => None,
                })
                .map(|(f, ok)| {
                    let own = allocation(original, &original.kernels[ok], &touched_before[f]);
                    touched_before[f].iter().filter(|u| !inside(&own, *u)).collect::<Vec<Unit>>()
                })
                .unwrap_or_default();
            if !original_past.is_empty() {
                self.report.originals_past_their_allocation += 1;
            }
            for unit in touched.iter() {
                if !inside(&allocated, unit) && !original_past.contains(&unit) {
                    self.report.findings.push(Finding {
                        function: function.name.clone(),
                        address: 0,
                        problem: format!(
                            "uses {unit}, outside what the descriptor allocates ({} SGPRs, {} VGPRs, {} AGPRs)",
                            allocated.sgprs.len(),
                            allocated.vgprs.len(),
                            allocated.agprs.len()
                        ),
                    });
                    break;
                }
            }
        }
        self.report.original_instructions +=
            aligned.iter().map(|(f, _)| before.functions[*f].instructions().count()).sum::<usize>();
        Ok(())
    }
}

/// The bytes of an instruction the interpretation depends on: all but a
/// pc-relative computation's literal (the address of a tool global differs
/// at every site; what lands in the register is unknown either way).
fn interpreted_bytes(instruction: &Instruction) -> &[u8] {
    let bytes = &instruction.bytes;
    match instruction.pc_relative {
        Some(_) if bytes.len() > 4 => &bytes[..bytes.len() - 4],
        _ => bytes,
    }
}

fn in_region(regions: &BTreeMap<u64, Site>, address: u64) -> bool {
    regions.range(..=address).next_back().is_some_and(|(_, s)| address < s.end)
}

/// Walks the instrumented function: every instruction outside a region must
/// be the next original one. Records where each went.
fn align(
    before: &LiftedCodeObject<'_>,
    function: &Function,
    after: &LiftedCodeObject<'_>,
    instrumented: &Function,
    regions: &BTreeMap<u64, Site>,
    map: &mut AddressMap,
    report: &mut VerifyReport,
) -> bool {
    // A preload prologue written anew (a library's own code replaced, or
    // the preloaded arguments moved): its loads must be what firmware that
    // preloads puts in the SGPRs; the two prologues are not compared.
    let old: Vec<&Instruction> = function.instructions().take(function.entry).collect();
    let new: Vec<&Instruction> = instrumented.instructions().take(instrumented.entry).collect();
    let replaced = function.entry > 0
        && instrumented.entry > 0
        && (old.len() != new.len() || old.iter().zip(&new).any(|(a, b)| !same_instruction(a, b)));
    let problem = if replaced {
        replaced_prologue(before, function, after, instrumented)
    } else if function.entry > 0 && preload_moved(before, function, after, instrumented) {
        Some(
            "the kernel's preloaded arguments moved, and its prologue loads them where they were, not where firmware \
             that preloads puts them now"
                .to_string(),
        )
    } else if instrumented.preload_prologue == PreloadPrologue::Library
        && regions.get(&instrumented.entry_address()).is_some()
    {
        Some(
            "the kernel keeps a library's own argument-preload prologue, which jumps past the code inserted at its \
             entry where firmware does not preload"
                .to_string(),
        )
    } else {
        None
    };
    if let Some(problem) = problem {
        report.findings.push(Finding { function: function.name.clone(), address: instrumented.address, problem });
        return false;
    }
    let skipped = |f: &Function| if replaced { f.entry } else { 0 };
    let mut originals = function.instructions().skip(skipped(function)).peekable();
    let kept: Vec<&Instruction> =
        instrumented.instructions().skip(skipped(instrumented)).filter(|i| !in_region(regions, i.address)).collect();
    let mut next = 0;
    while let Some(&instruction) = kept.get(next) {
        let Some(original) = originals.next() else {
            report.findings.push(Finding {
                function: function.name.clone(),
                address: instruction.address,
                problem: format!(
                    "`{}` is neither an original instruction nor in an inserted region (the original code ended)",
                    text(after, instruction)
                ),
            });
            return false;
        };
        let length = if same_instruction(original, instruction) {
            1
        } else if let Some((length, lands, pair)) = relaxed_branch(before, after, original, &kept[next..]) {
            map.relaxed.insert(original.address, (lands, pair));
            length
        } else {
            report.findings.push(Finding {
                function: function.name.clone(),
                address: instruction.address,
                problem: format!(
                    "expected the original instruction at {:#x}, `{}` ({}), found `{}` ({})",
                    original.address,
                    text(before, original),
                    encoding(original),
                    text(after, instruction),
                    encoding(instruction)
                ),
            });
            return false;
        };
        map.instructions.insert(original.address, instruction.address);
        if let Some((_, site)) = regions.range(..instruction.address).next_back() {
            if site.end == instruction.address {
                map.region_before.insert(instruction.address, site.begin);
            }
        }
        next += length;
    }
    if let Some(missing) = originals.next() {
        report.findings.push(Finding {
            function: function.name.clone(),
            address: instrumented.end(),
            problem: format!(
                "the original instruction at {:#x}, `{}`, is missing",
                missing.address,
                text(before, missing)
            ),
        });
        return false;
    }
    true
}

/// Where an instrumented kernel's prologue, written anew, differs from
/// loads of what firmware that preloads its arguments would put in its
/// SGPRs (under the instrumented descriptor, which must preload what the
/// original's does).
fn replaced_prologue(
    before: &LiftedCodeObject<'_>,
    function: &Function,
    after: &LiftedCodeObject<'_>,
    instrumented: &Function,
) -> Option<String> {
    let (original, descriptor) = match (function.kernel_index(), instrumented.kernel_index()) {
        (Some(a), Some(b)) => (&before.code_object.kernels[a].descriptor, &after.code_object.kernels[b].descriptor),
        _ => return Some("a preload prologue outside a kernel".into()),
    };
    // The instrumented kernel may preload fewer (its preamble loads the
    // rest), from the same dword.
    let spec = |d: &KernelDescriptor| (d.kernarg_preload_length(), d.kernarg_preload_offset());
    if spec(original).1 != spec(descriptor).1 || spec(descriptor).0 > spec(original).0 {
        return Some(format!(
            "the instrumented kernel preloads {} dwords from dword {}, the original {} from dword {}",
            spec(descriptor).0,
            spec(descriptor).1,
            spec(original).0,
            spec(original).1
        ));
    }
    let Some(processor) = after.code_object.target.model() else {
        return Some(format!("gpuinstr does not model {}'s kernel inputs", after.code_object.target.processor));
    };
    let expected = match loads(descriptor, processor) {
        Ok(expected) => expected,
        Err(why) => return Some(format!("no prologue of loads fits the kernel: {why}")),
    };
    match loads_of(&after.isa, instrumented) {
        Ok(found) if found == expected => None,
        Ok((pointer, found)) => Some(format!(
            "the prologue written anew loads {} through s[{pointer}:{}]; firmware that preloads puts {} \
             (the argument pointer in s[{}:{}])",
            describe(&found),
            pointer + 1,
            describe(&expected.1),
            expected.0,
            expected.0 + 1
        )),
        Err(why) => Some(format!("the prologue written anew is not one of loads: {why}")),
    }
}

/// Whether the instrumented descriptor preloads the arguments elsewhere
/// (or from elsewhere) than the original's.
fn preload_moved(
    before: &LiftedCodeObject<'_>,
    function: &Function,
    after: &LiftedCodeObject<'_>,
    instrumented: &Function,
) -> bool {
    let (Some(a), Some(b), Some(processor)) =
        (function.kernel_index(), instrumented.kernel_index(), after.code_object.target.model())
    else {
        return false;
    };
    let original = &before.code_object.kernels[a].descriptor;
    loads(original, processor) != loads(&after.code_object.kernels[b].descriptor, processor)
}

fn describe(loads: &[PrologueLoad]) -> String {
    let parts: Vec<String> =
        loads.iter().map(|l| format!("s[{}:{}] from byte {}", l.first, l.first + l.dwords - 1, l.offset)).collect();
    parts.join(", ")
}

/// What a prologue of loads loads, read back from LLVM's decoding of the
/// code: the SGPRs each load fills from which argument bytes, through
/// which pointer pair; its jump must wait for them (`lgkmcnt(0)`) and land
/// on the entry, padding only `s_nop`.
fn loads_of(isa: &Isa, function: &Function) -> Result<(u16, Vec<PrologueLoad>), String> {
    let units = crate::stages::liveness::RegisterUnits::new(isa);
    let sgprs = |reg: Option<&u32>| -> Option<(u16, u16)> {
        let list = units.units(*reg?);
        let first = list.first()?;
        (first.file() == RegisterFile::Sgpr).then_some((first.index(), list.len() as u16))
    };
    let immediates = |instruction: &Instruction| -> Vec<i64> {
        let operands = &instruction.raw.operands;
        operands
            .iter()
            .filter_map(|o| if let crate::native::Operand::Immediate(v) = o { Some(*v) } else { None })
            .collect()
    };
    let (mut pointer, mut out, mut waited, mut jumped) = (None, Vec::new(), false, false);
    for instruction in function.instructions().take(function.entry) {
        let name = instruction.name(isa);
        let at = instruction.address;
        if jumped && name != "S_NOP" {
            return Err(format!("`{name}` at {at:#x} follows the jump to the entry"));
        }
        if name.starts_with("S_LOAD_DWORD") && name.contains("_IMM") {
            let (first, dwords) =
                sgprs(instruction.defs.first()).ok_or(format!("`{name}` at {at:#x} loads no SGPRs"))?;
            let (base, _) = sgprs(instruction.uses.first()).ok_or(format!("`{name}` at {at:#x} has no SGPR base"))?;
            // The offset, then the cache policy (none).
            let (offset, policy) = match immediates(instruction)[..] {
                [offset] => (offset, 0),
                [offset, policy, ..] => (offset, policy),
                _ => return Err(format!("`{name}` at {at:#x} has no immediate offset")),
            };
            if pointer.is_some_and(|p| p != base) || policy != 0 || offset < 0 {
                return Err(format!("`{name}` at {at:#x} is not a plain load through the argument pointer"));
            }
            pointer = Some(base);
            out.push(PrologueLoad { first, dwords, offset: offset as u32 });
            waited = false;
        } else if name.starts_with("S_WAITCNT") {
            // GFX9's LGKM_CNT is bits 8-11 of the immediate.
            waited = immediates(instruction).first().is_some_and(|imm| (imm >> 8) & 0xf == 0);
        } else if let Flow::Branch { target } = instruction.flow {
            if !waited || target != function.entry_address() {
                return Err(format!("the jump at {at:#x} does not wait for the loads and land on the entry"));
            }
            jumped = true;
        } else if name != "S_NOP" {
            return Err(format!("`{name}` at {at:#x} is neither a load, a wait nor the jump to the entry"));
        }
    }
    if !jumped {
        return Err("it does not jump to the entry".into());
    }
    Ok((pointer.unwrap_or(0), out))
}

/// An original branch emitted as a long jump (relax.rs): `[s_cbranch_<inverse>
/// over,] s_getpc_b64 s[n:n+1]; s_add_u32; s_addc_u32; s_setpc_b64 s[n:n+1]`.
/// Returns how many instructions it takes, where it lands and `n`.
fn relaxed_branch(
    before: &LiftedCodeObject<'_>,
    after: &LiftedCodeObject<'_>,
    original: &Instruction,
    kept: &[&Instruction],
) -> Option<(usize, u64, u16)> {
    let name = |i: &Instruction| after.isa.opcode_name(i.opcode).to_string();
    let mut at = 0;
    let mut over = None;
    match original.flow {
        Flow::ConditionalBranch { .. } => {
            let inverse = crate::stages::lift::instruction::inverse_branch(original.name(&before.isa))?;
            let first = kept.first()?;
            if name(first).to_ascii_lowercase() != inverse {
                return None;
            }
            let Flow::ConditionalBranch { target } = first.flow else { return None };
            over = Some(target);
            at = 1;
        }
        Flow::Branch { .. } => {}
        _ => return None,
    }
    let [getpc, add, addc, setpc] = kept.get(at..at + 4)? else { return None };
    let names = [name(getpc), name(add), name(addc), name(setpc)];
    if names != ["S_GETPC_B64", "S_ADD_U32", "S_ADDC_U32", "S_SETPC_B64"] || getpc.defs != setpc.uses {
        return None;
    }
    if over.is_some_and(|over| over != setpc.end()) {
        return None;
    }
    let lands = add.pc_relative.as_ref()?.target;
    let pair_name = after.isa.register_name(*getpc.defs.first()?);
    let pair = pair_name.strip_prefix("SGPR")?.split('_').next()?.parse().ok()?;
    Some((at + 4, lands, pair))
}

/// The first wait a region misses. Before it waits for their counters, a
/// region must not read or write a register a load of the application may
/// still be writing (in flight at the original instruction the region runs
/// before): the value read would be stale, or the load would overwrite
/// what the region wrote. And it must not end with a load of its own still
/// writing a register live after it. Waits among the region's own loads
/// are its compiler's business. What is in flight follows the region's
/// own branches (a hook's loop waits at its head, not in address order).
fn memory_waits(
    isa: &crate::stages::lift::Isa,
    units: &crate::stages::liveness::RegisterUnits,
    region: &[&Instruction],
    pending: Pending,
    live: &UnitSet,
) -> Option<(u64, String)> {
    /// In flight before an instruction: the application's loads, the
    /// region's own, and the region's last load on some path here.
    #[derive(Clone)]
    struct State {
        pending: Pending,
        own: Pending,
        last_load: Option<u64>,
    }
    impl State {
        fn join(&mut self, other: &State) -> bool {
            let grew = self.pending.join(&other.pending) | self.own.join(&other.own);
            let last_load = self.last_load.max(other.last_load);
            let moved = last_load != self.last_load;
            self.last_load = last_load;
            grew || moved
        }
    }
    let defs_of = |instruction: &Instruction| {
        let mut defs = UnitSet::EMPTY;
        for reg in instruction.all_defs() {
            for unit in units.units(reg) {
                defs.insert(*unit);
            }
        }
        defs
    };
    let index_of: HashMap<u64, usize> = region.iter().enumerate().map(|(k, i)| (i.address, k)).collect();
    // Where each instruction goes: its index in the region, or None for
    // the region's end (falling off it, or a branch to it; branches out of
    // the region are findings of their own).
    let successors = |k: usize| -> Vec<Option<usize>> {
        let next = (k + 1 < region.len()).then_some(k + 1);
        match region[k].flow {
            Flow::Branch { target } | Flow::Jump { target } => vec![index_of.get(&target).copied()],
            Flow::ConditionalBranch { target } => vec![next, index_of.get(&target).copied()],
            Flow::EndProgram | Flow::IndirectBranch => Vec::new(),
            Flow::Next | Flow::Call => vec![next],
        }
    };
    let after = |k: usize, state: &State| -> State {
        let mut state = state.clone();
        let instruction = region[k];
        if let Some(counts) = waitcnt(instruction, isa) {
            state.pending.after_wait(counts);
            state.own.after_wait(counts);
            return state;
        }
        let counters = counters_of(instruction, isa);
        if counters.vmcnt || counters.lgkmcnt {
            state.last_load = Some(instruction.address);
        }
        // The region's own code calls nothing: `exports` is never used.
        state.own.step(instruction, isa, &defs_of(instruction), true);
        state
    };
    let mut before: Vec<Option<State>> = vec![None; region.len()];
    let mut at_end: Option<State> = None;
    let entry = State { pending, own: Pending::NONE, last_load: None };
    if region.is_empty() {
        at_end = Some(entry);
    } else {
        before[0] = Some(entry);
    }
    // Forward to a fixed point (sets only grow, ages saturate).
    let mut work: Vec<usize> = if region.is_empty() { Vec::new() } else { vec![0] };
    while let Some(k) = work.pop() {
        let Some(state) = before[k].as_ref().map(|s| after(k, s)) else { continue };
        for successor in successors(k) {
            let slot = match successor {
                Some(next) => &mut before[next],
                None => &mut at_end,
            };
            let grew = match slot {
                Some(existing) => existing.join(&state),
                None => {
                    *slot = Some(state.clone());
                    true
                }
            };
            if let (true, Some(next)) = (grew, successor) {
                work.push(next);
            }
        }
    }
    for (k, state) in before.iter().enumerate() {
        let Some(state) = state else { continue };
        let instruction = region[k];
        if waitcnt(instruction, isa).is_some() {
            continue;
        }
        let mut touched = defs_of(instruction);
        for reg in instruction.all_uses() {
            for unit in units.units(reg) {
                touched.insert(*unit);
            }
        }
        let needed = state.pending.waits_for(&touched);
        if needed.any() {
            let in_flight = touched.intersection(&state.pending.vmcnt.units().union(&state.pending.lgkmcnt.units()));
            let what = match in_flight.iter().next() {
                Some(unit) => format!("{unit}, which a load in flight may still write"),
                None => "registers while an export or GDS operation may still read its data".to_string(),
            };
            return Some((
                instruction.address,
                format!(
                    "`{}` touches {what}, and the region has not waited ({} first)",
                    instruction.name(isa),
                    needed.wait_instruction().unwrap_or_default()
                ),
            ));
        }
    }
    let end = at_end?;
    let landing = end.own.vmcnt.units().union(&end.own.lgkmcnt.units()).intersection(live);
    let unit = landing.iter().next()?;
    let load = end.last_load?;
    Some((
        load,
        format!(
            "the region ends with a load still writing {unit}, which is live after it (it needs an s_waitcnt before \
             its end)"
        ),
    ))
}

/// Whether an instruction of a region may leave it other than by falling
/// through its end: `(address, why)`.
fn leaves_region(instruction: &Instruction, site: &Site) -> Option<(u64, String)> {
    let inside = |target: u64| target >= site.begin && target <= site.end;
    match instruction.flow {
        Flow::Branch { target } | Flow::ConditionalBranch { target } | Flow::Jump { target } if !inside(target) => {
            Some((instruction.address, format!("inserted code branches out of its region, to {target:#x}")))
        }
        Flow::EndProgram => Some((instruction.address, "inserted code ends the program".into())),
        Flow::IndirectBranch => Some((instruction.address, "inserted code jumps through registers".into())),
        _ => None,
    }
}

fn kernel_descriptor<'c>(code_object: &'c CodeObject, name: &str) -> Option<&'c KernelDescriptor> {
    code_object.kernels.iter().find(|k| k.name() == name).map(|k| &k.descriptor)
}

/// What a kernel's entry region must give back, and how registers start:
/// the application's inputs (under the original descriptor) and, where the
/// instrumented descriptor enables more, where the hardware now puts them.
fn kernel_entry(
    original: &KernelDescriptor,
    instrumented: &KernelDescriptor,
    processor: &Processor,
) -> (UnitSet, Entry) {
    let old = layout(original, processor);
    let new = layout(instrumented, processor);
    let inputs = kernel_inputs(original, processor);
    let mut entry = Entry::default();
    for (input, first, count) in &old {
        if let Some((_, moved, now)) = new.iter().find(|(i, ..)| i == input) {
            // (Preloaded arguments: the instrumented kernel may preload
            // fewer, those first.)
            for part in 0..*count.min(now) {
                if moved != first {
                    entry.holds.push((Unit::sgpr(moved + part), Unit::sgpr(first + part)));
                }
            }
        }
    }
    // An input that moved leaves its old place holding another input; the
    // moves recorded above take precedence (check_from applies them last).
    for (input, first, count) in &old {
        if new.iter().any(|(i, f, _)| i == input && f != first) {
            entry.unknown.extend((0..*count).map(|part| Unit::sgpr(first + part)));
        }
    }
    // Preloaded dwords no longer preloaded hold something else at first;
    // the preamble loads them through the original argument pointer.
    let preloaded = |layout: &[(Input, u16, u16)]| {
        layout.iter().find(|(i, ..)| *i == Input::PreloadedArguments).map(|(_, first, count)| (*first, *count))
    };
    if let Some((first, count)) = preloaded(&old) {
        let kept = preloaded(&new).map_or(0, |(_, now)| now);
        let pointer = old.iter().find(|(i, ..)| *i == Input::KernargSegmentPtr).map(|(_, p, _)| *p);
        if let (Some(pointer), true) = (pointer, kept < count) {
            entry.kernarg_pointer = Some([Unit::sgpr(pointer), Unit::sgpr(pointer + 1)]);
            for part in kept..count {
                let unit = Unit::sgpr(first + part);
                entry.unknown.push(unit);
                entry.arguments.push((unit, (u32::from(original.kernarg_preload_offset()) + u32::from(part)) * 4));
            }
        }
    }
    let dimensions = original.rsrc2("ENABLE_VGPR_WORKITEM_ID");
    if processor.packed_work_item_ids && instrumented.rsrc2("ENABLE_VGPR_WORKITEM_ID") > dimensions {
        entry.widened = Some((Unit::vgpr(0), if dimensions == 0 { 0x3ff } else { 0xfffff }));
    }
    (inputs, entry)
}

/// Whether two addresses are the same offset from same-named symbols (data
/// the code refers to).
fn same_symbol_offset(original: &CodeObject, a: u64, instrumented: &CodeObject, b: u64) -> bool {
    let containing = |code_object: &CodeObject, address: u64| {
        code_object
            .symbols
            .iter()
            .filter(|s| !s.name.is_empty() && s.value <= address && (address < s.value + s.size.max(1)))
            .map(|s| (s.name.clone(), address - s.value))
            .collect::<Vec<_>>()
    };
    let ours = containing(instrumented, b);
    containing(original, a).iter().any(|pair| ours.contains(pair))
}
