//! libc's own functions, found past this library with `dlsym(RTLD_NEXT)`,
//! and exported as `gpuinstr_real_*` for `libgpuinstr_device_kfd.so`
//! (loaded after libc with `RTLD_LOCAL`, where `RTLD_NEXT` would not find
//! them).

use std::ffi::{c_char, c_int, c_ulong, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

unsafe fn next(slot: &AtomicUsize, name: &'static [u8]) -> usize {
    let mut address = slot.load(Ordering::Relaxed);
    if address == 0 {
        address = libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) as usize;
        if address == 0 {
            let name = String::from_utf8_lossy(&name[..name.len() - 1]);
            eprintln!("gpuinstr-device: libc has no `{name}`");
            std::process::abort();
        }
        slot.store(address, Ordering::Relaxed);
    }
    address
}

macro_rules! real {
    ($name:ident, $exported:ident ( $($argument:ident : $type:ty),* ) -> $result:ty) => {
        pub unsafe fn $name($($argument: $type),*) -> $result {
            static SLOT: AtomicUsize = AtomicUsize::new(0);
            let address = next(&SLOT, concat!(stringify!($name), "\0").as_bytes());
            let function: unsafe extern "C" fn($($type),*) -> $result = std::mem::transmute(address);
            function($($argument),*)
        }

        #[no_mangle]
        pub unsafe extern "C" fn $exported($($argument: $type),*) -> $result {
            $name($($argument),*)
        }
    };
}

real!(open, gpuinstr_real_open(path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int);
real!(open64, gpuinstr_real_open64(path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int);
real!(openat, gpuinstr_real_openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int);
real!(openat64, gpuinstr_real_openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int);
real!(fopen, gpuinstr_real_fopen(path: *const c_char, mode: *const c_char) -> *mut libc::FILE);
real!(fopen64, gpuinstr_real_fopen64(path: *const c_char, mode: *const c_char) -> *mut libc::FILE);
real!(close, gpuinstr_real_close(fd: c_int) -> c_int);
real!(opendir, gpuinstr_real_opendir(path: *const c_char) -> *mut libc::DIR);
real!(readdir, gpuinstr_real_readdir(directory: *mut libc::DIR) -> *mut libc::dirent);
real!(readdir64, gpuinstr_real_readdir64(directory: *mut libc::DIR) -> *mut libc::dirent64);
real!(closedir, gpuinstr_real_closedir(directory: *mut libc::DIR) -> c_int);
real!(ioctl, gpuinstr_real_ioctl(fd: c_int, request: c_ulong, argument: *mut c_void) -> c_int);
real!(mmap, gpuinstr_real_mmap(address: *mut c_void, length: libc::size_t, protection: c_int, flags: c_int, fd: c_int, offset: libc::off_t) -> *mut c_void);
real!(fcntl, gpuinstr_real_fcntl(fd: c_int, command: c_int, argument: libc::c_ulong) -> c_int);
real!(dup, gpuinstr_real_dup(fd: c_int) -> c_int);
real!(dup2, gpuinstr_real_dup2(fd: c_int, new: c_int) -> c_int);
real!(dup3, gpuinstr_real_dup3(fd: c_int, new: c_int, flags: c_int) -> c_int);
real!(stat, gpuinstr_real_stat(path: *const c_char, buffer: *mut libc::stat) -> c_int);
real!(stat64, gpuinstr_real_stat64(path: *const c_char, buffer: *mut libc::stat64) -> c_int);
real!(lstat, gpuinstr_real_lstat(path: *const c_char, buffer: *mut libc::stat) -> c_int);
real!(lstat64, gpuinstr_real_lstat64(path: *const c_char, buffer: *mut libc::stat64) -> c_int);
real!(__xstat, gpuinstr_real___xstat(version: c_int, path: *const c_char, buffer: *mut libc::stat) -> c_int);
real!(__xstat64, gpuinstr_real___xstat64(version: c_int, path: *const c_char, buffer: *mut libc::stat64) -> c_int);
real!(__lxstat, gpuinstr_real___lxstat(version: c_int, path: *const c_char, buffer: *mut libc::stat) -> c_int);
real!(__lxstat64, gpuinstr_real___lxstat64(version: c_int, path: *const c_char, buffer: *mut libc::stat64) -> c_int);
real!(readlink, gpuinstr_real_readlink(path: *const c_char, buffer: *mut c_char, size: libc::size_t) -> libc::ssize_t);
