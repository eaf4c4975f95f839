//! systemd as PID 1 of namespaces of the test's own (pid, mount, cgroup,
//! uts, ipc, net), with `/run` on tmpfs, `container=` set and a unit path
//! holding only default.target. The test runs again inside those
//! namespaces (`nsenter`), where systemd is the "host"'s PID 1.
//!
//! Its cgroups are either a fresh cgroup2 ([`Hierarchies::Unified`]: on this
//! hybrid machine one without controllers) or the machine's own layout
//! ([`Hierarchies::LikeTheHost`]: every v1 controller and systemd's named
//! hierarchy, each rooted at a cgroup the test made, systemd adding the
//! unified one as on the host): the layout a kubelet's systemd driver and
//! runc's need on a cgroup v1 node, where a cgroup2 without controllers
//! cannot hold a pod's limits.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// systemd, as Debian's package installs it.
pub const SYSTEMD: &str = "/lib/systemd/systemd";
/// What systemd does at once.
pub const SOON: Duration = Duration::from_secs(10);
/// systemd's boot in a namespace of its own: seconds alone, more than 10
/// on a CI machine running four containerd lines' tests beside it.
const BOOT: Duration = Duration::from_secs(60);

/// The cgroups systemd is given.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Hierarchies {
    Unified,
    LikeTheHost,
}

pub fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `argv` as the transient service `unit` in `slice`, through
/// systemd (which makes the slice, and its parents, as it makes kubelet's).
pub fn systemd_run(slice: &str, unit: &str, argv: &[&str]) {
    let status = Command::new("systemd-run")
        .args(["--quiet", "--collect", "-p", "DefaultDependencies=no"])
        .arg(format!("--slice={slice}"))
        .arg(format!("--unit={unit}"))
        .args(argv)
        .status()
        .expect("systemd-run");
    assert!(status.success(), "systemd-run {unit} in {slice}: {status}");
}

/// One property of `unit`, as systemd says it.
pub fn show(unit: &str, property: &str) -> String {
    let output = Command::new("systemctl")
        .args(["show", "--value", "-p", property, unit])
        .output()
        .expect("systemctl show");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// systemd as PID 1 of namespaces of its own, and what it leaves: killed
/// (its whole pid namespace with it) and its cgroups removed when dropped,
/// even on a panic.
struct Systemd {
    unshare: Child,
    /// systemd's pid, in the test's own pid namespace.
    pid: Option<i32>,
    /// The cgroup its cgroup namespace is rooted at, in each hierarchy.
    cgroups: Vec<PathBuf>,
    _units: tempfile::TempDir,
}

impl Drop for Systemd {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
        // The kernel empties the cgroups as the namespace's processes go.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            for cgroup in &self.cgroups {
                rmdir_tree(cgroup);
            }
            if self.cgroups.iter().all(|c| !c.exists()) || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn rmdir_tree(dir: &Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            rmdir_tree(&entry.path());
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// The cgroup2 hierarchy of this machine: `/sys/fs/cgroup` (unified), or
/// `/sys/fs/cgroup/unified` (hybrid: there it has no controllers).
fn cgroup2() -> Option<PathBuf> {
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .into_iter()
        .map(PathBuf::from)
        .find(|dir| dir.join("cgroup.controllers").is_file())
}

/// The machine's v1 hierarchies (each controller's, systemd's named one),
/// by their directory under /sys/fs/cgroup: the mount options name them.
fn v1_hierarchies() -> Vec<String> {
    let base = Path::new("/sys/fs/cgroup");
    if base.join("cgroup.procs").is_file() {
        return Vec::new();
    }
    let mut names: Vec<String> = std::fs::read_dir(base)
        .into_iter()
        .flatten()
        .flatten()
        // cpu,cpuacct-style symlinks point at a mount already listed.
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| e.file_name() != "unified" && e.path().join("tasks").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The shell lines that make `cgroup` (a name) in each hierarchy of
/// `dirs` and move the shell into it; cpuset's is given its parent's cpus
/// and memory nodes first (a v1 cpuset without them takes no process).
fn join_cgroup(dirs: &[PathBuf], cgroup: &str) -> String {
    dirs.iter()
        .map(|h| {
            let dir = h.join(cgroup);
            let cpuset = match h.starts_with("/sys/fs/cgroup/cpuset") {
                true => format!(
                    "cat '{p}/cpuset.cpus' > '{d}/cpuset.cpus' && cat '{p}/cpuset.mems' > \
                     '{d}/cpuset.mems' && ",
                    p = dir.parent().unwrap().display(),
                    d = dir.display()
                ),
                false => String::new(),
            };
            format!(
                "{{ mkdir -p '{d}' && {cpuset}echo $$ > '{d}/cgroup.procs'; }} || \
                 {{ echo 'could not join {d}' >&2; exit 1; }}",
                d = dir.display()
            )
        })
        .collect::<Vec<_>>()
        .join(" && ")
}

/// Starts systemd as PID 1 of its own namespaces, with `hierarchies`, and
/// runs the test `name` of this binary again inside them, `marker` set in
/// its environment; passes when that run passes.
pub fn run_inside_systemd(test: &str, name: &str, marker: &str, hierarchies: Hierarchies) {
    if !nix::unistd::geteuid().is_root() {
        return super::skip(test, "needs root (systemd as a namespace's init)");
    }
    if !Path::new(SYSTEMD).is_file() {
        return super::skip(test, &format!("no {SYSTEMD}"));
    }
    let Some(unified) = cgroup2() else {
        return super::skip(test, "no cgroup2 hierarchy to root systemd's cgroups in");
    };
    let v1 = v1_hierarchies();
    if hierarchies == Hierarchies::LikeTheHost && v1.is_empty() {
        return super::skip(test, "no cgroup v1 hierarchies to give systemd");
    }
    // Of this process and test: two tests of a binary run side by side.
    let own = format!("nodectl-test-systemd-{}-{name}", std::process::id());
    let mut dirs = vec![unified];
    if hierarchies == Hierarchies::LikeTheHost {
        dirs.extend(v1.iter().map(|h| Path::new("/sys/fs/cgroup").join(h)));
    }
    // Once in a CI run (four lines side by side) both systemds of one line
    // answered `systemctl` with "Transport endpoint is not connected" for
    // their whole 60 s: what each was doing is printed, and one more is
    // started, once.
    let systemd = match boot(&dirs, &own, hierarchies, &v1) {
        Ok(systemd) => systemd,
        Err(first) => {
            eprintln!("{test}: {first}; starting systemd again");
            boot(&dirs, &own, hierarchies, &v1)
                .unwrap_or_else(|second| panic!("{second} (and before it: {first})"))
        }
    };
    let pid = systemd.pid.expect("a booted systemd's pid").to_string();
    // The test runs in a cgroup of its own below systemd's root (cgroup2
    // lets no process sit in a cgroup whose children hold controllers).
    let mut launcher = Command::new("sh");
    launcher
        .args([
            "-c",
            &format!(
                r#"{} && exec nsenter -t "$@""#,
                join_cgroup(&systemd.cgroups, "nodectl-test")
            ),
            "sh",
        ])
        .args([&pid, "-a"]);
    super::run_again_inside(launcher, name, marker, "inside systemd's namespaces");
    drop(systemd);
}

/// systemd started as PID 1 of namespaces of its own, in cgroup `own` of
/// each of `dirs`, and running (or degraded) as `systemctl` says; what it
/// was doing when it was not within [`BOOT`].
fn boot(
    dirs: &[PathBuf],
    own: &str,
    hierarchies: Hierarchies,
    v1: &[String],
) -> Result<Systemd, String> {
    let units = tempfile::tempdir().expect("a unit directory");
    std::fs::write(
        units.path().join("default.target"),
        "[Unit]\nDescription=nodectl test\n",
    )
    .unwrap();
    // The shell joins the cgroups, then unshare makes them the cgroup
    // namespace's root, and systemd (as PID 1, `--fork`) mounts nothing of
    // the machine's: its cgroups and /run are mounted before it.
    let mounts = match hierarchies {
        Hierarchies::Unified => "mount -t cgroup2 cgroup2 /sys/fs/cgroup".to_string(),
        Hierarchies::LikeTheHost => {
            let each: Vec<String> = v1
                .iter()
                .map(|h| {
                    let options = match h.as_str() {
                        "systemd" => "none,name=systemd",
                        controllers => controllers,
                    };
                    format!(
                        "mkdir /sys/fs/cgroup/{h} && mount -t cgroup -o {options} cgroup \
                         /sys/fs/cgroup/{h}"
                    )
                })
                .collect();
            format!(
                "mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup && {}",
                each.join(" && ")
            )
        }
    };
    let inside = format!(r#"{mounts} && mount -t tmpfs tmpfs /run && exec "$0""#);
    let unshare = Command::new("sh")
        .args([
            "-c",
            &format!(
                r#"{} && exec unshare --cgroup --pid --fork --mount --mount-proc --uts --ipc --net --kill-child sh -c "$1" "$2""#,
                join_cgroup(dirs, own)
            ),
            "sh",
        ])
        .arg(inside)
        .arg(SYSTEMD)
        .env("container", "nodectl-test")
        .env("SYSTEMD_UNIT_PATH", units.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("unshare");
    let mut systemd = Systemd {
        pid: None,
        unshare,
        cgroups: dirs.iter().map(|h| h.join(own)).collect(),
        _units: units,
    };
    let unshare_pid = systemd.unshare.id();
    let children = format!("/proc/{unshare_pid}/task/{unshare_pid}/children");
    // Until unshare runs, the shell's own children (mkdir, cat) are listed
    // there: systemd is the child that has become systemd.
    wait_until("systemd started", BOOT, || {
        systemd.pid = std::fs::read_to_string(&children)
            .ok()
            .and_then(|c| c.split_whitespace().next().and_then(|p| p.parse().ok()))
            .filter(|pid: &i32| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.trim() == "systemd")
            });
        systemd.pid.is_some()
    });
    let pid = systemd.pid.unwrap().to_string();
    let state = || {
        let output = Command::new("nsenter")
            .args(["-t", &pid, "-a", "systemctl", "is-system-running"])
            .output()
            .expect("nsenter");
        let said = String::from_utf8_lossy(&output.stdout);
        format!(
            "{} {}",
            said.trim(),
            String::from_utf8_lossy(&output.stderr).trim()
        )
        .trim()
        .to_string()
    };
    let mut last = String::new();
    let deadline = Instant::now() + BOOT;
    while !matches!(last.as_str(), "running" | "degraded") {
        if Instant::now() >= deadline {
            return Err(format!(
                "systemd (pid {pid}) not running within {BOOT:?}: {last:?}; {}",
                doing(&pid)
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
        last = state();
    }
    Ok(systemd)
}

/// What process `pid` is doing, as the kernel says: its state, where it
/// sleeps and its kernel stack.
fn doing(pid: &str) -> String {
    let read = |file: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/{file}")).unwrap_or_else(|e| format!("({e})"))
    };
    let state = read("status")
        .lines()
        .find(|l| l.starts_with("State:"))
        .unwrap_or("State: ?")
        .to_string();
    format!(
        "{state}, wchan {}, stack:\n{}",
        read("wchan"),
        read("stack")
    )
}
