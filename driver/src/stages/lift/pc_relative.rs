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
//! `s_sub_u32` and `s_subb_u32` instead).

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
/// target and the `s_setpc_b64`'s index. The `s_add_i32` follows the
/// `s_getpc_b64`; instrumented code may stand between the rest, if it
/// writes none of the registers the computation still holds.
fn long_branch(
    isa: &Isa,
    instructions: &[Instruction],
    getpc: usize,
    (lo, hi): (u32, u32),
) -> Option<(usize, usize, u64, usize)> {
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
    // s_add_u32 lo, lo, sT; s_addc_u32 hi, hi, 0 or -1; s_setpc_b64 lo:hi;
    // or backward: s_abs_i32 sT, sT; s_sub_u32 lo, lo, sT; s_subb_u32 hi,
    // hi, 0; s_setpc_b64 lo:hi.
    let pair = *instructions[getpc].defs.first()?;
    let mut absolute = false;
    let mut subtract = None;
    let mut high = None;
    for (index, candidate) in instructions.iter().enumerate().skip(getpc + 2) {
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
                let mut low = (literal(add, operand) as i32).wrapping_add(constant as i32);
                if absolute {
                    low = low.wrapping_abs();
                }
                let amount = (u64::from(high as u32) << 32) | u64::from(low as u32);
                let result = instructions[getpc].address + 4;
                let target = if subtracts { result.wrapping_sub(amount) } else { result.wrapping_add(amount) };
                return Some((getpc + 1, operand, target, index));
            }
        }
        // (Once added or subtracted, the offset's register is free: code
        // instrumented between may use it, as a payload short of SGPRs does.)
        let writes = |r: u32| r == pair || r == lo || r == hi || (subtract.is_none() && r == offset_reg);
        if candidate.all_defs().any(writes) || !matches!(candidate.flow, super::instruction::Flow::Next) {
            return None;
        }
    }
    None
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
                let (add, operand, target, setpc) = jump;
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
                instructions[setpc].flow = super::instruction::Flow::Jump { target };
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
