//! procfs: which processes really run, and which of them are containerd's
//! shims. The scan entry point: each process's `stat` is read by
//! `proc_stat.rs`, a shim's threads are sampled by `shim_threads.rs`.
//!
//! Liveness is judged by the process state, not by `/proc/<pid>` existing: a
//! killed process stays visible as defunct (Z) until its parent reaps it, and
//! orphaned shims are reaped late by some init processes.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::fcntl::{OFlag, AT_FDCWD};

use super::proc_stat::{
    boot_time_nanos, noted, parse_stat, read_failure, ticks_to_nanos, FailedReads, StatRecord,
    Unread,
};
use super::shim_threads::{sample_threads, ThreadReads};
use crate::model::{Gap, ProcessInfo, Shim, Source, UnixNanos};
use crate::read::bounded::{numbered, open_at, open_dir, read_proc_record_at, RECORD_READ};

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

impl Piece {
    /// `pid` lives but was not read; `why` (its path and the reason) is
    /// kept for the first such.
    fn note_unread(&mut self, pid: i32, why: impl FnOnce() -> (PathBuf, String)) {
        self.unread.push(pid);
        self.first_unread.get_or_insert_with(why);
    }
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
        let Some(stat) = self.stat(pid, piece) else {
            return;
        };
        let mut info = ProcessInfo {
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
            piece.gaps.extend(unread.into_gap());
            match shim {
                Some(shim) => piece.shims.push(shim),
                // Its details unread: read its `stat` again (see
                // [`Unread`]).
                None => match Unread::judge(stat.starttime, self.stat(pid, piece)) {
                    Unread::Gone => return,
                    Unread::Reused => {
                        let reason = "its pid was reused while it was read";
                        piece.note_unread(pid, || (dir.join("stat"), reason.to_string()));
                        return;
                    }
                    Unread::Now(state) => info.state = state,
                },
            }
        }
        piece.processes.push(info);
    }

    /// `pid`'s `stat`, parsed; `None` when it is gone (or unparsable), or
    /// unreadable while it lives (then noted in `piece` as unread).
    fn stat(&mut self, pid: i32, piece: &mut Piece) -> Option<StatRecord> {
        let mut path = [0; 48];
        let read = read_proc_record_at(
            &*self.root_dir,
            numbered(&mut path, pid, "stat"),
            &mut self.buffer,
        );
        match read {
            Ok(filled) => parse_stat(&self.buffer[..filled]),
            Err(err) => {
                // Gone is churn; anything else leaves a live process unseen,
                // which a check must not take for one that exited.
                if let Some(reason) = read_failure(&err) {
                    let path = || self.proc_root.join(pid.to_string()).join("stat");
                    piece.note_unread(pid, || (path(), reason));
                }
                None
            }
        }
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

/// A real shim's command line is a few hundred bytes; any process can name
/// itself a shim and carry megabytes of arguments, which must not become
/// nodectl's memory (3,000 such processes took 436 MiB before this cap).
const CMDLINE_CAP: u64 = 16 * 1024;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
