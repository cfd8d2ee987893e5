//! Stage 10, emit + link: a lifted code object written back as assembly
//! (code with labels and symbolic pc-relative operands, every section's data
//! at its original offset, an `.amdhsa_kernel` block per kernel, the
//! `.amdgpu_metadata` block), assembled by the build's llvm-mc and linked by CoMGR
//! or its ld.lld.

pub mod container;
pub mod link;
pub mod machine_code;
pub mod metadata_yaml;
pub mod relocations;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write;

use crate::stages::lift::print::{byte_list, AsmNames};
use crate::stages::lift::{Function, LiftedCodeObject};
use crate::stages::load::descriptor::KernelDescriptor;
use crate::stages::load::instrumented::{INSTRUMENTED_SUFFIX, SITES_IN_BLOCKS, SITE_TABLE};
use crate::stages::load::{Binding, FeatureSetting, Section, Symbol, SymbolKind, Visibility};
use crate::stages::patch::Patch;
use relocations::DeferredRelocations;

/// Sections the linker makes; everything else loadable is reproduced.
pub(crate) const LINKER_SECTIONS: [&str; 9] =
    [".note", ".dynsym", ".gnu.hash", ".hash", ".dynstr", ".dynamic", ".rela.dyn", ".relr.dyn", ".relro_padding"];

/// What the emitter did besides plain text, for reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EmitNotes {
    /// Instructions written as their original bytes (address, reason).
    pub raw_instructions: Vec<(u64, String)>,
    /// Kernels whose descriptor was written as data instead of an
    /// `.amdhsa_kernel` block (name, reasons).
    pub raw_descriptors: Vec<(String, Vec<String>)>,
    /// Sections not reproduced.
    pub skipped_sections: Vec<String>,
    /// Why patched code was written as assembly rather than laid out as
    /// machine code ([`CodeForm::Bytes`]; slower, the same bytes).
    pub code_as_assembly: Option<String>,
    /// Why every relocation was written as text rather than the repeated
    /// ones added to the object ([`relocations`]; slower, the same object).
    pub relocations_as_text: Option<String>,
}

/// How instructions whose encoding is known are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CodeForm {
    /// As assembly wherever llvm-mc makes exactly the original bytes of it
    /// (round trips: the text is what they check).
    #[default]
    Text,
    /// As their bytes: patched functions laid out as machine code here
    /// (one `.incbin` of [`CODE_FILE`] and a `.reloc` per reference the
    /// linker resolves, [`machine_code`]), anything else as `.long` words
    /// with the opcode or payload text in a comment. llvm-mc reads words
    /// several times faster than instructions and an `.incbin` at once,
    /// and no application instruction can come out encoded differently.
    Bytes,
}

/// Which part of a code object an assembly holds: all of it, or, where
/// groups of kernels are instrumented each on its own (memory bounded by a
/// group, not the code object), one group's kernels or the rest. The linker
/// joins the parts.
#[derive(Clone, Debug, Default)]
pub enum Part {
    #[default]
    Whole,
    /// The lifted kernels' code and descriptors, their sites as a block of
    /// the site table ([`SITES_IN_BLOCKS`]); their point table is returned
    /// ([`Assembly::point_table`]), the rest is in [`Part::Rest`]'s.
    Kernels,
    /// Everything but the kernels' code and descriptors (the lifted code
    /// object has no functions): data and its symbols, the tool's globals
    /// (`patch.appended`), the groups' point tables joined, the metadata.
    Rest { point_table: Vec<u8> },
}

/// Emission choices.
#[derive(Clone, Debug, Default)]
pub struct EmitOptions {
    /// The whole code object or part of it.
    pub part: Part,
    /// Instructions as assembly or as bytes.
    pub code: CodeForm,
    /// Addresses of instructions to write as bytes whatever the text
    /// would assemble to (found by a previous attempt).
    pub force_bytes: HashSet<u64>,
    /// Changes to make (stage 9, patch); none for an exact round trip.
    pub patch: Option<Patch>,
    /// Where to keep the assembly when llvm-mc rejects it; None: nowhere.
    pub keep_failed: Option<std::path::PathBuf>,
    /// With the machine code laid out: a listing of it (offset, bytes,
    /// text) in [`Assembly::listing`] (`--dump-after emit`).
    pub listing: bool,
    /// With a patch: keep every function and kernel as it is (its code
    /// emitted unpatched, its descriptor and metadata the original's) and
    /// add the patched ones as copies named with [`INSTRUMENTED_SUFFIX`]
    /// after them, their descriptors after the code (selective
    /// instrumentation).
    pub keep_originals: bool,
    /// Every relocation of machine code as a `.reloc` line, none added to
    /// the object afterwards ([`relocations`]).
    pub relocations_as_text: bool,
}

/// How every payload's local labels begin (`.Lgpuinstr_payload12_end`).
const PAYLOAD_LABEL: &str = ".Lgpuinstr_payload";

/// The file next to the assembly its `.incbin` lines read (llvm-mc runs
/// with the directory holding both on its include path).
pub const CODE_FILE: &str = "gpuinstr-code.bin";

/// The assembly and what was special about it.
pub struct Assembly {
    pub text: String,
    /// The contents of [`CODE_FILE`] (empty: the text does not read it).
    pub code: Vec<u8>,
    /// The code's listing, when asked for.
    pub listing: Option<String>,
    pub notes: EmitNotes,
    /// Relocations to add to the assembled object ([`relocations`]).
    pub deferred: DeferredRelocations,
    /// For [`Part::Kernels`]: their point table's bytes, for the rest's.
    pub point_table: Vec<u8>,
    /// Wall time of each step of emission and linking, in order.
    pub timings: StepTimes,
}

/// Wall time of named steps, in order.
pub type StepTimes = Vec<(&'static str, std::time::Duration)>;

/// Bytes as little-endian 32-bit words (`0xbf800004 0x00000000`).
fn hex_words(bytes: &[u8]) -> String {
    let mut out = String::new();
    for (i, word) in bytes.chunks(4).enumerate() {
        let mut padded = [0u8; 4];
        padded[..word.len()].copy_from_slice(word);
        let separator = if i == 0 { "" } else { " " };
        write!(out, "{separator}{:#010x}", u32::from_le_bytes(padded)).unwrap();
    }
    out
}

fn quoted(name: &str) -> String {
    if name.chars().all(|c| c.is_ascii_alphanumeric() || "_.$".contains(c))
        && !name.starts_with(|c: char| c.is_ascii_digit())
    {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

fn symbol_directives(out: &mut String, symbol: &Symbol) {
    symbol_header(out, symbol);
    if symbol.size > 0 {
        writeln!(out, "\t.size\t{}, {}", quoted(&symbol.name), symbol.size).unwrap();
    }
}

/// Binding, visibility, type and label, without the size.
fn symbol_header(out: &mut String, symbol: &Symbol) {
    let name = quoted(&symbol.name);
    match symbol.binding {
        Binding::Global => writeln!(out, "\t.globl\t{name}").unwrap(),
        Binding::Weak => writeln!(out, "\t.weak\t{name}").unwrap(),
        _ => {}
    }
    match symbol.visibility {
        Visibility::Protected => writeln!(out, "\t.protected\t{name}").unwrap(),
        Visibility::Hidden => writeln!(out, "\t.hidden\t{name}").unwrap(),
        Visibility::Internal => writeln!(out, "\t.internal\t{name}").unwrap(),
        Visibility::Default => {}
    }
    match symbol.kind {
        SymbolKind::Function => writeln!(out, "\t.type\t{name},@function").unwrap(),
        SymbolKind::Object => writeln!(out, "\t.type\t{name},@object").unwrap(),
        _ => {}
    }
    writeln!(out, "{name}:").unwrap();
}

/// Original bytes as `.byte` lines (zero runs as `.zero`).
fn emit_bytes(out: &mut String, bytes: &[u8]) {
    let mut index = 0;
    while index < bytes.len() {
        let zeros = bytes[index..].iter().take_while(|b| **b == 0).count();
        if zeros >= 16 {
            writeln!(out, "\t.zero\t{zeros}").unwrap();
            index += zeros;
            continue;
        }
        let end = (index + 16).min(bytes.len());
        writeln!(out, "\t.byte\t{}", byte_list(&bytes[index..end])).unwrap();
        index = end;
    }
}

/// One instruction's bytes as `.long` words (a tail that is not a whole
/// word as `.byte`), followed by a comment saying what they are.
fn emit_words(out: &mut String, bytes: &[u8], comment: &str) {
    let words = bytes.chunks_exact(4);
    let tail = words.remainder();
    let mut directive = "\t.long\t";
    for word in words {
        write!(out, "{directive}{:#010x}", u32::from_le_bytes(word.try_into().expect("four bytes"))).unwrap();
        directive = ", ";
    }
    if !tail.is_empty() {
        let separator = if directive == ", " { "\n" } else { "" };
        write!(out, "{separator}\t.byte\t{}", byte_list(tail)).unwrap();
    }
    writeln!(out, "\t; {comment}").unwrap();
}

/// The encoding of every distinct payload line the in-process assembler
/// encodes on its own (one instruction, no fixup: nothing that depends on
/// where it lands), assembled in one batch.
fn payload_encodings<'p>(lifted: &LiftedCodeObject<'_>, patch: &'p Patch) -> HashMap<&'p str, Vec<u8>> {
    let mut distinct: Vec<&str> =
        patch.before.values().flat_map(|i| i.lines()).map(|line| &**line).filter(|line| !line.ends_with(':')).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let encoded = lifted.isa.mc.assemble(&distinct);
    distinct.into_iter().zip(encoded).filter_map(|(line, bytes)| Some((line, bytes?))).collect()
}

fn section_header(out: &mut String, section: &Section) {
    let mut flags = String::from("a");
    if section.writable() {
        flags.push('w');
    }
    if section.executable() {
        flags.push('x');
    }
    // Notes stay notes (a linker drops a `.note.gnu.build-id` of another
    // type, and every section after it moves).
    let kind = if section.no_bits() {
        "@nobits"
    } else if section.kind == object::elf::SHT_NOTE {
        "@note"
    } else {
        "@progbits"
    };
    writeln!(out, "\n\t.section\t{},\"{flags}\",{kind}", section.name).unwrap();
    if section.alignment > 1 {
        writeln!(out, "\t.p2align\t{}", section.alignment.trailing_zeros()).unwrap();
    }
}

impl LiftedCodeObject<'_> {
    /// The target id as `.amdgcn_target` and CoMGR spell it: from the
    /// metadata (v4+), or in code object v3's older syntax
    /// (`gfx908+xnack+sram-ecc`).
    pub fn target_id_string(&self) -> String {
        let code_object = self.code_object;
        let target = &code_object.target;
        if code_object.code_object_version == 3 {
            let mut id = format!("amdgcn-amd-amdhsa--{}", target.processor);
            if target.xnack == FeatureSetting::On {
                id.push_str("+xnack");
            }
            if target.sramecc == FeatureSetting::On {
                id.push_str("+sram-ecc");
            }
            return id;
        }
        code_object.metadata.target.clone().unwrap_or_else(|| format!("amdgcn-amd-amdhsa--{target}"))
    }

    /// The ISA name CoMGR takes: the target id in the current syntax
    /// whatever the code object version (`amdgcn-amd-amdhsa--gfx908:sramecc+:xnack+`).
    pub fn isa_name(&self) -> String {
        format!("amdgcn-amd-amdhsa--{}", self.code_object.target)
    }

    /// The symbols defined in a section, by address (`.kd` symbols
    /// excluded: the descriptor's own text defines them).
    fn section_symbols(&self, section: &Section, handled_kds: &BTreeSet<&str>) -> BTreeMap<u64, Vec<&Symbol>> {
        let mut symbols: BTreeMap<u64, Vec<&Symbol>> = BTreeMap::new();
        let mut seen = HashSet::new();
        for symbol in &self.code_object.symbols {
            let named = !symbol.name.is_empty()
                && matches!(symbol.kind, SymbolKind::Object | SymbolKind::Function | SymbolKind::NoType);
            if named
                && symbol.section == Some(section.index)
                && !handled_kds.contains(symbol.name.as_str())
                && seen.insert(&symbol.name)
            {
                symbols.entry(symbol.value).or_default().push(symbol);
            }
        }
        symbols
    }

    /// The name an address is referred to by in the assembly: a symbol at
    /// or before it in the same object, or a label the emitter defines.
    fn data_reference(&self, address: u64) -> (String, u64) {
        match self.symbol_containing(address) {
            Some(symbol) => (quoted(&symbol.name), address - symbol.value),
            None => (format!(".Lgpuinstr_{address:x}"), 0),
        }
    }

    /// The text of every instruction that can be written as text: what
    /// llvm-mc makes of it is exactly the original bytes. Instructions whose
    /// printed form loses bits (LLVM 15 prints `buffer_wbl2` without its
    /// cache policy) or that the assembler encodes otherwise (a literal -1
    /// where it picks the inline constant) are left out: they are written as
    /// bytes, in every path that emits code. Branches and pc-relative
    /// operands are symbolic, their encodings depend on the layout.
    fn instruction_texts(&self, names: &AsmNames, options: &EmitOptions) -> HashMap<u64, String> {
        let data_name = |address: u64| self.data_reference(address);
        let mut texts = HashMap::new();
        let mut plain: Vec<(u64, String, &[u8])> = Vec::new();
        for instruction in self.functions.iter().flat_map(|f| f.instructions()) {
            if options.force_bytes.contains(&instruction.address) {
                continue;
            }
            let symbolic = crate::stages::lift::print::is_symbolic(instruction);
            if options.code == CodeForm::Bytes && !symbolic {
                continue; // written as its bytes
            }
            let Some(text) = self.asm_instruction(instruction, names, &data_name) else { continue };
            if symbolic {
                texts.insert(instruction.address, text);
            } else {
                plain.push((instruction.address, text, &instruction.bytes));
            }
        }
        let pairs: Vec<(&str, &[u8])> = plain.iter().map(|(_, text, bytes)| (text.as_str(), *bytes)).collect();
        let exact = self.texts_assemble_to(&pairs);
        for ((address, text, _), exact) in plain.into_iter().zip(exact) {
            if exact {
                texts.insert(address, text);
            }
        }
        texts
    }

    /// The symbol `function` is defined by, named with `suffix`.
    fn function_symbol(&self, function: &Function, suffix: &str) -> Symbol {
        let mut symbol = self
            .code_object
            .symbols
            .iter()
            .find(|s| s.value == function.address && s.kind == SymbolKind::Function && s.name == function.name)
            .cloned()
            .unwrap_or(Symbol {
                name: function.name.clone(),
                value: function.address,
                size: function.size,
                kind: SymbolKind::Function,
                binding: Binding::Local,
                visibility: Visibility::Default,
                section: None,
                dynamic: false,
            });
        symbol.name.push_str(suffix);
        symbol
    }

    /// A patched function laid out as machine code: its symbol, its bytes
    /// read from [`CODE_FILE`], its relocations.
    /// Relocations go to `deferred` where it takes them (`section`: the
    /// index of the function's section).
    fn emit_machine_code(
        &self,
        out: &mut String,
        code: &machine_code::FunctionCode,
        suffix: &str,
        section: usize,
        mut deferred: Option<&mut DeferredRelocations>,
    ) {
        let function = &self.functions[code.function];
        let symbol = self.function_symbol(function, suffix);
        let name = quoted(&symbol.name);
        writeln!(out, "\n\t.p2align\t{}", if function.is_kernel() { 8 } else { 2 }).unwrap();
        symbol_header(out, &symbol);
        let label = machine_code::code_label(code.function, suffix);
        writeln!(out, "{label}:").unwrap();
        if code.length > 0 {
            writeln!(out, "\t.incbin\t\"{CODE_FILE}\", {}, {}", code.start, code.length).unwrap();
        }
        let number = deferred.as_mut().map(|d| d.start_function(&symbol.name));
        for relocation in &code.relocations {
            let (offset, kind) = (relocation.offset, relocation.kind);
            if let (Some(deferred), Some(number)) = (deferred.as_mut(), number) {
                if deferred.keep(number, section, offset, kind, &relocation.symbol, relocation.addend) {
                    continue;
                }
            }
            writeln!(out, "\t.reloc\t{label}+{offset}, {kind}, {}", relocation.target()).unwrap();
        }
        writeln!(out, "\t.size\t{name}, .-{name}").unwrap();
    }

    /// `function`'s code: as it is (no `patch`), or patched and moved, under
    /// its name followed by `suffix`.
    #[allow(clippy::too_many_arguments)]
    fn emit_function(
        &self,
        out: &mut String,
        function: &Function,
        names: &AsmNames,
        texts: &HashMap<u64, String>,
        encodings: &HashMap<&str, Vec<u8>>,
        patch: Option<&Patch>,
        suffix: &str,
        options: &EmitOptions,
        notes: &mut EmitNotes,
    ) {
        let symbol = self.function_symbol(function, suffix);
        writeln!(out).unwrap();
        if patch.is_some() {
            // Code moves: kernels must start 256-byte aligned, and sizes
            // are whatever the instrumented code takes.
            writeln!(out, "\t.p2align\t{}", if function.is_kernel() { 8 } else { 2 }).unwrap();
            symbol_header(out, &symbol);
        } else {
            symbol_directives(out, &symbol);
        }
        for block in &function.blocks {
            if block.index > 0 {
                writeln!(out, "{}:", names.code_labels[&block.address]).unwrap();
            }
            for instruction in &block.instructions {
                if let Some(lines) = patch.and_then(|p| p.before.get(&instruction.address)) {
                    let site = instruction.address;
                    writeln!(out, ".Lgpuinstr_site_{site:x}_begin:").unwrap();
                    // Alike sites share a payload's lines, labels included:
                    // each site's labels made its own here.
                    let own = |line: &str| -> String {
                        if line.contains(PAYLOAD_LABEL) {
                            line.replace(PAYLOAD_LABEL, &format!(".Lgpuinstr_site{site:x}_payload"))
                        } else {
                            line.to_string()
                        }
                    };
                    for line in lines.lines() {
                        if line.ends_with(':') {
                            writeln!(out, "{}", own(line)).unwrap();
                        } else if let Some(bytes) = encodings.get(&**line) {
                            emit_words(out, bytes, line);
                        } else {
                            writeln!(out, "\t{}", own(line)).unwrap();
                        }
                    }
                    writeln!(out, ".Lgpuinstr_site_{site:x}_end:").unwrap();
                }
                if let Some(relaxed) = patch.and_then(|p| p.relaxed.get(&instruction.address)) {
                    let target = match instruction.flow {
                        crate::stages::lift::Flow::Branch { target }
                        | crate::stages::lift::Flow::ConditionalBranch { target } => target,
                        _ => instruction.address,
                    };
                    let target = &names.code_labels[&target];
                    let (at, n) = (instruction.address, relaxed.pair);
                    if let Some(inverse) = relaxed.inverse {
                        writeln!(out, "\t{inverse} .Lgpuinstr_relax_{at:x}_skip").unwrap();
                    }
                    writeln!(out, "\ts_getpc_b64 s[{n}:{}]\n.Lgpuinstr_relax_{at:x}_pc:", n + 1).unwrap();
                    writeln!(out, "\ts_add_u32 s{n}, s{n}, ({target}-.Lgpuinstr_relax_{at:x}_pc)&4294967295").unwrap();
                    writeln!(out, "\ts_addc_u32 s{}, s{}, ({target}-.Lgpuinstr_relax_{at:x}_pc)>>32", n + 1, n + 1)
                        .unwrap();
                    writeln!(out, "\ts_setpc_b64 s[{n}:{}]\n.Lgpuinstr_relax_{at:x}_skip:", n + 1).unwrap();
                    continue;
                }
                match texts.get(&instruction.address) {
                    Some(text) => writeln!(out, "\t{text}").unwrap(),
                    None if options.code == CodeForm::Bytes && instruction.decoded => {
                        emit_words(out, &instruction.bytes, self.isa.opcode_name(instruction.raw.opcode))
                    }
                    None => {
                        let reason = if !instruction.decoded {
                            "undecodable"
                        } else if options.force_bytes.contains(&instruction.address) {
                            "re-assembled differently"
                        } else {
                            "its text assembles to other bytes"
                        };
                        notes.raw_instructions.push((instruction.address, reason.to_string()));
                        writeln!(
                            out,
                            "\t.byte\t{}\t; {}",
                            byte_list(&instruction.bytes),
                            self.isa.opcode_name(instruction.raw.opcode)
                        )
                        .unwrap();
                    }
                }
            }
        }
        if patch.is_some() {
            let name = quoted(&symbol.name);
            writeln!(out, "\t.size\t{name}, .-{name}").unwrap();
        }
    }

    /// Names and instruction texts for the instrumented copies: block
    /// labels of their own, and calls and branches to the copies.
    fn copy_names(&self, names: &AsmNames, texts: &HashMap<u64, String>) -> (AsmNames, HashMap<u64, String>) {
        let mut copy = AsmNames { code_labels: HashMap::new() };
        for (address, label) in &names.code_labels {
            let renamed = match label.strip_prefix(".LBB") {
                Some(rest) => format!(".Lgpuinstr_copy_BB{rest}"),
                None => format!("{label}{INSTRUMENTED_SUFFIX}"),
            };
            copy.code_labels.insert(*address, renamed);
        }
        let data_name = |address: u64| self.data_reference(address);
        let mut copy_texts = texts.clone();
        for instruction in self.functions.iter().flat_map(|f| f.instructions()) {
            if texts.contains_key(&instruction.address) && crate::stages::lift::print::is_symbolic(instruction) {
                if let Some(text) = self.asm_instruction(instruction, &copy, &data_name) {
                    copy_texts.insert(instruction.address, text);
                }
            }
        }
        (copy, copy_texts)
    }

    /// A kernel descriptor as an `.amdhsa_kernel` block when the directives
    /// can express it and the .kd symbol is what the directive makes of it
    /// (it copies the kernel symbol's binding and visibility); otherwise as
    /// data with its own symbol and the entry offset as a relocation. For
    /// the kernel's copy named with `suffix`.
    fn descriptor_text(
        &self,
        kernel: &crate::stages::load::Kernel,
        descriptor: &KernelDescriptor,
        suffix: &str,
        notes: &mut EmitNotes,
    ) -> String {
        let code_object = self.code_object;
        let find = |name: &str, address: u64| code_object.symbols.iter().find(|s| s.name == name && s.value == address);
        let kd_symbol = find(&kernel.metadata.symbol, kernel.descriptor_address);
        let code_symbol = code_object
            .symbols
            .iter()
            .find(|s| s.value == kernel.code_address && s.kind == SymbolKind::Function && s.name == kernel.name());
        let same_symbol_properties = match (kd_symbol, code_symbol) {
            (Some(kd), Some(code)) => kd.binding == code.binding && kd.visibility == code.visibility,
            _ => false,
        };
        let name = format!("{}{suffix}", kernel.name());
        match descriptor.directives(&code_object.target) {
            Ok(directives) if same_symbol_properties => {
                let mut text = format!("\t.p2align\t6\n\t.amdhsa_kernel {}\n", quoted(&name));
                for (name, value) in directives {
                    writeln!(text, "\t\t{name} {value}").unwrap();
                }
                text.push_str("\t.end_amdhsa_kernel\n");
                text
            }
            outcome => {
                let mut reasons = outcome.err().unwrap_or_default();
                if !same_symbol_properties {
                    reasons.push("its .kd symbol's binding or visibility differs from the kernel symbol's".into());
                }
                notes.raw_descriptors.push((name.clone(), reasons));
                let mut text = String::new();
                let fallback = Symbol {
                    name: kernel.metadata.symbol.clone(),
                    value: kernel.descriptor_address,
                    size: 64,
                    kind: SymbolKind::Object,
                    binding: Binding::Global,
                    visibility: Visibility::Protected,
                    section: None,
                    dynamic: true,
                };
                let mut symbol = kd_symbol.unwrap_or(&fallback).clone();
                if !suffix.is_empty() {
                    symbol.name = format!("{name}.kd");
                    text.push_str("\t.p2align\t6\n");
                }
                symbol_directives(&mut text, &symbol);
                let bytes = descriptor.encode();
                emit_bytes(&mut text, &bytes[..16]);
                // R_AMDGPU_REL64 at offset 16: code - (descriptor + 16) + 16.
                writeln!(text, "\t.quad\t{}@rel64+16", quoted(&name)).unwrap();
                emit_bytes(&mut text, &bytes[24..]);
                text
            }
        }
    }

    /// The whole code object as assembly.
    pub fn emit_assembly(&self, options: &EmitOptions) -> Assembly {
        let code_object = self.code_object;
        let mut notes = EmitNotes::default();
        let mut out = String::new();
        writeln!(out, "; Emitted by gpuinstr-link.\n\t.amdgcn_target \"{}\"", self.target_id_string()).unwrap();
        // The kernels (and their descriptors) this part holds, and those
        // another part holds.
        let kernels_here: BTreeSet<usize> = match options.part {
            Part::Rest { .. } => BTreeSet::new(),
            _ => self.functions.iter().filter_map(|f| f.kernel_index()).collect(),
        };
        let elsewhere = |kernel: usize| match options.part {
            Part::Whole => false,
            Part::Kernels => !kernels_here.contains(&kernel),
            Part::Rest { .. } => true,
        };
        let mut names_elsewhere: HashSet<&str> = HashSet::new();
        let mut names_here: HashSet<&str> = HashSet::new();
        for (index, kernel) in code_object.kernels.iter().enumerate() {
            let names = if elsewhere(index) { &mut names_elsewhere } else { &mut names_here };
            names.insert(kernel.name());
            names.insert(kernel.metadata.symbol.as_str());
        }
        let declared_here = |name: &str| match options.part {
            Part::Whole => true,
            Part::Kernels => names_here.contains(name),
            Part::Rest { .. } => !names_elsewhere.contains(name),
        };
        // Global symbols are declared first, in the input's order: the
        // assembler numbers symbols in the order it meets them and the linker
        // keeps that order in .dynsym. Undefined ones (LDS variables the code
        // no longer names) are declared only here, and stay.
        for symbol in code_object.symbols.iter().filter(|s| !s.name.is_empty() && declared_here(&s.name)) {
            let name = quoted(&symbol.name);
            match symbol.binding {
                Binding::Global => writeln!(out, "\t.globl\t{name}").unwrap(),
                Binding::Weak => writeln!(out, "\t.weak\t{name}").unwrap(),
                _ => continue,
            }
            // Visibility too: .amdhsa_kernel copies the kernel symbol's
            // visibility to the .kd symbol when it runs.
            match symbol.visibility {
                Visibility::Protected => writeln!(out, "\t.protected\t{name}").unwrap(),
                Visibility::Hidden => writeln!(out, "\t.hidden\t{name}").unwrap(),
                Visibility::Internal => writeln!(out, "\t.internal\t{name}").unwrap(),
                Visibility::Default => {}
            }
        }

        // Each kernel's descriptor at its place; with originals kept, the
        // original's there and the copy's after the code.
        let mut handled_kds = BTreeSet::new();
        let mut descriptor_text: BTreeMap<u64, String> = BTreeMap::new();
        let patch = options.patch.as_ref();
        let originals = options.keep_originals && patch.is_some();
        let mut copy_descriptors = String::new();
        for (kernel_index, kernel) in code_object.kernels.iter().enumerate() {
            handled_kds.insert(kernel.metadata.symbol.as_str());
            if elsewhere(kernel_index) {
                continue;
            }
            let patched = patch.and_then(|p| p.descriptors.get(&kernel_index)).unwrap_or(&kernel.descriptor);
            let here = if originals { &kernel.descriptor } else { patched };
            descriptor_text.insert(kernel.descriptor_address, self.descriptor_text(kernel, here, "", &mut notes));
            if originals {
                copy_descriptors.push_str(&self.descriptor_text(kernel, patched, INSTRUMENTED_SUFFIX, &mut notes));
            }
        }
        // Descriptors another part holds take no room here.
        let descriptors_elsewhere: BTreeSet<u64> = code_object
            .kernels
            .iter()
            .enumerate()
            .filter(|(index, _)| elsewhere(*index))
            .map(|(_, kernel)| kernel.descriptor_address)
            .collect();

        let names = AsmNames::new(self);
        let texts = self.instruction_texts(&names, options);
        // Patched code as machine code where it can be laid out here, else
        // payload lines as words.
        let suffix = if originals { INSTRUMENTED_SUFFIX } else { "" };
        let mut laid_out = None;
        let mut encodings = HashMap::new();
        if let (Some(patch), CodeForm::Bytes) = (patch, options.code) {
            let executable: Vec<usize> = (0..self.functions.len())
                .filter(|f| {
                    let address = self.functions[*f].address;
                    code_object.sections.iter().any(|s| s.loadable && s.executable() && s.contains(address))
                })
                .collect();
            match self.machine_code(&executable, patch, suffix, options.listing) {
                Ok(code) => {
                    // A symbol only a `.reloc` names is not entered in the
                    // object's symbol table (its relocations would name
                    // symbol 0): declared global here, as the tool's globals
                    // are, in the order the code refers to them (the order
                    // an assembler reading instructions enters them, which
                    // the linker's GOT follows).
                    for symbol in &code.payload_symbols {
                        // (A group of kernels defines none: the rest does.)
                        let defined = matches!(options.part, Part::Whole | Part::Rest { .. })
                            && patch.appended.contains(&format!("\n{symbol}:"));
                        if !defined || patch.appended.contains(&format!("\t.globl\t{symbol}\n")) {
                            writeln!(out, "\t.globl\t{symbol}").unwrap();
                        }
                    }
                    laid_out = Some(code)
                }
                Err(machine_code::Unplaceable(why)) => {
                    notes.code_as_assembly = Some(why);
                    encodings = payload_encodings(self, patch);
                }
            }
        }
        // Relocations past the first of each kind and target added to the
        // object directly (relocations.rs) unless asked for as text.
        let mut deferred = (laid_out.is_some() && !options.relocations_as_text).then(DeferredRelocations::default);
        let code_of: HashMap<usize, &machine_code::FunctionCode> =
            laid_out.iter().flat_map(|c| &c.functions).map(|f| (f.function, f)).collect();
        let indices: HashMap<u64, usize> = self.functions.iter().enumerate().map(|(i, f)| (f.address, i)).collect();
        let index_of = |function: &Function| indices[&function.address];
        // Local labels for pc-relative targets no symbol covers.
        let mut data_labels: BTreeSet<u64> = BTreeSet::new();
        for function in &self.functions {
            for instruction in function.instructions() {
                if let Some(pc) = &instruction.pc_relative {
                    if !names.code_labels.contains_key(&pc.target)
                        && self.got_slot_symbol(pc.target).is_none()
                        && self.data_reference(pc.target).0.starts_with(".L")
                    {
                        data_labels.insert(pc.target);
                    }
                }
            }
        }

        let mut sections: Vec<&Section> = code_object.sections.iter().filter(|s| s.loadable).collect();
        sections.sort_by_key(|s| s.address);
        for section in sections {
            if LINKER_SECTIONS.contains(&section.name.as_str()) {
                continue;
            }
            // The linker writes the build id again (`link`'s `--build-id`).
            if section.name == ".note.gnu.build-id" && code_object.build_id().is_some() {
                continue;
            }
            if section.name == ".got" {
                notes.skipped_sections.push(section.name.clone());
                continue;
            }
            if let (Part::Kernels, false) = (&options.part, section.executable()) {
                // Of data, the group's descriptors only (the rest's part has
                // the data); its code is written as in the whole, below.
                if descriptor_text.keys().any(|a| section.contains(*a)) {
                    section_header(&mut out, section);
                    for (_, text) in descriptor_text.range(section.address..section.address + section.size) {
                        out.push_str(text);
                    }
                }
                continue;
            }
            section_header(&mut out, section);
            let data = code_object.section_bytes(section);
            let bytes_between = |out: &mut String, from: u64, to: u64| {
                if to <= from {
                    return;
                }
                match data {
                    Some(data) => {
                        emit_bytes(out, &data[(from - section.address) as usize..(to - section.address) as usize])
                    }
                    None => writeln!(out, "\t.zero\t{}", to - from).unwrap(),
                }
            };
            let mut cursor = section.address;
            if section.executable() {
                // Patched code moves; padding becomes alignment (emit_function).
                let in_place = if originals { None } else { patch };
                for function in self.functions.iter().filter(|f| section.contains(f.address)) {
                    if in_place.is_none() {
                        bytes_between(&mut out, cursor, function.address);
                    }
                    match code_of.get(&index_of(function)).filter(|_| in_place.is_some()) {
                        Some(code) => self.emit_machine_code(&mut out, code, "", section.index, deferred.as_mut()),
                        None => self.emit_function(
                            &mut out, function, &names, &texts, &encodings, in_place, "", options, &mut notes,
                        ),
                    }
                    cursor = function.end();
                }
                if let (true, Some(patch)) = (originals, patch) {
                    bytes_between(&mut out, cursor, section.address + section.size);
                    cursor = section.address + section.size;
                    if laid_out.is_some() {
                        for function in self.functions.iter().filter(|f| section.contains(f.address)) {
                            let code = code_of[&index_of(function)];
                            let deferred = deferred.as_mut();
                            self.emit_machine_code(&mut out, code, INSTRUMENTED_SUFFIX, section.index, deferred);
                        }
                        continue;
                    }
                    let (copy_names, copy_texts) = self.copy_names(&names, &texts);
                    for function in self.functions.iter().filter(|f| section.contains(f.address)) {
                        let (names, texts, suffix) = (&copy_names, &copy_texts, INSTRUMENTED_SUFFIX);
                        let encodings = &encodings;
                        self.emit_function(
                            &mut out,
                            function,
                            names,
                            texts,
                            encodings,
                            Some(patch),
                            suffix,
                            options,
                            &mut notes,
                        );
                    }
                }
            } else {
                let symbols = self.section_symbols(section, &handled_kds);
                let mut points: BTreeSet<u64> = symbols.keys().copied().collect();
                points.extend(descriptor_text.keys().filter(|a| section.contains(**a)));
                points.extend(descriptors_elsewhere.iter().filter(|a| section.contains(**a)));
                points.extend(data_labels.iter().filter(|a| section.contains(**a)));
                for point in points {
                    if point < cursor {
                        continue; // inside a descriptor already written
                    }
                    bytes_between(&mut out, cursor, point);
                    cursor = point;
                    if data_labels.contains(&point) {
                        writeln!(out, ".Lgpuinstr_{point:x}:").unwrap();
                    }
                    for symbol in symbols.get(&point).into_iter().flatten() {
                        symbol_directives(&mut out, symbol);
                    }
                    if let Some(text) = descriptor_text.get(&point) {
                        out.push_str(text);
                        cursor = point + crate::stages::load::descriptor::SIZE as u64;
                    }
                    if descriptors_elsewhere.contains(&point) {
                        cursor = point + crate::stages::load::descriptor::SIZE as u64;
                    }
                }
            }
            if !(section.executable() && patch.is_some()) {
                bytes_between(&mut out, cursor, section.address + section.size);
            }
        }

        let kernels_part = matches!(options.part, Part::Kernels);
        let mut point_table = Vec::new();
        if let Some(patch) = patch {
            if !kernels_part {
                out.push_str(&patch.appended);
            }
            if !copy_descriptors.is_empty() {
                out.push_str("\n\t.section\t.rodata,\"a\",@progbits\n");
                out.push_str(&copy_descriptors);
            }
            match laid_out.as_mut() {
                // By function: one relocation per function, the sites read
                // with the code (a large code object has half a million).
                Some(code) => {
                    let sites: Vec<(u64, u32, u32, u32)> = code
                        .functions
                        .iter()
                        .enumerate()
                        .flat_map(|(index, f)| {
                            f.sites
                                .iter()
                                .map(move |(site, begin, end)| (*site, index as u32, *begin as u32, *end as u32))
                        })
                        .collect();
                    if !sites.is_empty() {
                        use crate::stages::load::instrumented::{sites_by_function_bytes, SITES_BY_FUNCTION};
                        let count = sites.len();
                        let entries = sites_by_function_bytes(sites);
                        writeln!(out, "\n\t.section\t{SITE_TABLE},\"\",@progbits\n\t.p2align\t3").unwrap();
                        match kernels_part {
                            true => writeln!(out, "\t.quad\t{SITES_IN_BLOCKS:#x}, {}, {count}", code.functions.len()),
                            false => writeln!(out, "\t.quad\t{SITES_BY_FUNCTION:#x}, {}", code.functions.len()),
                        }
                        .unwrap();
                        for f in &code.functions {
                            writeln!(out, "\t.quad\t{}", machine_code::code_label(f.function, suffix)).unwrap();
                        }
                        writeln!(out, "\t.incbin\t\"{CODE_FILE}\", {}, {}", code.blob.len(), entries.len()).unwrap();
                        code.blob.extend_from_slice(&entries);
                    }
                }
                None => out.push_str(&site_table(
                    patch
                        .before
                        .iter()
                        .filter(|(_, lines)| !lines.is_empty())
                        .map(|(site, _)| {
                            let label = |end: &str| format!(".Lgpuinstr_site_{site:x}_{end}");
                            (*site, label("begin"), label("end"))
                        })
                        .collect(),
                    kernels_part,
                )),
            }
            // Each point's instruction as assembly: the emitted text, or
            // (written as bytes) printed for the table.
            let at_points: HashSet<u64> = patch.points.iter().map(|p| p.address).collect();
            // Alike encodings print alike unless they branch or refer to
            // something by pc (a label or symbol then depends on the place).
            let mut by_bytes: HashMap<&[u8], Option<String>> = HashMap::new();
            let mut printed: HashMap<u64, String> = HashMap::new();
            for i in self.functions.iter().flat_map(|f| f.instructions()) {
                if !at_points.contains(&i.address) || texts.contains_key(&i.address) {
                    continue;
                }
                let placeless = i.pc_relative.is_none()
                    && !matches!(
                        i.flow,
                        crate::stages::lift::Flow::Branch { .. } | crate::stages::lift::Flow::ConditionalBranch { .. }
                    );
                let text = || self.asm_instruction(i, &names, &|a| self.data_reference(a));
                let text = match placeless {
                    true => by_bytes.entry(&i.bytes).or_insert_with(text).clone(),
                    false => text(),
                };
                if let Some(text) = text {
                    printed.insert(i.address, text);
                }
            }
            let points: Vec<_> = patch
                .points
                .iter()
                .map(|point| {
                    let text = texts.get(&point.address).or(printed.get(&point.address));
                    let text = text.map_or(point.text.clone(), |t| std::sync::Arc::from(t.trim()));
                    crate::stages::load::instrumented::PointEntry { text, ..point.clone() }
                })
                .collect();
            // (The rest's is every group's: hundreds of MB, not copied.)
            let table: std::borrow::Cow<'_, [u8]> = match &options.part {
                Part::Whole => crate::stages::load::instrumented::point_table_bytes(&points).into(),
                Part::Kernels => {
                    point_table = crate::stages::load::instrumented::point_table_bytes(&points);
                    (&[][..]).into()
                }
                Part::Rest { point_table } => point_table.as_slice().into(),
            };
            match laid_out.as_mut() {
                // Data with no relocation: read with the code.
                Some(code) => {
                    if !table.is_empty() {
                        let section = crate::stages::load::instrumented::POINT_TABLE;
                        writeln!(out, "\n\t.section\t{section},\"\",@progbits\n\t.p2align\t3").unwrap();
                        writeln!(out, "\t.incbin\t\"{CODE_FILE}\", {}, {}", code.blob.len(), table.len()).unwrap();
                        code.blob.extend_from_slice(&table);
                    }
                }
                None => out.push_str(&crate::stages::load::instrumented::point_table_assembly(&table)),
            }
            out.push_str(&crate::stages::load::instrumented::partial_table_assembly(&patch.partial));
        }
        out.push('\n');
        let (code, listing) = laid_out.map_or((Vec::new(), None), |c| (c.blob, c.listing));
        let deferred = deferred.unwrap_or_default();
        if kernels_part {
            return Assembly { text: out, code, listing, notes, deferred, point_table, timings: Vec::new() };
        }
        let patched = patch.and_then(|p| p.metadata.as_ref());
        let metadata = match patched {
            Some(patched) if originals => &with_copies(&code_object.metadata.document, patched),
            Some(patched) => patched,
            None => &code_object.metadata.document,
        };
        // One block per note the input had (each assembles into a note).
        for note in code_object.metadata.split_into_notes(metadata) {
            out.push_str(&metadata_yaml::amdgpu_metadata_block(&note));
        }
        Assembly { text: out, code, listing, notes, deferred, point_table, timings: Vec::new() }
    }
}

/// The original metadata with each kernel of `patched` added as its copy
/// (`.name` and `.symbol` renamed with [`INSTRUMENTED_SUFFIX`]).
fn with_copies(original: &rmpv::Value, patched: &rmpv::Value) -> rmpv::Value {
    let kernels_of = |document: &rmpv::Value| -> Vec<rmpv::Value> {
        document
            .as_map()
            .and_then(|m| m.iter().find(|(k, _)| k.as_str() == Some("amdhsa.kernels")))
            .and_then(|(_, v)| v.as_array().cloned())
            .unwrap_or_default()
    };
    let mut kernels = kernels_of(original);
    for mut kernel in kernels_of(patched) {
        if let rmpv::Value::Map(entries) = &mut kernel {
            for (key, value) in entries.iter_mut() {
                let renamed = match (key.as_str(), value.as_str()) {
                    (Some(".name"), Some(name)) => format!("{name}{INSTRUMENTED_SUFFIX}"),
                    (Some(".symbol"), Some(symbol)) => {
                        let name = symbol.strip_suffix(".kd").unwrap_or(symbol);
                        format!("{name}{INSTRUMENTED_SUFFIX}.kd")
                    }
                    _ => continue,
                };
                *value = rmpv::Value::from(renamed);
            }
        }
        kernels.push(kernel);
    }
    let mut document = original.clone();
    if let rmpv::Value::Map(entries) = &mut document {
        if let Some((_, value)) = entries.iter_mut().find(|(key, _)| key.as_str() == Some("amdhsa.kernels")) {
            *value = rmpv::Value::Array(kernels);
        }
    }
    document
}

/// The site table (`.gpuinstr.sites`, not loaded): one entry per address
/// that got inserted code, `(original address, first byte, end)` as three
/// little-endian u64, in original address order. Tools map a site back to
/// the application's code with it; `verify` reads the inserted regions from it.
/// As a block (`in_block`: a group of kernels' part), each site is a
/// function of its own in the block's header.
fn site_table(mut sites: Vec<(u64, String, String)>, in_block: bool) -> String {
    if sites.is_empty() {
        return String::new();
    }
    sites.sort_unstable_by_key(|(site, _, _)| *site);
    let mut out = format!("\n\t.section\t{SITE_TABLE},\"\",@progbits\n\t.p2align\t3\n");
    if in_block {
        writeln!(out, "\t.quad\t{SITES_IN_BLOCKS:#x}, {0}, {0}", sites.len()).unwrap();
        for (_, begin, _) in &sites {
            writeln!(out, "\t.quad\t{begin}").unwrap();
        }
        for (index, (site, begin, end)) in sites.iter().enumerate() {
            writeln!(out, "\t.quad\t{site:#x}\n\t.long\t{index}, 0, {end}-{begin}, 0").unwrap();
        }
        return out;
    }
    for (site, begin, end) in sites {
        writeln!(out, "\t.quad\t{site:#x}, {begin}, {end}").unwrap();
    }
    out
}
