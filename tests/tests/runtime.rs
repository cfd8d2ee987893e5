//! gpuinstr's runtime (`libgpuinstr_rt.so`) under the real ROCr and HIP,
//! on the emulated GPU: HIP programs instrumented with an example tool run
//! unchanged, and the runtime's report holds each dispatch's tool data,
//! checked against the emulator's own counts for the original program.

use std::path::{Path, PathBuf};
use std::process::Output;

use gpuinstr::instrument::{instrument_file, InstrumentOptions};
use gpuinstr::plan::Plan;
use gpuinstr::stages::lift::lift;
use gpuinstr::stages::load::{self, CodeObject};
use gpuinstr::tool::Tool;
use gpuinstr_device_preload::run::Run;
use gpuinstr_intrinsics::Registry;
use gpuinstr_tests::{build_tool, example, hipcc, input, repo, run_directory, run_ok, Compiler};
use serde_json::Value;

/// A shared library Cargo built for this test run (beside the test binary).
fn built_library(file: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary");
    let deps = exe.parent().expect("target/<profile>/deps");
    [deps.join(file), deps.parent().expect("target/<profile>").join(file)]
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{file} was not built for this test run"))
}

fn run_on(target: &str) -> Run {
    Run {
        target: target.into(),
        device: built_library("libgpuinstr_device_preload.so"),
        runtime: Some(built_library("libgpuinstr_rt.so")),
        ..Run::default()
    }
}

/// `tests/inputs/runtime/NAME.hip` built by hipcc for `target`.
fn program(name: &str, target: &str, directory: &Path) -> PathBuf {
    let output = directory.join(format!("{name}-{target}"));
    run_ok(
        hipcc()
            .args(["-O2", &format!("--offload-arch={target}")])
            .arg(input(&format!("runtime/{name}.hip")))
            .arg("-o")
            .arg(&output)
            .env("TMPDIR", directory),
    );
    output
}

/// `program` with its code objects instrumented by `tool` under `plan`.
fn instrumented(program: &Path, tool: &Path, plan: &Plan) -> PathBuf {
    let tool = Tool::load(tool).unwrap();
    let bytes = std::fs::read(program).unwrap();
    let (out, _) =
        instrument_file(&tool, program, &bytes, plan, &Registry::with_builtins(), &InstrumentOptions::default(), None)
            .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    let output = program.with_extension("instrumented");
    std::fs::write(&output, out).unwrap();
    let mut permissions = std::fs::metadata(&output).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&output, permissions).unwrap();
    output
}

fn succeeded(output: Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "{what}: {stdout}{}", String::from_utf8_lossy(&output.stderr));
    stdout
}

/// The device's dispatch log: one JSON value per dispatch.
fn dispatch_log(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// What the instruction counter must count for one dispatch of the
/// original (as the device logged it): one per wave execution of a scalar
/// or lane-access instruction, the active lanes of each execution of a
/// vector instruction.
fn expected_count(app: &CodeObject, plan: &Plan, dispatch: &Value) -> u64 {
    let counts: std::collections::HashMap<u64, (u64, u64)> = dispatch["per_address"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e[0].as_u64().unwrap(), (e[1].as_u64().unwrap(), e[2].as_u64().unwrap())))
        .collect();
    let lifted = lift(app).unwrap();
    let mut total = 0;
    for point in plan.select(&lifted) {
        let instruction = lifted.functions[point.function].instructions().nth(point.instruction).unwrap();
        let (waves, lanes) = counts.get(&instruction.address).copied().unwrap_or((0, 0));
        let scalar = point.calls.iter().all(|call| call.hook == "countInstructionsScalar");
        total += if scalar { waves } else { lanes };
    }
    total
}

/// The instruction counter under the runtime: the program's output is
/// unchanged, and every dispatch's Counter is the count the emulator's own
/// tally of the original program gives for that dispatch.
#[test]
fn the_runtime_reports_each_dispatchs_instruction_count() {
    let target = "gfx90a";
    let dir = run_directory().join("instruction-counter");
    std::fs::create_dir_all(&dir).unwrap();
    let tool = build_tool(Compiler::Hipcc, &example("instruction-counter"), "-O3", &dir);
    let plan = Plan::load(&repo().join("hook-sdk/examples/instruction-counter/plan.toml")).unwrap();
    let original = program("counted", target, &dir);
    let app = load::load_for_target(&original, Some(target)).unwrap().code_objects.remove(0);

    let log = dir.join("original.jsonl");
    let run = Run { dispatch_log: Some(log.clone()), ..run_on(target) };
    let expected_output = succeeded(run.command(original.as_os_str(), &[]).output().unwrap(), "the original");
    assert!(expected_output.starts_with("PASSED"), "{expected_output}");
    let kernels: Vec<&str> = app.kernels.iter().map(|k| k.name()).collect();
    let app_dispatches: Vec<Value> =
        dispatch_log(&log).into_iter().filter(|d| kernels.contains(&d["kernel"].as_str().unwrap())).collect();
    assert_eq!(app_dispatches.len(), 4, "the program's four dispatches");

    let program = instrumented(&original, &tool, &plan);
    let report_path = dir.join("report.json");
    let run = Run { report: Some(report_path.clone()), ..run_on(target) };
    let output = run.command(program.as_os_str(), &[]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(succeeded(output, "the instrumented program"), expected_output);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    assert_eq!(report["schema"], 1);
    assert_eq!(report["warnings"].as_array().unwrap().len(), 0, "{stderr}");
    assert_eq!(report["unread_dispatches"], 0);
    assert_eq!(report["code_objects"].as_array().unwrap().len(), 1);
    assert_eq!(report["code_objects"][0]["globals"], serde_json::json!(["Counter"]));
    let dispatches = report["dispatches"].as_array().unwrap();
    assert_eq!(dispatches.len(), app_dispatches.len(), "{stderr}");
    for (k, (reported, logged)) in dispatches.iter().zip(&app_dispatches).enumerate() {
        assert_eq!(reported["id"], k as u64 + 1);
        assert_eq!(reported["kernel"], logged["kernel"], "dispatch {k}");
        assert_eq!(reported["grid_size"], logged["grid_size"], "dispatch {k}");
        assert_eq!(reported["workgroup_size"], logged["workgroup_size"], "dispatch {k}");
        assert_eq!(reported["problems"].as_array().unwrap().len(), 0, "dispatch {k}: {reported}");
        let counter = &reported["globals"][0];
        assert_eq!(counter["name"], "Counter");
        let expected = expected_count(&app, &plan, logged);
        assert!(expected > 0);
        assert_eq!(counter["value"].as_u64(), Some(expected), "dispatch {k} ({})", logged["kernel"]);
    }
    // The summary on standard error says the same.
    assert!(stderr.contains("gpuinstr: 4 dispatches of instrumented kernels read"), "{stderr}");
    assert!(stderr.contains(&format!("report written to {}", report_path.display())), "{stderr}");

    // With the tool's host part, the tool reports each count itself, and
    // its totals per kernel at exit.
    let host = host_part("instruction-counter", &dir);
    let run = Run { report: Some(report_path.clone()), tool_host: Some(host), ..run_on(target) };
    let output = run.command(program.as_os_str(), &[]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(succeeded(output, "the instrumented program with the host part"), expected_output);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    let dispatches = report["dispatches"].as_array().unwrap();
    assert_eq!(dispatches.len(), app_dispatches.len(), "{stderr}");
    let mut totals = std::collections::BTreeMap::<&str, (u64, u64)>::new();
    for (k, (reported, logged)) in dispatches.iter().zip(&app_dispatches).enumerate() {
        let expected = expected_count(&app, &plan, logged);
        assert_eq!(reported["tool"], serde_json::json!({ "instructions": expected }), "dispatch {k}");
        // The tool speaks for its data: the generic value is left out.
        assert_eq!(reported["globals"][0], serde_json::json!({ "name": "Counter", "size": 8 }), "dispatch {k}");
        let total = totals.entry(logged["kernel"].as_str().unwrap()).or_default();
        *total = (total.0 + 1, total.1 + expected);
    }
    assert!(stderr.contains(&format!("instruction counter: {} kernels", totals.len())), "{stderr}");
    for (kernel, (count, instructions)) in totals {
        let line = format!("{count} dispatches {instructions:>16} instructions");
        assert!(stderr.lines().any(|l| l.contains(kernel) && l.ends_with(&line)), "{kernel}: {line}\n{stderr}");
    }
}

/// `hook-sdk/examples/TOOL/host.cpp` built as the shared library the runtime loads.
fn host_part(tool: &str, directory: &Path) -> PathBuf {
    let output = directory.join(format!("lib{tool}-host.so"));
    run_ok(
        std::process::Command::new("c++")
            .args(["-shared", "-fPIC", "-std=c++17", "-Wall", "-Werror", "-I"])
            .arg(repo().join("hook-sdk/include"))
            .arg(repo().join("hook-sdk/examples").join(tool).join("host.cpp"))
            .arg("-o")
            .arg(&output),
    );
    output
}
