//! Stage 6, lower-ir: LLVM's standard O3 pipeline on the payload module
//! (hooks inline into payloads), then each framework intrinsic's IR callback
//! turns its calls into inline-assembly placeholders that instruction
//! selection keeps: `call asm "; gpuinstr-intrinsic 7", "=s,v"(...)`. The
//! placeholder's number indexes the list this stage returns, which carries
//! the callback's decisions to the MIR stage.

use std::collections::{BTreeMap, BTreeSet};

use gpuinstr_intrinsics::naming::{intrinsic_types, INTRINSIC_ATTRIBUTE};
use gpuinstr_intrinsics::{
    ArgumentLowering, IntrinsicError, IrArgument, IrCall, IrLowering, IrType, Registry, TargetInfo,
};
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple};
use inkwell::types::{BasicMetadataTypeEnum, BasicType};
use inkwell::values::{BasicMetadataValueEnum, BasicValue, BasicValueEnum, FunctionValue};
use inkwell::OptimizationLevel;
use thiserror::Error;

use crate::stages::load::TargetId;
use crate::stages::payload::{calls, name, reachable_functions};

/// The asm string of placeholder `id`.
pub fn placeholder_text(id: usize) -> String {
    format!("; gpuinstr-intrinsic {id}")
}

/// One intrinsic call, replaced by a placeholder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placeholder {
    pub id: usize,
    /// The payload (point index) it is in.
    pub payload: usize,
    /// Qualified intrinsic name.
    pub intrinsic: String,
    pub lowering: IrLowering,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum LowerIrError {
    #[error(
        "{caller} calls intrinsic `{intrinsic}`, which has no lowering: register it in the intrinsic registry \
         (gpuinstr-link itself knows only the built-ins; docs/custom-intrinsics.md shows a program that registers \
         a tool's own)"
    )]
    UnknownIntrinsic { intrinsic: String, caller: String },
    #[error("{point}: {error}")]
    Intrinsic { point: String, error: IntrinsicError },
    #[error("{point}: `{callee}` was not inlined into the payload (recursion?); hooks and what they call must inline")]
    NotInlined { point: String, callee: String },
    #[error("{point}: an indirect call remains in the payload; hooks cannot call through function pointers")]
    IndirectCall { point: String },
    #[error("LLVM cannot target {0}")]
    Target(String),
    #[error("the O3 pipeline failed on the payload module: {0}")]
    Optimize(String),
}

/// An LLVM target machine for the code object's target.
pub fn target_machine(target: &TargetId) -> Result<TargetMachine, LowerIrError> {
    Target::initialize_amd_gpu(&InitializationConfig::default());
    let triple = TargetTriple::create("amdgcn-amd-amdhsa");
    let llvm_target = Target::from_triple(&triple).map_err(|e| LowerIrError::Target(e.to_string()))?;
    llvm_target
        .create_target_machine(
            &triple,
            &target.processor,
            &target.llvm_features(),
            OptimizationLevel::Aggressive,
            RelocMode::PIC,
            CodeModel::Default,
        )
        .ok_or_else(|| LowerIrError::Target(target.to_string()))
}

/// Refuses intrinsics nobody can lower, before any work is done; names the
/// hook (or function) calling each. Only what the used hooks reach counts.
pub fn check_intrinsics_known(
    module: &Module<'_>,
    registry: &Registry,
    hooks: &BTreeSet<&str>,
) -> Result<(), LowerIrError> {
    for (hook, functions) in reachable_functions(module, hooks) {
        for function_name in functions {
            let function = module.get_function(&function_name).expect("reachable functions are in the module");
            for (_, callee, _) in calls(function) {
                let Some(callee) = callee.and_then(|c| module.get_function(&c)) else { continue };
                let Some(intrinsic) = intrinsic_name(callee) else { continue };
                if registry.get(&intrinsic).is_none() {
                    let caller = if function_name == hook {
                        format!("hook `{hook}`")
                    } else {
                        format!("hook `{hook}` (through `{function_name}`)")
                    };
                    return Err(LowerIrError::UnknownIntrinsic { intrinsic, caller });
                }
            }
        }
    }
    Ok(())
}

fn intrinsic_name(function: FunctionValue<'_>) -> Option<String> {
    function
        .get_string_attribute(AttributeLoc::Function, INTRINSIC_ATTRIBUTE)
        .map(|a| a.get_string_value().to_string_lossy().into_owned())
}

/// Runs `default<O3>` on the module.
pub fn optimize(module: &Module<'_>, machine: &TargetMachine) -> Result<(), LowerIrError> {
    module
        .run_passes("default<O3>", machine, PassBuilderOptions::create())
        .map_err(|e| LowerIrError::Optimize(e.to_string()))
}

/// The payload index of a payload function name.
fn payload_index(function_name: &str) -> Option<usize> {
    function_name.strip_prefix("gpuinstr.payload.")?.parse().ok()
}

/// Replaces every intrinsic call in the payloads with its placeholder.
/// `labels[i]` names point `i` in messages.
pub fn insert_placeholders<'ctx>(
    context: &'ctx Context,
    module: &Module<'ctx>,
    registry: &Registry,
    target: &TargetInfo,
    labels: &[String],
) -> Result<Vec<Placeholder>, LowerIrError> {
    let builder = context.create_builder();
    let convergent = context.create_enum_attribute(Attribute::get_named_enum_kind_id("convergent"), 0);
    let mut placeholders = Vec::new();
    let mut payloads: BTreeMap<usize, FunctionValue<'ctx>> = BTreeMap::new();
    for function in module.get_functions() {
        if let Some(index) = payload_index(&name(function)) {
            payloads.insert(index, function);
        }
    }
    for (index, payload) in payloads {
        let point = labels.get(index).cloned().unwrap_or_else(|| format!("payload {index}"));
        for (call, callee_name, is_asm) in calls(payload) {
            let Some(callee_name) = callee_name else {
                if is_asm {
                    continue;
                }
                return Err(LowerIrError::IndirectCall { point });
            };
            // A name LLVM cannot find again (not UTF-8, damaged bitcode) is
            // a call nothing can lower.
            let Some(callee) = module.get_function(&callee_name) else {
                return Err(LowerIrError::NotInlined { point, callee: callee_name.escape_debug().to_string() });
            };
            let Some(intrinsic_name) = intrinsic_name(callee) else {
                if callee_name.starts_with("llvm.") {
                    continue;
                }
                return Err(LowerIrError::NotInlined { point, callee: callee_name });
            };
            let intrinsic = registry.get(&intrinsic_name).ok_or_else(|| LowerIrError::UnknownIntrinsic {
                intrinsic: intrinsic_name.clone(),
                caller: point.clone(),
            })?;
            let fail = |error: IntrinsicError| LowerIrError::Intrinsic { point: point.clone(), error };

            // Types come from the name (`gpuinstr::readReg.i32.i32`): the plugin spelled them.
            let types = intrinsic_types(&callee_name, &intrinsic_name)
                .unwrap_or_default()
                .iter()
                .map(|t| IrType::parse(t))
                .collect::<Option<Vec<_>>>();
            let instruction = call.try_as_basic_value();
            let instruction = match instruction.basic() {
                Some(value) => value.as_instruction_value().expect("a call is an instruction"),
                None => instruction.instruction().expect("a void call is an instruction"),
            };
            let argument_count = call.count_arguments() as usize;
            let argument_values: Vec<BasicValueEnum<'ctx>> = (0..argument_count as u32)
                .map(|i| instruction.get_operand(i).and_then(|o| o.value()).expect("call arguments are values"))
                .collect();
            let Some(types) = types.filter(|t| t.len() == argument_count + 1) else {
                return Err(fail(IntrinsicError::WrongSignature {
                    intrinsic: intrinsic_name.clone(),
                    why: format!("`{callee_name}` does not spell its types as <name>.<result>.<arguments...>"),
                }));
            };
            let arguments: Vec<IrArgument> = types[1..]
                .iter()
                .zip(&argument_values)
                .map(|(ty, value)| IrArgument {
                    ty: ty.clone(),
                    constant: match value {
                        BasicValueEnum::IntValue(int) if int.is_const() => int.get_sign_extended_constant(),
                        _ => None,
                    },
                })
                .collect();
            let ir_call = IrCall { intrinsic: &intrinsic_name, result: types[0].clone(), arguments, target };
            let lowering = intrinsic.lower_ir(&ir_call).map_err(fail)?;
            if lowering.arguments.len() != argument_count {
                return Err(fail(IntrinsicError::Lowering {
                    intrinsic: intrinsic_name.clone(),
                    why: format!("the IR callback lowered {} of {argument_count} arguments", lowering.arguments.len()),
                }));
            }
            if lowering.result.is_some() != (types[0] != IrType::Void) {
                return Err(fail(IntrinsicError::Lowering {
                    intrinsic: intrinsic_name.clone(),
                    why: "the IR callback must give a register kind for the result exactly when there is one".into(),
                }));
            }

            let mut constraints = Vec::new();
            if let Some(kind) = lowering.result {
                constraints.push(format!("={}", kind.constraint()));
            }
            let mut operand_types: Vec<BasicMetadataTypeEnum> = Vec::new();
            let mut operands: Vec<BasicMetadataValueEnum> = Vec::new();
            for (how, value) in lowering.arguments.iter().zip(&argument_values) {
                if let ArgumentLowering::Register(kind) = how {
                    constraints.push(kind.constraint().to_string());
                    operand_types.push(value.get_type().into());
                    operands.push((*value).into());
                }
            }
            let asm_type = match callee.get_type().get_return_type() {
                Some(result) => result.fn_type(&operand_types, false),
                None => context.void_type().fn_type(&operand_types, false),
            };
            let id = placeholders.len();
            let asm = context.create_inline_asm(
                asm_type,
                placeholder_text(id),
                constraints.join(","),
                lowering.side_effects,
                false,
                None,
                false,
            );
            builder.position_before(&instruction);
            let replacement = builder.build_indirect_call(asm_type, asm, &operands, "").expect("builder is positioned");
            replacement.add_attribute(AttributeLoc::Function, convergent);
            if let Some(value) = replacement.try_as_basic_value().basic() {
                instruction.replace_all_uses_with(&value.as_instruction_value().expect("a call is an instruction"));
            }
            instruction.erase_from_basic_block();
            placeholders.push(Placeholder { id, payload: index, intrinsic: intrinsic_name, lowering });
        }
    }
    Ok(placeholders)
}
