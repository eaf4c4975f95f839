//! A tenant's log directory turns no finding off (issue 43), on a real
//! containerd: kubelet's pod log directory (`<podLogsDir>/<ns>_<name>_<uid>`)
//! is writable by whoever has `/var/log` (a log shipper's `hostPath`), so a
//! tenant's `mkdir` there must not make a leaked pod cgroup vanish nor turn
//! an orphan pod directory into a `failing-sandbox`.
//!
//! Beside a live pod kubelet's word (its pod-resources API, a stand-in's:
//! `support::StandInKubeletPodResources`) lists, a pod cgroup kubelet let
//! go (`leaked-pod-cgroup`) and a pod directory whose emptyDir is still
//! mounted (`orphan-pod-dir`), both confirmed at first. Then the tenant
//! makes log directories for their uids: named after the listed pod, both
//! findings stay, unconfirmed with why (that name has several uids' log
//! directories), exit 1, nothing removed; named after a pod kubelet does
//! not list, both stay confirmed and no `failing-sandbox` appears; without
//! kubelet's word, the orphan is unconfirmed and says which log directory
//! names it.

mod support;

use serde_json::Value;
use support::{ids_of_kind as ids, TestBed};

const TEST: &str = "pod_log_dir_real";

fn unconfirmed<'a>(doc: &'a Value, kind: &str) -> Option<&'a str> {
    support::findings_of_kind(doc, kind)
        .first()
        .and_then(|f| f["evidence"]["unconfirmed"].as_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_log_directory_makes_no_leak_vanish() {
    let Some(bed) = TestBed::start(TEST).await else {
        return;
    };
    let kubelet_dir = bed.scratch("kubelet");
    std::fs::create_dir_all(kubelet_dir.join("pods")).unwrap();
    let logs = bed.scratch("pod-logs");
    let live = bed
        .kubelet_start_pod(&kubelet_dir, &logs, "live", "", 1)
        .await;
    live.sandbox.as_ref().expect("the live pod runs");
    // kubelet let this pod go: its cgroup stays (kubelet's to remove).
    let (gone, gone_uid) = bed.run_sandbox_in_pod_cgroup("gone").await;
    let removed = bed
        .stop_and_remove_pod(&gone, std::time::Duration::from_secs(30))
        .await;
    assert!(removed, "the gone pod is stopped and removed");
    // kubelet let this one go too, its emptyDir still mounted: its
    // directory stays, its log directory removed by kubelet's GC.
    let mounted = bed
        .kubelet_start_pod(&kubelet_dir, &logs, "mounted", "", 1)
        .await;
    let sandbox = mounted.sandbox.clone().expect("the mounted pod runs");
    let removed = bed
        .stop_and_remove_pod(&sandbox, std::time::Duration::from_secs(30))
        .await;
    assert!(removed, "the mounted pod's sandbox is stopped and removed");
    std::fs::remove_dir_all(&mounted.log_dir).unwrap();

    let kubelet_root = kubelet_dir.display().to_string();
    let pod_logs = logs.display().to_string();
    let cgroup_root = bed.cgroup_parent().to_string();
    let check = || {
        let output = bed.nodectl(&[
            "check",
            "--kubelet-root",
            &kubelet_root,
            "--kubelet-pod-logs",
            &pod_logs,
            "--kubelet-cgroup-root",
            &cgroup_root,
            "--settle",
            "0s",
            "--sandbox-grace",
            "0s",
            "-o",
            "json",
        ]);
        let doc = support::report(&output);
        support::assert_matches_schema(&doc);
        assert_eq!(output.status.code(), Some(1), "{doc:#}");
        doc
    };
    // Each still found: the gone pod's cgroup, the mounted pod's directory.
    let both_found = |doc: &Value| {
        let cgroups = ids(doc, "leaked-pod-cgroup");
        assert_eq!(cgroups, std::slice::from_ref(&gone_uid), "{doc:#}");
        let dirs = ids(doc, "orphan-pod-dir");
        assert_eq!(dirs, std::slice::from_ref(&mounted.uid), "{doc:#}");
    };
    // A stand-in: a real kubelet answering would destroy the gone pod's
    // cgroup at its next housekeeping (2 s) and the tenant's log directories
    // at its container GC (1 min), and would not list this pod it never ran.
    let kubelet =
        support::StandInKubeletPodResources::start(TEST, &kubelet_dir, &[("default", "live")]);
    assert_eq!(live.namespace, "default");

    // Both confirmed.
    let doc = check();
    both_found(&doc);
    assert!(ids(&doc, "failing-sandbox").is_empty(), "{doc:#}");
    assert_eq!(unconfirmed(&doc, "leaked-pod-cgroup"), None, "{doc:#}");
    assert_eq!(unconfirmed(&doc, "orphan-pod-dir"), None, "{doc:#}");

    // The tenant's log directories, named after the listed pod: both
    // stay, unconfirmed, and nothing is removed.
    let forged = |name: &str, uid: &str| {
        let dir = logs.join(format!("default_{name}_{uid}"));
        std::fs::create_dir(&dir).unwrap();
        dir
    };
    let made = [forged("live", &gone_uid), forged("live", &mounted.uid)];
    let doc = check();
    eprintln!(
        "{TEST}: {}: {:#}",
        bed.containerd_version(),
        doc["findings"]
    );
    both_found(&doc);
    for kind in ["leaked-pod-cgroup", "orphan-pod-dir"] {
        let why = unconfirmed(&doc, kind).unwrap_or_default();
        assert!(
            why.contains("default/live") && why.contains("anyone's"),
            "{kind}: {why}"
        );
    }
    let output = bed.nodectl(&[
        "leaked-pod-cgroups",
        "--kubelet-root",
        &kubelet_root,
        "--kubelet-pod-logs",
        &pod_logs,
        "--kubelet-cgroup-root",
        &cgroup_root,
        "--grace",
        "0s",
        "--remove",
        "--yes",
        "-o",
        "json",
    ]);
    let doc = support::report(&output);
    assert_eq!(output.status.code(), Some(1), "{doc:#}");
    let planned = doc["cleanups"].as_array().map_or(0, Vec::len);
    assert_eq!(planned, 0, "unconfirmed, nothing removed: {doc:#}");
    let gone_cgroup = support::findings_of_kind(&doc, "leaked-pod-cgroup")[0]["evidence"]["path"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(std::path::Path::new(&gone_cgroup).is_dir(), "{gone_cgroup}");

    // Named after a pod kubelet does not list: both confirmed, and no
    // failing sandbox is made of the orphan.
    for dir in made {
        std::fs::remove_dir(dir).unwrap();
    }
    let made = [forged("other", &gone_uid), forged("other", &mounted.uid)];
    let doc = check();
    both_found(&doc);
    assert!(ids(&doc, "failing-sandbox").is_empty(), "{doc:#}");
    assert_eq!(unconfirmed(&doc, "orphan-pod-dir"), None, "{doc:#}");

    // Without kubelet's word: the orphan stays, unconfirmed, naming the
    // log directory it was not hidden by.
    drop(kubelet);
    let doc = check();
    both_found(&doc);
    let why = unconfirmed(&doc, "orphan-pod-dir").unwrap_or_default();
    assert!(
        why.contains(&format!("default_other_{}", mounted.uid)) && why.contains("anyone's"),
        "{why}"
    );
    for dir in made {
        std::fs::remove_dir(dir).unwrap();
    }
}
