//! Stage payloads's text form on each input of tests/inputs/stages/payloads.

use gpuinstr::pipeline::Stage;

#[test]
fn text_forms() {
    insta::glob!("../../inputs/stages/payloads", "*.s", |path| {
        gpuinstr_tests::compiler_snapshot!(super::text_after(Stage::Payloads, path));
    });
}
