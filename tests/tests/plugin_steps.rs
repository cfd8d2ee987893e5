//! The plugin's steps as named passes under opt, on a hand-written tool
//! module (tests/inputs/plugin-steps/tool.ll).

use gpuinstr_tests::*;

const STEPS: [&str; 7] = [
    "collect-annotations",
    "check-hooks",
    "prepare-hooks",
    "rename-intrinsics",
    "remove-kernels",
    "externalize-globals",
    "substitute-amdgcn-intrinsics",
];

fn pipeline(steps: &[&str]) -> String {
    steps.iter().map(|s| format!("gpuinstr-{s}")).collect::<Vec<_>>().join(",")
}

fn run_passes(passes: &str) -> String {
    let output = run_ok(&mut opt_command(passes, &input("plugin-steps/tool.ll")));
    String::from_utf8(output.stdout).expect("opt prints UTF-8")
}

/// Each step after the ones before it: the snapshot shows what the step
/// changed. opt verifies the module after the pipeline, so each prefix is
/// also valid IR.
#[test]
fn steps_one_after_another() {
    for (index, step) in STEPS.iter().enumerate() {
        let ir = run_passes(&pipeline(&STEPS[..=index]));
        compiler_snapshot!(format!("step_{}_{}", index + 1, step), without_module_identity(&ir));
    }
}

/// Each step alone on the raw module: valid IR (opt's verifier), no crash.
#[test]
fn every_step_runs_alone() {
    for step in STEPS {
        run_passes(&pipeline(&[step]));
    }
}

#[test]
fn all_steps_give_the_expected_module() {
    let ir = run_passes(&pipeline(&STEPS));
    // Annotations and the used lists are gone, and so is what only they kept alive.
    for gone in [
        "llvm.global.annotations",
        "llvm.compiler.used",
        "llvm.metadata",
        "__gpuinstr_reserved",
        "amdgpu_kernel",
        "__gpuinstr_hook_handle_countWaves",
        "@llvm.amdgcn.implicitarg.ptr",
        "@llvm.amdgcn.workgroup.id",
        "@llvm.amdgcn.workitem.id",
        "dispatchId",
        "optnone",
        "asm sideeffect",
    ] {
        assert!(!ir.contains(gone), "`{gone}` is still in the module:\n{ir}");
    }
    // Managed storage stays declared: it tells gpuinstr-link that Counter
    // is a pointer to initialise with its address.
    assert!(ir.contains("@Counter.managed = external addrspace(1) externally_initialized global i64"), "{ir}");
    // Hooks: external, always-inline, marked.
    assert!(ir.contains("define void @countWaves(i1 zeroext %waveLevel) #"), "{ir}");
    assert!(ir.contains("define void @recordPlace() #"), "{ir}");
    // Two instantiations, one intrinsic.
    assert_eq!(ir.matches("declare i32 @\"gpuinstr::readReg.i32.i32\"(i32)").count(), 1, "{ir}");
    assert_eq!(ir.matches("call i32 @\"gpuinstr::readReg.i32.i32\"(i32 ").count(), 2, "{ir}");
    assert!(ir.contains("\"gpuinstr_intrinsic\"=\"gpuinstr::readReg\""), "{ir}");
    assert!(ir.contains("call i32 @\"mytool::hwId.i32\"()"), "{ir}");
    assert!(ir.contains("\"gpuinstr_intrinsic\"=\"mytool::hwId\""), "{ir}");
    // Kernel state goes through framework intrinsics.
    assert!(ir.contains("call i32 @\"gpuinstr::workgroupIdX.i32\"()"), "{ir}");
    assert!(ir.contains("call i32 @\"gpuinstr::workitemIdY.i32\"()"), "{ir}");
    assert!(ir.contains("call ptr addrspace(4) @\"gpuinstr::implicitArgPtr.p4\"()"), "{ir}");
    // Globals: declarations for mutable data, constant data kept, cuid kept.
    assert!(ir.contains("@Counter = external addrspace(1) externally_initialized global ptr addrspace(1)"), "{ir}");
    assert!(ir.contains("@Scratch = external addrspace(1) global i32"), "{ir}");
    assert!(ir.contains("@Weights = internal unnamed_addr addrspace(4) constant [2 x i32] [i32 3, i32 5]"), "{ir}");
    assert!(ir.contains("@__hip_cuid_0123abcd = addrspace(1) global i8 0"), "{ir}");
}

/// `gpuinstr-embed` embeds exactly what the named steps produce, and leaves
/// the original module as it was.
#[test]
fn embed_pass_embeds_the_preprocessed_clone() {
    let scratch = scratch();
    let embedded_ir = run_passes("gpuinstr-embed");
    let bitcode = embedded_bitcode_in_ir(&embedded_ir);
    let embedded = llvm_dis(&bitcode, scratch.path());
    let stepwise = run_passes(&pipeline(&STEPS));
    // Not the data layout: LLVM 17 and newer upgrade an older AMDGPU layout
    // when they read bitcode (the embedded copy), not when they read text.
    let body = |ir: &str| {
        without_module_identity(ir)
            .lines()
            .filter(|l| !l.starts_with("target datalayout"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(body(&embedded).trim(), body(&stepwise).trim());

    // The original keeps its kernel, hooks, bindings and annotations.
    for kept in [
        "define protected amdgpu_kernel void @__gpuinstr_hook_handle_countWaves()",
        "@llvm.global.annotations",
        "define internal i32 @_ZN8gpuinstr7readRegIjEET_NS_3RegE(i32 %reg)",
        "call ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()",
        "section \".llvmbc\"",
    ] {
        assert!(embedded_ir.contains(kept), "`{kept}` missing from the original module");
    }
    // Our global is kept alive for the backend.
    let used = embedded_ir.lines().find(|l| l.starts_with("@llvm.compiler.used")).expect("compiler.used");
    assert!(used.contains("@gpuinstr.embedded.tool"), "{used}");
}

/// Running the embed pass twice (as in an LTO link of already-embedded
/// modules) leaves exactly one embedded module.
#[test]
fn embedding_again_replaces_the_embedded_module() {
    let ir = run_passes("gpuinstr-embed,gpuinstr-embed");
    assert_eq!(ir.lines().filter(|l| l.starts_with("@gpuinstr.embedded.tool")).count(), 1, "{ir}");
}

/// Non-tool modules (no hooks, no reserved variable) and non-amdgcn modules
/// pass through untouched.
#[test]
fn modules_that_are_not_tools_are_left_alone() {
    for name in ["not-a-tool.ll", "host-module.ll"] {
        let path = input(&format!("plugin-steps/{name}"));
        let before = std::fs::read_to_string(&path).unwrap();
        let output = run_ok(&mut opt_command("gpuinstr-embed", &path));
        let after = String::from_utf8(output.stdout).unwrap();
        assert!(!after.contains(".llvmbc"), "{name} got an embedded module");
        assert!(before.contains("@hook") && after.contains("@hook"));
    }
}
