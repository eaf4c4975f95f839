//! CNI on disk: the network configs in CRI's `conf_dir` (as libcni lists
//! them: `*.conf`, `*.conflist` and `*.json`, by name), which of them CRI
//! loads (go-cni's and libcni's rules, per libcni release, in
//! `peers::libcni`; settled by containerd's line once it is known,
//! [`settle`]), and for each network whose IPAM is host-local, the
//! addresses its store holds
//! (`<dataDir>/<network>/<ip>`: the container id, then the interface), each
//! with the pod libcni's result cache names. Read as data, never run: no
//! plugin is executed.

use std::cell::Cell;
use std::collections::HashSet;
use std::fs;
use std::io;
use std::net::IpAddr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::model::cni::{PendingLoad, CNI_LOOPBACK, DEFAULT_CNI_CONF_DIR};
use crate::model::{
    CachedAttachment, CniNetwork, CniView, CriCniConfig, Gap, IpReservation, NetworksFrom, Paths,
    Source,
};
use crate::peers::host_local;
use crate::peers::libcni::{self, ConfFile, Rules};
use crate::read::bounded::{read_regular, Links};
use crate::read::deadline::reading;
use crate::read::listed::{ListedDir, MOVED_AWAY};
use crate::sources::host_view::HostView;

pub(crate) const SOURCE: Source = Source::Cni;
/// A network config: a few KiB.
const CONF_LIMIT: u64 = 1 << 20;
/// The most config files read from the directory, and from a plugin
/// directory (libcni 1.3): past it the rest is a gap, not a stall.
const CONF_FILES_LIMIT: usize = 1000;
/// The most bytes of config files read in one look, all directories
/// together: a file past it is taken as unread (refused: nothing judged).
const CONF_BYTES_BUDGET: u64 = 64 << 20;
/// A reservation: an id and an interface name.
const RESERVATION_LIMIT: u64 = 4096;
/// A cached CNI result: the config and the result, some KiB.
const RESULT_LIMIT: u64 = 1 << 20;
/// The IPAM plugin whose store nodectl reads.
const HOST_LOCAL: &str = "host-local";
/// libcni's cache of results (its default `CacheDir`, which CRI keeps).
pub const RESULT_CACHE: &str = "/var/lib/cni/results";

/// The CNI config directory CRI reads: the config's, else the default.
pub fn conf_dir(configured: Option<&Path>) -> PathBuf {
    configured.map_or_else(|| PathBuf::from(DEFAULT_CNI_CONF_DIR), Path::to_path_buf)
}

/// [`read`] of the conf_dir `paths` name (CRI's config's, else the
/// default), held to the host's as nodectl's place under `proc_root` tells.
pub fn read_configured(paths: &Paths, proc_root: &Path, gaps: &mut Vec<Gap>) -> CniView {
    let conf_dir = conf_dir(paths.cni_conf_dir.as_deref());
    let configured = paths.cni_conf_dir.is_some();
    let max_conf_num = paths.cni_max_conf_num.unwrap_or(DEFAULT_MAX_CONF_NUM);
    let host = HostView::of(proc_root);
    let cache = Path::new(RESULT_CACHE);
    read(&conf_dir, configured, max_conf_num, cache, &host, gaps)
}

/// The entries of `dir` libcni's `ConfFiles` lists for `extensions`: every
/// one but a directory (a symlink is kept, even to one), by the extension
/// Go's filepath.Ext sees, sorted bytewise (go-cni's `sort.Strings`;
/// `os.ReadDir`'s order for a plugin directory), each read (followed, but
/// only to a regular file: config management and DaemonSets link them).
fn conf_files(
    dir: &Path,
    extensions: &[&str],
    budget: &Cell<u64>,
) -> io::Result<Result<Vec<ConfFile>, String>> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)?
        .flatten()
        .filter(|e| !e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| libcni::has_extension(e.file_name().as_bytes(), extensions))
        .map(|e| e.path())
        .collect();
    if files.len() > CONF_FILES_LIMIT {
        return Ok(Err(format!(
            "{} config files, more than the {CONF_FILES_LIMIT} nodectl reads",
            files.len()
        )));
    }
    files.sort();
    Ok(Ok(files
        .into_iter()
        .map(|file| {
            reading(&file);
            let left = budget.get();
            let bytes = read_regular(&file, CONF_LIMIT.min(left), Links::Follow)
                .map(|read| read.bytes)
                .map_err(|e| match left < CONF_LIMIT {
                    true => {
                        format!("{e}: past the {CONF_BYTES_BUDGET} bytes of configs nodectl reads")
                    }
                    false => e.to_string(),
                });
            if let Ok(bytes) = &bytes {
                budget.set(left.saturating_sub(bytes.len() as u64));
            }
            (file, bytes)
        })
        .collect()))
}

/// A plugin directory (libcni 1.3's `<conf_dir>/<network>/`) as
/// `NetworkPluginConfsFromFiles` reads it: absent is no plugin; unreadable,
/// or more files than nodectl reads, refuses the network.
/// One nodectl does not see as the host has it (a DaemonSet that does not
/// mount it) refuses it too: never read as no plugin.
fn plugin_files(dir: &Path, budget: &Cell<u64>, host: &HostView) -> Result<Vec<ConfFile>, String> {
    reading(dir);
    if let Some(why) = host.hidden(dir) {
        return Err(format!("{}: {why}", dir.display()));
    }
    match conf_files(dir, &[".conf"], budget) {
        Ok(files) => files,
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(err) => Err(format!("{}: {err}", dir.display())),
    }
}

/// Reads every network config of `conf_dir`, which of them CRI loads
/// (under each libcni's rules, see [`settle`]), and what host-local holds
/// for each. No directory is no CNI (a node of host-network pods), not a
/// gap, unless CRI's config names it (`configured`: CRI is set to use CNI
/// from there). A directory or store that is not the host's as `host`
/// tells (a DaemonSet that does not mount it) is a gap for the source:
/// never read as nothing.
pub fn read(
    conf_dir: &Path,
    configured: bool,
    max_conf_num: i64,
    result_cache: &Path,
    host: &HostView,
    gaps: &mut Vec<Gap>,
) -> CniView {
    let mut view = CniView {
        conf_dir: conf_dir.to_path_buf(),
        ..CniView::default()
    };
    reading(conf_dir);
    if let Some(why) = host.hidden(conf_dir) {
        gaps.push(Gap::source(SOURCE, conf_dir, why));
        return view;
    }
    let budget = Cell::new(CONF_BYTES_BUDGET);
    let files = match conf_files(conf_dir, libcni::CONF_EXTENSIONS, &budget) {
        Ok(Ok(files)) => files,
        Ok(Err(why)) => {
            gaps.push(Gap::source(SOURCE, conf_dir, why));
            return view;
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound && configured => {
            gaps.push(Gap::source(
                SOURCE,
                conf_dir,
                "CRI's config names it (conf_dir) and it does not exist: CRI loads no network, \
                 and what host-local holds is not judged",
            ));
            return view;
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => return view,
        Err(err) => {
            gaps.push(Gap::source(SOURCE, conf_dir, err));
            return view;
        }
    };
    let loads: Vec<(Rules, libcni::DirLoad)> = Rules::ALL
        .iter()
        .map(|&rules| {
            let mut list = |dir: &Path| plugin_files(dir, &budget, host);
            (
                rules,
                libcni::load_dir(&files, max_conf_num, rules, &mut list),
            )
        })
        .collect();
    view.pending = loads
        .iter()
        .map(|(rules, load)| pending(*rules, &files, load))
        .collect();
    // Each file's host-local network, as any libcni makes it (libcni 1.3's
    // has the plugins of its directory too): the context, judged only if
    // CRI loads it.
    for (index, (file, _)) in files.iter().enumerate() {
        let network = loads
            .iter()
            .filter_map(|(_, load)| load.files[index].as_ref().ok())
            .find_map(|network| Some((network, network.host_local()?)));
        if let Some((network, (store, ipam))) = network {
            let network = CniNetwork {
                name: network.name.clone(),
                conf_file: file.clone(),
                store,
                capacity: host_local::capacity(ipam),
                reservations: Vec::new(),
                loaded_by_cri: false,
            };
            view.networks.push(read_store(network, host, gaps));
        }
    }
    // The cache only names pods: not the host's, it names none.
    view.attachments = match host.hidden(result_cache) {
        Some(why) => {
            gaps.push(Gap::item(SOURCE, result_cache, why));
            Vec::new()
        }
        None => read_cache(result_cache, &view, gaps),
    };
    name_reservations(&mut view);
    view
}

/// Each reservation's pod from its cached attachment, looked up, not
/// searched for: reservations and cache entries are each thousands on a
/// busy node.
fn name_reservations(view: &mut CniView) {
    let mut cached_for = std::collections::HashMap::new();
    for a in &view.attachments {
        let key = (
            a.network.as_str(),
            a.container_id.as_str(),
            a.ifname.as_str(),
        );
        cached_for.entry(key).or_insert(a);
    }
    for network in &mut view.networks {
        for reservation in &mut network.reservations {
            let cached = reservation.ifname.as_deref().and_then(|ifname| {
                let key = (
                    network.name.as_str(),
                    reservation.container_id.as_str(),
                    ifname,
                );
                cached_for.get(&key)
            });
            if let Some(cached) = cached {
                reservation.pod_namespace.clone_from(&cached.pod_namespace);
                reservation.pod_name.clone_from(&cached.pod_name);
            }
        }
    }
}

/// A [`libcni::DirLoad`] as the model keeps it until the line is known.
fn pending(rules: Rules, files: &[ConfFile], load: &libcni::DirLoad) -> PendingLoad {
    let loaded = load.loaded.clone().map(|indices| {
        indices
            .into_iter()
            .filter_map(|i| {
                let network = load.files[i].as_ref().ok()?;
                Some((files[i].0.clone(), network.name.clone()))
            })
            .collect()
    });
    let refused = files
        .iter()
        .zip(&load.files)
        .filter_map(|((file, _), network)| Some((file.clone(), network.clone().err()?)))
        .collect();
    PendingLoad {
        rules: rules.name(),
        loaded,
        refused,
    }
}

/// Settles which networks CRI loads by the libcni containerd `version`
/// vendors ([`Rules::of_containerd`]): those are CRI's networks, each file
/// libcni refuses is a gap naming it (its network is not judged), and a
/// load go-cni fails is a gap for the directory. With the version unknown
/// (or a line not read), the rules that agree settle it; where they do not,
/// only the files every rule loads are CRI's, with a gap saying so. A view
/// from a recording has nothing pending and is kept as recorded.
pub fn settle(view: &mut CniView, version: Option<&str>, gaps: &mut Vec<Gap>) {
    let pending = std::mem::take(&mut view.pending);
    if pending.is_empty() {
        return;
    }
    let rules = version.and_then(Rules::of_containerd);
    let chosen: Vec<&PendingLoad> = match rules {
        Some(rules) => pending.iter().filter(|p| p.rules == rules.name()).collect(),
        None => pending.iter().collect(),
    };
    let unsure = chosen.windows(2).any(|w| w[0].loaded != w[1].loaded);
    // The files every chosen rule loads.
    let loaded: Vec<(PathBuf, String)> = match chosen.first().map(|p| &p.loaded) {
        Some(Ok(first)) => first
            .iter()
            .filter(|entry| {
                chosen
                    .iter()
                    .all(|p| p.loaded.as_ref().is_ok_and(|l| l.contains(entry)))
            })
            .cloned()
            .collect(),
        _ => Vec::new(),
    };
    let dir = view.conf_dir.clone();
    let lines = chosen
        .iter()
        .map(|p| p.rules)
        .collect::<Vec<_>>()
        .join("; ");
    if unsure {
        gaps.push(Gap::item(
            SOURCE,
            &dir,
            format!(
                "containerd's version ({}) does not say which libcni reads it, and {lines} load \
                 different networks from it: only those every one loads are judged",
                version.unwrap_or("unknown")
            ),
        ));
    } else if let Some(Err(why)) = chosen.first().map(|p| &p.loaded) {
        gaps.push(Gap::item(
            SOURCE,
            &dir,
            format!("CRI loads no network from it (go-cni fails: {why}); no address is judged"),
        ));
    }
    let mut refused: Vec<&(PathBuf, String)> = Vec::new();
    for p in &chosen {
        for entry in &p.refused {
            if !refused.iter().any(|r| r.0 == entry.0) {
                refused.push(entry);
            }
        }
    }
    for (file, why) in refused {
        gaps.push(Gap::item(
            SOURCE,
            file,
            format!("libcni refuses it ({lines}: {why}): its network is not CRI's, not judged"),
        ));
    }
    view.cri_networks = loaded.iter().map(|(_, name)| name.clone()).collect();
    for network in &mut view.networks {
        network.loaded_by_cri = loaded.iter().any(|(file, _)| *file == network.conf_file);
    }
}

/// Settles which networks CRI loads by CRI's own word, `told` (its
/// `Status(verbose)`, from the proven daemon; `view` read from the conf dir
/// it names): the networks it names are CRI's, whatever libcni's rules
/// would make of the files. host-local's store is keyed by the network's
/// name, so each is the first file of the directory of that name. A network
/// CRI loaded with host-local IPAM that no file read names is a gap: its
/// addresses are not judged.
pub fn settle_by_cri(view: &mut CniView, told: &CriCniConfig, gaps: &mut Vec<Gap>) {
    view.pending.clear();
    view.cri_networks = told.networks.iter().map(|n| n.name.clone()).collect();
    let mut judged: HashSet<String> = HashSet::new();
    for network in &mut view.networks {
        network.loaded_by_cri =
            view.cri_networks.contains(&network.name) && judged.insert(network.name.clone());
    }
    for network in &told.networks {
        let host_local = network.ipam_types.iter().any(|t| t == HOST_LOCAL);
        if host_local && !judged.contains(&network.name) {
            gaps.push(Gap::item(
                SOURCE,
                &view.conf_dir,
                format!(
                    "CRI says it loaded the network {:?} with host-local IPAM, and no config \
                     file nodectl read there names it: its addresses are not judged",
                    network.name
                ),
            ));
        }
    }
    view.networks_from = NetworksFrom::Cri {
        conf_dir: told.conf_dir.clone(),
    };
}

/// CRI's `max_conf_num` when its config leaves it unset.
pub const DEFAULT_MAX_CONF_NUM: i64 = 1;

/// Every address reserved in `network`'s store. No store is nothing
/// reserved yet (host-local makes it with its first address).
fn read_store(mut network: CniNetwork, host: &HostView, gaps: &mut Vec<Gap>) -> CniNetwork {
    reading(&network.store);
    if let Some(why) = host.hidden(&network.store) {
        gaps.push(Gap::source(SOURCE, &network.store, why));
        return network;
    }
    // Its identity before it is listed: a reservation gone when read was
    // released only while the store is still this directory.
    let listed = ListedDir::at(&network.store)
        .and_then(|listed| Ok((listed, fs::read_dir(&network.store)?)));
    let (listed, entries) = match listed {
        Ok(listed) => listed,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return network,
        Err(err) => {
            gaps.push(Gap::item(SOURCE, &network.store, err));
            return network;
        }
    };
    let mut addresses: Vec<(IpAddr, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            // `lock` and `last_reserved_ip.<n>` are host-local's own.
            let ip = entry.file_name().to_str()?.parse().ok()?;
            Some((ip, entry.path()))
        })
        .collect();
    addresses.sort();
    read_reservations(&mut network, &listed, addresses, gaps);
    network
}

/// The reservations of `addresses`, listed in `listed` (`network`'s
/// store). One gone when read was released meanwhile, unless the store
/// went with it: then the store is a gap for the whole source.
fn read_reservations(
    network: &mut CniNetwork,
    listed: &ListedDir,
    addresses: Vec<(IpAddr, PathBuf)>,
    gaps: &mut Vec<Gap>,
) {
    for (ip, file) in addresses {
        reading(&file);
        // host-local writes these itself, never as symlinks.
        let read = match read_regular(&file, RESERVATION_LIMIT, Links::Refuse) {
            Ok(read) => read,
            Err(err) if err.kind() == io::ErrorKind::NotFound && !listed.still_there() => {
                gaps.push(Gap::source(SOURCE, &network.store, MOVED_AWAY));
                break;
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
            Err(err) => {
                gaps.push(Gap::item(SOURCE, &file, err));
                continue;
            }
        };
        let text = String::from_utf8_lossy(&read.bytes);
        let mut lines = text.lines().map(str::trim);
        let container_id = lines.next().unwrap_or_default().to_string();
        let ifname = lines.next().filter(|l| !l.is_empty()).map(str::to_string);
        network.reservations.push(IpReservation {
            ip: ip.to_string(),
            container_id,
            ifname,
            reserved_at: read.modified_nanos,
            pod_namespace: None,
            pod_name: None,
        });
    }
}

/// The most cache entries read: one per pod and network, so a node's
/// worth many times over; past it the rest is a gap, not a stall.
const CACHE_ENTRIES_LIMIT: usize = 20_000;

/// libcni's cached ADD results for the networks of `view` and CRI's
/// loopback (`<cache>/<network>-<id>-<ifname>`), each with the pod its CNI_ARGS name and the network
/// namespace it was made in. No cache is nothing cached.
fn read_cache(cache: &Path, view: &CniView, gaps: &mut Vec<Gap>) -> Vec<CachedAttachment> {
    reading(cache);
    let entries = match fs::read_dir(cache) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Vec::new(),
        Err(err) => {
            gaps.push(Gap::item(SOURCE, cache, err));
            return Vec::new();
        }
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let network_names = view.networks.iter().map(|n| n.name.as_str());
            let cri_names = view.cri_networks.iter().map(String::as_str);
            network_names
                .chain(cri_names)
                .chain([CNI_LOOPBACK])
                .any(|network| {
                    name.strip_prefix(network)
                        .is_some_and(|r| r.starts_with('-'))
                })
        })
        .collect();
    files.sort();
    if files.len() > CACHE_ENTRIES_LIMIT {
        gaps.push(Gap::item(
            SOURCE,
            cache,
            format!(
                "{} cached results; read the first {CACHE_ENTRIES_LIMIT}",
                files.len()
            ),
        ));
        files.truncate(CACHE_ENTRIES_LIMIT);
    }
    let mut attachments = Vec::new();
    for file in files {
        reading(&file);
        // libcni writes these itself, never as symlinks; an entry that is
        // not one, or not JSON, names nothing.
        let Ok(read) = read_regular(&file, RESULT_LIMIT, Links::Refuse) else {
            continue;
        };
        let Ok(cached) = serde_json::from_slice::<Value>(&read.bytes) else {
            continue;
        };
        attachments.extend(attachment(&cached));
    }
    attachments
}

/// What one cache entry says, when it says which container and network.
fn attachment(cached: &Value) -> Option<CachedAttachment> {
    let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_string);
    let arg = |key: &str| {
        cached["cniArgs"].as_array()?.iter().find_map(|pair| {
            let pair = pair.as_array()?;
            (pair.first()?.as_str()? == key).then(|| text(pair.get(1)?))?
        })
    };
    let ifname = text(&cached["ifName"])?;
    let pod_side = cached["result"]["interfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["name"].as_str() == Some(ifname.as_str()))
        .and_then(|i| text(&i["sandbox"]));
    Some(CachedAttachment {
        network: text(&cached["networkName"])?,
        container_id: text(&cached["containerId"])?,
        netns: text(&cached["netns"]).or(pod_side),
        pod_namespace: arg("K8S_POD_NAMESPACE"),
        pod_name: arg("K8S_POD_NAME"),
        pod_uid: arg("K8S_POD_UID"),
        ifname,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CriNetwork;
    use serde_json::json;

    fn network(name: &str, file: &str) -> CniNetwork {
        CniNetwork {
            name: name.into(),
            conf_file: PathBuf::from(file),
            store: PathBuf::from("/var/lib/cni/networks").join(name),
            capacity: None,
            reservations: Vec::new(),
            loaded_by_cri: false,
        }
    }

    #[test]
    fn cri_s_word_decides_which_networks_are_its_own_whatever_the_files_say() {
        let mut view = CniView {
            conf_dir: PathBuf::from("/etc/cni/net.d"),
            networks: vec![
                network("pods", "/etc/cni/net.d/10-pods.conflist"),
                network("pods", "/etc/cni/net.d/20-pods-again.conflist"),
                network("podman", "/etc/cni/net.d/87-podman.conflist"),
            ],
            ..CniView::default()
        };
        // What libcni's rules would have made of the files, and been wrong.
        view.cri_networks = vec!["podman".into()];
        let told = CriCniConfig {
            conf_dir: PathBuf::from("/etc/cni/net.d"),
            max_conf_num: 1,
            networks: vec![
                CriNetwork {
                    name: "pods".into(),
                    ipam_types: vec![HOST_LOCAL.into()],
                },
                CriNetwork {
                    name: "unseen".into(),
                    ipam_types: vec![HOST_LOCAL.into()],
                },
                CriNetwork {
                    name: "dhcp-only".into(),
                    ipam_types: vec!["dhcp".into()],
                },
            ],
        };
        let mut gaps = Vec::new();
        settle_by_cri(&mut view, &told, &mut gaps);
        let loaded: Vec<(&str, bool)> = view
            .networks
            .iter()
            .map(|n| (n.conf_file.to_str().unwrap(), n.loaded_by_cri))
            .collect();
        assert_eq!(
            loaded,
            [
                ("/etc/cni/net.d/10-pods.conflist", true),
                // host-local's store is the name's: judged once.
                ("/etc/cni/net.d/20-pods-again.conflist", false),
                ("/etc/cni/net.d/87-podman.conflist", false),
            ]
        );
        assert_eq!(view.cri_networks, ["pods", "unseen", "dhcp-only"]);
        assert_eq!(
            view.networks_from,
            NetworksFrom::Cri {
                conf_dir: PathBuf::from("/etc/cni/net.d")
            }
        );
        // A host-local network CRI loaded that no file names: a gap; one
        // of another IPAM is none of host-local's business.
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(gaps[0].error.contains("\"unseen\""), "{gaps:?}");
    }

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn reservations_of_host_local_networks_are_read_with_their_pods() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("net.d");
        let data = dir.path().join("networks");
        let cache = dir.path().join("results");
        let sandbox = "a".repeat(64);
        write(
            &conf.join("10-pods.conflist"),
            &json!({
                "cniVersion": "1.0.0", "name": "pods",
                "plugins": [
                    {"type": "bridge", "ipam": {
                        "type": "host-local", "dataDir": data,
                        "ranges": [[{"subnet": "10.251.0.0/29"}]]}},
                    {"type": "portmap"}
                ]
            })
            .to_string(),
        );
        // Not host-local: no store to read.
        write(
            &conf.join("20-other.conf"),
            &json!({"name": "dhcp", "type": "macvlan", "ipam": {"type": "dhcp"}}).to_string(),
        );
        write(&conf.join("30-broken.conflist"), "{not json");
        write(&conf.join("README"), "not a config");
        write(&data.join("pods/10.251.0.2"), &format!("{sandbox}\r\neth0"));
        write(&data.join("pods/10.251.0.3"), "b\neth0\n");
        write(&data.join("pods/last_reserved_ip.0"), "10.251.0.3");
        write(&data.join("pods/lock"), "");
        write(
            &cache.join(format!("pods-{sandbox}-eth0")),
            &json!({"kind": "cniCacheV1", "containerId": sandbox, "ifName": "eth0",
                "networkName": "pods", "cniArgs": [
                ["K8S_POD_NAMESPACE", "shop"], ["K8S_POD_NAME", "cart-7d9"], ["K8S_POD_UID", "u-1"]
            ], "result": {"interfaces": [
                {"name": "cni0"}, {"name": "veth1"},
                {"name": "eth0", "sandbox": "/var/run/netns/cni-1234"}
            ]}})
            .to_string(),
        );
        // 2.x's libcni keeps the namespace itself; another network's entry
        // (containerd's loopback) is not read.
        write(
            &cache.join("pods-c-eth1"),
            &json!({"kind": "cniCacheV1", "containerId": "c", "ifName": "eth1",
                "networkName": "pods", "netns": "/run/netns/cni-5678"})
            .to_string(),
        );
        write(&cache.join("cni-loopback-c-lo"), "{}");
        write(&cache.join("pods-d-eth0"), "{not json");

        let mut gaps = Vec::new();
        let mut view = read(
            &conf,
            false,
            DEFAULT_MAX_CONF_NUM,
            &cache,
            &HostView::Same,
            &mut gaps,
        );
        settle(&mut view, Some("1.7.34"), &mut gaps);
        assert_eq!(gaps.len(), 1, "the broken config is a gap: {gaps:?}");
        assert!(gaps[0].path.ends_with("30-broken.conflist"));
        assert_eq!(view.networks.len(), 1);
        let pods = &view.networks[0];
        assert_eq!((pods.name.as_str(), pods.capacity), ("pods", Some(5)));
        assert_eq!(pods.store, data.join("pods"));
        let held: Vec<(&str, &str, Option<&str>, Option<&str>)> = pods
            .reservations
            .iter()
            .map(|r| {
                (
                    r.ip.as_str(),
                    r.container_id.as_str(),
                    r.ifname.as_deref(),
                    r.pod_name.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            held,
            [
                (
                    "10.251.0.2",
                    sandbox.as_str(),
                    Some("eth0"),
                    Some("cart-7d9")
                ),
                ("10.251.0.3", "b", Some("eth0"), None),
            ]
        );
        assert_eq!(pods.reservations[0].pod_namespace.as_deref(), Some("shop"));
        assert!(pods.reservations[0].reserved_at > 0);
        assert_eq!(view.attachments.len(), 2, "{:?}", view.attachments);
        let index = view.index();
        let named = index.attachment_in_netns("cni-1234".as_ref()).unwrap();
        assert_eq!(
            (named.container_id.as_str(), named.pod_name.as_deref()),
            (sandbox.as_str(), Some("cart-7d9"))
        );
        assert_eq!(
            index.pod_of_uid("u-1"),
            (Some("shop".to_string()), Some("cart-7d9".to_string()))
        );
        assert_eq!(index.pod_of_uid("u-2"), (None, None));
        let unnamed = index.attachment_in_netns("cni-5678".as_ref()).unwrap();
        assert_eq!(
            (unnamed.container_id.as_str(), unnamed.pod_name.as_deref()),
            ("c", None)
        );
    }

    #[test]
    fn only_the_networks_cri_loads_are_cri_s_and_another_s_store_is_context() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("net.d");
        let data = dir.path().join("networks");
        let network = |name: &str, subnet: &str| {
            json!({"cniVersion": "1.0.0", "name": name, "plugins": [{"type": "bridge",
                "ipam": {"type": "host-local", "dataDir": data, "ranges": [[{"subnet": subnet}]]}}]})
            .to_string()
        };
        write(
            &conf.join("10-pods.conflist"),
            &network("pods", "10.251.0.0/29"),
        );
        write(
            &conf.join("87-podman.conflist"),
            &network("podman", "10.88.9.0/29"),
        );
        // A directory named like a config is not one (libcni skips it).
        fs::create_dir_all(conf.join("50-dir.conflist")).unwrap();
        write(&data.join("pods/10.251.0.2"), "a\neth0");
        write(&data.join("podman/10.88.9.2"), "p\neth0");
        let mut gaps = Vec::new();
        let mut view = read(
            &conf,
            false,
            1,
            &dir.path().join("results"),
            &HostView::Same,
            &mut gaps,
        );
        settle(&mut view, Some("1.7.34"), &mut gaps);
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(view.cri_networks, ["pods"]);
        let loaded: Vec<(&str, bool, usize)> = view
            .networks
            .iter()
            .map(|n| (n.name.as_str(), n.loaded_by_cri, n.reservations.len()))
            .collect();
        assert_eq!(loaded, [("pods", true, 1), ("podman", false, 1)]);
        let cri_s: Vec<&str> = view.cri_networks().map(|n| n.name.as_str()).collect();
        assert_eq!(cri_s, ["pods"]);
        assert_eq!(view.address_use().len(), 1, "the pods' range alone");
        // max_conf_num 0: both are CRI's.
        let mut view = read(
            &conf,
            false,
            0,
            &dir.path().join("results"),
            &HostView::Same,
            &mut gaps,
        );
        settle(&mut view, Some("1.7.34"), &mut gaps);
        assert_eq!(view.cri_networks, ["pods", "podman"]);
        // A config go-cni fails on first: CRI loads none, said in a gap.
        write(&conf.join("05-broken.conflist"), "{not json");
        let mut gaps = Vec::new();
        let mut view = read(
            &conf,
            false,
            1,
            &dir.path().join("results"),
            &HostView::Same,
            &mut gaps,
        );
        settle(&mut view, Some("1.7.34"), &mut gaps);
        assert!(view.cri_networks.is_empty());
        assert_eq!(view.cri_networks().count(), 0);
        assert!(
            gaps.iter()
                .any(|g| g.error.contains("CRI loads no network")),
            "{gaps:?}"
        );
    }

    /// `conf_dir` read and settled as containerd `version`'s CRI loads it.
    fn settled(conf: &Path, max: i64, version: Option<&str>) -> (CniView, Vec<Gap>) {
        let mut gaps = Vec::new();
        let results = conf.with_file_name("results");
        let mut view = read(conf, true, max, &results, &HostView::Same, &mut gaps);
        settle(&mut view, version, &mut gaps);
        (view, gaps)
    }

    fn judged(view: &CniView) -> Vec<&str> {
        view.cri_networks().map(|n| n.name.as_str()).collect()
    }

    #[test]
    fn a_network_whose_keys_are_in_capitals_is_cri_s_and_judged() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("net.d");
        let data = dir.path().join("networks");
        write(
            &conf.join("10-caps.conflist"),
            &json!({"cniVersion": "1.0.0", "name": "caps", "plugins": [{"Type": "bridge",
                "IPAM": {"Type": "host-local", "DataDir": data, "Ranges": [[{"Subnet": "10.1.0.0/29"}]]}}]})
            .to_string(),
        );
        write(&data.join("caps/10.1.0.2"), "a\neth0");
        for version in ["1.6.20~ds1", "v2.0.11", "v2.3.4"] {
            let (view, gaps) = settled(&conf, 1, Some(version));
            assert!(gaps.is_empty(), "{version}: {gaps:?}");
            assert_eq!(judged(&view), ["caps"], "{version}");
            assert_eq!(view.networks[0].reservations.len(), 1);
            assert_eq!(view.networks[0].capacity, Some(5));
        }
    }

    #[test]
    fn a_file_libcni_refuses_is_named_and_its_network_never_judged() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("net.d");
        let data = dir.path().join("networks");
        let network = |name: &str, extra: Value| {
            let mut list = json!({"cniVersion": "1.0.0", "name": name, "plugins": [{"type": "bridge",
                "ipam": {"type": "host-local", "dataDir": data}}]});
            list.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            list.to_string()
        };
        write(&conf.join("10-pods.conflist"), &network("pods", json!({})));
        // Refused by 1.x's libcni alone: CRI loads it on 2.x only.
        write(
            &conf.join("20-checked.conflist"),
            &network("checked", json!({"disableCheck": "true"})),
        );
        let refusal = |gaps: &[Gap]| {
            gaps.iter()
                .filter(|g| g.path.ends_with("20-checked.conflist"))
                .map(|g| g.error.clone())
                .collect::<Vec<_>>()
        };
        let (view, gaps) = settled(&conf, 0, Some("v1.7.34"));
        assert!(judged(&view).is_empty(), "go-cni fails the whole load");
        assert_eq!(refusal(&gaps).len(), 1, "{gaps:?}");
        assert!(refusal(&gaps)[0].contains("libcni refuses it"), "{gaps:?}");
        assert!(
            gaps.iter()
                .any(|g| g.error.contains("CRI loads no network")),
            "{gaps:?}"
        );
        // max_conf_num 1: go-cni never reads it; still named, not judged.
        let (view, gaps) = settled(&conf, 1, Some("v1.7.34"));
        assert_eq!(judged(&view), ["pods"]);
        assert_eq!(refusal(&gaps).len(), 1, "{gaps:?}");
        let (view, gaps) = settled(&conf, 0, Some("v2.0.11"));
        assert_eq!(judged(&view), ["pods", "checked"]);
        assert!(gaps.is_empty(), "{gaps:?}");
        // The line unknown: the libcnis disagree; only what every one
        // loads is judged (here none), said in a gap.
        let (view, gaps) = settled(&conf, 0, None);
        assert!(judged(&view).is_empty());
        assert!(
            gaps.iter()
                .any(|g| g.error.contains("only those every one loads")),
            "{gaps:?}"
        );
        // And where they agree, the version is not needed.
        let (view, _) = settled(&conf, 1, None);
        assert_eq!(judged(&view), ["pods"]);
        // A recording's view (nothing pending) is kept as recorded.
        let mut recorded = view.clone();
        let mut gaps = Vec::new();
        settle(&mut recorded, Some("v2.0.11"), &mut gaps);
        assert_eq!((recorded, gaps.len()), (view, 0));
    }

    #[test]
    fn libcni_1_3_s_plugin_directory_makes_a_network_cri_s_on_2_1_on() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("net.d");
        let data = dir.path().join("networks");
        write(
            &conf.join("10-split.conflist"),
            r#"{"cniVersion": "1.0.0", "name": "split"}"#,
        );
        write(
            &conf.join("split/10-bridge.conf"),
            &json!({"type": "bridge", "ipam": {"type": "host-local", "dataDir": data}}).to_string(),
        );
        write(&data.join("split/10.1.0.2"), "a\neth0");
        let (view, gaps) = settled(&conf, 1, Some("v2.3.4"));
        assert!(gaps.is_empty(), "{gaps:?}");
        assert_eq!(judged(&view), ["split"]);
        let (view, gaps) = settled(&conf, 1, Some("v2.0.11"));
        assert!(judged(&view).is_empty());
        assert!(
            gaps.iter().any(|g| g.error.contains("no 'plugins' key")),
            "{gaps:?}"
        );
        // Read as context all the same: its store is another's, not judged.
        assert_eq!(view.networks.len(), 1);
    }

    #[test]
    fn config_files_past_the_byte_budget_are_refused_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("net.d");
        let padding = "x".repeat(900 << 10);
        for n in 0..3 {
            let list =
                json!({"name": format!("n{n}"), "pad": padding, "plugins": [{"type": "bridge"}]});
            write(&conf.join(format!("{n}.conflist")), &list.to_string());
        }
        let budget = Cell::new(2 << 20);
        let files = conf_files(&conf, libcni::CONF_EXTENSIONS, &budget)
            .unwrap()
            .unwrap();
        let read: Vec<bool> = files.iter().map(|(_, bytes)| bytes.is_ok()).collect();
        assert_eq!(read, [true, true, false]);
        let err = files[2].1.as_ref().unwrap_err();
        assert!(err.contains("bytes of configs nodectl reads"), "{err}");
    }

    #[test]
    fn no_config_directory_is_no_cni_and_no_gap() {
        let dir = tempfile::tempdir().unwrap();
        let mut gaps = Vec::new();
        let view = read(
            &dir.path().join("absent"),
            false,
            1,
            dir.path(),
            &HostView::Same,
            &mut gaps,
        );
        assert!(view.networks.is_empty() && gaps.is_empty());
    }

    #[test]
    fn a_config_directory_cri_names_that_is_absent_is_a_gap() {
        let dir = tempfile::tempdir().unwrap();
        let mut gaps = Vec::new();
        let absent = dir.path().join("absent");
        let view = read(&absent, true, 1, dir.path(), &HostView::Same, &mut gaps);
        assert!(view.networks.is_empty());
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(
            gaps[0].source_unavailable && gaps[0].path == absent,
            "{gaps:?}"
        );
    }

    #[test]
    fn a_config_directory_or_store_the_host_has_and_nodectl_does_not_see_is_a_gap() {
        let dir = tempfile::tempdir().unwrap();
        let (host_root, ours) = (dir.path().join("host"), dir.path().join("ours"));
        let in_host = |path: &Path| host_root.join(path.strip_prefix("/").unwrap());
        let host = || HostView::Other(Ok(fs::File::open(&host_root).unwrap()));
        // CNI's config directory on the host, not in nodectl's container.
        let conf = ours.join("etc/cni/net.d");
        fs::create_dir_all(in_host(&conf)).unwrap();
        let mut gaps = Vec::new();
        let view = read(&conf, false, 1, &ours.join("results"), &host(), &mut gaps);
        assert!(view.networks.is_empty());
        assert!(gaps.len() == 1 && gaps[0].source_unavailable, "{gaps:?}");
        assert_eq!(gaps[0].path, conf);
        // The host's store of a network whose config nodectl reads.
        let store = ours.join("var/lib/cni/networks/pods");
        fs::create_dir_all(in_host(&store)).unwrap();
        let network = CniNetwork {
            store: store.clone(),
            name: "pods".to_string(),
            conf_file: conf.join("10-pods.conflist"),
            capacity: None,
            reservations: Vec::new(),
            loaded_by_cri: true,
        };
        let mut gaps = Vec::new();
        read_store(network, &host(), &mut gaps);
        assert!(gaps.len() == 1 && gaps[0].source_unavailable, "{gaps:?}");
        assert_eq!(gaps[0].path, store);
    }

    #[test]
    fn a_reservation_that_is_not_a_regular_file_is_a_gap_and_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("pods");
        fs::create_dir_all(&store).unwrap();
        // A symlink to a well-formed reservation: followed, it would count.
        let elsewhere = dir.path().join("elsewhere");
        fs::write(&elsewhere, "0123456789abcdef\r\neth0").unwrap();
        std::os::unix::fs::symlink(&elsewhere, store.join("10.0.0.2")).unwrap();
        nix::unistd::mkfifo(&store.join("10.0.0.3"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let network = CniNetwork {
            name: "pods".into(),
            store,
            ..CniNetwork::default()
        };
        let mut gaps = Vec::new();
        let network = read_store(network, &HostView::Same, &mut gaps);
        assert!(network.reservations.is_empty());
        assert_eq!(gaps.len(), 2, "{gaps:?}");
    }

    #[test]
    fn a_store_renamed_away_between_listing_and_reading_is_a_gap_not_no_reservations() {
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("pod-net");
        fs::create_dir(&store).unwrap();
        let addresses: Vec<(IpAddr, PathBuf)> = ["10.22.0.2", "10.22.0.3"]
            .iter()
            .map(|ip| {
                fs::write(store.join(ip), "c0ffee\r\neth0").unwrap();
                (ip.parse().unwrap(), store.join(ip))
            })
            .collect();
        let listed = ListedDir::at(&store).unwrap();
        let network = || CniNetwork {
            store: store.clone(),
            name: "pod-net".to_string(),
            conf_file: tmp.path().join("10-pod-net.conflist"),
            capacity: None,
            reservations: Vec::new(),
            loaded_by_cri: true,
        };
        // Listed, then moved away (an unmounted /var/lib/cni) before a
        // reservation is read.
        fs::rename(&store, tmp.path().join("moved")).unwrap();
        let (mut moved, mut gaps) = (network(), Vec::new());
        read_reservations(&mut moved, &listed, addresses.clone(), &mut gaps);
        assert!(moved.reservations.is_empty());
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(
            gaps[0].source_unavailable && gaps[0].path == store,
            "{gaps:?}"
        );
        // In place again: an address released meanwhile is no gap.
        fs::rename(tmp.path().join("moved"), &store).unwrap();
        fs::remove_file(store.join("10.22.0.3")).unwrap();
        let (mut kept, mut gaps) = (network(), Vec::new());
        read_reservations(&mut kept, &listed, addresses, &mut gaps);
        let ips: Vec<&str> = kept.reservations.iter().map(|r| r.ip.as_str()).collect();
        assert_eq!(ips, ["10.22.0.2"]);
        assert!(gaps.is_empty(), "{gaps:?}");
    }
}
