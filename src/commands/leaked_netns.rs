//! `nodectl leaked-netns [--remove [--yes]] [--grace DURATION]`: pod
//! network namespaces CRI made that no sandbox record names and nothing
//! holds;
//! optionally release them as CRI's teardown does, each re-checked right
//! before.

use anyhow::bail;

use crate::act::remove_netns;
use crate::checks::registry;
use crate::cli::{GlobalArgs, LeakedNetnsArgs};
use crate::model::Kind;
use crate::report::Report;

/// What `leaked-netns` runs. `--remove` reads what the check reads.
pub const KINDS: &[Kind] = &[Kind::LeakedNetns];

pub fn run(global: &GlobalArgs, args: &LeakedNetnsArgs) -> anyhow::Result<Report> {
    if args.yes && !nix::unistd::geteuid().is_root() {
        bail!("--yes needs root: unmounting is root's");
    }
    let options = global.gather_options(registry::reads(KINDS).and(super::NAMING_READS));
    let settings = args.settings();
    let clean = args
        .remove
        .then_some(|before: &_, regather: &dyn Fn() -> _| {
            remove_netns::run(before, &settings, args.yes, regather)
        });
    Ok(super::scan_and_clean(
        "leaked-netns",
        global,
        KINDS,
        &options,
        &settings,
        clean,
    ))
}
