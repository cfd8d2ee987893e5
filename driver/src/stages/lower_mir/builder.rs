//! The [`MirBuilder`] a MIR callback builds its instructions with: text
//! lines of MIR, checked against LLVM's instruction descriptions (operand
//! count, register classes, implicit operands added), with values fitted to
//! the class each operand demands.

use gpuinstr_intrinsics::{
    IntrinsicError, IrLowering, KernelArgument, MemoryOperand, MirBuilder, MirOperand, Register, RegisterClass,
    Storage, TargetInfo, VirtualRegister,
};

use super::physical::{copyable, mir_name, mir_register, unit_of};
use super::FunctionState;

/// Generic opcodes: no instruction description to check against.
const GENERIC: [&str; 4] = ["COPY", "REG_SEQUENCE", "PHI", "IMPLICIT_DEF"];

pub struct PayloadBuilder<'s, 'a> {
    state: &'s mut FunctionState<'a>,
    lowering: &'s IrLowering,
    intrinsic: &'s str,
    lines: Vec<String>,
}

impl<'s, 'a> PayloadBuilder<'s, 'a> {
    pub fn new(state: &'s mut FunctionState<'a>, lowering: &'s IrLowering, intrinsic: &'s str) -> Self {
        PayloadBuilder { state, lowering, intrinsic, lines: Vec::new() }
    }

    pub fn finish(self) -> Vec<String> {
        self.lines
    }

    fn error(&self, why: impl Into<String>) -> IntrinsicError {
        IntrinsicError::Lowering { intrinsic: self.intrinsic.to_string(), why: why.into() }
    }

    fn class_of(&self, register: VirtualRegister) -> Result<String, IntrinsicError> {
        self.state.registers.get(&register.0).cloned().ok_or_else(|| self.error(format!("{register} has no class")))
    }

    fn new_named(&mut self, class: &str) -> VirtualRegister {
        self.state.new_register(class.to_string())
    }

    /// A register holding `value` in class `required` (a copy, or
    /// `v_readfirstlane_b32` per 32 bits when a scalar is needed from a VGPR).
    fn fit_use(&mut self, value: VirtualRegister, required: &str) -> Result<VirtualRegister, IntrinsicError> {
        let classes = self.state.classes;
        let class = self.class_of(value)?;
        if classes.is_subclass(&class, required) {
            return Ok(value);
        }
        if classes.is_vector(&class) && !classes.is_vector(required) {
            let bits = classes.bits(&class).unwrap_or(32);
            let pieces: Vec<VirtualRegister> = (0..bits / 32)
                .map(|piece| {
                    let lane = self.new_named("sreg_32_xm0");
                    let source = if bits > 32 { format!("{value}.sub{piece}") } else { value.to_string() };
                    self.lines.push(format!("{lane} = V_READFIRSTLANE_B32 {source}, implicit $exec"));
                    lane
                })
                .collect();
            let uniform = if let [only] = pieces.as_slice() {
                *only
            } else {
                let whole = self.new_named(required);
                let parts: Vec<String> =
                    pieces.iter().enumerate().map(|(i, p)| format!("{p}, %subreg.sub{i}")).collect();
                self.lines.push(format!("{whole} = REG_SEQUENCE {}", parts.join(", ")));
                return Ok(whole);
            };
            let fitted = self.new_named(required);
            self.lines.push(format!("{fitted} = COPY {uniform}"));
            return Ok(fitted);
        }
        let fitted = self.new_named(required);
        self.lines.push(format!("{fitted} = COPY {value}"));
        Ok(fitted)
    }

    fn unit_for(
        &self,
        register: Register,
        allowed: &[Register],
        what: &str,
    ) -> Result<crate::stages::liveness::Unit, IntrinsicError> {
        if !allowed.contains(&register) {
            return Err(self.error(format!("{what} {register}, which its IR callback did not request")));
        }
        unit_of(register)
    }

    fn read_lanes(&mut self, first: u8, count: u8) -> Result<VirtualRegister, IntrinsicError> {
        let sva = self.state.site.sva.ok_or_else(|| match &self.state.site.unplaced {
            Some(why) => self.error(format!("needs the State Value Array, which has no register here: {why}")),
            None => self.error(
                "needs the State Value Array, but this function has no SVA register (stage sva places it; with \
                 `gpuinstr-link payload` give --sva)",
            ),
        })?;
        let mut pieces = Vec::new();
        for lane in first..first + count {
            let value = self.new_register(RegisterClass::scalar(32));
            self.build(
                "V_READLANE_B32",
                &[
                    MirOperand::Def(value),
                    MirOperand::UsePhysical(Register::Vgpr(sva)),
                    MirOperand::Immediate(lane.into()),
                ],
            )?;
            pieces.push(value);
        }
        if let [only] = pieces.as_slice() {
            return Ok(*only);
        }
        let whole = self.new_register(RegisterClass::scalar(32 * u32::from(count)));
        let mut operands = vec![MirOperand::Def(whole)];
        for (index, piece) in pieces.iter().enumerate() {
            operands.push(MirOperand::Use(*piece));
            operands.push(MirOperand::Piece(index as u8));
        }
        self.build("REG_SEQUENCE", &operands)?;
        Ok(whole)
    }
}

impl MirBuilder for PayloadBuilder<'_, '_> {
    fn new_register(&mut self, class: RegisterClass) -> VirtualRegister {
        let name = self.state.classes.for_request(class).unwrap_or_else(|_| "sreg_32".into());
        self.new_named(&name)
    }

    fn build(&mut self, opcode: &str, operands: &[MirOperand]) -> Result<(), IntrinsicError> {
        let isa = self.state.isa;
        let info = if GENERIC.contains(&opcode) {
            None
        } else {
            let number = isa.opcode_by_name(opcode).ok_or_else(|| IntrinsicError::UnknownOpcode(opcode.to_string()))?;
            Some(isa.info(number).ok_or_else(|| IntrinsicError::UnknownOpcode(opcode.to_string()))?)
        };
        let required = |index: usize| -> Option<String> {
            let class = *info?.operand_register_classes.get(index)?;
            (class >= 0).then(|| self.state.classes.name(class as usize).to_string())
        };
        let memory: Vec<String> = operands
            .iter()
            .filter_map(|o| match o {
                MirOperand::Memory(memory) => Some(memory.to_string()),
                _ => None,
            })
            .collect();
        let operands: Vec<MirOperand> =
            operands.iter().filter(|o| !matches!(o, MirOperand::Memory(_))).copied().collect();
        if let Some(info) = info {
            let variadic = info.flags.has(crate::native::OpcodeFlags::VARIADIC);
            if !variadic && operands.len() != info.num_operands as usize {
                return Err(self.error(format!(
                    "{opcode} takes {} explicit operands, {} given",
                    info.num_operands,
                    operands.len()
                )));
            }
            if memory.is_empty()
                && (info.flags.has(crate::native::OpcodeFlags::MAY_LOAD)
                    || info.flags.has(crate::native::OpcodeFlags::MAY_STORE))
            {
                return Err(self.error(format!(
                    "{opcode} accesses memory: give it a memory operand (MirOperand::Memory), or LLVM must assume \
                     a sequentially consistent system-scope access"
                )));
            }
        }
        let mut defs = Vec::new();
        let mut uses = Vec::new();
        let mut after = Vec::new();
        for (index, operand) in operands.iter().enumerate() {
            match *operand {
                MirOperand::Def(register) => {
                    let Some(required) = required(index) else {
                        defs.push(register.to_string());
                        continue;
                    };
                    let class = self.class_of(register)?;
                    let classes = self.state.classes;
                    if classes.is_subclass(&class, &required) {
                        defs.push(register.to_string());
                    } else if classes.is_subclass(&required, &class) {
                        // Narrow: the register's only definition is this one.
                        self.state.registers.insert(register.0, required);
                        defs.push(register.to_string());
                    } else {
                        let temporary = self.new_named(&required);
                        defs.push(temporary.to_string());
                        after.push(format!("{register} = COPY {temporary}"));
                    }
                }
                MirOperand::DefPhysical(register) => {
                    for piece in register.pieces(if matches!(register, Register::Special(s) if s.width() == 64) {
                        64
                    } else {
                        32
                    })? {
                        self.state.defined_directly.insert(unit_of(piece)?);
                    }
                    defs.push(mir_register(register));
                }
                MirOperand::Use(register) => {
                    let register = match required(index) {
                        Some(required) => self.fit_use(register, &required)?,
                        None => register,
                    };
                    uses.push(register.to_string());
                }
                MirOperand::UsePiece(register, piece) => uses.push(format!("{register}.sub{piece}")),
                MirOperand::UsePhysical(register) => uses.push(mir_register(register)),
                MirOperand::Immediate(value) => uses.push(value.to_string()),
                MirOperand::PointConstant { slot, high } => {
                    uses.push(format!("&\"{}\"", gpuinstr_intrinsics::builtins::point_constant::symbol(slot, high)))
                }
                MirOperand::Piece(piece) => uses.push(format!("%subreg.sub{piece}")),
                MirOperand::Memory(_) => unreachable!("memory operands are taken out above"),
            }
        }
        if let Some(info) = info {
            for def in &info.implicit_defs {
                uses.push(format!("implicit-def {}", isa.mir_register(u32::from(*def))));
            }
            for used in &info.implicit_uses {
                uses.push(format!("implicit {}", isa.mir_register(u32::from(*used))));
            }
        }
        let mut line = String::new();
        if !defs.is_empty() {
            line.push_str(&defs.join(", "));
            line.push_str(" = ");
        }
        line.push_str(opcode);
        if !uses.is_empty() {
            line.push(' ');
            line.push_str(&uses.join(", "));
        }
        if !memory.is_empty() {
            line.push_str(" :: ");
            line.push_str(&memory.join(", "));
        }
        self.lines.push(line);
        self.lines.extend(after);
        Ok(())
    }

    fn physical_register(&mut self, register: Register) -> Result<VirtualRegister, IntrinsicError> {
        let unit = self.unit_for(register, &self.lowering.reads.clone(), "reads")?;
        // The frame registers belong to the payload's own frame; the
        // application's values are in the SVA lanes the payload's entry
        // saves them to.
        if let (true, Some(_)) = (self.state.frame.contains(unit), self.state.site.sva) {
            let lane = self.state.frame.saved_lane(unit);
            self.state.reads_saved_frame.insert(unit);
            return self.read_lanes(lane, 1);
        }
        let class = if register.is_vector() { "vgpr_32" } else { "sreg_32" };
        let value = self.new_named(class);
        if copyable(unit, self.state.frame) {
            let token = self.state.read_copied(unit);
            self.lines.push(format!("{value} = COPY {token}"));
        } else {
            self.lines.push(format!("{value} = COPY {}", mir_name(unit)));
        }
        Ok(value)
    }

    fn write_physical_register(&mut self, register: Register, value: VirtualRegister) -> Result<(), IntrinsicError> {
        let unit = self.unit_for(register, &self.lowering.writes.clone(), "writes")?;
        if copyable(unit, self.state.frame) {
            let class = self.class_of(value)?;
            let value =
                if self.state.classes.is_subclass(&class, "sreg_32") { value } else { self.fit_use(value, "sreg_32")? };
            self.state.write_copied(unit, value);
            return Ok(());
        }
        // Pinned: written in place; reading the old value in the same
        // instruction keeps it (and its inactive lanes) alive up to here.
        self.state.written_in_place.insert(unit);
        let name = mir_name(unit);
        match register {
            Register::Vgpr(_) => {
                self.lines.push(format!("{name} = V_MOV_B32_e32 {value}, implicit $exec, implicit {name}"))
            }
            Register::Agpr(_) => {
                let source = self.fit_use(value, "vgpr_32")?;
                self.lines.push(format!("{name} = V_ACCVGPR_WRITE_B32_e64 {source}, implicit $exec, implicit {name}"))
            }
            _ => return Err(self.error(format!("{register} cannot be written by a payload"))),
        }
        Ok(())
    }

    fn kernel_argument(&mut self, argument: KernelArgument) -> Result<VirtualRegister, IntrinsicError> {
        if !self.lowering.kernel_arguments.contains(&argument) {
            return Err(self.error(format!("reads kernel argument {argument}, which its IR callback did not request")));
        }
        self.state.kernel_arguments.insert(argument);
        match argument.storage() {
            Storage::Lanes { first, count } => self.read_lanes(first, count),
            Storage::Hidden { value_kind, bytes } => {
                let offset = match &self.state.site.hidden_arguments {
                    None => return Err(self.error(format!("hidden argument {argument} is only known in kernels"))),
                    Some(offsets) => *offsets.get(value_kind).ok_or_else(|| {
                        self.error(format!("the kernel's metadata has no {value_kind} argument ({argument})"))
                    })?,
                };
                self.state.kernel_arguments.insert(KernelArgument::KernargSegmentPtr);
                let Storage::Lanes { first, count } = KernelArgument::KernargSegmentPtr.storage() else {
                    unreachable!("the kernarg pointer is in lanes")
                };
                let base = self.read_lanes(first, count)?;
                if bytes == 8 {
                    let value = self.new_register(RegisterClass::scalar(64));
                    self.build(
                        "S_LOAD_DWORDX2_IMM",
                        &[
                            MirOperand::Def(value),
                            MirOperand::Use(base),
                            MirOperand::Immediate(offset.into()),
                            MirOperand::Immediate(0),
                            MirOperand::Memory(MemoryOperand::kernel_argument_load(64)),
                        ],
                    )?;
                    return Ok(value);
                }
                let word = self.new_register(RegisterClass::scalar(32));
                self.build(
                    "S_LOAD_DWORD_IMM",
                    &[
                        MirOperand::Def(word),
                        MirOperand::Use(base),
                        MirOperand::Immediate(i64::from(offset & !3)),
                        MirOperand::Immediate(0),
                        MirOperand::Memory(MemoryOperand::kernel_argument_load(32)),
                    ],
                )?;
                if bytes == 4 {
                    return Ok(word);
                }
                let value = self.new_register(RegisterClass::scalar(32));
                let field = i64::from((offset & 3) * 8) | (i64::from(bytes) * 8) << 16;
                self.build(
                    "S_BFE_U32",
                    &[MirOperand::Def(value), MirOperand::Use(word), MirOperand::Immediate(field)],
                )?;
                Ok(value)
            }
            Storage::WorkItemId { shift } => {
                let ids = self.state.site.work_item_ids.ok_or_else(|| match &self.state.site.unplaced {
                    Some(why) => self
                        .error(format!("{argument} needs a VGPR for the work-item ids, and there is none here: {why}")),
                    None => self.error(format!(
                        "{argument} needs the VGPR with the packed work-item ids, and none was given (the kernel \
                         preamble keeps it; with `gpuinstr-link payload` give --work-item-ids)"
                    )),
                })?;
                let value = self.new_register(RegisterClass::vector(32));
                self.build(
                    "V_BFE_U32_e64",
                    &[
                        MirOperand::Def(value),
                        MirOperand::UsePhysical(Register::Vgpr(ids)),
                        MirOperand::Immediate(shift.into()),
                        MirOperand::Immediate(10),
                    ],
                )?;
                Ok(value)
            }
        }
    }

    fn target(&self) -> &TargetInfo {
        self.state.target
    }
}
