//! containerd's root and state as CRI says the running daemon has them,
//! from its `Status(verbose=true)`.
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

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::model::CriDirs;

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
}

/// Decodes the text CRI put under `info["config"]`; `Err` says why it is
/// unread (too long, not JSON, a dir missing, relative, or a `stateDir`
/// that is not `<state>/io.containerd.grpc.v1.cri`).
pub fn decode(text: &str) -> Result<CriDirs, String> {
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
    Ok(CriDirs { root, state })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fields as 2.3.4 prints them (the rest of its config elided).
    const SAID: &str = r#"{"enableSelinux":false,"cni":{"binDir":"/opt/cni/bin"},"containerdRootDir":"/var/lib/containerd","containerdEndpoint":"/run/containerd/containerd.sock","rootDir":"/var/lib/containerd/io.containerd.grpc.v1.cri","stateDir":"/run/containerd/io.containerd.grpc.v1.cri"}"#;

    #[test]
    fn the_daemons_root_and_state_are_read_from_its_config() {
        assert_eq!(
            decode(SAID).unwrap(),
            CriDirs {
                root: "/var/lib/containerd".into(),
                state: "/run/containerd".into(),
            }
        );
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
