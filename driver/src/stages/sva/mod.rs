//! Stage 4, sva: where the State Value Array (docs/sva.md) and the packed
//! work-item ids live in each instrumented function.
//!
//! A home is a VGPR that the kernel, and everything it may call, never reads
//! or writes, inside the kernel's allocation (seed 000's globally free
//! registers; 66% of rocSPARSE/rocRAND gfx90a kernels have one, docs/
//! liveness.md). On gfx90a, a kernel that uses no AGPR may also take a VGPR
//! from the AGPR part of its unified allocation. Kernels that share an instrumented device function must
//! agree on the register, so they are placed together. When no VGPR is free,
//! seed 004's fallback: an AGPR nothing uses holds it, and each payload that
//! reads it copies it into a VGPR dead at its point (payloads.rs,
//! `plan_parking`). With `grow`, the first VGPR (or AGPR) past the allocation
//! (the patch stage raises it); otherwise the kernels get a problem and are
//! left alone, and the other kernels are still instrumented.
//!
//! Where neither file has a register free for the whole kernel, seed 000's
//! sliding placement (sliding.rs): the values move between VGPRs free where
//! they are, before growing the allocation (which costs occupancy).
//!
//! Where nothing else places it: the SVA kept in memory, in a slot of the
//! wave's own (wave_slots.rs), loaded by each payload that reads it.

pub mod counts;
pub mod sliding;
pub mod wave_slots;

use std::collections::{BTreeMap, BTreeSet};

use crate::stages::lift::reachable_functions;
use crate::stages::lift::{FunctionKind, LiftedCodeObject};
use crate::stages::liveness::allocation;
use crate::stages::liveness::{Liveness, RegisterFile, Unit, UnitSet};
use crate::stages::load::allocation::MAX_VGPRS;
use crate::stages::load::occupancy;
use crate::stages::load::processor::Processor;

/// Registers stage `sva` gave a function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FunctionRegisters {
    /// VGPRs holding the SVA and the packed work-item ids for the whole function.
    pub sva: Option<u16>,
    pub work_item_ids: Option<u16>,
    /// Or AGPRs holding them: each payload loads them into VGPRs dead at its point.
    pub in_agprs: Option<AgprHomes>,
    /// Or the wave's slot in memory: each payload loads them likewise.
    pub in_wave_slot: Option<WaveSlotHomes>,
    /// VGPRs and AGPRs below these are in the allocation of every kernel
    /// reaching the function (0: payloads never park or spill registers
    /// here).
    pub vgpr_limit: u16,
    pub agpr_limit: u16,
    /// Payloads' VGPRs stay below this: what the allocation holds, or may
    /// grow to (stage sva's RegisterGrowth); 0: what a wave may have.
    pub payload_vgprs: u16,
    /// The vector register allocation (gfx90a's unified file) the kernels
    /// reaching the function may grow to, by the same policy.
    pub allocation_cap: u16,
}

/// The SVA (and the work-item ids) kept in AGPRs (seed 004's fallback when
/// no VGPR is free for the whole kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgprHomes {
    pub sva: u16,
    pub work_item_ids: Option<u16>,
}

impl AgprHomes {
    /// The AGPRs in use.
    pub fn agprs(&self) -> impl Iterator<Item = u16> {
        std::iter::once(self.sva).chain(self.work_item_ids)
    }
}

/// The SVA (and the work-item ids) kept in the wave's slot in memory
/// (wave_slots.rs), when no register is free for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaveSlotHomes {
    pub work_item_ids: bool,
    pub indexing: wave_slots::Indexing,
}

impl FunctionRegisters {
    /// Whether payloads load the SVA into a VGPR at their point (kept in
    /// an AGPR or in memory).
    pub fn loads_sva(&self) -> bool {
        self.in_agprs.is_some() || self.in_wave_slot.is_some()
    }

    /// How many values payloads load (the SVA, the work-item ids).
    pub fn values_loaded(&self) -> usize {
        match (self.in_agprs, self.in_wave_slot) {
            (Some(h), _) => 1 + usize::from(h.work_item_ids.is_some()),
            (None, Some(h)) => 1 + usize::from(h.work_item_ids),
            (None, None) => 0,
        }
    }
}

/// Where a value lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Home {
    /// A VGPR inside the allocation that nothing uses.
    Free(u16),
    /// A VGPR past the allocation: the kernel's VGPR count must grow to include it.
    Grown(u16),
    /// An AGPR inside the allocation that nothing uses (gfx908/gfx90a):
    /// payloads that read it load it into a VGPR dead at their point.
    Agpr(u16),
    /// An AGPR past the allocation.
    GrownAgpr(u16),
    /// VGPRs free where the value is, changing along the kernel
    /// (`SvaPlacement::sliding`); this one at the kernel's entry.
    Sliding(u16),
    /// In memory, in the wave's slot (wave_slots.rs): payloads that read
    /// it load it into a VGPR dead at their point.
    WaveSlot,
}

impl Home {
    /// The VGPR, for homes in VGPRs.
    pub fn vgpr(self) -> Option<u16> {
        match self {
            Home::Free(v) | Home::Grown(v) | Home::Sliding(v) => Some(v),
            Home::Agpr(_) | Home::GrownAgpr(_) | Home::WaveSlot => None,
        }
    }

    /// The AGPR, for homes in AGPRs.
    pub fn agpr(self) -> Option<u16> {
        match self {
            Home::Agpr(a) | Home::GrownAgpr(a) => Some(a),
            Home::Free(_) | Home::Grown(_) | Home::Sliding(_) | Home::WaveSlot => None,
        }
    }
}

/// When a kernel's vector register allocation may grow for the
/// instrumentation (the SVA's home, payload registers, parking AGPRs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RegisterGrowth {
    /// Never: everything fits in the allocation the kernel has.
    Never,
    /// Where a SIMD still holds as many of the kernel's waves (occupancy
    /// unchanged), within what a wave may have with its work-group bound.
    #[default]
    FreeOfOccupancy,
    /// Up to what a wave may have with its work-group bound, occupancy or not.
    Always,
}

/// The placement for one kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelPlacement {
    /// Function index of the kernel.
    pub kernel: usize,
    pub sva: Option<Home>,
    pub work_item_ids: Option<Home>,
    /// Why the kernel cannot be instrumented, when it cannot.
    pub problem: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub struct SvaPlacement {
    pub kernels: Vec<KernelPlacement>,
    /// The registers each instrumented function (kernel or device function)
    /// uses; no homes in those of kernels with a problem.
    pub functions: BTreeMap<usize, FunctionRegisters>,
    /// Whether allocations may grow (the preamble may then build an AGPR
    /// home in a VGPR past the allocation).
    pub grow: RegisterGrowth,
    /// Kernels whose values slide between registers.
    pub sliding: BTreeMap<usize, sliding::Sliding>,
}

/// What to place.
#[derive(Clone, Debug, Default)]
pub struct SvaRequest {
    /// Functions with instrumentation points.
    pub instrumented: BTreeSet<usize>,
    /// Whether payloads need the work-item ids (a second VGPR).
    pub work_item_ids: bool,
    /// May a kernel's VGPR allocation grow?
    pub grow: RegisterGrowth,
}

/// Groups kernels that must agree: those reaching a common instrumented
/// device function. Each group lists kernels and the instrumented device
/// functions they reach.
fn groups(lifted: &LiftedCodeObject<'_>, request: &SvaRequest) -> Vec<(Vec<usize>, Vec<usize>)> {
    let kernels: Vec<usize> = (0..lifted.functions.len()).filter(|f| lifted.functions[*f].is_kernel()).collect();
    let reach: BTreeMap<usize, Vec<usize>> = kernels.iter().map(|k| (*k, reachable_functions(lifted, *k))).collect();
    // Union-find over kernels.
    let mut parent: BTreeMap<usize, usize> = kernels.iter().map(|k| (*k, *k)).collect();
    fn root(parent: &mut BTreeMap<usize, usize>, k: usize) -> usize {
        let p = parent[&k];
        if p == k {
            return k;
        }
        let r = root(parent, p);
        parent.insert(k, r);
        r
    }
    let instrumented_devices: Vec<usize> = request
        .instrumented
        .iter()
        .copied()
        .filter(|f| matches!(lifted.functions[*f].kind, FunctionKind::DeviceFunction))
        .collect();
    for device in &instrumented_devices {
        let users: Vec<usize> = kernels.iter().copied().filter(|k| reach[k].contains(device)).collect();
        for pair in users.windows(2) {
            let (a, b) = (root(&mut parent, pair[0]), root(&mut parent, pair[1]));
            parent.insert(a, b);
        }
    }
    let mut by_root: BTreeMap<usize, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
    for kernel in &kernels {
        let needs =
            request.instrumented.contains(kernel) || instrumented_devices.iter().any(|d| reach[kernel].contains(d));
        if needs {
            let r = root(&mut parent, *kernel);
            by_root.entry(r).or_default().0.push(*kernel);
        }
    }
    for (members, devices) in by_root.values_mut() {
        devices.extend(instrumented_devices.iter().copied().filter(|d| members.iter().any(|k| reach[k].contains(d))));
    }
    by_root.into_values().collect()
}

/// The VGPRs payloads in a kernel may use (all below the returned count):
/// the VGPRs its allocation holds ([`vgprs_for_values`]), or, as `grow`
/// allows, the most that keep its occupancy or that a wave may have with
/// its work-group bound; and the vector allocation (VGPRs and AGPRs) it
/// may grow to by the same policy.
fn payload_vgpr_cap(
    processor: &Processor,
    kernel: &crate::stages::load::Kernel,
    allocation: &crate::stages::liveness::Allocation,
    touched: &UnitSet,
    grow: RegisterGrowth,
) -> (u16, u16) {
    let current = vgprs_for_values(processor, allocation, touched).len();
    let highest_agpr = touched.in_file(RegisterFile::Agpr).iter().map(|u| u.index() as usize + 1).max().unwrap_or(0);
    // A unified file: a kernel using AGPRs keeps its AGPR part of it.
    let agprs = match highest_agpr {
        0 => 0,
        _ if processor.has_unified_register_file() => allocation.agprs.len(),
        _ => highest_agpr,
    };
    let sgprs = allocation.sgprs.len() + allocation.reserved_sgprs;
    let (wave_vgprs, wave_total) =
        occupancy::wave_register_limit(processor, kernel.metadata.max_flat_workgroup_size as u32);
    let fits = |v: usize| v <= wave_vgprs && occupancy::vector_allocation(processor, v, agprs) <= wave_total;
    // Whether a vector allocation of `total` registers is one `grow` allows.
    let now = occupancy::vector_allocation(processor, current, agprs);
    let keeps = |total: usize| match grow {
        RegisterGrowth::Never => false,
        RegisterGrowth::FreeOfOccupancy => {
            occupancy::waves_per_simd(processor, total, sgprs) >= occupancy::waves_per_simd(processor, now, sgprs)
        }
        RegisterGrowth::Always => true,
    };
    let mut cap = current;
    while cap < usize::from(MAX_VGPRS)
        && fits(cap + 1)
        && keeps(occupancy::vector_allocation(processor, cap + 1, agprs))
    {
        cap += 1;
    }
    // The whole allocation may grow by the same policy, AGPRs too (LLVM
    // spills payload values to them and parks live VGPRs in them where too
    // few are free): a kernel at 256 VGPRs can still take AGPRs.
    let granule = processor.vector_granule;
    let mut allocation_cap = occupancy::vector_allocation(processor, cap, agprs).max(now);
    while allocation_cap + granule <= wave_total && keeps(allocation_cap + granule) {
        allocation_cap += granule;
    }
    (cap as u16, allocation_cap as u16)
}

/// The most AGPRs a wave with `vgprs` VGPRs may have within a vector
/// allocation of `cap` registers.
pub fn agprs_within(processor: &Processor, vgprs: u16, cap: u16) -> u16 {
    (0..=MAX_VGPRS)
        .take_while(|a| occupancy::vector_allocation(processor, vgprs.into(), (*a).into()) <= usize::from(cap))
        .last()
        .unwrap_or(0)
}

/// The VGPRs of a kernel's allocation that may hold its values. A unified
/// file (gfx90a, gfx940+) splits at ACCUM_OFFSET; a kernel that uses no AGPR
/// can hold VGPRs in all of it (the patch moves ACCUM_OFFSET; the
/// allocation, and so occupancy, stays the same).
pub(crate) fn vgprs_for_values(
    processor: &Processor,
    allocation: &crate::stages::liveness::Allocation,
    touched: &UnitSet,
) -> UnitSet {
    if processor.has_unified_register_file() && touched.in_file(RegisterFile::Agpr).is_empty() {
        UnitSet::range(RegisterFile::Vgpr, 0, (allocation.vgprs.len() + allocation.agprs.len()) as u16)
    } else {
        allocation.vgprs
    }
}

/// Places the SVA (and the work-item id register when asked) for every
/// kernel that has points or reaches a device function that has.
pub fn place(lifted: &LiftedCodeObject<'_>, liveness: &Liveness, request: &SvaRequest) -> SvaPlacement {
    let code_object = lifted.code_object;
    let mut placement = SvaPlacement { grow: request.grow, ..SvaPlacement::default() };
    let wanted = 1 + usize::from(request.work_item_ids);
    // gfx908's AGPRs live in a file of their own; gfx900 and gfx906 have none.
    let processor = liveness.processor;
    let has_agprs = processor.has_agprs();
    for (kernels, devices) in groups(lifted, request) {
        // Registers free in every kernel of the group, and the largest allocations.
        let mut free: Option<UnitSet> = None;
        let mut free_agprs: Option<UnitSet> = None;
        let (mut largest, mut largest_agprs, mut vgpr_limit) = (0u16, 0u16, MAX_VGPRS);
        // gfx90a: (VGPR part, whole unified allocation) of the smallest kernel.
        let (mut agpr_limit, mut unified) = (MAX_VGPRS, u16::MAX);
        // The VGPRs payloads may use, and the VGPRs any growth stays below.
        let (mut payload_vgprs, mut growth_cap, mut allocation_cap) = (MAX_VGPRS, MAX_VGPRS, u16::MAX);
        for kernel in &kernels {
            let FunctionKind::Kernel(index) = lifted.functions[*kernel].kind else { continue };
            let touched = &liveness.functions[*kernel].touched;
            let kernel_info = &code_object.kernels[index];
            let allocation = allocation(code_object, kernel_info, touched);
            let allocated = vgprs_for_values(processor, &allocation, touched);
            largest = largest.max(allocated.len() as u16);
            largest_agprs = largest_agprs.max(allocation.agprs.len() as u16);
            vgpr_limit = vgpr_limit.min(allocation.vgprs.len() as u16);
            agpr_limit = agpr_limit.min(allocation.agprs.len() as u16);
            unified = unified.min((allocation.vgprs.len() + allocation.agprs.len()) as u16);
            let (vgprs, vector) = payload_vgpr_cap(processor, kernel_info, &allocation, touched, request.grow);
            payload_vgprs = payload_vgprs.min(vgprs);
            allocation_cap = allocation_cap.min(vector);
            growth_cap = growth_cap
                .min(payload_vgpr_cap(processor, kernel_info, &allocation, touched, RegisterGrowth::Always).0);
            let here = allocated.difference(touched);
            free = Some(match free {
                Some(so_far) => so_far.intersection(&here),
                None => here,
            });
            let here = allocation.agprs.difference(touched);
            free_agprs = Some(match free_agprs {
                Some(so_far) => so_far.intersection(&here),
                None => here,
            });
        }
        // Highest first: payloads allocate from the bottom.
        let highest = |set: Option<UnitSet>, file: RegisterFile| -> Vec<u16> {
            let units: Vec<Unit> = set.unwrap_or(UnitSet::EMPTY).in_file(file).iter().collect();
            units.iter().rev().take(wanted).map(|u| u.index()).collect()
        };
        let free = highest(free, RegisterFile::Vgpr);
        let free_agprs = highest(free_agprs, RegisterFile::Agpr);
        // In order: a free VGPR, a free AGPR (seed 004's fallback; costs
        // each payload reading it a whole-wave copy), and with `grow` a VGPR
        // or else an AGPR past the allocation.
        // Growth stays below what a wave may have with its work-group bound.
        let fits = |first: u16| usize::from(first) + wanted <= usize::from(growth_cap);
        // Growing that costs no wave is cheaper than loading from an AGPR at
        // every payload.
        let free_growth =
            request.grow != RegisterGrowth::Never && usize::from(largest) + wanted <= usize::from(payload_vgprs);
        // Sliding (one kernel, nothing shared with others): no occupancy
        // lost, a whole-wave copy where a value must move.
        let slot_indexing = wave_slots::Indexing::for_processor(processor);
        let mut stuck = None;
        let mut slide = || -> Option<Vec<Home>> {
            let ([kernel], []) = (kernels.as_slice(), devices.as_slice()) else {
                stuck = Some("kernels share instrumented device functions".to_string());
                return None;
            };
            let FunctionKind::Kernel(index) = lifted.functions[*kernel].kind else { return None };
            let function_liveness = &liveness.functions[*kernel];
            let allocation = allocation(code_object, &code_object.kernels[index], &function_liveness.touched);
            let vgprs = vgprs_for_values(processor, &allocation, &function_liveness.touched);
            let function = &lifted.functions[*kernel];
            match sliding::slide(
                function,
                &lifted.isa,
                function_liveness,
                &vgprs,
                &allocation.sgprs,
                request.work_item_ids,
            ) {
                Ok(slid) => {
                    let mut homes = vec![Home::Sliding(slid.sva.location[0])];
                    homes.extend(slid.work_item_ids.as_ref().map(|t| Home::Sliding(t.location[0])));
                    placement.sliding.insert(*kernel, slid);
                    Some(homes)
                }
                Err(s) => {
                    let at = function.instructions().nth(s.instruction).map_or(0, |i| i.address);
                    stuck = Some(format!(
                        "sliding between free VGPRs stops at instruction {} (0x{at:x}): {}",
                        s.instruction, s.why
                    ));
                    None
                }
            }
        };
        let homes: Option<Vec<Home>> = if free.len() == wanted {
            Some(free.iter().map(|v| Home::Free(*v)).collect())
        } else if free_growth {
            Some((0..wanted as u16).map(|i| Home::Grown(largest + i)).collect())
        } else if free_agprs.len() == wanted && has_agprs {
            Some(free_agprs.iter().map(|a| Home::Agpr(*a)).collect())
        } else if let Some(homes) = slide() {
            Some(homes)
        } else if request.grow == RegisterGrowth::Always && fits(largest) {
            Some((0..wanted as u16).map(|i| Home::Grown(largest + i)).collect())
        } else if request.grow == RegisterGrowth::Always
            && has_agprs
            && usize::from(largest_agprs) + wanted <= usize::from(MAX_VGPRS)
        {
            Some((0..wanted as u16).map(|i| Home::GrownAgpr(largest_agprs + i)).collect())
        } else if slot_indexing.is_some() {
            // The last resort: memory, found through the wave's hardware
            // id (and its XCC's, gfx940+).
            Some(vec![Home::WaveSlot; wanted])
        } else {
            None
        };
        let mut problem = None;
        if homes.is_none() {
            let names: Vec<&str> = kernels.iter().map(|k| lifted.functions[*k].name.as_str()).collect();
            let shared = if names.len() > 1 {
                format!(" (kernels sharing instrumented device functions: {})", names.join(", "))
            } else {
                String::new()
            };
            let stuck = stuck.map(|s| format!(", {s}")).unwrap_or_default();
            let or_agpr = if has_agprs { " or AGPR" } else { "" };
            problem = Some(match request.grow {
                RegisterGrowth::Always => format!(
                    "no VGPR{or_agpr} is free for the whole kernel{stuck}, and the allocation cannot grow past \
                     the {growth_cap} VGPRs a wave may have with the kernel's work-group size{shared}"
                ),
                RegisterGrowth::FreeOfOccupancy => format!(
                    "no VGPR{or_agpr} is free for the whole kernel ({largest} VGPRs allocated){stuck}{shared}, and \
                     growing the allocation would cost occupancy; rerun with --grow-registers=always to accept \
                     fewer waves per SIMD"
                ),
                RegisterGrowth::Never => format!(
                    "no VGPR{or_agpr} is free for the whole kernel ({largest} VGPRs allocated){stuck}{shared}; rerun \
                     without --grow-registers=never to let the allocation grow"
                ),
            });
        }
        let homes = homes.unwrap_or_default();
        let (sva, work_item_ids) = if problem.is_some() {
            (None, None)
        } else {
            (homes.first().copied(), if request.work_item_ids { homes.get(1).copied() } else { None })
        };
        // A unified file: a VGPR home past ACCUM_OFFSET moves it, and the
        // AGPRs payloads may park registers in shrink with it.
        if processor.has_unified_register_file() {
            let slid = kernels.first().and_then(|k| placement.sliding.get(k));
            let highest_home = [sva, work_item_ids]
                .iter()
                .flatten()
                .filter_map(|h| h.vgpr())
                .chain(slid.into_iter().flat_map(sliding::Sliding::vgprs))
                .max();
            if let Some(home) = highest_home.filter(|h| *h >= vgpr_limit) {
                agpr_limit = unified.saturating_sub((home + 1).div_ceil(4) * 4).min(agpr_limit);
            }
        }
        let registers = FunctionRegisters {
            sva: sva.and_then(Home::vgpr),
            work_item_ids: work_item_ids.and_then(Home::vgpr),
            in_agprs: sva
                .and_then(Home::agpr)
                .map(|agpr| AgprHomes { sva: agpr, work_item_ids: work_item_ids.and_then(Home::agpr) }),
            in_wave_slot: slot_indexing
                .filter(|_| sva == Some(Home::WaveSlot))
                .map(|indexing| WaveSlotHomes { work_item_ids: work_item_ids == Some(Home::WaveSlot), indexing }),
            // Without AGPRs (gfx900, gfx906) nothing parks, but payloads may
            // still spill live VGPRs below it to scratch.
            vgpr_limit,
            // Growing, payloads may park registers in AGPRs past the
            // allocation too, up to `allocation_cap` (the payload stage's
            // AGPR bound: free of occupancy, a kernel at 256 VGPRs and one
            // wave per SIMD may still take AGPRs; the patch holds the
            // allocation to what a wave of the kernel's work-group size
            // may have).
            agpr_limit: match (has_agprs, request.grow) {
                (false, _) => 0,
                (true, RegisterGrowth::Never) => agpr_limit,
                (true, RegisterGrowth::FreeOfOccupancy) => {
                    agpr_limit.max(agprs_within(processor, payload_vgprs, allocation_cap))
                }
                (true, RegisterGrowth::Always) => MAX_VGPRS,
            },
            payload_vgprs,
            allocation_cap,
        };
        // Functions of unplaced kernels get no homes, only the limits: their
        // payloads that need no SVA still go in.
        for kernel in &kernels {
            placement.kernels.push(KernelPlacement { kernel: *kernel, sva, work_item_ids, problem: problem.clone() });
            placement.functions.insert(*kernel, registers);
        }
        for device in devices {
            placement.functions.insert(device, registers);
        }
    }
    placement.kernels.sort_by_key(|k| k.kernel);
    placement
}

/// Stage sva's text form (`gpuinstr-link instrument --dump-after sva`):
/// where each kernel's SVA and work-item ids live, or why it has none, and
/// the registers each instrumented function's payloads work with.
pub fn render(lifted: &LiftedCodeObject<'_>, placement: &SvaPlacement) -> String {
    use std::fmt::Write;
    let home = |home: Option<Home>| match home {
        None => "-".to_string(),
        Some(Home::Free(v)) => format!("v{v} (free)"),
        Some(Home::Grown(v)) => format!("v{v} (grown)"),
        Some(Home::Agpr(a)) => format!("a{a} (an AGPR)"),
        Some(Home::GrownAgpr(a)) => format!("a{a} (an AGPR, grown)"),
        Some(Home::Sliding(v)) => format!("v{v} at the entry, sliding"),
        Some(Home::WaveSlot) => "the wave's slot in memory".to_string(),
    };
    let mut out = format!("growth: {:?}\n", placement.grow);
    for kernel in &placement.kernels {
        let name = &lifted.functions[kernel.kernel].name;
        write!(out, "kernel {name}: SVA {}, work-item ids {}", home(kernel.sva), home(kernel.work_item_ids)).unwrap();
        if let Some(sliding) = placement.sliding.get(&kernel.kernel) {
            write!(out, ", {} move points", sliding.move_points()).unwrap();
        }
        if let Some(problem) = &kernel.problem {
            write!(out, "; not placed: {problem}").unwrap();
        }
        out.push('\n');
    }
    for (function, registers) in &placement.functions {
        let register = |r: Option<u16>| r.map_or("-".to_string(), |v| format!("v{v}"));
        writeln!(
            out,
            "function {}: SVA {}, work-item ids {}, AGPR homes {}, VGPRs below {}, AGPRs below {}, payload VGPRs \
             below {}, allocation cap {}",
            lifted.functions[*function].name,
            register(registers.sva),
            register(registers.work_item_ids),
            registers.in_agprs.map_or("-".to_string(), |h| format!("a{} {:?}", h.sva, h.work_item_ids)),
            registers.vgpr_limit,
            registers.agpr_limit,
            registers.payload_vgprs,
            registers.allocation_cap,
        )
        .unwrap();
        if let Some(homes) = registers.in_wave_slot {
            let ids = if homes.work_item_ids { " and the work-item ids" } else { "" };
            writeln!(out, "  the SVA{ids} kept in the wave's slot in memory ({})", wave_slots::SYMBOL).unwrap();
        }
    }
    out
}
