//! `gpuinstr-run [--target gfx90a|gfx908|gfx942|gfx950] [--report FILE] -- PROGRAM [ARGS...]`:
//! runs an unmodified ROCm program on the emulated GPU, with gpuinstr's
//! runtime watching it. It puts the device library
//! (`libgpuinstr_device_preload.so`, next to this binary) in `LD_PRELOAD`,
//! names the runtime (`libgpuinstr_rt.so`, next to it too) in
//! `HSA_TOOLS_LIB` and executes the program; ROCr, HIP's runtime and the
//! program stay as they are. A program whose code objects are instrumented
//! then reports its tools' results at exit. In dynamic mode without
//! `--allow-partial` it waits for the program instead of becoming it: a
//! code object that could not be instrumented runs as it is (the program
//! stays correct), and `gpuinstr-run` then exits 1 after the program.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

#[path = "../../../device/src/sizes.rs"]
mod sizes;
use gpuinstr_device_preload::run::{library, Run};

/// `--ring-full`: what a kernel does when a ring of records is full.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum RingFull {
    Wait,
    Drop,
}

#[derive(Parser)]
#[command(about = "Run a ROCm program on gpuinstr's emulated GPU")]
struct Arguments {
    /// The emulated GPU: gfx90a (an MI210), gfx908 (an MI100), gfx942 (an
    /// MI300X; needs ROCr 6.1 or newer, and an LLVM 17+ build of gpuinstr)
    /// or gfx950 (an MI355X; ROCr 6.4 or newer, an LLVM 21 build).
    #[arg(long, default_value = "gfx90a", value_parser = ["gfx90a", "gfx908", "gfx942", "gfx950"])]
    target: String,
    /// The emulated GPU's device memory (bytes, or 512M, 4G): at most half
    /// the host memory available, whatever is asked (default: the board's
    /// own, within that). Allocations past it get hipErrorOutOfMemory.
    #[arg(long, value_name = "SIZE", value_parser = device_memory)]
    device_memory: Option<String>,
    /// The board's memory error correction: `on` (every Instinct board's
    /// default: the GPU is `sramecc+`, and code built for `sramecc-` is
    /// refused, as on such a board) or `off`.
    #[arg(long, value_name = "ON_OFF", value_parser = ["on", "off"])]
    sramecc: Option<String>,
    /// Stop a wave after this many instructions, taking it for an endless
    /// loop (default 50,000,000; waves of instrumented kernels get 32 times
    /// as many, since instrumentation multiplies what a wave runs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_instructions: Option<u64>,
    /// Print every call the device answers (to standard error).
    #[arg(long)]
    trace: bool,
    /// Print at exit how many dispatches and wave instructions the emulated
    /// GPU ran, and how fast.
    #[arg(long)]
    stats: bool,
    /// Append one JSON line per dispatch to FILE: the kernel, its grid and
    /// the emulator's own instruction counts per instruction address.
    #[arg(long, value_name = "FILE")]
    dispatch_log: Option<PathBuf>,
    /// With --dispatch-log: also log EXEC before and after every execution
    /// of these opcodes (LLVM's pseudo opcode names, comma-separated, e.g.
    /// S_AND_SAVEEXEC_B64), as `exec_history` [address, wave, before, after].
    #[arg(long, value_name = "OPCODES", requires = "dispatch_log", value_delimiter = ',')]
    dispatch_log_exec: Vec<String>,
    /// With --dispatch-log: also log every lane's flat, global, buffer and
    /// LDS access, as `accesses` [address, wave, lane, memory, space, step,
    /// bytes] (large; docs/device.md).
    #[arg(long, requires = "dispatch_log")]
    dispatch_log_accesses: bool,
    /// With --dispatch-log: give the EXEC history and the accesses as
    /// digests (`exec_digest`, `access_digest`: their count and FNV-1a over
    /// each entry's numbers as little-endian u64s, in execution order)
    /// instead of lists, for dispatches of tens of millions of them.
    #[arg(long, requires = "dispatch_log")]
    dispatch_log_digests: bool,
    /// Where the runtime writes its JSON report (default
    /// `gpuinstr-report.json`, written only when the program loads
    /// instrumented code).
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Where the runtime writes the run's SQLite database (default: beside
    /// the report, `.sqlite`; `none` for none), written as dispatches
    /// complete.
    #[arg(long, value_name = "FILE")]
    database: Option<PathBuf>,
    /// Leave the records of tools' rings (a memory trace, branch records)
    /// out of the database (its `records` table; they are kept by default).
    #[arg(long)]
    no_database_records: bool,
    /// Host memory for each ring of records a tool declares (GPUINSTR_RING;
    /// bytes, default 64 MiB): the runtime empties rings while kernels run,
    /// and a kernel finding its ring full waits, so a smaller ring costs
    /// time, never records.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    ring_bytes: Option<u64>,
    /// What a kernel does when a ring has no room for its records: `wait`
    /// (the default: nothing is lost) or `drop` them, each dispatch's
    /// drops counted in the report as a warning and by the tool (partial
    /// traces that cost less time).
    #[arg(long, value_name = "WHAT", value_enum, default_value_t = RingFull::Wait)]
    ring_full: RingFull,
    /// Dynamic mode: instrument every code object the program loads with
    /// this tool (a file `gpuinstr-link instrument --tool` takes), in the
    /// program's process, cached on disk by content. Needs --plan.
    #[arg(long, value_name = "TOOL", requires = "plan")]
    tool: Option<PathBuf>,
    /// Dynamic mode's plan (see --tool).
    #[arg(long, value_name = "PLAN", requires = "tool")]
    plan: Option<PathBuf>,
    /// Dynamic mode's cache of instrumented code objects (default
    /// ~/.cache/gpuinstr; `none` for no cache).
    #[arg(long, value_name = "DIR")]
    cache: Option<PathBuf>,
    /// Dynamic mode: load code objects with selected points left out (the
    /// report says how many) and accept that one that cannot be
    /// instrumented at all runs as it is. Without it, such a code object
    /// also runs as it is (warned about at once and in the report), and
    /// gpuinstr-run exits 1 after the program.
    #[arg(long)]
    allow_partial: bool,
    /// Dynamic mode: when kernels' register allocations may grow, as
    /// `gpuinstr-link instrument --grow-registers` (free: where occupancy
    /// stays the same, the default).
    #[arg(long, value_name = "WHEN", value_parser = ["free", "never", "always"])]
    grow_registers: Option<String>,
    /// Selective instrumentation (code instrumented with `gpuinstr-link
    /// instrument --keep-originals`): run the instrumented copy only for
    /// kernels whose name contains one of these (comma-separated); the
    /// others run their original and are not reported.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    select_kernel: Vec<String>,
    /// Selective: only each kernel's first N dispatches run instrumented.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    select_first: Option<u64>,
    /// Selective: only one in N of each kernel's dispatches (its 1st,
    /// N+1st, ...) runs instrumented.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    select_every: Option<u64>,
    /// A tool's host part (a shared library, `gpuinstr/host.h`) for the
    /// runtime to hand each dispatch's tool data to.
    #[arg(long, value_name = "LIBRARY")]
    tool_host: Option<PathBuf>,
    /// A file of the tool's to write beside the report (its name, e.g.
    /// memory-trace.tsv, or `all`; repeatable): the example tools keep
    /// their records in the run's database and write these text copies only
    /// when asked.
    #[arg(long, value_name = "NAME")]
    tool_file: Vec<String>,
    /// Leave gpuinstr's runtime out (instrumented code then runs, but nobody
    /// reads its tools' results).
    #[arg(long)]
    no_runtime: bool,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<String>,
}

fn device_memory(text: &str) -> Result<String, String> {
    match sizes::parse_bytes(text) {
        Some(bytes) if bytes > 0 => Ok(text.to_string()),
        _ => Err("a size: bytes, or with K, M or G (512M, 4G)".into()),
    }
}

fn main() -> ExitCode {
    let arguments = Arguments::parse();
    let here = std::env::current_exe().ok().and_then(|exe| exe.parent().map(PathBuf::from)).unwrap_or_default();
    let device = library("GPUINSTR_DEVICE_LIBRARY", &here, "libgpuinstr_device_preload.so", "gpuinstr-device-preload");
    let kfd =
        library("GPUINSTR_DEVICE_KFD_LIBRARY", &here, gpuinstr_device_preload::KFD_LIBRARY, "gpuinstr-device-kfd");
    let runtime = match arguments.no_runtime {
        true => Ok(None),
        false => library("GPUINSTR_RUNTIME_LIBRARY", &here, "libgpuinstr_rt.so", "gpuinstr-runtime").map(Some),
    };
    let selects =
        !arguments.select_kernel.is_empty() || arguments.select_first.is_some() || arguments.select_every.is_some();
    if arguments.no_runtime && (arguments.tool_host.is_some() || arguments.tool.is_some() || selects) {
        eprintln!("gpuinstr-run: error: --tool-host, --tool and --select-* need the runtime; drop --no-runtime");
        return ExitCode::from(2);
    }
    // Dynamic mode instruments in a worker process beside the runtime.
    let worker = match arguments.tool.is_some() {
        true => library("GPUINSTR_DYNAMIC_WORKER", &here, "gpuinstr-dynamic-worker", "gpuinstr-runtime").map(Some),
        false => Ok(None),
    };
    let (device, kfd, runtime, worker) = match (device, kfd, runtime, worker) {
        (Ok(device), Ok(kfd), Ok(runtime), Ok(worker)) => (device, kfd, runtime, worker),
        (Err(message), _, _, _) | (_, Err(message), _, _) | (_, _, Err(message), _) | (_, _, _, Err(message)) => {
            eprintln!("gpuinstr-run: error: {message}");
            return ExitCode::from(2);
        }
    };
    // What the run writes must be writable before the program starts: a
    // run of hours that cannot keep its results is refused at once.
    if let Err(message) = check_outputs(&arguments) {
        eprintln!("gpuinstr-run: error: {message}");
        return ExitCode::from(2);
    }
    // With the runtime, gpuinstr-run waits for the program to learn
    // whether the run failed after it: a code object dynamic mode could not
    // instrument, results that could not be written.
    let notes = (!arguments.no_runtime)
        .then(|| std::env::temp_dir().join(format!("gpuinstr-run-{}.failures", std::process::id())));
    let run = Run {
        target: arguments.target,
        device_memory: arguments.device_memory,
        sramecc: arguments.sramecc.map(|s| s == "on"),
        device,
        device_kfd: Some(kfd),
        runtime,
        dynamic: arguments.tool.zip(arguments.plan),
        dynamic_worker: worker,
        cache: arguments.cache,
        allow_partial: arguments.allow_partial,
        failures: notes.clone(),
        grow_registers: arguments.grow_registers,
        select_kernel: arguments.select_kernel,
        select_first: arguments.select_first,
        select_every: arguments.select_every,
        tool_host: arguments.tool_host,
        tool_files: arguments.tool_file,
        report: arguments.report,
        database: arguments.database,
        no_database_records: arguments.no_database_records,
        ring_bytes: arguments.ring_bytes,
        drop_when_ring_full: arguments.ring_full == RingFull::Drop,
        dispatch_log: arguments.dispatch_log,
        dispatch_log_exec: arguments.dispatch_log_exec,
        dispatch_log_accesses: arguments.dispatch_log_accesses,
        dispatch_log_digests: arguments.dispatch_log_digests,
        max_instructions: arguments.max_instructions,
        trace: arguments.trace,
        stats: arguments.stats,
    };
    let program: Vec<OsString> = arguments.command.into_iter().map(OsString::from).collect();
    if let Some(notes) = notes {
        return run_and_check(&run, &program, &notes);
    }
    let error = run.command(&program[0], &program[1..]).exec();
    eprintln!("gpuinstr-run: error: cannot run `{}`: {error}", program[0].to_string_lossy());
    ExitCode::from(127)
}

/// Every file the run will write (the report, the database, the dispatch
/// log) can be: its directory exists and takes a new file. Where a tool is
/// asked for (`--tool`, `--tool-host`), also the default report's and
/// database's directory, the current one.
fn check_outputs(arguments: &Arguments) -> Result<(), String> {
    use std::path::Path;
    let for_a_tool = !arguments.no_runtime && (arguments.tool.is_some() || arguments.tool_host.is_some());
    let report = match &arguments.report {
        Some(report) => Some(("--report", report.clone())),
        None => for_a_tool.then(|| ("the report (no --report)", PathBuf::from("gpuinstr-report.json"))),
    };
    let database = match &arguments.database {
        Some(database) if database.as_os_str() == "none" => None,
        Some(database) => Some(("--database", database.clone())),
        None => report.as_ref().map(|(_, r)| ("the database (no --database)", r.with_extension("sqlite"))),
    };
    let log = arguments.dispatch_log.as_ref().map(|log| ("--dispatch-log", log.clone()));
    for (option, path) in [report, database, log].into_iter().flatten() {
        let shown = path.display();
        if path.is_dir() {
            return Err(format!("{option} {shown} is a directory: give a file path"));
        }
        let directory = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !directory.is_dir() {
            return Err(format!(
                "{option} {shown}: the directory {} does not exist: create it, or give a path in one that does",
                directory.display()
            ));
        }
        // The runtime writes a temporary file beside it and renames it.
        let probe = directory.join(format!(".gpuinstr-run-{}.probe", std::process::id()));
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
            Ok(_) => {
                let _ = std::fs::remove_file(&probe);
            }
            Err(error) => {
                return Err(format!(
                    "{option} {shown}: cannot write in {} ({error}): give a path in a directory you can write",
                    directory.display()
                ))
            }
        }
        // The dispatch log is appended to.
        if option == "--dispatch-log" && path.exists() {
            if let Err(error) = std::fs::OpenOptions::new().append(true).open(&path) {
                return Err(format!("{option} {shown}: cannot append to it ({error})"));
            }
        }
    }
    Ok(())
}

/// Runs the program as a child and waits: its status, or 1 if it succeeded
/// while code objects it loaded ran uninstrumented or results could not be
/// written. Interrupts reach the
/// program (same process group); this process ignores them meanwhile, and
/// a program killed by a signal is reported by dying of it too.
fn run_and_check(run: &Run, program: &[OsString], notes: &std::path::Path) -> ExitCode {
    let _ = std::fs::remove_file(notes);
    let mut child = match run.command(&program[0], &program[1..]).spawn() {
        Ok(child) => child,
        Err(error) => {
            eprintln!("gpuinstr-run: error: cannot run `{}`: {error}", program[0].to_string_lossy());
            return ExitCode::from(127);
        }
    };
    // SAFETY: setting a signal disposition; restored below before raising.
    let previous = unsafe { [libc::signal(libc::SIGINT, libc::SIG_IGN), libc::signal(libc::SIGQUIT, libc::SIG_IGN)] };
    let status = child.wait();
    let failed = gpuinstr_device_preload::run::failures(notes);
    let _ = std::fs::remove_file(notes);
    // SAFETY: as above.
    unsafe {
        libc::signal(libc::SIGINT, previous[0]);
        libc::signal(libc::SIGQUIT, previous[1]);
    }
    let status = match status {
        Ok(status) => status,
        Err(error) => {
            eprintln!("gpuinstr-run: error: waiting for `{}`: {error}", program[0].to_string_lossy());
            return ExitCode::from(2);
        }
    };
    use gpuinstr_device_preload::run::RunFailure;
    let uninstrumented = failed.iter().filter(|f| matches!(f, RunFailure::NotInstrumented(_))).count();
    if uninstrumented > 0 {
        eprintln!(
            "gpuinstr-run: error: {uninstrumented} code objects the program loaded could not be instrumented and ran \
             as they were (the tool's results miss their kernels; the report says why); --allow-partial accepts that",
        );
    }
    let unwritten: Vec<&str> = failed
        .iter()
        .filter_map(|f| match f {
            RunFailure::NotWritten(message) => Some(message.as_str()),
            RunFailure::NotInstrumented(_) => None,
        })
        .collect();
    if !unwritten.is_empty() {
        eprintln!(
            "gpuinstr-run: error: {} of the run's results could not be written, so the run failed although the \
             program ran: {}",
            unwritten.len(),
            unwritten.join("; ")
        );
    }
    use std::os::unix::process::ExitStatusExt;
    if let Some(signal) = status.signal() {
        // SAFETY: default disposition, then the program's own signal.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
        return ExitCode::from(128 + signal as u8);
    }
    let code = gpuinstr_device_preload::run::exit_code_after(status.code().unwrap_or(1), &failed);
    ExitCode::from(code.clamp(0, 255) as u8)
}
