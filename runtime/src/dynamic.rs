//! Dynamic mode: code objects instrumented as the program loads them
//! (`gpuinstr-run --tool T --plan P`), each by the driver library in a
//! worker process of its own (`worker.rs`), so that nothing that goes wrong
//! there (an LLVM fatal error on a full disk, a crash) takes the program
//! with it: the code object then runs as it is, said loudly. What
//! `gpuinstr-link instrument` would write for a code object is what ROCr
//! gets instead; results are cached on disk by content (the code object,
//! the tool, the plan, gpuinstr's version), so a second run starts as fast
//! as an uninstrumented one.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use gpuinstr::instrument::InstrumentOptions;
use gpuinstr::plan::Plan;
use gpuinstr::stages::load::code_object::CodeObject;
use gpuinstr::stages::sva::RegisterGrowth;
use gpuinstr::tool::Tool;
use sha2::{Digest, Sha256};

use crate::cache::Cache;
use crate::code_objects::{is_instrumented, HIP_RUNTIME_KERNELS};
use crate::report::DynamicRecord;
use crate::worker::{Outcome, Request};

/// What the user asked for (`GPUINSTR_DYNAMIC_TOOL`, `_PLAN`, `GPUINSTR_CACHE`,
/// `GPUINSTR_ALLOW_PARTIAL`).
pub struct Dynamic {
    /// The tool and plan as the user named them (the worker reads them),
    /// the tool checked once here.
    tool: Tool,
    tool_path: PathBuf,
    plan_path: PathBuf,
    tool_bytes_hash: [u8; 32],
    plan_text: String,
    cache: Option<Cache>,
    options: InstrumentOptions,
    /// `gpuinstr-dynamic-worker`.
    worker: PathBuf,
    /// Code objects already made in this process, by content key.
    made: HashMap<[u8; 32], Arc<[u8]>>,
}

/// A code object's `source` when it could not be instrumented and runs as
/// it is.
pub const NOT_INSTRUMENTED: &str = "not instrumented";

/// A code object to load instead (none: the program's own) and its record.
type Loaded = (Option<Arc<[u8]>>, DynamicRecord);

/// What the worker made of a code object.
enum Made {
    Instrumented { out: Vec<u8>, selected: usize, left_out: usize, steps: Vec<(String, f64)> },
    NothingSelected,
}

/// A code object for ROCr to load instead (none: the program's own), and
/// what making it took or why there is none.
pub struct Replacement {
    pub bytes: Option<Arc<[u8]>>,
    pub record: DynamicRecord,
    /// Cache entries found untrusted on the way (made again).
    pub warnings: Vec<String>,
}

/// A temporary directory to hand a code object to the worker in (removed
/// when dropped).
fn worker_directory() -> Result<tempfile::TempDir, String> {
    tempfile::Builder::new()
        .prefix("gpuinstr-dynamic-")
        .tempdir()
        .map_err(|e| format!("no temporary directory for the worker: {e}"))
}

fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    hasher.finalize().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The default cache: `$XDG_CACHE_HOME/gpuinstr`, else `~/.cache/gpuinstr`.
fn default_cache() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("gpuinstr"));
    }
    std::env::var_os("HOME").filter(|d| !d.is_empty()).map(|home| PathBuf::from(home).join(".cache/gpuinstr"))
}

impl Dynamic {
    /// Dynamic mode as the environment asks for it; `None` when it does not.
    /// The worker is `GPUINSTR_DYNAMIC_WORKER`, else `beside` (the one next
    /// to the runtime library).
    pub fn from_env(beside: Option<PathBuf>) -> Result<Option<Dynamic>, String> {
        let tool = std::env::var_os("GPUINSTR_DYNAMIC_TOOL").filter(|v| !v.is_empty());
        let plan = std::env::var_os("GPUINSTR_DYNAMIC_PLAN").filter(|v| !v.is_empty());
        let (tool, plan) = match (tool, plan) {
            (None, None) => return Ok(None),
            (Some(tool), Some(plan)) => (PathBuf::from(tool), PathBuf::from(plan)),
            _ => return Err("dynamic mode needs both a tool and a plan (--tool and --plan)".into()),
        };
        let cache = match std::env::var_os("GPUINSTR_CACHE") {
            Some(dir) if dir.is_empty() || dir == "none" => None,
            Some(dir) => Some(PathBuf::from(dir)),
            None => default_cache(),
        };
        let allow_partial = std::env::var_os("GPUINSTR_ALLOW_PARTIAL").is_some_and(|v| v != "0");
        let grow_registers = match std::env::var("GPUINSTR_GROW_REGISTERS").as_deref() {
            Err(_) | Ok("") | Ok("free") => RegisterGrowth::FreeOfOccupancy,
            Ok("never") => RegisterGrowth::Never,
            Ok("always") => RegisterGrowth::Always,
            Ok(other) => return Err(format!("GPUINSTR_GROW_REGISTERS={other}: give free, never or always")),
        };
        // A selection needs the originals beside the instrumented kernels.
        let keep_originals = ["GPUINSTR_SELECT_KERNEL", "GPUINSTR_SELECT_FIRST", "GPUINSTR_SELECT_EVERY"]
            .iter()
            .any(|variable| std::env::var_os(variable).is_some_and(|v| !v.is_empty()));
        let options =
            InstrumentOptions { allow_partial, grow_registers, keep_originals, ..InstrumentOptions::default() };
        let worker = match std::env::var_os("GPUINSTR_DYNAMIC_WORKER").filter(|w| !w.is_empty()) {
            Some(worker) => PathBuf::from(worker),
            None => beside.ok_or("cannot tell where gpuinstr-dynamic-worker is: name it in GPUINSTR_DYNAMIC_WORKER")?,
        };
        if !worker.is_file() {
            return Err(format!(
                "{} is missing: build it with `cargo build --release -p gpuinstr-runtime` (or name it in GPUINSTR_DYNAMIC_WORKER)",
                worker.display()
            ));
        }
        Dynamic::new(&tool, &plan, cache, options, worker).map(Some)
    }

    pub fn allows_partial(&self) -> bool {
        self.options.allow_partial
    }

    pub fn new(
        tool_path: &Path,
        plan_path: &Path,
        cache: Option<PathBuf>,
        options: InstrumentOptions,
        worker: PathBuf,
    ) -> Result<Dynamic, String> {
        let cache = cache.map(Cache::open).transpose()?;
        let tool = Tool::load(tool_path).map_err(|e| e.to_string())?;
        let tool_bytes = std::fs::read(tool_path).map_err(|e| format!("{}: {e}", tool_path.display()))?;
        let plan_text = std::fs::read_to_string(plan_path).map_err(|e| format!("{}: {e}", plan_path.display()))?;
        // Checked here, so that a plan that cannot be read stops the run
        // before the program starts.
        Plan::parse(&plan_text, &plan_path.display().to_string()).map_err(|e| e.to_string())?;
        // The worker is handed each code object in a temporary directory:
        // one that cannot be made would leave every code object
        // uninstrumented, so it stops the run before the program starts.
        worker_directory().map_err(|e| format!("{e} (TMPDIR={})", std::env::temp_dir().display()))?;
        Ok(Dynamic {
            tool,
            tool_path: tool_path.to_path_buf(),
            plan_path: plan_path.to_path_buf(),
            tool_bytes_hash: sha256(&[&tool_bytes]),
            plan_text,
            cache,
            options,
            worker,
            made: HashMap::new(),
        })
    }

    fn key(&self, bytes: &[u8]) -> [u8; 32] {
        let version = concat!(env!("CARGO_PKG_VERSION"), " ", env!("GPUINSTR_SOURCE_IDENTITY"));
        let options = format!(
            "partial {} grow {:?} originals {}",
            self.options.allow_partial, self.options.grow_registers, self.options.keep_originals
        );
        sha256(&[version.as_bytes(), &self.tool_bytes_hash, self.plan_text.as_bytes(), options.as_bytes(), bytes])
    }

    /// The code object to load instead of `bytes`: `None` to load it as
    /// it is without a word (not an AMDGPU code object, or already
    /// instrumented); a replacement without bytes to load it as it is and
    /// say why: `as it is` (HIP's own kernels, or the plan selects nothing
    /// in it) or `not instrumented` (it could not be: the program stays
    /// correct, the tool misses its kernels, and the caller must say so).
    pub fn replace(&mut self, bytes: &[u8]) -> Option<Replacement> {
        if is_instrumented(bytes)
            || gpuinstr::stages::load::code_object::elf_machine(bytes) != Some(object::elf::EM_AMDGPU)
        {
            return None;
        }
        let started = Instant::now();
        let key = self.key(bytes);
        let mut warnings = Vec::new();
        let not_instrumented = format!("{}.{}", hex(&key), NOT_INSTRUMENTED.replace(' ', "-"));
        if let Some(why) = self.cached(&not_instrumented, &mut warnings) {
            let why = String::from_utf8_lossy(&why).trim().to_string();
            let record = DynamicRecord::new(bytes, &key, NOT_INSTRUMENTED, 0.0, Some(why));
            return Some(Replacement { bytes: None, record, warnings });
        }
        match self.instrumented(bytes, &key, started, &mut warnings) {
            Ok(replacement) => replacement.map(|(bytes, record)| Replacement { bytes, record, warnings }),
            Err(why) => {
                self.remember(&not_instrumented, why.as_bytes());
                let seconds = started.elapsed().as_secs_f64();
                let record = DynamicRecord::new(bytes, &key, NOT_INSTRUMENTED, seconds, Some(why));
                Some(Replacement { bytes: None, record, warnings })
            }
        }
    }

    /// The cache's entry `name`, if there is one to trust (an untrusted one
    /// is a warning, and is made again).
    fn cached(&self, name: &str, warnings: &mut Vec<String>) -> Option<Vec<u8>> {
        match self.cache.as_ref()?.read(name) {
            Ok(found) => found,
            Err(untrusted) => {
                warnings.push(untrusted.to_string());
                None
            }
        }
    }

    /// Keeps an entry in the cache; one that cannot be written costs time,
    /// not results.
    fn remember(&self, name: &str, bytes: &[u8]) {
        if let Some(cache) = &self.cache {
            let _ = cache.write(name, bytes);
        }
    }

    fn instrumented(
        &mut self,
        bytes: &[u8],
        key: &[u8; 32],
        started: Instant,
        warnings: &mut Vec<String>,
    ) -> Result<Option<Loaded>, String> {
        let key = *key;
        if let Some(made) = self.made.get(&key) {
            let record = DynamicRecord::new(bytes, &key, "this run", started.elapsed().as_secs_f64(), None);
            return Ok(Some((Some(made.clone()), record)));
        }
        let cached = format!("{}.hsaco", hex(&key));
        let cached_as_it_is = format!("{}.as-it-is", hex(&key));
        let as_it_is = |why: &str| {
            let record = DynamicRecord::new(bytes, &key, "as it is", started.elapsed().as_secs_f64(), Some(why.into()));
            Ok(Some((None, record)))
        };
        if let Some(found) = self.cached(&cached, warnings) {
            if is_instrumented(&found) {
                let made: Arc<[u8]> = found.into();
                self.made.insert(key, made.clone());
                let record = DynamicRecord::new(bytes, &key, "cache", started.elapsed().as_secs_f64(), None);
                return Ok(Some((Some(made), record)));
            }
        }
        if let Some(why) = self.cached(&cached_as_it_is, warnings) {
            return as_it_is(String::from_utf8_lossy(&why).trim());
        }
        let decided_as_it_is = |why: &str| {
            self.remember(&cached_as_it_is, why.as_bytes());
            as_it_is(why)
        };
        let app = CodeObject::parse(bytes.to_vec(), vec![]).map_err(|e| format!("it cannot be read: {e}"))?;
        if !app.kernels.is_empty() && app.kernels.iter().all(|k| k.name().starts_with(HIP_RUNTIME_KERNELS)) {
            return decided_as_it_is("HIP's own kernels (fills and copies)");
        }
        self.tool.for_target(&app.target).map_err(|e| e.to_string())?;
        let mut steps = vec![("read and key".to_string(), started.elapsed().as_secs_f64())];
        let worked = Instant::now();
        let (out, selected, left_out, worker_steps) = match self.instrument_elsewhere(bytes)? {
            Made::Instrumented { out, selected, left_out, steps } => (out, selected, left_out, steps),
            Made::NothingSelected => return decided_as_it_is("the plan selects nothing in it"),
        };
        let partial = (left_out > 0).then(|| format!("{left_out} of {selected} selected points left out"));
        // Nested steps (`payloads/...`) are within their parent's time.
        let in_worker: f64 = worker_steps.iter().filter(|(name, _)| !name.contains('/')).map(|(_, s)| s).sum();
        steps.push(("start the worker".to_string(), (worked.elapsed().as_secs_f64() - in_worker).max(0.0)));
        steps.extend(worker_steps.into_iter().map(|(name, seconds)| (format!("instrument/{name}"), seconds)));
        let written = Instant::now();
        if partial.is_none() {
            self.remember(&cached, &out);
        }
        steps.push(("write the cache".to_string(), written.elapsed().as_secs_f64()));
        let made: Arc<[u8]> = out.into();
        self.made.insert(key, made.clone());
        let mut record = DynamicRecord::new(bytes, &key, "instrumented", started.elapsed().as_secs_f64(), partial);
        record.steps = steps;
        Ok(Some((Some(made), record)))
    }

    /// `bytes` instrumented by the worker, in a process of its own: its
    /// outcome, or why there is none (it could not start, it died, it said
    /// it could not).
    fn instrument_elsewhere(&self, bytes: &[u8]) -> Result<Made, String> {
        let directory = worker_directory()?;
        let request = Request {
            tool: self.tool_path.clone(),
            plan: self.plan_path.clone(),
            input: directory.path().join("in.hsaco"),
            output: directory.path().join("out.hsaco"),
            allow_partial: self.options.allow_partial,
            grow_registers: crate::worker::growth_name(self.options.grow_registers).into(),
            keep_originals: self.options.keep_originals,
        };
        let request_path = directory.path().join("request.json");
        let written = std::fs::write(&request.input, bytes)
            .and_then(|()| std::fs::write(&request_path, serde_json::to_vec(&request).map_err(std::io::Error::other)?));
        written.map_err(|e| format!("cannot hand it to the worker ({}): {e}", directory.path().display()))?;
        let output = std::process::Command::new(&self.worker)
            .arg(&request_path)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("cannot start {}: {e}", self.worker.display()))?;
        let said = String::from_utf8_lossy(&output.stderr);
        let last_words: Vec<&str> = said.lines().filter(|l| !l.trim().is_empty()).collect();
        let last_words = last_words[last_words.len().saturating_sub(3)..].join(" / ");
        if !output.status.success() {
            use std::os::unix::process::ExitStatusExt;
            let how = match output.status.signal() {
                Some(signal) => format!("died of signal {signal}"),
                None => format!("exited with status {}", output.status.code().unwrap_or(-1)),
            };
            return Err(format!("the instrumenting process {how}: {last_words}"));
        }
        match serde_json::from_slice::<Outcome>(&output.stdout) {
            Ok(Outcome::Instrumented { selected, left_out, steps }) => {
                let out = std::fs::read(&request.output).map_err(|e| format!("the worker's output: {e}"))?;
                Ok(Made::Instrumented { out, selected, left_out, steps })
            }
            Ok(Outcome::NothingSelected) => Ok(Made::NothingSelected),
            Ok(Outcome::Failed(why)) => Err(why),
            Err(error) => {
                Err(format!("the instrumenting process answered what cannot be read ({error}): {last_words}"))
            }
        }
    }
}
