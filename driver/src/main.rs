//! `gpuinstr-link`: the command line over the driver library.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// mimalloc: 16% less time than glibc's malloc on the instruction counter
/// over rocBLAS's largest code object (docs/instrument.md), the same peak.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `print!` that returns the write error (a closed pipe, `| head`) instead
/// of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write;
        write!(std::io::stdout().lock(), $($arg)*)?;
    }};
}

macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write;
        writeln!(std::io::stdout().lock(), $($arg)*)?;
    }};
}

#[derive(Parser)]
#[command(name = "gpuinstr-link", version, about = "Instrument AMDGPU code objects with gpuinstr hooks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LiftForm {
    Mir,
    Asm,
    Cfg,
    Stats,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ToolGlobalsChoice {
    Defined,
    External,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum CountWayChoice {
    /// Per kernel, the way that costs its waves fewer instructions.
    Cheaper,
    /// Each lane counts its vector instructions in a VGPR pair.
    Lanes,
    /// The wave counts `popcount(EXEC)` times each amount in SGPRs.
    Wave,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum GrowthChoice {
    /// Never: instrumentation fits in the registers kernels have.
    Never,
    /// Where a SIMD still holds as many of the kernel's waves.
    Free,
    /// Up to what a wave may have with the kernel's work-group size.
    Always,
}

impl From<GrowthChoice> for gpuinstr::stages::sva::RegisterGrowth {
    fn from(choice: GrowthChoice) -> Self {
        match choice {
            GrowthChoice::Never => Self::Never,
            GrowthChoice::Free => Self::FreeOfOccupancy,
            GrowthChoice::Always => Self::Always,
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LinkerChoice {
    Comgr,
    Lld,
}

impl From<LinkerChoice> for gpuinstr::stages::emit::link::Linker {
    fn from(choice: LinkerChoice) -> Self {
        match choice {
            LinkerChoice::Comgr => Self::Comgr,
            LinkerChoice::Lld => Self::Lld,
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ProgressChoice {
    Auto,
    Bar,
    Lines,
    Off,
}

impl ProgressChoice {
    fn shown(self) -> gpuinstr::progress::Progress {
        use gpuinstr::progress::{Display, Progress};
        let lines = Display::Lines { every: std::time::Duration::from_secs(30) };
        match self {
            ProgressChoice::Auto => Progress::for_stderr(0),
            ProgressChoice::Bar => Progress::shown(Display::Bar, 0),
            ProgressChoice::Lines => Progress::shown(lines, 0),
            ProgressChoice::Off => Progress::default(),
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Instrument an application with a tool and a plan (docs/plan.md); writes OUTPUT only on success.
    Instrument {
        /// A device code object, an offload bundle, or a host executable/library/object with .hip_fatbin; OUTPUT is
        /// the same kind of file with its device code (the --target code objects, or all) instrumented.
        file: PathBuf,
        /// The tool, built with the gpuinstr plugin.
        #[arg(long)]
        tool: PathBuf,
        /// The plan: where which hook goes.
        #[arg(long)]
        plan: PathBuf,
        #[arg(short, long)]
        output: PathBuf,
        #[arg(long)]
        target: Option<String>,
        /// When a kernel's vector register allocation may grow for the instrumentation: `free` (where it costs no
        /// occupancy), `always` (what a bare --grow-registers means: up to what a wave may have with the kernel's
        /// work-group size) or `never`.
        #[arg(long, value_enum, num_args = 0..=1, default_value = "free", default_missing_value = "always",
              require_equals = true, value_name = "WHEN")]
        grow_registers: GrowthChoice,
        /// `defined`: the tool's globals are defined in the output for the host to find by name; `external`: left
        /// undefined for a loader to define.
        #[arg(long, value_enum, default_value = "defined")]
        tool_globals: ToolGlobalsChoice,
        #[arg(long, value_enum, default_value = "comgr")]
        linker: LinkerChoice,
        /// Compile one payload per point even where alike points could share one (slower; for comparison).
        #[arg(long)]
        no_shared_payloads: bool,
        /// Compile payloads for each stretch of alike points even where one template per hook shape, renamed per
        /// point, would do (slower; for comparison).
        #[arg(long)]
        no_templates: bool,
        /// Write the instrumented code as assembly for llvm-mc instead of laying it out as machine code (slower, the
        /// same code; to compare, or to read the assembly `--dump-after emit` shows).
        #[arg(long)]
        emit_assembly: bool,
        /// How a plan's `count-in-registers` counts (docs/plan.md): the cheaper way per kernel, or one way
        /// everywhere (to compare).
        #[arg(long, value_enum, default_value = "cheaper")]
        count_way: CountWayChoice,
        /// Instrument a code object of kernels alone in groups of kernels with about this many bytes of code each
        /// (memory bounded by a group, the groups on every core; docs/instrument.md); 0: the whole code object at
        /// once.
        #[arg(long, default_value_t = gpuinstr::instrument::GROUP_BYTES)]
        group_bytes: u64,
        /// Run LLVM's machine verifier after every codegen pass of the payloads, not only on the MIR llc reads (about
        /// twice as slow; for finding where LLVM goes wrong).
        #[arg(long)]
        verify_each_pass: bool,
        /// Accept an output in which selected points are left out (its report says so first); without it, any point
        /// left out is an error and nothing is written.
        #[arg(long)]
        allow_partial: bool,
        /// Fail when the plan selects no instruction in the file (otherwise the file is written unchanged).
        #[arg(long)]
        require_points: bool,
        /// Selective instrumentation: keep every kernel and function as it is and add the instrumented ones beside
        /// them (named with `.gpuinstr`); gpuinstr's runtime then runs the instrumented copy only for the dispatches
        /// `gpuinstr-run --select-*` chooses.
        #[arg(long)]
        keep_originals: bool,
        /// Keep the inputs of failed llc and llvm-mc runs in DIR (nothing is kept otherwise).
        #[arg(long, value_name = "DIR")]
        keep_failed: Option<PathBuf>,
        /// Print the run report as JSON.
        #[arg(long)]
        json: bool,
        /// How to show progress on standard error: `auto` (a bar on a terminal, else a line every 30 seconds once
        /// the run has taken that long), `bar`, `lines` or `off`.
        #[arg(long, value_enum, default_value = "auto")]
        progress: ProgressChoice,
        /// Write the text form of one stage's output for each code object instrumented, as the stage leaves it:
        /// lift, liveness, sva, payloads, patch or emit (to OUTPUT.STAGE.txt, or OUTPUT.N.STAGE.txt for the N-th of
        /// several code objects).
        #[arg(long, value_name = "STAGE", value_parser = ["lift", "liveness", "sva", "payloads", "patch", "emit"])]
        dump_after: Option<String>,
    },
    /// Prove from two code objects that INSTRUMENTED runs ORIGINAL's instructions in order, that every inserted region
    /// leaves the live registers as it found them, that branches land where they did and that descriptors cover the
    /// registers used (docs/verify.md). Exit status 1 when something is found.
    Verify {
        original: PathBuf,
        instrumented: PathBuf,
        #[arg(long)]
        target: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Write each device code object of a file (--target: those matching) to DIRECTORY, for llvm-objdump and friends.
    Extract {
        file: PathBuf,
        #[arg(long)]
        target: Option<String>,
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Compile one hook call for one instruction and print the payload's machine code (--stages: every stage).
    Payload {
        /// The application: code object, offload bundle or host file.
        file: PathBuf,
        /// The tool, built with the gpuinstr plugin.
        #[arg(long)]
        tool: PathBuf,
        #[arg(long)]
        hook: String,
        /// The hook's arguments in order: true/false, integers, floats, or registers (s4, v0, exec).
        #[arg(long = "arg", value_name = "VALUE")]
        arguments: Vec<String>,
        /// Where: FUNCTION:INDEX (indices as `lift --emit mir` counts); the payload goes before that instruction.
        #[arg(long, value_name = "FUNCTION:INDEX")]
        at: String,
        #[arg(long)]
        target: Option<String>,
        /// The VGPR holding the State Value Array (until the sva stage places it), e.g. v60.
        #[arg(long)]
        sva: Option<String>,
        /// The VGPR holding the packed work-item ids (hooks using threadIdx), e.g. v61.
        #[arg(long)]
        work_item_ids: Option<String>,
        /// Print every stage: payload IR, optimised IR, MIR before and after lowering, final code.
        #[arg(long)]
        stages: bool,
        /// Skip the machine-code preservation check (to look at a payload it refuses).
        #[arg(long)]
        unchecked: bool,
        /// Keep the inputs of failed llc runs in DIR (nothing is kept otherwise).
        #[arg(long, value_name = "DIR")]
        keep_failed: Option<PathBuf>,
    },
    /// Register availability: allocated, used and free registers per kernel (seed 000's report).
    Analyze {
        /// Code objects, bundles or host files; several files (or several code objects) add a corpus summary.
        files: Vec<PathBuf>,
        #[arg(long)]
        target: Option<String>,
        /// Only this kernel.
        #[arg(long)]
        kernel: Option<String>,
        /// Live and free registers at one instruction: KERNEL:INDEX (indices as `lift --emit mir` counts).
        #[arg(long, value_name = "KERNEL:INDEX")]
        at: Option<String>,
        #[arg(long)]
        json: bool,
        /// Only the corpus summary.
        #[arg(long)]
        summary: bool,
        #[arg(long)]
        jobs: Option<usize>,
    },
    /// Round-trip every code object of one target in a set of files and report the numbers.
    RoundtripCorpus {
        files: Vec<PathBuf>,
        #[arg(long)]
        target: String,
        /// Check every n-th code object only (a sample spread over the corpus).
        #[arg(long)]
        every: Option<usize>,
        #[arg(long, value_enum, default_value = "comgr")]
        linker: LinkerChoice,
        /// Worker threads (default: the number of cores).
        #[arg(long)]
        jobs: Option<usize>,
        #[arg(long)]
        json: bool,
    },
    /// Lift and re-emit a code object unchanged; --check compares the result kernel by kernel.
    Roundtrip {
        file: PathBuf,
        /// Where to write the re-emitted code object (written only when everything succeeded).
        #[arg(short, long)]
        output: PathBuf,
        #[arg(long)]
        target: Option<String>,
        /// Compare code bytes, descriptors and metadata with the input; exit 1 when they differ.
        #[arg(long)]
        check: bool,
        #[arg(long, value_enum, default_value = "comgr")]
        linker: LinkerChoice,
        /// With --check, print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Lift a code object and print its functions (MIR, assembly, CFG or counts).
    Lift {
        file: PathBuf,
        /// Which code object of a fat binary (gfx90a, gfx90a:xnack-); needed when there are several.
        #[arg(long)]
        target: Option<String>,
        /// Only this kernel or device function.
        #[arg(long)]
        kernel: Option<String>,
        #[arg(long, value_enum, default_value = "mir")]
        emit: LiftForm,
    },
    /// List the code objects of a file, their kernels, and a tool's hooks and intrinsics.
    Inspect {
        /// A device code object, an offload bundle, or a host object/executable with .hip_fatbin.
        file: PathBuf,
        /// Only code objects for this target (gfx90a, gfx90a:xnack-).
        #[arg(long)]
        target: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Instrument {
            file,
            tool,
            plan,
            output,
            target,
            grow_registers,
            tool_globals,
            linker,
            no_shared_payloads,
            no_templates,
            emit_assembly,
            count_way,
            group_bytes,
            verify_each_pass,
            allow_partial,
            require_points,
            keep_originals,
            keep_failed,
            json,
            progress,
            dump_after,
        } => {
            let plan = gpuinstr::plan::Plan::load(&plan)?;
            let tool = gpuinstr::tool::Tool::load(&tool)?;
            // Mapped, not read: a whole library is over a gigabyte.
            let mapped = gpuinstr::native::MappedFile::open(&file)
                .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", file.display()))?;
            let options = gpuinstr::instrument::InstrumentOptions {
                grow_registers: grow_registers.into(),
                tool_globals: match tool_globals {
                    ToolGlobalsChoice::Defined => gpuinstr::instrument::ToolGlobals::Defined,
                    ToolGlobalsChoice::External => gpuinstr::instrument::ToolGlobals::External,
                },
                linker: linker.into(),
                payloads: gpuinstr::stages::payloads::PayloadOptions {
                    share_payloads: !no_shared_payloads,
                    templates: !no_templates,
                    verify_each_pass,
                    keep_failed,
                    ..Default::default()
                },
                allow_partial,
                require_points,
                keep_originals,
                progress: progress.shown(),
                dump_after: dump_after.as_deref().and_then(gpuinstr::pipeline::Stage::from_key),
                emit_code: if emit_assembly {
                    gpuinstr::stages::emit::CodeForm::Text
                } else {
                    gpuinstr::stages::emit::CodeForm::Bytes
                },
                count_way: match count_way {
                    CountWayChoice::Cheaper => gpuinstr::stages::sva::counts::CountWay::Cheaper,
                    CountWayChoice::Lanes => gpuinstr::stages::sva::counts::CountWay::Lanes,
                    CountWayChoice::Wave => gpuinstr::stages::sva::counts::CountWay::Wave,
                },
                group_bytes,
            };
            let registry = gpuinstr_intrinsics::Registry::with_builtins();
            // Written as it is assembled (an instrumented library is
            // gigabytes), only once everything succeeded.
            let mut written = Ok(());
            let outcome = gpuinstr::instrument::instrument_file_into(
                &tool,
                &file,
                mapped.bytes(),
                &plan,
                &registry,
                &options,
                target.as_deref(),
                &|| mapped.release_pages(),
                &mut |pieces| {
                    written = gpuinstr::output::write_atomically_with(&output, &file, &mut |out| pieces.write_to(out));
                    Ok(())
                },
            );
            options.progress.finish();
            let report = outcome.map_err(|e| match e {
                // A load error names its file (and place) already.
                gpuinstr::instrument::InstrumentError::Load(load) => anyhow::Error::from(load),
                other => anyhow::anyhow!("{}: {other}", file.display()),
            })?;
            written.map_err(|e| anyhow::anyhow!("{}: {e}", output.display()))?;
            let dumps: Vec<&String> = report.code_objects.iter().filter_map(|r| r.dump.as_ref()).collect();
            for (index, text) in dumps.iter().enumerate() {
                let stage = dump_after.as_deref().unwrap_or_default();
                let name = match dumps.len() {
                    1 => format!("{}.{stage}.txt", output.display()),
                    _ => format!("{}.{index}.{stage}.txt", output.display()),
                };
                gpuinstr::output::write_atomically(std::path::Path::new(&name), text.as_bytes())?;
                if !json {
                    outln!("wrote {name}");
                }
            }
            if json {
                outln!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                out!("{}", report.render_text());
                outln!("wrote {}", output.display());
            }
            return Ok(ExitCode::SUCCESS);
        }
        Command::Extract { file, target, output } => {
            let input = gpuinstr::pipeline::load(&file)?;
            let input = match target.as_deref() {
                Some(target) => input.select_target(target)?,
                None => input,
            };
            std::fs::create_dir_all(&output)
                .map_err(|e| anyhow::anyhow!("{}: cannot create: {e}", output.display()))?;
            for (index, code_object) in input.code_objects.iter().enumerate() {
                let name = format!("{index}-{}.hsaco", code_object.target.to_string().replace(':', "_"));
                let path = output.join(name);
                gpuinstr::output::write_atomically(&path, &code_object.bytes)?;
                outln!("{} ({})", path.display(), code_object.origin.join(", "));
            }
        }
        Command::Verify { original, instrumented, target, json } => {
            // Mapped, not read: an instrumented library is gigabytes, and
            // its code objects are checked a bundle at a time.
            let map = |path: &PathBuf| {
                gpuinstr::native::MappedFile::open(path)
                    .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", path.display()))
            };
            let (before, after) = (map(&original)?, map(&instrumented)?);
            let reports = gpuinstr::verify::verify_file_bytes(
                (&original, before.bytes()),
                (&instrumented, after.bytes()),
                target.as_deref(),
                &|| {
                    before.release_pages();
                    after.release_pages();
                },
            )
            .map_err(|e| anyhow::anyhow!("{}: {e}", instrumented.display()))?;
            if json {
                let list: Vec<_> =
                    reports.iter().map(|(o, r)| serde_json::json!({ "origin": o, "report": r })).collect();
                outln!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                for (origin, report) in &reports {
                    if !origin.is_empty() {
                        outln!("{origin}:");
                    }
                    out!("{}", report.render_text());
                }
            }
            let ok = reports.iter().all(|(_, r)| r.ok());
            return Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE });
        }
        Command::Payload {
            file,
            tool,
            hook,
            arguments,
            at,
            target,
            sva,
            work_item_ids,
            stages,
            unchecked,
            keep_failed,
        } => {
            use gpuinstr::stages::payload::PayloadPoint;
            use gpuinstr::stages::payloads::{compile_payloads, parse_hook_argument, parse_point, PayloadOptions};
            use gpuinstr::stages::sva::FunctionRegisters;
            let tool_object = gpuinstr::pipeline::one_code_object(gpuinstr::pipeline::load(&tool)?, None)?;
            let app = gpuinstr::pipeline::one_code_object(gpuinstr::pipeline::load(&file)?, target.as_deref())?;
            let lifted = gpuinstr::pipeline::lift(&app).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            let liveness =
                gpuinstr::pipeline::liveness(&lifted).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            let (function, instruction) =
                parse_point(&lifted, &at).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            let arguments = arguments
                .iter()
                .map(|a| parse_hook_argument(a))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let vgpr = |flag: &str, text: Option<String>| -> Result<Option<u16>> {
                text.map(|t| {
                    t.strip_prefix('v')
                        .and_then(|n| n.parse().ok())
                        .ok_or_else(|| anyhow::anyhow!("{flag} takes a VGPR such as v60, not `{t}`"))
                })
                .transpose()
            };
            let mut options =
                PayloadOptions { check_preservation: !unchecked, keep_failed, ..PayloadOptions::default() };
            let registers = FunctionRegisters {
                sva: vgpr("--sva", sva)?,
                work_item_ids: vgpr("--work-item-ids", work_item_ids)?,
                ..FunctionRegisters::default()
            };
            options.registers.insert(function, registers);
            let call = gpuinstr::stages::payload::HookCall { hook, arguments };
            let points = vec![PayloadPoint { function, instruction, calls: vec![call] }];
            let registry = gpuinstr_intrinsics::Registry::with_builtins();
            let compiled = compile_payloads(&tool_object, &lifted, &liveness, &points, &registry, &options)?;
            if stages {
                out!("{}", compiled.render_stages(0));
            } else {
                let payload = &compiled.payloads[0];
                if let Some(reason) = &payload.rejected {
                    anyhow::bail!("{}: {reason}", payload.label);
                }
                outln!("{}", payload.label);
                for line in payload.code.iter() {
                    outln!("{}{line}", if line.ends_with(':') { "" } else { "    " });
                }
                outln!("; writes {}; stack {} bytes", payload.writes, payload.scratch_bytes);
            }
            return Ok(ExitCode::SUCCESS);
        }
        Command::Analyze { files, target, kernel, at, json, summary, jobs } => {
            if files.is_empty() {
                anyhow::bail!("give at least one file to analyze");
            }
            if let Some(at) = at {
                let (name, index) = at
                    .rsplit_once(':')
                    .and_then(|(k, i)| Some((k, i.parse::<usize>().ok()?)))
                    .ok_or_else(|| anyhow::anyhow!("--at takes KERNEL:INDEX, e.g. --at my_kernel:12"))?;
                let input = gpuinstr::stages::load::load_for_target(&files[0], target.as_deref())?;
                let code_object = gpuinstr::pipeline::one_code_object(input, None)?;
                let text = gpuinstr::analyze::at_instruction(&code_object, name, index)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", files[0].display()))?;
                out!("{text}");
                return Ok(ExitCode::SUCCESS);
            }
            let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let (mut reports, corpus) = gpuinstr::analyze::corpus(&files, target.as_deref(), jobs)?;
            if let Some(name) = &kernel {
                for report in &mut reports {
                    report.kernels.retain(|k| &k.name == name);
                }
                if reports.iter().all(|r| r.kernels.is_empty()) {
                    anyhow::bail!("no kernel named `{name}` (gpuinstr-link inspect lists them)");
                }
            }
            let several = reports.len() > 1 || files.len() > 1;
            if json {
                let value = serde_json::json!({ "code_objects": if summary { serde_json::Value::Null } else { serde_json::to_value(&reports)? }, "summary": corpus });
                outln!("{}", serde_json::to_string_pretty(&value)?);
            } else {
                if !summary {
                    for report in &reports {
                        out!("{}", gpuinstr::analyze::render_text(report));
                    }
                }
                if several || summary {
                    out!("{}", corpus.render_text());
                }
            }
            if !corpus.failed_code_objects.is_empty() {
                // Said on stderr too, in both modes, unless the summary
                // printed above listed them: a failure is never only an
                // exit status.
                if json || !(several || summary) {
                    for failure in &corpus.failed_code_objects {
                        eprintln!("gpuinstr-link: error: {failure}");
                    }
                }
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::RoundtripCorpus { files, target, every, linker, jobs, json } => {
            let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let sample = every.map_or(gpuinstr::corpus::Sample::All, gpuinstr::corpus::Sample::EveryNth);
            let report = gpuinstr::corpus::check_corpus(&files, &target, sample, linker.into(), jobs)?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                out!("{}", report.render_text());
            }
            let clean = report.failures.is_empty() && report.different_functions == 0;
            return Ok(if clean { ExitCode::SUCCESS } else { ExitCode::FAILURE });
        }
        Command::Roundtrip { file, output, target, check, linker, json } => {
            let input = gpuinstr::stages::load::load_for_target(&file, target.as_deref())?;
            let code_object = gpuinstr::pipeline::one_code_object(input, target.as_deref())?;
            let (bytes, report) = gpuinstr::roundtrip::roundtrip(&code_object, linker.into())
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            gpuinstr::output::write_atomically(&output, &bytes)?;
            if check {
                if json {
                    outln!("{}", serde_json::to_string_pretty(&report)?);
                } else {
                    out!("{}", report.render_text());
                }
                if !report.identical() {
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
        Command::Lift { file, target, kernel, emit } => {
            let input = gpuinstr::stages::load::load_for_target(&file, target.as_deref())?;
            let code_object = gpuinstr::pipeline::one_code_object(input, target.as_deref())?;
            let lifted =
                gpuinstr::stages::lift::lift(&code_object).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            if let Some(name) = &kernel {
                if lifted.function(name).is_none() {
                    anyhow::bail!(
                        "{}: no kernel or device function named `{name}` (gpuinstr-link inspect lists them)",
                        file.display()
                    );
                }
            }
            let only = kernel.as_deref();
            let text = match emit {
                LiftForm::Mir => gpuinstr::stages::lift::print::mir(&lifted, only),
                LiftForm::Asm => gpuinstr::stages::lift::print::asm(&lifted, only),
                LiftForm::Cfg => gpuinstr::stages::lift::print::cfg(&lifted, only),
                LiftForm::Stats => serde_json::to_string_pretty(&lifted.statistics())? + "\n",
            };
            out!("{text}");
        }
        Command::Inspect { file, target, json } => {
            let report = gpuinstr::inspect::inspect(&file, target.as_deref())?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                out!("{}", gpuinstr::inspect::render_text(&report));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Every temporary file of the run (ours, tempfile's and the LLVM tools'
/// we start) goes under one directory in the user's TMPDIR, removed at the
/// end and when the run is stopped (SIGINT, SIGTERM, SIGHUP): a stopped
/// hour-long instrumentation leaves nothing behind. A run killed outright
/// (SIGKILL: the OOM killer, a memory cgroup's limit) cannot; the next run
/// removes what such runs left, found by the process id each root names.
fn temporary_root() -> Option<tempfile::TempDir> {
    remove_roots_of_killed_runs(&std::env::temp_dir());
    let root = tempfile::Builder::new().prefix(ROOT_PREFIX).tempdir().ok()?;
    std::fs::write(root.path().join(ROOT_OWNER), std::process::id().to_string()).ok()?;
    // Before any thread starts: tempfile and child processes read it.
    std::env::set_var("TMPDIR", root.path());
    let path = root.path().to_path_buf();
    // Without a handler (one already set) the directory still goes at the
    // end; TMPDIR points into it either way, so it must live as long.
    let _ = ctrlc::set_handler(move || {
        let _ = std::fs::remove_dir_all(&path);
        eprintln!("gpuinstr-link: stopped");
        std::process::exit(130);
    });
    Some(root)
}

/// The temporary roots' names, and the file in each naming its run's process.
const ROOT_PREFIX: &str = "gpuinstr-link-";
const ROOT_OWNER: &str = "gpuinstr-link.pid";

/// Removes the temporary roots in `directory` whose run's process is gone
/// (a root without its owner file is being made, or is not ours to judge).
fn remove_roots_of_killed_runs(directory: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(directory) else { return };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(ROOT_PREFIX) {
            continue;
        }
        let owner = std::fs::read_to_string(entry.path().join(ROOT_OWNER));
        let Ok(pid) = owner.as_deref().unwrap_or("").trim().parse::<u32>() else { continue };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _temporary = temporary_root();
    match run(cli) {
        Ok(code) => code,
        // Whoever read the output stopped reading (`| head`): nothing to say.
        Err(error)
            if error.chain().any(|c| {
                c.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::SUCCESS
        }
        Err(error) => {
            // One line, whatever a library or LLVM put in the message.
            let message = one_message(&error);
            let message: Vec<&str> = message.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
            eprintln!("gpuinstr-link: error: {}", message.join(" | "));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, each cause only when the message before does
/// not already say it (our library errors quote their sources).
fn one_message(error: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if !message.contains(&text) {
            if !message.is_empty() {
                message.push_str(": ");
            }
            message.push_str(&text);
        }
    }
    message
}
