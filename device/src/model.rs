//! What the emulated GPU is: one node modelled on a real board of each
//! target (the properties the kernel driver reports for it), scaled where
//! the emulator would only be slower for it.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Gfx90a,
    Gfx908,
}

impl Target {
    pub fn parse(name: &str) -> Option<Target> {
        match name {
            "gfx90a" => Some(Target::Gfx90a),
            "gfx908" => Some(Target::Gfx908),
            _ => None,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Target::Gfx90a => "gfx90a",
            Target::Gfx908 => "gfx908",
        })
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
    pub shader_engines: u32,
    pub compute_units_per_engine: u32,
    pub simds_per_compute_unit: u32,
    pub max_waves_per_simd: u32,
    pub lds_kib: u32,
    /// Scratch slots per compute unit ROCr sizes scratch for.
    pub scratch_slots_per_compute_unit: u32,
    pub max_engine_clock_mhz: u32,
    pub memory_clock_mhz: u32,
    /// Device memory ("VRAM"): host memory of the process, committed as touched.
    pub memory_bytes: u64,
    /// Firmware versions ROCr checks features against (MEC, SDMA).
    pub mec_firmware: u32,
    /// The PCI revision: with the device id, it names the board in
    /// libdrm's `amdgpu.ids` (MI210 is 740F rev 02, MI100 738C rev 01).
    pub pci_revision: u32,
}

impl Model {
    /// An MI210 (gfx90a, Aldebaran) or an MI100 (gfx908, Arcturus), with
    /// their compute unit counts; 16 GiB of device memory either way.
    pub fn new(target: Target) -> Model {
        let common = Model {
            target,
            device_id: 0,
            gfx_target_version: 0,
            shader_engines: 8,
            compute_units_per_engine: 0,
            simds_per_compute_unit: 4,
            max_waves_per_simd: 8,
            lds_kib: 64,
            scratch_slots_per_compute_unit: 32,
            max_engine_clock_mhz: 1700,
            memory_clock_mhz: 1600,
            memory_bytes: 16 << 30,
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

    pub fn compute_units(&self) -> u32 {
        self.shader_engines * self.compute_units_per_engine
    }

    pub fn simds(&self) -> u32 {
        self.compute_units() * self.simds_per_compute_unit
    }
}
