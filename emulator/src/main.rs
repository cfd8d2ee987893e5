//! `gpuinstr-emulate`: runs one kernel of a code object on the CPU.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Context as _, Result};
use clap::Parser;
use gpuinstr_emulator::arguments::{self, Argument, Element};
use gpuinstr_emulator::device::{self, Selection};
use gpuinstr_emulator::program::{Coverage, Program};
use gpuinstr_emulator::{opcode_coverage, Device, Launch};

/// Runs an AMDGPU kernel (GFX9: gfx900 to gfx942) on the CPU and prints its buffers.
#[derive(Parser)]
#[command(name = "gpuinstr-emulate", version)]
struct Cli {
    /// A code object, offload bundle or host file with .hip_fatbin.
    #[arg(required_unless_present = "opcode_coverage")]
    file: Option<PathBuf>,
    /// The kernel (its name or its .kd symbol).
    #[arg(long, required_unless_present_any = ["unimplemented", "opcode_coverage"])]
    kernel: Option<String>,
    /// Which code object of a bundle or host file (e.g. gfx90a).
    #[arg(long)]
    target: Option<String>,
    /// Which of the file's code objects for the target, counted from 0 in
    /// the file's order, where several define the kernel (or to look at one
    /// with --unimplemented).
    #[arg(long)]
    code_object: Option<usize>,
    /// Workgroups: X or X,Y or X,Y,Z.
    #[arg(long, default_value = "1")]
    grid: String,
    /// Work-items per workgroup: X or X,Y or X,Y,Z.
    #[arg(long, default_value = "64")]
    block: String,
    /// A kernel argument (u32:5, f32:0.5, buffer:f32:1,2,3, zeros:u32:64, ...), in order.
    #[arg(long = "arg")]
    arguments: Vec<String>,
    /// A file with one argument per line (after the --arg ones).
    #[arg(long)]
    arguments_file: Option<PathBuf>,
    /// Stop a wave after this many instructions.
    #[arg(long, default_value_t = 50_000_000)]
    max_instructions: u64,
    /// Print every executed instruction.
    #[arg(long)]
    trace: bool,
    /// Run as firmware that does not preload kernel arguments does:
    /// kernels that ask for it start at their compatibility prologue.
    #[arg(long)]
    firmware_without_preload: bool,
    /// A `__managed__` global to bind (as the HIP runtime does) and print
    /// after the run: NAME:ELEMENT:COUNT, e.g. Counter:u64:1.
    #[arg(long = "managed")]
    managed: Vec<String>,
    /// Run nothing: list the opcodes of the code object's functions that
    /// the emulator does not implement, with how often they occur (summed
    /// over all the file's code objects for the target, unless
    /// --code-object picks one).
    #[arg(long)]
    unimplemented: bool,
    /// After the run, the executed opcodes: wave executions and active
    /// lanes per opcode, most executed first.
    #[arg(long)]
    mix: bool,
    /// Run nothing: print every GFX9 opcode this build's LLVM knows, with
    /// whether the emulator implements it (Markdown; docs/emulator-opcodes/).
    #[arg(long, conflicts_with = "file")]
    opcode_coverage: bool,
}

/// NAME:ELEMENT:COUNT.
fn managed_global(text: &str) -> Result<(String, Element, usize)> {
    let mut parts = text.split(':');
    let (Some(name), Some(element), Some(count), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        bail!("--managed `{text}` is not NAME:ELEMENT:COUNT (e.g. Counter:u64:1)");
    };
    let element = Element::parse(element).with_context(|| format!("--managed `{text}`: unknown element type"))?;
    let count = count.parse().with_context(|| format!("--managed `{text}`: the count is not a number"))?;
    Ok((name.to_string(), element, count))
}

fn dims(text: &str) -> Result<[u32; 3]> {
    let parts: Vec<u32> = text
        .split(',')
        .map(|p| p.trim().parse())
        .collect::<Result<_, _>>()
        .with_context(|| format!("`{text}` is not X[,Y[,Z]]"))?;
    if parts.is_empty() || parts.len() > 3 {
        bail!("`{text}` is not X[,Y[,Z]]");
    }
    let mut out = [1u32; 3];
    out[..parts.len()].copy_from_slice(&parts);
    Ok(out)
}

/// `--mix`: executions per opcode (wave executions, active lanes).
fn write_mix(text: &mut String, device: &mut Device, report: &gpuinstr_emulator::RunReport) -> Result<()> {
    let mut mix: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (address, (waves, lanes)) in &report.counts.per_address {
        let name = device.program.fetch(*address).map_or_else(|| "<undecodable>".to_string(), |i| i.name.clone());
        let entry = mix.entry(name).or_default();
        entry.0 += waves;
        entry.1 += lanes;
    }
    let mut rows: Vec<_> = mix.into_iter().collect();
    rows.sort_by_key(|(name, (waves, _))| (std::cmp::Reverse(*waves), name.clone()));
    writeln!(text, "{:>10} {:>12}  opcode", "waves", "lanes")?;
    for (name, (waves, lanes)) in rows {
        writeln!(text, "{waves:>10} {lanes:>12}  {name}")?;
    }
    Ok(())
}

/// `--unimplemented`: what the emulator cannot run in the code objects,
/// summed.
fn print_coverage(programs: &mut [Program]) -> Result<()> {
    let mut instructions = 0;
    let mut opcodes: BTreeMap<String, (usize, bool)> = BTreeMap::new();
    for program in programs.iter_mut() {
        let coverage = program.coverage()?;
        instructions += coverage.instructions;
        for (name, (count, ok)) in coverage.opcodes {
            opcodes.entry(name).or_insert((0, ok)).0 += count;
        }
    }
    let coverage = Coverage { instructions, opcodes };
    let mut text = String::new();
    let missing: Vec<_> = coverage.opcodes.iter().filter(|(_, (_, ok))| !ok).collect();
    let implemented = coverage.implemented_instructions();
    let objects = if programs.len() > 1 { format!(" in {} code objects", programs.len()) } else { String::new() };
    writeln!(
        text,
        "{} of {} instructions ({:.2}%), {} of {} opcodes implemented{objects}",
        implemented,
        coverage.instructions,
        100.0 * implemented as f64 / coverage.instructions.max(1) as f64,
        coverage.opcodes.len() - missing.len(),
        coverage.opcodes.len()
    )?;
    let mut missing = missing;
    missing.sort_by_key(|(name, (count, _))| (std::cmp::Reverse(*count), (*name).clone()));
    for (name, (count, _)) in missing {
        writeln!(text, "{count:>8} {name}")?;
    }
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let Some(file) = cli.file.clone() else {
        let markdown = opcode_coverage::markdown(&opcode_coverage::opcode_coverage());
        let _ = std::io::stdout().lock().write_all(markdown.as_bytes());
        return Ok(());
    };
    let mut texts = cli.arguments.clone();
    if let Some(file) = &cli.arguments_file {
        let content = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        texts.extend(content.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(String::from));
    }
    if cli.unimplemented {
        let objects = device::code_objects(&file, cli.target.as_deref(), cli.code_object)?;
        let mut programs = objects.into_iter().map(Program::new).collect::<Result<Vec<_>, _>>()?;
        return print_coverage(&mut programs);
    }
    let selection = Selection { target: cli.target.as_deref(), kernel: cli.kernel.as_deref(), index: cli.code_object };
    let mut device = Device::open_selected(&file, &selection)?;
    let kernel = cli.kernel.clone().unwrap_or_default();
    device.options.max_instructions = cli.max_instructions;
    device.options.how_to_raise_the_limit = "raise the limit with --max-instructions".into();
    device.options.trace = cli.trace;
    device.options.firmware_preloads_arguments = !cli.firmware_without_preload;
    let mut values = Vec::new();
    let mut buffers: Vec<(usize, u64, Element, usize)> = Vec::new();
    for (index, text) in texts.iter().enumerate() {
        match arguments::parse(text)? {
            Argument::Value(bytes) => values.push(bytes),
            Argument::Buffer { element, bytes } => {
                let address = device.allocate(&format!("argument {index}"), &bytes);
                buffers.push((index, address, element, bytes.len()));
                values.push(address.to_le_bytes().to_vec());
            }
        }
    }
    let mut managed = Vec::new();
    for text in &cli.managed {
        let (name, element, count) = managed_global(text)?;
        let size = (count * element.size()) as u64;
        let Some(address) = device.bind_managed(&name, size) else {
            bail!("{}: no global named {name}", file.display());
        };
        managed.push((name, address, element, size as usize));
    }
    let launch = Launch::whole(dims(&cli.grid)?, dims(&cli.block)?);
    let outcome = device.launch(&kernel, launch, &values);
    let mut text = String::new();
    let trace = match &outcome {
        Ok(report) => &report.trace,
        Err(_) => &device.trace_before_stop,
    };
    if cli.trace {
        for entry in trace {
            writeln!(
                text,
                "wave {:>4} {:#010x} exec {:016x} {}",
                entry.wave,
                entry.address,
                entry.exec,
                device.program.text(entry.address)
            )?;
        }
    }
    let report = match outcome {
        Ok(report) => report,
        Err(stop) => {
            // The trace up to the stop, then the stop.
            let mut out = std::io::stdout().lock();
            if out.write_all(text.as_bytes()).is_err() {
                return Ok(());
            }
            return Err(stop.into());
        }
    };
    let waves = report.counts.per_wave.len();
    writeln!(text, "{}: {} waves, {} instructions", kernel, waves, report.counts.instructions())?;
    for (name, address, element, length) in managed {
        let bytes = device.memory.bytes(address, length).map_err(|f| anyhow::anyhow!("{f}"))?;
        writeln!(text, "{name}: {}", element.render(&bytes).join(" "))?;
    }
    for (index, address, element, length) in buffers {
        let bytes = device.memory.bytes(address, length).map_err(|f| anyhow::anyhow!("{f}"))?;
        writeln!(text, "argument {index}: {}", element.render(&bytes).join(" "))?;
    }
    if cli.mix {
        write_mix(&mut text, &mut device, &report)?;
    }
    // A reader that stops early (`| head`) is not an error.
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}
