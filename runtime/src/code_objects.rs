//! Which code objects a program loads are gpuinstr's, and what the runtime
//! needs of each: its kernels' descriptors (a dispatch packet names one)
//! and where its tool globals are, with the bytes they start with (a
//! reset puts those back).

use std::collections::HashMap;

use gpuinstr::stages::load::code_object::CodeObject;
use gpuinstr::stages::load::instrumented::{self, PartialKernel, PointEntry, SITE_TABLE};
use object::read::elf::ElfFile64;
use object::Object;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum RecogniseError {
    #[error("it has a site table but cannot be read as a code object: {0}")]
    Unreadable(String),
    #[error("{0}")]
    Table(#[from] instrumented::TableError),
    #[error("its tool-global table names `{0}`, which its symbol table does not define")]
    MissingSymbol(String),
    #[error("tool global `{name}` ({size} bytes at {address:#x}) lies outside the code object's data")]
    OutsideData { name: String, address: u64, size: u64 },
}

/// A kernel of an instrumented code object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelInfo {
    pub name: String,
    /// The kernel descriptor's address in the code object (a dispatch
    /// packet's kernel object is this plus the load delta).
    pub descriptor: u64,
    /// Its descriptor's fixed LDS and scratch bytes per work-item, and
    /// kernel argument bytes (a dispatch pointed at another kernel gets
    /// that kernel's).
    pub group_segment: u32,
    pub private_segment: u32,
    pub kernarg_size: u32,
    /// In dynamic mode, what the program was handed for this kernel (the
    /// original's sizes, which it puts in its dispatch packets) where they
    /// differ from this kernel's; `None` when it was handed these bytes.
    pub program_sees: Option<Segments>,
    /// With originals kept (`instrument --keep-originals`): the index in
    /// `kernels` of this original's instrumented copy.
    pub copy: Option<usize>,
    /// Where its metadata declares the launch shape (`hidden_block_count_x`,
    /// clang's v5 block of hidden arguments), if it does.
    pub launch_shape: Option<u32>,
}

impl KernelInfo {
    /// Its own descriptor's sizes.
    pub fn segments(&self) -> Segments {
        Segments { group: self.group_segment, private: self.private_segment, kernarg: self.kernarg_size }
    }
}

/// A tool global: where its data is in the code object and what it holds
/// before any dispatch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobalInfo {
    /// The name in the tool's source.
    pub tool_name: String,
    /// The symbol holding the data.
    pub symbol: String,
    pub address: u64,
    pub size: u64,
    pub managed: bool,
    /// A managed global: the address of the pointer of the tool's name,
    /// which holds where the data is. Payloads reach the data through it,
    /// and so must the runtime: HIP points it at memory of its own where it
    /// loads a module (`hipModuleLoad*`) that defines managed variables.
    pub pointer: Option<u64>,
    pub initial: Vec<u8>,
    /// A buffer of records (`GPUINSTR_RECORDS`): the index among the
    /// globals of its count, and bytes per record.
    pub records: Option<(usize, u64)>,
    /// A ring of records (`GPUINSTR_RING`; this global points at its
    /// head): bytes per record.
    pub ring: Option<u64>,
}

/// What the runtime knows of one instrumented code object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstrumentedCodeObject {
    /// The processor it is for (`gfx90a`).
    pub processor: String,
    pub kernels: Vec<KernelInfo>,
    pub globals: Vec<GlobalInfo>,
    /// Original instructions that got inserted code.
    pub sites: usize,
    /// The instrumentation points, by the `site` number hooks get.
    pub points: Vec<PointEntry>,
    /// Kernels whose dispatches may run points that were left out
    /// (`--allow-partial`): their numbers miss those points.
    pub partial: Vec<PartialKernel>,
}

impl InstrumentedCodeObject {
    /// In dynamic mode: the program was handed `original` (each kernel's
    /// sizes by name) and ROCr these bytes instead. Notes, per kernel,
    /// what the program sees where it differs.
    pub fn replaced(&mut self, original: &HashMap<String, Segments>) {
        for kernel in &mut self.kernels {
            let sees = original.get(&kernel.name).copied();
            kernel.program_sees = sees.filter(|s| *s != kernel.segments());
        }
    }

    /// Selected points that dispatches of `kernel` may run and that were
    /// left out when it was instrumented (0: none).
    pub fn points_left_out(&self, kernel: &str) -> u32 {
        self.partial.iter().find(|p| p.kernel == kernel).map_or(0, |p| p.left_out)
    }
}

/// Kernels of HIP's runtime itself (fills and copies it compiles at run
/// time): not the program's, and static instrumentation never sees them.
pub const HIP_RUNTIME_KERNELS: &str = "__amd_rocclr_";

/// The kernels of a code object that is not instrumented, by name and
/// descriptor address (its `.kd` symbols): a dispatch of one runs code no
/// tool sees, and the report says so. Nothing for bytes that are no
/// 64-bit ELF (ROCr would not load them either).
pub fn kernel_descriptors(bytes: &[u8]) -> Vec<(String, u64)> {
    use object::{ObjectSymbol, SymbolKind};
    let Ok(elf) = ElfFile64::<object::Endianness>::parse(bytes) else { return Vec::new() };
    elf.symbols()
        .filter(|s| s.kind() == SymbolKind::Data)
        .filter_map(|s| Some((s.name().ok()?.strip_suffix(".kd")?.to_string(), s.address())))
        .collect()
}

/// The sizes a kernel's descriptor gives the dispatch packet's writer:
/// fixed LDS and scratch bytes per work-item, and kernel argument bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Segments {
    pub group: u32,
    pub private: u32,
    pub kernarg: u32,
}

/// Each kernel's [`Segments`] as the descriptors of `bytes` give them (the
/// `.kd` symbols' first 12 bytes), its kernel argument bytes as the
/// metadata gives them where it says more (HIP sizes the arguments it
/// passes by the metadata; Tensile's v4 descriptors say 0): what a program
/// that was handed these bytes puts in its dispatch packets. Empty for
/// bytes that are no 64-bit ELF.
pub fn kernel_segments(bytes: &[u8]) -> HashMap<String, Segments> {
    let mut segments = descriptor_segments(bytes);
    if let Ok(code_object) = CodeObject::parse(bytes.to_vec(), Vec::new()) {
        for kernel in &code_object.kernels {
            if let Some(s) = segments.get_mut(kernel.name()) {
                let declared = u32::try_from(kernel.metadata.kernarg_segment_size).unwrap_or(u32::MAX);
                s.kernarg = s.kernarg.max(declared);
            }
        }
    }
    segments
}

fn descriptor_segments(bytes: &[u8]) -> HashMap<String, Segments> {
    use object::{ObjectSection, ObjectSymbol, SymbolKind};
    let Ok(elf) = ElfFile64::<object::Endianness>::parse(bytes) else { return HashMap::new() };
    let mut segments = HashMap::new();
    for symbol in elf.symbols().filter(|s| s.kind() == SymbolKind::Data) {
        let Some(name) = symbol.name().ok().and_then(|n| n.strip_suffix(".kd")) else { continue };
        let Some(section) = symbol.section_index().and_then(|i| elf.section_by_index(i).ok()) else { continue };
        let Some(offset) = symbol.address().checked_sub(section.address()) else { continue };
        let Ok(data) = section.data() else { continue };
        let Some(descriptor) = usize::try_from(offset).ok().and_then(|o| data.get(o..o.checked_add(12)?)) else {
            continue;
        };
        let word = |at: usize| u32::from_le_bytes(descriptor[at..at + 4].try_into().expect("4 bytes"));
        segments.insert(name.to_string(), Segments { group: word(0), private: word(4), kernarg: word(8) });
    }
    segments
}

/// Cheap look at the section headers: is this an instrumented code object?
/// (Libraries load code objects of tens of megabytes that are not.)
pub fn is_instrumented(bytes: &[u8]) -> bool {
    ElfFile64::<object::Endianness>::parse(bytes).is_ok_and(|elf| elf.section_by_name(SITE_TABLE).is_some())
}

/// The runtime's view of `bytes`, or `None` when it is not instrumented.
pub fn recognise(bytes: &[u8]) -> Result<Option<InstrumentedCodeObject>, RecogniseError> {
    if !is_instrumented(bytes) {
        return Ok(None);
    }
    let code_object =
        CodeObject::parse(bytes.to_vec(), vec![]).map_err(|e| RecogniseError::Unreadable(e.to_string()))?;
    let sites = instrumented::site_table(&code_object)?.len();
    let symbols: HashMap<&str, u64> = code_object.symbols.iter().map(|s| (s.name.as_str(), s.value)).collect();
    let mut globals = Vec::new();
    let entries = instrumented::tool_globals(&code_object)?;
    let index_of = |name: &str| entries.iter().position(|e| e.tool_name == name);
    let records_of = |entry: &instrumented::ToolGlobalEntry| {
        let records = entry.records.as_ref()?;
        Some((index_of(&records.count)?, records.record_bytes))
    };
    for entry in &entries {
        let address =
            *symbols.get(entry.symbol.as_str()).ok_or_else(|| RecogniseError::MissingSymbol(entry.symbol.clone()))?;
        let outside = || RecogniseError::OutsideData { name: entry.tool_name.clone(), address, size: entry.size };
        let section = code_object.section_containing(address).ok_or_else(outside)?;
        if !matches!(address.checked_add(entry.size), Some(end) if end <= section.address + section.size) {
            return Err(outside());
        }
        let initial = if section.no_bits() {
            vec![0; entry.size as usize]
        } else {
            code_object.bytes_at(address, entry.size).ok_or_else(outside)?.to_vec()
        };
        let pointer = match entry.symbol.strip_suffix(".managed").filter(|_| entry.managed) {
            Some(name) => Some(*symbols.get(name).ok_or_else(|| RecogniseError::MissingSymbol(name.to_string()))?),
            None => None,
        };
        globals.push(GlobalInfo {
            tool_name: entry.tool_name.clone(),
            symbol: entry.symbol.clone(),
            address,
            size: entry.size,
            managed: entry.managed,
            pointer,
            initial,
            records: records_of(entry),
            ring: entry.ring,
        });
    }
    let mut kernels: Vec<KernelInfo> = code_object
        .kernels
        .iter()
        .map(|k| KernelInfo {
            name: k.name().to_string(),
            descriptor: k.descriptor_address,
            group_segment: k.descriptor.group_segment_fixed_size,
            private_segment: k.descriptor.private_segment_fixed_size,
            // As `kernel_segments` reads the original's.
            kernarg_size: k
                .descriptor
                .kernarg_size
                .max(u32::try_from(k.metadata.kernarg_segment_size).unwrap_or(u32::MAX)),
            program_sees: None,
            copy: None,
            launch_shape: k
                .metadata
                .arguments
                .iter()
                .find(|a| a.value_kind == "hidden_block_count_x")
                .and_then(|a| u32::try_from(a.offset).ok()),
        })
        .collect();
    let index: HashMap<String, usize> =
        kernels.iter().enumerate().map(|(k, kernel)| (kernel.name.clone(), k)).collect();
    for kernel in &mut kernels {
        kernel.copy = index.get(&format!("{}{}", kernel.name, instrumented::INSTRUMENTED_SUFFIX)).copied();
    }
    let points = instrumented::point_table(&code_object)?;
    let partial = instrumented::partial_kernels(&code_object)?;
    Ok(Some(InstrumentedCodeObject {
        processor: code_object.target.processor.clone(),
        kernels,
        globals,
        sites,
        points,
        partial,
    }))
}
