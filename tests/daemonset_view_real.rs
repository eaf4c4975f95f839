//! The DaemonSet's view on one real node: every kind nodectl reports of
//! kubelet's, CNI's and containerd's leftovers planted on one networked bed
//! at once, and nodectl run as the host's root (the host view) and as
//! deploy/'s DaemonSet runs it (a mount namespace and a cgroup namespace of
//! its own, the host's directories at the same paths, the host's mount
//! table through PID 1, kubelet's roots as flags). Both must give exactly
//! the same findings, each of the seven planted kinds among them. Then each
//! directory the DaemonSet may fail to mount (CRI's store, kubelet's root,
//! the cgroup hierarchy, the netns directory, CNI's) is hidden in turn,
//! and SYS_ADMIN withheld: a gap, `nodectl_check_ok 0` for the kinds that
//! read it, and never a `nodectl_findings 0` beside a `nodectl_check_ok 0`.
//!
//! This machine's PID 1 cannot be read, so the test runs again as a child
//! of its own pid namespace's init (`unshare --pid --fork --mount-proc`):
//! that init, a shell, is the "host" whose mount namespace nodectl's is
//! told from; the bed's containerd runs beside it.
//!
//! How each kind is made (each one's own real test says why, per line):
//! - leaked-sandbox: containerd killed in a pod's CNI ADD and started again
//!   (tests/leaked_sandbox_real.rs), the bed's one restart;
//! - leaked-ip: a pod whose CNI DEL failed "not found"
//!   (tests/leaked_ip_real.rs);
//! - leaked-pod-cgroup: a pod in a kubepods pod cgroup, stopped and removed
//!   (tests/leaked_pod_cgroup_real.rs);
//! - orphan-pod-dir: a pod directory in kubelet's root no sandbox names
//!   (tests/orphan_pod_dir_real.rs);
//! - leaked-shim: a shim containerd has no record of
//!   (`support::orphan_shim`);
//! - leaked-netns: a namespace mounted in CRI's netns directory as
//!   containerd's `pkg/netns` mounts one (an nsfs bind, `cni-<uuid>`),
//!   with no record naming it and nothing in it (the record's removal is
//!   tests/leaked_netns_real.rs's; made directly here to spare the bed two
//!   more restarts);
//! - zombie: a container exiting while its shim's umount2 is held
//!   (tests/zombies_real.rs), held past the test's end.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use support::{procs, TestBed};

const TEST: &str = "daemonset_view_real";

/// The kinds planted, each of which both views must report.
const PLANTED: [&str; 7] = [
    "leaked-ip",
    "leaked-netns",
    "leaked-sandbox",
    "leaked-pod-cgroup",
    "orphan-pod-dir",
    "zombie",
    "leaked-shim",
];

/// The findings of a JSON report, as (kind, id).
fn kinds_and_ids(doc: &Value) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (text(&f["kind"]), text(&f["id"]))
        })
        .collect();
    found.sort();
    found
}

/// What the DaemonSet's container may lack of the host's.
enum Hidden {
    /// A host directory its overlay does not mount: absent in the
    /// container, or (below a directory it does mount) an empty tmpfs.
    Dir(PathBuf),
    /// No host cgroup hierarchy mounted: the container runtime's own
    /// mount of its cgroup namespace's (cgroup v2: a cgroup2 mount made in
    /// that namespace, rooted at nodectl's own cgroup; v1: a tmpfs at
    /// /sys/fs/cgroup, below which a runtime mounts each controller the
    /// same way).
    CgroupFs,
    /// SYS_ADMIN not granted (a cluster may refuse it): no pod network
    /// namespace can be joined to see its interfaces.
    SysAdmin,
}

/// Builds the DaemonSet container's root at `$1` and runs the rest of the
/// arguments in it: an image's (the host's /usr, as deploy/Containerfile's
/// Debian has one), its own /proc (of the host's pid namespace: hostPID),
/// /sys and /dev, every host path of `$2` (`:`-separated) mounted at the
/// same path as the overlays' hostPath volumes are (read-only, host to
/// container propagation), those of `$3` not, the host's cgroup hierarchy
/// if `$4` is `host`, the root read-only, nodectl (`$6`) at `/nodectl`;
/// nodectl then runs with the rest of the arguments and the capabilities
/// of `$5` only (setpriv's list, see [`daemonset_capabilities`]), or, given
/// `--stay`, the container stays (a pod's, for [`Pod::run`]).
const CONTAINER: &str = r#"set -eu
new=$1 mounted=$2 hidden=$3 cgroup=$4 caps=$5; shift 5
mount -t tmpfs -o mode=0755 tmpfs "$new"
mkdir -p "$new/usr" "$new/proc" "$new/sys" "$new/dev" "$new/tmp"
for link in bin lib lib64 sbin; do
    if [ -L "/$link" ]; then ln -s "$(readlink "/$link")" "$new/$link"; fi
done
mount --rbind -o ro /usr "$new/usr"
mount -t proc proc "$new/proc"
mount -t sysfs -o ro sysfs "$new/sys"
mount --rbind /dev "$new/dev"
case $cgroup in
host) mount --rbind /sys/fs/cgroup "$new/sys/fs/cgroup" ;;
*) if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
       mount -t cgroup2 none "$new/sys/fs/cgroup"
   else
       mount -t tmpfs tmpfs "$new/sys/fs/cgroup"
   fi ;;
esac
IFS=:
for path in $mounted; do
    if [ -d "$path" ]; then mkdir -p "$new$path"
    else mkdir -p "$(dirname "$new$path")"; touch "$new$path"; fi
    mount --rbind "$path" "$new$path"
    mount --make-rslave "$new$path"
    mount -o remount,bind,ro "$new$path"
done
for path in $hidden; do
    if [ -d "$new$path" ]; then mount -t tmpfs tmpfs "$new$path"; fi
done
unset IFS
touch "$new/nodectl"
mount --bind "$1" "$new/nodectl"
shift
mount -o remount,bind,ro "$new"
if [ "$1" = --stay ]; then exec chroot "$new" sleep infinity; fi
exec chroot "$new" setpriv --bounding-set="-all$caps" --inh-caps=-all /nodectl "$@""#;

/// The capabilities deploy/'s base DaemonSet adds (its `add: [...]`), as
/// setpriv's list: `,+sys_ptrace,...`.
fn daemonset_capabilities() -> String {
    let base = include_str!("../deploy/base/daemonset.yaml");
    let Some(added) = base
        .lines()
        .find_map(|line| line.trim().strip_prefix("add: ["))
    else {
        panic!("deploy/base/daemonset.yaml adds no capabilities")
    };
    added
        .trim_end_matches(']')
        .split(',')
        .map(|cap| format!(",+{}", cap.trim().to_lowercase()))
        .collect()
}

/// The command that makes deploy/'s DaemonSet container (see [`CONTAINER`])
/// in a mount namespace (its mounts' propagation `propagation`) and a
/// cgroup namespace of its own (`unshare -m -C`; on cgroup v2 a runtime
/// gives every container one), `hidden` as a container without their
/// mounts has them; its arguments end with nodectl's binary.
fn container_command(
    bed: &TestBed,
    mounted: &[&Path],
    hidden: &[Hidden],
    propagation: &str,
    name: &str,
) -> std::process::Command {
    let joined = |paths: &mut dyn Iterator<Item = &Path>| {
        paths
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(":")
    };
    let hidden_dirs = joined(&mut hidden.iter().filter_map(|h| match h {
        Hidden::Dir(dir) => Some(dir.as_path()),
        Hidden::CgroupFs | Hidden::SysAdmin => None,
    }));
    let shown = joined(&mut mounted.iter().copied().filter(|p| {
        !hidden
            .iter()
            .any(|h| matches!(h, Hidden::Dir(dir) if dir.as_path() == *p))
    }));
    let cgroup = match hidden.iter().any(|h| matches!(h, Hidden::CgroupFs)) {
        true => "own",
        false => "host",
    };
    let new_root = bed.scratch(name);
    std::fs::create_dir_all(&new_root).unwrap();
    let mut command = std::process::Command::new("unshare");
    command.args(["-m", "-C", "--propagation", propagation, "sh", "-c"]);
    command.args([CONTAINER, "sh"]);
    command
        .arg(&new_root)
        .arg(shown)
        .arg(hidden_dirs)
        .arg(cgroup)
        .arg(capabilities(hidden));
    command.arg(env!("CARGO_BIN_EXE_nodectl"));
    command.stdin(std::process::Stdio::null());
    command
}

/// setpriv's list of the capabilities the DaemonSet has, less SYS_ADMIN
/// if `hidden` says so.
fn capabilities(hidden: &[Hidden]) -> String {
    let capabilities = daemonset_capabilities();
    match hidden.iter().any(|h| matches!(h, Hidden::SysAdmin)) {
        true => capabilities.replace(",+sys_admin", ""),
        false => capabilities,
    }
}

/// nodectl's arguments as the DaemonSet passes them: `args` (no
/// `--mountinfo`: containerd's own table, reached through hostPID), and
/// containerd's root, state and socket as the k3s, rke2 and
/// microk8s overlays pass them; its config not (no overlay mounts it):
/// nodectl reads the running containerd's through /proc/<pid>/root.
fn daemonset_args(bed: &TestBed, args: &[&str]) -> Vec<String> {
    let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    for (flag, path) in [
        ("--root", bed.root()),
        ("--state", bed.state()),
        ("--address", bed.address()),
    ] {
        all.extend([flag.to_string(), path.display().to_string()]);
    }
    all
}

/// nodectl run once in a DaemonSet container made for it, `hidden` as a
/// container without their mounts has them.
fn in_daemonset_view(
    bed: &TestBed,
    mounted: &[&Path],
    hidden: &[Hidden],
    args: &[&str],
) -> std::process::Output {
    let mut command = container_command(bed, mounted, hidden, "private", "daemonset-root");
    command.args(daemonset_args(bed, args));
    support::run_bounded(&mut command, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("nodectl in the DaemonSet's view: {e}"))
}

/// The DaemonSet's pod, made before the bed's pods: its container stays,
/// and nodectl runs in it (`nsenter`, its root, mount and cgroup
/// namespaces) as the pod's loop runs it. The host's mounts made after it
/// started reach it only through its mounts' propagation (slaves of the
/// host's, as `HostToContainer` makes them). Ended when dropped.
struct Pod {
    container: std::process::Child,
}

impl Pod {
    /// Its mounts' propagation `propagation` (`slave`: HostToContainer).
    fn start(bed: &TestBed, mounted: &[&Path], propagation: &str, name: &str) -> Pod {
        let mut command = container_command(bed, mounted, &[], propagation, name);
        command.arg("--stay").stderr(std::process::Stdio::piped());
        let mut container = command.spawn().expect("unshare");
        let pid = container.id();
        // 30 s: four lines' beds side by side on 2 cores once took over 10.
        let ready = support::wait_until(Duration::from_secs(30), || {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"));
            comm.is_ok_and(|c| c.trim() == "sleep") || !matches!(container.try_wait(), Ok(None))
        });
        if !ready || !matches!(container.try_wait(), Ok(None)) {
            let _ = container.kill();
            let output = container.wait_with_output();
            panic!("the DaemonSet's pod did not start: {output:?}");
        }
        Pod { container }
    }

    fn run(&self, bed: &TestBed, args: &[&str]) -> std::process::Output {
        let mut command = std::process::Command::new("nsenter");
        command
            .arg("-t")
            .arg(self.container.id().to_string())
            .args(["-m", "-C", "-r", "-w", "setpriv"])
            .arg(format!("--bounding-set=-all{}", capabilities(&[])))
            .args(["--inh-caps=-all", "/nodectl"])
            .args(daemonset_args(bed, args))
            .stdin(std::process::Stdio::null());
        support::run_bounded(&mut command, Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("nodectl in the DaemonSet's pod: {e}"))
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = self.container.kill();
        let _ = self.container.wait();
    }
}

/// The value of the sample `name{labels}` in Prometheus text, if written.
fn sample(metrics: &str, name: &str, labels: &str) -> Option<f64> {
    let prefix = format!("{name}{{{labels}}} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.trim().parse().ok())
}

/// The kinds `nodectl_check_ok` is written for.
fn kinds_written(metrics: &str) -> Vec<String> {
    metrics
        .lines()
        .filter_map(|line| line.strip_prefix("nodectl_check_ok{"))
        .filter_map(|rest| rest.split("kind=\"").nth(1))
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect()
}

/// `metrics` (nodectl's Prometheus text, `what` made it blind) has a gap of
/// `source`, `nodectl_check_ok 0` for each of `kinds`, and no
/// `nodectl_findings 0` for a kind written `nodectl_check_ok 0`.
fn blind_never_clear(what: &str, metrics: &str, source: &str, kinds: &[&str]) {
    let labels = |kind: &str| format!("command=\"check\",kind=\"{kind}\"");
    eprintln!(
        "{TEST}: {what}: {}",
        metrics
            .lines()
            .filter(|l| l.starts_with("nodectl_gaps{"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let gaps = sample(
        metrics,
        "nodectl_gaps",
        &format!("command=\"check\",source=\"{source}\""),
    );
    assert!(
        gaps.is_some_and(|n| n > 0.0),
        "{what}: a {source} gap\n{metrics}"
    );
    for kind in kinds {
        assert_eq!(
            sample(metrics, "nodectl_check_ok", &labels(kind)),
            Some(0.0),
            "{what}: {kind} unchecked\n{metrics}"
        );
    }
    // Never a count of 0 for a kind that was not checked.
    for kind in kinds_written(metrics) {
        if sample(metrics, "nodectl_check_ok", &labels(&kind)) == Some(0.0) {
            assert_ne!(
                sample(metrics, "nodectl_findings", &labels(&kind)),
                Some(0.0),
                "{what}: blind on {kind}, yet all clear\n{metrics}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemonset_sees_every_kind_the_host_does_and_a_hidden_source_is_a_gap() {
    const NAME: &str = "the_daemonset_sees_every_kind_the_host_does_and_a_hidden_source_is_a_gap";
    if !support::in_own_pid_namespace(NAME, true) {
        return;
    }
    let started = std::time::Instant::now();
    let Some(mut bed) = TestBed::start_networked(TEST).await else {
        return;
    };
    let _healthy = bed
        .run_pod("healthy", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    // kubelet's root and pod logs: one pod directory no sandbox names.
    let kubelet_dir = bed.scratch("kubelet");
    let orphan = "long-gone";
    std::fs::create_dir_all(kubelet_dir.join("pods").join(orphan).join("volumes")).unwrap();
    let pod_logs_dir = bed.scratch("pod-logs");
    std::fs::create_dir_all(&pod_logs_dir).unwrap();
    // The DaemonSet's mounts: every directory its overlays mount (libcni's
    // result cache is the host's /var/lib/cni/results, in the base's
    // cni-data, made by the first pod's ADD). Its pod starts before the
    // leftovers are made, after the bed's one containerd restart: the
    // bed's socket is not in its state directory, so it is mounted as a
    // file, and a restarted containerd makes a new one (on a node it is in
    // /run/containerd, mounted whole).
    let mounted: Vec<PathBuf> = [
        bed.root(),
        bed.state(),
        bed.address(),
        bed.cni().conf_dir.as_path(),
        bed.cni().data_dir.as_path(),
        Path::new("/var/lib/cni"),
        kubelet_dir.as_path(),
        pod_logs_dir.as_path(),
    ]
    .map(Path::to_path_buf)
    .into();
    let mounted: Vec<&Path> = mounted.iter().map(PathBuf::as_path).collect();
    let crashed = bed.crash_containerd_in_cni_add("crashed").await;
    let pod = Pod::start(&bed, &mounted, "slave", "daemonset-pod");
    // And one whose mounts do not follow the host's (no HostToContainer).
    let stale_pod = Pod::start(&bed, &mounted, "private", "stale-pod");
    let leaked_ip = bed.leak_pod_ip("leaked-ip").await;
    let (gone, gone_uid) = bed.run_sandbox_in_pod_cgroup("gone").await;
    assert!(
        bed.stop_and_remove_pod(&gone, Duration::from_secs(30))
            .await,
        "the gone pod is stopped and removed"
    );
    // In a pid namespace of its own every line's test process is pid 2:
    // the ids nodectl reports are told apart by the clock instead
    // (scripts/test runs the lines side by side).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let shim = bed.start_orphan_shim(&format!("{:016x}{}", now as u64, "d".repeat(48)));
    let netns = format!(
        "cni-{:08x}-0000-4000-8000-{:012x}",
        (now >> 48) as u32,
        now & 0xffff_ffff_ffff
    );
    support::mount_empty_netns(&bed.netns_dir().join(&netns));
    // Last, the zombie: its shim's umount2 held past the test's end.
    let stuck = bed
        .run_pod("stuck", "init", &["/bin/sh", "-c", "sleep 3"])
        .await;
    let stuck_shim = bed.shim_pid(&stuck.sandbox_id);
    let _held = bed.delay_umount2(stuck_shim, Duration::from_secs(90));
    let pid = bed.status(&stuck.container_id)["Pid"].as_i64().unwrap() as i32;
    let since = procs::stat(pid).expect("the container runs").starttime;
    assert!(
        support::wait_until(Duration::from_secs(20), || !procs::is_running_since(
            pid, since
        )),
        "the stuck container exits"
    );
    // CRI's exit handler's task.Delete reaches the shim's umount2 a moment
    // after the exit: both views look once it is there (shim-blocked too).
    assert!(
        support::wait_until(Duration::from_secs(10), || procs::in_umount2(stuck_shim)),
        "the stuck pod's shim unmounts its rootfs"
    );
    eprintln!(
        "{TEST}: {}: planted after {:.1} s",
        bed.containerd_version(),
        started.elapsed().as_secs_f64()
    );

    let (kubelet_root, pod_logs) = (
        kubelet_dir.display().to_string(),
        pod_logs_dir.display().to_string(),
    );
    let cgroup_root = bed.cgroup_parent().to_string();
    // The bed runs no kubelet: its roots are given by flag (as the
    // microk8s overlay gives its root), the same to both views.
    let args = |output: &'static str| -> Vec<String> {
        [
            "check",
            "--settle",
            "0s",
            "--ip-grace",
            "0s",
            "--sandbox-grace",
            "0s",
            "--kubelet-root",
            &kubelet_root,
            "--kubelet-pod-logs",
            &pod_logs,
            "--kubelet-cgroup-root",
            &cgroup_root,
            "-o",
            output,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let json = args("json");
    let json: Vec<&str> = json.iter().map(String::as_str).collect();
    let host = support::report(&bed.nodectl(&json));
    let found = kinds_and_ids(&host);
    let expected = [
        ("leaked-ip", leaked_ip.sandbox_id.as_str()),
        ("leaked-netns", netns.as_str()),
        ("leaked-sandbox", crashed.sandbox_id.as_str()),
        ("leaked-pod-cgroup", gone_uid.as_str()),
        ("orphan-pod-dir", orphan),
        ("zombie", stuck.container_id.as_str()),
        ("leaked-shim", shim.id.as_str()),
    ];
    for (kind, id) in expected {
        assert!(
            found.contains(&(kind.to_string(), id.to_string())),
            "the host view finds {kind} {id}: {found:?}\n{host:#}"
        );
    }
    assert!(
        PLANTED.iter().all(|k| expected.iter().any(|(e, _)| e == k)),
        "every planted kind is looked for"
    );

    // The DaemonSet's view, every directory its overlays mount mounted: the
    // same findings, in its pod started before the leftovers were made
    // and in a container made now.
    let in_pod = support::report(&pod.run(&bed, &json));
    assert_eq!(kinds_and_ids(&in_pod), found, "{in_pod:#}");
    let daemonset = support::report(&in_daemonset_view(&bed, &mounted, &[], &json));
    assert_eq!(kinds_and_ids(&daemonset), found, "{daemonset:#}");
    eprintln!(
        "{TEST}: {}: both views agree after {:.1} s: {found:?}",
        bed.containerd_version(),
        started.elapsed().as_secs_f64()
    );

    // Each directory the DaemonSet may not have, hidden in turn (and
    // SYS_ADMIN, which a cluster may refuse): a gap of its source, the
    // kinds that read it unchecked, never all clear.
    let sources: [(&str, Vec<Hidden>, &str, &[&str]); 6] = [
        (
            "CRI's store",
            vec![Hidden::Dir(bed.root().join("io.containerd.grpc.v1.cri"))],
            "cri-store",
            &["zombie"],
        ),
        (
            "kubelet's root",
            vec![Hidden::Dir(kubelet_dir.clone())],
            "kubelet",
            &["orphan-pod-dir", "leaked-pod-cgroup"],
        ),
        (
            "the cgroup hierarchy",
            vec![Hidden::CgroupFs],
            "kubelet",
            &["leaked-pod-cgroup"],
        ),
        (
            "the netns directory",
            vec![Hidden::Dir(bed.netns_dir())],
            "mountinfo",
            &["leaked-netns"],
        ),
        (
            "SYS_ADMIN",
            vec![Hidden::SysAdmin],
            "mountinfo",
            &["leaked-netns"],
        ),
        (
            "CNI's config and store",
            vec![
                Hidden::Dir(bed.cni().conf_dir.clone()),
                Hidden::Dir(bed.cni().data_dir.clone()),
                Hidden::Dir(PathBuf::from("/var/lib/cni")),
            ],
            "cni",
            &["leaked-ip"],
        ),
    ];
    let prometheus = args("prometheus");
    let prometheus: Vec<&str> = prometheus.iter().map(String::as_str).collect();
    // Each in a mount namespace of its own: all at once (each look mostly
    // waits), judged in turn.
    let outputs: Vec<std::process::Output> = std::thread::scope(|scope| {
        let runs: Vec<_> = sources
            .iter()
            .map(|(_, hidden, _, _)| {
                let (bed, mounted, prometheus) = (&bed, &mounted, &prometheus);
                scope.spawn(move || in_daemonset_view(bed, mounted, hidden, prometheus))
            })
            .collect();
        runs.into_iter().map(|run| run.join().unwrap()).collect()
    });
    for ((what, _, source, kinds), output) in sources.iter().zip(&outputs) {
        let metrics = String::from_utf8_lossy(&output.stdout);
        blind_never_clear(&format!("{what} hidden"), &metrics, source, kinds);
    }
    // CRI's store hidden, the zombie is still told, by CRI's own word (its
    // ContainerStatus, asked of the proven daemon for its pid): counted,
    // its check still not ok (another container's late exit is unseen).
    let store_hidden = String::from_utf8_lossy(&outputs[0].stdout);
    assert_eq!(
        sample(
            &store_hidden,
            "nodectl_findings",
            "command=\"check\",kind=\"zombie\""
        ),
        Some(1.0),
        "CRI's store hidden: the zombie told by CRI's word\n{store_hidden}"
    );
    // A pod whose mounts do not follow the host's: the leaked namespace,
    // mounted after it started, is a plain file there. A netns gap,
    // leaked-netns unchecked, never a 0.
    let output = stale_pod.run(&bed, &prometheus);
    let metrics = String::from_utf8_lossy(&output.stdout);
    blind_never_clear(
        "no HostToContainer",
        &metrics,
        "mountinfo",
        &["leaked-netns"],
    );
    eprintln!(
        "{TEST}: {}: done after {:.1} s",
        bed.containerd_version(),
        started.elapsed().as_secs_f64()
    );
}
