//! Leaving nothing behind, whatever state the test left containerd in:
//! stopped (SIGSTOP), hung in a shim, or already gone. Every step is bounded.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::cri::teardown_pods;
use super::procs;
use super::strace;
use super::testbed::{TestBed, NAMESPACE};

/// Budget for the polite part: CRI stop/remove of every pod.
const POD_TEARDOWN: Duration = Duration::from_secs(20);
/// How long killed processes may take to die.
const KILL_WAIT: Duration = Duration::from_secs(10);

impl TestBed {
    /// Tears the test bed down; returns what it could not clean up.
    pub(crate) fn teardown(&mut self) -> Vec<String> {
        let mut problems = Vec::new();

        // 1. Let traced shims go: a tracee of a dead tracer resumes anyway,
        //    but strace itself is our process to end.
        for slot in self
            .straces
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            strace::detach(&slot);
        }

        // Every shim now, before CRI's teardown makes some exit (and lose
        // their argv, by which they are found). The shims' sockets live in
        // /run/containerd/s whatever the config says (containerd 1.6
        // hard-codes that dir); each bundle records its shim's: read them
        // while the bundles exist.
        let _ = self.shims();
        let mut sockets = self.shim_sockets();

        // 2. The polite way first: CRI stops and removes the pods, so the
        //    shims unmount their rootfs, delete runc state and exit. A test
        //    may have frozen containerd; thaw it (it is our unreaped child,
        //    so its pid is still its own).
        let containerd = Pid::from_raw(self.containerd.id() as i32);
        if matches!(self.containerd.try_wait(), Ok(None)) {
            let _ = kill(containerd, Signal::SIGCONT);
            let sandboxes: Vec<String> = self
                .sandboxes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned()
                .collect();
            // A test's CNI faults end here: the pods' networks are torn
            // down, their addresses released.
            if let Some(cni) = &self.cni {
                if let Err(e) = cni.clear_faults() {
                    problems.push(e);
                }
            }
            // Failures are expected when a test broke a pod on purpose; the
            // kill below covers them.
            let _ = teardown_pods(self.address.clone(), sandboxes, POD_TEARDOWN);
        }

        sockets.extend(self.shim_sockets());
        sockets.extend(
            self.extra_sockets
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .drain(..),
        );
        sockets.sort();
        sockets.dedup();

        // 3. containerd, so it neither restarts nor cleans up behind us.
        let _ = self.containerd.kill();
        let deadline = Instant::now() + KILL_WAIT;
        while !matches!(self.containerd.try_wait(), Ok(Some(_)) | Err(_)) {
            if Instant::now() > deadline {
                problems.push(format!("containerd ({containerd}) did not die"));
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }

        // 4. Shims and every process of the pods: what names our socket,
        //    what descends from that (found before anything is killed: a
        //    container's process is reparented once its shim dies), and
        //    what sits in our cgroup (covers processes orphaned earlier,
        //    e.g. by a test that killed a shim).
        let mut doomed: BTreeMap<i32, u64> = self
            .seen_shims
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let shims: Vec<i32> = procs::with_flag("-address", &self.address.display().to_string())
            .into_iter()
            .map(|(pid, _)| pid)
            .collect();
        let mut pids = procs::descendants(&shims);
        pids.extend(&shims);
        pids.extend(cgroup_procs(&self.cgroup_parent));
        for pid in pids {
            if let Some(stat) = procs::stat(pid) {
                // Found now: if the pid was seen earlier as another process,
                // that one is gone and this one is the one to end.
                doomed.insert(pid, stat.starttime);
            }
        }
        for (pid, starttime) in &doomed {
            // Only the very process we listed: pids get reused.
            if procs::stat(*pid).is_some_and(|s| s.starttime == *starttime) {
                let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
            }
        }
        // Wait until each is gone or reaped: ours (the test process is a
        // child subreaper) are reaped here; a zombie whose parent is dying
        // too is waited for, as it is about to be reparented to us.
        let ours = std::process::id() as i32;
        let deadline = Instant::now() + KILL_WAIT;
        loop {
            let unsettled: Vec<i32> = doomed
                .iter()
                .filter(|(pid, starttime)| {
                    procs::reap_if_ours(**pid, **starttime);
                    match procs::stat(**pid) {
                        Some(s) if s.starttime == **starttime => {
                            let dead = s.state == 'Z' || s.state == 'X';
                            !dead || s.ppid == ours || doomed.contains_key(&s.ppid)
                        }
                        _ => false,
                    }
                })
                .map(|(pid, _)| *pid)
                .collect();
            if unsettled.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                let alive: Vec<i32> = unsettled
                    .into_iter()
                    .filter(|pid| procs::is_running_since(*pid, doomed[pid]))
                    .collect();
                if !alive.is_empty() {
                    problems.push(format!("still alive after SIGKILL: {alive:?}"));
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }

        for socket in sockets {
            if let Err(e) = fs::remove_file(&socket) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    problems.push(format!("{}: {e}", socket.display()));
                }
            }
        }

        // 5. Mounts (rootfs overlays, sandbox shm, the neighbourhood's
        //    padding, anything a test mounted), then cgroups, then the files.
        problems.extend(self.neighbourhood.end());
        let left = unmount_below(&self.dir);
        if !left.is_empty() {
            problems.push(format!("still mounted: {left:?}"));
        }
        problems.extend(remove_cgroups(&self.cgroup_parent));
        // libcni's cache entries outside the temp dir, of every sandbox
        // this bed tried (host-local's files, in the temp dir, say which
        // still had an address).
        if let Some(cni) = &mut self.cni {
            let mut ids = self
                .sandboxes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            ids.extend(cni.ip_files().into_iter().map(|f| f.container_id));
            problems.extend(cni.teardown(&ids));
        }
        if let Some(keep) = std::env::var_os("NODECTL_TESTBED_LOGS") {
            problems.extend(self.keep_logs(Path::new(&keep)));
        }
        if let Err(e) = fs::remove_dir_all(&self.dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                problems.push(format!("removing {}: {e}", self.dir.display()));
            }
        }
        problems
    }

    /// Copies containerd's and strace's logs to `<keep>/<test>/` before the
    /// temp dir goes (opt-in: NODECTL_TESTBED_LOGS=<dir>).
    fn keep_logs(&self, keep: &Path) -> Vec<String> {
        let to = keep.join(&self.test);
        if let Err(e) = fs::create_dir_all(&to) {
            return vec![format!("{}: {e}", to.display())];
        }
        fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name == "containerd.log" || name.starts_with("strace-")
            })
            .filter_map(|e| {
                let target = to.join(e.file_name());
                fs::copy(e.path(), &target)
                    .err()
                    .map(|err| format!("{}: {err}", target.display()))
            })
            .collect()
    }

    /// The unix sockets of this containerd's shims, from what each shim
    /// writes into its bundle (see [`shim_address`]).
    fn shim_sockets(&self) -> Vec<PathBuf> {
        let bundles = self.bundles();
        let mut sockets: Vec<PathBuf> = fs::read_dir(bundles)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|bundle| shim_address(&bundle.path()))
            .filter_map(|address| Some(PathBuf::from(address.strip_prefix("unix://")?)))
            .filter(|path| !path.starts_with(&self.dir))
            .filter(|path| fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()))
            .collect();
        sockets.sort();
        sockets.dedup();
        sockets
    }
}

/// The shim's socket address as its bundle records it: 1.x writes it alone
/// to `address`, 2.x writes `bootstrap.json` (`{"version":2,"address":…,
/// "protocol":"ttrpc"}`) instead.
pub fn shim_address(bundle: &Path) -> Option<String> {
    if let Ok(address) = fs::read_to_string(bundle.join("address")) {
        return Some(address.trim().to_string());
    }
    let bootstrap = fs::read(bundle.join("bootstrap.json")).ok()?;
    let bootstrap: serde_json::Value = serde_json::from_slice(&bootstrap).ok()?;
    Some(bootstrap["address"].as_str()?.to_string())
}

/// The dirs of cgroup `parent` in every mounted hierarchy: each v1
/// controller mount under /sys/fs/cgroup, or the v2 root itself.
pub(crate) fn cgroup_dirs(parent: &str) -> Vec<PathBuf> {
    let relative = parent.trim_start_matches('/');
    cgroup_hierarchies()
        .into_iter()
        .map(|h| h.join(relative))
        .filter(|dir| dir.is_dir())
        .collect()
}

/// Every mounted cgroup hierarchy: each v1 controller mount under
/// /sys/fs/cgroup, or the v2 root itself.
pub(crate) fn cgroup_hierarchies() -> Vec<PathBuf> {
    let base = Path::new("/sys/fs/cgroup");
    if base.join("cgroup.procs").is_file() {
        vec![base.to_path_buf()]
    } else {
        fs::read_dir(base)
            .into_iter()
            .flatten()
            .flatten()
            // cpu,cpuacct-style symlinks point at a mount already listed.
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .filter(|h| h.join("cgroup.procs").is_file())
            .collect()
    }
}

/// Every dir of a cgroup tree, children before parents.
fn cgroup_tree(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            cgroup_tree(&entry.path(), out);
        }
    }
    out.push(dir.to_path_buf());
}

/// Every process in cgroup `parent` or below, in any hierarchy.
fn cgroup_procs(parent: &str) -> Vec<i32> {
    let mut dirs = Vec::new();
    for dir in cgroup_dirs(parent) {
        cgroup_tree(&dir, &mut dirs);
    }
    let mut pids: Vec<i32> = dirs
        .iter()
        .filter_map(|d| fs::read_to_string(d.join("cgroup.procs")).ok())
        .flat_map(|text| {
            text.lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Removes cgroup `parent` and its children; a cgroup is only removable
/// (rmdir) once its last task is fully gone, so busy ones are retried.
fn remove_cgroups(parent: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut dirs = Vec::new();
        for dir in cgroup_dirs(parent) {
            cgroup_tree(&dir, &mut dirs);
        }
        let failed: Vec<String> = dirs
            .iter()
            .filter_map(|d| {
                fs::remove_dir(d)
                    .err()
                    .map(|e| format!("cgroup {}: {e}", d.display()))
            })
            .collect();
        if failed.is_empty() || Instant::now() > deadline {
            return failed;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Mount points as /proc/self/mountinfo writes them: space, tab, newline
/// and backslash escaped as three octal digits.
fn unescape(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    PathBuf::from(OsString::from_vec(out))
}

/// Every mount point at or below `dir`.
pub fn mounts_below(dir: &Path) -> Vec<PathBuf> {
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(unescape)
        .filter(|p| p.starts_with(dir))
        .collect()
}

/// Lazily detaches every mount below `dir`, deepest first, a few rounds
/// (stacked mounts reveal the one below); returns what is still mounted.
pub(crate) fn unmount_below(dir: &Path) -> Vec<PathBuf> {
    for _ in 0..5 {
        let mut points = mounts_below(dir);
        if points.is_empty() {
            break;
        }
        points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        for point in points {
            let _ = nix::mount::umount2(&point, nix::mount::MntFlags::MNT_DETACH);
        }
    }
    mounts_below(dir)
}
