//! kubelet's pod directories: `<root>/pods/<uid>`, and the mounts below
//! them. Read as data; nothing here is kubelet's to run or change.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::OFlags;

use crate::model::{
    Gap, KubeletSetting, KubeletView, KubeletWord, Located, Origin, PodDir, PodLogDir, ProcessInfo,
    Source,
};
use crate::read::bounded::{mtime_nanos, read_proc};
use crate::read::listed::{ListedDir, MOVED_AWAY};
use crate::sources::host_view::{open_in_root, HostView};
pub(crate) use crate::sources::kubelet_config::arg_in;
use crate::sources::kubelet_config::KubeletFiles;
use crate::sources::kubelet_runners::{self, Described, Runner};
use crate::sources::{daemon_proof, kubelet_config, kubelet_runtime, mountinfo, pod_resources};

pub(crate) const SOURCE: Source = Source::Kubelet;
/// kubelet's `--root-dir` when it is given none.
pub const DEFAULT_ROOT: &str = "/var/lib/kubelet";
/// kubelet's `podLogsDir` when it is given none: where kuberuntime makes
/// each pod's log directory.
pub const DEFAULT_POD_LOGS: &str = "/var/log/pods";
/// kubelet's `--cgroup-root` when it is given none.
pub const DEFAULT_CGROUP_ROOT: &str = "/";
/// A kubelet's command line is a few KB; one of a process that calls
/// itself kubelet may be anything.
const CMDLINE_LIMIT: u64 = 128 * 1024;

/// The kubelets running on this node that nodectl believes, proven once a
/// look (one process scan, one connection to each one's socket) and used
/// for its root and its cgroup root both; and why one that was believed
/// could not be read (its runner's files), each a gap for the look.
#[derive(Debug, Clone, Default)]
pub struct Running {
    pub kubelets: Vec<RunningKubelet>,
    pub unread: Vec<(PathBuf, String)>,
}

/// A kubelet nodectl believes (see [`not_believed`]): its pid, its own
/// flags (from its command line or its runner's files: see
/// [`kubelet_runners`]), where they were read, and where its files are.
#[derive(Debug, Clone)]
pub struct RunningKubelet {
    pub pid: i32,
    pub args: Vec<String>,
    /// Where `args` were read: `Process`, `K3sConfig` or `KubeliteArgs`.
    pub flags_origin: Origin,
    /// Where its files are: its working directory, and its root when it
    /// runs in another mount namespace than nodectl.
    pub cwd: KubeletFiles,
}

impl RunningKubelet {
    /// Why the directory `path` kubelet names is not the one nodectl sees
    /// at that path, if it is not: kubelet runs in another mount namespace
    /// (nodectl in a DaemonSet pod) and the pod does not mount it there
    /// (its device and inode, through kubelet's root, are not the same).
    pub fn unseen(&self, path: &Path) -> Option<String> {
        let root = self.cwd.root.as_ref()?;
        let view = HostView::Other(root.try_clone().map_err(|err| err.to_string()));
        view.hidden(path).map(|why| {
            format!(
                "kubelet (pid {}) runs in another mount namespace: {why}",
                self.pid
            )
        })
    }
}

/// Where kubelet keeps its pods: `--kubelet-root` when given; else the
/// `--root-dir` of the running kubelet (its default when it gives none),
/// when the kubelets nodectl believes agree on it; else the default.
pub fn root(flag: Option<&Path>, running: &Running) -> Located {
    located(
        flag,
        one_value(&running.kubelets, "--root-dir", arg_in),
        DEFAULT_ROOT,
    )
}

/// Why kubelet's root `root`, found from the running kubelet, is not the
/// directory nodectl sees at that path, if it is not (see
/// [`RunningKubelet::unseen`]). A root given by flag is the user's word.
pub fn root_unseen(root: &Located, running: &Running) -> Option<String> {
    if matches!(root.origin, Origin::Flag | Origin::Default) {
        return None;
    }
    running
        .kubelets
        .iter()
        .find_map(|kubelet| kubelet.unseen(&root.path))
}

/// kubelet's cgroup root (its `cgroupRoot`, where `kubepods` is made):
/// `--kubelet-cgroup-root` when given, else the running kubelet's
/// `--cgroup-root` (found as for [`root`]), else `/`; as a cgroup name,
/// cleaned (see [`clean_cgroup_root`]). With one kubelet believed, that
/// kubelet is returned too: its config files may set the root (when neither
/// flag does) and its other cgroup settings, and [`cgroup_root_configured`]
/// and [`cgroup_settings`] read them (files, so on the source's own thread).
pub fn cgroup_root(flag: Option<&Path>, running: &Running) -> (Located, Option<RunningKubelet>) {
    let kubelets = &running.kubelets;
    // `--cgroup-root=` is a value: kubelet takes "" for `/`, over its files.
    let value = one_value(kubelets, "--cgroup-root", crate::peers::kubelet::flag_value);
    let configured = match kubelets.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    };
    let mut located = located(flag, value, DEFAULT_CGROUP_ROOT);
    located.path = clean_cgroup_root(&located.path);
    (located, configured)
}

/// `root` as `kubelet`'s config files set it, if they do (`cgroupRoot` of
/// its `--config`, then its `--config-dir` drop-ins: see
/// [`kubelet_config`]); `root` unchanged otherwise.
pub fn cgroup_root_configured(
    root: Located,
    kubelet: Option<&RunningKubelet>,
    gaps: &mut Vec<Gap>,
) -> Located {
    let Some(kubelet) = kubelet.filter(|_| root.origin != Origin::Flag) else {
        return root;
    };
    match kubelet_config::setting(
        &kubelet.args,
        &kubelet.cwd,
        "cgroupRoot",
        "--cgroup-root",
        gaps,
    ) {
        Some(kubelet_config::Setting {
            value: serde_json::Value::String(name),
            from: Some(_),
        }) => Located {
            // kubelet takes an empty cgroupRoot for `/`.
            path: clean_cgroup_root(Path::new(&name)),
            origin: Origin::KubeletConfig,
        },
        _ => root,
    }
}

/// Where kubelet makes its pods' log directories: `--kubelet-pod-logs` when
/// given; else the `podLogsDir` of the one kubelet nodectl believes, from
/// its config file or drop-ins (kubelet has no flag for it); else kubelet's
/// default, `/var/log/pods` (origin `process` when that kubelet sets none).
/// With kubelet's root given by flag, a kubelet running with another root
/// is not the one the user named, and its word is not taken.
/// kubelet defaults an empty one and refuses to start with one that is not
/// an absolute, clean, ASCII path (`ValidateKubeletConfiguration`, 1.34 to
/// 1.37): such a value is a file changed since it started, a gap, and the
/// default is taken. Reads files: on the source's own thread.
pub fn pod_logs_dir(
    flag: Option<&Path>,
    root: &Located,
    running: &Running,
    gaps: &mut Vec<Gap>,
) -> Located {
    if let Some(path) = flag {
        return Located {
            path: path.to_path_buf(),
            origin: Origin::Flag,
        };
    }
    let default = |origin| Located {
        path: PathBuf::from(DEFAULT_POD_LOGS),
        origin,
    };
    let [kubelet] = running.kubelets.as_slice() else {
        return default(Origin::Default);
    };
    let its_root = arg_in(&kubelet.args, "--root-dir").unwrap_or_else(|| DEFAULT_ROOT.into());
    if root.origin == Origin::Flag && Path::new(&its_root) != root.path {
        return default(Origin::Default);
    }
    let Some(setting) = kubelet_config::configured(&kubelet.args, &kubelet.cwd, "podLogsDir", gaps)
    else {
        return default(kubelet.flags_origin);
    };
    let from = setting.from.unwrap_or_default();
    match setting.value.as_str() {
        Some("") => default(kubelet.flags_origin),
        Some(dir) if is_clean_absolute(dir) && dir.is_ascii() => Located {
            path: PathBuf::from(dir),
            origin: Origin::KubeletConfig,
        },
        _ => {
            let why = format!(
                "kubelet's podLogsDir {} is not an absolute, clean path: kubelet would not start \
                 with it, so its file changed since; {DEFAULT_POD_LOGS} is read",
                setting.value
            );
            gaps.push(Gap::item(SOURCE, &from, why));
            default(kubelet.flags_origin)
        }
    }
}

/// Whether `path` is absolute and as Go's `filepath.Clean` leaves it (no
/// `.` or `..`, no doubled or trailing `/`).
fn is_clean_absolute(path: &str) -> bool {
    path == "/"
        || (path.starts_with('/')
            && !path.ends_with('/')
            && path[1..]
                .split('/')
                .all(|part| !matches!(part, "" | "." | "..")))
}

/// kubelet's `cgroupDriver` and `cgroupsPerQOS`, as `kubelet`'s command
/// line (origin `process`) or config files (`kubelet_config`) set them, read
/// as [`kubelet_config::setting`] reads them. No driver set is `None`
/// (kubelet's default, `cgroupfs`, is not said: kubelet 1.31 and later take
/// containerd's word over it); `cgroupsPerQOS` unset is kubelet's default,
/// true (origin `process`, or `default` with no kubelet believed). A value
/// kubelet would refuse to start with is a gap, and not taken.
pub fn cgroup_settings(
    kubelet: Option<&RunningKubelet>,
    gaps: &mut Vec<Gap>,
) -> (Option<KubeletSetting<String>>, KubeletSetting<bool>) {
    let Some(kubelet) = kubelet else {
        return (None, KubeletSetting::per_qos_default());
    };
    let (args, cwd) = (&kubelet.args, &kubelet.cwd);
    // Flags come from its command line, or from the files its runner
    // (k3s, kubelite) keeps them in.
    let origin = |from: &Option<PathBuf>| match from {
        Some(_) => Origin::KubeletConfig,
        None => kubelet.flags_origin,
    };
    let refused = |gaps: &mut Vec<Gap>, from: &Option<PathBuf>, why: String| {
        let cmdline = || PathBuf::from(format!("/proc/{}/cmdline", kubelet.pid));
        let at = from.clone().unwrap_or_else(cmdline);
        gaps.push(Gap::item(SOURCE, &at, why));
    };
    let driver = match kubelet_config::setting(args, cwd, "cgroupDriver", "--cgroup-driver", gaps) {
        Some(kubelet_config::Setting {
            value: serde_json::Value::String(name),
            from,
        }) if name == "systemd" || name == "cgroupfs" => Some(KubeletSetting {
            value: name,
            origin: origin(&from),
        }),
        Some(other) => {
            let why = format!(
                "kubelet's cgroupDriver {} is neither systemd nor cgroupfs",
                other.value
            );
            refused(gaps, &other.from, why);
            None
        }
        None => None,
    };
    let unset = KubeletSetting {
        value: true,
        origin: kubelet.flags_origin,
    };
    let per_qos =
        match kubelet_config::setting(args, cwd, "cgroupsPerQOS", "--cgroups-per-qos", gaps) {
            None => unset,
            Some(setting) => match setting.value.as_bool() {
                Some(value) => KubeletSetting {
                    value,
                    origin: origin(&setting.from),
                },
                None => {
                    let why = format!("kubelet's cgroupsPerQOS {} is not a boolean", setting.value);
                    refused(gaps, &setting.from, why);
                    unset
                }
            },
        };
    (driver, per_qos)
}

/// A cgroup root as an absolute cgroup name with no `.` or `..` in it: a
/// `..` takes off the name before it and none climbs above the root, as
/// `path.Clean` (which kubelet's cgroup names go through) reads one. Joined
/// to the cgroup filesystem's path it stays inside it: `/../../etc` is `/etc`
/// below the hierarchy, never the host's.
pub fn clean_cgroup_root(path: &Path) -> PathBuf {
    let mut clean = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(name) => clean.push(name),
            Component::ParentDir => {
                clean.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    clean
}

fn located(
    flag: Option<&Path>,
    running: Option<(Option<String>, Origin)>,
    default: &str,
) -> Located {
    match (flag, running) {
        (Some(path), _) => Located {
            path: path.to_path_buf(),
            origin: Origin::Flag,
        },
        (None, Some((Some(value), origin))) => Located {
            path: PathBuf::from(value),
            origin,
        },
        // The running kubelet's own default.
        (None, Some((None, _))) => Located {
            path: PathBuf::from(default),
            origin: Origin::Process,
        },
        (None, None) => Located {
            path: PathBuf::from(default),
            origin: Origin::Default,
        },
    }
}

/// The value of flag `name` the `kubelets` agree on (`None` inside: none
/// gives it), with where the first read it; `None` when there is no
/// kubelet or they disagree.
fn one_value(
    kubelets: &[RunningKubelet],
    name: &str,
    read: fn(&[String], &str) -> Option<String>,
) -> Option<(Option<String>, Origin)> {
    let mut values: Vec<Option<String>> = kubelets
        .iter()
        .map(|kubelet| read(&kubelet.args, name))
        .collect();
    values.sort();
    values.dedup();
    match values.as_slice() {
        [one] => Some((one.clone(), kubelets[0].flags_origin)),
        // None, or kubelets that disagree: the default, said so by origin.
        _ => None,
    }
}

/// The running kubelets nodectl believes (see [`Running`]).
pub fn running(
    proc_root: &Path,
    processes: &BTreeMap<i32, ProcessInfo>,
    runtime: Option<&Path>,
) -> Running {
    let mut running = Running::default();
    // The name only says which rules to read: the kernel's facts decide
    // (see [`not_believed`]).
    let named: Vec<(&ProcessInfo, Runner)> = processes
        .values()
        .filter(|p| p.is_running())
        .filter_map(|p| Some((p, Runner::of(&p.comm)?)))
        .collect();
    // kubelet starts its helpers (mount, iptables, du) by fork and exec:
    // between the two the child bears kubelet's name, and by the time its
    // command line is read it may be the helper's. Taken for a second
    // kubelet that disagrees, it hid the real one's root (seen in CI, a
    // look just after kubelet started). A runner's child of the same
    // runner is never a runner of its own.
    let runner_pids: HashSet<(i32, Runner)> = named.iter().map(|(p, r)| (p.pid, *r)).collect();
    let candidates: Vec<(&ProcessInfo, Runner)> = named
        .into_iter()
        .filter(|(p, runner)| !runner_pids.contains(&(p.ppid, *runner)))
        .collect();
    if candidates.is_empty() {
        return running;
    }
    let Some(ours) = fs::metadata(proc_root.join("self/ns/mnt"))
        .ok()
        .map(|m| m.ino())
    else {
        return running;
    };
    let host = daemon_proof::host(proc_root);
    for (process, runner) in candidates {
        let facts = daemon_proof::facts(proc_root, process.pid);
        if not_believed(&facts, host.as_ref()).is_some() {
            continue;
        }
        let dir = proc_root.join(process.pid.to_string());
        let Ok(cmdline) = read_proc(&dir.join("cmdline"), CMDLINE_LIMIT) else {
            continue;
        };
        let environ = match runner {
            Runner::Kubelet => Vec::new(),
            _ => read_proc(&dir.join("environ"), CMDLINE_LIMIT)
                .map(|bytes| split_cmdline(&bytes))
                .unwrap_or_default(),
        };
        // In nodectl's own mount namespace its paths are nodectl's; in
        // another they are read through its root.
        let cwd = match facts.namespaces.as_ref().is_ok_and(|ns| ns.mnt == ours) {
            true => KubeletFiles {
                cwd: dir.join("cwd"),
                root: None,
            },
            false => match (fs::read_link(dir.join("cwd")), File::open(dir.join("root"))) {
                (Ok(cwd), Ok(root)) => KubeletFiles {
                    cwd,
                    root: Some(Arc::new(root)),
                },
                (Err(err), _) | (_, Err(err)) => {
                    running
                        .unread
                        .push((dir, format!("kubelet's root or working directory: {err}")));
                    continue;
                }
            },
        };
        let described = Described {
            runner,
            cmdline: split_cmdline(&cmdline),
            environ,
            cwd: cwd.cwd.clone(),
        };
        let (args, flags_origin) =
            match kubelet_runners::kubelet_args(&described, cwd.root.as_deref()) {
                Ok(found) => found,
                Err(why) => {
                    running.unread.push((dir, why));
                    continue;
                }
            };
        let kubelet = RunningKubelet {
            pid: process.pid,
            args,
            flags_origin,
            cwd,
        };
        // kubelet is proven by the kernel's facts above. The socket below
        // its root is a file that a pod with a hostPath there can replace,
        // so it never unproves kubelet: it only decides whether kubelet's
        // pod-resources answer is had ([`pod_resources::ask`] takes the
        // believed pids as the only listeners to believe).
        if runner == Runner::Kubelet {
            // A kubelet whose runtime endpoint is provably another socket
            // than containerd's runs no pod of this CRI: judging its pods
            // here would call each one sandbox-less. k3s's and kubelite's
            // endpoints are set inside them, unread: they stay the node's.
            let elsewhere = runtime.and_then(|ours| kubelet_runtime::other_runtime(&kubelet, ours));
            if elsewhere.is_none() {
                running.kubelets.push(kubelet);
            }
            continue;
        }
        match socket_peer(&kubelet) {
            Ok(peer) if peer.pid == kubelet.pid => running.kubelets.push(kubelet),
            // Another process serves k3s's or kubelite's kubelet socket:
            // whether it runs a kubelet at all cannot be told, and that is
            // said, never taken as "no kubelet".
            Ok(peer) => running.unread.push((
                dir,
                format!(
                    "its kubelet's pod-resources socket is served by pid {}, not by it \
                     (pid {}): whether it runs a kubelet, and where, cannot be told",
                    peer.pid, kubelet.pid
                ),
            )),
            // k3s and kubelite serve it in their own process when they run
            // a kubelet: none listening is one that runs none
            // (`--disable-agent`, which their hidden command line cannot
            // say).
            Err(_) => {}
        }
    }
    running
}

impl Running {
    /// The pids whose pod-resources answer is kubelet's: the kubelets
    /// believed (k3s and kubelite serve their kubelet's in their own
    /// process).
    pub fn pids(&self) -> Vec<i32> {
        self.kubelets.iter().map(|kubelet| kubelet.pid).collect()
    }
}

/// Who listens on `kubelet`'s pod-resources socket, found as kubelet has
/// it (through its root, from another mount namespace).
fn socket_peer(kubelet: &RunningKubelet) -> Result<daemon_proof::Peer, String> {
    let root = arg_in(&kubelet.args, "--root-dir").unwrap_or_else(|| DEFAULT_ROOT.to_string());
    let socket = Path::new(&root).join(pod_resources::SOCKET);
    let Some(kubelet_root) = kubelet.cwd.root.as_deref() else {
        return daemon_proof::serving(&socket);
    };
    let (Some(dir), Some(name)) = (socket.parent(), socket.file_name()) else {
        return Err(format!("{} names no file", socket.display()));
    };
    let dir = open_in_root(kubelet_root, dir, OFlags::PATH | OFlags::DIRECTORY)
        .map_err(|err| format!("{}: {err}", dir.display()))?;
    daemon_proof::serving_at(&dir, name)
}

/// Why a process named as kubelet runs is not believed on its flags, if it
/// is not. Anyone can name a process kubelet (a setuid program run
/// through a symlink of that name takes it as its `comm`), so it is proven
/// as containerd is ([`daemon_proof::disqualified`]): in the host's mount
/// and pid namespaces, running as root (real and effective uid: a setuid
/// program a user started has the user's real uid), from a root-owned
/// executable no one else may write. nodectl itself may run in another
/// mount namespace (a DaemonSet pod): then kubelet's paths are read
/// through its root (see [`KubeletFiles`]). Pure.
fn not_believed(
    facts: &daemon_proof::DaemonFacts,
    host: Option<&daemon_proof::Host>,
) -> Option<String> {
    daemon_proof::disqualified(facts, host)
}

/// A NUL-separated command line's arguments.
fn split_cmdline(cmdline: &[u8]) -> Vec<String> {
    cmdline
        .split(|&b| b == 0)
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect()
}

/// The value of `name` (`--name=value` or `--name value`) in a
/// NUL-separated command line; the last one given wins, as in kubelet.
#[cfg(test)]
fn arg_of(cmdline: &[u8], name: &str) -> Option<String> {
    arg_in(&split_cmdline(cmdline), name)
}

/// Every directory of `<root>/pods`, with the mounts `mountinfo` has below
/// each. `None` when the default root has no pods directory (no kubelet
/// on this node); a root found otherwise that cannot be read is a gap.
pub fn read(
    root: Located,
    pod_logs: PodLogsAt,
    table: Option<&mountinfo::Table>,
    mountinfo_file: &Path,
    gaps: &mut Vec<Gap>,
) -> Option<KubeletView> {
    let pods = root.path.join("pods");
    // Its identity before it is listed: a pod directory gone when looked
    // at was removed only while `pods` is still this directory.
    let entries = match ListedDir::at(&pods).and_then(|listed| Ok((listed, fs::read_dir(&pods)?))) {
        Ok(entries) => entries,
        Err(err) if err.kind() == ErrorKind::NotFound && root.origin == Origin::Default => {
            return None
        }
        Err(err) => {
            gaps.push(Gap::source(SOURCE, &pods, err));
            return None;
        }
    };
    let (listed, entries) = entries;
    let names = entries.filter_map(|entry| match entry {
        Ok(entry) => Some(entry.file_name()),
        Err(err) => {
            gaps.push(Gap::item(SOURCE, &pods, err.to_string()));
            None
        }
    });
    let names: Vec<OsString> = names.collect();
    let mut pod_dirs = look_at(&listed, names, gaps);
    pod_dirs.sort_by(|a, b| a.path.cmp(&b.path));
    // No directory for a mount to belong to: the table (megabytes on a
    // node of thousands of mounts) is not read.
    if pod_dirs.is_empty() {
        return Some(KubeletView {
            root,
            pod_dirs,
            pod_logs: pod_logs.read(gaps),
            pod_logs_dir: Some(pod_logs.dir),
            word: KubeletWord::default(),
        });
    }
    let mounts = mountinfo::below_in(table, mountinfo_file, &[pods.as_path()], gaps);
    // Each mount goes to the directory its first component below `pods`
    // names: one lookup, where comparing it with every directory cost
    // mounts × directories path comparisons (milliseconds at 250 pods).
    let by_name: HashMap<OsString, usize> = pod_dirs
        .iter()
        .enumerate()
        .filter_map(|(index, dir)| Some((dir.path.file_name()?.to_os_string(), index)))
        .collect();
    for mount in &mounts {
        let point = mount.path_as_given();
        let Some(name) = pod_dir_name(point, &pods) else {
            continue;
        };
        if let Some(&index) = by_name.get(name) {
            pod_dirs[index]
                .mounts
                .push(point.to_string_lossy().into_owned());
        }
    }
    Some(KubeletView {
        root,
        pod_logs: pod_logs.read(gaps),
        pod_logs_dir: Some(pod_logs.dir),
        pod_dirs,
        word: KubeletWord::default(),
    })
}

/// kubelet's `podLogsDir` (see [`pod_logs_dir`]), and why nodectl does not
/// see the directory kubelet has at that path, if it does not.
pub struct PodLogsAt {
    pub dir: Located,
    pub unseen: Option<String>,
}

impl PodLogsAt {
    /// `dir` as the running kubelets name it, with why it is not theirs
    /// in nodectl's view when not (see [`RunningKubelet::unseen`]); the
    /// user's flag and the default of no kubelet are taken as they are.
    pub fn of(dir: Located, running: &Running) -> PodLogsAt {
        let unseen = match dir.origin {
            Origin::Flag | Origin::Default => None,
            _ => running
                .kubelets
                .iter()
                .find_map(|kubelet| kubelet.unseen(&dir.path)),
        };
        PodLogsAt { dir, unseen }
    }

    fn read(&self, gaps: &mut Vec<Gap>) -> Option<Vec<PodLogDir>> {
        if let Some(why) = &self.unseen {
            gaps.push(Gap::item(SOURCE, &self.dir.path, why.clone()));
            return None;
        }
        read_pod_logs(&self.dir.path, gaps)
    }
}

/// Every pod log directory in `dir` (see [`PodLogDir`]); none when there
/// is no such directory (no pod was ever started there), `None` (a gap)
/// when it cannot be read: then no pod can be tied to kubelet by it.
fn read_pod_logs(dir: &Path, gaps: &mut Vec<Gap>) -> Option<Vec<PodLogDir>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == ErrorKind::NotFound => return Some(Vec::new()),
        Err(err) => {
            gaps.push(Gap::item(SOURCE, dir, err.to_string()));
            return None;
        }
    };
    let mut logs = Vec::new();
    for entry in entries.flatten() {
        let Ok(metadata) = fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if !metadata.is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let modified_at = mtime_nanos(&metadata).unwrap_or_default();
        logs.extend(PodLogDir::parse(&name, modified_at));
    }
    logs.sort_by(|a, b| a.uid.cmp(&b.uid));
    Some(logs)
}

/// The directories `names` of `listed` (`<root>/pods`), never through a
/// symlink. One gone when looked at was removed meanwhile, unless `pods`
/// went with it (renamed, unmounted): then `pods` is a gap for the whole
/// source.
fn look_at(listed: &ListedDir, names: Vec<OsString>, gaps: &mut Vec<Gap>) -> Vec<PodDir> {
    let pods = listed.path();
    let mut pod_dirs = Vec::new();
    for name in names {
        let path = pods.join(&name);
        // Never through a symlink: kubelet makes directories here.
        let metadata = match fs::symlink_metadata(&path) {
            Ok(metadata) if metadata.is_dir() => metadata,
            Ok(_) => continue,
            Err(err) if err.kind() == ErrorKind::NotFound && !listed.still_there() => {
                gaps.push(Gap::source(SOURCE, pods, MOVED_AWAY));
                break;
            }
            Err(err) if err.kind() == ErrorKind::NotFound => continue,
            Err(err) => {
                gaps.push(Gap::item(SOURCE, &path, err.to_string()));
                continue;
            }
        };
        pod_dirs.push(PodDir {
            uid: name.to_string_lossy().into_owned(),
            modified_at: mtime_nanos(&metadata).unwrap_or_default(),
            path,
            mounts: Vec::new(),
        });
    }
    pod_dirs
}

/// The name of the directory of `pods` that `point` is in (or is), if any.
fn pod_dir_name<'a>(point: &'a Path, pods: &Path) -> Option<&'a OsStr> {
    match point.strip_prefix(pods).ok()?.components().next()? {
        Component::Normal(name) => Some(name),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kubelet believed, run with `args` from the directory `cwd`.
    fn kubelet_in(cwd: &Path, args: &[&str]) -> RunningKubelet {
        RunningKubelet {
            pid: 1,
            args: args.iter().map(|a| a.to_string()).collect(),
            flags_origin: Origin::Process,
            cwd: KubeletFiles {
                cwd: cwd.to_path_buf(),
                root: None,
            },
        }
    }

    /// A pod log directory given by flag.
    fn logs_at(path: &Path) -> PodLogsAt {
        PodLogsAt {
            dir: Located {
                path: path.to_path_buf(),
                origin: Origin::Flag,
            },
            unseen: None,
        }
    }

    #[test]
    fn flags_are_read_in_either_spelling() {
        let cmdline = b"/usr/bin/kubelet\0--root-dir=/data/kubelet\0--cgroup-root\0/k\0";
        assert_eq!(
            arg_of(cmdline, "--root-dir").as_deref(),
            Some("/data/kubelet")
        );
        assert_eq!(arg_of(cmdline, "--cgroup-root").as_deref(), Some("/k"));
        assert_eq!(arg_of(b"kubelet\0--v=2\0", "--root-dir"), None);
        assert_eq!(arg_of(b"kubelet\0--root-dir\0", "--root-dir"), None);
    }

    /// A procfs of `kubelets` (pid, mount namespace, command line) beside
    /// nodectl's own mount namespace, `mnt:[1]`.
    fn proc_with(
        kubelets: &[(i32, &str, &[u8])],
    ) -> (tempfile::TempDir, BTreeMap<i32, ProcessInfo>) {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("self/ns")).unwrap();
        std::os::unix::fs::symlink("mnt:[1]", dir.path().join("self/ns/mnt")).unwrap();
        let mut processes = BTreeMap::new();
        for &(pid, mnt, cmdline) in kubelets {
            let ns = dir.path().join(format!("{pid}/ns"));
            fs::create_dir_all(&ns).unwrap();
            std::os::unix::fs::symlink(mnt, ns.join("mnt")).unwrap();
            fs::write(dir.path().join(format!("{pid}/cmdline")), cmdline).unwrap();
            let mut process = crate::model::fixtures::process(pid, 'S', 0);
            process.comm = "kubelet".to_string();
            processes.insert(pid, process);
        }
        (dir, processes)
    }

    #[test]
    fn a_kubelet_is_believed_on_the_kernels_facts_never_its_name() {
        let host = daemon_proof::Host {
            described: "PID 1",
            namespaces: crate::model::NamespaceIds {
                user: 1,
                pid: 2,
                mnt: 3,
            },
            uid: 0,
        };
        let kubelet = || daemon_proof::DaemonFacts {
            namespaces: Ok(host.namespaces),
            executable: Ok(daemon_proof::Executable {
                regular: true,
                uid: 0,
                mode: 0o755,
            }),
            uids: Ok(vec![0; 4]),
        };
        assert_eq!(not_believed(&kubelet(), Some(&host)), None);
        let with = |change: fn(&mut daemon_proof::DaemonFacts)| {
            let mut facts = kubelet();
            change(&mut facts);
            not_believed(&facts, Some(&host)).unwrap_or_default()
        };
        // `su` run by a user through a symlink named kubelet: setuid root,
        // its real uid the user's.
        assert!(with(|f| f.uids = Ok(vec![1001, 0, 0, 0])).contains("uid 1001"));
        // A binary anyone may write.
        assert!(with(|f| f.executable.as_mut().unwrap().mode = 0o777).contains("writable"));
        // A container's kubelet (kind, k3d): its own namespaces.
        assert!(with(|f| f.namespaces.as_mut().unwrap().pid = 9).contains("pid namespace"));
    }

    /// A kubelet in a fake procfs is files, not the kernel's facts.
    #[test]
    fn a_fake_procfs_proves_no_kubelet() {
        let (proc_root, processes) = proc_with(&[(7, "mnt:[1]", b"kubelet\0--root-dir=/evil\0")]);
        let found = root(None, &running(proc_root.path(), &processes, None));
        assert_eq!(
            (found.path.as_path(), found.origin),
            (Path::new(DEFAULT_ROOT), Origin::Default)
        );
        // The flag wins.
        let flag = Path::new("/given");
        assert_eq!(
            root(Some(flag), &running(proc_root.path(), &processes, None)).origin,
            Origin::Flag
        );
    }

    /// A live process named kubelet run as `uid`: a script of that name
    /// (its `comm` is kubelet, its executable root's `/bin/sh`) with
    /// `--root-dir=<root_dir>` and a `--config` setting its cgroup root, or
    /// with `binary` a copy of `sleep` named kubelet that anyone may write.
    /// (The process, its pid, its directory.)
    fn spawn_kubelet(
        uid: u32,
        binary: bool,
        root_dir: &str,
    ) -> (std::process::Child, i32, tempfile::TempDir) {
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let kubelet = dir.path().join("kubelet");
        let mut command = match binary {
            // A copy of sleep anyone may write.
            true => {
                fs::copy("/bin/sleep", &kubelet).unwrap();
                fs::set_permissions(&kubelet, fs::Permissions::from_mode(0o777)).unwrap();
                let mut command = std::process::Command::new(&kubelet);
                command.arg("60");
                command
            }
            false => {
                fs::write(&kubelet, "#!/bin/sh\nsleep 60\n").unwrap();
                fs::set_permissions(&kubelet, fs::Permissions::from_mode(0o755)).unwrap();
                // Its config file named relative to its working directory,
                // as kubelet takes it.
                fs::write(dir.path().join("config.yaml"), "cgroupRoot: /from-config\n").unwrap();
                let mut command = std::process::Command::new(&kubelet);
                command.args([&format!("--root-dir={root_dir}"), "--config=config.yaml"]);
                command.current_dir(dir.path());
                command
            }
        };
        command.uid(uid);
        let (child, pid) = spawn_group(command, "kubelet");
        (child, pid, dir)
    }

    /// Starts `command` in a process group of its own (ended whole by
    /// [`end_kubelet`]: a script's `sleep` would outlive it, holding the
    /// test's output), and waits until its `comm` is `comm`.
    fn spawn_group(mut command: std::process::Command, comm: &str) -> (std::process::Child, i32) {
        use std::os::unix::process::CommandExt;
        let child = command
            .process_group(0)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let comm_file = Path::new("/proc").join(format!("{pid}/comm"));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while fs::read_to_string(&comm_file).is_ok_and(|c| c.trim() != comm)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        (child, pid)
    }

    /// A script named `name` (so its `comm`) in a directory of its own,
    /// root's and not writable by others, that sleeps: a stand-in for a
    /// program kubelet runs as.
    fn script_named(name: &str) -> (tempfile::TempDir, PathBuf) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let script = dir.path().join(name);
        fs::write(&script, "#!/bin/sh\nsleep 60\n").unwrap();
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
        (dir, script)
    }

    /// Whether the test may run (root), failing in CI where it must.
    fn runs_as_root(test: &str) -> bool {
        if nix::unistd::geteuid().is_root() {
            return true;
        }
        let why = "needs root to run a process as root";
        let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(!in_ci, "{why} (CI runs the tests as root)");
        eprintln!("SKIPPED {test}: {why}");
        false
    }

    /// The root and cgroup root nodectl takes from the live processes
    /// `processes` (under procfs `proc_root`), proven once, and the gap
    /// its root would be, if any.
    fn roots_of(
        proc_root: &Path,
        processes: &BTreeMap<i32, ProcessInfo>,
    ) -> (Located, Located, Option<String>) {
        let kubelets = running(proc_root, processes, None);
        let found = root(None, &kubelets);
        let unseen = root_unseen(&found, &kubelets);
        let (cgroup_root, configured) = cgroup_root(None, &kubelets);
        let mut gaps = Vec::new();
        let cgroup_root = cgroup_root_configured(cgroup_root, configured.as_ref(), &mut gaps);
        assert!(gaps.is_empty(), "{gaps:?}");
        (found, cgroup_root, unseen)
    }

    fn named(pid: i32, comm: &str) -> BTreeMap<i32, ProcessInfo> {
        let mut processes = with_kubelet(pid);
        processes.get_mut(&pid).unwrap().comm = comm.to_string();
        processes
    }

    /// A pod-resources socket bound at `<root_dir>/pod-resources/kubelet.sock`,
    /// listened on by whoever [`serve_in_child`] makes listen: the kernel
    /// records the listener's credentials at `listen`.
    fn bound_socket(root_dir: &Path) -> std::os::fd::OwnedFd {
        use nix::sys::socket::{bind, socket, AddressFamily, SockFlag, SockType, UnixAddr};
        let path = root_dir.join(pod_resources::SOCKET);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let fd = socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .unwrap();
        bind(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            &UnixAddr::new(&path).unwrap(),
        )
        .unwrap();
        fd
    }

    /// `command`'s process listens on `socket` (before it execs: the same
    /// pid), as k3s and kubelite serve kubelet's socket in their own.
    fn serve_in_child(command: &mut std::process::Command, socket: &std::os::fd::OwnedFd) {
        use std::os::unix::process::CommandExt;
        let fd = std::os::fd::AsRawFd::as_raw_fd(socket);
        // SAFETY: listen(2) is async-signal-safe.
        unsafe {
            command.pre_exec(move || match nix::libc::listen(fd, 16) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            });
        }
    }

    #[test]
    fn kubelet_inside_k3s_is_read_from_k3s_config_and_its_drop_ins() {
        if !runs_as_root("kubelet_inside_k3s_is_read_from_k3s_config_and_its_drop_ins") {
            return;
        }
        let (dir, script) = script_named("k3s-server");
        let d = dir.path();
        let data = d.join("data");
        let kubelet_root = d.join("k3s-kubelet");
        // k3s's own defaults, as it writes them to kubelet's config-dir.
        let drop_ins = data.join("agent/etc/kubelet.conf.d");
        fs::create_dir_all(&drop_ins).unwrap();
        fs::write(drop_ins.join("00-k3s-defaults.conf"), "cgroupRoot: /k3s\n").unwrap();
        fs::write(
            d.join("config.yaml"),
            format!(
                "data-dir: {}\nkubelet-arg:\n  - root-dir={}\n",
                data.display(),
                kubelet_root.display()
            ),
        )
        .unwrap();
        let k3s = |socket: Option<&std::os::fd::OwnedFd>| {
            let mut command = std::process::Command::new(&script);
            // What `ps` shows of k3s: its flags hidden.
            command.arg("server");
            command.env("K3S_CONFIG_FILE", d.join("config.yaml"));
            if let Some(socket) = socket {
                serve_in_child(&mut command, socket);
            }
            let (child, pid) = spawn_group(command, "k3s-server");
            let found = roots_of(Path::new("/proc"), &named(pid, "k3s-server"));
            end_kubelet(child);
            found
        };
        // Serving no kubelet socket (`--disable-agent`): no kubelet in it.
        let (found, cgroup_root, _) = k3s(None);
        assert_eq!(found.origin, Origin::Default, "{found:?}");
        assert_eq!(cgroup_root.origin, Origin::Default, "{cgroup_root:?}");
        let socket = bound_socket(&kubelet_root);
        let (found, cgroup_root, unseen) = k3s(Some(&socket));
        assert_eq!(
            (found.path.as_path(), found.origin),
            (kubelet_root.as_path(), Origin::K3sConfig)
        );
        assert_eq!(
            (cgroup_root.path.as_path(), cgroup_root.origin),
            (Path::new("/k3s"), Origin::KubeletConfig)
        );
        assert_eq!(unseen, None);
        // Its kubelet's socket served by another process (this test, as a
        // pod with a hostPath there could): no kubelet is taken from k3s,
        // and that is said, never read as "k3s runs none".
        drop(socket);
        fs::remove_file(kubelet_root.join(pod_resources::SOCKET)).unwrap();
        let foreign =
            std::os::unix::net::UnixListener::bind(kubelet_root.join(pod_resources::SOCKET))
                .unwrap();
        let mut command = std::process::Command::new(&script);
        command.arg("server");
        command.env("K3S_CONFIG_FILE", d.join("config.yaml"));
        let (child, pid) = spawn_group(command, "k3s-server");
        let believed = running(Path::new("/proc"), &named(pid, "k3s-server"), None);
        end_kubelet(child);
        drop(foreign);
        assert!(believed.kubelets.is_empty(), "{:?}", believed.kubelets);
        let said: Vec<&str> = believed
            .unread
            .iter()
            .map(|(_, why)| why.as_str())
            .collect();
        let expected = format!(
            "served by pid {}, not by it (pid {pid})",
            std::process::id()
        );
        assert!(
            matches!(said.as_slice(), [one] if one.contains(&expected)),
            "{said:?}"
        );
    }

    #[test]
    fn kubelet_inside_kubelite_is_read_from_its_args_file_with_its_environment() {
        if !runs_as_root("kubelet_inside_kubelite_is_read_from_its_args_file_with_its_environment")
        {
            return;
        }
        let (dir, script) = script_named("kubelite");
        let args = dir.path().join("args/kubelet");
        fs::create_dir_all(args.parent().unwrap()).unwrap();
        fs::write(
            &args,
            "# microk8s\n--root-dir=${SNAP_COMMON}/var/lib/kubelet\n--cgroup-root=/micro\n",
        )
        .unwrap();
        let common = dir.path().join("common");
        let kubelet_root = common.join("var/lib/kubelet");
        let socket = bound_socket(&kubelet_root);
        let mut command = std::process::Command::new(&script);
        command.arg(format!("--kubelet-args-file={}", args.display()));
        command.env("SNAP_COMMON", &common);
        serve_in_child(&mut command, &socket);
        let (child, pid) = spawn_group(command, "kubelite");
        let (found, cgroup_root, _) = roots_of(Path::new("/proc"), &named(pid, "kubelite"));
        // Its args file gone: why, for the look's gaps, and no guess.
        fs::remove_file(&args).unwrap();
        let unread = running(Path::new("/proc"), &named(pid, "kubelite"), None);
        end_kubelet(child);
        assert!(unread.kubelets.is_empty(), "{unread:?}");
        assert_eq!(unread.unread.len(), 1, "{unread:?}");
        assert!(
            unread.unread[0].1.contains("kubelite's kubelet args file"),
            "{unread:?}"
        );
        assert_eq!(
            (found.path.as_path(), found.origin),
            (kubelet_root.as_path(), Origin::KubeliteArgs)
        );
        assert_eq!(
            (cgroup_root.path.as_path(), cgroup_root.origin),
            (Path::new("/micro"), Origin::KubeliteArgs)
        );
    }

    #[test]
    fn a_kubelet_in_another_mount_namespace_is_read_through_its_root() {
        if !runs_as_root("a_kubelet_in_another_mount_namespace_is_read_through_its_root") {
            return;
        }
        // The "host": a mount namespace of its own where kubelet runs, its
        // root-dir a tmpfs there holding its config file. nodectl (this
        // test) stands beside it as a DaemonSet pod does: the same pid
        // namespace, another mount namespace, the directory at that path
        // not kubelet's.
        let (dir, script) = script_named("kubelet");
        let kubelet_root = dir.path().join("kubelet-root");
        fs::create_dir(&kubelet_root).unwrap();
        let shown = kubelet_root.display();
        let mut command = std::process::Command::new("unshare");
        command.args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            &format!(
                "mount -t tmpfs tmpfs {shown} && printf 'cgroupRoot: /inside\\n' > {shown}/config.yaml \
                 && exec {} --root-dir={shown} --config={shown}/config.yaml",
                script.display()
            ),
        ]);
        let (child, pid) = spawn_group(command, "kubelet");
        // procfs as nodectl would have it there: PID 1 (the host's init)
        // is the kubelet's namespace's, `self` nodectl's.
        let proc_root = tempfile::tempdir().unwrap();
        let link = |name: &str, pid: u32| {
            std::os::unix::fs::symlink(format!("/proc/{pid}"), proc_root.path().join(name)).unwrap()
        };
        link("1", pid as u32);
        link(&pid.to_string(), pid as u32);
        link("self", std::process::id());
        let (found, cgroup_root, unseen) = roots_of(proc_root.path(), &with_kubelet(pid));
        // Its socket, found as kubelet has it (in its tmpfs, which nodectl
        // does not see), served by another process (this test): kubelet's
        // facts stay its own (only its pod-resources answer is refused).
        let theirs = Path::new(&format!("/proc/{pid}/root")).join(
            kubelet_root
                .join(pod_resources::SOCKET)
                .strip_prefix("/")
                .unwrap(),
        );
        fs::create_dir_all(theirs.parent().unwrap()).unwrap();
        let listener = std::os::unix::net::UnixListener::bind(&theirs).unwrap();
        let (served_by_another, _, _) = roots_of(proc_root.path(), &with_kubelet(pid));
        drop(listener);
        end_kubelet(child);
        assert_eq!(served_by_another, found);
        assert_eq!(
            (found.path.as_path(), found.origin),
            (kubelet_root.as_path(), Origin::Process)
        );
        // Its config, in its tmpfs: read through its root.
        assert_eq!(
            (cgroup_root.path.as_path(), cgroup_root.origin),
            (Path::new("/inside"), Origin::KubeletConfig)
        );
        // Its root-dir is not the directory nodectl sees there: a gap.
        let why = unseen.expect("kubelet's root-dir is not nodectl's");
        assert!(why.contains("another device or inode"), "{why}");
    }

    /// Ends a kubelet [`spawn_kubelet`] started, its whole process group.
    fn end_kubelet(mut child: std::process::Child) {
        let group = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = child.wait();
    }

    /// The process table nodectl would have with the kubelet `pid` in it.
    fn with_kubelet(pid: i32) -> BTreeMap<i32, ProcessInfo> {
        let mut process = crate::model::fixtures::process(pid, 'S', 0);
        process.comm = "kubelet".to_string();
        BTreeMap::from([(pid, process)])
    }

    /// What nodectl takes from a live kubelet (see [`spawn_kubelet`], with
    /// `--root-dir=/data/k`): its root, its cgroup root.
    fn live_kubelet(uid: u32, binary: bool) -> (Located, Located) {
        let (child, pid, _dir) = spawn_kubelet(uid, binary, "/data/k");
        let processes = with_kubelet(pid);
        // Proven once, used for both.
        let kubelets = running(Path::new("/proc"), &processes, None);
        let found = root(None, &kubelets);
        let (cgroup_root, configured) = cgroup_root(None, &kubelets);
        let mut gaps = Vec::new();
        let cgroup_root = cgroup_root_configured(cgroup_root, configured.as_ref(), &mut gaps);
        end_kubelet(child);
        (found, cgroup_root)
    }

    /// A pod with a writable hostPath of `<kubelet root>/pod-resources`
    /// can put its own listener at kubelet's socket: kubelet stays
    /// believed (its root, its cgroup root), and only its pod-resources
    /// answer is refused, said why.
    #[test]
    fn a_kubelet_whose_socket_another_process_serves_keeps_its_facts_and_loses_its_word() {
        if !nix::unistd::geteuid().is_root() {
            let why = "needs root to run a process as root";
            let in_ci =
                std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
            assert!(!in_ci, "{why} (CI runs the tests as root)");
            eprintln!("SKIPPED a_kubelet_whose_socket_another_process_serves_keeps_its_facts_and_loses_its_word: {why}");
            return;
        }
        let root_dir = tempfile::tempdir().unwrap();
        let shown = root_dir.path().to_str().unwrap().to_string();
        let (child, pid, _dir) = spawn_kubelet(0, false, &shown);
        let processes = with_kubelet(pid);
        let proc_root = Path::new("/proc");
        // No socket at its root: its flags are believed.
        let found = root(None, &running(proc_root, &processes, None));
        assert_eq!(
            (found.path.as_path(), found.origin),
            (root_dir.path(), Origin::Process)
        );
        // The socket there served by another process (this test, as a
        // tenant's listener would): kubelet's root is still its own...
        let socket = root_dir.path().join(pod_resources::SOCKET);
        fs::create_dir_all(socket.parent().unwrap()).unwrap();
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let believed = running(proc_root, &processes, None);
        let found = root(None, &believed);
        assert_eq!(
            (found.path.as_path(), found.origin),
            (root_dir.path(), Origin::Process)
        );
        assert_eq!(believed.pids(), vec![pid]);
        // ...and the answer at its socket is not taken as kubelet's.
        let mut gaps = Vec::new();
        let word = pod_resources::ask(
            root_dir.path(),
            proc_root,
            &believed.pids(),
            std::time::Duration::from_secs(1),
            &mut gaps,
        );
        assert_eq!(gaps.len(), 1, "a listener not believed is a gap: {gaps:?}");
        let crate::model::KubeletWord::Unavailable { why } = word else {
            panic!("a foreign listener's answer was taken: {word:?}");
        };
        let ours = std::process::id();
        assert!(
            why.contains(&format!(
                "pid {ours} serves it, not the kubelet running (pid {pid})"
            )),
            "{why}"
        );
        drop(listener);
        end_kubelet(child);
    }

    #[test]
    fn a_running_kubelet_is_believed_only_as_root_from_roots_binary() {
        if !nix::unistd::geteuid().is_root() {
            let why = "needs root to run a process as root and as another user";
            let in_ci =
                std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
            assert!(!in_ci, "{why} (CI runs the tests as root)");
            eprintln!(
                "SKIPPED a_running_kubelet_is_believed_only_as_root_from_roots_binary: {why}"
            );
            return;
        }
        let (found, cgroup_root) = live_kubelet(0, false);
        assert_eq!(
            (found.path.as_path(), found.origin),
            (Path::new("/data/k"), Origin::Process)
        );
        // Its config file, found from its own working directory.
        assert_eq!(
            (cgroup_root.path.as_path(), cgroup_root.origin),
            (Path::new("/from-config"), Origin::KubeletConfig)
        );
        // Run by another user: not believed, nor its config.
        let (found, cgroup_root) = live_kubelet(65534, false);
        assert_eq!(found.origin, Origin::Default, "{found:?}");
        assert_eq!(cgroup_root.origin, Origin::Default, "{cgroup_root:?}");
        // A binary anyone may write, run by root: not believed either.
        let (found, _) = live_kubelet(0, true);
        assert_eq!(found.origin, Origin::Default, "{found:?}");
    }

    #[test]
    fn a_kubelets_child_between_fork_and_exec_is_no_second_kubelet() {
        if !runs_as_root("a_kubelets_child_between_fork_and_exec_is_no_second_kubelet") {
            return;
        }
        let (parent, pid, _dir) = spawn_kubelet(0, false, "/data/k");
        // Its child, named kubelet, whose command line is already the
        // helper's (here: another root, or none).
        let (helper, helper_pid, _helper_dir) = spawn_kubelet(0, false, "/data/helper");
        let mut processes = with_kubelet(pid);
        let mut child = crate::model::fixtures::process(helper_pid, 'S', 0);
        child.comm = "kubelet".to_string();
        child.ppid = pid;
        processes.insert(helper_pid, child);
        let kubelets = running(Path::new("/proc"), &processes, None);
        assert_eq!(kubelets.pids(), vec![pid]);
        let found = root(None, &kubelets);
        assert_eq!(
            (found.path.as_path(), found.origin),
            (Path::new("/data/k"), Origin::Process)
        );
        end_kubelet(helper);
        end_kubelet(parent);
    }

    #[test]
    fn a_kubelet_of_another_runtime_is_not_this_containerds() {
        if !runs_as_root("a_kubelet_of_another_runtime_is_not_this_containerds") {
            return;
        }
        let (child, pid, dir) = spawn_kubelet(0, false, "/data/k");
        // Its config (read from its working directory) names its runtime.
        let theirs = dir.path().join("runtime.sock");
        let ours = dir.path().join("containerd.sock");
        fs::write(
            dir.path().join("config.yaml"),
            format!("containerRuntimeEndpoint: unix://{}\n", theirs.display()),
        )
        .unwrap();
        let _theirs = std::os::unix::net::UnixListener::bind(&theirs).unwrap();
        let _ours = std::os::unix::net::UnixListener::bind(&ours).unwrap();
        let processes = with_kubelet(pid);
        let proc_root = Path::new("/proc");
        let pids = |runtime: &Path| running(proc_root, &processes, Some(runtime)).pids();
        assert_eq!(pids(&ours), Vec::<i32>::new(), "another runtime's kubelet");
        assert_eq!(
            pids(&theirs),
            vec![pid],
            "the kubelet of the socket it names"
        );
        // Its root is then not taken from it.
        let found = root(None, &running(proc_root, &processes, Some(&ours)));
        assert_eq!(found.origin, Origin::Default, "{found:?}");
        end_kubelet(child);
    }

    #[test]
    fn a_cgroup_root_never_climbs_out_of_the_cgroup_filesystem() {
        for (given, clean) in [
            ("/", "/"),
            ("", "/"),
            ("/kube", "/kube"),
            ("kube/./nodes/", "/kube/nodes"),
            ("/../../../etc", "/etc"),
            ("/a/../../b", "/b"),
            ("/a/b/..", "/a"),
        ] {
            assert_eq!(
                clean_cgroup_root(Path::new(given)),
                Path::new(clean),
                "{given}"
            );
        }
        let hierarchy = Path::new("/sys/fs/cgroup");
        let root = clean_cgroup_root(Path::new("/../../../tmp/victim"));
        let joined = hierarchy.join(root.strip_prefix("/").unwrap());
        assert!(joined.starts_with(hierarchy), "{}", joined.display());
        // The flag is cleaned too.
        let (proc_root, processes) = proc_with(&[]);
        let (found, _) = cgroup_root(
            Some(Path::new("/x/../../y")),
            &running(proc_root.path(), &processes, None),
        );
        assert_eq!(found.path, Path::new("/y"));
    }

    #[test]
    fn a_cgroup_root_from_kubelets_config_file_says_so_and_is_cleaned() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("config.yaml"),
            "cgroupRoot: /custom/../../k\n",
        )
        .unwrap();
        let default = Located {
            path: PathBuf::from(DEFAULT_CGROUP_ROOT),
            origin: Origin::Process,
        };
        let kubelet = |args: &[&str]| kubelet_in(dir.path(), args);
        let mut gaps = Vec::new();
        let configured = kubelet(&["kubelet", "--config=config.yaml"]);
        let found = cgroup_root_configured(default.clone(), Some(&configured), &mut gaps);
        assert_eq!(
            (found.path.as_path(), found.origin),
            (Path::new("/k"), Origin::KubeletConfig)
        );
        // No config file: kubelet's default, from the process.
        let bare = kubelet(&["kubelet"]);
        assert_eq!(
            cgroup_root_configured(default.clone(), Some(&bare), &mut gaps),
            default
        );
        assert!(gaps.is_empty(), "{gaps:?}");
    }

    #[test]
    fn pod_logs_are_where_kubelets_config_puts_them() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| fs::write(dir.path().join(name), text).unwrap();
        write("config.yaml", "podLogsDir: /data/pod-logs\n");
        fs::create_dir(dir.path().join("conf.d")).unwrap();
        let running = |args: &[&str]| Running {
            kubelets: vec![kubelet_in(dir.path(), args)],
            unread: Vec::new(),
        };
        let found = |flag: Option<&str>, args: &[&str], gaps: &mut Vec<Gap>| {
            let root = root(None, &running(args));
            let at = pod_logs_dir(flag.map(Path::new), &root, &running(args), gaps);
            (at.path.display().to_string(), at.origin)
        };
        let mut gaps = Vec::new();
        let config = ["kubelet", "--config=config.yaml", "--config-dir=conf.d"];
        assert_eq!(
            found(None, &config, &mut gaps),
            ("/data/pod-logs".into(), Origin::KubeletConfig)
        );
        // A drop-in (a file named just `.conf` is one) over the file.
        write("conf.d/.conf", "podLogsDir: /data/dropped\n");
        assert_eq!(
            found(None, &config, &mut gaps),
            ("/data/dropped".into(), Origin::KubeletConfig)
        );
        // The user's flag over kubelet's word.
        assert_eq!(
            found(Some("/mine"), &config, &mut gaps),
            ("/mine".into(), Origin::Flag)
        );
        assert!(gaps.is_empty(), "{gaps:?}");
        // Empty: kubelet's default. None set: its default, said as its own.
        write("conf.d/.conf", "podLogsDir: \"\"\n");
        assert_eq!(
            found(None, &config, &mut gaps),
            (DEFAULT_POD_LOGS.into(), Origin::Process)
        );
        assert_eq!(
            found(None, &["kubelet"], &mut gaps),
            (DEFAULT_POD_LOGS.into(), Origin::Process)
        );
        assert!(gaps.is_empty(), "{gaps:?}");
        // One kubelet would refuse to start with: a gap, and the default.
        for refused in ["data/logs", "/data/../logs", "/data//logs", "/data/logs/"] {
            write("conf.d/.conf", &format!("podLogsDir: {refused}\n"));
            let mut gaps = Vec::new();
            assert_eq!(
                found(None, &config, &mut gaps),
                (DEFAULT_POD_LOGS.into(), Origin::Process),
                "{refused}"
            );
            assert_eq!(gaps.len(), 1, "{refused}: {gaps:?}");
            assert!(
                format!("{gaps:?}").contains("not an absolute, clean path"),
                "{gaps:?}"
            );
        }
        // No kubelet believed: the default, said as such.
        let none = pod_logs_dir(
            None,
            &root(None, &Running::default()),
            &Running::default(),
            &mut gaps,
        );
        assert_eq!(none.origin, Origin::Default);
        // kubelet's root given by flag: a kubelet with another root is not
        // the one named; with that root, it is.
        write("conf.d/.conf", "podLogsDir: /data/dropped\n");
        let named = |path: &str| Located {
            path: PathBuf::from(path),
            origin: Origin::Flag,
        };
        let running = running(&[
            "kubelet",
            "--config=config.yaml",
            "--root-dir=/data/kubelet",
        ]);
        let other = pod_logs_dir(None, &named("/elsewhere"), &running, &mut gaps);
        assert_eq!(
            (other.path.to_str(), other.origin),
            (Some(DEFAULT_POD_LOGS), Origin::Default)
        );
        let same = pod_logs_dir(None, &named("/data/kubelet"), &running, &mut gaps);
        assert_eq!(
            (same.path.to_str(), same.origin),
            (Some("/data/pod-logs"), Origin::KubeletConfig)
        );
    }

    #[test]
    fn cgroup_driver_and_per_qos_say_where_they_came_from() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("config.yaml"),
            "cgroupDriver: systemd\ncgroupsPerQOS: false\n",
        )
        .unwrap();
        fs::write(dir.path().join("bad.yaml"), "cgroupDriver: upstart\n").unwrap();
        let kubelet = |args: &[&str]| kubelet_in(dir.path(), args);
        let said = |args: &[&str], gaps: &mut Vec<Gap>| {
            let (driver, per_qos) = cgroup_settings(Some(&kubelet(args)), gaps);
            (
                driver.map(|d| (d.value, d.origin)),
                (per_qos.value, per_qos.origin),
            )
        };
        let mut gaps = Vec::new();
        assert_eq!(
            said(&["kubelet", "--config=config.yaml"], &mut gaps),
            (
                Some(("systemd".to_string(), Origin::KubeletConfig)),
                (false, Origin::KubeletConfig)
            )
        );
        // Its command line wins, a boolean as pflag reads one.
        assert_eq!(
            said(
                &[
                    "kubelet",
                    "--config=config.yaml",
                    "--cgroup-driver=cgroupfs",
                    "--cgroups-per-qos=T",
                ],
                &mut gaps
            ),
            (
                Some(("cgroupfs".to_string(), Origin::Process)),
                (true, Origin::Process)
            )
        );
        assert_eq!(
            said(
                &[
                    "kubelet",
                    "--config=config.yaml",
                    "--cgroups-per-qos",
                    "--v=2"
                ],
                &mut gaps
            )
            .1,
            (true, Origin::Process),
            "given bare: true"
        );
        // Nothing set: no driver said, a cgroup per pod (kubelet's default).
        assert_eq!(
            said(&["kubelet"], &mut gaps),
            (None, (true, Origin::Process))
        );
        assert!(gaps.is_empty(), "{gaps:?}");
        // A driver kubelet would not start with: a gap, not taken.
        assert_eq!(said(&["kubelet", "--config=bad.yaml"], &mut gaps).0, None);
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        // No kubelet believed: kubelet's default.
        let (driver, per_qos) = cgroup_settings(None, &mut gaps);
        assert_eq!(
            (driver, per_qos.value, per_qos.origin),
            (None, true, Origin::Default)
        );
    }

    #[test]
    fn a_cgroup_root_nodectl_is_given_is_never_overridden_by_kubelets_config() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("config.yaml"), "cgroupRoot: /from-config\n").unwrap();
        let kubelet = RunningKubelet {
            pid: 1,
            args: vec!["kubelet".to_string(), "--config=config.yaml".to_string()],
            flags_origin: Origin::Process,
            cwd: KubeletFiles {
                cwd: dir.path().to_path_buf(),
                root: None,
            },
        };
        let given = Located {
            path: PathBuf::from("/given"),
            origin: Origin::Flag,
        };
        let mut gaps = Vec::new();
        assert_eq!(
            cgroup_root_configured(given.clone(), Some(&kubelet), &mut gaps),
            given
        );
    }

    /// kubelet takes `--cgroup-root=` (empty) over its config file, for
    /// `/`; nodectl once dropped the empty value and took the file's.
    #[test]
    fn an_empty_cgroup_root_flag_is_kubelets_root_over_its_config() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("config.yaml"), "cgroupRoot: /from-config\n").unwrap();
        let kubelet = RunningKubelet {
            pid: 1,
            args: ["kubelet", "--config=config.yaml", "--cgroup-root="]
                .map(String::from)
                .to_vec(),
            flags_origin: Origin::Process,
            cwd: KubeletFiles {
                cwd: dir.path().to_path_buf(),
                root: None,
            },
        };
        let running = Running {
            kubelets: vec![kubelet],
            ..Running::default()
        };
        let (root, configured) = cgroup_root(None, &running);
        let mut gaps = Vec::new();
        let root = cgroup_root_configured(root, configured.as_ref(), &mut gaps);
        assert_eq!(
            (root.path, root.origin),
            (PathBuf::from("/"), Origin::Process)
        );
        assert!(gaps.is_empty(), "{gaps:?}");
    }

    #[test]
    fn pod_directories_are_read_with_the_mounts_below_them() {
        let dir = tempfile::tempdir().unwrap();
        let pods = dir.path().join("pods");
        fs::create_dir_all(pods.join("uid-a/volumes/kubernetes.io~empty-dir/data")).unwrap();
        fs::create_dir_all(pods.join("uid-b")).unwrap();
        fs::write(pods.join("not-a-dir"), "").unwrap();
        std::os::unix::fs::symlink(pods.join("uid-b"), pods.join("uid-link")).unwrap();
        let volume = pods.join("uid-a/volumes/kubernetes.io~empty-dir/data");
        let table = dir.path().join("mountinfo");
        fs::write(
            &table,
            format!(
                "1 0 0:1 / / rw - ext4 /dev/root rw\n40 1 0:50 / {} rw - tmpfs tmpfs rw\n",
                volume.display()
            ),
        )
        .unwrap();
        let root = Located {
            path: dir.path().to_path_buf(),
            origin: Origin::Flag,
        };
        let logs = dir.path().join("logs");
        fs::create_dir_all(logs.join("shop_cart_uid-a")).unwrap();
        fs::create_dir_all(logs.join("not-a-pod")).unwrap();
        fs::write(logs.join("shop_file_uid-c"), "").unwrap();
        let mut gaps = Vec::new();
        let view =
            read(root, logs_at(&logs), None, &table, &mut gaps).expect("a root given is read");
        assert!(gaps.is_empty(), "{gaps:?}");
        let uids: Vec<&str> = view.pod_dirs.iter().map(|d| d.uid.as_str()).collect();
        assert_eq!(uids, ["uid-a", "uid-b"], "directories only, no symlink");
        assert_eq!(view.pod_dirs[0].mounts, [volume.display().to_string()]);
        assert!(view.pod_dirs[1].mounts.is_empty());
        assert!(view.pod_dirs[0].modified_at > 0);
        let logs = view.pod_logs.expect("read");
        let named: Vec<(&str, &str, &str)> = logs
            .iter()
            .map(|l| (l.namespace.as_str(), l.name.as_str(), l.uid.as_str()))
            .collect();
        assert_eq!(
            named,
            [("shop", "cart", "uid-a")],
            "directories so named only"
        );
    }

    #[test]
    fn an_empty_pods_directory_is_read_without_the_mount_table() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("pods")).unwrap();
        let root = Located {
            path: dir.path().to_path_buf(),
            origin: Origin::Flag,
        };
        let mut gaps = Vec::new();
        // A table that cannot be read would be a gap, were it read.
        let view = read(
            root,
            logs_at(&dir.path().join("logs")),
            None,
            &dir.path().join("no-mountinfo"),
            &mut gaps,
        )
        .expect("a root given is read");
        assert!(view.pod_dirs.is_empty());
        assert!(gaps.is_empty(), "{gaps:?}");
    }

    #[test]
    fn a_mount_belongs_to_the_pod_directory_it_is_in_whole_names_only() {
        let pods = Path::new("/k/pods");
        let name = |point: &'static str| pod_dir_name(Path::new(point), pods);
        assert_eq!(name("/k/pods/uid-a/volumes/v"), Some("uid-a".as_ref()));
        assert_eq!(name("/k/pods/uid-a"), Some("uid-a".as_ref()));
        assert_eq!(name("/k/pods//uid-ab/"), Some("uid-ab".as_ref()));
        assert_eq!(name("/k/pods"), None);
        assert_eq!(name("/k/podsx/uid-a"), None);
        assert_eq!(name("/elsewhere/uid-a"), None);
    }

    #[test]
    fn no_pods_directory_is_nothing_at_the_default_and_a_gap_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("mountinfo");
        fs::write(&table, "").unwrap();
        let mut gaps = Vec::new();
        let default = Located {
            path: dir.path().join("absent"),
            origin: Origin::Default,
        };
        let logs = dir.path().join("logs");
        assert!(read(default, logs_at(&logs), None, &table, &mut gaps).is_none());
        assert!(gaps.is_empty());
        let given = Located {
            path: dir.path().join("absent"),
            origin: Origin::Flag,
        };
        assert!(read(given, logs_at(&logs), None, &table, &mut gaps).is_none());
        assert_eq!(gaps.len(), 1);
        assert!(gaps[0].source_unavailable);
    }

    #[test]
    fn pods_renamed_away_between_listing_and_looking_is_a_gap_not_no_pods() {
        let tmp = tempfile::tempdir().unwrap();
        let pods = tmp.path().join("pods");
        for uid in ["uid-a", "uid-b"] {
            fs::create_dir_all(pods.join(uid)).unwrap();
        }
        let listed = ListedDir::at(&pods).unwrap();
        let names = || vec![OsString::from("uid-a"), OsString::from("uid-b")];
        // Listed, then moved away (an unmounted kubelet root) before each
        // directory is looked at.
        fs::rename(&pods, tmp.path().join("moved")).unwrap();
        let mut gaps = Vec::new();
        assert!(look_at(&listed, names(), &mut gaps).is_empty());
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(
            gaps[0].source_unavailable && gaps[0].path == pods,
            "{gaps:?}"
        );
        // In place again: a pod directory removed meanwhile is no gap.
        fs::rename(tmp.path().join("moved"), &pods).unwrap();
        fs::remove_dir(pods.join("uid-b")).unwrap();
        let mut gaps = Vec::new();
        let uids: Vec<String> = look_at(&listed, names(), &mut gaps)
            .into_iter()
            .map(|dir| dir.uid)
            .collect();
        assert_eq!(uids, ["uid-a"]);
        assert!(gaps.is_empty(), "{gaps:?}");
    }
}
