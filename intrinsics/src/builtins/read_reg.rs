//! `T gpuinstr::readReg<T>(Reg)`: an application register's value.

use crate::lowering::{
    ArgumentLowering, Intrinsic, IntrinsicError, IrCall, IrLowering, MirBuilder, MirOperand, MirOperands, RegisterKind,
};
use crate::registers::Register;

pub struct ReadReg;

pub const NAME: &str = "gpuinstr::readReg";

/// The register named by a constant register-code argument, checked against
/// the target, split into the 32-bit pieces a `bits`-wide access covers.
pub(crate) fn register_argument(call: &IrCall<'_>, index: usize, bits: u32) -> Result<Vec<Register>, IntrinsicError> {
    let code = call.constant(index)?;
    let register = u32::try_from(code)
        .map_err(|_| call.wrong(format!("{code:#x} is not a register code")))
        .and_then(|code| Register::decode(code).map_err(|e| call.wrong(e.to_string())))?;
    let pieces = register.pieces(bits).map_err(|e| call.wrong(e.to_string()))?;
    for piece in &pieces {
        call.target.check_register(*piece)?;
    }
    Ok(pieces)
}

impl Intrinsic for ReadReg {
    fn name(&self) -> &str {
        NAME
    }

    fn lower_ir(&self, call: &IrCall<'_>) -> Result<IrLowering, IntrinsicError> {
        call.expect_arguments(1)?;
        if call.arguments[0].ty.bits() != 32 {
            return Err(call.wrong("the register argument must be a gpuinstr::Reg (i32)"));
        }
        let bits = call.result.bits();
        if bits != 32 && bits != 64 {
            return Err(call.wrong(format!("reads 32- or 64-bit values, not {}", call.result)));
        }
        let pieces = register_argument(call, 0, bits)?;
        Ok(IrLowering {
            result: Some(RegisterKind::of(pieces[0])),
            arguments: vec![ArgumentLowering::Dropped],
            reads: pieces,
            ..IrLowering::default()
        })
    }

    fn lower_mir(
        &self,
        lowering: &IrLowering,
        operands: &MirOperands,
        builder: &mut dyn MirBuilder,
    ) -> Result<(), IntrinsicError> {
        let result = operands.result(NAME)?;
        let values =
            lowering.reads.iter().map(|piece| builder.physical_register(*piece)).collect::<Result<Vec<_>, _>>()?;
        match values.as_slice() {
            [value] => builder.build("COPY", &[MirOperand::Def(result), MirOperand::Use(*value)]),
            [low, high] => builder.build_pair(result, *low, *high),
            _ => Err(IntrinsicError::Lowering { intrinsic: NAME.into(), why: "reads one or two registers".into() }),
        }
    }
}
