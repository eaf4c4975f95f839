//! `orphan-bundle`: a task bundle directory with no container record and no
//! shim behind it.
//!
//! containerd removes a task's bundle when its delete succeeds; a delete that
//! timed out, or a shim that died, can leave the directory (and what is
//! mounted below it) with nothing that will ever clean it.

use serde_json::json;

use std::collections::HashSet;

use crate::checks::shared::{served_ids, short, MountPoints, Records};
use crate::model::{Basis, Bundle, Finding, Kind, Names, Severity, Snapshot};

pub fn check(snapshot: &Snapshot) -> Vec<Finding> {
    let joins = Joins::of(snapshot);
    snapshot
        .bundles
        .values()
        .filter_map(|bundle| judge(snapshot, &joins, bundle))
        .collect()
}

/// The bundles [`check`] reports, judged by the same joins built once
/// (`--remove`'s targets).
pub fn orphans(snapshot: &Snapshot) -> Vec<&Bundle> {
    let joins = Joins::of(snapshot);
    snapshot
        .bundles
        .values()
        .filter(|bundle| judge(snapshot, &joins, bundle).is_some())
        .collect()
}

/// The orphan-bundle finding for `bundle`, if it is one.
pub fn orphan_bundle(snapshot: &Snapshot, bundle: &Bundle) -> Option<Finding> {
    judge(snapshot, &Joins::of(snapshot), bundle)
}

/// What a bundle is judged against, each built once for every bundle:
/// whether procfs was read, records by id, the ids shims serve, the mount
/// points sorted, the names.
struct Joins<'a> {
    processes_read: bool,
    records: Records<'a>,
    served: HashSet<&'a str>,
    mounts: MountPoints<'a>,
    names: Names<'a>,
}

impl<'a> Joins<'a> {
    fn of(snapshot: &'a Snapshot) -> Joins<'a> {
        Joins {
            processes_read: snapshot.processes_read(),
            records: Records::indexed(snapshot),
            served: served_ids(snapshot),
            mounts: MountPoints::of(snapshot),
            names: snapshot.names(),
        }
    }
}

fn judge(snapshot: &Snapshot, joins: &Joins, bundle: &Bundle) -> Option<Finding> {
    let (owned, basis) = joins.records.has(&snapshot.namespace, &bundle.id);
    // Without the API the bundle itself counts as a record, so only
    // an API answer can orphan a bundle.
    if owned || basis == Basis::Disk {
        return None;
    }
    let group = bundle.sandbox_id().unwrap_or(&bundle.id);
    // Without procfs, no shim seen is not no shim; nor is a shim whose
    // process was listed but could not be read.
    if !joins.processes_read
        || bundle
            .shim_pid
            .is_some_and(|pid| snapshot.unread_pids.contains(&pid))
        || joins.served.contains(bundle.id.as_str())
        || joins.served.contains(group)
    {
        return None;
    }
    let pod = joins.names.of(&bundle.id);
    let mounted = joins.mounts.any_under(&bundle.path);
    Some(Finding {
        kind: Kind::OrphanBundle,
        severity: Severity::Warning,
        id: bundle.id.clone(),
        summary: format!(
            "bundle {} has no container record and no shim",
            short(&bundle.id)
        ),
        evidence: json!({
            "bundle_dir": bundle.path.display().to_string(),
            "namespace": snapshot.namespace,
            "pod_namespace": pod.pod_namespace,
            "pod_name": pod.pod_name,
            "container_name": pod.container_name,
            "shim_pid_file": bundle.shim_pid,
            "has_mounts": mounted,
            "basis": basis,
            "inferred": false,
        }),
        cause: "containerd lost track of the task (delete timed out, the shim died, \
                or its create was cut short) before it removed the bundle directory."
            .to_string(),
        remedy: if mounted {
            "Unmount what is mounted below it first (see leaked-mount), then remove \
             the directory: `nodectl leaked-mounts --unmount --remove-bundles --yes` \
             does both, re-checking each."
                .to_string()
        } else {
            format!(
                "`nodectl leaked-mounts --remove-bundles --yes` re-checks and removes it \
                 (by hand: rm -rf {}).",
                bundle.path.display()
            )
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use std::path::PathBuf;

    #[test]
    fn bundle_without_record_or_shim_is_orphaned() {
        let mut s = snapshot();
        s.bundles.insert(id('a'), bundle(&id('a'), &id('a'), "app"));
        s.bundles.insert(id('b'), bundle(&id('b'), &id('s'), "app"));
        s.shims.push(shim(9, &id('s'), ADDRESS, &[]));
        // Without the API nothing is orphaned.
        assert!(check(&s).is_empty());
        with_records(&mut s, &[]);
        let findings = check(&s);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].kind, Kind::OrphanBundle);
        assert_eq!(findings[0].id, id('a'));
        assert_eq!(findings[0].evidence["pod_namespace"], "shop");
        // Without procfs, no shim seen is not no shim.
        let mut unread = s.clone();
        unread.gaps.push(procfs_unread());
        assert!(check(&unread).is_empty());
        // Nor is a shim whose process was listed but could not be read.
        let mut unread = s.clone();
        unread.bundles.get_mut(&id('a')).unwrap().shim_pid = Some(77);
        assert_eq!(check(&unread).len(), 1);
        unread.unread_pids.insert(77);
        assert!(check(&unread).is_empty());
        assert_eq!(findings[0].evidence["pod_name"], "web-0");
        assert_eq!(
            findings[0].summary,
            format!(
                "bundle {} has no container record and no shim",
                &id('a')[..13]
            )
        );
        assert_eq!(findings[0].evidence["has_mounts"], false);
        // Its rootfs still mounted, as the table spells it through another
        // spelling of the state directory (`--state` a symlink, a bind mount).
        let mut mounted = s.clone();
        let rootfs = mounted.bundles[&id('a')].path.join("rootfs");
        mounted.mounts.push(crate::model::Mount {
            mount_point: PathBuf::from("/elsewhere/rootfs"),
            as_given: Some(rootfs),
            ..Default::default()
        });
        assert_eq!(check(&mounted)[0].evidence["has_mounts"], true);
        // containerd has a record of it: not orphaned, shim or no shim.
        with_records(&mut s, &[id('a')]);
        let orphans: Vec<_> = check(&s)
            .into_iter()
            .filter(|f| f.kind == Kind::OrphanBundle)
            .collect();
        assert!(orphans.is_empty(), "{orphans:?}");
    }
}
