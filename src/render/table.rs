//! The report for people: which containerd was looked at, then a narrow
//! list of what is wrong (kind, severity, pod/container, short id, one-line
//! summary), cut to the width of the terminal (80 columns into a pipe, or
//! `COLUMNS`), as kubectl and crictl print theirs. `-o wide` adds, per
//! finding, the full id, the evidence, the likely cause and what to do.
//!
//! Every string from the node goes through [`shown`] before it is cut or
//! wrapped, so no cut leaves an escape sequence open.

use std::io::{self, IsTerminal, Write};

use comfy_table::{
    presets, Cell, CellAlignment, Color, ColumnConstraint, ContentArrangement, Row, Table,
};
use serde_json::Value;

use crate::inert::{inert_path, prose, shown};
use crate::model::{Finding, Located, NodeContext, Severity, ShimRow};
use crate::report::{Report, FINDINGS_PER_KIND};

/// How the report is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Columns no line goes past (a word longer than a line aside, with
    /// `wide`).
    pub width: usize,
    /// `-o wide`: the details of every finding, nothing cut.
    pub wide: bool,
    /// Severity in colour.
    pub colour: bool,
}

impl Layout {
    /// For stdout: the terminal's width, else `COLUMNS`, else 80.
    pub fn for_stdout(wide: bool) -> Layout {
        Layout {
            width: stdout_width(),
            wide,
            colour: colour(),
        }
    }
}

/// The list as a person at an 80-column terminal reads it.
pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    render_with(report, Layout::for_stdout(false), out)
}

/// `-o wide`: the list, then each finding in full.
pub fn render_wide(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    render_with(report, Layout::for_stdout(true), out)
}

pub fn render_with(report: &Report, layout: Layout, out: &mut dyn Write) -> io::Result<()> {
    let text = |out: &mut dyn Write, text: &str, first: &str| -> io::Result<()> {
        let rest = format!("{first}  ");
        for line in wrap(text, layout.width, first, &rest, !layout.wide) {
            writeln!(out, "{line}")?;
        }
        Ok(())
    };
    let paths = &report.paths;
    let mut config = match &paths.config {
        Some(path) => format!("config {}", inert_path(path)),
        None => "no config file".to_string(),
    };
    if let Some(process) = &paths.process {
        config.push_str(&format!(", running containerd pid {}", process.pid));
    }
    let version = match &report.containerd.version {
        Some(version) => format!("{} [{}]", shown(version), report.containerd.source.as_str()),
        None => "version unknown".to_string(),
    };
    let header = format!(
        "containerd {version}: root {}, state {}, socket {} ({config}); namespace {}",
        located(&paths.root),
        located(&paths.state),
        located(&paths.address),
        shown(&report.namespace)
    );
    text(out, &header, "")?;
    if let Some(note) = &paths.note {
        text(out, &format!("note: {}", shown(note)), "")?;
    }
    for other in &paths.other_containerds {
        let line = format!(
            "not the daemon: containerd pid {} ({}): {}",
            other.pid,
            inert_path(&other.exe),
            shown(&other.reason)
        );
        text(out, &line, "")?;
    }
    for reason in &paths.unproven {
        text(out, &format!("cannot act: {}", shown(reason)), "")?;
    }
    for advisory in &report.advisories {
        let line = format!(
            "known bug {}: {}; {}",
            advisory.id, advisory.symptom, advisory.advice
        );
        text(out, &line, "")?;
    }
    if let Some(context) = &report.context {
        text(out, &format!("node: {}", node_line(context)), "")?;
    }

    if let Some(shims) = &report.shims {
        writeln!(out)?;
        if shims.is_empty() {
            writeln!(out, "No containerd shims are running.")?;
        } else {
            write_table(out, &shims_table(shims, layout))?;
        }
        if report.shims_omitted > 0 {
            let line = format!(
                "… and {} more shim(s) not this containerd's, not listed",
                report.shims_omitted
            );
            text(out, &line, "")?;
        }
    } else if report.findings.is_empty() {
        if report.gaps.is_empty() {
            writeln!(out, "\nNo findings.")?;
        } else {
            writeln!(out, "\nNo findings in what could be checked.")?;
        }
    } else {
        writeln!(out)?;
        write_table(out, &findings_table(&report.findings, layout))?;
        for (kind, count) in &report.findings_omitted {
            let line = format!(
                "… and {count} more {kind} finding(s) not listed (at most {FINDINGS_PER_KIND} of a kind are)"
            );
            text(out, &line, "")?;
        }
        if layout.wide {
            for finding in &report.findings {
                writeln!(out)?;
                write_details(out, finding, layout)?;
            }
        } else {
            text(
                out,
                "Each finding's evidence, likely cause and what to do: -o wide (or -o json).",
                "",
            )?;
        }
    }

    if !report.actions.is_empty() {
        writeln!(out, "\nActions:")?;
        let mut table = list_table(&["SHIM PID", "ID", "OUTCOME", "DETAIL"], layout.width);
        for action in &report.actions {
            table.add_row(vec![
                action.shim_pid.to_string(),
                short(&action.shim_id),
                serde_json::to_value(&action.outcome)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                shown(&action.detail),
            ]);
        }
        write_table(out, &table)?;
        // What each shim left behind, a path per line, whole.
        for action in report.actions.iter().filter(|a| !a.remains.is_empty()) {
            writeln!(out, "Left behind by shim {}:", action.shim_pid)?;
            for remain in &action.remains {
                text(out, &shown(remain), "  ")?;
            }
        }
    }

    if !report.cleanups.is_empty() {
        writeln!(out, "\nCleanup:")?;
        let mut table = list_table(&["ACTION", "ID", "OUTCOME", "DETAIL"], layout.width);
        for cleanup in &report.cleanups {
            table.add_row(vec![
                cleanup.action.as_str().to_string(),
                short(&cleanup.id),
                cleanup.outcome.as_str().to_string(),
                shown(&cleanup.detail),
            ]);
        }
        write_table(out, &table)?;
        // Each one's path on a line of its own, whole.
        for cleanup in &report.cleanups {
            let line = format!(
                "{} {}: {}",
                cleanup.action.as_str(),
                short(&cleanup.id),
                shown(&inert_path(&cleanup.path))
            );
            text(out, &line, "  ")?;
        }
    }

    if !report.gaps.is_empty() {
        writeln!(out, "\nCould not check:")?;
        for gap in &report.gaps {
            let path = inert_path(&gap.path);
            let line = if path.is_empty() {
                format!("{}: {}", gap.source, shown(&gap.error))
            } else {
                format!("{} {path}: {}", gap.source, shown(&gap.error))
            };
            text(out, &line, "  ")?;
        }
    }
    Ok(())
}

fn node_line(context: &NodeContext) -> String {
    let pct = |v: Option<f32>| v.map_or("?".to_string(), |v| format!("{v:.1}%"));
    let mib = |v: Option<u64>| {
        v.map_or("?".to_string(), |v| {
            format!("{:.0} MiB", v as f64 / 1048576.0)
        })
    };
    format!(
        "io pressure some {} / full {} (10 s); Dirty {}, Writeback {}; overlay rootfs mounts {} ({} volatile); containerd {}",
        pct(context.io_pressure_some_avg10),
        pct(context.io_pressure_full_avg10),
        mib(context.dirty_bytes),
        mib(context.writeback_bytes),
        context.overlay_rootfs_mounts,
        context.overlay_rootfs_volatile,
        shown(context.containerd_version.as_deref().unwrap_or("?")),
    )
}

fn located(at: &Located) -> String {
    format!("{} [{}]", inert_path(&at.path), at.origin.as_str())
}

/// The first 13 characters of an id, as crictl shows them; made inert
/// first, so the cut never leaves an escape sequence open.
fn short(id: &str) -> String {
    shown(id).chars().take(13).collect()
}

/// Colour only for a person at a terminal that understands it: never when
/// NO_COLOR is set (no-color.org) or TERM is `dumb` (or unset), as
/// terminfo's `dumb` entry has no colours.
fn colour() -> bool {
    io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var_os("TERM").is_some_and(|t| !t.is_empty() && t != "dumb")
}

/// Into a pipe, and on a terminal that reports no size (serial consoles,
/// `script` without one): `COLUMNS` if set, else this.
pub const DEFAULT_WIDTH: usize = 80;

/// Narrower than this, the list has no room left for the summary; lines
/// are then as wide as this and the terminal wraps them.
const MIN_WIDTH: usize = 60;

fn stdout_width() -> usize {
    let terminal = io::stdout()
        .is_terminal()
        .then(|| Table::new().width())
        .flatten()
        .map(usize::from)
        .filter(|&w| w > 0);
    let columns = || {
        std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse::<usize>().ok())
            .filter(|&w| w > 0)
    };
    terminal
        .or_else(columns)
        .unwrap_or(DEFAULT_WIDTH)
        .max(MIN_WIDTH)
}

/// A borderless list with a header, as kubectl prints one, arranged to fit
/// `width` (cells wrap; [`one_line`] rows are cut instead).
fn list_table(header: &[&str], width: usize) -> Table {
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(u16::try_from(width).unwrap_or(u16::MAX))
        .set_truncation_indicator("…")
        .set_header(header.to_vec());
    for column in table.column_iter_mut() {
        column.set_padding((0, 2));
    }
    table
}

fn one_line(cells: Vec<Cell>) -> Row {
    let mut row = Row::from(cells);
    row.max_height(1);
    row
}

/// Writes a table without the spaces its padding leaves at line ends.
fn write_table(out: &mut dyn Write, table: &Table) -> io::Result<()> {
    for line in table.lines() {
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

fn severity_cell(severity: Severity, colour: bool) -> Cell {
    let name = format!("{severity:?}").to_lowercase();
    match (colour, severity) {
        (true, Severity::Critical) => Cell::new(name).fg(Color::Red),
        (true, Severity::Warning) => Cell::new(name).fg(Color::Yellow),
        (false, _) => Cell::new(name),
    }
}

/// The summary without its leading `<namespace>/<pod>/<container> is `
/// when the CONTAINER column already says who: at 80 columns the summary
/// has about 30 characters, too few to spend on a repeat.
fn without_who<'a>(summary: &'a str, who: &str) -> &'a str {
    let Some((first, rest)) = summary.split_once(' ') else {
        return summary;
    };
    if who == "-" || !(first == who || first.ends_with(&format!("/{who}"))) {
        return summary;
    }
    rest.strip_prefix("is ").unwrap_or(rest)
}

fn findings_table(findings: &[Finding], layout: Layout) -> Table {
    let mut table = list_table(
        &["KIND", "SEVERITY", "CONTAINER", "ID", "WHAT IS WRONG"],
        layout.width,
    );
    for finding in findings {
        let evidence = |key: &str| finding.evidence[key].as_str().map(shown);
        let who = match (evidence("pod_name"), evidence("container_name")) {
            (Some(pod), Some(container)) => format!("{pod}/{container}"),
            (Some(pod), None) => pod,
            (None, _) => "-".to_string(),
        };
        table.add_row(one_line(vec![
            Cell::new(finding.kind.as_str()),
            severity_cell(finding.severity, layout.colour),
            Cell::new(&who),
            Cell::new(short(&finding.id)),
            Cell::new(readable_seconds(without_who(
                &shown(&finding.summary),
                &who,
            ))),
        ]));
    }
    // The kind, the severity and the id are never cut; a long pod name
    // leaves the summary at least half of what is left.
    let fixed = [0, 1, 3];
    for index in fixed {
        if let Some(column) = table.column_mut(index) {
            column.set_constraint(ColumnConstraint::ContentWidth);
        }
    }
    let widest = |f: &dyn Fn(&Finding) -> usize, header: usize| {
        findings.iter().map(f).max().unwrap_or(0).max(header) + 2
    };
    let used = widest(&|f| f.kind.as_str().len(), 4)
        + widest(&|_| 8, 8)
        + widest(&|f| short(&f.id).chars().count(), 2);
    let room = layout.width.saturating_sub(used + 2);
    if let Some(column) = table.column_mut(2) {
        column.set_constraint(ColumnConstraint::UpperBoundary(comfy_table::Width::Fixed(
            u16::try_from(room / 2).unwrap_or(u16::MAX).max(8),
        )));
    }
    table
}

/// `-o wide`: one finding in full, its prose wrapped to the width.
fn write_details(out: &mut dyn Write, finding: &Finding, layout: Layout) -> io::Result<()> {
    const LABEL: usize = 17;
    writeln!(
        out,
        "{} {} ({})",
        finding.kind.as_str(),
        shown(&finding.id),
        format!("{:?}", finding.severity).to_lowercase()
    )?;
    let mut field = |label: &str, lines: Vec<String>| -> io::Result<()> {
        for (n, line) in lines.iter().enumerate() {
            let label = if n == 0 { label } else { "" };
            // Nested items (a list of records) keep their own indent.
            let nested = line.len() - line.trim_start_matches(' ').len();
            let first = format!("  {label:<width$}{}", " ".repeat(nested), width = LABEL - 2);
            let rest = " ".repeat(LABEL + nested + if nested > 0 { 2 } else { 0 });
            for piece in wrap(line, layout.width, &first, &rest, false) {
                writeln!(out, "{piece}")?;
            }
        }
        Ok(())
    };
    field(
        "What is wrong",
        vec![readable_seconds(&shown(&finding.summary))],
    )?;
    field("Evidence", evidence_lines(&finding.evidence))?;
    field("Likely cause", vec![prose(&finding.cause)])?;
    field("What to do", vec![shown(&finding.remedy)])
}

/// `key: value` per line, for people: unknown (null or empty) values left out,
/// `_seconds` as an age (`3m12s`), `_ms` as a latency, `_bytes` in MiB, a list of records
/// (blocked threads) one per line. Each line is made inert on its own.
fn evidence_lines(evidence: &Value) -> Vec<String> {
    let Some(map) = evidence.as_object() else {
        return vec![shown(&evidence.to_string())];
    };
    let mut lines = Vec::new();
    let unknown = |v: &Value| v.is_null() || v.as_str() == Some("");
    for (key, value) in map.iter().filter(|(_, v)| !unknown(v)) {
        let (label, value) = readable(key, value);
        match value {
            Readable::One(text) => lines.push(shown(&format!("{label}: {text}"))),
            Readable::Many(items) if items.is_empty() => {
                lines.push(shown(&format!("{label}: none")))
            }
            Readable::Many(items) => {
                lines.push(shown(&format!("{label}:")));
                lines.extend(items.iter().map(|i| format!("  {}", shown(i))));
            }
        }
    }
    lines
}

enum Readable {
    One(String),
    Many(Vec<String>),
}

/// A key and its value as a person reads them.
fn readable(key: &str, value: &Value) -> (String, Readable) {
    // Seconds per unit of a duration, or `None` for a size in bytes.
    let (label, unit) = if let Some(stem) = key.strip_suffix("_seconds") {
        (stem, Some(Some(1.0)))
    } else if let Some(stem) = key.strip_suffix("_ms") {
        (stem, Some(Some(1e-3)))
    } else if let Some(stem) = key.strip_suffix("_bytes") {
        (stem, Some(None))
    } else {
        (key, None)
    };
    let label = label.replace('_', " ");
    let value = match (value, unit) {
        (Value::Number(n), Some(None)) => Readable::One(mebibytes(n.as_f64().unwrap_or_default())),
        (Value::Number(n), Some(Some(unit))) => {
            Readable::One(duration(n.as_f64().unwrap_or_default() * unit))
        }
        (Value::String(s), _) => Readable::One(s.clone()),
        (Value::Array(items), _) if items.iter().any(Value::is_object) => {
            Readable::Many(items.iter().map(inline).collect())
        }
        (Value::Array(items), _) => Readable::One(if items.is_empty() {
            "none".to_string()
        } else {
            items.iter().map(inline).collect::<Vec<_>>().join(", ")
        }),
        (other, _) => Readable::One(inline(other)),
    };
    (label, value)
}

/// A value on one line: a record as `key=value` pairs.
fn inline(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Object(map) => map
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(key, value)| {
                let (label, value) = readable(key, value);
                let value = match value {
                    Readable::One(text) => text,
                    Readable::Many(items) => items.join(", "),
                };
                format!("{}={value}", label.replace(' ', "_"))
            })
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_string(),
    }
}

fn mebibytes(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / 1048576.0)
}

/// A duration as people read one: `850ms`, `4.2s`, `3m12s`, `5h07m`,
/// `2d0h`; two units at most, as kubectl's ages.
pub fn duration(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        return format!("{seconds}s");
    }
    if seconds < 1.0 {
        return format!("{:.0}ms", seconds * 1e3);
    }
    if seconds < 10.0 {
        return format!("{seconds:.1}s");
    }
    let s = seconds.round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{}h", s / 86400, s % 86400 / 3600),
    }
}

/// A summary with its `<number> s` durations (`up 172955 s`) as ages.
fn readable_seconds(summary: &str) -> String {
    let words: Vec<&str> = summary.split(' ').collect();
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut n = 0;
    while n < words.len() {
        let unit = words
            .get(n + 1)
            .map(|w| w.trim_end_matches([',', ';', ')', ':']));
        match (words[n].parse::<f64>(), unit) {
            (Ok(seconds), Some("s"))
                if words[n].chars().all(|c| c.is_ascii_digit() || c == '.') =>
            {
                let tail = &words[n + 1][1..];
                out.push(format!("{}{tail}", duration(seconds)));
                n += 2;
            }
            _ => {
                out.push(words[n].to_string());
                n += 1;
            }
        }
    }
    out.join(" ")
}

/// `text` in lines of at most `width` columns, broken at spaces, the first
/// line led by `first`, the others by `rest`. A word longer than a line is
/// cut into pieces when `break_words` (nothing is lost and the line fits),
/// else kept whole on its own line (`-o wide`: ids and paths stay whole, to
/// copy).
fn wrap(text: &str, width: usize, first: &str, rest: &str, break_words: bool) -> Vec<String> {
    let cols = |s: &str| s.chars().count();
    let mut lines = Vec::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        if !empty && cols(&line) + 1 + cols(word) > width {
            lines.push(std::mem::replace(&mut line, rest.to_string()));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        let mut word = word;
        while break_words && cols(&line) + cols(word) > width {
            let room = width.saturating_sub(cols(&line)).max(1);
            let cut = word.char_indices().nth(room).map_or(word.len(), |(i, _)| i);
            line.push_str(&word[..cut]);
            word = &word[cut..];
            lines.push(std::mem::replace(&mut line, rest.to_string()));
        }
        line.push_str(word);
        empty = word.is_empty();
    }
    if !empty || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// The shims: narrow, what tells a stuck or leaked one (its pod, age,
/// memory, whether it is this containerd's, what it is blocked in); `-o
/// wide` adds its namespace and children, nothing cut.
fn shims_table(shims: &[ShimRow], layout: Layout) -> Table {
    let mut header = vec!["PID", "ID", "POD", "AGE", "RSS", "OURS", "BLOCKED IN"];
    if layout.wide {
        header.extend(["NAMESPACE", "CHILDREN"]);
    }
    let mut table = list_table(&header, layout.width);
    if layout.wide {
        table.set_content_arrangement(ContentArrangement::Disabled);
    }
    for shim in shims {
        let pod = match (&shim.pod.pod_namespace, &shim.pod.pod_name) {
            (Some(ns), Some(name)) => format!("{}/{}", shown(ns), shown(name)),
            _ => "-".to_string(),
        };
        let mut row = vec![
            Cell::new(shim.pid),
            Cell::new(short(shim.id.as_deref().unwrap_or("?"))),
            Cell::new(pod),
            Cell::new(duration(shim.age_seconds)).set_alignment(CellAlignment::Right),
            Cell::new(mebibytes(shim.rss_bytes as f64)).set_alignment(CellAlignment::Right),
            Cell::new(match shim.identity {
                "ours" => "yes",
                "impostor" => "impostor",
                _ => "no",
            }),
            Cell::new(if shim.blocked_in.is_empty() {
                "-".to_string()
            } else {
                shown(&shim.blocked_in.join(", "))
            }),
        ];
        if layout.wide {
            row.push(Cell::new(shown(shim.namespace.as_deref().unwrap_or("-"))));
            row.push(Cell::new(format!(
                "{} live, {} defunct",
                shim.children_live.len(),
                shim.children_defunct.len()
            )));
            table.add_row(row);
        } else {
            table.add_row(one_line(row));
        }
    }
    for index in [0, 1, 3, 4, 5] {
        if let Some(column) = table.column_mut(index) {
            column.set_constraint(ColumnConstraint::ContentWidth);
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::{run_all, Settings};
    use crate::model::fixtures::*;

    #[test]
    fn the_summary_does_not_repeat_the_container_column() {
        let summary = "shop/web-0/init is RUNNING in CRI but its process is gone (no process)";
        assert_eq!(
            without_who(summary, "web-0/init"),
            "RUNNING in CRI but its process is gone (no process)"
        );
        // Another container's name, or none, leaves it whole.
        assert_eq!(without_who(summary, "web-1/init"), summary);
        assert_eq!(without_who(summary, "-"), summary);
        assert_eq!(
            without_who("shim pid 42 is blocked", "web-0"),
            "shim pid 42 is blocked"
        );
    }

    const NARROW: Layout = Layout {
        width: 80,
        wide: false,
        colour: false,
    };
    const WIDE: Layout = Layout {
        wide: true,
        ..NARROW
    };

    fn rendered(report: &Report, layout: Layout) -> String {
        let mut out = Vec::new();
        render_with(report, layout, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn table_names_the_paths_the_finding_and_the_remedy() {
        let mut s = snapshot();
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        s.bundles
            .insert(id('a'), bundle(&id('a'), &id('s'), "init-proxy"));
        let findings = run_all(&s, &s, &Settings::default());
        let report = Report::new("zombies", "k8s.io", s.paths.clone(), findings, vec![]);
        let text = rendered(&report, WIDE);
        assert!(text.contains("/var/lib/containerd [default]"), "{text}");
        assert!(text.starts_with("containerd version unknown: "), "{text}");
        assert!(text.contains("shop/web-0/init-proxy"), "{text}");
        assert!(text.contains(&id('a')), "{text}");
        assert!(text.contains("pid: 100"), "{text}");
        assert!(text.contains("What to do"), "{text}");
        // The remedy itself, not just its label (one word: cells wrap on a
        // narrow terminal).
        assert!(text.contains("leaked-shims"), "{text}");
    }

    #[test]
    fn wide_shows_a_cause_whole_with_what_each_advisory_adds() {
        let mut s = snapshot();
        s.shims.push(shim(500, &id('s'), ADDRESS, &["futex"]));
        s.processes.insert(500, process(500, 'S', NOW - 60 * SEC));
        with_records(&mut s, &[]);
        let findings = run_all(&s, &s, &Settings::default());
        let report = Report::new("leaked-shims", "k8s.io", s.paths.clone(), findings, vec![])
            .identified(crate::model::ContainerdVersion {
                version: Some("2.0.6".to_string()),
                source: crate::model::VersionSource::Api,
            });
        let finding = &report.findings[0];
        assert!(
            finding.cause.len() > crate::inert::SHOWN_CAP,
            "a long cause"
        );
        let text = rendered(&report, WIDE);
        let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for whole in [&finding.cause, &finding.remedy] {
            let words = whole.split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(joined.contains(&words), "{words}\nnot whole in:\n{text}");
        }
        assert!(!text.contains("…(+"), "{text}");
    }

    #[test]
    fn the_header_names_the_version_and_its_known_bugs_even_with_no_findings() {
        let s = snapshot();
        let report = Report::new("shims", "k8s.io", s.paths.clone(), vec![], vec![]).identified(
            crate::model::ContainerdVersion {
                version: Some("v2.0.3".to_string()),
                source: crate::model::VersionSource::Process,
            },
        );
        let text = rendered(&report, NARROW);
        assert!(
            text.starts_with("containerd v2.0.3 [process]: root "),
            "{text}"
        );
        let joined = text.replace("\n  ", " ");
        assert!(
            joined.contains("\nknown bug containerd#12344: ")
                && joined.contains("fixed in 2.0.7, upgrade\n"),
            "{text}"
        );
    }

    use crate::model::{Kind, Severity, ShimRow};
    use proptest::prelude::*;

    /// The sequences a tenant can put in a shim's `-id`, an annotation or a
    /// status `Reason`: an OSC title (cut open by a 13-column id), clear
    /// screen, a carriage return, a right-to-left override.
    const NASTY: &[&str] = &[
        "\x1b]0;owned\x07",
        "\x1b[2J",
        "ok\rFAKE",
        "abc\u{202e}fdp.exe",
        "\u{9b}31m",
    ];

    fn finding(id: &str, text: &str) -> Finding {
        Finding {
            kind: Kind::LeakedShim,
            severity: Severity::Warning,
            id: id.to_string(),
            summary: format!("shim {id} leaked"),
            evidence: serde_json::json!({
                "shim_id": id, "pod_name": text, "reason": text, "list": [text],
            }),
            cause: "c".into(),
            remedy: "r".into(),
        }
    }

    fn shim_row(id: &str, text: &str) -> ShimRow {
        ShimRow {
            pid: 7,
            binary: "containerd-shim-runc-v2".into(),
            namespace: Some(text.to_string()),
            id: Some(id.to_string()),
            address: Some(text.to_string()),
            action: None,
            ours: false,
            identity: "impostor",
            reason: Some(text.to_string()),
            pod: crate::model::PodRef {
                pod_namespace: Some(text.to_string()),
                pod_name: Some(text.to_string()),
                container_name: None,
            },
            started_at: Value::Null,
            age_seconds: 1.0,
            rss_bytes: 0,
            children_live: vec![],
            children_defunct: vec![],
            bundle_dir: None,
            socket: None,
            blocked_in: vec![text.to_string()],
        }
    }

    /// Every output a person reads for a report holding `id` and `text` in
    /// every node-string place: the findings table, the shims table, npd.
    fn human_outputs(id: &str, text: &str) -> Vec<String> {
        let s = snapshot();
        let gaps = vec![crate::model::Gap::item(
            crate::model::Source::Bundles,
            text,
            text,
        )];
        let mut report = Report::new(
            "check",
            text,
            s.paths.clone(),
            vec![finding(id, text)],
            gaps,
        );
        report.containerd.version = Some(text.to_string());
        let mut shims = Report::new("shims", "k8s.io", s.paths.clone(), vec![], vec![]);
        shims.shims = Some(vec![shim_row(id, text)]);
        let mut outputs = Vec::new();
        for (report, npd) in [
            (report.within_limits(), true),
            (shims.within_limits(), false),
        ] {
            for layout in [NARROW, WIDE] {
                outputs.push(rendered(&report, layout).into_bytes());
            }
            if npd {
                let mut out = Vec::new();
                crate::render::npd::render(&report, &mut out).unwrap();
                outputs.push(out);
            }
        }
        outputs
            .into_iter()
            .map(|o| String::from_utf8(o).unwrap())
            .collect()
    }

    fn holds_control(text: &str) -> Option<char> {
        text.lines().flat_map(str::chars).find(|&c| {
            c.is_control()
                || matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
    }

    #[test]
    fn terminal_control_sequences_from_the_node_reach_no_terminal() {
        for nasty in NASTY {
            let id = format!("{nasty}{}", id('a'));
            for text in human_outputs(&id, nasty) {
                assert_eq!(holds_control(&text), None, "{nasty:?} in {text}");
            }
        }
        let text = &human_outputs(&format!("\x1b]0;x\x07{}", id('a')), NASTY[0])[3];
        // The 13-character id column shows the escape, not half of it.
        assert!(text.contains("  \\x1b]0;x\\x07a  "), "{text}");
        assert!(human_outputs("x", NASTY[3])[0].contains("abc\\u{202e}fdp.exe"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn no_table_or_npd_line_holds_a_control_character(
            id in any::<String>(),
            text in "(\\PC|[\\x00-\\x1f\\x7f-\\u{9f}\\u{202a}-\\u{202e}\\u{2066}-\\u{2069}])*",
        ) {
            for out in human_outputs(&id, &text) {
                prop_assert_eq!(holds_control(&out), None, "{}", out);
            }
        }
    }

    #[test]
    fn a_kind_lists_at_most_200_findings_and_counts_the_rest() {
        let s = snapshot();
        let huge = "x".repeat(131_072);
        let findings = (0..300)
            .map(|n| finding(&format!("{n}{huge}"), &huge))
            .collect();
        let report =
            Report::new("check", "k8s.io", s.paths.clone(), findings, vec![]).within_limits();
        assert_eq!(report.findings.len(), FINDINGS_PER_KIND);
        assert_eq!(report.findings_omitted["leaked-shim"], 100);
        assert_eq!(report.count("leaked-shim"), 300);
        assert!(
            report.findings[0].id.ends_with("…(+126977 bytes)"),
            "{}",
            &report.findings[0].id[4000..]
        );
        let text = rendered(&report, WIDE);
        assert!(
            text.contains(
                "… and 100 more leaked-shim finding(s) not listed (at most 200 of a kind are)"
            ),
            "{}",
            &text[text.len() - 300..]
        );
        // 300 findings of 4 × 128 KB strings: bounded by the caps, not by them.
        assert!(text.len() < 4 << 20, "{} bytes", text.len());
        let mut json = Vec::new();
        crate::render::json::render(&report, &mut json).unwrap();
        assert!(json.len() < 10 << 20, "{} bytes", json.len());
    }

    #[test]
    fn empty_report_says_so_and_lists_gaps() {
        let s = snapshot();
        let gaps = vec![crate::model::Gap::item(
            crate::model::Source::CriStore,
            "/x/status",
            "corrupt status file",
        )];
        let report = Report::new("zombies", "k8s.io", s.paths.clone(), vec![], gaps);
        let text = rendered(&report, NARROW);
        assert!(
            text.contains("No findings in what could be checked."),
            "{text}"
        );
        assert!(text.contains("Could not check:"));
        assert!(text.contains("/x/status"));
    }

    fn columns(text: &str) -> usize {
        text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
    }

    /// Long pod names, a summary of 200 characters and a path of 150 in a
    /// gap: the list and everything around it still fits 80 columns.
    #[test]
    fn at_80_columns_no_line_is_wider_and_wide_shows_the_evidence() {
        let mut s = snapshot();
        for (n, c) in ['a', 'b', 'c'].into_iter().enumerate() {
            s.cri_containers
                .push(running(&id(c), 100 + n as i64, NOW - 172_955 * SEC));
            s.bundles.insert(
                id(c),
                bundle(
                    &id(c),
                    &id('s'),
                    &format!("a-container-name-that-goes-on-{n}"),
                ),
            );
        }
        let mut findings = run_all(&s, &s, &Settings::default());
        findings.push(Finding {
            summary: "word ".repeat(40),
            ..finding("x".repeat(70).as_str(), "p")
        });
        let gaps = vec![crate::model::Gap::item(
            crate::model::Source::CriStore,
            format!("/{}", "d".repeat(150)),
            "an error with a reason that takes more than one line to tell, as they do",
        )];
        let mut report =
            Report::new("check", "k8s.io", s.paths.clone(), findings, gaps).within_limits();
        let left = format!("bundle dir /run/containerd/{}", "b".repeat(100));
        assert_eq!(&left[11..16], "/run/");
        report.actions = vec![crate::model::Action {
            shim_pid: 2780,
            shim_id: id('s'),
            outcome: crate::model::Outcome::Terminated,
            detail: "exited after SIGTERM".into(),
            remains: vec![left.clone()],
        }];
        let text = rendered(&report, NARROW);
        assert!(columns(&text) <= 80, "{}:\n{text}", columns(&text));
        // One line per finding, and no evidence.
        assert_eq!(text.matches("zombie ").count(), 3, "{text}");
        assert!(!text.contains("pid: 100"), "{text}");
        assert!(text.contains("-o wide"), "{text}");
        // Nothing of the gap is lost: its path is there, broken at 80.
        assert!(
            text.replace("\n    ", "")
                .contains(&format!("/{}:", "d".repeat(150))),
            "{text}"
        );

        let wide = rendered(&report, WIDE);
        assert!(wide.contains("pid: 100"), "{wide}");
        assert!(wide.contains(&id('a')), "the full id: {wide}");
        assert!(
            wide.contains("running for: 2d0h"),
            "an age, not seconds: {wide}"
        );
        assert!(wide.contains("What to do"), "{wide}");
        assert!(wide.contains(&left[11..]), "{wide}");
        assert!(
            wide.contains(&format!("/{}", "d".repeat(150))),
            "paths whole: {wide}"
        );
    }

    #[test]
    fn ages_read_as_people_read_them() {
        assert_eq!(duration(0.25), "250ms");
        assert_eq!(duration(4.25), "4.2s");
        assert_eq!(duration(42.0), "42s");
        assert_eq!(duration(192.0), "3m12s");
        assert_eq!(duration(5.0 * 3600.0 + 7.0 * 60.0), "5h07m");
        assert_eq!(duration(172_955.4), "2d0h");
        assert_eq!(
            readable_seconds("shim pid 7 (k8s.io, up 172955 s) serves nothing"),
            "shim pid 7 (k8s.io, up 2d0h) serves nothing"
        );
        assert_eq!(
            readable_seconds("recorded 95 s after it happened; blocked for at least 1.5 s"),
            "recorded 1m35s after it happened; blocked for at least 1.5s"
        );
        let threads = serde_json::json!({"blocked_for_at_least_seconds": 3.5, "rss_bytes": 14168064,
            "threads": [{"tid": 9, "state": "D", "syscall": "umount2", "wchan": null}],
            "list_containers": {"latency_ms": 1200.0, "timed_out": false}});
        assert_eq!(
            evidence_lines(&threads),
            [
                "blocked for at least: 3.5s",
                "list containers: latency=1.2s timed_out=false",
                "rss: 13.5 MiB",
                "threads:",
                "  state=D syscall=umount2 tid=9",
            ]
        );
    }

    #[test]
    fn wrapping_breaks_at_spaces_and_cuts_only_what_cannot_fit() {
        assert_eq!(wrap("aa bb cc", 5, "", "  ", true), ["aa bb", "  cc"]);
        assert_eq!(wrap("abcdefgh", 5, "", "  ", true), ["abcde", "  fgh"]);
        assert_eq!(wrap("x abcdefgh", 5, "", "", false), ["x", "abcdefgh"]);
        assert_eq!(wrap("", 5, "> ", "", true), ["> "]);
    }
}
