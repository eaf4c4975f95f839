//! The pods' network namespaces CRI mounted: the nsfs mounts in its netns
//! directory, from the mount table, each `stat`ed for its namespace's
//! identity (nsfs device and inode); and, for those a check asks about,
//! what holds each (a thread in it, a descriptor on it) and, for those
//! nothing holds, the interfaces in it.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs;
use std::io::{self, Read};
use std::os::fd::BorrowedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::sched::{setns, CloneFlags};

use crate::model::netns::foreign_interfaces;
use crate::model::{Gap, HeldBy, NetnsHolder, NetnsMount, NetnsView, Paths, Source};
use crate::read::bounded::{mtime_nanos, open_at, open_dir, open_regular, Links};
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
                // Gone from a directory still there: unmounted and removed
                // since the table was read, as CRI's RemovePodSandbox does
                // (`netns.Remove`: unmount, then remove the file) while
                // kubelet tears a pod down. No mount, and nothing unseen.
                Err(err) if err.kind() == io::ErrorKind::NotFound && dir.is_dir() => {
                    return None;
                }
                Err(err) => {
                    gaps.push(Gap::item(SOURCE, &m.mount_point, err.to_string()));
                    return None;
                }
            };
            Some(NetnsMount {
                path,
                inode: metadata.ino(),
                device: metadata.dev(),
                created_at: mtime_nanos(&metadata).unwrap_or_default(),
                interfaces: None,
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

/// How long looking for the holders of the namespaces asked about may
/// take: a readlink per descriptor and a stat per thread, a node's worth
/// in well under a second. Past it nothing is known to be unheld.
const HOLDERS_TIME: Duration = Duration::from_secs(5);

/// Looks, among `pids`, for what holds each namespace of `wanted` (nsfs
/// device and inode): a thread in it (`/proc/<pid>/task/<tid>/ns/net`:
/// any thread, as `ip netns exec` in a thread or a Go program's locked
/// thread joins only its own) or a descriptor open on it
/// (`/proc/<pid>/fd/<n>`, as a runtime or `ip netns` keeps one), each by
/// the identity the kernel gives the link's target (`stat`), never by a
/// name. `holders_looked_for` only when every process was read whole, but
/// for those the kernel will not let nodectl see (`holders_unread`, named
/// in a gap by [`note_unread_holders`] when a verdict rests on them); any
/// other failure leaves it false, with a gap.
pub fn find_holders(
    view: &mut NetnsView,
    wanted: &BTreeSet<(u64, u64)>,
    proc_root: &Path,
    pids: impl Iterator<Item = i32>,
    gaps: &mut Vec<Gap>,
) {
    view.holders_looked_for = false;
    if wanted.is_empty() {
        view.holders_looked_for = true;
        return;
    }
    // The file names of the namespaces asked about, as a descriptor
    // opened through their mounts spells them.
    let names: BTreeSet<&OsStr> = view
        .mounts
        .iter()
        .filter(|m| wanted.contains(&(m.device, m.inode)))
        .filter_map(|m| m.path.file_name())
        .collect();
    let until = Instant::now() + HOLDERS_TIME;
    let pids: Vec<i32> = pids.collect();
    // Every process's threads and descriptors, a few reads each and
    // independent: two cores halve them (on a node of 5,000 processes this
    // look was most of `check`'s time, on one thread).
    let pieces = crate::read::deadline::on_two_threads(&pids, HOLDERS_PARALLEL_FROM, |pids| {
        holders_among(proc_root, pids, wanted, &names, until)
    });
    // In the order of the pids, as one thread would have seen them: the
    // first holder found of a namespace is the one named, and the look
    // ends at the first process it could not read.
    for piece in pieces {
        for (inode, holder) in piece.found {
            view.holders.entry(inode).or_insert(holder);
        }
        view.holders_unread.extend(piece.unread);
        match piece.ended {
            None => {}
            Some(Ended::OutOfTime) => {
                gaps.push(Gap::item(
                    Source::Procfs,
                    proc_root,
                    format!(
                        "the holders of the pods' network namespaces not all looked for in {} s",
                        HOLDERS_TIME.as_secs()
                    ),
                ));
                return;
            }
            Some(Ended::Unread(path, err)) => {
                gaps.push(Gap::item(Source::Procfs, path, err));
                return;
            }
        }
    }
    view.holders_looked_for = true;
}

/// Below this many processes, one thread looks for the holders.
const HOLDERS_PARALLEL_FROM: usize = 256;

/// A directory of a process, open, and its numbered entries (a number and
/// its name).
type Listed = (rustix::fs::Dir, Vec<(i32, String)>);

/// What one piece of the look for holders found.
struct HoldersFound {
    found: Vec<(u64, NetnsHolder)>,
    /// The processes the kernel's ptrace check would not let nodectl see.
    unread: Vec<i32>,
    /// Why the piece stopped before its last process, if it did.
    ended: Option<Ended>,
}

enum Ended {
    OutOfTime,
    Unread(PathBuf, io::Error),
}

/// [`holders_in`] each of `pids`, each process's directory opened relative
/// to the proc root, open once for the piece.
fn holders_among(
    proc_root: &Path,
    pids: &[i32],
    wanted: &BTreeSet<(u64, u64)>,
    names: &BTreeSet<&OsStr>,
    until: Instant,
) -> HoldersFound {
    let mut piece = HoldersFound {
        found: Vec::new(),
        unread: Vec::new(),
        ended: None,
    };
    let root = match open_dir(&nix::fcntl::AT_FDCWD, proc_root) {
        Ok(root) => root,
        Err(err) => {
            piece.ended = Some(Ended::Unread(proc_root.to_path_buf(), err));
            return piece;
        }
    };
    for &pid in pids {
        if Instant::now() > until {
            piece.ended = Some(Ended::OutOfTime);
            return piece;
        }
        match holders_in(&root, proc_root, pid, wanted, names) {
            Ok(found) => piece.found.extend(found),
            // The kernel's ptrace check said no: named, and the look goes
            // on (as procfs's unread pids do).
            Err((_, err)) if err.kind() == io::ErrorKind::PermissionDenied => {
                piece.unread.push(pid);
            }
            Err((path, err)) => {
                piece.ended = Some(Ended::Unread(path, err));
                return piece;
            }
        }
    }
    piece
}

/// The namespaces of `wanted` that process `pid`'s threads are in or its
/// descriptors hold, read relative to the open proc root `root` (at
/// `proc_root`, for the paths a failure names): each of its directories
/// opened once and its entries read relative to it, where a path walked
/// from `/` for each link cost most of this look. A process or thread or
/// descriptor gone meanwhile holds nothing; anything else unread is an
/// error.
fn holders_in(
    root: &fs::File,
    proc_root: &Path,
    pid: i32,
    wanted: &BTreeSet<(u64, u64)>,
    names: &BTreeSet<&OsStr>,
) -> Result<Vec<(u64, NetnsHolder)>, (PathBuf, io::Error)> {
    let gone = |err: &io::Error| {
        err.kind() == io::ErrorKind::NotFound || err.raw_os_error() == Some(nix::libc::ESRCH)
    };
    let process = || proc_root.join(pid.to_string());
    // The namespace the link `name` in `dir` leads to, when it is one of
    // `wanted`; a link gone meanwhile leads nowhere; one that cannot be
    // read is an error (named by `path`, built only then).
    let identity = |dir: BorrowedFd<'_>,
                    name: &str,
                    path: &dyn Fn() -> PathBuf|
     -> Result<Option<u64>, (PathBuf, io::Error)> {
        match rustix::fs::statat(dir, name, rustix::fs::AtFlags::empty()) {
            Ok(stat) => {
                let id = (stat.st_dev, stat.st_ino);
                Ok(wanted.contains(&id).then_some(id.1))
            }
            Err(err) => {
                let err = io::Error::from(err);
                match gone(&err) {
                    true => Ok(None),
                    false => Err((path(), err)),
                }
            }
        }
    };
    // The numbered entries of the process's directory `name` (tasks,
    // descriptors), and the directory, open; none when it is gone.
    let entries = |name: &str| -> Result<Option<Listed>, (PathBuf, io::Error)> {
        let listed = open_dir(root, format!("{pid}/{name}").as_str())
            .and_then(|dir| rustix::fs::Dir::new(dir).map_err(io::Error::from));
        let mut listing = match listed {
            Ok(listing) => listing,
            Err(err) if gone(&err) => return Ok(None),
            Err(err) => return Err((process().join(name), err)),
        };
        let numbered = (&mut listing)
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_str().ok()?;
                Some((name.parse::<i32>().ok()?, name.to_owned()))
            })
            .collect();
        Ok(Some((listing, numbered)))
    };
    let mut found = Vec::new();
    if let Some((listing, tasks)) = entries("task")? {
        let dir = listing
            .fd()
            .map_err(|e| (process().join("task"), e.into()))?;
        for (tid, name) in tasks {
            let link = format!("{name}/ns/net");
            let path = || process().join("task").join(&link);
            if let Some(inode) = identity(dir, &link, &path)? {
                let by = HeldBy::Thread(tid);
                found.push((inode, NetnsHolder { pid, by }));
            }
        }
    }
    if let Some((listing, descriptors)) = entries("fd")? {
        let dir = listing.fd().map_err(|e| (process().join("fd"), e.into()))?;
        for (fd, name) in descriptors {
            let path = || process().join("fd").join(&name);
            // The link's text says what it may be: `net:[<inode>]` for a
            // namespace opened through procfs, the mount point's path for
            // one opened through its bind mount (`ip netns exec`, a
            // runtime's setns by path). Only those are stat'ed, so a
            // descriptor on a stalled filesystem is never followed.
            let target = match rustix::fs::readlinkat(dir, name.as_str(), Vec::new()) {
                Ok(target) => target,
                Err(err) => {
                    let err = io::Error::from(err);
                    match gone(&err) {
                        true => continue,
                        false => return Err((path(), err)),
                    }
                }
            };
            let target = Path::new(OsStr::from_bytes(target.as_bytes()));
            let through_procfs = target.as_os_str().as_bytes().starts_with(b"net:[");
            let through_mount = target.file_name().is_some_and(|n| names.contains(n));
            if !through_procfs && !through_mount {
                continue;
            }
            if let Some(inode) = identity(dir, &name, &path)? {
                let by = HeldBy::Descriptor(fd);
                found.push((inode, NetnsHolder { pid, by }));
            }
        }
    }
    Ok(found)
}

/// The gap saying which processes' threads and descriptors were not
/// seen, when a verdict rests on it: some namespace of `indices` (those
/// nothing seen holds) has no interface CRI did not put there, so only
/// what was not seen could still hold it.
pub fn note_unread_holders(
    view: &NetnsView,
    indices: &[usize],
    cri_networks: usize,
    proc_root: &Path,
    gaps: &mut Vec<Gap>,
) {
    let rests_on_them = indices.iter().any(|&i| {
        view.mounts
            .get(i)
            .and_then(|m| foreign_interfaces(m, cri_networks))
            .is_some_and(|foreign| foreign.is_empty())
    });
    if view.holders_unread.is_empty() || !rests_on_them {
        return;
    }
    let pids: Vec<String> = view.holders_unread.iter().map(i32::to_string).collect();
    gaps.push(Gap::item(
        Source::Procfs,
        proc_root,
        format!(
            "the threads and descriptors of process(es) {} not seen (permission denied): \
             a pod network namespace only they held would be taken for unheld",
            pids.join(", ")
        ),
    ));
}

/// How long seeing one namespace's interfaces may take.
const INTERFACES_TIME: Duration = Duration::from_secs(2);
/// How long seeing them all may take, one look.
const ALL_INTERFACES_TIME: Duration = Duration::from_secs(5);
/// The most namespaces whose interfaces one look sees.
const INTERFACES_LOOKED_AT: usize = 64;
/// A namespace's `net/dev`: a line per interface.
const NET_DEV_LIMIT: u64 = 1 << 20;

/// Sees the interfaces of each mount of `view` at `indices` (the
/// namespaces CRI made that nothing names or holds), each read on a
/// short-lived thread of its own that joins the namespace (`setns`, the
/// thread's alone) and reads `/proc/thread-self/net/dev`: nothing is run
/// and nothing changed. A namespace not seen in [`INTERFACES_TIME`] (all
/// of them: [`ALL_INTERFACES_TIME`], at most [`INTERFACES_LOOKED_AT`])
/// keeps `interfaces` `None`, and a gap says why.
pub fn look_at_interfaces(
    view: &mut NetnsView,
    indices: &[usize],
    proc_root: &Path,
    gaps: &mut Vec<Gap>,
) {
    let until = Instant::now() + ALL_INTERFACES_TIME;
    for (n, &index) in indices.iter().enumerate() {
        let Some(mount) = view.mounts.get_mut(index) else {
            continue;
        };
        let left = until.saturating_duration_since(Instant::now());
        if n >= INTERFACES_LOOKED_AT || left.is_zero() {
            gaps.push(Gap::item(
                SOURCE,
                &mount.path,
                format!(
                    "its interfaces not looked at: past {INTERFACES_LOOKED_AT} namespaces or {} s",
                    ALL_INTERFACES_TIME.as_secs()
                ),
            ));
            continue;
        }
        let (path, identity) = (mount.path.clone(), (mount.device, mount.inode));
        let net_dev = proc_root.join("thread-self/net/dev");
        let (answer, answered) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("nodectl-netns".to_string())
            .spawn(move || {
                let _ = answer.send(interfaces_in(&path, identity, &net_dev));
            });
        let seen = match spawned {
            Ok(_) => answered
                .recv_timeout(INTERFACES_TIME.min(left))
                .unwrap_or_else(|_| {
                    Err(Unseen::Failed(format!(
                        "not seen in {} s",
                        INTERFACES_TIME.as_secs()
                    )))
                }),
            Err(err) => Err(Unseen::Failed(format!("no thread to look: {err}"))),
        };
        match seen {
            Ok(interfaces) => mount.interfaces = Some(interfaces),
            Err(Unseen::Failed(why)) => gaps.push(Gap::item(
                SOURCE,
                &mount.path,
                format!("its interfaces: {why}"),
            )),
            // Neither failure is this namespace's doing, and neither lets
            // any be judged: the kinds reading the netns directory are
            // unchecked, never clear.
            // The host's table has a namespace mounted there and nodectl's
            // view a plain file: the host's mounts in the directory do not
            // reach nodectl (a container without HostToContainer
            // propagation keeps the copy it started with).
            Err(Unseen::NotMountedHere) => {
                gaps.push(Gap::source(
                    SOURCE,
                    &view.dir,
                    format!(
                        "the host's mount table has a namespace mounted at {}, and nodectl sees \
                         none there (setns: EINVAL): the host's mounts in {} do not reach \
                         nodectl (mount the directory with HostToContainer propagation)",
                        mount.path.display(),
                        view.dir.display()
                    ),
                ));
                return;
            }
            // No namespace can be joined (a DaemonSet without
            // CAP_SYS_ADMIN).
            Err(Unseen::Refused(err)) => {
                gaps.push(Gap::source(
                    SOURCE,
                    &view.dir,
                    format!(
                        "the pods' network namespaces cannot be joined to see their interfaces \
                         (setns: {err}; the kernel lets only a process with CAP_SYS_ADMIN join \
                         one): a namespace holding another's interface cannot be told from a \
                         leaked one"
                    ),
                ));
                return;
            }
        }
    }
}

/// Why a namespace's interfaces were not seen.
enum Unseen {
    /// The kernel refused to let nodectl join it (`setns` EPERM: the
    /// kernel's `netns_install` requires CAP_SYS_ADMIN): none can be.
    Refused(nix::Error),
    /// What nodectl sees at the mount point is no namespace (`setns`
    /// EINVAL), though the mount table read lists one there.
    NotMountedHere,
    Failed(String),
}

/// On the calling thread (which it moves into the namespace for good):
/// the interfaces of the namespace mounted at `path`, if it is still the
/// one of `identity` (nsfs device, inode).
fn interfaces_in(path: &Path, identity: (u64, u64), net_dev: &Path) -> Result<Vec<String>, Unseen> {
    let namespace = open_at(
        &nix::fcntl::AT_FDCWD,
        path,
        OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
    )
    .map_err(|e| Unseen::Failed(format!("opening it: {e}")))?;
    let metadata = namespace
        .metadata()
        .map_err(|e| Unseen::Failed(e.to_string()))?;
    if (metadata.dev(), metadata.ino()) != identity {
        return Err(Unseen::Failed(
            "another namespace (or none) is mounted there now".to_string(),
        ));
    }
    setns(&namespace, CloneFlags::CLONE_NEWNET).map_err(|e| match e {
        nix::Error::EPERM => Unseen::Refused(e),
        nix::Error::EINVAL => Unseen::NotMountedHere,
        _ => Unseen::Failed(format!("joining it: {e}")),
    })?;
    // procfs's size is 0 and each read a page at most: read to the end.
    let mut text = Vec::new();
    open_regular(net_dev, Links::Follow)
        .and_then(|file| file.take(NET_DEV_LIMIT + 1).read_to_end(&mut text))
        .map_err(|e| Unseen::Failed(format!("{}: {e}", net_dev.display())))?;
    if text.len() as u64 > NET_DEV_LIMIT {
        return Err(Unseen::Failed(format!(
            "{} past {NET_DEV_LIMIT} bytes",
            net_dev.display()
        )));
    }
    Ok(net_dev_interfaces(&String::from_utf8_lossy(&text)))
}

/// The interface names of a `/proc/net/dev`: two header lines, then one
/// `<name>: <counters>` per interface (a name never holds a colon).
pub fn net_dev_interfaces(text: &str) -> Vec<String> {
    text.lines()
        .skip(2)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, _)| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake procfs where `pid`'s threads are in `threads` and its
    /// descriptors hold `fds`, each a namespace file made in the tempdir
    /// (the link's text `net:[n]` resolves to it), returning its identity.
    struct FakeProc {
        root: tempfile::TempDir,
    }

    impl FakeProc {
        fn new() -> FakeProc {
            FakeProc {
                root: tempfile::tempdir().unwrap(),
            }
        }

        /// A link at `at` that reads `net:[<n>]` and resolves to a file
        /// of its own beside it: the namespace's (device, inode).
        fn link(&self, at: &Path, n: u64) -> (u64, u64) {
            fs::create_dir_all(at.parent().unwrap()).unwrap();
            let target = format!("net:[{n}]");
            let file = at.parent().unwrap().join(&target);
            fs::write(&file, "").unwrap();
            std::os::unix::fs::symlink(&target, at).unwrap();
            let m = fs::metadata(&file).unwrap();
            (m.dev(), m.ino())
        }

        fn thread(&self, pid: i32, tid: i32, n: u64) -> (u64, u64) {
            let at = self.root.path().join(format!("{pid}/task/{tid}/ns/net"));
            self.link(&at, n)
        }

        fn fd(&self, pid: i32, fd: i32, n: u64) -> (u64, u64) {
            let at = self.root.path().join(format!("{pid}/fd/{fd}"));
            self.link(&at, n)
        }
    }

    #[test]
    fn any_thread_or_open_descriptor_holds_a_namespace_by_its_identity() {
        let proc = FakeProc::new();
        // Process 10's main thread is elsewhere; its thread 12 is in A.
        let _ = proc.thread(10, 10, 1);
        let a = proc.thread(10, 12, 2);
        // Process 20 is in nothing asked about, but holds B open.
        let _ = proc.thread(20, 20, 3);
        let b = proc.fd(20, 7, 4);
        // A descriptor on some other file is not looked through.
        fs::write(proc.root.path().join("20/fd/plain"), "").unwrap();
        std::os::unix::fs::symlink("plain", proc.root.path().join("20/fd/8")).unwrap();
        // C: a namespace whose name a link spells, another file's identity.
        let c = (a.0, a.1 + 1_000_000);
        // D: held by process 20 through its mount: the link reads the
        // mount point's path (as `exec 3</run/netns/x` leaves it).
        let mounted = proc.root.path().join("netns/cni-d");
        fs::create_dir_all(mounted.parent().unwrap()).unwrap();
        fs::write(&mounted, "").unwrap();
        std::os::unix::fs::symlink(&mounted, proc.root.path().join("20/fd/9")).unwrap();
        let m = fs::metadata(&mounted).unwrap();
        let d = (m.dev(), m.ino());
        let mut view = NetnsView {
            mounts: vec![NetnsMount {
                path: PathBuf::from("/var/run/netns/cni-d"),
                inode: d.1,
                device: d.0,
                created_at: 0,
                interfaces: None,
            }],
            ..NetnsView::default()
        };
        let wanted = BTreeSet::from([a, b, c, d]);
        let mut gaps = Vec::new();
        // 30 has exited: it holds nothing.
        find_holders(
            &mut view,
            &wanted,
            proc.root.path(),
            [10, 20, 30].into_iter(),
            &mut gaps,
        );
        assert!(gaps.is_empty(), "{gaps:?}");
        assert!(view.holders_looked_for);
        // By inode, whichever order the tempdir gave them.
        let expected = std::collections::BTreeMap::from([
            (
                a.1,
                NetnsHolder {
                    pid: 10,
                    by: HeldBy::Thread(12),
                },
            ),
            (
                b.1,
                NetnsHolder {
                    pid: 20,
                    by: HeldBy::Descriptor(7),
                },
            ),
            (
                d.1,
                NetnsHolder {
                    pid: 20,
                    by: HeldBy::Descriptor(9),
                },
            ),
        ]);
        assert_eq!(view.holders, expected);
        assert_eq!(
            view.holders[&a.1].to_string(),
            "thread 12 of process 10 is in it"
        );
        assert_eq!(
            view.holders[&b.1].to_string(),
            "process 20 holds it open (descriptor 7)"
        );
    }

    #[test]
    fn a_nodes_worth_of_processes_is_looked_through_and_the_first_holder_named() {
        // 400 processes: looked through on two threads, in pieces.
        let proc = FakeProc::new();
        let pids: Vec<i32> = (1000..1400).collect();
        let mut a = (0, 0);
        let mut b = (0, 0);
        for &pid in &pids {
            match pid {
                // B: the main thread of the last process is in it.
                1399 => b = proc.thread(pid, pid, 2),
                _ => {
                    let _ = proc.thread(pid, pid, 10 + pid as u64);
                }
            }
            // A: a thread of 1150 is in it, and 1390 holds it open.
            if pid == 1150 {
                a = proc.thread(pid, pid + 1, 1);
            }
        }
        let file = proc.root.path().join("1390/fd/net:[1]");
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::hard_link(proc.root.path().join("1150/task/1151/ns/net:[1]"), &file).unwrap();
        std::os::unix::fs::symlink("net:[1]", proc.root.path().join("1390/fd/3")).unwrap();
        let mut view = NetnsView::default();
        let mut gaps = Vec::new();
        let wanted = BTreeSet::from([a, b]);
        find_holders(
            &mut view,
            &wanted,
            proc.root.path(),
            pids.into_iter(),
            &mut gaps,
        );
        assert!(gaps.is_empty(), "{gaps:?}");
        assert!(view.holders_looked_for);
        // The first in pid order, as one thread would have found it; and
        // the last process's, in the last piece.
        assert_eq!(
            view.holders[&a.1],
            NetnsHolder {
                pid: 1150,
                by: HeldBy::Thread(1151),
            }
        );
        assert_eq!(
            view.holders[&b.1],
            NetnsHolder {
                pid: 1399,
                by: HeldBy::Thread(1399),
            }
        );
    }

    #[test]
    fn a_process_whose_descriptors_cannot_be_read_leaves_nothing_known_unheld() {
        let proc = FakeProc::new();
        let a = proc.thread(10, 10, 1);
        // A file where the fd directory belongs: read_dir fails, not gone.
        fs::write(proc.root.path().join("10/fd"), "").unwrap();
        let mut view = NetnsView::default();
        let mut gaps = Vec::new();
        let wanted = BTreeSet::from([(a.0, a.1 + 1)]);
        find_holders(
            &mut view,
            &wanted,
            proc.root.path(),
            [10].into_iter(),
            &mut gaps,
        );
        assert!(!view.holders_looked_for);
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        // Nothing asked about: nothing to look for, known at once.
        let mut view = NetnsView::default();
        find_holders(
            &mut view,
            &BTreeSet::new(),
            proc.root.path(),
            [10].into_iter(),
            &mut gaps,
        );
        assert!(view.holders_looked_for);
    }

    #[test]
    fn processes_not_seen_are_a_gap_only_when_a_verdict_rests_on_them() {
        let mount = |interfaces: &[&str]| NetnsMount {
            path: PathBuf::from("/var/run/netns/cni-x"),
            inode: 1,
            device: 4,
            created_at: 0,
            interfaces: Some(interfaces.iter().map(|n| n.to_string()).collect()),
        };
        let mut view = NetnsView {
            mounts: vec![mount(&["lo", "vadm0"])],
            holders_unread: BTreeSet::from([1]),
            ..NetnsView::default()
        };
        let mut gaps = Vec::new();
        // Its foreign veth keeps it whatever pid 1 holds.
        note_unread_holders(&view, &[0], 1, Path::new("/proc"), &mut gaps);
        assert!(gaps.is_empty(), "{gaps:?}");
        // Only pid 1 could still hold this one.
        view.mounts[0] = mount(&["lo", "eth0"]);
        note_unread_holders(&view, &[0], 1, Path::new("/proc"), &mut gaps);
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(gaps[0].error.contains("process(es) 1 not seen"), "{gaps:?}");
        // Every process seen: nothing to say.
        view.holders_unread.clear();
        let mut gaps = Vec::new();
        note_unread_holders(&view, &[0], 1, Path::new("/proc"), &mut gaps);
        assert!(gaps.is_empty());
    }

    #[test]
    fn net_dev_lists_each_interface_by_name() {
        let text = "Inter-|   Receive                            |  Transmit\n \
                    face |bytes    packets errs drop fifo frame compressed multicast|bytes\n    \
                    lo:       0       0    0    0    0     0          0         0        0\n  \
                    eth0:    1296      16    0    0    0     0          0         0      796\n\
                    vadm0: 0 0 0 0 0 0 0 0 0\n";
        assert_eq!(net_dev_interfaces(text), ["lo", "eth0", "vadm0"]);
        assert!(net_dev_interfaces("").is_empty());
    }

    #[test]
    fn a_namespace_removed_since_the_table_was_read_is_gone_not_a_gap() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("netns");
        let table = tmp.path().join("mountinfo");
        std::fs::write(
            &table,
            format!(
                "600 25 0:4 net:[4026532999] {}/cni-gone rw shared:5 - nsfs nsfs rw\n",
                dir.display()
            ),
        )
        .unwrap();
        let looked = |gaps: &mut Vec<Gap>| read(&dir, None, &table, gaps).mounts.len();
        // The directory unseen (another mount namespace): a gap, as before.
        let mut gaps = Vec::new();
        assert_eq!(looked(&mut gaps), 0);
        assert!(!gaps.is_empty(), "{gaps:?}");
        // The directory seen, the file gone: removed meanwhile.
        std::fs::create_dir(&dir).unwrap();
        let mut gaps = Vec::new();
        assert_eq!(looked(&mut gaps), 0);
        assert!(gaps.is_empty(), "{gaps:?}");
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
