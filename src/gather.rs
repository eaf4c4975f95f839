//! Gather: runs every source once and assembles the snapshot.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::model::{
    ContainerdVersion, ContainerdView, CriView, Gap, Paths, Snapshot, SnapshotterView, Source,
    CRI_NAMESPACE,
};
use crate::sources::host_view::HostView;
use crate::sources::proc_scan::ProcScan;
use files::FileSources;
use pods::PodSources;

mod files;
mod follow_up;
mod pods;
mod sample;
mod settle;
use crate::sources::SourceThread;
use crate::sources::{
    containerd_api, containerd_snapshots, cri_api, daemon_version, proc_scan, shim_proof,
};
pub use follow_up::follow_up;
use follow_up::running_without_task;
pub use sample::{read_exits, sample};
use settle::{
    settle_by_config_only, settle_cni, settle_config_by_cri, settle_config_by_line,
    settle_cri_store, settle_untied,
};

/// How long a command that asks no API waits for the version recorded in
/// the containerd binary (read as data, see daemon_version).
const BINARY_VERSION_WAIT: Duration = Duration::from_secs(3);
/// How long an API may keep a person waiting before nodectl says so.
const PROGRESS_AFTER: Duration = Duration::from_secs(1);

/// The report goes out at most this long after `--timeout`, whatever the
/// files do (docs/reliability.md: "answers within `--timeout` + 1 s").
pub const DEADLINE_GRACE: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct GatherOptions {
    pub namespace: String,
    /// Normally `/proc`; another root reads a captured or synthetic procfs.
    pub proc_root: PathBuf,
    /// `--mountinfo` when given; otherwise the proven daemon's own mount
    /// table is read (see [`GatherOptions::mount_table`]).
    pub mountinfo: Option<PathBuf>,
    /// Ask the containerd API, every call done within this; `None` skips it.
    pub api_timeout: Option<Duration>,
    /// Also ask CRI, within the same deadline.
    pub cri_api: bool,
    /// CRI's socket when it is not containerd's (`--cri-address`).
    pub cri_address: Option<PathBuf>,
    /// Say on stderr when the APIs keep us waiting (a person is watching).
    pub progress: bool,
    /// Sample what every shim thread is blocked in (zombie evidence, blocked
    /// shims, slow CRI); the leak checks do without.
    pub shim_threads: bool,
    /// Also read each bundle's `address` (the socket a 1.x shim serves):
    /// `shims` shows it and an archive keeps it; no check uses it, and on a
    /// node of 1,000 containers it is hundreds of files more to read.
    pub bundle_sockets: bool,
    /// Also list containerd's snapshots, leases and the containers'
    /// snapshots in the namespace (`leaked-snapshots`), with the APIs.
    pub snapshots: bool,
    /// Read the mount table and the node's pressure and memory (the leak
    /// checks, `check`'s context); `zombies` needs neither, and a node's
    /// mount table can be megabytes.
    pub mounts: bool,
    /// Read CNI's network configs and host-local's reservations.
    pub cni: bool,
    /// Read kubelet's pod directories (and the mounts below them).
    pub kubelet: bool,
    /// kubelet's root when given (`--kubelet-root`).
    pub kubelet_root: Option<PathBuf>,
    /// kubelet's pod log directory when given (`--kubelet-pod-logs`).
    pub kubelet_pod_logs: Option<PathBuf>,
    /// Read kubelet's pod cgroups.
    pub pod_cgroups: bool,
    /// Read the pods' network namespaces CRI mounted.
    pub netns: bool,
    /// kubelet's cgroup root when given (`--kubelet-cgroup-root`).
    pub kubelet_cgroup_root: Option<PathBuf>,
    /// Where the cgroup filesystem is (`/sys/fs/cgroup`; another one for
    /// tests and benchmarks).
    pub cgroup_fs: PathBuf,
    /// `--timeout`: a look at the node ends this (plus [`DEADLINE_GRACE`])
    /// after it starts, with a gap for whatever source has not answered.
    pub timeout: Duration,
}

impl GatherOptions {
    /// The mount table a look reads: `--mountinfo` when given, else the
    /// proven daemon's own (`/proc/<pid>/mountinfo`). Mounts live in mount
    /// namespaces, and what containerd and its shims mount (a rootfs, a
    /// sandbox's shm, a pod's netns) is in the daemon's: nodectl in another
    /// one (a namespace split off before the leak, a pod's) does not see it
    /// in its own table, and a bundle with a rootfs mounted only there
    /// looked empty and was removed, detaching the mount in containerd's
    /// namespace. Unreadable, it is a gap, never an empty table. With no
    /// daemon identified, nodectl's own (nothing is acted on then).
    pub fn mount_table(&self, paths: &Paths) -> PathBuf {
        match (&self.mountinfo, &paths.process) {
            (Some(given), _) => given.clone(),
            (None, Some(daemon)) => self
                .proc_root
                .join(daemon.pid.to_string())
                .join("mountinfo"),
            (None, None) => self.proc_root.join("self/mountinfo"),
        }
    }
}

/// Whether `path`, the directory `source` reads, is the host's as `host`
/// tells; if not, a gap for the whole source (the kinds that read it are
/// not checked: never a count of 0 from a directory nodectl cannot see).
fn seen_as_host(host: &HostView, source: Source, path: &Path, gaps: &mut Vec<Gap>) -> bool {
    match host.hidden(path) {
        Some(why) => {
            gaps.push(Gap::source(source, path, why));
            false
        }
        None => true,
    }
}

/// Reads the node, in four steps: the file sources start, each on a thread
/// of its own; procfs is scanned once CRI's status files are read; the
/// other files are waited for; then the APIs are asked. Status files are
/// read before procfs so that a container started in between cannot look
/// dead; one that exits in between can, which is why callers confirm
/// zombies with a second snapshot.
///
/// Every file source is waited for until one deadline, `timeout` +
/// [`DEADLINE_GRACE`] after the start: a read stuck in the kernel (a FIFO,
/// a stalled disk, FUSE or NFS) cannot be interrupted, so it is left behind
/// and the snapshot goes out with a gap naming it.
pub fn gather(paths: &Paths, options: &GatherOptions, mut gaps: Vec<Gap>) -> Snapshot {
    let taken_at = now_nanos();
    let started = Instant::now();
    let deadline = started + options.timeout + DEADLINE_GRACE;
    // CRI serves containerd's socket unless told otherwise: the one given,
    // before any daemon is found. Asked for its lists when a check reads
    // them, and for its Status alone when what is read is a setting CRI
    // states there (its netns directory, 1.x's snapshotter: see
    // `settle_config_by_cri`), so that no command judges by the files'
    // reading what CRI would have said.
    let cri_wanted = options.cri_api || options.netns || options.snapshots;

    let (status_files, mut files) = FileSources::start(paths, options);
    // procfs starts once the status files are read, so the order above
    // holds; if they have not been read by `timeout`, it starts anyway and
    // the status files are given up (a late answer would break the order).
    let (mut cri_containers, cri_store_listed) = status_files
        .wait(started + options.timeout, started, &mut gaps)
        .unwrap_or_default();
    let (proc_scan, mut paths) = scan_procfs(paths, options, deadline, started, &mut gaps);
    // Also asked, for its Status alone, when a root or state is tied to
    // the daemon by nothing but its config and the APIs are asked at all:
    // CRI's word ties it, or unties it (`settle_by_config_only`).
    let cri_socket = (cri_wanted
        || (options.api_timeout.is_some() && !paths.by_config_only.is_empty()))
    .then(|| {
        options
            .cri_address
            .clone()
            .unwrap_or_else(|| paths.address.path.clone())
    });
    files.found_daemon(&paths, options);
    let mut files = files.wait(deadline, started, &mut gaps);
    let pods = PodSources::start(&paths, options, &proc_scan.processes, files.table.clone());
    let mut pods = pods.wait(deadline, started, &mut gaps);

    let namespaces = namespaces_to_ask(
        options,
        proc_scan
            .shims
            .iter()
            .filter(|s| s.serves(&paths.address.path))
            .filter_map(|s| s.namespace.as_deref()),
    );
    // The ids CRI is asked about: only when it is asked.
    let cri_asked: Vec<String> = match cri_socket {
        Some(_) => cri_containers.iter().map(|c| c.id.clone()).collect(),
        None => Vec::new(),
    };
    let questions = Questions {
        cri_socket: cri_socket.as_deref(),
        namespaces: &namespaces,
        container_ids: &cri_asked,
        said_running: options.cri_api && cri_store_listed.is_none() && paths.process.is_some(),
    };
    let (containerd, cri, snapshotter, containerd_version) =
        ask_within(&paths, options, &questions, deadline, &mut gaps);
    files.cni = settle_cni(
        files.cni.take(),
        cri.as_ref(),
        &mut paths,
        options,
        containerd_version.version.as_deref(),
        (deadline, started),
        &mut gaps,
    );
    settle_config_by_cri(cri.as_ref(), &mut paths, &mut gaps);
    pods.settle_netns_dir(
        &paths,
        options,
        files.table.as_ref(),
        (deadline, started),
        &mut gaps,
    );
    settle_by_config_only(
        cri.as_ref(),
        &proc_scan.shims,
        &mut paths,
        &options.proc_root,
    );
    settle_untied(cri.as_ref(), &mut paths, &options.proc_root, &mut gaps).apply(
        &paths.state.path,
        &mut cri_containers,
        &mut files.cri_sandboxes,
        &mut files.bundles,
        &mut files.mounts,
        pods.netns.as_mut(),
    );
    settle_cri_store(cri.as_ref(), &paths, &mut gaps);
    settle_config_by_line(&paths, containerd_version.version.as_deref(), &mut gaps);
    pods.join_kubelet_word(deadline, started, &mut gaps);
    pods.narrow(
        containerd.as_ref(),
        cri.as_ref(),
        files.cni.as_ref(),
        options,
        &proc_scan.processes,
        &mut gaps,
    );
    Snapshot {
        taken_at,
        paths,
        namespace: options.namespace.clone(),
        cri_containers,
        cri_store_listed,
        bundles: files.bundles,
        processes: proc_scan.processes,
        unread_pids: proc_scan.unread_pids,
        shims: proc_scan.shims,
        cri_sandboxes: files.cri_sandboxes,
        mounts_read: files.table.is_some(),
        mounts: files.mounts,
        containerd,
        cri,
        node: files.node,
        containerd_version,
        snapshotter,
        cni: files.cni,
        kubelet: pods.kubelet,
        pod_cgroups: pods.pod_cgroups,
        netns: pods.netns,
        gaps,
    }
}

/// Scans procfs and, among its processes, finds the running containerd
/// when it is still to be found: the paths come back with it (or with why
/// it could not be looked for). Every shim's arguments are capped.
fn scan_procfs(
    paths: &Paths,
    options: &GatherOptions,
    deadline: Instant,
    started: Instant,
    gaps: &mut Vec<Gap>,
) -> (ProcScan, Paths) {
    let (root, shim_threads) = (options.proc_root.clone(), options.shim_threads);
    let mut proof_paths = paths.clone();
    let (mut proc_scan, daemon) = SourceThread::spawn(Source::Procfs, &root.clone(), move |gaps| {
        let mut scan = proc_scan::scan(&root, shim_threads, gaps);
        // The running containerd, when still to be found: among the
        // processes just read (their `comm` is in the `stat` read anyway).
        let found = proof_paths.daemon_lookup.take().map(|lookup| {
            crate::paths::daemon_among(&lookup, &scan.processes, &mut proof_paths, gaps);
        });
        // Proving a shim stats its socket: inside the deadline too.
        shim_proof::prove_all(&root, &proof_paths, &mut scan.shims, &scan.processes, gaps);
        (scan, found.map(|()| proof_paths))
    })
    .wait(deadline, started, gaps)
    .unwrap_or_default();
    let mut paths = daemon.unwrap_or_else(|| paths.clone());
    if paths.daemon_lookup.take().is_some() {
        // Not found: procfs did not answer in time, so none is used and
        // nothing can be acted on.
        paths.unproven.push(
            "the running containerd could not be looked for: procfs did not answer in time"
                .to_string(),
        );
    }
    // Any process can name itself a shim and carry 128 KB arguments; cap
    // them now, before checks and reports copy them (see Report::within_limits).
    for shim in &mut proc_scan.shims {
        let args = [
            &mut shim.namespace,
            &mut shim.id,
            &mut shim.address,
            &mut shim.action,
        ];
        for arg in args.into_iter().flatten() {
            crate::inert::cap_in_place(arg, crate::inert::STRING_CAP);
        }
    }
    (proc_scan, paths)
}

/// What the APIs are asked about.
struct Questions<'a> {
    /// CRI's socket, when CRI is asked.
    cri_socket: Option<&'a Path>,
    namespaces: &'a BTreeSet<String>,
    /// The containers CRI is asked about.
    container_ids: &'a [String],
    /// Whether CRI is asked for its own record of the containers it says
    /// run while their tasks do not (`CriView::said_running`): CRI's
    /// lists asked, its store unread, the daemon proven.
    said_running: bool,
}

/// Asks the APIs, when this look asks them, within `--timeout` less what
/// the files ate of the grace second; and names the version: the API's
/// answer, or else (or when it did not answer) the one the daemon's binary
/// records, so every command's report names it.
fn ask_within(
    paths: &Paths,
    options: &GatherOptions,
    questions: &Questions,
    deadline: Instant,
    gaps: &mut Vec<Gap>,
) -> (
    Option<ContainerdView>,
    Option<CriView>,
    Option<SnapshotterView>,
    ContainerdVersion,
) {
    let api_timeout = options
        .api_timeout
        .map(|timeout| timeout.min(deadline.saturating_duration_since(Instant::now())));
    let api_deadline = api_timeout.map(|timeout| Instant::now() + timeout);
    let binary_version = paths
        .process
        .as_ref()
        .map(|p| daemon_version::in_background(&options.proc_root, p.pid));
    let (containerd, cri, snapshotter) = match api_timeout {
        None => (None, None, None),
        Some(timeout) if timeout.is_zero() => {
            let error = format!(
                "not asked: the files took the whole deadline ({})",
                humantime::format_duration(options.timeout + DEADLINE_GRACE)
            );
            gaps.push(Gap::source(
                Source::ContainerdApi,
                &paths.address.path,
                error,
            ));
            (None, None, None)
        }
        Some(timeout) => ask_apis(
            paths,
            options,
            questions.cri_socket,
            timeout,
            questions.namespaces,
            questions.container_ids,
            questions.said_running,
            gaps,
        ),
    };
    let containerd_version = daemon_version::identify(
        containerd.as_ref().and_then(|c| c.version.as_deref()),
        || {
            // With the APIs asked, the binary gets no longer than they did.
            let wait = match api_deadline {
                Some(deadline) => deadline.saturating_duration_since(Instant::now()),
                None => BINARY_VERSION_WAIT,
            };
            binary_version?.recv_timeout(wait).ok().flatten()
        },
    );
    (containerd, cri, snapshotter, containerd_version)
}

/// The containerd namespaces whose records and tasks are asked for: `-n`'s;
/// those our shims were started for (a leaked shim is judged against the
/// records of its own namespace); and CRI's when the mounts are read: CRI's
/// sandboxes and containers, and so their shm and rootfs mounts, are in its
/// namespace whatever `-n` names, and are judged (and re-checked before an
/// unmount) against its records.
fn namespaces_to_ask<'a>(
    options: &GatherOptions,
    shim_namespaces: impl Iterator<Item = &'a str>,
) -> BTreeSet<String> {
    let mut namespaces: BTreeSet<String> = shim_namespaces.map(str::to_string).collect();
    namespaces.insert(options.namespace.clone());
    if options.mounts {
        namespaces.insert(CRI_NAMESPACE.to_string());
    }
    namespaces
}

/// Adds containerd's records (and so the names its container labels carry)
/// to a snapshot gathered without the APIs: a command that found something
/// asks only then, within `timeout`, so a clean node or a frozen containerd
/// costs it nothing more. The version containerd answers with replaces the
/// binary's (as in [`gather`], the API's comes first): a build that records
/// none (Debian's, or one built with `-trimpath`, which leaves the ldflags
/// out of the build info) is then named, and the findings' advisories with it.
pub fn add_containerd_records(
    snapshot: &mut Snapshot,
    paths: &Paths,
    options: &GatherOptions,
    timeout: Duration,
) {
    let namespaces = BTreeSet::from([options.namespace.clone()]);
    let options = GatherOptions {
        snapshots: false,
        ..options.clone()
    };
    let (containerd, _, _) = ask_apis(
        paths,
        &options,
        None,
        timeout,
        &namespaces,
        &[],
        false,
        &mut snapshot.gaps,
    );
    let answered = containerd.as_ref().and_then(|c| c.version.as_deref());
    if answered.is_some_and(|v| !v.trim().is_empty()) {
        snapshot.containerd_version = daemon_version::identify(answered, || None);
    }
    let version = snapshot.containerd_version.version.as_deref();
    settle_config_by_line(paths, version, &mut snapshot.gaps);
    snapshot.containerd = containerd;
}

/// What the APIs answered: containerd's view, CRI's and the snapshots'.
type Answers = (
    Option<ContainerdView>,
    Option<CriView>,
    Option<SnapshotterView>,
);

/// Queries containerd and CRI concurrently; everything ends by one deadline.
#[allow(clippy::too_many_arguments)]
fn ask_apis(
    paths: &Paths,
    options: &GatherOptions,
    cri_socket: Option<&Path>,
    timeout: Duration,
    namespaces: &BTreeSet<String>,
    container_ids: &[String],
    ask_said_running: bool,
    gaps: &mut Vec<Gap>,
) -> Answers {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            let error = format!("starting an async runtime: {err}");
            gaps.push(Gap::source(
                Source::ContainerdApi,
                &paths.address.path,
                error,
            ));
            return (None, None, None);
        }
    };
    let (containerd, cri, snapshotter) = runtime.block_on(async {
        let deadline = tokio::time::Instant::now() + timeout;
        // With the daemon proven, every API is asked only over a connection
        // whose peer is that daemon (CRI runs inside it too).
        let daemon = paths.process.as_ref().map(|p| p.pid);
        let containerd = containerd_api::query(&paths.address.path, daemon, namespaces, deadline);
        let cri = async {
            match cri_socket {
                Some(address) => {
                    let lists = options.cri_api;
                    let query = cri_api::query(address, daemon, lists, container_ids, deadline);
                    Some(query.await)
                }
                None => None,
            }
        };
        let snapshotter = async {
            if !options.snapshots {
                return None;
            }
            let (address, namespace) = (&paths.address.path, &options.namespace);
            let configured = paths.snapshotter.as_deref();
            let query =
                containerd_snapshots::query(address, daemon, namespace, configured, deadline);
            Some(query.await)
        };
        let answers = async {
            let (containerd, mut cri, mut snapshotter) = tokio::join!(containerd, cri, snapshotter);
            // CRI's store unseen: CRI's own record of what it says runs
            // while its task does not, for the zombie check to judge.
            if let (Some(view), Some(daemon), true) = (cri.as_mut(), daemon, ask_said_running) {
                let ids = running_without_task(view, &containerd);
                if !ids.is_empty() {
                    let address = view.address.clone();
                    let (said, calls) =
                        cri_api::said_running(&address, daemon, &ids, deadline).await;
                    view.said_running = Some(said);
                    view.calls.extend(calls);
                }
            }
            // CRI's own word on its snapshotter (1.x says it), listed too.
            let said = cri
                .as_ref()
                .and_then(|c| c.said.as_ref()?.snapshotter.clone());
            if let (Some(view), Some(said)) = (snapshotter.as_mut(), said) {
                containerd_snapshots::list_also(view, daemon, &said, deadline).await;
            }
            (containerd, cri, snapshotter)
        };
        // Never finishes: it only speaks up if the answers take a while.
        let progress = async {
            tokio::time::sleep(PROGRESS_AFTER).await;
            if options.progress {
                eprintln!(
                    "nodectl: waiting for containerd at {} (at most {})...",
                    paths.address.path.display(),
                    humantime::format_duration(timeout)
                );
            }
            std::future::pending::<()>().await
        };
        tokio::select! {
            answers = answers => answers,
            _ = progress => unreachable!("progress never completes"),
        }
    });
    containerd_api::gaps(&containerd, gaps);
    // CRI asked for its Status alone: an unanswered one is no gap of its
    // own; what it would have settled stays a `config` gap where the lines
    // read the files apart, and nothing where they agree.
    if let Some(cri) = cri.as_ref().filter(|_| options.cri_api) {
        cri_api::gaps(cri, gaps);
    }
    if let Some(snapshotter) = &snapshotter {
        containerd_snapshots::gaps(snapshotter, gaps);
    }
    (Some(containerd), cri, snapshotter)
}

pub fn now_nanos() -> i64 {
    chrono::Utc::now()
        .timestamp_nanos_opt()
        .expect("the clock is between 1677 and 2262")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::cri_store;

    #[test]
    fn no_containers_dir_under_the_proven_root_is_no_gap_unless_cri_lists_one() {
        let root = tempfile::tempdir().unwrap();
        let mut paths = crate::model::fixtures::snapshot().paths;
        paths.root.path = root.path().to_path_buf();
        let dir = paths.cri_containers_dir();
        let missing = || {
            let mut gaps = Vec::new();
            let (containers, _) = cri_store::read(&dir, &mut gaps);
            assert!(containers.is_empty());
            assert_eq!(gaps.len(), 1, "{gaps:?}");
            assert!(gaps[0].error.contains("never run with it"), "{gaps:?}");
            gaps
        };
        let cri = |containers: Vec<crate::model::CriItem>, address: &Path| CriView {
            address: address.to_path_buf(),
            containers: Some(containers),
            ..CriView::default()
        };
        let listed_none = cri(Vec::new(), &paths.address.path);
        let settled = |cri: Option<&CriView>, paths: &Paths| {
            let mut gaps = missing();
            settle_cri_store(cri, paths, &mut gaps);
            gaps.len()
        };
        assert_eq!(settled(Some(&listed_none), &paths), 0);
        // CRI's containers not asked (a command that needs none of them).
        assert_eq!(settled(None, &paths), 0);
        // CRI lists a container: the directory must be there, and is not.
        let one = crate::model::fixtures::cri_container(
            "c1",
            "s1",
            "app",
            crate::model::CriApiState::ContainerRunning,
        );
        assert_eq!(
            settled(Some(&cri(vec![one], &paths.address.path)), &paths),
            1
        );
        // A root not proven: the gap stays.
        let mut unproven = paths.clone();
        unproven
            .unproven
            .push("root is not the daemon's".to_string());
        assert_eq!(settled(Some(&listed_none), &unproven), 1);
    }

    pub(super) fn options(namespace: &str, mounts: bool) -> GatherOptions {
        GatherOptions {
            namespace: namespace.to_string(),
            proc_root: PathBuf::from("/proc"),
            mountinfo: None,
            api_timeout: None,
            cri_api: false,
            cri_address: None,
            progress: false,
            shim_threads: false,
            bundle_sockets: false,
            snapshots: false,
            mounts,
            cni: false,
            kubelet: false,
            kubelet_root: None,
            kubelet_pod_logs: None,
            pod_cgroups: false,
            netns: false,
            kubelet_cgroup_root: None,
            cgroup_fs: PathBuf::from("/sys/fs/cgroup"),
            timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn the_mount_table_read_is_the_daemons_own_unless_one_is_given() {
        let mut paths = crate::model::fixtures::snapshot().paths;
        paths.process = None;
        let mut options = options("k8s.io", true);
        // No daemon identified: nodectl's own.
        assert_eq!(
            options.mount_table(&paths),
            Path::new("/proc/self/mountinfo")
        );
        // The daemon's: where its mounts (and its shims') are.
        paths.process = Some(crate::model::ContainerdProcess {
            pid: 812,
            ..Default::default()
        });
        assert_eq!(
            options.mount_table(&paths),
            Path::new("/proc/812/mountinfo")
        );
        // `--mountinfo` is read as given.
        options.mountinfo = Some(PathBuf::from("/proc/1/mountinfo"));
        assert_eq!(options.mount_table(&paths), Path::new("/proc/1/mountinfo"));
    }

    #[test]
    fn cris_namespace_is_asked_whenever_its_mounts_are_judged() {
        // `-n moby leaked-mounts`: the pods' shm and rootfs mounts are
        // judged against k8s.io's records, so those are asked for too.
        let asked = namespaces_to_ask(&options("moby", true), ["buildkit"].into_iter());
        assert_eq!(
            asked,
            BTreeSet::from(["buildkit", "k8s.io", "moby"].map(String::from))
        );
        // Without the mounts (`zombies`), nothing more than `-n` and the shims'.
        let asked = namespaces_to_ask(&options("moby", false), std::iter::empty());
        assert_eq!(asked, BTreeSet::from(["moby".to_string()]));
    }
}
