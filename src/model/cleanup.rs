//! What `leaked-mounts --unmount` and `--remove-bundles` did, or would do
//! with `--yes`, to each leaked mount and orphan bundle.

use std::path::PathBuf;

use serde::Serialize;

/// One cleanup of `leaked-mounts --unmount` or `--remove-bundles`.
#[derive(Debug, Clone, Serialize)]
pub struct Cleanup {
    pub action: CleanupAction,
    /// The container or sandbox id the object belongs to.
    pub id: String,
    /// The mount point, the bundle directory, or `<snapshotter>/<key>`.
    #[serde(with = "crate::model::path_json")]
    pub path: PathBuf,
    pub outcome: CleanupOutcome,
    pub detail: String,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum CleanupAction {
    Unmount,
    RemoveBundle,
    RemoveSnapshot,
    /// A leaked pod address: host-local's reservation file removed.
    ReleaseIp,
    /// A leaked sandbox: stopped and removed through CRI.
    RemoveSandbox,
    /// A leaked pod cgroup with nothing in it: removed.
    RemoveCgroup,
    /// A leaked pod network namespace: unmounted and its file removed.
    RemoveNetns,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum CleanupOutcome {
    /// Dry run (no --yes): this would be unmounted now.
    WouldUnmount,
    Unmounted,
    /// Dry run (no --yes): this would be removed now.
    WouldRemove,
    Removed,
    /// Re-verification failed; nothing was touched.
    Refused,
    /// Gone before we acted.
    AlreadyGone,
    /// Tried, and the kernel said no (busy, a mount appeared below...).
    Failed,
}

impl CleanupOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            CleanupOutcome::WouldUnmount => "would-unmount",
            CleanupOutcome::Unmounted => "unmounted",
            CleanupOutcome::WouldRemove => "would-remove",
            CleanupOutcome::Removed => "removed",
            CleanupOutcome::Refused => "refused",
            CleanupOutcome::AlreadyGone => "already-gone",
            CleanupOutcome::Failed => "failed",
        }
    }
}

impl CleanupAction {
    pub fn as_str(self) -> &'static str {
        match self {
            CleanupAction::Unmount => "unmount",
            CleanupAction::RemoveBundle => "remove-bundle",
            CleanupAction::RemoveSnapshot => "remove-snapshot",
            CleanupAction::ReleaseIp => "release-ip",
            CleanupAction::RemoveSandbox => "remove-sandbox",
            CleanupAction::RemoveCgroup => "remove-cgroup",
            CleanupAction::RemoveNetns => "remove-netns",
        }
    }
}
