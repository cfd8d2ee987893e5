//! Stage 4, sva: homes for the State Value Array and the work-item ids.

use gpuinstr::stages::lift::reachable_functions;
use gpuinstr::stages::lift::{lift, FunctionKind, LiftedCodeObject};
use gpuinstr::stages::liveness::allocation;
use gpuinstr::stages::liveness::{analyze, Liveness, Unit};
use gpuinstr::stages::load;
use gpuinstr::stages::payload::PayloadPoint;
use gpuinstr::stages::payload::{HookArgument, HookCall};
use gpuinstr::stages::payloads::{compile_payloads, PayloadOptions};
use gpuinstr::stages::sva::{place, Home, RegisterGrowth, SvaRequest};
use gpuinstr_tests::*;

/// Untouched by the kernel and everything it calls, and inside its
/// allocation: its VGPRs, or on gfx90a its whole unified allocation when it
/// uses no AGPR.
fn free_in(lifted: &LiftedCodeObject<'_>, liveness: &Liveness, kernel: usize, vgpr: u16) -> bool {
    let FunctionKind::Kernel(index) = lifted.functions[kernel].kind else { panic!("not a kernel") };
    let touched = &liveness.functions[kernel].touched;
    let allocation = allocation(lifted.code_object, &lifted.code_object.kernels[index], touched);
    let uses_agprs = touched.iter().any(|u| u.file() == gpuinstr::stages::liveness::RegisterFile::Agpr);
    let capacity = if lifted.code_object.target.processor == "gfx90a" && !uses_agprs {
        allocation.vgprs.len() + allocation.agprs.len()
    } else {
        allocation.vgprs.len()
    };
    usize::from(vgpr) < capacity && !touched.contains(Unit::vgpr(vgpr))
}

#[test]
fn homes_are_vgprs_nothing_in_the_kernel_touches() {
    let (mut placed_in_all, mut kernels_in_all) = (0, 0);
    for (kernels, target) in [("memory", "gfx90a"), ("control_flow", "gfx908"), ("calls_and_scratch", "gfx90a")] {
        let code_object = load::load_for_target(&test_kernels(kernels), Some(target)).unwrap().code_objects.remove(0);
        let lifted = lift(&code_object).unwrap();
        let liveness = analyze(&lifted).unwrap();
        let instrumented = (0..lifted.functions.len()).filter(|f| lifted.functions[*f].is_kernel()).collect();
        let placement =
            place(&lifted, &liveness, &SvaRequest { instrumented, work_item_ids: true, grow: RegisterGrowth::Never });
        assert_eq!(placement.kernels.len(), lifted.functions.iter().filter(|f| f.is_kernel()).count());
        let mut placed = 0;
        for kernel in &placement.kernels {
            let name = &lifted.functions[kernel.kernel].name;
            let free: Vec<u16> = (0..256).filter(|v| free_in(&lifted, &liveness, kernel.kernel, *v)).collect();
            if free.len() < 2 {
                // Not two free VGPRs: two AGPRs nothing touches, or a problem.
                match (kernel.sva, kernel.work_item_ids) {
                    // Sliding between VGPRs free where they are (clang 17's registerSpills).
                    (Some(Home::Sliding(sva)), Some(Home::Sliding(ids))) => {
                        assert_ne!(sva, ids, "{name}: {kernel:?}");
                        assert!(kernel.problem.is_none(), "{name}: {kernel:?}");
                    }
                    // Kept in memory, a slot per wave (no register anywhere).
                    (Some(Home::WaveSlot), Some(Home::WaveSlot)) => {
                        assert!(kernel.problem.is_none(), "{name}: {kernel:?}");
                        let registers = placement.functions[&kernel.kernel];
                        assert!(registers.in_wave_slot.is_some_and(|h| h.work_item_ids), "{name}: {registers:?}");
                        assert_eq!((registers.sva, registers.in_agprs), (None, None), "{name}");
                    }
                    (Some(Home::Agpr(sva)), Some(Home::Agpr(ids))) => {
                        let touched = &liveness.functions[kernel.kernel].touched;
                        assert!(sva != ids && !touched.contains(Unit::agpr(sva)), "{name}: {kernel:?}");
                        assert!(!touched.contains(Unit::agpr(ids)), "{name}: {kernel:?}");
                    }
                    _ => {
                        assert!(
                            kernel.problem.as_deref().is_some_and(|p| p.contains("--grow-registers")),
                            "{name}: {kernel:?}"
                        );
                        assert_eq!(placement.functions[&kernel.kernel].sva, None);
                        assert_eq!(placement.functions[&kernel.kernel].in_agprs, None);
                    }
                }
                continue;
            }
            assert_eq!(kernel.problem, None, "{name}");
            let (Some(Home::Free(sva)), Some(Home::Free(ids))) = (kernel.sva, kernel.work_item_ids) else {
                panic!("{name}: {kernel:?}")
            };
            assert_ne!(sva, ids);
            assert!(free.contains(&sva) && free.contains(&ids), "{name}: v{sva}, v{ids} of {free:?}");
            // The highest free ones: payloads allocate from the bottom.
            assert_eq!(sva, *free.last().unwrap());
            assert_eq!(placement.functions[&kernel.kernel].sva, Some(sva));
            placed += 1;
        }
        placed_in_all += placed;
        kernels_in_all += placement.kernels.len();
    }
    // How many kernels have two VGPRs to spare is the compiler's doing
    // (clang 17 leaves none in control_flow's); most of ours do.
    assert!(placed_in_all * 2 >= kernels_in_all, "{placed_in_all} of {kernels_in_all} kernels placed in free VGPRs");
}

/// Kernels calling the same instrumented device function get the same SVA,
/// free in all of them; the device function gets it too.
#[test]
fn kernels_sharing_an_instrumented_device_function_agree() {
    let code_object =
        load::load_for_target(&test_kernels("calls_and_scratch"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let lifted = lift(&code_object).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let device = (0..lifted.functions.len())
        .filter(|f| !lifted.functions[*f].is_kernel())
        .max_by_key(|f| {
            (0..lifted.functions.len())
                .filter(|k| lifted.functions[*k].is_kernel() && reachable_functions(&lifted, *k).contains(f))
                .count()
        })
        .expect("a device function");
    let users: Vec<usize> = (0..lifted.functions.len())
        .filter(|k| lifted.functions[*k].is_kernel() && reachable_functions(&lifted, *k).contains(&device))
        .collect();
    assert!(!users.is_empty());
    let placement = place(
        &lifted,
        &liveness,
        &SvaRequest { instrumented: [device].into_iter().collect(), work_item_ids: false, grow: RegisterGrowth::Never },
    );
    let homes: Vec<_> = placement.kernels.iter().map(|k| k.sva).collect();
    assert_eq!(placement.kernels.len(), users.len(), "only the kernels reaching it are placed");
    assert!(homes.windows(2).all(|w| w[0] == w[1]), "{homes:?}");
    let Some(Home::Free(sva)) = homes[0] else { panic!("{homes:?}") };
    for kernel in &users {
        assert!(free_in(&lifted, &liveness, *kernel, sva));
    }
    assert_eq!(placement.functions[&device].sva, Some(sva));
    assert_eq!(placement.functions[&device].work_item_ids, None);
}

/// A kernel using every VGPR it has (and an AGPR, so the unified file
/// cannot be split differently): the SVA goes to a free AGPR (seed 004's
/// fallback). Using every AGPR too, but never two VGPRs at once: the SVA
/// slides between VGPRs free where it is. With all VGPRs live at once: the
/// wave's slot in memory (found by the XCC's id too on gfx940+); with
/// growing allowed, the first VGPR past the allocation.
#[test]
fn a_kernel_without_free_vector_registers_keeps_the_sva_in_memory_unless_it_may_grow() {
    use gpuinstr::stages::sva::sliding::Move;
    // The allocation: v0-v31 and a0-a31 (gfx90a, ACCUM_OFFSET 32).
    let vgprs: String = (0..32).map(|v| format!("\tv_mov_b32_e32 v{v}, 0\n")).collect();
    let request =
        SvaRequest { instrumented: [0].into_iter().collect(), work_item_ids: false, grow: RegisterGrowth::Never };
    // Every VGPR written: an AGPR of the allocation nothing uses holds the SVA.
    let code_object = kernel_from_assembly("gfx90a", &(vgprs.clone() + "\tv_accvgpr_write_b32 a0, 0\n\ts_endpgm"), "");
    let lifted = lift(&code_object).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let placement = place(&lifted, &liveness, &request);
    assert_eq!((placement.kernels[0].sva, placement.kernels[0].problem.as_deref()), (Some(Home::Agpr(31)), None));
    let registers = placement.functions[&0];
    assert_eq!(registers.sva, None);
    assert_eq!(registers.in_agprs.map(|h| (h.sva, h.work_item_ids)), Some((31, None)));
    assert_eq!(registers.vgpr_limit, 32);

    // Every VGPR and AGPR written, each VGPR dead once written: the SVA
    // starts in v31 and moves once, before v31 is written, into a VGPR
    // already written (the highest: payloads allocate from the bottom).
    let agprs: String = (0..32).map(|a| format!("\tv_accvgpr_write_b32 a{a}, 0\n")).collect();
    let code_object = kernel_from_assembly("gfx90a", &(vgprs.clone() + &agprs + "\ts_endpgm"), "");
    let lifted = lift(&code_object).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let placement = place(&lifted, &liveness, &request);
    assert_eq!((placement.kernels[0].sva, placement.kernels[0].problem.as_deref()), (Some(Home::Sliding(31)), None));
    let slid = &placement.sliding[&0];
    assert_eq!(slid.sva.moves, vec![Move { before: 31, from: 31, to: 30 }]);
    assert_eq!(slid.sva.location[30], 31);
    assert!(slid.sva.location[31..].iter().all(|v| *v == 30));
    slid.check(&lifted.functions[0], &liveness.functions[0]).unwrap();
    assert_eq!(
        slid.code_before(31),
        ["s_mov_b64 s[0:1], exec", "s_mov_b64 exec, -1", "v_mov_b32 v30, v31", "s_mov_b64 exec, s[0:1]"]
    );
    assert_eq!(placement.functions[&0].sva, Some(31), "the preamble fills it where it starts");

    // Then all 32 VGPRs read after the last write: writing v31, the others
    // are all live, so nowhere to slide to. The last resort: memory, a
    // slot per wave.
    let reads: String = (1..32).map(|v| format!("\tv_add_u32_e32 v0, v0, v{v}\n")).collect();
    let stores = "\tglobal_store_dword v[0:1], v0, off\n";
    let source = vgprs + &agprs + &reads + stores + "\ts_endpgm";
    let code_object = kernel_from_assembly("gfx90a", &source, "");
    let lifted = lift(&code_object).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let placement = place(&lifted, &liveness, &request);
    assert_eq!((placement.kernels[0].sva, placement.kernels[0].problem.as_deref()), (Some(Home::WaveSlot), None));
    let registers = placement.functions[&0];
    assert_eq!((registers.sva, registers.in_agprs), (None, None));
    assert_eq!(registers.in_wave_slot.map(|h| h.work_item_ids), Some(false));
    assert!(placement.sliding.is_empty());

    // gfx940 and later spread a GPU's waves over several XCCs: there the
    // slot is found by the XCC's id too.
    let code_object = kernel_from_assembly(mi300(), &source, "");
    let lifted = lift(&code_object).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let placement = place(&lifted, &liveness, &request);
    assert_eq!((placement.kernels[0].sva, placement.kernels[0].problem.as_deref()), (Some(Home::WaveSlot), None));
    let homes = placement.functions[&0].in_wave_slot.expect("in the wave's slot");
    assert!(homes.indexing.xcc, "{homes:?}");
    let grown = place(&lifted, &liveness, &SvaRequest { grow: RegisterGrowth::Always, ..request });
    assert_eq!(grown.kernels[0].sva, Some(Home::Grown(32)));
    assert_eq!(grown.kernels[0].problem, None);
}

/// Never in a VGPR a load may still write: Tensile's DGEMM loops issue the
/// next iteration's loads before testing whether to leave, so on the way
/// out their VGPRs are dead to liveness while the data is still in flight.
/// Here the loop's exit writes v0, the SVA's place in the loop, while every
/// VGPR but the prefetch's v[4:5] is live: sliding must not move into
/// them (sid's rocBLAS `DB_GB` kernels did, and `verify` found it), and the
/// SVA goes to memory.
#[test]
fn the_sliding_sva_never_sits_where_a_load_is_in_flight() {
    let mut source: String = (0..32).map(|v| format!("\tv_mov_b32_e32 v{v}, 0\n")).collect();
    source += &(0..32).map(|a| format!("\tv_accvgpr_write_b32 a{a}, 0\n")).collect::<String>();
    source += "\tv_add_u32_e32 v1, v1, v0\n";
    source += PREFETCH_LEFT_IN_FLIGHT;
    source += "\tv_add_u32_e32 v1, v1, v0\n";
    source += &(6..32).map(|v| format!("\tv_add_u32_e32 v1, v1, v{v}\n")).collect::<String>();
    source += "\tglobal_store_dword v[2:3], v1, off\n\ts_endpgm";
    let code_object = kernel_from_assembly("gfx90a", &source, "");
    let lifted = lift(&code_object).unwrap();
    let liveness = analyze(&lifted).unwrap();
    // The exit's first instruction: only v[4:5] are dead, and in flight.
    let exit = 1 + lifted.functions[0].instructions().position(|i| i.name(&lifted.isa) == "S_BRANCH").unwrap();
    let free = liveness.functions[0].free_at(exit, &gpuinstr::stages::liveness::UnitSet::all());
    let allocation = gpuinstr::stages::liveness::UnitSet::range(gpuinstr::stages::liveness::RegisterFile::Vgpr, 0, 32);
    assert_eq!(free.intersection(&allocation).to_string(), "v[4:5]");
    let request =
        SvaRequest { instrumented: [0].into_iter().collect(), work_item_ids: false, grow: RegisterGrowth::Never };
    let placement = place(&lifted, &liveness, &request);
    assert_eq!((placement.kernels[0].sva, placement.kernels[0].problem.as_deref()), (Some(Home::WaveSlot), None));
    assert!(placement.sliding.is_empty());
}

/// The placement feeds the payload compiler: hooks reading kernel arguments
/// and work-item ids compile everywhere with it.
#[test]
fn placed_registers_serve_the_payloads() {
    let dir = scratch();
    let tool_path = dir.path().join("hooks.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &input("tools/payload-hooks.hip"), "-O3", &tool_path));
    let tool = load::load(&tool_path).unwrap().code_objects.remove(0);
    let code_object = load::load_for_target(&test_kernels("memory"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let lifted = lift(&code_object).unwrap();
    let liveness = analyze(&lifted).unwrap();
    let kernels: Vec<usize> = (0..lifted.functions.len()).filter(|f| lifted.functions[*f].is_kernel()).collect();
    let placement = place(
        &lifted,
        &liveness,
        &SvaRequest {
            instrumented: kernels.iter().copied().collect(),
            work_item_ids: true,
            grow: RegisterGrowth::Never,
        },
    );
    let mut points = Vec::new();
    for kernel in &kernels {
        points.push(PayloadPoint {
            function: *kernel,
            instruction: 0,
            calls: vec![
                HookCall { hook: "recordDimensions".into(), arguments: vec![] },
                HookCall { hook: "histogram".into(), arguments: vec![HookArgument::Int(3)] },
            ],
        });
    }
    let options = PayloadOptions { registers: placement.functions.clone(), ..Default::default() };
    let compiled =
        compile_payloads(&tool, &lifted, &liveness, &points, &gpuinstr_intrinsics::Registry::with_builtins(), &options)
            .unwrap();
    for (payload, point) in compiled.payloads.iter().zip(&points) {
        let sva = placement.functions[&point.function].sva.unwrap();
        assert!(payload.code.iter().any(|l| l.starts_with("v_readlane_b32") && l.contains(&format!("v{sva}, "))));
        assert!(payload.uses_sva());
    }
}
