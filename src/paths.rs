//! Which containerd to look at: root, state and socket, each with where the
//! value came from, so the report can say which paths it used and why.
//!
//! Precedence, per path: nodectl's flag; else the running containerd's
//! command line (`--root`, `--state`, `-a`), then the config file it was
//! started with (`-c`, else /etc/containerd/config.toml); else, when no
//! running containerd is used, /etc/containerd/config.toml if it exists;
//! else containerd's default. The running process beats the default config
//! file because it is what containerd actually did: k3s, rke2 and microk8s
//! start containerd with their own `-c` and never read that file.
//!
//! Which running containerd: the only one, when one runs and neither
//! `--address` nor `--config` is given; otherwise the one serving the socket
//! those flags (or /etc/containerd/config.toml, or the default) name. When
//! several run and none serves it, none is used and the paths say so.

pub mod config;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use crate::model::{
    ContainerdProcess, DaemonLookup, Gap, Located, Origin, Paths, ProcessInfo, Source,
};
use crate::sources::containerd_proc;

pub const DEFAULT_CONFIG: &str = "/etc/containerd/config.toml";
pub const DEFAULT_ROOT: &str = "/var/lib/containerd";
pub const DEFAULT_STATE: &str = "/run/containerd";
pub const DEFAULT_ADDRESS: &str = "/run/containerd/containerd.sock";

/// The options a user can give on the command line.
#[derive(Debug, Clone, Default)]
pub struct PathFlags {
    pub config: Option<PathBuf>,
    pub root: Option<PathBuf>,
    pub state: Option<PathBuf>,
    pub address: Option<PathBuf>,
    /// The procfs to look for the running containerd in; `None`: do not.
    pub proc_root: Option<PathBuf>,
}

/// Resolves each path (see the module's doc for the order). A config file
/// named by `--config` or by the running containerd that cannot be read is a
/// gap; the default config missing is normal (containerd then uses its
/// defaults).
pub fn resolve(flags: &PathFlags) -> (Paths, Vec<Gap>) {
    resolve_with(flags, Path::new(DEFAULT_CONFIG))
}

/// [`resolve`] with another default config file (tests cannot write /etc).
fn resolve_with(flags: &PathFlags, default_config: &Path) -> (Paths, Vec<Gap>) {
    let mut gaps = Vec::new();
    let running = flags
        .proc_root
        .as_deref()
        .map(|proc_root| containerd_proc::find(proc_root, &mut gaps))
        .unwrap_or_default();
    let (process, note) = choose(running, flags, default_config);
    let (config_path, named) = match (
        &flags.config,
        process.as_ref().and_then(|p| p.config.clone()),
    ) {
        (Some(path), _) => (path.clone(), true),
        (None, Some(path)) => (path, true),
        (None, None) => (default_config.to_path_buf(), false),
    };
    // The config the running containerd reads is read as it sees it.
    let seen_by = process.as_ref().filter(|_| flags.config.is_none());
    let file = match read_config(&config_path, seen_by, flags.proc_root.as_deref()) {
        Ok(file) => Some(file),
        Err(err) if err.kind() == io::ErrorKind::NotFound && !named => None,
        Err(err) => {
            gaps.push(Gap::item(Source::Config, &config_path, err));
            None
        }
    };
    let from_file = |f: fn(&config::ConfigPaths) -> Option<PathBuf>| file.as_ref().and_then(f);
    let from_process = |f: fn(&ContainerdProcess) -> Option<PathBuf>| process.as_ref().and_then(f);
    let paths = Paths {
        config: file.as_ref().map(|_| config_path.clone()),
        root: pick(
            &flags.root,
            from_process(|p| p.root.clone()),
            from_file(|c| c.root.clone()),
            DEFAULT_ROOT,
        ),
        state: pick(
            &flags.state,
            from_process(|p| p.state.clone()),
            from_file(|c| c.state.clone()),
            DEFAULT_STATE,
        ),
        address: pick(
            &flags.address,
            from_process(|p| p.address.clone()),
            from_file(|c| c.address.clone()),
            DEFAULT_ADDRESS,
        ),
        process,
        note,
        snapshotter: file.as_ref().and_then(|c| c.snapshotter.clone()),
        daemon_lookup: None,
    };
    (paths, gaps)
}

/// [`resolve`] for a command whose every look at the node is `gather` (or
/// its `follow_up`): when flags give every path the running containerd could
/// decide (root, state, address, config), it decides only `process` and
/// `note`, so it is not looked for here, in a walk of all of procfs of its
/// own, but by `gather` among the processes its procfs walk reads anyway
/// (`Paths::daemon_lookup`, [`daemon_among`]).
pub fn resolve_for_gather(flags: &PathFlags) -> (Paths, Vec<Gap>) {
    resolve_deferring(flags, Path::new(DEFAULT_CONFIG))
}

fn resolve_deferring(flags: &PathFlags, default_config: &Path) -> (Paths, Vec<Gap>) {
    let every_path = flags.root.is_some() && flags.state.is_some();
    let (Some(proc_root), Some(address), Some(config), true) =
        (&flags.proc_root, &flags.address, &flags.config, every_path)
    else {
        return resolve_with(flags, default_config);
    };
    let without_process = PathFlags {
        proc_root: None,
        ..flags.clone()
    };
    let (mut paths, gaps) = resolve_with(&without_process, default_config);
    paths.daemon_lookup = Some(DaemonLookup {
        proc_root: proc_root.clone(),
        address: address.clone(),
        config: config.clone(),
        default_config: default_config.to_path_buf(),
    });
    (paths, gaps)
}

/// The running containerd (and the note on why none, if several run) as
/// [`resolve`] would have chosen it, among `processes` (a procfs walk's):
/// only those whose `comm` says containerd are read further.
pub fn daemon_among(
    lookup: &DaemonLookup,
    processes: &BTreeMap<i32, ProcessInfo>,
    gaps: &mut Vec<Gap>,
) -> (Option<ContainerdProcess>, Option<String>) {
    let running = containerd_proc::read_daemons(&lookup.proc_root, processes, gaps);
    choose(running, &lookup_flags(lookup), &lookup.default_config)
}

fn lookup_flags(lookup: &DaemonLookup) -> PathFlags {
    PathFlags {
        address: Some(lookup.address.clone()),
        config: Some(lookup.config.clone()),
        proc_root: Some(lookup.proc_root.clone()),
        ..PathFlags::default()
    }
}

/// Which running containerd to read paths from, or why none.
fn choose(
    mut running: Vec<ContainerdProcess>,
    flags: &PathFlags,
    default_config: &Path,
) -> (Option<ContainerdProcess>, Option<String>) {
    let explicit = flags.address.is_some() || flags.config.is_some();
    if running.is_empty() || (running.len() == 1 && !explicit) {
        return (running.pop(), None);
    }
    let target = flags
        .address
        .clone()
        .unwrap_or_else(|| config_address(flags.config.as_deref().unwrap_or(default_config)));
    let mut serving: Vec<ContainerdProcess> = running
        .iter()
        .filter(|p| {
            let address = serving_address(p, default_config, flags.proc_root.as_deref());
            same_socket(&address, &target)
        })
        .cloned()
        .collect();
    if serving.len() == 1 {
        return (serving.pop(), None);
    }
    // Pointed elsewhere on purpose (maybe at a containerd that is down):
    // nothing to say; the API checks will tell.
    if serving.is_empty() && explicit {
        return (None, None);
    }
    let pids: Vec<String> = running.iter().map(|p| p.pid.to_string()).collect();
    let note = format!(
        "{} containerd processes run (pids {}) and {} serve {}; none was used: pass --address to choose one",
        running.len(),
        pids.join(", "),
        if serving.is_empty() { "none".to_string() } else { serving.len().to_string() },
        target.display()
    );
    (None, Some(note))
}

/// The socket a running containerd serves: its `-a`, else its config's.
fn serving_address(
    process: &ContainerdProcess,
    default_config: &Path,
    proc_root: Option<&Path>,
) -> PathBuf {
    if let Some(address) = &process.address {
        return address.clone();
    }
    let config = process.config.as_deref().unwrap_or(default_config);
    read_config(config, Some(process), proc_root)
        .ok()
        .and_then(|c| c.address)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_ADDRESS))
}

/// Reads a config file; one a running containerd reads, through its
/// `/proc/<pid>/root` first: nodectl in a container (the DaemonSet) may not
/// have k3s's config at the same path, and could have another file there.
fn read_config(
    path: &Path,
    read_by: Option<&ContainerdProcess>,
    proc_root: Option<&Path>,
) -> io::Result<config::ConfigPaths> {
    if let (Some(process), Some(proc_root), Ok(relative)) =
        (read_by, proc_root, path.strip_prefix("/"))
    {
        let seen = proc_root
            .join(process.pid.to_string())
            .join("root")
            .join(relative);
        if let Ok(file) = config::read(&seen) {
            return Ok(file);
        }
    }
    config::read(path)
}

fn config_address(config: &Path) -> PathBuf {
    config::read(config)
        .ok()
        .and_then(|c| c.address)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_ADDRESS))
}

fn same_socket(a: &Path, b: &Path) -> bool {
    let bare = |p: &Path| {
        p.to_string_lossy()
            .trim_start_matches("unix://")
            .to_string()
    };
    bare(a) == bare(b)
}

fn pick(
    flag: &Option<PathBuf>,
    from_process: Option<PathBuf>,
    from_config: Option<PathBuf>,
    default: &str,
) -> Located {
    let nonempty = |p: Option<PathBuf>| p.filter(|p| !p.as_os_str().is_empty());
    let (path, origin) = if let Some(path) = flag {
        (path.clone(), Origin::Flag)
    } else if let Some(path) = nonempty(from_process) {
        (path, Origin::Process)
    } else if let Some(path) = nonempty(from_config) {
        (path, Origin::Config)
    } else {
        (PathBuf::from(default), Origin::Default)
    };
    Located { path, origin }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write_config(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn config_v2_paths_are_used_and_flags_win() {
        let (_dir, path) = write_config(
            "version = 2\nroot = \"/data/containerd\"\nstate = \"/run/c2\"\n\
             [grpc]\naddress = \"/run/c2/c.sock\"\n\
             [plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"pause\"\n",
        );
        let flags = PathFlags {
            config: Some(path.clone()),
            state: Some(PathBuf::from("/tmp/state")),
            ..PathFlags::default()
        };
        let (paths, gaps) = resolve(&flags);
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(paths.config, Some(path));
        assert_eq!(paths.root.path, PathBuf::from("/data/containerd"));
        assert_eq!(paths.root.origin, Origin::Config);
        assert_eq!(paths.state.path, PathBuf::from("/tmp/state"));
        assert_eq!(paths.state.origin, Origin::Flag);
        assert_eq!(paths.address.path, PathBuf::from("/run/c2/c.sock"));
    }

    #[test]
    fn config_v3_without_paths_falls_back_to_defaults() {
        let (_dir, path) = write_config("version = 3\n[plugins]\n");
        let (paths, gaps) = resolve(&PathFlags {
            config: Some(path),
            ..PathFlags::default()
        });
        assert!(gaps.is_empty());
        assert_eq!(paths.root.path, PathBuf::from(DEFAULT_ROOT));
        assert_eq!(paths.root.origin, Origin::Default);
        assert_eq!(paths.address.path, PathBuf::from(DEFAULT_ADDRESS));
    }

    #[test]
    fn unreadable_explicit_config_is_a_gap_naming_the_file() {
        let (_dir, path) = write_config("root = [unterminated");
        let (paths, gaps) = resolve(&PathFlags {
            config: Some(path.clone()),
            ..PathFlags::default()
        });
        assert_eq!(gaps.len(), 1);
        assert_eq!(gaps[0].path, path);
        assert_eq!(paths.config, None);
        assert_eq!(paths.state.origin, Origin::Default);

        let missing = PathBuf::from("/nonexistent/nodectl/config.toml");
        let (_, gaps) = resolve(&PathFlags {
            config: Some(missing.clone()),
            ..PathFlags::default()
        });
        assert_eq!(gaps[0].path, missing);
    }

    /// A fake procfs and a place for config files.
    struct Node {
        proc_root: tempfile::TempDir,
        files: tempfile::TempDir,
    }

    impl Node {
        fn new() -> Node {
            Node {
                proc_root: tempfile::tempdir().unwrap(),
                files: tempfile::tempdir().unwrap(),
            }
        }
        fn containerd(&self, pid: i32, args: &str) {
            let argv = format!("/usr/bin/containerd {args}");
            fake_process(
                self.proc_root.path(),
                pid,
                "containerd",
                "/usr/bin/containerd",
                &argv,
            );
        }
        fn file(&self, name: &str, text: &str) -> PathBuf {
            let path = self.files.path().join(name);
            fs::write(&path, text).unwrap();
            path
        }
        fn flags(&self) -> PathFlags {
            PathFlags {
                proc_root: Some(self.proc_root.path().to_path_buf()),
                ..PathFlags::default()
            }
        }
    }

    use crate::sources::containerd_proc::fake_process;

    #[test]
    fn a_k3s_style_containerd_gives_every_path() {
        let node = Node::new();
        let config = node.file("k3s.toml", "version = 2\nroot = \"/not/this\"\n");
        node.containerd(
            300,
            &format!(
                "-c {} -a /run/k3s/containerd/containerd.sock --state /run/k3s/containerd \
                 --root /var/lib/rancher/k3s/agent/containerd",
                config.display()
            ),
        );
        let (paths, gaps) = resolve(&node.flags());
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(paths.config, Some(config));
        assert_eq!(
            paths.root,
            Located {
                path: PathBuf::from("/var/lib/rancher/k3s/agent/containerd"),
                origin: Origin::Process
            }
        );
        assert_eq!(paths.state.path, PathBuf::from("/run/k3s/containerd"));
        assert_eq!(paths.state.origin, Origin::Process);
        assert_eq!(
            paths.address.path,
            PathBuf::from("/run/k3s/containerd/containerd.sock")
        );
        assert_eq!(paths.process.as_ref().map(|p| p.pid), Some(300));
        assert_eq!(paths.note, None);
    }

    #[test]
    fn the_config_a_running_containerd_names_fills_what_its_flags_leave() {
        let node = Node::new();
        let config = node.file(
            "c.toml",
            "version = 4\nroot = \"/data/c\"\n\
             [plugins.\"io.containerd.server.v1.grpc\"]\naddress = \"/run/c4.sock\"\n",
        );
        node.containerd(12, &format!("--config={} --state=/run/s", config.display()));
        let flags = PathFlags {
            root: Some(PathBuf::from("/flag/root")),
            ..node.flags()
        };
        let (paths, gaps) = resolve(&flags);
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(paths.root.origin, Origin::Flag);
        assert_eq!(paths.state.origin, Origin::Process);
        assert_eq!(paths.address.path, PathBuf::from("/run/c4.sock"));
        assert_eq!(paths.address.origin, Origin::Config);
        assert_eq!(paths.config, Some(config));
    }

    #[test]
    fn a_config_the_running_containerd_names_but_nodectl_cannot_read_is_a_gap() {
        let node = Node::new();
        node.containerd(12, "-c /nonexistent/nodectl/k3s.toml");
        let (paths, gaps) = resolve(&node.flags());
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert_eq!(gaps[0].path, PathBuf::from("/nonexistent/nodectl/k3s.toml"));
        assert_eq!(paths.root.origin, Origin::Default);
        assert!(paths.process.is_some());
    }

    #[test]
    fn several_containerds_use_the_one_at_the_target_socket_or_none_with_a_note() {
        let node = Node::new();
        node.containerd(10, "-a /run/a.sock --root /ra");
        node.containerd(20, "-a /run/b.sock --root /rb");
        // No flag, and neither serves the default socket: none is used.
        let (paths, gaps) = resolve(&node.flags());
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(paths.process, None);
        assert_eq!(paths.root.origin, Origin::Default);
        let note = paths.note.expect("a note");
        assert!(
            note.contains("2 containerd processes run (pids 10, 20)"),
            "{note}"
        );
        assert!(note.contains("--address"), "{note}");

        // --address picks the one serving it.
        let (paths, _) = resolve(&PathFlags {
            address: Some(PathBuf::from("/run/b.sock")),
            ..node.flags()
        });
        assert_eq!(paths.root.path, PathBuf::from("/rb"));
        assert_eq!(paths.root.origin, Origin::Process);
        assert_eq!(paths.address.origin, Origin::Flag);
        assert_eq!(paths.note, None);

        // A third one with no flags serves the default socket: it is used.
        node.containerd(30, "");
        let (paths, _) = resolve(&node.flags());
        assert_eq!(paths.process.map(|p| p.pid), Some(30));
        assert_eq!(paths.note, None);
    }

    #[test]
    fn an_address_no_running_containerd_serves_uses_none_and_says_nothing() {
        let node = Node::new();
        node.containerd(10, "-a /run/a.sock --root /ra");
        let (paths, _) = resolve(&PathFlags {
            address: Some(PathBuf::from("/run/elsewhere.sock")),
            ..node.flags()
        });
        assert_eq!(paths.process, None);
        assert_eq!(paths.note, None);
        assert_eq!(paths.root.origin, Origin::Default);
    }

    #[test]
    fn a_shim_or_an_impostor_is_not_the_running_containerd() {
        let node = Node::new();
        fake_process(
            node.proc_root.path(),
            5,
            "containerd",
            "/usr/bin/bash",
            "containerd --root /impostor",
        );
        fake_process(
            node.proc_root.path(),
            6,
            "containerd-shim",
            "/usr/bin/containerd-shim-runc-v2",
            "/usr/bin/containerd-shim-runc-v2 -namespace k8s.io -address /run/x.sock",
        );
        let (paths, _) = resolve(&node.flags());
        assert_eq!(paths.process, None);
        assert_eq!(paths.root.origin, Origin::Default);
    }

    #[test]
    fn the_running_containerd_beats_the_default_config_file() {
        let node = Node::new();
        let default = node.file(
            "default.toml",
            "version = 3\nroot = \"/etc-root\"\nstate = \"/etc-state\"\n[grpc]\naddress = \"/etc.sock\"\n",
        );
        let own = node.file("own.toml", "version = 3\nstate = \"/own-state\"\n");
        // Without a running containerd, the default config file counts.
        let (paths, _) = resolve_with(&node.flags(), &default);
        assert_eq!(paths.root.path, PathBuf::from("/etc-root"));
        assert_eq!(paths.root.origin, Origin::Config);
        assert_eq!(paths.config, Some(default.clone()));

        // Started with its own config: the default file is not what it read.
        node.containerd(42, &format!("-c {} --root /own-root", own.display()));
        let (paths, gaps) = resolve_with(&node.flags(), &default);
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(paths.config, Some(own));
        assert_eq!(paths.root.path, PathBuf::from("/own-root"));
        assert_eq!(paths.root.origin, Origin::Process);
        assert_eq!(paths.state.path, PathBuf::from("/own-state"));
        assert_eq!(paths.state.origin, Origin::Config);
        assert_eq!(paths.address.path, PathBuf::from(DEFAULT_ADDRESS));
        assert_eq!(paths.address.origin, Origin::Default);
    }

    #[test]
    fn a_running_containerd_without_flags_reads_the_default_config_like_containerd() {
        let node = Node::new();
        let default = node.file("default.toml", "root = \"/etc-root\"\n");
        node.containerd(42, "");
        let (paths, _) = resolve_with(&node.flags(), &default);
        assert_eq!(paths.root.path, PathBuf::from("/etc-root"));
        assert_eq!(paths.root.origin, Origin::Config);
        assert_eq!(paths.process.map(|p| p.pid), Some(42));
    }

    /// `resolve_for_gather`'s paths with the daemon found as gather finds
    /// it: in the process table of a procfs walk.
    fn resolve_then_walk(node: &Node, flags: &PathFlags, default: &Path) -> (Paths, Vec<Gap>) {
        let (mut paths, mut gaps) = resolve_deferring(flags, default);
        if let Some(lookup) = paths.daemon_lookup.take() {
            fs::write(node.proc_root.path().join("stat"), "btime 1700000000\n").unwrap();
            let scan = crate::sources::procfs::scan(node.proc_root.path(), false, &mut gaps);
            (paths.process, paths.note) = daemon_among(&lookup, &scan.processes, &mut gaps);
        }
        (paths, gaps)
    }

    #[test]
    fn with_every_path_by_flag_the_daemon_is_left_to_gathers_walk_and_chosen_alike() {
        let node = Node::new();
        let default = node.file("default.toml", "");
        let config = node.file("c.toml", "version = 2\n");
        let every = PathFlags {
            root: Some(PathBuf::from("/r")),
            state: Some(PathBuf::from("/s")),
            address: Some(PathBuf::from("/run/a.sock")),
            config: Some(config.clone()),
            ..node.flags()
        };
        // Not walked for here: the lookup says what choosing it needs.
        node.containerd(10, "-a /run/a.sock --root /ra");
        let (paths, gaps) = resolve_deferring(&every, &default);
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!((paths.process, paths.note), (None, None));
        assert_eq!(
            paths.daemon_lookup,
            Some(DaemonLookup {
                proc_root: node.proc_root.path().to_path_buf(),
                address: PathBuf::from("/run/a.sock"),
                config: config.clone(),
                default_config: default.clone(),
            })
        );
        // A path left to containerd: it is looked for at once, as before.
        let partial = PathFlags {
            root: None,
            ..every.clone()
        };
        let (paths, _) = resolve_deferring(&partial, &default);
        assert_eq!(paths.daemon_lookup, None);
        assert_eq!(paths.process.map(|p| p.pid), Some(10));
        assert_eq!(paths.root.path, PathBuf::from("/ra"));

        // Found in the walk's table as resolve would choose it: the one
        // serving --address; an impostor (exe not containerd) and a daemon
        // serving another socket are not it.
        fake_process(
            node.proc_root.path(),
            5,
            "containerd",
            "/bin/sh",
            "containerd",
        );
        node.containerd(20, "-a /run/b.sock");
        let eager = resolve_with(&every, &default);
        let walked = resolve_then_walk(&node, &every, &default);
        assert_eq!(walked, eager);
        assert_eq!(walked.0.process.as_ref().map(|p| p.pid), Some(10));

        // Two serve it: none is used, and the note says why.
        node.containerd(30, "-a /run/a.sock");
        let eager = resolve_with(&every, &default);
        let walked = resolve_then_walk(&node, &every, &default);
        assert_eq!(walked, eager);
        assert_eq!(walked.0.process, None);
        let note = walked.0.note.expect("a note");
        assert!(
            note.contains("3 containerd processes run (pids 10, 20, 30)"),
            "{note}"
        );
    }

    #[test]
    fn the_running_containerds_config_is_read_through_its_root_first() {
        let node = Node::new();
        let pid_root = node.proc_root.path().join("77/root/etc/k3s");
        // What nodectl sees at the path is not what containerd sees there.
        node.containerd(77, "-c /etc/k3s/config.toml");
        fs::create_dir_all(&pid_root).unwrap();
        fs::write(
            pid_root.join("config.toml"),
            "version = 2\nroot = \"/seen\"\n",
        )
        .unwrap();
        let (paths, gaps) = resolve(&node.flags());
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(paths.config, Some(PathBuf::from("/etc/k3s/config.toml")));
        assert_eq!(paths.root.path, PathBuf::from("/seen"));
        assert_eq!(paths.root.origin, Origin::Config);
    }
}
