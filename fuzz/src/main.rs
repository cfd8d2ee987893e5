//! `gpuinstr-fuzz`: runs mutated inputs through gpuinstr (docs/fuzzing.md).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::{Parser, Subcommand};
use gpuinstr_fuzz::kinds::{Kind, ALL_KINDS};
use gpuinstr_fuzz::supervise::{replay, supervise, work, RunConfig};

#[derive(Parser)]
#[command(name = "gpuinstr-fuzz", about = "Mutation fuzzing of gpuinstr's readers and subcommands")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run cases of one kind (or all kinds) and print what they found; exit 1 when anything was found.
    Run {
        /// The input kind; all kinds when absent.
        #[arg(long, value_enum)]
        kind: Option<Kind>,
        /// How many cases (per kind).
        #[arg(long, default_value_t = 1000)]
        cases: u64,
        /// The first case's number.
        #[arg(long, default_value_t = 0)]
        start: u64,
        #[arg(long)]
        jobs: Option<usize>,
        /// Every Nth case also runs llvm-mc, CoMGR and llc (round trip, instrument, payload).
        #[arg(long, default_value_t = 25)]
        full_every: u64,
        /// Every Nth case also runs a `gpuinstr-link` command.
        #[arg(long, default_value_t = 50)]
        cli_every: u64,
        /// Seconds after which a case is a hang.
        #[arg(long, default_value_t = 120)]
        timeout: u64,
        /// Where the inputs of cases that found something go.
        #[arg(long, default_value = "target/fuzz/crashes")]
        crashes: PathBuf,
        /// The gpuinstr-link binary (default: next to this one).
        #[arg(long)]
        link: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Run kept inputs (files under a directory named after their kind) through every step and command.
    Replay {
        files: Vec<PathBuf>,
        #[arg(long)]
        link: Option<PathBuf>,
    },
    /// Write the input of case N of a kind to a file (to keep it as a regression input, or to look at it).
    Case {
        #[arg(long, value_enum)]
        kind: Kind,
        case: u64,
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Internal: run cases in this process and report each on stdout.
    #[command(hide = true)]
    Worker {
        #[arg(long, value_enum)]
        kind: Kind,
        #[arg(long)]
        from: u64,
        #[arg(long)]
        to: u64,
        #[arg(long)]
        full_every: u64,
        #[arg(long)]
        cli_every: u64,
        #[arg(long)]
        link: PathBuf,
        /// Where its files go (the supervisor makes and removes it).
        #[arg(long)]
        directory: PathBuf,
    },
}

/// `gpuinstr-link` next to this program.
fn default_link() -> Result<PathBuf> {
    let me = std::env::current_exe()?;
    let link = me.with_file_name("gpuinstr-link");
    anyhow::ensure!(link.exists(), "{} not found: build gpuinstr-driver, or pass --link", link.display());
    Ok(link)
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Run { kind, cases, start, jobs, full_every, cli_every, timeout, crashes, link, json } => {
            let link = match link {
                Some(link) => link,
                None => default_link()?,
            };
            let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let kinds: Vec<Kind> = kind.map_or(ALL_KINDS.to_vec(), |k| vec![k]);
            let mut clean = true;
            for kind in kinds {
                let config = RunConfig {
                    kind,
                    start,
                    cases,
                    jobs,
                    full_every,
                    cli_every,
                    timeout: Duration::from_secs(timeout),
                    crashes: crashes.clone(),
                    link: link.clone(),
                    worker: std::env::current_exe()?,
                };
                let summary = supervise(&config)?;
                if json {
                    println!("{}", serde_json::to_string(&summary)?);
                } else {
                    print!("{}", summary.render_text());
                }
                clean &= summary.clean();
            }
            Ok(if clean { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Command::Replay { files, link } => {
            let link = match link {
                Some(link) => link,
                None => default_link()?,
            };
            let mut clean = true;
            for (file, findings) in replay(&files, &link)? {
                if findings.is_empty() {
                    println!("{}: ok", file.display());
                } else {
                    clean = false;
                    println!("{}: {}", file.display(), serde_json::to_string(&findings)?);
                }
            }
            Ok(if clean { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Command::Case { kind, case, output } => {
            let seeds = gpuinstr_fuzz::kinds::seeds(kind)?;
            let (_, input) = gpuinstr_fuzz::kinds::case_input(kind, &seeds, case);
            std::fs::write(&output, input)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Worker { kind, from, to, full_every, cli_every, link, directory } => {
            work(kind, from, to, full_every, cli_every, &link, &directory)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("gpuinstr-fuzz: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
