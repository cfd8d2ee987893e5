//! One AMDGPU code object (an ELF64 file for `EM_AMDGPU`, OS ABI AMDHSA):
//! its target, code object version, sections, metadata note and kernels.

use object::elf::{FileHeader64, EM_AMDGPU, SHF_ALLOC, SHT_DYNSYM, SHT_RELA, SHT_SYMTAB};
use object::read::elf::{FileHeader, Rela, SectionHeader, SectionTable, Sym};
use object::{Endianness, Object, ObjectSection, ObjectSymbol};

use super::descriptor::KernelDescriptor;
use super::metadata::{KernelMetadata, Metadata};
use super::target::TargetId;
use crate::error::LoadProblem;

/// OS ABI of HSA code objects (LLVM's ELFOSABI_AMDGPU_HSA).
const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// The note type of the AMDGPU metadata note (owner "AMDGPU").
const NT_AMDGPU_METADATA: u32 = 32;
/// Size of a kernel descriptor.
pub const KERNEL_DESCRIPTOR_SIZE: usize = super::descriptor::SIZE;

/// A section header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub index: usize,
    pub name: String,
    /// sh_type (SHT_PROGBITS, SHT_NOBITS, ...).
    pub kind: u32,
    pub flags: u64,
    pub address: u64,
    pub offset: u64,
    pub size: u64,
    pub alignment: u64,
    /// Loaded into GPU memory (SHF_ALLOC).
    pub loadable: bool,
}

impl Section {
    pub fn contains(&self, address: u64) -> bool {
        address >= self.address && address < self.address + self.size
    }

    pub fn executable(&self) -> bool {
        self.flags & u64::from(object::elf::SHF_EXECINSTR) != 0
    }

    pub fn writable(&self) -> bool {
        self.flags & u64::from(object::elf::SHF_WRITE) != 0
    }

    /// SHT_NOBITS: occupies memory, not file bytes (.bss).
    pub fn no_bits(&self) -> bool {
        self.kind == object::elf::SHT_NOBITS
    }
}

/// ELF symbol type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolKind {
    Function,
    Object,
    NoType,
    Section,
    File,
    Other(u8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    Local,
    Global,
    Weak,
    Other(u8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visibility {
    Default,
    Internal,
    Hidden,
    Protected,
}

/// A symbol of .symtab (or, for files without one, .dynsym).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub value: u64,
    pub size: u64,
    pub kind: SymbolKind,
    pub binding: Binding,
    pub visibility: Visibility,
    /// Index of the section it is defined in.
    pub section: Option<usize>,
    /// Also in .dynsym (visible to the loader).
    pub dynamic: bool,
}

/// A relocation record (code objects are linked; these are dynamic ones).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Relocation {
    /// The relocation section it is in (.rela.dyn).
    pub section: String,
    pub offset: u64,
    /// R_AMDGPU_* type.
    pub kind: u32,
    pub symbol: Option<String>,
    pub addend: i64,
}

/// A kernel: its metadata and its descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    pub metadata: KernelMetadata,
    pub descriptor: KernelDescriptor,
    /// Address of the descriptor (the `.kd` symbol).
    pub descriptor_address: u64,
    /// Address of the kernel's first instruction.
    pub code_address: u64,
}

impl Kernel {
    pub fn name(&self) -> &str {
        &self.metadata.name
    }
}

/// A parsed code object.
#[derive(Clone, Debug)]
pub struct CodeObject {
    /// Where it came from inside its file ("bundle 0, entry hipv4-...").
    pub origin: Vec<String>,
    pub bytes: Vec<u8>,
    pub code_object_version: u32,
    pub target: TargetId,
    pub sections: Vec<Section>,
    pub symbols: Vec<Symbol>,
    pub relocations: Vec<Relocation>,
    pub metadata: Metadata,
    /// The metadata notes' bytes as stored (MessagePack), in order: one,
    /// or one per object the code object was linked from (Tensile's).
    pub metadata_notes: Vec<Vec<u8>>,
    pub kernels: Vec<Kernel>,
}

fn malformed(error: object::Error) -> LoadProblem {
    LoadProblem::MalformedElf(error.to_string())
}

/// Reads the ELF machine of any ELF file (32 or 64-bit, either endianness).
pub fn elf_machine(bytes: &[u8]) -> Option<u16> {
    if bytes.len() < 20 || !bytes.starts_with(b"\x7fELF") {
        return None;
    }
    let raw = [bytes[18], bytes[19]];
    Some(if bytes[5] == 2 { u16::from_be_bytes(raw) } else { u16::from_le_bytes(raw) })
}

impl CodeObject {
    pub fn parse(bytes: Vec<u8>, origin: Vec<String>) -> Result<Self, LoadProblem> {
        if bytes.get(4) != Some(&2) {
            return Err(LoadProblem::NotElf64);
        }
        let header = FileHeader64::<Endianness>::parse(&*bytes).map_err(malformed)?;
        let endian = header.endian().map_err(malformed)?;
        let machine = header.e_machine(endian);
        if machine != EM_AMDGPU {
            return Err(LoadProblem::WrongMachine(machine));
        }
        let ident = header.e_ident();
        if ident.os_abi != ELFOSABI_AMDGPU_HSA {
            return Err(LoadProblem::NotHsa(ident.os_abi));
        }
        let code_object_version = match ident.abi_version {
            1 => 3,
            2 => 4,
            3 => 5,
            4 => 6,
            other => return Err(LoadProblem::UnsupportedCodeObjectVersion(other)),
        };
        let target = TargetId::from_e_flags(header.e_flags(endian), code_object_version)?;

        check_segment_geometry(header, endian, &bytes)?;
        let section_table = header.sections(endian, &*bytes).map_err(malformed)?;
        let mut sections = Vec::new();
        let mut metadata_notes = Vec::new();
        for (index, section) in section_table.iter().enumerate() {
            let name = section_table.section_name(endian, section).map_err(malformed)?;
            sections.push(Section {
                index,
                name: String::from_utf8_lossy(name).into_owned(),
                kind: section.sh_type(endian),
                flags: section.sh_flags(endian),
                address: section.sh_addr(endian),
                offset: section.sh_offset(endian),
                size: section.sh_size(endian),
                alignment: section.sh_addralign(endian),
                loadable: section.sh_flags(endian) & u64::from(SHF_ALLOC) != 0,
            });
            if let Some(mut notes) = section.notes(endian, &*bytes).map_err(malformed)? {
                while let Some(entry) = notes.next().map_err(malformed)? {
                    if entry.name() == b"AMDGPU" && entry.n_type(endian) == NT_AMDGPU_METADATA {
                        metadata_notes.push(entry.desc().to_vec());
                    }
                }
            }
        }
        check_section_geometry(&sections, bytes.len())?;
        let metadata = Metadata::parse_notes(&metadata_notes)?;
        let symbols = read_symbols(header, endian, &bytes, &section_table)?;
        check_symbol_geometry(&symbols, &sections)?;
        let relocations = read_relocations(endian, &bytes, &section_table, &sections)?;

        let file = object::read::elf::ElfFile64::<Endianness>::parse(&*bytes).map_err(malformed)?;
        let mut kernels = Vec::new();
        for kernel in &metadata.kernels {
            let problem = |problem: String| LoadProblem::Kernel { kernel: kernel.name.clone(), problem };
            let symbol = file.symbol_by_name(&kernel.symbol).ok_or_else(|| {
                problem(format!("its kernel descriptor symbol `{}` is not in the symbol table", kernel.symbol))
            })?;
            let section_index = symbol.section_index().ok_or_else(|| {
                problem(format!("its kernel descriptor symbol `{}` is not defined in a section", kernel.symbol))
            })?;
            let section = file.section_by_index(section_index).map_err(malformed)?;
            let data = section
                .data_range(symbol.address(), KERNEL_DESCRIPTOR_SIZE as u64)
                .map_err(malformed)?
                .ok_or_else(|| {
                    problem(format!(
                        "its kernel descriptor `{}` at {:#x} points outside {} ({:#x}..{:#x})",
                        kernel.symbol,
                        symbol.address(),
                        section.name().unwrap_or("its section"),
                        section.address(),
                        section.address() + section.size()
                    ))
                })?;
            let descriptor = KernelDescriptor::decode(data.try_into().expect("data_range returned 64 bytes"));
            let code_address = symbol.address().wrapping_add(descriptor.kernel_code_entry_byte_offset as u64);
            let in_code = sections.iter().any(|s| s.executable() && s.contains(code_address));
            if !in_code {
                return Err(problem(format!(
                    "its descriptor's entry offset {} points at {code_address:#x}, outside the code",
                    descriptor.kernel_code_entry_byte_offset
                )));
            }
            kernels.push(Kernel {
                metadata: kernel.clone(),
                descriptor,
                descriptor_address: symbol.address(),
                code_address,
            });
        }
        Ok(CodeObject {
            origin,
            bytes,
            code_object_version,
            target,
            sections,
            symbols,
            relocations,
            metadata,
            metadata_notes,
            kernels,
        })
    }

    /// A section's contents (None for .bss-like sections).
    pub fn section_data(&self, name: &str) -> Option<&[u8]> {
        let section = self.sections.iter().find(|s| s.name == name)?;
        self.section_bytes(section)
    }

    pub fn section_bytes(&self, section: &Section) -> Option<&[u8]> {
        if section.no_bits() {
            return None;
        }
        self.bytes.get(section.offset as usize..(section.offset + section.size) as usize)
    }

    /// `length` bytes of loaded memory at `address`.
    pub fn bytes_at(&self, address: u64, length: u64) -> Option<&[u8]> {
        let section = self.sections.iter().find(|s| s.loadable && s.contains(address))?;
        let data = self.section_bytes(section)?;
        let start = (address - section.address) as usize;
        data.get(start..start.checked_add(length as usize)?)
    }

    pub fn section_containing(&self, address: u64) -> Option<&Section> {
        self.sections.iter().find(|s| s.loadable && s.contains(address))
    }

    /// The GNU build id (`.note.gnu.build-id`'s NT_GNU_BUILD_ID note), if
    /// the linker gave the code object one.
    pub fn build_id(&self) -> Option<Vec<u8>> {
        let data = self.section_data(".note.gnu.build-id")?;
        let word = |at: usize| Some(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?) as usize);
        let (name_size, desc_size, kind) = (word(0)?, word(4)?, word(8)?);
        let name = data.get(12..12 + name_size)?;
        let desc_at = 12 + name_size.next_multiple_of(4);
        (kind == 3 && name == b"GNU\0").then(|| data.get(desc_at..desc_at + desc_size).map(<[u8]>::to_vec))?
    }

    pub fn has_section(&self, name: &str) -> bool {
        self.sections.iter().any(|s| s.name == name)
    }
}

type Table<'a> = SectionTable<'a, FileHeader64<Endianness>, &'a [u8]>;

/// Every program header's bytes are inside the file: loaders (CoMGR's
/// metadata reader, ROCr) walk segments and crash on ones that run past it.
fn check_segment_geometry(
    header: &FileHeader64<Endianness>,
    endian: Endianness,
    bytes: &[u8],
) -> Result<(), LoadProblem> {
    use object::read::elf::ProgramHeader as _;
    let segments = header.program_headers(endian, bytes).map_err(malformed)?;
    for (index, segment) in segments.iter().enumerate() {
        let (offset, size) = (segment.p_offset(endian), segment.p_filesz(endian));
        if offset.checked_add(size).is_none_or(|end| end > bytes.len() as u64) {
            return Err(LoadProblem::MalformedElf(format!(
                "program header {index} (bytes {offset:#x}, {size:#x} of them) runs past the end of the file ({:#x} bytes)",
                bytes.len()
            )));
        }
    }
    Ok(())
}

/// Every section's bytes are inside the file and its addresses do not wrap:
/// the readers after this index and slice by them.
fn check_section_geometry(sections: &[Section], file_size: usize) -> Result<(), LoadProblem> {
    for section in sections.iter().filter(|s| s.kind != object::elf::SHT_NULL) {
        let damaged = |what: String| LoadProblem::MalformedElf(format!("section `{}` {what}", section.name));
        if !section.no_bits() && section.offset.checked_add(section.size).is_none_or(|end| end > file_size as u64) {
            return Err(damaged(format!(
                "has {} bytes at file offset {:#x}, past the end of the file ({file_size} bytes)",
                section.size, section.offset
            )));
        }
        if section.loadable && section.address.checked_add(section.size).is_none() {
            return Err(damaged(format!(
                "at {:#x} with {} bytes wraps around the address space",
                section.address, section.size
            )));
        }
    }
    Ok(())
}

/// Symbols of loaded sections lie inside them (code and data are cut by
/// symbols).
fn check_symbol_geometry(symbols: &[Symbol], sections: &[Section]) -> Result<(), LoadProblem> {
    for symbol in symbols {
        let Some(section) = symbol.section.and_then(|index| sections.get(index)) else { continue };
        if !section.loadable || matches!(symbol.kind, SymbolKind::Section | SymbolKind::File) {
            continue;
        }
        let end = symbol.value.checked_add(symbol.size);
        let inside = symbol.value >= section.address && end.is_some_and(|end| end <= section.address + section.size);
        if !inside {
            return Err(LoadProblem::MalformedElf(format!(
                "symbol `{}` at {:#x} ({} bytes) lies outside its section `{}` ({:#x}..{:#x})",
                symbol.name,
                symbol.value,
                symbol.size,
                section.name,
                section.address,
                section.address + section.size
            )));
        }
    }
    Ok(())
}

/// Symbols of .symtab, marked dynamic when .dynsym has them too; .dynsym
/// alone when the file has no .symtab (stripped).
fn read_symbols(
    _header: &FileHeader64<Endianness>,
    endian: Endianness,
    data: &[u8],
    sections: &Table<'_>,
) -> Result<Vec<Symbol>, LoadProblem> {
    let read = |kind| -> Result<Vec<Symbol>, LoadProblem> {
        let table = sections.symbols(endian, data, kind).map_err(malformed)?;
        let mut out = Vec::new();
        for symbol in table.iter().skip(1) {
            let name = table.symbol_name(endian, symbol).map_err(malformed)?;
            let section = symbol.st_shndx(endian);
            out.push(Symbol {
                name: String::from_utf8_lossy(name).into_owned(),
                value: symbol.st_value(endian),
                size: symbol.st_size(endian),
                kind: match symbol.st_type() {
                    object::elf::STT_FUNC => SymbolKind::Function,
                    object::elf::STT_OBJECT => SymbolKind::Object,
                    object::elf::STT_NOTYPE => SymbolKind::NoType,
                    object::elf::STT_SECTION => SymbolKind::Section,
                    object::elf::STT_FILE => SymbolKind::File,
                    other => SymbolKind::Other(other),
                },
                binding: match symbol.st_bind() {
                    object::elf::STB_LOCAL => Binding::Local,
                    object::elf::STB_GLOBAL => Binding::Global,
                    object::elf::STB_WEAK => Binding::Weak,
                    other => Binding::Other(other),
                },
                visibility: match symbol.st_visibility() {
                    object::elf::STV_INTERNAL => Visibility::Internal,
                    object::elf::STV_HIDDEN => Visibility::Hidden,
                    object::elf::STV_PROTECTED => Visibility::Protected,
                    _ => Visibility::Default,
                },
                section: (section != object::elf::SHN_UNDEF && section < object::elf::SHN_LORESERVE)
                    .then_some(section as usize),
                dynamic: kind == SHT_DYNSYM,
            });
        }
        Ok(out)
    };
    let dynamic = read(SHT_DYNSYM)?;
    let mut symbols = read(SHT_SYMTAB)?;
    if symbols.is_empty() {
        return Ok(dynamic);
    }
    for symbol in &mut symbols {
        symbol.dynamic = dynamic.iter().any(|d| d.name == symbol.name && d.value == symbol.value);
    }
    Ok(symbols)
}

fn read_relocations(
    endian: Endianness,
    data: &[u8],
    table: &Table<'_>,
    sections: &[Section],
) -> Result<Vec<Relocation>, LoadProblem> {
    let mut out = Vec::new();
    for (index, section) in table.iter().enumerate() {
        if section.sh_type(endian) != SHT_RELA {
            continue;
        }
        let Some((relocations, link)) = section.rela(endian, data).map_err(malformed)? else {
            continue;
        };
        let symbols = table.symbol_table_by_index(endian, data, link).map_err(malformed)?;
        for relocation in relocations {
            let symbol_index = relocation.r_sym(endian, false);
            let symbol = if symbol_index == 0 {
                None
            } else {
                let symbol = symbols.symbol(object::SymbolIndex(symbol_index as usize)).map_err(malformed)?;
                Some(String::from_utf8_lossy(symbols.symbol_name(endian, symbol).map_err(malformed)?).into_owned())
            };
            out.push(Relocation {
                section: sections[index].name.clone(),
                offset: relocation.r_offset(endian),
                kind: relocation.r_type(endian, false),
                symbol,
                addend: relocation.r_addend(endian),
            });
        }
    }
    Ok(out)
}
