//! A run as the runtime's database holds it (docs/runtime.md, "The
//! database"), read into what the page shows: the run, its kernels by
//! cost, and the tools' numbers per source line with the points there.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: cannot open it as a gpuinstr database: {error}")]
    Open { path: String, error: String },
    #[error(
        "{path}: database schema {found}, this gpuinstr-report reads schemas 1 and 2 (write it again with this gpuinstr)"
    )]
    Schema { path: String, found: u32 },
    #[error("{path}: {error}")]
    Query { path: String, error: String },
}

#[derive(Debug, Default)]
pub struct Run {
    pub program: String,
    pub arguments: Vec<String>,
    pub gpuinstr: String,
    /// Seconds since 1970.
    pub started: f64,
    /// None: the run did not end (killed, or stopped by the GPU).
    pub finished: Option<f64>,
    pub warnings: Vec<String>,
    pub kernels: Vec<KernelCost>,
    /// Per tool value listing points (`branches`, `instructions`): its
    /// numbers summed per source line.
    pub lines: Vec<LineTable>,
    /// The same values' numbers summed per instruction (with line tables
    /// or without).
    pub instructions: Vec<InstructionTable>,
    /// Every dispatch, in submission order.
    pub dispatches: Vec<DispatchSpan>,
}

/// A dispatch on its queue, with its times (seconds after `started`).
#[derive(Debug, Default, PartialEq)]
pub struct DispatchSpan {
    pub id: u64,
    pub kernel: String,
    pub queue: u32,
    pub submitted: f64,
    pub completed: f64,
    pub grid: [u32; 3],
    pub workgroup: [u32; 3],
    /// The tool's numbers for it (`instructions`), by name.
    pub numbers: BTreeMap<String, i64>,
}

/// A kernel's dispatches and each numeric tool value summed over them.
#[derive(Debug, Default, PartialEq)]
pub struct KernelCost {
    pub kernel: String,
    pub dispatches: u64,
    pub totals: BTreeMap<String, i64>,
}

/// One tool value that lists points with a `location`, per source line.
#[derive(Debug, Default, PartialEq)]
pub struct LineTable {
    /// The tool value's name (`branches`).
    pub value: String,
    /// Its numeric fields, in the order first seen (`executions`, `divergent`).
    pub fields: Vec<String>,
    /// The field lines are coloured by.
    pub colour_by: String,
    /// File → line → the line's numbers and the points there.
    pub files: BTreeMap<String, BTreeMap<u32, Line>>,
}

/// One tool value that lists points with a `function` and an `address`,
/// per instruction, the most costly (by `colour_by`) first.
#[derive(Debug, Default, PartialEq)]
pub struct InstructionTable {
    pub value: String,
    pub fields: Vec<String>,
    pub colour_by: String,
    /// The first `SHOWN_INSTRUCTIONS` of them.
    pub rows: Vec<InstructionRow>,
    /// How many instructions the value lists in all.
    pub instructions: usize,
}

/// How many instructions a table shows.
pub const SHOWN_INSTRUCTIONS: usize = 100;

#[derive(Debug, Default, PartialEq)]
pub struct InstructionRow {
    pub function: String,
    pub address: u64,
    pub location: Option<String>,
    pub assembly: String,
    pub numbers: BTreeMap<String, i64>,
}

/// A point's `address`: a number or a `0x` hex string.
fn point_address(point: &Value) -> Option<u64> {
    match point.get("address")? {
        Value::String(text) => u64::from_str_radix(text.strip_prefix("0x")?, 16).ok(),
        number => number.as_u64(),
    }
}

/// A point's numbers, but its site and address (names, not amounts).
fn point_numbers(point: &Value) -> impl Iterator<Item = (&String, i64)> {
    point
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(field, _)| !matches!(field.as_str(), "site" | "address"))
        .filter_map(|(field, number)| Some((field, number.as_i64()?)))
}

#[derive(Debug, Default, PartialEq)]
pub struct Line {
    pub numbers: BTreeMap<String, i64>,
    /// The instructions there, as assembly, in address order.
    pub assembly: Vec<String>,
}

/// `file:line` into its parts.
fn split_location(location: &str) -> Option<(&str, u32)> {
    let (file, line) = location.rsplit_once(':')?;
    Some((file, line.parse().ok()?))
}

/// Which field colours a line: the one people rank by, when present.
fn colour_field(fields: &[String]) -> String {
    ["divergent", "conflict_cycles", "excess_lines", "lines", "accesses", "executions"]
        .iter()
        .find(|f| fields.iter().any(|g| g == *f))
        .map(|f| f.to_string())
        .or_else(|| fields.first().cloned())
        .unwrap_or_default()
}

pub fn read(path: &Path) -> Result<Run, ReadError> {
    let shown = path.display().to_string();
    let connection = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| ReadError::Open { path: shown.clone(), error: e.to_string() })?;
    let query = |e: rusqlite::Error| ReadError::Query { path: shown.clone(), error: e.to_string() };
    let schema: u32 = connection
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(|e| ReadError::Open { path: shown.clone(), error: e.to_string() })?;
    // 2 added the rings' records, which the page does not show.
    if !(1..=2).contains(&schema) {
        return Err(ReadError::Schema { path: shown, found: schema });
    }
    let mut run = connection
        .query_row("SELECT program, arguments, gpuinstr, started, finished FROM run", [], |row| {
            let arguments: String = row.get(1)?;
            Ok(Run {
                program: row.get(0)?,
                arguments: serde_json::from_str(&arguments).unwrap_or_default(),
                gpuinstr: row.get(2)?,
                started: row.get(3)?,
                finished: row.get(4)?,
                ..Run::default()
            })
        })
        .map_err(query)?;
    let mut statement = connection.prepare("SELECT message FROM warnings ORDER BY id").map_err(query)?;
    run.warnings =
        statement.query_map([], |row| row.get(0)).map_err(query)?.collect::<Result<_, _>>().map_err(query)?;

    // Kernels: dispatches, and every integer value summed.
    let mut kernels: BTreeMap<String, KernelCost> = BTreeMap::new();
    let mut statement = connection.prepare("SELECT kernel, count(*) FROM dispatches GROUP BY kernel").map_err(query)?;
    let rows = statement.query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, u64>(1)?))).map_err(query)?;
    for row in rows {
        let (kernel, dispatches) = row.map_err(query)?;
        kernels.insert(kernel.clone(), KernelCost { kernel, dispatches, totals: BTreeMap::new() });
    }
    let mut statement = connection
        .prepare(
            "SELECT d.kernel, v.name, sum(v.value) FROM dispatches d JOIN dispatch_values v ON v.dispatch = d.id
             WHERE typeof(v.value) = 'integer' GROUP BY d.kernel, v.name",
        )
        .map_err(query)?;
    let rows = statement
        .query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?, row.get::<_, i64>(2)?)))
        .map_err(query)?;
    for row in rows {
        let (kernel, name, total) = row.map_err(query)?;
        if let Some(cost) = kernels.get_mut(&kernel) {
            cost.totals.insert(name, total);
        }
    }
    run.kernels = kernels.into_values().collect();
    // Ranked by the first value the tool reports, else by dispatches.
    let first_value: Option<String> = connection
        .query_row(
            "SELECT name FROM dispatch_values WHERE typeof(value) = 'integer' ORDER BY dispatch, position LIMIT 1",
            [],
            |row| row.get(0),
        )
        .ok();
    run.kernels.sort_by_key(|k| {
        let cost = first_value.as_ref().and_then(|v| k.totals.get(v)).copied().unwrap_or(k.dispatches as i64);
        (std::cmp::Reverse(cost), k.kernel.clone())
    });

    // Per source line: tool values that list points with a location; per
    // instruction: those that list points with a function and an address.
    let mut tables: BTreeMap<String, LineTable> = BTreeMap::new();
    type PerInstruction = BTreeMap<(String, u64), (Option<String>, BTreeMap<String, i64>)>;
    let mut per_instruction: BTreeMap<String, (Vec<String>, PerInstruction)> = BTreeMap::new();
    let mut statement = connection
        .prepare("SELECT name, value FROM dispatch_values WHERE typeof(value) = 'text' ORDER BY dispatch, position")
        .map_err(query)?;
    let rows =
        statement.query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))).map_err(query)?;
    for row in rows {
        let (name, text) = row.map_err(query)?;
        let Ok(Value::Array(points)) = serde_json::from_str::<Value>(&text) else { continue };
        for point in points {
            if let (Some(function), Some(address)) =
                (point.get("function").and_then(Value::as_str), point_address(&point))
            {
                let (fields, instructions) = per_instruction.entry(name.clone()).or_default();
                let location = point.get("location").and_then(Value::as_str).map(String::from);
                let (_, numbers) =
                    instructions.entry((function.to_string(), address)).or_insert((location, BTreeMap::new()));
                for (field, number) in point_numbers(&point) {
                    if !fields.contains(field) {
                        fields.push(field.clone());
                    }
                    *numbers.entry(field.clone()).or_default() += number;
                }
            }
            let Some(location) = point.get("location").and_then(Value::as_str) else { continue };
            let Some((file, line)) = split_location(location) else { continue };
            let table =
                tables.entry(name.clone()).or_insert_with(|| LineTable { value: name.clone(), ..Default::default() });
            let numbers = &mut table.files.entry(file.to_string()).or_default().entry(line).or_default().numbers;
            for (field, number) in point_numbers(&point) {
                if !table.fields.contains(field) {
                    table.fields.push(field.clone());
                }
                *numbers.entry(field.clone()).or_default() += number;
            }
        }
    }
    // The points on each line, as assembly.
    let mut statement = connection
        .prepare("SELECT location, assembly FROM sites WHERE location IS NOT NULL ORDER BY code_object, address")
        .map_err(query)?;
    let rows =
        statement.query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))).map_err(query)?;
    let mut assembly: BTreeMap<(String, u32), Vec<String>> = BTreeMap::new();
    for row in rows {
        let (location, text) = row.map_err(query)?;
        if let Some((file, line)) = split_location(&location) {
            assembly.entry((file.to_string(), line)).or_default().push(text);
        }
    }
    for table in tables.values_mut() {
        table.colour_by = colour_field(&table.fields);
        for (file, lines) in table.files.iter_mut() {
            for (line, numbers) in lines.iter_mut() {
                numbers.assembly = assembly.get(&(file.clone(), *line)).cloned().unwrap_or_default();
            }
        }
    }
    run.lines = tables.into_values().collect();
    // The instructions' assembly, by function and address.
    let mut statement = connection.prepare("SELECT function, address, assembly FROM sites").map_err(query)?;
    let rows = statement
        .query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, u64>(1)?, row.get::<_, String>(2)?)))
        .map_err(query)?;
    let mut assembly: BTreeMap<(String, u64), String> = BTreeMap::new();
    for row in rows {
        let (function, address, text) = row.map_err(query)?;
        assembly.entry((function, address)).or_insert(text);
    }
    for (value, (fields, instructions)) in per_instruction {
        let colour_by = colour_field(&fields);
        let count = instructions.len();
        let mut rows: Vec<InstructionRow> = instructions
            .into_iter()
            .map(|((function, address), (location, numbers))| InstructionRow {
                assembly: assembly.get(&(function.clone(), address)).cloned().unwrap_or_default(),
                function,
                address,
                location,
                numbers,
            })
            .collect();
        rows.sort_by_key(|r| (std::cmp::Reverse(r.numbers.get(&colour_by).copied().unwrap_or(0)), r.address));
        rows.truncate(SHOWN_INSTRUCTIONS);
        run.instructions.push(InstructionTable { value, fields, colour_by, rows, instructions: count });
    }

    let mut statement = connection
        .prepare(
            "SELECT id, kernel, queue, submitted, completed, grid_x, grid_y, grid_z, workgroup_x, workgroup_y,
                 workgroup_z FROM dispatches ORDER BY id",
        )
        .map_err(query)?;
    let rows = statement
        .query_map([], |row| {
            Ok(DispatchSpan {
                id: row.get(0)?,
                kernel: row.get(1)?,
                queue: row.get(2)?,
                submitted: row.get(3)?,
                completed: row.get(4)?,
                grid: [row.get(5)?, row.get(6)?, row.get(7)?],
                workgroup: [row.get(8)?, row.get(9)?, row.get(10)?],
                numbers: BTreeMap::new(),
            })
        })
        .map_err(query)?;
    run.dispatches = rows.collect::<Result<_, _>>().map_err(query)?;
    let mut statement = connection
        .prepare("SELECT dispatch, name, value FROM dispatch_values WHERE typeof(value) = 'integer'")
        .map_err(query)?;
    let rows = statement
        .query_map([], |row| Ok((row.get::<_, u64>(0)?, row.get::<_, String>(1)?, row.get::<_, i64>(2)?)))
        .map_err(query)?;
    for row in rows {
        let (id, name, value) = row.map_err(query)?;
        if let Ok(at) = run.dispatches.binary_search_by_key(&id, |d| d.id) {
            run.dispatches[at].numbers.insert(name, value);
        }
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_split_at_the_last_colon() {
        assert_eq!(split_location("/src/a:b.hip:12"), Some(("/src/a:b.hip", 12)));
        assert_eq!(split_location("no line"), None);
        assert_eq!(colour_field(&["executions".into(), "divergent".into()]), "divergent");
        assert_eq!(colour_field(&["count".into()]), "count");
        assert_eq!(colour_field(&["executions".into(), "lines".into(), "excess_lines".into()]), "excess_lines");
        assert_eq!(point_address(&serde_json::json!({"address": "0x1a0"})), Some(0x1a0));
        assert_eq!(point_address(&serde_json::json!({"address": 416})), Some(416));
    }
}
