//! What the runtime tells the user: a summary on standard error at exit and
//! a JSON report (schema in docs/runtime.md). Warnings are printed when
//! they happen and counted in both.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::selection::Selection;
use crate::tool_files::ToolFile;

/// Version of the JSON report's layout.
pub const SCHEMA: u32 = 1;

/// Dispatches listed one by one in the summary (all are in the JSON report).
const SUMMARY_DISPATCHES: usize = 20;

#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub schema: u32,
    /// Instrumented code objects the program loaded, in load order.
    pub code_objects: Vec<LoadedRecord>,
    /// Dispatches of instrumented kernels, in submission order.
    pub dispatches: Vec<DispatchRecord>,
    /// Dispatches submitted that had not completed when the program ended.
    pub unread_dispatches: usize,
    /// Dispatches of kernels that run no instrumented code (HIP's own
    /// fills and copies aside), per kernel: the tool saw none of them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub uninstrumented_dispatches: Vec<UninstrumentedRecord>,
    /// Dynamic mode: each code object the program loaded that gpuinstr
    /// instrumented for it, in load order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dynamic: Vec<DynamicRecord>,
    /// Selective instrumentation: what was chosen and how many dispatches
    /// ran instrumented (present when some code object kept its originals
    /// or a selection was asked for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection: Option<Selection>,
    /// What the tool's host part reported of the whole run
    /// (`gpuinstr_report_run_*`, usually at exit), in its order.
    #[serde(skip_serializing_if = "ToolValues::is_empty")]
    pub tool: ToolValues,
    /// Files the tool's host part wrote (`gpuinstr_write`), beside the report.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<ToolFile>,
    pub warnings: Vec<String>,
}

/// Dispatches of one kernel that is not instrumented.
#[derive(Debug, Serialize)]
pub struct UninstrumentedRecord {
    pub kernel: String,
    pub dispatches: u64,
}

/// A code object instrumented in dynamic mode.
#[derive(Debug, Serialize)]
pub struct DynamicRecord {
    /// The first 16 hex digits of the cache key (content of the code
    /// object, the tool, the plan, gpuinstr's version).
    pub key: String,
    /// Bytes of the code object the program loaded.
    pub size: usize,
    /// `instrumented` (now), `cache` (from disk), `this run` (loaded
    /// before), `as it is` (nothing to instrument: `note` says why) or
    /// `not instrumented` (it could not be and runs as it is: `note` says
    /// why; a warning too).
    pub source: String,
    pub seconds: f64,
    /// Why it is loaded as it is, or the selected points left out (with
    /// --allow-partial).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Where the seconds went, for a code object instrumented now: reading
    /// it and its cache key, each step of the instrumentation (as
    /// `gpuinstr-link instrument` reports them), writing the cache.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<(String, f64)>,
}

impl DynamicRecord {
    pub fn new(bytes: &[u8], key: &[u8; 32], source: &str, seconds: f64, note: Option<String>) -> Self {
        let key = key[..8].iter().map(|b| format!("{b:02x}")).collect();
        DynamicRecord { key, size: bytes.len(), source: source.into(), seconds, note, steps: Vec::new() }
    }
}

#[derive(Debug, Serialize)]
pub struct LoadedRecord {
    pub processor: String,
    pub kernels: usize,
    pub sites: usize,
    /// Its tool globals by their names in the tool.
    pub globals: Vec<String>,
    /// Kernels whose dispatches may run points left out when it was
    /// instrumented (`--allow-partial`), with how many.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partial_kernels: Vec<gpuinstr::stages::load::instrumented::PartialKernel>,
}

#[derive(Debug, Serialize)]
pub struct DispatchRecord {
    /// 1, 2, ... in the order the program submitted observed dispatches.
    pub id: u64,
    /// The n-th dispatch of this kernel in the run (observed or not).
    pub ordinal: u64,
    /// The queue it was submitted to: 1, 2, ... in order of first use.
    pub queue: u32,
    /// Seconds since the runtime started, on the host's clock: when the
    /// runtime saw the dispatch's packet, and when it read its values
    /// (the dispatch and its collection had completed by then).
    pub submitted: f64,
    pub completed: f64,
    pub kernel: String,
    /// Index in `code_objects`.
    pub code_object: usize,
    pub grid_size: [u32; 3],
    pub workgroup_size: [u32; 3],
    /// Each tool global as the dispatch left it (reset afterwards).
    pub globals: Vec<GlobalValue>,
    /// What the tool's host part reported for the dispatch, in its order.
    #[serde(skip_serializing_if = "ToolValues::is_empty")]
    pub tool: ToolValues,
    /// Why a value is missing or may be wrong; empty when all is well.
    pub problems: Vec<String>,
}

/// A value a tool's host part reports (`gpuinstr_report_u64/_text`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ToolValue {
    Number(u64),
    Text(String),
    /// A JSON value the tool wrote (`gpuinstr_report_json`).
    Json(serde_json::Value),
}

impl std::fmt::Display for ToolValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolValue::Number(n) => write!(f, "{n}"),
            ToolValue::Text(t) => write!(f, "{t}"),
            ToolValue::Json(serde_json::Value::Object(map)) => write!(f, "{{{} entries}}", map.len()),
            ToolValue::Json(serde_json::Value::Array(list)) => write!(f, "[{} entries]", list.len()),
            ToolValue::Json(value) => write!(f, "{value}"),
        }
    }
}

impl ToolValue {
    /// The JSON text a tool reported (`gpuinstr_report_json`), or, when it
    /// does not parse, the text and why: the tool's data is not lost to a
    /// typo, and the report says so.
    pub fn parsed(text: &str) -> Self {
        match serde_json::from_str(text) {
            Ok(value) => ToolValue::Json(value),
            Err(error) => ToolValue::Text(format!("the tool's JSON does not parse ({error}): {text}")),
        }
    }
}

/// Keys and values in the order the tool reported them (a JSON object).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolValues(pub Vec<(String, ToolValue)>);

impl ToolValues {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for ToolValues {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// A tool global's bytes after a dispatch. A tool without a host part gets
/// this generic form: the value of a global of at most 8 bytes as an
/// unsigned little-endian integer, else how many of its 8-byte words are
/// nonzero and the first [`LISTED_WORDS`] of them by byte offset (a trace
/// buffer would otherwise fill the report). With a host part, the tool
/// speaks for its data: name and size only.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct GlobalValue {
    pub name: String,
    pub size: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<u64>,
    /// Nonzero 8-byte words of a larger global.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nonzero: Option<usize>,
    /// The first of them (at most [`LISTED_WORDS`]), by byte offset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nonzero_words: Option<BTreeMap<usize, u64>>,
    /// A ring's pointer (`GPUINSTR_RING`): the records the dispatch
    /// appended, every one handed to the tool's host part.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records: Option<u64>,
    /// A ring's pointer when the run drops records of full rings
    /// (`--ring-full drop`): the records the dispatch's hooks dropped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped: Option<u64>,
}

/// Nonzero words of a large global listed in the generic form.
pub const LISTED_WORDS: usize = 256;

impl GlobalValue {
    /// Name and size only (the tool's host part reads the bytes).
    pub fn named(name: &str, size: usize) -> Self {
        GlobalValue {
            name: name.to_string(),
            size,
            value: None,
            nonzero: None,
            nonzero_words: None,
            records: None,
            dropped: None,
        }
    }

    pub fn of(name: &str, bytes: &[u8]) -> Self {
        let word = |chunk: &[u8]| {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            u64::from_le_bytes(word)
        };
        if bytes.len() <= 8 {
            let value = Some(word(bytes));
            return GlobalValue {
                name: name.to_string(),
                size: bytes.len(),
                value,
                nonzero: None,
                nonzero_words: None,
                records: None,
                dropped: None,
            };
        }
        let mut words = bytes.chunks(8).enumerate().map(|(k, c)| (k * 8, word(c))).filter(|&(_, w)| w != 0);
        let listed: BTreeMap<usize, u64> = words.by_ref().take(LISTED_WORDS).collect();
        let nonzero = listed.len() + words.count();
        GlobalValue {
            name: name.to_string(),
            size: bytes.len(),
            value: None,
            nonzero: Some(nonzero),
            nonzero_words: Some(listed),
            records: None,
            dropped: None,
        }
    }

    fn text(&self) -> String {
        if let Some(records) = self.records {
            return match self.dropped {
                Some(dropped) => format!("{}: {records} records, {dropped} dropped", self.name),
                None => format!("{}: {records} records", self.name),
            };
        }
        match (&self.value, &self.nonzero_words) {
            (Some(value), _) => format!("{}={value}", self.name),
            (None, Some(_)) => {
                format!("{}: {} of {} words nonzero", self.name, self.nonzero.unwrap_or(0), self.size.div_ceil(8))
            }
            (None, None) => format!("{}: {} bytes", self.name, self.size),
        }
    }
}

impl Report {
    /// Records a warning and says it now.
    pub fn warn(&mut self, message: String) {
        eprintln!("gpuinstr: warning: {message}");
        self.warnings.push(message);
    }

    /// Did the program load anything instrumented?
    pub fn is_empty(&self) -> bool {
        self.code_objects.is_empty() && self.warnings.is_empty()
    }

    /// The summary printed at exit.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let processors: Vec<String> = self
            .code_objects
            .iter()
            .map(|c| {
                format!("{} ({} kernels, {} sites, globals {})", c.processor, c.kernels, c.sites, c.globals.join(", "))
            })
            .collect();
        writeln!(
            out,
            "gpuinstr: {} instrumented code objects loaded: {}",
            self.code_objects.len(),
            processors.join("; ")
        )
        .unwrap();
        if !self.dynamic.is_empty() {
            let count = |source: &str| self.dynamic.iter().filter(|d| d.source == source).count();
            let seconds: f64 = self.dynamic.iter().map(|d| d.seconds).sum();
            let failed = count(crate::dynamic::NOT_INSTRUMENTED);
            writeln!(
                out,
                "gpuinstr: dynamic mode: {} code objects instrumented as they loaded ({} now, {} from the cache, {} again), {} left as they are{}, {seconds:.2} s",
                self.dynamic.len() - count("as it is") - failed,
                count("instrumented"),
                count("cache"),
                count("this run"),
                count("as it is"),
                if failed > 0 { format!(", {failed} NOT INSTRUMENTED (they run as they are)") } else { String::new() },
            )
            .unwrap();
            for record in &self.dynamic {
                match (&record.note, record.source.as_str()) {
                    (Some(why), "as it is") => writeln!(out, "  left as it is ({} bytes): {why}", record.size).unwrap(),
                    (Some(why), crate::dynamic::NOT_INSTRUMENTED) => {
                        writeln!(out, "gpuinstr: warning: not instrumented ({} bytes): {why}", record.size).unwrap()
                    }
                    (Some(partial), _) => writeln!(out, "gpuinstr: warning: PARTIAL: {partial}").unwrap(),
                    _ => {}
                }
            }
        }
        if let Some(selection) = &self.selection {
            writeln!(
                out,
                "gpuinstr: selective: {} of {} dispatches of kernels with their originals kept ran instrumented ({})",
                selection.selected,
                selection.selected + selection.not_selected,
                selection.describe()
            )
            .unwrap();
        }
        writeln!(out, "gpuinstr: {} dispatches of instrumented kernels read", self.dispatches.len()).unwrap();
        for dispatch in self.dispatches.iter().take(SUMMARY_DISPATCHES) {
            let [gx, gy, gz] = dispatch.grid_size;
            let [bx, by, bz] = dispatch.workgroup_size;
            let values: Vec<String> = match dispatch.tool.is_empty() {
                true => dispatch.globals.iter().map(GlobalValue::text).collect(),
                false => dispatch.tool.0.iter().map(|(key, value)| format!("{key}={value}")).collect(),
            };
            writeln!(
                out,
                "  #{} {} (its dispatch {})  grid {gx}x{gy}x{gz}  block {bx}x{by}x{bz}  {}",
                dispatch.id,
                dispatch.kernel,
                dispatch.ordinal,
                values.join("  ")
            )
            .unwrap();
            for problem in &dispatch.problems {
                writeln!(out, "    problem: {problem}").unwrap();
            }
        }
        if self.dispatches.len() > SUMMARY_DISPATCHES {
            writeln!(out, "  ... {} more in the JSON report", self.dispatches.len() - SUMMARY_DISPATCHES).unwrap();
        }
        for file in &self.files {
            writeln!(out, "gpuinstr: the tool wrote {} ({} bytes)", file.path.display(), file.bytes).unwrap();
        }
        if !self.uninstrumented_dispatches.is_empty() {
            writeln!(out, "{}", self.uninstrumented_summary()).unwrap();
        }
        let problems = self.dispatches.iter().filter(|d| !d.problems.is_empty()).count();
        if problems > 0 {
            writeln!(out, "gpuinstr: warning: {problems} dispatches have problems (partial, values missing or mixed)")
                .unwrap();
        }
        if self.unread_dispatches > 0 {
            writeln!(
                out,
                "gpuinstr: warning: {} dispatches had not completed when the program ended; their values were not read",
                self.unread_dispatches
            )
            .unwrap();
        }
        if !self.warnings.is_empty() {
            writeln!(out, "gpuinstr: {} warnings (printed above, and in the JSON report)", self.warnings.len())
                .unwrap();
        }
        out
    }

    /// The summary's line on the dispatches that ran no instrumented code:
    /// how many, the kernels dispatched most, and why that can be.
    fn uninstrumented_summary(&self) -> String {
        let dispatches = &self.uninstrumented_dispatches;
        let total: u64 = dispatches.iter().map(|d| d.dispatches).sum();
        let mut by_count: Vec<&UninstrumentedRecord> = dispatches.iter().collect();
        by_count.sort_by(|a, b| b.dispatches.cmp(&a.dispatches).then(a.kernel.cmp(&b.kernel)));
        let named: Vec<String> = by_count.iter().take(5).map(|d| format!("{} ({})", d.kernel, d.dispatches)).collect();
        let more = by_count.len() - named.len();
        format!(
            "gpuinstr: {total} dispatch{} of {} kernel{} ran no instrumented code, and the tool saw none of them: {}{} \
             (their code objects were not instrumented, or the plan selects nothing in them; a library or a \
             module loaded at run time is instrumented on its own, or in dynamic mode)",
            if total == 1 { "" } else { "es" },
            dispatches.len(),
            if dispatches.len() == 1 { "" } else { "s" },
            named.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() },
        )
    }

    /// Writes the JSON report to `path` (a temporary file renamed into place).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let directory = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        let temporary = directory.join(format!(".{name}.{}.tmp", std::process::id()));
        let result = (|| {
            let mut file = std::fs::File::create(&temporary)?;
            serde_json::to_writer_pretty(&mut file, self)?;
            file.write_all(b"\n")?;
            file.sync_all()?;
            std::fs::rename(&temporary, path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_globals_are_integers_and_large_ones_their_nonzero_words() {
        assert_eq!(GlobalValue::of("Counter", &1234u64.to_le_bytes()).value, Some(1234));
        assert_eq!(GlobalValue::of("Small", &[7, 1]).value, Some(0x107));
        let mut bytes = vec![0u8; 20];
        bytes[8] = 3;
        bytes[16] = 1;
        let large = GlobalValue::of("Histogram", &bytes);
        assert_eq!(large.value, None);
        assert_eq!(large.nonzero_words, Some(BTreeMap::from([(8, 3), (16, 1)])));
        assert_eq!(large.text(), "Histogram: 2 of 3 words nonzero");
    }

    #[test]
    fn a_large_buffer_lists_its_first_nonzero_words_and_counts_them_all() {
        let bytes: Vec<u8> = (0..1000u64).flat_map(|k| (k + 1).to_le_bytes()).collect();
        let trace = GlobalValue::of("Trace", &bytes);
        assert_eq!(trace.nonzero, Some(1000));
        let listed = trace.nonzero_words.as_ref().unwrap();
        assert_eq!(listed.len(), LISTED_WORDS);
        assert_eq!(listed.last_key_value(), Some((&((LISTED_WORDS - 1) * 8), &(LISTED_WORDS as u64))));
        assert_eq!(trace.text(), "Trace: 1000 of 1000 words nonzero");
    }

    #[test]
    fn dispatches_no_tool_saw_are_summed_and_the_most_dispatched_named() {
        let record = |kernel: &str, dispatches| UninstrumentedRecord { kernel: kernel.into(), dispatches };
        let mut report = Report::default();
        assert!(!report.summary().contains("ran no instrumented code"));
        report.uninstrumented_dispatches = vec![record("a", 1), record("b", 4), record("c", 2)];
        let summary = report.summary();
        assert!(
            summary.contains("gpuinstr: 7 dispatches of 3 kernels ran no instrumented code, and the tool saw none of them: b (4), c (2), a (1) (their"),
            "{summary}"
        );
        report.uninstrumented_dispatches = (0..7).map(|k| record(&format!("k{k}"), 1)).collect();
        report.uninstrumented_dispatches.truncate(6);
        assert!(report.summary().contains("k3 (1), k4 (1) and 1 more ("), "{}", report.summary());
        report.uninstrumented_dispatches = vec![record("only", 1)];
        assert!(report.summary().contains("1 dispatch of 1 kernel ran no"), "{}", report.summary());
    }
}
