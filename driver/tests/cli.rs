//! The `gpuinstr-link` binary: exit codes, one-line errors, JSON output.

use std::path::Path;
use std::process::Command;

fn gpuinstr_link() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gpuinstr-link"))
}

/// A device code object for `processor` compiled from a small kernel (no plugin needed).
fn compile_kernel(dir: &Path, processor: &str) -> std::path::PathBuf {
    let source = dir.join("scale.hip");
    std::fs::write(
        &source,
        "#include <hip/hip_runtime.h>\n__global__ void scale(float *x, float s) { x[threadIdx.x] *= s; }\n",
    )
    .unwrap();
    let output = dir.join(format!("scale-{processor}.hsaco"));
    let status = gpuinstr::toolchain::llvm_tool("clang++")
        // clang leaves an empty directory in TMPDIR per HIP compilation.
        .env("TMPDIR", dir)
        .args(["-x", "hip", "--rocm-path=/usr", "--cuda-device-only"])
        .arg(format!("--offload-arch={processor}"))
        .arg(format!("--rocm-device-lib-path={}", gpuinstr::toolchain::rocm_device_library_dir().display()))
        .args(["--no-gpu-bundle-output", "-O3", "-c"])
        .arg(&source)
        .arg("-o")
        .arg(&output)
        .status()
        .expect("clang++ runs");
    assert!(status.success());
    output
}

fn code_object(dir: &Path) -> std::path::PathBuf {
    compile_kernel(dir, "gfx90a")
}

#[test]
fn inspect_prints_text_and_json() {
    let dir = std::env::temp_dir().join(format!("gpuinstr-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let object = code_object(&dir);

    let text = gpuinstr_link().arg("inspect").arg(&object).output().unwrap();
    assert!(text.status.success());
    let stdout = String::from_utf8(text.stdout).unwrap();
    assert!(stdout.contains("kernel _Z5scalePff"), "{stdout}");
    // The version the compiler wrote (ELF ABI version 2 is v4, 4 is v6).
    let version = std::fs::read(&object).unwrap()[8] + 2;
    assert!(stdout.contains(&format!("target gfx90a, code object v{version}, 1 kernel")), "{stdout}");

    let json = gpuinstr_link().arg("inspect").arg("--json").arg(&object).output().unwrap();
    assert!(json.status.success());
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(value["code_objects"][0]["kernels"][0]["name"], "_Z5scalePff");
    assert_eq!(value["code_objects"][0]["kernels"][0]["arguments"], 2);
    assert!(value["code_objects"][0]["tool"].is_null());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn errors_are_one_line_with_a_failing_exit_code() {
    let output = gpuinstr_link().arg("inspect").arg("Cargo.toml").output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("gpuinstr-link: error: Cargo.toml: not an AMDGPU code object"), "{stderr}");

    let missing = gpuinstr_link().arg("inspect").arg("does-not-exist.o").output().unwrap();
    assert_eq!(missing.status.code(), Some(1));
    let stderr = String::from_utf8(missing.stderr).unwrap();
    assert!(stderr.contains("does-not-exist.o: cannot read the file"), "{stderr}");
}

#[test]
fn lift_and_roundtrip_errors_name_the_file_and_write_nothing() {
    let dir = std::env::temp_dir().join(format!("gpuinstr-cli-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let unsupported = compile_kernel(&dir, "gfx803");
    let out = dir.join("out.hsaco");
    let run = |args: &[&std::ffi::OsStr]| {
        let output = gpuinstr_link().args(args).output().unwrap();
        (output.status.code(), String::from_utf8(output.stderr).unwrap())
    };

    let (code, stderr) = run(&["roundtrip".as_ref(), unsupported.as_os_str(), "-o".as_ref(), out.as_os_str()]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("scale-gfx803.hsaco: gpuinstr lifts the GFX9 family"), "{stderr}");
    assert!(stderr.contains("this code object is for gfx803"), "{stderr}");
    assert!(!out.exists(), "a failed round trip left an output file");

    // A processor of the ABI that this build's LLVM does not decode (gfx950
    // is LLVM 21's): the error names the build that does.
    if gpuinstr::toolchain::LLVM_MAJOR < 21 {
        let mut bytes = std::fs::read(code_object(&dir)).unwrap();
        bytes[48] = 0x4f; // e_flags' processor: gfx950
        let newer = dir.join("gfx950.hsaco");
        std::fs::write(&newer, bytes).unwrap();
        let (code, stderr) = run(&["lift".as_ref(), newer.as_os_str()]);
        assert_eq!(code, Some(1));
        assert!(stderr.contains("which does not decode gfx950: LLVM 21 knows it"), "{stderr}");
        assert!(stderr.contains("scripts/env.sh sid"), "{stderr}");
    }

    let good = code_object(&dir);
    let (code, stderr) = run(&["lift".as_ref(), good.as_os_str(), "--kernel".as_ref(), "nosuch".as_ref()]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("no kernel or device function named `nosuch`"), "{stderr}");

    // A fat binary with several code objects needs --target.
    let fat = dir.join("fat.o");
    let status = Command::new("hipcc")
        .env("TMPDIR", &dir)
        .args(["--offload-arch=gfx908", "--offload-arch=gfx90a", "-O3", "-c"])
        .arg(dir.join("scale.hip"))
        .arg("-o")
        .arg(&fat)
        .status()
        .unwrap();
    assert!(status.success());
    let (code, stderr) = run(&["lift".as_ref(), fat.as_os_str(), "--emit".as_ref(), "cfg".as_ref()]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("several code objects (gfx908, gfx90a); pick one with --target"), "{stderr}");

    // With --target it works, and roundtrip --check reports identity.
    let (code, stderr) = run(&[
        "roundtrip".as_ref(),
        fat.as_os_str(),
        "--target".as_ref(),
        "gfx908".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
        "--check".as_ref(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(out.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn analyze_reports_and_points_at_instructions() {
    let dir = std::env::temp_dir().join(format!("gpuinstr-cli-analyze-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let object = code_object(&dir);
    let run = |args: &[&str]| {
        let output = gpuinstr_link().arg("analyze").arg(&object).args(args).output().unwrap();
        (output.status.code(), String::from_utf8(output.stdout).unwrap(), String::from_utf8(output.stderr).unwrap())
    };

    let (code, stdout, _) = run(&[]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("kernel _Z5scalePff"), "{stdout}");
    assert!(stdout.contains("stack base (2 SGPRs): "), "{stdout}");

    let (code, stdout, _) = run(&["--json"]);
    assert_eq!(code, Some(0));
    let value: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let kernel = &value["code_objects"][0]["kernels"][0];
    assert_eq!(kernel["name"], "_Z5scalePff");
    assert!(kernel["sgpr"]["allocated"].as_u64().unwrap() >= kernel["sgpr"]["used_up_to"].as_u64().unwrap());

    let (code, stdout, _) = run(&["--at", "_Z5scalePff:0"]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("_Z5scalePff #0 at"), "{stdout}");
    assert!(stdout.contains("live before:") && stdout.contains("free SGPRs:"), "{stdout}");

    let (code, _, stderr) = run(&["--at", "_Z5scalePff:100000"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("index 100000 is past the end"), "{stderr}");
    let (code, _, stderr) = run(&["--at", "nocolon"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("--at takes KERNEL:INDEX"), "{stderr}");
    let (code, _, stderr) = run(&["--kernel", "nosuch"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("no kernel named `nosuch`"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A file instrument cannot read is named once, with what is wrong.
#[test]
fn instrument_names_an_unreadable_input_once() {
    let dir = std::env::temp_dir().join(format!("gpuinstr-cli-twice-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut bytes = std::fs::read(code_object(&dir)).unwrap();
    bytes[8] = 9; // EI_ABIVERSION: no code object version
    let input = dir.join("future.hsaco");
    std::fs::write(&input, bytes).unwrap();
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, "[[insert]]\nhook = \"count\"\nwhere = \"kernel-entry\"\n").unwrap();
    let output = gpuinstr_link()
        .arg("instrument")
        .arg(&input)
        .arg("--tool")
        .arg(minimal_tool(&dir))
        .arg("--plan")
        .arg(&plan)
        .arg("-o")
        .arg(dir.join("out.hsaco"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.matches("future.hsaco").count(), 1, "{stderr}");
    assert!(stderr.contains("unsupported code object version (ABI version 9)"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Code gpuinstr lifts but does not analyse (wave32 RDNA): every mode says
/// why, naming the processor, and fails; lifting and round trips work.
#[test]
fn code_that_is_only_lifted_is_refused_by_analyze_in_every_mode() {
    let dir = std::env::temp_dir().join(format!("gpuinstr-cli-rdna-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let object = compile_kernel(&dir, "gfx1030");
    for mode in [&[][..], &["--json"][..], &["--at", "_Z5scalePff:0"][..]] {
        let output = gpuinstr_link().arg("analyze").arg(&object).args(mode).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{mode:?}");
        assert!(stderr.contains("gfx1030 code is lifted and round-tripped, not analysed"), "{mode:?}: {stderr}");
        assert!(stderr.contains("wave32"), "{mode:?}: {stderr}");
    }
    let output = gpuinstr_link().arg("lift").arg(&object).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let copy = dir.join("copy.hsaco");
    let output = gpuinstr_link().arg("roundtrip").arg(&object).arg("-o").arg(&copy).arg("--check").output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A minimal tool without the plugin: any device code object with hook
/// bitcode in `.llvmbc` (here one hook, `count`, calling sAtomicAdd).
fn minimal_tool(dir: &Path) -> std::path::PathBuf {
    let ir = dir.join("hooks.ll");
    std::fs::write(
        &ir,
        "target triple = \"amdgcn-amd-amdhsa\"\n\
         @Count = external addrspace(1) global i64\n\
         declare void @\"gpuinstr::sAtomicAdd.void.p1.i64\"(ptr addrspace(1), i64) #1\n\
         declare i32 @\"gpuinstr::workitemIdX.i32\"() #2\n\
         define void @count() #0 {\n  call void @\"gpuinstr::sAtomicAdd.void.p1.i64\"(ptr addrspace(1) @Count, i64 1)\n  ret void\n}\n\
         define void @lane() #0 {\n  %x = call i32 @\"gpuinstr::workitemIdX.i32\"()\n  %p = getelementptr i32, ptr addrspace(1) @Count, i32 %x\n  store i32 1, ptr addrspace(1) %p\n  ret void\n}\n\
         attributes #0 = { \"gpuinstr_hook\" }\n\
         attributes #1 = { \"gpuinstr_intrinsic\"=\"gpuinstr::sAtomicAdd\" }\n\
         attributes #2 = { \"gpuinstr_intrinsic\"=\"gpuinstr::workitemIdX\" }\n",
    )
    .unwrap();
    let bitcode = dir.join("hooks.bc");
    assert!(gpuinstr::toolchain::llvm_tool("llvm-as").arg(&ir).arg("-o").arg(&bitcode).status().unwrap().success());
    let tool = dir.join("tool.hsaco");
    let status = gpuinstr::toolchain::llvm_tool("llvm-objcopy")
        .arg(format!("--add-section=.llvmbc={}", bitcode.display()))
        .arg(code_object(dir))
        .arg(&tool)
        .status()
        .unwrap();
    assert!(status.success());
    tool
}

#[test]
fn payload_prints_the_code_of_one_hook_call() {
    let dir = std::env::temp_dir().join(format!("gpuinstr-cli-payload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tool = minimal_tool(&dir);
    let app = compile_kernel(&dir, "gfx90a");
    let run = |extra: &[&str]| {
        let output = gpuinstr_link().arg("payload").arg(&app).arg("--tool").arg(&tool).args(extra).output().unwrap();
        (output.status.code(), String::from_utf8(output.stdout).unwrap(), String::from_utf8(output.stderr).unwrap())
    };
    let (code, stdout, stderr) = run(&["--hook", "count", "--at", "_Z5scalePff:0"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("kernel _Z5scalePff, instruction 0 ("), "{stdout}");
    assert!(stdout.contains("    s_atomic_add_x2 s["), "{stdout}");
    assert!(stdout.contains("; writes "), "{stdout}");

    let (code, stdout, _) = run(&["--hook", "count", "--at", "_Z5scalePff:0", "--stages"]);
    assert_eq!(code, Some(0));
    for stage in ["== stage 5", "== stage 6", "== stage 7", "== stage 8", "== final code"] {
        assert!(stdout.contains(stage), "{stage} missing:\n{stdout}");
    }

    for (extra, message) in [
        (
            &["--hook", "missing", "--at", "_Z5scalePff:0"][..],
            "the tool has no hook `missing` (its hooks: count, lane)",
        ),
        (&["--hook", "count", "--at", "_Z5scalePff:99999"][..], "`_Z5scalePff` has "),
        (&["--hook", "count", "--at", "nowhere:0"][..], "no kernel or device function named `nowhere`"),
        (&["--hook", "count", "--arg", "banana", "--at", "_Z5scalePff:0"][..], "`banana` is not a hook argument"),
        // A hook reading threadIdx needs the ids' register, which only the
        // kernel preamble keeps: said, not left to llc.
        (&["--hook", "lane", "--at", "_Z5scalePff:0"][..], "with `gpuinstr-link payload` give --work-item-ids"),
    ] {
        let (code, stdout, stderr) = run(extra);
        assert_eq!(code, Some(1), "{extra:?}: {stdout}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with("gpuinstr-link: error: ") && stderr.contains(message), "{extra:?}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A processor the build's CoMGR predates (Debian 12's CoMGR and gfx940)
/// is linked with ld.lld when asked; by default the error says so, once,
/// and nothing is written.
#[test]
fn a_processor_comgr_does_not_know_is_linked_with_lld_when_asked() {
    if gpuinstr::native::comgr::knows_processor("gfx940") || gpuinstr::toolchain::LLVM_MAJOR >= 21 {
        return; // trixie's and sid's CoMGR know every processor their LLVM decodes.
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let tool = minimal_tool(dir);
    let app = compile_kernel(dir, "gfx940");
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, "[[insert]]\nhook = \"count\"\nwhere = \"kernel-entry\"\n").unwrap();
    let output = dir.join("out.hsaco");
    let run = |extra: &[&str]| {
        let result = gpuinstr_link()
            .arg("instrument")
            .arg(&app)
            .args(["--tool", tool.to_str().unwrap(), "--plan", plan.to_str().unwrap(), "-o", output.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap();
        (result.status.code(), String::from_utf8(result.stderr).unwrap())
    };
    let (code, stderr) = run(&[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("does not know amdgcn-amd-amdhsa--gfx940: link with `--linker lld`"), "{stderr}");
    assert!(!output.exists());
    let (code, stderr) = run(&["--linker", "lld"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(output.exists());
}

#[test]
fn instrument_writes_the_output_only_on_success() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let tool = minimal_tool(dir);
    let app = compile_kernel(dir, "gfx90a");
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, "[[insert]]\nhook = \"count\"\nwhere = \"kernel-entry\"\n").unwrap();
    let output = dir.join("out.hsaco");
    let run = |plan: &Path| {
        let result = gpuinstr_link()
            .arg("instrument")
            .arg(&app)
            .arg("--tool")
            .arg(&tool)
            .arg("--plan")
            .arg(plan)
            .arg("-o")
            .arg(&output)
            .output()
            .unwrap();
        (result.status.code(), String::from_utf8(result.stdout).unwrap(), String::from_utf8(result.stderr).unwrap())
    };

    let missing = dir.join("missing.toml");
    let (code, _, stderr) = run(&missing);
    assert_eq!(code, Some(1));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("missing.toml: cannot read the plan: No such file or directory"), "{stderr}");
    // The cause is said once, not repeated by the error chain.
    assert_eq!(stderr.matches("No such file or directory").count(), 1, "{stderr}");
    assert!(!output.exists());

    let wrong = dir.join("wrong.toml");
    std::fs::write(&wrong, "[[insert]]\nhook = \"absent\"\nwhere = \"kernel-entry\"\n").unwrap();
    let (code, _, stderr) = run(&wrong);
    assert_eq!(code, Some(1));
    // Named by the plan and the tool, before any work.
    assert!(stderr.contains("wrong.toml: insert 1 (hook `absent`): the tool "), "{stderr}");
    assert!(stderr.contains("tool.hsaco has no such hook (its hooks: count, lane)"), "{stderr}");
    assert!(!output.exists());

    let (code, stdout, stderr) = run(&plan);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("hook count: 1 points"), "{stdout}");
    assert!(stdout.contains(&format!("wrote {}", output.display())), "{stdout}");
    let elf = std::fs::read(&output).unwrap();
    assert_eq!(&elf[..4], b"\x7fELF");
    // No temporary file is left next to the output.
    let left: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.iter().all(|name| !name.to_string_lossy().contains(".tmp")), "{left:?}");

    // verify: the output against its original passes; the original against
    // itself has nothing inserted and passes; against another kernel fails.
    let verify = |original: &Path, instrumented: &Path| {
        let result = gpuinstr_link().arg("verify").arg(original).arg(instrumented).output().unwrap();
        (result.status.code(), String::from_utf8(result.stdout).unwrap())
    };
    let (code, stdout) = verify(&app, &output);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("inserted regions preserving the live registers: 1 (") && stdout.ends_with("verified\n"));
    let (code, stdout) = verify(&app, &app);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("inserted regions preserving the live registers: 0 (0 instructions)"), "{stdout}");
    let (code, stdout) = verify(&output, &app);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("1 findings:") && stdout.contains("expected the original instruction"), "{stdout}");
}

/// `gpuinstr-link lift X | head` must not panic when the reader goes away.
#[test]
fn a_closed_output_pipe_ends_the_command_quietly() {
    let dir = std::env::temp_dir().join(format!("gpuinstr-cli-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let object = code_object(&dir);
    let mut child = gpuinstr_link()
        .arg("lift")
        .arg(&object)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader is gone before anything is written
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A gfx90a kernel whose 32 VGPRs and 32 AGPRs are all live at once (a
/// 64-register allocation), assembled from text.
fn dense_kernel(dir: &Path, processor: &str, sgprs_live: bool) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let mut body = String::new();
    for v in 0..32 {
        body += &format!("\tv_mov_b32_e32 v{v}, 0\n");
    }
    for a in 0..32 {
        body += &format!("\tv_accvgpr_write_b32 a{a}, 0\n");
    }
    let sgprs = if sgprs_live { 102 } else { 16 };
    if sgprs_live {
        for s in 0..sgprs {
            body += &format!("\ts_mov_b32 s{s}, {s}\n");
        }
    }
    for v in 1..32 {
        body += &format!("\tv_add_u32_e32 v0, v0, v{v}\n");
    }
    if sgprs_live {
        for s in 1..sgprs {
            body += &format!("\ts_add_u32 s0, s0, s{s}\n");
        }
        body += "\tv_add_u32_e32 v0, s0, v0\n";
    }
    for a in 0..32 {
        body += &format!("\tv_accvgpr_read_b32 v1, a{a}\n");
    }
    let text = format!(
        "\t.amdgcn_target \"amdgcn-amd-amdhsa--{processor}\"\n\t.text\n\t.globl dense\n\t.p2align 8\n\t.type dense,@function\n\
         dense:\n{body}\tglobal_store_dword v[0:1], v0, off\n\ts_endpgm\n\t.size dense, .-dense\n\
         \t.section .rodata,\"a\",@progbits\n\t.p2align 6\n\t.amdhsa_kernel dense\n\
         \t.amdhsa_next_free_vgpr 64\n\t.amdhsa_next_free_sgpr {sgprs}\n\t.amdhsa_accum_offset 32\n\t.end_amdhsa_kernel\n\
         \t.amdgpu_metadata\n---\namdhsa.kernels:\n  - .name: dense\n    .symbol: dense.kd\n\
         \x20   .kernarg_segment_size: 0\n    .kernarg_segment_align: 8\n    .group_segment_fixed_size: 0\n\
         \x20   .private_segment_fixed_size: 0\n    .wavefront_size: 64\n    .sgpr_count: {sgprs}\n    .vgpr_count: 64\n\
         \x20   .max_flat_workgroup_size: 256\namdhsa.target: amdgcn-amd-amdhsa--{processor}\namdhsa.version:\n  - 1\n  - 1\n...\n\
         \t.end_amdgpu_metadata\n"
    );
    let source = dir.join("dense.s");
    std::fs::write(&source, text).unwrap();
    let object = dir.join("dense.o");
    let status = gpuinstr::toolchain::llvm_tool("llvm-mc")
        .args(["-triple=amdgcn-amd-amdhsa", &format!("-mcpu={processor}"), "-filetype=obj"])
        .arg(&source)
        .arg("-o")
        .arg(&object)
        .status()
        .unwrap();
    assert!(status.success());
    let linked = dir.join("dense.hsaco");
    let status = gpuinstr::toolchain::llvm_tool("ld.lld")
        .args(["-shared", "--no-undefined"])
        .arg(&object)
        .arg("-o")
        .arg(&linked)
        .status()
        .unwrap();
    assert!(status.success());
    linked
}

/// A tool whose hook needs VGPRs (a lane id stored to a global).
fn vector_tool(dir: &Path) -> std::path::PathBuf {
    let ir = dir.join("vector.ll");
    std::fs::write(
        &ir,
        "target triple = \"amdgcn-amd-amdhsa\"\n\
         @Lane = external addrspace(1) global i32\n\
         declare i32 @llvm.amdgcn.mbcnt.lo(i32, i32)\n\
         define void @lane() #0 {\n  %l = call i32 @llvm.amdgcn.mbcnt.lo(i32 -1, i32 0)\n  \
         store volatile i32 %l, ptr addrspace(1) @Lane\n  ret void\n}\n\
         attributes #0 = { \"gpuinstr_hook\" }\n",
    )
    .unwrap();
    let bitcode = dir.join("vector.bc");
    assert!(gpuinstr::toolchain::llvm_tool("llvm-as").arg(&ir).arg("-o").arg(&bitcode).status().unwrap().success());
    let tool = dir.join("vector-tool.hsaco");
    let status = gpuinstr::toolchain::llvm_tool("llvm-objcopy")
        .arg(format!("--add-section=.llvmbc={}", bitcode.display()))
        .arg(code_object(dir))
        .arg(&tool)
        .status()
        .unwrap();
    assert!(status.success());
    tool
}

/// Points left out fail the run with one line saying how many and why, and
/// nothing is written; the temporary directory is left empty whatever
/// happens (llc's failed inputs were kept there), and the failed inputs go
/// where --keep-failed says. (A kernel keeping every VGPR, AGPR and SGPR
/// live: no SGPR pair is left to save EXEC in around a payload's copies.
/// Where SGPRs are dead, the SVA lives in memory and every point is
/// placed.)
#[test]
fn left_out_points_fail_the_run_and_no_temporary_file_stays() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let gfx90a = dense_kernel(dir, "gfx90a", false);
    // MI300: gfx940 with LLVM 15, gfx942 since (LLVM 20 dropped gfx940).
    let mi300 = if gpuinstr::toolchain::LLVM_MAJOR >= 17 { "gfx942" } else { "gfx940" };
    let app = dense_kernel(&dir.join(mi300), mi300, true);
    let tool = vector_tool(dir);
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, "[[insert]]\nhook = \"lane\"\nwhere = \"each-instruction\"\n").unwrap();
    let output = dir.join("out.hsaco");
    let run = |extra: &[&str]| {
        let result = gpuinstr_link()
            .env("TMPDIR", &tmp)
            .arg("instrument")
            .arg(&app)
            .arg("--tool")
            .arg(&tool)
            .arg("--plan")
            .arg(&plan)
            .arg("-o")
            .arg(&output)
            // Debian 12's CoMGR predates MI300.
            .args(["--linker", "lld"])
            .args(extra)
            .output()
            .unwrap();
        (result.status.code(), String::from_utf8(result.stdout).unwrap(), String::from_utf8(result.stderr).unwrap())
    };
    let left_in_tmp = || std::fs::read_dir(&tmp).unwrap().count();

    let (code, _, stderr) = run(&["--grow-registers=never"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(" selected points would be left out"), "{stderr}");
    assert!(stderr.contains("no registers for the payload") && stderr.contains("--allow-partial"), "{stderr}");
    assert!(!output.exists());
    assert_eq!(left_in_tmp(), 0, "temporary files left behind");

    let (code, stdout, stderr) = run(&["--grow-registers=never", "--allow-partial"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("PARTIAL: "), "{stdout}");
    assert!(output.exists());
    assert_eq!(left_in_tmp(), 0, "temporary files left behind");

    let kept = dir.join("kept");
    let (code, _, _) = run(&["--grow-registers=never", "--keep-failed", kept.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    let kept_files: Vec<_> = std::fs::read_dir(&kept).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(kept_files.iter().any(|n| n.to_string_lossy().ends_with("payloads.mir")), "{kept_files:?}");

    // Growing (at a cost in occupancy: the kernel is at 8 waves), every
    // point is placed.
    std::fs::remove_file(&output).unwrap();
    let (code, stdout, stderr) = run(&["--grow-registers"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stdout.contains("PARTIAL"), "{stdout}");
    assert_eq!(left_in_tmp(), 0, "temporary files left behind");

    // On gfx90a, not growing, the SVA lives in memory and the payloads
    // save live VGPRs in scratch through it: every point is placed.
    std::fs::remove_file(&output).unwrap();
    let result = gpuinstr_link()
        .env("TMPDIR", &tmp)
        .args(["instrument", gfx90a.to_str().unwrap(), "--tool", tool.to_str().unwrap()])
        .args(["--plan", plan.to_str().unwrap(), "--grow-registers=never", "-o", output.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8(result.stdout).unwrap();
    assert_eq!(result.status.code(), Some(0), "{}", String::from_utf8_lossy(&result.stderr));
    assert!(!stdout.contains("PARTIAL") && stdout.contains("live VGPRs in scratch memory"), "{stdout}");
    assert_eq!(left_in_tmp(), 0, "temporary files left behind");
}

/// A run killed outright (SIGKILL: the OOM killer, a memory cgroup's
/// limit) cannot remove its temporary root; the next run removes it, and
/// leaves a live run's root and anything else in TMPDIR alone.
#[test]
fn a_killed_runs_temporary_files_go_with_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let object = code_object(dir.path());
    // A run started, put its files in its root and was killed.
    let mut dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let killed = tmp.join("gpuinstr-link-killed");
    std::fs::create_dir_all(killed.join("llc")).unwrap();
    std::fs::write(killed.join("llc/payloads.mir"), "...").unwrap();
    std::fs::write(killed.join("gpuinstr-link.pid"), dead_pid.to_string()).unwrap();
    // A run still going (this test's process), and a root being made.
    let running = tmp.join("gpuinstr-link-running");
    std::fs::create_dir_all(&running).unwrap();
    std::fs::write(running.join("gpuinstr-link.pid"), std::process::id().to_string()).unwrap();
    let being_made = tmp.join("gpuinstr-link-new");
    std::fs::create_dir_all(&being_made).unwrap();
    let other = tmp.join("notes.txt");
    std::fs::write(&other, "mine").unwrap();

    let result = gpuinstr_link().env("TMPDIR", &tmp).arg("inspect").arg(&object).output().unwrap();
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
    assert!(!killed.exists(), "the killed run's root stays");
    assert!(running.exists() && being_made.exists() && other.exists());
    let mut left: Vec<String> =
        std::fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    assert_eq!(left, ["gpuinstr-link-new", "gpuinstr-link-running", "notes.txt"], "this run's own root stays");
}
