//! A generated `check --from` archive of `n` pods whose records containerd
//! lost while CRI and kubelet still know them: each part below gives `n`
//! findings of one kind, every one of them named and joined by id (or pod
//! uid) to thousands of others, at a scale where a search per finding
//! shows (tests/from_archive.rs asserts the findings; docs/performance.md
//! times them).
//!
//! Always there: pod `n`'s sandbox ([`Tag::Sandbox`]), READY in CRI's list
//! as `shop/pod-n` (uid `uid-n`), in containerd's 2.x sandbox store, no
//! container record of it. Containerd answered; no task runs.

use std::collections::BTreeMap;
use std::path::Path;

use nodectl::model::{
    ContainerSnapshot, ContainerdView, CriApiState, CriItem, CriView, KubeletView, KubeletWord,
    Located, NamespaceView, Origin, PodDir, PodLogDir, PodName, ProcessInfo, Shim, Snapshot,
    SnapshotInfo, SnapshotKind, SnapshotterView, ThreadSample,
};

use super::orphan_archive::{archive_paths, write_archive};

/// What the archive holds beside the pods' sandboxes, each `n` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// `cri-drift`: pod n's container `app` ([`Tag::Container`], EXITED in
    /// CRI), of which containerd has no record.
    Drift,
    /// `leaked-snapshot`: that container's active snapshot (key: its id),
    /// which nothing holds.
    Snapshot,
    /// `leaked-sandbox`: an older sandbox of pod n ([`Tag::OldSandbox`]),
    /// NOTREADY with no container, which the live one supersedes.
    OldSandbox,
    /// `orphan-pod-dir`: kubelet's directory of a pod gone (`shop/gone-n`,
    /// uid `gone-uid-n`), with its log directory; kubelet's word lists the
    /// live pods, each with its directory and tied to its uid by its log
    /// directory.
    PodDir,
    /// `duplicate-sandbox-name`: two sandbox container records carrying
    /// `dup-n_shop_dup-uid-n_0`, CRI listing the first ([`Tag::Listed`]);
    /// the second ([`Tag::Extra`]) is a `cri-drift` too (a record CRI does
    /// not know). Each record's snapshot is held by it.
    Duplicate,
    /// `leaked-shim` and `shim-blocked`: the shim started for pod n's
    /// sandbox (pid [`shim_pid`]) still runs, with a defunct child and a
    /// thread in `umount2`, and containerd has no record of it.
    Shim,
}

impl Part {
    pub const ALL: [Part; 6] = [
        Part::Drift,
        Part::Snapshot,
        Part::OldSandbox,
        Part::PodDir,
        Part::Duplicate,
        Part::Shim,
    ];

    /// The name `--parts` takes (bench/src/bin/archive.rs).
    pub fn name(self) -> &'static str {
        match self {
            Part::Drift => "drift",
            Part::Snapshot => "snapshot",
            Part::OldSandbox => "old-sandbox",
            Part::PodDir => "pod-dir",
            Part::Duplicate => "duplicate",
            Part::Shim => "shim",
        }
    }
}

/// Which of pod n's objects an id is: its first hex digit.
#[derive(Debug, Clone, Copy)]
pub enum Tag {
    Sandbox = 0xa,
    OldSandbox = 0xb,
    Container = 0xc,
    Listed = 0xd,
    Extra = 0xe,
}

/// The id of pod `n`'s `tag` (64 hex digits, as containerd makes them).
pub fn lost_id(tag: Tag, n: usize) -> String {
    format!("{:x}{n:063x}", tag as u8)
}

/// When the archive's look was taken (unix ns): everything in it is older,
/// by an hour or more, than every grace.
pub const LOST_TAKEN_AT: i64 = 1_700_000_000_000_000_000;
const HOUR: i64 = 3_600_000_000_000;

/// The pid of pod n's shim; its defunct child's is the next.
pub fn shim_pid(n: usize) -> i32 {
    100_000 + 2 * n as i32
}

/// CRI's name of the `n`th duplicated sandbox.
pub fn duplicate_name(n: usize) -> String {
    format!("dup-{n}_shop_dup-uid-{n}_0")
}

/// Writes the archive of `count` pods with `parts` to `path` (tar.gz, as
/// `nodectl collect` writes it).
pub fn write_lost_records_archive(path: &Path, count: usize, parts: &[Part]) {
    let has = |part| parts.contains(&part);
    let mut first = Snapshot::empty(LOST_TAKEN_AT, archive_paths(), "k8s.io".into());
    let mut records = NamespaceView {
        containers: Some(Default::default()),
        tasks: Some(Vec::new()),
        sandboxes_created: Some(BTreeMap::new()),
        ..NamespaceView::default()
    };
    let mut cri = CriView {
        address: "/run/containerd/containerd.sock".into(),
        sandboxes: Some(Vec::new()),
        containers: Some(Vec::new()),
        ..CriView::default()
    };
    let mut snapshots = vec![SnapshotInfo {
        key: "sha256:layer".into(),
        parent: String::new(),
        kind: SnapshotKind::Committed,
        created_at: LOST_TAKEN_AT - 48 * HOUR,
        updated_at: LOST_TAKEN_AT - 48 * HOUR,
        labels: BTreeMap::new(),
    }];
    let mut snapshot_users = Vec::new();
    let mut kubelet = KubeletView {
        root: Located {
            path: "/var/lib/kubelet".into(),
            origin: Origin::Default,
        },
        pod_dirs: Vec::new(),
        pod_logs: Some(Vec::new()),
        pod_logs_dir: None,
        word: KubeletWord::Listed { pods: Vec::new() },
    };
    let sandboxes = cri.sandboxes.as_mut().unwrap();
    let containers = cri.containers.as_mut().unwrap();
    let store = records.sandboxes_created.as_mut().unwrap();
    let recorded = records.containers.as_mut().unwrap();
    let KubeletWord::Listed { pods: listed } = &mut kubelet.word else {
        unreachable!()
    };
    let logs = kubelet.pod_logs.as_mut().unwrap();
    for n in 0..count {
        let (pod, uid) = (format!("pod-{n}"), format!("uid-{n}"));
        let sandbox = lost_id(Tag::Sandbox, n);
        let created = LOST_TAKEN_AT - 2 * HOUR;
        sandboxes.push(cri_sandbox(&sandbox, &pod, &uid, created, true));
        store.insert(sandbox.clone(), created);
        if has(Part::Drift) {
            containers.push(CriItem {
                id: lost_id(Tag::Container, n),
                sandbox_id: Some(sandbox.clone()),
                state: CriApiState::ContainerExited,
                name: Some("app".into()),
                ..CriItem::default()
            });
        }
        if has(Part::Snapshot) {
            snapshots.push(active(&lost_id(Tag::Container, n)));
        }
        if has(Part::OldSandbox) {
            let old = lost_id(Tag::OldSandbox, n);
            let before = created - 2 * HOUR;
            sandboxes.push(cri_sandbox(&old, &pod, &uid, before, false));
            store.insert(old, before);
        }
        if has(Part::PodDir) {
            let (gone, gone_uid) = (format!("gone-{n}"), format!("gone-uid-{n}"));
            for (name, uid) in [(&pod, &uid), (&gone, &gone_uid)] {
                kubelet.pod_dirs.push(PodDir {
                    uid: uid.to_string(),
                    path: Path::new("/var/lib/kubelet/pods").join(uid),
                    modified_at: LOST_TAKEN_AT - 3 * HOUR,
                    mounts: Vec::new(),
                });
                logs.push(PodLogDir {
                    namespace: "shop".into(),
                    name: name.to_string(),
                    uid: uid.to_string(),
                    modified_at: LOST_TAKEN_AT - 3 * HOUR,
                });
            }
            listed.push(PodName {
                namespace: "shop".into(),
                name: pod.clone(),
            });
        }
        if has(Part::Duplicate) {
            let name = duplicate_name(n);
            for tag in [Tag::Listed, Tag::Extra] {
                let id = lost_id(tag, n);
                recorded.insert(id.clone());
                records.sandbox_names.insert(id.clone(), name.clone());
                snapshots.push(active(&id));
                snapshot_users.push(ContainerSnapshot {
                    id: id.clone(),
                    snapshotter: "overlayfs".into(),
                    snapshot_key: id,
                    labels: BTreeMap::new(),
                });
            }
            let (pod, uid) = (format!("dup-{n}"), format!("dup-uid-{n}"));
            sandboxes.push(cri_sandbox(
                &lost_id(Tag::Listed, n),
                &pod,
                &uid,
                created,
                true,
            ));
        }
        if has(Part::Shim) {
            let pid = shim_pid(n);
            first.shims.push(Shim {
                pid,
                binary: "containerd-shim-runc-v2".into(),
                namespace: Some("k8s.io".into()),
                id: Some(sandbox.clone()),
                address: Some("/run/containerd/containerd.sock".into()),
                action: None,
                cwd: None,
                threads: vec![ThreadSample {
                    tid: pid,
                    state: Some('D'),
                    syscall: Some("umount2".into()),
                    wchan: None,
                }],
                proof: None,
            });
            for (pid, ppid, comm, state) in
                [(pid, 1, "containerd-shim", 'S'), (pid + 1, pid, "app", 'Z')]
            {
                let process = ProcessInfo {
                    pid,
                    ppid,
                    comm: comm.into(),
                    state,
                    started_at: created,
                    rss_bytes: 0,
                };
                first.processes.insert(pid, process);
            }
        }
    }
    let mut namespaces = BTreeMap::new();
    namespaces.insert("k8s.io".to_string(), records);
    first.containerd = Some(ContainerdView {
        address: "/run/containerd/containerd.sock".into(),
        namespaces,
        ..ContainerdView::default()
    });
    first.cri = Some(cri);
    first.snapshotter = Some(SnapshotterView {
        address: "/run/containerd/containerd.sock".into(),
        namespace: "k8s.io".into(),
        snapshots: BTreeMap::from([("overlayfs".to_string(), Some(snapshots))]),
        leases: Some(Vec::new()),
        containers: Some(snapshot_users),
        calls: Vec::new(),
    });
    if has(Part::PodDir) {
        first.kubelet = Some(kubelet);
    }
    write_archive(path, first);
}

fn cri_sandbox(id: &str, pod: &str, uid: &str, created_at: i64, ready: bool) -> CriItem {
    CriItem {
        id: id.to_string(),
        state: if ready {
            CriApiState::SandboxReady
        } else {
            CriApiState::SandboxNotReady
        },
        name: Some(pod.to_string()),
        namespace: Some("shop".into()),
        uid: Some(uid.to_string()),
        created_at: Some(created_at),
        ..CriItem::default()
    }
}

/// An active snapshot of key `key`, made an hour before the look.
fn active(key: &str) -> SnapshotInfo {
    SnapshotInfo {
        key: key.to_string(),
        parent: "sha256:layer".into(),
        kind: SnapshotKind::Active,
        created_at: LOST_TAKEN_AT - HOUR,
        updated_at: LOST_TAKEN_AT - HOUR,
        labels: BTreeMap::new(),
    }
}
