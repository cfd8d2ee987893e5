//! A tool's embedded module: the hook bitcode the plugin put in the `.llvmbc`
//! section of the tool's device code object.

pub mod bitcode_files;

use std::collections::{BTreeSet, HashMap};

use gpuinstr_intrinsics::builtins::builtin;
use gpuinstr_intrinsics::naming::{EMBEDDED_GLOBAL, EMBEDDED_SECTION, HOOK_ATTRIBUTE, INTRINSIC_ATTRIBUTE};
use inkwell::attributes::AttributeLoc;
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Module;
use inkwell::values::{BasicValue, CallSiteValue, FunctionValue, InstructionOpcode};
use inkwell::AddressSpace;
use serde::Serialize;

use crate::error::ToolProblem;
use crate::stages::load::CodeObject;

/// A tool as given to `instrument`: its device code objects, one per target
/// it was built for, each checked to hold a readable embedded module.
pub struct Tool {
    pub path: std::path::PathBuf,
    pub code_objects: Vec<CodeObject>,
    /// The hooks of each code object's module.
    pub hooks: Vec<Vec<String>>,
}

impl Tool {
    /// Loads a tool file and reads each code object's embedded module once:
    /// a file built without the plugin is an error about this file.
    pub fn load(path: &std::path::Path) -> Result<Tool, crate::Error> {
        let input = crate::stages::load::load(path)?;
        let mut hooks = Vec::new();
        for code_object in &input.code_objects {
            let context = Context::create();
            let module = read_tool_module(&context, code_object).map_err(|problem| crate::Error::Tool {
                location: code_object
                    .origin
                    .iter()
                    .fold(crate::Location::file(path), |location, part| location.within(part.clone())),
                problem,
            })?;
            hooks.push(summarize(&module, 1).hooks.into_iter().map(|h| h.name).collect());
        }
        Ok(Tool { path: input.path, code_objects: input.code_objects, hooks })
    }

    /// The tool's code object for an application code object's target: the
    /// same target id, else the same processor, else the tool's only code
    /// object (its hooks are bitcode, compiled for the application's target
    /// by the payload compiler).
    pub fn for_target(&self, target: &crate::stages::load::TargetId) -> Result<&CodeObject, crate::Error> {
        self.code_objects
            .iter()
            .find(|c| &c.target == target)
            .or_else(|| self.code_objects.iter().find(|c| c.target.processor == target.processor))
            .or(match self.code_objects.as_slice() {
                [only] => Some(only),
                _ => None,
            })
            .ok_or_else(|| crate::Error::ToolLacksTarget {
                file: self.path.clone(),
                target: target.to_string(),
                available: self.code_objects.iter().map(|c| c.target.to_string()).collect::<Vec<_>>().join(", "),
            })
    }
}

/// The raw embedded bitcode files of a tool code object.
pub fn embedded_bitcode(code_object: &CodeObject) -> Result<Vec<&[u8]>, ToolProblem> {
    let section = code_object.section_data(EMBEDDED_SECTION).ok_or(ToolProblem::NotATool)?;
    bitcode_files::split(section).map_err(ToolProblem::MalformedBitcode)
}

/// Whether this build's LLVM reads and verifies a bitcode file, found out in
/// a child process (`opt -passes=verify`): LLVM's bitcode reader crashes or
/// aborts on some damaged files, and that must not take gpuinstr with it.
/// Files found readable are remembered by content for this process.
fn check_bitcode_in_child(index: usize, file: &[u8]) -> Result<(), ToolProblem> {
    use std::collections::HashSet;
    use std::hash::{Hash, Hasher};
    use std::sync::{Mutex, OnceLock};
    static READABLE: OnceLock<Mutex<HashSet<u64>>> = OnceLock::new();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    file.hash(&mut hasher);
    let key = hasher.finish();
    let readable = READABLE.get_or_init(Default::default);
    if readable.lock().map(|set| set.contains(&key)).unwrap_or(false) {
        return Ok(());
    }
    let unreadable = |message: String| ToolProblem::UnreadableModule { index, message };
    // A bounded address space: a damaged size field makes the reader ask
    // for terabytes. The bitcode goes on standard input: a temporary file
    // stays behind when this process is killed (dynamic mode's worker is,
    // with the program it serves).
    let output = crate::process::output_within_given(
        std::process::Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 4194304; exec \"$0\" -passes=verify -disable-output -")
            .arg(crate::toolchain::llvm_tool_path("opt")),
        Some(file.to_vec()),
        crate::process::deadline_for(file.len()),
    )
    .map_err(|e| unreadable(format!("cannot run opt: {e}; is it installed (scripts/setup.sh)?")))?
    .ok_or_else(|| unreadable("the bitcode is damaged: LLVM's bitcode reader does not finish on it".into()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        // What LLVM says, without the temporary file's name.
        let said = stderr
            .lines()
            .find_map(|l| l.split_once("error:").map(|(_, what)| what.trim().to_string()))
            .or_else(|| stderr.lines().find(|l| l.starts_with("LLVM ERROR")).map(|l| l.trim().to_string()))
            .unwrap_or_default();
        let how = match output.status.code() {
            Some(_) => said,
            None => format!("LLVM's bitcode reader crashes on it ({}) {said}", output.status).trim_end().to_string(),
        };
        return Err(unreadable(format!("the bitcode is damaged: {how}; rebuild the tool")));
    }
    if let Ok(mut set) = readable.lock() {
        set.insert(key);
    }
    Ok(())
}

/// Reads the tool's embedded module into `context`; the modules of several
/// translation units (-fgpu-rdc) are linked into one. Each file is read
/// once in a child process first (LLVM's reader may crash on damaged ones).
pub fn read_tool_module<'ctx>(context: &'ctx Context, code_object: &CodeObject) -> Result<Module<'ctx>, ToolProblem> {
    let files = embedded_bitcode(code_object)?;
    let mut modules = Vec::new();
    for (index, file) in files.iter().enumerate() {
        check_bitcode_in_child(index, file)?;
        let buffer = MemoryBuffer::create_from_memory_range_copy(file, &format!("embedded-tool-{index}"));
        let module = Module::parse_bitcode_from_buffer(&buffer, context)
            .map_err(|e| ToolProblem::UnreadableModule { index, message: e.to_string() })?;
        // clang's -fembed-bitcode copy is the whole device module, which
        // still holds our embedded global.
        if module.get_globals().any(|g| g.get_name().to_string_lossy().starts_with(EMBEDDED_GLOBAL)) {
            return Err(ToolProblem::EmbedBitcodeCopy);
        }
        modules.push(module);
    }
    let mut modules = modules.into_iter();
    let first = modules.next().expect("split returns at least one file");
    for module in modules {
        first.link_in_module(module).map_err(|e| ToolProblem::LinkFailed(e.to_string()))?;
    }
    Ok(first)
}

/// A hook of a tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HookSummary {
    pub name: String,
    /// Parameter types, as LLVM prints them.
    pub parameters: Vec<String>,
    /// Qualified names of the intrinsics the hook (or anything it calls) uses.
    pub intrinsics: Vec<String>,
}

/// An intrinsic declaration of a tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IntrinsicSummary {
    /// Qualified name (`gpuinstr::readReg`).
    pub intrinsic: String,
    /// IR function name (`gpuinstr::readReg.i32.i32`).
    pub function: String,
    /// LLVM function type.
    pub signature: String,
    pub builtin: bool,
}

/// A global variable the tool's code uses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GlobalSummary {
    pub name: String,
    pub address_space: u32,
    pub defined: bool,
}

/// What a tool module holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolSummary {
    pub bitcode_files: usize,
    pub hooks: Vec<HookSummary>,
    pub intrinsics: Vec<IntrinsicSummary>,
    pub globals: Vec<GlobalSummary>,
}

/// inkwell's AddressSpace has no getter; AMDGPU uses spaces 0 to 8.
/// The bytes of the tool's symbol `name` (`size` of them) as its code object
/// defines them; `None` when it has no such defined symbol or its section
/// holds no data (zero-initialised).
pub fn defined_bytes<'c>(tool: &'c CodeObject, name: &str, size: u64) -> Result<Option<&'c [u8]>, ToolProblem> {
    const SHT_NOBITS: u32 = 8;
    let Some(symbol) = tool.symbols.iter().find(|s| s.name == name && s.section.is_some()) else {
        return Ok(None);
    };
    let Some(section) = symbol.section.and_then(|index| tool.sections.iter().find(|s| s.index == index)) else {
        return Ok(None);
    };
    if section.kind == SHT_NOBITS {
        return Ok(None);
    }
    let end = symbol.value.saturating_add(size);
    if tool.relocations.iter().any(|r| r.offset >= symbol.value && r.offset < end) {
        return Err(ToolProblem::GlobalInitialisedWithAddress(name.to_string()));
    }
    let start = symbol.value.checked_sub(section.address).and_then(|d| d.checked_add(section.offset));
    start
        .and_then(|start| tool.bytes.get(start as usize..start.checked_add(size)? as usize))
        .map(Some)
        .ok_or_else(|| ToolProblem::GlobalOutsideFile(name.to_string()))
}

/// `GPUINSTR_RECORDS(Buffer, Count)` in `gpuinstr/gpuinstr.h` defines the
/// constant `__gpuinstr_records_<Buffer>`: u64 bytes per record, then the
/// count's name, NUL-terminated, in 64 bytes.
pub const RECORDS_PREFIX: &str = "__gpuinstr_records_";
const RECORDS_DECLARATION_BYTES: u64 = 8 + 64;

/// A buffer of records the tool declared: filled from its start, `count`
/// (a 64-bit tool global) counting the records wanted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordsDeclaration {
    pub buffer: String,
    pub count: String,
    pub record_bytes: u64,
}

/// The tool's `GPUINSTR_RECORDS` declarations.
pub fn records_declarations(tool: &CodeObject) -> Result<Vec<RecordsDeclaration>, ToolProblem> {
    let mut declarations = Vec::new();
    for symbol in tool.symbols.iter().filter(|s| s.section.is_some()) {
        let Some(buffer) = symbol.name.strip_prefix(RECORDS_PREFIX) else { continue };
        let bad = |why: &str| ToolProblem::BadRecordsDeclaration { buffer: buffer.to_string(), why: why.to_string() };
        let bytes = defined_bytes(tool, &symbol.name, RECORDS_DECLARATION_BYTES)?
            .ok_or_else(|| bad("its declaration holds no data"))?;
        let record_bytes = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
        let name = bytes[8..].split(|b| *b == 0).next().unwrap_or_default();
        let count = std::str::from_utf8(name).map_err(|_| bad("the count's name is not UTF-8"))?;
        if record_bytes == 0 || count.is_empty() {
            return Err(bad("its declaration is empty"));
        }
        declarations.push(RecordsDeclaration { buffer: buffer.to_string(), count: count.to_string(), record_bytes });
    }
    Ok(declarations)
}

/// `GPUINSTR_RING(Record, Name)` in `gpuinstr/gpuinstr.h` defines the
/// constant `__gpuinstr_ring_<Name>`: u64 bytes per record.
pub const RING_PREFIX: &str = "__gpuinstr_ring_";

/// A ring of records the tool declared: `ring` (a pointer tool global) is
/// pointed at the ring's head by the runtime, which empties it while
/// dispatches run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingDeclaration {
    pub ring: String,
    pub record_bytes: u64,
}

/// The tool's `GPUINSTR_RING` declarations.
pub fn ring_declarations(tool: &CodeObject) -> Result<Vec<RingDeclaration>, ToolProblem> {
    let mut declarations = Vec::new();
    for symbol in tool.symbols.iter().filter(|s| s.section.is_some()) {
        let Some(ring) = symbol.name.strip_prefix(RING_PREFIX) else { continue };
        let bad = |why: &str| ToolProblem::BadRingDeclaration { ring: ring.to_string(), why: why.to_string() };
        let bytes = defined_bytes(tool, &symbol.name, 8)?.ok_or_else(|| bad("its declaration holds no data"))?;
        let record_bytes = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
        if record_bytes == 0 {
            return Err(bad("its records have no bytes"));
        }
        declarations.push(RingDeclaration { ring: ring.to_string(), record_bytes });
    }
    Ok(declarations)
}

fn address_space_number(space: AddressSpace) -> u32 {
    (0u16..=8).find(|n| AddressSpace::from(*n) == space).map_or(u32::MAX, u32::from)
}

/// The address space of a global variable.
pub fn address_space_of(global: inkwell::values::GlobalValue<'_>) -> u32 {
    address_space_number(global.as_pointer_value().get_type().get_address_space())
}

fn string_attribute(function: FunctionValue<'_>, key: &str) -> Option<String> {
    function
        .get_string_attribute(AttributeLoc::Function, key)
        .map(|a| a.get_string_value().to_string_lossy().into_owned())
}

fn name(function: FunctionValue<'_>) -> String {
    function.get_name().to_string_lossy().into_owned()
}

fn direct_callees(function: FunctionValue<'_>) -> Vec<FunctionValue<'_>> {
    let mut callees = Vec::new();
    for block in function.get_basic_block_iter() {
        for instruction in block.get_instructions() {
            if matches!(instruction.get_opcode(), InstructionOpcode::Call | InstructionOpcode::Invoke) {
                if let Ok(call) = CallSiteValue::try_from(instruction) {
                    if let Some(callee) = call.get_called_fn_value() {
                        callees.push(callee);
                    }
                }
            }
        }
    }
    callees
}

/// Summarises a tool module: hooks with their signatures and the intrinsics
/// they reach, intrinsic declarations, globals.
pub fn summarize(module: &Module<'_>, bitcode_files: usize) -> ToolSummary {
    let functions: Vec<FunctionValue> = module.get_functions().collect();
    let by_name: HashMap<String, FunctionValue> = functions.iter().map(|f| (name(*f), *f)).collect();

    let mut intrinsics: Vec<IntrinsicSummary> = functions
        .iter()
        .filter_map(|f| {
            let intrinsic = string_attribute(*f, INTRINSIC_ATTRIBUTE)?;
            Some(IntrinsicSummary {
                builtin: builtin(&intrinsic).is_some(),
                intrinsic,
                function: name(*f),
                signature: f.get_type().print_to_string().to_string(),
            })
        })
        .collect();
    intrinsics.sort_by(|a, b| a.function.cmp(&b.function));

    let mut hooks = Vec::new();
    for hook in functions.iter().filter(|f| string_attribute(**f, HOOK_ATTRIBUTE).is_some()) {
        let mut reached = BTreeSet::new();
        let mut seen = BTreeSet::new();
        let mut stack = vec![*hook];
        while let Some(function) = stack.pop() {
            if !seen.insert(name(function)) {
                continue;
            }
            for callee in direct_callees(function) {
                if let Some(intrinsic) = string_attribute(callee, INTRINSIC_ATTRIBUTE) {
                    reached.insert(intrinsic);
                } else if let Some(defined) = by_name.get(&name(callee)) {
                    stack.push(*defined);
                }
            }
        }
        hooks.push(HookSummary {
            name: name(*hook),
            parameters: hook.get_type().get_param_types().iter().map(|t| t.print_to_string().to_string()).collect(),
            intrinsics: reached.into_iter().collect(),
        });
    }
    hooks.sort_by(|a, b| a.name.cmp(&b.name));

    let mut globals: Vec<GlobalSummary> = module
        .get_globals()
        .filter(|g| g.as_pointer_value().get_first_use().is_some())
        .map(|g| GlobalSummary {
            name: g.get_name().to_string_lossy().into_owned(),
            address_space: address_space_number(g.as_pointer_value().get_type().get_address_space()),
            defined: g.get_initializer().is_some(),
        })
        .filter(|g| !g.name.starts_with("llvm.") && !g.name.starts_with("__hip_cuid_"))
        .collect();
    globals.sort_by(|a, b| a.name.cmp(&b.name));

    ToolSummary { bitcode_files, hooks, intrinsics, globals }
}
