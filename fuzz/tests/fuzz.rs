//! The fuzz harness in the test suite: every kept regression input through
//! every step and command, and a bounded number of new cases per input kind
//! (scripts/fuzz.sh runs as many as asked). Each runs in `gpuinstr-fuzz`'s
//! own worker processes, so an abort or a hang is a finding, not a dead
//! test binary.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fuzz() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gpuinstr-fuzz"))
}

/// `gpuinstr-link` of this tree, next to the fuzz binary, and
/// `gpuinstr-report` beside it (built here, in the fuzz binary's profile:
/// a test run of this crate alone does not build other crates' binaries).
fn link() -> PathBuf {
    static BUILT: std::sync::Once = std::sync::Once::new();
    let fuzz_binary = Path::new(env!("CARGO_BIN_EXE_gpuinstr-fuzz"));
    BUILT.call_once(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let release = fuzz_binary.parent().is_some_and(|p| p.ends_with("release"));
        let status = Command::new(cargo)
            .args(["build", "-p", "gpuinstr-driver", "--bin", "gpuinstr-link"])
            .args(["-p", "gpuinstr-report", "--bin", "gpuinstr-report"])
            .args(release.then_some("--release"))
            .args(gpuinstr::toolchain::cargo_feature_arguments())
            .status()
            .unwrap();
        assert!(status.success(), "building gpuinstr-link");
    });
    fuzz_binary.with_file_name("gpuinstr-link")
}

fn run(command: &mut Command) -> String {
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    stdout
}

#[test]
fn kept_regression_inputs_find_nothing() {
    let regressions = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&regressions)
        .unwrap()
        .flat_map(|kind| std::fs::read_dir(kind.unwrap().path()).unwrap())
        .map(|file| file.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    let stdout = run(fuzz().arg("replay").args(&files).arg("--link").arg(link()));
    assert_eq!(stdout.lines().filter(|l| l.ends_with(": ok")).count(), files.len(), "{stdout}");
}

#[test]
fn new_cases_of_every_kind_find_nothing() {
    let crashes = tempfile::tempdir().unwrap();
    let stdout = run(fuzz()
        .args(["run", "--cases", "120", "--start", "1000000", "--full-every", "20", "--cli-every", "30", "--jobs", "2"])
        .arg("--crashes")
        .arg(crashes.path())
        .arg("--link")
        .arg(link()));
    let kinds = gpuinstr_fuzz::kinds::ALL_KINDS.len();
    assert_eq!(stdout.lines().filter(|l| l.contains(" 0 panics, 0 aborts, 0 hangs")).count(), kinds, "{stdout}");
}
