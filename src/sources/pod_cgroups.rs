//! kubelet's pod cgroups, under its cgroup root in the cgroup filesystem:
//! both drivers' layouts (cgroupfs `<root>/kubepods/…/pod<uid>`, systemd
//! the same name turned into slices, see [`systemd_path`]), on cgroup v2 or
//! v1 (the pids controller's hierarchy: kubelet puts every pod in it). Both,
//! whatever kubelet's `cgroupDriver` says: kubelet 1.31 and later take the
//! driver containerd 2.x answers to CRI's `RuntimeConfig` over its own
//! setting (`getCgroupDriverFromCRI`, `KubeletCgroupDriverFromCRI`), so the
//! setting alone could point at the layout kubelet does not use and read
//! none. Read only.

use std::collections::HashSet;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::model::{CgroupView, Gap, KubeletSetting, Located, PodCgroup, Source};
use crate::read::bounded::{mtime_nanos, read_regular, Links};

pub(crate) const SOURCE: Source = Source::Kubelet;
/// A `cgroup.procs` of a pod: a pid a line.
const PROCS_LIMIT: u64 = 4 * 1024 * 1024;

/// kubelet's cgroup settings beside its root (see
/// `sources::kubelet::cgroup_settings`).
pub struct Settings {
    pub driver: Option<KubeletSetting<String>>,
    pub per_qos: KubeletSetting<bool>,
}

/// The pod cgroups under `cgroup_root` in the cgroup filesystem at
/// `cgroup_fs`. `None` when neither hierarchy is there. With
/// `cgroupsPerQOS` false none is read: kubelet makes no pod cgroup then
/// (`NewPodContainerManager` gives `podContainerManagerNoop`, whose
/// `EnsureExists` and `Destroy` do nothing), so a `kubepods` there is not
/// kubelet's to judge.
pub fn read(
    cgroup_root: Located,
    settings: Settings,
    cgroup_fs: &Path,
    gaps: &mut Vec<Gap>,
) -> Option<CgroupView> {
    let (version, hierarchy) = if cgroup_fs.join("cgroup.controllers").is_file() {
        (2, cgroup_fs.to_path_buf())
    } else if cgroup_fs.join("pids").is_dir() {
        (1, cgroup_fs.join("pids"))
    } else {
        return None;
    };
    let mut pod_cgroups = Vec::new();
    if settings.per_qos.value {
        for layout in layouts(&cgroup_root.path) {
            pods_in(&hierarchy, &layout, &mut pod_cgroups, gaps);
        }
    }
    pod_cgroups.sort_by(|a, b| a.path.cmp(&b.path));
    Some(CgroupView {
        cgroup_root,
        cgroup_driver: settings.driver,
        cgroups_per_qos: settings.per_qos,
        version,
        hierarchy,
        pod_cgroups,
    })
}

/// Where one driver puts the pods of one QoS class: the directory below
/// the hierarchy, and how a pod's cgroup there is named.
struct Layout {
    driver: &'static str,
    qos: &'static str,
    dir: PathBuf,
    prefix: String,
    suffix: &'static str,
}

impl Layout {
    /// The pod uid a cgroup's name carries, if it is a pod's.
    fn pod_uid(&self, name: &str) -> Option<String> {
        let uid = name.strip_prefix(&self.prefix)?.strip_suffix(self.suffix)?;
        // systemd reads `-` in a unit name as a step in the hierarchy:
        // kubelet writes the uid's `_` (escapeSystemdCgroupName).
        let uid = match self.driver {
            "systemd" => uid.replace('_', "-"),
            _ => uid.to_string(),
        };
        (!uid.is_empty()).then_some(uid)
    }
}

/// Both drivers' layouts under the cgroup root `root` (a clean absolute
/// cgroup name). kubelet names a pod's cgroup `<root parts>/kubepods[/<qos>]
/// /pod<uid>` (`ParseCgroupfsToCgroupName` of its `cgroupRoot`, then
/// `NewCgroupName` with `kubepods` in `NewContainerManager`, the QoS class
/// and `pod<uid>` in `GetPodContainerName`); the cgroupfs driver uses that
/// path as it is (`ToCgroupfs`), the systemd one turns it into slices
/// ([`systemd_path`]).
fn layouts(root: &Path) -> Vec<Layout> {
    let parts: Vec<String> = root
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(name) => Some(name.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    let mut layouts = Vec::new();
    for (qos, class) in [
        ("guaranteed", None),
        ("burstable", Some("burstable")),
        ("besteffort", Some("besteffort")),
    ] {
        let mut name = parts.clone();
        name.push("kubepods".to_string());
        name.extend(class.map(str::to_string));
        layouts.push(Layout {
            driver: "cgroupfs",
            qos,
            dir: name.iter().collect(),
            prefix: "pod".to_string(),
            suffix: "",
        });
        let dir = systemd_path(&name);
        let unit = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        layouts.push(Layout {
            driver: "systemd",
            qos,
            prefix: format!("{}-pod", unit.trim_end_matches(".slice")),
            dir,
            suffix: ".slice",
        });
    }
    layouts
}

/// A kubelet cgroup name (its parts) as the systemd driver places it in the
/// cgroup filesystem, relative: kubelet's `CgroupName.ToSystemd` escapes
/// each part's `-` as `_`, joins the parts with `-` into one slice unit,
/// and runc's `ExpandSlice` puts that unit below each of its prefixes:
/// `{custom, kubepods, burstable}` is
/// `custom.slice/custom-kubepods.slice/custom-kubepods-burstable.slice`.
/// A part that is already a slice's name gets no special reading (kubelet
/// 1.26 to 1.35 gives it none): a `cgroupRoot` of `/system.slice` is
/// `system.slice.slice/system.slice-kubepods.slice/…`, as kubelet makes it
/// (and kubelet starts only when `system.slice.slice` exists: its
/// `cgroupManager.Validate` of the root goes through the same name).
pub fn systemd_path(parts: &[String]) -> PathBuf {
    let mut path = PathBuf::new();
    let mut unit = String::new();
    for part in parts {
        if !unit.is_empty() {
            unit.push('-');
        }
        unit.push_str(&part.replace('-', "_"));
        path.push(format!("{unit}.slice"));
    }
    path
}

fn pods_in(hierarchy: &Path, layout: &Layout, out: &mut Vec<PodCgroup>, gaps: &mut Vec<Gap>) {
    let dir = hierarchy.join(&layout.dir);
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == ErrorKind::NotFound => return,
        Err(err) => {
            gaps.push(Gap::item(SOURCE, &dir, err.to_string()));
            return;
        }
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(uid) = layout.pod_uid(&name) else {
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
            driver: layout.driver.to_string(),
            qos: layout.qos.to_string(),
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
pub fn populated(cgroup: &Path, gaps: &mut Vec<Gap>) -> Option<bool> {
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
pub fn procs_below(cgroup: &Path, gaps: &mut Vec<Gap>) -> usize {
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

    /// kubelet's defaults: no driver said, a cgroup per pod.
    fn defaults() -> Settings {
        Settings {
            driver: None,
            per_qos: KubeletSetting::per_qos_default(),
        }
    }

    /// The pod cgroups found under the cgroup root `root` of a v2 cgroup
    /// filesystem at `fs_root`: (uid, driver, qos, path below `fs_root`).
    fn found(fs_root: &Path, root: &str) -> Vec<(String, String, String, PathBuf)> {
        let root = Located {
            path: PathBuf::from(root),
            origin: Origin::KubeletConfig,
        };
        let mut gaps = Vec::new();
        let view = read(root, defaults(), fs_root, &mut gaps).unwrap();
        assert!(gaps.is_empty(), "{gaps:?}");
        view.pod_cgroups
            .into_iter()
            .map(|p| {
                let below = p.path.strip_prefix(fs_root).unwrap().to_path_buf();
                (p.uid, p.driver, p.qos, below)
            })
            .collect()
    }

    fn v2() -> tempfile::TempDir {
        let fs_root = tempfile::tempdir().unwrap();
        fs::write(fs_root.path().join("cgroup.controllers"), "cpu pids\n").unwrap();
        fs_root
    }

    #[test]
    fn a_systemd_cgroup_root_is_named_as_kubelets_to_systemd_names_it() {
        let fs_root = v2();
        let d = fs_root.path();
        let burstable = "custom.slice/custom-kubepods.slice/custom-kubepods-burstable.slice/custom-kubepods-burstable-pod1111_aaaa.slice";
        let guaranteed = "custom.slice/custom-kubepods.slice/custom-kubepods-pod2222_bbbb.slice";
        mkdir(&d.join(burstable));
        mkdir(&d.join(guaranteed));
        // The old reading, root joined to `kubepods.slice`: no pod of it.
        mkdir(&d.join(
            "custom/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod3333.slice",
        ));
        let seen = found(d, "/custom");
        let expected = [
            ("1111-aaaa", "systemd", "burstable", burstable),
            ("2222-bbbb", "systemd", "guaranteed", guaranteed),
        ];
        let expected: Vec<(String, String, String, PathBuf)> = expected
            .iter()
            .map(|(u, d, q, p)| {
                (
                    u.to_string(),
                    d.to_string(),
                    q.to_string(),
                    PathBuf::from(p),
                )
            })
            .collect();
        assert_eq!(seen, expected);
    }

    #[test]
    fn a_multi_part_or_dashed_root_is_one_slice_a_part_escaped() {
        let fs_root = v2();
        let d = fs_root.path();
        // `/a/b-c`: parts `a`, `b_c` (a `-` would be a step for systemd).
        let pod = "a.slice/a-b_c.slice/a-b_c-kubepods.slice/a-b_c-kubepods-besteffort.slice/a-b_c-kubepods-besteffort-pod4444_dddd.slice";
        mkdir(&d.join(pod));
        // The cgroupfs driver's layout of the same root, read beside it.
        mkdir(&d.join("a/b-c/kubepods/burstable/pod5555-eeee"));
        let seen: Vec<(String, String, PathBuf)> = found(d, "/a/b-c")
            .into_iter()
            .map(|(uid, driver, _, path)| (uid, driver, path))
            .collect();
        assert_eq!(
            seen,
            [
                (
                    "5555-eeee".to_string(),
                    "cgroupfs".to_string(),
                    PathBuf::from("a/b-c/kubepods/burstable/pod5555-eeee")
                ),
                (
                    "4444-dddd".to_string(),
                    "systemd".to_string(),
                    PathBuf::from(pod)
                ),
            ]
        );
    }

    #[test]
    fn a_root_already_named_a_slice_is_read_as_kubelet_reads_it() {
        // kubelet takes `cgroupRoot` as a cgroupfs name and gives a part
        // ending in `.slice` no special reading: `/system.slice` is the
        // unit prefix `system.slice`, and so is `kubelet.slice`.
        for (root, pod) in [
            (
                "/system.slice",
                "system.slice.slice/system.slice-kubepods.slice/system.slice-kubepods-burstable.slice/system.slice-kubepods-burstable-pod6666.slice",
            ),
            (
                "kubelet.slice",
                "kubelet.slice.slice/kubelet.slice-kubepods.slice/kubelet.slice-kubepods-pod7777.slice",
            ),
        ] {
            let fs_root = v2();
            let d = fs_root.path();
            mkdir(&d.join(pod));
            // Where a reading that took the root as the slice itself
            // would look: not kubelet's.
            mkdir(&d.join("system.slice/system-kubepods.slice/system-kubepods-pod9999.slice"));
            mkdir(&d.join("kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod9999.slice"));
            let root = crate::sources::kubelet::clean_cgroup_root(Path::new(root));
            let seen = found(d, root.to_str().unwrap());
            assert_eq!(seen.len(), 1, "{root:?}: {seen:?}");
            assert_eq!(seen[0].3, PathBuf::from(pod));
        }
    }

    #[test]
    fn without_a_cgroup_per_pod_none_is_read() {
        let fs_root = v2();
        mkdir(&fs_root.path().join("kubepods/burstable/pod1111"));
        let root = || Located {
            path: PathBuf::from("/"),
            origin: Origin::Process,
        };
        let mut gaps = Vec::new();
        let off = Settings {
            driver: Some(KubeletSetting {
                value: "cgroupfs".to_string(),
                origin: Origin::KubeletConfig,
            }),
            per_qos: KubeletSetting {
                value: false,
                origin: Origin::KubeletConfig,
            },
        };
        let view = read(root(), off, fs_root.path(), &mut gaps).unwrap();
        assert!(view.pod_cgroups.is_empty(), "{:?}", view.pod_cgroups);
        assert!(gaps.is_empty(), "no findings, and no gap either: {gaps:?}");
        assert_eq!(
            (view.cgroups_per_qos.value, view.cgroups_per_qos.origin),
            (false, Origin::KubeletConfig)
        );
        assert_eq!(view.cgroup_driver.unwrap().value, "cgroupfs");
        let view = read(root(), defaults(), fs_root.path(), &mut gaps).unwrap();
        assert_eq!(view.pod_cgroups.len(), 1);
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
        // The systemd driver's layout of the same root (see
        // `a_systemd_cgroup_root_is_named_as_kubelets_to_systemd_names_it`).
        mkdir(&fs_root.path().join(
            "nodes.slice/nodes-a.slice/nodes-a-kubepods.slice/nodes-a-kubepods-besteffort.slice/nodes-a-kubepods-besteffort-pod3333_cccc.slice",
        ));
        let root = Located {
            path: PathBuf::from("/nodes/a"),
            origin: Origin::Flag,
        };
        let mut gaps = Vec::new();
        let mut view = read(root, defaults(), fs_root.path(), &mut gaps).unwrap();
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
        assert!(read(root(), defaults(), fs_root.path(), &mut gaps).is_none());
        mkdir(&fs_root.path().join("pids/kubepods/podabc"));
        let view = read(root(), defaults(), fs_root.path(), &mut gaps).unwrap();
        assert_eq!(view.version, 1);
        assert_eq!(view.pod_cgroups[0].uid, "abc");
    }
}
