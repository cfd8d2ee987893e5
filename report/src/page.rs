//! The page: one self-contained HTML file (styles inline, no script, no
//! request leaves it), so it can be mailed, archived or opened offline.
//! Every number shown carries `data-` attributes naming what it is, for
//! people's scripts and for the test that checks the rendered page against
//! the database.

use std::fmt::Write;

use crate::run::{InstructionTable, LineTable, Run};

/// Source files as the page shows them: the text of a file the DWARF
/// line table names, when it can be read.
pub trait Sources {
    fn text(&self, file: &str) -> Option<String>;
}

/// Files read from disk, by the path the line table gives.
pub struct FromDisk;

impl Sources for FromDisk {
    fn text(&self, file: &str) -> Option<String> {
        std::fs::read_to_string(file).ok()
    }
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Seconds since 1970 as UTC `YYYY-MM-DD HH:MM:SS`.
fn utc(seconds: f64) -> String {
    let total = seconds.max(0.0) as i64;
    let (days, rest) = (total.div_euclid(86_400), total.rem_euclid(86_400));
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}", rest / 3600, rest / 60 % 60, rest % 60)
}

const STYLE: &str = "
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; }
.run { color: #555; }
.unfinished { color: #a00; font-weight: bold; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { padding: 2px 8px; border-bottom: 1px solid #ddd; text-align: left; vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
pre, code, td.src, td.asm { font-family: ui-monospace, monospace; font-size: 12px; white-space: pre; }
td.asm { color: #335; }
.warnings li { color: #a00; }
";

/// The page of `run`.
pub fn page(run: &Run, sources: &dyn Sources) -> String {
    let mut out = String::new();
    // The program's name heads the page; its whole command line follows.
    let name =
        std::path::Path::new(&run.program).file_name().map_or(run.program.clone(), |n| n.to_string_lossy().into());
    let title = format!("gpuinstr: {name}");
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n",
        escape(&title)
    );
    let _ = writeln!(out, "<h1>{}</h1>", escape(&name));
    let command = std::iter::once(run.program.as_str()).chain(run.arguments.iter().map(String::as_str));
    let _ = write!(
        out,
        "<p class=\"run\"><code>{}</code><br>gpuinstr {}; started {} UTC",
        escape(&command.collect::<Vec<_>>().join(" ")),
        escape(&run.gpuinstr),
        utc(run.started)
    );
    match run.finished {
        Some(finished) => {
            let _ = write!(out, ", finished {} UTC ({:.1} s)", utc(finished), finished - run.started);
        }
        None => {
            let _ = write!(
                out,
                "; <span class=\"unfinished\" id=\"unfinished\">the run did not finish (killed, or stopped by the GPU): \
                 what follows is what completed</span>"
            );
        }
    }
    out.push_str("</p>\n");
    if !run.warnings.is_empty() {
        let _ =
            writeln!(out, "<section class=\"warnings\" id=\"warnings\"><h2>{} warnings</h2><ul>", run.warnings.len());
        for warning in &run.warnings {
            let _ = writeln!(out, "<li>{}</li>", escape(warning));
        }
        out.push_str("</ul></section>\n");
    }
    kernels(&mut out, run);
    for table in &run.lines {
        lines(&mut out, table, sources);
    }
    for table in &run.instructions {
        instructions(&mut out, table);
    }
    out.push_str("</body></html>\n");
    out
}

fn kernels(out: &mut String, run: &Run) {
    let mut names: Vec<&String> = run.kernels.iter().flat_map(|k| k.totals.keys()).collect();
    names.sort();
    names.dedup();
    let _ = writeln!(
        out,
        "<section id=\"kernels\"><h2>Kernels by cost</h2><table><tr><th>kernel</th><th class=\"n\">dispatches</th>"
    );
    for name in &names {
        let _ = write!(out, "<th class=\"n\">{}</th>", escape(name));
    }
    out.push_str("</tr>\n");
    for kernel in &run.kernels {
        let _ = write!(
            out,
            "<tr data-kernel=\"{0}\"><td><code>{0}</code></td><td class=\"n\" data-value=\"dispatches\">{1}</td>",
            escape(&kernel.kernel),
            kernel.dispatches
        );
        for name in &names {
            match kernel.totals.get(*name) {
                Some(total) => {
                    let _ = write!(out, "<td class=\"n\" data-value=\"{}\">{total}</td>", escape(name));
                }
                None => out.push_str("<td></td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table></section>\n");
}

/// A line's background: white to orange by its share of the largest.
fn shade(value: i64, largest: i64) -> String {
    if value <= 0 || largest <= 0 {
        return String::new();
    }
    let share = value as f64 / largest as f64;
    let alpha = 0.08 + 0.62 * share;
    format!(" style=\"background: rgba(255, 140, 0, {alpha:.2})\"")
}

fn instructions(out: &mut String, table: &InstructionTable) {
    let shown = if table.rows.len() < table.instructions {
        format!("the {} with the most {} of {}", table.rows.len(), escape(&table.colour_by), table.instructions)
    } else {
        format!("coloured by {}", escape(&table.colour_by))
    };
    let _ = write!(
        out,
        "<section class=\"instructions\" data-tool-value=\"{0}\"><h2>Instructions: <code>{0}</code>, {shown}</h2>\n\
         <table><tr><th>function</th><th class=\"n\">address</th><th>line</th>",
        escape(&table.value)
    );
    for field in &table.fields {
        let _ = write!(out, "<th class=\"n\">{}</th>", escape(field));
    }
    out.push_str("<th>instruction</th></tr>\n");
    let largest = table.rows.iter().filter_map(|r| r.numbers.get(&table.colour_by)).copied().max().unwrap_or(0);
    for row in &table.rows {
        let colour = row.numbers.get(&table.colour_by).copied().unwrap_or(0);
        let _ = write!(
            out,
            "<tr data-function=\"{0}\" data-address=\"{1:#x}\"{2}><td><code>{0}</code></td><td class=\"n\">{1:#x}</td><td>{3}</td>",
            escape(&row.function),
            row.address,
            shade(colour, largest),
            escape(row.location.as_deref().unwrap_or(""))
        );
        for field in &table.fields {
            match row.numbers.get(field) {
                Some(value) => {
                    let _ = write!(out, "<td class=\"n\" data-value=\"{}\">{value}</td>", escape(field));
                }
                None => out.push_str("<td></td>"),
            }
        }
        let _ = writeln!(out, "<td class=\"asm\">{}</td></tr>", escape(&row.assembly));
    }
    out.push_str("</table></section>\n");
}

fn lines(out: &mut String, table: &LineTable, sources: &dyn Sources) {
    let _ = writeln!(
        out,
        "<section class=\"lines\" data-tool-value=\"{0}\"><h2>Source lines: <code>{0}</code>, coloured by {1}</h2>",
        escape(&table.value),
        escape(&table.colour_by)
    );
    for (file, numbered) in &table.files {
        let largest = numbered.values().filter_map(|l| l.numbers.get(&table.colour_by)).copied().max().unwrap_or(0);
        let text = sources.text(file);
        let source_lines: Vec<&str> = text.as_deref().map(|t| t.lines().collect()).unwrap_or_default();
        let _ = write!(
            out,
            "<h3><code>{}</code>{}</h3>\n<table data-file=\"{}\"><tr><th class=\"n\">line</th>",
            escape(file),
            if text.is_none() { " (source not found: the lines with numbers only)" } else { "" },
            escape(file)
        );
        for field in &table.fields {
            let _ = write!(out, "<th class=\"n\">{}</th>", escape(field));
        }
        out.push_str("<th>source</th><th>instructions there</th></tr>\n");
        // With the source: every line, numbered or not, a few around each
        // numbered one; without: the numbered lines.
        let shown: Vec<u32> = if source_lines.is_empty() {
            numbered.keys().copied().collect()
        } else {
            let last = source_lines.len() as u32;
            let mut keep: Vec<u32> =
                numbered.keys().flat_map(|&l| l.saturating_sub(2).max(1)..=(l + 2).min(last.max(l))).collect();
            keep.sort_unstable();
            keep.dedup();
            keep
        };
        let mut previous = 0;
        for line in shown {
            if previous != 0 && line > previous + 1 {
                let _ =
                    writeln!(out, "<tr><td class=\"n\">…</td><td colspan=\"{}\"></td></tr>", table.fields.len() + 2);
            }
            previous = line;
            let entry = numbered.get(&line);
            let colour = entry.and_then(|e| e.numbers.get(&table.colour_by)).copied().unwrap_or(0);
            let _ = write!(
                out,
                "<tr{}{}><td class=\"n\">{line}</td>",
                if entry.is_some() { format!(" data-line=\"{line}\"") } else { String::new() },
                shade(colour, largest)
            );
            for field in &table.fields {
                match entry.and_then(|e| e.numbers.get(field)) {
                    Some(value) => {
                        let _ = write!(out, "<td class=\"n\" data-value=\"{}\">{value}</td>", escape(field));
                    }
                    None => out.push_str("<td></td>"),
                }
            }
            let source = source_lines.get(line as usize - 1).copied().unwrap_or("");
            let assembly = entry.map(|e| e.assembly.join("\n")).unwrap_or_default();
            let _ = writeln!(
                out,
                "<td class=\"src\">{}</td><td class=\"asm\">{}</td></tr>",
                escape(source),
                escape(&assembly)
            );
        }
        out.push_str("</table>\n");
    }
    out.push_str("</section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc() {
        assert_eq!(utc(0.0), "1970-01-01 00:00:00");
        assert_eq!(utc(1_795_953_600.0), "2026-11-29 12:00:00");
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
