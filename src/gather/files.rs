//! The file sources of a look other than CRI's status files and the pod
//! sources: CRI's sandbox dirs, the bundles, the mount table with the
//! node's context, and CNI, each on a thread of its own.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::seen_as_host;
use crate::gather::GatherOptions;
use crate::model::{Bundle, CniView, Gap, Mount, NodeContext, Paths, Source};
use crate::sources::host_view::HostView;
use crate::sources::{bundles, cni, cri_store, mountinfo, node, SourceThread};

/// The file sources of one look other than CRI's status files (read
/// first, see [`gather`]), each reading on a thread of its own.
pub(super) struct FileSources {
    sandboxes: SourceThread<BTreeSet<String>>,
    bundles: SourceThread<BTreeMap<String, Bundle>>,
    /// The mount table and the node's context, when read.
    mounts: Option<SourceThread<(Vec<Mount>, Option<mountinfo::Table>)>>,
    node: Option<SourceThread<NodeContext>>,
    cni: Option<SourceThread<CniView>>,
}

/// What the file sources other than the status files answered (each one
/// that did not answer in time is empty, with a gap).
pub(super) struct FilesRead {
    pub(super) cri_sandboxes: BTreeSet<String>,
    pub(super) bundles: BTreeMap<String, Bundle>,
    pub(super) mounts: Vec<Mount>,
    /// The mount table read, for the pod sources to look in again.
    pub(super) table: Option<mountinfo::Table>,
    pub(super) node: NodeContext,
    pub(super) cni: Option<CniView>,
}

impl FileSources {
    /// Starts every file source: the status files' thread, and the others.
    pub(super) fn start(
        paths: &Paths,
        options: &GatherOptions,
    ) -> (SourceThread<cri_store::Listing>, FileSources) {
        let dir = paths.cri_containers_dir();
        // containerd's root and state are held to the host's before they
        // are read, on each source's own thread (looking may stall as
        // reading does): in another mount namespace (a `kubectl debug
        // node` pod) they are absent or another, a gap saying so and how
        // to mount them, never "wrong --root" nor an empty store.
        let seen = (paths.root.path.clone(), options.proc_root.clone());
        let status_files =
            SourceThread::spawn(
                cri_store::SOURCE,
                &dir.clone(),
                move |gaps| match seen_as_host(
                    &HostView::of(&seen.1),
                    cri_store::SOURCE,
                    &seen.0,
                    gaps,
                ) {
                    true => cri_store::read(&dir, gaps),
                    false => Default::default(),
                },
            );
        let dirs = paths.cri_sandbox_dirs();
        let seen = (paths.root.path.clone(), options.proc_root.clone());
        let sandboxes = SourceThread::spawn(
            cri_store::SOURCE,
            &dirs.first().cloned().unwrap_or_default(),
            move |gaps| match seen_as_host(&HostView::of(&seen.1), cri_store::SOURCE, &seen.0, gaps)
            {
                true => cri_store::sandbox_ids(&dirs, gaps),
                false => Default::default(),
            },
        );
        let dir = paths.bundles_dir(&options.namespace);
        let sockets = options.bundle_sockets;
        let seen = (paths.state.path.clone(), options.proc_root.clone());
        let bundles =
            SourceThread::spawn(
                bundles::SOURCE,
                &dir.clone(),
                move |gaps| match seen_as_host(
                    &HostView::of(&seen.1),
                    bundles::SOURCE,
                    &seen.0,
                    gaps,
                ) {
                    true => bundles::read(&dir, sockets, gaps),
                    false => Default::default(),
                },
            );
        // The daemon's own table, once it is known (see `read_mounts`).
        let daemon_pending = options.mountinfo.is_none() && paths.daemon_lookup.is_some();
        let mounts = (options.mounts && !daemon_pending).then(|| read_mounts(paths, options));
        // The node's context goes with the mount table: neither is needed
        // where the mounts are not.
        let root = options.proc_root.clone();
        let node = options.mounts.then(|| {
            SourceThread::spawn(Source::Node, &root.clone(), move |gaps| {
                node::read(&root, gaps)
            })
        });
        let (cni_paths, proc_root) = (paths.clone(), options.proc_root.clone());
        let cni = options.cni.then(|| {
            let conf_dir = cni::conf_dir(paths.cni_conf_dir.as_deref());
            SourceThread::spawn(cni::SOURCE, &conf_dir, move |gaps| {
                cni::read_configured(&cni_paths, &proc_root, gaps)
            })
        });
        let others = FileSources {
            sandboxes,
            bundles,
            mounts,
            node,
            cni,
        };
        (status_files, others)
    }

    /// Starts reading the mount table, if it waited for the running
    /// containerd to be found (its own table is the one read).
    pub(super) fn found_daemon(&mut self, paths: &Paths, options: &GatherOptions) {
        if options.mounts && self.mounts.is_none() {
            self.mounts = Some(read_mounts(paths, options));
        }
    }

    /// Waits for them until `deadline`.
    pub(super) fn wait(
        self,
        deadline: Instant,
        started: Instant,
        gaps: &mut Vec<Gap>,
    ) -> FilesRead {
        let cri_sandboxes = self
            .sandboxes
            .wait(deadline, started, gaps)
            .unwrap_or_default();
        let bundles = self
            .bundles
            .wait(deadline, started, gaps)
            .unwrap_or_default();
        let (mounts, table) = self
            .mounts
            .and_then(|mounts| mounts.wait(deadline, started, gaps))
            .unwrap_or_default();
        let mut node = self
            .node
            .and_then(|node| node.wait(deadline, started, gaps))
            .unwrap_or_default();
        node::count_rootfs_mounts(&mut node, &mounts);
        let cni = self.cni.and_then(|cni| cni.wait(deadline, started, gaps));
        FilesRead {
            cri_sandboxes,
            bundles,
            mounts,
            table,
            node,
            cni,
        }
    }
}

/// Reads the mounts below containerd's root and state in the daemon's
/// mount table (see [`GatherOptions::mount_table`]).
fn read_mounts(
    paths: &Paths,
    options: &GatherOptions,
) -> SourceThread<(Vec<Mount>, Option<mountinfo::Table>)> {
    let (file, below) = (
        options.mount_table(paths),
        [paths.root.path.clone(), paths.state.path.clone()],
    );
    SourceThread::spawn(Source::Mountinfo, &file.clone(), move |gaps| {
        let below: Vec<&Path> = below.iter().map(PathBuf::as_path).collect();
        mountinfo::read_keeping(&file, &below, gaps)
    })
}
