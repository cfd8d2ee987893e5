//! Plans: where which hook goes (docs/plan.md). A TOML file of `[[insert]]`
//! tables, or the same selections from Rust ([`instrumentation_loop`], seed
//! 004's `instrumentationLoop`); both produce the payload compiler's points.

pub mod classes;
pub mod operands;

use std::collections::BTreeMap;
use std::path::Path;

use gpuinstr_intrinsics::{Register, SpecialRegister};
use regex::Regex;
use serde::Deserialize;
use thiserror::Error;

pub use classes::{InstructionClass, CLASSES};

use crate::stages::lift::{Flow, Function, Instruction, LiftedCodeObject};
use crate::stages::payload::{HookArgument, HookCall, PayloadPoint};

/// Where in a function an insertion goes: before the instructions it selects.
#[derive(Clone, Debug)]
pub enum Where {
    EachInstruction,
    /// The first instruction of each kernel (device functions: never).
    KernelEntry,
    /// The first instruction of each basic block.
    EachBlock,
    /// Each `s_endpgm` (kernels) or return (device functions).
    BeforeExit,
    /// The first instruction of each stretch of a basic block that runs
    /// under one EXEC mask: each block's first instruction and each one
    /// after an instruction that writes EXEC.
    EachExecRegion,
    /// Instructions whose pseudo opcode (`V_ADD_U32_e32`) matches.
    Opcode(Regex),
    Class(InstructionClass),
}

/// A value per instrumentation point, given to a hook as a constant or read
/// at the point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointValue {
    /// The instruction's address in the original code object.
    Address,
    /// The pseudo opcode number (LLVM's, for this target).
    Opcode,
    /// The instruction's index in its function.
    Index,
    /// The basic block's index in its function.
    Block,
    /// A number unique to the point in this plan run (0, 1, 2, ... in code order).
    Site,
    /// The address a flat, global, buffer or LDS instruction accesses, per
    /// lane, read at the point; an insert using it selects only such
    /// instructions.
    MemoryAddress,
    /// The space of that address (0 flat, 1 global, 2 buffer, 3 LDS): a
    /// constant; selects the same instructions.
    MemorySpace,
    /// The bytes one lane's access covers from that address (1 to 16): a
    /// constant; selects the same instructions.
    MemoryBytes,
    /// The value of the instruction's Nth source register at the point; an
    /// insert using it selects instructions whose Nth source is a register.
    Source(usize),
    /// How many scalar and lane-access instructions (run once per wave)
    /// run from this instruction to the end of its EXEC region.
    RegionScalar,
    /// How many vector instructions (run per active lane) run from this
    /// instruction to the end of its EXEC region.
    RegionVector,
}

pub const POINT_VALUES: &[(&str, &str)] = &[
    ("exec", "the EXEC mask (64-bit register read)"),
    ("vcc", "VCC (64-bit register read)"),
    ("address", "the instruction's address in the original code object (constant)"),
    ("opcode", "the instruction's LLVM pseudo opcode number (constant)"),
    ("index", "the instruction's index in its function (constant)"),
    ("block", "the basic block's index in its function (constant)"),
    ("site", "a number unique to the point in this run, in code order (constant)"),
    (
        "region-scalar",
        "how many scalar and lane-access instructions (once per wave) run from the instruction to the end of its EXEC \
         region: the rest of its block up to and including the next instruction that writes EXEC (constant)",
    ),
    (
        "region-vector",
        "how many vector instructions (once per active lane, under the EXEC the point sees) run from the instruction \
         to the end of its EXEC region (constant)",
    ),
    (
        "memory-address",
        "the address a memory instruction accesses, per lane, computed at the point from the instruction's own \
         operands; a 64-bit integer parameter. Flat and global: `vaddr` (64-bit), or `saddr` + the 32-bit `vaddr`, \
         plus the offset (13-bit signed for global instructions: LLVM 15 decodes `offset:-8` as 8184, which the plan \
         sign-extends; unsigned for flat). Buffer (MUBUF but format conversions): the resource's base + `soffset` + \
         `index * stride + offset` (`idxen`, `offen`, the instruction's offset; swizzled resources as the hardware \
         computes them); the hook runs only on the lanes whose access is in the buffer's range, and not on accesses \
         through an `add_tid` resource (the private segment buffer's: scratch). LDS (`ds_*` \
         but GDS, swizzles, permutes, append/consume): the 32-bit `vaddr + offset` (of a two-address form, the first \
         address), zero-extended. Scratch and scalar memory instructions have none",
    ),
    (
        "memory-space",
        "the space of the instruction's `memory-address`: 0 flat, 1 global, 2 buffer, 3 LDS (constant; selects the \
         instructions `memory-address` does)",
    ),
    (
        "memory-bytes",
        "how many bytes one lane's access covers from its `memory-address`: 1, 2, 4, 8, 12 or 16, from the width \
         the opcode names (of a two-address LDS form, one element; of an atomic, its operand) (constant; selects the \
         instructions `memory-address` does)",
    ),
];

/// One hook argument of a plan.
#[derive(Clone, Debug, PartialEq)]
pub enum PlanArgument {
    Fixed(HookArgument),
    Value(PointValue),
}

/// One `[[insert]]`.
#[derive(Clone, Debug)]
pub struct Insert {
    pub hook: String,
    pub at: Where,
    /// Glob on kernel names (`*`, `?`).
    pub kernels: String,
    /// Glob on device function names; none by default.
    pub functions: Option<String>,
    pub arguments: Vec<PlanArgument>,
    /// `count-in-registers = "GLOBAL"`: the hook adds its first argument
    /// once per wave and its second once per active lane to the 64-bit
    /// tool global GLOBAL; where a kernel has registers free throughout,
    /// the count is kept in them instead and added at the wave's exit
    /// ([`RegisterCount`]).
    pub count_in_registers: Option<String>,
}

/// What a plan's `count-in-registers` inserts count: their hooks each add
/// `scalar + vector * popcount(EXEC)` (their two constant arguments) to
/// `global`; the payload stage may keep that sum in registers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisterCount {
    pub global: String,
    pub hooks: std::collections::BTreeSet<String>,
}

#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub inserts: Vec<Insert>,
    /// The file the plan came from, for messages.
    pub file: String,
}

#[derive(Debug, Error)]
pub enum PlanError {
    #[error("{file}: cannot read the plan: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: not a valid plan: {message}")]
    Syntax { file: String, message: String },
    #[error("{file}: insert {index} (hook `{hook}`): {problem}")]
    Insert { file: String, index: usize, hook: String, problem: String },
    #[error("{file}: the plan inserts nothing (add [[insert]] tables; docs/plan.md)")]
    Empty { file: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFile {
    #[serde(default)]
    insert: Vec<InsertFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InsertFile {
    hook: String,
    #[serde(rename = "where")]
    at: String,
    kernels: Option<String>,
    functions: Option<String>,
    #[serde(default)]
    args: Vec<toml::Value>,
    #[serde(rename = "count-in-registers")]
    count_in_registers: Option<String>,
}

/// `*` any run of characters, `?` any one character.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

impl Where {
    pub fn parse(text: &str) -> Result<Where, String> {
        let text = text.trim();
        Ok(match text {
            "each-instruction" => Where::EachInstruction,
            "kernel-entry" => Where::KernelEntry,
            "each-block" => Where::EachBlock,
            "before-exit" => Where::BeforeExit,
            "each-exec-region" => Where::EachExecRegion,
            _ => {
                if let Some(pattern) = text.strip_prefix("opcode:") {
                    let anchored = format!("^(?:{pattern})$");
                    let pattern = pattern.escape_debug();
                    Where::Opcode(
                        Regex::new(&anchored)
                            .map_err(|e| format!("bad opcode pattern `{pattern}`: {}", one_line_regex_error(&e)))?,
                    )
                } else if let Some(name) = text.strip_prefix("class:") {
                    Where::Class(InstructionClass::from_name(name).ok_or_else(|| {
                        let names: Vec<&str> = CLASSES.iter().map(|(n, _, _)| *n).collect();
                        format!("unknown class `{}` (classes: {})", name.escape_debug(), names.join(", "))
                    })?)
                } else {
                    return Err(format!(
                        "`where = \"{}\"` is not a place (each-instruction, kernel-entry, each-block, \
                         each-exec-region, before-exit, opcode:<regex>, class:<name>)",
                        text.escape_debug()
                    ));
                }
            }
        })
    }
}

impl PlanArgument {
    fn parse(value: &toml::Value) -> Result<PlanArgument, String> {
        match value {
            toml::Value::Boolean(b) => Ok(PlanArgument::Fixed(HookArgument::Int(i64::from(*b)))),
            toml::Value::Integer(i) => Ok(PlanArgument::Fixed(HookArgument::Int(*i))),
            toml::Value::Float(f) => Ok(PlanArgument::Fixed(HookArgument::Float(*f))),
            toml::Value::Table(table) if table.len() == 1 => {
                if let Some(name) = table.get("reg").and_then(|v| v.as_str()) {
                    let register: Register =
                        name.parse().map_err(|e: gpuinstr_intrinsics::RegisterError| e.to_string())?;
                    return Ok(PlanArgument::Fixed(HookArgument::Register(register)));
                }
                if let Some(n) = table.get("source").and_then(|v| v.as_integer()) {
                    return usize::try_from(n)
                        .map(|n| PlanArgument::Value(PointValue::Source(n)))
                        .map_err(|_| format!("`source = {n}`: a source operand number is 0 or more"));
                }
                if let Some(name) = table.get("value").and_then(|v| v.as_str()) {
                    return match name {
                        "exec" => {
                            Ok(PlanArgument::Fixed(HookArgument::Register(Register::Special(SpecialRegister::Exec))))
                        }
                        "vcc" => {
                            Ok(PlanArgument::Fixed(HookArgument::Register(Register::Special(SpecialRegister::Vcc))))
                        }
                        "address" => Ok(PlanArgument::Value(PointValue::Address)),
                        "opcode" => Ok(PlanArgument::Value(PointValue::Opcode)),
                        "index" => Ok(PlanArgument::Value(PointValue::Index)),
                        "block" => Ok(PlanArgument::Value(PointValue::Block)),
                        "site" => Ok(PlanArgument::Value(PointValue::Site)),
                        "region-scalar" => Ok(PlanArgument::Value(PointValue::RegionScalar)),
                        "region-vector" => Ok(PlanArgument::Value(PointValue::RegionVector)),
                        "memory-address" => Ok(PlanArgument::Value(PointValue::MemoryAddress)),
                        "memory-space" => Ok(PlanArgument::Value(PointValue::MemorySpace)),
                        "memory-bytes" => Ok(PlanArgument::Value(PointValue::MemoryBytes)),
                        _ => {
                            let names: Vec<&str> = POINT_VALUES.iter().map(|(n, _)| *n).collect();
                            Err(format!("unknown value `{}` (values: {})", name.escape_debug(), names.join(", ")))
                        }
                    };
                }
                Err(format!("argument `{value}` is not {{ reg = \"s4\" }} or {{ value = \"exec\" }}"))
            }
            other => Err(format!(
                "argument `{other}` is not a constant (true, 3, 1.5), {{ reg = \"s4\" }} or {{ value = \"exec\" }}"
            )),
        }
    }
}

/// A `count-in-registers` insert names a global and passes two arguments
/// known when instrumenting (constants or point values, not registers):
/// what is added once per wave, and once per active lane.
fn check_register_count(global: &str, arguments: &[PlanArgument]) -> Result<(), String> {
    if global.is_empty() {
        return Err("`count-in-registers` names no global (the tool's 64-bit counter)".into());
    }
    let known = |a: &PlanArgument| match a {
        PlanArgument::Fixed(HookArgument::Int(n)) => u32::try_from(*n).is_ok(),
        PlanArgument::Fixed(_) => false,
        PlanArgument::Value(value) => !matches!(value, PointValue::MemoryAddress | PointValue::Source(_)),
    };
    if arguments.len() != 2 || !arguments.iter().all(known) {
        return Err("`count-in-registers` needs two arguments known when instrumenting: what is added once \
             per wave and once per active lane (integers from 0 to 2^32-1 or values such as \
             { value = \"region-scalar\" }, { value = \"region-vector\" })"
            .into());
    }
    Ok(())
}

/// A TOML error as "line L, column C: what" (toml's own text spans lines
/// to draw the place).
fn one_line_toml_error(text: &str, error: &toml::de::Error) -> String {
    let what = error.message().trim().replace('\n', " ");
    match error.span() {
        Some(span) => {
            let before = &text.as_bytes()[..span.start.min(text.len())];
            let line = before.iter().filter(|b| **b == b'\n').count() + 1;
            let column = before.iter().rev().take_while(|b| **b != b'\n').count() + 1;
            format!("line {line}, column {column}: {what}")
        }
        None => what,
    }
}

/// A regex error's last line, which says what is wrong (its first lines
/// draw the pattern).
fn one_line_regex_error(error: &regex::Error) -> String {
    let text = error.to_string();
    text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(&text).trim().to_string()
}

impl Plan {
    /// Parses plan text; `file` names it in messages.
    pub fn parse(text: &str, file: &str) -> Result<Plan, PlanError> {
        let parsed: PlanFile = toml::from_str(text)
            .map_err(|e| PlanError::Syntax { file: file.to_string(), message: one_line_toml_error(text, &e) })?;
        if parsed.insert.is_empty() {
            return Err(PlanError::Empty { file: file.to_string() });
        }
        let mut inserts = Vec::new();
        for (index, insert) in parsed.insert.into_iter().enumerate() {
            let problem = |problem: String| PlanError::Insert {
                file: file.to_string(),
                index: index + 1,
                hook: insert.hook.escape_debug().to_string(),
                problem,
            };
            let at = Where::parse(&insert.at).map_err(problem)?;
            let arguments =
                insert.args.iter().map(PlanArgument::parse).collect::<Result<Vec<_>, _>>().map_err(problem)?;
            if let Some(global) = &insert.count_in_registers {
                check_register_count(global, &arguments).map_err(problem)?;
            }
            inserts.push(Insert {
                hook: insert.hook.clone(),
                at,
                kernels: insert.kernels.clone().unwrap_or_else(|| "*".into()),
                functions: insert.functions.clone(),
                arguments,
                count_in_registers: insert.count_in_registers.clone(),
            });
        }
        let plan = Plan { inserts, file: file.to_string() };
        plan.register_count()?;
        Ok(plan)
    }

    /// What the plan's `count-in-registers` inserts count, if any. One
    /// global per plan, and a counting hook counts at every insert that
    /// calls it (its calls are replaced by register arithmetic).
    pub fn register_count(&self) -> Result<Option<RegisterCount>, PlanError> {
        let mut count: Option<RegisterCount> = None;
        for (index, insert) in self.inserts.iter().enumerate() {
            let Some(global) = &insert.count_in_registers else { continue };
            let problem = |problem: String| PlanError::Insert {
                file: self.file.clone(),
                index: index + 1,
                hook: insert.hook.escape_debug().to_string(),
                problem,
            };
            match &mut count {
                Some(count) if &count.global != global => {
                    return Err(problem(format!(
                        "counts into `{}`, another insert into `{}`: a plan keeps one count in registers",
                        global.escape_debug(),
                        count.global.escape_debug()
                    )))
                }
                Some(count) => {
                    count.hooks.insert(insert.hook.clone());
                }
                None => {
                    count = Some(RegisterCount { global: global.clone(), hooks: [insert.hook.clone()].into() });
                }
            }
        }
        if let Some(count) = &count {
            for (index, insert) in self.inserts.iter().enumerate() {
                if insert.count_in_registers.is_none() && count.hooks.contains(&insert.hook) {
                    return Err(PlanError::Insert {
                        file: self.file.clone(),
                        index: index + 1,
                        hook: insert.hook.escape_debug().to_string(),
                        problem: format!(
                            "another insert counts with this hook in registers: give this one \
                             `count-in-registers = \"{}\"` too, or call another hook",
                            count.global.escape_debug()
                        ),
                    });
                }
            }
        }
        Ok(count)
    }

    pub fn load(path: &Path) -> Result<Plan, PlanError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| PlanError::Io { file: file.clone(), source })?;
        Plan::parse(&text, &file)
    }

    /// Every hook the plan calls is one of `hooks` (a tool's); `tool` names
    /// the tool in the message.
    pub fn check_hooks<'a>(
        &self,
        hooks: impl IntoIterator<Item = &'a str> + Clone,
        tool: &str,
    ) -> Result<(), PlanError> {
        for (index, insert) in self.inserts.iter().enumerate() {
            if !hooks.clone().into_iter().any(|h| h == insert.hook) {
                let mut available: Vec<&str> = hooks.clone().into_iter().collect();
                available.sort_unstable();
                return Err(PlanError::Insert {
                    file: self.file.clone(),
                    index: index + 1,
                    hook: insert.hook.escape_debug().to_string(),
                    problem: format!(
                        "the tool {tool} has no such hook (its hooks: {})",
                        if available.is_empty() { "none".to_string() } else { available.join(", ") }
                    ),
                });
            }
        }
        Ok(())
    }

    /// The points of a lifted code object the plan selects, with their hook
    /// calls in plan order.
    pub fn select(&self, lifted: &LiftedCodeObject<'_>) -> Vec<PayloadPoint> {
        self.select_in(lifted, Function::relocatable, 0)
    }

    /// [`Plan::select`] in part of a code object whose points before it
    /// number `first_site` (a group of kernels instrumented on its own).
    pub fn select_from(&self, lifted: &LiftedCodeObject<'_>, first_site: usize) -> Vec<PayloadPoint> {
        self.select_in(lifted, Function::relocatable, first_site as i64)
    }

    /// Whether a hook is given its point's `site` number, which counts the
    /// points of every function before it.
    pub fn numbers_sites(&self) -> bool {
        self.inserts.iter().flat_map(|i| &i.arguments).any(|a| matches!(a, PlanArgument::Value(PointValue::Site)))
    }

    /// The points the plan would select in functions whose code cannot
    /// move: they cannot be instrumented, and a report must count them.
    pub fn select_where_code_cannot_move(&self, lifted: &LiftedCodeObject<'_>) -> Vec<PayloadPoint> {
        self.select_in(lifted, |f| !f.relocatable(), 0)
    }

    fn select_in(
        &self,
        lifted: &LiftedCodeObject<'_>,
        functions: impl Fn(&Function) -> bool,
        first_site: i64,
    ) -> Vec<PayloadPoint> {
        let mut site = first_site;
        // Which inserts name each function, matched once per function.
        let mut named: Option<(usize, Vec<bool>)> = None;
        instrumentation_loop_in(lifted, functions, |point| {
            let mut calls = Vec::new();
            if named.as_ref().is_none_or(|(function, _)| *function != point.function_index) {
                let names = self.inserts.iter().map(|insert| insert.names(point.function)).collect();
                named = Some((point.function_index, names));
            }
            let names = &named.as_ref().expect("matched above").1;
            for (insert, named) in self.inserts.iter().zip(names) {
                if !named || !insert.applies_at(point) {
                    continue;
                }
                let arguments: Option<Vec<HookArgument>> = insert
                    .arguments
                    .iter()
                    .map(|a| match a {
                        PlanArgument::Fixed(argument) => Some(argument.clone()),
                        PlanArgument::Value(value) => match value {
                            PointValue::MemoryAddress => operands::memory_address(&lifted.isa, point.instruction),
                            PointValue::MemorySpace => operands::memory_space(&lifted.isa, point.instruction),
                            PointValue::MemoryBytes => operands::memory_bytes(&lifted.isa, point.instruction),
                            PointValue::Source(n) => operands::source_register(&lifted.isa, point.instruction, *n),
                            PointValue::Address => Some(HookArgument::Int(point.instruction.address as i64)),
                            PointValue::Opcode => Some(HookArgument::Int(i64::from(point.instruction.opcode))),
                            PointValue::Index => Some(HookArgument::Int(point.index as i64)),
                            PointValue::Block => Some(HookArgument::Int(point.block as i64)),
                            PointValue::Site => Some(HookArgument::Int(site)),
                            PointValue::RegionScalar => Some(HookArgument::Int(i64::from(point.region.scalar))),
                            PointValue::RegionVector => Some(HookArgument::Int(i64::from(point.region.vector))),
                        },
                    })
                    .collect();
                // An insert reading an operand applies where the instruction has it.
                let Some(arguments) = arguments else { continue };
                calls.push(HookCall { hook: insert.hook.clone(), arguments });
            }
            if !calls.is_empty() {
                site += 1;
            }
            calls
        })
    }
}

impl Insert {
    /// Whether the insert names `function` (its kernels' or functions' globs).
    fn names(&self, function: &Function) -> bool {
        if function.is_kernel() {
            glob_matches(&self.kernels, &function.name)
        } else {
            self.functions.as_deref().is_some_and(|g| glob_matches(g, &function.name))
        }
    }

    /// Whether the insert applies at `point` of a function it names.
    fn applies_at(&self, point: &Site<'_>) -> bool {
        match &self.at {
            Where::EachInstruction => true,
            Where::KernelEntry => point.function.is_kernel() && point.index == point.function.entry,
            Where::EachBlock => point.first_in_block,
            Where::EachExecRegion => point.region.first,
            Where::BeforeExit => {
                matches!(point.instruction.flow, Flow::EndProgram)
                    || (!point.function.is_kernel() && matches!(point.instruction.flow, Flow::IndirectBranch))
            }
            Where::Opcode(pattern) => pattern.is_match(point.opcode_name),
            Where::Class(class) => class.contains(&point.lifted.isa, point.instruction),
        }
    }
}

/// One instruction, as a selection sees it.
pub struct Site<'a> {
    pub lifted: &'a LiftedCodeObject<'a>,
    pub function_index: usize,
    pub function: &'a Function,
    pub instruction: &'a Instruction,
    /// Index in the function (as `lift --emit mir` counts).
    pub index: usize,
    pub block: usize,
    pub first_in_block: bool,
    /// The pseudo opcode name (`S_LOAD_DWORDX2_IMM`).
    pub opcode_name: &'a str,
    /// What runs from here to the end of the instruction's EXEC region.
    pub region: RegionCounts,
}

/// The instructions from one instruction to the end of its EXEC region: the
/// rest of its basic block, up to and including the next instruction that
/// writes EXEC. They all run, under the EXEC mask seen before the first
/// (branches end blocks; an instruction that changes EXEC ends the region).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegionCounts {
    /// Whether the instruction starts its region.
    pub first: bool,
    /// Scalar and lane-access instructions (once per wave).
    pub scalar: u32,
    /// Vector instructions (once per active lane).
    pub vector: u32,
}

/// `RegionCounts` of every instruction of a block.
fn region_counts(lifted: &LiftedCodeObject<'_>, block: &crate::stages::lift::Block) -> Vec<RegionCounts> {
    let isa = &lifted.isa;
    let exec: Vec<u32> = ["EXEC", "EXEC_LO", "EXEC_HI"].iter().filter_map(|n| isa.register_by_name(n)).collect();
    let writes_exec = |i: &Instruction| i.all_defs().any(|r| exec.contains(&r));
    let mut counts = vec![RegionCounts::default(); block.instructions.len()];
    // Backwards: each instruction adds itself to what follows in its region.
    let mut after = RegionCounts::default();
    for (position, instruction) in block.instructions.iter().enumerate().rev() {
        if writes_exec(instruction) {
            after = RegionCounts::default();
        }
        let vector = InstructionClass::Vector.contains(isa, instruction);
        let here = RegionCounts {
            first: position == 0 || writes_exec(&block.instructions[position - 1]),
            scalar: after.scalar + u32::from(!vector),
            vector: after.vector + u32::from(vector),
        };
        counts[position] = here;
        after = here;
    }
    counts
}

impl Site<'_> {
    pub fn is(&self, class: InstructionClass) -> bool {
        class.contains(&self.lifted.isa, self.instruction)
    }
}

/// Seed 004's `instrumentationLoop`: `choose` sees every decoded instruction
/// of every relocatable function, in code order, and returns the hooks to
/// call before it (none to leave it alone). Preload prologues are not the
/// kernel's code where the hardware enters it: not seen
/// ([`Function::in_preload_prologue`]).
pub fn instrumentation_loop<'a>(
    lifted: &'a LiftedCodeObject<'a>,
    choose: impl FnMut(&Site<'a>) -> Vec<HookCall>,
) -> Vec<PayloadPoint> {
    instrumentation_loop_in(lifted, Function::relocatable, choose)
}

/// The loop over the functions `functions` accepts.
fn instrumentation_loop_in<'a>(
    lifted: &'a LiftedCodeObject<'a>,
    functions: impl Fn(&Function) -> bool,
    mut choose: impl FnMut(&Site<'a>) -> Vec<HookCall>,
) -> Vec<PayloadPoint> {
    let mut points = Vec::new();
    for (function_index, function) in lifted.functions.iter().enumerate() {
        if !functions(function) {
            continue;
        }
        let mut index = 0usize;
        for block in &function.blocks {
            let regions = region_counts(lifted, block);
            for (position, instruction) in block.instructions.iter().enumerate() {
                if instruction.decoded && !function.in_preload_prologue(index) {
                    let site = Site {
                        lifted,
                        function_index,
                        function,
                        instruction,
                        index,
                        block: block.index,
                        first_in_block: position == 0,
                        opcode_name: instruction.name(&lifted.isa),
                        region: regions[position],
                    };
                    let calls = choose(&site);
                    if !calls.is_empty() {
                        points.push(PayloadPoint { function: function_index, instruction: index, calls });
                    }
                }
                index += 1;
            }
        }
    }
    points
}

/// How many points each hook got, for reports.
pub fn hook_counts(points: &[PayloadPoint]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for call in points.iter().flat_map(|p| &p.calls) {
        *counts.entry(call.hook.clone()).or_default() += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/plan.md lists every class and every value as the code has them.
    #[test]
    fn docs_list_every_class_and_value() {
        let docs = include_str!("../../../docs/plan.md");
        for (name, _, meaning) in CLASSES {
            let row = format!("| `{name}` | {meaning} |");
            assert!(docs.contains(&row), "docs/plan.md lacks `{row}`");
        }
        for (name, meaning) in POINT_VALUES {
            let row = format!("| `{name}` | {meaning} |");
            assert!(docs.contains(&row), "docs/plan.md lacks `{row}`");
        }
    }

    #[test]
    fn globs_match_like_shells() {
        assert!(glob_matches("*", "_Z3fooPf"));
        assert!(glob_matches("_Z3foo*", "_Z3fooPf"));
        assert!(glob_matches("*foo*", "_Z3fooPf"));
        assert!(glob_matches("_Z3f?oPf", "_Z3fooPf"));
        assert!(!glob_matches("_Z3bar*", "_Z3fooPf"));
        assert!(!glob_matches("foo", "foobar"));
        assert!(glob_matches("a*b*c", "axxbyyc"));
        assert!(!glob_matches("a*b*c", "axxbyy"));
    }

    #[test]
    fn plans_parse_with_every_argument_form() {
        let plan = Plan::parse(
            r#"
[[insert]]
hook = "countVector"
where = "class:vector"
kernels = "_Z9vectorAdd*"
args = [true]

[[insert]]
hook = "record"
where = "opcode:V_ADD_.*"
args = [{ reg = "s4" }, { value = "exec" }, { value = "opcode" }, 3, 1.5]
"#,
            "plan.toml",
        )
        .unwrap();
        assert_eq!(plan.inserts.len(), 2);
        assert_eq!(plan.inserts[0].arguments, vec![PlanArgument::Fixed(HookArgument::Int(1))]);
        assert!(matches!(plan.inserts[0].at, Where::Class(InstructionClass::Vector)));
        assert_eq!(plan.inserts[1].kernels, "*");
        assert_eq!(
            plan.inserts[1].arguments,
            vec![
                PlanArgument::Fixed(HookArgument::Register(Register::Sgpr(4))),
                PlanArgument::Fixed(HookArgument::Register(Register::Special(SpecialRegister::Exec))),
                PlanArgument::Value(PointValue::Opcode),
                PlanArgument::Fixed(HookArgument::Int(3)),
                PlanArgument::Fixed(HookArgument::Float(1.5)),
            ]
        );
        let Where::Opcode(pattern) = &plan.inserts[1].at else { panic!() };
        assert!(pattern.is_match("V_ADD_U32_e32") && !pattern.is_match("S_V_ADD_U32"));
    }

    #[test]
    fn bad_plans_say_what_is_wrong_and_where() {
        let error = |text: &str| Plan::parse(text, "p.toml").unwrap_err().to_string();
        assert!(error("[[insert]]\nhook = 1").starts_with("p.toml: not a valid plan: "));
        assert_eq!(error(""), "p.toml: the plan inserts nothing (add [[insert]] tables; docs/plan.md)");
        assert!(error("[[insert]]\nhook = \"h\"\nwhere = \"everywhere\"")
            .starts_with("p.toml: insert 1 (hook `h`): `where = \"everywhere\"` is not a place"));
        assert!(error("[[insert]]\nhook = \"h\"\nwhere = \"class:fancy\"")
            .starts_with("p.toml: insert 1 (hook `h`): unknown class `fancy` (classes: scalar, "));
        assert!(error("[[insert]]\nhook = \"h\"\nwhere = \"opcode:(\"").contains("bad opcode pattern `(`"));
        assert!(error("[[insert]]\nhook = \"h\"\nwhere = \"kernel-entry\"\nargs = [{ reg = \"q9\" }]")
            .contains("`q9` is not a register name"));
        assert!(error("[[insert]]\nhook = \"h\"\nwhere = \"kernel-entry\"\nargs = [{ value = \"moon\" }]")
            .contains("unknown value `moon` (values: exec, vcc, address"));
        assert!(error("[[insert]]\nhook = \"h\"\nwhere = \"kernel-entry\"\nargs = [[1]]").contains("is not a constant"));
        assert!(error("[[insert]]\nhook = \"h\"\nwhere = \"kernel-entry\"\nkernel = \"x\"")
            .contains("unknown field `kernel`"));
    }

    #[test]
    fn a_count_in_registers_takes_two_known_amounts_and_one_global() {
        let count = |rest: &str| {
            let text = format!(
                "[[insert]]\nhook = \"count\"\nwhere = \"each-exec-region\"\ncount-in-registers = \"Counter\"\n{rest}"
            );
            Plan::parse(&text, "p.toml").map(|plan| plan.register_count().unwrap())
        };
        let plan = count("args = [{ value = \"region-scalar\" }, 4]").unwrap().unwrap();
        assert_eq!(plan, RegisterCount { global: "Counter".into(), hooks: ["count".to_string()].into() });
        let error = |rest: &str| count(rest).unwrap_err().to_string();
        let needs_two = "`count-in-registers` needs two arguments known when instrumenting";
        assert!(error("args = [1]").contains(needs_two));
        assert!(error("args = [1, { reg = \"s4\" }]").contains(needs_two));
        assert!(error("args = [1, { value = \"memory-address\" }]").contains(needs_two));
        assert!(error("args = [1, -1]").contains(needs_two));
        assert!(error("args = [1, 2.5]").contains(needs_two));
        let other_global = "args = [1, 2]\n[[insert]]\nhook = \"count\"\nwhere = \"each-block\"\nargs = [1, 2]\n\
                            count-in-registers = \"Other\"";
        assert_eq!(
            error(other_global),
            "p.toml: insert 2 (hook `count`): counts into `Other`, another insert into `Counter`: a plan keeps one \
             count in registers"
        );
        let same_hook_called = "args = [1, 2]\n[[insert]]\nhook = \"count\"\nwhere = \"each-block\"\nargs = [1, 2]";
        assert!(error(same_hook_called).starts_with(
            "p.toml: insert 2 (hook `count`): another insert counts with this hook in registers: give this one \
             `count-in-registers = \"Counter\"` too"
        ));
        let empty = Plan::parse(
            "[[insert]]\nhook = \"h\"\nwhere = \"kernel-entry\"\nargs = [1, 2]\ncount-in-registers = \"\"",
            "p.toml",
        );
        assert!(empty.unwrap_err().to_string().contains("names no global"));
    }
}
