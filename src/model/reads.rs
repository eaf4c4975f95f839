//! What a look at the node reads beyond what every look reads (CRI's status
//! files, the bundles and procfs). Each check declares its own in the
//! registry, as do the views and actions that read more than their checks
//! (`shims`' sockets, a kill's leftover mounts); a command joins those of
//! what it runs, and the join is turned into gather's options once. So a
//! new kind says what it needs where it is registered, and no command is
//! patched by hand.

use crate::model::Source;

/// When the containerd API is asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ask {
    #[default]
    Never,
    /// Only once something is found, for the names its records carry: a
    /// clean node, or a frozen containerd, then costs nothing more.
    WhenFound,
    /// On every look, within `--timeout`.
    Always,
}

/// The sources a look reads beyond the files and procfs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reads {
    pub containerd_api: Ask,
    /// CRI's own API (its view set against the files and containerd's).
    pub cri_api: bool,
    /// What every shim thread is blocked in (zombie evidence, blocked
    /// shims, slow CRI).
    pub shim_threads: bool,
    /// Each bundle's `address`, the socket a 1.x shim serves: hundreds of
    /// files more on a node of 1,000 containers.
    pub bundle_sockets: bool,
    /// containerd's snapshots, leases and the containers' snapshots.
    pub snapshots: bool,
    /// The mount table and, with it, the node's pressure and memory (a
    /// node's mount table can be megabytes).
    pub mounts: bool,
    /// CNI's network configs and host-local's reservations.
    pub cni: bool,
    /// kubelet's pod directories, and the mounts below them.
    pub kubelet: bool,
    /// kubelet's pod cgroups.
    pub pod_cgroups: bool,
    /// The pods' network namespaces CRI mounted (the mount table again, for
    /// CRI's netns directory).
    pub netns: bool,
}

impl Reads {
    /// Nothing beyond the files and procfs.
    pub const NOTHING: Reads = Reads {
        containerd_api: Ask::Never,
        cri_api: false,
        shim_threads: false,
        bundle_sockets: false,
        snapshots: false,
        mounts: false,
        cni: false,
        kubelet: false,
        pod_cgroups: false,
        netns: false,
    };

    /// What both read.
    pub const fn and(self, other: Reads) -> Reads {
        Reads {
            containerd_api: if (self.containerd_api as u8) >= (other.containerd_api as u8) {
                self.containerd_api
            } else {
                other.containerd_api
            },
            cri_api: self.cri_api || other.cri_api,
            shim_threads: self.shim_threads || other.shim_threads,
            bundle_sockets: self.bundle_sockets || other.bundle_sockets,
            snapshots: self.snapshots || other.snapshots,
            mounts: self.mounts || other.mounts,
            cni: self.cni || other.cni,
            kubelet: self.kubelet || other.kubelet,
            pod_cgroups: self.pod_cgroups || other.pod_cgroups,
            netns: self.netns || other.netns,
        }
    }

    /// What all of `each` read.
    pub fn all(each: impl IntoIterator<Item = Reads>) -> Reads {
        each.into_iter().fold(Reads::NOTHING, Reads::and)
    }

    /// Whether what a look with these reads finds depends on `source`: when
    /// that source is unavailable, its answer is blind there.
    pub fn depend_on(self, source: Source) -> bool {
        match source {
            // Every look: its paths come from the config, and CRI's files,
            // the bundles and procfs are read whatever else is.
            Source::Config | Source::CriStore | Source::Bundles | Source::Procfs => true,
            // The node's pressure and memory are read with the mount table.
            Source::Mountinfo => self.mounts || self.netns,
            Source::Node => self.mounts,
            // The snapshots are asked of containerd's API. Asked only once
            // something is found, it names what was found: nothing found
            // waits on it.
            Source::ContainerdApi => self.containerd_api == Ask::Always || self.snapshots,
            Source::CriApi => self.cri_api,
            Source::Cni => self.cni,
            Source::Kubelet => self.kubelet || self.pod_cgroups,
            // What a report left out is not read from the node.
            Source::Nodectl => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_join_reads_what_either_reads_and_asks_the_api_as_often_as_either() {
        let zombie = Reads {
            containerd_api: Ask::WhenFound,
            shim_threads: true,
            ..Reads::NOTHING
        };
        let mounts = Reads {
            containerd_api: Ask::Always,
            mounts: true,
            ..Reads::NOTHING
        };
        let both = zombie.and(mounts);
        assert_eq!(both.containerd_api, Ask::Always);
        assert!(both.shim_threads && both.mounts);
        assert!(!both.cri_api && !both.snapshots && !both.bundle_sockets);
        assert_eq!(mounts.and(zombie), both);
        assert_eq!(Reads::all([zombie, Reads::NOTHING]), zombie);
        assert_eq!(Reads::all([]), Reads::NOTHING);
    }

    #[test]
    fn every_look_depends_on_the_base_sources_and_on_what_else_it_reads() {
        let base = [
            Source::Config,
            Source::CriStore,
            Source::Bundles,
            Source::Procfs,
        ];
        let depended = |reads: Reads| -> Vec<Source> {
            Source::ALL
                .into_iter()
                .filter(|source| reads.depend_on(*source))
                .collect()
        };
        assert_eq!(depended(Reads::NOTHING), base);
        // Threads are procfs, sockets bundle files.
        let files_only = Reads {
            shim_threads: true,
            bundle_sockets: true,
            ..Reads::NOTHING
        };
        assert_eq!(depended(files_only), base);
        let names_when_found = Reads {
            containerd_api: Ask::WhenFound,
            ..Reads::NOTHING
        };
        assert_eq!(depended(names_when_found), base);
        for (reads, more) in [
            (
                Reads {
                    containerd_api: Ask::Always,
                    ..Reads::NOTHING
                },
                vec![Source::ContainerdApi],
            ),
            (
                Reads {
                    snapshots: true,
                    ..Reads::NOTHING
                },
                vec![Source::ContainerdApi],
            ),
            (
                Reads {
                    cri_api: true,
                    ..Reads::NOTHING
                },
                vec![Source::CriApi],
            ),
            (
                Reads {
                    mounts: true,
                    ..Reads::NOTHING
                },
                vec![Source::Mountinfo, Source::Node],
            ),
            (
                Reads {
                    cni: true,
                    ..Reads::NOTHING
                },
                vec![Source::Cni],
            ),
        ] {
            let mut expected = base.to_vec();
            expected.extend(more);
            expected.sort();
            assert_eq!(depended(reads), expected, "{reads:?}");
        }
        assert!(!Reads::all([]).depend_on(Source::Nodectl));
    }
}
