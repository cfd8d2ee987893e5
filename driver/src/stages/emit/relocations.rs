//! Relocations written into the assembled object instead of the assembly.
//!
//! Every payload that reaches a tool's global computes its address from
//! the GOT (`s_getpc_b64` then `Counter@gotpcrel32@lo+4` and `@hi+12`):
//! two relocations per point, 109,414 `.reloc` lines for rocRAND's gfx90a
//! code object with the counter, which llvm-mc takes longer to read than
//! everything else. Only the first relocation of each kind and target per
//! section is written as text (the *anchor*); the others are kept here and
//! added to the relocatable's relocation section after llvm-mc ran, with
//! the symbol and addend llvm-mc chose for their anchor (it may relocate
//! against a section symbol) and their places from their functions'
//! symbols. Anything unexpected in the object is an error, and the caller
//! writes every relocation as text instead: slower, never different.

use std::collections::HashMap;

/// A relocation's place: `offset` bytes into the function whose symbol is
/// `functions[function]`.
#[derive(Clone, Copy, Debug)]
struct Place {
    function: usize,
    offset: usize,
}

#[derive(Debug)]
struct Anchor {
    place: Place,
    kind: u32,
    addend: i64,
    /// As the assembly names them, for the listing.
    kind_name: &'static str,
    symbol: String,
}

#[derive(Debug)]
struct Later {
    place: Place,
    anchor: usize,
    addend: i64,
}

/// Relocations kept out of the assembly, to add to the object.
#[derive(Debug, Default)]
pub struct DeferredRelocations {
    functions: Vec<String>,
    anchors: Vec<Anchor>,
    /// By (section of the code, kind), then target symbol: its anchor
    /// (looked up by `&str`: no key made per relocation).
    anchor_of: HashMap<(usize, &'static str), HashMap<String, usize>>,
    later: Vec<Later>,
}

/// ELF's number for an AMDGPU relocation kind llvm-mc's `.reloc` names.
fn kind_number(kind: &str) -> Option<u32> {
    Some(match kind {
        "R_AMDGPU_ABS32_LO" => 1,
        "R_AMDGPU_ABS32_HI" => 2,
        "R_AMDGPU_ABS64" => 3,
        "R_AMDGPU_REL32" => 4,
        "R_AMDGPU_REL64" => 5,
        "R_AMDGPU_ABS32" => 6,
        "R_AMDGPU_GOTPCREL" => 7,
        "R_AMDGPU_GOTPCREL32_LO" => 8,
        "R_AMDGPU_GOTPCREL32_HI" => 9,
        "R_AMDGPU_REL32_LO" => 10,
        "R_AMDGPU_REL32_HI" => 11,
        _ => return None,
    })
}

impl DeferredRelocations {
    /// A function whose code relocations are in, named by its symbol: its
    /// number for [`DeferredRelocations::keep`].
    pub fn start_function(&mut self, symbol: &str) -> usize {
        self.functions.push(symbol.to_string());
        self.functions.len() - 1
    }

    /// Whether the relocation is kept here (`section`: an index of the
    /// input's sections, the function's); the first of its kind and target
    /// in its section, and one of a kind not known here, are not: they
    /// are written as text.
    pub fn keep(
        &mut self,
        function: usize,
        section: usize,
        offset: usize,
        kind: &'static str,
        symbol: &str,
        addend: i64,
    ) -> bool {
        let Some(number) = kind_number(kind) else { return false };
        let place = Place { function, offset };
        let anchors = self.anchor_of.entry((section, kind)).or_default();
        match anchors.get(symbol) {
            Some(&anchor) => {
                self.later.push(Later { place, anchor, addend });
                true
            }
            None => {
                anchors.insert(symbol.to_string(), self.anchors.len());
                self.anchors.push(Anchor { place, kind: number, addend, kind_name: kind, symbol: symbol.to_string() });
                false
            }
        }
    }

    /// The kept relocations as the `.reloc` lines they stand for (a
    /// function's symbol for its label), one per line, for dumps.
    pub fn listing(&self) -> String {
        let mut out = String::new();
        for later in &self.later {
            let anchor = &self.anchors[later.anchor];
            let target = crate::stages::lift::line_encoding::target_expression(&anchor.symbol, later.addend);
            let function = &self.functions[later.place.function];
            out.push_str(&format!(".reloc {function}+{}, {}, {target}\n", later.place.offset, anchor.kind_name));
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.later.is_empty()
    }

    pub fn len(&self) -> usize {
        self.later.len()
    }

    /// `relocatable` (an ELF64 relocatable llvm-mc wrote from the assembly)
    /// with the kept relocations added to the relocation sections of their
    /// code: the new entries and section headers appended, the old section
    /// left unreferenced.
    pub fn add_to(&self, relocatable: &[u8]) -> Result<Vec<u8>, String> {
        if self.later.is_empty() {
            return Ok(relocatable.to_vec());
        }
        let elf = Elf::parse(relocatable)?;
        let symbols = elf.function_symbols(&self.functions)?;
        let place = |place: Place| -> Result<(u16, u64), String> {
            let (section, value) = symbols[place.function];
            Ok((section, value + place.offset as u64))
        };
        // Each anchor as llvm-mc wrote it: its section's relocations, its
        // symbol, and what its addend became.
        let mut anchors = Vec::with_capacity(self.anchors.len());
        for anchor in &self.anchors {
            let (section, offset) = place(anchor.place)?;
            let rela = elf.relocations_of(section)?;
            let entry = elf
                .entries(rela)
                .find(|e| e.offset == offset && e.kind == anchor.kind)
                .ok_or_else(|| format!("no relocation of kind {} at {offset:#x} in section {section}", anchor.kind))?;
            anchors.push((rela, entry.symbol, entry.addend - anchor.addend));
        }
        let mut added: std::collections::BTreeMap<usize, Vec<u8>> = std::collections::BTreeMap::new();
        for later in &self.later {
            let (rela, symbol, delta) = anchors[later.anchor];
            let (section, offset) = place(later.place)?;
            if elf.relocations_of(section)? != rela {
                return Err(format!("a relocation in section {section} has its anchor in another"));
            }
            let entry = Entry { offset, symbol, kind: self.anchors[later.anchor].kind, addend: later.addend + delta };
            entry.write(added.entry(rela).or_insert_with(|| Vec::with_capacity(self.later.len() * Entry::SIZE)));
        }
        elf.with_entries_added(&added)
    }
}

/// One ELF64 RELA entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    offset: u64,
    symbol: u32,
    kind: u32,
    addend: i64,
}

impl Entry {
    const SIZE: usize = 24;

    fn read(bytes: &[u8]) -> Entry {
        let info = u64_at(bytes, 8);
        Entry {
            offset: u64_at(bytes, 0),
            symbol: (info >> 32) as u32,
            kind: info as u32,
            addend: u64_at(bytes, 16) as i64,
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&((u64::from(self.symbol) << 32) | u64::from(self.kind)).to_le_bytes());
        out.extend_from_slice(&self.addend.to_le_bytes());
    }
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(bytes[at..at + 2].try_into().expect("2 bytes"))
}

const SHT_SYMTAB: u32 = 2;
const SHT_RELA: u32 = 4;
const SECTION_HEADER_SIZE: usize = 64;

#[derive(Clone, Copy, Debug)]
struct SectionHeader {
    kind: u32,
    offset: usize,
    size: usize,
    link: u32,
    info: u32,
}

/// The parts of an ELF64 little-endian relocatable read here, bounds
/// checked.
struct Elf<'a> {
    bytes: &'a [u8],
    headers_at: usize,
    sections: Vec<SectionHeader>,
}

impl<'a> Elf<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Elf<'a>, String> {
        if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 || bytes[5] != 1 {
            return Err("not an ELF64 little-endian object".into());
        }
        let headers_at = u64_at(bytes, 0x28) as usize;
        let (entry_size, count) = (usize::from(u16_at(bytes, 0x3a)), usize::from(u16_at(bytes, 0x3c)));
        if entry_size != SECTION_HEADER_SIZE
            || headers_at.checked_add(count * entry_size).is_none_or(|end| end > bytes.len())
        {
            return Err("its section headers are not where its header says".into());
        }
        let mut sections = Vec::with_capacity(count);
        for index in 0..count {
            let at = headers_at + index * SECTION_HEADER_SIZE;
            let header = SectionHeader {
                kind: u32_at(bytes, at + 4),
                offset: u64_at(bytes, at + 24) as usize,
                size: u64_at(bytes, at + 32) as usize,
                link: u32_at(bytes, at + 40),
                info: u32_at(bytes, at + 44),
            };
            if header.kind != 8 && header.offset.checked_add(header.size).is_none_or(|end| end > bytes.len()) {
                return Err(format!("section {index} runs past the file"));
            }
            sections.push(header);
        }
        Ok(Elf { bytes, headers_at, sections })
    }

    fn contents(&self, index: usize) -> &'a [u8] {
        let section = &self.sections[index];
        &self.bytes[section.offset..section.offset + section.size]
    }

    /// Each named function symbol's section and value.
    fn function_symbols(&self, names: &[String]) -> Result<Vec<(u16, u64)>, String> {
        let symtab = self.sections.iter().position(|s| s.kind == SHT_SYMTAB).ok_or("no symbol table")?;
        let strtab = self.sections[symtab].link as usize;
        if strtab >= self.sections.len() {
            return Err("the symbol table names no string table".into());
        }
        let (symbols, strings) = (self.contents(symtab), self.contents(strtab));
        let wanted: HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect();
        let mut found: Vec<Option<(u16, u64)>> = vec![None; names.len()];
        for symbol in symbols.chunks_exact(24) {
            let name_at = u32_at(symbol, 0) as usize;
            let Some(name) = strings.get(name_at..).and_then(|s| s.split(|b| *b == 0).next()) else { continue };
            let Some(&index) = std::str::from_utf8(name).ok().and_then(|n| wanted.get(n)) else { continue };
            if found[index].is_some() {
                return Err(format!("symbol `{}` is defined twice", names[index]));
            }
            found[index] = Some((u16_at(symbol, 6), u64_at(symbol, 8)));
        }
        found
            .into_iter()
            .zip(names)
            .map(|(f, name)| f.ok_or_else(|| format!("no symbol `{name}` in the object")))
            .collect()
    }

    /// The relocation section of `section`.
    fn relocations_of(&self, section: u16) -> Result<usize, String> {
        let mut found =
            self.sections.iter().enumerate().filter(|(_, s)| s.kind == SHT_RELA && s.info == u32::from(section));
        let (index, _) = found.next().ok_or_else(|| format!("section {section} has no relocation section"))?;
        if found.next().is_some() {
            return Err(format!("section {section} has two relocation sections"));
        }
        Ok(index)
    }

    fn entries(&self, rela: usize) -> impl Iterator<Item = Entry> + 'a {
        self.contents(rela).chunks_exact(Entry::SIZE).map(Entry::read)
    }

    /// The file with `added` entries after each relocation section's own:
    /// those sections' new contents and a new copy of the section headers
    /// appended, the header pointing at it.
    fn with_entries_added(&self, added: &std::collections::BTreeMap<usize, Vec<u8>>) -> Result<Vec<u8>, String> {
        // Sized once: a part's relocations are tens of MB (page faults and
        // copies when grown by doubling).
        let grown: usize = added.iter().map(|(rela, entries)| 8 + self.contents(*rela).len() + entries.len()).sum();
        let mut out = Vec::with_capacity(self.bytes.len() + grown + 8 + self.sections.len() * SECTION_HEADER_SIZE);
        out.extend_from_slice(self.bytes);
        let mut headers =
            self.bytes[self.headers_at..self.headers_at + self.sections.len() * SECTION_HEADER_SIZE].to_vec();
        for (&rela, entries) in added {
            out.resize(out.len().next_multiple_of(8), 0);
            let (offset, old) = (out.len(), self.contents(rela));
            out.extend_from_slice(old);
            out.extend_from_slice(entries);
            let header = &mut headers[rela * SECTION_HEADER_SIZE..(rela + 1) * SECTION_HEADER_SIZE];
            header[24..32].copy_from_slice(&(offset as u64).to_le_bytes());
            header[32..40].copy_from_slice(&((old.len() + entries.len()) as u64).to_le_bytes());
        }
        out.resize(out.len().next_multiple_of(8), 0);
        let headers_at = out.len() as u64;
        out.extend_from_slice(&headers);
        out[0x28..0x30].copy_from_slice(&headers_at.to_le_bytes());
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_of_each_kind_and_target_is_written_and_the_others_kept() {
        let mut deferred = DeferredRelocations::default();
        let f = deferred.start_function("kernel");
        assert!(!deferred.keep(f, 1, 52, "R_AMDGPU_GOTPCREL32_LO", "Counter", 4));
        assert!(!deferred.keep(f, 1, 60, "R_AMDGPU_GOTPCREL32_HI", "Counter", 12));
        assert!(deferred.keep(f, 1, 176, "R_AMDGPU_GOTPCREL32_LO", "Counter", 4));
        // Another target, another section, an unknown kind: written.
        assert!(!deferred.keep(f, 1, 200, "R_AMDGPU_GOTPCREL32_LO", "Other", 4));
        assert!(!deferred.keep(f, 2, 300, "R_AMDGPU_GOTPCREL32_LO", "Counter", 4));
        assert!(!deferred.keep(f, 1, 400, "R_AMDGPU_NEW_KIND", "Counter", 0));
        assert_eq!(deferred.len(), 1);
    }

    #[test]
    fn what_is_not_an_elf_object_is_refused() {
        let mut deferred = DeferredRelocations::default();
        let f = deferred.start_function("kernel");
        deferred.keep(f, 1, 0, "R_AMDGPU_REL32_LO", "x", 0);
        deferred.keep(f, 1, 8, "R_AMDGPU_REL32_LO", "x", 0);
        assert!(deferred.add_to(b"not an object").is_err());
        let mut header = vec![0u8; 64];
        header[..6].copy_from_slice(b"\x7fELF\x02\x01");
        header[0x28..0x30].copy_from_slice(&1000u64.to_le_bytes());
        header[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        header[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        assert!(deferred.add_to(&header).unwrap_err().contains("section headers"));
    }
}
