//! `libgpuinstr_rt.so`, gpuinstr's runtime: an HSA tool library that ROCr
//! loads when `HSA_TOOLS_LIB` names it (`gpuinstr-run` does). It sees
//! every code object the program loads, recognises the instrumented ones
//! (their `.gpuinstr.sites` table), and after each dispatch of one of
//! their kernels has the device copy the tool's globals out to host memory
//! and reset them (a kernel of its own, queued behind the dispatch). At
//! exit it prints a summary and writes a JSON report (`GPUINSTR_REPORT`,
//! default `gpuinstr-report.json`; schema in docs/runtime.md).
//!
//! Modules in the order an event goes through them: [`hsa`] (the FFI: ROCr's
//! calls in, HSA calls out), [`dynamic`] (code objects instrumented as they
//! load, in dynamic mode), [`code_objects`] (is it instrumented, where are
//! its globals), [`packets`] (a dispatch rewritten), [`runtime`] (the
//! state), [`rings`] (records streamed to the tool while kernels run),
//! [`selection`] (which dispatches run instrumented, when the
//! originals were kept), [`tool_files`] (what a tool's host part writes),
//! [`report`].

pub mod cache;
pub mod code_objects;
pub mod database;
pub mod dynamic;
pub mod hsa;
pub mod ordering;
pub mod packets;
pub mod report;
pub mod rings;
pub mod runtime;
pub mod selection;
pub mod tool_files;
pub mod worker;

use std::path::PathBuf;
use std::sync::Mutex;

/// Where the JSON report goes, and whether the user asked for it (a
/// program that loads nothing instrumented then still gets one).
pub fn report_path() -> (PathBuf, bool) {
    match std::env::var_os("GPUINSTR_REPORT").filter(|p| !p.is_empty()) {
        Some(path) => (path.into(), true),
        None => ("gpuinstr-report.json".into(), false),
    }
}

/// What makes a run fail after the program although the program ran as it
/// would: the lines of the file `GPUINSTR_RUN_FAILURES` names
/// (`gpuinstr-run` reads it and exits non-zero; the format is
/// `gpuinstr_device_preload::run::RunFailure`'s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunFailure {
    /// A code object ran as it was: the tool saw none of its kernels.
    NotInstrumented,
    /// A result the user asked for (the report, the database, a tool's
    /// file) could not be written.
    NotWritten,
}

/// Notes `failure` (one line, `KIND<TAB>message`) where `gpuinstr-run`
/// reads it; a runtime loaded without it has only said so.
pub fn note_run_failure(failure: RunFailure, message: &str) {
    let Some(path) = std::env::var_os("GPUINSTR_RUN_FAILURES").filter(|p| !p.is_empty()) else { return };
    use std::io::Write;
    let kind = match failure {
        RunFailure::NotInstrumented => "not-instrumented",
        RunFailure::NotWritten => "not-written",
    };
    let line = format!("{kind}\t{}\n", message.replace('\n', " "));
    let _ =
        std::fs::OpenOptions::new().create(true).append(true).open(path).and_then(|mut f| f.write_all(line.as_bytes()));
}

/// At exit (or `hsa_shut_down`): records what finished, prints the summary
/// and writes the report, once. Results that cannot be written are errors
/// and fail the run.
pub fn finish(state: &Mutex<runtime::Runtime>, hsa: &dyn runtime::Hsa, tool: Option<&dyn runtime::ToolHost>) {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        runtime::finish(state, hsa, tool);
        // No records after the tool's last call.
        if let Some(rings) = state.lock().ok().map(|r| r.rings.clone()) {
            rings.stop_draining();
        }
        if let Some(tool) = tool {
            tool.exit();
        }
        let Ok(mut state) = state.lock() else { return };
        state.close_tool_files();
        let (path, asked) = report_path();
        if state.report.is_empty() && !asked {
            return;
        }
        let database = state.finish_database();
        eprint!("{}", state.report.summary());
        if let Some(database) = database {
            eprintln!("gpuinstr: database written to {}", database.display());
        }
        match state.report.write(&path) {
            Ok(()) => eprintln!("gpuinstr: report written to {}", path.display()),
            Err(error) => state.lost_outputs.push(format!("cannot write the report {}: {error}", path.display())),
        }
        for lost in &state.lost_outputs {
            eprintln!("gpuinstr: error: {lost}");
            note_run_failure(RunFailure::NotWritten, lost);
        }
        state.release(hsa);
    });
}
