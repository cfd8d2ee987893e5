//! The process's memory as the device sees it, and mappings of the
//! device's files: buffers are memfds (so the runtime can map one twice,
//! as it does AQL rings), the doorbell page is plain shared memory.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

use gpuinstr_device::kfd::abi;
use gpuinstr_device::{DeviceNode, Errno, Kfd, MmapTarget, ProcessMemory};

use crate::{real, set_errno, trace};

/// The process's own address space.
pub struct Process;

impl ProcessMemory for Process {
    /// Through `process_vm_readv` on ourselves: unmapped or protected
    /// memory is an error, not a crash.
    fn read(&self, address: u64, out: &mut [u8]) -> Result<(), Errno> {
        let local = libc::iovec { iov_base: out.as_mut_ptr().cast(), iov_len: out.len() };
        let remote = libc::iovec { iov_base: address as *mut c_void, iov_len: out.len() };
        // SAFETY: the kernel checks the remote range; the local one is ours.
        let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
        (n == out.len() as isize).then_some(()).ok_or(Errno::FAULT)
    }

    fn write(&self, address: u64, data: &[u8]) -> Result<(), Errno> {
        let local = libc::iovec { iov_base: data.as_ptr() as *mut c_void, iov_len: data.len() };
        let remote = libc::iovec { iov_base: address as *mut c_void, iov_len: data.len() };
        // SAFETY: as for read.
        let n = unsafe { libc::process_vm_writev(libc::getpid(), &local, 1, &remote, 1, 0) };
        (n == data.len() as isize).then_some(()).ok_or(Errno::FAULT)
    }

    fn read_mapped(&self, address: u64, out: &mut [u8]) -> Result<(), Errno> {
        // SAFETY: the device mapped this memory readable and writable.
        unsafe { std::ptr::copy_nonoverlapping(address as *const u8, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    fn write_mapped(&self, address: u64, data: &[u8]) -> Result<(), Errno> {
        // SAFETY: as for read_mapped.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), address as *mut u8, data.len()) };
        Ok(())
    }
}

/// Each buffer's memfd, by handle.
static BACKING: Mutex<Option<HashMap<u64, c_int>>> = Mutex::new(None);

pub fn kfd_ioctl(kfd: &'static Kfd, request: u64, args: &mut [u8]) -> Result<(), Errno> {
    let (number, _, _) = abi::request_parts(request);
    if number == abi::CREATE_QUEUE {
        start_command_processor(kfd);
    }
    let freed = (number == abi::FREE_MEMORY_OF_GPU && args.len() >= 8)
        .then(|| u64::from_le_bytes(args[..8].try_into().expect("8 bytes")));
    kfd.ioctl(request, args, &Process)?;
    if number == abi::ALLOC_MEMORY_OF_GPU {
        let a: abi::AllocMemory = bytemuck::pod_read_unaligned(&args[..std::mem::size_of::<abi::AllocMemory>()]);
        trace!("alloc va {:#x} size {:#x} flags {:#x} handle {:#x}", a.va_addr, a.size, a.flags, a.handle);
        map_at_allocation(kfd, args)?;
    }
    if let Some(handle) = freed {
        if let Some(fd) = BACKING.lock().ok().and_then(|mut b| b.as_mut().and_then(|b| b.remove(&handle))) {
            // SAFETY: our own memfd; existing mappings keep its pages.
            unsafe { real::close(fd) };
        }
    }
    Ok(())
}

/// The command processor's thread, started with the first queue.
fn start_command_processor(kfd: &'static Kfd) {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let stop: gpuinstr_device::command_processor::Stop = Box::new(|message: &str| {
            eprintln!("gpuinstr-run: error: {message}");
            flush_program_output();
            report_the_stop(message);
            // SAFETY: ends the process at once; the runtime's threads wait
            // on a device that will never answer.
            unsafe { libc::_exit(1) }
        });
        let trace: gpuinstr_device::command_processor::Trace = crate::tracing().then(|| {
            Box::new(|message: &str| eprintln!("gpuinstr-device: {message}")) as Box<dyn Fn(&str) + Send + Sync>
        });
        let dispatch_log = std::env::var_os("GPUINSTR_DEVICE_DISPATCH_LOG").filter(|p| !p.is_empty()).map(|path| {
            let opened = std::fs::OpenOptions::new().create(true).append(true).open(&path);
            let file = match opened {
                Ok(file) => std::sync::Mutex::new(file),
                Err(error) => {
                    eprintln!("gpuinstr-run: error: cannot open the dispatch log {}: {error}", path.to_string_lossy());
                    // SAFETY: as for a stop: nothing can be logged as asked.
                    unsafe { libc::_exit(1) }
                }
            };
            let exec_history = std::env::var("GPUINSTR_DEVICE_DISPATCH_LOG_EXEC").unwrap_or_default();
            gpuinstr_device::command_processor::DispatchLogging {
                write: Box::new(move |line: &str| {
                    use std::io::Write;
                    if let Ok(mut file) = file.lock() {
                        let _ = writeln!(file, "{line}");
                    }
                }),
                exec_history: exec_history.split(',').filter(|o| !o.is_empty()).map(str::to_string).collect(),
                accesses: std::env::var_os("GPUINSTR_DEVICE_DISPATCH_LOG_ACCESSES").is_some_and(|v| v == "1"),
                digests: std::env::var_os("GPUINSTR_DEVICE_DISPATCH_LOG_DIGESTS").is_some_and(|v| v == "1"),
            }
        });
        let limit = instruction_limit();
        gpuinstr_device::command_processor::start(kfd, std::sync::Arc::new(Process), stop, trace, dispatch_log, limit);
    });
}

/// `GPUINSTR_DEVICE_MAX_INSTRUCTIONS` (`gpuinstr-run --max-instructions`),
/// else the emulator's default.
fn instruction_limit() -> gpuinstr_device::command_processor::InstructionLimit {
    let default = gpuinstr_device::command_processor::DEFAULT_MAX_INSTRUCTIONS;
    let given = std::env::var("GPUINSTR_DEVICE_MAX_INSTRUCTIONS").ok().filter(|v| !v.is_empty());
    let per_wave = match given.as_deref().map(str::parse::<u64>) {
        None => default,
        Some(Ok(limit)) if limit > 0 => limit,
        Some(_) => {
            eprintln!(
                "gpuinstr-run: error: GPUINSTR_DEVICE_MAX_INSTRUCTIONS={} is not a positive number of instructions",
                given.unwrap_or_default()
            );
            // SAFETY: nothing has run on the device yet; the process cannot run as asked.
            unsafe { libc::_exit(2) }
        }
    };
    let how_to_raise = format!("raise the limit of {per_wave} with gpuinstr-run --max-instructions N");
    gpuinstr_device::command_processor::InstructionLimit { per_wave, how_to_raise }
}

/// Writes out what the program printed and its C library still buffers
/// (stdout to a pipe or file holds up to 4 KiB), before the process ends
/// without running its exit handlers: a user keeps the program's own
/// messages up to the stop. On a thread of its own, waited for at most a
/// second: a program thread blocked while holding a stream's lock must not
/// keep the process from ending.
fn flush_program_output() {
    let (done, flushed) = std::sync::mpsc::channel();
    let flushing = std::thread::Builder::new().name("gpuinstr-flush".into()).spawn(move || {
        // SAFETY: fflush(NULL) flushes every open C stream under its lock.
        unsafe { libc::fflush(std::ptr::null_mut()) };
        let _ = done.send(());
    });
    if flushing.is_ok() {
        let _ = flushed.recv_timeout(std::time::Duration::from_secs(1));
    }
}

/// Tells gpuinstr's runtime, when the program runs with it, that the
/// program stops here: it writes its report and database with what
/// completed. Waited for at most ten seconds, on a thread of its own (a
/// tool's host part stuck in a call must not keep the process alive).
fn report_the_stop(message: &str) {
    // SAFETY: looks a symbol up in the libraries loaded globally.
    let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"gpuinstr_rt_program_stopped".as_ptr()) };
    if symbol.is_null() {
        return;
    }
    // SAFETY: the runtime defines it with this signature (runtime/src/hsa.rs).
    let stopped = unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*const std::ffi::c_char)>(symbol) };
    let message = std::ffi::CString::new(message.replace('\0', " ")).expect("no NUL left");
    let (done, reported) = std::sync::mpsc::channel();
    let reporting = std::thread::Builder::new().name("gpuinstr-stop".into()).spawn(move || {
        // SAFETY: a terminated message, valid for the call.
        unsafe { stopped(message.as_ptr()) };
        let _ = done.send(());
    });
    if reporting.is_ok() {
        let _ = reported.recv_timeout(std::time::Duration::from_secs(10));
    }
}

/// Device memory exists at its GPU address from allocation on: the thunk
/// maps some buffers for the host only later (or, for device-only memory,
/// `PROT_NONE`), but kernels on the emulator reach every buffer through
/// that address. The thunk's own mapping later shows the same memfd.
fn map_at_allocation(kfd: &Kfd, args: &[u8]) -> Result<(), Errno> {
    let allocation: abi::AllocMemory = bytemuck::pod_read_unaligned(&args[..std::mem::size_of::<abi::AllocMemory>()]);
    let is_memory =
        kfd.state().buffer(allocation.handle).is_some_and(|b| b.backing == gpuinstr_device::kfd::Backing::Memory);
    if !is_memory || allocation.va_addr == 0 {
        return Ok(());
    }
    // SAFETY: the range is the thunk's reservation for this buffer.
    unsafe {
        let fd = backing(allocation.handle, allocation.size).map_err(Errno)?;
        let mapped = real::mmap(
            allocation.va_addr as *mut c_void,
            allocation.size as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            fd,
            0,
        );
        if mapped == libc::MAP_FAILED {
            return Err(Errno::NOMEM);
        }
    }
    trace!("buffer {:#x} mapped at {:#x} ({:#x} bytes)", allocation.handle, allocation.va_addr, allocation.size);
    Ok(())
}

/// The memfd behind buffer `handle` of `size` bytes, made on first use.
unsafe fn backing(handle: u64, size: u64) -> Result<c_int, c_int> {
    let mut table = BACKING.lock().map_err(|_| libc::EIO)?;
    let table = table.get_or_insert_with(HashMap::new);
    if let Some(fd) = table.get(&handle) {
        return Ok(*fd);
    }
    let fd = libc::memfd_create(c"gpuinstr-device-memory".as_ptr(), libc::MFD_CLOEXEC);
    if fd < 0 || libc::ftruncate(fd, size as libc::off_t) != 0 {
        return Err(libc::ENOMEM);
    }
    table.insert(handle, fd);
    Ok(fd)
}

pub unsafe fn map(
    kfd: &Kfd,
    node: DeviceNode,
    address: *mut c_void,
    length: libc::size_t,
    protection: c_int,
    flags: c_int,
    offset: u64,
) -> *mut c_void {
    let fixed = flags & libc::MAP_FIXED;
    // Device memory is always reachable from the host here: the emulator
    // reads it through the same addresses.
    let protection = protection | libc::PROT_READ | libc::PROT_WRITE;
    let result = match kfd.resolve_mmap(offset) {
        Some(MmapTarget::Doorbells) => {
            let mapped = real::mmap(address, length, protection, libc::MAP_SHARED | libc::MAP_ANONYMOUS | fixed, -1, 0);
            if mapped != libc::MAP_FAILED {
                kfd.state().doorbell_page = Some(mapped as u64);
            }
            Ok(mapped)
        }
        Some(MmapTarget::Buffer { handle, offset: within }) => {
            let size = kfd.state().buffer(handle).map_or(0, |b| b.size);
            backing(handle, size)
                .map(|fd| real::mmap(address, length, protection, libc::MAP_SHARED | fixed, fd, within as libc::off_t))
        }
        None => Err(libc::EINVAL),
    };
    trace!("mmap {node:?} offset {offset:#x} length {length:#x} at {address:?} -> {result:?}");
    match result {
        Ok(mapped) => mapped,
        Err(errno) => {
            set_errno(errno);
            libc::MAP_FAILED
        }
    }
}
