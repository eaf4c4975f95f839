//! What nodectl says of the shims a test leaked on purpose, and that
//! `leaked-shims --kill` ends those and nothing else.

use k8s_cri::v1::ContainerState;
use serde_json::Value;

use super::cri::Pod;
use super::testbed::TestBed;
use super::{procs, report};

/// A shim the test expects nodectl to find leaked: the one of `sandbox_id`.
#[derive(Clone, Debug)]
pub struct LeakedShim {
    pub sandbox_id: String,
    pub pid: i32,
}

/// The findings of `kind` in a JSON report.
pub fn findings_of_kind<'a>(doc: &'a Value, kind: &str) -> Vec<&'a Value> {
    doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["kind"] == kind)
        .collect()
}

/// The ids of the findings of `kind` in a JSON report.
pub fn ids_of_kind(doc: &Value, kind: &str) -> Vec<String> {
    findings_of_kind(doc, kind)
        .iter()
        .map(|f| f["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// `leaked-mounts` with both its cleanups, acting, in JSON.
pub const LEAKED_MOUNTS_CLEAN: &[&str] = &[
    "leaked-mounts",
    "--unmount",
    "--remove-bundles",
    "--yes",
    "-o",
    "json",
];

/// Each cleanup row of a JSON report as (action, id, outcome).
pub fn cleanup_rows(doc: &Value) -> Vec<(String, String, String)> {
    doc["cleanups"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let field = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (field("action"), field("id"), field("outcome"))
        })
        .collect()
}

impl TestBed {
    /// `leaked-shims` reports exactly `leaked`, each a `leaked-shim` whose
    /// evidence names every advisory of `advisories` and whose cause tells
    /// how the first of them did it; the table lists each; `--kill --yes`
    /// ends each, leaves `healthy` running, and then nothing is reported.
    /// The JSON of the first finding and the table are printed, for the
    /// record of what an operator sees.
    pub async fn leaked_shims_found_and_ended(
        &self,
        leaked: &[LeakedShim],
        advisories: &[&str],
        healthy: &Pod,
    ) {
        let healthy_shim = self.shim_pid(&healthy.sandbox_id);
        let output = self.nodectl(&["leaked-shims", "-o", "json"]);
        let doc = report(&output);
        assert_eq!(output.status.code(), Some(1), "{doc}");
        let found = findings_of_kind(&doc, "leaked-shim");
        let mut found_ids: Vec<&str> = found.iter().filter_map(|f| f["id"].as_str()).collect();
        let mut expected_ids: Vec<&str> = leaked.iter().map(|l| l.sandbox_id.as_str()).collect();
        found_ids.sort();
        expected_ids.sort();
        assert_eq!(found_ids, expected_ids, "{doc}");
        for shim in leaked {
            let finding = found
                .iter()
                .find(|f| f["id"] == shim.sandbox_id.as_str())
                .expect("found above");
            let evidence = &finding["evidence"];
            assert_eq!(evidence["shim_pid"], shim.pid, "{finding}");
            assert_eq!(evidence["basis"], "containerd-api", "{finding}");
            let advisory = evidence["advisory"].as_str().unwrap_or_default();
            for id in advisories {
                assert!(advisory.contains(id), "{id} in {finding}");
            }
            let cause = finding["cause"].as_str().unwrap_or_default();
            assert!(
                cause.contains(&format!("{} can do it here:", advisories[0])),
                "{finding}"
            );
        }
        eprintln!(
            "$ nodectl leaked-shims -o json  (containerd {}, first finding)\n{:#}",
            self.containerd_version(),
            found[0]
        );
        let table = self.nodectl(&["leaked-shims"]);
        let text = String::from_utf8_lossy(&table.stdout);
        eprintln!("$ nodectl leaked-shims\n{text}");
        assert_eq!(table.status.code(), Some(1), "{text}");
        for shim in leaked {
            let short = &shim.sandbox_id[..13];
            let rows = text
                .lines()
                .filter(|l| {
                    l.contains("leaked-shim") && l.contains("critical") && l.contains(short)
                })
                .count();
            assert_eq!(rows, 1, "one row for {short}:\n{text}");
        }

        let output = self.nodectl(&["leaked-shims", "--kill", "--yes", "-o", "json"]);
        let killed = report(&output);
        eprintln!(
            "$ nodectl leaked-shims --kill --yes -o json  (actions)\n{:#}",
            killed["actions"]
        );
        for shim in leaked {
            let action = killed["actions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|a| a["shim_pid"] == shim.pid)
                .unwrap_or_else(|| panic!("no action for shim {}: {killed}", shim.pid));
            assert!(
                matches!(action["outcome"].as_str(), Some("terminated" | "killed")),
                "{action}"
            );
            assert!(!procs::is_running(shim.pid), "shim {} is gone", shim.pid);
        }
        assert!(
            procs::is_running(healthy_shim),
            "the healthy pod's shim still runs"
        );
        assert_eq!(
            self.container_state(&healthy.container_id).await,
            ContainerState::ContainerRunning,
            "the healthy pod's container still runs"
        );
        let output = self.nodectl(&["leaked-shims", "-o", "json"]);
        assert_eq!(output.status.code(), Some(0), "{}", report(&output));
    }
}
