//! Basic blocks and their successors.

use std::collections::{BTreeSet, HashMap};

use super::instruction::{Flow, Instruction};
use super::{Problem, ProblemKind};

/// How control leaves a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockExit {
    /// Into the next block.
    FallThrough,
    Branch,
    ConditionalBranch,
    /// `s_setpc_b64` to a target a pc-relative computation gives (Tensile's
    /// long branches): one successor, like a branch.
    Jump,
    EndProgram,
    /// `s_setpc_b64 s[30:31]` in a device function: a return (s[30:31]
    /// holds the return address in the AMDGPU calling convention).
    Return,
    /// `s_setpc_b64` otherwise: a jump through registers; successors unknown.
    Indirect,
    /// A branch to an address outside the function (successors unknown).
    OutsideFunction,
    /// The function's bytes end without a terminator.
    FallsOffTheEnd,
}

#[derive(Clone, Debug)]
pub struct Block {
    pub index: usize,
    pub address: u64,
    pub instructions: Vec<Instruction>,
    /// Indices of successor blocks (branch target first, then fall-through).
    pub successors: Vec<usize>,
    pub exit: BlockExit,
}

impl Block {
    pub fn end(&self) -> u64 {
        self.instructions.last().map_or(self.address, Instruction::end)
    }

    /// Whether the successors are all known.
    pub fn resolved(&self) -> bool {
        !matches!(self.exit, BlockExit::Indirect | BlockExit::OutsideFunction)
    }
}

/// Splits a function's instructions into blocks.
pub fn build(instructions: Vec<Instruction>, start: u64, end: u64, problems: &mut Vec<Problem>) -> Vec<Block> {
    let boundaries: BTreeSet<u64> = instructions.iter().map(|i| i.address).collect();
    let mut leaders = BTreeSet::from([start]);
    for instruction in &instructions {
        match instruction.flow {
            Flow::Branch { target } | Flow::ConditionalBranch { target } | Flow::Jump { target } => {
                if (start..end).contains(&target) {
                    if boundaries.contains(&target) {
                        leaders.insert(target);
                    } else {
                        problems.push(Problem {
                            address: instruction.address,
                            kind: ProblemKind::BranchIntoInstruction,
                            detail: format!("branch to {target:#x}, which is inside an instruction"),
                        });
                    }
                }
                leaders.insert(instruction.end());
            }
            Flow::EndProgram | Flow::IndirectBranch => {
                leaders.insert(instruction.end());
            }
            Flow::Next | Flow::Call => {}
        }
    }

    let mut blocks: Vec<Block> = Vec::new();
    for instruction in instructions {
        if blocks.is_empty() || leaders.contains(&instruction.address) {
            let index = blocks.len();
            blocks.push(Block {
                index,
                address: instruction.address,
                instructions: Vec::new(),
                successors: Vec::new(),
                exit: BlockExit::FallThrough,
            });
        }
        blocks.last_mut().expect("a block was pushed").instructions.push(instruction);
    }

    let index_of: HashMap<u64, usize> = blocks.iter().map(|b| (b.address, b.index)).collect();
    let count = blocks.len();
    for block in &mut blocks {
        let last = block.instructions.last().expect("blocks are not empty");
        let next = (block.index + 1 < count).then_some(block.index + 1);
        let to = |target: u64, exit_if_outside: &mut BlockExit| match index_of.get(&target) {
            Some(index) => Some(*index),
            None => {
                *exit_if_outside = BlockExit::OutsideFunction;
                None
            }
        };
        let mut exit = BlockExit::FallThrough;
        let mut successors = Vec::new();
        match last.flow {
            Flow::Branch { target } => {
                exit = BlockExit::Branch;
                successors.extend(to(target, &mut exit));
            }
            Flow::Jump { target } => {
                exit = BlockExit::Jump;
                successors.extend(to(target, &mut exit));
            }
            Flow::ConditionalBranch { target } => {
                exit = BlockExit::ConditionalBranch;
                successors.extend(to(target, &mut exit));
                successors.extend(next);
            }
            Flow::EndProgram => exit = BlockExit::EndProgram,
            Flow::IndirectBranch => exit = BlockExit::Indirect,
            Flow::Next | Flow::Call => match next {
                Some(next) => successors.push(next),
                None => exit = BlockExit::FallsOffTheEnd,
            },
        }
        if exit == BlockExit::OutsideFunction {
            problems.push(Problem {
                address: last.address,
                kind: ProblemKind::BranchOutsideFunction,
                detail: "branch to an address outside the function".into(),
            });
        }
        block.exit = exit;
        block.successors = successors;
    }
    blocks
}

/// Which blocks lie on a cycle of the control-flow graph (a loop's body
/// runs more than once per wave). Tarjan's strongly connected components,
/// iterative, linear in blocks and edges. Blocks whose successors are
/// unknown count as on no cycle of their own making.
pub fn blocks_on_cycles(blocks: &[Block]) -> Vec<bool> {
    const UNVISITED: usize = usize::MAX;
    let n = blocks.len();
    let (mut index, mut low) = (vec![UNVISITED; n], vec![0usize; n]);
    let (mut on_stack, mut on_cycle) = (vec![false; n], vec![false; n]);
    let mut stack: Vec<usize> = Vec::new();
    let mut next_index = 0;
    for root in 0..n {
        if index[root] != UNVISITED {
            continue;
        }
        // (block, next successor to visit)
        let mut walk: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next_index;
        low[root] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (block, ref mut next)) = walk.last_mut() {
            if let Some(&successor) = blocks[block].successors.get(*next) {
                *next += 1;
                if successor >= n {
                    continue;
                }
                if successor == block {
                    on_cycle[block] = true;
                }
                if index[successor] == UNVISITED {
                    index[successor] = next_index;
                    low[successor] = next_index;
                    next_index += 1;
                    stack.push(successor);
                    on_stack[successor] = true;
                    walk.push((successor, 0));
                } else if on_stack[successor] {
                    low[block] = low[block].min(index[successor]);
                }
                continue;
            }
            walk.pop();
            if let Some(&(parent, _)) = walk.last() {
                low[parent] = low[parent].min(low[block]);
            }
            if low[block] == index[block] {
                let mut component = Vec::new();
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    component.push(member);
                    if member == block {
                        break;
                    }
                }
                if component.len() > 1 {
                    for member in component {
                        on_cycle[member] = true;
                    }
                }
            }
        }
    }
    on_cycle
}

#[cfg(test)]
mod cycle_tests {
    use super::*;

    fn graph(successors: &[&[usize]]) -> Vec<Block> {
        successors
            .iter()
            .enumerate()
            .map(|(index, s)| Block {
                index,
                address: 4 * index as u64,
                instructions: Vec::new(),
                successors: s.to_vec(),
                exit: BlockExit::FallThrough,
            })
            .collect()
    }

    #[test]
    fn loops_and_self_loops_are_cycles_straight_code_and_exits_are_not() {
        // 0 -> 1 -> 2 -> 1 (a loop), 2 -> 3 -> 3 (a self loop), 3 -> 4.
        let blocks = graph(&[&[1], &[2], &[1, 3], &[3, 4], &[]]);
        assert_eq!(blocks_on_cycles(&blocks), vec![false, true, true, true, false]);
        // An if-else that joins: no cycle.
        let blocks = graph(&[&[1, 2], &[3], &[3], &[]]);
        assert_eq!(blocks_on_cycles(&blocks), vec![false; 4]);
        // Nested loops, entered from the middle.
        let blocks = graph(&[&[2], &[2], &[3], &[1, 4], &[2, 5], &[]]);
        assert_eq!(blocks_on_cycles(&blocks), vec![false, true, true, true, true, false]);
    }
}
