//! The sources about pods that kubelet and CRI keep beside containerd's
//! own records: kubelet's pod directories, its pod cgroups and CRI's pod
//! network namespaces. They start once procfs is read (kubelet's roots may
//! come from its command line), each on a thread of its own; what only
//! the APIs' answers narrow down (the processes in a pod cgroup or a
//! namespace no record names) is read after them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use super::seen_as_host;
use crate::gather::GatherOptions;
use crate::model::netns::is_cri_made;
use crate::model::{
    CgroupView, CniView, ContainerdView, CriView, Gap, KubeletView, KubeletWord, NetnsView, Origin,
    Paths, ProcessInfo, CRI_NAMESPACE,
};
use crate::sources::host_view::HostView;
use crate::sources::{kubelet, mountinfo, netns, pod_cgroups, pod_resources, SourceThread};

/// The pod sources of one look, reading.
pub(super) struct PodSources {
    kubelet: Option<SourceThread<Option<KubeletView>>>,
    kubelet_word: Option<SourceThread<KubeletWord>>,
    pod_cgroups: Option<SourceThread<Option<CgroupView>>>,
    /// The netns directory read, and its reading.
    netns: Option<(PathBuf, SourceThread<NetnsView>)>,
}

/// What they read.
#[derive(Default)]
pub(super) struct PodsRead {
    pub kubelet: Option<KubeletView>,
    /// kubelet's word, still being asked: joined in [`PodsRead::narrow`].
    kubelet_word: Option<SourceThread<KubeletWord>>,
    pub pod_cgroups: Option<CgroupView>,
    pub netns: Option<NetnsView>,
    /// The directory `netns` was read from, and its gaps, held until CRI's
    /// word settles which directory is judged ([`PodsRead::settle_netns_dir`]).
    netns_read: Option<(PathBuf, Vec<Gap>)>,
}

impl PodSources {
    pub(super) fn start(
        paths: &Paths,
        options: &GatherOptions,
        processes: &BTreeMap<i32, ProcessInfo>,
        table: Option<mountinfo::Table>,
    ) -> PodSources {
        // The running kubelets, proven once for the look (a process scan
        // and a connection to each one's socket), for both of its roots.
        // Not looked for when both are given.
        let looked_for = (options.kubelet && options.kubelet_root.is_none())
            || (options.pod_cgroups && options.kubelet_cgroup_root.is_none());
        let running = match looked_for {
            true => kubelet::running(&options.proc_root, processes, Some(&paths.address.path)),
            false => kubelet::Running::default(),
        };
        let kubelet_root = options
            .kubelet
            .then(|| kubelet::root(options.kubelet_root.as_deref(), &running));
        // Why a kubelet's runner could not be read, said once, by the
        // source whose root was to come from it (none given by flag).
        let unread_said_by_kubelet = kubelet_root
            .as_ref()
            .is_some_and(|root| root.origin != Origin::Flag);
        let kubelet = kubelet_root.clone().map(|root| {
            let running = running.clone();
            let (mountinfo, table) = (options.mount_table(paths), table.clone());
            let proc_root = options.proc_root.clone();
            let pod_logs_flag = options.kubelet_pod_logs.clone();
            SourceThread::spawn(kubelet::SOURCE, &root.path.clone(), move |gaps| {
                if root.origin != Origin::Flag {
                    for (path, why) in &running.unread {
                        gaps.push(Gap::item(kubelet::SOURCE, path, why.clone()));
                    }
                }
                // kubelet's root as kubelet has it, or none: a DaemonSet pod
                // that does not mount it sees nothing of kubelet's there.
                if let Some(why) = kubelet::root_unseen(&root, &running) {
                    gaps.push(Gap::source(kubelet::SOURCE, &root.path, why));
                    return None;
                }
                let (host, pods) = (HostView::of(&proc_root), root.path.join("pods"));
                seen_as_host(&host, kubelet::SOURCE, &pods, gaps)
                    .then(|| {
                        let flag = pod_logs_flag.as_deref();
                        let dir = kubelet::pod_logs_dir(flag, &root, &running, gaps);
                        let pod_logs = kubelet::PodLogsAt::of(dir, &running);
                        kubelet::read(root, pod_logs, table.as_ref(), &mountinfo, gaps)
                    })
                    .flatten()
            })
        });
        // kubelet's own word on its pods, asked beside the APIs (a frozen
        // kubelet holds this thread, never the look) and joined with them.
        let kubelet_word = kubelet_root.map(|root| {
            let socket = root.path.join(pod_resources::SOCKET);
            let (proc_root, timeout) = (options.proc_root.clone(), options.timeout);
            let kubelets = running.pids();
            SourceThread::spawn(kubelet::SOURCE, &socket, move |gaps| {
                pod_resources::ask(&root.path, &proc_root, &kubelets, timeout, gaps)
            })
        });
        let pod_cgroups = options.pod_cgroups.then(|| {
            let (root, kubelet) =
                kubelet::cgroup_root(options.kubelet_cgroup_root.as_deref(), &running);
            let (cgroup_fs, proc_root) = (options.cgroup_fs.clone(), options.proc_root.clone());
            let unread = match unread_said_by_kubelet || root.origin == Origin::Flag {
                true => Vec::new(),
                false => running.unread.clone(),
            };
            SourceThread::spawn(pod_cgroups::SOURCE, &cgroup_fs.clone(), move |gaps| {
                for (path, why) in unread {
                    gaps.push(Gap::item(kubelet::SOURCE, &path, why));
                }
                // A cgroup namespace of its own shows nodectl's cgroup as
                // the root: another inode than the host's.
                let host = HostView::of(&proc_root);
                if !seen_as_host(&host, pod_cgroups::SOURCE, &cgroup_fs, gaps) {
                    return None;
                }
                let root = kubelet::cgroup_root_configured(root, kubelet.as_ref(), gaps);
                let (driver, per_qos) = kubelet::cgroup_settings(kubelet.as_ref(), gaps);
                let settings = pod_cgroups::Settings { driver, per_qos };
                pod_cgroups::read(root, settings, &cgroup_fs, gaps)
            })
        });
        let netns = options
            .netns
            .then(|| (netns::dir(paths), read_netns(paths, options, table)));
        PodSources {
            kubelet,
            kubelet_word,
            pod_cgroups,
            netns,
        }
    }

    /// Waits for them until `deadline`.
    pub(super) fn wait(self, deadline: Instant, started: Instant, gaps: &mut Vec<Gap>) -> PodsRead {
        PodsRead {
            kubelet: self
                .kubelet
                .and_then(|s| s.wait(deadline, started, gaps))
                .flatten(),
            kubelet_word: self.kubelet_word,
            pod_cgroups: self
                .pod_cgroups
                .and_then(|s| s.wait(deadline, started, gaps))
                .flatten(),
            netns: None,
            netns_read: None,
        }
        .with_netns(self.netns, deadline, started)
    }
}

/// CRI's pod network namespaces in its netns directory for `paths`, read
/// on a thread of its own.
fn read_netns(
    paths: &Paths,
    options: &GatherOptions,
    table: Option<mountinfo::Table>,
) -> SourceThread<NetnsView> {
    let (dir, mountinfo) = (netns::dir(paths), options.mount_table(paths));
    let proc_root = options.proc_root.clone();
    SourceThread::spawn(netns::SOURCE, &dir.clone(), move |gaps| {
        // CRI's mounts there are in the host's mount table: the
        // directory not the host's, nodectl's table lacks them.
        seen_as_host(&HostView::of(&proc_root), netns::SOURCE, &dir, gaps);
        netns::read(&dir, table.as_ref(), &mountinfo, gaps)
    })
}

impl PodsRead {
    /// The netns read from `dir`, waited for until `deadline`, with its
    /// gaps held.
    fn with_netns(
        mut self,
        netns: Option<(PathBuf, SourceThread<NetnsView>)>,
        deadline: Instant,
        started: Instant,
    ) -> PodsRead {
        if let Some((dir, thread)) = netns {
            let mut gaps = Vec::new();
            self.netns = thread.wait(deadline, started, &mut gaps);
            self.netns_read = Some((dir, gaps));
        }
        self
    }

    /// Once CRI's own word settled where it mounts pods' network
    /// namespaces (`paths.netns_under_state_dir`, see
    /// `settle::settle_config_by_cri`): what was read from another
    /// directory (containerd's config read apart from how its line
    /// merges it) is dropped with its gaps and CRI's directory read
    /// instead, within the deadline; nothing from a directory CRI does not
    /// use is judged. Else the reading's gaps join the look's.
    pub(super) fn settle_netns_dir(
        &mut self,
        paths: &Paths,
        options: &GatherOptions,
        table: Option<&mountinfo::Table>,
        (deadline, started): (Instant, Instant),
        gaps: &mut Vec<Gap>,
    ) {
        let Some((dir, mut read_gaps)) = self.netns_read.take() else {
            return;
        };
        if dir == netns::dir(paths) {
            gaps.append(&mut read_gaps);
            return;
        }
        // The table (hundreds of KB on a node) copied only for a re-read.
        let again = read_netns(paths, options, table.cloned());
        self.netns = again.wait(deadline, started, gaps);
    }

    /// After the APIs: kubelet's word, asked beside them, joined (until
    /// `deadline`) into kubelet's view.
    pub(super) fn join_kubelet_word(
        &mut self,
        deadline: Instant,
        started: Instant,
        gaps: &mut Vec<Gap>,
    ) {
        let word = self
            .kubelet_word
            .take()
            .and_then(|s| s.wait(deadline, started, gaps));
        if let Some(view) = self.kubelet.as_mut() {
            view.word = word.unwrap_or_else(|| KubeletWord::Unavailable {
                why: "kubelet's pod-resources API did not answer by the look's deadline"
                    .to_string(),
            });
        }
    }

    /// After the APIs: what holds a namespace (any thread in it, any
    /// descriptor on it) is looked for only for those CRI made that no
    /// sandbox record names, and the interfaces of those nothing holds; and
    /// processes are counted only in the pod cgroups CRI does not list.
    pub(super) fn narrow(
        &mut self,
        containerd: Option<&ContainerdView>,
        cri: Option<&CriView>,
        cni: Option<&CniView>,
        options: &GatherOptions,
        processes: &BTreeMap<i32, ProcessInfo>,
        gaps: &mut Vec<Gap>,
    ) {
        if let Some(view) = self.netns.as_mut() {
            let named = containerd
                .map(|c| c.netns_files_named(CRI_NAMESPACE))
                .unwrap_or_default();
            // Only the namespaces CRI made that no record names are
            // candidates; another's (`ip netns add`, podman's) is not
            // looked into at all.
            let index = cni.map(CniView::index);
            let candidates: Vec<usize> = view
                .mounts
                .iter()
                .enumerate()
                .filter(|(_, m)| {
                    m.path
                        .file_name()
                        .is_some_and(|n| !named.contains(n) && is_cri_made(n, index.as_ref()))
                })
                .map(|(index, _)| index)
                .collect();
            let wanted = candidates
                .iter()
                .map(|&i| (view.mounts[i].device, view.mounts[i].inode))
                .collect();
            // Without procfs no process is known: none is looked for.
            if !processes.is_empty() {
                netns::find_holders(
                    view,
                    &wanted,
                    &options.proc_root,
                    processes.keys().copied(),
                    gaps,
                );
            }
            if view.holders_looked_for {
                let unheld: Vec<usize> = candidates
                    .into_iter()
                    .filter(|&i| !view.holders.contains_key(&view.mounts[i].inode))
                    .collect();
                netns::look_at_interfaces(view, &unheld, &options.proc_root, gaps);
                let cri_networks = cni.map_or(0, |cni| cni.cri_networks.len());
                netns::note_unread_holders(view, &unheld, cri_networks, &options.proc_root, gaps);
            }
        }
        if let (Some(view), Some(listed)) =
            (self.pod_cgroups.as_mut(), cri.and_then(CriView::pod_uids))
        {
            pod_cgroups::count_unlisted(view, &listed, gaps);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_netns_read_from_a_dir_cri_does_not_use_is_read_again_from_the_one_it_does() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let cris = state.join("io.containerd.grpc.v1.cri/netns");
        std::fs::create_dir_all(&cris).unwrap();
        let pods = cris.join("cni-01234567-89ab-cdef-0123-456789abcdef");
        std::fs::write(&pods, "").unwrap();
        let table = tmp.path().join("mountinfo");
        let line = format!("41 1 0:4 net:[9] {} rw - nsfs nsfs rw\n", pods.display());
        std::fs::write(&table, line).unwrap();
        let mut paths = crate::model::fixtures::snapshot().paths;
        paths.state.path = state;
        // CRI's word, taken after the files named /var/run/netns.
        paths.netns_under_state_dir = true;
        let mut options = crate::gather::tests::options("k8s.io", false);
        options.netns = true;
        options.mountinfo = Some(table);
        let files = PathBuf::from(netns::DEFAULT_DIR);
        let stale = Gap::item(netns::SOURCE, files.join("cni-x"), "read where CRI is not");
        let read_from = |dir: &PathBuf| PodsRead {
            netns: Some(NetnsView {
                dir: dir.clone(),
                ..NetnsView::default()
            }),
            netns_read: Some((dir.clone(), vec![stale.clone()])),
            ..PodsRead::default()
        };
        let now = Instant::now();
        let within = (now + std::time::Duration::from_secs(10), now);

        let mut read = read_from(&files);
        let mut gaps = Vec::new();
        read.settle_netns_dir(&paths, &options, None, within, &mut gaps);
        let view = read.netns.unwrap();
        assert_eq!(view.dir, cris);
        assert_eq!(view.mounts.len(), 1, "{view:?}");
        assert_eq!(view.mounts[0].path, pods);
        assert!(!gaps.contains(&stale), "{gaps:?}");

        // Read from CRI's own: kept as read, with its gaps.
        let mut read = read_from(&cris);
        let mut gaps = Vec::new();
        read.settle_netns_dir(&paths, &options, None, within, &mut gaps);
        assert_eq!(gaps, [stale]);
        assert!(read.netns.unwrap().mounts.is_empty());
    }

    #[test]
    fn a_pod_source_whose_directory_the_host_has_and_nodectl_does_not_see_is_a_gap() {
        let tmp = tempfile::tempdir().unwrap();
        let host_root = tmp.path().join("host");
        let ours = tmp.path().join("ours");
        // kubelet's pods, the cgroup hierarchy, CRI's netns directory: each
        // on the host, none where nodectl looks (a DaemonSet without them).
        for (source, dir) in [
            (kubelet::SOURCE, "var/lib/kubelet/pods"),
            (pod_cgroups::SOURCE, "sys/fs/cgroup"),
            (netns::SOURCE, "run/netns"),
        ] {
            let seen = ours.join(dir);
            std::fs::create_dir_all(host_root.join(seen.strip_prefix("/").unwrap())).unwrap();
            let host = HostView::Other(Ok(std::fs::File::open(&host_root).unwrap()));
            let mut gaps = Vec::new();
            assert!(!seen_as_host(&host, source, &seen, &mut gaps));
            assert_eq!(gaps.len(), 1, "{gaps:?}");
            assert!(
                gaps[0].source_unavailable && gaps[0].source == source,
                "{gaps:?}"
            );
            // In the host's mount namespace: read as it is, no gap.
            let mut gaps = Vec::new();
            assert!(seen_as_host(&HostView::Same, source, &seen, &mut gaps));
            assert!(gaps.is_empty());
        }
    }
}
