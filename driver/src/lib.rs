//! gpuinstr's driver library: everything `gpuinstr-link` does, callable from
//! Rust. Start at [`pipeline`].

pub mod analyze;
pub mod corpus;
pub mod error;
pub mod inspect;
pub mod instrument;
pub mod native;
pub mod output;
pub mod parallel;
pub mod pipeline;
pub mod plan;
pub mod preservation;
pub mod process;
pub mod progress;
pub mod roundtrip;
pub mod stages;
pub mod tool;
pub mod toolchain;
pub mod verify;

pub use error::{Error, LoadProblem, Location, ToolProblem};
/// The LLVM bindings of the LLVM this build is for (for tests and tools
/// that hand the driver an LLVM context).
pub use inkwell;
