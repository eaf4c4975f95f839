//! The kernel's facts about a process called containerd, and about who
//! serves a socket: what `crate::paths` proves the daemon with.
//!
//! Anyone can start a process whose `comm` and executable's name say
//! containerd, with any command line: a `docker:dind` pod does, and so can
//! a tenant who wants nodectl (root) to read its paths or run its binary.
//! What such a process cannot choose: the mount and pid namespaces it runs
//! in, who owns the file the kernel executed for it, and whether it is the
//! process listening on the socket nodectl is about to ask (the kernel
//! records the listener's credentials at `listen`, and hands them to every
//! connection as `SO_PEERCRED`), nor the uids it runs as: an unprivileged
//! user may run root's own `/usr/bin/containerd` with a config of its own,
//! a socket, root and state in its home, and while the node's containerd is
//! down it was taken for the daemon. Those are read here, as data; the
//! judgement is [`disqualified`], pure.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{open, AtFlags, OFlag};
use nix::sys::socket::{self, sockopt, AddressFamily, SockFlag, SockType, UnixAddr};
use nix::sys::stat::{fstatat, Mode};

use crate::model::{FileId, NamespaceIds};

/// The namespaces a daemon must share: PID 1's (the host's, also from a
/// DaemonSet pod with `hostPID`), or nodectl's own when PID 1 cannot be read
/// (a sandbox hiding it; then nodectl runs in the host's namespaces or
/// proves nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// `PID 1` or `nodectl itself`.
    pub described: &'static str,
    pub namespaces: NamespaceIds,
    /// nodectl's own effective uid: a daemon runs as root, or (nodectl run
    /// by a user, which can act on nothing of root's) as that user.
    pub uid: u32,
}

/// What the kernel says of one process called containerd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonFacts {
    pub namespaces: Result<NamespaceIds, String>,
    pub executable: Result<Executable, String>,
    /// Real, effective, saved and filesystem uids (`/proc/<pid>/status`).
    pub uids: Result<Vec<u32>, String>,
}

/// The file the kernel executed for a process (`stat` of `/proc/<pid>/exe`,
/// which reaches it in the process's own mount namespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Executable {
    pub regular: bool,
    pub uid: u32,
    pub mode: u32,
}

/// The process listening on a socket, as the kernel recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// In nodectl's pid namespace; 0 when the listener's is not visible
    /// from it.
    pub pid: i32,
    pub uid: u32,
}

/// The host's namespaces under `proc_root` (see [`Host`]).
pub fn host(proc_root: &Path) -> Option<Host> {
    [("PID 1", "1"), ("nodectl itself", "self")]
        .into_iter()
        .find_map(|(described, dir)| {
            let dir = File::open(proc_root.join(dir)).ok()?;
            Some(Host {
                described,
                namespaces: namespaces(&dir).ok()?,
                uid: nix::unistd::geteuid().as_raw(),
            })
        })
}

/// The facts of `<proc_root>/<pid>`, read through one open directory: it
/// pins the process, so a pid reused meanwhile fails the reads (ESRCH).
pub fn facts(proc_root: &Path, pid: i32) -> DaemonFacts {
    let dir = proc_root.join(pid.to_string());
    let dir = match File::open(&dir) {
        Ok(dir) => dir,
        Err(err) => {
            let err = format!("{}: {err}", dir.display());
            return DaemonFacts {
                namespaces: Err(err.clone()),
                executable: Err(err.clone()),
                uids: Err(err),
            };
        }
    };
    DaemonFacts {
        namespaces: namespaces(&dir),
        executable: fstatat(&dir, "exe", AtFlags::empty())
            .map(|stat| Executable {
                regular: stat.st_mode & libc_s_ifmt() == libc_s_ifreg(),
                uid: stat.st_uid,
                mode: stat.st_mode & 0o7777,
            })
            .map_err(|err| format!("its executable could not be read (exe: {})", err.desc())),
        uids: status_uids(&dir),
    }
}

/// `/proc/<pid>/status` is a couple of kB.
const STATUS_LIMIT: usize = 64 * 1024;

/// The `Uid:` line of `status` in the open `/proc/<pid>` directory `dir`:
/// real, effective, saved and filesystem uid.
pub(crate) fn status_uids(dir: &File) -> Result<Vec<u32>, String> {
    let mut buffer = Vec::with_capacity(crate::read::bounded::RECORD_READ);
    let filled = crate::read::bounded::read_proc_record_at(dir, "status", &mut buffer)
        .map_err(|err| format!("status: {err}"))?;
    let text = String::from_utf8_lossy(&buffer[..filled.min(STATUS_LIMIT)]);
    text.lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .ok_or_else(|| "status: no Uid line".to_string())?
        .split_whitespace()
        .map(|u| u.parse::<u32>().map_err(|e| format!("status: {e}")))
        .collect()
}

/// Why a process with these facts is not a daemon nodectl may believe, if
/// anything says so. Pure.
pub fn disqualified(facts: &DaemonFacts, host: Option<&Host>) -> Option<String> {
    let Some(host) = host else {
        return Some(
            "the host's namespaces could not be read (neither PID 1's nor nodectl's own), so nothing can be compared with them"
                .to_string(),
        );
    };
    let ours = match &facts.namespaces {
        Ok(ours) => ours,
        Err(err) => return Some(format!("its namespaces could not be read: {err}")),
    };
    for (what, theirs, host_ns) in [
        ("mount", ours.mnt, host.namespaces.mnt),
        ("pid", ours.pid, host.namespaces.pid),
    ] {
        if theirs != host_ns {
            return Some(format!(
                "it runs in another {what} namespace ({what}:[{theirs}], {} is in {what}:[{host_ns}])",
                host.described
            ));
        }
    }
    // containerd runs as root (its real and effective uid): only root can
    // mount a rootfs, and only root's daemon is the node's. (nodectl run by
    // a user, which can act on nothing of root's, may also believe that
    // user's own.)
    match facts.uids.as_deref() {
        Err(err) => return Some(format!("its uids could not be read: {err}")),
        Ok([real, effective, ..]) if !trusted(host, *real) || !trusted(host, *effective) => {
            return Some(format!(
                "it runs as uid {real} (effective {effective}), not root"
            ))
        }
        Ok([_, _, ..]) => {}
        Ok(_) => return Some("its uids could not be read: a short Uid line".to_string()),
    }
    match &facts.executable {
        Err(err) => Some(err.clone()),
        Ok(exe) if !exe.regular => Some("its executable is not a regular file".to_string()),
        Ok(exe) if exe.uid != 0 => Some(format!(
            "its executable is owned by uid {}, not root",
            exe.uid
        )),
        Ok(exe) if exe.mode & 0o022 != 0 => Some(format!(
            "its executable is writable by others than root (mode {:o})",
            exe.mode
        )),
        Ok(_) => None,
    }
}

/// Why what `path` names could be swapped by someone other than root, if
/// it could: `path` resolved (symlinks and all, as the daemon's socket and
/// directories are used), each directory from `/` down to it (the socket's
/// or file's own directory included) must be root's (or nodectl's own
/// user's: see [`Host::uid`]) and writable by group or others only with
/// the sticky bit (`/tmp`: others may not rename what is not theirs). A
/// path that does not exist yet is judged by the part that does.
pub fn swappable(path: &Path) -> Option<String> {
    let mut existing = path;
    let resolved = loop {
        match std::fs::canonicalize(existing) {
            Ok(resolved) => break resolved,
            Err(_) => existing = existing.parent()?,
        }
    };
    let metadata = std::fs::metadata(&resolved).ok()?;
    let dir = match metadata.is_dir() {
        true => resolved.as_path(),
        false => resolved.parent()?,
    };
    let mut ancestors: Vec<&Path> = dir.ancestors().collect();
    ancestors.reverse();
    for ancestor in ancestors {
        let Ok(meta) = std::fs::symlink_metadata(ancestor) else {
            return Some(format!("{} could not be read", ancestor.display()));
        };
        let mode = meta.mode();
        if meta.uid() != 0 && meta.uid() != nix::unistd::geteuid().as_raw() {
            return Some(format!(
                "{} is owned by uid {}, who could swap what it holds",
                ancestor.display(),
                meta.uid()
            ));
        }
        if mode & 0o022 != 0 && mode & 0o1000 == 0 {
            return Some(format!(
                "{} is writable by group or others (mode {:o}), who could swap what it holds",
                ancestor.display(),
                mode & 0o7777
            ));
        }
    }
    None
}

/// Whether a daemon running as `uid` may be believed: root's, or nodectl's
/// own user's (see [`Host::uid`]).
pub fn trusted(host: &Host, uid: u32) -> bool {
    uid == 0 || uid == host.uid
}

/// Who listens on the socket at `path`, as nodectl resolves it (symlinks,
/// `..` and bind mounts all reach the one socket): a connection is made,
/// its peer's credentials read, and it is closed. Non-blocking: a listener
/// whose backlog is full (a frozen daemon) is an error, not a wait.
pub fn serving(path: &Path) -> Result<Peer, String> {
    connect_checked(path).map(|(_, peer)| peer)
}

/// A connection to the socket at `path` (see [`serving`]) and its peer's
/// credentials, read on that very connection: a caller that sends its calls
/// over it talks to the process it checked, whatever is renamed over the
/// path afterwards. The socket is non-blocking.
pub fn connect_checked(path: &Path) -> Result<(std::os::unix::net::UnixStream, Peer), String> {
    // sun_path holds 108 bytes: the socket is reached through its open
    // directory instead, whatever the length of the path to it.
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| format!("{} names no file", path.display()))?;
    let dir = open(
        parent,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|err| format!("{}: {}", parent.display(), err.desc()))?;
    connect_checked_at(&dir, name)
}

/// Who listens on the socket `name` in the open directory `dir` (see
/// [`serving`]): for a socket found by a path resolved elsewhere (inside a
/// process's own root).
pub fn serving_at(dir: &impl AsFd, name: &std::ffi::OsStr) -> Result<Peer, String> {
    connect_checked_at(dir, name).map(|(_, peer)| peer)
}

fn connect_checked_at(
    dir: &impl AsFd,
    name: &std::ffi::OsStr,
) -> Result<(std::os::unix::net::UnixStream, Peer), String> {
    let mut short = PathBuf::from(format!("/proc/self/fd/{}", dir.as_fd().as_raw_fd()));
    short.push(name);
    let address =
        UnixAddr::new(short.as_os_str().as_bytes()).map_err(|err| err.desc().to_string())?;
    let socket = socket::socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|err| format!("creating a socket: {}", err.desc()))?;
    match socket::connect(socket.as_raw_fd(), &address) {
        Ok(()) => {}
        Err(nix::errno::Errno::EAGAIN) => {
            return Err("its listener accepts no connection (its backlog is full)".to_string())
        }
        Err(nix::errno::Errno::ECONNREFUSED) => {
            return Err("nothing listens on it (connection refused)".to_string())
        }
        Err(nix::errno::Errno::ENOENT) => return Err("it does not exist".to_string()),
        Err(err) => return Err(format!("connecting to it: {}", err.desc())),
    }
    let credentials = socket::getsockopt(&socket, sockopt::PeerCredentials)
        .map_err(|err| format!("reading its peer's credentials: {}", err.desc()))?;
    let peer = Peer {
        pid: credentials.pid(),
        uid: credentials.uid(),
    };
    Ok((std::os::unix::net::UnixStream::from(socket), peer))
}

/// [`serving`] for a socket a process names, resolved inside that
/// process's root (`/proc/<pid>/root`), as the process itself bound it.
pub fn serving_in(proc_root: &Path, pid: i32, path: &Path) -> Result<Peer, String> {
    serving(&in_root(proc_root, pid, path))
}

/// A directory's identity as nodectl resolves its path.
pub fn file_id(path: &Path) -> Result<FileId, String> {
    std::fs::metadata(path)
        .map(|m| FileId {
            dev: m.dev(),
            ino: m.ino(),
        })
        .map_err(|err| format!("{}: {err}", path.display()))
}

/// [`file_id`] of a path a process names, resolved inside its root.
pub fn file_id_in(proc_root: &Path, pid: i32, path: &Path) -> Result<FileId, String> {
    file_id(&in_root(proc_root, pid, path)).map_err(|_| {
        format!(
            "{} could not be resolved in containerd pid {pid}'s root",
            path.display()
        )
    })
}

fn in_root(proc_root: &Path, pid: i32, path: &Path) -> PathBuf {
    let relative = path.strip_prefix("/").unwrap_or(path);
    proc_root.join(pid.to_string()).join("root").join(relative)
}

/// `ns/mnt` and `ns/pid` (and `ns/user`) of an open `/proc/<pid>`, by the
/// inode of each namespace.
fn namespaces(dir: &File) -> Result<NamespaceIds, String> {
    let inode = |name: &str| {
        fstatat(dir, name, AtFlags::empty())
            .map(|stat| stat.st_ino)
            .map_err(|err| format!("{name}: {}", err.desc()))
    };
    Ok(NamespaceIds {
        user: inode("ns/user")?,
        pid: inode("ns/pid")?,
        mnt: inode("ns/mnt")?,
    })
}

fn libc_s_ifmt() -> u32 {
    0o170000
}

fn libc_s_ifreg() -> u32 {
    0o100000
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    fn host() -> Host {
        Host {
            described: "PID 1",
            namespaces: NamespaceIds {
                user: 1,
                pid: 2,
                mnt: 3,
            },
            uid: 0,
        }
    }

    fn daemon() -> DaemonFacts {
        DaemonFacts {
            namespaces: Ok(host().namespaces),
            executable: Ok(Executable {
                regular: true,
                uid: 0,
                mode: 0o755,
            }),
            uids: Ok(vec![0, 0, 0, 0]),
        }
    }

    #[test]
    fn only_a_root_owned_binary_in_the_hosts_namespaces_may_be_the_daemon() {
        assert_eq!(disqualified(&daemon(), Some(&host())), None);
        let with = |change: fn(&mut DaemonFacts)| {
            let mut facts = daemon();
            change(&mut facts);
            disqualified(&facts, Some(&host())).unwrap_or_default()
        };
        // A container's process: its own mount namespace, or its own pid
        // namespace (`unshare -m -p --fork`).
        assert!(with(|f| f.namespaces.as_mut().unwrap().mnt = 9).contains("mount namespace"));
        assert!(with(|f| f.namespaces.as_mut().unwrap().pid = 9).contains("pid namespace"));
        assert!(with(|f| f.namespaces = Err("ns/mnt: EACCES".into())).contains("EACCES"));
        assert!(with(|f| f.executable.as_mut().unwrap().uid = 1000).contains("uid 1000"));
        assert!(with(|f| f.executable.as_mut().unwrap().mode = 0o777).contains("writable"));
        assert!(with(|f| f.executable.as_mut().unwrap().regular = false).contains("regular"));
        assert!(with(|f| f.executable = Err("exe: ENOENT".into())).contains("ENOENT"));
        // Root's binary run by a user, or by a setuid program for one.
        assert!(with(|f| f.uids = Ok(vec![1001; 4])).contains("runs as uid 1001"));
        assert!(with(|f| f.uids = Ok(vec![1001, 0, 0, 0])).contains("uid 1001 (effective 0)"));
        assert!(with(|f| f.uids = Ok(vec![0, 1001, 0, 0])).contains("effective 1001"));
        assert!(with(|f| f.uids = Ok(vec![0])).contains("short Uid line"));
        assert!(with(|f| f.uids = Err("status: ESRCH".into())).contains("ESRCH"));
        // Nothing to compare with proves nothing.
        assert!(disqualified(&daemon(), None).is_some());
    }

    #[test]
    fn nodectl_itself_is_in_the_hosts_namespaces_when_pid_1_is_hidden() {
        let found = super::host(Path::new("/proc")).expect("procfs is mounted");
        let me = facts(Path::new("/proc"), std::process::id() as i32);
        if found.described == "nodectl itself" {
            assert_eq!(me.namespaces.unwrap(), found.namespaces);
        }
        let uid = nix::unistd::getuid().as_raw();
        assert_eq!(me.uids.unwrap()[0], uid, "the real uid, first");
        // A fake procfs without namespaces proves nothing.
        let fake = tempfile::tempdir().unwrap();
        assert_eq!(super::host(fake.path()), None);
    }

    #[test]
    fn a_path_is_swappable_when_a_directory_on_its_way_is_another_users_or_anyones() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        assert_eq!(swappable(&state), None);
        assert_eq!(
            swappable(&state.join("not/yet")),
            None,
            "judged by what exists"
        );
        let socket = dir.path().join("c.sock");
        let _listener = UnixListener::bind(&socket).unwrap();
        assert_eq!(swappable(&socket), None);
        // Anyone may write the directory: they could swap what it holds.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let why = swappable(&state).unwrap_or_default();
        assert!(why.contains("writable by group or others"), "{why}");
        assert!(swappable(&socket).is_some());
        // With the sticky bit (as /tmp) they may not rename what is not theirs.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(swappable(&state), None);
        // Reached through a symlink: the directory it resolves to is judged.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&state, &link).unwrap();
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(swappable(&link).is_some());
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Another user's directory (only root can give one away to test).
        if nix::unistd::geteuid().is_root() {
            std::os::unix::fs::chown(&state, Some(65534), None).unwrap();
            let why = swappable(&state.join("io.containerd.runtime.v2.task")).unwrap_or_default();
            assert!(why.contains("owned by uid 65534"), "{why}");
        }
    }

    #[test]
    fn the_peer_of_a_socket_is_its_listener_whatever_the_spelling() {
        let dir = tempfile::tempdir().unwrap();
        // Longer than sun_path's 108 bytes: still reached.
        let deep = dir.path().join("d".repeat(100)).join("e".repeat(40));
        std::fs::create_dir_all(&deep).unwrap();
        // Bound at a short path, then moved there: the socket goes along.
        let short = dir.path().join("l.sock");
        let _listener = UnixListener::bind(&short).unwrap();
        let path = deep.join("listening.sock");
        std::fs::rename(&short, &path).unwrap();
        let me = std::process::id() as i32;
        assert_eq!(serving(&path).unwrap().pid, me);
        let link = dir.path().join("link.sock");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert_eq!(serving(&link).unwrap().pid, me);
        let dotted = deep.join("..").join("e".repeat(40)).join("listening.sock");
        assert_eq!(serving(&dotted).unwrap().pid, me);

        assert!(serving(&dir.path().join("none.sock"))
            .unwrap_err()
            .contains("does not exist"));
        // A socket file whose listener is gone.
        let stale = dir.path().join("stale.sock");
        drop(UnixListener::bind(&stale).unwrap());
        assert!(serving(&stale).unwrap_err().contains("refused"));
    }
}

/// A file a process holds open: the path its descriptor's link names (a
/// spelling, used only to pick candidates) and the descriptor.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenFile {
    pub fd: i32,
    pub link: PathBuf,
}

/// A daemon holds a few hundred descriptors (one per shim connection and
/// pod stream); more than this are not looked through.
const OPEN_FILES_LIMIT: usize = 65_536;

/// The files (not sockets, pipes or anonymous inodes) process `pid` holds
/// open, by `/proc/<pid>/fd`'s links: one `readlink` each, which never
/// touches the file's own filesystem.
pub fn open_files(proc_root: &Path, pid: i32) -> Result<Vec<OpenFile>, String> {
    let dir = proc_root.join(pid.to_string()).join("fd");
    let entries = std::fs::read_dir(&dir).map_err(|err| format!("{}: {err}", dir.display()))?;
    let mut files = Vec::new();
    for (seen, entry) in entries.enumerate() {
        if seen == OPEN_FILES_LIMIT {
            return Err(format!(
                "{} holds over {OPEN_FILES_LIMIT} descriptors",
                dir.display()
            ));
        }
        let Ok(entry) = entry else { continue };
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        match std::fs::read_link(entry.path()) {
            Ok(link) if link.is_absolute() => files.push(OpenFile { fd, link }),
            _ => {}
        }
    }
    files.sort_by_key(|f| f.fd);
    Ok(files)
}

/// The identity of the very file process `pid` holds open as `fd` (the
/// magic link followed to the open file, whatever its path says now).
pub fn open_file_id(proc_root: &Path, pid: i32, fd: i32) -> Result<FileId, String> {
    file_id(
        &proc_root
            .join(pid.to_string())
            .join("fd")
            .join(fd.to_string()),
    )
}

/// A `stat` record is a few hundred bytes.
const STAT_LIMIT: u64 = 64 * 1024;

/// When process `pid` started, in ns since the epoch, to a clock tick.
pub fn started_nanos(proc_root: &Path, pid: i32) -> Result<i64, String> {
    use super::proc_stat::{boot_time_nanos, parse_stat, ticks_to_nanos};
    let path = proc_root.join(pid.to_string()).join("stat");
    let record = crate::read::bounded::read_proc_string(&path, STAT_LIMIT)
        .map_err(|err| format!("{}: {err}", path.display()))?;
    let stat =
        parse_stat(record.as_bytes()).ok_or_else(|| format!("{}: unreadable", path.display()))?;
    let ticks = procfs::ticks_per_second() as i64;
    Ok(boot_time_nanos(proc_root)?.saturating_add(ticks_to_nanos(stat.starttime, ticks)))
}
