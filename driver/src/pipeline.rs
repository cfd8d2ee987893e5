//! The driver's pipeline on one screen. Each stage is a module under
//! `stages/`, in this order; every stage has a text form that can be dumped
//! and snapshot-tested. Stages not listed as landed are the open issues.
//!
//! | # | stage      | in -> out                                                     | landed |
//! |---|------------|---------------------------------------------------------------|--------|
//! | 1 | load       | ELF / offload bundle / host ELF with .hip_fatbin -> code objects | yes (`stages::load`) |
//! | 2 | lift       | code object -> functions, blocks, instructions                 | yes (`stages::lift`) |
//! | 3 | liveness   | lifted module -> live registers per instruction                | yes (`stages::liveness`) |
//! | 4 | sva        | lifted module + liveness -> SVA storage plan                   | yes (`stages::sva`) |
//! | 5 | payload    | hook bitcode + plan -> one instrumentation IR module           | yes (`stages::payload`) |
//! | 6 | lower-ir   | payload IR -> IR with intrinsic placeholders                   | yes (`stages::lower_ir`) |
//! | 7 | codegen    | IR -> pre-RA MIR, lowered MIR -> assembly (llc)                | yes (`stages::codegen`) |
//! | 8 | lower-mir  | MIR -> MIR with intrinsics lowered -> final code per point     | yes (`stages::lower_mir`) |
//! | 9 | patch      | lifted module + payload code -> instrumented module            | yes (`stages::patch`) |
//! | 10| emit+link  | instrumented module -> code object (llvm-mc, CoMGR)            | yes (`stages::emit`) |
//!
//! Beside the stages: `tool` reads a tool's embedded hook module (the input
//! of stage 5), `plan` selects points, `stages::payloads` runs stages 5-8
//! for all points of a code object and `preservation` checks their machine
//! code. Above them the subcommands: `inspect` reports what a file holds,
//! `roundtrip` and `corpus` run load -> lift -> emit + link with no changes
//! and check the result, `analyze` reports register availability from
//! liveness, `instrument` runs everything and `verify` checks its output
//! against the original. [`MODULES_BOTTOM_UP`] is the order imports follow.

use crate::error::Error;
use crate::stages::load::{CodeObject, LoadedInput};

pub use crate::stages::emit::link::build as emit_and_link;
pub use crate::stages::lift::lift;
pub use crate::stages::liveness::analyze as liveness;
pub use crate::stages::load::load;
pub use crate::stages::payloads::compile_payloads;
pub use crate::tool::read_tool_module;

/// The one code object of an input a command works on: the only one, or the
/// one `--target` selects.
pub fn one_code_object(input: LoadedInput, target: Option<&str>) -> Result<CodeObject, Error> {
    let input = match target {
        Some(target) => input.select_target(target)?,
        None => input,
    };
    if input.code_objects.len() > 1 {
        let targets: Vec<String> = input.code_objects.iter().map(|c| c.target.to_string()).collect();
        return Err(Error::SeveralCodeObjects { file: input.path, targets: targets.join(", ") });
    }
    let path = input.path;
    input
        .code_objects
        .into_iter()
        .next()
        .ok_or_else(|| Error::NoCodeObject { file: path, target: target.unwrap_or_default().to_string() })
}

/// The driver's modules from the bottom up. A module uses only modules
/// before it in this list: support first, then the stages in pipeline
/// order (with the tool reader before the payload stage and point
/// selection after it), then what runs the stages for a whole code object,
/// then the subcommands, which no module below them uses. A test holds the
/// source to it.
pub const MODULES_BOTTOM_UP: &[&str] = &[
    "native",
    "process",
    "toolchain",
    "error",
    "output",
    "stages::load",
    "stages::lift",
    "stages::liveness",
    "stages::sva",
    "tool",
    "stages::payload",
    "plan",
    "stages::lower_ir",
    "stages::codegen",
    "stages::lower_mir",
    "preservation",
    "stages::payloads",
    "stages::patch",
    "stages::emit",
    "stages",
    "parallel",
    "pipeline",
    "inspect",
    "roundtrip",
    "corpus",
    "analyze",
    "verify",
    "instrument",
];

/// Modules that check instrumented code, and the modules that wrote it,
/// which they must not use: a checker that shares the code it checks
/// cannot see that code's mistakes. They read the facts of load, lift and
/// liveness and run the real tools.
pub const CHECKERS_AND_WHAT_THEY_CHECK: &[(&str, &[&str])] = &[(
    "verify",
    &[
        "stages::sva",
        "tool",
        "stages::payload",
        "plan",
        "stages::lower_ir",
        "stages::codegen",
        "stages::lower_mir",
        "stages::payloads",
        "stages::patch",
        "stages::emit",
    ],
)];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::load::InputKind;

    /// A host file whose `.hip_fatbin` bundles hold no device code (a
    /// damaged one did): an error naming the file, not a panic.
    #[test]
    fn an_input_without_code_objects_is_an_error() {
        let input = LoadedInput {
            path: "app.o".into(),
            kind: InputKind::HostWithFatbin { bundles: 1 },
            code_objects: Vec::new(),
        };
        let error = one_code_object(input, None).unwrap_err().to_string();
        assert_eq!(error, "app.o: the input holds no code object");
    }

    /// The module a source file belongs to: its crate-level module, or for
    /// files under `stages/`, its stage.
    fn module_of(relative: &std::path::Path) -> String {
        let parts: Vec<String> =
            relative.with_extension("").components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        match parts.as_slice() {
            [stages, stage, ..] if stages == "stages" && stage != "mod" => format!("stages::{stage}"),
            [first, ..] => first.clone(),
            [] => unreachable!("a file has a name"),
        }
    }

    fn sources(directory: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(directory).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// Every `crate::` path in the source, outside comments, names a module
    /// before the file's own in [`MODULES_BOTTOM_UP`] (imports run one way),
    /// and no checker uses what wrote the code it checks.
    #[test]
    fn imports_run_one_way() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let rank = |module: &str| MODULES_BOTTOM_UP.iter().position(|m| *m == module);
        let path_pattern = regex::Regex::new(r"crate::(?:\{\s*)?(stages::)?(\w+)").unwrap();
        let mut files = Vec::new();
        sources(&root, &mut files);
        let mut wrong = Vec::new();
        for file in files {
            let relative = file.strip_prefix(&root).unwrap();
            if relative == std::path::Path::new("lib.rs") || relative == std::path::Path::new("main.rs") {
                continue;
            }
            let module = module_of(relative);
            let own = rank(&module)
                .unwrap_or_else(|| panic!("{}: module `{module}` is not in MODULES_BOTTOM_UP", relative.display()));
            let text = std::fs::read_to_string(&file).unwrap();
            for (number, line) in text.lines().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                for found in path_pattern.captures_iter(line) {
                    let used = match found.get(1) {
                        Some(_) => format!("stages::{}", &found[2]),
                        None => found[2].to_string(),
                    };
                    // Re-exports at the crate root (`crate::Error`) are the error module's.
                    let used = if used.starts_with(char::is_uppercase) { "error".to_string() } else { used };
                    let Some(theirs) = rank(&used) else {
                        wrong.push(format!(
                            "{}:{}: `{used}` is not in MODULES_BOTTOM_UP",
                            relative.display(),
                            number + 1
                        ));
                        continue;
                    };
                    if theirs > own {
                        wrong.push(format!(
                            "{}:{}: {module} uses {used}, which comes after it",
                            relative.display(),
                            number + 1
                        ));
                    }
                    let checked = CHECKERS_AND_WHAT_THEY_CHECK.iter().find(|(checker, _)| *checker == module);
                    if checked.is_some_and(|(_, writers)| writers.contains(&used.as_str())) {
                        wrong.push(format!(
                            "{}:{}: {module} checks what {used} writes and must not use it",
                            relative.display(),
                            number + 1
                        ));
                    }
                }
            }
        }
        assert!(wrong.is_empty(), "imports that break the layering:\n{}", wrong.join("\n"));
    }
}
