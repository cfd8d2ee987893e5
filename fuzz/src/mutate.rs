//! Deterministic mutations: case N of a kind is always the same input, so a
//! crash found in a long run is reproduced by its number alone.

use std::ops::Range;

/// splitmix64: small, fast, and the same on every machine.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The generator of case `index` of the kind named `kind`.
    pub fn for_case(kind: &str, index: u64) -> Rng {
        let name = kind.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        Rng(name ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when n is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Values that tend to matter in headers: sizes, counts, offsets, signs.
const INTERESTING_32: [u32; 14] =
    [0, 1, 2, 4, 8, 0x40, 0x7f, 0x80, 0xff, 0x1000, 0x7fff_ffff, 0x8000_0000, 0xffff_fffe, 0xffff_ffff];
const INTERESTING_64: [u64; 8] =
    [0, 1, 0x40, 0x1000, 0x7fff_ffff_ffff_ffff, 0x8000_0000_0000_0000, 0xffff_ffff_ffff_fff0, u64::MAX];

/// Where in a binary to mutate: `hot` regions (headers, tables, notes, code)
/// get most mutations; `only`, when set, confines them.
#[derive(Clone, Debug, Default)]
pub struct Regions {
    pub hot: Vec<Range<usize>>,
    pub only: Option<Range<usize>>,
}

impl Regions {
    fn offset(&self, rng: &mut Rng, length: usize) -> usize {
        if let Some(only) = &self.only {
            let only = only.start.min(length)..only.end.min(length);
            return only.start + rng.below(only.len());
        }
        if !self.hot.is_empty() && rng.chance(75) {
            let region = rng.pick(&self.hot).clone();
            let region = region.start.min(length)..region.end.min(length);
            if !region.is_empty() {
                return region.start + rng.below(region.len());
            }
        }
        rng.below(length)
    }
}

/// 1 to 8 mutations of a binary: bit flips, interesting bytes, words and
/// double words, copied chunks, and now and then a truncation, an insertion
/// or a deletion (which shift everything after them).
pub fn mutate_binary(seed: &[u8], regions: &Regions, rng: &mut Rng) -> Vec<u8> {
    let mut bytes = seed.to_vec();
    let count = 1 + rng.below(8);
    for _ in 0..count {
        if bytes.is_empty() {
            bytes.push(rng.next_u64() as u8);
            continue;
        }
        let at = regions.offset(rng, bytes.len());
        let structural = regions.only.is_none();
        match rng.below(if structural { 10 } else { 7 }) {
            0 | 1 => bytes[at] ^= 1 << rng.below(8),
            2 => bytes[at] = *rng.pick(&[0u8, 1, 0x7f, 0x80, 0xff, 0x40, 0x20]),
            3 => {
                let value = *rng.pick(&INTERESTING_32);
                let at = at & !3;
                if at + 4 <= bytes.len() {
                    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
                }
            }
            4 => {
                let value = *rng.pick(&INTERESTING_64);
                let at = at & !7;
                if at + 8 <= bytes.len() {
                    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
                }
            }
            5 => {
                // A small number added or subtracted (sizes off by a little).
                let delta = rng.below(17) as u32;
                let at = at & !3;
                if at + 4 <= bytes.len() {
                    let old = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
                    let new = if rng.chance(50) { old.wrapping_add(delta) } else { old.wrapping_sub(delta) };
                    bytes[at..at + 4].copy_from_slice(&new.to_le_bytes());
                }
            }
            6 => {
                // A chunk copied over another place.
                let length = 1 + rng.below(64);
                let from = rng.below(bytes.len());
                let chunk: Vec<u8> = bytes[from..(from + length).min(bytes.len())].to_vec();
                let end = (at + chunk.len()).min(bytes.len());
                let fits = end - at;
                bytes[at..end].copy_from_slice(&chunk[..fits]);
            }
            7 => bytes.truncate(at.max(1)),
            8 => {
                let length = 1 + rng.below(32);
                let inserted: Vec<u8> = (0..length).map(|_| rng.next_u64() as u8).collect();
                bytes.splice(at..at, inserted);
            }
            _ => {
                let end = (at + 1 + rng.below(32)).min(bytes.len());
                bytes.drain(at..end);
            }
        }
    }
    // Confined: the length never changes (no structural mutations), and
    // whatever an aligned word wrote outside the region is put back.
    if let Some(only) = &regions.only {
        for (index, byte) in bytes.iter_mut().enumerate() {
            if !only.contains(&index) {
                *byte = seed[index];
            }
        }
    }
    bytes
}

/// 1 to 4 mutations of a text: a token replaced by one of `dictionary`, a
/// line dropped or repeated, characters changed, inserted or deleted.
pub fn mutate_text(seed: &str, dictionary: &[&str], rng: &mut Rng) -> String {
    let mut text = seed.to_string();
    for _ in 0..1 + rng.below(4) {
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        if lines.is_empty() {
            lines.push(String::new());
        }
        let line = rng.below(lines.len());
        match rng.below(8) {
            0..=2 => {
                // A quoted string, number or bare word replaced.
                let tokens: Vec<(usize, usize)> = token_spans(&lines[line]);
                if let Some(&(start, end)) = (!tokens.is_empty()).then(|| rng.pick(&tokens)) {
                    let word: &str = dictionary[rng.below(dictionary.len())];
                    lines[line].replace_range(start..end, word);
                } else {
                    lines[line].push_str(dictionary[rng.below(dictionary.len())]);
                }
            }
            3 => {
                lines.remove(line);
            }
            4 => {
                let copy = lines[line].clone();
                lines.insert(rng.below(lines.len() + 1), copy);
            }
            5 => {
                let mut chars: Vec<char> = lines[line].chars().collect();
                let at = rng.below(chars.len() + 1);
                let inserted = *rng.pick(&['"', '[', ']', '{', '}', '=', ',', '\\', '\u{0}', 'é', '\n', '*', '(']);
                chars.insert(at, inserted);
                lines[line] = chars.into_iter().collect();
            }
            6 => {
                let mut chars: Vec<char> = lines[line].chars().collect();
                if !chars.is_empty() {
                    let at = rng.below(chars.len());
                    chars.remove(at);
                }
                lines[line] = chars.into_iter().collect();
            }
            _ => lines.insert(line, (*rng.pick(dictionary)).to_string()),
        }
        text = lines.join("\n");
        text.push('\n');
    }
    text
}

/// Byte spans of the quoted strings, numbers and words of a line.
fn token_spans(line: &str) -> Vec<(usize, usize)> {
    let bytes = line.as_bytes();
    let mut spans = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let start = at;
        if bytes[at] == b'"' {
            at += 1;
            while at < bytes.len() && bytes[at] != b'"' {
                at += 1;
            }
            at = (at + 1).min(bytes.len());
            spans.push((start, at));
        } else if bytes[at].is_ascii_alphanumeric() || bytes[at] == b'-' || bytes[at] == b'_' {
            while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || b"-_:.".contains(&bytes[at])) {
                at += 1;
            }
            spans.push((start, at));
        } else {
            at += 1;
        }
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_is_the_same_input_every_time() {
        let seed: Vec<u8> = (0..=255).collect();
        let regions = Regions { hot: vec![0..16, 200..216], only: None };
        let a = mutate_binary(&seed, &regions, &mut Rng::for_case("code-object", 41));
        let b = mutate_binary(&seed, &regions, &mut Rng::for_case("code-object", 41));
        let c = mutate_binary(&seed, &regions, &mut Rng::for_case("code-object", 42));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, seed);
    }

    #[test]
    fn confined_mutations_stay_in_their_region() {
        let seed = vec![0u8; 256];
        let regions = Regions { hot: Vec::new(), only: Some(100..120) };
        for case in 0..200 {
            let mutated = mutate_binary(&seed, &regions, &mut Rng::for_case("metadata-note", case));
            assert_eq!(mutated.len(), seed.len());
            for (index, (a, b)) in seed.iter().zip(&mutated).enumerate() {
                assert!(a == b || (100..120).contains(&index), "case {case}: byte {index}");
            }
        }
    }

    #[test]
    fn text_mutations_change_the_text() {
        let seed = "[[insert]]\nhook = \"count\"\nwhere = \"each-instruction\"\n";
        let changed = (0..50).filter(|c| mutate_text(seed, &["x"], &mut Rng::for_case("plan", *c)) != seed).count();
        assert!(changed > 40, "{changed}");
    }
}
