//! Kernels that preload arguments into SGPRs (gfx90a, gfx940 on): firmware
//! that preloads enters them 256 bytes past their start with the dwords in
//! the SGPRs after the user SGPRs; the 256 bytes before run only where
//! firmware does not preload (AMDGPUUsage, "Preloaded Kernel Arguments").
//!
//! Compilers fill those bytes with loads of the dwords into those SGPRs, a
//! wait and a jump to the entry (LLVM 20 on; a trap or end in 18 and 19),
//! then `s_nop` padding: code the instrumenter keeps as it is. Tensile
//! (hipBLASLt) writes its own argument loading there, which decodes and
//! loads arguments the preloading path gets otherwise and jumps past the
//! entry: the instrumenter replaces it by loads as a compiler writes them
//! ([`replace_library_prologues`]), so the entry's instrumentation runs
//! where firmware does not preload too, and the kernel then does what it
//! does where firmware preloads.

use super::instruction::{Flow, Instruction};
use super::{call_sites, cfg, Block, FunctionKind, Isa, LiftedCodeObject};
use crate::stages::load::descriptor::KernelDescriptor;
use crate::stages::load::kernel_inputs::{layout, Input};
use crate::stages::load::processor::Processor;

/// The bytes a kernel that preloads arguments starts with before the
/// instruction the hardware enters it at.
pub const PRELOAD_PROLOGUE_BYTES: u64 = 256;

/// What a kernel's first 256 bytes are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PreloadPrologue {
    /// The kernel preloads no arguments: the hardware enters it at its start.
    #[default]
    None,
    /// Scalar loads, a wait and a jump to the entry (or a trap or end), then
    /// `s_nop`: what compilers write.
    Loads,
    /// A library's own code (Tensile's argument loading); instrumenting
    /// replaces it by [`Loads`](PreloadPrologue::Loads).
    Library,
}

/// The index of the instruction 256 bytes into a kernel that preloads
/// arguments, and what comes before it. Anything but loads is the
/// library's own code only when nothing past the entry comes back into it
/// and the loads that replace it can be written.
pub(super) fn classify(
    isa: &Isa,
    blocks: &[Block],
    start: u64,
    descriptor: &KernelDescriptor,
    processor: Option<&Processor>,
) -> Result<(usize, PreloadPrologue), String> {
    let at = start + PRELOAD_PROLOGUE_BYTES;
    let instructions: Vec<&Instruction> = blocks.iter().flat_map(|b| &b.instructions).collect();
    let entry = instructions.iter().position(|i| i.address == at).ok_or("no instruction starts there")?;
    let (prologue, rest) = instructions.split_at(entry);
    if let Some(undecoded) = prologue.iter().find(|i| !i.decoded) {
        return Err(format!("its first 256 bytes hold bytes LLVM does not decode (at {:#x})", undecoded.address));
    }
    let loads_only = prologue.iter().all(|instruction| {
        let name = instruction.name(isa);
        ["S_LOAD_", "S_WAITCNT", "S_NOP", "S_TRAP", "S_ENDPGM"].iter().any(|p| name.starts_with(p))
            || matches!(instruction.flow, Flow::Branch { target } if target == at)
    });
    if loads_only {
        return Ok((entry, PreloadPrologue::Loads));
    }
    // Code written to be skipped: it loads arguments, and its last
    // instructions are `s_nop` padding up to the entry after a jump or an
    // end, not code that runs on into it.
    let padding = prologue.iter().rev().take_while(|i| i.name(isa) == "S_NOP").count();
    let before_padding = prologue.len().checked_sub(padding + 1).map(|last| prologue[last]);
    let written_to_skip = padding > 0
        && before_padding.is_some_and(|i| matches!(i.flow, Flow::Branch { .. } | Flow::Jump { .. } | Flow::EndProgram))
        && prologue.iter().any(|i| i.name(isa).starts_with("S_LOAD_"));
    if !written_to_skip {
        let first = prologue.iter().find(|i| !i.name(isa).starts_with("S_LOAD_")).unwrap_or(&prologue[0]);
        return Err(format!(
            "its first 256 bytes are neither a preload prologue as compilers write it nor code that loads arguments \
             and jumps away before `s_nop` padding (`{}` at {:#x})",
            first.name(isa),
            first.address
        ));
    }
    let into_prologue = |target: u64| (start..at).contains(&target);
    if let Some(back) = rest.iter().find(|i| match i.flow {
        Flow::Branch { target } | Flow::ConditionalBranch { target } | Flow::Jump { target } => into_prologue(target),
        _ => i.pc_relative.as_ref().is_some_and(|pc| into_prologue(pc.target)),
    }) {
        return Err(format!(
            "its first 256 bytes are code of its own that the code past them comes back to (`{}` at {:#x})",
            back.name(isa),
            back.address
        ));
    }
    let processor = processor.ok_or("gpuinstr does not model this processor's kernel inputs")?;
    loads(descriptor, processor).map_err(|why| format!("its first 256 bytes are code of its own, and {why}"))?;
    Ok((entry, PreloadPrologue::Library))
}

/// One scalar load of the prologue: `s_load_dword{,x2,..,x16}` of `dwords`
/// dwords at byte `offset` of the kernel argument segment into the SGPRs
/// from `first`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrologueLoad {
    pub first: u16,
    pub dwords: u16,
    pub offset: u32,
}

/// The loads that put the preloaded dwords where firmware that preloads
/// puts them, as LLVM writes them: the widest load each SGPR's alignment
/// allows (pairs even, wider tuples on a multiple of 4).
pub fn loads(descriptor: &KernelDescriptor, processor: &Processor) -> Result<(u16, Vec<PrologueLoad>), String> {
    let inputs = layout(descriptor, processor);
    let pointer = inputs
        .iter()
        .find(|(input, ..)| *input == Input::KernargSegmentPtr)
        .map(|(_, first, _)| *first)
        .ok_or("the kernel does not receive its argument pointer to load them from")?;
    let (_, first, count) = *inputs
        .iter()
        .find(|(input, ..)| *input == Input::PreloadedArguments)
        .ok_or("the kernel preloads no arguments")?;
    if first + count > 16 {
        return Err(format!("it preloads {count} dwords after {first} user SGPRs, past the 16 the hardware loads"));
    }
    let mut offset = u32::from(descriptor.kernarg_preload_offset()) * 4;
    let (mut sgpr, end) = (first, first + count);
    let mut out = Vec::new();
    while sgpr < end {
        let dwords = [16u16, 8, 4, 2, 1]
            .into_iter()
            .find(|&n| n <= end - sgpr && (n == 1 || sgpr % n.min(4) == 0))
            .expect("one dword always fits");
        out.push(PrologueLoad { first: sgpr, dwords, offset });
        sgpr += dwords;
        offset += u32::from(dwords) * 4;
    }
    Ok((pointer, out))
}

/// GFX9's encodings of the prologue's instructions (SMEM with an immediate
/// offset; SOPP `s_waitcnt lgkmcnt(0)`, `s_branch` and `s_nop 0`).
fn encode(pointer: u16, loads: &[PrologueLoad]) -> Vec<[u8; 4]> {
    let mut words = Vec::new();
    for load in loads {
        let op = load.dwords.trailing_zeros();
        words.push(0xc000_0000 | (op << 18) | (1 << 17) | (u32::from(load.first) << 6) | u32::from(pointer >> 1));
        words.push(load.offset);
    }
    words.push(0xbf8c_c07f);
    let branch_at = words.len() as u32 * 4;
    let simm16 = (PRELOAD_PROLOGUE_BYTES as u32 - (branch_at + 4)) / 4;
    words.push(0xbf82_0000 | simm16);
    while (words.len() as u64) * 4 < PRELOAD_PROLOGUE_BYTES {
        words.push(0xbf80_0000);
    }
    words.into_iter().map(u32::to_le_bytes).collect()
}

/// The prologue of loads for a kernel starting at `start`, decoded by LLVM
/// (which checks the encoding: each must decode to what it was written as).
fn loads_prologue(
    isa: &Isa,
    start: u64,
    descriptor: &KernelDescriptor,
    processor: &Processor,
) -> Result<Vec<Instruction>, String> {
    let (pointer, loads) = loads(descriptor, processor)?;
    let words = encode(pointer, &loads);
    let mut out: Vec<Instruction> = Vec::new();
    let mut at = 0;
    while at < words.len() {
        let address = start + at as u64 * 4;
        let bytes: Vec<u8> = words[at..(at + 2).min(words.len())].concat();
        let raw = isa.mc.decode(&bytes, address).map_err(|_| format!("LLVM does not decode {bytes:02x?}"))?;
        let size = raw.size as usize;
        if size == 0 || !size.is_multiple_of(4) {
            return Err(format!("LLVM decodes {bytes:02x?} as {size} bytes"));
        }
        out.push(Instruction::new(isa, address, &bytes[..size], raw));
        at += size / 4;
    }
    let names: Vec<&str> = out.iter().map(|i| i.name(isa)).collect();
    let expected = loads.len() + 2;
    let wrote_loads = names[..loads.len()].iter().all(|n| n.starts_with("S_LOAD_DWORD"))
        && names[loads.len()].starts_with("S_WAITCNT")
        && matches!(out[loads.len() + 1].flow, Flow::Branch { target } if target == start + PRELOAD_PROLOGUE_BYTES)
        && names[expected..].iter().all(|n| n.starts_with("S_NOP"));
    if !wrote_loads {
        return Err(format!("LLVM decodes the prologue written as {}", names[..expected.min(names.len())].join(", ")));
    }
    Ok(out)
}

/// Replaces each library prologue of `lifted` by loads (module comment).
/// Returns, per function replaced, its index and how many instructions
/// (not `s_nop`) its prologue had. A kernel whose loads cannot be written
/// keeps its prologue and is refused by name (the lifter checked the same).
pub fn replace_library_prologues(lifted: &mut LiftedCodeObject<'_>) -> Vec<(usize, usize)> {
    let mut replaced = Vec::new();
    for number in 0..lifted.functions.len() {
        let function = &lifted.functions[number];
        let FunctionKind::Kernel(index) = function.kind else { continue };
        if function.preload_prologue != PreloadPrologue::Library {
            continue;
        }
        let descriptor = lifted.code_object.kernels[index].descriptor.clone();
        let isa = &lifted.isa;
        let own = function.instructions().take(function.entry).filter(|i| i.name(isa) != "S_NOP").count();
        match write_loads(lifted, number, &descriptor) {
            Ok(()) => replaced.push((number, own)),
            Err(why) => {
                let function = &mut lifted.functions[number];
                function.problems.push(super::Problem {
                    address: function.address,
                    kind: super::ProblemKind::NoPreloadEntry,
                    detail: format!("its argument-preload prologue cannot be replaced by loads: {why}"),
                })
            }
        }
    }
    replaced
}

/// Writes the prologue of kernel `function` as loads of what `descriptor`
/// preloads where it puts them (256 bytes, as before): for a library's own
/// prologue, and where instrumenting enables user SGPRs that move the
/// preloaded ones up (the kernel's preamble moves them back).
pub fn write_loads(
    lifted: &mut LiftedCodeObject<'_>,
    function: usize,
    descriptor: &KernelDescriptor,
) -> Result<(), String> {
    let processor = lifted.code_object.target.model().ok_or("gpuinstr does not model the processor")?;
    let kernel = &mut lifted.functions[function];
    let prologue = loads_prologue(&lifted.isa, kernel.address, descriptor, processor)?;
    let entry = prologue.len();
    let mut instructions = prologue;
    instructions.extend(kernel.blocks.drain(..).flat_map(|b| b.instructions).skip(kernel.entry));
    kernel.calls = call_sites(&instructions);
    kernel.blocks = cfg::build(instructions, kernel.address, kernel.end(), &mut kernel.problems);
    kernel.entry = entry;
    kernel.preload_prologue = PreloadPrologue::Loads;
    Ok(())
}
