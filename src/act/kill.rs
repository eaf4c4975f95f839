//! Ending leaked shims, safely.
//!
//! Between detection and the signal, the shim may exit and its pid be reused,
//! or containerd may take it back. So: open a pidfd first (it pins one
//! process, whatever happens to the pid number), then re-gather and re-judge
//! the shim on the fresh snapshot, check it is the same process (start time,
//! executable), and only then signal *through the pidfd*: SIGTERM, a grace
//! period, then SIGKILL. Exit is observed on the pidfd, which reports the
//! process's death even while it lingers as a defunct entry in /proc.

use std::fs;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::libc;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::Signal;
use serde::Serialize;

use crate::checks::{leaked_shim, Basis};
use crate::snapshot::{ProcessInfo, Shim, Snapshot};

/// `/proc/<pid>/stat` start times tick at 100 Hz; two readings of the same
/// process differ by less than one tick.
const SAME_START: i64 = 10_000_000;
const KILL_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Dry run: this shim would be ended with --kill.
    WouldKill,
    /// Exited after SIGTERM.
    Terminated,
    /// Exited after SIGKILL.
    Killed,
    /// Re-verification failed; the shim was not touched.
    Refused,
    /// Gone before we acted.
    AlreadyGone,
    /// Signalled but still running.
    Failed,
}

#[derive(Debug, Clone, Serialize)]
pub struct Action {
    pub shim_pid: i32,
    pub shim_id: String,
    pub outcome: Outcome,
    pub detail: String,
    /// What is left behind after the shim is gone: its bundle directory,
    /// socket and mounts, for the operator to clean.
    pub remains: Vec<String>,
}

/// A pidfd: a handle on one process, immune to pid reuse.
struct PidFd(OwnedFd);

impl PidFd {
    fn open(pid: i32) -> Result<PidFd, nix::Error> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            return Err(nix::Error::last());
        }
        // SAFETY: the kernel just handed us this fd; nobody else owns it.
        Ok(PidFd(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
    }

    fn signal(&self, signal: Signal) -> Result<(), nix::Error> {
        // SAFETY: pidfd_send_signal(pidfd, sig, info = NULL, flags = 0).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.0.as_raw_fd(),
                signal as i32,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        if rc < 0 {
            Err(nix::Error::last())
        } else {
            Ok(())
        }
    }

    /// Waits until the process exits (the pidfd turns readable) or `timeout`.
    fn wait_exit(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let ms = PollTimeout::try_from(left.as_millis().min(60_000) as i32)
                .unwrap_or(PollTimeout::ZERO);
            let mut fds = [PollFd::new(self.0.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, ms) {
                Ok(n) if n > 0 => return true,
                Ok(_) if left.is_zero() => return false,
                Ok(_) | Err(nix::Error::EINTR) => continue,
                Err(_) => return false,
            }
        }
    }
}

/// The dry-run answer for every leaked shim of `snapshot`.
pub fn plan(snapshot: &Snapshot) -> Vec<Action> {
    leaked(snapshot)
        .map(|shim| Action {
            shim_pid: shim.pid,
            shim_id: shim.id.clone().unwrap_or_default(),
            outcome: Outcome::WouldKill,
            detail: "run with --kill to end it".to_string(),
            remains: Vec::new(),
        })
        .collect()
}

fn leaked(snapshot: &Snapshot) -> impl Iterator<Item = &Shim> {
    snapshot
        .shims
        .iter()
        .filter(|s| s.serves(&snapshot.paths.address.path))
        .filter(|s| leaked_shim::judge(snapshot, s).is_some())
}

/// Ends the leaked shims of `before`, re-verifying each on a snapshot taken by
/// `regather` after its pidfd was opened.
pub fn kill(before: &Snapshot, grace: Duration, regather: impl Fn() -> Snapshot) -> Vec<Action> {
    let targets: Vec<&Shim> = leaked(before).collect();
    let mut handles = Vec::new();
    let mut actions = Vec::new();
    for shim in &targets {
        match PidFd::open(shim.pid) {
            Ok(fd) => handles.push((*shim, fd)),
            Err(nix::Error::ESRCH) => {
                actions.push(action(shim, Outcome::AlreadyGone, "exited before we acted"))
            }
            Err(err) => actions.push(action(
                shim,
                Outcome::Refused,
                &format!("pidfd_open: {err}"),
            )),
        }
    }
    if handles.is_empty() {
        return actions;
    }
    let fresh = regather();
    for (shim, pidfd) in handles {
        let verdict = verify(before, &fresh, shim);
        let mut done = match verdict {
            Err(why) => action(shim, Outcome::Refused, &why),
            Ok(()) => end(shim, &pidfd, grace),
        };
        if matches!(done.outcome, Outcome::Terminated | Outcome::Killed) {
            done.remains = remains(&fresh, shim);
        }
        actions.push(done);
    }
    actions
}

/// Why the shim must not be killed, if it must not.
fn verify(before: &Snapshot, fresh: &Snapshot, shim: &Shim) -> Result<(), String> {
    let then = before.processes.get(&shim.pid).ok_or("no process record")?;
    let now: &ProcessInfo = fresh
        .processes
        .get(&shim.pid)
        .ok_or("exited before we acted")?;
    if !same_process(then, now) {
        return Err(format!(
            "pid {} now belongs to another process ({}); not touched",
            shim.pid, now.comm
        ));
    }
    let fresh_shim = fresh
        .shims
        .iter()
        .find(|s| s.pid == shim.pid)
        .ok_or("no longer looks like a shim")?;
    if (&fresh_shim.namespace, &fresh_shim.id, &fresh_shim.address)
        != (&shim.namespace, &shim.id, &shim.address)
    {
        return Err("its command line changed".to_string());
    }
    let evidence = leaked_shim::judge(fresh, fresh_shim)
        .ok_or("no longer leaked: containerd has a record for it, or it serves a live process")?;
    if evidence.basis != Basis::ContainerdApi {
        return Err(
            "containerd did not answer, so its records could not confirm the leak".to_string(),
        );
    }
    // The command line can be anything; the executable must be a shim binary.
    let exe = fs::read_link(format!("/proc/{}/exe", shim.pid))
        .map_err(|e| format!("reading /proc/{}/exe: {e}", shim.pid))?;
    let exe_name = exe.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if !exe_name.starts_with("containerd-shim") {
        return Err(format!("executable is {}, not a shim", exe.display()));
    }
    Ok(())
}

fn same_process(a: &ProcessInfo, b: &ProcessInfo) -> bool {
    a.pid == b.pid && (a.started_at - b.started_at).abs() < SAME_START && b.is_running()
}

fn end(shim: &Shim, pidfd: &PidFd, grace: Duration) -> Action {
    for (signal, wait, outcome) in [
        (Signal::SIGTERM, grace, Outcome::Terminated),
        (Signal::SIGKILL, KILL_WAIT, Outcome::Killed),
    ] {
        match pidfd.signal(signal) {
            Ok(()) => {}
            Err(nix::Error::ESRCH) => {
                return action(shim, Outcome::AlreadyGone, "exited before we acted")
            }
            Err(err) => return action(shim, Outcome::Failed, &format!("{signal}: {err}")),
        }
        if pidfd.wait_exit(wait) {
            return action(shim, outcome, &format!("exited after {signal}"));
        }
    }
    action(
        shim,
        Outcome::Failed,
        "still running after SIGKILL (stuck in the kernel?)",
    )
}

fn action(shim: &Shim, outcome: Outcome, detail: &str) -> Action {
    Action {
        shim_pid: shim.pid,
        shim_id: shim.id.clone().unwrap_or_default(),
        outcome,
        detail: detail.to_string(),
        remains: Vec::new(),
    }
}

/// What the shim leaves: its bundle (its working directory), the socket
/// named in the bundle, and mounts below the bundle.
fn remains(snapshot: &Snapshot, shim: &Shim) -> Vec<String> {
    let mut left = Vec::new();
    let bundle: Option<PathBuf> = shim.cwd.clone().or_else(|| {
        let ns = shim.namespace.as_deref()?;
        Some(
            snapshot
                .paths
                .state
                .path
                .join("io.containerd.runtime.v2.task")
                .join(ns)
                .join(shim.id.as_deref()?),
        )
    });
    if let Some(bundle) = bundle.filter(|b| b.is_dir()) {
        left.push(format!("bundle dir {}", bundle.display()));
        if let Ok(address) = fs::read_to_string(bundle.join("address")) {
            let socket = address.trim().trim_start_matches("unix://").to_string();
            if Path::new(&socket).exists() {
                left.push(format!("socket {socket}"));
            }
        }
        for mount in snapshot
            .mounts
            .iter()
            .filter(|m| m.mount_point.starts_with(&bundle))
        {
            left.push(format!("mount {}", mount.mount_point.display()));
        }
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixtures::*;

    fn leaked_snapshot(shim_pid: i32, started_at: i64) -> Snapshot {
        let mut s = snapshot();
        s.shims.push(shim(shim_pid, &id('s'), ADDRESS, &["futex"]));
        s.processes
            .insert(shim_pid, process(shim_pid, 'S', started_at));
        with_records(&mut s, &[]);
        s
    }

    #[test]
    fn pid_reused_between_detection_and_kill_is_refused() {
        let before = leaked_snapshot(4242, NOW - 600 * SEC);
        // Same pid, same command line, but a process that started later.
        let fresh = leaked_snapshot(4242, NOW - SEC);
        let err = verify(&before, &fresh, &before.shims[0]).unwrap_err();
        assert!(err.contains("another process"), "{err}");
    }

    #[test]
    fn shim_taken_back_by_containerd_is_refused() {
        // This test process stands in for the shim: its executable is not a
        // shim binary, so without the record re-check, verification would
        // still refuse, at the executable check, and the test must tell the
        // two apart.
        let me = std::process::id() as i32;
        let before = leaked_snapshot(me, NOW - 600 * SEC);
        let mut fresh = before.clone();
        fresh
            .containerd
            .as_mut()
            .unwrap()
            .namespaces
            .get_mut("k8s.io")
            .unwrap()
            .containers = Some([id('s')].into_iter().collect());
        let err = verify(&before, &fresh, &before.shims[0]).unwrap_err();
        assert!(err.contains("no longer leaked"), "{err}");
    }

    #[test]
    fn a_process_that_only_looks_like_a_shim_is_refused() {
        // This test process, described as a leaked shim: everything matches
        // but the executable, which is not a shim binary.
        let me = std::process::id() as i32;
        let before = leaked_snapshot(me, NOW - 600 * SEC);
        let err = verify(&before, &before.clone(), &before.shims[0]).unwrap_err();
        assert!(err.contains("not a shim"), "{err}");
    }

    #[test]
    fn dry_run_plans_every_leaked_shim_and_touches_nothing() {
        let s = leaked_snapshot(4242, NOW - 600 * SEC);
        let plan = plan(&s);
        assert_eq!(plan.len(), 1);
        assert_eq!(plan[0].outcome, Outcome::WouldKill);
        assert_eq!(plan[0].shim_id, id('s'));
    }

    #[test]
    fn a_real_process_is_ended_through_its_pidfd() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let pidfd = PidFd::open(pid).unwrap();
        let shim = shim(pid, &id('s'), ADDRESS, &[]);
        let done = end(&shim, &pidfd, Duration::from_secs(2));
        assert_eq!(done.outcome, Outcome::Terminated, "{}", done.detail);
        // Reaped here; the pidfd told us it exited even before that.
        assert!(!child.wait().unwrap().success());
    }
}
