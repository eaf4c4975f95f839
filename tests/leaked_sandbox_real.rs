//! `leaked-sandbox` on a real containerd with real CNI (the networked test
//! bed): containerd killed (SIGKILL, no deferred clean-up) while a pod's
//! CNI ADD runs, after bridge and host-local gave it its veth and address,
//! then started again. Every line writes the sandbox's record before its
//! network, so every line lists the sandbox NotReady after the restart,
//! with its network namespace still mounted and its address still held
//! (asserted here per line). nodectl must report it with its pod and
//! address past the grace, and nothing within it; `leaked-sandboxes
//! --remove` plans, says "already gone" of one removed (as kubelet would)
//! between its scan and its act, stops and removes the other through CRI,
//! which runs its CNI DEL: the namespace and the address are freed, and
//! the node whose range was used up starts a pod again.

mod support;

use std::path::Path;

use serde_json::Value;
use support::TestBed;

const TEST: &str = "leaked_sandbox_real";

fn leaked_sandboxes(doc: &Value) -> Vec<&Value> {
    doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["kind"] == "leaked-sandbox")
        .collect()
}

/// Whether the mount table has an nsfs mount at `path`.
fn netns_mounted(path: &Path) -> bool {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let wanted = path.display().to_string();
    table.lines().any(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        fields.get(4) == Some(&wanted.as_str()) && line.contains(" - nsfs ")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_left_by_a_crash_in_cni_add_is_found_and_removed_through_cri() {
    let Some(mut bed) = TestBed::start_networked(TEST).await else {
        return;
    };
    let healthy = bed.run_sandbox("healthy").await;
    let crashed = bed.crash_containerd_in_cni_add("crashed").await;
    let version = bed.containerd_version().to_string();

    // What the crash left, on every line: the sandbox listed NotReady,
    // its network namespace mounted, its address held.
    let status = bed.sandbox_status(&crashed.sandbox_id).await;
    let state = status.as_ref().map(|s| s.state);
    assert_eq!(
        state,
        Ok(1),
        "{version}: NotReady after the restart: {status:?}"
    );
    assert!(
        netns_mounted(&crashed.netns),
        "{version}: the netns stays: {}",
        crashed.netns.display()
    );
    let held = bed
        .ip_files()
        .into_iter()
        .find(|f| f.container_id == crashed.sandbox_id)
        .unwrap_or_else(|| panic!("{version}: no address held for the crashed sandbox"));

    // Created a moment ago: within the grace (10 min) it is a pod starting.
    let output = bed.nodectl(&["check", "--settle", "0s", "-o", "json"]);
    let doc = support::report(&output);
    assert!(
        leaked_sandboxes(&doc).is_empty(),
        "within the grace: {doc:#}"
    );

    let output = bed.nodectl(&[
        "check",
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
    let found = leaked_sandboxes(&doc);
    assert_eq!(found.len(), 1, "only the crashed sandbox: {doc:#}");
    let finding = found[0];
    eprintln!("{TEST}: {version}: the finding:\n{finding:#}");
    assert_eq!(finding["id"], crashed.sandbox_id);
    let evidence = &finding["evidence"];
    assert_eq!(evidence["pod_name"], "crashed");
    assert_eq!(evidence["state"], "not-ready");
    let address = format!("{} ({})", held.ip, bed.cni().network);
    assert_eq!(evidence["addresses"], serde_json::json!([address]));
    let summary = finding["summary"].as_str().unwrap_or_default();
    assert!(summary.contains(&held.ip.to_string()), "{summary}");
    assert!(
        !found.iter().any(|f| f["id"] == healthy.as_str()),
        "the ready pod is not leaked"
    );
    // Its record is containerd's own on every line (1.x: the sandbox
    // container; 2.x: the sandbox store entry, the pause container never
    // created), so CRI and containerd do not drift over it.
    assert!(
        !doc["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|f| f["kind"] == "cri-drift" && f["id"] == crashed.sandbox_id.as_str()),
        "{doc:#}"
    );
    // Known to CRI, its address is not leaked-ip's.
    assert!(
        !doc["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|f| f["kind"] == "leaked-ip"),
        "{doc:#}"
    );

    // A second crash, the rest of the /29 taken, and the next pod starved.
    let second = bed.crash_containerd_in_cni_add("crashed-too").await;
    for n in 0..2 {
        bed.run_sandbox(&format!("filler-{n}")).await;
    }
    let starved = bed.try_run_sandbox("starved").await;
    let error = format!("{:?}", starved.expect_err("the range is used up"));
    assert!(error.contains(support::EXHAUSTED), "{error}");

    // The plan touches nothing.
    let plan = [
        "leaked-sandboxes",
        "--grace",
        "0s",
        "--remove",
        "-o",
        "json",
    ];
    let output = bed.nodectl(&plan);
    let doc = support::report(&output);
    assert_eq!(output.status.code(), Some(1), "{doc:#}");
    let outcomes: Vec<&Value> = doc["cleanups"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| &c["outcome"])
        .collect();
    assert_eq!(outcomes, ["would-remove", "would-remove"], "{doc:#}");
    assert!(bed.listed_sandboxes().await.contains(&crashed.sandbox_id));

    // Between the scan and the act, the second is removed as kubelet
    // would: already gone; the first is stopped and removed.
    let pause = bed.scratch("pause");
    let child = support::spawn_paused_before_act(
        &[
            "leaked-sandboxes",
            "--grace",
            "0s",
            "--remove",
            "--yes",
            "-o",
            "json",
        ],
        [bed.root(), bed.state(), bed.address(), bed.config_path()],
        &pause,
    );
    bed.stop_pod(&second.sandbox_id)
        .await
        .expect("StopPodSandbox");
    bed.remove_pod(&second.sandbox_id)
        .await
        .expect("RemovePodSandbox");
    std::fs::remove_file(&pause).unwrap();
    let output = child.wait_with_output().unwrap();
    let doc = support::report(&output);
    eprintln!("{TEST}: {version}: removed: {:#}", doc["cleanups"]);
    let cleanups = doc["cleanups"].as_array().cloned().unwrap_or_default();
    let row = |id: &str| {
        cleanups
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no cleanup of {id}: {doc:#}"))
            .clone()
    };
    assert_eq!(row(&crashed.sandbox_id)["action"], "remove-sandbox");
    assert_eq!(row(&crashed.sandbox_id)["outcome"], "removed", "{doc:#}");
    assert_eq!(
        row(&crashed.sandbox_id)["path"],
        "default/crashed",
        "{doc:#}"
    );
    assert_eq!(
        row(&second.sandbox_id)["outcome"],
        "already-gone",
        "{doc:#}"
    );

    // Its network was torn down: namespace unmounted, address released,
    // and CRI no longer lists it.
    assert!(!bed.listed_sandboxes().await.contains(&crashed.sandbox_id));
    assert!(
        !netns_mounted(&crashed.netns),
        "{}",
        crashed.netns.display()
    );
    assert!(
        !bed.ip_files()
            .iter()
            .any(|f| f.container_id == crashed.sandbox_id),
        "the address is released"
    );
    let next = bed.run_sandbox("after-removal").await;
    assert!(
        bed.ip_files().iter().any(|f| f.container_id == next),
        "the node that was out of addresses gives a new pod one"
    );
    let output = bed.nodectl(&[
        "check",
        "--settle",
        "0s",
        "--sandbox-grace",
        "0s",
        "-o",
        "json",
    ]);
    let doc = support::report(&output);
    assert!(
        leaked_sandboxes(&doc).is_empty(),
        "nothing leaked any more: {doc:#}"
    );
}

/// Issue 29's false-positive guard: twenty live pods, each with a running
/// container, and two more stopped and removed as kubelet does, on a /27.
/// With every grace at 0, `check` calls nothing of theirs leaked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_node_with_twenty_pods_reports_nothing() {
    let Some(bed) = TestBed::start_networked_on(TEST, "10.251.0.0/27").await else {
        return;
    };
    let sleeping = ["/bin/busybox", "sleep", "3600"];
    let mut live = Vec::new();
    for n in 0..20 {
        live.push(bed.run_pod(&format!("live-{n}"), "app", &sleeping).await);
    }
    for n in 0..2 {
        let gone = bed.run_pod(&format!("gone-{n}"), "app", &sleeping).await;
        let removed = bed
            .stop_and_remove_pod(&gone.sandbox_id, std::time::Duration::from_secs(30))
            .await;
        assert!(removed, "gone-{n} stopped and removed");
    }
    assert_eq!(bed.ip_files().len(), 20, "one address per live pod");

    let output = bed.nodectl(&[
        "check",
        "--settle",
        "0s",
        "--ip-grace",
        "0s",
        "--sandbox-grace",
        "0s",
        // A loaded test machine may answer ListContainers slowly: that
        // is cri-slow's business, not this test's.
        "--slow",
        "1m",
        "-o",
        "json",
    ]);
    let doc = support::report(&output);
    let kinds: Vec<&Value> = doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| &f["kind"])
        .collect();
    assert!(kinds.is_empty(), "a healthy node: {doc:#}");
    assert_eq!(output.status.code(), Some(0), "{doc:#}");
    eprintln!(
        "{TEST}: {}: {} live pods, nothing reported",
        bed.containerd_version(),
        live.len()
    );
}
