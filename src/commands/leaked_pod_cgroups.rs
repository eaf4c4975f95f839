//! `nodectl leaked-pod-cgroups [--remove [--yes]] [--grace DURATION]`:
//! kubelet pod cgroups whose pod has no sandbox; optionally remove those
//! nothing runs in, each re-checked right before (a systemd driver's slice
//! stopped through systemd).

use anyhow::bail;

use crate::act::{remove_cgroup, systemd};
use crate::checks::registry;
use crate::cli::{GlobalArgs, LeakedPodCgroupsArgs};
use crate::gather::GatherOptions;
use crate::model::Kind;
use crate::report::Report;

/// What `leaked-pod-cgroups` runs. `--remove` reads what the check reads.
pub const KINDS: &[Kind] = &[Kind::LeakedPodCgroup];

pub fn run(global: &GlobalArgs, args: &LeakedPodCgroupsArgs) -> anyhow::Result<Report> {
    if args.yes && !nix::unistd::geteuid().is_root() {
        bail!("--yes needs root: the cgroup filesystem is root's");
    }
    let options = GatherOptions {
        cri_address: args.cri_address.clone(),
        ..global.gather_options(registry::reads(KINDS).and(super::NAMING_READS))
    };
    let settings = args.settings();
    let clean = args
        .remove
        .then_some(|before: &_, regather: &dyn Fn() -> _| {
            // A systemd driver's slice is stopped through systemd, as
            // kubelet does, waiting at most --timeout for it.
            let mut systemd = systemd::Manager::host(global.timeout);
            remove_cgroup::run(before, &settings, args.yes, &mut systemd, regather)
        });
    let command = "leaked-pod-cgroups";
    Ok(super::scan_and_clean(
        command, global, KINDS, &options, &settings, clean,
    ))
}
