//! Lift, emit and link on our own kernels (tests/inputs/kernels): exact
//! round trips for gfx908 and gfx90a through CoMGR and ld.lld, the facts
//! liveness and patching will rely on, and the MIR the lifter prints.

use gpuinstr::roundtrip::roundtrip;
use gpuinstr::stages::emit::link::Linker;
use gpuinstr::stages::lift::print;
use gpuinstr::stages::lift::{lift, BlockExit, Flow, FunctionKind, LiftedCodeObject, Mapping};
use gpuinstr::stages::load::{self, CodeObject};
use gpuinstr_tests::*;

fn code_object(kernels: &str, target: &str) -> CodeObject {
    let input = load::load_for_target(&test_kernels(kernels), Some(target)).unwrap();
    assert_eq!(input.code_objects.len(), 1);
    input.code_objects.into_iter().next().unwrap()
}

#[test]
fn own_kernels_round_trip_identically_through_both_linkers() {
    for kernels in TEST_KERNELS {
        for target in ["gfx908", "gfx90a"] {
            let code_object = code_object(kernels, target);
            for linker in [Linker::Comgr, Linker::Lld] {
                let (bytes, report) = roundtrip(&code_object, linker).unwrap();
                let context = format!("{kernels} for {target} through {linker:?}");
                assert!(report.identical(), "{context}:\n{}", report.render_text());
                assert!(report.layout.is_identical(), "{context}: layout {:?}", report.layout);
                assert_eq!(report.raw_instructions, 0, "{context}: instructions written as bytes");
                assert!(report.raw_descriptors.is_empty(), "{context}: {:?}", report.raw_descriptors);
                assert!(report.sections.is_identical(), "{context}: {:?}", report.sections);
                // Every loaded section, not only the kernels, comes back byte for byte.
                let rebuilt = CodeObject::parse(bytes, Vec::new()).unwrap();
                for section in code_object.sections.iter().filter(|s| s.loadable) {
                    let again = rebuilt.sections.iter().find(|s| s.name == section.name).unwrap();
                    assert_eq!(
                        code_object.section_bytes(section),
                        rebuilt.section_bytes(again),
                        "{context}: section {} differs",
                        section.name
                    );
                }
            }
        }
    }
}

fn lifted(code_object: &CodeObject) -> LiftedCodeObject<'_> {
    lift(code_object).unwrap()
}

#[test]
fn control_flow_is_recovered() {
    let code_object = code_object("control_flow", "gfx90a");
    let lifted = lifted(&code_object);
    let reduction = lifted.function("_Z13loopReductionPfPKfii").unwrap();
    assert!(
        reduction.blocks.iter().any(|b| b.successors.iter().any(|s| *s <= b.index)),
        "the loop's back edge is missing"
    );
    let branches = lifted.function("_Z17divergentBranchesPiPKii").unwrap();
    assert!(branches.blocks.iter().any(|b| b.exit == BlockExit::ConditionalBranch && b.successors.len() == 2));
    for function in &lifted.functions {
        assert!(function.relocatable(), "{} is not relocatable: {:?}", function.name, function.problems);
        let last = function.blocks.iter().flat_map(|b| &b.instructions).last().unwrap();
        assert_eq!(last.flow, Flow::EndProgram, "{} does not end with s_endpgm", function.name);
        // Every successor edge points at a block start.
        for block in &function.blocks {
            for successor in &block.successors {
                assert!(*successor < function.blocks.len());
            }
        }
    }
}

#[test]
fn implicit_operands_come_from_the_pseudos() {
    let code_object = code_object("control_flow", "gfx90a");
    let lifted = lifted(&code_object);
    let isa = &lifted.isa;
    let scc = isa.register_by_name("SCC").unwrap();
    let exec = isa.register_by_name("EXEC").unwrap();
    let vcc = isa.register_by_name("VCC").unwrap();
    let instructions: Vec<_> = lifted.functions.iter().flat_map(|f| f.instructions()).collect();
    assert!(instructions.iter().all(|i| i.decoded && i.mapping != Mapping::Unmapped));
    // Scalar compares write SCC; conditional branches on it read it.
    for compare in instructions.iter().filter(|i| i.name(isa).starts_with("S_CMP_")) {
        assert!(compare.implicit_defs.contains(&scc), "{} does not define SCC", compare.name(isa));
    }
    // Vector ALU instructions read EXEC.
    let valu: Vec<_> =
        instructions.iter().filter(|i| i.name(isa).starts_with("V_") && i.name(isa).contains("_e32")).collect();
    assert!(!valu.is_empty());
    for instruction in valu {
        assert!(instruction.implicit_uses.contains(&exec), "{} does not read EXEC", instruction.name(isa));
    }
    // VOPC compares write VCC.
    let compares: Vec<_> =
        instructions.iter().filter(|i| i.name(isa).starts_with("V_CMP_") && i.name(isa).ends_with("_e32")).collect();
    for compare in compares {
        assert!(compare.implicit_defs.contains(&vcc), "{} does not define VCC", compare.name(isa));
    }
    assert!(instructions.iter().filter(|i| i.name(isa) == "S_ENDPGM").count() >= 2);
}

#[test]
fn calls_and_scratch_are_recovered() {
    let code_object = code_object("calls_and_scratch", "gfx90a");
    let lifted = lifted(&code_object);
    let callee = lifted.function("_Z10polynomialfi").unwrap();
    assert_eq!(callee.kind, FunctionKind::DeviceFunction);
    assert!(callee.blocks.iter().any(|b| b.exit == BlockExit::Return), "the device function has no return");
    let caller = lifted.function("_Z19callsDeviceFunctionPfi").unwrap();
    assert_eq!(caller.calls.len(), 2);
    assert!(caller.calls.iter().all(|c| c.target == Some(callee.address)), "{:?}", caller.calls);

    let scratch = code_object.kernels.iter().find(|k| k.name() == "_Z12scratchArrayPiPKii").unwrap();
    assert_eq!(scratch.descriptor.rsrc2("ENABLE_PRIVATE_SEGMENT"), 1);
    assert!(scratch.descriptor.private_segment_fixed_size >= 256);
}

#[test]
fn register_spills_go_to_scratch_and_accumulation_registers() {
    for (target, agpr_spills) in [("gfx908", true), ("gfx90a", false)] {
        let code_object = code_object("calls_and_scratch", target);
        let lifted = lifted(&code_object);
        let isa = &lifted.isa;
        let spills = lifted.function("_Z14registerSpillsPfPKf").unwrap();
        let count = |prefix: &str| spills.instructions().filter(|i| i.name(isa).starts_with(prefix)).count();
        assert!(count("BUFFER_STORE_DWORD_OFFSET") > 10, "{target}: no scratch spills");
        assert_eq!(count("V_ACCVGPR_WRITE") > 10, agpr_spills, "{target}: AGPR spills");
        let kernel = code_object.kernels.iter().find(|k| k.name() == "_Z14registerSpillsPfPKf").unwrap();
        assert!(kernel.descriptor.private_segment_fixed_size > 0);
    }
}

#[test]
fn pc_relative_data_references_are_symbolic() {
    let code_object = code_object("memory", "gfx90a");
    let lifted = lifted(&code_object);
    let mut targets: Vec<String> = lifted
        .functions
        .iter()
        .flat_map(|f| f.instructions())
        .filter_map(|i| i.pc_relative.as_ref())
        .map(|pc| lifted.describe_address(pc.target))
        .collect();
    targets.sort();
    targets.dedup();
    assert_eq!(targets, ["Coefficients", "Histogram"]);
    let text = print::asm(&lifted, Some("_Z12ldsReductionPfPKf"));
    assert!(text.contains("Coefficients@rel32@lo+4"), "{text}");
    assert!(text.contains("Coefficients@rel32@hi+12"), "{text}");
}

#[test]
fn accumulation_registers_on_gfx908() {
    let code_object = code_object("matrix_cores", "gfx908");
    let lifted = lifted(&code_object);
    let isa = &lifted.isa;
    let instructions: Vec<_> = lifted.functions.iter().flat_map(|f| f.instructions()).collect();
    let mfma: Vec<_> = instructions.iter().filter(|i| i.name(isa).starts_with("V_MFMA_")).collect();
    assert_eq!(mfma.len(), 2);
    for instruction in mfma {
        assert!(instruction.defs.iter().all(|r| isa.register_name(*r).starts_with("AGPR")));
    }
    assert!(instructions.iter().any(|i| i.name(isa).starts_with("V_ACCVGPR_WRITE")));
}

#[test]
fn lifted_mir_snapshots() {
    for (kernels, only) in [
        ("control_flow", None),
        ("memory", Some("_Z12ldsReductionPfPKf")),
        ("memory", Some("_Z7atomicsPKjiPj")),
        ("calls_and_scratch", Some("_Z10polynomialfi")),
        ("calls_and_scratch", Some("_Z19callsDeviceFunctionPfi")),
        ("matrix_cores", Some("_Z9mfmaSmallPfPKfS1_i")),
    ] {
        let code_object = code_object(kernels, "gfx90a");
        let lifted = lifted(&code_object);
        let name = format!("mir_{kernels}_{}", only.unwrap_or("all"));
        compiler_snapshot!(name, print::mir(&lifted, only));
    }
    let gfx908 = code_object("calls_and_scratch", "gfx908");
    compiler_snapshot!("cfg_calls_and_scratch_gfx908", print::cfg(&lifted(&gfx908), None));
    let control_flow = code_object("control_flow", "gfx90a");
    compiler_snapshot!("asm_control_flow", print::asm(&lifted(&control_flow), None));
}

/// Code object v3 (older target-id syntax, no target in the metadata) and
/// v5 (more hidden arguments) round-trip as v4 does.
#[test]
fn code_object_versions_3_to_6_round_trip() {
    let scratch = scratch();
    // Each version this build's clang writes (clang 21 no longer writes v3;
    // v6 came with clang 19).
    let major = gpuinstr::toolchain::LLVM_MAJOR;
    let versions = [(3, "gfx908"), (4, "gfx90a"), (5, "gfx90a"), (6, "gfx908")]
        .into_iter()
        .filter(|(version, _)| (*version != 3 || major < 21) && (*version != 6 || major >= 19));
    for (version, processor) in versions {
        let output = scratch.path().join(format!("v{version}.hsaco"));
        run_ok(
            clang()
                .args(["-x", "hip", "--rocm-path=/usr", "--cuda-device-only", "--no-gpu-bundle-output", "-O3", "-c"])
                .arg(format!("--offload-arch={processor}"))
                .arg(format!("--rocm-device-lib-path={}", rocm_device_libs().display()))
                .arg(format!("-mcode-object-version={version}"))
                .arg(input("kernels/memory.hip"))
                .arg("-o")
                .arg(&output),
        );
        let input = load::load(&output).unwrap();
        let code_object = &input.code_objects[0];
        assert_eq!(code_object.code_object_version, version);
        for linker in [Linker::Comgr, Linker::Lld] {
            let (_, report) = roundtrip(code_object, linker).unwrap();
            assert!(
                report.identical() && report.sections.is_identical(),
                "v{version} {linker:?}:\n{}",
                report.render_text()
            );
        }
    }
}

/// A relocation naming no symbol (what LLVM 15's assembler writes for a
/// `.reloc` whose symbol nothing else names, here written as such) is
/// refused before linking: the linker would leave the literal as it is and
/// the code would compute a wrong address.
#[test]
fn relocations_naming_no_symbol_are_refused() {
    use gpuinstr::stages::emit::link::relocations_name_symbols;
    let dir = scratch();
    let assemble = |name: &str, declare: &str, target: &str| -> Vec<u8> {
        let source = dir.path().join(format!("{name}.s"));
        let object = dir.path().join(format!("{name}.o"));
        let text = format!(
            "\t.text\n{declare}\t.globl\tk\nk:\n\t.long\t0x800eff0e, 0\n\t.reloc\tk+4, R_AMDGPU_GOTPCREL32_LO, {target}\n"
        );
        std::fs::write(&source, text).unwrap();
        run_ok(
            gpuinstr::toolchain::llvm_tool("llvm-mc")
                .args(["-triple=amdgcn-amd-amdhsa", "-mcpu=gfx90a", "-filetype=obj"])
                .arg(&source)
                .arg("-o")
                .arg(&object),
        );
        std::fs::read(&object).unwrap()
    };
    let error = relocations_name_symbols(&assemble("nameless", "", "4")).unwrap_err().to_string();
    assert!(error.contains("relocation naming no symbol (section .text, offset 0x4)"), "{error}");
    relocations_name_symbols(&assemble("declared", "\t.globl\tCounter\n", "Counter+4")).expect("a symbol named");
}
