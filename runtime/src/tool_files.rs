//! Files a tool's host part writes (`gpuinstr_write`): records too many for
//! the report (a memory trace, branch records). Each is written beside the
//! JSON report as `<report stem>.<name>`, through a temporary file renamed
//! into place when the program ends, so a run that dies leaves no partial
//! file; the report lists them.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

/// A file the tool wrote, as the report lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolFile {
    /// The name the tool gave it.
    pub name: String,
    pub path: PathBuf,
    pub bytes: u64,
}

struct Open {
    path: PathBuf,
    temporary: PathBuf,
    writer: BufWriter<File>,
    bytes: u64,
}

/// The tool's files of this run, by name.
#[derive(Default)]
pub struct ToolFiles {
    open: BTreeMap<String, Result<Open, String>>,
}

/// Whether the user asked for the tool file `name`: `GPUINSTR_TOOL_FILES`
/// lists names (comma-separated), or says `all`.
pub fn requested(name: &str) -> bool {
    let asked = std::env::var("GPUINSTR_TOOL_FILES").unwrap_or_default();
    asked.split(',').map(str::trim).any(|asked| asked == "all" || asked == name)
}

/// Where a tool file named `name` goes beside `report`.
pub fn path_beside(report: &Path, name: &str) -> PathBuf {
    let stem = report.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_else(|| "gpuinstr".into());
    report.with_file_name(format!("{stem}.{name}"))
}

impl ToolFiles {
    /// Appends `bytes` to the tool file `name` (created beside `report` on
    /// first use). An error (a bad name, a full disk) is returned once, when
    /// it happens; that file's later writes are dropped (the caller warns).
    pub fn write(&mut self, report: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
        if !self.open.contains_key(name) {
            let opened = open(report, name);
            let error = opened.as_ref().err().cloned();
            self.open.insert(name.to_string(), opened);
            if let Some(error) = error {
                return Err(error);
            }
        }
        let Some(entry) = self.open.get_mut(name) else { return Ok(()) };
        let Ok(open) = entry else { return Ok(()) };
        if let Err(error) = open.writer.write_all(bytes) {
            let message = format!("cannot write the tool's file {}: {error}", open.temporary.display());
            let _ = std::fs::remove_file(&open.temporary);
            *entry = Err(message.clone());
            return Err(message);
        }
        open.bytes += bytes.len() as u64;
        Ok(())
    }

    /// Flushes every file and renames it into place: what was written, and
    /// the errors.
    pub fn close(&mut self) -> (Vec<ToolFile>, Vec<String>) {
        let mut files = Vec::new();
        let mut errors = Vec::new();
        for (name, entry) in std::mem::take(&mut self.open) {
            let Ok(open) = entry else { continue };
            let Open { path, temporary, writer, bytes } = open;
            let finished = writer
                .into_inner()
                .map_err(|e| e.into_error())
                .and_then(|file| file.sync_all())
                .and_then(|()| std::fs::rename(&temporary, &path));
            match finished {
                Ok(()) => files.push(ToolFile { name, path, bytes }),
                Err(error) => {
                    let _ = std::fs::remove_file(&temporary);
                    errors.push(format!("cannot write the tool's file {}: {error}", path.display()));
                }
            }
        }
        (files, errors)
    }
}

fn open(report: &Path, name: &str) -> Result<Open, String> {
    let plain = !name.is_empty() && !name.starts_with('.') && !name.contains(['/', '\0']);
    if !plain {
        return Err(format!("the tool asked to write a file named {name:?}; a tool file's name is a plain file name"));
    }
    let path = path_beside(report, name);
    let file_name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let temporary = path.with_file_name(format!(".{file_name}.{}.tmp", std::process::id()));
    match File::create(&temporary) {
        Ok(file) => Ok(Open { path, temporary, writer: BufWriter::new(file), bytes: 0 }),
        Err(error) => Err(format!("cannot create the tool's file {}: {error}", temporary.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn directory(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gpuinstr-rt-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_tool_file_appears_beside_the_report_only_when_closed() {
        let dir = directory("files");
        let report = dir.join("run.json");
        let mut files = ToolFiles::default();
        files.write(&report, "trace.tsv", b"a\n").unwrap();
        files.write(&report, "trace.tsv", b"b\n").unwrap();
        let final_path = dir.join("run.trace.tsv");
        assert!(!final_path.exists(), "nothing partial in place while the program runs");
        let (written, errors) = files.close();
        assert_eq!(errors, Vec::<String>::new());
        assert_eq!(written, vec![ToolFile { name: "trace.tsv".into(), path: final_path.clone(), bytes: 4 }]);
        assert_eq!(std::fs::read_to_string(&final_path).unwrap(), "a\nb\n");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file left");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_name_with_a_directory_is_refused_once_and_writes_nothing() {
        let dir = directory("names");
        let report = dir.join("run.json");
        let mut files = ToolFiles::default();
        let error = files.write(&report, "../escape", b"x").unwrap_err();
        assert!(error.contains("plain file name"), "{error}");
        assert_eq!(files.write(&report, "../escape", b"x"), Ok(()), "said once");
        assert_eq!(files.close(), (vec![], vec![]));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
