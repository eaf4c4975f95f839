//! What `leaked-shims` did, or would do with `--kill`, to each shim.

use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Dry run: this shim would be ended with --kill.
    WouldKill,
    /// Exited after SIGTERM.
    Terminated,
    /// Exited after SIGKILL.
    Killed,
    /// Re-verification failed; the shim was not touched.
    Refused,
    /// Gone before we acted.
    AlreadyGone,
    /// Signalled but still running.
    Failed,
}

#[derive(Debug, Clone, Serialize)]
pub struct Action {
    pub shim_pid: i32,
    pub shim_id: String,
    pub outcome: Outcome,
    pub detail: String,
    /// What is left behind after the shim is gone: its bundle directory,
    /// socket and mounts, for the operator to clean.
    pub remains: Vec<String>,
}
