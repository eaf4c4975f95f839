//! A pod Pending behind a failing CNI ADD, with a real kubelet (each
//! release scripts/peers builds) on the networked bed: kubelet retries its
//! sandbox, CRI lists none (the deferred teardown removes each one that
//! failed, on every line), and what kubelet keeps for the pod meanwhile
//! (its directory, its cgroup, its log directory) is kubelet's. nodectl
//! calls none of it leaked or orphaned, only the pod's sandbox failing;
//! every cleanup command with `--yes` removes nothing; and once CNI works
//! again kubelet runs the very same pod, and nodectl finds nothing.

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Kubelet, TestBed};

/// What the chained plugin's ADD fails with (see `support::cni`).
const REFUSED: &str = "nodectl-chained: ADD refused by the test";

/// `nodectl <args> -o json` on the bed, naming this kubelet's places by
/// flag (other tests' kubelets may run on the machine at the same time),
/// run again while an API call's deadline is all that kept it from
/// checking (`support::only_slow_api`).
fn nodectl(bed: &TestBed, kubelet: &Kubelet, args: &[&str]) -> (Option<i32>, Value) {
    let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    all.extend(["-o".to_string(), "json".to_string()]);
    all.extend(kubelet.nodectl_flags());
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    support::look_past_slow_api(&all[0..1].join(" "), || {
        let output = bed.nodectl(&all);
        (output.status.code(), support::report(&output))
    })
}

/// How many times kubelet's log says the sandbox failed on the plugin.
fn refusals(kubelet: &Kubelet) -> usize {
    std::fs::read_to_string(&kubelet.log)
        .unwrap_or_default()
        .matches("\"CreatePodSandbox for pod failed\"")
        .count()
}

async fn pending_behind_a_failing_cni_add(release: &str) {
    let test = format!("kubelet_pending_{release}");
    let Some(bed) = TestBed::start_networked(&test).await else {
        return;
    };
    bed.fail_cni_add(REFUSED);
    let Some(kubelet) = Kubelet::start(&bed, &test, release) else {
        return;
    };
    kubelet.add_static_pod("pending", &support::sleeper_manifest("pending"));
    // Two refusals at least: kubelet has retried the sandbox.
    let start = Instant::now();
    if !kubelet.wait_for(Duration::from_secs(90), |k| refusals(k) >= 2) {
        kubelet.fail("kubelet never retried the pod's sandbox behind the failing ADD");
    }
    eprintln!(
        "{test}: containerd {}: {} refusals after {:?}",
        bed.containerd_version(),
        refusals(&kubelet),
        start.elapsed()
    );
    assert_eq!(kubelet.sandboxes("pending"), vec![], "CRI keeps no sandbox");
    let pods: Vec<String> = std::fs::read_dir(kubelet.root.join("pods"))
        .expect("kubelet's pods")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let [uid] = pods.as_slice() else {
        kubelet.fail(&format!("one pod directory expected: {pods:?}"));
    };
    let pod_dir = kubelet.root.join("pods").join(uid);

    // nodectl's view: the pod's sandbox failing, nothing leaked.
    let grace = ["--settle", "0s", "--sandbox-grace", "0s"];
    let mut check = vec!["check"];
    check.extend(grace);
    let (code, doc) = nodectl(&bed, &kubelet, &check);
    assert_eq!(
        (code, support::finding_keys(&doc)),
        (Some(1), vec![("failing-sandbox".to_string(), uid.clone())]),
        "{test}: a Pending pod is kubelet's, its sandbox failing: {doc:#}"
    );
    let failing = &support::findings_of_kind(&doc, "failing-sandbox")[0];
    eprintln!("{test}: {}", failing["summary"]);

    // Every cleanup, told to act, acts on none of it.
    for command in [
        ["leaked-pod-cgroups", "--remove"],
        ["leaked-netns", "--remove"],
        ["leaked-ips", "--release"],
        ["leaked-sandboxes", "--remove"],
    ] {
        let mut args = command.to_vec();
        args.extend(["--grace", "0s", "--yes"]);
        let (code, doc) = nodectl(&bed, &kubelet, &args);
        assert_eq!(
            doc["cleanups"].as_array().map_or(0, Vec::len),
            0,
            "{test}: {command:?} acted on a Pending pod's things: {doc:#}"
        );
        assert_eq!(code, Some(0), "{test}: {command:?}: {doc:#}");
    }
    assert!(pod_dir.is_dir(), "the pod's directory stays");

    // CNI works again: kubelet runs the same pod.
    bed.clear_cni_faults();
    let running = kubelet.wait_for(Duration::from_secs(120), |k| {
        k.container_states("pending") == [("sleep".to_string(), "CONTAINER_RUNNING".to_string())]
    });
    if !running {
        kubelet.fail(&format!(
            "the pod never ran once CNI worked: crictl says {:?}",
            kubelet.container_states("pending")
        ));
    }
    assert!(pod_dir.is_dir(), "the same pod runs: {}", pod_dir.display());
    let (code, doc) = nodectl(&bed, &kubelet, &check);
    assert_eq!(
        (code, support::finding_keys(&doc)),
        (Some(0), vec![]),
        "{test}: the pod runs: {doc:#}"
    );
    eprintln!("{test}: running after {:?}", start.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_behind_a_failing_cni_add_v1_34() {
    pending_behind_a_failing_cni_add(support::KUBELET_RELEASES[0]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_behind_a_failing_cni_add_v1_37() {
    pending_behind_a_failing_cni_add(support::KUBELET_RELEASES[1]).await;
}
