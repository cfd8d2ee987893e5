//! The kinds of input gpuinstr reads, their seeds (real files in
//! fuzz/seeds/, built by hipcc and clang from our examples), and where in
//! each seed mutations matter most.

use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::mutate::{mutate_binary, mutate_text, Regions, Rng};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A device code object (ELF, EM_AMDGPU).
    CodeObject,
    /// A clang offload bundle.
    Bundle,
    /// A host object (`hipcc -c`) with `.hip_fatbin`.
    HostObject,
    /// A host shared library with `.hip_fatbin`.
    HostLibrary,
    /// A code object mutated only inside its AMDGPU metadata note (MessagePack).
    MetadataNote,
    /// A plan (TOML).
    Plan,
    /// A tool's code object (hooks in `.llvmbc`).
    Tool,
    /// A run's database (SQLite) as `gpuinstr-report` reads it.
    Database,
    /// An entry of dynamic mode's cache (a code object behind a keyed
    /// digest) as the runtime reads it before the GPU runs it.
    CacheEntry,
}

pub const ALL_KINDS: [Kind; 9] = [
    Kind::CodeObject,
    Kind::Bundle,
    Kind::HostObject,
    Kind::HostLibrary,
    Kind::MetadataNote,
    Kind::Plan,
    Kind::Tool,
    Kind::Database,
    Kind::CacheEntry,
];

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::CodeObject => "code-object",
            Kind::Bundle => "bundle",
            Kind::HostObject => "host-object",
            Kind::HostLibrary => "host-library",
            Kind::MetadataNote => "metadata-note",
            Kind::Plan => "plan",
            Kind::Tool => "tool",
            Kind::Database => "database",
            Kind::CacheEntry => "cache-entry",
        }
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        ALL_KINDS.into_iter().find(|k| k.name() == name)
    }

    /// The directory of fuzz/seeds/ its seeds come from (a cache entry's
    /// are code objects, written into a cache of the fuzz key's).
    pub fn seed_directory(self) -> &'static str {
        match self {
            Kind::MetadataNote | Kind::CacheEntry => "code-object",
            other => other.name(),
        }
    }

    /// The file name an input of this kind is written under (the readers
    /// do not look at extensions, but messages name the file).
    pub fn file_name(self) -> &'static str {
        match self {
            Kind::CodeObject | Kind::MetadataNote => "input.hsaco",
            Kind::Bundle => "input.hipfb",
            Kind::HostObject => "input.o",
            Kind::HostLibrary => "libinput.so",
            Kind::Plan => "input.toml",
            Kind::Tool => "tool.hsaco",
            Kind::Database => "report.sqlite",
            Kind::CacheEntry => "cache-entry",
        }
    }
}

/// The repository's fuzz/ directory.
pub fn fuzz_directory() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// A seed: its file name, bytes and mutation regions.
pub struct Seed {
    pub name: String,
    pub bytes: Vec<u8>,
    pub regions: Regions,
}

/// The seeds of a kind, in file name order.
pub fn seeds(kind: Kind) -> std::io::Result<Vec<Seed>> {
    let directory = fuzz_directory().join("seeds").join(kind.seed_directory());
    let mut names: Vec<PathBuf> =
        std::fs::read_dir(&directory)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    names.sort();
    let mut seeds = Vec::new();
    for path in names {
        let bytes = std::fs::read(&path)?;
        let regions = match kind {
            Kind::MetadataNote => match metadata_note(&bytes) {
                Some(note) => Regions { hot: Vec::new(), only: Some(note) },
                None => continue,
            },
            Kind::Plan => Regions::default(),
            Kind::Database => Regions { hot: sqlite_regions(&bytes), only: None },
            _ => Regions { hot: hot_regions(&bytes), only: None },
        };
        let (bytes, regions) = match kind {
            Kind::CacheEntry => cache_entry(&bytes, regions)?,
            _ => (bytes, regions),
        };
        seeds.push(Seed { name: path.file_name().unwrap_or_default().to_string_lossy().into_owned(), bytes, regions });
    }
    Ok(seeds)
}

/// The key of the caches cache-entry cases read (the runtime makes a
/// random one per cache; a fixed one makes the seeds' entries valid).
pub const CACHE_KEY: [u8; 32] = [0x5a; 32];

/// A private cache in `directory` whose key is [`CACHE_KEY`].
pub fn fuzz_cache(directory: &Path) -> std::io::Result<gpuinstr_rt::cache::Cache> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if !directory.exists() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(directory)?;
        let mut key =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(directory.join("key"))?;
        std::io::Write::write_all(&mut key, &CACHE_KEY)?;
    }
    gpuinstr_rt::cache::Cache::open(directory.to_path_buf()).map_err(std::io::Error::other)
}

/// A code object as the cache entry the runtime writes for it (format,
/// digest, bytes), and its regions moved past the entry's header, which is
/// hot too.
fn cache_entry(code_object: &[u8], regions: Regions) -> std::io::Result<(Vec<u8>, Regions)> {
    let directory = tempfile::tempdir()?;
    let cache = fuzz_cache(&directory.path().join("cache"))?;
    cache.write("seed", code_object)?;
    let entry = std::fs::read(cache.path("seed"))?;
    let header = entry.len() - code_object.len();
    let hot = std::iter::once(0..header).chain(regions.hot.into_iter().map(|r| r.start + header..r.end + header));
    Ok((entry, Regions { hot: hot.collect(), only: None }))
}

/// Words a plan mutation puts in: the plan reader's vocabulary and what
/// breaks it.
pub const PLAN_WORDS: &[&str] = &[
    "\"countInstructionsVector\"",
    "\"countInstructionsScalar\"",
    "\"nosuchhook\"",
    "\"each-instruction\"",
    "\"kernel-entry\"",
    "\"each-block\"",
    "\"before-exit\"",
    "\"class:vector\"",
    "\"class:scalar\"",
    "\"class:nosuch\"",
    "\"class:memory-address\"",
    "\"opcode:V_.*\"",
    "\"opcode:(\"",
    "\"opcode:\"",
    "\"*\"",
    "\"[\"",
    "\"_Z*\"",
    "true",
    "false",
    "0",
    "-1",
    "18446744073709551615",
    "99999999999999999999",
    "1.5e308",
    "nan",
    "{ reg = \"s4\" }",
    "{ reg = \"v255\" }",
    "{ reg = \"a3\" }",
    "{ reg = \"exec\" }",
    "{ reg = \"s999\" }",
    "{ reg = \"\" }",
    "{ value = \"memory-address\" }",
    "{ value = \"site\" }",
    "{ value = \"opcode\" }",
    "{ value = \"nosuch\" }",
    "{ source = 0 }",
    "{ source = 99 }",
    "{ source = -1 }",
    "[[insert]]",
    "[insert]",
    "hook",
    "where",
    "kernels",
    "functions",
    "args",
    "args = []",
    "args = [false, false, false, false, false, false, false, false, false]",
];

/// Case `index` of `kind`: which seed, and the mutated input.
pub fn case_input(kind: Kind, seeds: &[Seed], index: u64) -> (usize, Vec<u8>) {
    let mut rng = Rng::for_case(kind.name(), index);
    let seed = rng.below(seeds.len());
    let input = match kind {
        Kind::Plan => {
            let text = String::from_utf8_lossy(&seeds[seed].bytes).into_owned();
            mutate_text(&text, PLAN_WORDS, &mut rng).into_bytes()
        }
        _ => mutate_binary(&seeds[seed].bytes, &seeds[seed].regions, &mut rng),
    };
    (seed, input)
}

/// Where an SQLite file's structure is: its 100-byte header and each
/// page's b-tree header and cell pointers (the first 32 bytes of a page).
pub fn sqlite_regions(bytes: &[u8]) -> Vec<Range<usize>> {
    let page_size = match bytes.get(16..18).map(|b| u16::from_be_bytes([b[0], b[1]])) {
        Some(1) => 65536,
        Some(size) if size >= 512 => usize::from(size),
        _ => return Vec::new(),
    };
    let mut regions = Vec::new();
    regions.push(0..100.min(bytes.len()));
    // Page 1's b-tree header follows the file header.
    regions.extend((0..bytes.len()).step_by(page_size).map(|page| {
        let start = if page == 0 { 100 } else { page };
        start..(start + 32).min(bytes.len())
    }));
    regions
}

fn u16_at(bytes: &[u8], at: usize) -> Option<usize> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?) as usize)
}

fn u32_at(bytes: &[u8], at: usize) -> Option<usize> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?) as usize)
}

fn u64_at(bytes: &[u8], at: usize) -> Option<usize> {
    usize::try_from(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?)).ok()
}

/// An ELF64 file's sections: (name, file range, type).
fn elf_sections(bytes: &[u8]) -> Option<Vec<(String, Range<usize>, u32)>> {
    if bytes.get(..4)? != b"\x7fELF" || *bytes.get(4)? != 2 {
        return None;
    }
    let shoff = u64_at(bytes, 0x28)?;
    let shentsize = u16_at(bytes, 0x3a)?;
    let shnum = u16_at(bytes, 0x3c)?;
    let shstrndx = u16_at(bytes, 0x3e)?;
    let header = |index: usize| -> Option<(usize, u32, usize, usize)> {
        let at = shoff.checked_add(index.checked_mul(shentsize)?)?;
        Some((u32_at(bytes, at)?, u32_at(bytes, at + 4)? as u32, u64_at(bytes, at + 0x18)?, u64_at(bytes, at + 0x20)?))
    };
    let (_, _, strings, strings_size) = header(shstrndx)?;
    let names = bytes.get(strings..strings.checked_add(strings_size)?)?;
    let mut sections = Vec::new();
    for index in 0..shnum {
        let (name, kind, offset, size) = header(index)?;
        let name = names.get(name..)?.split(|b| *b == 0).next()?;
        let end = if kind == 8 { offset } else { offset.checked_add(size)? }; // SHT_NOBITS has no bytes
        sections.push((String::from_utf8_lossy(name).into_owned(), offset..end, kind));
    }
    Some(sections)
}

/// The parts of an ELF file at `base` a reader looks at first: the header,
/// program and section header tables, notes, symbols, strings, dynamic and
/// relocation sections, code, descriptors, embedded bitcode and bundles.
fn elf_hot_regions(bytes: &[u8], base: usize, out: &mut Vec<Range<usize>>) {
    let elf = &bytes[base..];
    out.push(base..base + 64.min(elf.len()));
    if let (Some(phoff), Some(phnum)) = (u64_at(elf, 0x20), u16_at(elf, 0x38)) {
        out.push(base + phoff..base + phoff + 56 * phnum);
    }
    if let (Some(shoff), Some(shnum)) = (u64_at(elf, 0x28), u16_at(elf, 0x3c)) {
        out.push(base + shoff..base + shoff + 64 * shnum);
    }
    for (name, range, kind) in elf_sections(elf).unwrap_or_default() {
        let interesting = matches!(kind, 2 | 3 | 4 | 6 | 7 | 9 | 11)
            || [".text", ".rodata", ".llvmbc", ".hipFatBinSegment", ".hip_fatbin", ".debug_line", ".debug_info"]
                .contains(&name.as_str())
            || name.starts_with(".gpuinstr.");
        if interesting && !range.is_empty() {
            // Of a large section, its start (a bundle's header, a table's first entries).
            let end = range.end.min(range.start + 4096);
            out.push(base + range.start..base + end);
        }
    }
}

/// Hot regions of a seed: its own ELF structure (or bundle header), and
/// that of every code object embedded in it.
pub fn hot_regions(bytes: &[u8]) -> Vec<Range<usize>> {
    let mut regions = Vec::new();
    let magic = b"__CLANG_OFFLOAD_BUNDLE__";
    let mut at = 0;
    while let Some(found) = find(&bytes[at..], b"\x7fELF").map(|f| f + at) {
        elf_hot_regions(bytes, found, &mut regions);
        at = found + 4;
    }
    let mut at = 0;
    while let Some(found) = find(&bytes[at..], magic).map(|f| f + at) {
        regions.push(found..(found + 256).min(bytes.len()));
        at = found + magic.len();
    }
    // A compressed bundle's header fields (version and method, sizes, the
    // hash) and the start of its compressed data.
    let mut at = 0;
    while let Some(found) = find(&bytes[at..], b"CCOB").map(|f| f + at) {
        for (start, end) in [(4, 8), (8, 16), (16, 24), (24, 88)] {
            regions.push(found + start..(found + end).min(bytes.len()));
        }
        at = found + 4;
    }
    regions.retain(|r| r.start < r.end && r.end <= bytes.len());
    regions
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The file range of a code object's NT_AMDGPU_METADATA note description.
pub fn metadata_note(bytes: &[u8]) -> Option<Range<usize>> {
    for (_, range, kind) in elf_sections(bytes)? {
        if kind != 7 {
            continue; // SHT_NOTE
        }
        let mut at = range.start;
        while at + 12 <= range.end {
            let (name_size, desc_size, note_type) =
                (u32_at(bytes, at)?, u32_at(bytes, at + 4)?, u32_at(bytes, at + 8)?);
            let name_start = at + 12;
            let desc_start = name_start + name_size.div_ceil(4) * 4;
            let name = bytes.get(name_start..name_start + name_size)?;
            if name.starts_with(b"AMDGPU") && note_type == 32 {
                return Some(desc_start..desc_start + desc_size);
            }
            at = desc_start + desc_size.div_ceil(4) * 4;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_seeds_and_regions() {
        for kind in ALL_KINDS {
            let seeds = seeds(kind).unwrap();
            assert!(!seeds.is_empty(), "{}", kind.name());
            for seed in &seeds {
                match kind {
                    Kind::Plan => {}
                    Kind::MetadataNote => assert!(seed.regions.only.as_ref().is_some_and(|r| r.len() > 100)),
                    _ => assert!(seed.regions.hot.len() > 3, "{}: {:?}", seed.name, seed.regions.hot),
                }
            }
        }
    }

    #[test]
    fn the_metadata_note_is_messagepack() {
        let seed = &seeds(Kind::MetadataNote).unwrap()[0];
        let note = seed.regions.only.clone().unwrap();
        // A MessagePack map holding "amdhsa.kernels".
        assert!(matches!(seed.bytes[note.start], 0x80..=0x8f | 0xde | 0xdf));
        assert!(find(&seed.bytes[note], b"amdhsa.kernels").is_some());
    }
}
