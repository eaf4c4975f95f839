//! CRI's own records of its containers, as its status files hold them:
//! `<root>/io.containerd.grpc.v1.cri/containers/<id>/status`, the same
//! place and format in 1.6, 1.7 and 2.x. What CRI's API says is in
//! [`crate::model::api_views::CriView`].

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Unix time in nanoseconds, the unit containerd's CRI status files use.
pub type UnixNanos = i64;

/// One container as persisted by the CRI plugin in
/// `<root>/io.containerd.grpc.v1.cri/containers/<id>/status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CriContainer {
    pub id: String,
    #[serde(with = "crate::model::path_json")]
    pub status_path: PathBuf,
    /// Modification time of the status file: when CRI last wrote the status.
    pub status_written_at: UnixNanos,
    pub status: CriStatus,
    /// Which file was read (not what it said): a later look that finds the
    /// same file need not read it again. Not in archives.
    #[serde(skip)]
    pub status_file: Option<FileVersion>,
}

impl CriContainer {
    /// Whether this is a status file's reading, not CRI's answer to
    /// ContainerStatus (see `CriView::said_running`), which has no file.
    pub fn from_status_file(&self) -> bool {
        !self.status_path.as_os_str().is_empty()
    }
}

/// Two readings of a container are equal when they say the same; which
/// file they came from is how, not what.
impl PartialEq for CriContainer {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && self.status_path == other.status_path
            && self.status_written_at == other.status_written_at
            && self.status == other.status
    }
}

/// What tells one version of a file from another without reading it.
/// containerd replaces a status file by renaming a new one over it (a new
/// inode); a write in place changes its mtime and ctime. All equal: the
/// same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileVersion {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_nanos: i64,
    pub ctime_nanos: i64,
}

/// The fields of CRI's `containerstore.Status` that the checks rely on.
///
/// containerd writes this JSON with Go field names and nanosecond times; fields
/// it adds in later versions are ignored, missing ones default to zero.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct CriStatus {
    #[serde(rename = "Version")]
    pub version: String,
    #[serde(rename = "Pid")]
    pub pid: i64,
    #[serde(rename = "CreatedAt")]
    pub created_at: UnixNanos,
    #[serde(rename = "StartedAt")]
    pub started_at: UnixNanos,
    #[serde(rename = "FinishedAt")]
    pub finished_at: UnixNanos,
    #[serde(rename = "ExitCode")]
    pub exit_code: i64,
    #[serde(rename = "Reason")]
    pub reason: String,
    #[serde(rename = "Message")]
    pub message: String,
    // Not here: `Starting`, `Removing` and `Unknown` are `json:"-"` in
    // containerd's Status, in memory only, never in the file. Evidence
    // archives written while they were still here carry them; serde ignores
    // them on reading.
}

impl CriStatus {
    /// What CRI reports for this status, derived the way containerd's
    /// `Status.State()` does for what it persists: finished wins over started
    /// wins over created.
    pub fn state(&self) -> CriState {
        if self.finished_at != 0 {
            CriState::Exited
        } else if self.started_at != 0 {
            CriState::Running
        } else if self.created_at != 0 {
            CriState::Created
        } else {
            CriState::Unknown
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CriState {
    Created,
    Running,
    Exited,
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;

    #[test]
    fn state_is_finished_over_started_over_created_over_nothing() {
        let mut status = CriStatus::default();
        assert_eq!(status.state(), CriState::Unknown);
        status.created_at = NOW - 3 * SEC;
        assert_eq!(status.state(), CriState::Created);
        status.started_at = NOW - 2 * SEC;
        assert_eq!(status.state(), CriState::Running);
        status.finished_at = NOW - SEC;
        assert_eq!(status.state(), CriState::Exited);
        // An exit recorded before the start stamp (a container that exited
        // at once, see testdata/status/exited.json) is still an exit.
        status.finished_at = status.created_at;
        assert_eq!(status.state(), CriState::Exited);
    }
}
