//! The end of stage 8: llc's assembly of the payload module becomes one
//! instruction list per payload, ready to splice in front of its point.
//!
//! - The return (`s_setpc_b64 s[30:31]`) goes: control falls through to the
//!   application's instruction.
//! - Labels get a payload prefix, unique in any code object.
//! - A payload that uses stack runs on the instrumentation stack: its entry
//!   saves the application's frame registers (s0-s3 and s32; s32 alone with
//!   architected flat scratch) live at the point into the SVA and loads the
//!   instrumentation frame from it; every exit restores them (docs/sva.md,
//!   frame values).

use super::physical::Frame;
use crate::stages::liveness::{Unit, UnitSet};

/// The wait LLVM puts at the entry of every function that is not a kernel.
pub const LLVM_ENTRY_WAIT: &str = "s_waitcnt vmcnt(0) expcnt(0) lgkmcnt(0)";

/// The machine code of one payload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FinalPayload {
    /// Instructions and labels, as llvm-mc reads them.
    pub code: Vec<String>,
    /// Bytes of instrumentation stack the payload needs.
    pub scratch_bytes: u32,
    /// Registers llc counted (the payload alone).
    pub sgprs: u32,
    pub vgprs: u32,
    pub agprs: u32,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FinalCodeError {
    #[error("llc's assembly has no function `{0}`")]
    Missing(String),
    #[error(
        "{0}: the payload needs {1} bytes of stack, which it reaches through the State Value Array, but this \
         function has no SVA register"
    )]
    StackWithoutSva(String, u32),
}

/// llc's assembly split by function: each function's body lines and the
/// resource comments after it. Read once for all payloads.
pub struct AssemblyFunctions<'t> {
    functions: std::collections::HashMap<&'t str, (Vec<&'t str>, Vec<&'t str>)>,
}

impl<'t> AssemblyFunctions<'t> {
    pub fn parse(assembly: &'t str) -> Self {
        let mut functions = std::collections::HashMap::new();
        let mut current: Option<(&'t str, Vec<&'t str>, Vec<&'t str>, bool)> = None;
        for line in assembly.lines() {
            let code = line.split(';').next().unwrap_or("").trim_end();
            if !line.starts_with(['\t', ' ', '.', ';']) && code.ends_with(':') {
                if let Some((name, body, info, _)) = current.take() {
                    functions.insert(name, (body, info));
                }
                current = Some((&code[..code.len() - 1], Vec::new(), Vec::new(), false));
                continue;
            }
            let Some((_, body, info, ended)) = current.as_mut() else { continue };
            if line.starts_with(".Lfunc_end") {
                *ended = true;
            } else if *ended {
                info.push(line);
            } else {
                body.push(line);
            }
        }
        if let Some((name, body, info, _)) = current {
            functions.insert(name, (body, info));
        }
        AssemblyFunctions { functions }
    }

    fn get(&self, name: &str) -> Option<(&[&'t str], &[&'t str])> {
        self.functions.get(name).map(|(body, info)| (body.as_slice(), info.as_slice()))
    }
}

fn comment_number(info: &[&str], key: &str) -> u32 {
    info.iter()
        .find_map(|l| l.trim().strip_prefix(&format!("; {key}:")).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0)
}

/// Extracts payload `index` (function `name`) from llc's assembly.
///
/// `writes_application_registers`: the hooks write registers the
/// application reads after the payload (`writeReg`); then LLVM's wait
/// before the return stays, since a load of the payload may still be
/// writing one.
#[allow(clippy::too_many_arguments)]
pub fn extract(
    assembly: &AssemblyFunctions<'_>,
    name: &str,
    index: usize,
    frame: Frame,
    live: &UnitSet,
    sva: Option<u16>,
    save_frame: &UnitSet,
    writes_application_registers: bool,
) -> Result<FinalPayload, FinalCodeError> {
    let (body, info) = assembly.get(name).ok_or_else(|| FinalCodeError::Missing(name.to_string()))?;
    let end_label = end_label(index);
    let rename = |text: &str| text.replace(".LBB", &format!(".Lgpuinstr_payload{index}_BB"));
    let mut code: Vec<String> = Vec::new();
    for line in body {
        let text = line.split(';').next().unwrap_or("").trim();
        if text.is_empty() || (text.starts_with('.') && !text.ends_with(':')) {
            continue;
        }
        code.push(rename(text));
    }
    // LLVM waits for every counter at a device function's entry, not
    // knowing what its caller has in flight; the payload stage knows, and
    // puts the wait the payload's registers need first instead.
    if code.first().is_some_and(|l| l == LLVM_ENTRY_WAIT) {
        code.remove(0);
    }
    // LLVM may report a frame its code never touches (LLVM 17 keeps dead
    // stack objects): such a payload needs no stack, and can be a template.
    let scratch_bytes = match touches_frame(&code) {
        true => comment_number(info, "ScratchSize"),
        false => 0,
    };
    // Before a return LLVM waits for the function's memory operations (but
    // stores' on targets with a counter of their own). Nothing after the
    // payload needs them: its loads' results are used inside it, and its
    // atomics and stores stay in flight while the application goes on (in
    // order, so the application's own waits still count right). Kept when
    // hook-written application registers or stack reloads may still land.
    if !writes_application_registers && scratch_bytes == 0 {
        let mut kept = Vec::with_capacity(code.len());
        for (position, line) in code.iter().enumerate() {
            let before_return = code.get(position + 1).is_some_and(|next| next.starts_with("s_setpc_b64"));
            if !(before_return && line.starts_with("s_waitcnt")) {
                kept.push(line.clone());
            }
        }
        code = kept;
    }
    let returns = code.iter().filter(|l| l.starts_with("s_setpc_b64")).count();
    if code.last().is_some_and(|l| l.starts_with("s_setpc_b64")) && returns == 1 {
        code.pop();
    } else {
        for line in code.iter_mut().filter(|l| l.starts_with("s_setpc_b64")) {
            *line = format!("s_branch {end_label}");
        }
        code.push(format!("{end_label}:"));
    }
    let mut payload = FinalPayload {
        code,
        scratch_bytes,
        sgprs: comment_number(info, "NumSgprs"),
        vgprs: comment_number(info, "NumVgprs"),
        agprs: comment_number(info, "NumAgprs"),
    };
    if scratch_bytes > 0 {
        let sva = sva.ok_or_else(|| FinalCodeError::StackWithoutSva(name.to_string(), scratch_bytes))?;
        wrap_frame(&mut payload, frame, live, sva, &end_label, save_frame);
    } else if let (false, Some(sva)) = (save_frame.is_empty(), sva) {
        // No frame to swap in, but hooks read the application's s0-s3/s32
        // from the save lanes.
        let mut saves = frame_saves(frame, sva, |sgpr| save_frame.contains(Unit::sgpr(sgpr)));
        saves.append(&mut payload.code);
        payload.code = saves;
    }
    Ok(payload)
}

/// Whether a function's code reaches its stack: it names the scratch
/// resource (s0-s3), the stack or frame pointer (s32, s33), or has a
/// scratch instruction. Where s0-s3 are ordinary registers (architected
/// flat scratch) naming them still counts: a frame kept is never wrong.
fn touches_frame(code: &[String]) -> bool {
    code.iter().any(|line| line.starts_with("scratch_"))
        || registers_named(code, 's').iter().any(|s| *s <= 3 || (32..=33).contains(s))
}

/// Whole-wave copies between AGPRs and VGPRs around a payload. EXEC is
/// saved in a pair dead at the point and set to every lane: a copy under the
/// application's EXEC would miss the inactive lanes (the SVA's slots are
/// lanes, and a parked register's inactive lanes may be live).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parking {
    /// Even SGPR of a pair dead at the point.
    pub exec_pair: u16,
    /// `(agpr, vgpr)` copied at the entry: the SVA and the work-item ids
    /// kept in AGPRs, loaded into VGPRs dead at the point.
    pub loads: Vec<(u16, u16)>,
    /// `(vgpr, agpr)`: live VGPRs parked in AGPRs dead at the point while
    /// the payload uses them, given back at the exit.
    pub borrowed: Vec<(u16, u16)>,
    /// `(from, to)`: live VGPRs moved into VGPRs dead at the point (so
    /// that dead VGPRs pair up), moved back at the exit.
    pub moved: Vec<(u16, u16)>,
    /// Live VGPRs saved whole-wave in scratch memory, on the
    /// instrumentation stack above the payload's own frame, where no AGPR
    /// is dead to park them in; loaded back at the exit.
    pub spilled: Vec<u16>,
    /// For spills: the SVA's VGPR (the instrumentation frame is in its
    /// lanes) and the frame registers swapped for it around the copies.
    pub spill_frame: Option<(u16, Frame)>,
    /// The SVA (and the work-item ids) kept in the wave's slot in memory,
    /// loaded at the entry into VGPRs dead at the point.
    pub slot_loads: Option<SlotLoads>,
    /// Where no VGPR is dead to load it into: a live one saved in the
    /// wave's slot first (and loaded back last).
    pub rescue: Option<crate::stages::sva::wave_slots::Rescue>,
}

/// Which kernel inputs a payload's code reads (what its parking loads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reads {
    /// The SVA's lanes (also for the payload's stack frame).
    pub sva: bool,
    pub work_item_ids: bool,
}

/// Loads from the wave's slot (stages::sva::wave_slots).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotLoads {
    pub sva: u16,
    pub work_item_ids: Option<u16>,
    /// Even SGPR of a pair dead at the point (not EXEC's) for the address.
    pub pair: u16,
    pub indexing: crate::stages::sva::wave_slots::Indexing,
}

/// Per-lane bytes a MUBUF or scratch instruction's immediate offset can
/// reach: spill slots must lie below it.
pub const MAX_SPILL_OFFSET: u32 = 4095;

impl Parking {
    /// Whether all it does is load the SVA (and the work-item ids) from
    /// the wave's slot or from their AGPRs: a payload that reads neither
    /// needs none of it.
    pub fn only_loads_the_sva(&self) -> bool {
        (self.slot_loads.is_some() || !self.loads.is_empty())
            && self.rescue.is_none()
            && self.borrowed.is_empty()
            && self.moved.is_empty()
            && self.spilled.is_empty()
    }

    /// What of this planned parking a payload's code needs (`code` its
    /// body; the site's SVA and work-item ids where the parking puts
    /// them): live VGPRs parked (borrowed or spilled) only where the code
    /// names them or a move fills them, since the starved room frees more
    /// VGPRs than most payloads use; the SVA and ids loaded only when read
    /// (spills read the frame from the SVA). The machine-code check still
    /// holds every planned register to its value.
    pub fn used_by(&self, code: &[String], sva: Option<u16>, work_item_ids: Option<u16>, reads: Reads) -> Parking {
        let named = vgprs_named(code);
        let moved_into: Vec<u16> = self.moved.iter().map(|(_, to)| *to).collect();
        let mut used = self.clone();
        used.spilled.retain(|v| named.contains(v) || moved_into.contains(v));
        let reads_sva = reads.sva || !used.spilled.is_empty();
        used.loads.retain(|(_, vgpr)| {
            (reads_sva && Some(*vgpr) == sva) || (reads.work_item_ids && Some(*vgpr) == work_item_ids)
        });
        if !reads_sva && !reads.work_item_ids {
            used.slot_loads = None;
            used.rescue = None;
        } else if let Some(slot) = used.slot_loads.as_mut().filter(|_| !reads.work_item_ids) {
            slot.work_item_ids = None;
        }
        // A borrowed VGPR also stays parked where a value is loaded into it.
        let loaded: Vec<u16> = used
            .loads
            .iter()
            .map(|(_, v)| *v)
            .chain(used.slot_loads.iter().flat_map(|l| std::iter::once(l.sva).chain(l.work_item_ids)))
            .collect();
        used.borrowed.retain(|(v, _)| named.contains(v) || moved_into.contains(v) || loaded.contains(v));
        used
    }

    fn whole_wave(&self, copies: impl Iterator<Item = String>) -> Vec<String> {
        let pair = format!("s[{}:{}]", self.exec_pair, self.exec_pair + 1);
        let mut code = vec![format!("s_mov_b64 {pair}, exec"), "s_mov_b64 exec, -1".to_string()];
        code.extend(copies);
        code.push(format!("s_mov_b64 exec, {pair}"));
        code
    }

    /// Wraps `payload`: parks and loads at the entry, gives the parked
    /// registers back after every exit. Wait states (gfx908): an AGPR read
    /// needs 3 after its write, an MFMA reading a VGPR 2 after
    /// `v_accvgpr_read` wrote it. A load still in flight may be writing a
    /// register parked here: the payload stage puts the wait for its
    /// counter before the copies (they are part of the payload's code).
    ///
    /// Values loaded from the wave's slot into VGPRs dead at the point go
    /// first (spills read the frame from that SVA); into VGPRs the parking
    /// frees, last.
    ///
    /// Spilled VGPRs go first at the entry and come back last at the exit:
    /// the frame swapped in (the application's s0-s3 and s32 saved in
    /// their SVA lanes, the instrumentation frame read from its lanes), one
    /// whole-wave store (load) per VGPR at the payload's own frame size
    /// plus 4 bytes each, the frame swapped back; the exit waits for its
    /// loads (vmcnt(0)) before the application reads them. The payload's
    /// stack grows by the slots.
    pub fn wrap(&self, payload: &mut FinalPayload, end_label: &str) {
        if self.loads.is_empty()
            && self.borrowed.is_empty()
            && self.moved.is_empty()
            && self.spilled.is_empty()
            && self.slot_loads.is_none()
        {
            return;
        }
        let parks =
            !self.borrowed.is_empty() || !self.moved.is_empty() || !self.spilled.is_empty() || self.rescue.is_some();
        let slots = payload.scratch_bytes;
        let (spills, reloads) = self.spill_code(slots);
        payload.scratch_bytes += 4 * self.spilled.len() as u32;
        // Loads from the wave's slot into VGPRs dead here go first (spills
        // read the frame from the SVA they load), else last (into VGPRs
        // the parking frees).
        let freed: Vec<u16> = self
            .borrowed
            .iter()
            .map(|(v, _)| *v)
            .chain(self.spilled.iter().copied())
            .chain(self.moved.iter().map(|(from, _)| *from))
            .collect();
        let (mut slot_first, mut slot_last) = (Vec::new(), Vec::new());
        if let Some(l) = self.slot_loads {
            let load = |sva, ids, pair| crate::stages::sva::wave_slots::load(l.indexing, sva, ids, pair);
            let ids_first = l.work_item_ids.filter(|v| !freed.contains(v));
            let ids_last = l.work_item_ids.filter(|v| freed.contains(v));
            if freed.contains(&l.sva) {
                slot_last = load(Some(l.sva), l.work_item_ids, l.pair);
            } else {
                slot_first = load(Some(l.sva), ids_first, l.pair);
                slot_last = load(None, ids_last, l.pair);
            }
        }
        // Likewise the SVA's copy from its AGPR when spills read the frame
        // from it (into a VGPR dead here), the other loads last.
        let frame_copy = self.spill_frame.filter(|_| !self.spilled.is_empty()).map(|(sva, _)| sva);
        let loads_first = self.loads.iter().copied().filter(|(_, vgpr)| Some(*vgpr) == frame_copy);
        let loads_last = self.loads.iter().copied().filter(|(_, vgpr)| Some(*vgpr) != frame_copy);
        let load = |(a, v): (u16, u16)| format!("v_accvgpr_read_b32 v{v}, a{a}");
        let mut code = Vec::new();
        code.extend(
            self.whole_wave(
                self.rescue
                    .iter()
                    .flat_map(|r| r.save())
                    .chain(slot_first)
                    .chain(loads_first.map(load))
                    .chain(spills)
                    .chain(self.borrowed.iter().map(|(v, a)| format!("v_accvgpr_write_b32 a{a}, v{v}")))
                    .chain(self.moved.iter().map(|(from, to)| format!("v_mov_b32 v{to}, v{from}")))
                    .chain(loads_last.map(load))
                    .chain(slot_last),
            ),
        );
        let had_end_label = payload.code.iter().any(|l| l == &format!("{end_label}:"));
        code.append(&mut payload.code);
        if parks {
            if !had_end_label {
                code.push(format!("{end_label}:"));
            }
            code.push("s_nop 2".into());
            code.extend(
                // The entry's copies undone in reverse: a VGPR a live one
                // moved into may itself be parked (borrowed or spilled).
                self.whole_wave(
                    self.moved
                        .iter()
                        .map(|(from, to)| format!("v_mov_b32 v{from}, v{to}"))
                        .chain(self.borrowed.iter().map(|(v, a)| format!("v_accvgpr_read_b32 v{v}, a{a}")))
                        .chain(reloads)
                        // Last: the reloads read the frame from the SVA it held.
                        .chain(self.rescue.iter().flat_map(|r| r.restore())),
                ),
            );
            code.push("s_nop 1".into());
        }
        payload.code = code;
    }

    /// The whole-wave stores and loads of the spilled VGPRs, slots from
    /// `base` bytes (per lane) up, each with the frame swapped around it.
    fn spill_code(&self, base: u32) -> (Vec<String>, Vec<String>) {
        let Some((sva, frame)) = self.spill_frame.filter(|_| !self.spilled.is_empty()) else {
            return (Vec::new(), Vec::new());
        };
        let lanes = frame.lanes();
        let swap_in = lanes
            .iter()
            .map(|(sgpr, saved, _)| format!("v_writelane_b32 v{sva}, s{sgpr}, {saved}"))
            .chain(lanes.iter().map(|(sgpr, _, frame_lane)| format!("v_readlane_b32 s{sgpr}, v{sva}, {frame_lane}")))
            // A VALU write of an SGPR needs 5 wait states before a memory
            // instruction reads it.
            .chain(std::iter::once("s_nop 4".to_string()));
        // The same wait before the application's (or the payload's) memory
        // instructions read the frame registers given back.
        let swap_out: Vec<String> = lanes
            .iter()
            .map(|(sgpr, saved, _)| format!("v_readlane_b32 s{sgpr}, v{sva}, {saved}"))
            .chain(std::iter::once("s_nop 4".to_string()))
            .collect();
        let architected = lanes.len() == 1;
        let slot = |k: usize| base + 4 * k as u32;
        let access = |load: bool, vgpr: u16, offset: u32| match (architected, load) {
            (false, false) => format!("buffer_store_dword v{vgpr}, off, s[0:3], s32 offset:{offset}"),
            (false, true) => format!("buffer_load_dword v{vgpr}, off, s[0:3], s32 offset:{offset}"),
            (true, false) => format!("scratch_store_dword off, v{vgpr}, s32 offset:{offset}"),
            (true, true) => format!("scratch_load_dword v{vgpr}, off, s32 offset:{offset}"),
        };
        let spills = swap_in
            .clone()
            .chain(self.spilled.iter().enumerate().map(|(k, v)| access(false, *v, slot(k))))
            .chain(swap_out.iter().cloned())
            .collect();
        let reloads = swap_in
            .chain(self.spilled.iter().enumerate().map(|(k, v)| access(true, *v, slot(k))))
            .chain(std::iter::once("s_waitcnt vmcnt(0)".to_string()))
            .chain(swap_out)
            .collect();
        (spills, reloads)
    }
}

/// The VGPRs assembly lines name (`v7`, `v[4:5]`), opcodes (`v_add_u32`)
/// aside: what a payload's body may use of the registers spilled for it.
pub fn vgprs_named(code: &[String]) -> std::collections::BTreeSet<u16> {
    registers_named(code, 'v')
}

/// The registers of one file (`v`, `s` or `a`) assembly lines name.
fn registers_named(code: &[String], file: char) -> std::collections::BTreeSet<u16> {
    let mut named = std::collections::BTreeSet::new();
    for line in code {
        let bytes = line.as_bytes();
        for (at, _) in line.match_indices(file) {
            // A register name starts a token: after a space, comma or '['.
            if at > 0 && !matches!(bytes[at - 1], b' ' | b',' | b'\t' | b'(') {
                continue;
            }
            let rest = &line[at + 1..];
            if let Some(range) = rest.strip_prefix('[') {
                let Some((first, last)) = range.split_once(']').and_then(|(r, _)| r.split_once(':')) else { continue };
                if let (Ok(first), Ok(last)) = (first.trim().parse::<u16>(), last.trim().parse::<u16>()) {
                    named.extend(first..=last);
                }
            } else {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                let follows = rest[digits.len()..].chars().next();
                if !digits.is_empty() && !follows.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    if let Ok(index) = digits.parse() {
                        named.insert(index);
                    }
                }
            }
        }
    }
    named
}

/// The label every exit of payload `index` reaches.
pub fn end_label(index: usize) -> String {
    format!(".Lgpuinstr_payload{index}_end")
}

/// Saves the frame SGPRs `which` selects into their SVA lanes. `s_nop 4`
/// after a swap: a VALU write of an SGPR needs 5 wait states before a
/// memory instruction reads it (GFX9 hazard).
fn frame_saves(frame: Frame, sva: u16, which: impl Fn(u16) -> bool) -> Vec<String> {
    frame
        .lanes()
        .iter()
        .filter(|(sgpr, ..)| which(*sgpr))
        .map(|(sgpr, saved, _)| format!("v_writelane_b32 v{sva}, s{sgpr}, {saved}"))
        .collect()
}

/// Registers outside the kernel's allocation are never read: only live
/// frame registers and those hooks read are saved.
fn wrap_frame(payload: &mut FinalPayload, frame: Frame, live: &UnitSet, sva: u16, end_label: &str, read: &UnitSet) {
    let pairs = frame.lanes();
    let mut prologue =
        frame_saves(frame, sva, |sgpr| read.contains(Unit::sgpr(sgpr)) || live.contains(Unit::sgpr(sgpr)));
    for (sgpr, _, frame_lane) in &pairs {
        prologue.push(format!("v_readlane_b32 s{sgpr}, v{sva}, {frame_lane}"));
    }
    prologue.push("s_nop 4".into());
    let mut epilogue = Vec::new();
    for (sgpr, saved, _) in &pairs {
        if live.contains(Unit::sgpr(*sgpr)) {
            epilogue.push(format!("v_readlane_b32 s{sgpr}, v{sva}, {saved}"));
        }
    }
    epilogue.push("s_nop 4".into());

    let mut code = prologue;
    let had_end_label = payload.code.last().is_some_and(|l| l == &format!("{end_label}:"));
    code.append(&mut payload.code);
    if !had_end_label {
        code.push(format!("{end_label}:"));
    }
    code.extend(epilogue);
    payload.code = code;
}

#[cfg(test)]
mod tests {
    use super::*;

    const ASSEMBLY: &str = "\t.globl\tgpuinstr.payload.0 ; -- Begin function gpuinstr.payload.0\n\t.p2align\t2\ngpuinstr.payload.0:                     ; @gpuinstr.payload.0\n; %bb.0:\n\ts_waitcnt vmcnt(0) expcnt(0) lgkmcnt(0)\n\ts_cbranch_execz .LBB0_2\n; %bb.1:\n\tv_mov_b32_e32 v1, 0\n.LBB0_2:\n\ts_setpc_b64 s[30:31]\n.Lfunc_end0:\n\t.size\tgpuinstr.payload.0, .Lfunc_end0-gpuinstr.payload.0\n; Function info:\n; NumSgprs: 36\n; NumVgprs: 2\n; ScratchSize: 0\n";

    /// A payload with nothing live around it, no SVA and no hook reading
    /// the frame.
    fn extract_alone(
        functions: &AssemblyFunctions<'_>,
        name: &str,
        index: usize,
    ) -> Result<FinalPayload, FinalCodeError> {
        extract(functions, name, index, Frame::new(false), &UnitSet::EMPTY, None, &UnitSet::EMPTY, false)
    }

    /// LLVM's entry wait goes too: the payload stage puts the wait the
    /// point needs in its place.
    #[test]
    fn payloads_park_only_the_vgprs_they_use_or_load_into() {
        let parking = Parking {
            exec_pair: 10,
            borrowed: vec![(60, 0), (61, 1), (62, 2)],
            spilled: vec![63, 59],
            slot_loads: Some(SlotLoads { sva: 61, work_item_ids: Some(58), pair: 12, indexing: Default::default() }),
            ..Parking::default()
        };
        let body = ["v_mov_b32_e32 v60, 1".to_string(), "global_atomic_add_x2 v[62:63], v[58:59], off".to_string()];
        let reads = Reads { sva: false, work_item_ids: false };
        let used = parking.used_by(&body, Some(61), Some(58), reads);
        // The spills the body names stay; they read the frame from the
        // SVA, so it is loaded, into v61, which stays parked though the
        // body does not name it.
        assert_eq!(used.borrowed, vec![(60, 0), (61, 1), (62, 2)]);
        assert_eq!(used.spilled, vec![63, 59]);
        assert_eq!(
            used.slot_loads,
            Some(SlotLoads { sva: 61, work_item_ids: None, pair: 12, indexing: Default::default() })
        );
        // Nothing spilled, nothing read: no loads, and v61 and v62 stay
        // where they are.
        let quiet = ["v_mov_b32_e32 v60, 1".to_string()];
        let used = parking.used_by(&quiet, Some(61), Some(58), reads);
        assert_eq!((used.borrowed, used.spilled, used.slot_loads), (vec![(60, 0)], vec![], None));
    }

    #[test]
    fn vgprs_named_are_the_operands_not_the_opcodes() {
        let code = [
            "v_add_u32_e32 v3, v10, v4".to_string(),
            "global_load_dwordx2 v[6:7], v2, s[4:5]".to_string(),
            "s_waitcnt vmcnt(0)".to_string(),
            "v_cndmask_b32_e64 v1, 0, 1, vcc".to_string(),
        ];
        assert_eq!(vgprs_named(&code).into_iter().collect::<Vec<_>>(), [1, 2, 3, 4, 6, 7, 10]);
    }

    #[test]
    fn the_return_goes_and_labels_are_renamed() {
        let functions = AssemblyFunctions::parse(ASSEMBLY);
        let payload = extract_alone(&functions, "gpuinstr.payload.0", 0).unwrap();
        assert_eq!(
            payload.code,
            vec!["s_cbranch_execz .Lgpuinstr_payload0_BB0_2", "v_mov_b32_e32 v1, 0", ".Lgpuinstr_payload0_BB0_2:",]
        );
        assert_eq!((payload.sgprs, payload.vgprs, payload.scratch_bytes), (36, 2, 0));
        assert_eq!(
            extract_alone(&functions, "gpuinstr.payload.1", 1),
            Err(FinalCodeError::Missing("gpuinstr.payload.1".into()))
        );
    }

    #[test]
    fn stack_users_swap_frames_through_the_sva() {
        let with_stack = ASSEMBLY
            .replace("ScratchSize: 0", "ScratchSize: 8")
            .replace("v_mov_b32_e32 v1, 0", "buffer_store_dword v1, off, s[0:3], s32 offset:4");
        let mut live = UnitSet::EMPTY;
        live.insert(Unit::sgpr(2));
        let functions = AssemblyFunctions::parse(&with_stack);
        let payload =
            extract(&functions, "gpuinstr.payload.0", 0, Frame::new(false), &live, Some(40), &UnitSet::EMPTY, false)
                .unwrap();
        assert_eq!(payload.code[0], "v_writelane_b32 v40, s2, 7");
        assert_eq!(payload.code[1], "v_readlane_b32 s0, v40, 0");
        assert_eq!(payload.code[5], "v_readlane_b32 s32, v40, 4");
        assert_eq!(payload.code.last().unwrap(), "s_nop 4");
        assert!(payload.code.contains(&"v_readlane_b32 s2, v40, 7".to_string()));
        assert_eq!(
            extract(&functions, "gpuinstr.payload.0", 0, Frame::new(false), &live, None, &UnitSet::EMPTY, false),
            Err(FinalCodeError::StackWithoutSva("gpuinstr.payload.0".into(), 8))
        );
    }

    /// LLVM 17 reports frames of stack objects nothing reads or writes:
    /// such a payload runs without one (and can be a template).
    #[test]
    fn a_frame_the_code_never_touches_is_no_frame() {
        let untouched = ASSEMBLY.replace("ScratchSize: 0", "ScratchSize: 8");
        let functions = AssemblyFunctions::parse(&untouched);
        let payload = extract_alone(&functions, "gpuinstr.payload.0", 0).unwrap();
        assert_eq!(payload.scratch_bytes, 0);
        assert_eq!(payload.code[0], "s_cbranch_execz .Lgpuinstr_payload0_BB0_2");
    }

    #[test]
    fn frame_registers_are_found_as_operands() {
        for touching in [
            "buffer_store_dword v1, off, s[0:3], s32 offset:4",
            "s_mov_b32 s33, s32",
            "v_lshrrev_b32_e64 v2, 6, s33",
            "s_add_u32 s32, s32, 0x400",
            "s_mov_b64 s[2:3], s[8:9]",
            "s_mov_b64 s[32:33], 0",
            "scratch_load_dword v1, off, off offset:8",
        ] {
            assert!(touches_frame(&[touching.to_string()]), "{touching}");
        }
        for quiet in [
            "s_setpc_b64 s[30:31]",
            "s_mov_b64 s[34:35], 0",
            "v_mov_b32_e32 v3, s31",
            "s_cbranch_scc1 .Lgpuinstr_payload2_BB0_3",
            "s_load_dwordx2 s[4:5], s[6:7], 0x0",
            "s_add_u32 s4, s4, gpuinstr.point.0.lo",
            "v_cmp_eq_u32_e64 s[4:5], s34, v7",
        ] {
            assert!(!touches_frame(&[quiet.to_string()]), "{quiet}");
        }
    }
}
