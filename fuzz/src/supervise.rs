//! Workers and their supervisor. A worker is this program run as
//! `gpuinstr-fuzz worker`: it runs cases in-process and reports each on a
//! line of its own. The supervisor hands out ranges of cases, reads the
//! lines with a deadline, and when a worker dies in a case (an abort: LLVM's
//! fatal errors, a signal) or stops answering (a hang), it records the case,
//! kills what is left and starts a new worker after it.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::case::{run_case, CaseResult, Context, Finding};
use crate::kinds::{case_input, fuzz_directory, seeds, Kind};

/// What to run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub kind: Kind,
    /// Cases `start..start + cases`.
    pub start: u64,
    pub cases: u64,
    pub jobs: usize,
    /// Every Nth case also runs the steps with llvm-mc, CoMGR and llc.
    pub full_every: u64,
    /// Every Nth case also goes through the `gpuinstr-link` binary.
    pub cli_every: u64,
    /// A case taking longer than this is a hang.
    pub timeout: Duration,
    /// Where inputs that found something are kept.
    pub crashes: PathBuf,
    /// The `gpuinstr-link` binary.
    pub link: PathBuf,
    /// This program (to start workers).
    pub worker: PathBuf,
}

/// A worker's line about one case.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    Begin { case: u64 },
    End { case: u64, ops: usize, refused: usize, findings: Vec<serde_json::Value> },
}

/// What a run found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub kind: String,
    pub start: u64,
    pub cases: u64,
    /// Steps run, and how many refused their input with an error.
    pub ops: u64,
    pub refused: u64,
    /// Cases by finding: panic, bad-error, tool-hang, partial-output, litter,
    /// trusted, command, abort, hang.
    pub findings: BTreeMap<String, u64>,
    /// Each case that found something: (case, finding, kept input).
    pub found: Vec<(u64, String, String)>,
    pub seconds: f64,
}

impl Summary {
    pub fn clean(&self) -> bool {
        self.findings.is_empty()
    }

    pub fn render_text(&self) -> String {
        let mut out = format!(
            "{}: cases {}..{}: {} steps, {} refused their input with an error; ",
            self.kind,
            self.start,
            self.start + self.cases,
            self.ops,
            self.refused
        );
        if self.findings.is_empty() {
            out.push_str("0 panics, 0 aborts, 0 hangs, 0 partial outputs, 0 bad errors, 0 litter");
        } else {
            let parts: Vec<String> = self.findings.iter().map(|(k, n)| format!("{n} {k}")).collect();
            out.push_str(&parts.join(", "));
        }
        out.push_str(&format!(" ({:.0} s)\n", self.seconds));
        for (case, finding, kept) in self.found.iter().take(20) {
            out.push_str(&format!("  case {case}: {finding}\n    kept in {kept}\n"));
        }
        out
    }
}

fn finding_class(finding: &serde_json::Value) -> String {
    finding.get("finding").and_then(|f| f.as_str()).unwrap_or("unknown").to_string()
}

/// Keeps a case's input and what it found; the kept file's path.
fn keep(config: &RunConfig, case: u64, input: &[u8], what: &str) -> String {
    let directory = config.crashes.join(config.kind.name());
    let _ = std::fs::create_dir_all(&directory);
    let path = directory.join(format!("case-{case}-{}", config.kind.file_name()));
    let _ = std::fs::write(&path, input);
    let _ = std::fs::write(path.with_extension("finding.txt"), what);
    path.display().to_string()
}

/// Runs cases `range` in one worker after another until all are done.
fn run_range(
    config: &RunConfig,
    range: std::ops::Range<u64>,
    summary: &Mutex<Summary>,
    inputs: &dyn Fn(u64) -> Vec<u8>,
) {
    let mut next = range.start;
    while next < range.end {
        // The worker's directory is made and removed here: a worker that
        // dies (the findings) cannot clean up after itself.
        let directory = match tempfile::Builder::new().prefix("gpuinstr-fuzz-").tempdir() {
            Ok(directory) => directory,
            Err(error) => panic!("cannot make a worker's temporary directory: {error}"),
        };
        let mut child = match Command::new(&config.worker)
            .args(["worker", "--kind", config.kind.name()])
            .arg("--directory")
            .arg(directory.path())
            .args(["--from", &next.to_string(), "--to", &range.end.to_string()])
            .args(["--full-every", &config.full_every.to_string(), "--cli-every", &config.cli_every.to_string()])
            .arg("--link")
            .arg(&config.link)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
        {
            Ok(child) => child,
            Err(error) => panic!("cannot start a worker {}: {error}", config.worker.display()),
        };
        let stdout = child.stdout.take().expect("piped");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let mut current: Option<u64> = None;
        let failed: Option<(u64, String)>;
        loop {
            match receiver.recv_timeout(config.timeout) {
                Ok(line) => match serde_json::from_str::<Event>(&line) {
                    Ok(Event::Begin { case }) => current = Some(case),
                    Ok(Event::End { case, ops, refused, findings }) => {
                        let mut summary = summary.lock().expect("summary");
                        summary.cases += 1;
                        summary.ops += ops as u64;
                        summary.refused += refused as u64;
                        if !findings.is_empty() {
                            let text = serde_json::to_string_pretty(&findings).unwrap_or_default();
                            let kept = keep(config, case, &inputs(case), &text);
                            let mut classes: Vec<String> = findings.iter().map(finding_class).collect();
                            classes.dedup();
                            for class in &classes {
                                *summary.findings.entry(class.clone()).or_default() += 1;
                            }
                            let first = findings[0].to_string();
                            summary.found.push((case, first.chars().take(600).collect(), kept));
                        }
                        next = case + 1;
                        current = None;
                    }
                    Err(_) => {} // not ours (a library writing to stdout)
                },
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = child.kill();
                    failed = current.map(|c| (c, format!("hang: no answer in {} s", config.timeout.as_secs())));
                    break;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = child.wait().map(|s| format!("{s}")).unwrap_or_default();
                    failed = current.map(|c| (c, format!("abort: the worker ended in the case ({status})")));
                    break;
                }
            }
        }
        let _ = child.wait();
        drop(directory);
        match failed {
            Some((case, what)) => {
                let kept = keep(config, case, &inputs(case), &what);
                let mut summary = summary.lock().expect("summary");
                summary.cases += 1;
                let class = what.split(':').next().unwrap_or("abort").to_string();
                *summary.findings.entry(class).or_default() += 1;
                summary.found.push((case, what, kept));
                next = case + 1;
            }
            None if current.is_none() && next < range.end => {
                // The worker ended between cases without finishing: odd, but
                // never loop forever on it.
                let mut summary = summary.lock().expect("summary");
                *summary.findings.entry("worker-exit".into()).or_default() += 1;
                break;
            }
            None => {}
        }
    }
}

/// Runs the configured cases on `jobs` workers at a time.
pub fn supervise(config: &RunConfig) -> anyhow::Result<Summary> {
    let seeds = seeds(config.kind)?;
    anyhow::ensure!(!seeds.is_empty(), "no seeds for {}", config.kind.name());
    let started = Instant::now();
    let summary = Mutex::new(Summary { kind: config.kind.name().into(), start: config.start, ..Summary::default() });
    let inputs = |case: u64| case_input(config.kind, &seeds, case).1;
    // Ranges of 100 cases, handed out in order.
    let chunks: Vec<std::ops::Range<u64>> = (config.start..config.start + config.cases)
        .step_by(100)
        .map(|a| a..(a + 100).min(config.start + config.cases))
        .collect();
    let queue = Mutex::new(chunks.into_iter());
    std::thread::scope(|scope| {
        for _ in 0..config.jobs.max(1) {
            scope.spawn(|| loop {
                let Some(range) = queue.lock().expect("queue").next() else { break };
                run_range(config, range, &summary, &inputs);
            });
        }
    });
    let mut summary = summary.into_inner().expect("summary");
    summary.found.sort();
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// The worker: runs cases `from..to` of a kind and prints an event line
/// before and after each. Its temporary directory (`directory/tmp`, which
/// the supervisor made and removes) is its own, so that files left behind
/// are seen.
pub fn work(
    kind: Kind,
    from: u64,
    to: u64,
    full_every: u64,
    cli_every: u64,
    link: &Path,
    directory: &Path,
) -> anyhow::Result<()> {
    let tmp = directory.join("tmp");
    std::fs::create_dir_all(&tmp)?;
    // Before anything makes a temporary file or a thread.
    std::env::set_var("TMPDIR", &tmp);
    let context = Context::new(directory.join("work"), tmp)?;
    let seeds = seeds(kind)?;
    let mut stdout = std::io::stdout().lock();
    for case in from..to {
        writeln!(stdout, "{}", serde_json::to_string(&Event::Begin { case })?)?;
        stdout.flush()?;
        let (seed, input) = case_input(kind, &seeds, case);
        let full = full_every > 0 && case % full_every == 0;
        let mut result: CaseResult = run_case(&context, kind, &seeds[seed].bytes, &input, full);
        if cli_every > 0 && case % cli_every == 0 && crate::cli::command_count(kind) > 0 {
            let path = context.work.join(kind.file_name());
            let seed_path = fuzz_directory().join("seeds").join(kind.seed_directory()).join(&seeds[seed].name);
            result.findings.extend(crate::cli::check(link, kind, &context, &path, &seed_path, case / cli_every));
        }
        let findings = result.findings.iter().map(serde_json::to_value).collect::<Result<Vec<_>, _>>()?;
        let end = Event::End { case, ops: result.ops, refused: result.refused, findings };
        writeln!(stdout, "{}", serde_json::to_string(&end)?)?;
        stdout.flush()?;
    }
    Ok(())
}

/// Replays kept inputs (fuzz/regressions/KIND/...): each through every step,
/// full, and through the binary's commands; the findings per file.
pub fn replay(files: &[PathBuf], link: &Path) -> anyhow::Result<Vec<(PathBuf, Vec<Finding>)>> {
    let base = tempfile::Builder::new().prefix("gpuinstr-fuzz-").tempdir()?;
    let tmp = base.path().join("tmp");
    std::fs::create_dir_all(&tmp)?;
    std::env::set_var("TMPDIR", &tmp);
    let context = Context::new(base.path().join("work"), tmp)?;
    let mut outcomes = Vec::new();
    for file in files {
        let kind = file
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|n| Kind::from_name(&n.to_string_lossy()))
            .ok_or_else(|| anyhow::anyhow!("{}: not under a directory named after a kind", file.display()))?;
        let input = std::fs::read(file)?;
        let seeds = seeds(kind)?;
        let mut result = run_case(&context, kind, &seeds[0].bytes, &input, true);
        let path = context.work.join(kind.file_name());
        let seed_path = fuzz_directory().join("seeds").join(kind.seed_directory()).join(&seeds[0].name);
        for turn in 0..crate::cli::command_count(kind) {
            std::fs::write(&path, &input)?;
            result.findings.extend(crate::cli::check(link, kind, &context, &path, &seed_path, turn));
        }
        outcomes.push((file.clone(), result.findings));
    }
    Ok(outcomes)
}
