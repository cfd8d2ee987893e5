//! Loads still landing: a VMEM, FLAT or LDS load writes its VGPRs when the
//! data returns, and if nothing reads them the application never waits for
//! it. Liveness calls such VGPRs dead right after the load, but code spliced
//! there (a payload, a sliding SVA) must not use them until an `s_waitcnt`
//! has waited for the load's counter to reach zero.

use crate::stages::lift::{Function, Instruction, Isa};

use super::pending::{counters_of, waitcnt, Counters};
use super::{FunctionLiveness, RegisterFile, UnitSet};

/// Whether an instruction is an `s_waitcnt` that waits until every counter
/// a load runs under (pending.rs's classification) reaches zero.
fn waits_for(instruction: &Instruction, isa: &Isa, counters: Counters) -> bool {
    waitcnt(instruction, isa)
        .is_some_and(|counts| (!counters.vmcnt || counts.vmcnt == 0) && (!counters.lgkmcnt || counts.lgkmcnt == 0))
}

/// Per instruction of `function`: the vector units a load nothing reads may
/// still be writing before it. Busy from the load to an `s_waitcnt` in the
/// same block that waits for its counter to reach zero; without one, before
/// every instruction of the function.
pub fn loads_in_flight(function: &Function, isa: &Isa, liveness: &FunctionLiveness) -> Vec<UnitSet> {
    let mut busy = vec![UnitSet::EMPTY; liveness.live_in.len()];
    let mut always = UnitSet::EMPTY;
    let mut start = 0;
    for block in &function.blocks {
        for (offset, instruction) in block.instructions.iter().enumerate() {
            let index = start + offset;
            let counters = counters_of(instruction, isa);
            if !counters.vmcnt && !counters.lgkmcnt {
                continue;
            }
            let dead = liveness.defs[index].difference(&liveness.live_out[index]);
            let dead = dead.in_file(RegisterFile::Vgpr).union(&dead.in_file(RegisterFile::Agpr));
            if dead.is_empty() {
                continue;
            }
            let waited = (offset + 1..block.instructions.len())
                .find(|k| waits_for(&block.instructions[*k], isa, counters))
                .map(|k| start + k);
            match waited {
                Some(end) => (index + 1..=end).for_each(|i| busy[i].union_with(&dead)),
                None => always.union_with(&dead),
            }
        }
        start += block.instructions.len();
    }
    if !always.is_empty() {
        for set in &mut busy {
            set.union_with(&always);
        }
    }
    busy
}
