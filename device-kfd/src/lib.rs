//! `libgpuinstr_device_kfd.so`: the emulated GPU as a process's kernel
//! driver. `libgpuinstr_device_preload.so` (in `LD_PRELOAD`, linking no
//! LLVM) loads it the first time the process opens one of the device's
//! paths, and from then on hands it every call it interposes: calls on
//! virtual paths (the KFD topology, `/dev/kfd`, the render node, the module
//! list) and on the file descriptors they return are answered by
//! `gpuinstr-device`; every other call goes to libc, through the preload's
//! `gpuinstr_real_*` functions. Each entry point is the libc function's
//! name with `gpuinstr_kfd_` before it. With the preload, this crate is
//! the FFI boundary: all of gpuinstr's unsafe code for the device lives in
//! the two.
//!
//! `GPUINSTR_DEVICE_TARGET` picks the GPU (gfx90a, the default, or
//! gfx908); `GPUINSTR_DEVICE_TRACE=1` prints every call it answers;
//! `GPUINSTR_DEVICE_STATS=1` prints at exit what the emulated GPU ran.

#![allow(clippy::missing_safety_doc)]

mod files;
mod memory;
mod real;

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_ulong, c_void, CStr};
use std::sync::{Mutex, OnceLock};

use gpuinstr_device::{DeviceNode, EmulatedSystem, Entry, Host, Target};

static SYSTEM: OnceLock<EmulatedSystem> = OnceLock::new();

/// File descriptors that are the device's, or virtual directories (for
/// `openat` relative to them).
static VIRTUAL_FDS: Mutex<Option<HashMap<c_int, VirtualFd>>> = Mutex::new(None);

#[derive(Clone, Debug)]
enum VirtualFd {
    Device(DeviceNode),
    Directory(String),
}

fn remember(fd: c_int, what: VirtualFd) {
    if let Ok(mut fds) = VIRTUAL_FDS.lock() {
        fds.get_or_insert_with(HashMap::new).insert(fd, what);
    }
}

fn tracing() -> bool {
    static TRACE: OnceLock<bool> = OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("GPUINSTR_DEVICE_TRACE").is_some_and(|v| v != "0"))
}

macro_rules! trace {
    ($($arg:tt)*) => {
        if $crate::tracing() {
            eprintln!("gpuinstr-device: {}", format!($($arg)*));
        }
    };
}
pub(crate) use trace;

fn system() -> &'static EmulatedSystem {
    SYSTEM.get_or_init(|| {
        let target = match std::env::var("GPUINSTR_DEVICE_TARGET") {
            Ok(name) => Target::parse(&name).unwrap_or_else(|| {
                eprintln!(
                    "gpuinstr-device: GPUINSTR_DEVICE_TARGET={name} is not a GPU the device models ({})",
                    Target::ALL.map(Target::name).join(", ")
                );
                std::process::exit(1)
            }),
            Err(_) => Target::Gfx90a,
        };
        // SAFETY: sysconf has no preconditions.
        let (cpus, pages, page_size) = unsafe {
            (
                libc::sysconf(libc::_SC_NPROCESSORS_ONLN),
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        let memory_bytes = (pages.max(1) as u64) * (page_size.max(4096) as u64);
        let available_bytes = host_available_bytes().unwrap_or(memory_bytes / 2);
        let host = Host { cpu_count: cpus.max(1) as u32, memory_bytes, available_bytes };
        let device_memory = std::env::var("GPUINSTR_DEVICE_MEMORY").ok().filter(|v| !v.is_empty()).map(|text| {
            gpuinstr_device::model::parse_bytes(&text).unwrap_or_else(|| {
                eprintln!(
                    "gpuinstr-device: GPUINSTR_DEVICE_MEMORY={text} is not a size (bytes, or with K, M or G: 512M, 4G)"
                );
                std::process::exit(1)
            })
        });
        trace!("emulating one {target} GPU");
        if std::env::var_os("GPUINSTR_DEVICE_STATS").is_some_and(|v| v != "0") {
            // SAFETY: registers a plain function to run at exit.
            unsafe { libc::atexit(print_stats) };
        }
        // SAFETY: as above; what the hardware would have hidden is said.
        unsafe { libc::atexit(print_warnings) };
        let sramecc = match std::env::var("GPUINSTR_DEVICE_SRAMECC").as_deref() {
            Err(_) | Ok("") | Ok("on") => true,
            Ok("off") => false,
            Ok(other) => {
                eprintln!("gpuinstr-device: GPUINSTR_DEVICE_SRAMECC={other}: give on (the boards' default) or off");
                std::process::exit(1)
            }
        };
        let system = EmulatedSystem::new(target, &host, device_memory, sramecc);
        trace!(
            "{} MiB of device memory, {} MiB of host-backed buffers in all ({} MiB available on the host)",
            system.kfd.model.memory_bytes >> 20,
            system.kfd.model.backable_bytes >> 20,
            host.available_bytes >> 20
        );
        system
    })
}

/// `MemAvailable` of /proc/meminfo, read past this library's own `open`
/// (the emulated system is being made).
fn host_available_bytes() -> Option<u64> {
    // SAFETY: a NUL-terminated path; reads go into a buffer of their length.
    unsafe {
        let fd = real::open(c"/proc/meminfo".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC, 0);
        if fd < 0 {
            return None;
        }
        let mut text = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            let read = libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len());
            if read <= 0 {
                break;
            }
            text.extend_from_slice(&buffer[..read as usize]);
        }
        real::close(fd);
        Host::available_in_meminfo(&String::from_utf8_lossy(&text))
    }
}

/// `GPUINSTR_DEVICE_STATS=1`: what the emulated GPU ran, at exit.
extern "C" fn print_stats() {
    let stats = gpuinstr_device::command_processor::stats();
    if stats.dispatches == 0 {
        // A process that never dispatched (rocminfo's lsmod, say).
        return;
    }
    let seconds = stats.busy.as_secs_f64();
    let rate = if seconds > 0.0 { stats.instructions as f64 / seconds } else { 0.0 };
    eprintln!(
        "gpuinstr-device: {} dispatches, {} wave instructions in {:.3} s of emulation ({:.2} million per second)",
        stats.dispatches,
        stats.instructions,
        seconds,
        rate / 1e6
    );
}

/// At exit, always: what ran as the hardware does it but may be a bug.
extern "C" fn print_warnings() {
    let stats = gpuinstr_device::command_processor::stats();
    if let Some(kernel) = &stats.lds_out_of_range_kernel {
        // Reads past the end give 0, which Tensile's kernels use to zero
        // accumulation registers (`ds_read_b32 a0, v` with v = 0xf00000);
        // dropped writes are what a bug looks like.
        let writes = stats.lds_writes_out_of_range;
        eprintln!(
            "gpuinstr-device: warning: {} LDS accesses (per lane and dword) in {} dispatches went past their \
             workgroup's LDS allocation, {} reads (which gave 0, as the hardware's do) and {writes} writes or \
             atomics (dropped, as the hardware drops them) (first kernel: {kernel})",
            stats.lds_out_of_range,
            stats.lds_out_of_range_dispatches,
            stats.lds_out_of_range - writes
        );
    }
}

/// The virtual entry at `path`, if the path is one of the device's.
unsafe fn virtual_entry(path: *const c_char) -> Option<&'static Entry> {
    if path.is_null() {
        return None;
    }
    let bytes = CStr::from_ptr(path).to_bytes();
    if !(bytes.starts_with(b"/sys/") || bytes.starts_with(b"/dev/") || bytes.starts_with(b"/proc/")) {
        return None;
    }
    let path = std::str::from_utf8(bytes).ok()?;
    system().files.get(path)
}

fn device_fd(fd: c_int) -> Option<DeviceNode> {
    match VIRTUAL_FDS.lock().ok()?.as_ref()?.get(&fd)? {
        VirtualFd::Device(node) => Some(*node),
        VirtualFd::Directory(_) => None,
    }
}

/// `path` relative to `dirfd` when that is a virtual directory.
unsafe fn under_virtual_directory(dirfd: c_int, path: *const c_char) -> Option<std::ffi::CString> {
    if path.is_null() || *path == b'/' as c_char {
        return None;
    }
    let fds = VIRTUAL_FDS.lock().ok()?;
    let VirtualFd::Directory(directory) = fds.as_ref()?.get(&dirfd)? else { return None };
    let relative = CStr::from_ptr(path).to_str().ok()?;
    std::ffi::CString::new(format!("{directory}/{relative}")).ok()
}

fn set_errno(value: c_int) {
    // SAFETY: errno is thread-local and always valid.
    unsafe { *libc::__errno_location() = value };
}

// ---- open ----

fn no_such_file() -> c_int {
    set_errno(libc::ENOENT);
    -1
}

unsafe fn open_virtual(path: *const c_char, flags: c_int) -> Option<c_int> {
    let entry = virtual_entry(path)?;
    let name = CStr::from_ptr(path).to_string_lossy();
    let fd = match entry {
        Entry::File(_) | Entry::Live(_) => files::file_descriptor(&system().contents(entry).unwrap_or_default(), flags),
        Entry::Directory(_) if flags & (libc::O_WRONLY | libc::O_RDWR) != 0 => {
            set_errno(libc::EISDIR);
            -1
        }
        Entry::Directory(_) => {
            let fd = files::file_descriptor(b"", flags);
            if fd >= 0 {
                remember(fd, VirtualFd::Directory(name.trim_end_matches('/').to_string()));
            }
            fd
        }
        Entry::Device(node) => {
            let fd = files::file_descriptor(b"", flags);
            if fd >= 0 {
                remember(fd, VirtualFd::Device(*node));
            }
            fd
        }
    };
    trace!("open {name} -> {fd}");
    Some(fd)
}

/// gpuinstr's runtime says that the kernel whose descriptor is at
/// `kernel_object` runs instrumented code (`instrumented` 1) or no longer
/// (0): its waves may run more instructions before the device takes them
/// for an endless loop. Looked up by the runtime; absent on a real GPU.
#[no_mangle]
pub extern "C" fn gpuinstr_device_kernel_instrumented(kernel_object: u64, instrumented: c_int) {
    gpuinstr_device::command_processor::kernel_instrumented(kernel_object, instrumented != 0);
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_open(path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int {
    open_virtual(path, flags).unwrap_or_else(|| real::open(path, flags, mode))
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_open64(path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int {
    open_virtual(path, flags).unwrap_or_else(|| real::open64(path, flags, mode))
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd___open_2(path: *const c_char, flags: c_int) -> c_int {
    open_virtual(path, flags).unwrap_or_else(|| real::open(path, flags, 0))
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd___open64_2(path: *const c_char, flags: c_int) -> c_int {
    open_virtual(path, flags).unwrap_or_else(|| real::open64(path, flags, 0))
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_openat(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: libc::mode_t,
) -> c_int {
    if let Some(joined) = under_virtual_directory(dirfd, path) {
        return open_virtual(joined.as_ptr(), flags).unwrap_or_else(no_such_file);
    }
    open_virtual(path, flags).unwrap_or_else(|| real::openat(dirfd, path, flags, mode))
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_openat64(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: libc::mode_t,
) -> c_int {
    if let Some(joined) = under_virtual_directory(dirfd, path) {
        return open_virtual(joined.as_ptr(), flags).unwrap_or_else(no_such_file);
    }
    open_virtual(path, flags).unwrap_or_else(|| real::openat64(dirfd, path, flags, mode))
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_fopen(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    match virtual_entry(path) {
        Some(entry) => files::open_stream(entry, path, mode),
        None => real::fopen(path, mode),
    }
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_fopen64(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    match virtual_entry(path) {
        Some(entry) => files::open_stream(entry, path, mode),
        None => real::fopen64(path, mode),
    }
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_close(fd: c_int) -> c_int {
    if let Ok(mut fds) = VIRTUAL_FDS.lock() {
        if let Some(what) = fds.as_mut().and_then(|fds| fds.remove(&fd)) {
            trace!("close {what:?} {fd}");
        }
    }
    real::close(fd)
}

// ---- stat and readlink: ROCm SMI finds the DRM card so ----

/// `stat` (`follow`) or `lstat` of a virtual path into `buffer`.
unsafe fn stat_virtual(path: *const c_char, buffer: *mut libc::stat, follow: bool) -> Option<c_int> {
    let entry = virtual_entry(path)?;
    let name = CStr::from_ptr(path).to_str().ok()?;
    let link = if follow { None } else { system().files.link(name) };
    std::ptr::write_bytes(buffer, 0, 1);
    let status = &mut *buffer;
    (status.st_mode, status.st_size, status.st_rdev) = match (link, entry) {
        (Some(target), _) => (libc::S_IFLNK | 0o777, target.len() as i64, 0),
        // (sysfs gives its files a page whatever they hold; readers read to the end.)
        (None, Entry::File(_) | Entry::Live(_)) => (libc::S_IFREG | 0o444, 4096, 0),
        (None, Entry::Directory(_)) => (libc::S_IFDIR | 0o555, 0, 0),
        (None, Entry::Device(DeviceNode::Render { minor })) => (libc::S_IFCHR | 0o666, 0, libc::makedev(226, *minor)),
        // KFD's major number is the kernel's choice; 235 is common.
        (None, Entry::Device(DeviceNode::Kfd)) => (libc::S_IFCHR | 0o666, 0, libc::makedev(235, 0)),
    };
    status.st_nlink = 1;
    status.st_blksize = 4096;
    trace!("{} {name}", if follow { "stat" } else { "lstat" });
    Some(0)
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_stat(path: *const c_char, buffer: *mut libc::stat) -> c_int {
    stat_virtual(path, buffer, true).unwrap_or_else(|| real::stat(path, buffer))
}

// On x86-64 `struct stat64` is `struct stat`.
#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_stat64(path: *const c_char, buffer: *mut libc::stat64) -> c_int {
    stat_virtual(path, buffer.cast(), true).unwrap_or_else(|| real::stat64(path, buffer))
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_lstat(path: *const c_char, buffer: *mut libc::stat) -> c_int {
    stat_virtual(path, buffer, false).unwrap_or_else(|| real::lstat(path, buffer))
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_lstat64(path: *const c_char, buffer: *mut libc::stat64) -> c_int {
    stat_virtual(path, buffer.cast(), false).unwrap_or_else(|| real::lstat64(path, buffer))
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd___xstat(version: c_int, path: *const c_char, buffer: *mut libc::stat) -> c_int {
    stat_virtual(path, buffer, true).unwrap_or_else(|| real::__xstat(version, path, buffer))
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd___xstat64(
    version: c_int,
    path: *const c_char,
    buffer: *mut libc::stat64,
) -> c_int {
    stat_virtual(path, buffer.cast(), true).unwrap_or_else(|| real::__xstat64(version, path, buffer))
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd___lxstat(version: c_int, path: *const c_char, buffer: *mut libc::stat) -> c_int {
    stat_virtual(path, buffer, false).unwrap_or_else(|| real::__lxstat(version, path, buffer))
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd___lxstat64(
    version: c_int,
    path: *const c_char,
    buffer: *mut libc::stat64,
) -> c_int {
    stat_virtual(path, buffer.cast(), false).unwrap_or_else(|| real::__lxstat64(version, path, buffer))
}

/// `readlink` of a virtual path: the link's target (not NUL-terminated,
/// cut at `size`), or EINVAL for a path that is not a link.
#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_readlink(
    path: *const c_char,
    buffer: *mut c_char,
    size: libc::size_t,
) -> libc::ssize_t {
    if virtual_entry(path).is_none() {
        return real::readlink(path, buffer, size);
    }
    let name = CStr::from_ptr(path).to_string_lossy();
    let Some(target) = system().files.link(&name) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    let length = target.len().min(size);
    std::ptr::copy_nonoverlapping(target.as_ptr(), buffer.cast(), length);
    trace!("readlink {name} -> {target}");
    length as libc::ssize_t
}

// ---- duplicates: libdrm keeps its own copy of the render node's descriptor ----

/// `new` (a duplicate of `fd`) is whatever `fd` is.
fn duplicated(fd: c_int, new: c_int) -> c_int {
    if new >= 0 {
        let what = VIRTUAL_FDS.lock().ok().and_then(|fds| fds.as_ref().and_then(|f| f.get(&fd).cloned()));
        if let Some(what) = what {
            trace!("duplicate {what:?} {fd} -> {new}");
            remember(new, what);
        }
    }
    new
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_fcntl(fd: c_int, command: c_int, argument: c_ulong) -> c_int {
    let result = real::fcntl(fd, command, argument);
    if command == libc::F_DUPFD || command == libc::F_DUPFD_CLOEXEC {
        return duplicated(fd, result);
    }
    result
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_fcntl64(fd: c_int, command: c_int, argument: c_ulong) -> c_int {
    gpuinstr_kfd_fcntl(fd, command, argument)
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_dup(fd: c_int) -> c_int {
    duplicated(fd, real::dup(fd))
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_dup2(fd: c_int, new: c_int) -> c_int {
    duplicated(fd, real::dup2(fd, new))
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_dup3(fd: c_int, new: c_int, flags: c_int) -> c_int {
    duplicated(fd, real::dup3(fd, new, flags))
}

// ---- directories ----

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_opendir(path: *const c_char) -> *mut libc::DIR {
    match virtual_entry(path) {
        Some(entry) => files::open_directory(entry, path),
        None => real::opendir(path),
    }
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_readdir(directory: *mut libc::DIR) -> *mut libc::dirent {
    match files::read_directory(directory) {
        Some(entry) => entry,
        None => real::readdir(directory),
    }
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_readdir64(directory: *mut libc::DIR) -> *mut libc::dirent64 {
    match files::read_directory(directory) {
        Some(entry) => entry.cast(),
        None => real::readdir64(directory),
    }
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_closedir(directory: *mut libc::DIR) -> c_int {
    if files::close_directory(directory) {
        0
    } else {
        real::closedir(directory)
    }
}

// ---- the device ----

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_ioctl(fd: c_int, request: c_ulong, argument: *mut c_void) -> c_int {
    let Some(node) = device_fd(fd) else { return real::ioctl(fd, request, argument) };
    let size = ((request >> 16) & 0x3fff) as usize;
    let mut bytes = vec![0u8; size];
    if size > 0 {
        if argument.is_null() {
            set_errno(libc::EFAULT);
            return -1;
        }
        std::ptr::copy_nonoverlapping(argument.cast::<u8>(), bytes.as_mut_ptr(), size);
    }
    let result = match node {
        DeviceNode::Kfd => memory::kfd_ioctl(&system().kfd, request, &mut bytes),
        DeviceNode::Render { .. } => {
            gpuinstr_device::render::ioctl(&system().kfd.model, request, &mut bytes, &memory::Process)
        }
    };
    trace!("ioctl {node:?} nr {:#x} -> {result:?}", request & 0xff);
    match result {
        Ok(()) => {
            if size > 0 {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), argument.cast::<u8>(), size);
            }
            0
        }
        Err(errno) => {
            set_errno(errno.0);
            -1
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_mmap(
    address: *mut c_void,
    length: libc::size_t,
    protection: c_int,
    flags: c_int,
    fd: c_int,
    offset: libc::off_t,
) -> *mut c_void {
    match device_fd(fd) {
        Some(node) => memory::map(&system().kfd, node, address, length, protection, flags, offset as u64),
        None => real::mmap(address, length, protection, flags, fd, offset),
    }
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_kfd_mmap64(
    address: *mut c_void,
    length: libc::size_t,
    protection: c_int,
    flags: c_int,
    fd: c_int,
    offset: libc::off64_t,
) -> *mut c_void {
    gpuinstr_kfd_mmap(address, length, protection, flags, fd, offset)
}
