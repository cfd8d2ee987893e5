//! Errors of the driver library. Every error names the file it is about and,
//! where there is one, the code object, kernel or symbol, and says what to do.

use std::path::PathBuf;

use thiserror::Error;

/// Where in an input a problem is: the file, then a path inside it
/// ("bundle 3, entry hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub file: PathBuf,
    pub inside: Vec<String>,
}

impl Location {
    pub fn file(file: impl Into<PathBuf>) -> Self {
        Location { file: file.into(), inside: Vec::new() }
    }

    pub fn within(&self, part: impl Into<String>) -> Self {
        let mut inside = self.inside.clone();
        inside.push(part.into());
        Location { file: self.file.clone(), inside }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file.display())?;
        for part in &self.inside {
            write!(f, ": {part}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Error)]
pub enum Error {
    #[error("{location}: cannot read the file: {source}")]
    Io {
        location: Location,
        #[source]
        source: std::io::Error,
    },

    #[error("{location}: {problem}")]
    Load { location: Location, problem: LoadProblem },

    #[error("{location}: {problem}")]
    Tool { location: Location, problem: ToolProblem },

    #[error(
        "{file}: no code object for target `{target}` (the input has {available}); pick one of those with --target"
    )]
    NoSuchTarget { file: PathBuf, target: String, available: String },

    #[error("{file}: the input has several code objects ({targets}); pick one with --target")]
    SeveralCodeObjects { file: PathBuf, targets: String },

    #[error("{file}: the input holds no code object{}", if .target.is_empty() { String::new() } else { format!(" for target `{}`", .target) })]
    NoCodeObject { file: PathBuf, target: String },

    #[error(
        "{file}: the tool has no code object for {target} (it has {available}); build the tool for every target the \
         application has (--offload-arch), or pick the application's code objects with --target"
    )]
    ToolLacksTarget { file: PathBuf, target: String, available: String },
}

/// What is wrong with an input file.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum LoadProblem {
    #[error(
        "not an AMDGPU code object, clang offload bundle, or host object with a .hip_fatbin section \
         ({found}); give gpuinstr-link a HIP device code object or a program/library built by hipcc"
    )]
    NotGpuCode { found: String },
    #[error("the ELF file is malformed or truncated: {}", printable(.0))]
    MalformedElf(String),
    #[error("the ELF file is for machine {0}, not AMDGPU (EM_AMDGPU = 224)")]
    WrongMachine(u16),
    #[error("this is a 32-bit ELF file; AMDGPU code objects are ELF64")]
    NotElf64,
    #[error("OS ABI {0} is not AMDHSA (64); only HSA code objects are supported (not PAL or Mesa shaders)")]
    NotHsa(u8),
    #[error(
        "unsupported code object version (ABI version {0}); gpuinstr reads code object v3 to v6 (ABI versions 1 to 4)"
    )]
    UnsupportedCodeObjectVersion(u8),
    #[error("unknown AMDGPU processor (e_flags mach {0:#x}): not in the AMDGPU ELF ABI as of LLVM 21")]
    UnknownProcessor(u32),
    #[error(
        "e_flags give {processor} generic version {version}: code object v6 gives generic processors a version \
         from 1 and others none; the file is damaged"
    )]
    GenericVersion { processor: String, version: u8 },
    #[error(
        "the code object names no processor (e_flags mach 0); clang produces such code objects with \
         -fembed-bitcode, which gpuinstr tools cannot use: rebuild without -fembed-bitcode and with --offload-arch"
    )]
    NoProcessor,
    #[error("the AMDGPU metadata note (NT_AMDGPU_METADATA) is missing; code objects v3+ must carry one")]
    MissingMetadata,
    #[error("the AMDGPU metadata note is not valid MessagePack: {}", printable(.0))]
    MalformedMetadata(String),
    #[error("kernel `{}`: {}", printable(.kernel), printable(.problem))]
    Kernel { kernel: String, problem: String },
    #[error("the offload bundle is malformed or truncated: {}", printable(.0))]
    MalformedBundle(String),
    #[error(
        "the compressed offload bundle (CCOB) cannot be read: {}; clang-offload-bundler writes versions 1 to 3, \
         zlib (method 0) or zstd (method 1)",
        printable(.0)
    )]
    CompressedBundle(String),
    #[error("the .hip_fatbin section holds no offload bundle")]
    EmptyFatbin,
    #[error("{0} (gpuinstr-link writes it into instrumented code objects; this one is damaged)")]
    InstrumentedTable(TableError),
}

/// What is wrong with a tool's embedded module.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ToolProblem {
    #[error(
        "no .llvmbc section: this code object was not built with the gpuinstr plugin; compile the tool with \
         `hipcc -fpass-plugin=libembed.so` and include gpuinstr/gpuinstr.h"
    )]
    NotATool,
    #[error("the .llvmbc section is not LLVM bitcode: {0}")]
    MalformedBitcode(String),
    #[error("LLVM cannot read embedded module {index}: {message}")]
    UnreadableModule { index: usize, message: String },
    #[error(
        "the .llvmbc section also holds clang's -fembed-bitcode copy of the device module; \
         rebuild the tool without -fembed-bitcode"
    )]
    EmbedBitcodeCopy,
    #[error("the embedded modules of several translation units do not link: {0}")]
    LinkFailed(String),
    #[error(
        "tool global `{}` is initialised with the address of something (a relocation in its initial value); \
         gpuinstr-link cannot carry that into an application: initialise it in a hook instead",
        printable(.0)
    )]
    GlobalInitialisedWithAddress(String),
    #[error("tool global `{}` has an initial value outside the tool's code object", printable(.0))]
    GlobalOutsideFile(String),
    #[error("GPUINSTR_RECORDS({}, ...): {why}", printable(buffer))]
    BadRecordsDeclaration { buffer: String, why: String },
    #[error("GPUINSTR_RING(..., {}): {why}", printable(ring))]
    BadRingDeclaration { ring: String, why: String },
}

/// Text from the input (symbol, section and kernel names) inside a message:
/// control characters escaped, so that a damaged name cannot break the
/// message's one line.
pub fn printable(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_string();
    }
    text.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

/// A table gpuinstr-link writes into instrumented code objects (sites,
/// partial kernels, tool globals) that does not read back.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("the table {table} is malformed: {problem}")]
pub struct TableError {
    pub table: &'static str,
    pub problem: String,
}
