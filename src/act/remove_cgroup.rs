//! Removing leaked pod cgroups, when nothing runs in them.
//!
//! Between the scan and the removal kubelet may start the pod again (a
//! sandbox of that uid), or a process may be moved into the cgroup. So,
//! right before acting: re-gather, re-judge each cgroup on that fresh
//! snapshot with the check's own judgement ([`leaked_pod_cgroup::leaked`]),
//! refuse one with a process in it, and only then remove it, container
//! cgroups first (`rmdir`, the only way a cgroup is removed). The kernel
//! refuses to remove a cgroup with a process in it (EBUSY), so a process
//! that arrives after the verdict stops the removal there.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::act::walk::{walk, Act};
use crate::act::Verdict;
use crate::checks::leaked_pod_cgroup;
use crate::checks::Settings;
use crate::model::{Cleanup, CleanupAction, CleanupOutcome, Snapshot};

/// One leaked pod cgroup: its uid and its directory in the cgroup
/// filesystem (v1: in the pids hierarchy, where it was judged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub uid: String,
    pub path: PathBuf,
    /// cgroup v1 makes a pod's cgroup in every hierarchy: the same place
    /// below each of the others, removed with it.
    pub in_other_hierarchies: Vec<PathBuf>,
}

/// Every leaked pod cgroup of `snapshot`.
pub fn targets(snapshot: &Snapshot, settings: &Settings) -> Vec<Target> {
    let Some(view) = &snapshot.pod_cgroups else {
        return Vec::new();
    };
    leaked_pod_cgroup::leaked(snapshot, settings)
        .into_iter()
        .map(|cgroup| Target {
            uid: cgroup.uid.clone(),
            path: cgroup.path.clone(),
            in_other_hierarchies: match view.version {
                1 => other_hierarchies(&view.hierarchy, &cgroup.path),
                _ => Vec::new(),
            },
        })
        .collect()
}

/// `cgroup`'s place (below `hierarchy`) in each other v1 hierarchy beside
/// it that has it. A symlink among them (`cpu` → `cpu,cpuacct`) is the
/// same hierarchy again, skipped.
fn other_hierarchies(hierarchy: &Path, cgroup: &Path) -> Vec<PathBuf> {
    let (Some(cgroup_fs), Ok(relative)) = (hierarchy.parent(), cgroup.strip_prefix(hierarchy))
    else {
        return Vec::new();
    };
    let Ok(entries) = fs::read_dir(cgroup_fs) else {
        return Vec::new();
    };
    let mut places: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path().join(relative))
        .filter(|place| place != cgroup && place.is_dir())
        .collect();
    places.sort();
    places
}

/// Whether `target` may be removed now, judged on `fresh`.
pub fn verify(fresh: &Snapshot, target: &Target, settings: &Settings) -> Verdict {
    let still = leaked_pod_cgroup::leaked(fresh, settings)
        .into_iter()
        .find(|cgroup| cgroup.path == target.path);
    match still {
        Some(cgroup) => match cgroup.procs {
            Some(0) => Verdict::Go,
            Some(procs) => Verdict::Refuse(format!(
                "{procs} process(es) run in it: they outlived their pod, and are not nodectl's to end"
            )),
            None => Verdict::Refuse("its processes could not be counted".to_string()),
        },
        None => {
            let listed = fresh
                .pod_cgroups
                .iter()
                .flat_map(|view| &view.pod_cgroups)
                .any(|cgroup| cgroup.path == target.path);
            if !listed {
                return Verdict::Gone("the cgroup no longer exists".to_string());
            }
            let answered = fresh
                .cri
                .as_ref()
                .is_some_and(|cri| cri.sandboxes.is_some());
            if !answered {
                return Verdict::Refuse(
                    "CRI's sandbox list did not answer, so nothing is confirmed".to_string(),
                );
            }
            Verdict::Refuse("no longer leaked: a sandbox of its pod is listed again".to_string())
        }
    }
}

/// Removes (or, without `act`, plans) the leaked pod cgroups of `before`
/// with no process in them, each re-verified on the snapshot `regather`
/// takes.
pub fn run(
    before: &Snapshot,
    settings: &Settings,
    act: bool,
    regather: impl FnMut() -> Snapshot,
) -> Vec<Cleanup> {
    let targets = targets(before, settings);
    walk(before, targets, act, &mut Remove { settings }, regather)
}

struct Remove<'a> {
    settings: &'a Settings,
}

impl Act for Remove<'_> {
    type Target = Target;
    type Outcome = CleanupOutcome;
    type Row = Cleanup;

    fn verdict(&self, fresh: &Snapshot, target: &Target) -> Verdict {
        verify(fresh, target, self.settings)
    }

    fn would(&self, _: &Target) -> (CleanupOutcome, String) {
        let how = "run with --remove --yes to remove it, container cgroups first";
        (CleanupOutcome::WouldRemove, how.to_string())
    }

    fn act(&mut self, target: &Target) -> (CleanupOutcome, String) {
        // The judged hierarchy first: the kernel refuses it while a
        // process is in it, and then nothing else is touched.
        let removed = remove_tree(&target.path).and_then(|()| {
            target
                .in_other_hierarchies
                .iter()
                .try_for_each(|place| match remove_tree(place) {
                    Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
                    other => other,
                })
        });
        match removed {
            Ok(()) => (CleanupOutcome::Removed, "removed".to_string()),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                (CleanupOutcome::AlreadyGone, "removed meanwhile".to_string())
            }
            Err(err) => (
                CleanupOutcome::Failed,
                format!("rmdir {}: {err}", target.path.display()),
            ),
        }
    }

    fn record(
        &self,
        target: Target,
        outcome: CleanupOutcome,
        detail: String,
        _: &Snapshot,
    ) -> Cleanup {
        Cleanup {
            action: CleanupAction::RemoveCgroup,
            id: target.uid,
            path: target.path,
            outcome,
            detail,
        }
    }
}

/// `rmdir` of `cgroup` and the cgroups below it, deepest first. A cgroup
/// directory holds only the kernel's files, which go with it; anything
/// that is not a directory is never followed.
fn remove_tree(cgroup: &Path) -> io::Result<()> {
    for entry in fs::read_dir(cgroup)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            remove_tree(&entry.path())?;
        }
    }
    fs::remove_dir(cgroup)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{CgroupView, CriItem, CriView, Located, Origin, PodCgroup};

    const HOUR: i64 = 3600 * SEC;

    fn node(cgroup_dir: &Path, procs: Option<usize>, listed: &[&str]) -> Snapshot {
        let mut s = snapshot();
        s.pod_cgroups = Some(CgroupView {
            cgroup_root: Located {
                path: PathBuf::from("/"),
                origin: Origin::Default,
            },
            version: 2,
            hierarchy: PathBuf::from("/sys/fs/cgroup"),
            pod_cgroups: vec![PodCgroup {
                uid: "gone".to_string(),
                path: cgroup_dir.to_path_buf(),
                driver: "cgroupfs".to_string(),
                qos: "burstable".to_string(),
                created_at: NOW - HOUR,
                procs,
            }],
        });
        s.cri = Some(CriView {
            sandboxes: Some(
                listed
                    .iter()
                    .map(|uid| CriItem {
                        uid: Some(uid.to_string()),
                        ..cri_sandbox(&id('a'), "shop", "cart")
                    })
                    .collect(),
            ),
            ..CriView::default()
        });
        of_proven_daemon(s)
    }

    #[test]
    fn a_dry_run_plans_and_yes_removes_the_tree_deepest_first() {
        let dir = tempfile::tempdir().unwrap();
        let pod = dir.path().join("podgone");
        fs::create_dir_all(pod.join("container/inner")).unwrap();
        let s = node(&pod, Some(0), &[]);
        let done = run(&s, &Settings::default(), false, || s.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::WouldRemove);
        assert!(pod.exists());
        let done = run(&s, &Settings::default(), true, || s.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::Removed, "{done:?}");
        assert_eq!(done[0].action, CleanupAction::RemoveCgroup);
        assert!(!pod.exists());
    }

    #[test]
    fn on_v1_the_same_cgroup_goes_from_every_hierarchy() {
        let dir = tempfile::tempdir().unwrap();
        let pods = |hierarchy: &str| {
            dir.path()
                .join(hierarchy)
                .join("kubepods/burstable/podgone")
        };
        for hierarchy in ["pids", "memory", "cpu,cpuacct"] {
            fs::create_dir_all(pods(hierarchy).join("container")).unwrap();
        }
        std::os::unix::fs::symlink(dir.path().join("cpu,cpuacct"), dir.path().join("cpu")).unwrap();
        fs::create_dir_all(dir.path().join("freezer")).unwrap();
        let mut s = node(&pods("pids"), Some(0), &[]);
        let view = s.pod_cgroups.as_mut().unwrap();
        view.version = 1;
        view.hierarchy = dir.path().join("pids");
        let done = run(&s, &Settings::default(), true, || s.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::Removed, "{done:?}");
        for hierarchy in ["pids", "memory", "cpu,cpuacct"] {
            assert!(!pods(hierarchy).exists(), "{hierarchy}");
        }
        assert!(dir.path().join("freezer").exists());
    }

    #[test]
    fn a_cgroup_with_processes_live_again_gone_or_unconfirmed_is_not_removed() {
        let dir = tempfile::tempdir().unwrap();
        let pod = dir.path().join("podgone");
        fs::create_dir_all(&pod).unwrap();
        let before = node(&pod, Some(0), &[]);
        let mut unanswered = node(&pod, Some(0), &[]);
        unanswered.cri.as_mut().unwrap().sandboxes = None;
        let mut gone = node(&pod, Some(0), &[]);
        gone.pod_cgroups.as_mut().unwrap().pod_cgroups.clear();
        for (fresh, outcome, says) in [
            (
                node(&pod, Some(2), &[]),
                CleanupOutcome::Refused,
                "2 process",
            ),
            (
                node(&pod, Some(0), &["gone"]),
                CleanupOutcome::Refused,
                "listed again",
            ),
            (unanswered, CleanupOutcome::Refused, "did not answer"),
            (gone, CleanupOutcome::AlreadyGone, "no longer exists"),
        ] {
            let done = run(&before, &Settings::default(), true, || fresh.clone());
            assert_eq!(done[0].outcome, outcome, "{done:?}");
            assert!(done[0].detail.contains(says), "{done:?}");
            assert!(pod.exists());
        }
    }
}
