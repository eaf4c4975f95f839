//! The networked test bed (real CNI: bridge + host-local on a /29, in a
//! network namespace of containerd's own) and the leaked pod IP it
//! reproduces through containerd's own code paths, per line.
//!
//! What containerd does when the network's DEL fails, per line (read in
//! upstream's sources at each tag):
//!
//! - RunPodSandbox whose network setup failed after the bridge got an
//!   address (a chained plugin's binary missing, containerd#12130): the
//!   deferred `teardownPodNetwork` fails too (libcni's DEL stops at the
//!   missing plugin, before the bridge's DEL).
//!   - 1.6 and 1.7 (`pkg/cri/server/sandbox_run.go`) keep that error as
//!     `cleanupErr`: the sandbox stays in CRI's store (NOTREADY) with its
//!     netns. Then `stopPodSandbox` (`sandbox_stop.go`) differs: 1.6.20
//!     returns the DEL's error, so StopPodSandbox and RemovePodSandbox fail
//!     until the plugin is back and then release the address (stuck, not
//!     leaked); 1.7.34 logs and ignores it because `sandbox.CNIResult` is
//!     nil ("the network setup never completed"; 1.7.31's f854c1890, which
//!     made it call DEL at all), removes the netns, and RemovePodSandbox
//!     removes the sandbox: leaked once kubelet cleans the pod up.
//!   - 2.0 and 2.3 (`internal/cri/server/sandbox_run.go`, "ignoring failed
//!     to destroy networks when we failed to setup networks", same nil
//!     `CNIResult`) drop the error in RunPodSandbox itself, deleting the
//!     sandbox and its netns: leaked at once.
//! - StopPodSandbox whose DEL fails with an error saying "not found":
//!   go-cni's `Remove` (every line) takes it for "already deleted", so
//!   stop and remove succeed while the bridge's DEL never ran — leaked on
//!   every line ([`TestBed::leak_pod_ip`]).
//! - RunPodSandbox whose chained plugin's ADD exits 1 (its DEL passing):
//!   the deferred teardown releases the address and CRI lists no sandbox on
//!   every line. Ten static pods under a real kubelet (each release
//!   scripts/peers builds) stay Pending behind it, kubelet retrying each
//!   and listing it in its pod-resources API: each is kubelet's
//!   (`failing-sandbox`), never a leaked cgroup nor an orphan directory,
//!   and nothing of it is removed.

mod support;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_cri::v1::{ContainerState, PodSandboxState};
use serde_json::Value;
use support::{Kubelet, Line, TestBed, CHAINED, EXHAUSTED, IMAGE, NODE_NAME, POD_ADDRESSES};

/// The address host-local hands out n-th (from 0) on a fresh bed.
fn nth_address(n: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 251, 0, 2 + n as u8)
}

/// The entries of a dir (pod netns mounts), sorted.
/// The pods' network namespaces in CRI's netns dir: its entries but the
/// bed's neighbours' (see `support::Neighbours`).
fn pod_netns(bed: &TestBed) -> Vec<String> {
    let theirs = bed.neighbours().netns_names();
    entries(&bed.netns_dir())
        .into_iter()
        .filter(|name| !theirs.contains(name))
        .collect()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_get_addresses_until_the_range_is_used_up_and_give_them_back() {
    let test = "pods_get_addresses_until_the_range_is_used_up_and_give_them_back";
    let Some(bed) = TestBed::start_networked(test).await else {
        return;
    };
    // One pod with a container (run_pod on a networked bed), the rest bare
    // sandboxes: the range holds five.
    let pod = bed
        .run_pod("net-0", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    assert!(
        bed.wait_container_state(
            &pod.container_id,
            ContainerState::ContainerRunning,
            Duration::from_secs(30)
        )
        .await,
        "the networked pod's container runs"
    );
    let mut sandboxes = vec![pod.sandbox_id.clone()];
    for n in 1..POD_ADDRESSES {
        sandboxes.push(bed.run_sandbox(&format!("net-{n}")).await);
    }
    let files = bed.ip_files();
    let held: Vec<(Ipv4Addr, &str)> = files
        .iter()
        .map(|f| (f.ip, f.container_id.as_str()))
        .collect();
    let expected: Vec<(Ipv4Addr, &str)> = sandboxes
        .iter()
        .enumerate()
        .map(|(n, id)| (nth_address(n), id.as_str()))
        .collect();
    assert_eq!(held, expected, "host-local's files, one per sandbox");
    for (n, id) in sandboxes.iter().enumerate() {
        let status = bed.sandbox_status(id).await.expect("PodSandboxStatus");
        let ip = status.network.map(|n| n.ip).unwrap_or_default();
        assert_eq!(ip, nth_address(n).to_string(), "CRI's IP of {id}");
    }
    // The bridge is in containerd's network namespace, not the machine's.
    let devices = |pid: String| std::fs::read_to_string(format!("/proc/{pid}/net/dev")).unwrap();
    let has_bridge = |devices: String| devices.contains("nodectl0:");
    assert!(has_bridge(devices(bed.containerd_pid().to_string())));
    assert!(!has_bridge(devices("self".to_string())), "no bridge here");
    assert_eq!(
        pod_netns(&bed).len(),
        POD_ADDRESSES,
        "one netns mount per pod under {}",
        bed.netns_dir().display()
    );

    // The sixth: host-local's own error, through the bridge and CRI; the
    // failed sandbox is gone on every line (the DEL of its cleanup works).
    let failed = bed
        .try_run_sandbox("net-full")
        .await
        .expect_err("a sixth pod in a /29");
    assert!(failed.message.contains(EXHAUSTED), "{failed:?}");
    assert!(
        failed.message.contains("failed to allocate for range 0"),
        "{failed:?}"
    );
    let id = failed.sandbox_id.expect("the error names the sandbox");
    assert!(!bed.listed_sandboxes().await.contains(&id));
    assert_eq!(bed.ip_files().len(), POD_ADDRESSES);

    for id in &sandboxes {
        bed.stop_pod(id).await.expect("StopPodSandbox");
        bed.remove_pod(id).await.expect("RemovePodSandbox");
    }
    assert_eq!(bed.ip_files(), vec![], "every address released");
    assert_eq!(pod_netns(&bed), Vec::<String>::new());
    assert_eq!(bed.listed_sandboxes().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_chained_plugin_leaks_the_address_but_on_1_6() {
    let test = "missing_chained_plugin_leaks_the_address_but_on_1_6";
    let Some(bed) = TestBed::start_networked(test).await else {
        return;
    };
    bed.remove_chained_plugin();
    let failed = bed
        .try_run_sandbox("chained-missing")
        .await
        .expect_err("RunPodSandbox without the chained plugin");
    let missing = format!("failed to find plugin \\\"{CHAINED}\\\"");
    assert!(failed.message.contains(&missing), "{failed:?}");
    assert!(
        failed
            .message
            .contains("failed to setup network for sandbox"),
        "{failed:?}"
    );
    let id = failed
        .sandbox_id
        .clone()
        .expect("the error names the sandbox");
    // The bridge's ADD ran before the chained plugin's failed: the address
    // is taken, whatever the line does next.
    let files = bed.ip_files();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(
        (files[0].ip, files[0].container_id.as_str()),
        (nth_address(0), id.as_str())
    );

    match bed.line() {
        Line::V1_6 | Line::V1_7 => {
            // The failed cleanup keeps the sandbox (NOTREADY) and its netns.
            assert!(bed.listed_sandboxes().await.contains(&id));
            let status = bed.sandbox_status(&id).await.expect("PodSandboxStatus");
            assert_eq!(status.state, PodSandboxState::SandboxNotready as i32);
            assert_eq!(pod_netns(&bed).len(), 1);
        }
        Line::V2_0 | Line::V2_3 => {}
    }
    match bed.line() {
        Line::V1_6 => {
            // Stop and remove fail on the same DEL: held, by a listed
            // sandbox, until the plugin is back.
            let stop = bed.stop_pod(&id).await.expect_err("StopPodSandbox");
            assert!(stop.contains("failed to destroy network"), "{stop}");
            assert!(stop.contains(&missing), "{stop}");
            let remove = bed.remove_pod(&id).await.expect_err("RemovePodSandbox");
            assert!(remove.contains(&missing), "{remove}");
            assert!(bed.listed_sandboxes().await.contains(&id));
            assert_eq!(bed.ip_files(), files);
            bed.clear_cni_faults();
            bed.stop_pod(&id).await.expect("StopPodSandbox");
            bed.remove_pod(&id).await.expect("RemovePodSandbox");
            assert_eq!(bed.ip_files(), vec![], "released once DEL works");
        }
        Line::V1_7 => {
            // Stop ignores the DEL's error (no CNI result): kubelet's
            // stop + remove go through, and the address stays.
            bed.stop_pod(&id).await.expect("StopPodSandbox");
            bed.remove_pod(&id).await.expect("RemovePodSandbox");
            assert!(!bed.listed_sandboxes().await.contains(&id));
            assert_eq!(pod_netns(&bed), Vec::<String>::new());
            bed.clear_cni_faults();
            assert_eq!(bed.ip_files(), files, "leaked: no sandbox {id}");
        }
        Line::V2_0 | Line::V2_3 => {
            // The cleanup's DEL error is dropped (no CNI result yet): the
            // sandbox and its netns are gone, the address is not.
            assert!(!bed.listed_sandboxes().await.contains(&id));
            assert_eq!(pod_netns(&bed), Vec::<String>::new());
            bed.clear_cni_faults();
            assert_eq!(bed.ip_files(), files, "leaked: no sandbox {id}");
            // Nothing will DEL it again: the next pod gets the next address.
            let next = bed.run_sandbox("after-leak").await;
            let ips: Vec<Ipv4Addr> = bed
                .ip_files()
                .into_iter()
                .filter(|f| f.container_id == next)
                .map(|f| f.ip)
                .collect();
            assert_eq!(ips, vec![nth_address(1)]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn del_failing_with_not_found_leaks_the_address_on_every_line() {
    let test = "del_failing_with_not_found_leaks_the_address_on_every_line";
    let Some(mut bed) = TestBed::start_networked(test).await else {
        return;
    };
    let healthy = bed.run_sandbox("healthy").await;
    let leaked = bed.leak_pod_ip("leaked").await;
    assert_eq!(leaked.ip, nth_address(1));
    assert_eq!(
        leaked.file.file_name().and_then(|n| n.to_str()),
        Some("10.251.0.3")
    );
    // The end state the leaked-ip finding is about: an address whose
    // sandbox CRI does not list, beside one whose sandbox it does.
    let listed = bed.listed_sandboxes().await;
    assert_eq!(listed, vec![healthy.clone()]);
    let owners: Vec<String> = bed.ip_files().into_iter().map(|f| f.container_id).collect();
    assert_eq!(owners, vec![healthy.clone(), leaked.sandbox_id.clone()]);
    // The netns went with the sandbox: only the address is left.
    assert_eq!(pod_netns(&bed).len(), 1);

    // A restarted containerd (back in the bed's network namespace) knows
    // no more of it; the healthy pod keeps its address and the next pod
    // gets the next one, over the same bridge.
    let netns = |pid: i32| std::fs::read_link(format!("/proc/{pid}/ns/net")).ok();
    let before = netns(bed.containerd_pid());
    assert_ne!(
        before,
        netns(std::process::id() as i32),
        "containerd's own netns"
    );
    bed.restart_containerd().await;
    assert_eq!(netns(bed.containerd_pid()), before, "the same netns again");
    assert_eq!(bed.listed_sandboxes().await, vec![healthy.clone()]);
    let status = bed
        .sandbox_status(&healthy)
        .await
        .expect("PodSandboxStatus");
    let ip = status.network.map(|n| n.ip).unwrap_or_default();
    assert_eq!(ip, nth_address(0).to_string());
    let next = bed.run_sandbox("after-restart").await;
    let owners: Vec<(Ipv4Addr, String)> = bed
        .ip_files()
        .into_iter()
        .map(|f| (f.ip, f.container_id))
        .collect();
    let expected = vec![
        (nth_address(0), healthy),
        (nth_address(1), leaked.sandbox_id),
        (nth_address(2), next),
    ];
    assert_eq!(owners, expected);
}

/// What the chained plugin's ADD fails with behind the Pending pods.
const REFUSED: &str = "nodectl-chained: ADD refused by the test";

/// How many pods are Pending at once (issue 37 asked for ten): kubelet
/// syncs each in a worker of its own, so their RunPodSandbox calls and
/// retries overlap, and nodectl must tie each one's directory, log
/// directory, cgroup and emptyDir to that pod and no other (one pod alone
/// is `kubelet_pending_real`). Ten cost little more than one: the workers
/// run side by side and each retries 10 to 15 s after its failure.
const PENDING: usize = 10;

/// host-local's range under them: every pod's ADD can be in flight at once
/// (the bridge's ADD takes an address, the chained plugin then refuses,
/// the deferred teardown's DEL gives it back), so the range holds all ten
/// (13 addresses) where the bed's /29 holds five and a sixth would fail on
/// host-local's exhaustion, not on the refusal.
const PENDING_SUBNET: &str = "10.251.0.0/28";

/// A static pod of busybox running `sleep`, with an emptyDir of medium
/// Memory (a tmpfs kubelet mounts below the pod's directory before it asks
/// for the pod's sandbox).
fn pending_manifest(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n\
         spec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: sleep\n    \
         image: {IMAGE}\n    imagePullPolicy: Never\n    \
         command: [\"/bin/sh\", \"-c\", \"sleep 3600\"]\n    \
         volumeMounts:\n    - name: cache\n      mountPath: /cache\n  \
         volumes:\n  - name: cache\n    emptyDir:\n      medium: Memory\n"
    )
}

/// kubelet's lines in `log` saying static pod `name`'s sandbox failed.
fn refusals<'a>(log: &'a str, name: &str) -> Vec<&'a str> {
    let pod = format!("pod=\"default/{name}-{NODE_NAME}\"");
    log.lines()
        .filter(|line| line.contains("\"CreatePodSandbox for pod failed\"") && line.contains(&pod))
        .collect()
}

/// A Pending pod as kubelet keeps it: what nodectl must call kubelet's.
#[derive(Debug)]
struct PendingPod {
    name: String,
    uid: String,
    dir: PathBuf,
    volume: PathBuf,
    log_dir: PathBuf,
    cgroups: Vec<PathBuf>,
}

impl PendingPod {
    /// Static pod `name` under `kubelet`, found by its log directory
    /// (`default_<name>-<node>_<uid>`, made before each RunPodSandbox).
    fn of(kubelet: &Kubelet, name: &str) -> PendingPod {
        let prefix = format!("default_{name}-{NODE_NAME}_");
        let uids: Vec<String> = entries(&kubelet.pod_logs)
            .into_iter()
            .filter_map(|entry| entry.strip_prefix(&prefix).map(str::to_string))
            .collect();
        let [uid] = uids.as_slice() else {
            kubelet.fail(&format!("one log directory of {name} expected: {uids:?}"));
        };
        let dir = kubelet.root.join("pods").join(uid);
        PendingPod {
            name: name.to_string(),
            uid: uid.clone(),
            volume: dir.join("volumes/kubernetes.io~empty-dir/cache"),
            dir,
            log_dir: kubelet.pod_logs.join(format!("{prefix}{uid}")),
            cgroups: kubelet.pod_cgroups(uid),
        }
    }

    /// Everything kubelet keeps of it is there: its directory, its
    /// emptyDir mounted (a tmpfs), its log directory, its cgroup in every
    /// hierarchy.
    fn kept(&self) -> bool {
        self.dir.is_dir()
            && support::mounts_below(&self.volume) == [self.volume.clone()]
            && self.log_dir.is_dir()
            && !self.cgroups.is_empty()
            && self.cgroups.iter().all(|c| c.is_dir())
    }
}

/// Ten pods Pending behind a failing CNI ADD under a real kubelet (static
/// pods, standalone): kubelet retries each one's sandbox, CRI lists none
/// (the deferred teardown releases the address and removes the sandbox on
/// every line), and kubelet keeps each pod's cgroup, directory, emptyDir
/// and log directory and lists the pods in its pod-resources API. nodectl
/// calls none of it leaked nor an orphan, and each pod a failing-sandbox;
/// `leaked-pod-cgroups --remove --yes` removes nothing; with CRI's network
/// not ready, each failing-sandbox names it in CRI's own words.
async fn pending_pods_behind_a_failing_add_are_kubelets(release: &str) {
    let test = format!("cni_pending_{release}");
    let Some(bed) = TestBed::start_networked_on(&test, PENDING_SUBNET).await else {
        return;
    };
    bed.fail_cni_add(REFUSED);
    let Some(kubelet) = Kubelet::start(&bed, &test, release) else {
        return;
    };
    let start = Instant::now();
    let names: Vec<String> = (0..PENDING).map(|n| format!("pending-{n}")).collect();
    for name in &names {
        kubelet.add_static_pod(name, &pending_manifest(name));
    }
    // Each pod's sandbox refused twice at least: kubelet has retried it.
    // Where the test called RunPodSandbox twice a pod, kubelet decides how
    // often: its pod worker syncs again 10 to 15 s after each failure, so
    // by the time the last pod's second refusal is logged an early pod may
    // have had a third, and every refusal is checked below, not a count.
    let counts = |k: &Kubelet| -> Vec<usize> {
        let log = std::fs::read_to_string(&k.log).unwrap_or_default();
        names.iter().map(|n| refusals(&log, n).len()).collect()
    };
    if !kubelet.wait_for(Duration::from_secs(90), |k| {
        counts(k).iter().all(|&n| n >= 2)
    }) {
        kubelet.fail(&format!(
            "kubelet never retried every pod's sandbox behind the failing ADD: {:?} refusals",
            counts(&kubelet)
        ));
    }
    // Each refusal is the chained plugin's, through CRI: no other failure
    // (host-local's range, a missing image) keeps a pod Pending here.
    let log = std::fs::read_to_string(&kubelet.log).expect("kubelet's log");
    for name in &names {
        for line in refusals(&log, name) {
            assert!(line.contains(REFUSED), "{name}: {line}");
            assert!(
                line.contains("failed to setup network for sandbox"),
                "{name}: {line}"
            );
        }
    }
    eprintln!(
        "{test}: containerd {}: {:?} refusals after {:?}; kubelet: {}",
        bed.containerd_version(),
        counts(&kubelet),
        start.elapsed(),
        refusals(&log, &names[0])[0]
    );
    let pods: Vec<PendingPod> = names.iter().map(|n| PendingPod::of(&kubelet, n)).collect();
    let mut uids: Vec<String> = pods.iter().map(|p| p.uid.clone()).collect();
    uids.sort();
    assert_eq!(
        entries(&kubelet.root.join("pods")),
        uids,
        "a directory per pod"
    );
    for pod in &pods {
        assert!(pod.kept(), "kubelet keeps a Pending pod's things: {pod:?}");
    }
    let pod_names: Vec<String> = names.iter().map(|n| format!("{n}-{NODE_NAME}")).collect();
    let listed: Vec<Value> = kubelet.crictl(&["pods"])["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| {
            p["metadata"]["name"]
                .as_str()
                .is_some_and(|n| pod_names.iter().any(|name| name == n))
        })
        .cloned()
        .collect();
    assert_eq!(listed, Vec::<Value>::new(), "CRI keeps no sandbox of them");

    // nodectl's view: each pod a failing-sandbox, its volume named; nothing
    // leaked, nothing an orphan.
    let nodectl = |args: &[&str]| -> (Option<i32>, Value) {
        let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        all.extend(["-o".to_string(), "json".to_string()]);
        all.extend(kubelet.nodectl_flags());
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let output = bed.nodectl(&all);
        (output.status.code(), support::report(&output))
    };
    let check = ["check", "--settle", "0s", "--sandbox-grace", "0s"];
    let (code, doc) = nodectl(&check);
    let expected: Vec<(String, String)> = uids
        .iter()
        .map(|uid| ("failing-sandbox".to_string(), uid.clone()))
        .collect();
    assert_eq!(
        (code, support::finding_keys(&doc)),
        (Some(1), expected),
        "{test}: Pending pods are kubelet's, their sandboxes failing: {doc:#}"
    );
    assert!(support::ids_of_kind(&doc, "leaked-pod-cgroup").is_empty());
    assert!(support::ids_of_kind(&doc, "orphan-pod-dir").is_empty());
    for pod in &pods {
        let finding = support::findings_of_kind(&doc, "failing-sandbox")
            .into_iter()
            .find(|f| f["id"] == pod.uid.as_str())
            .expect("the pod's failing-sandbox");
        let evidence = &finding["evidence"];
        assert_eq!(
            (
                evidence["pod_name"].as_str(),
                evidence["pod_dir"].as_str(),
                evidence["mounts"].clone(),
            ),
            (
                Some(format!("{}-{NODE_NAME}", pod.name).as_str()),
                Some(pod.dir.display().to_string().as_str()),
                serde_json::json!([pod.volume.display().to_string()]),
            ),
            "{test}: {finding:#}"
        );
    }
    eprintln!(
        "{test}: {}",
        support::findings_of_kind(&doc, "failing-sandbox")[0]["summary"]
    );

    // Told to remove leaked pod cgroups, nodectl removes nothing of them.
    let remove = ["leaked-pod-cgroups", "--grace", "0s", "--remove", "--yes"];
    let (code, doc) = nodectl(&remove);
    assert_eq!(doc["cleanups"].as_array().map_or(0, Vec::len), 0, "{doc:#}");
    assert_eq!(code, Some(0), "{test}: {doc:#}");
    for pod in &pods {
        assert!(pod.kept(), "nothing of a Pending pod removed: {pod:?}");
    }

    // CRI's network not ready (its conflist unreadable: go-cni's Load
    // fails and leaves no network, so CRI's Status says NetworkReady
    // false): each failing-sandbox names it, CRI's own words. kubelet,
    // told so by the same Status, stops asking for sandboxes ("network is
    // not ready") and keeps the pods as they are.
    let conflist = bed.cni().conf_dir.join("10-nodectl.conflist");
    let kept = std::fs::read(&conflist).expect("the bed's conflist");
    std::fs::write(&conflist, "{ not json").unwrap();
    // CRI reloads on the write (its conf syncer's fsnotify watch); the wait
    // is for nodectl's looks on a loaded machine (CI's lines side by side
    // on 2 cores failed this once at 20 s on 1.6.20, the cause not kept),
    // and each look is told if it fails.
    // A RunPodSandbox in flight as the conflist broke can leave its
    // sandbox listed, not ready (its deferred teardown's DEL finds no
    // network to tear down: kubelet then logs "No ready sandbox for pod");
    // such a pod has a sandbox, so nodectl calls it no failing-sandbox
    // (seen in CI with 8 more kubelets beside: one pod in ten, on 1.6.20
    // and 1.7.34). The pods each look must name are the ones CRI then
    // lists no sandbox of, asked right after it.
    let without_sandbox = || -> Vec<String> {
        let listed: Vec<String> = kubelet.crictl(&["pods"])["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["metadata"]["uid"].as_str().map(str::to_string))
            .collect();
        uids.iter()
            .filter(|uid| !listed.contains(uid))
            .cloned()
            .collect()
    };
    let changed = Instant::now();
    let deadline = changed + Duration::from_secs(60);
    let mut looks = Vec::new();
    let named = loop {
        let (code, doc) = nodectl(&check);
        let expected = without_sandbox();
        let failing = support::findings_of_kind(&doc, "failing-sandbox");
        let said: Vec<(String, String)> = failing
            .iter()
            .filter_map(|f| {
                let said = f["evidence"]["cri_network_not_ready"].as_str()?;
                Some((f["id"].as_str()?.to_string(), said.to_string()))
            })
            .collect();
        let gaps: Vec<&str> = doc["gaps"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g["source"].as_str())
            .collect();
        looks.push(format!(
            "{:.1?}: exit {code:?}, {} failing, {} naming CRI's network, {} with no sandbox \
             in CRI, gaps {gaps:?}",
            changed.elapsed(),
            failing.len(),
            said.len(),
            expected.len()
        ));
        let mut named_uids: Vec<String> = said.iter().map(|(uid, _)| uid.clone()).collect();
        named_uids.sort();
        if named_uids == expected || Instant::now() > deadline {
            break (said, named_uids, expected, doc);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    std::fs::write(&conflist, kept).unwrap();
    let (said, named_uids, expected, doc) = named;
    assert_eq!(
        named_uids, expected,
        "{test}: each look after the conflist broke: {looks:#?}\nthe last: {doc:#}"
    );
    // Few ADDs are in flight at any instant (kubelet retries each pod 10 to
    // 15 s apart): most pods must be left to judge.
    assert!(
        expected.len() * 2 >= uids.len(),
        "{test}: most pods have no sandbox in CRI after the break: {looks:#?}"
    );
    if expected.len() < uids.len() {
        eprintln!(
            "{test}: a sandbox left listed by an ADD in flight at the break: CRI lists \
             sandboxes of {} pod(s), not called failing-sandbox",
            uids.len() - expected.len()
        );
    }
    assert!(said[0].1.starts_with("NetworkPluginNotReady: "), "{said:?}");
    eprintln!("{test}: CRI's network: {}", said[0].1);
    for pod in &pods {
        assert!(pod.kept(), "{pod:?}");
    }
    bed.clear_cni_faults();
    eprintln!("{test}: done after {:?}", start.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_pods_behind_a_failing_add_are_kubelets_v1_34() {
    pending_pods_behind_a_failing_add_are_kubelets(support::KUBELET_RELEASES[0]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_pods_behind_a_failing_add_are_kubelets_v1_37() {
    pending_pods_behind_a_failing_add_are_kubelets(support::KUBELET_RELEASES[1]).await;
}
