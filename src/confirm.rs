//! Confirmation: a second, cheap look at what a first snapshot suggests
//! (a zombie seen twice, a shim thread blocked twice) before calling it.

use std::time::Duration;

use crate::checks;
use crate::gather::{follow_up, gather, now_nanos, GatherOptions};
use crate::model::{Gap, Paths, Snapshot};

/// The two snapshots a check compares: the first as `options` asks; the
/// second, taken at least `wait` later, re-reads only the status files and
/// processes of what the first shows as suspect (see [`checks::suspects`]),
/// and only when there is one. Without one, there is no second: a healthy
/// node is read once and never waited on.
pub fn gather_pair(
    paths: &Paths,
    options: &GatherOptions,
    gaps: Vec<Gap>,
    wait: Duration,
) -> (Snapshot, Option<Snapshot>) {
    let first = gather(paths, options, gaps);
    let suspects = checks::suspects(&first);
    if suspects.is_empty() {
        return (first, None);
    }
    let gap = wait.as_nanos().min(i64::MAX as u128) as i64;
    let waited = now_nanos().saturating_sub(first.taken_at);
    if waited < gap {
        std::thread::sleep(Duration::from_nanos((gap - waited) as u64));
    }
    let second = follow_up(paths, options, &suspects);
    (first, Some(second))
}
