//! Tools of several translation units (-fgpu-rdc). clang 15's HIP driver does
//! not pass plugins to the device linker, so each unit embeds its own module
//! at pre-link and the device linker concatenates them; gpuinstr-link splits
//! and links them. When lld itself loads the plugin, the full-LTO-last
//! extension point embeds one module for the whole tool.

use gpuinstr::inspect;
use gpuinstr::stages::load;
use gpuinstr::tool;
use gpuinstr_tests::*;

fn hooks_of(path: &std::path::Path) -> (usize, Vec<String>) {
    let report = inspect::report(&load::load(path).unwrap()).unwrap();
    let summary = report.code_objects[0].tool.clone().expect("a tool");
    (summary.bitcode_files, summary.hooks.into_iter().map(|h| h.name).collect())
}

const ALL_HOOKS: [&str; 3] = ["countInstructionsScalar", "countInstructionsVector", "recordWorkgroup"];

#[test]
fn hipcc_rdc_embeds_one_module_per_unit() {
    let scratch = scratch();
    let library = scratch.path().join("tool.so");
    run_ok(
        hipcc()
            .args(["--offload-arch=gfx90a", "-fgpu-rdc", "-O3", "-shared", "-fPIC"])
            .arg(format!("-fpass-plugin={}", plugin().display()))
            .arg("-I")
            .arg(sdk_include())
            .arg(example("instruction-counter"))
            .arg(input("rdc/second-unit.hip"))
            .arg("-o")
            .arg(&library),
    );
    let (files, hooks) = hooks_of(&library);
    assert_eq!(files, 2);
    assert_eq!(hooks, ALL_HOOKS);
}

#[test]
fn lld_with_the_plugin_embeds_one_module_at_full_lto_last() {
    let scratch = scratch();
    let mut objects = Vec::new();
    for (index, source) in [example("instruction-counter"), input("rdc/second-unit.hip")].iter().enumerate() {
        let bitcode = scratch.path().join(format!("unit{index}.bc"));
        run_ok(
            clang()
                .args(["-x", "hip", "--offload-arch=gfx90a", "--rocm-path=/usr", "--cuda-device-only", "-fgpu-rdc"])
                .arg(format!("--rocm-device-lib-path={}", rocm_device_libs().display()))
                .args(["-O3", "-c", "-emit-llvm", "-I"])
                .arg(sdk_include())
                .arg(source)
                .arg("-o")
                .arg(&bitcode),
        );
        objects.push(bitcode);
    }
    let linked = scratch.path().join("tool.hsaco");
    run_ok(
        gpuinstr::toolchain::llvm_tool("ld.lld")
            .args(["-shared", "-plugin-opt=mcpu=gfx90a", "-plugin-opt=O3"])
            .arg(format!("--load-pass-plugin={}", plugin().display()))
            .args(&objects)
            .arg("-o")
            .arg(&linked),
    );
    let (files, hooks) = hooks_of(&linked);
    assert_eq!(files, 1);
    assert_eq!(hooks, ALL_HOOKS);
    let input = load::load(&linked).unwrap();
    assert!(tool::embedded_bitcode(&input.code_objects[0]).is_ok());
}
