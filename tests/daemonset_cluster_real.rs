//! The shipped DaemonSet on a real cluster (issue 45): a control plane
//! built from its Go modules (etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler) and a real kubelet registered as the bed's node, against
//! the bed's real containerd; the image built here with buildah; the
//! DaemonSet applied with `kubectl apply -k` through an overlay of the test's
//! own over `deploy/overlays/default` that only names the image and moves
//! the host paths to the bed's (as the k3s overlay moves them to k3s's).
//! kubelet admits the pod spec, mounts its hostPaths, applies its security
//! context and runs its shell loop: the pod becomes Ready, and the metrics
//! it writes equal `nodectl check -o prometheus` run on the host.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use k8s_cri::v1::{ContainerFilter, ListContainersRequest};

use support::cluster::{NODE, NODE_IP};
use support::{Cluster, Line, TestBed, NAMESPACE, NODECTL_IMAGE};

const TEST: &str = "daemonset_cluster_real";

/// Both views judge without the grace periods the planted kinds have. The
/// sandbox grace stays: a deleted DaemonSet pod's stopped sandbox waits for
/// kubelet's container GC (about a minute), and without it that sandbox
/// was a `leaked-sandbox` to one look and gone to the next.
const GRACE: [&str; 4] = ["--settle", "0s", "--ip-grace", "0s"];

/// The volumes of the base, in order (deploy/base/daemonset.yaml); the
/// serve component removes `textfile`.
const BASE_VOLUMES: [&str; 9] = [
    "containerd-root",
    "containerd-state",
    "textfile",
    "cni-conf",
    "cni-data",
    "netns",
    "kubelet",
    "pod-logs",
    "cgroup",
];

/// The test overlay over `deploy/overlays/<base>` (default or serve): the
/// image built here, each host path of `moved` (by volume name) moved to
/// the bed's and mounted at the same path inside, as the base mounts its
/// own (the k3s overlay moves them so), the bed's socket (`--address`, as
/// the k3s overlay passes k3s's), and no grace periods.
fn overlay(dir: &Path, base: &str, moved: &[(&str, &Path)], address: &Path, ipam: &Path) {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/overlays")
        .join(base);
    let (name, tag) = NODECTL_IMAGE.rsplit_once(':').unwrap();
    std::fs::create_dir_all(dir).unwrap();
    let kustomization = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n\
         kind: Kustomization\n\
         resources:\n  - {}\n\
         images:\n  - {{name: REGISTRY/nodectl, newName: {name}, newTag: \"{tag}\"}}\n\
         patches:\n  - target: {{group: apps, version: v1, kind: DaemonSet, name: nodectl}}\n    path: bed.yaml\n",
        relative(dir, &deploy).display()
    );
    std::fs::write(dir.join("kustomization.yaml"), kustomization).unwrap();
    let volumes: Vec<&str> = BASE_VOLUMES
        .into_iter()
        .filter(|volume| base != "serve" || *volume != "textfile")
        .collect();
    let mut ops = String::from("---\n");
    for (volume, path) in moved {
        let index = volumes.iter().position(|v| v == volume).unwrap();
        let path = path.display();
        ops.push_str(&format!(
            "- {{op: test, path: /spec/template/spec/volumes/{index}/name, value: {volume}}}\n\
             - {{op: replace, path: /spec/template/spec/volumes/{index}/hostPath/path, value: \"{path}\"}}\n\
             - {{op: test, path: /spec/template/spec/containers/0/volumeMounts/{index}/name, value: {volume}}}\n"
        ));
        if *volume != "textfile" {
            ops.push_str(&format!(
                "- {{op: replace, path: /spec/template/spec/containers/0/volumeMounts/{index}/mountPath, value: \"{path}\"}}\n"
            ));
        }
    }
    // Where the bed differs from a node, mounted on their own at their
    // paths: its socket is beside its state dir, not in it (a node's is in
    // /run/containerd, which the base mounts), and host-local keeps its
    // reservations in the bed's dir, not below /var/lib/cni (which the
    // base mounts, for libcni's result cache).
    for (name, path, kind) in [
        ("bed-socket", address, "Socket"),
        ("bed-ipam", ipam, "Directory"),
    ] {
        ops.push_str(&format!(
            "- {{op: add, path: /spec/template/spec/volumes/-, value: {{name: {name}, hostPath: {{path: \"{0}\", type: {kind}}}}}}}\n\
             - {{op: add, path: /spec/template/spec/containers/0/volumeMounts/-, value: {{name: {name}, mountPath: \"{0}\", readOnly: true}}}}\n",
            path.display()
        ));
    }
    let mut args: Vec<String> = GRACE.iter().map(|arg| arg.to_string()).collect();
    args.extend(["--address".to_string(), address.display().to_string()]);
    for arg in args {
        ops.push_str(&format!(
            "- {{op: add, path: /spec/template/spec/containers/0/args/-, value: \"{arg}\"}}\n"
        ));
    }
    std::fs::write(dir.join("bed.yaml"), ops).unwrap();
}

/// `to` as a path relative to `from` (both absolute): kustomize takes no
/// absolute path as a resource.
fn relative(from: &Path, to: &Path) -> std::path::PathBuf {
    let up = from.components().count() - 1;
    let mut path: std::path::PathBuf = std::iter::repeat_n("..", up).collect();
    path.push(to.strip_prefix("/").unwrap());
    path
}

/// The samples of a Prometheus text exposition that say what was found
/// (not when, nor how long it took), by series.
fn samples(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| line.rsplit_once(' '))
        .filter(|(series, _)| {
            ![
                "seconds",
                "timestamp",
                "duration",
                "nodectl_build_info",
                "nodectl_up_info",
            ]
            .iter()
            .any(|word| series.contains(word))
        })
        .map(|(series, value)| (series.to_string(), value.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemonset_runs_on_a_real_cluster_and_reports_what_the_host_does() {
    let name = "the_daemonset_runs_on_a_real_cluster_and_reports_what_the_host_does";
    // The DaemonSet's nodectl proves containerd by PID 1's namespaces (it
    // runs with hostPID in a mount namespace of its own); this machine's
    // PID 1 cannot be read, so the whole node (containerd, the control
    // plane, kubelet and its pods) runs in a pid namespace of the test's
    // own, whose init (a shell, readable) stands for the host's.
    if !support::in_own_pid_namespace(name, true) {
        return;
    }
    let Some(bed) = TestBed::start_networked(TEST).await else {
        return;
    };
    if !support::have("buildah") {
        support::skip(TEST, "missing buildah (scripts/test installs it)");
        return;
    }
    if !support::nodectl_image::base_rootfs().is_dir() {
        support::skip(
            TEST,
            "missing the image's base rootfs (scripts/cluster-peers makes it)",
        );
        return;
    }
    if !support::cluster::peer("prometheus", PROMETHEUS).is_file() {
        support::skip(TEST, "missing Prometheus (scripts/cluster-peers builds it)");
        return;
    }
    // The leaked address is made before kubelet runs: kubelet stops a
    // sandbox it did not make as soon as it sees it, and its StopPodSandbox
    // raced the leak's own (on 1.7.34 in CI: the loser's loopback DEL found
    // the netns already unmounted, "unknown FS magic", and the leak failed).
    let leaked_ip = bed.leak_pod_ip("leaked-ip").await;
    let Some(mut cluster) = Cluster::start(&bed, TEST) else {
        return;
    };
    eprintln!("{TEST}: {}: cluster up", bed.containerd_version());

    // The image, built here and imported where CRI looks for images.
    let work = tempfile::tempdir().unwrap();
    let archive = work.path().join("nodectl-oci.tar");
    support::nodectl_image::build(
        Path::new(env!("CARGO_BIN_EXE_nodectl")),
        work.path(),
        &archive,
    )
    .unwrap_or_else(|e| panic!("{TEST}: building the image: {e}"));
    let imported = support::run_bounded(
        std::process::Command::new(bed.ctr())
            .arg("--address")
            .arg(bed.address())
            .args([
                "-n",
                NAMESPACE,
                "images",
                "import",
                "--base-name",
                "localhost/nodectl",
            ])
            .arg(&archive),
        Duration::from_secs(120),
    )
    .unwrap();
    assert!(
        imported.status.success(),
        "ctr images import: {}",
        String::from_utf8_lossy(&imported.stderr)
    );

    // Leftovers of kinds kubelet leaves alone, made before the pod's first
    // look: an address host-local holds for a sandbox CRI no longer has
    // (made before kubelet starts, above), and a shim no bundle records
    // (its id unique per line by the clock: scripts/test runs the lines
    // side by side).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let _shim = bed.start_orphan_shim(&format!("{:016x}{}", now as u64, "d".repeat(48)));

    let textfile = bed.scratch("textfile");
    std::fs::create_dir_all(&textfile).unwrap();
    let (cni_conf, cni_ipam) = (bed.dir().join("cni/conf"), bed.dir().join("cni/ipam"));
    let pod_logs = bed.dir().join("pod-logs");
    // CRI mounts the bed's pods' netns under its state dir
    // (`netns_mounts_under_state_dir`), not /var/run/netns.
    let netns = bed.state().join("io.containerd.grpc.v1.cri/netns");
    std::fs::create_dir_all(&netns).unwrap();
    let moved: Vec<(&str, &Path)> = vec![
        ("containerd-root", bed.root()),
        ("containerd-state", bed.state()),
        ("cni-conf", &cni_conf),
        ("netns", &netns),
        ("kubelet", &cluster.kubelet_root),
        ("pod-logs", &pod_logs),
    ];
    let mut host_args = vec!["check", "-o", "prometheus"];
    host_args.extend(GRACE);
    let on_host = || {
        let host = bed.nodectl(&host_args);
        String::from_utf8_lossy(&host.stdout).into_owned()
    };

    // The default overlay: `check` every minute into node_exporter's
    // textfile directory.
    let default = bed.scratch("overlay-default");
    let mut with_textfile = moved.clone();
    with_textfile.push(("textfile", &textfile));
    overlay(
        &default,
        "default",
        &with_textfile,
        bed.address(),
        &cni_ipam,
    );
    let applied = apply_until_ready(&cluster, &default);
    // RBAC as small as it can be: nothing but the DaemonSet is applied, no
    // token is in its pod, and its service account may do no more than
    // one that exists nowhere (what every authenticated user may).
    assert_eq!(
        applied.trim(),
        "daemonset.apps/nodectl created",
        "{applied}"
    );
    let volumes = cluster.kubectl_ok(&[
        "-n",
        "kube-system",
        "get",
        "pod",
        "-l",
        "app.kubernetes.io/name=nodectl",
        "-o",
        "jsonpath={.items[0].spec.volumes[*].name}",
    ]);
    assert!(
        !volumes.contains("kube-api-access"),
        "a token is mounted: {volumes}"
    );
    let may = |account: &str| {
        cluster.kubectl_ok(&[
            "auth",
            "can-i",
            "--list",
            &format!("--as=system:serviceaccount:kube-system:{account}"),
        ])
    };
    assert_eq!(may("default"), may("nodectl-test-nobody"));
    let metrics = textfile.join("nodectl.prom");
    let written = support::wait_until(Duration::from_secs(90), || metrics.is_file());
    assert!(
        written,
        "{TEST}: no metrics written by the pod; its log:\n{}",
        pod_log(&cluster)
    );
    let in_pod = std::fs::read_to_string(&metrics).unwrap();
    let host = on_host();
    eprintln!("{TEST}: in the pod:\n{in_pod}\n{TEST}: on the host:\n{host}");
    let pod = samples(&in_pod);
    assert_same(&cluster, &bed, &pod, &samples(&host));
    // Not equal by both being blind or empty: each planted kind is counted.
    for kind in PLANTED {
        let series = format!("nodectl_findings{{command=\"check\",kind=\"{kind}\"}}");
        assert_eq!(
            pod.get(&series).map(String::as_str),
            Some("1"),
            "{series}: {in_pod}"
        );
    }
    eprintln!(
        "{TEST}: {}: the pod counted the leaked address {}",
        bed.containerd_version(),
        leaked_ip.ip
    );
    let uid = cluster.kubectl_ok(&[
        "-n",
        "kube-system",
        "get",
        "pod",
        "-l",
        "app.kubernetes.io/name=nodectl",
        "-o",
        "jsonpath={.items[0].metadata.uid}",
    ]);
    delete(&cluster, &default);
    // `kubectl delete -k` leaves nothing of it running on the node: its
    // pod directory goes, and its sandbox is stopped (kubelet's container
    // GC removes it a minute or so later; the host's look below counts no
    // finding of it either).
    let pod_dir = cluster.kubelet_root.join("pods").join(&uid);
    let cleaned = support::wait_until(Duration::from_secs(60), || !pod_dir.exists());
    assert!(cleaned, "{TEST}: kubelet kept {}", pod_dir.display());
    for sandbox in bed.listed_sandboxes().await {
        let Ok(status) = bed.sandbox_status(&sandbox).await else {
            continue;
        };
        if status.metadata.as_ref().is_some_and(|m| m.uid == uid) {
            // SANDBOX_NOTREADY
            assert_eq!(
                status.state, 1,
                "{TEST}: its sandbox still runs: {status:?}"
            );
        }
    }

    // The serve overlay, scraped by Prometheus through Kubernetes
    // service discovery against this API server (the pod job that keeps
    // annotated pods, with the `node` label docs/fleet.md asks for), with
    // the shipped rules loaded.
    let serve = bed.scratch("overlay-serve");
    overlay(&serve, "serve", &moved, bed.address(), &cni_ipam);
    apply_until_ready(&cluster, &serve);
    start_prometheus(&mut cluster, &bed);
    let query = |expr: &str| -> Option<serde_json::Value> {
        let url = format!(
            "http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/query?query={}",
            urlencode(expr)
        );
        let body = cluster.get(&url)?;
        let doc: serde_json::Value = serde_json::from_str(&body).ok()?;
        doc["data"]["result"]
            .as_array()
            .cloned()
            .map(serde_json::Value::Array)
    };
    let scraped = support::wait_until(Duration::from_secs(90), || {
        query(r#"nodectl_findings{kind="leaked-shim"}"#)
            .and_then(|result| result.as_array().cloned())
            .is_some_and(|series| !series.is_empty())
    });
    assert!(
        scraped,
        "{TEST}: Prometheus never scraped the pod; its targets: {}\n{}",
        cluster
            .get(&format!(
                "http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/targets"
            ))
            .unwrap_or_default(),
        cluster.log_tails()
    );
    // What Prometheus holds of each kind is the host's count, from the
    // pod on this node.
    let host = samples(&on_host());
    let stored = query(r#"nodectl_findings{job="kubernetes-pods"}"#).unwrap();
    let mut kinds = 0;
    for series in stored.as_array().unwrap() {
        let labels = &series["metric"];
        assert_eq!(labels["node"], NODE, "{series}");
        let kind = labels["kind"].as_str().unwrap();
        let value = series["value"][1].as_str().unwrap();
        let key = format!("nodectl_findings{{command=\"serve\",kind=\"{kind}\"}}");
        let on_host = host
            .get(&key.replace("\"serve\"", "\"check\""))
            .map(String::as_str);
        assert_eq!(
            Some(value),
            on_host,
            "{kind}: Prometheus has {value}, the host {on_host:?}"
        );
        kinds += 1;
    }
    assert_eq!(kinds, 17, "every kind stored: {stored}");
    // The shipped rules evaluate the scraped series: the leaked shim's
    // alert is pending (it fires after its `for: 15m`).
    let pending = support::wait_until(Duration::from_secs(30), || {
        cluster
            .get(&format!("http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/alerts"))
            .is_some_and(|body| {
                body.contains(r#""alertname":"ContainerdLeakedShims""#)
                    && body.contains(r#""state":"pending""#)
            })
    });
    assert!(
        pending,
        "{TEST}: ContainerdLeakedShims is not pending: {}",
        cluster
            .get(&format!("http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/alerts"))
            .unwrap_or_default()
    );
    let in_flux = match bed.line() == ALERT_LINE {
        true => zombie_alert_fires_and_holds_while_the_pod_is_blind(&cluster, &bed, &serve).await,
        false => Vec::new(),
    };
    delete(&cluster, &serve);

    // How an SRE reaches a node with no SSH: `kubectl debug node` with the
    // sysadmin profile (privileged, the host's pid, network and ipc
    // namespaces, the host's / at /host).
    let debugged = debug_node(&cluster, None);
    let mut host_json = vec!["check", "-o", "json"];
    host_json.extend(GRACE);
    let host_doc = support::report(&bed.nodectl(&host_json));
    // The host's nodectl judged by the registered kubelet (named kubelet,
    // as on a node): its root, and its own word on its pods.
    let kubelet = &host_doc["kubelet"];
    assert_eq!(
        kubelet["root"]["path"],
        cluster.kubelet_root.display().to_string(),
        "{TEST}: the host's nodectl did not find the cluster's kubelet: {kubelet}"
    );
    assert_eq!(kubelet["word"]["answer"], "listed", "{kubelet}");
    let keys = |doc: &serde_json::Value| -> std::collections::BTreeSet<(String, String)> {
        support::finding_keys(doc)
            .into_iter()
            .filter(|(_, id)| !in_flux.contains(id))
            .collect()
    };
    // From a pod that sees containerd's processes and mount table but not
    // its directories, no finding the host does not have: what it cannot
    // see is a gap (it showed every live rootfs as a leaked mount and the
    // API as unreachable, both false, before it asked the API through the
    // daemon's root and stopped inferring from records it could not read).
    let false_findings: Vec<_> = keys(&debugged)
        .difference(&keys(&host_doc))
        .cloned()
        .collect();
    assert!(
        false_findings.is_empty(),
        "{TEST}: kubectl debug node found what the host does not: {false_findings:?}\n{debugged:#}"
    );
    assert!(
        keys(&debugged).contains(&(
            "leaked-shim".to_string(),
            support::ids_of_kind(&host_doc, "leaked-shim")[0].clone()
        )),
        "{TEST}: kubectl debug node saw no leaked shim: {debugged:#}"
    );
    eprintln!(
        "{TEST}: {}: kubectl debug node found {:?} of the host's {:?}, gaps: {}",
        bed.containerd_version(),
        keys(&debugged),
        keys(&host_doc),
        debugged["gaps"].as_array().map_or(0, Vec::len)
    );
    // Each directory that pod cannot see is a gap saying how to show it:
    // the volume mount of the pod's own host-root a --custom file adds.
    // CRI's store is one of them.
    let mounts = suggested_mounts(&debugged);
    let root = bed.root().display().to_string();
    assert!(
        mounts.iter().any(|m| m["mountPath"] == root.as_str()),
        "{TEST}: no gap says how to show containerd's root {root}: {:#}",
        debugged["gaps"]
    );
    // Done as the gaps say, the same pod sees what the host sees: every
    // planted kind, and none of those gaps. What a directory shown names
    // (the networks' stores in a conf dir) asks for its own mount on the
    // next run, as it would an SRE: a few rounds.
    let custom = bed.scratch("debug-custom.json");
    let mut asked = mounts;
    let mut rounds = 0;
    let shown = loop {
        rounds += 1;
        let spec = serde_json::json!({ "volumeMounts": asked });
        std::fs::write(&custom, spec.to_string()).unwrap();
        let shown = debug_node(&cluster, Some(&custom));
        let more = suggested_mounts(&shown);
        if more.is_empty() || rounds == 4 {
            break shown;
        }
        asked.extend(more);
        asked = outermost(asked);
    };
    let false_findings: Vec<_> = keys(&shown).difference(&keys(&host_doc)).cloned().collect();
    assert!(
        false_findings.is_empty(),
        "{TEST}: kubectl debug node --custom found what the host does not: {false_findings:?}\n{shown:#}"
    );
    for kind in PLANTED {
        assert!(
            !support::ids_of_kind(&shown, kind).is_empty(),
            "{TEST}: kubectl debug node with the gaps' mounts finds no {kind}: {shown:#}"
        );
    }
    assert!(
        suggested_mounts(&shown).is_empty(),
        "{TEST}: mounted as the gaps said, a gap still asks for a mount: {:#}",
        shown["gaps"]
    );
    eprintln!(
        "{TEST}: {}: kubectl debug node with {} mounts from its gaps ({rounds} rounds) found \
         {:?}, gaps: {}",
        bed.containerd_version(),
        asked.len(),
        keys(&shown),
        shown["gaps"].as_array().map_or(0, Vec::len)
    );
    cluster.stop(&bed).await;
}

/// `kubectl debug node/<node> --image=<the image> --profile=sysadmin
/// [--custom=<custom>] -- nodectl check -o json`: the report its pod logs.
fn debug_node(cluster: &Cluster, custom: Option<&Path>) -> serde_json::Value {
    let mut debug = vec![
        "debug".to_string(),
        format!("node/{NODE}"),
        format!("--image={NODECTL_IMAGE}"),
        "--profile=sysadmin".to_string(),
    ];
    if let Some(custom) = custom {
        debug.push(format!("--custom={}", custom.display()));
    }
    debug.extend(["--", "nodectl", "check", "-o", "json"].map(String::from));
    debug.extend(GRACE.iter().map(|arg| arg.to_string()));
    let debug: Vec<&str> = debug.iter().map(String::as_str).collect();
    let created = cluster.kubectl_ok(&debug);
    eprintln!("{TEST}: {created}");
    // "Creating debugging pod <name> with container debugger on node ...".
    let pod = created
        .split_whitespace()
        .skip_while(|word| *word != "pod")
        .nth(1)
        .unwrap_or_else(|| panic!("{TEST}: no debug pod named: {created}"))
        .to_string();
    let phase = || {
        cluster
            .kubectl(&["get", "pod", &pod, "-o", "jsonpath={.status.phase}"])
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
            .unwrap_or_default()
    };
    let finished = support::wait_until(Duration::from_secs(90), || {
        matches!(phase().as_str(), "Succeeded" | "Failed")
    });
    assert!(
        finished,
        "{TEST}: the debug pod {pod} never finished ({}): {}",
        phase(),
        cluster.log_tails()
    );
    let said = cluster.kubectl_ok(&["logs", &pod, "--tail=-1"]);
    cluster.kubectl_ok(&["delete", "pod", &pod, "--wait=true"]);
    serde_json::from_str(&said)
        .unwrap_or_else(|e| panic!("{TEST}: the debug pod's report: {e}: {said}"))
}

/// The volume mounts the report's gaps ask a `kubectl debug node` pod's
/// `--custom` file to add, one per directory, none below another.
fn suggested_mounts(report: &serde_json::Value) -> Vec<serde_json::Value> {
    let mounts: Vec<serde_json::Value> = report["gaps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|gap| {
            let error = gap["error"].as_str()?;
            let (_, rest) = error.split_once(", add ")?;
            let (mount, _) = rest.split_once(" to the volumeMounts")?;
            serde_json::from_str(mount).ok()
        })
        .collect();
    outermost(mounts)
}

/// `mounts`, none below another.
fn outermost(mut mounts: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
    let path = |m: &serde_json::Value| m["mountPath"].as_str().unwrap_or_default().to_string();
    mounts.sort_by_key(|m| path(m).len());
    let mut kept: Vec<serde_json::Value> = Vec::new();
    for mount in mounts {
        let under = |k: &serde_json::Value| {
            let (k, m) = (path(k), path(&mount));
            m == k || m.starts_with(&format!("{k}/"))
        };
        if !kept.iter().any(under) {
            kept.push(mount);
        }
    }
    kept
}

/// The line the zombie's alert is proven on: waiting for its `for: 5m`
/// takes minutes, and the rules and the DaemonSet do not differ by line.
/// The newest: scripts/test runs this test on it in a stream of its own.
const ALERT_LINE: Line = Line::V2_3;
/// How long the zombie's rootfs unmount is held: past the alert's pending
/// (a look and a scrape), its `for: 5m`, and the blind pod's rollout.
const ZOMBIE_HOLD: Duration = Duration::from_secs(720);

/// The state of the shipped rule `alert` in Prometheus (`pending`,
/// `firing`), if it is active.
fn alert_state(cluster: &Cluster, alert: &str) -> Option<String> {
    let body = cluster.get(&format!("http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/alerts"))?;
    let doc: serde_json::Value = serde_json::from_str(&body).ok()?;
    doc["data"]["alerts"]
        .as_array()?
        .iter()
        .find(|a| a["labels"]["alertname"] == alert)
        .and_then(|a| a["state"].as_str().map(str::to_string))
}

/// A zombie in a pod kubelet runs (its container exits while its shim
/// sits in the seeds' held umount2, so CRI's exit handler gives up and CRI
/// keeps it RUNNING): the serve pod reports it, the shipped rule goes
/// pending and then fires after its `for: 5m`. Then containerd's root is
/// taken from the DaemonSet (a patched overlay): its new pod cannot read
/// CRI's store, reports the zombie check blind, and the alert keeps firing
/// on the last count seen.
async fn zombie_alert_fires_and_holds_while_the_pod_is_blind(
    cluster: &Cluster,
    bed: &TestBed,
    serve: &Path,
) -> Vec<String> {
    const ALERT: &str = "ContainerdZombieContainer";
    let manifest = bed.scratch("stuck-pod.yaml");
    let image = support::IMAGE;
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: stuck, namespace: default}}\n\
             spec:\n  nodeName: {NODE}\n  restartPolicy: Never\n  \
             automountServiceAccountToken: false\n  containers:\n  - name: app\n    \
             image: \"{image}\"\n    imagePullPolicy: Never\n    \
             command: [/bin/sh, -c, sleep 30]\n"
        ),
    )
    .unwrap();
    cluster.kubectl_ok(&["apply", "-f", manifest.to_str().unwrap()]);
    let running = support::wait_until(Duration::from_secs(60), || {
        cluster
            .kubectl(&["get", "pod", "stuck", "-o", "jsonpath={.status.phase}"])
            .is_ok_and(|out| out.stdout == b"Running")
    });
    assert!(
        running,
        "{TEST}: the stuck pod never ran: {}",
        cluster.log_tails()
    );
    let mut sandbox = None;
    for id in bed.listed_sandboxes().await {
        let Ok(status) = bed.sandbox_status(&id).await else {
            continue;
        };
        if status
            .metadata
            .as_ref()
            .is_some_and(|m| m.name == "stuck" && m.namespace == "default")
        {
            sandbox = Some(id);
        }
    }
    let sandbox = sandbox.expect("the stuck pod's sandbox");
    let held = bed.delay_umount2(bed.shim_pid(&sandbox), ZOMBIE_HOLD);
    let started = std::time::Instant::now();
    let pending = support::wait_until(Duration::from_secs(120), || {
        alert_state(cluster, ALERT).is_some()
    });
    assert!(pending, "{TEST}: {ALERT} never went pending");
    let firing = support::wait_until(Duration::from_secs(420), || {
        alert_state(cluster, ALERT).as_deref() == Some("firing")
    });
    assert!(
        firing,
        "{TEST}: {ALERT} never fired: {:?}",
        alert_state(cluster, ALERT)
    );
    eprintln!(
        "{TEST}: {}: {ALERT} fired {:.0} s after the zombie's pod started",
        bed.containerd_version(),
        started.elapsed().as_secs_f64()
    );

    // Blind: the DaemonSet without containerd's root.
    let blind = bed.scratch("overlay-blind");
    std::fs::create_dir_all(&blind).unwrap();
    std::fs::write(
        blind.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {}\n\
             patches:\n  - target: {{group: apps, version: v1, kind: DaemonSet, name: nodectl}}\n    \
             path: blind.yaml\n",
            relative(&blind, serve).display()
        ),
    )
    .unwrap();
    std::fs::write(
        blind.join("blind.yaml"),
        "---\n\
         - {op: test, path: /spec/template/spec/volumes/0/name, value: containerd-root}\n\
         - {op: remove, path: /spec/template/spec/volumes/0}\n\
         - {op: test, path: /spec/template/spec/containers/0/volumeMounts/0/name, value: containerd-root}\n\
         - {op: remove, path: /spec/template/spec/containers/0/volumeMounts/0}\n",
    )
    .unwrap();
    cluster.kubectl_ok(&["apply", "-k", blind.to_str().unwrap()]);
    let query = |expr: &str| -> Vec<String> {
        let url = format!(
            "http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/query?query={}",
            urlencode(expr)
        );
        cluster
            .get(&url)
            .and_then(|body| serde_json::from_str::<serde_json::Value>(&body).ok())
            .and_then(|doc| doc["data"]["result"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|series| series["value"][1].as_str().map(str::to_string))
            .collect()
    };
    let blind_seen = support::wait_until(Duration::from_secs(120), || {
        query(r#"nodectl_check_ok{kind="zombie"}"#) == ["0"]
    });
    assert!(
        blind_seen,
        "{TEST}: the blind pod's zombie check never scraped as blind: {:?}\n{}",
        query(r#"nodectl_check_ok{kind="zombie"}"#),
        pod_log(cluster)
    );
    // Some evaluations of the rule on the blind pod's series alone.
    std::thread::sleep(Duration::from_secs(10));
    assert!(
        query(r#"nodectl_findings{kind="zombie"} > 0"#).is_empty(),
        "{TEST}: the blind pod still counts the zombie"
    );
    assert_eq!(
        alert_state(cluster, ALERT).as_deref(),
        Some("firing"),
        "{TEST}: {ALERT} resolved while the pod is blind"
    );
    assert!(
        started.elapsed() < ZOMBIE_HOLD,
        "{TEST}: the zombie outlived its hold: nothing above proves the blind case"
    );
    eprintln!(
        "{TEST}: {}: {ALERT} still firing with the pod blind",
        bed.containerd_version()
    );
    // Let the unmount go. CRI's retry of the exit ends it when it next
    // runs, but after minutes of failures its backoff has grown to
    // containerd's most (5 min): until then the container may turn from
    // zombie to late exit at any moment, so its ids are returned for the
    // comparisons that follow to leave out.
    drop(held);
    let mut cri = bed.cri().await;
    let request = ListContainersRequest {
        filter: Some(ContainerFilter {
            pod_sandbox_id: sandbox.clone(),
            ..ContainerFilter::default()
        }),
    };
    let mut in_flux: Vec<String> = cri
        .list_containers(request)
        .await
        .expect("CRI lists the stuck pod's containers")
        .into_inner()
        .containers
        .into_iter()
        .map(|c| c.id)
        .collect();
    in_flux.push(sandbox);
    cluster.kubectl_ok(&[
        "delete",
        "pod",
        "stuck",
        "--grace-period=0",
        "--force",
        "--wait=false",
    ]);
    in_flux
}

/// The kinds the test plants, each counted 1.
const PLANTED: [&str; 2] = ["leaked-ip", "leaked-shim"];
/// Prometheus's release (`peers/prometheus/go.mod`: its Go module's
/// v0.316.0 is Prometheus 3.16). Debian's prometheus 2.42 is built
/// without `kubernetes_sd_configs`, the discovery deploy/prometheus is
/// written for.
const PROMETHEUS: &str = "v0.316.0";
/// Prometheus's port, on loopback of containerd's network namespace.
const PROMETHEUS_PORT: u16 = 19090;

/// `kubectl apply -k dir`, and waits until the DaemonSet's pod is Ready;
/// what kubectl said it applied.
fn apply_until_ready(cluster: &Cluster, dir: &Path) -> String {
    let dir = dir.display().to_string();
    let applied = cluster.kubectl_ok(&["apply", "-k", &dir]);
    eprintln!("{TEST}: {applied}");
    // `kubectl wait -l` fails at once while no pod matches: the DaemonSet
    // controller makes the pod a moment after the apply (in CI, once, the
    // wait came first and the pod was still to be scheduled).
    support::wait_until(Duration::from_secs(60), || {
        nodectl_pods(cluster).is_some_and(|names| !names.trim_ascii().is_empty())
    });
    let ready = cluster
        .kubectl(&[
            "-n",
            "kube-system",
            "wait",
            "--for=condition=Ready",
            "pod",
            "-l",
            "app.kubernetes.io/name=nodectl",
            "--timeout=120s",
        ])
        .is_ok_and(|out| out.status.success());
    if !ready {
        let pods = cluster
            .kubectl(&[
                "-n",
                "kube-system",
                "describe",
                "pod",
                "-l",
                "app.kubernetes.io/name=nodectl",
            ])
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
            .unwrap_or_default();
        panic!(
            "{TEST}: the DaemonSet's pod was not Ready:\n{pods}\n{}",
            cluster.log_tails()
        );
    }
    applied
}

/// The names of the DaemonSet's pods (`kubectl get pod -o name`), when
/// kubectl answered.
fn nodectl_pods(cluster: &Cluster) -> Option<Vec<u8>> {
    let out = cluster
        .kubectl(&[
            "-n",
            "kube-system",
            "get",
            "pod",
            "-l",
            "app.kubernetes.io/name=nodectl",
            "-o",
            "name",
        ])
        .ok()?;
    out.status.success().then_some(out.stdout)
}

/// `kubectl delete -k dir`, and waits until its pod is gone.
fn delete(cluster: &Cluster, dir: &Path) {
    let dir = dir.display().to_string();
    cluster.kubectl_ok(&["delete", "-k", &dir, "--wait=true", "--timeout=60s"]);
    let gone = support::wait_until(Duration::from_secs(60), || {
        nodectl_pods(cluster).is_some_and(|names| names.is_empty())
    });
    assert!(gone, "{TEST}: the DaemonSet's pod outlived its DaemonSet");
}

/// The DaemonSet pod's log.
fn pod_log(cluster: &Cluster) -> String {
    cluster
        .kubectl(&[
            "-n",
            "kube-system",
            "logs",
            "-l",
            "app.kubernetes.io/name=nodectl",
        ])
        .map(|out| {
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr)
        })
        .unwrap_or_default()
}

/// Fails with the series that differ, the pod's log and its report.
fn assert_same(
    cluster: &Cluster,
    bed: &TestBed,
    pod: &BTreeMap<String, String>,
    host: &BTreeMap<String, String>,
) {
    let differ: Vec<String> = pod
        .keys()
        .chain(host.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|series| pod.get(*series) != host.get(*series))
        .map(|series| {
            format!(
                "{series}: pod {:?}, host {:?}",
                pod.get(series),
                host.get(series)
            )
        })
        .collect();
    if differ.is_empty() {
        return;
    }
    let address = bed.address().display().to_string();
    let report = cluster
        .kubectl(&[
            "-n",
            "kube-system",
            "exec",
            "ds/nodectl",
            "--",
            "nodectl",
            "check",
            "-o",
            "json",
            "--address",
            &address,
        ])
        .map(|out| {
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr)
        })
        .unwrap_or_default();
    panic!(
        "{TEST}: the pod's metrics differ from the host's:\n{}\nthe pod's log:\n{}\nits report:\n{report}",
        differ.join("\n"),
        pod_log(cluster)
    );
}

/// Prometheus (built from its Go module) in containerd's network namespace, configured as
/// docs/fleet.md describes: Kubernetes service discovery of pods against
/// this API server (the admin's client certificate), keeping the pods
/// annotated `prometheus.io/scrape`, at their annotated port and path, the
/// node's name in `node` and in `instance` (docs/fleet.md: without it, a
/// rollout's new pod is another instance, and a blind one resolved the
/// zombie's alert); the shipped rules; every 2 s.
/// It ends with the cluster.
fn start_prometheus(cluster: &mut Cluster, bed: &TestBed) {
    let pki = cluster.dir().join("pki");
    let p = pki.display();
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/nodectl-rules.yaml");
    let config = format!(
        "global: {{scrape_interval: 2s, evaluation_interval: 2s}}\n\
         rule_files: [\"{rules}\"]\n\
         scrape_configs:\n\
         \x20 - job_name: kubernetes-pods\n\
         \x20   kubernetes_sd_configs:\n\
         \x20     - role: pod\n\
         \x20       api_server: https://{NODE_IP}:16443\n\
         \x20       tls_config: {{ca_file: {p}/ca.crt, cert_file: {p}/admin.crt, key_file: {p}/admin.key}}\n\
         \x20   relabel_configs:\n\
         \x20     - {{source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_scrape], action: keep, regex: \"true\"}}\n\
         \x20     - {{source_labels: [__address__, __meta_kubernetes_pod_annotation_prometheus_io_port], action: replace, regex: \"([^:]+)(?::\\\\d+)?;(\\\\d+)\", replacement: \"$1:$2\", target_label: __address__}}\n\
         \x20     - {{source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_path], action: replace, regex: \"(.+)\", target_label: __metrics_path__}}\n\
         \x20     - {{source_labels: [__meta_kubernetes_pod_node_name], target_label: node}}\n\
         \x20     - {{source_labels: [__meta_kubernetes_pod_node_name], target_label: instance}}\n",
        rules = rules.display(),
    );
    let dir = bed.scratch("prometheus");
    std::fs::create_dir_all(&dir).unwrap();
    let config_path = dir.join("prometheus.yml");
    std::fs::write(&config_path, config).unwrap();
    cluster
        .spawn(
            "prometheus",
            &support::cluster::peer("prometheus", PROMETHEUS),
            &[
                &format!("--config.file={}", config_path.display()),
                &format!("--storage.tsdb.path={}", dir.join("data").display()),
                &format!("--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}"),
            ],
        )
        .unwrap_or_else(|e| panic!("{TEST}: starting Prometheus: {e}"));
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
