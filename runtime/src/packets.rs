//! AQL packets as the runtime sees them in a queue (`hsa.h`'s layouts),
//! and how a dispatch of an instrumented kernel is rewritten so that its
//! tool data is collected before anything after it runs:
//!
//! ```text
//! the program's dispatch (barrier bit set, no completion signal)
//! the collect kernel      (copies the tool globals out, resets them; completion → `done`)
//! barrier-AND             (completion → the program's signal, if it had one)
//! ```
//!
//! All of it happens on the device, in the program's queue: the host never
//! holds the queue up (ROCr's copies share queues with the program's, so a
//! queue waiting for the host could wait for itself). The runtime reads
//! the collected bytes from host memory once `done` reaches 0.

pub type Packet = [u8; 64];

const TYPE_KERNEL_DISPATCH: u16 = 2;
const TYPE_BARRIER_AND: u16 = 3;
const TYPE_VENDOR: u16 = 0;
/// AMD's vendor packet formats (`hsa_amd_packet_type`) and barrier-value
/// conditions (`hsa_signal_condition_t`).
const AMD_BARRIER_VALUE: u8 = 2;
const CONDITION_EQUAL: u32 = 0;
const CONDITION_LESS: u32 = 2;
const BARRIER_BIT: u16 = 1 << 8;
const ACQUIRE_SCOPE_SHIFT: u16 = 9;
const RELEASE_SCOPE_SHIFT: u16 = 11;
const SCOPE_SYSTEM: u16 = 2;

/// The fields of a kernel dispatch packet that a tool or the runtime needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Dispatch {
    /// The kernel descriptor's address.
    pub kernel_object: u64,
    pub workgroup_size: [u32; 3],
    /// In work-items, as the packet gives it.
    pub grid_size: [u32; 3],
    pub kernarg_address: u64,
    pub group_segment_size: u32,
    pub private_segment_size: u32,
}

fn u16_at(packet: &Packet, at: usize) -> u16 {
    u16::from_le_bytes([packet[at], packet[at + 1]])
}

fn u32_at(packet: &Packet, at: usize) -> u32 {
    u32::from_le_bytes(packet[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(packet: &Packet, at: usize) -> u64 {
    u64::from_le_bytes(packet[at..at + 8].try_into().expect("8 bytes"))
}

/// The dispatch in `packet`, if it is a kernel dispatch packet.
pub fn dispatch_of(packet: &Packet) -> Option<Dispatch> {
    if u16_at(packet, 0) & 0xff != TYPE_KERNEL_DISPATCH {
        return None;
    }
    Some(Dispatch {
        workgroup_size: [4, 6, 8].map(|at| u32::from(u16_at(packet, at))),
        grid_size: [12, 16, 20].map(|at| u32_at(packet, at)),
        private_segment_size: u32_at(packet, 24),
        group_segment_size: u32_at(packet, 28),
        kernel_object: u64_at(packet, 32),
        kernarg_address: u64_at(packet, 40),
    })
}

/// The signals a packet waits to complete (reach 0) before what follows
/// it runs: a barrier-AND's, or an AMD barrier-value packet's when it waits
/// for its signal to be 0 (equal to 0, or less than 1, under a mask that
/// keeps every bit: what HIP 5.7 and newer put between streams).
pub fn waits_for(packet: &Packet) -> Vec<u64> {
    let kind = u16_at(packet, 0) & 0xff;
    if kind == TYPE_BARRIER_AND {
        return (0..5).map(|k| u64_at(packet, 8 + 8 * k)).filter(|&s| s != 0).collect();
    }
    if kind == TYPE_VENDOR && packet[2] == AMD_BARRIER_VALUE {
        let (signal, value, mask) = (u64_at(packet, 8), u64_at(packet, 16) as i64, u64_at(packet, 24));
        let condition = u32_at(packet, 32);
        let until_zero = (condition == CONDITION_EQUAL && value == 0) || (condition == CONDITION_LESS && value == 1);
        if signal != 0 && mask == u64::MAX && until_zero {
            return vec![signal];
        }
    }
    Vec::new()
}

/// The signal a packet completes (0: none).
pub fn completion_signal(packet: &Packet) -> u64 {
    u64_at(packet, 56)
}

/// The grid's dimensions (1 to 3) a dispatch packet's setup field gives.
pub fn dimensions(packet: &Packet) -> u16 {
    u16_at(packet, 2) & 3
}

/// Points the dispatch in `packet` at other kernel arguments.
pub fn set_kernarg(packet: &mut Packet, kernarg_address: u64) {
    packet[40..48].copy_from_slice(&kernarg_address.to_le_bytes());
}

/// Points the dispatch in `packet` at another kernel (an original's
/// instrumented copy): its descriptor, and the packet's LDS and scratch
/// sizes moved from the original's fixed sizes to the other's (`(original,
/// other)`), keeping what the program added (dynamic LDS).
pub fn retarget(packet: &mut Packet, kernel_object: u64, group: (u32, u32), private: (u32, u32)) {
    let moved = |size: u32, (original, other): (u32, u32)| size.saturating_sub(original).saturating_add(other);
    let private_size = moved(u32_at(packet, 24), private);
    let group_size = moved(u32_at(packet, 28), group);
    packet[24..28].copy_from_slice(&private_size.to_le_bytes());
    packet[28..32].copy_from_slice(&group_size.to_le_bytes());
    packet[32..40].copy_from_slice(&kernel_object.to_le_bytes());
}

/// The runtime's collect kernel, ready to dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollectKernel {
    /// The executable the runtime loaded it into (destroyed at exit).
    pub executable: u64,
    pub kernel_object: u64,
    /// Its descriptor's sizes, which its packets must give it.
    pub private_segment_size: u32,
    pub group_segment_size: u32,
}

/// Work-items of the collect kernel (one wave; device/collect.hip).
pub const COLLECT_LANES: u16 = 64;

/// The packets that stand for the dispatch in `packet` (see the module's
/// documentation); the collect kernel's arguments are at `kernarg`.
pub fn observed(packet: &Packet, collect: CollectKernel, kernarg: u64, done: u64) -> Vec<Packet> {
    let mut dispatch = *packet;
    let header = u16_at(packet, 0) | BARRIER_BIT;
    dispatch[0..2].copy_from_slice(&header.to_le_bytes());
    dispatch[56..64].copy_from_slice(&0u64.to_le_bytes());

    let mut kernel = [0u8; 64];
    let system = (SCOPE_SYSTEM << ACQUIRE_SCOPE_SHIFT) | (SCOPE_SYSTEM << RELEASE_SCOPE_SHIFT);
    kernel[0..2].copy_from_slice(&(TYPE_KERNEL_DISPATCH | BARRIER_BIT | system).to_le_bytes());
    kernel[2..4].copy_from_slice(&1u16.to_le_bytes());
    for (at, size) in [(4, COLLECT_LANES), (6, 1), (8, 1)] {
        kernel[at..at + 2].copy_from_slice(&size.to_le_bytes());
    }
    for (at, size) in [(12, u32::from(COLLECT_LANES)), (16, 1), (20, 1)] {
        kernel[at..at + 4].copy_from_slice(&size.to_le_bytes());
    }
    kernel[24..28].copy_from_slice(&collect.private_segment_size.to_le_bytes());
    kernel[28..32].copy_from_slice(&collect.group_segment_size.to_le_bytes());
    kernel[32..40].copy_from_slice(&collect.kernel_object.to_le_bytes());
    kernel[40..48].copy_from_slice(&kernarg.to_le_bytes());
    kernel[56..64].copy_from_slice(&done.to_le_bytes());

    let program_signal = u64_at(packet, 56);
    if program_signal == 0 {
        return vec![dispatch, kernel];
    }
    let mut barrier = [0u8; 64];
    let barrier_header = TYPE_BARRIER_AND | BARRIER_BIT | (SCOPE_SYSTEM << RELEASE_SCOPE_SHIFT);
    barrier[0..2].copy_from_slice(&barrier_header.to_le_bytes());
    barrier[56..64].copy_from_slice(&program_signal.to_le_bytes());
    vec![dispatch, kernel, barrier]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a_dispatch() -> Packet {
        let mut p = [0u8; 64];
        // KERNEL_DISPATCH, no barrier bit, system acquire and release.
        let header: u16 = 2 | (2 << 9) | (2 << 11);
        p[0..2].copy_from_slice(&header.to_le_bytes());
        p[2..4].copy_from_slice(&1u16.to_le_bytes());
        p[4..6].copy_from_slice(&256u16.to_le_bytes());
        p[6..8].copy_from_slice(&1u16.to_le_bytes());
        p[8..10].copy_from_slice(&1u16.to_le_bytes());
        p[12..16].copy_from_slice(&1000u32.to_le_bytes());
        p[16..20].copy_from_slice(&1u32.to_le_bytes());
        p[20..24].copy_from_slice(&1u32.to_le_bytes());
        p[28..32].copy_from_slice(&512u32.to_le_bytes());
        p[32..40].copy_from_slice(&0x7000_1000u64.to_le_bytes());
        p[40..48].copy_from_slice(&0x5000u64.to_le_bytes());
        p[56..64].copy_from_slice(&0x9999u64.to_le_bytes());
        p
    }

    #[test]
    fn a_dispatch_packet_is_read_field_by_field() {
        let d = dispatch_of(&a_dispatch()).unwrap();
        assert_eq!(d.kernel_object, 0x7000_1000);
        assert_eq!(d.workgroup_size, [256, 1, 1]);
        assert_eq!(d.grid_size, [1000, 1, 1]);
        assert_eq!(d.kernarg_address, 0x5000);
        assert_eq!(d.group_segment_size, 512);
        let mut barrier = [0u8; 64];
        barrier[0] = 3;
        assert_eq!(dispatch_of(&barrier), None);
    }

    #[test]
    fn an_observed_dispatch_is_followed_by_the_collect_kernel_then_the_program_signal() {
        let original = a_dispatch();
        let collect = CollectKernel {
            executable: 0xe000,
            kernel_object: 0xc000,
            private_segment_size: 16,
            group_segment_size: 512,
        };
        let packets = observed(&original, collect, 0x4000, 0xd0);
        let [dispatch, kernel, barrier] = packets.try_into().expect("three packets");
        // The program's dispatch, with the barrier bit and no signal.
        assert_eq!(u16_at(&dispatch, 0), u16_at(&original, 0) | BARRIER_BIT);
        assert_eq!(dispatch[2..56], original[2..56]);
        assert_eq!(u64_at(&dispatch, 56), 0);
        // One wave of the collect kernel, after it, signalling the runtime.
        let collected = dispatch_of(&kernel).expect("a kernel dispatch");
        assert_ne!(u16_at(&kernel, 0) & BARRIER_BIT, 0);
        assert_eq!(collected.kernel_object, 0xc000);
        assert_eq!(collected.kernarg_address, 0x4000);
        assert_eq!((collected.workgroup_size, collected.grid_size), ([64, 1, 1], [64, 1, 1]));
        assert_eq!((collected.private_segment_size, collected.group_segment_size), (16, 512));
        assert_eq!(u64_at(&kernel, 56), 0xd0);
        // Then the program's signal, from a barrier with nothing to wait for.
        assert_eq!(u16_at(&barrier, 0) & 0xff, TYPE_BARRIER_AND);
        assert_ne!(u16_at(&barrier, 0) & BARRIER_BIT, 0);
        assert!(barrier[2..56].iter().all(|&b| b == 0));
        assert_eq!(u64_at(&barrier, 56), 0x9999);
    }

    #[test]
    fn a_retargeted_dispatch_runs_the_copy_with_its_segment_sizes() {
        let mut packet = a_dispatch();
        packet[24..28].copy_from_slice(&16u32.to_le_bytes());
        // 512 bytes of LDS: 256 the original's own, 256 dynamic.
        retarget(&mut packet, 0x7000_2000, (256, 384), (16, 48));
        let d = dispatch_of(&packet).unwrap();
        assert_eq!(d.kernel_object, 0x7000_2000);
        assert_eq!((d.group_segment_size, d.private_segment_size), (640, 48));
        assert_eq!((d.grid_size, d.workgroup_size, d.kernarg_address), ([1000, 1, 1], [256, 1, 1], 0x5000));
    }

    #[test]
    fn what_a_packet_waits_for_is_a_barrier_ands_signals_or_a_barrier_value_for_zero() {
        let mut and = [0u8; 64];
        and[0] = 3;
        and[8..16].copy_from_slice(&0xa0u64.to_le_bytes());
        and[24..32].copy_from_slice(&0xb0u64.to_le_bytes());
        assert_eq!(waits_for(&and), [0xa0, 0xb0]);
        let value = |value: i64, mask: u64, condition: u32| {
            let mut p = [0u8; 64];
            p[2] = AMD_BARRIER_VALUE;
            p[8..16].copy_from_slice(&0xc0u64.to_le_bytes());
            p[16..24].copy_from_slice(&value.to_le_bytes());
            p[24..32].copy_from_slice(&mask.to_le_bytes());
            p[32..36].copy_from_slice(&condition.to_le_bytes());
            waits_for(&p)
        };
        assert_eq!(value(0, u64::MAX, CONDITION_EQUAL), [0xc0]);
        assert_eq!(value(1, u64::MAX, CONDITION_LESS), [0xc0]);
        assert!(value(5, u64::MAX, CONDITION_EQUAL).is_empty(), "not completion");
        assert!(value(0, 0, CONDITION_EQUAL).is_empty(), "HIP's markers: mask 0");
        assert!(waits_for(&a_dispatch()).is_empty());
    }

    #[test]
    fn a_dispatch_without_a_signal_needs_no_barrier() {
        let mut original = a_dispatch();
        original[56..64].fill(0);
        let collect =
            CollectKernel { executable: 0xe000, kernel_object: 0xc000, private_segment_size: 0, group_segment_size: 0 };
        assert_eq!(observed(&original, collect, 0x4000, 0xd0).len(), 2);
    }
}
