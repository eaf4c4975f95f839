//! `nodectl leaked-sandboxes [--remove [--yes]] [--grace DURATION]`: pod
//! sandboxes CRI keeps NotReady with no container; optionally stop and
//! remove them through CRI, each re-checked right before.

use std::time::Duration;

use anyhow::bail;

use crate::act::remove_sandbox;
use crate::checks::registry;
use crate::cli::{GlobalArgs, LeakedSandboxesArgs};
use crate::gather::GatherOptions;
use crate::model::{Kind, Snapshot};
use crate::report::Report;
use crate::sources::cri_api;

/// What `leaked-sandboxes` runs. `--remove` reads what the check reads.
pub const KINDS: &[Kind] = &[Kind::LeakedSandbox];

/// How long one StopPodSandbox or RemovePodSandbox may take: a stop runs
/// the pod's CNI DEL, which may wait on a slow plugin.
const CRI_CALL: Duration = Duration::from_secs(60);

pub fn run(global: &GlobalArgs, args: &LeakedSandboxesArgs) -> anyhow::Result<Report> {
    if args.yes && !nix::unistd::geteuid().is_root() {
        bail!("--yes needs root: containerd's socket is root's");
    }
    let options = GatherOptions {
        cri_address: args.cri_address.clone(),
        ..global.gather_options(registry::reads(KINDS).and(super::NAMING_READS))
    };
    let settings = args.settings();
    let clean = args
        .remove
        .then_some(|before: &Snapshot, regather: &dyn Fn() -> Snapshot| {
            // The CRI socket the scan asked, not one named again.
            let address = before.cri.as_ref().map(|cri| cri.address.clone());
            let remove = |id: &str| {
                let Some(address) = &address else {
                    return Err("CRI was not asked".to_string());
                };
                let Some(daemon) = before.paths.process.as_ref().map(|p| p.pid) else {
                    return Err(
                        "no containerd was proven, so CRI's socket is not tied to it".to_string(),
                    );
                };
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|err| format!("starting an async runtime: {err}"))?;
                runtime.block_on(cri_api::remove_sandbox(address, daemon, id, CRI_CALL))
            };
            remove_sandbox::run(before, &settings, args.yes, regather, remove)
        });
    let command = "leaked-sandboxes";
    Ok(super::scan_and_clean(
        command, global, KINDS, &options, &settings, clean,
    ))
}
