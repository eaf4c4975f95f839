//! Releasing leaked pod network namespaces, as CRI's teardown does:
//! unmount the namespace's bind mount, then remove its file.
//!
//! Between the scan and the act a sandbox record may name it again, a
//! process may enter it (`ip netns exec`, `nsenter`) or open it, or an
//! interface may be moved into it. So, right before acting: re-gather
//! (every thread and descriptor looked at again, its interfaces seen
//! again), re-judge each namespace on that fresh snapshot with the check's
//! own judgement ([`leaked_netns::leaked`]: CRI made it, nothing names or
//! holds it, no interface but its own), `stat` the mount point once more
//! and act only if it is still the same namespace (nsfs device and
//! inode). The unmount never follows a symlink (`UMOUNT_NOFOLLOW`), and the
//! file is removed relative to the netns directory opened without following
//! one. A process in the namespace keeps it alive after the unmount: only
//! the name goes, as with CRI's own teardown.

use std::collections::HashSet;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::mount::{umount2, MntFlags};
use nix::unistd::{unlinkat, UnlinkatFlags};

use crate::act::walk::{walk, Act, PerLook};
use crate::act::Verdict;
use crate::checks::leaked_netns;
use crate::checks::Settings;
use crate::model::netns::{foreign_interfaces, is_cri_made};
use crate::model::{
    Cleanup, CleanupAction, CleanupOutcome, CniView, NetnsMount, Snapshot, CRI_NAMESPACE,
};
use crate::read::bounded::open_at;

/// One leaked namespace: its mount point and its identity (nsfs device
/// and inode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub path: PathBuf,
    pub device: u64,
    pub inode: u64,
}

impl Target {
    fn identity(&self) -> (u64, u64) {
        (self.device, self.inode)
    }
}

/// Every leaked namespace of `snapshot`.
pub fn targets(snapshot: &Snapshot, settings: &Settings) -> Vec<Target> {
    leaked_netns::leaked(snapshot, settings)
        .into_iter()
        .map(|mount| Target {
            path: mount.path.clone(),
            device: mount.device,
            inode: mount.inode,
        })
        .collect()
}

/// Whether `target` may be released now, judged on `fresh`.
pub fn verify(fresh: &Snapshot, target: &Target, settings: &Settings) -> Verdict {
    verify_among(fresh, target, &still_leaked(fresh, settings))
}

/// Each namespace still leaked on `fresh` (its mount point and identity):
/// the check's pass.
fn still_leaked(fresh: &Snapshot, settings: &Settings) -> HashSet<(PathBuf, u64, u64)> {
    leaked_netns::leaked(fresh, settings)
        .into_iter()
        .map(|m| (m.path.clone(), m.device, m.inode))
        .collect()
}

/// [`verify`], with the check's pass over `fresh` made already.
fn verify_among(
    fresh: &Snapshot,
    target: &Target,
    leaked: &HashSet<(PathBuf, u64, u64)>,
) -> Verdict {
    let same = |m: &NetnsMount| m.path == target.path && (m.device, m.inode) == target.identity();
    if leaked.contains(&(target.path.clone(), target.device, target.inode)) {
        return Verdict::Go;
    }
    let Some(view) = &fresh.netns else {
        return Verdict::Refuse(
            "the netns directory was not read, so nothing is confirmed".to_string(),
        );
    };
    let Some(mount) = view.mounts.iter().find(|m| same(m)) else {
        return Verdict::Gone("no longer mounted (or another namespace is)".to_string());
    };
    if let Some(holder) = view.holders.get(&target.inode) {
        return Verdict::Refuse(holder.to_string());
    }
    let named = fresh
        .containerd
        .as_ref()
        .map(|c| c.netns_files_named(CRI_NAMESPACE))
        .unwrap_or_default();
    let Some(name) = target.path.file_name() else {
        return Verdict::Refuse("not a path in a directory".to_string());
    };
    if named.contains(name) {
        return Verdict::Refuse("a sandbox record names it again".to_string());
    }
    let cni = fresh.cni.as_ref().map(CniView::index);
    if !is_cri_made(name, cni.as_ref()) {
        return Verdict::Refuse(
            "CRI did not make it (not its name, no cache of CRI's names it)".to_string(),
        );
    }
    let cri_networks = fresh.cni.as_ref().map_or(0, |cni| cni.cri_networks.len());
    match foreign_interfaces(mount, cri_networks) {
        Some(foreign) if !foreign.is_empty() => {
            return Verdict::Refuse(format!(
                "it holds {} that CRI did not put there",
                foreign.join(", ")
            ))
        }
        None if view.holders_looked_for => {
            return Verdict::Refuse("its interfaces could not be seen".to_string())
        }
        _ => {}
    }
    Verdict::Refuse(
        "containerd's records or procfs did not answer, so nothing is confirmed".to_string(),
    )
}

/// Releases (or, without `act`, plans) the leaked namespaces of `before`,
/// each re-verified on the snapshot `regather` takes.
pub fn run(
    before: &Snapshot,
    settings: &Settings,
    act: bool,
    regather: impl FnMut() -> Snapshot,
) -> Vec<Cleanup> {
    let targets = targets(before, settings);
    let mut release = Release {
        settings,
        leaked: PerLook::default(),
    };
    walk(before, targets, act, &mut release, regather)
}

struct Release<'a> {
    settings: &'a Settings,
    leaked: PerLook<HashSet<(PathBuf, u64, u64)>>,
}

impl Act for Release<'_> {
    type Target = Target;
    type Outcome = CleanupOutcome;
    type Row = Cleanup;

    fn verdict(&self, fresh: &Snapshot, target: &Target) -> Verdict {
        let leaked = self.leaked.of(fresh, || still_leaked(fresh, self.settings));
        verify_among(fresh, target, &leaked)
    }

    fn would(&self, _: &Target) -> (CleanupOutcome, String) {
        let how = "run with --remove --yes to unmount it and remove its file";
        (CleanupOutcome::WouldRemove, how.to_string())
    }

    fn act(&mut self, target: &Target) -> (CleanupOutcome, String) {
        match release(target) {
            Ok(()) => (CleanupOutcome::Removed, "unmounted and removed".to_string()),
            Err((outcome, why)) => (outcome, why),
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
            action: CleanupAction::RemoveNetns,
            id: target
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            path: target.path,
            outcome,
            detail,
        }
    }
}

fn release(target: &Target) -> Result<(), (CleanupOutcome, String)> {
    let failed = |what: &str, err: &dyn std::fmt::Display| {
        (CleanupOutcome::Failed, format!("{what}: {err}"))
    };
    let (Some(dir), Some(name)) = (target.path.parent(), target.path.file_name()) else {
        return Err((
            CleanupOutcome::Refused,
            "not a path in a directory".to_string(),
        ));
    };
    // Still the namespace judged: the mount point's device and inode are
    // the namespace's while it is mounted.
    match std::fs::symlink_metadata(&target.path) {
        Ok(meta) if (meta.dev(), meta.ino()) == target.identity() => {}
        Ok(_) => {
            return Err((
                CleanupOutcome::Refused,
                "another namespace (or none) is mounted there now".to_string(),
            ))
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err((CleanupOutcome::AlreadyGone, "removed meanwhile".to_string()))
        }
        Err(err) => return Err(failed(&format!("stat {}", target.path.display()), &err)),
    }
    umount2(
        target.path.as_os_str().as_bytes(),
        MntFlags::UMOUNT_NOFOLLOW,
    )
    .map_err(|e| failed(&format!("umount {}", target.path.display()), &e))?;
    let dir_fd = open_at(
        &nix::fcntl::AT_FDCWD,
        dir,
        OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW,
    )
    .map_err(|e| failed(&format!("opening {}", dir.display()), &e))?;
    unlinkat(&dir_fd, Path::new(name), UnlinkatFlags::NoRemoveDir)
        .map_err(|e| failed(&format!("removing {}", target.path.display()), &e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{ContainerdView, HeldBy, NamespaceView, NetnsHolder, NetnsView};
    use std::collections::{BTreeMap, BTreeSet};

    const HOUR: i64 = 3600 * SEC;

    fn node(mounted: bool, holders: &[(u64, i32)], named: bool) -> Snapshot {
        with_interfaces(mounted, holders, named, &["lo", "eth0"])
    }

    fn with_interfaces(
        mounted: bool,
        holders: &[(u64, i32)],
        named: bool,
        interfaces: &[&str],
    ) -> Snapshot {
        let mut s = snapshot();
        let path = PathBuf::from("/var/run/netns/cni-00000000-0000-0000-0000-00000000000c");
        s.netns = Some(NetnsView {
            dir: PathBuf::from("/var/run/netns"),
            mounts: match mounted {
                true => vec![NetnsMount {
                    path,
                    inode: 7,
                    device: 4,
                    created_at: NOW - HOUR,
                    interfaces: Some(interfaces.iter().map(|n| n.to_string()).collect()),
                }],
                false => vec![],
            },
            holders: holders
                .iter()
                .map(|&(inode, pid)| {
                    let by = match pid {
                        // An even pid holds it by a descriptor, for the tests.
                        pid if pid % 2 == 0 => HeldBy::Descriptor(5),
                        pid => HeldBy::Thread(pid),
                    };
                    (inode, NetnsHolder { pid, by })
                })
                .collect(),
            holders_looked_for: true,
            ..NetnsView::default()
        });
        let mut view = ContainerdView::default();
        view.namespaces.insert(
            CRI_NAMESPACE.to_string(),
            NamespaceView {
                containers: Some(BTreeSet::new()),
                sandboxes_created: Some(BTreeMap::new()),
                netns_paths: match named {
                    true => [(
                        "sb".to_string(),
                        "/run/netns/cni-00000000-0000-0000-0000-00000000000c".to_string(),
                    )]
                    .into(),
                    false => BTreeMap::new(),
                },
                ..NamespaceView::default()
            },
        );
        s.containerd = Some(view);
        of_proven_daemon(s)
    }

    #[test]
    fn a_dry_run_plans_what_is_still_leaked() {
        let s = node(true, &[], false);
        let done = run(&s, &Settings::default(), false, || s.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::WouldRemove);
        assert_eq!(done[0].action, CleanupAction::RemoveNetns);
        assert_eq!(done[0].id, "cni-00000000-0000-0000-0000-00000000000c");
    }

    #[test]
    fn a_namespace_entered_named_again_or_gone_is_not_released() {
        let before = node(true, &[], false);
        for (fresh, outcome, says) in [
            (
                node(true, &[(7, 4243)], false),
                CleanupOutcome::Refused,
                "process 4243 is in it",
            ),
            (
                node(true, &[(7, 4242)], false),
                CleanupOutcome::Refused,
                "process 4242 holds it open (descriptor 5)",
            ),
            (
                with_interfaces(true, &[], false, &["lo", "eth0", "vadm0"]),
                CleanupOutcome::Refused,
                "it holds vadm0 that CRI did not put there",
            ),
            (
                node(true, &[], true),
                CleanupOutcome::Refused,
                "names it again",
            ),
            (
                node(false, &[], false),
                CleanupOutcome::AlreadyGone,
                "no longer mounted",
            ),
        ] {
            let done = run(&before, &Settings::default(), true, || fresh.clone());
            assert_eq!(done[0].outcome, outcome, "{done:?}");
            assert!(done[0].detail.contains(says), "{done:?}");
        }
    }
}
