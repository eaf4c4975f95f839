//! What containerd's snapshot, lease and container services answered about
//! the snapshots of one namespace: enough to tell which active snapshots
//! nothing holds any more (`leaked-snapshot`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::model::api::ApiCall;

/// The snapshot view of one namespace. Each list is `None` when its call
/// did not answer (the call's error is in `calls`, and a gap).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SnapshotterView {
    #[serde(with = "crate::model::path_json")]
    pub address: PathBuf,
    pub namespace: String,
    /// Per snapshotter asked (those of the container records, the CRI
    /// default from the config, and `overlayfs`), its snapshots.
    pub snapshots: BTreeMap<String, Option<Vec<SnapshotInfo>>>,
    /// The namespace's leases, each with the resources it holds.
    pub leases: Option<Vec<Lease>>,
    /// Which snapshot each container record uses, and its labels.
    pub containers: Option<Vec<ContainerSnapshot>>,
    pub calls: Vec<ApiCall>,
}

/// The kind of a snapshot, as containerd's snapshotter API says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SnapshotKind {
    Unknown,
    View,
    Active,
    Committed,
}

impl SnapshotKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotKind::Unknown => "unknown",
            SnapshotKind::View => "view",
            SnapshotKind::Active => "active",
            SnapshotKind::Committed => "committed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotInfo {
    /// The key (for a committed snapshot, its name).
    pub key: String,
    /// The committed snapshot it was prepared on; empty for a base layer.
    pub parent: String,
    pub kind: SnapshotKind,
    /// Unix ns (as `snapshot::UnixNanos`, not imported: that module holds
    /// this one); 0 when containerd did not say.
    pub created_at: i64,
    pub updated_at: i64,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lease {
    pub id: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// What it holds, as containerd names it (`snapshots/overlayfs`, key);
    /// `None` when ListResources did not answer for it.
    pub resources: Option<Vec<LeaseResource>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseResource {
    pub r#type: String,
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerSnapshot {
    pub id: String,
    /// Empty when the container has no snapshot (a rootfs of its own).
    pub snapshotter: String,
    pub snapshot_key: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}
