//! Branch relaxation: the code inserted between a branch and its target
//! can push the target past the ±32,767 dwords an `s_branch`/`s_cbranch_*`
//! reaches. Such a branch becomes, as LLVM's own branch relaxation does it,
//!
//! ```text
//!     s_cbranch_<inverse>  .Lskip          ; (conditional branches only)
//!     s_getpc_b64          s[n:n+1]
//! .Lpc:
//!     s_add_u32            sn, sn, (target - .Lpc) & 0xffffffff
//!     s_addc_u32           sn+1, sn+1, (target - .Lpc) >> 32
//!     s_setpc_b64          s[n:n+1]
//! .Lskip:
//! ```
//!
//! The pair and SCC change only on the way to the target, so they must be
//! dead there (liveness at the target says so).

use rustc_hash::FxHashMap as HashMap;

use crate::stages::lift::instruction::inverse_branch;
use crate::stages::lift::{Flow, LiftedCodeObject};
use crate::stages::liveness::{Liveness, Unit};

/// How one branch is emitted instead of its original form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelaxedBranch {
    /// The function's index in the lifted code object.
    pub function: usize,
    /// The even SGPR of the pair the long jump computes its target in.
    pub pair: u16,
    /// The short branch with the opposite condition (conditional branches).
    pub inverse: Option<&'static str>,
}

/// The most a branch reaches, in dwords, less room for the relaxation code
/// itself and for estimates of inserted code.
const REACH: i64 = 32_767 - 1_024;

/// The branches that no longer reach their targets, given the bytes
/// inserted before each address, and how each is relaxed; or why one
/// cannot be.
pub fn relax(
    lifted: &LiftedCodeObject<'_>,
    liveness: &Liveness,
    inserted: &HashMap<u64, usize>,
    sgpr_limit: u16,
) -> Result<HashMap<u64, RelaxedBranch>, String> {
    let mut relaxed = HashMap::default();
    for (index, function) in lifted.functions.iter().enumerate() {
        if !function.relocatable() {
            continue;
        }
        // New offset of each original instruction: inserted code before it
        // (its own region included) and relaxations so far (20 bytes each).
        let mut shift = 0i64;
        let mut new_position = HashMap::default();
        let mut region_start = HashMap::default();
        for instruction in function.instructions() {
            let before = inserted.get(&instruction.address).copied().unwrap_or(0) as i64;
            region_start.insert(instruction.address, instruction.address as i64 + shift);
            shift += before;
            new_position.insert(instruction.address, instruction.address as i64 + shift);
            if matches!(instruction.flow, Flow::Branch { .. } | Flow::ConditionalBranch { .. }) {
                shift += 20; // room for a relaxation, whether it happens or not
            }
        }
        let positions: Vec<u64> = function.instructions().map(|i| i.address).collect();
        for instruction in function.instructions() {
            let target = match instruction.flow {
                Flow::Branch { target } | Flow::ConditionalBranch { target } => target,
                _ => continue,
            };
            let (Some(from), Some(to)) = (new_position.get(&instruction.address), region_start.get(&target)) else {
                continue;
            };
            let distance = (to - (from + 4)) / 4;
            if distance.abs() <= REACH {
                continue;
            }
            let name = instruction.name(&lifted.isa);
            let opposite = match instruction.flow {
                Flow::ConditionalBranch { .. } => Some(inverse_branch(name).ok_or_else(|| {
                    format!(
                        "{}: `{name}` at {:#x} is out of range and has no inverse",
                        function.name, instruction.address
                    )
                })?),
                _ => None,
            };
            let at_target = positions.iter().position(|a| *a == target).expect("targets are instructions");
            let live = &liveness.functions[index].live_in[at_target];
            if live.contains(Unit::special("SCC")) {
                return Err(format!(
                    "{}: the branch at {:#x} is out of range after instrumentation, and SCC is live at its target",
                    function.name, instruction.address
                ));
            }
            // From s4: s[0:3] is a device function's scratch resource, which
            // liveness does not see as read where only the callee uses it.
            let pair = (4..sgpr_limit.saturating_sub(1))
                .step_by(2)
                .find(|s| !live.contains(Unit::sgpr(*s)) && !live.contains(Unit::sgpr(s + 1)))
                .ok_or_else(|| {
                    format!(
                        "{}: the branch at {:#x} is out of range after instrumentation, and no SGPR pair is free at \
                         its target",
                        function.name, instruction.address
                    )
                })?;
            relaxed.insert(instruction.address, RelaxedBranch { function: index, pair, inverse: opposite });
        }
    }
    Ok(relaxed)
}
