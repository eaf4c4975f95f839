//! The snapshot: everything the sources saw, as plain serialisable data.
//!
//! Checks read only this, never the machine, so they can be unit-tested on
//! hand-made snapshots and re-run on one gathered elsewhere. Each source records
//! what it could not read as a [`Gap`] instead of failing the whole run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::paths::Paths;
use crate::sources::containerd_api::ContainerdView;
use crate::sources::cri_api::CriView;
use crate::sources::node::NodeContext;

/// Unix time in nanoseconds, the unit containerd's CRI status files use.
pub type UnixNanos = i64;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    /// When gathering started (unix ns); "now" for every age a check computes.
    pub taken_at: UnixNanos,
    /// The containerd that was looked at.
    pub paths: Paths,
    /// The containerd namespace whose bundles and shims were looked at.
    pub namespace: String,
    /// Containers from CRI's on-disk store, one per readable status file.
    pub cri_containers: Vec<CriContainer>,
    /// Task bundle directories of `namespace`, keyed by container id.
    pub bundles: BTreeMap<String, Bundle>,
    /// Every process seen in procfs, keyed by pid.
    pub processes: BTreeMap<i32, ProcessInfo>,
    /// Every containerd shim process (of any containerd; see [`Shim::serves`]).
    pub shims: Vec<Shim>,
    /// Pod sandboxes CRI keeps directories for (root and state), by id.
    pub cri_sandboxes: BTreeSet<String>,
    /// Mounts below containerd's root and state directories.
    pub mounts: Vec<Mount>,
    /// What the containerd API answered; `None` when it was not asked.
    pub containerd: Option<ContainerdView>,
    /// What the CRI API answered; `None` when it was not asked.
    pub cri: Option<CriView>,
    /// I/O pressure, write-back and overlay options of the node.
    pub node: NodeContext,
    /// Which containerd version runs, and how nodectl knows.
    #[serde(default)]
    pub containerd_version: ContainerdVersion,
    /// What some source could not read, and why.
    pub gaps: Vec<Gap>,
}

/// What a first snapshot suggests and a later look must confirm: containers
/// that look dead while CRI says running, and the processes to look at again
/// (their pids, and shims with a thread that may be stuck).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Suspects {
    pub containers: BTreeSet<String>,
    pub pids: BTreeSet<i32>,
}

impl Suspects {
    pub fn is_empty(&self) -> bool {
        self.containers.is_empty() && self.pids.is_empty()
    }
}

/// One container as persisted by the CRI plugin in
/// `<root>/io.containerd.grpc.v1.cri/containers/<id>/status`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CriContainer {
    pub id: String,
    pub status_path: PathBuf,
    /// Modification time of the status file: when CRI last wrote the status.
    pub status_written_at: UnixNanos,
    pub status: CriStatus,
}

/// The fields of CRI's `containerstore.Status` that the checks rely on.
///
/// containerd writes this JSON with Go field names and nanosecond times; fields
/// it adds in later versions are ignored, missing ones default to zero.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct CriStatus {
    #[serde(rename = "Version")]
    pub version: String,
    #[serde(rename = "Pid")]
    pub pid: i64,
    #[serde(rename = "CreatedAt")]
    pub created_at: UnixNanos,
    #[serde(rename = "StartedAt")]
    pub started_at: UnixNanos,
    #[serde(rename = "FinishedAt")]
    pub finished_at: UnixNanos,
    #[serde(rename = "ExitCode")]
    pub exit_code: i64,
    #[serde(rename = "Reason")]
    pub reason: String,
    #[serde(rename = "Message")]
    pub message: String,
    /// Set while RemoveContainer runs; such a status is about to disappear.
    #[serde(rename = "Removing")]
    pub removing: bool,
    /// Set when containerd could not tell the state after a restart.
    #[serde(rename = "Unknown")]
    pub unknown: bool,
}

impl CriStatus {
    /// What CRI reports for this status, derived the way containerd's
    /// `Status.State()` does: finished wins over started wins over created.
    pub fn state(&self) -> CriState {
        if self.unknown {
            CriState::Unknown
        } else if self.finished_at != 0 {
            CriState::Exited
        } else if self.started_at != 0 {
            CriState::Running
        } else if self.created_at != 0 {
            CriState::Created
        } else {
            CriState::Unknown
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CriState {
    Created,
    Running,
    Exited,
    Unknown,
}

impl Snapshot {
    /// A snapshot of `paths` in which nothing has been seen yet.
    pub fn empty(taken_at: UnixNanos, paths: Paths, namespace: String) -> Snapshot {
        Snapshot {
            taken_at,
            paths,
            namespace,
            cri_containers: Vec::new(),
            bundles: BTreeMap::new(),
            processes: BTreeMap::new(),
            shims: Vec::new(),
            cri_sandboxes: BTreeSet::new(),
            mounts: Vec::new(),
            containerd: None,
            cri: None,
            node: NodeContext::default(),
            containerd_version: ContainerdVersion::default(),
            gaps: Vec::new(),
        }
    }

    /// Children of `pid`, split into running and defunct ones.
    pub fn children(&self, pid: i32) -> (Vec<i32>, Vec<i32>) {
        let (live, defunct): (Vec<&ProcessInfo>, Vec<&ProcessInfo>) = self
            .processes
            .values()
            .filter(|p| p.ppid == pid)
            .partition(|p| p.is_running());
        (
            live.iter().map(|p| p.pid).collect(),
            defunct.iter().map(|p| p.pid).collect(),
        )
    }

    /// Seconds from `since` (unix ns) to when the snapshot was taken, to a
    /// tenth; 0 when `since` is unknown.
    pub fn seconds_since(&self, since: UnixNanos) -> f64 {
        if since <= 0 {
            return 0.0;
        }
        seconds(self.taken_at - since)
    }
}

/// Nanoseconds as seconds, rounded to a tenth.
pub fn seconds(nanos: i64) -> f64 {
    (nanos as f64 / 1e9 * 10.0).round() / 10.0
}

/// A task bundle: `<state>/io.containerd.runtime.v2.task/<namespace>/<id>/`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Bundle {
    pub id: String,
    pub path: PathBuf,
    /// `io.kubernetes.cri.*` annotations from the bundle's OCI `config.json`.
    pub annotations: BTreeMap<String, String>,
    /// Content of the bundle's `shim.pid`, when the shim wrote one.
    pub shim_pid: Option<i32>,
    /// Content of the bundle's `address`: the shim's ttrpc socket.
    pub shim_socket: Option<String>,
}

impl Bundle {
    fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.get(key).map(String::as_str)
    }
    pub fn pod_namespace(&self) -> Option<&str> {
        self.annotation("io.kubernetes.cri.sandbox-namespace")
    }
    pub fn pod_name(&self) -> Option<&str> {
        self.annotation("io.kubernetes.cri.sandbox-name")
    }
    pub fn container_name(&self) -> Option<&str> {
        self.annotation("io.kubernetes.cri.container-name")
    }
    pub fn sandbox_id(&self) -> Option<&str> {
        self.annotation("io.kubernetes.cri.sandbox-id")
    }
}

/// A process as procfs showed it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ProcessInfo {
    pub pid: i32,
    pub ppid: i32,
    pub comm: String,
    /// The state letter from `/proc/<pid>/stat`: R, S, D, Z, X, ...
    pub state: char,
    /// Start time (unix ns), derived from boot time and the stat `starttime`.
    pub started_at: UnixNanos,
    /// Resident memory.
    pub rss_bytes: u64,
}

impl ProcessInfo {
    /// A defunct (Z) or dead (X) process is not running, whatever `/proc` shows:
    /// it only waits for a parent to reap it.
    pub fn is_running(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// A `containerd-shim*` process and what its threads are doing.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Shim {
    pub pid: i32,
    pub binary: String,
    /// `-namespace`, `-id` and `-address` from the command line.
    pub namespace: Option<String>,
    pub id: Option<String>,
    pub address: Option<String>,
    /// `start` or `delete` for the short-lived invocations containerd runs to
    /// launch a shim or to clean up after a dead one; `None` for the daemon.
    pub action: Option<String>,
    /// The shim's working directory, which containerd sets to the bundle.
    pub cwd: Option<PathBuf>,
    pub threads: Vec<ThreadSample>,
}

impl Shim {
    /// Whether this shim was started by the containerd listening on `address`;
    /// a node can run more than one containerd, and only ours is judged.
    pub fn serves(&self, address: &std::path::Path) -> bool {
        self.address
            .as_deref()
            .map(|a| std::path::Path::new(a.trim_start_matches("unix://")) == address)
            .unwrap_or(false)
    }

    /// Threads blocked inside `umount2`: the slow overlayfs unmount behind a
    /// task.Delete that times out.
    pub fn threads_in_umount2(&self) -> impl Iterator<Item = &ThreadSample> {
        self.threads
            .iter()
            .filter(|t| t.syscall.as_deref() == Some("umount2"))
    }
}

/// One thread of a shim, from `/proc/<pid>/task/<tid>/{stat,syscall,wchan}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ThreadSample {
    pub tid: i32,
    pub state: char,
    /// Name of the syscall the thread is blocked in (numbers are per
    /// architecture, resolved when sampled); the number if not known by name.
    pub syscall: Option<String>,
    pub wchan: Option<String>,
}

/// One mount from mountinfo.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Mount {
    pub mount_point: PathBuf,
    pub fs_type: String,
    pub source: Option<String>,
    /// Mount and superblock options, sorted (`volatile` shows up here).
    pub options: Vec<String>,
}

/// A running containerd daemon and the paths its command line sets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerdProcess {
    pub pid: i32,
    /// The binary it runs (the `/proc/<pid>/exe` link).
    pub exe: PathBuf,
    pub config: Option<PathBuf>,
    pub address: Option<PathBuf>,
    pub root: Option<PathBuf>,
    pub state: Option<PathBuf>,
}

/// The containerd version in every report: from the API's Version answer,
/// else from the running daemon's binary (`containerd --version`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ContainerdVersion {
    /// As containerd reports it (`v1.7.34`, `1.6.20~ds1`); `None` when unknown.
    pub version: Option<String>,
    pub source: VersionSource,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum VersionSource {
    Api,
    Process,
    #[default]
    Unknown,
}

impl VersionSource {
    pub fn as_str(self) -> &'static str {
        match self {
            VersionSource::Api => "api",
            VersionSource::Process => "process",
            VersionSource::Unknown => "unknown",
        }
    }
}

/// Something a source could not read. Reported beside the findings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Gap {
    /// The source that hit it: `cri-store`, `bundles`, `procfs`, `config`.
    pub source: String,
    /// The file or directory that failed.
    pub path: PathBuf,
    pub error: String,
    /// True when the whole source is unavailable, not just one item of it.
    pub source_unavailable: bool,
}

impl Gap {
    pub fn item(source: &str, path: impl Into<PathBuf>, error: impl ToString) -> Gap {
        Gap {
            source: source.to_string(),
            path: path.into(),
            error: error.to_string(),
            source_unavailable: false,
        }
    }

    pub fn source(source: &str, path: impl Into<PathBuf>, error: impl ToString) -> Gap {
        Gap {
            source_unavailable: true,
            ..Gap::item(source, path, error)
        }
    }
}
