//! `nodectl leaked-mounts [--unmount] [--remove-bundles] [--yes]`: rootfs and
//! shm mounts, and bundle directories, left behind by containers containerd
//! no longer knows; optionally clean them, each re-checked right before.

use std::collections::BTreeSet;
use std::path::PathBuf;

use anyhow::bail;

use crate::act::{remove_bundle, unmount};
use crate::checks::{registry, Settings};
use crate::cli::{GlobalArgs, LeakedMountsArgs};
use crate::gather::gather;
use crate::model::{CleanupOutcome, Kind};
use crate::paths;
use crate::report::Report;

/// What `leaked-mounts` runs. Its cleanups read what these checks read:
/// the mount table and the bundles.
pub const KINDS: &[Kind] = &[Kind::LeakedMount, Kind::OrphanBundle];

pub fn run(global: &GlobalArgs, args: &LeakedMountsArgs) -> anyhow::Result<Report> {
    if args.yes && !nix::unistd::geteuid().is_root() {
        bail!("--yes needs root: the mounts and bundles are root's");
    }
    let (paths, config_gaps) = paths::resolve(&global.path_flags());
    let options = global.gather_options(registry::reads(KINDS));
    let snapshot = gather(&paths, &options, config_gaps.clone());
    let findings = registry::run(KINDS, &snapshot, &snapshot, &Settings::default());

    let acting = super::acting(&options);
    let regather = super::look_again(global, &acting);
    let mut cleanups = Vec::new();
    if args.unmount || args.remove_bundles {
        super::pause_for_tests();
    }
    if args.unmount {
        let own = global.proc_root.join("self/mountinfo");
        let allowed = unmount::allowed(
            &global.proc_root,
            &options.mount_table(&paths),
            paths.process.as_ref().map(|p| p.pid),
        );
        let unmount_options = unmount::Options {
            act: args.yes,
            lazy: args.lazy,
        };
        cleanups = unmount::run(&snapshot, unmount_options, allowed, &own, regather);
    }
    if args.remove_bundles {
        // A dry run unmounts nothing: what it would unmount counts as gone.
        let unmounting: BTreeSet<PathBuf> = cleanups
            .iter()
            .filter(|c| c.outcome == CleanupOutcome::WouldUnmount)
            .map(|c| c.path.clone())
            .collect();
        cleanups.extend(remove_bundle::run(
            &snapshot,
            args.yes,
            &unmounting,
            regather,
        ));
    }
    let mut report = super::leak_report("leaked-mounts", global, findings, snapshot);
    report.cleanups = cleanups;
    Ok(report)
}
