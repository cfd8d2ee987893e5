//! `gpuinstr-emulate` as a user runs it: a kernel compiled by this build's clang,
//! arguments on the command line, buffers printed; mistakes named.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const KERNEL: &str = r#"
#include <hip/hip_runtime.h>
__device__ unsigned long long Total;
__global__ void scale(float *Out, const float *In, float Factor, int N) {
  int I = blockIdx.x * blockDim.x + threadIdx.x;
  if (I < N) {
    Out[I] = In[I] * Factor;
    atomicAdd(&Total, 1ull);
  }
}
"#;

fn code_object(dir: &Path) -> PathBuf {
    let source = dir.join("scale.hip");
    std::fs::write(&source, KERNEL).unwrap();
    let output = dir.join("scale.hsaco");
    let status = gpuinstr::toolchain::llvm_tool("clang++")
        // clang leaves an empty directory in TMPDIR per HIP compilation.
        .env("TMPDIR", dir)
        .args(["-x", "hip", "--offload-arch=gfx90a", "--rocm-path=/usr"])
        .arg(format!("--rocm-device-lib-path={}", gpuinstr::toolchain::rocm_device_library_dir().display()))
        .args(["--cuda-device-only", "--no-gpu-bundle-output", "-O3", "-c"])
        .arg(&source)
        .arg("-o")
        .arg(&output)
        .status()
        .expect("clang++ runs");
    assert!(status.success());
    output
}

fn emulate(file: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuinstr-emulate"))
        .arg(file)
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap()
}

#[test]
fn runs_a_kernel_and_prints_its_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let file = code_object(dir.path());
    let kernel = "_Z5scalePfPKffi";
    let output = emulate(
        &file,
        &[
            "--kernel",
            kernel,
            "--grid",
            "2",
            "--block",
            "4",
            "--arg",
            "zeros:f32:8",
            "--arg",
            "buffer:f32:1,2,3,4,5,6,7,8",
        ]
        .iter()
        .chain(&["--arg", "f32:0.5", "--arg", "i32:6"])
        .copied()
        .collect::<Vec<_>>(),
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with(&format!("{kernel}: 2 waves, ")), "{text}");
    assert_eq!(lines[1], "argument 0: 0.5 1 1.5 2 2.5 3 0 0");
    assert_eq!(lines[2], "argument 1: 1 2 3 4 5 6 7 8");
}

#[test]
fn arguments_come_from_a_file_and_traces_name_each_instruction() {
    let dir = tempfile::tempdir().unwrap();
    let file = code_object(dir.path());
    let arguments = dir.path().join("arguments.txt");
    std::fs::write(&arguments, "# out, in, factor, n\nzeros:f32:4\nbuffer:f32:1,2,3,4\n\nf32:-2\ni32:4\n").unwrap();
    let args = ["--kernel", "_Z5scalePfPKffi", "--block", "4", "--trace", "--arguments-file"];
    let output = emulate(&file, &args.iter().copied().chain([arguments.to_str().unwrap()]).collect::<Vec<_>>());
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("argument 0: -2 -4 -6 -8"), "{text}");
    let trace: Vec<&str> = text.lines().filter(|l| l.starts_with("wave ")).collect();
    assert!(trace.first().is_some_and(|l| l.contains("exec 000000000000000f")), "{text}");
    assert!(trace.last().is_some_and(|l| l.ends_with("s_endpgm")), "{text}");
}

#[test]
fn mistakes_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = code_object(dir.path());
    let cases: [(&[&str], &str); 4] = [
        (&["--kernel", "missing"], "no kernel named missing (kernels: _Z5scalePfPKffi)"),
        (&["--kernel", "_Z5scalePfPKffi", "--arg", "f32:1"], "takes 4 arguments, 1 given"),
        (&["--kernel", "_Z5scalePfPKffi", "--arg", "vec:1"], "kernel argument `vec:1`: unknown kind"),
        (&["--kernel", "_Z5scalePfPKffi", "--managed", "Nothing:u64:1"], "no global named Nothing"),
    ];
    for (args, message) in cases {
        let output = emulate(&file, args);
        assert!(!output.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}

/// A run that stops (the input buffer is two floats short) prints the trace
/// up to the stopping instruction, then names the lane and the address.
#[test]
fn a_stopped_run_prints_its_trace_up_to_the_stop() {
    let dir = tempfile::tempdir().unwrap();
    let file = code_object(dir.path());
    let args = ["--kernel", "_Z5scalePfPKffi", "--block", "4", "--trace"];
    let arguments = ["--arg", "zeros:f32:4", "--arg", "buffer:f32:1,2", "--arg", "f32:2", "--arg", "i32:4"];
    let output = emulate(&file, &args.iter().chain(&arguments).copied().collect::<Vec<_>>());
    assert!(!output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    let trace: Vec<&str> = text.lines().filter(|l| l.starts_with("wave ")).collect();
    assert!(trace.last().is_some_and(|l| l.contains("global_load_dword")), "{text}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("lane 2: memory access of 4 bytes at"), "{stderr}");
}

/// `--unimplemented` runs nothing and says how much of the code object the
/// emulator can run: all of this kernel.
#[test]
fn unimplemented_lists_what_the_emulator_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = code_object(dir.path());
    let output = emulate(&file, &["--unimplemented"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    let first = text.lines().next().unwrap_or_default();
    let (implemented, rest) = first.split_once(" of ").unwrap_or_else(|| panic!("{text}"));
    assert!(rest.starts_with(&format!("{implemented} instructions (100.00%)")), "{text}");
    assert_eq!(text.lines().count(), 1, "nothing missing: {text}");
}

/// `--mix` adds the executed opcodes: their wave executions sum to the
/// instruction count, and every wave ends once.
#[test]
fn the_instruction_mix_adds_up() {
    let dir = tempfile::tempdir().unwrap();
    let file = code_object(dir.path());
    let args = ["--kernel", "_Z5scalePfPKffi", "--grid", "3", "--block", "64", "--mix"];
    let arguments = ["--arg", "zeros:f32:150", "--arg", "zeros:f32:150", "--arg", "f32:2", "--arg", "i32:150"];
    let output = emulate(&file, &args.iter().chain(&arguments).copied().collect::<Vec<_>>());
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    let first = text.lines().next().unwrap();
    let total: u64 = first.split(", ").nth(1).and_then(|t| t.split(' ').next()).and_then(|n| n.parse().ok()).unwrap();
    let rows: Vec<(u64, u64, &str)> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("waves"))
        .skip(1)
        .map(|l| {
            let mut f = l.split_whitespace();
            (f.next().unwrap().parse().unwrap(), f.next().unwrap().parse().unwrap(), f.next().unwrap())
        })
        .collect();
    assert_eq!(rows.iter().map(|r| r.0).sum::<u64>(), total, "{text}");
    assert!(rows.iter().any(|r| r.2 == "S_ENDPGM" && r.0 == 3), "{text}");
    // 150 of the 192 work-items are in range: the store runs on 150 lanes.
    assert!(rows.iter().any(|r| r.2.starts_with("GLOBAL_STORE_DWORD") && r.1 == 150), "{text}");
}

/// The opcode coverage list kept in docs for this build's LLVM is the one
/// this build prints (regenerate it with the command in the message).
#[test]
fn the_opcode_coverage_in_docs_is_this_builds() {
    let output = Command::new(env!("CARGO_BIN_EXE_gpuinstr-emulate")).arg("--opcode-coverage").output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed = String::from_utf8(output.stdout).unwrap();
    assert!(printed.contains("| `V_TRIG_PREOP_F64_e64` | yes | yes | yes |"), "{printed}");
    assert!(printed.contains("| `V_PK_MUL_LO_U16` | yes | yes | yes |"), "{printed}");
    let major = gpuinstr::toolchain::LLVM_MAJOR;
    let kept = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../docs/emulator-opcodes/llvm{major}.md"));
    let kept = std::fs::read_to_string(&kept).unwrap_or_default();
    assert!(
        kept == printed,
        "docs/emulator-opcodes/llvm{major}.md is not what this build prints; regenerate it with \
         `scripts/env.sh <environment> -- sh -c 'gpuinstr-emulate --opcode-coverage > docs/emulator-opcodes/llvm{major}.md'`"
    );
}

/// A host library of two translation units, each with its own gfx90a code
/// object (as a library's fat binary holds hundreds): both define `scale`,
/// the second also `shift`.
fn library_of_two(dir: &Path) -> PathBuf {
    let shift = format!("{KERNEL}\n__global__ void shift(float *Out, float By) {{ Out[threadIdx.x] += By; }}\n");
    let mut objects = Vec::new();
    for (name, source) in [("first", KERNEL.to_string()), ("second", shift)] {
        let path = dir.join(format!("{name}.hip"));
        std::fs::write(&path, source).unwrap();
        let object = dir.join(format!("{name}.o"));
        let status = gpuinstr::toolchain::llvm_tool("clang++")
            .env("TMPDIR", dir)
            .args(["-x", "hip", "--offload-arch=gfx90a", "--rocm-path=/usr", "-fPIC", "-O3", "-c"])
            .arg(format!("--rocm-device-lib-path={}", gpuinstr::toolchain::rocm_device_library_dir().display()))
            .arg(&path)
            .arg("-o")
            .arg(&object)
            .status()
            .expect("clang++ runs");
        assert!(status.success());
        objects.push(object);
    }
    let library = dir.join("libtwo.so");
    let status = gpuinstr::toolchain::llvm_tool("clang++")
        // Both host sides define `scale`'s stub; the device sides stay apart.
        .args(["-shared", "-fuse-ld=lld", "-Wl,--allow-multiple-definition"])
        .args(&objects)
        .arg("-o")
        .arg(&library)
        .status()
        .expect("clang++ links");
    assert!(status.success());
    library
}

#[test]
fn the_kernel_or_its_number_picks_among_a_librarys_code_objects() {
    let dir = tempfile::tempdir().unwrap();
    let library = library_of_two(dir.path());
    let stderr = |o: &Output| String::from_utf8_lossy(&o.stderr).to_string();
    let stdout = |o: &Output| String::from_utf8_lossy(&o.stdout).to_string();
    // The only code object defining `shift` is chosen.
    let shift = emulate(
        &library,
        &[
            "--target",
            "gfx90a",
            "--kernel",
            "_Z5shiftPff",
            "--arg",
            "buffer:f32:1,2",
            "--arg",
            "f32:0.5",
            "--block",
            "2",
        ],
    );
    assert!(shift.status.success(), "{}", stderr(&shift));
    assert!(stdout(&shift).contains("argument 0: 1.5 2.5"), "{}", stdout(&shift));
    // Two define `scale`: the error names their numbers, once each.
    let scale = [
        "--target",
        "gfx90a",
        "--kernel",
        "_Z5scalePfPKffi",
        "--arg",
        "zeros:f32:1",
        "--arg",
        "buffer:f32:3",
        "--arg",
        "f32:2",
        "--arg",
        "i32:1",
        "--block",
        "1",
    ];
    let ambiguous = emulate(&library, &scale);
    assert!(!ambiguous.status.success());
    assert!(
        stderr(&ambiguous).contains(
            "2 of its code objects for gfx90a define _Z5scalePfPKffi; pick one with --code-object (one of 0, 1)"
        ),
        "{}",
        stderr(&ambiguous)
    );
    let picked = emulate(&library, &[&scale[..], &["--code-object", "1"]].concat());
    assert!(picked.status.success(), "{}", stderr(&picked));
    assert!(stdout(&picked).contains("argument 0: 6"), "{}", stdout(&picked));
    let missing = emulate(&library, &["--target", "gfx90a", "--kernel", "nothing"]);
    assert!(
        stderr(&missing).contains("none of its 2 code objects for gfx90a defines a kernel named nothing"),
        "{}",
        stderr(&missing)
    );
    let beyond = emulate(&library, &[&scale[..], &["--code-object", "2"]].concat());
    assert!(stderr(&beyond).contains("there is no code object 2 (0 to 1)"), "{}", stderr(&beyond));
    // --unimplemented looks at both, or at the one picked.
    let both = emulate(&library, &["--target", "gfx90a", "--unimplemented"]);
    assert!(both.status.success(), "{}", stderr(&both));
    assert!(stdout(&both).lines().next().unwrap().ends_with("implemented in 2 code objects"), "{}", stdout(&both));
    let one = emulate(&library, &["--target", "gfx90a", "--unimplemented", "--code-object", "0"]);
    assert!(stdout(&one).lines().next().unwrap().ends_with("opcodes implemented"), "{}", stdout(&one));
}
