//! The thresholds of the checks that a user can set.

use std::time::Duration;

/// Thresholds the user can set.
#[derive(Debug, Clone)]
pub struct Settings {
    /// An exit recorded this long after it happened counts as late.
    pub late_after: Duration,
    /// Late exits older than this are no longer reported.
    pub since: Duration,
    /// A CRI call slower than this is reported as cri-slow.
    pub slow: Duration,
    /// An unheld active snapshot younger than this is not called leaked.
    pub snapshot_grace: Duration,
    /// An address reserved this long ago for a sandbox no API knows is
    /// leaked: a sandbox being set up has its address before its record.
    pub ip_grace: Duration,
    /// A sandbox NotReady with no container this long after it was created
    /// is leaked: a pod starting or stopping is so for a moment.
    pub sandbox_grace: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            late_after: Duration::from_secs(30),
            since: Duration::from_secs(24 * 3600),
            slow: Duration::from_secs(1),
            snapshot_grace: Duration::from_secs(600),
            ip_grace: Duration::from_secs(300),
            sandbox_grace: Duration::from_secs(600),
        }
    }
}
