//! `nodectl collect FILE.tar.gz`: the evidence of this node, for someone else.

use crate::archive::{self, Archived};
use crate::cli::{CollectArgs, GlobalArgs};
use crate::inert::{inert_path, shown};
use crate::report::Report;

pub fn run(global: &GlobalArgs, args: &CollectArgs) -> anyhow::Result<Report> {
    let (first, second) = super::gather_pair(
        global,
        args.cri_address.as_deref(),
        &args.confirm,
        super::PairFor::Archive,
    );
    // The table the look read: the daemon's own, unless `--mountinfo`.
    let mountinfo = global
        .gather_options(crate::model::Reads::NOTHING)
        .mount_table(&first.paths);
    let copies = archive::read_copies(&first, &global.proc_root, &mountinfo, &args.recorder_file);
    let evidence = Archived {
        nodectl_version: env!("CARGO_PKG_VERSION").to_string(),
        hostname: copies.hostname.clone(),
        first,
        second,
        copies_left_out: copies.left_out.clone(),
    };
    archive::write(&args.file, &evidence, &copies, &mountinfo, args.force)?;
    let file = inert_path(&args.file);
    eprintln!(
        "nodectl: wrote {file} ({} containers, {} shims, {} mounts); check it with: nodectl check --from {file}",
        evidence.first.cri_containers.len(),
        evidence.first.shims.len(),
        evidence.first.mounts.len(),
    );
    for note in &evidence.copies_left_out {
        eprintln!("nodectl: {}", shown(note));
    }
    // What could not be read is in the archive, for whoever checks it; the
    // archive itself was written, and that is what collect's status tells.
    let first = evidence.first;
    for gap in &first.gaps {
        eprintln!(
            "nodectl: could not read (recorded in the archive): {} {}: {}",
            gap.source,
            inert_path(&gap.path),
            shown(&gap.error)
        );
    }
    Ok(Report::new(
        "collect",
        &first.namespace,
        first.paths,
        Vec::new(),
        Vec::new(),
    )
    .identified(first.containerd_version))
}
