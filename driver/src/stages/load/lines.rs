//! The source line of each instruction, from a code object's DWARF line
//! table (`.debug_line`, there when the code was built with `-g`): the
//! instrumentation points of such code objects are named `file:line`.

use std::collections::HashMap;

use gimli::{EndianSlice, LittleEndian};
use thiserror::Error;

use super::CodeObject;

#[derive(Debug, Error, PartialEq, Eq)]
#[error("its DWARF line table (.debug_line) cannot be read: {0}")]
pub struct LinesError(String);

impl From<gimli::Error> for LinesError {
    fn from(error: gimli::Error) -> Self {
        // Some of gimli's messages span lines; ours is one.
        LinesError(error.to_string().split_whitespace().collect::<Vec<_>>().join(" "))
    }
}

/// How many instrumentation points a code object's line table names
/// `file:line` (reported by `instrument`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum SourceLineNames {
    /// Built without `-g`: points are known by address only.
    #[default]
    NoLineTable,
    Named {
        named: usize,
        points: usize,
    },
    Unreadable {
        problem: String,
    },
}

impl SourceLineNames {
    /// Over two parts of one code object (groups of its kernels).
    pub fn join(self, other: SourceLineNames) -> SourceLineNames {
        use SourceLineNames::*;
        match (self, other) {
            (Unreadable { problem }, _) | (_, Unreadable { problem }) => Unreadable { problem },
            (Named { named, points }, Named { named: more, points: others }) => {
                Named { named: named + more, points: points + others }
            }
            (NoLineTable, other) => other,
            (named, NoLineTable) => named,
        }
    }
}

/// A row with this file ends a sequence: no line from there on.
const END_OF_SEQUENCE: u32 = u32::MAX;

/// Addresses to `file:line`, as the line table maps them.
#[derive(Debug, Default)]
pub struct SourceLines {
    /// (address, file, line) by address; a row holds from its address up to
    /// the next row's; line 0 is code with no source line.
    rows: Vec<(u64, u32, u32)>,
    /// Paths, by the file numbers in `rows`.
    files: Vec<String>,
}

impl SourceLines {
    /// The code object's line table; None when it has none (built without `-g`).
    pub fn read(code_object: &CodeObject) -> Result<Option<SourceLines>, LinesError> {
        if !code_object.sections.iter().any(|s| s.name == ".debug_line") {
            return Ok(None);
        }
        let mut outside = None;
        let section = |id: gimli::SectionId| -> Result<EndianSlice<'_, LittleEndian>, gimli::Error> {
            let bytes = match code_object.sections.iter().find(|s| s.name == id.name()) {
                Some(section) => {
                    let range = (section.offset as usize)..(section.offset.saturating_add(section.size) as usize);
                    code_object.bytes.get(range).unwrap_or_else(|| {
                        outside.get_or_insert(id.name());
                        &[]
                    })
                }
                None => &[],
            };
            Ok(EndianSlice::new(bytes, LittleEndian))
        };
        let dwarf = gimli::Dwarf::load(section)?;
        if let Some(name) = outside {
            return Err(LinesError(format!("{name} lies outside the file")));
        }
        let mut lines = SourceLines::default();
        // Each unit's file numbers, as paths in `files`.
        let mut numbered: HashMap<String, u32> = HashMap::new();
        let mut units = dwarf.units();
        while let Some(header) = units.next()? {
            let unit = dwarf.unit(header)?;
            let Some(program) = unit.line_program.clone() else {
                continue;
            };
            let mut paths: HashMap<u64, u32> = HashMap::new();
            let mut rows = program.rows();
            while let Some((header, row)) = rows.next_row()? {
                if row.end_sequence() {
                    lines.rows.push((row.address(), END_OF_SEQUENCE, 0));
                    continue;
                }
                let line = row.line().map_or(0, |l| u32::try_from(l.get()).unwrap_or(u32::MAX - 1));
                let file = match paths.get(&row.file_index()) {
                    Some(file) => *file,
                    None => {
                        let path = match row.file(header) {
                            Some(entry) => file_path(&dwarf, &unit, header, entry)?,
                            None => format!("(file {})", row.file_index()),
                        };
                        let next = numbered.len() as u32;
                        let file = *numbered.entry(path.clone()).or_insert_with(|| {
                            lines.files.push(path);
                            next
                        });
                        paths.insert(row.file_index(), file);
                        file
                    }
                };
                lines.rows.push((row.address(), file, line));
            }
        }
        // Where a sequence ends at the address another starts, the start wins.
        lines.rows.sort_by_key(|&(address, file, _)| (address, file != END_OF_SEQUENCE));
        Ok(Some(lines))
    }

    /// `file:line` of the instruction at `address`, when the table gives one.
    pub fn at(&self, address: u64) -> Option<String> {
        let after = self.rows.partition_point(|&(start, ..)| start <= address);
        let &(_, file, line) = self.rows.get(after.checked_sub(1)?)?;
        if file == END_OF_SEQUENCE || line == 0 {
            return None;
        }
        Some(format!("{}:{line}", self.files[file as usize]))
    }
}

/// A line table's file as one path: its name, under its directory when
/// relative, under the unit's compilation directory when that is relative.
fn file_path<R: gimli::Reader>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    header: &gimli::LineProgramHeader<R>,
    entry: &gimli::FileEntry<R>,
) -> Result<String, gimli::Error> {
    let text = |value: gimli::AttributeValue<R>| -> Result<String, gimli::Error> {
        Ok(dwarf.attr_string(unit, value)?.to_string_lossy()?.into_owned())
    };
    let mut path = std::path::PathBuf::new();
    if let Some(directory) = &unit.comp_dir {
        path.push(directory.to_string_lossy()?.as_ref());
    }
    if let Some(directory) = entry.directory(header) {
        path.push(text(directory)?);
    }
    path.push(text(entry.path_name())?);
    Ok(path.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(rows: &[(u64, u32, u32)]) -> SourceLines {
        SourceLines { rows: rows.to_vec(), files: vec!["a.hip".into(), "b.h".into()] }
    }

    #[test]
    fn an_address_takes_the_row_at_or_before_it_until_its_sequence_ends() {
        let table = lines(&[(0x100, 0, 3), (0x108, 1, 7), (0x110, 0, 0), (0x118, END_OF_SEQUENCE, 0)]);
        assert_eq!(table.at(0xfc), None);
        assert_eq!(table.at(0x100).as_deref(), Some("a.hip:3"));
        assert_eq!(table.at(0x104).as_deref(), Some("a.hip:3"));
        assert_eq!(table.at(0x10c).as_deref(), Some("b.h:7"));
        assert_eq!(table.at(0x110), None, "line 0: no source line");
        assert_eq!(table.at(0x118), None, "past the sequence");
    }

    #[test]
    fn a_dwarf_error_is_one_line() {
        // gimli's message for this one spans two lines (fuzz/regressions/
        // code-object/dwarf-multiline-error.hsaco).
        let error = LinesError::from(gimli::Error::BadHasChildren).to_string();
        assert!(!error.contains('\n') && error.contains("was not one of `DW_CHILDREN_{yes,no}`"), "{error}");
    }
}
