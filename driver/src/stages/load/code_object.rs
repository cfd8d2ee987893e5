//! One AMDGPU code object (an ELF64 file for `EM_AMDGPU`, OS ABI AMDHSA):
//! its target, code object version, sections, metadata note and kernels.

use object::elf::{FileHeader64, EM_AMDGPU, SHF_ALLOC};
use object::read::elf::{FileHeader, SectionHeader};
use object::{Endianness, Object, ObjectSection, ObjectSymbol};

use super::metadata::{KernelMetadata, Metadata};
use super::target::TargetId;
use crate::error::LoadProblem;

/// OS ABI of HSA code objects (LLVM's ELFOSABI_AMDGPU_HSA).
const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// The note type of the AMDGPU metadata note (owner "AMDGPU").
const NT_AMDGPU_METADATA: u32 = 32;
/// Size of a kernel descriptor.
pub const KERNEL_DESCRIPTOR_SIZE: usize = 64;

/// A section, as far as inspection needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    pub size: u64,
    /// Loaded into GPU memory (SHF_ALLOC).
    pub loadable: bool,
}

/// A kernel: its metadata and its 64-byte descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    pub metadata: KernelMetadata,
    pub descriptor: [u8; KERNEL_DESCRIPTOR_SIZE],
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
    pub metadata: Metadata,
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
            other => return Err(LoadProblem::UnsupportedCodeObjectVersion(other)),
        };
        let target = TargetId::from_e_flags(header.e_flags(endian), code_object_version)?;

        let section_table = header.sections(endian, &*bytes).map_err(malformed)?;
        let mut sections = Vec::new();
        let mut note = None;
        for section in section_table.iter() {
            let name = section_table.section_name(endian, section).map_err(malformed)?;
            sections.push(Section {
                name: String::from_utf8_lossy(name).into_owned(),
                size: section.sh_size(endian),
                loadable: section.sh_flags(endian) & u64::from(SHF_ALLOC) != 0,
            });
            if let Some(mut notes) = section.notes(endian, &*bytes).map_err(malformed)? {
                while let Some(entry) = notes.next().map_err(malformed)? {
                    if entry.name() == b"AMDGPU" && entry.n_type(endian) == NT_AMDGPU_METADATA {
                        note = Some(entry.desc().to_vec());
                    }
                }
            }
        }
        let metadata = Metadata::parse(&note.ok_or(LoadProblem::MissingMetadata)?)?;

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
            kernels.push(Kernel {
                metadata: kernel.clone(),
                descriptor: data.try_into().expect("data_range returned 64 bytes"),
            });
        }
        Ok(CodeObject { origin, bytes, code_object_version, target, sections, metadata, kernels })
    }

    /// A section's contents.
    pub fn section_data(&self, name: &str) -> Option<&[u8]> {
        let file = object::read::elf::ElfFile64::<Endianness>::parse(&*self.bytes).ok()?;
        file.section_by_name(name)?.data().ok()
    }

    pub fn has_section(&self, name: &str) -> bool {
        self.sections.iter().any(|s| s.name == name)
    }
}
