//! The report for people: which containerd was looked at, then a narrow
//! list of what is wrong (kind, severity, pod/container, short id, one-line
//! summary), cut to the width of the terminal (80 columns into a pipe, or
//! `COLUMNS`), as kubectl and crictl print theirs. `-o wide` adds, per
//! finding, the full id, the evidence, the likely cause and what to do.
//!
//! Every string from the node goes through
//! [`shown`](crate::inert::shown) before it is cut or wrapped, so no cut
//! leaves an escape sequence open.
//!
//! One file a section, in the order [`render_with`] prints them: `header`,
//! `findings` (or `shims`), `actions` (and cleanups), `gaps`; `lines` (the
//! fitting to the width) and `readable` (values as people read them) are
//! what they share.

mod actions;
mod findings;
mod gaps;
mod header;
mod lines;
mod readable;
mod shims;

use std::io::{self, IsTerminal, Write};

use comfy_table::Table;

use crate::report::Report;

pub use readable::duration;

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

/// The report's sections, in order; `shims` lists the shims where the
/// other commands list findings.
pub fn render_with(report: &Report, layout: Layout, out: &mut dyn Write) -> io::Result<()> {
    header::write_header(report, layout, out)?;
    match &report.shims {
        Some(shims) => shims::write_shims(shims, report.shims_omitted, layout, out)?,
        None => findings::write_findings(report, layout, out)?,
    }
    actions::write_actions(&report.actions, layout, out)?;
    actions::write_cleanups(&report.cleanups, layout, out)?;
    gaps::write_gaps(&report.gaps, layout, out)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::{run_all, Settings};
    use crate::model::fixtures::*;
    use crate::model::{Finding, Kind, Severity, ShimRow};
    use crate::report::FINDINGS_PER_KIND;
    use proptest::prelude::*;
    use serde_json::Value;

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
}
