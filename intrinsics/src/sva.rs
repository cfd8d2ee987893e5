//! The State Value Array (SVA): 64 32-bit values kept in one VGPR of a
//! wavefront (one value per lane), holding what payloads need of the
//! instrumented kernel's launch state and of the instrumentation frame.
//!
//! The kernel preamble fills the lanes once per wave; payloads read a lane
//! with `v_readlane_b32`, which ignores EXEC. This file is the one place that
//! says which lane holds what; docs/sva.md prints the same table and a test
//! keeps the two in step.

use std::fmt;

/// Lanes in a wave64 SVA.
pub const WAVE64_LANES: u8 = 64;

/// What payloads can ask of the instrumented kernel (seed 004's
/// `KernelArgumentType`, plus the workgroup ids and LDS kernel id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KernelArgument {
    PrivateSegmentBuffer,
    KernargSegmentPtr,
    HiddenKernargOffset,
    UserKernargOffset,
    DispatchId,
    FlatScratch,
    PrivateSegmentWaveByteOffset,
    DispatchPtr,
    QueuePtr,
    WorkItemPrivateSegmentSize,
    ImplicitBufferPtr,
    LdsKernelId,
    WorkgroupIdX,
    WorkgroupIdY,
    WorkgroupIdZ,
    BlockCountX,
    BlockCountY,
    BlockCountZ,
    GroupSizeX,
    GroupSizeY,
    GroupSizeZ,
    RemainderX,
    RemainderY,
    RemainderZ,
    GlobalOffsetX,
    GlobalOffsetY,
    GlobalOffsetZ,
    PrintBuffer,
    HostcallBuffer,
    DefaultQueue,
    CompletionAction,
    MultigridSync,
    GridDims,
    HeapV1,
    DynamicLdsSize,
    PrivateBase,
    SharedBase,
    WorkItemIdX,
    WorkItemIdY,
    WorkItemIdZ,
}

/// Where a kernel argument is kept while the kernel runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// `count` consecutive SVA lanes from `first` (low half first).
    Lanes { first: u8, count: u8 },
    /// In the kernarg segment, at the offset the kernel's metadata gives the
    /// argument with this `.value_kind`; read through the kernarg pointer.
    Hidden { value_kind: &'static str, bytes: u8 },
    /// Different in every lane, so not in the SVA: bits `shift..shift+10` of
    /// the work-item id VGPR the preamble keeps (x | y << 10 | z << 20, the
    /// layout gfx90a delivers in v0).
    WorkItemId { shift: u8 },
}

/// One row of the table.
#[derive(Clone, Copy, Debug)]
pub struct KernelArgumentEntry {
    pub argument: KernelArgument,
    /// The name docs and reports use.
    pub name: &'static str,
    pub storage: Storage,
    /// How the preamble obtains the value.
    pub source: &'static str,
}

const fn lanes(
    argument: KernelArgument,
    name: &'static str,
    first: u8,
    count: u8,
    source: &'static str,
) -> KernelArgumentEntry {
    KernelArgumentEntry { argument, name, storage: Storage::Lanes { first, count }, source }
}

const fn hidden(
    argument: KernelArgument,
    name: &'static str,
    value_kind: &'static str,
    bytes: u8,
) -> KernelArgumentEntry {
    KernelArgumentEntry {
        argument,
        name,
        storage: Storage::Hidden { value_kind, bytes },
        source: "kernarg segment, offset from the kernel's metadata",
    }
}

const fn work_item(argument: KernelArgument, name: &'static str, shift: u8) -> KernelArgumentEntry {
    KernelArgumentEntry {
        argument,
        name,
        storage: Storage::WorkItemId { shift },
        source: "v0 (gfx90a, packed) or v0/v1/v2 (gfx908), packed by the preamble",
    }
}

use KernelArgument as K;

/// Every kernel argument, wave64.
pub const KERNEL_ARGUMENTS: &[KernelArgumentEntry] = &[
    lanes(K::PrivateSegmentBuffer, "private_segment_buffer", 10, 4, "SGPR input (the application's scratch V#)"),
    lanes(K::FlatScratch, "flat_scratch", 14, 2, "SGPR input flat_scratch_init"),
    lanes(K::PrivateSegmentWaveByteOffset, "private_segment_wave_byte_offset", 16, 1, "SGPR input (system)"),
    lanes(K::KernargSegmentPtr, "kernarg_segment_ptr", 17, 2, "SGPR input"),
    lanes(
        K::HiddenKernargOffset,
        "hidden_kernarg_offset",
        19,
        1,
        "immediate: offset of the first hidden argument in the metadata",
    ),
    lanes(
        K::UserKernargOffset,
        "user_kernarg_offset",
        20,
        1,
        "immediate: offset of the tool's own arguments (reserved)",
    ),
    lanes(K::DispatchId, "dispatch_id", 21, 2, "SGPR input"),
    lanes(K::DispatchPtr, "dispatch_ptr", 23, 2, "SGPR input"),
    lanes(K::QueuePtr, "queue_ptr", 25, 2, "SGPR input"),
    lanes(K::ImplicitBufferPtr, "implicit_buffer_ptr", 27, 2, "SGPR input (graphics; rarely set for compute)"),
    lanes(K::WorkItemPrivateSegmentSize, "work_item_private_segment_size", 29, 1, "SGPR input"),
    lanes(K::WorkgroupIdX, "workgroup_id_x", 30, 1, "SGPR input (system)"),
    lanes(K::WorkgroupIdY, "workgroup_id_y", 31, 1, "SGPR input (system)"),
    lanes(K::WorkgroupIdZ, "workgroup_id_z", 32, 1, "SGPR input (system)"),
    lanes(K::LdsKernelId, "lds_kernel_id", 33, 1, "immediate: the kernel's LDS id (LLVM 16+ module LDS lowering)"),
    hidden(K::BlockCountX, "block_count_x", "hidden_block_count_x", 4),
    hidden(K::BlockCountY, "block_count_y", "hidden_block_count_y", 4),
    hidden(K::BlockCountZ, "block_count_z", "hidden_block_count_z", 4),
    hidden(K::GroupSizeX, "group_size_x", "hidden_group_size_x", 2),
    hidden(K::GroupSizeY, "group_size_y", "hidden_group_size_y", 2),
    hidden(K::GroupSizeZ, "group_size_z", "hidden_group_size_z", 2),
    hidden(K::RemainderX, "remainder_x", "hidden_remainder_x", 2),
    hidden(K::RemainderY, "remainder_y", "hidden_remainder_y", 2),
    hidden(K::RemainderZ, "remainder_z", "hidden_remainder_z", 2),
    hidden(K::GlobalOffsetX, "global_offset_x", "hidden_global_offset_x", 8),
    hidden(K::GlobalOffsetY, "global_offset_y", "hidden_global_offset_y", 8),
    hidden(K::GlobalOffsetZ, "global_offset_z", "hidden_global_offset_z", 8),
    hidden(K::PrintBuffer, "print_buffer", "hidden_printf_buffer", 8),
    hidden(K::HostcallBuffer, "hostcall_buffer", "hidden_hostcall_buffer", 8),
    hidden(K::DefaultQueue, "default_queue", "hidden_default_queue", 8),
    hidden(K::CompletionAction, "completion_action", "hidden_completion_action", 8),
    hidden(K::MultigridSync, "multigrid_sync", "hidden_multigrid_sync_arg", 8),
    hidden(K::GridDims, "grid_dims", "hidden_grid_dims", 2),
    hidden(K::HeapV1, "heap_v1", "hidden_heap_v1", 8),
    hidden(K::DynamicLdsSize, "dynamic_lds_size", "hidden_dynamic_lds_size", 4),
    hidden(K::PrivateBase, "private_base", "hidden_private_base", 4),
    hidden(K::SharedBase, "shared_base", "hidden_shared_base", 4),
    work_item(K::WorkItemIdX, "work_item_id_x", 0),
    work_item(K::WorkItemIdY, "work_item_id_y", 10),
    work_item(K::WorkItemIdZ, "work_item_id_z", 20),
];

/// Values of the instrumentation frame, kept in the SVA so that a payload
/// that needs stack can swap the application's frame registers for its own
/// and back without any other free register.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameValue {
    /// The instrumentation stack's scratch V# (s[0:3] while a payload runs).
    ScratchResource,
    /// The instrumentation stack pointer (s32 while a payload runs).
    StackPointer,
    /// The application's s0..s3 and s32 while a payload runs.
    ApplicationScratchResource,
    ApplicationStackPointer,
}

#[derive(Clone, Copy, Debug)]
pub struct FrameEntry {
    pub value: FrameValue,
    pub name: &'static str,
    pub first: u8,
    pub count: u8,
    pub source: &'static str,
}

pub const FRAME_VALUES: &[FrameEntry] = &[
    FrameEntry {
        value: FrameValue::ScratchResource,
        name: "instrumentation_scratch_resource",
        first: 0,
        count: 4,
        source: "preamble: the application's V# (lanes 10-13)",
    },
    FrameEntry {
        value: FrameValue::StackPointer,
        name: "instrumentation_stack_pointer",
        first: 4,
        count: 1,
        source: "preamble: the application's private segment size, so the stack sits on top of it",
    },
    FrameEntry {
        value: FrameValue::ApplicationScratchResource,
        name: "application_s0_s3",
        first: 5,
        count: 4,
        source: "payload entry (saved), payload exit (restored)",
    },
    FrameEntry {
        value: FrameValue::ApplicationStackPointer,
        name: "application_s32",
        first: 9,
        count: 1,
        source: "payload entry (saved), payload exit (restored)",
    },
];

/// Lanes 34..64 are not assigned (room for tool arguments).
pub const FIRST_FREE_LANE: u8 = 34;

impl KernelArgument {
    pub fn entry(self) -> &'static KernelArgumentEntry {
        KERNEL_ARGUMENTS.iter().find(|e| e.argument == self).expect("every kernel argument is in KERNEL_ARGUMENTS")
    }

    pub fn storage(self) -> Storage {
        self.entry().storage
    }

    pub fn name(self) -> &'static str {
        self.entry().name
    }

    /// Size of the value in bits as payloads see it (hidden 16-bit values
    /// are zero-extended to 32).
    pub fn bits(self) -> u32 {
        match self.storage() {
            Storage::Lanes { count, .. } => 32 * u32::from(count),
            Storage::Hidden { bytes, .. } => u32::from(bytes.max(4)) * 8,
            Storage::WorkItemId { .. } => 32,
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        KERNEL_ARGUMENTS.iter().find(|e| e.name == name).map(|e| e.argument)
    }
}

impl fmt::Display for KernelArgument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FrameValue {
    pub fn entry(self) -> &'static FrameEntry {
        FRAME_VALUES.iter().find(|e| e.value == self).expect("every frame value is in FRAME_VALUES")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every lane belongs to at most one value, and all lanes fit in wave64.
    #[test]
    fn lanes_do_not_overlap() {
        let mut owner: [Option<&str>; WAVE64_LANES as usize] = [None; WAVE64_LANES as usize];
        let ranges = KERNEL_ARGUMENTS
            .iter()
            .filter_map(|e| match e.storage {
                Storage::Lanes { first, count } => Some((e.name, first, count)),
                _ => None,
            })
            .chain(FRAME_VALUES.iter().map(|e| (e.name, e.first, e.count)));
        for (name, first, count) in ranges {
            assert!(count > 0, "{name} has no lanes");
            for lane in first..first + count {
                assert!(lane < FIRST_FREE_LANE, "{name} uses lane {lane}, past FIRST_FREE_LANE");
                if let Some(other) = owner[lane as usize] {
                    panic!("lane {lane} belongs to {other} and {name}");
                }
                owner[lane as usize] = Some(name);
            }
        }
        // Lanes are handed out without holes.
        assert!(owner[..FIRST_FREE_LANE as usize].iter().all(Option::is_some));
    }

    #[test]
    fn every_argument_has_one_entry_and_a_unique_name() {
        let mut names: Vec<_> = KERNEL_ARGUMENTS.iter().map(|e| e.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), KERNEL_ARGUMENTS.len());
        for e in KERNEL_ARGUMENTS {
            assert_eq!(e.argument.entry().name, e.name);
            assert_eq!(KernelArgument::from_name(e.name), Some(e.argument));
        }
        assert_eq!(KernelArgument::KernargSegmentPtr.bits(), 64);
        assert_eq!(KernelArgument::GroupSizeX.bits(), 32);
        assert_eq!(KernelArgument::GlobalOffsetX.bits(), 64);
    }

    /// docs/sva.md shows the same lanes as this table.
    #[test]
    fn docs_show_this_table() {
        let docs = include_str!("../../docs/sva.md");
        for e in KERNEL_ARGUMENTS {
            let place = match e.storage {
                Storage::Lanes { first, count: 1 } => format!("lane {first}"),
                Storage::Lanes { first, count } => format!("lanes {first}-{}", first + count - 1),
                Storage::Hidden { value_kind, .. } => format!("`{value_kind}`"),
                Storage::WorkItemId { shift } => format!("bits {shift}-{}", shift + 9),
            };
            let row = format!("| `{}` | {place} |", e.name);
            assert!(docs.contains(&row), "docs/sva.md lacks the row starting `{row}`");
        }
        for e in FRAME_VALUES {
            let place = if e.count == 1 {
                format!("lane {}", e.first)
            } else {
                format!("lanes {}-{}", e.first, e.first + e.count - 1)
            };
            let row = format!("| `{}` | {place} |", e.name);
            assert!(docs.contains(&row), "docs/sva.md lacks the row starting `{row}`");
        }
    }
}
