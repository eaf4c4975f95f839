//! `nodectl check`: every check in one report, with both APIs cross-checked.
//!
//! It must answer even when containerd does not: the APIs get one deadline
//! (`--timeout`), the files and procfs are read regardless, and the second
//! snapshot (to confirm zombies and blocked shims) costs no API call.

use std::path::Path;
use std::time::Duration;

use crate::checks::{self, Settings};
use crate::cli::{CheckArgs, GlobalArgs};
use crate::evidence;
use crate::model::{ApiCall, Finding, Gap, Kind, Method, Snapshot, Source};
use crate::report::Report;
use crate::sources::api;

pub fn run(global: &GlobalArgs, args: &CheckArgs) -> anyhow::Result<Report> {
    let (first, second) = match &args.from {
        Some(archive) => {
            let evidence = evidence::read(archive)?;
            (evidence.first, evidence.second)
        }
        None => super::gather_pair(global, args.cri_address.as_deref(), &args.confirm),
    };
    let settings = Settings {
        late_after: args.late.late_after,
        since: args.late.since,
        slow: args.slow,
        ..Settings::default()
    };
    let mut findings = checks::run_all(&first, second.as_ref().unwrap_or(&first), &settings);
    let mut gaps = first.gaps.clone();
    if no_containerd(&first) {
        one_gap_for_no_containerd(&first.paths.address.path, &mut findings, &mut gaps);
    }
    let mut context = first.node.clone();
    context.containerd_version = first.containerd.as_ref().and_then(|c| c.version.clone());
    let api_calls = api_calls(&first, args.slow);
    let namespace = first.namespace.clone();
    let mut report = Report::new("check", &namespace, first.paths, findings, gaps)
        .identified(first.containerd_version);
    report.context = Some(context);
    report.api_calls = api_calls;
    Ok(report)
}

/// No containerd on this node at all: nothing at the socket's path, and no
/// containerd process serving it. Then the API findings say nothing the
/// node does not (containerd is not there to be unreachable): one gap says
/// it, and with nothing else found the check exits 2, could not check.
fn no_containerd(snapshot: &Snapshot) -> bool {
    snapshot.paths.process.is_none()
        && snapshot.containerd.as_ref().is_some_and(|view| {
            view.calls
                .iter()
                .any(|c| c.method == Method::Connect && c.error.as_deref() == Some(api::NO_SOCKET))
        })
}

fn one_gap_for_no_containerd(socket: &Path, findings: &mut Vec<Finding>, gaps: &mut Vec<Gap>) {
    let here = socket.display().to_string();
    findings.retain(|f| f.kind != Kind::ApiUnreachable || f.evidence["address"] != here.as_str());
    gaps.retain(|g| {
        !(matches!(g.source, Source::ContainerdApi | Source::CriApi) && g.path == socket)
    });
    gaps.insert(
        0,
        Gap::source(
            Source::ContainerdApi,
            socket,
            "no containerd on this node: no socket there and no containerd process running \
             (--address if it listens elsewhere)",
        ),
    );
}

fn api_calls(snapshot: &Snapshot, slow: Duration) -> Vec<ApiCall> {
    let mut calls = Vec::new();
    if let Some(view) = &snapshot.containerd {
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
