//! Plans: instruction classes against LLVM's descriptions of real
//! instructions, and what each kind of `where` selects in our kernels.

use gpuinstr::plan::{instrumentation_loop, InstructionClass, Plan, CLASSES};
use gpuinstr::stages::lift::lift;
use gpuinstr::stages::lift::Flow;
use gpuinstr::stages::load;
use gpuinstr::stages::payload::{HookArgument, HookCall};
use gpuinstr_tests::*;

/// Each class holds the opcodes it must, and not the ones it must not.
#[test]
fn classes_follow_llvms_instruction_descriptions() {
    let cases: [(&str, &[&str], &[&str]); 15] = [
        (
            "scalar",
            &["S_ADD_U32", "S_LOAD_DWORDX2_IMM", "S_WAITCNT", "S_ENDPGM"],
            &["V_ADD_U32_e32", "GLOBAL_LOAD_DWORD"],
        ),
        ("lane-access", &["V_READFIRSTLANE_B32", "V_READLANE_B32", "V_WRITELANE_B32"], &["V_MOV_B32_e32"]),
        ("vector", &["V_ADD_U32_e32", "GLOBAL_LOAD_DWORD", "DS_WRITE_B32_gfx9"], &["S_ADD_U32", "V_READFIRSTLANE_B32"]),
        ("valu", &["V_ADD_U32_e32", "V_CMP_EQ_U32_e32"], &["DS_WRITE_B32_gfx9", "S_ADD_U32"]),
        ("memory", &["GLOBAL_LOAD_DWORD", "S_LOAD_DWORDX2_IMM", "DS_WRITE_B32_gfx9"], &["V_ADD_U32_e32"]),
        ("load", &["GLOBAL_LOAD_DWORD", "S_LOAD_DWORDX2_IMM"], &["GLOBAL_STORE_DWORD"]),
        ("store", &["GLOBAL_STORE_DWORD", "DS_WRITE_B32_gfx9"], &["GLOBAL_LOAD_DWORD"]),
        // LLVM 15 marks DS stores IsAtomicNoRet too: a store is still not an atomic.
        ("atomic", &["GLOBAL_ATOMIC_ADD", "DS_ADD_U32_gfx9"], &["GLOBAL_LOAD_DWORD", "DS_WRITE_B32_gfx9"]),
        ("smem", &["S_LOAD_DWORDX2_IMM"], &["GLOBAL_LOAD_DWORD", "S_ADD_U32"]),
        ("vmem", &["GLOBAL_LOAD_DWORD", "GLOBAL_STORE_DWORD"], &["S_LOAD_DWORDX2_IMM", "DS_WRITE_B32_gfx9"]),
        ("global", &["GLOBAL_LOAD_DWORD"], &["DS_WRITE_B32_gfx9"]),
        ("lds", &["DS_WRITE_B32_gfx9", "DS_READ_B32_gfx9"], &["GLOBAL_LOAD_DWORD"]),
        ("branch", &["S_CBRANCH_EXECZ", "S_BRANCH"], &["S_ENDPGM", "S_ADD_U32"]),
        ("barrier", &["S_BARRIER"], &["S_WAITCNT"]),
        ("waitcnt", &["S_WAITCNT"], &["S_BARRIER"]),
    ];
    let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
    let mut code_objects: Vec<_> = [("memory", "gfx90a"), ("control_flow", "gfx90a"), ("matrix_cores", "gfx908")]
        .iter()
        .map(|(kernels, target)| {
            load::load_for_target(&test_kernels(kernels), Some(target)).unwrap().code_objects.remove(0)
        })
        .collect();
    // Lane accesses, which hipcc did not need in our kernels.
    code_objects.push(kernel_from_assembly(
        "gfx90a",
        "\tv_readfirstlane_b32 s4, v0\n\tv_readlane_b32 s5, v1, 3\n\tv_writelane_b32 v2, s4, 7\n\ts_endpgm",
        "",
    ));
    for code_object in &code_objects {
        let lifted = lift(code_object).unwrap();
        instrumentation_loop(&lifted, |site| {
            for (class_name, members, outsiders) in &cases {
                let class = InstructionClass::from_name(class_name).unwrap();
                if members.contains(&site.opcode_name) {
                    assert!(site.is(class), "{} must be {class_name}", site.opcode_name);
                    *seen.entry(format!("{class_name}:{}", site.opcode_name)).or_default() += 1;
                }
                if outsiders.contains(&site.opcode_name) {
                    assert!(!site.is(class), "{} must not be {class_name}", site.opcode_name);
                }
            }
            if site.opcode_name.starts_with("V_MFMA") {
                assert!(site.is(InstructionClass::Mfma), "{}", site.opcode_name);
                *seen.entry("mfma".into()).or_default() += 1;
            }
            // Every instruction is exactly one of scalar, lane-access, vector.
            let kinds = [InstructionClass::Scalar, InstructionClass::LaneAccess, InstructionClass::Vector]
                .iter()
                .filter(|c| site.is(**c))
                .count();
            assert_eq!(kinds, 1, "{}", site.opcode_name);
            vec![]
        });
    }
    // The kernels really contain what the cases talk about.
    for (class_name, members, _) in &cases {
        assert!(
            members.iter().any(|m| seen.contains_key(&format!("{class_name}:{m}"))),
            "no instruction of class {class_name} in the test kernels: {seen:?}"
        );
    }
    assert!(seen.contains_key("mfma"));
    assert_eq!(CLASSES.len(), 18);
}

#[test]
fn each_kind_of_where_selects_its_instructions() {
    let code_object =
        load::load_for_target(&test_kernels("control_flow"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let lifted = lift(&code_object).unwrap();
    let kernels: Vec<_> = lifted.functions.iter().filter(|f| f.is_kernel()).collect();
    let count = |plan: &str| Plan::parse(plan, "p.toml").unwrap().select(&lifted).len();
    let plan = |at: &str| format!("[[insert]]\nhook = \"h\"\nwhere = \"{at}\"\n");

    let instructions: usize = kernels.iter().map(|f| f.instructions().filter(|i| i.decoded).count()).sum();
    assert_eq!(count(&plan("each-instruction")), instructions);
    assert_eq!(count(&plan("kernel-entry")), kernels.len());
    assert_eq!(count(&plan("each-block")), kernels.iter().map(|f| f.blocks.len()).sum::<usize>());
    let exits: usize = kernels.iter().map(|f| f.instructions().filter(|i| i.flow == Flow::EndProgram).count()).sum();
    assert!(exits >= kernels.len());
    assert_eq!(count(&plan("before-exit")), exits);
    let branches: usize =
        kernels.iter().map(|f| f.instructions().filter(|i| i.name(&lifted.isa).starts_with("S_CBRANCH")).count()).sum();
    assert!(branches > 0);
    assert_eq!(count(&plan("opcode:S_CBRANCH_.*")), branches);
    // class:scalar + class:lane-access + class:vector cover each instruction once.
    let partition: usize = ["class:scalar", "class:lane-access", "class:vector"].iter().map(|c| count(&plan(c))).sum();
    assert_eq!(partition, instructions);
    // Kernel globs, and device functions only when asked.
    let first = &kernels[0].name;
    assert_eq!(count(&format!("[[insert]]\nhook = \"h\"\nwhere = \"kernel-entry\"\nkernels = \"{first}\"\n")), 1);
    assert_eq!(count("[[insert]]\nhook = \"h\"\nwhere = \"kernel-entry\"\nkernels = \"nothing*\"\n"), 0);
}

/// Several inserts at one instruction make one point calling the hooks in
/// plan order; per-point values become constants.
#[test]
fn inserts_merge_in_plan_order_with_point_values() {
    let code_object =
        load::load_for_target(&test_kernels("control_flow"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let lifted = lift(&code_object).unwrap();
    let plan = Plan::parse(
        "[[insert]]\nhook = \"first\"\nwhere = \"kernel-entry\"\nargs = [{ value = \"site\" }, { value = \"address\" }]\n\
         [[insert]]\nhook = \"second\"\nwhere = \"each-block\"\nargs = [{ value = \"block\" }, { value = \"opcode\" }]\n",
        "p.toml",
    )
    .unwrap();
    let points = plan.select(&lifted);
    let entry = &points[0];
    assert_eq!(entry.instruction, 0);
    assert_eq!(entry.calls.iter().map(|c| c.hook.as_str()).collect::<Vec<_>>(), vec!["first", "second"]);
    let function = &lifted.functions[entry.function];
    let first = function.instructions().next().unwrap();
    assert_eq!(entry.calls[0].arguments, vec![HookArgument::Int(0), HookArgument::Int(first.address as i64)]);
    assert_eq!(entry.calls[1].arguments, vec![HookArgument::Int(0), HookArgument::Int(i64::from(first.opcode))]);
    // Sites count points, in code order.
    let sites: Vec<i64> = points
        .iter()
        .filter_map(|p| p.calls.iter().find(|c| c.hook == "first"))
        .map(|c| match c.arguments[0] {
            HookArgument::Int(site) => site,
            _ => panic!(),
        })
        .collect();
    assert!(sites.windows(2).all(|w| w[0] < w[1]), "{sites:?}");
    let _ = HookCall { hook: String::new(), arguments: vec![] };
}

/// The examples' plans parse and select instructions of a real kernel.
#[test]
fn example_plans_select_points() {
    let code_object = load::load_for_target(&test_kernels("memory"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let lifted = lift(&code_object).unwrap();
    let examples = repo().join("hook-sdk/examples");
    let mut plans = 0;
    for entry in std::fs::read_dir(&examples).unwrap() {
        let path = entry.unwrap().path().join("plan.toml");
        if !path.exists() {
            continue;
        }
        plans += 1;
        let plan = Plan::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let points = plan.select(&lifted);
        assert!(!points.is_empty(), "{} selects nothing", path.display());
    }
    assert!(plans >= 2);
    // The counter's plan gives every instruction of every kernel one hook.
    let counter = Plan::load(&examples.join("instruction-counter/plan.toml")).unwrap();
    let instructions: usize =
        lifted.functions.iter().filter(|f| f.is_kernel()).map(|f| f.instructions().filter(|i| i.decoded).count()).sum();
    let points = counter.select(&lifted);
    assert_eq!(points.len(), instructions);
    assert!(points.iter().all(|p| p.calls.len() == 1));
}

/// Plan to machine code: the instruction counter's plan over every
/// instruction of our memory kernels, through the payload compiler (LLVM's
/// verifier and the machine-code preservation check on).
#[test]
fn the_counters_plan_compiles_for_every_instruction() {
    use gpuinstr::stages::payloads::{compile_payloads, PayloadOptions};
    let dir = scratch();
    let tool_path = dir.path().join("counter.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &example("instruction-counter"), "-O3", &tool_path));
    let tool = load::load(&tool_path).unwrap().code_objects.remove(0);
    let code_object = load::load_for_target(&test_kernels("memory"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let lifted = lift(&code_object).unwrap();
    let liveness = gpuinstr::stages::liveness::analyze(&lifted).unwrap();
    let plan = Plan::load(&repo().join("hook-sdk/examples/instruction-counter/plan.toml")).unwrap();
    let points = plan.select(&lifted);
    let compiled = compile_payloads(
        &tool,
        &lifted,
        &liveness,
        &points,
        &gpuinstr_intrinsics::Registry::with_builtins(),
        &PayloadOptions::default(),
    )
    .unwrap();
    assert_eq!(compiled.payloads.len(), points.len());
    // Vector payloads add the popcount of EXEC; scalar ones do not.
    let vector = compiled.payloads.iter().filter(|p| p.code.iter().any(|l| l.starts_with("s_bcnt1_i32_b64"))).count();
    assert!(vector > 0 && vector < points.len(), "{vector} of {}", points.len());
}
