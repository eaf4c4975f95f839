//! `nodectl check`: every check in one report, with both APIs cross-checked.
//!
//! It must answer even when containerd does not: the APIs get one deadline
//! (`--timeout`), the files and procfs are read regardless, and the second
//! snapshot (to confirm zombies and blocked shims) costs no API call.

use std::path::Path;
use std::time::Duration;

use crate::checks::{self, Finding, Kind, Settings};
use crate::cli::{CheckArgs, GlobalArgs};
use crate::evidence;
use crate::gather::{follow_up, gather, now_nanos};
use crate::paths;
use crate::report::Report;
use crate::snapshot::{Gap, Snapshot};
use crate::sources::api::{self, ApiCall};

/// Two samples at least this far apart (or `--timeout`, if shorter) tell a
/// blocked thread from a busy one.
const SAMPLE_GAP: Duration = Duration::from_secs(1);

pub fn run(global: &GlobalArgs, args: &CheckArgs) -> Result<Report, String> {
    let (first, second) = match &args.from {
        Some(bundle) => {
            let evidence = evidence::read(bundle)?;
            (evidence.first, evidence.second)
        }
        None => gather_pair(global, args.cri_address.as_deref()),
    };
    let settings = Settings {
        late_after: args.late.late_after,
        since: args.late.since,
        slow: args.slow,
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
                .any(|c| c.call == "connect" && c.error.as_deref() == Some(api::NO_SOCKET))
        })
}

fn one_gap_for_no_containerd(socket: &Path, findings: &mut Vec<Finding>, gaps: &mut Vec<Gap>) {
    let here = socket.display().to_string();
    findings.retain(|f| f.kind != Kind::ApiUnreachable || f.evidence["address"] != here.as_str());
    gaps.retain(|g| {
        !(matches!(g.source.as_str(), "containerd-api" | "cri-api") && g.path == socket)
    });
    gaps.insert(
        0,
        Gap::source(
            "containerd-api",
            socket,
            "no containerd on this node: no socket there and no containerd process running \
             (--address if it listens elsewhere)",
        ),
    );
}

/// The two snapshots a check compares: the first asks both APIs (bounded by
/// `--timeout`); the second, taken at least [`SAMPLE_GAP`] later, re-reads
/// only the status files and processes of what the first shows as suspect
/// (see [`checks::suspects`]), and only when there is one. Without one, there is no second: a
/// healthy node is read once and never waited on.
pub fn gather_pair(
    global: &GlobalArgs,
    cri_address: Option<&Path>,
) -> (Snapshot, Option<Snapshot>) {
    let (paths, config_gaps) = paths::resolve(&global.path_flags());
    let mut options = global.gather_options(true);
    options.cri_address = Some(cri_address.map_or(paths.address.path.clone(), Path::to_path_buf));
    let first = gather(&paths, &options, config_gaps);
    let suspects = checks::suspects(&first);
    if suspects.is_empty() {
        return (first, None);
    }
    let gap = SAMPLE_GAP.min(global.timeout).as_nanos() as i64;
    let waited = now_nanos() - first.taken_at;
    if waited < gap {
        std::thread::sleep(Duration::from_nanos((gap - waited) as u64));
    }
    let second = follow_up(&paths, &options, &suspects);
    (first, Some(second))
}

fn api_calls(snapshot: &Snapshot, slow: Duration) -> Vec<ApiCall> {
    let mut calls = Vec::new();
    let prefix = |api: &str, call: &ApiCall| ApiCall {
        call: format!("{api} {}", call.call),
        ..call.clone()
    };
    if let Some(view) = &snapshot.containerd {
        calls.extend(view.calls.iter().map(|c| prefix("containerd", c)));
    }
    if let Some(view) = &snapshot.cri {
        calls.extend(view.calls.iter().map(|c| prefix("cri", c)));
        let slow_ms = slow.as_secs_f64() * 1e3;
        calls.extend(
            view.statuses
                .iter()
                .filter(|p| p.call.error.is_some() || p.call.latency_ms > slow_ms)
                .map(|p| prefix("cri", &p.call)),
        );
    }
    calls
}
