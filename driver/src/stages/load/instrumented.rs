//! What an instrumented code object says about itself, in two sections the
//! loader ignores (no `SHF_ALLOC`): the site table (where inserted code
//! is, per original instruction) and the tool-global table (which of its
//! symbols are the tool's data). `verify`, `inspect` and a runtime that
//! reads a tool's results read them here; the patch stage writes them.

use std::sync::Arc;

use super::CodeObject;

/// `(original address, first byte, end)` as three little-endian u64 per
/// address that got inserted code, in original address order. Or, where
/// the code was laid out as machine code, by function
/// ([`SITES_BY_FUNCTION`]): that magic, the number of functions, each
/// function's address (one relocation each, not two per site), then per
/// site the original address (u64), the function's index, the first byte
/// and the end from the function's start (u32 each) and a zero u32. Or,
/// where groups of kernels were instrumented each on its own, in blocks
/// ([`SITES_IN_BLOCKS`]).
pub const SITE_TABLE: &str = ".gpuinstr.sites";

/// The first u64 of a site table laid out by function (`GPUISITE`).
pub const SITES_BY_FUNCTION: u64 = u64::from_le_bytes(*b"GPUISITE");

/// The first u64 of one block of a site table in blocks (`GPUISITS`), one
/// per group of kernels instrumented on its own: the linker puts the
/// groups' tables one after the other. As [`SITES_BY_FUNCTION`], with the
/// number of sites after the number of functions, so the next block can be
/// found.
pub const SITES_IN_BLOCKS: u64 = u64::from_le_bytes(*b"GPUISITS");

/// The per-site part of a site table by function (after the function
/// addresses): `(original, function index, begin, end)` in original
/// address order.
pub fn sites_by_function_bytes(mut sites: Vec<(u64, u32, u32, u32)>) -> Vec<u8> {
    sites.sort_unstable_by_key(|(original, ..)| *original);
    let mut bytes = Vec::with_capacity(24 * sites.len());
    for (original, function, begin, end) in sites {
        bytes.extend_from_slice(&original.to_le_bytes());
        for word in [function, begin, end, 0] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
    }
    bytes
}

/// Per tool global, 8-byte aligned: u64 size, u32 flags ([`MANAGED`]), u16
/// length of the symbol's name, u16 length of the tool's name, the two
/// names (no terminator), zero padding to 8 bytes.
pub const GLOBAL_TABLE: &str = ".gpuinstr.globals";

/// Per record buffer among the tool globals (`GPUINSTR_RECORDS`; no
/// section when there is none): u32 the buffer's index in the tool-global
/// table, u32 its count's index, u64 bytes per record.
pub const RECORDS_TABLE: &str = ".gpuinstr.records";

/// Per ring of records among the tool globals (`GPUINSTR_RING`; no section
/// when there is none): u32 the index in the tool-global table of the
/// pointer the runtime points at the ring's head, u32 zero, u64 bytes per
/// record.
pub const RINGS_TABLE: &str = ".gpuinstr.rings";

/// Per instrumentation point, in the plan's site order (the `site` a hook
/// gets is the index): u32 count, u32 offset of the string pool from the
/// section's start, then per point u64 original address, u32 opcode (LLVM
/// pseudo opcode number, the hook's `opcode`), u32 pool offsets of the
/// function's name, the opcode's name, the instruction's text and its
/// source line (each NUL-terminated), u32 flags ([`POINT_LEFT_OUT`]); then
/// the pool.
pub const POINT_TABLE: &str = ".gpuinstr.points";

/// A point table entry: the original address (u64), then as u32 the
/// opcode, the pool offsets of function, opcode name, text and location,
/// and the flags.
const POINT_ENTRY_SIZE: usize = 32;

/// Point flag: the point was selected and left out (`--allow-partial`):
/// its hook never runs.
pub const POINT_LEFT_OUT: u32 = 1;

/// Per kernel whose dispatches may run points that were left out
/// (`--allow-partial`; no section when none were): u32 how many, u32
/// length of the kernel's name, the name (no terminator), zero padding to
/// 4 bytes. The runtime marks those kernels' dispatches.
pub const PARTIAL_TABLE: &str = ".gpuinstr.partial";

/// With originals kept (`instrument --keep-originals`), the instrumented
/// copy of kernel or function `f` is `f` followed by this; `f` itself is
/// the original, unchanged. The runtime points a dispatch of `f` at the
/// copy when it selects it.
pub const INSTRUMENTED_SUFFIX: &str = ".gpuinstr";

/// Flag: the tool declared the global `__managed__`; the symbol named is
/// its storage, which the pointer of the tool's name points at.
pub const MANAGED: u32 = 1;

pub use crate::error::TableError;

/// One inserted region: the original instruction it runs before, and where
/// the inserted code is in the instrumented code object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Site {
    pub original: u64,
    pub begin: u64,
    pub end: u64,
}

/// A global of the tool that the instrumented code object defines.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ToolGlobalEntry {
    /// The symbol holding the data (for a managed global, its storage).
    pub symbol: String,
    /// The name in the tool's source.
    pub tool_name: String,
    pub size: u64,
    pub managed: bool,
    /// A buffer of records (`GPUINSTR_RECORDS`; the table [`RECORDS_TABLE`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records: Option<Records>,
    /// A ring of records (`GPUINSTR_RING`; the table [`RINGS_TABLE`]): this
    /// global points at its head; bytes per record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ring: Option<u64>,
}

/// How a record buffer is filled: from its start, `count` (the tool name
/// of a 64-bit global) counting the records wanted, each `record_bytes`
/// long. After a dispatch only the records written need copying, and the
/// buffer no resetting.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Records {
    pub count: String,
    pub record_bytes: u64,
}

/// An instrumentation point as tools see it: what the `site` number a hook
/// got stands for.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PointEntry {
    pub address: u64,
    pub opcode: u32,
    /// (The strings are shared: a function's points name it alike, and
    /// Tensile's names run to 600 characters over millions of points.)
    pub function: Arc<str>,
    /// LLVM's pseudo opcode name (`S_AND_SAVEEXEC_B64`).
    pub opcode_name: Arc<str>,
    /// The instruction as assembly (`s_and_saveexec_b64 s[0:1], vcc`).
    pub text: Arc<str>,
    /// `file:line` from the code object's DWARF line table; empty without one.
    pub location: Arc<str>,
    /// Selected and left out (`--allow-partial`): its hook never runs.
    pub left_out: bool,
}

/// A kernel whose numbers miss points that were left out.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PartialKernel {
    pub kernel: String,
    /// Selected points its dispatches may run that were left out.
    pub left_out: u32,
}

fn section_bytes<'c>(code_object: &'c CodeObject, table: &'static str) -> Result<Option<&'c [u8]>, TableError> {
    let Some(section) = code_object.sections.iter().find(|s| s.name == table) else {
        return Ok(None);
    };
    let start = section.offset as usize;
    let bytes = start
        .checked_add(section.size as usize)
        .and_then(|end| code_object.bytes.get(start..end))
        .ok_or_else(|| TableError { table, problem: "it lies outside the file".into() })?;
    Ok(Some(bytes))
}

/// The site table (empty when the code object has none).
pub fn site_table(code_object: &CodeObject) -> Result<Vec<Site>, TableError> {
    match section_bytes(code_object, SITE_TABLE)? {
        Some(bytes) => sites_of_table(bytes),
        None => Ok(Vec::new()),
    }
}

fn sites_of_table(bytes: &[u8]) -> Result<Vec<Site>, TableError> {
    let word = |chunk: &[u8]| u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
    let by_function = |bytes: &[u8]| bytes.len() >= 16 && word(&bytes[0..8]) == SITES_BY_FUNCTION;
    if by_function(bytes) {
        return sites_of_functions(&bytes[16..], word(&bytes[8..16]), None).map(|(sites, _)| sites);
    }
    if bytes.len() >= 24 && word(&bytes[0..8]) == SITES_IN_BLOCKS {
        let mut sites = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            if rest.len() < 24 || word(&rest[0..8]) != SITES_IN_BLOCKS {
                let problem = format!("a block of sites does not begin {} bytes from the end", rest.len());
                return Err(TableError { table: SITE_TABLE, problem });
            }
            let (block, used) = sites_of_functions(&rest[24..], word(&rest[8..16]), Some(word(&rest[16..24])))?;
            sites.extend(block);
            rest = &rest[24 + used..];
        }
        sites.sort_by_key(|site| site.original);
        return Ok(sites);
    }
    if !bytes.len().is_multiple_of(24) {
        let problem = format!("{} bytes is not a whole number of entries", bytes.len());
        return Err(TableError { table: SITE_TABLE, problem });
    }
    Ok(bytes
        .chunks_exact(24)
        .map(|e| Site { original: word(&e[0..8]), begin: word(&e[8..16]), end: word(&e[16..24]) })
        .collect())
}

/// The sites of one table by function after its header: `functions`
/// addresses, then `sites` entries (None: the rest of `bytes`); the sites
/// and the bytes they took.
fn sites_of_functions(bytes: &[u8], functions: u64, sites: Option<u64>) -> Result<(Vec<Site>, usize), TableError> {
    let word = |chunk: &[u8]| u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
    let broken = |problem: String| TableError { table: SITE_TABLE, problem };
    let functions = usize::try_from(functions).unwrap_or(usize::MAX);
    let entries_at = functions
        .checked_mul(8)
        .filter(|at| *at <= bytes.len())
        .ok_or_else(|| broken(format!("{functions} function addresses do not fit in {} bytes", bytes.len())))?;
    let bases: Vec<u64> = bytes[..entries_at].chunks_exact(8).map(word).collect();
    let entries = match sites {
        None => &bytes[entries_at..],
        Some(sites) => {
            let length = usize::try_from(sites).ok().and_then(|n| n.checked_mul(24));
            length
                .and_then(|n| bytes[entries_at..].get(..n))
                .ok_or_else(|| broken(format!("{sites} sites do not fit in {} bytes", bytes.len() - entries_at)))?
        }
    };
    if !entries.len().is_multiple_of(24) {
        return Err(broken(format!("{} bytes of sites is not a whole number of entries", entries.len())));
    }
    let half = |chunk: &[u8]| u64::from(u32::from_le_bytes(chunk.try_into().expect("4 bytes")));
    let sites = entries
        .chunks_exact(24)
        .map(|e| {
            let function = half(&e[8..12]) as usize;
            let base = *bases
                .get(function)
                .ok_or_else(|| broken(format!("a site names function {function} of {}", bases.len())))?;
            let at = |offset: u64| {
                base.checked_add(offset).ok_or_else(|| broken("a site lies past the end of memory".to_string()))
            };
            Ok(Site { original: word(&e[0..8]), begin: at(half(&e[12..16]))?, end: at(half(&e[16..20]))? })
        })
        .collect::<Result<Vec<Site>, TableError>>()?;
    Ok((sites, entries_at + entries.len()))
}

/// The kernels whose numbers miss points left out (empty when the code
/// object has no such table: nothing was left out).
pub fn partial_kernels(code_object: &CodeObject) -> Result<Vec<PartialKernel>, TableError> {
    match section_bytes(code_object, PARTIAL_TABLE)? {
        Some(bytes) => parse_partial_kernels(bytes),
        None => Ok(Vec::new()),
    }
}

fn parse_partial_kernels(mut bytes: &[u8]) -> Result<Vec<PartialKernel>, TableError> {
    let fail = |problem: String| TableError { table: PARTIAL_TABLE, problem };
    let mut kernels = Vec::new();
    while !bytes.is_empty() {
        let at = kernels.len();
        let header = bytes.get(..8).ok_or_else(|| fail(format!("entry {at} is cut short")))?;
        let left_out = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes"));
        let length = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes")) as usize;
        let end = length.checked_add(8).filter(|end| *end <= bytes.len());
        let name = end.map(|end| &bytes[8..end]).ok_or_else(|| fail(format!("entry {at}'s name is cut short")))?;
        let kernel =
            String::from_utf8(name.to_vec()).map_err(|_| fail(format!("entry {at} has a name that is not UTF-8")))?;
        kernels.push(PartialKernel { kernel, left_out });
        bytes = bytes.get((8 + length).next_multiple_of(4)..).unwrap_or(&[]);
    }
    Ok(kernels)
}

/// The partial-kernel table as assembly, for the emit stage (nothing when
/// no point was left out).
pub fn partial_table_assembly(kernels: &[PartialKernel]) -> String {
    use std::fmt::Write;
    if kernels.is_empty() {
        return String::new();
    }
    let mut out = format!("\n\t.section\t{PARTIAL_TABLE},\"\",@progbits\n\t.p2align\t2\n");
    for entry in kernels {
        writeln!(out, "\t.long\t{}, {}", entry.left_out, entry.kernel.len()).unwrap();
        let bytes: Vec<String> = entry.kernel.bytes().map(|b| b.to_string()).collect();
        if !bytes.is_empty() {
            writeln!(out, "\t.byte\t{}", bytes.join(", ")).unwrap();
        }
        writeln!(out, "\t.p2align\t2").unwrap();
    }
    out
}

/// The tool-global table (empty when the code object has none).
pub fn tool_globals(code_object: &CodeObject) -> Result<Vec<ToolGlobalEntry>, TableError> {
    let mut globals = match section_bytes(code_object, GLOBAL_TABLE)? {
        Some(bytes) => parse_tool_globals(bytes)?,
        None => return Ok(Vec::new()),
    };
    if let Some(bytes) = section_bytes(code_object, RECORDS_TABLE)? {
        attach_records(bytes, &mut globals)?;
    }
    if let Some(bytes) = section_bytes(code_object, RINGS_TABLE)? {
        attach_rings(bytes, &mut globals)?;
    }
    Ok(globals)
}

/// The ring table's entries attached to the pointers they name.
fn attach_rings(bytes: &[u8], globals: &mut [ToolGlobalEntry]) -> Result<(), TableError> {
    let fail = |problem: String| TableError { table: RINGS_TABLE, problem };
    if !bytes.len().is_multiple_of(16) {
        return Err(fail(format!("{} bytes are not whole 16-byte entries", bytes.len())));
    }
    for (at, entry) in bytes.chunks_exact(16).enumerate() {
        let index = u32::from_le_bytes(entry[0..4].try_into().expect("4 bytes")) as usize;
        let record_bytes = u64::from_le_bytes(entry[8..16].try_into().expect("8 bytes"));
        let Some(global) = globals.get_mut(index) else {
            return Err(fail(format!("entry {at} names global {index} of {}", globals.len())));
        };
        if global.size != 8 || record_bytes == 0 || global.records.is_some() {
            return Err(fail(format!(
                "entry {at}: `{}` ({} bytes) cannot point at a ring of {record_bytes}-byte records",
                global.tool_name, global.size
            )));
        }
        global.ring = Some(record_bytes);
    }
    Ok(())
}

/// The record table's entries attached to the globals they name.
fn attach_records(bytes: &[u8], globals: &mut [ToolGlobalEntry]) -> Result<(), TableError> {
    let fail = |problem: String| TableError { table: RECORDS_TABLE, problem };
    if !bytes.len().is_multiple_of(16) {
        return Err(fail(format!("{} bytes are not whole 16-byte entries", bytes.len())));
    }
    for (at, entry) in bytes.chunks_exact(16).enumerate() {
        let index = |from: usize| u32::from_le_bytes(entry[from..from + 4].try_into().expect("4 bytes")) as usize;
        let (buffer, count) = (index(0), index(4));
        let record_bytes = u64::from_le_bytes(entry[8..16].try_into().expect("8 bytes"));
        let known = |g: usize| g < globals.len();
        if !known(buffer) || !known(count) || buffer == count {
            return Err(fail(format!("entry {at} names globals {buffer} and {count} of {}", globals.len())));
        }
        if globals[count].size != 8 || record_bytes == 0 || !globals[buffer].size.is_multiple_of(record_bytes) {
            return Err(fail(format!(
                "entry {at}: {} bytes of records of {record_bytes} bytes counted by a global of {} bytes",
                globals[buffer].size, globals[count].size
            )));
        }
        let count = globals[count].tool_name.clone();
        globals[buffer].records = Some(Records { count, record_bytes });
    }
    Ok(())
}

fn parse_tool_globals(mut bytes: &[u8]) -> Result<Vec<ToolGlobalEntry>, TableError> {
    let fail = |problem: String| TableError { table: GLOBAL_TABLE, problem };
    let mut entries = Vec::new();
    while !bytes.is_empty() {
        let at = entries.len();
        let header = bytes.get(..16).ok_or_else(|| fail(format!("entry {at} is cut short")))?;
        let size = u64::from_le_bytes(header[0..8].try_into().expect("8 bytes"));
        let flags = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
        let symbol_length = usize::from(u16::from_le_bytes([header[12], header[13]]));
        let tool_length = usize::from(u16::from_le_bytes([header[14], header[15]]));
        let names_end = 16 + symbol_length + tool_length;
        let names = bytes.get(16..names_end).ok_or_else(|| fail(format!("entry {at}'s names are cut short")))?;
        let text = |raw: &[u8]| {
            String::from_utf8(raw.to_vec()).map_err(|_| fail(format!("entry {at} has a name that is not UTF-8")))
        };
        entries.push(ToolGlobalEntry {
            symbol: text(&names[..symbol_length])?,
            tool_name: text(&names[symbol_length..])?,
            size,
            managed: flags & MANAGED != 0,
            records: None,
            ring: None,
        });
        bytes = bytes.get(names_end.next_multiple_of(8)..).unwrap_or(&[]);
    }
    Ok(entries)
}

/// The point table (empty when the code object has none).
pub fn point_table(code_object: &CodeObject) -> Result<Vec<PointEntry>, TableError> {
    match section_bytes(code_object, POINT_TABLE)? {
        Some(bytes) => parse_points(bytes),
        None => Ok(Vec::new()),
    }
}

fn parse_points(bytes: &[u8]) -> Result<Vec<PointEntry>, TableError> {
    let fail = |problem: String| TableError { table: POINT_TABLE, problem };
    let u32_at = |at: usize| bytes.get(at..at + 4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")));
    let count = u32_at(0).ok_or_else(|| fail("it has no header".into()))? as usize;
    let pool = u32_at(4).ok_or_else(|| fail("it has no header".into()))? as usize;
    // Entries of 32 bytes; tables written before points had locations have 24.
    let entry_size = [POINT_ENTRY_SIZE, 24]
        .into_iter()
        .find(|size| count.checked_mul(*size).and_then(|b| b.checked_add(8)) == Some(pool))
        .filter(|_| pool <= bytes.len());
    let Some(entry_size) = entry_size else {
        return Err(fail(format!("{count} entries do not fit before the string pool at {pool}")));
    };
    let text = |offset: u32| -> Result<Arc<str>, TableError> {
        let start = pool.checked_add(offset as usize).filter(|&s| s < bytes.len());
        let rest =
            start.map(|s| &bytes[s..]).ok_or_else(|| fail(format!("a string offset {offset} is past the pool")))?;
        let end = rest.iter().position(|&b| b == 0).ok_or_else(|| fail("a string is not terminated".into()))?;
        std::str::from_utf8(&rest[..end]).map(Arc::from).map_err(|_| fail("a string is not UTF-8".into()))
    };
    (0..count)
        .map(|k| {
            let at = 8 + entry_size * k;
            let address = u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
            let field = |n: usize| u32_at(at + 8 + 4 * n).expect("inside the entries");
            Ok(PointEntry {
                address,
                opcode: field(0),
                function: text(field(1))?,
                opcode_name: text(field(2))?,
                text: text(field(3))?,
                location: if entry_size == 24 { Arc::from("") } else { text(field(4))? },
                left_out: entry_size == POINT_ENTRY_SIZE && field(5) & POINT_LEFT_OUT != 0,
            })
        })
        .collect()
}

/// The point table's contents (strings shared in the pool), for the emit
/// stage: the section's bytes, aligned to 8.
pub fn point_table_bytes(points: &[PointEntry]) -> Vec<u8> {
    if points.is_empty() {
        return Vec::new();
    }
    fn pooled<'p>(pool: &mut Vec<u8>, offsets: &mut rustc_hash::FxHashMap<&'p str, u32>, text: &'p str) -> u32 {
        *offsets.entry(text).or_insert_with(|| {
            let at = pool.len() as u32;
            pool.extend_from_slice(text.as_bytes());
            pool.push(0);
            at
        })
    }
    let mut pool: Vec<u8> = Vec::new();
    let mut offsets: rustc_hash::FxHashMap<&str, u32> = Default::default();
    let mut offset_of = |text| pooled(&mut pool, &mut offsets, text);
    // A function's points come one after the other, its name shared.
    let mut last_function: Option<(&Arc<str>, u32)> = None;
    let mut out = Vec::with_capacity(8 + POINT_ENTRY_SIZE * points.len());
    out.extend_from_slice(&(points.len() as u32).to_le_bytes());
    out.extend_from_slice(&((8 + POINT_ENTRY_SIZE * points.len()) as u32).to_le_bytes());
    for point in points {
        out.extend_from_slice(&point.address.to_le_bytes());
        let function = match last_function {
            Some((name, at)) if Arc::ptr_eq(name, &point.function) => at,
            _ => offset_of(&point.function),
        };
        last_function = Some((&point.function, function));
        let flags = if point.left_out { POINT_LEFT_OUT } else { 0 };
        let fields = [point.opcode, function, offset_of(&point.opcode_name), offset_of(&point.text)];
        for field in fields.into_iter().chain([offset_of(&point.location), flags]) {
            out.extend_from_slice(&field.to_le_bytes());
        }
    }
    out.extend_from_slice(&pool);
    out
}

/// Point tables of groups of kernels (each [`point_table_bytes`]) as one
/// table, their points in the groups' order (sites count on from group to
/// group): the entries one after the other, then the pools, each entry's
/// strings found in its own group's pool.
pub fn join_point_tables<T: AsRef<[u8]>>(tables: &[T]) -> Vec<u8> {
    let tables: Vec<&[u8]> = tables.iter().map(AsRef::as_ref).filter(|t| !t.is_empty()).collect();
    let u32_at = |bytes: &[u8], at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let count: usize = tables.iter().map(|t| u32_at(t, 0) as usize).sum();
    if count == 0 {
        return Vec::new();
    }
    let pool_start = 8 + POINT_ENTRY_SIZE * count;
    let mut entries = Vec::with_capacity(pool_start);
    entries.extend_from_slice(&(count as u32).to_le_bytes());
    entries.extend_from_slice(&(pool_start as u32).to_le_bytes());
    let mut pool = Vec::new();
    for table in tables {
        let (points, own_pool) = (u32_at(table, 0) as usize, u32_at(table, 4) as usize);
        let shift = pool.len() as u32;
        for entry in table[8..own_pool].chunks_exact(POINT_ENTRY_SIZE) {
            entries.extend_from_slice(&entry[..12]);
            // Four string offsets (function, opcode name, text, location).
            for field in 0..4 {
                entries.extend_from_slice(&(u32_at(entry, 12 + 4 * field) + shift).to_le_bytes());
            }
            entries.extend_from_slice(&entry[28..]);
        }
        debug_assert_eq!(own_pool, 8 + POINT_ENTRY_SIZE * points);
        pool.extend_from_slice(&table[own_pool..]);
    }
    entries.extend_from_slice(&pool);
    entries
}

/// The point table ([`point_table_bytes`]) as assembly, for the emit stage.
pub fn point_table_assembly(bytes: &[u8]) -> String {
    use std::fmt::Write;
    if bytes.is_empty() {
        return String::new();
    }
    let mut out = format!("\n\t.section\t{POINT_TABLE},\"\",@progbits\n\t.p2align\t3\n");
    for line in bytes.chunks(32) {
        let words: Vec<String> = line.iter().map(|b| b.to_string()).collect();
        writeln!(out, "\t.byte\t{}", words.join(", ")).unwrap();
    }
    out
}

/// The tool-global table as assembly, for the patch stage.
pub fn global_table_assembly(entries: &[ToolGlobalEntry]) -> String {
    use std::fmt::Write;
    let mut out = format!("\n\t.section\t{GLOBAL_TABLE},\"\",@progbits\n\t.p2align\t3\n");
    for entry in entries {
        let flags = if entry.managed { MANAGED } else { 0 };
        writeln!(out, "\t.quad\t{}\n\t.long\t{flags}", entry.size).unwrap();
        writeln!(out, "\t.short\t{}, {}", entry.symbol.len(), entry.tool_name.len()).unwrap();
        let bytes: Vec<String> = entry.symbol.bytes().chain(entry.tool_name.bytes()).map(|b| b.to_string()).collect();
        if !bytes.is_empty() {
            writeln!(out, "\t.byte\t{}", bytes.join(", ")).unwrap();
        }
        writeln!(out, "\t.p2align\t3").unwrap();
    }
    let index = |name: &str| entries.iter().position(|e| e.tool_name == name);
    // (A count that is no entry cannot be: the payload compiler checks it.
    // Left out, the runtime would copy the whole buffer, as for any global.)
    let records: Vec<(usize, usize, u64)> = (entries.iter().enumerate())
        .filter_map(|(buffer, e)| e.records.as_ref().map(|r| (buffer, index(&r.count), r.record_bytes)))
        .filter_map(|(buffer, count, bytes)| Some((buffer, count?, bytes)))
        .collect();
    if !records.is_empty() {
        writeln!(out, "\n\t.section\t{RECORDS_TABLE},\"\",@progbits\n\t.p2align\t3").unwrap();
        for (buffer, count, bytes) in records {
            writeln!(out, "\t.long\t{buffer}, {count}\n\t.quad\t{bytes}").unwrap();
        }
    }
    let rings: Vec<(usize, u64)> = entries.iter().enumerate().filter_map(|(k, e)| Some((k, e.ring?))).collect();
    if !rings.is_empty() {
        writeln!(out, "\n\t.section\t{RINGS_TABLE},\"\",@progbits\n\t.p2align\t3").unwrap();
        for (pointer, bytes) in rings {
            writeln!(out, "\t.long\t{pointer}, 0\n\t.quad\t{bytes}").unwrap();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_read_back_as_written() {
        let points = [
            PointEntry {
                address: 0x1700,
                opcode: 812,
                function: "_Z3addPfi".into(),
                opcode_name: "S_LOAD_DWORDX2_IMM".into(),
                text: "s_load_dwordx2 s[0:1], s[4:5], 0x0".into(),
                location: "/src/add.hip:7".into(),
                left_out: false,
            },
            PointEntry {
                address: 0x1708,
                opcode: 812,
                function: "_Z3addPfi".into(),
                opcode_name: "S_LOAD_DWORDX2_IMM".into(),
                text: "s_load_dwordx2 s[2:3], s[4:5], 0x8".into(),
                location: "".into(),
                left_out: true,
            },
        ];
        let bytes = point_table_bytes(&points);
        assert_eq!(parse_points(&bytes).unwrap(), points);
        // Shared strings are in the pool once (the empty location too):
        // "_Z3addPfi", the opcode name, two texts, one location, "".
        let pool = &bytes[8 + 2 * POINT_ENTRY_SIZE..];
        assert_eq!(pool.iter().filter(|b| **b == 0).count(), 6);
        // The assembly says the same bytes.
        let assembly = point_table_assembly(&bytes);
        let said: Vec<u8> = assembly
            .lines()
            .filter_map(|l| l.trim().strip_prefix(".byte\t"))
            .flat_map(|values| values.split(", ").map(|v| v.parse::<u8>().unwrap()))
            .collect();
        assert_eq!(said, bytes);
        assert!(parse_points(&bytes[..20]).is_err());

        // Groups' tables joined: their points in order, each with its own
        // strings (the second group's pool starts past the first's).
        let mut later = points.clone();
        later[0].function = "_Z3subPfi".into();
        later[1].text = "s_endpgm".into();
        let joined = join_point_tables(&[point_table_bytes(&points), Vec::new(), point_table_bytes(&later)]);
        assert_eq!(parse_points(&joined).unwrap(), [points.clone(), later].concat());
        assert!(join_point_tables(&[Vec::new()]).is_empty());
    }

    /// Groups of kernels each write a block of the site table; the linker
    /// puts them one after the other, and they are read as one table.
    #[test]
    fn site_tables_in_blocks_are_read_as_one() {
        let block = |functions: &[u64], sites: &[(u64, u32, u32, u32)]| {
            let mut bytes = Vec::new();
            for word in [SITES_IN_BLOCKS, functions.len() as u64, sites.len() as u64] {
                bytes.extend(word.to_le_bytes());
            }
            functions.iter().for_each(|f| bytes.extend(f.to_le_bytes()));
            bytes.extend(sites_by_function_bytes(sites.to_vec()));
            bytes
        };
        let table =
            [block(&[0x2000], &[(0x1000, 0, 0, 16), (0x1004, 0, 20, 36)]), block(&[0x9000], &[(0x1800, 0, 8, 24)])]
                .concat();
        let sites = sites_of_table(&table).unwrap();
        let found: Vec<(u64, u64, u64)> = sites.iter().map(|s| (s.original, s.begin, s.end)).collect();
        assert_eq!(found, [(0x1000, 0x2000, 0x2010), (0x1004, 0x2014, 0x2024), (0x1800, 0x9008, 0x9018)]);
        // A block cut short is an error naming the table, not sites read
        // from the wrong bytes.
        let error = sites_of_table(&table[..table.len() - 8]).unwrap_err();
        assert!(error.to_string().contains(".gpuinstr.sites"), "{error}");
    }

    #[test]
    fn tables_written_before_points_had_locations_are_read() {
        // One 24-byte entry (address, opcode, function, name, text), then
        // the pool "f\0n\0t\0".
        let mut bytes = Vec::new();
        bytes.extend(1u32.to_le_bytes());
        bytes.extend(32u32.to_le_bytes());
        bytes.extend(0x1700u64.to_le_bytes());
        for field in [7u32, 0, 2, 4] {
            bytes.extend(field.to_le_bytes());
        }
        bytes.extend(b"f\0n\0t\0");
        let expected = PointEntry {
            address: 0x1700,
            opcode: 7,
            function: "f".into(),
            opcode_name: "n".into(),
            text: "t".into(),
            location: "".into(),
            left_out: false,
        };
        assert_eq!(parse_points(&bytes).unwrap(), vec![expected]);
        // A size that is neither is refused.
        bytes[4] = 36;
        assert!(parse_points(&bytes).is_err());
    }

    #[test]
    fn partial_kernels_are_read_back_as_written() {
        let kernels = [
            PartialKernel { kernel: "_Z5scalePffi".into(), left_out: 3 },
            PartialKernel { kernel: "k".into(), left_out: 1 },
        ];
        // The bytes llvm-mc lays out for partial_table_assembly's directives.
        let mut bytes = Vec::new();
        for k in &kernels {
            bytes.extend(k.left_out.to_le_bytes());
            bytes.extend((k.kernel.len() as u32).to_le_bytes());
            bytes.extend(k.kernel.bytes());
            bytes.resize(bytes.len().next_multiple_of(4), 0);
        }
        assert_eq!(parse_partial_kernels(&bytes).unwrap(), kernels);
        assert!(parse_partial_kernels(&bytes[..6]).unwrap_err().problem.contains("entry 0 is cut short"));
        assert!(parse_partial_kernels(&bytes[..12]).unwrap_err().problem.contains("entry 0's name is cut short"));
        let assembly = partial_table_assembly(&kernels);
        assert!(assembly.contains("\t.long\t3, 12\n\t.byte\t95, 90, 53"), "{assembly}");
        assert_eq!(partial_table_assembly(&[]), "");
    }

    #[test]
    fn entries_are_read_back_as_written() {
        // The bytes as llvm-mc lays out global_table_assembly's output (the
        // instrument tests read real ones back).
        let entries = [
            ToolGlobalEntry {
                symbol: "Counter.managed".into(),
                tool_name: "Counter".into(),
                size: 8,
                managed: true,
                records: None,
                ring: None,
            },
            ToolGlobalEntry {
                symbol: "T".into(),
                tool_name: "T".into(),
                size: 4096,
                managed: false,
                records: None,
                ring: None,
            },
        ];
        let mut bytes = Vec::new();
        for e in &entries {
            bytes.extend(e.size.to_le_bytes());
            bytes.extend(u32::from(e.managed).to_le_bytes());
            bytes.extend((e.symbol.len() as u16).to_le_bytes());
            bytes.extend((e.tool_name.len() as u16).to_le_bytes());
            bytes.extend(e.symbol.bytes().chain(e.tool_name.bytes()));
            bytes.resize(bytes.len().next_multiple_of(8), 0);
        }
        assert_eq!(parse_tool_globals(&bytes).unwrap(), entries);
        assert!(parse_tool_globals(&bytes[..12]).unwrap_err().problem.contains("entry 0 is cut short"));
        assert!(parse_tool_globals(&bytes[..20]).unwrap_err().problem.contains("entry 0's names are cut short"));
        let assembly = global_table_assembly(&entries);
        assert!(assembly.contains("\t.quad\t8\n\t.long\t1\n\t.short\t15, 7\n"), "{assembly}");
        assert!(!assembly.contains(RECORDS_TABLE), "no record buffer, no table");
        assert!(!assembly.contains(RINGS_TABLE), "no ring, no table");
    }

    #[test]
    fn record_buffers_are_read_back_as_written() {
        let global = |name: &str, size| ToolGlobalEntry {
            symbol: name.into(),
            tool_name: name.into(),
            size,
            managed: false,
            records: None,
            ring: None,
        };
        let records = Records { count: "TraceCount".into(), record_bytes: 16 };
        let written = [global("TraceCount", 8), ToolGlobalEntry { records: Some(records), ..global("Trace", 4096) }];
        let assembly = global_table_assembly(&written);
        assert!(assembly.contains(&format!("\t.section\t{RECORDS_TABLE}")), "{assembly}");
        assert!(assembly.ends_with("\t.long\t1, 0\n\t.quad\t16\n"), "{assembly}");
        // The bytes llvm-mc makes of that entry.
        let entry: Vec<u8> =
            [1u32.to_le_bytes(), 0u32.to_le_bytes()].concat().into_iter().chain(16u64.to_le_bytes()).collect();
        let mut read = [global("TraceCount", 8), global("Trace", 4096)];
        attach_records(&entry, &mut read).unwrap();
        assert_eq!(read, written);
        // Entries that cannot be: cut short, a global that is not there, a
        // count that is no u64, a buffer of partial records.
        let problem =
            |bytes: &[u8], globals: &mut [ToolGlobalEntry]| attach_records(bytes, globals).unwrap_err().problem;
        assert!(problem(&entry[..12], &mut read.clone()).contains("not whole 16-byte entries"));
        assert!(problem(&entry, &mut read[..1]).contains("entry 0 names globals 1 and 0 of 1"));
        let mut wide_count = [global("TraceCount", 4), global("Trace", 4096)];
        assert!(problem(&entry, &mut wide_count).contains("counted by a global of 4 bytes"));
        let mut partial = [global("TraceCount", 8), global("Trace", 4100)];
        assert!(problem(&entry, &mut partial).contains("4100 bytes of records of 16 bytes"));
    }

    #[test]
    fn rings_are_read_back_as_written() {
        let global = |name: &str, size| ToolGlobalEntry {
            symbol: name.into(),
            tool_name: name.into(),
            size,
            managed: false,
            records: None,
            ring: None,
        };
        let written = [global("Count", 8), ToolGlobalEntry { ring: Some(16), ..global("Trace", 8) }];
        let assembly = global_table_assembly(&written);
        assert!(
            assembly.ends_with(&format!(
                "\t.section\t{RINGS_TABLE},\"\",@progbits\n\t.p2align\t3\n\t.long\t1, 0\n\t.quad\t16\n"
            )),
            "{assembly}"
        );
        let entry: Vec<u8> =
            [1u32.to_le_bytes(), 0u32.to_le_bytes()].concat().into_iter().chain(16u64.to_le_bytes()).collect();
        let mut read = [global("Count", 8), global("Trace", 8)];
        attach_rings(&entry, &mut read).unwrap();
        assert_eq!(read, written);
        let problem = |bytes: &[u8], globals: &mut [ToolGlobalEntry]| attach_rings(bytes, globals).unwrap_err().problem;
        assert!(problem(&entry[..8], &mut read.clone()).contains("not whole 16-byte entries"));
        assert!(problem(&entry, &mut read[..1]).contains("entry 0 names global 1 of 1"));
        let mut array = [global("Count", 8), global("Trace", 4096)];
        assert!(problem(&entry, &mut array).contains("`Trace` (4096 bytes) cannot point at a ring of 16-byte records"));
    }
}
