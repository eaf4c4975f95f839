//! Holding one shim thread at one point of its code, for a race strace
//! cannot aim at (its injections hit every thread alike).
//!
//! [`Stall::after_unmount`] traces every thread of a shim with ptrace and
//! holds the thread that has just unmounted a given rootfs at the end of its
//! next `futex` call. In the runc shim's task Delete, that call is the wake
//! of a goroutine waiting on the process's mutex (`p.mu.Unlock()` right after
//! the state moves to "deleted"), and the thread then goes on to forget the
//! container (`delete(s.containers, id)`): holding it there keeps the
//! container on the shim's books while a second Delete, woken by that very
//! futex, fails "cannot delete a deleted process" and containerd answers
//! with a Shutdown that the shim ignores (seed 002's T3 to T8).
//!
//! The tracer is a thread of the test process: it waits only for its own
//! tracees (`__WNOTHREAD`), never for the test's children, and when it ends
//! the kernel detaches every tracee and lets it run on.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::libc;
use nix::sys::ptrace::{self, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

/// How long attaching to every thread of the shim may take.
const ATTACH: Duration = Duration::from_secs(10);
/// The tracer gives up (and so detaches) after this, whatever happens.
const LIFETIME: Duration = Duration::from_secs(120);

/// A running tracer; [`Stall::finish`] (or drop) ends it.
pub struct Stall {
    stop: Arc<AtomicBool>,
    tracer: Option<JoinHandle<Vec<String>>>,
}

/// What the tracer knows of one traced thread.
#[derive(Default)]
struct Thread {
    /// The syscall it is in (between its entry and exit stops), with its
    /// first two arguments.
    in_syscall: Option<(u64, [u64; 2])>,
    /// It unmounted the rootfs and has made no futex call since.
    unmounted: bool,
}

impl Stall {
    /// Traces every thread of `shim` and holds, once, the thread that
    /// unmounts `rootfs` (its `umount2`) at the exit of its next `futex`
    /// call if that is a wake, for `hold` (a wait is the thread parking,
    /// the goroutine gone on elsewhere: nothing is held then). Returns once
    /// every thread is traced.
    pub fn after_unmount(shim: i32, rootfs: &Path, hold: Duration) -> Result<Stall, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready, attached) = mpsc::channel();
        let tracer = {
            let stop = Arc::clone(&stop);
            let rootfs = rootfs.to_path_buf();
            std::thread::Builder::new()
                .name("stall-tracer".into())
                .spawn(move || trace(shim, rootfs, hold, stop, ready))
                .map_err(|e| format!("spawning the tracer: {e}"))?
        };
        let mut stall = Stall {
            stop,
            tracer: Some(tracer),
        };
        match attached.recv_timeout(ATTACH + Duration::from_secs(1)) {
            Ok(Ok(())) => Ok(stall),
            Ok(Err(why)) => Err(format!("{why}; {:?}", stall.end())),
            Err(_) => Err(format!(
                "not attached to shim {shim} within {ATTACH:?}; {:?}",
                stall.end()
            )),
        }
    }

    /// Ends the tracing (a held thread runs on at once) and returns what the
    /// tracer saw and did, one line each.
    pub fn finish(mut self) -> Vec<String> {
        self.end()
    }

    fn end(&mut self) -> Vec<String> {
        self.stop.store(true, Ordering::SeqCst);
        match self.tracer.take().map(JoinHandle::join) {
            Some(Ok(events)) => events,
            Some(Err(_)) => vec!["the tracer panicked".to_string()],
            None => Vec::new(),
        }
    }
}

impl Drop for Stall {
    fn drop(&mut self) {
        self.end();
    }
}

/// The tracer thread's body: the tracees are this thread's, so attaching,
/// waiting and resuming all happen here. Returning detaches them all.
fn trace(
    shim: i32,
    rootfs: PathBuf,
    hold: Duration,
    stop: Arc<AtomicBool>,
    ready: mpsc::Sender<Result<(), String>>,
) -> Vec<String> {
    let started = Instant::now();
    let mut events = Vec::new();
    let say = |events: &mut Vec<String>, what: String| {
        events.push(format!("+{:.3} s {what}", started.elapsed().as_secs_f64()))
    };
    say(
        &mut events,
        format!("watching for the unmount of {}", rootfs.display()),
    );
    let mut threads: BTreeMap<Pid, Thread> = BTreeMap::new();
    if let Err(why) = attach_all(shim, &mut threads) {
        let _ = ready.send(Err(why));
        return events;
    }
    let _ = ready.send(Ok(()));
    say(
        &mut events,
        format!("traced {} threads of shim {shim}", threads.len()),
    );
    // The path argument umount2 gets, NUL included.
    let mut wanted = rootfs.as_os_str().as_encoded_bytes().to_vec();
    wanted.push(0);
    let mut held: Option<(Pid, Instant)> = None;
    let mut holds_left = 1;
    let mut unmount_seen = false;
    let flags = WaitPidFlag::__WALL | WaitPidFlag::__WNOTHREAD | WaitPidFlag::WNOHANG;
    loop {
        if let Some((tid, until)) = held {
            if Instant::now() >= until || stop.load(Ordering::SeqCst) {
                let _ = ptrace::syscall(tid, None);
                say(&mut events, format!("released thread {tid}"));
                held = None;
            }
        }
        if held.is_none() && (stop.load(Ordering::SeqCst) || started.elapsed() > LIFETIME) {
            break;
        }
        let status = match waitpid(None, Some(flags)) {
            Ok(WaitStatus::StillAlive) => {
                std::thread::sleep(Duration::from_micros(20));
                continue;
            }
            Ok(status) => status,
            Err(Errno::ECHILD) => {
                say(&mut events, "every traced thread is gone".to_string());
                break;
            }
            Err(e) => {
                say(&mut events, format!("waitpid: {e}"));
                break;
            }
        };
        match status {
            WaitStatus::PtraceSyscall(tid) => {
                let Ok(info) = syscall_info(tid) else {
                    let _ = ptrace::syscall(tid, None);
                    continue;
                };
                let thread = threads.entry(tid).or_default();
                if info.op == libc::PTRACE_SYSCALL_INFO_ENTRY {
                    // SAFETY: op says the union holds an entry.
                    let entry = unsafe { info.u.entry };
                    thread.in_syscall = Some((entry.nr, [entry.args[0], entry.args[1]]));
                } else if let Some((nr, [arg, op])) = thread.in_syscall.take() {
                    if nr == libc::SYS_umount2 as u64 && reads_as(tid, arg, &wanted) {
                        if !unmount_seen {
                            say(&mut events, format!("thread {tid} unmounted the rootfs"));
                            unmount_seen = true;
                        }
                        thread.unmounted = true;
                    } else if nr == libc::SYS_futex as u64 && thread.unmounted {
                        thread.unmounted = false;
                        // A wait is the thread parking: the Delete went on
                        // on another thread, and is not held this time.
                        let command = op as i32 & libc::FUTEX_CMD_MASK;
                        if command != libc::FUTEX_WAKE {
                            say(
                                &mut events,
                                format!("thread {tid} parked (futex op {command}): not held"),
                            );
                        } else if holds_left > 0 {
                            holds_left -= 1;
                            say(
                                &mut events,
                                format!(
                                    "holding thread {tid} at the end of its futex wake for {hold:?}"
                                ),
                            );
                            held = Some((tid, Instant::now() + hold));
                            continue;
                        }
                    }
                }
                let _ = ptrace::syscall(tid, None);
            }
            WaitStatus::PtraceEvent(tid, _, _) => {
                // A new thread's first stop, the stop PTRACE_INTERRUPT asked
                // for, a clone event, or a group-stop (nothing stops our
                // shims): each one resumes traced.
                threads.entry(tid).or_default();
                let _ = ptrace::syscall(tid, None);
            }
            WaitStatus::Stopped(tid, signal) => {
                // A signal for the tracee (Go's runtime lives on SIGURG):
                // delivered as it came.
                let _ = ptrace::syscall(tid, Some(signal).filter(|s| *s != Signal::SIGSTOP));
            }
            WaitStatus::Exited(tid, _) | WaitStatus::Signaled(tid, _, _) => {
                threads.remove(&tid);
            }
            _ => {}
        }
    }
    say(&mut events, "detaching".to_string());
    events
}

/// Seizes every thread of `shim` (threads it starts from then on are
/// seized by the kernel, PTRACE_O_TRACECLONE) and asks each to stop, so
/// that the loop starts tracing its syscalls. Lists the threads until no
/// new one shows up: one may start between the listing and its creator's
/// seizure.
fn attach_all(shim: i32, threads: &mut BTreeMap<Pid, Thread>) -> Result<(), String> {
    let options = Options::PTRACE_O_TRACESYSGOOD | Options::PTRACE_O_TRACECLONE;
    let deadline = Instant::now() + ATTACH;
    loop {
        let tids = fs::read_dir(format!("/proc/{shim}/task"))
            .map_err(|e| format!("listing the threads of {shim}: {e}"))?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .map(Pid::from_raw)
            .filter(|tid| !threads.contains_key(tid))
            .collect::<Vec<_>>();
        if tids.is_empty() {
            return Ok(());
        }
        for tid in tids {
            match ptrace::seize(tid, options) {
                Ok(()) => {
                    let _ = ptrace::interrupt(tid);
                    threads.insert(tid, Thread::default());
                }
                // Already seized through its creator's clone.
                Err(Errno::EPERM) => {
                    threads.insert(tid, Thread::default());
                }
                // Gone in between.
                Err(Errno::ESRCH) => {}
                Err(e) => return Err(format!("PTRACE_SEIZE {tid}: {e}")),
            }
        }
        if Instant::now() > deadline {
            return Err(format!("threads of {shim} kept appearing for {ATTACH:?}"));
        }
    }
}

/// PTRACE_GET_SYSCALL_INFO: whether the stop is a syscall's entry or exit,
/// and the entry's number and arguments. Called through libc: nix's
/// `ptrace::syscall_info` passes no buffer size, so the kernel fills nothing.
fn syscall_info(tid: Pid) -> Result<libc::ptrace_syscall_info, Errno> {
    let mut info = std::mem::MaybeUninit::<libc::ptrace_syscall_info>::zeroed();
    let size = std::mem::size_of::<libc::ptrace_syscall_info>();
    // SAFETY: the kernel writes at most `size` bytes into `info`, which it
    // owns for the call; zeroed, every field is valid whatever it wrote.
    let written = unsafe {
        libc::ptrace(
            libc::PTRACE_GET_SYSCALL_INFO,
            tid.as_raw(),
            size as *mut libc::c_void,
            info.as_mut_ptr(),
        )
    };
    Errno::result(written)?;
    // SAFETY: zero-initialised above, then (partly) written by the kernel.
    Ok(unsafe { info.assume_init() })
}

/// Whether the tracee's memory at `address` holds `wanted` (a path and its
/// NUL), read through /proc/<tid>/mem while the thread is stopped.
fn reads_as(tid: Pid, address: u64, wanted: &[u8]) -> bool {
    let Ok(mem) = fs::File::open(format!("/proc/{tid}/mem")) else {
        return false;
    };
    let mut bytes = vec![0u8; wanted.len()];
    mem.read_exact_at(&mut bytes, address).is_ok() && bytes == wanted
}
