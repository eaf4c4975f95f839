//! What several checks ask of a snapshot: which shim serves a container,
//! whether containerd still holds a record of an id.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ops::Bound;
use std::path::Path;

use crate::model::{Basis, CniIndex, CriContainer, KubeletView, PodDir, Shim, Snapshot};

/// The shim serving a container: the one whose pid the bundle recorded, else
/// (runc v2 groups a pod's containers in one shim) the shim started with
/// `-id <sandbox id>` for this containerd and namespace. For one container;
/// a check asking for many builds a [`ShimIndex`] once.
pub fn shim_of<'a>(snapshot: &'a Snapshot, container: &CriContainer) -> Option<&'a Shim> {
    ShimIndex::new(snapshot).shim_of(snapshot, container)
}

/// The shims of our containerd and namespace by pid and by `-id`, each
/// proven once ([`Shim::serves`] judges the proof, with its words, on every
/// call): asking per container would judge every shim for every container.
pub struct ShimIndex<'a> {
    by_pid: HashMap<i32, &'a Shim>,
    /// The first such shim for each id, as a scan in snapshot order finds.
    by_id: HashMap<&'a str, &'a Shim>,
}

impl<'a> ShimIndex<'a> {
    pub fn new(snapshot: &'a Snapshot) -> ShimIndex<'a> {
        let mut index = ShimIndex {
            by_pid: HashMap::new(),
            by_id: HashMap::new(),
        };
        let ours = snapshot.shims.iter().filter(|shim| {
            shim.namespace.as_deref() == Some(snapshot.namespace.as_str())
                && shim.serves(&snapshot.paths.address.path)
        });
        for shim in ours {
            index.by_pid.entry(shim.pid).or_insert(shim);
            if let Some(id) = shim.id.as_deref() {
                index.by_id.entry(id).or_insert(shim);
            }
        }
        index
    }

    /// [`shim_of`], looked up.
    pub fn shim_of(&self, snapshot: &Snapshot, container: &CriContainer) -> Option<&'a Shim> {
        let bundle = snapshot.bundles.get(&container.id);
        if let Some(shim) = bundle
            .and_then(|b| b.shim_pid)
            .and_then(|pid| self.by_pid.get(&pid))
        {
            return Some(shim);
        }
        let group = bundle.and_then(|b| b.sandbox_id()).unwrap_or(&container.id);
        self.by_id.get(group).copied()
    }

    /// The shim of ours started with `-id <id>`: a pod's sandbox id names
    /// the shim its containers share (runc v2's grouping by sandbox).
    pub fn started_for(&self, id: &str) -> Option<&'a Shim> {
        self.by_id.get(id).copied()
    }
}

/// Whether containerd holds a container record for `id` in `namespace`.
/// Without an API answer, any trace on disk (bundle, CRI status or sandbox
/// directory) counts as a record: when unsure, nothing is called leaked.
/// For one id: a check asking of many builds [`Records::indexed`] once.
pub fn has_record(snapshot: &Snapshot, namespace: &str, id: &str) -> (bool, Basis) {
    Records::indexed(snapshot).has(namespace, id)
}

/// [`has_record`], asked of one snapshot many times: a check of every
/// mount or shim of a node asks for thousands of ids, and finding each
/// among the status files one by one cost as much as the rest of the
/// checks.
pub struct Records<'a> {
    snapshot: &'a Snapshot,
    /// The status files' ids.
    cri_ids: HashSet<&'a str>,
}

impl<'a> Records<'a> {
    /// The status files' ids indexed once.
    pub fn indexed(snapshot: &'a Snapshot) -> Records<'a> {
        Records {
            snapshot,
            cri_ids: snapshot
                .cri_containers
                .iter()
                .map(|c| c.id.as_str())
                .collect(),
        }
    }

    /// See [`has_record`].
    pub fn has(&self, namespace: &str, id: &str) -> (bool, Basis) {
        let snapshot = self.snapshot;
        if let Some(ids) = snapshot
            .containerd
            .as_ref()
            .and_then(|v| v.containers(namespace))
        {
            return (ids.contains(id), Basis::ContainerdApi);
        }
        let on_disk = (namespace == snapshot.namespace && snapshot.bundles.contains_key(id))
            || snapshot.cri_sandboxes.contains(id)
            || self.cri_ids.contains(id);
        (on_disk, Basis::Disk)
    }
}

/// The ids shims of ours were started for (`-id`), each shim judged once
/// ([`Shim::serves`] judges a shim's proof on every call), for a check
/// that asks of many ids.
pub fn served_ids(snapshot: &Snapshot) -> HashSet<&str> {
    snapshot
        .shims
        .iter()
        .filter(|s| s.serves(&snapshot.paths.address.path))
        .filter_map(|s| s.id.as_deref())
        .collect()
}

/// The mount points of a snapshot (as given), sorted once so that "is
/// anything mounted under this directory" is a range query, not a search of
/// every mount per directory (docs/performance.md, `check --from`).
pub struct MountPoints<'a>(BTreeSet<&'a Path>);

impl<'a> MountPoints<'a> {
    pub fn of(snapshot: &'a Snapshot) -> MountPoints<'a> {
        MountPoints(snapshot.mounts.iter().map(|m| m.path_as_given()).collect())
    }

    /// Whether a mount point starts with `dir` ([`Path::starts_with`], by
    /// components). `Path` orders by components too, so the paths under
    /// `dir` follow `dir` in one run: the first at or after it tells.
    pub fn any_under(&self, dir: &Path) -> bool {
        self.0
            .range::<Path, _>((Bound::Included(dir), Bound::Unbounded))
            .next()
            .is_some_and(|point| point.starts_with(dir))
    }
}

/// The first 13 characters of an id, as containerd's tools print it.
/// The namespace and name of the pod of uid `uid`, as libcni's cache
/// still names it (CNI read, its DEL never ran); none otherwise. `cni` is
/// the snapshot's cache, indexed once for all the uids a check asks about.
pub fn pod_of_uid(cni: Option<&CniIndex>, uid: &str) -> (Option<String>, Option<String>) {
    cni.map_or((None, None), |cni| cni.pod_of_uid(uid))
}

/// " of pod <ns>/<name>", or nothing when no name is known.
pub fn of_pod(namespace: &Option<String>, name: &Option<String>) -> String {
    match (namespace, name) {
        (Some(namespace), Some(name)) => format!(" of pod {namespace}/{name}"),
        (None, Some(name)) => format!(" of pod {name}"),
        _ => String::new(),
    }
}

pub fn short(id: &str) -> &str {
    id.get(..13).unwrap_or(id)
}

/// kubelet's view and its pod directories no sandbox CRI lists names by
/// uid; `None` without kubelet's directories or CRI's list (nothing can be
/// told then).
pub fn pod_dirs_without_sandbox(snapshot: &Snapshot) -> Option<(&KubeletView, Vec<&PodDir>)> {
    let kubelet = snapshot.kubelet.as_ref()?;
    let uids = snapshot.cri.as_ref()?.pod_uids()?;
    let dirs = kubelet
        .pod_dirs
        .iter()
        .filter(|dir| !uids.contains(dir.uid.as_str()))
        .collect();
    Some((kubelet, dirs))
}

/// The kubelet releases whose log lines the remedies quote, as read in
/// kubernetes/kubernetes's source of the functions that log them
/// (docs/findings.md, "kubelet's own lines", names each). A release that
/// words one differently gets a range of its own there.
pub const KUBELET_RELEASES: &str = "kubelet 1.26-1.35";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;

    #[test]
    fn the_shim_a_bundle_names_by_pid_is_the_containers() {
        let mut s = snapshot();
        let c = running(&id('a'), 100, NOW - 60 * SEC);
        let mut b = bundle(&id('a'), &id('s'), "app");
        b.shim_pid = Some(41);
        s.bundles.insert(id('a'), b);
        // Another pod's shim first, then the one the bundle names, started
        // with an id that is not the sandbox's (not found by id).
        s.shims.push(shim(40, &id('t'), ADDRESS, &[]));
        s.shims.push(shim(41, &id('x'), ADDRESS, &[]));
        assert_eq!(shim_of(&s, &c).map(|s| s.pid), Some(41));
    }

    #[test]
    fn without_the_api_a_record_is_any_trace_of_that_id_on_disk() {
        let mut s = snapshot();
        s.bundles.insert(id('b'), bundle(&id('b'), &id('s'), "app"));
        s.cri_containers
            .push(running(&id('c'), 100, NOW - 60 * SEC));
        assert_eq!(has_record(&s, "k8s.io", &id('b')), (true, Basis::Disk));
        assert_eq!(has_record(&s, "k8s.io", &id('c')), (true, Basis::Disk));
        assert_eq!(has_record(&s, "k8s.io", &id('d')), (false, Basis::Disk));
        // Bundles are read for the snapshot's namespace only.
        assert_eq!(has_record(&s, "moby", &id('b')), (false, Basis::Disk));
    }
}
