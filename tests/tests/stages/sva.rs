//! Stage sva's text form on each input of tests/inputs/stages/sva.

use gpuinstr::pipeline::Stage;

#[test]
fn text_forms() {
    insta::glob!("../../inputs/stages/sva", "*.s", |path| {
        gpuinstr_tests::compiler_snapshot!(super::text_after(Stage::PlanAndSva, path));
    });
}
