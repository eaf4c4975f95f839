//! `-o npd` and `-o npd-event`: node-problem-detector's custom-plugin
//! contract. NPD reads the exit status (0 OK, 1 NonOK, anything else
//! Unknown) and one message from stdout, cut at its `max_output_length`
//! (200 bytes in deploy/node-problem-detector).
//!
//! The two NPD rule types want different exit statuses:
//! - a permanent rule sets a node condition (True on 1, Unknown on 2), so
//!   `-o npd` exits 1 only for a critical finding: a warning (one late
//!   exit) would keep the condition True for the whole `--since` window;
//!   could not check is 2, Unknown;
//! - a temporary rule emits an event on every run that exits 1 or more, so
//!   `-o npd-event` exits 1 only for warnings (criticals are the
//!   condition's, which emits its own event when it changes) and 0
//!   otherwise, could not check included: no event every minute while
//!   containerd is down.
//!
//! The message fits in [`MESSAGE_LIMIT`] bytes, the most telling part
//! first, so NPD never cuts it mid-word or mid-character.

use std::io::{self, Write};
use std::process::ExitCode;

use crate::exit_codes::{exit, COULD_NOT_CHECK, FOUND, NOTHING_FOUND};
use crate::model::{Finding, Severity};
use crate::report::Report;

/// deploy/node-problem-detector's `max_output_length`.
pub const MESSAGE_LIMIT: usize = 200;

/// Which NPD rule the output is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// A permanent rule: the node condition.
    Condition,
    /// A temporary rule: events.
    Event,
}

/// `-o npd`: the condition's line.
pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    render_for(report, Rule::Condition, out)
}

pub fn render_for(report: &Report, rule: Rule, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{}", message(report, rule))
}

/// The exit status NPD reads, see the module's documentation.
pub fn exit_code(report: &Report, rule: Rule) -> ExitCode {
    let found = |severity| count(report, severity) > 0;
    match rule {
        Rule::Condition if found(Severity::Critical) => exit(FOUND),
        Rule::Condition if !report.gaps.is_empty() => exit(COULD_NOT_CHECK),
        Rule::Event if found(Severity::Warning) => exit(FOUND),
        _ => exit(NOTHING_FOUND),
    }
}

/// Findings of one severity, those left out of the report included.
fn count(report: &Report, severity: Severity) -> usize {
    let omitted = report.omitted_by_severity[usize::from(severity != Severity::Critical)];
    omitted
        + report
            .findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
}

fn message(report: &Report, rule: Rule) -> String {
    let of = |severity: Severity| -> Vec<&Finding> {
        report
            .findings
            .iter()
            .filter(|f| f.severity == severity)
            .collect()
    };
    let (critical, warning) = (of(Severity::Critical), of(Severity::Warning));
    let line = match rule {
        Rule::Condition if !critical.is_empty() => {
            findings_line(count(report, Severity::Critical), "critical", &critical)
        }
        Rule::Event if !warning.is_empty() => {
            findings_line(count(report, Severity::Warning), "warning", &warning)
        }
        Rule::Condition if !report.gaps.is_empty() => could_not_check(report),
        Rule::Condition if !warning.is_empty() => format!(
            "no critical finding; {} warning(s), see events",
            count(report, Severity::Warning)
        ),
        Rule::Event => "no warning".to_string(),
        Rule::Condition => "containerd, CRI and the shims agree".to_string(),
    };
    // NPD copies the message into a node condition and event, which
    // kubectl prints to a terminal: made inert like every human output.
    fit(
        &crate::inert::shown(&line.replace('\n', " ")),
        MESSAGE_LIMIT,
    )
}

/// `2 critical [zombie,leaked-shim]: <the first one's summary>`.
fn findings_line(count: usize, severity: &str, findings: &[&Finding]) -> String {
    let mut kinds: Vec<&str> = findings.iter().map(|f| f.kind.as_str()).collect();
    kinds.dedup();
    format!(
        "{count} {severity} [{}]: {}",
        kinds.join(","),
        findings[0].summary
    )
}

/// The first gap, source and error before the path (a k3s socket path
/// alone is 35 bytes), so a cut loses the path's end, not the reason.
fn could_not_check(report: &Report) -> String {
    let gap = &report.gaps[0];
    let more = match report.gaps.len() {
        1 => String::new(),
        n => format!(" (+{} more)", n - 1),
    };
    format!(
        "could not check {}{more}: {} ({})",
        gap.source,
        gap.error,
        gap.path.display()
    )
}

/// `line` in at most `limit` bytes: cut at a character boundary, `…` last.
fn fit(line: &str, limit: usize) -> String {
    if line.len() <= limit {
        return line.to_string();
    }
    const MARK: &str = "…";
    let mut end = limit - MARK.len();
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MARK}", &line[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::{run_all, Settings};
    use crate::model::fixtures::*;
    use crate::model::{Gap, Source};

    fn rendered(report: &Report, rule: Rule) -> (String, ExitCode) {
        let mut out = Vec::new();
        render_for(report, rule, &mut out).unwrap();
        (String::from_utf8(out).unwrap(), exit_code(report, rule))
    }

    #[test]
    fn a_critical_finding_sets_the_condition_and_leads_the_line() {
        let mut s = snapshot();
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        s.cri_containers
            .push(exited(&id('b'), NOW - 600 * SEC, NOW - 500 * SEC));
        let findings = run_all(&s, &s, &Settings::default());
        let report = Report::new("check", "k8s.io", s.paths.clone(), findings, vec![]);
        let (text, code) = rendered(&report, Rule::Condition);
        assert_eq!(text.lines().count(), 1);
        assert!(text.starts_with("1 critical [zombie]: "), "{text}");
        assert_eq!(code, ExitCode::from(1));
        // The late exit is the event rule's.
        let (text, code) = rendered(&report, Rule::Event);
        assert!(text.starts_with("1 warning [late-exit]: "), "{text}");
        assert_eq!(code, ExitCode::from(1));
    }

    #[test]
    fn warnings_only_are_events_never_the_condition() {
        let mut s = snapshot();
        s.cri_containers
            .push(exited(&id('b'), NOW - 600 * SEC, NOW - 500 * SEC));
        let findings = run_all(&s, &s, &Settings::default());
        assert!(findings.iter().all(|f| f.severity == Severity::Warning));
        let report = Report::new("check", "k8s.io", s.paths.clone(), findings, vec![]);
        let (text, code) = rendered(&report, Rule::Condition);
        assert_eq!(code, ExitCode::SUCCESS, "{text}");
        assert_eq!(text, "no critical finding; 1 warning(s), see events\n");
        let (_, code) = rendered(&report, Rule::Event);
        assert_eq!(code, ExitCode::from(1));
    }

    #[test]
    fn could_not_check_is_unknown_for_the_condition_and_no_event() {
        let s = snapshot();
        let socket = "/run/k3s/containerd/containerd.sock";
        let error = format!(
            "socket does not exist (transport error: connecting to {socket}: \
             No such file or directory (os error 2)) after a 5s deadline, {}",
            "and more detail ".repeat(8)
        );
        let gaps = vec![
            Gap::source(Source::ContainerdApi, socket, &error),
            Gap::source(Source::CriApi, socket, &error),
        ];
        let report = Report::new("check", "k8s.io", s.paths.clone(), vec![], gaps);
        let (text, code) = rendered(&report, Rule::Condition);
        assert_eq!(code, ExitCode::from(2), "Unknown");
        let line = text.trim_end_matches('\n');
        assert!(line.len() <= MESSAGE_LIMIT, "{} bytes: {line}", line.len());
        assert!(
            line.starts_with("could not check containerd-api (+1 more): socket does not exist"),
            "{line}"
        );
        assert!(line.ends_with('…'), "{line}");
        let (text, code) = rendered(&report, Rule::Event);
        assert_eq!(code, ExitCode::SUCCESS, "no event every run: {text}");
    }

    #[test]
    fn every_message_fits_npds_limit_at_a_character_boundary() {
        let s = snapshot();
        let finding = |severity| Finding {
            kind: crate::model::Kind::Zombie,
            severity,
            id: id('a'),
            summary: format!("pod {} wedged", "é".repeat(300)),
            evidence: serde_json::Value::Null,
            cause: String::new(),
            remedy: String::new(),
        };
        let findings = vec![finding(Severity::Critical), finding(Severity::Warning)];
        let report = Report::new("check", "k8s.io", s.paths.clone(), findings, vec![]);
        for rule in [Rule::Condition, Rule::Event] {
            let (text, _) = rendered(&report, rule);
            let line = text.trim_end_matches('\n');
            assert!(
                line.len() <= MESSAGE_LIMIT,
                "{rule:?}: {} bytes",
                line.len()
            );
        }
        assert_eq!(fit("aéé", 4), "a…", "never half of a character");
        assert_eq!(fit("abc", 3), "abc");
    }

    #[test]
    fn healthy_node_says_so() {
        let s = snapshot();
        let report = Report::new("check", "k8s.io", s.paths.clone(), vec![], vec![]);
        let (text, code) = rendered(&report, Rule::Condition);
        assert_eq!(text, "containerd, CRI and the shims agree\n");
        assert_eq!(code, ExitCode::SUCCESS);
        let (_, code) = rendered(&report, Rule::Event);
        assert_eq!(code, ExitCode::SUCCESS);
    }
}
