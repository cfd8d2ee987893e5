//! The register availability report (`gpuinstr-link analyze`) on our
//! kernels and on rocRAND: snapshots of the text, and the facts that must
//! hold whatever the numbers.

use gpuinstr::analyze::{code_object_report, corpus, Availability};
use gpuinstr::stages::load;
use gpuinstr_tests::*;

#[test]
fn report_snapshots_of_our_kernels() {
    for (kernels, target) in [("calls_and_scratch", "gfx90a"), ("matrix_cores", "gfx908"), ("memory", "gfx90a")] {
        let input = load::load_for_target(&test_kernels(kernels), Some(target)).unwrap();
        let report = code_object_report(&input.code_objects[0]).unwrap();
        compiler_snapshot!(format!("analyze_{kernels}_{target}"), gpuinstr::analyze::render_text(&report));
    }
}

/// No kernel uses a register outside its allocation, and the allocation
/// (with the SGPRs it reserves) covers what the metadata declares: the
/// allocation model agrees with the compiler's own accounting.
#[test]
fn allocation_agrees_with_the_code_and_the_metadata() {
    let mut files = Vec::new();
    for kernels in TEST_KERNELS {
        files.push(test_kernels(kernels));
    }
    files.push(debian_package_file("librocrand1", "/usr/lib/x86_64-linux-gnu/librocrand.so.1.1"));
    for target in ["gfx908", "gfx90a"] {
        let (reports, summary) = corpus(&files, Some(target), 2).unwrap();
        assert!(summary.failed_code_objects.is_empty(), "{:?}", summary.failed_code_objects);
        assert!(summary.kernels > 80, "{}", summary.render_text());
        for kernel in reports.iter().flat_map(|r| &r.kernels) {
            let context = format!("{target} {}", kernel.name);
            for (name, file) in [("sgpr", &kernel.sgpr), ("vgpr", &kernel.vgpr), ("agpr", &kernel.agpr)] {
                assert!(
                    file.used_up_to <= file.allocated,
                    "{context}: {name} used up to {} of {}",
                    file.used_up_to,
                    file.allocated
                );
                assert_eq!(
                    file.globally_free,
                    file.allocated - file.used.min(file.allocated).min(file.allocated),
                    "{context}: {name}"
                );
            }
            let declared_sgprs = kernel.sgpr.declared.unwrap() as usize;
            assert!(
                declared_sgprs <= kernel.sgpr.allocated + kernel.reserved_sgprs,
                "{context}: declares {declared_sgprs} SGPRs, {} + {} allocated",
                kernel.sgpr.allocated,
                kernel.reserved_sgprs
            );
            assert!(kernel.vgpr.declared.unwrap() as usize <= kernel.vgpr.allocated, "{context}");
            // Globally free registers are free at every instruction.
            assert!(kernel.free_sgprs.min >= kernel.sgpr.globally_free, "{context}");
            assert!(kernel.free_vgprs.min >= kernel.vgpr.globally_free, "{context}");
        }
    }
}

/// A kernel that needs scratch: the stack base and SVA questions have
/// answers consistent with the counts.
#[test]
fn availability_follows_from_the_counts() {
    let input = load::load_for_target(&test_kernels("calls_and_scratch"), Some("gfx908")).unwrap();
    let report = code_object_report(&input.code_objects[0]).unwrap();
    for kernel in &report.kernels {
        let expected = if kernel.sgpr.globally_free >= 2 { Availability::GloballyFree } else { kernel.stack_base };
        assert_eq!(kernel.stack_base, expected, "{}", kernel.name);
        if kernel.vgpr.globally_free == 0 {
            assert_ne!(kernel.sva, Availability::GloballyFree, "{}", kernel.name);
        }
    }
    // The spilling kernel (24-VGPR budget) fills all 24 AGPRs with spills
    // and uses v0..v22; v23 is the VGPR LLVM reserves on gfx908 for copies
    // between AGPRs, never needed here: the one globally free VGPR.
    let spills = report.kernels.iter().find(|k| k.name == "_Z14registerSpillsPfPKf").unwrap();
    assert_eq!((spills.agpr.allocated, spills.agpr.used, spills.agpr.globally_free), (24, 24, 0));
    assert_eq!((spills.vgpr.allocated, spills.vgpr.used), (24, 23));
    assert_eq!(spills.vgpr.globally_free_registers, "v23");
    assert_eq!(spills.sva, Availability::GloballyFree);
}
