//! Proves from machine code alone that inserted code leaves every register
//! that is live at its point as it found it.
//!
//! The code is assembled (in process, or with llvm-mc) and decoded with
//! LLVM's disassembler, then interpreted abstractly: every register starts as "its
//! original value"; copies move original values around (`s_mov`, `v_mov`,
//! `v_writelane`/`v_readlane`, scratch stores and loads at fixed offsets,
//! `s_cselect`/`s_cmp` round trips of SCC); anything else makes the
//! destination unknown. Vector registers have two halves: the lanes active
//! at the entry and the inactive ones. A vector write under the entry EXEC
//! changes only the first half, under a narrower EXEC it makes the first
//! half unknown, under any other EXEC both. At every exit, each live
//! register must hold its original value again, and the SVA may only have
//! changed in the lanes payloads use to save the application's frame.

use std::collections::{BTreeMap, HashMap};

use gpuinstr_intrinsics::sva::{FrameValue, FRAME_VALUES};
use thiserror::Error;

use crate::native::Operand;
use crate::stages::codegen::{assemble, AssembleError};
use crate::stages::lift::{Flow, Instruction, Isa, LiftedCodeObject};
use crate::stages::liveness::{RegisterFile, RegisterUnits, Unit, UnitSet};

#[derive(Debug, Error)]
pub enum PreservationError {
    #[error(transparent)]
    Assemble(#[from] AssembleError),
    #[error("the assembled payloads are not readable: {0}")]
    Object(String),
    #[error("{0}")]
    Undecodable(String),
    #[error("temporary files: {0}")]
    Io(#[from] std::io::Error),
}

/// A register the code does not give back.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{unit} is live here but the code leaves it changed ({culprit})")]
pub struct Violation {
    pub unit: Unit,
    /// Where it was last changed.
    pub culprit: String,
}

/// Assembles instruction lists (one per payload) and decodes them back:
/// in process, each distinct line encoded once (the bytes emission lays
/// out), or where a line does not encode on its own, through llvm-mc.
pub fn decode_code<C: AsRef<[L]>, L: AsRef<str>>(
    lifted: &LiftedCodeObject<'_>,
    functions: &[C],
    keep_failed: Option<&std::path::Path>,
) -> Result<Vec<Vec<Instruction>>, PreservationError> {
    // Shared payloads' point constants as literals of the same size.
    let constants_as_literals: Vec<Vec<std::borrow::Cow<'_, str>>> = functions
        .iter()
        .map(|code| code.as_ref().iter().map(|line| point_constants_as_literals(line.as_ref())).collect())
        .collect();
    let Ok(laid_out) = crate::stages::lift::line_encoding::lay_out(lifted, &constants_as_literals) else {
        return decode_with_llvm_mc(lifted, functions, keep_failed);
    };
    let isa = &lifted.isa;
    let decode = |index: usize, bytes: &[u8], at: usize| match isa.mc.decode(bytes, at as u64) {
        Ok(raw) if raw.size as usize == bytes.len() => Ok(Instruction::new(isa, at as u64, bytes, raw)),
        _ => Err(PreservationError::Undecodable(format!("payload {index}: bytes at {at:#x} do not decode"))),
    };
    // Alike lines decode alike wherever they are, branches aside (their
    // targets depend on the address): each distinct encoding once.
    let mut by_bytes: rustc_hash::FxHashMap<&[u8], Instruction> = Default::default();
    let mut decoded = Vec::with_capacity(laid_out.len());
    for (index, code) in laid_out.iter().enumerate() {
        let mut instructions = Vec::with_capacity(code.instructions.len());
        for &(at, length, branch) in &code.instructions {
            let bytes = &code.bytes[at..at + length];
            if branch {
                instructions.push(decode(index, bytes, at)?);
                continue;
            }
            let instruction = match by_bytes.get(bytes) {
                Some(known) => known.clone(),
                None => {
                    let fresh = decode(index, bytes, 0)?;
                    by_bytes.insert(bytes, fresh.clone());
                    fresh
                }
            };
            instructions.push(Instruction { address: at as u64, ..instruction });
        }
        decoded.push(instructions);
    }
    Ok(decoded)
}

/// A literal no inline constant encodes (so a 32-bit literal, as a symbol
/// is), for point constants.
const POINT_CONSTANT_LITERAL: &str = "0x7e57c0de";

/// `line` with every point-constant symbol (`gpuinstr.point.0.lo`, quoted
/// or not: a shared payload's per-point values, written in after the
/// check) as a 32-bit literal: the encoding llvm-mc gives the symbol, and
/// no value the check depends on (it follows copies, not arithmetic).
fn point_constants_as_literals(line: &str) -> std::borrow::Cow<'_, str> {
    use gpuinstr_intrinsics::builtins::point_constant::SYMBOL_PREFIX;
    if !line.contains(SYMBOL_PREFIX) {
        return line.into();
    }
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(SYMBOL_PREFIX) {
        let quoted = rest[..at].ends_with('"');
        out.push_str(&rest[..if quoted { at - 1 } else { at }]);
        let tail = &rest[at..];
        let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_')).unwrap_or(tail.len());
        out.push_str(POINT_CONSTANT_LITERAL);
        rest = &tail[end..];
        if quoted {
            rest = rest.strip_prefix('"').unwrap_or(rest);
        }
    }
    out.push_str(rest);
    out.into()
}

/// [`decode_code`] through llvm-mc: one assembly of every list.
fn decode_with_llvm_mc<C: AsRef<[L]>, L: AsRef<str>>(
    lifted: &LiftedCodeObject<'_>,
    functions: &[C],
    keep_failed: Option<&std::path::Path>,
) -> Result<Vec<Vec<Instruction>>, PreservationError> {
    let target = &lifted.code_object.target;
    let mut text = format!("\t.amdgcn_target \"amdgcn-amd-amdhsa--{target}\"\n\t.text\n");
    for (index, code) in functions.iter().enumerate() {
        text.push_str(&format!("\t.globl checked{index}\n\t.type checked{index},@function\nchecked{index}:\n"));
        for line in code.as_ref() {
            let line = line.as_ref();
            text.push_str(&format!("{}{line}\n", if line.ends_with(':') { "" } else { "\t" }));
        }
        text.push_str(&format!("\t.size checked{index}, .-checked{index}\n"));
    }
    let directory = tempfile::tempdir()?;
    let relocatable = assemble(lifted, &text, directory.path(), keep_failed)?;
    let file = object::File::parse(&*relocatable).map_err(|e| PreservationError::Object(e.to_string()))?;
    use object::{Object, ObjectSection, ObjectSymbol};
    let section = file.section_by_name(".text").ok_or_else(|| PreservationError::Object("no .text".into()))?;
    let bytes = section.data().map_err(|e| PreservationError::Object(e.to_string()))?;
    let mut extents = BTreeMap::new();
    for symbol in file.symbols() {
        if let Some(index) =
            symbol.name().ok().and_then(|n| n.strip_prefix("checked")).and_then(|n| n.parse::<usize>().ok())
        {
            extents.insert(index, (symbol.address(), symbol.size()));
        }
    }
    let isa = &lifted.isa;
    let mut decoded = Vec::with_capacity(functions.len());
    for index in 0..functions.len() {
        let (start, size) = extents.get(&index).copied().unwrap_or((0, 0));
        let mut instructions = Vec::new();
        let mut offset = start as usize;
        let end = (start + size) as usize;
        while offset < end {
            match isa.mc.decode(&bytes[offset..end], offset as u64) {
                Ok(raw) if raw.size > 0 => {
                    let size = raw.size as usize;
                    instructions.push(Instruction::new(isa, offset as u64, &bytes[offset..offset + size], raw));
                    offset += size;
                }
                _ => {
                    return Err(PreservationError::Undecodable(format!(
                        "payload {index}: bytes at {offset:#x} do not decode"
                    )))
                }
            }
        }
        decoded.push(instructions);
    }
    Ok(decoded)
}

/// What a register holds, relative to the entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value {
    Original(Unit),
    /// 0 or 1 from the original SCC (`s_cselect_b32 sN, 1, 0`).
    SccBit,
    /// The original value with more bits above a mask (`Entry::widened`).
    Widened(Unit, i64),
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Exec {
    /// EXEC is what it was at the entry.
    Entry,
    /// A subset of the entry EXEC (`s_and_saveexec`).
    Subset,
    /// Every lane (`s_mov_b64 exec, -1`): vector copies move both halves.
    All,
    Unknown,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    scalars: HashMap<Unit, Value>,
    /// Vector registers: (lanes active at the entry, the other lanes).
    vectors: HashMap<Unit, (Value, Value)>,
    /// Single lanes written with `v_writelane`: (register, lane).
    lanes: HashMap<(Unit, i64), Value>,
    /// Scratch slots at fixed offsets from a base register (the stack
    /// pointer, LLVM's frame pointer): (lanes active at the entry, the
    /// other lanes), both when stored under every lane.
    slots: HashMap<(Option<Unit>, i64), (Value, Value)>,
    exec: Exec,
    /// Where each unit was last changed.
    changed_by: HashMap<Unit, u64>,
    /// Vector registers written other than lane by lane.
    overwritten: std::collections::BTreeSet<Unit>,
    /// Every lane written on some path.
    lanes_touched: std::collections::BTreeSet<(Unit, i64)>,
}

impl State {
    fn entry() -> State {
        State {
            scalars: HashMap::new(),
            vectors: HashMap::new(),
            lanes: HashMap::new(),
            slots: HashMap::new(),
            exec: Exec::Entry,
            changed_by: HashMap::new(),
            overwritten: std::collections::BTreeSet::new(),
            lanes_touched: std::collections::BTreeSet::new(),
        }
    }

    fn scalar(&self, unit: Unit) -> Value {
        self.scalars.get(&unit).copied().unwrap_or(Value::Original(unit))
    }

    fn vector(&self, unit: Unit) -> (Value, Value) {
        self.vectors.get(&unit).copied().unwrap_or((Value::Original(unit), Value::Original(unit)))
    }

    fn set_scalar(&mut self, unit: Unit, value: Value, at: u64) {
        self.scalars.insert(unit, value);
        self.changed_by.insert(unit, at);
    }

    /// A vector write of `value` (for the active lanes) under the current EXEC.
    fn write_vector(&mut self, unit: Unit, value: Value, at: u64) {
        let (_, inactive) = self.vector(unit);
        let new = match self.exec {
            Exec::Entry => (value, inactive),
            Exec::Subset => (Value::Unknown, inactive),
            Exec::All | Exec::Unknown => (Value::Unknown, Value::Unknown),
        };
        self.vectors.insert(unit, new);
        self.changed_by.insert(unit, at);
        self.overwritten.insert(unit);
    }

    fn join(&mut self, other: &State) {
        let keys: Vec<Unit> = self.scalars.keys().chain(other.scalars.keys()).copied().collect();
        for unit in keys {
            if self.scalar(unit) != other.scalar(unit) {
                self.scalars.insert(unit, Value::Unknown);
            }
        }
        let keys: Vec<Unit> = self.vectors.keys().chain(other.vectors.keys()).copied().collect();
        for unit in keys {
            let (a, b) = (self.vector(unit), other.vector(unit));
            let merged = (if a.0 == b.0 { a.0 } else { Value::Unknown }, if a.1 == b.1 { a.1 } else { Value::Unknown });
            self.vectors.insert(unit, merged);
        }
        self.lanes.retain(|k, v| other.lanes.get(k) == Some(v));
        self.slots.retain(|k, v| other.slots.get(k) == Some(v));
        self.exec = match (self.exec, other.exec) {
            (a, b) if a == b => a,
            (Exec::Entry, Exec::Subset) | (Exec::Subset, Exec::Entry) => Exec::Subset,
            _ => Exec::Unknown,
        };
        for (unit, at) in &other.changed_by {
            self.changed_by.entry(*unit).or_insert(*at);
        }
        self.overwritten.extend(other.overwritten.iter().copied());
        self.lanes_touched.extend(other.lanes_touched.iter().copied());
    }
}

struct Interpreter<'a> {
    isa: &'a Isa,
    units: &'a RegisterUnits,
    /// What `Entry::arguments` and `Entry::kernarg_pointer` say.
    arguments: &'a [(Unit, u32)],
    kernarg_pointer: Option<[Unit; 2]>,
}

fn exec_units() -> [Unit; 2] {
    [Unit::special("EXEC_LO"), Unit::special("EXEC_HI")]
}

impl Interpreter<'_> {
    fn register_units(&self, operand: Option<&Operand>) -> Option<Vec<Unit>> {
        match operand {
            Some(Operand::Register(reg)) if *reg != 0 => Some(self.units.units(self.isa.canonical(*reg)).to_vec()),
            _ => None,
        }
    }

    /// The register a scratch slot's address starts from (None: not a
    /// single register).
    fn slot_base(&self, operand: Option<&Operand>) -> Option<Unit> {
        match self.register_units(operand).as_deref() {
            Some([unit]) => Some(*unit),
            _ => None,
        }
    }

    fn immediate(operand: Option<&Operand>) -> Option<i64> {
        match operand {
            Some(Operand::Immediate(value)) => Some(*value),
            _ => None,
        }
    }

    /// The value a source operand gives, unit by unit.
    fn source(&self, state: &State, operand: Option<&Operand>) -> Vec<Value> {
        match self.register_units(operand) {
            Some(units) => {
                units.iter().map(|u| if u.is_vector() { state.vector(*u).0 } else { state.scalar(*u) }).collect()
            }
            None => vec![Value::Unknown, Value::Unknown],
        }
    }

    fn write_exec(&self, state: &mut State, values: &[Value], all_lanes: bool, at: u64) {
        let [low, high] = exec_units();
        state.set_scalar(low, values.first().copied().unwrap_or(Value::Unknown), at);
        state.set_scalar(high, values.get(1).copied().unwrap_or(Value::Unknown), at);
        state.exec = if state.scalar(low) == Value::Original(low) && state.scalar(high) == Value::Original(high) {
            Exec::Entry
        } else if all_lanes {
            Exec::All
        } else {
            Exec::Unknown
        };
    }

    fn step(&self, state: &mut State, instruction: &Instruction) {
        let at = instruction.address;
        let name = instruction.name(self.isa);
        let operands = &instruction.raw.operands;
        let destination = self.register_units(operands.first());
        let writes_exec = destination.as_ref().is_some_and(|d| d.contains(&exec_units()[0]));
        match name {
            "S_MOV_B32" | "S_MOV_B64" => {
                let values = self.source(state, operands.get(1));
                if writes_exec {
                    let all_lanes = name == "S_MOV_B64" && Self::immediate(operands.get(1)) == Some(-1);
                    self.write_exec(state, &values, all_lanes, at);
                    return;
                }
                for (unit, value) in destination.unwrap_or_default().into_iter().zip(values) {
                    state.set_scalar(unit, value, at);
                }
                return;
            }
            "S_CSELECT_B32"
                if Self::immediate(operands.get(1)) == Some(1) && Self::immediate(operands.get(2)) == Some(0) =>
            {
                let scc = Unit::special("SCC");
                let value = if state.scalar(scc) == Value::Original(scc) { Value::SccBit } else { Value::Unknown };
                for unit in destination.unwrap_or_default() {
                    state.set_scalar(unit, value, at);
                }
                return;
            }
            "S_CMP_LG_U32" if Self::immediate(operands.get(1)) == Some(0) => {
                let scc = Unit::special("SCC");
                let value = if self.source(state, operands.first()).first() == Some(&Value::SccBit) {
                    Value::Original(scc)
                } else {
                    Value::Unknown
                };
                state.set_scalar(scc, value, at);
                return;
            }
            "V_MOV_B32_e32" | "V_MOV_B32_e64" | "V_ACCVGPR_WRITE_B32_e64" | "V_ACCVGPR_READ_B32_e64" => {
                let source_index = if name.ends_with("_e64") && name.starts_with("V_MOV") { 2 } else { 1 };
                let source = match self.register_units(operands.get(source_index)) {
                    Some(units) if units.len() == 1 && units[0].is_vector() => Some(units[0]),
                    _ => None,
                };
                for unit in destination.unwrap_or_default() {
                    match (state.exec, source) {
                        // Every lane: a whole-register copy (AGPR parking).
                        (Exec::All, Some(source)) => {
                            let both = state.vector(source);
                            state.vectors.insert(unit, both);
                            state.changed_by.insert(unit, at);
                            state.overwritten.insert(unit);
                        }
                        _ => {
                            let value = source.map_or(Value::Unknown, |s| state.vector(s).0);
                            state.write_vector(unit, value, at)
                        }
                    }
                }
                return;
            }
            // A scalar load of kernel arguments through the original
            // argument pointer: the dwords a unit originally held
            // (`Entry::arguments`); (sdst, sbase, offset, cache policy).
            "S_LOAD_DWORD_IMM"
            | "S_LOAD_DWORDX2_IMM"
            | "S_LOAD_DWORDX4_IMM"
            | "S_LOAD_DWORDX8_IMM"
            | "S_LOAD_DWORDX16_IMM"
                if self.kernarg_pointer.is_some() =>
            {
                let base = self.source(state, operands.get(1));
                let pointer = self.kernarg_pointer.map(|[lo, hi]| vec![Value::Original(lo), Value::Original(hi)]);
                let plain = Self::immediate(operands.get(3)).unwrap_or(0) == 0;
                let offset = Self::immediate(operands.get(2)).filter(|_| plain && Some(base) == pointer);
                for (part, unit) in destination.unwrap_or_default().into_iter().enumerate() {
                    let byte = offset.map(|o| o + 4 * part as i64);
                    let value = self
                        .arguments
                        .iter()
                        .find(|(_, at)| Some(i64::from(*at)) == byte)
                        .map_or(Value::Unknown, |(original, _)| Value::Original(*original));
                    state.set_scalar(unit, value, at);
                }
                return;
            }
            "V_AND_B32_e32" => {
                // vdst, src0, vsrc1: masking a widened value back.
                let mask = Self::immediate(operands.get(1));
                let source = match self.register_units(operands.get(2)) {
                    Some(units) if units.len() == 1 && units[0].is_vector() => state.vector(units[0]).0,
                    _ => Value::Unknown,
                };
                if let (Some(mask), Value::Widened(unit, widened_mask)) = (mask, source) {
                    let value = if mask == widened_mask { Value::Original(unit) } else { Value::Unknown };
                    for dst in destination.unwrap_or_default() {
                        state.write_vector(dst, value, at);
                    }
                    return;
                }
            }
            "V_WRITELANE_B32" => {
                // vdst, src0, lane, vdst_in
                if let (Some(dst), Some(lane)) = (destination, Self::immediate(operands.get(2))) {
                    let value = self.source(state, operands.get(1)).first().copied().unwrap_or(Value::Unknown);
                    for unit in dst {
                        state.lanes.insert((unit, lane), value);
                        state.lanes_touched.insert((unit, lane));
                        let (active, inactive) = state.vector(unit);
                        // One lane changed: the register as a whole is no longer original.
                        let changed = (
                            if active == Value::Original(unit) { Value::Unknown } else { active },
                            if inactive == Value::Original(unit) { Value::Unknown } else { inactive },
                        );
                        state.vectors.insert(unit, changed);
                        state.changed_by.insert(unit, at);
                    }
                    return;
                }
            }
            "V_READLANE_B32" => {
                if let (Some(dst), Some(source), Some(lane)) =
                    (destination, self.register_units(operands.get(1)), Self::immediate(operands.get(2)))
                {
                    let value =
                        source.first().and_then(|s| state.lanes.get(&(*s, lane))).copied().unwrap_or(Value::Unknown);
                    for unit in dst {
                        state.set_scalar(unit, value, at);
                    }
                    return;
                }
            }
            // Scratch stores and loads of one dword at a base register plus
            // an immediate: (data, V#, soffset, offset) for MUBUF, (data,
            // saddr, offset) with architected flat scratch.
            "BUFFER_STORE_DWORD_OFFSET" | "SCRATCH_STORE_DWORD_SADDR" => {
                let (base, offset) = if name.starts_with("BUFFER") { (2, 3) } else { (1, 2) };
                if let Some(offset) = Self::immediate(operands.get(offset)) {
                    let key = (self.slot_base(operands.get(base)), offset);
                    let value = match (self.register_units(operands.first()), state.exec) {
                        (Some(units), Exec::Entry) if units.len() == 1 => (state.vector(units[0]).0, Value::Unknown),
                        // Every lane: the whole register (spilled around a payload).
                        (Some(units), Exec::All) if units.len() == 1 => state.vector(units[0]),
                        _ => (Value::Unknown, Value::Unknown),
                    };
                    state.slots.insert(key, value);
                    return;
                }
            }
            "BUFFER_LOAD_DWORD_OFFSET" | "SCRATCH_LOAD_DWORD_SADDR" => {
                let (base, offset) = if name.starts_with("BUFFER") { (2, 3) } else { (1, 2) };
                if let (Some(dst), Some(offset)) = (destination.clone(), Self::immediate(operands.get(offset))) {
                    let key = (self.slot_base(operands.get(base)), offset);
                    let (active, inactive) = state.slots.get(&key).copied().unwrap_or((Value::Unknown, Value::Unknown));
                    for unit in dst {
                        if state.exec == Exec::All {
                            state.vectors.insert(unit, (active, inactive));
                            state.changed_by.insert(unit, at);
                            state.overwritten.insert(unit);
                        } else {
                            state.write_vector(unit, active, at);
                        }
                    }
                    return;
                }
            }
            "S_AND_SAVEEXEC_B64" => {
                let saved = [state.scalar(exec_units()[0]), state.scalar(exec_units()[1])];
                for (unit, value) in destination.unwrap_or_default().into_iter().zip(saved) {
                    state.set_scalar(unit, value, at);
                }
                for unit in exec_units() {
                    state.set_scalar(unit, Value::Unknown, at);
                }
                state.exec = if state.exec == Exec::Unknown { Exec::Unknown } else { Exec::Subset };
                self.clobber_implicit(state, instruction);
                return;
            }
            "S_OR_B64" | "S_ANDN2_B64" | "S_AND_B64" if writes_exec => {
                let narrowing = name != "S_OR_B64";
                let restores = name == "S_OR_B64"
                    && self.register_units(operands.get(1)).is_some_and(|u| u == exec_units())
                    && self.source(state, operands.get(2))
                        == [Value::Original(exec_units()[0]), Value::Original(exec_units()[1])];
                let new = match state.exec {
                    Exec::Entry | Exec::Subset if restores => Exec::Entry,
                    Exec::Entry | Exec::Subset if narrowing => Exec::Subset,
                    _ => Exec::Unknown,
                };
                for unit in exec_units() {
                    let value = if new == Exec::Entry { Value::Original(unit) } else { Value::Unknown };
                    state.set_scalar(unit, value, at);
                }
                state.exec = new;
                self.clobber_implicit(state, instruction);
                return;
            }
            _ => {}
        }
        // Anything else: what it writes becomes unknown.
        for reg in instruction.all_defs() {
            for unit in self.units.units(reg) {
                if exec_units().contains(unit) {
                    state.exec = Exec::Unknown;
                }
                if unit.is_vector() {
                    state.write_vector(*unit, Value::Unknown, at);
                } else {
                    state.set_scalar(*unit, Value::Unknown, at);
                }
            }
        }
    }

    fn clobber_implicit(&self, state: &mut State, instruction: &Instruction) {
        for reg in &instruction.implicit_defs {
            for unit in self.units.units(*reg) {
                if !exec_units().contains(unit) {
                    state.set_scalar(*unit, Value::Unknown, instruction.address);
                }
            }
        }
    }
}

/// How registers start, when not each with its own original value: a
/// kernel's entry after its preamble enabled more inputs (the hardware puts
/// the application's inputs elsewhere and the preamble moves them back).
#[derive(Clone, Debug, Default)]
pub struct Entry {
    /// `(unit, original)`: `unit` starts with the value `original` had.
    pub holds: Vec<(Unit, Unit)>,
    /// Units that start with something other than their original value.
    pub unknown: Vec<Unit>,
    /// A VGPR holding its original value with more bits above `mask` in its
    /// active lanes (gfx90a's packed work-item ids with more dimensions);
    /// `v_and_b32 v, mask, v` gives the original back.
    pub widened: Option<(Unit, i64)>,
    /// `(unit, byte)`: the unit's original value is the kernel argument
    /// dword at `byte` (preloaded arguments the instrumented kernel no
    /// longer preloads: its preamble loads them)...
    pub arguments: Vec<(Unit, u32)>,
    /// ...through the original kernel argument pointer, these units.
    pub kernarg_pointer: Option<[Unit; 2]>,
}

impl Entry {
    /// Every register starts with its own original value.
    pub fn is_default(&self) -> bool {
        self.holds.is_empty() && self.unknown.is_empty() && self.widened.is_none() && self.arguments.is_empty()
    }
}

/// Checks one payload's decoded code against the registers live at its point.
pub fn check(
    isa: &Isa,
    units: &RegisterUnits,
    code: &[Instruction],
    live: &UnitSet,
    sva: Option<u16>,
) -> Result<(), Violation> {
    check_from(isa, units, code, live, sva, &Entry::default())
}

/// `check`, with registers starting as `entry` says.
pub fn check_from(
    isa: &Isa,
    units: &RegisterUnits,
    code: &[Instruction],
    live: &UnitSet,
    sva: Option<u16>,
    entry: &Entry,
) -> Result<(), Violation> {
    interpret(isa, units, code, entry).check(isa, code, live, sva)
}

/// What `code` leaves in every register at its exits, whatever is live:
/// the interpretation does not depend on the live registers, so one serves
/// every point a copy of the code goes to ([`Outcome::check`] each).
pub struct Outcome {
    exit: Option<State>,
}

/// Interprets `code` from registers as `entry` says.
pub fn interpret(isa: &Isa, units: &RegisterUnits, code: &[Instruction], entry: &Entry) -> Outcome {
    let interpreter = Interpreter { isa, units, arguments: &entry.arguments, kernarg_pointer: entry.kernarg_pointer };
    let index_of: HashMap<u64, usize> = code.iter().enumerate().map(|(i, c)| (c.address, i)).collect();
    let end = code.last().map_or(0, |c| c.end());
    let mut at_instruction: Vec<Option<State>> = vec![None; code.len()];
    let mut at_exit: Option<State> = None;
    if code.is_empty() {
        return Outcome { exit: None };
    }
    let mut first = State::entry();
    for unit in &entry.unknown {
        if unit.is_vector() {
            first.vectors.insert(*unit, (Value::Unknown, Value::Unknown));
        } else {
            first.scalars.insert(*unit, Value::Unknown);
        }
    }
    for (unit, original) in &entry.holds {
        if unit.is_vector() {
            first.vectors.insert(*unit, (Value::Original(*original), Value::Original(*original)));
        } else {
            first.scalars.insert(*unit, Value::Original(*original));
        }
    }
    if let Some((unit, mask)) = entry.widened {
        first.vectors.insert(unit, (Value::Widened(unit, mask), Value::Original(unit)));
    }
    at_instruction[0] = Some(first);
    let mut work = vec![0usize];
    let mut rounds = 0usize;
    while let Some(index) = work.pop() {
        rounds += 1;
        if rounds > 100_000 {
            break;
        }
        let Some(mut state) = at_instruction[index].clone() else { continue };
        let instruction = &code[index];
        interpreter.step(&mut state, instruction);
        let mut successors = Vec::new();
        match instruction.flow {
            Flow::Next | Flow::Call => successors.push(instruction.end()),
            Flow::Branch { target } | Flow::Jump { target } => successors.push(target),
            Flow::ConditionalBranch { target } => {
                successors.push(instruction.end());
                successors.push(target);
            }
            Flow::EndProgram | Flow::IndirectBranch => {}
        }
        for successor in successors {
            if successor == end {
                match &mut at_exit {
                    Some(exit) => exit.join(&state),
                    None => at_exit = Some(state.clone()),
                }
                continue;
            }
            let Some(&next) = index_of.get(&successor) else { continue };
            let changed = match &mut at_instruction[next] {
                Some(existing) => {
                    let before = existing.clone();
                    existing.join(&state);
                    *existing != before
                }
                slot @ None => {
                    *slot = Some(state.clone());
                    true
                }
            };
            if changed {
                work.push(next);
            }
        }
    }
    Outcome { exit: at_exit }
}

impl Outcome {
    /// Whether every `live` register holds its original value at every
    /// exit, and the SVA (`sva`) changed only in the frame save lanes.
    pub fn check(&self, isa: &Isa, code: &[Instruction], live: &UnitSet, sva: Option<u16>) -> Result<(), Violation> {
        let Some(exit) = &self.exit else { return Ok(()) };
        let culprit = |unit: Unit| -> String {
            match exit.changed_by.get(&unit).and_then(|address| code.iter().find(|c| c.address == *address)) {
                Some(instruction) => format!(
                    "last written by `{}` at +{:#x}",
                    isa.mc.print(&instruction.raw, instruction.address).unwrap_or_default().trim(),
                    instruction.address - code[0].address
                ),
                None => "changed on some path".into(),
            }
        };
        for unit in live.iter() {
            let intact = match unit.file() {
                RegisterFile::Vgpr | RegisterFile::Agpr => {
                    exit.vector(unit) == (Value::Original(unit), Value::Original(unit))
                }
                _ => exit.scalar(unit) == Value::Original(unit),
            };
            if !intact {
                return Err(Violation { unit, culprit: culprit(unit) });
            }
        }
        if let Some(sva) = sva {
            let unit = Unit::vgpr(sva);
            let allowed: Vec<i64> = FRAME_VALUES
                .iter()
                .filter(|e| {
                    matches!(e.value, FrameValue::ApplicationScratchResource | FrameValue::ApplicationStackPointer)
                })
                .flat_map(|e| (e.first..e.first + e.count).map(i64::from))
                .collect();
            let lanes_written: Vec<i64> =
                exit.lanes_touched.iter().filter(|(u, _)| *u == unit).map(|(_, lane)| *lane).collect();
            if exit.overwritten.contains(&unit) || lanes_written.iter().any(|l| !allowed.contains(l)) {
                return Err(Violation {
                    unit,
                    culprit: format!("the SVA changed outside the frame save lanes; {}", culprit(unit)),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn point_constants_encode_as_literals() {
        assert_eq!(point_constants_as_literals("s_mov_b32 s15, gpuinstr.point.1.lo"), "s_mov_b32 s15, 0x7e57c0de");
        assert_eq!(
            point_constants_as_literals("v_add_co_u32_e32 v2, vcc, \"gpuinstr.point.0.hi\", v2"),
            "v_add_co_u32_e32 v2, vcc, 0x7e57c0de, v2"
        );
        assert_eq!(point_constants_as_literals("s_mov_b32 s4, 7"), "s_mov_b32 s4, 7");
    }
}
