//! Reading `/proc`: process states, parents, start times and argv.
//!
//! Liveness is always judged by the state letter in `/proc/<pid>/stat`, never
//! by `/proc/<pid>` existing: PID 1 on the test machines reaps orphans late,
//! so a killed process can linger for a while as a defunct (Z) entry.

use std::fs;

/// The fields of `/proc/<pid>/stat` the harness needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub state: char,
    pub ppid: i32,
    /// Clock ticks since boot: with the pid, it names one process for good,
    /// even after the pid is reused.
    pub starttime: u64,
}

pub fn stat(pid: i32) -> Option<Stat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may itself contain ") ", so split at the last one.
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    // Fields after the name start at field 3 (state); starttime is field 22.
    Some(Stat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        starttime: fields.get(19)?.parse().ok()?,
    })
}

/// Alive means present and neither defunct (Z) nor dead (X).
pub fn is_running(pid: i32) -> bool {
    matches!(stat(pid), Some(s) if s.state != 'Z' && s.state != 'X')
}

/// Whether the process `pid` that started at `starttime` (see [`Stat`]) is
/// still alive: false once it is gone, defunct, or its pid names another
/// process (pids wrap at 32768 on the test machines).
pub fn is_running_since(pid: i32, starttime: u64) -> bool {
    matches!(stat(pid), Some(s) if s.starttime == starttime && s.state != 'Z' && s.state != 'X')
}

/// Every pid in `/proc`.
pub fn pids() -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// A process's argv (empty for kernel threads and zombies).
pub fn cmdline(pid: i32) -> Option<Vec<String>> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// The value following `name` in `args`, as in `-id <value>`.
pub fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1).map(String::as_str)
}

/// Every process whose argv has `name value` (e.g. `-address <socket>`),
/// alive or not, with its argv.
pub fn with_flag(name: &str, value: &str) -> Vec<(i32, Vec<String>)> {
    pids()
        .into_iter()
        .filter_map(|pid| Some((pid, cmdline(pid)?)))
        .filter(|(_, args)| flag(args, name) == Some(value))
        .collect()
}

/// Every descendant of `roots` (not the roots themselves), from one scan of
/// the PPid links.
pub fn descendants(roots: &[i32]) -> Vec<i32> {
    let links: Vec<(i32, i32)> = pids()
        .into_iter()
        .filter_map(|pid| Some((pid, stat(pid)?.ppid)))
        .collect();
    let mut found: Vec<i32> = Vec::new();
    let mut frontier: Vec<i32> = roots.to_vec();
    while let Some(parent) = frontier.pop() {
        for (pid, _) in links.iter().filter(|(_, ppid)| *ppid == parent) {
            if !found.contains(pid) && !roots.contains(pid) {
                found.push(*pid);
                frontier.push(*pid);
            }
        }
    }
    found
}

/// True once every thread of `pid` names `tracer` as its TracerPid.
pub fn all_threads_traced_by(pid: i32, tracer: i32) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut threads = 0;
    for task in tasks.flatten() {
        let status = fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let traced_by = status
            .lines()
            .find_map(|l| l.strip_prefix("TracerPid:"))
            .and_then(|v| v.trim().parse::<i32>().ok());
        if traced_by != Some(tracer) {
            return false;
        }
        threads += 1;
    }
    threads > 0
}

/// Reaps `pid` if, and only if, it is still the process identified by
/// `starttime`, is defunct and is our child (shims and the containers'
/// processes are reparented to the test process, a child subreaper).
///
/// Never `waitpid(-1)`: tests of one binary run in parallel threads, and a
/// blanket reap would steal the exit status of another test's child.
pub fn reap_if_ours(pid: i32, starttime: u64) -> bool {
    use nix::sys::wait::{waitpid, WaitPidFlag};
    let ours = std::process::id() as i32;
    match stat(pid) {
        Some(s) if s.state == 'Z' && s.ppid == ours && s.starttime == starttime => {
            waitpid(nix::unistd::Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)).is_ok()
        }
        _ => false,
    }
}

/// Whether a thread of `pid` is in umount2, as `/proc/<pid>/task/<tid>/syscall`
/// says (its first field the system call's number).
pub fn in_umount2(pid: i32) -> bool {
    #[cfg(target_arch = "x86_64")]
    const UMOUNT2: &str = "166";
    #[cfg(target_arch = "aarch64")]
    const UMOUNT2: &str = "39";
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        fs::read_to_string(task.path().join("syscall"))
            .is_ok_and(|text| text.split_whitespace().next() == Some(UMOUNT2))
    })
}
