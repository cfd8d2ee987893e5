//! gpuinstr framework intrinsics: the pieces the embed plugin, the driver and
//! tool authors must agree on, and how each intrinsic is lowered.
//!
//! - [`registers`]: the stable register encoding hooks use (`gpuinstr::sgpr(4)`).
//! - [`naming`]: how an intrinsic's IR function is named.
//! - [`sva`]: the State Value Array layout (which lane holds what).
//! - [`lowering`]: the [`Intrinsic`] trait (IR and MIR callbacks) and the
//!   [`MirBuilder`] a MIR callback builds instructions with.
//! - [`builtins`]: the built-in intrinsics and their lowerings.
//! - [`registry`]: the built-ins plus user intrinsics.

pub mod builtins;
pub mod lowering;
pub mod naming;
pub mod registers;
pub mod registry;
pub mod sva;

pub use builtins::{BuiltinIntrinsic, AMDGCN_SUBSTITUTIONS, BUILTIN_INTRINSICS};
pub use lowering::{
    ArgumentLowering, Intrinsic, IntrinsicError, IrArgument, IrCall, IrLowering, IrType, MemoryAccess, MemoryOperand,
    MirBuilder, MirOperand, MirOperands, RegisterClass, RegisterKind, TargetInfo, VirtualRegister,
};
pub use naming::{intrinsic_function_name, HOOK_ATTRIBUTE, INTRINSIC_ATTRIBUTE};
pub use registers::{Register, RegisterError, SpecialRegister};
pub use registry::{DuplicateIntrinsic, Registry};
pub use sva::{FrameValue, KernelArgument, Storage};
