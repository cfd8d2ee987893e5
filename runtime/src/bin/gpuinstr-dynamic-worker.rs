//! `gpuinstr-dynamic-worker REQUEST`: instruments one code object for
//! dynamic mode, in a process of its own (`gpuinstr_rt::worker`): reads the
//! JSON request in the file REQUEST, writes the outcome as JSON on standard
//! output. The runtime starts it; a worker that dies leaves the program
//! running the code object as it is.

use std::process::ExitCode;

/// mimalloc, as in `gpuinstr-link`: the instrumentation is the same work.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: gpuinstr-dynamic-worker REQUEST (started by gpuinstr's runtime in dynamic mode)");
        return ExitCode::from(2);
    };
    let request: gpuinstr_rt::worker::Request = match std::fs::read(&path)
        .map_err(|e| e.to_string())
        .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
    {
        Ok(request) => request,
        Err(error) => {
            eprintln!("gpuinstr-dynamic-worker: {}: {error}", std::path::Path::new(&path).display());
            return ExitCode::from(2);
        }
    };
    let outcome = gpuinstr_rt::worker::serve(&request);
    match serde_json::to_string(&outcome) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("gpuinstr-dynamic-worker: {error}");
            ExitCode::from(1)
        }
    }
}
