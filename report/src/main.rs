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
    // Whole or not at all: a temporary file beside it (made with the
    // user's umask, as the page itself should be), renamed.
    let name = output.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let temporary = output.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::write(&temporary, page).and_then(|()| std::fs::rename(&temporary, &output));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written.with_context(|| format!("cannot write {}", output.display()))?;
    eprintln!("gpuinstr-report: {} written", output.display());
    Ok(())
}
