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

/// ROCm SMI's discovery (tests/inputs/device/smi_discovery.c, the libc
/// calls librocm_smi64 makes: `opendir`/`readdir` of /sys/class/drm, `stat`
/// and `fopen` of the card's vendor, `readlink` of the card for its PCI
/// slot) finds the emulated board at the slot of its KFD node, so that
/// clients asking ROCm SMI which board a HIP device is (hipBLASLt's
/// benchmark) find it.
#[test]
fn rocm_smis_discovery_finds_the_board_at_its_kfd_nodes_slot() {
    let directory = tempfile::tempdir().unwrap();
    let program = directory.path().join("smi_discovery");
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/inputs/device/smi_discovery.c");
    let built = std::process::Command::new("cc").arg(&source).arg("-o").arg(&program).output().unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let output = gpuinstr_run().args(["--target", "gfx90a", "--"]).arg(&program).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let expected = [
        "card0: vendor 0x1002, slot 0000:03:00.0 (bdf 768)",
        "card0: KFD node 1",
        "renderD128: character device 226:128",
    ];
    common::assert_lines(&stdout, &expected, "ROCm SMI's discovery");
    assert!(!stdout.contains("not a link") && !stdout.contains("failed"), "{stdout}");
}

/// `program` with `arguments` under `gpuinstr-run` on the emulated MI210:
/// how it exited, its standard output and error.
fn on_the_emulated_mi210(program: &str, arguments: &[&str]) -> (std::process::Output, String, String) {
    let output =
        gpuinstr_run().args(["--target", "gfx90a", "--", program]).args(arguments).output().expect("gpuinstr-run runs");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    (output, stdout, stderr)
}

/// `rocm-smi` (Debian 12's ROCm SMI 5.2 and sid's 6.4, through their library) lists the
/// emulated MI210: its id, PCI slot, clocks and device memory (none in use
/// in rocm-smi's own process), and says that what an emulated board lacks
/// (temperature, power, fan, activity) is not available or supported.
#[test]
fn rocm_smi_lists_the_emulated_board() {
    // rocm-smi exits non-zero where it printed that something is not
    // supported (the concise table does): the run must not fail otherwise.
    let rocm_smi = |arguments: &[&str], unsupported: bool| {
        let (output, stdout, stderr) = on_the_emulated_mi210("rocm-smi", arguments);
        // ROCm SMI 6.4 dlopens `libdrm_amdgpu.so`, a name only libdrm's -dev
        // package installs, once it finds the card's render node; without
        // it, it says so and reads the rest from sysfs, as on a machine.
        let failed_otherwise = stderr.lines().any(|l| {
            !l.contains("RSMI_STATUS_NOT_SUPPORTED") && !l.contains("Fail to open libdrm_amdgpu.so") && !l.is_empty()
        });
        assert!(
            (output.status.success() || unsupported) && !failed_otherwise,
            "rocm-smi {arguments:?} failed ({}): {stdout}\n{stderr}",
            output.status
        );
        stdout
    };
    let details = rocm_smi(&["--showid", "--showbus", "--showvbios", "--showmeminfo", "vram"], false);
    // (ROCm SMI 5.2 says `GPU ID`, 6.4 `Device ID`.)
    let id = details.lines().any(|l| l.starts_with("GPU[0]") && l.contains(" ID:") && l.trim_end().ends_with("0x740f"));
    assert!(id, "no device id 0x740f in\n{details}");
    let expected = [
        "GPU[0] : PCI Bus: 0000:03:00.0",
        "GPU[0] : VBIOS version: gpuinstr-emulated",
        "GPU[0] : VRAM Total Used Memory (B): 0",
    ];
    common::assert_lines(&details, &expected, "rocm-smi --showid ...");
    assert!(details.contains("VRAM Total Memory (B): "), "{details}");
    let concise = rocm_smi(&[], true);
    let row = concise.lines().find(|l| l.starts_with("0 ")).unwrap_or_else(|| panic!("no GPU 0 row:\n{concise}"));
    let row: Vec<&str> = row.split_whitespace().collect();
    // 5.2: GPU Temp AvgPwr SCLK MCLK Fan Perf PwrCap VRAM% GPU%; 6.4 adds
    // the node, ids and partitions. Either way: no temperature, the
    // clocks, and no device memory in use (the next to last column).
    assert!(row.iter().filter(|c| c.starts_with("N/A")).count() >= 2, "{concise}");
    assert!(row.contains(&"1700Mhz") && row.contains(&"1600Mhz"), "{concise}");
    assert_eq!(row[row.len() - 2], "0%", "VRAM in use: {concise}");
}

/// amd-smi (sid's 10.1, the SMI ROCm 7's tools read) lists the emulated
/// MI210 and names it from what it reads: the card's render node (found by
/// listing `/sys/class/drm/card0/../`), libdrm's `amdgpu.ids` through the
/// `AMDGPU_INFO` ioctls, the KFD node's compute units and target, the
/// driver's name and version, and HBM of 4,096 bits. Environments without
/// the package (Debian 12 has none; trixie's is not installed) skip it.
#[test]
fn amd_smi_lists_and_names_the_emulated_board() {
    let environment = std::env::var("GPUINSTR_ENV").unwrap_or_else(|_| "bookworm".into());
    if !matches!(environment.as_str(), "sid" | "experimental") {
        eprintln!(
            "amd_smi_lists_and_names_the_emulated_board: {environment} has no amd-smi; sid's environment runs it"
        );
        return;
    }
    let amd_smi = |arguments: &[&str]| {
        let (output, stdout, _) = on_the_emulated_mi210("amd-smi", arguments);
        assert!(
            output.status.success(),
            "amd-smi {arguments:?} failed: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    };
    let list = amd_smi(&["list"]);
    common::assert_lines(&list, &["GPU: 0", "BDF: 0000:03:00.0", "NODE_ID: 1"], "amd-smi list");
    let details = amd_smi(&["static", "--asic", "--driver", "--vram", "--board"]);
    let expected = [
        "MARKET_NAME: AMD Instinct MI210",
        "VENDOR_ID: 0x1002",
        "DEVICE_ID: 0x740f",
        "REV_ID: 0x02",
        "NUM_COMPUTE_UNITS: 104",
        "TARGET_GRAPHICS_VERSION: gfx90a",
        "NAME: amdgpu",
        "VERSION: gpuinstr-emulated",
        "TYPE: HBM",
        "BIT_WIDTH: 4096",
    ];
    common::assert_lines(&details, &expected, "amd-smi static");
}
