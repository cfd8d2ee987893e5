//! Unmodified HIP programs, built by hipcc, run on the emulated GPU under
//! Debian 12's HIP runtime and ROCr, and print what their CPU checks expect.

mod common;

use common::{assert_lines, build, build_with, run_ok};

const TARGETS: [&str; 2] = ["gfx90a", "gfx908"];

/// The targets above and, where the environment's ROCr knows it (6.1 and
/// newer: trixie, sid and experimental, whose gpuinstr builds use LLVM 17,
/// 21 and 22), the MI300X model; where its HIP runtime knows it too (7.2:
/// experimental, LLVM 22), the MI355X model. (sid's ROCr 6.4 knows the
/// MI355X model, but its HIP runtime does not: see below.)
fn every_model() -> Vec<&'static str> {
    let mut targets = TARGETS.to_vec();
    if gpuinstr::toolchain::LLVM_MAJOR >= 17 {
        targets.push("gfx942");
    }
    if gpuinstr::toolchain::LLVM_MAJOR >= 22 {
        targets.push("gfx950");
    }
    targets
}

#[test]
fn vector_add_runs_on_every_model() {
    let scratch = tempfile::tempdir().unwrap();
    for target in every_model() {
        let program = build("vector_add", target, scratch.path());
        assert_eq!(run_ok(&program, target, &[]), "PASSED\n", "{target}");
    }
}

/// sid's hipcc 7.0 builds for gfx950 and its ROCr 6.4 creates the MI355X
/// model's agent (rocminfo lists it), but its HIP runtime (clr 6.4 as
/// Debian builds it) refuses the device: "Unsupported HSA device gfx950",
/// and the program fails before any kernel runs. HIP 7.2 (the experimental
/// environment, LLVM 22) knows gfx950: there the program passes.
#[test]
fn a_program_for_gfx950_passes_where_the_hip_runtime_knows_gfx950() {
    if gpuinstr::toolchain::LLVM_MAJOR < 21 {
        return; // no hipcc here builds for gfx950
    }
    let scratch = tempfile::tempdir().unwrap();
    let program = build("vector_add", "gfx950", scratch.path());
    let output = common::gpuinstr_run()
        .args(["--target", "gfx950", "--device-memory", "4G", "--"])
        .arg(&program)
        .env("AMD_LOG_LEVEL", "1")
        .output()
        .expect("gpuinstr-run runs");
    let printed = String::from_utf8_lossy(&output.stdout);
    let errors = String::from_utf8_lossy(&output.stderr);
    if gpuinstr::toolchain::LLVM_MAJOR >= 22 {
        assert_eq!(printed, "PASSED\n", "{errors}");
    } else {
        assert!(errors.contains("Unsupported HSA device gfx950 (PCI ID 75a3)"), "{printed}{errors}");
    }
}

/// Streams destroyed while the GPU runs another stream's kernel, as
/// HeCBench's lfib4 does: the long kernel's results arrive and nothing
/// reads a destroyed queue's ring (the ordering itself is held by
/// `kfd::tests::a_queue_is_destroyed_only_when_the_command_processor_lets_go`).
#[test]
fn streams_destroyed_while_the_gpu_is_busy() {
    let scratch = tempfile::tempdir().unwrap();
    let program = build("streams_destroyed", "gfx90a", scratch.path());
    for _ in 0..3 {
        assert_eq!(run_ok(&program, "gfx90a", &[]), "PASSED: 0 wrong\n");
    }
}

/// Code built for an Instinct board's default, ECC on (`sramecc+`), runs on
/// the emulated boards as they come; code built for `sramecc-` is refused
/// there, as on the board, and runs where ECC is turned off
/// (`--sramecc off`). Code for either (`gfx90a`) runs on both.
#[test]
fn code_for_the_boards_ecc_setting_runs_and_code_for_the_other_is_refused() {
    let scratch = tempfile::tempdir().unwrap();
    for target in ["gfx90a", "gfx908"] {
        let program = |setting: &str| {
            let directory = scratch.path().join(setting);
            std::fs::create_dir_all(&directory).unwrap();
            build_with("vector_add.hip", &format!("{target}:sramecc{setting}"), &directory, &[])
        };
        let (on, off) = (program("+"), program("-"));
        let run = |program: &std::path::Path, options: &[&str]| {
            common::gpuinstr_run().args(["--target", target]).args(options).arg("--").arg(program).output().unwrap()
        };
        assert_eq!(String::from_utf8_lossy(&run(&on, &[]).stdout), "PASSED\n", "{target}:sramecc+");
        let refused = run(&off, &[]);
        assert!(!refused.status.success(), "{target}: sramecc- code on an sramecc+ board");
        assert_eq!(String::from_utf8_lossy(&run(&off, &["--sramecc", "off"]).stdout), "PASSED\n", "{target}");
        assert!(!run(&on, &["--sramecc", "off"]).status.success(), "{target}: sramecc+ code with ECC off");
    }
}

#[test]
fn an_access_outside_device_memory_stops_the_program_naming_the_kernel() {
    let scratch = tempfile::tempdir().unwrap();
    let program = build("out_of_bounds", "gfx90a", scratch.path());
    // Run where a report would land: a program run for no tool gets none.
    let output = common::gpuinstr_run()
        .args(["--target", "gfx90a", "--"])
        .arg(&program)
        .current_dir(scratch.path())
        .output()
        .expect("gpuinstr-run runs");
    assert!(!scratch.path().join("gpuinstr-report.json").exists(), "a report of a program run for no tool");
    assert_eq!(output.status.code(), Some(1));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(
        message.contains("gpuinstr-run: error: the emulated GPU stopped: kernel _Z4pokePi, workgroup (0, 0, 0) wave 0"),
        "{message}"
    );
    // The instruction as LLVM prints it (its operands are the compiler's choice).
    assert!(message.contains("`global_store_dword v"), "{message}");
    assert!(message.contains("is outside every allocation"), "{message}");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(!printed.contains("after"), "the program stopped at the fault");
    assert_eq!(printed, "before\n", "what the program printed before the fault is kept");
}

/// Device memory is the host's: a program asking for more than the model
/// has gets hipErrorOutOfMemory, piece by piece or all at once, never the
/// kernel's OOM killer, on every model (a 512 MiB device here, so the test
/// costs little).
#[test]
fn memory_past_the_device_is_out_of_memory_not_the_oom_killer() {
    let scratch = tempfile::tempdir().unwrap();
    for target in every_model() {
        let program = build("out_of_memory", target, scratch.path());
        let output = common::gpuinstr_run()
            .args(["--target", target, "--device-memory", "512M", "--"])
            .arg(&program)
            .output()
            .expect("gpuinstr-run runs");
        let printed = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{target}: {printed}{}", String::from_utf8_lossy(&output.stderr));
        assert!(printed.contains("device memory: 512 MiB\n"), "{target}: {printed}");
        // Eight 64 MiB pieces, less what the runtime keeps of its own.
        let pieces = printed.lines().find_map(|l| l.strip_prefix("pieces allocated: ")).expect("pieces");
        let (count, then) = pieces.split_once(", then ").expect("a count and an error");
        let count = count.parse::<u32>().unwrap();
        assert!((6..=8).contains(&count), "{target}: {printed}");
        assert_eq!(then, "hipErrorOutOfMemory", "{target}: {printed}");
        assert!(printed.contains("larger than the device: hipErrorOutOfMemory\n"), "{target}: {printed}");
        // All but the one given back for the runtime's own buffers.
        assert!(printed.contains(&format!("pieces written: {}\n", count - 1)), "{target}: {printed}");
        assert!(printed.contains("after freeing: hipSuccess\n"), "{target}: {printed}");
        // Asked for more than the host can back, the device has what it backs.
        let refused = common::gpuinstr_run()
            .args(["--target", target, "--device-memory", "lots", "--"])
            .arg(&program)
            .output()
            .unwrap();
        assert_eq!(refused.status.code(), Some(2), "{target}: {}", String::from_utf8_lossy(&refused.stderr));
    }
}

#[test]
fn the_hip_runtime_features_a_program_uses_work() {
    let scratch = tempfile::tempdir().unwrap();
    for target in every_model() {
        let program = build("runtime_features", target, scratch.path());
        let printed = run_ok(&program, target, &[]);
        let expected = [
            "memset and device-to-device copy: ok",
            "device globals and hipLaunchKernelGGL: ok",
            "streams, async copies and events: ok",
            "dynamic shared memory: ok",
            "atomics and a managed global: ok",
            "a 2D grid: ok",
            "PASSED",
        ];
        assert_lines(&printed, &expected, target);
    }
}

#[test]
fn a_code_object_loaded_at_run_time_runs_beside_the_programs_own() {
    let scratch = tempfile::tempdir().unwrap();
    let kernels = common::build_code_object("module_kernels", "gfx90a", scratch.path());
    let program = build("module_load", "gfx90a", scratch.path());
    assert_eq!(
        run_ok(&program, "gfx90a", &[&kernels]),
        "hipModuleLaunchKernel with a buffer of arguments: ok\n\
         a module kernel and the program's own on one buffer: ok\n\
         a grid ending in partial workgroups: ok\nPASSED\n"
    );
}

#[test]
fn printf_from_a_kernel_reaches_the_terminal() {
    let scratch = tempfile::tempdir().unwrap();
    for target in every_model() {
        let program = build("device_printf", target, scratch.path());
        let printed = run_ok(&program, target, &[]);
        let mut lines: Vec<&str> = printed.lines().collect();
        assert_eq!(lines.pop(), Some("synchronized: hipSuccess"), "{target}: {printed}");
        lines.sort_unstable();
        assert_eq!(
            lines,
            [
                "hello from thread 0 of block 0, value 1000",
                "hello from thread 0 of block 1, value 1000",
                "hello from thread 32 of block 0, value 1032",
                "hello from thread 32 of block 1, value 1032",
            ],
            "{target}"
        );
    }
}

/// Library code nobody here wrote: Debian 12's rocRAND (`librocrand-dev`).
#[test]
fn rocrand_generates_what_the_cpu_computes() {
    let scratch = tempfile::tempdir().unwrap();
    for target in TARGETS {
        let program = build_with("rocrand_generators.cpp", target, scratch.path(), &["-lrocrand"]);
        let expected = [
            "philox4x32-10 numbers: 4096 of 4096 as Random123 computes them",
            "uniform floats: 4096 of 4096 from the same numbers",
            "PASSED",
        ];
        assert_lines(&run_ok(&program, target, &[]), &expected, target);
    }
}

/// A header-only library nobody here wrote, so built for every model
/// including gfx950 (no Debian library ships gfx950 code): rocPRIM's
/// device-wide reduce, scan and radix sort (`librocprim-dev`: 5.3 on
/// Debian 12, 7.2 in experimental).
#[test]
fn rocprim_algorithms_compute_what_the_cpu_computes() {
    let scratch = tempfile::tempdir().unwrap();
    for target in every_model() {
        let program = build_with("rocprim_algorithms.cpp", target, scratch.path(), &["-std=c++17"]);
        assert_eq!(
            run_ok(&program, target, &[]),
            "reduce: ok\ninclusive scan: ok\nradix sort: ok\nPASSED\n",
            "{target}"
        );
    }
}

/// Library code nobody here wrote: Debian 12's rocSPARSE (`librocsparse-dev`).
#[test]
fn rocsparse_routines_compute_what_the_cpu_computes() {
    let scratch = tempfile::tempdir().unwrap();
    for target in TARGETS {
        let program = build_with("rocsparse_routines.cpp", target, scratch.path(), &["-lrocsparse"]);
        assert_eq!(
            run_ok(&program, target, &[]),
            "csrmv: ok\ncsrmv after csrmv_analysis: ok\naxpyi: ok\ngthr: ok\ncsr2coo: ok\nPASSED\n",
            "{target}"
        );
    }
}
