//! gpuinstr framework intrinsics: the pieces the embed plugin, the driver and
//! tool authors must agree on.
//!
//! - [`registers`]: the stable register encoding hooks use (`gpuinstr::sgpr(4)`).
//! - [`builtins`]: the built-in intrinsics and the `llvm.amdgcn.*` intrinsics
//!   the plugin substitutes with them.
//! - [`naming`]: how an intrinsic's IR function is named.
//!
//! The `Intrinsic` trait and lowering callbacks arrive with the payload
//! compiler (issue 5).

pub mod builtins;
pub mod naming;
pub mod registers;

pub use builtins::{BuiltinIntrinsic, AMDGCN_SUBSTITUTIONS, BUILTIN_INTRINSICS};
pub use naming::{intrinsic_function_name, HOOK_ATTRIBUTE, INTRINSIC_ATTRIBUTE};
pub use registers::{Register, RegisterError, SpecialRegister};
