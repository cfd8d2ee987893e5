//! What a kernel's register allocation costs on the hardware: how many of
//! its waves one SIMD holds at once (occupancy), and how many registers a
//! wave may have at all given its work-group bound. gfx908 and gfx90a
//! (wave64, GFX9 register files).

/// Waves a SIMD holds at most.
pub fn max_waves_per_simd(processor: &str) -> usize {
    if processor == "gfx90a" {
        8
    } else {
        10
    }
}

/// The vector registers a wave's allocation takes: gfx90a's unified file
/// holds the VGPRs (ACCUM_OFFSET rounded to 4) then the AGPRs, in granules
/// of 8; gfx908's two files are allocated alike, in granules of 4, so the
/// larger count decides.
pub fn vector_allocation(processor: &str, vgprs: usize, agprs: usize) -> usize {
    let granule = allocation_granule(processor);
    if processor == "gfx90a" {
        let accum = if agprs == 0 { vgprs } else { vgprs.div_ceil(4) * 4 };
        (accum + agprs).max(1).div_ceil(granule) * granule
    } else {
        vgprs.max(agprs).max(1).div_ceil(granule) * granule
    }
}

/// The vector registers a wave's allocation grows by: 8 on gfx90a, 4 on gfx908.
pub fn allocation_granule(processor: &str) -> usize {
    if processor == "gfx90a" {
        8
    } else {
        4
    }
}

/// Waves of a kernel one SIMD holds, from its vector allocation
/// ([`vector_allocation`]) and its SGPRs (extra SGPRs included): 512
/// registers a lane on gfx90a's unified file, 256 on gfx908's VGPR file,
/// 800 SGPRs a SIMD in granules of 16.
pub fn waves_per_simd(processor: &str, vector_registers: usize, sgprs: usize) -> usize {
    let file = if processor == "gfx90a" { 512 } else { 256 };
    let granule = allocation_granule(processor);
    let vector = file / (vector_registers.max(1).div_ceil(granule) * granule);
    let scalar = 800 / (sgprs.max(1).div_ceil(16) * 16);
    vector.min(scalar).min(max_waves_per_simd(processor))
}

/// The VGPRs, and the vector registers in all (VGPRs + AGPRs on gfx90a's
/// unified file), a wave of a kernel may have: enough waves of its largest
/// work-group must fit on one compute unit's four SIMDs at once (128 VGPRs
/// on gfx90a and 64 on gfx908 for 1,024 work-items, the bound of a kernel
/// without `__launch_bounds__`).
pub fn wave_register_limit(processor: &str, max_flat_workgroup_size: u32) -> (usize, usize) {
    let workgroup = max_flat_workgroup_size.max(1) as usize;
    let waves_per_simd = workgroup.div_ceil(64).div_ceil(4).max(1);
    if processor == "gfx90a" {
        let total = (512 / waves_per_simd) / 8 * 8;
        (total.min(256), total)
    } else {
        let each = (256 / waves_per_simd) / 4 * 4;
        (each, each)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_work_group_bound_limits_a_wave() {
        assert_eq!(wave_register_limit("gfx90a", 1024), (128, 128));
        assert_eq!(wave_register_limit("gfx908", 1024), (64, 64));
        assert_eq!(wave_register_limit("gfx90a", 256), (256, 512));
        assert_eq!(wave_register_limit("gfx908", 256), (256, 256));
    }

    #[test]
    fn occupancy_follows_the_allocation_granules() {
        // gfx90a: 512 / 64 = 8 waves, at most 8; 72 registers give 7.
        assert_eq!(waves_per_simd("gfx90a", vector_allocation("gfx90a", 40, 0), 30), 8);
        assert_eq!(waves_per_simd("gfx90a", vector_allocation("gfx90a", 64, 0), 30), 8);
        assert_eq!(waves_per_simd("gfx90a", vector_allocation("gfx90a", 65, 0), 30), 7);
        // AGPRs start at a multiple of 4: 61 VGPRs and 3 AGPRs take 72.
        assert_eq!(vector_allocation("gfx90a", 61, 3), 72);
        // gfx908: 256 / 28 = 9 waves; the larger file decides.
        assert_eq!(waves_per_simd("gfx908", vector_allocation("gfx908", 25, 0), 30), 9);
        assert_eq!(waves_per_simd("gfx908", vector_allocation("gfx908", 10, 64), 30), 4);
        // SGPRs: 800 / 96 = 8 waves.
        assert_eq!(waves_per_simd("gfx908", 8, 90), 8);
    }
}
