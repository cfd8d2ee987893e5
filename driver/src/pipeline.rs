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
//! of stage 5), `inspect` reports what a file holds, `roundtrip` and
//! `corpus` run load -> lift -> emit + link with no changes and check the
//! result, `analyze` reports register availability from liveness,
//! `payloads` runs stages 5-8 for all points of a code object,
//! `preservation` checks their machine code, `plan` selects points,
//! `instrument` runs everything and `verify` checks its output against the
//! original.

use crate::error::Error;
use crate::stages::load::{CodeObject, LoadedInput};

pub use crate::inspect::inspect;
pub use crate::payloads::compile_payloads;
pub use crate::roundtrip::roundtrip;
pub use crate::stages::emit::link::build as emit_and_link;
pub use crate::stages::lift::lift;
pub use crate::stages::liveness::analyze as liveness;
pub use crate::stages::load::load;
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
}
