//! `nodectl leaked-pod-cgroups [--remove [--yes]] [--grace DURATION]`:
//! kubelet pod cgroups whose pod has no sandbox; optionally remove those
//! nothing runs in, each re-checked right before.

use anyhow::bail;

use crate::act::remove_cgroup;
use crate::checks::registry;
use crate::cli::{GlobalArgs, LeakedPodCgroupsArgs};
use crate::gather::{gather, GatherOptions};
use crate::model::Kind;
use crate::paths;
use crate::report::Report;

/// What `leaked-pod-cgroups` runs. `--remove` reads what the check reads.
pub const KINDS: &[Kind] = &[Kind::LeakedPodCgroup];

pub fn run(global: &GlobalArgs, args: &LeakedPodCgroupsArgs) -> anyhow::Result<Report> {
    if args.yes && !nix::unistd::geteuid().is_root() {
        bail!("--yes needs root: the cgroup filesystem is root's");
    }
    let (paths, config_gaps) = paths::resolve(&global.path_flags());
    let options = GatherOptions {
        cri_address: args.cri_address.clone(),
        ..global.gather_options(registry::reads(KINDS))
    };
    let settings = args.settings();
    let snapshot = gather(&paths, &options, config_gaps.clone());
    let findings = registry::run(KINDS, &snapshot, &snapshot, &settings);

    let mut cleanups = Vec::new();
    if args.remove {
        super::pause_for_tests();
        let regather = super::look_again(global, &options);
        cleanups = remove_cgroup::run(&snapshot, &settings, args.yes, regather);
    }
    let mut report = super::leak_report("leaked-pod-cgroups", global, paths, findings, snapshot);
    report.cleanups = cleanups;
    Ok(report)
}
