//! A code object as the emulator runs it: instructions decoded on first
//! execution through the lifter's MC layer (the same decoder, the same
//! real -> pseudo opcode table), each bound to its semantics once.

use std::rc::Rc;

use gpuinstr::native::Operand as McOperand;
use gpuinstr::stages::lift::{Instruction, Isa, OperandRole};
use gpuinstr::stages::load::CodeObject;

use crate::error::EmulatorError;
use crate::operands::{register_operand, Operand};
use crate::processor::Processor;
use crate::semantics::{self, Handler};

/// A source operand with its modifiers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Source {
    pub operand: Operand,
    pub mods: u32,
}

/// One decoded instruction, ready to run.
pub struct Inst {
    /// Address in the code object (not the device address).
    pub address: u64,
    pub size: u32,
    /// The pseudo opcode's name (`V_ADD_U32_e32`).
    pub name: String,
    pub handler: Handler,
    /// Whether `handler` is the operation's semantics rather than a stop
    /// (decided where the handler is chosen: function addresses are not a
    /// reliable identity in optimised builds).
    runs: bool,
    /// Registers written, in operand order.
    pub defs: Vec<Operand>,
    /// Register or constant sources, in operand order.
    pub srcs: Vec<Source>,
    /// Control fields (offsets, clamp, omod, cache policy, simm16...).
    pub imms: Vec<i64>,
    /// Where an `s_branch`/`s_cbranch_*` goes (code object address).
    pub target: Option<u64>,
    /// A DPP instruction: its lane permutation and the plain operation.
    pub dpp: Option<Box<Dpp>>,
    /// An SDWA instruction: its selects and the plain operation.
    pub sdwa: Option<Box<Sdwa>>,
}

/// A DPP form: `src0` is read through a lane permutation, then the plain
/// (e32) operation runs on the lanes the masks and bound control enable.
pub struct Dpp {
    /// DPP_CTRL: quad_perm, row shifts and rotates, wave shifts, mirrors, broadcasts.
    pub control: u32,
    pub row_mask: u32,
    pub bank_mask: u32,
    /// Lanes whose source is out of range or inactive read 0 (else they are not written).
    pub bound_ctrl: bool,
    /// The source the permutation reads.
    pub source: Operand,
    /// The plain operation, reading `Operand::Staged(0)` for `src0`.
    pub base: Inst,
}

/// An SDWA form: each source is read through a byte/word select (sign
/// extended for integer sources with SEXT), the plain operation runs, and
/// its result is placed in the selected part of `vdst`.
pub struct Sdwa {
    /// The real sources and their selects: (operand, select, sign extend).
    pub sources: Vec<(Operand, u32, bool)>,
    /// DST_SEL and DST_UNUSED (None for VOPC, which writes a mask).
    pub destination: Option<(u32, u32)>,
    /// The plain operation, reading `Operand::Staged(k)` for source k.
    pub base: Inst,
}

impl Inst {
    pub fn imm(&self, index: usize) -> i64 {
        self.imms.get(index).copied().unwrap_or(0)
    }

    /// Whether the emulator can run it (else it stops there, naming it).
    pub fn implemented(&self) -> bool {
        let base = self.dpp.as_ref().map(|d| &d.base).or(self.sdwa.as_ref().map(|s| &s.base));
        self.runs && base.is_none_or(|b| b.runs)
    }
}

/// How much of a code object the emulator can run.
#[derive(Debug, Default)]
pub struct Coverage {
    /// Instructions in the code object's functions.
    pub instructions: usize,
    /// Per pseudo opcode: (instructions, implemented).
    pub opcodes: std::collections::BTreeMap<String, (usize, bool)>,
}

impl Coverage {
    pub fn implemented_instructions(&self) -> usize {
        self.opcodes.values().filter(|(_, ok)| *ok).map(|(n, _)| n).sum()
    }
}

/// Where instructions come from.
enum Code {
    /// A code object file's executable sections (addresses are the code
    /// object's; the device adds its load base).
    Object(Box<CodeObject>),
    /// Code a runtime loaded into device memory: its bytes from `base` on
    /// (addresses are device addresses).
    Loaded { base: u64, bytes: Vec<u8> },
}

impl Code {
    fn bytes_at(&self, address: u64, length: u64) -> Option<&[u8]> {
        match self {
            Code::Object(code_object) => {
                let section = code_object.section_containing(address).filter(|s| s.executable())?;
                let end = section.address + section.size;
                code_object.bytes_at(address, (end - address).min(length))
            }
            Code::Loaded { base, bytes } => {
                let start = usize::try_from(address.checked_sub(*base)?).ok()?;
                let end = bytes.len().min(start.checked_add(length as usize)?);
                bytes.get(start..end).filter(|b| !b.is_empty())
            }
        }
    }
}

/// The code object's instructions, decoded on demand into a table with a
/// slot per dword of its code.
pub struct Program {
    pub isa: Isa,
    pub processor: &'static Processor,
    code: Code,
    /// Code object addresses of the first and past the last code byte.
    code_start: u64,
    code_end: u64,
    decoded: Vec<Option<Rc<Inst>>>,
}

impl Program {
    pub fn new(code_object: CodeObject) -> Result<Self, EmulatorError> {
        let processor = emulated(&code_object.target.processor)?;
        let isa = Isa::new(&code_object.target).map_err(|e| EmulatorError::Isa(e.to_string()))?;
        isa.operand_roles().map_err(|e| EmulatorError::Isa(e.to_string()))?;
        let code = code_object.sections.iter().filter(|s| s.loadable && s.executable());
        let code_start = code.clone().map(|s| s.address).min().unwrap_or(0) & !3;
        let code_end = code.map(|s| s.address + s.size).max().unwrap_or(0);
        let slots = (code_end.saturating_sub(code_start)).div_ceil(4) as usize;
        Ok(Program {
            isa,
            processor,
            code: Code::Object(Box::new(code_object)),
            code_start,
            code_end,
            decoded: vec![None; slots],
        })
    }

    /// Code that a runtime loaded at `base` in device memory (a copy of
    /// its bytes), for `processor` (gfx908, gfx90a).
    pub fn loaded(processor: &str, base: u64, bytes: Vec<u8>) -> Result<Self, EmulatorError> {
        let emulated_processor = emulated(processor)?;
        use gpuinstr::stages::load::TargetId;
        let target = TargetId::processor(processor);
        let isa = Isa::new(&target).map_err(|e| EmulatorError::Isa(e.to_string()))?;
        isa.operand_roles().map_err(|e| EmulatorError::Isa(e.to_string()))?;
        let slots = (bytes.len() as u64).div_ceil(4) as usize;
        let code_end = base + bytes.len() as u64;
        Ok(Program {
            isa,
            processor: emulated_processor,
            code: Code::Loaded { base, bytes },
            code_start: base & !3,
            code_end,
            decoded: vec![None; slots],
        })
    }

    /// The code object file it runs, if it runs one.
    pub fn code_object(&self) -> Option<&CodeObject> {
        match &self.code {
            Code::Object(code_object) => Some(code_object),
            Code::Loaded { .. } => None,
        }
    }

    /// The table slot of a code address (instructions are dword aligned).
    pub fn slot(&self, address: u64) -> Option<usize> {
        (address & 3 == 0 && address >= self.code_start && address < self.code_end)
            .then(|| ((address - self.code_start) / 4) as usize)
    }

    /// Slots in the table (one per dword of code).
    pub fn slots(&self) -> usize {
        self.decoded.len()
    }

    /// The code address of a slot.
    pub fn slot_address(&self, slot: usize) -> u64 {
        self.code_start + 4 * slot as u64
    }

    /// The bytes an instruction at `address` may span: up to 16 (gfx950's
    /// scaled MFMA is one 16-byte instruction; a shorter window would
    /// decode its first half as a lone `v_mfma_ld_scale_b32`), fewer at
    /// the end of the section.
    fn instruction_bytes(&self, address: u64) -> Option<&[u8]> {
        self.code.bytes_at(address, 16)
    }

    /// The instruction at a code object address; None where LLVM cannot
    /// decode the bytes or the address is outside executable sections.
    pub fn fetch(&mut self, address: u64) -> Option<Rc<Inst>> {
        let slot = self.slot(address)?;
        if let Some(inst) = &self.decoded[slot] {
            return Some(inst.clone());
        }
        let bytes = self.instruction_bytes(address)?;
        let raw = self.isa.mc.decode(bytes, address).ok()?;
        let size = raw.size as usize;
        let lifted = Instruction::new(&self.isa, address, &bytes[..size], raw);
        let inst = Rc::new(decode(&self.isa, &lifted));
        self.decoded[slot] = Some(inst.clone());
        Some(inst)
    }

    /// Every instruction of the code object's functions, decoded, with
    /// whether the emulator implements it.
    pub fn coverage(&mut self) -> Result<Coverage, EmulatorError> {
        let Code::Object(code_object) = &self.code else {
            return Err(EmulatorError::Isa("coverage needs a code object file".into()));
        };
        let lifted = gpuinstr::stages::lift::lift(code_object).map_err(|e| EmulatorError::Isa(e.to_string()))?;
        let mut coverage = Coverage::default();
        for instruction in lifted.functions.iter().flat_map(|f| f.instructions()) {
            coverage.instructions += 1;
            let Some(inst) = self.fetch(instruction.address) else {
                coverage.opcodes.entry("<undecodable>".into()).or_insert((0, false)).0 += 1;
                continue;
            };
            let entry = coverage.opcodes.entry(inst.name.clone()).or_insert((0, inst.implemented()));
            entry.0 += 1;
        }
        Ok(coverage)
    }

    /// The instruction as LLVM prints it, for messages and traces.
    pub fn text(&self, address: u64) -> String {
        let Some(bytes) = self.instruction_bytes(address) else {
            return String::from("<outside the code object>");
        };
        match self.isa.mc.decode(bytes, address) {
            Ok(raw) => self.isa.mc.print(&raw, address).unwrap_or_default().trim().to_string(),
            Err(_) => String::from("<undecodable>"),
        }
    }
}

fn emulated(processor: &str) -> Result<&'static Processor, EmulatorError> {
    Processor::named(processor).ok_or_else(|| {
        EmulatorError::Isa(format!(
            "the emulator runs code for {}; this code object is for {processor}",
            Processor::names()
        ))
    })
}

fn decode(isa: &Isa, lifted: &Instruction) -> Inst {
    let name = isa.opcode_name(lifted.opcode).to_string();
    let real_info = isa.info(lifted.raw.opcode);
    let num_defs = real_info.map_or(0, |i| i.num_defs as usize);
    let types = real_info.map(|i| i.operand_types.clone()).unwrap_or_default();
    // Checked when the program was made.
    let roles = isa.operand_roles().expect("operand roles were found when the program was made");
    let mut defs = Vec::new();
    let mut srcs = Vec::new();
    let mut imms = Vec::new();
    let mut pending_mods = 0u32;
    let mut unmodelled = false;
    for (index, operand) in lifted.raw.operands.iter().enumerate() {
        let role = roles.role(types.get(index).copied().unwrap_or(0));
        let value = match *operand {
            McOperand::Register(0) => continue, // an absent optional operand
            McOperand::Register(reg) => match register_operand(isa, reg) {
                Some(op) => op,
                None => {
                    unmodelled = true;
                    continue;
                }
            },
            McOperand::Immediate(v) => Operand::Constant(v),
            McOperand::Float32(bits) => Operand::Constant(i64::from(bits)),
            McOperand::Float64(bits) => Operand::Constant(bits as i64),
            McOperand::Expression => {
                unmodelled = true;
                continue;
            }
        };
        if index < num_defs {
            defs.push(value);
            continue;
        }
        match (role, value) {
            (OperandRole::InputModifiers, Operand::Constant(mods)) => pending_mods = mods as u32,
            (OperandRole::Immediate | OperandRole::PcRelative, Operand::Constant(v)) => imms.push(v),
            (_, value) => {
                let operand = match value {
                    Operand::Constant(v) => Operand::Constant(widen_constant(role, v)),
                    other => other,
                };
                srcs.push(Source { operand, mods: std::mem::take(&mut pending_mods) });
            }
        }
    }
    let target = match lifted.flow {
        gpuinstr::stages::lift::Flow::Branch { target }
        | gpuinstr::stages::lift::Flow::ConditionalBranch { target } => Some(target),
        _ => None,
    };
    // DPP and SDWA forms wrap the plain operation; one that cannot be
    // modelled stops where it runs.
    let stop = |handler: Handler| (handler, false, None, None);
    let (handler, runs, dpp, sdwa) = if let Some(plain) = name.strip_suffix("_dpp").filter(|_| !unmodelled) {
        match dpp_form(plain, lifted, &defs, &srcs, &imms) {
            Some(form) => (semantics::dpp::execute as Handler, true, Some(Box::new(form)), None),
            None => stop(semantics::unimplemented),
        }
    } else if let Some(plain) = name.strip_suffix("_sdwa").filter(|_| !unmodelled) {
        match sdwa_form(plain, lifted, &defs, &srcs, &imms) {
            Some(form) => (semantics::sdwa::execute as Handler, true, None, Some(Box::new(form))),
            None => stop(semantics::sdwa::unsupported),
        }
    } else if unmodelled {
        stop(semantics::unmodelled_operand)
    } else {
        match semantics::lookup(&name) {
            Some(handler) => (handler, true, None, None),
            None => stop(semantics::unimplemented),
        }
    };
    Inst { address: lifted.address, size: lifted.raw.size, name, handler, runs, defs, srcs, imms, target, dpp, sdwa }
}

/// The plain operation a DPP or SDWA form runs on its staged sources.
fn plain_operation(lifted: &Instruction, name: String, defs: &[Operand], srcs: Vec<Source>) -> Inst {
    let handler = semantics::lookup(&name);
    Inst {
        address: lifted.address,
        size: lifted.raw.size,
        handler: handler.unwrap_or(semantics::unimplemented),
        runs: handler.is_some(),
        name,
        defs: defs.to_vec(),
        srcs,
        imms: Vec::new(),
        target: None,
        dpp: None,
        sdwa: None,
    }
}

/// Operands: vdst; old (tied to vdst), src0[, src1]; dpp_ctrl, row_mask,
/// bank_mask, bound_ctrl.
fn dpp_form(plain: &str, lifted: &Instruction, defs: &[Operand], srcs: &[Source], imms: &[i64]) -> Option<Dpp> {
    if srcs.len() < 2 || imms.len() < 4 {
        return None;
    }
    let mut base_srcs: Vec<Source> = srcs[1..].to_vec();
    base_srcs[0].operand = Operand::Staged(0);
    Some(Dpp {
        control: imms[0] as u32,
        row_mask: imms[1] as u32,
        bank_mask: imms[2] as u32,
        bound_ctrl: imms[3] != 0,
        source: srcs[1].operand,
        base: plain_operation(lifted, format!("{plain}_e32"), defs, base_srcs),
    })
}

/// Whether an SDWA source of `plain` is an integer, whose modifier bit 0
/// means SEXT rather than NEG: conversions by their source type (the last
/// type in `V_CVT_F32_U32`), other operations unless they name a float type.
fn integer_source(plain: &str) -> bool {
    if let Some(types) = plain.strip_prefix("V_CVT_") {
        let source = types.rsplit('_').next().unwrap_or("");
        return !source.starts_with('F');
    }
    !["_F16", "_F32", "_F64"].iter().any(|t| plain.contains(t))
}

/// Operands (LLVM 15, gfx9): vdst | sdst; [src mods, src] per source; clamp
/// [, omod]; dst_sel, dst_unused (not VOPC); a select per source. Clamp on
/// an integer operation saturates; on a float one, and omod, are not
/// modelled: None for them.
fn sdwa_form(plain: &str, lifted: &Instruction, defs: &[Operand], srcs: &[Source], imms: &[i64]) -> Option<Sdwa> {
    if srcs.is_empty() {
        return None;
    }
    let compare = plain.starts_with("V_CMP");
    // The 8-bit float conversions select a source byte or word but write
    // the whole destination: no dst_sel or dst_unused.
    let whole_destination =
        compare || matches!(plain, "V_CVT_F32_FP8" | "V_CVT_F32_BF8" | "V_CVT_PK_F32_FP8" | "V_CVT_PK_F32_BF8");
    let n = srcs.len();
    let fixed = if whole_destination { 0 } else { 2 };
    let head = imms.len().checked_sub(n + fixed)?;
    let integer = integer_source(plain);
    // Clamp (the first of the head) on an integer operation saturates: the
    // plain operation's VOP3 form with its clamp bit does that.
    let clamp = integer && head == 1 && imms[0] != 0;
    if (!clamp && imms[..head].iter().any(|v| *v != 0)) || head == 0 {
        return None;
    }
    let selects = &imms[imms.len() - n..];
    let sources =
        srcs.iter().zip(selects).map(|(s, select)| (s.operand, *select as u32, integer && s.mods & 1 != 0)).collect();
    let base_srcs = srcs
        .iter()
        .enumerate()
        .map(|(k, s)| Source { operand: Operand::Staged(k as u8), mods: if integer { 0 } else { s.mods } })
        .collect();
    let base_name = format!("{plain}_{}", if compare || clamp { "e64" } else { "e32" });
    let mut base = plain_operation(lifted, base_name, defs, base_srcs);
    if clamp {
        base.imms = vec![1];
    }
    let destination = (!whole_destination).then(|| (imms[head] as u32, imms[head + 1] as u32));
    Some(Sdwa { sources, destination, base })
}

/// A constant in a 64-bit operand: LLVM 15 decodes a 32-bit literal as
/// written; the hardware puts it in the high half of a double and
/// zero-extends it for integers. Inline constants are already 64-bit.
fn widen_constant(role: OperandRole, value: i64) -> i64 {
    let inline_integer = (-16..=64).contains(&value);
    match role {
        OperandRole::Float64 if !inline_integer && (0..=i64::from(u32::MAX)).contains(&value) => value << 32,
        OperandRole::Int64 if !inline_integer => value & 0xffff_ffff,
        _ => value,
    }
}
