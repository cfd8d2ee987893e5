//! Seed 000's sliding placement: where no VGPR is free for a whole kernel,
//! the SVA (and the work-item ids) move between VGPRs free where they are.
//!
//! A value sits, across each instruction, in a VGPR free there (not live
//! before it, not read or written by it). Before an instruction it may move
//! to another such VGPR with one whole-wave copy (EXEC saved in an SGPR pair
//! dead there, `v_mov_b32`, EXEC restored). Along every CFG edge the
//! register is the same: the blocks' exits and the entries they lead to form
//! classes that agree on one register; inside a block, a dynamic program over
//! (instruction, register) finds the fewest moves from the entry register to
//! the exit register. Work is linear in instructions x 256.
//!
//! No move goes before a kernel's first instruction (the preamble writes the
//! value where it starts), nor inside a pc-relative computation (payloads go
//! before its `s_getpc_b64`, so the value must not move in between).
//! Nor in a VGPR a load may still be writing (liveness::pending): liveness
//! calls a load's VGPRs dead where no path reads them, though the data may
//! still land (Tensile's loop exits leave prefetches in flight).

use crate::stages::lift::{Function, Isa};
use crate::stages::liveness::pending::pending_before;
use crate::stages::liveness::{FunctionLiveness, RegisterFile, Unit, UnitSet};

/// A set of VGPRs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Vgprs([u64; 4]);

impl Vgprs {
    fn of(set: &UnitSet) -> Vgprs {
        let mut vgprs = Vgprs::default();
        for unit in set.in_file(RegisterFile::Vgpr).iter() {
            vgprs.insert(unit.index());
        }
        vgprs
    }

    fn contains(&self, v: u16) -> bool {
        self.0[usize::from(v / 64)] >> (v % 64) & 1 == 1
    }

    fn insert(&mut self, v: u16) {
        self.0[usize::from(v / 64)] |= 1 << (v % 64);
    }

    fn remove(&mut self, v: u16) {
        self.0[usize::from(v / 64)] &= !(1 << (v % 64));
    }

    fn and(&self, other: &Vgprs) -> Vgprs {
        Vgprs([0, 1, 2, 3].map(|w| self.0[w] & other.0[w]))
    }

    fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    /// Highest first.
    fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (0..256u16).rev().filter(|v| self.contains(*v))
    }
}

/// One whole-wave copy before an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    /// Index in `Function::instructions`.
    pub before: usize,
    pub from: u16,
    pub to: u16,
}

/// Where one value is across each instruction, and the moves that keep it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Track {
    /// The VGPR holding the value across each instruction (and at the point
    /// before it, after that point's moves).
    pub location: Vec<u16>,
    pub moves: Vec<Move>,
}

/// The sliding placement of a function: the SVA's track, the work-item
/// ids' when payloads need them, and the SGPR pair each move point saves
/// EXEC in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sliding {
    pub sva: Track,
    pub work_item_ids: Option<Track>,
    /// Per instruction with a move before it: the first SGPR of the pair.
    pub exec_pairs: std::collections::BTreeMap<usize, u16>,
}

impl Sliding {
    /// The assembly that goes before instruction `index`: the ids move
    /// first (the SVA may move into the register they leave).
    pub fn code_before(&self, index: usize) -> Vec<String> {
        let moves: Vec<&Move> = self
            .work_item_ids
            .iter()
            .flat_map(|t| &t.moves)
            .chain(&self.sva.moves)
            .filter(|m| m.before == index)
            .collect();
        let Some(pair) = self.exec_pairs.get(&index).filter(|_| !moves.is_empty()) else { return Vec::new() };
        let mut code = vec![format!("s_mov_b64 s[{}:{}], exec", pair, pair + 1), "s_mov_b64 exec, -1".to_string()];
        code.extend(moves.iter().map(|m| format!("v_mov_b32 v{}, v{}", m.to, m.from)));
        code.push(format!("s_mov_b64 exec, s[{}:{}]", pair, pair + 1));
        code
    }

    /// Every VGPR a value occupies somewhere.
    pub fn vgprs(&self) -> impl Iterator<Item = u16> + '_ {
        self.sva.location.iter().chain(self.work_item_ids.iter().flat_map(|t| &t.location)).copied()
    }

    /// Instructions with moves before them.
    pub fn move_points(&self) -> usize {
        self.exec_pairs.len()
    }

    /// Checks the tracks against the function's liveness, independently of
    /// how they were found: following every block with its moves, each
    /// value is where its track says, in a VGPR no instruction it crosses
    /// needs, apart from the other value, and each block ends where all its
    /// successors start; every move point has a dead EXEC pair.
    pub fn check(&self, function: &Function, liveness: &FunctionLiveness) -> Result<(), String> {
        let tracks: Vec<&Track> = self.work_item_ids.iter().chain([&self.sva]).collect();
        let mut start = 0;
        let mut starts = Vec::new();
        for block in &function.blocks {
            starts.push(start);
            start += block.instructions.len();
        }
        // Where a value is when control enters a block (before its moves).
        let entering = |track: &Track, first: usize| {
            track.moves.iter().find(|m| m.before == first).map_or(track.location[first], |m| m.from)
        };
        for (b, block) in function.blocks.iter().enumerate() {
            let range = starts[b]..starts[b] + block.instructions.len();
            if range.is_empty() {
                continue;
            }
            let mut at: Vec<u16> = tracks.iter().map(|t| entering(t, range.start)).collect();
            for i in range.clone() {
                let moves: Vec<(usize, &Move)> = tracks
                    .iter()
                    .enumerate()
                    .flat_map(|(k, t)| t.moves.iter().filter(move |m| m.before == i).map(move |m| (k, m)))
                    .collect();
                if !moves.is_empty() {
                    let pair =
                        self.exec_pairs.get(&i).ok_or(format!("instruction {i}: a move without an EXEC pair"))?;
                    if [*pair, pair + 1].iter().any(|s| liveness.live_in[i].contains(Unit::sgpr(*s))) {
                        return Err(format!("instruction {i}: s[{pair}:{}] is live", pair + 1));
                    }
                }
                // In order: the ids' move, then the SVA's.
                for (k, m) in moves {
                    if at[k] != m.from {
                        return Err(format!("instruction {i}: a move from v{} but the value is in v{}", m.from, at[k]));
                    }
                    if at.iter().enumerate().any(|(j, v)| j != k && *v == m.to) {
                        return Err(format!("instruction {i}: a move into v{}, which holds the other value", m.to));
                    }
                    if liveness.live_in[i].contains(Unit::vgpr(m.to)) {
                        return Err(format!("instruction {i}: a move into v{}, live there", m.to));
                    }
                    at[k] = m.to;
                }
                for (k, track) in tracks.iter().enumerate() {
                    let v = at[k];
                    if track.location[i] != v {
                        return Err(format!(
                            "instruction {i}: the value is in v{v}, its track says v{}",
                            track.location[i]
                        ));
                    }
                    let unit = Unit::vgpr(v);
                    if [&liveness.live_in[i], &liveness.defs[i], &liveness.uses[i]].iter().any(|s| s.contains(unit)) {
                        return Err(format!("instruction {i} needs v{v}, which holds a value"));
                    }
                }
            }
            for s in &block.successors {
                let first = starts[*s];
                for (k, track) in tracks.iter().enumerate() {
                    if entering(track, first) != at[k] {
                        return Err(format!(
                            "block {b} ends with a value in v{}, block {s} expects it elsewhere",
                            at[k]
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Why a value cannot slide through a function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stuck {
    /// Index in `Function::instructions`.
    pub instruction: usize,
    pub why: String,
}

/// What the dynamic program needs to know about a function.
struct Frame<'a> {
    function: &'a Function,
    /// Flat index of each block's first instruction.
    block_start: Vec<usize>,
    /// VGPRs a value may sit in across each instruction.
    free: Vec<Vgprs>,
    /// Where a move may go before each instruction: the EXEC pair.
    pair: Vec<Option<u16>>,
    /// The VGPRs a value may use at all.
    allocated: Vgprs,
}

impl Frame<'_> {
    fn block_range(&self, block: usize) -> std::ops::Range<usize> {
        let start = self.block_start[block];
        start..start + self.function.blocks[block].instructions.len()
    }
}

/// Places the SVA (and the work-item ids) through `function` by sliding.
/// `vgprs` are the VGPRs of the allocation, `sgprs` the SGPRs moves may save
/// EXEC in.
pub fn slide(
    function: &Function,
    isa: &Isa,
    liveness: &FunctionLiveness,
    vgprs: &UnitSet,
    sgprs: &UnitSet,
    work_item_ids: bool,
) -> Result<Sliding, Stuck> {
    let instructions: Vec<_> = function.instructions().collect();
    let mut block_start = Vec::with_capacity(function.blocks.len());
    let mut at = 0;
    for block in &function.blocks {
        block_start.push(at);
        at += block.instructions.len();
        if !block.resolved() {
            return Err(Stuck { instruction: at.saturating_sub(1), why: "its successors are unknown".into() });
        }
    }
    // Not where a load may still be landing (exports write no register).
    let allocated = Vgprs::of(vgprs);
    let pending = pending_before(function, isa, liveness, false);
    let free: Vec<Vgprs> = (0..instructions.len())
        .map(|i| {
            Vgprs::of(&liveness.free_at(i, &UnitSet::all()).difference(&pending[i].vector_registers())).and(&allocated)
        })
        .collect();
    let pair: Vec<Option<u16>> = instructions
        .iter()
        .enumerate()
        .map(|(index, instruction)| {
            let inside_pc_relative = instruction.pc_relative.as_ref().is_some_and(|pc| pc.getpc != instruction.address);
            if (index <= function.entry && function.is_kernel()) || inside_pc_relative {
                return None;
            }
            let live = &liveness.live_in[index];
            (0..crate::stages::load::allocation::MAX_SGPRS - 1)
                .step_by(2)
                .find(|s| [*s, s + 1].iter().all(|s| sgprs.contains(Unit::sgpr(*s)) && !live.contains(Unit::sgpr(*s))))
        })
        .collect();
    let mut frame = Frame { function, block_start, free, pair, allocated };
    let sva = track(&frame)?;
    let ids = if work_item_ids {
        // Off limits for the ids: where the SVA is, and where it comes from.
        for block in 0..function.blocks.len() {
            let range = frame.block_range(block);
            for i in range.clone() {
                frame.free[i].remove(sva.location[i]);
                if i > range.start {
                    frame.free[i].remove(sva.location[i - 1]);
                }
            }
            for m in sva.moves.iter().filter(|m| m.before == range.start) {
                frame.free[range.start].remove(m.from);
            }
        }
        Some(track(&frame).map_err(|stuck| Stuck { why: format!("{} (for the work-item ids)", stuck.why), ..stuck })?)
    } else {
        None
    };
    let exec_pairs = sva
        .moves
        .iter()
        .chain(ids.iter().flat_map(|t| &t.moves))
        .map(|m| (m.before, frame.pair[m.before].expect("moves go where a pair is dead")))
        .collect();
    Ok(Sliding { sva, work_item_ids: ids, exec_pairs })
}

/// Union-find root.
fn root(parent: &mut [usize], mut node: usize) -> usize {
    while parent[node] != node {
        parent[node] = parent[parent[node]];
        node = parent[node];
    }
    node
}

/// How many instructions from `start` (forwards or backwards) `v` stays free.
fn run(frame: &Frame<'_>, range: std::ops::Range<usize>, v: u16, forwards: bool) -> usize {
    let free = |i: &usize| frame.free[*i].contains(v);
    if forwards {
        range.take_while(free).count()
    } else {
        range.rev().take_while(free).count()
    }
}

/// One value's track through the function.
fn track(frame: &Frame<'_>) -> Result<Track, Stuck> {
    let blocks = &frame.function.blocks;
    // Nodes: 2b is block b's entry, 2b + 1 its exit.
    let mut parent: Vec<usize> = (0..2 * blocks.len()).collect();
    for (b, block) in blocks.iter().enumerate() {
        for s in &block.successors {
            let (x, y) = (root(&mut parent, 2 * b + 1), root(&mut parent, 2 * s));
            parent[x] = y;
        }
    }
    // Each class: the registers every member allows, and a score per
    // register (how long it stays free next to the boundary).
    let mut allowed = vec![frame.allocated; parent.len()];
    let mut constrained = vec![false; parent.len()];
    let mut witness = vec![0usize; parent.len()];
    for (b, _) in blocks.iter().enumerate() {
        let range = frame.block_range(b);
        if range.is_empty() {
            continue;
        }
        let exit = root(&mut parent, 2 * b + 1);
        if !blocks[b].successors.is_empty() {
            allowed[exit] = allowed[exit].and(&frame.free[range.end - 1]);
            constrained[exit] = true;
            witness[exit] = range.end - 1;
        }
        let entry = root(&mut parent, 2 * b);
        constrained[entry] = true;
        if frame.pair[range.start].is_none() {
            allowed[entry] = allowed[entry].and(&frame.free[range.start]);
            witness[entry] = range.start;
        }
    }
    let mut members: Vec<Vec<(usize, bool)>> = vec![Vec::new(); parent.len()];
    for node in 0..parent.len() {
        let class = root(&mut parent, node);
        members[class].push((node / 2, node % 2 == 0));
    }
    let mut chosen: Vec<Option<u16>> = vec![None; parent.len()];
    for class in 0..parent.len() {
        if root(&mut parent, class) != class || !constrained[class] {
            continue;
        }
        if allowed[class].is_empty() {
            return Err(Stuck {
                instruction: witness[class],
                why: "no VGPR is free on every path through this block boundary".into(),
            });
        }
        let members = &members[class];
        let score =
            |v: u16| -> usize { members.iter().map(|(b, entry)| run(frame, frame.block_range(*b), v, *entry)).sum() };
        chosen[class] = allowed[class].iter().max_by_key(|v| (score(*v), *v));
    }
    let mut location = vec![0u16; frame.free.len()];
    let mut moves = Vec::new();
    for (b, block) in blocks.iter().enumerate() {
        let range = frame.block_range(b);
        if range.is_empty() {
            continue;
        }
        let entry = chosen[root(&mut parent, 2 * b)];
        let exit = if block.successors.is_empty() { None } else { chosen[root(&mut parent, 2 * b + 1)] };
        block_track(frame, range, entry, exit, &mut location, &mut moves)?;
    }
    moves.sort_by_key(|m| m.before);
    Ok(Track { location, moves })
}

const UNREACHABLE: u32 = u32::MAX / 2;

/// The fewest moves through one block from `entry` to `exit`.
fn block_track(
    frame: &Frame<'_>,
    range: std::ops::Range<usize>,
    entry: Option<u16>,
    exit: Option<u16>,
    location: &mut [u16],
    moves: &mut Vec<Move>,
) -> Result<(), Stuck> {
    let start = range.start;
    // Cost of holding the value in each register before the block.
    let mut cost = [UNREACHABLE; 256];
    match entry {
        Some(v) => cost[usize::from(v)] = 0,
        None => cost = [0; 256],
    }
    // Per instruction: which registers kept the value from the one before,
    // and where a move came from.
    let mut stayed: Vec<Vgprs> = Vec::with_capacity(range.len());
    let mut source: Vec<u16> = Vec::with_capacity(range.len());
    for i in range.clone() {
        let (best, from) = (0..256u16).rev().map(|v| (cost[usize::from(v)], v)).min_by_key(|(c, _)| *c).expect("256");
        let moved = if frame.pair[i].is_some() { best.saturating_add(1) } else { UNREACHABLE };
        let mut stay = Vgprs::default();
        let mut next = [UNREACHABLE; 256];
        for v in frame.free[i].iter() {
            let here = cost[usize::from(v)];
            if here <= moved && here < UNREACHABLE {
                next[usize::from(v)] = here;
                stay.insert(v);
            } else if moved < UNREACHABLE {
                next[usize::from(v)] = moved;
            }
        }
        if next.iter().all(|c| *c >= UNREACHABLE) {
            return Err(Stuck {
                instruction: i,
                why: if frame.free[i].is_empty() {
                    "no VGPR is free across this instruction".into()
                } else {
                    "no VGPR stays free up to this instruction, and no SGPR pair is dead to move it".into()
                },
            });
        }
        stayed.push(stay);
        source.push(from);
        cost = next;
    }
    let mut v = match exit {
        Some(v) if cost[usize::from(v)] < UNREACHABLE => v,
        Some(_) => {
            return Err(Stuck {
                instruction: range.end - 1,
                why: "the register the successors expect is not free at the end of this block".into(),
            })
        }
        None => (0..256u16).rev().min_by_key(|v| cost[usize::from(*v)]).expect("256"),
    };
    for i in range.rev() {
        location[i] = v;
        if !stayed[i - start].contains(v) {
            let from = source[i - start];
            moves.push(Move { before: i, from, to: v });
            v = from;
        }
    }
    debug_assert!(entry.is_none_or(|e| e == v), "the track starts at the entry register");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vgpr_sets() {
        let mut set = Vgprs::default();
        for v in [0, 63, 64, 200, 255] {
            set.insert(v);
        }
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![255, 200, 64, 63, 0]);
        set.remove(64);
        assert!(!set.contains(64) && set.contains(63));
        let units: UnitSet = [Unit::vgpr(3), Unit::sgpr(3), Unit::agpr(7)].into_iter().collect();
        assert_eq!(Vgprs::of(&units).iter().collect::<Vec<_>>(), vec![3]);
    }
}
