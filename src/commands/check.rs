//! `nodectl check`: every check in one report, with both APIs cross-checked.
//!
//! It must answer even when containerd does not: the APIs get one deadline
//! (`--timeout`), the files and procfs are read regardless, and the second
//! snapshot (to confirm zombies and blocked shims) costs no API call.

use std::time::Duration;

use crate::archive;
use crate::checks;
use crate::cli::{CheckArgs, GlobalArgs};
use crate::gather;
use crate::model::{ApiCall, Gap, Kind, KubeletFacts, Snapshot};
use crate::report::Report;

/// `check --from` ends within this many `--timeout`s (1 min by default),
/// reading and checking included: an archive is anyone's file, and one
/// shaped to cost (a quadratic check, a huge parse) must not hold nodectl
/// without end.
pub const FROM_DEADLINE_TIMEOUTS: u32 = 20;

pub fn run(global: &GlobalArgs, args: &CheckArgs) -> anyhow::Result<Report> {
    let Some(archive) = &args.from else {
        let look = || {
            let (first, second) = super::gather_pair(
                global,
                args.cri_address.as_deref(),
                &args.confirm,
                super::PairFor::Checks,
            );
            judged(first, second, args)
        };
        let report = look();
        if !report.findings.iter().any(|f| SEEN_TWICE.contains(&f.kind)) {
            return Ok(report);
        }
        // Another whole look, `--settle` later: only what it finds again
        // of those kinds is told.
        std::thread::sleep(crate::confirm::settle(args.confirm.settle, global.timeout));
        let again = look();
        return Ok(seen_twice(report, &again));
    };
    let deadline = global.timeout * FROM_DEADLINE_TIMEOUTS;
    let (global, args, archive) = (global.clone(), args.clone(), archive.clone());
    let (send, answer) = std::sync::mpsc::sync_channel(1);
    // Detached: past the deadline it is left behind, and ends with the
    // process.
    std::thread::Builder::new()
        .name("nodectl-from-check".into())
        .spawn(move || {
            // Given up once it reads nothing for as long as a look at the
            // node may take.
            let read = archive::read(&archive, global.timeout + gather::DEADLINE_GRACE);
            let _ = send.send(read.map(|evidence| judged(evidence.first, evidence.second, &args)));
        })?;
    match answer.recv_timeout(deadline) {
        Ok(report) => report,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => anyhow::bail!(
            "check --from: its deadline passed ({}, {FROM_DEADLINE_TIMEOUTS} × --timeout) before the \
             archive was read and checked; not checked",
            humantime::format_duration(deadline)
        ),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            anyhow::bail!("check --from: its thread ended without an answer")
        }
    }
}

/// The kinds a live `check` tells only when a second whole look finds them
/// too. Each compares sources read at different instants of one look (the
/// process scan, the mount table, the bundles, containerd's records and
/// tasks, CRI's lists), and a node's ordinary churn falls between them: a
/// shim whose sandbox record was just removed and that is exiting, a bundle
/// of a task being created, a sandbox's shm mounted before its record is
/// made, a container CRI still lists as RUNNING while its exit is being
/// handled. Seen with a real kubelet making and deleting pods; a leak holds
/// still and is found again.
const SEEN_TWICE: &[Kind] = &[
    Kind::CriDrift,
    Kind::LeakedShim,
    Kind::OrphanBundle,
    Kind::LeakedMount,
];

/// `report` with its findings of the [`SEEN_TWICE`] kinds kept only when
/// `again`, a later look, has them too (same kind, same id).
fn seen_twice(mut report: Report, again: &Report) -> Report {
    let found_again: std::collections::HashSet<(Kind, &str)> = again
        .findings
        .iter()
        .map(|other| (other.kind, other.id.as_str()))
        .collect();
    report.findings.retain(|finding| {
        !SEEN_TWICE.contains(&finding.kind)
            || found_again.contains(&(finding.kind, finding.id.as_str()))
    });
    report
}

/// The report of the checks on a look (and its confirming second look).
fn judged(first: Snapshot, second: Option<Snapshot>, args: &CheckArgs) -> Report {
    let settings = args.settings();
    let findings = checks::run_all(&first, second.as_ref().unwrap_or(&first), &settings);
    // No containerd on the node is one gap, not the APIs' (the check itself
    // then reports no api-unreachable).
    let mut gaps = checks::api_unreachable::gaps(&first);
    // What the second look could not read: a store gone between the looks
    // leaves the zombies it would confirm unknown, not absent.
    if let Some(second) = &second {
        with_second_look(&mut gaps, &second.gaps);
    }
    let mut context = first.node.clone();
    context.containerd_version = first.containerd.as_ref().and_then(|c| c.version.clone());
    let api_calls = api_calls(&first, args.slow);
    let namespace = first.namespace.clone();
    let mut report = Report::new("check", &namespace, first.paths.clone(), findings, gaps)
        .identified(first.containerd_version.clone());
    report.context = Some(context);
    report.api_calls = api_calls;
    report.pod_addresses = first
        .cni
        .as_ref()
        .map(|cni| cni.address_use())
        .unwrap_or_default();
    report.cni_networks_from = first.cni.as_ref().map(|cni| cni.networks_from.clone());
    report.kubelet = first
        .kubelet
        .as_ref()
        .map(|kubelet| KubeletFacts::of(kubelet, first.pod_cgroups.as_ref()));
    let zombies = report.findings.iter().filter(|f| f.kind == Kind::Zombie);
    report.sample_basis = checks::zombie::sample_basis(&first, zombies.map(|f| f.id.as_str()));
    super::free_in_background((first, second));
    report
}

/// `second`'s gaps added to `gaps`, each once.
pub(crate) fn with_second_look(gaps: &mut Vec<Gap>, second: &[Gap]) {
    // A set, not a search of `gaps` per gap: a store of thousands of
    // corrupt status files is thousands of gaps in each look.
    let mut known: std::collections::HashSet<Gap> = gaps.iter().cloned().collect();
    for gap in second {
        if known.insert(gap.clone()) {
            gaps.push(gap.clone());
        }
    }
}

fn api_calls(snapshot: &Snapshot, slow: Duration) -> Vec<ApiCall> {
    let mut calls = Vec::new();
    if let Some(view) = &snapshot.containerd {
        calls.extend(view.calls.iter().cloned());
    }
    if let Some(view) = &snapshot.snapshotter {
        calls.extend(view.calls.iter().cloned());
    }
    if let Some(view) = &snapshot.cri {
        calls.extend(view.calls.iter().cloned());
        let slow_ms = slow.as_secs_f64() * 1e3;
        calls.extend(
            view.statuses
                .iter()
                .filter(|p| p.call.error.is_some() || p.call.latency_ms > slow_ms)
                .map(|p| p.call.clone()),
        );
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Finding, Severity};

    fn report(found: &[(Kind, &str)]) -> Report {
        let findings = found
            .iter()
            .map(|(kind, id)| Finding {
                kind: *kind,
                severity: Severity::Warning,
                id: id.to_string(),
                summary: String::new(),
                evidence: serde_json::Value::Null,
                cause: String::new(),
                remedy: String::new(),
            })
            .collect();
        let paths = crate::model::fixtures::snapshot().paths;
        Report::new("check", "k8s.io", paths, findings, Vec::new())
    }

    #[test]
    fn a_race_of_the_sources_is_told_only_when_a_second_look_finds_it_again() {
        let first = report(&[
            (Kind::CriDrift, "a"),
            (Kind::CriDrift, "b"),
            (Kind::LeakedShim, "s"),
            (Kind::OrphanBundle, "o"),
            (Kind::Zombie, "z"),
        ]);
        // The second look: `a` still drifts, `s` is a leaked shim again,
        // and `b`'s id is another kind's now; `o` is gone.
        let again = report(&[
            (Kind::CriDrift, "a"),
            (Kind::LeakedShim, "s"),
            (Kind::LeakedMount, "b"),
        ]);
        let kept: Vec<(Kind, String)> = seen_twice(first, &again)
            .findings
            .into_iter()
            .map(|f| (f.kind, f.id))
            .collect();
        assert_eq!(
            kept,
            vec![
                (Kind::CriDrift, "a".to_string()),
                (Kind::LeakedShim, "s".to_string()),
                // Confirmed its own way (a second look at its status file).
                (Kind::Zombie, "z".to_string()),
            ]
        );
    }

    #[test]
    fn the_second_looks_gaps_are_added_once_each_after_the_firsts() {
        let gap = |path: &str| Gap::item(crate::model::Source::CriStore, path, "unreadable");
        let mut gaps = vec![gap("a"), gap("b")];
        with_second_look(
            &mut gaps,
            &[gap("b"), gap("c"), gap("c"), gap("a"), gap("d")],
        );
        let paths: Vec<_> = gaps.iter().map(|g| g.path.to_str().unwrap()).collect();
        assert_eq!(paths, ["a", "b", "c", "d"]);
    }
}
