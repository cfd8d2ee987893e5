//! The example tools build with plain `hipcc -fpass-plugin=` and with
//! `clang++-15 -x hip`, at -O0 and -O3; their device code objects keep their
//! kernels and carry the preprocessed hook module.

use gpuinstr::inkwell::context::Context;
use gpuinstr::inspect;
use gpuinstr::stages::load;
use gpuinstr::tool;
use gpuinstr_intrinsics::AMDGCN_SUBSTITUTIONS;
use gpuinstr_tests::*;

struct Example {
    directory: &'static str,
    hooks: &'static [&'static str],
}

const EXAMPLES: [Example; 2] = [
    Example { directory: "instruction-counter", hooks: &["countInstructionsScalar", "countInstructionsVector"] },
    Example { directory: "kernel-arguments", hooks: &["accessKernelArguments"] },
];

fn check_example(case: &Example) {
    let scratch = scratch();
    for compiler in [Compiler::Hipcc, Compiler::Clang] {
        for opt in ["-O0", "-O3"] {
            let context = format!("{} built by {compiler:?} at {opt}", case.directory);
            let built = build_tool(compiler, &example(case.directory), opt, scratch.path());
            let input = load::load(&built).unwrap_or_else(|e| panic!("{context}: {e}"));
            assert_eq!(input.code_objects.len(), 1, "{context}");
            let code_object = &input.code_objects[0];
            assert_eq!(code_object.target.processor, "gfx90a", "{context}");

            // The original compilation is undisturbed: one handle kernel per hook.
            let mut kernels: Vec<&str> = code_object.kernels.iter().map(|k| k.name()).collect();
            kernels.sort();
            let expected: Vec<String> = case.hooks.iter().map(|h| format!("__gpuinstr_hook_handle_{h}")).collect();
            assert_eq!(kernels, expected, "{context}");

            // The embedded module: non-loadable, re-parses, no kernels, no
            // kernel-state amdgcn intrinsics, the hooks marked.
            let section = code_object.sections.iter().find(|s| s.name == ".llvmbc").expect(".llvmbc");
            assert!(!section.loadable, "{context}: .llvmbc must not be loaded to the GPU");
            let files = tool::embedded_bitcode(code_object).unwrap();
            assert_eq!(files.len(), 1, "{context}");
            let ir = llvm_dis(files[0], scratch.path());
            assert!(!ir.contains("amdgpu_kernel"), "{context}: kernels left in the clone");
            for (amdgcn, _) in AMDGCN_SUBSTITUTIONS {
                assert!(!ir.contains(&format!("@{amdgcn}(")), "{context}: {amdgcn} left in the clone");
            }
            for hook in case.hooks {
                assert!(
                    ir.contains(&format!("define void @{hook}(")),
                    "{context}: {hook} is not an external definition"
                );
            }
            assert!(!ir.contains("optnone"), "{context}: optnone left in the clone");
            let llvm = Context::create();
            let module = tool::read_tool_module(&llvm, code_object).unwrap();
            module.verify().unwrap_or_else(|e| panic!("{context}: embedded module does not verify: {e}"));

            // inspect shows the hooks.
            let report = inspect::report(&input).unwrap();
            let summary = report.code_objects[0].tool.as_ref().expect("a tool");
            let hooks: Vec<&str> = summary.hooks.iter().map(|h| h.name.as_str()).collect();
            assert_eq!(hooks, case.hooks, "{context}");

            if opt == "-O3" && compiler == Compiler::Clang {
                compiler_snapshot!(
                    format!("embedded_module_{}", case.directory),
                    without_module_identity(&normalize(&ir, scratch.path()))
                );
            }
            if opt == "-O3" && compiler == Compiler::Hipcc {
                let text = inspect::render_text(&report);
                compiler_snapshot!(format!("inspect_{}", case.directory), normalize(&text, scratch.path()));
            }
        }
    }
}

#[test]
fn instruction_counter_example() {
    check_example(&EXAMPLES[0]);
}

#[test]
fn kernel_arguments_example() {
    check_example(&EXAMPLES[1]);
}

/// What the hooks of the instruction counter use, beyond the snapshot.
#[test]
fn instruction_counter_hooks_use_write_exec() {
    let scratch = scratch();
    let built = build_tool(Compiler::Clang, &example(EXAMPLES[0].directory), "-O3", scratch.path());
    let report = inspect::report(&load::load(&built).unwrap()).unwrap();
    let summary = report.code_objects[0].tool.clone().unwrap();
    let scalar = summary.hooks.iter().find(|h| h.name == "countInstructionsScalar").unwrap();
    assert_eq!(scalar.intrinsics, vec!["gpuinstr::writeExec"]);
    let vector = summary.hooks.iter().find(|h| h.name == "countInstructionsVector").unwrap();
    assert_eq!(vector.parameters, vec!["i1"]);
    assert!(vector.intrinsics.is_empty());
    assert!(summary.globals.iter().any(|g| g.name == "Counter" && !g.defined && g.address_space == 1));
}

/// gridDim and blockDim in a hook read kernel state through framework
/// intrinsics, not through the payload's own (meaningless) registers.
#[test]
fn kernel_arguments_hook_reads_launch_state_through_intrinsics() {
    let scratch = scratch();
    let built = build_tool(Compiler::Clang, &example(EXAMPLES[1].directory), "-O3", scratch.path());
    let input = load::load(&built).unwrap();
    let report = inspect::report(&input).unwrap();
    let summary = report.code_objects[0].tool.clone().unwrap();
    let hook = &summary.hooks[0];
    // HIP reads the launch shape from the dispatch packet up to code object
    // v4 and from the hidden arguments (block counts, group sizes) from v5.
    let shape = if input.code_objects[0].code_object_version >= 5 {
        "gpuinstr::implicitArgPtr"
    } else {
        "gpuinstr::dispatchPtr"
    };
    for intrinsic in [shape, "gpuinstr::workgroupIdX", "gpuinstr::workgroupIdY", "gpuinstr::workgroupIdZ"] {
        assert!(hook.intrinsics.iter().any(|i| i == intrinsic), "{intrinsic} not used: {:?}", hook.intrinsics);
    }
}
