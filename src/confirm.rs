//! Confirmation: a second, cheap look at what a first snapshot suggests
//! (a zombie seen twice, a shim thread blocked twice) before calling it.
//! Every command that confirms (`check`, `collect`, `zombies`) does it here,
//! after the one `--settle` wait.

use std::time::Duration;

use crate::checks;
use crate::gather::{follow_up, gather, now_nanos, GatherOptions};
use crate::model::{Gap, Paths, Snapshot};

/// How long after the first look the second one comes, unless `--settle`
/// says otherwise: long enough for CRI to record an exit that is under way,
/// and for two samples of a shim thread to tell a blocked one from a busy
/// one.
pub const SETTLE: Duration = Duration::from_secs(1);

/// The wait `--settle` asks for, else [`SETTLE`] (or `timeout`, if
/// shorter: a run with a short `--timeout` is not made to wait longer).
pub fn settle(flag: Option<Duration>, timeout: Duration) -> Duration {
    flag.unwrap_or(SETTLE.min(timeout))
}

/// The first look as `options` asks, and the second one when it shows a
/// suspect (see [`second_look`]).
pub fn gather_pair(
    paths: &Paths,
    options: &GatherOptions,
    gaps: Vec<Gap>,
    settle: Duration,
) -> (Snapshot, Option<Snapshot>) {
    let first = gather(paths, options, gaps);
    let second = second_look(options, &first, settle);
    (first, second)
}

/// A later look, at least `settle` after `first` was taken, that re-reads
/// only what `first` shows as suspect (see [`checks::suspects`]): a dead
/// container's status file, a shim's process; `None` when nothing is: a
/// healthy node is read once and never waited on. It reads the paths the first look used
/// (with the running containerd it found).
pub fn second_look(
    options: &GatherOptions,
    first: &Snapshot,
    settle: Duration,
) -> Option<Snapshot> {
    let suspects = checks::suspects(first);
    if suspects.is_empty() {
        return None;
    }
    // A dead container whose task containerd has already deleted is being
    // recorded by CRI, or is a zombie whose handler gave up: told apart
    // only once CRI's handler has had its deadline.
    let settle = if checks::zombie::awaiting_record(first) {
        settle.max(checks::zombie::EXIT_HANDLER_DEADLINE)
    } else {
        settle
    };
    let settle = i64::try_from(settle.as_nanos()).unwrap_or(i64::MAX);
    let waited = now_nanos().saturating_sub(first.taken_at);
    if waited < settle {
        std::thread::sleep(Duration::from_nanos(settle.saturating_sub(waited) as u64));
    }
    Some(follow_up(options, suspects, first))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settle_is_the_flag_else_one_second_or_the_timeout_if_shorter() {
        let ms = Duration::from_millis;
        assert_eq!(settle(None, ms(3000)), ms(1000));
        assert_eq!(settle(None, ms(200)), ms(200));
        assert_eq!(settle(Some(ms(5000)), ms(200)), ms(5000));
        assert_eq!(settle(Some(ms(0)), ms(3000)), ms(0));
    }
}
