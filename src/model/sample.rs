//! What `watch` re-reads between its looks at the whole node: the flight
//! recorder's samples of an open zombie, and the reading of the containers
//! an exit event names. Each names the few files and processes it needs; a
//! look reads the whole node, on a node of thousands of containers half a
//! second of CPU.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use crate::model::{CriContainer, Gap, NodeContext, ProcessInfo, ThreadSample, UnixNanos};

/// Two readings of one process's start time agree within a clock tick
/// (10 ms at 100 Hz): `/proc/<pid>/stat` counts ticks since boot, and the
/// boot time they are added to comes from two clocks read one after the
/// other (seen microseconds apart from one reading to the next).
pub const SAME_START_NANOS: i64 = 10_000_000;

/// A process by kernel identity: its pid and its start time (a pid alone
/// may be another process's by the next sample).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessKey {
    pub pid: i32,
    pub started_at: UnixNanos,
}

impl ProcessKey {
    /// Whether `process` is this one: the same pid, started at the same
    /// time (see [`SAME_START_NANOS`]).
    pub fn is(&self, process: &ProcessInfo) -> bool {
        process.pid == self.pid
            && process.started_at.abs_diff(self.started_at) < SAME_START_NANOS.unsigned_abs()
    }
}

/// One zombie as a look saw it, for the samples that follow.
#[derive(Debug, Clone, PartialEq)]
pub struct ZombieTarget {
    /// Its status file as the look read it: a sample that finds the file
    /// changed (CRI recorded the exit, or removed the container) calls for
    /// a look, which tells what became of it.
    pub container: CriContainer,
    /// `<bundle>/rootfs`, as the zombie check spells it.
    pub rootfs: PathBuf,
    /// The shim the look proved the container's.
    pub shim: Option<ProcessKey>,
}

/// What the samples of a look's zombies start from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampleBasis {
    /// The status files' directory as the look listed it (device, inode):
    /// a sample reads only in that one.
    pub cri_store_listed: Option<(u64, u64)>,
    pub zombies: Vec<ZombieTarget>,
}

/// What one look or sample saw of a stuck container.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observation {
    pub container_id: String,
    pub shim_pid: Option<i64>,
    /// A thread of the shim was in `umount2`.
    pub in_umount2: bool,
    /// The shim's threads in D or in `umount2`.
    pub blocked: Vec<ThreadSample>,
    /// `None` when the mount table was not read.
    pub rootfs_mounted: Option<bool>,
}

impl Observation {
    /// What a zombie finding's evidence says (the zombie check's fields).
    /// A field missing or of another shape is simply not seen.
    pub fn of_zombie(id: &str, evidence: &Value) -> Observation {
        let blocked = evidence["shim_threads_blocked"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|thread| ThreadSample {
                tid: thread["tid"]
                    .as_i64()
                    .and_then(|t| i32::try_from(t).ok())
                    .unwrap_or_default(),
                // A state is one letter (`D`, `S`, `t`...); anything else is
                // no state.
                state: thread["state"]
                    .as_str()
                    .filter(|s| s.len() == 1)
                    .and_then(|s| s.chars().next()),
                syscall: thread["syscall"].as_str().map(str::to_string),
                wchan: thread["wchan"].as_str().map(str::to_string),
            })
            .collect();
        Observation {
            container_id: id.to_string(),
            shim_pid: evidence["shim_pid"].as_i64(),
            in_umount2: evidence["shim_in_umount2"] == Value::Bool(true),
            blocked,
            rootfs_mounted: evidence["rootfs_mounted"].as_bool(),
        }
    }
}

/// One sample of a look's zombies.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// When it was taken (RFC 3339).
    pub taken_at: String,
    /// One per zombie whose status file still says what the look read.
    pub observations: Vec<Observation>,
    /// Zombies whose status file changed or went since the look: a look is
    /// due at once.
    pub changed: Vec<String>,
    pub context: Option<NodeContext>,
    pub gaps: Vec<Gap>,
}

/// Whose status files a reading of exits reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitsToRead {
    /// These containers', whose init exit was heard (each once).
    These(Vec<String>),
    /// Every container's in CRI's store: more exits were heard than are
    /// held one by one (a flood, forged or not). One reading of the store,
    /// a thousand small files, costs a few milliseconds; the look it
    /// replaces half a second of CPU on the same node. But those of
    /// `exited`, read as exited by the last such reading: CRI never runs
    /// an exited container again (kubelet makes a new one), so it is no
    /// zombie to find.
    All { exited: Arc<BTreeSet<String>> },
}

/// What the status files of containers whose init exit was heard say,
/// once CRI's exit handler has had its 10 s: which of them CRI still says
/// run with their process gone (a zombie, for a look to tell).
#[derive(Debug, Clone, Default)]
pub struct ExitReading {
    pub dead: Vec<String>,
    /// Of a reading of the whole store: the containers in it that have
    /// exited (for the next one to pass over).
    pub exited: Option<BTreeSet<String>>,
    /// Why the reading could not tell (a source unreadable, a process
    /// unread): a look is due then, as before exits were read.
    pub unsure: Option<String>,
    pub gaps: Vec<Gap>,
}
