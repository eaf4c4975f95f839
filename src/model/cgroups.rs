//! kubelet's pod cgroups: `kubepods[/<qos>]/pod<uid>` (cgroupfs driver) or
//! `kubepods.slice[/kubepods-<qos>.slice]/kubepods[-<qos>]-pod<uid>.slice`
//! (systemd driver, the uid's `-` written `_`, and below a cgroup root
//! other than `/` the root's parts in every slice's name:
//! `custom.slice/custom-kubepods.slice/…`), under kubelet's cgroup root. kubelet makes one per pod and removes it once the pod is gone; one
//! it failed to remove stays, and kubelet's housekeeping grows with each
//! (kubernetes#123766, #112151).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::model::cri_status::UnixNanos;
use crate::model::paths::{Located, Origin};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CgroupView {
    /// kubelet's cgroup root (its `--cgroup-root`), and where nodectl
    /// found it.
    pub cgroup_root: Located,
    /// kubelet's `cgroupDriver` as its command line or config files set it
    /// (`systemd` or `cgroupfs`), and where nodectl found it; `None` when
    /// nothing nodectl read sets it. Evidence, not the layout read: kubelet
    /// 1.31 and later (`KubeletCgroupDriverFromCRI`) take the driver
    /// containerd 2.x answers to CRI's `RuntimeConfig` over this one, so
    /// both drivers' layouts are read whatever it says.
    #[serde(default)]
    pub cgroup_driver: Option<KubeletSetting<String>>,
    /// kubelet's `cgroupsPerQOS`, and where nodectl found it. `false`:
    /// kubelet makes no pod cgroup at all (`NewPodContainerManager` gives
    /// `podContainerManagerNoop`), so none is read and none judged.
    #[serde(default = "KubeletSetting::per_qos_default")]
    pub cgroups_per_qos: KubeletSetting<bool>,
    /// 1 or 2.
    pub version: u8,
    /// The hierarchy read (v1: the pids controller's), in the cgroup
    /// filesystem.
    #[serde(with = "crate::model::path_json")]
    pub hierarchy: PathBuf,
    pub pod_cgroups: Vec<PodCgroup>,
}

/// A kubelet setting's value, and where nodectl found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubeletSetting<T> {
    pub value: T,
    pub origin: Origin,
}

impl KubeletSetting<bool> {
    /// kubelet's default `cgroupsPerQOS` (true), no kubelet read.
    pub fn per_qos_default() -> KubeletSetting<bool> {
        KubeletSetting {
            value: true,
            origin: Origin::Default,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodCgroup {
    /// The pod's uid, as kubelet spells it (dashes).
    pub uid: String,
    #[serde(with = "crate::model::path_json")]
    pub path: PathBuf,
    /// `cgroupfs` or `systemd`, from the cgroup's name: a `systemd` one is
    /// a slice unit systemd made for kubelet (its directory's name is the
    /// unit's), to be stopped through systemd, never removed behind it.
    pub driver: String,
    /// `guaranteed`, `burstable` or `besteffort`.
    pub qos: String,
    /// When the cgroup was made (its directory's change time, unix ns).
    pub created_at: UnixNanos,
    /// Processes in it and every cgroup below it, the whole subtree
    /// (`cgroup.procs` of each, as kubelet's `cgroupCommon.Pids` walks
    /// it); counted only for a cgroup whose pod CRI does not list (the
    /// others' are not read: a node's worth of files for nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub procs: Option<usize>,
    /// cgroup v2's own word on the subtree (`cgroup.events`' `populated`:
    /// 1 while any process runs anywhere below it); read as `procs` is,
    /// `None` on v1 or when unread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub populated: Option<bool>,
}
