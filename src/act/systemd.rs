//! Stopping a systemd driver's pod slice through systemd, as kubelet does.
//!
//! kubelet's `cgroupCommon.Destroy` (systemd driver) goes through
//! libcontainer's systemd manager, whose `Destroy` calls
//! `StopUnitContext(unit, "replace")` over D-Bus and waits for the job;
//! systemd then removes the slice's cgroup itself. nodectl does the same,
//! on systemd's private socket (`/run/systemd/private`, what `systemctl`
//! uses as root: systemd speaks D-Bus peer to peer there, EXTERNAL auth,
//! and no bus daemon is needed; see [`crate::act::dbus`]), and never
//! removes the directory itself.
//!
//! Trust by kernel identity: the connection is opened by nodectl, and
//! before any call the kernel's credentials of that very connection's peer
//! (`SO_PEERCRED`) must be PID 1 of nodectl's pid namespace, as root, and
//! that PID 1 the host's as [`daemon_proof`] judges a daemon (its
//! namespaces, uids and root-owned executable). Whatever listens at the
//! path otherwise, nothing is asked of it.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::act::dbus::{Connection, Reply};
use crate::model::CleanupOutcome;
use crate::sources::daemon_proof::{self, Peer};
use crate::sources::pod_cgroups;

/// Where systemd (PID 1) serves its manager to root, peer to peer.
pub const PRIVATE_SOCKET: &str = "/run/systemd/private";

/// How often the stop is looked at while systemd carries it out.
const POLL: Duration = Duration::from_millis(50);

/// The slice unit whose cgroup directory is `cgroup`, if its name is a
/// kubelet systemd driver pod slice's and it sits where systemd puts that
/// unit (below its parent slice: `ExpandSlice`): `[<root>-]kubepods[-<qos>]-pod<uid>.slice`,
/// each dash-separated part plain letters, digits and `_` (kubelet's
/// `ToSystemd` escapes every `-` of a uid or a root's part to `_`). Pure.
pub fn unit_of(cgroup: &Path) -> Result<String, String> {
    let shown = cgroup.display();
    let name = cgroup
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{shown} has no name a unit could have"))?;
    let not_a_pod_slice = || format!("{name} is not the name of a kubelet pod slice");
    let stem = name.strip_suffix(".slice").ok_or_else(not_a_pod_slice)?;
    let parts: Vec<&str> = stem.split('-').collect();
    let plain = |part: &&str| {
        !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    };
    if !parts.iter().all(plain) {
        return Err(not_a_pod_slice());
    }
    let kubepods = parts
        .iter()
        .position(|part| *part == "kubepods")
        .ok_or_else(not_a_pod_slice)?;
    let pod = match &parts[kubepods + 1..] {
        [pod] => pod,
        [qos, pod] if matches!(*qos, "burstable" | "besteffort") => pod,
        _ => return Err(not_a_pod_slice()),
    };
    if pod.strip_prefix("pod").is_none_or(str::is_empty) {
        return Err(not_a_pod_slice());
    }
    // Where systemd puts the unit (runc's `ExpandSlice`, as the source
    // names kubelet's slices): below its parent slice.
    let parts: Vec<String> = parts.iter().map(|part| part.to_string()).collect();
    let expanded = pod_cgroups::systemd_path(&parts);
    let parent = expanded
        .parent()
        .and_then(|p| p.file_name())
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let in_parent = cgroup
        .parent()
        .and_then(|p| p.file_name())
        .is_some_and(|p| p == parent.as_str());
    if !in_parent {
        return Err(format!(
            "{shown} is not below its parent slice {parent}, where systemd puts {name}"
        ));
    }
    Ok(name.to_string())
}

/// Why the peer of a connection to systemd's socket is not the host's
/// systemd, if it is not: it must be PID 1 of nodectl's pid namespace
/// (`SO_PEERCRED` gives 0 for a process outside it), as root. Pure.
pub fn peer_refusal(peer: Peer) -> Option<String> {
    match peer {
        Peer { pid: 1, uid: 0 } => None,
        Peer { pid: 0, uid } => Some(format!(
            "its listener (uid {uid}) runs outside nodectl's pid namespace, so it is not PID 1"
        )),
        Peer { pid, uid } => Some(format!(
            "it is served by pid {pid} (uid {uid}), not by PID 1 as root"
        )),
    }
}

/// How a systemd driver's slice is stopped: through systemd's manager,
/// proven before each use (see [`Manager`]).
pub trait Systemd {
    /// Whether systemd can be reached and proven now; if not, why.
    fn proven(&mut self) -> Result<(), String>;
    /// Whether systemd says `unit` is loaded, active and has the cgroup
    /// `relative` (below its hierarchy) as its own; if not, why. Read only.
    fn owns(&mut self, unit: &str, relative: &Path) -> Result<(), String>;
    /// Stops `unit`, whose cgroup directory is `cgroup` (`relative` below
    /// its hierarchy), through systemd (proven again on the connection it
    /// asks over), waiting until systemd removed the directory.
    fn stop(&mut self, unit: &str, cgroup: &Path, relative: &Path) -> (CleanupOutcome, String);
}

/// systemd's manager as PID 1 serves it: each call on a connection proven
/// first (see the module's doc), within `timeout`.
pub struct Manager {
    pub proc_root: PathBuf,
    pub socket: PathBuf,
    pub timeout: Duration,
}

impl Manager {
    /// The host's: `/proc` and systemd's private socket.
    pub fn host(timeout: Duration) -> Manager {
        Manager {
            proc_root: PathBuf::from("/proc"),
            socket: PathBuf::from(PRIVATE_SOCKET),
            timeout,
        }
    }

    /// A connection to systemd's socket whose peer is proven the host's
    /// systemd, or why not.
    fn connect(&self) -> Result<UnixStream, String> {
        let host = daemon_proof::host(&self.proc_root)
            .filter(|host| host.described == "PID 1")
            .ok_or_else(|| "PID 1 cannot be read, so systemd cannot be proven".to_string())?;
        let ours = std::fs::metadata(self.proc_root.join("self/ns/pid"))
            .map(|m| m.ino())
            .map_err(|e| format!("nodectl's own pid namespace could not be read: {e}"))?;
        if ours != host.namespaces.pid {
            return Err(format!(
                "nodectl runs in another pid namespace (pid:[{ours}]) than PID 1 \
                 (pid:[{}])",
                host.namespaces.pid
            ));
        }
        let facts = daemon_proof::facts(&self.proc_root, 1);
        if let Some(why) = daemon_proof::disqualified(&facts, Some(&host)) {
            return Err(format!("PID 1 is not believed: {why}"));
        }
        let socket = self.socket.display();
        let (stream, peer) =
            daemon_proof::connect_checked(&self.socket).map_err(|e| format!("{socket}: {e}"))?;
        if let Some(why) = peer_refusal(peer) {
            return Err(format!("{socket}: {why}"));
        }
        Ok(stream)
    }
}

impl Systemd for Manager {
    fn proven(&mut self) -> Result<(), String> {
        self.connect().map(drop)
    }

    fn owns(&mut self, unit: &str, relative: &Path) -> Result<(), String> {
        let stream = self.connect()?;
        let mut connection = Connection::authenticate(stream, Instant::now() + self.timeout)?;
        owned(&mut connection, unit, relative).map_err(|(_, why)| why)
    }

    fn stop(&mut self, unit: &str, cgroup: &Path, relative: &Path) -> (CleanupOutcome, String) {
        let stream = match self.connect() {
            Ok(stream) => stream,
            Err(why) => {
                return (
                    CleanupOutcome::Refused,
                    format!("systemd could not be proven, nothing was asked of it: {why}"),
                )
            }
        };
        let deadline = Instant::now() + self.timeout;
        match stop_and_wait(stream, unit, cgroup, relative, deadline) {
            Ok(detail) => (CleanupOutcome::Removed, detail),
            Err((outcome, why)) if Instant::now() >= deadline => (
                outcome,
                format!(
                    "systemd did not finish stopping {unit} within {} (--timeout): {why}",
                    humantime::format_duration(self.timeout)
                ),
            ),
            Err(refused_or_failed) => refused_or_failed,
        }
    }
}

const DESTINATION: &str = "org.freedesktop.systemd1";
const MANAGER_PATH: &str = "/org/freedesktop/systemd1";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";
const PROPERTIES: &str = "org.freedesktop.DBus.Properties";

/// On the proven connection `stream`: systemd's word that it owns `unit`'s
/// cgroup ([`owned`]), then one last look that nothing runs
/// in it, `StopUnit(unit, "replace")`, and a wait until systemd removed the
/// directory, or said the unit is inactive or failed with the directory
/// still there (a failure: something keeps it).
fn stop_and_wait(
    stream: UnixStream,
    unit: &str,
    cgroup: &Path,
    relative: &Path,
    deadline: Instant,
) -> Result<String, (CleanupOutcome, String)> {
    let failed = |why: String| (CleanupOutcome::Failed, why);
    let refused = |why: String| (CleanupOutcome::Refused, why);
    let mut connection = Connection::authenticate(stream, deadline).map_err(failed)?;
    owned(&mut connection, unit, relative)?;
    // Stopping a slice stops every unit in it: a process that arrived
    // since the verdict would be ended, where an rmdir would only fail.
    // One last look, as late as can be, narrows that window to the call.
    let mut gaps = Vec::new();
    let procs = pod_cgroups::procs_below(cgroup, &mut gaps);
    let populated = pod_cgroups::populated(cgroup, &mut gaps) == Some(true);
    let busy = match gaps.first() {
        Some(gap) => Some(format!("{}: {}", gap.path.display(), gap.error)),
        None if procs > 0 || populated => Some(format!(
            "a process runs in it again ({procs} counted, cgroup.events populated: {populated})"
        )),
        None => None,
    };
    if let Some(why) = busy {
        return Err(refused(format!(
            "{why}: not stopped, since stopping a slice stops what runs in it"
        )));
    }
    let job = connection
        .call(
            DESTINATION,
            MANAGER_PATH,
            MANAGER,
            "StopUnit",
            &[unit, "replace"],
        )
        .and_then(|reply| reply.string())
        .map_err(|e| failed(format!("StopUnit {unit}: {e}")))?;
    let shown = cgroup.display();
    loop {
        match std::fs::symlink_metadata(cgroup) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(format!(
                    "stopped through systemd (StopUnit {unit}, job {job}), which removed its \
                     cgroup"
                ))
            }
            Err(e) => return Err(failed(format!("{shown}: {e}"))),
            Ok(_) => {}
        }
        let state = match unit_path(&mut connection, unit).map_err(failed)? {
            Some(path) => {
                property(&mut connection, &path, "Unit", "ActiveState").map_err(failed)?
            }
            None => "unloaded".to_string(),
        };
        if matches!(state.as_str(), "inactive" | "failed" | "unloaded") {
            // systemd prunes the cgroup as the unit goes inactive; one
            // still there is kept by something (a process moved in).
            if std::fs::symlink_metadata(cgroup).is_ok() {
                return Err(failed(format!(
                    "systemd stopped {unit} ({state}) but its cgroup {shown} is still there"
                )));
            }
            continue;
        }
        if Instant::now() + POLL >= deadline {
            return Err(failed(format!("{unit} is still {state}")));
        }
        std::thread::sleep(POLL);
    }
}

/// systemd's word that `unit` is loaded, active, and has the cgroup
/// `relative` (below the hierarchy) as its own (`ControlGroup`), else
/// refused: a directory named like a unit systemd does not own is not its
/// to stop. Read only.
fn owned(
    connection: &mut Connection,
    unit: &str,
    relative: &Path,
) -> Result<(), (CleanupOutcome, String)> {
    let failed = |why: String| (CleanupOutcome::Failed, why);
    let refused = |why: String| (CleanupOutcome::Refused, why);
    let Some(object) = unit_path(connection, unit).map_err(failed)? else {
        return Err(refused(format!(
            "systemd has no unit {unit} loaded: the directory is not a unit's"
        )));
    };
    let state = property(connection, &object, "Unit", "ActiveState").map_err(failed)?;
    let owned = property(connection, &object, "Slice", "ControlGroup").map_err(failed)?;
    let expected = Path::new("/").join(relative);
    if state != "active" || Path::new(&owned) != expected {
        return Err(refused(format!(
            "systemd's {unit} is {state} with ControlGroup {owned:?}, not {}: the directory is \
             not its",
            expected.display()
        )));
    }
    Ok(())
}

/// The object path of `unit` (`GetUnit`); `None` when systemd has no such
/// unit loaded.
fn unit_path(connection: &mut Connection, unit: &str) -> Result<Option<String>, String> {
    match connection.call(DESTINATION, MANAGER_PATH, MANAGER, "GetUnit", &[unit])? {
        Reply::Error { name, .. } if name == "org.freedesktop.systemd1.NoSuchUnit" => Ok(None),
        reply => reply
            .string()
            .map(Some)
            .map_err(|e| format!("GetUnit {unit}: {e}")),
    }
}

/// A string property of the unit at `path`, of systemd's interface
/// `org.freedesktop.systemd1.<interface>`.
fn property(
    connection: &mut Connection,
    path: &str,
    interface: &str,
    name: &str,
) -> Result<String, String> {
    let interface = format!("org.freedesktop.systemd1.{interface}");
    connection
        .call(DESTINATION, path, PROPERTIES, "Get", &[&interface, name])?
        .string()
        .map_err(|e| format!("{name} of {path}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLICE: &str = "kubepods-besteffort-pod5d5d5d5d_0000_4000_8000_00000000000a.slice";

    #[test]
    fn a_pod_slice_below_its_parent_is_its_unit() {
        let path = format!("/sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/{SLICE}");
        assert_eq!(unit_of(Path::new(&path)).as_deref(), Ok(SLICE));
        let guaranteed = "/sys/fs/cgroup/kubepods.slice/kubepods-pod1234.slice";
        assert_eq!(
            unit_of(Path::new(guaranteed)).as_deref(),
            Ok("kubepods-pod1234.slice")
        );
        let rooted = "/sys/fs/cgroup/a.slice/a-b_c.slice/a-b_c-kubepods.slice/\
                      a-b_c-kubepods-burstable.slice/a-b_c-kubepods-burstable-podff.slice";
        assert_eq!(
            unit_of(Path::new(rooted)).as_deref(),
            Ok("a-b_c-kubepods-burstable-podff.slice")
        );
    }

    #[test]
    fn anything_else_is_no_unit_to_stop() {
        for path in [
            // Not a pod's: its qos slice, kubepods itself, a service.
            "/sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice",
            "/sys/fs/cgroup/kubepods.slice",
            "/sys/fs/cgroup/system.slice/containerd.service",
            // Unit syntax nodectl never sends: escapes, templates, dots.
            "/sys/fs/cgroup/kubepods.slice/kubepods-pod\\x2d1.slice",
            "/sys/fs/cgroup/kubepods.slice/kubepods-pod@1.slice",
            "/sys/fs/cgroup/kubepods.slice/kubepods-pod.1.slice",
            "/sys/fs/cgroup/kubepods.slice/kubepods--pod1.slice",
            "/sys/fs/cgroup/kubepods.slice/kubepods-guaranteed-pod1.slice",
            "/sys/fs/cgroup/kubepods.slice/kubepods-pod.slice",
            // The right name in the wrong place.
            "/sys/fs/cgroup/other.slice/kubepods-pod1.slice",
            "/sys/fs/cgroup/kubepods/besteffort/kubepods-besteffort-pod1.slice",
        ] {
            assert!(unit_of(Path::new(path)).is_err(), "{path}");
        }
    }

    #[test]
    fn only_pid_1_as_root_is_systemd() {
        assert_eq!(peer_refusal(Peer { pid: 1, uid: 0 }), None);
        for (peer, says) in [
            (Peer { pid: 1, uid: 1000 }, "not by PID 1 as root"),
            (Peer { pid: 4242, uid: 0 }, "pid 4242"),
            (Peer { pid: 0, uid: 0 }, "outside nodectl's pid namespace"),
        ] {
            let why = peer_refusal(peer).expect("refused");
            assert!(why.contains(says), "{why}");
        }
    }

    #[test]
    fn no_socket_is_a_refusal_that_says_why_and_asks_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut manager = Manager {
            proc_root: PathBuf::from("/proc"),
            socket: dir.path().join("private"),
            timeout: Duration::from_secs(1),
        };
        let why = manager.proven().expect_err("nothing to prove");
        assert!(!why.is_empty());
        let (outcome, detail) = manager.stop(SLICE, &dir.path().join(SLICE), Path::new(SLICE));
        assert_eq!(outcome, CleanupOutcome::Refused, "{detail}");
    }
}
