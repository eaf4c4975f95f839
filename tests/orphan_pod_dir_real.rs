//! `orphan-pod-dir` on a real containerd: the sandboxes are real, and
//! kubelet's pod directories are made as kubelet makes them (the test bed
//! runs no kubelet): one for a live pod, one for a pod stopped and removed
//! through CRI whose volume is still mounted (kubelet's unmount failed),
//! one for a pod long gone with nothing mounted. nodectl must name the two
//! orphans with their uid and, for the first, the mount below it; leave
//! the live pod's alone; call nothing orphaned within the grace; and say
//! where kubelet's root came from.

mod support;

use serde_json::Value;
use support::TestBed;

const TEST: &str = "orphan_pod_dir_real";

fn orphans(doc: &Value) -> Vec<&Value> {
    doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["kind"] == "orphan-pod-dir")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_directories_no_sandbox_names_are_orphans_with_their_mounts() {
    let Some(bed) = TestBed::start(TEST).await else {
        return;
    };
    let uid_of = |status: Result<k8s_cri::v1::PodSandboxStatus, String>| {
        status
            .ok()
            .and_then(|s| s.metadata)
            .map(|m| m.uid)
            .unwrap_or_default()
    };
    let live = bed.run_sandbox("live").await;
    let live_uid = uid_of(bed.sandbox_status(&live).await);
    let finished = bed.run_sandbox("finished").await;
    let finished_uid = uid_of(bed.sandbox_status(&finished).await);
    assert!(!live_uid.is_empty() && !finished_uid.is_empty());
    let removed = bed
        .stop_and_remove_pod(&finished, std::time::Duration::from_secs(30))
        .await;
    assert!(removed, "the finished pod is stopped and removed");

    let root = bed.scratch("kubelet");
    let pods = root.join("pods");
    std::fs::create_dir_all(pods.join(&live_uid).join("volumes")).unwrap();
    let volume = pods
        .join(&finished_uid)
        .join("volumes/kubernetes.io~empty-dir/data");
    std::fs::create_dir_all(&volume).unwrap();
    support::mount_tmpfs(&volume);
    std::fs::create_dir_all(pods.join("long-gone")).unwrap();

    let args = |grace: &'static str| {
        vec![
            "check".to_string(),
            "--kubelet-root".to_string(),
            root.display().to_string(),
            "--settle".to_string(),
            "0s".to_string(),
            "--sandbox-grace".to_string(),
            grace.to_string(),
            "-o".to_string(),
            "json".to_string(),
        ]
    };
    let run = |grace| {
        let args = args(grace);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        bed.nodectl(&args)
    };

    // Just made: within the grace (10 min), a pod being set up.
    let doc = support::report(&run("10m"));
    assert!(orphans(&doc).is_empty(), "within the grace: {doc:#}");

    let output = run("0s");
    let doc = support::report(&output);
    support::assert_matches_schema(&doc);
    assert_eq!(output.status.code(), Some(1), "{doc:#}");
    let found = orphans(&doc);
    let mut ids: Vec<&str> = found.iter().filter_map(|f| f["id"].as_str()).collect();
    ids.sort_unstable();
    let mut expected = vec![finished_uid.as_str(), "long-gone"];
    expected.sort_unstable();
    assert_eq!(
        ids, expected,
        "the two orphans, not the live pod's: {doc:#}"
    );
    let with_volume = found
        .iter()
        .find(|f| f["id"] == finished_uid.as_str())
        .unwrap();
    eprintln!("{TEST}: {}: {with_volume:#}", bed.containerd_version());
    let evidence = &with_volume["evidence"];
    assert_eq!(evidence["has_mounts"], true);
    assert_eq!(
        evidence["mounts"],
        serde_json::json!([volume.display().to_string()])
    );
    assert_eq!(evidence["kubelet_root"]["origin"], "flag");
    assert_eq!(evidence["kubelet_root"]["path"], root.display().to_string());
    let remedy = with_volume["remedy"].as_str().unwrap_or_default();
    assert!(remedy.contains("Never remove it by hand"), "{remedy}");
    let plain = found.iter().find(|f| f["id"] == "long-gone").unwrap();
    assert_eq!(plain["evidence"]["has_mounts"], false);
    // The bed serves no kubelet pod-resources API: kubelet's word cannot
    // be had, said so, and nothing is called safe to remove.
    for orphan in &found {
        let why = orphan["evidence"]["unconfirmed"]
            .as_str()
            .unwrap_or_default();
        assert!(why.contains("pod-resources"), "{orphan:#}");
        let remedy = orphan["remedy"].as_str().unwrap_or_default();
        assert!(!remedy.contains("safe to remove"), "{remedy}");
    }
    // Nothing was touched: a report, never a removal.
    assert!(volume.exists() && pods.join("long-gone").exists());
}
