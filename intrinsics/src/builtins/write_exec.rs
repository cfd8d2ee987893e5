//! `void gpuinstr::writeExec(uint64_t)`: the EXEC mask the rest of the
//! payload runs with. The application's EXEC comes back when the payload
//! returns (EXEC is a live-in copied back on every return).

use crate::lowering::{
    ArgumentLowering, Intrinsic, IntrinsicError, IrCall, IrLowering, MirBuilder, MirOperand, MirOperands, RegisterKind,
};
use crate::registers::{Register, SpecialRegister};

pub struct WriteExec;

pub const NAME: &str = "gpuinstr::writeExec";

impl Intrinsic for WriteExec {
    fn name(&self) -> &str {
        NAME
    }

    fn lower_ir(&self, call: &IrCall<'_>) -> Result<IrLowering, IntrinsicError> {
        call.expect_arguments(1)?;
        if call.arguments[0].ty.bits() != 64 || !call.arguments[0].ty.is_integer_or_pointer() {
            return Err(call.wrong(format!("takes the 64-bit mask (i64), not {}", call.arguments[0].ty)));
        }
        Ok(IrLowering {
            result: None,
            arguments: vec![ArgumentLowering::Register(RegisterKind::Scalar)],
            side_effects: true,
            ..IrLowering::default()
        })
    }

    fn lower_mir(
        &self,
        _lowering: &IrLowering,
        operands: &MirOperands,
        builder: &mut dyn MirBuilder,
    ) -> Result<(), IntrinsicError> {
        let mask = operands.argument(NAME, 0)?;
        builder
            .build("COPY", &[MirOperand::DefPhysical(Register::Special(SpecialRegister::Exec)), MirOperand::Use(mask)])
    }
}
