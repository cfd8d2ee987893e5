//! Compile once, place everywhere: points get one payload per hook shape,
//! a *template* compiled against a site where nothing is live but the
//! special registers and the application registers its hooks read (the
//! counters' and the histogram's hooks take constants only; the memory
//! tracer's an address register pair), renamed for each point onto
//! registers dead there, the registers read kept where they are. Every
//! renamed copy is still checked on its machine code for the point's live
//! registers, like any payload. LLVM's work then grows with the hook
//! shapes, not with the register contexts; a point with no renaming (too
//! few dead registers where it is) is compiled as before.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use crate::stages::lift::{FunctionKind, LiftedCodeObject};
use crate::stages::liveness::{allocation, Liveness, RegisterFile, Unit, UnitSet};
use crate::stages::lower_mir::physical::unit_of;
use crate::stages::lower_mir::PayloadSite;
use crate::stages::payload::{HookArgument, PayloadPoint};

use super::{CodeLine, CompiledPayload};

/// SGPRs a renamed payload may use: those GFX9 code addresses (s0-s101),
/// but the payload calling convention's frame (s0-s3 scratch V#, s32 stack
/// pointer) and return address (s30, s31), which LLVM never gives a
/// payload's values either.
const SGPR_LIMIT: u16 = 102;
const RESERVED_SGPRS: [u16; 7] = [0, 1, 2, 3, 30, 31, 32];

/// What must be equal for points to share a template: the calls (but for
/// the values of integer constants and address offsets, which become point
/// constants; registers read exactly), which kernel inputs are at hand
/// (SVA, work-item ids, hidden-argument offsets, work-group bound) and
/// which special registers are live (saving one costs code); and the
/// application registers the hooks read, which every copy keeps where they
/// are. Kernels with no register for the SVA have templates of their own
/// (compiled without one: a template whose hooks need it is refused as
/// their payloads would be). `None`: the point cannot use a template (its
/// site parks registers, or a hook reads a register no 32-bit unit names).
pub fn template_key(point: &PayloadPoint, site: &PayloadSite) -> Option<(String, UnitSet)> {
    TemplateKeys::default().key(point, site)
}

/// [`template_key`] over many points: each kernel's hidden arguments
/// written once (sites share them), not per point.
#[derive(Default)]
pub struct TemplateKeys {
    hidden: rustc_hash::FxHashMap<usize, String>,
}

impl TemplateKeys {
    pub fn key(&mut self, point: &PayloadPoint, site: &PayloadSite) -> Option<(String, UnitSet)> {
        let hidden = match &site.hidden_arguments {
            // (By the shared map's address: the sites hold it while keys are made.)
            Some(shared) => self
                .hidden
                .entry(std::sync::Arc::as_ptr(shared) as usize)
                .or_insert_with(|| format!("{:?}", site.hidden_arguments)),
            None => "None",
        };
        key_with(point, site, hidden)
    }
}

fn key_with(point: &PayloadPoint, site: &PayloadSite, hidden_arguments: &str) -> Option<(String, UnitSet)> {
    let in_memory = kept_in_memory(site);
    if site.parking.is_some() && !in_memory {
        return None;
    }
    let mut read = UnitSet::EMPTY;
    let mut calls = Vec::with_capacity(point.calls.len());
    for call in &point.calls {
        let mut arguments = Vec::with_capacity(call.arguments.len());
        for argument in &call.arguments {
            match argument {
                HookArgument::Int(_) => arguments.push("int".to_string()),
                HookArgument::Float(value) => arguments.push(format!("{value:?}")),
                HookArgument::Register(register) => {
                    read.insert(unit_of(*register).ok()?);
                    arguments.push(register.to_string());
                }
                HookArgument::MemoryAddress { base, index, .. } => {
                    // The base is a 64-bit pair.
                    let low = unit_of(*base).ok()?;
                    read.insert(low);
                    read.insert(next_unit(low)?);
                    if let Some(index) = index {
                        read.insert(unit_of(*index).ok()?);
                    }
                    arguments.push(format!("{base}[64] + {index:?} + int"));
                }
            }
        }
        calls.push(format!("{}({})", call.hook, arguments.join(", ")));
    }
    let specials: Vec<String> = site.live.in_file(RegisterFile::Special).iter().map(|u| u.to_string()).collect();
    let key = format!(
        "{}|{}|{}|{}|{}|{}|{}",
        calls.join(";"),
        site.unplaced.is_some() || in_memory,
        site.sva.is_some() && !in_memory,
        site.work_item_ids.is_some() && !in_memory,
        hidden_arguments,
        site.max_flat_workgroup_size,
        specials.join(",")
    );
    Some((key, read))
}

/// Whether the site's only parking is the SVA's load from the wave's slot
/// in memory: its templates are compiled as for a kernel without an SVA
/// (a template reading it is refused, and its points compiled with the
/// loads), so that payloads reading neither it nor the ids need no load.
fn kept_in_memory(site: &PayloadSite) -> bool {
    site.parking.as_ref().is_some_and(crate::stages::lower_mir::final_code::Parking::only_loads_from_slot)
}

/// The register after `unit` in its file (the high half of a pair).
fn next_unit(unit: Unit) -> Option<Unit> {
    match unit.file() {
        RegisterFile::Sgpr => Some(Unit::sgpr(unit.index() + 1)),
        RegisterFile::Vgpr => Some(Unit::vgpr(unit.index() + 1)),
        RegisterFile::Agpr => Some(Unit::agpr(unit.index() + 1)),
        RegisterFile::Special => None,
    }
}

/// The site a template is compiled for, from one of its points' sites:
/// only the special registers and those its hooks read (`read`) live, the
/// SVA and work-item ids (if the point has them) in the lowest VGPRs the
/// hooks do not read.
pub fn template_site(site: &PayloadSite, read: &UnitSet) -> PayloadSite {
    let mut stand_ins = (0..256u16).filter(|v| !read.contains(Unit::vgpr(*v)));
    let (sva_stand_in, ids_stand_in) = (stand_ins.next(), stand_ins.next());
    let mut live = site.live.in_file(RegisterFile::Special);
    for unit in read.iter() {
        live.insert(unit);
    }
    let in_memory = kept_in_memory(site);
    PayloadSite {
        live,
        sva: site.sva.filter(|_| !in_memory).and(sva_stand_in),
        work_item_ids: site.work_item_ids.filter(|_| !in_memory).and(ids_stand_in),
        hidden_arguments: site.hidden_arguments.clone(),
        max_flat_workgroup_size: site.max_flat_workgroup_size,
        unplaced: match in_memory {
            true => Some("the State Value Array is kept in memory: a template does not load it".to_string()),
            false => site.unplaced.clone(),
        },
        ..PayloadSite::default()
    }
}

/// Whether a compiled template can be renamed: no stack (its frame is
/// the SVA's, set up per point), nothing written for the application, and
/// no application register kept but those its hooks read (what it keeps is
/// special, read, or the SVA's and work-item ids' stand-ins).
pub fn renameable(template: &CompiledPayload, site: &PayloadSite, read: &UnitSet) -> bool {
    let stand_ins: Vec<Unit> = site.sva.iter().chain(&site.work_item_ids).map(|v| Unit::vgpr(*v)).collect();
    let allowed = |u: Unit| u.file() == RegisterFile::Special || stand_ins.contains(&u) || read.contains(u);
    template.rejected.is_none()
        && template.scratch_bytes == 0
        && template.spilled_vgprs == 0
        && template.written.is_empty()
        && template.copied.iter().all(allowed)
        && template.pinned.iter().all(allowed)
}

/// VGPRs a template's code needs besides those its hooks read and the
/// SVA's and work-item ids' stand-ins, counted in whole aligned pairs:
/// the room to park for where too few are dead.
pub fn vgprs_needed(code: &[CodeLine], template: &PayloadSite, read: &UnitSet) -> usize {
    let stand_ins: Vec<u16> = template.sva.iter().chain(&template.work_item_ids).copied().collect();
    let needed: usize = runs(code)
        .iter()
        .filter(|run| run.file == RegisterFile::Vgpr)
        .filter(|run| !(run.first..=run.last).any(|v| read.contains(Unit::vgpr(v)) || stand_ins.contains(&v)))
        .map(|run| usize::from(run.last - run.first + 1))
        .sum();
    needed.div_ceil(2) * 2
}

/// A register a line of assembly names: where (bytes), its file, and its
/// first and last index (`v[4:5]`: 4 and 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Token {
    start: usize,
    end: usize,
    file: RegisterFile,
    first: u16,
    last: u16,
}

/// The numbered registers (`s7`, `v[4:5]`, `a3`) a line names. Special
/// registers (`vcc`, `exec`, `m0`, `ttmp*`) and symbols are not: a name
/// counts only standing alone (not inside a label, a mnemonic, a hex
/// number, or before `@` of a relocation).
fn tokens(line: &str) -> Vec<Token> {
    let bytes = line.as_bytes();
    let joined = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'@' | b'$');
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let file = match bytes[i] {
            b's' => Some(RegisterFile::Sgpr),
            b'v' => Some(RegisterFile::Vgpr),
            b'a' => Some(RegisterFile::Agpr),
            _ => None,
        };
        let alone = i == 0 || !joined(bytes[i - 1]);
        if let (Some(file), true) = (file, alone) {
            if let Some((first, last, length)) = register_after(&bytes[i + 1..]) {
                let end = i + 1 + length;
                if end == bytes.len() || !joined(bytes[end]) {
                    out.push(Token { start: i, end, file, first, last });
                    i = end;
                    continue;
                }
            }
        }
        i += 1;
    }
    out
}

/// `12` or `[4:7]` at the start of `rest`: first, last, bytes taken.
fn register_after(rest: &[u8]) -> Option<(u16, u16, usize)> {
    if rest.first() == Some(&b'[') {
        let close = rest.iter().position(|b| *b == b']')?;
        let inner = std::str::from_utf8(&rest[1..close]).ok()?;
        let (first, last) = inner.split_once(':')?;
        let (first, last): (u16, u16) = (first.trim().parse().ok()?, last.trim().parse().ok()?);
        (first <= last).then_some((first, last, close + 1))
    } else {
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let index = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
        Some((index, index, digits))
    }
}

/// Registers of one file a template uses together: overlapping tuples
/// move as one, by a multiple of `align` so that each keeps its alignment
/// (pairs even, larger tuples on a multiple of 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    file: RegisterFile,
    first: u16,
    last: u16,
    align: u16,
}

fn runs(code: &[CodeLine]) -> Vec<Run> {
    let tokens: Vec<Token> = code.iter().flat_map(|line| tokens(line)).collect();
    runs_of(tokens.iter())
}

/// The runs the register names `tokens` form.
fn runs_of<'t>(tokens: impl Iterator<Item = &'t Token>) -> Vec<Run> {
    let mut by_file: BTreeMap<u8, Vec<(u16, u16)>> = BTreeMap::new();
    let file_key = |file: RegisterFile| match file {
        RegisterFile::Sgpr => 0,
        RegisterFile::Vgpr => 1,
        _ => 2,
    };
    for token in tokens {
        by_file.entry(file_key(token.file)).or_default().push((token.first, token.last));
    }
    let mut runs = Vec::new();
    for (key, mut intervals) in by_file {
        let file = [RegisterFile::Sgpr, RegisterFile::Vgpr, RegisterFile::Agpr][key as usize];
        intervals.sort_unstable();
        let mut current: Option<Run> = None;
        for (first, last) in intervals {
            let align = match last - first {
                0 => 1,
                1 => 2,
                _ => 4,
            };
            match &mut current {
                Some(run) if first <= run.last => {
                    run.last = run.last.max(last);
                    run.align = run.align.max(align);
                }
                _ => {
                    runs.extend(current.take());
                    current = Some(Run { file, first, last, align });
                }
            }
        }
        runs.extend(current);
    }
    runs
}

/// `code` (a template's, compiled for `template`, a [`template_site`])
/// with its registers renamed onto registers dead at `site` (see
/// [`Renamer::rename`]); `None` when the site has no room for some run.
pub fn rename(code: &[CodeLine], template: &PayloadSite, site: &PayloadSite, read: &UnitSet) -> Option<Vec<CodeLine>> {
    Renamer::new(code).rename(template, site, read, None)
}

/// A template's code read once for renaming at many sites: each line's
/// register names and the runs they form.
pub struct Renamer<'a> {
    code: &'a [CodeLine],
    tokens: Vec<Vec<Token>>,
    runs: Vec<Run>,
}

impl<'a> Renamer<'a> {
    pub fn new(code: &'a [CodeLine]) -> Self {
        let tokens: Vec<Vec<Token>> = code.iter().map(|line| tokens(line)).collect();
        let mut runs = runs_of(tokens.iter().flatten());
        // Largest and most aligned first: they are the hardest to fit.
        runs.sort_by_key(|run| {
            (std::cmp::Reverse(run.last - run.first), std::cmp::Reverse(run.align), run.file, run.first)
        });
        Renamer { code, tokens, runs }
    }

    /// The code with its registers renamed for `site`: those the hooks
    /// read (`read`) kept, the SVA's and the work-item ids' stand-ins
    /// renamed to the site's own, every other run onto dead registers
    /// below the site's limits that keep its alignment: the first in
    /// `order` when given (the function's registers least often live
    /// first, so that its sites rename alike), else the lowest.
    pub fn rename(
        &self,
        template: &PayloadSite,
        site: &PayloadSite,
        read: &UnitSet,
        order: Option<&RegisterOrder>,
    ) -> Option<Vec<CodeLine>> {
        self.rename_choosing(template, site, read, order).map(|(code, _)| code)
    }

    /// [`Renamer::rename`], and the registers it chose for the runs it
    /// moved: at a site where none of them is live, the renaming with the
    /// same order, SVA, ids and limits is the same (each run's earlier
    /// choices in the order were already taken).
    pub fn rename_choosing(
        &self,
        template: &PayloadSite,
        site: &PayloadSite,
        read: &UnitSet,
        order: Option<&RegisterOrder>,
    ) -> Option<(Vec<CodeLine>, UnitSet)> {
        let mut chosen = UnitSet::EMPTY;
        let mut taken: UnitSet = site.live;
        for unit in read.iter() {
            taken.insert(unit);
        }
        let fixed: Vec<(u16, u16)> = [(template.sva, site.sva), (template.work_item_ids, site.work_item_ids)]
            .into_iter()
            .filter_map(|(stand_in, own)| Some((stand_in?, own?)))
            .collect();
        // The site's SVA and ids stay whether or not the template reads them
        // (parking loads them there for its own spills).
        for own in site.sva.iter().chain(&site.work_item_ids) {
            taken.insert(Unit::vgpr(*own));
        }
        let mut moved: HashMap<(RegisterFile, u16), u16> = HashMap::new();
        for run in &self.runs {
            let (limit, unit): (u16, fn(u16) -> Unit) = match run.file {
                RegisterFile::Sgpr => (SGPR_LIMIT, Unit::sgpr),
                RegisterFile::Vgpr => (site.max_vgprs, Unit::vgpr),
                RegisterFile::Agpr => (site.max_agprs, Unit::agpr),
                RegisterFile::Special => return None,
            };
            // What the hooks read stays where it is, whole.
            let read_here = (run.first..=run.last).filter(|i| read.contains(unit(*i))).count();
            if read_here > 0 {
                if read_here != usize::from(run.last - run.first + 1) {
                    return None;
                }
                for index in run.first..=run.last {
                    moved.insert((run.file, index), index);
                }
                continue;
            }
            if run.file == RegisterFile::Vgpr {
                if let Some((_, own)) = fixed.iter().find(|(stand_in, _)| (run.first..=run.last).contains(stand_in)) {
                    // A stand-in is used alone, never inside a tuple.
                    if run.first != run.last {
                        return None;
                    }
                    moved.insert((run.file, run.first), *own);
                    continue;
                }
            }
            let length = run.last - run.first + 1;
            let reserved = |index: u16| run.file == RegisterFile::Sgpr && RESERVED_SGPRS.contains(&index);
            let usable = |index: u16| !taken.contains(unit(index)) && !reserved(index);
            let start = run.first % run.align;
            let end = limit.checked_sub(length - 1)?;
            let base = match order {
                Some(order) => {
                    order.bases(run.file, length, run.align, start, end).find(|base| (*base..base + length).all(usable))
                }
                None => (start..end).step_by(run.align as usize).find(|base| (*base..base + length).all(usable)),
            }?;
            for offset in 0..length {
                taken.insert(unit(base + offset));
                chosen.insert(unit(base + offset));
                moved.insert((run.file, run.first + offset), base + offset);
            }
        }
        let mut renamed = Vec::with_capacity(self.code.len());
        for (line, found) in self.code.iter().zip(&self.tokens) {
            if found.is_empty() {
                renamed.push(line.clone());
                continue;
            }
            let mut text = String::with_capacity(line.len() + 8);
            let mut at = 0;
            for token in found {
                text.push_str(&line[at..token.start]);
                let first = moved[&(token.file, token.first)];
                let prefix = match token.file {
                    RegisterFile::Sgpr => 's',
                    RegisterFile::Vgpr => 'v',
                    _ => 'a',
                };
                if line[token.start..token.end].contains('[') {
                    write!(text, "{prefix}[{first}:{}]", first + (token.last - token.first)).expect("to a String");
                } else {
                    write!(text, "{prefix}{first}").expect("to a String");
                }
                at = token.end;
            }
            text.push_str(&line[at..]);
            renamed.push(text.into());
        }
        Some((renamed, chosen))
    }
}

/// A run's file, length, alignment, first base and end.
type RunShape = (u8, u16, u16, u16, u16);

/// The order a function's sites take registers in when renaming: inside
/// the kernel's allocation before past it, and among those the least often
/// live first (never-touched ones before all), so that sites whose live
/// registers differ still mostly rename alike: fewer distinct codes to
/// check and emit.
pub struct RegisterOrder {
    /// Per file (SGPR, VGPR, AGPR), per register index: its rank.
    ranks: [Vec<u32>; 3],
    /// The bases of each run shape (file, length, alignment, first base,
    /// end) in rank order, sorted once.
    bases: std::cell::RefCell<HashMap<RunShape, std::rc::Rc<[u16]>>>,
}

impl RegisterOrder {
    /// The order for `function` (a device function has no allocation of
    /// its own: every register counts as inside).
    pub fn of(lifted: &LiftedCodeObject<'_>, liveness: &Liveness, function: usize) -> RegisterOrder {
        let function_liveness = &liveness.functions[function];
        let inside: Option<UnitSet> = match lifted.functions[function].kind {
            FunctionKind::Kernel(index) => {
                let code_object = lifted.code_object;
                let touched = &function_liveness.touched;
                let allocation = allocation(code_object, &code_object.kernels[index], touched);
                let mut inside = crate::stages::sva::vgprs_for_values(liveness.processor, &allocation, touched);
                inside.union_with(&allocation.sgprs);
                inside.union_with(&allocation.agprs);
                Some(inside)
            }
            _ => None,
        };
        RegisterOrder::from_liveness(&function_liveness.live_in, inside.as_ref())
    }

    /// The order given what is live before each instruction and the
    /// registers inside the allocation (`None`: all).
    pub fn from_liveness(live_in: &[UnitSet], inside: Option<&UnitSet>) -> RegisterOrder {
        let mut live_count = [vec![0u32; 256], vec![0u32; 256], vec![0u32; 256]];
        for live in live_in {
            for unit in live.iter() {
                if let Some(file) = file_index(unit.file()) {
                    live_count[file][usize::from(unit.index())] += 1;
                }
            }
        }
        let files = [RegisterFile::Sgpr, RegisterFile::Vgpr, RegisterFile::Agpr];
        let ranks = std::array::from_fn(|file| {
            let unit = |index: u16| match files[file] {
                RegisterFile::Sgpr => Unit::sgpr(index),
                RegisterFile::Vgpr => Unit::vgpr(index),
                _ => Unit::agpr(index),
            };
            (0..256u16)
                .map(|index| {
                    let outside = inside.is_some_and(|inside| !inside.contains(unit(index)));
                    // Never live: 0; outside the allocation: after every register inside it.
                    live_count[file][usize::from(index)].saturating_add(if outside { 1 << 30 } else { 0 })
                })
                .collect()
        });
        RegisterOrder { ranks, bases: Default::default() }
    }

    /// Where a run of `length` registers aligned to `align` may start,
    /// from `start` up to `end` (exclusive): the least often live first,
    /// equal ones lowest first.
    fn bases(&self, file: RegisterFile, length: u16, align: u16, start: u16, end: u16) -> impl Iterator<Item = u16> {
        let key = (file_index(file).unwrap_or(3) as u8, length, align, start, end);
        let sorted = self
            .bases
            .borrow_mut()
            .entry(key)
            .or_insert_with(|| {
                let mut bases: Vec<u16> = (start..end).step_by(usize::from(align)).collect();
                bases.sort_by_key(|base| (*base..base + length).map(|i| self.rank(file, i)).max());
                bases.into()
            })
            .clone();
        (0..sorted.len()).map(move |i| sorted[i])
    }

    fn rank(&self, file: RegisterFile, index: u16) -> u32 {
        file_index(file).map_or(u32::MAX, |file| self.ranks[file].get(usize::from(index)).copied().unwrap_or(u32::MAX))
    }
}

fn file_index(file: RegisterFile) -> Option<usize> {
    match file {
        RegisterFile::Sgpr => Some(0),
        RegisterFile::Vgpr => Some(1),
        RegisterFile::Agpr => Some(2),
        RegisterFile::Special => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A point calling `count(1)`.
    fn counting_point() -> PayloadPoint {
        use crate::stages::payload::HookCall;
        PayloadPoint {
            function: 0,
            instruction: 0,
            calls: vec![HookCall { hook: "count".into(), arguments: vec![HookArgument::Int(1)] }],
        }
    }

    #[test]
    fn kernels_without_an_sva_register_have_templates_of_their_own() {
        let point = counting_point();
        let placed = PayloadSite { sva: Some(200), ..PayloadSite::default() };
        let unplaced = PayloadSite { unplaced: Some("no VGPR is free".into()), ..PayloadSite::default() };
        let (placed_key, _) = template_key(&point, &placed).unwrap();
        let (unplaced_key, _) = template_key(&point, &unplaced).unwrap();
        assert_ne!(placed_key, unplaced_key);
        // Its template is compiled as unplaced: hooks needing the SVA are refused there.
        assert_eq!(template_site(&unplaced, &UnitSet::EMPTY).unplaced.as_deref(), Some("no VGPR is free"));
        let parked = PayloadSite { parking: Some(Default::default()), ..PayloadSite::default() };
        assert!(template_key(&point, &parked).is_none());
    }

    #[test]
    fn sites_that_only_load_the_sva_from_memory_have_templates_without_it() {
        use crate::stages::lower_mir::final_code::{Parking, SlotLoads};
        let point = counting_point();
        let slot_loads = Some(SlotLoads { sva: 40, work_item_ids: None, pair: 6 });
        let loading = PayloadSite {
            sva: Some(40),
            parking: Some(Parking { slot_loads, ..Parking::default() }),
            ..PayloadSite::default()
        };
        let unplaced = PayloadSite { unplaced: Some("no register".into()), ..PayloadSite::default() };
        let key = template_key(&point, &loading).expect("a template");
        assert_eq!(Some(key), template_key(&point, &unplaced), "compiled as without an SVA");
        let template = template_site(&loading, &UnitSet::EMPTY);
        assert_eq!((template.sva, template.parking.is_none()), (None, true));
        assert!(template.unplaced.is_some(), "a template reading the SVA is refused");
        // Anything parked besides: no template.
        let parking = Parking { slot_loads, spilled: vec![3], ..Parking::default() };
        let spilling = PayloadSite { parking: Some(parking), ..loading };
        assert!(template_key(&point, &spilling).is_none());
    }

    #[test]
    fn registers_the_hooks_read_stay_and_the_stand_ins_avoid_them() {
        let mut read = UnitSet::EMPTY;
        read.insert(Unit::vgpr(0));
        read.insert(Unit::vgpr(1));
        let site = PayloadSite { sva: Some(30), max_vgprs: 64, ..PayloadSite::default() };
        let template = template_site(&site, &read);
        assert_eq!(template.sva, Some(2));
        assert!(template.live.contains(Unit::vgpr(0)) && template.live.contains(Unit::vgpr(1)));
        // The hook's address v[0:1] stays, the SVA stand-in v2 becomes v30,
        // the template's own v3 the lowest dead VGPR.
        let code = lines("v_readlane_b32 s4, v2, 3\nglobal_load_dword v3, v[0:1], off");
        let mut at = site.clone();
        at.live.insert(Unit::vgpr(0));
        at.live.insert(Unit::vgpr(1));
        assert_eq!(
            rename(&code, &template, &at, &read).unwrap(),
            lines("v_readlane_b32 s4, v30, 3\nglobal_load_dword v2, v[0:1], off")
        );
        // A tuple half read and half not cannot be renamed.
        let half = lines("global_load_dwordx2 v[1:2], v[0:1], off");
        assert_eq!(rename(&half, &template, &at, &read), None);
    }

    fn lines(text: &str) -> Vec<CodeLine> {
        text.lines().map(CodeLine::from).collect()
    }

    #[test]
    fn only_standalone_register_names_are_tokens() {
        let found = |line: &str| tokens(line).iter().map(|t| line[t.start..t.end].to_string()).collect::<Vec<_>>();
        assert_eq!(found("s_add_u32 s8, s8, Counter@gotpcrel32@lo+4"), ["s8", "s8"]);
        assert_eq!(found("global_atomic_add_x2 v[6:7], v[8:9], off"), ["v[6:7]", "v[8:9]"]);
        assert_eq!(found("v_cmp_eq_u32_e32 vcc, s8, v1"), ["s8", "v1"]);
        assert_eq!(found("s_cbranch_execz .Lgpuinstr_payload1_BB1_2"), Vec::<String>::new());
        assert_eq!(found("v_accvgpr_write_b32 a3, v1"), ["a3", "v1"]);
        assert_eq!(found("v_mov_b32_e32 v1, 0xa5"), ["v1"]);
        assert_eq!(found("s_mov_b32 s4, v1@abs32@lo"), ["s4"]);
        assert_eq!(found("v_add_f32_e64 v2, |v1|, -v3"), ["v2", "v1", "v3"]);
    }

    #[test]
    fn sites_take_the_registers_least_often_live_so_they_rename_alike() {
        let code = lines("s_mov_b64 s[6:7], exec\nv_mov_b32_e32 v1, 0");
        let template = template_site(&PayloadSite::default(), &UnitSet::EMPTY);
        // v0-v3 and s0-s15 live somewhere in the function; v4 and s[16:17]
        // never, v5 only past the allocation.
        let mut everywhere = UnitSet::EMPTY;
        for v in 0..4 {
            everywhere.insert(Unit::vgpr(v));
        }
        for s in 0..16 {
            everywhere.insert(Unit::sgpr(s));
        }
        let inside = UnitSet::range(RegisterFile::Vgpr, 0, 5).union(&UnitSet::range(RegisterFile::Sgpr, 0, 24));
        let order = RegisterOrder::from_liveness(&[everywhere, UnitSet::EMPTY], Some(&inside));
        let renamer = Renamer::new(&code);
        // Two sites with different live registers, v4 and s[16:17] dead at both.
        let mut live_low = UnitSet::EMPTY;
        live_low.insert(Unit::vgpr(0));
        let mut live_high = UnitSet::EMPTY;
        live_high.insert(Unit::vgpr(3));
        live_high.insert(Unit::sgpr(8));
        let at = |live: UnitSet| PayloadSite { live, max_vgprs: 64, ..PayloadSite::default() };
        let expected = lines("s_mov_b64 s[16:17], exec\nv_mov_b32_e32 v4, 0");
        for live in [live_low, live_high] {
            assert_eq!(renamer.rename(&template, &at(live), &UnitSet::EMPTY, Some(&order)).unwrap(), expected);
        }
        // Without the order: the lowest dead registers, different per site.
        assert_ne!(renamer.rename(&template, &at(live_low), &UnitSet::EMPTY, None).unwrap(), expected);
        // Where the never-live ones are taken, the next least often live.
        let mut crowded = live_low;
        crowded.insert(Unit::vgpr(4));
        let renamed = renamer.rename(&template, &at(crowded), &UnitSet::EMPTY, Some(&order)).unwrap();
        assert_eq!(renamed[1].as_ref(), "v_mov_b32_e32 v1, 0", "v5 is past the allocation: v1 goes first");
    }

    #[test]
    fn runs_keep_tuples_together_and_aligned() {
        let code = lines(
            "s_mov_b64 s[6:7], exec\ns_ff1_i32_b32 s8, s7\ns_load_dwordx4 s[12:15], s[8:9], 0x0\nv_mov_b32_e32 v1, 0",
        );
        let runs = runs(&code);
        assert_eq!(
            runs,
            vec![
                // s7 inside s[6:7], s8 inside s[8:9]; the pairs move apart.
                Run { file: RegisterFile::Sgpr, first: 6, last: 7, align: 2 },
                Run { file: RegisterFile::Sgpr, first: 8, last: 9, align: 2 },
                Run { file: RegisterFile::Sgpr, first: 12, last: 15, align: 4 },
                Run { file: RegisterFile::Vgpr, first: 1, last: 1, align: 1 },
            ]
        );
    }

    #[test]
    fn renaming_takes_dead_registers_and_the_points_sva() {
        let code = lines(
            "s_mov_b64 s[6:7], exec\nv_readlane_b32 s4, v0, 3\nv_mov_b32_e32 v2, s4\nglobal_atomic_add_x2 v[2:3], v[4:5], off",
        );
        let template = PayloadSite { sva: Some(0), ..PayloadSite::default() };
        let mut site = PayloadSite { sva: Some(40), max_vgprs: 64, ..PayloadSite::default() };
        for sgpr in 0..10 {
            site.live.insert(Unit::sgpr(sgpr));
        }
        for vgpr in 0..5 {
            site.live.insert(Unit::vgpr(vgpr));
        }
        let renamed = rename(&code, &template, &site, &UnitSet::EMPTY).unwrap();
        assert_eq!(
            renamed,
            lines(
                "s_mov_b64 s[10:11], exec\nv_readlane_b32 s12, v40, 3\nv_mov_b32_e32 v6, s12\n\
                 global_atomic_add_x2 v[6:7], v[8:9], off"
            )
        );
        // No room: every VGPR below the limit is live.
        for vgpr in 0..64 {
            site.live.insert(Unit::vgpr(vgpr));
        }
        assert_eq!(rename(&code, &template, &site, &UnitSet::EMPTY), None);
    }

    #[test]
    fn renaming_keeps_off_the_sites_sva_where_the_template_reads_none() {
        // A template compiled without an SVA, at a site whose parking loads
        // the SVA into v0 for its spills: the copy must not take v0.
        let code = lines("v_mov_b32_e32 v0, 1");
        let template = PayloadSite::default();
        let site = PayloadSite { sva: Some(0), work_item_ids: Some(1), max_vgprs: 8, ..PayloadSite::default() };
        assert_eq!(rename(&code, &template, &site, &UnitSet::EMPTY).unwrap(), lines("v_mov_b32_e32 v2, 1"));
    }

    #[test]
    fn the_room_a_template_needs_is_its_own_vgprs_in_pairs() {
        let mut read = UnitSet::EMPTY;
        read.insert(Unit::vgpr(0));
        read.insert(Unit::vgpr(1));
        let template = PayloadSite { sva: Some(2), ..PayloadSite::default() };
        // v[0:1] read and the SVA's stand-in v2 stay; v[4:5] and v3 are its own.
        let code = lines("v_readlane_b32 s4, v2, 3\nv_mov_b32_e32 v3, s4\nglobal_atomic_add_x2 v[4:5], v[0:1], off");
        assert_eq!(vgprs_needed(&code, &template, &read), 4);
        assert_eq!(vgprs_needed(&lines("s_mov_b64 s[4:5], exec"), &template, &read), 0);
    }

    #[test]
    fn renaming_skips_the_frame_and_return_address_sgprs() {
        let code = lines("s_mov_b64 s[4:5], exec");
        let mut site = PayloadSite::default();
        for sgpr in 4..30 {
            site.live.insert(Unit::sgpr(sgpr));
        }
        let template = PayloadSite::default();
        assert_eq!(rename(&code, &template, &site, &UnitSet::EMPTY).unwrap(), lines("s_mov_b64 s[34:35], exec"));
    }
}
