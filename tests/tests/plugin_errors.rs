//! Every error the plugin reports: one clang diagnostic naming the function
//! and the source location, compilation fails, no output file is left.
//! Each input under tests/inputs/plugin-errors states what the message must
//! say in `expect:` lines; the whole message is also snapshot-tested.

use std::path::Path;
use std::process::Command;

use gpuinstr_tests::*;

fn expectations(source: &Path) -> Vec<String> {
    std::fs::read_to_string(source)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once("expect: ").map(|(_, e)| e.to_string()))
        .collect()
}

fn check_failure(source: &Path, mut command: Command, output_file: &Path, scratch: &Path) {
    let output = run(&mut command);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let name = source.file_stem().unwrap().to_string_lossy().into_owned();
    assert!(!output.status.success(), "{name}: compilation succeeded");
    assert!(!stderr.contains("PLEASE submit a bug report"), "{name}: the compiler crashed:\n{stderr}");
    let expected = expectations(source);
    assert!(!expected.is_empty(), "{name} states no expectation");
    for expectation in expected {
        assert!(stderr.contains(&expectation), "{name}: message lacks `{expectation}`:\n{stderr}");
    }
    assert!(!output_file.exists(), "{name}: a partial output file was left behind");
    compiler_snapshot!(format!("plugin_error_{name}"), normalize(&stderr, scratch));
}

#[test]
fn tool_source_errors_are_clang_diagnostics() {
    let scratch = scratch();
    let mut sources: Vec<_> = std::fs::read_dir(input("plugin-errors"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "hip"))
        .collect();
    sources.sort();
    assert!(sources.len() >= 9, "error inputs are missing");
    for source in sources {
        let output_file = scratch.path().join("out.o");
        let command = tool_compile_command(Compiler::Clang, &source, "-O3", &output_file);
        check_failure(&source, command, &output_file, scratch.path());
    }
}

/// The same errors at -O0 with debug info point at the same places.
#[test]
fn errors_at_o0_with_debug_info() {
    let scratch = scratch();
    let source = input("plugin-errors/inline-asm-in-callee.hip");
    let output_file = scratch.path().join("out.o");
    let mut command = tool_compile_command(Compiler::Clang, &source, "-O0", &output_file);
    command.arg("-g");
    let output = run(&mut command);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("inline-asm-in-callee.hip:7:"), "no source line for the asm statement:\n{stderr}");
    assert!(stderr.contains("hook `countSomething` calls `readClock`"), "{stderr}");
    assert!(!output_file.exists());
}

/// A module that already carries -fembed-bitcode's copy, reaching the
/// plugin in one compile (cc1 on IR) and under opt.
#[test]
fn embedded_bitcode_is_refused() {
    let scratch = scratch();
    let source = input("plugin-errors/already-embedded.ll");
    let output_file = scratch.path().join("out.o");
    let mut cc1 = gpuinstr::toolchain::llvm_tool("clang");
    cc1.args(["-cc1", "-triple", "amdgcn-amd-amdhsa", "-target-cpu", "gfx90a", "-emit-obj", "-O3"])
        .arg(format!("-fpass-plugin={}", plugin().display()))
        .arg(&source)
        .arg("-o")
        .arg(&output_file);
    check_failure(&source, cc1, &output_file, scratch.path());

    let output = run(&mut opt_command("gpuinstr-embed", &source));
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("already carries embedded bitcode"));
}
