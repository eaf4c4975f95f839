//! `nodectl leaked-netns [--remove [--yes]] [--grace DURATION]`: pod
//! network namespaces no sandbox record names and no process is in;
//! optionally release them as CRI's teardown does, each re-checked right
//! before.

use anyhow::bail;

use crate::act::remove_netns;
use crate::checks::registry;
use crate::cli::{GlobalArgs, LeakedNetnsArgs};
use crate::gather::gather;
use crate::model::Kind;
use crate::paths;
use crate::report::Report;

/// What `leaked-netns` runs. `--remove` reads what the check reads.
pub const KINDS: &[Kind] = &[Kind::LeakedNetns];

pub fn run(global: &GlobalArgs, args: &LeakedNetnsArgs) -> anyhow::Result<Report> {
    if args.yes && !nix::unistd::geteuid().is_root() {
        bail!("--yes needs root: unmounting is root's");
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
        cleanups = remove_netns::run(&snapshot, &settings, args.yes, regather);
    }
    let mut report = super::leak_report("leaked-netns", global, paths, findings, snapshot);
    report.cleanups = cleanups;
    Ok(report)
}
