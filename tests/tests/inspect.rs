//! `inspect` on malformed and foreign inputs: one clear message naming the
//! file (and the place inside it) and what to do; never a panic.

use std::path::Path;

use gpuinstr::inspect;
use gpuinstr_tests::*;

fn error_of(path: &Path, target: Option<&str>) -> String {
    match inspect::inspect(path, target) {
        Ok(report) => panic!("{} was accepted: {report:?}", path.display()),
        Err(error) => error.to_string(),
    }
}

/// A plain device code object with one kernel, built without the plugin.
fn application(dir: &Path) -> std::path::PathBuf {
    let source = dir.join("vadd.hip");
    std::fs::write(
        &source,
        "#include <hip/hip_runtime.h>\n\
         __global__ void vadd(float *out, const float *a, const float *b, int n) {\n\
           int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
           if (i < n) out[i] = a[i] + b[i];\n\
         }\n",
    )
    .unwrap();
    let output = dir.join("vadd.hsaco");
    run_ok(
        clang()
            .args(["-x", "hip", "--offload-arch=gfx90a", "--rocm-path=/usr", "--cuda-device-only"])
            .arg(format!("--rocm-device-lib-path={}", rocm_device_libs().display()))
            .args(["--no-gpu-bundle-output", "-O3", "-c"])
            .arg(&source)
            .arg("-o")
            .arg(&output),
    );
    output
}

#[test]
fn application_code_objects_are_listed() {
    let scratch = scratch();
    let path = application(scratch.path());
    let report = inspect::inspect(&path, None).unwrap();
    let text = inspect::render_text(&report);
    compiler_snapshot!("inspect_application", normalize(&text, scratch.path()));
    let kernel = &report.code_objects[0].kernels[0];
    assert_eq!(kernel.name, "_Z4vaddPfPKfS1_i");
    assert_eq!(kernel.arguments, 4);
    assert!(report.code_objects[0].tool.is_none());
    // JSON for machines carries the same facts.
    let json: serde_json::Value = serde_json::to_value(&report).unwrap();
    assert_eq!(json["code_objects"][0]["kernels"][0]["arguments"], 4);
    assert_eq!(json["code_objects"][0]["target"], "gfx90a");
}

#[test]
fn bad_inputs_give_one_clear_message() {
    let scratch = scratch();
    let dir = scratch.path();
    let good = std::fs::read(application(dir)).unwrap();
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("text", b"just some text\n".to_vec()),
        ("bitcode", b"BC\xc0\xde\x35\x14\x00\x00".to_vec()),
        ("host-elf-without-fatbin", std::fs::read("/bin/true").unwrap()),
        ("truncated-header", good[..40].to_vec()),
        ("truncated-sections", good[..good.len() / 2].to_vec()),
    ];
    // Wrong machine: the same object claiming to be x86-64 code.
    let mut wrong_machine = good.clone();
    wrong_machine[18..20].copy_from_slice(&62u16.to_le_bytes());
    cases.push(("wrong-machine", wrong_machine));
    // A kernel descriptor symbol pointing past the end of .rodata.
    let mut descriptor_outside = good.clone();
    assert!(patch_symbol_value(&mut descriptor_outside, "_Z4vaddPfPKfS1_i.kd", 0x7fff_0000) > 0);
    cases.push(("descriptor-outside-rodata", descriptor_outside));
    // Unknown code object version.
    let mut future_version = good.clone();
    future_version[8] = 9;
    cases.push(("unknown-version", future_version));

    let mut messages = String::new();
    for (name, bytes) in cases {
        let path = dir.join(name);
        std::fs::write(&path, &bytes).unwrap();
        let message = error_of(&path, None);
        assert!(message.starts_with(&path.display().to_string()), "{name}: message does not name the file: {message}");
        assert!(!message.contains('\n'), "{name}: more than one line: {message}");
        messages.push_str(&format!("{name}: {}\n", normalize(&message, dir)));
    }

    // A code object whose metadata note was removed.
    let stripped = dir.join("no-metadata");
    run_ok(
        gpuinstr::toolchain::llvm_tool("llvm-objcopy")
            .arg("--remove-section=.note")
            .arg(dir.join("vadd.hsaco"))
            .arg(&stripped),
    );
    messages.push_str(&format!("no-metadata: {}\n", normalize(&error_of(&stripped, None), dir)));

    // A target the input does not have.
    messages
        .push_str(&format!("wrong-target: {}\n", normalize(&error_of(&dir.join("vadd.hsaco"), Some("gfx908")), dir)));

    compiler_snapshot!("inspect_bad_inputs", messages);
}

/// A tool built with -fembed-bitcode: clang's second phase drops the
/// processor, and the message says why.
#[test]
fn tools_built_with_embed_bitcode_are_refused() {
    let scratch = scratch();
    let output = scratch.path().join("tool.o");
    let mut command = tool_compile_command(Compiler::Clang, &example("instruction-counter"), "-O3", &output);
    command.arg("-fembed-bitcode");
    run_ok(&mut command);
    let message = error_of(&output, None);
    assert!(message.contains("-fembed-bitcode"), "{message}");
}

/// A two-target fat binary from hipcc, as a host object and as the raw
/// offload bundle taken out of its .hip_fatbin; --target picks one.
#[test]
fn bundles_and_target_selection() {
    let scratch = scratch();
    let dir = scratch.path();
    let host = dir.join("tool.o");
    run_ok(
        hipcc()
            .args(["--offload-arch=gfx908", "--offload-arch=gfx90a:xnack-", "-O3", "-c"])
            .arg(format!("-fpass-plugin={}", plugin().display()))
            .arg("-I")
            .arg(sdk_include())
            .arg(example("kernel-arguments"))
            .arg("-o")
            .arg(&host),
    );
    let report = inspect::inspect(&host, None).unwrap();
    let targets: Vec<&str> = report.code_objects.iter().map(|c| c.target.as_str()).collect();
    assert_eq!(targets, ["gfx908", "gfx90a:xnack-"]);
    assert!(report.code_objects.iter().all(|c| c.tool.as_ref().is_some_and(|t| t.hooks.len() == 1)));

    let selected = inspect::inspect(&host, Some("gfx90a")).unwrap();
    assert_eq!(selected.code_objects.len(), 1);
    assert_eq!(selected.code_objects[0].target, "gfx90a:xnack-");
    assert_eq!(inspect::inspect(&host, Some("gfx90a:xnack-")).unwrap().code_objects.len(), 1);
    assert!(error_of(&host, Some("gfx90a:xnack+")).contains("the input has gfx908, gfx90a:xnack-"));

    let bundle = dir.join("tool.bundle");
    run_ok(
        gpuinstr::toolchain::llvm_tool("llvm-objcopy")
            .arg(format!("--dump-section=.hip_fatbin={}", bundle.display()))
            .arg(&host),
    );
    let from_bundle = inspect::inspect(&bundle, None).unwrap();
    assert_eq!(from_bundle.kind, "offload bundle");
    assert_eq!(from_bundle.code_objects.len(), 2);
    assert_eq!(from_bundle.code_objects[1].origin, "entry hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-");

    // A bundle cut short is an error naming the bundle problem.
    let bytes = std::fs::read(&bundle).unwrap();
    let cut = dir.join("cut.bundle");
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    let message = error_of(&cut, None);
    assert!(message.contains("offload bundle is malformed or truncated"), "{message}");
}
