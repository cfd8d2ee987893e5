//! Assembly lines encoded in process, each distinct line once: as it is
//! where it has no fixup, else with its branch offset or relocated literal
//! replaced by a sentinel the caller patches. Payload code is laid out
//! with it twice: for the machine-code check (crate::preservation) and for
//! emission (stages::emit::machine_code), the same bytes both times.

use rustc_hash::{FxHashMap as HashMap, FxHashSet};

use super::LiftedCodeObject;

/// A branch's 16-bit offset while the target is unknown, and a literal's.
pub const BRANCH_SENTINEL: u16 = 12_345;
pub const LITERAL_SENTINEL: u32 = 0x5eed_c0de;

/// Why lines could not be encoded in process (the caller then goes
/// through llvm-mc instead: slower, never different).
#[derive(Debug)]
pub struct Unplaceable(pub String);

/// One payload or long-jump line, encoded.
#[derive(Clone, Debug)]
pub enum Line {
    Bytes(Vec<u8>),
    /// A short branch to a label among the lines of its site.
    Branch {
        bytes: Vec<u8>,
        label: String,
    },
    /// An instruction whose literal (at byte `at`) the linker fills in.
    Relocated {
        bytes: Vec<u8>,
        at: usize,
        kind: &'static str,
        /// (Shared: every copy of the line names it.)
        symbol: std::sync::Arc<str>,
        addend: i64,
    },
}

/// Payload lines encoded once each, in one batch per kind.
pub struct Encoder {
    lines: HashMap<String, Line>,
}

/// `s_cbranch_execz .LBB0_2` as its mnemonic and label.
pub fn branch_parts(line: &str) -> Option<(&str, &str)> {
    let (mnemonic, operand) = line.split_once(' ')?;
    let branch = mnemonic == "s_branch" || mnemonic.starts_with("s_cbranch_");
    (branch && !operand.contains([',', ' '])).then_some((mnemonic, operand.trim()))
}

/// `s_add_u32 s14, s14, Counter@gotpcrel32@lo+4` as the line with the
/// literal sentinel, the relocation's kind, its symbol and addend.
pub fn relocated_parts(line: &str) -> Option<(String, &'static str, String, i64)> {
    // The relocated operand: the last (`s_add_u32 s0, s0, x@rel32@lo+4`)
    // or a VOP2's first source (`v_add_u32_e32 v1, x@rel32@lo+4, v1`).
    let (mnemonic, operands) = line.split_once(' ')?;
    let mut operands: Vec<&str> = operands.split(", ").collect();
    let relocated = operands.iter().position(|o| o.contains('@'))?;
    let operand = operands[relocated];
    let mut parts = operand.split('@');
    let (symbol, kind, rest) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || symbol.is_empty() {
        return None;
    }
    let split = rest.find(['+', '-']).unwrap_or(rest.len());
    let (half, addend) = rest.split_at(split);
    let addend: i64 = match addend {
        "" => 0,
        _ => addend.strip_prefix('+').unwrap_or(addend).parse().ok()?,
    };
    let kind = match (kind, half) {
        ("gotpcrel32", "lo") => "R_AMDGPU_GOTPCREL32_LO",
        ("gotpcrel32", "hi") => "R_AMDGPU_GOTPCREL32_HI",
        ("rel32", "lo") => "R_AMDGPU_REL32_LO",
        ("rel32", "hi") => "R_AMDGPU_REL32_HI",
        ("abs32", "lo") => "R_AMDGPU_ABS32_LO",
        ("abs32", "hi") => "R_AMDGPU_ABS32_HI",
        _ => return None,
    };
    let sentinel = format!("{LITERAL_SENTINEL:#x}");
    operands[relocated] = &sentinel;
    let substituted = format!("{mnemonic} {}", operands.join(", "));
    Some((substituted, kind, symbol.to_string(), addend))
}

pub fn target_expression(symbol: &str, addend: i64) -> String {
    match addend {
        0 => symbol.to_string(),
        a if a < 0 => format!("{symbol}{a}"),
        a => format!("{symbol}+{a}"),
    }
}

/// Where a sentinel's bytes are in an encoding.
fn find(bytes: &[u8], sentinel: &[u8]) -> Option<usize> {
    bytes.windows(sentinel.len()).position(|w| w == sentinel)
}

impl Encoder {
    /// Encodes every distinct line (labels aside): as it is where it has
    /// no fixup, else with its branch target or relocated literal replaced
    /// by a sentinel.
    pub fn new<'l>(lifted: &LiftedCodeObject<'_>, lines: impl Iterator<Item = &'l str>) -> Result<Self, Unplaceable> {
        let distinct: FxHashSet<&str> = lines.filter(|l| !l.ends_with(':')).collect();
        // Branches and relocated literals by pattern (their labels and
        // targets differ from point to point; their encodings do not).
        let what = |line: &str| -> String {
            if let Some((mnemonic, _)) = branch_parts(line) {
                format!("{mnemonic} {BRANCH_SENTINEL}")
            } else if let Some((substituted, ..)) = line.contains('@').then(|| relocated_parts(line)).flatten() {
                substituted
            } else {
                line.to_string()
            }
        };
        let assembled: Vec<(&str, String)> = distinct.into_iter().map(|line| (line, what(line))).collect();
        let mut texts: Vec<&str> = assembled.iter().map(|(_, text)| text.as_str()).collect();
        texts.sort_unstable();
        texts.dedup();
        let encodings: HashMap<&str, Option<Vec<u8>>> =
            texts.iter().copied().zip(lifted.isa.mc.assemble(&texts)).collect();
        let mut encoder = Encoder { lines: HashMap::with_capacity_and_hasher(assembled.len(), Default::default()) };
        for (line, text) in &assembled {
            let bytes = encodings[text.as_str()]
                .clone()
                .ok_or_else(|| Unplaceable(format!("the assembler does not encode `{line}` on its own")))?;
            let encoded = if let Some((_, label)) = branch_parts(line) {
                if bytes.len() != 4 || u16::from_le_bytes([bytes[0], bytes[1]]) != BRANCH_SENTINEL {
                    return Err(Unplaceable(format!("`{line}` is not a short branch")));
                }
                Line::Branch { bytes, label: label.to_string() }
            } else if let Some((_, kind, symbol, addend)) = line.contains('@').then(|| relocated_parts(line)).flatten()
            {
                let at = find(&bytes, &LITERAL_SENTINEL.to_le_bytes())
                    .ok_or_else(|| Unplaceable(format!("`{line}` has no 32-bit literal")))?;
                Line::Relocated { bytes, at, kind, symbol: symbol.into(), addend }
            } else {
                Line::Bytes(bytes)
            };
            encoder.lines.insert(line.to_string(), encoded);
        }
        Ok(encoder)
    }

    /// A line's encoding (labels are not lines of their own here).
    pub fn line(&self, line: &str) -> &Line {
        &self.lines[line]
    }

    pub fn bytes(&self, line: &str) -> Result<&[u8], Unplaceable> {
        match self.lines.get(line) {
            Some(Line::Bytes(bytes)) => Ok(bytes),
            _ => Err(Unplaceable(format!("`{line}` has no encoding of its own"))),
        }
    }
}

/// Writes a short branch's offset at `at` to reach `target` (offsets in
/// one piece of code).
pub fn patch_branch(code: &mut [u8], at: usize, target: usize) -> Result<(), Unplaceable> {
    let distance = (target as i64 - (at as i64 + 4)) / 4;
    let offset = i16::try_from(distance)
        .map_err(|_| Unplaceable(format!("a branch at +{at:#x} does not reach +{target:#x} after patching")))?;
    code[at..at + 2].copy_from_slice(&offset.to_le_bytes());
    Ok(())
}

impl Line {
    /// Its bytes, sentinels where the caller patches.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Line::Bytes(bytes) | Line::Branch { bytes, .. } | Line::Relocated { bytes, .. } => bytes,
        }
    }
}

/// One piece of code laid out from offset 0: its bytes and where each
/// line's instruction is (offset, length, whether it is a branch).
pub struct LaidOut {
    pub bytes: Vec<u8>,
    pub instructions: Vec<(usize, usize, bool)>,
}

/// Lays out each piece of code (labels and lines) on its own: short
/// branches to its own labels resolved, relocated literals left as
/// sentinels.
pub fn lay_out<L: AsRef<str>>(lifted: &LiftedCodeObject<'_>, codes: &[Vec<L>]) -> Result<Vec<LaidOut>, Unplaceable> {
    let encoder = Encoder::new(lifted, codes.iter().flatten().map(AsRef::as_ref))?;
    let mut laid_out = Vec::with_capacity(codes.len());
    for code in codes {
        let mut labels: HashMap<&str, usize> = HashMap::default();
        let mut offset = 0;
        for line in code.iter().map(AsRef::as_ref) {
            match line.strip_suffix(':') {
                Some(label) => {
                    labels.insert(label, offset);
                }
                None => offset += encoder.line(line).bytes().len(),
            }
        }
        let mut out = LaidOut { bytes: Vec::with_capacity(offset), instructions: Vec::new() };
        for line in code.iter().map(AsRef::as_ref).filter(|l| !l.ends_with(':')) {
            let encoded = encoder.line(line);
            let at = out.bytes.len();
            out.bytes.extend_from_slice(encoded.bytes());
            out.instructions.push((at, encoded.bytes().len(), matches!(encoded, Line::Branch { .. })));
            if let Line::Branch { label, .. } = encoded {
                let target = *labels
                    .get(label.as_str())
                    .ok_or_else(|| Unplaceable(format!("`{line}` branches to a label outside its code")))?;
                patch_branch(&mut out.bytes, at, target)?;
            }
        }
        laid_out.push(out);
    }
    Ok(laid_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relocated_lines_name_their_kind_and_target() {
        let (line, kind, symbol, addend) = relocated_parts("s_add_u32 s14, s14, Counter@gotpcrel32@lo+4").unwrap();
        assert_eq!(line, "s_add_u32 s14, s14, 0x5eedc0de");
        assert_eq!((kind, symbol.as_str(), addend), ("R_AMDGPU_GOTPCREL32_LO", "Counter", 4));
        let (_, kind, symbol, addend) = relocated_parts("s_addc_u32 vcc_hi, vcc_hi, Buffer@rel32@hi-8").unwrap();
        assert_eq!((kind, target_expression(&symbol, addend).as_str()), ("R_AMDGPU_REL32_HI", "Buffer-8"));
        assert!(relocated_parts("s_add_u32 s0, s0, Counter@gotpcrel").is_none());
        let (line, kind, symbol, addend) = relocated_parts("v_add_u32_e32 v7, slots@rel32@lo+4, v7").unwrap();
        assert_eq!(
            (line.as_str(), kind, symbol.as_str(), addend),
            ("v_add_u32_e32 v7, 0x5eedc0de, v7", "R_AMDGPU_REL32_LO", "slots", 4)
        );
        assert!(relocated_parts("v_mov_b32_e32 v1, 0").is_none());
    }

    #[test]
    fn branches_name_their_label() {
        assert_eq!(branch_parts("s_cbranch_execz .LBB0_2"), Some(("s_cbranch_execz", ".LBB0_2")));
        assert_eq!(branch_parts("s_branch .L1"), Some(("s_branch", ".L1")));
        assert_eq!(branch_parts("s_mov_b32 s0, 1"), None);
    }

    #[test]
    fn branches_reach_only_16_bits() {
        let mut code = vec![0u8; 8];
        patch_branch(&mut code, 0, 8).unwrap();
        assert_eq!(&code[..2], &1i16.to_le_bytes());
        patch_branch(&mut code, 4, 0).unwrap();
        assert_eq!(&code[4..6], &(-2i16).to_le_bytes());
        assert!(patch_branch(&mut code, 0, 4 * 40_000).is_err());
    }
}
