//! Text forms of a lifted code object: MIR (close to LLVM's, for LLVM
//! engineers), assembly (what the emitter writes for llvm-mc), and a CFG
//! summary.

use std::collections::HashMap;
use std::fmt::Write;

use super::cfg::BlockExit;
use super::instruction::{Flow, Half, Instruction};
use super::{Function, FunctionKind, LiftedCodeObject};
use crate::native::Operand;
use crate::stages::load::SymbolKind;

/// Operand values the printer cannot produce by itself, found again in its
/// output and replaced by names.
const SENTINEL_BRANCH: i64 = 12_345;
const SENTINEL_LITERAL: i64 = 0x5eed_c0de;

/// Names the assembly refers to: labels of block starts and data.
pub struct AsmNames {
    /// Label of each block start of each function, by address.
    pub code_labels: HashMap<u64, String>,
}

impl AsmNames {
    /// Block labels `.LBB<function>_<block>`, numbered like LLVM's.
    pub fn new(lifted: &LiftedCodeObject<'_>) -> Self {
        let mut code_labels = HashMap::new();
        for function in &lifted.functions {
            for block in function.blocks.iter().skip(1) {
                code_labels.insert(block.address, format!(".LBB{}_{}", function.number, block.index));
            }
            code_labels.insert(function.address, function.name.clone());
        }
        AsmNames { code_labels }
    }
}

impl LiftedCodeObject<'_> {
    /// An address as `symbol+offset` (the innermost named object or function
    /// containing it), or `section+offset`.
    pub fn describe_address(&self, address: u64) -> String {
        let (name, offset) = self.address_parts(address);
        offset_expression(&name, offset)
    }

    /// The innermost named object or function defined around `address`:
    /// what emitted code and messages name it by. Only a definition names
    /// an address (a damaged table can give an undefined symbol a value).
    pub fn symbol_containing(&self, address: u64) -> Option<&crate::stages::load::Symbol> {
        self.code_object
            .symbols
            .iter()
            .filter(|s| matches!(s.kind, SymbolKind::Object | SymbolKind::Function) && !s.name.is_empty())
            .filter(|s| s.section.is_some())
            .filter(|s| address >= s.value && (address < s.value + s.size.max(1)))
            .min_by_key(|s| s.size)
    }

    /// The symbol whose GOT slot is at `address`: code that reaches a
    /// preemptible global loads its address from the GOT, and the linked
    /// code's literal counts to the slot (`sym@gotpcrel32@lo`), which the
    /// linker makes again from the relocation naming the symbol.
    pub fn got_slot_symbol(&self, address: u64) -> Option<&str> {
        let code_object = self.code_object;
        let in_got = code_object.sections.iter().any(|s| s.name == ".got" && s.contains(address));
        if !in_got {
            return None;
        }
        // R_AMDGPU_ABS64 (3) of the symbol into the slot.
        code_object
            .relocations
            .iter()
            .find(|r| r.offset == address && r.kind == 3 && r.addend == 0)
            .and_then(|r| r.symbol.as_deref())
    }

    /// An address as the innermost named object or function containing it
    /// and the offset into it, or a section and the offset, or the number
    /// itself with offset 0.
    pub fn address_parts(&self, address: u64) -> (String, u64) {
        if let Some(symbol) = self.symbol_containing(address) {
            return (symbol.name.clone(), address - symbol.value);
        }
        match self.code_object.sections.iter().find(|s| s.loadable && s.contains(address)) {
            Some(section) => (section.name.clone(), address - section.address),
            None => (format!("{address:#x}"), 0),
        }
    }

    /// The assembly text of an instruction, with branch targets and
    /// pc-relative literals written symbolically; None when it has to be
    /// emitted as bytes (undecodable).
    pub fn asm_instruction(
        &self,
        instruction: &Instruction,
        names: &AsmNames,
        data_name: &dyn Fn(u64) -> (String, u64),
    ) -> Option<String> {
        if !instruction.decoded {
            return None;
        }
        let mut raw = instruction.raw.clone();
        let mut replacement = None;
        match instruction.flow {
            Flow::Branch { target } | Flow::ConditionalBranch { target } => {
                if let (Some(label), Some(Operand::Immediate(_))) =
                    (names.code_labels.get(&target), raw.operands.first())
                {
                    raw.operands[0] = Operand::Immediate(SENTINEL_BRANCH);
                    replacement = Some((SENTINEL_BRANCH.to_string(), label.clone()));
                }
            }
            _ => {}
        }
        if let Some(pc) = &instruction.pc_relative {
            raw.operands[pc.operand] = Operand::Immediate(SENTINEL_LITERAL);
            let half = if pc.half == Half::Low { "lo" } else { "hi" };
            // `symbol@rel32@lo+addend`: an offset into the symbol belongs in
            // the addend (llvm-mc rejects `symbol+4@rel32@lo`).
            let (target, offset, kind) = match (names.code_labels.get(&pc.target), self.got_slot_symbol(pc.target)) {
                (Some(label), _) => (label.clone(), 0, "rel32"),
                (None, Some(symbol)) => (symbol.to_string(), 0, "gotpcrel32"),
                (None, None) => {
                    let (name, offset) = data_name(pc.target);
                    (name, offset, "rel32")
                }
            };
            let addend = pc.addend + offset as i64;
            replacement = Some((format!("{SENTINEL_LITERAL:#x}"), format!("{target}@{kind}@{half}+{addend}")));
        }
        let text = self.isa.mc.print(&raw, instruction.address)?;
        match replacement {
            Some((sentinel, name)) if text.contains(&sentinel) => Some(text.replacen(&sentinel, &name, 1)),
            Some(_) => None,
            None => Some(text),
        }
    }
}

impl LiftedCodeObject<'_> {
    /// Whether llvm-mc assembles each text to exactly its bytes (each
    /// distinct text assembled once, all in one batch).
    pub fn texts_assemble_to(&self, pairs: &[(&str, &[u8])]) -> Vec<bool> {
        let mut distinct: Vec<&str> = pairs.iter().map(|(text, _)| *text).collect();
        distinct.sort_unstable();
        distinct.dedup();
        let assembled: std::collections::HashMap<&str, Option<Vec<u8>>> =
            distinct.iter().copied().zip(self.isa.mc.assemble(&distinct)).collect();
        pairs.iter().map(|(text, bytes)| assembled[text].as_deref() == Some(*bytes)).collect()
    }
}

fn offset_expression(name: &str, offset: u64) -> String {
    if offset == 0 {
        name.to_string()
    } else {
        format!("{name}+{offset:#x}")
    }
}

fn mir_operand(lifted: &LiftedCodeObject<'_>, function: &Function, instruction: &Instruction, index: usize) -> String {
    if let Some(pc) = instruction.pc_relative.as_ref().filter(|pc| pc.operand == index) {
        let half = if pc.half == Half::Low { "lo" } else { "hi" };
        let (name, offset) = lifted.address_parts(pc.target);
        return format!("target-flags(amdgpu-rel32-{half}) @{name} + {}", pc.addend + offset as i64);
    }
    if index == 0 {
        if let Flow::Branch { target } | Flow::ConditionalBranch { target } = instruction.flow {
            return match function.blocks.iter().find(|b| b.address == target) {
                Some(block) => format!("%bb.{}", block.index),
                None => lifted.describe_address(target),
            };
        }
    }
    match instruction.raw.operands[index] {
        Operand::Register(0) => "$noreg".to_string(),
        Operand::Register(reg) => lifted.isa.mir_register(reg),
        Operand::Immediate(value) => value.to_string(),
        Operand::Float32(bits) => format!("{bits:#010x}"),
        Operand::Float64(bits) => format!("{bits:#018x}"),
        Operand::Expression => "<expression>".to_string(),
    }
}

fn mir_instruction(lifted: &LiftedCodeObject<'_>, function: &Function, instruction: &Instruction) -> String {
    if !instruction.decoded {
        return format!("; {:#x}: undecodable {:02x?}", instruction.address, instruction.bytes);
    }
    let isa = &lifted.isa;
    let num_defs = isa.info(instruction.raw.opcode).map_or(0, |i| i.num_defs as usize);
    let operands: Vec<String> =
        (0..instruction.raw.operands.len()).map(|i| mir_operand(lifted, function, instruction, i)).collect();
    let (defs, uses) = operands.split_at(num_defs.min(operands.len()));
    let mut text = String::new();
    if !defs.is_empty() {
        text.push_str(&defs.join(", "));
        text.push_str(" = ");
    }
    text.push_str(isa.opcode_name(instruction.opcode));
    let mut rest: Vec<String> = uses.to_vec();
    rest.extend(instruction.implicit_defs.iter().map(|r| format!("implicit-def {}", isa.mir_register(*r))));
    rest.extend(instruction.implicit_uses.iter().map(|r| format!("implicit {}", isa.mir_register(*r))));
    if !rest.is_empty() {
        text.push(' ');
        text.push_str(&rest.join(", "));
    }
    text
}

fn kind_text(lifted: &LiftedCodeObject<'_>, function: &Function) -> String {
    let kind = match function.kind {
        FunctionKind::Kernel(_) => "kernel",
        FunctionKind::DeviceFunction => "device function",
    };
    let _ = lifted;
    let relocatable = if function.relocatable() { "relocatable" } else { "NOT relocatable" };
    format!("{kind}, {:#x}..{:#x}, {relocatable}", function.address, function.end())
}

/// LLVM-style MIR of the selected functions (all when `only` is None).
pub fn mir(lifted: &LiftedCodeObject<'_>, only: Option<&str>) -> String {
    let mut out = String::new();
    writeln!(
        out,
        "# Lifted by gpuinstr-link: target {}, code object v{}.\n# Opcodes are LLVM {} pseudos; comments give addresses.",
        lifted.code_object.target,
        lifted.code_object.code_object_version,
        crate::toolchain::LLVM_MAJOR
    )
    .unwrap();
    for function in lifted.functions.iter().filter(|f| only.is_none_or(|name| f.name == name)) {
        writeln!(out, "---\nname:            {}\n# {}", function.name, kind_text(lifted, function)).unwrap();
        for problem in &function.problems {
            writeln!(out, "# problem at {:#x}: {}", problem.address, problem.detail).unwrap();
        }
        writeln!(out, "tracksRegLiveness: false\nbody:             |").unwrap();
        for block in &function.blocks {
            writeln!(out, "  bb.{}:   ; {:#x}", block.index, block.address).unwrap();
            if !block.successors.is_empty() {
                let successors: Vec<String> = block.successors.iter().map(|s| format!("%bb.{s}")).collect();
                writeln!(out, "    successors: {}", successors.join(", ")).unwrap();
            }
            writeln!(out).unwrap();
            for instruction in &block.instructions {
                writeln!(out, "    {}", mir_instruction(lifted, function, instruction)).unwrap();
            }
            if !block.resolved() {
                writeln!(out, "    ; successors unknown ({:?})", block.exit).unwrap();
            }
            writeln!(out).unwrap();
        }
        writeln!(out, "...").unwrap();
    }
    out
}

/// The assembly of the selected functions, as the emitter writes it:
/// instructions whose text would assemble to other bytes as `.byte` lines.
pub fn asm(lifted: &LiftedCodeObject<'_>, only: Option<&str>) -> String {
    let names = AsmNames::new(lifted);
    let data_name = |address: u64| lifted.address_parts(address);
    let selected: Vec<&Function> = lifted.functions.iter().filter(|f| only.is_none_or(|name| f.name == name)).collect();
    let texts: Vec<Option<String>> =
        selected.iter().flat_map(|f| f.instructions()).map(|i| lifted.asm_instruction(i, &names, &data_name)).collect();
    // Symbolic operands are written as the emitter writes them; every other
    // text must assemble to the instruction's bytes.
    let plain: Vec<(&str, &[u8])> = selected
        .iter()
        .flat_map(|f| f.instructions())
        .zip(&texts)
        .filter(|(i, _)| !is_symbolic(i))
        .filter_map(|(i, t)| Some((t.as_deref()?, &i.bytes[..])))
        .collect();
    let mut exact = lifted.texts_assemble_to(&plain).into_iter();
    let mut texts = texts.into_iter();
    let mut out = String::new();
    for function in selected {
        writeln!(out, "; {}\n{}:", kind_text(lifted, function), function.name).unwrap();
        for block in &function.blocks {
            if block.index > 0 {
                writeln!(out, "{}:", names.code_labels[&block.address]).unwrap();
            }
            for instruction in &block.instructions {
                let text = texts.next().flatten();
                let exact = match &text {
                    Some(_) if !is_symbolic(instruction) => exact.next().unwrap_or(false),
                    Some(_) => true,
                    None => false,
                };
                match text {
                    Some(text) if exact => writeln!(out, "\t{text}").unwrap(),
                    Some(text) => writeln!(
                        out,
                        "\t.byte {}\t; {text} (the text assembles to other bytes)",
                        byte_list(&instruction.bytes)
                    )
                    .unwrap(),
                    None => writeln!(out, "\t.byte {}", byte_list(&instruction.bytes)).unwrap(),
                }
            }
        }
        writeln!(out).unwrap();
    }
    out
}

/// Whether an instruction's text has symbolic operands (branch targets,
/// pc-relative literals) whose encoding depends on the layout.
pub fn is_symbolic(instruction: &Instruction) -> bool {
    instruction.pc_relative.is_some()
        || matches!(instruction.flow, Flow::Branch { .. } | Flow::ConditionalBranch { .. })
}

pub fn byte_list(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:#04x}")).collect::<Vec<_>>().join(", ")
}

/// Blocks, their extents and successors.
pub fn cfg(lifted: &LiftedCodeObject<'_>, only: Option<&str>) -> String {
    let mut out = String::new();
    for function in lifted.functions.iter().filter(|f| only.is_none_or(|name| f.name == name)) {
        let count: usize = function.blocks.iter().map(|b| b.instructions.len()).sum();
        writeln!(
            out,
            "function {} ({}): {} blocks, {count} instructions",
            function.name,
            kind_text(lifted, function),
            function.blocks.len()
        )
        .unwrap();
        for block in &function.blocks {
            let successors: Vec<String> = block.successors.iter().map(|s| format!("bb.{s}")).collect();
            let exit = match block.exit {
                BlockExit::FallThrough => "falls through",
                BlockExit::Branch => "branch",
                BlockExit::Jump => "jump",
                BlockExit::ConditionalBranch => "conditional branch",
                BlockExit::EndProgram => "end of program",
                BlockExit::Return => "return",
                BlockExit::Indirect => "indirect branch (successors unknown)",
                BlockExit::OutsideFunction => "branch outside the function (successors unknown)",
                BlockExit::FallsOffTheEnd => "falls off the end",
            };
            writeln!(
                out,
                "  bb.{} {:#x}..{:#x} {} instructions, {exit}{}{}",
                block.index,
                block.address,
                block.end(),
                block.instructions.len(),
                if successors.is_empty() { "" } else { " -> " },
                successors.join(", ")
            )
            .unwrap();
        }
        for call in &function.calls {
            let callee = match call.target {
                Some(target) => {
                    lifted.function_at(target).map_or_else(|| lifted.describe_address(target), |f| f.name.clone())
                }
                None => "unknown callee".to_string(),
            };
            writeln!(out, "  call at {:#x} -> {callee}", call.address).unwrap();
        }
        for problem in &function.problems {
            writeln!(out, "  problem at {:#x} ({:?}): {}", problem.address, problem.kind, problem.detail).unwrap();
        }
    }
    out
}
