//! Defects a new user hit (issue 20), each as a class, on small programs of
//! our own (tests/inputs/regressions): a test here fails without its fix.

use gpuinstr::instrument::instrument_code_object;
use gpuinstr::plan::Plan;
use gpuinstr::roundtrip::roundtrip;
use gpuinstr::stages::emit::link::Linker;
use gpuinstr::stages::lift::lift;
use gpuinstr::stages::load::{self, CodeObject};
use gpuinstr_emulator::{Device, Launch};
use gpuinstr_intrinsics::Registry;
use gpuinstr_tests::*;

fn code_object(source: &str, target: &str) -> CodeObject {
    load::load_for_target(&hip_object(&format!("regressions/{source}")), Some(target)).unwrap().code_objects.remove(0)
}

fn counter_tool(dir: &std::path::Path) -> CodeObject {
    let path = dir.join("counter.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &example("instruction-counter"), "-O3", &path));
    load::load(&path).unwrap().code_objects.remove(0)
}

fn counter_plan() -> Plan {
    Plan::load(&repo().join("hook-sdk/examples/instruction-counter/plan.toml")).unwrap()
}

/// The application instrumented with the instruction counter, checked by
/// `verify`.
fn instrumented_with_counter(app: &CodeObject, dir: &std::path::Path) -> CodeObject {
    let (bytes, _) = instrument_code_object(
        &counter_tool(dir),
        app,
        &counter_plan(),
        &Registry::with_builtins(),
        &Default::default(),
    )
    .unwrap();
    let output = CodeObject::parse(bytes, Vec::new()).unwrap();
    let report = gpuinstr::verify::verify(app, &output).unwrap();
    assert!(report.ok(), "{}", report.render_text());
    output
}

/// Item 2: instructions whose printed text loses bits (LLVM 15 prints
/// `buffer_wbl2` without its cache policy: E0A0C000 would come back as
/// E0A00000) are written as their bytes in every path: round trip and
/// instrument, with no second attempt needed.
#[test]
fn instructions_whose_text_loses_bits_keep_their_bytes() {
    let dir = scratch();
    // gfx90a: gfx908 has no buffer_wbl2.
    for target in ["gfx90a"] {
        let app = code_object("printf.hip", target);
        let original = lift(&app).unwrap();
        let policy_bits: Vec<u64> = original
            .functions
            .iter()
            .flat_map(|f| f.instructions())
            .filter(|i| original.isa.opcode_name(i.raw.opcode).starts_with("BUFFER_WBL2") && i.bytes[1] & 0xc0 != 0)
            .map(|i| i.address)
            .collect();
        assert!(!policy_bits.is_empty(), "{target}: hostcall's buffer_wbl2 with cache-policy bits");

        let (bytes, report) = roundtrip(&app, Linker::Comgr).unwrap();
        assert!(report.identical(), "{target}:\n{}", report.render_text());
        assert!(report.raw_instructions >= policy_bits.len(), "{target}: written as bytes");
        let rebuilt = CodeObject::parse(bytes, Vec::new()).unwrap();
        for address in &policy_bits {
            assert_eq!(rebuilt.bytes_at(*address, 8), app.bytes_at(*address, 8), "{target}: {address:#x}");
        }

        // Every original instruction, these included, is in the instrumented code.
        instrumented_with_counter(&app, dir.path());
        let text = gpuinstr::stages::lift::print::asm(&original, None);
        assert!(text.contains("; buffer_wbl2 (the text assembles to other bytes)"), "{target}: lift --emit asm");
    }
}

/// The verifier names two instructions that print alike by their encodings.
#[test]
fn the_verifier_shows_the_encodings_of_instructions_that_differ() {
    let app = code_object("printf.hip", "gfx90a");
    let dir = scratch();
    let output = instrumented_with_counter(&app, dir.path());
    // Drop the policy bits of the first buffer_wbl2 in the output.
    let lifted = lift(&output).unwrap();
    let wbl2 = lifted
        .functions
        .iter()
        .flat_map(|f| f.instructions())
        .find(|i| lifted.isa.opcode_name(i.raw.opcode).starts_with("BUFFER_WBL2") && i.bytes[1] & 0xc0 != 0)
        .unwrap()
        .address;
    let mut bytes = output.bytes.to_vec();
    let section = output.section_containing(wbl2).unwrap();
    let offset = (section.offset + wbl2 - section.address) as usize;
    bytes[offset + 1] &= !0xc0;
    let broken = CodeObject::parse(bytes, Vec::new()).unwrap();
    let report = gpuinstr::verify::verify(&app, &broken).unwrap();
    let text = report.render_text();
    assert!(text.contains("`buffer_wbl2` (E0A0C000 00000000), found `buffer_wbl2` (E0A00000 00000000)"), "{text}");
}

/// Item 4: a pc-relative reference into a symbol (`table+4`) keeps the
/// offset in the addend; llvm-mc rejects `table+4@rel32@lo+4`. The kernel
/// instrumented still reads the same table entries in the emulator.
#[test]
fn references_into_a_constant_table_assemble_and_read_the_same_entries() {
    let dir = scratch();
    for target in ["gfx908", "gfx90a"] {
        let app = code_object("constant_table.hip", target);
        let lifted = lift(&app).unwrap();
        let offsets: Vec<(String, u64)> = lifted
            .functions
            .iter()
            .flat_map(|f| f.instructions())
            .filter_map(|i| i.pc_relative.as_ref())
            .map(|pc| lifted.address_parts(pc.target))
            .collect();
        assert!(offsets.iter().any(|(_, offset)| *offset > 0), "{target}: a reference into the table: {offsets:?}");
        let (_, report) = roundtrip(&app, Linker::Comgr).unwrap();
        assert!(report.identical(), "{target}:\n{}", report.render_text());

        let output = instrumented_with_counter(&app, dir.path());
        let input: Vec<u8> = (0..64i32).flat_map(|i| (i * 7 + 3).to_le_bytes()).collect();
        let run = |code_object: &CodeObject, name: &str| {
            let mut device = Device::new(code_object.clone(), name.into()).unwrap();
            if name == "instrumented" {
                device.bind_managed("Counter", 8).unwrap();
            }
            let inputs = device.allocate("in", &input);
            let outputs = device.allocate("out", &[0; 256]);
            let arguments = [inputs.to_le_bytes().to_vec(), outputs.to_le_bytes().to_vec()];
            device.launch("_Z6lookupPKiPi", Launch::linear(1, 64), &arguments).unwrap_or_else(|e| panic!("{e}"));
            device.memory.bytes(outputs, 256).unwrap()
        };
        let expected: Vec<u8> = (0..64i32)
            .flat_map(|i| [3i32, 1, 4, 1, 5, 9, 2, 6, 5][(((i * 7 + 3) & 7) + 1) as usize].to_le_bytes())
            .collect();
        assert_eq!(run(&app, "original"), expected, "{target}: the original");
        assert_eq!(run(&output, "instrumented"), expected, "{target}: instrumented");
    }
}

/// What the instruction counter must count for a run of the original: one
/// per wave execution of an instruction the scalar hooks count, the active
/// lanes of each execution of the others.
fn expected_count(app: &CodeObject, report: &gpuinstr_emulator::RunReport) -> u64 {
    let lifted = lift(app).unwrap();
    counter_plan()
        .select(&lifted)
        .iter()
        .map(|point| {
            let instruction = lifted.functions[point.function].instructions().nth(point.instruction).unwrap();
            let (waves, lanes) = report.counts.per_address.get(&instruction.address).copied().unwrap_or((0, 0));
            if point.calls.iter().all(|c| c.hook == "countInstructionsScalar") {
                waves
            } else {
                lanes
            }
        })
        .sum()
}

/// Item 1: a kernel without `__launch_bounds__` at the VGPR limit of a
/// wave (1,024 work-items: 128 on gfx90a, 64 on gfx908). With default
/// options every point is instrumented (payloads compiled within the
/// kernel's limit; LLVM once took v[128:129], and gfx90a's AGPRs, while
/// aligned pairs below were free), the allocation stays within the limit,
/// and the emulated count is what ran.
#[test]
fn kernels_at_the_vgpr_limit_keep_every_point() {
    use gpuinstr::stages::load::occupancy;
    let dir = scratch();
    let tool = counter_tool(dir.path());
    for target in ["gfx90a", "gfx908"] {
        let app = code_object("vgpr_limit.hip", target);
        let kernel = &app.kernels[0];
        let (wave_vgprs, wave_total) =
            occupancy::wave_register_limit(app.target.model().unwrap(), kernel.metadata.max_flat_workgroup_size as u32);
        assert_eq!(kernel.metadata.vgpr_count as usize, wave_vgprs, "{target}: the kernel is at the limit");
        let (bytes, report) =
            instrument_code_object(&tool, &app, &counter_plan(), &Registry::with_builtins(), &Default::default())
                .unwrap_or_else(|e| panic!("{target}: {e}"));
        assert!(report.left_out.is_empty(), "{target}: {:#?}", report.left_out);
        assert_eq!(report.points, report.selected, "{target}");
        let patched = &report.kernels[0];
        assert!(patched.vector_allocation.1 <= wave_total, "{target}: {patched:?}");
        assert!(patched.vgprs.1 <= wave_vgprs, "{target}: {patched:?}");
        let output = CodeObject::parse(bytes, Vec::new()).unwrap();
        let verified = gpuinstr::verify::verify(&app, &output).unwrap();
        assert!(verified.ok(), "{target}: {}", verified.render_text());

        let input: Vec<u8> = (0..6400).flat_map(|i| ((i % 13) as f32 * 0.01).to_le_bytes()).collect();
        let run = |code_object: &CodeObject, instrumented: bool| {
            let mut device = Device::new(code_object.clone(), target.into()).unwrap();
            let counter = instrumented.then(|| device.bind_managed("Counter", 8).unwrap());
            let inputs = device.allocate("in", &input);
            let outputs = device.allocate("out", &[0; 256]);
            let arguments =
                [inputs.to_le_bytes().to_vec(), outputs.to_le_bytes().to_vec(), 3i32.to_le_bytes().to_vec()];
            let run = device.launch("_Z8pressurePKfPfi", Launch::linear(1, 64), &arguments).unwrap();
            let counted = counter.map(|c| device.memory.read_u64(c).unwrap());
            (device.memory.bytes(outputs, 256).unwrap(), run, counted)
        };
        let (expected, original, _) = run(&app, false);
        let (computed, _, counted) = run(&output, true);
        assert_eq!(computed, expected, "{target}: the kernel's results");
        assert_eq!(counted, Some(expected_count(&app, &original)), "{target}: the counter");
    }
}

/// A kernel whose every VGPR, AGPR and SGPR is live at once (v0-v31,
/// a0-a31 of a 64-register allocation, s0-s101): where they all are, no
/// SGPR pair is left to save EXEC in around a payload's whole-wave copies,
/// so nothing fits without growing (the SVA itself can live in the wave's
/// slot in memory).
fn dense_kernel() -> CodeObject {
    let vgprs: String = (0..32).map(|v| format!("\tv_mov_b32_e32 v{v}, 0\n")).collect();
    let agprs: String = (0..32).map(|a| format!("\tv_accvgpr_write_b32 a{a}, 0\n")).collect();
    let sgprs: String = (0..102).map(|s| format!("\ts_mov_b32 s{s}, {s}\n")).collect();
    let reads: String = (1..32).map(|v| format!("\tv_add_u32_e32 v0, v0, v{v}\n")).collect();
    let scalar_reads: String = (1..102).map(|s| format!("\ts_add_u32 s0, s0, s{s}\n")).collect();
    let keep_agprs: String = (0..32).map(|a| format!("\tv_accvgpr_read_b32 v1, a{a}\n")).collect();
    let body = vgprs
        + &agprs
        + &sgprs
        + &reads
        + &scalar_reads
        + &keep_agprs
        + "\tv_add_u32_e32 v0, s0, v0\n\tglobal_store_dword v[0:1], v0, off\n\ts_endpgm";
    kernel_from_assembly(mi300(), &body, "")
}

/// Item 1: a run that would leave selected points out fails, saying how
/// many and why, and writes nothing; `allow_partial` accepts it and the
/// report says so first; growing places every point.
#[test]
fn points_left_out_fail_the_run_unless_partial_results_are_accepted() {
    use gpuinstr::instrument::{instrument_file, InstrumentError, InstrumentOptions};
    use gpuinstr::stages::load::instrumented::{self, PartialKernel};
    use gpuinstr::stages::sva::RegisterGrowth;
    let dir = scratch();
    counter_tool(dir.path());
    let tool = gpuinstr::tool::Tool::load(&dir.path().join("counter.hsaco")).unwrap();
    let app = dense_kernel();
    let path = dir.path().join("dense.hsaco");
    std::fs::write(&path, &app.bytes).unwrap();
    let registry = Registry::with_builtins();
    let instrument = |options: &InstrumentOptions| {
        instrument_file(&tool, &path, &app.bytes, &counter_plan(), &registry, options, None)
    };
    let linker = linker_for(&app);
    let never = InstrumentOptions { grow_registers: RegisterGrowth::Never, linker, ..Default::default() };
    let error = instrument(&never).unwrap_err();
    let InstrumentError::PointsLeftOut { left_out, selected, .. } = &error else { panic!("{error}") };
    assert!(*left_out > 0 && left_out < selected, "{error}");
    let text = error.to_string();
    assert!(text.contains("would be left out") && text.contains("--allow-partial"), "{text}");
    assert!(text.contains("no registers for the payload") && text.contains("--grow-registers=always"), "{text}");

    let (bytes, report) = instrument(&InstrumentOptions { allow_partial: true, ..never }).unwrap();
    let partial = report.partial.as_ref().expect("the report says it is partial");
    assert_eq!((partial.left_out, partial.selected), (*left_out, *selected));
    let text = report.render_text();
    assert!(text.starts_with(&format!("PARTIAL: {left_out} of {selected} selected points are left out")), "{text}");
    // The output says which kernel's numbers miss them (the runtime marks
    // its dispatches) and flags the points in its point table.
    let kernel = app.kernels[0].name().to_string();
    assert!(report.code_objects[0].left_out.iter().all(|p| p.kernels == [kernel.clone()] && p.function == kernel));
    assert!(
        text.contains(&format!(
            "kernels whose numbers miss points (the runtime marks their dispatches): {kernel} ({left_out})"
        )),
        "{text}"
    );
    let output = CodeObject::parse(bytes, Vec::new()).unwrap();
    let partial_kernels = instrumented::partial_kernels(&output).unwrap();
    assert_eq!(partial_kernels, [PartialKernel { kernel: kernel.clone(), left_out: *left_out as u32 }]);
    let flagged = instrumented::point_table(&output).unwrap().iter().filter(|p| p.left_out).count();
    assert_eq!(flagged, *left_out);

    let always = InstrumentOptions { grow_registers: RegisterGrowth::Always, linker, ..Default::default() };
    let (bytes, report) = instrument(&always).unwrap();
    assert!(report.partial.is_none());
    assert_eq!(report.code_objects[0].selected, *selected);
    let output = CodeObject::parse(bytes, Vec::new()).unwrap();
    assert!(gpuinstr::verify::verify(&app, &output).unwrap().ok());
    assert_eq!(instrumented::partial_kernels(&output).unwrap(), []);
}

/// Item 10: the report says exactly what changed and why: AGPRs only where
/// the code uses them, no VGPR growth when growth is off, and a line per
/// change with its cause and its cost in occupancy.
#[test]
fn the_report_says_what_changed_in_the_allocation_and_why() {
    use gpuinstr::instrument::InstrumentOptions;
    use gpuinstr::stages::sva::RegisterGrowth;
    let dir = scratch();
    let tool = counter_tool(dir.path());
    let app = code_object("printf.hip", "gfx90a");
    let registry = Registry::with_builtins();
    let run = |grow| {
        let options = InstrumentOptions { grow_registers: grow, ..Default::default() };
        instrument_code_object(&tool, &app, &counter_plan(), &registry, &options).unwrap().1
    };
    let report = run(RegisterGrowth::Never);
    let kernel = &report.kernels[0];
    // Never growing is about the allocation: payloads may use VGPRs the
    // allocation granule already holds (clang 17's kernel has 36 of 40).
    assert_eq!(kernel.vector_allocation.0, kernel.vector_allocation.1, "{kernel:?}");
    assert_eq!(kernel.waves_per_simd.0, kernel.waves_per_simd.1, "{kernel:?}");
    let report = run(RegisterGrowth::FreeOfOccupancy);
    let kernel = &report.kernels[0];
    assert_eq!(kernel.agprs, (0, 0), "the kernel has no AGPRs: {kernel:?}");
    assert_eq!(kernel.waves_per_simd.0, kernel.waves_per_simd.1, "no occupancy cost: {kernel:?}");
    let text = report.render_text();
    if kernel.vgprs.1 > kernel.vgprs.0 {
        // The highest VGPR payloads use is past the original allocation and
        // within the new one (which rounds up to the allocation granule).
        let line = format!("VGPRs {} -> {}: payloads use up to v", kernel.vgprs.0, kernel.vgprs.1);
        let highest: usize = text
            .split(&line)
            .nth(1)
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{text}"));
        assert!(highest >= kernel.vgprs.0 && highest < kernel.vgprs.1, "{kernel:?}: {text}");
        // Why it costs nothing: waves per SIMD stay, or (gfx90a, AGPRs after
        // the VGPRs) the unified allocation does.
        assert!(text.contains("no occupancy cost") || text.contains("the unified allocation stays the same"), "{text}");
    }
    let row = text.lines().find(|l| l.trim_start().starts_with("_Z5helloPi ")).unwrap();
    assert!(row.split_whitespace().nth(5) == Some("-"), "AGPRs shown as none: {row}");
}

/// Items 6 and 8: a tool built for several targets gives each code object
/// of the application the tool's code object for its target; a tool built
/// without the plugin is an error about the tool's file.
#[test]
fn tools_are_matched_to_targets_and_named_in_their_errors() {
    use gpuinstr::instrument::instrument_file;
    let dir = scratch();
    let tool_path = dir.path().join("counter-both.o");
    run_ok(
        hipcc()
            .args(["--offload-arch=gfx90a", "--offload-arch=gfx908", "-O3", "-c"])
            .arg(format!("-fpass-plugin={}", plugin().display()))
            .arg("-I")
            .arg(sdk_include())
            .arg(example("instruction-counter"))
            .arg("-o")
            .arg(&tool_path),
    );
    let tool = gpuinstr::tool::Tool::load(&tool_path).unwrap();
    assert_eq!(tool.code_objects.len(), 2);
    let app_path = hip_object("regressions/constant_table.hip");
    let bytes = std::fs::read(&app_path).unwrap();
    let app = load::load(&app_path).unwrap();
    for code_object in &app.code_objects {
        let chosen = tool.for_target(&code_object.target).unwrap();
        assert_eq!(chosen.target.processor, code_object.target.processor);
    }
    let (_, report) = instrument_file(
        &tool,
        &app_path,
        &bytes,
        &counter_plan(),
        &Registry::with_builtins(),
        &Default::default(),
        None,
    )
    .unwrap();
    let mut targets: Vec<&str> = report.code_objects.iter().map(|r| r.target.as_str()).collect();
    targets.sort();
    assert_eq!(targets, ["gfx908", "gfx90a"]);

    // The application's host object has code objects but no hooks.
    let error = gpuinstr::tool::Tool::load(&app_path).err().expect("not a tool").to_string();
    assert!(error.starts_with(&app_path.display().to_string()), "{error}");
    assert!(error.contains("no .llvmbc section"), "{error}");
}

/// Item 7: a plan that selects nothing in a file gives the file back
/// unchanged, and says so; `require_points` makes it an error.
#[test]
fn a_plan_selecting_nothing_leaves_the_file_unchanged() {
    use gpuinstr::instrument::{instrument_file, InstrumentError, InstrumentOptions};
    let dir = scratch();
    counter_tool(dir.path());
    let tool = gpuinstr::tool::Tool::load(&dir.path().join("counter.hsaco")).unwrap();
    let plan =
        Plan::parse("[[insert]]\nhook = \"countInstructionsScalar\"\nwhere = \"opcode:V_MFMA.*\"\n", "mfma.toml")
            .unwrap();
    let registry = Registry::with_builtins();
    let app_path = hip_object("regressions/constant_table.hip");
    let bytes = std::fs::read(&app_path).unwrap();
    let (output, report) =
        instrument_file(&tool, &app_path, &bytes, &plan, &registry, &InstrumentOptions::default(), None).unwrap();
    assert!(output == bytes, "the file comes back unchanged");
    assert!(report.code_objects.is_empty());
    assert_eq!(report.unchanged.len(), 2, "{:?}", report.unchanged);
    assert!(report.render_text().contains("left as it was: kernels: _Z6lookupPKiPi"), "{}", report.render_text());
    let strict = InstrumentOptions { require_points: true, ..Default::default() };
    let error = instrument_file(&tool, &app_path, &bytes, &plan, &registry, &strict, None).unwrap_err();
    assert!(matches!(error, InstrumentError::NothingSelectedInFile), "{error}");
}

/// The calls to each intrinsic of tests/inputs/tools/folding-bindings.hip
/// in the embedded modules of a tool file: (hwId, uninitialised, mark).
fn binding_calls(tool: &std::path::Path, dir: &std::path::Path) -> (usize, usize, usize) {
    let mut counts = (0, 0, 0);
    for code_object in load::load(tool).unwrap().code_objects {
        for bitcode in gpuinstr::tool::embedded_bitcode(&code_object).unwrap() {
            let ir = llvm_dis(bitcode, dir);
            let calls = |name: &str| ir.lines().filter(|l| l.contains(" call ") && l.contains(name)).count();
            counts.0 += calls("@\"mytool::hwId.i32\"(");
            counts.1 += calls("@\"mytool::uninitialised.i32\"(");
            counts.2 += calls("@\"mytool::mark.void.i32\"(");
        }
    }
    counts
}

/// Item 3: bindings whose bodies an optimiser sees through (`return 0`, an
/// uninitialised return, an empty void body) keep one call per source call
/// in the embedded module, at -O0 to -O3, with hipcc and clang++-15, under
/// -fgpu-rdc and through ld.lld's LTO with the plugin; and `instrument`
/// then refuses the tool without their lowerings instead of accepting it.
#[test]
fn intrinsic_bindings_survive_every_optimisation_level_and_build_path() {
    let dir = scratch();
    let source = input("tools/folding-bindings.hip");
    let expected = (2, 1, 1);
    for compiler in [Compiler::Hipcc, Compiler::Clang] {
        for opt in ["-O0", "-O1", "-O2", "-O3"] {
            let tool = dir.path().join(format!("folding-{compiler:?}{opt}.o"));
            run_ok(&mut tool_compile_command(compiler, &source, opt, &tool));
            assert_eq!(binding_calls(&tool, dir.path()), expected, "{compiler:?} {opt}");
        }
    }

    // -fgpu-rdc with hipcc: embedded at pre-link, one module per unit.
    let rdc = dir.path().join("folding-rdc.so");
    run_ok(
        hipcc()
            .args(["--offload-arch=gfx90a", "-fgpu-rdc", "-O3", "-shared", "-fPIC"])
            .arg(format!("-fpass-plugin={}", plugin().display()))
            .arg("-I")
            .arg(sdk_include())
            .arg(&source)
            .arg("-o")
            .arg(&rdc),
    );
    assert_eq!(binding_calls(&rdc, dir.path()), expected, "hipcc -fgpu-rdc");

    // Units compiled without the plugin, linked by ld.lld with it (LTO).
    let bitcode = dir.path().join("folding.bc");
    run_ok(
        clang()
            .args(["-x", "hip", "--offload-arch=gfx90a", "--rocm-path=/usr", "--cuda-device-only", "-fgpu-rdc"])
            .arg(format!("--rocm-device-lib-path={}", rocm_device_libs().display()))
            .args(["-O3", "-c", "-emit-llvm", "-I"])
            .arg(sdk_include())
            .arg(&source)
            .arg("-o")
            .arg(&bitcode),
    );
    let linked = dir.path().join("folding-lto.hsaco");
    run_ok(
        gpuinstr::toolchain::llvm_tool("ld.lld")
            .args(["-shared", "-plugin-opt=mcpu=gfx90a", "-plugin-opt=O3"])
            .arg(format!("--load-pass-plugin={}", plugin().display()))
            .arg(&bitcode)
            .arg("-o")
            .arg(&linked),
    );
    assert_eq!(binding_calls(&linked, dir.path()), expected, "ld.lld LTO");

    // Without lowerings for them, the tool is refused.
    let tool = load::load(&dir.path().join("folding-Clang-O3.o")).unwrap().code_objects.remove(0);
    let app = code_object("constant_table.hip", "gfx90a");
    let plan = Plan::parse("[[insert]]\nhook = \"record\"\nwhere = \"kernel-entry\"\n", "record.toml").unwrap();
    let error = instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &Default::default())
        .map(|(_, report)| report.render_text())
        .expect_err("intrinsics without lowerings are refused")
        .to_string();
    assert!(error.contains("calls intrinsic `mytool::") && error.contains("which has no lowering"), "{error}");
}

/// Issue 59: Tensile assembles each kernel in a file of its own, with the
/// same local labels (`label_AlphaNonZero`, `label_skip_c_buffer_deref_...`)
/// and a metadata note of its own, and links them into one code object.
/// Such a code object round-trips exactly (its notes too), and the counter
/// instruments it and counts what the emulator runs (it was refused:
/// "defines `label_AlphaNonZero` twice"; and only the last note's kernel
/// was seen). Its long branches (`s_setpc_b64` to a label a pc-relative
/// `s_add_i32` gives) are jumps to known targets, so the code can move.
#[test]
fn kernels_sharing_local_label_names_round_trip_and_instrument() {
    let dir = scratch();
    let kernel = |name: &str, step: u32| AssemblyKernel {
        name: name.into(),
        body: format!(
            "\ts_load_dwordx2 s[4:5], s[0:1], 0x0\n\ts_load_dword s6, s[0:1], 0x8\n\
             \tv_lshlrev_b32_e32 v1, 2, v0\n\tv_mov_b32_e32 v2, 0\n\ts_waitcnt lgkmcnt(0)\n\
             \ts_cmp_eq_u32 s6, 0\n\ts_cbranch_scc1 label_AlphaNonZero\n\
             \tv_add_u32_e32 v2, {step}, v0\n\
             label_AlphaNonZero:\n\tglobal_store_dword v1, v2, s[4:5]\n\ts_waitcnt vmcnt(0)"
        ),
        arguments: vec![("out", 8), ("alpha", 4)],
        group_segment: 0,
        private_segment: 0,
    };
    // Tensile's long branches: s_setpc_b64 to a pc-relative label, a loop
    // back three times (adding 1), one back twice in newer Tensile's way
    // (s_abs_i32, s_sub_u32; adding 10) and a jump over a store of 99,
    // with the offset's register written once it is spent (as payloads
    // short of SGPRs do between the instructions of a Tensile kernel's
    // jumps: `verify` found 27 such jumps no longer computing an address);
    // then hand-written kernels' way (`DGEMM_Aldebaran_*`: the offset's sign
    // tested, subtracted or added), a loop back twice (adding 100) and a
    // jump over a store of 55 (their code could not move: 5,443 points).
    let jumps = AssemblyKernel {
        name: "jumps".into(),
        body: "\ts_load_dwordx2 s[4:5], s[0:1], 0x0\n\tv_lshlrev_b32_e32 v1, 2, v0\n\tv_mov_b32_e32 v2, 0\n\
               \ts_mov_b32 s7, 3\n\ts_waitcnt lgkmcnt(0)\n\
               label_LoopTop:\n\tv_add_u32_e32 v2, 1, v2\n\ts_sub_u32 s7, s7, 1\n\ts_cmp_eq_u32 s7, 0\n\
               \ts_cbranch_scc1 label_LoopDone\n\
               \ts_getpc_b64 s[20:21]\n\ts_add_i32 s22, label_LoopTop, 4\n\ts_add_u32 s20, s20, s22\n\
               \ts_addc_u32 s21, s21, -1\n\ts_setpc_b64 s[20:21]\n\
               label_LoopDone:\n\ts_mov_b32 s7, 2\n\
               label_SecondTop:\n\tv_add_u32_e32 v2, 10, v2\n\ts_sub_u32 s7, s7, 1\n\ts_cmp_eq_u32 s7, 0\n\
               \ts_cbranch_scc1 label_SecondDone\n\
               \ts_getpc_b64 s[20:21]\n\ts_add_i32 s22, label_SecondTop, 4\n\ts_abs_i32 s22, s22\n\
               \ts_sub_u32 s20, s20, s22\n\ts_subb_u32 s21, s21, 0\n\ts_setpc_b64 s[20:21]\n\
               label_SecondDone:\n\ts_mov_b32 s7, 2\n\
               label_ThirdTop:\n\tv_add_u32_e32 v2, 100, v2\n\ts_sub_u32 s7, s7, 1\n\ts_cmp_eq_u32 s7, 0\n\
               \ts_cbranch_scc1 label_ThirdDone\n\
               \ts_getpc_b64 s[20:21]\n\ts_add_i32 s22, label_ThirdTop, 4\n\ts_cmp_ge_i32 s22, 0\n\
               \ts_cbranch_scc1 label_ThirdPositive\n\ts_abs_i32 s22, s22\n\ts_sub_u32 s20, s20, s22\n\
               \ts_subb_u32 s21, s21, 0\n\ts_setpc_b64 s[20:21]\n\
               label_ThirdPositive:\n\ts_add_u32 s20, s20, s22\n\ts_addc_u32 s21, s21, 0\n\ts_setpc_b64 s[20:21]\n\
               label_ThirdDone:\n\
               \ts_getpc_b64 s[20:21]\n\ts_add_i32 s22, label_FourthDone, 4\n\ts_cmp_ge_i32 s22, 0\n\
               \ts_cbranch_scc1 label_FourthPositive\n\ts_abs_i32 s22, s22\n\ts_sub_u32 s20, s20, s22\n\
               \ts_subb_u32 s21, s21, 0\n\ts_setpc_b64 s[20:21]\n\
               label_FourthPositive:\n\ts_add_u32 s20, s20, s22\n\ts_addc_u32 s21, s21, 0\n\ts_setpc_b64 s[20:21]\n\
               \tv_mov_b32_e32 v2, 55\n\
               label_FourthDone:\n\
               \ts_getpc_b64 s[20:21]\n\ts_add_i32 s22, label_Store, 4\n\ts_add_u32 s20, s20, s22\n\
               \ts_mov_b32 s22, 7\n\ts_addc_u32 s21, s21, 0\n\ts_setpc_b64 s[20:21]\n\
               \tv_mov_b32_e32 v2, 99\n\
               label_Store:\n\tglobal_store_dword v1, v2, s[4:5]\n\ts_waitcnt vmcnt(0)"
            .into(),
        arguments: vec![("out", 8), ("alpha", 4)],
        group_segment: 0,
        private_segment: 0,
    };
    let tool = counter_tool(dir.path());
    for target in ["gfx90a", "gfx908"] {
        let app = kernels_from_separate_assembly(target, &[kernel("first", 3), kernel("second", 5), jumps.clone()]);
        let lifted = lift(&app).unwrap();
        let function = lifted.functions.iter().find(|f| f.name == "jumps").unwrap();
        let jumps_found =
            function.instructions().filter(|i| matches!(i.flow, gpuinstr::stages::lift::Flow::Jump { .. })).count();
        // (Both ways of a sign-testing branch jump to its target.)
        assert_eq!(jumps_found, 7, "{target}: every long branch is a jump to a known target");
        assert!(function.relocatable(), "{target}: the function can move");
        for function in &lifted.functions {
            let last = function.instructions().last().unwrap();
            let name = lifted.isa.opcode_name(last.opcode);
            assert_eq!(name, "S_ENDPGM", "{target}: {} ends at its s_endpgm, not in the padding", function.name);
        }
        let labels = app.symbols.iter().filter(|s| s.name == "label_AlphaNonZero").count();
        assert_eq!(labels, 2, "{target}: the test's code object defines the label in each kernel");
        assert_eq!(app.metadata_notes.len(), 3, "{target}: a metadata note per object linked");
        assert_eq!(app.kernels.len(), 3, "{target}: every note's kernels");
        assert_eq!(app.build_id().map(|id| id.len()), Some(20), "{target}: linked with a build id");
        for linker in [Linker::Comgr, Linker::Lld] {
            let (bytes, report) = roundtrip(&app, linker).unwrap_or_else(|e| panic!("{target}: {e}"));
            assert!(report.identical() && report.layout.is_identical(), "{target}:\n{}", report.render_text());
            let rebuilt = CodeObject::parse(bytes, Vec::new()).unwrap();
            assert_eq!(rebuilt.build_id(), app.build_id(), "{target} {linker:?}: the build id kept");
        }
        let (bytes, instrumented) =
            instrument_code_object(&tool, &app, &counter_plan(), &Registry::with_builtins(), &Default::default())
                .unwrap_or_else(|e| panic!("{target}: {e}"));
        assert!(instrumented.left_out.is_empty(), "{target}: {:#?}", instrumented.left_out);
        let output = CodeObject::parse(bytes, Vec::new()).unwrap();
        let verified = gpuinstr::verify::verify(&app, &output).unwrap();
        assert!(verified.ok(), "{target}: {}", verified.render_text());
        for (name, step) in [("first", 3u32), ("second", 5), ("jumps", 0)] {
            for alpha in [0u32, 1] {
                let run = |code_object: &CodeObject, instrumented: bool| {
                    let mut device = Device::new(code_object.clone(), target.into()).unwrap();
                    let counter = instrumented.then(|| device.bind_managed("Counter", 8).unwrap());
                    let out = device.allocate("out", &[0; 256]);
                    let arguments = [out.to_le_bytes().to_vec(), alpha.to_le_bytes().to_vec()];
                    let run = device.launch(name, Launch::linear(1, 64), &arguments).unwrap();
                    let counted = counter.map(|c| device.memory.read_u64(c).unwrap());
                    (device.memory.bytes(out, 256).unwrap(), run, counted)
                };
                let (expected, original, _) = run(&app, false);
                let (computed, _, counted) = run(&output, true);
                let want: Vec<u8> = (0..64u32)
                    .map(|l| match (name, alpha) {
                        ("jumps", _) => 223u32,
                        (_, 0) => 0,
                        _ => l + step,
                    })
                    .flat_map(u32::to_le_bytes)
                    .collect();
                assert_eq!(expected, want, "{target} {name} alpha {alpha}: the original");
                assert_eq!(computed, expected, "{target} {name} alpha {alpha}: the instrumented kernel's results");
                assert_eq!(
                    counted,
                    Some(expected_count(&app, &original)),
                    "{target} {name} alpha {alpha}: the counter"
                );
            }
        }
    }
}

/// Issue 59: code that reaches a preemptible global through the GOT
/// (`s_getpc_b64`, `sym@gotpcrel32@lo+4`, a load of the slot; rocBLAS's
/// `Kernels.so` reads `hip_f8_bias_mode_bit_device` so) is written back
/// through the GOT, which the linker makes again: the round trip is exact
/// and the instrumented kernel reads the global (it was refused: the
/// literal pointed into `.got`, which the emitter does not write, as
/// "Undefined temporary symbol .Lgpuinstr_5e0e0").
#[test]
fn globals_reached_through_the_got_round_trip_and_instrument() {
    let dir = scratch();
    let kernel = AssemblyKernel {
        name: "through_got".into(),
        body: "\t.pushsection .data\n\t.globl gvar\n\t.p2align 2\ngvar:\n\t.long 0x1234\n\t.popsection\n\
               \ts_getpc_b64 s[4:5]\n\ts_add_u32 s4, s4, gvar@gotpcrel32@lo+4\n\
               \ts_addc_u32 s5, s5, gvar@gotpcrel32@hi+12\n\ts_load_dwordx2 s[4:5], s[4:5], 0x0\n\
               \ts_load_dwordx2 s[8:9], s[0:1], 0x0\n\ts_waitcnt lgkmcnt(0)\n\ts_load_dword s6, s[4:5], 0x0\n\
               \ts_waitcnt lgkmcnt(0)\n\tv_mov_b32_e32 v1, s6\n\tv_lshlrev_b32_e32 v2, 2, v0\n\
               \tglobal_store_dword v2, v1, s[8:9]\n\ts_waitcnt vmcnt(0)"
            .into(),
        arguments: vec![("out", 8)],
        group_segment: 0,
        private_segment: 0,
    };
    let tool = counter_tool(dir.path());
    for target in ["gfx90a", "gfx908"] {
        let app = kernels_from_assembly(target, std::slice::from_ref(&kernel));
        assert!(app.has_section(".got"), "{target}: the test's code goes through the GOT");
        for linker in [Linker::Comgr, Linker::Lld] {
            let (_, report) = roundtrip(&app, linker).unwrap_or_else(|e| panic!("{target}: {e}"));
            assert!(report.identical() && report.layout.is_identical(), "{target}:\n{}", report.render_text());
        }
        let (bytes, _) =
            instrument_code_object(&tool, &app, &counter_plan(), &Registry::with_builtins(), &Default::default())
                .unwrap_or_else(|e| panic!("{target}: {e}"));
        let output = CodeObject::parse(bytes, Vec::new()).unwrap();
        let verified = gpuinstr::verify::verify(&app, &output).unwrap();
        assert!(verified.ok(), "{target}: {}", verified.render_text());
        let run = |code_object: &CodeObject, instrumented: bool| {
            let mut device = Device::new(code_object.clone(), target.into()).unwrap();
            let counter = instrumented.then(|| device.bind_managed("Counter", 8).unwrap());
            let out = device.allocate("out", &[0; 256]);
            let run = device.launch("through_got", Launch::linear(1, 64), &[out.to_le_bytes().to_vec()]).unwrap();
            let counted = counter.map(|c| device.memory.read_u64(c).unwrap());
            (device.memory.bytes(out, 256).unwrap(), run, counted)
        };
        let (expected, original, _) = run(&app, false);
        assert_eq!(expected, 0x1234u32.to_le_bytes().repeat(64), "{target}: the original reads the global");
        let (computed, _, counted) = run(&output, true);
        assert_eq!(computed, expected, "{target}: the instrumented kernel reads it too");
        assert_eq!(counted, Some(expected_count(&app, &original)), "{target}: the counter");
    }
}
