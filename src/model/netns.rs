//! The network namespaces CRI mounts for pods: one nsfs bind mount per pod
//! (`cni-<uuid>`) in its netns directory, made before the pod's network
//! and removed in its teardown.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::model::cri_status::UnixNanos;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetnsView {
    /// CRI's netns directory (`/var/run/netns`, or under its state
    /// directory with `netns_mounts_under_state_dir`).
    #[serde(with = "crate::model::path_json")]
    pub dir: PathBuf,
    pub mounts: Vec<NetnsMount>,
    /// A process in each namespace a check asked about, by the namespace's
    /// inode (`/proc/<pid>/ns/net`): looked for only for the namespaces no
    /// sandbox record names.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub users: BTreeMap<u64, i32>,
    /// Whether `users` was looked for (procfs read).
    #[serde(default)]
    pub users_looked_for: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetnsMount {
    /// The mount point, spelled below `dir` as nodectl was given it.
    #[serde(with = "crate::model::path_json")]
    pub path: PathBuf,
    /// The namespace's inode (what `/proc/<pid>/ns/net` links to).
    pub inode: u64,
    /// When the namespace's nsfs inode was made (unix ns): its bind mount.
    pub created_at: UnixNanos,
}
