//! `gpuinstr-link roundtrip`: lift and re-emit a code object with no
//! changes, and check the result against the input kernel by kernel.

use std::fmt::Write;

use serde::Serialize;

use crate::stages::emit::link::{build, EmitError, Linker};
use crate::stages::emit::{EmitNotes, EmitOptions};
use crate::stages::lift::{lift, LiftError, LiftStatistics, LiftedCodeObject};
use crate::stages::load::CodeObject;

/// Identical, or how it differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "verdict", content = "difference")]
pub enum Verdict {
    Identical,
    Different(String),
    Missing,
}

impl Verdict {
    fn compare_bytes(original: &[u8], rebuilt: Option<&[u8]>) -> Verdict {
        match rebuilt {
            None => Verdict::Missing,
            Some(rebuilt) if rebuilt == original => Verdict::Identical,
            Some(rebuilt) => {
                let first =
                    original.iter().zip(rebuilt).position(|(a, b)| a != b).unwrap_or(original.len().min(rebuilt.len()));
                let count = original.iter().zip(rebuilt).filter(|(a, b)| a != b).count();
                Verdict::Different(format!(
                    "{count} bytes differ, first at offset {first:#x}; sizes {} and {}",
                    original.len(),
                    rebuilt.len()
                ))
            }
        }
    }

    pub fn is_identical(&self) -> bool {
        *self == Verdict::Identical
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct FunctionVerdict {
    pub name: String,
    pub kernel: bool,
    pub code: Verdict,
    /// Kernels only.
    pub descriptor: Option<Verdict>,
    pub metadata: Option<Verdict>,
}

impl FunctionVerdict {
    pub fn identical(&self) -> bool {
        self.code.is_identical()
            && self.descriptor.as_ref().is_none_or(Verdict::is_identical)
            && self.metadata.as_ref().is_none_or(Verdict::is_identical)
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct RoundTripReport {
    pub target: String,
    pub lift: LiftStatistics,
    pub functions: Vec<FunctionVerdict>,
    /// The metadata notes, byte for byte, as many as there were.
    pub metadata_note: Verdict,
    /// Loadable sections at the same addresses with the same sizes.
    pub layout: Verdict,
    /// Every loadable section byte for byte (symbol tables, hash tables,
    /// data and code).
    pub sections: Verdict,
    pub raw_instructions: usize,
    /// Descriptors written as data (with the reason) instead of `.amdhsa_kernel`.
    pub raw_descriptors: Vec<String>,
    pub raw_descriptor_reasons: Vec<String>,
    pub skipped_sections: Vec<String>,
    /// Sections the linker adds that the original's linker did not
    /// (not compared).
    pub linker_additions: Vec<String>,
}

/// The section lld 18+ adds to pad the RELRO segment.
const RELRO_PADDING: &str = ".relro_padding";

impl RoundTripReport {
    pub fn identical(&self) -> bool {
        self.functions.iter().all(FunctionVerdict::identical) && self.metadata_note.is_identical()
    }

    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for function in &self.functions {
            let verdict = if function.identical() { "identical" } else { "DIFFERENT" };
            let kind = if function.kernel { "kernel" } else { "function" };
            writeln!(out, "{verdict:9} {kind:8} {}", function.name).unwrap();
            for (what, v) in [
                ("code", Some(&function.code)),
                ("descriptor", function.descriptor.as_ref()),
                ("metadata", function.metadata.as_ref()),
            ] {
                match v {
                    Some(Verdict::Different(why)) => writeln!(out, "          {what}: {why}").unwrap(),
                    Some(Verdict::Missing) => writeln!(out, "          {what}: missing from the output").unwrap(),
                    _ => {}
                }
            }
        }
        let identical = self.functions.iter().filter(|f| f.identical()).count();
        writeln!(
            out,
            "\n{identical} of {} functions identical ({} kernels); {} instructions lifted, {} written as bytes",
            self.functions.len(),
            self.functions.iter().filter(|f| f.kernel).count(),
            self.lift.instructions,
            self.raw_instructions
        )
        .unwrap();
        let line = |v: &Verdict| match v {
            Verdict::Identical => "identical".to_string(),
            Verdict::Different(why) => format!("different: {why}"),
            Verdict::Missing => "missing".to_string(),
        };
        writeln!(
            out,
            "metadata note: {}\nsection layout: {}\nloaded sections: {}",
            line(&self.metadata_note),
            line(&self.layout),
            line(&self.sections)
        )
        .unwrap();
        if !self.raw_descriptors.is_empty() {
            // One line however many kernels: each reason with its count, a few names.
            let mut reasons: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
            for reason in &self.raw_descriptor_reasons {
                *reasons.entry(reason).or_default() += 1;
            }
            let reasons: Vec<String> = reasons.iter().map(|(why, n)| format!("{n}: {why}")).collect();
            const NAMED: usize = 3;
            let names: Vec<&str> = self
                .raw_descriptors
                .iter()
                .take(NAMED)
                .map(|entry| entry.split(" (").next().unwrap_or(entry))
                .collect();
            let more = self.raw_descriptors.len().saturating_sub(NAMED);
            writeln!(
                out,
                "descriptors written as data, not .amdhsa_kernel: {} kernels ({}), e.g. {}{}",
                self.raw_descriptors.len(),
                reasons.join("; "),
                names.join(", "),
                if more > 0 { format!(" and {more} more") } else { String::new() }
            )
            .unwrap();
        }
        if !self.skipped_sections.is_empty() {
            writeln!(out, "sections not reproduced: {}", self.skipped_sections.join(", ")).unwrap();
        }
        if !self.linker_additions.is_empty() {
            writeln!(out, "sections this linker adds: {}", self.linker_additions.join(", ")).unwrap();
        }
        out
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RoundTripError {
    #[error(transparent)]
    Lift(#[from] LiftError),
    #[error(transparent)]
    Emit(#[from] EmitError),
    #[error("the re-emitted code object does not load back: {0}")]
    Reload(crate::error::LoadProblem),
}

fn kernel_metadata(code_object: &CodeObject, name: &str) -> Option<rmpv::Value> {
    let kernels = code_object
        .metadata
        .document
        .as_map()?
        .iter()
        .find(|(k, _)| k.as_str() == Some("amdhsa.kernels"))?
        .1
        .as_array()?;
    kernels
        .iter()
        .find(|k| {
            k.as_map()
                .is_some_and(|m| m.iter().any(|(key, v)| key.as_str() == Some(".name") && v.as_str() == Some(name)))
        })
        .cloned()
}

/// Compares the rebuilt code object with the lifted original.
pub fn check(lifted: &LiftedCodeObject<'_>, rebuilt: &CodeObject, notes: &EmitNotes) -> RoundTripReport {
    let original = lifted.code_object;
    let mut functions = Vec::new();
    for function in &lifted.functions {
        let code = Verdict::compare_bytes(
            original.bytes_at(function.address, function.size).unwrap_or_default(),
            rebuilt.bytes_at(function.address, function.size),
        );
        let (descriptor, metadata) = match function.kind {
            crate::stages::lift::FunctionKind::Kernel(index) => {
                let kernel = &original.kernels[index];
                let new = rebuilt.kernels.iter().find(|k| k.name() == kernel.name());
                let descriptor = match new {
                    None => Verdict::Missing,
                    Some(new) if new.descriptor_address != kernel.descriptor_address => Verdict::Different(format!(
                        "at {:#x} instead of {:#x}",
                        new.descriptor_address, kernel.descriptor_address
                    )),
                    Some(new) => Verdict::compare_bytes(&kernel.descriptor.encode(), Some(&new.descriptor.encode())),
                };
                let metadata = match (kernel_metadata(original, kernel.name()), kernel_metadata(rebuilt, kernel.name()))
                {
                    (Some(a), Some(b)) if a == b => Verdict::Identical,
                    (Some(_), Some(_)) => Verdict::Different("the kernel's metadata entries differ".into()),
                    _ => Verdict::Missing,
                };
                (Some(descriptor), Some(metadata))
            }
            crate::stages::lift::FunctionKind::DeviceFunction => (None, None),
        };
        functions.push(FunctionVerdict {
            name: function.name.clone(),
            kernel: function.is_kernel(),
            code,
            descriptor,
            metadata,
        });
    }
    let layout_of = |c: &CodeObject| -> Vec<(String, u64, u64)> {
        c.sections.iter().filter(|s| s.loadable).map(|s| (s.name.clone(), s.address, s.size)).collect()
    };
    let (before, mut after) = (layout_of(original), layout_of(rebuilt));
    // lld 18 and newer pad the RELRO segment to a page with a section of its
    // own (NOBITS: no bytes, and the page was mapped anyway); an original
    // linked by an older lld has none. Said, not compared.
    let mut linker_additions = Vec::new();
    if !before.iter().any(|(name, ..)| name == RELRO_PADDING) && after.iter().any(|(name, ..)| name == RELRO_PADDING) {
        after.retain(|(name, ..)| name != RELRO_PADDING);
        linker_additions.push(format!("{RELRO_PADDING} (lld 18 and newer pad the RELRO segment to a page; no bytes)"));
    }
    let layout = if before == after {
        Verdict::Identical
    } else {
        let mut differing: Vec<String> = before
            .iter()
            .filter(|b| !after.contains(b))
            .map(|(name, address, size)| match after.iter().find(|a| &a.0 == name) {
                Some((_, a, s)) => format!("{name} {address:#x}+{size:#x} -> {a:#x}+{s:#x}"),
                None => format!("{name} missing"),
            })
            .collect();
        differing.extend(
            after
                .iter()
                .filter(|(name, ..)| !before.iter().any(|b| &b.0 == name))
                .map(|(name, address, size)| format!("{name} {address:#x}+{size:#x} added")),
        );
        Verdict::Different(differing.join(", "))
    };
    let mut differing_sections = Vec::new();
    for section in original.sections.iter().filter(|s| s.loadable) {
        let again = rebuilt.sections.iter().find(|s| s.name == section.name && s.loadable);
        if again.is_none_or(|again| original.section_bytes(section) != rebuilt.section_bytes(again)) {
            differing_sections.push(section.name.clone());
        }
    }
    let sections = if differing_sections.is_empty() {
        Verdict::Identical
    } else {
        Verdict::Different(format!("sections {} differ", differing_sections.join(", ")))
    };
    RoundTripReport {
        target: original.target.to_string(),
        sections,
        lift: lifted.statistics(),
        functions,
        metadata_note: if original.metadata_notes.len() == rebuilt.metadata_notes.len() {
            Verdict::compare_bytes(&original.metadata_notes.concat(), Some(&rebuilt.metadata_notes.concat()))
        } else {
            Verdict::Different(format!(
                "{} metadata notes, {} in the original",
                rebuilt.metadata_notes.len(),
                original.metadata_notes.len()
            ))
        },
        layout,
        raw_instructions: notes.raw_instructions.len(),
        raw_descriptors: notes
            .raw_descriptors
            .iter()
            .map(|(name, why)| format!("{name} ({})", why.join(", ")))
            .collect(),
        raw_descriptor_reasons: notes.raw_descriptors.iter().flat_map(|(_, why)| why.clone()).collect(),
        skipped_sections: notes.skipped_sections.clone(),
        linker_additions,
    }
}

/// Instructions whose bytes differ in the rebuilt code object.
fn differing_instructions(lifted: &LiftedCodeObject<'_>, rebuilt: &CodeObject) -> Vec<u64> {
    lifted
        .functions
        .iter()
        .flat_map(|f| f.instructions())
        .filter(|i| rebuilt.bytes_at(i.address, i.size()) != Some(&i.bytes[..]))
        .map(|i| i.address)
        .collect()
}

/// Lifts, re-emits and links a code object; the rebuilt bytes and the check.
pub fn roundtrip(code_object: &CodeObject, linker: Linker) -> Result<(Vec<u8>, RoundTripReport), RoundTripError> {
    let lifted = lift(code_object)?;
    let mut options = EmitOptions::default();
    let mut attempt = 0;
    loop {
        let (bytes, assembly) = build(&lifted, &options, linker)?;
        let rebuilt = CodeObject::parse(bytes.clone(), code_object.origin.clone()).map_err(RoundTripError::Reload)?;
        let report = check(&lifted, &rebuilt, &assembly.notes);
        attempt += 1;
        // One more try with the instructions llvm-mc re-encoded differently
        // written as bytes (only meaningful when the layout held).
        if attempt == 1 && !report.identical() && report.layout.is_identical() {
            let differing = differing_instructions(&lifted, &rebuilt);
            if !differing.is_empty() {
                options.force_bytes.extend(differing);
                continue;
            }
        }
        return Ok((bytes, report));
    }
}
