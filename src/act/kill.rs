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
use std::path::Path;
use std::time::{Duration, Instant};

use crate::act::walk::{walk, Act};
use crate::act::Verdict;
use crate::checks::leaked_shim;
use crate::model::shim::{bundle_dir, identity, Identity};
use crate::model::{Action, Basis, Outcome, ProcessInfo, Shim, Snapshot};
use nix::libc;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::Signal;

use crate::model::sample::SAME_START_NANOS as SAME_START;
const KILL_WAIT: Duration = Duration::from_secs(5);

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

/// The dry run: every leaked shim of `before`, re-verified exactly as
/// [`kill`] does (pidfd, fresh snapshot, same checks), minus the signal; so
/// `would-kill` means `--kill` would signal it now.
pub fn plan(before: &Snapshot, regather: impl Fn() -> Snapshot) -> Vec<Action> {
    act(before, None, regather)
}

/// Ends the leaked shims of `before`, re-verifying each on a snapshot taken by
/// `regather` after its pidfd was opened.
pub fn kill(before: &Snapshot, grace: Duration, regather: impl Fn() -> Snapshot) -> Vec<Action> {
    act(before, Some(grace), regather)
}

/// Signals (with `Some(grace)`) or only plans (`None`).
fn act(before: &Snapshot, grace: Option<Duration>, regather: impl Fn() -> Snapshot) -> Vec<Action> {
    let targets: Vec<&Shim> = leaked_shim::leaked(before);
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
    let mut kill = Kill {
        before,
        grace: grace.unwrap_or_default(),
    };
    actions.extend(walk(before, handles, grace.is_some(), &mut kill, regather));
    actions
}

/// The signal, to shims pinned by their pidfds before the fresh gather.
struct Kill<'a> {
    before: &'a Snapshot,
    grace: Duration,
}

impl<'a> Act for Kill<'a> {
    type Target = (&'a Shim, PidFd);
    type Outcome = Outcome;
    type Row = Action;

    fn verdict(&self, fresh: &Snapshot, (shim, _): &Self::Target) -> Verdict {
        match verify(self.before, fresh, shim) {
            Ok(()) => Verdict::Go,
            Err(why) => Verdict::Refuse(why),
        }
    }

    fn would(&self, _: &Self::Target) -> (Outcome, String) {
        (Outcome::WouldKill, "run with --kill to end it".to_string())
    }

    fn act(&mut self, (_, pidfd): &Self::Target) -> (Outcome, String) {
        end(pidfd, self.grace)
    }

    fn record(
        &self,
        (shim, _): Self::Target,
        outcome: Outcome,
        detail: String,
        fresh: &Snapshot,
    ) -> Action {
        let ended = matches!(outcome, Outcome::Terminated | Outcome::Killed);
        let mut done = action(shim, outcome, &detail);
        if ended {
            done.remains = remains(fresh, shim);
        }
        done
    }
}

/// Why the shim must not be killed, if it must not. Pure: every fact about
/// the process (start time, executable, uids, namespaces, socket) is in
/// `fresh`, read after the pidfd was opened.
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
    // Only a shim proven on this fresh look is touched: an archive's or a
    // hand-made snapshot's unproven shim never is.
    match identity(fresh_shim) {
        Identity::Ours => {}
        Identity::Unproven => return Err("not proven to be a shim".to_string()),
        other => {
            return Err(format!(
                "not a shim of this containerd ({}): {}",
                other.label(),
                other.reason().unwrap_or_default()
            ))
        }
    }
    let evidence = leaked_shim::judge(fresh, fresh_shim)
        .ok_or("no longer leaked: containerd has a record for it, or it serves a live process")?;
    if evidence.basis != Basis::ContainerdApi {
        return Err(
            "containerd did not answer, so its records could not confirm the leak".to_string(),
        );
    }
    Ok(())
}

fn same_process(a: &ProcessInfo, b: &ProcessInfo) -> bool {
    a.pid == b.pid && (a.started_at - b.started_at).abs() < SAME_START && b.is_running()
}

fn end(pidfd: &PidFd, grace: Duration) -> (Outcome, String) {
    for (signal, wait, outcome) in [
        (Signal::SIGTERM, grace, Outcome::Terminated),
        (Signal::SIGKILL, KILL_WAIT, Outcome::Killed),
    ] {
        match pidfd.signal(signal) {
            Ok(()) => {}
            Err(nix::Error::ESRCH) => {
                return (Outcome::AlreadyGone, "exited before we acted".to_string())
            }
            Err(err) => return (Outcome::Failed, format!("{signal}: {err}")),
        }
        if pidfd.wait_exit(wait) {
            return (outcome, format!("exited after {signal}"));
        }
    }
    let stuck = "still running after SIGKILL (stuck in the kernel?)";
    (Outcome::Failed, stuck.to_string())
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

/// What the shim leaves: its bundle (below containerd's state directory,
/// from its namespace and id; never its working directory), the socket
/// named in the bundle, and mounts below the bundle. Only metadata and
/// regular files are read: a tenant may have put a FIFO anywhere, and an
/// open of a FIFO waits for a writer forever.
fn remains(snapshot: &Snapshot, shim: &Shim) -> Vec<String> {
    let mut left = Vec::new();
    let Some(bundle) = bundle_dir(&snapshot.paths.state.path, shim) else {
        return left;
    };
    if !fs::symlink_metadata(&bundle).is_ok_and(|m| m.is_dir()) {
        return left;
    }
    left.push(format!("bundle dir {}", bundle.display()));
    if let Some(address) = read_regular(&bundle.join("address")) {
        let socket = address.trim().trim_start_matches("unix://").to_string();
        if fs::symlink_metadata(&socket).is_ok() {
            left.push(format!("socket {socket}"));
        }
    }
    for mount in snapshot
        .mounts
        .iter()
        .filter(|m| m.path_as_given().starts_with(&bundle))
    {
        left.push(format!("mount {}", mount.mount_point.display()));
    }
    left
}

/// A small regular file's text; `None` for anything else. Opened
/// O_NONBLOCK|O_NOFOLLOW so that a FIFO (or a device, or a symlink to one)
/// put in its place returns at once, then checked on the open file.
fn read_regular(path: &Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(4096).read_to_string(&mut text).ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::proven;
    use crate::model::fixtures::*;

    fn leaked_snapshot(shim_pid: i32, started_at: i64) -> Snapshot {
        let mut s = snapshot();
        s.shims
            .push(proven(shim(shim_pid, &id('s'), ADDRESS, &["futex"])));
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
        let before = leaked_snapshot(4242, NOW - 600 * SEC);
        assert_eq!(verify(&before, &before, &before.shims[0]), Ok(()));
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
        let before = leaked_snapshot(4242, NOW - 600 * SEC);
        let mut fresh = before.clone();
        fresh.shims[0].proof.as_mut().unwrap().exe = Some("/usr/bin/bash".into());
        let err = verify(&before, &fresh, &before.shims[0]).unwrap_err();
        assert!(
            err.contains("impostor") && err.contains("/usr/bin/bash"),
            "{err}"
        );
        // Nor is a shim known only from an archive, without a proof.
        fresh.shims[0].proof = None;
        let err = verify(&before, &fresh, &before.shims[0]).unwrap_err();
        assert!(err.contains("not proven"), "{err}");
    }

    #[test]
    fn a_shim_that_changed_or_went_on_the_fresh_look_is_refused() {
        let before = leaked_snapshot(4242, NOW - 600 * SEC);
        let refusal = |change: &dyn Fn(&mut Snapshot)| {
            let mut fresh = before.clone();
            change(&mut fresh);
            verify(&before, &fresh, &before.shims[0]).unwrap_err()
        };
        let err = refusal(&|s| {
            s.processes.remove(&4242);
        });
        assert_eq!(err, "exited before we acted");
        let err = refusal(&|s| s.shims.clear());
        assert_eq!(err, "no longer looks like a shim");
        let err = refusal(&|s| s.shims[0].id = Some(id('t')));
        assert_eq!(err, "its command line changed");
        let err = refusal(&|s| s.shims[0].address = Some("/run/other.sock".into()));
        assert_eq!(err, "its command line changed");
        let err = refusal(&|s| {
            s.processes.get_mut(&4242).unwrap().state = 'Z';
        });
        assert!(err.contains("another process"), "a defunct shim: {err}");
        // Nor is anything known only from the first look.
        let mut unknown = before.clone();
        unknown.processes.clear();
        let err = verify(&unknown, &before, &before.shims[0]).unwrap_err();
        assert_eq!(err, "no process record");
    }

    /// A child `sleep` standing in for a shim: signalling it is harmless.
    fn stand_in() -> (std::process::Child, Snapshot) {
        let child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        (child, of_proven_daemon(leaked_snapshot(0, NOW - 600 * SEC)))
    }

    fn standing_in(mut s: Snapshot, pid: i32) -> Snapshot {
        let process = s.processes.remove(&0).unwrap();
        s.processes.insert(pid, ProcessInfo { pid, ..process });
        s.shims[0].pid = pid;
        s
    }

    #[test]
    fn dry_run_and_kill_give_the_same_verdict() {
        let (mut child, s) = stand_in();
        let pid = child.id() as i32;
        let s = standing_in(s, pid);
        let dry = plan(&s, || s.clone());
        assert_eq!(dry.len(), 1);
        assert_eq!(dry[0].outcome, Outcome::WouldKill, "{}", dry[0].detail);
        assert_eq!(dry[0].shim_id, id('s'));

        // containerd's API did not answer on the fresh look: the dry run
        // refuses, as --kill does, and nothing is signalled.
        let mut unsure = s.clone();
        unsure.containerd = None;
        let dry = plan(&s, || unsure.clone());
        let real = kill(&s, Duration::from_millis(100), || unsure.clone());
        assert_eq!(dry[0].outcome, Outcome::Refused);
        assert_eq!(
            (&real[0].outcome, &real[0].detail),
            (&dry[0].outcome, &dry[0].detail)
        );
        assert!(
            dry[0].detail.contains("did not answer"),
            "{}",
            dry[0].detail
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the stand-in still runs"
        );

        let real = kill(&s, Duration::from_secs(2), || s.clone());
        assert_eq!(real[0].outcome, Outcome::Terminated, "{}", real[0].detail);
        assert!(!child.wait().unwrap().success());
    }

    #[test]
    fn what_remains_is_read_without_opening_a_fifo() {
        let state = tempfile::tempdir().unwrap();
        let mut s = leaked_snapshot(4242, NOW - 600 * SEC);
        s.paths.state.path = state.path().to_path_buf();
        let bundle = state
            .path()
            .join("io.containerd.runtime.v2.task/k8s.io")
            .join(id('s'));
        fs::create_dir_all(&bundle).unwrap();
        nix::unistd::mkfifo(&bundle.join("address"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        // The working directory a process chose is not its bundle.
        s.shims[0].cwd = Some("/etc".into());
        let started = Instant::now();
        let left = remains(&s, &s.shims[0]);
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(left, [format!("bundle dir {}", bundle.display())]);

        // A real address file names a socket that is still there.
        fs::remove_file(bundle.join("address")).unwrap();
        let socket = state.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        fs::write(
            bundle.join("address"),
            format!("unix://{}", socket.display()),
        )
        .unwrap();
        let left = remains(&s, &s.shims[0]);
        assert_eq!(left[1], format!("socket {}", socket.display()));
    }

    #[test]
    fn a_real_process_is_ended_through_its_pidfd() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let pidfd = PidFd::open(pid).unwrap();
        let (outcome, detail) = end(&pidfd, Duration::from_secs(2));
        assert_eq!(outcome, Outcome::Terminated, "{detail}");
        // Reaped here; the pidfd told us it exited even before that.
        assert!(!child.wait().unwrap().success());
    }
}
