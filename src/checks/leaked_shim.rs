//! `leaked-shim`: a shim that no container record owns and that serves no
//! live process.
//!
//! The runc shim exits on a Shutdown only when it holds no container
//! (`len(s.containers) > 0` returns at once), and containerd sends Shutdown
//! only right after a task delete (shimTask.delete, every line), never
//! later. Whatever makes the last Shutdown come too early, or not at all,
//! leaves the shim running with nothing to serve: a delete that outlived its
//! 10 s deadline on a slow umount2 (containerd#7496), two racing deletes of
//! a sandbox's task (containerd#12344), a sandbox's process dying while a
//! container of the pod, in the same shim on 2.x, still runs
//! (containerd#10421), containerd restarted while the shim did not answer.
//! Which of those the node's containerd has, the advisories say (they add
//! their part to the finding's cause and remedy). Such shims pile up until
//! PIDs or memory run out.

use serde::Serialize;
use serde_json::Value;

use crate::checks::shared::Records;
use crate::model::{
    timestamp, Basis, Children, Finding, Kind, Names, PodRef, Severity, Shim, Snapshot,
};

#[derive(Serialize)]
pub struct Evidence {
    pub shim_pid: i32,
    pub binary: String,
    pub namespace: String,
    /// The `-id` the shim was started with (the pod sandbox id for CRI pods).
    pub shim_id: String,
    /// The pod, if its sandbox's names outlived the record (in CRI or the bundle).
    #[serde(flatten)]
    pub pod: PodRef,
    pub started_at: Value,
    pub age_seconds: f64,
    pub rss_bytes: u64,
    pub children_live: Vec<i32>,
    pub children_defunct: Vec<i32>,
    /// How "no record" was established.
    pub basis: Basis,
    pub inferred: bool,
}

/// A shim of the target containerd is judged only when its command line names
/// a namespace and an id; anything else is not ours to call leaked.
pub fn check(snapshot: &Snapshot) -> Vec<Finding> {
    let joins = Joins::of(snapshot);
    snapshot
        .shims
        .iter()
        .filter(|shim| shim.serves(&snapshot.paths.address.path))
        .filter_map(|shim| {
            let evidence = judge_by(snapshot, &joins, shim)?;
            Some(finding(evidence))
        })
        .collect()
}

/// The shims [`check`] reports, judged by the same joins built once
/// (`--kill`'s targets).
pub fn leaked(snapshot: &Snapshot) -> Vec<&Shim> {
    let joins = Joins::of(snapshot);
    snapshot
        .shims
        .iter()
        .filter(|shim| shim.serves(&snapshot.paths.address.path))
        .filter(|shim| judge_by(snapshot, &joins, shim).is_some())
        .collect()
}

/// The evidence that `shim` is leaked, or `None` if it is not.
pub fn judge(snapshot: &Snapshot, shim: &Shim) -> Option<Evidence> {
    judge_by(snapshot, &Joins::of(snapshot), shim)
}

/// What a shim is judged against, each built once for every shim: the
/// records by id, the processes by parent, the names. A node of tens of
/// thousands of processes made a search of them per shim quadratic.
struct Joins<'a> {
    records: Records<'a>,
    children: Children<'a>,
    names: Names<'a>,
}

impl<'a> Joins<'a> {
    fn of(snapshot: &'a Snapshot) -> Joins<'a> {
        Joins {
            records: Records::indexed(snapshot),
            children: snapshot.children_index(),
            names: snapshot.names(),
        }
    }
}

/// [`judge`], with the records, children and names looked up in `joins`.
fn judge_by(snapshot: &Snapshot, joins: &Joins, shim: &Shim) -> Option<Evidence> {
    // `shim ... delete` is what containerd runs to clean up after a dead shim
    // (and `start` to launch one): short-lived, with no record by design.
    if shim.action.is_some() {
        return None;
    }
    let (namespace, id) = (shim.namespace.as_deref()?, shim.id.as_deref()?);
    let (owned, basis) = joins.records.has(namespace, id);
    if owned {
        return None;
    }
    let (live, defunct) = joins.children.of(shim.pid);
    // A shim still serving a process is never called leaked: killing it
    // would orphan a running container.
    if !live.is_empty() {
        return None;
    }
    let process = snapshot.processes.get(&shim.pid);
    let started_at = process.map_or(0, |p| p.started_at);
    Some(Evidence {
        shim_pid: shim.pid,
        binary: shim.binary.clone(),
        namespace: namespace.to_string(),
        shim_id: id.to_string(),
        pod: joins.names.of_in(namespace, id),
        started_at: timestamp(started_at),
        age_seconds: snapshot.seconds_since(started_at),
        rss_bytes: process.map_or(0, |p| p.rss_bytes),
        children_live: Vec::new(),
        children_defunct: defunct,
        inferred: basis == Basis::Disk,
        basis,
    })
}

fn finding(evidence: Evidence) -> Finding {
    let how = if evidence.inferred {
        "nothing on disk refers to it (containerd's API did not answer: inferred)"
    } else {
        "containerd has no container record for it"
    };
    Finding {
        kind: Kind::LeakedShim,
        severity: Severity::Critical,
        id: evidence.shim_id.clone(),
        summary: format!(
            "shim pid {} ({}, up {:.0} s) serves nothing: {how}",
            evidence.shim_pid, evidence.namespace, evidence.age_seconds
        ),
        evidence: serde_json::to_value(&evidence).unwrap_or(Value::Null),
        cause: "A shim ends only when containerd sends it Shutdown while it holds no \
                container, and containerd sends one only as it deletes one of the shim's \
                tasks. This one was left with nothing to serve and no Shutdown to come (the \
                last came while it still held a container, or none came: a delete that \
                gave up, a containerd restart the shim did not answer), and containerd has \
                forgotten it: nothing will end it."
            .to_string(),
        remedy: "Safe to end: run `nodectl leaked-shims --kill`, which re-checks each shim \
                 and signals it through a pidfd."
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;

    #[test]
    fn shim_without_record_and_children_is_leaked() {
        let mut s = snapshot();
        s.shims.push(shim(500, &id('s'), ADDRESS, &["futex"]));
        s.shims.push(shim(600, &id('t'), ADDRESS, &["futex"]));
        let mut proc_500 = process(500, 'S', NOW - 300 * SEC);
        proc_500.rss_bytes = 12 << 20;
        s.processes.insert(500, proc_500);
        s.processes.insert(501, child(501, 500, 'Z'));
        with_records(&mut s, &[id('t')]);

        let findings = check(&s);
        assert_eq!(findings.len(), 1);
        let f = &findings[0];
        assert_eq!(f.kind, Kind::LeakedShim);
        assert_eq!(f.id, id('s'));
        assert_eq!(f.evidence["shim_pid"], 500);
        assert_eq!(f.evidence["rss_bytes"], 12 << 20);
        assert_eq!(f.evidence["age_seconds"], 300.0);
        assert_eq!(f.evidence["children_defunct"], serde_json::json!([501]));
        assert_eq!(f.evidence["basis"], "containerd-api");
        assert_eq!(f.evidence["inferred"], false);
    }

    #[test]
    fn shim_serving_a_live_process_is_never_leaked() {
        let mut s = snapshot();
        s.shims.push(shim(500, &id('s'), ADDRESS, &["futex"]));
        s.processes.insert(501, child(501, 500, 'S'));
        with_records(&mut s, &[]);
        assert!(check(&s).is_empty());
    }

    #[test]
    fn cleanup_invocation_of_the_shim_binary_is_not_a_leaked_shim() {
        let mut s = snapshot();
        let mut cleanup = shim(500, &id('s'), ADDRESS, &["umount2"]);
        cleanup.action = Some("delete".to_string());
        s.shims.push(cleanup);
        with_records(&mut s, &[]);
        assert!(check(&s).is_empty());
    }

    #[test]
    fn shim_of_another_containerd_is_never_judged() {
        let mut s = snapshot();
        s.shims.push(shim(
            500,
            &id('s'),
            "/run/other/containerd.sock",
            &["futex"],
        ));
        with_records(&mut s, &[]);
        assert!(check(&s).is_empty());
    }

    #[test]
    fn without_api_traces_on_disk_count_as_records_and_findings_say_inferred() {
        let mut s = snapshot();
        s.shims.push(shim(500, &id('s'), ADDRESS, &["futex"]));
        s.shims.push(shim(600, &id('t'), ADDRESS, &["futex"]));
        s.cri_sandboxes.insert(id('t'));
        let findings = check(&s);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].id, id('s'));
        assert_eq!(findings[0].evidence["inferred"], true);
        assert!(findings[0].summary.contains("inferred"));
    }

    #[test]
    fn only_a_proven_shim_is_judged() {
        use crate::model::fixtures::proven;
        let mut s = snapshot();
        s.shims
            .push(proven(shim(500, &id('s'), ADDRESS, &["futex"])));
        // argv says shim, the kernel says bash run by nobody elsewhere.
        let mut forged = proven(shim(600, &id('t'), ADDRESS, &["futex"]));
        let proof = forged.proof.as_mut().unwrap();
        proof.exe = Some("/usr/bin/bash".into());
        proof.uids = vec![65534; 4];
        s.shims.push(forged);
        with_records(&mut s, &[]);
        let findings = check(&s);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].id, id('s'));
    }
}
