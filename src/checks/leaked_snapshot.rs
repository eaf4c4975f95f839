//! `leaked-snapshot`: an active snapshot (a writable layer, a container's
//! rootfs or an unpack in progress) that nothing holds any more.
//!
//! What holds a snapshot is what containerd's garbage collector counts as a
//! reference (`metadata/gc.go`, the same on 1.7, 2.0 and 2.3): a container
//! record's (snapshotter, snapshot_key); a lease listing it among its
//! resources, unless the lease's `containerd.io/gc.expire` has passed (GC
//! skips an expired lease, then deletes it); a `containerd.io/gc.root` label
//! on the snapshot itself; a `containerd.io/gc.ref.snapshot.<snapshotter>`
//! label on another object naming it; and (2.3) a `containerd.io/gc.bref.*`
//! label, which keeps it while the object it names exists (nodectl does not
//! follow those: any such label counts as held). GC sweeps every snapshot it
//! cannot reach from these, active or committed alike, but it runs only
//! after a deletion or a hundred other changes to containerd's metadata
//! (gc/scheduler: `deletion_threshold` 0, `mutation_threshold` 100), so on a
//! quiet node, or when GC keeps failing, an unheld snapshot stays, with its
//! upper directory's space.
//!
//! Committed snapshots are never flagged: they are image layers, held by
//! images through content labels and by every snapshot prepared on them
//! through the parent chain, which nodectl does not walk. Views are not
//! flagged either (read-only, no space of their own).

use std::collections::{BTreeMap, HashMap};

use serde_json::json;

use crate::checks::settings::Settings;
use crate::model::{
    timestamp, Finding, Kind, Severity, Snapshot, SnapshotInfo, SnapshotKind, SnapshotterView,
};

const GC_ROOT: &str = "containerd.io/gc.root";
const GC_EXPIRE: &str = "containerd.io/gc.expire";
const GC_REF_SNAPSHOT: &str = "containerd.io/gc.ref.snapshot.";
const GC_BREF: &str = "containerd.io/gc.bref.";

/// Why one snapshot is not (or cannot be called) leaked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// containerd does not list it (any more).
    Gone,
    /// Something holds it, or it is no active snapshot: the reason.
    Kept(String),
    /// What containerd did not answer, so nothing can be concluded.
    Unknown(String),
}

pub fn check(snapshot: &Snapshot, settings: &Settings) -> Vec<Finding> {
    let Some(view) = &snapshot.snapshotter else {
        return Vec::new();
    };
    let holds = Holds::of(snapshot);
    view.snapshots
        .iter()
        .flat_map(|(snapshotter, infos)| {
            infos
                .iter()
                .flatten()
                .filter(|info| info.kind == SnapshotKind::Active)
                .map(move |info| (snapshotter, info))
        })
        .filter_map(|(snapshotter, info)| {
            judge_by(snapshot, &holds, snapshotter, &info.key, settings)
                .ok()
                .map(|info| finding(snapshot, snapshotter, info))
        })
        .collect()
}

/// The snapshot `snapshotter`/`key` if it is leaked on `snapshot`, else why
/// not. Pure; `--remove` asks it again on a fresh snapshot before acting.
pub fn judge<'a>(
    snapshot: &'a Snapshot,
    snapshotter: &str,
    key: &str,
    settings: &Settings,
) -> Result<&'a SnapshotInfo, Held> {
    judge_by(snapshot, &Holds::of(snapshot), snapshotter, key, settings)
}

/// A snapshotter's name and a snapshot's key.
type SnapshotRef<'a> = (&'a str, &'a str);

/// What holds each snapshot, each the first a search in containerd's order
/// finds, built once for every snapshot judged: a node of tens of
/// thousands of containers has as many snapshots, and a search of every
/// container, snapshot and lease per snapshot was quadratic.
#[derive(Default)]
struct Holds<'a> {
    /// Each snapshot listed, by snapshotter and key.
    listed: HashMap<SnapshotRef<'a>, &'a SnapshotInfo>,
    /// The container record using it: its id.
    used_by: HashMap<SnapshotRef<'a>, &'a str>,
    /// The container record whose label names it: its id.
    named_by_container: HashMap<SnapshotRef<'a>, &'a str>,
    /// The snapshot of the same snapshotter whose label names it: its key.
    named_by_snapshot: HashMap<SnapshotRef<'a>, &'a str>,
    /// The unexpired lease holding it, by resource type (`snapshots/<name>`)
    /// and id: its place among the leases, and its id.
    leased: HashMap<SnapshotRef<'a>, (usize, &'a str)>,
    /// The first lease whose resources containerd did not list: its place
    /// and id.
    unlisted_lease: Option<(usize, &'a str)>,
}

impl<'a> Holds<'a> {
    fn of(snapshot: &'a Snapshot) -> Holds<'a> {
        let mut holds = Holds::default();
        let Some(view) = &snapshot.snapshotter else {
            return holds;
        };
        for (snapshotter, infos) in &view.snapshots {
            for info in infos.iter().flatten() {
                holds.listed.entry((snapshotter, &info.key)).or_insert(info);
                for named in refs(&info.labels).filter(|(s, _)| s == snapshotter) {
                    holds.named_by_snapshot.entry(named).or_insert(&info.key);
                }
            }
        }
        for c in view.containers.iter().flatten() {
            let used = (c.snapshotter.as_str(), c.snapshot_key.as_str());
            holds.used_by.entry(used).or_insert(&c.id);
            for named in refs(&c.labels) {
                holds.named_by_container.entry(named).or_insert(&c.id);
            }
        }
        for (place, lease) in view.leases.iter().flatten().enumerate() {
            let Some(resources) = &lease.resources else {
                holds.unlisted_lease.get_or_insert((place, &lease.id));
                continue;
            };
            if expired(lease.labels.get(GC_EXPIRE), snapshot.taken_at) {
                continue;
            }
            for r in resources {
                let held = (r.r#type.as_str(), r.id.as_str());
                holds.leased.entry(held).or_insert((place, &lease.id));
            }
        }
        holds
    }
}

/// [`judge`], with what holds each snapshot looked up in `holds`.
fn judge_by<'a>(
    snapshot: &'a Snapshot,
    holds: &Holds<'a>,
    snapshotter: &str,
    key: &str,
    settings: &Settings,
) -> Result<&'a SnapshotInfo, Held> {
    let unknown = |what: &str| Err(Held::Unknown(format!("containerd did not list {what}")));
    let Some(view) = &snapshot.snapshotter else {
        return unknown("its snapshots");
    };
    if view.containers.is_none() {
        return unknown("its containers");
    }
    if view.leases.is_none() {
        return unknown("its leases");
    }
    let Some(Some(_)) = view.snapshots.get(snapshotter) else {
        return unknown(&format!("the snapshots of {snapshotter}"));
    };
    let Some(&info) = holds.listed.get(&(snapshotter, key)) else {
        return Err(Held::Gone);
    };
    let kept = |why: String| Err(Held::Kept(why));
    if info.kind != SnapshotKind::Active {
        return kept(format!(
            "a {} snapshot, not an active one",
            info.kind.as_str()
        ));
    }
    if let Some(id) = holds.used_by.get(&(snapshotter, key)) {
        return kept(format!("container {id} uses it"));
    }
    if let Some(id) = holds.named_by_container.get(&(snapshotter, key)) {
        return kept(format!("container {id} refers to it by a label"));
    }
    if let Some(other) = holds.named_by_snapshot.get(&(snapshotter, key)) {
        return kept(format!("snapshot {other} refers to it by a label"));
    }
    // The leases in order: the first whose resources are unknown may hold
    // it (containerd did not say), unless one before it does.
    let resource = format!("snapshots/{snapshotter}");
    let leased = holds.leased.get(&(resource.as_str(), key));
    match (leased, holds.unlisted_lease) {
        (Some((place, id)), unlisted) if unlisted.is_none_or(|(first, _)| *place < first) => {
            return kept(format!("lease {id} holds it"));
        }
        (_, Some((_, id))) => return unknown(&format!("what lease {id} holds")),
        _ => {}
    }
    if info.labels.contains_key(GC_ROOT) {
        return kept(format!("labelled {GC_ROOT}: a root for containerd's GC"));
    }
    if let Some(label) = info.labels.keys().find(|k| k.starts_with(GC_BREF)) {
        return kept(format!("labelled {label}: held while what it names exists"));
    }
    let age = age_nanos(snapshot, info);
    let grace = i64::try_from(settings.snapshot_grace.as_nanos()).unwrap_or(i64::MAX);
    if age < grace {
        // An unpack (`extract-...`) or a container being created holds its
        // snapshot under a lease or a record within moments; younger than
        // the grace, it may be one of those in between.
        return kept(format!(
            "changed {} ago, within the grace of {}",
            humantime::format_duration(std::time::Duration::from_secs(seconds(age))),
            humantime::format_duration(settings.snapshot_grace)
        ));
    }
    Ok(info)
}

/// The (snapshotter, key) each `gc.ref.snapshot.<snapshotter>[/...]` label
/// of `labels` names.
fn refs(labels: &BTreeMap<String, String>) -> impl Iterator<Item = SnapshotRef<'_>> {
    labels.iter().filter_map(|(label, value)| {
        let rest = label.strip_prefix(GC_REF_SNAPSHOT)?;
        Some((rest.split('/').next()?, value.as_str()))
    })
}

/// A lease's expiry has passed: containerd ignores an unparsable one (the
/// lease holds).
fn expired(expire: Option<&String>, now: i64) -> bool {
    let Some(at) = expire.and_then(|e| humantime::parse_rfc3339_weak(e).ok()) else {
        return false;
    };
    let at = at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    at < now
}

/// Since the snapshot was last changed (created or updated), in ns.
fn age_nanos(snapshot: &Snapshot, info: &SnapshotInfo) -> i64 {
    snapshot
        .taken_at
        .saturating_sub(info.created_at.max(info.updated_at))
}

fn seconds(nanos: i64) -> u64 {
    u64::try_from(nanos / 1_000_000_000).unwrap_or(0)
}

fn finding(snapshot: &Snapshot, snapshotter: &str, info: &SnapshotInfo) -> Finding {
    let age = seconds(age_nanos(snapshot, info));
    let namespace = snapshot
        .snapshotter
        .as_ref()
        .map_or(snapshot.namespace.as_str(), |v: &SnapshotterView| {
            v.namespace.as_str()
        });
    Finding {
        kind: Kind::LeakedSnapshot,
        severity: Severity::Warning,
        id: info.key.clone(),
        summary: format!(
            "active {snapshotter} snapshot {} is held by no container, lease or GC root",
            info.key
        ),
        evidence: json!({
            "snapshotter": snapshotter,
            "key": info.key,
            "parent": info.parent,
            "namespace": namespace,
            "created_at": timestamp(info.created_at),
            "updated_at": timestamp(info.updated_at),
            "age_seconds": age,
        }),
        cause: "The container that used it was removed without it (a delete that failed \
                half-way), or a client prepared it outside a lease and went away; \
                containerd's GC removes it only at its next collection, which a quiet node \
                may not have."
            .to_string(),
        remedy: format!(
            "`nodectl leaked-snapshots --remove` shows what it would do, `--remove --yes` \
             re-checks and removes it (by hand: `ctr -n {namespace} snapshots --snapshotter \
             {snapshotter} rm {}`).",
            info.key
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{ContainerSnapshot, Lease, LeaseResource};
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn info(key: &str, kind: SnapshotKind, age_s: i64) -> SnapshotInfo {
        SnapshotInfo {
            key: key.to_string(),
            parent: "sha256:layer".to_string(),
            kind,
            created_at: NOW - age_s * SEC,
            updated_at: NOW - age_s * SEC,
            labels: BTreeMap::new(),
        }
    }

    /// An hour-old active snapshot `lost`, a committed layer, and nothing
    /// else: containerd answered every list.
    fn node() -> Snapshot {
        let mut s = snapshot();
        s.snapshotter = Some(SnapshotterView {
            namespace: "k8s.io".to_string(),
            snapshots: BTreeMap::from([(
                "overlayfs".to_string(),
                Some(vec![
                    info("lost", SnapshotKind::Active, 3600),
                    info("sha256:layer", SnapshotKind::Committed, 7200),
                ]),
            )]),
            leases: Some(Vec::new()),
            containers: Some(Vec::new()),
            ..SnapshotterView::default()
        });
        s
    }

    fn view(s: &mut Snapshot) -> &mut SnapshotterView {
        s.snapshotter.as_mut().unwrap()
    }

    fn keys(s: &Snapshot) -> Vec<String> {
        check(s, &Settings::default())
            .into_iter()
            .map(|f| f.id)
            .collect()
    }

    fn kept(s: &Snapshot, key: &str) -> String {
        match judge(s, "overlayfs", key, &Settings::default()) {
            Err(Held::Kept(why)) => why,
            other => panic!("not kept: {other:?}"),
        }
    }

    #[test]
    fn an_old_unheld_active_snapshot_is_leaked_with_its_evidence() {
        let s = node();
        let findings = check(&s, &Settings::default());
        assert_eq!(findings.len(), 1, "the committed layer is not flagged");
        let f = &findings[0];
        assert_eq!((f.kind, f.id.as_str()), (Kind::LeakedSnapshot, "lost"));
        assert_eq!(f.evidence["snapshotter"], "overlayfs");
        assert_eq!(f.evidence["parent"], "sha256:layer");
        assert_eq!(f.evidence["age_seconds"], 3600);
        assert!(f.evidence["created_at"].as_str().unwrap().ends_with('Z'));
        assert!(f.remedy.contains("--snapshotter overlayfs rm lost"));
    }

    #[test]
    fn a_snapshot_a_container_uses_or_names_is_not_leaked() {
        let mut s = node();
        let container = |snapshotter: &str, key: &str| ContainerSnapshot {
            id: "c1".to_string(),
            snapshotter: snapshotter.to_string(),
            snapshot_key: key.to_string(),
            labels: BTreeMap::new(),
        };
        // Same key in another snapshotter: not this one.
        view(&mut s).containers = Some(vec![container("native", "lost")]);
        assert_eq!(keys(&s), ["lost"]);
        view(&mut s).containers = Some(vec![container("overlayfs", "lost")]);
        assert!(keys(&s).is_empty());
        assert!(kept(&s, "lost").contains("container c1"));
        let mut labelled = container("", "");
        labelled.labels.insert(
            "containerd.io/gc.ref.snapshot.overlayfs".to_string(),
            "lost".to_string(),
        );
        view(&mut s).containers = Some(vec![labelled]);
        assert!(kept(&s, "lost").contains("label"));
    }

    #[test]
    fn a_lease_holds_it_until_the_lease_expires() {
        let mut s = node();
        let lease = |ty: &str, expire: Option<&str>| Lease {
            id: "l1".to_string(),
            labels: expire
                .map(|e| BTreeMap::from([(GC_EXPIRE.to_string(), e.to_string())]))
                .unwrap_or_default(),
            resources: Some(vec![LeaseResource {
                r#type: ty.to_string(),
                id: "lost".to_string(),
            }]),
        };
        view(&mut s).leases = Some(vec![lease("snapshots/native", None)]);
        assert_eq!(keys(&s), ["lost"]);
        view(&mut s).leases = Some(vec![lease("snapshots/overlayfs", None)]);
        assert!(kept(&s, "lost").contains("lease l1"));
        // Expired (NOW is in the 2020s): GC ignores the lease.
        view(&mut s).leases = Some(vec![lease(
            "snapshots/overlayfs",
            Some("2001-01-01T00:00:00Z"),
        )]);
        assert_eq!(keys(&s), ["lost"]);
        view(&mut s).leases = Some(vec![lease(
            "snapshots/overlayfs",
            Some("2999-01-01T00:00:00Z"),
        )]);
        assert!(keys(&s).is_empty());
        // An unreadable expiry: containerd keeps using the lease.
        view(&mut s).leases = Some(vec![lease("snapshots/overlayfs", Some("soon"))]);
        assert!(keys(&s).is_empty());
    }

    #[test]
    fn what_holds_it_is_said_as_containerd_s_order_finds_it_first() {
        let mut s = node();
        let user = |id: &str| ContainerSnapshot {
            id: id.to_string(),
            snapshotter: "overlayfs".to_string(),
            snapshot_key: "lost".to_string(),
            labels: BTreeMap::new(),
        };
        view(&mut s).containers = Some(vec![user("c1"), user("c2")]);
        assert!(kept(&s, "lost").contains("container c1 uses it"));
        view(&mut s).containers = Some(Vec::new());
        let lease = |id: &str, resources: bool| Lease {
            id: id.to_string(),
            labels: BTreeMap::new(),
            resources: resources.then(|| {
                vec![LeaseResource {
                    r#type: "snapshots/overlayfs".to_string(),
                    id: "lost".to_string(),
                }]
            }),
        };
        // A lease that holds it before one whose resources are unknown
        // holds it; after one, what that one holds is unknown.
        view(&mut s).leases = Some(vec![lease("l1", true), lease("l9", false)]);
        assert!(kept(&s, "lost").contains("lease l1 holds it"));
        view(&mut s).leases = Some(vec![lease("l9", false), lease("l1", true)]);
        assert!(matches!(
            judge(&s, "overlayfs", "lost", &Settings::default()),
            Err(Held::Unknown(why)) if why.contains("lease l9")
        ));
    }

    #[test]
    fn gc_roots_and_back_references_hold_it() {
        for label in [GC_ROOT, "containerd.io/gc.bref.container"] {
            let mut s = node();
            let snapshots = view(&mut s).snapshots.get_mut("overlayfs").unwrap();
            snapshots.as_mut().unwrap()[0]
                .labels
                .insert(label.to_string(), "x".to_string());
            assert!(keys(&s).is_empty(), "{label}");
        }
    }

    #[test]
    fn the_grace_is_a_setting_and_measured_from_the_last_change() {
        let mut s = node();
        let snapshots = view(&mut s).snapshots.get_mut("overlayfs").unwrap();
        snapshots.as_mut().unwrap()[0].updated_at = NOW - 60 * SEC;
        assert!(keys(&s).is_empty(), "changed a minute ago");
        assert!(kept(&s, "lost").contains("grace"));
        let none = Settings {
            snapshot_grace: Duration::ZERO,
            ..Settings::default()
        };
        assert_eq!(check(&s, &none).len(), 1);
        let minute = Settings {
            snapshot_grace: Duration::from_secs(60),
            ..Settings::default()
        };
        assert_eq!(check(&s, &minute).len(), 1, "exactly the grace is past it");
    }

    #[test]
    fn what_containerd_did_not_answer_flags_nothing() {
        let mut s = node();
        view(&mut s).containers = None;
        assert!(keys(&s).is_empty());
        let mut s = node();
        view(&mut s).leases = None;
        assert!(keys(&s).is_empty());
        let mut s = node();
        view(&mut s).leases = Some(vec![Lease {
            id: "l9".to_string(),
            labels: BTreeMap::new(),
            resources: None,
        }]);
        assert!(matches!(
            judge(&s, "overlayfs", "lost", &Settings::default()),
            Err(Held::Unknown(why)) if why.contains("lease l9")
        ));
        let mut s = node();
        view(&mut s).snapshots.insert("overlayfs".to_string(), None);
        assert!(keys(&s).is_empty());
        assert!(check(&snapshot(), &Settings::default()).is_empty());
        assert_eq!(
            judge(&node(), "overlayfs", "gone", &Settings::default()),
            Err(Held::Gone)
        );
        assert!(kept(&node(), "sha256:layer").contains("committed"));
    }
}
