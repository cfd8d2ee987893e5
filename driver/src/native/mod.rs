//! The driver's only unsafe code: calls into LLVM's MC layer through the C++
//! shim (cpp/gpuinstr_native.h). Everything outside this module is safe.

pub mod comgr;
mod file_map;
mod mc;
mod memory;

pub use comgr::{link_relocatable, metadata_kernels, ComgrError};
pub use file_map::MappedFile;
pub use mc::{GenericOperandTypes, Mc, McError, OpcodeFlags, OpcodeInfo, Operand, RawInstruction};
pub use memory::release_free_memory;
