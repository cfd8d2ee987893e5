//! Round trips over a corpus: every code object of one target in a set of
//! files (fat binaries included), lifted, re-emitted, linked and checked,
//! with the numbers and the failure classes aggregated.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;

use crate::parallel::for_each_on_threads;
use crate::roundtrip::{roundtrip, Verdict};
use crate::stages::emit::link::Linker;
use crate::stages::load;
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
    /// Files that could not be read (each a `not loaded` failure).
    pub files_not_loaded: usize,
    /// Code objects whose every loaded section came back byte for byte.
    pub identical_code_objects: usize,
    pub instructions_written_as_bytes: usize,
    /// Descriptors written as data, by reason.
    pub descriptors_as_data: BTreeMap<String, usize>,
    pub failures: BTreeMap<String, FailureClass>,
    pub seconds: f64,
}

impl CorpusReport {
    fn not_loaded(&mut self, file: &std::path::Path, error: &dyn std::fmt::Display) {
        self.files_not_loaded += 1;
        self.fail("not loaded".into(), format!("{}: {error}", file.display()));
    }

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
        if self.files_not_loaded > 0 {
            writeln!(out, "files not loaded       {}", self.files_not_loaded).unwrap();
        }
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
/// `jobs` threads. A file is read once to count its code objects (and
/// again by the thread that checks them), so memory stays bounded by the
/// files being checked, not the corpus; a file that cannot be read is a
/// failure of its own (`not loaded`) and the others are still checked.
pub fn check_corpus(
    files: &[PathBuf],
    target: &str,
    sample: Sample,
    linker: Linker,
    jobs: usize,
) -> Result<CorpusReport, crate::error::Error> {
    let start = Instant::now();
    let mut report = CorpusReport { target: target.to_string(), files: files.len(), ..Default::default() };
    let picks = |k: usize| match sample {
        Sample::All => true,
        Sample::EveryNth(n) => k.is_multiple_of(n.max(1)),
    };
    // Per file, the indices of the code objects sampled.
    let mut work: Vec<(PathBuf, Vec<usize>)> = Vec::new();
    let mut seen = 0;
    for file in files {
        match load::load_for_target(file, Some(target)) {
            Ok(input) => {
                let count = input.code_objects.len();
                let chosen: Vec<usize> = (0..count).filter(|k| picks(seen + k)).collect();
                seen += count;
                if !chosen.is_empty() {
                    work.push((file.clone(), chosen));
                }
            }
            Err(error) => report.not_loaded(file, &error),
        }
    }
    let report = Mutex::new(report);
    for_each_on_threads(work, jobs, |(file, chosen)| {
        let code_objects = match load::load_for_target(&file, Some(target)) {
            Ok(input) => input.code_objects,
            Err(error) => return report.lock().expect("report").not_loaded(&file, &error),
        };
        for k in chosen {
            let code_object = &code_objects[k];
            let name = format!("{}: {}", file.display(), code_object.origin.join(": "));
            check_one(&report, &name, code_object, linker);
        }
    });
    let mut report = report.into_inner().expect("report");
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}

/// Round-trips one code object into the report.
fn check_one(report: &Mutex<CorpusReport>, name: &str, code_object: &CodeObject, linker: Linker) {
    let name = name.to_string();
    let outcome = roundtrip(code_object, linker);
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
}
