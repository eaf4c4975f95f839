//! procfs: which processes really run, and what containerd's shims are doing.
//!
//! Liveness is judged by the process state, not by `/proc/<pid>` existing: a
//! killed process stays visible as defunct (Z) until its parent reaps it, and
//! orphaned shims are reaped late by some init processes.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use procfs::process::Stat;
use procfs::FromRead;

use crate::snapshot::{Gap, ProcessInfo, Shim, ThreadSample, UnixNanos};

const SOURCE: &str = "procfs";
/// `comm` is cut at 15 bytes, which is exactly the common prefix of every
/// shim binary (`containerd-shim`, `-runc-v1`, `-runc-v2`, `-kata-v2`, ...).
const SHIM_COMM: &str = "containerd-shim";

pub struct ProcScan {
    pub processes: BTreeMap<i32, ProcessInfo>,
    pub shims: Vec<Shim>,
}

/// Scans every process below `proc_root` (normally `/proc`). Processes that
/// exit during the scan are skipped: that is churn, not a gap.
pub fn scan(proc_root: &Path, gaps: &mut Vec<Gap>) -> ProcScan {
    let mut scan = ProcScan {
        processes: BTreeMap::new(),
        shims: Vec::new(),
    };
    let boot_time = match boot_time_nanos(proc_root) {
        Ok(boot_time) => boot_time,
        Err(err) => {
            gaps.push(Gap::source(SOURCE, proc_root.join("stat"), err));
            return scan;
        }
    };
    let ticks_per_second = procfs::ticks_per_second() as i64;
    let page_size = procfs::page_size();
    let entries = match fs::read_dir(proc_root) {
        Ok(entries) => entries,
        Err(err) => {
            gaps.push(Gap::source(SOURCE, proc_root, err));
            return scan;
        }
    };
    // One read of `<pid>/stat` per process, parsed by procfs: on a node with
    // thousands of processes every extra open per process shows.
    let pids = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok());
    for pid in pids {
        let dir = proc_root.join(pid.to_string());
        let Ok(stat) = Stat::from_file(dir.join("stat")) else {
            continue;
        };
        let info = ProcessInfo {
            pid: stat.pid,
            ppid: stat.ppid,
            comm: stat.comm,
            state: stat.state,
            started_at: boot_time + ticks_to_nanos(stat.starttime, ticks_per_second),
            rss_bytes: stat.rss.saturating_mul(page_size),
        };
        if info.comm == SHIM_COMM && info.is_running() {
            if let Some(shim) = read_shim(&dir, info.pid) {
                scan.shims.push(shim);
            }
        }
        scan.processes.insert(info.pid, info);
    }
    scan
}

fn ticks_to_nanos(ticks: u64, ticks_per_second: i64) -> i64 {
    (ticks as i64).saturating_mul(1_000_000_000 / ticks_per_second.max(1))
}

/// Boot time as unix ns. `/proc/<pid>/stat` counts start times on the boot-time
/// clock; on the live system `CLOCK_REALTIME - CLOCK_BOOTTIME` gives the boot
/// instant to the nanosecond, where `/proc/stat`'s `btime` has whole seconds.
fn boot_time_nanos(proc_root: &Path) -> Result<UnixNanos, String> {
    use nix::time::{clock_gettime, ClockId};
    if proc_root == Path::new("/proc") {
        let nanos = |clock| -> Result<i64, String> {
            let ts = clock_gettime(clock).map_err(|e| e.to_string())?;
            Ok(ts.tv_sec() * 1_000_000_000 + ts.tv_nsec())
        };
        return Ok(nanos(ClockId::CLOCK_REALTIME)? - nanos(ClockId::CLOCK_BOOTTIME)?);
    }
    let stat = fs::read_to_string(proc_root.join("stat")).map_err(|e| e.to_string())?;
    stat.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|secs| secs.trim().parse::<i64>().ok())
        .map(|secs| secs * 1_000_000_000)
        .ok_or_else(|| "no btime line".to_string())
}

fn read_shim(dir: &Path, pid: i32) -> Option<Shim> {
    let raw = fs::read(dir.join("cmdline")).ok()?;
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
        cwd: fs::read_link(dir.join("cwd")).ok(),
        threads: sample_threads(dir),
    })
}

fn sample_threads(dir: &Path) -> Vec<ThreadSample> {
    let Ok(tasks) = fs::read_dir(dir.join("task")) else {
        return Vec::new();
    };
    let mut threads = Vec::new();
    for task in tasks.flatten() {
        let Some(tid) = task
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<i32>().ok())
        else {
            continue;
        };
        let task_dir = task.path();
        let Ok(stat) = Stat::from_file(task_dir.join("stat")) else {
            continue;
        };
        let syscall = fs::read_to_string(task_dir.join("syscall"))
            .ok()
            .and_then(|text| syscall_name(&text));
        // Where a thread sleeps only tells something for uninterruptible
        // sleep; skipping it for the rest saves a read per thread.
        let wchan = (stat.state == 'D')
            .then(|| fs::read_to_string(task_dir.join("wchan")).ok())
            .flatten()
            .filter(|w| !w.is_empty() && w != "0");
        threads.push(ThreadSample {
            tid,
            state: stat.state,
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

    #[test]
    fn own_process_is_seen_running_with_a_plausible_start_time() {
        let mut gaps = Vec::new();
        let scan = scan(Path::new("/proc"), &mut gaps);
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
    fn missing_proc_root_is_a_source_gap() {
        let mut gaps = Vec::new();
        let scan = scan(Path::new("/nonexistent/nodectl/proc"), &mut gaps);
        assert!(scan.processes.is_empty());
        assert!(gaps[0].source_unavailable);
    }
}
