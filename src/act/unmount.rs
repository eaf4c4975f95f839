//! Detaching leaked mounts, safely.
//!
//! Between the scan and the unmount a container may come back under the same
//! id (a task, a record, a shim), or the mount may go away, or another be
//! stacked on the same point. So, right before acting: re-gather the node and
//! re-judge each mount point on the fresh snapshot ([`verify`], pure), then
//! reach the mount point without any symlink (`openat2` with
//! `RESOLVE_NO_SYMLINKS`), re-read the mount table to see it is a mount point
//! now, unmount with `UMOUNT_NOFOLLOW` (lazily, `MNT_DETACH`, only when asked),
//! and re-read the table once more to tell what happened.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag, AT_FDCWD};
use nix::mount::{umount2, MntFlags};

use crate::act::walk::{walk, Act};
use crate::act::{still_dead, IdKind, Verdict};
use crate::checks::leaked_mount;
use crate::model::{Cleanup, CleanupAction, CleanupOutcome, Mount, Snapshot};
use crate::sources::mountinfo;

/// How to unmount.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Unmount (`--yes`); otherwise only say what would be unmounted.
    pub act: bool,
    /// `MNT_DETACH` (`--lazy`): detach even while something uses it.
    pub lazy: bool,
}

/// The leaked mounts of `snapshot`, one per mount point (stacked mounts
/// share a point), with the id each finding names.
pub fn targets(snapshot: &Snapshot) -> Vec<(&Mount, String)> {
    let mut targets: Vec<(&Mount, String)> = snapshot
        .mounts
        .iter()
        .filter_map(|m| Some((m, leaked_mount::leaked_mount(snapshot, m)?.id)))
        .collect();
    targets.sort_by(|(a, _), (b, _)| a.mount_point.cmp(&b.mount_point));
    targets.dedup_by(|(a, _), (b, _)| a.mount_point == b.mount_point);
    targets
}

/// Whether `target` (a mount of the first snapshot) may be unmounted now,
/// judged on `fresh`: its point is exactly a mount point in the fresh mount
/// table, still a leaked mount, and nothing lives under its owner's id
/// (see [`still_dead`]).
pub fn verify(fresh: &Snapshot, target: &Mount) -> Verdict {
    let Some((namespace, id, what)) = leaked_mount::mount_owner(fresh, target) else {
        return Verdict::Refuse(
            "not a mount containerd makes (a task rootfs, sandbox shm or image volume of an \
             id containerd could have made)"
                .to_string(),
        );
    };
    // A shm or an image volume is named by its pod sandbox's id.
    let kind = if what == leaked_mount::TASK_ROOTFS {
        IdKind::Task
    } else {
        IdKind::Sandbox
    };
    if let Err(why) = still_dead(fresh, namespace, id, kind) {
        return Verdict::Refuse(why);
    }
    let point = &target.mount_point;
    let Some(mount) = fresh.mounts.iter().find(|m| m.mount_point == *point) else {
        return Verdict::Gone("no longer mounted".to_string());
    };
    if leaked_mount::leaked_mount(fresh, mount).is_none() {
        return Verdict::Refuse(
            "no longer leaked: containerd has a record of it, or a shim serves it".to_string(),
        );
    }
    Verdict::Go
}

/// Unmounts (or, without `options.act`, plans) the leaked mounts of
/// `before`, each re-verified on the snapshot `regather` takes. `allowed`
/// is why no unmount may happen at all (another mount namespace), if any.
/// `own_mountinfo` is this process's mount table, re-read around each
/// unmount.
pub fn run(
    before: &Snapshot,
    options: Options,
    allowed: Result<(), String>,
    own_mountinfo: &Path,
    regather: impl FnMut() -> Snapshot,
) -> Vec<Cleanup> {
    let mut unmount = Unmount {
        lazy: options.lazy,
        allowed,
        own_mountinfo,
    };
    walk(before, targets(before), options.act, &mut unmount, regather)
}

struct Unmount<'a> {
    lazy: bool,
    allowed: Result<(), String>,
    own_mountinfo: &'a Path,
}

impl<'a> Act for Unmount<'a> {
    type Target = (&'a Mount, String);
    type Outcome = CleanupOutcome;
    type Row = Cleanup;

    fn verdict(&self, fresh: &Snapshot, (target, _): &Self::Target) -> Verdict {
        match (verify(fresh, target), &self.allowed) {
            (Verdict::Go, Err(why)) => Verdict::Refuse(why.clone()),
            (verdict, _) => verdict,
        }
    }

    fn would(&self, _: &Self::Target) -> (CleanupOutcome, String) {
        let how = "run with --unmount --yes to unmount it";
        (CleanupOutcome::WouldUnmount, how.to_string())
    }

    fn act(&mut self, (target, _): &Self::Target) -> (CleanupOutcome, String) {
        detach(&target.mount_point, self.lazy, self.own_mountinfo)
    }

    fn record(
        &self,
        (target, id): Self::Target,
        outcome: CleanupOutcome,
        detail: String,
        _: &Snapshot,
    ) -> Cleanup {
        Cleanup {
            action: CleanupAction::Unmount,
            id,
            path: target.mount_point.clone(),
            outcome,
            detail,
        }
    }
}

/// How many mounts sit exactly at `point` in the mount table now.
fn mounted_at(mountinfo: &Path, point: &Path) -> Result<usize, String> {
    let mut gaps = Vec::new();
    let mounts = mountinfo::read_as_spelled(mountinfo, &[point], &mut gaps);
    if let Some(gap) = gaps.first() {
        return Err(format!("re-reading the mount table: {}", gap.error));
    }
    Ok(mounts.iter().filter(|m| m.mount_point == point).count())
}

fn detach(point: &Path, lazy: bool, mountinfo: &Path) -> (CleanupOutcome, String) {
    // Every component a real directory: a symlink put on the way since the
    // scan would send the unmount elsewhere. The fd is closed at once: an
    // open fd on the mount would keep it busy.
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    if let Err(err) = openat2(AT_FDCWD, point, how) {
        return (
            CleanupOutcome::Refused,
            format!("not reached without following a symlink, or not a directory: {err}"),
        );
    }
    let stacked = match mounted_at(mountinfo, point) {
        Ok(0) => return (CleanupOutcome::AlreadyGone, "no longer mounted".to_string()),
        Ok(n) => n,
        Err(why) => return (CleanupOutcome::Refused, why),
    };
    let mut flags = MntFlags::UMOUNT_NOFOLLOW;
    if lazy {
        flags |= MntFlags::MNT_DETACH;
    }
    if let Err(err) = umount2(point.as_os_str().as_bytes(), flags) {
        // EINVAL: not a mount point (any more); another run, or containerd,
        // may have unmounted it since the table was read.
        if err == nix::Error::EINVAL && mounted_at(mountinfo, point) == Ok(0) {
            return (
                CleanupOutcome::AlreadyGone,
                "unmounted by someone else meanwhile".to_string(),
            );
        }
        let detail = match err {
            nix::Error::EBUSY => format!(
                "busy: something still uses it (`fuser -vm {}`); --lazy detaches it anyway",
                point.display()
            ),
            other => format!("umount2: {other}"),
        };
        return (CleanupOutcome::Failed, detail);
    }
    match mounted_at(mountinfo, point) {
        Ok(0) if lazy => (CleanupOutcome::Unmounted, "detached (lazily)".to_string()),
        Ok(0) => (CleanupOutcome::Unmounted, "unmounted".to_string()),
        Ok(left) => (
            CleanupOutcome::Failed,
            format!(
                "unmounted one of {stacked} mounts stacked here; {left} still mounted (run again)"
            ),
        ),
        Err(why) => (CleanupOutcome::Failed, format!("unmounted, but {why}")),
    }
}

/// Why unmounting from here would not detach the mounts that were read, if
/// it would not: they were read from a made-up procfs (`--proc-root`, for
/// tests and benchmarks), the table read is neither this process's nor
/// containerd's own (`--mountinfo`), or this process lives in another mount
/// namespace than containerd (a pod without the host's mount namespace, a
/// shell split off with `unshare -m`): an unmount acts in the caller's
/// namespace, and the leaked mounts are in containerd's. nodectl does not
/// join containerd's namespace itself; it refuses with the command line
/// that runs it there (`nsenter -t <pid> -m`).
pub fn allowed(
    proc_root: &Path,
    mountinfo_read: &Path,
    containerd_pid: Option<i32>,
) -> Result<(), String> {
    if proc_root != Path::new("/proc") {
        return Err(format!(
            "--proc-root {} is not this node's procfs: nothing read from it is unmounted",
            proc_root.display()
        ));
    }
    let own = proc_root.join("self/mountinfo");
    let daemons = containerd_pid.map(|pid| proc_root.join(pid.to_string()).join("mountinfo"));
    if mountinfo_read != own && Some(mountinfo_read) != daemons.as_deref() {
        return Err(format!(
            "the mount table read ({}) is not this process's ({}): an unmount here would not \
             detach what it lists",
            mountinfo_read.display(),
            own.display()
        ));
    }
    let ns = |pid: &str| std::fs::metadata(proc_root.join(pid).join("ns/mnt")).ok();
    if let Some(pid) = containerd_pid {
        use std::os::unix::fs::MetadataExt;
        if let (Some(ours), Some(theirs)) = (ns("self"), ns(&pid.to_string())) {
            if (ours.dev(), ours.ino()) != (theirs.dev(), theirs.ino()) {
                return Err(format!(
                    "nodectl runs in another mount namespace than containerd (pid {pid}): run it \
                     in the host's (e.g. `nsenter -t {pid} -m -- nodectl ...`)"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{Gap, Source, TaskStatus, TaskView};
    use std::path::PathBuf;

    fn mount(point: &str) -> Mount {
        Mount {
            mount_point: PathBuf::from(point),
            fs_type: "overlay".to_string(),
            ..Mount::default()
        }
    }

    fn rootfs(id: &str) -> String {
        format!("/run/containerd/io.containerd.runtime.v2.task/k8s.io/{id}/rootfs")
    }

    /// The rootfs of `a` and the shm of sandbox `s` left mounted; containerd
    /// answered and knows neither.
    /// The dry run on a node unchanged since `s`, its scan.
    fn plan_unchanged(s: &Snapshot) -> Vec<Cleanup> {
        run(
            s,
            Options::default(),
            Ok(()),
            Path::new("/nonexistent"),
            || s.clone(),
        )
    }

    fn leaked() -> Snapshot {
        let mut s = snapshot();
        s.mounts.push(mount(&rootfs(&id('a'))));
        s.mounts.push(mount(&format!(
            "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/{}/shm",
            id('s')
        )));
        with_records(&mut s, &[]);
        of_proven_daemon(s)
    }

    #[test]
    fn a_leaked_mount_unchanged_since_the_scan_may_go() {
        let s = leaked();
        assert_eq!(targets(&s).len(), 2);
        for (target, _) in targets(&s) {
            assert_eq!(verify(&s, target), Verdict::Go, "{target:?}");
        }
    }

    #[test]
    fn a_mount_whose_container_came_back_is_refused() {
        let before = leaked();
        let point = mount(&rootfs(&id('a')));
        // A record again.
        let mut fresh = before.clone();
        with_records(&mut fresh, &[id('a')]);
        assert!(matches!(verify(&fresh, &point), Verdict::Refuse(w) if w.contains("record")));
        // A shim started for the id (containerd not yet told).
        let mut fresh = before.clone();
        fresh.shims.push(shim(70, &id('a'), ADDRESS, &[]));
        assert!(matches!(verify(&fresh, &point), Verdict::Refuse(w) if w.contains("shim")));
        // The sandbox's shm, whose sandbox has a running task again.
        let shm = mount(&format!(
            "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/{}/shm",
            id('s')
        ));
        let mut fresh = before.clone();
        let ns = fresh
            .containerd
            .as_mut()
            .unwrap()
            .namespaces
            .get_mut("k8s.io");
        ns.unwrap().tasks = Some(vec![TaskView {
            id: id('s'),
            pid: 71,
            status: TaskStatus::Running,
            ..TaskView::default()
        }]);
        assert!(matches!(verify(&fresh, &shm), Verdict::Refuse(w) if w.contains("task")));
        // containerd does not answer the second time: nothing is confirmed.
        let mut fresh = before.clone();
        fresh.containerd = None;
        assert!(matches!(verify(&fresh, &point), Verdict::Refuse(w) if w.contains("did not")));
    }

    #[test]
    fn an_app_containers_rootfs_is_refused_while_its_pods_shim_lives() {
        let mut fresh = leaked();
        let point = mount(&rootfs(&id('a')));
        fresh
            .bundles
            .insert(id('a'), bundle(&id('a'), &id('p'), "app"));
        // Another pod's shim: not this container's.
        with_live_shim(&mut fresh, shim(70, &id('q'), ADDRESS, &[]));
        assert_eq!(verify(&fresh, &point), Verdict::Go);
        // The grouped shim of its pod, started with the sandbox's id (here
        // another containerd's, whose API nodectl did not ask).
        with_live_shim(
            &mut fresh,
            shim(71, &id('p'), "/run/b/containerd.sock", &[]),
        );
        let verdict = verify(&fresh, &point);
        assert!(
            matches!(&verdict, Verdict::Refuse(w) if w.contains("its pod's shim is alive (pid 71")),
            "{verdict:?}"
        );
    }

    #[test]
    fn a_pods_shm_and_image_volume_are_judged_by_the_pods_own_shim() {
        let mut fresh = leaked();
        let volume = mount(&format!(
            "/run/containerd/io.containerd.grpc.v1.cri/image-volumes/{}/{}",
            id('c'),
            id('9')
        ));
        fresh.mounts.push(volume.clone());
        // No bundle names sandbox `c` or `s`; a live shim of another pod
        // does not serve them (their ids are their pods').
        with_live_shim(&mut fresh, shim(70, &id('q'), ADDRESS, &[]));
        let shm = targets(&fresh)
            .into_iter()
            .map(|(target, _)| target.clone())
            .find(|m| m.mount_point.ends_with("shm"))
            .unwrap();
        assert_eq!(verify(&fresh, &volume), Verdict::Go);
        assert_eq!(verify(&fresh, &shm), Verdict::Go);
        with_live_shim(&mut fresh, shim(71, &id('c'), ADDRESS, &[]));
        let verdict = verify(&fresh, &volume);
        assert!(
            matches!(&verdict, Verdict::Refuse(w) if w.contains("shim for it is alive (pid 71")),
            "{verdict:?}"
        );
    }

    #[test]
    fn with_another_namespace_a_live_pods_shm_is_no_target_and_is_refused() {
        // `-n moby`: k8s.io's records know sandbox `s`, moby has none.
        let mut s = looked_at_in(&id('s'), "moby");
        let shm = mount(&format!(
            "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/{}/shm",
            id('s')
        ));
        s.mounts.push(shm.clone());
        assert!(targets(&s).is_empty());
        let verdict = verify(&s, &shm);
        assert!(
            matches!(&verdict, Verdict::Refuse(w) if w.contains("record")),
            "{verdict:?}"
        );
    }

    #[test]
    fn a_mount_found_through_another_spelling_of_state_is_unmounted_where_the_kernel_has_it() {
        // `--state /srv/link`, a symlink to the table's `/run/containerd`.
        let mut s = leaked();
        s.paths.state.path = PathBuf::from("/srv/link");
        for m in &mut s.mounts {
            let below = m.mount_point.strip_prefix("/run/containerd").unwrap();
            m.as_given = Some(Path::new("/srv/link").join(below));
        }
        let done = plan_unchanged(&s);
        let planned: Vec<_> = done.iter().map(|c| (c.outcome, c.path.clone())).collect();
        assert_eq!(
            planned,
            [
                PathBuf::from(format!(
                    "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/{}/shm",
                    id('s')
                )),
                PathBuf::from(rootfs(&id('a')))
            ]
            .map(|p| (CleanupOutcome::WouldUnmount, p))
        );
    }

    #[test]
    fn a_leaked_mount_whose_id_is_not_utf8_is_shown_but_never_unmounted() {
        use std::os::unix::ffi::OsStrExt;
        let mut s = leaked();
        let odd = Path::new("/run/containerd/io.containerd.runtime.v2.task/k8s.io")
            .join(std::ffi::OsStr::from_bytes(b"a\x80"))
            .join("rootfs");
        s.mounts = vec![Mount {
            mount_point: odd.clone(),
            ..mount("")
        }];
        let done = plan_unchanged(&s);
        assert_eq!(done.len(), 1, "{done:?}");
        assert_eq!((done[0].id.as_str(), &done[0].path), (r"a\x80", &odd));
        assert_eq!(done[0].outcome, CleanupOutcome::Refused);
        assert!(
            done[0].detail.contains("not a mount containerd makes"),
            "{done:?}"
        );
    }

    #[test]
    fn a_mount_gone_since_the_scan_is_already_gone_unless_the_table_was_unread() {
        let before = leaked();
        let point = mount(&rootfs(&id('a')));
        let mut fresh = before.clone();
        fresh.mounts.retain(|m| *m != point);
        assert!(matches!(verify(&fresh, &point), Verdict::Gone(_)));
        fresh.gaps.push(Gap::source(
            Source::Mountinfo,
            "/proc/self/mountinfo",
            "EIO",
        ));
        assert!(matches!(verify(&fresh, &point), Verdict::Refuse(_)));
    }

    #[test]
    fn without_a_proven_daemon_every_mount_is_refused_even_in_the_plan() {
        let mut before = leaked();
        before.paths.process = None;
        before
            .paths
            .unproven
            .push("no proven containerd serves /x.sock: it does not exist".to_string());
        let done = plan_unchanged(&before);
        assert_eq!(done.len(), 2);
        for cleanup in done {
            assert_eq!(cleanup.outcome, CleanupOutcome::Refused);
            assert!(
                cleanup
                    .detail
                    .contains("no proven containerd serves /x.sock"),
                "{}",
                cleanup.detail
            );
        }
    }

    #[test]
    fn the_dry_run_plans_what_verify_allows_and_touches_nothing() {
        let before = leaked();
        let done = plan_unchanged(&before);
        let outcomes: Vec<_> = done.iter().map(|c| c.outcome).collect();
        assert_eq!(outcomes, [CleanupOutcome::WouldUnmount; 2]);
        assert_eq!(done[0].id, id('s'), "sorted by mount point");
        // In another mount namespace, even the plan says it would refuse.
        let done = run(
            &before,
            Options::default(),
            Err("another mount namespace".to_string()),
            Path::new("/nonexistent"),
            || before.clone(),
        );
        assert!(done.iter().all(|c| c.outcome == CleanupOutcome::Refused));
    }

    #[test]
    fn only_this_process_s_or_containerd_s_own_mount_table_allows_an_unmount() {
        let proc_root = Path::new("/proc");
        assert_eq!(
            allowed(proc_root, Path::new("/proc/self/mountinfo"), None),
            Ok(())
        );
        let own = std::process::id() as i32;
        assert_eq!(
            allowed(proc_root, Path::new("/proc/self/mountinfo"), Some(own)),
            Ok(())
        );
        // containerd's own table (the default), in this very namespace.
        let daemons = PathBuf::from(format!("/proc/{own}/mountinfo"));
        assert_eq!(allowed(proc_root, &daemons, Some(own)), Ok(()));
        let err = allowed(proc_root, Path::new("/proc/1/mountinfo"), None).unwrap_err();
        assert!(err.contains("not this process's"), "{err}");
        let err = allowed(proc_root, Path::new("/proc/1/mountinfo"), Some(own)).unwrap_err();
        assert!(err.contains("not this process's"), "{err}");
        let fake = Path::new("/tmp/proc");
        let err = allowed(fake, &fake.join("self/mountinfo"), None).unwrap_err();
        assert!(err.contains("--proc-root"), "{err}");
    }

    #[test]
    fn detach_never_goes_through_a_symlink_and_reports_what_the_table_says() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: mounting needs root");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        std::fs::create_dir(&real).unwrap();
        nix::mount::mount(
            Some("tmpfs"),
            &real,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        )
        .unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let table = Path::new("/proc/self/mountinfo");
        let (via_link, _) = detach(&link, false, table);
        let (below_link, _) = detach(&link.join("."), false, table);
        let still = mounted_at(table, &real).unwrap();
        let (done, detail) = detach(&real, false, table);
        let left = mounted_at(table, &real).unwrap();
        if left > 0 {
            let _ = umount2(&real, MntFlags::MNT_DETACH);
        }
        assert_eq!(via_link, CleanupOutcome::Refused);
        assert_eq!(below_link, CleanupOutcome::Refused);
        assert_eq!(still, 1, "the mount behind the symlink is untouched");
        assert_eq!((done, left), (CleanupOutcome::Unmounted, 0), "{detail}");
        let (again, _) = detach(&real, false, table);
        assert_eq!(again, CleanupOutcome::AlreadyGone);
    }
}
