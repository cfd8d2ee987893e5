//! Clang offload bundles (`__CLANG_OFFLOAD_BUNDLE__`) and the `.hip_fatbin`
//! sections that hold them back to back.
//!
//! Layout: 24-byte magic, u64 entry count, then per entry u64 offset (from
//! the bundle start), u64 size, u64 triple length and the triple
//! (`hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-`). All little-endian.

use std::borrow::Cow;

use super::compressed_bundle::{self, Compression};
use crate::error::LoadProblem;

pub const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
/// Compressed bundles (clang 17+ `--offload-compress`).
pub const COMPRESSED_BUNDLE_MAGIC: &[u8] = compressed_bundle::MAGIC;

/// One entry of a bundle: its bytes (borrowed from the input, or owned
/// when the bundle was compressed) and where they start in the bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleEntry<'a> {
    pub triple: String,
    pub bytes: Cow<'a, [u8]>,
    pub offset: usize,
}

/// A parsed bundle, its size in bytes in the input, and how it was
/// compressed (None for a plain bundle).
pub struct Bundle<'a> {
    pub entries: Vec<BundleEntry<'a>>,
    pub size: usize,
    pub compression: Option<Compression>,
}

fn read_u64(data: &[u8], at: usize) -> Result<u64, LoadProblem> {
    data.get(at..at + 8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .ok_or_else(|| LoadProblem::MalformedBundle(format!("header ends at byte {at}")))
}

/// Parses the bundle at the start of `data`, decompressing it first if it
/// is compressed.
pub fn parse_bundle(data: &[u8]) -> Result<Bundle<'_>, LoadProblem> {
    if data.starts_with(COMPRESSED_BUNDLE_MAGIC) {
        let decompressed = compressed_bundle::decompress(data)?;
        let inner = parse_plain_bundle(&decompressed.bundle)?;
        let entries = inner
            .entries
            .into_iter()
            .map(|e| BundleEntry { triple: e.triple, bytes: Cow::Owned(e.bytes.into_owned()), offset: e.offset })
            .collect();
        return Ok(Bundle { entries, size: decompressed.size, compression: Some(decompressed.compression) });
    }
    parse_plain_bundle(data)
}

/// Parses the uncompressed bundle at the start of `data`.
fn parse_plain_bundle(data: &[u8]) -> Result<Bundle<'_>, LoadProblem> {
    if !data.starts_with(BUNDLE_MAGIC) {
        return Err(LoadProblem::MalformedBundle("missing __CLANG_OFFLOAD_BUNDLE__ magic".into()));
    }
    let count = read_u64(data, BUNDLE_MAGIC.len())?;
    // Each entry header takes at least 24 bytes: bound the count by the data.
    if count > (data.len() / 24) as u64 {
        return Err(LoadProblem::MalformedBundle(format!("entry count {count} exceeds the data")));
    }
    let mut at = BUNDLE_MAGIC.len() + 8;
    let mut entries = Vec::new();
    let mut size = at;
    for index in 0..count {
        let offset = read_u64(data, at)? as usize;
        let length = read_u64(data, at + 8)? as usize;
        let triple_length = read_u64(data, at + 16)? as usize;
        at += 24;
        let triple = data
            .get(at..at.saturating_add(triple_length))
            .ok_or_else(|| LoadProblem::MalformedBundle(format!("entry {index}: triple runs past the end")))?;
        at += triple_length;
        let triple = String::from_utf8_lossy(triple).into_owned();
        let end = offset
            .checked_add(length)
            .filter(|end| *end <= data.len())
            .ok_or_else(|| LoadProblem::MalformedBundle(format!("entry {index} ({triple}) runs past the end")))?;
        size = size.max(end).max(at);
        entries.push(BundleEntry { triple, bytes: Cow::Borrowed(&data[offset..end]), offset });
    }
    Ok(Bundle { entries, size, compression: None })
}

/// Splits a `.hip_fatbin` section into its bundles: each starts with the
/// magic, on a 4096-byte boundary for hipcc, but only the magic is relied on.
pub fn split_fatbin(section: &[u8]) -> Result<Vec<Bundle<'_>>, LoadProblem> {
    Ok(fatbin_bundles(section)?.into_iter().map(|(_, bundle)| bundle).collect())
}

/// The bundles of a `.hip_fatbin` section with their offsets in it.
pub fn fatbin_bundles(section: &[u8]) -> Result<Vec<(usize, Bundle<'_>)>, LoadProblem> {
    let mut bundles = Vec::new();
    let mut at = 0;
    while let Some(found) = find(&section[at..], BUNDLE_MAGIC).or_else(|| find(&section[at..], COMPRESSED_BUNDLE_MAGIC))
    {
        let start = at + found;
        let bundle = parse_bundle(&section[start..])?;
        at = start + bundle.size.max(BUNDLE_MAGIC.len());
        bundles.push((start, bundle));
        if at >= section.len() {
            break;
        }
    }
    if bundles.is_empty() {
        return Err(LoadProblem::EmptyFatbin);
    }
    Ok(bundles)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut header = BUNDLE_MAGIC.to_vec();
        header.extend((entries.len() as u64).to_le_bytes());
        let header_size: usize = header.len() + entries.iter().map(|(t, _)| 24 + t.len()).sum::<usize>();
        let mut offset = header_size;
        for (triple, bytes) in entries {
            header.extend((offset as u64).to_le_bytes());
            header.extend((bytes.len() as u64).to_le_bytes());
            header.extend((triple.len() as u64).to_le_bytes());
            header.extend(triple.as_bytes());
            offset += bytes.len();
        }
        for (_, bytes) in entries {
            header.extend(*bytes);
        }
        header
    }

    #[test]
    fn parses_entries() {
        let data = bundle(&[("host-x86_64-unknown-linux", b""), ("hipv4-amdgcn-amd-amdhsa--gfx90a", b"ELFDATA")]);
        let parsed = parse_bundle(&data).unwrap();
        assert_eq!(parsed.entries.len(), 2);
        assert_eq!(parsed.entries[1].triple, "hipv4-amdgcn-amd-amdhsa--gfx90a");
        assert_eq!(&*parsed.entries[1].bytes, b"ELFDATA");
        assert_eq!(parsed.size, data.len());
    }

    #[test]
    fn splits_back_to_back_bundles_on_page_boundaries() {
        let mut section = bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx908", b"one")]);
        section.resize(4096, 0);
        section.extend(bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx90a", b"two")]));
        let bundles = split_fatbin(&section).unwrap();
        assert_eq!(bundles.len(), 2);
        assert_eq!(&*bundles[1].entries[0].bytes, b"two");
    }

    #[test]
    fn truncated_bundles_are_errors_not_panics() {
        let data = bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx90a", b"ELFDATA")]);
        for cut in 0..data.len() - 1 {
            let result = parse_bundle(&data[..cut]);
            assert!(result.is_err(), "cut at {cut} parsed");
        }
        assert_eq!(split_fatbin(b"nothing here").err(), Some(LoadProblem::EmptyFatbin));
        assert!(matches!(parse_bundle(b"CCOB....").err(), Some(LoadProblem::CompressedBundle(_))));
    }
}
