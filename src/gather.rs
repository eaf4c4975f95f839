//! Gather: runs every source once and assembles the snapshot.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use crate::paths::Paths;
use crate::snapshot::{Gap, Snapshot};
use crate::sources::{bundles, containerd_api, cri_store, mountinfo, procfs};

#[derive(Debug, Clone)]
pub struct GatherOptions {
    pub namespace: String,
    /// Normally `/proc`; another root reads a captured or synthetic procfs.
    pub proc_root: PathBuf,
    /// Normally `/proc/self/mountinfo`.
    pub mountinfo: PathBuf,
    /// Ask the containerd API, with this deadline per call; `None` skips it.
    pub api_timeout: Option<Duration>,
}

/// Reads the node. Status files are read before procfs so that a container
/// started in between cannot look dead; one that exits in between can, which
/// is why callers confirm zombies with a second snapshot.
pub fn gather(paths: &Paths, options: &GatherOptions, mut gaps: Vec<Gap>) -> Snapshot {
    let taken_at = now_nanos();
    let cri_containers = cri_store::read(&paths.cri_containers_dir(), &mut gaps);
    let cri_sandboxes = cri_store::sandbox_ids(&paths.cri_sandbox_dirs(), &mut gaps);
    let bundles = bundles::read(&paths.bundles_dir(&options.namespace), &mut gaps);
    let proc_scan = procfs::scan(&options.proc_root, &mut gaps);
    let mounts = mountinfo::read(
        &options.mountinfo,
        &[&paths.root.path, &paths.state.path],
        &mut gaps,
    );
    let containerd = options.api_timeout.map(|timeout| {
        // The shims' own namespaces too: a leaked shim is judged against the
        // records of the namespace it was started for.
        let mut namespaces: BTreeSet<String> = proc_scan
            .shims
            .iter()
            .filter(|s| s.serves(&paths.address.path))
            .filter_map(|s| s.namespace.clone())
            .collect();
        namespaces.insert(options.namespace.clone());
        containerd_api::query(&paths.address.path, &namespaces, timeout, &mut gaps)
    });
    Snapshot {
        taken_at,
        paths: paths.clone(),
        namespace: options.namespace.clone(),
        cri_containers,
        bundles,
        processes: proc_scan.processes,
        shims: proc_scan.shims,
        cri_sandboxes,
        mounts,
        containerd,
        gaps,
    }
}

pub fn now_nanos() -> i64 {
    chrono::Utc::now()
        .timestamp_nanos_opt()
        .expect("the clock is between 1677 and 2262")
}
