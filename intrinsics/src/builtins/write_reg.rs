//! `void gpuinstr::writeReg<T>(Reg, T)`: sets an application register; the
//! application sees the value after the instrumentation point. The rest of
//! the payload keeps running with the register's old value in hardware
//! (writing EXEC this way does not change the payload's own mask; that is
//! `writeExec`).

use super::read_reg::register_argument;
use crate::lowering::{
    ArgumentLowering, Intrinsic, IntrinsicError, IrCall, IrLowering, MirBuilder, MirOperand, MirOperands,
    RegisterClass, RegisterKind,
};

pub struct WriteReg;

pub const NAME: &str = "gpuinstr::writeReg";

impl Intrinsic for WriteReg {
    fn name(&self) -> &str {
        NAME
    }

    fn lower_ir(&self, call: &IrCall<'_>) -> Result<IrLowering, IntrinsicError> {
        call.expect_arguments(2)?;
        if call.arguments[0].ty.bits() != 32 {
            return Err(call.wrong("the register argument must be a gpuinstr::Reg (i32)"));
        }
        let bits = call.arguments[1].ty.bits();
        if bits != 32 && bits != 64 {
            return Err(call.wrong(format!("writes 32- or 64-bit values, not {}", call.arguments[1].ty)));
        }
        let pieces = register_argument(call, 0, bits)?;
        let kind = RegisterKind::of(pieces[0]);
        Ok(IrLowering {
            result: None,
            arguments: vec![ArgumentLowering::Dropped, ArgumentLowering::Register(kind)],
            writes: pieces,
            side_effects: true,
            ..IrLowering::default()
        })
    }

    fn lower_mir(
        &self,
        lowering: &IrLowering,
        operands: &MirOperands,
        builder: &mut dyn MirBuilder,
    ) -> Result<(), IntrinsicError> {
        let value = operands.argument(NAME, 1)?;
        let wide = lowering.writes.len() > 1;
        for (index, piece) in lowering.writes.iter().enumerate() {
            let class = RegisterClass { kind: RegisterKind::of(*piece), bits: 32 };
            let copy = builder.new_register(class);
            let source = if wide { MirOperand::UsePiece(value, index as u8) } else { MirOperand::Use(value) };
            builder.build("COPY", &[MirOperand::Def(copy), source])?;
            builder.write_physical_register(*piece, copy)?;
        }
        Ok(())
    }
}
