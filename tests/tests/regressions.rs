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
