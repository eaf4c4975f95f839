//! `nodectl leaked-sandboxes [--remove [--yes]] [--grace DURATION]`: pod
//! sandboxes CRI keeps NotReady with no container; optionally stop and
//! remove them through CRI, each re-checked right before.

use std::path::Path;
use std::time::Duration;

use anyhow::bail;

use crate::act::remove_sandbox;
use crate::checks::registry;
use crate::cli::{GlobalArgs, LeakedSandboxesArgs};
use crate::gather::GatherOptions;
use crate::model::{Kind, Snapshot};
use crate::report::Report;
use crate::sources::{cri_api, daemon_proof};

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
                let daemon = before.paths.process.as_ref().map(|p| p.pid);
                served_by(address, daemon)?;
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|err| format!("starting an async runtime: {err}"))?;
                runtime.block_on(cri_api::remove_sandbox(address, id, CRI_CALL))
            };
            remove_sandbox::run(before, &settings, args.yes, regather, remove)
        });
    let command = "leaked-sandboxes";
    Ok(super::scan_and_clean(
        command, global, KINDS, &options, &settings, clean,
    ))
}

/// CRI is asked to remove only at a socket the proven containerd listens
/// on: `--cri-address` may name any socket, and whoever listens there would
/// be told which sandboxes to remove (CRI runs inside containerd, so its
/// socket's listener is the daemon itself). Checked by the listener's pid
/// (`SO_PEERCRED`) right before each removal.
fn served_by(address: &Path, daemon: Option<i32>) -> Result<(), String> {
    let Some(daemon) = daemon else {
        return Err("no containerd was proven, so CRI's socket is not tied to it".to_string());
    };
    let peer = daemon_proof::serving(address)
        .map_err(|why| format!("CRI at {}: {why}", address.display()))?;
    if peer.pid != daemon {
        return Err(format!(
            "CRI at {} is served by pid {}, not by containerd pid {daemon}",
            address.display(),
            peer.pid
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cri_is_asked_to_remove_only_at_the_proven_daemon_s_socket() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("cri.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let ours = std::process::id() as i32;
        assert_eq!(served_by(&socket, Some(ours)), Ok(()));
        let other = served_by(&socket, Some(ours + 1)).unwrap_err();
        assert!(other.contains(&format!("served by pid {ours}")), "{other}");
        assert!(served_by(&socket, None).is_err());
        assert!(served_by(&dir.path().join("absent.sock"), Some(ours)).is_err());
    }
}
