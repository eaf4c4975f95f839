//! Reading one process's files in procfs: its `stat` record (parsed by
//! hand: the scan reads thousands), the boot time its start ticks count
//! from, and why a read failed. Apart from the scan because the shim
//! thread sampler and the shim proof read processes the same way.

use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use crate::model::{Gap, Source, UnixNanos};
use crate::read::bounded::{read_proc_record_at, read_proc_string};

/// `/proc/stat`: a line per CPU and a few more.
const PROC_STAT_LIMIT: u64 = 1024 * 1024;

/// Reads and parses a `stat` file with one `read` into a
/// reused buffer: on a node with thousands of processes, the size probing of
/// a general file read (a stat and a seek per file, useless on procfs, which
/// reports size 0) is a third of the syscalls.
#[cfg(test)]
fn read_stat(path: &Path, buffer: &mut Vec<u8>) -> Option<StatRecord> {
    read_stat_at(&nix::fcntl::AT_FDCWD, path, buffer)
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
pub(crate) fn state_of(record: &[u8]) -> Option<char> {
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
///
/// The two clocks are read one after the other: a thread preempted between
/// them (a DaemonSet pod with a 10m CPU request on a busy node) got a boot
/// time milliseconds late, and a shim proven against another reading of it
/// looked like a reused pid and was dropped from the look. So the real-time
/// clock is read between two readings of the boot-time clock, and of a few
/// tries the one with the least time between them is taken.
pub(crate) fn boot_time_nanos(proc_root: &Path) -> Result<UnixNanos, String> {
    use nix::time::{clock_gettime, ClockId};
    if proc_root == Path::new("/proc") {
        let nanos = |clock| -> Result<i64, String> {
            let ts = clock_gettime(clock).map_err(|e| e.to_string())?;
            Ok(ts.tv_sec() * 1_000_000_000 + ts.tv_nsec())
        };
        let mut best: Option<(i64, i64)> = None;
        for _ in 0..BOOT_TIME_TRIES {
            let before = nanos(ClockId::CLOCK_BOOTTIME)?;
            let real = nanos(ClockId::CLOCK_REALTIME)?;
            let after = nanos(ClockId::CLOCK_BOOTTIME)?;
            let window = after.saturating_sub(before);
            let boot = real - (before + window / 2);
            if best.is_none_or(|(least, _)| window < least) {
                best = Some((window, boot));
            }
            if window < BOOT_TIME_WINDOW {
                break;
            }
        }
        return best
            .map(|(_, boot)| boot)
            .ok_or_else(|| "no clock read".to_string());
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

/// Tries of [`boot_time_nanos`] at most, and the window between its
/// readings of the boot-time clock that ends them: a read uninterrupted
/// takes well under a microsecond.
const BOOT_TIME_TRIES: usize = 8;
const BOOT_TIME_WINDOW: i64 = 20_000;

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
        Some(Gap::item(Source::Procfs, path, error))
    }
}

/// `result`'s value, or `None` with its error noted in `unread`.
pub(crate) fn noted<T>(result: io::Result<T>, path: &Path, unread: &mut FailedReads) -> Option<T> {
    result.map_err(|err| unread.note(path, &err)).ok()
}

/// A shim whose details could not be read, by its `stat` read again.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unread {
    /// Ended since it was first read: it serves nothing, and a cleanup must
    /// not be refused for it (a shim ending beside one is everyday churn).
    Gone,
    /// Reaped and its pid taken by another process, which is unseen.
    Reused,
    /// Still there, in this state (a live one is taken to serve anything).
    Now(char),
}

impl Unread {
    /// `starttime`, the first read's; `again`, the second (`None`: gone).
    pub(crate) fn judge(starttime: u64, again: Option<StatRecord>) -> Unread {
        match again {
            None => Unread::Gone,
            Some(again) if again.starttime != starttime => Unread::Reused,
            Some(again) => Unread::Now(again.state),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::bounded::{RECORD_CAP, RECORD_READ};
    use nix::fcntl::AT_FDCWD;
    use procfs::process::Stat;
    use procfs::FromRead;
    use std::fs;

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
    fn the_live_boot_time_is_the_kernels_btime_and_two_readings_agree() {
        let live = boot_time_nanos(Path::new("/proc")).unwrap();
        let stat = fs::read_to_string("/proc/stat").unwrap();
        let btime: i64 = stat
            .lines()
            .find_map(|l| l.strip_prefix("btime "))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // btime is whole seconds (rounded either way by the kernel).
        assert!(
            (live - btime * 1_000_000_000).abs() <= 1_000_000_000,
            "{live} against btime {btime}"
        );
        let again = boot_time_nanos(Path::new("/proc")).unwrap();
        // The shims' proof holds start times to 10 ms: two readings of one
        // look must be far closer than that.
        assert!((again - live).abs() < 5_000_000, "{live} then {again}");
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

    #[test]
    fn a_shim_read_again_is_gone_reused_or_in_its_state_now() {
        let record = |starttime, state| StatRecord {
            pid: 8,
            comm: "containerd-shim".to_string(),
            state,
            ppid: 1,
            starttime,
            rss: 0,
        };
        assert_eq!(Unread::judge(777, None), Unread::Gone);
        assert_eq!(Unread::judge(777, Some(record(778, 'S'))), Unread::Reused);
        assert_eq!(Unread::judge(777, Some(record(777, 'Z'))), Unread::Now('Z'));
        assert_eq!(Unread::judge(777, Some(record(777, 'S'))), Unread::Now('S'));
    }
}
