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
            Flow::Branch { target } | Flow::ConditionalBranch { target } => {
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
