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
//!
//! A slice systemd made for kubelet (the systemd cgroup driver) is never
//! removed by nodectl: kubelet (`cgroupCommon.Destroy`, through
//! libcontainer's systemd manager) stops its unit over D-Bus and systemd
//! removes the cgroup; an `rmdir` behind systemd's back leaves the unit's
//! state wrong. nodectl stops it the same way, through systemd proven PID 1
//! of the host ([`crate::act::systemd`]); when systemd cannot be reached or
//! proven it is refused, saying why, with the `systemctl stop` line that
//! removes it as kubelet would (see [`leaked_pod_cgroup::systemd_stop`]).
//!
//! Only a cgroup is removed, whatever the cgroup root says (a kubelet's
//! `--cgroup-root` or `--kubelet-cgroup-root` with `..`, a symlink planted
//! below it): the cgroup's path below its hierarchy is plain names, the
//! hierarchy is a cgroup filesystem (`fstatfs`), and the tree is walked from
//! descriptors, never through a symlink nor across a mount (see `tree`).

use std::collections::HashMap;
use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::fcntl::{openat2, AtFlags, AT_FDCWD};
use nix::sys::stat::{fstatat, SFlag};
use nix::sys::statfs::{fstatfs, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC};

use crate::act::systemd::{unit_of, Systemd};
use crate::act::tree;
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
    /// The hierarchy it was judged in (cgroup v2: the cgroup filesystem).
    pub hierarchy: PathBuf,
    /// cgroup v1 makes a pod's cgroup in every hierarchy: the other
    /// hierarchies that have it at the same place, where it is removed too.
    pub other_hierarchies: Vec<PathBuf>,
    /// For a slice systemd made (the systemd driver's), the command that
    /// stops it: then it is never removed here.
    pub systemd_stop: Option<String>,
}

/// Directories nested deeper than this below a pod cgroup are left alone:
/// kubelet makes one per container, and runc's below those are few.
const MAX_DEPTH: usize = 16;

/// Every leaked pod cgroup of `snapshot` kubelet's word confirms (an
/// unconfirmed one is reported, never removed).
pub fn targets(snapshot: &Snapshot, settings: &Settings) -> Vec<Target> {
    let Some(view) = &snapshot.pod_cgroups else {
        return Vec::new();
    };
    leaked_pod_cgroup::leaked(snapshot, settings)
        .into_iter()
        .filter(|leaked| leaked.unconfirmed.is_none())
        .map(|leaked| leaked.cgroup)
        .map(|cgroup| Target {
            uid: cgroup.uid.clone(),
            path: cgroup.path.clone(),
            hierarchy: view.hierarchy.clone(),
            other_hierarchies: match view.version {
                1 => other_hierarchies(&view.hierarchy, &cgroup.path),
                _ => Vec::new(),
            },
            systemd_stop: leaked_pod_cgroup::systemd_stop(cgroup),
        })
        .collect()
}

/// The other v1 hierarchies beside `hierarchy` that have `cgroup` (below
/// `hierarchy`) at the same place. A symlink among them (`cpu` →
/// `cpu,cpuacct`) is the same hierarchy again, skipped.
fn other_hierarchies(hierarchy: &Path, cgroup: &Path) -> Vec<PathBuf> {
    let (Some(cgroup_fs), Ok(relative)) = (hierarchy.parent(), cgroup.strip_prefix(hierarchy))
    else {
        return Vec::new();
    };
    let Ok(entries) = fs::read_dir(cgroup_fs) else {
        return Vec::new();
    };
    let mut others: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|other| other != hierarchy && other.join(relative).is_dir())
        .collect();
    others.sort();
    others
}

/// Whether `target` may be removed now, judged on `fresh`; a systemd
/// driver's slice only while `systemd` (whether systemd was proven) is Ok.
pub fn verify(
    fresh: &Snapshot,
    target: &Target,
    settings: &Settings,
    systemd: &Result<(), String>,
) -> Verdict {
    let still = leaked_pod_cgroup::leaked(fresh, settings)
        .into_iter()
        .find(|leaked| leaked.cgroup.path == target.path);
    if let Some(why) = still.as_ref().and_then(|leaked| leaked.unconfirmed.clone()) {
        return Verdict::Refuse(format!("unconfirmed: {why}"));
    }
    match still.map(|leaked| leaked.cgroup) {
        // cgroup v2's word on the whole subtree, whatever the walk counted.
        Some(cgroup) if cgroup.populated == Some(true) => Verdict::Refuse(
            "cgroup.events says populated 1: a process runs somewhere below it".to_string(),
        ),
        Some(cgroup) => match cgroup.procs {
            Some(0) => match leaked_pod_cgroup::systemd_stop(cgroup) {
                None => Verdict::Go,
                Some(stop) => match (unit_of(&cgroup.path), systemd) {
                    (Err(why), _) => Verdict::Refuse(systemd_refusal(&stop, &why)),
                    (Ok(_), Err(why)) => Verdict::Refuse(systemd_refusal(&stop, why)),
                    (Ok(_), Ok(())) => Verdict::Go,
                },
            },
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
            let uid = target.uid.as_str();
            if let Some(dir) = fresh.kubelet.as_ref().and_then(|k| k.pod_dir(uid)) {
                // kubelet keeps a pod's cgroup while its volumes exist
                // (cleanupOrphanedPodCgroups, podVolumesExist).
                let volumes = match dir.mounts.first() {
                    Some(first) => format!(", its volumes still mounted ({first})"),
                    None => String::new(),
                };
                return Verdict::Refuse(format!(
                    "kubelet still has its pod: its directory {} is there{volumes}",
                    dir.path.display()
                ));
            }
            Verdict::Refuse("no longer leaked: a sandbox of its pod is listed again".to_string())
        }
    }
}

/// Why a systemd slice is refused (systemd could not be asked: `why`),
/// and the line that removes it.
fn systemd_refusal(stop: &str, why: &str) -> String {
    format!(
        "a slice named as systemd makes them for kubelet (systemd cgroup driver), not stopped \
         through systemd: {why}. nodectl never removes one behind systemd's back, which would \
         leave the unit's state wrong. Nothing runs in it: if it is a unit's, stop it through \
         systemd as kubelet does: `{stop}`; if systemd has no such unit, it is not kubelet's \
         driver's slice: find who made it before removing it"
    )
}

/// Removes (or, without `act`, plans) the leaked pod cgroups of `before`
/// with no process in them, each re-verified on the snapshot `regather`
/// takes.
///
/// A systemd driver's slice is stopped through `systemd`, which is proven
/// once for the plan (only when there is such a slice) and again on the
/// connection each stop is asked over.
pub fn run(
    before: &Snapshot,
    settings: &Settings,
    act: bool,
    systemd: &mut dyn Systemd,
    regather: impl FnMut() -> Snapshot,
) -> Vec<Cleanup> {
    let targets = targets(before, settings);
    let proven = match targets.iter().any(|t| t.systemd_stop.is_some()) {
        true => systemd.proven(),
        false => Err("not asked: no systemd slice".to_string()),
    };
    // systemd's word on each slice (read only), for the plan and the
    // verdicts; asked again right before each stop.
    let owned = match proven {
        Ok(()) => targets
            .iter()
            .filter(|t| t.systemd_stop.is_some())
            .filter_map(|t| {
                let unit = unit_of(&t.path).ok()?;
                let relative = t.path.strip_prefix(&t.hierarchy).ok()?;
                Some((t.path.clone(), systemd.owns(&unit, relative)))
            })
            .collect(),
        Err(_) => HashMap::new(),
    };
    let mut remove = Remove {
        settings,
        systemd,
        proven,
        owned,
    };
    walk(before, targets, act, &mut remove, regather)
}

struct Remove<'a> {
    settings: &'a Settings,
    systemd: &'a mut dyn Systemd,
    /// Whether systemd was proven, for the plan and the verdicts.
    proven: Result<(), String>,
    /// Whether systemd says it owns each slice, by directory.
    owned: HashMap<PathBuf, Result<(), String>>,
}

impl Act for Remove<'_> {
    type Target = Target;
    type Outcome = CleanupOutcome;
    type Row = Cleanup;

    fn verdict(&self, fresh: &Snapshot, target: &Target) -> Verdict {
        let owned = self.owned.get(&target.path).cloned().unwrap_or(Ok(()));
        let systemd = self.proven.clone().and(owned);
        verify(fresh, target, self.settings, &systemd)
    }

    fn would(&self, target: &Target) -> (CleanupOutcome, String) {
        let how = match unit_of(&target.path) {
            Ok(unit) if target.systemd_stop.is_some() => format!(
                "would be stopped through systemd (StopUnit {unit}, as kubelet does), which \
                 removes its cgroup: run with --remove --yes"
            ),
            _ => "run with --remove --yes to remove it, container cgroups first".to_string(),
        };
        (CleanupOutcome::WouldRemove, how)
    }

    fn act(&mut self, target: &Target) -> (CleanupOutcome, String) {
        // A systemd slice is only ever stopped through systemd, never an
        // rmdir, whatever said Go.
        if let Some(stop) = &target.systemd_stop {
            let relative = target.path.strip_prefix(&target.hierarchy);
            return match (unit_of(&target.path), relative) {
                (Ok(unit), Ok(relative)) => {
                    match self.systemd.stop(&unit, &target.path, relative) {
                        (CleanupOutcome::Refused, why) => {
                            (CleanupOutcome::Refused, systemd_refusal(stop, &why))
                        }
                        done => done,
                    }
                }
                (Err(why), _) => (CleanupOutcome::Refused, systemd_refusal(stop, &why)),
                (_, Err(_)) => {
                    let why = format!("not below its hierarchy {}", target.hierarchy.display());
                    (CleanupOutcome::Refused, systemd_refusal(stop, &why))
                }
            };
        }
        // The judged hierarchy first: the kernel refuses it while a
        // process is in it, and then nothing else is touched.
        let relative = match target.path.strip_prefix(&target.hierarchy) {
            Ok(relative) => relative,
            Err(_) => {
                let why = format!("not below its hierarchy {}", target.hierarchy.display());
                return (CleanupOutcome::Refused, why);
            }
        };
        if let Err(refusal) = remove_in(&target.hierarchy, relative) {
            return refusal;
        }
        for other in &target.other_hierarchies {
            match remove_in(other, relative) {
                Ok(()) | Err((CleanupOutcome::AlreadyGone, _)) => {}
                Err((outcome, why)) => return (outcome, format!("{why} (in {})", other.display())),
            }
        }
        (CleanupOutcome::Removed, "removed".to_string())
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

/// `rmdir` of the cgroup at `relative` below the cgroup hierarchy
/// `hierarchy`, and of the cgroups below it, deepest first. A cgroup
/// directory holds only the kernel's files, which go with it. Refused
/// unless `relative` is plain names and `hierarchy` a cgroup filesystem;
/// walked from descriptors (see [`tree`]).
fn remove_in(hierarchy: &Path, relative: &Path) -> Result<(), (CleanupOutcome, String)> {
    let refused = |why: String| (CleanupOutcome::Refused, why);
    if !relative
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
    {
        return Err(refused(format!(
            "{} is not a plain path below the hierarchy",
            relative.display()
        )));
    }
    let (Some(parent), Some(name)) = (relative.parent(), relative.file_name()) else {
        return Err(refused("the hierarchy itself is no pod cgroup".to_string()));
    };
    let name =
        CString::new(name.as_bytes()).map_err(|_| refused("a NUL in its name".to_string()))?;
    let how = tree::no_symlinks();
    let root = openat2(AT_FDCWD, hierarchy, how).map_err(|e| {
        refused(format!(
            "{} is not reached without following a symlink: {e}",
            hierarchy.display()
        ))
    })?;
    let kind = fstatfs(&root)
        .map_err(|e| refused(format!("{}: statfs: {e}", hierarchy.display())))?
        .filesystem_type();
    if kind != CGROUP2_SUPER_MAGIC && kind != CGROUP_SUPER_MAGIC {
        return Err(refused(format!(
            "{} is not a cgroup filesystem (type {:#x}): nothing is removed there",
            hierarchy.display(),
            kind.0
        )));
    }
    let parent_fd = match parent.as_os_str().is_empty() {
        true => root,
        false => openat2(&root, parent, tree::beneath()).map_err(|e| match e {
            nix::Error::ENOENT => (CleanupOutcome::AlreadyGone, "removed meanwhile".to_string()),
            e => (
                CleanupOutcome::Failed,
                format!("{}: {e}", hierarchy.join(parent).display()),
            ),
        })?,
    };
    let shown = hierarchy.join(relative).display().to_string();
    match fstatat(&parent_fd, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR => {}
        Ok(_) => return Err(refused(format!("{shown} is not a directory"))),
        Err(nix::Error::ENOENT) => {
            return Err((CleanupOutcome::AlreadyGone, "removed meanwhile".to_string()))
        }
        Err(e) => return Err((CleanupOutcome::Failed, format!("{shown}: {e}"))),
    }
    let files = tree::Files::GoWithTheirDirectory;
    tree::remove(&parent_fd, &name, files, MAX_DEPTH, &shown)
        .map_err(|why| (CleanupOutcome::Failed, format!("rmdir {why}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{CgroupView, KubeletView, Located, Origin, PodCgroup, PodDir};

    const HOUR: i64 = 3600 * SEC;

    fn node(cgroup_dir: &Path, procs: Option<usize>, listed: &[&str]) -> Snapshot {
        let mut s = snapshot();
        s.pod_cgroups = Some(CgroupView {
            cgroup_root: Located {
                path: PathBuf::from("/"),
                origin: Origin::Default,
            },
            cgroup_driver: None,
            cgroups_per_qos: crate::model::KubeletSetting::per_qos_default(),
            version: 2,
            hierarchy: PathBuf::from("/sys/fs/cgroup"),
            pod_cgroups: vec![PodCgroup {
                uid: "gone".to_string(),
                path: cgroup_dir.to_path_buf(),
                driver: "cgroupfs".to_string(),
                qos: "burstable".to_string(),
                created_at: NOW - HOUR,
                procs,
                populated: None,
            }],
        });
        s.cri = Some(cri_listing_pod_uids(listed));
        s.kubelet = Some(KubeletView {
            root: Located {
                path: PathBuf::from("/var/lib/kubelet"),
                origin: Origin::Default,
            },
            pod_dirs: Vec::new(),
            pod_logs: Some(Vec::new()),
            pod_logs_dir: None,
            word: crate::model::KubeletWord::Listed { pods: Vec::new() },
        });
        of_proven_daemon(s)
    }

    /// A scratch cgroup of this test in the machine's own cgroup
    /// filesystem (v2, or v1's pids hierarchy, as nodectl judges them):
    /// (hierarchy, scratch); removed when dropped. `None` (said why)
    /// without root outside CI; in CI, where tests run as root, a failure.
    struct Scratch {
        hierarchy: PathBuf,
        dir: PathBuf,
    }

    impl Scratch {
        fn new(name: &str) -> Option<Scratch> {
            let cgroup_fs = Path::new("/sys/fs/cgroup");
            let hierarchy = match cgroup_fs.join("cgroup.controllers").is_file() {
                true => cgroup_fs.to_path_buf(),
                false => cgroup_fs.join("pids"),
            };
            let dir = hierarchy.join(format!("nodectl-unit-{name}-{}", std::process::id()));
            match fs::create_dir(&dir) {
                Ok(()) => Some(Scratch { hierarchy, dir }),
                Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
                    panic!("{}: {e} (CI runs the tests as root)", dir.display())
                }
                Err(e) => {
                    eprintln!(
                        "SKIPPED {name}: no cgroup of its own ({}: {e})",
                        dir.display()
                    );
                    None
                }
            }
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            fn rmdir_tree(dir: &Path) {
                for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
                    if entry.file_type().is_ok_and(|t| t.is_dir()) {
                        rmdir_tree(&entry.path());
                    }
                }
                let _ = fs::remove_dir(dir);
            }
            rmdir_tree(&self.dir);
        }
    }

    fn in_hierarchy(mut s: Snapshot, hierarchy: &Path) -> Snapshot {
        s.pod_cgroups.as_mut().unwrap().hierarchy = hierarchy.to_path_buf();
        s
    }

    #[test]
    fn a_dry_run_plans_and_yes_removes_the_tree_deepest_first() {
        let Some(scratch) = Scratch::new("tree") else {
            return;
        };
        let pod = scratch.dir.join("kubepods/burstable/podgone");
        fs::create_dir_all(pod.join("container/inner")).unwrap();
        let s = in_hierarchy(node(&pod, Some(0), &[]), &scratch.hierarchy);
        let done = run(&s, &Settings::default(), false, &mut Unproven, || s.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::WouldRemove);
        assert!(pod.exists());
        let done = run(&s, &Settings::default(), true, &mut Unproven, || s.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::Removed, "{done:?}");
        assert_eq!(done[0].action, CleanupAction::RemoveCgroup);
        assert!(!pod.exists());
        assert!(
            scratch.dir.join("kubepods/burstable").is_dir(),
            "only the pod's"
        );
        // Removed meanwhile: said so.
        let done = run(&s, &Settings::default(), true, &mut Unproven, || s.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::AlreadyGone, "{done:?}");
    }

    /// systemd that cannot be reached: every slice refused.
    struct Unproven;

    impl Systemd for Unproven {
        fn proven(&mut self) -> Result<(), String> {
            Err("no systemd here".to_string())
        }
        fn owns(&mut self, _: &str, _: &Path) -> Result<(), String> {
            Err("no systemd here".to_string())
        }
        fn stop(&mut self, _: &str, _: &Path, _: &Path) -> (CleanupOutcome, String) {
            (CleanupOutcome::Refused, "no systemd here".to_string())
        }
    }

    /// systemd proven, which records what it was asked to stop (and owns
    /// every slice unless `disowned`).
    #[derive(Default)]
    struct Proven {
        stopped: Vec<(String, PathBuf)>,
        disowned: bool,
    }

    impl Systemd for Proven {
        fn proven(&mut self) -> Result<(), String> {
            Ok(())
        }
        fn owns(&mut self, unit: &str, _: &Path) -> Result<(), String> {
            match self.disowned {
                true => Err(format!("systemd has no unit {unit} loaded")),
                false => Ok(()),
            }
        }
        fn stop(&mut self, unit: &str, cgroup: &Path, _: &Path) -> (CleanupOutcome, String) {
            self.stopped.push((unit.to_string(), cgroup.to_path_buf()));
            (
                CleanupOutcome::Removed,
                "stopped through systemd".to_string(),
            )
        }
    }

    /// A systemd driver's slice of a gone pod in `scratch`, named `unit`,
    /// below `parent`: (snapshot, its directory).
    fn systemd_slice(scratch: &Scratch, parent: &str, unit: &str) -> (Snapshot, PathBuf) {
        let pod = scratch.dir.join(parent).join(unit);
        fs::create_dir_all(pod.join("container")).unwrap();
        let mut s = in_hierarchy(node(&pod, Some(0), &[]), &scratch.hierarchy);
        s.pod_cgroups.as_mut().unwrap().pod_cgroups[0].driver = "systemd".to_string();
        (s, pod)
    }

    #[test]
    fn a_systemd_slice_is_refused_with_the_systemctl_line_and_never_removed() {
        let Some(scratch) = Scratch::new("slice") else {
            return;
        };
        let unit = "kubepods-besteffort-pod1111_aaaa.slice";
        let parent = "kubepods.slice/kubepods-besteffort.slice";
        let (s, pod) = systemd_slice(&scratch, parent, unit);
        let line = format!("`systemctl stop {unit}`");
        for act in [false, true] {
            let done = run(&s, &Settings::default(), act, &mut Unproven, || s.clone());
            assert_eq!(done[0].outcome, CleanupOutcome::Refused, "{done:?}");
            assert!(done[0].detail.contains(&line), "{done:?}");
            assert!(done[0].detail.contains("no systemd here"), "{done:?}");
            assert!(pod.join("container").is_dir(), "never an rmdir");
        }
        // Its act alone, whatever verdict let it through: asked of systemd
        // (which refuses here), never an rmdir.
        let target = targets(&s, &Settings::default()).remove(0);
        let settings = Settings::default();
        let (outcome, detail) = Remove {
            settings: &settings,
            systemd: &mut Unproven,
            proven: Ok(()),
            owned: HashMap::new(),
        }
        .act(&target);
        assert_eq!(outcome, CleanupOutcome::Refused, "{detail}");
        assert!(pod.join("container").is_dir(), "never an rmdir");
    }

    #[test]
    fn a_systemd_slice_is_stopped_through_a_proven_systemd_never_rmdir_ed() {
        let Some(scratch) = Scratch::new("stop") else {
            return;
        };
        let unit = "kubepods-besteffort-pod2222_bbbb.slice";
        let parent = "kubepods.slice/kubepods-besteffort.slice";
        let (s, pod) = systemd_slice(&scratch, parent, unit);
        let mut systemd = Proven::default();
        let plan = run(&s, &Settings::default(), false, &mut systemd, || s.clone());
        assert_eq!(plan[0].outcome, CleanupOutcome::WouldRemove, "{plan:?}");
        assert!(
            plan[0].detail.contains("stopped through systemd"),
            "{plan:?}"
        );
        assert!(systemd.stopped.is_empty(), "a plan asks nothing");
        let done = run(&s, &Settings::default(), true, &mut systemd, || s.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::Removed, "{done:?}");
        assert_eq!(systemd.stopped, vec![(unit.to_string(), pod.clone())]);
        // The fake systemd removes nothing: nodectl itself did no rmdir.
        assert!(pod.join("container").is_dir(), "never an rmdir");
    }

    #[test]
    fn a_slice_systemd_does_not_own_is_refused_in_the_plan_too() {
        let Some(scratch) = Scratch::new("disowned") else {
            return;
        };
        let unit = "kubepods-besteffort-pod4444_dddd.slice";
        let parent = "kubepods.slice/kubepods-besteffort.slice";
        let (s, pod) = systemd_slice(&scratch, parent, unit);
        let mut systemd = Proven {
            disowned: true,
            ..Proven::default()
        };
        for act in [false, true] {
            let done = run(&s, &Settings::default(), act, &mut systemd, || s.clone());
            assert_eq!(done[0].outcome, CleanupOutcome::Refused, "{done:?}");
            assert!(done[0].detail.contains("systemd has no unit"), "{done:?}");
            assert!(done[0].detail.contains("`systemctl stop "), "{done:?}");
        }
        assert!(systemd.stopped.is_empty(), "{:?}", systemd.stopped);
        assert!(pod.join("container").is_dir(), "never an rmdir");
    }

    #[test]
    fn a_slice_not_where_systemd_puts_its_unit_is_not_stopped() {
        let Some(scratch) = Scratch::new("misplaced") else {
            return;
        };
        let unit = "kubepods-besteffort-pod3333_cccc.slice";
        let (s, pod) = systemd_slice(&scratch, "kubepods.slice", unit);
        let mut systemd = Proven::default();
        let done = run(&s, &Settings::default(), true, &mut systemd, || s.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::Refused, "{done:?}");
        assert!(
            done[0].detail.contains("not below its parent slice"),
            "{done:?}"
        );
        assert!(systemd.stopped.is_empty(), "{:?}", systemd.stopped);
        assert!(pod.join("container").is_dir(), "never an rmdir");
    }

    #[test]
    fn on_v1_the_same_cgroup_goes_from_every_hierarchy() {
        let Some(scratch) = Scratch::new("v1") else {
            return;
        };
        if scratch.hierarchy == Path::new("/sys/fs/cgroup") {
            eprintln!("SKIPPED on_v1_the_same_cgroup_goes_from_every_hierarchy: cgroup v2 here");
            return;
        }
        let relative = scratch.dir.strip_prefix(&scratch.hierarchy).unwrap();
        let memory = Path::new("/sys/fs/cgroup/memory").join(relative);
        fs::create_dir(&memory).unwrap();
        let _memory = Scratch {
            hierarchy: PathBuf::from("/sys/fs/cgroup/memory"),
            dir: memory.clone(),
        };
        let pod = scratch.dir.join("kubepods/burstable/podgone");
        fs::create_dir_all(pod.join("container")).unwrap();
        fs::create_dir_all(memory.join("kubepods/burstable/podgone/container")).unwrap();
        let mut s = in_hierarchy(node(&pod, Some(0), &[]), &scratch.hierarchy);
        s.pod_cgroups.as_mut().unwrap().version = 1;
        let done = run(&s, &Settings::default(), true, &mut Unproven, || s.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::Removed, "{done:?}");
        assert!(!pod.exists());
        assert!(!memory.join("kubepods/burstable/podgone").exists());
        assert!(memory.join("kubepods/burstable").is_dir());
    }

    #[test]
    fn nothing_outside_a_cgroup_filesystem_is_removed_whatever_the_path_says() {
        let dir = tempfile::tempdir().unwrap();
        // A "hierarchy" that is a plain directory (a cgroup root with `..`
        // that left the cgroup filesystem): refused, nothing removed.
        let pod = dir.path().join("kubepods/burstable/podgone");
        fs::create_dir_all(pod.join("container")).unwrap();
        let s = in_hierarchy(node(&pod, Some(0), &[]), dir.path());
        let done = run(&s, &Settings::default(), true, &mut Unproven, || s.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::Refused, "{done:?}");
        assert!(
            done[0].detail.contains("is not a cgroup filesystem"),
            "{done:?}"
        );
        assert!(pod.join("container").is_dir());
        // A path that climbs out of its hierarchy, even spelled below it.
        let climbing = dir.path().join("kubepods/../../elsewhere/podgone");
        let s = in_hierarchy(node(&climbing, Some(0), &[]), dir.path());
        let done = run(&s, &Settings::default(), true, &mut Unproven, || s.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::Refused, "{done:?}");
        assert!(done[0].detail.contains("not a plain path"), "{done:?}");
        // A symlink on the way is not followed, even into a cgroup
        // filesystem.
        let Some(scratch) = Scratch::new("link") else {
            return;
        };
        let victim = scratch.dir.join("podgone");
        fs::create_dir_all(victim.join("kept")).unwrap();
        std::os::unix::fs::symlink(&scratch.hierarchy, dir.path().join("link")).unwrap();
        let hierarchy = dir
            .path()
            .join("link")
            .join(scratch.dir.file_name().unwrap());
        let through = hierarchy.join("podgone");
        let s = in_hierarchy(node(&through, Some(0), &[]), &hierarchy);
        let done = run(&s, &Settings::default(), true, &mut Unproven, || s.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::Refused, "{done:?}");
        assert!(done[0].detail.contains("symlink"), "{done:?}");
        assert!(victim.join("kept").is_dir());
        drop(scratch);
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
        // kubelet has the pod again (a pod directory of its uid).
        let mut kept = node(&pod, Some(0), &[]);
        kept.kubelet.as_mut().unwrap().pod_dirs.push(PodDir {
            uid: "gone".to_string(),
            path: PathBuf::from("/var/lib/kubelet/pods/gone"),
            modified_at: NOW,
            mounts: Vec::new(),
        });
        let mut unconfirmed = node(&pod, Some(0), &[]);
        unconfirmed.kubelet = None;
        let mut populated = node(&pod, Some(0), &[]);
        populated.pod_cgroups.as_mut().unwrap().pod_cgroups[0].populated = Some(true);
        let mut mounted = node(&pod, Some(0), &[]);
        mounted.kubelet.as_mut().unwrap().pod_dirs.push(PodDir {
            uid: "gone".to_string(),
            path: PathBuf::from("/var/lib/kubelet/pods/gone"),
            modified_at: NOW,
            mounts: vec![
                "/var/lib/kubelet/pods/gone/volumes/kubernetes.io~empty-dir/m".to_string(),
            ],
        });
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
            (kept, CleanupOutcome::Refused, "kubelet still has its pod"),
            (unconfirmed, CleanupOutcome::Refused, "unconfirmed"),
            (populated, CleanupOutcome::Refused, "populated 1"),
            (mounted, CleanupOutcome::Refused, "volumes still mounted"),
            (gone, CleanupOutcome::AlreadyGone, "no longer exists"),
        ] {
            let done = run(&before, &Settings::default(), true, &mut Unproven, || {
                fresh.clone()
            });
            assert_eq!(done[0].outcome, outcome, "{done:?}");
            assert!(done[0].detail.contains(says), "{done:?}");
            assert!(pod.exists());
        }
    }

    #[test]
    fn an_unconfirmed_leak_is_never_planned() {
        let dir = tempfile::tempdir().unwrap();
        let pod = dir.path().join("podgone");
        let mut s = node(&pod, Some(0), &[]);
        s.kubelet = None;
        assert!(run(&s, &Settings::default(), false, &mut Unproven, || s.clone()).is_empty());
        let mut s = node(&pod, Some(0), &[]);
        s.kubelet.as_mut().unwrap().word = crate::model::KubeletWord::default();
        assert!(run(&s, &Settings::default(), false, &mut Unproven, || s.clone()).is_empty());
        assert_eq!(
            targets(&node(&pod, Some(0), &[]), &Settings::default()).len(),
            1
        );
    }
}
