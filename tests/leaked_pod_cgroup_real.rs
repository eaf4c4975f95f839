//! `leaked-pod-cgroup` on a real containerd: two pods whose cgroup parent
//! is a kubepods-style pod cgroup under the bed's own
//! (`<bed>/kubepods/burstable/pod<uid>`, as kubelet's cgroupfs driver
//! gives it), one stopped and removed through CRI. runc removes the
//! sandbox's own cgroup but not the pod's, kubelet's to remove (the bed
//! runs no kubelet): that one is leaked. nodectl must name it with its
//! uid, driver, qos and no process, leave the live pod's alone, call
//! nothing leaked within the grace, and say where the cgroup root came
//! from.

mod support;

use serde_json::Value;
use support::TestBed;

const TEST: &str = "leaked_pod_cgroup_real";

fn leaked(doc: &Value) -> Vec<&Value> {
    doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["kind"] == "leaked-pod-cgroup")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_cgroup_left_after_its_pod_is_found_and_the_live_one_is_not() {
    let Some(bed) = TestBed::start(TEST).await else {
        return;
    };
    let (_live, live_uid) = bed.run_sandbox_in_pod_cgroup("live").await;
    let (gone, gone_uid) = bed.run_sandbox_in_pod_cgroup("gone").await;
    let removed = bed
        .stop_and_remove_pod(&gone, std::time::Duration::from_secs(30))
        .await;
    assert!(removed, "the gone pod is stopped and removed");

    let cgroup_root = bed.cgroup_parent().to_string();
    let run = |grace: &str| {
        bed.nodectl(&[
            "check",
            "--kubelet-cgroup-root",
            &cgroup_root,
            "--settle",
            "0s",
            "--sandbox-grace",
            grace,
            "-o",
            "json",
        ])
    };
    let doc = support::report(&run("10m"));
    assert!(leaked(&doc).is_empty(), "within the grace: {doc:#}");

    let output = run("0s");
    let doc = support::report(&output);
    support::assert_matches_schema(&doc);
    assert_eq!(output.status.code(), Some(1), "{doc:#}");
    let found = leaked(&doc);
    assert_eq!(found.len(), 1, "only the gone pod's cgroup: {doc:#}");
    let finding = found[0];
    eprintln!("{TEST}: {}: {finding:#}", bed.containerd_version());
    assert_eq!(finding["id"], gone_uid.as_str());
    assert_ne!(finding["id"], live_uid.as_str());
    let evidence = &finding["evidence"];
    assert_eq!(evidence["driver"], "cgroupfs");
    assert_eq!(evidence["qos"], "burstable");
    assert_eq!(evidence["procs"], 0);
    assert_eq!(evidence["cgroup_root"]["origin"], "flag");
    let path = evidence["path"].as_str().unwrap_or_default();
    assert!(
        path.ends_with(&format!("{cgroup_root}/kubepods/burstable/pod{gone_uid}")),
        "{path}"
    );
    assert!(
        std::path::Path::new(path).is_dir(),
        "a report, never a removal: {path}"
    );
}
