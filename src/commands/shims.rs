//! `nodectl shims`: the shim inventory.

use crate::cli::GlobalArgs;
use crate::gather::{gather, GatherOptions};
use crate::model::shim::{bundle_dir, identity, is_idle_wait, Identity};
use crate::model::{timestamp, PodRef, ShimRow, Snapshot};
use crate::model::{Ask, Reads};
use crate::paths;
use crate::report::{Report, OTHER_SHIMS_LISTED};

/// What the inventory reads (it runs no check): each shim's socket, from
/// its bundle, and what its threads wait in; no API, so that it answers
/// when containerd does not.
pub const READS: Reads = Reads {
    containerd_api: Ask::Never,
    shim_threads: true,
    bundle_sockets: true,
    ..Reads::NOTHING
};

pub(crate) fn gather_options(global: &GlobalArgs) -> GatherOptions {
    global.gather_options(READS)
}

pub fn run(global: &GlobalArgs) -> Report {
    let (paths, gaps) = paths::resolve(&global.path_flags());
    let snapshot = gather(&paths, &gather_options(global), gaps);
    let mut report = Report::new(
        "shims",
        &global.namespace,
        paths,
        Vec::new(),
        snapshot.gaps.clone(),
    )
    .identified(snapshot.containerd_version.clone());
    let (rows, omitted) = bounded(inventory(&snapshot));
    report.shims = Some(rows);
    report.shims_omitted = omitted;
    report
}

/// Every row of this containerd's shims, and at most [`OTHER_SHIMS_LISTED`]
/// of the rest, with how many were left out: forged shims must not make the
/// report as large as their number.
fn bounded(rows: Vec<ShimRow>) -> (Vec<ShimRow>, usize) {
    let mut others = 0;
    let mut omitted = 0;
    let kept = rows
        .into_iter()
        .filter(|row| {
            if row.identity == "ours" {
                return true;
            }
            others += 1;
            let keep = others <= OTHER_SHIMS_LISTED;
            omitted += usize::from(!keep);
            keep
        })
        .collect();
    (kept, omitted)
}

pub fn inventory(snapshot: &Snapshot) -> Vec<ShimRow> {
    let names = snapshot.names();
    let children = snapshot.children_index();
    snapshot
        .shims
        .iter()
        .map(|shim| {
            let process = snapshot.processes.get(&shim.pid);
            let started_at = process.map_or(0, |p| p.started_at);
            let (children_live, children_defunct) = children.of(shim.pid);
            let identity = identity(shim);
            // Only a proven shim has a bundle here: another's -id may name one.
            let proven = matches!(identity, Identity::Ours | Identity::Unproven);
            let bundle = shim
                .id
                .as_ref()
                .filter(|_| proven)
                .and_then(|id| snapshot.bundles.get(id));
            let mut blocked_in: Vec<String> = shim
                .threads
                .iter()
                .filter_map(|t| t.syscall.clone())
                .filter(|s| !is_idle_wait(s))
                .collect();
            blocked_in.sort();
            blocked_in.dedup();
            ShimRow {
                pid: shim.pid,
                binary: shim.binary.clone(),
                namespace: shim.namespace.clone(),
                id: shim.id.clone(),
                address: shim.address.clone(),
                action: shim.action.clone(),
                ours: shim.serves(&snapshot.paths.address.path),
                identity: identity.label(),
                reason: identity.reason().map(str::to_string),
                pod: match (&shim.namespace, &shim.id) {
                    (Some(namespace), Some(id)) => names.of_in(namespace, id),
                    _ => PodRef::default(),
                },
                started_at: timestamp(started_at),
                age_seconds: snapshot.seconds_since(started_at),
                rss_bytes: process.map_or(0, |p| p.rss_bytes),
                children_live,
                children_defunct,
                // Where containerd keeps it, never the process's cwd.
                bundle_dir: proven
                    .then(|| bundle_dir(&snapshot.paths.state.path, shim))
                    .flatten()
                    .map(|p| p.display().to_string())
                    .or_else(|| bundle.map(|b| b.path.display().to_string())),
                socket: bundle.and_then(|b| b.shim_socket.clone()),
                blocked_in,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pid: i32, identity: &'static str) -> ShimRow {
        ShimRow {
            pid,
            binary: "containerd-shim-runc-v2".into(),
            namespace: None,
            id: None,
            address: None,
            action: None,
            ours: identity == "ours",
            identity,
            reason: None,
            pod: PodRef::default(),
            started_at: serde_json::Value::Null,
            age_seconds: 0.0,
            rss_bytes: 0,
            children_live: vec![],
            children_defunct: vec![],
            bundle_dir: None,
            socket: None,
            blocked_in: vec![],
        }
    }

    #[test]
    fn every_own_shim_is_listed_and_at_most_200_others() {
        let mut rows: Vec<ShimRow> = (0..3000).map(|pid| row(pid, "impostor")).collect();
        rows.extend((3000..3500).map(|pid| row(pid, "ours")));
        let (kept, omitted) = bounded(rows);
        assert_eq!(kept.iter().filter(|r| r.identity == "ours").count(), 500);
        assert_eq!(kept.len(), 500 + OTHER_SHIMS_LISTED);
        assert_eq!(omitted, 3000 - OTHER_SHIMS_LISTED);
    }
}
