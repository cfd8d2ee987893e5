//! What `gpuinstr-run` does with its own options, as a user meets it: the
//! files a run writes are checked before the program starts, results that
//! cannot be written at the end fail the run, and the limit on a wave's
//! instructions is the user's to set.

mod common;

use common::{build, gpuinstr_run};

/// An output that cannot be written is refused before the program starts
/// (exit status 2, one message naming the option, the path and what to
/// do), and nothing is left behind.
#[test]
fn outputs_that_cannot_be_written_are_refused_before_the_program_starts() {
    let scratch = tempfile::tempdir().unwrap();
    let program = build("vector_add", "gfx90a", scratch.path());
    let a_file = scratch.path().join("a-file");
    std::fs::write(&a_file, "").unwrap();
    let missing = scratch.path().join("missing/report.json");
    let under_a_file = a_file.join("run.sqlite");
    let cases: [(&str, &std::path::Path, &str); 4] = [
        ("--report", &missing, "does not exist: create it, or give a path in one that does"),
        ("--database", &under_a_file, "does not exist"),
        ("--dispatch-log", &missing, "does not exist"),
        ("--report", scratch.path(), "is a directory: give a file path"),
    ];
    for (option, path, why) in cases {
        let before: Vec<_> = std::fs::read_dir(scratch.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        let output = gpuinstr_run()
            .arg(option)
            .arg(path)
            .arg("--")
            .arg(&program)
            .current_dir(scratch.path())
            .output()
            .expect("gpuinstr-run runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{option} {}: {stderr}", path.display());
        assert!(output.stdout.is_empty(), "{option}: the program did not run");
        let line = format!("gpuinstr-run: error: {option} {}", path.display());
        assert!(stderr.starts_with(&line) && stderr.contains(why), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "one message: {stderr}");
        let after: Vec<_> = std::fs::read_dir(scratch.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(before, after, "nothing left behind");
    }
}

/// A run whose report cannot be written when the program ends (its
/// directory removed while it ran) fails with exit status 1 though the
/// program passed, and says which results were lost.
#[test]
fn results_that_cannot_be_written_at_the_end_fail_the_run() {
    let scratch = tempfile::tempdir().unwrap();
    let program = build("vector_add", "gfx90a", scratch.path());
    let gone = scratch.path().join("gone");
    std::fs::create_dir(&gone).unwrap();
    let output = gpuinstr_run()
        .arg("--report")
        .arg(gone.join("report.json"))
        .args(["--", "sh", "-c", "rmdir gone && exec \"$0\""])
        .arg(&program)
        .current_dir(scratch.path())
        .output()
        .expect("gpuinstr-run runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "PASSED\n", "{stderr}");
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let lost = format!("cannot write the report {}", gone.join("report.json").display());
    assert!(stderr.contains(&format!("gpuinstr: error: {lost}")), "{stderr}");
    let failed = format!("gpuinstr-run: error: 1 of the run's results could not be written, so the run failed although the program ran: {lost}");
    assert!(stderr.contains(&failed), "{stderr}");
    let litter: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("gpuinstr-run-") && name.ends_with(".failures"))
        .collect();
    assert!(litter.is_empty(), "gpuinstr-run's notes are removed: {litter:?}");
}

/// `--max-instructions` sets the limit past which the device takes a wave
/// for an endless loop, and the message names it.
#[test]
fn the_instruction_limit_is_the_users() {
    let scratch = tempfile::tempdir().unwrap();
    let program = build("vector_add", "gfx90a", scratch.path());
    let output = gpuinstr_run().args(["--max-instructions", "5", "--"]).arg(&program).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "stopped after 5 instructions in workgroup (0, 0, 0) wave 0 (an endless loop? raise the limit of 5 with \
             gpuinstr-run --max-instructions N)"
        ),
        "{stderr}"
    );
    let output = gpuinstr_run().args(["--max-instructions", "0", "--"]).arg(&program).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
}

/// Processes the program starts inherit `LD_PRELOAD`, so the preload is in
/// them, but nothing of gpuinstr's that links LLVM is (a compiler's own
/// `ld.lld` with LLVM inside aborted on a second LLVM's options): the
/// emulated GPU is loaded only into a process that opens it. Here a shell
/// is the program; the `cat` it starts maps its own memory, then the shell
/// becomes a HIP program, which gets the GPU.
#[test]
fn processes_the_program_starts_get_no_llvm_of_gpuinstrs() {
    let scratch = tempfile::tempdir().unwrap();
    let program = build("vector_add", "gfx90a", scratch.path());
    let output = gpuinstr_run()
        .args(["--", "sh", "-c", "cat /proc/self/maps > child-maps && exec \"$0\""])
        .arg(&program)
        .current_dir(scratch.path())
        .output()
        .expect("gpuinstr-run runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "PASSED\n", "{stderr}");
    let maps = std::fs::read_to_string(scratch.path().join("child-maps")).unwrap();
    assert!(maps.contains("libgpuinstr_device_preload.so"), "the child has the preload:\n{maps}");
    for linked in ["libLLVM", "libgpuinstr_device_kfd.so", "libgpuinstr_rt.so", "libamd_comgr"] {
        assert!(!maps.contains(linked), "{linked} in a process the program started:\n{maps}");
    }
}
