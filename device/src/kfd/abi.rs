//! The KFD ioctl interface (`linux/kfd_ioctl.h`, version 1.11 as Debian
//! 12's kernel headers have it): request numbers and argument layouts.
//! Arguments arrive as bytes copied from the caller; `Pod` types read and
//! write them without unsafe code.

use bytemuck::{Pod, Zeroable};

pub const MAJOR_VERSION: u32 = 1;
pub const MINOR_VERSION: u32 = 11;

/// `_IOC` request layout: number, type ('K'), size, direction.
pub fn request_parts(request: u64) -> (u8, u8, usize) {
    ((request & 0xff) as u8, ((request >> 8) & 0xff) as u8, ((request >> 16) & 0x3fff) as usize)
}
pub const IOCTL_TYPE: u8 = b'K';

pub const GET_VERSION: u8 = 0x01;
pub const CREATE_QUEUE: u8 = 0x02;
pub const DESTROY_QUEUE: u8 = 0x03;
pub const SET_MEMORY_POLICY: u8 = 0x04;
pub const GET_CLOCK_COUNTERS: u8 = 0x05;
pub const UPDATE_QUEUE: u8 = 0x07;
pub const CREATE_EVENT: u8 = 0x08;
pub const DESTROY_EVENT: u8 = 0x09;
pub const SET_EVENT: u8 = 0x0a;
pub const RESET_EVENT: u8 = 0x0b;
pub const WAIT_EVENTS: u8 = 0x0c;
pub const SET_SCRATCH_BACKING_VA: u8 = 0x11;
pub const GET_TILE_CONFIG: u8 = 0x12;
pub const SET_TRAP_HANDLER: u8 = 0x13;
pub const GET_PROCESS_APERTURES_NEW: u8 = 0x14;
pub const ACQUIRE_VM: u8 = 0x15;
pub const ALLOC_MEMORY_OF_GPU: u8 = 0x16;
pub const FREE_MEMORY_OF_GPU: u8 = 0x17;
pub const MAP_MEMORY_TO_GPU: u8 = 0x18;
pub const UNMAP_MEMORY_FROM_GPU: u8 = 0x19;
pub const SET_CU_MASK: u8 = 0x1a;
pub const ALLOC_QUEUE_GWS: u8 = 0x1e;
pub const SVM: u8 = 0x20;
pub const SET_XNACK_MODE: u8 = 0x21;
pub const AVAILABLE_MEMORY: u8 = 0x23;

pub const ALLOC_VRAM: u32 = 1 << 0;
pub const ALLOC_GTT: u32 = 1 << 1;
pub const ALLOC_USERPTR: u32 = 1 << 2;
pub const ALLOC_DOORBELL: u32 = 1 << 3;
pub const ALLOC_MMIO_REMAP: u32 = 1 << 4;

pub const QUEUE_TYPE_COMPUTE_AQL: u32 = 2;

pub const EVENT_SIGNAL: u32 = 0;
pub const SIGNAL_EVENT_LIMIT: u32 = 4096;
pub const WAIT_COMPLETE: u32 = 0;
pub const WAIT_TIMEOUT: u32 = 1;

/// mmap offsets on /dev/kfd: the type in bits 62-63, the GPU id in 46-61.
pub const MMAP_TYPE_SHIFT: u32 = 62;
pub const MMAP_TYPE_DOORBELL: u64 = 3 << MMAP_TYPE_SHIFT;
pub const MMAP_TYPE_EVENTS: u64 = 2 << MMAP_TYPE_SHIFT;
pub const MMAP_TYPE_MMIO: u64 = 0;
pub const MMAP_GPU_ID_SHIFT: u32 = 46;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct GetVersion {
    pub major_version: u32,
    pub minor_version: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ProcessDeviceApertures {
    pub lds_base: u64,
    pub lds_limit: u64,
    pub scratch_base: u64,
    pub scratch_limit: u64,
    pub gpuvm_base: u64,
    pub gpuvm_limit: u64,
    pub gpu_id: u32,
    pub pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct GetProcessAperturesNew {
    pub apertures_pointer: u64,
    pub node_count: u32,
    pub pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AcquireVm {
    pub drm_fd: u32,
    pub gpu_id: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AllocMemory {
    pub va_addr: u64,
    pub size: u64,
    pub handle: u64,
    pub mmap_offset: u64,
    pub gpu_id: u32,
    pub flags: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct FreeMemory {
    pub handle: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct MapMemory {
    pub handle: u64,
    pub device_ids_pointer: u64,
    pub device_count: u32,
    pub success_count: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct SetMemoryPolicy {
    pub alternate_aperture_base: u64,
    pub alternate_aperture_size: u64,
    pub gpu_id: u32,
    pub default_policy: u32,
    pub alternate_policy: u32,
    pub pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct GetClockCounters {
    pub gpu_clock_counter: u64,
    pub cpu_clock_counter: u64,
    pub system_clock_counter: u64,
    pub system_clock_frequency: u64,
    pub gpu_id: u32,
    pub pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateQueue {
    pub ring_base_address: u64,
    pub write_pointer_address: u64,
    pub read_pointer_address: u64,
    pub doorbell_offset: u64,
    pub ring_size: u32,
    pub gpu_id: u32,
    pub queue_type: u32,
    pub queue_percentage: u32,
    pub queue_priority: u32,
    pub queue_id: u32,
    pub eop_buffer_address: u64,
    pub eop_buffer_size: u64,
    pub ctx_save_restore_address: u64,
    pub ctx_save_restore_size: u32,
    pub ctl_stack_size: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct QueueId {
    pub queue_id: u32,
    pub pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct UpdateQueue {
    pub ring_base_address: u64,
    pub queue_id: u32,
    pub ring_size: u32,
    pub queue_percentage: u32,
    pub queue_priority: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateEvent {
    pub event_page_offset: u64,
    pub event_trigger_data: u32,
    pub event_type: u32,
    pub auto_reset: u32,
    pub node_id: u32,
    pub event_id: u32,
    pub event_slot_index: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct EventId {
    pub event_id: u32,
    pub pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct WaitEvents {
    pub events_pointer: u64,
    pub event_count: u32,
    pub wait_for_all: u32,
    pub timeout_ms: u32,
    pub wait_result: u32,
}

/// `struct kfd_event_data`: 32 bytes of exception data, an extension pointer, the event id.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct EventData {
    pub exception: [u64; 4],
    pub user_data: u64,
    pub event_id: u32,
    pub pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct SetScratchBackingVa {
    pub va_addr: u64,
    pub gpu_id: u32,
    pub pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct GetTileConfig {
    pub tile_config_pointer: u64,
    pub macro_tile_config_pointer: u64,
    pub tile_config_count: u32,
    pub macro_tile_config_count: u32,
    pub gpu_id: u32,
    pub gb_addr_config: u32,
    pub bank_count: u32,
    pub rank_count: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct SetTrapHandler {
    pub tba_addr: u64,
    pub tma_addr: u64,
    pub gpu_id: u32,
    pub pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct SetXnackMode {
    pub xnack_enabled: i32,
}

/// `kfd_ioctl_svm_args`, followed by `nattr` [`SvmAttribute`]s (the
/// request's size field counts them: 24 + 8 per attribute).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct SvmArgs {
    pub start_addr: u64,
    pub size: u64,
    pub op: u32,
    pub nattr: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable, PartialEq, Eq)]
pub struct SvmAttribute {
    pub kind: u32,
    pub value: u32,
}

pub const SVM_OP_SET_ATTR: u32 = 0;
pub const SVM_OP_GET_ATTR: u32 = 1;

pub const SVM_ATTR_PREFERRED_LOC: u32 = 0;
pub const SVM_ATTR_PREFETCH_LOC: u32 = 1;
pub const SVM_ATTR_ACCESS: u32 = 2;
pub const SVM_ATTR_ACCESS_IN_PLACE: u32 = 3;
pub const SVM_ATTR_NO_ACCESS: u32 = 4;
pub const SVM_ATTR_SET_FLAGS: u32 = 5;
pub const SVM_ATTR_CLR_FLAGS: u32 = 6;
pub const SVM_ATTR_GRANULARITY: u32 = 7;

/// Locations: system memory, or none chosen (else a GPU id).
pub const SVM_LOCATION_SYSMEM: u32 = 0;
pub const SVM_LOCATION_UNDEFINED: u32 = 0xffff_ffff;

pub const SVM_FLAG_HOST_ACCESS: u32 = 0x1;
pub const SVM_FLAG_COHERENT: u32 = 0x2;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AvailableMemory {
    pub available: u64,
    pub gpu_id: u32,
    pub pad: u32,
}
