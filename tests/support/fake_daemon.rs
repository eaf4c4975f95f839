//! A containerd nodectl can prove, for the tests on a hand-made node.
//!
//! nodectl talks to a containerd only when the kernel proves it the daemon
//! (docs/security.md): the listener of the socket (`SO_PEERCRED`), in the
//! host's mount and pid namespaces, running a root-owned binary called
//! containerd. Here the kernel's facts are real: the test process itself
//! listens on the node's socket (or already does, serving a fake API), and
//! its namespaces are the host's as nodectl sees them. Only what a procfs
//! says of names is made by hand, in a fake `--proc-root`: the test
//! process's `comm` and an `exe` link named containerd that reaches a
//! root-owned binary (`/bin/true`, never run: nodectl runs nothing it
//! finds); its `status` (its uids) is the test process's own.

use std::fs;
use std::os::unix::fs::symlink;
use std::os::unix::net::UnixListener;
use std::path::Path;

/// The flags of a containerd serving `socket` with that root and state.
pub fn daemon_args<'a>(socket: &'a Path, root: &'a Path, state: &'a Path) -> Vec<&'a str> {
    let text = |p: &'a Path| p.to_str().expect("a test's paths are UTF-8");
    vec![
        "--address",
        text(socket),
        "--root",
        text(root),
        "--state",
        text(state),
    ]
}

/// Keeps the socket's listener for as long as the test needs the daemon.
/// The fake procfs's boot time (`btime`), unless the test wrote its own.
const BOOT: u64 = 1_700_000_000;

pub struct FakeDaemon {
    _listener: Option<UnixListener>,
    pub pid: u32,
}

/// Makes the test process the containerd serving `socket`, started with
/// `args` (its flags), in the fake procfs at `proc_root` (which need not
/// exist yet).
pub fn fake_daemon(proc_root: &Path, socket: &Path, args: &[&str]) -> FakeDaemon {
    let pid = std::process::id();
    let listener = (!socket.exists()).then(|| {
        UnixListener::bind(socket)
            .unwrap_or_else(|e| panic!("listening on {}: {e}", socket.display()))
    });
    let dir = proc_root.join(pid.to_string());
    fs::create_dir_all(dir.join("ns")).unwrap();
    fs::create_dir_all(proc_root.join("self/ns")).unwrap();
    for ns in ["user", "pid", "mnt"] {
        let real = format!("/proc/self/ns/{ns}");
        // nodectl's own namespaces, resolved when nodectl reads them.
        let _ = symlink(&real, dir.join("ns").join(ns));
        let _ = symlink(&real, proc_root.join("self/ns").join(ns));
    }
    if !proc_root.join("stat").exists() {
        fs::write(proc_root.join("stat"), format!("btime {BOOT}\n")).unwrap();
    }
    fs::write(dir.join("comm"), "containerd\n").unwrap();
    // Started a second from now, after every file the test wrote before
    // (its config among them: nodectl ties a state nothing is held open
    // under by a config unchanged since the daemon started).
    let ticks_per_second = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as u64;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let started = (now + 1 - BOOT) * ticks_per_second;
    fs::write(
        dir.join("stat"),
        format!(
            "{pid} (containerd) S 1 {pid} {pid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 2 0 {started} 0 0 \
             18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
        ),
    )
    .unwrap();
    let mut cmdline = String::from("containerd\0");
    for arg in args {
        cmdline.push_str(arg);
        cmdline.push('\0');
    }
    fs::write(dir.join("cmdline"), cmdline).unwrap();
    let bin = proc_root.join("daemon-bin");
    fs::create_dir_all(&bin).unwrap();
    let _ = symlink("/bin/true", bin.join("containerd"));
    let _ = symlink(bin.join("containerd"), dir.join("exe"));
    let _ = symlink("/", dir.join("root"));
    let _ = symlink("/", dir.join("cwd"));
    // Its uids are the kernel's too: the test process's own.
    let _ = symlink(format!("/proc/{pid}/status"), dir.join("status"));
    FakeDaemon {
        _listener: listener,
        pid,
    }
}
