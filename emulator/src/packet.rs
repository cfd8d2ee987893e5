//! A kernel dispatch as the hardware sees it: an AQL packet in memory that
//! a runtime wrote, naming a kernel descriptor in memory. Everything comes
//! from the packet and the descriptor (no code object file, no metadata):
//! what a command processor hands the emulator.

use gpuinstr::stages::load::descriptor::KernelDescriptor;
use gpuinstr::stages::load::{Kernel, KernelMetadata};

use crate::dispatch::{self, DispatchMemory, Launch, Options, RunReport, TraceEntry};
use crate::error::EmulatorError;
use crate::memory::Memory;
use crate::program::Program;
use crate::semantics::{Interrupts, Machine};
use crate::wave::LANES;

/// `hsa_kernel_dispatch_packet_t`, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DispatchPacket {
    pub dimensions: u16,
    pub workgroup_size: [u16; 3],
    pub grid_size: [u32; 3],
    pub private_segment_size: u32,
    pub group_segment_size: u32,
    pub kernel_object: u64,
    pub kernarg_address: u64,
    pub completion_signal: u64,
}

impl DispatchPacket {
    pub fn decode(p: &[u8; 64]) -> DispatchPacket {
        let u16_at = |at: usize| u16::from_le_bytes([p[at], p[at + 1]]);
        let u32_at = |at: usize| u32::from_le_bytes(p[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(p[at..at + 8].try_into().expect("8 bytes"));
        DispatchPacket {
            dimensions: u16_at(2) & 3,
            workgroup_size: [u16_at(4), u16_at(6), u16_at(8)],
            grid_size: [u32_at(12), u32_at(16), u32_at(20)],
            private_segment_size: u32_at(24),
            group_segment_size: u32_at(28),
            kernel_object: u64_at(32),
            kernarg_address: u64_at(40),
            completion_signal: u64_at(56),
        }
    }
}

/// The kernel a packet names: its descriptor (read from memory) and where
/// its code starts.
pub fn kernel_of(packet: &DispatchPacket, memory: &Memory) -> Result<Kernel, EmulatorError> {
    let at = packet.kernel_object;
    let bytes = memory
        .bytes(at, 64)
        .map_err(|fault| EmulatorError::Isa(format!("the kernel descriptor at {at:#x} cannot be read: {fault}")))?;
    let descriptor = KernelDescriptor::decode(&bytes.try_into().expect("64 bytes"));
    let code_address = at.wrapping_add_signed(descriptor.kernel_code_entry_byte_offset);
    let metadata = KernelMetadata {
        name: format!("kernel at {at:#x}"),
        symbol: String::new(),
        arguments: Vec::new(),
        kernarg_segment_size: u64::from(descriptor.kernarg_size),
        group_segment_fixed_size: u64::from(descriptor.group_segment_fixed_size),
        private_segment_fixed_size: u64::from(packet.private_segment_size),
        sgpr_count: 0,
        vgpr_count: 0,
        agpr_count: None,
        wavefront_size: LANES as u64,
        max_flat_workgroup_size: 1024,
    };
    Ok(Kernel { metadata, descriptor, descriptor_address: at, code_address })
}

/// Where the runtime's structures are and the scratch the dispatch gets.
pub struct PacketPlace {
    /// The packet's address in its queue's ring.
    pub packet: u64,
    /// The queue (`amd_queue_t`).
    pub queue: u64,
    /// Scratch for every wave of the dispatch (`scratch_bytes_for`).
    pub scratch: u64,
}

/// Bytes of scratch a dispatch needs: every wave's private segment.
pub fn scratch_bytes_for(packet: &DispatchPacket) -> u64 {
    let per_wave = u64::from(packet.private_segment_size).next_multiple_of(16) * LANES as u64;
    per_wave * waves_of(packet)
}

/// The grid the packet asks for (its last workgroups may be partial).
fn launch_of(packet: &DispatchPacket) -> Launch {
    Launch::of_grid(packet.grid_size, packet.workgroup_size.map(u32::from))
}

fn waves_of(packet: &DispatchPacket) -> u64 {
    let threads: u32 = packet.workgroup_size.iter().map(|&s| u32::from(s)).product();
    u64::from(threads.div_ceil(LANES as u32))
        * launch_of(packet).workgroups.iter().map(|&g| u64::from(g)).product::<u64>()
}

/// Runs the dispatch `packet` describes, of `kernel` (from [`kernel_of`],
/// named as the caller knows it). `program` holds the code the kernel runs
/// (addresses are device addresses), `memory` is the device's.
#[allow(clippy::too_many_arguments)]
pub fn run(
    program: &mut Program,
    memory: &mut Memory,
    packet: &DispatchPacket,
    kernel: &Kernel,
    place: &PacketPlace,
    interrupts: Option<Interrupts>,
    options: &Options,
    trace: &mut Vec<TraceEntry>,
) -> Result<RunReport, EmulatorError> {
    let name = kernel.name().to_string();
    let size = packet.workgroup_size.map(u32::from);
    if size.contains(&0) || packet.grid_size.contains(&0) {
        return Err(EmulatorError::Dispatch { kernel: name, message: "an empty grid or workgroup".into() });
    }
    // The command processor sizes scratch and LDS from the packet alone: a
    // packet giving less than the kernel's descriptor says it needs would
    // have its waves write into each other's scratch (or past the LDS) on
    // a GPU, quietly. Whoever wrote the packet (the program, its runtime,
    // a tool that swapped the kernel) is wrong; say so and stop.
    let descriptor = &kernel.descriptor;
    let needs = [
        ("scratch", "private", packet.private_segment_size, descriptor.private_segment_fixed_size, "per work-item"),
        ("LDS", "group", packet.group_segment_size, descriptor.group_segment_fixed_size, "per workgroup"),
    ];
    for (what, segment, given, needed, per) in needs {
        if given < needed {
            return Err(EmulatorError::Dispatch {
                kernel: name,
                message: format!(
                    "the dispatch packet gives {given} bytes of {what} {per} (its {segment}_segment_size), \
                     but the kernel's descriptor says it needs {needed} ({}_SEGMENT_FIXED_SIZE): whoever wrote \
                     the packet gave the kernel too little",
                    segment.to_uppercase()
                ),
            });
        }
    }
    let launch = launch_of(packet);
    let scratch_per_wave = u64::from(packet.private_segment_size).next_multiple_of(16) * LANES as u64;
    let places = DispatchMemory {
        packet: place.packet,
        queue: place.queue,
        kernarg: packet.kernarg_address,
        scratch: place.scratch,
        scratch_per_wave,
    };
    let (vgprs, sgprs) = dispatch::allocated_registers(&kernel.descriptor, program.processor);
    let machine = Machine {
        load_base: 0,
        lds_size: u64::from(packet.group_segment_size),
        vgprs,
        sgprs,
        processor: program.processor,
        interrupts,
        lds_out_of_range: options.lds_out_of_range,
        d16_zeroes_other_half: program.processor.sram_ecc && options.sram_ecc_on,
    };
    dispatch::run(program, memory, kernel, &launch, &places, &machine, options, trace)
}
