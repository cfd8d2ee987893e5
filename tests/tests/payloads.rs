//! The payload compiler (stages 5-8) on our hooks and kernels: every
//! stage's text as a snapshot per hook, the facts each hook must show, a
//! property test over generated live sets checked on the final machine code,
//! and the errors a tool author can run into.

use gpuinstr::preservation::{check, decode_code};
use gpuinstr::stages::lift::{lift, LiftedCodeObject};
use gpuinstr::stages::liveness::{analyze, RegisterUnits, Unit, UnitSet};
use gpuinstr::stages::load::{self, CodeObject};
use gpuinstr::stages::lower_mir::PayloadSite;
use gpuinstr::stages::payload::{HookArgument, HookCall, PayloadPoint};
use gpuinstr::stages::payloads::{
    compile_payloads, compile_payloads_at, payload_sites, CompileError, CompilePass, CompiledPayloads, PayloadOptions,
    PayloadRoom, Sharing, STARVED_PAYLOAD_VGPRS,
};
use gpuinstr::stages::sva::FunctionRegisters;
use gpuinstr_intrinsics::{KernelArgument, Register, Registry};
use gpuinstr_tests::*;

/// A tool built from tests/inputs/tools/<name>.hip with the plugin, once per run.
fn tool(name: &str) -> CodeObject {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static TOOLS: OnceLock<Mutex<HashMap<String, CodeObject>>> = OnceLock::new();
    let mut built = TOOLS.get_or_init(Default::default).lock().unwrap();
    if let Some(tool) = built.get(name) {
        return tool.clone();
    }
    let path = run_directory().join(format!("tool-{name}.hsaco"));
    run_ok(&mut tool_compile_command(Compiler::Clang, &input(&format!("tools/{name}.hip")), "-O3", &path));
    let tool = load::load(&path).unwrap().code_objects.remove(0);
    built.insert(name.to_string(), tool.clone());
    tool
}

fn call(hook: &str, arguments: Vec<HookArgument>) -> HookCall {
    HookCall { hook: hook.into(), arguments }
}

fn atomics_kernel() -> CodeObject {
    load::load_for_target(&test_kernels("memory"), Some("gfx90a")).unwrap().code_objects.remove(0)
}

fn function_index(lifted: &LiftedCodeObject<'_>, part: &str) -> usize {
    lifted.functions.iter().position(|f| f.name.contains(part)).unwrap()
}

/// `vgprs` and every AGPR live: register pressure for the allocator.
fn vgprs_and_all_agprs_live(vgprs: impl IntoIterator<Item = u16>) -> UnitSet {
    let mut live = UnitSet::EMPTY;
    for vgpr in vgprs {
        live.insert(Unit::vgpr(vgpr));
    }
    for agpr in 0..256 {
        live.insert(Unit::agpr(agpr));
    }
    live
}

/// The SVA and work-item ids in VGPRs the atomics kernel never uses.
const SVA: u16 = 60;
const WORK_ITEM_IDS: u16 = 61;

/// Options for compiling payloads at their own sites: these tests show
/// stage 8 around live registers, so templates (compiled where nothing is
/// live, `templates_place_...` below) are off.
fn options_for(function: usize) -> PayloadOptions {
    let mut options = PayloadOptions { verify_each_pass: true, templates: false, ..Default::default() };
    options.registers.insert(
        function,
        FunctionRegisters { sva: Some(SVA), work_item_ids: Some(WORK_ITEM_IDS), ..Default::default() },
    );
    options
}

/// Every payload keeps every live register: proven on its machine code.
fn assert_preserves(lifted: &LiftedCodeObject<'_>, compiled: &CompiledPayloads, sites: &[PayloadSite]) {
    let codes: Vec<Vec<_>> = compiled.payloads.iter().map(|p| p.code.to_vec()).collect();
    let decoded = decode_code(lifted, &codes, None).unwrap();
    let units = RegisterUnits::new(&lifted.isa);
    for ((payload, code), site) in compiled.payloads.iter().zip(&decoded).zip(sites) {
        let must_keep = site.live.difference(&payload.written);
        if let Err(violation) = check(&lifted.isa, &units, code, &must_keep, site.sva) {
            panic!("{}: {violation}\n{}", payload.label, payload.code.join("\n"));
        }
    }
}

const CASES: [&str; 7] = [
    "scalar_counter",
    "vector_counter",
    "register_argument",
    "kernel_arguments",
    "write_exec",
    "stack",
    "register_write",
];

#[test]
fn every_stage_of_small_hooks() {
    let tool = tool("payload-hooks");
    let app = atomics_kernel();
    let lifted = lift(&app).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let function = function_index(&lifted, "atomics");
    let at = |instruction, calls| PayloadPoint { function, instruction, calls };
    let points = vec![
        at(0, vec![call("countScalar", vec![])]),
        at(3, vec![call("countVector", vec![HookArgument::Int(0)])]),
        at(5, vec![call("recordValue", vec![HookArgument::Register(Register::Sgpr(4))])]),
        at(6, vec![call("recordDimensions", vec![])]),
        at(7, vec![call("countWithOneLane", vec![])]),
        at(8, vec![call("histogram", vec![HookArgument::Register(Register::Vgpr(0))])]),
        at(9, vec![call("bumpRegister", vec![])]),
    ];
    let options = options_for(function);
    let sites = gpuinstr::stages::payloads::payload_sites(&lifted, &liveness, &points, &options).unwrap();
    let compiled = compile_payloads(&tool, &lifted, &liveness, &points, &Registry::with_builtins(), &options).unwrap();
    for (index, case) in CASES.iter().enumerate() {
        compiler_snapshot!(format!("payload_{case}"), compiled.render_stages(index));
    }
    assert_preserves(&lifted, &compiled, &sites);

    let [scalar, vector, argument, dimensions, one_lane, stack, write] = &compiled.payloads[..] else { panic!() };
    // Scalar counter: one scalar atomic, no cache maintenance around it.
    assert!(scalar.code.iter().any(|l| l.starts_with("s_atomic_add_x2 ")), "{:?}", scalar.code);
    assert!(!scalar.code.iter().any(|l| l.starts_with("buffer_wbl2") || l.starts_with("buffer_inv")));
    // Vector counter: the popcount of EXEC, an atomic from one lane, EXEC back.
    assert!(vector.code.iter().any(|l| l.starts_with("s_bcnt1_i32_b64")));
    assert!(vector.code.iter().any(|l| l.starts_with("global_atomic_add_x2")));
    // A register argument is read where it lives.
    assert!(argument.code.iter().any(|l| l.ends_with(", s4")), "{:?}", argument.code);
    // gridDim/blockDim: the dispatch packet and the workgroup ids, from the SVA.
    // (From code object v5 HIP reads the shape from the hidden arguments.)
    let shape = if dimensions.kernel_arguments.contains(&KernelArgument::HiddenKernargOffset) {
        KernelArgument::KernargSegmentPtr
    } else {
        KernelArgument::DispatchPtr
    };
    for argument in [shape, KernelArgument::WorkgroupIdX, KernelArgument::WorkgroupIdZ] {
        assert!(dimensions.kernel_arguments.contains(&argument), "{:?}", dimensions.kernel_arguments);
    }
    if shape == KernelArgument::DispatchPtr {
        assert!(dimensions.code.iter().any(|l| l.starts_with("v_readlane_b32") && l.ends_with(&format!("v{SVA}, 23"))));
    }
    // writeExec: EXEC is written with 1 and comes back.
    assert!(one_lane.code.iter().any(|l| l.starts_with("s_mov_b64 exec, s[")));
    assert!(one_lane.copied.contains(Unit::special("EXEC_LO")));
    // Stack: the frame is swapped through the SVA around the payload.
    assert!(stack.scratch_bytes > 0);
    assert_eq!(stack.code.iter().filter(|l| l.starts_with("v_readlane_b32 s32")).count(), 1);
    assert!(stack.code.iter().any(|l| l.contains("buffer_store_dword") && l.contains("s[0:3], s32")));
    // readReg + writeReg of s6: one add, in place.
    assert!(write.copied.contains(Unit::sgpr(6)));
    assert!(write.code.iter().any(|l| &**l == "s_add_i32 s6, s6, 1"), "{:?}", write.code);
}

/// `implicitArgPtr` is the kernarg pointer (SVA lanes 17-18) plus the
/// hidden-argument offset (lane 19), added with a carry.
#[test]
fn implicit_argument_pointer_comes_from_the_sva() {
    let tool = tool("payload-hooks");
    let app = atomics_kernel();
    let lifted = lift(&app).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let function = function_index(&lifted, "atomics");
    let points = vec![PayloadPoint { function, instruction: 4, calls: vec![call("readGlobalOffset", vec![])] }];
    let compiled =
        compile_payloads(&tool, &lifted, &liveness, &points, &Registry::with_builtins(), &options_for(function))
            .unwrap();
    let payload = &compiled.payloads[0];
    assert_eq!(
        payload.kernel_arguments.iter().copied().collect::<Vec<_>>(),
        vec![KernelArgument::KernargSegmentPtr, KernelArgument::HiddenKernargOffset]
    );
    let code = payload.code.join("\n");
    for lane in [17, 18, 19] {
        assert!(code.contains(&format!("v{SVA}, {lane}")), "lane {lane}:\n{code}");
    }
    assert!(code.contains("s_add_u32 ") && code.contains("s_addc_u32 "), "{code}");
    assert!(payload.uses_sva());
}

/// Hooks reading s0-s3 or s32 (the payload's own frame registers) get the
/// application's values from the SVA lanes the payload's entry saves them
/// in, with and without a stack frame of the payload's own.
#[test]
fn frame_registers_are_read_from_their_save_lanes() {
    let tool = tool("payload-hooks");
    let app = atomics_kernel();
    let lifted = lift(&app).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let function = function_index(&lifted, "atomics");
    let points: Vec<PayloadPoint> = [("recordValue", 2u16, 7), ("histogram", 32, 9)]
        .iter()
        .map(|(hook, sgpr, _)| PayloadPoint {
            function,
            instruction: 4,
            calls: vec![call(hook, vec![HookArgument::Register(Register::Sgpr(*sgpr))])],
        })
        .collect();
    let compiled =
        compile_payloads(&tool, &lifted, &liveness, &points, &Registry::with_builtins(), &options_for(function))
            .unwrap();
    for ((hook, sgpr, lane), payload) in [("recordValue", 2u16, 7), ("histogram", 32, 9)].iter().zip(&compiled.payloads)
    {
        assert!(payload.rejected.is_none(), "{hook}: {:?}", payload.rejected);
        let save = format!("v_writelane_b32 v{SVA}, s{sgpr}, {lane}");
        let read = format!("v{SVA}, {lane}");
        let saved_at = payload.code.iter().position(|l| **l == *save).unwrap_or_else(|| panic!("{hook}: no `{save}`"));
        let read_at = payload
            .code
            .iter()
            .position(|l| l.starts_with("v_readlane_b32") && l.ends_with(&read))
            .unwrap_or_else(|| panic!("{hook}: no read of lane {lane}:\n{}", payload.code.join("\n")));
        assert!(saved_at < read_at, "{hook}");
    }
    // `histogram` uses stack: its frame is swapped in after the save.
    assert!(compiled.payloads[1].scratch_bytes > 0);
}

/// The same hooks on gfx908 (no unified register file, no aligned tuples,
/// AGPRs separate): every payload compiles, passes the machine verifier
/// and the machine-code check (both on by default).
#[test]
fn small_hooks_on_gfx908() {
    let tool = tool("payload-hooks");
    let app = load::load_for_target(&test_kernels("memory"), Some("gfx908")).unwrap().code_objects.remove(0);
    let lifted = lift(&app).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let function = function_index(&lifted, "atomics");
    let at = |instruction, calls| PayloadPoint { function, instruction, calls };
    let points = vec![
        at(0, vec![call("countScalar", vec![])]),
        at(3, vec![call("countVector", vec![HookArgument::Int(0)])]),
        at(5, vec![call("recordValue", vec![HookArgument::Register(Register::Sgpr(4))])]),
        at(6, vec![call("recordDimensions", vec![])]),
        at(7, vec![call("countWithOneLane", vec![])]),
        at(8, vec![call("histogram", vec![HookArgument::Register(Register::Vgpr(0))])]),
        at(9, vec![call("bumpRegister", vec![])]),
    ];
    let compiled =
        compile_payloads(&tool, &lifted, &liveness, &points, &Registry::with_builtins(), &options_for(function))
            .unwrap();
    let mut listing = String::new();
    for payload in &compiled.payloads {
        listing.push_str(&format!("{}\n", payload.label));
        for line in payload.code.iter() {
            listing.push_str(&format!("{}{line}\n", if line.ends_with(':') { "" } else { "  " }));
        }
        listing.push_str(&format!("  ; writes {}\n\n", payload.writes));
    }
    compiler_snapshot!("payloads_gfx908", listing);
    assert!(compiled.payloads[5].scratch_bytes > 0);
    // The application has its own `Histogram`: the tool's is renamed.
    let histogram = compiled.globals.iter().find(|g| g.tool_name == "Histogram").unwrap();
    assert_eq!(histogram.name, "gpuinstr.tool.Histogram");
    assert!(app.symbols.iter().any(|s| s.name == "Histogram"), "the application defines Histogram");
}

/// Register pressure: every VGPR but six is live (and the AGPRs too), so
/// the `pressure` hook, which needs more, must spill; the spills go to
/// the instrumentation stack through the SVA and every live register survives.
#[test]
fn a_hook_that_must_spill() {
    let tool = tool("payload-hooks");
    let app = atomics_kernel();
    let lifted = lift(&app).unwrap();
    let function = function_index(&lifted, "atomics");
    let mut live = vgprs_and_all_agprs_live(0..248);
    for sgpr in 4..10 {
        live.insert(Unit::sgpr(sgpr));
    }
    let sites = vec![PayloadSite {
        live,
        sva: Some(248),
        work_item_ids: Some(249),
        hidden_arguments: Some(Default::default()),
        // One wave per SIMD may use every register.
        max_flat_workgroup_size: 256,
        ..PayloadSite::default()
    }];
    let points = vec![PayloadPoint {
        function,
        instruction: 6,
        calls: vec![call("pressure", vec![HookArgument::Register(Register::Vgpr(7))])],
    }];
    let mut options = PayloadOptions { verify_each_pass: true, ..Default::default() };
    options
        .registers
        .insert(function, FunctionRegisters { sva: Some(248), work_item_ids: Some(249), ..Default::default() });
    let compiled = compile_payloads_at(&tool, &lifted, &points, &sites, &Registry::with_builtins(), &options).unwrap();
    compiler_snapshot!("payload_spill", compiled.render_stages(0));
    let payload = &compiled.payloads[0];
    assert!(payload.scratch_bytes > 0, "no spill:\n{}", payload.code.join("\n"));
    assert!(payload.code.iter().any(|l| l.starts_with("buffer_store_dword v") && l.contains("s[0:3], s32")));
    assert!(payload.code.iter().any(|l| l.starts_with("buffer_load_dword v") && l.contains("s[0:3], s32")));
    assert_preserves(&lifted, &compiled, &sites);
}

/// A small deterministic generator (xorshift64*), so failures replay.
struct Generator(u64);

impl Generator {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Property: whatever is live at a point, the final payload never leaves a
/// live register changed. Live sets are generated from sparse to nearly full
/// (so the allocator must move and spill application registers), with the
/// special registers live or not; every payload is checked on its machine code.
#[test]
fn payloads_never_clobber_generated_live_sets() {
    let tool = tool("payload-hooks");
    let app = atomics_kernel();
    let lifted = lift(&app).unwrap();
    let function = function_index(&lifted, "atomics");
    let hooks: [(&str, Vec<HookArgument>); 6] = [
        ("countScalar", vec![]),
        ("countVector", vec![HookArgument::Int(1)]),
        ("recordValue", vec![HookArgument::Register(Register::Sgpr(40))]),
        ("countWithOneLane", vec![]),
        ("bumpRegister", vec![]),
        ("histogram", vec![HookArgument::Register(Register::Vgpr(3))]),
    ];
    let mut generator = Generator(0x5eed_1234_abcd_0001);
    let mut points = Vec::new();
    let mut sites = Vec::new();
    for case in 0..48 {
        let density = [20, 60, 90, 97][case % 4];
        let mut live = UnitSet::EMPTY;
        for sgpr in 0..102 {
            if generator.chance(density) {
                live.insert(Unit::sgpr(sgpr));
            }
        }
        for vgpr in 0..48 {
            if generator.chance(density) {
                live.insert(Unit::vgpr(vgpr));
            }
        }
        for special in ["VCC_LO", "VCC_HI", "SCC", "M0", "EXEC_LO", "EXEC_HI"] {
            if special.starts_with("EXEC") || generator.chance(50) {
                live.insert(Unit::special(special));
            }
        }
        let (hook, arguments) = &hooks[case % hooks.len()];
        points.push(PayloadPoint { function, instruction: 0, calls: vec![call(hook, arguments.clone())] });
        sites.push(PayloadSite {
            live,
            sva: Some(SVA),
            work_item_ids: Some(WORK_ITEM_IDS),
            hidden_arguments: Some(Default::default()),
            max_flat_workgroup_size: 256,
            ..PayloadSite::default()
        });
    }
    let options = options_for(function);
    let compiled = compile_payloads_at(&tool, &lifted, &points, &sites, &Registry::with_builtins(), &options).unwrap();
    assert_preserves(&lifted, &compiled, &sites);

    // Not vacuous: in dense cases payloads do write live registers (and put
    // them back), which is what the check is for.
    let codes: Vec<Vec<_>> = compiled.payloads.iter().map(|p| p.code.to_vec()).collect();
    let decoded = decode_code(&lifted, &codes, None).unwrap();
    let units = RegisterUnits::new(&lifted.isa);
    let restored = decoded
        .iter()
        .zip(&sites)
        .filter(|(code, site)| {
            code.iter().any(|i| i.all_defs().any(|r| units.units(r).iter().any(|u| site.live.contains(*u))))
        })
        .count();
    assert!(restored >= 10, "only {restored} payloads write a live register");
}

/// The checker itself catches clobbers: a payload that overwrites a live
/// register (or only its inactive lanes) is refused.
#[test]
fn the_preservation_check_catches_clobbers() {
    let app = atomics_kernel();
    let lifted = lift(&app).unwrap();
    let units = RegisterUnits::new(&lifted.isa);
    let live: UnitSet =
        [Unit::sgpr(4), Unit::vgpr(2), Unit::special("SCC"), Unit::special("EXEC_LO"), Unit::special("EXEC_HI")]
            .into_iter()
            .collect();
    let cases: [(&[&str], Option<&str>); 7] = [
        (&["s_mov_b32 s10, s4", "s_mov_b32 s4, 7", "s_mov_b32 s4, s10"], None),
        (&["s_mov_b32 s4, 7"], Some("s4")),
        (&["s_cselect_b32 s9, 1, 0", "s_add_u32 s8, s8, 1", "s_cmp_lg_u32 s9, 0"], None),
        (&["s_add_u32 s8, s8, 1"], Some("scc")),
        (&["v_mov_b32_e32 v9, v2", "v_mov_b32_e32 v2, 0", "v_mov_b32_e32 v2, v9"], None),
        // Under EXEC = 1 the copy back misses the lanes that were active.
        (
            &["s_mov_b64 s[12:13], exec", "s_mov_b64 exec, 1", "v_mov_b32_e32 v2, 0", "s_mov_b64 exec, s[12:13]"],
            Some("v2"),
        ),
        (&["v_writelane_b32 v60, s4, 7", "s_mov_b32 s4, 1", "v_readlane_b32 s4, v60, 7"], None),
    ];
    let codes: Vec<Vec<String>> = cases.iter().map(|(c, _)| c.iter().map(|l| l.to_string()).collect()).collect();
    let decoded = decode_code(&lifted, &codes, None).unwrap();
    for ((lines, expected), code) in cases.iter().zip(&decoded) {
        let result = check(&lifted.isa, &units, code, &live, Some(SVA));
        match expected {
            None => assert!(result.is_ok(), "{lines:?}: {}", result.unwrap_err()),
            Some(register) => {
                let violation = result.expect_err(&format!("{lines:?} must be refused"));
                assert_eq!(violation.unit.to_string(), *register, "{lines:?}: {violation}");
            }
        }
    }
    // The SVA may change only in the frame save lanes.
    let sva_write = decode_code(&lifted, &[vec!["v_writelane_b32 v60, s4, 20".to_string()]], None).unwrap();
    assert!(check(&lifted.isa, &units, &sva_write[0], &live, Some(SVA)).is_err());
}

fn compile_error(tool_name: &str, hook: &str, arguments: Vec<HookArgument>) -> String {
    let tool = tool(tool_name);
    let app = atomics_kernel();
    let lifted = lift(&app).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let function = function_index(&lifted, "atomics");
    let points = vec![PayloadPoint { function, instruction: 2, calls: vec![call(hook, arguments)] }];
    match compile_payloads(&tool, &lifted, &liveness, &points, &Registry::with_builtins(), &options_for(function)) {
        Ok(_) => panic!("{hook} compiled"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn tool_and_plan_errors_are_clear() {
    let app = atomics_kernel();
    let lifted = lift(&app).unwrap();
    let third = lifted.functions[function_index(&lifted, "atomics")].instructions().nth(2).unwrap().name(&lifted.isa);
    let point = format!("kernel _Z7atomicsPKjiPj, instruction 2 ({third})");
    let cases: Vec<(&str, Vec<HookArgument>, String)> = vec![
        ("notAHook", vec![], format!("{point}: the tool has no hook `notAHook` (its hooks: ")),
        ("countVector", vec![], format!("{point}: hook `countVector` takes 1 argument(s), the plan gives 0")),
        (
            "countVector",
            vec![HookArgument::Int(2)],
            format!("{point}: hook `countVector` argument 0 is i1; constant 2 does not fit"),
        ),
        (
            "countVector",
            vec![HookArgument::Register(Register::Sgpr(4))],
            format!("{point}: hook `countVector` argument 0 is i1; register s4 does not fit"),
        ),
    ];
    for (hook, arguments, expected) in cases {
        let message = compile_error("payload-hooks", hook, arguments);
        assert!(message.starts_with(&expected), "{message}\nexpected: {expected}");
    }
    let bad: [(&str, &str); 4] = [
        ("floatAtomic", "gpuinstr::sAtomicAdd: adds 32- or 64-bit integers, not f32"),
        ("runtimeRegister", "gpuinstr::readReg: argument 0 must be a compile-time constant"),
        ("registerOutOfRange", "s120 does not exist on gfx90a (it has 102)"),
        (
            "unknownIntrinsic",
            "hook `unknownIntrinsic` calls intrinsic `mytool::notRegistered`, which has no lowering: register it",
        ),
    ];
    for (hook, expected) in bad {
        let message = compile_error("bad-hooks", hook, vec![]);
        assert!(message.contains(expected), "{hook}: {message}\nexpected: {expected}");
    }
}

/// Bitcode that did not come through our plugin may still hold inline
/// assembly; the driver refuses it too, naming hook and function.
#[test]
fn inline_assembly_in_foreign_bitcode_is_refused() {
    let dir = scratch();
    let ir = dir.path().join("asm.ll");
    std::fs::write(
        &ir,
        "target triple = \"amdgcn-amd-amdhsa\"\n\
         define internal void @helper() {\n  call void asm sideeffect \"s_nop 0\", \"\"()\n  ret void\n}\n\
         define void @usesAsm() #0 {\n  call void @helper()\n  ret void\n}\n\
         attributes #0 = { \"gpuinstr_hook\" }\n",
    )
    .unwrap();
    let bitcode = dir.path().join("asm.bc");
    run_ok(gpuinstr::toolchain::llvm_tool("llvm-as").arg(&ir).arg("-o").arg(&bitcode));
    // Any device code object with that bitcode in .llvmbc is a "tool".
    let object = dir.path().join("tool.hsaco");
    let app = load::load_for_target(&test_kernels("memory"), Some("gfx90a")).unwrap().code_objects.remove(0);
    std::fs::write(dir.path().join("plain.hsaco"), &app.bytes).unwrap();
    run_ok(
        gpuinstr::toolchain::llvm_tool("llvm-objcopy")
            .arg(format!("--add-section=.llvmbc={}", bitcode.display()))
            .arg(dir.path().join("plain.hsaco"))
            .arg(&object),
    );
    let tool = load::load(&object).unwrap().code_objects.remove(0);
    let lifted = lift(&app).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let function = function_index(&lifted, "atomics");
    let points = vec![PayloadPoint { function, instruction: 0, calls: vec![call("usesAsm", vec![])] }];
    let error =
        compile_payloads(&tool, &lifted, &liveness, &points, &Registry::with_builtins(), &options_for(function))
            .err()
            .expect("inline assembly is refused");
    assert!(matches!(error, CompileError::Payload(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "hook `usesAsm` uses inline assembly (in `helper`); gpuinstr cannot allocate registers around it: use a \
         framework intrinsic instead (docs/intrinsics.md)"
    );
}

/// Alike points share one compiled payload; a group whose union of live
/// registers leaves LLVM nothing to work with is compiled again point by
/// point, and every point's code keeps its own live registers.
#[test]
fn alike_points_share_a_payload_and_a_union_too_dense_is_retried_point_by_point() {
    let tool = tool("payload-hooks");
    let app = atomics_kernel();
    let lifted = lift(&app).unwrap();
    let function = function_index(&lifted, "atomics");
    let site = |vgprs: &mut dyn Iterator<Item = u16>| {
        let mut live = vgprs_and_all_agprs_live(vgprs);
        for special in ["EXEC_LO", "EXEC_HI"] {
            live.insert(Unit::special(special));
        }
        PayloadSite {
            live,
            sva: Some(SVA),
            work_item_ids: Some(WORK_ITEM_IDS),
            hidden_arguments: Some(Default::default()),
            max_flat_workgroup_size: 256,
            ..PayloadSite::default()
        }
    };
    let not_home = |v: &u16| *v != SVA && *v != WORK_ITEM_IDS;
    let sites = vec![
        // Alike: one payload for both.
        site(&mut (0..40u16)),
        site(&mut (0..42u16)),
        // Each leaves 4 VGPRs free, their union none.
        site(&mut (0..256u16).filter(|v| !(100..104).contains(v)).filter(not_home)),
        site(&mut (0..256u16).filter(|v| !(104..108).contains(v)).filter(not_home)),
    ];
    let points: Vec<PayloadPoint> = (0..sites.len())
        .map(|instruction| PayloadPoint {
            function,
            instruction,
            calls: vec![call("histogram", vec![HookArgument::Register(Register::Vgpr(3))])],
        })
        .collect();
    let options = options_for(function);
    let compiled = compile_payloads_at(&tool, &lifted, &points, &sites, &Registry::with_builtins(), &options).unwrap();
    for payload in &compiled.payloads {
        assert_eq!(payload.rejected, None, "{}", payload.label);
    }
    assert_eq!(compiled.compiled_as[0], compiled.compiled_as[1]);
    assert_eq!(compiled.compilation_of(0).sharing, Sharing::Alike);
    // Retried with narrower sharing: their live VGPRs differ, so alone.
    assert_eq!(compiled.compiled_as[2].compilation, compiled.compiled_as[3].compilation);
    assert_eq!(compiled.compilation_of(2).sharing, Sharing::OneByOne);
    assert_ne!(compiled.compiled_as[2], compiled.compiled_as[3]);
    assert_eq!(compiled.distinct_payloads(), 3);
    // Each retried payload allocates in its own free VGPRs.
    let writes_vgprs_in = |index: usize, free: std::ops::Range<u16>| {
        compiled.payloads[index]
            .writes
            .iter()
            .filter(|u| u.file() == gpuinstr::stages::liveness::RegisterFile::Vgpr)
            .all(|u| free.contains(&u.index()))
    };
    assert!(writes_vgprs_in(2, 100..104), "{}", compiled.payloads[2].code.join("\n"));
    assert!(writes_vgprs_in(3, 104..108), "{}", compiled.payloads[3].code.join("\n"));
    assert_preserves(&lifted, &compiled, &sites);
    // Labels are each point's own, so the spliced code assembles.
    for (index, payload) in compiled.payloads.iter().enumerate() {
        for line in payload.code.iter().filter(|l| l.contains(".Lgpuinstr_payload")) {
            assert!(line.contains(&format!(".Lgpuinstr_payload{index}_")), "{index}: {line}");
        }
    }
    assert!(compiled.render_stages(3).contains("== final code"));
}

/// Dead VGPRs enough in number but all odd leave no aligned pair for the
/// hook's 64-bit atomic: LLVM finds no registers, so the point is compiled
/// again with live VGPRs parked in dead AGPRs until 24 VGPRs in aligned
/// pairs are free, and its code keeps every live register.
#[test]
fn a_payload_starved_of_aligned_pairs_is_compiled_again_with_parked_vgprs() {
    let tool = tool("payload-hooks");
    let app = atomics_kernel();
    let lifted = lift(&app).unwrap();
    let function = function_index(&lifted, "atomics");
    let mut liveness = analyze(&lifted).unwrap();
    // Every VGPR live but the odd ones from v101 to v127 (the 128 a wave of
    // this kernel may have: 14 dead, no dead pair); no AGPR live.
    let mut live = UnitSet::EMPTY;
    let dead = |v: u16| (101..128).contains(&v) && v % 2 == 1;
    for vgpr in (0..256u16).filter(|v| !dead(*v) && *v != SVA && *v != WORK_ITEM_IDS) {
        live.insert(Unit::vgpr(vgpr));
    }
    for special in ["EXEC_LO", "EXEC_HI"] {
        live.insert(Unit::special(special));
    }
    let instruction = 4;
    liveness.functions[function].live_in[instruction] = live;
    let mut options = options_for(function);
    options.registers.insert(
        function,
        FunctionRegisters {
            sva: Some(SVA),
            work_item_ids: Some(WORK_ITEM_IDS),
            vgpr_limit: 256,
            agpr_limit: 256,
            ..Default::default()
        },
    );
    let points = vec![PayloadPoint {
        function,
        instruction,
        // A 64-bit atomic: its data is a VGPR pair, aligned on gfx90a.
        calls: vec![call("countVector", vec![HookArgument::Int(0)])],
    }];
    let first_try = payload_sites(&lifted, &liveness, &points, &options).unwrap();
    assert!(first_try[0].parking.is_none(), "14 dead VGPRs are enough in number");
    let compiled = compile_payloads(&tool, &lifted, &liveness, &points, &Registry::with_builtins(), &options).unwrap();
    let payload = &compiled.payloads[0];
    assert_eq!(payload.rejected, None, "{}", payload.label);
    assert_eq!(compiled.compilation_of(0).pass, CompilePass::MoreRegisters, "{}", payload.code.join("\n"));
    let code = payload.code.join("\n");
    assert!(code.contains("v_accvgpr_write_b32"), "live VGPRs parked:\n{code}");
    assert!(compiled.render_stages(0).contains("== final code"));
    // The second try's sites, as compile_payloads made them: preserved there.
    let roomier = PayloadOptions { payload_room: PayloadRoom::AlignedPairs(STARVED_PAYLOAD_VGPRS), ..options };
    let sites = payload_sites(&lifted, &liveness, &points, &roomier).unwrap();
    assert!(sites[0].parking.as_ref().is_some_and(|p| !p.borrowed.is_empty()));
    let mut original = sites[0].clone();
    original.live = live;
    assert_preserves(&lifted, &compiled, &[original]);
}

/// A payload LLVM must spill needs the SVA's stack: where the function has
/// no SVA register, that point is left alone with the reason and the
/// others compile.
#[test]
fn a_spilling_payload_without_an_sva_rejects_only_its_point() {
    let tool = tool("payload-hooks");
    let app = atomics_kernel();
    let lifted = lift(&app).unwrap();
    let function = function_index(&lifted, "atomics");
    let dense = vgprs_and_all_agprs_live(0..250);
    let unplaced = Some("no VGPR or AGPR is free for the whole kernel".to_string());
    let site = |live| PayloadSite {
        live,
        hidden_arguments: Some(Default::default()),
        max_flat_workgroup_size: 256,
        // The hook reads threadIdx; only the SVA has no register.
        work_item_ids: Some(250),
        unplaced: unplaced.clone(),
        ..PayloadSite::default()
    };
    let sites = vec![site(dense), site(UnitSet::EMPTY)];
    let points: Vec<PayloadPoint> = (0..2)
        .map(|instruction| PayloadPoint {
            function,
            instruction,
            calls: vec![call("pressure", vec![HookArgument::Register(Register::Vgpr(7))])],
        })
        .collect();
    let options = PayloadOptions { verify_each_pass: true, ..Default::default() };
    let compiled = compile_payloads_at(&tool, &lifted, &points, &sites, &Registry::with_builtins(), &options).unwrap();
    let why = &compiled.payloads[0].rejected.as_ref().expect("the dense point is rejected").message;
    assert!(why.contains("spills") && why.contains("no VGPR or AGPR is free"), "{why}");
    assert!(compiled.payloads[0].code.is_empty());
    assert_eq!(compiled.payloads[1].rejected, None);
    assert_eq!(compiled.payloads[1].scratch_bytes, 0);
}

/// Compile once, place everywhere: the counters' hooks (constants only) at
/// every instruction of a kernel get one template per hook shape, renamed
/// per point onto its dead registers; each copy keeps every live register
/// (checked here again on its own machine code) and is the template's
/// code with other register names.
#[test]
fn templates_place_constant_hooks_at_every_point() {
    let tool = tool("payload-hooks");
    let app = atomics_kernel();
    let lifted = lift(&app).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let function = function_index(&lifted, "atomics");
    let count = lifted.functions[function].instructions().count();
    let points: Vec<PayloadPoint> = (0..count)
        .map(|instruction| PayloadPoint {
            function,
            instruction,
            calls: vec![if instruction % 2 == 0 {
                call("countScalar", vec![])
            } else {
                call("countVector", vec![HookArgument::Int(0)])
            }],
        })
        .collect();
    let options = PayloadOptions { templates: true, ..options_for(function) };
    let sites = payload_sites(&lifted, &liveness, &points, &options).unwrap();
    let compiled = compile_payloads(&tool, &lifted, &liveness, &points, &Registry::with_builtins(), &options).unwrap();
    assert_preserves(&lifted, &compiled, &sites);
    let templated: Vec<usize> =
        (0..count).filter(|i| compiled.compilation_of(*i).sharing == Sharing::Template).collect();
    let templates = &compiled.compilations[0];
    assert_eq!(templates.sharing, Sharing::Template);
    // Two hooks, a few live-special-register sets: far fewer payloads than points.
    assert!(templates.payloads <= 8 && templates.payloads * 3 <= count, "{} for {count} points", templates.payloads);
    assert!(templated.len() * 10 >= count * 9, "{} of {count} points placed by templates", templated.len());
    // Copies of one template differ only in register names.
    let shape = |index: usize| -> Vec<String> {
        compiled.payloads[index]
            .code
            .iter()
            .map(|line| line.split_whitespace().next().unwrap_or("").to_string())
            .collect()
    };
    for pair in templated.windows(2) {
        let [a, b] = [pair[0], pair[1]];
        if compiled.compiled_as[a] == compiled.compiled_as[b] {
            assert_eq!(shape(a), shape(b), "points {a} and {b}");
        }
    }
    // Each copy writes no register live at its point but the specials it
    // saves and restores (the check proves they come back).
    for index in &templated {
        let payload = &compiled.payloads[*index];
        assert!(payload.rejected.is_none(), "{}", payload.label);
        let clobbered = payload.writes.intersection(&sites[*index].live);
        assert!(
            clobbered.iter().all(|u| u.file() == gpuinstr::stages::liveness::RegisterFile::Special),
            "point {index} writes live {clobbered}"
        );
    }
}

/// LLVM's allocator may give a pinned VGPR to a value living only between
/// the pins' uses at a block's end and its terminators (on rocSPARSE's
/// segmented COO kernels, a reload it found dead after SI_IF's lowering:
/// `buffer_load_dword v0, ...` with v0 live in the kernel). The machine-code
/// check refuses that code; the points are compiled again with the pins kept
/// through the terminators, and every point is placed with default flags.
/// (The reload depends on how alike points were grouped: this selection,
/// 1,056 branch-divergence points of Debian 12's rocSPARSE code object 99,
/// met it 20 times when it was found, with branch divergence's hook as it
/// was before rings: tests/inputs/tools/buffered-branch-divergence.hip.)
#[test]
fn payloads_the_check_refuses_are_compiled_again_with_the_pins_through_the_terminators() {
    use gpuinstr::instrument::instrument_code_object;
    use gpuinstr::plan::Plan;
    let library = debian_package_file("librocsparse0", "/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1");
    let kernels = "_ZL34coommnn_segmented_remainder_kernelILj256ELj8ELj4ELb";
    let app = load::load_for_target(&library, Some("gfx90a:xnack-"))
        .unwrap()
        .code_objects
        .into_iter()
        .find(|o| o.kernels.iter().any(|k| k.name().starts_with(kernels)))
        .expect("rocSPARSE has the segmented COO kernels");
    let dir = scratch();
    let path = dir.path().join("branch-divergence.hsaco");
    // Branch divergence as it was before rings: these payloads met the reload.
    let source = repo().join("tests/inputs/tools/buffered-branch-divergence.hip");
    // For the library's code object version (v4): a newer clang's default
    // lays out the hidden arguments its hook reads otherwise.
    let mut command = tool_compile_command(Compiler::Clang, &source, "-O3", &path);
    run_ok(command.arg(format!("-mcode-object-version={}", app.code_object_version)));
    let tool = load::load(&path).unwrap().code_objects.remove(0);
    let plan_text = std::fs::read_to_string(repo().join("hook-sdk/examples/branch-divergence/plan.toml")).unwrap();
    let plan_text = plan_text.replace("[[insert]]", &format!("[[insert]]\nkernels = \"{kernels}*\""));
    let plan = Plan::parse(&plan_text, "branch divergence on the segmented COO kernels").unwrap();

    let (bytes, report) =
        instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &Default::default()).unwrap();
    assert!(report.left_out.is_empty(), "{:#?}", report.left_out);
    assert_eq!(report.points, 1056);
    let again: usize = report
        .compilations
        .iter()
        .filter(|c| c.pass == CompilePass::PinnedThroughTerminators)
        .map(|c| c.payloads - c.refused)
        .sum();
    // The reload is LLVM 15's allocator's: other majors allocate these
    // payloads otherwise, and there the test holds them to the rest.
    if gpuinstr::toolchain::LLVM_MAJOR == 15 {
        assert!(again > 0, "no payload needed the pins through the terminators: find another selection that does");
    }
    let output = CodeObject::parse(bytes, Vec::new()).unwrap();
    let verified = gpuinstr::verify::verify(&app, &output).unwrap();
    assert!(verified.ok(), "{}", verified.render_text());
}

/// Tensile's GEMMs keep MFMA accumulators in every AGPR they allocate and
/// most VGPRs live through their loops. There the memory-efficiency hook's
/// template (about 240 instructions) finds too few dead VGPRs, so its tight
/// templates are compiled with fewer VGPRs, and LLVM then reaches for AGPRs
/// on gfx90a. None is free at these points: a tight template holding AGPRs
/// renames nowhere, and its points fell to one compilation per stretch of
/// alike points (a 0.4 MB rocBLAS code object: 341 payloads, 214 s, where
/// templates take 6 s). A tight template short of AGPRs at its points is
/// compiled with none, and every point is placed by a template, parking
/// live VGPRs.
#[test]
fn templates_short_of_vgprs_take_no_agprs_where_none_is_free() {
    use gpuinstr::instrument::instrument_code_object;
    use gpuinstr::plan::Plan;
    let app = load::load_for_target(&test_kernels("accumulators_live"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let dir = scratch();
    let path = dir.path().join("memory-efficiency.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &example("memory-efficiency"), "-O3", &path));
    let tool = load::load(&path).unwrap().code_objects.remove(0);
    let plan_path = repo().join("hook-sdk/examples/memory-efficiency/plan.toml");
    let plan = Plan::parse(&std::fs::read_to_string(&plan_path).unwrap(), "memory-efficiency").unwrap();

    let (_, report) =
        instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &Default::default()).unwrap();
    assert!(report.left_out.is_empty(), "{:#?}", report.left_out);
    // A global load and store, an LDS write and read.
    assert_eq!(report.points, 4);
    let other: Vec<_> = report.compilations.iter().filter(|c| c.sharing != Sharing::Template).collect();
    assert!(other.is_empty(), "points compiled past the templates: {other:#?}");
    // Too few VGPRs are dead at them: the copies park live ones.
    assert!(report.spills.points > 0, "{:#?}", report.spills);
}
