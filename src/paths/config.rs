//! containerd's config file: the three paths nodectl needs, in every config
//! version containerd has had.
//!
//! - 1 (or no `version`, which containerd reads as 1), 2 (containerd 1.x)
//!   and 3 (2.0 to 2.2): top-level `root` and `state`, `[grpc] address`.
//! - 4 (2.3 on): the socket moved to
//!   `[plugins."io.containerd.server.v1.grpc"] address`; containerd only
//!   migrates `[grpc]` into it for files of an older version, so a
//!   version 4 file's `[grpc]` is ignored, by containerd and by us.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::model::Source;
use crate::read::bounded::{read_regular, Links};
use crate::sources::SourceThread;

/// The server plugin that owns the socket from config version 4 on.
const GRPC_PLUGIN: &str = "io.containerd.server.v1.grpc";
/// The newest config version nodectl knows (containerd 2.3).
pub const NEWEST_VERSION: i64 = 4;

/// What a config file sets; `None` where it leaves containerd's default.
#[derive(Debug, Default, PartialEq)]
pub struct ConfigPaths {
    pub version: i64,
    pub root: Option<PathBuf>,
    pub state: Option<PathBuf>,
    pub address: Option<PathBuf>,
    /// The snapshotter CRI unpacks images into (and so its containers use).
    pub snapshotter: Option<String>,
    /// CRI's CNI config directory.
    pub cni_conf_dir: Option<PathBuf>,
    /// How many of its network configs CRI loads (`max_conf_num`; CRI's
    /// default is 1, 0 is every one).
    pub cni_max_conf_num: Option<i64>,
    /// CRI mounts pods' network namespaces under its state directory
    /// (`netns_mounts_under_state_dir`), not /var/run/netns.
    pub netns_under_state_dir: bool,
}

#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    version: Option<i64>,
    root: Option<PathBuf>,
    state: Option<PathBuf>,
    grpc: Option<GrpcSection>,
    #[serde(default)]
    plugins: toml::Table,
}

#[derive(Debug, Default, Deserialize)]
struct GrpcSection {
    address: Option<PathBuf>,
}

/// Reads `path`. A version nodectl does not know is an error naming it: its
/// keys could mean anything, and a silent default would send every check to
/// the wrong directories.
///
/// Read on a thread of its own and given up after [`CONFIG_DEADLINE`]: it is
/// read before the rest of the node (which has its own deadline), and a
/// stalled disk under it must not hang nodectl either.
pub fn read(path: &Path) -> io::Result<ConfigPaths> {
    let owned = path.to_path_buf();
    let started = Instant::now();
    match SourceThread::spawn(Source::Config, path, move |_| read_now(&owned))
        .answer(started + CONFIG_DEADLINE, started)
    {
        Ok((result, _)) => result,
        Err((_, error)) => Err(io::Error::new(io::ErrorKind::TimedOut, error)),
    }
}

/// A config file is a few KiB on the root disk: one that has not been read
/// in this long will not be.
const CONFIG_DEADLINE: Duration = Duration::from_secs(1);

fn read_now(path: &Path) -> io::Result<ConfigPaths> {
    let bytes = read_regular(path, CONFIG_SIZE_LIMIT, Links::Follow)?.bytes;
    let text = String::from_utf8(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))?;
    parse(&text)
}

/// Real configs are a few KiB; TOML this large is not one.
pub(crate) const CONFIG_SIZE_LIMIT: u64 = 4 << 20;

fn parse(text: &str) -> io::Result<ConfigPaths> {
    let invalid = |message: String| io::Error::new(io::ErrorKind::InvalidData, message);
    let file: ConfigFile = toml::from_str(text).map_err(|e| invalid(e.message().to_string()))?;
    let version = match file.version {
        // containerd: "Version 0 is not defined, treated at version 1".
        None | Some(0) => 1,
        Some(version @ 1..=NEWEST_VERSION) => version,
        Some(other) => {
            return Err(invalid(format!(
                "config version {other} is not one nodectl knows (1 to {NEWEST_VERSION}); \
                 root, state and address were not read from it"
            )))
        }
    };
    let plugin_address = file
        .plugins
        .get(GRPC_PLUGIN)
        .and_then(|p| p.get("address"))
        .and_then(|a| a.as_str())
        .map(PathBuf::from);
    let legacy_address = file.grpc.and_then(|g| g.address);
    let address = if version >= 4 {
        plugin_address
    } else {
        // What containerd 1.x and 2.0 to 2.2 read; 2.3 running an older
        // file migrates `[grpc]` into the plugin unless that is set already.
        legacy_address.or(plugin_address)
    };
    let nonempty = |p: Option<PathBuf>| p.filter(|p| !p.as_os_str().is_empty());
    Ok(ConfigPaths {
        version,
        root: nonempty(file.root),
        state: nonempty(file.state),
        address: nonempty(address),
        snapshotter: cri_snapshotter(&file.plugins, version),
        cni_conf_dir: cri_cni_conf_dir(&file.plugins, version).map(PathBuf::from),
        cni_max_conf_num: cri_cni_max_conf_num(&file.plugins, version),
        netns_under_state_dir: netns_under_state_dir(&file.plugins, version),
    })
}

/// CRI's snapshotter: `[plugins."io.containerd.grpc.v1.cri".containerd]
/// snapshotter` up to version 2 (containerd 1.x; 2.x migrates it from such
/// a file), `[plugins."io.containerd.cri.v1.images"] snapshotter` from
/// version 3 (2.x reads only that one there). `None`: the default.
fn cri_snapshotter(plugins: &toml::Table, version: i64) -> Option<String> {
    if version >= 3 {
        plugin_string(plugins, &["io.containerd.cri.v1.images", "snapshotter"])
    } else {
        plugin_string(
            plugins,
            &["io.containerd.grpc.v1.cri", "containerd", "snapshotter"],
        )
    }
}

/// CRI's CNI config directory: `[plugins."io.containerd.grpc.v1.cri".cni]
/// conf_dir` up to version 2, `[plugins."io.containerd.cri.v1.runtime".cni]
/// conf_dir` from version 3 (2.x's runtime plugin holds the CNI config).
/// `None`: the default, /etc/cni/net.d.
fn cri_cni_conf_dir(plugins: &toml::Table, version: i64) -> Option<String> {
    if version >= 3 {
        plugin_string(
            plugins,
            &["io.containerd.cri.v1.runtime", "cni", "conf_dir"],
        )
    } else {
        plugin_string(plugins, &["io.containerd.grpc.v1.cri", "cni", "conf_dir"])
    }
}

/// CRI's `max_conf_num`, beside `conf_dir` (see [`cri_cni_conf_dir`]).
fn cri_cni_max_conf_num(plugins: &toml::Table, version: i64) -> Option<i64> {
    let plugin = match version >= 3 {
        true => "io.containerd.cri.v1.runtime",
        false => "io.containerd.grpc.v1.cri",
    };
    plugins
        .get(plugin)?
        .get("cni")?
        .get("max_conf_num")?
        .as_integer()
}

/// CRI's `netns_mounts_under_state_dir`: in `[plugins."io.containerd.grpc.v1.cri"]`
/// up to version 2, `[plugins."io.containerd.cri.v1.runtime"]` from 3.
fn netns_under_state_dir(plugins: &toml::Table, version: i64) -> bool {
    let plugin = match version >= 3 {
        true => "io.containerd.cri.v1.runtime",
        false => "io.containerd.grpc.v1.cri",
    };
    plugins
        .get(plugin)
        .and_then(|p| p.get("netns_mounts_under_state_dir"))
        .and_then(|v| v.as_bool())
        .unwrap_or(false)
}

/// A non-empty string at `path` below `[plugins]`.
fn plugin_string(plugins: &toml::Table, path: &[&str]) -> Option<String> {
    let mut value = plugins.get(path[0])?;
    for key in &path[1..] {
        value = value.get(key)?;
    }
    value.as_str().filter(|s| !s.is_empty()).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATHS: &str = "root = \"/data/c\"\nstate = \"/run/c\"\n";

    fn paths(root: &str, state: &str, address: Option<&str>, version: i64) -> ConfigPaths {
        ConfigPaths {
            version,
            root: Some(PathBuf::from(root)),
            state: Some(PathBuf::from(state)),
            address: address.map(PathBuf::from),
            snapshotter: None,
            cni_conf_dir: None,
            cni_max_conf_num: None,
            netns_under_state_dir: false,
        }
    }

    #[test]
    fn no_version_is_version_1_with_the_same_keys() {
        let text = format!(
            "{PATHS}[grpc]\naddress = \"/run/c/c.sock\"\n[plugins.cri]\nsandbox_image = \"p\"\n"
        );
        assert_eq!(
            parse(&text).unwrap(),
            paths("/data/c", "/run/c", Some("/run/c/c.sock"), 1)
        );
        let text = format!("version = 1\n{PATHS}[grpc]\naddress = \"/run/c/c.sock\"\n");
        assert_eq!(
            parse(&text).unwrap(),
            paths("/data/c", "/run/c", Some("/run/c/c.sock"), 1)
        );
    }

    #[test]
    fn versions_2_and_3_read_the_grpc_section() {
        for version in [2, 3] {
            let text = format!(
                "version = {version}\n{PATHS}[grpc]\naddress = \"/run/c/c.sock\"\n\
                 [plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"p\"\n"
            );
            assert_eq!(
                parse(&text).unwrap(),
                paths("/data/c", "/run/c", Some("/run/c/c.sock"), version)
            );
        }
    }

    #[test]
    fn version_4_reads_the_grpc_server_plugin_and_ignores_the_old_section() {
        let text = format!(
            "version = 4\n{PATHS}[grpc]\naddress = \"/old.sock\"\n\
             [plugins.\"io.containerd.server.v1.grpc\"]\naddress = \"/run/c/c.sock\"\nuid = 0\n"
        );
        assert_eq!(
            parse(&text).unwrap(),
            paths("/data/c", "/run/c", Some("/run/c/c.sock"), 4)
        );
        // Only the old section: containerd 2.3 does not migrate a version 4
        // file, so the socket is the default.
        let text = format!("version = 4\n{PATHS}[grpc]\naddress = \"/old.sock\"\n");
        assert_eq!(parse(&text).unwrap(), paths("/data/c", "/run/c", None, 4));
    }

    #[test]
    fn an_unknown_version_is_an_error_naming_it() {
        let err = parse(&format!("version = 5\n{PATHS}")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("config version 5"), "{err}");
        assert!(parse(&format!("version = -1\n{PATHS}")).is_err());
        // 0 is what containerd calls "no version": version 1.
        assert_eq!(parse("version = 0\n").unwrap().version, 1);
    }

    #[test]
    fn empty_values_are_containerds_defaults() {
        let text = "version = 2\nroot = \"\"\n[grpc]\naddress = \"\"\n";
        assert_eq!(
            parse(text).unwrap(),
            ConfigPaths {
                version: 2,
                ..ConfigPaths::default()
            }
        );
    }

    #[test]
    fn netns_under_the_state_dir_is_read_from_the_key_of_the_config_s_version() {
        let old = "[plugins.\"io.containerd.grpc.v1.cri\"]\nnetns_mounts_under_state_dir = true\n";
        let new = "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\"]\nnetns_mounts_under_state_dir = true\n";
        assert!(parse(old).unwrap().netns_under_state_dir);
        assert!(parse(new).unwrap().netns_under_state_dir);
        assert!(
            !parse(&format!("version = 3\n{old}"))
                .unwrap()
                .netns_under_state_dir
        );
        assert!(!parse("").unwrap().netns_under_state_dir);
    }

    #[test]
    fn cri_s_cni_conf_dir_is_read_from_the_key_of_the_config_s_version() {
        let old = "[plugins.\"io.containerd.grpc.v1.cri\".cni]\nconf_dir = \"/k3s/cni\"\n";
        let new = "[plugins.\"io.containerd.cri.v1.runtime\".cni]\nconf_dir = \"/rke2/cni\"\n";
        let read = |text: &str| parse(text).unwrap().cni_conf_dir;
        assert_eq!(read(old), Some(PathBuf::from("/k3s/cni")));
        assert_eq!(
            read(&format!("version = 2\n{old}")),
            Some(PathBuf::from("/k3s/cni"))
        );
        assert_eq!(read(&format!("version = 2\n{new}")), None);
        assert_eq!(
            read(&format!("version = 3\n{new}")),
            Some(PathBuf::from("/rke2/cni"))
        );
        assert_eq!(read(&format!("version = 3\n{old}")), None);
        assert_eq!(
            read("[plugins.\"io.containerd.grpc.v1.cri\".cni]\nconf_dir = \"\"\n"),
            None
        );
    }

    #[test]
    fn cri_s_max_conf_num_is_read_from_the_key_of_the_config_s_version() {
        let old = "[plugins.\"io.containerd.grpc.v1.cri\".cni]\nmax_conf_num = 0\n";
        let new = "[plugins.\"io.containerd.cri.v1.runtime\".cni]\nmax_conf_num = 2\n";
        let read = |text: &str| parse(text).unwrap().cni_max_conf_num;
        assert_eq!(read(old), Some(0));
        assert_eq!(read(&format!("version = 2\n{old}")), Some(0));
        assert_eq!(read(&format!("version = 3\n{new}")), Some(2));
        // Each version reads only its own key; unset is CRI's default.
        assert_eq!(read(&format!("version = 3\n{old}")), None);
        assert_eq!(read(&format!("version = 2\n{new}")), None);
        assert_eq!(read("version = 2\n"), None);
    }

    #[test]
    fn cri_s_snapshotter_is_read_from_the_key_of_the_config_s_version() {
        let old = "[plugins.\"io.containerd.grpc.v1.cri\".containerd]\nsnapshotter = \"native\"\n";
        let new = "[plugins.\"io.containerd.cri.v1.images\"]\nsnapshotter = \"zfs\"\n";
        let read = |text: &str| parse(text).unwrap().snapshotter;
        assert_eq!(
            read(&format!("version = 2\n{old}")).as_deref(),
            Some("native")
        );
        assert_eq!(read(old).as_deref(), Some("native"));
        assert_eq!(read(&format!("version = 3\n{new}")).as_deref(), Some("zfs"));
        assert_eq!(read(&format!("version = 4\n{new}")).as_deref(), Some("zfs"));
        // Each version reads only its own key.
        assert_eq!(read(&format!("version = 3\n{old}")), None);
        assert_eq!(read(&format!("version = 2\n{new}")), None);
        assert_eq!(read("version = 2\n"), None);
    }
}
