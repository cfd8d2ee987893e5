//! What the device's tests share: gpuinstr-run and HIP programs built with hipcc.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// gpuinstr-run, told where Cargo put the device library and the runtime
/// for this test run (`deps/`; `cargo build` puts them next to gpuinstr-run).
pub fn gpuinstr_run() -> Command {
    let run = PathBuf::from(env!("CARGO_BIN_EXE_gpuinstr-run"));
    let directory = run.parent().expect("target directory");
    // The newer of the two: an older `cargo build` may have left one beside
    // gpuinstr-run that predates this run's sources.
    let built = |file: &str| {
        [directory.join(file), directory.join("deps").join(file)]
            .into_iter()
            .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
            .max()
            .map(|(_, p)| p)
            .unwrap_or_else(|| panic!("Cargo builds {file} with the tests"))
    };
    let mut command = Command::new(&run);
    command.env("GPUINSTR_DEVICE_LIBRARY", built("libgpuinstr_device_preload.so"));
    command.env("GPUINSTR_DEVICE_KFD_LIBRARY", built("libgpuinstr_device_kfd.so"));
    command.env("GPUINSTR_RUNTIME_LIBRARY", built("libgpuinstr_rt.so"));
    command
}

/// `tests/inputs/device/NAME.hip` built by hipcc for `target` into `directory`
/// (clang leaves empty directories in TMPDIR: it gets one of ours).
pub fn build(name: &str, target: &str, directory: &Path) -> PathBuf {
    build_with(&format!("{name}.hip"), target, directory, &[])
}

/// `tests/inputs/device/FILE` built by hipcc for `target` with `options`
/// after the source (libraries such as `-lrocrand`, `-std=c++17`).
pub fn build_with(file: &str, target: &str, directory: &Path, options: &[&str]) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/inputs/device").join(file);
    let stem = Path::new(file).file_stem().expect("a file name").to_string_lossy().to_string();
    let output = directory.join(format!("{stem}-{target}"));
    let built = Command::new("hipcc")
        .args(["-O2", &format!("--offload-arch={target}")])
        .arg(&source)
        .args(options)
        .arg("-o")
        .arg(&output)
        .env("TMPDIR", directory)
        .output()
        .expect("hipcc runs");
    assert!(built.status.success(), "hipcc {}: {}", source.display(), String::from_utf8_lossy(&built.stderr));
    output
}

/// `tests/inputs/device/NAME.hip` as a code object file for `hipModuleLoad`
/// (`hipcc --genco`).
pub fn build_code_object(name: &str, target: &str, directory: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/inputs/device").join(format!("{name}.hip"));
    let output = directory.join(format!("{name}-{target}.co"));
    let built = Command::new("hipcc")
        .args(["--genco", &format!("--offload-arch={target}")])
        .args(gpuinstr::toolchain::hipcc_non_uniform_workgroups())
        .arg(&source)
        .arg("-o")
        .arg(&output)
        .env("TMPDIR", directory)
        .output()
        .expect("hipcc runs");
    assert!(built.status.success(), "hipcc --genco {}: {}", source.display(), String::from_utf8_lossy(&built.stderr));
    output
}

/// Runs `program` on the emulated `target`.
pub fn run(program: &Path, target: &str) -> Output {
    run_with(program, target, &[])
}

/// Runs `program arguments...` on the emulated `target`.
pub fn run_with(program: &Path, target: &str, arguments: &[&Path]) -> Output {
    gpuinstr_run().args(["--target", target, "--"]).arg(program).args(arguments).output().expect("gpuinstr-run runs")
}

/// Runs `program arguments...` on `target`, which must succeed; its standard output.
pub fn run_ok(program: &Path, target: &str, arguments: &[&Path]) -> String {
    let output = run_with(program, target, arguments);
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "{target}: {stdout}{}", String::from_utf8_lossy(&output.stderr));
    stdout
}

/// Every line of `expected` is a line of `text` (compared without column padding).
pub fn assert_lines(text: &str, expected: &[&str], context: &str) {
    let lines: Vec<String> = text.lines().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
    for line in expected {
        assert!(lines.iter().any(|l| l == line), "{context}: no `{line}` in\n{text}");
    }
}
