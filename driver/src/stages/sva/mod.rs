//! Stage 4, sva: where the State Value Array (docs/sva.md) and the packed
//! work-item ids live in each instrumented function.
//!
//! A home is a VGPR that the kernel, and everything it may call, never reads
//! or writes, inside the kernel's allocation (seed 000's globally free
//! registers; 66% of rocSPARSE/rocRAND gfx90a kernels have one, docs/
//! liveness.md). On gfx90a, a kernel that uses no AGPR may also take a VGPR
//! from the AGPR part of its unified allocation. Kernels that share an instrumented device function must
//! agree on the register, so they are placed together. When no register is
//! free, `grow` takes the first VGPR past the allocation (the patch stage
//! raises it); otherwise the kernels get a problem and are left alone, and
//! the other kernels are still instrumented.
//!
//! Not yet: seed 004's fallbacks (an AGPR on gfx908, the SVA spilled to
//! scratch) and moving the SVA between locally free registers.

use std::collections::{BTreeMap, BTreeSet};

use crate::analyze::{allocation, reachable_functions, MAX_VGPRS};
use crate::payloads::FunctionRegisters;
use crate::stages::lift::{FunctionKind, LiftedCodeObject};
use crate::stages::liveness::{Liveness, RegisterFile, Unit, UnitSet};

/// Where a value lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Home {
    /// A VGPR inside the allocation that nothing uses.
    Free(u16),
    /// A VGPR past the allocation: the kernel's VGPR count must grow to include it.
    Grown(u16),
}

impl Home {
    pub fn vgpr(self) -> u16 {
        match self {
            Home::Free(v) | Home::Grown(v) => v,
        }
    }
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
    /// The registers each instrumented function (kernel or device function) uses.
    pub functions: BTreeMap<usize, FunctionRegisters>,
}

/// What to place.
#[derive(Clone, Debug, Default)]
pub struct SvaRequest {
    /// Functions with instrumentation points.
    pub instrumented: BTreeSet<usize>,
    /// Whether payloads need the work-item ids (a second VGPR).
    pub work_item_ids: bool,
    /// May a kernel's VGPR allocation grow?
    pub grow: bool,
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

/// Places the SVA (and the work-item id register when asked) for every
/// kernel that has points or reaches a device function that has.
pub fn place(lifted: &LiftedCodeObject<'_>, liveness: &Liveness, request: &SvaRequest) -> SvaPlacement {
    let code_object = lifted.code_object;
    let mut placement = SvaPlacement::default();
    let wanted = 1 + usize::from(request.work_item_ids);
    for (kernels, devices) in groups(lifted, request) {
        // VGPRs free in every kernel of the group, and the largest allocation.
        let mut free: Option<UnitSet> = None;
        let mut largest = 0u16;
        for kernel in &kernels {
            let FunctionKind::Kernel(index) = lifted.functions[*kernel].kind else { continue };
            let touched = &liveness.functions[*kernel].touched;
            let allocation = allocation(code_object, &code_object.kernels[index], touched);
            // gfx90a: one file split at ACCUM_OFFSET. A kernel that uses no
            // AGPR can hold VGPRs in all of it (the patch moves ACCUM_OFFSET;
            // the allocation, and so occupancy, stays the same).
            let allocated =
                if code_object.target.processor == "gfx90a" && touched.in_file(RegisterFile::Agpr).is_empty() {
                    UnitSet::range(RegisterFile::Vgpr, 0, (allocation.vgprs.len() + allocation.agprs.len()) as u16)
                } else {
                    allocation.vgprs
                };
            largest = largest.max(allocated.len() as u16);
            let here = allocated.difference(touched);
            free = Some(match free {
                Some(so_far) => so_far.intersection(&here),
                None => here,
            });
        }
        let free = free.unwrap_or(UnitSet::EMPTY).in_file(RegisterFile::Vgpr);
        // Highest first: payloads allocate from the bottom.
        let free: Vec<Unit> = free.iter().collect();
        let mut homes: Vec<Home> = free.iter().rev().take(wanted).map(|u| Home::Free(u.index())).collect();
        let mut problem = None;
        if homes.len() < wanted {
            let missing = wanted - homes.len();
            if request.grow && usize::from(largest) + missing <= usize::from(MAX_VGPRS) {
                homes.extend((0..missing as u16).map(|i| Home::Grown(largest + i)));
            } else {
                let names: Vec<&str> = kernels.iter().map(|k| lifted.functions[*k].name.as_str()).collect();
                problem = Some(if request.grow {
                    format!(
                        "no VGPR is free in {} and the allocation cannot grow past {} VGPRs",
                        names.join(", "),
                        MAX_VGPRS
                    )
                } else {
                    format!(
                        "no VGPR is free for the whole kernel{} ({} VGPRs allocated{}); rerun with --grow-registers \
                         to raise the allocation",
                        if names.len() > 1 { "s that share instrumented device functions" } else { "" },
                        largest,
                        if names.len() > 1 { format!(": {}", names.join(", ")) } else { String::new() },
                    )
                });
            }
        }
        let (sva, work_item_ids) = if problem.is_some() {
            (None, None)
        } else {
            (homes.first().copied(), if request.work_item_ids { homes.get(1).copied() } else { None })
        };
        let registers = FunctionRegisters { sva: sva.map(Home::vgpr), work_item_ids: work_item_ids.map(Home::vgpr) };
        for kernel in &kernels {
            placement.kernels.push(KernelPlacement { kernel: *kernel, sva, work_item_ids, problem: problem.clone() });
            if problem.is_none() {
                placement.functions.insert(*kernel, registers);
            }
        }
        if problem.is_none() {
            for device in devices {
                placement.functions.insert(device, registers);
            }
        }
    }
    placement.kernels.sort_by_key(|k| k.kernel);
    placement
}
