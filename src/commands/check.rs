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
use crate::model::{ApiCall, Finding, Gap, Kind, KubeletFacts, Snapshot};
use crate::report::Report;

/// `check --from` ends within this many `--timeout`s (1 min by default),
/// reading and checking included: an archive is anyone's file, and one
/// shaped to cost (a quadratic check, a huge parse) must not hold nodectl
/// without end.
pub const FROM_DEADLINE_TIMEOUTS: u32 = 20;

pub fn run(global: &GlobalArgs, args: &CheckArgs) -> anyhow::Result<Report> {
    let Some(archive) = &args.from else {
        let (first, second) = super::gather_pair(
            global,
            args.cri_address.as_deref(),
            &args.confirm,
            super::PairFor::Checks,
        );
        let ask_containerd = containerd_answered(&first);
        let report = judged(first, second, args);
        let to_confirm = to_see_twice(&report);
        if to_confirm.is_empty() {
            return Ok(report);
        }
        // Another look, `--settle` later: only what it finds again of
        // those kinds is told.
        std::thread::sleep(crate::confirm::settle(args.confirm.settle, global.timeout));
        let again = look_again(
            global,
            &again_options(global, args, &to_confirm, ask_containerd),
        );
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

/// The [`SEEN_TWICE`] kinds `report` found, which a second look must find
/// again.
fn to_see_twice(report: &Report) -> Vec<Kind> {
    SEEN_TWICE
        .iter()
        .copied()
        .filter(|kind| report.findings.iter().any(|f| f.kind == *kind))
        .collect()
}

/// The second look at `kinds`: it reads only what their checks read (their
/// [`crate::model::Reads`], the look each kind's own command takes: the
/// processes, the files and containerd's API for all four, the mount table
/// for `leaked-mount`, CRI's API for `cri-drift`) and runs only them. A
/// whole second look read every source twice, the mount table, kubelet's,
/// CNI's and the cgroups' among them: issue 46 measured `check` at twice
/// the work of a look on a node with a leaked shim. Each of these checks
/// judges one snapshot (none has a second look of its own), and only
/// whether a finding is found again, by kind and id, is asked of this one.
fn look_again(global: &GlobalArgs, again: &Again) -> Vec<Finding> {
    let (paths, config_gaps) = crate::paths::resolve_for_gather(&global.path_flags());
    let snapshot = gather::gather(&paths, &again.options, config_gaps);
    let findings = checks::registry::run(&again.kinds, &snapshot, &snapshot, &again.settings);
    super::free_in_background(snapshot);
    findings
}

/// What [`look_again`] looks at and how.
struct Again {
    kinds: Vec<Kind>,
    options: gather::GatherOptions,
    settings: crate::checks::settings::Settings,
}

/// What [`look_again`] reads: what the checks of `kinds` read, with CRI at
/// the address `check` was given; containerd's API only when it answered
/// the first look. When it did not (frozen, or gone), the first look judged
/// by what is on disk (`checks::shared::Records`: bundles and CRI's files
/// count as records), and so does this one, without waiting a second
/// `--timeout` on a daemon that gave nothing the first time: on a node
/// whose containerd hangs, `check` answers within one look's deadline and
/// a confirming look's reading of the files.
fn again_options(
    global: &GlobalArgs,
    args: &CheckArgs,
    kinds: &[Kind],
    ask_containerd: bool,
) -> Again {
    let mut options = gather::GatherOptions {
        cri_address: args.cri_address.clone(),
        ..global.gather_options(checks::registry::reads(kinds))
    };
    if !ask_containerd {
        options.api_timeout = None;
    }
    Again {
        kinds: kinds.to_vec(),
        options,
        settings: args.settings(),
    }
}

/// Whether containerd's API answered anything of `first` (a record list,
/// tasks, sandboxes or its version): when nothing, every check judged by
/// what is on disk.
fn containerd_answered(first: &Snapshot) -> bool {
    first.containerd.as_ref().is_some_and(|view| {
        view.version.is_some()
            || view.namespaces.values().any(|ns| {
                ns.containers.is_some() || ns.tasks.is_some() || ns.sandboxes_created.is_some()
            })
    })
}

/// `report` with its findings of the [`SEEN_TWICE`] kinds kept only when
/// `again`, a later look's findings, has them too (same kind, same id).
fn seen_twice(mut report: Report, again: &[Finding]) -> Report {
    let found_again: std::collections::HashSet<(Kind, &str)> = again
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
    use crate::model::Severity;

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
        let kept: Vec<(Kind, String)> = seen_twice(first, &again.findings)
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

    fn parsed(argv: &[&str]) -> (GlobalArgs, CheckArgs) {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(argv).unwrap();
        match cli.command {
            crate::cli::Command::Check(args) => (cli.global, args),
            _ => panic!("not check"),
        }
    }

    #[test]
    fn the_look_that_confirms_reads_only_what_the_kinds_it_confirms_read() {
        let (global, args) = parsed(&["nodectl", "check", "--cri-address", "/run/cri.sock"]);
        // The first look reads every source.
        let whole = super::super::pair_options(&global, None, super::super::PairFor::Checks);
        assert!(whole.mounts && whole.cri_api && whole.kubelet && whole.cni && whole.netns);
        // A leaked shim: the processes and containerd's records, nothing
        // of the mount table, CRI, kubelet, CNI or the cgroups.
        let shim = again_options(&global, &args, &[Kind::LeakedShim], true).options;
        assert_eq!(shim.api_timeout, Some(global.timeout));
        assert!(!shim.mounts && !shim.cri_api && !shim.kubelet && !shim.cni);
        assert!(!shim.netns && !shim.pod_cgroups && !shim.snapshots && !shim.shim_threads);
        // A leaked mount and a drift add the table and CRI's lists, at the
        // address given.
        let both =
            again_options(&global, &args, &[Kind::LeakedMount, Kind::CriDrift], true).options;
        assert!(both.mounts && both.cri_api && !both.kubelet && !both.cni);
        assert_eq!(
            both.cri_address.as_deref(),
            Some(std::path::Path::new("/run/cri.sock"))
        );
        // containerd, when it gave the first look nothing, is not waited on
        // again: the files are read as before.
        let silent = again_options(&global, &args, &[Kind::LeakedMount], false).options;
        assert_eq!(silent.api_timeout, None);
        assert!(silent.mounts);
    }

    #[test]
    fn containerd_is_asked_again_when_it_answered_anything_of_the_first_look() {
        let mut first = crate::model::fixtures::snapshot();
        first.containerd = None;
        assert!(!containerd_answered(&first));
        // Asked, every call past its deadline: a view of nothing.
        let mut silent = crate::model::ContainerdView::default();
        silent
            .namespaces
            .insert("k8s.io".into(), Default::default());
        first.containerd = Some(silent.clone());
        assert!(!containerd_answered(&first));
        let mut answered = |edit: fn(&mut crate::model::ContainerdView)| {
            let mut view = silent.clone();
            edit(&mut view);
            first.containerd = Some(view);
            containerd_answered(&first)
        };
        assert!(answered(|v| v.version = Some("v2.3.4".into())));
        assert!(answered(|v| v
            .namespaces
            .get_mut("k8s.io")
            .unwrap()
            .containers = Some(Default::default())));
        assert!(answered(|v| v
            .namespaces
            .get_mut("k8s.io")
            .unwrap()
            .tasks = Some(Vec::new())));
        assert!(answered(|v| {
            v.namespaces.get_mut("k8s.io").unwrap().sandboxes_created = Some(Default::default())
        }));
    }

    #[test]
    fn every_kind_seen_twice_is_judged_on_one_look_and_confirmed_by_kind_and_id() {
        // None asks a follow-up of its first look's suspects, which the
        // look that confirms does not take.
        for kind in SEEN_TWICE {
            let check = checks::registry::CHECKS
                .iter()
                .find(|c| c.kind == *kind)
                .unwrap();
            assert!(check.second_look.is_none(), "{kind:?}");
        }
        let found = report(&[
            (Kind::Zombie, "z"),
            (Kind::LeakedMount, "m"),
            (Kind::CriDrift, "d"),
        ]);
        assert_eq!(to_see_twice(&found), [Kind::CriDrift, Kind::LeakedMount]);
        assert!(to_see_twice(&report(&[(Kind::Zombie, "z")])).is_empty());
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
