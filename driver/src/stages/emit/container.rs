//! Putting instrumented code objects back where the application's came
//! from: an offload bundle (entries replaced, offsets recomputed) or a host
//! ELF file's `.hip_fatbin` (bundles rewritten, the section moved to a new
//! read-only segment at the end of the file, every `__hip_fatbin_wrapper`
//! pointed at its new bundle), so the application runs as before with its
//! device code instrumented.

use std::collections::HashMap;

use thiserror::Error;

use crate::stages::load::bundle::{fatbin_bundles, parse_bundle, Bundle, BUNDLE_MAGIC};

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ContainerError {
    #[error("the offload bundle cannot be read: {0}")]
    Bundle(String),
    #[error("the host file is not a 64-bit little-endian ELF file gpuinstr can rewrite: {0}")]
    Elf(String),
    #[error("a __hip_fatbin_wrapper points at {0:#x}, which is not the start of a bundle in .hip_fatbin")]
    Wrapper(u64),
}

/// An instrumented code object kept for the output: in memory, or in an
/// unnamed temporary file (gone when closed, even if the process dies), so
/// that a whole library's outputs (gigabytes) are not held at once.
pub enum Stored {
    Memory(Vec<u8>),
    File { file: std::fs::File, len: u64 },
}

impl Stored {
    /// Keeps `bytes`, on disk when `on_disk`.
    pub fn keep(bytes: Vec<u8>, on_disk: bool) -> std::io::Result<Stored> {
        if !on_disk {
            return Ok(Stored::Memory(bytes));
        }
        use std::io::Write;
        let mut file = tempfile::tempfile()?;
        file.write_all(&bytes)?;
        Ok(Stored::File { file, len: bytes.len() as u64 })
    }

    pub fn len(&self) -> u64 {
        match self {
            Stored::Memory(bytes) => bytes.len() as u64,
            Stored::File { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn write_to(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        match self {
            Stored::Memory(bytes) => out.write_all(bytes),
            Stored::File { file, len } => {
                use std::os::unix::fs::FileExt;
                let mut buffer = vec![0u8; 1 << 20];
                let mut at = 0u64;
                while at < *len {
                    let want = buffer.len().min((*len - at) as usize);
                    file.read_exact_at(&mut buffer[..want], at)?;
                    out.write_all(&buffer[..want])?;
                    at += want as u64;
                }
                Ok(())
            }
        }
    }
}

/// One part of an output file.
pub enum Piece<'a> {
    Bytes(Vec<u8>),
    Borrowed(&'a [u8]),
    Zeros(u64),
    Stored(&'a Stored),
}

/// A file's contents as pieces in order, written without assembling the
/// whole file in memory (an instrumented library is gigabytes).
#[derive(Default)]
pub struct Pieces<'a> {
    pieces: Vec<Piece<'a>>,
    len: u64,
}

impl<'a> Pieces<'a> {
    pub fn push(&mut self, piece: Piece<'a>) {
        self.len += match &piece {
            Piece::Bytes(bytes) => bytes.len() as u64,
            Piece::Borrowed(bytes) => bytes.len() as u64,
            Piece::Zeros(count) => *count,
            Piece::Stored(stored) => stored.len(),
        };
        self.pieces.push(piece);
    }

    pub fn append(&mut self, other: Pieces<'a>) {
        for piece in other.pieces {
            self.push(piece);
        }
    }

    /// Zeros up to `at` bytes (nothing if already there).
    pub fn pad_to(&mut self, at: u64) {
        if at > self.len {
            self.push(Piece::Zeros(at - self.len));
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn write_to(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        for piece in &self.pieces {
            match piece {
                Piece::Bytes(bytes) => out.write_all(bytes)?,
                Piece::Borrowed(bytes) => out.write_all(bytes)?,
                Piece::Zeros(count) => {
                    let zeros = [0u8; 4096];
                    let mut left = *count;
                    while left > 0 {
                        let now = left.min(zeros.len() as u64) as usize;
                        out.write_all(&zeros[..now])?;
                        left -= now as u64;
                    }
                }
                Piece::Stored(stored) => stored.write_to(out)?,
            }
        }
        Ok(())
    }

    pub fn to_vec(&self) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len as usize);
        self.write_to(&mut out)?;
        Ok(out)
    }

    /// `base` with the bytes at some offsets replaced (`patches`); two
    /// that overlap, or one past the end, is an error (a damaged file whose
    /// words would otherwise be patched in part).
    fn patched(
        base: &'a [u8],
        patches: &std::collections::BTreeMap<usize, Vec<u8>>,
    ) -> Result<Pieces<'a>, ContainerError> {
        let mut out = Pieces::default();
        let mut at = 0;
        for (offset, bytes) in patches {
            let (offset, end) = (*offset, offset + bytes.len());
            if offset < at || end > base.len() {
                return Err(ContainerError::Elf(format!(
                    "the words to rewrite at {offset:#x} overlap another or run past the end of the file"
                )));
            }
            out.push(Piece::Borrowed(&base[at..offset]));
            out.push(Piece::Bytes(bytes.clone()));
            at = end;
        }
        out.push(Piece::Borrowed(&base[at..]));
        Ok(out)
    }
}

/// A bundle with some entries replaced: `replacements` by entry index.
/// Entries keep their order and triples; each starts on the alignment the
/// original entries shared (4,096 bytes for hipcc's), at most 4,096. A
/// compressed bundle is compressed again, as it was.
pub fn rewrite_bundle<'a>(
    bundle: &'a [u8],
    replacements: &HashMap<usize, &'a Stored>,
) -> Result<Pieces<'a>, ContainerError> {
    let parsed = parse_bundle(bundle).map_err(|e| ContainerError::Bundle(e.to_string()))?;
    let rewritten = rewrite_entries(&parsed, replacements);
    match parsed.compression {
        None => Ok(rewritten),
        Some(compression) => {
            let plain = rewritten.to_vec().map_err(|e| ContainerError::Bundle(format!("reading back: {e}")))?;
            let mut out = Pieces::default();
            out.push(Piece::Bytes(crate::stages::load::compressed_bundle::compress(&plain, compression)));
            Ok(out)
        }
    }
}

/// The plain bundle of `parsed`'s entries with `replacements`.
fn rewrite_entries<'a>(parsed: &Bundle<'a>, replacements: &HashMap<usize, &'a Stored>) -> Pieces<'a> {
    let offsets: Vec<usize> = parsed.entries.iter().map(|e| e.offset).collect();
    let alignment = offsets
        .iter()
        .zip(&parsed.entries)
        .filter(|(_, e)| !e.bytes.is_empty())
        .map(|(o, _)| if *o == 0 { 4096 } else { 1usize << o.trailing_zeros().min(12) })
        .min()
        .unwrap_or(1) as u64;
    let mut header = BUNDLE_MAGIC.to_vec();
    header.extend((parsed.entries.len() as u64).to_le_bytes());
    let header_size = header.len() + parsed.entries.iter().map(|e| 24 + e.triple.len()).sum::<usize>();
    let contents: Vec<Piece<'a>> = parsed
        .entries
        .iter()
        .enumerate()
        .map(|(index, entry)| match (replacements.get(&index), &entry.bytes) {
            (Some(stored), _) => Piece::Stored(stored),
            (None, std::borrow::Cow::Borrowed(bytes)) => Piece::Borrowed(bytes),
            (None, std::borrow::Cow::Owned(bytes)) => Piece::Bytes(bytes.clone()),
        })
        .collect();
    let length = |piece: &Piece<'_>| match piece {
        Piece::Stored(stored) => stored.len(),
        Piece::Borrowed(bytes) => bytes.len() as u64,
        _ => 0,
    };
    let mut at = header_size as u64;
    let mut placed = Vec::with_capacity(contents.len());
    for content in &contents {
        if length(content) > 0 {
            at = at.div_ceil(alignment) * alignment;
        }
        placed.push(at);
        at += length(content);
    }
    for ((entry, content), offset) in parsed.entries.iter().zip(&contents).zip(&placed) {
        header.extend(offset.to_le_bytes());
        header.extend(length(content).to_le_bytes());
        header.extend((entry.triple.len() as u64).to_le_bytes());
        header.extend(entry.triple.as_bytes());
    }
    let mut out = Pieces::default();
    out.push(Piece::Bytes(header));
    for (content, offset) in contents.into_iter().zip(&placed) {
        out.pad_to(*offset);
        out.push(content);
    }
    out
}

fn u16_at(data: &[u8], at: usize) -> Result<u16, ContainerError> {
    data.get(at..at + 2)
        .map(|b| u16::from_le_bytes(b.try_into().expect("2 bytes")))
        .ok_or_else(|| ContainerError::Elf(format!("truncated at byte {at}")))
}

fn u32_at(data: &[u8], at: usize) -> Result<u32, ContainerError> {
    data.get(at..at + 4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        .ok_or_else(|| ContainerError::Elf(format!("truncated at byte {at}")))
}

fn u64_at(data: &[u8], at: usize) -> Result<u64, ContainerError> {
    data.get(at..at + 8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .ok_or_else(|| ContainerError::Elf(format!("truncated at byte {at}")))
}

fn put_u64_in(data: &mut [u8], at: usize, value: u64) {
    data[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

/// One section header of the host file.
struct SectionHeader {
    /// Where the header is in the file.
    at: usize,
    name: String,
    kind: u32,
    address: u64,
    offset: u64,
    size: u64,
    link: u32,
}

const PT_LOAD: u32 = 1;
const PT_PHDR: u32 = 6;
const SHT_RELA: u32 = 4;
const SHT_NOBITS: u32 = 8;
const ET_REL: u16 = 1;
const R_X86_64_64: u32 = 1;
const R_X86_64_RELATIVE: u32 = 8;
const PAGE: u64 = 0x1000;
const WRAPPER_MAGIC: u32 = 0x4849_5046; // "FPIH" in memory: __hip_fatbin_wrapper

fn sections(elf: &[u8]) -> Result<Vec<SectionHeader>, ContainerError> {
    let shoff = u64_at(elf, 0x28)? as usize;
    let shentsize = u16_at(elf, 0x3a)? as usize;
    let shnum = u16_at(elf, 0x3c)? as usize;
    let shstrndx = u16_at(elf, 0x3e)? as usize;
    if shentsize != 64 || shnum == 0 || shstrndx >= shnum {
        return Err(ContainerError::Elf("unexpected section header table".into()));
    }
    let names_at = u64_at(elf, shoff + shstrndx * 64 + 0x18)? as usize;
    let mut out = Vec::with_capacity(shnum);
    for index in 0..shnum {
        let at = shoff + index * 64;
        let name_offset = u32_at(elf, at)? as usize;
        let name_start = names_at + name_offset;
        let name_end = elf
            .get(name_start..)
            .and_then(|rest| rest.iter().position(|b| *b == 0))
            .ok_or_else(|| ContainerError::Elf("a section name runs past the end".into()))?;
        out.push(SectionHeader {
            at,
            name: String::from_utf8_lossy(&elf[name_start..name_start + name_end]).into_owned(),
            kind: u32_at(elf, at + 4)?,
            address: u64_at(elf, at + 0x10)?,
            offset: u64_at(elf, at + 0x18)?,
            size: u64_at(elf, at + 0x20)?,
            link: u32_at(elf, at + 0x28)?,
        });
    }
    Ok(out)
}

/// The host file with each `.hip_fatbin` bundle replaced by `bundles[i]`
/// (in the order `split_fatbin` finds them).
/// How far a host file's memory image may reach past the file's end (its
/// .bss) before the file is taken for damaged.
const MAX_IMAGE_PAST_FILE: u64 = 1 << 30;

pub fn rewrite_host_file<'a>(elf: &'a [u8], bundles: Vec<Pieces<'a>>) -> Result<Pieces<'a>, ContainerError> {
    if elf.len() < 64 || &elf[..4] != b"\x7fELF" || elf[4] != 2 || elf[5] != 1 {
        return Err(ContainerError::Elf("not ELF64 little-endian".into()));
    }
    let headers = sections(elf)?;
    let fatbin = headers
        .iter()
        .position(|s| s.name == ".hip_fatbin")
        .ok_or_else(|| ContainerError::Elf("no .hip_fatbin section".into()))?;
    let old = &headers[fatbin];
    let old_data = elf
        .get(old.offset as usize..(old.offset + old.size) as usize)
        .ok_or_else(|| ContainerError::Elf(".hip_fatbin lies outside the file".into()))?;
    let found = fatbin_bundles(old_data).map_err(|e| ContainerError::Bundle(e.to_string()))?;
    if found.len() != bundles.len() {
        return Err(ContainerError::Bundle(format!("{} bundles given for {}", bundles.len(), found.len())));
    }
    // The new section: bundles on 4,096-byte boundaries, as hipcc lays them out.
    let mut data = Pieces::default();
    let mut new_starts = Vec::with_capacity(bundles.len());
    for bundle in bundles {
        data.pad_to(data.len().div_ceil(PAGE) * PAGE);
        new_starts.push(data.len());
        data.append(bundle);
    }
    let relocated: HashMap<u64, u64> =
        found.iter().map(|(start, _)| *start as u64).zip(new_starts.iter().copied()).collect();

    // The input with some words changed (`put`), then what is appended.
    let mut patches: std::collections::BTreeMap<usize, Vec<u8>> = std::collections::BTreeMap::new();
    let mut put_u64 = |at: usize, value: u64| {
        patches.insert(at, value.to_le_bytes().to_vec());
    };
    let kind = u16_at(elf, 0x10)?;
    if kind == ET_REL {
        // A relocatable object: the section's data moves to the end of the
        // file; relocations against it are by section offset.
        let offset = (elf.len() as u64).div_ceil(PAGE) * PAGE;
        put_u64(old.at + 0x18, offset);
        put_u64(old.at + 0x20, data.len());
        for rela in headers.iter().filter(|s| s.kind == SHT_RELA) {
            let symbols = &headers
                .get(rela.link as usize)
                .ok_or_else(|| ContainerError::Elf("a relocation section without its symbol table".into()))?;
            for entry in 0..(rela.size / 24) as usize {
                let at = rela.offset as usize + entry * 24;
                let info = u64_at(elf, at + 8)?;
                if info as u32 != R_X86_64_64 {
                    continue;
                }
                let symbol = symbols.offset as usize + (info >> 32) as usize * 24;
                let section_index = u16_at(elf, symbol + 6)? as usize;
                let symbol_value = u64_at(elf, symbol + 8)?;
                if section_index != fatbin {
                    continue;
                }
                let addend = u64_at(elf, at + 16)?.wrapping_add(symbol_value);
                let new = relocated.get(&addend).ok_or(ContainerError::Wrapper(addend))?;
                put_u64(at + 16, new.wrapping_sub(symbol_value));
            }
        }
        let mut out = Pieces::patched(elf, &patches)?;
        out.pad_to(offset);
        out.append(data);
        return Ok(out);
    }

    // A linked file: a new PT_LOAD at the end maps the new section and the
    // program header table (moved there to make room for the new entry).
    let phoff = u64_at(elf, 0x20)? as usize;
    let phentsize = u16_at(elf, 0x36)? as usize;
    let phnum = u16_at(elf, 0x38)? as usize;
    if phentsize != 56 {
        return Err(ContainerError::Elf("unexpected program header size".into()));
    }
    let mut program_headers: Vec<Vec<u8>> = (0..phnum)
        .map(|i| elf.get(phoff + i * 56..phoff + (i + 1) * 56).map(<[u8]>::to_vec))
        .collect::<Option<_>>()
        .ok_or_else(|| ContainerError::Elf("the program header table runs past the end".into()))?;
    let mut end_of_memory = 0u64;
    for header in &program_headers {
        if u32_at(header, 0)? == PT_LOAD {
            let end = u64_at(header, 0x10)?.checked_add(u64_at(header, 0x28)?);
            end_of_memory = end_of_memory.max(end.unwrap_or(u64::MAX));
        }
    }
    // File offset == virtual address: also right where the kernel computes
    // the program headers' address from e_phoff. The file grows to the end
    // of the memory image, so an image far larger than the file (a damaged
    // segment size) is refused rather than written out.
    if end_of_memory > elf.len() as u64 + MAX_IMAGE_PAST_FILE {
        return Err(ContainerError::Elf(format!(
            "a loadable segment ends at {end_of_memory:#x}, more than 1 GiB past the end of the file ({} bytes); \
             the file is damaged",
            elf.len()
        )));
    }
    let start = end_of_memory.max(elf.len() as u64).div_ceil(PAGE) * PAGE;
    let table = (start + data.len()).div_ceil(8) * 8;
    let table_size = ((phnum + 1) * 56) as u64;
    let mut segment = vec![0u8; 56];
    segment[0..4].copy_from_slice(&PT_LOAD.to_le_bytes());
    segment[4..8].copy_from_slice(&4u32.to_le_bytes()); // PF_R
    put_u64_in(&mut segment, 0x08, start);
    put_u64_in(&mut segment, 0x10, start);
    put_u64_in(&mut segment, 0x18, start);
    put_u64_in(&mut segment, 0x20, table + table_size - start);
    put_u64_in(&mut segment, 0x28, table + table_size - start);
    put_u64_in(&mut segment, 0x30, PAGE);
    let last_load = program_headers.iter().rposition(|h| u32_at(h, 0).ok() == Some(PT_LOAD)).unwrap_or(0);
    program_headers.insert(last_load + 1, segment);
    for header in program_headers.iter_mut() {
        if u32_at(header, 0)? == PT_PHDR {
            put_u64_in(header, 0x08, table);
            put_u64_in(header, 0x10, table);
            put_u64_in(header, 0x18, table);
            put_u64_in(header, 0x20, table_size);
            put_u64_in(header, 0x28, table_size);
        }
    }
    put_u64(0x20, table);
    put_u64(old.at + 0x10, start);
    put_u64(old.at + 0x18, start);
    put_u64(old.at + 0x20, data.len());

    // Every wrapper points at its bundle's new address: in place (absolute
    // in executables) and in its R_X86_64_RELATIVE relocation (libraries).
    let address_to_offset = |address: u64| -> Option<usize> {
        headers
            .iter()
            .find(|s| s.kind != SHT_NOBITS && s.address != 0 && address >= s.address && address < s.address + s.size)
            .map(|s| (s.offset + (address - s.address)) as usize)
    };
    let mut pointer_slots: HashMap<u64, u64> = HashMap::new(); // slot address -> new pointer
    for segment in headers.iter().filter(|s| s.name == ".hipFatBinSegment") {
        for wrapper in 0..(segment.size / 24) as usize {
            let at = segment.offset as usize + wrapper * 24;
            if u32_at(elf, at)? != WRAPPER_MAGIC {
                continue;
            }
            let slot = segment.address + (wrapper * 24 + 8) as u64;
            let pointer = u64_at(elf, at + 8)?;
            let relative = pointer.wrapping_sub(old.address);
            if let Some(new) = relocated.get(&relative) {
                put_u64(at + 8, start + new);
                pointer_slots.insert(slot, start + new);
            } else if pointer != 0 {
                return Err(ContainerError::Wrapper(pointer));
            } else {
                pointer_slots.insert(slot, u64::MAX); // filled by a relocation
            }
        }
    }
    for rela in headers.iter().filter(|s| s.kind == SHT_RELA) {
        for entry in 0..(rela.size / 24) as usize {
            let at = rela.offset as usize + entry * 24;
            let slot = u64_at(elf, at)?;
            if u64_at(elf, at + 8)? as u32 != R_X86_64_RELATIVE || !pointer_slots.contains_key(&slot) {
                continue;
            }
            let addend = u64_at(elf, at + 16)?;
            let new = relocated.get(&addend.wrapping_sub(old.address)).ok_or(ContainerError::Wrapper(addend))?;
            put_u64(at + 16, start + new);
            if let Some(offset) = address_to_offset(slot) {
                put_u64(offset, start + new);
            }
        }
    }
    // e_phnum: two bytes after e_phentsize.
    let mut header_end = elf[0x36..0x3a].to_vec();
    header_end[2..4].copy_from_slice(&((phnum + 1) as u16).to_le_bytes());
    patches.insert(0x36, header_end);
    let mut out = Pieces::patched(elf, &patches)?;
    out.pad_to(start);
    out.append(data);
    out.pad_to(table);
    out.push(Piece::Bytes(program_headers.concat()));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(entries: &[(&str, &[u8])], alignment: usize) -> Vec<u8> {
        let mut header = BUNDLE_MAGIC.to_vec();
        header.extend((entries.len() as u64).to_le_bytes());
        let mut at = header.len() + entries.iter().map(|(t, _)| 24 + t.len()).sum::<usize>();
        let mut offsets = Vec::new();
        for (_, bytes) in entries {
            if !bytes.is_empty() {
                at = at.div_ceil(alignment) * alignment;
            }
            offsets.push(at);
            at += bytes.len();
        }
        for ((triple, bytes), offset) in entries.iter().zip(&offsets) {
            header.extend((*offset as u64).to_le_bytes());
            header.extend((bytes.len() as u64).to_le_bytes());
            header.extend((triple.len() as u64).to_le_bytes());
            header.extend(triple.as_bytes());
        }
        for ((_, bytes), offset) in entries.iter().zip(&offsets) {
            header.resize(*offset, 0);
            header.extend_from_slice(bytes);
        }
        header
    }

    #[test]
    fn bundles_are_rewritten_with_their_layout() {
        let original =
            bundle(&[("host-x86_64-unknown-linux", b""), ("hipv4-amdgcn-amd-amdhsa--gfx90a", b"ELF1")], 4096);
        // Unchanged: byte for byte.
        assert_eq!(rewrite_bundle(&original, &HashMap::new()).unwrap().to_vec().unwrap(), original);
        let bigger = vec![7u8; 5000];
        // The same, from memory or from a file.
        for on_disk in [false, true] {
            let stored = Stored::keep(bigger.clone(), on_disk).unwrap();
            let rewritten = rewrite_bundle(&original, &HashMap::from([(1, &stored)])).unwrap().to_vec().unwrap();
            let parsed = parse_bundle(&rewritten).unwrap();
            assert_eq!(parsed.entries[1].triple, "hipv4-amdgcn-amd-amdhsa--gfx90a");
            assert_eq!(parsed.entries[1].bytes, &bigger[..]);
            assert_eq!((parsed.entries[1].bytes.as_ptr() as usize - rewritten.as_ptr() as usize) % 4096, 0);
        }
    }

    #[test]
    fn pieces_patch_their_base_and_pad() {
        let base = b"abcdefgh";
        let patches = std::collections::BTreeMap::from([(2, b"XY".to_vec()), (6, b"Z".to_vec())]);
        let mut pieces = Pieces::patched(base, &patches).unwrap();
        pieces.pad_to(12);
        pieces.push(Piece::Bytes(b"!".to_vec()));
        assert_eq!(pieces.len(), 13);
        assert_eq!(pieces.to_vec().unwrap(), b"abXYefZh\0\0\0\0!");
        // Overlapping words, or one past the end: refused, never half done.
        let overlapping = std::collections::BTreeMap::from([(2, b"XYZ".to_vec()), (4, b"W".to_vec())]);
        assert!(Pieces::patched(base, &overlapping).is_err());
        let past = std::collections::BTreeMap::from([(7, b"XY".to_vec())]);
        assert!(Pieces::patched(base, &past).is_err());
    }
}
