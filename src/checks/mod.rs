//! Checks: pure functions from a snapshot to findings.

pub mod api_unreachable;
pub mod cri_drift;
pub mod cri_slow;
pub mod late_exit;
pub mod leaked_shim;
pub mod leftovers;
pub mod shim_blocked;
pub mod zombie;

use std::time::Duration;

use crate::model::{Basis, CriContainer, Finding, Shim, Snapshot, Suspects};

/// Thresholds the user can set.
#[derive(Debug, Clone)]
pub struct Settings {
    /// An exit recorded this long after it happened counts as late.
    pub late_after: Duration,
    /// Late exits older than this are no longer reported.
    pub since: Duration,
    /// A CRI call slower than this is reported as cri-slow.
    pub slow: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            late_after: Duration::from_secs(30),
            since: Duration::from_secs(24 * 3600),
            slow: Duration::from_secs(1),
        }
    }
}

/// The shim serving a container: the one whose pid the bundle recorded, else
/// (runc v2 groups a pod's containers in one shim) the shim started with
/// `-id <sandbox id>` for this containerd and namespace.
pub fn shim_of<'a>(snapshot: &'a Snapshot, container: &CriContainer) -> Option<&'a Shim> {
    let ours = |shim: &&Shim| {
        shim.serves(&snapshot.paths.address.path)
            && shim.namespace.as_deref() == Some(snapshot.namespace.as_str())
    };
    let bundle = snapshot.bundles.get(&container.id);
    if let Some(pid) = bundle.and_then(|b| b.shim_pid) {
        if let Some(shim) = snapshot.shims.iter().filter(ours).find(|s| s.pid == pid) {
            return Some(shim);
        }
    }
    let group = bundle.and_then(|b| b.sandbox_id()).unwrap_or(&container.id);
    snapshot
        .shims
        .iter()
        .filter(ours)
        .find(|s| s.id.as_deref() == Some(group))
}

/// Whether containerd holds a container record for `id` in `namespace`.
/// Without an API answer, any trace on disk (bundle, CRI status or sandbox
/// directory) counts as a record: when unsure, nothing is called leaked.
pub fn has_record(snapshot: &Snapshot, namespace: &str, id: &str) -> (bool, Basis) {
    if let Some(ids) = snapshot
        .containerd
        .as_ref()
        .and_then(|v| v.containers(namespace))
    {
        return (ids.contains(id), Basis::ContainerdApi);
    }
    let on_disk = (namespace == snapshot.namespace && snapshot.bundles.contains_key(id))
        || snapshot.cri_sandboxes.contains(id)
        || snapshot.cri_containers.iter().any(|c| c.id == id);
    (on_disk, Basis::Disk)
}

/// Every check. `second` is a later snapshot of the same node: zombies must
/// show in both, and shim threads must be blocked in both.
pub fn run_all(first: &Snapshot, second: &Snapshot, settings: &Settings) -> Vec<Finding> {
    let confirmed: std::collections::BTreeSet<String> =
        zombie::check(second).into_iter().map(|f| f.id).collect();
    let mut findings: Vec<Finding> = zombie::check(first)
        .into_iter()
        .filter(|f| confirmed.contains(&f.id))
        .collect();
    findings.extend(late_exit::check(first, settings));
    findings.extend(leaked_shim::check(first));
    findings.extend(leftovers::check(first));
    findings.extend(cri_drift::check(first));
    findings.extend(cri_slow::check(first, settings.slow));
    findings.extend(shim_blocked::check(first, second));
    findings.extend(api_unreachable::check(first));
    sort(&mut findings);
    findings
}

/// What in a first snapshot a second look must confirm: a container that
/// looks dead while CRI says running (it may be exiting normally right now),
/// or a shim of ours with a thread that may be stuck. When there is nothing,
/// there is no reason to wait for a second look.
pub fn suspects(first: &Snapshot) -> Suspects {
    let mut suspects = Suspects::default();
    for finding in zombie::check(first) {
        let container = first.cri_containers.iter().find(|c| c.id == finding.id);
        if let Some(container) = container {
            suspects
                .pids
                .extend(i32::try_from(container.status.pid).ok());
        }
        suspects.containers.insert(finding.id);
    }
    let stuck_shims = first
        .shims
        .iter()
        .filter(|s| s.serves(&first.paths.address.path))
        .filter(|s| s.threads.iter().any(shim_blocked::is_stuck));
    suspects.pids.extend(stuck_shims.map(|s| s.pid));
    suspects
}

/// Most severe first, then by kind and id, so output is stable.
pub fn sort(findings: &mut [Finding]) {
    findings.sort_by(|a, b| (a.severity, a.kind, &a.id).cmp(&(b.severity, b.kind, &b.id)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{Kind, Severity};
    use serde_json::Value;

    fn needs_second_look(s: &Snapshot) -> bool {
        !suspects(s).is_empty()
    }

    #[test]
    fn healthy_node_needs_no_second_look() {
        let mut s = snapshot();
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        s.processes
            .insert(100, process(100, 'S', NOW - 60 * SEC + SEC / 100));
        s.shims
            .push(shim(40, &id('a'), ADDRESS, &["futex", "epoll_pwait"]));
        // Another containerd's stuck shim is not ours to confirm.
        s.shims
            .push(shim(50, &id('b'), "/run/other.sock", &["umount2"]));
        assert!(!needs_second_look(&s));
    }

    #[test]
    fn dead_running_container_or_stuck_shim_needs_a_second_look() {
        let mut zombie = snapshot();
        zombie
            .cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        assert!(needs_second_look(&zombie));

        assert_eq!(suspects(&zombie).containers, [id('a')].into());
        assert_eq!(suspects(&zombie).pids, [100].into());

        let mut stuck = snapshot();
        stuck.shims.push(shim(40, &id('a'), ADDRESS, &["umount2"]));
        assert_eq!(suspects(&stuck).pids, [40].into());
    }

    #[test]
    fn the_shim_a_bundle_names_by_pid_is_the_containers() {
        let mut s = snapshot();
        let c = running(&id('a'), 100, NOW - 60 * SEC);
        let mut b = bundle(&id('a'), &id('s'), "app");
        b.shim_pid = Some(41);
        s.bundles.insert(id('a'), b);
        // Another pod's shim first, then the one the bundle names, started
        // with an id that is not the sandbox's (not found by id).
        s.shims.push(shim(40, &id('t'), ADDRESS, &[]));
        s.shims.push(shim(41, &id('x'), ADDRESS, &[]));
        assert_eq!(shim_of(&s, &c).map(|s| s.pid), Some(41));
    }

    #[test]
    fn without_the_api_a_record_is_any_trace_of_that_id_on_disk() {
        let mut s = snapshot();
        s.bundles.insert(id('b'), bundle(&id('b'), &id('s'), "app"));
        s.cri_containers
            .push(running(&id('c'), 100, NOW - 60 * SEC));
        assert_eq!(has_record(&s, "k8s.io", &id('b')), (true, Basis::Disk));
        assert_eq!(has_record(&s, "k8s.io", &id('c')), (true, Basis::Disk));
        assert_eq!(has_record(&s, "k8s.io", &id('d')), (false, Basis::Disk));
        // Bundles are read for the snapshot's namespace only.
        assert_eq!(has_record(&s, "moby", &id('b')), (false, Basis::Disk));
    }

    #[test]
    fn findings_are_sorted_most_severe_first_then_by_kind_and_id() {
        let finding = |kind, severity, c| Finding {
            kind,
            severity,
            id: id(c),
            summary: String::new(),
            evidence: Value::Null,
            cause: String::new(),
            remedy: String::new(),
        };
        let mut findings = vec![
            finding(Kind::LateExit, Severity::Warning, 'a'),
            finding(Kind::Zombie, Severity::Critical, 'b'),
            finding(Kind::Zombie, Severity::Critical, 'a'),
        ];
        sort(&mut findings);
        let order: Vec<(Kind, String)> = findings.into_iter().map(|f| (f.kind, f.id)).collect();
        assert_eq!(
            order,
            [
                (Kind::Zombie, id('a')),
                (Kind::Zombie, id('b')),
                (Kind::LateExit, id('a'))
            ]
        );
    }

    #[test]
    fn times_and_pids_at_the_edges_of_what_a_status_file_holds_neither_panic_nor_wrap() {
        // Found by tests/hostile_input.rs: each of these overflowed a
        // subtraction in late_exit, zombie, shim_blocked or seconds_since.
        let mut s = snapshot();
        s.taken_at = i64::MIN;
        s.cri_containers.push(exited(&id('a'), i64::MIN, i64::MAX));
        s.cri_containers.push(exited(&id('b'), i64::MAX, i64::MIN));
        s.cri_containers.push(running(&id('c'), 100, i64::MIN));
        s.cri_containers.push(running(&id('d'), 100, i64::MAX));
        s.processes.insert(100, process(100, 'S', i64::MAX));
        // 2^32 + 100: no process, not pid 100 truncated.
        s.cri_containers
            .push(running(&id('e'), (1 << 32) + 100, NOW - 60 * SEC));
        let mut second = s.clone();
        second.taken_at = i64::MAX;
        let findings = run_all(&s, &second, &Settings::default());
        let late: Vec<&str> = findings
            .iter()
            .filter(|f| f.kind == Kind::LateExit)
            .map(|f| f.id.as_str())
            .collect();
        // Recorded i64::MAX after an exit at i64::MIN: late, not wrapped to early.
        assert_eq!(late, [id('a')]);
        let e = findings
            .iter()
            .find(|f| f.kind == Kind::Zombie && f.id == id('e'))
            .expect("a pid no process can have is a zombie");
        assert!(!e.summary.contains("another process"), "{}", e.summary);
        let _ = suspects(&s);
    }
}
