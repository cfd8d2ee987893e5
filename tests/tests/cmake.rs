//! The CMake integration builds a tool with the plugin.

use std::process::Command;

use gpuinstr::inspect;
use gpuinstr_tests::*;

/// `cmake -S project -B build` with the plugin this test run built.
fn configure(project: &std::path::Path, build: &std::path::Path, extra: &[&str]) -> Command {
    let mut command = Command::new("cmake");
    command
        .env("TMPDIR", run_directory())
        .arg("-S")
        .arg(project)
        .arg("-B")
        .arg(build)
        .arg(format!("-DGPUINSTR_PLUGIN={}", plugin().display()));
    command.args(extra);
    command
}

#[test]
fn cmake_builds_a_tool_with_the_plugin() {
    let scratch = scratch();
    let project = scratch.path().join("project");
    let build = scratch.path().join("build");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("CMakeLists.txt"),
        format!(
            "cmake_minimum_required(VERSION 3.20)\n\
             project(counter NONE)\n\
             find_package(GpuInstr REQUIRED PATHS \"{}\" NO_DEFAULT_PATH)\n\
             gpuinstr_add_tool(counter SOURCES \"{}\" OFFLOAD_ARCH gfx90a)\n",
            repo().join("cmake").display(),
            example("instruction-counter").display()
        ),
    )
    .unwrap();
    run_ok(&mut configure(&project, &build, &[]));
    run_ok(Command::new("cmake").arg("--build").arg(&build).env("TMPDIR", run_directory()));
    let report = inspect::inspect(&build.join("libcounter.so"), None).unwrap();
    let hooks: Vec<String> = report.code_objects[0].tool.clone().unwrap().hooks.into_iter().map(|h| h.name).collect();
    assert_eq!(hooks, ["countInstructionsScalar", "countInstructionsVector"]);

    // Without the plugin, configuring fails with a message saying what to do.
    let missing = run(Command::new("cmake")
        .arg("-S")
        .arg(&project)
        .arg("-B")
        .arg(scratch.path().join("build2"))
        .arg("-DGPUINSTR_PLUGIN=/nonexistent/libembed.so"));
    assert!(!missing.status.success());
    // CMake wraps long messages; compare without line breaks.
    let message = String::from_utf8_lossy(&missing.stderr).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        message.contains("libembed.so was not found; build it with `cargo build --release -p gpuinstr-llvm-plugin`")
    );
}

/// `gpuinstr_instrument()`: a HIP library built by CMake (hipcc as the C++
/// compiler) is instrumented after it links, with a tool CMake also builds;
/// the output verifies against the library.
#[test]
fn cmake_instruments_a_library_after_it_builds() {
    let scratch = scratch();
    let project = scratch.path().join("project");
    let build = scratch.path().join("build");
    std::fs::create_dir_all(&project).unwrap();
    let link = gpuinstr_tests::gpuinstr_link();
    std::fs::write(
        project.join("CMakeLists.txt"),
        format!(
            "cmake_minimum_required(VERSION 3.20)\n\
             project(app CXX)\n\
             find_package(GpuInstr REQUIRED PATHS \"{cmake}\" NO_DEFAULT_PATH)\n\
             gpuinstr_add_tool(counter SOURCES \"{tool}\" OFFLOAD_ARCH gfx90a)\n\
             set_source_files_properties(\"{app}\" PROPERTIES LANGUAGE CXX)\n\
             add_library(vectoradd SHARED \"{app}\")\n\
             target_compile_options(vectoradd PRIVATE -x hip --offload-arch=gfx90a)\n\
             target_link_options(vectoradd PRIVATE --offload-arch=gfx90a)\n\
             gpuinstr_instrument(vectoradd TOOL counter PLAN \"{plan}\")\n",
            cmake = repo().join("cmake").display(),
            tool = example("instruction-counter").display(),
            app = repo().join("hook-sdk/examples/applications/vector-add/vector-add.hip").display(),
            plan = repo().join("hook-sdk/examples/instruction-counter/plan.toml").display(),
        ),
    )
    .unwrap();
    let link = format!("-DGPUINSTR_LINK={}", link.display());
    run_ok(&mut configure(&project, &build, &["-DCMAKE_CXX_COMPILER=hipcc", &link]));
    let built = run_ok(Command::new("cmake").arg("--build").arg(&build).env("TMPDIR", run_directory()));
    let log = String::from_utf8_lossy(&built.stdout);
    assert!(log.contains("gpuinstr: instrumenting vectoradd with counter"), "{log}");
    assert!(log.contains("hook countInstructionsVector: 17 points"), "{log}");
    let original = build.join("libvectoradd.so");
    let instrumented = build.join("instrumented/libvectoradd.so");
    let before = gpuinstr::stages::load::load(&original).unwrap().code_objects;
    let after = gpuinstr::stages::load::load(&instrumented).unwrap().code_objects;
    assert_eq!(before.len(), 1);
    let report = gpuinstr::verify::verify(&before[0], &after[0]).unwrap();
    // The counter's plan instruments every instruction of the kernel.
    assert!(report.ok() && report.regions == report.original_instructions, "{}", report.render_text());
}
