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
use crate::model::{ApiCall, Gap, Snapshot};
use crate::report::Report;

pub fn run(global: &GlobalArgs, args: &CheckArgs) -> anyhow::Result<Report> {
    let (first, second) = match &args.from {
        Some(archive) => {
            // Given up once it reads nothing for as long as a look at the
            // node may take.
            let evidence = archive::read(archive, global.timeout + gather::DEADLINE_GRACE)?;
            (evidence.first, evidence.second)
        }
        None => super::gather_pair(
            global,
            args.cri_address.as_deref(),
            &args.confirm,
            super::PairFor::Checks,
        ),
    };
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
    super::free_in_background((first, second));
    Ok(report)
}

/// `second`'s gaps added to `gaps`, each once.
pub(crate) fn with_second_look(gaps: &mut Vec<Gap>, second: &[Gap]) {
    for gap in second {
        if !gaps.contains(gap) {
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
