//! Mount table: the mounts containerd left behind (task rootfs, sandbox shm).

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use procfs::process::MountInfo;

use crate::model::{Gap, Mount, Source};

const SOURCE: Source = Source::Mountinfo;
/// Ten thousand mounts are a few MiB of mountinfo.
const MOUNTINFO_LIMIT: u64 = 256 * 1024 * 1024;

/// Reads a mountinfo file (normally `/proc/self/mountinfo`), keeping only the
/// mounts below `under` (containerd's state and root): a node has thousands of
/// other mounts that no check looks at.
pub fn read(mountinfo: &Path, under: &[&Path], gaps: &mut Vec<Gap>) -> Vec<Mount> {
    let text = match crate::sources::read_proc(mountinfo, MOUNTINFO_LIMIT) {
        Ok(bytes) => escape_invalid_utf8(bytes),
        Err(err) => {
            gaps.push(Gap::source(SOURCE, mountinfo, err));
            return Vec::new();
        }
    };
    // Full parsing (procfs's) is kept for the few lines whose raw mount point
    // could be below `under`: on a node with ten thousand mounts, parsing
    // every line's options is most of the cost of this source.
    let prefixes: Vec<String> = under.iter().map(|dir| escape(dir)).collect();
    let mut infos = Vec::new();
    for line in text.lines() {
        let Some(raw_mount_point) = line.split(' ').nth(4) else {
            continue;
        };
        if !prefixes
            .iter()
            .any(|p| raw_mount_point.starts_with(p.as_str()))
        {
            continue;
        }
        match MountInfo::from_line(line) {
            // procfs leaves the kernel's escapes in place.
            Ok(info) => infos.push(MountInfo {
                mount_point: unescape(info.mount_point.as_os_str().as_bytes()),
                ..info
            }),
            // One line the parser refuses is one mount not seen, not the
            // whole table unreadable.
            Err(err) => gaps.push(Gap::item(SOURCE, mountinfo, format!("{err}: {line}"))),
        }
    }
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

/// A path as the kernel writes it in mountinfo: space, tab, newline and
/// backslash as octal escapes.
fn escape(path: &Path) -> String {
    let mut escaped = Vec::new();
    for &byte in path.as_os_str().as_bytes() {
        match byte {
            b' ' | b'\t' | b'\n' | b'\\' => escaped.extend(format!("\\{byte:03o}").bytes()),
            _ => escaped.push(byte),
        }
    }
    // As the table is read: see `escape_invalid_utf8`.
    escape_invalid_utf8(escaped)
}

/// mountinfo as text for procfs's parser, with every byte that is not
/// UTF-8 written as the kernel's own octal escape: [`unescape`] then gives
/// a mount point's exact bytes back (a lossy U+FFFD would name a path that
/// does not exist). The kernel escapes `\` itself, so no escape is made up.
fn escape_invalid_utf8(bytes: Vec<u8>) -> String {
    // Nearly always UTF-8 throughout: then the bytes are the text, neither
    // copied nor decoded piece by piece (megabytes on a big node).
    let bytes = match String::from_utf8(bytes) {
        Ok(text) => return text,
        Err(err) => err.into_bytes(),
    };
    let mut text = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        text.push_str(chunk.valid());
        for byte in chunk.invalid() {
            text.push_str(&format!("\\{byte:03o}"));
        }
    }
    text
}

/// The path a mountinfo field stands for: `\ooo` octal escapes decoded.
fn unescape(field: &[u8]) -> PathBuf {
    let mut bytes = Vec::with_capacity(field.len());
    let mut rest = field;
    while let Some((&byte, tail)) = rest.split_first() {
        let octal = tail
            .get(..3)
            .filter(|digits| digits.iter().all(|d| (b'0'..=b'7').contains(d)));
        match octal {
            Some(digits) if byte == b'\\' => {
                let value = digits.iter().fold(0u32, |v, d| v * 8 + u32::from(d - b'0'));
                bytes.push(value as u8);
                rest = &tail[3..];
            }
            _ => {
                bytes.push(byte);
                rest = tail;
            }
        }
    }
    PathBuf::from(OsString::from_vec(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `table` as a mountinfo file, keeping what is below `under`; no gap.
    fn read_table(table: &str, under: &str) -> Vec<Mount> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mountinfo");
        std::fs::write(&path, table).unwrap();
        let mut gaps = Vec::new();
        let mounts = read(&path, &[Path::new(under)], &mut gaps);
        assert!(gaps.is_empty(), "{gaps:?}");
        mounts
    }

    #[test]
    fn keeps_containerd_mounts_with_their_options() {
        let mounts = read_table(
            "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
             310 22 0:52 / /run/containerd/io.containerd.runtime.v2.task/k8s.io/abc/rootfs rw,relatime - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w,volatile\n\
             311 22 0:53 / /run/containerd/io.containerd.grpc.v1.cri/sandboxes/def/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k\n",
            "/run/containerd",
        );
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
    fn state_dir_with_a_space_is_matched_through_its_escape() {
        let mounts = read_table(
            "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
             310 22 0:52 / /srv/my\\040state/io.containerd.runtime.v2.task/k8s.io/abc/rootfs rw - overlay overlay rw\n\
             311 22 0:53 / /srv/my\\040state2/x rw - tmpfs shm rw\n\
             312 22 0:54 / /srv/my rw - tmpfs shm rw\n",
            "/srv/my state",
        );
        let points: Vec<_> = mounts.iter().map(|m| m.mount_point.clone()).collect();
        assert_eq!(
            points,
            [Path::new(
                "/srv/my state/io.containerd.runtime.v2.task/k8s.io/abc/rootfs"
            )]
        );
    }

    #[test]
    fn a_mount_point_that_is_not_utf8_reads_back_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mountinfo");
        std::fs::write(
            &path,
            b"310 22 0:52 / /run/containerd/\x80\\040x rw - overlay overlay\xff rw\n",
        )
        .unwrap();
        let mut gaps = Vec::new();
        let mounts = read(&path, &[Path::new("/run/containerd")], &mut gaps);
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(
            mounts[0].mount_point.as_os_str().as_bytes(),
            b"/run/containerd/\x80 x"
        );
    }

    #[test]
    fn a_line_that_does_not_parse_is_an_item_gap_and_the_rest_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mountinfo");
        std::fs::write(
            &path,
            "310 22 0:52 / /run/containerd/a/rootfs rw\n\
             311 22 0:53 / /run/containerd/b/rootfs rw - overlay overlay rw\n",
        )
        .unwrap();
        let mut gaps = Vec::new();
        let mounts = read(&path, &[Path::new("/run/containerd")], &mut gaps);
        assert_eq!(mounts.len(), 1, "{mounts:?}");
        assert_eq!(mounts[0].mount_point, Path::new("/run/containerd/b/rootfs"));
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(!gaps[0].source_unavailable, "{gaps:?}");
        assert!(
            gaps[0].error.contains("/run/containerd/a/rootfs"),
            "{gaps:?}"
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

    #[test]
    fn a_mountinfo_that_is_a_fifo_is_a_gap_at_once_not_a_hang() {
        // `--mountinfo` names any path; a FIFO with no writer blocked the
        // open (and so the whole source) until the deadline.
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("mountinfo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let mut gaps = Vec::new();
        assert!(read(&fifo, &[Path::new("/")], &mut gaps).is_empty());
        assert!(gaps[0].error.contains("a FIFO"), "{:?}", gaps[0]);
    }
}
