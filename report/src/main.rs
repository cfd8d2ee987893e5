//! `gpuinstr-report DATABASE [-o PAGE]`: the run's page, one self-contained
//! HTML file (default: beside the database, `.html`).

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

#[derive(Parser)]
#[command(name = "gpuinstr-report", about = "A run's page (HTML) from the database gpuinstr's runtime writes")]
struct Arguments {
    /// The run's database (`report.sqlite` beside the JSON report).
    database: PathBuf,
    /// Where the page goes (default: the database's name with `.html`).
    #[arg(short, long, value_name = "PAGE")]
    output: Option<PathBuf>,
    /// Also the dispatches on their queues as a trace viewer's file
    /// (Chrome trace-event JSON: Perfetto and chrome://tracing open it).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
}

/// Writes `bytes` to `path` whole or not at all: a temporary file beside
/// it (made with the user's umask), renamed.
fn write_whole(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let temporary = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::write(&temporary, bytes).and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written.with_context(|| format!("cannot write {}", path.display()))
}

fn main() -> std::process::ExitCode {
    match run(Arguments::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // One line: the file, what is wrong, what to do.
            eprintln!("gpuinstr-report: error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(arguments: Arguments) -> anyhow::Result<()> {
    let run = gpuinstr_report::read(&arguments.database)?;
    let page = gpuinstr_report::page(&run, &gpuinstr_report::FromDisk);
    let output = arguments.output.unwrap_or_else(|| arguments.database.with_extension("html"));
    write_whole(&output, page.as_bytes())?;
    eprintln!("gpuinstr-report: {} written", output.display());
    if let Some(trace) = &arguments.trace {
        let events = gpuinstr_report::trace_events(&run);
        write_whole(trace, serde_json::to_string(&events)?.as_bytes())?;
        eprintln!("gpuinstr-report: {} written (open it in ui.perfetto.dev)", trace.display());
    }
    Ok(())
}
