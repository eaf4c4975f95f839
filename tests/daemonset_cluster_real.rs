//! The shipped DaemonSet on a real cluster (issue 45): a control plane
//! built from its Go modules (etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler) and a real kubelet registered as the bed's node, against
//! the bed's real containerd; the image built here with buildah; the
//! DaemonSet applied with `kubectl apply -k` through an overlay of the test's
//! own over `deploy/overlays/default` that only names the image and moves
//! the host paths to the bed's (as the k3s overlay moves them to k3s's).
//! kubelet admits the pod spec, mounts its hostPaths, applies its security
//! context and runs its shell loop: the pod becomes Ready, the metrics it
//! writes equal `nodectl check -o prometheus` run on the host, and its log
//! (`kubectl logs`, the list `check` prints each minute) lists the findings
//! the host's report has.
//!
//! One leftover of every kind the issue names is made before the pod's
//! first look, each in a way kubelet leaves alone, and each must be counted
//! 1 by the pod and by the host, be the host's finding of that kind with
//! the id the test gave it, and be in the pod's log by kind and id (each
//! kind's own real test shows containerd's own code path leaving it):
//! - leaked-shim: a shim containerd has no record of
//!   (`support::orphan_shim`);
//! - leaked-mount and orphan-bundle: a task bundle no record names, a
//!   tmpfs still on its rootfs (`TestBed::leak_rootfs`);
//! - leaked-ip: a pod whose CNI DEL failed "not found"
//!   (tests/leaked_ip_real.rs), made before kubelet starts: kubelet stops
//!   a sandbox it did not make as soon as it sees it;
//! - leaked-netns: an empty `cni-<uuid>` namespace mounted in CRI's netns
//!   directory, no record naming it (`support::mount_empty_netns`);
//! - duplicate-sandbox-name: a second record of the `twin` pod's sandbox
//!   container (`TestBed::twin_sandbox_record`, as
//!   tests/duplicate_sandbox_name_real.rs);
//! - orphan-pod-dir: the directory of a uid no pod has with an emptyDir
//!   still mounted below it. kubelet's housekeeping (`cleanupOrphanedPodDirs`,
//!   every 2 s) keeps a pod directory while a volume is mounted below it
//!   (`podVolumesExist`), and its volume manager reconstructs (and then
//!   unmounts) the volumes it finds on disk only once, at its start: this
//!   one is made after. Without the mount the pod counted 0: kubelet had
//!   removed it;
//! - leaked-pod-cgroup: a pod slice of kubelet's systemd cgroup driver under
//!   kubelet's cgroup root, of a uid no pod has, as a node whose kubelet
//!   moved from the systemd driver to cgroupfs (its config, or from 1.31
//!   containerd 2.x's answer to `RuntimeConfig`) keeps it: the cgroupfs
//!   driver walks only `<root>/kubepods` (`GetAllPodsFromCgroups`). A pod
//!   cgroup in kubelet's own layout cannot be left under a running kubelet
//!   (made there, the pod counted 0): `cleanupOrphanedPodCgroups` kills what
//!   runs in, and removes, the cgroup of every uid it does not run within
//!   2 s, unless that pod's volumes are still mounted, and then its pod
//!   directory is there, which makes nodectl call it an `orphan-pod-dir` and
//!   its cgroup not leaked (kubelet has not let that pod go);
//! - zombie, on the alert's line only ([`ALERT_LINE`]): the `stuck` pod's
//!   container killed while its shim's `umount2` of the rootfs is held
//!   (strace), so CRI's exit handler gives up and keeps it RUNNING
//!   (tests/zombies_real.rs); the held thread is also a `shim-blocked`. The
//!   same zombie then fires the alert, and is still held when `kubectl
//!   debug node`'s first pod, blind to CRI's store, tells it by CRI's own
//!   word (it reported it as a `cri-drift` before, which the host leaves to
//!   its zombie finding); it is let go after. Not on
//!   the other lines: while a shim sits in `umount2`, containerd's
//!   Tasks.List waits 2 s for it in every look, and the zombie made the test
//!   40 to 70 s longer a line (1.6.20, 2.0.11).
//!
//! The other kinds (late-exit, leaked-snapshot, leaked-sandbox,
//! failing-sandbox, cri-drift, cri-slow, api-unreachable) are compared as
//! the two views count them, 0 here.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_cri::v1::{ContainerFilter, ListContainersRequest};

use support::cluster::{NODE, NODE_IP};
use support::{Cluster, Line, TestBed, NAMESPACE, NODECTL_IMAGE};

const TEST: &str = "daemonset_cluster_real";

/// Both views judge without the grace periods the planted kinds have. The
/// sandbox grace stays: a deleted DaemonSet pod's stopped sandbox waits for
/// kubelet's container GC (about a minute), and without it that sandbox
/// was a `leaked-sandbox` to one look and gone to the next.
const GRACE: [&str; 4] = ["--settle", "0s", "--ip-grace", "0s"];
/// The first look drops the sandbox grace too, on the default overlay's
/// pod and on the host: no DaemonSet pod has been deleted yet, and
/// `leaked-netns`, `orphan-pod-dir` and `leaked-pod-cgroup` are judged past
/// it (10 min), on ages nothing can set back (a netns's is its nsfs
/// inode's). The later looks keep it, and may count those three 0.
const FIRST_LOOK: [&str; 2] = ["--sandbox-grace", "0s"];

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
/// the k3s overlay passes k3s's), no grace periods ([`GRACE`]) and the
/// arguments of `extra`.
fn overlay(
    dir: &Path,
    base: &str,
    moved: &[(&str, &Path)],
    address: &Path,
    ipam: &Path,
    extra: &[&str],
) {
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
    let mut args: Vec<String> = GRACE
        .iter()
        .chain(extra)
        .map(|arg| arg.to_string())
        .collect();
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
    let planting = Instant::now();

    // The image, built here (in a thread of its own, while the leftovers
    // are made) and imported where CRI looks for images.
    let work = tempfile::tempdir().unwrap();
    let image = {
        let (ctr, address) = (bed.ctr(), bed.address().to_path_buf());
        let work = work.path().to_path_buf();
        std::thread::spawn(move || build_and_import(&ctr, &address, &work))
    };

    // The pods kubelet runs for the leftovers made of a pod's (`twin`'s
    // sandbox gets a second record; on the alert's line `stuck`'s container
    // becomes the zombie). The API server admits a pod only once its
    // namespace's `default` service account is there, which the controller
    // manager makes a few seconds after the node is Ready.
    let with_zombie = bed.line() == ALERT_LINE;
    let mut pods = vec![TWIN_POD];
    if with_zombie {
        pods.push(ZOMBIE_POD);
    }
    let manifest = bed.scratch("planted-pods.yaml");
    let sleepers: Vec<String> = pods.iter().map(|pod| sleeper(pod)).collect();
    std::fs::write(&manifest, sleepers.join("---\n")).unwrap();
    let accounted = support::wait_until(Duration::from_secs(60), || {
        cluster
            .kubectl(&["-n", "default", "get", "serviceaccount", "default"])
            .is_ok_and(|out| out.status.success())
    });
    assert!(accounted, "{TEST}: no default service account in 60 s");
    cluster.kubectl_ok(&["apply", "-f", manifest.to_str().unwrap()]);

    let Planted {
        ids: planted,
        zombie,
        _shim,
        _slice,
    } = plant(&cluster, &bed, &leaked_ip, &pods).await;
    image
        .join()
        .expect("the image's thread")
        .unwrap_or_else(|e| panic!("{TEST}: {e}"));
    // CRI's exit handler gives the shim's delete 10 s (`handleEventTimeout`)
    // before it gives up; until then nodectl calls the dead container an
    // exit being recorded, not a zombie. The pod's first look comes after.
    if let Some(zombie) = &zombie {
        std::thread::sleep(ZOMBIE_SETTLED.saturating_sub(zombie.exited.elapsed()));
    }
    eprintln!(
        "{TEST}: {}: planted {planted:?} in {:.1} s (the image built beside)",
        bed.containerd_version(),
        planting.elapsed().as_secs_f64()
    );

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
    // textfile directory, its list into the pod's log.
    let default = bed.scratch("overlay-default");
    let mut with_textfile = moved.clone();
    with_textfile.push(("textfile", &textfile));
    overlay(
        &default,
        "default",
        &with_textfile,
        bed.address(),
        &cni_ipam,
        &FIRST_LOOK,
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
    // The host's look, its report and its `-o prometheus` metrics (written
    // by `--textfile` with the same renderer) of that one look.
    let host_metrics = bed.scratch("host.prom");
    let mut first_look = vec!["check", "-o", "json", "--textfile"];
    first_look.push(host_metrics.to_str().unwrap());
    first_look.extend(GRACE);
    first_look.extend(FIRST_LOOK);
    let host_doc = support::report(&bed.nodectl(&first_look));
    let host = std::fs::read_to_string(&host_metrics).unwrap();
    eprintln!("{TEST}: in the pod:\n{in_pod}\n{TEST}: on the host:\n{host}");
    let pod = samples(&in_pod);
    assert_same(&cluster, &bed, &pod, &samples(&host));
    // Not equal by both being blind or empty: each planted kind is counted,
    // and is what the test planted.
    assert!(
        PLANTED
            .iter()
            .all(|kind| planted.iter().any(|(k, _)| k == kind)),
        "{TEST}: every kind is planted: {planted:?}"
    );
    for (kind, _) in &planted {
        let series = format!("nodectl_findings{{command=\"check\",kind=\"{kind}\"}}");
        assert_eq!(
            pod.get(&series).map(String::as_str),
            Some("1"),
            "{series}: {in_pod}"
        );
    }
    for (kind, id) in &planted {
        assert_eq!(
            support::ids_of_kind(&host_doc, kind),
            std::slice::from_ref(id),
            "{TEST}: the host's {kind} is not the one planted: {host_doc:#}"
        );
    }
    // Its log lists what the host's report has, kind and id (the first 13
    // characters the list shows), on the look the metrics are of: the
    // first, whose list follows its metrics file by a moment.
    let listed = support::wait_until(Duration::from_secs(30), || {
        pod_log(&cluster).contains(LIST_END)
    });
    let log = pod_log(&cluster);
    assert!(listed, "{TEST}: the pod's log has no list:\n{log}");
    let reported: BTreeSet<(String, String)> = support::finding_keys(&host_doc)
        .into_iter()
        .map(|(kind, id)| (kind, id.chars().take(13).collect()))
        .collect();
    assert_eq!(
        logged_findings(&log),
        reported,
        "{TEST}: the pod's log lists other findings than the host's report:\n{log}"
    );
    eprintln!(
        "{TEST}: {}: the pod counted and logged each planted kind; its log:\n{log}",
        bed.containerd_version(),
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
    overlay(&serve, "serve", &moved, bed.address(), &cni_ipam, &[]);
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
    if let Some(zombie) = &zombie {
        zombie_alert_fires_and_holds_while_the_pod_is_blind(&cluster, &bed, &serve, zombie).await;
    }
    delete(&cluster, &serve);

    // How an SRE reaches a node with no SSH: `kubectl debug node` with the
    // sysadmin profile (privileged, the host's pid, network and ipc
    // namespaces, the host's / at /host).
    let debugged = debug_node(&cluster, None);
    // Its pod cannot read CRI's store (containerd's root is not at its
    // path there), yet tells the held zombie as one by CRI's own word (its
    // ContainerStatus, asked of the daemon found through the host's pids):
    // before, it called it a `cri-drift`, CRI RUNNING against a task gone.
    let in_flux = match zombie {
        Some(zombie) => {
            let told = debugged["findings"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["kind"] == "zombie" && f["id"] == zombie.container.as_str());
            assert_eq!(
                told.map(|f| &f["evidence"]["recorded_by"]),
                Some(&serde_json::json!("cri_api")),
                "{TEST}: kubectl debug node did not tell the zombie {} by CRI's word: {debugged:#}",
                zombie.container
            );
            // Its cause too: the shim of the sandbox CRI lists it in (the
            // bundles unseen there), in the held umount2.
            assert_eq!(
                told.map(|f| &f["evidence"]["shim_in_umount2"]),
                Some(&serde_json::json!(true)),
                "{TEST}: kubectl debug node did not see the zombie's shim in umount2: {debugged:#}"
            );
            assert!(
                !support::ids_of_kind(&debugged, "cri-drift").contains(&zombie.container),
                "{TEST}: kubectl debug node called the zombie a drift too: {debugged:#}"
            );
            assert!(
                zombie.held_since.elapsed() < ZOMBIE_HOLD,
                "{TEST}: the zombie outlived its hold: nothing above proves kubectl debug node's"
            );
            eprintln!(
                "{TEST}: {}: kubectl debug node told the zombie by CRI's word: {}",
                bed.containerd_version(),
                told.unwrap()["summary"]
            );
            release(&cluster, zombie)
        }
        None => Vec::new(),
    };
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
    for (kind, id) in planted
        .iter()
        .filter(|(kind, id)| !FIRST_LOOK_ONLY.contains(kind) && !in_flux.contains(id))
    {
        assert!(
            support::ids_of_kind(&shown, kind).contains(id),
            "{TEST}: kubectl debug node with the gaps' mounts finds no {kind} {id}: {shown:#}"
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
/// How long the zombie's rootfs unmount is held, from before the DaemonSet's
/// first look: past the default overlay's comparisons and the serve
/// overlay's, the alert's pending (a look and a scrape), its `for: 5m`, and
/// the blind pod's rollout.
const ZOMBIE_HOLD: Duration = Duration::from_secs(1200);
/// How long after the zombie's exit the DaemonSet's first look may come:
/// CRI's exit handler's deadline (10 s) and some.
const ZOMBIE_SETTLED: Duration = Duration::from_secs(12);
/// The pod whose container is the zombie, and the one whose sandbox gets a
/// twin record.
const ZOMBIE_POD: &str = "stuck";
const TWIN_POD: &str = "twin";

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

/// The planted zombie (its container exited while its shim sits in the
/// held umount2, so CRI's exit handler gives up and CRI keeps it RUNNING),
/// which the serve pod reports: the shipped rule goes pending and then
/// fires after its `for: 5m`. Then containerd's root and the host's pids
/// are taken from the DaemonSet (a patched overlay): its new pod can read
/// neither CRI's store nor, finding no daemon, ask CRI's own word on the
/// container (which tells the zombie where only the store is hidden: see
/// `kubectl debug node`), reports the zombie check blind, and the alert
/// keeps firing on the last count seen.
async fn zombie_alert_fires_and_holds_while_the_pod_is_blind(
    cluster: &Cluster,
    bed: &TestBed,
    serve: &Path,
    zombie: &Zombie,
) {
    const ALERT: &str = "ContainerdZombieContainer";
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
        "{TEST}: {}: {ALERT} fired {:.0} s after the zombie's exit",
        bed.containerd_version(),
        zombie.exited.elapsed().as_secs_f64()
    );

    // Blind: the DaemonSet without containerd's root, nor the host's pids.
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
         - {op: remove, path: /spec/template/spec/containers/0/volumeMounts/0}\n\
         - {op: test, path: /spec/template/spec/hostPID, value: true}\n\
         - {op: replace, path: /spec/template/spec/hostPID, value: false}\n",
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
        zombie.held_since.elapsed() < ZOMBIE_HOLD,
        "{TEST}: the zombie outlived its hold: nothing above proves the blind case"
    );
    eprintln!(
        "{TEST}: {}: {ALERT} still firing with the pod blind",
        bed.containerd_version()
    );
}

/// Lets the zombie's held unmount go and deletes its pod: the ids it
/// leaves in flux (see below), for the comparisons that follow to leave out.
fn release(cluster: &Cluster, zombie: Zombie) -> Vec<String> {
    // Let the unmount go. CRI's retry of the exit ends it when it next
    // runs, but after minutes of failures its backoff has grown to
    // containerd's most (5 min): until then the container may turn from
    // zombie to late exit at any moment, and its pod, deleted, goes when
    // it has: its ids (the pod's uid names its directory and cgroup) are
    // returned for the comparisons that follow to leave out.
    let Zombie {
        pod_uid,
        sandbox,
        container,
        held,
        ..
    } = zombie;
    drop(held);
    cluster.kubectl_ok(&[
        "delete",
        "pod",
        ZOMBIE_POD,
        "--grace-period=0",
        "--force",
        "--wait=false",
    ]);
    vec![container, sandbox, pod_uid]
}

/// The kinds the test plants on every line (see the module's doc), each
/// counted 1 by the DaemonSet's first look and the host's; the alert's line
/// adds a zombie.
const PLANTED: [&str; 8] = [
    "leaked-shim",
    "leaked-mount",
    "orphan-bundle",
    "leaked-ip",
    "leaked-netns",
    "duplicate-sandbox-name",
    "orphan-pod-dir",
    "leaked-pod-cgroup",
];
/// Of [`PLANTED`], those a later look need not count: judged past the
/// sandbox grace only the first look drops (see [`FIRST_LOOK`]).
const FIRST_LOOK_ONLY: [&str; 3] = ["leaked-netns", "orphan-pod-dir", "leaked-pod-cgroup"];
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

/// The DaemonSet pod's log, whole (with a selector kubectl shows the last
/// 10 lines unless told).
fn pod_log(cluster: &Cluster) -> String {
    cluster
        .kubectl(&[
            "-n",
            "kube-system",
            "logs",
            "-l",
            "app.kubernetes.io/name=nodectl",
            "--tail=-1",
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

/// Prometheus (built from its Go module) in containerd's network namespace,
/// with the shipped job and rules (deploy/prometheus/scrape-pods.yaml:
/// Kubernetes service discovery of pods, keeping those annotated
/// `prometheus.io/scrape`, at their annotated port and path, the node's
/// name in `node` and in `instance`; docs/fleet.md says why) and, as a
/// Prometheus outside the cluster needs, this API server and the admin's
/// client certificate where an in-cluster one takes its service account's;
/// every 2 s. It ends with the cluster.
fn start_prometheus(cluster: &mut Cluster, bed: &TestBed) {
    let pki = cluster.dir().join("pki");
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus");
    let text = std::fs::read_to_string(shipped.join("scrape-pods.yaml")).unwrap();
    let mut config: serde_json::Value = yaml_serde::from_str(&text)
        .unwrap_or_else(|e| panic!("{TEST}: deploy/prometheus/scrape-pods.yaml: {e}"));
    config["global"] = serde_json::json!({"scrape_interval": "2s", "evaluation_interval": "2s"});
    // Its rule files are named beside it.
    for rule_file in config["rule_files"].as_array_mut().into_iter().flatten() {
        let name = rule_file.as_str().unwrap_or_default().to_string();
        *rule_file = shipped.join(name).display().to_string().into();
    }
    let jobs = config["scrape_configs"]
        .as_array_mut()
        .expect("scrape_configs");
    assert_eq!(
        jobs.len(),
        1,
        "{TEST}: the shipped scrape config has one job"
    );
    for discovery in jobs[0]["kubernetes_sd_configs"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        discovery["api_server"] = format!("https://{NODE_IP}:16443").into();
        discovery["tls_config"] = serde_json::json!({
            "ca_file": pki.join("ca.crt"),
            "cert_file": pki.join("admin.crt"),
            "key_file": pki.join("admin.key"),
        });
    }
    // JSON is YAML: Prometheus reads it as it reads the shipped file.
    let config = serde_json::to_string_pretty(&config).unwrap();
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

/// The line `check`'s list ends with (without `-o wide`), after its
/// findings.
const LIST_END: &str = "Each finding's evidence, likely cause and what to do";

/// The findings of the first list in a DaemonSet pod's log (the rows of
/// `check`'s list: kind, severity, pod/container, id cut to 13
/// characters, what is wrong), as (kind, id as shown).
fn logged_findings(log: &str) -> BTreeSet<(String, String)> {
    let mut lines = log
        .lines()
        .skip_while(|line| !(line.starts_with("KIND") && line.contains("SEVERITY")))
        .skip(1);
    let mut rows = BTreeSet::new();
    for line in lines.by_ref() {
        let cells: Vec<&str> = line.split_whitespace().collect();
        let [kind, severity, _who, id, ..] = cells[..] else {
            break;
        };
        if !["critical", "warning"].contains(&severity) {
            break;
        }
        rows.insert((kind.to_string(), id.to_string()));
    }
    rows
}

/// A pod of the busybox image on the node that sleeps (no token, never
/// restarted), named `name` in `default`.
fn sleeper(name: &str) -> String {
    let image = support::IMAGE;
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\n\
         spec:\n  nodeName: {NODE}\n  restartPolicy: Never\n  \
         automountServiceAccountToken: false\n  containers:\n  - name: app\n    \
         image: \"{image}\"\n    imagePullPolicy: Never\n    \
         command: [/bin/sh, -c, sleep 3600]\n"
    )
}

/// Builds the DaemonSet's image with the nodectl under test (buildah's
/// storage in `work`) and imports it into the `k8s.io` namespace of the
/// containerd at `address` with `ctr`.
fn build_and_import(ctr: &Path, address: &Path, work: &Path) -> Result<(), String> {
    let archive = work.join("nodectl-oci.tar");
    support::nodectl_image::build(&support::nodectl_image::binary(TEST), work, &archive)
        .map_err(|e| format!("building the image: {e}"))?;
    let imported = support::run_bounded(
        std::process::Command::new(ctr)
            .arg("--address")
            .arg(address)
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
    )?;
    match imported.status.success() {
        true => Ok(()),
        false => Err(format!(
            "ctr images import: {}",
            String::from_utf8_lossy(&imported.stderr)
        )),
    }
}

/// What [`plant`] made.
struct Planted {
    /// Each kind planted with the id the host's report gives it.
    ids: Vec<(&'static str, String)>,
    zombie: Option<Zombie>,
    _shim: support::OrphanShim,
    _slice: SystemdSlice,
}

/// The zombie: [`ZOMBIE_POD`]'s container, its process gone while its
/// shim's unmount of its rootfs is held.
struct Zombie {
    pod_uid: String,
    sandbox: String,
    container: String,
    held: support::Strace,
    held_since: Instant,
    /// When its shim was seen in the held unmount.
    exited: Instant,
}

/// One leftover of each kind of [`PLANTED`] (see the module's doc), the
/// leaked address `leaked_ip` made before, and a zombie when `pods` (the
/// pods applied for it, [`TWIN_POD`]'s always) has [`ZOMBIE_POD`]. Each id
/// is unique to this run by the clock: scripts/test runs the lines side by
/// side.
async fn plant(
    cluster: &Cluster,
    bed: &TestBed,
    leaked_ip: &support::LeakedIp,
    pods: &[&str],
) -> Planted {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let (high, low) = ((now >> 48) as u32, now & 0xffff_ffff_ffff);
    // Theirs are the only pods in `default`.
    let get = [
        "-n",
        "default",
        "get",
        "pod",
        "-o",
        "jsonpath={.items[*].status.phase}",
    ];
    let all_running = vec!["Running"; pods.len()].join(" ");
    let running = support::wait_until(Duration::from_secs(90), || {
        cluster
            .kubectl(&get)
            .is_ok_and(|out| out.stdout == all_running.as_bytes())
    });
    assert!(
        running,
        "{TEST}: the planted pods never ran: {}",
        cluster.log_tails()
    );
    // Each pod's sandbox, and its metadata (uid, attempt).
    let mut sandboxes = BTreeMap::new();
    for id in bed.listed_sandboxes().await {
        let Ok(status) = bed.sandbox_status(&id).await else {
            continue;
        };
        if let Some(meta) = status.metadata.filter(|m| m.namespace == "default") {
            sandboxes.insert(meta.name.clone(), (id, meta));
        }
    }
    let of = |pod: &str| {
        sandboxes
            .get(pod)
            .cloned()
            .unwrap_or_else(|| panic!("{TEST}: no sandbox of {pod}: {sandboxes:?}"))
    };

    // duplicate-sandbox-name: CRI's name for the twin pod, carried by its
    // sandbox container and a copy.
    let (twin_sandbox, twin) = of(TWIN_POD);
    bed.twin_sandbox_record(&twin_sandbox).await;
    let name = format!(
        "{}_{}_{}_{}",
        twin.name, twin.namespace, twin.uid, twin.attempt
    );

    let mut ids = vec![("duplicate-sandbox-name", name)];
    let zombie = match pods.contains(&ZOMBIE_POD) {
        true => {
            let (sandbox, stuck) = of(ZOMBIE_POD);
            let zombie = zombie(bed, sandbox, stuck.uid).await;
            ids.push(("zombie", zombie.container.clone()));
            Some(zombie)
        }
        false => None,
    };

    // leaked-shim, and leaked-mount with orphan-bundle (one bundle).
    let shim = bed.start_orphan_shim(&format!("{:016x}{}", now as u64, "d".repeat(48)));
    let bundle = format!("{}{:016x}{}", "b".repeat(8), now as u64, "b".repeat(40));
    bed.leak_rootfs(&bundle);
    // leaked-netns.
    let netns = format!("cni-{high:08x}-0000-4000-8000-{low:012x}");
    std::fs::create_dir_all(bed.netns_dir()).unwrap();
    support::mount_empty_netns(&bed.netns_dir().join(&netns));
    // orphan-pod-dir and leaked-pod-cgroup, each of a uid no pod has.
    let dir_uid = format!("{high:08x}-0d1d-4000-8000-{low:012x}");
    orphan_pod_dir(&cluster.kubelet_root, &dir_uid);
    let slice_uid = format!("{high:08x}-c6c6-4000-8000-{low:012x}");
    let slice = SystemdSlice::make(bed.cgroup_parent(), &slice_uid);
    ids.extend([
        ("leaked-shim", shim.id.clone()),
        ("leaked-mount", bundle.clone()),
        ("orphan-bundle", bundle),
        ("leaked-ip", leaked_ip.sandbox_id.clone()),
        ("leaked-netns", netns),
        ("orphan-pod-dir", dir_uid),
        ("leaked-pod-cgroup", slice_uid),
    ]);
    Planted {
        ids,
        zombie,
        _shim: shim,
        _slice: slice,
    }
}

/// The zombie: the container of the pod whose sandbox is `sandbox` (uid
/// `pod_uid`) killed (as the OOM killer would) with its shim's unmount of
/// the rootfs held.
async fn zombie(bed: &TestBed, sandbox: String, pod_uid: String) -> Zombie {
    let listed = bed
        .cri()
        .await
        .list_containers(ListContainersRequest {
            filter: Some(ContainerFilter {
                pod_sandbox_id: sandbox.clone(),
                ..ContainerFilter::default()
            }),
        })
        .await
        .expect("CRI lists the stuck pod's containers")
        .into_inner()
        .containers;
    let [container] = &listed[..] else {
        panic!("{TEST}: the stuck pod has one container: {listed:?}")
    };
    let container = container.id.clone();
    let shim = bed.shim_pid(&sandbox);
    let held_since = Instant::now();
    let held = bed.delay_umount2(shim, ZOMBIE_HOLD);
    let pid = bed.status(&container)["Pid"].as_i64().unwrap() as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("the stuck container's process killed");
    let unmounting =
        support::wait_until(Duration::from_secs(20), || support::procs::in_umount2(shim));
    assert!(
        unmounting,
        "{TEST}: the stuck pod's shim never unmounted its rootfs"
    );
    Zombie {
        pod_uid,
        sandbox,
        container,
        held,
        held_since,
        exited: Instant::now(),
    }
}

/// The directory kubelet keeps for the pod `uid` while its emptyDir `data`
/// is mounted (a tmpfs here), as when its unmount failed. kubelet's
/// housekeeping removes a pod directory with nothing mounted below it
/// within 2 s, so one it took while half made is made again.
fn orphan_pod_dir(kubelet_root: &Path, uid: &str) -> PathBuf {
    let volume = kubelet_root
        .join("pods")
        .join(uid)
        .join("volumes/kubernetes.io~empty-dir/data");
    for _ in 0..10 {
        let _ = std::fs::create_dir_all(&volume);
        let mounted = nix::mount::mount(
            Some("tmpfs"),
            &volume,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        );
        match mounted {
            Ok(()) => return volume,
            Err(nix::errno::Errno::ENOENT) => continue,
            Err(e) => panic!("{TEST}: mounting tmpfs at {}: {e}", volume.display()),
        }
    }
    panic!("{TEST}: kubelet removed {} ten times", volume.display())
}

/// A BestEffort pod's slice of kubelet's systemd cgroup driver under the
/// cgroup root `cgroup_root` (`support::systemd_besteffort_slice`), in
/// the hierarchy nodectl reads pod cgroups from (cgroup v2's, or v1's
/// pids); removed with the slices above it when dropped.
struct SystemdSlice(PathBuf);

impl SystemdSlice {
    fn make(cgroup_root: &str, uid: &str) -> SystemdSlice {
        let fs = Path::new("/sys/fs/cgroup");
        let hierarchy = match fs.join("cgroup.controllers").is_file() {
            true => fs.to_path_buf(),
            false => fs.join("pids"),
        };
        let prefix = support::systemd_prefix(cgroup_root);
        let top = hierarchy.join(format!("{prefix}.slice"));
        let slice = top
            .join(format!(
                "{prefix}-kubepods.slice/{prefix}-kubepods-besteffort.slice"
            ))
            .join(support::systemd_besteffort_slice(cgroup_root, uid));
        std::fs::create_dir_all(&slice)
            .unwrap_or_else(|e| panic!("{TEST}: {}: {e}", slice.display()));
        SystemdSlice(top)
    }
}

impl Drop for SystemdSlice {
    fn drop(&mut self) {
        fn rmdir_tree(dir: &Path) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    rmdir_tree(&entry.path());
                }
            }
            let _ = std::fs::remove_dir(dir);
        }
        rmdir_tree(&self.0);
    }
}
