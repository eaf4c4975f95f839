//! The report for people: which containerd was looked at, a summary table,
//! then what is wrong, the evidence, the likely cause and what to do.

use std::io::{self, IsTerminal, Write};

use comfy_table::{presets, Cell, Color, ContentArrangement, Table};
use serde_json::Value;

use crate::inert::{inert_path, shown};
use crate::model::{Finding, Located, NodeContext, Severity, ShimRow};
use crate::report::{Report, FINDINGS_PER_KIND};

pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
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
    writeln!(
        out,
        "containerd {version}: root {}, state {}, socket {} ({config}); namespace {}",
        located(&paths.root),
        located(&paths.state),
        located(&paths.address),
        shown(&report.namespace)
    )?;
    if let Some(note) = &paths.note {
        writeln!(out, "note: {}", shown(note))?;
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
        if report.shims_omitted > 0 {
            writeln!(
                out,
                "… and {} more shim(s) not this containerd's, not listed",
                report.shims_omitted
            )?;
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
                shown(&finding.id)
            )?;
            writeln!(out, "{}", detail_table(finding))?;
        }
        for (kind, count) in &report.findings_omitted {
            writeln!(
                out,
                "\n… and {count} more {kind} finding(s) not listed (at most {FINDINGS_PER_KIND} of a kind are)"
            )?;
        }
    }

    if !report.actions.is_empty() {
        writeln!(out, "\nActions:")?;
        let mut table = new_table(&["SHIM PID", "ID", "OUTCOME", "DETAIL", "LEFT BEHIND"]);
        for action in &report.actions {
            table.add_row(vec![
                action.shim_pid.to_string(),
                short(&action.shim_id),
                serde_json::to_value(&action.outcome)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                shown(&action.detail),
                action
                    .remains
                    .iter()
                    .map(|r| shown(r))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ]);
        }
        writeln!(out, "{table}")?;
    }

    if !report.gaps.is_empty() {
        writeln!(out, "\nCould not check:")?;
        let mut table = new_table(&["SOURCE", "PATH", "ERROR"]);
        for gap in &report.gaps {
            table.add_row(vec![
                gap.source.to_string(),
                shown(&inert_path(&gap.path)),
                shown(&gap.error),
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
        shown(context.containerd_version.as_deref().unwrap_or("?")),
    )
}

fn located(at: &Located) -> String {
    format!("{} [{}]", inert_path(&at.path), at.origin.as_str())
}

/// The first 13 characters of an id, as `docker ps` shows them; made inert
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
            (Some(ns), Some(name)) => format!("{}/{}", shown(ns), shown(name)),
            _ => "?".to_string(),
        };
        table.add_row(vec![
            shim.pid.to_string(),
            shown(shim.namespace.as_deref().unwrap_or_default()),
            short(shim.id.as_deref().unwrap_or("?")),
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
            shown(&shim.blocked_in.join(", ")),
        ]);
    }
    table
}

fn summary_table(findings: &[Finding]) -> Table {
    let mut table = new_table(&["#", "KIND", "SEVERITY", "CONTAINER", "ID", "WHAT IS WRONG"]);
    for (n, finding) in findings.iter().enumerate() {
        let who = ["pod_namespace", "pod_name", "container_name"]
            .iter()
            .map(|key| shown(finding.evidence[*key].as_str().unwrap_or("?")))
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
            Cell::new(short(&finding.id)),
            Cell::new(shown(&finding.summary)),
        ]);
    }
    table
}

fn detail_table(finding: &Finding) -> Table {
    let mut table = plain_table();
    table.add_row(vec!["What is wrong".to_string(), shown(&finding.summary)]);
    table.add_row(vec![
        "Evidence".to_string(),
        evidence_lines(&finding.evidence),
    ]);
    table.add_row(vec!["Likely cause".to_string(), shown(&finding.cause)]);
    table.add_row(vec!["What to do".to_string(), shown(&finding.remedy)]);
    table
}

/// `key: value` per line; unknown (null) values are left out. Each line is
/// made inert on its own: the newlines between them are the only ones.
fn evidence_lines(evidence: &Value) -> String {
    let Some(map) = evidence.as_object() else {
        return shown(&evidence.to_string());
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
        .map(|line| shown(&line))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::{run_all, Settings};
    use crate::model::fixtures::*;

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
            crate::model::ContainerdVersion {
                version: Some("v2.0.3".to_string()),
                source: crate::model::VersionSource::Process,
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
        for (report, npd) in [(report.bounded(), true), (shims.bounded(), false)] {
            let mut out = Vec::new();
            render(&report, &mut out).unwrap();
            outputs.push(out);
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
        let text = &human_outputs(&format!("\x1b]0;x\x07{}", id('a')), NASTY[0])[2];
        // The 13-character id column shows the escape, not half of it.
        assert!(text.contains("┆ \\x1b]0;x\\x07a ┆"), "{text}");
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
        let report = Report::new("check", "k8s.io", s.paths.clone(), findings, vec![]).bounded();
        assert_eq!(report.findings.len(), FINDINGS_PER_KIND);
        assert_eq!(report.findings_omitted["leaked-shim"], 100);
        assert_eq!(report.count("leaked-shim"), 300);
        assert!(
            report.findings[0].id.ends_with("…(+126977 bytes)"),
            "{}",
            &report.findings[0].id[4000..]
        );
        let mut out = Vec::new();
        render(&report, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
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
        let mut out = Vec::new();
        render(&report, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("No findings."));
        assert!(text.contains("Could not check:"));
        assert!(text.contains("/x/status"));
    }
}
