//! Which `containerd-shim*` processes really are shims of the containerd
//! nodectl talks to.
//!
//! argv, `comm` and the working directory are the process's own to set: any
//! user can `exec -a containerd-shim-runc-v2 … -address /run/containerd/containerd.sock`
//! from any directory. What it cannot set is the file the kernel executed
//! (`/proc/<pid>/exe`), the uids it runs as and the namespaces it is in.
//! containerd starts its shims as itself, in its own user, pid and mount
//! namespaces, from a root-owned binary, and passes them its own socket as
//! `-address`. A shim is proven when all of that holds and `-address`,
//! resolved inside the shim's root, is the very file (device and inode)
//! nodectl's `--address` names, however either is spelled.
//!
//! The facts are read here, as data ([`ShimProof`]); [`identity`] judges
//! them, purely, so an archive is judged as the live run was.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::fcntl::AtFlags;
use nix::fcntl::{openat, openat2, readlinkat, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{fstat, fstatat, Mode};

#[cfg(test)]
use crate::model::shim::{bundle_dir, identity, is_identifier, Identity};
use crate::model::{
    FileId, Gap, NamespaceIds, Paths, ProcessInfo, ProofReference, Shim, ShimProof,
};
use crate::sources::proc_stat;

use crate::model::sample::SAME_START_NANOS as SAME_START;
/// `/proc/<pid>/status` is a couple of kB.
const STATUS_LIMIT: u64 = 64 * 1024;

/// Reads the proof of every shim of a scan; a shim that exited or whose pid
/// was reused since the scan is dropped (churn, as in the scan itself). A
/// file of a running shim that could not be read is a gap, unless the scan
/// already has one for that process (one gap per process).
pub fn prove_all(
    proc_root: &Path,
    paths: &Paths,
    shims: &mut Vec<Shim>,
    processes: &std::collections::BTreeMap<i32, ProcessInfo>,
    gaps: &mut Vec<Gap>,
) {
    if shims.is_empty() {
        return;
    }
    let reference = reference(proc_root, paths);
    let boot = proc_stat::boot_time_nanos(proc_root).ok();
    let scanned: &[Gap] = gaps;
    // A dozen reads each, independent: two cores halve them.
    let pieces = crate::read::deadline::on_two_threads(shims, PARALLEL_FROM, |shims| {
        // Each `/proc/<pid>` opened relative to the proc root, open once
        // for each piece (see `open_dir`).
        let root = crate::read::bounded::open_dir(&nix::fcntl::AT_FDCWD, proc_root).ok();
        shims
            .iter()
            .map(|shim| {
                let started_at = processes.get(&shim.pid).map(|p| p.started_at);
                let dir = proc_root.join(shim.pid.to_string());
                let mut unread = ProofReadFailures::new(&dir);
                let opened = match &root {
                    Some(root) => {
                        crate::read::bounded::open_dir(root, shim.pid.to_string().as_str())
                    }
                    None => crate::read::bounded::open_dir(&nix::fcntl::AT_FDCWD, &dir),
                };
                let proof = opened.ok().and_then(|opened| {
                    prove(&opened, shim, started_at, boot, &reference, &mut unread)
                });
                let known = scanned.iter().any(|g| g.path.starts_with(&dir));
                let gap = proof
                    .as_ref()
                    .filter(|_| !known)
                    .and_then(|_| unread.unread.into_gap());
                (proof, gap)
            })
            .collect::<Vec<_>>()
    });
    let mut proofs = pieces.into_iter().flatten();
    let mut new_gaps = Vec::new();
    shims.retain_mut(|shim| {
        let (proof, gap) = proofs.next().expect("a proof for every shim");
        new_gaps.extend(gap);
        match proof {
            Some(proof) => {
                shim.proof = Some(proof);
                true
            }
            None => false,
        }
    });
    gaps.extend(new_gaps);
}

/// Below this many shims, one thread proves them all.
const PARALLEL_FROM: usize = 64;

/// The running containerd nodectl uses (or PID 1 when none was identified:
/// then shims must at least share the host's namespaces and run as root),
/// and the socket `--address` names, as nodectl itself resolves it.
pub fn reference(proc_root: &Path, paths: &Paths) -> ProofReference {
    // As nodectl resolves it; where nodectl (in another mount namespace: a
    // `kubectl debug node` pod) has no file there, as the daemon does,
    // below its own root: the socket its shims' `-address` names.
    let address = &paths.address.path;
    let in_daemons_root = || {
        let process = paths.process.as_ref()?;
        let relative = address.strip_prefix("/").ok()?;
        std::fs::metadata(
            proc_root
                .join(process.pid.to_string())
                .join("root")
                .join(relative),
        )
        .ok()
    };
    let address_file = std::fs::metadata(address)
        .ok()
        .or_else(in_daemons_root)
        .map(|m| FileId {
            dev: m.dev(),
            ino: m.ino(),
        });
    let mut unreadable = ProofReadFailures::new(proc_root);
    let open = |pid: &str| File::open(proc_root.join(pid)).ok();
    let (described, dir, uid) = match &paths.process {
        Some(process) => {
            let dir = open(&process.pid.to_string());
            let uid = dir
                .as_ref()
                .and_then(|d| uids(d, &mut unreadable).get(1).copied());
            (
                format!("containerd pid {}", process.pid),
                dir,
                uid.unwrap_or(0),
            )
        }
        // No containerd to compare with: shims must at least share the
        // host's namespaces (PID 1's, under hostPID too) and run as root.
        // PID 1 may be unreadable (a sandbox hiding it): then nodectl's own.
        None => {
            match open("1")
                .filter(|d| namespaces(d, &mut ProofReadFailures::new(proc_root)).is_some())
            {
                Some(dir) => (
                    "PID 1 (no running containerd identified)".to_string(),
                    Some(dir),
                    0,
                ),
                None => (
                    "nodectl itself (no running containerd identified, PID 1 unreadable)"
                        .to_string(),
                    open("self"),
                    0,
                ),
            }
        }
    };
    let namespaces = dir.as_ref().and_then(|d| namespaces(d, &mut unreadable));
    ProofReference {
        described,
        uid,
        namespaces,
        address_file,
    }
}

/// Reads `shim`'s facts through one open `/proc/<pid>` directory: it pins
/// that process, so every read fails (ESRCH) once it has exited, even if
/// its pid is reused meanwhile; the start time ties it to the scanned one.
fn prove(
    dir: &File,
    shim: &Shim,
    started_at: Option<i64>,
    boot: Option<i64>,
    reference: &ProofReference,
    unreadable: &mut ProofReadFailures,
) -> Option<ShimProof> {
    if let (Some(started_at), Some(boot)) = (started_at, boot) {
        let stat = proc_stat::read_stat_at(dir, "stat", &mut Vec::new())?;
        let now = boot.saturating_add(proc_stat::ticks_to_nanos(
            stat.starttime,
            procfs::ticks_per_second() as i64,
        ));
        if now.abs_diff(started_at) >= SAME_START.unsigned_abs() {
            return None;
        }
    }
    let exe = match readlinkat(dir, "exe") {
        Ok(exe) => Some(PathBuf::from(exe)),
        Err(err) => {
            unreadable.os("exe", err);
            None
        }
    };
    // The exe link followed: the file the kernel mapped, wherever it is now.
    let exe_stat = fstatat(dir, "exe", AtFlags::empty())
        .map_err(|err| unreadable.os("exe", err))
        .ok();
    let uids = uids(dir, unreadable);
    let namespaces = namespaces(dir, unreadable);
    let address_file = shim
        .address
        .as_deref()
        .and_then(|address| resolve_in_root(dir, address, unreadable));
    // Only where argv leaves what it serves unknown: a process that names
    // an id blocks what it names whatever it holds.
    let listens = match shim.id {
        None => listens_on_a_unix_socket(dir, SHIM_SOCKET_PLACES, unreadable),
        Some(_) => None,
    };
    Some(ShimProof {
        exe,
        exe_regular: exe_stat.is_some_and(|s| s.st_mode & libc_s_ifmt() == libc_s_ifreg()),
        exe_uid: exe_stat.map(|s| s.st_uid),
        exe_mode: exe_stat.map(|s| s.st_mode & 0o7777),
        uids,
        namespaces,
        address_file,
        listens,
        unreadable: unreadable.said.clone(),
        reference: reference.clone(),
    })
}

/// What could not be read of one process: said in its proof, and noted for
/// its gap when it failed for another reason than the process's exit.
struct ProofReadFailures {
    /// `/proc/<pid>`, whose files the names are relative to.
    dir: PathBuf,
    said: Vec<String>,
    unread: proc_stat::FailedReads,
}

impl ProofReadFailures {
    fn new(dir: &Path) -> ProofReadFailures {
        ProofReadFailures {
            dir: dir.to_path_buf(),
            said: Vec::new(),
            unread: proc_stat::FailedReads::default(),
        }
    }

    /// A call on the process's file `name` failed with `err`.
    fn os(&mut self, name: &str, err: nix::errno::Errno) {
        self.said.push(format!("{name}: {err}"));
        self.unread
            .note(&self.dir.join(name), &std::io::Error::from(err));
    }

    /// A read of the process's file `name` failed with `err`.
    fn io(&mut self, name: &str, err: &std::io::Error) {
        self.said.push(format!("{name}: {err}"));
        self.unread.note(&self.dir.join(name), err);
    }

    /// What the process's file `name` holds is not what the kernel writes.
    fn data(&mut self, name: &str, what: String) {
        self.said.push(format!("{name}: {what}"));
    }
}

fn libc_s_ifmt() -> u32 {
    nix::libc::S_IFMT
}

fn libc_s_ifreg() -> u32 {
    nix::libc::S_IFREG
}

/// Real, effective, saved and filesystem uids, as seen from nodectl's user
/// namespace (a uid 0 inside a user namespace of its own shows as the uid
/// it maps to).
fn uids(dir: &File, unreadable: &mut ProofReadFailures) -> Vec<u32> {
    let file = match openat(
        dir,
        "status",
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(file) => file,
        Err(err) => {
            unreadable.os("status", err);
            return Vec::new();
        }
    };
    let mut text = String::new();
    if let Err(err) = File::from(file)
        .take(STATUS_LIMIT)
        .read_to_string(&mut text)
    {
        unreadable.io("status", &err);
        return Vec::new();
    }
    let parsed = text
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .ok_or_else(|| "no Uid line".to_string())
        .and_then(|line| {
            line.split_whitespace()
                .map(|u| u.parse::<u32>().map_err(|e| e.to_string()))
                .collect()
        });
    parsed.unwrap_or_else(|what| {
        unreadable.data("status", what);
        Vec::new()
    })
}

/// The most of `net/unix` read: a node's table is a line (about 100 bytes)
/// per unix socket in the namespace; past this the answer is unknown.
const NET_UNIX_LIMIT: u64 = 16 << 20;
/// `__SO_ACCEPTCON` in `net/unix`'s Flags: set exactly on a listening
/// socket (linux net/unix/af_unix.c, `unix_seq_show`).
const SO_ACCEPTCON: u32 = 1 << 16;

/// Where a shim without `-id` serves. Only the runtime v1 shim
/// (`containerd-shim`, 1.6 and 1.7; gone in 2.0) runs without one, and it
/// listens on `/run/containerd/s/<sha256>` (`shimAddress` of
/// runtime/v1/linux/bundle.go: a fixed root, whatever the daemon's state),
/// or, started by a containerd before 1.3.9 and 1.4.3, on the abstract
/// `@/containerd-shim/<ns>/<id>/shim.sock`. Every runtime v2 shim has
/// `-id`; 2.x's `-info` run has no socket.
const SHIM_SOCKET_PLACES: &[&str] = &["/run/containerd/s/", "@/containerd-shim/"];

/// Whether the process holds a listening unix socket bound under one of
/// `places`, by the kernel's word: the inodes of its `fd/` links
/// `socket:[N]` against the listening rows of `net/unix` (its own network
/// namespace's table, whose Inode column is that N, whose Path column is
/// where it was bound). Every running shim holds one for its whole life: its
/// `start` binds and listens before it starts the shim, which inherits it
/// and serves on it until it exits (`NewSocket` and `serveListener`,
/// runtime/v2/shim on 1.7, pkg/shim on 2.x). `None` when that cannot be
/// read.
fn listens_on_a_unix_socket(
    dir: &File,
    places: &[&str],
    unreadable: &mut ProofReadFailures,
) -> Option<bool> {
    let listed = openat(
        dir,
        "fd",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .and_then(nix::dir::Dir::from_fd);
    let mut fds = match listed {
        Ok(fds) => fds,
        Err(err) => {
            unreadable.os("fd", err);
            return None;
        }
    };
    let names: Vec<String> = fds
        .iter()
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str().ok().map(str::to_string))
        .filter(|name| name.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    let sockets: std::collections::HashSet<u64> = names
        .iter()
        .filter_map(|name| readlinkat(&fds, name.as_str()).ok())
        .filter_map(|target| {
            let target = target.to_str()?.strip_prefix("socket:[")?;
            target.strip_suffix(']')?.parse().ok()
        })
        .collect();
    if names.is_empty() {
        unreadable.data("fd", "no descriptor listed".to_string());
        return None;
    }
    if sockets.is_empty() {
        return Some(false);
    }
    let table = match openat(
        dir,
        "net/unix",
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(file) => file,
        Err(err) => {
            unreadable.os("net/unix", err);
            return None;
        }
    };
    let mut text = String::new();
    let mut file = File::from(table).take(NET_UNIX_LIMIT);
    if let Err(err) = file.read_to_string(&mut text) {
        unreadable.io("net/unix", &err);
        return None;
    }
    if text.len() as u64 >= NET_UNIX_LIMIT {
        unreadable.data("net/unix", format!("longer than {NET_UNIX_LIMIT} bytes"));
        return None;
    }
    let listens = listening_sockets(&text).any(|(inode, path)| {
        sockets.contains(&inode) && places.iter().any(|place| path.starts_with(place))
    });
    Some(listens)
}

/// The inodes and paths of the listening sockets of a `net/unix` table:
/// its columns are `Num RefCount Protocol Flags Type St Inode Path`,
/// numbers in hex but the inode, the path absent for an unbound socket and
/// `@`-prefixed for an abstract one (`unix_seq_show`).
fn listening_sockets(table: &str) -> impl Iterator<Item = (u64, &str)> + '_ {
    table.lines().skip(1).filter_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let flags = u32::from_str_radix(fields.get(3)?, 16).ok()?;
        if flags & SO_ACCEPTCON == 0 {
            return None;
        }
        let inode = fields.get(6)?.parse::<u64>().ok()?;
        Some((inode, fields.get(7).copied().unwrap_or("")))
    })
}

fn namespaces(dir: &File, unreadable: &mut ProofReadFailures) -> Option<NamespaceIds> {
    let mut inode = |name: &str| match fstatat(dir, name, AtFlags::empty()) {
        Ok(stat) => Some(stat.st_ino),
        Err(err) => {
            unreadable.os(name, err);
            None
        }
    };
    Some(NamespaceIds {
        user: inode("ns/user")?,
        pid: inode("ns/pid")?,
        mnt: inode("ns/mnt")?,
    })
}

/// The file `address` names for the process: resolved with its root as `/`
/// (symlinks included, via openat2's RESOLVE_IN_ROOT: an absolute symlink
/// must not escape to nodectl's root), a relative one from its working
/// directory. Opened O_PATH, which never opens the file itself: a FIFO or
/// device there cannot block or act.
fn resolve_in_root(
    dir: &File,
    address: &str,
    unreadable: &mut ProofReadFailures,
) -> Option<FileId> {
    let path = Path::new(address.strip_prefix("unix://").unwrap_or(address));
    let path: PathBuf = if path.is_relative() {
        match readlinkat(dir, "cwd") {
            Ok(cwd) => PathBuf::from(cwd).join(path),
            Err(err) => {
                unreadable.os("cwd", err);
                return None;
            }
        }
    } else {
        path.to_path_buf()
    };
    let path_flags = OFlag::O_PATH | OFlag::O_CLOEXEC;
    let resolved = openat(dir, "root", path_flags | OFlag::O_DIRECTORY, Mode::empty()).and_then(
        |root: OwnedFd| {
            openat2(
                root.as_fd(),
                &path,
                OpenHow::new()
                    .flags(path_flags)
                    .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS),
            )
        },
    );
    match resolved.and_then(|fd| fstat(&fd)) {
        Ok(stat) => Some(FileId {
            dev: stat.st_dev,
            ino: stat.st_ino,
        }),
        Err(err) => {
            unreadable
                .said
                .push(format!("-address {}: {err}", path.display()));
            // A socket that is not there is said in the proof; a gap only
            // when reading through the process's root was refused.
            if matches!(err, nix::errno::Errno::EACCES | nix::errno::Errno::EPERM) {
                let root = unreadable.dir.join("root");
                unreadable.unread.note(&root, &std::io::Error::from(err));
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::model::fixtures::*;

    fn with(change: impl FnOnce(&mut ShimProof)) -> Identity {
        let mut shim = proven(shim(500, &id('s'), ADDRESS, &[]));
        change(shim.proof.as_mut().unwrap());
        identity(&shim)
    }

    fn impostor_because(identity: Identity, words: &str) {
        match identity {
            Identity::Impostor(why) => assert!(why.contains(words), "{why}"),
            other => panic!("not an impostor: {other:?}"),
        }
    }

    #[test]
    fn the_listening_rows_of_net_unix_are_told_by_their_flags() {
        // As linux prints it: a listener (00010000), a connected stream, an
        // unbound socket, and the header.
        let table = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 41213 /run/containerd/s/5e1f\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 41219 /run/containerd/s/5e1f\n\
            0000000000000000: 00000002 00000000 00000000 0002 01 41220\n";
        assert_eq!(
            listening_sockets(table).collect::<Vec<_>>(),
            [(41213, "/run/containerd/s/5e1f")]
        );
    }

    #[test]
    fn this_process_is_read_as_holding_a_listener_once_it_does_where_asked() {
        let dir = File::open(format!("/proc/{}", std::process::id())).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let here = format!("{}/", tmp.path().display());
        let mut unreadable = ProofReadFailures::new(Path::new("/proc/self"));
        // A bound but not listening socket is no listener.
        let _unbound = std::os::unix::net::UnixDatagram::bind(tmp.path().join("d")).unwrap();
        let before = listens_on_a_unix_socket(&dir, &[&here], &mut unreadable);
        let listener = std::os::unix::net::UnixListener::bind(tmp.path().join("s")).unwrap();
        let after = listens_on_a_unix_socket(&dir, &[&here], &mut unreadable);
        let elsewhere = listens_on_a_unix_socket(&dir, &["/elsewhere/"], &mut unreadable);
        drop(listener);
        assert_eq!(after, Some(true), "{:?}", unreadable.said);
        // Nothing else listens in this test's own temp dir; bound under
        // it, the listener is not where a shim's is.
        assert_eq!(before, Some(false), "{:?}", unreadable.said);
        assert_eq!(elsewhere, Some(false), "{:?}", unreadable.said);
    }

    #[test]
    fn containerds_own_facts_prove_a_shim() {
        assert_eq!(with(|_| {}), Identity::Ours);
        // A deleted (upgraded) binary still running is still the shim.
        assert_eq!(
            with(|p| p.exe = Some("/usr/bin/containerd-shim-runc-v2 (deleted)".into())),
            Identity::Ours
        );
    }

    #[test]
    fn the_executable_not_argv_must_be_a_root_owned_shim_binary() {
        impostor_because(
            with(|p| p.exe = Some("/usr/bin/bash".into())),
            "/usr/bin/bash",
        );
        impostor_because(with(|p| p.exe = None), "could not be read");
        impostor_because(with(|p| p.exe_regular = false), "not a regular file");
        impostor_because(with(|p| p.exe_uid = Some(65534)), "owned by uid 65534");
        impostor_because(with(|p| p.exe_mode = Some(0o777)), "writable by others");
    }

    #[test]
    fn a_rootless_containerds_shims_run_as_its_uid() {
        let rootless = |p: &mut ShimProof| {
            p.reference.uid = 1000;
            p.uids = vec![1000; 4];
        };
        assert_eq!(with(rootless), Identity::Ours);
        assert_eq!(
            with(|p| {
                rootless(p);
                p.exe_uid = Some(1000);
            }),
            Identity::Ours
        );
        impostor_because(
            with(|p| {
                rootless(p);
                p.exe_uid = Some(1001);
            }),
            "owned by uid 1001",
        );
    }

    #[test]
    fn another_uid_or_namespace_than_containerds_is_an_impostor() {
        impostor_because(
            with(|p| p.uids = vec![65534; 4]),
            "runs as uid 65534/65534/65534/65534 where containerd pid 812 runs as uid 0",
        );
        // A saved uid is enough to tell: setuid games do not pass.
        impostor_because(with(|p| p.uids = vec![0, 0, 65534, 0]), "runs as uid");
        for (kind, change) in [
            ("user", NamespaceIds { user: 7, ..NS }),
            ("pid", NamespaceIds { pid: 7, ..NS }),
            ("mount", NamespaceIds { mnt: 7, ..NS }),
        ] {
            impostor_because(
                with(|p| p.namespaces = Some(change)),
                &format!("another {kind} namespace (7) than containerd pid 812"),
            );
        }
        impostor_because(with(|p| p.namespaces = None), "could not be read");
    }

    #[test]
    fn the_address_is_compared_by_identity_not_spelling() {
        // Spelled differently, same file: ours.
        let mut spelled = proven(shim(
            500,
            &id('s'),
            "/var/run/containerd/containerd.sock",
            &[],
        ));
        assert_eq!(identity(&spelled), Identity::Ours);
        // Spelled the same, another file: not ours, and not an impostor.
        spelled = proven(shim(500, &id('s'), ADDRESS, &[]));
        spelled.proof.as_mut().unwrap().address_file = Some(FileId { dev: 8, ino: 100 });
        assert!(
            matches!(identity(&spelled), Identity::Other(why) if why.contains("another socket"))
        );
        assert!(matches!(
            with(|p| p.address_file = None),
            Identity::Other(why) if why.contains("does not resolve")
        ));
        assert!(matches!(
            with(|p| p.reference.address_file = None),
            Identity::Other(why) if why.contains("does not exist")
        ));
    }

    #[test]
    fn namespace_and_id_must_be_containerd_identifiers() {
        for bad in ["../../etc", "a/b", "..", "", "-a", "a..b", &"a".repeat(77)] {
            assert!(!is_identifier(bad), "{bad:?}");
            let mut forged = proven(shim(500, bad, ADDRESS, &[]));
            impostor_because(identity(&forged), "-id");
            forged.id = Some(id('s'));
            forged.namespace = Some(bad.to_string());
            impostor_because(identity(&forged), "-namespace");
            assert_eq!(bundle_dir(Path::new("/run/containerd"), &forged), None);
        }
        for good in ["k8s.io", "moby", &id('a'), "a-b_c.d"] {
            assert!(is_identifier(good), "{good:?}");
        }
    }

    #[test]
    fn the_bundle_is_below_state_never_the_working_directory() {
        let mut s = proven(shim(500, &id('s'), ADDRESS, &[]));
        s.cwd = Some("/etc".into());
        assert_eq!(
            bundle_dir(Path::new("/run/containerd"), &s),
            Some(PathBuf::from(format!(
                "/run/containerd/io.containerd.runtime.v2.task/k8s.io/{}",
                id('s')
            )))
        );
    }

    #[test]
    fn an_archive_from_before_proofs_is_judged_by_its_address() {
        let old = shim(500, &id('s'), ADDRESS, &[]);
        assert_eq!(identity(&old), Identity::Unproven);
        assert!(old.serves(Path::new(ADDRESS)));
        let json = serde_json::to_value(&old).unwrap();
        let mut map = json.as_object().unwrap().clone();
        map.remove("proof");
        let back: Shim = serde_json::from_value(map.into()).unwrap();
        assert_eq!(back.proof, None);
    }

    #[test]
    fn this_process_is_read_as_what_it_is() {
        // nodectl's tests run as a test binary: a real process, read live.
        let me = std::process::id() as i32;
        // -address through a symlink: the file it names is what counts.
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("c.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&target).unwrap();
        let link = dir.path().join("link.sock");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut s = shim(me, &id('s'), &format!("unix://{}", link.display()), &[]);
        let mut paths = snapshot().paths;
        paths.address.path = target.clone();
        let mut shims = vec![s.clone()];
        prove_all(
            Path::new("/proc"),
            &paths,
            &mut shims,
            &Default::default(),
            &mut Vec::new(),
        );
        s = shims.pop().expect("a live process is kept");
        let proof = s.proof.as_ref().unwrap();
        assert_eq!(
            proof.exe.as_deref(),
            std::env::current_exe().ok().as_deref()
        );
        assert!(proof.exe_regular);
        assert!(proof.namespaces.is_some());
        assert!(proof.address_file.is_some(), "{:?}", proof.unreadable);
        assert_eq!(proof.address_file, proof.reference.address_file);
        // A magic link (/proc/self/...) is not followed into another root.
        let mut magic = shim(me, &id('s'), "/proc/self/exe", &[]);
        let mut shims = vec![magic.clone()];
        prove_all(
            Path::new("/proc"),
            &paths,
            &mut shims,
            &Default::default(),
            &mut Vec::new(),
        );
        magic = shims.pop().unwrap();
        assert_eq!(magic.proof.unwrap().address_file, None);
        impostor_because(identity(&s), "not a containerd-shim binary");
    }

    #[test]
    fn many_shims_are_proven_on_two_threads_each_kept_in_order_or_dropped() {
        // Live (this process) every third, gone (past any pid Linux gives)
        // between, more than one thread proves alone.
        let me = std::process::id() as i32;
        let shims: Vec<Shim> = (0..2 * PARALLEL_FROM)
            .map(|i| {
                let pid = if i % 3 == 0 { me } else { 4_194_304 + i as i32 };
                let mut shim = shim(pid, &id('s'), ADDRESS, &[]);
                shim.id = Some(format!("{i:03}"));
                shim
            })
            .collect();
        let mut proven = shims.clone();
        let mut gaps = Vec::new();
        prove_all(
            Path::new("/proc"),
            &snapshot().paths,
            &mut proven,
            &Default::default(),
            &mut gaps,
        );
        let kept: Vec<_> = proven.iter().map(|s| s.id.clone().unwrap()).collect();
        let live: Vec<_> = (0..2 * PARALLEL_FROM)
            .step_by(3)
            .map(|i| format!("{i:03}"))
            .collect();
        assert_eq!(kept, live);
        assert!(proven
            .iter()
            .all(|s| s.proof.as_ref().is_some_and(|p| p.exe.is_some())));
        assert!(gaps.is_empty(), "{gaps:?}");
    }
}
