//! The kernel driver's side of `/dev/kfd`: what each ioctl does to the
//! emulated device's state (buffers, events, queues, apertures, clocks).
//! Arguments are the bytes the caller passed; memory they point to is read
//! and written through [`ProcessMemory`]; mappings the front end must make
//! are answered by [`Kfd::resolve_mmap`].

pub mod abi;
pub mod svm;

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytemuck::Pod;

use crate::model::Model;
use crate::topology::GPU_ID;

/// A failed ioctl: the errno the caller sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    pub const NOENT: Errno = Errno(2);
    pub const NOMEM: Errno = Errno(12);
    pub const FAULT: Errno = Errno(14);
    pub const INVAL: Errno = Errno(22);
    pub const NOTTY: Errno = Errno(25);
    pub const ADDRINUSE: Errno = Errno(98);
}

/// The process's memory, as the front end reaches it.
pub trait ProcessMemory {
    /// Reads what may not be mapped (an access there fails, `FAULT`).
    fn read(&self, address: u64, out: &mut [u8]) -> Result<(), Errno>;
    fn write(&self, address: u64, data: &[u8]) -> Result<(), Errno>;
    /// Reads memory the driver knows is there (device buffers, registered
    /// host memory, scratch): no checks, as fast as a copy.
    fn read_mapped(&self, address: u64, out: &mut [u8]) -> Result<(), Errno> {
        self.read(address, out)
    }
    fn write_mapped(&self, address: u64, data: &[u8]) -> Result<(), Errno> {
        self.write(address, data)
    }
}

/// LDS and scratch apertures of GFX9 (flat addresses), 4 GiB each.
pub const LDS_APERTURE: u64 = 1 << 48;
pub const SCRATCH_APERTURE: u64 = 2 << 48;
const APERTURE_LIMIT: u64 = 0xffff_ffff;
/// The GPU's virtual address range: the kernel driver's SVM_USER_BASE up
/// to the host's 47-bit user space.
pub const GPUVM_BASE: u64 = 0x1_0000_0000;
pub const GPUVM_LIMIT: u64 = (1 << 47) - 1;
/// Doorbells: 8 KiB per process and device, 64-bit each.
pub const DOORBELL_PAGE_BYTES: u64 = 8192;
/// The GPU clock's rate (the emulator's clock is the host's).
pub const CLOCK_HZ: u64 = 100_000_000;

/// Memory a buffer object refers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backing {
    /// Device or GTT memory: the front end backs it with memory it can map
    /// at any address (several times: ROCr maps AQL rings twice).
    Memory,
    /// The caller's own memory at `va` (hsaKmtRegisterMemory).
    UserPointer,
    /// The process's doorbell page.
    Doorbells,
    /// Registers the runtime may map (HDP flush); plain memory here.
    Registers,
}

#[derive(Clone, Debug)]
pub struct Buffer {
    /// The GPU's address of the buffer.
    pub va: u64,
    /// For user pointers: where the host's pages are. The thunk may give
    /// registered host memory a GPU address of its own (ROCr 5.2 does on
    /// dGPUs), so kernels see it at `va` and the host at this address.
    pub host_address: Option<u64>,
    pub size: u64,
    pub flags: u32,
    pub backing: Backing,
    pub mmap_offset: u64,
    pub mapped_to_gpu: bool,
}

#[derive(Clone, Debug, Default)]
struct Event {
    auto_reset: bool,
    signalled: bool,
}

/// An AQL queue as the runtime created it.
#[derive(Clone, Debug)]
pub struct Queue {
    pub id: u32,
    pub ring_base: u64,
    pub ring_bytes: u32,
    pub read_pointer: u64,
    pub write_pointer: u64,
    /// Byte offset of its doorbell in the doorbell page.
    pub doorbell_index: u64,
    pub context_save_area: u64,
}

/// What a mapping of `/dev/kfd` or the render node at some offset is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MmapTarget {
    /// Buffer `handle`, from byte `offset` of it.
    Buffer {
        handle: u64,
        offset: u64,
    },
    Doorbells,
}

#[derive(Debug, Default)]
pub struct State {
    buffers: BTreeMap<u64, Buffer>,
    next_handle: u64,
    events: BTreeMap<u32, Event>,
    /// The events page (a buffer the thunk allocated): slot i is event i's.
    events_page: Option<u64>,
    queues: BTreeMap<u32, Queue>,
    /// The queue the command processor is working on ([`Kfd::take_queue`]):
    /// destroying or moving it waits until it lets go.
    serving: Option<u32>,
    /// Where the doorbell page is mapped, once it is.
    pub doorbell_page: Option<u64>,
    pub scratch_backing: Option<u64>,
    pub trap_handler: Option<(u64, u64)>,
    pub vm_acquired: bool,
    svm: svm::SvmRanges,
}

impl State {
    /// Bytes of device memory and of every host-backed buffer allocated.
    pub fn memory_in_use(&self) -> (u64, u64) {
        let backed = self.buffers.values().filter(|b| b.backing == Backing::Memory);
        backed.fold((0, 0), |(device, all), b| {
            (device + if b.flags & abi::ALLOC_VRAM != 0 { b.size } else { 0 }, all + b.size)
        })
    }

    pub fn buffer(&self, handle: u64) -> Option<&Buffer> {
        self.buffers.get(&handle)
    }
    pub fn buffers(&self) -> impl Iterator<Item = &Buffer> {
        self.buffers.values()
    }
    /// Every buffer with its handle (unique for the process's life: a
    /// buffer freed and another allocated at its address differ).
    pub fn buffers_by_handle(&self) -> impl Iterator<Item = (u64, &Buffer)> {
        self.buffers.iter().map(|(handle, buffer)| (*handle, buffer))
    }
    pub fn queues(&self) -> impl Iterator<Item = &Queue> {
        self.queues.values()
    }
    pub fn events_page(&self) -> Option<u64> {
        self.events_page
    }
    /// The shared-virtual-memory ranges the GPU reaches at their host
    /// addresses: (start, end).
    pub fn svm_accessible(&self) -> Vec<(u64, u64)> {
        self.svm.accessible()
    }
}

/// The device behind `/dev/kfd`: one GPU node.
pub struct Kfd {
    pub model: Model,
    state: Mutex<State>,
    /// Woken whenever an event is signalled.
    signalled: Condvar,
    /// Woken whenever the command processor lets go of a queue.
    queue_released: Condvar,
    started: Instant,
}

fn read<T: Pod>(args: &[u8]) -> Result<T, Errno> {
    if args.len() < std::mem::size_of::<T>() {
        return Err(Errno::INVAL);
    }
    Ok(bytemuck::pod_read_unaligned(&args[..std::mem::size_of::<T>()]))
}

fn write<T: Pod>(args: &mut [u8], value: &T) {
    let bytes = bytemuck::bytes_of(value);
    args[..bytes.len()].copy_from_slice(bytes);
}

impl Kfd {
    pub fn new(model: Model) -> Kfd {
        Kfd {
            model,
            state: Mutex::new(State { next_handle: 1, ..State::default() }),
            signalled: Condvar::new(),
            queue_released: Condvar::new(),
            started: Instant::now(),
        }
    }

    /// The GPU's clock: ticks at [`CLOCK_HZ`] since the device started.
    pub fn gpu_clock(&self) -> u64 {
        (self.started.elapsed().as_nanos() as u64) / (1_000_000_000 / CLOCK_HZ)
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The command processor takes queue `id` to work on: the queue as it
    /// is now (its ring may have moved since the command processor listed
    /// the queues), or none once the runtime destroyed it. Until
    /// [`Kfd::release_queue`], destroying or moving it waits, as the
    /// kernel driver unmaps a queue from the hardware before it returns:
    /// the runtime frees a destroyed queue's ring at once.
    pub fn take_queue(&self, id: u32) -> Option<Queue> {
        let mut state = self.state();
        let queue = state.queues.get(&id).cloned()?;
        state.serving = Some(id);
        Some(queue)
    }

    /// The command processor is done with the queue it took.
    pub fn release_queue(&self) {
        self.state().serving = None;
        self.queue_released.notify_all();
    }

    /// The state, once the command processor is not working on queue `id`.
    fn state_without_serving(&self, id: u32) -> MutexGuard<'_, State> {
        let mut state = self.state();
        while state.serving == Some(id) {
            state = self.queue_released.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state
    }

    /// Runs one ioctl on `/dev/kfd`: `args` holds the argument structure's
    /// bytes and is updated in place.
    pub fn ioctl(&self, request: u64, args: &mut [u8], memory: &dyn ProcessMemory) -> Result<(), Errno> {
        let (number, kind, size) = abi::request_parts(request);
        if kind != abi::IOCTL_TYPE || args.len() < size {
            return Err(Errno::NOTTY);
        }
        match number {
            abi::GET_VERSION => {
                write(args, &abi::GetVersion { major_version: abi::MAJOR_VERSION, minor_version: abi::MINOR_VERSION });
                Ok(())
            }
            abi::GET_PROCESS_APERTURES_NEW => self.apertures(args, memory),
            abi::ACQUIRE_VM => {
                let acquire: abi::AcquireVm = read(args)?;
                check_gpu(acquire.gpu_id)?;
                self.state().vm_acquired = true;
                Ok(())
            }
            abi::SET_MEMORY_POLICY => check_gpu(read::<abi::SetMemoryPolicy>(args)?.gpu_id),
            abi::GET_CLOCK_COUNTERS => {
                let mut clocks: abi::GetClockCounters = read(args)?;
                let elapsed = self.started.elapsed();
                clocks.gpu_clock_counter = self.gpu_clock();
                clocks.cpu_clock_counter = elapsed.as_nanos() as u64;
                clocks.system_clock_counter = elapsed.as_nanos() as u64;
                clocks.system_clock_frequency = 1_000_000_000;
                write(args, &clocks);
                Ok(())
            }
            abi::GET_TILE_CONFIG => {
                let mut tiles: abi::GetTileConfig = read(args)?;
                check_gpu(tiles.gpu_id)?;
                // GFX9 has no tiling tables: none, and the address config.
                tiles.tile_config_count = 0;
                tiles.macro_tile_config_count = 0;
                tiles.gb_addr_config = 0x2a114042;
                tiles.bank_count = 0;
                tiles.rank_count = 0;
                write(args, &tiles);
                Ok(())
            }
            abi::SET_SCRATCH_BACKING_VA => {
                let scratch: abi::SetScratchBackingVa = read(args)?;
                self.state().scratch_backing = Some(scratch.va_addr);
                Ok(())
            }
            abi::SET_TRAP_HANDLER => {
                let trap: abi::SetTrapHandler = read(args)?;
                self.state().trap_handler = Some((trap.tba_addr, trap.tma_addr));
                Ok(())
            }
            abi::SET_XNACK_MODE => {
                // XNACK (retrying page faults) stays off: memory is always resident.
                let mode: abi::SetXnackMode = read(args)?;
                if mode.xnack_enabled > 0 {
                    return Err(Errno::INVAL);
                }
                write(args, &abi::SetXnackMode { xnack_enabled: 0 });
                Ok(())
            }
            abi::ALLOC_MEMORY_OF_GPU => self.allocate(args),
            abi::AVAILABLE_MEMORY => {
                // Device memory not yet allocated (ROCr 5.7 sizes scratch by it).
                let mut available: abi::AvailableMemory = read(args)?;
                check_gpu(available.gpu_id)?;
                let state = self.state();
                let (device, backed) = state.memory_in_use();
                available.available = self
                    .model
                    .memory_bytes
                    .saturating_sub(device)
                    .min(self.model.backable_bytes.saturating_sub(backed));
                drop(state);
                write(args, &available);
                Ok(())
            }
            abi::FREE_MEMORY_OF_GPU => {
                let free: abi::FreeMemory = read(args)?;
                self.state().buffers.remove(&free.handle).map(|_| ()).ok_or(Errno::INVAL)
            }
            abi::MAP_MEMORY_TO_GPU | abi::UNMAP_MEMORY_FROM_GPU => {
                let mut map: abi::MapMemory = read(args)?;
                let mut state = self.state();
                let buffer = state.buffers.get_mut(&map.handle).ok_or(Errno::INVAL)?;
                buffer.mapped_to_gpu = number == abi::MAP_MEMORY_TO_GPU;
                map.success_count = map.device_count;
                write(args, &map);
                Ok(())
            }
            abi::CREATE_EVENT => self.create_event(args),
            abi::DESTROY_EVENT => {
                let event: abi::EventId = read(args)?;
                self.state().events.remove(&event.event_id).map(|_| ()).ok_or(Errno::INVAL)
            }
            abi::SET_EVENT => {
                let event: abi::EventId = read(args)?;
                self.signal(event.event_id).then_some(()).ok_or(Errno::INVAL)
            }
            abi::RESET_EVENT => {
                let event: abi::EventId = read(args)?;
                let mut state = self.state();
                state.events.get_mut(&event.event_id).ok_or(Errno::INVAL)?.signalled = false;
                Ok(())
            }
            abi::WAIT_EVENTS => self.wait_events(args, memory),
            abi::CREATE_QUEUE => self.create_queue(args),
            abi::DESTROY_QUEUE => {
                let queue: abi::QueueId = read(args)?;
                self.state_without_serving(queue.queue_id)
                    .queues
                    .remove(&queue.queue_id)
                    .map(|_| ())
                    .ok_or(Errno::INVAL)
            }
            abi::UPDATE_QUEUE => {
                let update: abi::UpdateQueue = read(args)?;
                let mut state = self.state_without_serving(update.queue_id);
                let queue = state.queues.get_mut(&update.queue_id).ok_or(Errno::INVAL)?;
                queue.ring_base = update.ring_base_address;
                queue.ring_bytes = update.ring_size;
                Ok(())
            }
            abi::SET_CU_MASK => Ok(()),
            abi::SVM => self.svm(args),
            _ => Err(Errno::INVAL),
        }
    }

    fn apertures(&self, args: &mut [u8], memory: &dyn ProcessMemory) -> Result<(), Errno> {
        let mut request: abi::GetProcessAperturesNew = read(args)?;
        if request.node_count == 0 {
            // The caller asks how many.
            request.node_count = 1;
            write(args, &request);
            return Ok(());
        }
        let aperture = abi::ProcessDeviceApertures {
            lds_base: LDS_APERTURE,
            lds_limit: LDS_APERTURE | APERTURE_LIMIT,
            scratch_base: SCRATCH_APERTURE,
            scratch_limit: SCRATCH_APERTURE | APERTURE_LIMIT,
            gpuvm_base: GPUVM_BASE,
            gpuvm_limit: GPUVM_LIMIT,
            gpu_id: GPU_ID,
            pad: 0,
        };
        memory.write(request.apertures_pointer, bytemuck::bytes_of(&aperture))?;
        request.node_count = 1;
        write(args, &request);
        Ok(())
    }

    fn allocate(&self, args: &mut [u8]) -> Result<(), Errno> {
        let mut allocation: abi::AllocMemory = read(args)?;
        check_gpu(allocation.gpu_id)?;
        if allocation.size == 0 {
            return Err(Errno::INVAL);
        }
        let backing = if allocation.flags & abi::ALLOC_USERPTR != 0 {
            Backing::UserPointer
        } else if allocation.flags & abi::ALLOC_DOORBELL != 0 {
            Backing::Doorbells
        } else if allocation.flags & abi::ALLOC_MMIO_REMAP != 0 {
            Backing::Registers
        } else if allocation.flags & (abi::ALLOC_VRAM | abi::ALLOC_GTT) != 0 {
            Backing::Memory
        } else {
            return Err(Errno::INVAL);
        };
        let mut state = self.state();
        if backing == Backing::Memory {
            // Device memory within the model's, everything the host backs
            // within what it can: past either, ROCr reports out of memory.
            let vram = allocation.flags & abi::ALLOC_VRAM != 0;
            let (device, backed) = state.memory_in_use();
            if (vram && device.saturating_add(allocation.size) > self.model.memory_bytes)
                || backed.saturating_add(allocation.size) > self.model.backable_bytes
            {
                return Err(Errno::NOMEM);
            }
        }
        let handle = (u64::from(GPU_ID) << 32) | state.next_handle;
        state.next_handle += 1;
        if allocation.va_addr != 0 {
            // Memory an SVM range had was unmapped before the runtime
            // could put a buffer there.
            state.svm.remove(allocation.va_addr, allocation.va_addr.saturating_add(allocation.size));
        }
        // Buffers are mapped through the render node at an offset naming them.
        let mmap_offset = match backing {
            Backing::Doorbells => abi::MMAP_TYPE_DOORBELL | (u64::from(GPU_ID) << abi::MMAP_GPU_ID_SHIFT),
            _ => (handle & 0xffff_ffff) << 32,
        };
        state.buffers.insert(
            handle,
            Buffer {
                va: allocation.va_addr,
                size: allocation.size,
                flags: allocation.flags,
                backing: backing.clone(),
                host_address: (backing == Backing::UserPointer).then_some(allocation.mmap_offset),
                mmap_offset,
                mapped_to_gpu: false,
            },
        );
        allocation.handle = handle;
        if backing != Backing::UserPointer {
            allocation.mmap_offset = mmap_offset;
        }
        write(args, &allocation);
        Ok(())
    }

    /// `AMDKFD_IOC_SVM`: sets or gets the attributes of the pages in
    /// [start, start + size) (addresses in whole pages, as the kernel
    /// driver takes them). A set over a buffer object's addresses is
    /// refused (EADDRINUSE), as the kernel driver refuses it.
    fn svm(&self, args: &mut [u8]) -> Result<(), Errno> {
        const PAGE_SHIFT: u32 = 12;
        let header: abi::SvmArgs = read(args)?;
        let head = std::mem::size_of::<abi::SvmArgs>();
        let size = std::mem::size_of::<abi::SvmAttribute>();
        let end_of_attributes = (header.nattr as usize).checked_mul(size).and_then(|n| n.checked_add(head));
        let end_of_attributes = end_of_attributes.filter(|&n| n <= args.len()).ok_or(Errno::INVAL)?;
        let (first_page, pages) = (header.start_addr >> PAGE_SHIFT, header.size >> PAGE_SHIFT);
        if first_page == 0 || pages == 0 {
            return Err(Errno::INVAL);
        }
        let start = first_page << PAGE_SHIFT;
        let end = first_page.checked_add(pages).filter(|&p| p <= GPUVM_LIMIT >> PAGE_SHIFT).ok_or(Errno::INVAL)?
            << PAGE_SHIFT;
        let mut attributes: Vec<abi::SvmAttribute> =
            args[head..end_of_attributes].chunks_exact(size).map(bytemuck::pod_read_unaligned).collect();
        let mut state = self.state();
        match header.op {
            abi::SVM_OP_SET_ATTR => {
                let over_a_buffer = state.buffers.values().any(|b| {
                    matches!(b.backing, Backing::Memory | Backing::UserPointer)
                        && b.va != 0
                        && b.va < end
                        && start < b.va.saturating_add(b.size)
                });
                if over_a_buffer {
                    return Err(Errno::ADDRINUSE);
                }
                state.svm.set(start, end, &attributes)
            }
            abi::SVM_OP_GET_ATTR => {
                state.svm.get(start, end, &mut attributes)?;
                args[head..end_of_attributes].copy_from_slice(bytemuck::cast_slice(&attributes));
                Ok(())
            }
            _ => Err(Errno::INVAL),
        }
    }

    /// What mapping `offset` of `/dev/kfd` or the render node shows.
    pub fn resolve_mmap(&self, offset: u64) -> Option<MmapTarget> {
        if offset & (3 << abi::MMAP_TYPE_SHIFT) == abi::MMAP_TYPE_DOORBELL {
            return Some(MmapTarget::Doorbells);
        }
        let state = self.state();
        state.buffers.iter().find_map(|(handle, buffer)| {
            let start = buffer.mmap_offset;
            (buffer.backing != Backing::Doorbells && offset >= start && offset < start + buffer.size)
                .then(|| MmapTarget::Buffer { handle: *handle, offset: offset - start })
        })
    }

    fn create_event(&self, args: &mut [u8]) -> Result<(), Errno> {
        let mut event: abi::CreateEvent = read(args)?;
        let mut state = self.state();
        if state.events_page.is_none() && event.event_page_offset != 0 {
            // With its first event of any type, the thunk passes the handle
            // of the events page it allocated.
            let page = state.buffers.get(&event.event_page_offset).ok_or(Errno::INVAL)?;
            state.events_page = Some(page.va);
        }
        if event.event_type == abi::EVENT_SIGNAL && state.events_page.is_none() {
            return Err(Errno::INVAL);
        }
        let id = (1..abi::SIGNAL_EVENT_LIMIT).find(|id| !state.events.contains_key(id)).ok_or(Errno::NOMEM)?;
        state.events.insert(id, Event { auto_reset: event.auto_reset != 0, signalled: false });
        event.event_id = id;
        event.event_trigger_data = id;
        event.event_slot_index = id;
        event.event_page_offset = abi::MMAP_TYPE_EVENTS;
        write(args, &event);
        Ok(())
    }

    /// Signals event `id` (SET_EVENT, or an interrupt from the command
    /// processor or a kernel's `s_sendmsg`); false if there is no such event.
    pub fn signal(&self, id: u32) -> bool {
        let mut state = self.state();
        let Some(event) = state.events.get_mut(&id) else { return false };
        event.signalled = true;
        drop(state);
        self.signalled.notify_all();
        true
    }

    fn wait_events(&self, args: &mut [u8], memory: &dyn ProcessMemory) -> Result<(), Errno> {
        let mut wait: abi::WaitEvents = read(args)?;
        let size = std::mem::size_of::<abi::EventData>();
        let mut ids = Vec::with_capacity(wait.event_count as usize);
        for i in 0..u64::from(wait.event_count) {
            let mut bytes = vec![0; size];
            memory.read(wait.events_pointer + i * size as u64, &mut bytes)?;
            ids.push(read::<abi::EventData>(&bytes)?.event_id);
        }
        let deadline = Instant::now() + Duration::from_millis(u64::from(wait.timeout_ms));
        let mut state = self.state();
        loop {
            if ids.iter().any(|id| !state.events.contains_key(id)) {
                return Err(Errno::INVAL);
            }
            let ready = |id: &u32| state.events[id].signalled;
            let done = if wait.wait_for_all != 0 { ids.iter().all(ready) } else { ids.iter().any(ready) };
            if done {
                for id in &ids {
                    let event = state.events.get_mut(id).expect("checked");
                    if event.signalled && event.auto_reset {
                        event.signalled = false;
                    }
                }
                wait.wait_result = abi::WAIT_COMPLETE;
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                wait.wait_result = abi::WAIT_TIMEOUT;
                break;
            }
            state = self.signalled.wait_timeout(state, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
        drop(state);
        write(args, &wait);
        Ok(())
    }

    fn create_queue(&self, args: &mut [u8]) -> Result<(), Errno> {
        let mut request: abi::CreateQueue = read(args)?;
        check_gpu(request.gpu_id)?;
        if request.queue_type != abi::QUEUE_TYPE_COMPUTE_AQL {
            return Err(Errno::INVAL);
        }
        let mut state = self.state();
        let id = (0..DOORBELL_PAGE_BYTES as u32 / 8).find(|id| !state.queues.contains_key(id)).ok_or(Errno::NOMEM)?;
        let doorbell_index = u64::from(id) * 8;
        request.queue_id = id;
        request.doorbell_offset =
            abi::MMAP_TYPE_DOORBELL | (u64::from(GPU_ID) << abi::MMAP_GPU_ID_SHIFT) | doorbell_index;
        state.queues.insert(
            id,
            Queue {
                id,
                ring_base: request.ring_base_address,
                ring_bytes: request.ring_size,
                read_pointer: request.read_pointer_address,
                write_pointer: request.write_pointer_address,
                doorbell_index,
                context_save_area: request.ctx_save_restore_address,
            },
        );
        write(args, &request);
        Ok(())
    }
}

fn check_gpu(gpu_id: u32) -> Result<(), Errno> {
    (gpu_id == GPU_ID).then_some(()).ok_or(Errno::INVAL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Target;

    /// 4 KiB of "process memory" at 0x1000.
    use crate::test_memory::TestMemory as Scratch;
    const BASE: u64 = 0x1000;

    /// `_IOWR('K', number, T)`.
    fn request<T>(number: u8) -> u64 {
        (3 << 30) | ((std::mem::size_of::<T>() as u64) << 16) | (u64::from(b'K') << 8) | u64::from(number)
    }

    fn call<T: Pod>(kfd: &Kfd, number: u8, args: T, memory: &Scratch) -> Result<T, Errno> {
        let mut bytes = bytemuck::bytes_of(&args).to_vec();
        kfd.ioctl(request::<T>(number), &mut bytes, memory)?;
        Ok(bytemuck::pod_read_unaligned(&bytes))
    }

    #[test]
    fn version_apertures_and_buffers() {
        let kfd = Kfd::new(Model::new(Target::Gfx90a));
        let memory = Scratch::new(BASE, 4096);
        let version = call(&kfd, abi::GET_VERSION, abi::GetVersion::default(), &memory).unwrap();
        assert_eq!((version.major_version, version.minor_version), (1, 11));

        let apertures = abi::GetProcessAperturesNew { apertures_pointer: BASE, node_count: 4, pad: 0 };
        assert_eq!(call(&kfd, abi::GET_PROCESS_APERTURES_NEW, apertures, &memory).unwrap().node_count, 1);
        let written: abi::ProcessDeviceApertures = bytemuck::pod_read_unaligned(
            &memory.bytes.lock().unwrap()[..std::mem::size_of::<abi::ProcessDeviceApertures>()],
        );
        assert_eq!(
            (written.gpu_id, written.lds_base, written.scratch_limit),
            (GPU_ID, 1 << 48, (2 << 48) | 0xffff_ffff)
        );

        let vram = abi::AllocMemory {
            va_addr: 0x7000_0000,
            size: 0x2000,
            gpu_id: GPU_ID,
            flags: abi::ALLOC_VRAM,
            ..Default::default()
        };
        let allocated = call(&kfd, abi::ALLOC_MEMORY_OF_GPU, vram, &memory).unwrap();
        assert_eq!(
            kfd.resolve_mmap(allocated.mmap_offset + 0x1000),
            Some(MmapTarget::Buffer { handle: allocated.handle, offset: 0x1000 })
        );
        assert_eq!(kfd.resolve_mmap(allocated.mmap_offset + 0x2000), None, "past its end");
        let available = abi::AvailableMemory { gpu_id: GPU_ID, ..Default::default() };
        let available = call(&kfd, abi::AVAILABLE_MEMORY, available, &memory).unwrap().available;
        assert_eq!(available, (16 << 30) - 0x2000, "16 GiB less the buffer");
        let wrong_gpu = abi::AllocMemory { gpu_id: 7, ..vram };
        assert_eq!(call(&kfd, abi::ALLOC_MEMORY_OF_GPU, wrong_gpu, &memory).err(), Some(Errno::INVAL));
        let huge = abi::AllocMemory { size: 1 << 40, ..vram };
        assert_eq!(call(&kfd, abi::ALLOC_MEMORY_OF_GPU, huge, &memory).err(), Some(Errno::NOMEM));
        call(&kfd, abi::FREE_MEMORY_OF_GPU, abi::FreeMemory { handle: allocated.handle }, &memory).unwrap();
        assert_eq!(kfd.resolve_mmap(allocated.mmap_offset), None);
        assert_eq!(kfd.ioctl(request::<abi::GetVersion>(0x7f), &mut [0; 8], &memory), Err(Errno::INVAL));
    }

    /// Allocations add up: device memory past the model's, or host-backed
    /// buffers past what the host backs, are refused until some are freed.
    /// AMDKFD_IOC_SVM as the thunk sends it: attributes after the header,
    /// counted in the request's size; a get answers in place; a set over a
    /// buffer object is refused; a buffer allocated over a range ends it.
    #[test]
    fn svm_ranges_are_set_read_back_and_give_way_to_buffers() {
        let kfd = Kfd::new(Model::new(Target::Gfx942));
        let memory = Scratch::new(BASE, 4096);
        let svm = |start: u64, size: u64, op: u32, attributes: &[abi::SvmAttribute]| {
            let header = abi::SvmArgs { start_addr: start, size, op, nattr: attributes.len() as u32 };
            let mut bytes = bytemuck::bytes_of(&header).to_vec();
            bytes.extend_from_slice(bytemuck::cast_slice(attributes));
            let request = (3 << 30) | ((bytes.len() as u64) << 16) | (u64::from(b'K') << 8) | u64::from(abi::SVM);
            kfd.ioctl(request, &mut bytes, &memory)?;
            Ok::<_, Errno>(
                bytes[24..].chunks_exact(8).map(bytemuck::pod_read_unaligned).collect::<Vec<abi::SvmAttribute>>(),
            )
        };
        let access = abi::SvmAttribute { kind: abi::SVM_ATTR_ACCESS, value: GPU_ID };
        svm(0x5000_0000, 0x4000, abi::SVM_OP_SET_ATTR, &[access]).unwrap();
        assert_eq!(kfd.state().svm_accessible(), vec![(0x5000_0000, 0x5000_4000)]);
        let answered = svm(0x5000_1000, 0x1000, abi::SVM_OP_GET_ATTR, &[access]).unwrap();
        assert_eq!(answered, vec![access]);
        assert_eq!(svm(0, 0x1000, abi::SVM_OP_SET_ATTR, &[access]).err(), Some(Errno::INVAL));
        assert_eq!(svm(0x5000_0000, 0x1000, 2, &[access]).err(), Some(Errno::INVAL));

        let vram = abi::AllocMemory {
            va_addr: 0x7000_0000,
            size: 0x2000,
            gpu_id: GPU_ID,
            flags: abi::ALLOC_VRAM,
            ..Default::default()
        };
        call(&kfd, abi::ALLOC_MEMORY_OF_GPU, vram, &memory).unwrap();
        assert_eq!(svm(0x7000_1000, 0x1000, abi::SVM_OP_SET_ATTR, &[access]).err(), Some(Errno::ADDRINUSE));
        let over_the_range = abi::AllocMemory { va_addr: 0x5000_2000, ..vram };
        call(&kfd, abi::ALLOC_MEMORY_OF_GPU, over_the_range, &memory).unwrap();
        assert_eq!(kfd.state().svm_accessible(), vec![(0x5000_0000, 0x5000_2000)]);
    }

    #[test]
    fn memory_past_the_model_or_the_host_is_refused() {
        const MIB: u64 = 1 << 20;
        let model = Model { memory_bytes: 512 * MIB, backable_bytes: 768 * MIB, ..Model::new(Target::Gfx90a) };
        let kfd = Kfd::new(model);
        let memory = Scratch::new(BASE, 4096);
        let allocate = |flags: u32, size: u64| {
            let request = abi::AllocMemory { va_addr: 0x7000_0000, size, gpu_id: GPU_ID, flags, ..Default::default() };
            call(&kfd, abi::ALLOC_MEMORY_OF_GPU, request, &memory)
        };
        let available = || {
            let request = abi::AvailableMemory { gpu_id: GPU_ID, ..Default::default() };
            call(&kfd, abi::AVAILABLE_MEMORY, request, &memory).unwrap().available
        };
        let first = allocate(abi::ALLOC_VRAM, 256 * MIB).unwrap();
        allocate(abi::ALLOC_VRAM, 256 * MIB).unwrap();
        assert_eq!(available(), 0);
        assert_eq!(allocate(abi::ALLOC_VRAM, MIB).err(), Some(Errno::NOMEM), "past the model's memory");
        // System memory counts against what the host backs.
        let system = allocate(abi::ALLOC_GTT, 256 * MIB).unwrap();
        assert_eq!(allocate(abi::ALLOC_GTT, MIB).err(), Some(Errno::NOMEM), "past what the host backs");
        call(&kfd, abi::FREE_MEMORY_OF_GPU, abi::FreeMemory { handle: system.handle }, &memory).unwrap();
        call(&kfd, abi::FREE_MEMORY_OF_GPU, abi::FreeMemory { handle: first.handle }, &memory).unwrap();
        assert_eq!(available(), 256 * MIB);
        allocate(abi::ALLOC_VRAM, 256 * MIB).unwrap();
        // Doorbells and user pointers are not host memory the device backs.
        allocate(abi::ALLOC_USERPTR, 1 << 40).unwrap();
    }

    #[test]
    fn events_wait_until_signalled_or_time_out() {
        let kfd = Kfd::new(Model::new(Target::Gfx90a));
        let memory = Scratch::new(BASE, 4096);
        let page = abi::AllocMemory {
            va_addr: 0x9000,
            size: 0x8000,
            gpu_id: GPU_ID,
            flags: abi::ALLOC_GTT,
            ..Default::default()
        };
        let page = call(&kfd, abi::ALLOC_MEMORY_OF_GPU, page, &memory).unwrap();
        let create = abi::CreateEvent { event_page_offset: page.handle, auto_reset: 1, ..Default::default() };
        let event = call(&kfd, abi::CREATE_EVENT, create, &memory).unwrap();
        assert_eq!(kfd.state().events_page(), Some(0x9000));
        let data = abi::EventData { event_id: event.event_id, ..Default::default() };
        memory.write(BASE, bytemuck::bytes_of(&data)).unwrap();
        let wait =
            abi::WaitEvents { events_pointer: BASE, event_count: 1, wait_for_all: 1, timeout_ms: 10, wait_result: 9 };
        assert_eq!(call(&kfd, abi::WAIT_EVENTS, wait, &memory).unwrap().wait_result, abi::WAIT_TIMEOUT);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                assert!(kfd.signal(event.event_id));
            });
            let long = abi::WaitEvents { timeout_ms: 10_000, ..wait };
            assert_eq!(call(&kfd, abi::WAIT_EVENTS, long, &memory).unwrap().wait_result, abi::WAIT_COMPLETE);
        });
        // Auto-reset: the wait consumed the signal.
        assert_eq!(call(&kfd, abi::WAIT_EVENTS, wait, &memory).unwrap().wait_result, abi::WAIT_TIMEOUT);
        assert!(!kfd.signal(999));
    }

    #[test]
    fn queues_get_doorbells_in_the_doorbell_page() {
        let kfd = Kfd::new(Model::new(Target::Gfx90a));
        let memory = Scratch::new(BASE, 16);
        let create = abi::CreateQueue {
            ring_base_address: 0x10_0000,
            ring_size: 4096,
            gpu_id: GPU_ID,
            queue_type: abi::QUEUE_TYPE_COMPUTE_AQL,
            ..Default::default()
        };
        let first = call(&kfd, abi::CREATE_QUEUE, create, &memory).unwrap();
        let second = call(&kfd, abi::CREATE_QUEUE, create, &memory).unwrap();
        assert_ne!(first.queue_id, second.queue_id);
        assert_eq!(second.doorbell_offset - first.doorbell_offset, 8);
        assert_eq!(kfd.resolve_mmap(first.doorbell_offset & !(DOORBELL_PAGE_BYTES - 1)), Some(MmapTarget::Doorbells));
        let sdma = abi::CreateQueue { queue_type: 1, ..create };
        assert_eq!(call(&kfd, abi::CREATE_QUEUE, sdma, &memory).err(), Some(Errno::INVAL));
        assert_eq!(kfd.state().queues().count(), 2);
    }

    /// A queue destroyed while the command processor works on it (a
    /// program destroying a stream while the GPU is busy, as HeCBench's
    /// lfib4 does) goes only once the command processor lets go, and a
    /// queue destroyed after it listed the queues is not handed to it: it
    /// never reads a ring the runtime has freed.
    #[test]
    fn a_queue_is_destroyed_only_when_the_command_processor_lets_go() {
        let kfd: &'static Kfd = Box::leak(Box::new(Kfd::new(Model::new(Target::Gfx90a))));
        let memory = Scratch::new(BASE, 16);
        let create = abi::CreateQueue {
            ring_base_address: 0x10_0000,
            ring_size: 4096,
            gpu_id: GPU_ID,
            queue_type: abi::QUEUE_TYPE_COMPUTE_AQL,
            ..Default::default()
        };
        let queue = call(kfd, abi::CREATE_QUEUE, create, &memory).unwrap().queue_id;
        let taken = kfd.take_queue(queue).expect("the queue");
        assert_eq!(taken.ring_base, 0x10_0000);
        let destroying = std::thread::spawn(move || {
            let memory = Scratch::new(BASE, 16);
            call(kfd, abi::DESTROY_QUEUE, abi::QueueId { queue_id: queue, ..Default::default() }, &memory).unwrap();
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!destroying.is_finished(), "the destroy waits for the command processor");
        assert_eq!(kfd.state().queues().count(), 1);
        kfd.release_queue();
        destroying.join().unwrap();
        assert_eq!(kfd.state().queues().count(), 0);
        assert!(kfd.take_queue(queue).is_none(), "a destroyed queue is not handed out");
    }
}
