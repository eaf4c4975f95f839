//! Which containerd to look at: root, state and socket, each with where the
//! value came from, so the report can say which paths it used and why.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::snapshot::Gap;

pub const DEFAULT_CONFIG: &str = "/etc/containerd/config.toml";
pub const DEFAULT_ROOT: &str = "/var/lib/containerd";
pub const DEFAULT_STATE: &str = "/run/containerd";
pub const DEFAULT_ADDRESS: &str = "/run/containerd/containerd.sock";

/// Where a path came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    Flag,
    Config,
    Default,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Located {
    pub path: PathBuf,
    pub origin: Origin,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paths {
    /// The containerd config file that was read, if any.
    pub config: Option<PathBuf>,
    pub root: Located,
    pub state: Located,
    pub address: Located,
}

impl Paths {
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

/// The options a user can give on the command line.
#[derive(Debug, Clone, Default)]
pub struct PathFlags {
    pub config: Option<PathBuf>,
    pub root: Option<PathBuf>,
    pub state: Option<PathBuf>,
    pub address: Option<PathBuf>,
}

/// The keys nodectl reads from a containerd config; the same in config
/// versions 2 (containerd 1.x) and 3 (containerd 2.x).
#[derive(Debug, Default, Deserialize)]
struct ContainerdConfig {
    root: Option<PathBuf>,
    state: Option<PathBuf>,
    grpc: Option<GrpcConfig>,
}

#[derive(Debug, Default, Deserialize)]
struct GrpcConfig {
    address: Option<PathBuf>,
}

/// Resolves each path: flag, else the containerd config, else containerd's
/// default. A config given with `--config` that cannot be read is a gap;
/// the default config missing is normal (containerd then uses its defaults).
pub fn resolve(flags: &PathFlags) -> (Paths, Vec<Gap>) {
    let mut gaps = Vec::new();
    let (config_path, explicit) = match &flags.config {
        Some(path) => (path.clone(), true),
        None => (PathBuf::from(DEFAULT_CONFIG), false),
    };
    let config = match read_config(&config_path) {
        Ok(config) => Some(config),
        Err(err) if err.kind() == io::ErrorKind::NotFound && !explicit => None,
        Err(err) => {
            gaps.push(Gap::item("config", &config_path, err));
            None
        }
    };
    let file = config.as_ref();
    let paths = Paths {
        config: file.map(|_| config_path.clone()),
        root: pick(&flags.root, file.and_then(|c| c.root.clone()), DEFAULT_ROOT),
        state: pick(
            &flags.state,
            file.and_then(|c| c.state.clone()),
            DEFAULT_STATE,
        ),
        address: pick(
            &flags.address,
            file.and_then(|c| c.grpc.as_ref()?.address.clone()),
            DEFAULT_ADDRESS,
        ),
    };
    (paths, gaps)
}

fn pick(flag: &Option<PathBuf>, from_config: Option<PathBuf>, default: &str) -> Located {
    if let Some(path) = flag {
        return Located {
            path: path.clone(),
            origin: Origin::Flag,
        };
    }
    match from_config.filter(|p| !p.as_os_str().is_empty()) {
        Some(path) => Located {
            path,
            origin: Origin::Config,
        },
        None => Located {
            path: PathBuf::from(default),
            origin: Origin::Default,
        },
    }
}

fn read_config(path: &Path) -> io::Result<ContainerdConfig> {
    let text = fs::read_to_string(path)?;
    toml::from_str(&text).map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err.message()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
