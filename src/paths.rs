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
//! Which running containerd: one proven by the kernel, never by its name or
//! command line (`sources::daemon_proof`). It must run in the host's mount
//! and pid namespaces, from a root-owned binary no one else may write, and
//! be the process listening on the socket: the one `--address` (or
//! `--config`'s address) names, resolved as nodectl resolves it, so every
//! spelling (a symlink, `..`, `/var/run`) finds the same daemon; with
//! neither flag, the one daemon listening on the socket it names itself,
//! else the one on the default socket. Every other process called
//! containerd is listed with why it is not the daemon, and supplies no
//! path. A socket no proven containerd serves (a relay, another process's,
//! nobody's) is a gap: whoever serves it writes the answers. A root or
//! state that is not the proven daemon's own (compared by device and inode)
//! is read, but nothing is acted on (`Paths::unproven`).

pub mod config;
mod tie;
pub(crate) use tie::add_note;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use crate::model::{
    ContainerdProcess, DaemonLookup, FileId, Gap, Located, Origin, OtherContainerd, Paths,
    ProcessInfo, Source,
};
use crate::sources::{containerd_proc, daemon_proof};

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
    resolve_with(flags, Path::new(DEFAULT_CONFIG), &live(flags))
}

/// The kernel's facts, read under `--proc-root` (`/proc` itself for a
/// fake one that has none: nothing there can be proven).
fn live(flags: &PathFlags) -> LiveKernel {
    LiveKernel {
        proc_root: flags
            .proc_root
            .clone()
            .unwrap_or_else(|| PathBuf::from("/proc")),
    }
}

/// [`resolve`] with another default config file and other kernel facts
/// (tests can neither write /etc nor start daemons at will).
fn resolve_with(
    flags: &PathFlags,
    default_config: &Path,
    kernel: &dyn Kernel,
) -> (Paths, Vec<Gap>) {
    let mut gaps = Vec::new();
    let chosen = match flags.proc_root.as_deref() {
        Some(proc_root) => {
            let running = containerd_proc::find(proc_root, &mut gaps);
            choose(running, flags, default_config, kernel)
        }
        // Left to gather's walk (`resolve_for_gather`).
        None => Chosen::default(),
    };
    let process = chosen.process.clone();
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
    let file = match config::read_seen_by(
        &config_path,
        seen_by.map(|p| p.pid),
        flags.proc_root.as_deref(),
    ) {
        Ok(file) => {
            // An import unread, a limit reached: the paths come from the
            // rest, and the report says which file was not read.
            for (path, problem) in &file.problems {
                gaps.push(Gap::item(Source::Config, path, problem));
            }
            // A gap until the daemon's line is known (gather settles it).
            for apart in &file.apart_by_line {
                gaps.push(Gap::item(Source::Config, &apart.file, &apart.said));
            }
            Some(file)
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound && !named => None,
        Err(err) => {
            gaps.push(Gap::item(Source::Config, &config_path, err));
            None
        }
    };
    let from_file = |f: fn(&config::ConfigPaths) -> Option<PathBuf>| file.as_ref().and_then(f);
    let from_process = |f: fn(&ContainerdProcess) -> Option<PathBuf>| process.as_ref().and_then(f);
    let mut paths = Paths {
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
        process: None,
        note: None,
        other_containerds: Vec::new(),
        unproven: Vec::new(),
        untied: Vec::new(),
        by_config_only: Vec::new(),
        snapshotter: file.as_ref().and_then(|c| c.snapshotter.clone()),
        cni_conf_dir: file.as_ref().and_then(|c| c.cni_conf_dir.clone()),
        cni_max_conf_num: file.as_ref().and_then(|c| c.cni_max_conf_num),
        netns_under_state_dir: file.as_ref().is_some_and(|c| c.netns_under_state_dir),
        daemon_lookup: None,
        config_apart_by_line: file
            .as_ref()
            .map(|c| c.apart_by_line.clone())
            .unwrap_or_default(),
    };
    if flags.proc_root.is_some() {
        settle(
            &mut paths,
            chosen,
            default_config,
            flags.config.is_some(),
            flags.proc_root.as_deref(),
            kernel,
            &mut gaps,
        );
    }
    (paths, gaps)
}

/// [`resolve`] for a command whose every look at the node is `gather` (or
/// its `follow_up`): when flags give every path the running containerd could
/// decide (root, state, address, config), it decides only which daemon is
/// talked to, so it is not looked for here, in a walk of all of procfs of
/// its own, but by `gather` among the processes its procfs walk reads
/// anyway (`Paths::daemon_lookup`, [`daemon_among`]).
pub fn resolve_for_gather(flags: &PathFlags) -> (Paths, Vec<Gap>) {
    resolve_deferring(flags, Path::new(DEFAULT_CONFIG), &live(flags))
}

fn resolve_deferring(
    flags: &PathFlags,
    default_config: &Path,
    kernel: &dyn Kernel,
) -> (Paths, Vec<Gap>) {
    let every_path = flags.root.is_some() && flags.state.is_some();
    let (Some(proc_root), Some(address), Some(config), true) =
        (&flags.proc_root, &flags.address, &flags.config, every_path)
    else {
        return resolve_with(flags, default_config, kernel);
    };
    let without_process = PathFlags {
        proc_root: None,
        ..flags.clone()
    };
    let (mut paths, gaps) = resolve_with(&without_process, default_config, kernel);
    paths.daemon_lookup = Some(DaemonLookup {
        proc_root: proc_root.clone(),
        address: address.clone(),
        config: config.clone(),
        default_config: default_config.to_path_buf(),
    });
    (paths, gaps)
}

/// Fills `paths`' daemon (and why none, and every other containerd) as
/// [`resolve`] would have chosen it, among `processes` (a procfs walk's):
/// only those whose `comm` says containerd are read further. Every path is
/// a flag here (see [`resolve_for_gather`]).
pub fn daemon_among(
    lookup: &DaemonLookup,
    processes: &BTreeMap<i32, ProcessInfo>,
    paths: &mut Paths,
    gaps: &mut Vec<Gap>,
) {
    let kernel = LiveKernel {
        proc_root: lookup.proc_root.clone(),
    };
    daemon_among_with(lookup, processes, paths, gaps, &kernel);
}

fn daemon_among_with(
    lookup: &DaemonLookup,
    processes: &BTreeMap<i32, ProcessInfo>,
    paths: &mut Paths,
    gaps: &mut Vec<Gap>,
    kernel: &dyn Kernel,
) {
    let running = containerd_proc::read_daemons(&lookup.proc_root, processes, gaps);
    let chosen = choose(
        running,
        &lookup_flags(lookup),
        &lookup.default_config,
        kernel,
    );
    settle(
        paths,
        chosen,
        &lookup.default_config,
        true,
        Some(&lookup.proc_root),
        kernel,
        gaps,
    );
}

fn lookup_flags(lookup: &DaemonLookup) -> PathFlags {
    PathFlags {
        address: Some(lookup.address.clone()),
        config: Some(lookup.config.clone()),
        proc_root: Some(lookup.proc_root.clone()),
        ..PathFlags::default()
    }
}

/// The kernel's facts the daemon is proven by: read by
/// [`daemon_proof`] on a live node, given by tests.
pub trait Kernel {
    fn host(&self) -> Option<daemon_proof::Host>;
    fn facts(&self, pid: i32) -> daemon_proof::DaemonFacts;
    /// Who listens on `socket`, as nodectl resolves it.
    fn serving(&self, socket: &Path) -> Result<daemon_proof::Peer, String>;
    /// Who listens on `socket` as process `pid` resolves it (its root).
    fn serving_in(&self, pid: i32, socket: &Path) -> Result<daemon_proof::Peer, String>;
    fn file_id(&self, path: &Path) -> Result<FileId, String>;
    /// `path`'s identity as process `pid` resolves it (its root).
    fn file_id_in(&self, pid: i32, path: &Path) -> Result<FileId, String>;
    /// The files process `pid` holds open (by their links' spelling).
    fn open_files(&self, pid: i32) -> Result<Vec<daemon_proof::OpenFile>, String>;
    /// The identity of the file process `pid` holds open as `fd`.
    fn open_file_id(&self, pid: i32, fd: i32) -> Result<FileId, String>;
    /// When process `pid` started, ns since the epoch.
    fn started_nanos(&self, pid: i32) -> Result<i64, String>;
    /// Process `pid`'s working directory, as it names it.
    fn cwd(&self, pid: i32) -> Result<PathBuf, String>;
    /// Why what `path` names could be swapped by someone else, if it could:
    /// a directory on its way (resolved) that a user other than root owns,
    /// or that group or others may write without the sticky bit.
    fn swappable(&self, path: &Path) -> Option<String>;
}

/// The live node's kernel, under a procfs.
pub struct LiveKernel {
    pub proc_root: PathBuf,
}

impl Kernel for LiveKernel {
    fn host(&self) -> Option<daemon_proof::Host> {
        daemon_proof::host(&self.proc_root)
    }
    fn facts(&self, pid: i32) -> daemon_proof::DaemonFacts {
        daemon_proof::facts(&self.proc_root, pid)
    }
    fn serving(&self, socket: &Path) -> Result<daemon_proof::Peer, String> {
        daemon_proof::serving(socket)
    }
    fn serving_in(&self, pid: i32, socket: &Path) -> Result<daemon_proof::Peer, String> {
        daemon_proof::serving_in(&self.proc_root, pid, socket)
    }
    fn file_id(&self, path: &Path) -> Result<FileId, String> {
        daemon_proof::file_id(path)
    }
    fn file_id_in(&self, pid: i32, path: &Path) -> Result<FileId, String> {
        daemon_proof::file_id_in(&self.proc_root, pid, path)
    }
    fn open_files(&self, pid: i32) -> Result<Vec<daemon_proof::OpenFile>, String> {
        daemon_proof::open_files(&self.proc_root, pid)
    }
    fn open_file_id(&self, pid: i32, fd: i32) -> Result<FileId, String> {
        daemon_proof::open_file_id(&self.proc_root, pid, fd)
    }
    fn started_nanos(&self, pid: i32) -> Result<i64, String> {
        daemon_proof::started_nanos(&self.proc_root, pid)
    }
    fn cwd(&self, pid: i32) -> Result<PathBuf, String> {
        let link = self.proc_root.join(pid.to_string()).join("cwd");
        std::fs::read_link(&link).map_err(|err| format!("{}: {err}", link.display()))
    }
    fn swappable(&self, path: &Path) -> Option<String> {
        daemon_proof::swappable(path)
    }
}

/// Which running containerd nodectl talks to, or why none.
#[derive(Debug, Default)]
struct Chosen {
    /// Proven: in the host's namespaces, a root-owned binary, and the
    /// listener of the socket nodectl asks.
    process: Option<ContainerdProcess>,
    note: Option<String>,
    others: Vec<OtherContainerd>,
    /// Why no proven containerd serves the socket nodectl asks.
    unserved: Option<String>,
}

/// Chooses the daemon among the processes called containerd, on the
/// kernel's facts alone: argv chooses nothing (any process can name itself
/// containerd and claim any socket, root and state).
fn choose(
    running: Vec<ContainerdProcess>,
    flags: &PathFlags,
    default_config: &Path,
    kernel: &dyn Kernel,
) -> Chosen {
    let host = kernel.host();
    let mut chosen = Chosen::default();
    let mut eligible = Vec::new();
    for process in running {
        match daemon_proof::disqualified(&kernel.facts(process.pid), host.as_ref()) {
            Some(reason) => chosen.others.push(other(&process, reason)),
            None => eligible.push(process),
        }
    }
    let mut several = None;
    let target = match (&flags.address, &flags.config) {
        (Some(address), _) => address.clone(),
        (None, Some(config)) => config_address(config),
        (None, None) => {
            // No socket named: each daemon is proven on the one it names
            // itself (k3s's, rke2's), as it resolves it.
            let mut serving = Vec::new();
            for process in eligible.drain(..) {
                let own = serving_address(&process, default_config, flags.proc_root.as_deref());
                match kernel.serving_in(process.pid, &own) {
                    Ok(peer) if peer.pid == process.pid => serving.push(process),
                    Ok(peer) => chosen.others.push(other(
                        &process,
                        format!(
                            "it does not serve the socket it names ({}): pid {} does",
                            own.display(),
                            peer.pid
                        ),
                    )),
                    Err(why) => chosen.others.push(other(
                        &process,
                        format!(
                            "it does not serve the socket it names ({}): {why}",
                            own.display()
                        ),
                    )),
                }
            }
            if serving.len() == 1 {
                chosen.process = serving.pop();
                return chosen;
            }
            if serving.len() > 1 {
                several = Some(
                    serving
                        .iter()
                        .map(|p| p.pid.to_string())
                        .collect::<Vec<_>>(),
                );
            }
            eligible = serving;
            PathBuf::from(DEFAULT_ADDRESS)
        }
    };
    match kernel.serving(&target) {
        // The kernel's record of who listened, uid included: root's daemon
        // listens as root.
        Ok(peer)
            if !host
                .as_ref()
                .is_some_and(|h| daemon_proof::trusted(h, peer.uid)) =>
        {
            chosen.unserved = Some(served_by(peer, &chosen.others))
        }
        Ok(peer) => match eligible.iter().position(|p| p.pid == peer.pid) {
            Some(found) => chosen.process = Some(eligible.remove(found)),
            None => chosen.unserved = Some(served_by(peer, &chosen.others)),
        },
        Err(why) => chosen.unserved = Some(why),
    }
    if let (Some(pids), None) = (&several, &chosen.process) {
        chosen.note = Some(format!(
            "{} containerd processes run (pids {}) and none serves {}; none was used: pass --address to choose one",
            pids.len(),
            pids.join(", "),
            target.display()
        ));
    }
    for process in eligible {
        let reason = format!("it does not serve {}", target.display());
        chosen.others.push(other(&process, reason));
    }
    chosen.others.sort_by_key(|o| o.pid);
    chosen
}

fn other(process: &ContainerdProcess, reason: String) -> OtherContainerd {
    OtherContainerd {
        pid: process.pid,
        exe: process.exe.clone(),
        reason,
    }
}

/// Who serves a socket no proven containerd serves, in words.
fn served_by(peer: daemon_proof::Peer, others: &[OtherContainerd]) -> String {
    if peer.pid == 0 {
        return "it is served by a process outside nodectl's pid namespace".to_string();
    }
    match others.iter().find(|o| o.pid == peer.pid) {
        Some(other) => format!(
            "it is served by containerd pid {}, which is not the daemon: {}",
            peer.pid, other.reason
        ),
        None => format!(
            "it is served by pid {} (uid {}), which is no containerd",
            peer.pid, peer.uid
        ),
    }
}

/// Puts what [`choose`] decided into `paths`, and says what cannot be tied
/// to the daemon: its socket unserved (a gap: its answers are whoever's
/// serves it, so no run ends in an all-clear), or a root or state that is
/// not the daemon's own (then nodectl may read, but never act).
fn settle(
    paths: &mut Paths,
    chosen: Chosen,
    default_config: &Path,
    config_by_flag: bool,
    proc_root: Option<&Path>,
    kernel: &dyn Kernel,
    gaps: &mut Vec<Gap>,
) {
    paths.process = chosen.process;
    paths.note = chosen.note;
    paths.other_containerds = chosen.others;
    if let Some(why) = chosen.unserved {
        let socket = paths.address.path.display().to_string();
        gaps.push(Gap::source(
            Source::ContainerdApi,
            &paths.address.path,
            format!("no proven containerd serves this socket: {why}"),
        ));
        paths
            .unproven
            .push(format!("no proven containerd serves {socket}: {why}"));
    }
    let Some(process) = &paths.process else {
        return;
    };
    let process = process.clone();
    tie::own_root_and_state(
        paths,
        &process,
        default_config,
        config_by_flag,
        proc_root,
        kernel,
    );
    // Root's daemon keeps its socket, root and state where only root may
    // change what they name; one a user could swap something into (a
    // socket, root or state in or below a user's directory) is never
    // acted under, whoever runs it.
    for (what, path) in [
        ("socket", &paths.address.path),
        ("root", &paths.root.path),
        ("state", &paths.state.path),
    ] {
        if let Some(why) = kernel.swappable(path) {
            let reason = format!("{what} {}: {why}", path.display());
            paths.unproven.push(reason);
        }
    }
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
    config::read_seen_by(config, Some(process.pid), proc_root)
        .ok()
        .and_then(|c| c.address)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_ADDRESS))
}

fn config_address(config: &Path) -> PathBuf {
    config::read(config)
        .ok()
        .and_then(|c| c.address)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_ADDRESS))
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

    /// A fake procfs, a place for config files, and the kernel's facts
    /// about both: every fake containerd is in the host's namespaces, runs
    /// a root-owned binary and listens on the socket it names, unless a
    /// test says otherwise.
    struct Node {
        proc_root: tempfile::TempDir,
        files: tempfile::TempDir,
        kernel: FakeKernel,
    }

    #[derive(Default)]
    struct FakeKernel {
        /// Who listens on each socket (by spelling: a fake has no inodes).
        listeners: std::cell::RefCell<BTreeMap<PathBuf, i32>>,
        /// Processes in a container's namespaces.
        contained: std::cell::RefCell<Vec<i32>>,
        /// Processes run by a user other than root: pid → uid.
        users: std::cell::RefCell<BTreeMap<i32, u32>>,
        /// Directories a user owns (what is below them, they can swap).
        users_dirs: std::cell::RefCell<Vec<PathBuf>>,
        /// Directories that are one directory under two spellings.
        aliases: std::cell::RefCell<BTreeMap<PathBuf, PathBuf>>,
        /// Paths the daemon resolves to another directory than nodectl
        /// does (its own root: nodectl in a container, say).
        elsewhere_for_daemon: std::cell::RefCell<BTreeMap<PathBuf, PathBuf>>,
        /// Files each process holds open, by the path it opened (the fake
        /// file's identity is that path's).
        open: std::cell::RefCell<BTreeMap<i32, Vec<PathBuf>>>,
        /// When each process started; unset: after every file was written.
        started: std::cell::RefCell<BTreeMap<i32, i64>>,
        /// Each process's working directory; unset: `/`.
        cwds: std::cell::RefCell<BTreeMap<i32, PathBuf>>,
    }

    const HOST: NamespaceIdsFake = NamespaceIdsFake;
    struct NamespaceIdsFake;
    impl NamespaceIdsFake {
        fn ids(&self, contained: bool) -> crate::model::NamespaceIds {
            crate::model::NamespaceIds {
                user: 1,
                pid: 2,
                mnt: if contained { 99 } else { 3 },
            }
        }
    }

    impl FakeKernel {
        fn uid(&self, pid: i32) -> u32 {
            self.users.borrow().get(&pid).copied().unwrap_or(0)
        }
    }

    impl Kernel for FakeKernel {
        fn host(&self) -> Option<daemon_proof::Host> {
            Some(daemon_proof::Host {
                described: "PID 1",
                namespaces: HOST.ids(false),
                uid: 0,
            })
        }
        fn facts(&self, pid: i32) -> daemon_proof::DaemonFacts {
            daemon_proof::DaemonFacts {
                namespaces: Ok(HOST.ids(self.contained.borrow().contains(&pid))),
                executable: Ok(daemon_proof::Executable {
                    regular: true,
                    uid: 0,
                    mode: 0o755,
                }),
                uids: Ok(vec![self.uid(pid); 4]),
            }
        }
        fn serving(&self, socket: &Path) -> Result<daemon_proof::Peer, String> {
            self.listeners
                .borrow()
                .get(socket)
                .map(|&pid| daemon_proof::Peer {
                    pid,
                    uid: self.uid(pid),
                })
                .ok_or_else(|| "it does not exist".to_string())
        }
        fn serving_in(&self, _pid: i32, socket: &Path) -> Result<daemon_proof::Peer, String> {
            self.serving(socket)
        }
        fn file_id(&self, path: &Path) -> Result<FileId, String> {
            let aliases = self.aliases.borrow();
            let path = aliases.get(path).map(PathBuf::as_path).unwrap_or(path);
            use std::hash::{Hash, Hasher};
            let mut hash = std::collections::hash_map::DefaultHasher::new();
            path.hash(&mut hash);
            Ok(FileId {
                dev: 1,
                ino: hash.finish(),
            })
        }
        fn file_id_in(&self, _pid: i32, path: &Path) -> Result<FileId, String> {
            match self.elsewhere_for_daemon.borrow().get(path) {
                Some(there) => self.file_id(there),
                None => self.file_id(path),
            }
        }
        fn open_files(&self, pid: i32) -> Result<Vec<daemon_proof::OpenFile>, String> {
            let open = self.open.borrow();
            let files = open.get(&pid).cloned().unwrap_or_default();
            Ok(files
                .into_iter()
                .enumerate()
                .map(|(fd, link)| daemon_proof::OpenFile {
                    fd: fd as i32 + 3,
                    link,
                })
                .collect())
        }
        fn open_file_id(&self, pid: i32, fd: i32) -> Result<FileId, String> {
            let open = self.open.borrow();
            let path = open
                .get(&pid)
                .and_then(|files| files.get(fd as usize - 3))
                .ok_or("no such descriptor")?;
            self.file_id_in(pid, path)
        }
        fn started_nanos(&self, pid: i32) -> Result<i64, String> {
            Ok(self.started.borrow().get(&pid).copied().unwrap_or(i64::MAX))
        }
        fn cwd(&self, pid: i32) -> Result<PathBuf, String> {
            Ok(self
                .cwds
                .borrow()
                .get(&pid)
                .cloned()
                .unwrap_or_else(|| PathBuf::from("/")))
        }
        fn swappable(&self, path: &Path) -> Option<String> {
            let users = self.users_dirs.borrow();
            users
                .iter()
                .find(|dir| path.starts_with(dir))
                .map(|dir| format!("{} is owned by uid 1001", dir.display()))
        }
    }

    impl Node {
        fn new() -> Node {
            Node {
                proc_root: tempfile::tempdir().unwrap(),
                files: tempfile::tempdir().unwrap(),
                kernel: FakeKernel::default(),
            }
        }
        /// A containerd started with `args`, listening on the socket they
        /// (or its config) name.
        fn containerd(&self, pid: i32, args: &str) {
            self.containerd_not_listening(pid, args);
            let argv: Vec<String> = std::iter::once("containerd".to_string())
                .chain(args.split_whitespace().map(str::to_string))
                .collect();
            let process = containerd_proc::parse_args(&argv).unwrap();
            let address = process.address.clone().unwrap_or_else(|| {
                let config = process
                    .config
                    .as_deref()
                    .unwrap_or(Path::new("/nonexistent"));
                config::read(config)
                    .ok()
                    .and_then(|c| c.address)
                    .unwrap_or_else(|| PathBuf::from(DEFAULT_ADDRESS))
            });
            self.listens(pid, &address);
        }
        fn containerd_not_listening(&self, pid: i32, args: &str) {
            let argv = format!("/usr/bin/containerd {args}");
            fake_process(
                self.proc_root.path(),
                pid,
                "containerd",
                "/usr/bin/containerd",
                &argv,
            );
        }
        fn listens(&self, pid: i32, socket: impl Into<PathBuf>) {
            self.kernel
                .listeners
                .borrow_mut()
                .insert(socket.into(), pid);
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
        /// A default config file that is not there (the machine's own
        /// /etc/containerd/config.toml is no business of a test).
        fn no_default(&self) -> PathBuf {
            self.files.path().join("absent-default.toml")
        }
        fn resolve(&self, flags: &PathFlags) -> (Paths, Vec<Gap>) {
            resolve_with(flags, &self.no_default(), &self.kernel)
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
        let (paths, gaps) = node.resolve(&node.flags());
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
        assert!(paths.unproven.is_empty(), "{:?}", paths.unproven);
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
        let (paths, gaps) = node.resolve(&flags);
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(paths.root.origin, Origin::Flag);
        assert_eq!(paths.state.origin, Origin::Process);
        assert_eq!(paths.address.path, PathBuf::from("/run/c4.sock"));
        assert_eq!(paths.address.origin, Origin::Config);
        assert_eq!(paths.config, Some(config));
        // The flag's root is not the daemon's (/data/c): read, never acted on.
        assert_eq!(paths.unproven.len(), 1, "{:?}", paths.unproven);
        assert!(
            paths.unproven[0]
                .contains("root /flag/root is not containerd pid 12's (it uses /data/c)"),
            "{:?}",
            paths.unproven
        );
    }

    #[test]
    fn a_config_the_running_containerd_names_but_nodectl_cannot_read_is_a_gap() {
        let node = Node::new();
        node.containerd(12, "-c /nonexistent/nodectl/k3s.toml");
        let (paths, gaps) = node.resolve(&node.flags());
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
        let (paths, gaps) = node.resolve(&node.flags());
        assert_eq!(paths.process, None);
        assert_eq!(paths.root.origin, Origin::Default);
        let note = paths.note.clone().expect("a note");
        assert!(
            note.contains("2 containerd processes run (pids 10, 20)"),
            "{note}"
        );
        assert!(note.contains("--address"), "{note}");
        // Nothing serves the socket it falls back to: a gap, never a
        // silent all-clear, and nothing may be acted on.
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(gaps[0]
            .error
            .starts_with("no proven containerd serves this socket"));
        assert!(gaps[0].source_unavailable);
        assert!(!paths.unproven.is_empty());

        // --address picks the one serving it.
        let (paths, gaps) = node.resolve(&PathFlags {
            address: Some(PathBuf::from("/run/b.sock")),
            ..node.flags()
        });
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(paths.root.path, PathBuf::from("/rb"));
        assert_eq!(paths.root.origin, Origin::Process);
        assert_eq!(paths.address.origin, Origin::Flag);
        assert_eq!(paths.note, None);
        let others: Vec<(i32, &str)> = paths
            .other_containerds
            .iter()
            .map(|o| (o.pid, o.reason.as_str()))
            .collect();
        assert_eq!(others, [(10, "it does not serve /run/b.sock")]);

        // A third one with no flags serves the default socket: it is used.
        node.containerd(30, "");
        let (paths, _) = node.resolve(&node.flags());
        assert_eq!(paths.process.map(|p| p.pid), Some(30));
        assert_eq!(paths.note, None);
    }

    #[test]
    fn a_users_containerd_is_never_the_daemon_nor_one_of_several() {
        let node = Node::new();
        // Root's /usr/bin/containerd run by uid 1001, with its own config,
        // socket, root and state; the node's containerd is down.
        let own = node.file(
            "user.toml",
            "version = 2\nroot = \"/home/u/root\"\nstate = \"/home/u/state\"\n\
             [grpc]\naddress = \"/home/u/c.sock\"\n",
        );
        node.containerd(600, &format!("-c {}", own.display()));
        node.kernel.users.borrow_mut().insert(600, 1001);
        let (paths, gaps) = node.resolve(&node.flags());
        assert_eq!(paths.process, None);
        assert_eq!(paths.root.path, PathBuf::from(DEFAULT_ROOT));
        assert!(!gaps.is_empty(), "never an all-clear: {gaps:?}");
        let others: Vec<(i32, &str)> = paths
            .other_containerds
            .iter()
            .map(|o| (o.pid, o.reason.as_str()))
            .collect();
        assert_eq!(
            others,
            [(600, "it runs as uid 1001 (effective 1001), not root")]
        );
        // Asked at its very socket, it is not proven either.
        let (paths, _) = node.resolve(&PathFlags {
            address: Some(PathBuf::from("/home/u/c.sock")),
            ..node.flags()
        });
        assert_eq!(paths.process, None);
        assert!(!paths.unproven.is_empty());
        // Root's containerd itself, with its state in a user's directory:
        // proven, but never acted under.
        node.kernel.users.borrow_mut().clear();
        node.kernel
            .users_dirs
            .borrow_mut()
            .push(PathBuf::from("/home/u"));
        let (paths, _) = node.resolve(&node.flags());
        assert_eq!(paths.process.as_ref().map(|p| p.pid), Some(600));
        let unproven = paths.unproven.join("; ");
        for what in [
            "socket /home/u/c.sock",
            "root /home/u/root",
            "state /home/u/state",
        ] {
            assert!(unproven.contains(what), "{what}: {unproven}");
        }
        node.kernel.users.borrow_mut().insert(600, 1001);
        node.kernel.users_dirs.borrow_mut().clear();
        // Beside a k3s-style containerd, it is not one of "several": the
        // node's is used with no flag.
        node.containerd(300, "-a /run/k3s/containerd/containerd.sock --root /k3s");
        let (paths, gaps) = node.resolve(&node.flags());
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(paths.process.map(|p| p.pid), Some(300));
        assert_eq!(paths.note, None);
    }

    #[test]
    fn an_address_no_running_containerd_serves_uses_none_and_says_so_in_a_gap() {
        let node = Node::new();
        node.containerd(10, "-a /run/a.sock --root /ra");
        let (paths, gaps) = node.resolve(&PathFlags {
            address: Some(PathBuf::from("/run/elsewhere.sock")),
            ..node.flags()
        });
        assert_eq!(paths.process, None);
        assert_eq!(paths.note, None);
        assert_eq!(paths.root.origin, Origin::Default);
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert_eq!(gaps[0].source, Source::ContainerdApi);
        assert_eq!(gaps[0].path, PathBuf::from("/run/elsewhere.sock"));
        assert_eq!(
            gaps[0].error,
            "no proven containerd serves this socket: it does not exist"
        );
    }

    #[test]
    fn a_socket_relayed_by_another_process_proves_no_daemon() {
        let node = Node::new();
        node.containerd(10, "-a /run/a.sock --root /ra");
        // A relay (pid 77, no containerd) in front of the real one.
        node.listens(77, "/run/relay.sock");
        let (paths, gaps) = node.resolve(&PathFlags {
            address: Some(PathBuf::from("/run/relay.sock")),
            ..node.flags()
        });
        assert_eq!(paths.process, None);
        assert_eq!(paths.root.origin, Origin::Default, "its argv chose nothing");
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert_eq!(
            gaps[0].error,
            "no proven containerd serves this socket: it is served by pid 77 (uid 0), which is no containerd"
        );
        assert!(gaps[0].source_unavailable, "nodectl_up must say 0");
    }

    #[test]
    fn a_containerd_in_a_containers_namespaces_is_named_and_never_used() {
        let node = Node::new();
        // A dind-style containerd claiming the host's socket, root and
        // state, in its own mount namespace, and even listening there.
        node.containerd(
            66,
            "--address /run/containerd/containerd.sock --root /x --state /y",
        );
        node.kernel.contained.borrow_mut().push(66);
        let (paths, gaps) = node.resolve(&node.flags());
        assert_eq!(paths.process, None);
        assert_eq!(paths.root.path, PathBuf::from(DEFAULT_ROOT));
        assert_eq!(paths.state.path, PathBuf::from(DEFAULT_STATE));
        assert_eq!(paths.other_containerds.len(), 1);
        assert_eq!(paths.other_containerds[0].pid, 66);
        assert!(
            paths.other_containerds[0]
                .reason
                .contains("another mount namespace"),
            "{:?}",
            paths.other_containerds
        );
        assert!(
            gaps[0]
                .error
                .contains("containerd pid 66, which is not the daemon"),
            "{gaps:?}"
        );

        // Beside the real daemon, it changes nothing.
        node.containerd(10, "");
        let (paths, gaps) = node.resolve(&node.flags());
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(paths.process.map(|p| p.pid), Some(10));
        assert_eq!(paths.other_containerds[0].pid, 66);
    }

    #[test]
    fn root_and_state_by_flag_are_tied_to_the_daemon_by_identity_not_spelling() {
        let node = Node::new();
        node.containerd(10, "--root /var/lib/containerd --state /run/containerd");
        // Another spelling of its state (a symlink, `..`, /var/run).
        node.kernel.aliases.borrow_mut().insert(
            PathBuf::from("/var/run/containerd"),
            PathBuf::from("/run/containerd"),
        );
        let (paths, gaps) = node.resolve(&PathFlags {
            state: Some(PathBuf::from("/var/run/containerd")),
            root: Some(PathBuf::from("/var/lib/containerd")),
            ..node.flags()
        });
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(paths.process.as_ref().map(|p| p.pid), Some(10));
        assert!(paths.unproven.is_empty(), "{:?}", paths.unproven);

        // The same words, another directory for the daemon than for
        // nodectl: not its own.
        node.kernel.elsewhere_for_daemon.borrow_mut().insert(
            PathBuf::from("/run/containerd"),
            PathBuf::from("/in/its/root"),
        );
        let (paths, _) = node.resolve(&PathFlags {
            state: Some(PathBuf::from("/run/containerd")),
            ..node.flags()
        });
        assert_eq!(paths.unproven.len(), 1, "{:?}", paths.unproven);
        node.kernel.elsewhere_for_daemon.borrow_mut().clear();

        // Another containerd's state: read, but never acted on.
        let (paths, _) = node.resolve(&PathFlags {
            state: Some(PathBuf::from("/run/other")),
            ..node.flags()
        });
        assert_eq!(paths.unproven.len(), 1, "{:?}", paths.unproven);
        assert!(paths.unproven[0].starts_with("state /run/other is not containerd pid 10's"));
    }

    /// A daemon of `config` holding its metadata database under `root` open.
    fn daemon_holding(node: &Node, pid: i32, config: &Path, root: &str) {
        node.containerd(pid, &format!("-c {}", config.display()));
        node.kernel.open.borrow_mut().insert(
            pid,
            vec![PathBuf::from(root).join("io.containerd.metadata.v1.bolt/meta.db")],
        );
    }

    #[test]
    fn the_daemon_s_root_is_tied_by_the_metadata_database_it_holds_open() {
        let node = Node::new();
        let config = node.file(
            "c.toml",
            "version = 2\nroot = \"/data/c\"\nstate = \"/run/c\"\n",
        );
        daemon_holding(&node, 10, &config, "/data/c");
        let (paths, gaps) = node.resolve(&node.flags());
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(paths.root.path, PathBuf::from("/data/c"));
        assert_eq!(paths.root.origin, Origin::Config);
        assert!(paths.unproven.is_empty(), "{:?}", paths.unproven);
        assert_eq!(paths.note, None);
    }

    #[test]
    fn a_relative_root_and_state_are_the_daemons_working_directorys() {
        let node = Node::new();
        let config = node.file(
            "c.toml",
            "version = 2\nroot = \"rel/root\"\nstate = \"rel/state\"\n",
        );
        node.kernel
            .cwds
            .borrow_mut()
            .insert(10, PathBuf::from("/srv/c"));
        daemon_holding(&node, 10, &config, "/srv/c/rel/root");
        let (paths, _) = node.resolve(&node.flags());
        assert_eq!(paths.root.path, PathBuf::from("/srv/c/rel/root"));
        assert_eq!(paths.state.path, PathBuf::from("/srv/c/rel/state"));
        assert!(paths.unproven.is_empty(), "{:?}", paths.unproven);
    }

    #[test]
    fn a_config_edited_after_start_gives_the_root_the_daemon_holds_and_leaves_state_unproven() {
        let node = Node::new();
        let config = node.file(
            "c.toml",
            "version = 2\nroot = \"/edited/root\"\nstate = \"/edited/state\"\n",
        );
        daemon_holding(&node, 10, &config, "/real/root");
        // Started before the config was last changed.
        node.kernel.started.borrow_mut().insert(10, 0);
        let (paths, _) = node.resolve(&node.flags());
        assert_eq!(paths.root.path, PathBuf::from("/real/root"));
        assert_eq!(paths.root.origin, Origin::OpenFile);
        let note = paths.note.clone().unwrap_or_default();
        assert!(note.contains("its config names /edited/root"), "{note}");
        // Nothing held under the state: the edited config cannot tie it.
        assert_eq!(paths.unproven.len(), 1, "{:?}", paths.unproven);
        assert!(
            paths.unproven[0]
                .starts_with("state /edited/state could not be tied to containerd pid 10"),
            "{:?}",
            paths.unproven
        );
        assert!(
            paths.unproven[0]
                .contains("names another root (/edited/root) than the one it holds open"),
            "{:?}",
            paths.unproven
        );

        // A root by flag is compared with the root the daemon holds.
        let (paths, _) = node.resolve(&PathFlags {
            root: Some(PathBuf::from("/edited/root")),
            ..node.flags()
        });
        assert!(
            paths.unproven.iter().any(|r| r
                .starts_with("root /edited/root is not containerd pid 10's (it uses /real/root)")),
            "{:?}",
            paths.unproven
        );

        // 2.3 holds its mount manager's database under its state: tied.
        node.kernel
            .open
            .borrow_mut()
            .get_mut(&10)
            .unwrap()
            .push(PathBuf::from(
                "/edited/state/io.containerd.mount-manager.v1.bolt/mounts.db",
            ));
        let (paths, _) = node.resolve(&node.flags());
        assert!(paths.unproven.is_empty(), "{:?}", paths.unproven);
        assert_eq!(paths.state.path, PathBuf::from("/edited/state"));
    }

    #[test]
    fn what_the_daemon_holds_nothing_under_is_tied_only_by_an_unchanged_config() {
        let node = Node::new();
        let config = node.file("c.toml", "version = 2\nroot = \"/data/c\"\n");
        node.containerd(10, &format!("-c {}", config.display()));
        let (paths, _) = node.resolve(&node.flags());
        assert!(paths.unproven.is_empty(), "{:?}", paths.unproven);
        node.kernel.started.borrow_mut().insert(10, 0);
        let (paths, _) = node.resolve(&node.flags());
        let roots: Vec<&String> = paths
            .unproven
            .iter()
            .filter(|r| r.starts_with("root /data/c"))
            .collect();
        assert_eq!(roots.len(), 1, "{:?}", paths.unproven);

        // Its metadata database ties the root; the state (the default,
        // nothing held there, as on 1.6 to 2.2) only an unchanged config.
        node.kernel.open.borrow_mut().insert(
            10,
            vec![PathBuf::from(
                "/data/c/io.containerd.metadata.v1.bolt/meta.db",
            )],
        );
        let (paths, _) = node.resolve(&node.flags());
        assert_eq!(paths.unproven.len(), 1, "{:?}", paths.unproven);
        assert!(
            paths.unproven[0].starts_with("state /run/containerd could not be tied")
                && paths.unproven[0].contains("changed"),
            "{:?}",
            paths.unproven
        );
        assert!(
            paths.by_config_only.is_empty(),
            "{:?}",
            paths.by_config_only
        );
        // Unchanged: named by the config as nodectl reads it, no more (the
        // root is held).
        node.kernel.started.borrow_mut().clear();
        let (paths, _) = node.resolve(&node.flags());
        assert!(paths.unproven.is_empty(), "{:?}", paths.unproven);
        let by_config: Vec<_> = paths
            .by_config_only
            .iter()
            .map(|t| (t.dir, t.path.clone()))
            .collect();
        assert_eq!(
            by_config,
            [(
                crate::model::DaemonDir::State,
                PathBuf::from("/run/containerd")
            )]
        );
        assert!(
            paths.by_config_only[0]
                .why
                .contains("nothing but its config"),
            "{:?}",
            paths.by_config_only
        );
    }

    #[test]
    fn a_relative_glob_is_read_from_the_working_directory_when_that_gives_the_root_held() {
        let node = Node::new();
        let config = node.file("c.toml", "version = 2\nimports = [\"conf.d/*.toml\"]\n");
        let write = |dir: &str, root: &str| {
            let dir = node.files.path().join(dir).join("conf.d");
            fs::create_dir_all(&dir).unwrap();
            let text = format!("root = \"{root}\"\nstate = \"{root}-state\"\n");
            fs::write(dir.join("a.toml"), text).unwrap();
        };
        // Beside the config, and in the daemon's working directory.
        write("", "/beside");
        write("cwd", "/in-cwd");
        node.kernel
            .cwds
            .borrow_mut()
            .insert(10, node.files.path().join("cwd"));
        daemon_holding(&node, 10, &config, "/in-cwd");
        let (paths, _) = node.resolve(&node.flags());
        assert_eq!(paths.root.path, PathBuf::from("/in-cwd"));
        assert_eq!(paths.root.origin, Origin::Config);
        assert_eq!(paths.state.path, PathBuf::from("/in-cwd-state"));
        assert!(paths.unproven.is_empty(), "{:?}", paths.unproven);
        let note = paths.note.clone().unwrap_or_default();
        assert!(note.contains("before 1.6.29 and 1.7.16"), "{note}");

        // Held beside the config: read as later lines read it, no note.
        node.kernel.open.borrow_mut().insert(
            10,
            vec![PathBuf::from(
                "/beside/io.containerd.metadata.v1.bolt/meta.db",
            )],
        );
        let (paths, _) = node.resolve(&node.flags());
        assert_eq!(paths.state.path, PathBuf::from("/beside-state"));
        assert_eq!(paths.note, None);
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
        node.listens(5, DEFAULT_ADDRESS);
        let (paths, _) = node.resolve(&node.flags());
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
        let (paths, _) = resolve_with(&node.flags(), &default, &node.kernel);
        assert_eq!(paths.root.path, PathBuf::from("/etc-root"));
        assert_eq!(paths.root.origin, Origin::Config);
        assert_eq!(paths.config, Some(default.clone()));

        // Started with its own config: the default file is not what it read.
        node.containerd(42, &format!("-c {} --root /own-root", own.display()));
        let (paths, gaps) = resolve_with(&node.flags(), &default, &node.kernel);
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(paths.config, Some(own));
        assert_eq!(paths.root.path, PathBuf::from("/own-root"));
        assert_eq!(paths.root.origin, Origin::Process);
        assert_eq!(paths.state.path, PathBuf::from("/own-state"));
        assert_eq!(paths.state.origin, Origin::Config);
        assert_eq!(paths.address.path, PathBuf::from(DEFAULT_ADDRESS));
        assert_eq!(paths.address.origin, Origin::Default);
        assert!(paths.unproven.is_empty(), "{:?}", paths.unproven);
    }

    #[test]
    fn a_running_containerd_without_flags_reads_the_default_config_like_containerd() {
        let node = Node::new();
        let default = node.file("default.toml", "root = \"/etc-root\"\n");
        node.containerd(42, "");
        let (paths, _) = resolve_with(&node.flags(), &default, &node.kernel);
        assert_eq!(paths.root.path, PathBuf::from("/etc-root"));
        assert_eq!(paths.root.origin, Origin::Config);
        assert_eq!(paths.process.map(|p| p.pid), Some(42));
    }

    /// `resolve_for_gather`'s paths with the daemon found as gather finds
    /// it: in the process table of a procfs walk.
    fn resolve_then_walk(node: &Node, flags: &PathFlags, default: &Path) -> (Paths, Vec<Gap>) {
        let (mut paths, mut gaps) = resolve_deferring(flags, default, &node.kernel);
        if let Some(lookup) = paths.daemon_lookup.take() {
            fs::write(node.proc_root.path().join("stat"), "btime 1700000000\n").unwrap();
            let scan = crate::sources::proc_scan::scan(node.proc_root.path(), false, &mut gaps);
            daemon_among_with(
                &lookup,
                &scan.processes,
                &mut paths,
                &mut gaps,
                &node.kernel,
            );
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
        let (paths, gaps) = resolve_deferring(&every, &default, &node.kernel);
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
        let (paths, _) = resolve_deferring(&partial, &default, &node.kernel);
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
        let eager = resolve_with(&every, &default, &node.kernel);
        let walked = resolve_then_walk(&node, &every, &default);
        assert_eq!(walked, eager);
        assert_eq!(walked.0.process.as_ref().map(|p| p.pid), Some(10));
        assert_eq!(
            walked
                .0
                .other_containerds
                .iter()
                .map(|o| o.pid)
                .collect::<Vec<_>>(),
            [20]
        );
        // /r and /s are not the daemon's (/ra and the default state).
        assert_eq!(walked.0.unproven.len(), 2, "{:?}", walked.0.unproven);

        // Its socket taken over by one in a container's namespaces: none
        // is used, alike in both ways.
        node.containerd(30, "-a /run/a.sock");
        node.kernel.contained.borrow_mut().push(30);
        let eager = resolve_with(&every, &default, &node.kernel);
        let walked = resolve_then_walk(&node, &every, &default);
        assert_eq!(walked, eager);
        assert_eq!(walked.0.process, None);
        assert!(walked.1[0]
            .error
            .contains("containerd pid 30, which is not the daemon"));
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
        let (paths, gaps) = node.resolve(&node.flags());
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(paths.config, Some(PathBuf::from("/etc/k3s/config.toml")));
        assert_eq!(paths.root.path, PathBuf::from("/seen"));
        assert_eq!(paths.root.origin, Origin::Config);
    }

    #[test]
    fn a_fake_procfs_proves_no_daemon_on_the_live_kernel() {
        // The live kernel: a fake procfs has no namespaces to compare.
        let node = Node::new();
        node.containerd(10, "");
        let (paths, _) = resolve(&node.flags());
        assert_eq!(paths.process, None);
        assert!(paths.other_containerds[0].reason.contains("namespaces"));
    }
}
