//! The real ROCm user space (Debian 12's rocminfo, ROCr 5.2 and its thunk)
//! sees the emulated GPU.

mod common;

use common::gpuinstr_run;

/// rocminfo on the emulated `target`, with 4 GiB of device memory (by
/// default the board's, within half of what the host has available: it
/// would change with the machine).
fn rocminfo(target: &str) -> String {
    rocminfo_with(target, &[])
}

/// The same with more of gpuinstr-run's options.
fn rocminfo_with(target: &str, options: &[&str]) -> String {
    let output = gpuinstr_run()
        .args(["--target", target, "--device-memory", "4G"])
        .args(options)
        .args(["--", "rocminfo"])
        .output()
        .expect("gpuinstr-run runs");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "rocminfo failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    stdout
}

#[test]
fn rocminfo_lists_the_emulated_gfx90a() {
    let printed = rocminfo("gfx90a");
    let expected = [
        "Name: gfx90a",
        "Marketing Name: AMD Instinct MI210",
        "Vendor Name: AMD",
        "Device Type: GPU",
        "Chip ID: 29711(0x740f)",
        "Compute Unit: 104",
        "SIMDs per CU: 4",
        "Wavefront Size: 64(0x40)",
        "Max Waves Per CU: 32(0x20)",
        "Segment: GLOBAL; FLAGS: COARSE GRAINED",
        "Size: 4194304(0x400000) KB",
        "Segment: GROUP",
        "L2: 8192(0x2000) KB",
        // ECC on, as on the boards.
        "Name: amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-",
        "*** Done ***",
    ];
    common::assert_lines(&printed, &expected, "rocminfo, gfx90a");
    assert!(!printed.contains("ROCk module is NOT loaded"));
}

#[test]
fn rocminfo_lists_the_emulated_gfx908() {
    let expected = [
        "Name: gfx908",
        "Marketing Name: AMD Instinct MI100",
        "Compute Unit: 120",
        "Max Waves Per CU: 40(0x28)",
        "Name: amdgcn-amd-amdhsa--gfx908:sramecc+:xnack-",
    ];
    common::assert_lines(&rocminfo("gfx908"), &expected, "rocminfo, gfx908");
}

/// A board whose owner turned ECC off (`--sramecc off`) is `sramecc-`.
#[test]
fn rocminfo_lists_a_board_with_ecc_off_as_sramecc_minus() {
    for target in ["gfx90a", "gfx908"] {
        let expected = [format!("Name: amdgcn-amd-amdhsa--{target}:sramecc-:xnack-")];
        let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
        common::assert_lines(&rocminfo_with(target, &["--sramecc", "off"]), &expected, target);
    }
}

/// An MI300X: ROCr 6.1 (trixie) and newer list it; Debian 12's ROCr 5.2
/// predates gfx942 and finds no GPU it knows.
#[test]
fn rocminfo_lists_the_emulated_gfx942_where_rocr_knows_it() {
    let output = gpuinstr_run()
        .args(["--target", "gfx942", "--device-memory", "4G", "--", "rocminfo"])
        .output()
        .expect("gpuinstr-run runs");
    let printed = String::from_utf8_lossy(&output.stdout).to_string();
    if gpuinstr::toolchain::LLVM_MAJOR < 17 {
        // ROCr 5.2 lists the CPU alone.
        let all = format!("{printed}{}", String::from_utf8_lossy(&output.stderr));
        assert!(all.contains("Agent creation failed") && !printed.contains("Name: gfx942"), "{all}");
        return;
    }
    assert!(output.status.success(), "rocminfo failed: {printed}\n{}", String::from_utf8_lossy(&output.stderr));
    let expected = [
        "Name: gfx942",
        "Compute Unit: 304",
        "SIMDs per CU: 4",
        "Wavefront Size: 64(0x40)",
        "Size: 4194304(0x400000) KB",
        "Name: amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
        "*** Done ***",
    ];
    common::assert_lines(&printed, &expected, "rocminfo, gfx942");
}

/// An MI355X: ROCr 6.4 (sid) lists it, with its 160 KiB of LDS; older
/// ROCr predates gfx950 and finds no GPU it knows.
#[test]
fn rocminfo_lists_the_emulated_gfx950_where_rocr_knows_it() {
    let output = gpuinstr_run()
        .args(["--target", "gfx950", "--device-memory", "4G", "--", "rocminfo"])
        .output()
        .expect("gpuinstr-run runs");
    let printed = String::from_utf8_lossy(&output.stdout).to_string();
    if gpuinstr::toolchain::LLVM_MAJOR < 21 {
        let all = format!("{printed}{}", String::from_utf8_lossy(&output.stderr));
        assert!(!printed.contains("Name: gfx950"), "{all}");
        return;
    }
    assert!(output.status.success(), "rocminfo failed: {printed}\n{}", String::from_utf8_lossy(&output.stderr));
    let expected = [
        "Name: gfx950",
        "Compute Unit: 256",
        "SIMDs per CU: 4",
        "Wavefront Size: 64(0x40)",
        "Workgroup Max Size: 1024(0x400)",
        "Size: 4194304(0x400000) KB",
        "Size: 160(0xa0) KB",
        "Name: amdgcn-amd-amdhsa--gfx950:sramecc+:xnack-",
        "*** Done ***",
    ];
    common::assert_lines(&printed, &expected, "rocminfo, gfx950");
}

#[test]
fn a_missing_program_is_a_clear_error() {
    let output = gpuinstr_run().args(["--", "/nonexistent/app"]).output().unwrap();
    assert_eq!(output.status.code(), Some(127));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("gpuinstr-run: error: cannot run `/nonexistent/app`"), "{stderr}");
}
