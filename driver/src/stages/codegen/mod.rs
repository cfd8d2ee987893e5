//! Stage 7, codegen: LLVM's real AMDGPU backend (this build's llc) on the whole
//! payload module at once, in two halves around stage 8:
//!
//! - [`select_instructions`]: IR -> MIR, stopping after `finalize-isel`
//!   (SSA, virtual registers, the placeholders still there);
//! - [`finish`]: the lowered MIR -> assembly, starting after
//!   `finalize-isel`: register allocation, prologue/epilogue, waitcnt
//!   insertion, with the machine verifier after every pass when asked.
//!
//! One llc process per half and code object, never one per point.

use std::path::Path;

use thiserror::Error;

use crate::stages::lift::LiftedCodeObject;
use crate::stages::load::TargetId;

#[derive(Debug, Error)]
pub enum CodegenError {
    #[error("cannot run {tool}: {source}; is it installed (scripts/setup.sh)?")]
    Tool {
        tool: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("llc {step} failed ({}): {message}", kept_text(.kept))]
    Llc { step: &'static str, message: String, kept: Option<String> },
    #[error("temporary files: {0}")]
    Io(#[from] std::io::Error),
}

/// Where a failed step's input went, or how to keep it.
pub fn kept_text(kept: &Option<String>) -> String {
    match kept {
        Some(path) => format!("input kept in {path}"),
        None => "rerun with --keep-failed DIR to keep its input".into(),
    }
}

/// Copies a failed step's input into the directory the user named, as
/// `<process>-<work directory>-<name>`; the path, when it could be written.
pub fn keep_failed_input(source: &Path, keep_failed: Option<&Path>) -> Option<String> {
    let directory = keep_failed?;
    let work = source.parent().and_then(Path::file_name).map_or("work".into(), |n| n.to_string_lossy());
    let name = source.file_name().map_or("input".into(), |n| n.to_string_lossy());
    let kept = directory.join(format!("{}-{work}-{name}", std::process::id()));
    std::fs::create_dir_all(directory).ok()?;
    std::fs::copy(source, &kept).ok()?;
    Some(kept.display().to_string())
}

/// Keeps emitted assembly llvm-mc failed on where the user asked, with the
/// files its `.incbin` directives read (the machine code, beside it): a
/// directory `<process>-<work directory>-emitted` that `llvm-mc -I DIR
/// DIR/emitted.s` assembles again. The directory's path, when it could be
/// written.
pub fn keep_failed_assembly(source: &Path, keep_failed: Option<&Path>) -> Option<String> {
    let keep = keep_failed?;
    let work = source.parent()?;
    let name = work.file_name().map_or("work".into(), |n| n.to_string_lossy());
    let kept = keep.join(format!("{}-{name}-emitted", std::process::id()));
    std::fs::create_dir_all(&kept).ok()?;
    std::fs::copy(source, kept.join(source.file_name()?)).ok()?;
    let text = std::fs::read_to_string(source).ok()?;
    for name in included_files(&text) {
        let included = work.join(name);
        if included.is_file() {
            std::fs::copy(&included, kept.join(name)).ok()?;
        }
    }
    Some(kept.display().to_string())
}

/// The files `.incbin` directives of `text` read (next to the source),
/// each once: what a kept assembly needs to assemble again.
fn included_files(text: &str) -> std::collections::BTreeSet<&str> {
    text.lines()
        .filter_map(|line| line.trim_start().strip_prefix(".incbin"))
        .filter_map(|rest| rest.trim_start().strip_prefix('"')?.split('"').next())
        .filter(|name| !name.contains('/') && !name.is_empty())
        .collect()
}

/// The llc target arguments for a code object.
pub fn llc_target_arguments(target: &TargetId, code_object_version: u32) -> Vec<String> {
    let mut arguments = vec![
        "-mtriple=amdgcn-amd-amdhsa".to_string(),
        format!("-mcpu={}", target.processor),
        format!("--amdhsa-code-object-version={code_object_version}"),
        "-O3".to_string(),
    ];
    let features = target.llvm_features();
    if !features.is_empty() {
        arguments.push(format!("-mattr={features}"));
    }
    arguments
}

fn run_llc(
    step: &'static str,
    input_name: &str,
    input: &str,
    arguments: &[String],
    directory: &Path,
    keep_failed: Option<&Path>,
) -> Result<String, CodegenError> {
    let source = directory.join(input_name);
    let output_path = directory.join(format!("{input_name}.out"));
    std::fs::write(&source, input)?;
    // Debugging aid: GPUINSTR_KEEP_CODEGEN=<dir> keeps every llc input.
    if let Some(keep) = std::env::var_os("GPUINSTR_KEEP_CODEGEN") {
        let name = format!("{}-{input_name}", directory.file_name().map_or("chunk".into(), |n| n.to_string_lossy()));
        let _ = std::fs::copy(&source, std::path::Path::new(&keep).join(name));
    }
    let deadline = crate::process::deadline_for(input.len());
    let output = crate::process::output_within(
        crate::toolchain::llvm_tool("llc").args(arguments).arg(&source).arg("-o").arg(&output_path),
        deadline,
    )
    .map_err(|source| CodegenError::Tool { tool: "llc", source })?;
    let Some(output) = output else {
        let kept = keep_failed_input(&source, keep_failed);
        return Err(CodegenError::Llc {
            step,
            message: format!("did not finish in {} s and was stopped", deadline.as_secs()),
            kept,
        });
    };
    if !output.status.success() {
        let kept = keep_failed_input(&source, keep_failed);
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(CodegenError::Llc { step, message: summarize_errors(&stderr), kept });
    }
    Ok(std::fs::read_to_string(&output_path)?)
}

/// The lines of llc's error output that say what is wrong: the machine
/// verifier's reports (without the function dumps before them), LLVM ERROR
/// lines, or the first lines.
fn summarize_errors(stderr: &str) -> String {
    let interesting: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            l.starts_with("*** Bad machine code")
                || l.starts_with("- function:")
                || l.starts_with("- instruction:")
                || l.starts_with("- operand")
                || l.starts_with("LLVM ERROR")
                || l.starts_with("error:")
                || l.contains(": error:")
        })
        .take(12)
        .collect();
    let lines: Vec<&str> = if interesting.is_empty() {
        stderr.lines().filter(|l| !l.trim().is_empty()).take(12).collect()
    } else {
        interesting
    };
    lines.join(" | ")
}

/// What keeps codegen from changing what a hook means. From LLVM 17 the
/// AMDGPU atomic optimizer is on by default: it rewrites an `atomicrmw` on
/// a uniform address into one lane's atomic of a sum over the lanes it
/// believes active, read from EXEC as LLVM sees it. A hook that changes
/// EXEC through a framework intrinsic (`gpuinstr::writeExec`, lowered after
/// codegen sees the IR) does so behind LLVM's back: the counter's scalar
/// hook, `atomicAdd(Counter, 1)` on one lane, added every lane active
/// before it (3,124 instead of 1,780 on the vector add) while `verify`
/// still passed. Only the emulator's differential tests see this class.
pub fn meaning_preserving_arguments() -> Vec<String> {
    if crate::toolchain::LLVM_MAJOR >= 17 {
        vec!["-amdgpu-atomic-optimizer-strategy=None".into()]
    } else {
        // LLVM 15's optimizer exists but is off unless asked for.
        Vec::new()
    }
}

/// The atomic optimizer on, as LLVM 17 and newer have it by default (for
/// the test that shows why [`meaning_preserving_arguments`] turns it off).
pub fn atomic_optimizer_arguments() -> Vec<String> {
    if crate::toolchain::LLVM_MAJOR >= 17 {
        vec!["-amdgpu-atomic-optimizer-strategy=Iterative".into()]
    } else {
        vec!["-amdgpu-atomic-optimizations=true".into()]
    }
}

/// IR text -> MIR text after instruction selection.
pub fn select_instructions(
    ir: &str,
    target: &TargetId,
    code_object_version: u32,
    atomic_optimizer: bool,
    directory: &Path,
    keep_failed: Option<&Path>,
) -> Result<String, CodegenError> {
    let mut arguments = llc_target_arguments(target, code_object_version);
    arguments.extend(if atomic_optimizer { atomic_optimizer_arguments() } else { meaning_preserving_arguments() });
    arguments.push("-stop-after=finalize-isel".into());
    run_llc("instruction selection", "payloads.ll", ir, &arguments, directory, keep_failed)
}

/// Lowered MIR text -> assembly text. llc runs the machine verifier on the
/// MIR it parses whatever the options (LLVM 15's MIR parser does), so what
/// stage 8 writes is always checked; `verify_each_pass` checks after every
/// codegen pass too (`-verify-machineinstrs`, about half of llc's time).
pub fn finish(
    mir: &str,
    target: &TargetId,
    code_object_version: u32,
    verify_each_pass: bool,
    directory: &Path,
    keep_failed: Option<&Path>,
) -> Result<String, CodegenError> {
    let arguments = finish_arguments(target, code_object_version, verify_each_pass);
    run_llc("register allocation and emission", "payloads.mir", mir, &arguments, directory, keep_failed)
}

fn finish_arguments(target: &TargetId, code_object_version: u32, verify_each_pass: bool) -> Vec<String> {
    let mut arguments = llc_target_arguments(target, code_object_version);
    arguments.push("-start-after=finalize-isel".into());
    // These move code into a block above stage 8's per-block clobbers, or
    // rewrite the terminators that carry the pinned registers' uses.
    arguments.push("-disable-machine-sink".into());
    arguments.push("-disable-early-taildup".into());
    if verify_each_pass {
        arguments.push("-verify-machineinstrs".into());
    }
    arguments
}

/// After [`finish`] failed on a module: which of its functions the errors
/// came from, and each one's error lines. llc's errors name no function
/// (LLVM 15-19), but its pass manager can say which function each pass
/// runs on (`-debug-pass=Executions`, on the same stream as the errors,
/// unbuffered), so one more run finds every failing function instead of
/// halving the module once per failure. Empty when llc fails before any
/// function (the caller falls back to halving).
pub fn failing_functions(
    mir: &str,
    target: &TargetId,
    code_object_version: u32,
    verify_each_pass: bool,
    directory: &Path,
) -> Result<Vec<(String, String)>, CodegenError> {
    let mut arguments = finish_arguments(target, code_object_version, verify_each_pass);
    arguments.push("-debug-pass=Executions".into());
    let source = directory.join("payloads.mir");
    std::fs::write(&source, mir)?;
    let deadline = crate::process::deadline_for(mir.len());
    let output = crate::process::output_within(
        crate::toolchain::llvm_tool("llc").args(&arguments).arg(&source).arg("-o").arg("/dev/null"),
        deadline,
    )
    .map_err(|source| CodegenError::Tool { tool: "llc", source })?;
    let Some(output) = output else { return Ok(Vec::new()) };
    Ok(errors_by_function(&String::from_utf8_lossy(&output.stderr)))
}

/// `-debug-pass=Executions` output with errors among it: each function's
/// error lines, in order.
fn errors_by_function(stderr: &str) -> Vec<(String, String)> {
    let mut failing: Vec<(String, String)> = Vec::new();
    let mut current: Option<&str> = None;
    for line in stderr.lines() {
        if let Some(rest) = line.split_once("Executing Pass '").map(|(_, rest)| rest) {
            current = rest.split_once("' on Function '").and_then(|(_, name)| name.split_once("'...")).map(|(n, _)| n);
            continue;
        }
        if !(line.starts_with("error:") || line.contains(": error:")) {
            continue;
        }
        let Some(function) = current else { continue };
        match failing.last_mut() {
            Some((name, message)) if name == function => {
                if !message.contains(line) {
                    message.push_str(" | ");
                    message.push_str(line);
                }
            }
            _ => failing.push((function.to_string(), line.to_string())),
        }
    }
    failing
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_assembly_is_kept_with_the_machine_code_it_includes() {
        let work = tempfile::tempdir().unwrap();
        let keep = tempfile::tempdir().unwrap();
        let source = work.path().join("emitted.s");
        std::fs::write(&source, "\t.incbin\t\"gpuinstr-code.bin\", 0, 4\n").unwrap();
        std::fs::write(work.path().join("gpuinstr-code.bin"), [1, 2, 3, 4]).unwrap();
        let kept = keep_failed_assembly(&source, Some(keep.path())).expect("kept");
        let kept = Path::new(&kept);
        assert!(kept.starts_with(keep.path()));
        assert_eq!(std::fs::read(kept.join("gpuinstr-code.bin")).unwrap(), [1, 2, 3, 4]);
        assert!(std::fs::read_to_string(kept.join("emitted.s")).unwrap().contains(".incbin"));
        assert_eq!(keep_failed_assembly(&source, None), None);
    }

    #[test]
    fn errors_are_given_to_the_function_whose_pass_was_running() {
        let stderr = "Pass Arguments:  -greedy\n\
            [t] 0x1     Executing Pass 'Greedy Register Allocator' on Function 'gpuinstr.payload.3'...\n\
            [t] 0x1     Made Modification 'Greedy Register Allocator' on Function 'gpuinstr.payload.3'...\n\
            [t] 0x1     Executing Pass 'Greedy Register Allocator' on Function 'gpuinstr.payload.7'...\n\
            error: ran out of registers during register allocation\n\
            error: ran out of registers during register allocation\n\
            [t] 0x1     Executing Pass 'Virtual Register Rewriter' on Function 'gpuinstr.payload.7'...\n\
            [t] 0x1     Executing Pass 'Greedy Register Allocator' on Function 'gpuinstr.payload.9'...\n\
            error: <unknown>:0:0: ran out of registers during register allocation in function 'gpuinstr.payload.9'\n";
        assert_eq!(
            errors_by_function(stderr),
            vec![
                (
                    "gpuinstr.payload.7".to_string(),
                    "error: ran out of registers during register allocation".to_string()
                ),
                (
                    "gpuinstr.payload.9".to_string(),
                    "error: <unknown>:0:0: ran out of registers during register allocation in function \
                     'gpuinstr.payload.9'"
                        .to_string()
                ),
            ]
        );
    }

    #[test]
    fn the_mir_handed_to_llc_is_verified_even_without_each_pass() {
        let directory = tempfile::tempdir().expect("temporary directory");
        let target = TargetId::from_e_flags(0x3f | 0x200 | 0x400, 4).expect("gfx90a");
        let ir = "define void @payload() #0 {\n  ret void\n}\nattributes #0 = { naked noinline nounwind }\n";
        let selected =
            select_instructions(ir, &target, 4, false, directory.path(), None).expect("instruction selection");
        assert!(selected.contains("SI_RETURN"), "{selected}");
        // What stage 8 could get wrong: a read of a register nothing defined.
        let broken = selected.replacen("SI_RETURN", "$vgpr0 = V_MOV_B32_e32 $vgpr1, implicit $exec\n    SI_RETURN", 1);
        for each_pass in [false, true] {
            finish(&selected, &target, 4, each_pass, directory.path(), None).expect("valid MIR compiles");
            match finish(&broken, &target, 4, each_pass, directory.path(), None) {
                Err(CodegenError::Llc { message, .. }) => {
                    assert!(message.contains("Using an undefined physical register"), "{each_pass}: {message}")
                }
                other => panic!("each pass {each_pass}: broken MIR was not caught: {other:?}"),
            }
        }
    }
}

/// Why assembly text did not become a relocatable.
#[derive(Debug, Error)]
pub enum AssembleError {
    #[error("cannot run {tool}: {source}; is it installed (scripts/setup.sh)?")]
    Tool {
        tool: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("llvm-mc rejected the emitted assembly ({}): {message}", kept_text(.kept))]
    Assembler { message: String, kept: Option<String> },
    #[error("{tool} did not finish in {seconds} s and was stopped ({})", kept_text(.kept))]
    Hang { tool: &'static str, seconds: u64, kept: Option<String> },
    #[error("temporary files: {0}")]
    Io(#[from] std::io::Error),
}

/// The first lines of a tool's error output.
pub fn first_lines(text: &[u8]) -> String {
    let text = String::from_utf8_lossy(text);
    let lines: Vec<&str> = text.lines().take(8).collect();
    lines.join(" | ")
}

/// llvm-mc's command-line target for a code object.
pub fn mc_target_arguments(lifted: &LiftedCodeObject<'_>) -> Vec<String> {
    let target = &lifted.code_object.target;
    let features = target.llvm_features();
    let mut arguments = vec![
        "-triple=amdgcn-amd-amdhsa".to_string(),
        format!("-mcpu={}", target.processor),
        format!("--amdhsa-code-object-version={}", lifted.code_object.code_object_version),
    ];
    if !features.is_empty() {
        arguments.push(format!("-mattr={features}"));
    }
    arguments
}

/// Assembles `text` for the lifted code object's target; the relocatable.
pub fn assemble(
    lifted: &LiftedCodeObject<'_>,
    text: &str,
    directory: &Path,
    keep_failed: Option<&Path>,
) -> Result<Vec<u8>, AssembleError> {
    let source = directory.join("emitted.s");
    let object = directory.join("emitted.o");
    std::fs::write(&source, text)?;
    let deadline = crate::process::deadline_for(text.len());
    let output = crate::process::output_within(
        crate::toolchain::llvm_tool("llvm-mc")
            .args(mc_target_arguments(lifted))
            .arg("-filetype=obj")
            // `.incbin` reads files next to the source.
            .arg("-I")
            .arg(directory)
            .arg(&source)
            .arg("-o")
            .arg(&object),
        deadline,
    )
    .map_err(|source| AssembleError::Tool { tool: "llvm-mc", source })?;
    let Some(output) = output else {
        let kept = keep_failed_assembly(&source, keep_failed);
        return Err(AssembleError::Hang { tool: "llvm-mc", seconds: deadline.as_secs(), kept });
    };
    if !output.status.success() {
        // The assembly is the evidence: kept where the user asked.
        let kept = keep_failed_assembly(&source, keep_failed);
        return Err(AssembleError::Assembler { message: first_lines(&output.stderr), kept });
    }
    Ok(std::fs::read(&object)?)
}
