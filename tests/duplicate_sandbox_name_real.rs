//! `duplicate-sandbox-name` on a real containerd of every line: a pod's
//! sandbox container and a second record carrying the same CRI name, as a
//! RunPodSandbox whose rollback left its sandbox container and kubelet's
//! retry leave them (containerd#13609, on 2.0 to 2.2.5 and 2.3.0 to 2.3.2,
//! where an NRI plugin rejected the pod). The bed runs no NRI plugin: the
//! second record is made through containerd's containers API as a copy of
//! the first under another id (no task, as a record whose pause is gone).
//!
//! nodectl must name the pair, the one CRI serves and the one to remove,
//! with the advisory on the line that has the bug (2.0.11) and on no other
//! (1.6.20, 1.7.34, 2.3.4: asserted); a healthy pod gives none. The claim
//! the finding makes is then shown on every line: containerd restarted
//! exits at start-up, unable to reserve the name.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::TestBed;

const TEST: &str = "duplicate_sandbox_name_real";

fn duplicates(doc: &Value) -> Vec<&Value> {
    doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["kind"] == "duplicate-sandbox-name")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sandbox_record_with_one_name_is_found_and_containerd_cannot_start_with_it() {
    let Some(mut bed) = TestBed::start(TEST).await else {
        return;
    };
    let sandbox = bed.run_sandbox("twin").await;
    let check = ["check", "--settle", "0s", "-o", "json"];
    let doc = support::report(&bed.nodectl(&check));
    assert!(duplicates(&doc).is_empty(), "a healthy pod: {doc:#}");

    let twin = bed.twin_sandbox_record(&sandbox).await;

    let output = bed.nodectl(&check);
    assert_eq!(output.status.code(), Some(1), "a finding is exit 1");
    let doc = support::report(&output);
    support::assert_matches_schema(&doc);
    let found = duplicates(&doc);
    assert_eq!(found.len(), 1, "{doc:#}");
    let finding = found[0];
    eprintln!("{TEST}: {}: {finding:#}", bed.containerd_version());
    assert_eq!(finding["severity"], "critical");
    let name = finding["id"].as_str().unwrap_or_default().to_string();
    assert!(name.starts_with("twin_"), "CRI's name for the pod: {name}");
    let mut pair = vec![sandbox.clone(), twin.clone()];
    pair.sort();
    assert_eq!(finding["evidence"]["sandbox_ids"], serde_json::json!(pair));
    assert_eq!(
        finding["evidence"]["listed_by_cri"],
        serde_json::json!([sandbox]),
        "CRI serves the first"
    );
    assert_eq!(finding["evidence"]["pod_name"], "twin");
    let remedy = finding["remedy"].as_str().unwrap_or_default();
    assert!(
        remedy.contains(&format!("remove {twin} (CRI does not list it)")),
        "{remedy}"
    );
    // The advisory where the version has the bug, and nowhere else.
    let advisory = finding["evidence"]["advisory"].to_string();
    let (major, minor, patch) = bed.containerd_release();
    let affected = (major == 2 && minor < 2) || (major, minor) == (2, 2) && patch < 6;
    let affected = affected || (major, minor) == (2, 3) && patch < 3;
    assert_eq!(
        advisory.contains("containerd#13609"),
        affected,
        "{}: {finding:#}",
        bed.containerd_version()
    );

    // What it says happens: the next start-up cannot reserve the name.
    bed.stop_containerd();
    let logged = bed.start_containerd_expecting_exit(Duration::from_secs(60));
    let logged = bed.must(logged);
    eprintln!(
        "{TEST}: {}: containerd exited at start-up",
        bed.containerd_version()
    );
    assert!(
        logged.contains("failed to reserve sandbox name") && logged.contains(&name),
        "{}: {logged}",
        bed.containerd_version()
    );
}
