//! Mount table: the mounts containerd left behind (task rootfs, sandbox shm).

use std::path::Path;

use procfs::process::MountInfos;
use procfs::FromRead;

use crate::snapshot::{Gap, Mount};

const SOURCE: &str = "mountinfo";

/// Reads a mountinfo file (normally `/proc/self/mountinfo`), keeping only the
/// mounts below `under` (containerd's state and root): a node has thousands of
/// other mounts that no check looks at.
pub fn read(mountinfo: &Path, under: &[&Path], gaps: &mut Vec<Gap>) -> Vec<Mount> {
    let infos = match MountInfos::from_file(mountinfo) {
        Ok(infos) => infos,
        Err(err) => {
            gaps.push(Gap::source(SOURCE, mountinfo, err));
            return Vec::new();
        }
    };
    infos
        .into_iter()
        .filter(|m| under.iter().any(|dir| m.mount_point.starts_with(dir)))
        .map(|m| {
            let mut options: Vec<String> = m
                .mount_options
                .iter()
                .chain(m.super_options.iter())
                .map(|(k, v)| match v {
                    Some(v) => format!("{k}={v}"),
                    None => k.clone(),
                })
                .collect();
            options.sort();
            options.dedup();
            Mount {
                mount_point: m.mount_point,
                fs_type: m.fs_type,
                source: m.mount_source,
                options,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_containerd_mounts_with_their_options() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mountinfo");
        std::fs::write(
            &path,
            "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
             310 22 0:52 / /run/containerd/io.containerd.runtime.v2.task/k8s.io/abc/rootfs rw,relatime - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w,volatile\n\
             311 22 0:53 / /run/containerd/io.containerd.grpc.v1.cri/sandboxes/def/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k\n",
        )
        .unwrap();
        let mut gaps = Vec::new();
        let mounts = read(&path, &[Path::new("/run/containerd")], &mut gaps);
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(mounts.len(), 2);
        assert_eq!(mounts[0].fs_type, "overlay");
        assert!(mounts[0].options.contains(&"volatile".to_string()));
        assert!(mounts[0].options.contains(&"upperdir=/u".to_string()));
        assert_eq!(
            mounts[1].mount_point,
            Path::new("/run/containerd/io.containerd.grpc.v1.cri/sandboxes/def/shm")
        );
    }

    #[test]
    fn unreadable_mountinfo_is_a_source_gap() {
        let mut gaps = Vec::new();
        let mounts = read(
            Path::new("/nonexistent/mountinfo"),
            &[Path::new("/")],
            &mut gaps,
        );
        assert!(mounts.is_empty());
        assert!(gaps[0].source_unavailable);
    }
}
