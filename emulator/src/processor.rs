//! The processors the emulator models and what differs between them: the
//! wave64 GFX9 family, gfx900 (Vega 10) to gfx950 (MI350). Code for another
//! processor is refused rather than run with semantics it does not have.
//! The driver keeps a table of its own (`stages::load::processor`) on
//! purpose: the oracle reads the hardware's facts independently of the
//! instrumenter it checks.

/// What the emulator needs to know of one processor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Processor {
    pub name: &'static str,
    /// Work-item ids packed in v0 (X, Y and Z in 10-bit fields; gfx90a and
    /// gfx940+) instead of one VGPR each.
    pub packed_work_item_ids: bool,
    /// VGPRs per granule of `GRANULATED_WORKITEM_VGPR_COUNT`.
    pub vgpr_granule: u32,
    /// The hardware sets FLAT_SCRATCH to the wave's scratch (gfx940+): no
    /// scratch wave offset SGPR, no flat scratch initialisation.
    pub architected_flat_scratch: bool,
    /// XCCs (accelerator complex dies) the GPU's workgroups are spread
    /// over, one after another (MI300X and MI355X: 8); `HW_REG_XCC_ID`
    /// reads a wave's where there are several.
    pub xccs: u32,
    /// The command processor can load kernel arguments into SGPRs and
    /// enter the kernel past its compatibility prologue (gfx90a, gfx940+:
    /// `KERNARG_PRELOAD_SPEC`), when its firmware does.
    pub preloads_kernel_arguments: bool,
    /// The processor has SRAM ECC (MI50 and later Instinct boards): with
    /// it on, D16 loads zero the half of the register they do not load
    /// (LLVM's `d16PreservesUnusedBits` is false there).
    pub sram_ecc: bool,
}

const GFX908: Processor = Processor {
    name: "gfx908",
    packed_work_item_ids: false,
    vgpr_granule: 4,
    architected_flat_scratch: false,
    xccs: 1,
    preloads_kernel_arguments: false,
    sram_ecc: true,
};
const GFX90A: Processor = Processor {
    name: "gfx90a",
    packed_work_item_ids: true,
    vgpr_granule: 8,
    architected_flat_scratch: false,
    xccs: 1,
    preloads_kernel_arguments: true,
    sram_ecc: true,
};
const GFX940: Processor = Processor {
    name: "gfx940",
    packed_work_item_ids: true,
    vgpr_granule: 8,
    architected_flat_scratch: true,
    xccs: 8,
    preloads_kernel_arguments: true,
    sram_ecc: true,
};

/// Every processor the emulator runs.
pub const PROCESSORS: [Processor; 14] = [
    Processor { name: "gfx900", sram_ecc: false, ..GFX908 },
    Processor { name: "gfx902", sram_ecc: false, ..GFX908 },
    Processor { name: "gfx904", sram_ecc: false, ..GFX908 },
    Processor { name: "gfx906", ..GFX908 },
    Processor { name: "gfx909", sram_ecc: false, ..GFX908 },
    Processor { name: "gfx90c", sram_ecc: false, ..GFX908 },
    GFX908,
    GFX90A,
    GFX940,
    Processor { name: "gfx941", ..GFX940 },
    Processor { name: "gfx942", ..GFX940 },
    // gfx940's register files and inputs; 160 KiB of LDS and more opcodes.
    Processor { name: "gfx950", ..GFX940 },
    // Generic code (code object v6) runs on every processor of its family:
    // what they share.
    Processor { name: "gfx9-generic", sram_ecc: false, ..GFX908 },
    Processor { name: "gfx9-4-generic", ..GFX940 },
];

impl Processor {
    /// The processor called `name` (`gfx90a`), if the emulator runs it.
    pub fn named(name: &str) -> Option<&'static Processor> {
        PROCESSORS.iter().find(|p| p.name == name)
    }

    /// The processors' names, for messages.
    pub fn names() -> String {
        PROCESSORS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processors_are_found_by_name() {
        assert_eq!(Processor::named("gfx942").map(|p| p.architected_flat_scratch), Some(true));
        assert_eq!(Processor::named("gfx908").map(|p| p.vgpr_granule), Some(4));
        assert!(Processor::named("gfx1100").is_none());
        assert_eq!(
            Processor::names(),
            "gfx900, gfx902, gfx904, gfx906, gfx909, gfx90c, gfx908, gfx90a, gfx940, gfx941, gfx942, gfx950, gfx9-generic, \
             gfx9-4-generic"
        );
    }
}
