//! The KFD topology in sysfs: node 0 is the host's CPUs and memory, node 1
//! the emulated GPU, linked both ways over PCIe. The thunk reads
//! `system_properties`, lists `nodes/`, and parses each node's
//! `properties` (`name value` lines), its memory banks, caches and links;
//! ROCr builds its agents and memory pools from what it finds.

use std::fmt::Write;

use crate::files::{DeviceNode, VirtualFiles, TOPOLOGY_ROOTS};
use crate::model::Model;

/// The GPU's render node minor (`/dev/dri/renderD128`).
pub const RENDER_MINOR: u32 = 128;
/// The GPU's PCI location (`bus << 8 | device << 3 | function`: 03:00.0,
/// domain 0), which HIP reports as its PCI bus and ROCm SMI finds the DRM
/// card by ([`crate::drm`]).
pub const LOCATION_ID: u32 = 0x300;
/// The GPU's id in the KFD interface (any non-zero value; real ones are hashes).
pub const GPU_ID: u32 = 0x9a1e;
/// Device memory's bus width in bits, as KFD's memory bank and the DRM
/// driver report it (the same for every modelled board).
pub const MEMORY_BUS_BITS: u32 = 4096;

/// KFD heap types (`HSA_HEAPTYPE_*`).
const HEAP_SYSTEM: u32 = 0;
const HEAP_FRAME_BUFFER_PUBLIC: u32 = 1;
/// `HSA_IOLINKTYPE_PCIEXPRESS`.
const IO_LINK_PCIE: u32 = 2;
/// `HSA_CAPABILITY`: DoorbellType 2 (64-bit doorbells, GFX9).
const CAPABILITY_DOORBELL_TYPE_2: u32 = 2 << 12;
/// `HSA_CAPABILITY.SVMAPISupported`: the driver takes AMDKFD_IOC_SVM (as
/// every distribution kernel's driver does on GFX9 and newer), so HIP's
/// managed memory lives in SVM ranges at host addresses.
const CAPABILITY_SVM_API: u32 = 0x0800_0000;

/// The GPU's first SIMD id (processor ids of caches are relative to it).
const SIMD_ID_BASE: u32 = 0x8000_1000;
/// `HSA_CACHE_TYPE_DATA | HSA_CACHE_TYPE_HSACU`.
const CACHE_DATA_GPU: u32 = 1 | 8;

/// What the front end knows of the host.
#[derive(Clone, Debug)]
pub struct Host {
    pub cpu_count: u32,
    /// Physical memory.
    pub memory_bytes: u64,
    /// Memory available for new allocations when the device starts
    /// (`MemAvailable`).
    pub available_bytes: u64,
}

impl Host {
    /// `MemAvailable` of a `/proc/meminfo` text, in bytes.
    pub fn available_in_meminfo(meminfo: &str) -> Option<u64> {
        let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    }
}

/// Adds the topology, `/dev/kfd`, the render node and the module list to `files`.
pub fn add_files(files: &mut VirtualFiles, model: &Model, host: &Host) {
    for root in TOPOLOGY_ROOTS {
        files.add_file(&format!("{root}/generation_id"), "1\n");
        files.add_file(&format!("{root}/system_properties"), "platform_oem 0\nplatform_id 0\nplatform_rev 0\n");
        let cpu = format!("{root}/nodes/0");
        files.add_file(&format!("{cpu}/gpu_id"), "0\n");
        files.add_file(&format!("{cpu}/name"), "\n");
        files.add_file(&format!("{cpu}/properties"), cpu_properties(host));
        files.add_file(&format!("{cpu}/mem_banks/0/properties"), memory_bank(HEAP_SYSTEM, host.memory_bytes, 64, 0));
        files.add_directory(&format!("{cpu}/caches"));
        files.add_file(&format!("{cpu}/io_links/0/properties"), io_link(0, 1));
        let gpu = format!("{root}/nodes/1");
        files.add_file(&format!("{gpu}/gpu_id"), format!("{GPU_ID}\n"));
        files.add_file(&format!("{gpu}/name"), format!("{}\n", model.target));
        files.add_file(&format!("{gpu}/properties"), gpu_properties(model));
        files.add_file(
            &format!("{gpu}/mem_banks/0/properties"),
            memory_bank(HEAP_FRAME_BUFFER_PUBLIC, model.memory_bytes, MEMORY_BUS_BITS, model.memory_clock_mhz),
        );
        for (index, cache) in gpu_caches(model).iter().enumerate() {
            files.add_file(&format!("{gpu}/caches/{index}/properties"), cache.as_str());
        }
        files.add_file(&format!("{gpu}/io_links/0/properties"), io_link(1, 0));
        files.add_directory(root);
    }
    files.add_device("/dev/kfd", DeviceNode::Kfd);
    files.add_device(&format!("/dev/dri/renderD{RENDER_MINOR}"), DeviceNode::Render { minor: RENDER_MINOR });
    // `rocminfo` runs `lsmod | grep amdgpu` before anything else.
    files.add_file("/proc/modules", "amdgpu 16384 0 - Live 0x0000000000000000\n");
    files.add_file("/sys/module/amdgpu/initstate", "live\n");
    files.add_file("/sys/module/amdgpu/refcnt", "0\n");
    // What amd-smi shows as the driver's version (a DKMS build's file).
    files.add_file("/sys/module/amdgpu/version", "gpuinstr-emulated\n");
    files.add_file("/sys/module/amdgpu/coresize", "16384\n");
    files.add_directory("/sys/module/amdgpu/holders");
    files.add_directory("/sys/module/amdgpu");
    crate::drm::add_files(files, model);
}

fn lines(pairs: &[(&str, u64)]) -> String {
    let mut out = String::new();
    for (name, value) in pairs {
        let _ = writeln!(out, "{name} {value}");
    }
    out
}

fn cpu_properties(host: &Host) -> String {
    lines(&[
        ("cpu_cores_count", host.cpu_count.into()),
        ("simd_count", 0),
        ("mem_banks_count", 1),
        ("caches_count", 0),
        ("io_links_count", 1),
        ("p2p_links_count", 0),
        ("cpu_core_id_base", 0),
        ("simd_id_base", 0),
        ("max_waves_per_simd", 0),
        ("lds_size_in_kb", 0),
        ("gds_size_in_kb", 0),
        ("num_gws", 0),
        ("wave_front_size", 0),
        ("array_count", 0),
        ("simd_arrays_per_engine", 0),
        ("cu_per_simd_array", 0),
        ("simd_per_cu", 0),
        ("max_slots_scratch_cu", 0),
        ("gfx_target_version", 0),
        ("vendor_id", 0),
        ("device_id", 0),
        ("location_id", 0),
        ("domain", 0),
        ("drm_render_minor", 0),
        ("hive_id", 0),
        ("num_sdma_engines", 0),
        ("num_sdma_xgmi_engines", 0),
        ("num_sdma_queues_per_engine", 0),
        ("num_cp_queues", 0),
        ("max_engine_clk_ccompute", 2000),
    ])
}

fn gpu_properties(model: &Model) -> String {
    lines(&[
        ("cpu_cores_count", 0),
        ("simd_count", model.simds().into()),
        ("mem_banks_count", 1),
        ("caches_count", 2),
        ("io_links_count", 1),
        ("p2p_links_count", 0),
        ("cpu_core_id_base", 0),
        ("simd_id_base", SIMD_ID_BASE.into()),
        ("max_waves_per_simd", model.max_waves_per_simd.into()),
        ("lds_size_in_kb", model.lds_kib.into()),
        ("gds_size_in_kb", 0),
        ("num_gws", 0),
        ("wave_front_size", 64),
        ("array_count", model.shader_engines.into()),
        ("simd_arrays_per_engine", 1),
        ("cu_per_simd_array", model.compute_units_per_engine.into()),
        ("simd_per_cu", model.simds_per_compute_unit.into()),
        ("max_slots_scratch_cu", model.scratch_slots_per_compute_unit.into()),
        ("gfx_target_version", model.gfx_target_version.into()),
        ("vendor_id", 0x1002),
        ("device_id", model.device_id.into()),
        ("location_id", LOCATION_ID.into()),
        ("domain", 0),
        ("drm_render_minor", RENDER_MINOR.into()),
        ("hive_id", 0),
        // No SDMA engines: ROCr copies with its blit kernels, which run on
        // the emulator like any other kernel.
        ("num_sdma_engines", 0),
        ("num_sdma_xgmi_engines", 0),
        ("num_sdma_queues_per_engine", 0),
        ("num_cp_queues", 8),
        ("max_engine_clk_fcompute", model.max_engine_clock_mhz.into()),
        ("local_mem_size", 0),
        ("fw_version", model.mec_firmware.into()),
        ("capability", (CAPABILITY_DOORBELL_TYPE_2 | CAPABILITY_SVM_API | model.capability).into()),
        ("debug_prop", 0),
        ("sdma_fw_version", 0),
        ("unique_id", 0x9a1e_0000_0001),
    ]) + &if model.xccs > 1 { format!("num_xcc {}\n", model.xccs) } else { String::new() }
}

/// The L1 of each compute unit and the L2 they share (ROCr requires the
/// GPU's caches; `rocminfo` prints them).
fn gpu_caches(model: &Model) -> [String; 2] {
    let cache = |level: u64, kib: u64, line: u64, siblings: String| {
        let mut text = lines(&[
            ("processor_id_low", SIMD_ID_BASE.into()),
            ("level", level),
            ("size", kib),
            ("cache_line_size", line),
            ("cache_lines_per_tag", 1),
            ("association", 16),
            ("latency", 0),
            ("type", CACHE_DATA_GPU.into()),
        ]);
        let _ = writeln!(text, "sibling_map {siblings}");
        text
    };
    let all = vec!["1"; model.compute_units() as usize].join(",");
    let (l1, l2, line) = (model.l1_kib.into(), model.l2_kib.into(), model.cache_line.into());
    [cache(1, l1, line, "1".into()), cache(2, l2, 128, all)]
}

fn memory_bank(heap_type: u32, bytes: u64, width: u32, clock_mhz: u32) -> String {
    lines(&[
        ("heap_type", heap_type.into()),
        ("size_in_bytes", bytes),
        ("flags", 0),
        ("width", width.into()),
        ("mem_clk_max", clock_mhz.into()),
    ])
}

fn io_link(from: u32, to: u32) -> String {
    lines(&[
        ("type", IO_LINK_PCIE.into()),
        ("version_major", 0),
        ("version_minor", 0),
        ("node_from", from.into()),
        ("node_to", to.into()),
        ("weight", 20),
        ("min_latency", 0),
        ("max_latency", 0),
        ("min_bandwidth", 312),
        ("max_bandwidth", 64000),
        ("recommended_transfer_size", 0),
        ("flags", 1),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::Entry;
    use crate::model::Target;

    #[test]
    fn available_memory_comes_from_meminfo() {
        let meminfo = "MemTotal:       24576000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(Host::available_in_meminfo(meminfo), Some(20_000_000 * 1024));
        assert_eq!(Host::available_in_meminfo("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn the_topology_lists_a_cpu_node_and_the_gpu() {
        let mut files = VirtualFiles::default();
        add_files(
            &mut files,
            &Model::new(Target::Gfx90a),
            &Host { cpu_count: 2, memory_bytes: 1 << 34, available_bytes: 1 << 34 },
        );
        for root in TOPOLOGY_ROOTS {
            assert_eq!(files.get(&format!("{root}/nodes")), Some(&Entry::Directory(vec!["0".into(), "1".into()])));
            assert_eq!(files.get(&format!("{root}/nodes/1/gpu_id")), Some(&Entry::File(b"39454\n".to_vec())));
        }
        let Some(Entry::File(properties)) = files.get("/sys/class/kfd/kfd/topology/nodes/1/properties") else {
            panic!("no properties")
        };
        insta::assert_snapshot!(String::from_utf8_lossy(properties));
        assert_eq!(files.get("/dev/kfd"), Some(&Entry::Device(DeviceNode::Kfd)));
        assert_eq!(files.get("/sys/class"), None, "the host's own");
        // The preload loads the device when a path under these is opened
        // (every path the device answers for).
        for (path, _) in files.paths().filter(|(path, _)| files.get(path).is_some()) {
            assert!(crate::virtual_roots::under_a_virtual_root(path.as_bytes()), "{path}");
        }
        for outside in ["/sys/class", "/dev/null", "/proc/self/maps", "/sys/devices/system/cpu", "kfd"] {
            assert!(!crate::virtual_roots::under_a_virtual_root(outside.as_bytes()), "{outside}");
        }
        assert!(crate::virtual_roots::under_a_virtual_root(b"/sys//class/./kfd/kfd/topology/nodes"));
        assert_eq!(files.get("/sys/devices/virtual/kfd/kfd/topology/nodes/0/caches"), Some(&Entry::Directory(vec![])));
    }
}
