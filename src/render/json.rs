//! `-o json`: one JSON document per run (schema in the README).

use std::io::{self, Write};

use crate::report::Report;

pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixtures::{id, snapshot, NOW, SEC};
    use crate::checks::{run_all, Settings};

    #[test]
    fn document_has_the_documented_shape() {
        let mut s = snapshot();
        s.cri_containers.push(crate::checks::fixtures::running(
            &id('a'),
            100,
            NOW - 60 * SEC,
        ));
        let findings = run_all(&s, &s, &Settings::default());
        let gaps = vec![crate::snapshot::Gap::item(
            "cri-store",
            "/x/status",
            "corrupt status file",
        )];
        let report = Report::new("zombies", "k8s.io", s.paths.clone(), findings, gaps);
        let mut out = Vec::new();
        render(&report, &mut out).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();

        assert_eq!(doc["schema_version"], 1);
        assert_eq!(doc["command"], "zombies");
        assert_eq!(doc["paths"]["root"]["origin"], "default");
        let finding = &doc["findings"][0];
        for key in [
            "kind", "severity", "id", "summary", "evidence", "cause", "remedy",
        ] {
            assert!(!finding[key].is_null(), "finding lacks {key}: {finding}");
        }
        assert_eq!(finding["kind"], "zombie");
        assert_eq!(finding["id"].as_str().unwrap().len(), 64);
        assert_eq!(doc["gaps"][0]["path"], "/x/status");
        assert_eq!(doc["gaps"][0]["source_unavailable"], false);
    }
}
