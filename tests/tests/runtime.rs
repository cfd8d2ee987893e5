//! gpuinstr's runtime (`libgpuinstr_rt.so`) under the real ROCr and HIP,
//! on the emulated GPU: HIP programs instrumented with an example tool run
//! unchanged, and the runtime's report holds each dispatch's tool data,
//! checked against the emulator's own counts for the original program.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use gpuinstr::instrument::{instrument_file, InstrumentOptions};
use gpuinstr::plan::Plan;
use gpuinstr::stages::lift::lift;
use gpuinstr::stages::load::{self, CodeObject};
use gpuinstr::tool::Tool;
use gpuinstr_device_preload::run::Run;
use gpuinstr_intrinsics::Registry;
use gpuinstr_tests::memory_efficiency::{model, Efficiency, LaneAccess, LDS_SPACE};
use gpuinstr_tests::{
    build_tool, environment_packages, example, hipcc, input, repo, run_directory, run_ok, Compiler, EXAMPLE_TOOLS,
};
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
        device_kfd: Some(built_library("libgpuinstr_device_kfd.so")),
        runtime: Some(built_library("libgpuinstr_rt.so")),
        dynamic_worker: Some(gpuinstr_tests::dynamic_worker()),
        // The oracle reads the tools' text copies of their records, which
        // they write only on request (the database keeps the records).
        tool_files: vec!["all".into()],
        ..Run::default()
    }
}

/// A directory of this test run for one test.
fn test_directory(name: &str) -> PathBuf {
    let dir = run_directory().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `tests/inputs/SOURCE` built by hipcc for `target` into `directory` as
/// `output`, with `extra` arguments (`-lrocrand`, `--genco`).
fn hip_build(source: &str, target: &str, directory: &Path, output: &str, extra: &[&str]) -> PathBuf {
    let output = directory.join(output);
    run_ok(
        hipcc()
            .args(["-O2", &format!("--offload-arch={target}")])
            .arg(input(source))
            .args(extra)
            .arg("-o")
            .arg(&output)
            .env("TMPDIR", directory),
    );
    output
}

/// `program` with its code objects instrumented by `tool` under `plan`.
fn instrumented(program: &Path, tool: &Path, plan: &Plan) -> PathBuf {
    instrumented_with(program, tool, plan, &InstrumentOptions::default(), "instrumented")
}

/// The same with `options`, written with the extension `extension`.
fn instrumented_with(
    program: &Path,
    tool: &Path,
    plan: &Plan,
    options: &InstrumentOptions,
    extension: &str,
) -> PathBuf {
    let tool = Tool::load(tool).unwrap();
    let bytes = std::fs::read(program).unwrap();
    let (out, _) = instrument_file(&tool, program, &bytes, plan, &Registry::with_builtins(), options, None)
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    let output = program.with_extension(extension);
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

/// The program `counted`, its original code object, its output and its
/// four dispatches as the device logged them, for `target`.
struct Original {
    program: PathBuf,
    app: CodeObject,
    output: String,
    dispatches: Vec<Value>,
}

fn original(target: &str, dir: &Path) -> Original {
    original_of(hip_build("runtime/counted.hip", target, dir, &format!("counted-{target}"), &[]), target, dir)
}

/// `program` (the `counted` program, however built) run on `target`.
fn original_of(program: PathBuf, target: &str, dir: &Path) -> Original {
    original_dispatching(program, target, dir, 4)
}

/// `program` run on `target`: it prints PASSED and dispatches its own
/// kernels `dispatches` times.
fn original_dispatching(program: PathBuf, target: &str, dir: &Path, expected_dispatches: usize) -> Original {
    let app = load::load_for_target(&program, Some(target)).unwrap().code_objects.remove(0);
    let log = dir.join("original.jsonl");
    let _ = std::fs::remove_file(&log);
    // The oracle for every tool: counts, the EXEC history of branches and
    // every lane's access.
    let run = Run {
        dispatch_log: Some(log.clone()),
        dispatch_log_exec: vec!["S_AND_SAVEEXEC_B64".into()],
        dispatch_log_accesses: true,
        ..run_on(target)
    };
    let output = succeeded(run.command(program.as_os_str(), &[]).output().unwrap(), "the original");
    assert!(output.starts_with("PASSED"), "{output}");
    let kernels: Vec<&str> = app.kernels.iter().map(|k| k.name()).collect();
    let dispatches: Vec<Value> =
        dispatch_log(&log).into_iter().filter(|d| kernels.contains(&d["kernel"].as_str().unwrap())).collect();
    assert_eq!(dispatches.len(), expected_dispatches, "the program's dispatches");
    Original { program, app, output, dispatches }
}

/// The example `tool` built (device part with the plugin, host part with
/// c++), its plan, and `original` instrumented with them.
struct Instrumented {
    program: PathBuf,
    plan: Plan,
    host: PathBuf,
    /// The tool's device part and plan files, for dynamic mode.
    device: PathBuf,
    plan_file: PathBuf,
}

fn instrument_with(tool: &str, original: &Original, dir: &Path) -> Instrumented {
    let device = build_tool(Compiler::Hipcc, &example(tool), "-O3", dir);
    let plan_file = repo().join("hook-sdk/examples").join(tool).join("plan.toml");
    let plan = Plan::load(&plan_file).unwrap();
    let program = instrumented(&original.program, &device, &plan);
    Instrumented { program, plan, host: host_part(tool, dir), device, plan_file }
}

/// Runs `program` on `target` with the runtime (and `host`, if given): the
/// report, and standard error. The program's output must be `expected`.
fn run_reported(program: &Path, target: &str, host: Option<&Path>, expected: &str, dir: &Path) -> (Value, String) {
    let run = Run { tool_host: host.map(Path::to_path_buf), ..run_on(target) };
    run_reported_with(run, program, &[], expected, dir)
}

/// Runs `program arguments...` so (and with the runtime's report in `dir`).
fn run_reported_with(run: Run, program: &Path, arguments: &[&Path], expected: &str, dir: &Path) -> (Value, String) {
    let report_path = dir.join("report.json");
    let run = Run { report: Some(report_path.clone()), ..run };
    let arguments: Vec<std::ffi::OsString> = arguments.iter().map(|a| a.as_os_str().to_owned()).collect();
    reported(run.command(program.as_os_str(), &arguments).output().unwrap(), &report_path, expected)
}

/// A run's report (written to `report_path`) and standard error: the
/// program printed `expected`, and the runtime read every dispatch without
/// a warning.
fn reported(output: Output, report_path: &Path, expected: &str) -> (Value, String) {
    let (report, stderr) = reported_warning(output, report_path, expected);
    assert_eq!(report["warnings"].as_array().unwrap().len(), 0, "{stderr}");
    (report, stderr)
}

/// [`reported`], where the report may warn.
fn reported_warning(output: Output, report_path: &Path, expected: &str) -> (Value, String) {
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(succeeded(output, "the instrumented program"), expected, "{stderr}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(report_path).unwrap()).unwrap();
    assert_eq!(report["schema"], 1);
    assert_eq!(report["unread_dispatches"], 0);
    assert!(stderr.contains(&format!("report written to {}", report_path.display())), "{stderr}");
    // ROCr 6 reports signals left at its shutdown: the runtime leaves none.
    assert!(!stderr.contains("Resource leak detected"), "{stderr}");
    assert_database_holds(&report_path.with_extension("sqlite"), &report);
    (report, stderr)
}

/// The run's database holds what its JSON report holds, read back with SQL
/// as a user would (docs/runtime.md, "The database").
fn assert_database_holds(database: &Path, report: &Value) {
    let connection = rusqlite::Connection::open_with_flags(database, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap_or_else(|e| panic!("{}: {e}", database.display()));
    let json_column = |sql: &str| -> Vec<Value> {
        let mut statement = connection.prepare(sql).unwrap();
        let rows = statement.query_map([], |row| row.get::<_, String>(0)).unwrap();
        rows.map(|text| serde_json::from_str(&text.unwrap()).unwrap()).collect()
    };
    let listed = |key: &str| report.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
    assert_eq!(json_column("SELECT record FROM code_objects ORDER BY id"), listed("code_objects"));
    // Each dispatch's entry; its tool values are rows of their own (below).
    let without_tool = |mut dispatch: Value| {
        dispatch.as_object_mut().unwrap().remove("tool");
        dispatch
    };
    let dispatches: Vec<Value> = listed("dispatches").into_iter().map(without_tool).collect();
    assert_eq!(json_column("SELECT record FROM dispatches ORDER BY id"), dispatches);
    assert_eq!(json_column("SELECT record FROM dynamic ORDER BY id"), listed("dynamic"));
    let warnings: Vec<Value> = json_column("SELECT json_quote(message) FROM warnings ORDER BY id");
    assert_eq!(warnings, listed("warnings"));
    let uninstrumented = json_column(
        "SELECT json_object('kernel', kernel, 'dispatches', dispatches) FROM uninstrumented_dispatches ORDER BY kernel",
    );
    assert_eq!(uninstrumented, listed("uninstrumented_dispatches"));
    let files = json_column("SELECT json_object('name', name, 'path', path, 'bytes', bytes) FROM files ORDER BY name");
    assert_eq!(files, listed("files"));
    // Each dispatch's tool values, one row each (by name, as serde_json
    // orders an object's keys).
    for dispatch in listed("dispatches") {
        let values = json_column(&format!(
            "SELECT json_array(name, json(value)) FROM dispatch_values WHERE dispatch = {} ORDER BY name",
            dispatch["id"]
        ));
        let expected: Vec<Value> = dispatch
            .get("tool")
            .and_then(Value::as_object)
            .map(|o| o.iter().map(|(k, v)| serde_json::json!([k, v])).collect())
            .unwrap_or_default();
        assert_eq!(values, expected, "dispatch {}", dispatch["id"]);
    }
    let (finished, unread, tool, selection): (Option<f64>, u64, Option<String>, Option<String>) = connection
        .query_row("SELECT finished, unread_dispatches, tool, selection FROM run", [], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .unwrap();
    assert!(finished.is_some(), "the run finished");
    assert_eq!(unread, report["unread_dispatches"].as_u64().unwrap());
    let parsed = |text: Option<String>| text.map(|t| serde_json::from_str::<Value>(&t).unwrap()).unwrap_or(Value::Null);
    assert_eq!(parsed(tool), report.get("tool").cloned().unwrap_or(Value::Null));
    assert_eq!(parsed(selection), report.get("selection").cloned().unwrap_or(Value::Null));
}

/// The report's dispatches, checked against the device's log of the
/// original: same kernels, shapes and order, no problems.
fn dispatches<'r>(report: &'r Value, original: &Original) -> &'r [Value] {
    matched(report, &original.dispatches)
}

impl Original {
    fn oracle(&self) -> Oracle<'_> {
        Oracle::of(&self.app, &self.dispatches)
    }
}

/// The report's dispatches, checked against the device's log of the
/// original (`logged`): same kernels, shapes and order, no problems.
fn matched<'r>(report: &'r Value, logged: &[Value]) -> &'r [Value] {
    let dispatches = matched_warning(report, logged);
    for (k, reported) in dispatches.iter().enumerate() {
        assert_eq!(reported["problems"].as_array().unwrap().len(), 0, "dispatch {k}: {reported}");
    }
    dispatches
}

/// [`matched`], where dispatches may have problems.
fn matched_warning<'r>(report: &'r Value, logged: &[Value]) -> &'r [Value] {
    let dispatches = report["dispatches"].as_array().unwrap();
    assert_eq!(dispatches.len(), logged.len(), "dispatches reported and logged");
    for (k, (reported, logged)) in dispatches.iter().zip(logged).enumerate() {
        assert_eq!(reported["id"], k as u64 + 1);
        assert_eq!(reported["kernel"], logged["kernel"], "dispatch {k}");
        assert_eq!(reported["grid_size"], logged["grid_size"], "dispatch {k}");
        assert_eq!(reported["workgroup_size"], logged["workgroup_size"], "dispatch {k}");
    }
    dispatches
}

/// A run of the original, as the device logged it, and the code object
/// each dispatch's kernel comes from: what every example tool's report is
/// checked against.
struct Oracle<'a> {
    logged: &'a [Value],
    /// Per logged dispatch.
    apps: Vec<&'a CodeObject>,
}

impl<'a> Oracle<'a> {
    /// Every dispatch of a kernel of `app`.
    fn of(app: &'a CodeObject, logged: &'a [Value]) -> Self {
        Oracle { logged, apps: vec![app; logged.len()] }
    }

    /// Each dispatch's code object among `code_objects` (a library's
    /// hundreds): one with a kernel of its name whose first instruction
    /// the dispatch executed (kernels of one name can be in several).
    fn among(code_objects: &'a [CodeObject], logged: &'a [Value]) -> Self {
        let apps = logged
            .iter()
            .map(|dispatch| {
                let executed: std::collections::HashSet<u64> =
                    dispatch["per_address"].as_array().unwrap().iter().map(|e| e[0].as_u64().unwrap()).collect();
                code_objects
                    .iter()
                    .find(|c| {
                        c.kernels.iter().any(|k| k.name() == dispatch["kernel"] && executed.contains(&k.code_address))
                    })
                    .unwrap_or_else(|| panic!("no code object has the kernel of {}", dispatch["kernel"]))
            })
            .collect();
        Oracle { logged, apps }
    }

    /// `derive` of each dispatch's code object, once per code object.
    fn per_dispatch<T>(&self, derive: impl Fn(&CodeObject) -> T) -> Vec<std::rc::Rc<T>> {
        let mut done: Vec<(*const CodeObject, std::rc::Rc<T>)> = Vec::new();
        self.apps
            .iter()
            .map(|app| match done.iter().find(|(c, _)| std::ptr::eq(*c, *app)) {
                Some((_, value)) => value.clone(),
                None => {
                    let value = std::rc::Rc::new(derive(app));
                    done.push((*app, value.clone()));
                    value
                }
            })
            .collect()
    }

    /// The example `tool`'s report (at `report_path`) of a run of the
    /// instrumented program, with the tool's `plan`: see each check.
    fn check(&self, tool: &str, plan: &Plan, report: &Value, report_path: &Path) {
        match tool {
            "instruction-counter" => {
                let kernels = self.check_instruction_counts(report, plan);
                assert_eq!(report["tool"], serde_json::json!({ "kernels": kernels }), "the run's totals per kernel");
            }
            // Once per EXEC region, the same counts as the instruction
            // counter's plan gives (its host part reports them).
            "block-counter" => {
                let counter = Plan::load(&repo().join("hook-sdk/examples/instruction-counter/plan.toml")).unwrap();
                let kernels = self.check_instruction_counts(report, &counter);
                assert_eq!(report["tool"], serde_json::json!({ "kernels": kernels }), "the run's totals per kernel");
            }
            "kernel-arguments" => self.check_kernel_arguments(report),
            "opcode-histogram" => self.check_opcode_histogram(report),
            "branch-divergence" => {
                self.check_branch_records(report, report_path);
                self.check_run_totals_per_site(report, plan, "branches", "instrumented_branches", &["divergent"]);
            }
            "memory-efficiency" => drop(self.check_memory_efficiency(report, plan)),
            "memory-tracer" => {
                self.check_memory_trace(report, report_path, plan);
                let fields = ["accesses", "lines"];
                self.check_run_totals_per_site(report, plan, "instructions", "instrumented_instructions", &fields);
            }
            other => panic!("no oracle for {other}"),
        }
    }

    /// Each dispatch's instructions are the emulator's count
    /// (`expected_count`); returns the run's totals per kernel.
    fn check_instruction_counts(&self, report: &Value, plan: &Plan) -> serde_json::Map<String, Value> {
        let mut kernels = serde_json::Map::new();
        for (k, (reported, logged)) in matched(report, self.logged).iter().zip(self.logged).enumerate() {
            let expected = expected_count(self.apps[k], plan, logged);
            assert_eq!(reported["tool"], serde_json::json!({ "instructions": expected }), "dispatch {k}");
            let total = kernels.entry(logged["kernel"].as_str().unwrap()).or_insert(serde_json::json!({
                "dispatches": 0, "instructions": 0
            }));
            total["dispatches"] = (total["dispatches"].as_u64().unwrap() + 1).into();
            total["instructions"] = (total["instructions"].as_u64().unwrap() + expected).into();
        }
        kernels
    }

    /// Each dispatch's gridDim and blockDim, as the hook read them in the
    /// kernel, are the launch's (the packet's grid in workgroups); the
    /// run's launch shapes per kernel count them.
    fn check_kernel_arguments(&self, report: &Value) {
        // Per kernel, dispatches per shape (as JSON text).
        let mut launches = std::collections::BTreeMap::<String, std::collections::BTreeMap<String, u64>>::new();
        for (k, (reported, logged)) in matched(report, self.logged).iter().zip(self.logged).enumerate() {
            let grid: Vec<u64> = (0..3).map(|d| logged["grid_size"][d].as_u64().unwrap()).collect();
            let block: Vec<u64> = (0..3).map(|d| logged["workgroup_size"][d].as_u64().unwrap()).collect();
            let grid_dim: Vec<u64> = (0..3).map(|d| grid[d].div_ceil(block[d])).collect();
            let shape = serde_json::json!({ "gridDim": grid_dim, "blockDim": block });
            assert_eq!(reported["tool"], shape, "dispatch {k}");
            let kernel = launches.entry(logged["kernel"].as_str().unwrap().into()).or_default();
            *kernel.entry(shape.to_string()).or_default() += 1;
        }
        let reported: std::collections::BTreeMap<String, std::collections::BTreeMap<String, u64>> = report["tool"]
            ["launches"]
            .as_object()
            .expect("the run's launches")
            .iter()
            .map(|(kernel, shapes)| {
                let shapes = shapes.as_array().unwrap().iter().map(|s| {
                    let shape = serde_json::json!({ "gridDim": s["gridDim"], "blockDim": s["blockDim"] });
                    (shape.to_string(), s["dispatches"].as_u64().unwrap())
                });
                (kernel.clone(), shapes.collect())
            })
            .collect();
        assert_eq!(reported, launches, "the run's launch shapes per kernel");
    }

    /// A tool's run-level list `key` (branches, memory instructions) holds
    /// per site the sums of the dispatches' entries (each checked against
    /// the emulator), and `instrumented` counts the sites instrumented in
    /// the code objects loaded, of which `never_executed` did not run:
    /// with one code object, exactly the points the plan selects in it.
    fn check_run_totals_per_site(&self, report: &Value, plan: &Plan, key: &str, instrumented: &str, fields: &[&str]) {
        let fields: Vec<&str> = ["executions"].into_iter().chain(fields.iter().copied()).collect();
        let per_site = |entries: &Value, totals: &mut std::collections::BTreeMap<(String, u64), Vec<u64>>| {
            for entry in entries.as_array().unwrap() {
                let site = (entry["function"].as_str().unwrap().to_string(), hex_address(&entry["address"]));
                let total = totals.entry(site).or_insert_with(|| vec![0; fields.len()]);
                for (sum, field) in total.iter_mut().zip(&fields) {
                    *sum += entry[field].as_u64().unwrap();
                }
            }
        };
        let mut expected = std::collections::BTreeMap::new();
        for reported in matched(report, self.logged) {
            per_site(&reported["tool"][key], &mut expected);
        }
        let mut totals = std::collections::BTreeMap::new();
        per_site(&report["tool"][key], &mut totals);
        assert_eq!(report["tool"][key].as_array().unwrap().len(), totals.len(), "{key}: each site once");
        assert_eq!(totals, expected, "the run's {key}: (executions, {:?}) per site", &fields[1..]);
        let instrumented = report["tool"][instrumented].as_u64().unwrap();
        let never = report["tool"]["never_executed"].as_u64().unwrap();
        assert_eq!(never + totals.len() as u64, instrumented, "{key}: run and never run");
        if report["code_objects"].as_array().unwrap().len() == 1 {
            let selected = plan.select(&lift(self.apps[0]).unwrap()).len() as u64;
            assert_eq!(instrumented, selected, "{key}: the points the plan selects");
        }
    }

    /// Memory efficiency: each dispatch's numbers per instruction (the
    /// `memory` and `lds` lists: wave executions, lanes, lines or LDS
    /// cycles used and ideal) are the model's (tests/src/memory_efficiency.rs)
    /// over the emulator's log of the original's accesses by the selected
    /// instructions, the dispatch's sums are theirs, and the run's
    /// per-instruction totals add up its dispatches'. Returns the model's
    /// per-instruction numbers over all dispatches.
    fn check_memory_efficiency(&self, report: &Value, plan: &Plan) -> BTreeMap<u64, Efficiency> {
        const LISTS: [(&str, &str, &str); 2] = [("memory", "lines", "ideal_lines"), ("lds", "cycles", "ideal_cycles")];
        let selected = self.per_dispatch(|app| {
            let lifted = lift(app).unwrap();
            let selected: std::collections::HashSet<u64> = plan
                .select(&lifted)
                .iter()
                .map(|p| lifted.functions[p.function].instructions().nth(p.instruction).unwrap().address)
                .collect();
            selected
        });
        let field = |a: &Value, f: usize| a[f].as_u64().unwrap();
        let reported_list = |entries: &Value, key: &str| -> Vec<(String, u64, Efficiency)> {
            let (_, used, ideal) = LISTS.iter().find(|(k, _, _)| *k == key).unwrap();
            entries[key]
                .as_array()
                .unwrap_or_else(|| panic!("no `{key}` list"))
                .iter()
                .map(|e| {
                    let number = |name: &str| e[name].as_u64().unwrap_or_else(|| panic!("{key}: no {name}: {e}"));
                    let numbers = Efficiency {
                        executions: number("executions"),
                        lanes: number("lanes"),
                        used: number(used),
                        ideal: number(ideal),
                    };
                    (e["function"].as_str().unwrap().to_string(), hex_address(&e["address"]), numbers)
                })
                .collect()
        };
        let mut all = BTreeMap::<u64, Efficiency>::new();
        let mut run_expected = BTreeMap::<(String, u64), Efficiency>::new();
        let dispatches = matched(report, self.logged).iter().zip(self.logged).zip(selected.iter());
        for (k, ((reported, logged), selected)) in dispatches.enumerate() {
            let accesses: Vec<LaneAccess> = logged["accesses"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .filter(|a| selected.contains(&field(a, 0)))
                .map(|a| LaneAccess {
                    instruction: field(a, 0),
                    wave: field(a, 1),
                    lane: field(a, 2),
                    memory: field(a, 3),
                    space: field(a, 4) as u8,
                    step: field(a, 5),
                    bytes: field(a, 6),
                })
                .collect();
            let spaces: std::collections::HashMap<u64, u8> =
                accesses.iter().map(|a| (a.instruction, a.space)).collect();
            let expected = model(&accesses);
            let mut measured = BTreeMap::new();
            for (key, used, ideal) in LISTS {
                let mut sums = (0, 0);
                for (function, address, numbers) in reported_list(&reported["tool"], key) {
                    assert_eq!(spaces[&address] == LDS_SPACE, key == "lds", "dispatch {k}: {address:#x} in `{key}`");
                    sums = (sums.0 + numbers.used, sums.1 + numbers.ideal);
                    measured.insert(address, numbers);
                    *run_expected.entry((function, address)).or_default() += numbers;
                }
                let (used_key, ideal_key) =
                    if key == "lds" { ("lds_cycles", "lds_ideal_cycles") } else { (used, ideal) };
                assert_eq!(
                    (&reported["tool"][used_key], &reported["tool"][ideal_key]),
                    (&sums.0.into(), &sums.1.into())
                );
            }
            assert_eq!(measured, expected, "dispatch {k}: per instruction (executions, lanes, used, ideal)");
            for (address, numbers) in expected {
                *all.entry(address).or_default() += numbers;
            }
        }
        let mut run = BTreeMap::new();
        for key in ["memory", "lds"] {
            for (function, address, numbers) in reported_list(&report["tool"], key) {
                assert!(run.insert((function, address), numbers).is_none(), "the run's `{key}`: each instruction once");
            }
        }
        assert_eq!(run, run_expected, "the run's totals per instruction add up its dispatches'");
        all
    }

    /// Each dispatch's executions per opcode name equal the emulator's wave
    /// executions of the original's instructions, grouped by their
    /// opcodes' names.
    fn check_opcode_histogram(&self, report: &Value) {
        let names = self.per_dispatch(|app| {
            let lifted = lift(app).unwrap();
            let names: std::collections::HashMap<u64, String> = lifted
                .functions
                .iter()
                .flat_map(|f| f.instructions())
                .map(|i| (i.address, i.name(&lifted.isa).to_string()))
                .collect();
            names
        });
        let mut run = serde_json::Map::new();
        for (k, (reported, logged)) in matched(report, self.logged).iter().zip(self.logged).enumerate() {
            let mut expected = serde_json::Map::new();
            for entry in logged["per_address"].as_array().unwrap() {
                let name = names[k][&entry[0].as_u64().unwrap()].as_str();
                let count = expected.get(name).and_then(Value::as_u64).unwrap_or(0) + entry[1].as_u64().unwrap();
                expected.insert(name.to_string(), count.into());
            }
            assert!(!expected.is_empty(), "dispatch {k}");
            for (name, count) in &expected {
                let total = run.get(name).and_then(Value::as_u64).unwrap_or(0) + count.as_u64().unwrap();
                run.insert(name.clone(), total.into());
            }
            assert_eq!(reported["tool"]["opcodes"], Value::Object(expected), "dispatch {k}");
        }
        // (One dispatch may run few: rocSPARSE's init_kernel is one s_endpgm.)
        assert!(run.len() > 5, "the run's opcodes: {run:?}");
        assert_eq!(report["tool"], serde_json::json!({ "opcodes": run }), "the run's executions per opcode");
    }

    /// Branch divergence: every record (branch, wavefront, OLD MASK, IF
    /// MASK) is one the emulator's EXEC history of the original gives for
    /// an `s_and_saveexec_b64` executed with some lane active, and each
    /// branch's executions and divergent ones in the report are those of
    /// the history. Returns the divergent executions.
    fn check_branch_records(&self, report: &Value, report_path: &Path) -> u64 {
        let rows = records(report_path, "branch-records.tsv", "dispatch\tsite\taddress\twavefront\told_mask\tif_mask");
        assert_eq!(report["files"][0]["name"], "branch-records.tsv");
        let mut divergent_total = 0;
        let mut executed = 0;
        for (k, (reported, logged)) in matched(report, self.logged).iter().zip(self.logged).enumerate() {
            let id = reported["id"].as_u64().unwrap();
            let wavefronts = tool_wavefronts(logged);
            let mut expected: Vec<[u64; 4]> = logged["exec_history"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .map(|e| (0..4).map(|f| e[f].as_u64().unwrap()).collect::<Vec<u64>>())
                .filter(|e| e[2] != 0)
                .map(|e| [e[0], wavefronts[e[1] as usize], e[2], e[3]])
                .collect();
            let mut recorded: Vec<[u64; 4]> =
                rows.iter().filter(|r| r[0] == id).map(|r| [r[2], r[3], r[4], r[5]]).collect();
            expected.sort_unstable();
            recorded.sort_unstable();
            executed += expected.len();
            assert_eq!(recorded, expected, "dispatch {k}: (address, wavefront, old mask, if mask)");
            let mut per_branch = std::collections::BTreeMap::<u64, (u64, u64)>::new();
            for [address, _, old, new] in &expected {
                let branch = per_branch.entry(*address).or_default();
                branch.0 += 1;
                branch.1 += u64::from(new != old && *new != 0);
            }
            let reported_branches: std::collections::BTreeMap<u64, (u64, u64)> = reported["tool"]["branches"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| {
                    (hex_address(&b["address"]), (b["executions"].as_u64().unwrap(), b["divergent"].as_u64().unwrap()))
                })
                .collect();
            assert_eq!(reported_branches, per_branch, "dispatch {k}: per branch (executions, divergent)");
            let divergent: u64 = per_branch.values().map(|b| b.1).sum();
            assert_eq!(reported["tool"]["records"], expected.len() as u64, "dispatch {k}");
            assert_eq!(reported["tool"]["divergent"], divergent, "dispatch {k}");
            divergent_total += divergent;
        }
        assert!(executed > 0, "the dispatches execute branches");
        divergent_total
    }

    /// For each dispatch of the log, the memory tracer's rows of its
    /// matched dispatch in the report and the accesses the emulator logged
    /// for the original's instructions the plan selects, both in the
    /// tracer's terms and in order: (instruction, wavefront, lane, address).
    fn memory_traces(&self, report: &Value, report_path: &Path, plan: &Plan) -> Vec<(Accesses, Accesses)> {
        let rows = records(report_path, "memory-trace.tsv", MEMORY_TRACE_HEADER);
        let traced_instructions = self.per_dispatch(|app| {
            let lifted = lift(app).unwrap();
            let traced: std::collections::HashSet<u64> = plan
                .select(&lifted)
                .iter()
                .map(|p| lifted.functions[p.function].instructions().nth(p.instruction).unwrap().address)
                .collect();
            traced
        });
        let field = |a: &Value, f: usize| a[f].as_u64().unwrap();
        let dispatches = matched_warning(report, self.logged).iter().zip(self.logged).zip(traced_instructions.iter());
        dispatches
            .map(|((reported, logged), instructions)| {
                let id = reported["id"].as_u64().unwrap();
                let wavefronts = tool_wavefronts(logged);
                let expected: Accesses = logged["accesses"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .filter(|a| instructions.contains(&field(a, 0)))
                    .map(|a| [field(a, 0), wavefronts[field(a, 1) as usize], field(a, 2), field(a, 3), field(a, 4)])
                    .collect();
                let traced = rows.iter().filter(|r| r[0] == id).map(|r| [r[1], r[2], r[3], r[4], r[5]]).collect();
                (traced, expected)
            })
            .collect()
    }

    /// The memory tracer: its file holds exactly the accesses the emulator
    /// logged for the original's instructions the plan selects
    /// (instruction, wavefront, lane, address), and the report's
    /// per-instruction accesses are the emulator's active lanes. The two
    /// runs' buffers lie at different addresses (device memory is host
    /// memory mapped where mmap puts it, and the runtime allocates its
    /// own), so addresses compare as offsets from the lowest address each
    /// instruction accessed in the dispatch, per region (below).
    fn check_memory_trace(&self, report: &Value, report_path: &Path, plan: &Plan) {
        let traced_and_expected = self.memory_traces(report, report_path, plan);
        // An instruction may reach more than one region: a flat access to
        // LDS lands in the shared aperture, far from the buffers (rocSOLVER's
        // getf2 does so). Regions are runs of addresses with gaps under
        // 4 GiB; each access compares as (region, offset in its region).
        let relative = |accesses: Accesses| {
            let mut addresses = std::collections::BTreeMap::<u64, Vec<u64>>::new();
            for [instruction, _, _, address, _] in &accesses {
                addresses.entry(*instruction).or_default().push(*address);
            }
            let mut regions = std::collections::HashMap::<(u64, u64), (u64, u64)>::new();
            for (instruction, mut list) in addresses {
                list.sort_unstable();
                let (mut region, mut base, mut previous) = (0, list[0], list[0]);
                for address in list {
                    if address - previous >= 1 << 32 {
                        (region, base) = (region + 1, address);
                    }
                    regions.insert((instruction, address), (region, address - base));
                    previous = address;
                }
            }
            let mut relative: Vec<[u64; 6]> = accesses
                .iter()
                .map(|&[instruction, wavefront, lane, address, space]| {
                    let (region, offset) = regions[&(instruction, address)];
                    [instruction, wavefront, lane, space, region, offset]
                })
                .collect();
            relative.sort_unstable();
            relative
        };
        let mut accessed = 0;
        let dispatches = matched(report, self.logged).iter().zip(self.logged).zip(traced_and_expected);
        for (k, ((reported, logged), (traced, expected))) in dispatches.enumerate() {
            accessed += expected.len();
            assert_eq!(traced.len(), expected.len(), "dispatch {k}: records");
            // In the order the emulator made them (its waves run in the
            // same order in both runs, and the ring delivers in order).
            let order = |accesses: &[[u64; 5]]| accesses.iter().map(|a| [a[0], a[1], a[2]]).collect::<Vec<_>>();
            assert!(order(&traced) == order(&expected), "dispatch {k}: records out of the emulator's order");
            assert_eq!(
                relative(traced),
                relative(expected.clone()),
                "dispatch {k}: (instruction, wavefront, lane, space, offset)"
            );
            assert_eq!(reported["tool"]["records"], expected.len() as u64, "dispatch {k}");
            let ring = reported["globals"].as_array().unwrap().iter().find(|g| g["name"] == "Trace").unwrap();
            assert_eq!(ring["records"], expected.len() as u64, "dispatch {k}: the ring's records in the report");
            assert!(ring.get("dropped").is_none(), "dispatch {k}: records are dropped only when asked: {ring}");
            let lanes: std::collections::HashMap<u64, (u64, u64)> = logged["per_address"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| (e[0].as_u64().unwrap(), (e[1].as_u64().unwrap(), e[2].as_u64().unwrap())))
                .collect();
            // Lanes a buffer's range check leaves out access nothing.
            let mut accesses = std::collections::HashMap::<u64, u64>::new();
            for access in &expected {
                *accesses.entry(access[0]).or_default() += 1;
            }
            for instruction in reported["tool"]["instructions"].as_array().unwrap() {
                let address = hex_address(&instruction["address"]);
                let (waves, active) = lanes[&address];
                let executions = instruction["executions"].as_u64().unwrap();
                let lines = instruction["lines"].as_u64().unwrap();
                assert_eq!(instruction["accesses"], accesses[&address], "dispatch {k} at {address:#x}");
                assert!(accesses[&address] <= active, "dispatch {k} at {address:#x}");
                assert!(
                    executions >= 1 && executions <= waves,
                    "dispatch {k} at {address:#x}: {executions} of {waves}"
                );
                assert!(lines >= executions && lines <= active, "dispatch {k} at {address:#x}: {lines} lines");
            }
        }
        assert!(accessed > 0, "the dispatches access memory");
    }
}

/// Lane accesses as the memory tracer writes them: (instruction,
/// wavefront, lane, address, space).
type Accesses = Vec<[u64; 5]>;

/// The memory tracer's file's columns.
const MEMORY_TRACE_HEADER: &str = "dispatch\tinstruction\twavefront\tlane\taddress\tspace";

/// An address a host part wrote as `0x` hex text.
fn hex_address(value: &Value) -> u64 {
    u64::from_str_radix(value.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// The instruction counter under the runtime: the program's output is
/// unchanged, and every dispatch's Counter is the count the emulator's own
/// tally of the original program gives for that dispatch; the tool's host
/// part reports the same counts and its totals per kernel.
#[test]
fn the_runtime_reports_each_dispatchs_instruction_count() {
    let target = "gfx90a";
    let dir = test_directory("instruction-counter");
    let original = original(target, &dir);
    let tool = instrument_with("instruction-counter", &original, &dir);
    let expected: Vec<u64> =
        original.dispatches.iter().map(|logged| expected_count(&original.app, &tool.plan, logged)).collect();
    assert!(expected.iter().all(|&e| e > 0));

    // Without the host part: the generic view of Counter.
    let (report, stderr) = run_reported(&tool.program, target, None, &original.output, &dir);
    assert_eq!(report["code_objects"].as_array().unwrap().len(), 1);
    assert_eq!(report["code_objects"][0]["globals"], serde_json::json!(["Counter"]));
    for (k, reported) in dispatches(&report, &original).iter().enumerate() {
        let counter = &reported["globals"][0];
        assert_eq!(counter["name"], "Counter");
        assert_eq!(counter["value"].as_u64(), Some(expected[k]), "dispatch {k}");
    }
    assert!(stderr.contains("gpuinstr: 4 dispatches of instrumented kernels read"), "{stderr}");

    // With it, the tool reports each count itself, and its totals per
    // kernel at exit.
    let (report, stderr) = run_reported(&tool.program, target, Some(&tool.host), &original.output, &dir);
    let mut totals = std::collections::BTreeMap::<&str, (u64, u64)>::new();
    for (k, (reported, logged)) in dispatches(&report, &original).iter().zip(&original.dispatches).enumerate() {
        assert_eq!(reported["tool"], serde_json::json!({ "instructions": expected[k] }), "dispatch {k}");
        // The tool speaks for its data: the generic value is left out.
        assert_eq!(reported["globals"][0], serde_json::json!({ "name": "Counter", "size": 8 }), "dispatch {k}");
        let total = totals.entry(logged["kernel"].as_str().unwrap()).or_default();
        *total = (total.0 + 1, total.1 + expected[k]);
    }
    assert!(stderr.contains(&format!("instruction counter: {} kernels", totals.len())), "{stderr}");
    for (kernel, (count, instructions)) in totals {
        let line = format!("{count} dispatches {instructions:>16} instructions");
        assert!(stderr.lines().any(|l| l.contains(kernel) && l.ends_with(&line)), "{kernel}: {line}\n{stderr}");
    }
}

/// The device's limit on a wave's instructions (taken for an endless
/// loop past it) is the user's (`gpuinstr-run --max-instructions`), and
/// waves of kernels the runtime says run instrumented code get 32 times as
/// many: at the smallest power of two the original program runs under,
/// the program instrumented with the instruction counter (whose waves run
/// many times as many) runs to the end and reports; without the runtime to
/// say so it stops, and the message names the option that raises it.
#[test]
fn waves_of_instrumented_kernels_may_run_longer_than_the_programs_own() {
    let target = "gfx90a";
    let dir = test_directory("instruction-limit");
    let original = original(target, &dir);
    let tool = instrument_with("instruction-counter", &original, &dir);
    let limited = |limit: u64| Run { max_instructions: Some(limit), ..run_on(target) };
    let stopped = |output: &Output, limit: u64| {
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        let message = format!("(an endless loop? raise the limit of {limit} with gpuinstr-run --max-instructions N");
        !output.status.success()
            && stderr.contains(&format!("stopped after {limit} instructions"))
            && stderr.contains(&message)
    };
    let mut limit = 16;
    loop {
        let output = limited(limit).command(original.program.as_os_str(), &[]).output().unwrap();
        if output.status.success() {
            break;
        }
        assert!(stopped(&output, limit), "{limit}: {}", String::from_utf8_lossy(&output.stderr));
        limit *= 2;
        assert!(limit < 1 << 20, "the original never ran under a limit");
    }
    let run = Run { tool_host: Some(tool.host.clone()), ..limited(limit) };
    let (report, _) = run_reported_with(run, &tool.program, &[], &original.output, &dir);
    original.oracle().check("instruction-counter", &tool.plan, &report, &dir.join("report.json"));
    let alone = Run { runtime: None, ..limited(limit) };
    let output = alone.command(tool.program.as_os_str(), &[]).output().unwrap();
    assert!(stopped(&output, limit), "{limit}: {}", String::from_utf8_lossy(&output.stderr));
}

/// The same on gfx908 (its own collect kernel, no packed FP32, AGPRs
/// apart): every example tool's report is what the emulator gives.
#[test]
fn every_example_tool_reports_what_the_emulator_gives_on_gfx908() {
    let target = "gfx908";
    let dir = test_directory("gfx908");
    let original = original(target, &dir);
    for example in EXAMPLE_TOOLS {
        let tool = instrument_with(example, &original, &dir);
        let (report, _) = run_reported(&tool.program, target, Some(&tool.host), &original.output, &dir);
        original.oracle().check(example, &tool.plan, &report, &dir.join("report.json"));
    }
}

/// The MI300X model (LLVM 17 and newer: trixie's ROCr 6.1, sid's 6.4 and
/// experimental's 7.2 know gfx942; hipcc builds the program for it, the
/// runtime its collect kernel): every example tool's report is what the
/// emulator gives, instrumented statically and in dynamic mode.
#[test]
fn every_example_tool_reports_what_the_emulator_gives_on_mi300x() {
    if gpuinstr::toolchain::LLVM_MAJOR < 17 {
        return; // Debian 12's ROCr 5.2 predates gfx942
    }
    every_example_tool_reports_what_the_emulator_gives_on("gfx942");
}

/// The MI355X model, where the HIP runtime knows gfx950: experimental's
/// HIP 7.2 (LLVM 22); sid's HIP 6.4 refuses the device, as the
/// device-preload tests check.
#[test]
fn every_example_tool_reports_what_the_emulator_gives_on_mi355x() {
    if gpuinstr::toolchain::LLVM_MAJOR < 22 {
        return;
    }
    every_example_tool_reports_what_the_emulator_gives_on("gfx950");
}

fn every_example_tool_reports_what_the_emulator_gives_on(target: &str) {
    let dir = test_directory(target);
    let original = original(target, &dir);
    for example in EXAMPLE_TOOLS {
        let tool = instrument_with(example, &original, &dir);
        let (report, _) = run_reported(&tool.program, target, Some(&tool.host), &original.output, &dir);
        original.oracle().check(example, &tool.plan, &report, &dir.join("report.json"));
        if example == "instruction-counter" {
            let dynamic = Run {
                dynamic: Some((tool.device.clone(), tool.plan_file.clone())),
                tool_host: Some(tool.host.clone()),
                ..run_on(target)
            };
            let (report, _) = run_reported_with(dynamic, &original.program, &[], &original.output, &dir);
            original.oracle().check(example, &tool.plan, &report, &dir.join("report.json"));
        }
    }
}

/// Points left out (`--allow-partial`) never pass quietly: the code object
/// names the kernels that miss them (its partial table) and flags the
/// points; the runtime warns when it loads it and marks every dispatch of
/// those kernels; the host part learns it (kernel arguments reads nothing
/// for them rather than zeros) and says so at exit; the other kernel's
/// values are still the launch's. Statically and in dynamic mode alike.
/// Here: gfx908, kernel arguments, allocations never grown: `scale` (4
/// VGPRs) has no room for the payload, `rowSums` has.
#[test]
fn dispatches_of_kernels_with_points_left_out_are_marked_partial() {
    use gpuinstr::stages::load::instrumented::{self, PartialKernel};
    use gpuinstr::stages::sva::RegisterGrowth;
    let target = "gfx908";
    let dir = test_directory("partial");
    let original = original(target, &dir);
    let device = build_tool(Compiler::Hipcc, &example("kernel-arguments"), "-O3", &dir);
    let plan_file = repo().join("hook-sdk/examples/kernel-arguments/plan.toml");
    let plan = Plan::load(&plan_file).unwrap();
    let never = InstrumentOptions { allow_partial: true, grow_registers: RegisterGrowth::Never, ..Default::default() };
    let program = instrumented_with(&original.program, &device, &plan, &never, "partial");
    let code_object = load::load_for_target(&program, Some(target)).unwrap().code_objects.remove(0);
    let scale = "_Z5scalePffi";
    assert_eq!(
        instrumented::partial_kernels(&code_object).unwrap(),
        [PartialKernel { kernel: scale.into(), left_out: 1 }]
    );
    let points = instrumented::point_table(&code_object).unwrap();
    let flagged: Vec<&str> = points.iter().filter(|p| p.left_out).map(|p| &*p.function).collect();
    assert_eq!((flagged, points.len()), (vec![scale], 2));

    let host = host_part("kernel-arguments", &dir);
    let dynamic = Run {
        dynamic: Some((device.clone(), plan_file.clone())),
        cache: Some(dir.join("cache")),
        allow_partial: true,
        grow_registers: Some("never".into()),
        ..run_on(target)
    };
    for (how, run, program) in [("static", run_on(target), &program), ("dynamic", dynamic, &original.program)] {
        let report_path = dir.join(format!("{how}.json"));
        let run = Run { tool_host: Some(host.clone()), report: Some(report_path.clone()), ..run };
        let output = run.command(program.as_os_str(), &[]).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        assert_eq!(succeeded(output, how), original.output, "{how}: {stderr}");
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
        let warnings = report["warnings"].as_array().unwrap();
        assert_eq!(warnings.len(), 1, "{how}: {stderr}");
        assert!(
            warnings[0]
                .as_str()
                .unwrap()
                .starts_with("PARTIAL: gfx908 code object 0 was instrumented with 1 selected point left out"),
            "{how}"
        );
        assert_eq!(
            report["code_objects"][0]["partial_kernels"],
            serde_json::json!([{ "kernel": scale, "left_out": 1 }])
        );
        let dispatches = report["dispatches"].as_array().unwrap();
        assert_eq!(dispatches.len(), 4, "{how}");
        for (k, (reported, logged)) in dispatches.iter().zip(&original.dispatches).enumerate() {
            assert_eq!(reported["kernel"], logged["kernel"], "{how} dispatch {k}");
            let problems = reported["problems"].as_array().unwrap();
            if reported["kernel"] == scale {
                assert_eq!(problems.len(), 1, "{how} dispatch {k}");
                assert!(
                    problems[0]
                        .as_str()
                        .unwrap()
                        .starts_with("partial: 1 selected point this kernel may run was left out"),
                    "{how} {k}"
                );
                assert_eq!(reported.get("tool"), None, "{how} dispatch {k}: nothing read");
            } else {
                assert!(problems.is_empty(), "{how} dispatch {k}: {problems:?}");
                let block: Vec<u64> = (0..3).map(|d| logged["workgroup_size"][d].as_u64().unwrap()).collect();
                let grid: Vec<u64> =
                    (0..3).map(|d| logged["grid_size"][d].as_u64().unwrap().div_ceil(block[d])).collect();
                assert_eq!(reported["tool"], serde_json::json!({ "gridDim": grid, "blockDim": block }), "{how} {k}");
            }
        }
        // The run's launch shapes name only the kernel it could read.
        let launches = report["tool"]["launches"].as_object().unwrap();
        assert!(launches.keys().all(|k| k != scale) && launches.len() == 1, "{how}: {launches:?}");
        assert_eq!(report["tool"]["partial_dispatches"], 3, "{how}");
        assert!(stderr.contains("gpuinstr: warning: 3 dispatches have problems (partial"), "{how}: {stderr}");
        assert!(
            stderr.contains("PARTIAL: 3 dispatches of kernels whose entry point was left out, not read"),
            "{stderr}"
        );
    }
}

/// Dynamic mode, a code object that cannot be instrumented (points left
/// out, no --allow-partial): it is loaded as it is, so the program runs
/// every kernel and prints what it prints without a tool; the runtime warns
/// at once, the report lists it as `not instrumented` with the reason, and
/// the run fails after the program (gpuinstr-run's exit status, from the
/// file the runtime notes it in). It is not retried on the next run: the
/// cache remembers the reason.
#[test]
fn dynamic_mode_runs_a_code_object_it_cannot_instrument_as_it_is_and_fails_after() {
    use gpuinstr_device_preload::run::{exit_code_after, failures, RunFailure};
    let target = "gfx908";
    let dir = test_directory("not-instrumented");
    let original = original(target, &dir);
    let device = build_tool(Compiler::Hipcc, &example("kernel-arguments"), "-O3", &dir);
    let plan_file = repo().join("hook-sdk/examples/kernel-arguments/plan.toml");
    let notes = dir.join("not-instrumented");
    let cache = dir.join("cache");
    let _ = std::fs::remove_dir_all(&cache);
    for attempt in 0..2 {
        let _ = std::fs::remove_file(&notes);
        let report_path = dir.join(format!("report{attempt}.json"));
        let run = Run {
            dynamic: Some((device.clone(), plan_file.clone())),
            cache: Some(cache.clone()),
            grow_registers: Some("never".into()),
            failures: Some(notes.clone()),
            report: Some(report_path.clone()),
            ..run_on(target)
        };
        let output = run.command(original.program.as_os_str(), &[]).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        let code = output.status.code().unwrap();
        assert_eq!(succeeded(output, "the program"), original.output, "every kernel ran: {stderr}");
        assert!(stderr.contains("could not be instrumented and runs as it is"), "{stderr}");
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
        let dynamic = report["dynamic"].as_array().unwrap();
        let failed: Vec<&Value> = dynamic.iter().filter(|d| d["source"] == "not instrumented").collect();
        assert_eq!(failed.len(), 1, "{attempt}: {dynamic:?}");
        if attempt == 1 {
            assert_eq!(failed[0]["seconds"], 0.0, "the second run learns it from the cache");
        }
        let why = failed[0]["note"].as_str().unwrap();
        assert!(why.contains("1 of 2 selected points") && why.contains("left out"), "{why}");
        assert_eq!(report["warnings"].as_array().unwrap().len(), 1, "{stderr}");
        assert!(report["code_objects"].as_array().unwrap().is_empty(), "nothing instrumented was loaded");
        let noted = failures(&notes);
        assert!(matches!(noted[..], [RunFailure::NotInstrumented(_)]), "{noted:?}");
        assert_eq!(exit_code_after(code, &noted), 1, "the run fails after the program");
    }
}

/// Dynamic mode instruments in a worker process: whatever goes wrong there
/// leaves the program running its original code, with a warning, the code
/// object listed as not instrumented with why, and the run failed after
/// the program. Here the worker dies of a signal (as LLVM's fatal errors
/// abort a process) and runs out of room to write (a file size limit, as
/// on a full disk). A temporary directory that does not exist (where the
/// worker is handed each code object) stops the run before the program
/// starts (status 2).
#[test]
fn a_failure_inside_dynamic_instrumentation_leaves_the_program_its_own_code() {
    use gpuinstr_device_preload::run::{exit_code_after, failures, RunFailure};
    let target = "gfx90a";
    let dir = test_directory("worker-failures");
    let original = original(target, &dir);
    let device = build_tool(Compiler::Hipcc, &example("instruction-counter"), "-O3", &dir);
    let plan_file = repo().join("hook-sdk/examples/instruction-counter/plan.toml");
    let script = |name: &str, body: &str| {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        run_ok(std::process::Command::new("chmod").arg("755").arg(&path));
        path
    };
    let worker = gpuinstr_tests::dynamic_worker();
    let cases = [
        ("dies", script("dies.sh", "kill -ABRT $$"), "the instrumenting process died of signal 6"),
        (
            "full",
            script("full.sh", &format!("exec prlimit --fsize=2048 -- '{}' \"$@\"", worker.display())),
            "the instrumenting process",
        ),
    ];
    let notes = dir.join("failures");
    let report_path = dir.join("report.json");
    let run_with = |worker: PathBuf| Run {
        dynamic: Some((device.clone(), plan_file.clone())),
        dynamic_worker: Some(worker),
        cache: Some(PathBuf::from("none")),
        failures: Some(notes.clone()),
        report: Some(report_path.clone()),
        ..run_on(target)
    };
    for (case, worker, why) in cases {
        let _ = std::fs::remove_file(&notes);
        let output = run_with(worker).command(original.program.as_os_str(), &[]).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        let code = output.status.code().unwrap();
        assert_eq!(succeeded(output, case), original.output, "{case}: the program's own code ran: {stderr}");
        assert!(stderr.contains("could not be instrumented and runs as it is"), "{case}: {stderr}");
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
        let failed: Vec<&Value> =
            report["dynamic"].as_array().unwrap().iter().filter(|d| d["source"] == "not instrumented").collect();
        assert_eq!(failed.len(), 1, "{case}: {report}");
        assert!(failed[0]["note"].as_str().unwrap().contains(why), "{case}: {}", failed[0]["note"]);
        let noted = failures(&notes);
        assert!(matches!(noted[..], [RunFailure::NotInstrumented(_)]), "{case}: {noted:?}");
        assert_eq!(exit_code_after(code, &noted), 1, "{case}: the run fails after the program");
    }
    let mut command = run_with(worker).command(original.program.as_os_str(), &[]);
    let output = command.env("TMPDIR", "/nonexistent/tmp").output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("gpuinstr: error: dynamic mode: ") && stderr.contains("/nonexistent/tmp"), "{stderr}");
    assert!(output.stdout.is_empty(), "the program did not run");
}

/// A host part still busy with the last dispatch when the program exits
/// (ROCr's event thread calls it; the program's exit does not wait for
/// it): the report waits for its values, so no dispatch goes missing.
#[test]
fn a_dispatch_still_in_the_tool_at_exit_is_in_the_report() {
    let target = "gfx90a";
    let dir = test_directory("slow-host");
    let original = original(target, &dir);
    let tool = instrument_with("instruction-counter", &original, &dir);
    let host = host_part_of(
        "slow",
        "#include <chrono>\n#include <thread>\n\
         extern \"C\" void gpuinstr_tool_dispatch(gpuinstr_dispatch *D) {\n\
           if (gpuinstr_dispatch_id(D) == 4) std::this_thread::sleep_for(std::chrono::seconds(3));\n\
           uint64_t Count = 0;\n\
           gpuinstr::read(D, \"Counter\", Count);\n\
           gpuinstr_report_u64(D, \"instructions\", Count);\n\
         }\n",
        &dir,
    );
    let (report, _) = run_reported(&tool.program, target, Some(&host), &original.output, &dir);
    original.oracle().check_instruction_counts(&report, &tool.plan);
}

/// A host part's load call: once per instrumented code object as the
/// program loads it, before its dispatches; the code object's index, GPU,
/// kernels (the originals, not the copies kept beside them) and sites as
/// its table has them; each dispatch gives the same code object back. The
/// run's values and warnings a host part reports go into the report.
#[test]
fn a_host_part_learns_each_code_object_as_it_loads() {
    let target = "gfx90a";
    let dir = test_directory("load-call");
    let original = original(target, &dir);
    let tool = instrument_with("instruction-counter", &original, &dir);
    let options = InstrumentOptions { keep_originals: true, ..InstrumentOptions::default() };
    let program = instrumented_with(&original.program, &tool.device, &tool.plan, &options, "originals-kept");
    let host = host_part_of(
        "load-probe",
        "#include <string>\n#include <vector>\n\
         static std::vector<const gpuinstr_code_object *> Loaded;\n\
         static std::string Loads = \"[\";\n\
         extern \"C\" void gpuinstr_tool_load(const gpuinstr_code_object *C) {\n\
           Loaded.push_back(C);\n\
           size_t Sites = 0;\n\
           gpuinstr_code_object_sites(C, &Sites);\n\
           std::string Kernels;\n\
           for (size_t K = 0; K < gpuinstr_code_object_kernel_count(C); ++K)\n\
             Kernels += (K ? \", \" : \"\") + gpuinstr::jsonString(gpuinstr_code_object_kernel(C, K));\n\
           Loads += std::string(Loads.size() > 1 ? \", \" : \"\") + \"{\\\"index\\\": \" +\n\
             std::to_string(gpuinstr_code_object_index(C)) + \", \\\"processor\\\": \" +\n\
             gpuinstr::jsonString(gpuinstr_code_object_processor(C)) + \", \\\"kernels\\\": [\" + Kernels +\n\
             \"], \\\"sites\\\": \" + std::to_string(Sites) + \", \\\"past_the_end\\\": \" +\n\
             std::to_string(gpuinstr_code_object_kernel(C, gpuinstr_code_object_kernel_count(C)) == nullptr) + \"}\";\n\
         }\n\
         extern \"C\" void gpuinstr_tool_dispatch(gpuinstr_dispatch *D) {\n\
           const gpuinstr_code_object *C = gpuinstr_dispatch_code_object(D);\n\
           size_t Sites = 0, DispatchSites = 0;\n\
           bool Same = gpuinstr_code_object_sites(C, &Sites) == gpuinstr_sites(D, &DispatchSites);\n\
           gpuinstr_report_u64(D, \"loaded_before\", !Loaded.empty() && Loaded.back() == C);\n\
           gpuinstr_report_u64(D, \"same_sites\", Same && Sites == DispatchSites);\n\
         }\n\
         extern \"C\" void gpuinstr_tool_exit(void) {\n\
           gpuinstr_report_run_json(\"loads\", (Loads + \"]\").c_str());\n\
           gpuinstr_report_run_text(\"note\", \"probe\");\n\
           gpuinstr_report_run_warning(\"a run-level warning\");\n\
         }\n",
        &dir,
    );
    let report_path = dir.join("report.json");
    let run = Run { tool_host: Some(host), report: Some(report_path.clone()), ..run_on(target) };
    let output = run.command(program.as_os_str(), &[]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(succeeded(output, "the program"), original.output, "{stderr}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    let mut kernels: Vec<&str> = original.app.kernels.iter().map(|k| k.name()).collect();
    kernels.sort_unstable();
    let sites = report["code_objects"][0]["sites"].as_u64().unwrap();
    assert!(sites > 0);
    let loads = &report["tool"]["loads"];
    let mut loaded_kernels: Vec<&str> =
        loads[0]["kernels"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
    loaded_kernels.sort_unstable();
    assert_eq!(loaded_kernels, kernels, "the originals' names, once each");
    assert_eq!(
        *loads,
        serde_json::json!([{
            "index": 0, "processor": target, "kernels": loads[0]["kernels"], "sites": sites, "past_the_end": 1
        }])
    );
    assert_eq!(report["tool"]["note"], "probe");
    let dispatches = report["dispatches"].as_array().unwrap();
    assert_eq!(dispatches.len(), 4);
    for dispatch in dispatches {
        assert_eq!(dispatch["tool"], serde_json::json!({ "loaded_before": 1, "same_sites": 1 }), "{dispatch}");
    }
    assert_eq!(report["warnings"], serde_json::json!(["the tool: a run-level warning"]));
}

/// A host part built against another version of `gpuinstr/host.h` (here:
/// one from before the header carried its version) would read the
/// runtime's structs with the wrong layout: the runtime refuses it and
/// says what to do, and the program does not run.
#[test]
fn a_host_part_of_another_host_api_is_refused() {
    let target = "gfx90a";
    let dir = test_directory("old-host");
    let program = hip_build("runtime/counted.hip", target, &dir, "counted", &[]);
    let source = dir.join("old.cpp");
    std::fs::write(&source, "extern \"C\" void gpuinstr_tool_exit(void) {}\n").unwrap();
    let host = dir.join("libold.so");
    run_ok(std::process::Command::new("c++").args(["-shared", "-fPIC"]).arg(&source).arg("-o").arg(&host));
    let run = Run { tool_host: Some(host.clone()), ..run_on(target) };
    let output = run.command(program.as_os_str(), &[]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "gpuinstr: error: cannot load the tool's host part {}: it was built against an older gpuinstr/host.h",
            host.display()
        )) && stderr.contains("rebuild it against"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&output.stdout).contains("PASSED"));
}

/// Kernel arguments: each dispatch's gridDim and blockDim are the launch's
/// (`Oracle::check_kernel_arguments`).
#[test]
fn the_runtime_reports_each_dispatchs_kernel_arguments() {
    let target = "gfx90a";
    let dir = test_directory("kernel-arguments");
    let original = original(target, &dir);
    let tool = instrument_with("kernel-arguments", &original, &dir);
    let (report, stderr) = run_reported(&tool.program, target, Some(&tool.host), &original.output, &dir);
    original.oracle().check_kernel_arguments(&report);
    assert!(stderr.contains("kernel arguments: 4 dispatches"), "{stderr}");
}

/// The opcode histogram: each dispatch's executions per opcode name are the
/// emulator's (`Oracle::check_opcode_histogram`).
#[test]
fn the_runtime_reports_each_dispatchs_opcode_histogram() {
    let target = "gfx90a";
    let dir = test_directory("opcode-histogram");
    let original = original(target, &dir);
    let tool = instrument_with("opcode-histogram", &original, &dir);
    let (report, stderr) = run_reported(&tool.program, target, Some(&tool.host), &original.output, &dir);
    original.oracle().check_opcode_histogram(&report);
    assert!(stderr.contains("opcode histogram: "), "{stderr}");
}

/// Seed 003's global wavefront id (what the tools record) of each of a
/// dispatch's wavefronts in the emulator's order: workgroups x fastest,
/// each full workgroup's wavefronts counted even where the grid's last
/// workgroup is partial.
fn tool_wavefronts(logged: &Value) -> Vec<u64> {
    let shape = |key: &str| -> Vec<u64> { (0..3).map(|d| logged[key][d].as_u64().unwrap()).collect() };
    let (grid, block) = (shape("grid_size"), shape("workgroup_size"));
    let groups: Vec<u64> = (0..3).map(|d| grid[d].div_ceil(block[d])).collect();
    let full = (block.iter().product::<u64>()).div_ceil(64);
    let mut ids = Vec::new();
    for z in 0..groups[2] {
        for y in 0..groups[1] {
            for x in 0..groups[0] {
                let size: u64 =
                    [x, y, z].iter().enumerate().map(|(d, &g)| (grid[d] - g * block[d]).min(block[d])).product();
                let group = x + groups[0] * (y + groups[1] * z);
                ids.extend((0..size.div_ceil(64)).map(|w| group * full + w));
            }
        }
    }
    ids
}

/// A tool's file of records beside `report` (`<report stem>.<name>`, as
/// docs/runtime.md says): its rows (after the header) as fields, numbers
/// read in decimal or `0x` hex.
fn records(report: &Path, name: &str, header: &str) -> Vec<Vec<u64>> {
    let stem = report.file_stem().unwrap().to_string_lossy();
    let path = report.with_file_name(format!("{stem}.{name}"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(header));
    let number = |field: &str| match field.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
        None => field.parse().unwrap(),
    };
    lines.map(|line| line.split('\t').map(number).collect()).collect()
}

/// Branch divergence: the records and each branch's executions and
/// divergent ones are the EXEC history's (`Oracle::check_branch_records`),
/// and the program's partial waves and loop diverge.
#[test]
fn the_runtime_reports_each_branchs_divergence_as_the_exec_history_gives_it() {
    let target = "gfx90a";
    let dir = test_directory("branch-divergence");
    let original = original(target, &dir);
    let tool = instrument_with("branch-divergence", &original, &dir);
    let (report, stderr) = run_reported(&tool.program, target, Some(&tool.host), &original.output, &dir);
    let divergent = original.oracle().check_branch_records(&report, &dir.join("report.json"));
    assert!(divergent > 0, "the program's partial waves and loop diverge");
    assert!(stderr.contains("branch divergence: "), "{stderr}");
    assert!(stderr.contains(&format!(", {divergent} of ")), "{stderr}");
}

/// The memory tracer: its file holds exactly the accesses the emulator
/// logged (`Oracle::check_memory_trace`), and the run's database the same
/// records. A run stores its records once: by default only the database
/// keeps them (no text copy is written), and with `--no-database-records`
/// the text copy is their one store.
#[test]
fn the_runtime_writes_the_memory_trace_the_emulator_logged() {
    let target = "gfx90a";
    let dir = test_directory("memory-tracer");
    let original = original(target, &dir);
    let tool = instrument_with("memory-tracer", &original, &dir);
    let (report, stderr) = run_reported(&tool.program, target, Some(&tool.host), &original.output, &dir);
    original.oracle().check_memory_trace(&report, &dir.join("report.json"), &tool.plan);
    assert!(stderr.contains("memory tracer: "), "{stderr}");
    // The database holds the same records, as the ring gave them.
    let header = MEMORY_TRACE_HEADER;
    let rows = records(&dir.join("report.json"), "memory-trace.tsv", header);
    let stored = |database: &Path| -> Vec<Vec<u64>> {
        database_records(database, "Trace", 16)
            .into_iter()
            .map(|(dispatch, r)| {
                let word = |at: usize, n: usize| r[at..at + n].iter().rev().fold(0u64, |v, b| (v << 8) | u64::from(*b));
                vec![dispatch, word(8, 4), word(12, 4) >> 9, word(12, 4) & 0x3f, word(0, 8), (word(12, 4) >> 7) & 3]
            })
            .collect()
    };
    assert_eq!(stored(&dir.join("report.sqlite")), rows, "the database's records are the trace's");

    // By default: the database only.
    let once = dir.join("once");
    std::fs::create_dir_all(&once).unwrap();
    let run = Run { tool_host: Some(tool.host.clone()), tool_files: Vec::new(), ..run_on(target) };
    let (report, _) = run_reported_with(run, &tool.program, &[], &original.output, &once);
    assert!(report.get("files").is_none(), "no text copy unasked: {report}");
    assert!(!once.join("report.memory-trace.tsv").exists());
    let without_addresses = |rows: Vec<Vec<u64>>| rows.into_iter().map(|r| r[..4].to_vec()).collect::<Vec<_>>();
    assert_eq!(without_addresses(stored(&once.join("report.sqlite"))), without_addresses(rows.clone()));
    // Without the database's records, the text copy is their store.
    let run =
        Run { tool_host: Some(tool.host.clone()), tool_files: Vec::new(), no_database_records: true, ..run_on(target) };
    run_reported_with(run, &tool.program, &[], &original.output, &once);
    assert_eq!(
        without_addresses(records(&once.join("report.json"), "memory-trace.tsv", header)),
        without_addresses(rows)
    );
}

/// The memory tracer on LDS and buffer accesses (`memory_spaces.hip`):
/// every lane's LDS address (single, two-address ST64 and atomic forms)
/// and buffer address (raw with `offen`, structured with `idxen`) is the
/// emulator's, each record names its space, and the lanes a buffer's range
/// check leaves out (past the program's 1,000 elements in a grid of 1,024
/// lanes) are not in the trace, statically and in dynamic mode.
#[test]
fn the_memory_tracer_follows_lds_and_buffer_accesses() {
    let target = "gfx90a";
    let dir = test_directory("memory-spaces");
    let program = hip_build("runtime/memory_spaces.hip", target, &dir, "memory-spaces", &[]);
    let original = original_dispatching(program, target, &dir, 2);
    let tool = instrument_with("memory-tracer", &original, &dir);
    let report_path = dir.join("report.json");
    let (report, stderr) = run_reported(&tool.program, target, Some(&tool.host), &original.output, &dir);
    original.oracle().check_memory_trace(&report, &report_path, &tool.plan);
    let rows = records(&report_path, "memory-trace.tsv", MEMORY_TRACE_HEADER);
    // Per instruction: (space, records).
    let mut per_instruction = std::collections::BTreeMap::<u64, (u64, u64)>::new();
    for row in &rows {
        let entry = per_instruction.entry(row[1]).or_insert((row[5], 0));
        assert_eq!(entry.0, row[5], "one space per instruction");
        entry.1 += 1;
    }
    let buffer: Vec<u64> = per_instruction.values().filter(|(space, _)| *space == 2).map(|(_, n)| *n).collect();
    // The raw load at offset 4 reaches 999 elements, the stores 1,000.
    assert_eq!(buffer, vec![999, 1000, 1000], "buffer records per instruction: {per_instruction:?}");
    let mut lds: Vec<u64> = per_instruction.values().filter(|(space, _)| *space == 3).map(|(_, n)| *n).collect();
    lds.dedup();
    lds.sort_unstable();
    lds.dedup();
    // In 4 workgroups of 256: the counter's write and read (1 lane each),
    // the atomic (86 lanes), the tile's writes and reads (every lane).
    assert_eq!(lds, vec![4, 4 * 86, 4 * 256], "LDS records per instruction: {per_instruction:?}");
    assert!(per_instruction.values().any(|(space, _)| *space == 1), "global accesses too");
    assert!(stderr.contains("memory tracer: "), "{stderr}");

    // Dynamic mode gives the same trace.
    let dynamic = dir.join("dynamic");
    std::fs::create_dir_all(&dynamic).unwrap();
    let run = Run {
        dynamic: Some((tool.device.clone(), tool.plan_file.clone())),
        cache: Some(PathBuf::from("none")),
        tool_host: Some(tool.host.clone()),
        ..run_on(target)
    };
    let (report, _) = run_reported_with(run, &original.program, &[], &original.output, &dynamic);
    original.oracle().check_memory_trace(&report, &dynamic.join("report.json"), &tool.plan);
}

/// The memory-efficiency tool on LDS and buffer accesses: its numbers per
/// instruction are the model's over the emulator's access log (the oracle
/// checks each dispatch and the run's totals), and the program's shapes
/// show in them: `shared`'s `tile[(t * 32) % 512]` takes 16 cycles where
/// its other LDS accesses take the fewest, and of the buffer instructions
/// only the load at `offset:4` touches more lines than its bytes fill.
#[test]
fn memory_efficiency_counts_lines_and_bank_conflicts_as_the_model_does() {
    let target = "gfx90a";
    let dir = test_directory("memory-efficiency");
    let program = hip_build("runtime/memory_spaces.hip", target, &dir, "memory-spaces", &[]);
    let original = original_dispatching(program, target, &dir, 2);
    let tool = instrument_with("memory-efficiency", &original, &dir);
    let (report, stderr) = run_reported(&tool.program, target, Some(&tool.host), &original.output, &dir);
    let measured = original.oracle().check_memory_efficiency(&report, &tool.plan);
    let spaces: BTreeMap<u64, String> = ["memory", "lds"]
        .iter()
        .flat_map(|key| report["tool"][key].as_array().unwrap().iter())
        .map(|e| (hex_address(&e["address"]), e["access"].as_str().unwrap().to_string()))
        .collect();
    let lds: Vec<&Efficiency> =
        measured.iter().filter(|(a, _)| spaces[*a].starts_with("LDS")).map(|(_, e)| e).collect();
    assert_eq!(lds.iter().filter(|e| e.used == 16 * e.ideal).count(), 1, "a 16-way conflict: {measured:?}");
    assert!(lds.iter().filter(|e| e.used != 16 * e.ideal).all(|e| e.used == e.ideal), "the rest: {measured:?}");
    let buffer: Vec<&Efficiency> =
        measured.iter().filter(|(a, _)| spaces[*a].starts_with("buffer")).map(|(_, e)| e).collect();
    assert_eq!(buffer.len(), 3, "{spaces:?}");
    assert_eq!(buffer.iter().filter(|e| e.used > e.ideal).count(), 1, "one load across lines: {buffer:?}");
    assert!(stderr.contains("memory efficiency: "), "{stderr}");
}

/// The records of ring `ring` in the run's database, in order, with their
/// dispatch: each dispatch's rows must follow one another (`first` and
/// `count`) and hold whole records of `record_bytes`.
fn database_records(database: &Path, ring: &str, record_bytes: usize) -> Vec<(u64, Vec<u8>)> {
    let connection =
        rusqlite::Connection::open_with_flags(database, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut statement = connection
        .prepare(
            "SELECT dispatch, first, count, record_bytes, bytes FROM records WHERE ring = ?1 ORDER BY dispatch, first",
        )
        .unwrap();
    let rows = statement
        .query_map([ring], |row| {
            Ok((
                row.get::<_, u64>(0)?,
                row.get::<_, u64>(1)?,
                row.get::<_, u64>(2)?,
                row.get::<_, u64>(3)?,
                row.get::<_, Vec<u8>>(4)?,
            ))
        })
        .unwrap();
    let mut records = Vec::new();
    let mut next = (0, 0);
    for row in rows {
        let (dispatch, first, count, bytes_per_record, bytes) = row.unwrap();
        assert_eq!(bytes_per_record as usize, record_bytes);
        assert_eq!(bytes.len() as u64, count * bytes_per_record);
        assert_eq!(first, if dispatch == next.0 { next.1 } else { 0 }, "dispatch {dispatch}'s rows follow one another");
        next = (dispatch, first + count);
        records.extend(bytes.chunks_exact(record_bytes).map(|r| (dispatch, r.to_vec())));
    }
    records
}

/// A ring of 64 records (`--ring-bytes 2048`), where dispatches append up
/// to ten thousand: hooks wait while it is full and the runtime empties it
/// as the kernel runs. The memory tracer's file still holds the emulator's
/// access log, record for record and in its order; a probe host part sees
/// each dispatch's records in batches of at most 64, each batch starting
/// where the one before ended, all before the dispatch's own call, and as
/// many as the dispatch appended.
#[test]
fn a_ring_smaller_than_a_dispatchs_records_delivers_every_one_in_order() {
    let target = "gfx90a";
    let dir = test_directory("small-ring");
    let original = original(target, &dir);
    let tool = instrument_with("memory-tracer", &original, &dir);
    let small = |host: &Path| Run { tool_host: Some(host.to_path_buf()), ring_bytes: Some(2048), ..run_on(target) };
    let (report, _) = run_reported_with(small(&tool.host), &tool.program, &[], &original.output, &dir);
    original.oracle().check_memory_trace(&report, &dir.join("report.json"), &tool.plan);

    let probe = host_part_of(
        "ring-probe",
        r#"#include <map>
#include <string>
std::map<uint64_t, uint64_t> Seen, Batches;
std::map<uint64_t, std::string> Problems;
extern "C" void gpuinstr_tool_records(const gpuinstr_records *R) {
  size_t Count = 0, Bytes = 0;
  gpuinstr_records_data(R, &Count, &Bytes);
  const uint64_t Id = gpuinstr_records_dispatch_id(R);
  if (gpuinstr_records_first(R) != Seen[Id]) Problems[Id] += "a batch out of order; ";
  if (Count == 0 || Count > 64 || Bytes != 16) Problems[Id] += "a batch of " + std::to_string(Count) + "; ";
  if (std::string(gpuinstr_records_ring(R)) != "Trace") Problems[Id] += "another ring; ";
  if (gpuinstr_code_object_index(gpuinstr_records_code_object(R)) != 0) Problems[Id] += "another code object; ";
  Seen[Id] += Count;
  Batches[Id] += 1;
}
extern "C" void gpuinstr_tool_dispatch(gpuinstr_dispatch *D) {
  const uint64_t Id = gpuinstr_dispatch_id(D);
  gpuinstr_report_u64(D, "records", Seen[Id]);
  gpuinstr_report_u64(D, "appended", gpuinstr_dispatch_records(D, "Trace"));
  gpuinstr_report_u64(D, "batches", Batches[Id]);
  gpuinstr_report_text(D, "problems", Problems[Id].c_str());
}
"#,
        &dir,
    );
    let (report, _) = run_reported_with(small(&probe), &tool.program, &[], &original.output, &dir);
    let mut wrapped = false;
    for (dispatch, logged) in matched(&report, &original.dispatches).iter().zip(&original.dispatches) {
        let records = dispatch["tool"]["records"].as_u64().unwrap();
        let accesses = logged["accesses"].as_array().map_or(0, Vec::len) as u64;
        assert_eq!(records, accesses, "{dispatch}");
        assert_eq!(dispatch["tool"]["appended"], records, "{dispatch}");
        assert!(dispatch["tool"]["batches"].as_u64().unwrap() >= records.div_ceil(64), "{dispatch}");
        assert_eq!(dispatch["tool"]["problems"], "", "{dispatch}");
        wrapped |= records > 64;
    }
    assert!(wrapped, "a dispatch appends more than the ring holds");
}

/// With `--ring-full drop`, a wavefront that finds the 64-record ring full
/// drops its records instead of waiting: what arrives is the emulator's
/// access log less whole appends, in order, and every dropped record is
/// counted, per dispatch in the report (the ring's `dropped` and a
/// warning) and by the tool. Without the option nothing is dropped (the
/// test above, on the same ring).
#[test]
fn a_full_ring_drops_records_only_when_asked_and_counts_each() {
    let target = "gfx90a";
    let dir = test_directory("dropping-ring");
    let original = original(target, &dir);
    let tool = instrument_with("memory-tracer", &original, &dir);
    let report_path = dir.join("report.json");
    let run = Run {
        tool_host: Some(tool.host.clone()),
        report: Some(report_path.clone()),
        ring_bytes: Some(2048),
        drop_when_ring_full: true,
        ..run_on(target)
    };
    let output = run.command(tool.program.as_os_str(), &[]).output().unwrap();
    let (report, stderr) = reported_warning(output, &report_path, &original.output);
    let traces = original.oracle().memory_traces(&report, &dir.join("report.json"), &tool.plan);
    let (mut dropped_in_all, mut dispatches_dropping) = (0, 0);
    let dispatches = matched_warning(&report, &original.dispatches);
    for (k, (dispatch, (traced, expected))) in dispatches.iter().zip(traces).enumerate() {
        let ring = dispatch["globals"].as_array().unwrap().iter().find(|g| g["name"] == "Trace").unwrap();
        let dropped = ring["dropped"].as_u64().unwrap_or_else(|| panic!("dispatch {k}: the ring's drops in {ring}"));
        assert_eq!(ring["records"], traced.len() as u64, "dispatch {k}: records delivered");
        assert_eq!(traced.len() as u64 + dropped, expected.len() as u64, "dispatch {k}: delivered and dropped");
        assert_eq!(dispatch["tool"]["dropped"].as_u64().unwrap_or(0), dropped, "dispatch {k}: the tool's count");
        let mut rest = expected.iter();
        for record in &traced {
            assert!(
                rest.any(|e| e[..3] == record[..3]),
                "dispatch {k}: {record:?} is not next in the emulator's order"
            );
        }
        let problems = dispatch["problems"].as_array().unwrap();
        let warned = problems.iter().any(|p| p.as_str().unwrap().contains("dropped"));
        assert_eq!(warned, dropped > 0, "dispatch {k}: a warning says so: {problems:?}");
        dropped_in_all += dropped;
        dispatches_dropping += u64::from(dropped > 0);
    }
    // The emulator runs a wavefront's next access sooner than the runtime
    // takes 64 records: a 64-record ring overflows in every run.
    assert!(dropped_in_all > 0, "the 64-record ring was never full");
    assert_eq!(report["tool"]["dropped"], dropped_in_all, "the tool's total");
    assert_eq!(report["warnings"].as_array().unwrap().len() as u64, dispatches_dropping, "{stderr}");
    assert!(stderr.contains("lane accesses were dropped because the ring was full"), "{stderr}");
}

/// A dispatch log's digest (`access_digest`, `exec_digest`) as (count, FNV-1a).
fn logged_digest(dispatch: &Value, name: &str) -> (u64, String) {
    let digest = &dispatch[name];
    (digest["count"].as_u64().unwrap_or(0), digest["fnv1a"].as_str().unwrap_or("").to_string())
}

/// The digest (as the device's dispatch log gives it) of the rows of a
/// tool's file (`name` beside `report`) that belong to dispatch `id`, each
/// row's numbers picked by `pick`; read a line at a time (a trace of 52
/// million accesses is 1.7 GB).
fn file_digest(report: &Path, name: &str, id: u64, pick: impl Fn(&[u64]) -> [u64; 4]) -> (u64, String) {
    use std::io::BufRead;
    let stem = report.file_stem().unwrap().to_string_lossy();
    let path = report.with_file_name(format!("{stem}.{name}"));
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let number = |field: &str| match field.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
        None => field.parse().unwrap(),
    };
    let mut digest = gpuinstr_emulator::Digest::default();
    let mut row = Vec::new();
    for line in std::io::BufReader::new(file).lines().skip(1) {
        row.clear();
        row.extend(line.unwrap().split('\t').map(number));
        if row[0] == id {
            digest.add(&pick(&row));
        }
    }
    (digest.count, format!("{:#018x}", digest.fnv1a))
}

/// The buffers `many_accesses` says it allocated: (base, bytes) of its
/// input and output, from its first line.
fn buffers_of(output: &str, threads: u64) -> [(u64, u64); 2] {
    let words: Vec<&str> = output.lines().next().unwrap().split_whitespace().collect();
    let address = |word: &str| u64::from_str_radix(word.trim_start_matches("0x"), 16).unwrap();
    [(address(words[2]), 4 << 20), (address(words[4]), 4 * threads)]
}

/// What `command` printed and its peak resident memory (KiB).
fn output_and_peak(mut command: std::process::Command) -> (Output, i64) {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    // Reaped below by wait4, which also gives its peak memory.
    #[allow(clippy::zombie_processes)]
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let read = |mut from: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            from.read_to_end(&mut bytes).unwrap();
            bytes
        })
    };
    let stdout = read(Box::new(child.stdout.take().unwrap()));
    let stderr = read(Box::new(child.stderr.take().unwrap()));
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for our own child, filling the two places given.
    let waited = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(waited, child.id() as i32, "wait4: {}", std::io::Error::last_os_error());
    let output = Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    (output, usage.ru_maxrss)
}

/// `many_accesses` (tests/inputs/runtime) built, and its runs.
struct ManyRecords {
    dir: PathBuf,
    original: Original,
    target: &'static str,
}

/// What one run of a tool on `many_accesses` gave and cost.
struct RingRun {
    /// Records the dispatch's file holds, and whether they are the
    /// original's (digests agree).
    delivered: u64,
    expected: u64,
    equal: bool,
    /// The dispatch's report entry.
    dispatch: Value,
    seconds: f64,
    /// The program's peak resident memory (KiB), host part and emulated
    /// device included.
    peak_kib: i64,
}

impl ManyRecords {
    fn new(name: &str) -> Self {
        let target = "gfx90a";
        let dir = test_directory(name);
        let program = hip_build("runtime/many_accesses.hip", target, &dir, "many_accesses", &[]);
        let app = load::load_for_target(&program, Some(target)).unwrap().code_objects.remove(0);
        let original = Original { app, program, output: String::new(), dispatches: Vec::new() };
        ManyRecords { dir, original, target }
    }

    /// The original's run with digests of its accesses and EXEC history:
    /// what it printed and the log of the kernel's dispatch.
    fn original(&self, arguments: &[&str]) -> (String, Value) {
        let log = self.dir.join("original.jsonl");
        let _ = std::fs::remove_file(&log);
        let run = Run {
            dispatch_log: Some(log.clone()),
            dispatch_log_exec: vec!["S_AND_SAVEEXEC_B64".into()],
            dispatch_log_accesses: true,
            dispatch_log_digests: true,
            ..run_on(self.target)
        };
        let arguments: Vec<std::ffi::OsString> = arguments.iter().map(Into::into).collect();
        let output = run.command(self.original.program.as_os_str(), &arguments).output().unwrap();
        let printed = succeeded(output, "the original");
        let kernel = arguments[0].to_str().unwrap();
        let logged = dispatch_log(&log).into_iter().find(|d| d["kernel"].as_str().unwrap().contains(kernel));
        (printed, logged.expect("the kernel's dispatch"))
    }

    /// `program arguments` with `host` and rings as `ring` says, the
    /// dispatch logged as `logged`; its file `file` compared with the
    /// original's `digest`, each row's numbers picked by `pick` (given how
    /// to move an address of this run's buffers to the original's).
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        program: &Path,
        host: &Path,
        arguments: &[&str],
        ring: RingChoice,
        (printed, logged): &(String, Value),
        (file, digest): (Option<&str>, &str),
        pick: impl Fn(&[u64], &dyn Fn(u64) -> u64) -> [u64; 4],
    ) -> RingRun {
        let report_path = self.dir.join(format!("{}.json", host.file_stem().unwrap().to_string_lossy()));
        let run = Run {
            tool_host: Some(host.to_path_buf()),
            ring_bytes: Some(ring.bytes),
            drop_when_ring_full: ring.drop_when_full,
            report: Some(report_path.clone()),
            ..run_on(self.target)
        };
        let arguments: Vec<std::ffi::OsString> = arguments.iter().map(Into::into).collect();
        let started = std::time::Instant::now();
        let (output, peak_kib) = output_and_peak(run.command(program.as_os_str(), &arguments));
        let seconds = started.elapsed().as_secs_f64();
        let traced = succeeded(output, "the instrumented program");
        assert_eq!(printed.lines().nth(1), traced.lines().nth(1), "the program's result");
        let threads: u64 = arguments.get(2).map_or(65536, |t| t.to_str().unwrap().parse().unwrap());
        let (before, after) = (buffers_of(printed, threads), buffers_of(&traced, threads));
        let moved = |address: u64| {
            let k = after.iter().position(|(base, bytes)| (*base..base + bytes).contains(&address));
            let k = k.unwrap_or_else(|| panic!("{address:#x} is in neither buffer {after:x?}"));
            address - after[k].0 + before[k].0
        };
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
        let dispatch = report["dispatches"].as_array().unwrap().iter().find(|d| d["kernel"] == logged["kernel"]);
        let dispatch = dispatch.expect("the kernel's dispatch in the report").clone();
        let id = dispatch["id"].as_u64().unwrap();
        let expected = logged_digest(logged, digest);
        let (delivered, equal) = match file {
            Some(file) => {
                let delivered = file_digest(&report_path, file, id, |row| pick(row, &moved));
                (delivered.0, delivered == expected)
            }
            // A host part that writes no file: its count only.
            None => {
                let counted = dispatch["tool"]["records"].as_u64().unwrap();
                (counted, counted == expected.0)
            }
        };
        RingRun { delivered, expected: expected.0, equal, dispatch, seconds, peak_kib }
    }

    /// The memory tracer (its ring, or `tool` for another) on `gather`.
    fn memory_tracer(&self, tool: &Instrumented, rounds: &str, threads: &str, ring: RingChoice) -> RingRun {
        let arguments = ["gather", rounds, threads];
        let original = self.original(&arguments);
        let pick = |r: &[u64], moved: &dyn Fn(u64) -> u64| [r[1], r[2], r[3], moved(r[4])];
        let file = (tool.host.to_string_lossy().contains("tracer").then_some("memory-trace.tsv"), "access_digest");
        self.run(&tool.program, &tool.host, &arguments, ring, &original, file, pick)
    }

    /// Branch divergence on `diverge`.
    fn branch_divergence(&self, rounds: &str, threads: &str, ring_bytes: u64) -> RingRun {
        let arguments = ["diverge", rounds, threads];
        let original = self.original(&arguments);
        let tool = instrument_with("branch-divergence", &self.original, &self.dir);
        let pick = |r: &[u64], _: &dyn Fn(u64) -> u64| [r[2], r[3], r[4], r[5]];
        let file = (Some("branch-records.tsv"), "exec_digest");
        self.run(&tool.program, &tool.host, &arguments, RingChoice::waiting(ring_bytes), &original, file, pick)
    }
}

/// Host memory per ring, and whether a full ring drops records.
#[derive(Clone, Copy)]
struct RingChoice {
    bytes: u64,
    drop_when_full: bool,
}

impl RingChoice {
    fn waiting(bytes: u64) -> Self {
        RingChoice { bytes, drop_when_full: false }
    }
}

/// One dispatch of millions of lane accesses (the `gather` of
/// tests/inputs/runtime/many_accesses.hip: 65,536 work-items of 80 loads
/// and a store, 5,308,416 accesses) through a ring of 1 MiB (43,690
/// records: the hooks wait for the runtime a hundred times over): the
/// memory tracer's file holds every access the emulated device logged for
/// the original, in its order (their count and order-sensitive digest
/// agree, addresses moved by where each run's buffers lie), and the
/// dispatch's report counts them. Then branch divergence on the `diverge`
/// loop (16,384 work-items, 400 rounds of a branch whose side depends on
/// the data: 102,400 wavefront executions, most of them divergent): its
/// file holds the original's EXEC history around every branch, in order.
/// The full-size run (52 million accesses) is `scripts/bench-rings.sh`.
#[test]
fn rings_deliver_every_one_of_millions_of_records_in_order() {
    let many = ManyRecords::new("many-records");
    let tracer = instrument_with("memory-tracer", &many.original, &many.dir);
    let traced = many.memory_tracer(&tracer, "80", "65536", RingChoice::waiting(1 << 20));
    assert_eq!(traced.expected, 65536 * 81, "the original's accesses");
    assert!(traced.equal, "the trace is the emulator's access log, in order");
    assert_eq!(traced.delivered, traced.expected);
    assert_eq!(traced.dispatch["tool"]["records"], traced.expected);
    assert!(traced.dispatch["problems"].as_array().unwrap().is_empty(), "{}", traced.dispatch);

    let branches = many.branch_divergence("400", "16384", 1 << 20);
    assert!(branches.expected >= 16384 / 64 * 400, "a branch a round per wavefront: {}", branches.expected);
    assert!(branches.equal, "the branch records are the emulator's EXEC history, in order");
    let divergent = branches.dispatch["tool"]["divergent"].as_u64().unwrap();
    assert!(divergent > branches.expected / 2, "{divergent} of {} executions divergent", branches.expected);
}

/// The full-size run `scripts/bench-rings.sh` makes (ignored by `cargo
/// test`; minutes): one dispatch of ROUNDS (default 800) loads and a store
/// by each of 65,536 work-items, 52,494,336 lane accesses, traced through
/// the default ring (64 MiB) and through a 4 MiB one, then by the memory
/// tracer as it was before rings (a 2^20-record buffer copied after the
/// dispatch, tests/inputs/tools/buffered-tracer.hip); and branch
/// divergence on `diverge` with BRANCH_ROUNDS (default 1,000) rounds.
/// Prints a table of records delivered, seconds and peak memory.
#[test]
#[ignore]
fn rings_at_full_size() {
    let rounds = std::env::var("ROUNDS").unwrap_or_else(|_| "800".into());
    let branch_rounds = std::env::var("BRANCH_ROUNDS").unwrap_or_else(|_| "1000".into());
    let many = ManyRecords::new("rings-at-full-size");
    let row = |what: &str, run: &RingRun| {
        println!(
            "| {what} | {} | {} | {} | {:.1} | {} |",
            run.expected,
            run.delivered,
            if run.equal { "yes" } else { "no" },
            run.seconds,
            run.peak_kib / 1024
        );
    };
    println!("| run | records made | delivered | equal to the emulator's | seconds | peak MiB |");
    println!("|---|---:|---:|---|---:|---:|");
    let tracer = instrument_with("memory-tracer", &many.original, &many.dir);
    for (what, bytes) in [("memory tracer, 4 MiB ring", 4u64 << 20), ("memory tracer, 64 MiB ring", 64 << 20)] {
        let run = many.memory_tracer(&tracer, &rounds, "65536", RingChoice::waiting(bytes));
        assert!(run.equal, "{what}");
        row(what, &run);
    }
    // The 4 MiB ring again, dropping what does not fit instead of waiting:
    // what arrives and what the report counts as dropped add up.
    let dropping = RingChoice { bytes: 4 << 20, drop_when_full: true };
    let run = many.memory_tracer(&tracer, &rounds, "65536", dropping);
    let ring = run.dispatch["globals"].as_array().unwrap().iter().find(|g| g["name"] == "Trace").unwrap().clone();
    let dropped = ring["dropped"].as_u64().unwrap();
    assert_eq!(run.delivered + dropped, run.expected, "delivered and dropped: {ring}");
    row(&format!("memory tracer, 4 MiB ring, `--ring-full drop` ({dropped} dropped, counted)"), &run);
    // The same ring with a host part that only counts: the streaming
    // alone, without the tracer's file of 1.7 GB.
    let counting = host_part_of(
        "counting",
        r#"#include <map>
std::map<uint64_t, uint64_t> Seen;
extern "C" void gpuinstr_tool_records(const gpuinstr_records *R) {
  size_t Count = 0;
  gpuinstr_records_data(R, &Count, nullptr);
  Seen[gpuinstr_records_dispatch_id(R)] += Count;
}
extern "C" void gpuinstr_tool_dispatch(gpuinstr_dispatch *D) {
  gpuinstr_report_u64(D, "records", Seen[gpuinstr_dispatch_id(D)]);
}
"#,
        &many.dir,
    );
    let counted = Instrumented { host: counting, ..instrument_with("memory-tracer", &many.original, &many.dir) };
    let run = many.memory_tracer(&counted, &rounds, "65536", RingChoice::waiting(64 << 20));
    assert!(run.equal, "the counting host part");
    row("memory tracer, 64 MiB ring, a host part that only counts", &run);
    let device = build_tool(Compiler::Hipcc, &input("tools/buffered-tracer.hip"), "-O3", &many.dir);
    let plan = Plan::load(&repo().join("hook-sdk/examples/memory-tracer/plan.toml")).unwrap();
    let buffered = Instrumented {
        program: instrumented_with(&many.original.program, &device, &plan, &InstrumentOptions::default(), "buffered"),
        host: compile_host_part(&input("tools/buffered-tracer-host.cpp"), many.dir.join("libbuffered-tracer-host.so")),
        plan,
        device,
        plan_file: repo().join("hook-sdk/examples/memory-tracer/plan.toml"),
    };
    let run = many.memory_tracer(&buffered, &rounds, "65536", RingChoice::waiting(1));
    row("memory tracer before rings (2^20-record buffer)", &run);
    let run = many.branch_divergence(&branch_rounds, "65536", 64 << 20);
    assert!(run.equal, "branch divergence");
    row("branch divergence, 64 MiB ring", &run);
}

/// A record buffer (`GPUINSTR_RECORDS(Trace, TraceCount)` in the memory
/// tracer as it was before rings, tests/inputs/tools/buffered-tracer.hip) comes back as far as its count says it was written: the
/// instrumented code object lists it with its count, the collect kernel
/// copies only those records and resets only the count (the device runs a
/// few thousand wave instructions, not the hundreds of thousands the whole
/// 16 MiB would take), and a host part sees zeros past them even after a
/// dispatch that wrote more: no earlier dispatch's records show through.
#[test]
fn record_buffers_come_back_as_far_as_they_were_written() {
    use gpuinstr::stages::load::instrumented::{self, Records};
    let target = "gfx90a";
    let dir = test_directory("records");
    let original = original(target, &dir);
    let device = build_tool(Compiler::Hipcc, &input("tools/buffered-tracer.hip"), "-O3", &dir);
    let plan = Plan::load(&repo().join("hook-sdk/examples/memory-tracer/plan.toml")).unwrap();
    let tool = instrumented(&original.program, &device, &plan);
    let output = load::load_for_target(&tool, Some(target)).unwrap().code_objects.remove(0);
    let trace = instrumented::tool_globals(&output).unwrap().into_iter().find(|g| g.tool_name == "Trace").unwrap();
    assert_eq!(trace.records, Some(Records { count: "TraceCount".into(), record_bytes: 16 }));

    let host = host_part_of(
        "records-probe",
        "extern \"C\" void gpuinstr_tool_dispatch(gpuinstr_dispatch *D) {\n\
           size_t Size = 0;\n\
           const unsigned char *Trace = static_cast<const unsigned char *>(gpuinstr_global(D, \"Trace\", &Size));\n\
           uint64_t Count = 0;\n\
           gpuinstr::read(D, \"TraceCount\", Count);\n\
           const uint64_t Kept = Count * 16 < Size ? Count * 16 : Size;\n\
           uint64_t Past = 0, Empty = 0;\n\
           for (uint64_t B = Kept; B < Size; ++B) Past += Trace[B] != 0;\n\
           for (uint64_t R = 0; R < Kept / 16; ++R) Empty += reinterpret_cast<const uint64_t *>(Trace)[2 * R] == 0;\n\
           gpuinstr_report_u64(D, \"records\", Count);\n\
           gpuinstr_report_u64(D, \"nonzero_past_them\", Past);\n\
           gpuinstr_report_u64(D, \"records_without_address\", Empty);\n\
         }\n",
        &dir,
    );
    let log = dir.join("instrumented.jsonl");
    let _ = std::fs::remove_file(&log);
    let run = Run { tool_host: Some(host), dispatch_log: Some(log.clone()), ..run_on(target) };
    let (report, _) = run_reported_with(run, &tool, &[], &original.output, &dir);
    let records: Vec<u64> =
        matched(&report, &original.dispatches).iter().map(|d| d["tool"]["records"].as_u64().unwrap()).collect();
    assert!(
        records.windows(2).any(|w| w[1] < w[0]),
        "a dispatch writes fewer records than the one before: {records:?}"
    );
    for dispatch in report["dispatches"].as_array().unwrap() {
        assert_eq!(dispatch["tool"]["nonzero_past_them"], 0, "{dispatch}");
        assert_eq!(dispatch["tool"]["records_without_address"], 0, "{dispatch}");
    }
    // What the collect kernel ran on the device, per dispatch.
    let collects: Vec<u64> = dispatch_log(&log)
        .iter()
        .filter(|d| d["kernel"] == "gpuinstr_collect")
        .map(|d| d["per_address"].as_array().unwrap().iter().map(|e| e[1].as_u64().unwrap()).sum())
        .collect();
    assert_eq!(collects.len(), records.len());
    for (collected, records) in collects.iter().zip(&records) {
        assert!(*collected < 2_000 + 10 * records, "{collected} wave instructions to copy {records} records");
    }
}

/// Code built with `-g`: every point is named `file:line` from the DWARF
/// line table, and the branch divergence report names each branch by the
/// line llvm-addr2line gives for its address in the original code object.
#[test]
fn points_of_code_built_with_g_are_named_by_their_source_lines() {
    let target = "gfx90a";
    let dir = test_directory("source-lines");
    let program = hip_build("runtime/counted.hip", target, &dir, "counted-g", &["-g"]);
    let original = original_of(program, target, &dir);
    let device = build_tool(Compiler::Hipcc, &example("branch-divergence"), "-O3", &dir);
    let plan = Plan::load(&repo().join("hook-sdk/examples/branch-divergence/plan.toml")).unwrap();
    let bytes = std::fs::read(&original.program).unwrap();
    let (out, instrumented) = instrument_file(
        &Tool::load(&device).unwrap(),
        &original.program,
        &bytes,
        &plan,
        &Registry::with_builtins(),
        &InstrumentOptions::default(),
        None,
    )
    .unwrap();
    let points = instrumented.code_objects[0].points;
    assert_eq!(
        serde_json::to_value(&instrumented.code_objects[0].source_lines).unwrap(),
        serde_json::json!({ "status": "named", "named": points, "points": points })
    );
    let program = original.program.with_extension("instrumented");
    std::fs::write(&program, out).unwrap();
    std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let inspected = gpuinstr::inspect::render_text(&gpuinstr::inspect::inspect(&program, Some(target)).unwrap());
    assert!(inspected.contains(&format!("    {points} of the points named file:line\n")), "{inspected}");
    let host = host_part("branch-divergence", &dir);
    let (report, stderr) = run_reported(&program, target, Some(&host), &original.output, &dir);

    // llvm-addr2line's names for the original's addresses.
    let code_object = dir.join("counted-g.co");
    std::fs::write(&code_object, &original.app.bytes).unwrap();
    let mut branches: Vec<(u64, String)> = matched(&report, &original.dispatches)
        .iter()
        .flat_map(|d| d["tool"]["branches"].as_array().unwrap())
        .map(|b| (hex_address(&b["address"]), b["location"].as_str().expect("a location").to_string()))
        .collect();
    branches.sort();
    branches.dedup();
    assert!(branches.len() >= 2, "{branches:?}");
    let named = run_ok(
        gpuinstr::toolchain::llvm_tool("llvm-addr2line")
            .arg("-e")
            .arg(&code_object)
            .args(branches.iter().map(|(address, _)| format!("{address:#x}"))),
    );
    let expected: Vec<String> =
        String::from_utf8_lossy(&named.stdout).lines().map(|l| l.split(' ').next().unwrap().to_string()).collect();
    let located: Vec<String> = branches.iter().map(|(_, location)| location.clone()).collect();
    assert_eq!(located, expected);
    assert!(located.iter().all(|l| l.contains("counted.hip:")), "{located:?}");
    // The summary at exit names the divergent branches by their lines.
    assert!(stderr.lines().any(|l| l.contains(" divergent  ") && l.contains("counted.hip:")), "{stderr}");
}

/// Selective instrumentation: the counter's program instrumented with its
/// originals kept runs unchanged without the runtime (HIP launches the
/// originals), reports every dispatch with the counts of the full run when
/// nothing narrows the selection, and with a selection only the chosen
/// dispatches report, each with the count of that dispatch in the full run.
#[test]
fn selective_runs_report_only_the_chosen_dispatches_with_the_full_runs_counts() {
    let target = "gfx90a";
    let dir = test_directory("selective");
    let original = original(target, &dir);
    let tool = instrument_with("instruction-counter", &original, &dir);
    let options = InstrumentOptions { keep_originals: true, ..InstrumentOptions::default() };
    let program = instrumented_with(&original.program, &tool.device, &tool.plan, &options, "selective");
    let expected: Vec<u64> =
        original.dispatches.iter().map(|logged| expected_count(&original.app, &tool.plan, logged)).collect();
    let kernels: Vec<&str> = original.dispatches.iter().map(|d| d["kernel"].as_str().unwrap()).collect();
    assert_eq!(kernels.iter().filter(|k| k.contains("scale")).count(), 3);

    // Every original function is still there byte for byte (the copies'
    // descriptors move the code; these kernels have no pc-relative
    // operands), and each kernel has its instrumented copy beside it.
    let output = load::load_for_target(&program, Some(target)).unwrap().code_objects.remove(0);
    for function in &lift(&original.app).unwrap().functions {
        let symbol = output.symbols.iter().find(|s| s.name == function.name).expect("the original's symbol");
        let bytes = output.bytes_at(symbol.value, function.size).map(<[u8]>::to_vec);
        assert_eq!(
            bytes,
            original.app.bytes_at(function.address, function.size).map(<[u8]>::to_vec),
            "{}",
            function.name
        );
    }
    let verified = gpuinstr::verify::verify(&original.app, &output).unwrap();
    assert!(verified.ok() && verified.regions > 0, "{}", verified.render_text());
    let names: Vec<&str> = output.kernels.iter().map(|k| k.name()).collect();
    for kernel in &original.app.kernels {
        assert!(names.contains(&format!("{}.gpuinstr", kernel.name()).as_str()), "{names:?}");
    }

    // The originals are what HIP launches: without the runtime, nothing counts.
    let run = Run { runtime: None, ..run_on(target) };
    assert_eq!(succeeded(run.command(program.as_os_str(), &[]).output().unwrap(), "no runtime"), original.output);

    // Each case: the selection, the program (statically instrumented, or
    // the original in dynamic mode), and the dispatches of the full run it picks.
    let dynamic = Run {
        dynamic: Some((tool.device.clone(), tool.plan_file.clone())),
        cache: Some(PathBuf::from("none")),
        select_kernel: vec!["scale".into()],
        select_first: Some(2),
        ..run_on(target)
    };
    let cases: [(Run, &Path, Vec<usize>); 5] = [
        (run_on(target), &program, vec![0, 1, 2, 3]),
        (Run { select_kernel: vec!["scale".into()], select_first: Some(2), ..run_on(target) }, &program, vec![0, 1]),
        (Run { select_every: Some(2), ..run_on(target) }, &program, vec![0, 2, 3]),
        (Run { select_kernel: vec!["rowSums".into(), "nothing".into()], ..run_on(target) }, &program, vec![2]),
        (dynamic, &original.program, vec![0, 1]),
    ];
    for (run, program, chosen) in cases {
        let described = format!(
            "{:?} {:?} {:?} dynamic {}",
            run.select_kernel,
            run.select_first,
            run.select_every,
            run.dynamic.is_some()
        );
        let run = Run { tool_host: Some(tool.host.clone()), ..run };
        let (report, stderr) = run_reported_with(run, program, &[], &original.output, &dir);
        let reported = report["dispatches"].as_array().unwrap();
        let facts: Vec<(&str, u64)> = reported
            .iter()
            .map(|d| (d["kernel"].as_str().unwrap(), d["tool"]["instructions"].as_u64().unwrap()))
            .collect();
        let full: Vec<(&str, u64)> = chosen.iter().map(|&k| (kernels[k], expected[k])).collect();
        assert_eq!(facts, full, "{described}: {stderr}");
        let selection = &report["selection"];
        assert_eq!(selection["selected"], chosen.len() as u64, "{described}");
        assert_eq!(selection["not_selected"], (4 - chosen.len()) as u64, "{described}");
        let selective = format!("gpuinstr: selective: {} of 4 dispatches", chosen.len());
        assert!(stderr.contains(&selective), "{described}: {stderr}");
    }
}

/// What a report says about its dispatches, for comparing two runs: kernel,
/// shape and what the tool reported, in order.
fn dispatch_facts(report: &Value) -> Vec<Value> {
    let facts = |d: &Value| serde_json::json!([d["kernel"], d["grid_size"], d["workgroup_size"], d["tool"]]);
    report["dispatches"].as_array().unwrap().iter().map(facts).collect()
}

/// Dynamic mode: the original program, instrumented in its own process as
/// it loads its code objects, reports what the statically instrumented one
/// does, with a cold cache and then from the cache; HIP's own kernels are
/// left as they are, and said so.
#[test]
fn dynamic_mode_reports_what_static_instrumentation_reports() {
    let target = "gfx90a";
    let dir = test_directory("dynamic");
    let original = original(target, &dir);
    let tool = instrument_with("instruction-counter", &original, &dir);
    let (static_report, _) = run_reported(&tool.program, target, Some(&tool.host), &original.output, &dir);
    assert_eq!(dispatch_facts(&static_report).len(), 4);
    let cache = dir.join("cache");
    for source in ["instrumented", "cache"] {
        let run = Run {
            dynamic: Some((tool.device.clone(), tool.plan_file.clone())),
            cache: Some(cache.clone()),
            tool_host: Some(tool.host.clone()),
            ..run_on(target)
        };
        let (report, stderr) = run_reported_with(run, &original.program, &[], &original.output, &dir);
        assert_eq!(dispatch_facts(&report), dispatch_facts(&static_report), "{source}: {stderr}");
        assert_eq!(report["tool"], static_report["tool"], "{source}: the run's totals");
        let dynamic = report["dynamic"].as_array().unwrap();
        let sources: Vec<&str> = dynamic.iter().map(|d| d["source"].as_str().unwrap()).collect();
        assert_eq!(sources.iter().filter(|s| **s == source).count(), 1, "{source}: {dynamic:?}");
        let left = dynamic.iter().find(|d| d["source"] == "as it is").expect("HIP's own kernels");
        assert_eq!(left["note"], "HIP's own kernels (fills and copies)");
        assert!(stderr.contains("left as it is"), "{stderr}");
    }

    // What the cache gives back runs on the GPU: an entry altered on disk
    // is refused with a warning and made again, never loaded.
    let entry = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "hsaco"))
        .expect("the instrumented code object in the cache");
    let mut altered = std::fs::read(&entry).unwrap();
    let last = altered.len() - 1;
    altered[last] ^= 0x40;
    std::fs::write(&entry, &altered).unwrap();
    let report_path = dir.join("report.json");
    let run = || Run {
        dynamic: Some((tool.device.clone(), tool.plan_file.clone())),
        cache: Some(cache.clone()),
        tool_host: Some(tool.host.clone()),
        report: Some(report_path.clone()),
        ..run_on(target)
    };
    let output = run().command(original.program.as_os_str(), &[]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(succeeded(output, "with an altered cache entry"), original.output, "{stderr}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    assert_eq!(dispatch_facts(&report), dispatch_facts(&static_report), "{stderr}");
    let warnings = report["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].as_str().unwrap().contains("does not match the digest written with it"), "{warnings:?}");
    let sources: Vec<&str> =
        report["dynamic"].as_array().unwrap().iter().map(|d| d["source"].as_str().unwrap()).collect();
    assert!(sources.contains(&"instrumented") && !sources.contains(&"cache"), "{sources:?}");
    assert_ne!(std::fs::read(&entry).unwrap(), altered, "the entry is made again");

    // A cache others can write is refused before the program runs.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let output = run().command(original.program.as_os_str(), &[]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("can be written by others (mode 777)"), "{stderr}");
    assert!(output.stdout.is_empty(), "the program did not run");
}

/// Dynamic mode covers code loaded at run time: a program that loads a code
/// object file with `hipModuleLoad` (never instrumented on disk) reports,
/// for its own kernel and the module's, the counts the emulator gives; the
/// program instrumented statically reports its own and warns of the
/// module's.
#[test]
fn dynamic_mode_instruments_a_code_object_loaded_with_hip_module_load() {
    let target = "gfx90a";
    let dir = test_directory("dynamic-module");
    let module = hip_build(
        "device/module_kernels.hip",
        target,
        &dir,
        &format!("module_kernels-{target}.co"),
        &[&["--genco"][..], gpuinstr::toolchain::hipcc_non_uniform_workgroups()].concat(),
    );
    let program = hip_build("device/module_load.hip", target, &dir, &format!("module_load-{target}"), &[]);
    let code_objects: Vec<CodeObject> = [&module, &program]
        .iter()
        .map(|file| load::load_for_target(file, Some(target)).unwrap().code_objects.remove(0))
        .collect();
    let of_kernel = |name: &str| {
        code_objects.iter().find(|c| c.kernels.iter().any(|k| k.name() == name)).expect("a kernel of the program")
    };
    let log = dir.join("original.jsonl");
    let run = Run { dispatch_log: Some(log.clone()), ..run_on(target) };
    let expected_output =
        succeeded(run.command(program.as_os_str(), &[module.as_os_str().to_owned()]).output().unwrap(), "the original");
    let known: Vec<&str> = code_objects.iter().flat_map(|c| c.kernels.iter().map(|k| k.name())).collect();
    let logged: Vec<Value> =
        dispatch_log(&log).into_iter().filter(|d| known.contains(&d["kernel"].as_str().unwrap())).collect();
    assert!(logged.len() >= 4, "{logged:?}");

    let tool_device = build_tool(Compiler::Hipcc, &example("instruction-counter"), "-O3", &dir);
    let plan_file = repo().join("hook-sdk/examples/instruction-counter/plan.toml");
    let plan = Plan::load(&plan_file).unwrap();
    let host = host_part("instruction-counter", &dir);
    let run = Run {
        dynamic: Some((tool_device.clone(), plan_file)),
        cache: Some(PathBuf::from("none")),
        tool_host: Some(host.clone()),
        ..run_on(target)
    };
    let (report, stderr) = run_reported_with(run, &program, &[&module], &expected_output, &dir);
    let dispatches = report["dispatches"].as_array().unwrap();
    assert_eq!(dispatches.len(), logged.len(), "{stderr}");
    let mut module_dispatches = 0;
    for (k, (reported, logged)) in dispatches.iter().zip(&logged).enumerate() {
        let kernel = logged["kernel"].as_str().unwrap();
        assert_eq!(reported["kernel"], kernel, "dispatch {k}");
        assert_eq!(reported["grid_size"], logged["grid_size"], "dispatch {k}");
        let expected = expected_count(of_kernel(kernel), &plan, logged);
        assert_eq!(reported["tool"], serde_json::json!({ "instructions": expected }), "dispatch {k} ({kernel})");
        module_dispatches += usize::from(std::ptr::eq(of_kernel(kernel), &code_objects[0]));
    }
    assert!(module_dispatches >= 3, "the module's kernels were dispatched and counted");

    // Statically, only the program is instrumented: its own dispatches are
    // read, and the module's, which no tool saw, are named and counted in the
    // report and its summary, never passed over quietly.
    let instrumented_program = instrumented(&program, &tool_device, &plan);
    let report_path = dir.join("static.json");
    let run = Run { tool_host: Some(host), report: Some(report_path.clone()), ..run_on(target) };
    let output = run.command(instrumented_program.as_os_str(), &[module.as_os_str().to_owned()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(succeeded(output, "statically instrumented"), expected_output, "{stderr}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    let mut module_kernels = std::collections::BTreeMap::<String, u64>::new();
    for logged in &logged {
        if std::ptr::eq(of_kernel(logged["kernel"].as_str().unwrap()), &code_objects[0]) {
            *module_kernels.entry(logged["kernel"].as_str().unwrap().into()).or_default() += 1;
        }
    }
    assert_eq!(uninstrumented_dispatches(&report), module_kernels, "{stderr}");
    let read = report["dispatches"].as_array().unwrap().len() as u64;
    assert_eq!(read + module_dispatches as u64, logged.len() as u64);
    assert_eq!(report["warnings"], serde_json::json!([]), "nothing went wrong");
    let total: u64 = module_kernels.values().sum();
    let line = format!("gpuinstr: {total} dispatches of {} kernels ran no instrumented code", module_kernels.len());
    assert!(stderr.contains(&line) && stderr.contains("or in dynamic mode)"), "{stderr}");
}

/// Every way HIP loads code, statically instrumented: a module file loaded
/// with `hipModuleLoad`, its bytes with `hipModuleLoadData` and
/// `hipModuleLoadDataEx`, and the program's own fat binary, with HIP
/// loading code objects at start and lazily (`HIP_ENABLE_DEFERRED_LOADING`):
/// every dispatch reports the instruction counter's count the emulator
/// gives. (The counter's `Counter` is `__managed__`: where HIP loads a
/// module that defines a managed variable it points the variable at memory
/// of its own, and the runtime read the storage the code object holds, 0,
/// while the payloads counted in HIP's.)
#[test]
fn every_way_hip_loads_code_reports_what_the_emulator_counts() {
    let target = "gfx90a";
    let dir = test_directory("module-load-ways");
    let module = hip_build(
        "device/module_kernels.hip",
        target,
        &dir,
        &format!("module_kernels-{target}.co"),
        &[&["--genco"][..], gpuinstr::toolchain::hipcc_non_uniform_workgroups()].concat(),
    );
    let program = hip_build("device/module_load_ways.hip", target, &dir, &format!("module_load_ways-{target}"), &[]);
    let code_objects: Vec<CodeObject> = [&module, &program]
        .iter()
        .map(|file| load::load_for_target(file, Some(target)).unwrap().code_objects.remove(0))
        .collect();
    let log = dir.join("original.jsonl");
    let _ = std::fs::remove_file(&log);
    let run = Run { dispatch_log: Some(log.clone()), ..run_on(target) };
    let expected_output =
        succeeded(run.command(program.as_os_str(), &[module.as_os_str().to_owned()]).output().unwrap(), "the original");
    assert_eq!(expected_output, "PASSED: 0 wrong\n");
    let known: Vec<&str> = code_objects.iter().flat_map(|c| c.kernels.iter().map(|k| k.name())).collect();
    let logged: Vec<Value> =
        dispatch_log(&log).into_iter().filter(|d| known.contains(&d["kernel"].as_str().unwrap())).collect();
    assert_eq!(logged.len(), 4, "three modules' iota and the program's add_one: {logged:?}");

    let tool = build_tool(Compiler::Hipcc, &example("instruction-counter"), "-O3", &dir);
    let plan = Plan::load(&repo().join("hook-sdk/examples/instruction-counter/plan.toml")).unwrap();
    let instrumented_module = instrumented(&module, &tool, &plan);
    let instrumented_program = instrumented(&program, &tool, &plan);
    let host = host_part("instruction-counter", &dir);
    for deferred in ["0", "1"] {
        let report_path = dir.join(format!("report-deferred-{deferred}.json"));
        let run = Run { tool_host: Some(host.clone()), report: Some(report_path.clone()), ..run_on(target) };
        let mut command = run.command(instrumented_program.as_os_str(), &[instrumented_module.as_os_str().to_owned()]);
        let output = command.env("HIP_ENABLE_DEFERRED_LOADING", deferred).output().unwrap();
        let (report, stderr) = reported(output, &report_path, &expected_output);
        let dispatches = report["dispatches"].as_array().unwrap();
        assert_eq!(dispatches.len(), logged.len(), "deferred {deferred}: {stderr}");
        for (k, (reported, logged)) in dispatches.iter().zip(&logged).enumerate() {
            let kernel = logged["kernel"].as_str().unwrap();
            assert_eq!(reported["kernel"], kernel, "dispatch {k}");
            let app = code_objects.iter().find(|c| c.kernels.iter().any(|k| k.name() == kernel)).unwrap();
            let expected = expected_count(app, &plan, logged);
            assert!(expected > 0);
            assert_eq!(
                reported["tool"],
                serde_json::json!({ "instructions": expected }),
                "deferred {deferred}, dispatch {k} ({kernel})"
            );
        }
        assert!(uninstrumented_dispatches(&report).is_empty(), "{stderr}");
    }
}

/// Each compressed offload bundle a program loads runs its own code. sid's
/// CoMGR (3.0, ROCm 7.0) caches what it unbundles under a key that is the
/// same for every compressed bundle, so HIP ran the first bundle's code for
/// every later one, in the process and in every process after it
/// (hipBLASLt's f32 GEMM after a bf16 one: its kernel not found; here two
/// modules with a kernel of the same name, the second writing the first's
/// value). `gpuinstr-run` turns CoMGR's cache off unless the program's
/// environment chooses (`AMD_COMGR_CACHE`). HIP reads compressed bundles
/// from 6.2 on; with an older hipcc, which cannot write them, this test
/// says so and checks nothing.
#[test]
fn every_compressed_bundle_runs_its_own_code() {
    let target = "gfx90a";
    let help = hipcc().arg("--help").output().unwrap();
    if !String::from_utf8_lossy(&help.stdout).contains("--offload-compress") {
        eprintln!("this hipcc writes no compressed offload bundles (HIP reads them from 6.2): nothing to check");
        return;
    }
    let dir = test_directory("compressed-bundles");
    let modules: Vec<PathBuf> = [1, 2]
        .iter()
        .map(|tag| {
            let define = format!("-DTAG={tag}");
            let extra = [
                &["--genco", "--offload-compress", define.as_str()][..],
                gpuinstr::toolchain::hipcc_non_uniform_workgroups(),
            ]
            .concat();
            let module = hip_build("device/tagged_kernel.hip", target, &dir, &format!("tagged-{tag}.co"), &extra);
            assert_eq!(
                &std::fs::read(&module).unwrap()[..4],
                b"CCOB",
                "hipcc --offload-compress wrote no compressed bundle"
            );
            module
        })
        .collect();
    let program = hip_build("device/tagged_modules.hip", target, &dir, "tagged_modules", &[]);
    // A cache of this test's own: what another program left there cannot
    // decide the outcome.
    let cache = dir.join("comgr-cache");
    let _ = std::fs::remove_dir_all(&cache);
    let arguments: Vec<std::ffi::OsString> = modules.iter().map(|m| m.as_os_str().to_owned()).collect();
    for run in [run_on(target), Run { runtime: None, ..run_on(target) }] {
        let output = run.command(program.as_os_str(), &arguments).env("AMD_COMGR_CACHE_DIR", &cache).output().unwrap();
        assert_eq!(succeeded(output, "the program"), "module 1 wrote 1\nmodule 2 wrote 2\n");
    }
}

/// Dispatches of one code object on two streams with nothing between them
/// may run at the same time, and mix their tool data: each is flagged with
/// the other. A launch on the legacy default stream, which HIP makes wait
/// for both (a barrier on their signals), is not flagged, though it was
/// submitted while theirs were still in flight, and its count is the
/// emulator's (tests/inputs/runtime/streams.hip).
#[test]
fn only_dispatches_nothing_orders_are_flagged_as_overlapping() {
    let target = "gfx90a";
    let dir = test_directory("streams");
    let program = hip_build("runtime/streams.hip", target, &dir, "streams", &[]);
    let app = load::load_for_target(&program, Some(target)).unwrap().code_objects.remove(0);
    let log = dir.join("original.jsonl");
    let _ = std::fs::remove_file(&log);
    let run = Run { dispatch_log: Some(log.clone()), ..run_on(target) };
    let expected_output = succeeded(run.command(program.as_os_str(), &[]).output().unwrap(), "the original");
    let logged: Vec<Value> = dispatch_log(&log).into_iter().filter(|d| d["kernel"] == "_Z4fillPjji").collect();
    assert_eq!(logged.len(), 3);
    let tool = build_tool(Compiler::Hipcc, &example("instruction-counter"), "-O3", &dir);
    let plan = Plan::load(&repo().join("hook-sdk/examples/instruction-counter/plan.toml")).unwrap();
    let instrumented_program = instrumented(&program, &tool, &plan);
    let (report, stderr) = run_reported(&instrumented_program, target, None, &expected_output, &dir);
    let dispatches = report["dispatches"].as_array().unwrap();
    assert_eq!(dispatches.len(), 3, "{stderr}");
    let flagged = |k: usize, other: u64| {
        let problems = dispatches[k]["problems"].as_array().unwrap();
        problems.len() == 1
            && problems[0]
                .as_str()
                .unwrap()
                .starts_with(&format!("dispatches [{other}] of the same code object ran at the same time"))
    };
    assert!(flagged(0, 2) && flagged(1, 1), "the two streams' dispatches: {dispatches:?}");
    assert_eq!(dispatches[2]["problems"], serde_json::json!([]), "the default stream's waited for both");
    assert_eq!(dispatches[2]["globals"][0]["value"].as_u64(), Some(expected_count(&app, &plan, &logged[2])));
}

/// Dynamic mode gives an instrumented kernel the scratch its own
/// descriptor needs, not the original's that HIP writes into the packet
/// (it read the code object the program handed it): with default flags,
/// a kernel with no scratch and one with scratch of its own, each holding
/// every VGPR across a load (tests/inputs/runtime/held_across_a_load.hip),
/// get payloads that save live VGPRs in scratch memory, and over four
/// workgroups of four waves every example tool reports what the emulator
/// gives and the program's results stay. (Given the original's scratch,
/// each wave would write into the next one's, and the emulated device
/// stops a dispatch whose packet gives less than its descriptor needs.)
#[test]
fn dynamic_mode_gives_each_instrumented_kernel_the_scratch_it_needs() {
    let mut targets = vec!["gfx90a"];
    if gpuinstr::toolchain::LLVM_MAJOR >= 17 {
        targets.push("gfx942");
    }
    for target in targets {
        let dir = test_directory(&format!("held-across-a-load-{target}"));
        let program = hip_build("runtime/held_across_a_load.hip", target, &dir, "held", &[]);
        let original = original_dispatching(program, target, &dir, 2);
        for tool in EXAMPLE_TOOLS {
            let device = build_tool(Compiler::Hipcc, &example(tool), "-O3", &dir);
            let plan_file = repo().join("hook-sdk/examples").join(tool).join("plan.toml");
            let plan = Plan::load(&plan_file).unwrap();
            if tool == "memory-tracer" {
                // The case the test is for: payloads that save VGPRs in
                // scratch, in both kernels, one of which had scratch.
                let bytes = std::fs::read(&original.program).unwrap();
                let (_, file) = instrument_file(
                    &Tool::load(&device).unwrap(),
                    &original.program,
                    &bytes,
                    &plan,
                    &Registry::with_builtins(),
                    &InstrumentOptions::default(),
                    Some(target),
                )
                .unwrap();
                let report = &file.code_objects[0];
                assert!(report.spills.points >= 2, "{target}: {:?}", report.spills);
                let stacks: Vec<(u32, u32)> = ["_Z15heldAcrossALoadPiPKi", "_Z26heldAcrossALoadWithScratchPiPKii"]
                    .iter()
                    .map(|name| report.kernels.iter().find(|k| k.name == *name).unwrap().stack_bytes)
                    .collect();
                assert!(stacks[0].0 == 0 && stacks[0].1 > 0, "{target}: {stacks:?}");
                assert!(stacks[1].0 > 0 && stacks[1].1 > stacks[1].0, "{target}: {stacks:?}");
            }
            let run = Run {
                dynamic: Some((device, plan_file)),
                cache: Some(PathBuf::from("none")),
                tool_host: Some(host_part(tool, &dir)),
                ..run_on(target)
            };
            let (report, stderr) = run_reported_with(run, &original.program, &[], &original.output, &dir);
            assert!(stderr.contains("1 code objects instrumented as they loaded"), "{tool}: {stderr}");
            original.oracle().check(tool, &plan, &report, &dir.join("report.json"));
        }
    }
}

/// The CMake flow end to end: a HIP project builds its program and the
/// instruction counter (device and host parts) with `gpuinstr_add_tool`,
/// instruments the program with `gpuinstr_instrument`, and the instrumented
/// program runs under the runtime with the host part and reports the counts
/// the emulator gives.
#[test]
fn a_cmake_project_builds_instruments_runs_and_reports() {
    let target = "gfx90a";
    let dir = run_directory().join("cmake-flow");
    let (project, build) = (dir.join("project"), dir.join("build"));
    std::fs::create_dir_all(&project).unwrap();
    let link = gpuinstr_tests::gpuinstr_link();
    let tool = repo().join("hook-sdk/examples/instruction-counter");
    std::fs::write(
        project.join("CMakeLists.txt"),
        format!(
            "cmake_minimum_required(VERSION 3.20)\n\
             project(counted CXX)\n\
             find_package(GpuInstr REQUIRED PATHS \"{cmake}\" NO_DEFAULT_PATH)\n\
             gpuinstr_add_tool(counter SOURCES \"{tool}/tool.hip\" HOST \"{tool}/host.cpp\" OFFLOAD_ARCH gfx90a)\n\
             set_source_files_properties(\"{app}\" PROPERTIES LANGUAGE CXX)\n\
             add_executable(counted \"{app}\")\n\
             target_compile_options(counted PRIVATE -x hip --offload-arch=gfx90a)\n\
             target_link_options(counted PRIVATE --offload-arch=gfx90a)\n\
             gpuinstr_instrument(counted TOOL counter PLAN \"{tool}/plan.toml\")\n",
            cmake = repo().join("cmake").display(),
            tool = tool.display(),
            app = input("runtime/counted.hip").display(),
        ),
    )
    .unwrap();
    run_ok(
        std::process::Command::new("cmake")
            .env("TMPDIR", &dir)
            .arg("-S")
            .arg(&project)
            .arg("-B")
            .arg(&build)
            .arg(format!("-DGPUINSTR_PLUGIN={}", gpuinstr_tests::plugin().display()))
            .arg(format!("-DGPUINSTR_LINK={}", link.display()))
            .arg("-DCMAKE_CXX_COMPILER=hipcc"),
    );
    let built = run_ok(std::process::Command::new("cmake").arg("--build").arg(&build).env("TMPDIR", &dir));
    let log = String::from_utf8_lossy(&built.stdout);
    assert!(log.contains("gpuinstr: building the host part of tool counter"), "{log}");
    assert!(log.contains("gpuinstr: instrumenting counted with counter"), "{log}");

    let original = original_of(build.join("counted"), target, &dir);
    let plan = Plan::load(&tool.join("plan.toml")).unwrap();
    let host = build.join("libcounter-host.so");
    let (report, _) = run_reported(&build.join("instrumented/counted"), target, Some(&host), &original.output, &dir);
    for (k, (reported, logged)) in dispatches(&report, &original).iter().zip(&original.dispatches).enumerate() {
        let expected = expected_count(&original.app, &plan, logged);
        assert_eq!(reported["tool"], serde_json::json!({ "instructions": expected }), "dispatch {k}");
    }
}

/// A host part of the test's own (`source` after `#include <gpuinstr/host.h>`),
/// built as `libNAME.so` in `directory`.
fn host_part_of(name: &str, source: &str, directory: &Path) -> PathBuf {
    let file = directory.join(format!("{name}.cpp"));
    std::fs::write(&file, format!("#include <gpuinstr/host.h>\n{source}")).unwrap();
    compile_host_part(&file, directory.join(format!("lib{name}.so")))
}

/// The report's dispatches of kernels that ran no instrumented code, per kernel.
fn uninstrumented_dispatches(report: &Value) -> std::collections::BTreeMap<String, u64> {
    let listed = report.get("uninstrumented_dispatches").and_then(Value::as_array);
    listed
        .into_iter()
        .flatten()
        .map(|u| (u["kernel"].as_str().unwrap().to_string(), u["dispatches"].as_u64().unwrap()))
        .collect()
}

/// `hook-sdk/examples/TOOL/host.cpp` built as the shared library the runtime loads.
fn host_part(tool: &str, directory: &Path) -> PathBuf {
    // The block counter reports what the instruction counter does, with
    // its host part (hook-sdk/examples/block-counter/README.md).
    let host_of = if tool == "block-counter" { "instruction-counter" } else { tool };
    let source = repo().join("hook-sdk/examples").join(host_of).join("host.cpp");
    compile_host_part(&source, directory.join(format!("lib{tool}-host.so")))
}

/// `source` compiled to the shared library `output`, warnings as errors.
fn compile_host_part(source: &Path, output: PathBuf) -> PathBuf {
    run_ok(
        std::process::Command::new("c++")
            .args(["-shared", "-fPIC", "-std=c++17", "-Wall", "-Werror", "-I"])
            .arg(repo().join("hook-sdk/include"))
            .arg(source)
            .arg("-o")
            .arg(&output),
    );
    output
}

/// A library nobody here wrote and a program of ours that calls it.
struct LibraryCall<'a> {
    /// The file the program loads (its soname), in `directory`.
    library: &'a str,
    /// Where it is installed; also on LD_LIBRARY_PATH, after the
    /// instrumented copy's directory (the libraries it needs are there).
    directory: PathBuf,
    /// The program (under `tests/inputs`) and hipcc's arguments for it.
    program_source: &'a str,
    build: Vec<String>,
    /// The emulated GPU, and the processor of the library's code objects
    /// it runs (a feature setting or a generic target).
    target: &'a str,
    device_target: &'a str,
    /// Globs on the kernels the tools' plans select, when not every kernel
    /// (a library too large to instrument whole in a test).
    kernels: &'a [&'a str],
}

/// The example's plan, or with `kernels` a copy of it (in `directory`)
/// whose every insert is repeated for each glob.
fn plan_for_kernels(tool: &str, kernels: &[&str], directory: &Path) -> PathBuf {
    let plan_file = repo().join("hook-sdk/examples").join(tool).join("plan.toml");
    if kernels.is_empty() {
        return plan_file;
    }
    let text = std::fs::read_to_string(&plan_file).unwrap();
    let (preamble, inserts) = text.split_once("[[insert]]").expect("a plan with inserts");
    let mut restricted = preamble.to_string();
    for insert in inserts.split("[[insert]]") {
        assert!(!insert.contains("kernels"), "{tool}'s plan names kernels already");
        for glob in kernels {
            restricted += &format!("[[insert]]\nkernels = \"{glob}\"{insert}");
        }
    }
    let path = directory.join(format!("{tool}-plan.toml"));
    std::fs::write(&path, restricted).unwrap();
    path
}

/// Debian 12's own library (installed by scripts/setup.sh) on the emulated
/// MI210: the gfx90a code objects with xnack off, which the device runs
/// (their xnack+ twins, which it never loads, would double the hour
/// rocSPARSE takes).
fn installed_on_mi210<'a>(library: &'a str, program_source: &'a str, link: &str) -> LibraryCall<'a> {
    LibraryCall {
        library,
        directory: PathBuf::from("/usr/lib/x86_64-linux-gnu"),
        program_source,
        build: vec![link.into()],
        target: "gfx90a",
        device_target: "gfx90a:xnack-",
        kernels: &[],
    }
}

/// Whole libraries nobody here wrote, under the runtime (long: run in
/// release by `scripts/runtime-libraries.sh`, not by `cargo test`): a
/// program calling the library, with the library's code objects for the
/// emulated GPU instrumented by each of `tools` statically (the whole `.so`
/// rewritten, found first on LD_LIBRARY_PATH) and, separately, dynamically
/// as it loads; every run prints what the original prints, and every
/// dispatch of a library kernel reports what the device's log of the
/// original run gives (`Oracle::check`).
fn library_under_the_runtime(call: LibraryCall, tools: &[&str]) {
    let LibraryCall { library, directory, program_source, build, target, device_target, kernels: chosen } = call;
    let dir = test_directory(&format!("library-{library}"));
    let build: Vec<&str> = build.iter().map(String::as_str).collect();
    let program = hip_build(program_source, target, &dir, library, &build);
    let installed = directory.join(library);
    let search_path = |first: &Path| std::env::join_paths([first, directory.as_path()]).unwrap();
    let code_objects = load::load_for_target(&installed, Some(device_target)).unwrap().code_objects;
    let log = dir.join("original.jsonl");
    let run = logging_the_original(target, &log);
    let original = run.command(program.as_os_str(), &[]).env("LD_LIBRARY_PATH", &directory).output().unwrap();
    let expected_output = succeeded(original, "the original");
    let kernels: std::collections::HashSet<&str> =
        code_objects.iter().flat_map(|c| c.kernels.iter().map(|k| k.name())).collect();
    let logged: Vec<Value> =
        dispatch_log(&log).into_iter().filter(|d| kernels.contains(&d["kernel"].as_str().unwrap())).collect();
    assert!(!logged.is_empty(), "the program dispatches kernels of {library}");
    let every_dispatch = Oracle::among(&code_objects, &logged);
    let bytes = std::fs::read(&installed).unwrap();

    for &tool in tools {
        let device = build_tool(Compiler::Hipcc, &example(tool), "-O3", &dir);
        let plan_file = plan_for_kernels(tool, chosen, &dir);
        let plan = Plan::load(&plan_file).unwrap();
        let host = host_part(tool, &dir);
        // A code object the plan selects nothing in is left as it is (the
        // memory tracer's and branch divergence's plans select nothing in
        // some): its dispatches are not observed, and the report counts them.
        let selects = every_dispatch.per_dispatch(|app| !plan.select(&lift(app).unwrap()).is_empty());
        let mut observed = Vec::new();
        let mut not_observed = std::collections::BTreeMap::<String, u64>::new();
        for (dispatch, selected) in logged.iter().zip(&selects) {
            match **selected {
                true => observed.push(dispatch.clone()),
                false => *not_observed.entry(dispatch["kernel"].as_str().unwrap().into()).or_default() += 1,
            }
        }
        let oracle = Oracle::among(&code_objects, &observed);
        let check = |report: &Value, path: &Path| {
            oracle.check(tool, &plan, report, path);
            assert_eq!(
                uninstrumented_dispatches(report),
                not_observed,
                "{library} with {tool}: dispatches not observed"
            );
        };

        // Statically: the whole library rewritten, placed first on the path.
        let (growth, grow) = library_growth();
        let options = InstrumentOptions { grow_registers: growth, ..InstrumentOptions::default() };
        let started = std::time::Instant::now();
        let (out, report) = instrument_file(
            &Tool::load(&device).unwrap(),
            &installed,
            &bytes,
            &plan,
            &Registry::with_builtins(),
            &options,
            Some(device_target),
        )
        .unwrap_or_else(|e| panic!("{library} with {tool}: {e}"));
        // Every code object is instrumented or selects nothing; no point is left out.
        assert_eq!(report.code_objects.len() + report.unchanged.len(), code_objects.len(), "{library} with {tool}");
        assert!(report.partial.is_none(), "{library} with {tool}: points left out");
        let points: usize = report.code_objects.iter().map(|c| c.selected).sum();
        eprintln!(
            "{library} with {tool}: {} code objects instrumented ({} select nothing), {points} points, in {:.0} s",
            report.code_objects.len(),
            report.unchanged.len(),
            started.elapsed().as_secs_f64()
        );
        let static_dir = test_directory(&format!("library-{library}/{tool}/static"));
        std::fs::write(static_dir.join(library), out).unwrap();
        let instrumented_log = static_dir.join("instrumented.jsonl");
        let _ = std::fs::remove_file(&instrumented_log);
        let run = Run {
            tool_host: Some(host.clone()),
            report: Some(static_dir.join("report.json")),
            dispatch_log: Some(instrumented_log.clone()),
            ..run_on(target)
        };
        let output =
            run.command(program.as_os_str(), &[]).env("LD_LIBRARY_PATH", search_path(&static_dir)).output().unwrap();
        let (report, _) = reported(output, &static_dir.join("report.json"), &expected_output);
        check(&report, &static_dir.join("report.json"));
        // What the instrumented library's dispatches cost, against the
        // original's: the block counter at most 1.5x.
        let instructions =
            |dispatches: &[Value]| -> u64 { dispatches.iter().map(|d| d["instructions"].as_u64().unwrap()).sum() };
        let instrumented: Vec<Value> = dispatch_log(&instrumented_log)
            .into_iter()
            .filter(|d| kernels.contains(&d["kernel"].as_str().unwrap()))
            .collect();
        assert_eq!(instrumented.len(), logged.len(), "{library} with {tool}: the same dispatches");
        let cost = instructions(&instrumented) as f64 / instructions(&logged) as f64;
        eprintln!("{library} with {tool}: its dispatches run {cost:.2}x the original's wave instructions");
        if tool == "block-counter" {
            assert!(cost <= 1.5, "{library} with the block counter: {cost:.2}x the original's wave instructions");
        }
        // The rewritten library is as large as the original (1.9 GB for rocSOLVER).
        std::fs::remove_file(static_dir.join(library)).unwrap();

        // Dynamically, as the program loads it.
        let run = Run {
            dynamic: Some((device.clone(), plan_file.clone())),
            grow_registers: Some(grow.into()),
            cache: Some(PathBuf::from("none")),
            tool_host: Some(host),
            ..run_on(target)
        };
        let dynamic_dir = test_directory(&format!("library-{library}/{tool}/dynamic"));
        let report_path = dynamic_dir.join("report.json");
        let run = Run { report: Some(report_path.clone()), ..run };
        let output = run.command(program.as_os_str(), &[]).env("LD_LIBRARY_PATH", &directory).output().unwrap();
        let (report, _) = reported(output, &report_path, &expected_output);
        check(&report, &dynamic_dir.join("report.json"));
        let instrumented: Vec<&Value> =
            report["dynamic"].as_array().unwrap().iter().filter(|d| d["source"] == "instrumented").collect();
        let seconds: f64 = instrumented.iter().map(|d| d["seconds"].as_f64().unwrap()).sum();
        eprintln!(
            "{library} with {tool}: {} code objects instrumented as they loaded in {seconds:.0} s",
            instrumented.len()
        );
    }
}

/// How the library tests let registers grow: `GPUINSTR_LIBRARY_GROWTH`
/// (`free`, the default flags, or `always`), as the option and as
/// `--grow-registers` spells it.
fn library_growth() -> (gpuinstr::stages::sva::RegisterGrowth, &'static str) {
    use gpuinstr::stages::sva::RegisterGrowth;
    match std::env::var("GPUINSTR_LIBRARY_GROWTH").as_deref() {
        Ok("always") => (RegisterGrowth::Always, "always"),
        Ok("free") | Err(_) => (RegisterGrowth::FreeOfOccupancy, "free"),
        Ok(other) => panic!("GPUINSTR_LIBRARY_GROWTH={other}: free or always"),
    }
}

/// The example tools `GPUINSTR_LIBRARY_TOOLS` names (comma-separated), or all.
fn library_tools() -> Vec<&'static str> {
    match std::env::var("GPUINSTR_LIBRARY_TOOLS") {
        Ok(names) => {
            let named: Vec<&str> = names.split(',').collect();
            let tools: Vec<&str> = EXAMPLE_TOOLS.into_iter().filter(|t| named.contains(t)).collect();
            assert_eq!(tools.len(), named.len(), "GPUINSTR_LIBRARY_TOOLS={names}: examples are {EXAMPLE_TOOLS:?}");
            tools
        }
        Err(_) => EXAMPLE_TOOLS.to_vec(),
    }
}

/// A run on `target` whose device logs to `log` (emptied first) what the
/// oracle needs: counts, EXEC around `s_and_saveexec_b64`, every lane's
/// flat and global access.
fn logging_the_original(target: &str, log: &Path) -> Run {
    let _ = std::fs::remove_file(log);
    Run {
        dispatch_log: Some(log.to_path_buf()),
        dispatch_log_exec: vec!["S_AND_SAVEEXEC_B64".into()],
        dispatch_log_accesses: true,
        ..run_on(target)
    }
}

/// Lines of a program's output that measure the run: how long something
/// took, or how much memory the process holds (they differ between any
/// two runs, and a tool's runtime adds to the process's memory).
fn measurement_line(line: &str) -> bool {
    let lower = line.to_lowercase();
    ["time", "second", "ms", "/s", "gflops", "gf/s", "(us)", "elapsed", "speedup", "memory usage"]
        .iter()
        .any(|t| lower.contains(t))
}

/// Programs nobody here wrote, built by the user (long: run by
/// `scripts/runtime-programs.sh`, never by `cargo test`): each line of the
/// file `GPUINSTR_PROGRAMS` names a program and its arguments (`DIR PROGRAM
/// ARGS...`, run in DIR; `#` starts a comment). Each runs on the emulated
/// MI210 as it is, then with each of the example tools in dynamic mode and
/// default flags: it exits as the original did and prints what it printed
/// (lines of timings aside), nothing warns, and every dispatch of its code
/// objects reports what the device's log of the original run gives
/// (`Oracle::check`). A program that compiles its kernels as it runs
/// (Triton's) names where they go in `GPUINSTR_PROGRAM_CODE_OBJECTS` (for
/// Triton, its `TRITON_CACHE_DIR`).
/// Every `.hsaco` file under `directory` (and those its `.hsaco_path`
/// files name), in name order.
fn hsaco_files(directory: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![directory.to_path_buf()];
    while let Some(directory) = pending.pop() {
        for entry in std::fs::read_dir(&directory).unwrap_or_else(|e| panic!("{}: {e}", directory.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "hsaco") {
                found.push(path);
            } else if path.extension().is_some_and(|e| e == "hsaco_path") {
                // Triton 2.1 keeps the path of its code object, not the code.
                let named = PathBuf::from(std::fs::read_to_string(&path).unwrap().trim());
                if named.exists() {
                    found.push(named);
                }
            }
        }
    }
    found.sort();
    found
}

#[test]
#[ignore = "minutes per program: scripts/runtime-programs.sh runs it in release"]
fn programs_nobody_here_wrote_report_what_the_emulator_gives() {
    let target = "gfx90a";
    let list = std::env::var("GPUINSTR_PROGRAMS").expect("GPUINSTR_PROGRAMS names a file of programs to run");
    let list = std::fs::read_to_string(&list).unwrap_or_else(|e| panic!("{list}: {e}"));
    let tools: Vec<&str> = match std::env::var("GPUINSTR_PROGRAM_TOOLS") {
        Ok(tools) if !tools.is_empty() => {
            tools.split(',').map(|t| &*Box::leak(t.to_string().into_boxed_str())).collect()
        }
        _ => EXAMPLE_TOOLS.to_vec(),
    };
    for line in list.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (directory, program, arguments) = (PathBuf::from(fields[0]), fields[1], &fields[2..]);
        let program = directory.join(program);
        let name = program.display().to_string();
        let dir = test_directory(&format!("program-{}", name.replace('/', "_")));
        let arguments: Vec<std::ffi::OsString> = arguments.iter().map(Into::into).collect();
        let log = dir.join("original.jsonl");
        let run = logging_the_original(target, &log);
        let mut command = run.command(program.as_os_str(), &arguments);
        let original = command.current_dir(&directory).output().unwrap();
        let printed = |output: &Output| -> Vec<String> {
            String::from_utf8_lossy(&output.stdout).lines().filter(|l| !measurement_line(l)).map(String::from).collect()
        };
        // The program's code objects: its own, or (a program that compiles
        // its kernels as it runs, Triton's) those under the directory
        // `GPUINSTR_PROGRAM_CODE_OBJECTS` names after the original run.
        let code_objects: Vec<CodeObject> = match std::env::var_os("GPUINSTR_PROGRAM_CODE_OBJECTS") {
            Some(directory) => hsaco_files(Path::new(&directory))
                .iter()
                .flat_map(|path| load::load_for_target(path, Some(target)).unwrap().code_objects)
                .collect(),
            None => load::load_for_target(&program, Some(target)).unwrap().code_objects,
        };
        let kernels: Vec<&str> = code_objects.iter().flat_map(|c| c.kernels.iter().map(|k| k.name())).collect();
        let logged: Vec<Value> =
            dispatch_log(&log).into_iter().filter(|d| kernels.contains(&d["kernel"].as_str().unwrap())).collect();
        assert!(!logged.is_empty(), "{name}: no dispatch of its kernels");
        eprintln!("{name}: {} dispatches of its kernels", logged.len());
        for tool in &tools {
            let device = build_tool(Compiler::Hipcc, &example(tool), "-O3", &dir);
            let plan_file = repo().join("hook-sdk/examples").join(tool).join("plan.toml");
            let plan = Plan::load(&plan_file).unwrap();
            let report_path = dir.join("report.json");
            let run = Run {
                dynamic: Some((device, plan_file)),
                cache: Some(PathBuf::from("none")),
                tool_host: Some(host_part(tool, &dir)),
                report: Some(report_path.clone()),
                ..run_on(target)
            };
            let started = std::time::Instant::now();
            let mut command = run.command(program.as_os_str(), &arguments);
            let output = command.current_dir(&directory).output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr).to_string();
            assert_eq!(output.status.code(), original.status.code(), "{name} with {tool}: {stderr}");
            assert_eq!(printed(&output), printed(&original), "{name} with {tool}: {stderr}");
            let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
            assert_eq!(report["warnings"], serde_json::json!([]), "{name} with {tool}: {stderr}");
            Oracle::among(&code_objects, &logged).check(tool, &plan, &report, &report_path);
            eprintln!("{name} with {tool}: as the emulator gives, {:.0} s", started.elapsed().as_secs_f64());
        }
    }
}

#[test]
#[ignore = "minutes: scripts/runtime-libraries.sh runs it in release"]
fn rocrand_under_the_runtime_reports_what_the_emulator_gives() {
    let call = installed_on_mi210("librocrand.so.1", "device/rocrand_generators.cpp", "-lrocrand");
    library_under_the_runtime(call, &library_tools());
}

#[test]
#[ignore = "an hour per tool: scripts/runtime-libraries.sh runs it in release"]
fn rocsparse_under_the_runtime_reports_what_the_emulator_gives() {
    let call = installed_on_mi210("librocsparse.so.0", "device/rocsparse_routines.cpp", "-lrocsparse");
    library_under_the_runtime(call, &library_tools());
}

/// sid's rocBLAS 6.4: a program's single and double GEMMs (Tensile's
/// kernels, from code objects rocBLAS reads from its library directory as
/// it runs) on the emulated MI210, with each example tool in dynamic mode
/// and default flags: the program prints what it printed, nothing warns,
/// and every dispatch of the code objects instrumented reports what the
/// device's log of the original run gives. Then every solution of a
/// transposed f32 GEMM, exact, and one that loads straight into LDS under
/// every tool likewise. The packages (3 GB unpacked) are fetched by the
/// test.
#[test]
#[ignore = "minutes, and sid's packages: scripts/env.sh sid -- scripts/runtime-libraries.sh rocblas"]
fn rocblas_gemms_under_the_runtime_report_what_the_emulator_gives() {
    if gpuinstr::toolchain::LLVM_MAJOR < 21 {
        panic!("sid's rocBLAS 6.4 needs sid's HIP: run it inside scripts/env.sh sid");
    }
    let target = "gfx90a";
    let root = environment_packages(&["librocblas4", "librocblas-dev", "libroctx64-4"]);
    let directory = root.join("usr/lib/x86_64-linux-gnu");
    let dir = test_directory("library-rocblas");
    let build = [
        format!("-I{}", root.join("usr/include").display()),
        format!("-L{}", directory.display()),
        format!("-Wl,-rpath-link,{}", directory.display()),
        "-lrocblas".to_string(),
    ];
    let build: Vec<&str> = build.iter().map(String::as_str).collect();
    let program = hip_build("device/rocblas_gemm.cpp", target, &dir, "rocblas_gemm", &build);
    rocblas_program_under_every_tool(&program, &[], &directory, "library-rocblas");

    // Every solution of an f32 GEMM with both operands transposed, forced
    // one by one: all exact on the emulated GPU, and among them kernels
    // that load straight into LDS (Tensile's DirectToLds,
    // `buffer_load_dword ... lds`), then one such solution alone under
    // every tool.
    let solutions = hip_build("device/rocblas_solutions.cpp", target, &dir, "rocblas_solutions", &build);
    let log = dir.join("solutions.jsonl");
    let run = Run { dispatch_log: Some(log.clone()), ..run_on(target) };
    let _ = std::fs::remove_file(&log);
    let output =
        run.command(solutions.as_os_str(), &["128".into()]).env("LD_LIBRARY_PATH", &directory).output().unwrap();
    let printed = succeeded(output, "every solution");
    let runs: Vec<&str> = printed.lines().filter(|l| l.starts_with("solution ")).collect();
    let kernels: Vec<String> = dispatch_log(&log)
        .iter()
        .map(|d| d["kernel"].as_str().unwrap().to_string())
        .filter(|k| k.starts_with("Cijk_"))
        .collect();
    assert_eq!(runs.len(), kernels.len(), "one Tensile dispatch per solution");
    assert!(runs.iter().all(|r| r.ends_with("PASS")), "{printed}");
    let direct = runs
        .iter()
        .zip(&kernels)
        .find(|(_, k)| k.contains("_DTLA1_") || k.contains("_DTLB1_"))
        .map(|(r, _)| r.split_whitespace().nth(1).unwrap().trim_end_matches(':').to_string())
        .expect("a solution whose kernel loads into LDS directly");
    eprintln!("rocBLAS: {} TT solutions exact; solution {direct} loads into LDS directly", runs.len());
    let args = ["128".into(), direct.into()];
    rocblas_program_under_every_tool(&solutions, &args, &directory, "library-rocblas-direct-to-lds");
}

/// `program ARGS` (calling sid's rocBLAS from `directory`) logged by the
/// emulated device, then under every example tool in dynamic mode: its
/// output unchanged, and every dispatch of the code objects instrumented
/// what the device's log of the original run gives.
fn rocblas_program_under_every_tool(program: &Path, args: &[std::ffi::OsString], directory: &Path, name: &str) {
    let target = "gfx90a";
    let dir = test_directory(name);
    let log = dir.join("original.jsonl");
    let run = logging_the_original(target, &log);
    let original = run.command(program.as_os_str(), args).env("LD_LIBRARY_PATH", directory).output().unwrap();
    let expected_output = succeeded(original, "the original");
    let all_logged = dispatch_log(&log);
    let names: std::collections::BTreeSet<String> =
        all_logged.iter().map(|d| d["kernel"].as_str().unwrap().to_string()).collect();
    // The library's files that may hold the kernels that ran: its gfx90a
    // code objects (xnack- or any) naming one of them.
    let library = std::fs::read_dir(directory.join("rocblas"))
        .unwrap()
        .map(|e| e.unwrap().path().join("library"))
        .find(|p| p.is_dir())
        .expect("rocBLAS's library directory");
    let candidates: Vec<PathBuf> = std::fs::read_dir(&library)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            name.contains("gfx90a") && !name.contains("xnack+") && (name.ends_with(".co") || name.ends_with(".hsaco"))
        })
        .filter(|p| {
            let bytes = std::fs::read(p).unwrap();
            names.iter().any(|n| bytes.windows(n.len()).any(|w| w == n.as_bytes()))
        })
        .collect();
    eprintln!("rocBLAS: {} dispatches; {} library files name their kernels", all_logged.len(), candidates.len());

    // Tensile's kernels declare no hidden argument (v4): hooks reading the
    // launch shape get it declared, and the runtime fills it in (HIP was
    // handed the original and passes only the explicit arguments).
    let tools = library_tools();
    for tool in tools {
        let device = build_tool(Compiler::Hipcc, &example(tool), "-O3", &dir);
        let plan_file = repo().join("hook-sdk/examples").join(tool).join("plan.toml");
        let plan = Plan::load(&plan_file).unwrap();
        let tool_dir = test_directory(&format!("{name}/{tool}"));
        let report_path = tool_dir.join("report.json");
        let run = Run {
            dynamic: Some((device, plan_file)),
            cache: Some(PathBuf::from("none")),
            tool_host: Some(host_part(tool, &tool_dir)),
            report: Some(report_path.clone()),
            ..run_on(target)
        };
        let started = std::time::Instant::now();
        let output = run.command(program.as_os_str(), args).env("LD_LIBRARY_PATH", directory).output().unwrap();
        let (report, _) = reported(output, &report_path, &expected_output);
        // The code objects instrumented, found among the files by size.
        let sizes: Vec<u64> = report["dynamic"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["source"] == "instrumented")
            .map(|d| d["size"].as_u64().unwrap())
            .collect();
        let mut code_objects = Vec::new();
        for path in &candidates {
            if sizes.contains(&std::fs::metadata(path).unwrap().len()) {
                code_objects.extend(load::load_for_target(path, Some(target)).unwrap().code_objects);
            }
        }
        for code_object in load::load_for_target(&directory.join("librocblas.so.4"), Some(target)).unwrap().code_objects
        {
            if sizes.contains(&(code_object.bytes.len() as u64)) {
                code_objects.push(code_object);
            }
        }
        // Dynamic mode's start-up, cold (no cache): the seconds spent
        // instrumenting the code objects as the program loaded them.
        let seconds: Vec<f64> = report["dynamic"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["source"] == "instrumented")
            .filter_map(|d| d["seconds"].as_f64())
            .collect();
        eprintln!(
            "rocBLAS with {tool}: start-up {:.2} s instrumenting {} code objects cold (largest {:.2} s)",
            seconds.iter().sum::<f64>(),
            seconds.len(),
            seconds.iter().copied().fold(0.0, f64::max)
        );
        let kernels: std::collections::HashSet<&str> =
            code_objects.iter().flat_map(|c| c.kernels.iter().map(|k| k.name())).collect();
        let logged: Vec<Value> =
            all_logged.iter().filter(|d| kernels.contains(&d["kernel"].as_str().unwrap())).cloned().collect();
        if logged.is_empty() {
            // The plan selects nothing in the kernels that ran (branch
            // divergence's s_and_saveexec_b64: Tensile's GEMMs have none).
            assert_eq!(report["dispatches"], serde_json::json!([]), "rocBLAS with {tool}");
            eprintln!("rocBLAS with {tool}: its plan selects nothing in the kernels that ran");
            continue;
        }
        if tool == "memory-tracer" {
            // Tensile's memory is buffer and LDS: the log has them.
            let spaces: std::collections::BTreeSet<u64> = logged
                .iter()
                .flat_map(|d| d["accesses"].as_array().cloned().unwrap_or_default())
                .map(|a| a[4].as_u64().unwrap())
                .collect();
            eprintln!("rocBLAS with {tool}: spaces accessed {spaces:?} (0 flat, 1 global, 2 buffer, 3 LDS)");
            assert!(spaces.contains(&2) && spaces.contains(&3), "Tensile's GEMMs access buffers and LDS: {spaces:?}");
        }
        Oracle::among(&code_objects, &logged).check(tool, &plan, &report, &report_path);
        eprintln!(
            "rocBLAS with {tool}: {} code objects instrumented, {} dispatches as the emulator gives, {:.0} s",
            code_objects.len(),
            logged.len(),
            started.elapsed().as_secs_f64()
        );
    }
}

/// sid's rocSOLVER 6.4 on the MI300X model: it carries no gfx942 code
/// objects but gfx9-4-generic ones, which HIP 6.4 loads for gfx942. sid's
/// rocBLAS carries neither, so the program calls routines whose kernels are
/// rocSOLVER's own. The packages (6 GB unpacked) are fetched by the test.
#[test]
#[ignore = "minutes, and sid's packages: scripts/env.sh sid -- scripts/runtime-libraries.sh rocsolver"]
fn rocsolver_under_the_runtime_reports_what_the_emulator_gives() {
    if gpuinstr::toolchain::LLVM_MAJOR < 21 {
        panic!("sid's rocSOLVER 6.4 needs sid's HIP: run it inside scripts/env.sh sid");
    }
    let root = environment_packages(&[
        "librocsolver0",
        "librocsolver-dev",
        "librocblas4",
        "librocblas-dev",
        "libfmt11",
        "libroctx64-4",
    ]);
    let directory = root.join("usr/lib/x86_64-linux-gnu");
    let call = LibraryCall {
        library: "librocsolver.so.0",
        build: vec![
            format!("-I{}", root.join("usr/include").display()),
            format!("-L{}", directory.display()),
            format!("-Wl,-rpath-link,{}", directory.display()),
            "-lrocsolver".into(),
            "-lrocblas".into(),
        ],
        directory,
        program_source: "device/rocsolver_routines.cpp",
        target: "gfx942",
        device_target: "gfx9-4-generic",
        // The kernels the program's routines run (235 code objects of
        // rocSOLVER's, 2,000 kernels, would take hours to instrument whole).
        kernels: &["*laswp_kernel*", "*conj_in_place*", "*reset_info*", "*getf2_panel_kernel*"],
    };
    library_under_the_runtime(call, &library_tools());
}

/// `tests/inputs/runtime/NAME.hip` built for gfx90a and instrumented with
/// the instruction counter in `dir`, and its run there with the counter's
/// host part and the report (and database) in `dir`.
fn counted_run_of(name: &str, dir: &Path) -> (PathBuf, Run) {
    let target = "gfx90a";
    let program = hip_build(&format!("runtime/{name}.hip"), target, dir, name, &[]);
    let device = build_tool(Compiler::Hipcc, &example("instruction-counter"), "-O3", dir);
    let plan = Plan::load(&repo().join("hook-sdk/examples/instruction-counter/plan.toml")).unwrap();
    let run = Run {
        tool_host: Some(host_part("instruction-counter", dir)),
        report: Some(dir.join("report.json")),
        ..run_on(target)
    };
    (instrumented(&program, &device, &plan), run)
}

/// A program killed with SIGKILL half way leaves a database holding every
/// dispatch completed before the kill, with the tool's values; the run is
/// not marked finished.
#[test]
fn a_killed_program_leaves_a_database_of_the_dispatches_it_completed() {
    use std::io::BufRead;
    let dir = test_directory("killed");
    let (instrumented, run) = counted_run_of("dispatch_then_wait", &dir);
    let report_path = dir.join("report.json");
    let database = dir.join("report.sqlite");
    let mut child = run
        .command(instrumented.as_os_str(), &[])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    // The dispatches are recorded as their completion is handled.
    let count = || -> u64 {
        rusqlite::Connection::open(&database)
            .and_then(|c| c.query_row("SELECT count(*) FROM dispatches", [], |row| row.get(0)))
            .unwrap_or(0)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while count() < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!report_path.exists(), "no JSON report: the program never reached its exit");
    let connection = rusqlite::Connection::open(&database).unwrap();
    let (dispatches, finished): (u64, Option<f64>) = connection
        .query_row("SELECT (SELECT count(*) FROM dispatches), finished FROM run", [], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .unwrap();
    assert_eq!((dispatches, finished), (3, None));
    // Each with the counter's value: 4 waves of 64 lanes run the kernel's
    // instructions, the same count each time.
    let counts: Vec<u64> = connection
        .prepare("SELECT value FROM dispatch_values WHERE name = 'instructions' ORDER BY dispatch")
        .unwrap()
        .query_map([], |row| row.get::<_, u64>(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(counts.len(), 3, "{counts:?}");
    assert!(counts[0] > 0 && counts.iter().all(|c| *c == counts[0]), "{counts:?}");
}

/// A program the emulated GPU stops keeps what it printed up to the stop,
/// and the runtime, told by the device before the process ends, writes a
/// JSON report and a database holding every dispatch completed before it,
/// the stop a warning and the faulting dispatch unread.
#[test]
fn a_program_the_gpu_stops_keeps_its_output_and_a_database_of_what_completed() {
    let dir = test_directory("stopped");
    let (instrumented, run) = counted_run_of("dispatch_then_fault", &dir);
    let report_path = dir.join("report.json");
    let output = run.command(instrumented.as_os_str(), &[]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the emulated GPU stopped: kernel _Z4pokePi"), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "two dispatches done\n", "{stderr}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).expect("a JSON report")).unwrap();
    let warnings = report["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{report}");
    let warning = warnings[0].as_str().unwrap();
    assert!(
        warning.starts_with("the emulated GPU stopped the program (the emulated GPU stopped: kernel _Z4pokePi"),
        "{warning}"
    );
    assert_eq!(report["unread_dispatches"], 1, "the faulting dispatch");
    let kernels: Vec<&str> =
        report["dispatches"].as_array().unwrap().iter().map(|d| d["kernel"].as_str().unwrap()).collect();
    assert_eq!(kernels, ["_Z4stepPii", "_Z4stepPii"]);
    assert_database_holds(&dir.join("report.sqlite"), &report);
    let connection = rusqlite::Connection::open(dir.join("report.sqlite")).unwrap();
    let counted: u64 = connection
        .query_row("SELECT count(*) FROM dispatch_values WHERE name = 'instructions' AND value > 0", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(counted, 2, "each with its count");
}

/// The run's page of branch divergence and the memory tracer on a `-g`
/// program, rendered by headless chromium (Debian's): the numbers of each
/// source line in the rendered page are the database's, summed over the
/// dispatches; a screenshot of each is kept beside the test's files.
#[test]
fn the_page_of_a_run_shows_each_source_lines_numbers_as_the_database_has_them() {
    let target = "gfx90a";
    let dir = test_directory("page");
    let program = hip_build("runtime/counted.hip", target, &dir, "counted-g", &["-g"]);
    let original = original_of(program, target, &dir);
    for (tool, value, field) in [
        ("branch-divergence", "branches", "divergent"),
        ("memory-tracer", "instructions", "lines"),
        ("memory-efficiency", "memory", "lines"),
    ] {
        let tool_dir = dir.join(tool);
        std::fs::create_dir_all(&tool_dir).unwrap();
        let instrumented = instrument_with(tool, &original, &tool_dir);
        let run = Run { tool_host: Some(instrumented.host.clone()), ..run_on(target) };
        run_reported_with(run, &instrumented.program, &[], &original.output, &tool_dir);
        let database = tool_dir.join("report.sqlite");
        let expected: Vec<(String, i64)> = {
            let connection = rusqlite::Connection::open(&database).unwrap();
            let mut statement = connection
                .prepare(&format!(
                    "SELECT json_extract(p.value, '$.location'), sum(json_extract(p.value, '$.{field}'))
                     FROM dispatch_values v, json_each(v.value) p WHERE v.name = '{value}' AND typeof(v.value) = 'text'
                     GROUP BY 1 ORDER BY 1"
                ))
                .unwrap();
            let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?))).unwrap();
            rows.map(Result::unwrap).collect()
        };
        assert!(expected.len() >= 2, "{tool}: {expected:?}");
        assert!(expected.iter().any(|(_, n)| *n > 0), "{tool}: {expected:?}");
        let run = gpuinstr_report::read(&database).unwrap();
        let page = tool_dir.join("page.html");
        std::fs::write(&page, gpuinstr_report::page(&run, &gpuinstr_report::FromDisk)).unwrap();

        let chromium = |arguments: &[&str]| {
            let output = std::process::Command::new("chromium")
                .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,1800"])
                .args(arguments)
                .arg(format!("file://{}", page.display()))
                .output()
                .expect("chromium (scripts/setup.sh installs it)");
            assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
            String::from_utf8_lossy(&output.stdout).to_string()
        };
        let screenshot = tool_dir.join("page.png");
        chromium(&[&format!("--screenshot={}", screenshot.display())]);
        assert!(std::fs::metadata(&screenshot).unwrap().len() > 10_000, "{tool}: a screenshot of the page");
        let dom = chromium(&["--dump-dom"]);
        let section = &dom[dom.find(&format!("data-tool-value=\"{value}\"")).expect("the tool's lines")..];
        for (location, total) in &expected {
            let (file, line) = location.rsplit_once(':').unwrap();
            let table = &section[section.find(&format!("data-file=\"{file}\"")).expect("the file's table")..];
            let row = &table[table.find(&format!("data-line=\"{line}\"")).unwrap_or_else(|| panic!("{location}"))..];
            let row = &row[..row.find("</tr>").unwrap()];
            assert!(
                row.contains(&format!("data-value=\"{field}\">{total}</td>")),
                "{tool}: {location} shows {field} {total}: {row}"
            );
        }
        assert!(dom.contains("Kernels by cost"), "{tool}");
        // Per instruction: each one's numbers summed over the dispatches.
        let per_instruction: Vec<(String, String, i64)> = {
            let connection = rusqlite::Connection::open(&database).unwrap();
            let mut statement = connection
                .prepare(&format!(
                    "SELECT json_extract(p.value, '$.function'), json_extract(p.value, '$.address'),
                         sum(json_extract(p.value, '$.{field}'))
                     FROM dispatch_values v, json_each(v.value) p WHERE v.name = '{value}' AND typeof(v.value) = 'text'
                     GROUP BY 1, 2"
                ))
                .unwrap();
            let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?))).unwrap();
            rows.map(Result::unwrap).collect()
        };
        assert!(!per_instruction.is_empty(), "{tool}");
        let section =
            &dom[dom.find(&format!("class=\"instructions\" data-tool-value=\"{value}\"")).expect("per instruction")..];
        for (function, address, total) in &per_instruction {
            let address = format!("{:#x}", u64::from_str_radix(address.trim_start_matches("0x"), 16).unwrap());
            let key = format!("data-function=\"{function}\" data-address=\"{address}\"");
            let row = &section[section.find(&key).unwrap_or_else(|| panic!("{tool}: {key}"))..];
            let row = &row[..row.find("</tr>").unwrap()];
            assert!(
                row.contains(&format!("data-value=\"{field}\">{total}</td>")),
                "{tool}: {key} shows {total}: {row}"
            );
        }

        // The dispatches on their queue, for a trace viewer: one complete
        // event each, in submission order, lasting while it ran.
        let trace = gpuinstr_report::trace_events(&run);
        let spans: Vec<&Value> = trace["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "X").collect();
        let kernels: Vec<&str> = spans.iter().map(|e| e["name"].as_str().unwrap()).collect();
        let expected: Vec<String> = {
            let connection = rusqlite::Connection::open(&database).unwrap();
            let mut statement = connection.prepare("SELECT kernel FROM dispatches ORDER BY id").unwrap();
            statement.query_map([], |row| row.get(0)).unwrap().map(Result::unwrap).collect()
        };
        assert_eq!(kernels, expected, "{tool}");
        let mut previous = 0.0;
        for span in spans {
            let (start, length) = (span["ts"].as_f64().unwrap(), span["dur"].as_f64().unwrap());
            assert!(start >= previous && length > 0.0, "{tool}: {span}");
            assert_eq!(span["tid"], 1, "{tool}: the program's one queue");
            previous = start;
        }
    }
}
