//! Pod networking as CNI leaves it on disk: the networks CRI sets pods up
//! with (the conflists of its `conf_dir`) and, for each network whose IPAM
//! is host-local, the addresses it holds reserved. host-local keeps one
//! file per address, `<dataDir>/<network>/<ip>`, whose first line is the id
//! of the container (for CRI: the sandbox) it was given to; CRI's teardown
//! (CNI DEL) removes it. containerd has no CNI garbage collection
//! (containerd#12130, #5768): a DEL that failed or never ran leaves the
//! file, and the range runs dry ("no IP addresses available in range set").

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::model::cri_status::UnixNanos;

/// CNI's default network config directory, CRI's `conf_dir` default.
pub const DEFAULT_CNI_CONF_DIR: &str = "/etc/cni/net.d";
/// host-local's default `dataDir`.
pub const DEFAULT_HOST_LOCAL_DIR: &str = "/var/lib/cni/networks";
/// The loopback network go-cni adds for CRI (`WithLoNetwork`).
pub const CNI_LOOPBACK: &str = "cni-loopback";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CniView {
    /// The directory the network configs were read from.
    #[serde(with = "crate::model::path_json")]
    pub conf_dir: PathBuf,
    /// Each network with host-local IPAM the directory holds, by file
    /// name, CRI's or not: another CNI user's (podman's, a CNI plugin's
    /// own config) is kept as context, never judged.
    pub networks: Vec<CniNetwork>,
    /// The names of the networks CRI loads from the directory, as go-cni's
    /// `loadFromConfDir` does: the valid configs, by file name, the first
    /// `max_conf_num`; none when go-cni fails on one of those.
    #[serde(default)]
    pub cri_networks: Vec<String>,
    /// libcni's cached ADD results for those networks: what names the pod
    /// behind an address or a network namespace once its sandbox is gone.
    #[serde(default)]
    pub attachments: Vec<CachedAttachment>,
    /// Which files CRI loads under each libcni's rules, read before
    /// containerd's line is known and settled once it is
    /// (`sources::cni::settle`): never recorded.
    #[serde(skip)]
    pub pending: Vec<PendingLoad>,
    /// Whose word [`CniView::cri_networks`] is: CRI's own, or the files'.
    #[serde(default)]
    pub networks_from: NetworksFrom,
}

/// Where the networks CRI loads were taken from. CRI's `Status(verbose)`
/// says which it loaded (go-cni's `GetConfig`); the config files, read as
/// the line's libcni reads them, are the fallback when it does not say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "from")]
pub enum NetworksFrom {
    /// CRI's answer, over a connection whose peer is the proven daemon;
    /// the conf dir it names (read again when the config names another).
    Cri {
        #[serde(with = "crate::model::path_json")]
        conf_dir: PathBuf,
    },
    /// The files of the conf dir: CRI did not say, for `why`.
    Files { why: String },
    /// A recording made before nodectl told.
    #[default]
    Unrecorded,
}

/// What CRI's `Status(verbose)` reports of its CNI setup (`cniconfig`,
/// go-cni's `ConfigResult`): its conf dir and the networks it loaded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriCniConfig {
    #[serde(with = "crate::model::path_json")]
    pub conf_dir: PathBuf,
    pub max_conf_num: i64,
    /// Every network but go-cni's loopback, in CRI's order.
    pub networks: Vec<CriNetwork>,
}

/// One network CRI loaded: the name host-local keys its store by, and the
/// IPAM type of each plugin of its chain that has one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriNetwork {
    pub name: String,
    pub ipam_types: Vec<String>,
}

/// What go-cni makes of a `conf_dir` under one libcni's rules.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingLoad {
    /// The libcni release (`peers::libcni::Rules::name`).
    pub rules: &'static str,
    /// The files CRI loads, in order, each with its network's name; or why
    /// go-cni fails the whole load.
    pub loaded: Result<Vec<(PathBuf, String)>, String>,
    /// Each file libcni refuses, and why.
    pub refused: Vec<(PathBuf, String)>,
}

/// One entry of libcni's result cache (`<cache>/<network>-<id>-<ifname>`),
/// written when a pod's ADD went through and removed only by its DEL: it
/// outlives a sandbox whose teardown never ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CachedAttachment {
    pub network: String,
    /// The container (for CRI, the sandbox) the ADD was for.
    pub container_id: String,
    pub ifname: String,
    /// The pod's network namespace: the cache's own `netns` (libcni 1.2+,
    /// containerd 2.x), else the result's pod-side interface `sandbox`
    /// (what bridge, ptp and most plugins report, on every line).
    pub netns: Option<String>,
    /// CRI's CNI_ARGS: K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_UID.
    pub pod_namespace: Option<String>,
    pub pod_name: Option<String>,
    #[serde(default)]
    pub pod_uid: Option<String>,
}

impl CniView {
    /// libcni's cache as the checks look things up in it, built once per
    /// use ([`CniIndex`]).
    pub fn index(&self) -> CniIndex<'_> {
        let mut in_netns = HashMap::new();
        let mut of_uid = HashMap::new();
        let cri: HashSet<&str> = self.cri_networks.iter().map(String::as_str).collect();
        for attachment in &self.attachments {
            if let Some(uid) = attachment.pod_uid.as_deref() {
                of_uid.entry(uid).or_insert(attachment);
            }
            // Another CNI user's entry (podman keeps its results in the
            // same cache) names no pod's namespace.
            let cris =
                attachment.network == CNI_LOOPBACK || cri.contains(attachment.network.as_str());
            // By file name: `/run/netns` and `/var/run/netns` are one
            // directory spelt two ways.
            let name = attachment
                .netns
                .as_deref()
                .and_then(|netns| std::path::Path::new(netns).file_name());
            if let (true, Some(name)) = (cris, name) {
                in_netns.entry(name).or_insert(attachment);
            }
        }
        CniIndex { in_netns, of_uid }
    }
}

/// libcni's cache by what the checks ask of it: the first cached attachment
/// of each pod uid, and of CRI's networks in each network namespace's file
/// name. Built once, so that a check asks in constant time for each of its
/// items: searched through for each, a `check --from` archive of 300,000
/// namespaces and 180,000 attachments had not finished in 600 s.
pub struct CniIndex<'a> {
    in_netns: HashMap<&'a OsStr, &'a CachedAttachment>,
    of_uid: HashMap<&'a str, &'a CachedAttachment>,
}

impl<'a> CniIndex<'a> {
    /// The namespace and name of the pod of uid `uid`, when a cached
    /// attachment still names it (its DEL never ran).
    pub fn pod_of_uid(&self, uid: &str) -> (Option<String>, Option<String>) {
        self.of_uid.get(uid).map_or((None, None), |a| {
            (a.pod_namespace.clone(), a.pod_name.clone())
        })
    }

    /// The cached attachment of one of CRI's networks whose network
    /// namespace is the file `name`.
    pub fn attachment_in_netns(&self, name: &OsStr) -> Option<&'a CachedAttachment> {
        self.in_netns.get(name).copied()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CniNetwork {
    pub name: String,
    /// The config file that names it.
    #[serde(with = "crate::model::path_json")]
    pub conf_file: PathBuf,
    /// host-local's store for it: `<dataDir>/<name>`.
    #[serde(with = "crate::model::path_json")]
    pub store: PathBuf,
    /// How many addresses its ranges give out, when the config says.
    pub capacity: Option<u64>,
    pub reservations: Vec<IpReservation>,
    /// Whether CRI loads this config (see [`CniView::cri_networks`]): only
    /// then are its reservations CRI's to judge. Absent in a recording
    /// made before nodectl told: not CRI's, nothing judged.
    #[serde(default)]
    pub loaded_by_cri: bool,
}

/// How much of a network's range host-local holds: `check`'s and
/// `leaked-ips`' report and metrics, for a warning before the range is
/// used up (every new pod on the node then fails).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AddressUse {
    pub network: String,
    pub reserved: usize,
    /// How many addresses its ranges give out, when the config says.
    pub capacity: Option<u64>,
}

impl CniView {
    /// The networks whose reservations are CRI's: those CRI loads whose
    /// store no other config of the directory shares (a store shared with
    /// another CNI user's network holds addresses of both, told apart by
    /// nothing).
    pub fn cri_networks(&self) -> impl Iterator<Item = &CniNetwork> {
        self.networks.iter().filter(|n| {
            n.loaded_by_cri
                && !self
                    .networks
                    .iter()
                    .any(|other| !other.loaded_by_cri && other.store == n.store)
        })
    }

    /// Whether libcni's cache entry `attachment` is of a network CRI set up
    /// (one it loads, or go-cni's own loopback network, `cni-loopback`).
    pub fn is_cri_attachment(&self, attachment: &CachedAttachment) -> bool {
        attachment.network == CNI_LOOPBACK || self.cri_networks.contains(&attachment.network)
    }

    /// Each of CRI's networks' use of its range (another CNI user's range
    /// is not the pods').
    pub fn address_use(&self) -> Vec<AddressUse> {
        self.cri_networks()
            .map(|n| AddressUse {
                network: n.name.clone(),
                reserved: n.reservations.len(),
                capacity: n.capacity,
            })
            .collect()
    }
}

/// One address host-local holds reserved.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IpReservation {
    pub ip: String,
    /// The container (for CRI, the sandbox) it was given to.
    pub container_id: String,
    /// The interface in the pod it was given for (second line; absent in
    /// files written by host-local before v0.9).
    pub ifname: Option<String>,
    /// When the reservation was written (the file's mtime).
    pub reserved_at: UnixNanos,
    /// The pod it was for, from libcni's result cache
    /// (`/var/lib/cni/results/<network>-<id>-<ifname>`, whose CNI_ARGS carry
    /// K8S_POD_NAMESPACE and K8S_POD_NAME), which outlives the sandbox.
    #[serde(default)]
    pub pod_namespace: Option<String>,
    #[serde(default)]
    pub pod_name: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cached(network: &str, id: &str, netns: &str, uid: &str, name: &str) -> CachedAttachment {
        CachedAttachment {
            network: network.into(),
            container_id: id.into(),
            ifname: "eth0".into(),
            netns: Some(netns.into()),
            pod_namespace: Some("shop".into()),
            pod_name: Some(name.into()),
            pod_uid: Some(uid.into()),
        }
    }

    #[test]
    fn the_index_answers_as_a_search_of_the_cache_in_order_would() {
        let view = CniView {
            attachments: vec![
                cached("podman", "p", "/run/netns/shared", "u-p", "theirs"),
                cached("pods", "a", "/var/run/netns/cni-1", "u-1", "first"),
                cached("pods", "b", "/run/netns/cni-1", "u-1", "second"),
                cached(CNI_LOOPBACK, "c", "/run/netns/cni-2", "u-2", "lo"),
            ],
            cri_networks: vec!["pods".into()],
            ..CniView::default()
        };
        let index = view.index();
        // The first of CRI's entries for a namespace, by file name.
        let found = index.attachment_in_netns(OsStr::new("cni-1")).unwrap();
        assert_eq!(found.container_id, "a");
        assert_eq!(
            index
                .attachment_in_netns(OsStr::new("cni-2"))
                .unwrap()
                .container_id,
            "c"
        );
        // Another CNI user's entry names no pod's namespace.
        assert!(index.attachment_in_netns(OsStr::new("shared")).is_none());
        // A pod by uid: the first entry naming it, whatever its network.
        assert_eq!(index.pod_of_uid("u-1").1.as_deref(), Some("first"));
        assert_eq!(index.pod_of_uid("u-p").1.as_deref(), Some("theirs"));
        assert_eq!(index.pod_of_uid("none"), (None, None));
    }
}
