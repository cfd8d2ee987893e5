//! What a kernel's register allocation costs on the hardware: how many of
//! its waves one SIMD holds at once (occupancy), and how many registers a
//! wave may have at all given its work-group bound, from the processor's
//! register files ([`Processor`]; wave64 GFX9).

use super::processor::Processor;

/// The vector registers a wave's allocation takes: a unified file (gfx90a,
/// gfx940+) holds the VGPRs (ACCUM_OFFSET rounded to 4) then the AGPRs;
/// gfx908's two files are allocated alike, so the larger count decides;
/// both in granules of the processor's.
pub fn vector_allocation(processor: &Processor, vgprs: usize, agprs: usize) -> usize {
    let granule = processor.vector_granule;
    if processor.has_unified_register_file() {
        let accum = if agprs == 0 { vgprs } else { vgprs.div_ceil(4) * 4 };
        (accum + agprs).max(1).div_ceil(granule) * granule
    } else {
        vgprs.max(agprs).max(1).div_ceil(granule) * granule
    }
}

/// Waves of a kernel one SIMD holds, from its vector allocation
/// ([`vector_allocation`]) and its SGPRs (extra SGPRs included): the
/// processor's vector file, 800 SGPRs a SIMD in granules of 16.
pub fn waves_per_simd(processor: &Processor, vector_registers: usize, sgprs: usize) -> usize {
    let granule = processor.vector_granule;
    let vector = processor.vector_file / (vector_registers.max(1).div_ceil(granule) * granule);
    let scalar = 800 / (sgprs.max(1).div_ceil(16) * 16);
    vector.min(scalar).min(processor.max_waves_per_simd)
}

/// The VGPRs, and the vector registers in all (VGPRs + AGPRs on a unified
/// file), a wave of a kernel may have: enough waves of its largest
/// work-group must fit on one compute unit's four SIMDs at once (128 VGPRs
/// on gfx90a and 64 on gfx908 for 1,024 work-items, the bound of a kernel
/// without `__launch_bounds__`).
pub fn wave_register_limit(processor: &Processor, max_flat_workgroup_size: u32) -> (usize, usize) {
    let workgroup = max_flat_workgroup_size.max(1) as usize;
    let waves_per_simd = workgroup.div_ceil(64).div_ceil(4).max(1);
    let granule = processor.vector_granule;
    let total = (processor.vector_file / waves_per_simd) / granule * granule;
    (total.min(256), total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::load::processor::Processor;

    fn named(name: &str) -> &'static Processor {
        Processor::named(name).expect("modelled")
    }

    #[test]
    fn the_work_group_bound_limits_a_wave() {
        assert_eq!(wave_register_limit(named("gfx90a"), 1024), (128, 128));
        assert_eq!(wave_register_limit(named("gfx908"), 1024), (64, 64));
        assert_eq!(wave_register_limit(named("gfx90a"), 256), (256, 512));
        assert_eq!(wave_register_limit(named("gfx908"), 256), (256, 256));
    }

    #[test]
    fn occupancy_follows_the_allocation_granules() {
        // gfx90a: 512 / 64 = 8 waves, at most 8; 72 registers give 7.
        assert_eq!(waves_per_simd(named("gfx90a"), vector_allocation(named("gfx90a"), 40, 0), 30), 8);
        assert_eq!(waves_per_simd(named("gfx90a"), vector_allocation(named("gfx90a"), 64, 0), 30), 8);
        assert_eq!(waves_per_simd(named("gfx90a"), vector_allocation(named("gfx90a"), 65, 0), 30), 7);
        // AGPRs start at a multiple of 4: 61 VGPRs and 3 AGPRs take 72.
        assert_eq!(vector_allocation(named("gfx90a"), 61, 3), 72);
        // gfx908: 256 / 28 = 9 waves; the larger file decides.
        assert_eq!(waves_per_simd(named("gfx908"), vector_allocation(named("gfx908"), 25, 0), 30), 9);
        assert_eq!(waves_per_simd(named("gfx908"), vector_allocation(named("gfx908"), 10, 64), 30), 4);
        // SGPRs: 800 / 96 = 8 waves.
        assert_eq!(waves_per_simd(named("gfx908"), 8, 90), 8);
    }
}
