//! `nodectl leaked-snapshots [--remove [--yes]] [--grace DURATION]`: active
//! snapshots that no container, lease or GC root holds; optionally remove
//! them, each re-checked right before.

use anyhow::bail;

use crate::act::remove_snapshot;
use crate::checks::registry;
use crate::cli::{GlobalArgs, LeakedSnapshotsArgs};
use crate::gather::gather;
use crate::model::Kind;
use crate::paths;
use crate::report::Report;
use crate::sources::containerd_snapshots;

/// What `leaked-snapshots` runs. `--remove` reads what the check reads.
pub const KINDS: &[Kind] = &[Kind::LeakedSnapshot];

pub fn run(global: &GlobalArgs, args: &LeakedSnapshotsArgs) -> anyhow::Result<Report> {
    if args.yes && !nix::unistd::geteuid().is_root() {
        bail!("--yes needs root: containerd's socket is root's");
    }
    let (paths, config_gaps) = paths::resolve(&global.path_flags());
    let options = global.gather_options(registry::reads(KINDS));
    let settings = args.settings();
    let snapshot = gather(&paths, &options, config_gaps.clone());
    let findings = registry::run(KINDS, &snapshot, &snapshot, &settings);

    let mut cleanups = Vec::new();
    if args.remove {
        super::pause_for_tests();
        let regather = super::look_again(global, &options);
        let (address, namespace) = (&paths.address.path, &global.namespace);
        // Removed only over a connection whose peer is the daemon the scan
        // proved (the walk refuses everything without one).
        let daemon = snapshot.paths.process.as_ref().map(|p| p.pid);
        let remove = |snapshotter: &str, key: &str| {
            let daemon = daemon.ok_or("no containerd was proven")?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|err| format!("starting an async runtime: {err}"))?;
            runtime.block_on(async {
                let deadline = tokio::time::Instant::now() + global.timeout;
                let key = (snapshotter, key);
                containerd_snapshots::remove(address, daemon, namespace, key, deadline).await
            })
        };
        cleanups = remove_snapshot::run(&snapshot, &settings, args.yes, regather, remove);
    }
    let mut report = super::leak_report("leaked-snapshots", global, findings, snapshot);
    report.cleanups = cleanups;
    Ok(report)
}
