//! `-o json`: one JSON document per run (schema/report-v1.schema.json, described in docs/json.md).

use std::io::{self, Write};

use crate::report::Report;

pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::{run_all, Settings};
    use crate::model::fixtures::{id, snapshot, NOW, SEC};

    #[test]
    fn document_has_the_documented_shape() {
        let mut s = snapshot();
        s.cri_containers.push(crate::model::fixtures::running(
            &id('a'),
            100,
            NOW - 60 * SEC,
        ));
        let findings = run_all(&s, &s, &Settings::default());
        let gaps = vec![crate::model::Gap::item(
            crate::model::Source::CriStore,
            "/x/status",
            "corrupt status file",
        )];
        let report = Report::new("zombies", "k8s.io", s.paths.clone(), findings, gaps);
        let mut out = Vec::new();
        render(&report, &mut out).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();

        assert_eq!(doc["schema_version"], 1);
        assert_eq!(doc["containerd"]["version"], serde_json::Value::Null);
        assert_eq!(doc["containerd"]["source"], "unknown");
        assert_eq!(doc["advisories"], serde_json::json!([]));
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

    #[test]
    fn the_version_its_advisories_and_the_explained_findings_are_in_the_document() {
        let mut s = snapshot();
        s.cri_containers.push(crate::model::fixtures::running(
            &id('a'),
            100,
            NOW - 60 * SEC,
        ));
        let findings = run_all(&s, &s, &Settings::default());
        let report = Report::new("zombies", "k8s.io", s.paths.clone(), findings, vec![])
            .identified(crate::model::ContainerdVersion {
                version: Some("1.7.20".to_string()),
                source: crate::model::VersionSource::Api,
            });
        let mut out = Vec::new();
        render(&report, &mut out).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            doc["containerd"],
            serde_json::json!({"version": "1.7.20", "source": "api"})
        );
        let ids: Vec<&str> = doc["advisories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            ids,
            ["containerd#10589", "containerd#9770", "containerd#13848"]
        );
        assert_eq!(doc["advisories"][0]["kinds"], serde_json::json!(["zombie"]));
        assert_eq!(
            doc["findings"][0]["evidence"]["advisory"],
            "containerd#10589: fixed in 1.7.22, upgrade"
        );
    }
}
