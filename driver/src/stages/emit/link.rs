//! Assembling with llvm-mc and linking with CoMGR (or ld.lld). All
//! temporary files live in a temporary directory that is removed at the end.

use std::path::Path;

use thiserror::Error;

use super::{Assembly, EmitNotes, EmitOptions};
use crate::native::{link_relocatable, ComgrError};
use crate::stages::codegen::{assemble, first_lines, AssembleError};
use crate::stages::lift::LiftedCodeObject;

/// The linker that makes the executable code object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Linker {
    /// CoMGR's link action (what the ROCm runtime uses).
    #[default]
    Comgr,
    /// ld.lld -shared, as clang's HIP toolchain runs it.
    Lld,
    /// ld.lld -shared leaving undefined symbols for a loader to define (tool
    /// globals left external): CoMGR links with `--no-undefined` from CoMGR
    /// 2.6 (ROCm 6) on. The caller checks which symbols stayed undefined.
    LldLeavingUndefined,
}

#[derive(Debug, Error)]
pub enum EmitError {
    #[error("cannot run {tool}: {source}; is it installed (scripts/setup.sh)?")]
    Tool {
        tool: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Assemble(#[from] AssembleError),
    #[error(
        "the assembled code has a relocation naming no symbol (section {section}, offset {offset:#x}); this is a \
         gpuinstr defect: please report it"
    )]
    RelocationWithoutSymbol { section: String, offset: u64 },
    #[error("ld.lld failed: {0}")]
    Lld(String),
    #[error("{tool} did not finish in {seconds} s and was stopped ({})", crate::stages::codegen::kept_text(.kept))]
    Hang { tool: &'static str, seconds: u64, kept: Option<String> },
    #[error("the code object defines `{name}` twice (at {first:#x} and {second:#x}); it cannot be assembled again")]
    DefinedTwice { name: String, first: u64, second: u64 },
    #[error(
        "section `{name}` is loadable, but a linker makes the section of that name itself; the code object is damaged"
    )]
    ReservedSection { name: String },
    #[error(
        "the code object declares `{name}` twice, differently ({first} and {second}); it cannot be assembled again"
    )]
    DeclaredTwice { name: String, first: String, second: String },
    #[error(
        "the code at {at:#x} reaches `{name}` pc-relatively, but `{name}` is global with default visibility (another \
         object could replace it), which a linker refuses; the code object is damaged (compilers make such symbols \
         hidden or protected)"
    )]
    Preemptible { name: String, at: u64 },
    #[error(
        "`{function}` has {bytes} bytes at {at:#x} that are not a whole number of 4-byte instruction words; \
         instrumenting moves code, and code after them could not be aligned; the code object is damaged"
    )]
    PartialWord { function: String, at: u64, bytes: usize },
    #[error(
        "CoMGR {}.{} does not know {isa}: link with `--linker lld`, or in an environment whose CoMGR knows it \
         (scripts/env.sh trixie or sid)",
        crate::native::comgr::INTERFACE_VERSION.0,
        crate::native::comgr::INTERFACE_VERSION.1
    )]
    ComgrUnknownIsa { isa: String },
    #[error(transparent)]
    Comgr(#[from] ComgrError),
    #[error("temporary files: {0}")]
    Io(#[from] std::io::Error),
}

/// Links a relocatable into an executable code object, with `build_id` as
/// its `.note.gnu.build-id` when given (a linker makes that note itself and
/// drops one in its input).
pub fn link(
    relocatable: &[u8],
    isa: &str,
    linker: Linker,
    build_id: Option<&[u8]>,
    directory: &Path,
) -> Result<Vec<u8>, EmitError> {
    let build_id = build_id.map(|id| {
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        format!("--build-id=0x{hex}")
    });
    match linker {
        Linker::Comgr => {
            // CoMGR links through clang's driver: linker flags go by -Wl.
            let options: Vec<String> = build_id.iter().map(|o| format!("-Wl,{o}")).collect();
            link_relocatable(relocatable, isa, &options).map_err(|error| match error.step {
                "set isa" => EmitError::ComgrUnknownIsa { isa: isa.to_string() },
                _ => error.into(),
            })
        }
        Linker::Lld | Linker::LldLeavingUndefined => {
            let object = directory.join("link-input.o");
            std::fs::write(&object, relocatable)?;
            lld(&[object], linker != Linker::Lld, build_id.as_deref(), directory)
        }
    }
}

/// ld.lld -shared over relocatable files, as clang's HIP toolchain runs it
/// (`--no-undefined` unless a loader is to define what is left).
fn lld(
    objects: &[std::path::PathBuf],
    leave_undefined: bool,
    build_id: Option<&str>,
    directory: &Path,
) -> Result<Vec<u8>, EmitError> {
    let executable = directory.join("linked.hsaco");
    let size = objects.iter().map(|o| std::fs::metadata(o).map_or(0, |m| m.len() as usize)).sum();
    let deadline = crate::process::deadline_for(size);
    let output = crate::process::output_within(
        crate::toolchain::llvm_tool("ld.lld")
            .args(if leave_undefined { &["-shared"][..] } else { &["--no-undefined", "-shared"][..] })
            .args(build_id)
            .args(objects)
            .arg("-o")
            .arg(&executable),
        deadline,
    )
    .map_err(|source| EmitError::Tool { tool: "ld.lld", source })?
    .ok_or(EmitError::Hang { tool: "ld.lld", seconds: deadline.as_secs(), kept: None })?;
    if !output.status.success() {
        return Err(EmitError::Lld(first_lines(&output.stderr)));
    }
    let bytes = std::fs::read(&executable)?;
    std::fs::remove_file(&executable)?;
    Ok(bytes)
}

/// Every name the assembly defines (functions, symbols of loaded sections)
/// is defined at one address: llvm-mc refuses a second definition (and
/// LLVM 15's went on forever after saying so). Local labels inside code
/// are not among them: the emitter names code by function and block, and
/// drops them (Tensile assembles each kernel with the same labels,
/// `label_AlphaNonZero`, and links them into one code object).
fn defined_once(lifted: &LiftedCodeObject<'_>) -> Result<(), EmitError> {
    use crate::stages::load::{Binding, SymbolKind};
    let code_object = lifted.code_object;
    let mut defined: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    let section = |index: Option<usize>| index.and_then(|i| code_object.sections.get(i)).filter(|s| s.loadable);
    let code_label = |s: &crate::stages::load::Symbol| {
        s.binding == Binding::Local
            && section(s.section).is_some_and(|section| section.executable())
            && !(s.kind == SymbolKind::Function && s.size > 0)
    };
    let names = lifted.functions.iter().map(|f| (f.name.as_str(), f.address)).chain(
        code_object
            .symbols
            .iter()
            .filter(|s| !s.name.is_empty() && section(s.section).is_some() && !code_label(s))
            .filter(|s| !matches!(s.kind, SymbolKind::Section | SymbolKind::File))
            .map(|s| (s.name.as_str(), s.value)),
    );
    for (name, address) in names {
        if let Some(first) = defined.insert(name, address).filter(|first| *first != address) {
            return Err(EmitError::DefinedTwice { name: name.to_string(), first, second: address });
        }
    }
    // One name, one declaration: the assembler gives a name one binding and
    // one visibility.
    let describe = |s: &crate::stages::load::Symbol| {
        let place = if s.section.is_some() { format!("at {:#x}", s.value) } else { "undefined".into() };
        format!("{:?} {:?} {place}", s.binding, s.visibility).to_lowercase()
    };
    let mut declared: std::collections::HashMap<&str, &crate::stages::load::Symbol> = std::collections::HashMap::new();
    for symbol in code_object.symbols.iter().filter(|s| !s.name.is_empty()) {
        if matches!(symbol.kind, SymbolKind::Section | SymbolKind::File) {
            continue;
        }
        if let Some(first) = declared.insert(symbol.name.as_str(), symbol) {
            if (first.binding, first.visibility, first.section.is_some())
                != (symbol.binding, symbol.visibility, symbol.section.is_some())
            {
                return Err(EmitError::DeclaredTwice {
                    name: symbol.name.clone(),
                    first: describe(first),
                    second: describe(symbol),
                });
            }
        }
    }
    Ok(())
}

/// Loadable sections are reproduced by name: none may carry a name the
/// assembler or linker gives its own tables (lld stops the process on the
/// clash when CoMGR runs it).
fn reproduced_sections_have_ordinary_names(lifted: &LiftedCodeObject<'_>) -> Result<(), EmitError> {
    const TABLES: [&str; 3] = [".symtab", ".strtab", ".shstrtab"];
    let reproduced =
        |s: &&crate::stages::load::Section| s.loadable && !super::LINKER_SECTIONS.contains(&s.name.as_str());
    for section in lifted.code_object.sections.iter().filter(reproduced) {
        if TABLES.contains(&section.name.as_str()) || section.name.starts_with(".rel") {
            return Err(EmitError::ReservedSection { name: section.name.clone() });
        }
    }
    Ok(())
}

/// Every symbol the code reaches pc-relatively binds locally: ld.lld
/// refuses a pc-relative relocation against a symbol another object could
/// replace (and, in CoMGR, ends the process at its 20th such error).
fn pc_relative_targets_bind_locally(lifted: &LiftedCodeObject<'_>) -> Result<(), EmitError> {
    use crate::stages::load::{Binding, Visibility};
    for instruction in lifted.functions.iter().flat_map(|f| f.instructions()) {
        let Some(pc) = &instruction.pc_relative else { continue };
        if lifted.got_slot_symbol(pc.target).is_some() {
            continue; // through the GOT, as the original went
        }
        // The symbol the emitted relocation will name.
        if let Some(symbol) = lifted.symbol_containing(pc.target) {
            if symbol.binding != Binding::Local && symbol.visibility == Visibility::Default {
                return Err(EmitError::Preemptible { name: symbol.name.clone(), at: instruction.address });
            }
        }
    }
    Ok(())
}

/// Code that moves is aligned again (kernels to 256 bytes), and LLVM 15's
/// llvm-mc never finishes aligning code after bytes that are not whole
/// 4-byte words (an undecodable tail of a damaged function).
fn moved_code_is_whole_words(lifted: &LiftedCodeObject<'_>) -> Result<(), EmitError> {
    for function in &lifted.functions {
        if let Some(instruction) = function.instructions().find(|i| i.bytes.len() % 4 != 0) {
            return Err(EmitError::PartialWord {
                function: function.name.clone(),
                at: instruction.address,
                bytes: instruction.bytes.len(),
            });
        }
    }
    Ok(())
}

/// Every relocation of the assembled code names a symbol: one naming
/// none (symbol 0) would leave a literal for the linker to fill with
/// nothing, and the code would compute a wrong address.
pub fn relocations_name_symbols(relocatable: &[u8]) -> Result<(), EmitError> {
    use object::{Object, ObjectSection, RelocationTarget, SymbolIndex};
    let Ok(file) = object::File::parse(relocatable) else { return Ok(()) };
    for section in file.sections() {
        for (offset, relocation) in section.relocations() {
            if matches!(relocation.target(), RelocationTarget::Absolute | RelocationTarget::Symbol(SymbolIndex(0))) {
                let section = section.name().unwrap_or("?").to_string();
                return Err(EmitError::RelocationWithoutSymbol { section, offset });
            }
        }
    }
    Ok(())
}

/// Emits, assembles and links; the executable code object's bytes.
pub fn build(
    lifted: &LiftedCodeObject<'_>,
    options: &EmitOptions,
    linker: Linker,
) -> Result<(Vec<u8>, Assembly), EmitError> {
    let directory = tempfile::Builder::new().prefix("gpuinstr-emit-").tempdir()?;
    let (relocatable, mut assembly) = assemble_part(lifted, options, directory.path())?;
    let clock = std::time::Instant::now();
    let build_id = lifted.code_object.build_id();
    let executable = link(&relocatable, &lifted.isa_name(), linker, build_id.as_deref(), directory.path())?;
    assembly.timings.push(("link", clock.elapsed()));
    Ok((executable, assembly))
}

/// Links the relocatable parts of a code object (each [`assemble_part`],
/// files) into one executable code object with ld.lld, which reads them
/// where they are and writes the executable (CoMGR would hold a copy of
/// every part and of the output: the instruction counter makes code
/// objects of gigabytes of Tensile's largest). `leave_undefined`: as
/// [`Linker::LldLeavingUndefined`].
pub fn link_parts(
    parts: &[std::path::PathBuf],
    code_object: &crate::stages::load::CodeObject,
    leave_undefined: bool,
    directory: &Path,
) -> Result<Vec<u8>, EmitError> {
    let build_id = code_object.build_id().map(|id| {
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        format!("--build-id=0x{hex}")
    });
    lld(parts, leave_undefined, build_id.as_deref(), directory)
}

/// Emits and assembles (part of) a code object: the relocatable object,
/// and the assembly it was made from (with the files it reads, in
/// `directory`).
pub fn assemble_part(
    lifted: &LiftedCodeObject<'_>,
    options: &EmitOptions,
    directory: &Path,
) -> Result<(Vec<u8>, Assembly), EmitError> {
    let mut clock = std::time::Instant::now();
    let mut timings = Vec::new();
    let mut lap = |step: &'static str| {
        let now = std::time::Instant::now();
        timings.push((step, now - clock));
        clock = now;
    };
    defined_once(lifted)?;
    if options.patch.is_some() {
        moved_code_is_whole_words(lifted)?;
    }
    pc_relative_targets_bind_locally(lifted)?;
    reproduced_sections_have_ordinary_names(lifted)?;
    lap("checks");
    let mut assembly = lifted.emit_assembly(options);
    if !assembly.code.is_empty() {
        std::fs::write(directory.join(super::CODE_FILE), &assembly.code)?;
    }
    lap("code and assembly");
    let mut relocatable = assemble(lifted, &assembly.text, directory, options.keep_failed.as_deref())?;
    lap("llvm-mc");
    if !assembly.deferred.is_empty() {
        match assembly.deferred.add_to(&relocatable) {
            Ok(with_relocations) => relocatable = with_relocations,
            Err(why) => {
                // Slower, never different: every relocation as text.
                let as_text = EmitOptions { relocations_as_text: true, ..options.clone() };
                assembly = lifted.emit_assembly(&as_text);
                assembly.notes.relocations_as_text = Some(why);
                relocatable = assemble(lifted, &assembly.text, directory, options.keep_failed.as_deref())?;
            }
        }
    }
    relocations_name_symbols(&relocatable)?;
    lap("relocations");
    assembly.timings = timings;
    Ok((relocatable, assembly))
}

impl EmitNotes {
    pub fn is_empty(&self) -> bool {
        self.raw_instructions.is_empty() && self.raw_descriptors.is_empty() && self.skipped_sections.is_empty()
    }
}
