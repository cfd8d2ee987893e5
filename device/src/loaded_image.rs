//! Names of the kernels in code a runtime loaded: ROCr's loader copies a
//! code object's segments into one device buffer, and the first segment
//! starts with the ELF header, so the dynamic symbol table is there to read
//! (`PT_DYNAMIC` -> `DT_SYMTAB`, `DT_STRTAB`, `DT_HASH`). Used for messages
//! only: a kernel whose name cannot be found is named by its address.

use std::collections::HashMap;

const PT_DYNAMIC: u32 = 2;
const DT_HASH: u64 = 4;
const DT_STRTAB: u64 = 5;
const DT_SYMTAB: u64 = 6;
const DT_STRSZ: u64 = 10;
const SYMBOL_BYTES: usize = 24;

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// Kernel descriptor address -> kernel symbol name, for the image loaded
/// at `base` (`bytes` from `base` on). Empty if it is not an ELF image.
pub fn kernel_names(base: u64, bytes: &[u8]) -> HashMap<u64, String> {
    parse(base, bytes).unwrap_or_default()
}

fn parse(base: u64, image: &[u8]) -> Option<HashMap<u64, String>> {
    if image.get(..4)? != b"\x7fELF" || image.get(4)? != &2 {
        return None;
    }
    let program_headers = usize::try_from(u64_at(image, 0x20)?).ok()?;
    let entry_size = usize::from(u16_at(image, 0x36)?);
    let count = usize::from(u16_at(image, 0x38)?);
    let dynamic = (0..count).find_map(|k| {
        let at = program_headers + k * entry_size;
        (u32_at(image, at)? == PT_DYNAMIC).then(|| Some((u64_at(image, at + 0x10)?, u64_at(image, at + 0x28)?)))?
    })?;
    let (mut symtab, mut strtab, mut strsz, mut hash) = (None, None, None, None);
    let start = usize::try_from(dynamic.0).ok()?;
    for k in 0..(dynamic.1 as usize / 16) {
        let tag = u64_at(image, start + 16 * k)?;
        let value = u64_at(image, start + 16 * k + 8)?;
        match tag {
            0 => break,
            DT_SYMTAB => symtab = Some(value as usize),
            DT_STRTAB => strtab = Some(value as usize),
            DT_STRSZ => strsz = Some(value as usize),
            DT_HASH => hash = Some(value as usize),
            _ => {}
        }
    }
    let (symtab, strtab) = (symtab?, strtab?);
    let symbols = match hash {
        Some(hash) => u32_at(image, hash + 4)? as usize,
        None => strtab.checked_sub(symtab)? / SYMBOL_BYTES,
    };
    let strings = image.get(strtab..strtab + strsz.unwrap_or(image.len().saturating_sub(strtab)))?;
    let mut names = HashMap::new();
    for k in 0..symbols {
        let at = symtab + k * SYMBOL_BYTES;
        let name_offset = u32_at(image, at)? as usize;
        let value = u64_at(image, at + 8)?;
        let name = strings.get(name_offset..)?.split(|b| *b == 0).next()?;
        if let Some(kernel) = std::str::from_utf8(name).ok().and_then(|n| n.strip_suffix(".kd")) {
            names.insert(base + value, kernel.to_string());
        }
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_an_elf_image_names_nothing() {
        assert!(kernel_names(0x1000, b"not an image").is_empty());
        assert!(kernel_names(0x1000, b"\x7fELF\x02").is_empty());
    }
}
