//! Stage patch's text form on each input of tests/inputs/stages/patch.

use gpuinstr::pipeline::Stage;

#[test]
fn text_forms() {
    insta::glob!("../../inputs/stages/patch", "*.s", |path| {
        gpuinstr_tests::compiler_snapshot!(super::text_after(Stage::Patch, path));
    });
}
