//! Which containerd was looked at: root, state and socket, each with where
//! the value came from (resolved by `crate::paths`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where a path came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    Flag,
    /// The running containerd's command line.
    Process,
    /// The config file in `Paths::config`.
    Config,
    Default,
    /// What the running containerd holds open: its metadata database under
    /// its root, when its config names another (edited after it started).
    OpenFile,
    /// kubelet's own config file or drop-in (its `--config`,
    /// `--config-dir`), for a setting its command line does not give.
    KubeletConfig,
    /// k3s's config file or its drop-ins (`kubelet-arg`): kubelet runs
    /// inside k3s, whose command line is hidden.
    K3sConfig,
    /// kubelite's `--kubelet-args-file` (microk8s runs kubelet inside
    /// kubelite).
    KubeliteArgs,
}

impl Origin {
    pub fn as_str(&self) -> &'static str {
        match self {
            Origin::Flag => "flag",
            Origin::Process => "process",
            Origin::Config => "config",
            Origin::Default => "default",
            Origin::OpenFile => "open file",
            Origin::KubeletConfig => "kubelet config",
            Origin::K3sConfig => "k3s config",
            Origin::KubeliteArgs => "kubelite args file",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Located {
    #[serde(with = "crate::model::path_json")]
    pub path: PathBuf,
    pub origin: Origin,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paths {
    /// The containerd config file that was read, if any.
    #[serde(default, with = "crate::model::path_json::option")]
    pub config: Option<PathBuf>,
    pub root: Located,
    pub state: Located,
    pub address: Located,
    /// The running containerd the paths were read from, if one was.
    #[serde(default)]
    pub process: Option<ContainerdProcess>,
    /// Why no running containerd was used although some run; or, with
    /// one, where its root or state was found when its config names
    /// another.
    #[serde(default)]
    pub note: Option<String>,
    /// The snapshotter CRI uses for images, when the config names one, or
    /// CRI's own word where it says another (gather's settle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshotter: Option<String>,
    /// CRI's CNI config directory (`conf_dir`), when the config names one.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::model::path_json::option"
    )]
    pub cni_conf_dir: Option<PathBuf>,
    /// CRI's `max_conf_num`, when the config sets it (CRI's default: 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cni_max_conf_num: Option<i64>,
    /// Where CRI mounts pods' network namespaces:
    /// `<state>/io.containerd.grpc.v1.cri/netns` when the config says
    /// `netns_mounts_under_state_dir` (or CRI's own word does, over the
    /// config's: gather's settle), else `/var/run/netns`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub netns_under_state_dir: bool,
    /// Every other process called containerd (by `comm` and executable),
    /// and why it is not the daemon: it supplied no path, version or
    /// namespace reference.
    #[serde(default)]
    pub other_containerds: Vec<OtherContainerd>,
    /// Why what nodectl reads cannot be tied to the daemon it talks to: no
    /// proven containerd serves the socket, or root or state is not that
    /// daemon's. Any reason here makes every action refuse (`act`).
    #[serde(default)]
    pub unproven: Vec<String>,
    /// The root or state (each at most once) that could not be tied to the
    /// proven daemon, or is not its own: what is read there is nobody's
    /// known to be containerd's, so it is judged only once the daemon's own
    /// word ties it (see `gather::settle::settle_untied`), else a gap.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untied: Vec<Untied>,
    /// The root or state tied to the proven daemon by nothing but its
    /// config: it holds nothing open there (containerd before 2.3 keeps
    /// nothing open under its state) and the config, read as its line
    /// merges it, is unchanged since it started. Judged, but that reading
    /// is nodectl's, not the daemon's word: a proven shim working there or
    /// CRI's own word ties it (see `gather::settle::settle_by_config_only`,
    /// which unties it when CRI names another), and while any is left here
    /// every action refuses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_config_only: Vec<Untied>,
    /// Set when the running containerd is still to be found (and `process`
    /// and `note` still to be filled): every path it could have decided was
    /// given by flag, so gather finds it among the processes its own procfs
    /// walk reads instead of walking procfs once more before (see
    /// `crate::paths::resolve_for_gather`). Never in a snapshot.
    #[serde(skip)]
    pub daemon_lookup: Option<DaemonLookup>,
    /// Readings of the config that containerd's lines give apart, each
    /// also a `config` gap until the daemon's line is known (gather drops
    /// the gap where nodectl's reading is that line's). Never in a
    /// snapshot: its gaps are settled there.
    #[serde(skip)]
    pub config_apart_by_line: Vec<ConfigApart>,
}

/// containerd's root or state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DaemonDir {
    Root,
    State,
}

/// A root or state not tied to the proven daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Untied {
    pub dir: DaemonDir,
    #[serde(with = "crate::model::path_json")]
    pub path: PathBuf,
    /// The reason, as `unproven` lists it.
    pub why: String,
}

/// A setting of the config that containerd's lines read apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigApart {
    /// The file the gap names (the main config).
    pub file: PathBuf,
    /// The gap's words: how the lines read it, and which nodectl used.
    pub said: String,
    /// The lines (major, minor) whose reading nodectl used.
    pub right_on: Vec<(u32, u32)>,
    /// CRI's settings the lines may read apart here: CRI's own word on
    /// every one of them settles the gap too, whatever the line (see
    /// `gather::settle::settle_config_by_cri`).
    pub settings: Vec<CriSetting>,
}

/// One of CRI's settings nodectl reads from containerd's config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CriSetting {
    Snapshotter,
    CniConfDir,
    CniMaxConfNum,
    NetnsMountsUnderStateDir,
}

impl CriSetting {
    pub const ALL: [CriSetting; 4] = [
        CriSetting::Snapshotter,
        CriSetting::CniConfDir,
        CriSetting::CniMaxConfNum,
        CriSetting::NetnsMountsUnderStateDir,
    ];
}

/// What choosing the running containerd needs once every path is known
/// (see `Paths::daemon_lookup`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonLookup {
    pub proc_root: PathBuf,
    /// `--address` and `--config`: the daemon serving that socket is the one.
    pub address: PathBuf,
    pub config: PathBuf,
    /// The config file a daemon started without `-c` reads.
    pub default_config: PathBuf,
}

impl Paths {
    /// containerd's root, state and socket at these places and nothing
    /// else known: no config read, no daemon found, nothing unproven yet.
    pub fn at(root: Located, state: Located, address: Located) -> Paths {
        Paths {
            config: None,
            root,
            state,
            address,
            process: None,
            note: None,
            other_containerds: Vec::new(),
            unproven: Vec::new(),
            untied: Vec::new(),
            by_config_only: Vec::new(),
            snapshotter: None,
            cni_conf_dir: None,
            cni_max_conf_num: None,
            netns_under_state_dir: false,
            daemon_lookup: None,
            config_apart_by_line: Vec::new(),
        }
    }

    /// The CRI plugin's on-disk container store.
    pub fn cri_containers_dir(&self) -> PathBuf {
        self.root.path.join("io.containerd.grpc.v1.cri/containers")
    }

    /// Directories CRI keeps per pod sandbox (under root and under state).
    pub fn cri_sandbox_dirs(&self) -> Vec<PathBuf> {
        [&self.root.path, &self.state.path]
            .iter()
            .map(|dir| dir.join("io.containerd.grpc.v1.cri/sandboxes"))
            .collect()
    }

    /// Task bundles of the runtime v2 plugin for one namespace.
    pub fn bundles_dir(&self, namespace: &str) -> PathBuf {
        self.state
            .path
            .join("io.containerd.runtime.v2.task")
            .join(namespace)
    }
}

/// A process called containerd that is not the daemon nodectl talks to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtherContainerd {
    pub pid: i32,
    /// Its `/proc/<pid>/exe` link, as the kernel spells it.
    #[serde(with = "crate::model::path_json")]
    pub exe: PathBuf,
    /// Why it is not the daemon (not in the host's namespaces, a binary not
    /// owned by root, serving another socket, ...).
    pub reason: String,
}

/// A running containerd daemon and the paths its command line sets: the
/// one proven to serve the socket nodectl talks to (see `crate::paths`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerdProcess {
    pub pid: i32,
    /// The binary it runs (the `/proc/<pid>/exe` link).
    #[serde(with = "crate::model::path_json")]
    pub exe: PathBuf,
    #[serde(default, with = "crate::model::path_json::option")]
    pub config: Option<PathBuf>,
    #[serde(default, with = "crate::model::path_json::option")]
    pub address: Option<PathBuf>,
    #[serde(default, with = "crate::model::path_json::option")]
    pub root: Option<PathBuf>,
    #[serde(default, with = "crate::model::path_json::option")]
    pub state: Option<PathBuf>,
}
