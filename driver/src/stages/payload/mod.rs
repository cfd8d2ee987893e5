//! Stage 5, payload: one LLVM IR module per code object holding, for every
//! instrumentation point, an "injected payload" (seed 004): a naked,
//! argument-less `void` function that calls the point's hooks. Hook
//! arguments are constants, or application registers read with
//! `gpuinstr::readReg`.
//!
//! The tool's functions become internal and always-inline (hooks are
//! inlined into payloads by the next stage's O3 pipeline; nothing of the tool
//! is emitted on its own), and lose their `target-cpu`/`target-features`: the
//! payloads are compiled for the application's target.

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use gpuinstr_intrinsics::naming::{intrinsic_function_name, HOOK_ATTRIBUTE, INTRINSIC_ATTRIBUTE};
use gpuinstr_intrinsics::{
    builtins::{point_constant, read_reg},
    Register,
};
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::types::BasicMetadataTypeEnum;
use inkwell::values::AnyValue;
use inkwell::values::{BasicMetadataValueEnum, CallSiteValue, FunctionValue, InstructionOpcode};
use thiserror::Error;

use addresses::AddressBuilder;

mod addresses;

/// Name of the payload function of point `index`.
pub fn payload_name(index: usize) -> String {
    format!("gpuinstr.payload.{index}")
}

/// What a hook receives for one parameter.
#[derive(Clone, Debug, PartialEq)]
pub enum HookArgument {
    /// An integer or boolean constant (`true` is 1).
    Int(i64),
    Float(f64),
    /// The value an application register has at the point.
    Register(Register),
    /// A 64-bit address computed at the point: the 64-bit value of `base`
    /// (a register pair), plus the zero-extended 32-bit `index` register,
    /// plus `offset` (a flat or global instruction's address operands).
    MemoryAddress {
        base: Register,
        index: Option<Register>,
        offset: i64,
    },
    /// A `ds_*` instruction's LDS address: the 32-bit `address` register
    /// plus `offset`, added in 32 bits (as the hardware adds them),
    /// zero-extended to 64.
    LdsAddress {
        address: Register,
        offset: i64,
    },
    /// A buffer instruction's address: a hook given one runs only on the
    /// lanes whose access is in the buffer's range (the others access
    /// nothing) and not scratch.
    BufferAddress(BufferAddress),
}

/// A buffer (MUBUF) instruction's address operands. A lane accesses the
/// resource's base, plus the SGPR offset, plus its offset in the buffer:
/// `index * stride + offset` (a swizzled resource interleaves elements of
/// `index_stride` indices), where `offset` is the instruction's offset
/// plus (`offen`) its VGPR offset and `index` (`idxen`) its VGPR index
/// (plus its lane with `add_tid`). Out of range (raw buffers: the first
/// dword's end past `num_records`, the SGPR offset not counted;
/// structured buffers: an index from `num_records` on) it accesses
/// nothing; swizzled resources are not range-checked. The hook does not
/// run on lanes out of range, nor on accesses through an `add_tid`
/// resource (the private segment buffer's: scratch, whose addresses move
/// with the scratch instrumentation adds).
#[derive(Clone, Debug, PartialEq)]
pub struct BufferAddress {
    /// The resource's four SGPRs (its V#).
    pub resource: [Register; 4],
    /// The VGPR index (`idxen`).
    pub index: Option<Register>,
    /// The VGPR offset (`offen`).
    pub voffset: Option<Register>,
    /// The SGPR offset: a register, else an inline constant.
    pub soffset: Option<Register>,
    pub soffset_constant: i64,
    /// The instruction's offset.
    pub offset: i64,
    /// Bytes the range check covers: the first dword's (1, 2 or 4), or a
    /// 64-bit atomic's 8.
    pub checked_bytes: u8,
}

impl BufferAddress {
    /// Every register it reads.
    pub fn registers(&self) -> impl Iterator<Item = Register> + '_ {
        self.resource.iter().copied().chain(self.index).chain(self.voffset).chain(self.soffset)
    }
}

impl HookArgument {
    /// An address argument as it is but for the instruction's offset
    /// (which points sharing a payload may have apart: it becomes a point
    /// constant); `None` for other arguments.
    pub fn address_shape(&self) -> Option<String> {
        Some(match self {
            HookArgument::MemoryAddress { base, index, .. } => format!("{base}[64] + {index:?} + int"),
            HookArgument::LdsAddress { address, .. } => format!("lds({address} + int)"),
            HookArgument::BufferAddress(buffer) => {
                let [r0, r1, r2, r3] = &buffer.resource;
                let soffset = buffer.soffset.map_or(buffer.soffset_constant.to_string(), |r| r.to_string());
                format!(
                    "buffer({r0},{r1},{r2},{r3}) index {:?} offset {:?} + {soffset} + int, {} bytes checked",
                    buffer.index, buffer.voffset, buffer.checked_bytes
                )
            }
            _ => return None,
        })
    }
}

impl fmt::Display for HookArgument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HookArgument::Int(value) => write!(f, "{value}"),
            HookArgument::Float(value) => write!(f, "{value}"),
            HookArgument::Register(register) => write!(f, "{register}"),
            HookArgument::MemoryAddress { base, index, offset } => {
                write!(f, "{base}[64]")?;
                if let Some(index) = index {
                    write!(f, " + {index}")?;
                }
                write!(f, " + {offset}")
            }
            HookArgument::LdsAddress { address, offset } => write!(f, "lds({address} + {offset})"),
            HookArgument::BufferAddress(buffer) => {
                let [r0, _, _, r3] = &buffer.resource;
                write!(f, "buffer({r0}..{r3})")?;
                if let Some(index) = buffer.index {
                    write!(f, " index {index}")?;
                }
                if let Some(voffset) = buffer.voffset {
                    write!(f, " + {voffset}")?;
                }
                match buffer.soffset {
                    Some(soffset) => write!(f, " + {soffset}")?,
                    None => write!(f, " + {}", buffer.soffset_constant)?,
                }
                write!(f, " + {}", buffer.offset)
            }
        }
    }
}

/// One hook call at a point.
#[derive(Clone, Debug, PartialEq)]
pub struct HookCall {
    pub hook: String,
    pub arguments: Vec<HookArgument>,
}

/// Hooks to call before one instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct PayloadPoint {
    /// Index in `LiftedCodeObject::functions`.
    pub function: usize,
    /// Index in the function's instructions (block order, as `lift --emit mir` counts).
    pub instruction: usize,
    pub calls: Vec<HookCall>,
}

/// The hooks to call at one point, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct PayloadRequest {
    /// Where the point is, for messages ("kernel k, instruction 3").
    pub label: String,
    pub calls: Vec<HookCall>,
    /// The instrumented kernel's largest work-group size (1024 when the
    /// point may run in any kernel); payloads are compiled for at most 256.
    pub max_flat_workgroup_size: u32,
    /// LLVM allocates the payload's VGPRs below this (`amdgpu-num-vgpr`).
    pub max_vgprs: u16,
    /// Integer arguments that differ between the points sharing this
    /// payload: read through `gpuinstr::pointConstant` (slot = position in
    /// this list) instead of folded into the code.
    pub point_constants: Vec<PointConstantArgument>,
}

/// An integer argument of a shared payload that differs from point to point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointConstantArgument {
    /// Index in the request's calls, and of the argument in that call.
    pub call: usize,
    pub argument: usize,
    /// The smallest and largest value the sharing points pass: each must
    /// fit the hook's parameter.
    pub min: i64,
    pub max: i64,
}

/// Whether an integer constant fits a `bits`-wide integer parameter
/// (signed or unsigned; `true` is 1).
fn fits_integer(bits: u32, value: i64) -> bool {
    bits >= 64
        || (bits == 1 && (value == 0 || value == 1))
        || (bits > 1 && value >= -(1i64 << (bits - 1)) && value < (1i64 << bits))
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PayloadError {
    #[error("{point}: the tool has no hook `{hook}` (its hooks: {available})")]
    MissingHook { point: String, hook: String, available: String },
    #[error("{point}: hook `{hook}` takes {expected} argument(s), the plan gives {given}")]
    ArgumentCount { point: String, hook: String, expected: usize, given: usize },
    #[error("{point}: hook `{hook}` argument {index} is {expected}; {given} does not fit")]
    ArgumentType { point: String, hook: String, index: usize, expected: String, given: String },
    #[error(
        "hook `{hook}` uses inline assembly (in `{function}`); gpuinstr cannot allocate registers around it: \
         use a framework intrinsic instead (docs/intrinsics.md)"
    )]
    InlineAssembly { hook: String, function: String },
}

/// For each hook in `hooks`: the defined functions it may reach (itself included).
pub fn reachable_functions(module: &Module<'_>, hooks: &BTreeSet<&str>) -> Vec<(String, BTreeSet<String>)> {
    let defined: HashMap<String, FunctionValue> =
        module.get_functions().filter(|f| f.count_basic_blocks() > 0).map(|f| (name(f), f)).collect();
    let mut out = Vec::new();
    for hook in hooks {
        let Some(start) = defined.get(*hook) else { continue };
        let mut seen = BTreeSet::new();
        let mut stack = vec![*start];
        while let Some(function) = stack.pop() {
            if !seen.insert(name(function)) {
                continue;
            }
            for (_, callee, _) in calls(function) {
                if let Some(next) = callee.and_then(|c| defined.get(&c)) {
                    stack.push(*next);
                }
            }
        }
        out.push((hook.to_string(), seen));
    }
    out
}

/// The first `(function, hook)` with inline assembly among what the hooks reach.
fn inline_assembly_user(module: &Module<'_>, hooks: &BTreeSet<&str>) -> Option<(String, String)> {
    for (hook, functions) in reachable_functions(module, hooks) {
        for function in functions {
            let value = module.get_function(&function).expect("reachable functions are in the module");
            if calls(value).iter().any(|(_, callee, is_asm)| *is_asm && callee.is_none()) {
                return Some((function, hook));
            }
        }
    }
    None
}

/// Calls in a function: `(call, direct callee name, called value is inline asm)`.
pub(crate) fn calls<'ctx>(function: FunctionValue<'ctx>) -> Vec<(CallSiteValue<'ctx>, Option<String>, bool)> {
    let mut out = Vec::new();
    for block in function.get_basic_block_iter() {
        for instruction in block.get_instructions() {
            if instruction.get_opcode() != InstructionOpcode::Call {
                continue;
            }
            let Ok(call) = CallSiteValue::try_from(instruction) else { continue };
            let callee = call.get_called_fn_value().map(name);
            // The called value is the last operand; inline assembly prints as `asm ...`.
            let last = instruction.get_num_operands().saturating_sub(1);
            let is_asm = callee.is_none()
                && instruction
                    .get_operand(last)
                    .and_then(|o| o.value())
                    .is_some_and(|v| v.print_to_string().to_string().contains(" asm "));
            out.push((call, callee, is_asm));
        }
    }
    out
}

pub(crate) fn name(function: FunctionValue<'_>) -> String {
    function.get_name().to_string_lossy().into_owned()
}

fn enum_attribute(context: &Context, attribute: &str) -> Attribute {
    context.create_enum_attribute(Attribute::get_named_enum_kind_id(attribute), 0)
}

/// "Touches no memory": `memory(none)` where this LLVM has the `memory`
/// attribute (16 and newer, which refuse `readnone` on functions), else
/// `readnone`.
fn no_memory_access(context: &Context) -> Attribute {
    match Attribute::get_named_enum_kind_id("memory") {
        0 => enum_attribute(context, "readnone"),
        // MemoryEffects::none() is 0.
        memory => context.create_enum_attribute(memory, 0),
    }
}

/// Makes the tool's code ready to be inlined into payloads compiled for
/// another target.
fn prepare_tool_functions(context: &Context, module: &Module<'_>) {
    let always_inline = enum_attribute(context, "alwaysinline");
    for function in module.get_functions() {
        for key in ["target-cpu", "target-features", "amdgpu-flat-work-group-size", "amdgpu-waves-per-eu"] {
            function.remove_string_attribute(AttributeLoc::Function, key);
        }
        if function.count_basic_blocks() == 0 {
            continue;
        }
        function.set_linkage(Linkage::Internal);
        function.remove_enum_attribute(AttributeLoc::Function, Attribute::get_named_enum_kind_id("noinline"));
        function.remove_enum_attribute(AttributeLoc::Function, Attribute::get_named_enum_kind_id("optnone"));
        function.add_attribute(AttributeLoc::Function, always_inline);
    }
}

/// The `gpuinstr::readReg` declaration for a `bits`-wide integer.
fn read_reg_function<'ctx>(context: &'ctx Context, module: &Module<'ctx>, bits: u32) -> FunctionValue<'ctx> {
    let name = intrinsic_function_name(read_reg::NAME, &format!("i{bits}"), &["i32".to_string()]);
    if let Some(existing) = module.get_function(&name) {
        return existing;
    }
    let result = if bits == 64 { context.i64_type() } else { context.i32_type() };
    let ty = result.fn_type(&[context.i32_type().into()], false);
    let function = module.add_function(&name, ty, Some(Linkage::External));
    function
        .add_attribute(AttributeLoc::Function, context.create_string_attribute(INTRINSIC_ATTRIBUTE, read_reg::NAME));
    for attribute in ["convergent", "nounwind"] {
        function.add_attribute(AttributeLoc::Function, enum_attribute(context, attribute));
    }
    function
}

/// A call of `gpuinstr::pointConstant` for `slot`, `bits` (32 or 64) wide.
/// With the range of the values (when they are not negative), so LLVM may
/// drop what the range makes useless (`% 32768` of opcodes, ...).
fn point_constant<'ctx>(
    context: &'ctx Context,
    module: &Module<'ctx>,
    builder: &inkwell::builder::Builder<'ctx>,
    slot: usize,
    range: PointConstantArgument,
    bits: u32,
) -> inkwell::values::IntValue<'ctx> {
    let name = intrinsic_function_name(point_constant::NAME, &format!("i{bits}"), &["i32".to_string()]);
    let function = module.get_function(&name).unwrap_or_else(|| {
        let result = if bits == 64 { context.i64_type() } else { context.i32_type() };
        let function = module.add_function(&name, result.fn_type(&[context.i32_type().into()], false), None);
        function.add_attribute(
            AttributeLoc::Function,
            context.create_string_attribute(INTRINSIC_ATTRIBUTE, point_constant::NAME),
        );
        // A value like a constant: calls with one slot may merge or go.
        for attribute in ["nounwind", "willreturn"] {
            function.add_attribute(AttributeLoc::Function, enum_attribute(context, attribute));
        }
        function.add_attribute(AttributeLoc::Function, no_memory_access(context));
        function
    });
    let slot = context.i32_type().const_int(slot as u64, false);
    let call = builder.build_call(function, &[slot.into()], "").expect("builder is positioned");
    let limit = if bits == 64 { i64::MAX } else { i64::from(i32::MAX) };
    if range.min >= 0 && range.max < limit {
        let ty = if bits == 64 { context.i64_type() } else { context.i32_type() };
        let bounds = [ty.const_int(range.min as u64, false).into(), ty.const_int(range.max as u64 + 1, false).into()];
        call.try_as_basic_value()
            .basic()
            .and_then(|v| v.into_int_value().as_instruction())
            .expect("a call is an instruction")
            .set_metadata(context.metadata_node(&bounds), context.get_kind_id("range"))
            .expect("range metadata fits a call");
    }
    call.try_as_basic_value().basic().expect("pointConstant returns a value").into_int_value()
}

/// The hooks the requests call.
pub fn used_hooks(requests: &[PayloadRequest]) -> BTreeSet<&str> {
    requests.iter().flat_map(|r| r.calls.iter().map(|c| c.hook.as_str())).collect()
}

/// Adds one payload function per request to the tool's module (which
/// becomes the payload module).
pub fn build_payload_module<'ctx>(
    context: &'ctx Context,
    module: &Module<'ctx>,
    requests: &[PayloadRequest],
) -> Result<(), PayloadError> {
    let hooks: HashMap<String, FunctionValue<'ctx>> = module
        .get_functions()
        .filter(|f| f.get_string_attribute(AttributeLoc::Function, HOOK_ATTRIBUTE).is_some())
        .map(|f| (name(f), f))
        .collect();
    let used = used_hooks(requests);
    if let Some((function, hook)) = inline_assembly_user(module, &used) {
        return Err(PayloadError::InlineAssembly { hook, function });
    }
    prepare_tool_functions(context, module);

    let builder = context.create_builder();
    let void = context.void_type().fn_type(&[], false);
    let payload_attributes: Vec<Attribute> = ["naked", "noinline", "nounwind", "convergent"]
        .iter()
        .map(|a| enum_attribute(context, a))
        .chain(
            // The payload cannot use the callable ABI's implicit inputs: the
            // instrumented kernel does not pass them.
            [
                "amdgpu-no-dispatch-ptr",
                "amdgpu-no-queue-ptr",
                "amdgpu-no-dispatch-id",
                "amdgpu-no-implicitarg-ptr",
                "amdgpu-no-workgroup-id-x",
                "amdgpu-no-workgroup-id-y",
                "amdgpu-no-workgroup-id-z",
                "amdgpu-no-workitem-id-x",
                "amdgpu-no-workitem-id-y",
                "amdgpu-no-workitem-id-z",
                "amdgpu-no-lds-kernel-id",
                "amdgpu-no-heap-ptr",
                "amdgpu-no-hostcall-ptr",
                "amdgpu-no-multigrid-sync-arg",
            ]
            .iter()
            .map(|key| context.create_string_attribute(key, "")),
        )
        .collect();

    for (index, request) in requests.iter().enumerate() {
        let payload = module.add_function(&payload_name(index), void, Some(Linkage::External));
        for attribute in &payload_attributes {
            payload.add_attribute(AttributeLoc::Function, *attribute);
        }
        // LLVM gives a callable function half of the wave's registers as
        // VGPRs (the rest for AGPRs); a bound of at most 256 work-items lets
        // it use every free VGPR. The patch stage holds the instrumented
        // kernel to its own bound.
        let workgroup = format!("1,{}", request.max_flat_workgroup_size.clamp(1, 256));
        payload.add_attribute(
            AttributeLoc::Function,
            context.create_string_attribute("amdgpu-flat-work-group-size", &workgroup),
        );
        // The kernel's own limit (the allocation, what it may grow to, what
        // a wave may have): without it llc took v[128:129] in kernels
        // limited to 128 VGPRs while pairs below were free. For a callable
        // function LLVM 15 doubles the request on gfx90a and gives half to
        // AGPRs, which leaves exactly this many VGPRs.
        payload.add_attribute(
            AttributeLoc::Function,
            context.create_string_attribute("amdgpu-num-vgpr", &request.max_vgprs.to_string()),
        );
        builder.position_at_end(context.append_basic_block(payload, "entry"));
        for (call_index, call) in request.calls.iter().enumerate() {
            let hook = hooks.get(&call.hook).ok_or_else(|| PayloadError::MissingHook {
                point: request.label.clone(),
                hook: call.hook.clone(),
                available: {
                    let mut names: Vec<&str> = hooks.keys().map(String::as_str).collect();
                    names.sort();
                    if names.is_empty() {
                        "none".into()
                    } else {
                        names.join(", ")
                    }
                },
            })?;
            let parameters = hook.get_type().get_param_types();
            if parameters.len() != call.arguments.len() {
                return Err(PayloadError::ArgumentCount {
                    point: request.label.clone(),
                    hook: call.hook.clone(),
                    expected: parameters.len(),
                    given: call.arguments.len(),
                });
            }
            let mut values: Vec<BasicMetadataValueEnum> = Vec::new();
            let addresses = AddressBuilder { context, module, builder: &builder };
            let mut guard = None;
            for (position, (parameter, argument)) in parameters.iter().zip(&call.arguments).enumerate() {
                let mismatch = || PayloadError::ArgumentType {
                    point: request.label.clone(),
                    hook: call.hook.clone(),
                    index: position,
                    expected: parameter.print_to_string().to_string(),
                    given: match argument {
                        HookArgument::Register(r) => format!("register {r}"),
                        HookArgument::MemoryAddress { .. }
                        | HookArgument::LdsAddress { .. }
                        | HookArgument::BufferAddress(_) => format!("the memory address {argument}"),
                        other => format!("constant {other}"),
                    },
                };
                let opaque = request
                    .point_constants
                    .iter()
                    .position(|c| c.call == call_index && c.argument == position)
                    .map(|slot| (slot, request.point_constants[slot]));
                let value: BasicMetadataValueEnum = match (parameter, argument, opaque) {
                    (BasicMetadataTypeEnum::IntType(ty), HookArgument::Int(_), Some((slot, range))) => {
                        let bits = ty.get_bit_width();
                        if bits > 64 || !fits_integer(bits, range.min) || !fits_integer(bits, range.max) {
                            return Err(mismatch());
                        }
                        let word = if bits > 32 { 64 } else { 32 };
                        let value = point_constant(context, module, &builder, slot, range, word);
                        if bits < 32 {
                            builder.build_int_truncate(value, *ty, "").expect("builder is positioned").into()
                        } else {
                            value.into()
                        }
                    }
                    (BasicMetadataTypeEnum::FloatType(ty), HookArgument::Int(_), Some((slot, range))) => {
                        let value = point_constant(context, module, &builder, slot, range, 64);
                        builder.build_signed_int_to_float(value, *ty, "").expect("builder is positioned").into()
                    }
                    (BasicMetadataTypeEnum::IntType(ty), HookArgument::Int(value), _) => {
                        if !fits_integer(ty.get_bit_width(), *value) {
                            return Err(mismatch());
                        }
                        ty.const_int(*value as u64, true).into()
                    }
                    (BasicMetadataTypeEnum::FloatType(ty), HookArgument::Float(value), _) => {
                        ty.const_float(*value).into()
                    }
                    (BasicMetadataTypeEnum::FloatType(ty), HookArgument::Int(value), _) => {
                        ty.const_float(*value as f64).into()
                    }
                    (BasicMetadataTypeEnum::IntType(ty), HookArgument::Register(register), _)
                        if matches!(ty.get_bit_width(), 32 | 64) =>
                    {
                        let read = read_reg_function(context, module, ty.get_bit_width());
                        let code = context.i32_type().const_int(u64::from(register.encode()), false);
                        let call = builder.build_call(read, &[code.into()], "").expect("builder is positioned");
                        call.try_as_basic_value().basic().expect("readReg returns a value").into()
                    }
                    (
                        BasicMetadataTypeEnum::IntType(ty),
                        HookArgument::MemoryAddress { base, index, offset },
                        opaque,
                    ) if ty.get_bit_width() == 64 => addresses.flat(*base, *index, *offset, opaque).into(),
                    (BasicMetadataTypeEnum::IntType(ty), HookArgument::LdsAddress { address, offset }, opaque)
                        if ty.get_bit_width() == 64 =>
                    {
                        addresses.lds(*address, *offset, opaque).into()
                    }
                    (BasicMetadataTypeEnum::IntType(ty), HookArgument::BufferAddress(buffer), opaque)
                        if ty.get_bit_width() == 64 =>
                    {
                        let (address, in_range) = addresses.buffer(buffer, opaque);
                        guard = Some(match guard {
                            Some(earlier) => builder.build_and(earlier, in_range, "").expect("builder is positioned"),
                            None => in_range,
                        });
                        address.into()
                    }
                    _ => return Err(mismatch()),
                };
                values.push(value);
            }
            match guard {
                // A buffer access out of range accesses nothing: the hook
                // runs on the lanes whose access is in range.
                Some(in_range) => {
                    let call_block = context.append_basic_block(payload, "in_range");
                    let after = context.append_basic_block(payload, "after");
                    builder.build_conditional_branch(in_range, call_block, after).expect("builder is positioned");
                    builder.position_at_end(call_block);
                    builder.build_call(*hook, &values, "").expect("builder is positioned");
                    builder.build_unconditional_branch(after).expect("builder is positioned");
                    builder.position_at_end(after);
                }
                None => {
                    builder.build_call(*hook, &values, "").expect("builder is positioned");
                }
            }
        }
        builder.build_return(None).expect("builder is positioned");
    }
    Ok(())
}
