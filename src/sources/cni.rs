//! CNI on disk: the network configs in CRI's `conf_dir` (as libcni lists
//! them: `*.conf`, `*.conflist` and `*.json`, by name), which of them CRI
//! loads (go-cni's rules), and for each network whose IPAM is host-local,
//! the addresses its store holds
//! (`<dataDir>/<network>/<ip>`: the container id, then the interface), each
//! with the pod libcni's result cache names. Read as data, never run: no
//! plugin is executed.

use std::fs;
use std::io;
use std::net::IpAddr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::model::cni::{CNI_LOOPBACK, DEFAULT_CNI_CONF_DIR, DEFAULT_HOST_LOCAL_DIR};
use crate::model::{CachedAttachment, CniNetwork, CniView, Gap, IpReservation, Paths, Source};
use crate::read::bounded::{read_regular, Links};
use crate::read::deadline::reading;
use crate::read::listed::{ListedDir, MOVED_AWAY};
use crate::sources::host_view::HostView;

pub(crate) const SOURCE: Source = Source::Cni;
/// A network config: a few KiB.
const CONF_LIMIT: u64 = 1 << 20;
/// A reservation: an id and an interface name.
const RESERVATION_LIMIT: u64 = 4096;
/// A cached CNI result: the config and the result, some KiB.
const RESULT_LIMIT: u64 = 1 << 20;
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

/// Reads every network config of `conf_dir`, which of them CRI loads
/// (the first `max_conf_num` of go-cni's, see [`cri_loads`]), and what
/// host-local holds for each. No directory is no CNI (a node of
/// host-network pods), not a gap, unless CRI's config names it
/// (`configured`: CRI is set to use CNI from there). A directory or store
/// that is not the host's as `host` tells (a DaemonSet that does not mount
/// it) is a gap for the source: never read as nothing.
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
    let mut files: Vec<PathBuf> = match fs::read_dir(conf_dir) {
        // libcni's ConfFiles: every entry but a directory (a symlink is
        // kept, even to one), by the extension Go's filepath.Ext sees.
        Ok(entries) => entries
            .flatten()
            .filter(|e| !e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .filter(|p| is_config_name(p))
            .collect(),
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
    // go-cni sorts the paths (sort.Strings: bytewise, as here).
    files.sort();
    let configs: Vec<(PathBuf, Result<Value, String>)> = files
        .into_iter()
        .map(|file| {
            reading(&file);
            // Config files are often symlinks (config management, a
            // DaemonSet's copy); followed, but only to a regular file.
            let config = read_regular(&file, CONF_LIMIT, Links::Follow)
                .map_err(|e| e.to_string())
                .and_then(|read| {
                    serde_json::from_slice::<Value>(&read.bytes).map_err(|e| e.to_string())
                });
            (file, config)
        })
        .collect();
    let loaded = match cri_loads(&configs, max_conf_num) {
        Ok(loaded) => loaded,
        Err(why) => {
            gaps.push(Gap::item(
                SOURCE,
                conf_dir,
                format!("CRI loads no network from it (go-cni fails: {why}); no address is judged"),
            ));
            Vec::new()
        }
    };
    for (index, (file, config)) in configs.iter().enumerate() {
        let config = match config {
            Ok(config) => config,
            Err(err) => {
                gaps.push(Gap::item(SOURCE, file, err.clone()));
                continue;
            }
        };
        let cri_loads_it = loaded.contains(&index);
        if cri_loads_it {
            // A single plugin's config may have no name (go-cni loads it).
            let name = config["name"].as_str().unwrap_or_default().to_string();
            view.cri_networks.push(name);
        }
        if let Some(mut network) = network_of(file, config) {
            network.loaded_by_cri = cri_loads_it;
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
    // Each reservation's cached attachment, looked up, not searched for:
    // reservations and cache entries are each thousands on a busy node.
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
    view
}

/// CRI's `max_conf_num` when its config leaves it unset.
pub const DEFAULT_MAX_CONF_NUM: i64 = 1;

/// Whether libcni's ConfFiles lists `path`: its extension, from the last
/// dot of its name as Go's filepath.Ext takes it (`.conf` alone counts),
/// is `.conf`, `.conflist` or `.json`, the ones go-cni asks for.
fn is_config_name(path: &Path) -> bool {
    let name = path.file_name().map(OsStrExt::as_bytes).unwrap_or_default();
    let extension = name
        .iter()
        .rposition(|&b| b == b'.')
        .map_or(&[][..], |dot| &name[dot..]);
    matches!(extension, b".conf" | b".conflist" | b".json")
}

/// Which of `configs` (sorted, as read) CRI loads, as go-cni's
/// `loadFromConfDir` (v1.1.6 to v1.1.13, every line's) does for
/// `WithDefaultConf`: in order, each config must load, and the first
/// `max_conf_num` that do are CRI's networks (0 or less: every one). The
/// first that fails before that many fails the whole load (CRI then has
/// no network from the directory and reports NetworkReady false): the
/// error, naming it.
pub fn cri_loads(
    configs: &[(PathBuf, Result<Value, String>)],
    max_conf_num: i64,
) -> Result<Vec<usize>, String> {
    let mut loaded = Vec::new();
    for (index, (file, config)) in configs.iter().enumerate() {
        let is_list = file.extension().is_some_and(|e| e == "conflist");
        config
            .as_ref()
            .map_err(String::clone)
            .and_then(|config| go_cni_loads(config, is_list))
            .map_err(|why| format!("{}: {why}", file.display()))?;
        loaded.push(index);
        if i64::try_from(loaded.len()) == Ok(max_conf_num) {
            break;
        }
    }
    Ok(loaded)
}

/// Whether libcni accepts one config: `ConfListFromFile` for a
/// `.conflist` (a string `name`; a non-empty `plugins` list, each a
/// plugin config), `ConfFromFile` for the others (one plugin config, which
/// go-cni turns into a list of one). A plugin config is what Go can
/// decode into types.NetConf with a `type`: the fields it declares, when
/// present, of their types.
fn go_cni_loads(config: &Value, is_list: bool) -> Result<(), String> {
    if !is_list {
        return plugin_loads(config);
    }
    if !config.is_object() {
        return Err("not a JSON object".to_string());
    }
    if !config["name"].is_string() {
        return Err("no name (a string)".to_string());
    }
    if config.get("cniVersion").is_some_and(|v| !v.is_string()) {
        return Err("cniVersion is not a string".to_string());
    }
    // libcni 1.3 (containerd 2.3) also takes plugins from
    // `<conf_dir>/<name>/*.conf`: not read, such a list is called failing
    // (CRI's then judged none: the safe side).
    let plugins = config["plugins"]
        .as_array()
        .filter(|plugins| !plugins.is_empty())
        .ok_or("no plugins")?;
    for (n, plugin) in plugins.iter().enumerate() {
        plugin_loads(plugin).map_err(|why| format!("plugin {n}: {why}"))?;
    }
    Ok(())
}

/// Whether `plugin` decodes into libcni's types.NetConf with a `type`.
fn plugin_loads(plugin: &Value) -> Result<(), String> {
    let Some(fields) = plugin.as_object() else {
        return Err("not a JSON object".to_string());
    };
    let of_type = |key: &str, ok: fn(&Value) -> bool| match fields.get(key) {
        Some(value) if !value.is_null() && !ok(value) => Err(format!("{key} of the wrong type")),
        _ => Ok(()),
    };
    of_type("cniVersion", Value::is_string)?;
    of_type("name", Value::is_string)?;
    of_type("type", Value::is_string)?;
    of_type("capabilities", Value::is_object)?;
    of_type("ipam", Value::is_object)?;
    of_type("dns", Value::is_object)?;
    if fields.get("ipam").is_some_and(|ipam| {
        ipam.get("type")
            .is_some_and(|t| !t.is_null() && !t.is_string())
    }) {
        return Err("ipam type of the wrong type".to_string());
    }
    match fields.get("type").and_then(Value::as_str) {
        Some(kind) if !kind.is_empty() => Ok(()),
        _ => Err("no type".to_string()),
    }
}

/// The network a config sets up, when its IPAM is host-local: a conflist's
/// plugins or a single plugin's config.
fn network_of(file: &Path, config: &Value) -> Option<CniNetwork> {
    let name = config["name"].as_str()?.to_string();
    let plugins = match config["plugins"].as_array() {
        Some(plugins) => plugins.iter().collect(),
        None => vec![config],
    };
    let ipam = plugins
        .iter()
        .map(|plugin| &plugin["ipam"])
        .find(|ipam| ipam["type"] == "host-local")?;
    let data_dir = ipam["dataDir"]
        .as_str()
        .filter(|d| !d.is_empty())
        .unwrap_or(DEFAULT_HOST_LOCAL_DIR);
    Some(CniNetwork {
        store: Path::new(data_dir).join(&name),
        name,
        conf_file: file.to_path_buf(),
        capacity: capacity(ipam),
        reservations: Vec::new(),
        loaded_by_cri: false,
    })
}

/// How many addresses host-local can give out: per range, from
/// `rangeStart` (default: the subnet's first host) to `rangeEnd` (default:
/// its last, the broadcast address excluded for IPv4), less the gateway
/// (default: the first host) when it falls inside. `None` when a range
/// cannot be read.
fn capacity(ipam: &Value) -> Option<u64> {
    let ranges: Vec<&Value> = match ipam["ranges"].as_array() {
        Some(sets) => sets
            .iter()
            .flat_map(|set| set.as_array().into_iter().flatten())
            .collect(),
        // The older form: one range, in the IPAM section itself.
        None if ipam.get("subnet").is_some() => vec![ipam],
        None => return None,
    };
    ranges
        .iter()
        .map(|range| range_size(range))
        .sum::<Option<u128>>()
        .map(|n| u64::try_from(n).unwrap_or(u64::MAX))
}

fn range_size(range: &Value) -> Option<u128> {
    let (address, prefix) = range["subnet"].as_str()?.split_once('/')?;
    let address: IpAddr = address.parse().ok()?;
    let prefix: u32 = prefix.parse().ok()?;
    let (bits, value) = match address {
        IpAddr::V4(v4) => (32, u128::from(u32::from(v4))),
        IpAddr::V6(v6) => (128, u128::from(v6)),
    };
    if prefix > bits {
        return None;
    }
    let size = 1u128.checked_shl(bits - prefix).unwrap_or(0);
    let network = if size == 0 { 0 } else { value & !(size - 1) };
    let last = network.wrapping_add(size.wrapping_sub(1));
    let at = |key: &str| -> Option<Option<u128>> {
        match range[key].as_str() {
            None => Some(None),
            Some(ip) => Some(Some(match ip.parse::<IpAddr>().ok()? {
                IpAddr::V4(v4) => u128::from(u32::from(v4)),
                IpAddr::V6(v6) => u128::from(v6),
            })),
        }
    };
    let start = at("rangeStart")?.unwrap_or(network + 1);
    let broadcast_excluded = if bits == 32 { last - 1 } else { last };
    let end = at("rangeEnd")?.unwrap_or(broadcast_excluded);
    if end < start {
        return Some(0);
    }
    let gateway = at("gateway")?.unwrap_or(network + 1);
    let gateway_inside = u128::from((start..=end).contains(&gateway));
    Some(end - start + 1 - gateway_inside)
}

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
    use serde_json::json;

    #[test]
    fn capacity_is_the_range_less_network_broadcast_and_gateway() {
        // The measured /29: five pods got .2 to .6, the sixth none.
        let ipam = json!({"type": "host-local", "ranges": [[{"subnet": "10.251.0.0/29"}]]});
        assert_eq!(capacity(&ipam), Some(5));
        // The older form, the subnet in the IPAM section itself.
        let legacy = json!({"type": "host-local", "subnet": "10.88.0.0/16"});
        assert_eq!(capacity(&legacy), Some(65_536 - 3));
        // A range narrowed by start and end, the gateway outside it.
        let narrowed = json!({"ranges": [[{
            "subnet": "10.0.0.0/24", "rangeStart": "10.0.0.100", "rangeEnd": "10.0.0.109"
        }]]});
        assert_eq!(capacity(&narrowed), Some(10));
        // Dual stack: both ranges' addresses.
        let dual = json!({"ranges": [[{"subnet": "10.0.0.0/30"}], [{"subnet": "fd00::/126"}]]});
        assert_eq!(capacity(&dual), Some(1 + 2));
        // What cannot be read says so.
        assert_eq!(
            capacity(&json!({"ranges": [[{"subnet": "nonsense"}]]})),
            None
        );
        assert_eq!(capacity(&json!({"type": "host-local"})), None);
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
        let view = read(
            &conf,
            false,
            DEFAULT_MAX_CONF_NUM,
            &cache,
            &HostView::Same,
            &mut gaps,
        );
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

    /// A listing as go-cni sees it: each file and what it holds.
    fn listing(files: &[(&str, Value)]) -> Vec<(PathBuf, Result<Value, String>)> {
        files
            .iter()
            .map(|(name, config)| {
                (
                    PathBuf::from(format!("/etc/cni/net.d/{name}")),
                    Ok(config.clone()),
                )
            })
            .collect()
    }

    #[test]
    fn cri_loads_the_first_max_conf_num_configs_that_load_and_nothing_past_a_failing_one() {
        let list = |name: &str| json!({"cniVersion": "1.0.0", "name": name, "plugins": [{"type": "bridge"}]});
        let single = json!({"cniVersion": "0.4.0", "name": "single", "type": "bridge"});
        let files = listing(&[
            ("10-containerd.conflist", list("pods")),
            ("87-podman.conflist", list("podman")),
            ("99-single.conf", single.clone()),
        ]);
        // CRI's default: the first alone; 0 (or less) is every one.
        assert_eq!(cri_loads(&files, 1), Ok(vec![0]));
        assert_eq!(cri_loads(&files, 2), Ok(vec![0, 1]));
        assert_eq!(cri_loads(&files, 0), Ok(vec![0, 1, 2]));
        assert_eq!(cri_loads(&files, -1), Ok(vec![0, 1, 2]));
        assert_eq!(cri_loads(&files, 9), Ok(vec![0, 1, 2]));
        // A config go-cni fails on before the count is reached fails the
        // whole load (CRI has no network then), naming the file; after it,
        // it is never read.
        for broken in [
            Err("expected value at line 1".to_string()),
            Ok(json!({"name": "nameless-plugins"})),
            Ok(json!({"name": "empty", "plugins": []})),
            Ok(json!({"name": 5, "plugins": [{"type": "bridge"}]})),
            Ok(json!({"name": "untyped", "plugins": [{"ipam": {}}]})),
            Ok(json!({"name": "bad-ipam", "plugins": [{"type": "bridge", "ipam": "host-local"}]})),
            Ok(json!(["not", "an", "object"])),
        ] {
            let mut files = files.clone();
            files.insert(
                0,
                (
                    PathBuf::from("/etc/cni/net.d/05-broken.conflist"),
                    broken.clone(),
                ),
            );
            let err = cri_loads(&files, 1).unwrap_err();
            assert!(err.contains("05-broken.conflist"), "{broken:?}: {err}");
            let mut files = files.clone();
            files.swap(0, 1);
            assert_eq!(cri_loads(&files, 1), Ok(vec![0]), "{broken:?}");
            assert!(cri_loads(&files, 2).is_err(), "{broken:?}");
        }
        // A single plugin's config needs its type, not its name; a
        // conflist in a .conf file has none.
        let nameless = json!({"type": "bridge"});
        assert_eq!(
            cri_loads(&listing(&[("10-a.conf", nameless)]), 1),
            Ok(vec![0])
        );
        assert!(cri_loads(&listing(&[("10-a.json", list("in-a-conf"))]), 1).is_err());
        assert_eq!(cri_loads(&[], 1), Ok(vec![]));
    }

    #[test]
    fn config_names_are_libcni_s_extensions_as_go_sees_them() {
        for (name, listed) in [
            ("10-pods.conflist", true),
            ("10-pods.conf", true),
            ("10-pods.json", true),
            (".conf", true),
            ("10-pods.conflist.bak", false),
            ("10-pods.CONF", false),
            ("conf", false),
            ("README", false),
        ] {
            assert_eq!(is_config_name(Path::new(name)), listed, "{name}");
        }
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
        let view = read(
            &conf,
            false,
            1,
            &dir.path().join("results"),
            &HostView::Same,
            &mut gaps,
        );
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
        let view = read(
            &conf,
            false,
            0,
            &dir.path().join("results"),
            &HostView::Same,
            &mut gaps,
        );
        assert_eq!(view.cri_networks, ["pods", "podman"]);
        // A config go-cni fails on first: CRI loads none, said in a gap.
        write(&conf.join("05-broken.conflist"), "{not json");
        let mut gaps = Vec::new();
        let view = read(
            &conf,
            false,
            1,
            &dir.path().join("results"),
            &HostView::Same,
            &mut gaps,
        );
        assert!(view.cri_networks.is_empty());
        assert_eq!(view.cri_networks().count(), 0);
        assert!(
            gaps.iter()
                .any(|g| g.error.contains("CRI loads no network")),
            "{gaps:?}"
        );
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
