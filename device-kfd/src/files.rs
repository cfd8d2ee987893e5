//! Virtual files and directories as the process sees them: a memfd holding
//! a file's contents for `open` and `fopen`, and our own
//! directory handles for `opendir`/`readdir`.

use std::collections::HashSet;
use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::Mutex;

use gpuinstr_device::Entry;

use crate::{real, set_errno, trace};

/// A memfd holding `contents`, positioned at its start.
pub unsafe fn file_descriptor(contents: &[u8], flags: c_int) -> c_int {
    let cloexec = if flags & libc::O_CLOEXEC != 0 { libc::MFD_CLOEXEC } else { 0 };
    let fd = libc::memfd_create(c"gpuinstr-device".as_ptr(), cloexec);
    if fd < 0 {
        return fd;
    }
    let mut written = 0;
    while written < contents.len() {
        let n = libc::write(fd, contents[written..].as_ptr().cast(), contents.len() - written);
        if n <= 0 {
            real::close(fd);
            return -1;
        }
        written += n as usize;
    }
    libc::lseek(fd, 0, libc::SEEK_SET);
    fd
}

/// `fopen` of a virtual file: a read-only stream over its contents (which
/// live as long as the process).
pub unsafe fn open_stream(entry: &'static Entry, path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    let name = CStr::from_ptr(path).to_string_lossy();
    let writing = !mode.is_null() && CStr::from_ptr(mode).to_bytes().iter().any(|b| matches!(b, b'w' | b'a' | b'+'));
    let stream = match entry {
        Entry::File(_) | Entry::Live(_) if writing => {
            set_errno(libc::EACCES);
            std::ptr::null_mut()
        }
        // A stream over a real descriptor (a memfd): C++ streams read the
        // descriptor under the FILE (libstdc++'s ifstream does).
        Entry::File(_) | Entry::Live(_) => {
            let contents = crate::system().contents(entry).unwrap_or_default();
            let fd = file_descriptor(&contents, libc::O_CLOEXEC);
            if fd < 0 {
                std::ptr::null_mut()
            } else {
                let stream = libc::fdopen(fd, c"r".as_ptr());
                if stream.is_null() {
                    real::close(fd);
                }
                stream
            }
        }
        Entry::Directory(_) => {
            set_errno(libc::EISDIR);
            std::ptr::null_mut()
        }
        Entry::Device(_) => {
            set_errno(libc::ENXIO);
            std::ptr::null_mut()
        }
    };
    trace!("fopen {name} -> {}", if stream.is_null() { "failed" } else { "ok" });
    stream
}

/// A directory handle of ours: its entries and where `readdir` is.
struct Directory {
    names: Vec<(CString, u8)>,
    next: usize,
    entry: libc::dirent,
}

/// Live handles (their addresses), to tell them from libc's.
static DIRECTORIES: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

pub unsafe fn open_directory(entry: &'static Entry, path: *const c_char) -> *mut libc::DIR {
    let Entry::Directory(children) = entry else {
        set_errno(libc::ENOTDIR);
        return std::ptr::null_mut();
    };
    let parent = CStr::from_ptr(path).to_string_lossy().trim_end_matches('/').to_string();
    let mut names = vec![(c".".to_owned(), libc::DT_DIR), (c"..".to_owned(), libc::DT_DIR)];
    for child in children {
        let kind = match crate::system().files.get(&format!("{parent}/{child}")) {
            Some(Entry::Directory(_)) => libc::DT_DIR,
            Some(Entry::Device(_)) => libc::DT_CHR,
            _ => libc::DT_REG,
        };
        if let Ok(name) = CString::new(child.as_str()) {
            names.push((name, kind));
        }
    }
    trace!("opendir {parent}: {} entries", names.len() - 2);
    let directory = Box::into_raw(Box::new(Directory { names, next: 0, entry: std::mem::zeroed() }));
    if let Ok(mut live) = DIRECTORIES.lock() {
        live.get_or_insert_with(HashSet::new).insert(directory as usize);
    }
    directory.cast()
}

fn is_ours(directory: *mut libc::DIR) -> bool {
    DIRECTORIES.lock().ok().and_then(|live| live.as_ref().map(|l| l.contains(&(directory as usize)))).unwrap_or(false)
}

/// `Some(entry or null at the end)` for our handles, `None` for libc's.
pub unsafe fn read_directory(directory: *mut libc::DIR) -> Option<*mut libc::dirent> {
    if !is_ours(directory) {
        return None;
    }
    let directory = &mut *directory.cast::<Directory>();
    let Some((name, kind)) = directory.names.get(directory.next) else { return Some(std::ptr::null_mut()) };
    directory.next += 1;
    let entry = &mut directory.entry;
    entry.d_ino = directory.next as u64;
    entry.d_off = directory.next as i64;
    entry.d_reclen = std::mem::size_of::<libc::dirent>() as u16;
    entry.d_type = *kind;
    let bytes = name.as_bytes_with_nul();
    let length = bytes.len().min(entry.d_name.len());
    for (slot, byte) in entry.d_name.iter_mut().zip(&bytes[..length]) {
        *slot = *byte as c_char;
    }
    Some(entry)
}

/// True if `directory` was ours (and is now closed).
pub unsafe fn close_directory(directory: *mut libc::DIR) -> bool {
    let removed = DIRECTORIES.lock().ok().and_then(|mut live| live.as_mut().map(|l| l.remove(&(directory as usize))));
    if removed == Some(true) {
        drop(Box::from_raw(directory.cast::<Directory>()));
        true
    } else {
        false
    }
}
