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
        findings = find(&snapshot);
    }

    // A container that exits normally is dead for a few milliseconds before
    // CRI records it; a zombie stays. Report only zombies seen twice (the
    // second look reads only the suspects' status files and processes).
    if findings.iter().any(|f| f.kind == Kind::Zombie) {
        let settle = confirm::settle(args.confirm.settle, global.timeout);
        let second = confirm::second_look(&paths, &options, &snapshot, settle);
        let confirmed = second.map_or_else(Vec::new, |second| {
            checks::zombie::confirmed(&snapshot, &second)
        });
        let still: BTreeSet<&str> = confirmed.iter().map(|f| f.id.as_str()).collect();
        findings.retain(|f| f.kind != Kind::Zombie || still.contains(f.id.as_str()));
    }
    checks::sort(&mut findings);
    Report::new("zombies", &global.namespace, paths, findings, snapshot.gaps)
        .identified(snapshot.containerd_version)
}
