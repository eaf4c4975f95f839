//! kubelet's own cleanup as the oracle for the teardown kinds: a real
//! kubelet (each release scripts/peers builds, on two of the four lines:
//! `support::kubelet_release_on`) is killed with SIGKILL at
//! points inside a pod's teardown, nodectl looks, kubelet is started again
//! and its housekeeping runs, and nodectl looks again.
//!
//! - While kubelet is dead, nodectl names nothing of the pod kubelet still
//!   runs beside it (nothing it would remove is something kubelet uses).
//! - Whatever nodectl called leaked in the dead kubelet's teardown is
//!   either removed by kubelet itself once it is back (printed with the
//!   time it took, per release) or still there, and then still found: what
//!   kubelet never removes is nodectl's to tell.
//! - Once kubelet is done, nothing of the torn-down pod is left and nodectl
//!   finds nothing.
//! - A third pod's sandbox is removed through CRI while kubelet is dead
//!   (an operator's `crictl rmp`, a containerd whose state was lost): its
//!   directory, cgroup and log directory are then what nodectl calls
//!   kubelet's leftovers, unconfirmed for want of kubelet's word, and
//!   nothing of them is removed by nodectl's `--remove --yes`; kubelet,
//!   back, removes them itself (printed with the time it took).

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Kubelet, TestBed, NODE_NAME};

/// nodectl's JSON report for `args`, kubelet's places by flag (other
/// tests' kubelets may run on the machine at the same time).
fn nodectl(bed: &TestBed, kubelet: &Kubelet, args: &[&str]) -> Value {
    let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    all.extend(["-o".to_string(), "json".to_string()]);
    all.extend(kubelet.nodectl_flags());
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    support::report(&bed.nodectl(&all))
}

/// No grace: everything nodectl would call leaked now.
fn look(bed: &TestBed, kubelet: &Kubelet) -> (Value, BTreeSet<(String, String)>) {
    let check = [
        "check",
        "--settle",
        "0s",
        "--sandbox-grace",
        "0s",
        "--ip-grace",
        "0s",
    ];
    let doc = nodectl(bed, kubelet, &check);
    let found = support::finding_keys(&doc).into_iter().collect();
    (doc, found)
}

/// The uid and sandbox ids CRI has for static pod `name`.
fn pod_ids(kubelet: &Kubelet, name: &str) -> (Option<String>, Vec<String>) {
    let pod = format!("{name}-{NODE_NAME}");
    let doc = kubelet.crictl(&["pods"]);
    let items: Vec<&Value> = doc["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["name"] == pod.as_str())
        .collect();
    let uid = items
        .iter()
        .find_map(|p| p["metadata"]["uid"].as_str().map(str::to_string));
    let ids = items
        .iter()
        .filter_map(|p| p["id"].as_str().map(str::to_string))
        .collect();
    (uid, ids)
}

/// What is left of the pod `uid` kubelet made: its directory, and CRI's
/// sandboxes of it.
fn left_of(kubelet: &Kubelet, name: &str, uid: &str) -> Vec<String> {
    let mut left = Vec::new();
    if kubelet.root.join("pods").join(uid).exists() {
        left.push(format!("pod directory {uid}"));
    }
    for (id, state) in kubelet.sandboxes(name) {
        left.push(format!("sandbox {id:.13} {state}"));
    }
    left
}

/// Where the teardown was when kubelet died.
fn stage(kubelet: &Kubelet, name: &str) -> String {
    format!(
        "containers {:?}, sandboxes {:?}",
        kubelet.container_states(name),
        kubelet.sandboxes(name)
    )
}

/// Where in a pod's teardown kubelet is killed.
#[derive(Clone, Copy)]
enum KillPoint {
    /// As soon as its log says it is stopping the pod's container (a grace
    /// of 1 s, `sleep` under a shell that ignores SIGTERM): inside
    /// StopContainer.
    StoppingContainer,
    /// As soon as CRI says the pod's sandbox is no longer ready: after
    /// StopPodSandbox, before its volumes, cgroup and directory go.
    SandboxStopped,
    /// As [`KillPoint::SandboxStopped`], and then the sandbox removed
    /// through CRI while kubelet is dead.
    SandboxRemovedWhileDead,
}

/// How many times kubelet's log says it is stopping a container.
fn stops_logged(kubelet: &Kubelet) -> usize {
    std::fs::read_to_string(&kubelet.log)
        .unwrap_or_default()
        .matches("Killing container with a grace period")
        .count()
}

/// One pod torn down with kubelet killed at `point`.
async fn killed_mid_teardown(bed: &TestBed, kubelet: &mut Kubelet, name: &str, point: KillPoint) {
    let test = format!("kubelet_teardown_{}", kubelet.release);
    kubelet.add_static_pod(name, &support::sleeper_manifest(name));
    let running = kubelet.wait_for(Duration::from_secs(90), |k| {
        k.container_states(name) == [("sleep".to_string(), "CONTAINER_RUNNING".to_string())]
    });
    if !running {
        kubelet.fail(&format!("{name} never ran: {}", stage(kubelet, name)));
    }
    let (Some(uid), _) = pod_ids(kubelet, name) else {
        kubelet.fail(&format!("{name}: CRI names no uid"));
    };
    let (Some(live_uid), live_sandboxes) = pod_ids(kubelet, "live") else {
        kubelet.fail("the live pod: CRI names no uid");
    };

    let stops = stops_logged(kubelet);
    kubelet.remove_static_pod(name);
    let removed = Instant::now();
    let reached = match point {
        KillPoint::StoppingContainer => {
            poll(Duration::from_secs(60), || stops_logged(kubelet) > stops)
        }
        KillPoint::SandboxStopped | KillPoint::SandboxRemovedWhileDead => {
            poll(Duration::from_secs(60), || {
                let sandboxes = kubelet.sandboxes(name);
                sandboxes.iter().all(|(_, state)| state != "SANDBOX_READY")
            })
        }
    };
    assert!(reached, "{test}: {name}'s teardown never got there");
    kubelet.kill_hard();
    let at = stage(kubelet, name);
    let dead_for = removed.elapsed();
    if matches!(point, KillPoint::SandboxRemovedWhileDead) {
        for (id, _) in kubelet.sandboxes(name) {
            assert!(
                bed.stop_and_remove_pod(&id, Duration::from_secs(30)).await,
                "{test}: {name}: CRI did not remove sandbox {id}"
            );
        }
    }

    // kubelet dead: nothing of the live pod is nodectl's to call leaked.
    let (doc, while_dead) = look(bed, kubelet);
    let live: Vec<&(String, String)> = while_dead
        .iter()
        .filter(|(_, id)| {
            id.contains(live_uid.as_str()) || live_sandboxes.iter().any(|s| id.starts_with(s))
        })
        .collect();
    assert!(
        live.is_empty(),
        "{test}: {name}: nodectl named the live pod while kubelet was dead: {live:?}\n{doc:#}"
    );
    if matches!(point, KillPoint::SandboxRemovedWhileDead) {
        // The pod's directory, no sandbox naming it: kubelet's to clean
        // up, named by nodectl, never confirmed without kubelet's word.
        let named: Vec<&Value> = doc["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| f["id"] == uid.as_str())
            .collect();
        assert!(
            !named.is_empty(),
            "{test}: {name}: nodectl named nothing of the pod whose sandbox went while kubelet \
             was dead: {doc:#}"
        );
        for finding in &named {
            if finding["kind"] == "orphan-pod-dir" {
                assert!(
                    finding["evidence"]["unconfirmed"].is_string(),
                    "{test}: kubelet is dead, its word cannot be had: {finding:#}"
                );
            }
        }
        // Told to remove kubelet's leftovers, nodectl removes none of them:
        // unconfirmed, they may be kubelet's still.
        let kept = |k: &Kubelet| {
            (
                k.root.join("pods").join(&uid).is_dir(),
                k.pod_cgroups(&uid).len(),
            )
        };
        let before = kept(kubelet);
        let remove = ["leaked-pod-cgroups", "--grace", "0s", "--remove", "--yes"];
        let removal = nodectl(bed, kubelet, &remove);
        assert_eq!(
            (
                removal["cleanups"].as_array().map_or(0, Vec::len),
                kept(kubelet)
            ),
            (0, before),
            "{test}: {name}: nodectl removed some of a pod kubelet had not let go: {removal:#}"
        );
        eprintln!(
            "{test}: {name}: its sandbox removed while kubelet was dead, nodectl named {:?} and \
             removed nothing (pod directory, pod cgroups: {before:?})",
            named
                .iter()
                .map(|f| f["kind"].as_str().unwrap_or_default())
                .collect::<Vec<_>>()
        );
    }

    // kubelet back: its housekeeping and container GC clean the pod up.
    kubelet.restart();
    let back = Instant::now();
    let cleaned = kubelet.wait_for(Duration::from_secs(180), |k| {
        left_of(k, name, &uid).is_empty()
    });
    let took = back.elapsed();
    // What containerd does once kubelet has removed the sandbox (its shim
    // told to shut down and exiting) can outlast that by a moment on a busy
    // machine: nodectl looks until it finds nothing, for at most
    // SHIM_EXIT. A leak holds still, past it.
    let settled = Instant::now();
    let (mut doc, mut after_cleanup) = look(bed, kubelet);
    while !after_cleanup.is_empty() && settled.elapsed() < SHIM_EXIT {
        std::thread::sleep(Duration::from_secs(1));
        (doc, after_cleanup) = look(bed, kubelet);
    }
    if settled.elapsed() > Duration::from_secs(2) {
        eprintln!(
            "{test}: {name}: nodectl's findings after kubelet's cleanup took {:?} to clear",
            settled.elapsed()
        );
    }
    let left = left_of(kubelet, name, &uid);
    eprintln!(
        "{test}: {name} killed {dead_for:?} into its teardown ({at}); while kubelet was dead \
         nodectl found {while_dead:?}; kubelet, back, {} in {took:?}; then nodectl found \
         {after_cleanup:?}",
        match cleaned {
            true => "removed all of it".to_string(),
            false => format!("left {left:?}"),
        }
    );
    for key in &while_dead {
        let state = match after_cleanup.contains(key) {
            true => "never removed by kubelet".to_string(),
            false => format!("removed by kubelet within {took:?}"),
        };
        eprintln!("{test}: {name}: {} {}: {state}", key.0, key.1);
    }
    assert!(
        cleaned,
        "{test}: kubelet {} left {left:?} of {name} after {took:?}; nodectl: {after_cleanup:?}",
        kubelet.release
    );
    // What is still found then is what kubelet never removes, and must be
    // so: a shim still running whose sandbox CRI no longer lists (a leak
    // of containerd's, nodectl's to tell). Anything else is a false finding.
    let sandboxes: Vec<String> = kubelet
        .sandboxes(name)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    for finding in support::findings_of_kind(&doc, "leaked-shim") {
        let (pid, id) = (
            finding["evidence"]["shim_pid"].as_i64(),
            finding["id"].as_str(),
        );
        let alive = pid.is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists());
        assert!(
            alive && id.is_some_and(|id| !sandboxes.iter().any(|s| s == id)),
            "{test}: {name}: a leaked shim that is not one: {finding:#}"
        );
        eprintln!(
            "{test}: {name}: containerd {} left shim {} (pid {pid:?}) after kubelet {} removed its sandbox: never removed by kubelet",
            bed.containerd_version(),
            finding["id"],
            kubelet.release
        );
        after_cleanup.remove(&(
            "leaked-shim".to_string(),
            id.unwrap_or_default().to_string(),
        ));
    }
    assert_eq!(
        after_cleanup,
        BTreeSet::new(),
        "{test}: {name}: nothing else is left after kubelet's cleanup: {doc:#}"
    );
}

/// How long after kubelet's cleanup what containerd still does (a sandbox's
/// shim exiting after its Shutdown) may take before nodectl finds nothing.
const SHIM_EXIT: Duration = Duration::from_secs(30);

/// Polls `done` every 20 ms for at most `limit`; false when it never held.
fn poll(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

async fn killed_mid_teardown_on(release: &str) {
    let test = format!("kubelet_teardown_{release}");
    let Some(bed) = TestBed::start_networked(&test).await else {
        return;
    };
    let Some(mut kubelet) = Kubelet::start(&bed, &test, release) else {
        return;
    };
    // A pod kubelet keeps running through it all.
    kubelet.add_static_pod("live", &support::sleeper_manifest("live"));
    let live_runs = |k: &Kubelet| {
        k.container_states("live") == [("sleep".to_string(), "CONTAINER_RUNNING".to_string())]
    };
    if !kubelet.wait_for(Duration::from_secs(90), live_runs) {
        kubelet.fail("the live pod never ran");
    }
    killed_mid_teardown(&bed, &mut kubelet, "early", KillPoint::StoppingContainer).await;
    killed_mid_teardown(&bed, &mut kubelet, "late", KillPoint::SandboxStopped).await;
    killed_mid_teardown(
        &bed,
        &mut kubelet,
        "gone",
        KillPoint::SandboxRemovedWhileDead,
    )
    .await;
    assert!(
        live_runs(&kubelet),
        "{test}: the live pod kept running: {:?}",
        kubelet.container_states("live")
    );
}

/// Each kubelet release on two of the four lines
/// (`support::kubelet_release_on`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_teardown_by_the_line_s_kubelet() {
    killed_mid_teardown_on(support::kubelet_release_here()).await;
}
