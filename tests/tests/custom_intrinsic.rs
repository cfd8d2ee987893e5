//! The custom-intrinsic example: a tool's own intrinsics, lowered by Rust
//! code registered next to the built-ins (hook-sdk/examples/custom-intrinsic).

use gpuinstr::preservation::{check, decode_code};
use gpuinstr::stages::lift::lift;
use gpuinstr::stages::liveness::{analyze, RegisterUnits};
use gpuinstr::stages::load;
use gpuinstr::stages::payload::HookCall;
use gpuinstr::stages::payload::PayloadPoint;
use gpuinstr::stages::payloads::{compile_payloads, payload_sites, PayloadOptions};
use gpuinstr_intrinsics::Registry;
use gpuinstr_tests::*;

fn build_tool(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("custom-intrinsic.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &example("custom-intrinsic"), "-O3", &path));
    path
}

#[test]
fn the_tools_intrinsics_lower_to_their_instructions() {
    let dir = scratch();
    let tool_path = build_tool(dir.path());
    let tool = load::load(&tool_path).unwrap().code_objects.remove(0);
    let app = load::load_for_target(&test_kernels("memory"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let lifted = lift(&app).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let points: Vec<PayloadPoint> = (0..lifted.functions.len())
        .filter(|f| lifted.functions[*f].is_kernel())
        .map(|function| PayloadPoint {
            function,
            instruction: 0,
            calls: vec![HookCall { hook: "recordPlacement".into(), arguments: vec![] }],
        })
        .collect();
    let options = PayloadOptions { verify_each_pass: true, ..Default::default() };

    // Without registering them, the tool is refused before any work.
    let error = compile_payloads(&tool, &lifted, &liveness, &points, &Registry::with_builtins(), &options)
        .err()
        .expect("unregistered intrinsics are refused");
    assert!(
        error.to_string().starts_with(
            "hook `recordPlacement` calls intrinsic `mytool::hwId`, which has no lowering: register it in the intrinsic registry"
        ) || error.to_string().starts_with("hook `recordPlacement` calls intrinsic `mytool::clock`"),
        "{error}"
    );

    let compiled =
        compile_payloads(&tool, &lifted, &liveness, &points, &custom_intrinsic::registry(), &options).unwrap();
    for payload in &compiled.payloads {
        assert_eq!(
            payload
                .code
                .iter()
                .filter(|l| l.starts_with("s_getreg_b32 ") && l.ends_with(", hwreg(HW_REG_HW_ID)"))
                .count(),
            1,
            "{}",
            payload.label
        );
        assert_eq!(payload.code.iter().filter(|l| l.starts_with("s_memtime s[")).count(), 1, "{}", payload.label);
    }
    compiler_snapshot!("custom_intrinsic_payload", compiled.render_stages(0));

    let sites = payload_sites(&lifted, &liveness, &points, &options).unwrap();
    let codes: Vec<Vec<_>> = compiled.payloads.iter().map(|p| p.code.to_vec()).collect();
    let decoded = decode_code(&lifted, &codes, None).unwrap();
    let units = RegisterUnits::new(&lifted.isa);
    for ((payload, code), site) in compiled.payloads.iter().zip(&decoded).zip(&sites) {
        check(&lifted.isa, &units, code, &site.live, site.sva).unwrap_or_else(|v| panic!("{}: {v}", payload.label));
    }

    // The example program prints the same code.
    let listing =
        custom_intrinsic::kernel_entry_payloads(&tool_path, &test_kernels("memory"), Some("gfx90a"), "recordPlacement")
            .unwrap();
    assert!(listing.contains("    s_getreg_b32 "), "{listing}");
    assert_eq!(listing.matches("s_memtime").count(), compiled.payloads.len());
}
