//! The kernel preamble: code at an instrumented kernel's entry that fills
//! the State Value Array (docs/sva.md) before anything else runs.
//!
//! The hardware loads the kernel's inputs into SGPRs in a fixed order (user
//! SGPRs, then system SGPRs) for the inputs its descriptor enables. Inputs
//! payloads need and the kernel does not receive are enabled; that shifts the
//! later inputs up, so the preamble saves what payloads need into SVA lanes
//! and then moves every input the application expects back to where it
//! expects it (in ascending order: every source is above its destination).

use std::collections::BTreeSet;

use gpuinstr_intrinsics::sva::{FrameValue, FRAME_VALUES};
use gpuinstr_intrinsics::{KernelArgument, Storage};

use crate::stages::load::descriptor::{KernelDescriptor, KERNEL_CODE_PROPERTIES, RSRC2};
use crate::stages::load::kernel_inputs::{enabled, is_user, layout, Input, INPUTS};
use crate::stages::load::processor::Processor;
use crate::stages::load::Kernel;

/// The input holding a kernel argument, if one does.
fn input_of(argument: KernelArgument) -> Option<Input> {
    Some(match argument {
        KernelArgument::PrivateSegmentBuffer => Input::PrivateSegmentBuffer,
        KernelArgument::DispatchPtr => Input::DispatchPtr,
        KernelArgument::QueuePtr => Input::QueuePtr,
        KernelArgument::KernargSegmentPtr => Input::KernargSegmentPtr,
        KernelArgument::DispatchId => Input::DispatchId,
        KernelArgument::FlatScratch => Input::FlatScratchInit,
        KernelArgument::WorkItemPrivateSegmentSize => Input::PrivateSegmentSize,
        KernelArgument::WorkgroupIdX => Input::WorkgroupIdX,
        KernelArgument::WorkgroupIdY => Input::WorkgroupIdY,
        KernelArgument::WorkgroupIdZ => Input::WorkgroupIdZ,
        KernelArgument::PrivateSegmentWaveByteOffset => Input::PrivateSegmentWaveOffset,
        _ => return None,
    })
}

/// What the payloads of one kernel need from its preamble.
#[derive(Clone, Debug, Default)]
pub struct Needs {
    pub arguments: BTreeSet<KernelArgument>,
    /// Bytes of instrumentation stack (the largest payload frame).
    pub stack_bytes: u32,
    /// The VGPRs holding the SVA and the packed work-item ids.
    pub sva: u16,
    pub work_item_ids: Option<u16>,
    /// SGPRs not live at the entry, ascending; the preamble takes two above
    /// the kernel's inputs.
    pub free_sgprs: Vec<u16>,
    /// AGPRs that keep the SVA and the work-item ids (`sva` and
    /// `work_item_ids` are then VGPRs the preamble builds them in).
    pub agprs: Option<(u16, Option<u16>)>,
    /// Kept in the wave's slot in memory (`sva` and `work_item_ids` are
    /// then VGPRs the preamble builds them in): a third VGPR dead at the
    /// entry for the address.
    pub wave_slot: Option<u16>,
}

/// The preamble's code and the descriptor it needs.
#[derive(Clone, Debug)]
pub struct Preamble {
    pub code: Vec<String>,
    pub descriptor: KernelDescriptor,
}

/// Builds the preamble for `kernel` on `processor`.
pub fn build(kernel: &Kernel, needs: &Needs, processor: &Processor) -> Result<Preamble, String> {
    let architected = processor.architected_flat_scratch;
    let original = &kernel.descriptor;
    let mut descriptor = original.clone();
    let mut inputs: BTreeSet<Input> = BTreeSet::new();
    for argument in &needs.arguments {
        match argument.storage() {
            Storage::Lanes { .. } => match argument {
                KernelArgument::HiddenKernargOffset | KernelArgument::UserKernargOffset => {}
                _ => {
                    let input = input_of(*argument).ok_or_else(|| {
                        format!("hooks read the kernel argument {argument}, which the preamble cannot fill yet")
                    })?;
                    inputs.insert(input);
                }
            },
            Storage::Hidden { .. } => {
                inputs.insert(Input::KernargSegmentPtr);
            }
            Storage::WorkItemId { .. } => {}
        }
    }
    if needs.stack_bytes > 0 {
        if !architected {
            inputs.insert(Input::PrivateSegmentBuffer);
        }
        // With architected flat scratch: the scratch itself (FLAT_SCRATCH).
        inputs.insert(Input::PrivateSegmentWaveOffset);
    }
    // Enable what is missing.
    for input in &inputs {
        let (_, name, user, _) = INPUTS.iter().find(|(i, ..)| i == input).expect("every input is listed");
        if !enabled(&descriptor, name, *user) {
            if *user {
                let field = *KERNEL_CODE_PROPERTIES.iter().find(|f| f.name == *name).expect("property");
                descriptor.kernel_code_properties = field.set(u32::from(descriptor.kernel_code_properties), 1) as u16;
            } else {
                let field = *RSRC2.iter().find(|f| f.name == *name).expect("rsrc2 field");
                descriptor.compute_pgm_rsrc2 = field.set(descriptor.compute_pgm_rsrc2, 1);
            }
        }
    }
    let before = layout(original, processor);
    let user_sgprs_of = |descriptor: &KernelDescriptor| -> u16 {
        layout(descriptor, processor).iter().filter(|(i, ..)| is_user(*i)).map(|(_, _, n)| n).sum()
    };
    let mut user_sgprs = user_sgprs_of(&descriptor);
    // Preloaded arguments make room for the inputs hooks need: the last
    // dwords are no longer preloaded, and the preamble loads them (step 5;
    // one stays preloaded, so the hardware still enters 256 bytes in).
    let preloaded = original.kernarg_preload_length();
    let mut no_longer_preloaded = 0;
    if user_sgprs > 16 && preloaded > 1 && user_sgprs - 16 < preloaded {
        no_longer_preloaded = user_sgprs - 16;
        let spec = u16::from_le_bytes([descriptor.reserved2[0], descriptor.reserved2[1]]);
        let spec = (spec & !0x7f) | (preloaded - no_longer_preloaded);
        descriptor.reserved2[..2].copy_from_slice(&spec.to_le_bytes());
        user_sgprs = user_sgprs_of(&descriptor);
    }
    if user_sgprs > 16 {
        return Err(format!("hooks need {user_sgprs} user SGPR inputs; a kernel can receive 16"));
    }
    let after = layout(&descriptor, processor);
    // Preloaded arguments that the inputs enabled move up are preloaded
    // where they now are, the kernel's prologue of loads is written again
    // to load them there (`patch::write_moved_prologues`), and the moves
    // below take them back.
    let field = *RSRC2.iter().find(|f| f.name == "USER_SGPR_COUNT").expect("USER_SGPR_COUNT");
    descriptor.compute_pgm_rsrc2 = field.set(descriptor.compute_pgm_rsrc2, u32::from(user_sgprs));
    let at = |input: Input| after.iter().find(|(i, ..)| *i == input).map(|(_, first, _)| *first);

    // Work-item ids: the dimensions payloads read must be delivered.
    let wanted_dimensions = needs
        .arguments
        .iter()
        .filter_map(|a| match a {
            KernelArgument::WorkItemIdX => Some(0),
            KernelArgument::WorkItemIdY => Some(1),
            KernelArgument::WorkItemIdZ => Some(2),
            _ => None,
        })
        .max();
    let delivered = original.rsrc2("ENABLE_VGPR_WORKITEM_ID");
    if let Some(wanted) = wanted_dimensions.filter(|w| *w > delivered) {
        let field = *RSRC2.iter().find(|f| f.name == "ENABLE_VGPR_WORKITEM_ID").expect("field");
        descriptor.compute_pgm_rsrc2 = field.set(descriptor.compute_pgm_rsrc2, wanted);
    }

    let end = after.iter().map(|(_, first, n)| first + n).max().unwrap_or(0);
    let mut temporaries = needs.free_sgprs.iter().copied().filter(|s| *s >= end);
    let (Some(t0), Some(t1)) = (temporaries.next(), temporaries.next()) else {
        return Err("no two SGPRs are free at the kernel's entry for the preamble".into());
    };
    let sva = needs.sva;
    let mut code = vec![];
    // 1. Packed work-item ids (x | y << 10 | z << 20), first: the SVA's or
    // the ids' own VGPR may be one the hardware now fills with an id.
    if let Some(ids) = needs.work_item_ids {
        let dimensions = descriptor.rsrc2("ENABLE_VGPR_WORKITEM_ID");
        if processor.packed_work_item_ids {
            if ids != 0 {
                code.push(format!("v_mov_b32_e32 v{ids}, v0"));
                // v0 is packed: give the application only the dimensions it asked for.
                if delivered < dimensions {
                    let mask = if delivered == 0 { 0x3ff } else { 0xfffff };
                    code.push(format!("v_and_b32_e32 v0, {mask:#x}, v0"));
                }
            }
        } else {
            code.extend(pack_work_item_ids(ids, dimensions));
        }
    }
    // 2. What payloads need, from the inputs' new places.
    for argument in &needs.arguments {
        let Storage::Lanes { first, count } = argument.storage() else { continue };
        match argument {
            KernelArgument::HiddenKernargOffset => {
                let offset = crate::stages::load::hidden_arguments::hidden_arguments_offset(&kernel.metadata.arguments);
                code.push(format!("s_mov_b32 s{t0}, {offset}"));
                code.push(format!("v_writelane_b32 v{sva}, s{t0}, {first}"));
            }
            KernelArgument::UserKernargOffset => {
                code.push(format!("s_mov_b32 s{t0}, {}", kernel.metadata.kernarg_segment_size));
                code.push(format!("v_writelane_b32 v{sva}, s{t0}, {first}"));
            }
            _ => {
                if let Some(base) = input_of(*argument).and_then(at) {
                    for part in 0..u16::from(count) {
                        code.push(format!("v_writelane_b32 v{sva}, s{}, {}", base + part, u16::from(first) + part));
                    }
                }
            }
        }
    }
    // 3. The instrumentation stack: the application's scratch resource with
    // this wave's offset added (as the calling convention expects s[0:3]),
    // and the stack pointer past the application's own private segment.
    // With architected flat scratch the stack pointer alone, in bytes of one
    // lane (`scratch_` instructions address each lane's own dwords).
    let lanes = |value: FrameValue| FRAME_VALUES.iter().find(|e| e.value == value).expect("frame value").first;
    if needs.stack_bytes > 0 && architected {
        let stack_pointer = original.private_segment_fixed_size;
        code.push(format!("s_mov_b32 s{t0}, {stack_pointer}"));
        code.push(format!("v_writelane_b32 v{sva}, s{t0}, {}", lanes(FrameValue::StackPointer)));
        descriptor.private_segment_fixed_size += needs.stack_bytes;
    } else if needs.stack_bytes > 0 {
        let rsrc = at(Input::PrivateSegmentBuffer).expect("enabled above");
        let offset = at(Input::PrivateSegmentWaveOffset).expect("enabled above");
        let resource = lanes(FrameValue::ScratchResource);
        code.push(format!("s_add_u32 s{t0}, s{rsrc}, s{offset}"));
        code.push(format!("s_addc_u32 s{t1}, s{}, 0", rsrc + 1));
        code.push(format!("v_writelane_b32 v{sva}, s{t0}, {resource}"));
        code.push(format!("v_writelane_b32 v{sva}, s{t1}, {}", resource + 1));
        code.push(format!("v_writelane_b32 v{sva}, s{}, {}", rsrc + 2, resource + 2));
        code.push(format!("v_writelane_b32 v{sva}, s{}, {}", rsrc + 3, resource + 3));
        // Wave-scaled: bytes per lane times 64.
        let stack_pointer = u64::from(original.private_segment_fixed_size) * 64;
        code.push(format!("s_mov_b32 s{t0}, {stack_pointer}"));
        code.push(format!("v_writelane_b32 v{sva}, s{t0}, {}", lanes(FrameValue::StackPointer)));
        descriptor.private_segment_fixed_size += needs.stack_bytes;
    }
    // 3b. Kept in AGPRs: whole-wave copies (the SVA's slots are lanes, and
    // lanes inactive at the entry must hold them too).
    if let Some((sva_agpr, ids_agpr)) = needs.agprs {
        let pair = needs
            .free_sgprs
            .iter()
            .copied()
            .find(|s| *s >= end && s % 2 == 0 && needs.free_sgprs.contains(&(s + 1)))
            .ok_or("no SGPR pair is free at the kernel's entry to save EXEC in")?;
        code.push(format!("s_mov_b64 s[{pair}:{}], exec", pair + 1));
        code.push("s_mov_b64 exec, -1".into());
        // gfx908: v_accvgpr_write reads a VGPR a VALU wrote 2 wait states later.
        code.push("s_nop 1".into());
        code.push(format!("v_accvgpr_write_b32 a{sva_agpr}, v{sva}"));
        if let (Some(agpr), Some(vgpr)) = (ids_agpr, needs.work_item_ids) {
            code.push(format!("v_accvgpr_write_b32 a{agpr}, v{vgpr}"));
        }
        code.push(format!("s_mov_b64 exec, s[{pair}:{}]", pair + 1));
    }
    // 3c. Kept in the wave's slot: stored whole-wave, the address in a
    // VGPR and an SGPR pair free at the entry.
    if let Some(address) = needs.wave_slot {
        let mut pairs =
            needs.free_sgprs.iter().copied().filter(|s| *s >= end && s % 2 == 0 && needs.free_sgprs.contains(&(s + 1)));
        let (Some(exec), Some(pair)) = (pairs.next(), pairs.next()) else {
            return Err("no two SGPR pairs are free at the kernel's entry to store the State Value Array with".into());
        };
        code.push(format!("s_mov_b64 s[{exec}:{}], exec", exec + 1));
        code.push("s_mov_b64 exec, -1".into());
        let Some(indexing) = crate::stages::sva::wave_slots::Indexing::for_processor(processor) else {
            return Err(format!("{}'s waves have no hardware id to find a slot in memory with", processor.name));
        };
        code.extend(crate::stages::sva::wave_slots::store(indexing, sva, needs.work_item_ids, address, pair));
        code.push(format!("s_mov_b64 exec, s[{exec}:{}]", exec + 1));
    }
    // 4. Every input back where the application expects it.
    for (input, first, count) in &before {
        let moved = at(*input).expect("inputs are only ever added");
        let count = if *input == Input::PreloadedArguments { count - no_longer_preloaded } else { *count };
        if moved != *first {
            for part in 0..count {
                code.push(format!("s_mov_b32 s{}, s{}", first + part, moved + part));
            }
        }
    }
    // 5. Preloaded dwords no longer preloaded, loaded where the
    // application expects them, through its argument pointer (back in its
    // place).
    if no_longer_preloaded > 0 {
        let first = before.iter().find(|(i, ..)| *i == Input::PreloadedArguments).map(|(_, f, _)| *f);
        let pointer = before.iter().find(|(i, ..)| *i == Input::KernargSegmentPtr).map(|(_, p, _)| *p);
        let (Some(first), Some(pointer)) = (first, pointer) else {
            return Err("the kernel preloads arguments without receiving their pointer".into());
        };
        for part in preloaded - no_longer_preloaded..preloaded {
            let byte = (u32::from(original.kernarg_preload_offset()) + u32::from(part)) * 4;
            code.push(format!("s_load_dword s{}, s[{pointer}:{}], {byte:#x}", first + part, pointer + 1));
        }
        code.push("s_waitcnt lgkmcnt(0)".into());
    }
    if !code.is_empty() {
        // A VALU write of an SGPR is followed by memory reads of it only after five wait states.
        code.push("s_nop 4".to_string());
    }
    Ok(Preamble { code, descriptor })
}

/// gfx908 delivers the ids in v0, v1, v2; packs the first `dimensions + 1`
/// into `ids`, starting from `ids` itself when it is one of them so no id is
/// overwritten before it is read.
fn pack_work_item_ids(ids: u16, dimensions: u32) -> Vec<String> {
    let sources: Vec<(u16, u32)> = (0..=dimensions.min(2)).map(|d| (d as u16, d * 10)).collect();
    let mut code = vec![];
    let rest: Vec<(u16, u32)> = match sources.iter().find(|(v, _)| *v == ids) {
        Some(&(_, shift)) => {
            if shift > 0 {
                code.push(format!("v_lshlrev_b32_e32 v{ids}, {shift}, v{ids}"));
            }
            sources.into_iter().filter(|(v, _)| *v != ids).collect()
        }
        None => {
            code.push(format!("v_mov_b32_e32 v{ids}, v0"));
            sources.into_iter().skip(1).collect()
        }
    };
    for (source, shift) in rest {
        code.push(format!("v_lshl_or_b32 v{ids}, v{source}, {shift}, v{ids}"));
    }
    code
}

#[cfg(test)]
mod tests {
    use super::pack_work_item_ids;

    #[test]
    fn work_item_ids_are_packed_without_overwriting_a_source() {
        assert_eq!(
            pack_work_item_ids(7, 2),
            ["v_mov_b32_e32 v7, v0", "v_lshl_or_b32 v7, v1, 10, v7", "v_lshl_or_b32 v7, v2, 20, v7"]
        );
        assert_eq!(
            pack_work_item_ids(2, 2),
            ["v_lshlrev_b32_e32 v2, 20, v2", "v_lshl_or_b32 v2, v0, 0, v2", "v_lshl_or_b32 v2, v1, 10, v2"]
        );
        assert_eq!(pack_work_item_ids(1, 1), ["v_lshlrev_b32_e32 v1, 10, v1", "v_lshl_or_b32 v1, v0, 0, v1"]);
        assert_eq!(pack_work_item_ids(0, 0), Vec::<String>::new());
        assert_eq!(pack_work_item_ids(5, 0), ["v_mov_b32_e32 v5, v0"]);
    }
}
