//! The report for people: which containerd was looked at, a summary table,
//! then what is wrong, the evidence, the likely cause and what to do.

use std::io::{self, IsTerminal, Write};

use comfy_table::{presets, Cell, Color, ContentArrangement, Table};
use serde_json::Value;

use crate::checks::{Finding, Severity};
use crate::commands::shims::ShimRow;
use crate::paths::Located;
use crate::report::Report;
use crate::sources::node::NodeContext;

pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let paths = &report.paths;
    let mut config = match &paths.config {
        Some(path) => format!("config {}", path.display()),
        None => "no config file".to_string(),
    };
    if let Some(process) = &paths.process {
        config.push_str(&format!(", running containerd pid {}", process.pid));
    }
    let version = match &report.containerd.version {
        Some(version) => format!("{version} [{}]", report.containerd.source.as_str()),
        None => "version unknown".to_string(),
    };
    writeln!(
        out,
        "containerd {version}: root {}, state {}, socket {} ({config}); namespace {}",
        located(&paths.root),
        located(&paths.state),
        located(&paths.address),
        report.namespace
    )?;
    if let Some(note) = &paths.note {
        writeln!(out, "note: {note}")?;
    }
    for advisory in &report.advisories {
        writeln!(
            out,
            "known bug {}: {}; {}",
            advisory.id, advisory.symptom, advisory.advice
        )?;
    }

    if let Some(context) = &report.context {
        writeln!(out, "node: {}", node_line(context))?;
    }

    if let Some(shims) = &report.shims {
        writeln!(out)?;
        if shims.is_empty() {
            writeln!(out, "No containerd shims are running.")?;
        } else {
            writeln!(out, "{}", shims_table(shims))?;
        }
    } else if report.findings.is_empty() {
        writeln!(out, "\nNo findings.")?;
    } else {
        writeln!(out)?;
        writeln!(out, "{}", summary_table(&report.findings))?;
        for (n, finding) in report.findings.iter().enumerate() {
            writeln!(
                out,
                "\n[{}] {} {}",
                n + 1,
                finding.kind.as_str(),
                finding.id
            )?;
            writeln!(out, "{}", detail_table(finding))?;
        }
    }

    if !report.actions.is_empty() {
        writeln!(out, "\nActions:")?;
        let mut table = new_table(&["SHIM PID", "ID", "OUTCOME", "DETAIL", "LEFT BEHIND"]);
        for action in &report.actions {
            table.add_row(vec![
                action.shim_pid.to_string(),
                action.shim_id.chars().take(13).collect(),
                serde_json::to_value(&action.outcome)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                action.detail.clone(),
                action.remains.join("\n"),
            ]);
        }
        writeln!(out, "{table}")?;
    }

    if !report.gaps.is_empty() {
        writeln!(out, "\nCould not check:")?;
        let mut table = new_table(&["SOURCE", "PATH", "ERROR"]);
        for gap in &report.gaps {
            table.add_row(vec![
                gap.source.clone(),
                gap.path.display().to_string(),
                gap.error.clone(),
            ]);
        }
        writeln!(out, "{table}")?;
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
        context.containerd_version.as_deref().unwrap_or("?"),
    )
}

fn located(at: &Located) -> String {
    format!("{} [{}]", at.path.display(), at.origin.as_str())
}

/// Colour only for a person at a terminal, and never when NO_COLOR is set
/// (no-color.org).
fn colour() -> bool {
    io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Below this many columns wrapping makes a table unreadable; terminals that
/// report no size (serial consoles, `script`) report 0.
const MIN_WIDTH: u16 = 80;

fn plain_table() -> Table {
    let mut table = Table::new();
    table
        .load_preset(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    if table.width().is_some_and(|w| w < MIN_WIDTH) {
        table.set_width(MIN_WIDTH * 3 / 2);
    }
    table
}

fn new_table(header: &[&str]) -> Table {
    let mut table = plain_table();
    table.set_header(header.to_vec());
    table
}

fn shims_table(shims: &[ShimRow]) -> Table {
    let mut table = new_table(&[
        "PID",
        "NAMESPACE",
        "ID",
        "POD",
        "AGE",
        "RSS",
        "CHILDREN",
        "OURS",
        "BLOCKED IN",
    ]);
    for shim in shims {
        let pod = match (&shim.pod.pod_namespace, &shim.pod.pod_name) {
            (Some(ns), Some(name)) => format!("{ns}/{name}"),
            _ => "?".to_string(),
        };
        table.add_row(vec![
            shim.pid.to_string(),
            shim.namespace.clone().unwrap_or_default(),
            shim.id.as_deref().unwrap_or("?").chars().take(13).collect(),
            pod,
            humantime::format_duration(std::time::Duration::from_secs(shim.age_seconds as u64))
                .to_string(),
            format!("{:.1} MiB", shim.rss_bytes as f64 / (1 << 20) as f64),
            format!(
                "{} live, {} defunct",
                shim.children_live.len(),
                shim.children_defunct.len()
            ),
            match shim.identity {
                "ours" => "yes",
                "impostor" => "impostor",
                _ => "no",
            }
            .to_string(),
            shim.blocked_in.join(", "),
        ]);
    }
    table
}

fn summary_table(findings: &[Finding]) -> Table {
    let mut table = new_table(&["#", "KIND", "SEVERITY", "CONTAINER", "ID", "WHAT IS WRONG"]);
    for (n, finding) in findings.iter().enumerate() {
        let who = ["pod_namespace", "pod_name", "container_name"]
            .iter()
            .map(|key| finding.evidence[*key].as_str().unwrap_or("?"))
            .collect::<Vec<_>>()
            .join("/");
        let severity = format!("{:?}", finding.severity).to_lowercase();
        let severity = match (colour(), finding.severity) {
            (true, Severity::Critical) => Cell::new(severity).fg(Color::Red),
            (true, Severity::Warning) => Cell::new(severity).fg(Color::Yellow),
            (false, _) => Cell::new(severity),
        };
        table.add_row(vec![
            Cell::new(n + 1),
            Cell::new(finding.kind.as_str()),
            severity,
            Cell::new(who),
            Cell::new(finding.id.chars().take(13).collect::<String>()),
            Cell::new(&finding.summary),
        ]);
    }
    table
}

fn detail_table(finding: &Finding) -> Table {
    let mut table = plain_table();
    table.add_row(vec!["What is wrong", &finding.summary]);
    table.add_row(vec![
        "Evidence".to_string(),
        evidence_lines(&finding.evidence),
    ]);
    table.add_row(vec!["Likely cause", &finding.cause]);
    table.add_row(vec!["What to do", &finding.remedy]);
    table
}

/// `key: value` per line; unknown (null) values are left out.
fn evidence_lines(evidence: &Value) -> String {
    let Some(map) = evidence.as_object() else {
        return evidence.to_string();
    };
    map.iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(key, value)| match value {
            Value::String(s) => format!("{key}: {s}"),
            Value::Array(items) if items.is_empty() => format!("{key}: none"),
            Value::Array(items) => format!(
                "{key}: {}",
                items
                    .iter()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            other => format!("{key}: {other}"),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixtures::*;
    use crate::checks::{run_all, Settings};

    #[test]
    fn table_names_the_paths_the_finding_and_the_remedy() {
        let mut s = snapshot();
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        s.bundles
            .insert(id('a'), bundle(&id('a'), &id('s'), "init-proxy"));
        let findings = run_all(&s, &s, &Settings::default());
        let report = Report::new("zombies", "k8s.io", s.paths.clone(), findings, vec![]);
        let mut out = Vec::new();
        render(&report, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
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
    fn the_header_names_the_version_and_its_known_bugs_even_with_no_findings() {
        let s = snapshot();
        let report = Report::new("shims", "k8s.io", s.paths.clone(), vec![], vec![]).identified(
            crate::snapshot::ContainerdVersion {
                version: Some("v2.0.3".to_string()),
                source: crate::snapshot::VersionSource::Process,
            },
        );
        let mut out = Vec::new();
        render(&report, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("containerd v2.0.3 [process]: root "),
            "{text}"
        );
        assert!(
            text.contains("\nknown bug containerd#12344: ")
                && text.contains("fixed in 2.0.7, upgrade\n"),
            "{text}"
        );
    }

    #[test]
    fn empty_report_says_so_and_lists_gaps() {
        let s = snapshot();
        let gaps = vec![crate::snapshot::Gap::item(
            "cri-store",
            "/x/status",
            "corrupt status file",
        )];
        let report = Report::new("zombies", "k8s.io", s.paths.clone(), vec![], gaps);
        let mut out = Vec::new();
        render(&report, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("No findings."));
        assert!(text.contains("Could not check:"));
        assert!(text.contains("/x/status"));
    }
}
