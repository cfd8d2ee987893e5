//! Stage 1, load: a file becomes the AMDGPU code objects it holds. Accepted
//! inputs: a device code object, a clang offload bundle, or a host
//! object/executable/shared library with a `.hip_fatbin` section (one or
//! more bundles).

pub mod allocation;
pub mod bundle;
pub mod code_object;
pub mod compressed_bundle;
pub mod descriptor;
pub mod hidden_arguments;
pub mod instrumented;
pub mod kernel_inputs;
pub mod lines;
pub mod metadata;
pub mod occupancy;
pub mod processor;
pub mod target;

use std::path::{Path, PathBuf};

use object::{Object, ObjectSection};

pub use code_object::{Binding, CodeObject, Kernel, Relocation, Section, Symbol, SymbolKind, Visibility};
pub use descriptor::KernelDescriptor;
pub use metadata::{KernelArgument, KernelMetadata, Metadata};
pub use target::{FeatureSetting, TargetId};

use crate::error::{Error, LoadProblem, Location};

/// What kind of file the input was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputKind {
    CodeObject,
    OffloadBundle,
    /// A host ELF file; `bundles` is how many bundles its `.hip_fatbin` has.
    HostWithFatbin {
        bundles: usize,
    },
}

/// A loaded input file.
#[derive(Debug)]
pub struct LoadedInput {
    pub path: PathBuf,
    pub kind: InputKind,
    pub code_objects: Vec<CodeObject>,
}

impl LoadedInput {
    /// Keeps the code objects whose target matches `selector` (`gfx90a`,
    /// `gfx90a:xnack-`); an error naming the targets there are if none does.
    pub fn select_target(mut self, selector: &str) -> Result<Self, Error> {
        let available = self.code_objects.iter().map(|c| c.target.to_string()).collect::<Vec<_>>();
        self.code_objects.retain(|c| c.target.matches(selector));
        if self.code_objects.is_empty() {
            return Err(Error::NoSuchTarget {
                file: self.path,
                target: selector.to_string(),
                available: if available.is_empty() { "no code objects".into() } else { available.join(", ") },
            });
        }
        Ok(self)
    }
}

const ELF_MAGIC: &[u8] = b"\x7fELF";
const EM_AMDGPU: u16 = 224;

/// Reads and loads a file.
pub fn load(path: &Path) -> Result<LoadedInput, Error> {
    load_for_target(path, None)
}

/// Reads and loads a file, parsing only the bundle entries that can match
/// `target` (a fat binary of many targets is mostly skipped unread).
pub fn load_for_target(path: &Path, target: Option<&str>) -> Result<LoadedInput, Error> {
    let file =
        crate::native::MappedFile::open(path).map_err(|source| Error::Io { location: Location::file(path), source })?;
    load_bytes_for_target(path, file.bytes(), target)
}

/// Loads a file already in memory.
pub fn load_bytes(path: &Path, bytes: &[u8]) -> Result<LoadedInput, Error> {
    load_filtered(path, bytes, None)
}

/// Loads a file's bytes, parsing only the bundle entries that can match
/// `target` (all when None), and keeps the code objects for it.
pub fn load_bytes_for_target(path: &Path, bytes: &[u8], target: Option<&str>) -> Result<LoadedInput, Error> {
    let input = load_filtered(path, bytes, target)?;
    match target {
        Some(target) => input.select_target(target),
        None => Ok(input),
    }
}

/// A file's device code objects in groups parsed one at a time (a host
/// file's bundles: a library's fat binary holds hundreds): the loader
/// parses them all, checkers of two such files only the pair at hand.
pub enum CodeGroup<'a> {
    /// A code object file: one group of one.
    Whole(&'a [u8]),
    /// A bundle, with where it is (`.hip_fatbin`, `bundle N`; nothing for
    /// a bundle file).
    Bundle(Vec<String>, bundle::Bundle<'a>),
}

/// The groups of `bytes` (a code object, a bundle or a host file), none
/// parsed yet; anything else is an error saying what the file is.
pub fn code_groups<'a>(path: &Path, bytes: &'a [u8]) -> Result<Vec<CodeGroup<'a>>, Error> {
    let location = Location::file(path);
    let fail = |location: &Location, problem: LoadProblem| Error::Load { location: location.clone(), problem };
    if bytes.starts_with(ELF_MAGIC) && code_object::elf_machine(bytes) == Some(EM_AMDGPU) {
        return Ok(vec![CodeGroup::Whole(bytes)]);
    }
    if bytes.starts_with(bundle::BUNDLE_MAGIC) || bytes.starts_with(bundle::COMPRESSED_BUNDLE_MAGIC) {
        let parsed = bundle::parse_bundle(bytes).map_err(|p| fail(&location, p))?;
        return Ok(vec![CodeGroup::Bundle(Vec::new(), parsed)]);
    }
    if bytes.starts_with(ELF_MAGIC) {
        let file = object::File::parse(bytes).map_err(|e| fail(&location, LoadProblem::MalformedElf(e.to_string())))?;
        let Some(section) = file.section_by_name(".hip_fatbin") else {
            let found = if file.section_by_name(".llvm.offloading").is_some() {
                "an ELF file whose device code is in .llvm.offloading (clang's new offload driver), \
                 which clang 15 does not link into a .hip_fatbin"
                    .to_string()
            } else {
                format!("an {:?} ELF file without a .hip_fatbin section", file.architecture())
            };
            return Err(fail(&location, LoadProblem::NotGpuCode { found }));
        };
        let data = section.data().map_err(|e| fail(&location, LoadProblem::MalformedElf(e.to_string())))?;
        let fatbin = location.within(".hip_fatbin");
        let bundles = bundle::split_fatbin(data).map_err(|p| fail(&fatbin, p))?;
        return Ok(bundles
            .into_iter()
            .enumerate()
            .map(|(index, parsed)| {
                CodeGroup::Bundle(vec![".hip_fatbin".to_string(), format!("bundle {index}")], parsed)
            })
            .collect());
    }
    let found = if bytes.is_empty() {
        "an empty file".to_string()
    } else if bytes.starts_with(b"BC\xc0\xde") {
        "LLVM bitcode".to_string()
    } else {
        let head = &bytes[..bytes.len().min(8)];
        let hex: Vec<String> = head.iter().map(|b| format!("{b:02x}")).collect();
        let text: String =
            head.iter().map(|b| if b.is_ascii_graphic() || *b == b' ' { *b as char } else { '.' }).collect();
        format!("a file starting with {} \"{text}\"", hex.join(" "))
    };
    Err(fail(&location, LoadProblem::NotGpuCode { found }))
}

impl CodeGroup<'_> {
    /// The group's code objects: a code object file's whatever its target,
    /// a bundle's entries that may match `target` (all when `None`).
    pub fn code_objects(&self, path: &Path, target: Option<&str>) -> Result<Vec<CodeObject>, Error> {
        let location = Location::file(path);
        match self {
            CodeGroup::Whole(bytes) => {
                Ok(vec![CodeObject::parse(bytes.to_vec(), Vec::new())
                    .map_err(|problem| Error::Load { location, problem })?])
            }
            CodeGroup::Bundle(prefix, parsed) => bundle_code_objects(&location, prefix, parsed, target),
        }
    }
}

/// Every code object of the file (bundle entries that cannot match
/// `target` not parsed).
fn load_filtered(path: &Path, bytes: &[u8], target: Option<&str>) -> Result<LoadedInput, Error> {
    let groups = code_groups(path, bytes)?;
    let kind = match groups.as_slice() {
        [CodeGroup::Whole(_)] => InputKind::CodeObject,
        [CodeGroup::Bundle(prefix, _)] if prefix.is_empty() => InputKind::OffloadBundle,
        _ => InputKind::HostWithFatbin { bundles: groups.len() },
    };
    let mut code_objects = Vec::new();
    for group in &groups {
        code_objects.extend(group.code_objects(path, target)?);
    }
    Ok(LoadedInput { path: path.into(), kind, code_objects })
}

/// The device code objects of a bundle (the host entry is skipped).
fn bundle_code_objects(
    file: &Location,
    prefix: &[String],
    parsed: &bundle::Bundle<'_>,
    target: Option<&str>,
) -> Result<Vec<CodeObject>, Error> {
    let mut out = Vec::new();
    for entry in &parsed.entries {
        if !entry.triple.contains("amdgcn") || target.is_some_and(|t| !TargetId::triple_may_match(&entry.triple, t)) {
            continue;
        }
        let mut origin = prefix.to_vec();
        origin.push(format!("entry {}", crate::error::printable(&entry.triple)));
        let location = Location { file: file.file.clone(), inside: origin.clone() };
        if entry.bytes.starts_with(b"BC\xc0\xde") {
            return Err(Error::Load {
                location,
                problem: LoadProblem::NotGpuCode {
                    found: "LLVM bitcode (a -fgpu-rdc object before device linking); link the program or library first"
                        .to_string(),
                },
            });
        }
        let code_object =
            CodeObject::parse(entry.bytes.to_vec(), origin).map_err(|problem| Error::Load { location, problem })?;
        out.push(code_object);
    }
    Ok(out)
}
