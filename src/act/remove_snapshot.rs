//! Removing leaked snapshots, safely.
//!
//! Between the scan and the removal a container may be created on the
//! snapshot, a client may put it under a lease, or containerd's GC may
//! remove it. So, right before acting: re-gather containerd's snapshots,
//! leases and records, re-judge each target on that fresh snapshot with the
//! check's own pure judgement ([`leaked_snapshot::judge`]), and only then
//! call `Snapshots.Remove`. Whatever containerd did not answer the second
//! time is a refusal: its silence proves nothing is released.

use std::path::PathBuf;

use crate::act::walk::{walk, Act};
use crate::act::Verdict;
use crate::checks::leaked_snapshot::{self, Held};
use crate::checks::Settings;
use crate::model::{Cleanup, CleanupAction, CleanupOutcome, Snapshot};

/// The (snapshotter, key) of each leaked snapshot of `snapshot`.
pub fn targets(snapshot: &Snapshot, settings: &Settings) -> Vec<(String, String)> {
    leaked_snapshot::check(snapshot, settings)
        .into_iter()
        .filter_map(|f| {
            let snapshotter = f.evidence["snapshotter"].as_str()?.to_string();
            Some((snapshotter, f.id))
        })
        .collect()
}

/// Whether `snapshotter`/`key` may be removed now, judged on `fresh`.
pub fn verify(fresh: &Snapshot, snapshotter: &str, key: &str, settings: &Settings) -> Verdict {
    match leaked_snapshot::judge(fresh, snapshotter, key, settings) {
        Ok(_) => Verdict::Go,
        Err(Held::Gone) => Verdict::Gone("containerd no longer lists it".to_string()),
        Err(Held::Kept(why)) => Verdict::Refuse(format!("no longer leaked: {why}")),
        Err(Held::Unknown(why)) => Verdict::Refuse(format!("{why}, so nothing is confirmed")),
    }
}

/// Removes (or, without `act`, plans) the leaked snapshots of `before`,
/// each re-verified on the snapshot `regather` takes; `remove` calls
/// containerd's `Snapshots.Remove` for one (snapshotter, key).
pub fn run(
    before: &Snapshot,
    settings: &Settings,
    act: bool,
    regather: impl FnMut() -> Snapshot,
    remove: impl FnMut(&str, &str) -> Result<(), String>,
) -> Vec<Cleanup> {
    let targets = targets(before, settings);
    walk(
        before,
        targets,
        act,
        &mut Remove { settings, remove },
        regather,
    )
}

struct Remove<'a, F> {
    settings: &'a Settings,
    remove: F,
}

impl<F: FnMut(&str, &str) -> Result<(), String>> Act for Remove<'_, F> {
    /// (snapshotter, key)
    type Target = (String, String);
    type Outcome = CleanupOutcome;
    type Row = Cleanup;

    fn verdict(&self, fresh: &Snapshot, (snapshotter, key): &Self::Target) -> Verdict {
        verify(fresh, snapshotter, key, self.settings)
    }

    fn would(&self, _: &Self::Target) -> (CleanupOutcome, String) {
        let how = "run with --remove --yes to remove it";
        (CleanupOutcome::WouldRemove, how.to_string())
    }

    fn act(&mut self, (snapshotter, key): &Self::Target) -> (CleanupOutcome, String) {
        match (self.remove)(snapshotter, key) {
            Ok(()) => (CleanupOutcome::Removed, "removed".to_string()),
            // Removed meanwhile (GC, another run).
            Err(err) if err.starts_with("NotFound") => (CleanupOutcome::AlreadyGone, err),
            Err(err) => (CleanupOutcome::Failed, format!("Snapshots.Remove: {err}")),
        }
    }

    fn record(
        &self,
        (snapshotter, key): Self::Target,
        outcome: CleanupOutcome,
        detail: String,
        _: &Snapshot,
    ) -> Cleanup {
        Cleanup {
            action: CleanupAction::RemoveSnapshot,
            path: PathBuf::from(format!("{snapshotter}/{key}")),
            id: key,
            outcome,
            detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{
        ContainerSnapshot, Lease, LeaseResource, SnapshotInfo, SnapshotKind, SnapshotterView,
    };
    use std::collections::BTreeMap;

    fn leaked() -> Snapshot {
        let mut s = snapshot();
        s.snapshotter = Some(SnapshotterView {
            namespace: "k8s.io".to_string(),
            snapshots: BTreeMap::from([(
                "overlayfs".to_string(),
                Some(vec![SnapshotInfo {
                    key: "lost".to_string(),
                    parent: "sha256:l".to_string(),
                    kind: SnapshotKind::Active,
                    created_at: NOW - 3600 * SEC,
                    updated_at: NOW - 3600 * SEC,
                    labels: BTreeMap::new(),
                }]),
            )]),
            leases: Some(Vec::new()),
            containers: Some(Vec::new()),
            ..SnapshotterView::default()
        });
        of_proven_daemon(s)
    }

    fn view(s: &mut Snapshot) -> &mut SnapshotterView {
        s.snapshotter.as_mut().unwrap()
    }

    fn outcomes(before: &Snapshot, fresh: Snapshot, act: bool) -> (Vec<Cleanup>, Vec<String>) {
        let mut removed = Vec::new();
        let done = run(
            before,
            &Settings::default(),
            act,
            || fresh.clone(),
            |s, k| {
                removed.push(format!("{s}/{k}"));
                Ok(())
            },
        );
        (done, removed)
    }

    #[test]
    fn a_dry_run_plans_and_yes_removes_what_is_still_leaked() {
        let s = leaked();
        let (done, removed) = outcomes(&s, s.clone(), false);
        assert_eq!(done[0].outcome, CleanupOutcome::WouldRemove);
        assert!(removed.is_empty());
        let (done, removed) = outcomes(&s, s.clone(), true);
        assert_eq!(done[0].outcome, CleanupOutcome::Removed);
        assert_eq!(done[0].path, PathBuf::from("overlayfs/lost"));
        assert_eq!(removed, ["overlayfs/lost"]);
    }

    #[test]
    fn a_snapshot_used_held_gone_or_unanswered_since_the_scan_is_not_removed() {
        let before = leaked();

        let mut used = before.clone();
        view(&mut used).containers = Some(vec![ContainerSnapshot {
            id: "c1".to_string(),
            snapshotter: "overlayfs".to_string(),
            snapshot_key: "lost".to_string(),
            labels: BTreeMap::new(),
        }]);
        let mut held = before.clone();
        view(&mut held).leases = Some(vec![Lease {
            id: "l1".to_string(),
            labels: BTreeMap::new(),
            resources: Some(vec![LeaseResource {
                r#type: "snapshots/overlayfs".to_string(),
                id: "lost".to_string(),
            }]),
        }]);
        let mut gone = before.clone();
        view(&mut gone)
            .snapshots
            .insert("overlayfs".to_string(), Some(Vec::new()));
        let mut silent = before.clone();
        view(&mut silent).leases = None;
        let mut unasked = before.clone();
        unasked.snapshotter = None;

        for (fresh, outcome, says) in [
            (used, CleanupOutcome::Refused, "container c1"),
            (held, CleanupOutcome::Refused, "lease l1"),
            (gone, CleanupOutcome::AlreadyGone, "no longer lists"),
            (silent, CleanupOutcome::Refused, "leases"),
            (unasked, CleanupOutcome::Refused, "snapshots"),
        ] {
            let (done, removed) = outcomes(&before, fresh, true);
            assert_eq!(done[0].outcome, outcome, "{}", done[0].detail);
            assert!(done[0].detail.contains(says), "{}", done[0].detail);
            assert!(removed.is_empty());
        }
    }

    #[test]
    fn a_failed_or_raced_removal_is_told_apart() {
        let s = leaked();
        let run_with = |answer: &str| {
            let answer = answer.to_string();
            run(
                &s,
                &Settings::default(),
                true,
                || s.clone(),
                move |_, _| Err(answer.clone()),
            )
        };
        assert_eq!(
            run_with("NotFound: gone")[0].outcome,
            CleanupOutcome::AlreadyGone
        );
        let failed = run_with("FailedPrecondition: has children");
        assert_eq!(failed[0].outcome, CleanupOutcome::Failed);
        assert!(failed[0].detail.contains("has children"));
    }
}
