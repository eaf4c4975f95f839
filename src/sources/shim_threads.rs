//! What each thread of a running shim is blocked in, and the names of the
//! syscalls it may be found in. Apart from the process scan because only
//! the checks that judge stuck shims ask for it, and it is most of the
//! reads when they do.

use std::fs::File;
use std::io;
use std::path::Path;

use super::proc_stat::{noted, state_of, FailedReads};
use crate::model::shim::is_idle_wait;
use crate::model::ThreadSample;
use crate::read::bounded::{numbered, open_dir, read_proc_record_at, RECORD_READ};

/// How a shim's threads are read: the leader's state is the process's own
/// (`<pid>/stat` says the leader's, already read).
#[derive(Clone, Copy)]
pub(crate) struct ThreadReads {
    pub leader_state: char,
    pub every_state: bool,
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
pub(crate) fn sample_threads(
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
}
