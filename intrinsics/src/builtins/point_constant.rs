//! `gpuinstr::pointConstant(slot)`: a constant whose value differs from one
//! instrumentation point to the next (the instruction's address, its
//! opcode, ...). The driver, not tools, calls it: where alike points share
//! one compiled payload, their differing constants become these, so LLVM
//! cannot fold any one value into the code. Each 32-bit word is an
//! `s_mov_b32` of an external symbol ([`symbol`]); the driver writes each
//! point's own value in its place. No pass folds or evaluates a symbol, so
//! every use of the value still reads it from that move.

use crate::lowering::{
    ArgumentLowering, Intrinsic, IntrinsicError, IrCall, IrLowering, MirBuilder, MirOperand, MirOperands,
    RegisterClass, RegisterKind,
};

pub struct PointConstant;

pub const NAME: &str = "gpuinstr::pointConstant";

/// The symbol standing for word `high` (0: bits 0-31, 1: bits 32-63) of
/// constant `slot` in a shared payload's code.
pub fn symbol(slot: u32, high: bool) -> String {
    format!("gpuinstr.point.{slot}.{}", if high { "hi" } else { "lo" })
}

/// The prefix every [`symbol`] starts with.
pub const SYMBOL_PREFIX: &str = "gpuinstr.point.";

impl Intrinsic for PointConstant {
    fn name(&self) -> &str {
        NAME
    }

    fn lower_ir(&self, call: &IrCall<'_>) -> Result<IrLowering, IntrinsicError> {
        call.expect_arguments(1)?;
        let slot = call.constant(0)?;
        if !(0..=i64::from(u16::MAX)).contains(&slot) {
            return Err(call.wrong(format!("slot {slot} is out of range")));
        }
        let bits = call.result.bits();
        if !call.result.is_integer_or_pointer() || (bits != 32 && bits != 64) {
            return Err(call.wrong(format!("gives a 32- or 64-bit integer, not {}", call.result)));
        }
        Ok(IrLowering {
            result: Some(RegisterKind::Scalar),
            arguments: vec![ArgumentLowering::Dropped],
            data: vec![slot, i64::from(bits)],
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
        let [slot, bits] = lowering.data[..] else {
            return Err(IntrinsicError::Lowering { intrinsic: NAME.into(), why: "no slot recorded".into() });
        };
        let slot = slot as u32;
        if bits == 32 {
            return builder
                .build("S_MOV_B32", &[MirOperand::Def(result), MirOperand::PointConstant { slot, high: false }]);
        }
        let low = builder.new_register(RegisterClass::scalar(32));
        let high = builder.new_register(RegisterClass::scalar(32));
        builder.build("S_MOV_B32", &[MirOperand::Def(low), MirOperand::PointConstant { slot, high: false }])?;
        builder.build("S_MOV_B32", &[MirOperand::Def(high), MirOperand::PointConstant { slot, high: true }])?;
        builder.build_pair(result, low, high)
    }
}
