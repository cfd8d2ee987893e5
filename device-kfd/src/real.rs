//! libc's own functions, as the preload reaches them: its
//! `gpuinstr_real_*` exports (this library is loaded with `RTLD_LOCAL`
//! after libc, where `RTLD_NEXT` would not find libc's).

use std::ffi::{c_char, c_int, c_ulong, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

unsafe fn next(slot: &AtomicUsize, name: &'static [u8]) -> usize {
    let mut address = slot.load(Ordering::Relaxed);
    if address == 0 {
        address = libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr().cast()) as usize;
        if address == 0 {
            let name = String::from_utf8_lossy(&name[..name.len() - 1]);
            eprintln!(
                "gpuinstr-device: no `{name}`: libgpuinstr_device_kfd.so is loaded by libgpuinstr_device_preload.so"
            );
            std::process::abort();
        }
        slot.store(address, Ordering::Relaxed);
    }
    address
}

macro_rules! real {
    ($name:ident ( $($argument:ident : $type:ty),* ) -> $result:ty) => {
        pub unsafe fn $name($($argument: $type),*) -> $result {
            static SLOT: AtomicUsize = AtomicUsize::new(0);
            let address = next(&SLOT, concat!("gpuinstr_real_", stringify!($name), "\0").as_bytes());
            let function: unsafe extern "C" fn($($type),*) -> $result = std::mem::transmute(address);
            function($($argument),*)
        }
    };
}

real!(open(path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int);
real!(open64(path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int);
real!(openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int);
real!(openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int);
real!(fopen(path: *const c_char, mode: *const c_char) -> *mut libc::FILE);
real!(fopen64(path: *const c_char, mode: *const c_char) -> *mut libc::FILE);
real!(close(fd: c_int) -> c_int);
real!(opendir(path: *const c_char) -> *mut libc::DIR);
real!(readdir(directory: *mut libc::DIR) -> *mut libc::dirent);
real!(readdir64(directory: *mut libc::DIR) -> *mut libc::dirent64);
real!(closedir(directory: *mut libc::DIR) -> c_int);
real!(ioctl(fd: c_int, request: c_ulong, argument: *mut c_void) -> c_int);
real!(mmap(address: *mut c_void, length: libc::size_t, protection: c_int, flags: c_int, fd: c_int, offset: libc::off_t) -> *mut c_void);
real!(fcntl(fd: c_int, command: c_int, argument: libc::c_ulong) -> c_int);
real!(dup(fd: c_int) -> c_int);
real!(dup2(fd: c_int, new: c_int) -> c_int);
real!(dup3(fd: c_int, new: c_int, flags: c_int) -> c_int);
real!(stat(path: *const c_char, buffer: *mut libc::stat) -> c_int);
real!(stat64(path: *const c_char, buffer: *mut libc::stat64) -> c_int);
real!(lstat(path: *const c_char, buffer: *mut libc::stat) -> c_int);
real!(lstat64(path: *const c_char, buffer: *mut libc::stat64) -> c_int);
real!(__xstat(version: c_int, path: *const c_char, buffer: *mut libc::stat) -> c_int);
real!(__xstat64(version: c_int, path: *const c_char, buffer: *mut libc::stat64) -> c_int);
real!(__lxstat(version: c_int, path: *const c_char, buffer: *mut libc::stat) -> c_int);
real!(__lxstat64(version: c_int, path: *const c_char, buffer: *mut libc::stat64) -> c_int);
real!(readlink(path: *const c_char, buffer: *mut c_char, size: libc::size_t) -> libc::ssize_t);
