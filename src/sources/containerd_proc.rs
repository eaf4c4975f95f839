//! The running containerd: which process it is, the paths its command line
//! names, and its version when the API cannot say.
//!
//! A node's files say how containerd *would* start; the running process says
//! how it *did* (k3s, rke2 and microk8s pass `-c`, `-a`, `--root`, `--state`
//! and never read /etc/containerd/config.toml).

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::fs::{self, File};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use crate::model::{ContainerdProcess, ContainerdVersion, Gap, ProcessInfo, VersionSource};
use crate::sources::procfs::Unread;
use crate::sources::{numbered, open_dir, read_proc, read_proc_record_at, read_proc_string};

/// `comm` and the executable's name of the daemon; shims are
/// `containerd-shim*` and never match.
const NAME: &str = "containerd";
/// `<exe> --version` is a Go binary printing one line; past this it is stuck.
const VERSION_TIMEOUT: Duration = Duration::from_secs(2);
/// `comm` is 16 bytes, `stat` under 1 KiB: more is a fake `--proc-root`'s.
const SMALL_LIMIT: u64 = 64 * 1024;
/// containerd's command line is a few flags; a longer one is not read.
const CMDLINE_LIMIT: u64 = 1024 * 1024;
/// Its answer is one line; anything longer is not it.
const VERSION_OUTPUT_LIMIT: u64 = 4096;

/// The daemon's global flags that take a value (containerd's
/// cmd/containerd/command/main.go); anything else that is not a flag is a
/// subcommand (`publish`, `config`, `oci-hook`), i.e. not the daemon.
const VALUE_FLAGS: &[&str] = &[
    "config",
    "c",
    "address",
    "a",
    "root",
    "state",
    "log-level",
    "l",
];

/// Every containerd daemon below `proc_root`, by pid. A process called
/// containerd whose executable or working directory cannot be read while it
/// runs (a profile denying ptrace reads) is a procfs gap: it may be the
/// daemon, and its paths unknown.
pub fn find(proc_root: &Path, gaps: &mut Vec<Gap>) -> Vec<ContainerdProcess> {
    let Ok(entries) = fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let pids: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .collect();
    // Every process's comm: on two threads when there are many.
    let mut found = Vec::new();
    for (processes, unread) in super::on_two_threads(&pids, 1000, |pids| {
        let mut processes = Vec::new();
        let mut unread = Vec::new();
        // Every `comm` is opened relative to the open proc root, not by a
        // path walked again from `/` for each process; a descriptor of its
        // own for each piece, so for each thread (see `open_dir`).
        let Ok(root_dir) = open_dir(&nix::fcntl::AT_FDCWD, proc_root) else {
            return (processes, unread);
        };
        let mut buffer = Vec::new();
        let mut path = [0; 48];
        for &pid in pids {
            let mut noted = Unread::default();
            if comm_is(
                &root_dir,
                numbered(&mut path, pid, "comm"),
                NAME,
                &mut buffer,
            ) {
                processes.extend(read(proc_root, pid, &mut noted));
            }
            unread.extend(noted.into_gap());
        }
        (processes, unread)
    }) {
        found.extend(processes);
        gaps.extend(unread);
    }
    found.sort_by_key(|p| p.pid);
    found
}

/// The containerd daemons among `processes` (a procfs walk's, whose `comm`
/// came from each one's `stat`), read as [`find`] reads them, by pid.
pub fn read_daemons(
    proc_root: &Path,
    processes: &BTreeMap<i32, ProcessInfo>,
    gaps: &mut Vec<Gap>,
) -> Vec<ContainerdProcess> {
    let mut found = Vec::new();
    for process in processes.values().filter(|p| p.comm == NAME) {
        let mut noted = Unread::default();
        found.extend(read(proc_root, process.pid, &mut noted));
        gaps.extend(noted.into_gap());
    }
    found
}

/// `<proc_root>/<pid>`, whose `comm` says containerd, as a containerd
/// daemon, if it is one. argv alone can lie (any process can call itself
/// containerd), so the executable's name must say containerd too.
fn read(proc_root: &Path, pid: i32, unread: &mut Unread) -> Option<ContainerdProcess> {
    let dir = proc_root.join(pid.to_string());
    let exe_link = dir.join("exe");
    let exe = fs::read_link(&exe_link)
        .map_err(|err| unread.note(&exe_link, &err))
        .ok()?;
    if exe_name(&exe) != Some(NAME) {
        return None;
    }
    // A defunct daemon has no exe link; a stopping one may still be in Z.
    let stat = read_proc_string(&dir.join("stat"), SMALL_LIMIT).ok()?;
    let state = stat.rsplit_once(')')?.1.split_whitespace().next()?;
    if matches!(state, "Z" | "X" | "x") {
        return None;
    }
    let raw = read_proc(&dir.join("cmdline"), CMDLINE_LIMIT).ok()?;
    let argv: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|arg| !arg.is_empty())
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect();
    let mut process = parse_args(&argv)?;
    process.pid = pid;
    process.exe = exe;
    // containerd opens a relative --config and makes --root/--state absolute
    // against its working directory; so do we.
    let cwd_link = dir.join("cwd");
    let cwd = fs::read_link(&cwd_link).map_err(|err| unread.note(&cwd_link, &err));
    if let Ok(cwd) = cwd {
        for path in [
            &mut process.config,
            &mut process.address,
            &mut process.root,
            &mut process.state,
        ]
        .into_iter()
        .flatten()
        {
            if path.is_relative() {
                *path = cwd.join(&*path);
            }
        }
    }
    Some(process)
}

/// Whether the `comm` file at `path` (relative to the open directory `dir`)
/// holds `name`: one `openat`, one `read` into `buffer` and the `close` (a
/// general file read adds a `statx` and a second `read`, here for every
/// process on the node; see [`read_proc_record_at`]).
fn comm_is(dir: &File, path: &CStr, name: &str, buffer: &mut Vec<u8>) -> bool {
    let Ok(n) = read_proc_record_at(dir, path, buffer) else {
        return false;
    };
    let comm = &buffer[..n];
    comm.strip_suffix(b"\n").unwrap_or(comm) == name.as_bytes()
}

/// The file name of an `exe` link; an upgraded binary still running shows
/// as `/usr/bin/containerd (deleted)`.
fn exe_name(exe: &Path) -> Option<&str> {
    let name = exe.file_name()?.to_str()?;
    Some(name.strip_suffix(" (deleted)").unwrap_or(name))
}

/// The paths a containerd command line sets, in either form Go's flag
/// parsing takes (`-c x`, `--config x`, `--config=x`); `None` when the
/// command line runs a subcommand rather than the daemon (shims run
/// `containerd --address … publish …` for every event).
pub fn parse_args(argv: &[String]) -> Option<ContainerdProcess> {
    let mut process = ContainerdProcess::default();
    let mut args = argv.iter().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--" {
            // Go's flag parsing stops here; anything after is positional.
            return args.next().is_none().then_some(process);
        }
        // A word that is not a flag is a subcommand.
        let flag = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
        if flag.is_empty() {
            return None;
        }
        let (name, inline) = match flag.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (flag, None),
        };
        if !VALUE_FLAGS.contains(&name) {
            // A boolean (--version, --help) or a platform flag we do not use.
            continue;
        }
        let value = match inline {
            Some(value) => value,
            None => args.next()?.clone(),
        };
        let value = PathBuf::from(value);
        match name {
            "config" | "c" => process.config = Some(value),
            "address" | "a" => process.address = Some(value),
            "root" => process.root = Some(value),
            "state" => process.state = Some(value),
            _ => {}
        }
    }
    Some(process)
}

/// The containerd version: the API's answer if it gave one, else what the
/// running daemon's binary says (`binary`, asked only then), else unknown.
pub fn identify(api: Option<&str>, binary: impl FnOnce() -> Option<String>) -> ContainerdVersion {
    let known = |version: String, source| ContainerdVersion {
        version: Some(version),
        source,
    };
    if let Some(version) = api.filter(|v| !v.trim().is_empty()) {
        return known(version.trim().to_string(), VersionSource::Api);
    }
    match binary() {
        Some(version) => known(version, VersionSource::Process),
        None => ContainerdVersion::default(),
    }
}

/// [`version`] on a thread of its own, started beside the API calls so that
/// waiting for it fits their deadline: when containerd is frozen, its
/// binary's answer is the only one, and `check` must still answer within
/// `--timeout` + 1 s.
pub fn version_in_background(proc_root: &Path, pid: i32) -> mpsc::Receiver<Option<String>> {
    let (sender, receiver) = mpsc::channel();
    let proc_root = proc_root.to_path_buf();
    std::thread::spawn(move || {
        let _ = sender.send(version(&proc_root, pid));
    });
    receiver
}

/// The version the running containerd's own binary reports, by running
/// `<proc_root>/<pid>/exe --version`: that link reaches the binary the
/// daemon runs even when it was replaced on disk since. Only a regular file
/// owned by root or by us, writable by no one else, is run: nodectl runs as
/// root and must not run what another user could have put there.
/// Bounded by [`VERSION_TIMEOUT`], killed after; asked once per process.
pub fn version(proc_root: &Path, pid: i32) -> Option<String> {
    static ASKED: Mutex<Option<(PathBuf, i32, Option<String>)>> = Mutex::new(None);
    let mut asked = ASKED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((root, asked_pid, answer)) = asked.as_ref() {
        if root == proc_root && *asked_pid == pid {
            return answer.clone();
        }
    }
    let exe = proc_root.join(pid.to_string()).join("exe");
    let answer = trusted(&exe)
        .then(|| run_version(&exe, VERSION_TIMEOUT))
        .flatten()
        .and_then(|out| parse_version(&out));
    *asked = Some((proc_root.to_path_buf(), pid, answer.clone()));
    answer
}

fn trusted(exe: &Path) -> bool {
    let Ok(meta) = fs::metadata(exe) else {
        return false;
    };
    let me = nix::unistd::geteuid().as_raw();
    meta.is_file() && (meta.uid() == 0 || meta.uid() == me) && meta.mode() & 0o022 == 0
}

/// Runs `exe --version` with nothing inherited (no stdin, no environment)
/// and returns what it printed, or `None` if it failed or outlived `limit`.
pub(crate) fn run_version(exe: &Path, limit: Duration) -> Option<String> {
    let mut child = Command::new(exe)
        .arg("--version")
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + limit;
    // try_wait keeps the child unreaped until it is seen to exit, so the
    // kill below can never hit a reused pid.
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => break None,
        }
    };
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        return None;
    };
    let stdout = child.stdout.take()?;
    if !status.success() {
        return None;
    }
    // The child has exited; a grandchild could still hold the pipe open, so
    // read only what is already there.
    set_nonblocking(&stdout);
    let mut out = Vec::new();
    let _ = File::from(std::os::fd::OwnedFd::from(stdout))
        .take(VERSION_OUTPUT_LIMIT)
        .read_to_end(&mut out);
    Some(String::from_utf8_lossy(&out).into_owned())
}

fn set_nonblocking(fd: &impl std::os::fd::AsFd) {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    if let Ok(flags) = fcntl(fd, FcntlArg::F_GETFL) {
        let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
        let _ = fcntl(fd, FcntlArg::F_SETFL(flags));
    }
}

/// The version in `containerd --version`'s line: `containerd <package>
/// <version> <revision>`, e.g. `containerd github.com/containerd/containerd
/// v1.7.34 <commit>` (upstream), `containerd containerd.io 1.7.27 <commit>`
/// (Docker's packages), `containerd github.com/containerd/containerd
/// 1.6.20~ds1 1.6.20~ds1-1` (Debian).
pub fn parse_version(output: &str) -> Option<String> {
    let line = output.lines().find(|l| !l.trim().is_empty())?;
    let mut words = line.split_whitespace();
    if words.next()? != NAME {
        return None;
    }
    let _package = words.next()?;
    let version = words.next()?;
    // A version starts with a digit, after an optional `v`.
    version
        .trim_start_matches('v')
        .starts_with(|c: char| c.is_ascii_digit())
        .then(|| version.to_string())
}

/// A fake `/proc/<pid>` of a process, for tests: comm, stat (whole, as
/// procfs's parser takes it), cmdline and an `exe` link.
#[cfg(test)]
pub(crate) fn fake_process(proc_root: &Path, pid: i32, comm: &str, exe: &str, argv: &str) {
    let dir = proc_root.join(pid.to_string());
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("comm"), format!("{comm}\n")).unwrap();
    fs::write(
        dir.join("stat"),
        format!(
            "{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 12 0 100 0 0 \
             18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
        ),
    )
    .unwrap();
    let mut cmdline = argv.split_whitespace().collect::<Vec<_>>().join("\0");
    cmdline.push('\0');
    fs::write(dir.join("cmdline"), cmdline).unwrap();
    std::os::unix::fs::symlink(exe, dir.join("exe")).unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn argv(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn both_flag_forms_and_both_dash_counts_are_read() {
        let k3s = parse_args(&argv(
            "containerd -c /var/lib/rancher/k3s/agent/etc/containerd/config.toml \
             -a /run/k3s/containerd/containerd.sock --state /run/k3s/containerd \
             --root /var/lib/rancher/k3s/agent/containerd",
        ))
        .unwrap();
        assert_eq!(
            k3s.config,
            Some(PathBuf::from(
                "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"
            ))
        );
        assert_eq!(
            k3s.address,
            Some(PathBuf::from("/run/k3s/containerd/containerd.sock"))
        );
        assert_eq!(k3s.state, Some(PathBuf::from("/run/k3s/containerd")));
        assert_eq!(
            k3s.root,
            Some(PathBuf::from("/var/lib/rancher/k3s/agent/containerd"))
        );

        let equals = parse_args(&argv(
            "/usr/bin/containerd --config=/c.toml -address=/a.sock --root=/r -l debug --state /s",
        ))
        .unwrap();
        assert_eq!(equals.config, Some(PathBuf::from("/c.toml")));
        assert_eq!(equals.address, Some(PathBuf::from("/a.sock")));
        assert_eq!(equals.root, Some(PathBuf::from("/r")));
        assert_eq!(equals.state, Some(PathBuf::from("/s")));

        let plain = parse_args(&argv("/usr/bin/containerd")).unwrap();
        assert_eq!(plain, ContainerdProcess::default());
    }

    #[test]
    fn subcommands_are_not_the_daemon() {
        // What a shim runs to publish an event, and what a person runs.
        assert_eq!(
            parse_args(&argv(
                "containerd --address /run/containerd/containerd.sock publish --topic /tasks/exit"
            )),
            None
        );
        assert_eq!(parse_args(&argv("containerd config dump")), None);
        // A value flag missing its value is not a daemon that started.
        assert_eq!(parse_args(&argv("containerd --root")), None);
        // A boolean flag does not swallow the next word.
        assert_eq!(parse_args(&argv("containerd --version publish")), None);
    }

    #[test]
    fn only_the_daemon_is_found_judged_by_comm_and_executable() {
        let proc_root = tempfile::tempdir().unwrap();
        let root = proc_root.path();
        fake_process(
            root,
            10,
            "containerd",
            "/usr/bin/containerd",
            "containerd --root /r",
        );
        // Upgraded on disk while running: still containerd.
        fake_process(
            root,
            11,
            "containerd",
            "/usr/bin/containerd (deleted)",
            "containerd",
        );
        fake_process(
            root,
            20,
            "containerd-shim",
            "/usr/bin/containerd-shim-runc-v2",
            "containerd-shim-runc-v2 -namespace k8s.io -id x -address /run/containerd/containerd.sock",
        );
        // Calls itself containerd in argv and comm, but runs something else.
        fake_process(
            root,
            30,
            "containerd",
            "/usr/bin/python3",
            "containerd --root /x",
        );
        // The real binary, renamed in comm: not what we look for either.
        fake_process(root, 31, "dockerd", "/usr/bin/containerd", "containerd");
        fake_process(
            root,
            40,
            "containerd",
            "/usr/bin/containerd",
            "containerd --address /run/containerd/containerd.sock publish --topic /tasks/exit",
        );
        let found = find(root, &mut Vec::new());
        let pids: Vec<i32> = found.iter().map(|p| p.pid).collect();
        assert_eq!(pids, vec![10, 11]);
        assert_eq!(found[0].root, Some(PathBuf::from("/r")));
        assert_eq!(found[0].exe, PathBuf::from("/usr/bin/containerd"));
    }

    #[test]
    fn a_containerd_whose_exe_or_cwd_cannot_be_read_is_a_procfs_gap() {
        let proc_root = tempfile::tempdir().unwrap();
        let root = proc_root.path();
        // Its exe not a link (readlink: EINVAL), as a denied read is one
        // (EACCES): not identified, and a gap says why.
        fake_process(root, 20, "containerd", "/usr/bin/containerd", "containerd");
        fs::remove_file(root.join("20/exe")).unwrap();
        fs::write(root.join("20/exe"), "").unwrap();
        // Identified, but its cwd unreadable: relative paths stay unknown.
        fake_process(
            root,
            21,
            "containerd",
            "/usr/bin/containerd",
            "containerd -c c.toml",
        );
        fs::write(root.join("21/cwd"), "").unwrap();
        // Gone (no exe, no cwd at all): churn, no gap.
        fake_process(root, 22, "containerd", "/usr/bin/containerd", "containerd");
        fs::remove_file(root.join("22/exe")).unwrap();
        let mut gaps = Vec::new();
        let found = find(root, &mut gaps);
        assert_eq!(found.iter().map(|p| p.pid).collect::<Vec<_>>(), [21]);
        let mut named: Vec<(&Path, &str)> = gaps
            .iter()
            .map(|g| (g.path.as_path(), g.error.as_str()))
            .collect();
        named.sort();
        assert_eq!(
            named,
            [
                (root.join("20/exe").as_path(), "invalid argument (EINVAL)"),
                (root.join("21/cwd").as_path(), "invalid argument (EINVAL)"),
            ]
        );
        assert!(gaps
            .iter()
            .all(|g| g.source == crate::model::Source::Procfs));
    }

    #[test]
    fn relative_paths_are_taken_from_the_daemons_working_directory() {
        let proc_root = tempfile::tempdir().unwrap();
        let root = proc_root.path();
        fake_process(
            root,
            7,
            "containerd",
            "/opt/bin/containerd",
            "containerd -c etc/c.toml --state /s",
        );
        symlink("/srv/k", root.join("7/cwd")).unwrap();
        let found = find(root, &mut Vec::new());
        assert_eq!(found[0].config, Some(PathBuf::from("/srv/k/etc/c.toml")));
        assert_eq!(found[0].state, Some(PathBuf::from("/s")));
    }

    #[test]
    fn version_lines_of_every_known_build_are_read() {
        for (line, version) in [
            (
                "containerd github.com/containerd/containerd v1.7.34 05044ec0a9a75232cad458027ca83437aae3f4da\n",
                "v1.7.34",
            ),
            (
                "containerd github.com/containerd/containerd/v2 v2.3.4 1a2b3c\n",
                "v2.3.4",
            ),
            ("containerd containerd.io 1.7.27 05044ec0a9a7\n", "1.7.27"),
            (
                "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+b1\n",
                "1.6.20~ds1",
            ),
        ] {
            assert_eq!(parse_version(line).as_deref(), Some(version), "{line}");
        }
        for junk in [
            "",
            "Usage: containerd",
            "containerd github.com/x",
            "runc version 1.1.12",
        ] {
            assert_eq!(parse_version(junk), None, "{junk}");
        }
    }

    fn script(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("fake-containerd");
        fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn the_version_run_is_bounded_and_killed() {
        let dir = tempfile::tempdir().unwrap();
        let exe = script(dir.path(), "echo \"containerd containerd.io 1.7.27 abc\"");
        let out = run_version(&exe, Duration::from_secs(2)).unwrap();
        assert_eq!(parse_version(&out).as_deref(), Some("1.7.27"));

        let hang = script(dir.path(), "exec /bin/sleep 30");
        let started = Instant::now();
        assert_eq!(run_version(&hang, Duration::from_millis(200)), None);
        assert!(started.elapsed() < Duration::from_secs(5));

        let fails = script(dir.path(), "echo containerd x 1.0.0; exit 1");
        assert_eq!(run_version(&fails, Duration::from_secs(2)), None);
    }

    #[test]
    fn a_binary_others_can_write_is_not_run() {
        let proc_root = tempfile::tempdir().unwrap();
        let bin = tempfile::tempdir().unwrap();
        let exe = script(bin.path(), "echo \"containerd containerd.io 9.9.9 abc\"");
        fake_process(
            proc_root.path(),
            5,
            "containerd",
            exe.to_str().unwrap(),
            "containerd",
        );
        assert_eq!(version(proc_root.path(), 5).as_deref(), Some("9.9.9"));

        let proc_root = tempfile::tempdir().unwrap();
        fs::set_permissions(&exe, fs::Permissions::from_mode(0o777)).unwrap();
        fake_process(
            proc_root.path(),
            5,
            "containerd",
            exe.to_str().unwrap(),
            "containerd",
        );
        assert_eq!(version(proc_root.path(), 5), None);
    }

    #[test]
    fn the_apis_answer_comes_first_then_the_binarys_then_unknown() {
        let proc_root = tempfile::tempdir().unwrap();
        let bin = tempfile::tempdir().unwrap();
        let exe = script(bin.path(), "echo \"containerd containerd.io 1.7.27 abc\"");
        fake_process(
            proc_root.path(),
            9,
            "containerd",
            exe.to_str().unwrap(),
            "containerd",
        );
        let process = ContainerdProcess {
            pid: 9,
            ..ContainerdProcess::default()
        };
        let at = |api, process: Option<&ContainerdProcess>| {
            identify(api, || version(proc_root.path(), process?.pid))
        };
        let version = |v: &str, source| ContainerdVersion {
            version: Some(v.to_string()),
            source,
        };
        assert_eq!(
            at(Some("v2.0.3"), Some(&process)),
            version("v2.0.3", VersionSource::Api)
        );
        assert_eq!(
            at(Some(""), Some(&process)),
            version("1.7.27", VersionSource::Process)
        );
        assert_eq!(
            at(None, Some(&process)),
            version("1.7.27", VersionSource::Process)
        );
        assert_eq!(at(None, None), ContainerdVersion::default());
        assert_eq!(ContainerdVersion::default().source, VersionSource::Unknown);
    }
}
