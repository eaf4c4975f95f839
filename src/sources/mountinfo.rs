//! Mount table: the mounts containerd left behind (task rootfs, sandbox shm).

use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use procfs::process::MountInfo;

use crate::model::{Gap, Mount, Source};

const SOURCE: Source = Source::Mountinfo;
/// Ten thousand mounts are a few MiB of mountinfo.
pub(crate) const MOUNTINFO_LIMIT: u64 = 256 * 1024 * 1024;

/// Reads a mountinfo file (normally `/proc/self/mountinfo`), keeping only the
/// mounts below `dirs` (containerd's root and state) in every spelling of
/// them the table uses (see [`spellings`]): a node has thousands of other
/// mounts that no check looks at. A mount found below another spelling than
/// the one given carries the given one too (`Mount::as_given`).
pub fn read(mountinfo: &Path, dirs: &[&Path], gaps: &mut Vec<Gap>) -> Vec<Mount> {
    let Some(text) = table_text(mountinfo, gaps) else {
        return Vec::new();
    };
    let spellings = spellings(&text, dirs);
    mounts_below(&text, mountinfo, &spellings, gaps)
}

/// The mount table as read once, shared by the sources that look below
/// other directories in it (kubelet's pods, CRI's netns): on a node of ten
/// thousand mounts each read is megabytes the kernel writes anew.
pub type Table = std::sync::Arc<String>;

/// [`read`], keeping the table read for [`below_in`].
pub fn read_keeping(
    mountinfo: &Path,
    dirs: &[&Path],
    gaps: &mut Vec<Gap>,
) -> (Vec<Mount>, Option<Table>) {
    let Some(text) = table_text(mountinfo, gaps) else {
        return (Vec::new(), None);
    };
    let spellings = spellings(&text, dirs);
    let mounts = mounts_below(&text, mountinfo, &spellings, gaps);
    (mounts, Some(Table::new(text)))
}

/// The mounts below `dirs` in `table` when this look read it already,
/// else in `mountinfo` read now.
pub fn below_in(
    table: Option<&Table>,
    mountinfo: &Path,
    dirs: &[&Path],
    gaps: &mut Vec<Gap>,
) -> Vec<Mount> {
    match table {
        Some(text) => mounts_below(text, mountinfo, &spellings(text, dirs), gaps),
        None => read(mountinfo, dirs, gaps),
    }
}

/// [`read`] with `dirs` taken only as spelled, no directory looked at: for
/// the re-read around an unmount, which must not `stat` the very mount it
/// detaches (a stuck FUSE or NFS mount hangs a `stat`).
pub fn read_as_spelled(mountinfo: &Path, dirs: &[&Path], gaps: &mut Vec<Gap>) -> Vec<Mount> {
    let Some(text) = table_text(mountinfo, gaps) else {
        return Vec::new();
    };
    let spellings: Vec<Spelling> = dirs.iter().map(|dir| Spelling::given(dir)).collect();
    mounts_below(&text, mountinfo, &spellings, gaps)
}

fn table_text(mountinfo: &Path, gaps: &mut Vec<Gap>) -> Option<String> {
    match crate::read::bounded::read_proc(mountinfo, MOUNTINFO_LIMIT) {
        Ok(bytes) => Some(escape_invalid_utf8(bytes)),
        Err(err) => {
            gaps.push(Gap::source(SOURCE, mountinfo, err));
            None
        }
    }
}

/// One way the mount table may name a directory nodectl was given.
#[derive(Debug, PartialEq)]
struct Spelling<'a> {
    /// As the kernel writes it: an absolute path, no symlink, no `..`.
    in_table: PathBuf,
    /// The directory as nodectl was given it.
    given: &'a Path,
}

impl<'a> Spelling<'a> {
    fn given(dir: &'a Path) -> Spelling<'a> {
        Spelling {
            in_table: dir.to_path_buf(),
            given: dir,
        }
    }
}

/// Every spelling of each of `dirs` the mount table may use, each proven
/// to be that directory by its (device, inode), never by its name: the
/// directory as given (a table captured elsewhere, `--mountinfo`, spells
/// it so), its canonical path (through symlinks, `..`, `/var/run` →
/// `/run`), and every place `table` mounts it again: a bind mount of it or
/// of a directory above it, found by the mount's device and root (the
/// fourth field: where in its filesystem the mount starts).
///
/// A place below a spelling already found is left out: it is the
/// directory seen from inside a container (a `hostPath` in its rootfs),
/// and the mounts below it are that container's.
fn spellings<'a>(table: &str, dirs: &[&'a Path]) -> Vec<Spelling<'a>> {
    let mut found: Vec<Spelling<'a>> = dirs.iter().map(|dir| Spelling::given(dir)).collect();
    // A directory not here is known by its spelling alone.
    let here: Vec<(&Path, fs::Metadata, PathBuf)> = dirs
        .iter()
        .filter_map(|&dir| Some((dir, fs::metadata(dir).ok()?, fs::canonicalize(dir).ok()?)))
        .collect();
    for (given, _, canonical) in &here {
        if !found.iter().any(|s| s.in_table == *canonical) {
            found.push(Spelling {
                in_table: canonical.clone(),
                given,
            });
        }
    }
    let devices: Vec<String> = here
        .iter()
        .map(|(_, meta, _)| device_field(meta.dev()))
        .collect();
    // One search of the table for all of them, as for the mount points.
    let searched: Vec<String> = devices.iter().map(|d| format!(" {d} ")).collect();
    let same_devices: Vec<[&str; 3]> = lines_naming(table, &searched)
        .filter_map(|line| {
            let mut fields = line.split(' ').skip(2);
            Some([fields.next()?, fields.next()?, fields.next()?])
        })
        .collect();
    for ((given, meta, canonical), device) in here.iter().zip(&devices) {
        // (root, mount point) of each mount of the directory's filesystem,
        // as the table writes them: compared as they are, the thousands of
        // a node's bind mounts from its root filesystem cost no allocation.
        let mounts: Vec<(&str, &str)> = same_devices
            .iter()
            .filter(|[dev, _, _]| dev == device)
            .map(|&[_, root, point]| (root, point))
            .collect();
        let Some(inside) = path_in_filesystem(canonical, &mounts) else {
            continue;
        };
        let escaped_inside = escape(&inside);
        for (root, point) in &mounts {
            if !is_ancestor(root, &escaped_inside) {
                continue;
            }
            let Ok(rest) = inside.strip_prefix(unescape(root.as_bytes())) else {
                continue;
            };
            let place = join_below(&unescape(point.as_bytes()), rest);
            if found.iter().any(|s| place.starts_with(&s.in_table)) {
                continue;
            }
            let same =
                fs::metadata(&place).is_ok_and(|m| (m.dev(), m.ino()) == (meta.dev(), meta.ino()));
            if same {
                found.push(Spelling {
                    in_table: place,
                    given,
                });
            }
        }
    }
    found
}

/// Whether the escaped path `ancestor` is `path` or a directory above it,
/// both as mountinfo writes them (absolute, no `.`, `..` or doubled `/`).
fn is_ancestor(ancestor: &str, path: &str) -> bool {
    path.strip_prefix(ancestor)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/') || ancestor.ends_with('/'))
}

/// A device as mountinfo's third field writes it (`major:minor`).
fn device_field(dev: u64) -> String {
    format!("{}:{}", rustix::fs::major(dev), rustix::fs::minor(dev))
}

/// Where `canonical` lies inside its filesystem, from the mount of it
/// (`(root, mount point)` in `mounts`, escaped) whose point is its nearest
/// ancestor; of mounts stacked on one point, the last one, which is on top.
fn path_in_filesystem(canonical: &Path, mounts: &[(&str, &str)]) -> Option<PathBuf> {
    let escaped = escape(canonical);
    let (root, point) = mounts
        .iter()
        .filter(|(_, point)| is_ancestor(point, &escaped))
        .max_by_key(|(_, point)| point.len())?;
    let rest = canonical.strip_prefix(unescape(point.as_bytes())).ok()?;
    Some(join_below(&unescape(root.as_bytes()), rest))
}

/// `base` joined with `rest`, without the trailing `/` that joining an
/// empty `rest` adds (a mount table never writes one).
fn join_below(base: &Path, rest: &Path) -> PathBuf {
    if rest.as_os_str().is_empty() {
        base.to_path_buf()
    } else {
        base.join(rest)
    }
}

/// The mounts `table` names below one of `spellings`.
fn mounts_below(
    table: &str,
    mountinfo: &Path,
    spellings: &[Spelling],
    gaps: &mut Vec<Gap>,
) -> Vec<Mount> {
    // Full parsing (procfs's) is kept for the few lines whose raw mount point
    // could be below a spelling: on a node with ten thousand mounts, parsing
    // every line's options is most of the cost of this source.
    let prefixes: Vec<String> = spellings.iter().map(|s| escape(&s.in_table)).collect();
    let mut infos = Vec::new();
    for line in lines_naming(table, &prefixes) {
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
        .filter_map(|m| {
            let as_given = as_given(spellings, &m.mount_point)?;
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
            Some(Mount {
                mount_point: m.mount_point,
                as_given,
                fs_type: m.fs_type,
                source: m.mount_source,
                options,
            })
        })
        .collect()
}

/// Where `mount_point` is below one of `spellings`: `None` when below
/// none, `Some(None)` when below one as given, `Some(Some(path))` below
/// another spelling, `path` being it below the directory as given.
fn as_given(spellings: &[Spelling], mount_point: &Path) -> Option<Option<PathBuf>> {
    // The nearest spelling: a directory may lie below another.
    let spelling = spellings
        .iter()
        .filter(|s| mount_point.starts_with(&s.in_table))
        .max_by_key(|s| s.in_table.components().count())?;
    Some((spelling.in_table != spelling.given).then(|| {
        let rest = mount_point
            .strip_prefix(&spelling.in_table)
            .unwrap_or(Path::new(""));
        join_below(spelling.given, rest)
    }))
}

/// The mount points below `dirs` in `mountinfo`, each as it is below the
/// directory given ([`Mount::path_as_given`]): [`read`]'s mounts without
/// the rest of each line (source, type, options), for `watch`'s sample,
/// which asks only whether a rootfs is still mounted. Parsing the options
/// of a thousand containerd mounts every five seconds was most of what a
/// sample cost.
///
/// [`Mount::path_as_given`]: crate::model::Mount::path_as_given
pub fn points_below(mountinfo: &Path, dirs: &[&Path], gaps: &mut Vec<Gap>) -> Vec<PathBuf> {
    let Some(text) = table_text(mountinfo, gaps) else {
        return Vec::new();
    };
    let spellings = spellings(&text, dirs);
    let prefixes: Vec<String> = spellings.iter().map(|s| escape(&s.in_table)).collect();
    lines_naming(&text, &prefixes)
        .filter(|line| mount_point_under(line, &prefixes))
        .filter_map(|line| {
            let point = unescape(line.split(' ').nth(4)?.as_bytes());
            match as_given(&spellings, &point)? {
                Some(given) => Some(given),
                None => Some(point),
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

    #[test]
    fn a_table_read_once_is_looked_in_again_without_reading_the_file() {
        let table: Table = Table::new(
            "40 1 0:50 / /var/lib/kubelet/pods/u1/volumes/v rw - tmpfs tmpfs rw\n\
             41 1 0:4 net:[9] /var/run/netns/cni-1 rw - nsfs nsfs rw\n"
                .to_string(),
        );
        let mut gaps = Vec::new();
        let gone = Path::new("/nonexistent/mountinfo");
        let pods = below_in(
            Some(&table),
            gone,
            &[Path::new("/var/lib/kubelet/pods")],
            &mut gaps,
        );
        assert_eq!(pods.len(), 1);
        let netns = below_in(
            Some(&table),
            gone,
            &[Path::new("/var/run/netns")],
            &mut gaps,
        );
        assert_eq!(netns[0].fs_type, "nsfs");
        assert!(gaps.is_empty(), "the file was never read: {gaps:?}");
        // Without a table it is read, and its absence is a gap.
        assert!(below_in(None, gone, &[Path::new("/var/run/netns")], &mut gaps).is_empty());
        assert_eq!(gaps.len(), 1);
    }

    /// Reads `table` as a mountinfo file, keeping what is below `under`; no gap.
    fn read_table(table: &str, under: &str) -> Vec<Mount> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mountinfo");
        std::fs::write(&path, table).unwrap();
        let mut gaps = Vec::new();
        let mounts = read(&path, &[Path::new(under)], &mut gaps);
        assert!(gaps.is_empty(), "{gaps:?}");
        same_points(&path, Path::new(under), &mounts);
        mounts
    }

    /// `points_below` names the mounts `read` finds, each as given.
    fn same_points(mountinfo: &Path, dir: &Path, mounts: &[Mount]) {
        let mut gaps = Vec::new();
        let points = points_below(mountinfo, &[dir], &mut gaps);
        assert!(gaps.is_empty(), "{gaps:?}");
        let read: Vec<&Path> = mounts.iter().map(Mount::path_as_given).collect();
        assert_eq!(points, read, "points_below and read differ");
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

    /// Where each mount read below `dir` (not on it: a bind mount of it
    /// is one) is, as spelled below `dir` and as the table has it.
    fn found_below(mountinfo: &Path, dir: &Path) -> Vec<(PathBuf, PathBuf)> {
        let mut gaps = Vec::new();
        let mounts = read(mountinfo, &[dir], &mut gaps);
        assert!(gaps.is_empty(), "{gaps:?}");
        same_points(mountinfo, dir, &mounts);
        mounts
            .into_iter()
            .map(|m| (m.path_as_given().to_path_buf(), m.mount_point))
            .filter(|(as_given, _)| as_given != dir)
            .collect()
    }

    #[test]
    fn every_spelling_of_the_state_directory_finds_its_mounts() {
        // The table has the canonical path; nodectl is given a symlink to
        // it, a path through `..`, or (where /var/run is /run's symlink)
        // /var/run.
        let dir = tempfile::tempdir_in("/run").unwrap();
        let state = dir.path().join("state");
        let shm = "io.containerd.grpc.v1.cri/sandboxes/abc/shm";
        fs::create_dir_all(state.join(shm)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&state, &link).unwrap();
        let table = dir.path().join("mountinfo");
        fs::write(
            &table,
            format!(
                "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n\
                 311 22 0:53 / {} rw - tmpfs shm rw\n",
                escape(&state.join(shm))
            ),
        )
        .unwrap();
        let via_var_run = Path::new("/var/run").join(dir.path().strip_prefix("/run").unwrap());
        let mut spellings = vec![state.clone(), link, state.join("../state")];
        if fs::canonicalize("/var/run").is_ok_and(|p| p == Path::new("/run")) {
            spellings.push(via_var_run.join("state"));
        }
        for given in spellings {
            assert_eq!(
                found_below(&table, &given),
                [(given.join(shm), state.join(shm))],
                "--state {}",
                given.display()
            );
        }
    }

    /// Mounts made by a test, undone when it ends however it ends.
    struct Mounted(Vec<PathBuf>);

    impl Mounted {
        fn tmpfs(&mut self, at: &Path) {
            let flags = nix::mount::MsFlags::empty();
            nix::mount::mount(Some("tmpfs"), at, Some("tmpfs"), flags, None::<&str>).unwrap();
            self.0.push(at.to_path_buf());
        }

        fn bind(&mut self, from: &Path, at: &Path) {
            let flags = nix::mount::MsFlags::MS_BIND;
            nix::mount::mount(Some(from), at, None::<&str>, flags, None::<&str>).unwrap();
            self.0.push(at.to_path_buf());
        }
    }

    impl Drop for Mounted {
        fn drop(&mut self) {
            for point in self.0.iter().rev() {
                let _ = nix::mount::umount2(point, nix::mount::MntFlags::MNT_DETACH);
            }
        }
    }

    #[test]
    fn a_bind_mounted_state_directory_finds_the_mounts_below_the_original() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: mounting needs root");
            return;
        }
        // containerd's state is `real`; nodectl is given a bind mount of
        // it (`bind`), or of the directory above it (`above/real`).
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        let shm = "io.containerd.grpc.v1.cri/sandboxes/abc/shm";
        fs::create_dir_all(real.join(shm)).unwrap();
        let (bind, above) = (dir.path().join("bind"), dir.path().join("above"));
        fs::create_dir(&bind).unwrap();
        fs::create_dir(&above).unwrap();
        let mut mounted = Mounted(Vec::new());
        mounted.bind(&real, &bind);
        mounted.bind(dir.path(), &above);
        // Mounted after the binds, it is in the table below `real` only.
        mounted.tmpfs(&real.join(shm));
        let table = Path::new("/proc/self/mountinfo");
        for given in [bind, above.join("real"), real.clone()] {
            assert_eq!(
                found_below(table, &given),
                [(given.join(shm), real.join(shm))],
                "--state {}",
                given.display()
            );
        }
    }

    #[test]
    fn a_view_of_the_state_directory_from_inside_a_container_is_not_a_spelling_of_it() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: mounting needs root");
            return;
        }
        // A container's hostPath of the state directory, bound into its
        // rootfs, and a tmpfs its process mounted there: the container's
        // own mount, never taken for a sandbox's shm of the node.
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let rootfs = state.join("io.containerd.runtime.v2.task/k8s.io/abc/rootfs");
        let host_path = rootfs.join("host-state");
        let shm = "io.containerd.grpc.v1.cri/sandboxes/abc/shm";
        fs::create_dir_all(&host_path).unwrap();
        fs::create_dir_all(state.join(shm)).unwrap();
        let mut mounted = Mounted(Vec::new());
        mounted.bind(&state, &host_path);
        mounted.tmpfs(&host_path.join(shm));
        let found = found_below(Path::new("/proc/self/mountinfo"), &state);
        let inside = host_path.join(shm);
        assert!(
            found.contains(&(inside.clone(), inside)),
            "read where it is, not as {}: {found:?}",
            state.join(shm).display()
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
