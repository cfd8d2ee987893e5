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

use rustc_hash::{FxHashMap as HashMap, FxHashSet};
use std::fmt::Write;

pub use crate::stages::lift::line_encoding::Unplaceable;
use crate::stages::lift::line_encoding::{patch_branch, target_expression, Encoder, Line, LITERAL_SENTINEL};
use crate::stages::lift::{Flow, Function, Half, LiftedCodeObject};
use crate::stages::patch::Patch;

/// A relocation in a function's code: at `offset` from its start, of
/// `symbol` plus `addend`.
#[derive(Clone)]
pub struct Relocation {
    pub offset: usize,
    pub kind: &'static str,
    pub symbol: std::sync::Arc<str>,
    pub addend: i64,
}

impl Relocation {
    /// Its target as an assembler expression (`Counter+4`).
    pub fn target(&self) -> String {
        target_expression(&self.symbol, self.addend)
    }
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
/// The pieces of inserted code (shared by every point with a copy of
/// them) encoded once each: a site copies its pieces' bytes and offsets.
#[derive(Default)]
struct EncodedPieces {
    index_of: HashMap<*const crate::stages::payloads::CodeLine, usize>,
    encoded: Vec<EncodedPiece>,
}

/// One piece's machine code, with its labels, short branches (to labels
/// of its site) and relocations, at offsets in the piece; and each line's
/// offset and length (for the listing).
struct EncodedPiece {
    bytes: Vec<u8>,
    labels: Vec<(String, usize)>,
    branches: Vec<(usize, String)>,
    relocations: Vec<Relocation>,
    lines: Vec<(usize, usize)>,
}

impl EncodedPieces {
    fn index_of(
        &mut self,
        piece: &crate::stages::payloads::PayloadCode,
        encoder: &Encoder,
    ) -> Result<usize, Unplaceable> {
        if let Some(index) = self.index_of.get(&piece.as_ptr()) {
            return Ok(*index);
        }
        let mut code = EncodedPiece {
            bytes: Vec::new(),
            labels: Vec::new(),
            branches: Vec::new(),
            relocations: Vec::new(),
            lines: Vec::with_capacity(piece.len()),
        };
        for line in piece.iter() {
            let at = code.bytes.len();
            if let Some(label) = line.strip_suffix(':') {
                code.labels.push((label.to_string(), at));
                code.lines.push((at, 0));
                continue;
            }
            let bytes = match encoder.line(line) {
                Line::Bytes(bytes) => bytes,
                Line::Branch { bytes, label } => {
                    code.branches.push((at, label.clone()));
                    bytes
                }
                Line::Relocated { bytes, at: literal, kind, symbol, addend } => {
                    let relocation = Relocation { offset: at + literal, kind, symbol: symbol.clone(), addend: *addend };
                    code.relocations.push(relocation);
                    bytes
                }
            };
            code.bytes.extend_from_slice(bytes);
            code.lines.push((at, bytes.len()));
        }
        self.encoded.push(code);
        self.index_of.insert(piece.as_ptr(), self.encoded.len() - 1);
        Ok(self.encoded.len() - 1)
    }
}

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
        // Lines are shared between points: each shared line looked at once.
        // Each shared piece looked at once too.
        let mut seen_pieces: FxHashSet<*const crate::stages::payloads::CodeLine> = FxHashSet::default();
        let mut seen: FxHashSet<*const u8> = FxHashSet::default();
        let payload_lines = patch
            .before
            .values()
            .flat_map(|inserted| inserted.pieces())
            .filter(|piece| seen_pieces.insert(piece.as_ptr()))
            .flat_map(|piece| piece.iter())
            .filter(|line| seen.insert(line.as_ptr()))
            .map(|line| &**line);
        let encoder = Encoder::new(self, payload_lines.chain(relaxed_lines.iter().map(String::as_str)))?;

        let mut code =
            MachineCode { blob: Vec::new(), payload_symbols: Vec::new(), functions: Vec::new(), listing: None };
        let mut entries: Option<Vec<Listed>> = listing.then(Vec::new);
        // New offsets of each function's instructions, for references
        // between functions.
        let mut placed: HashMap<u64, (usize, usize)> = HashMap::default();
        let mut pieces = EncodedPieces::default();
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
                &mut pieces,
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
                        function_code.relocations.push(Relocation {
                            offset: at,
                            kind,
                            symbol: code_label(*f, suffix).into(),
                            addend: *offset as i64 + addend,
                        });
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
    fn lay_out(
        &self,
        index: usize,
        function: &Function,
        patch: &Patch,
        encoder: &Encoder,
        blob: &mut Vec<u8>,
        mut listing: Option<&mut Vec<Listed>>,
        placed: &mut HashMap<u64, (usize, usize)>,
        pieces: &mut EncodedPieces,
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
        let listed = listing.is_some();
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
            if let Some(inserted) = patch.before.get(&address).filter(|lines| !lines.is_empty()) {
                let begin = put(blob, &[], &|| format!("; inserted before {address:#x}"));
                // Each shared piece encoded once, then copied: (piece, its
                // offset in the function).
                let mut placed_pieces: Vec<(usize, usize)> = Vec::with_capacity(inserted.pieces().len());
                for piece in inserted.pieces() {
                    let encoded = pieces.index_of(piece, encoder)?;
                    let base = blob.len() - start;
                    let piece_code = &pieces.encoded[encoded];
                    match listed {
                        // Line by line, each with its text.
                        true => {
                            for (line, (at, length)) in piece.iter().zip(&piece_code.lines) {
                                put(blob, &piece_code.bytes[*at..at + length], &|| line.to_string());
                            }
                        }
                        false => blob.extend_from_slice(&piece_code.bytes),
                    }
                    for relocation in &piece_code.relocations {
                        if !out.symbols.iter().any(|s| **s == *relocation.symbol) {
                            out.symbols.push(relocation.symbol.to_string());
                        }
                        out.relocations.push(Relocation { offset: base + relocation.offset, ..relocation.clone() });
                    }
                    placed_pieces.push((encoded, base));
                }
                // A payload's labels and branches stay within its site.
                let labels = |label: &str| {
                    placed_pieces.iter().find_map(|(encoded, base)| {
                        pieces.encoded[*encoded].labels.iter().find(|(l, _)| l == label).map(|(_, at)| base + at)
                    })
                };
                for (encoded, base) in &placed_pieces {
                    for (at, label) in &pieces.encoded[*encoded].branches {
                        let target = labels(label).ok_or_else(|| {
                            Unplaceable(format!("a payload at {address:#x} branches to `{label}`, outside itself"))
                        })?;
                        pending.push(Pending::ToOffset { at: base + at, target });
                    }
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
                if let Some(symbol) = self.got_slot_symbol(pc.target) {
                    let kind = if pc.half == Half::Low { "R_AMDGPU_GOTPCREL32_LO" } else { "R_AMDGPU_GOTPCREL32_HI" };
                    out.relocations.push(Relocation { offset: at + 4, kind, symbol: symbol.into(), addend: pc.addend });
                } else if is_code {
                    pending.push(Pending::CodeRelative { at: at + 4, kind, target: pc.target, addend: pc.addend });
                } else {
                    let (name, offset) = self.data_reference(pc.target);
                    out.relocations.push(Relocation {
                        offset: at + 4,
                        kind,
                        symbol: name.into(),
                        addend: offset as i64 + pc.addend,
                    });
                }
            }
        }
        out.length = blob.len() - start;
        Ok((out, pending))
    }
}
