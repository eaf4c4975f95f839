//! The processes that call themselves containerd, and the paths each one's
//! command line names (which of them is the daemon: `crate::paths`, on the
//! kernel's facts of `daemon_proof`).
//!
//! A node's files say how containerd *would* start; the running process says
//! how it *did* (k3s, rke2 and microk8s pass `-c`, `-a`, `--root`, `--state`
//! and never read /etc/containerd/config.toml).

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use crate::model::{ContainerdProcess, Gap, ProcessInfo};
use crate::read::bounded::{numbered, open_dir, read_proc, read_proc_record_at, read_proc_string};
use crate::sources::proc_stat::FailedReads;

/// `comm` and the executable's name of the daemon; shims are
/// `containerd-shim*` and never match.
const NAME: &str = "containerd";
/// `comm` is 16 bytes, `stat` under 1 KiB: more is a fake `--proc-root`'s.
const SMALL_LIMIT: u64 = 64 * 1024;
/// containerd's command line is a few flags; a longer one is not read.
const CMDLINE_LIMIT: u64 = 1024 * 1024;

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
    for (processes, unread) in crate::read::deadline::on_two_threads(&pids, 1000, |pids| {
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
            let mut noted = FailedReads::default();
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
        let mut noted = FailedReads::default();
        found.extend(read(proc_root, process.pid, &mut noted));
        gaps.extend(noted.into_gap());
    }
    found
}

/// `<proc_root>/<pid>`, whose `comm` says containerd, as a containerd
/// daemon, if it is one. argv alone can lie (any process can call itself
/// containerd), so the executable's name must say containerd too.
fn read(proc_root: &Path, pid: i32, unread: &mut FailedReads) -> Option<ContainerdProcess> {
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
    use std::os::unix::fs::symlink;

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
}
