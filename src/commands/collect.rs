//! `nodectl collect FILE.tar.gz`: the evidence of this node, for someone else.

use crate::cli::{CollectArgs, GlobalArgs};
use crate::commands::check::gather_pair;
use crate::evidence::{self, Evidence};
use crate::report::Report;

pub fn run(global: &GlobalArgs, args: &CollectArgs) -> Result<Report, String> {
    let (first, second) = gather_pair(global, args.cri_address.as_deref());
    let hostname = std::fs::read_to_string(global.proc_root.join("sys/kernel/hostname"))
        .ok()
        .map(|h| h.trim().to_string());
    let evidence = Evidence {
        nodectl_version: env!("CARGO_PKG_VERSION").to_string(),
        hostname,
        first,
        second,
    };
    let mountinfo = global.gather_options(false).mountinfo;
    evidence::write(&args.file, &evidence, &mountinfo).map_err(|e| e.to_string())?;
    eprintln!(
        "nodectl: wrote {} ({} containers, {} shims, {} mounts); check it with: nodectl check --from {}",
        args.file.display(),
        evidence.first.cri_containers.len(),
        evidence.first.shims.len(),
        evidence.first.mounts.len(),
        args.file.display()
    );
    let first = evidence.first;
    Ok(Report::new(
        "collect",
        &first.namespace,
        first.paths,
        Vec::new(),
        first.gaps,
    )
    .identified(first.containerd_version))
}
