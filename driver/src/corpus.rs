//! Round trips over a corpus: every code object of one target in a set of
//! files (fat binaries included), lifted, re-emitted, linked and checked,
//! with the numbers and the failure classes aggregated.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;

use crate::parallel::{for_each_on_threads, load_code_objects};
use crate::roundtrip::{roundtrip, Verdict};
use crate::stages::emit::link::Linker;
use crate::stages::load::CodeObject;

/// One failure class: how often, and one example.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FailureClass {
    pub count: usize,
    pub example: String,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct CorpusReport {
    pub target: String,
    pub files: usize,
    pub code_objects: usize,
    pub kernels: usize,
    pub device_functions: usize,
    pub instructions: usize,
    pub undecodable: usize,
    pub mapped_to_pseudo: usize,
    pub native_opcodes: usize,
    pub unmapped_opcodes: usize,
    pub pc_relative_symbolized: usize,
    pub not_relocatable_functions: usize,
    pub identical_functions: usize,
    pub different_functions: usize,
    /// Code objects whose round trip failed before a check.
    pub failed_code_objects: usize,
    /// Code objects whose every loaded section came back byte for byte.
    pub identical_code_objects: usize,
    pub instructions_written_as_bytes: usize,
    /// Descriptors written as data, by reason.
    pub descriptors_as_data: BTreeMap<String, usize>,
    pub failures: BTreeMap<String, FailureClass>,
    pub seconds: f64,
}

impl CorpusReport {
    fn fail(&mut self, class: String, example: String) {
        let entry = self.failures.entry(class).or_default();
        entry.count += 1;
        if entry.example.is_empty() {
            entry.example = example;
        }
    }

    fn percent(part: usize, whole: usize) -> String {
        if whole == 0 {
            "-".into()
        } else {
            format!("{:.3}%", 100.0 * part as f64 / whole as f64)
        }
    }

    pub fn render_text(&self) -> String {
        let functions = self.kernels + self.device_functions;
        let decoded = self.instructions - self.undecodable;
        let mut out = String::new();
        writeln!(out, "target {}: {} files, {} code objects", self.target, self.files, self.code_objects).unwrap();
        writeln!(
            out,
            "functions              {functions} ({} kernels, {} device functions)",
            self.kernels, self.device_functions
        )
        .unwrap();
        writeln!(out, "instructions           {}", self.instructions).unwrap();
        writeln!(out, "disassembled           {}", Self::percent(decoded, self.instructions)).unwrap();
        writeln!(
            out,
            "opcodes mapped         {} ({} to a pseudo, {} native, {} unmapped)",
            Self::percent(self.mapped_to_pseudo + self.native_opcodes, decoded),
            self.mapped_to_pseudo,
            self.native_opcodes,
            self.unmapped_opcodes
        )
        .unwrap();
        writeln!(out, "pc-relative symbolized {}", self.pc_relative_symbolized).unwrap();
        writeln!(out, "not relocatable        {} functions", self.not_relocatable_functions).unwrap();
        writeln!(
            out,
            "round-trip identical   {} ({} of {functions}; {} different, {} code objects failed)",
            Self::percent(self.identical_functions, functions),
            self.identical_functions,
            self.different_functions,
            self.failed_code_objects
        )
        .unwrap();
        writeln!(
            out,
            "whole code objects     {} of {} with every loaded section identical",
            self.identical_code_objects, self.code_objects
        )
        .unwrap();
        writeln!(out, "written as bytes       {} instructions", self.instructions_written_as_bytes).unwrap();
        writeln!(
            out,
            "time                   {:.1} s ({:.0} instructions/s)",
            self.seconds,
            self.instructions as f64 / self.seconds.max(1e-9)
        )
        .unwrap();
        for (reason, count) in &self.descriptors_as_data {
            writeln!(out, "descriptor as data     {count}: {reason}").unwrap();
        }
        for (class, failure) in &self.failures {
            writeln!(out, "failure: {class}: {} (e.g. {})", failure.count, failure.example).unwrap();
        }
        out
    }
}

/// Which code objects of a corpus to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sample {
    All,
    /// Every n-th code object, spread over the corpus.
    EveryNth(usize),
}

/// Checks the code objects of `target` in `files` that `sample` picks, on
/// `jobs` threads.
pub fn check_corpus(
    files: &[PathBuf],
    target: &str,
    sample: Sample,
    linker: Linker,
    jobs: usize,
) -> Result<CorpusReport, crate::error::Error> {
    let start = Instant::now();
    let report = Mutex::new(CorpusReport { target: target.to_string(), files: files.len(), ..Default::default() });
    let mut queue: Vec<(String, CodeObject)> = load_code_objects(files, Some(target))?
        .into_iter()
        .map(|(file, code_object)| (format!("{}: {}", file.display(), code_object.origin.join(": ")), code_object))
        .collect();
    if let Sample::EveryNth(n) = sample {
        let n = n.max(1);
        queue = queue.into_iter().enumerate().filter(|(i, _)| i % n == 0).map(|(_, q)| q).collect();
    }
    for_each_on_threads(queue, jobs, |(name, code_object)| {
        let outcome = roundtrip(&code_object, linker);
        let mut report = report.lock().expect("report");
        report.code_objects += 1;
        match outcome {
            Err(error) => {
                report.failed_code_objects += 1;
                let text = error.to_string();
                let class = text.split(':').next().unwrap_or("error").to_string();
                report.fail(format!("round trip failed: {class}"), format!("{name}: {text}"));
            }
            Ok((_, check)) => {
                let stats = &check.lift;
                report.kernels += stats.kernels;
                report.device_functions += stats.functions - stats.kernels;
                report.instructions += stats.instructions;
                report.undecodable += stats.undecodable;
                report.mapped_to_pseudo += stats.mapped_to_pseudo;
                report.native_opcodes += stats.native_opcodes;
                report.unmapped_opcodes += stats.unmapped_opcodes;
                report.pc_relative_symbolized += stats.pc_relative_symbolized;
                report.not_relocatable_functions += stats.not_relocatable_functions;
                report.instructions_written_as_bytes += check.raw_instructions;
                for reason in &check.raw_descriptor_reasons {
                    *report.descriptors_as_data.entry(reason.clone()).or_default() += 1;
                }
                for unmapped in &stats.unmapped_names {
                    report.fail(format!("unmapped opcode {unmapped}"), name.clone());
                }
                for function in &check.functions {
                    if function.identical() {
                        report.identical_functions += 1;
                        continue;
                    }
                    report.different_functions += 1;
                    for (what, verdict) in [
                        ("code", Some(&function.code)),
                        ("descriptor", function.descriptor.as_ref()),
                        ("metadata", function.metadata.as_ref()),
                    ] {
                        match verdict {
                            Some(Verdict::Different(why)) => {
                                report.fail(format!("{what} differs"), format!("{name}: {}: {why}", function.name))
                            }
                            Some(Verdict::Missing) => {
                                report.fail(format!("{what} missing"), format!("{name}: {}", function.name))
                            }
                            _ => {}
                        }
                    }
                }
                if !check.layout.is_identical() {
                    report.fail("section layout differs".into(), name.clone());
                }
                match &check.sections {
                    Verdict::Identical => report.identical_code_objects += 1,
                    Verdict::Different(why) => report.fail("loaded sections differ".into(), format!("{name}: {why}")),
                    Verdict::Missing => {}
                }
            }
        }
    });
    let mut report = report.into_inner().expect("report");
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}
