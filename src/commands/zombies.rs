//! `nodectl zombies`: containers whose death CRI missed, now (`zombie`) or
//! earlier (`late-exit`).

use std::collections::BTreeSet;

use crate::checks::{self, registry};
use crate::cli::{GlobalArgs, ZombiesArgs};
use crate::confirm;
use crate::gather::{add_containerd_records, gather};
use crate::model::{Kind, Severity, Snapshot};
use crate::paths;
use crate::report::{Report, FINDINGS_PER_KIND};

/// What `zombies` runs. It runs them itself rather than through the
/// registry: on a node where thousands of containers look dead it builds
/// only the findings the report lists, and asks containerd for names only
/// once something is found (see [`registry::reads`]: `Ask::WhenFound`).
pub const KINDS: &[Kind] = &[Kind::Zombie, Kind::LateExit];

pub fn run(global: &GlobalArgs, args: &ZombiesArgs) -> Report {
    // Every look is gather's: it can find the running containerd itself.
    let (paths, config_gaps) = paths::resolve_for_gather(&global.path_flags());
    let options = global.gather_options(registry::reads(KINDS));
    let settings = args.settings();
    let mut snapshot = gather(&paths, &options, config_gaps);
    // The paths with the running containerd gather found.
    let paths = snapshot.paths.clone();
    // Zombies by id first: thousands of findings on a node where every
    // container looks dead, of which the report lists FINDINGS_PER_KIND;
    // only those are built, once, at the end.
    let suspects = checks::zombie::dead_ids(&snapshot);
    let late = |snapshot: &Snapshot| checks::late_exit::check(snapshot, &settings);
    let mut late_exits = late(&snapshot);
    // Names: containerd 1.7 and later remove a task's bundle (whose
    // annotations name the pod) with the task, before the exit is recorded;
    // the container record's labels outlive it. Asked only when there is
    // something to name.
    if !suspects.is_empty() || !late_exits.is_empty() {
        add_containerd_records(&mut snapshot, &paths, &options, global.timeout);
        let answered = snapshot.containerd.as_ref().is_some_and(|view| {
            view.namespaces
                .values()
                .any(|ns| ns.containers.is_some() || !ns.labels.is_empty())
        });
        if answered {
            late_exits = late(&snapshot);
        }
    }

    // A container that exits normally is dead for a few milliseconds before
    // CRI records it; a zombie stays. Report only those CRI still calls
    // running in a second look (which reads only their status files: a
    // process gone stays gone).
    let confirmed: BTreeSet<String> = if suspects.is_empty() {
        BTreeSet::new()
    } else {
        let settle = confirm::settle(args.confirm.settle, global.timeout);
        confirm::second_look(&options, &snapshot, settle)
            .map(|second| {
                let unrecorded = checks::zombie::unrecorded_ids(&second);
                super::check::with_second_look(&mut snapshot.gaps, &second.gaps);
                super::free_in_background(second);
                unrecorded
            })
            .unwrap_or_default()
    };
    let (mut findings, unbuilt) =
        checks::zombie::findings(&snapshot, |id| confirmed.contains(id), FINDINGS_PER_KIND);
    findings.extend(late_exits);
    checks::sort(&mut findings);
    let gaps = std::mem::take(&mut snapshot.gaps);
    let version = snapshot.containerd_version.clone();
    super::free_in_background(snapshot);
    Report::new("zombies", &global.namespace, paths, findings, gaps)
        .omitting(Kind::Zombie, Severity::Critical, unbuilt)
        .identified(version)
}
