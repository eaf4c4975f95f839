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
use crate::gather::{follow_up, gather, now_nanos};
use crate::paths;
use crate::report::Report;
use crate::snapshot::Snapshot;
use crate::sources::api::ApiCall;

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
    let findings = checks::run_all(&first, second.as_ref().unwrap_or(&first), &settings);
    let mut context = first.node.clone();
    context.containerd_version = first.containerd.as_ref().and_then(|c| c.version.clone());
    let api_calls = api_calls(&first, args.slow);
    let namespace = first.namespace.clone();
    let mut report = Report::new("check", &namespace, first.paths, findings, first.gaps)
        .identified(first.containerd_version);
    report.context = Some(context);
    report.api_calls = api_calls;
    Ok(report)
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
