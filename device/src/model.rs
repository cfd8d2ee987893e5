//! What the emulated GPU is: one node modelled on a real board of each
//! target (the properties the kernel driver reports for it), scaled where
//! the emulator would only be slower for it.

use std::fmt;

use crate::topology::Host;

/// `HSA_CAP_SRAM_EDCSUPPORTED`: memory with error correction (ROCr's agent
/// is then `sramecc+`).
pub const CAPABILITY_SRAM_ECC: u32 = 0x0400_0000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Gfx90a,
    Gfx908,
    Gfx942,
    Gfx950,
}

impl Target {
    /// Every target, as `gpuinstr-run --target` names them.
    pub const ALL: [Target; 4] = [Target::Gfx90a, Target::Gfx908, Target::Gfx942, Target::Gfx950];

    pub fn parse(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Target::Gfx90a => "gfx90a",
            Target::Gfx908 => "gfx908",
            Target::Gfx942 => "gfx942",
            Target::Gfx950 => "gfx950",
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The GPU node's properties, as the kernel driver reports them in sysfs.
#[derive(Clone, Debug)]
pub struct Model {
    pub target: Target,
    /// PCI device id: the thunk names the node from it (Aldebaran, Arcturus).
    pub device_id: u32,
    /// `gfx_target_version`: major * 10000 + minor * 100 + stepping.
    pub gfx_target_version: u32,
    /// Shader arrays over all XCCs (`array_count`) and compute units per
    /// array (`cu_per_simd_array`, the most any array has).
    pub shader_engines: u32,
    pub compute_units_per_engine: u32,
    /// Compute units the board has fewer than arrays x units per array
    /// (MI300X: 38 of 40 per XCC).
    pub harvested_compute_units: u32,
    /// Accelerator complex dies (`num_xcc`): 8 on an MI300X.
    pub xccs: u32,
    /// Extra `capability` bits (SRAM ECC, [`Model::with_sramecc`]).
    pub capability: u32,
    /// L1 per compute unit and L2 per XCC, in KiB, and the cache line.
    pub l1_kib: u32,
    pub l2_kib: u32,
    pub cache_line: u32,
    pub simds_per_compute_unit: u32,
    pub max_waves_per_simd: u32,
    pub lds_kib: u32,
    /// Scratch slots per compute unit ROCr sizes scratch for.
    pub scratch_slots_per_compute_unit: u32,
    pub max_engine_clock_mhz: u32,
    pub memory_clock_mhz: u32,
    /// Device memory ("VRAM"): host memory of the process, committed as
    /// touched; at most what the host can back ([`Model::backed_by`]).
    pub memory_bytes: u64,
    /// What every buffer backed by host memory (device memory and the
    /// system memory the runtime allocates through the driver) may hold
    /// together before an allocation is refused.
    pub backable_bytes: u64,
    /// Firmware versions ROCr checks features against (MEC, SDMA).
    pub mec_firmware: u32,
    /// The PCI revision: with the device id, it names the board in
    /// libdrm's `amdgpu.ids` (MI210 is 740F rev 02, MI100 738C rev 01).
    pub pci_revision: u32,
}

impl Model {
    /// An MI210 (gfx90a, Aldebaran), an MI100 (gfx908, Arcturus), an MI300X
    /// (gfx942) or an MI355X (gfx950), the last two with eight XCCs in one
    /// partition, with their compute unit counts and memory (16 GiB, 16
    /// GiB, 192 GiB, 288 GiB; what the host can back is [`Model::backed_by`]).
    pub fn new(target: Target) -> Model {
        let common = Model {
            target,
            device_id: 0,
            gfx_target_version: 0,
            shader_engines: 8,
            compute_units_per_engine: 0,
            harvested_compute_units: 0,
            xccs: 1,
            // Instinct boards run with ECC on unless their owner turns it
            // off: ROCr's agent is `sramecc+`, and code built for
            // `sramecc+` (the boards' default) loads.
            capability: CAPABILITY_SRAM_ECC,
            l1_kib: 16,
            l2_kib: 8192,
            cache_line: 64,
            simds_per_compute_unit: 4,
            max_waves_per_simd: 8,
            lds_kib: 64,
            scratch_slots_per_compute_unit: 32,
            max_engine_clock_mhz: 1700,
            memory_clock_mhz: 1600,
            memory_bytes: 16 << 30,
            backable_bytes: u64::MAX,
            mec_firmware: 78,
            pci_revision: 0,
        };
        match target {
            Target::Gfx90a => Model {
                device_id: 0x740f,
                pci_revision: 2,
                gfx_target_version: 90010,
                compute_units_per_engine: 13,
                ..common
            },
            Target::Gfx942 => Model {
                device_id: 0x74a1,
                gfx_target_version: 90402,
                // 4 shader arrays of up to 10 compute units per XCC, 38 active.
                shader_engines: 32,
                compute_units_per_engine: 10,
                harvested_compute_units: 16,
                xccs: 8,
                max_engine_clock_mhz: 2100,
                memory_clock_mhz: 1300,
                memory_bytes: 192 << 30,
                l1_kib: 32,
                l2_kib: 4096,
                cache_line: 128,
                ..common
            },
            Target::Gfx950 => Model {
                device_id: 0x75a3,
                gfx_target_version: 90500,
                // 4 shader arrays of 8 compute units per XCC, all active.
                shader_engines: 32,
                compute_units_per_engine: 8,
                xccs: 8,
                max_engine_clock_mhz: 2400,
                memory_clock_mhz: 1300,
                memory_bytes: 288 << 30,
                lds_kib: 160,
                l1_kib: 32,
                l2_kib: 4096,
                cache_line: 128,
                ..common
            },
            Target::Gfx908 => Model {
                device_id: 0x738c,
                pci_revision: 1,
                gfx_target_version: 90008,
                compute_units_per_engine: 15,
                max_waves_per_simd: 10,
                max_engine_clock_mhz: 1502,
                memory_clock_mhz: 1200,
                ..common
            },
        }
    }

    /// The model as `host` can back it. Device memory is the host's, and
    /// programs keep host copies of their device data, so a model reports
    /// at most half of the host memory available when it starts (or
    /// `requested`, if less), and every host-backed buffer together stays
    /// within that available memory less a reserve for the program's own:
    /// an allocation past either is refused (`hipErrorOutOfMemory`), never
    /// left to the kernel's OOM killer.
    pub fn backed_by(self, host: &Host, requested: Option<u64>) -> Model {
        let reserve = (host.available_bytes / 8).max(1 << 30);
        let backable = host.available_bytes.saturating_sub(reserve);
        let half = host.available_bytes / 2;
        let memory = self.memory_bytes.min(half).min(requested.unwrap_or(u64::MAX));
        // Whole megabytes, as a board reports.
        let memory = memory & !((1 << 20) - 1);
        Model { memory_bytes: memory, backable_bytes: backable.max(memory), ..self }
    }

    /// The model with ECC on (`sramecc+`, every board's default) or off
    /// (`GPUINSTR_DEVICE_SRAMECC=off`, `gpuinstr-run --sramecc off`).
    pub fn with_sramecc(self, on: bool) -> Model {
        let capability =
            if on { self.capability | CAPABILITY_SRAM_ECC } else { self.capability & !CAPABILITY_SRAM_ECC };
        Model { capability, ..self }
    }

    pub fn compute_units(&self) -> u32 {
        self.shader_engines * self.compute_units_per_engine - self.harvested_compute_units
    }

    pub fn simds(&self) -> u32 {
        self.compute_units() * self.simds_per_compute_unit
    }
}

pub use crate::sizes::parse_bytes;

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn host(available: u64) -> Host {
        Host { cpu_count: 2, memory_bytes: 24 * GIB, available_bytes: available }
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(parse_bytes("4G"), Some(4 * GIB));
        assert_eq!(parse_bytes("512M"), Some(512 << 20));
        assert_eq!(parse_bytes("64k"), Some(64 << 10));
        assert_eq!(parse_bytes("4096"), Some(4096));
        assert_eq!(parse_bytes("lots"), None);
        assert_eq!(parse_bytes(""), None);
        assert_eq!(parse_bytes("99999999999G"), None);
    }

    #[test]
    fn a_model_reports_only_what_the_host_can_back() {
        // 22 GiB available: half of it, below the MI210's 16 GiB.
        let model = Model::new(Target::Gfx90a).backed_by(&host(22 * GIB), None);
        assert_eq!(model.memory_bytes, 11 * GIB);
        assert_eq!(model.backable_bytes, 22 * GIB - (22 * GIB / 8));
        // An MI300X: 304 compute units over 8 XCCs, half of a large host.
        let mi300x = Model::new(Target::Gfx942);
        assert_eq!((mi300x.compute_units(), mi300x.xccs), (304, 8));
        assert_eq!(mi300x.clone().backed_by(&host(256 * GIB), None).memory_bytes, 128 * GIB);
        assert_eq!(Target::parse("gfx942"), Some(Target::Gfx942));
        // A large host: the board's own 16 GiB.
        assert_eq!(Model::new(Target::Gfx908).backed_by(&host(256 * GIB), None).memory_bytes, 16 * GIB);
        // Asked for less: that; asked for more than the host backs: what it backs.
        assert_eq!(Model::new(Target::Gfx90a).backed_by(&host(22 * GIB), Some(GIB)).memory_bytes, GIB);
        assert_eq!(Model::new(Target::Gfx90a).backed_by(&host(22 * GIB), Some(64 * GIB)).memory_bytes, 11 * GIB);
        // A small host keeps a gigabyte for the program.
        let small = Model::new(Target::Gfx90a).backed_by(&host(2 * GIB), None);
        assert_eq!((small.memory_bytes, small.backable_bytes), (GIB, GIB));
    }
}
