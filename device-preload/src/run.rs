//! What `gpuinstr-run` does, as a library (the binary parses arguments and
//! execs; tests in other packages build the same command): the
//! environment that puts a program on the emulated GPU with gpuinstr's
//! runtime watching it.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

/// How to run a program.
#[derive(Clone, Debug, Default)]
pub struct Run {
    /// `gfx90a` or `gfx908`.
    pub target: String,
    /// `GPUINSTR_DEVICE_MEMORY`: the device memory asked for.
    pub device_memory: Option<String>,
    /// `GPUINSTR_DEVICE_SRAMECC`: the board's ECC off (`Some(false)`); on
    /// by default, as on the boards.
    pub sramecc: Option<bool>,
    /// `libgpuinstr_device_preload.so`.
    pub device: PathBuf,
    /// `libgpuinstr_device_kfd.so` (`GPUINSTR_DEVICE_KFD_LIBRARY`), which the
    /// preload loads when the program opens the device; none: the one
    /// beside the preload.
    pub device_kfd: Option<PathBuf>,
    /// `libgpuinstr_rt.so`, or none to leave the runtime out.
    pub runtime: Option<PathBuf>,
    /// Dynamic mode: the tool and plan to instrument code objects with as
    /// the program loads them (`GPUINSTR_DYNAMIC_TOOL`, `_PLAN`).
    pub dynamic: Option<(PathBuf, PathBuf)>,
    /// Dynamic mode's worker, `gpuinstr-dynamic-worker`
    /// (`GPUINSTR_DYNAMIC_WORKER`; none: the one beside the runtime).
    pub dynamic_worker: Option<PathBuf>,
    /// Dynamic mode's cache directory (`GPUINSTR_CACHE`; `none` for no cache).
    pub cache: Option<PathBuf>,
    /// Accept code objects with points left out, or left uninstrumented (`GPUINSTR_ALLOW_PARTIAL`).
    pub allow_partial: bool,
    /// Where the runtime writes a line for each thing that fails the run
    /// after the program: a code object dynamic mode could not instrument
    /// and loaded as it is (without `allow_partial`), a result it could not
    /// write (`GPUINSTR_RUN_FAILURES`; [`failures`] reads it back).
    pub failures: Option<PathBuf>,
    /// Dynamic mode's register growth: `free`, `never` or `always` (`GPUINSTR_GROW_REGISTERS`).
    pub grow_registers: Option<String>,
    /// Selective instrumentation: kernels whose name contains one of these
    /// (`GPUINSTR_SELECT_KERNEL`), each kernel's first N dispatches
    /// (`GPUINSTR_SELECT_FIRST`), one in N of them (`GPUINSTR_SELECT_EVERY`).
    pub select_kernel: Vec<String>,
    pub select_first: Option<u64>,
    pub select_every: Option<u64>,
    /// A tool's host part for the runtime to load (`GPUINSTR_TOOL_HOST`).
    pub tool_host: Option<PathBuf>,
    /// The tool's files the user asks for, by name or `all`
    /// (`GPUINSTR_TOOL_FILES`): a tool whose records the database keeps
    /// writes its text copy of them only on request.
    pub tool_files: Vec<String>,
    /// The runtime's JSON report (`GPUINSTR_REPORT`).
    pub report: Option<PathBuf>,
    /// The run's database (`GPUINSTR_DATABASE`).
    pub database: Option<PathBuf>,
    /// Leave the rings' records out of the database (`GPUINSTR_DATABASE_RECORDS=0`).
    pub no_database_records: bool,
    /// Host memory per ring of records (`GPUINSTR_RING_BYTES`).
    pub ring_bytes: Option<u64>,
    /// Drop (counted) the records that do not fit a full ring instead of
    /// waiting (`GPUINSTR_RING_FULL=drop`).
    pub drop_when_ring_full: bool,
    /// The device's per-dispatch counts (`GPUINSTR_DEVICE_DISPATCH_LOG`).
    pub dispatch_log: Option<PathBuf>,
    /// Opcodes whose EXEC history the dispatch log gives (`GPUINSTR_DEVICE_DISPATCH_LOG_EXEC`).
    pub dispatch_log_exec: Vec<String>,
    /// Whether the dispatch log gives every lane's flat and global access
    /// (`GPUINSTR_DEVICE_DISPATCH_LOG_ACCESSES`).
    pub dispatch_log_accesses: bool,
    /// Whether the dispatch log gives digests of the EXEC history and the
    /// accesses instead of the lists (`GPUINSTR_DEVICE_DISPATCH_LOG_DIGESTS`).
    pub dispatch_log_digests: bool,
    /// Instructions a wave may run before the device stops it
    /// (`GPUINSTR_DEVICE_MAX_INSTRUCTIONS`; the emulator's default if none).
    pub max_instructions: Option<u64>,
    pub trace: bool,
    pub stats: bool,
}

/// `file` in `directory`, or where `variable` says; `package` builds it.
pub fn library(variable: &str, directory: &Path, file: &str, package: &str) -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(variable) {
        return Ok(path.into());
    }
    let library = directory.join(file);
    if library.exists() {
        Ok(library)
    } else {
        Err(format!(
            "{} is missing; build it with `cargo build --release -p {package}` (or name it in {variable})",
            library.display()
        ))
    }
}

/// ROCr splits `HSA_TOOLS_LIB` at spaces and reads `"` and `\` as quotes
/// and escapes: those are escaped.
fn tools_entry(path: &Path) -> String {
    let mut entry = String::new();
    for c in path.to_string_lossy().chars() {
        if matches!(c, ' ' | '"' | '\\') {
            entry.push('\\');
        }
        entry.push(c);
    }
    entry
}

/// `existing` (a variable's value in this process) with `value` added.
fn joined(existing: Option<OsString>, value: OsString) -> OsString {
    match existing.filter(|v| !v.is_empty()) {
        Some(mut existing) => {
            existing.push(" ");
            existing.push(value);
            existing
        }
        None => value,
    }
}

impl Run {
    /// The command that runs `program arguments...` so.
    pub fn command(&self, program: &OsStr, arguments: &[OsString]) -> Command {
        let mut command = Command::new(program);
        command
            .args(arguments)
            .env("LD_PRELOAD", joined(std::env::var_os("LD_PRELOAD"), self.device.clone().into_os_string()))
            .env("GPUINSTR_DEVICE_TARGET", &self.target)
            .env("GPUINSTR_DEVICE_MEMORY", self.device_memory.as_deref().unwrap_or(""))
            // The emulated GPU has no SDMA engines: ROCr copies with blit kernels.
            .env("HSA_ENABLE_SDMA", "0");
        // CoMGR 3.0's cache (ROCm 7.0, sid) gives every compressed offload
        // bundle it unbundles the same key, so HIP runs the first bundle's
        // code for every later one (docs/device.md). Off unless the
        // program's environment says otherwise.
        if std::env::var_os("AMD_COMGR_CACHE").is_none() {
            command.env("AMD_COMGR_CACHE", "0");
        }
        if let Some(on) = self.sramecc {
            command.env("GPUINSTR_DEVICE_SRAMECC", if on { "on" } else { "off" });
        }
        if let Some(kfd) = &self.device_kfd {
            command.env("GPUINSTR_DEVICE_KFD_LIBRARY", kfd);
        }
        if let Some(runtime) = &self.runtime {
            command.env("HSA_TOOLS_LIB", joined(std::env::var_os("HSA_TOOLS_LIB"), tools_entry(runtime).into()));
        }
        if let Some((tool, plan)) = &self.dynamic {
            command.env("GPUINSTR_DYNAMIC_TOOL", tool).env("GPUINSTR_DYNAMIC_PLAN", plan);
        }
        if let Some(worker) = &self.dynamic_worker {
            command.env("GPUINSTR_DYNAMIC_WORKER", worker);
        }
        if let Some(cache) = &self.cache {
            command.env("GPUINSTR_CACHE", cache);
        }
        if self.allow_partial {
            command.env("GPUINSTR_ALLOW_PARTIAL", "1");
        }
        if let Some(path) = &self.failures {
            command.env("GPUINSTR_RUN_FAILURES", path);
        }
        if let Some(growth) = &self.grow_registers {
            command.env("GPUINSTR_GROW_REGISTERS", growth);
        }
        if !self.select_kernel.is_empty() {
            command.env("GPUINSTR_SELECT_KERNEL", self.select_kernel.join(","));
        }
        if let Some(first) = self.select_first {
            command.env("GPUINSTR_SELECT_FIRST", first.to_string());
        }
        if let Some(every) = self.select_every {
            command.env("GPUINSTR_SELECT_EVERY", every.to_string());
        }
        if !self.tool_files.is_empty() {
            command.env("GPUINSTR_TOOL_FILES", self.tool_files.join(","));
        }
        if let Some(tool_host) = &self.tool_host {
            command.env("GPUINSTR_TOOL_HOST", tool_host);
        }
        if let Some(report) = &self.report {
            command.env("GPUINSTR_REPORT", report);
        }
        if let Some(database) = &self.database {
            command.env("GPUINSTR_DATABASE", database);
        }
        if self.no_database_records {
            command.env("GPUINSTR_DATABASE_RECORDS", "0");
        }
        if let Some(bytes) = self.ring_bytes {
            command.env("GPUINSTR_RING_BYTES", bytes.to_string());
        }
        if self.drop_when_ring_full {
            command.env("GPUINSTR_RING_FULL", "drop");
        }
        if let Some(log) = &self.dispatch_log {
            command.env("GPUINSTR_DEVICE_DISPATCH_LOG", log);
        }
        if !self.dispatch_log_exec.is_empty() {
            command.env("GPUINSTR_DEVICE_DISPATCH_LOG_EXEC", self.dispatch_log_exec.join(","));
        }
        if self.dispatch_log_accesses {
            command.env("GPUINSTR_DEVICE_DISPATCH_LOG_ACCESSES", "1");
        }
        if self.dispatch_log_digests {
            command.env("GPUINSTR_DEVICE_DISPATCH_LOG_DIGESTS", "1");
        }
        if let Some(limit) = self.max_instructions {
            command.env("GPUINSTR_DEVICE_MAX_INSTRUCTIONS", limit.to_string());
        }
        if self.trace {
            command.env("GPUINSTR_DEVICE_TRACE", "1");
        }
        if self.stats {
            command.env("GPUINSTR_DEVICE_STATS", "1");
        }
        command
    }
}

/// What failed a run after the program, as the runtime noted it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunFailure {
    /// A code object dynamic mode could not instrument ran as it was.
    NotInstrumented(String),
    /// A result the user asked for could not be written.
    NotWritten(String),
}

/// What the runtime noted in the file [`Run::failures`] names (lines
/// `KIND<TAB>message`; nothing when the file does not exist).
pub fn failures(path: &Path) -> Vec<RunFailure> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|line| match line.split_once('\t') {
            Some(("not-instrumented", message)) => RunFailure::NotInstrumented(message.into()),
            Some((_, message)) => RunFailure::NotWritten(message.into()),
            None => RunFailure::NotWritten(line.into()),
        })
        .collect()
}

/// The exit status of `gpuinstr-run` for a program that exited with `code`
/// when `failed`: a tool that saw less than ran, or results that were not
/// written, must not look like a success, so 0 becomes 1; a failure of the
/// program's own stays its status.
pub fn exit_code_after(code: i32, failed: &[RunFailure]) -> i32 {
    if code == 0 && !failed.is_empty() {
        1
    } else {
        code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_whose_code_objects_went_uninstrumented_or_results_unwritten_fails() {
        let failed = vec![RunFailure::NotInstrumented("a code object ... could not be instrumented".into())];
        assert_eq!(exit_code_after(0, &failed), 1);
        assert_eq!(exit_code_after(3, &failed), 3);
        assert_eq!(exit_code_after(0, &[]), 0);
        let dir = std::env::temp_dir().join(format!("gpuinstr-failures-test-{}", std::process::id()));
        std::fs::write(&dir, "not-instrumented\tone\nnot-written\tcannot write the report r.json\n").unwrap();
        let read = failures(&dir);
        std::fs::remove_file(&dir).unwrap();
        assert_eq!(
            read,
            [
                RunFailure::NotInstrumented("one".into()),
                RunFailure::NotWritten("cannot write the report r.json".into())
            ]
        );
        assert_eq!(exit_code_after(0, &read), 1);
    }

    #[test]
    fn a_runtime_path_with_spaces_or_quotes_survives_rocr_splitting_it() {
        assert_eq!(tools_entry(Path::new("/opt/gpuinstr/libgpuinstr_rt.so")), "/opt/gpuinstr/libgpuinstr_rt.so");
        assert_eq!(tools_entry(Path::new("/my tools/a\"b\\c.so")), "/my\\ tools/a\\\"b\\\\c.so");
    }
}
