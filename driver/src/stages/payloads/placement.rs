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
use crate::stages::lower_mir::physical::{mir_register, units_of_mir_name};
use crate::stages::lower_mir::PayloadSite;
use crate::stages::payload::{BufferAddress, HookArgument, HookCall, PayloadPoint};
use gpuinstr_intrinsics::Register;

use super::{CodeLine, CompiledPayload, PayloadRoom, VgprRuns};

/// SGPRs a renamed payload may use: those GFX9 code addresses (s0-s101),
/// but the payload calling convention's frame (s0-s3 scratch V#, s32 stack
/// pointer) and return address (s30, s31), which LLVM never gives a
/// payload's values either.
const SGPR_LIMIT: u16 = 102;
const RESERVED_SGPRS: [u16; 7] = [0, 1, 2, 3, 30, 31, 32];

/// What must be equal for points to share a template: the calls (but for
/// the values of integer constants and address offsets, which become point
/// constants, and the application registers the hooks read, which each
/// template reads at stand-ins of its own and each copy where its point
/// has them), which kernel inputs are at hand (SVA, work-item ids,
/// hidden-argument offsets, work-group bound) and which special registers
/// are live (saving one costs code). Kernels with no register for the SVA
/// have templates of their own (compiled without one: a template whose
/// hooks need it is refused as their payloads would be). `None`: the point
/// cannot use a template (its site parks registers, or a hook reads a
/// register no 32-bit unit names).
pub fn template_key(point: &PayloadPoint, site: &PayloadSite) -> Option<TemplateKey> {
    TemplateKeys::default().key(point, site)
}

/// A point's template: the key points share one by, the registers the
/// template's hooks read, and where the point has them.
#[derive(Clone, Debug, PartialEq)]
pub struct TemplateKey {
    pub key: String,
    /// The registers the template reads (stand-ins for the point's).
    pub read: UnitSet,
    /// The template's read registers to the point's.
    pub reads_at_point: ReadMap,
    /// The point's calls as its template makes them (reading the stand-ins).
    pub calls: Vec<HookCall>,
}

/// The registers a template's hooks read, each to the point's own: pairs
/// stay pairs, a register read twice is one stand-in. Registers not in the
/// map are the same at the point (special registers).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ReadMap(Vec<(Unit, Unit)>);

impl ReadMap {
    /// Where the point has the template's `unit`.
    pub fn at_point(&self, unit: Unit) -> Unit {
        self.0.iter().find(|(template, _)| *template == unit).map_or(unit, |(_, point)| *point)
    }

    /// The point's registers the template's `read` names.
    pub fn point_units(&self, read: &UnitSet) -> UnitSet {
        let mut units = UnitSet::EMPTY;
        for unit in read.iter() {
            units.insert(self.at_point(unit));
        }
        units
    }

    /// The stand-in for the point's `unit`: the one it has, else the next
    /// free in its file (even for the low half of a `pair`).
    fn stand_in(&mut self, unit: Unit, next: &mut [u16; 3], pair: bool) -> Option<Unit> {
        if let Some((template, _)) = self.0.iter().find(|(_, point)| *point == unit) {
            return Some(*template);
        }
        let file = file_index(unit.file())?;
        if pair {
            next[file] = next[file].next_multiple_of(2);
        }
        let stand_in = match unit.file() {
            RegisterFile::Sgpr => Unit::sgpr(next[file]),
            RegisterFile::Vgpr => Unit::vgpr(next[file]),
            _ => Unit::agpr(next[file]),
        };
        next[file] += 1;
        self.0.push((stand_in, unit));
        Some(stand_in)
    }
}

/// [`template_key`] over many points: each kernel's hidden arguments
/// written once (sites share them), not per point.
#[derive(Default)]
pub struct TemplateKeys {
    hidden: rustc_hash::FxHashMap<usize, String>,
}

impl TemplateKeys {
    pub fn key(&mut self, point: &PayloadPoint, site: &PayloadSite) -> Option<TemplateKey> {
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

/// Where a template's stand-ins for the registers its hooks read begin,
/// per file (SGPR, VGPR, AGPR): past the payload frame's SGPRs (s0-s3)
/// and the VGPRs the SVA's and work-item ids' stand-ins take (v0, v1).
const FIRST_READ_STAND_INS: [u16; 3] = [4, 2, 0];

/// An application register a hook reads as its template reads it: its
/// stand-in (`None`: a register no stand-in takes, such as a trap
/// temporary, kept where it is).
fn stand_in_register(register: Register, unit: Unit) -> Option<Register> {
    match (register, unit.file()) {
        (Register::Sgpr(_), RegisterFile::Sgpr) => Some(Register::Sgpr(unit.index())),
        (Register::Vgpr(_), RegisterFile::Vgpr) => Some(Register::Vgpr(unit.index())),
        (Register::Agpr(_), RegisterFile::Agpr) => Some(Register::Agpr(unit.index())),
        _ => None,
    }
}

fn key_with(point: &PayloadPoint, site: &PayloadSite, hidden_arguments: &str) -> Option<TemplateKey> {
    if site.parking.is_some() && !loads_only_the_sva(site) {
        return None;
    }
    let mut read = UnitSet::EMPTY;
    let mut reads_at_point = ReadMap::default();
    let mut next = FIRST_READ_STAND_INS;
    // The register a hook reads, as the template reads it. A register
    // argument may be read as 64 bits (the hook's parameter says): its
    // pair is read, and a special pair (EXEC, VCC) stays where it is.
    let mut template_register = |register: Register, pair: bool, read: &mut UnitSet| -> Option<Register> {
        let units = units_of_mir_name(&mir_register(register));
        if units.iter().all(|unit| unit.file() == RegisterFile::Special) && !units.is_empty() {
            for unit in units {
                read.insert(unit);
            }
            return Some(register);
        }
        let [unit] = units[..] else { return None };
        stand_in_register(register, unit)?;
        let low = reads_at_point.stand_in(unit, &mut next, pair)?;
        read.insert(low);
        if pair {
            let high = reads_at_point.stand_in(next_unit(unit)?, &mut next, false)?;
            // A pair whose halves were read apart before: no stand-in pair.
            if high != next_unit(low)? {
                return None;
            }
            read.insert(high);
        }
        stand_in_register(register, low)
    };
    let mut calls = Vec::with_capacity(point.calls.len());
    let mut shapes = Vec::with_capacity(point.calls.len());
    for call in &point.calls {
        let mut arguments = Vec::with_capacity(call.arguments.len());
        let mut shape = Vec::with_capacity(call.arguments.len());
        for argument in &call.arguments {
            let argument = match argument {
                HookArgument::Int(_) => {
                    shape.push("int".to_string());
                    argument.clone()
                }
                HookArgument::Float(value) => {
                    shape.push(format!("{value:?}"));
                    argument.clone()
                }
                HookArgument::Register(register) => {
                    let register = template_register(*register, true, &mut read)?;
                    shape.push(register.to_string());
                    HookArgument::Register(register)
                }
                HookArgument::MemoryAddress { base, index, offset } => {
                    // The base is a 64-bit pair.
                    let base = template_register(*base, true, &mut read)?;
                    let index = match index {
                        Some(index) => Some(template_register(*index, false, &mut read)?),
                        None => None,
                    };
                    HookArgument::MemoryAddress { base, index, offset: *offset }
                }
                HookArgument::LdsAddress { address, offset } => {
                    let address = template_register(*address, false, &mut read)?;
                    HookArgument::LdsAddress { address, offset: *offset }
                }
                HookArgument::BufferAddress(buffer) => {
                    let mut stand_in = |register: Option<Register>| match register {
                        Some(register) => template_register(register, false, &mut read).map(Some),
                        None => Some(None),
                    };
                    let [r0, r1, r2, r3] = buffer.resource;
                    let resource = [stand_in(Some(r0))?, stand_in(Some(r1))?, stand_in(Some(r2))?, stand_in(Some(r3))?]
                        .map(|register| register.expect("a register"));
                    let buffer = BufferAddress {
                        resource,
                        index: stand_in(buffer.index)?,
                        voffset: stand_in(buffer.voffset)?,
                        soffset: stand_in(buffer.soffset)?,
                        ..buffer.clone()
                    };
                    HookArgument::BufferAddress(buffer)
                }
            };
            if let Some(address) = argument.address_shape() {
                shape.push(address);
            }
            arguments.push(argument);
        }
        shapes.push(format!("{}({})", call.hook, shape.join(", ")));
        calls.push(HookCall { hook: call.hook.clone(), arguments });
    }
    let specials: Vec<String> = site.live.in_file(RegisterFile::Special).iter().map(|u| u.to_string()).collect();
    let key = format!(
        "{}|{}|{}|{}|{}|{}|{}",
        shapes.join(";"),
        site.unplaced.is_some(),
        site.sva.is_some(),
        site.work_item_ids.is_some(),
        hidden_arguments,
        site.max_flat_workgroup_size,
        specials.join(",")
    );
    Some(TemplateKey { key, read, reads_at_point, calls })
}

/// Whether the site's only parking is the SVA's load from the wave's slot
/// in memory or from its AGPRs: its copies are wrapped in the load (only
/// where they read the SVA or the ids), like copies at sites that park.
/// (Tensile's kernels at 256 VGPRs keep the SVA in AGPRs: the memory
/// tracer's points there were compiled by llc a group at a time.)
fn loads_only_the_sva(site: &PayloadSite) -> bool {
    site.parking.as_ref().is_some_and(crate::stages::lower_mir::final_code::Parking::only_loads_the_sva)
}

/// The register after `unit` in its file (the high half of a pair), if
/// there is one.
fn next_unit(unit: Unit) -> Option<Unit> {
    match unit.file() {
        RegisterFile::Sgpr if unit.index() + 1 < SGPR_LIMIT => Some(Unit::sgpr(unit.index() + 1)),
        RegisterFile::Vgpr if unit.index() < 255 => Some(Unit::vgpr(unit.index() + 1)),
        RegisterFile::Agpr if unit.index() < 255 => Some(Unit::agpr(unit.index() + 1)),
        _ => None,
    }
}

/// The site a template is compiled for, from one of its points' sites:
/// only the special registers and those its hooks read (`read`) live, the
/// SVA and work-item ids (if the point has them, in a register or loaded
/// from the wave's slot) in the lowest VGPRs the hooks do not read. With
/// `own_vgprs`, a *tight* template: LLVM may give it only that many VGPRs
/// besides those (for sites with few dead; LLVM spreads out where it may).
pub fn template_site(site: &PayloadSite, read: &UnitSet, own_vgprs: Option<u16>) -> PayloadSite {
    let mut stand_ins = (0..256u16).filter(|v| !read.contains(Unit::vgpr(*v)));
    let (sva_stand_in, ids_stand_in) = (stand_ins.next(), stand_ins.next());
    let mut live = site.live.in_file(RegisterFile::Special);
    for unit in read.iter() {
        live.insert(unit);
    }
    let sva = site.sva.and(sva_stand_in);
    let work_item_ids = site.work_item_ids.and(ids_stand_in);
    let max_vgprs = match own_vgprs {
        Some(own) => {
            let read_vgprs = read.in_file(RegisterFile::Vgpr);
            let taken = read_vgprs.iter().map(|u| u.index()).chain(sva).chain(work_item_ids);
            taken.map(|v| v + 1).max().unwrap_or(0) + own
        }
        None => PayloadSite::default().max_vgprs,
    };
    PayloadSite {
        live,
        sva,
        work_item_ids,
        hidden_arguments: site.hidden_arguments.clone(),
        max_flat_workgroup_size: site.max_flat_workgroup_size,
        max_vgprs,
        unplaced: site.unplaced.clone(),
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

/// The room a template's code needs at a site where too few VGPRs are dead
/// for it: its VGPR runs besides those its hooks read and the SVA's and
/// work-item ids' stand-ins, each contiguous (else, past
/// [`VgprRuns::MAX`] runs, as many VGPRs in whole aligned pairs).
pub fn room_needed(code: &[CodeLine], template: &PayloadSite, read: &UnitSet) -> PayloadRoom {
    let stand_ins: Vec<u16> = template.sva.iter().chain(&template.work_item_ids).copied().collect();
    let lengths: Vec<usize> = runs(code)
        .iter()
        .filter(|run| run.file == RegisterFile::Vgpr)
        .filter(|run| !(run.first..=run.last).any(|v| read.contains(Unit::vgpr(v)) || stand_ins.contains(&v)))
        .map(|run| usize::from(run.last - run.first + 1))
        .collect();
    match VgprRuns::new(lengths.iter().copied()) {
        Some(runs) => PayloadRoom::Runs(runs),
        None => PayloadRoom::AlignedPairs(lengths.iter().sum::<usize>().div_ceil(2) * 2),
    }
}

/// How many AGPRs a template's code names (one past the highest), which a
/// site must have for its copy.
pub fn agprs_used(code: &[CodeLine]) -> u16 {
    runs(code).iter().filter(|run| run.file == RegisterFile::Agpr).map(|run| run.last + 1).max().unwrap_or(0)
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

/// Where a tuple of `length` registers of `file` may start: SGPR tuples of
/// four or more at a multiple of four, pairs and VGPR and AGPR tuples at
/// an even register (gfx90a and later; earlier processors take any).
fn tuple_alignment(file: RegisterFile, length: u16) -> u16 {
    match (length, file) {
        (0 | 1, _) => 1,
        (2, _) | (_, RegisterFile::Vgpr | RegisterFile::Agpr) => 2,
        _ => 4,
    }
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
            let align = tuple_alignment(file, last - first + 1);
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
pub fn rename(
    code: &[CodeLine],
    template: &PayloadSite,
    site: &PayloadSite,
    read: &UnitSet,
    reads_at_point: &ReadMap,
) -> Option<Vec<CodeLine>> {
    Renamer::new(code).rename(template, site, read, reads_at_point, None)
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
    /// read (`read`) onto the point's own (`reads_at_point`), the SVA's and the work-item ids' stand-ins
    /// renamed to the site's own, every other run onto dead registers
    /// below the site's limits that keep its alignment: the first in
    /// `order` when given (the function's registers least often live
    /// first, so that its sites rename alike), else the lowest.
    pub fn rename(
        &self,
        template: &PayloadSite,
        site: &PayloadSite,
        read: &UnitSet,
        reads_at_point: &ReadMap,
        order: Option<&RegisterOrder>,
    ) -> Option<Vec<CodeLine>> {
        self.rename_choosing(template, site, read, reads_at_point, order).map(|(code, _)| code)
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
        reads_at_point: &ReadMap,
        order: Option<&RegisterOrder>,
    ) -> Option<(Vec<CodeLine>, UnitSet)> {
        let mut chosen = UnitSet::EMPTY;
        let mut taken: UnitSet = site.live.union(&reads_at_point.point_units(read));
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
            // What the hooks read goes where the point has it, whole.
            let read_here = (run.first..=run.last).filter(|i| read.contains(unit(*i))).count();
            if read_here > 0 {
                if read_here != usize::from(run.last - run.first + 1) {
                    return None;
                }
                for index in run.first..=run.last {
                    moved.insert((run.file, index), reads_at_point.at_point(unit(index)).index());
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
                // A tuple stays a tuple (stand-ins read apart may lie apart
                // at the point).
                if (token.first..=token.last).any(|i| moved[&(token.file, i)] != first + (i - token.first))
                    || !first.is_multiple_of(tuple_alignment(token.file, token.last - token.first + 1))
                {
                    return None;
                }
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
        let placed_key = template_key(&point, &placed).unwrap().key;
        let unplaced_key = template_key(&point, &unplaced).unwrap().key;
        assert_ne!(placed_key, unplaced_key);
        // Its template is compiled as unplaced: hooks needing the SVA are refused there.
        assert_eq!(template_site(&unplaced, &UnitSet::EMPTY, None).unplaced.as_deref(), Some("no VGPR is free"));
        let parked = PayloadSite { parking: Some(Default::default()), ..PayloadSite::default() };
        assert!(template_key(&point, &parked).is_none());
    }

    #[test]
    fn sites_that_load_the_sva_from_memory_share_the_templates_of_sites_with_it() {
        use crate::stages::lower_mir::final_code::{Parking, SlotLoads};
        let point = counting_point();
        let slot_loads = Some(SlotLoads { sva: 40, work_item_ids: None, pair: 6, indexing: Default::default() });
        let loading = PayloadSite {
            sva: Some(40),
            parking: Some(Parking { slot_loads, ..Parking::default() }),
            ..PayloadSite::default()
        };
        let in_a_register = PayloadSite { sva: Some(7), ..PayloadSite::default() };
        let key = template_key(&point, &loading).expect("a template");
        assert_eq!(Some(key), template_key(&point, &in_a_register), "one template, the copy wrapped in the load");
        let template = template_site(&loading, &UnitSet::EMPTY, None);
        assert_eq!((template.sva, template.parking.is_none(), template.unplaced), (Some(0), true, None));
        // Anything parked besides: no template.
        let parking = Parking { slot_loads, spilled: vec![3], ..Parking::default() };
        let spilling = PayloadSite { parking: Some(parking), ..loading };
        assert!(template_key(&point, &spilling).is_none());
    }

    /// A point tracing the address in `base` (a VGPR pair) plus `offset`.
    fn tracing_point(base: u16, offset: i64) -> PayloadPoint {
        use crate::stages::payload::HookCall;
        let address = HookArgument::MemoryAddress { base: Register::Vgpr(base), index: None, offset };
        PayloadPoint {
            function: 0,
            instruction: 0,
            calls: vec![HookCall { hook: "trace".into(), arguments: vec![address] }],
        }
    }

    #[test]
    fn points_reading_other_registers_share_a_template_reading_stand_ins() {
        let site = PayloadSite { sva: Some(30), max_vgprs: 64, ..PayloadSite::default() };
        let (at_20, at_46) =
            (template_key(&tracing_point(20, 8), &site).unwrap(), template_key(&tracing_point(46, 0), &site).unwrap());
        assert_eq!(at_20.key, at_46.key);
        assert_eq!(at_20.read, at_46.read);
        // The template reads v[2:3] (after the SVA's and ids' stand-ins v0, v1).
        let HookArgument::MemoryAddress { base, .. } = &at_20.calls[0].arguments[0] else { panic!("an address") };
        assert_eq!(*base, Register::Vgpr(2));
        let template = template_site(&site, &at_20.read, None);
        assert_eq!(template.sva, Some(0));
        assert!(template.live.contains(Unit::vgpr(2)) && template.live.contains(Unit::vgpr(3)));
        // Each copy reads its point's pair, the SVA stand-in becomes v30 and
        // the template's own v4 the lowest dead VGPR (not the pair).
        let code = lines("v_readlane_b32 s4, v0, 3\nglobal_load_dword v4, v[2:3], off");
        let mut at = site.clone();
        for v in [0, 1, 46, 47] {
            at.live.insert(Unit::vgpr(v));
        }
        assert_eq!(
            rename(&code, &template, &at, &at_46.read, &at_46.reads_at_point).unwrap(),
            lines("v_readlane_b32 s4, v30, 3\nglobal_load_dword v2, v[46:47], off")
        );
        // A tuple half read and half not cannot be renamed.
        let half = lines("global_load_dwordx2 v[3:4], v[2:3], off");
        assert_eq!(rename(&half, &template, &at, &at_46.read, &at_46.reads_at_point), None);
        // A pair whose halves the point reads apart (v21 as a register first,
        // then v[20:21] as an address) keeps no pair of stand-ins: no template.
        let mut apart = tracing_point(20, 0);
        apart.calls[0].arguments.insert(0, HookArgument::Register(Register::Vgpr(21)));
        assert!(template_key(&apart, &site).is_none());
    }

    #[test]
    fn a_tight_template_gets_only_so_many_vgprs_of_its_own() {
        let site = PayloadSite { sva: Some(30), work_item_ids: Some(31), ..PayloadSite::default() };
        let key = template_key(&tracing_point(46, 0), &site).unwrap();
        // v0, v1 stand-ins, v[2:3] read: 4, and 8 of its own.
        assert_eq!(template_site(&site, &key.read, Some(8)).max_vgprs, 12);
        assert_eq!(template_site(&site, &key.read, None).max_vgprs, PayloadSite::default().max_vgprs);
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
        let template = template_site(&PayloadSite::default(), &UnitSet::EMPTY, None);
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
            assert_eq!(
                renamer.rename(&template, &at(live), &UnitSet::EMPTY, &ReadMap::default(), Some(&order)).unwrap(),
                expected
            );
        }
        // Without the order: the lowest dead registers, different per site.
        assert_ne!(
            renamer.rename(&template, &at(live_low), &UnitSet::EMPTY, &ReadMap::default(), None).unwrap(),
            expected
        );
        // Where the never-live ones are taken, the next least often live.
        let mut crowded = live_low;
        crowded.insert(Unit::vgpr(4));
        let renamed =
            renamer.rename(&template, &at(crowded), &UnitSet::EMPTY, &ReadMap::default(), Some(&order)).unwrap();
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
        let renamed = rename(&code, &template, &site, &UnitSet::EMPTY, &ReadMap::default()).unwrap();
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
        assert_eq!(rename(&code, &template, &site, &UnitSet::EMPTY, &ReadMap::default()), None);
    }

    #[test]
    fn renaming_keeps_off_the_sites_sva_where_the_template_reads_none() {
        // A template compiled without an SVA, at a site whose parking loads
        // the SVA into v0 for its spills: the copy must not take v0.
        let code = lines("v_mov_b32_e32 v0, 1");
        let template = PayloadSite::default();
        let site = PayloadSite { sva: Some(0), work_item_ids: Some(1), max_vgprs: 8, ..PayloadSite::default() };
        assert_eq!(
            rename(&code, &template, &site, &UnitSet::EMPTY, &ReadMap::default()).unwrap(),
            lines("v_mov_b32_e32 v2, 1")
        );
    }

    #[test]
    fn the_room_a_template_needs_is_its_own_vgpr_runs() {
        let mut read = UnitSet::EMPTY;
        read.insert(Unit::vgpr(0));
        read.insert(Unit::vgpr(1));
        let template = PayloadSite { sva: Some(2), ..PayloadSite::default() };
        // v[0:1] read and the SVA's stand-in v2 stay; v[4:5] and v3 are its
        // own, and v[6:9] and v[8:11] overlap into one run of six.
        let code = lines(
            "v_readlane_b32 s4, v2, 3\nv_mov_b32_e32 v3, s4\nglobal_atomic_add_x2 v[4:5], v[0:1], off\n\
             global_store_dwordx4 v[0:1], v[6:9], off\nglobal_store_dwordx4 v[0:1], v[8:11], off",
        );
        let runs = |lengths: &[usize]| PayloadRoom::Runs(VgprRuns::new(lengths.iter().copied()).unwrap());
        assert_eq!(room_needed(&code, &template, &read), runs(&[6, 2, 1]));
        assert_eq!(room_needed(&lines("s_mov_b64 s[4:5], exec"), &template, &read), runs(&[]));
        // Past VgprRuns::MAX runs: as many VGPRs in aligned pairs.
        let singles: Vec<String> = (10..20).map(|v| format!("v_mov_b32_e32 v{}, 0", 2 * v)).collect();
        assert_eq!(room_needed(&lines(&singles.join("\n")), &template, &read), PayloadRoom::AlignedPairs(10));
        assert_eq!(agprs_used(&lines("v_accvgpr_write_b32 a3, v4")), 4);
        assert_eq!(agprs_used(&code), 0);
    }

    #[test]
    fn renaming_skips_the_frame_and_return_address_sgprs() {
        let code = lines("s_mov_b64 s[4:5], exec");
        let mut site = PayloadSite::default();
        for sgpr in 4..30 {
            site.live.insert(Unit::sgpr(sgpr));
        }
        let template = PayloadSite::default();
        assert_eq!(
            rename(&code, &template, &site, &UnitSet::EMPTY, &ReadMap::default()).unwrap(),
            lines("s_mov_b64 s[34:35], exec")
        );
    }
}
