//! `libgpuinstr_device_preload.so`: loaded with `LD_PRELOAD` (by
//! `gpuinstr-run`), it interposes the libc calls through which the ROCm
//! user space reaches the kernel driver, and links nothing but libc: the
//! processes a program starts inherit `LD_PRELOAD` (a compiler's `ld.lld`,
//! a shell, Python), and an LLVM of gpuinstr's in them would clash with
//! theirs. The emulated GPU itself, which links LLVM, is
//! `libgpuinstr_device_kfd.so`: loaded (`RTLD_LOCAL`) the first time the
//! process opens one of the device's paths (its topology in sysfs,
//! `/dev/kfd`, the render node, the module list), then handed every call
//! this library interposes. Until then every call goes to libc.
//!
//! `GPUINSTR_DEVICE_KFD_LIBRARY` names the device library (gpuinstr-run
//! sets it); else it is the one beside this library. `GPUINSTR_DEVICE_TARGET`
//! picks the GPU (gfx90a, the default, or gfx908...);
//! `GPUINSTR_DEVICE_TRACE=1` prints every call the device answers;
//! `GPUINSTR_DEVICE_STATS=1` prints at exit what the emulated GPU ran.
//!
//! With the device library, this crate is the FFI boundary: all of
//! gpuinstr's unsafe code for the device lives in the two.

#![allow(clippy::missing_safety_doc)]

mod real;
pub mod run;

use std::ffi::{c_char, c_int, c_ulong, c_void, CStr};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

#[path = "../../device/src/virtual_roots.rs"]
mod virtual_roots;

/// The device library's file name.
pub const KFD_LIBRARY: &str = "libgpuinstr_device_kfd.so";

/// The device library once loaded (null before).
static KFD: AtomicPtr<Kfd> = AtomicPtr::new(std::ptr::null_mut());
/// Held while it is being loaded.
static LOADING: Mutex<()> = Mutex::new(());

fn loaded() -> Option<&'static Kfd> {
    // SAFETY: set once, to a leaked table that lives as long as the process.
    unsafe { KFD.load(Ordering::Acquire).as_ref() }
}

/// The device library, for a call on `path`: when it is loaded, or when
/// `path` is one of the device's (then it is loaded now).
unsafe fn for_path(path: *const c_char) -> Option<&'static Kfd> {
    if let Some(kfd) = loaded() {
        return Some(kfd);
    }
    if path.is_null() || !virtual_roots::under_a_virtual_root(CStr::from_ptr(path).to_bytes()) {
        return None;
    }
    Some(load())
}

/// Where the device library is: `GPUINSTR_DEVICE_KFD_LIBRARY`, else beside
/// this library.
fn kfd_library() -> std::path::PathBuf {
    if let Some(path) = std::env::var_os("GPUINSTR_DEVICE_KFD_LIBRARY").filter(|p| !p.is_empty()) {
        return path.into();
    }
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr fills `info` for an address of this library.
    let found = unsafe { libc::dladdr(load as *const c_void, &mut info) } != 0 && !info.dli_fname.is_null();
    let this = if found {
        // SAFETY: dladdr's file name is a NUL-terminated string it owns.
        std::path::PathBuf::from(unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().to_string())
    } else {
        std::path::PathBuf::new()
    };
    this.with_file_name(KFD_LIBRARY)
}

/// Loads the device library (once); a process that reached for the device
/// and cannot have it stops, saying why.
unsafe fn load() -> &'static Kfd {
    let _loading = LOADING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(kfd) = loaded() {
        return kfd;
    }
    let path = kfd_library();
    let fail = |why: String| -> ! {
        eprintln!(
            "gpuinstr-device: error: cannot load the emulated GPU ({}): {why}; it is built beside \
             libgpuinstr_device_preload.so (cargo build -p gpuinstr-device-kfd), or GPUINSTR_DEVICE_KFD_LIBRARY names it",
            path.display()
        );
        libc::_exit(1)
    };
    let Ok(name) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        fail("a path with a NUL".into())
    };
    let handle = libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
    if handle.is_null() {
        fail(dl_error());
    }
    let kfd = Kfd::resolve(handle).unwrap_or_else(|missing| fail(format!("it has no `{missing}`")));
    let kfd: &'static Kfd = Box::leak(Box::new(kfd));
    KFD.store((kfd as *const Kfd).cast_mut(), Ordering::Release);
    kfd
}

fn dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string.
    let error = unsafe { libc::dlerror() };
    if error.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: as above.
        unsafe { CStr::from_ptr(error) }.to_string_lossy().to_string()
    }
}

/// A function of the device library, by name (NUL-terminated).
unsafe fn symbol<F: Copy>(handle: *mut c_void, name: &'static str) -> Result<F, &'static str> {
    let address = libc::dlsym(handle, name.as_ptr().cast());
    if address.is_null() {
        return Err(name.trim_end_matches('\0'));
    }
    debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    Ok(std::mem::transmute_copy(&address))
}

/// Each interposed function: its signature, which calls can load the
/// device (`path`: those naming a path; `fd`: none, a descriptor of the
/// device's exists only once it is loaded), and libc's call. The device
/// library's entry for it is `gpuinstr_kfd_` and its name.
macro_rules! interposed {
    ($( $name:ident ( $($argument:ident : $type:ty),* ) -> $result:ty, $when:ident, $real:expr; )*) => {
        /// The device library's entry points.
        struct Kfd {
            $( $name: unsafe extern "C" fn($($type),*) -> $result, )*
            kernel_instrumented: unsafe extern "C" fn(u64, c_int),
        }

        impl Kfd {
            unsafe fn resolve(handle: *mut c_void) -> Result<Kfd, &'static str> {
                Ok(Kfd {
                    $( $name: symbol(handle, concat!("gpuinstr_kfd_", stringify!($name), "\0"))?, )*
                    kernel_instrumented: symbol(handle, "gpuinstr_device_kernel_instrumented\0")?,
                })
            }
        }

        $(
            #[no_mangle]
            pub unsafe extern "C" fn $name($($argument: $type),*) -> $result {
                match interposed!(@kfd $when $($argument),*) {
                    Some(kfd) => (kfd.$name)($($argument),*),
                    None => $real,
                }
            }
        )*
    };
    (@kfd path $path:ident $(, $rest:ident)*) => { for_path($path) };
    (@kfd at $dirfd:ident, $path:ident $(, $rest:ident)*) => { for_path($path) };
    (@kfd fd $($rest:ident),*) => { loaded() };
}

interposed! {
    open(path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int, path, real::open(path, flags, mode);
    open64(path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int, path, real::open64(path, flags, mode);
    __open_2(path: *const c_char, flags: c_int) -> c_int, path, real::open(path, flags, 0);
    __open64_2(path: *const c_char, flags: c_int) -> c_int, path, real::open64(path, flags, 0);
    openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int, at,
        real::openat(dirfd, path, flags, mode);
    openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int, at,
        real::openat64(dirfd, path, flags, mode);
    fopen(path: *const c_char, mode: *const c_char) -> *mut libc::FILE, path, real::fopen(path, mode);
    fopen64(path: *const c_char, mode: *const c_char) -> *mut libc::FILE, path, real::fopen64(path, mode);
    opendir(path: *const c_char) -> *mut libc::DIR, path, real::opendir(path);
    close(fd: c_int) -> c_int, fd, real::close(fd);
    fcntl(fd: c_int, command: c_int, argument: c_ulong) -> c_int, fd, real::fcntl(fd, command, argument);
    fcntl64(fd: c_int, command: c_int, argument: c_ulong) -> c_int, fd, real::fcntl(fd, command, argument);
    dup(fd: c_int) -> c_int, fd, real::dup(fd);
    dup2(fd: c_int, new: c_int) -> c_int, fd, real::dup2(fd, new);
    dup3(fd: c_int, new: c_int, flags: c_int) -> c_int, fd, real::dup3(fd, new, flags);
    readdir(directory: *mut libc::DIR) -> *mut libc::dirent, fd, real::readdir(directory);
    readdir64(directory: *mut libc::DIR) -> *mut libc::dirent64, fd, real::readdir64(directory);
    closedir(directory: *mut libc::DIR) -> c_int, fd, real::closedir(directory);
    ioctl(fd: c_int, request: c_ulong, argument: *mut c_void) -> c_int, fd, real::ioctl(fd, request, argument);
    mmap(address: *mut c_void, length: libc::size_t, protection: c_int, flags: c_int, fd: c_int, offset: libc::off_t)
        -> *mut c_void, fd, real::mmap(address, length, protection, flags, fd, offset);
    mmap64(address: *mut c_void, length: libc::size_t, protection: c_int, flags: c_int, fd: c_int, offset: libc::off64_t)
        -> *mut c_void, fd, real::mmap(address, length, protection, flags, fd, offset);
    // ROCm SMI's discovery: the DRM card's files and the link naming its slot.
    stat(path: *const c_char, buffer: *mut libc::stat) -> c_int, path, real::stat(path, buffer);
    stat64(path: *const c_char, buffer: *mut libc::stat64) -> c_int, path, real::stat64(path, buffer);
    lstat(path: *const c_char, buffer: *mut libc::stat) -> c_int, path, real::lstat(path, buffer);
    lstat64(path: *const c_char, buffer: *mut libc::stat64) -> c_int, path, real::lstat64(path, buffer);
    __xstat(version: c_int, path: *const c_char, buffer: *mut libc::stat) -> c_int, at,
        real::__xstat(version, path, buffer);
    __xstat64(version: c_int, path: *const c_char, buffer: *mut libc::stat64) -> c_int, at,
        real::__xstat64(version, path, buffer);
    __lxstat(version: c_int, path: *const c_char, buffer: *mut libc::stat) -> c_int, at,
        real::__lxstat(version, path, buffer);
    __lxstat64(version: c_int, path: *const c_char, buffer: *mut libc::stat64) -> c_int, at,
        real::__lxstat64(version, path, buffer);
    readlink(path: *const c_char, buffer: *mut c_char, size: libc::size_t) -> libc::ssize_t, path,
        real::readlink(path, buffer, size);
}

/// gpuinstr's runtime says that the kernel whose descriptor is at
/// `kernel_object` runs instrumented code (`instrumented` 1) or no longer
/// (0): its waves may run more instructions before the device takes them
/// for an endless loop. Looked up by the runtime; absent on a real GPU.
#[no_mangle]
pub extern "C" fn gpuinstr_device_kernel_instrumented(kernel_object: u64, instrumented: c_int) {
    if let Some(kfd) = loaded() {
        // SAFETY: the device library's function, taking plain values.
        unsafe { (kfd.kernel_instrumented)(kernel_object, instrumented) };
    }
}
