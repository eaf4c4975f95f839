//! Removing orphan bundle directories, safely.
//!
//! A bundle may get its container back between the scan and the removal (a
//! task, a record, a shim started for the id), or something may be mounted
//! below it; removing a directory tree with a container's rootfs mounted
//! inside would delete the container's files. So, right before acting:
//! re-gather the node and re-judge each bundle on the fresh snapshot
//! ([`verify`], pure: still orphaned, nothing alive for the id, nothing
//! mounted below it), then remove the tree from file descriptors: the parent
//! opened without following any symlink, each directory below opened with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV)`, so the
//! removal never follows a symlink and stops at the first mount point it
//! meets instead of descending into it.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{openat2, AtFlags, AT_FDCWD};
use nix::sys::stat::{fstatat, SFlag};

use crate::act::tree;
use crate::act::walk::{walk, Act};
use crate::act::{still_dead, IdKind, Verdict};
use crate::checks::orphan_bundle;
use crate::model::{Cleanup, CleanupAction, CleanupOutcome, Snapshot};

/// Directories nested deeper than this below a bundle are left alone: a
/// bundle holds a handful of files and an (empty, once unmounted) rootfs.
const MAX_DEPTH: usize = 16;

/// The orphan bundles of `snapshot`: (id, directory).
pub fn targets(snapshot: &Snapshot) -> Vec<(String, PathBuf)> {
    orphan_bundle::orphans(snapshot)
        .into_iter()
        .map(|b| (b.id.clone(), b.path.clone()))
        .collect()
}

/// Whether the bundle `id` at `dir` may be removed now, judged on `fresh`:
/// still there and still an orphan, nothing alive for the id, and nothing
/// mounted at or below it but the mount points in `unmounting` (those a dry
/// run would unmount first).
pub fn verify(fresh: &Snapshot, id: &str, dir: &Path, unmounting: &BTreeSet<PathBuf>) -> Verdict {
    if let Err(why) = still_dead(fresh, &fresh.namespace, id, IdKind::Task) {
        return Verdict::Refuse(why);
    }
    let Some(bundle) = fresh.bundles.get(id).filter(|b| b.path == dir) else {
        return Verdict::Gone("the directory is gone".to_string());
    };
    if orphan_bundle::orphan_bundle(fresh, bundle).is_none() {
        return Verdict::Refuse(
            "no longer orphaned: containerd has a record of it, or a shim serves it or its pod"
                .to_string(),
        );
    }
    if let Some(mount) = fresh
        .mounts
        .iter()
        .filter(|m| !unmounting.contains(&m.mount_point))
        .find(|m| m.path_as_given().starts_with(dir))
    {
        return Verdict::Refuse(format!(
            "still mounted below it ({}): unmount first (--unmount)",
            mount.mount_point.display()
        ));
    }
    Verdict::Go
}

/// Removes (or, without `act`, plans) the orphan bundles of `before`, each
/// re-verified on the snapshot `regather` takes; `unmounting` as in
/// [`verify`].
pub fn run(
    before: &Snapshot,
    act: bool,
    unmounting: &BTreeSet<PathBuf>,
    regather: impl FnMut() -> Snapshot,
) -> Vec<Cleanup> {
    walk(
        before,
        targets(before),
        act,
        &mut Remove(unmounting),
        regather,
    )
}

/// The removal, with the mount points a dry run would unmount first.
struct Remove<'a>(&'a BTreeSet<PathBuf>);

impl Act for Remove<'_> {
    type Target = (String, PathBuf);
    type Outcome = CleanupOutcome;
    type Row = Cleanup;

    fn verdict(&self, fresh: &Snapshot, (id, dir): &Self::Target) -> Verdict {
        verify(fresh, id, dir, self.0)
    }

    fn would(&self, (_, dir): &Self::Target) -> (CleanupOutcome, String) {
        let how = if self.0.iter().any(|m| m.starts_with(dir)) {
            "after the unmounts; run with --unmount --remove-bundles --yes"
        } else {
            "run with --remove-bundles --yes to remove it"
        };
        (CleanupOutcome::WouldRemove, how.to_string())
    }

    fn act(&mut self, (_, dir): &Self::Target) -> (CleanupOutcome, String) {
        match remove(dir) {
            Ok(()) => (CleanupOutcome::Removed, "removed".to_string()),
            Err((outcome, why)) => (outcome, why),
        }
    }

    fn record(
        &self,
        (id, dir): Self::Target,
        outcome: CleanupOutcome,
        detail: String,
        _: &Snapshot,
    ) -> Cleanup {
        Cleanup {
            action: CleanupAction::RemoveBundle,
            id,
            path: dir,
            outcome,
            detail,
        }
    }
}

/// Removes the directory `dir` and everything in it, never through a
/// symlink and never across a mount point.
pub fn remove(dir: &Path) -> Result<(), (CleanupOutcome, String)> {
    let refused = |why: String| (CleanupOutcome::Refused, why);
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Err(refused("not a directory below another".to_string()));
    };
    let name =
        CString::new(name.as_bytes()).map_err(|_| refused("a NUL in its name".to_string()))?;
    let how = tree::no_symlinks();
    let parent_fd = openat2(AT_FDCWD, parent, how).map_err(|e| {
        refused(format!(
            "its parent is not reached without following a symlink: {e}"
        ))
    })?;
    match fstatat(&parent_fd, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR => {}
        Ok(_) => return Err(refused("not a directory (a symlink?)".to_string())),
        Err(nix::Error::ENOENT) => {
            return Err((
                CleanupOutcome::AlreadyGone,
                "the directory is gone".to_string(),
            ))
        }
        Err(e) => return Err(refused(format!("lstat: {e}"))),
    }
    let removed = tree::remove(
        &parent_fd,
        &name,
        tree::Files::Unlink,
        MAX_DEPTH,
        "the bundle directory",
    );
    removed.map_err(|why| {
        (
            CleanupOutcome::Failed,
            format!("{why}; the rest is left as is"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{Mount, TaskStatus, TaskView};
    use std::fs;

    /// Bundle `a` (of sandbox `a`), orphaned: containerd answered, no record.
    fn orphaned() -> (Snapshot, PathBuf) {
        let mut s = snapshot();
        let b = bundle(&id('a'), &id('a'), "app");
        let dir = b.path.clone();
        s.bundles.insert(id('a'), b);
        with_records(&mut s, &[]);
        (s, dir)
    }

    #[test]
    fn an_orphan_unchanged_since_the_scan_may_go() {
        let (s, dir) = orphaned();
        assert_eq!(targets(&s), vec![(id('a'), dir.clone())]);
        assert_eq!(verify(&s, &id('a'), &dir, &BTreeSet::new()), Verdict::Go);
    }

    #[test]
    fn a_bundle_whose_task_or_shim_came_back_is_refused() {
        let (before, dir) = orphaned();
        let mut fresh = before.clone();
        let ns = fresh
            .containerd
            .as_mut()
            .unwrap()
            .namespaces
            .get_mut("k8s.io");
        ns.unwrap().tasks = Some(vec![TaskView {
            id: id('a'),
            pid: 71,
            status: TaskStatus::Created,
            ..TaskView::default()
        }]);
        let verdict = verify(&fresh, &id('a'), &dir, &BTreeSet::new());
        assert!(
            matches!(&verdict, Verdict::Refuse(w) if w.contains("task")),
            "{verdict:?}"
        );

        let mut fresh = before.clone();
        fresh.shims.push(shim(70, &id('a'), ADDRESS, &[]));
        let verdict = verify(&fresh, &id('a'), &dir, &BTreeSet::new());
        assert!(
            matches!(&verdict, Verdict::Refuse(w) if w.contains("shim")),
            "{verdict:?}"
        );

        // The pod's shim serves it again (runc v2 groups a pod in one shim).
        let mut fresh = before.clone();
        fresh
            .bundles
            .get_mut(&id('a'))
            .unwrap()
            .annotations
            .insert("io.kubernetes.cri.sandbox-id".to_string(), id('s'));
        fresh.shims.push(shim(72, &id('s'), ADDRESS, &[]));
        let verdict = verify(&fresh, &id('a'), &dir, &BTreeSet::new());
        assert!(
            matches!(&verdict, Verdict::Refuse(w) if w.contains("its pod's shim is alive")),
            "{verdict:?}"
        );
    }

    #[test]
    fn a_bundle_with_a_mount_below_is_refused_unless_the_plan_unmounts_it() {
        let (mut fresh, dir) = orphaned();
        let rootfs = dir.join("rootfs");
        fresh.mounts.push(Mount {
            mount_point: rootfs.clone(),
            ..Mount::default()
        });
        let verdict = verify(&fresh, &id('a'), &dir, &BTreeSet::new());
        assert!(
            matches!(&verdict, Verdict::Refuse(w) if w.contains("mounted below")),
            "{verdict:?}"
        );
        // The same mount as the table spells it through another spelling
        // of the state directory (`--state` a symlink or a bind mount).
        let mut elsewhere = fresh.clone();
        elsewhere.mounts[0] = Mount {
            mount_point: PathBuf::from("/elsewhere/rootfs"),
            as_given: Some(rootfs.clone()),
            ..Mount::default()
        };
        let verdict = verify(&elsewhere, &id('a'), &dir, &BTreeSet::new());
        assert!(
            matches!(&verdict, Verdict::Refuse(w) if w.contains("/elsewhere/rootfs")),
            "{verdict:?}"
        );
        let unmounting = [rootfs].into_iter().collect();
        assert_eq!(verify(&fresh, &id('a'), &dir, &unmounting), Verdict::Go);
        // Gone since the scan.
        fresh.bundles.clear();
        assert!(matches!(
            verify(&fresh, &id('a'), &dir, &unmounting),
            Verdict::Gone(_)
        ));
    }

    #[test]
    fn removal_never_follows_a_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("keep"), "x").unwrap();
        let bundle = tmp.path().join("bundle");
        fs::create_dir_all(bundle.join("rootfs/deep")).unwrap();
        fs::write(bundle.join("config.json"), "{}").unwrap();
        fs::write(bundle.join("rootfs/deep/file"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, bundle.join("work")).unwrap();
        nix::unistd::mkfifo(&bundle.join("log"), nix::sys::stat::Mode::S_IRUSR).unwrap();

        // The bundle itself a symlink: refused, the target untouched.
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&bundle, &link).unwrap();
        let err = remove(&link).unwrap_err();
        assert_eq!(err.0, CleanupOutcome::Refused, "{}", err.1);
        // A symlink on the way to it: refused.
        let err = remove(&link.join("rootfs")).unwrap_err();
        assert_eq!(err.0, CleanupOutcome::Refused, "{}", err.1);
        assert!(bundle.join("rootfs/deep/file").exists());

        remove(&bundle).unwrap();
        assert!(!bundle.exists());
        assert!(outside.join("keep").exists(), "the link's target is kept");
        assert_eq!(remove(&bundle).unwrap_err().0, CleanupOutcome::AlreadyGone);
    }

    #[test]
    fn removal_stops_at_a_mount_point() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: mounting needs root");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let bundle = tmp.path().join("bundle");
        let rootfs = bundle.join("rootfs");
        fs::create_dir_all(&rootfs).unwrap();
        fs::write(bundle.join("config.json"), "{}").unwrap();
        nix::mount::mount(
            Some("tmpfs"),
            &rootfs,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        )
        .unwrap();
        fs::write(rootfs.join("precious"), "x").unwrap();
        let err = remove(&bundle).unwrap_err();
        let still = rootfs.join("precious").exists();
        nix::mount::umount2(&rootfs, nix::mount::MntFlags::MNT_DETACH).unwrap();
        assert_eq!(err.0, CleanupOutcome::Failed, "{}", err.1);
        assert!(err.1.contains("mount point"), "{}", err.1);
        assert!(still, "nothing below the mount point was removed");
    }
}
