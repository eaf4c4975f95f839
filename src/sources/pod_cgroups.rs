//! kubelet's pod cgroups, under its cgroup root in the cgroup filesystem:
//! both drivers' layouts (cgroupfs `kubepods/…/pod<uid>`, systemd
//! `kubepods.slice/…/kubepods-…-pod<uid>.slice`), on cgroup v2 or v1 (the
//! pids controller's hierarchy: kubelet puts every pod in it). Read only.

use std::collections::HashSet;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::model::{CgroupView, Gap, Located, PodCgroup, Source};
use crate::read::bounded::{mtime_nanos, read_regular, Links};

pub(crate) const SOURCE: Source = Source::Kubelet;
/// A `cgroup.procs` of a pod: a pid a line.
const PROCS_LIMIT: u64 = 4 * 1024 * 1024;

/// The pod cgroups under `cgroup_root` in the cgroup filesystem at
/// `cgroup_fs`. `None` when neither hierarchy is there.
pub fn read(cgroup_root: Located, cgroup_fs: &Path, gaps: &mut Vec<Gap>) -> Option<CgroupView> {
    let (version, hierarchy) = if cgroup_fs.join("cgroup.controllers").is_file() {
        (2, cgroup_fs.to_path_buf())
    } else if cgroup_fs.join("pids").is_dir() {
        (1, cgroup_fs.join("pids"))
    } else {
        return None;
    };
    let relative = cgroup_root
        .path
        .strip_prefix("/")
        .unwrap_or(&cgroup_root.path);
    let base = hierarchy.join(relative);
    let mut pod_cgroups = Vec::new();
    for driver in [Driver::Cgroupfs, Driver::Systemd] {
        let top = base.join(driver.top());
        for (qos, dir) in [
            ("guaranteed", top.clone()),
            ("burstable", top.join(driver.qos_dir("burstable"))),
            ("besteffort", top.join(driver.qos_dir("besteffort"))),
        ] {
            pods_in(&dir, driver, qos, &mut pod_cgroups, gaps);
        }
    }
    pod_cgroups.sort_by(|a, b| a.path.cmp(&b.path));
    Some(CgroupView {
        cgroup_root,
        version,
        hierarchy,
        pod_cgroups,
    })
}

#[derive(Clone, Copy)]
enum Driver {
    Cgroupfs,
    Systemd,
}

impl Driver {
    fn name(self) -> &'static str {
        match self {
            Driver::Cgroupfs => "cgroupfs",
            Driver::Systemd => "systemd",
        }
    }

    fn top(self) -> &'static str {
        match self {
            Driver::Cgroupfs => "kubepods",
            Driver::Systemd => "kubepods.slice",
        }
    }

    fn qos_dir(self, qos: &str) -> String {
        match self {
            Driver::Cgroupfs => qos.to_string(),
            Driver::Systemd => format!("kubepods-{qos}.slice"),
        }
    }

    /// The pod uid a cgroup's name carries, if it is a pod's.
    fn pod_uid(self, name: &str) -> Option<String> {
        match self {
            Driver::Cgroupfs => name.strip_prefix("pod").map(str::to_string),
            Driver::Systemd => {
                let unit = name.strip_suffix(".slice")?;
                let uid = [
                    "kubepods-pod",
                    "kubepods-burstable-pod",
                    "kubepods-besteffort-pod",
                ]
                .iter()
                .find_map(|prefix| unit.strip_prefix(prefix))?;
                // systemd escapes `-` in a unit name: kubelet writes `_`.
                Some(uid.replace('_', "-"))
            }
        }
        .filter(|uid| !uid.is_empty())
    }
}

fn pods_in(dir: &Path, driver: Driver, qos: &str, out: &mut Vec<PodCgroup>, gaps: &mut Vec<Gap>) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == ErrorKind::NotFound => return,
        Err(err) => {
            gaps.push(Gap::item(SOURCE, dir, err.to_string()));
            return;
        }
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(uid) = driver.pod_uid(&name) else {
            continue;
        };
        let path = entry.path();
        let Ok(metadata) = fs::symlink_metadata(&path) else {
            continue;
        };
        if !metadata.is_dir() {
            continue;
        }
        out.push(PodCgroup {
            uid,
            driver: driver.name().to_string(),
            qos: qos.to_string(),
            created_at: mtime_nanos(&metadata).unwrap_or_default(),
            procs: None,
            populated: None,
            path,
        });
    }
}

/// Counts the processes of each pod cgroup whose uid is not in `listed`
/// (the uids of CRI's sandboxes): the only ones a check reports. On cgroup
/// v2, also reads the kernel's own word on the whole subtree
/// (`cgroup.events`).
pub fn count_unlisted(view: &mut CgroupView, listed: &HashSet<&str>, gaps: &mut Vec<Gap>) {
    let v2 = view.version == 2;
    for cgroup in &mut view.pod_cgroups {
        if !listed.contains(cgroup.uid.as_str()) {
            cgroup.procs = Some(procs_below(&cgroup.path, gaps));
            cgroup.populated = if v2 {
                populated(&cgroup.path, gaps)
            } else {
                None
            };
        }
    }
}

/// cgroup.events is two short lines.
const EVENTS_LIMIT: u64 = 4096;
/// Directories nested deeper than this below a pod cgroup are not walked:
/// kubelet makes one per container, and runc's below those are few.
const MAX_DEPTH: usize = 16;

/// `populated` of `cgroup`'s `cgroup.events` (cgroup v2): whether any
/// process runs in it or anywhere below it.
fn populated(cgroup: &Path, gaps: &mut Vec<Gap>) -> Option<bool> {
    let file = cgroup.join("cgroup.events");
    match read_regular(&file, EVENTS_LIMIT, Links::Refuse) {
        Ok(read) => {
            let text = String::from_utf8_lossy(&read.bytes);
            let value = text
                .lines()
                .find_map(|line| line.strip_prefix("populated "))
                .map(str::trim);
            match value {
                Some("1") => Some(true),
                Some("0") => Some(false),
                _ => {
                    gaps.push(Gap::item(SOURCE, &file, "no populated line".to_string()));
                    None
                }
            }
        }
        Err(err) if err.kind() == ErrorKind::NotFound => None,
        Err(err) => {
            gaps.push(Gap::item(SOURCE, &file, err.to_string()));
            None
        }
    }
}

/// Processes in `cgroup` and every cgroup below it (the whole subtree, to
/// [`MAX_DEPTH`]; never through a symlink).
fn procs_below(cgroup: &Path, gaps: &mut Vec<Gap>) -> usize {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut level: Vec<PathBuf> = vec![cgroup.to_path_buf()];
    for _ in 0..=MAX_DEPTH {
        let mut next = Vec::new();
        for dir in &level {
            if let Ok(entries) = fs::read_dir(dir) {
                next.extend(
                    entries
                        .flatten()
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                        .map(|e| e.path()),
                );
            }
        }
        dirs.append(&mut level);
        if next.is_empty() {
            break;
        }
        level = next;
    }
    dirs.iter()
        .map(|dir| {
            let file = dir.join("cgroup.procs");
            match read_regular(&file, PROCS_LIMIT, Links::Refuse) {
                Ok(read) => read
                    .bytes
                    .split(|&b| b == b'\n')
                    .filter(|l| !l.is_empty())
                    .count(),
                Err(err) if err.kind() == ErrorKind::NotFound => 0,
                Err(err) => {
                    gaps.push(Gap::item(SOURCE, &file, err.to_string()));
                    0
                }
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Origin;

    fn mkdir(path: &Path) {
        fs::create_dir_all(path).unwrap();
    }

    #[test]
    fn both_drivers_pods_are_found_with_their_qos_uid_and_processes() {
        let fs_root = tempfile::tempdir().unwrap();
        fs::write(fs_root.path().join("cgroup.controllers"), "cpu pids\n").unwrap();
        let base = fs_root.path().join("nodes/a");
        let guaranteed = base.join("kubepods/pod1111-aaaa");
        mkdir(&guaranteed.join("c1"));
        fs::write(guaranteed.join("cgroup.procs"), "").unwrap();
        fs::write(guaranteed.join("c1/cgroup.procs"), "10\n11\n").unwrap();
        // A process two levels down (a container's own nested cgroup):
        // kubelet's `Pids` counts the whole subtree.
        mkdir(&guaranteed.join("c1/inner"));
        fs::write(guaranteed.join("c1/inner/cgroup.procs"), "12\n").unwrap();
        fs::write(guaranteed.join("cgroup.events"), "populated 1\nfrozen 0\n").unwrap();
        mkdir(&base.join("kubepods/burstable/pod2222-bbbb"));
        mkdir(&base.join("kubepods/besteffort/not-a-pod"));
        mkdir(&base.join(
            "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod3333_cccc.slice",
        ));
        let root = Located {
            path: PathBuf::from("/nodes/a"),
            origin: Origin::Flag,
        };
        let mut gaps = Vec::new();
        let mut view = read(root, fs_root.path(), &mut gaps).unwrap();
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(view.version, 2);
        assert!(
            view.pod_cgroups.iter().all(|p| p.procs.is_none()),
            "not read yet"
        );
        count_unlisted(&mut view, &HashSet::from(["3333-cccc"]), &mut gaps);
        let seen: Vec<(&str, &str, &str, Option<usize>)> = view
            .pod_cgroups
            .iter()
            .map(|p| (p.uid.as_str(), p.driver.as_str(), p.qos.as_str(), p.procs))
            .collect();
        assert_eq!(
            seen,
            [
                ("2222-bbbb", "cgroupfs", "burstable", Some(0)),
                ("1111-aaaa", "cgroupfs", "guaranteed", Some(3)),
                ("3333-cccc", "systemd", "besteffort", None),
            ]
        );
        let populated: Vec<Option<bool>> = view.pod_cgroups.iter().map(|p| p.populated).collect();
        assert_eq!(
            populated,
            [None, Some(true), None],
            "v2's cgroup.events, where it is"
        );
    }

    #[test]
    fn v1_reads_the_pids_hierarchy_and_no_hierarchy_is_nothing() {
        let fs_root = tempfile::tempdir().unwrap();
        let root = || Located {
            path: PathBuf::from("/"),
            origin: Origin::Default,
        };
        let mut gaps = Vec::new();
        assert!(read(root(), fs_root.path(), &mut gaps).is_none());
        mkdir(&fs_root.path().join("pids/kubepods/podabc"));
        let view = read(root(), fs_root.path(), &mut gaps).unwrap();
        assert_eq!(view.version, 1);
        assert_eq!(view.pod_cgroups[0].uid, "abc");
    }
}
