//! Stage liveness's text form on each input of tests/inputs/stages/liveness.

use gpuinstr::pipeline::Stage;

#[test]
fn text_forms() {
    insta::glob!("../../inputs/stages/liveness", "*.s", |path| {
        gpuinstr_tests::compiler_snapshot!(super::text_after(Stage::Liveness, path));
    });
}
