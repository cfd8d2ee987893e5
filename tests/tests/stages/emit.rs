//! Stage emit's text form on each input of tests/inputs/stages/emit.

use gpuinstr::pipeline::Stage;

#[test]
fn text_forms() {
    insta::glob!("../../inputs/stages/emit", "*.s", |path| {
        gpuinstr_tests::compiler_snapshot!(super::text_after(Stage::EmitAndLink, path));
    });
}
