//! Registers for a count kept in registers (a plan's `count-in-registers`,
//! docs/plan.md): per kernel, an aligned VGPR pair for each lane's 64-bit
//! count of vector instructions, an aligned SGPR pair for the wave's 64-bit
//! count of scalar ones, and an aligned SGPR pair the counting code uses as
//! its carry and scratch. All six are registers the kernel never reads or
//! writes (seed 000's globally free registers), inside its allocation, and
//! none of the SVA's homes. A kernel that has not got them, calls
//! functions (their code could not tell which kernel's registers to add
//! to) or slides its SVA between free VGPRs keeps calling the hook.

use std::collections::{BTreeMap, BTreeSet};

use crate::stages::lift::{Flow, FunctionKind, LiftedCodeObject};
use crate::stages::liveness::{allocation, Liveness, RegisterFile, Unit, UnitSet};
use crate::stages::load::occupancy;

use super::{vgprs_for_values, SvaPlacement};

/// The registers one kernel keeps its count in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CountRegisters {
    /// v[lanes], v[lanes+1]: each lane's vector instructions (even).
    pub lanes: u16,
    /// s[wave], s[wave+1]: the wave's scalar instructions (even).
    pub wave: u16,
    /// s[scratch], s[scratch+1]: the carry of the lanes' add, a saved SCC
    /// or EXEC, the global's address (even).
    pub scratch: u16,
}

impl CountRegisters {
    /// The six registers, which the counting code alone writes.
    pub fn units(&self) -> UnitSet {
        let mut units = UnitSet::EMPTY;
        for k in 0..2 {
            units.insert(Unit::vgpr(self.lanes + k));
            units.insert(Unit::sgpr(self.wave + k));
            units.insert(Unit::sgpr(self.scratch + k));
        }
        units
    }
}

/// VGPRs dead at one of a kernel's `s_endpgm`, where the counts are added
/// to the global: a zero offset and one for the wave count's high half.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExitRegisters {
    /// The `s_endpgm`'s index in the kernel.
    pub instruction: usize,
    pub offset: u16,
    pub high: u16,
}

/// Where each kernel with counting points keeps the count, and why the
/// others cannot.
#[derive(Clone, Debug, Default)]
pub struct CountPlacement {
    /// The tool global the counts are added to.
    pub global: String,
    pub kernels: BTreeMap<usize, (CountRegisters, Vec<ExitRegisters>)>,
    /// Kernels whose counting points call the hook instead, and why.
    pub hooks_called: BTreeMap<usize, String>,
}

impl CountPlacement {
    /// The counting registers of `function`, when it keeps a count.
    pub fn registers(&self, function: usize) -> Option<CountRegisters> {
        self.kernels.get(&function).map(|(registers, _)| *registers)
    }

    /// Makes the counting registers live at every instruction of their
    /// kernels, so no later stage (payload registers, parking, branch
    /// relaxation) takes them and the payload check holds every other
    /// payload to giving them back.
    pub fn keep_live(&self, liveness: &mut Liveness) {
        for (kernel, (registers, _)) in &self.kernels {
            let units = registers.units();
            let function = &mut liveness.functions[*kernel];
            for set in function.live_in.iter_mut().chain(function.live_out.iter_mut()) {
                set.union_with(&units);
            }
            function.touched.union_with(&units);
        }
    }
}

/// Places the count of `global` for every kernel in `kernels` (those with
/// counting points), after the SVA.
pub fn place_counts(
    lifted: &LiftedCodeObject<'_>,
    liveness: &Liveness,
    sva: &SvaPlacement,
    kernels: &BTreeSet<usize>,
    global: &str,
) -> CountPlacement {
    let mut placement = CountPlacement { global: global.to_string(), ..CountPlacement::default() };
    for &kernel in kernels {
        match place_one(lifted, liveness, sva, kernel) {
            Ok(registers) => {
                placement.kernels.insert(kernel, registers);
            }
            Err(why) => {
                placement.hooks_called.insert(kernel, why);
            }
        }
    }
    placement
}

fn place_one(
    lifted: &LiftedCodeObject<'_>,
    liveness: &Liveness,
    sva: &SvaPlacement,
    kernel: usize,
) -> Result<(CountRegisters, Vec<ExitRegisters>), String> {
    let function = &lifted.functions[kernel];
    let FunctionKind::Kernel(index) = function.kind else {
        return Err("a device function's count goes to the hook".into());
    };
    if !function.calls.is_empty() {
        return Err("it calls functions".into());
    }
    if function.entry_is_branch_target() {
        // The clearing code at the entry would run again on each jump there.
        return Err("its first instruction is a branch target".into());
    }
    if sva.sliding.contains_key(&kernel) {
        return Err("its SVA slides between free VGPRs".into());
    }
    let touched = &liveness.functions[kernel].touched;
    let code_object = lifted.code_object;
    let allocation = allocation(code_object, &code_object.kernels[index], touched);
    let mut free_vgprs = vgprs_for_values(liveness.processor, &allocation, touched).difference(touched);
    if let Some(registers) = sva.functions.get(&kernel) {
        for vgpr in [registers.sva, registers.work_item_ids].into_iter().flatten() {
            free_vgprs.remove(Unit::vgpr(vgpr));
        }
    }
    // Not the SGPRs the hardware sets either: the preamble and payloads
    // may read them where the application does not.
    let inputs = crate::stages::liveness::kernel_inputs(&code_object.kernels[index].descriptor, liveness.processor);
    let free_sgprs = allocation.sgprs.difference(touched).difference(&inputs);
    // Highest first: payloads and the preamble take registers from the bottom.
    let pairs = |free: &UnitSet, file: RegisterFile| -> Vec<u16> {
        let units: Vec<u16> = free.in_file(file).iter().map(|u| u.index()).collect();
        units.iter().rev().copied().filter(|r| r % 2 == 0 && units.contains(&(r + 1))).collect()
    };
    let processor = liveness.processor;
    let homes = sva.functions.get(&kernel).copied().unwrap_or_default();
    let mut vgpr_pairs = pairs(&free_vgprs, RegisterFile::Vgpr);
    let allocated = vgprs_for_values(processor, &allocation, touched);
    // Else past the allocation, as far as it may grow without costing
    // occupancy (stage sva's cap), and not into AGPRs a unified file holds.
    let agprs_used = !touched.in_file(RegisterFile::Agpr).is_empty();
    if vgpr_pairs.is_empty() && !(agprs_used && processor.has_unified_register_file()) {
        let above_homes = [homes.sva, homes.work_item_ids].into_iter().flatten().map(|v| v + 1).max().unwrap_or(0);
        let first = (allocated.len() as u16).max(above_homes).next_multiple_of(2);
        if first + 2 <= homes.payload_vgprs {
            vgpr_pairs.push(first);
        }
    }
    let mut sgpr_pairs = pairs(&free_sgprs, RegisterFile::Sgpr);
    // SGPRs past the allocation, while a SIMD holds as many waves (the
    // extra SGPRs, VCC and flat scratch, sit above them).
    let reserved = allocation.reserved_sgprs;
    let waves = |sgprs: usize| occupancy::waves_per_simd(processor, 1, sgprs + reserved);
    let now = waves(allocation.sgprs.len());
    let mut next = (allocation.sgprs.len() as u16).next_multiple_of(2);
    while sgpr_pairs.len() < 2 && usize::from(next) + 2 + reserved <= 102 && waves(usize::from(next) + 2) >= now {
        sgpr_pairs.push(next);
        next += 2;
    }
    let registers = match (vgpr_pairs.first(), sgpr_pairs.first(), sgpr_pairs.get(1)) {
        (Some(&lanes), Some(&wave), Some(&scratch)) => CountRegisters { lanes, wave, scratch },
        (None, _, _) => {
            return Err(format!(
                "no two aligned VGPRs are free for the whole kernel ({} VGPRs allocated), and growing the \
                 allocation would cost occupancy",
                allocated.len()
            ))
        }
        _ => {
            return Err(format!(
                "no four aligned SGPRs are free for the whole kernel ({} SGPRs allocated), and growing the \
                 allocation would cost occupancy",
                allocation.sgprs.len()
            ))
        }
    };
    // Each exit needs two VGPRs nothing reads any more.
    let mut exits = Vec::new();
    for (index, instruction) in function.instructions().enumerate() {
        if !matches!(instruction.flow, Flow::EndProgram) {
            continue;
        }
        let dead = allocated.difference(&liveness.functions[kernel].live_in[index]).difference(&registers.units());
        let dead: Vec<u16> = dead.in_file(RegisterFile::Vgpr).iter().map(|u| u.index()).collect();
        match dead.as_slice() {
            [offset, high, ..] => exits.push(ExitRegisters { instruction: index, offset: *offset, high: *high }),
            _ => {
                return Err(format!(
                    "fewer than two VGPRs are dead at its s_endpgm at 0x{:x} to add the count with",
                    instruction.address
                ))
            }
        }
    }
    Ok((registers, exits))
}

/// The text form, after stage sva's (`--dump-after sva`).
pub fn render(lifted: &LiftedCodeObject<'_>, placement: &CountPlacement) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for (kernel, (r, _)) in &placement.kernels {
        writeln!(
            out,
            "kernel {}: {} counted in v[{}:{}] (lanes), s[{}:{}] (wave), scratch s[{}:{}]",
            lifted.functions[*kernel].name,
            placement.global,
            r.lanes,
            r.lanes + 1,
            r.wave,
            r.wave + 1,
            r.scratch,
            r.scratch + 1
        )
        .unwrap();
    }
    for (kernel, why) in &placement.hooks_called {
        writeln!(out, "kernel {}: {} counted by the hook: {why}", lifted.functions[*kernel].name, placement.global)
            .unwrap();
    }
    out
}
