//! Pc-relative address computations made symbolic. Clang materialises the
//! address of a global or a function as
//!
//! ```text
//! s_getpc_b64 s[4:5]                  ; s[4:5] = address of the next instruction
//! s_add_u32   s4, s4, sym@rel32@lo+4   ; 32-bit literal
//! s_addc_u32  s5, s5, sym@rel32@hi+12  ; 32-bit literal
//! ```
//!
//! Linked code objects keep only the resolved literals; this pass recovers
//! the target address so the emitter can write the relocations again and
//! the code can move. Tensile's long branches are the other idiom:
//!
//! ```text
//! s_getpc_b64 s[82:83]
//! s_add_i32   s84, label, 4        ; the literal is label - (its own address)
//! s_add_u32   s82, s82, s84
//! s_addc_u32  s83, s83, 0          ; -1 for a backward branch
//! s_setpc_b64 s[82:83]             ; to label
//! ```
//!
//! (newer Tensile branches backward with `s_abs_i32 s84, s84`,
//! `s_sub_u32` and `s_subb_u32` instead; hand-written kernels test the
//! offset's sign with `s_cmp_ge_i32` and have both ways).

use super::instruction::{Half, Instruction, PcRelative};
use super::isa::Isa;
use crate::native::Operand;

/// Where a symbolisation gave up, for the function's problem list.
pub struct Unsymbolized {
    pub address: u64,
    pub detail: String,
}

/// The two halves of a 64-bit SGPR pair (by LLVM register name).
fn halves(isa: &Isa, pair: u32) -> Option<(u32, u32)> {
    let name = isa.register_name(pair);
    let (lo, hi) = name.split_once('_')?;
    if !lo.starts_with("SGPR") || !hi.starts_with("SGPR") {
        return None;
    }
    Some((isa.register_by_name(lo)?, isa.register_by_name(hi)?))
}

/// The operand index of `reg op literal` / `literal op reg`, if the
/// instruction is `dst = reg + literal` with `dst == reg`.
fn adds_literal(instruction: &Instruction, reg: u32) -> Option<usize> {
    if instruction.defs != [reg] || instruction.raw.operands.len() < 3 {
        return None;
    }
    match (instruction.raw.operands[1], instruction.raw.operands[2]) {
        (Operand::Register(r), Operand::Immediate(_)) if r == reg => Some(2),
        (Operand::Immediate(_), Operand::Register(r)) if r == reg => Some(1),
        _ => None,
    }
}

/// Tensile's long branch after the `s_getpc_b64` at `getpc` (its pair's
/// halves `lo`, `hi`): the `s_add_i32`'s index, its literal's operand, the
/// target and the `s_setpc_b64`s' indices (none where the pair keeps the
/// address for a later call). The `s_add_i32` follows the
/// `s_getpc_b64`; then the offset is added or subtracted ([`jump_path`]),
/// or, in hand-written kernels (`DGEMM_Aldebaran_*`), both after
/// `s_cmp_ge_i32 sT, 0` and `s_cbranch_scc1`: subtracted after its
/// absolute value where it is negative, added at the branch's target
/// where it is not, the same target either way. Instrumented code may
/// stand between the instructions, if it writes none of the registers the
/// computation still holds.
fn long_branch(
    isa: &Isa,
    instructions: &[Instruction],
    getpc: usize,
    (lo, hi): (u32, u32),
) -> Option<(usize, usize, u64, Vec<usize>)> {
    let named = |i: &Instruction, name: &str| i.decoded && isa.opcode_name(i.opcode) == name;
    // s_add_i32 sT, literal, constant
    let add = instructions.get(getpc + 1)?;
    if !named(add, "S_ADD_I32") || add.size() != 8 {
        return None;
    }
    let offset_reg = *add.defs.first()?;
    let (operand, constant) = match (add.raw.operands.get(1)?, add.raw.operands.get(2)?) {
        (Operand::Immediate(_), Operand::Immediate(c)) => (1, *c),
        _ => return None,
    };
    let registers = JumpRegisters { pair: *instructions[getpc].defs.first()?, lo, hi, offset: offset_reg };
    let offset = (literal(add, operand) as i32).wrapping_add(constant as i32);
    let result = instructions[getpc].address + 4;
    if let Some(dispatch) = sign_dispatch(isa, instructions, getpc + 2, registers) {
        let negative = jump_path(isa, instructions, dispatch.after, registers)?;
        let at = instructions.iter().position(|i| i.address == dispatch.positive)?;
        let positive = jump_path(isa, instructions, at, registers)?;
        // (subtracts, absolute value, high half): |offset| subtracted where
        // it is negative, the offset added where it is not.
        if (negative.0, negative.1, negative.2) != (true, true, 0)
            || (positive.0, positive.1, positive.2) != (false, false, 0)
        {
            return None;
        }
        let target = result.wrapping_add(i64::from(offset) as u64);
        return Some((getpc + 1, operand, target, vec![negative.3?, positive.3?]));
    }
    let (subtracts, absolute, high, setpc) = jump_path(isa, instructions, getpc + 2, registers)?;
    let low = if absolute { offset.wrapping_abs() } else { offset };
    let amount = (u64::from(high as u32) << 32) | u64::from(low as u32);
    let target = if subtracts { result.wrapping_sub(amount) } else { result.wrapping_add(amount) };
    Some((getpc + 1, operand, target, setpc.into_iter().collect()))
}

/// The registers a long branch computes in: the `s_getpc_b64`'s pair, its
/// halves, and the offset's.
#[derive(Clone, Copy)]
struct JumpRegisters {
    pair: u32,
    lo: u32,
    hi: u32,
    offset: u32,
}

/// Where a long branch dispatches on the offset's sign: the instruction
/// after the `s_cbranch_scc1` (the negative path) and its target (the
/// positive one).
struct SignDispatch {
    after: usize,
    positive: u64,
}

/// `s_cmp_ge_i32 sT, 0` then `s_cbranch_scc1`, from `from` on.
fn sign_dispatch(isa: &Isa, instructions: &[Instruction], from: usize, r: JumpRegisters) -> Option<SignDispatch> {
    let named = |i: &Instruction, name: &str| i.decoded && isa.opcode_name(i.opcode) == name;
    let mut compared = false;
    for (index, candidate) in instructions.iter().enumerate().skip(from) {
        let operands = &candidate.raw.operands;
        if !compared && named(candidate, "S_CMP_GE_I32") {
            let zero = matches!((operands.first(), operands.get(1)), (Some(Operand::Register(t)), Some(Operand::Immediate(0))) if *t == r.offset);
            if !zero {
                return None;
            }
            compared = true;
            continue;
        }
        if compared && named(candidate, "S_CBRANCH_SCC1") {
            let super::instruction::Flow::ConditionalBranch { target } = candidate.flow else { return None };
            return Some(SignDispatch { after: index + 1, positive: target });
        }
        let touches = |u: u32| u == r.pair || u == r.lo || u == r.hi || u == r.offset;
        if candidate.all_defs().any(touches) || !matches!(candidate.flow, super::instruction::Flow::Next) {
            return None;
        }
        if !compared && candidate.all_uses().any(|u| u == r.offset) {
            return None; // the offset is used for something else first
        }
    }
    None
}

/// One path of a long branch from `from`: `[s_abs_i32 sT, sT]`, then
/// `s_add_u32 lo, lo, sT` / `s_addc_u32 hi, hi, 0 or -1`, or `s_sub_u32
/// lo, lo, sT` / `s_subb_u32 hi, hi, 0`, then `s_setpc_b64 lo:hi`:
/// (subtracts, takes the absolute value, the high half, the setpc's index).
/// Without the `s_setpc_b64` in the straight line after it, the pair holds
/// an address of code for later (hipBLASLt keeps its activation
/// function's in `s[12:13]` and calls it with `s_swappc_b64`): no index.
fn jump_path(
    isa: &Isa,
    instructions: &[Instruction],
    from: usize,
    r: JumpRegisters,
) -> Option<(bool, bool, i64, Option<usize>)> {
    let named = |i: &Instruction, name: &str| i.decoded && isa.opcode_name(i.opcode) == name;
    let JumpRegisters { pair, lo, hi, offset: offset_reg } = r;
    let mut absolute = false;
    let mut subtract = None;
    let mut high = None;
    for (index, candidate) in instructions.iter().enumerate().skip(from) {
        let operands = &candidate.raw.operands;
        let sources = (operands.get(1), operands.get(2));
        if subtract.is_none() && !absolute && named(candidate, "S_ABS_I32") && candidate.defs == [offset_reg] {
            if !matches!(sources.0, Some(Operand::Register(r)) if *r == offset_reg) {
                return None;
            }
            absolute = true;
            continue;
        }
        if subtract.is_none() && candidate.defs == [lo] {
            let adds = named(candidate, "S_ADD_U32")
                && matches!(sources, (Some(Operand::Register(a)), Some(Operand::Register(b)))
                    if (*a, *b) == (lo, offset_reg) || (*a, *b) == (offset_reg, lo));
            let subtracts = named(candidate, "S_SUB_U32")
                && matches!(sources, (Some(Operand::Register(a)), Some(Operand::Register(b))) if (*a, *b) == (lo, offset_reg));
            if adds || subtracts {
                subtract = Some(subtracts);
                continue;
            }
        }
        if let (Some(subtracts), None) = (subtract, high) {
            let carry = if subtracts { "S_SUBB_U32" } else { "S_ADDC_U32" };
            if named(candidate, carry) && candidate.defs == [hi] {
                match sources {
                    (Some(Operand::Register(r)), Some(Operand::Immediate(c))) if *r == hi => high = Some(*c),
                    (Some(Operand::Immediate(c)), Some(Operand::Register(r))) if *r == hi && !subtracts => {
                        high = Some(*c)
                    }
                    _ => return None,
                }
                continue;
            }
        }
        if let (Some(subtracts), Some(high)) = (subtract, high) {
            if named(candidate, "S_SETPC_B64") && candidate.uses.first() == Some(&pair) {
                return Some((subtracts, absolute, high, Some(index)));
            }
        }
        // (Once added or subtracted, the offset's register is free: code
        // instrumented between may use it, as a payload short of SGPRs does.)
        let writes = |r: u32| r == pair || r == lo || r == hi || (subtract.is_none() && r == offset_reg);
        if candidate.all_defs().any(writes) || !matches!(candidate.flow, super::instruction::Flow::Next) {
            return match (subtract, high) {
                (Some(subtracts), Some(high)) => Some((subtracts, absolute, high, None)),
                _ => None,
            };
        }
    }
    match (subtract, high) {
        (Some(subtracts), Some(high)) => Some((subtracts, absolute, high, None)),
        _ => None,
    }
}

fn literal(instruction: &Instruction, operand: usize) -> u32 {
    match instruction.raw.operands[operand] {
        Operand::Immediate(value) => value as u32,
        _ => 0,
    }
}

/// Finds the idiom in a block's instructions and annotates them. Returns
/// the places it could not make symbolic.
pub fn symbolize(isa: &Isa, instructions: &mut [Instruction]) -> Vec<Unsymbolized> {
    let mut failures = Vec::new();
    for getpc in 0..instructions.len() {
        if !instructions[getpc].decoded || isa.opcode_name(instructions[getpc].opcode) != "S_GETPC_B64" {
            continue;
        }
        let address = instructions[getpc].address;
        let Some((lo_reg, hi_reg)) = instructions[getpc].defs.first().and_then(|pair| halves(isa, *pair)) else {
            continue;
        };
        let pair = instructions[getpc].defs[0];
        let mut low: Option<(usize, usize)> = None;
        let mut high: Option<(usize, usize)> = None;
        for (index, candidate) in instructions.iter().enumerate().skip(getpc + 1) {
            let name = isa.opcode_name(candidate.opcode);
            if low.is_none() && name == "S_ADD_U32" {
                if let Some(operand) = adds_literal(candidate, lo_reg) {
                    low = Some((index, operand));
                    continue;
                }
            }
            if low.is_some() && name == "S_ADDC_U32" {
                if let Some(operand) = adds_literal(candidate, hi_reg) {
                    high = Some((index, operand));
                    break;
                }
            }
            // Anything else touching the pair ends the search.
            if candidate.all_defs().chain(candidate.all_uses()).any(|r| r == pair || r == lo_reg || r == hi_reg) {
                break;
            }
        }
        if low.is_none() {
            if let Some(jump) = long_branch(isa, instructions, getpc, (lo_reg, hi_reg)) {
                let (add, operand, target, setpcs) = jump;
                let literal_field = instructions[add].address + 4;
                let value = i64::from(literal(&instructions[add], operand) as i32);
                instructions[add].pc_relative = Some(PcRelative {
                    half: Half::Low,
                    operand,
                    target,
                    // The literal is target + addend - (its own address).
                    addend: value - (target as i64 - literal_field as i64),
                    getpc: address,
                });
                for setpc in setpcs {
                    instructions[setpc].flow = super::instruction::Flow::Jump { target };
                }
                continue;
            }
        }
        let (Some((lo_index, lo_operand)), Some((hi_index, hi_operand))) = (low, high) else {
            failures.push(Unsymbolized {
                address,
                detail: "s_getpc_b64 whose result is not only offset by an s_add_u32/s_addc_u32 pair".into(),
            });
            continue;
        };
        // Only 32-bit literals can carry a relocation; an inline constant
        // would change the instruction's size.
        if instructions[lo_index].size() != 8 || instructions[hi_index].size() != 8 {
            failures.push(Unsymbolized {
                address,
                detail: "pc-relative offset encoded with an inline constant, not a 32-bit literal".into(),
            });
            continue;
        }
        let result = address + 4;
        let offset = (u64::from(literal(&instructions[hi_index], hi_operand)) << 32)
            | u64::from(literal(&instructions[lo_index], lo_operand));
        let target = result.wrapping_add(offset);
        for (index, operand, half) in [(lo_index, lo_operand, Half::Low), (hi_index, hi_operand, Half::High)] {
            let literal_field = instructions[index].address + 4;
            instructions[index].pc_relative = Some(PcRelative {
                half,
                operand,
                target,
                addend: literal_field as i64 - result as i64,
                getpc: address,
            });
        }
    }
    failures
}
