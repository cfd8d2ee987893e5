//! The CMake integration builds a tool with the plugin.

use std::process::Command;

use gpuinstr::inspect;
use gpuinstr_tests::*;

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
    run_ok(
        Command::new("cmake")
            .arg("-S")
            .arg(&project)
            .arg("-B")
            .arg(&build)
            .arg(format!("-DGPUINSTR_PLUGIN={}", plugin().display())),
    );
    run_ok(Command::new("cmake").arg("--build").arg(&build));
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
