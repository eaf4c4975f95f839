//! A real kubelet (built by scripts/peers at each release it builds, each
//! on two of the four lines: `support::kubelet_release_on`),
//! standalone on the networked test bed: a static pod it makes runs, as
//! crictl sees it, and `nodectl check` finds nothing; once the manifest is
//! removed kubelet tears the pod down, and after kubelet's own cleanup
//! (its sandbox gone from CRI, its pod directory and cgroup gone) nodectl
//! still finds nothing. No stand-in: kubelet makes and removes every
//! directory, cgroup, sandbox and log directory nodectl looks at.
//!
//! kubelet runs in the bed's containerd's network namespace, where the
//! pods' bridge is, as a node's kubelet runs beside its pods' network: its
//! HTTP probes reach the pods. One container serves its readiness and
//! liveness probes (kubelet says it ready, never restarts it); another
//! answers its liveness probe 404 and is restarted for it, and nodectl
//! calls neither anything.

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Kubelet, KubeletSetup, TestBed};

/// `nodectl check -o json` on the bed, naming kubelet's dirs by flag (other
/// tests' kubelets may run on the machine at the same time): its exit
/// status and report, looked at again while an API call's deadline is all
/// that kept it from checking (`support::only_slow_api`).
fn check(bed: &TestBed, kubelet: &Kubelet) -> (Option<i32>, Value) {
    let mut args = vec!["check".to_string(), "-o".into(), "json".into()];
    args.extend(kubelet.nodectl_flags());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    support::look_past_slow_api("check", || {
        let output = bed.nodectl(&args);
        let doc = support::report(&output);
        (output.status.code(), doc)
    })
}

fn kinds(doc: &Value) -> Vec<String> {
    doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| format!("{} {}", f["kind"], f["id"]))
        .collect()
}

async fn static_pod_lifecycle(release: &str) {
    let test = format!("static_pod_lifecycle_{release}");
    let Some(bed) = TestBed::start_networked(&test).await else {
        return;
    };
    let setup = KubeletSetup {
        netns: Some(format!("/proc/{}/ns/net", bed.containerd_pid()).into()),
        ..KubeletSetup::default()
    };
    let Some(kubelet) = Kubelet::start_with(&bed, &test, release, setup) else {
        return;
    };
    eprintln!(
        "{test}: kubelet {release} (pid {}) on containerd {}",
        kubelet.pid(),
        bed.containerd_version()
    );
    kubelet.add_static_pod("sleeper", &support::sleeper_manifest("sleeper"));
    let start = Instant::now();
    let running = kubelet.wait_for(Duration::from_secs(90), |k| {
        k.container_states("sleeper") == [("sleep".to_string(), "CONTAINER_RUNNING".to_string())]
    });
    if !running {
        kubelet.fail(&format!(
            "the static pod never ran: crictl says {:?}",
            kubelet.container_states("sleeper")
        ));
    }
    eprintln!("{test}: running after {:?}", start.elapsed());
    let sandboxes = kubelet.sandboxes("sleeper");
    assert_eq!(sandboxes.len(), 1, "{sandboxes:?}");
    assert_eq!(sandboxes[0].1, "SANDBOX_READY", "{sandboxes:?}");
    let pod_dirs = || {
        std::fs::read_dir(kubelet.root.join("pods"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    assert_eq!(pod_dirs(), 1, "kubelet made the pod's directory");

    // kubelet's own word on what nodectl is told by flag.
    let configz = kubelet.configz();
    assert_eq!(configz["cgroupRoot"], kubelet.cgroup_root.as_str());
    assert_eq!(configz["cgroupDriver"], "cgroupfs");
    assert_eq!(
        configz["podLogsDir"],
        kubelet.pod_logs.display().to_string()
    );

    let (code, doc) = check(&bed, &kubelet);
    assert_eq!(
        (code, kinds(&doc)),
        (Some(0), vec![]),
        "a running static pod is no finding: {doc:#}"
    );

    // Pods of the other shapes kubelet runs: a hostPath volume written by an
    // init container and a container that ends, never restarted
    // (`restartPolicy: Never`: the pod ends Succeeded, its sandbox stopped
    // by kubelet and kept); an emptyDir kept across a restart of a container
    // that failed once (`OnFailure`); HTTP probes, one container passing
    // them, one restarted for failing its liveness probe.
    let host_path = bed.scratch("host-path");
    kubelet.add_static_pod("once", &once_manifest(&host_path));
    kubelet.add_static_pod("again", &again_manifest());
    kubelet.add_static_pod("probed", &probed_manifest());
    let state = |name: &str, state: &str| (name.to_string(), state.to_string());
    let probed_pod = format!("pod=\"default/probed-{}\"", support::NODE_NAME);
    let probe_said = |k: &Kubelet, probe: &str, status: &str| {
        std::fs::read_to_string(&k.log)
            .unwrap_or_default()
            .lines()
            .any(|line| {
                line.contains("\"SyncLoop (probe)\"")
                    && line.contains(&format!("probe=\"{probe}\" status=\"{status}\""))
                    && line.contains(&probed_pod)
            })
    };
    let shapes_ran = kubelet.wait_for(Duration::from_secs(120), |k| {
        let once = k.container_states("once");
        let again = k.container_states("again");
        let probed = k.container_states("probed");
        once.contains(&state("write", "CONTAINER_EXITED"))
            && again.contains(&state("retry", "CONTAINER_EXITED"))
            && again.contains(&state("retry", "CONTAINER_RUNNING"))
            && probed.contains(&state("failing", "CONTAINER_EXITED"))
            && probe_said(k, "readiness", "ready")
            && probe_said(k, "liveness", "unhealthy")
    });
    if !shapes_ran {
        kubelet.fail(&format!(
            "the pods never ran as their restart policies and probes say: once {:?}, again \
             {:?}, probed {:?} (kubelet said ready: {}, restarted for liveness: {})",
            kubelet.container_states("once"),
            kubelet.container_states("again"),
            kubelet.container_states("probed"),
            probe_said(&kubelet, "readiness", "ready"),
            probe_said(&kubelet, "liveness", "unhealthy"),
        ));
    }
    // The container whose probes pass is never restarted.
    let served: Vec<_> = kubelet
        .container_states("probed")
        .into_iter()
        .filter(|(name, _)| name == "served")
        .collect();
    assert_eq!(served, [state("served", "CONTAINER_RUNNING")], "{test}");
    for (file, text) in [("init", "init\n"), ("done", "done\n")] {
        let written = std::fs::read_to_string(host_path.join(file)).unwrap_or_default();
        assert_eq!(written, text, "the hostPath volume holds what {file} wrote");
    }
    let (code, doc) = check(&bed, &kubelet);
    assert_eq!(
        (code, kinds(&doc)),
        (Some(0), vec![]),
        "an ended pod, a restarted container and a hostPath are no finding: {doc:#}"
    );

    let pods = ["sleeper", "once", "again", "probed"];
    for pod in pods {
        kubelet.remove_static_pod(pod);
    }
    let start = Instant::now();
    // kubelet's cleanup: its sandbox removed from CRI (container GC, once a
    // minute), its pod directory and cgroup removed (housekeeping).
    let cleaned = kubelet.wait_for(Duration::from_secs(150), |k| {
        pods.iter()
            .all(|pod| k.sandboxes(pod).is_empty() && k.container_states(pod).is_empty())
    });
    if !cleaned {
        let left: Vec<_> = pods
            .iter()
            .map(|pod| (pod, kubelet.sandboxes(pod), kubelet.container_states(pod)))
            .collect();
        kubelet.fail(&format!("kubelet never removed the pods: {left:?}"));
    }
    let removed = start.elapsed();
    assert!(
        kubelet.wait_for(Duration::from_secs(30), |_| pod_dirs() == 0),
        "kubelet removes the pod's directory"
    );
    eprintln!("{test}: kubelet removed the pod after {removed:?}");
    let (code, doc) = check(&bed, &kubelet);
    assert_eq!(
        (code, kinds(&doc)),
        (Some(0), vec![]),
        "nothing is left after kubelet's cleanup: {doc:#}"
    );
    drop(kubelet);
}

/// A pod that runs once: an init container and a container writing to a
/// hostPath volume, then ending (`restartPolicy: Never`).
fn once_manifest(host_path: &std::path::Path) -> String {
    let image = support::IMAGE;
    let host_path = host_path.display();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: once\n  namespace: default\n\
         spec:\n  terminationGracePeriodSeconds: 1\n  restartPolicy: Never\n  volumes:\n  \
         - name: host\n    hostPath: {{path: \"{host_path}\", type: DirectoryOrCreate}}\n  \
         initContainers:\n  - name: init\n    image: {image}\n    imagePullPolicy: Never\n    \
         command: [\"/bin/sh\", \"-c\", \"echo init > /host/init\"]\n    \
         volumeMounts: [{{name: host, mountPath: /host}}]\n  \
         containers:\n  - name: write\n    image: {image}\n    imagePullPolicy: Never\n    \
         command: [\"/bin/sh\", \"-c\", \"echo done > /host/done\"]\n    \
         volumeMounts: [{{name: host, mountPath: /host}}]\n"
    )
}

/// A pod with HTTP probes on two of busybox's httpd: `served` answers its
/// readiness and liveness probes 200; `failing` answers its liveness probe
/// 404 and is restarted for it (kubelet probes from its own network
/// namespace, the pod's address).
fn probed_manifest() -> String {
    let image = support::IMAGE;
    let httpd = |port: u16, ready: bool| {
        let page = if ready {
            "echo ok > /www/ready && "
        } else {
            ""
        };
        format!(
            "[\"/bin/sh\", \"-c\", \"mkdir -p /www && {page}exec /bin/busybox httpd -f -p {port} \
             -h /www\"]"
        )
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: probed\n  namespace: default\n\
         spec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  \
         - name: served\n    image: {image}\n    imagePullPolicy: Never\n    command: {served}\n    \
         readinessProbe: {{httpGet: {{path: /ready, port: 8080}}, periodSeconds: 1}}\n    \
         livenessProbe: {{httpGet: {{path: /ready, port: 8080}}, periodSeconds: 1, \
         failureThreshold: 3}}\n  \
         - name: failing\n    image: {image}\n    imagePullPolicy: Never\n    command: {failing}\n    \
         livenessProbe: {{httpGet: {{path: /missing, port: 8081}}, periodSeconds: 1, \
         failureThreshold: 2}}\n",
        served = httpd(8080, true),
        failing = httpd(8081, false),
    )
}

/// A pod whose container fails once, then runs (`restartPolicy:
/// OnFailure`), its emptyDir remembering the first run.
fn again_manifest() -> String {
    let image = support::IMAGE;
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: again\n  namespace: default\n\
         spec:\n  terminationGracePeriodSeconds: 1\n  restartPolicy: OnFailure\n  volumes:\n  \
         - name: cache\n    emptyDir: {{}}\n  containers:\n  - name: retry\n    image: {image}\n    \
         imagePullPolicy: Never\n    command: [\"/bin/sh\", \"-c\", \"test -f /cache/ran && exec \
         sleep 3600; touch /cache/ran; exit 1\"]\n    volumeMounts: [{{name: cache, mountPath: \
         /cache}}]\n"
    )
}

/// Each kubelet release on two of the four lines
/// (`support::kubelet_release_on`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_pod_lifecycle_of_the_line_s_kubelet() {
    static_pod_lifecycle(support::kubelet_release_here()).await;
}

/// Only a report whose every gap is an API call's missed deadline, with no
/// finding and nothing acted on, is looked at again.
#[test]
fn only_a_missed_api_deadline_is_looked_past() {
    let gap = |source: &str, error: &str| serde_json::json!({"source": source, "error": error});
    let slow = gap("containerd-api", "no answer before the deadline");
    let report = |gaps: Vec<Value>, findings: Vec<Value>| serde_json::json!({"gaps": gaps, "findings": findings, "cleanups": []});
    assert!(support::only_slow_api(
        Some(2),
        &report(vec![slow.clone()], vec![])
    ));
    assert!(!support::only_slow_api(
        Some(1),
        &report(vec![slow.clone()], vec![])
    ));
    assert!(!support::only_slow_api(Some(0), &report(vec![], vec![])));
    let finding = serde_json::json!({"kind": "zombie"});
    assert!(!support::only_slow_api(
        Some(2),
        &report(vec![slow.clone()], vec![finding])
    ));
    let unread = gap("cri-store", "permission denied");
    assert!(!support::only_slow_api(
        Some(2),
        &report(vec![slow.clone(), unread], vec![])
    ));
    let refused = gap("cri-api", "connection refused");
    assert!(!support::only_slow_api(
        Some(2),
        &report(vec![refused], vec![])
    ));
    let mut acted = report(vec![slow], vec![]);
    acted["cleanups"] = serde_json::json!([{"target": "x"}]);
    assert!(!support::only_slow_api(Some(2), &acted));
}
