//! Fault injection with strace: holding a shim's `umount2` calls reproduces
//! a slow overlay unmount without a slow disk.

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::procs;

/// The strace child, shared with the [`super::TestBed`] so that dropping the
/// bed detaches any strace the test still holds.
pub(crate) type Slot = Arc<Mutex<Option<Child>>>;

/// How long strace may take to attach to every thread of its tracee.
const ATTACH: Duration = Duration::from_secs(15);
/// How long strace may take to detach and exit after SIGINT.
const DETACH: Duration = Duration::from_secs(10);

/// A running strace. [`Strace::detach`] (or drop) lets the tracee go; a
/// syscall held in `delay_enter` then proceeds at once.
pub struct Strace {
    slot: Slot,
    pid: i32,
}

impl Strace {
    /// Starts `strace -f -p <tracee>` delaying every `umount2` on entry by
    /// `delay`, logging to `log` (stderr to `log` + `.err`), and returns once
    /// every thread of the tracee names strace as its tracer. New threads
    /// and children (runc) are followed by `-f` from then on.
    pub(crate) fn delay_umount2(tracee: i32, delay: Duration, log: &Path) -> Result<Self, String> {
        let err_path = log.with_extension("err");
        let stderr = fs::File::create(&err_path).map_err(|e| e.to_string())?;
        let child = Command::new("strace")
            // -qq and signal=none: the log shows the umount2 calls only.
            .args([
                "-f",
                "-qq",
                "-e",
                "trace=umount2",
                "-e",
                "signal=none",
                "-e",
            ])
            // A bare number is microseconds for delay_enter.
            .arg(format!("inject=umount2:delay_enter={}", delay.as_micros()))
            .arg("-o")
            .arg(log)
            .arg("-p")
            .arg(tracee.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("spawning strace: {e}"))?;
        let pid = child.id() as i32;
        let strace = Strace {
            slot: Arc::new(Mutex::new(Some(child))),
            pid,
        };
        let deadline = Instant::now() + ATTACH;
        while !procs::all_threads_traced_by(tracee, pid) {
            let exited = strace
                .slot
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || Instant::now() > deadline {
                let why = match exited {
                    Some(status) => format!("strace exited ({status})"),
                    None => format!("not attached within {ATTACH:?}"),
                };
                let mut strace = strace;
                strace.detach();
                return Err(format!(
                    "strace -p {tracee}: {why}; its stderr:\n{}",
                    fs::read_to_string(&err_path).unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(strace)
    }

    pub(crate) fn slot(&self) -> Slot {
        Arc::clone(&self.slot)
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// SIGINT makes strace detach from every tracee and exit; bounded, with
    /// SIGKILL as the fallback (the kernel detaches tracees of a dead tracer
    /// too). Idempotent.
    pub fn detach(&mut self) {
        detach(&self.slot);
    }
}

impl Drop for Strace {
    fn drop(&mut self) {
        self.detach();
    }
}

/// Detaches and reaps the strace in `slot`, if it is still there.
pub(crate) fn detach(slot: &Slot) {
    let Some(mut child) = slot.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return;
    };
    // The child is not reaped yet, so its pid cannot have been reused.
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGINT);
    let deadline = Instant::now() + DETACH;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}
