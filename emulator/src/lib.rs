//! gpuinstr's execution oracle: a functional emulator of gfx908/gfx90a
//! wave64 kernels. It decodes instructions through the same LLVM MC layer
//! and opcode tables as the lifter, sets up a dispatch exactly as the
//! hardware does from the kernel descriptor and metadata, and runs every
//! wave on the CPU. Tests run an original and an instrumented code object
//! on the same inputs and compare memory; an instruction the emulator does
//! not implement stops the run naming it.
//!
//! Pipeline of a run: `device` (load the code object into device memory)
//! -> `dispatch` (packet, kernel arguments, initial wave state, run loop)
//! -> `program` (decode on first execution) -> `semantics` (one file per
//! instruction family) over `wave` (registers) and `memory`.

pub mod access;
pub mod arguments;
pub mod device;
pub mod dispatch;
pub mod error;
pub mod inputs;
pub mod memory;
pub mod opcode_coverage;
pub mod operands;
pub mod packet;
pub mod processor;
pub mod program;
pub mod semantics;
pub mod wave;

pub use access::{Access, Space};
pub use device::Device;
pub use dispatch::{Counts, Digest, ExecChange, Launch, Options, RunReport, TraceEntry};
pub use error::{EmulatorError, Fault};
pub use semantics::LdsOutOfRange;
