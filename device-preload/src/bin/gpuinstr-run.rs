//! `gpuinstr-run [--target gfx90a|gfx908] -- PROGRAM [ARGS...]`: runs an
//! unmodified ROCm program on the emulated GPU. It puts the device library
//! (`libgpuinstr_device_preload.so`, next to this binary) in `LD_PRELOAD` and
//! executes the program; ROCr, HIP's runtime and the program stay as they
//! are.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use clap::Parser;

#[derive(Parser)]
#[command(about = "Run a ROCm program on gpuinstr's emulated GPU")]
struct Arguments {
    /// The emulated GPU: gfx90a (an MI210) or gfx908 (an MI100).
    #[arg(long, default_value = "gfx90a", value_parser = ["gfx90a", "gfx908"])]
    target: String,
    /// Print every call the device answers (to standard error).
    #[arg(long)]
    trace: bool,
    /// Print at exit how many dispatches and wave instructions the emulated
    /// GPU ran, and how fast.
    #[arg(long)]
    stats: bool,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<String>,
}

fn device_library() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("GPUINSTR_DEVICE_LIBRARY") {
        return Ok(path.into());
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let directory = exe.parent().ok_or("this executable has no directory")?;
    let library = directory.join("libgpuinstr_device_preload.so");
    if library.exists() {
        Ok(library)
    } else {
        Err(format!(
            "the device library {} is missing; build it with `cargo build --release -p gpuinstr-device-preload` \
             (or name it in GPUINSTR_DEVICE_LIBRARY)",
            library.display()
        ))
    }
}

fn main() -> ExitCode {
    let arguments = Arguments::parse();
    let library = match device_library() {
        Ok(library) => library,
        Err(message) => {
            eprintln!("gpuinstr-run: error: {message}");
            return ExitCode::from(2);
        }
    };
    let mut preload = library.into_os_string();
    if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(" ");
        preload.push(existing);
    }
    let mut command = Command::new(&arguments.command[0]);
    command
        .args(&arguments.command[1..])
        .env("LD_PRELOAD", preload)
        .env("GPUINSTR_DEVICE_TARGET", &arguments.target)
        // The emulated GPU has no SDMA engines: ROCr copies with blit kernels.
        .env("HSA_ENABLE_SDMA", "0");
    if arguments.trace {
        command.env("GPUINSTR_DEVICE_TRACE", "1");
    }
    if arguments.stats {
        command.env("GPUINSTR_DEVICE_STATS", "1");
    }
    let error = command.exec();
    eprintln!("gpuinstr-run: error: cannot run `{}`: {error}", arguments.command[0]);
    ExitCode::from(127)
}
