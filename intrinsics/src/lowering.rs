//! How an intrinsic is lowered, in two steps (seed 004):
//!
//! 1. **IR** ([`Intrinsic::lower_ir`]), after the payload module is
//!    optimised: the intrinsic checks a call (argument types, constant
//!    arguments) and says which register kind its result and each argument
//!    must live in, which application registers it reads or writes and which
//!    kernel arguments it needs. The driver replaces the call by an inline
//!    assembly placeholder with those constraints; instruction selection
//!    keeps it.
//! 2. **MIR** ([`Intrinsic::lower_mir`]), right after instruction selection
//!    and before register allocation: the intrinsic replaces its placeholder
//!    with real instructions on virtual registers (SSA), through the narrow
//!    [`MirBuilder`]: new virtual registers, instructions by LLVM pseudo
//!    opcode name, the value of an application register at the
//!    instrumentation point, a write to one, and a kernel argument (from the
//!    State Value Array).
//!
//! Nothing here depends on LLVM: the driver implements [`MirBuilder`] over
//! MIR text.

use std::fmt;

use thiserror::Error;

use crate::registers::{Register, RegisterError};
use crate::sva::KernelArgument;

/// A value type of an intrinsic's IR signature, in LLVM's intrinsic spelling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IrType {
    Void,
    Int(u32),
    Float(u32),
    Pointer { address_space: u32 },
    Vector { lanes: u32, element: Box<IrType> },
}

impl IrType {
    /// Parses the spelling intrinsic names use (`i32`, `f64`, `p1`, `v2i32`, `void`).
    pub fn parse(text: &str) -> Option<IrType> {
        if text == "void" {
            return Some(IrType::Void);
        }
        if let Some(rest) = text.strip_prefix('v') {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if !digits.is_empty() {
                let element = IrType::parse(&rest[digits.len()..])?;
                return Some(IrType::Vector { lanes: digits.parse().ok()?, element: Box::new(element) });
            }
        }
        let number = |prefix: &str| text.strip_prefix(prefix).and_then(|n| n.parse::<u32>().ok());
        if let Some(bits) = number("i") {
            return Some(IrType::Int(bits));
        }
        if let Some(bits) = number("f") {
            return Some(IrType::Float(bits));
        }
        if text == "bf16" {
            return Some(IrType::Float(16));
        }
        number("p").map(|address_space| IrType::Pointer { address_space })
    }

    /// Size in bits (pointers: 32 for LDS, scratch and 32-bit constant
    /// address spaces, 64 otherwise).
    pub fn bits(&self) -> u32 {
        match self {
            IrType::Void => 0,
            IrType::Int(bits) | IrType::Float(bits) => *bits,
            IrType::Pointer { address_space: 2 | 3 | 5 | 6 } => 32,
            IrType::Pointer { .. } => 64,
            IrType::Vector { lanes, element } => lanes * element.bits(),
        }
    }

    pub fn is_integer_or_pointer(&self) -> bool {
        matches!(self, IrType::Int(_) | IrType::Pointer { .. })
    }
}

impl fmt::Display for IrType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IrType::Void => f.write_str("void"),
            IrType::Int(bits) => write!(f, "i{bits}"),
            IrType::Float(bits) => write!(f, "f{bits}"),
            IrType::Pointer { address_space } => write!(f, "p{address_space}"),
            IrType::Vector { lanes, element } => write!(f, "v{lanes}{element}"),
        }
    }
}

/// One argument of an intrinsic call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrArgument {
    pub ty: IrType,
    /// The value, when the argument is an integer constant.
    pub constant: Option<i64>,
}

/// What the target offers; lets an intrinsic reject what cannot exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetInfo {
    /// `gfx90a`, `gfx908`.
    pub processor: String,
    /// Addressable SGPRs (102 on GFX9, VCC excluded).
    pub sgprs: u16,
    pub vgprs: u16,
    pub agprs: u16,
}

impl TargetInfo {
    pub fn for_processor(processor: &str) -> TargetInfo {
        TargetInfo { processor: processor.to_string(), sgprs: 102, vgprs: 256, agprs: 256 }
    }

    /// Whether the register exists on the target.
    pub fn check_register(&self, register: Register) -> Result<(), IntrinsicError> {
        let (index, limit) = match register {
            Register::Sgpr(i) => (i, self.sgprs),
            Register::Vgpr(i) => (i, self.vgprs),
            Register::Agpr(i) => (i, self.agprs),
            Register::Ttmp(i) => (i, 16),
            Register::Special(_) => return Ok(()),
        };
        if index < limit {
            Ok(())
        } else {
            Err(IntrinsicError::RegisterOutOfRange { register, processor: self.processor.clone(), limit })
        }
    }
}

/// A call to lower, as the IR callback sees it.
#[derive(Clone, Debug)]
pub struct IrCall<'a> {
    /// Qualified intrinsic name (`gpuinstr::readReg`).
    pub intrinsic: &'a str,
    pub result: IrType,
    pub arguments: Vec<IrArgument>,
    pub target: &'a TargetInfo,
}

impl IrCall<'_> {
    /// The constant value of argument `index`, or an error saying it must be one.
    pub fn constant(&self, index: usize) -> Result<i64, IntrinsicError> {
        self.arguments
            .get(index)
            .and_then(|a| a.constant)
            .ok_or_else(|| IntrinsicError::NotConstant { intrinsic: self.intrinsic.to_string(), index })
    }

    /// Checks the argument count.
    pub fn expect_arguments(&self, count: usize) -> Result<(), IntrinsicError> {
        if self.arguments.len() == count {
            Ok(())
        } else {
            Err(self.wrong(format!("takes {count} argument(s), the call passes {}", self.arguments.len())))
        }
    }

    /// An error about this call's signature.
    pub fn wrong(&self, why: impl Into<String>) -> IntrinsicError {
        IntrinsicError::WrongSignature { intrinsic: self.intrinsic.to_string(), why: why.into() }
    }
}

/// Which register file a value lives in (the inline-assembly constraint).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegisterKind {
    /// SGPRs: one value for the wavefront (`s`).
    Scalar,
    /// VGPRs: one value per lane (`v`).
    Vector,
    /// AGPRs (`a`).
    Accumulator,
}

impl RegisterKind {
    pub fn constraint(self) -> &'static str {
        match self {
            RegisterKind::Scalar => "s",
            RegisterKind::Vector => "v",
            RegisterKind::Accumulator => "a",
        }
    }

    /// The kind an application register's value is read into.
    pub fn of(register: Register) -> RegisterKind {
        if register.is_vector() {
            RegisterKind::Vector
        } else {
            RegisterKind::Scalar
        }
    }
}

/// How the placeholder passes one IR argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgumentLowering {
    /// In a register of this kind: an operand of the MIR callback.
    Register(RegisterKind),
    /// Consumed by the IR callback (a constant it recorded); no operand.
    Dropped,
}

/// What the IR callback decided; handed back to the MIR callback.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IrLowering {
    /// Register kind of the result; `None` for `void`.
    pub result: Option<RegisterKind>,
    /// One entry per IR argument.
    pub arguments: Vec<ArgumentLowering>,
    /// Application registers (32-bit pieces) the MIR callback reads.
    pub reads: Vec<Register>,
    /// Application registers (32-bit pieces) the MIR callback writes.
    pub writes: Vec<Register>,
    pub kernel_arguments: Vec<KernelArgument>,
    /// Keep the call even when its result is unused (writes, memory).
    pub side_effects: bool,
    /// Anything else the MIR callback needs (constants of the call).
    pub data: Vec<i64>,
}

/// A virtual register of the payload being lowered (`%12`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VirtualRegister(pub u32);

impl fmt::Display for VirtualRegister {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// A register class: a kind and a width in bits (32, 64, 96, 128, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegisterClass {
    pub kind: RegisterKind,
    pub bits: u32,
}

impl RegisterClass {
    pub const fn scalar(bits: u32) -> Self {
        RegisterClass { kind: RegisterKind::Scalar, bits }
    }
    pub const fn vector(bits: u32) -> Self {
        RegisterClass { kind: RegisterKind::Vector, bits }
    }
}

/// One operand of an instruction the MIR callback builds, in the order
/// LLVM's instruction description lists them (defs first). Implicit
/// operands (SCC, EXEC, ...) are added by the builder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MirOperand {
    Def(VirtualRegister),
    Use(VirtualRegister),
    /// The 32-bit piece `n` of a wider virtual register (`%3.sub1`).
    UsePiece(VirtualRegister, u8),
    /// A physical register, written directly (`$exec = COPY %4`): only for
    /// registers whose new value the rest of the payload must run with.
    DefPhysical(Register),
    UsePhysical(Register),
    Immediate(i64),
    /// A 32-bit word of a shared payload's per-point constant: the symbol
    /// the driver replaces with each point's value
    /// ([`crate::builtins::point_constant`]).
    PointConstant {
        slot: u32,
        high: bool,
    },
    /// In `REG_SEQUENCE`: the piece the register before it fills (`%subreg.sub1`).
    Piece(u8),
    /// What memory the instruction touches. Give one on every load, store
    /// or atomic: without it LLVM must assume a sequentially consistent
    /// system-scope access and surrounds it with cache flushes.
    Memory(MemoryOperand),
}

/// How an instruction accesses memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryAccess {
    Load,
    Store,
    /// Read-modify-write (atomics).
    LoadStore,
}

/// A memory operand: access, size and address space, and whether the
/// access is a relaxed (monotonic) atomic at agent scope or a load of
/// memory that never changes during the dispatch (kernel arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryOperand {
    pub access: MemoryAccess,
    pub bits: u32,
    pub address_space: u32,
    pub atomic: bool,
    pub invariant: bool,
}

impl MemoryOperand {
    /// A load of kernel-argument memory (constant address space, never changes).
    pub const fn kernel_argument_load(bits: u32) -> Self {
        MemoryOperand { access: MemoryAccess::Load, bits, address_space: 4, atomic: false, invariant: true }
    }

    /// A relaxed atomic read-modify-write of global memory.
    pub const fn global_atomic(bits: u32) -> Self {
        MemoryOperand { access: MemoryAccess::LoadStore, bits, address_space: 1, atomic: true, invariant: false }
    }
}

impl fmt::Display for MemoryOperand {
    /// MIR's spelling: `(load store syncscope("agent") monotonic (s64), addrspace 1)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        if self.invariant {
            f.write_str("dereferenceable invariant ")?;
        }
        if self.atomic {
            f.write_str("volatile ")?;
        }
        f.write_str(match self.access {
            MemoryAccess::Load => "load",
            MemoryAccess::Store => "store",
            MemoryAccess::LoadStore => "load store",
        })?;
        if self.atomic {
            f.write_str(" syncscope(\"agent\") monotonic")?;
        }
        write!(f, " (s{}), addrspace {})", self.bits, self.address_space)
    }
}

/// The virtual registers of a placeholder: its result (if any) and one
/// entry per IR argument (`None` for dropped arguments).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MirOperands {
    pub result: Option<VirtualRegister>,
    pub arguments: Vec<Option<VirtualRegister>>,
}

impl MirOperands {
    pub fn result(&self, intrinsic: &str) -> Result<VirtualRegister, IntrinsicError> {
        self.result.ok_or_else(|| IntrinsicError::Lowering {
            intrinsic: intrinsic.to_string(),
            why: "the placeholder has no result register".into(),
        })
    }

    pub fn argument(&self, intrinsic: &str, index: usize) -> Result<VirtualRegister, IntrinsicError> {
        self.arguments.get(index).copied().flatten().ok_or_else(|| IntrinsicError::Lowering {
            intrinsic: intrinsic.to_string(),
            why: format!("argument {index} has no register"),
        })
    }
}

/// What the MIR callback may do. Instructions go where the placeholder was,
/// in the order they are built.
pub trait MirBuilder {
    fn new_register(&mut self, class: RegisterClass) -> VirtualRegister;

    /// Builds `opcode` (an LLVM pseudo opcode name such as `S_ADD_U32`) with
    /// the explicit operands; unknown opcodes are errors.
    fn build(&mut self, opcode: &str, operands: &[MirOperand]) -> Result<(), IntrinsicError>;

    /// A virtual register holding the value a 32-bit application register
    /// has here: its value at the instrumentation point, or what an earlier
    /// intrinsic wrote to it. The register must be in the IR lowering's `reads`.
    fn physical_register(&mut self, register: Register) -> Result<VirtualRegister, IntrinsicError>;

    /// From here on (and when the payload returns) the 32-bit application
    /// register holds `value`. The register must be in the IR lowering's `writes`.
    fn write_physical_register(&mut self, register: Register, value: VirtualRegister) -> Result<(), IntrinsicError>;

    /// A scalar virtual register (or a vector one, for work-item ids) with
    /// the kernel argument's value, read from the State Value Array.
    fn kernel_argument(&mut self, argument: KernelArgument) -> Result<VirtualRegister, IntrinsicError>;

    fn target(&self) -> &TargetInfo;

    /// `result` = the 64-bit value of two 32-bit registers (`REG_SEQUENCE`).
    fn build_pair(
        &mut self,
        result: VirtualRegister,
        low: VirtualRegister,
        high: VirtualRegister,
    ) -> Result<(), IntrinsicError> {
        self.build(
            "REG_SEQUENCE",
            &[
                MirOperand::Def(result),
                MirOperand::Use(low),
                MirOperand::Piece(0),
                MirOperand::Use(high),
                MirOperand::Piece(1),
            ],
        )
    }
}

/// A framework intrinsic: its qualified name and its two lowering steps.
pub trait Intrinsic: Send + Sync {
    /// Qualified name, as in the `gpuinstr_intrinsic` attribute (`gpuinstr::readReg`).
    fn name(&self) -> &str;

    /// Checks a call and decides constraints and requests.
    fn lower_ir(&self, call: &IrCall<'_>) -> Result<IrLowering, IntrinsicError>;

    /// Replaces the placeholder with instructions.
    fn lower_mir(
        &self,
        lowering: &IrLowering,
        operands: &MirOperands,
        builder: &mut dyn MirBuilder,
    ) -> Result<(), IntrinsicError>;
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum IntrinsicError {
    #[error("{intrinsic}: {why}")]
    WrongSignature { intrinsic: String, why: String },
    #[error("{intrinsic}: argument {index} must be a compile-time constant")]
    NotConstant { intrinsic: String, index: usize },
    #[error("{register} does not exist on {processor} (it has {limit})")]
    RegisterOutOfRange { register: Register, processor: String, limit: u16 },
    #[error(transparent)]
    Register(#[from] RegisterError),
    #[error("{intrinsic}: {why}")]
    Lowering { intrinsic: String, why: String },
    #[error("unknown opcode `{0}` (expected an LLVM AMDGPU pseudo opcode name such as S_ADD_U32)")]
    UnknownOpcode(String),
    #[error("{0}")]
    Builder(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_parse_from_intrinsic_spelling() {
        for text in ["void", "i1", "i32", "i64", "f32", "f64", "p0", "p1", "p4", "v2i32", "v4f32"] {
            let ty = IrType::parse(text).unwrap();
            assert_eq!(ty.to_string(), text);
        }
        assert_eq!(IrType::parse("p3").unwrap().bits(), 32);
        assert_eq!(IrType::parse("p1").unwrap().bits(), 64);
        assert_eq!(IrType::parse("v2i32").unwrap().bits(), 64);
        assert_eq!(IrType::parse("bf16"), Some(IrType::Float(16)));
        assert_eq!(IrType::parse("x86_fp80"), None);
    }

    #[test]
    fn registers_beyond_the_target_are_rejected() {
        let target = TargetInfo::for_processor("gfx90a");
        assert!(target.check_register(Register::Sgpr(101)).is_ok());
        let error = target.check_register(Register::Sgpr(102)).unwrap_err();
        assert_eq!(error.to_string(), "s102 does not exist on gfx90a (it has 102)");
        assert!(target.check_register(Register::Vgpr(256)).is_err());
    }
}
