//! The processors gpuinstr analyses and instruments, and what differs
//! between them for liveness, register allocation, occupancy and the kernel
//! preamble: the wave64 GFX9 family. Every processor outside this table is
//! lifted and round-tripped only; a stage that needs one of these facts
//! refuses the others by name rather than guess.

/// How a processor holds AGPRs (the matrix cores' accumulation registers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgprFile {
    /// None (gfx900, gfx906).
    Absent,
    /// A file of their own beside the VGPRs, allocated alike (gfx908).
    Separate,
    /// One allocation with the VGPRs, split at ACCUM_OFFSET (gfx90a, gfx940+).
    Unified,
}

/// What instrumenting code for one processor needs to know of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Processor {
    pub name: &'static str,
    pub agprs: AgprFile,
    /// Vector registers of one lane a SIMD holds for all its waves: 256
    /// VGPRs (gfx908's AGPRs have as many again), 512 of the unified file.
    pub vector_file: usize,
    /// The vector allocation grows in granules of this many registers.
    pub vector_granule: usize,
    pub max_waves_per_simd: usize,
    /// Work-item ids packed in v0 (X, Y, Z in 10-bit fields) instead of one
    /// VGPR each.
    pub packed_work_item_ids: bool,
    /// 64-bit and wider VGPR tuples start at an even register.
    pub aligned_vgpr_tuples: bool,
    /// The hardware sets FLAT_SCRATCH to the wave's scratch: no private
    /// segment buffer, no scratch wave offset SGPR, and a stack addressed
    /// per lane by `scratch_` instructions.
    pub architected_flat_scratch: bool,
    /// The GPU's waves spread over several XCCs (accelerator complex
    /// dies): a wave's HW_ID is unique only within its XCC, and
    /// `HW_REG_XCC_ID` says which.
    pub xccs: bool,
}

const GFX900: Processor = Processor {
    name: "gfx900",
    agprs: AgprFile::Absent,
    vector_file: 256,
    vector_granule: 4,
    max_waves_per_simd: 10,
    packed_work_item_ids: false,
    aligned_vgpr_tuples: false,
    architected_flat_scratch: false,
    xccs: false,
};
const GFX908: Processor = Processor { name: "gfx908", agprs: AgprFile::Separate, ..GFX900 };
const GFX90A: Processor = Processor {
    name: "gfx90a",
    agprs: AgprFile::Unified,
    vector_file: 512,
    vector_granule: 8,
    max_waves_per_simd: 8,
    packed_work_item_ids: true,
    aligned_vgpr_tuples: true,
    architected_flat_scratch: false,
    xccs: false,
};
const GFX940: Processor = Processor { name: "gfx940", architected_flat_scratch: true, xccs: true, ..GFX90A };

/// Every processor instrumented. gfx950 (MI350) keeps gfx940's register
/// files (its LDS and instructions differ); the generic targets are the
/// files every processor they stand for shares.
pub const PROCESSORS: [Processor; 14] = [
    GFX900,
    Processor { name: "gfx902", ..GFX900 },
    Processor { name: "gfx904", ..GFX900 },
    Processor { name: "gfx906", ..GFX900 },
    Processor { name: "gfx909", ..GFX900 },
    Processor { name: "gfx90c", ..GFX900 },
    GFX908,
    GFX90A,
    GFX940,
    Processor { name: "gfx941", ..GFX940 },
    Processor { name: "gfx942", ..GFX940 },
    Processor { name: "gfx950", ..GFX940 },
    Processor { name: "gfx9-generic", ..GFX900 },
    Processor { name: "gfx9-4-generic", ..GFX940 },
];

impl Processor {
    /// The processor called `name`, if gpuinstr instruments it.
    pub fn named(name: &str) -> Option<&'static Processor> {
        PROCESSORS.iter().find(|p| p.name == name)
    }

    /// The processors' names, for messages.
    pub fn names() -> String {
        PROCESSORS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
    }

    pub fn has_unified_register_file(&self) -> bool {
        self.agprs == AgprFile::Unified
    }

    pub fn has_agprs(&self) -> bool {
        self.agprs != AgprFile::Absent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::load::TargetId;

    #[test]
    fn the_table_agrees_with_what_the_descriptor_reader_knows() {
        for processor in &PROCESSORS {
            let target = TargetId::processor(processor.name);
            assert_eq!(processor.has_unified_register_file(), target.has_unified_register_file(), "{}", processor.name);
            assert_eq!(processor.architected_flat_scratch, target.has_architected_flat_scratch(), "{}", processor.name);
        }
        assert!(Processor::named("gfx1100").is_none());
        assert_eq!(Processor::named("gfx942").map(|p| p.vector_file), Some(512));
    }
}
