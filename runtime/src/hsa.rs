//! The FFI module: ROCr's tool entry points (`OnLoad`, `OnUnload`), the
//! calls the C++ shim (cpp/api_table.cpp) makes into Rust from its
//! wrappers, and [`Rocr`], the [`Hsa`] calls through the shim to ROCr's
//! original entries. All of the runtime's unsafe code is here.

#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::{Mutex, OnceLock};

use crate::packets::{CollectKernel, Packet};
use crate::report::ToolValue;
use crate::rings::ToolRecords;
use crate::runtime::{self, Hsa, HsaError, Runtime, ToolCodeObject, ToolDispatch, ToolHost};

type PacketWriter = unsafe extern "C" fn(packets: *const c_void, count: u64);
type SignalHandler = unsafe extern "C" fn(value: i64, argument: *mut c_void) -> bool;

extern "C" {
    fn gpuinstr_rt_install(api_table: *mut c_void) -> bool;
    fn gpuinstr_rt_signal_create(initial: i64, signal: *mut u64) -> u32;
    fn gpuinstr_rt_signal_destroy(signal: u64) -> u32;
    fn gpuinstr_rt_signal_when_zero(signal: u64, handler: SignalHandler, argument: *mut c_void) -> u32;
    fn gpuinstr_rt_signal_load(signal: u64) -> i64;
    fn gpuinstr_rt_agent_name(agent: u64, name: *mut c_char) -> u32;
    fn gpuinstr_rt_host_allocate(agent: u64, size: usize, memory: *mut *mut c_void) -> u32;
    fn gpuinstr_rt_host_free(memory: *mut c_void) -> u32;
    fn gpuinstr_rt_executable_destroy(executable: u64) -> u32;
    fn gpuinstr_rt_memory_copy(to: u64, from: u64, size: usize) -> u32;
    fn gpuinstr_rt_load_kernel(
        agent: u64,
        bytes: *const c_void,
        size: usize,
        kernel: *const c_char,
        executable: *mut u64,
        kernel_object: *mut u64,
        private_segment_size: *mut u32,
        group_segment_size: *mut u32,
    ) -> u32;
    fn gpuinstr_rt_status_string(status: u32) -> *const c_char;
}

static RUNTIME: OnceLock<Mutex<Runtime>> = OnceLock::new();

fn runtime() -> &'static Mutex<Runtime> {
    RUNTIME.get_or_init(|| Mutex::new(Runtime::default()))
}

/// Runs `f` on the runtime's state (nothing if a panic poisoned it).
fn with_runtime(f: impl FnOnce(&mut Runtime)) {
    if let Ok(mut state) = runtime().lock() {
        f(&mut state);
    }
}

/// ROCr's original entries, through the shim.
pub struct Rocr;

fn check(call: &'static str, status: u32) -> Result<(), HsaError> {
    if status == 0 {
        return Ok(());
    }
    // SAFETY: the shim returns a static string.
    let text = unsafe { CStr::from_ptr(gpuinstr_rt_status_string(status)) };
    Err(HsaError { call, status: text.to_string_lossy().to_string() })
}

unsafe extern "C" fn dispatch_done(_value: i64, argument: *mut c_void) -> bool {
    runtime::dispatch_completed(runtime(), &Rocr, tool(), argument as u64);
    // Once per dispatch: the handler goes.
    false
}

impl Hsa for Rocr {
    fn signal_create(&self, initial: i64) -> Result<u64, HsaError> {
        let mut signal = 0;
        // SAFETY: `signal` is a valid place for the handle.
        check("hsa_signal_create", unsafe { gpuinstr_rt_signal_create(initial, &mut signal) })?;
        Ok(signal)
    }

    fn signal_destroy(&self, signal: u64) {
        // SAFETY: the runtime destroys only signals it created, once.
        unsafe { gpuinstr_rt_signal_destroy(signal) };
    }

    fn signal_load(&self, signal: u64) -> i64 {
        // SAFETY: a signal the runtime created and has not destroyed.
        unsafe { gpuinstr_rt_signal_load(signal) }
    }

    fn when_zero(&self, signal: u64, dispatch: u64) -> Result<(), HsaError> {
        // SAFETY: the argument is a number, not a pointer.
        let status = unsafe { gpuinstr_rt_signal_when_zero(signal, dispatch_done, dispatch as *mut c_void) };
        check("hsa_amd_signal_async_handler", status)
    }

    fn agent_name(&self, agent: u64) -> Result<String, HsaError> {
        let mut name = [0 as c_char; 64];
        // SAFETY: HSA_AGENT_INFO_NAME writes at most 64 bytes.
        check("hsa_agent_get_info", unsafe { gpuinstr_rt_agent_name(agent, name.as_mut_ptr()) })?;
        name[63] = 0;
        // SAFETY: terminated just above.
        Ok(unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy().to_string())
    }

    fn load_collect_kernel(&self, agent: u64, code_object: &[u8]) -> Result<CollectKernel, HsaError> {
        let (mut executable, mut kernel_object, mut private_segment_size, mut group_segment_size) = (0, 0, 0, 0);
        // SAFETY: the bytes outlive the call (ROCr copies what it loads).
        let status = unsafe {
            gpuinstr_rt_load_kernel(
                agent,
                code_object.as_ptr().cast(),
                code_object.len(),
                c"gpuinstr_collect.kd".as_ptr(),
                &mut executable,
                &mut kernel_object,
                &mut private_segment_size,
                &mut group_segment_size,
            )
        };
        check("loading the collect kernel", status)?;
        Ok(CollectKernel { executable, kernel_object, private_segment_size, group_segment_size })
    }

    fn host_allocate(&self, agent: u64, size: usize) -> Result<u64, HsaError> {
        let mut memory = std::ptr::null_mut();
        // SAFETY: `memory` is a valid place for the pointer.
        check("hsa_amd_memory_pool_allocate", unsafe { gpuinstr_rt_host_allocate(agent, size, &mut memory) })?;
        Ok(memory as u64)
    }

    fn host_free(&self, address: u64) {
        // SAFETY: memory the runtime allocated and no longer uses.
        unsafe { gpuinstr_rt_host_free(address as *mut c_void) };
    }

    fn executable_destroy(&self, executable: u64) {
        // SAFETY: an executable the runtime loaded; nothing dispatches it any more.
        unsafe { gpuinstr_rt_executable_destroy(executable) };
    }

    fn host_read(&self, address: u64, into: &mut [u8]) {
        // SAFETY: the runtime reads only inside buffers it allocated.
        unsafe { std::ptr::copy_nonoverlapping(address as *const u8, into.as_mut_ptr(), into.len()) }
    }

    fn host_write(&self, address: u64, bytes: &[u8]) {
        // SAFETY: the runtime writes only inside buffers it allocated.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), address as *mut u8, bytes.len()) }
    }

    fn host_load_u64(&self, address: u64) -> u64 {
        // SAFETY: an aligned word inside a buffer the runtime allocated,
        // which the GPU writes with atomics.
        unsafe { std::sync::atomic::AtomicU64::from_ptr(address as *mut u64) }
            .load(std::sync::atomic::Ordering::Acquire)
    }

    fn host_store_u64(&self, address: u64, value: u64) {
        // SAFETY: as above.
        unsafe { std::sync::atomic::AtomicU64::from_ptr(address as *mut u64) }
            .store(value, std::sync::atomic::Ordering::Release)
    }

    fn copy_to_device(&self, to: u64, from: u64, size: usize) -> Result<(), HsaError> {
        // SAFETY: `from` is host memory the runtime allocated; `to` a
        // loaded code object's global of at least `size` bytes.
        check("hsa_memory_copy", unsafe { gpuinstr_rt_memory_copy(to, from, size) })
    }

    fn kernel_instrumented(&self, kernel_object: u64, instrumented: bool) {
        type Tell = unsafe extern "C" fn(u64, c_int);
        static TELL: OnceLock<Option<Tell>> = OnceLock::new();
        let tell = TELL.get_or_init(|| {
            // SAFETY: looks a symbol up in the libraries loaded globally;
            // gpuinstr's device library defines it with this signature.
            let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"gpuinstr_device_kernel_instrumented".as_ptr()) };
            (!symbol.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, Tell>(symbol) })
        });
        if let Some(tell) = tell {
            // SAFETY: the device library's function, taking plain values.
            unsafe { tell(kernel_object, c_int::from(instrumented)) };
        }
    }
}

/// ROCr calls this when it loads the library named in `HSA_TOOLS_LIB`.
#[no_mangle]
pub unsafe extern "C" fn OnLoad(
    api_table: *mut c_void,
    _runtime_version: u64,
    _failed_tool_count: u64,
    _failed_tool_names: *const *const c_char,
) -> bool {
    // ROCr opened this library in its own scope; a tool's calls into it
    // (gpuinstr_global, ...) and the emulated device's stop
    // (gpuinstr_rt_program_stopped) find it once it is global.
    let mut info: libc::Dl_info = std::mem::zeroed();
    // SAFETY: the address of one of our functions; `info` is ours.
    if libc::dladdr(OnLoad as *const c_void, &mut info) != 0 && !info.dli_fname.is_null() {
        // SAFETY: dladdr's name is a terminated path.
        libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_GLOBAL);
    }
    if api_table.is_null() || !gpuinstr_rt_install(api_table) {
        eprintln!("gpuinstr: error: this ROCr's API tables lack entries the gpuinstr runtime needs; it is not loaded");
        return false;
    }
    match crate::rings::ring_bytes_from_environment() {
        Ok(bytes) => with_runtime(|r| r.ring_bytes = bytes),
        Err(message) => {
            eprintln!("gpuinstr: error: {message}");
            libc::_exit(2);
        }
    }
    match crate::rings::WhenFull::from_environment() {
        Ok(when_full) => with_runtime(|r| r.ring_full = when_full),
        Err(message) => {
            eprintln!("gpuinstr: error: {message}");
            libc::_exit(2);
        }
    }
    match crate::selection::Selection::from_environment() {
        Ok(selection) => with_runtime(|r| r.selection = selection),
        Err(message) => {
            eprintln!("gpuinstr: error: selective instrumentation: {message}");
            libc::_exit(2);
        }
    }
    match crate::dynamic::Dynamic::from_env(beside_this_library("gpuinstr-dynamic-worker")) {
        Ok(dynamic) => {
            let _ = DYNAMIC.set(dynamic.map(Mutex::new));
        }
        Err(message) => {
            eprintln!("gpuinstr: error: dynamic mode: {message}");
            libc::_exit(2);
        }
    }
    if let Some(path) = std::env::var_os("GPUINSTR_TOOL_HOST").filter(|p| !p.is_empty()) {
        match HostLibrary::load(&path) {
            Ok(library) => {
                let _ = TOOL.set(library);
            }
            Err(message) => {
                // The user asked for this tool: running without it would
                // report nothing of what they wanted.
                eprintln!("gpuinstr: error: cannot load the tool's host part {}: {message}", path.to_string_lossy());
                libc::_exit(2);
            }
        }
    }
    libc::atexit(at_exit);
    true
}

/// `GPUINSTR_HOST_API` of the `gpuinstr/host.h` this runtime implements
/// (2: `gpuinstr_site` has `Location`; 3: and `LeftOut`, and
/// `gpuinstr_dispatch_points_left_out`; 4: `gpuinstr_tool_load`, code
/// objects, run-level reports; 5: rings, `gpuinstr_tool_records`; 6:
/// `gpuinstr_file_requested`).
const HOST_API: u32 = 6;

/// A tool's host part (`gpuinstr/host.h`), loaded with dlopen.
struct HostLibrary {
    load: Option<unsafe extern "C" fn(*const c_void)>,
    records: Option<unsafe extern "C" fn(*const c_void)>,
    dispatch: Option<unsafe extern "C" fn(*mut c_void)>,
    exit: Option<unsafe extern "C" fn()>,
    /// Held during every call into the tool: loads come on the program's
    /// threads, dispatches on ROCr's event thread, and host.h promises one
    /// call at a time.
    calls: Mutex<()>,
}

static TOOL: OnceLock<HostLibrary> = OnceLock::new();

fn tool() -> Option<&'static dyn ToolHost> {
    TOOL.get().map(|t| t as &dyn ToolHost)
}

fn dl_error() -> String {
    // SAFETY: dlerror returns a thread-local string or null.
    let error = unsafe { libc::dlerror() };
    if error.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-null, terminated.
        unsafe { CStr::from_ptr(error) }.to_string_lossy().to_string()
    }
}

impl HostLibrary {
    fn load(path: &std::ffi::OsStr) -> Result<HostLibrary, String> {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::CString::new(path.as_bytes()).map_err(|_| "the path has a NUL byte".to_string())?;
        // SAFETY: a terminated path; the library stays loaded for the process.
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(dl_error());
        }
        // SAFETY: the symbols, if present, have host.h's signatures.
        let (load, records, dispatch, exit) = unsafe {
            (
                libc::dlsym(handle, c"gpuinstr_tool_load".as_ptr()),
                libc::dlsym(handle, c"gpuinstr_tool_records".as_ptr()),
                libc::dlsym(handle, c"gpuinstr_tool_dispatch".as_ptr()),
                libc::dlsym(handle, c"gpuinstr_tool_exit".as_ptr()),
            )
        };
        if load.is_null() && dispatch.is_null() && exit.is_null() {
            return Err(
                "it defines none of gpuinstr_tool_load, gpuinstr_tool_dispatch and gpuinstr_tool_exit (extern \"C\")"
                    .into(),
            );
        }
        // SAFETY: host.h defines the symbol as a const uint32_t.
        let version = unsafe { libc::dlsym(handle, c"gpuinstr_tool_host_api".as_ptr()) };
        let version = (!version.is_null()).then(|| unsafe { *version.cast::<u32>() });
        if version != Some(HOST_API) {
            let built = version.map_or("an older gpuinstr/host.h".to_string(), |v| format!("host API {v}"));
            return Err(format!(
                "it was built against {built}, and this runtime has host API {HOST_API}: rebuild it against \
                 this gpuinstr's hook-sdk/include/gpuinstr/host.h"
            ));
        }
        // SAFETY: as above.
        unsafe {
            Ok(HostLibrary {
                load: (!load.is_null())
                    .then(|| std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*const c_void)>(load)),
                records: (!records.is_null())
                    .then(|| std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*const c_void)>(records)),
                dispatch: (!dispatch.is_null())
                    .then(|| std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut c_void)>(dispatch)),
                exit: (!exit.is_null()).then(|| std::mem::transmute::<*mut c_void, unsafe extern "C" fn()>(exit)),
                calls: Mutex::new(()),
            })
        }
    }

    /// Runs `f` as the only call into the tool (the lock guards no data:
    /// a poisoned one still serialises).
    fn call(&self, f: impl FnOnce()) {
        let _one_at_a_time = self.calls.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        f();
    }
}

impl ToolHost for HostLibrary {
    fn load(&self, code_object: &ToolCodeObject) {
        if let Some(callback) = self.load {
            // SAFETY: the tool gets an opaque pointer valid for the process.
            self.call(|| unsafe { callback((code_object as *const ToolCodeObject).cast()) })
        }
    }

    fn records(&self, records: &ToolRecords) {
        if let Some(callback) = self.records {
            // SAFETY: the tool gets an opaque pointer valid for the call.
            self.call(|| unsafe { callback((records as *const ToolRecords).cast()) })
        }
    }

    fn dispatch(&self, dispatch: &mut ToolDispatch) {
        if let Some(callback) = self.dispatch {
            // SAFETY: the tool gets an opaque pointer valid for the call.
            self.call(|| unsafe { callback((dispatch as *mut ToolDispatch).cast()) })
        }
    }

    fn exit(&self) {
        if let Some(callback) = self.exit {
            // SAFETY: a function of the tool's, no arguments.
            self.call(|| unsafe { callback() })
        }
    }
}

// The API of gpuinstr/host.h: the tool passes back the pointer it was given.

/// The dispatch a tool's pointer stands for.
unsafe fn dispatch_of<'d>(dispatch: *const c_void) -> Option<&'d ToolDispatch> {
    dispatch.cast::<ToolDispatch>().as_ref()
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_dispatch_id(dispatch: *const c_void) -> u64 {
    dispatch_of(dispatch).map_or(0, |d| d.id)
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_dispatch_kernel(dispatch: *const c_void) -> *const c_char {
    dispatch_of(dispatch).map_or(c"".as_ptr(), |d| d.kernel.as_ptr())
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_dispatch_grid(dispatch: *const c_void, grid: *mut u32) {
    if let (Some(d), false) = (dispatch_of(dispatch), grid.is_null()) {
        std::ptr::copy_nonoverlapping(d.grid_size.as_ptr(), grid, 3);
    }
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_dispatch_workgroup(dispatch: *const c_void, workgroup: *mut u32) {
    if let (Some(d), false) = (dispatch_of(dispatch), workgroup.is_null()) {
        std::ptr::copy_nonoverlapping(d.workgroup_size.as_ptr(), workgroup, 3);
    }
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_dispatch_points_left_out(dispatch: *const c_void) -> u32 {
    dispatch_of(dispatch).map_or(0, |d| d.points_left_out)
}

/// What the dispatch appended to the ring a host part names (nothing for
/// a null pointer or a ring it lacks).
unsafe fn appended_to(dispatch: *const c_void, ring: *const c_char) -> crate::rings::Appended {
    match dispatch_of(dispatch) {
        Some(d) if !ring.is_null() => d.ring_records(&CStr::from_ptr(ring).to_string_lossy()).unwrap_or_default(),
        _ => Default::default(),
    }
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_dispatch_records(dispatch: *const c_void, ring: *const c_char) -> u64 {
    appended_to(dispatch, ring).records
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_dispatch_dropped(dispatch: *const c_void, ring: *const c_char) -> u64 {
    appended_to(dispatch, ring).dropped
}

/// The records a tool's pointer stands for.
unsafe fn records_of<'r>(records: *const c_void) -> Option<&'r ToolRecords<'r>> {
    records.cast::<ToolRecords>().as_ref()
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_records_dispatch_id(records: *const c_void) -> u64 {
    records_of(records).map_or(0, |r| r.dispatch)
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_records_kernel(records: *const c_void) -> *const c_char {
    records_of(records).map_or(c"".as_ptr(), |r| r.kernel.as_ptr())
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_records_code_object(records: *const c_void) -> *const c_void {
    records_of(records).map_or(std::ptr::null(), |r| std::sync::Arc::as_ptr(r.code_object).cast())
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_records_ring(records: *const c_void) -> *const c_char {
    records_of(records).map_or(c"".as_ptr(), |r| r.ring.as_ptr())
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_records_first(records: *const c_void) -> u64 {
    records_of(records).map_or(0, |r| r.first)
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_records_data(
    records: *const c_void,
    count: *mut usize,
    record_bytes: *mut usize,
) -> *const c_void {
    let Some(r) = records_of(records) else { return std::ptr::null() };
    if !count.is_null() {
        *count = r.bytes.len() / r.record_bytes as usize;
    }
    if !record_bytes.is_null() {
        *record_bytes = r.record_bytes as usize;
    }
    r.bytes.as_ptr().cast()
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_global(
    dispatch: *const c_void,
    name: *const c_char,
    size: *mut usize,
) -> *const c_void {
    let Some(d) = dispatch_of(dispatch) else { return std::ptr::null() };
    if name.is_null() {
        return std::ptr::null();
    }
    let name = CStr::from_ptr(name).to_string_lossy();
    match d.global(&name) {
        Some(bytes) => {
            if !size.is_null() {
                *size = bytes.len();
            }
            bytes.as_ptr().cast()
        }
        None => std::ptr::null(),
    }
}

/// `gpuinstr_site` of host.h: strings as addresses of NUL-terminated
/// copies that live as long as the process.
#[repr(C)]
pub struct CSite {
    address: u64,
    opcode: u32,
    function: usize,
    opcode_name: usize,
    text: usize,
    location: usize,
    left_out: u32,
}

/// Per code object (by its address: the runtime keeps every code object
/// it loaded until the process ends, so addresses are never reused), its
/// point table laid out for C.
static SITE_TABLES: Mutex<Vec<(usize, &'static [CSite])>> = Mutex::new(Vec::new());

fn c_string(text: &str) -> usize {
    let text = std::ffi::CString::new(text.replace('\0', " ")).expect("no NUL left");
    Box::leak(text.into_boxed_c_str()).as_ptr() as usize
}

fn site_table(code_object: &crate::code_objects::InstrumentedCodeObject) -> &'static [CSite] {
    let key = code_object as *const _ as usize;
    let Ok(mut tables) = SITE_TABLES.lock() else { return &[] };
    if let Some((_, table)) = tables.iter().find(|(k, _)| *k == key) {
        return table;
    }
    // Each distinct string once (a function's name is in all its sites).
    let mut strings = std::collections::HashMap::<&str, usize>::new();
    let mut string = |text| *strings.entry(text).or_insert_with(|| c_string(text));
    let sites: Vec<CSite> = code_object
        .points
        .iter()
        .map(|p| CSite {
            address: p.address,
            opcode: p.opcode,
            function: string(&p.function),
            opcode_name: string(&p.opcode_name),
            text: string(&p.text),
            location: string(&p.location),
            left_out: u32::from(p.left_out),
        })
        .collect();
    let table: &'static [CSite] = Box::leak(sites.into_boxed_slice());
    tables.push((key, table));
    table
}

/// `table` for C: its address, and its length in `*count`.
unsafe fn sites_out(table: &'static [CSite], count: *mut usize) -> *const CSite {
    if !count.is_null() {
        *count = table.len();
    }
    table.as_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_sites(dispatch: *const c_void, count: *mut usize) -> *const CSite {
    let Some(d) = dispatch_of(dispatch) else { return std::ptr::null() };
    sites_out(site_table(&d.code_object.code_object), count)
}

/// The code object a tool's pointer stands for.
unsafe fn code_object_of<'c>(code_object: *const c_void) -> Option<&'c ToolCodeObject> {
    code_object.cast::<ToolCodeObject>().as_ref()
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_dispatch_code_object(dispatch: *const c_void) -> *const c_void {
    dispatch_of(dispatch).map_or(std::ptr::null(), |d| std::sync::Arc::as_ptr(&d.code_object).cast())
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_code_object_index(code_object: *const c_void) -> u32 {
    code_object_of(code_object).map_or(u32::MAX, |c| c.index)
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_code_object_processor(code_object: *const c_void) -> *const c_char {
    code_object_of(code_object).map_or(c"".as_ptr(), |c| c.processor.as_ptr())
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_code_object_kernel_count(code_object: *const c_void) -> usize {
    code_object_of(code_object).map_or(0, |c| c.kernels.len())
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_code_object_kernel(code_object: *const c_void, kernel: usize) -> *const c_char {
    code_object_of(code_object).and_then(|c| c.kernels.get(kernel)).map_or(std::ptr::null(), |k| k.as_ptr())
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_code_object_sites(code_object: *const c_void, count: *mut usize) -> *const CSite {
    let Some(c) = code_object_of(code_object) else { return std::ptr::null() };
    sites_out(site_table(&c.code_object), count)
}

unsafe fn report(dispatch: *mut c_void, key: *const c_char, value: ToolValue) {
    let Some(d) = dispatch.cast::<ToolDispatch>().as_mut() else { return };
    if key.is_null() {
        return;
    }
    d.report(CStr::from_ptr(key).to_string_lossy().to_string(), value);
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_report_u64(dispatch: *mut c_void, key: *const c_char, value: u64) {
    report(dispatch, key, ToolValue::Number(value));
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_report_json(dispatch: *mut c_void, key: *const c_char, json: *const c_char) {
    if json.is_null() {
        return;
    }
    report(dispatch, key, ToolValue::parsed(&CStr::from_ptr(json).to_string_lossy()));
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_report_text(dispatch: *mut c_void, key: *const c_char, text: *const c_char) {
    if !text.is_null() {
        report(dispatch, key, ToolValue::Text(CStr::from_ptr(text).to_string_lossy().to_string()));
    }
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_report_warning(dispatch: *mut c_void, text: *const c_char) {
    let Some(d) = dispatch.cast::<ToolDispatch>().as_mut() else { return };
    if !text.is_null() {
        d.warn(CStr::from_ptr(text).to_string_lossy().to_string());
    }
}

/// `key` and `value` into the report's run-level `tool` values.
unsafe fn report_run(key: *const c_char, value: ToolValue) {
    if key.is_null() {
        return;
    }
    let key = CStr::from_ptr(key).to_string_lossy().to_string();
    with_runtime(|r| r.report.tool.0.push((key, value)));
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_report_run_u64(key: *const c_char, value: u64) {
    report_run(key, ToolValue::Number(value));
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_report_run_text(key: *const c_char, text: *const c_char) {
    if !text.is_null() {
        report_run(key, ToolValue::Text(CStr::from_ptr(text).to_string_lossy().to_string()));
    }
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_report_run_json(key: *const c_char, json: *const c_char) {
    if !json.is_null() {
        report_run(key, ToolValue::parsed(&CStr::from_ptr(json).to_string_lossy()));
    }
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_report_run_warning(text: *const c_char) {
    if !text.is_null() {
        let text = CStr::from_ptr(text).to_string_lossy().to_string();
        with_runtime(|r| r.report.warn(format!("the tool: {text}")));
    }
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_file_requested(name: *const c_char) -> c_int {
    if name.is_null() {
        return 0;
    }
    let name = CStr::from_ptr(name).to_string_lossy();
    let keeps_records = runtime().lock().ok().is_some_and(|r| r.database_keeps_records());
    c_int::from(crate::tool_files::requested(&name) || !keeps_records)
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_write(name: *const c_char, bytes: *const c_void, size: usize) {
    if name.is_null() || (bytes.is_null() && size > 0) {
        return;
    }
    let name = CStr::from_ptr(name).to_string_lossy();
    let bytes = match size {
        0 => &[][..],
        _ => std::slice::from_raw_parts(bytes.cast::<u8>(), size),
    };
    let (report, _) = crate::report_path();
    with_runtime(|r| r.write_tool_file(&report, &name, bytes));
}

/// ROCr calls this from `hsa_shut_down`.
#[no_mangle]
pub extern "C" fn OnUnload() {
    crate::finish(runtime(), &Rocr, tool());
}

extern "C" fn at_exit() {
    crate::finish(runtime(), &Rocr, tool());
}

/// The emulated GPU stopped the program (an instruction it lacks, an
/// access outside memory) and ends the process after this returns, without
/// its exit handlers: the runtime says so in the report and writes it
/// (and the database) with what completed before the stop.
#[no_mangle]
pub unsafe extern "C" fn gpuinstr_rt_program_stopped(message: *const c_char) {
    let message = if message.is_null() { "".into() } else { CStr::from_ptr(message).to_string_lossy() };
    // A program run for no tool (nothing instrumented, no host part, no
    // report asked for) gets no report at its stop, as at its exit: the
    // device's own message says what happened.
    let mut for_a_tool = tool().is_some() || crate::report_path().1;
    with_runtime(|r| {
        for_a_tool |= !r.report.is_empty() || !r.report.dynamic.is_empty();
        if for_a_tool {
            r.report.warn(format!(
                "the emulated GPU stopped the program ({message}): the dispatches in flight never completed, and the report holds what did"
            ))
        }
    });
    crate::finish(runtime(), &Rocr, tool());
}

static DYNAMIC: OnceLock<Option<Mutex<crate::dynamic::Dynamic>>> = OnceLock::new();

/// `file` in the directory this library was loaded from.
fn beside_this_library(file: &str) -> Option<std::path::PathBuf> {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr fills `info` for an address of this library.
    let found = unsafe { libc::dladdr(beside_this_library as *const c_void, &mut info) } != 0;
    if !found || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr's file name is a NUL-terminated string it owns.
    let library = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().to_string();
    Some(std::path::Path::new(&library).with_file_name(file))
}

/// Dynamic mode's answer for a code object about to be read: 0 and a
/// replacement (or none), or an HSA status refusing it.
fn replacement_for(bytes: &[u8]) -> Option<(*const u8, usize)> {
    let Some(Some(dynamic)) = DYNAMIC.get() else { return None };
    let Ok(mut dynamic) = dynamic.lock() else { return None };
    // A bug of ours in the part that runs here loads the code object as it
    // is, said as loudly as any other failure.
    let replaced = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dynamic.replace(bytes)));
    let replacement = match replaced {
        Ok(replacement) => replacement?,
        Err(panic) => {
            let why =
                panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
            let message = format!(
                "a code object the program loads ({} bytes) could not be instrumented and runs as it is, so the tool \
                 sees none of its kernels: gpuinstr failed inside ({})",
                bytes.len(),
                why.unwrap_or_else(|| "a panic".into())
            );
            if !dynamic.allows_partial() {
                crate::note_run_failure(crate::RunFailure::NotInstrumented, &message);
            }
            with_runtime(|r| r.report.warn(message));
            return None;
        }
    };
    for warning in &replacement.warnings {
        with_runtime(|r| r.report.warn(warning.clone()));
    }
    if replacement.record.source == crate::dynamic::NOT_INSTRUMENTED {
        // Loaded as it is: the program stays correct, the tool misses its
        // kernels. Said at once and in the report; without --allow-partial
        // gpuinstr-run also fails after the program (the file it names).
        let why = replacement.record.note.clone().unwrap_or_default();
        let message = format!(
            "a code object the program loads ({} bytes) could not be instrumented and runs as it is, so the tool \
             sees none of its kernels: {why}",
            bytes.len()
        );
        if !dynamic.allows_partial() {
            crate::note_run_failure(crate::RunFailure::NotInstrumented, &message);
        }
        with_runtime(|r| r.report.warn(message));
    }
    // `dynamic` keeps the bytes for the rest of the process.
    let place = replacement.bytes.as_ref().map(|b| (b.as_ptr(), b.len()));
    with_runtime(|r| {
        if let Some((pointer, _)) = place {
            r.code_object_replaced(pointer, bytes);
        }
        r.report.dynamic.push(replacement.record)
    });
    place
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_rt_replace_code_object(
    bytes: *const c_void,
    size: usize,
    replaced: *mut *const c_void,
    replaced_size: *mut usize,
) -> u32 {
    if bytes.is_null() || replaced.is_null() || replaced_size.is_null() {
        return 0;
    }
    // SAFETY: the program hands ROCr `size` bytes at `bytes`.
    let given = std::slice::from_raw_parts(bytes.cast::<u8>(), size);
    match replacement_for(given) {
        Some((pointer, length)) => {
            *replaced = pointer.cast();
            *replaced_size = length;
            0
        }
        None => 0,
    }
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_rt_replace_code_object_file(
    fd: c_int,
    replaced: *mut *const c_void,
    replaced_size: *mut usize,
) -> u32 {
    if !matches!(DYNAMIC.get(), Some(Some(_))) || replaced.is_null() || replaced_size.is_null() {
        return 0;
    }
    let bytes = match read_whole(fd) {
        Ok(bytes) => bytes,
        Err(error) => {
            with_runtime(|r| r.reader_unreadable(error));
            return 0;
        }
    };
    match replacement_for(&bytes) {
        Some((pointer, length)) => {
            *replaced = pointer.cast();
            *replaced_size = length;
            0
        }
        None => 0,
    }
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_rt_on_reader(reader: u64, bytes: *const c_void, size: usize) {
    if bytes.is_null() {
        return;
    }
    // SAFETY: ROCr accepted `size` bytes at `bytes` as a code object.
    let bytes = std::slice::from_raw_parts(bytes.cast::<u8>(), size);
    with_runtime(|r| r.reader_created(reader, bytes));
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_rt_on_reader_file(reader: u64, fd: c_int) {
    match read_whole(fd) {
        Ok(bytes) => with_runtime(|r| r.reader_created(reader, &bytes)),
        Err(error) => with_runtime(|r| r.reader_unreadable(error)),
    }
}

/// The file open as `fd`, read from its start without moving its offset.
fn read_whole(fd: c_int) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        // SAFETY: `chunk` is writable for its length; pread leaves the offset.
        let read = unsafe { libc::pread(fd, chunk.as_mut_ptr().cast(), chunk.len(), bytes.len() as libc::off_t) };
        match read {
            0 => return Ok(bytes),
            n if n > 0 => bytes.extend_from_slice(&chunk[..n as usize]),
            _ => {
                let error = std::io::Error::last_os_error();
                if error.kind() != std::io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }
        }
    }
}

#[no_mangle]
pub extern "C" fn gpuinstr_rt_on_reader_destroyed(reader: u64) {
    with_runtime(|r| r.reader_destroyed(reader));
}

#[no_mangle]
pub extern "C" fn gpuinstr_rt_on_code_object_loaded(
    executable: u64,
    agent: u64,
    reader: u64,
    load_delta: i64,
    delta_known: c_int,
) {
    let delta = (delta_known != 0).then_some(load_delta);
    runtime::code_object_loaded(runtime(), &Rocr, tool(), (executable, agent, reader), delta);
    // A code object with rings: a thread empties them while kernels run.
    let rings = runtime().lock().ok().filter(|r| !r.rings.all().is_empty()).map(|r| r.rings.clone());
    if let Some(rings) = rings {
        if let Err(error) = rings.start_draining(&Rocr, tool(), runtime()) {
            eprintln!("gpuinstr: error: cannot start the thread that empties rings of records ({error}); a kernel appending to a full ring would wait for ever");
            // SAFETY: ends the process, as the user's program cannot go on.
            unsafe { libc::_exit(2) };
        }
    }
}

#[no_mangle]
pub extern "C" fn gpuinstr_rt_on_executable_frozen(executable: u64) {
    with_runtime(|r| r.executable_frozen(&Rocr, executable));
}

#[no_mangle]
pub extern "C" fn gpuinstr_rt_on_executable_destroyed(executable: u64) {
    with_runtime(|r| r.executable_destroyed(&Rocr, executable));
}

#[no_mangle]
pub unsafe extern "C" fn gpuinstr_rt_on_packets(
    queue: *const c_void,
    packets: *const c_void,
    count: u64,
    writer: PacketWriter,
) {
    // SAFETY: ROCr hands `count` whole 64-byte packets.
    let given = std::slice::from_raw_parts(packets.cast::<Packet>(), count as usize);
    let mut out = None;
    with_runtime(|r| out = Some(r.packets(&Rocr, queue as u64, given)));
    match out {
        Some(out) => writer(out.as_ptr().cast(), out.len() as u64),
        None => writer(packets, count),
    }
}
