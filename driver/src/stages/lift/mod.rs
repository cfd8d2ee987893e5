//! Stage 2, lift: a code object becomes functions of basic blocks of
//! instructions with their pseudo opcodes, register defs and uses, branch
//! targets and symbolic pc-relative address computations.
//!
//! Function extents come from symbol sizes: the zero padding between
//! functions is never disassembled (it does not decode to valid code).

pub mod call_graph;
pub mod cfg;
pub mod flags;
pub mod instruction;
pub mod isa;
pub mod line_encoding;
pub mod operand_roles;
pub mod pc_relative;
pub mod preload_prologue;
pub mod print;

use std::collections::BTreeMap;

use serde::Serialize;

pub use call_graph::{kernels_that_may_run, reachable_functions};
pub use cfg::{Block, BlockExit};
pub use flags::{Flag, FlagBits, FlagError};
pub use instruction::{Flow, Half, Instruction, PcRelative};
pub use isa::{Isa, IsaError, Mapping};
pub use operand_roles::{OperandRole, OperandRoleError, OperandRoles};
pub use preload_prologue::{replace_library_prologues, PreloadPrologue, PRELOAD_PROLOGUE_BYTES};

use crate::stages::load::{Binding, CodeObject, SymbolKind};

/// What kind of function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionKind {
    /// A kernel; the index of its entry in `CodeObject::kernels`.
    Kernel(usize),
    DeviceFunction,
}

/// Something the lifter could not handle fully.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub address: u64,
    pub kind: ProblemKind,
    pub detail: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProblemKind {
    /// Bytes this build's LLVM does not decode.
    UndecodableInstruction,
    /// A real opcode without a pseudo in LLVM's table.
    UnmappedOpcode,
    /// A pc-relative computation that could not be made symbolic: the
    /// function cannot move.
    NotRelocatable,
    /// A pc-relative target outside every loaded section.
    PcRelativeOutsideCodeObject,
    BranchOutsideFunction,
    BranchIntoInstruction,
    /// Function symbols that overlap.
    OverlappingFunctions,
    /// A kernel that preloads arguments has no instruction 256 bytes past
    /// its start, where the hardware enters it.
    NoPreloadEntry,
}

impl ProblemKind {
    /// Whether the function's code may still be moved and patched.
    pub fn blocks_relocation(self) -> bool {
        matches!(
            self,
            ProblemKind::NotRelocatable
                | ProblemKind::PcRelativeOutsideCodeObject
                | ProblemKind::BranchIntoInstruction
                | ProblemKind::UndecodableInstruction
                | ProblemKind::NoPreloadEntry
        )
    }
}

/// A call (`s_swappc_b64`) and, when the callee's address was built by a
/// symbolic pc-relative computation, the callee.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallSite {
    pub address: u64,
    pub target: Option<u64>,
}

/// A kernel or device function.
#[derive(Clone, Debug)]
pub struct Function {
    pub name: String,
    pub kind: FunctionKind,
    pub address: u64,
    pub size: u64,
    pub blocks: Vec<Block>,
    pub calls: Vec<CallSite>,
    pub problems: Vec<Problem>,
    /// The index of the instruction the hardware starts a kernel at: 0, or
    /// for a kernel that preloads arguments into SGPRs the one 256 bytes in
    /// (before it, the prologue that loads them where firmware does not,
    /// [`Function::in_preload_prologue`]).
    pub entry: usize,
    /// What the bytes before `entry` are.
    pub preload_prologue: PreloadPrologue,
    /// Its place among the code object's functions in address order,
    /// however few of them are lifted (block labels are numbered by it).
    pub number: usize,
}

impl Function {
    pub fn instructions(&self) -> impl Iterator<Item = &Instruction> {
        self.blocks.iter().flat_map(|b| &b.instructions)
    }

    pub fn end(&self) -> u64 {
        self.address + self.size
    }

    /// Code can move: every pc-relative computation is symbolic and every
    /// byte decoded.
    pub fn relocatable(&self) -> bool {
        !self.problems.iter().any(|p| p.kind.blocks_relocation())
    }

    pub fn is_kernel(&self) -> bool {
        matches!(self.kind, FunctionKind::Kernel(_))
    }

    /// For a kernel, its index in `CodeObject::kernels`.
    pub fn kernel_index(&self) -> Option<usize> {
        match self.kind {
            FunctionKind::Kernel(index) => Some(index),
            FunctionKind::DeviceFunction => None,
        }
    }

    /// Where the hardware starts the function (see [`Function::entry`]).
    pub fn entry_address(&self) -> u64 {
        self.instructions().nth(self.entry).map_or(self.address, |i| i.address)
    }

    /// Whether the instruction at `index` is in a preloading kernel's
    /// compatibility prologue: it runs only where firmware does not preload
    /// the arguments, and is never instrumented.
    pub fn in_preload_prologue(&self, index: usize) -> bool {
        index < self.entry
    }

    /// Whether a branch of the function goes back to where the hardware
    /// enters it (then the registers there are not only what the entry set;
    /// a preload prologue's jump to the entry is the entry).
    pub fn entry_is_branch_target(&self) -> bool {
        let entry = self.entry_address();
        self.instructions().skip(self.entry).any(|i| match i.flow {
            Flow::Branch { target } | Flow::ConditionalBranch { target } => target == entry,
            _ => false,
        })
    }
}

/// Counts over a lifted code object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LiftStatistics {
    pub functions: usize,
    pub kernels: usize,
    pub instructions: usize,
    pub undecodable: usize,
    pub mapped_to_pseudo: usize,
    pub native_opcodes: usize,
    pub unmapped_opcodes: usize,
    pub pc_relative_symbolized: usize,
    pub indirect_branches: usize,
    pub not_relocatable_functions: usize,
    /// Distinct unmapped real opcodes.
    pub unmapped_names: Vec<String>,
}

/// A lifted code object.
pub struct LiftedCodeObject<'c> {
    pub code_object: &'c CodeObject,
    pub isa: Isa,
    /// In address order.
    pub functions: Vec<Function>,
}

impl<'c> LiftedCodeObject<'c> {
    /// The same lifted code with another copy of its code object: one whose
    /// metadata or descriptors changed, not its code.
    pub fn with_code_object<'d>(self, code_object: &'d CodeObject) -> LiftedCodeObject<'d> {
        debug_assert_eq!(self.code_object.sections, code_object.sections, "the same code");
        LiftedCodeObject { code_object, isa: self.isa, functions: self.functions }
    }

    pub fn function(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name)
    }

    /// The function starting at `address`.
    pub fn function_at(&self, address: u64) -> Option<&Function> {
        self.functions.iter().find(|f| f.address == address)
    }

    pub fn statistics(&self) -> LiftStatistics {
        let mut stats = LiftStatistics { functions: self.functions.len(), ..Default::default() };
        let mut unmapped = std::collections::BTreeSet::new();
        for function in &self.functions {
            stats.kernels += usize::from(function.is_kernel());
            stats.not_relocatable_functions += usize::from(!function.relocatable());
            for instruction in function.instructions() {
                stats.instructions += 1;
                if !instruction.decoded {
                    stats.undecodable += 1;
                    continue;
                }
                match instruction.mapping {
                    Mapping::Pseudo(_) => stats.mapped_to_pseudo += 1,
                    Mapping::Native => stats.native_opcodes += 1,
                    Mapping::Unmapped => {
                        stats.unmapped_opcodes += 1;
                        unmapped.insert(self.isa.opcode_name(instruction.raw.opcode).to_string());
                    }
                }
                stats.pc_relative_symbolized += usize::from(instruction.pc_relative.is_some());
                stats.indirect_branches += usize::from(instruction.flow == Flow::IndirectBranch);
            }
        }
        stats.unmapped_names = unmapped.into_iter().collect();
        stats
    }
}

/// A function's place in the code object before decoding.
struct Extent {
    /// Its place among the code object's functions.
    number: usize,
    name: String,
    kind: FunctionKind,
    start: u64,
    end: u64,
}

/// Kernels (from the descriptors) and device functions (function symbols in
/// executable sections), sized by their symbols.
fn function_extents(code_object: &CodeObject, problems: &mut Vec<Problem>) -> Vec<Extent> {
    let executable: Vec<_> = code_object.sections.iter().filter(|s| s.loadable && s.executable()).collect();
    let in_code = |address: u64| executable.iter().find(|s| s.contains(address));
    // One function per start address; global names win over local aliases.
    let mut by_start: BTreeMap<u64, (String, u64, bool)> = BTreeMap::new();
    for symbol in &code_object.symbols {
        if symbol.kind != SymbolKind::Function || symbol.size == 0 || in_code(symbol.value).is_none() {
            continue;
        }
        let global = symbol.binding != Binding::Local;
        let entry = by_start.entry(symbol.value).or_insert((symbol.name.clone(), symbol.size, global));
        if global && !entry.2 {
            *entry = (symbol.name.clone(), symbol.size, global);
        }
    }
    for kernel in &code_object.kernels {
        by_start.entry(kernel.code_address).or_insert_with(|| (kernel.name().to_string(), 0, true));
    }
    let starts: Vec<u64> = by_start.keys().copied().collect();
    let mut extents = Vec::new();
    for (position, (start, (name, size, _))) in by_start.into_iter().enumerate() {
        let section_end = in_code(start).map_or(start, |s| s.address + s.size);
        let next = starts.get(position + 1).copied().unwrap_or(section_end);
        let mut end = if size > 0 { start + size } else { next.min(section_end) };
        if size == 0 {
            // A function symbol without a size (Tensile's kernels) runs to
            // the next function: the zero words the linker aligned that one
            // with are padding after its last terminator, not code.
            let zero_word = |at: u64| code_object.bytes_at(at, 4) == Some(&[0u8; 4][..]);
            while end >= start + 8 && zero_word(end - 4) {
                end -= 4;
            }
        }
        if end > next {
            problems.push(Problem {
                address: start,
                kind: ProblemKind::OverlappingFunctions,
                detail: format!("function `{name}` overlaps the next function; cut at {next:#x}"),
            });
            end = next;
        }
        let kind = code_object
            .kernels
            .iter()
            .position(|k| k.code_address == start)
            .map_or(FunctionKind::DeviceFunction, FunctionKind::Kernel);
        let name = match kind {
            FunctionKind::Kernel(index) => code_object.kernels[index].name().to_string(),
            FunctionKind::DeviceFunction => name,
        };
        extents.push(Extent { number: extents.len(), name, kind, start, end });
    }
    extents
}

/// Decodings by their first 8 bytes: a code object repeats its encodings
/// (rocRAND's gfx90a one: 54,967 instructions, 23,337 distinct 8-byte
/// windows). Only decodings of at most 8 bytes are kept: what LLVM's
/// decoder makes of an instruction depends on its own bytes alone (no
/// symbolizer, so the address changes no operand), and the longer RDNA
/// encodings (a literal after 8 bytes) are decoded every time.
#[derive(Default)]
struct DecodeCache {
    by_window: rustc_hash::FxHashMap<(u8, u64), crate::native::RawInstruction>,
}

impl DecodeCache {
    fn decode(&mut self, isa: &Isa, bytes: &[u8], address: u64) -> Result<crate::native::RawInstruction, u32> {
        let window = &bytes[..bytes.len().min(8)];
        let mut word = [0u8; 8];
        word[..window.len()].copy_from_slice(window);
        let key = (window.len() as u8, u64::from_le_bytes(word));
        if let Some(known) = self.by_window.get(&key) {
            return Ok(known.clone());
        }
        let raw = isa.mc.decode(bytes, address)?;
        if raw.size > 0 && raw.size as usize <= window.len() {
            self.by_window.insert(key, raw.clone());
        }
        Ok(raw)
    }
}

fn lift_function(
    isa: &Isa,
    code_object: &CodeObject,
    extent: Extent,
    mut problems: Vec<Problem>,
    decoded: &mut DecodeCache,
) -> Function {
    let bytes = code_object.bytes_at(extent.start, extent.end - extent.start).unwrap_or_default();
    let mut instructions = Vec::new();
    let mut offset = 0usize;
    while offset < bytes.len() {
        let address = extent.start + offset as u64;
        match decoded.decode(isa, &bytes[offset..], address) {
            Ok(raw) if raw.size > 0 => {
                let size = raw.size as usize;
                let instruction = Instruction::new(isa, address, &bytes[offset..offset + size], raw);
                if instruction.mapping == Mapping::Unmapped {
                    problems.push(Problem {
                        address,
                        kind: ProblemKind::UnmappedOpcode,
                        detail: format!("{} has no pseudo in LLVM's table", isa.opcode_name(instruction.raw.opcode)),
                    });
                }
                instructions.push(instruction);
                offset += size;
            }
            Ok(_) | Err(_) => {
                let size = 4.min(bytes.len() - offset);
                problems.push(Problem {
                    address,
                    kind: ProblemKind::UndecodableInstruction,
                    detail: format!(
                        "LLVM {} does not decode {:02x?}",
                        crate::toolchain::LLVM_MAJOR,
                        &bytes[offset..offset + size]
                    ),
                });
                instructions.push(Instruction::undecodable(address, &bytes[offset..offset + size]));
                offset += size;
            }
        }
    }

    for failure in pc_relative::symbolize(isa, &mut instructions) {
        problems.push(Problem { address: failure.address, kind: ProblemKind::NotRelocatable, detail: failure.detail });
    }
    for instruction in &instructions {
        if let Some(pc) = &instruction.pc_relative {
            if pc.half == Half::Low && code_object.section_containing(pc.target).is_none() {
                let at_end = code_object.sections.iter().any(|s| s.loadable && s.address + s.size == pc.target);
                if !at_end {
                    problems.push(Problem {
                        address: pc.getpc,
                        kind: ProblemKind::PcRelativeOutsideCodeObject,
                        detail: format!("pc-relative computation points at {:#x}, outside every section", pc.target),
                    });
                }
            }
        }
    }
    let calls = call_sites(&instructions);
    let mut blocks = cfg::build(instructions, extent.start, extent.end, &mut problems);
    if extent.kind == FunctionKind::DeviceFunction {
        mark_returns(isa, &mut blocks);
    }
    let (entry, preload_prologue) = match extent.kind {
        FunctionKind::Kernel(index) if code_object.kernels[index].descriptor.kernarg_preload_length() > 0 => {
            let descriptor = &code_object.kernels[index].descriptor;
            match preload_prologue::classify(isa, &blocks, extent.start, descriptor, code_object.target.model()) {
                Ok(found) => found,
                Err(what) => {
                    problems.push(Problem {
                        address: extent.start,
                        kind: ProblemKind::NoPreloadEntry,
                        detail: format!(
                            "the kernel preloads {} dwords of its arguments, so the hardware enters it 256 bytes in, \
                             but {what}",
                            descriptor.kernarg_preload_length()
                        ),
                    });
                    (0, PreloadPrologue::None)
                }
            }
        }
        _ => (0, PreloadPrologue::None),
    };
    Function {
        number: extent.number,
        name: extent.name,
        kind: extent.kind,
        address: extent.start,
        size: extent.end - extent.start,
        blocks,
        calls,
        problems,
        entry,
        preload_prologue,
    }
}

/// `s_setpc_b64 s[30:31]` ends a device function (the ABI's return address).
fn mark_returns(isa: &Isa, blocks: &mut [Block]) {
    let return_address = isa.register_by_name("SGPR30_SGPR31");
    for block in blocks {
        let last = block.instructions.last().expect("blocks are not empty");
        if block.exit == BlockExit::Indirect && last.uses.first().copied() == return_address {
            block.exit = BlockExit::Return;
        }
    }
}

/// Calls and, where a symbolic pc-relative computation built the callee
/// address in the register pair the call uses, their callees.
fn call_sites(instructions: &[Instruction]) -> Vec<CallSite> {
    let mut sites = Vec::new();
    // The pair each recent s_getpc_b64 defined, and its symbolic target.
    let mut built: Vec<(u32, u64)> = Vec::new();
    for (index, instruction) in instructions.iter().enumerate() {
        if let Some(pc) = instruction.pc_relative.as_ref().filter(|pc| pc.half == Half::High) {
            if let Some(getpc) = instructions[..index].iter().rev().find(|i| i.address == pc.getpc) {
                if let Some(pair) = getpc.defs.first() {
                    built.retain(|(p, _)| p != pair);
                    built.push((*pair, pc.target));
                }
            }
            continue;
        }
        if instruction.flow == Flow::Call {
            // s_swappc_b64 dst, src: the callee address is in src.
            let callee = instruction.uses.first().copied();
            let target = callee.and_then(|pair| built.iter().rev().find(|(p, _)| *p == pair).map(|(_, t)| *t));
            sites.push(CallSite { address: instruction.address, target });
            continue;
        }
        // A redefinition of a pair forgets what it held.
        built.retain(|(pair, _)| !instruction.all_defs().any(|d| d == *pair) || instruction.pc_relative.is_some());
    }
    sites
}

/// Why a code object cannot be lifted.
#[derive(Debug, thiserror::Error)]
pub enum LiftError {
    #[error(transparent)]
    Isa(#[from] IsaError),
    #[error(
        "{kind} `{name}`: its code at {start:#x}..{end:#x} is not inside an executable section of the file; the code \
         object is damaged (rebuild it)"
    )]
    CodeOutsideSections { kind: &'static str, name: String, start: u64, end: u64 },
}

/// Lifts every kernel and device function of a code object.
pub fn lift(code_object: &CodeObject) -> Result<LiftedCodeObject<'_>, LiftError> {
    lift_functions(code_object, |_| true)
}

/// The code per group of kernels by default (the instrumenter's and
/// `verify`'s): a group of the instruction counter's peaks near 0.5 GB
/// (about 90,000 instructions).
pub const KERNEL_GROUP_BYTES: u64 = 512 * 1024;

/// Every function's name and start address, as [`lift`] names them,
/// without decoding any code.
pub fn function_starts(code_object: &CodeObject) -> Vec<(String, u64)> {
    function_extents(code_object, &mut Vec::new()).into_iter().map(|extent| (extent.name, extent.start)).collect()
}

/// The code object's functions in groups of whole kernels, in address
/// order, each group's code at most `bytes` long unless one kernel alone is
/// longer: what [`lift_functions`] lifts one group at a time (by start
/// address). None when the code object has device functions (a call joins
/// a kernel to functions other kernels may call too) or fits in one group.
pub fn kernel_groups(code_object: &CodeObject, bytes: u64) -> Option<Vec<Vec<u64>>> {
    let extents = function_extents(code_object, &mut Vec::new());
    if extents.iter().any(|e| e.kind == FunctionKind::DeviceFunction) {
        return None;
    }
    let mut groups: Vec<Vec<u64>> = Vec::new();
    let mut size = 0;
    for extent in &extents {
        let length = extent.end.saturating_sub(extent.start);
        match groups.last_mut() {
            Some(group) if size + length <= bytes => group.push(extent.start),
            _ => {
                groups.push(vec![extent.start]);
                size = 0;
            }
        }
        size += length;
    }
    (groups.len() > 1).then_some(groups)
}

/// Lifts the kernels and device functions whose start address `keep`
/// accepts (a group of [`kernel_groups`]; every one for [`lift`]).
pub fn lift_functions(code_object: &CodeObject, keep: impl Fn(u64) -> bool) -> Result<LiftedCodeObject<'_>, LiftError> {
    let isa = Isa::new(&code_object.target)?;
    let mut shared_problems = Vec::new();
    let mut extents = function_extents(code_object, &mut shared_problems);
    extents.retain(|extent| keep(extent.start));
    // Every function's code must be there to decode (a descriptor may
    // point anywhere in a damaged file).
    for extent in &extents {
        let inside = code_object
            .section_containing(extent.start)
            .is_some_and(|s| s.executable() && extent.end > extent.start && extent.end <= s.address + s.size);
        if !inside || code_object.bytes_at(extent.start, extent.end - extent.start).is_none() {
            return Err(LiftError::CodeOutsideSections {
                kind: if matches!(extent.kind, FunctionKind::Kernel(_)) { "kernel" } else { "function" },
                name: extent.name.clone(),
                start: extent.start,
                end: extent.end,
            });
        }
    }
    let mut decoded = DecodeCache::default();
    let functions = extents
        .into_iter()
        .map(|extent| {
            let problems = shared_problems.iter().filter(|p| p.address == extent.start).cloned().collect();
            lift_function(&isa, code_object, extent, problems, &mut decoded)
        })
        .collect();
    Ok(LiftedCodeObject { code_object, isa, functions })
}
