//! One test file per pipeline stage, each over its own folder of inputs
//! (tests/inputs/stages/STAGE/*.s: a kernel's body in assembly, with the
//! instruction counter's plan unless a `; plan: FILE` line names another
//! in the same folder, on gfx90a unless `; processor: NAME` says), with a
//! snapshot of the stage's text form (`instrument --dump-after STAGE`) for
//! each input. Adding a case is adding a file.

mod emit;
mod lift;
mod liveness;
mod patch;
mod payloads;
mod sva;

use std::path::Path;
use std::sync::OnceLock;

use gpuinstr::instrument::{instrument_code_object, InstrumentOptions};
use gpuinstr::pipeline::Stage;
use gpuinstr::plan::Plan;
use gpuinstr::stages::load::{self, CodeObject};
use gpuinstr_intrinsics::Registry;
use gpuinstr_tests::*;

/// The value of a `; NAME: VALUE` line of an input.
fn header<'s>(source: &'s str, name: &str) -> Option<&'s str> {
    source
        .lines()
        .find_map(|line| line.trim().strip_prefix(';')?.trim().strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// The instruction counter, built once per test run.
fn counter_tool() -> &'static CodeObject {
    static TOOL: OnceLock<CodeObject> = OnceLock::new();
    TOOL.get_or_init(|| {
        let path = run_directory().join("stages-counter.hsaco");
        run_ok(&mut tool_compile_command(Compiler::Clang, &example("instruction-counter"), "-O3", &path));
        load::load(&path).unwrap().code_objects.remove(0)
    })
}

/// The text form of `stage` after instrumenting the input at `path`.
pub fn text_after(stage: Stage, path: &Path) -> String {
    let source = std::fs::read_to_string(path).unwrap();
    let processor = header(&source, "processor").unwrap_or("gfx90a");
    let app = kernel_from_assembly(processor, &source, "");
    let plan = match header(&source, "plan") {
        Some(name) => Plan::load(&path.with_file_name(name)).unwrap(),
        None => Plan::load(&repo().join("hook-sdk/examples/instruction-counter/plan.toml")).unwrap(),
    };
    let options =
        InstrumentOptions { dump_after: Some(stage), linker: linker_for(&app), ..InstrumentOptions::default() };
    let (_, report) = instrument_code_object(counter_tool(), &app, &plan, &Registry::with_builtins(), &options)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    report.dump.unwrap_or_else(|| panic!("{}: no text form after {}", path.display(), stage.key()))
}

#[test]
fn every_stage_has_a_folder_of_inputs() {
    for stage in Stage::ALL {
        let folder = repo().join("tests/inputs/stages").join(stage.key());
        let inputs = std::fs::read_dir(&folder)
            .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
            .filter(|entry| entry.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "s")))
            .count();
        assert!(inputs > 0, "{} has no inputs", folder.display());
    }
}
