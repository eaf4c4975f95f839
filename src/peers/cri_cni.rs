//! The CNI networks CRI says it loaded, from its `Status(verbose=true)`.
//!
//! containerd's CRI `(*criService).Status` (pkg/cri/server/status.go on
//! 1.6/1.7, internal/cri/server/status.go on 2.x) puts the JSON of go-cni's
//! `(*libcni).GetConfig()` for the default runtime handler's network plugin
//! under `info["cniconfig"]`. It is go-cni's `ConfigResult` (cni.go):
//! `PluginDirs`, `PluginConfDir`, `PluginMaxConfNum`, `Prefix`, and
//! `Networks`, each a `ConfNetwork` of `Config` (`NetworkConfList`: `Name`,
//! `CNIVersion`, `Plugins`, `Source`) and `IFName`; each plugin is a
//! `NetworkConf` of `Network` (libcni's `types.NetConf`, with its JSON tags:
//! `type`, `ipam`...) and `Source`. go-cni's own structs have no JSON tags,
//! so the keys are the Go field names. go-cni lists its loopback network
//! first (`IFName` "lo").
//!
//! Status puts the key there even when marshalling failed (an empty text),
//! so a value that does not decode is unread, never "no network".

use std::path::PathBuf;

use serde::Deserialize;

use crate::model::{CriCniConfig, CriNetwork};

/// The key of CRI's verbose Status info that holds it.
pub const INFO_KEY: &str = "cniconfig";
/// The loopback network go-cni adds (`WithLoNetwork`), not a pod network.
const LOOPBACK: (&str, &str) = ("cni-loopback", "lo");
/// The longest `cniconfig` text taken; a longer one is unread.
pub const MAX_BYTES: usize = 4 << 20;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ConfigResult {
    #[serde(default)]
    plugin_conf_dir: String,
    #[serde(default)]
    plugin_max_conf_num: i64,
    #[serde(default)]
    networks: Option<Vec<Option<ConfNetwork>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ConfNetwork {
    config: Option<NetworkConfList>,
    #[serde(rename = "IFName", default)]
    ifname: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct NetworkConfList {
    #[serde(default)]
    name: String,
    #[serde(default)]
    plugins: Option<Vec<Option<NetworkConf>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct NetworkConf {
    network: Option<NetConf>,
}

#[derive(Deserialize)]
struct NetConf {
    #[serde(default)]
    ipam: Option<Ipam>,
}

#[derive(Deserialize)]
struct Ipam {
    #[serde(rename = "type", default)]
    kind: String,
}

/// Decodes the text CRI put under `info["cniconfig"]`; `Err` says why it
/// is unread (too long, not go-cni's `ConfigResult`, a network without a
/// name or config).
pub fn decode(text: &str) -> Result<CriCniConfig, String> {
    if text.len() > MAX_BYTES {
        return Err(format!(
            "CRI's cniconfig is {} bytes, over the {MAX_BYTES} taken",
            text.len()
        ));
    }
    let raw: ConfigResult = serde_json::from_str(text)
        .map_err(|e| format!("CRI's cniconfig is not go-cni's ConfigResult: {e}"))?;
    if raw.plugin_conf_dir.is_empty() {
        return Err("CRI's cniconfig names no PluginConfDir".into());
    }
    let mut networks = Vec::new();
    for network in raw.networks.unwrap_or_default().into_iter().flatten() {
        let Some(config) = network.config else {
            return Err("CRI's cniconfig lists a network without its Config".into());
        };
        if (config.name.as_str(), network.ifname.as_str()) == LOOPBACK {
            continue;
        }
        if config.name.is_empty() {
            return Err("CRI's cniconfig lists a network without a Name".into());
        }
        let ipam_types = config
            .plugins
            .unwrap_or_default()
            .into_iter()
            .flatten()
            .filter_map(|p| p.network?.ipam)
            .map(|ipam| ipam.kind)
            .filter(|kind| !kind.is_empty())
            .collect();
        networks.push(CriNetwork {
            name: config.name,
            ipam_types,
        });
    }
    Ok(CriCniConfig {
        conf_dir: PathBuf::from(raw.plugin_conf_dir),
        max_conf_num: raw.plugin_max_conf_num,
        networks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape containerd prints under cniconfig with one bridge network
    /// loaded, go-cni's loopback first (as tests/cni_libcni_real.rs reads
    /// it from every line).
    const LOADED: &str = r#"{"PluginDirs":["/opt/cni/bin"],"PluginConfDir":"/etc/cni/net.d","PluginMaxConfNum":1,"Prefix":"eth","Networks":[{"Config":{"Name":"cni-loopback","CNIVersion":"0.3.1","Plugins":[{"Network":{"type":"loopback","ipam":{},"dns":{}},"Source":"{\"type\":\"loopback\"}"}],"Source":"{}"},"IFName":"lo"},{"Config":{"Name":"net-a","CNIVersion":"0.4.0","Plugins":[{"Network":{"cniVersion":"0.4.0","name":"net-a","type":"bridge","ipam":{"type":"host-local"},"dns":{}},"Source":"{}"},{"Network":{"type":"portmap","ipam":{},"dns":{}},"Source":"{}"}],"Source":"{}"},"IFName":"eth0"}]}"#;

    #[test]
    fn the_networks_loaded_are_named_without_go_cni_s_loopback() {
        let got = decode(LOADED).unwrap();
        assert_eq!(got.conf_dir, PathBuf::from("/etc/cni/net.d"));
        assert_eq!(got.max_conf_num, 1);
        assert_eq!(
            got.networks,
            vec![CriNetwork {
                name: "net-a".into(),
                ipam_types: vec!["host-local".into()],
            }]
        );
    }

    #[test]
    fn none_loaded_is_no_network_not_unread() {
        let text = r#"{"PluginDirs":["/opt/cni/bin"],"PluginConfDir":"/etc/cni/net.d","PluginMaxConfNum":1,"Prefix":"eth","Networks":null}"#;
        assert!(decode(text).unwrap().networks.is_empty());
    }

    #[test]
    fn what_is_not_go_cni_s_config_result_is_unread() {
        assert!(decode("").is_err());
        assert!(decode(r#"{"PluginConfDir":"/d","Networks":3}"#).is_err());
        assert!(decode(r#"{"Networks":[]}"#).is_err(), "no conf dir");
        let nameless =
            r#"{"PluginConfDir":"/d","Networks":[{"Config":{"Name":""},"IFName":"eth0"}]}"#;
        assert!(decode(nameless).is_err());
        let configless = r#"{"PluginConfDir":"/d","Networks":[{"IFName":"eth0"}]}"#;
        assert!(decode(configless).is_err());
        let long = format!("{{\"Prefix\":\"{}\"}}", "x".repeat(MAX_BYTES));
        assert!(decode(&long).unwrap_err().contains("over the"));
    }
}
