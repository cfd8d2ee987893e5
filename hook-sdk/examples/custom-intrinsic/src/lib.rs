//! The lowerings of `mytool::hwId` and `mytool::clock` (declared in
//! tool.hip): each an [`Intrinsic`] with an IR callback (check the call,
//! choose register kinds) and a MIR callback (build the instruction).

use gpuinstr_intrinsics::{
    Intrinsic, IntrinsicError, IrCall, IrLowering, IrType, MirBuilder, MirOperand, MirOperands, RegisterKind, Registry,
};

/// `uint32_t mytool::hwId()`: `s_getreg_b32 hwreg(HW_REG_HW_ID)`.
pub struct HwId;

/// hwreg(HW_REG_HW_ID, 0, 32): register 4, offset 0, size 32 (size - 1 in bits 15..11).
const HW_REG_HW_ID: i64 = 4 | (31 << 11);

impl Intrinsic for HwId {
    fn name(&self) -> &str {
        "mytool::hwId"
    }

    fn lower_ir(&self, call: &IrCall<'_>) -> Result<IrLowering, IntrinsicError> {
        call.expect_arguments(0)?;
        if call.result != IrType::Int(32) {
            return Err(call.wrong(format!("returns a 32-bit integer, not {}", call.result)));
        }
        // One value per wavefront: an SGPR.
        Ok(IrLowering { result: Some(RegisterKind::Scalar), ..IrLowering::default() })
    }

    fn lower_mir(
        &self,
        _lowering: &IrLowering,
        operands: &MirOperands,
        builder: &mut dyn MirBuilder,
    ) -> Result<(), IntrinsicError> {
        let result = operands.result(self.name())?;
        builder.build("S_GETREG_B32", &[MirOperand::Def(result), MirOperand::Immediate(HW_REG_HW_ID)])
    }
}

/// `uint64_t mytool::clock()`: `s_memtime`.
pub struct Clock;

impl Intrinsic for Clock {
    fn name(&self) -> &str {
        "mytool::clock"
    }

    fn lower_ir(&self, call: &IrCall<'_>) -> Result<IrLowering, IntrinsicError> {
        call.expect_arguments(0)?;
        if call.result != IrType::Int(64) {
            return Err(call.wrong(format!("returns a 64-bit integer, not {}", call.result)));
        }
        // Reading the clock must happen where the hook says: side effects
        // keep LLVM from moving or merging the reads.
        Ok(IrLowering { result: Some(RegisterKind::Scalar), side_effects: true, ..IrLowering::default() })
    }

    fn lower_mir(
        &self,
        _lowering: &IrLowering,
        operands: &MirOperands,
        builder: &mut dyn MirBuilder,
    ) -> Result<(), IntrinsicError> {
        let result = operands.result(self.name())?;
        builder.build("S_MEMTIME", &[MirOperand::Def(result)])
    }
}

/// The built-ins plus this tool's intrinsics.
pub fn registry() -> Registry {
    let mut registry = Registry::with_builtins();
    registry.register(Box::new(HwId)).expect("mytool::hwId is new");
    registry.register(Box::new(Clock)).expect("mytool::clock is new");
    registry
}

/// What the example program does: compiles the tool's `hook` for the entry
/// of every kernel of `app` with [`registry`], and lists each payload's
/// machine code.
pub fn kernel_entry_payloads(
    tool: &std::path::Path,
    app: &std::path::Path,
    target: Option<&str>,
    hook: &str,
) -> Result<String, Box<dyn std::error::Error>> {
    use gpuinstr::pipeline::{lift, liveness, load, one_code_object};
    use gpuinstr::stages::payload::HookCall;
    use gpuinstr::stages::payload::PayloadPoint;
    use gpuinstr::stages::payloads::{compile_payloads, PayloadOptions};
    use std::fmt::Write;

    let tool = one_code_object(load(tool)?, None)?;
    let app = one_code_object(load(app)?, target)?;
    let lifted = lift(&app)?;
    let liveness = liveness(&lifted)?;
    let points: Vec<PayloadPoint> = lifted
        .functions
        .iter()
        .enumerate()
        .filter(|(_, f)| f.is_kernel())
        .map(|(function, _)| PayloadPoint {
            function,
            instruction: 0,
            calls: vec![HookCall { hook: hook.to_string(), arguments: vec![] }],
        })
        .collect();
    let compiled = compile_payloads(&tool, &lifted, &liveness, &points, &registry(), &PayloadOptions::default())?;
    let mut listing = String::new();
    for payload in &compiled.payloads {
        writeln!(listing, "{}:", payload.label)?;
        for line in payload.code.iter() {
            writeln!(listing, "{}{line}", if line.ends_with(':') { "" } else { "    " })?;
        }
    }
    Ok(listing)
}
