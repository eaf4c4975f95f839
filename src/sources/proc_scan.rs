//! procfs: which processes really run, and what containerd's shims are doing.
//!
//! Liveness is judged by the process state, not by `/proc/<pid>` existing: a
//! killed process stays visible as defunct (Z) until its parent reaps it, and
//! orphaned shims are reaped late by some init processes.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::fcntl::{OFlag, AT_FDCWD};

use crate::model::shim::is_idle_wait;
use crate::model::{Gap, ProcessInfo, Shim, Source, ThreadSample, UnixNanos};
use crate::read::bounded::{
    numbered, open_at, open_dir, read_proc_record_at, read_proc_string, RECORD_READ,
};

const SOURCE: Source = Source::Procfs;
/// `comm` is cut at 15 bytes, which is exactly the common prefix of every
/// shim binary (`containerd-shim`, `-runc-v1`, `-runc-v2`, `-kata-v2`, ...).
const SHIM_COMM: &str = "containerd-shim";

#[derive(Default)]
pub struct ProcScan {
    pub processes: BTreeMap<i32, ProcessInfo>,
    /// Listed, but their `stat` unreadable while they live (see
    /// [`crate::model::Snapshot::unread_pids`]).
    pub unread_pids: BTreeSet<i32>,
    pub shims: Vec<Shim>,
}

/// Scans every process below `proc_root` (normally `/proc`). Processes that
/// exit during the scan are skipped: that is churn, not a gap. With
/// `shim_threads`, every thread of every shim is sampled too (what it is
/// blocked in); only the checks that judge stuck shims need that.
pub fn scan(proc_root: &Path, shim_threads: bool, gaps: &mut Vec<Gap>) -> ProcScan {
    let mut scan = ProcScan::default();
    let Some(reader) = Reader::new(proc_root, shim_threads, gaps) else {
        return scan;
    };
    let entries = match fs::read_dir(proc_root) {
        Ok(entries) => entries,
        Err(err) => {
            gaps.push(Gap::source(SOURCE, proc_root, err));
            return scan;
        }
    };
    let pids: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .collect();
    read_all(&reader, &pids, &mut scan, gaps);
    scan
}

/// What one thread read of its pids.
#[derive(Default)]
struct Piece {
    processes: Vec<ProcessInfo>,
    shims: Vec<Shim>,
    gaps: Vec<Gap>,
    /// The pids whose `stat` failed while they lived, and the first failure.
    unread: Vec<i32>,
    first_unread: Option<(PathBuf, String)>,
}

/// Reads `pids` into `scan`, which is new. Two cores read procfs faster
/// than one; the shims and gaps stay in the order of `pids`. The process
/// table is built once, from every piece's list (a bulk build), not by an
/// insert per process on each thread and again here, on one core.
fn read_all(reader: &Reader, pids: &[i32], scan: &mut ProcScan, gaps: &mut Vec<Gap>) {
    let pieces = crate::read::deadline::on_two_threads(pids, PARALLEL_FROM, |pids| {
        let mut reader = reader.clone();
        // A descriptor of its own for each piece, so each thread (see `open_dir`).
        if let Ok(own) = open_dir(&AT_FDCWD, reader.proc_root) {
            reader.root_dir = Arc::new(own);
        }
        let mut piece = Piece::default();
        for &pid in pids {
            reader.read(pid, &mut piece);
        }
        piece
    });
    let mut processes = Vec::with_capacity(pids.len());
    let mut first_unread = None;
    for piece in pieces {
        processes.extend(piece.processes);
        scan.shims.extend(piece.shims);
        gaps.extend(piece.gaps);
        scan.unread_pids.extend(piece.unread);
        first_unread = first_unread.or(piece.first_unread);
    }
    scan.processes = processes.into_iter().map(|p| (p.pid, p)).collect();
    // One gap for them all: a profile that denies one process's `stat`
    // denies every one's alike.
    if let Some((path, reason)) = first_unread {
        let error = match scan.unread_pids.len() {
            1 => format!("{reason}: whether the process lives is unknown"),
            n => format!(
                "{reason} (and {} more processes): whether they live is unknown",
                n - 1
            ),
        };
        gaps.push(Gap::item(SOURCE, path, error));
    }
}

/// Below this many processes, one thread reads them all.
const PARALLEL_FROM: usize = 500;

/// Reads only `pids` again (a follow-up look at a few suspects); those gone
/// since are simply absent.
pub fn rescan(
    proc_root: &Path,
    pids: &BTreeSet<i32>,
    shim_threads: bool,
    gaps: &mut Vec<Gap>,
) -> ProcScan {
    let mut scan = ProcScan::default();
    if let Some(reader) = Reader::new(proc_root, shim_threads, gaps) {
        let pids: Vec<i32> = pids.iter().copied().collect();
        read_all(&reader, &pids, &mut scan, gaps);
    }
    scan
}

/// What turning one `<pid>/stat` into a [`ProcessInfo`] needs, set up once.
#[derive(Clone)]
struct Reader<'a> {
    proc_root: &'a Path,
    /// `proc_root`, open: every process's files are opened relative to it.
    root_dir: Arc<File>,
    shim_threads: bool,
    /// Read the state of every shim thread, even one in an idle wait: when
    /// the node may swap (see [`may_swap`]).
    every_state: bool,
    boot_time: UnixNanos,
    ticks_per_second: i64,
    page_size: u64,
    buffer: Vec<u8>,
}

impl<'a> Reader<'a> {
    fn new(proc_root: &'a Path, shim_threads: bool, gaps: &mut Vec<Gap>) -> Option<Self> {
        let boot_time = match boot_time_nanos(proc_root) {
            Ok(boot_time) => boot_time,
            Err(err) => {
                gaps.push(Gap::source(SOURCE, proc_root.join("stat"), err));
                return None;
            }
        };
        let root_dir = match open_dir(&AT_FDCWD, proc_root) {
            Ok(dir) => Arc::new(dir),
            Err(err) => {
                gaps.push(Gap::source(SOURCE, proc_root, err));
                return None;
            }
        };
        Some(Reader {
            proc_root,
            every_state: shim_threads && may_swap(&root_dir),
            root_dir,
            shim_threads,
            boot_time,
            ticks_per_second: procfs::ticks_per_second() as i64,
            page_size: procfs::page_size(),
            buffer: Vec::with_capacity(RECORD_READ),
        })
    }

    /// Adds `pid` (and its shim details, if it is a shim) to `piece`; a
    /// process that is gone is skipped, one whose `stat` cannot be read
    /// while it lives is noted as unread. A shim file it cannot read while
    /// the shim runs is a gap (one for the process).
    fn read(&mut self, pid: i32, piece: &mut Piece) {
        let mut path = [0; 48];
        let read = read_proc_record_at(
            &*self.root_dir,
            numbered(&mut path, pid, "stat"),
            &mut self.buffer,
        );
        let filled = match read {
            Ok(filled) => filled,
            Err(err) => {
                // Gone is churn; anything else leaves a live process unseen,
                // which a check must not take for one that exited.
                if let Some(reason) = read_failure(&err) {
                    piece.unread.push(pid);
                    piece.first_unread.get_or_insert_with(|| {
                        (self.proc_root.join(pid.to_string()).join("stat"), reason)
                    });
                }
                return;
            }
        };
        let Some(stat) = parse_stat(&self.buffer[..filled]) else {
            return;
        };
        let info = ProcessInfo {
            pid: stat.pid,
            ppid: stat.ppid,
            comm: stat.comm,
            state: stat.state,
            started_at: self
                .boot_time
                .saturating_add(ticks_to_nanos(stat.starttime, self.ticks_per_second)),
            rss_bytes: stat.rss.saturating_mul(self.page_size),
        };
        if info.comm == SHIM_COMM && info.is_running() {
            let name = pid.to_string();
            let mut unread = FailedReads::default();
            let threads = self.shim_threads.then_some(ThreadReads {
                leader_state: info.state,
                every_state: self.every_state,
            });
            let dir = self.proc_root.join(&name);
            let opened =
                open_dir(&*self.root_dir, name.as_str()).map_err(|err| unread.note(&dir, &err));
            let shim = opened
                .ok()
                .and_then(|opened| read_shim(&opened, &dir, info.pid, threads, &mut unread));
            if let Some(shim) = shim {
                piece.shims.push(shim);
            }
            piece.gaps.extend(unread.into_gap());
        }
        piece.processes.push(info);
    }
}

/// Whether the node may swap: `swaps` lists an area past its header line,
/// or cannot be read (then nodectl cannot tell).
fn may_swap(proc_root: &File) -> bool {
    let mut buffer = Vec::new();
    match read_proc_record_at(proc_root, "swaps", &mut buffer) {
        Ok(filled) => buffer[..filled]
            .split(|b| *b == b'\n')
            .skip(1)
            .any(|line| !line.is_empty()),
        Err(_) => true,
    }
}

/// `/proc/stat`: a line per CPU and a few more.
const PROC_STAT_LIMIT: u64 = 1024 * 1024;

/// Reads and parses a `stat` file with one `read` into a
/// reused buffer: on a node with thousands of processes, the size probing of
/// a general file read (a stat and a seek per file, useless on procfs, which
/// reports size 0) is a third of the syscalls.
#[cfg(test)]
fn read_stat(path: &Path, buffer: &mut Vec<u8>) -> Option<StatRecord> {
    read_stat_at(&AT_FDCWD, path, buffer)
}

/// [`read_stat`] of `name` relative to the open directory `dir`: one
/// `openat` (non-blocking: a FIFO in a fake `--proc-root` cannot hang it),
/// without walking `dir`'s own path again.
pub(crate) fn read_stat_at<P: ?Sized + nix::NixPath>(
    dir: &impl AsFd,
    name: &P,
    buffer: &mut Vec<u8>,
) -> Option<StatRecord> {
    let filled = read_proc_record_at(dir, name, buffer).ok()?;
    parse_stat(&buffer[..filled])
}

/// The fields of a `<pid>/stat` record nodectl uses.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StatRecord {
    pub pid: i32,
    pub comm: String,
    pub state: char,
    pub ppid: i32,
    /// Clock ticks after boot.
    pub starttime: u64,
    /// Resident pages.
    pub rss: u64,
}

/// Parses a `stat` record, `<pid> (<comm>) <state> <ppid> … <starttime>
/// <vsize> <rss> …`, reading those fields as procfs's parser does, and
/// `None` for a record the kernel would not write (see [`comm_bounds`]).
/// Not procfs's own parser: it copies the record lossily, searches for each
/// of its 52 fields and parses them all, which was 8 % of `check`'s CPU on a
/// node of 5,000 processes; a test holds the two to the same answers.
pub(crate) fn parse_stat(record: &[u8]) -> Option<StatRecord> {
    let lossy;
    // As text, as procfs reads it; the kernel's is UTF-8, which needs no
    // lossy copy.
    let text = match std::str::from_utf8(record) {
        Ok(text) => text,
        Err(_) => {
            lossy = String::from_utf8_lossy(record);
            &lossy
        }
    }
    .trim();
    let (open, close) = comm_bounds(text.as_bytes())?;
    // The same cut as `split(' ')`, by a test per character: the fields are
    // a few characters each, shorter than the memchr search that `split`
    // with a char sets up for each one (with memrchr below, 311 → 121 ns a
    // record, 1 ms of CPU on a node of 5,000 processes).
    #[allow(clippy::manual_pattern_char_comparison)] // on purpose: see above
    let mut fields = text[close + 2..].split(|c: char| c == ' ');
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    // Fields 5 to 21 (pgrp … itrealvalue), then 22, starttime; 23, vsize;
    // 24, rss.
    let starttime = fields.nth(17)?.parse().ok()?;
    let rss = fields.nth(1)?.parse().ok()?;
    Some(StatRecord {
        pid: text[..open - 1].parse().ok()?,
        comm: text[open + 1..close].to_string(),
        state,
        ppid,
        starttime,
        rss,
    })
}

/// Where `comm` begins (its `(`, the record's first) and ends (its `)`,
/// the record's last) in a stat record of the shape the kernel writes,
/// `<pid> (<comm>) <state> …`; `None` for any other. The fields are cut
/// around `comm` (procfs-core 0.18's parser panicked on a record with no pid
/// before `(`, a `)` before it, nothing after, or a multi-byte character
/// beside them). The kernel never writes one; a fake `--proc-root` or a cut
/// read can, and such a process is skipped like one that is gone.
fn comm_bounds(record: &[u8]) -> Option<(usize, usize)> {
    let open = record.iter().position(|b| *b == b'(')?;
    // About 250 bytes from the end: searched by memrchr, not byte by byte.
    let close = memchr::memrchr(b')', record)?;
    let shaped = open >= 2
        && record[open - 1] == b' '
        && close > open
        && record.get(close + 1) == Some(&b' ');
    shaped.then_some((open, close))
}

/// A thread's state from its `stat` record: the letter after `comm`. A
/// shim's threads are read for their state alone, so the fifty other
/// fields are not parsed. `None` for a record the kernel would not write.
fn state_of(record: &[u8]) -> Option<char> {
    let record = record.trim_ascii();
    let (_, close) = comm_bounds(record)?;
    record
        .get(close + 2)
        .filter(|state| state.is_ascii_alphabetic())
        .map(|state| char::from(*state))
}

pub(crate) fn ticks_to_nanos(ticks: u64, ticks_per_second: i64) -> i64 {
    i64::try_from(ticks)
        .unwrap_or(i64::MAX)
        .saturating_mul(1_000_000_000 / ticks_per_second.max(1))
}

/// Boot time as unix ns. `/proc/<pid>/stat` counts start times on the boot-time
/// clock; on the live system `CLOCK_REALTIME - CLOCK_BOOTTIME` gives the boot
/// instant to the nanosecond, where `/proc/stat`'s `btime` has whole seconds.
pub(crate) fn boot_time_nanos(proc_root: &Path) -> Result<UnixNanos, String> {
    use nix::time::{clock_gettime, ClockId};
    if proc_root == Path::new("/proc") {
        let nanos = |clock| -> Result<i64, String> {
            let ts = clock_gettime(clock).map_err(|e| e.to_string())?;
            Ok(ts.tv_sec() * 1_000_000_000 + ts.tv_nsec())
        };
        return Ok(nanos(ClockId::CLOCK_REALTIME)? - nanos(ClockId::CLOCK_BOOTTIME)?);
    }
    let stat =
        read_proc_string(&proc_root.join("stat"), PROC_STAT_LIMIT).map_err(|e| e.to_string())?;
    stat.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|secs| secs.trim().parse::<i64>().ok())
        // Only a fake `--proc-root` holds a boot time past 2262: an error,
        // not an overflow.
        .and_then(|secs| secs.checked_mul(1_000_000_000))
        .ok_or_else(|| "no btime line (seconds since 1970, before 2262)".to_string())
}

/// A real shim's command line is a few hundred bytes; any process can name
/// itself a shim and carry megabytes of arguments, which must not become
/// nodectl's memory (3,000 such processes took 436 MiB before this cap).
const CMDLINE_CAP: u64 = 16 * 1024;

/// Why a read of a process's file failed, for a gap; `None` when the
/// process is gone (ENOENT, ESRCH): churn, like a process that exits during
/// the scan, not a gap.
pub(crate) fn read_failure(err: &io::Error) -> Option<String> {
    use nix::errno::Errno;
    let Some(code) = err.raw_os_error() else {
        return Some(err.to_string());
    };
    let errno = Errno::from_raw(code);
    match errno {
        Errno::ENOENT | Errno::ESRCH => None,
        Errno::EACCES | Errno::EPERM => Some(format!(
            "permission denied ({errno:?}): an AppArmor or SELinux profile may deny ptrace \
             reads of other processes; see appArmorProfile in deploy/base/daemonset.yaml"
        )),
        _ => Some(format!("{} ({errno:?})", errno.desc().to_lowercase())),
    }
}

/// The reads of one running process that failed, collapsed into one gap: a
/// shim has dozens of threads, and one profile denies them all alike.
#[derive(Debug, Default)]
pub(crate) struct FailedReads {
    /// The first failed read and why.
    first: Option<(PathBuf, String)>,
    /// How many failed after it.
    more: usize,
}

impl FailedReads {
    /// Notes a failed read of `path`; nothing when the process is gone.
    pub(crate) fn note(&mut self, path: &Path, err: &io::Error) {
        let Some(reason) = read_failure(err) else {
            return;
        };
        match self.first {
            None => self.first = Some((path.to_path_buf(), reason)),
            Some(_) => self.more += 1,
        }
    }

    /// The one gap of the process, if any read of it failed.
    pub(crate) fn into_gap(self) -> Option<Gap> {
        let (path, reason) = self.first?;
        let error = match self.more {
            0 => reason,
            1 => format!("{reason} (and 1 more read of this process)"),
            n => format!("{reason} (and {n} more reads of this process)"),
        };
        Some(Gap::item(SOURCE, path, error))
    }
}

/// `result`'s value, or `None` with its error noted in `unread`.
fn noted<T>(result: io::Result<T>, path: &Path, unread: &mut FailedReads) -> Option<T> {
    result.map_err(|err| unread.note(path, &err)).ok()
}

/// How a shim's threads are read: the leader's state is the process's own
/// (`<pid>/stat` says the leader's, already read).
#[derive(Clone, Copy)]
struct ThreadReads {
    leader_state: char,
    every_state: bool,
}

/// A shim's details; with `threads`, what each of its threads is blocked in.
fn read_shim(
    opened: &File,
    dir: &Path,
    pid: i32,
    threads: Option<ThreadReads>,
    unread: &mut FailedReads,
) -> Option<Shim> {
    let mut raw = Vec::with_capacity(1024);
    noted(
        open_at(opened, "cmdline", OFlag::empty())
            .and_then(|f| f.take(CMDLINE_CAP).read_to_end(&mut raw)),
        &dir.join("cmdline"),
        unread,
    )?;
    let cmdline: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|arg| !arg.is_empty())
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect();
    let binary = cmdline.first()?.rsplit('/').next()?.to_string();
    if !binary.starts_with(SHIM_COMM) {
        return None;
    }
    let flag = |name: &str| {
        cmdline
            .iter()
            .position(|arg| arg == name)
            .and_then(|i| cmdline.get(i + 1))
            .cloned()
    };
    Some(Shim {
        pid,
        binary,
        namespace: flag("-namespace"),
        id: flag("-id"),
        address: flag("-address"),
        action: cmdline
            .last()
            .filter(|arg| matches!(arg.as_str(), "start" | "delete"))
            .cloned(),
        cwd: noted(
            nix::fcntl::readlinkat(opened, "cwd")
                .map(PathBuf::from)
                .map_err(io::Error::from),
            &dir.join("cwd"),
            unread,
        ),
        threads: match threads {
            Some(reads) => sample_threads(opened, dir, pid, reads, unread),
            None => Vec::new(),
        },
        // Filled in by `shim_proof::prove_all`, which knows what to compare with.
        proof: None,
    })
}

/// What each thread of the shim at `dir` is blocked in.
///
/// Where the node may swap, a thread's `stat` is read first, for its state,
/// and its `syscall` then unless it runs (R): the kernel names no syscall
/// for a running task (the file says `running`). Every other state can be
/// inside one: `umount2` in D, in S while it waits interruptibly, in t when
/// a tracer holds it at the call (as strace's fault injection does).
///
/// Without swap, `syscall` is read first: a thread in an idle wait (futex,
/// epoll, nanosleep, waitid: most of a Go shim's threads) cannot be waiting
/// on the disk, so its state is not read; any other thread's is, so one in
/// `umount2` (in D, S or t) or in D elsewhere is found as before. That
/// halves the reads of a node's shim threads.
fn sample_threads(
    opened: &File,
    dir: &Path,
    leader: i32,
    reads: ThreadReads,
    unread: &mut FailedReads,
) -> Vec<ThreadSample> {
    let task = dir.join("task");
    // Named once for all its files (a read stuck in one is named by its
    // directory): a path built and noted for each thread's files cost more.
    crate::read::deadline::reading(&task);
    let listed = open_dir(opened, "task")
        .and_then(|tasks| rustix::fs::Dir::new(tasks).map_err(io::Error::from));
    let Some(mut listing) = noted(listed, &task, unread) else {
        return Vec::new();
    };
    let tids: Vec<i32> = (&mut listing)
        .flatten()
        .filter_map(|entry| entry.file_name().to_str().ok()?.parse().ok())
        .collect();
    let Ok(tasks) = listing.fd() else {
        return Vec::new();
    };
    let mut threads = Vec::new();
    let mut buffer = Vec::with_capacity(RECORD_READ);
    let mut path = [0; 48];
    for tid in tids {
        let read_state = |buffer: &mut Vec<u8>, path: &mut [u8; 48]| {
            let read = read_proc_record_at(&tasks, numbered(path, tid, "stat"), buffer);
            read.ok().and_then(|filled| state_of(&buffer[..filled]))
        };
        let read_text =
            |name: &str, buffer: &mut Vec<u8>, path: &mut [u8; 48], unread: &mut FailedReads| {
                let read = read_proc_record_at(&tasks, numbered(path, tid, name), buffer).and_then(
                    |filled| {
                        std::str::from_utf8(&buffer[..filled])
                            .map(str::to_owned)
                            .map_err(|_| {
                                io::Error::new(io::ErrorKind::InvalidData, "not UTF-8: not read")
                            })
                    },
                );
                // The path a gap names, built only for a read that failed.
                read.map_err(|err| unread.note(&task.join(format!("{tid}/{name}")), &err))
                    .ok()
            };
        let (state, syscall) = if tid == leader || reads.every_state {
            let state = if tid == leader {
                reads.leader_state
            } else {
                // A thread whose `stat` is gone has exited.
                let Some(state) = read_state(&mut buffer, &mut path) else {
                    continue;
                };
                state
            };
            let syscall = (state != 'R')
                .then(|| read_text("syscall", &mut buffer, &mut path, unread))
                .flatten()
                .and_then(|text| syscall_name(&text));
            (Some(state), syscall)
        } else {
            // Unreadable (noted) or gone, it names no call: the state tells.
            let text = read_text("syscall", &mut buffer, &mut path, unread);
            let syscall = text.as_deref().and_then(syscall_name);
            if text.as_deref().is_some_and(|t| t.starts_with("running")) {
                (Some('R'), None)
            } else if syscall.as_deref().is_some_and(is_idle_wait) {
                (None, syscall)
            } else {
                let Some(state) = read_state(&mut buffer, &mut path) else {
                    continue;
                };
                (Some(state), syscall)
            }
        };
        // Where a thread sleeps only tells something for uninterruptible
        // sleep; skipping it for the rest saves a read per thread.
        let wchan = (state == Some('D'))
            .then(|| read_text("wchan", &mut buffer, &mut path, unread))
            .flatten()
            .filter(|w| !w.is_empty() && w != "0");
        threads.push(ThreadSample {
            tid,
            state,
            syscall,
            wchan,
        });
    }
    threads.sort_by_key(|t| t.tid);
    threads
}

/// The syscall a thread is blocked in, from `/proc/<pid>/task/<tid>/syscall`:
/// its first field is the number (or `running`, or -1 when not in a syscall).
fn syscall_name(text: &str) -> Option<String> {
    let number: i64 = text.split_whitespace().next()?.parse().ok()?;
    if number < 0 {
        return None;
    }
    Some(match name_of(number) {
        Some(name) => name.to_string(),
        None => format!("syscall {number}"),
    })
}

/// Names for the syscalls a shim is typically found in. The numbers differ by
/// architecture; umount2 is the one that matters (the overlayfs unmount).
fn name_of(number: i64) -> Option<&'static str> {
    #[cfg(target_arch = "x86_64")]
    const NAMES: &[(i64, &str)] = &[
        (0, "read"),
        (1, "write"),
        (7, "poll"),
        (35, "nanosleep"),
        (61, "wait4"),
        (74, "fsync"),
        (162, "sync"),
        (166, "umount2"),
        (202, "futex"),
        (232, "epoll_wait"),
        (247, "waitid"),
        (257, "openat"),
        (263, "unlinkat"),
        (281, "epoll_pwait"),
        (306, "syncfs"),
    ];
    // The generic syscall table (arm64, riscv64, loongarch64).
    #[cfg(not(target_arch = "x86_64"))]
    const NAMES: &[(i64, &str)] = &[
        (22, "epoll_pwait"),
        (35, "unlinkat"),
        (39, "umount2"),
        (56, "openat"),
        (63, "read"),
        (64, "write"),
        (81, "sync"),
        (82, "fsync"),
        (95, "waitid"),
        (98, "futex"),
        (101, "nanosleep"),
        (260, "wait4"),
        (267, "syncfs"),
    ];
    NAMES
        .iter()
        .find(|(n, _)| *n == number)
        .map(|(_, name)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::bounded::RECORD_CAP;
    use procfs::process::Stat;
    use procfs::FromRead;

    #[test]
    fn syscall_file_is_decoded() {
        #[cfg(target_arch = "x86_64")]
        let blocked = "166 0x5612d8e0 0x0 0x0 0x0 0x0 0x0 0x7ffd 0x4";
        #[cfg(not(target_arch = "x86_64"))]
        let blocked = "39 0x5612d8e0 0x0 0x0 0x0 0x0 0x0 0x7ffd 0x4";
        assert_eq!(syscall_name(blocked).as_deref(), Some("umount2"));
        assert_eq!(syscall_name("running"), None);
        assert_eq!(syscall_name("-1 0x7ffd 0x4"), None);
        assert_eq!(syscall_name("999 0x0").as_deref(), Some("syscall 999"));
    }

    fn stat_line(pid: i32, comm: &str, state: char) -> String {
        format!(
            "{pid} ({comm}) {state} 1 {pid} {pid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0 \
             18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
        )
    }

    #[test]
    fn a_shim_thread_in_umount2_is_found_in_d_s_and_t_and_a_running_one_is_not_asked() {
        #[cfg(target_arch = "x86_64")]
        let (umount2, futex, read) = ("166", "202", "0");
        #[cfg(not(target_arch = "x86_64"))]
        let (umount2, futex, read) = ("39", "98", "63");
        // A node whose `swaps` cannot be read may swap, like one that lists
        // an area: every thread's state is read. Without swap, a thread in
        // an idle wait is not asked its state.
        const HEADER: &str = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";
        let swap = format!("{HEADER}/swap.img file 4194300 0 -2\n");
        for swaps in [None, Some(swap.as_str()), Some(HEADER)] {
            let may_swap = swaps != Some(HEADER);
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            fs::write(root.join("stat"), "btime 1700000000\n").unwrap();
            if let Some(swaps) = swaps {
                fs::write(root.join("swaps"), swaps).unwrap();
            }
            let pid = 40;
            let shim = root.join(pid.to_string());
            fs::create_dir(&shim).unwrap();
            fs::write(shim.join("stat"), stat_line(pid, SHIM_COMM, 'S')).unwrap();
            fs::write(
                shim.join("cmdline"),
                "/usr/bin/containerd-shim-runc-v2\0-namespace\0k8s.io\0-id\0abc\0\
                 -address\0/run/containerd/containerd.sock\0",
            )
            .unwrap();
            // A running thread's syscall file says so; read first (no swap),
            // it spares the `stat` (none here: were it read, the thread would
            // be dropped as gone). Read after its `stat` (may swap), it is
            // never read: were it, this would show.
            let (running_stat, running) = if may_swap {
                (Some('R'), format!("{umount2} 0x5612d8e0 0x0 0x0"))
            } else {
                (None, "running".to_string())
            };
            // tid, state in its own stat, its syscall file.
            let threads = [
                // The leader: its state is the process's (no task stat here).
                (pid, None, format!("{futex} 0x1 0x0")),
                (41, Some('D'), format!("{umount2} 0x5612d8e0 0x0 0x0")),
                (42, Some('S'), format!("{umount2} 0x5612d8e0 0x0 0x0")),
                // Held at the call by a tracer (strace's delay_enter).
                (44, Some('t'), format!("{umount2} 0x5612d8e0 0x0 0x0")),
                (43, running_stat, running),
                // In D inside a futex wait: only swap can put it there (a
                // page of its own memory read back from the disk).
                (45, Some('D'), format!("{futex} 0x1 0x0")),
                // In D in a read, with or without swap.
                (46, Some('D'), format!("{read} 0x3 0x0")),
            ];
            for (tid, state, syscall) in &threads {
                let task = shim.join("task").join(tid.to_string());
                fs::create_dir_all(&task).unwrap();
                if let Some(state) = state {
                    fs::write(task.join("stat"), stat_line(*tid, SHIM_COMM, *state)).unwrap();
                }
                fs::write(task.join("syscall"), syscall).unwrap();
            }
            for tid in [41, 45, 46] {
                fs::write(
                    shim.join(format!("task/{tid}/wchan")),
                    "folio_wait_bit_common",
                )
                .unwrap();
            }

            let mut gaps = Vec::new();
            let scan = scan(root, true, &mut gaps);
            assert!(gaps.is_empty(), "{gaps:?}");
            assert_eq!(scan.shims.len(), 1);
            let sampled: Vec<_> = scan.shims[0]
                .threads
                .iter()
                .map(|t| (t.tid, t.state, t.syscall.as_deref(), t.wchan.as_deref()))
                .collect();
            let waiting = Some("folio_wait_bit_common");
            let futex_thread = if may_swap {
                (45, Some('D'), Some("futex"), waiting)
            } else {
                (45, None, Some("futex"), None)
            };
            assert_eq!(
                sampled,
                [
                    (40, Some('S'), Some("futex"), None),
                    (41, Some('D'), Some("umount2"), waiting),
                    (42, Some('S'), Some("umount2"), None),
                    (43, Some('R'), None, None),
                    (44, Some('t'), Some("umount2"), None),
                    futex_thread,
                    (46, Some('D'), Some("read"), waiting),
                ],
                "swaps: {swaps:?}"
            );
            let in_umount2: Vec<i32> = scan.shims[0].threads_in_umount2().map(|t| t.tid).collect();
            assert_eq!(in_umount2, [41, 42, 44]);
            // A scan watched for a read that blocks names the shim's threads'
            // directory while it reads them (the last thing read here).
            let slot = crate::read::deadline::Reading::default();
            let watched = slot.clone();
            let root_path = root.to_path_buf();
            std::thread::spawn(move || {
                crate::read::deadline::watch_reading(watched);
                super::scan(&root_path, true, &mut Vec::new())
            })
            .join()
            .unwrap();
            assert_eq!(
                slot.lock().unwrap().as_deref(),
                Some(shim.join("task").as_path())
            );
            // Without thread sampling, none is read.
            let scan = super::scan(root, false, &mut gaps);
            assert!(scan.shims[0].threads.is_empty());
        }
    }

    #[test]
    fn many_processes_are_read_on_two_threads_and_the_shims_keep_the_directory_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("stat"), "btime 1700000000\n").unwrap();
        let count = 2 * PARALLEL_FROM as i32;
        for pid in 1..=count {
            let proc_dir = root.join(pid.to_string());
            fs::create_dir(&proc_dir).unwrap();
            let comm = if pid % 100 == 0 { SHIM_COMM } else { "sleep" };
            fs::write(proc_dir.join("stat"), stat_line(pid, comm, 'S')).unwrap();
            fs::write(
                proc_dir.join("cmdline"),
                "containerd-shim-runc-v2\0-id\0x\0",
            )
            .unwrap();
        }
        let mut gaps = Vec::new();
        let scan = scan(root, true, &mut gaps);
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(scan.processes.len(), count as usize);
        let in_directory: Vec<i32> = fs::read_dir(root)
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().to_str()?.parse().ok())
            .filter(|pid| pid % 100 == 0)
            .collect();
        let shims: Vec<i32> = scan.shims.iter().map(|s| s.pid).collect();
        assert_eq!(shims, in_directory);
    }

    #[test]
    fn own_process_is_seen_running_with_a_plausible_start_time() {
        let mut gaps = Vec::new();
        let scan = scan(Path::new("/proc"), true, &mut gaps);
        assert!(gaps.is_empty(), "{gaps:?}");
        let me = &scan.processes[&(std::process::id() as i32)];
        assert!(me.is_running());
        let now = chrono::Utc::now().timestamp_nanos_opt().unwrap();
        // Started before now, and not before the test binary could have.
        assert!(
            me.started_at <= now + 1_000_000_000,
            "{} > {now}",
            me.started_at
        );
        assert!(me.started_at > now - 3600 * 1_000_000_000);
    }

    /// The fields nodectl uses, as procfs's parser reads them.
    fn procfs_fields(record: &[u8]) -> Option<StatRecord> {
        let stat = Stat::from_read(record).ok()?;
        Some(StatRecord {
            pid: stat.pid,
            comm: stat.comm,
            state: stat.state,
            ppid: stat.ppid,
            starttime: stat.starttime,
            rss: stat.rss,
        })
    }

    #[test]
    fn stat_read_in_one_go_parses_as_procfs_does() {
        // Every process of this machine.
        let mut buffer = Vec::new();
        let mut compared = 0;
        for entry in fs::read_dir("/proc").unwrap().flatten() {
            if entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
                .is_none()
            {
                continue;
            }
            let Ok(record) = fs::read(entry.path().join("stat")) else {
                continue; // exited meanwhile
            };
            assert_eq!(parse_stat(&record), procfs_fields(&record), "{record:?}");
            compared += 1;
        }
        assert!(compared > 1, "{compared} processes");
        let path = Path::new("/proc/self/stat");
        let ours = read_stat(path, &mut buffer).unwrap();
        assert_eq!(ours.pid, std::process::id() as i32);
        // A thread's state alone, as procfs reads it, for each thread here.
        for task in fs::read_dir("/proc/self/task").unwrap() {
            let path = task.unwrap().path().join("stat");
            let Ok(record) = fs::read(&path) else {
                continue; // a test thread that ended meanwhile
            };
            let theirs = Stat::from_read(&record[..]).unwrap();
            assert_eq!(state_of(&record), Some(theirs.state), "{path:?}");
        }
        // A buffer too small for the record is grown, not cut short.
        let dir = tempfile::tempdir().unwrap();
        let long = dir.path().join("stat");
        let comm = "x".repeat(2 * RECORD_READ);
        let line = format!(
            "42 ({comm}) S 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0 \
             18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
        );
        fs::write(&long, line).unwrap();
        let stat = read_stat(&long, &mut buffer).unwrap();
        assert_eq!(
            (stat.pid, stat.comm.len(), stat.starttime),
            (42, 2 * RECORD_READ, 777)
        );
    }

    #[test]
    fn stat_records_the_kernel_never_writes_are_skipped_not_a_panic() {
        // Each of these panicked inside procfs's parser (found by
        // tests/hostile_input.rs); a kernel-written one beside them still reads.
        let dir = tempfile::tempdir().unwrap();
        let mut buffer = Vec::new();
        for record in [
            &b")("[..],
            b"(a) S 1",
            b"208 ((a)",
            b"105 \xff(a) b (c)) S 1",
            b"53 ((a) b (c)\xff S 1",
            b"7 (a)",
        ] {
            let path = dir.path().join("stat");
            fs::write(&path, record).unwrap();
            assert!(read_stat(&path, &mut buffer).is_none(), "{record:?}");
            assert_eq!(state_of(record), None, "{record:?}");
        }
        let path = dir.path().join("stat");
        fs::write(
            &path,
            "9 ((a) b (c)) S 1 9 9 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0 \
             18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
        )
        .unwrap();
        assert_eq!(read_stat(&path, &mut buffer).unwrap().comm, "(a) b (c)");
        assert_eq!(state_of(&fs::read(&path).unwrap()), Some('S'));
    }

    #[test]
    fn a_boot_time_past_what_nanoseconds_hold_is_a_gap_not_an_overflow() {
        // Found by tests/hostile_input.rs: `btime` * 10^9 overflowed.
        let dir = tempfile::tempdir().unwrap();
        for btime in [i64::MAX / 1_000_000_000 + 1, i64::MIN] {
            fs::write(dir.path().join("stat"), format!("btime {btime}\n")).unwrap();
            let err = boot_time_nanos(dir.path()).unwrap_err();
            assert!(err.contains("no btime line"), "{err}");
        }
        // The latest that fits, with a process started long after boot.
        let btime = i64::MAX / 1_000_000_000;
        fs::write(dir.path().join("stat"), format!("btime {btime}\n")).unwrap();
        let pid = dir.path().join("42");
        fs::create_dir(&pid).unwrap();
        fs::write(
            pid.join("stat"),
            "42 (a) S 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 18446744073709551615 0 0 \
             18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
        )
        .unwrap();
        let mut gaps = Vec::new();
        let scan = scan(dir.path(), false, &mut gaps);
        // Ticks past i64 (u64 in the file) saturate, never wrap negative.
        assert_eq!(scan.processes[&42].started_at, i64::MAX);
    }

    #[test]
    fn rescan_reads_only_the_pids_asked_for() {
        let me = std::process::id() as i32;
        let gone = i32::MAX; // above any pid_max
        let mut gaps = Vec::new();
        let scan = rescan(Path::new("/proc"), &[me, gone].into(), true, &mut gaps);
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(scan.processes.keys().copied().collect::<Vec<_>>(), [me]);
    }

    #[test]
    fn a_read_denied_or_failing_is_a_reason_and_a_process_gone_is_none() {
        let os = |errno: nix::errno::Errno| io::Error::from_raw_os_error(errno as i32);
        use nix::errno::Errno;
        assert_eq!(read_failure(&os(Errno::ENOENT)), None);
        assert_eq!(read_failure(&os(Errno::ESRCH)), None);
        for (errno, name) in [(Errno::EACCES, "EACCES"), (Errno::EPERM, "EPERM")] {
            let reason = read_failure(&os(errno)).unwrap();
            assert!(
                reason.starts_with(&format!("permission denied ({name}): ")),
                "{reason}"
            );
            assert!(reason.contains("AppArmor or SELinux"), "{reason}");
            assert!(reason.contains("appArmorProfile"), "{reason}");
        }
        assert_eq!(
            read_failure(&os(Errno::EISDIR)).as_deref(),
            Some("is a directory (EISDIR)")
        );
        assert_eq!(
            read_failure(&io::Error::new(io::ErrorKind::InvalidData, "not UTF-8")).as_deref(),
            Some("not UTF-8")
        );
    }

    #[test]
    fn the_failed_reads_of_a_process_are_one_gap_naming_the_first() {
        let denied = io::Error::from_raw_os_error(nix::libc::EACCES);
        let gone = io::Error::from_raw_os_error(nix::libc::ENOENT);
        let mut unread = FailedReads::default();
        unread.note(Path::new("/proc/7/task/8/syscall"), &gone);
        assert!(FailedReads::default().into_gap().is_none());
        unread.note(Path::new("/proc/7/cwd"), &denied);
        unread.note(Path::new("/proc/7/task/8/syscall"), &denied);
        unread.note(Path::new("/proc/7/task/9/syscall"), &denied);
        let gap = unread.into_gap().unwrap();
        assert_eq!(gap.source, Source::Procfs);
        assert!(!gap.source_unavailable);
        assert_eq!(gap.path, Path::new("/proc/7/cwd"));
        assert!(
            gap.error.starts_with("permission denied (EACCES)"),
            "{}",
            gap.error
        );
        assert!(
            gap.error.ends_with("(and 2 more reads of this process)"),
            "{}",
            gap.error
        );
        // Only gone: no gap at all.
        let mut unread = FailedReads::default();
        unread.note(Path::new("/proc/7/cwd"), &gone);
        assert!(unread.into_gap().is_none());
    }

    #[test]
    fn a_fake_proc_roots_files_are_read_within_bounds() {
        let dir = tempfile::tempdir().unwrap();
        // A stat record far past any the kernel writes is not read on.
        let huge = dir.path().join("stat");
        let comm = "x".repeat(4 * RECORD_CAP);
        fs::write(
            &huge,
            format!(
                "42 ({comm}) S 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0 \
                 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
            ),
        )
        .unwrap();
        assert!(read_stat(&huge, &mut Vec::new()).is_none());
        // A FIFO for /proc/stat is an error at once, not a read that waits
        // for a writer.
        fs::remove_file(&huge).unwrap();
        nix::unistd::mkfifo(&huge, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = boot_time_nanos(dir.path()).unwrap_err();
        assert!(err.contains("a FIFO"), "{err}");
        // A thread's syscall file larger than the kernel's is not read.
        let syscall = dir.path().join("syscall");
        fs::write(&syscall, "1 ".repeat(RECORD_CAP)).unwrap();
        let err = read_proc_record_at(&AT_FDCWD, &syscall, &mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("over 65536 bytes"), "{err}");
    }

    #[test]
    fn a_fifo_for_a_processs_files_is_skipped_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("stat"), "btime 1700000000\n").unwrap();
        let fifo = |path: &Path| {
            nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap()
        };
        // A process whose stat is a FIFO (a fake `--proc-root` can hold
        // one): opened without waiting for a writer, and skipped.
        fs::create_dir(root.join("7")).unwrap();
        fifo(&root.join("7/stat"));
        // A shim whose thread's stat is one: that thread is skipped.
        fs::create_dir_all(root.join("8/task/9")).unwrap();
        fs::write(root.join("8/stat"), stat_line(8, SHIM_COMM, 'S')).unwrap();
        fs::write(root.join("8/cmdline"), "containerd-shim-runc-v2\0-id\0x\0").unwrap();
        fifo(&root.join("8/task/9/stat"));
        // And one whose syscall file is one: read as empty, at once.
        fs::create_dir_all(root.join("8/task/10")).unwrap();
        fs::write(root.join("8/task/10/stat"), stat_line(10, SHIM_COMM, 'S')).unwrap();
        fifo(&root.join("8/task/10/syscall"));
        let mut gaps = Vec::new();
        let scan = scan(root, true, &mut gaps);
        assert_eq!(scan.processes.keys().copied().collect::<Vec<_>>(), [8]);
        let threads: Vec<_> = scan.shims[0]
            .threads
            .iter()
            .map(|t| (t.tid, t.state, t.syscall.clone()))
            .collect();
        assert_eq!(threads, [(10, Some('S'), None)]);
    }

    #[test]
    fn missing_proc_root_is_a_source_gap() {
        let mut gaps = Vec::new();
        let scan = scan(Path::new("/nonexistent/nodectl/proc"), true, &mut gaps);
        assert!(scan.processes.is_empty());
        assert!(gaps[0].source_unavailable);
    }

    proptest::proptest! {
        /// A record as the kernel writes it, whatever its `comm` (any bytes
        /// but NUL, up to 15) and numbers: the fields read as procfs reads them.
        #[test]
        fn stat_records_parse_as_procfs_parses_them(
            pid in 1i32..i32::MAX,
            comm in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::sample::select(b"() \n\t\xff\xc3\xa9".to_vec()),
                    1u8..=255,
                ],
                0..16,
            ),
            state in proptest::sample::select(b"RSDZTtXIPW".to_vec()),
            // Fields 5 on; each within its type (the narrowest is i32).
            mut fields in proptest::collection::vec(0..=i32::MAX as u64, 49),
            starttime in proptest::num::u64::ANY,
            rss in proptest::num::u64::ANY,
            ppid in 0i32..i32::MAX,
        ) {
            (fields[17], fields[19]) = (starttime, rss);
            let mut record = format!("{pid} (").into_bytes();
            record.extend(&comm);
            record.extend(format!(") {} {ppid}", char::from(state)).bytes());
            for field in &fields {
                record.extend(format!(" {field}").bytes());
            }
            record.push(b'\n');
            proptest::prop_assert_eq!(parse_stat(&record), procfs_fields(&record));
        }

        /// Anything at all: never a panic, and where procfs reads the record
        /// (one of the kernel's shape), the same fields.
        #[test]
        fn any_bytes_parse_as_procfs_parses_them_or_not_at_all(
            record in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::sample::select(b"() 0123456789\n\xff".to_vec()),
                    0u8..=255,
                ],
                0..200,
            ),
        ) {
            let ours = parse_stat(&record);
            if comm_bounds(String::from_utf8_lossy(&record).trim().as_bytes()).is_some() {
                proptest::prop_assert_eq!(ours, procfs_fields(&record));
            }
        }
    }
}
