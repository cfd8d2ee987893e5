//! AMD CoMGR (libamd_comgr.so.2 in ROCm 5-6, .so.3 from ROCm 6.4), hand-written
//! FFI for what the driver uses: linking a relocatable into an executable
//! code object, and reading a code object's metadata the way the runtime
//! does.

use std::ffi::{c_char, CString};
use std::sync::Mutex;

use thiserror::Error;

/// One CoMGR action at a time in this process. CoMGR before ROCm 5.5
/// (Debian 12's is 5.2) promises no thread safety, and its link action runs
/// lld in-process, whose global state is not made for two links at once;
/// newer CoMGRs take such a lock inside. Links are a small part of a
/// code object's time, so serialising them costs little.
static ONE_ACTION_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The lock, also after a thread panicked holding it (the guarded state
/// is CoMGR's, which a Rust panic between calls leaves consistent).
fn one_action_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_ACTION_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

mod ffi {
    use std::ffi::c_char;

    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct Handle {
        pub handle: u64,
    }

    // The enum values of the amd_comgr.h this build compiled against (they
    // differ between CoMGR 2 and 3), written by build.rs.
    include!(concat!(env!("OUT_DIR"), "/comgr_constants.rs"));

    #[link(name = "amd_comgr")]
    extern "C" {
        pub fn amd_comgr_create_data(kind: u32, data: *mut Handle) -> u32;
        pub fn amd_comgr_release_data(data: Handle) -> u32;
        pub fn amd_comgr_set_data(data: Handle, size: usize, bytes: *const c_char) -> u32;
        pub fn amd_comgr_set_data_name(data: Handle, name: *const c_char) -> u32;
        pub fn amd_comgr_get_data(data: Handle, size: *mut usize, bytes: *mut c_char) -> u32;
        pub fn amd_comgr_create_data_set(set: *mut Handle) -> u32;
        pub fn amd_comgr_destroy_data_set(set: Handle) -> u32;
        pub fn amd_comgr_data_set_add(set: Handle, data: Handle) -> u32;
        pub fn amd_comgr_action_data_count(set: Handle, kind: u32, count: *mut usize) -> u32;
        pub fn amd_comgr_action_data_get_data(set: Handle, kind: u32, index: usize, data: *mut Handle) -> u32;
        pub fn amd_comgr_create_action_info(info: *mut Handle) -> u32;
        pub fn amd_comgr_destroy_action_info(info: Handle) -> u32;
        pub fn amd_comgr_action_info_set_isa_name(info: Handle, isa: *const c_char) -> u32;
        pub fn amd_comgr_action_info_set_logging(info: Handle, logging: bool) -> u32;
        pub fn amd_comgr_action_info_set_option_list(info: Handle, options: *const *const c_char, count: usize) -> u32;
        pub fn amd_comgr_do_action(kind: u32, info: Handle, input: Handle, result: Handle) -> u32;
        pub fn amd_comgr_get_data_metadata(data: Handle, metadata: *mut Handle) -> u32;
        pub fn amd_comgr_destroy_metadata(metadata: Handle) -> u32;
        pub fn amd_comgr_metadata_lookup(metadata: Handle, key: *const c_char, value: *mut Handle) -> u32;
        pub fn amd_comgr_get_metadata_list_size(metadata: Handle, size: *mut usize) -> u32;
        pub fn amd_comgr_index_list_metadata(metadata: Handle, index: usize, value: *mut Handle) -> u32;
        pub fn amd_comgr_get_metadata_string(metadata: Handle, size: *mut usize, string: *mut c_char) -> u32;
        pub fn amd_comgr_get_isa_count(count: *mut usize) -> u32;
        pub fn amd_comgr_get_isa_name(index: usize, name: *mut *const c_char) -> u32;
    }
}

/// The CoMGR interface (amd_comgr.h) this build compiled against.
pub const INTERFACE_VERSION: (u32, u32) = ffi::INTERFACE_VERSION;

#[derive(Debug, Error)]
#[error("CoMGR: {step} failed (status {status}){log}")]
pub struct ComgrError {
    pub step: &'static str,
    pub status: u32,
    pub log: String,
}

fn check(step: &'static str, status: u32) -> Result<(), ComgrError> {
    if status == ffi::STATUS_SUCCESS {
        Ok(())
    } else {
        Err(ComgrError { step, status, log: String::new() })
    }
}

/// Owned CoMGR objects, released on drop.
struct Data(ffi::Handle);
struct Metadata(ffi::Handle);

impl Drop for Metadata {
    fn drop(&mut self) {
        // SAFETY: returned by a CoMGR metadata call.
        unsafe { ffi::amd_comgr_destroy_metadata(self.0) };
    }
}

impl Metadata {
    fn lookup(&self, key: &std::ffi::CStr) -> Result<Metadata, ComgrError> {
        let mut handle = ffi::Handle { handle: 0 };
        // SAFETY: live node; out-pointer to a local.
        check("metadata lookup", unsafe { ffi::amd_comgr_metadata_lookup(self.0, key.as_ptr(), &mut handle) })?;
        Ok(Metadata(handle))
    }

    fn list(&self) -> Result<Vec<Metadata>, ComgrError> {
        let mut size = 0usize;
        // SAFETY: live node; out-pointers to locals.
        unsafe {
            check("metadata list size", ffi::amd_comgr_get_metadata_list_size(self.0, &mut size))?;
            (0..size)
                .map(|i| {
                    let mut handle = ffi::Handle { handle: 0 };
                    check("metadata list item", ffi::amd_comgr_index_list_metadata(self.0, i, &mut handle))?;
                    Ok(Metadata(handle))
                })
                .collect()
        }
    }

    fn string(&self) -> Result<String, ComgrError> {
        let mut size = 0usize;
        // SAFETY: the first call asks for the size (with the NUL), the second fills it.
        unsafe {
            check("metadata string size", ffi::amd_comgr_get_metadata_string(self.0, &mut size, std::ptr::null_mut()))?;
            let mut bytes = vec![0u8; size];
            check("metadata string", ffi::amd_comgr_get_metadata_string(self.0, &mut size, bytes.as_mut_ptr().cast()))?;
            bytes.truncate(size.saturating_sub(1));
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        }
    }
}

/// The kernel names (`.name`) and descriptor symbols (`.symbol`) in an
/// executable code object's metadata, as CoMGR (and so the runtime) reads it.
pub fn metadata_kernels(executable: &[u8]) -> Result<Vec<(String, String)>, ComgrError> {
    let _one = one_action_at_a_time();
    // SAFETY: handles are owned by values that release them; the buffer
    // outlives the calls that read it.
    unsafe {
        let mut handle = ffi::Handle { handle: 0 };
        check("create data", ffi::amd_comgr_create_data(ffi::DATA_KIND_EXECUTABLE, &mut handle))?;
        let data = Data(handle);
        check("set data", ffi::amd_comgr_set_data(data.0, executable.len(), executable.as_ptr().cast::<c_char>()))?;
        let mut node = ffi::Handle { handle: 0 };
        check("get metadata", ffi::amd_comgr_get_data_metadata(data.0, &mut node))?;
        let root = Metadata(node);
        let kernels = root.lookup(c"amdhsa.kernels")?;
        kernels
            .list()?
            .iter()
            .map(|kernel| Ok((kernel.lookup(c".name")?.string()?, kernel.lookup(c".symbol")?.string()?)))
            .collect()
    }
}
struct DataSet(ffi::Handle);
struct ActionInfo(ffi::Handle);

impl Drop for Data {
    fn drop(&mut self) {
        // SAFETY: created by amd_comgr_create_data / returned by a data set.
        unsafe { ffi::amd_comgr_release_data(self.0) };
    }
}
impl Drop for DataSet {
    fn drop(&mut self) {
        // SAFETY: created by amd_comgr_create_data_set.
        unsafe { ffi::amd_comgr_destroy_data_set(self.0) };
    }
}
impl Drop for ActionInfo {
    fn drop(&mut self) {
        // SAFETY: created by amd_comgr_create_action_info.
        unsafe { ffi::amd_comgr_destroy_action_info(self.0) };
    }
}

fn data_set() -> Result<DataSet, ComgrError> {
    let mut handle = ffi::Handle { handle: 0 };
    // SAFETY: out-pointer to a local.
    check("create data set", unsafe { ffi::amd_comgr_create_data_set(&mut handle) })?;
    Ok(DataSet(handle))
}

fn read_data(data: &Data) -> Result<Vec<u8>, ComgrError> {
    let mut size = 0usize;
    // SAFETY: first call asks for the size, the second fills a buffer of it.
    unsafe {
        check("get data size", ffi::amd_comgr_get_data(data.0, &mut size, std::ptr::null_mut()))?;
        let mut bytes = vec![0u8; size];
        check("get data", ffi::amd_comgr_get_data(data.0, &mut size, bytes.as_mut_ptr().cast::<c_char>()))?;
        bytes.truncate(size);
        Ok(bytes)
    }
}

fn first_of_kind(set: &DataSet, kind: u32) -> Result<Option<Data>, ComgrError> {
    let mut count = 0usize;
    // SAFETY: live data set; out-pointers to locals.
    unsafe {
        check("count results", ffi::amd_comgr_action_data_count(set.0, kind, &mut count))?;
        if count == 0 {
            return Ok(None);
        }
        let mut handle = ffi::Handle { handle: 0 };
        check("get result", ffi::amd_comgr_action_data_get_data(set.0, kind, 0, &mut handle))?;
        Ok(Some(Data(handle)))
    }
}

/// The ISA names this CoMGR knows (`amdgcn-amd-amdhsa--gfx90a:xnack-`).
pub fn isa_names() -> Result<Vec<String>, ComgrError> {
    let _one = one_action_at_a_time();
    let mut count = 0usize;
    // SAFETY: CoMGR returns pointers to its own static, NUL-terminated names.
    unsafe {
        check("count ISAs", ffi::amd_comgr_get_isa_count(&mut count))?;
        let mut names = Vec::with_capacity(count);
        for index in 0..count {
            let mut name: *const c_char = std::ptr::null();
            check("ISA name", ffi::amd_comgr_get_isa_name(index, &mut name))?;
            if !name.is_null() {
                names.push(std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned());
            }
        }
        Ok(names)
    }
}

/// Whether this CoMGR knows a processor (`gfx940`) at all.
pub fn knows_processor(processor: &str) -> bool {
    isa_names().is_ok_and(|names| {
        names.iter().any(|n| n.rsplit("--").next().and_then(|t| t.split(':').next()) == Some(processor))
    })
}

/// Links a relocatable code object into an executable one for `isa`
/// (`amdgcn-amd-amdhsa--gfx90a:xnack-`).
pub fn link_relocatable(relocatable: &[u8], isa: &str, options: &[String]) -> Result<Vec<u8>, ComgrError> {
    let c_isa = CString::new(isa).map_err(|_| ComgrError { step: "isa name", status: 0, log: String::new() })?;
    let c_options = options
        .iter()
        .map(|o| CString::new(o.as_str()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| ComgrError { step: "link options", status: 0, log: String::new() })?;
    let option_pointers: Vec<*const c_char> = c_options.iter().map(|o| o.as_ptr()).collect();
    let _one = one_action_at_a_time();
    // SAFETY: every handle is created here and released by its owner's Drop;
    // byte buffers outlive the calls that read them.
    unsafe {
        let mut handle = ffi::Handle { handle: 0 };
        check("create data", ffi::amd_comgr_create_data(ffi::DATA_KIND_RELOCATABLE, &mut handle))?;
        let input = Data(handle);
        check("set data", ffi::amd_comgr_set_data(input.0, relocatable.len(), relocatable.as_ptr().cast::<c_char>()))?;
        check("set data name", ffi::amd_comgr_set_data_name(input.0, c"gpuinstr.o".as_ptr()))?;
        let inputs = data_set()?;
        check("add input", ffi::amd_comgr_data_set_add(inputs.0, input.0))?;
        let outputs = data_set()?;

        let mut handle = ffi::Handle { handle: 0 };
        check("create action info", ffi::amd_comgr_create_action_info(&mut handle))?;
        let info = ActionInfo(handle);
        check("set isa", ffi::amd_comgr_action_info_set_isa_name(info.0, c_isa.as_ptr()))?;
        check("set logging", ffi::amd_comgr_action_info_set_logging(info.0, true))?;
        if !option_pointers.is_empty() {
            check(
                "set options",
                ffi::amd_comgr_action_info_set_option_list(info.0, option_pointers.as_ptr(), option_pointers.len()),
            )?;
        }
        let status = ffi::amd_comgr_do_action(ffi::ACTION_LINK_RELOCATABLE_TO_EXECUTABLE, info.0, inputs.0, outputs.0);
        if status != ffi::STATUS_SUCCESS {
            let log = match first_of_kind(&outputs, ffi::DATA_KIND_LOG)? {
                Some(log) => format!(": {}", String::from_utf8_lossy(&read_data(&log)?).trim()),
                None => String::new(),
            };
            return Err(ComgrError { step: "link relocatable to executable", status, log });
        }
        let executable = first_of_kind(&outputs, ffi::DATA_KIND_EXECUTABLE)?.ok_or(ComgrError {
            step: "link produced no executable",
            status: 0,
            log: String::new(),
        })?;
        read_data(&executable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comgr_lists_the_processors_it_links_for() {
        assert!(knows_processor("gfx90a"), "{:?}", isa_names());
        assert!(!knows_processor("gfx9"));
        assert!(isa_names().unwrap().iter().all(|n| n.starts_with("amdgcn-amd-amdhsa--")));
    }
}
