//! A case through the `gpuinstr-link` binary itself: what a user sees. It
//! must exit 0, or 1 with one line `gpuinstr-link: error: ...` naming the
//! input; a failed command writes no output, and nothing is left in the
//! temporary directory either way.

use std::path::Path;
use std::process::Command;

use crate::case::{Context, Finding};
use crate::kinds::{fuzz_directory, Kind};

/// The subcommands a kind goes through, one per sampled case in turn:
/// `(arguments, output written on success)`.
fn commands(kind: Kind, context: &Context, input: &Path, seed: &Path) -> Vec<(Vec<String>, Option<String>)> {
    let s = |p: &Path| p.display().to_string();
    let output = s(&context.work.join("cli-output"));
    let seeds = fuzz_directory().join("seeds");
    let entry_plan = s(&context.entry_plan_path);
    let counter_plan = s(&seeds.join("plan/instruction-counter.toml"));
    let input = s(input);
    let v = |items: &[&str]| items.iter().map(|i| i.to_string()).collect::<Vec<_>>();
    match kind {
        Kind::Plan => vec![(
            v(&[
                "instrument",
                &s(&context.app_path),
                "--tool",
                &s(&context.tool_path),
                "--plan",
                &input,
                "-o",
                &output,
            ]),
            Some(output),
        )],
        // gpuinstr-report's (`program`): the page and the trace.
        Kind::Database => vec![
            (v(&[&input, "-o", &output]), Some(output.clone())),
            (v(&[&input, "-o", &output, "--trace", &format!("{output}.trace")]), Some(output.clone())),
        ],
        Kind::CacheEntry => Vec::new(),
        Kind::Tool => vec![
            (v(&["inspect", &input]), None),
            (
                v(&["instrument", &s(&context.app_path), "--tool", &input, "--plan", &counter_plan, "-o", &output]),
                Some(output.clone()),
            ),
        ],
        _ => vec![
            (v(&["inspect", &input]), None),
            (v(&["lift", &input, "--emit", "asm"]), None),
            (v(&["analyze", &input]), None),
            (v(&["roundtrip", &input, "-o", &output, "--check"]), Some(output.clone())),
            (v(&["extract", &input, "-o", &output]), None),
            (v(&["verify", &s(seed), &input]), None),
            (
                v(&[
                    "instrument",
                    &input,
                    "--tool",
                    &s(&context.tool_path),
                    "--plan",
                    &entry_plan,
                    "-o",
                    &output,
                    "--allow-partial",
                ]),
                Some(output.clone()),
            ),
        ],
    }
}

/// Commands whose exit status 1 may be an answer: verify found something,
/// roundtrip --check found a difference (its output is written).
fn reports(arguments: &[String]) -> bool {
    arguments[0] == "verify" || (arguments[0] == "roundtrip" && arguments.iter().any(|a| a == "--check"))
}

/// How many commands a kind goes through.
pub fn command_count(kind: Kind) -> u64 {
    match kind {
        Kind::Plan => 1,
        Kind::Tool | Kind::Database => 2,
        // Only the runtime reads cache entries, inside a program.
        Kind::CacheEntry => 0,
        _ => 7,
    }
}

/// Runs the `turn`-th command of the kind on the case's input file.
pub fn check(link: &Path, kind: Kind, context: &Context, input: &Path, seed: &Path, turn: u64) -> Vec<Finding> {
    let commands = commands(kind, context, input, seed);
    let (arguments, output) = &commands[(turn % commands.len() as u64) as usize];
    let tmp = context.work.join("cli-tmp");
    let _ = std::fs::remove_dir_all(&tmp);
    let _ = std::fs::create_dir_all(&tmp);
    let output_path = context.work.join("cli-output");
    let _ = std::fs::remove_dir_all(&output_path).or_else(|_| std::fs::remove_file(&output_path));
    let _ = std::fs::remove_file(output_path.with_extension("trace"));
    let command = arguments.join(" ");
    // A database goes through gpuinstr-report, built beside gpuinstr-link.
    let program = match kind {
        Kind::Database => link.with_file_name("gpuinstr-report"),
        _ => link.to_path_buf(),
    };
    let error_prefix = format!("{}: error: ", program.file_name().unwrap_or_default().to_string_lossy());
    let ran = Command::new(&program).args(arguments).env("TMPDIR", &tmp).output();
    let mut findings = Vec::new();
    let ran = match ran {
        Ok(ran) => ran,
        Err(error) => {
            findings.push(Finding::Command { command, status: format!("cannot run: {error}"), stderr: String::new() });
            return findings;
        }
    };
    let stderr = String::from_utf8_lossy(&ran.stderr).into_owned();
    let name = input.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let status = match ran.status.code() {
        Some(0) => None,
        Some(1) => {
            let lines: Vec<&str> = stderr.lines().collect();
            let one_line = lines.len() == 1 && lines[0].starts_with(&error_prefix);
            // verify's findings and roundtrip --check's differences are
            // their answers (on stdout), not errors.
            let answer = reports(arguments) && stderr.is_empty();
            (!(answer || one_line && lines[0].contains(&name)))
                .then(|| "1 without one error line naming the input".to_string())
        }
        Some(code) => Some(format!("exit {code}")),
        None => Some(format!("killed: {:?}", ran.status)),
    };
    if let Some(status) = status {
        findings.push(Finding::Command {
            command: command.clone(),
            status,
            stderr: stderr.chars().take(2000).collect(),
        });
    }
    if crate::case::is_tool_hang(&stderr) {
        findings.push(Finding::ToolHang { op: command.clone(), message: stderr.trim().to_string() });
    }
    if ran.status.code() == Some(1) && !(reports(arguments) && stderr.is_empty()) {
        if let Some(output) = output {
            if Path::new(output).exists() {
                findings.push(Finding::PartialOutput { op: command.clone(), path: output.clone() });
            }
        }
    }
    let litter: Vec<String> = std::fs::read_dir(&tmp)
        .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    if !litter.is_empty() {
        findings.push(Finding::Litter { files: litter });
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let _ = std::fs::remove_dir_all(&output_path).or_else(|_| std::fs::remove_file(&output_path));
    findings
}
