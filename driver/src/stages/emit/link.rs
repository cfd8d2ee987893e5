//! Assembling with llvm-mc-15 and linking with CoMGR (or ld.lld-15). All
//! temporary files live in a temporary directory that is removed at the end.

use std::path::Path;
use std::process::Command;

use thiserror::Error;

use super::{Assembly, EmitNotes, EmitOptions};
use crate::native::{link_relocatable, ComgrError};
use crate::stages::lift::LiftedCodeObject;

/// The linker that makes the executable code object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Linker {
    /// CoMGR's link action (what the ROCm runtime uses).
    #[default]
    Comgr,
    /// ld.lld-15 -shared, as clang's HIP toolchain runs it.
    Lld,
}

#[derive(Debug, Error)]
pub enum EmitError {
    #[error("cannot run {tool}: {source}; is it installed (scripts/setup.sh)?")]
    Tool {
        tool: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("llvm-mc-15 rejected the emitted assembly ({}): {message}", crate::stages::codegen::kept_text(.kept))]
    Assembler { message: String, kept: Option<String> },
    #[error("ld.lld-15 failed: {0}")]
    Lld(String),
    #[error(transparent)]
    Comgr(#[from] ComgrError),
    #[error("temporary files: {0}")]
    Io(#[from] std::io::Error),
}

/// The first lines of a tool's error output.
fn first_lines(text: &[u8]) -> String {
    let text = String::from_utf8_lossy(text);
    let lines: Vec<&str> = text.lines().take(8).collect();
    lines.join(" | ")
}

/// Assembles `text` for the lifted code object's target; the relocatable.
pub fn assemble(
    lifted: &LiftedCodeObject<'_>,
    text: &str,
    directory: &Path,
    keep_failed: Option<&Path>,
) -> Result<Vec<u8>, EmitError> {
    let source = directory.join("emitted.s");
    let object = directory.join("emitted.o");
    std::fs::write(&source, text)?;
    let output = Command::new("llvm-mc-15")
        .args(super::mc_target_arguments(lifted))
        .arg("-filetype=obj")
        .arg(&source)
        .arg("-o")
        .arg(&object)
        .output()
        .map_err(|source| EmitError::Tool { tool: "llvm-mc-15", source })?;
    if !output.status.success() {
        // The assembly is the evidence: kept where the user asked.
        let kept = crate::stages::codegen::keep_failed_input(&source, keep_failed);
        return Err(EmitError::Assembler { message: first_lines(&output.stderr), kept });
    }
    Ok(std::fs::read(&object)?)
}

/// Links a relocatable into an executable code object.
pub fn link(relocatable: &[u8], isa: &str, linker: Linker, directory: &Path) -> Result<Vec<u8>, EmitError> {
    match linker {
        Linker::Comgr => Ok(link_relocatable(relocatable, isa)?),
        Linker::Lld => {
            let object = directory.join("link-input.o");
            let executable = directory.join("linked.hsaco");
            std::fs::write(&object, relocatable)?;
            let output = Command::new("ld.lld-15")
                .args(["--no-undefined", "-shared"])
                .arg(&object)
                .arg("-o")
                .arg(&executable)
                .output()
                .map_err(|source| EmitError::Tool { tool: "ld.lld-15", source })?;
            if !output.status.success() {
                return Err(EmitError::Lld(first_lines(&output.stderr)));
            }
            Ok(std::fs::read(&executable)?)
        }
    }
}

/// Emits, assembles and links; the executable code object's bytes.
pub fn build(
    lifted: &LiftedCodeObject<'_>,
    options: &EmitOptions,
    linker: Linker,
) -> Result<(Vec<u8>, Assembly), EmitError> {
    let directory = tempfile::Builder::new().prefix("gpuinstr-emit-").tempdir()?;
    let assembly = lifted.emit_assembly(options);
    let relocatable = assemble(lifted, &assembly.text, directory.path(), options.keep_failed.as_deref())?;
    let executable = link(&relocatable, &lifted.isa_name(), linker, directory.path())?;
    Ok((executable, assembly))
}

impl EmitNotes {
    pub fn is_empty(&self) -> bool {
        self.raw_instructions.is_empty() && self.raw_descriptors.is_empty() && self.skipped_sections.is_empty()
    }
}
