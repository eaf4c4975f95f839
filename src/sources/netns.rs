//! The pods' network namespaces CRI mounted: the nsfs mounts in its netns
//! directory, from the mount table, each `stat`ed for its namespace's
//! inode; and, for those a check asks about, a process in each.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::model::{Gap, NetnsMount, NetnsView, Paths, Source};
use crate::read::bounded::mtime_nanos;
use crate::sources::mountinfo;

pub(crate) const SOURCE: Source = Source::Mountinfo;
/// CRI's netns directory unless `netns_mounts_under_state_dir`.
pub const DEFAULT_DIR: &str = "/var/run/netns";

/// CRI's netns directory for `paths`.
pub fn dir(paths: &Paths) -> PathBuf {
    match paths.netns_under_state_dir {
        true => paths.state.path.join("io.containerd.grpc.v1.cri/netns"),
        false => PathBuf::from(DEFAULT_DIR),
    }
}

/// The nsfs mounts directly in `dir`.
pub fn read(
    dir: &Path,
    table: Option<&mountinfo::Table>,
    mountinfo_file: &Path,
    gaps: &mut Vec<Gap>,
) -> NetnsView {
    let mut mounts: Vec<NetnsMount> = mountinfo::below_in(table, mountinfo_file, &[dir], gaps)
        .into_iter()
        .filter(|m| m.fs_type == "nsfs")
        .filter(|m| m.path_as_given().parent() == Some(dir))
        .filter_map(|m| {
            let path = m.path_as_given().to_path_buf();
            // stat of an nsfs bind mount is the namespace's own inode.
            let metadata = match fs::metadata(&m.mount_point) {
                Ok(metadata) => metadata,
                Err(err) => {
                    gaps.push(Gap::item(SOURCE, &m.mount_point, err.to_string()));
                    return None;
                }
            };
            Some(NetnsMount {
                path,
                inode: metadata.ino(),
                created_at: mtime_nanos(&metadata).unwrap_or_default(),
            })
        })
        .collect();
    mounts.sort_by(|a, b| a.path.cmp(&b.path));
    NetnsView {
        dir: dir.to_path_buf(),
        mounts,
        ..NetnsView::default()
    }
}

/// Looks for a process in each namespace of `inodes`, among `pids`, by
/// the kernel's own link (`/proc/<pid>/ns/net` → `net:[<inode>]`).
pub fn find_users(
    view: &mut NetnsView,
    inodes: &BTreeSet<u64>,
    proc_root: &Path,
    pids: impl Iterator<Item = i32>,
) {
    view.users_looked_for = true;
    if inodes.is_empty() {
        return;
    }
    for pid in pids {
        let Ok(link) = fs::read_link(proc_root.join(format!("{pid}/ns/net"))) else {
            continue;
        };
        let inode = link
            .to_str()
            .and_then(|l| l.strip_prefix("net:["))
            .and_then(|l| l.strip_suffix(']'))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(inode) = inode.filter(|i| inodes.contains(i)) {
            view.users.entry(inode).or_insert(pid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_found_by_its_namespace_s_inode() {
        let proc_root = tempfile::tempdir().unwrap();
        for (pid, link) in [(10, "net:[111]"), (11, "net:[222]"), (12, "mnt:[111]")] {
            let ns = proc_root.path().join(format!("{pid}/ns"));
            fs::create_dir_all(&ns).unwrap();
            std::os::unix::fs::symlink(link, ns.join("net")).unwrap();
        }
        let mut view = NetnsView::default();
        let wanted = BTreeSet::from([111, 333]);
        find_users(
            &mut view,
            &wanted,
            proc_root.path(),
            [10, 11, 12, 13].into_iter(),
        );
        assert!(view.users_looked_for);
        assert_eq!(view.users.into_iter().collect::<Vec<_>>(), [(111, 10)]);
    }

    #[test]
    fn the_directory_follows_the_config() {
        let mut paths = crate::model::fixtures::snapshot().paths;
        assert_eq!(dir(&paths), PathBuf::from(DEFAULT_DIR));
        paths.netns_under_state_dir = true;
        assert_eq!(
            dir(&paths),
            paths.state.path.join("io.containerd.grpc.v1.cri/netns")
        );
    }
}
