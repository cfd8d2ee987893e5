//! Subroutines inside a function: code that the function calls with
//! `s_swappc_b64` through an address its own symbolic pc-relative
//! computations built, and that returns with `s_setpc_b64` through the
//! return address the call wrote. Tensile's hipBLASLt kernels call their
//! activation functions so (one of several, chosen at run time, built in
//! `s[12:13]` well before the calls).
//!
//! A call is local when every instruction of the function that writes its
//! address registers is part of such a computation (a symbolic
//! `s_getpc_b64` and the adds after it): the address is then one of those
//! computations' targets. A subroutine's body is what its entry block
//! reaches; it must end only in returns (no other jump through registers,
//! no call, no way out of the function), or its calls stay unknown.
//! Liveness then treats a local call as a call of a function: it uses what
//! its possible subroutines need at their entries and may write what their
//! bodies write, and a return has live after it what is live after the
//! calls that may reach it.

use std::collections::{BTreeSet, HashMap};

use super::units::{RegisterUnits, Unit, UnitSet};
use crate::stages::lift::{BlockExit, Flow, Function, Isa};

/// The instructions after an `s_getpc_b64` that may still add to its pair
/// (`s_add_i32` of the offset, `s_add_u32`, `s_addc_u32`; Tensile's
/// backward form has `s_abs_i32` too).
const COMPUTATION_LENGTH: usize = 5;

/// A function's local calls (instruction indices in
/// `Function::instructions` order; blocks by index).
#[derive(Clone, Debug, Default)]
pub struct LocalCalls {
    /// Per local call: the entries of the subroutines it may call.
    pub callees: HashMap<usize, Vec<usize>>,
    /// Per return block: the local calls that may return through it.
    pub returns: HashMap<usize, Vec<usize>>,
    /// Per subroutine entry: every unit its body may write.
    pub writes: HashMap<usize, UnitSet>,
    /// The local calls' addresses.
    pub call_addresses: BTreeSet<u64>,
}

impl LocalCalls {
    pub fn is_empty(&self) -> bool {
        self.callees.is_empty()
    }

    /// Whether the call at `address` goes to a subroutine of the function's own.
    pub fn is_local(&self, address: u64) -> bool {
        self.call_addresses.contains(&address)
    }
}

/// Whether `function` makes calls and every one goes to a subroutine of
/// its own.
pub fn calls_only_its_own_code(isa: &Isa, units: &RegisterUnits, function: &Function) -> bool {
    if function.calls.is_empty() {
        return false;
    }
    let local = find(isa, units, function);
    function.calls.iter().all(|call| local.is_local(call.address))
}

/// The local calls of `function` (none where a call's address may come
/// from elsewhere, or a body does more than return).
pub fn find(isa: &Isa, units: &RegisterUnits, function: &Function) -> LocalCalls {
    let mut found = LocalCalls::default();
    // Calls through an address not known, or known to be inside the
    // function (not a function of the code object).
    let inside = |target: u64| target > function.address && target < function.end();
    let instructions: Vec<_> = function.instructions().collect();
    let index_of: HashMap<u64, usize> = instructions.iter().enumerate().map(|(n, i)| (i.address, n)).collect();
    let unknown_calls: Vec<usize> = function
        .calls
        .iter()
        .filter(|c| c.target.is_none_or(inside))
        .filter_map(|c| index_of.get(&c.address).copied())
        .collect();
    if unknown_calls.is_empty() {
        return found;
    }
    // Symbolic computations: the `s_getpc_b64` index, its pair's units and
    // the address it gives.
    let targets: HashMap<u64, u64> =
        instructions.iter().filter_map(|i| i.pc_relative.as_ref()).map(|pc| (pc.getpc, pc.target)).collect();
    let computations: Vec<(usize, UnitSet, u64)> = targets
        .iter()
        .filter_map(|(getpc, target)| {
            let index = *index_of.get(getpc)?;
            let pair = *instructions[index].defs.first()?;
            Some((index, set_of(units.units(pair)), *target))
        })
        .collect();
    let block_at: HashMap<u64, usize> = function.blocks.iter().map(|b| (b.address, b.index)).collect();
    let first_of_block: Vec<usize> = function
        .blocks
        .iter()
        .scan(0, |next, b| {
            let first = *next;
            *next += b.instructions.len();
            Some(first)
        })
        .collect();
    // Every computed address that starts a subroutine that only returns,
    // and what its body writes.
    let mut bodies: HashMap<usize, (BTreeSet<usize>, UnitSet, Vec<Unit>)> = HashMap::new();
    for (_, _, target) in &computations {
        let (Some(&entry), Some(&block)) = (index_of.get(target), block_at.get(target)) else { continue };
        if bodies.contains_key(&entry) {
            continue;
        }
        if let Some((blocks, returns_through)) = body(units, function, block) {
            let mut writes = UnitSet::EMPTY;
            for block in &blocks {
                let first = first_of_block[*block];
                for instruction in &instructions[first..first + function.blocks[*block].instructions.len()] {
                    instruction.all_defs().for_each(|reg| units.units(reg).iter().for_each(|u| writes.insert(*u)));
                }
            }
            // A body that writes its return address returns elsewhere.
            if returns_through.iter().all(|unit| !writes.contains(*unit)) {
                bodies.insert(entry, (blocks, writes, returns_through));
            }
        }
    }
    let mut any_body_writes = UnitSet::EMPTY;
    bodies.values().for_each(|(_, writes, _)| any_body_writes.union_with(writes));

    // Calls assumed local write what a subroutine body may; a call found
    // not to be local writes anything, and the calls after it are looked
    // at again.
    let mut opaque: BTreeSet<usize> = BTreeSet::new();
    loop {
        found.callees.clear();
        let mut reaching: HashMap<Vec<Unit>, HashMap<usize, ReachingDefs>> = HashMap::new();
        let mut newly_opaque = Vec::new();
        for &call in &unknown_calls {
            if opaque.contains(&call) {
                continue;
            }
            let Some(&pointer) = instructions[call].uses.first() else {
                newly_opaque.push(call);
                continue;
            };
            let pair: Vec<Unit> = units.units(pointer).to_vec();
            let pair_set = set_of(&pair);
            // The writes of the pair that reach the call must all be parts
            // of computations that build it (not the function's input).
            let writes_pair = |index: usize| -> Vec<usize> {
                let instruction = instructions[index];
                if !instruction.decoded || opaque.contains(&index) {
                    return (0..pair.len()).collect();
                }
                let mut written = UnitSet::EMPTY;
                instruction.all_defs().for_each(|reg| units.units(reg).iter().for_each(|u| written.insert(*u)));
                if instruction.flow == Flow::Call {
                    written.union_with(&any_body_writes);
                }
                (0..pair.len()).filter(|part| written.contains(pair[*part])).collect()
            };
            let reach = reaching.entry(pair.clone()).or_insert_with(|| {
                let mut wanted: Vec<usize> = (0..instructions.len()).filter(|n| !writes_pair(*n).is_empty()).collect();
                wanted.extend(&unknown_calls);
                reaching_defs(function, &first_of_block, pair.len(), &writes_pair, &wanted)
            });
            let built = Built { isa, instructions: &instructions, computations: &computations, pair: pair_set, reach };
            let entries: Option<Vec<usize>> = built.targets(call, 0).and_then(|targets| {
                // Subroutines that return through the pair this call writes.
                let return_address = instructions[call].defs.first().map(|reg| units.units(*reg));
                targets
                    .iter()
                    .map(|t| {
                        let entry = *index_of.get(t)?;
                        let (_, _, through) = bodies.get(&entry)?;
                        (Some(&through[..]) == return_address).then_some(entry)
                    })
                    .collect()
            });
            match entries.filter(|e| !e.is_empty()) {
                Some(mut entries) => {
                    entries.sort_unstable();
                    entries.dedup();
                    found.callees.insert(call, entries);
                }
                None => newly_opaque.push(call),
            }
        }
        if newly_opaque.is_empty() {
            break;
        }
        opaque.extend(newly_opaque);
    }
    for (call, entries) in &found.callees {
        for entry in entries {
            let (blocks, writes, _) = &bodies[entry];
            found.writes.insert(*entry, *writes);
            for block in blocks {
                if function.blocks[*block].exit == BlockExit::Indirect {
                    found.returns.entry(*block).or_default().push(*call);
                }
            }
        }
    }
    found.call_addresses = found.callees.keys().map(|call| instructions[*call].address).collect();
    for calls in found.returns.values_mut() {
        calls.sort_unstable();
        calls.dedup();
    }
    found
}

/// How a pair's value before an instruction was built.
struct Built<'a> {
    isa: &'a Isa,
    instructions: &'a [&'a crate::stages::lift::Instruction],
    computations: &'a [(usize, UnitSet, u64)],
    pair: UnitSet,
    reach: &'a HashMap<usize, ReachingDefs>,
}

impl Built<'_> {
    /// The addresses the pair may hold before instruction `at`, when every
    /// write that reaches it is a symbolic computation's `s_getpc_b64` or
    /// one of the few adds after it (instrumented code may stand between
    /// them); None when something else may have written it.
    fn targets(&self, at: usize, depth: usize) -> Option<BTreeSet<u64>> {
        let mut targets = BTreeSet::new();
        for def in self.reach.get(&at)?.iter().flatten() {
            let def = (*def)?;
            if let Some((_, _, target)) = self.computations.iter().find(|(g, set, _)| *g == def && *set == self.pair) {
                targets.insert(*target);
                continue;
            }
            let instruction = self.instructions[def];
            let name = instruction.name(self.isa);
            let adds_to_itself = ["S_ADD_U32", "S_ADDC_U32", "S_SUB_U32", "S_SUBB_U32"].contains(&name)
                && !instruction.defs.is_empty()
                && instruction.defs.first() == instruction.uses.first();
            if !adds_to_itself || depth >= COMPUTATION_LENGTH {
                return None;
            }
            targets.extend(self.targets(def, depth + 1)?);
        }
        Some(targets)
    }
}

fn set_of(units: &[Unit]) -> UnitSet {
    let mut set = UnitSet::EMPTY;
    units.iter().for_each(|u| set.insert(*u));
    set
}

/// Per instruction, per unit of `pair`: the instructions whose writes of
/// it may reach there (None: the value the function started with).
type ReachingDefs = Vec<BTreeSet<Option<usize>>>;

/// Reaching definitions of a register's `parts` before the `wanted`
/// instructions (`writes`: which parts an instruction writes): forward over
/// the blocks to a fixpoint (the sets of writes are small).
fn reaching_defs(
    function: &Function,
    firsts: &[usize],
    parts: usize,
    writes: &dyn Fn(usize) -> Vec<usize>,
    wanted: &[usize],
) -> HashMap<usize, ReachingDefs> {
    let blocks = &function.blocks;
    let count: usize = blocks.iter().map(|b| b.instructions.len()).sum();
    let written: Vec<Vec<usize>> = (0..count).map(writes).collect();
    let input: ReachingDefs = vec![BTreeSet::from([None]); parts];
    let mut block_in: Vec<ReachingDefs> = vec![vec![BTreeSet::new(); parts]; blocks.len()];
    // The entry, and blocks no edge reaches (entered through registers),
    // start with what the function was given.
    let mut reached = vec![false; blocks.len()];
    reached[0] = true;
    blocks.iter().flat_map(|b| &b.successors).for_each(|s| reached[*s] = true);
    for (slot, reached) in block_in.iter_mut().zip(&reached) {
        if !reached {
            *slot = input.clone();
        }
    }
    block_in[0] = input.clone();
    let run = |state: &mut ReachingDefs, index: usize| {
        for part in &written[index] {
            state[*part] = BTreeSet::from([Some(index)]);
        }
    };
    let mut changed = true;
    while changed {
        changed = false;
        for block in blocks {
            let mut state = block_in[block.index].clone();
            for index in firsts[block.index]..firsts[block.index] + block.instructions.len() {
                run(&mut state, index);
            }
            for successor in &block.successors {
                for (into, from) in block_in[*successor].iter_mut().zip(&state) {
                    let before = into.len();
                    into.extend(from.iter().copied());
                    changed |= into.len() != before;
                }
            }
        }
    }
    let mut before = HashMap::new();
    for block in blocks {
        let mut state = block_in[block.index].clone();
        for index in firsts[block.index]..firsts[block.index] + block.instructions.len() {
            if wanted.contains(&index) {
                before.insert(index, state.clone());
            }
            run(&mut state, index);
        }
    }
    before
}

/// The blocks a subroutine starting at block `entry` runs and the SGPR
/// pair it returns through, when it only returns: every jump through
/// registers it ends with goes through the same pair (the return address
/// its calls write: s[30:31] by the calling convention, s[22:23] in some
/// of Tensile's kernels), with no call and no way out.
fn body(units: &RegisterUnits, function: &Function, entry: usize) -> Option<(BTreeSet<usize>, Vec<Unit>)> {
    if entry == 0 {
        return None;
    }
    let mut return_address: Option<Vec<Unit>> = None;
    let mut seen = BTreeSet::new();
    let mut stack = vec![entry];
    while let Some(block) = stack.pop() {
        if !seen.insert(block) {
            continue;
        }
        let block = &function.blocks[block];
        if block.instructions.iter().any(|i| i.flow == Flow::Call || !i.decoded) {
            return None;
        }
        match block.exit {
            BlockExit::Indirect => {
                let last = block.instructions.last()?;
                let through = last.uses.first().map(|r| units.units(*r).to_vec()).filter(|u| u.len() == 2)?;
                if return_address.get_or_insert_with(|| through.clone()) != &through {
                    return None;
                }
            }
            BlockExit::OutsideFunction | BlockExit::FallsOffTheEnd | BlockExit::Return => return None,
            _ => {}
        }
        stack.extend(&block.successors);
    }
    // Reached only through the calls: no edge comes in from outside.
    let entered_from_outside = function
        .blocks
        .iter()
        .filter(|b| !seen.contains(&b.index))
        .any(|b| b.successors.iter().any(|s| seen.contains(s)));
    Some((seen, return_address?)).filter(|_| !entered_from_outside)
}
