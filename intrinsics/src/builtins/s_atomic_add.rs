//! `void gpuinstr::sAtomicAdd<T>(T *, T)`: one scalar atomic add per
//! wavefront (`s_atomic_add`/`s_atomic_add_x2`), whatever EXEC is.

use crate::lowering::{
    ArgumentLowering, Intrinsic, IntrinsicError, IrCall, IrLowering, IrType, MemoryOperand, MirBuilder, MirOperand,
    MirOperands, RegisterClass, RegisterKind,
};

pub struct SAtomicAdd;

pub const NAME: &str = "gpuinstr::sAtomicAdd";

impl Intrinsic for SAtomicAdd {
    fn name(&self) -> &str {
        NAME
    }

    fn lower_ir(&self, call: &IrCall<'_>) -> Result<IrLowering, IntrinsicError> {
        call.expect_arguments(2)?;
        match call.arguments[0].ty {
            IrType::Pointer { address_space: 0 | 1 } => {}
            ref other => return Err(call.wrong(format!("needs a global or generic pointer, not {other}"))),
        }
        let bits = match call.arguments[1].ty {
            IrType::Int(bits @ (32 | 64)) => bits,
            ref other => return Err(call.wrong(format!("adds 32- or 64-bit integers, not {other}"))),
        };
        Ok(IrLowering {
            result: None,
            arguments: vec![
                ArgumentLowering::Register(RegisterKind::Scalar),
                ArgumentLowering::Register(RegisterKind::Scalar),
            ],
            side_effects: true,
            data: vec![i64::from(bits)],
            ..IrLowering::default()
        })
    }

    fn lower_mir(
        &self,
        lowering: &IrLowering,
        operands: &MirOperands,
        builder: &mut dyn MirBuilder,
    ) -> Result<(), IntrinsicError> {
        let address = operands.argument(NAME, 0)?;
        let value = operands.argument(NAME, 1)?;
        let bits = if lowering.data.first() == Some(&64) { 64 } else { 32 };
        // The returning pseudo with GLC clear: LLVM 15's scheduler crashes on
        // the non-returning SMEM atomic pseudos (no sdst to size), and GLC=0
        // encodes the same non-returning instruction. The "result" is never
        // read; it only tells the allocator the data register is consumed.
        let opcode = if bits == 64 { "S_ATOMIC_ADD_X2_IMM_RTN" } else { "S_ATOMIC_ADD_IMM_RTN" };
        let unused = builder.new_register(RegisterClass::scalar(bits));
        builder.build(
            opcode,
            &[
                MirOperand::Def(unused),
                MirOperand::Use(value),
                MirOperand::Use(address),
                MirOperand::Immediate(0),
                MirOperand::Immediate(0),
                MirOperand::Memory(MemoryOperand::global_atomic(bits)),
            ],
        )
    }
}
