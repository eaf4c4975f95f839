//! `nodectl leaked-mounts`: rootfs and shm mounts, and bundle directories,
//! left behind by containers containerd no longer knows.

use crate::checks::{self, leaked_mount, orphan_bundle};
use crate::cli::GlobalArgs;
use crate::gather::{gather, GatherOptions};
use crate::paths;
use crate::report::Report;

pub fn run(global: &GlobalArgs) -> Report {
    let (paths, gaps) = paths::resolve(&global.path_flags());
    let options = GatherOptions {
        shim_threads: false,
        ..global.gather_options(true)
    };
    let snapshot = gather(&paths, &options, gaps);
    let mut findings = leaked_mount::check(&snapshot);
    findings.extend(orphan_bundle::check(&snapshot));
    checks::sort(&mut findings);
    Report::new(
        "leaked-mounts",
        &global.namespace,
        paths,
        findings,
        snapshot.gaps,
    )
    .identified(snapshot.containerd_version)
}
