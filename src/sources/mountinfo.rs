//! Mount table: the mounts containerd left behind (task rootfs, sandbox shm).

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use procfs::process::MountInfo;

use crate::model::{Gap, Mount, Source};

const SOURCE: Source = Source::Mountinfo;
/// Ten thousand mounts are a few MiB of mountinfo.
pub(crate) const MOUNTINFO_LIMIT: u64 = 256 * 1024 * 1024;

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
    for line in lines_naming(&text, &prefixes) {
        if !mount_point_under(line, &prefixes) {
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

/// Whether the raw (escaped) mount point of a mountinfo line, its fifth
/// field, starts with one of `prefixes`.
fn mount_point_under(line: &str, prefixes: &[String]) -> bool {
    line.split(' ')
        .nth(4)
        .is_some_and(|point| prefixes.iter().any(|p| point.starts_with(p.as_str())))
}

/// The lines of `table` that contain one of `prefixes` anywhere, in table
/// order, each once: the only ones whose mount point can start with one.
/// Found by searching the table for each prefix (memchr's vectorised
/// search) rather than cutting every line into fields: on a node with ten
/// thousand mounts, of which containerd's are a tenth, that cut was the
/// better part of this source's time.
fn lines_naming<'a>(table: &'a str, prefixes: &[String]) -> impl Iterator<Item = &'a str> {
    let bytes = table.as_bytes();
    let mut starts: Vec<usize> = Vec::new();
    for prefix in prefixes {
        if prefix.is_empty() {
            // Every line names the empty prefix.
            starts.push(0);
            starts.extend(memchr::memchr_iter(b'\n', bytes).map(|end| end + 1));
            continue;
        }
        let finder = memchr::memmem::Finder::new(prefix.as_bytes());
        let mut from = 0;
        while let Some(found) = finder.find(&bytes[from..]) {
            let at = from + found;
            starts.push(memchr::memrchr(b'\n', &bytes[..at]).map_or(0, |end| end + 1));
            // On to the next line: a rootfs line names containerd's root
            // in every lower directory of its overlay options.
            match memchr::memchr(b'\n', &bytes[at..]) {
                Some(end) => from = at + end + 1,
                None => break,
            }
        }
    }
    starts.sort_unstable();
    starts.dedup();
    starts
        .into_iter()
        .filter_map(move |start| table[start..].lines().next())
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

    /// The lines the search finds are those a cut of every line finds.
    #[test]
    fn the_lines_searched_for_are_the_lines_every_line_cut_into_fields_gives() {
        use proptest::prelude::*;
        let field = prop::sample::select(vec![
            "/",
            "/run",
            "/run/containerd",
            "/run/containerd/x",
            "/run/containerdx",
            "/var/lib/containerd/a",
            "-",
            "rw",
            "",
            "/run/containerd/a\\040b",
        ]);
        let line = prop::collection::vec(field, 0..8).prop_map(|fields| fields.join(" "));
        let table = prop::collection::vec(line, 0..12).prop_map(|lines| lines.join("\n"));
        let prefixes = prop::collection::vec(
            prop::sample::select(vec!["/run/containerd", "/var/lib/containerd", "/", ""]),
            1..3,
        );
        proptest!(|(table in table, prefixes in prefixes)| {
            let prefixes: Vec<String> = prefixes.into_iter().map(String::from).collect();
            let every: Vec<&str> = table
                .lines()
                .filter(|line| mount_point_under(line, &prefixes))
                .collect();
            let found: Vec<&str> = lines_naming(&table, &prefixes)
                .filter(|line| mount_point_under(line, &prefixes))
                .collect();
            prop_assert_eq!(found, every);
        });
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
