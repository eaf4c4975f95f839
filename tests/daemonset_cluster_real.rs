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

use support::{Cluster, TestBed, NAMESPACE, NODECTL_IMAGE};

const TEST: &str = "daemonset_cluster_real";

/// Both views judge without grace periods.
const GRACE: [&str; 6] = [
    "--settle",
    "0s",
    "--ip-grace",
    "0s",
    "--sandbox-grace",
    "0s",
];

/// The test overlay: the default overlay, the image built here, and each
/// host path the base mounts moved to the bed's (mounted at the same path
/// inside, as the base does), plus the bed's socket (`--address`, as the
/// k3s overlay passes k3s's).
fn overlay(
    dir: &Path,
    host_paths: &[(usize, &str, &Path)],
    address: &Path,
    ipam: &Path,
    textfile: &Path,
) {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/overlays/default");
    let (name, tag) = NODECTL_IMAGE.rsplit_once(':').unwrap();
    let kustomization = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n\
         kind: Kustomization\n\
         resources:\n  - {}\n\
         images:\n  - {{name: REGISTRY/nodectl, newName: {name}, newTag: \"{tag}\"}}\n\
         patches:\n  - target: {{group: apps, version: v1, kind: DaemonSet, name: nodectl}}\n    path: bed.yaml\n",
        relative(dir, &deploy).display()
    );
    std::fs::write(dir.join("kustomization.yaml"), kustomization).unwrap();
    let mut ops = String::from("---\n");
    let mut moved: Vec<(usize, &str, &Path)> = host_paths.to_vec();
    moved.push((2, "textfile", textfile));
    for (index, name, path) in moved {
        let path = path.display();
        ops.push_str(&format!(
            "- {{op: test, path: /spec/template/spec/volumes/{index}/name, value: {name}}}\n\
             - {{op: replace, path: /spec/template/spec/volumes/{index}/hostPath/path, value: \"{path}\"}}\n\
             - {{op: test, path: /spec/template/spec/containers/0/volumeMounts/{index}/name, value: {name}}}\n"
        ));
        if name != "textfile" {
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
    // The findings without their grace periods, the same on the host.
    for arg in GRACE {
        ops.push_str(&format!(
            "- {{op: add, path: /spec/template/spec/containers/0/args/-, value: \"{arg}\"}}\n"
        ));
    }
    ops.push_str(&format!(
        "- {{op: add, path: /spec/template/spec/containers/0/args/-, value: --address}}\n\
         - {{op: add, path: /spec/template/spec/containers/0/args/-, value: \"{}\"}}\n",
        address.display()
    ));
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

/// Set in the copy of the test run in a pid namespace of its own.
const IN_OWN_PID_NAMESPACE: &str = "NODECTL_TEST_IN_OWN_PID_NAMESPACE";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemonset_runs_on_a_real_cluster_and_reports_what_the_host_does() {
    let name = "the_daemonset_runs_on_a_real_cluster_and_reports_what_the_host_does";
    // The DaemonSet's nodectl proves containerd by PID 1's namespaces (it
    // runs with hostPID in a mount namespace of its own); this machine's
    // PID 1 cannot be read, so the whole node (containerd, the control
    // plane, kubelet and its pods) runs in a pid namespace of the test's
    // own, whose init (a shell, readable) stands for the host's.
    if std::env::var_os(IN_OWN_PID_NAMESPACE).is_none() {
        let mut launcher = std::process::Command::new("unshare");
        launcher
            .args(["--pid", "--fork", "--mount-proc", "--kill-child"])
            // Its mounts shared, as systemd makes a host's (unshare made
            // them private): the DaemonSet's HostToContainer mounts need a
            // shared or slave source.
            .args([
                "sh",
                "-c",
                r#"mount --make-rshared / && "$@"; exit $?"#,
                "sh",
            ]);
        support::run_again_inside(
            launcher,
            name,
            IN_OWN_PID_NAMESPACE,
            "in its own pid namespace",
        );
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
            "missing the image's base rootfs (scripts/peers makes it)",
        );
        return;
    }
    let Some(cluster) = Cluster::start(&bed, TEST) else {
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
    // look: an address host-local holds for a sandbox CRI no longer has,
    // and a shim no bundle records (its id unique per line by the clock:
    // scripts/test runs the lines side by side).
    let leaked_ip = bed.leak_pod_ip("leaked-ip").await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let _shim = bed.start_orphan_shim(&format!("{:016x}{}", now as u64, "d".repeat(48)));

    let overlay_dir = bed.scratch("overlay");
    let textfile = bed.scratch("textfile");
    std::fs::create_dir_all(&overlay_dir).unwrap();
    std::fs::create_dir_all(&textfile).unwrap();
    let (cni_conf, cni_ipam) = (bed.dir().join("cni/conf"), bed.dir().join("cni/ipam"));
    let pod_logs = bed.dir().join("pod-logs");
    let netns = bed.state().join("io.containerd.grpc.v1.cri/netns");
    std::fs::create_dir_all(&netns).unwrap();
    overlay(
        &overlay_dir,
        &[
            (0, "containerd-root", bed.root()),
            (1, "containerd-state", bed.state()),
            (3, "cni-conf", &cni_conf),
            // CRI mounts the bed's pods' netns under its state dir
            // (`netns_mounts_under_state_dir`), not /var/run/netns.
            (5, "netns", &netns),
            (6, "kubelet", &cluster.kubelet_root),
            (7, "pod-logs", &pod_logs),
        ],
        bed.address(),
        &cni_ipam,
        &textfile,
    );
    let overlay_arg = overlay_dir.display().to_string();
    let applied = cluster.kubectl_ok(&["apply", "-k", &overlay_arg]);
    eprintln!("{TEST}: {applied}");
    let ready = cluster.kubectl(&[
        "-n",
        "kube-system",
        "wait",
        "--for=condition=Ready",
        "pod",
        "-l",
        "app.kubernetes.io/name=nodectl",
        "--timeout=120s",
    ]);
    let ready = ready.is_ok_and(|out| out.status.success());
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

    // What the pod wrote, and what the host sees.
    let metrics = textfile.join("nodectl.prom");
    let written = support::wait_until(Duration::from_secs(90), || metrics.is_file());
    let logs = cluster
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
        .unwrap_or_default();
    assert!(
        written,
        "{TEST}: no metrics written by the pod; its log:\n{logs}"
    );
    let in_pod = std::fs::read_to_string(&metrics).unwrap();
    let mut host_args = vec!["check", "-o", "prometheus"];
    host_args.extend(GRACE);
    let host = bed.nodectl(&host_args);
    let on_host = String::from_utf8_lossy(&host.stdout).into_owned();
    eprintln!("{TEST}: in the pod:\n{in_pod}\n{TEST}: on the host:\n{on_host}");
    let (pod, host) = (samples(&in_pod), samples(&on_host));
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
    if !differ.is_empty() {
        let gaps = cluster
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
                &bed.address().display().to_string(),
            ])
            .map(|out| {
                String::from_utf8_lossy(&out.stdout).into_owned()
                    + &String::from_utf8_lossy(&out.stderr)
            })
            .unwrap_or_default();
        panic!(
            "{TEST}: the pod's metrics differ from the host's:\n{}\nthe pod's log:\n{logs}\nits report:\n{gaps}",
            differ.join("\n")
        );
    }

    // Not equal by both being blind or empty: each planted kind is counted.
    for kind in ["leaked-ip", "leaked-shim"] {
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

    cluster.kubectl_ok(&["delete", "-k", &overlay_arg, "--wait=true", "--timeout=60s"]);
    cluster.stop(&bed).await;
}
