//! Code nobody here wrote: Debian's rocRAND and rocSPARSE device code,
//! lifted, re-emitted, linked and checked. Every gfx90a and gfx908 kernel of
//! rocRAND; a sample of rocSPARSE's 222 gfx90a code objects (the whole of it
//! runs in scripts/corpus.sh).

use gpuinstr::corpus::{check_corpus, Sample};
use gpuinstr::stages::emit::link::Linker;
use gpuinstr_tests::*;

const ROCRAND: &str = "/usr/lib/x86_64-linux-gnu/librocrand.so.1.1";
const ROCSPARSE: &str = "/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1";

fn assert_clean(report: &gpuinstr::corpus::CorpusReport, minimum_kernels: usize) {
    let text = report.render_text();
    assert!(report.kernels >= minimum_kernels, "{text}");
    assert_eq!(report.undecodable, 0, "{text}");
    assert_eq!(report.unmapped_opcodes, 0, "{text}");
    assert_eq!(report.failed_code_objects, 0, "{text}");
    assert_eq!(report.different_functions, 0, "{text}");
    assert!(report.failures.is_empty(), "{text}");
    assert_eq!(report.identical_functions, report.kernels + report.device_functions, "{text}");
    assert_eq!(report.identical_code_objects, report.code_objects, "{text}");
}

#[test]
fn rocrand_round_trips_exactly() {
    let library = debian_package_file("librocrand1", ROCRAND);
    for target in ["gfx90a", "gfx908"] {
        let report = check_corpus(std::slice::from_ref(&library), target, Sample::All, Linker::Comgr, 2).unwrap();
        // gfx90a comes built for xnack+ and xnack-, gfx908 for xnack-; 80 kernels each.
        let expected = if target == "gfx90a" { 2 } else { 1 };
        assert_eq!(report.code_objects, expected, "{}", report.render_text());
        assert_clean(&report, 80 * expected);
        assert!(report.pc_relative_symbolized > 0);
    }
}

#[test]
fn rocsparse_sample_round_trips_exactly() {
    let library = debian_package_file("librocsparse0", ROCSPARSE);
    // Every 12th of the 222 code objects: 19 code objects, ~2,000 kernels
    // (CI's scripts/corpus.sh round-trips all of them).
    let report = check_corpus(&[library], "gfx90a", Sample::EveryNth(12), Linker::Comgr, 2).unwrap();
    assert_eq!(report.code_objects, 19, "{}", report.render_text());
    assert_clean(&report, 1500);
}

/// A file of the corpus that cannot be read (a host library with no
/// device code, as hipBLASLt's is) is a failure of its own, named, and the
/// others are still checked.
#[test]
fn a_file_that_cannot_be_read_is_named_and_the_rest_checked() {
    let library = debian_package_file("librocrand1", ROCRAND);
    let host_only = std::path::PathBuf::from("/bin/true");
    let report = check_corpus(&[host_only, library], "gfx908", Sample::All, Linker::Comgr, 2).unwrap();
    let text = report.render_text();
    assert_eq!((report.files, report.files_not_loaded, report.code_objects), (2, 1, 1), "{text}");
    let failure = &report.failures["not loaded"];
    assert!(failure.example.starts_with("/bin/true: "), "{text}");
    assert!(text.contains("files not loaded       1"), "{text}");
    assert_eq!(report.identical_code_objects, 1, "{text}");
}
