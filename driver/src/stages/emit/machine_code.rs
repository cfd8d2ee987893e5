//! Patched code written as machine code: every function laid out here,
//! byte for byte (the application's instructions as their original bytes,
//! payload lines as the in-process assembler encodes them), branches and
//! long jumps resolved against this layout, and only what the linker must
//! decide (where data and the tool's globals land) left as relocations.
//! llvm-mc then reads one `.incbin` and a few `.reloc` lines per function
//! instead of millions of instructions (rocSPARSE's largest code object:
//! 13.8 million payload and application instructions).
//!
//! Anything this layout cannot place (a payload line with a fixup of a
//! kind it does not know, a branch leaving its function) is an
//! [`Unplaceable`], and the caller writes the code object as assembly
//! instead: slower, never different.

use std::collections::HashMap;
use std::fmt::Write;

use crate::stages::lift::{Flow, Function, Half, LiftedCodeObject};
use crate::stages::patch::Patch;

/// A branch's 16-bit offset while the target is unknown, and a literal's.
const BRANCH_SENTINEL: u16 = 12_345;
const LITERAL_SENTINEL: u32 = 0x5eed_c0de;

/// Why the layout could not be made (the code object is then emitted as
/// assembly).
#[derive(Debug)]
pub struct Unplaceable(pub String);

/// One payload or long-jump line, encoded.
#[derive(Clone, Debug)]
enum Line {
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
        symbol: String,
        target: String,
    },
}

/// A relocation in a function's code: at `offset` from its start.
pub struct Relocation {
    pub offset: usize,
    pub kind: &'static str,
    pub target: String,
}

/// One function's machine code within the blob.
pub struct FunctionCode {
    pub function: usize,
    /// Where its bytes start in the blob, and how many.
    pub start: usize,
    pub length: usize,
    pub relocations: Vec<Relocation>,
    /// Each site's inserted code: (original address, first byte, end),
    /// offsets from the function's start.
    pub sites: Vec<(u64, usize, usize)>,
    /// The symbols its payloads refer to, in the order they first do.
    symbols: Vec<String>,
}

/// The machine code of every function emitted, in emission order.
pub struct MachineCode {
    pub blob: Vec<u8>,
    /// The symbols payload code refers to (the tool's globals), in the
    /// order the code first refers to them.
    pub payload_symbols: Vec<String>,
    pub functions: Vec<FunctionCode>,
    /// Offsets, bytes and text of every instruction (`--dump-after emit`).
    pub listing: Option<String>,
}

/// The local label at the start of a function laid out here (`suffix`:
/// the instrumented copy's): shorter than its symbol for the assembler to
/// read in every relocation and site.
pub fn code_label(function: usize, suffix: &str) -> String {
    if suffix.is_empty() {
        format!(".Lgpuinstr_f{function}")
    } else {
        format!(".Lgpuinstr_copy_f{function}")
    }
}

/// A line of the listing: bytes at `at` in the blob (none: a label).
struct Listed {
    at: usize,
    length: usize,
    text: String,
    starts_function: bool,
}

/// The listing with the final bytes (branches and long jumps resolved).
fn render_listing(entries: &[Listed], blob: &[u8]) -> String {
    let mut out = String::new();
    let mut function_start = 0;
    for entry in entries {
        if entry.starts_function {
            function_start = entry.at;
            writeln!(out, "\n{}", entry.text).unwrap();
            continue;
        }
        if entry.length == 0 {
            writeln!(out, "  {}", entry.text).unwrap();
            continue;
        }
        let bytes = &blob[entry.at..entry.at + entry.length];
        writeln!(out, "  {:6x}: {:<24} {}", entry.at - function_start, super::hex_words(bytes), entry.text).unwrap();
    }
    out
}

/// Payload lines encoded once each, in one batch per kind.
struct Encoder {
    lines: HashMap<String, Line>,
}

/// `s_cbranch_execz .LBB0_2` as its mnemonic and label.
fn branch_parts(line: &str) -> Option<(&str, &str)> {
    let (mnemonic, operand) = line.split_once(' ')?;
    let branch = mnemonic == "s_branch" || mnemonic.starts_with("s_cbranch_");
    (branch && !operand.contains([',', ' '])).then_some((mnemonic, operand.trim()))
}

/// `s_add_u32 s14, s14, Counter@gotpcrel32@lo+4` as the line with the
/// literal sentinel, the relocation's kind and its target expression.
fn relocated_parts(line: &str) -> Option<(String, &'static str, String, String)> {
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
    Some((substituted, kind, symbol.to_string(), target_expression(symbol, addend)))
}

fn target_expression(symbol: &str, addend: i64) -> String {
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
    fn new<'l>(lifted: &LiftedCodeObject<'_>, lines: impl Iterator<Item = &'l str>) -> Result<Self, Unplaceable> {
        let distinct: std::collections::HashSet<&str> = lines.filter(|l| !l.ends_with(':')).collect();
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
        let mut encoder = Encoder { lines: HashMap::with_capacity(assembled.len()) };
        for (line, text) in &assembled {
            let bytes = encodings[text.as_str()]
                .clone()
                .ok_or_else(|| Unplaceable(format!("the assembler does not encode `{line}` on its own")))?;
            let encoded = if let Some((_, label)) = branch_parts(line) {
                if bytes.len() != 4 || u16::from_le_bytes([bytes[0], bytes[1]]) != BRANCH_SENTINEL {
                    return Err(Unplaceable(format!("`{line}` is not a short branch")));
                }
                Line::Branch { bytes, label: label.to_string() }
            } else if let Some((_, kind, symbol, target)) = line.contains('@').then(|| relocated_parts(line)).flatten()
            {
                let at = find(&bytes, &LITERAL_SENTINEL.to_le_bytes())
                    .ok_or_else(|| Unplaceable(format!("`{line}` has no 32-bit literal")))?;
                Line::Relocated { bytes, at, kind, symbol, target }
            } else {
                Line::Bytes(bytes)
            };
            encoder.lines.insert(line.to_string(), encoded);
        }
        Ok(encoder)
    }

    /// A line's encoding (labels are not lines of their own here).
    fn line(&self, line: &str) -> &Line {
        &self.lines[line]
    }

    fn bytes(&self, line: &str) -> Result<&[u8], Unplaceable> {
        match self.lines.get(line) {
            Some(Line::Bytes(bytes)) => Ok(bytes),
            _ => Err(Unplaceable(format!("`{line}` has no encoding of its own"))),
        }
    }
}

/// What a function's code still needs once every offset is known.
enum Pending {
    /// A short branch at `at` to the application's instruction at an address.
    ToAddress { at: usize, target: u64 },
    /// A short branch at `at` to an offset.
    ToOffset { at: usize, target: usize },
    /// A long jump's literals at `at` (low, then high 8 bytes later),
    /// counted from `base`, to the application's instruction at `target`.
    LongJump { at: usize, base: usize, target: u64 },
    /// A pc-relative literal at `at` to the application's code at `target`
    /// (in this function or another), with `addend`.
    CodeRelative { at: usize, kind: &'static str, target: u64, addend: i64 },
}

fn patch_branch(code: &mut [u8], at: usize, target: usize) -> Result<(), Unplaceable> {
    let distance = (target as i64 - (at as i64 + 4)) / 4;
    let offset = i16::try_from(distance)
        .map_err(|_| Unplaceable(format!("a branch at +{at:#x} does not reach +{target:#x} after patching")))?;
    code[at..at + 2].copy_from_slice(&offset.to_le_bytes());
    Ok(())
}

impl LiftedCodeObject<'_> {
    /// Lays out `functions` (indices, each patched with `patch`, named with
    /// `suffix`): one blob, each function's relocations and sites.
    pub(super) fn machine_code(
        &self,
        functions: &[usize],
        patch: &Patch,
        suffix: &str,
        listing: bool,
    ) -> Result<MachineCode, Unplaceable> {
        let relaxed_lines = patch.relaxed.values().flat_map(|r| {
            let pair = r.pair;
            [
                r.inverse.map(|inverse| format!("{inverse} .Lskip")),
                Some(format!("s_getpc_b64 s[{pair}:{}]", pair + 1)),
                Some(format!("s_add_u32 s{pair}, s{pair}, {LITERAL_SENTINEL:#x}")),
                Some(format!("s_addc_u32 s{}, s{}, {LITERAL_SENTINEL:#x}", pair + 1, pair + 1)),
                Some(format!("s_setpc_b64 s[{pair}:{}]", pair + 1)),
            ]
            .into_iter()
            .flatten()
        });
        let relaxed_lines: Vec<String> = relaxed_lines.collect();
        let payload_lines = patch.before.values().flatten().map(|line| &**line);
        let encoder = Encoder::new(self, payload_lines.chain(relaxed_lines.iter().map(String::as_str)))?;

        let mut code =
            MachineCode { blob: Vec::new(), payload_symbols: Vec::new(), functions: Vec::new(), listing: None };
        let mut entries: Option<Vec<Listed>> = listing.then(Vec::new);
        // New offsets of each function's instructions, for references
        // between functions.
        let mut placed: HashMap<u64, (usize, usize)> = HashMap::new();
        let mut by_pointer: HashMap<usize, &Line> = HashMap::new();
        let mut pending_all: Vec<Vec<Pending>> = Vec::new();
        for &index in functions {
            let function = &self.functions[index];
            let (function_code, pending) = self.lay_out(
                index,
                function,
                patch,
                &encoder,
                &mut code.blob,
                entries.as_mut(),
                &mut placed,
                &mut by_pointer,
            )?;
            code.functions.push(function_code);
            pending_all.push(pending);
        }
        for (function_code, pending) in code.functions.iter_mut().zip(pending_all) {
            let start = function_code.start;
            let at_address = |target: u64| -> Result<usize, Unplaceable> {
                match placed.get(&target) {
                    Some((f, offset)) if *f == function_code.function => Ok(*offset),
                    _ => Err(Unplaceable(format!(
                        "`{}` branches to {target:#x}, outside itself",
                        self.functions[function_code.function].name
                    ))),
                }
            };
            let body = &mut code.blob[start..start + function_code.length];
            for item in pending {
                match item {
                    Pending::ToAddress { at, target } => patch_branch(body, at, at_address(target)?)?,
                    Pending::ToOffset { at, target } => patch_branch(body, at, target)?,
                    Pending::LongJump { at, base, target } => {
                        let distance = at_address(target)? as i64 - base as i64;
                        body[at..at + 4].copy_from_slice(&(distance as u32).to_le_bytes());
                        body[at + 8..at + 12].copy_from_slice(&((distance >> 32) as u32).to_le_bytes());
                    }
                    Pending::CodeRelative { at, kind, target, addend } => {
                        let Some((f, offset)) = placed.get(&target) else {
                            return Err(Unplaceable(format!("code at {target:#x} is not laid out")));
                        };
                        let target = target_expression(&code_label(*f, suffix), *offset as i64 + addend);
                        function_code.relocations.push(Relocation { offset: at, kind, target });
                    }
                }
            }
        }
        code.listing = entries.map(|entries| render_listing(&entries, &code.blob));
        for symbol in code.functions.iter().flat_map(|f| &f.symbols) {
            if !code.payload_symbols.contains(symbol) {
                code.payload_symbols.push(symbol.clone());
            }
        }
        Ok(code)
    }

    /// One function's code appended to `blob`.
    #[allow(clippy::too_many_arguments)]
    fn lay_out<'e>(
        &self,
        index: usize,
        function: &Function,
        patch: &Patch,
        encoder: &'e Encoder,
        blob: &mut Vec<u8>,
        mut listing: Option<&mut Vec<Listed>>,
        placed: &mut HashMap<u64, (usize, usize)>,
        by_pointer: &mut HashMap<usize, &'e Line>,
    ) -> Result<(FunctionCode, Vec<Pending>), Unplaceable> {
        let start = blob.len();
        let mut out = FunctionCode {
            function: index,
            start,
            length: 0,
            relocations: Vec::new(),
            sites: Vec::new(),
            symbols: Vec::new(),
        };
        let mut pending = Vec::new();
        if let Some(listing) = listing.as_deref_mut() {
            listing.push(Listed { at: start, length: 0, text: format!("{}:", function.name), starts_function: true });
        }
        let mut put = |blob: &mut Vec<u8>, bytes: &[u8], text: &dyn Fn() -> String| -> usize {
            let at = blob.len() - start;
            if let Some(listing) = listing.as_deref_mut() {
                let starts_function = false;
                listing.push(Listed { at: blob.len(), length: bytes.len(), text: text(), starts_function });
            }
            blob.extend_from_slice(bytes);
            at
        };
        for instruction in function.instructions() {
            let address = instruction.address;
            // Branches to an instruction run the code inserted before it.
            placed.insert(address, (index, blob.len() - start));
            if let Some(lines) = patch.before.get(&address).filter(|lines| !lines.is_empty()) {
                let begin = put(blob, &[], &|| format!("; inserted before {address:#x}"));
                // A payload's labels and branches stay within its site.
                let mut labels: Vec<(&str, usize)> = Vec::new();
                let mut branches: Vec<(usize, &str)> = Vec::new();
                for line in lines {
                    if let Some(label) = line.strip_suffix(':') {
                        labels.push((label, blob.len() - start));
                        put(blob, &[], &|| line.to_string());
                        continue;
                    }
                    // Lines are shared between points: found by address
                    // once one of their copies was found by text.
                    let encoded = *by_pointer
                        .entry(std::sync::Arc::as_ptr(line) as *const u8 as usize)
                        .or_insert_with(|| encoder.line(line));
                    match encoded {
                        Line::Bytes(bytes) => {
                            put(blob, bytes, &|| line.to_string());
                        }
                        Line::Branch { bytes, label } => {
                            let at = put(blob, bytes, &|| line.to_string());
                            branches.push((at, label));
                        }
                        Line::Relocated { bytes, at, kind, symbol, target } => {
                            if !out.symbols.contains(symbol) {
                                out.symbols.push(symbol.clone());
                            }
                            let offset = put(blob, bytes, &|| line.to_string());
                            out.relocations.push(Relocation { offset: offset + at, kind, target: target.clone() });
                        }
                    }
                }
                for (at, label) in branches {
                    let target =
                        labels.iter().find(|(l, _)| *l == label).map(|(_, offset)| *offset).ok_or_else(|| {
                            Unplaceable(format!("a payload at {address:#x} branches to `{label}`, outside itself"))
                        })?;
                    pending.push(Pending::ToOffset { at, target });
                }
                out.sites.push((address, begin, blob.len() - start));
            }
            let text = || {
                let text = self.isa.mc.print(&instruction.raw, address);
                format!("{}\t; {address:#x}", text.as_deref().unwrap_or(self.isa.opcode_name(instruction.raw.opcode)))
            };
            if let Some(relaxed) = patch.relaxed.get(&address) {
                let target = match instruction.flow {
                    Flow::Branch { target } | Flow::ConditionalBranch { target } => target,
                    _ => return Err(Unplaceable(format!("the long jump at {address:#x} is not a branch"))),
                };
                let pair = relaxed.pair;
                let skip = relaxed
                    .inverse
                    .map(|inverse| {
                        let bytes = match encoder.line(&format!("{inverse} .Lskip")) {
                            Line::Branch { bytes, .. } => bytes,
                            _ => unreachable!("encoded as a branch"),
                        };
                        put(blob, bytes, &|| format!("{inverse} (over the long jump)"))
                    })
                    .map(Ok::<usize, Unplaceable>)
                    .transpose()?;
                put(blob, encoder.bytes(&format!("s_getpc_b64 s[{pair}:{}]", pair + 1))?, &text);
                let base = blob.len() - start;
                let low = encoder.bytes(&format!("s_add_u32 s{pair}, s{pair}, {LITERAL_SENTINEL:#x}"))?;
                let high = encoder.bytes(&format!("s_addc_u32 s{}, s{}, {LITERAL_SENTINEL:#x}", pair + 1, pair + 1))?;
                if low.len() != 8 || high.len() != 8 {
                    return Err(Unplaceable("a long jump's literals are not where expected".into()));
                }
                let at = put(blob, low, &|| format!("s_add_u32 (to {target:#x})"));
                put(blob, high, &|| "s_addc_u32".into());
                put(blob, encoder.bytes(&format!("s_setpc_b64 s[{pair}:{}]", pair + 1))?, &|| "s_setpc_b64".into());
                pending.push(Pending::LongJump { at: at + 4, base, target });
                if let Some(skip) = skip {
                    pending.push(Pending::ToOffset { at: skip, target: blob.len() - start });
                }
                continue;
            }
            let at = put(blob, &instruction.bytes, &text);
            if let Flow::Branch { target } | Flow::ConditionalBranch { target } = instruction.flow {
                if instruction.bytes.len() != 4 {
                    return Err(Unplaceable(format!("the branch at {address:#x} is not a short branch")));
                }
                pending.push(Pending::ToAddress { at, target });
            }
            if let Some(pc) = &instruction.pc_relative {
                if instruction.bytes.len() != 8 {
                    return Err(Unplaceable(format!("the pc-relative literal at {address:#x} is not at its place")));
                }
                let kind = if pc.half == Half::Low { "R_AMDGPU_REL32_LO" } else { "R_AMDGPU_REL32_HI" };
                let is_code = self.functions.iter().any(|f| f.address <= pc.target && pc.target < f.end());
                if is_code {
                    pending.push(Pending::CodeRelative { at: at + 4, kind, target: pc.target, addend: pc.addend });
                } else {
                    let (name, offset) = self.data_reference(pc.target);
                    let target = target_expression(&name, offset as i64 + pc.addend);
                    out.relocations.push(Relocation { offset: at + 4, kind, target });
                }
            }
        }
        out.length = blob.len() - start;
        Ok((out, pending))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relocated_lines_name_their_kind_and_target() {
        let (line, kind, symbol, target) = relocated_parts("s_add_u32 s14, s14, Counter@gotpcrel32@lo+4").unwrap();
        assert_eq!(line, "s_add_u32 s14, s14, 0x5eedc0de");
        assert_eq!((kind, symbol.as_str(), target.as_str()), ("R_AMDGPU_GOTPCREL32_LO", "Counter", "Counter+4"));
        let (_, kind, _, target) = relocated_parts("s_addc_u32 vcc_hi, vcc_hi, Buffer@rel32@hi-8").unwrap();
        assert_eq!((kind, target.as_str()), ("R_AMDGPU_REL32_HI", "Buffer-8"));
        assert!(relocated_parts("s_add_u32 s0, s0, Counter@gotpcrel").is_none());
        let (line, kind, _, target) = relocated_parts("v_add_u32_e32 v7, slots@rel32@lo+4, v7").unwrap();
        assert_eq!(
            (line.as_str(), kind, target.as_str()),
            ("v_add_u32_e32 v7, 0x5eedc0de, v7", "R_AMDGPU_REL32_LO", "slots+4")
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
