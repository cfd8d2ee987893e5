//! Mutation fuzzing of gpuinstr on stable Rust (docs/fuzzing.md).
//!
//! Real inputs (fuzz/seeds/: code objects, bundles, host objects and
//! libraries, metadata notes, plans, tool code objects) are mutated
//! deterministically (case N of a kind is always the same input) and run
//! through every reader and subcommand, in-process and, for a sample,
//! through the `gpuinstr-link` binary. A panic, an abort, a hang, an output
//! left by a failed command, a file left in the temporary directory or an
//! error that is not one line is a finding; its input is kept, and fixed
//! ones become regression inputs under fuzz/regressions/KIND/.

pub mod case;
pub mod cli;
pub mod kinds;
pub mod mutate;
pub mod supervise;
