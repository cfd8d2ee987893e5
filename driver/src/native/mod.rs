//! The driver's only unsafe code: calls into LLVM's MC layer through the C++
//! shim (cpp/gpuinstr_native.h). Everything outside this module is safe.

mod mc;

pub use mc::{Mc, McError, OpcodeFlags, OpcodeInfo, Operand, RawInstruction};
