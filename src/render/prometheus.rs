//! `-o prometheus`: node_exporter textfile-collector format, for a fleet to
//! alert on. Every finding kind has its `nodectl_check_ok`, and its
//! `nodectl_findings` (0 when none) whenever it could be checked; the
//! shipped rules keep a finding's alert firing while its kind cannot be.

use std::collections::BTreeMap;
use std::io::{self, Write};

use crate::checks::registry::CHECKS;
use crate::model::Severity;
use crate::report::Report;

pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let command = escape(&report.command);
    let up = report.gaps.iter().all(|g| !g.source_unavailable);
    gauge(
        out,
        "nodectl_up",
        "1 when every source could be read, 0 when one was unavailable.",
    )?;
    writeln!(out, "nodectl_up{{command=\"{command}\"}} {}", u8::from(up))?;

    gauge(
        out,
        "nodectl_containerd_info",
        "The containerd version (source: api, process or unknown); always 1.",
    )?;
    let version = report.containerd.version.as_deref().unwrap_or("unknown");
    writeln!(
        out,
        "nodectl_containerd_info{{command=\"{command}\",version=\"{}\",source=\"{}\"}} 1",
        node_label(version),
        report.containerd.source.as_str()
    )?;
    gauge(
        out,
        "nodectl_containerd_advisory",
        "Known containerd bugs of the running version (see nodectl's README), 1 each.",
    )?;
    for advisory in &report.advisories {
        writeln!(
            out,
            "nodectl_containerd_advisory{{command=\"{command}\",advisory=\"{}\"}} 1",
            escape(&advisory.id)
        )?;
    }

    gauge(
        out,
        "nodectl_check_ok",
        "1 when every source a kind's check reads could be read, 0 when one was unavailable.",
    )?;
    // Every registered check's kind, found or not.
    let checked: Vec<(&str, bool)> = CHECKS
        .iter()
        .map(|check| (check.kind.as_str(), check.could_check(&report.gaps)))
        .collect();
    for (kind, ok) in &checked {
        writeln!(
            out,
            "nodectl_check_ok{{command=\"{command}\",kind=\"{kind}\"}} {}",
            u8::from(*ok)
        )?;
    }
    gauge(
        out,
        "nodectl_findings",
        "Findings of the last run, by kind; none written for a kind that could not be checked and found nothing.",
    )?;
    for &(kind, ok) in &checked {
        let count = report.count(kind);
        // A kind nodectl could not check has no 0 to say: a 0 would resolve
        // its alert while nodectl cannot see. What it found despite the gap
        // is real, so a count above 0 is written.
        if !ok && count == 0 {
            continue;
        }
        writeln!(
            out,
            "nodectl_findings{{command=\"{command}\",kind=\"{kind}\"}} {count}"
        )?;
    }
    gauge(
        out,
        "nodectl_findings_by_severity",
        "Findings of the last run, by severity; no 0 written while a kind could not be checked.",
    )?;
    // A kind that could not be checked may have findings of either
    // severity: a 0 would resolve an alert on the totals while nodectl
    // cannot see (as for `nodectl_findings`).
    let blind = checked.iter().any(|(_, ok)| !ok);
    for (severity, name, omitted) in [
        (
            Severity::Critical,
            "critical",
            report.omitted_by_severity[0],
        ),
        (Severity::Warning, "warning", report.omitted_by_severity[1]),
    ] {
        let count = omitted
            + report
                .findings
                .iter()
                .filter(|f| f.severity == severity)
                .count();
        if blind && count == 0 {
            continue;
        }
        writeln!(
            out,
            "nodectl_findings_by_severity{{command=\"{command}\",severity=\"{name}\"}} {count}"
        )?;
    }

    gauge(
        out,
        "nodectl_gaps",
        "What a source could not read in the last run, by source.",
    )?;
    let mut gaps: BTreeMap<&str, usize> = BTreeMap::new();
    for gap in &report.gaps {
        *gaps.entry(gap.source.as_str()).or_default() += 1;
    }
    for (source, count) in gaps {
        writeln!(
            out,
            "nodectl_gaps{{command=\"{command}\",source=\"{}\"}} {count}",
            escape(source)
        )?;
    }

    pod_addresses(out, report, &command)?;

    if !report.api_calls.is_empty() {
        // Per API and method, never per container: ids are chosen by
        // tenants, and one series each would let them grow every scrape.
        let mut calls: BTreeMap<(&str, &str), (usize, usize, f64)> = BTreeMap::new();
        for call in &report.api_calls {
            let key = (call.api.as_str(), call.method.as_str());
            let entry = calls.entry(key).or_default();
            entry.0 += 1;
            entry.1 += usize::from(call.error.is_some());
            entry.2 = entry.2.max(call.latency_ms / 1e3);
        }
        gauge(
            out,
            "nodectl_api_calls",
            "API calls of the last run listed in its report, by API and method (ContainerStatus only when slow or failed).",
        )?;
        for ((api, method), (count, _, _)) in &calls {
            writeln!(
                out,
                "nodectl_api_calls{{api=\"{api}\",call=\"{method}\"}} {count}"
            )?;
        }
        gauge(
            out,
            "nodectl_api_call_duration_seconds",
            "The longest of those calls (until the deadline when it timed out).",
        )?;
        for ((api, method), (_, _, max)) in &calls {
            writeln!(
                out,
                "nodectl_api_call_duration_seconds{{api=\"{api}\",call=\"{method}\"}} {max}"
            )?;
        }
        gauge(
            out,
            "nodectl_api_call_failed",
            "How many of those calls failed or timed out.",
        )?;
        for ((api, method), (_, failed, _)) in &calls {
            writeln!(
                out,
                "nodectl_api_call_failed{{api=\"{api}\",call=\"{method}\"}} {failed}"
            )?;
        }
    }

    gauge(
        out,
        "nodectl_last_run_timestamp_seconds",
        "When the last run finished (unix time).",
    )?;
    writeln!(
        out,
        "nodectl_last_run_timestamp_seconds{{command=\"{command}\"}} {}",
        chrono::Utc::now().timestamp()
    )
}

/// `serve`'s own families, after a run's metrics: how long the last run
/// took, and how many runs the loop has made since it started (scrapes do
/// not add runs; a rate of this counter shows the loop's pace).
pub fn render_loop(
    out: &mut dyn Write,
    command: &str,
    last_run: std::time::Duration,
    runs: u64,
) -> io::Result<()> {
    let command = escape(command);
    gauge(
        out,
        "nodectl_check_duration_seconds",
        "How long the last run took, from gathering to the report.",
    )?;
    writeln!(
        out,
        "nodectl_check_duration_seconds{{command=\"{command}\"}} {}",
        last_run.as_secs_f64()
    )?;
    writeln!(
        out,
        "# HELP nodectl_checks_total Runs since nodectl serve started, failed ones included."
    )?;
    writeln!(out, "# TYPE nodectl_checks_total counter")?;
    writeln!(out, "nodectl_checks_total{{command=\"{command}\"}} {runs}")
}

/// What `serve` knows of containerd's event stream.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct StreamMetrics {
    /// Subscribed now.
    pub up: bool,
    /// Connects after the stream was down (see `events::Reconnects`).
    pub reconnects: u64,
    /// Events heard, by topic (`tasks/exit`, ...).
    pub events: BTreeMap<String, u64>,
}

/// Topics written at most: containerd's topics are its own, but a stream
/// is taken as it comes.
pub const TOPICS_LISTED: usize = 32;

/// `serve`'s event stream: whether it is up, reconnects, events by topic.
pub fn render_stream(out: &mut dyn Write, command: &str, stream: &StreamMetrics) -> io::Result<()> {
    let command = escape(command);
    gauge(
        out,
        "nodectl_event_stream_up",
        "1 while subscribed to containerd's events (only the daemon a run proved), else 0.",
    )?;
    writeln!(
        out,
        "nodectl_event_stream_up{{command=\"{command}\"}} {}",
        u8::from(stream.up)
    )?;
    writeln!(
        out,
        "# HELP nodectl_event_stream_reconnects_total Connects to containerd's event stream after it was down; events published meanwhile were not seen."
    )?;
    writeln!(out, "# TYPE nodectl_event_stream_reconnects_total counter")?;
    writeln!(
        out,
        "nodectl_event_stream_reconnects_total{{command=\"{command}\"}} {}",
        stream.reconnects
    )?;
    writeln!(
        out,
        "# HELP nodectl_events_total Events heard from containerd's stream, by topic."
    )?;
    writeln!(out, "# TYPE nodectl_events_total counter")?;
    for (topic, count) in stream.events.iter().take(TOPICS_LISTED) {
        writeln!(
            out,
            "nodectl_events_total{{command=\"{command}\",topic=\"{}\"}} {count}",
            node_label(topic)
        )?;
    }
    Ok(())
}

/// Networks written at most: a network's name is the node's conflist's,
/// and each is two series.
const NETWORKS_LISTED: usize = 32;

/// Each CNI network's use of its range, for an alert before it is used up
/// (every new pod then fails). The types are written without series too,
/// so that a rule's metric is always known.
fn pod_addresses(out: &mut dyn Write, report: &Report, command: &str) -> io::Result<()> {
    let networks = || report.pod_addresses.iter().take(NETWORKS_LISTED);
    gauge(
        out,
        "nodectl_pod_addresses_reserved",
        "Addresses host-local holds, by CNI network.",
    )?;
    for use_of in networks() {
        writeln!(
            out,
            "nodectl_pod_addresses_reserved{{command=\"{command}\",network=\"{}\"}} {}",
            node_label(&use_of.network),
            use_of.reserved
        )?;
    }
    gauge(
        out,
        "nodectl_pod_addresses_capacity",
        "Addresses a CNI network's ranges give out, when its config says.",
    )?;
    for use_of in networks() {
        if let Some(capacity) = use_of.capacity {
            writeln!(
                out,
                "nodectl_pod_addresses_capacity{{command=\"{command}\",network=\"{}\"}} {capacity}",
                node_label(&use_of.network),
            )?;
        }
    }
    Ok(())
}

fn gauge(out: &mut dyn Write, name: &str, help: &str) -> io::Result<()> {
    writeln!(out, "# HELP {name} {help}")?;
    writeln!(out, "# TYPE {name} gauge")
}

/// A version is whatever the binary printed: keep its label short so a
/// strange build cannot bloat every scrape.
const VERSION_LABEL_LIMIT: usize = 64;

fn capped(value: &str, limit: usize) -> String {
    value.chars().take(limit).collect()
}

/// A label value that came from the node (a CNI network's name, the
/// version a binary printed, an event's topic): cut short, so that a strange
/// one cannot bloat every scrape, and inert as in every text output, so that
/// no control, bidirectional or separator character reaches a dashboard or
/// a terminal that shows the scrape (`\x1b` stays a backslash and three
/// characters there).
fn node_label(value: &str) -> String {
    escape(&crate::inert::inert(&capped(value, VERSION_LABEL_LIMIT)))
}

/// Label values escape backslash, double quote and newline.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::{run_all, Settings};
    use crate::model::fixtures::*;
    use crate::model::{Api, ApiCall, Gap, Kind, Method, Source};

    #[test]
    fn every_kind_is_exported_and_values_are_counted() {
        let mut s = snapshot();
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        let findings = run_all(&s, &s, &Settings::default());
        let gaps = vec![Gap::source(Source::ContainerdApi, "/x\"y", "down")];
        let report = Report::new("check", "k8s.io", s.paths.clone(), findings, gaps);
        let mut out = Vec::new();
        render(&report, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("nodectl_up{command=\"check\"} 0"), "{text}");
        assert!(
            text.contains("nodectl_findings{command=\"check\",kind=\"zombie\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("nodectl_findings{command=\"check\",kind=\"late-exit\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("nodectl_gaps{command=\"check\",source=\"containerd-api\"} 1"),
            "{text}"
        );
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn each_network_s_use_of_its_range_is_exported_and_the_types_always_are() {
        let s = snapshot();
        let mut report = Report::new("check", "k8s.io", s.paths.clone(), vec![], vec![]);
        let mut out = Vec::new();
        render(&report, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("# TYPE nodectl_pod_addresses_reserved gauge"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE nodectl_pod_addresses_capacity gauge"),
            "{text}"
        );
        report.pod_addresses = vec![
            crate::model::AddressUse {
                network: "pods\"x".to_string(),
                reserved: 29,
                capacity: Some(30),
            },
            crate::model::AddressUse {
                network: "unsized".to_string(),
                reserved: 3,
                capacity: None,
            },
        ];
        let mut out = Vec::new();
        render(&report, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(
                "nodectl_pod_addresses_reserved{command=\"check\",network=\"pods\\\"x\"} 29"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "nodectl_pod_addresses_capacity{command=\"check\",network=\"pods\\\"x\"} 30"
            ),
            "{text}"
        );
        assert!(text.contains("network=\"unsized\"} 3"), "{text}");
        assert!(
            !text.contains("nodectl_pod_addresses_capacity{command=\"check\",network=\"unsized\"")
        );
    }

    #[test]
    fn a_node_string_reaches_a_label_inert_and_short() {
        let s = snapshot();
        let mut report = Report::new("check", "k8s.io", s.paths.clone(), vec![], vec![]);
        let hostile = "pods\u{1b}]0;owned\u{7}\u{2028}\u{202e}x\ny";
        report.containerd.version = Some(format!("1.7.0{hostile}"));
        report.pod_addresses = vec![crate::model::AddressUse {
            network: format!("{hostile}{}", "n".repeat(500)),
            reserved: 1,
            capacity: Some(2),
        }];
        let mut out = Vec::new();
        render(&report, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        for line in text.lines() {
            assert!(
                !line
                    .chars()
                    .any(|c| c.is_control()
                        || crate::inert::inert(&c.to_string()).len() > c.len_utf8()),
                "{line:?}"
            );
        }
        let network = text
            .lines()
            .find(|l| l.starts_with("nodectl_pod_addresses_reserved{"))
            .unwrap();
        assert!(
            network.contains("network=\"pods\\\\x1b]0;owned\\\\x07\\\\u{2028}\\\\u{202e}x\\\\x0ay"),
            "{network}"
        );
        assert!(network.len() < 200, "{network}");
    }

    fn rendered(findings: Vec<crate::model::Finding>, gaps: Vec<Gap>) -> String {
        let s = snapshot();
        let report = Report::new("check", "k8s.io", s.paths.clone(), findings, gaps);
        let mut out = Vec::new();
        render(&report, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn has_line(text: &str, line: &str) -> bool {
        text.lines().any(|l| l == line)
    }

    /// A kind that could not be checked says so, and never says 0 findings
    /// (its alert would resolve while nodectl cannot see); kinds that do
    /// not read the missing source are checked and counted as ever.
    #[test]
    fn a_kind_whose_source_was_unavailable_is_not_ok_and_never_counts_0() {
        let store_gone = vec![Gap::source(Source::CriStore, "/x", "gone")];
        let text = rendered(vec![], store_gone);
        for kind in Kind::ALL {
            let kind = kind.as_str();
            assert!(
                has_line(
                    &text,
                    &format!("nodectl_check_ok{{command=\"check\",kind=\"{kind}\"}} 0")
                ),
                "{kind}: {text}"
            );
            assert!(
                !text.contains(&format!(
                    "nodectl_findings{{command=\"check\",kind=\"{kind}\"}}"
                )),
                "{kind}: {text}"
            );
        }

        // The API down: the leak checks need it, zombies are found without.
        let api_down = vec![Gap::source(Source::ContainerdApi, "/sock", "down")];
        let text = rendered(vec![], api_down);
        for line in [
            "nodectl_check_ok{command=\"check\",kind=\"zombie\"} 1",
            "nodectl_findings{command=\"check\",kind=\"zombie\"} 0",
            "nodectl_check_ok{command=\"check\",kind=\"shim-blocked\"} 1",
            "nodectl_findings{command=\"check\",kind=\"shim-blocked\"} 0",
            "nodectl_check_ok{command=\"check\",kind=\"leaked-shim\"} 0",
        ] {
            assert!(has_line(&text, line), "no {line} in {text}");
        }
        assert!(
            !text.contains("nodectl_findings{command=\"check\",kind=\"leaked-shim\"}"),
            "{text}"
        );
        // Nor do the totals by severity say 0 while a kind is blind.
        assert!(!text.contains("nodectl_findings_by_severity{"), "{text}");

        // One unreadable status file is not the store: every kind is ok.
        let one_file = vec![Gap::item(Source::CriStore, "/x/status", "corrupt")];
        let text = rendered(vec![], one_file);
        assert!(
            has_line(
                &text,
                "nodectl_check_ok{command=\"check\",kind=\"zombie\"} 1"
            ),
            "{text}"
        );
        assert!(
            has_line(
                &text,
                "nodectl_findings{command=\"check\",kind=\"zombie\"} 0"
            ),
            "{text}"
        );
    }

    /// What was found despite a gap is real: its count is written, beside
    /// `nodectl_check_ok` 0.
    #[test]
    fn findings_found_despite_an_unavailable_source_are_counted() {
        let mut s = snapshot();
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        let findings = run_all(&s, &s, &Settings::default());
        let bundles_gone = vec![Gap::source(Source::Bundles, "/b", "gone")];
        let text = rendered(findings, bundles_gone);
        for line in [
            "nodectl_check_ok{command=\"check\",kind=\"zombie\"} 0",
            "nodectl_findings{command=\"check\",kind=\"zombie\"} 1",
        ] {
            assert!(has_line(&text, line), "no {line} in {text}");
        }
        assert!(
            !text.contains("nodectl_findings{command=\"check\",kind=\"late-exit\"}"),
            "{text}"
        );
    }

    #[test]
    fn api_calls_are_labelled_by_api_and_method_never_by_target() {
        let s = snapshot();
        let call = |api, method, target: Option<&str>, latency_ms| ApiCall {
            api,
            method,
            target: target.map(str::to_string),
            latency_ms,
            error: None,
            timed_out: false,
        };
        let mut report = Report::new("check", "k8s.io", s.paths.clone(), vec![], vec![]);
        report.api_calls = vec![
            call(Api::Cri, Method::ListContainers, None, 5.0),
            call(
                Api::Cri,
                Method::ContainerStatus,
                Some("abc\"def\n"),
                1500.0,
            ),
            call(Api::Cri, Method::ContainerStatus, Some(&id('a')), 2500.0),
            call(Api::Containerd, Method::TasksList, Some("k8s.io"), 3.0),
        ];
        let mut out = Vec::new();
        render(&report, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        for line in [
            "nodectl_api_calls{api=\"cri\",call=\"ListContainers\"} 1",
            "nodectl_api_calls{api=\"cri\",call=\"ContainerStatus\"} 2",
            "nodectl_api_call_duration_seconds{api=\"cri\",call=\"ContainerStatus\"} 2.5",
            "nodectl_api_calls{api=\"containerd\",call=\"Tasks.List\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line} in {text}");
        }
        assert!(!text.contains("abc") && !text.contains(&id('a')), "{text}");
    }

    /// A CRI that accepts and never answers: a timed-out ContainerStatus
    /// per container. The series are per API and method whatever the
    /// number of containers, and no id reaches a label.
    #[test]
    fn per_call_latency_is_aggregated_never_per_container() {
        let s = snapshot();
        let series = |containers: usize| {
            let mut report = Report::new("check", "k8s.io", s.paths.clone(), vec![], vec![]);
            report.api_calls.push(ApiCall {
                api: Api::Cri,
                method: Method::ListContainers,
                target: None,
                latency_ms: 12.0,
                error: None,
                timed_out: false,
            });
            for n in 0..containers {
                report.api_calls.push(ApiCall {
                    api: Api::Cri,
                    method: Method::ContainerStatus,
                    target: Some(format!("{n:x}").repeat(64)),
                    latency_ms: 1000.0 + n as f64,
                    error: Some("deadline exceeded".into()),
                    timed_out: true,
                });
            }
            let mut out = Vec::new();
            render(&report, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let few = series(3);
        let many = series(300);
        let names = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| !l.starts_with('#'))
                .map(|l| l.rsplit_once(' ').unwrap().0.to_string())
                .collect()
        };
        assert_eq!(names(&few), names(&many), "the same series:\n{few}\n{many}");
        assert!(!many.contains("aaaa"), "no id in a label: {many}");
        for line in [
            "nodectl_api_calls{api=\"cri\",call=\"ContainerStatus\"} 300",
            "nodectl_api_call_failed{api=\"cri\",call=\"ContainerStatus\"} 300",
            "nodectl_api_call_duration_seconds{api=\"cri\",call=\"ContainerStatus\"} 1.299",
            "nodectl_api_calls{api=\"cri\",call=\"ListContainers\"} 1",
            "nodectl_api_call_failed{api=\"cri\",call=\"ListContainers\"} 0",
        ] {
            assert!(many.lines().any(|l| l == line), "{line} in {many}");
        }
    }

    #[test]
    fn the_containerd_version_is_a_capped_escaped_label_with_its_advisories() {
        let s = snapshot();
        let strange = format!("1.7.20\"{}", "x".repeat(100));
        let report = Report::new("shims", "k8s.io", s.paths.clone(), vec![], vec![]).identified(
            crate::model::ContainerdVersion {
                version: Some(strange),
                source: crate::model::VersionSource::Process,
            },
        );
        let mut out = Vec::new();
        render(&report, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let info = text
            .lines()
            .find(|l| l.starts_with("nodectl_containerd_info{"))
            .unwrap();
        let version = format!("1.7.20\\\"{}", "x".repeat(57));
        assert_eq!(
            info,
            format!(
                "nodectl_containerd_info{{command=\"shims\",version=\"{version}\",source=\"process\"}} 1"
            )
        );
        assert!(
            text.contains(
                "nodectl_containerd_advisory{command=\"shims\",advisory=\"containerd#10589\"} 1"
            ),
            "{text}"
        );

        let unknown = Report::new("shims", "k8s.io", s.paths.clone(), vec![], vec![]);
        let mut out = Vec::new();
        render(&unknown, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("nodectl_containerd_info{command=\"shims\",version=\"unknown\",source=\"unknown\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn the_event_stream_is_told_up_with_its_reconnects_and_events_by_topic() {
        let stream = StreamMetrics {
            up: true,
            reconnects: 2,
            events: [
                ("tasks/exit".to_string(), 5),
                ("tasks/delete".to_string(), 2),
            ]
            .into(),
        };
        let mut out = Vec::new();
        render_stream(&mut out, "check", &stream).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("nodectl_event_stream_up{command=\"check\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("nodectl_event_stream_reconnects_total{command=\"check\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("nodectl_events_total{command=\"check\",topic=\"tasks/exit\"} 5\n"),
            "{text}"
        );
        let mut out = Vec::new();
        render_stream(&mut out, "check", &StreamMetrics::default()).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("nodectl_event_stream_up{command=\"check\"} 0\n"),
            "{text}"
        );
        assert!(!text.contains("nodectl_events_total{"), "{text}");
    }
}
