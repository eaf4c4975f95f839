//! The snapshot: everything the sources saw, as plain serialisable data.
//!
//! Checks read only this, never the machine, so they can be unit-tested on
//! hand-made snapshots and re-run on one gathered elsewhere. Each source records
//! what it could not read as a [`Gap`] instead of failing the whole run.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::model::api_views::{ContainerdView, CriIndex, CriView};
use crate::model::cgroups::CgroupView;
use crate::model::cni::CniView;
use crate::model::cri_status::CriContainer;
use crate::model::gap::{Gap, Source};
use crate::model::kubelet::KubeletView;
use crate::model::names::{PodRef, CRI_NAMESPACE, KIND_LABEL};
use crate::model::netns::NetnsView;
use crate::model::node::NodeContext;
use crate::model::paths::Paths;
use crate::model::shim::Shim;
use crate::model::snapshotter::SnapshotterView;

pub use crate::model::cri_status::UnixNanos;

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
    /// The device and inode of the directory of status files listed: a
    /// second look takes a file gone for removed only while the directory
    /// is still this one. Not in archives.
    #[serde(skip)]
    pub cri_store_listed: Option<(u64, u64)>,
    /// Task bundle directories of `namespace`, keyed by container id.
    pub bundles: BTreeMap<String, Bundle>,
    /// Every process seen in procfs, keyed by pid.
    pub processes: BTreeMap<i32, ProcessInfo>,
    /// Pids listed in procfs whose `stat` could not be read for another
    /// reason than their exit (denied by a profile, an I/O error): whether
    /// they live is unknown, so no check may take them for gone. A procfs
    /// gap says why.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub unread_pids: BTreeSet<i32>,
    /// Every containerd shim process (of any containerd; see [`Shim::serves`]).
    pub shims: Vec<Shim>,
    /// Pod sandboxes CRI keeps directories for (root and state), by id.
    pub cri_sandboxes: BTreeSet<String>,
    /// Mounts below containerd's root and state directories.
    pub mounts: Vec<Mount>,
    /// Whether the mount table was read (so a mount not in `mounts` is not
    /// mounted); false when not asked for or unreadable, and in archives
    /// from before it was recorded.
    #[serde(default)]
    pub mounts_read: bool,
    /// What the containerd API answered; `None` when it was not asked.
    pub containerd: Option<ContainerdView>,
    /// What the CRI API answered; `None` when it was not asked.
    pub cri: Option<CriView>,
    /// I/O pressure, write-back and overlay options of the node.
    pub node: NodeContext,
    /// Which containerd version runs, and how nodectl knows.
    #[serde(default)]
    pub containerd_version: ContainerdVersion,
    /// containerd's snapshots, leases and the snapshots its containers use;
    /// `None` when not asked (only `leaked-snapshots` asks).
    #[serde(default)]
    pub snapshotter: Option<SnapshotterView>,
    /// CNI's networks and the addresses host-local holds; `None` when not
    /// read.
    #[serde(default)]
    pub cni: Option<CniView>,
    /// kubelet's pod directories; `None` when not read (or no kubelet
    /// root here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletView>,
    /// kubelet's pod cgroups; `None` when not read (or none here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_cgroups: Option<CgroupView>,
    /// The pods' network namespaces CRI mounted; `None` when not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<NetnsView>,
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

impl Snapshot {
    /// A snapshot of `paths` in which nothing has been seen yet.
    pub fn empty(taken_at: UnixNanos, paths: Paths, namespace: String) -> Snapshot {
        Snapshot {
            taken_at,
            paths,
            namespace,
            cri_containers: Vec::new(),
            cri_store_listed: None,
            bundles: BTreeMap::new(),
            processes: BTreeMap::new(),
            unread_pids: BTreeSet::new(),
            shims: Vec::new(),
            cri_sandboxes: BTreeSet::new(),
            mounts: Vec::new(),
            mounts_read: false,
            containerd: None,
            cri: None,
            cni: None,
            kubelet: None,
            pod_cgroups: None,
            netns: None,
            node: NodeContext::default(),
            containerd_version: ContainerdVersion::default(),
            snapshotter: None,
            gaps: Vec::new(),
        }
    }

    /// Every process by its parent's pid, built once for all the shims a
    /// check or command asks about: a node of tens of thousands of
    /// processes made a search of them all per shim quadratic.
    pub fn children_index(&self) -> Children<'_> {
        let mut by_parent: HashMap<i32, Vec<&ProcessInfo>> = HashMap::new();
        for process in self.processes.values() {
            by_parent.entry(process.ppid).or_default().push(process);
        }
        Children(by_parent)
    }

    /// Whether procfs was read. When it was not (missing, or it did not
    /// answer by the deadline), no process is known: a process not seen is
    /// then no evidence that it is gone, and no shim not seen that none
    /// serves a task.
    pub fn processes_read(&self) -> bool {
        self.source_read(Source::Procfs)
    }

    /// Whether `source` was read: no gap made it unavailable (an item's
    /// gap leaves the rest of it).
    pub fn source_read(&self, source: Source) -> bool {
        !self
            .gaps
            .iter()
            .any(|gap| gap.source == source && gap.source_unavailable)
    }

    /// Whether the records containerd keeps on disk were read: CRI's
    /// status files and the runtime's bundles, what a judgement without
    /// the API infers ownership from. One unread (hidden from nodectl in
    /// another mount namespace, say) says nothing of what it holds.
    pub fn disk_records_read(&self) -> bool {
        self.source_read(Source::CriStore) && self.source_read(Source::Bundles)
    }

    /// Whether `at` (unix ns) was `grace` or more before the snapshot.
    pub fn is_older_than(&self, at: UnixNanos, grace: std::time::Duration) -> bool {
        let grace = i64::try_from(grace.as_nanos()).unwrap_or(i64::MAX);
        self.taken_at.saturating_sub(at) >= grace
    }

    /// Seconds from `since` (unix ns) to when the snapshot was taken, to a
    /// tenth; 0 when `since` is unknown.
    pub fn seconds_since(&self, since: UnixNanos) -> f64 {
        if since <= 0 {
            return 0.0;
        }
        seconds(self.taken_at.saturating_sub(since))
    }
}

impl Snapshot {
    /// The names of container or sandbox `id` of [`Snapshot::namespace`]
    /// ([`Names::of`]). For one id: a check naming many builds
    /// [`Snapshot::names`] once.
    pub fn names_of(&self, id: &str) -> PodRef {
        self.names().of(id)
    }

    /// The names of container or sandbox `id` of containerd namespace
    /// `namespace` ([`Names::of_in`]), for one id.
    pub fn names_in(&self, namespace: &str, id: &str) -> PodRef {
        self.names().of_in(namespace, id)
    }

    /// What names the containers and sandboxes of this snapshot, with CRI's
    /// lists indexed once: a check names each of its findings, thousands
    /// on a node of tens of thousands of containers, and a search of CRI's
    /// lists for each made it quadratic.
    pub fn names(&self) -> Names<'_> {
        Names {
            snapshot: self,
            cri: self.cri.as_ref().map(CriView::index),
        }
    }
}

/// See [`Snapshot::names`].
pub struct Names<'a> {
    snapshot: &'a Snapshot,
    cri: Option<CriIndex<'a>>,
}

impl Names<'_> {
    /// The names of container or sandbox `id` of [`Snapshot::namespace`].
    pub fn of(&self, id: &str) -> PodRef {
        self.of_in(&self.snapshot.namespace, id)
    }

    /// The names of container or sandbox `id` of containerd namespace
    /// `namespace`, each from the first source that has it: the labels of
    /// containerd's container record (it lives until the container is
    /// removed), CRI's metadata (a container's pod names are its sandbox's),
    /// then the bundle's annotations (gone with the task in containerd 1.7 and
    /// 2.x). A sandbox gets no container name. Unknown names stay `None`.
    pub fn of_in(&self, namespace: &str, id: &str) -> PodRef {
        let snapshot = self.snapshot;
        // CRI keeps its pods in one namespace whatever `-n` says; bundles
        // were read for `-n`'s only.
        let cris = namespace == CRI_NAMESPACE;
        let ours = namespace == snapshot.namespace;
        let record = snapshot
            .containerd
            .as_ref()
            .and_then(|view| view.labels(namespace, id));
        let cri = self.cri.as_ref().filter(|_| cris);
        let bundle = snapshot.bundles.get(id).filter(|_| ours);
        let sandbox = record.is_some_and(|l| l.get(KIND_LABEL).is_some_and(|k| k == "sandbox"))
            || cri.is_some_and(|cri| cri.is_sandbox(id))
            || bundle.is_some_and(Bundle::is_sandbox)
            || (cris && snapshot.cri_sandboxes.contains(id));
        let mut names = record
            .map(PodRef::from_labels)
            .unwrap_or_default()
            .or(cri.and_then(|cri| cri.names_of(id)).unwrap_or_default())
            .or(bundle.map(Bundle::names).unwrap_or_default());
        if sandbox {
            names.container_name = None;
        }
        names
    }
}

/// See [`Snapshot::children_index`]; each parent's children in pid order.
pub struct Children<'a>(HashMap<i32, Vec<&'a ProcessInfo>>);

impl Children<'_> {
    /// The children of `pid`, split into running and defunct ones.
    pub fn of(&self, pid: i32) -> (Vec<i32>, Vec<i32>) {
        let children = self.0.get(&pid).into_iter().flatten();
        let (live, defunct): (Vec<&ProcessInfo>, Vec<&ProcessInfo>) =
            children.partition(|p| p.is_running());
        (
            live.iter().map(|p| p.pid).collect(),
            defunct.iter().map(|p| p.pid).collect(),
        )
    }
}

/// Nanoseconds as seconds, rounded to a tenth.
pub fn seconds(nanos: i64) -> f64 {
    (nanos as f64 / 1e9 * 10.0).round() / 10.0
}

/// Formats unix ns as RFC 3339 (UTC); 0 and out-of-range values as `null`.
pub fn timestamp(nanos: i64) -> serde_json::Value {
    if nanos <= 0 {
        return serde_json::Value::Null;
    }
    let time = chrono::DateTime::from_timestamp_nanos(nanos);
    serde_json::Value::String(time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// The annotation runc's v2 shim groups tasks by before CRI's sandbox id
/// (its `groupLabels`): any workload can set it, so a shim may serve
/// containers of other pods than its own.
pub const RUNC_GROUP_ANNOTATION: &str = "io.containerd.runc.v2.group";

/// A task bundle: `<state>/io.containerd.runtime.v2.task/<namespace>/<id>/`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Bundle {
    pub id: String,
    #[serde(with = "crate::model::path_json")]
    pub path: PathBuf,
    /// `io.kubernetes.cri.*` annotations from the bundle's OCI `config.json`,
    /// and runc's [`RUNC_GROUP_ANNOTATION`].
    pub annotations: BTreeMap<String, String>,
    /// Why `config.json` could not be read (missing, unreadable, corrupt):
    /// its annotations are then unknown, not absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_error: Option<String>,
    /// Content of the bundle's `shim.pid`, when the shim wrote one.
    pub shim_pid: Option<i32>,
    /// Content of the bundle's `address`: the shim's ttrpc socket.
    pub shim_socket: Option<String>,
}

impl Bundle {
    fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.get(key).map(String::as_str)
    }
    /// The names in the annotations (a sandbox's carry no container name).
    pub fn names(&self) -> PodRef {
        PodRef {
            pod_namespace: self.pod_namespace().map(str::to_string),
            pod_name: self.pod_name().map(str::to_string),
            container_name: self.container_name().map(str::to_string),
        }
    }
    /// CRI marks a sandbox's spec with `container-type: sandbox`.
    pub fn is_sandbox(&self) -> bool {
        self.annotation("io.kubernetes.cri.container-type") == Some("sandbox")
            || self.sandbox_id() == Some(self.id.as_str())
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
    /// The id runc's v2 shim groups this task under, as it reads the spec:
    /// [`RUNC_GROUP_ANNOTATION`], else the pod's sandbox id, else the task's
    /// own. One shim, started with `-id` of the group's first task, serves
    /// every task of the group. `Err` with why when the spec was not read.
    pub fn shim_group(&self) -> Result<&str, &str> {
        if let Some(why) = &self.spec_error {
            return Err(why);
        }
        Ok(self
            .annotation(RUNC_GROUP_ANNOTATION)
            .or(self.sandbox_id())
            .unwrap_or(&self.id))
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

/// One mount from mountinfo.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Mount {
    /// Where the mount table has it: what is unmounted.
    #[serde(with = "crate::model::path_json")]
    pub mount_point: PathBuf,
    /// The same place spelled below the directory as nodectl was given it
    /// (`--state`, `--root`), when the table names that directory otherwise
    /// (through a symlink, `..`, `/var/run`, or a bind mount of it): paths
    /// nodectl builds (bundles, owners) are spelled that way. `None` when
    /// both spellings agree. See [`Mount::path_as_given`].
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::model::path_json::option"
    )]
    pub as_given: Option<PathBuf>,
    pub fs_type: String,
    pub source: Option<String>,
    /// Mount and superblock options, sorted (`volatile` shows up here).
    pub options: Vec<String>,
}

impl Mount {
    /// The mount point as nodectl spells the directory it is below: what
    /// to compare with a bundle's path or strip the state directory from.
    pub fn path_as_given(&self) -> &Path {
        self.as_given.as_deref().unwrap_or(&self.mount_point)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::names::CONTAINER_NAME_LABEL;
    use crate::model::CriApiState;

    fn names(namespace: &str, pod: &str, container: Option<&str>) -> PodRef {
        PodRef {
            pod_namespace: Some(namespace.to_string()),
            pod_name: Some(pod.to_string()),
            container_name: container.map(str::to_string),
        }
    }

    /// Container `a` of sandbox `s`, known to all three sources, each under
    /// other names so that the answer tells which one was used.
    fn known_everywhere() -> Snapshot {
        let mut s = snapshot();
        with_records(&mut s, &[id('a'), id('s')]);
        with_labels(&mut s, &id('a'), labels("rec-ns", "rec-pod", Some("rec-c")));
        with_labels(&mut s, &id('s'), labels("rec-ns", "rec-pod", None));
        s.cri = Some(CriView {
            sandboxes: Some(vec![cri_sandbox(&id('s'), "cri-ns", "cri-pod")]),
            containers: Some(vec![cri_container(
                &id('a'),
                &id('s'),
                "cri-c",
                CriApiState::ContainerExited,
            )]),
            ..CriView::default()
        });
        s.bundles
            .insert(id('a'), bundle(&id('a'), &id('s'), "bundle-c"));
        s
    }

    #[test]
    fn record_labels_win_over_cri_which_wins_over_the_bundle() {
        let mut s = known_everywhere();
        assert_eq!(
            s.names_of(&id('a')),
            names("rec-ns", "rec-pod", Some("rec-c"))
        );

        // A record without naming labels (not made by kubelet): CRI's names,
        // the pod's from the sandbox's metadata.
        with_labels(&mut s, &id('a'), BTreeMap::new());
        assert_eq!(
            s.names_of(&id('a')),
            names("cri-ns", "cri-pod", Some("cri-c"))
        );

        // Neither API answered: the bundle's annotations.
        s.containerd = None;
        s.cri = None;
        assert_eq!(
            s.names_of(&id('a')),
            names("shop", "web-0", Some("bundle-c"))
        );
    }

    #[test]
    fn each_name_comes_from_the_first_source_that_has_it() {
        let mut s = known_everywhere();
        let mut partial = labels("rec-ns", "rec-pod", None);
        partial.remove(KIND_LABEL);
        with_labels(&mut s, &id('a'), partial);
        assert_eq!(
            s.names_of(&id('a')),
            names("rec-ns", "rec-pod", Some("cri-c"))
        );

        // CRI lists the container but no longer its sandbox: the container's
        // own labels name the pod.
        let cri = s.cri.as_mut().unwrap();
        cri.sandboxes = Some(Vec::new());
        cri.containers.as_mut().unwrap()[0].labels = labels("lbl-ns", "lbl-pod", Some("lbl-c"));
        s.containerd = None;
        assert_eq!(
            s.names_of(&id('a')),
            names("lbl-ns", "lbl-pod", Some("cri-c"))
        );
    }

    #[test]
    fn a_sandbox_is_named_after_its_pod_without_a_container_name() {
        let mut s = known_everywhere();
        // A pod's own labels land on its sandbox record; a pod may carry a
        // container-name label, which must not name the sandbox.
        let mut sandbox_labels = labels("rec-ns", "rec-pod", None);
        sandbox_labels.insert(
            CONTAINER_NAME_LABEL.to_string(),
            "not-a-container".to_string(),
        );
        with_labels(&mut s, &id('s'), sandbox_labels);
        let cri = s.cri.take();
        assert_eq!(s.names_of(&id('s')), names("rec-ns", "rec-pod", None));

        s.containerd = None;
        s.cri = cri;
        assert_eq!(s.names_of(&id('s')), names("cri-ns", "cri-pod", None));

        s.cri = None;
        s.bundles.insert(id('s'), bundle(&id('s'), &id('s'), "POD"));
        assert_eq!(s.names_of(&id('s')), names("shop", "web-0", None));
    }

    #[test]
    fn a_snapshot_collected_before_names_were_kept_still_loads() {
        let mut old = serde_json::to_value(known_everywhere()).unwrap();
        for ns in old["containerd"]["namespaces"]
            .as_object_mut()
            .unwrap()
            .values_mut()
        {
            ns.as_object_mut().unwrap().remove("labels");
        }
        for list in ["sandboxes", "containers"] {
            for item in old["cri"][list].as_array_mut().unwrap() {
                let item = item.as_object_mut().unwrap();
                for key in ["name", "namespace", "labels"] {
                    item.remove(key).expect("a field of today's CriItem");
                }
            }
        }
        let s: Snapshot = serde_json::from_value(old).unwrap();
        assert_eq!(
            s.names_of(&id('a')),
            names("shop", "web-0", Some("bundle-c"))
        );
    }

    #[test]
    fn nothing_known_gives_no_names() {
        let s = known_everywhere();
        assert_eq!(s.names_of(&id('z')), PodRef::default());
        assert_eq!(PodRef::default().display(), "?/?/?");
        // CRI and the bundles speak for the namespace nodectl looks at only.
        assert_eq!(s.names_in("moby", &id('a')), PodRef::default());
    }
}
