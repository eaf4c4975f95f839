//! containerd's root and state as CRI says the running daemon has them,
//! and CRI's settings nodectl also reads from containerd's config, from
//! its `Status(verbose=true)`.
//!
//! CRI's `Status` puts the JSON of its whole `criconfig.Config` under
//! `info["config"]` when asked to be verbose (pkg/cri/server/status.go on
//! 1.6/1.7, internal/cri/server/status.go on 2.x). The plugin's init fills
//! two of its fields from the daemon's own running paths, not from any file
//! as nodectl reads it: `containerdRootDir` is the parent of the plugin's
//! root (`filepath.Dir(ic.Root)`, pkg/cri/cri.go on 1.6/1.7;
//! `filepath.Dir(ic.Properties[PropertyRootDir])`,
//! plugins/cri/runtime/plugin.go on 2.x) and `stateDir` is
//! `<containerd's state>/io.containerd.grpc.v1.cri` (`ic.State` on 1.x, the
//! state property's parent joined with that name on 2.x). So the daemon's
//! word on its root and state is the same key on every line.
//!
//! The rest is the config CRI runs with, as its line merged the files:
//! - `netnsMountsUnderStateDir` (`PluginConfig` on 1.x, `RuntimeConfig`
//!   on 2.x, both embedded in `Config`, so a top-level key on every line):
//!   CRI mounts a pod's network namespace in `<stateDir>/netns` when true,
//!   else in /var/run/netns (`RunPodSandbox`, sandbox_run.go, every line).
//! - The snapshotter: 1.x's `ContainerdConfig.Snapshotter`, under
//!   `containerd` as `snapshotter`. 2.x moved it to the images plugin's
//!   `ImageConfig`, which this JSON does not hold (its `containerd` has
//!   only the runtimes, each with its own override), and nothing else in
//!   Status says it: on 2.x CRI does not say its snapshotter.
//!
//! A key the JSON does not hold is a setting that line does not say
//! (`None`), never its default.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::model::{CriDirs, CriSaid};

/// The key of CRI's verbose Status info that holds its config.
pub const INFO_KEY: &str = "config";
/// The longest config text taken; a longer one is unread. CRI's config is
/// a few KB; runtimes and registries make it grow, never to megabytes.
pub const MAX_BYTES: usize = 4 << 20;
/// The last component of CRI's `stateDir` on every line.
const CRI_STATE: &str = "io.containerd.grpc.v1.cri";

#[derive(Deserialize)]
struct Config {
    #[serde(rename = "containerdRootDir", default)]
    containerd_root_dir: String,
    #[serde(rename = "stateDir", default)]
    state_dir: String,
    #[serde(rename = "netnsMountsUnderStateDir", default)]
    netns_mounts_under_state_dir: Option<bool>,
    #[serde(default)]
    containerd: Option<ContainerdConfig>,
}

/// 1.x's `ContainerdConfig` (2.x's has no `snapshotter`).
#[derive(Deserialize)]
struct ContainerdConfig {
    #[serde(default)]
    snapshotter: Option<String>,
}

/// Decodes the text CRI put under `info["config"]`: the daemon's root and
/// state, and what it says of CRI's settings. `Err` says why it is unread
/// (too long, not JSON, a dir missing, relative, or a `stateDir` that is
/// not `<state>/io.containerd.grpc.v1.cri`): then none of it is taken, as
/// it is not the config CRI's own code marshals.
pub fn decode(text: &str) -> Result<(CriDirs, CriSaid), String> {
    if text.len() > MAX_BYTES {
        return Err(format!(
            "CRI's config is {} bytes, over the {MAX_BYTES} taken",
            text.len()
        ));
    }
    let raw: Config = serde_json::from_str(text)
        .map_err(|e| format!("CRI's config is not its criconfig.Config: {e}"))?;
    let root = PathBuf::from(&raw.containerd_root_dir);
    let cri_state = Path::new(&raw.state_dir);
    if !root.is_absolute() || !cri_state.is_absolute() {
        return Err(format!(
            "CRI's config names no absolute containerdRootDir and stateDir ({:?}, {:?})",
            raw.containerd_root_dir, raw.state_dir
        ));
    }
    let state = match (cri_state.file_name(), cri_state.parent()) {
        (Some(name), Some(parent)) if name == CRI_STATE => parent.to_path_buf(),
        _ => {
            return Err(format!(
                "CRI's stateDir {} is not <state>/{CRI_STATE}",
                cri_state.display()
            ))
        }
    };
    let said = CriSaid {
        netns_mounts_under_state_dir: raw.netns_mounts_under_state_dir,
        snapshotter: raw.containerd.and_then(|c| c.snapshotter),
    };
    Ok((CriDirs { root, state }, said))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fields as 2.3.4 prints them (the rest of its config elided).
    const SAID: &str = r#"{"enableSelinux":false,"cni":{"binDir":"/opt/cni/bin"},"containerdRootDir":"/var/lib/containerd","containerdEndpoint":"/run/containerd/containerd.sock","rootDir":"/var/lib/containerd/io.containerd.grpc.v1.cri","stateDir":"/run/containerd/io.containerd.grpc.v1.cri"}"#;

    #[test]
    fn the_daemons_root_and_state_are_read_from_its_config() {
        assert_eq!(
            decode(SAID).unwrap().0,
            CriDirs {
                root: "/var/lib/containerd".into(),
                state: "/run/containerd".into(),
            }
        );
    }

    /// Each line's whole config as its CRI prints it (testdata/cri-config:
    /// a test bed's, from tests/config_imports_real.rs, with a version 2
    /// drop-in that 1.x reads apart from 2.x; its paths written as a
    /// node's defaults).
    fn printed_by(version: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/cri-config")
            .join(format!("{version}.json"));
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn each_line_says_its_netns_dir_and_only_1x_its_snapshotter() {
        for (version, under_state, snapshotter) in [
            ("1.6.20", false, Some("native")),
            ("1.7.34", false, Some("native")),
            // 2.x: the images plugin holds it; `containerd` has only the
            // runtimes, each with an override of its own (empty here).
            ("2.0.11", true, None),
            ("2.3.4", true, None),
        ] {
            let (dirs, said) = decode(&printed_by(version)).unwrap();
            assert_eq!(
                dirs,
                CriDirs {
                    root: "/var/lib/containerd".into(),
                    state: "/run/containerd".into(),
                },
                "{version}"
            );
            assert_eq!(
                said,
                CriSaid {
                    netns_mounts_under_state_dir: Some(under_state),
                    snapshotter: snapshotter.map(str::to_string),
                },
                "{version}"
            );
        }
    }

    #[test]
    fn a_setting_its_config_does_not_hold_is_not_said() {
        assert_eq!(decode(SAID).unwrap().1, CriSaid::default());
        let null = SAID.replace(
            r#"{"enableSelinux""#,
            r#"{"netnsMountsUnderStateDir":null,"containerd":null,"enableSelinux""#,
        );
        assert_eq!(decode(&null).unwrap().1, CriSaid::default());
        let empty = SAID.replace(
            r#"{"enableSelinux""#,
            r#"{"containerd":{"snapshotter":""},"enableSelinux""#,
        );
        let said = decode(&empty).unwrap().1;
        assert_eq!(said.snapshotter.as_deref(), Some(""), "said: the default");
        // Not its type: not CRI's config at all.
        let wrong = SAID.replace(
            r#"{"enableSelinux""#,
            r#"{"netnsMountsUnderStateDir":"yes","enableSelinux""#,
        );
        assert!(decode(&wrong).is_err());
    }

    #[test]
    fn what_is_not_its_config_is_unread() {
        for (text, why) in [
            ("", "not its criconfig.Config"),
            ("{}", "no absolute"),
            (
                r#"{"containerdRootDir":"/var/lib/containerd","stateDir":"/run/containerd"}"#,
                "is not <state>/io.containerd.grpc.v1.cri",
            ),
            (
                r#"{"containerdRootDir":"var","stateDir":"/run/containerd/io.containerd.grpc.v1.cri"}"#,
                "no absolute",
            ),
        ] {
            let err = decode(text).unwrap_err();
            assert!(err.contains(why), "{text}: {err}");
        }
        let long = format!("{{\"x\":\"{}\"}}", "a".repeat(MAX_BYTES));
        assert!(decode(&long).unwrap_err().contains("over the"));
    }
}
