//! The intrinsics that read the instrumented kernel's launch state (the
//! ones the plugin substitutes for `llvm.amdgcn.*`): each reads one kernel
//! argument from the State Value Array. `implicitArgPtr` adds the hidden
//! argument offset to the kernarg pointer, as in seed 004.

use crate::lowering::{
    Intrinsic, IntrinsicError, IrCall, IrLowering, MirBuilder, MirOperand, MirOperands, RegisterClass, RegisterKind,
};
use crate::sva::KernelArgument;

/// An intrinsic whose value is one kernel argument.
pub struct KernelState {
    pub name: &'static str,
    pub argument: KernelArgument,
}

use KernelArgument as K;

pub const KERNEL_STATE: &[KernelState] = &[
    KernelState { name: "gpuinstr::kernargPtr", argument: K::KernargSegmentPtr },
    KernelState { name: "gpuinstr::dispatchPtr", argument: K::DispatchPtr },
    KernelState { name: "gpuinstr::queuePtr", argument: K::QueuePtr },
    KernelState { name: "gpuinstr::implicitBufferPtr", argument: K::ImplicitBufferPtr },
    KernelState { name: "gpuinstr::dispatchId", argument: K::DispatchId },
    KernelState { name: "gpuinstr::ldsKernelId", argument: K::LdsKernelId },
    KernelState { name: "gpuinstr::workgroupIdX", argument: K::WorkgroupIdX },
    KernelState { name: "gpuinstr::workgroupIdY", argument: K::WorkgroupIdY },
    KernelState { name: "gpuinstr::workgroupIdZ", argument: K::WorkgroupIdZ },
    KernelState { name: "gpuinstr::workitemIdX", argument: K::WorkItemIdX },
    KernelState { name: "gpuinstr::workitemIdY", argument: K::WorkItemIdY },
    KernelState { name: "gpuinstr::workitemIdZ", argument: K::WorkItemIdZ },
];

fn check_result(call: &IrCall<'_>, bits: u32) -> Result<(), IntrinsicError> {
    call.expect_arguments(0)?;
    if call.result.bits() != bits || !call.result.is_integer_or_pointer() {
        return Err(call.wrong(format!("returns a {bits}-bit integer or pointer, not {}", call.result)));
    }
    Ok(())
}

impl Intrinsic for KernelState {
    fn name(&self) -> &str {
        self.name
    }

    fn lower_ir(&self, call: &IrCall<'_>) -> Result<IrLowering, IntrinsicError> {
        check_result(call, self.argument.bits())?;
        let per_lane = matches!(self.argument, K::WorkItemIdX | K::WorkItemIdY | K::WorkItemIdZ);
        Ok(IrLowering {
            result: Some(if per_lane { RegisterKind::Vector } else { RegisterKind::Scalar }),
            kernel_arguments: vec![self.argument],
            ..IrLowering::default()
        })
    }

    fn lower_mir(
        &self,
        _lowering: &IrLowering,
        operands: &MirOperands,
        builder: &mut dyn MirBuilder,
    ) -> Result<(), IntrinsicError> {
        let result = operands.result(self.name)?;
        let value = builder.kernel_argument(self.argument)?;
        builder.build("COPY", &[MirOperand::Def(result), MirOperand::Use(value)])
    }
}

/// `const void *gpuinstr::implicitArgPtr()`: kernarg pointer + the offset of
/// the first hidden argument.
pub struct ImplicitArgPtr;

pub const IMPLICIT_ARG_PTR: &str = "gpuinstr::implicitArgPtr";

impl Intrinsic for ImplicitArgPtr {
    fn name(&self) -> &str {
        IMPLICIT_ARG_PTR
    }

    fn lower_ir(&self, call: &IrCall<'_>) -> Result<IrLowering, IntrinsicError> {
        check_result(call, 64)?;
        Ok(IrLowering {
            result: Some(RegisterKind::Scalar),
            kernel_arguments: vec![K::KernargSegmentPtr, K::HiddenKernargOffset],
            ..IrLowering::default()
        })
    }

    fn lower_mir(
        &self,
        _lowering: &IrLowering,
        operands: &MirOperands,
        builder: &mut dyn MirBuilder,
    ) -> Result<(), IntrinsicError> {
        let result = operands.result(IMPLICIT_ARG_PTR)?;
        let kernarg = builder.kernel_argument(K::KernargSegmentPtr)?;
        let offset = builder.kernel_argument(K::HiddenKernargOffset)?;
        let low = builder.new_register(RegisterClass::scalar(32));
        let high = builder.new_register(RegisterClass::scalar(32));
        builder
            .build("S_ADD_U32", &[MirOperand::Def(low), MirOperand::UsePiece(kernarg, 0), MirOperand::Use(offset)])?;
        builder.build(
            "S_ADDC_U32",
            &[MirOperand::Def(high), MirOperand::UsePiece(kernarg, 1), MirOperand::Immediate(0)],
        )?;
        builder.build_pair(result, low, high)
    }
}
