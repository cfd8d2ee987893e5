//! Stage lift's text form on each input of tests/inputs/stages/lift.

use gpuinstr::pipeline::Stage;

#[test]
fn text_forms() {
    insta::glob!("../../inputs/stages/lift", "*.s", |path| {
        gpuinstr_tests::compiler_snapshot!(super::text_after(Stage::Lift, path));
    });
}
