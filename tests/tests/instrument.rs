//! `gpuinstr-link instrument` end to end: real tools read every output.

use std::process::Command;

use gpuinstr::instrument::{instrument_code_object, InstrumentError, InstrumentOptions};
use gpuinstr::plan::Plan;
use gpuinstr::stages::lift::lift;
use gpuinstr::stages::load::{self, CodeObject};
use gpuinstr::stages::payloads::LeftOutCause;
use gpuinstr::stages::sva::RegisterGrowth;
use gpuinstr_intrinsics::Registry;
use gpuinstr_tests::*;

fn counter_tool(dir: &std::path::Path) -> CodeObject {
    let path = dir.join("counter.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &example("instruction-counter"), "-O3", &path));
    load::load(&path).unwrap().code_objects.remove(0)
}

/// llvm-readelf, llvm-objdump (no unknown instructions) and CoMGR's
/// metadata query accept the output, which still has every kernel.
fn assert_accepted(original: &CodeObject, output: &[u8], dir: &std::path::Path, name: &str) {
    let path = dir.join(format!("{name}.hsaco"));
    std::fs::write(&path, output).unwrap();
    let readelf = run(gpuinstr::toolchain::llvm_tool("llvm-readelf").args(["-a", "--notes"]).arg(&path));
    assert!(readelf.status.success(), "{name}: llvm-readelf failed");
    let stderr = String::from_utf8_lossy(&readelf.stderr);
    assert!(!stderr.contains("warning") && !stderr.contains("error"), "{name}: {stderr}");
    let objdump = run(gpuinstr::toolchain::llvm_tool("llvm-objdump")
        .args(["-d", &format!("--mcpu={}", original.target.processor)])
        .arg(&path));
    assert!(objdump.status.success(), "{name}: llvm-objdump failed");
    assert!(!String::from_utf8_lossy(&objdump.stdout).contains("<unknown>"), "{name}: unknown instructions");
    let mut kernels = gpuinstr::native::metadata_kernels(output).unwrap();
    kernels.sort();
    let mut expected: Vec<(String, String)> =
        original.kernels.iter().map(|k| (k.name().to_string(), k.metadata.symbol.clone())).collect();
    expected.sort();
    assert_eq!(kernels, expected, "{name}: CoMGR's metadata");
}

/// `gpuinstr-link verify` finds nothing: original instructions in order,
/// regions preserving live registers, branches landing where they did,
/// descriptors covering every register the new code uses.
pub fn assert_verified(original: &CodeObject, output: &CodeObject, name: &str) -> gpuinstr::verify::VerifyReport {
    let report = gpuinstr::verify::verify(original, output).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(report.ok(), "{name}:\n{}", report.render_text());
    assert!(report.regions > 0, "{name}: nothing inserted");
    report
}

#[test]
fn the_instruction_counter_instruments_our_kernels() {
    let dir = scratch();
    let tool = counter_tool(dir.path());
    let plan = Plan::load(&repo().join("hook-sdk/examples/instruction-counter/plan.toml")).unwrap();
    let registry = Registry::with_builtins();
    for kernels in TEST_KERNELS {
        for target in ["gfx90a", "gfx908"] {
            let name = format!("{kernels}-{target}");
            let app = load::load_for_target(&test_kernels(kernels), Some(target)).unwrap().code_objects.remove(0);
            // With default options; a kernel at its register limit (clang 17
            // puts calls_and_scratch's manyRegisters there) needs the
            // allocation to grow, and the error says so.
            let mut options = InstrumentOptions::default();
            let (bytes, report) = match instrument_code_object(&tool, &app, &plan, &registry, &options) {
                Ok(done) => done,
                Err(error) => {
                    let message = error.to_string();
                    assert!(message.contains("--grow-registers=always"), "{name}: {message}");
                    options.grow_registers = gpuinstr::stages::sva::RegisterGrowth::Always;
                    instrument_code_object(&tool, &app, &plan, &registry, &options)
                        .unwrap_or_else(|e| panic!("{name}, growing: {e}"))
                }
            };
            assert_accepted(&app, &bytes, dir.path(), &name);
            let output = CodeObject::parse(bytes, Vec::new()).unwrap();
            let verified = assert_verified(&app, &output, &name);
            let added: usize = report.kernels.iter().map(|k| k.instructions_added).sum();
            assert_eq!(verified.inserted_instructions, added, "{name}: the report and the site table agree");
            // Every original instruction of every kernel got its hook.
            let original = lift(&app).unwrap();
            let instructions: usize = original
                .functions
                .iter()
                .filter(|f| f.is_kernel() && f.relocatable())
                .map(|f| f.instructions().filter(|i| i.decoded).count())
                .sum();
            assert_eq!(report.points, instructions, "{name}");
            let added: usize = report.kernels.iter().map(|k| k.instructions_added).sum();
            let instrumented = lift(&output).unwrap();
            let now: usize =
                instrumented.functions.iter().filter(|f| f.is_kernel()).map(|f| f.instructions().count()).sum();
            let before: usize =
                original.functions.iter().filter(|f| f.is_kernel()).map(|f| f.instructions().count()).sum();
            assert_eq!(now, before + added, "{name}: instruction counts");
            assert_eq!(report.globals, vec!["Counter".to_string()], "{name}");
            // Alike points share payloads, and sharing costs next to no code.
            assert!(report.payloads_compiled * 2 < report.points, "{name}: {} payloads", report.payloads_compiled);
            if target == "gfx90a" {
                let mut each = options.clone();
                each.payloads.share_payloads = false;
                let (_, unshared) = instrument_code_object(&tool, &app, &plan, &registry, &each).unwrap();
                assert_eq!(unshared.payloads_compiled, unshared.points, "{name}");
                let added_each: usize = unshared.kernels.iter().map(|k| k.instructions_added).sum();
                assert!(added * 100 <= added_each * 102, "{name}: {added} added shared, {added_each} one by one");
            }
        }
    }
}

/// The instruction counter, its plan, and vector-add built by hipcc for
/// gfx90a (in `dir`).
fn counter_and_vector_add(dir: &std::path::Path) -> (CodeObject, Plan, CodeObject) {
    let tool = counter_tool(dir);
    let plan = Plan::load(&repo().join("hook-sdk/examples/instruction-counter/plan.toml")).unwrap();
    let object = dir.join("vector-add.o");
    run_ok(
        hipcc()
            .args(["--offload-arch=gfx90a", "-O3", "-c"])
            .arg(repo().join("hook-sdk/examples/applications/vector-add/vector-add.hip"))
            .arg("-o")
            .arg(&object),
    );
    let app = load::load_for_target(&object, Some("gfx90a")).unwrap().code_objects.remove(0);
    (tool, plan, app)
}

/// The run report of the counter on vector-add, without the time.
#[test]
fn the_run_report_says_what_was_added() {
    let dir = scratch();
    let (tool, plan, app) = counter_and_vector_add(dir.path());
    let (_, report) =
        instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &InstrumentOptions::default()).unwrap();
    let text = report.render_text();
    let without_time: Vec<&str> = text.lines().skip(1).collect();
    compiler_snapshot!("instrument_report_vector_add", without_time.join("\n"));
}

/// Each stage's text form (`--dump-after`) of the counter on vector-add,
/// as the walk leaves the stage: registers live per instruction, where the
/// SVA went, each point's final code and wait, the code spliced before
/// each address with the descriptor it gets. The lift form has snapshots of
/// its own (lift_emit), and emit's is the assembly llvm-mc reads.
#[test]
fn every_stage_has_a_text_form_after_it() {
    use gpuinstr::pipeline::Stage;
    let dir = scratch();
    let (tool, plan, app) = counter_and_vector_add(dir.path());
    for stage in Stage::ALL {
        let options = InstrumentOptions { dump_after: Some(stage), ..InstrumentOptions::default() };
        let (bytes, report) = instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &options).unwrap();
        let text = report.dump.unwrap_or_else(|| panic!("{}: no text form", stage.key()));
        assert!(!text.is_empty(), "{}", stage.key());
        match stage {
            Stage::Lift => assert!(text.contains("_Z9vectorAddPfPKfS1_i"), "{text}"),
            Stage::EmitAndLink => {
                assert!(text.contains("_Z9vectorAddPfPKfS1_i:") && text.contains(".amdhsa_kernel"), "{text}");
                assert!(!bytes.is_empty());
            }
            _ => compiler_snapshot!(format!("stage_text_{}_vector_add", stage.key()), text),
        }
    }
}

#[test]
fn instrument_errors_name_the_problem_and_write_nothing() {
    let dir = scratch();
    let tool = counter_tool(dir.path());
    let app = load::load_for_target(&test_kernels("memory"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let registry = Registry::with_builtins();
    let plan = Plan::parse("[[insert]]\nhook = \"nothere\"\nwhere = \"kernel-entry\"\n", "p.toml").unwrap();
    let error = instrument_code_object(&tool, &app, &plan, &registry, &InstrumentOptions::default()).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("the tool has no hook `nothere` (its hooks: countInstructionsScalar, countInstructionsVector)"),
        "{error}"
    );
    let plan = Plan::parse(
        "[[insert]]\nhook = \"countInstructionsScalar\"\nwhere = \"kernel-entry\"\nkernels = \"zzz*\"\n",
        "p.toml",
    )
    .unwrap();
    let error = instrument_code_object(&tool, &app, &plan, &registry, &InstrumentOptions::default()).unwrap_err();
    assert!(error.to_string().starts_with("the plan selects no instruction of this code object (kernels: "), "{error}");
}

/// A kernel whose descriptor asks for preloaded arguments is entered 256
/// bytes in: what comes before must be a preload prologue as compilers
/// write it, or a library's own code written to be skipped (it loads
/// arguments and jumps away before `s_nop` padding), or the kernel is not
/// instrumented (its points left out, said by name). Real prologues: `differential::every_example_tool_on_kernels_that_preload_their_arguments`.
#[test]
fn kernels_that_preload_arguments_without_a_prologue_are_refused() {
    let dir = scratch();
    let tool = counter_tool(dir.path());
    let object = object_for_every_target("kernels/memory.hip");
    let mut app = load::load_for_target(&object, Some(mi300())).unwrap().code_objects.remove(0);
    let plan = Plan::load(&repo().join("hook-sdk/examples/instruction-counter/plan.toml")).unwrap();
    let options = InstrumentOptions { linker: linker_for(&app), ..InstrumentOptions::default() };
    let registry = Registry::with_builtins();
    assert!(instrument_code_object(&tool, &app, &plan, &registry, &options).is_ok(), "without preloading");
    // KERNARG_PRELOAD_SPEC_LENGTH (descriptor bits 464-470): two dwords.
    app.kernels[0].descriptor.reserved2[0] = 2;
    assert_eq!(app.kernels[0].descriptor.kernarg_preload_length(), 2);
    let error = instrument_code_object(&tool, &app, &plan, &registry, &options).unwrap_err().to_string();
    assert!(error.contains("would be left out"), "{error}");
    assert!(error.contains("the kernel preloads 2 dwords of its arguments"), "{error}");
    assert!(
        error.contains("are neither a preload prologue") || error.contains("no instruction starts there"),
        "{error}"
    );
}

/// LLVM 15 decodes gfx940's MFMAs that accumulate in VGPRs as AGPR ones:
/// liveness there would think live VGPRs free, so that build refuses
/// gfx940 code with matrix instructions by name; LLVM 17 and 21 read them.
#[test]
fn mi300_matrix_code_is_refused_where_llvm_misreads_it() {
    let object = hip_object_with("kernels/matrix_cores.hip", &[&format!("--offload-arch={}", mi300())]);
    let app = load::load_for_target(&object, Some(mi300())).unwrap().code_objects.remove(0);
    let lifted = lift(&app).unwrap();
    let result = gpuinstr::stages::liveness::analyze(&lifted);
    if gpuinstr::toolchain::LLVM_MAJOR < 17 {
        let error = result.err().expect("refused").to_string();
        assert!(error.starts_with("gfx940 code with matrix instructions (V_MFMA"), "{error}");
        assert!(error.contains("use the LLVM 17 or 21 build"), "{error}");
    } else {
        assert!(result.is_ok(), "{} reads its matrix code", mi300());
    }
}

/// A hook reading hidden arguments through `implicitArgPtr` reads them
/// where its tool's code object version lays them out: a v4 tool's is
/// refused on a v5 application and on a v4 kernel that has none; a kernel
/// that declares none is given them for a v5 tool, v4 or v5.
#[test]
fn hooks_reading_hidden_arguments_get_them_or_are_refused() {
    let dir = scratch();
    let tool_at = |version: u32| {
        let path = dir.path().join(format!("payload-hooks-v{version}.hsaco"));
        let mut command = tool_compile_command(Compiler::Clang, &input("tools/payload-hooks.hip"), "-O3", &path);
        run_ok(command.arg(format!("-mcode-object-version={version}")));
        load::load(&path).unwrap().code_objects.remove(0)
    };
    let app_at = |version: u32| {
        let path = hip_object_with("kernels/memory.hip", &[&format!("-mcode-object-version={version}")]);
        load::load_for_target(&path, Some("gfx90a")).unwrap().code_objects.remove(0)
    };
    let kernel = "_Z12ldsReductionPfPKf";
    let plan = Plan::parse(
        &format!("[[insert]]\nhook = \"readGlobalOffset\"\nwhere = \"kernel-entry\"\nkernels = \"{kernel}\"\n"),
        "p.toml",
    )
    .unwrap();
    let registry = Registry::with_builtins();
    let options = InstrumentOptions::default();
    let (v4_tool, v5_tool, v4_app, v5_app) = (tool_at(4), tool_at(5), app_at(4), app_at(5));
    for app in [&v4_app, &v5_app] {
        let kernel = app.kernels.iter().find(|k| k.name() == kernel).unwrap();
        assert!(!kernel.metadata.arguments.iter().any(|a| a.is_hidden()), "the kernel reads no hidden argument");
    }

    let error = instrument_code_object(&v4_tool, &v4_app, &plan, &registry, &options).unwrap_err();
    assert!(matches!(error, InstrumentError::HiddenArgumentsAbsent { .. }), "{error}");
    assert!(error.to_string().contains(&format!("kernel {kernel} (code object v4)")), "{error}");

    let error = instrument_code_object(&v4_tool, &v5_app, &plan, &registry, &options).unwrap_err();
    assert!(matches!(error, InstrumentError::HiddenArgumentLayout { tool: 4, app: 5, .. }), "{error}");
    assert!(error.to_string().contains("rebuild the tool with -mcode-object-version=5"), "{error}");

    let (bytes, report) = instrument_code_object(&v5_tool, &v5_app, &plan, &registry, &options).unwrap();
    let declared = &report.hidden_arguments_declared;
    assert_eq!(declared.len(), 1, "{declared:?}");
    assert_eq!(
        (declared[0].kernel.as_str(), declared[0].offset, declared[0].kernarg_segment_size),
        (kernel, 16, (16, 272))
    );
    let output = CodeObject::parse(bytes, Vec::new()).unwrap();
    let instrumented = output.kernels.iter().find(|k| k.name() == kernel).unwrap();
    let hidden: Vec<(&str, u64)> = instrumented
        .metadata
        .arguments
        .iter()
        .filter(|a| a.is_hidden())
        .map(|a| (a.value_kind.as_str(), a.offset))
        .collect();
    assert_eq!(hidden.first(), Some(&("hidden_block_count_x", 16)));
    assert_eq!(hidden.last(), Some(&("hidden_grid_dims", 80)));
    assert!(gpuinstr::verify::verify(&v5_app, &output).unwrap().ok());

    // A v4 kernel that declares no hidden argument (Tensile's) gets the
    // launch shape a v5 tool reads, in the v5 layout, as a v5 kernel does.
    let (bytes, report) = instrument_code_object(&v5_tool, &v4_app, &plan, &registry, &options).unwrap();
    assert_eq!(report.hidden_arguments_declared.len(), 1, "{:?}", report.hidden_arguments_declared);
    let output = CodeObject::parse(bytes, Vec::new()).unwrap();
    assert_eq!(output.code_object_version, 4);
    let instrumented = output.kernels.iter().find(|k| k.name() == kernel).unwrap();
    let first = instrumented.metadata.arguments.iter().find(|a| a.is_hidden()).unwrap();
    assert_eq!((first.value_kind.as_str(), first.offset), ("hidden_block_count_x", 16));
    assert!(gpuinstr::verify::verify(&v4_app, &output).unwrap().ok());
}

/// Hooks reading kernel arguments (seed 004's gridDim/blockDim tool) and
/// hooks with stack get the kernel preamble: the inputs they need enabled,
/// the SVA filled at the entry, the private segment grown.
#[test]
fn kernels_get_a_preamble_when_hooks_need_the_sva() {
    let dir = scratch();
    let arguments_tool = dir.path().join("kernel-arguments.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &example("kernel-arguments"), "-O3", &arguments_tool));
    let arguments_tool = load::load(&arguments_tool).unwrap().code_objects.remove(0);
    let hooks_tool = dir.path().join("payload-hooks.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &input("tools/payload-hooks.hip"), "-O3", &hooks_tool));
    let hooks_tool = load::load(&hooks_tool).unwrap().code_objects.remove(0);
    let dimensions = Plan::load(&repo().join("hook-sdk/examples/kernel-arguments/plan.toml")).unwrap();
    let stack = Plan::parse(
        "[[insert]]\nhook = \"histogram\"\nwhere = \"kernel-entry\"\nargs = [{ reg = \"s4\" }]\n",
        "stack.toml",
    )
    .unwrap();
    let registry = Registry::with_builtins();
    // Whether a small kernel has room without growing depends on how its
    // compiler allocated it (clang 21 leaves our gfx908 control-flow
    // kernels none); across all of them, some points must go in.
    let mut instrumented_without_growing = 0;
    for kernels in ["memory", "control_flow", "calls_and_scratch"] {
        let object = object_for_every_target(&format!("kernels/{kernels}.hip"));
        // Every kernel on gfx90a and MI300 (the two preamble layouts: a
        // scratch V# and wave offset, architected flat scratch); elsewhere
        // the kernels with a stack of their own, which the preamble grows.
        let targets =
            every_target().into_iter().filter(|t| kernels == "calls_and_scratch" || ["gfx90a", mi300()].contains(t));
        for target in targets {
            let app = load::load_for_target(&object, Some(target)).unwrap().code_objects.remove(0);
            let architected = app.target.has_architected_flat_scratch();
            for (tool, plan, what) in [(&arguments_tool, &dimensions, "dimensions"), (&hooks_tool, &stack, "stack")] {
                let name = format!("{kernels}-{target}-{what}");
                // Never growing, a kernel with no free VGPR keeps its points
                // and says why, with --allow-partial; the others are
                // instrumented. Without it, that is an error.
                let linker = linker_for(&app);
                let never =
                    InstrumentOptions { grow_registers: RegisterGrowth::Never, linker, ..InstrumentOptions::default() };
                let partial = InstrumentOptions { allow_partial: true, ..never.clone() };
                let (_, report) = instrument_code_object(tool, &app, plan, &registry, &partial)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                // No room: for the SVA, for the payload's values, or (LLVM
                // spilling them to AGPRs: gfx940's scratch stores pair up
                // values, which takes more registers) within the allocation.
                for point in &report.left_out {
                    assert!(
                        matches!(
                            point.cause,
                            LeftOutCause::NoSvaRegister
                                | LeftOutCause::NoPayloadRegisters
                                | LeftOutCause::RegisterLimit
                        ),
                        "{name}: {point:?}"
                    );
                }
                instrumented_without_growing += report.points - report.left_out.len();
                if !report.left_out.is_empty() {
                    match instrument_code_object(tool, &app, plan, &registry, &never) {
                        Err(InstrumentError::PointsLeftOut { left_out, selected, .. }) => {
                            assert_eq!((left_out, selected), (report.left_out.len(), report.selected), "{name}")
                        }
                        other => panic!("{name}: points left out without an error: {:?}", other.map(|r| r.1)),
                    }
                }
                let grow = InstrumentOptions {
                    grow_registers: RegisterGrowth::Always,
                    linker,
                    ..InstrumentOptions::default()
                };
                let (bytes, report) = instrument_code_object(tool, &app, plan, &registry, &grow)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(report.left_out.is_empty(), "{name}: {:?}", report.left_out);
                assert_accepted(&app, &bytes, dir.path(), &name);
                let output = CodeObject::parse(bytes, Vec::new()).unwrap();
                let verified = assert_verified(&app, &output, &name);
                let added: usize = report.kernels.iter().map(|k| k.instructions_added).sum();
                assert_eq!(verified.inserted_instructions, added, "{name}: the report and the site table agree");
                for (before, after) in app.kernels.iter().zip(&output.kernels) {
                    let context = format!("{name}: {}", before.name());
                    let d = &after.descriptor;
                    if what == "dimensions" && app.code_object_version < 5 {
                        // blockDim/gridDim in code object v4 read the dispatch packet.
                        assert_eq!(d.property("ENABLE_SGPR_DISPATCH_PTR"), 1, "{context}");
                    } else if what == "dimensions" {
                        // From v5, the hidden arguments: declared if the kernel had none.
                        assert_eq!(d.property("ENABLE_SGPR_KERNARG_SEGMENT_PTR"), 1, "{context}");
                        let declares = |k: &load::Kernel| {
                            k.metadata.arguments.iter().any(|a| a.value_kind == "hidden_block_count_x")
                        };
                        assert!(declares(after), "{context}: the launch shape");
                        assert_eq!(
                            declares(before),
                            !report.hidden_arguments_declared.iter().any(|h| h.kernel == before.name()),
                            "{context}"
                        );
                    } else {
                        // Architected flat scratch (gfx940+): FLAT_SCRATCH, no V#.
                        let buffer = u32::from(!architected);
                        assert_eq!(d.property("ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER"), buffer, "{context}");
                        assert_eq!(d.rsrc2("ENABLE_PRIVATE_SEGMENT"), 1, "{context}");
                        assert!(
                            d.private_segment_fixed_size > before.descriptor.private_segment_fixed_size,
                            "{context}: stack"
                        );
                    }
                    // The user SGPR count is what the enabled inputs take.
                    let user: u32 = [
                        ("ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER", 4),
                        ("ENABLE_SGPR_DISPATCH_PTR", 2),
                        ("ENABLE_SGPR_QUEUE_PTR", 2),
                        ("ENABLE_SGPR_KERNARG_SEGMENT_PTR", 2),
                        ("ENABLE_SGPR_DISPATCH_ID", 2),
                        ("ENABLE_SGPR_FLAT_SCRATCH_INIT", 2),
                        ("ENABLE_SGPR_PRIVATE_SEGMENT_SIZE", 1),
                    ]
                    .iter()
                    .map(|(field, size)| d.property(field) * size)
                    .sum();
                    assert_eq!(d.rsrc2("USER_SGPR_COUNT"), user, "{context}");
                }
                // The preamble packs work-item ids, then writes SVA lanes: the
                // kernel starts with id moves, SALU work on its inputs and
                // v_writelane into the SVA.
                let lifted = lift(&output).unwrap();
                for function in lifted.functions.iter().filter(|f| f.is_kernel()) {
                    let start: Vec<&str> = function.instructions().take(12).map(|i| i.name(&lifted.isa)).collect();
                    let first_write = start.iter().position(|n| *n == "V_WRITELANE_B32");
                    assert!(first_write.is_some(), "{name}: {}: {start:?}", function.name);
                    assert!(
                        start[..first_write.unwrap()].iter().all(|n| {
                            n.starts_with("S_ADD")
                                || n.starts_with("S_MOV")
                                || ["V_MOV_B32_e32", "V_AND_B32_e32", "V_LSHL_OR_B32_e64", "V_LSHLREV_B32_e32"]
                                    .contains(n)
                        }),
                        "{name}: {}: {start:?}",
                        function.name
                    );
                }
            }
        }
    }
    assert!(instrumented_without_growing > 0, "never growing, every point of every kernel was left out");
}

/// The opcode histogram, the memory tracer and the branch-divergence tool
/// with their plans, on every test kernel: nothing left out (registers may
/// grow), every output accepted and verified; the plans select what they
/// say (flat and global instructions with their address operands; every
/// `s_and_saveexec_b64` with its condition).
#[test]
fn the_examples_instrument_our_kernels() {
    use gpuinstr::stages::payload::HookArgument;
    use gpuinstr_intrinsics::{Register, SpecialRegister};
    let dir = scratch();
    let registry = Registry::with_builtins();
    let grow = InstrumentOptions { grow_registers: RegisterGrowth::Always, ..InstrumentOptions::default() };
    for (example, targets) in [
        ("opcode-histogram", &["gfx90a"][..]),
        ("memory-tracer", &["gfx90a", "gfx908"][..]),
        ("branch-divergence", &["gfx90a", "gfx908"][..]),
    ] {
        let tool = dir.path().join(format!("{example}.hsaco"));
        run_ok(&mut tool_compile_command(Compiler::Clang, &self::example(example), "-O3", &tool));
        let tool = load::load(&tool).unwrap().code_objects.remove(0);
        let plan = Plan::load(&repo().join(format!("hook-sdk/examples/{example}/plan.toml"))).unwrap();
        for kernels in TEST_KERNELS {
            for target in targets {
                let name = format!("{example}-{kernels}-{target}");
                let app = load::load_for_target(&test_kernels(kernels), Some(target)).unwrap().code_objects.remove(0);
                let lifted = lift(&app).unwrap();
                let points = plan.select(&lifted);
                for point in &points {
                    let instruction =
                        lifted.functions[point.function].instructions().nth(point.instruction).expect("instruction");
                    let opcode = instruction.name(&lifted.isa);
                    let arguments = &point.calls[0].arguments;
                    match example {
                        "memory-tracer" => match (&arguments[1], &arguments[2]) {
                            (HookArgument::MemoryAddress { base, index, .. }, HookArgument::Int(space)) => {
                                assert!(
                                    opcode.starts_with("GLOBAL_") || opcode.starts_with("FLAT_"),
                                    "{name}: {opcode}"
                                );
                                assert_eq!(*space, i64::from(opcode.starts_with("GLOBAL_")), "{name}: {opcode}");
                                if opcode.contains("_SADDR") {
                                    assert!(matches!((base, index), (Register::Sgpr(_), Some(Register::Vgpr(_)))));
                                } else {
                                    assert!(matches!((base, index), (Register::Vgpr(_), None)), "{name}: {opcode}");
                                }
                            }
                            (HookArgument::BufferAddress(buffer), HookArgument::Int(2)) => {
                                assert!(opcode.starts_with("BUFFER_"), "{name}: {opcode}");
                                assert!(buffer.resource.iter().all(|r| matches!(r, Register::Sgpr(_))), "{name}");
                            }
                            (HookArgument::LdsAddress { address: Register::Vgpr(_), .. }, HookArgument::Int(3)) => {
                                assert!(opcode.starts_with("DS_"), "{name}: {opcode}");
                            }
                            other => panic!("{name}: {opcode}: {other:?}"),
                        },
                        "branch-divergence" => {
                            assert_eq!(opcode, "S_AND_SAVEEXEC_B64", "{name}");
                            assert!(
                                matches!(
                                    arguments[2],
                                    HookArgument::Register(Register::Special(SpecialRegister::Vcc) | Register::Sgpr(_))
                                ),
                                "{name}: {arguments:?}"
                            );
                        }
                        _ => {}
                    }
                }
                if points.is_empty() {
                    continue; // matrix_cores has no s_and_saveexec_b64
                }
                let (bytes, report) = instrument_code_object(&tool, &app, &plan, &registry, &grow)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                // Even gfx908's manyRegisters (1,024 work-items leave 64
                // VGPRs a wave) keeps every point: payloads stay below the limit.
                assert!(report.left_out.is_empty(), "{name}: {:#?}", report.left_out);
                assert_accepted(&app, &bytes, dir.path(), &name);
                let output = CodeObject::parse(bytes, Vec::new()).unwrap();
                let verified = assert_verified(&app, &output, &name);
                let added: usize = report.kernels.iter().map(|k| k.instructions_added).sum();
                assert_eq!(verified.inserted_instructions, added, "{name}");
            }
        }
    }
}

/// A host library, a host object and a bundle come back as the same kind of
/// file with every code object instrumented: each verifies against its
/// original; the library still loads with glibc's dynamic loader and its
/// `__hip_fatbin_wrapper` points, after relocation, at the new bundle; the
/// instrumented object links with hipcc into a library that verifies too.
#[test]
fn host_files_and_bundles_come_back_instrumented() {
    use gpuinstr::instrument::instrument_file;
    use object::{Object, ObjectSection};
    let dir = scratch();
    let dir = dir.path();
    counter_tool(dir);
    let tool = gpuinstr::tool::Tool::load(&dir.join("counter.hsaco")).unwrap();
    let plan = Plan::load(&repo().join("hook-sdk/examples/instruction-counter/plan.toml")).unwrap();
    let registry = Registry::with_builtins();
    let options = InstrumentOptions::default();
    let source = repo().join("hook-sdk/examples/applications/vector-add/vector-add.hip");
    let build = |extra: &[&str], output: &std::path::Path| {
        run_ok(
            hipcc()
                .args(["--offload-arch=gfx90a", "--offload-arch=gfx908", "-O3", "-fPIC"])
                .args(extra)
                .arg("-o")
                .arg(output),
        );
    };
    let verify_all = |original: &std::path::Path, instrumented: &std::path::Path, name: &str| {
        let (before, after) = (load::load(original).unwrap(), load::load(instrumented).unwrap());
        assert_eq!(after.code_objects.len(), before.code_objects.len(), "{name}");
        let reports = gpuinstr::verify::verify_files(&before, &after).unwrap();
        assert_eq!(reports.len(), 2, "{name}: both targets");
        for (origin, report) in &reports {
            assert!(report.ok() && report.regions > 0, "{name}: {origin}:\n{}", report.render_text());
        }
        // The same from the files' bytes, a bundle at a time (`gpuinstr-link verify`).
        let (original_bytes, instrumented_bytes) =
            (std::fs::read(original).unwrap(), std::fs::read(instrumented).unwrap());
        let streamed = gpuinstr::verify::verify_file_bytes(
            (original, &original_bytes),
            (instrumented, &instrumented_bytes),
            None,
            &|| {},
        )
        .unwrap();
        let origins = |reports: &[(String, gpuinstr::verify::VerifyReport)]| -> Vec<(String, bool, usize)> {
            reports.iter().map(|(origin, r)| (origin.clone(), r.ok(), r.regions)).collect()
        };
        assert_eq!(origins(&streamed), origins(&reports), "{name}");
    };

    // A shared library.
    let library = dir.join("libvectoradd.so");
    build(&["-shared", source.to_str().unwrap()], &library);
    let bytes = std::fs::read(&library).unwrap();
    let (out, report) = instrument_file(&tool, &library, &bytes, &plan, &registry, &options, None).unwrap();
    assert_eq!(report.code_objects.len(), 2);
    assert!(report.unchanged.is_empty());
    let instrumented = dir.join("libvectoradd.instrumented.so");
    std::fs::write(&instrumented, &out).unwrap();
    verify_all(&library, &instrumented, "library");
    let readelf = run(gpuinstr::toolchain::llvm_tool("llvm-readelf").args(["-l", "-S", "-r"]).arg(&instrumented));
    assert!(readelf.status.success() && readelf.stderr.is_empty(), "{}", String::from_utf8_lossy(&readelf.stderr));
    let file = object::File::parse(&*out).unwrap();
    let fatbin = file.section_by_name(".hip_fatbin").unwrap().address();
    let wrapper = file.section_by_name(".hipFatBinSegment").unwrap().address();
    let original_fatbin = object::File::parse(&*bytes).unwrap().section_by_name(".hip_fatbin").unwrap().address();
    assert_ne!(fatbin, original_fatbin, "the new fat binary has its own segment");
    let loader = dir.join("fatbin_loader");
    run_ok(
        gpuinstr::toolchain::llvm_tool("clang").arg(input("host/fatbin_loader.c")).arg("-o").arg(&loader).arg("-ldl"),
    );
    for (path, expected) in [(&library, original_fatbin), (&instrumented, fatbin)] {
        let result = run(Command::new(&loader).arg(path).arg(format!("{wrapper:#x}")));
        let stdout = String::from_utf8_lossy(&result.stdout);
        assert!(result.status.success(), "{}: {stdout}", path.display());
        assert_eq!(stdout.trim(), format!("bundle at {expected:#x}"), "{}", path.display());
    }

    // A host object: instrumented, then linked by hipcc.
    let object = dir.join("vectoradd.o");
    build(&["-c", source.to_str().unwrap()], &object);
    let bytes = std::fs::read(&object).unwrap();
    let (out, _) = instrument_file(&tool, &object, &bytes, &plan, &registry, &options, None).unwrap();
    let instrumented_object = dir.join("vectoradd.instrumented.o");
    std::fs::write(&instrumented_object, &out).unwrap();
    verify_all(&object, &instrumented_object, "object");
    let (linked, linked_instrumented) = (dir.join("liba.so"), dir.join("liba.instrumented.so"));
    build(&["-shared", object.to_str().unwrap()], &linked);
    build(&["-shared", instrumented_object.to_str().unwrap()], &linked_instrumented);
    verify_all(&linked, &linked_instrumented, "linked object");

    // A bundle (what a .hipfb file holds): the object's fat binary.
    let bundle = object::File::parse(&*bytes).unwrap().section_by_name(".hip_fatbin").unwrap().data().unwrap().to_vec();
    let bundle_path = dir.join("vectoradd.hipfb");
    std::fs::write(&bundle_path, &bundle).unwrap();
    let (out, report) =
        instrument_file(&tool, &bundle_path, &bundle, &plan, &registry, &options, Some("gfx90a")).unwrap();
    assert_eq!(report.code_objects.len(), 1, "--target picks one");
    let instrumented_bundle = dir.join("vectoradd.instrumented.hipfb");
    std::fs::write(&instrumented_bundle, &out).unwrap();
    let after = load::load(&instrumented_bundle).unwrap().code_objects;
    let before = load::load(&bundle_path).unwrap().code_objects;
    for (b, a) in before.iter().zip(&after) {
        if b.target.processor == "gfx90a" {
            assert_verified(b, a, "bundle gfx90a");
        } else {
            assert_eq!(a.bytes, b.bytes, "the entry not selected stays as it was");
        }
    }
}

/// `--tool-globals=external`: the counter is an undefined dynamic symbol
/// the code reaches through a GOT entry with an R_AMDGPU_ABS64 relocation,
/// for a loader to define; by default it is defined in `.bss`.
#[test]
fn tool_globals_are_defined_or_left_to_a_loader() {
    use gpuinstr::instrument::ToolGlobals;
    use object::{Object, ObjectSection, ObjectSymbol};
    let dir = scratch();
    let tool = counter_tool(dir.path());
    let plan =
        Plan::parse("[[insert]]\nhook = \"countInstructionsScalar\"\nwhere = \"kernel-entry\"\n", "p.toml").unwrap();
    let app = load::load_for_target(&test_kernels("control_flow"), Some("gfx90a")).unwrap().code_objects.remove(0);
    for mode in [ToolGlobals::Defined, ToolGlobals::External] {
        let options = InstrumentOptions { tool_globals: mode, ..InstrumentOptions::default() };
        let (bytes, report) = instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &options).unwrap();
        assert_eq!(report.globals, vec!["Counter".to_string()]);
        assert!(report.render_text().contains(match mode {
            ToolGlobals::Defined => "tool globals defined: Counter",
            ToolGlobals::External => "tool globals left external (the loader defines them): Counter",
        }));
        let file = object::File::parse(&*bytes).unwrap();
        let counter = file.dynamic_symbols().find(|s| s.name() == Ok("Counter")).expect("Counter in .dynsym");
        let relocated =
            file.dynamic_relocations().into_iter().flatten().any(
                |(_, r)| matches!(r.target(), object::RelocationTarget::Symbol(index) if index == counter.index()),
            );
        match mode {
            ToolGlobals::Defined => {
                // Counter is __managed__: a pointer the loader initialises
                // (a dynamic relocation at its address) to its storage,
                // Counter.managed, zero-initialised in .bss.
                assert!(!counter.is_undefined());
                let section = file.section_by_index(counter.section_index().unwrap()).unwrap();
                assert_eq!(section.name(), Ok(".data"), "a pointer with an initial value");
                let storage =
                    file.dynamic_symbols().find(|s| s.name() == Ok("Counter.managed")).expect("its storage in .dynsym");
                let section = file.section_by_index(storage.section_index().unwrap()).unwrap();
                assert_eq!(section.name(), Ok(".bss"), "zero-initialised, taking no file space");
                let initialised = file.dynamic_relocations().into_iter().flatten().any(|(offset, r)| {
                    offset == counter.address()
                        && matches!(r.target(), object::RelocationTarget::Symbol(index) if index == storage.index())
                });
                assert!(initialised, "the loader points Counter at Counter.managed");
            }
            ToolGlobals::External => assert!(counter.is_undefined() && relocated, "a loader fills the GOT entry"),
        }
        // Either way the code object lists the tool's data for a runtime.
        let output = CodeObject::parse(bytes, Vec::new()).unwrap();
        let listed = gpuinstr::stages::load::instrumented::tool_globals(&output).unwrap();
        let counter = gpuinstr::stages::load::instrumented::ToolGlobalEntry {
            symbol: "Counter.managed".into(),
            tool_name: "Counter".into(),
            size: 8,
            managed: true,
            records: None,
            ring: None,
        };
        assert_eq!(listed, vec![counter], "{mode:?}");
        let input = gpuinstr::stages::load::LoadedInput {
            path: "instrumented.hsaco".into(),
            kind: gpuinstr::stages::load::InputKind::CodeObject,
            code_objects: vec![output.clone()],
        };
        let inspected = gpuinstr::inspect::render_text(&gpuinstr::inspect::report(&input).unwrap());
        assert!(inspected.contains("tool global Counter  8 B at Counter.managed, managed"), "{inspected}");
        assert_verified(&app, &output, &format!("{mode:?}"));
    }

    // LLVM 15 writes a kernel's function-local `__shared__` arrays as
    // undefined dynamic symbols (40 in Debian 12's rocRAND): they stay so,
    // and only the tool's globals are added.
    let undefined = |bytes: &[u8]| -> std::collections::BTreeSet<String> {
        let file = object::File::parse(bytes).unwrap();
        let names = file.dynamic_symbols().filter(|s| s.is_undefined()).filter_map(|s| s.name().ok().map(String::from));
        names.filter(|n| !n.is_empty()).collect()
    };
    let library = debian_package_file("librocrand1", "/usr/lib/x86_64-linux-gnu/librocrand.so.1.1");
    let rocrand = load::load_for_target(&library, Some("gfx90a:xnack-")).unwrap().code_objects.remove(0);
    let options = InstrumentOptions { tool_globals: ToolGlobals::External, ..InstrumentOptions::default() };
    let (bytes, _) = instrument_code_object(&tool, &rocrand, &plan, &Registry::with_builtins(), &options).unwrap();
    let mut expected = undefined(&rocrand.bytes);
    assert!(!expected.is_empty(), "rocRAND's code object leaves symbols undefined");
    expected.insert("Counter".into());
    assert_eq!(undefined(&bytes), expected);
}

/// A kernel whose branches reach ~1,500 instructions: with a payload before
/// every instruction they no longer reach their targets (±32,767 dwords) and
/// become long jumps (s_getpc/s_add/s_addc/s_setpc, behind the inverse
/// short branch); the output assembles, and verify follows the long jumps to
/// the original targets.
#[test]
fn far_branches_become_long_jumps() {
    let dir = scratch();
    let tool = counter_tool(dir.path());
    let plan = Plan::load(&repo().join("hook-sdk/examples/instruction-counter/plan.toml")).unwrap();
    let adds = "\tv_add_u32_e32 v1, v1, v1\n".repeat(1_500);
    let body = format!(
        "\ts_cmp_eq_u32 s2, 0\n\ts_cbranch_scc1 .Lfar\n{adds}\ts_branch .Lend\n.Lfar:\n{adds}.Lend:\n\ts_endpgm\n"
    );
    let app = kernel_from_assembly("gfx90a", &body, "");
    let (bytes, report) =
        instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &InstrumentOptions::default()).unwrap();
    assert!(report.left_out.is_empty(), "{:?}", report.left_out);
    assert_eq!(report.kernels[0].branches_relaxed, 2, "{}", report.render_text());
    assert!(report.render_text().contains("branches relaxed into long jumps: 2"), "{}", report.render_text());
    assert_accepted(&app, &bytes, dir.path(), "far-branches");
    let output = CodeObject::parse(bytes, Vec::new()).unwrap();
    let verified = assert_verified(&app, &output, "far-branches");
    assert_eq!(verified.branches, 2);
    let lifted = lift(&output).unwrap();
    let names: Vec<&str> = lifted.functions[0].instructions().map(|i| i.name(&lifted.isa)).collect();
    assert_eq!(names.iter().filter(|n| **n == "S_SETPC_B64").count(), 2);
    assert!(names.contains(&"S_CBRANCH_SCC0"), "the inverse of s_cbranch_scc1");
}

/// Kernels where inline assembly writes every VGPR (tests/inputs/kernels/
/// register_pressure.hip): no VGPR is free for the whole kernel, so the SVA
/// and the work-item ids live in AGPRs nothing uses (gfx908: inside the
/// allocation, which covers both files; gfx90a: the AGPR part of its unified
/// allocation), the preamble copies
/// them there with EXEC at every lane, and every payload that reads them
/// loads them into VGPRs dead at its point, or parks live VGPRs in AGPRs
/// where none is dead. A kernel that also writes every AGPR has no register
/// free for the whole kernel: its SVA and ids slide between VGPRs free
/// where they are (whole-wave moves between the assembly's writes).
#[test]
fn kernels_with_no_free_vgpr_keep_the_sva_in_an_agpr() {
    use gpuinstr::stages::liveness::{analyze, Unit};
    use gpuinstr::stages::sva::{place, Home, SvaRequest};
    let dir = scratch();
    let registry = Registry::with_builtins();
    let tool = dir.path().join("branch-divergence.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &example("branch-divergence"), "-O3", &tool));
    let tool = load::load(&tool).unwrap().code_objects.remove(0);
    let branches = Plan::load(&repo().join("hook-sdk/examples/branch-divergence/plan.toml")).unwrap();
    // Every instruction: points where all 256 VGPRs are live park some.
    let every = Plan::parse(
        "[[insert]]\nhook = \"recordBranch\"\nwhere = \"each-instruction\"\nkernels = \"*everyVgpr*\"\n\
         args = [{ value = \"site\" }, { value = \"exec\" }, { value = \"exec\" }]\n",
        "every.toml",
    )
    .unwrap();
    for (target, grow) in [("gfx908", RegisterGrowth::Never), ("gfx90a", RegisterGrowth::Always)] {
        let app =
            load::load_for_target(&test_kernels("register_pressure"), Some(target)).unwrap().code_objects.remove(0);
        let lifted = lift(&app).unwrap();
        let liveness = analyze(&lifted).unwrap();
        let kernel = |name: &str| lifted.functions.iter().position(|f| f.name.contains(name)).expect(name);
        let (every_vgpr, every_register) = (kernel("everyVgpr"), kernel("everyVectorRegister"));
        let placement = place(
            &lifted,
            &liveness,
            &SvaRequest { instrumented: [every_vgpr, every_register].into(), work_item_ids: true, grow },
        );
        let placed = |k: usize| placement.kernels.iter().find(|p| p.kernel == k).unwrap().clone();
        let (sva, ids) = (placed(every_vgpr).sva, placed(every_vgpr).work_item_ids);
        let (Some(sva), Some(ids)) = (sva.and_then(Home::agpr), ids.and_then(Home::agpr)) else {
            panic!("{target}: {:?}", placed(every_vgpr))
        };
        let touched = &liveness.functions[every_vgpr].touched;
        assert!(!touched.contains(Unit::agpr(sva)) && !touched.contains(Unit::agpr(ids)), "{target}: a{sva} a{ids}");
        // The compiler parks what lives across the assembly in a0, so the
        // allocation already has AGPRs nothing touches.
        assert!(matches!(placed(every_vgpr).sva, Some(Home::Agpr(_))), "{target}");
        assert!(matches!(placed(every_register).sva, Some(Home::Sliding(_))), "{target}: {:?}", placed(every_register));
        let slid = &placement.sliding[&every_register];
        slid.check(&lifted.functions[every_register], &liveness.functions[every_register]).unwrap();
        assert!(slid.move_points() > 0, "{target}");

        let options = InstrumentOptions { grow_registers: grow, ..InstrumentOptions::default() };
        for (plan, what) in [(&branches, "branches"), (&every, "every-instruction")] {
            let name = format!("register_pressure-{target}-{what}");
            let (bytes, report) = instrument_code_object(&tool, &app, plan, &registry, &options)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(report.left_out.is_empty(), "{name}: {:?}", report.left_out);
            let instrumented: Vec<&str> = report.kernels.iter().map(|k| k.name.as_str()).collect();
            assert!(instrumented.iter().any(|k| k.contains("everyVgpr")), "{name}: {instrumented:?}");
            if what == "branches" {
                let sliding = report.kernels.iter().find(|k| k.name.contains("everyVectorRegister")).unwrap();
                assert_eq!(sliding.sva_moves, slid.move_points(), "{name}");
                assert!(report.render_text().contains("SVA sliding between free VGPRs"), "{name}");
            }
            assert_accepted(&app, &bytes, dir.path(), &name);
            let output = CodeObject::parse(bytes, Vec::new()).unwrap();
            assert_verified(&app, &output, &name);
            let lifted_output = lift(&output).unwrap();
            let function = lifted_output.functions.iter().find(|f| f.name.contains("everyVgpr")).unwrap();
            let code: Vec<String> = function
                .instructions()
                .map(|i| lifted_output.isa.mc.print(&i.raw, i.address).unwrap_or_default().trim().to_string())
                .collect();
            // The preamble stores the SVA in its AGPR with EXEC at every lane...
            let store = code
                .iter()
                .position(|l| l == &format!("v_accvgpr_write_b32 a{sva}, v255"))
                .or_else(|| code.iter().position(|l| l.starts_with(&format!("v_accvgpr_write_b32 a{sva}, v"))));
            let store = store.unwrap_or_else(|| panic!("{name}: no store of a{sva}:\n{}", code[..40].join("\n")));
            assert!(code[..store].iter().any(|l| l == "s_mov_b64 exec, -1"), "{name}");
            // ...and payloads load it back the same way.
            let loads = code.iter().filter(|l| l.starts_with("v_accvgpr_read_b32") && l.ends_with(&format!("a{sva}")));
            assert!(loads.count() > 0, "{name}");
            if what == "every-instruction" {
                // Right after the inline assembly all 256 VGPRs are live:
                // live VGPRs are parked in AGPRs and given back.
                let parked = code.iter().filter(|l| l.starts_with("v_accvgpr_write_b32") && l.contains(", v")).count();
                assert!(parked > 1, "{name}: {parked}");
            }
        }
    }
}

/// A tool built by an older plugin (fuzz/seeds/tool predates it) declares
/// no managed storage in its embedded module: the tool's own code object
/// still defines `Counter.managed`, and the counter still gets storage its
/// pointer points at.
#[test]
fn a_tool_from_an_older_plugin_still_gets_managed_storage() {
    use gpuinstr::stages::load::instrumented::{tool_globals, ToolGlobalEntry};
    let seeds = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds");
    let tool = load::load(&seeds.join("tool/instruction-counter.hsaco")).unwrap().code_objects.remove(0);
    let app = load::load(&seeds.join("code-object/vector-add.hsaco")).unwrap().code_objects.remove(0);
    let plan = Plan::load(&seeds.join("plan/instruction-counter.toml")).unwrap();
    let options = InstrumentOptions::default();
    let (bytes, _) = instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &options).unwrap();
    let output = CodeObject::parse(bytes, Vec::new()).unwrap();
    let counter = ToolGlobalEntry {
        symbol: "Counter.managed".into(),
        tool_name: "Counter".into(),
        size: 8,
        managed: true,
        records: None,
        ring: None,
    };
    assert_eq!(tool_globals(&output).unwrap(), vec![counter]);
}

/// A buffer of records the tool declares (`GPUINSTR_RECORDS(Log,
/// LogCount)`) is listed with its count in the instrumented code object
/// (the runtime then copies only the records written); a hook that writes
/// the buffer but never the count it names is refused, naming the
/// declaration. A ring (`GPUINSTR_RING(Entry, Stream)`) is listed as the
/// pointer to its head with its records' size.
#[test]
fn record_buffers_are_listed_with_their_counts() {
    use gpuinstr::stages::load::instrumented::{tool_globals, Records};
    let dir = scratch();
    let path = dir.path().join("records.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &input("tools/records.hip"), "-O3", &path));
    let tool = load::load(&path).unwrap().code_objects.remove(0);
    let app = load::load_for_target(&test_kernels("control_flow"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let plan = |hook: &str| {
        let text = format!("[[insert]]\nhook = \"{hook}\"\nwhere = \"kernel-entry\"\nargs = [7]\n");
        Plan::parse(&text, "p.toml").unwrap()
    };
    let options = InstrumentOptions::default();
    let instrument =
        |hook: &str| instrument_code_object(&tool, &app, &plan(hook), &Registry::with_builtins(), &options);
    let (bytes, _) = instrument("logCounted").unwrap();
    let listed: Vec<(String, Option<Records>)> = tool_globals(&CodeObject::parse(bytes, Vec::new()).unwrap())
        .unwrap()
        .into_iter()
        .map(|g| (g.tool_name, g.records))
        .collect();
    let records = Records { count: "LogCount".into(), record_bytes: 8 };
    assert_eq!(listed, [("Log".to_string(), Some(records)), ("LogCount".to_string(), None)]);
    let error = instrument("logUncounted").expect_err("refused").to_string();
    assert!(
        error.contains("GPUINSTR_RECORDS(Log, ...): the hooks write `Log` but never its count `LogCount`"),
        "{error}"
    );
    // A ring is a pointer the runtime points at the ring's head.
    let (bytes, _) = instrument("stream").unwrap();
    let listed: Vec<(String, u64, Option<u64>)> = tool_globals(&CodeObject::parse(bytes, Vec::new()).unwrap())
        .unwrap()
        .into_iter()
        .map(|g| (g.tool_name, g.size, g.ring))
        .collect();
    assert_eq!(listed, [("Stream".to_string(), 8, Some(8))]);
}

/// A tool's globals keep the initial values the tool gave them (zero ones
/// stay in .bss): the instrumented code object holds them, and a kernel
/// counting from them counts on from there in the emulator.
#[test]
fn tool_globals_keep_their_initial_values() {
    use gpuinstr::stages::load::instrumented::tool_globals;
    let dir = scratch();
    let path = dir.path().join("initial-values.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &input("tools/initial-values.hip"), "-O3", &path));
    let tool = load::load(&path).unwrap().code_objects.remove(0);
    let app = load::load_for_target(&test_kernels("control_flow"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let plan = Plan::parse("[[insert]]\nhook = \"spend\"\nwhere = \"kernel-entry\"\n", "p.toml").unwrap();
    let options = InstrumentOptions::default();
    let (bytes, _) = instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &options).unwrap();
    let output = CodeObject::parse(bytes, Vec::new()).unwrap();
    let listed: Vec<(String, u64, bool)> =
        tool_globals(&output).unwrap().into_iter().map(|g| (g.symbol, g.size, g.managed)).collect();
    assert_eq!(listed, [("Start".to_string(), 4, false), ("Budget.managed".to_string(), 8, true)]);
    let mut device = gpuinstr_emulator::Device::new(output, "instrumented".into()).unwrap();
    let start = device.symbol_address("Start").unwrap();
    let budget = device.memory.read_u64(device.symbol_address("Budget").unwrap()).unwrap();
    assert_eq!(Some(budget), device.symbol_address("Budget.managed"), "Budget points at its storage");
    assert_eq!(device.memory.bytes(start, 4).unwrap(), 1000u32.to_le_bytes());
    assert_eq!(device.memory.read_u64(budget).unwrap(), 77);
    // One wave of the first kernel: the hook runs once.
    let kernel = device.code_object.kernels[0].name().to_string();
    let n = 64i32.to_le_bytes().to_vec();
    let sizes: Vec<u64> =
        device.code_object.kernels[0].metadata.arguments.iter().filter(|a| !a.is_hidden()).map(|a| a.size).collect();
    let arguments: Vec<Vec<u8>> = sizes
        .iter()
        .map(|&size| if size == 8 { device.allocate("buffer", &[0; 1024]).to_le_bytes().to_vec() } else { n.clone() })
        .collect();
    device.launch(&kernel, gpuinstr_emulator::Launch::linear(1, 64), &arguments).unwrap();
    assert_eq!(device.memory.bytes(start, 4).unwrap(), 1001u32.to_le_bytes());
    assert_eq!(device.memory.read_u64(budget).unwrap(), 76);
}

/// Patched code laid out as machine code (the default) is the code llvm-mc
/// makes of the same patch written as assembly (`--emit-assembly`): the
/// same bytes in `.text` (payloads, branches resolved against the new
/// layout, long jumps, pc-relative literals and the tool's globals through
/// the GOT), the same site table and descriptors, with every example tool
/// and with the originals kept beside the copies.
#[test]
fn machine_code_is_what_the_assembly_assembles_to() {
    use gpuinstr::stages::emit::CodeForm;
    use object::{Object, ObjectSection};
    let dir = scratch();
    let registry = Registry::with_builtins();
    let adds = "\tv_add_u32_e32 v1, v1, v1\n".repeat(1_500);
    let far = format!(
        "\ts_cmp_eq_u32 s2, 0\n\ts_cbranch_scc1 .Lfar\n{adds}\ts_branch .Lend\n.Lfar:\n{adds}.Lend:\n\ts_endpgm\n"
    );
    let mut apps: Vec<(String, CodeObject)> = TEST_KERNELS
        .iter()
        .map(|k| {
            (k.to_string(), load::load_for_target(&test_kernels(k), Some("gfx90a")).unwrap().code_objects.remove(0))
        })
        .collect();
    apps.push(("far-branches".into(), kernel_from_assembly("gfx90a", &far, "")));
    for example in ["instruction-counter", "memory-tracer", "branch-divergence", "kernel-arguments"] {
        let tool = dir.path().join(format!("{example}.hsaco"));
        run_ok(&mut tool_compile_command(Compiler::Clang, &self::example(example), "-O3", &tool));
        let tool = load::load(&tool).unwrap().code_objects.remove(0);
        let plan = Plan::load(&repo().join(format!("hook-sdk/examples/{example}/plan.toml"))).unwrap();
        for (kernels, app) in &apps {
            if plan.select(&lift(app).unwrap()).is_empty() {
                continue;
            }
            for keep_originals in [false, true] {
                let name = format!("{example}-{kernels}-{keep_originals}");
                let outputs: Vec<Vec<u8>> = [CodeForm::Bytes, CodeForm::Text]
                    .into_iter()
                    .map(|emit_code| {
                        let options = InstrumentOptions {
                            grow_registers: RegisterGrowth::Always,
                            keep_originals,
                            emit_code,
                            ..InstrumentOptions::default()
                        };
                        instrument_code_object(&tool, app, &plan, &registry, &options)
                            .unwrap_or_else(|e| panic!("{name}: {e}"))
                            .0
                    })
                    .collect();
                let (laid_out, assembled) =
                    (object::File::parse(&*outputs[0]).unwrap(), object::File::parse(&*outputs[1]).unwrap());
                for section in [".text", ".rodata", ".gpuinstr.points"] {
                    let contents =
                        |file: &object::File| file.section_by_name(section).map(|s| s.data().unwrap().to_vec());
                    assert!(contents(&laid_out) == contents(&assembled), "{name}: {section} differs");
                }
                // The site tables are laid out differently (by function,
                // or three addresses a site) and say the same.
                let sites = |bytes: &[u8]| {
                    let output = CodeObject::parse(bytes.to_vec(), Vec::new()).unwrap();
                    gpuinstr::stages::load::instrumented::site_table(&output).unwrap()
                };
                let (by_function, by_address) = (sites(&outputs[0]), sites(&outputs[1]));
                assert!(!by_function.is_empty(), "{name}: no sites");
                assert!(by_function == by_address, "{name}: the site tables differ");
                if !keep_originals && kernels == "far-branches" {
                    let output = CodeObject::parse(outputs[0].clone(), Vec::new()).unwrap();
                    assert!(assert_verified(app, &output, &name).branches >= 2, "{name}: long jumps");
                }
            }
        }
    }
}

/// Links from several threads at once, as a whole-library `instrument`
/// does (each link the same bytes as one alone).
#[test]
fn links_from_several_threads_at_once_are_each_whole() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("kernel.s");
    let kernels: String = (0..40)
        .map(|k| {
            format!(
                ".text\n.globl k{k}\n.p2align 8\n.type k{k},@function\nk{k}:\n  s_endpgm\n.rodata\n.p2align 6\n\
                 .amdhsa_kernel k{k}\n  .amdhsa_next_free_vgpr 1\n  .amdhsa_next_free_sgpr 1\n  .amdhsa_accum_offset 4\n.end_amdhsa_kernel\n"
            )
        })
        .collect();
    std::fs::write(&source, format!(".amdgcn_target \"amdgcn-amd-amdhsa--gfx90a\"\n{kernels}")).unwrap();
    let relocatable = dir.path().join("kernel.o");
    let status = gpuinstr::toolchain::llvm_tool("llvm-mc")
        .args(["-triple=amdgcn-amd-amdhsa", "-mcpu=gfx90a", "-filetype=obj", "-o"])
        .arg(&relocatable)
        .arg(&source)
        .status()
        .unwrap();
    assert!(status.success());
    let relocatable = std::fs::read(&relocatable).unwrap();
    let isa = "amdgcn-amd-amdhsa--gfx90a";
    let alone = gpuinstr::native::link_relocatable(&relocatable, isa, &[]).unwrap();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..25 {
                    assert!(gpuinstr::native::link_relocatable(&relocatable, isa, &[]).unwrap() == alone);
                }
            });
        }
    });
}
