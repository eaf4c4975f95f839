//! The findings: one cut line each (kind, severity, who, short id, what is
//! wrong), and with `-o wide` each in full. The section people read most,
//! so its columns are sized by hand to keep the summary readable at 80.

use std::io::{self, Write};

use comfy_table::{Cell, Color, ColumnConstraint, Table};

use super::lines::{list_table, one_line, short, wrap, write_table, write_wrapped};
use super::readable::{evidence_lines, readable_seconds};
use super::Layout;
use crate::inert::{prose, shown};
use crate::model::{Finding, Severity};
use crate::report::{Report, FINDINGS_PER_KIND};

/// The list (or that there is nothing to list), how many of a kind were
/// left out, then each finding in full with `-o wide`, else where to see it.
pub(super) fn write_findings(
    report: &Report,
    layout: Layout,
    out: &mut dyn Write,
) -> io::Result<()> {
    if report.findings.is_empty() {
        if report.gaps.is_empty() {
            writeln!(out, "\nNo findings.")?;
        } else {
            writeln!(out, "\nNo findings in what could be checked.")?;
        }
        return Ok(());
    }
    writeln!(out)?;
    write_table(out, &findings_table(&report.findings, layout))?;
    for (kind, count) in &report.findings_omitted {
        let line = format!(
            "… and {count} more {kind} finding(s) not listed (at most {FINDINGS_PER_KIND} of a kind are)"
        );
        write_wrapped(out, layout, &line, "")?;
    }
    if layout.wide {
        for finding in &report.findings {
            writeln!(out)?;
            write_details(out, finding, layout)?;
        }
    } else {
        write_wrapped(
            out,
            layout,
            "Each finding's evidence, likely cause and what to do: -o wide (or -o json).",
            "",
        )?;
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
