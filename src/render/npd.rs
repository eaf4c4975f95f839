//! `-o npd`: node-problem-detector custom-plugin mode. NPD reads the exit
//! status (0 OK, 1 problem, anything else unknown: nodectl's 0/1/2 map onto
//! it as they are) and one short message from stdout, cut at its
//! `max_output_length`, so the most severe finding comes first.

use std::io::{self, Write};

use crate::report::Report;

pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let line = if let Some(first) = report.findings.first() {
        let mut kinds: Vec<&str> = report.findings.iter().map(|f| f.kind.as_str()).collect();
        kinds.dedup();
        format!(
            "{} finding(s) [{}]: {}",
            report.findings.len(),
            kinds.join(","),
            first.summary
        )
    } else if let Some(gap) = report.gaps.first() {
        format!(
            "could not check: {} {}: {}",
            gap.source,
            gap.path.display(),
            gap.error
        )
    } else {
        "containerd, CRI and the shims agree".to_string()
    };
    // NPD copies the message into a node condition and event, which
    // kubectl prints to a terminal: made inert like every human output.
    writeln!(out, "{}", crate::inert::shown(&line.replace('\n', " ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::{run_all, Settings};
    use crate::model::fixtures::*;

    #[test]
    fn one_line_leading_with_the_worst_finding() {
        let mut s = snapshot();
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        s.cri_containers
            .push(exited(&id('b'), NOW - 600 * SEC, NOW - 500 * SEC));
        let findings = run_all(&s, &s, &Settings::default());
        let report = Report::new("check", "k8s.io", s.paths.clone(), findings, vec![]);
        let mut out = Vec::new();
        render(&report, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 1);
        assert!(
            text.starts_with("2 finding(s) [zombie,late-exit]: "),
            "{text}"
        );
    }

    #[test]
    fn healthy_node_says_so() {
        let s = snapshot();
        let report = Report::new("check", "k8s.io", s.paths.clone(), vec![], vec![]);
        let mut out = Vec::new();
        render(&report, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "containerd, CRI and the shims agree\n"
        );
    }
}
