//! The memory-efficiency tool's model, computed from the emulator's access
//! log and written here without the tool's code: per wave execution of a
//! memory instruction, the distinct 64-byte lines its lanes' bytes touch
//! and the fewest lines those bytes fit in (global, flat, buffer), or the
//! cycles GFX9's LDS takes (32 banks of 4 bytes, 128 bytes a cycle: groups
//! of 32, 16 or 8 lanes by access size, each taking as many cycles as the
//! most distinct dwords one bank serves it) and the groups there are (LDS).

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The line size the plan passes.
pub const LINE_BYTES: u64 = 64;
pub const LDS_SPACE: u8 = 3;
const LDS_BANKS: u64 = 32;

/// One lane's access as the log gives it.
#[derive(Clone, Copy, Debug)]
pub struct LaneAccess {
    /// The instruction's address in the code object.
    pub instruction: u64,
    pub wave: u64,
    /// The wave's instructions before this one: one execution's key.
    pub step: u64,
    pub lane: u64,
    pub memory: u64,
    pub space: u8,
    pub bytes: u64,
}

/// An instruction's numbers summed over its wave executions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Efficiency {
    pub executions: u64,
    pub lanes: u64,
    /// Lines touched, or LDS cycles.
    pub used: u64,
    /// The fewest lines, or LDS cycles without conflicts.
    pub ideal: u64,
}

impl std::ops::AddAssign for Efficiency {
    fn add_assign(&mut self, other: Self) {
        self.executions += other.executions;
        self.lanes += other.lanes;
        self.used += other.used;
        self.ideal += other.ideal;
    }
}

/// One wave execution's (used, ideal).
fn measure(space: u8, lanes: &[LaneAccess]) -> (u64, u64) {
    if space != LDS_SPACE {
        let lines: BTreeSet<u64> =
            lanes.iter().flat_map(|a| a.memory / LINE_BYTES..=(a.memory + a.bytes - 1) / LINE_BYTES).collect();
        let bytes: u64 = lanes.iter().map(|a| a.bytes).sum();
        return (lines.len() as u64, bytes.div_ceil(LINE_BYTES));
    }
    let mut groups: BTreeMap<u64, HashMap<u64, BTreeSet<u64>>> = BTreeMap::new();
    for a in lanes {
        let dwords = if a.bytes <= 4 { 1 } else { a.bytes.div_ceil(4) };
        let group_lanes = match dwords {
            1 => 32,
            2 => 16,
            _ => 8,
        };
        let banks = groups.entry(a.lane / group_lanes).or_default();
        for dword in a.memory / 4..a.memory / 4 + dwords {
            banks.entry(dword % LDS_BANKS).or_default().insert(dword);
        }
    }
    let cycles = groups.values().map(|banks| banks.values().map(BTreeSet::len).max().unwrap_or(0) as u64).sum();
    (cycles, groups.len() as u64)
}

/// Per instruction address, its numbers over the log's accesses.
pub fn model(accesses: &[LaneAccess]) -> BTreeMap<u64, Efficiency> {
    let mut executions: BTreeMap<(u64, u64, u64), Vec<LaneAccess>> = BTreeMap::new();
    for a in accesses {
        executions.entry((a.instruction, a.wave, a.step)).or_default().push(*a);
    }
    let mut per_instruction: BTreeMap<u64, Efficiency> = BTreeMap::new();
    for ((instruction, _, _), lanes) in executions {
        let (used, ideal) = measure(lanes[0].space, &lanes);
        *per_instruction.entry(instruction).or_default() +=
            Efficiency { executions: 1, lanes: lanes.len() as u64, used, ideal };
    }
    per_instruction
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lanes(space: u8, bytes: u64, addresses: impl Iterator<Item = u64>) -> Vec<LaneAccess> {
        addresses
            .enumerate()
            .map(|(lane, memory)| LaneAccess {
                instruction: 0,
                wave: 0,
                step: 0,
                lane: lane as u64,
                memory,
                space,
                bytes,
            })
            .collect()
    }

    #[test]
    fn the_model_counts_lines_and_bank_cycles() {
        // 64 consecutive dwords: 4 lines, the fewest; a stride of 64 bytes: 64.
        assert_eq!(measure(1, &lanes(1, 4, (0..64).map(|l| 0x1000 + 4 * l))), (4, 4));
        assert_eq!(measure(1, &lanes(1, 4, (0..64).map(|l| 0x1000 + 64 * l))), (64, 4));
        // A 16-byte access across a line boundary touches two.
        assert_eq!(measure(2, &lanes(2, 16, [56].into_iter())), (2, 1));
        // LDS: consecutive dwords take one cycle per 32 lanes; a stride of
        // two dwords two (two distinct dwords per bank); one dword for all
        // lanes one per group (broadcast).
        assert_eq!(measure(LDS_SPACE, &lanes(LDS_SPACE, 4, (0..64).map(|l| 4 * l))), (2, 2));
        assert_eq!(measure(LDS_SPACE, &lanes(LDS_SPACE, 4, (0..64).map(|l| 8 * l))), (4, 2));
        assert_eq!(measure(LDS_SPACE, &lanes(LDS_SPACE, 4, (0..64).map(|_| 12))), (2, 2));
        // b128 in groups of 8 lanes: consecutive 16-byte accesses fill the
        // 32 banks once per group.
        assert_eq!(measure(LDS_SPACE, &lanes(LDS_SPACE, 16, (0..64).map(|l| 16 * l))), (8, 8));
    }
}
