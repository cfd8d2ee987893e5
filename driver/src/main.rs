//! `gpuinstr-link`: the command line over the driver library.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "gpuinstr-link", version, about = "Instrument AMDGPU code objects with gpuinstr hooks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Inspect { file, target, json } => {
            let report = gpuinstr::inspect::inspect(&file, target.as_deref())?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", gpuinstr::inspect::render_text(&report));
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("gpuinstr-link: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
