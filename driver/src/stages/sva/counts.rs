//! Registers for a count kept in registers (a plan's `count-in-registers`,
//! docs/plan.md), per kernel, in one of two ways:
//! - **lanes**: an aligned VGPR pair for each lane's 64-bit count of
//!   vector instructions and an aligned SGPR pair for the wave's 64-bit
//!   count of scalar ones; a point costs two VALU adds and two SALU adds.
//! - **wave**: the wave's SGPR pair alone, each point adding
//!   `popcount(EXEC) * vector + scalar` (three to five SALU instructions);
//!   no VGPRs, and a cheaper entry and exit (one atomic from one lane).
//!
//! Both take an aligned SGPR pair as scratch (the carry, a saved SCC or
//! EXEC, the global's address). The cheaper way is chosen per kernel from
//! its points' amounts, a point on a loop weighing [`LOOP_WEIGHT`] times one
//! that runs once; the wave way where no VGPR pair is free. All registers
//! are ones the kernel never reads or writes (seed 000's globally free
//! registers), inside its allocation, and none of the SVA's homes. A kernel
//! that has not got them, calls functions (their code could not tell which
//! kernel's registers to add to) or slides its SVA between free VGPRs keeps
//! calling the hook.

use std::collections::BTreeMap;

use crate::stages::lift::cfg::blocks_on_cycles;
use crate::stages::lift::{Flow, FunctionKind, LiftedCodeObject};
use crate::stages::liveness::{allocation, Liveness, RegisterFile, Unit, UnitSet};
use crate::stages::load::occupancy;

use super::{vgprs_for_values, SvaPlacement};

/// The registers one kernel keeps its count in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CountRegisters {
    /// v[lanes], v[lanes+1]: each lane's vector instructions (even); none
    /// where the wave counts them itself (`popcount(EXEC)` at each point).
    pub lanes: Option<u16>,
    /// s[wave], s[wave+1]: the wave's count (even): its scalar
    /// instructions, and its vector ones where `lanes` is none.
    pub wave: u16,
    /// s[scratch], s[scratch+1]: the carry of the lanes' add, a saved SCC
    /// or EXEC, the popcount, the global's address (even).
    pub scratch: u16,
}

impl CountRegisters {
    /// The registers the counting code alone writes.
    pub fn units(&self) -> UnitSet {
        let mut units = UnitSet::EMPTY;
        for k in 0..2 {
            if let Some(lanes) = self.lanes {
                units.insert(Unit::vgpr(lanes + k));
            }
            units.insert(Unit::sgpr(self.wave + k));
            units.insert(Unit::sgpr(self.scratch + k));
        }
        units
    }

    /// VGPRs each exit needs dead: the atomic's zero offset and the wave's
    /// count (its high half only, with lanes: lane 0's count takes it).
    pub fn exit_vgprs(&self) -> usize {
        if self.lanes.is_some() {
            2
        } else {
            3
        }
    }
}

/// VGPRs dead at one of a kernel's `s_endpgm`, where the counts are added
/// to the global ([`CountRegisters::exit_vgprs`] of them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExitRegisters {
    /// The `s_endpgm`'s index in the kernel.
    pub instruction: usize,
    /// The zero offset, then per lane the wave count's high half, per wave
    /// an aligned pair for the count.
    pub vgprs: Vec<u16>,
}

/// A counting point of a kernel, for choosing how it counts: what it adds
/// once per wave and once per active lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CountedPoint {
    pub instruction: usize,
    pub scalar: u32,
    pub vector: u32,
}

/// A wave's lanes: counting per wave, a point adds up to this many times
/// its vector amount, which must fit 32 bits.
pub const WAVE_LANES: u32 = 64;

/// Whether a point adding `vector` per lane can be counted per wave.
pub fn fits_per_wave(vector: u32) -> bool {
    vector.checked_mul(WAVE_LANES).is_some()
}

/// How much more a point on a loop weighs than one run once per wave.
pub const LOOP_WEIGHT: u64 = 16;

/// Instructions a wave runs once at the entry and an exit beyond its
/// points' (register_counts' code, a managed global reached pc-relatively):
/// per lane, clearing both files (6, of which the first point's own 4 when
/// it sets the count) and merging the wave's count into lane 0 before the
/// atomic (12); per wave, clearing one pair (1, or the first point's 1 for
/// its 64-bit add) and one lane's atomic (9).
const FIXED_LANES: u64 = 14;
const FIXED_WAVE: u64 = 9;

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

/// Which way a kernel counts: forced (tests compare both on one kernel) or
/// the cheaper by [`wave_costs_less`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CountWay {
    #[default]
    Cheaper,
    Lanes,
    Wave,
}

/// Instructions a point adds counting per lane (SCC saves aside: two
/// more where SCC is live and `scalar` is added).
pub fn lanes_point_cost(scalar: u32, vector: u32) -> u64 {
    let vector_cost = match vector {
        0 => 0,
        1..=64 => 2,
        _ => 3,
    };
    vector_cost + if scalar > 0 { 2 } else { 0 }
}

/// Instructions a point adds counting per wave (two more where SCC is
/// live and anything is added).
pub fn wave_point_cost(scalar: u32, vector: u32) -> u64 {
    let scale = match vector {
        0 => return if scalar > 0 { 2 } else { 0 },
        1 => u64::from(scalar > 0),
        2 | 4 | 8 | 16 => 1,
        _ => 1 + u64::from(scalar > 0),
    };
    1 + scale + 2
}

/// Whether counting per wave costs a wave fewer instructions than per
/// lane, over `points` (`on_loop`: the point runs many times; `scc_live`:
/// SCC is live there).
pub fn wave_costs_less(points: impl IntoIterator<Item = (CountedPoint, bool, bool)>) -> bool {
    let (mut lanes, mut wave) = (FIXED_LANES, FIXED_WAVE);
    for (point, on_loop, scc_live) in points {
        let weight = if on_loop { LOOP_WEIGHT } else { 1 };
        let (s, v) = (point.scalar, point.vector);
        let lanes_scc = if scc_live && s > 0 { 2 } else { 0 };
        let wave_scc = if scc_live && (s > 0 || v > 0) { 2 } else { 0 };
        lanes += weight * (lanes_point_cost(s, v) + lanes_scc);
        wave += weight * (wave_point_cost(s, v) + wave_scc);
    }
    wave < lanes
}

/// Places the count of `global` for every kernel in `points` (those with
/// counting points, and the points), after the SVA.
pub fn place_counts(
    lifted: &LiftedCodeObject<'_>,
    liveness: &Liveness,
    sva: &SvaPlacement,
    points: &BTreeMap<usize, Vec<CountedPoint>>,
    global: &str,
    way: CountWay,
) -> CountPlacement {
    let mut placement = CountPlacement { global: global.to_string(), ..CountPlacement::default() };
    for (&kernel, points) in points {
        match place_one(lifted, liveness, sva, kernel, points, way) {
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
    points: &[CountedPoint],
    way: CountWay,
) -> Result<(CountRegisters, Vec<ExitRegisters>), String> {
    let function = &lifted.functions[kernel];
    let FunctionKind::Kernel(index) = function.kind else {
        return Err("a device function's count goes to the hook".into());
    };
    // Subroutines of its own are its code; other functions may use any
    // register.
    if !function.calls.is_empty() && !liveness.functions[kernel].calls_only_its_own_code {
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
        let mut first = (allocated.len() as u16).max(above_homes).next_multiple_of(2);
        while first + 2 <= homes.payload_vgprs
            && (touched.contains(Unit::vgpr(first)) || touched.contains(Unit::vgpr(first + 1)))
        {
            first += 2;
        }
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
    // (The code may touch SGPRs past the allocation the descriptor and
    // metadata give: those are not free.)
    let untouched =
        |first: u16, file: fn(u16) -> Unit| !touched.contains(file(first)) && !touched.contains(file(first + 1));
    while sgpr_pairs.len() < 2 && usize::from(next) + 2 + reserved <= 102 && waves(usize::from(next) + 2) >= now {
        if untouched(next, Unit::sgpr) {
            sgpr_pairs.push(next);
        }
        next += 2;
    }
    let (Some(&wave), Some(&scratch)) = (sgpr_pairs.first(), sgpr_pairs.get(1)) else {
        return Err(format!(
            "no four aligned SGPRs are free for the whole kernel ({} SGPRs allocated), and growing the \
             allocation would cost occupancy",
            allocation.sgprs.len()
        ));
    };
    let live_in = &liveness.functions[kernel].live_in;
    let per_wave_fits = points.iter().all(|p| fits_per_wave(p.vector));
    let lanes = match way {
        CountWay::Wave if !per_wave_fits => {
            return Err("a point adds more per lane than 64 lanes' sum fits in 32 bits, counting per wave".into())
        }
        CountWay::Wave => None,
        CountWay::Lanes => Some(*vgpr_pairs.first().ok_or_else(|| {
            format!(
                "no two aligned VGPRs are free for the whole kernel ({} VGPRs allocated) to count per lane in",
                allocated.len()
            )
        })?),
        CountWay::Cheaper => {
            let on_cycle = blocks_on_cycles(&function.blocks);
            let block_of: Vec<usize> = function
                .blocks
                .iter()
                .enumerate()
                .flat_map(|(b, block)| std::iter::repeat_n(b, block.instructions.len()))
                .collect();
            let scc = Unit::special("SCC");
            let weighed = points.iter().map(|p| {
                let on_loop = block_of.get(p.instruction).is_some_and(|b| on_cycle[*b]);
                (*p, on_loop, live_in.get(p.instruction).is_some_and(|l| l.contains(scc)))
            });
            let per_wave = per_wave_fits && (vgpr_pairs.is_empty() || wave_costs_less(weighed));
            match (per_wave, vgpr_pairs.first()) {
                (true, _) => None,
                (false, Some(&lanes)) => Some(lanes),
                (false, None) => {
                    return Err(format!(
                        "no two aligned VGPRs are free for the whole kernel ({} VGPRs allocated) to count per lane, \
                         and a point adds more per lane than counting per wave fits in 32 bits",
                        allocated.len()
                    ))
                }
            }
        }
    };
    // Each exit needs VGPRs nothing reads any more.
    let exits = |registers: CountRegisters| -> Result<Vec<ExitRegisters>, String> {
        let mut exits = Vec::new();
        for (index, instruction) in function.instructions().enumerate() {
            if !matches!(instruction.flow, Flow::EndProgram) {
                continue;
            }
            let dead = allocated.difference(&live_in[index]).difference(&registers.units());
            let dead: Vec<u16> = dead.in_file(RegisterFile::Vgpr).iter().map(|u| u.index()).collect();
            let vgprs = match registers.lanes {
                Some(_) => dead.get(..2).map(<[u16]>::to_vec),
                // An aligned pair for the count, and the offset.
                None => dead.iter().find(|&&v| v % 2 == 0 && dead.contains(&(v + 1))).and_then(|&low| {
                    let offset = dead.iter().find(|&&v| v != low && v != low + 1)?;
                    Some(vec![*offset, low, low + 1])
                }),
            };
            let Some(vgprs) = vgprs else {
                return Err(format!(
                    "fewer than {} VGPRs are dead at its s_endpgm at 0x{:x} to add the count with",
                    registers.exit_vgprs(),
                    instruction.address
                ));
            };
            exits.push(ExitRegisters { instruction: index, vgprs });
        }
        Ok(exits)
    };
    let registers = CountRegisters { lanes, wave, scratch };
    match (exits(registers), vgpr_pairs.first()) {
        (Ok(exits), _) => Ok((registers, exits)),
        // Per lane needs fewer dead VGPRs at the exits.
        (Err(_), Some(&lanes)) if way == CountWay::Cheaper && registers.lanes.is_none() => {
            let registers = CountRegisters { lanes: Some(lanes), ..registers };
            Ok((registers, exits(registers)?))
        }
        (Err(why), _) => Err(why),
    }
}

/// The text form, after stage sva's (`--dump-after sva`).
pub fn render(lifted: &LiftedCodeObject<'_>, placement: &CountPlacement) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for (kernel, (r, _)) in &placement.kernels {
        let name = &lifted.functions[*kernel].name;
        let global = &placement.global;
        let (w, c) = (r.wave, r.scratch);
        match r.lanes {
            Some(l) => writeln!(
                out,
                "kernel {name}: {global} counted per lane in v[{l}:{}] (lanes), s[{w}:{}] (wave), scratch s[{c}:{}]",
                l + 1,
                w + 1,
                c + 1
            ),
            None => {
                writeln!(out, "kernel {name}: {global} counted per wave in s[{w}:{}], scratch s[{c}:{}]", w + 1, c + 1)
            }
        }
        .unwrap();
    }
    for (kernel, why) in &placement.hooks_called {
        writeln!(out, "kernel {}: {} counted by the hook: {why}", lifted.functions[*kernel].name, placement.global)
            .unwrap();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(scalar: u32, vector: u32) -> CountedPoint {
        CountedPoint { instruction: 0, scalar, vector }
    }

    #[test]
    fn straight_code_counts_per_wave_and_loops_of_wide_regions_per_lane() {
        // saxpy: three regions run once each (the entry, the `if`, the end).
        let saxpy = [(point(11, 2), false, false), (point(3, 12), false, false), (point(1, 0), false, false)];
        assert!(wave_costs_less(saxpy));
        // A loop of regions whose vector amounts need a multiply: each
        // trip costs a wave one instruction more than per lane.
        let looping = [(point(1, 2), false, false), (point(2, 9), true, false), (point(1, 13), true, false)];
        assert!(!wave_costs_less(looping));
        // Where SCC is live across the loop, per lane saves it only for
        // its scalar adds.
        assert!(!wave_costs_less([(point(0, 3), true, true)]));
        // A loop of regions with scalar and power-of-two vector amounts
        // costs the same either way: the cheaper entry and exit decide.
        assert!(wave_costs_less([(point(2, 4), true, false), (point(1, 1), true, false)]));
        assert!(fits_per_wave(1 << 25) && !fits_per_wave(1 << 26));
    }
}
