//! `shim-blocked`: a shim thread stuck in umount2 or in uninterruptible sleep
//! (D), seen in two samples, so the finding can say for at least how long.
//!
//! This is the root of the other findings: while the shim's delete sits in
//! the overlay unmount, CRI's task.Delete times out (zombie), its lock holders
//! wait (cri-slow) and the shim may end up forgotten (leaked-shim).

use std::collections::HashMap;

use serde_json::json;

use crate::model::{seconds, Finding, Kind, Severity, Snapshot, Suspects, ThreadSample};

pub fn is_stuck(thread: &ThreadSample) -> bool {
    thread.state == Some('D') || thread.syscall.as_deref() == Some("umount2")
}

/// A stuck thread as evidence shows it.
pub fn thread_evidence(thread: &ThreadSample) -> serde_json::Value {
    json!({
        "tid": thread.tid,
        "state": thread.state.map(String::from),
        "syscall": thread.syscall,
        "wchan": thread.wchan,
    })
}

/// What a second look must sample again: the shims of ours with a thread
/// that may be stuck.
pub fn suspects(first: &Snapshot, suspects: &mut Suspects) {
    let stuck_shims = first
        .shims
        .iter()
        .filter(|s| s.serves(&first.paths.address.path))
        .filter(|s| s.threads.iter().any(is_stuck));
    suspects.pids.extend(stuck_shims.map(|s| s.pid));
}

/// `first` and `second` are two snapshots of the same node, taken apart.
pub fn check(first: &Snapshot, second: &Snapshot) -> Vec<Finding> {
    let apart = seconds(second.taken_at.saturating_sub(first.taken_at));
    let names = first.names();
    // The second look's shims by pid (the first of each, as a search in
    // order finds), built once for every shim of the first.
    let mut later_by_pid = HashMap::new();
    for shim in &second.shims {
        later_by_pid.entry(shim.pid).or_insert(shim);
    }
    first
        .shims
        .iter()
        .filter(|shim| shim.serves(&first.paths.address.path))
        .filter_map(|shim| {
            let later = later_by_pid.get(&shim.pid)?;
            let threads: Vec<_> = shim
                .threads
                .iter()
                .filter(|t| is_stuck(t))
                .filter(|t| {
                    later
                        .threads
                        .iter()
                        .any(|u| u.tid == t.tid && is_stuck(u) && u.syscall == t.syscall)
                })
                .collect();
            if threads.is_empty() {
                return None;
            }
            let id = shim.id.clone().unwrap_or_else(|| shim.pid.to_string());
            let namespace = shim.namespace.as_deref().unwrap_or(&first.namespace);
            let pod = names.of_in(namespace, &id);
            let in_umount2 = threads
                .iter()
                .any(|t| t.syscall.as_deref() == Some("umount2"));
            let what = if in_umount2 {
                "umount2".to_string()
            } else {
                format!(
                    "uninterruptible sleep ({})",
                    threads[0].wchan.as_deref().unwrap_or("?")
                )
            };
            Some(Finding {
                kind: Kind::ShimBlocked,
                severity: Severity::Critical,
                id,
                summary: format!(
                    "shim pid {} ({}) has {} thread(s) blocked in {what} for at least {apart:.1} s",
                    shim.pid,
                    pod.display(),
                    threads.len()
                ),
                evidence: json!({
                    "shim_pid": shim.pid,
                    "pod_namespace": pod.pod_namespace,
                    "pod_name": pod.pod_name,
                    "container_name": pod.container_name,
                    "threads": threads.iter().map(|t| thread_evidence(t)).collect::<Vec<_>>(),
                    "blocked_for_at_least_seconds": apart,
                }),
                cause: if in_umount2 {
                    "Unmounting an overlay rootfs syncs its upper directory; under disk I/O \
                     pressure or with many dirty pages that takes minutes."
                } else {
                    "The shim waits on the kernel (disk or filesystem I/O)."
                }
                .to_string(),
                remedy: "Relieve the disk I/O pressure (see the node context: io pressure, \
                         Dirty/Writeback). Overlay mounts with `volatile` (containerd >= \
                         1.6.24, kernel >= 5.10) skip the sync on unmount. Do not kill the \
                         shim: its container would be orphaned."
                    .to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use serde_json::Value;

    #[test]
    fn thread_in_umount2_in_both_samples_is_reported_with_duration() {
        let mut first = snapshot();
        first
            .shims
            .push(shim(40, &id('s'), ADDRESS, &["futex", "umount2"]));
        first
            .bundles
            .insert(id('s'), bundle(&id('s'), &id('s'), "POD"));
        let mut second = first.clone();
        second.taken_at = first.taken_at + 3 * SEC / 2;
        let findings = check(&first, &second);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].id, id('s'));
        assert_eq!(findings[0].evidence["threads"][0]["tid"], 41);
        assert_eq!(findings[0].evidence["blocked_for_at_least_seconds"], 1.5);
        // A pod's shim is started with the sandbox's id: pod names only.
        assert_eq!(findings[0].evidence["pod_name"], "web-0");
        assert_eq!(findings[0].evidence["container_name"], Value::Null);
        assert!(findings[0].summary.contains("umount2"));
    }

    #[test]
    fn a_thread_that_moved_on_is_not_blocked() {
        let mut first = snapshot();
        first.shims.push(shim(40, &id('s'), ADDRESS, &["umount2"]));
        let mut second = snapshot();
        // Thread 40 left umount2; thread 41 entered it since: neither was
        // seen blocked twice.
        second
            .shims
            .push(shim(40, &id('s'), ADDRESS, &["futex", "umount2"]));
        assert!(check(&first, &second).is_empty());
    }

    #[test]
    fn uninterruptible_sleep_counts_and_other_containerds_do_not() {
        let mut first = snapshot();
        let mut d = shim(40, &id('s'), ADDRESS, &["syscall 999"]);
        d.threads[0].state = Some('D');
        first.shims.push(d);
        let mut other = shim(50, &id('t'), "/run/other.sock", &["umount2"]);
        other.threads[0].state = Some('D');
        first.shims.push(other);
        let findings = check(&first, &first.clone());
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].evidence["shim_pid"], 40);
    }

    #[test]
    fn an_impostor_in_d_is_not_a_blocked_shim() {
        use crate::model::fixtures::proven;
        let mut first = snapshot();
        // A fake shim whose vfork child never execs sits in D: its own
        // business, not containerd's.
        let mut fake = proven(shim(40, &id('s'), ADDRESS, &["syscall 999"]));
        fake.threads[0].state = Some('D');
        fake.proof.as_mut().unwrap().namespaces = None;
        first.shims.push(fake.clone());
        assert!(check(&first, &first.clone()).is_empty());
        // The same facts as containerd's: blocked.
        first.shims[0].proof = proven(fake).proof;
        assert_eq!(check(&first, &first.clone()).len(), 1);
    }
}
