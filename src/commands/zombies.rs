//! `nodectl zombies`: containers whose death CRI missed, now (`zombie`) or
//! earlier (`late-exit`).

use std::collections::BTreeSet;

use crate::checks::{self, Settings};
use crate::cli::{GlobalArgs, ZombiesArgs};
use crate::confirm;
use crate::gather::{add_containerd_records, gather};
use crate::model::{Kind, Snapshot};
use crate::paths;
use crate::report::Report;

pub fn run(global: &GlobalArgs, args: &ZombiesArgs) -> Report {
    let (paths, config_gaps) = paths::resolve(&global.path_flags());
    let options = global.gather_options(false);
    let settings = Settings {
        late_after: args.late.late_after,
        since: args.late.since,
        ..Settings::default()
    };
    let mut snapshot = gather(&paths, &options, config_gaps);
    let find = |snapshot: &Snapshot| {
        let mut findings = checks::zombie::check(snapshot);
        findings.extend(checks::late_exit::check(snapshot, &settings));
        findings
    };
    let mut findings = find(&snapshot);
    // Names: containerd 1.7 and later remove a task's bundle (whose
    // annotations name the pod) with the task, before the exit is recorded;
    // the container record's labels outlive it. Asked only when there is
    // something to name.
    if !findings.is_empty() {
        add_containerd_records(&mut snapshot, &paths, &options, global.timeout);
        // Judged again only if containerd answered with records: building
        // thousands of findings is most of the cost on a node that has them.
        let answered = snapshot.containerd.as_ref().is_some_and(|view| {
            view.namespaces
                .values()
                .any(|ns| ns.containers.is_some() || !ns.labels.is_empty())
        });
        if answered {
            findings = find(&snapshot);
        }
    }

    // A container that exits normally is dead for a few milliseconds before
    // CRI records it; a zombie stays. Report only zombies seen twice (the
    // second look reads only the suspects' status files and processes).
    if findings.iter().any(|f| f.kind == Kind::Zombie) {
        let settle = confirm::settle(args.confirm.settle, global.timeout);
        let second = confirm::second_look(&paths, &options, &snapshot, settle);
        // Still zombies in the second look: the first's findings are kept
        // as they are (the same as `zombie::confirmed` gives, not built again).
        let still: BTreeSet<String> = second.map_or_else(BTreeSet::new, |second| {
            checks::zombie::check(&second)
                .into_iter()
                .map(|f| f.id)
                .collect()
        });
        findings.retain(|f| f.kind != Kind::Zombie || still.contains(&f.id));
    }
    checks::sort(&mut findings);
    Report::new("zombies", &global.namespace, paths, findings, snapshot.gaps)
        .identified(snapshot.containerd_version)
}
