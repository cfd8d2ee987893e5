//! Sizes as people write them. Also included (`#[path]`) by
//! `gpuinstr-run`, which links no part of the device.

/// A size as people write it: bytes, or a number with K, M or G (binary).
pub fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let (number, shift) = match text.char_indices().last()? {
        (at, 'K' | 'k') => (&text[..at], 10),
        (at, 'M' | 'm') => (&text[..at], 20),
        (at, 'G' | 'g') => (&text[..at], 30),
        _ => (text, 0),
    };
    number.trim().parse::<u64>().ok()?.checked_mul(1 << shift)
}
