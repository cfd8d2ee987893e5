//! `void gpuinstr::sAtomicAdd<T>(T *, T)`: one scalar atomic add per
//! wavefront (`s_atomic_add`/`s_atomic_add_x2`), whatever EXEC is.

use crate::lowering::{
    ArgumentLowering, Intrinsic, IntrinsicError, IrCall, IrLowering, IrType, MirBuilder, MirOperand, MirOperands,
    RegisterKind,
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
        let opcode = if lowering.data.first() == Some(&64) { "S_ATOMIC_ADD_X2_IMM" } else { "S_ATOMIC_ADD_IMM" };
        builder.build(
            opcode,
            &[MirOperand::Use(value), MirOperand::Use(address), MirOperand::Immediate(0), MirOperand::Immediate(0)],
        )
    }
}
