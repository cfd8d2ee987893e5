//! One case in-process: the input written to a file, then every reader
//! and subcommand the input kind reaches, as the command line runs them.
//! A reader may refuse the input (that is the point) but must do so with a
//! one-line error; a panic is a finding. Aborts and hangs kill the worker
//! and are found by the supervisor (supervise.rs).

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};

use gpuinstr::instrument::{instrument_file, InstrumentOptions};
use gpuinstr::plan::Plan;
use gpuinstr::stages::emit::link::Linker;
use gpuinstr::stages::load::CodeObject;
use gpuinstr::tool::Tool;
use gpuinstr_intrinsics::Registry;
use serde::Serialize;

use crate::kinds::{fuzz_directory, Kind};

/// What a case found wrong.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "finding", rename_all = "kebab-case")]
pub enum Finding {
    /// A reader panicked.
    Panic { op: String, message: String },
    /// An error message that is empty or spans several lines.
    BadError { op: String, message: String },
    /// An LLVM tool we run was stopped by its deadline: a clear error, but
    /// a hang the input provokes costs the user a minute (refuse it first).
    ToolHang { op: String, message: String },
    /// A failed step left an output file.
    PartialOutput { op: String, path: String },
    /// Files left in the temporary directory.
    Litter { files: Vec<String> },
    /// A cache entry whose bytes changed was read back as trusted: the GPU
    /// would run it.
    Trusted { op: String },
    /// The command line ended other than with 0 or 1 and one error line
    /// naming the input (cli.rs).
    Command { command: String, status: String, stderr: String },
}

/// A case's outcome: the steps run, how many refused the input, findings.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CaseResult {
    pub ops: usize,
    pub refused: usize,
    pub findings: Vec<Finding>,
}

/// What every case of a worker shares: the companion inputs (a tool, an
/// application, plans) and the work and temporary directories.
pub struct Context {
    pub work: PathBuf,
    pub tmp: PathBuf,
    pub tool_path: PathBuf,
    pub tool: Tool,
    pub app_path: PathBuf,
    pub app_bytes: Vec<u8>,
    pub entry_plan: Plan,
    /// The same plan as a file, for the command line.
    pub entry_plan_path: PathBuf,
    pub counter_plan: Plan,
    pub registry: Registry,
}

impl Context {
    /// The companions from fuzz/seeds: the instruction counter tool, the
    /// vector-add code object, a kernel-entry plan and the counter's plan.
    pub fn new(work: PathBuf, tmp: PathBuf) -> anyhow::Result<Context> {
        let seeds = fuzz_directory().join("seeds");
        let tool_path = seeds.join("tool/instruction-counter.hsaco");
        let tool = Tool::load(&tool_path)?;
        let app_path = seeds.join("code-object/vector-add.hsaco");
        let app_bytes = std::fs::read(&app_path)?;
        let entry_text = "[[insert]]\nhook = \"countInstructionsScalar\"\nwhere = \"kernel-entry\"\n";
        std::fs::create_dir_all(&work)?;
        let entry_plan_path = work.join("entry.toml");
        std::fs::write(&entry_plan_path, entry_text)?;
        let entry_plan = Plan::parse(entry_text, "entry.toml")?;
        let counter_plan = Plan::load(&seeds.join("plan/instruction-counter.toml"))?;
        Ok(Context {
            work,
            tmp,
            tool_path,
            tool,
            app_path,
            app_bytes,
            entry_plan,
            entry_plan_path,
            counter_plan,
            registry: Registry::with_builtins(),
        })
    }
}

/// The panic message of a caught panic.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(a panic without a message)".into())
}

/// The error of an LLVM tool stopped by its deadline (process.rs).
pub fn is_tool_hang(message: &str) -> bool {
    message.contains("did not finish in") && message.contains("was stopped")
}

struct Run<'a> {
    result: CaseResult,
    context: &'a Context,
}

impl Run<'_> {
    /// Runs one step; its value when it accepted the input.
    fn op<T>(&mut self, name: &str, step: impl FnOnce() -> Result<T, String>) -> Option<T> {
        self.result.ops += 1;
        match std::panic::catch_unwind(AssertUnwindSafe(step)) {
            Ok(Ok(value)) => Some(value),
            Ok(Err(message)) => {
                self.result.refused += 1;
                if message.trim().is_empty() || message.contains('\n') {
                    self.result.findings.push(Finding::BadError { op: name.into(), message });
                } else if is_tool_hang(&message) {
                    self.result.findings.push(Finding::ToolHang { op: name.into(), message });
                }
                None
            }
            Err(payload) => {
                self.result.findings.push(Finding::Panic { op: name.into(), message: panic_message(payload.as_ref()) });
                None
            }
        }
    }

    /// A step that writes `output` only when it succeeds.
    fn writing<T>(&mut self, name: &str, output: &Path, step: impl FnOnce() -> Result<T, String>) -> Option<T> {
        let _ = std::fs::remove_file(output);
        let value = self.op(name, step);
        if value.is_none() && output.exists() {
            self.result.findings.push(Finding::PartialOutput { op: name.into(), path: output.display().to_string() });
        }
        let _ = std::fs::remove_file(output);
        value
    }

    /// Every step on a code object: lift and its printed forms, liveness,
    /// the register report, assembly; with `full`, the round trip through
    /// llvm-mc and CoMGR, verify, and one payload.
    fn code_object(&mut self, code_object: &CodeObject, original: Option<&CodeObject>, full: bool) {
        use gpuinstr::stages::lift::{lift, print};
        let lifted = self.op("lift", || lift(code_object).map_err(|e| e.to_string()));
        if let Some(lifted) = &lifted {
            self.op("lift --emit mir/asm/cfg/stats", || {
                let texts = [print::mir(lifted, None), print::asm(lifted, None), print::cfg(lifted, None)];
                let _ = serde_json::to_string(&lifted.statistics()).map_err(|e| e.to_string())?;
                Ok(texts.iter().map(String::len).sum::<usize>())
            });
            let liveness =
                self.op("liveness", || gpuinstr::stages::liveness::analyze(lifted).map_err(|e| e.to_string()));
            self.op("emit assembly", || {
                Ok(lifted.emit_assembly(&gpuinstr::stages::emit::EmitOptions::default()).text.len())
            });
            if let (true, Some(liveness)) = (full, &liveness) {
                self.payload(lifted, liveness, code_object);
            }
        }
        self.op("source lines", || {
            let lines = gpuinstr::stages::load::lines::SourceLines::read(code_object).map_err(|e| e.to_string())?;
            Ok(code_object.symbols.iter().filter_map(|s| lines.as_ref()?.at(s.value)).count())
        });
        self.op("analyze", || {
            let report = gpuinstr::analyze::code_object_report(code_object).map_err(|e| e.to_string())?;
            Ok(gpuinstr::analyze::render_text(&report))
        });
        for kernel in code_object.kernels.iter().take(2) {
            self.op("analyze --at", || gpuinstr::analyze::at_instruction(code_object, kernel.name(), 1));
        }
        if !full {
            return;
        }
        let output = self.context.work.join("roundtrip.hsaco");
        self.writing("roundtrip -o", &output, || {
            let (bytes, report) =
                gpuinstr::roundtrip::roundtrip(code_object, Linker::Comgr).map_err(|e| e.to_string())?;
            gpuinstr::output::write_atomically(&output, &bytes).map_err(|e| e.to_string())?;
            Ok(report.identical())
        });
        self.op("verify", || gpuinstr::verify::verify(code_object, code_object).map_err(|e| e.to_string()));
        if let Some(original) = original {
            self.op("verify ORIGINAL", || gpuinstr::verify::verify(original, code_object).map_err(|e| e.to_string()));
        }
    }

    /// The runtime's readers: is it instrumented, its tables and globals;
    /// else its kernels' names.
    fn runtime_readers(&mut self, bytes: &[u8]) {
        use gpuinstr_rt::code_objects::{kernel_descriptors, recognise};
        self.op("runtime: recognise", || match recognise(bytes).map_err(|e| e.to_string())? {
            Some(code_object) => Ok(code_object.kernels.len() + code_object.points.len()),
            None => Ok(kernel_descriptors(bytes).len()),
        });
    }

    /// One hook call compiled for the first instruction of each kernel.
    fn payload(
        &mut self,
        lifted: &gpuinstr::stages::lift::LiftedCodeObject<'_>,
        liveness: &gpuinstr::stages::liveness::Liveness,
        code_object: &CodeObject,
    ) {
        use gpuinstr::stages::payload::PayloadPoint;
        use gpuinstr::stages::payloads::{compile_payloads, PayloadOptions};
        let Ok(tool) = self.context.tool.for_target(&code_object.target) else { return };
        let points: Vec<PayloadPoint> = lifted
            .functions
            .iter()
            .enumerate()
            .filter(|(_, f)| f.is_kernel() && f.relocatable())
            .take(2)
            .map(|(function, _)| PayloadPoint {
                function,
                instruction: 0,
                calls: vec![gpuinstr::stages::payload::HookCall {
                    hook: "countInstructionsScalar".into(),
                    arguments: Vec::new(),
                }],
            })
            .collect();
        if points.is_empty() {
            return;
        }
        let registry = &self.context.registry;
        self.op("payload", || {
            compile_payloads(tool, lifted, liveness, &points, registry, &PayloadOptions::default())
                .map(|c| c.payloads.len())
                .map_err(|e| e.to_string())
        });
    }

    /// `instrument` of a whole file, as the command line does it.
    fn instrument(&mut self, tool: &Tool, app: &Path, bytes: &[u8], plan: &Plan) {
        let output = self.context.work.join("instrumented");
        let registry = &self.context.registry;
        self.writing("instrument -o", &output, || {
            let options = InstrumentOptions { allow_partial: true, ..InstrumentOptions::default() };
            let (bytes, report) =
                instrument_file(tool, app, bytes, plan, registry, &options, None).map_err(|e| e.to_string())?;
            gpuinstr::output::write_atomically(&output, &bytes).map_err(|e| e.to_string())?;
            Ok(report.render_text().len())
        });
    }
}

/// The page's source files: none (a mutated database names any path).
struct NoSources;

impl gpuinstr_report::page::Sources for NoSources {
    fn text(&self, _: &str) -> Option<String> {
        None
    }
}

/// Runs one case: `input` of `kind` (mutated from `seed`); `full` adds the
/// steps that run llvm-mc, CoMGR and llc.
pub fn run_case(context: &Context, kind: Kind, seed: &[u8], input: &[u8], full: bool) -> CaseResult {
    let mut run = Run { result: CaseResult::default(), context };
    let path = context.work.join(kind.file_name());
    if let Err(error) = std::fs::write(&path, input) {
        run.result.findings.push(Finding::Panic { op: "write the input".into(), message: error.to_string() });
        return run.result;
    }
    match kind {
        Kind::Plan => {
            let text = String::from_utf8_lossy(input).into_owned();
            let plan = run.op("plan", || Plan::parse(&text, &path.display().to_string()).map_err(|e| e.to_string()));
            if let Some(plan) = plan {
                let app = CodeObject::parse(context.app_bytes.clone(), Vec::new()).expect("the seed application loads");
                run.op("plan select", || {
                    let lifted = gpuinstr::stages::lift::lift(&app).map_err(|e| e.to_string())?;
                    Ok(plan.select(&lifted).len())
                });
                if full {
                    run.instrument(&context.tool, &context.app_path, &context.app_bytes, &plan);
                }
            }
        }
        Kind::Database => {
            // What `gpuinstr-report` does with it: read, the page, the trace.
            let read = run.op("database", || gpuinstr_report::run::read(&path).map_err(|e| e.to_string()));
            if let Some(read) = read {
                run.op("page", || Ok(gpuinstr_report::page::page(&read, &NoSources).len()));
                run.op("trace", || Ok(gpuinstr_report::trace::trace_events(&read).to_string().len()));
            }
        }
        Kind::CacheEntry => {
            // What dynamic mode does with an entry it finds: check it, and
            // read the code object only if it is the one the cache wrote.
            let cache = context.work.join("cache");
            let read = run.op("cache entry", || {
                let cache = crate::kinds::fuzz_cache(&cache).map_err(|e| e.to_string())?;
                std::fs::copy(&path, cache.path("entry")).map_err(|e| e.to_string())?;
                cache.read("entry").map_err(|untrusted| untrusted.to_string())
            });
            if let Some(Some(bytes)) = read {
                if input != seed {
                    run.result.findings.push(Finding::Trusted { op: "cache entry".into() });
                }
                run.runtime_readers(&bytes);
            }
        }
        Kind::Tool => {
            run.op("inspect", || gpuinstr::inspect::inspect(&path, None).map_err(|e| e.to_string()));
            let tool = run.op("tool", || Tool::load(&path).map_err(|e| e.to_string()));
            if let Some(tool) = tool {
                for code_object in &tool.code_objects {
                    run.op("tool module", || {
                        let context = gpuinstr::inkwell::context::Context::create();
                        let module =
                            gpuinstr::tool::read_tool_module(&context, code_object).map_err(|e| e.to_string())?;
                        Ok(gpuinstr::tool::summarize(&module, 1).hooks.len())
                    });
                }
                if full {
                    run.instrument(&tool, &context.app_path, &context.app_bytes, &context.counter_plan);
                }
            }
        }
        _ => {
            run.op("inspect", || {
                let report = gpuinstr::inspect::inspect(&path, None).map_err(|e| e.to_string())?;
                Ok(gpuinstr::inspect::render_text(&report))
            });
            let originals =
                gpuinstr::stages::load::load_bytes(Path::new("seed"), seed).map(|l| l.code_objects).unwrap_or_default();
            let loaded = run.op("load", || gpuinstr::stages::load::load(&path).map_err(|e| e.to_string()));
            // What the runtime reads of every code object a program loads,
            // inside the program (a panic there would abort it).
            if kind == Kind::CodeObject {
                run.runtime_readers(input);
            }
            for code_object in loaded.iter().filter(|_| kind != Kind::CodeObject).flat_map(|l| &l.code_objects) {
                run.runtime_readers(&code_object.bytes);
            }
            if let Some(loaded) = loaded {
                for (index, code_object) in loaded.code_objects.iter().take(3).enumerate() {
                    run.code_object(code_object, originals.get(index), full);
                }
                let extract = context.work.join("extract");
                let _ = std::fs::remove_dir_all(&extract);
                run.op("extract", || {
                    std::fs::create_dir_all(&extract).map_err(|e| e.to_string())?;
                    for (index, code_object) in loaded.code_objects.iter().enumerate() {
                        let file = extract.join(format!("{index}.hsaco"));
                        gpuinstr::output::write_atomically(&file, &code_object.bytes).map_err(|e| e.to_string())?;
                    }
                    Ok(())
                });
            }
            if full {
                run.instrument(&context.tool, &path, input, &context.entry_plan);
            }
        }
    }
    let litter: Vec<String> = std::fs::read_dir(&context.tmp)
        .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    if !litter.is_empty() {
        for name in &litter {
            let path = context.tmp.join(name);
            let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
        }
        run.result.findings.push(Finding::Litter { files: litter });
    }
    run.result
}
