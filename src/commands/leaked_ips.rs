//! `nodectl leaked-ips [--release [--yes]] [--grace DURATION]`: addresses
//! host-local holds for pod sandboxes that no longer exist; optionally
//! release them, each re-checked right before, under host-local's lock.

use anyhow::bail;

use crate::act::release_ip;
use crate::checks::registry;
use crate::cli::{GlobalArgs, LeakedIpsArgs};
use crate::gather::gather;
use crate::model::Kind;
use crate::paths;
use crate::report::Report;

/// What `leaked-ips` runs. `--release` reads what the check reads.
pub const KINDS: &[Kind] = &[Kind::LeakedIp];

pub fn run(global: &GlobalArgs, args: &LeakedIpsArgs) -> anyhow::Result<Report> {
    if args.yes && !nix::unistd::geteuid().is_root() {
        bail!("--yes needs root: host-local's store is root's");
    }
    let (paths, config_gaps) = paths::resolve(&global.path_flags());
    let options = global.gather_options(registry::reads(KINDS));
    let settings = args.settings();
    let snapshot = gather(&paths, &options, config_gaps.clone());
    let findings = registry::run(KINDS, &snapshot, &snapshot, &settings);

    let mut cleanups = Vec::new();
    if args.release {
        super::pause_for_tests();
        let regather = super::look_again(global, &options);
        cleanups = release_ip::run(&snapshot, &settings, args.yes, regather);
    }
    let pod_addresses = snapshot.cni.as_ref().map(|cni| cni.address_use());
    let networks_from = snapshot.cni.as_ref().map(|cni| cni.networks_from.clone());
    let mut report = super::leak_report("leaked-ips", global, findings, snapshot);
    report.pod_addresses = pod_addresses.unwrap_or_default();
    report.cni_networks_from = networks_from;
    report.cleanups = cleanups;
    Ok(report)
}
