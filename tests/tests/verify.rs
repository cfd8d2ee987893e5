//! `gpuinstr-link verify` on broken instrumentation: each way an inserted
//! region, a branch, an original instruction or a descriptor can go wrong is
//! made by hand in a correct output, and the checker must name it; and the
//! waits payloads need for the application's loads in flight.

use gpuinstr::instrument::{instrument_code_object, InstrumentOptions, PayloadWaits};
use gpuinstr::plan::Plan;
use gpuinstr::stages::lift::{lift, Flow};
use gpuinstr::stages::liveness::pending::{exports_anywhere, pending_before};
use gpuinstr::stages::liveness::{analyze, RegisterFile};
use gpuinstr::stages::load::{self, instrumented, CodeObject};
use gpuinstr::verify::{site_table, verify, verify_in_groups, Site};
use gpuinstr_intrinsics::Registry;
use gpuinstr_tests::*;

/// control_flow for gfx90a with the instruction counter on every instruction.
fn instrumented() -> (CodeObject, Vec<u8>) {
    let dir = scratch();
    let tool = dir.path().join("counter.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &example("instruction-counter"), "-O3", &tool));
    let tool = load::load(&tool).unwrap().code_objects.remove(0);
    let plan = Plan::load(&repo().join("hook-sdk/examples/instruction-counter/plan.toml")).unwrap();
    let app = load::load_for_target(&test_kernels("control_flow"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let (bytes, _) =
        instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &InstrumentOptions::default()).unwrap();
    (app, bytes)
}

/// File offset of an address in a loaded section.
fn file_offset(code_object: &CodeObject, address: u64) -> usize {
    let section = code_object.sections.iter().find(|s| s.loadable && s.contains(address)).expect("a loaded address");
    (section.offset + (address - section.address)) as usize
}

/// What `verify` finds, checked the same with each kernel lifted alone (as
/// a large code object is checked, a group of kernels at a time).
fn findings(app: &CodeObject, bytes: Vec<u8>) -> Vec<String> {
    let output = CodeObject::parse(bytes, Vec::new()).unwrap();
    let report = verify(app, &output).unwrap();
    let grouped = verify_in_groups(app, &output, 1).unwrap();
    assert_eq!(grouped.render_text(), report.render_text(), "checked a kernel at a time");
    report.findings.iter().map(|f| format!("{} at {:#x}: {}", f.function, f.address, f.problem)).collect()
}

const S_NOP_4: [u8; 4] = 0xbf80_0004u32.to_le_bytes();

/// The function of the original a site's instruction is in, and the
/// instruction's position there.
fn site_position(original: &gpuinstr::stages::lift::LiftedCodeObject<'_>, site: &Site) -> Option<(usize, usize)> {
    let index = original.functions.iter().position(|f| f.address <= site.original && site.original < f.end())?;
    let position = original.functions[index].instructions().position(|i| i.address == site.original)?;
    Some((index, position))
}

#[test]
fn verify_names_each_kind_of_breakage() {
    let (app, bytes) = instrumented();
    // Kernels alone: `findings` checks them a kernel at a time too.
    let groups = gpuinstr::stages::lift::kernel_groups(&app, 1).expect("kernels alone, in groups");
    assert!(groups.len() > 1, "{groups:?}");
    let output = CodeObject::parse(bytes.clone(), Vec::new()).unwrap();
    assert!(verify(&app, &output).unwrap().ok(), "the unbroken output verifies");
    assert!(findings(&app, bytes.clone()).is_empty());
    let sites: Vec<Site> = site_table(&output).unwrap();
    assert!(sites.len() > 50, "{} sites", sites.len());
    let original = lift(&app).unwrap();
    let liveness = analyze(&original).unwrap();

    // 1. A region that overwrites a live SGPR: its leading `s_nop 4` becomes
    // `s_mov_b32 sN, 0`, at a site inside a kernel (not its entry).
    let (site, sgpr) = sites
        .iter()
        .find_map(|site| {
            let (index, position) = site_position(&original, site)?;
            let function = &original.functions[index];
            if position == 0 {
                return None;
            }
            // Not one a load is still writing (that would be a second finding).
            let exports = exports_anywhere(&original.functions, &original.isa);
            let pending = &pending_before(function, &original.isa, &liveness.functions[index], exports)[position];
            let live = liveness.functions[index].live_in[position]
                .in_file(RegisterFile::Sgpr)
                .difference(&pending.lgkmcnt.units())
                .difference(&pending.vmcnt.units());
            let first = live.iter().next().map(|unit| unit.index());
            first.map(|index| (*site, index))
        })
        .expect("a site with a live SGPR");
    let mut broken = bytes.clone();
    let at = file_offset(&output, site.begin);
    assert_eq!(broken[at..at + 4], S_NOP_4, "regions start with s_nop 4");
    broken[at..at + 4].copy_from_slice(&(0xbe80_0080u32 | (u32::from(sgpr) << 16)).to_le_bytes());
    let found = findings(&app, broken);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains(&format!("s{sgpr} is live here but the code leaves it changed"))
            && found[0].contains("s_mov_b32"),
        "{found:#?}"
    );

    // 2. A branch of the application moved by one dword: it now lands inside
    // the region before its target, skipping the region's start.
    let instrumented = lift(&output).unwrap();
    let in_region = |address: u64| sites.iter().any(|s| s.begin <= address && address < s.end);
    let branch = instrumented
        .functions
        .iter()
        .flat_map(|f| f.instructions())
        .find(|i| matches!(i.flow, Flow::ConditionalBranch { .. }) && !in_region(i.address))
        .expect("an application branch");
    let mut broken = bytes.clone();
    let at = file_offset(&output, branch.address);
    let offset = i16::from_le_bytes([broken[at], broken[at + 1]]) + 1;
    broken[at..at + 2].copy_from_slice(&offset.to_le_bytes());
    let found = findings(&app, broken);
    assert!(found.len() == 1 && found[0].contains("not on the original's target"), "{found:#?}");

    // 3. An original instruction replaced.
    let victim = instrumented
        .functions
        .iter()
        .flat_map(|f| f.instructions())
        .find(|i| !in_region(i.address) && i.size() == 4 && i.name(&instrumented.isa).starts_with("V_"))
        .expect("a 4-byte vector instruction of the application");
    let mut broken = bytes.clone();
    let at = file_offset(&output, victim.address);
    broken[at..at + 4].copy_from_slice(&0xbf80_0000u32.to_le_bytes());
    let found = findings(&app, broken);
    assert!(found.len() == 1 && found[0].contains("expected the original instruction"), "{found:#?}");
    assert!(found[0].contains("found `s_nop 0`"), "{found:#?}");

    // 4. A descriptor that allocates fewer VGPRs than the code uses.
    let kernel = &output.kernels[0];
    let descriptor = output.symbols.iter().find(|s| s.name == format!("{}.kd", kernel.name())).expect("kd symbol");
    let mut broken = bytes.clone();
    let at = file_offset(&output, descriptor.value) + 48; // compute_pgm_rsrc1
    broken[at] &= !0x3f; // GRANULATED_WORKITEM_VGPR_COUNT = 0: 8 VGPRs
    let found = findings(&app, broken);
    assert!(
        found.iter().any(|f| f.starts_with(kernel.name()) && f.contains("outside what the descriptor allocates")),
        "{found:#?}"
    );

    // 5. No sites in the table (its header and function addresses kept):
    // the inserted code is unexplained.
    let table = output.sections.iter().find(|s| s.name == ".gpuinstr.sites").expect("a site table");
    let start = table.offset as usize;
    let header = &bytes[start..start + 16];
    assert_eq!(u64::from_le_bytes(header[..8].try_into().unwrap()), instrumented::SITES_BY_FUNCTION);
    let functions = u64::from_le_bytes(header[8..].try_into().unwrap()) as usize;
    let mut broken = bytes.clone();
    broken[start + 16 + 8 * functions..start + table.size as usize].fill(0);
    let found = findings(&app, broken);
    assert!(found.iter().any(|f| f.contains("expected the original instruction")), "{found:#?}");

    // 6. A table that no longer adds up (its function count cleared): an
    // error naming the table, not sites read from the wrong bytes.
    let mut broken = bytes;
    broken[start + 8..start + 16].fill(0);
    let output = CodeObject::parse(broken, Vec::new()).unwrap();
    let error = verify(&app, &output).unwrap_err().to_string();
    assert!(error.contains(".gpuinstr.sites is malformed"), "{error}");
}

/// Regions with the same code are interpreted once and checked each
/// against its own live registers: with every region (kernel entries aside)
/// made to overwrite one SGPR, exactly those where it is live are named.
#[test]
fn alike_regions_are_each_checked_against_their_own_live_registers() {
    let (app, bytes) = instrumented();
    let output = CodeObject::parse(bytes.clone(), Vec::new()).unwrap();
    let sites: Vec<Site> = site_table(&output).unwrap();
    let original = lift(&app).unwrap();
    let liveness = analyze(&original).unwrap();
    // (site, whether the SGPR is live there), for sites past an entry.
    let live_at = |sgpr: u16| -> Vec<(Site, bool)> {
        sites
            .iter()
            .filter_map(|site| {
                let (index, position) = site_position(&original, site)?;
                let live = liveness.functions[index].live_in[position];
                (position > 0).then(|| (*site, live.contains(gpuinstr::stages::liveness::Unit::sgpr(sgpr))))
            })
            .collect()
    };
    // An SGPR live at some of those sites and dead at others.
    let (sgpr, regions) = (0..100u16)
        .map(|sgpr| (sgpr, live_at(sgpr)))
        .find(|(_, regions)| {
            let live = regions.iter().filter(|(_, live)| *live).count();
            live > 1 && live + 1 < regions.len()
        })
        .expect("an SGPR live at some sites only");
    let mut broken = bytes;
    for (site, _) in &regions {
        let at = file_offset(&output, site.begin);
        assert_eq!(broken[at..at + 4], S_NOP_4, "regions start with s_nop 4");
        broken[at..at + 4].copy_from_slice(&(0xbe80_0080u32 | (u32::from(sgpr) << 16)).to_le_bytes());
    }
    let changed = format!("s{sgpr} is live here but the code leaves it changed");
    let found = findings(&app, broken);
    let named: Vec<&String> = found.iter().filter(|f| f.contains(&changed)).collect();
    for (site, live) in &regions {
        let at = format!(" at {:#x}: ", site.begin);
        let is_named = named.iter().any(|f| f.contains(&at));
        assert_eq!(is_named, *live, "the region at {:#x} (s{sgpr} live: {live}): {found:#?}", site.begin);
    }
    assert!(named.iter().all(|f| f.contains("s_mov_b32")), "each names its culprit: {named:#?}");
}

/// A kernel is held to the registers it and its callees name, not to what
/// the callee's liveness summary carries from another kernel's call site
/// (rocSPARSE 6.4's segmented sort kernels share a helper this way: every
/// original was reported as using VGPRs its descriptor does not allocate).
#[test]
fn kernels_sharing_a_callee_are_held_to_their_own_registers() {
    let object = hip_object_with("regressions/shared_callee.hip", &[]);
    let app = load::load_for_target(&object, Some("gfx90a")).unwrap().code_objects.remove(0);
    let lifted = lift(&app).unwrap();
    assert!(lifted.functions.iter().any(|f| !f.calls.is_empty()), "the kernels call the helper");
    let report = verify(&app, &app).unwrap();
    let problems: Vec<String> = report.findings.iter().map(|f| format!("{}: {}", f.function, f.problem)).collect();
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(report.kernels, 2);
}

/// Payloads wait only for the loads whose registers they touch. Between a
/// global load and its `s_waitcnt` (tests/inputs/kernels/load_in_flight.hip)
/// a hook reading the loaded v0 waits for vmcnt first; a counter there, and
/// the same hook after the application's own wait, wait for nothing. The
/// output verifies; with that one wait gone, verify names v0.
#[test]
fn payloads_wait_only_for_the_loads_whose_registers_they_touch() {
    let dir = scratch();
    let tool_path = dir.path().join("payload-hooks.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &input("tools/payload-hooks.hip"), "-O3", &tool_path));
    let tool = load::load(&tool_path).unwrap().code_objects.remove(0);
    let app = load::load_for_target(&test_kernels("load_in_flight"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let plan = Plan::parse(
        r#"
[[insert]]
hook = "recordValue"
where = "opcode:V_ADD_U32_e32"
args = [{ reg = "v0" }]

[[insert]]
hook = "countScalar"
where = "opcode:V_SUB_U32_e32"
"#,
        "waits.toml",
    )
    .unwrap();
    let (bytes, report) =
        instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &InstrumentOptions::default()).unwrap();
    // Three v_adds (one while the load lands, two after the wait) and the v_sub.
    assert_eq!(report.points, 4);
    assert_eq!(
        report.waits,
        PayloadWaits { none: 3, vmcnt: 1, lgkmcnt: 0, vmcnt_and_lgkmcnt: 0, full_drains: 0 },
        "{}",
        report.render_text()
    );
    let output = CodeObject::parse(bytes.clone(), Vec::new()).unwrap();
    assert!(verify(&app, &output).unwrap().ok(), "the output verifies");

    // The region before the first v_add: `s_nop 4`, then its wait.
    let original = lift(&app).unwrap();
    let first_add = original.functions[0]
        .instructions()
        .find(|i| i.name(&original.isa) == "V_ADD_U32_e32")
        .expect("a v_add")
        .address;
    let site = site_table(&output).unwrap().into_iter().find(|s| s.original == first_add).expect("its region");
    let at = file_offset(&output, site.begin) + 4;
    let word = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    assert_eq!(word >> 16, 0xbf8c, "the region's second instruction is s_waitcnt: {word:#x}");
    let mut broken = bytes;
    broken[at..at + 4].copy_from_slice(&0xbf80_0000u32.to_le_bytes());
    let found = findings(&app, broken);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("touches v0, which a load in flight may still write"), "{found:#?}");
}

/// A hook with a loop (the memory tracer's ring: its wavefront waits while
/// the ring is full) waits for its loads inside the loop, reached again by a branch back:
/// what is in flight follows the region's branches, not its address order.
/// The output verifies; the region's waits taken out, its loads are still
/// in flight at its end, through the loop, and `verify` says so.
#[test]
fn a_hooks_loop_waits_for_its_loads_where_its_branch_back_lands() {
    let dir = scratch();
    let tool = dir.path().join("memory-tracer.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &example("memory-tracer"), "-O3", &tool));
    let tool = load::load(&tool).unwrap().code_objects.remove(0);
    let plan = Plan::load(&repo().join("hook-sdk/examples/memory-tracer/plan.toml")).unwrap();
    let app =
        load::load_for_target(&test_kernels("no_register_anywhere"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let (bytes, _) =
        instrument_code_object(&tool, &app, &plan, &Registry::with_builtins(), &InstrumentOptions::default()).unwrap();
    let output = CodeObject::parse(bytes.clone(), Vec::new()).unwrap();
    let verified = verify(&app, &output).unwrap();
    assert!(verified.ok(), "{}", verified.render_text());

    let sites: Vec<Site> = site_table(&output).unwrap();
    let instrumented = lift(&output).unwrap();
    let instructions: Vec<_> = instrumented.functions.iter().flat_map(|f| f.instructions()).collect();
    // A region with a branch back (a hook's loop), and every `s_waitcnt`
    // in it taken out: its loads are then in flight at its end, across the
    // loop, and some write registers live after it (those it restores).
    let looping = sites
        .iter()
        .find(|s| {
            instructions.iter().filter(|i| s.begin <= i.address && i.address < s.end).any(|i| {
                matches!(i.flow, Flow::Branch { target } | Flow::ConditionalBranch { target } if target < i.address)
            })
        })
        .expect("a region with a hook's loop");
    let waits: Vec<u64> = instructions
        .iter()
        .filter(|i| looping.begin <= i.address && i.address < looping.end && i.name(&instrumented.isa) == "S_WAITCNT")
        .map(|i| i.address)
        .collect();
    assert!(!waits.is_empty(), "the region waits for its loads");
    let mut broken = bytes;
    for address in waits {
        let at = file_offset(&output, address);
        broken[at..at + 4].copy_from_slice(&0xbf80_0000u32.to_le_bytes());
    }
    let found = findings(&app, broken);
    assert!(found.iter().any(|f| f.contains("the region ends with a load still writing")), "{found:#?}");
}
