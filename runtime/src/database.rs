//! The run as an SQLite database (schema in docs/runtime.md, "The
//! database"): what the JSON report holds, written as it happens, each
//! code object when it loads and each dispatch when its values are read,
//! every statement its own transaction. So a run that is killed, or that
//! the emulated GPU stops, keeps every dispatch completed before; its
//! `run.finished` is NULL. The JSON report is written at exit from the
//! same records.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection};
use serde::Serialize;

use crate::report::{DispatchRecord, LoadedRecord, Report, ToolValue, ToolValues};
use gpuinstr::stages::load::instrumented::PointEntry;

/// Version of the tables' layout (`PRAGMA user_version`; 2: `records`).
pub const SCHEMA: u32 = 2;

/// Bytes of a ring's records kept before they are written as one row.
const RECORDS_PER_ROW_BYTES: usize = 1 << 20;

const TABLES: &str = "
CREATE TABLE run (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    report_schema INTEGER NOT NULL,
    gpuinstr TEXT NOT NULL,
    program TEXT NOT NULL,
    arguments TEXT NOT NULL,
    started REAL NOT NULL,
    finished REAL,
    unread_dispatches INTEGER,
    tool TEXT,
    selection TEXT
);
CREATE TABLE code_objects (
    id INTEGER PRIMARY KEY,
    processor TEXT NOT NULL,
    kernels INTEGER NOT NULL,
    sites INTEGER NOT NULL,
    record TEXT NOT NULL
);
CREATE TABLE sites (
    code_object INTEGER NOT NULL REFERENCES code_objects (id),
    site INTEGER NOT NULL,
    address INTEGER NOT NULL,
    function TEXT NOT NULL,
    opcode TEXT NOT NULL,
    assembly TEXT NOT NULL,
    location TEXT,
    left_out INTEGER NOT NULL,
    PRIMARY KEY (code_object, site)
);
CREATE TABLE dispatches (
    id INTEGER PRIMARY KEY,
    ordinal INTEGER NOT NULL,
    kernel TEXT NOT NULL,
    code_object INTEGER NOT NULL REFERENCES code_objects (id),
    queue INTEGER NOT NULL,
    submitted REAL NOT NULL,
    completed REAL NOT NULL,
    grid_x INTEGER NOT NULL, grid_y INTEGER NOT NULL, grid_z INTEGER NOT NULL,
    workgroup_x INTEGER NOT NULL, workgroup_y INTEGER NOT NULL, workgroup_z INTEGER NOT NULL,
    problems INTEGER NOT NULL,
    record TEXT NOT NULL
);
CREATE TABLE dispatch_values (
    dispatch INTEGER NOT NULL REFERENCES dispatches (id),
    position INTEGER NOT NULL,
    name TEXT NOT NULL,
    value NOT NULL,
    PRIMARY KEY (dispatch, position)
);
CREATE TABLE warnings (
    id INTEGER PRIMARY KEY,
    message TEXT NOT NULL
);
CREATE TABLE dynamic (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE TABLE uninstrumented_dispatches (
    kernel TEXT PRIMARY KEY,
    dispatches INTEGER NOT NULL
);
CREATE TABLE files (
    name TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    bytes INTEGER NOT NULL
);
CREATE TABLE records (
    dispatch INTEGER NOT NULL,
    ring TEXT NOT NULL,
    first INTEGER NOT NULL,
    count INTEGER NOT NULL,
    record_bytes INTEGER NOT NULL,
    bytes BLOB NOT NULL,
    PRIMARY KEY (dispatch, ring, first)
);
";

#[derive(Debug, thiserror::Error)]
#[error("the database {path}: {error}")]
pub struct DatabaseError {
    path: PathBuf,
    error: String,
}

pub struct Database {
    path: PathBuf,
    connection: Connection,
    /// Warnings of the report already written.
    warnings: usize,
    /// Records of each (dispatch, ring) not written yet: the first's index
    /// among the dispatch's, bytes per record, the records.
    pending: std::collections::BTreeMap<(u64, String), (u64, u64, Vec<u8>)>,
}

/// Seconds since the epoch as SQLite's date functions read them back
/// (`datetime(started, 'unixepoch')`).
pub fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

fn json(value: &impl Serialize) -> String {
    serde_json::to_string(value).expect("report records serialise")
}

impl Database {
    /// A new database at `path` (a previous run's there is replaced),
    /// holding the run's row.
    ///
    /// `started`: when the run started (seconds since 1970), what the
    /// dispatches' times count from.
    pub fn create(path: &Path, program: &str, arguments: &[String], started: f64) -> Result<Database, DatabaseError> {
        let error =
            |error: &dyn std::fmt::Display| DatabaseError { path: path.to_path_buf(), error: error.to_string() };
        for stale in [path.to_path_buf(), with_suffix(path, "-wal"), with_suffix(path, "-shm")] {
            match std::fs::remove_file(&stale) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(error(&e)),
                _ => {}
            }
        }
        let connection = Connection::open(path).map_err(|e| error(&e))?;
        // WAL: each commit is one append the next reader recovers, also
        // after the process is killed; NORMAL: no fsync per dispatch (a
        // crash of the machine, not of the program, may lose the last).
        connection
            .execute_batch(&format!(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA user_version = {SCHEMA};{TABLES}"
            ))
            .map_err(|e| error(&e))?;
        connection
            .execute(
                "INSERT INTO run (id, report_schema, gpuinstr, program, arguments, started) VALUES (1, ?1, ?2, ?3, ?4, ?5)",
                params![
                    crate::report::SCHEMA,
                    concat!(env!("CARGO_PKG_VERSION"), " ", env!("GPUINSTR_SOURCE_IDENTITY")),
                    program,
                    json(&arguments),
                    started
                ],
            )
            .map_err(|e| error(&e))?;
        Ok(Database { path: path.to_path_buf(), connection, warnings: 0, pending: Default::default() })
    }

    fn failed(&self, error: rusqlite::Error) -> DatabaseError {
        DatabaseError { path: self.path.clone(), error: error.to_string() }
    }

    /// The report's warnings not written yet.
    pub fn warnings(&mut self, report: &Report) -> Result<(), DatabaseError> {
        for message in &report.warnings[self.warnings.min(report.warnings.len())..] {
            self.connection
                .execute("INSERT INTO warnings (message) VALUES (?1)", params![message])
                .map_err(|e| self.failed(e))?;
            self.warnings += 1;
        }
        Ok(())
    }

    /// Code object `index` as the report lists it, and its points.
    pub fn code_object(&self, index: usize, record: &LoadedRecord, points: &[PointEntry]) -> Result<(), DatabaseError> {
        let transaction = self.connection.unchecked_transaction().map_err(|e| self.failed(e))?;
        transaction
            .execute(
                "INSERT INTO code_objects (id, processor, kernels, sites, record) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![index, record.processor, record.kernels, record.sites, json(record)],
            )
            .map_err(|e| self.failed(e))?;
        {
            let mut insert = transaction
                .prepare(
                    "INSERT INTO sites (code_object, site, address, function, opcode, assembly, location, left_out)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .map_err(|e| self.failed(e))?;
            for (site, point) in points.iter().enumerate() {
                let location = (!point.location.is_empty()).then_some(&*point.location);
                insert
                    .execute(params![
                        index,
                        site,
                        point.address,
                        &*point.function,
                        &*point.opcode_name,
                        &*point.text,
                        location,
                        point.left_out
                    ])
                    .map_err(|e| self.failed(e))?;
            }
        }
        transaction.commit().map_err(|e| self.failed(e))
    }

    /// Records of ring `ring` that dispatch `dispatch` appended, the first
    /// the `first`-th of its records; in order. Written in rows of about a
    /// megabyte, and the rest with the dispatch.
    pub fn records(
        &mut self,
        dispatch: u64,
        ring: &str,
        first: u64,
        record_bytes: u64,
        bytes: &[u8],
    ) -> Result<(), DatabaseError> {
        let key = (dispatch, ring.to_string());
        let pending = self.pending.entry(key.clone()).or_insert_with(|| (first, record_bytes, Vec::new()));
        pending.2.extend_from_slice(bytes);
        if pending.2.len() >= RECORDS_PER_ROW_BYTES {
            let (first, record_bytes, bytes) = self.pending.remove(&key).expect("just added");
            Self::records_row(&self.connection, dispatch, ring, first, record_bytes, &bytes)
                .map_err(|e| self.failed(e))?;
            let next = first + bytes.len() as u64 / record_bytes;
            self.pending.insert(key, (next, record_bytes, Vec::new()));
        }
        Ok(())
    }

    fn records_row(
        connection: &Connection,
        dispatch: u64,
        ring: &str,
        first: u64,
        record_bytes: u64,
        bytes: &[u8],
    ) -> rusqlite::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        connection.execute(
            "INSERT INTO records (dispatch, ring, first, count, record_bytes, bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![dispatch, ring, first, bytes.len() as u64 / record_bytes, record_bytes, bytes],
        )?;
        Ok(())
    }

    /// A dispatch whose values were read (and the rest of its records).
    pub fn dispatch(&mut self, record: &DispatchRecord) -> Result<(), DatabaseError> {
        // The tool's values are rows of `dispatch_values`, not stored twice
        // (a tracer's lists of instructions are most of a dispatch's bytes).
        let mut entry = serde_json::to_value(record).expect("report records serialise");
        if let Some(fields) = entry.as_object_mut() {
            fields.remove("tool");
        }
        let transaction = self.connection.unchecked_transaction().map_err(|e| self.failed(e))?;
        let [gx, gy, gz] = record.grid_size;
        let [wx, wy, wz] = record.workgroup_size;
        transaction
            .execute(
                "INSERT INTO dispatches (id, ordinal, kernel, code_object, queue, submitted, completed,
                     grid_x, grid_y, grid_z, workgroup_x, workgroup_y, workgroup_z, problems, record)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
                params![
                    record.id,
                    record.ordinal,
                    record.kernel,
                    record.code_object,
                    record.queue,
                    record.submitted,
                    record.completed,
                    gx,
                    gy,
                    gz,
                    wx,
                    wy,
                    wz,
                    record.problems.len(),
                    entry.to_string()
                ],
            )
            .map_err(|e| self.failed(e))?;
        Self::values(&transaction, record.id, &record.tool).map_err(|e| self.failed(e))?;
        let mut pending = std::mem::take(&mut self.pending);
        let flushed = Self::flush_pending(&mut pending, &transaction, Some(record.id));
        self.pending = pending;
        flushed.map_err(|e| self.failed(e))?;
        transaction.commit().map_err(|e| self.failed(e))
    }

    fn flush_pending(
        pending: &mut std::collections::BTreeMap<(u64, String), (u64, u64, Vec<u8>)>,
        connection: &Connection,
        dispatch: Option<u64>,
    ) -> rusqlite::Result<()> {
        let keys: Vec<(u64, String)> =
            pending.keys().filter(|(d, _)| dispatch.is_none_or(|wanted| *d == wanted)).cloned().collect();
        for key in keys {
            let (first, record_bytes, bytes) = pending.remove(&key).expect("listed");
            Self::records_row(connection, key.0, &key.1, first, record_bytes, &bytes)?;
        }
        Ok(())
    }

    fn values(connection: &Connection, dispatch: u64, values: &ToolValues) -> rusqlite::Result<()> {
        let mut insert = connection
            .prepare("INSERT INTO dispatch_values (dispatch, position, name, value) VALUES (?1, ?2, ?3, ?4)")?;
        for (position, (name, value)) in values.0.iter().enumerate() {
            // A number as an integer (compared and summed as one), anything
            // else as its JSON text.
            match value {
                ToolValue::Number(n) if i64::try_from(*n).is_ok() => {
                    insert.execute(params![dispatch, position, name, *n as i64])?
                }
                _ => insert.execute(params![dispatch, position, name, json(value)])?,
            };
        }
        Ok(())
    }

    /// The rest of the report, at exit: the run is finished.
    pub fn finish(&mut self, report: &Report) -> Result<(), DatabaseError> {
        self.warnings(report)?;
        let transaction = self.connection.unchecked_transaction().map_err(|e| self.failed(e))?;
        // Records of dispatches never read (still running at exit).
        let mut pending = std::mem::take(&mut self.pending);
        let result = (|| {
            Self::flush_pending(&mut pending, &transaction, None)?;
            for record in &report.dynamic {
                transaction.execute(
                    "INSERT INTO dynamic (source, record) VALUES (?1, ?2)",
                    params![record.source, json(record)],
                )?;
            }
            for record in &report.uninstrumented_dispatches {
                transaction.execute(
                    "INSERT INTO uninstrumented_dispatches (kernel, dispatches) VALUES (?1, ?2)",
                    params![record.kernel, record.dispatches],
                )?;
            }
            for file in &report.files {
                transaction.execute(
                    "INSERT INTO files (name, path, bytes) VALUES (?1, ?2, ?3)",
                    params![file.name, file.path.to_string_lossy(), file.bytes],
                )?;
            }
            let tool = (!report.tool.is_empty()).then(|| json(&report.tool));
            let selection = report.selection.as_ref().map(json);
            transaction.execute(
                "UPDATE run SET finished = ?1, unread_dispatches = ?2, tool = ?3, selection = ?4 WHERE id = 1",
                params![now(), report.unread_dispatches, tool, selection],
            )?;
            Ok(())
        })();
        result.map_err(|e| self.failed(e))?;
        transaction.commit().map_err(|e| self.failed(e))?;
        // Everything in the main file: one file to copy or open read-only.
        self.connection.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);").map_err(|e| self.failed(e))?;
        // And nothing beside it (`-wal`, `-shm`), unless another connection
        // is reading the run: then the journal stays, checkpointed.
        let _ = self.connection.query_row("PRAGMA journal_mode = DELETE", [], |row| row.get::<_, String>(0));
        Ok(())
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::GlobalValue;

    fn dispatch(id: u64) -> DispatchRecord {
        DispatchRecord {
            id,
            ordinal: id,
            queue: 1,
            submitted: id as f64,
            completed: id as f64 + 0.5,
            kernel: "_Z5scalePffi".into(),
            code_object: 0,
            grid_size: [1024, 1, 1],
            workgroup_size: [256, 1, 1],
            globals: vec![GlobalValue::of("Counter", &[7, 0, 0, 0, 0, 0, 0, 0])],
            tool: ToolValues(vec![("instructions".into(), ToolValue::Number(7 * id))]),
            problems: Vec::new(),
        }
    }

    #[test]
    fn what_is_written_is_read_back_with_sql() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.sqlite");
        let mut database = Database::create(&path, "./app", &["--size".into(), "3".into()], now()).unwrap();
        let loaded = LoadedRecord {
            processor: "gfx90a".into(),
            kernels: 1,
            sites: 1,
            globals: vec!["Counter".into()],
            partial_kernels: Vec::new(),
        };
        let point = PointEntry {
            address: 0x1000,
            opcode: 1,
            function: "_Z5scalePffi".into(),
            opcode_name: "S_ENDPGM".into(),
            text: "s_endpgm".into(),
            location: "scale.hip:7".into(),
            left_out: false,
        };
        database.code_object(0, &loaded, &[point]).unwrap();
        database.dispatch(&dispatch(1)).unwrap();
        database.dispatch(&dispatch(2)).unwrap();
        // Read while the run goes on, as after a kill: the dispatches so far.
        let reader = Connection::open(&path).unwrap();
        let total: u64 = reader
            .query_row(
                "SELECT sum(value) FROM dispatch_values WHERE name = 'instructions' AND dispatch IN
                 (SELECT id FROM dispatches WHERE kernel = '_Z5scalePffi')",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(total, 21);
        let finished: Option<f64> = reader.query_row("SELECT finished FROM run", [], |row| row.get(0)).unwrap();
        assert_eq!(finished, None, "not finished yet");
        let report = Report { warnings: vec!["a warning".into()], ..Report::default() };
        database.finish(&report).unwrap();
        let (finished, warnings): (Option<f64>, u32) = reader
            .query_row("SELECT finished, (SELECT count(*) FROM warnings) FROM run", [], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .unwrap();
        assert!(finished.is_some());
        assert_eq!(warnings, 1);
        let location: String = reader.query_row("SELECT location FROM sites", [], |row| row.get(0)).unwrap();
        assert_eq!(location, "scale.hip:7");
    }

    #[test]
    fn a_finished_run_is_one_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.sqlite");
        let mut database = Database::create(&path, "./app", &[], now()).unwrap();
        database.finish(&Report::default()).unwrap();
        let names: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
        assert_eq!(names, ["run.sqlite"], "no -wal or -shm left beside it, even before the connection closes");
        let reader = Connection::open(&path).unwrap();
        let finished: Option<f64> = reader.query_row("SELECT finished FROM run", [], |row| row.get(0)).unwrap();
        assert!(finished.is_some());
    }
}
