//! CNI's network files as containerd's CRI loads them: go-cni's
//! `loadFromConfDir` (opts.go, the same from v1.1.6 to v1.1.13) over
//! libcni's `ConfFiles`, `ConfListFromFile` and `ConfFromFile`
//! (libcni/conf.go), decoded as Go's encoding/json decodes.
//!
//! Go's decoding is `peers::go_json`'s. libcni decodes a list's top level
//! into a map (exact keys) and each plugin into `types.NetConf` (keys
//! folded, types checked); a conflist's plugins are marshalled again in
//! between (`ConfListFromBytes`), so their keys are read sorted, each
//! exact key once (the last).
//!
//! Which libcni a containerd vendors (its go.mod at each tag) is
//! [`Rules::of_containerd`]; what differs between them is [`Rules`].

use std::path::{Component, Path, PathBuf};

pub use super::go_json::parse;
pub use super::go_json::GoJson;
use super::go_json::{check, Shape};

/// The libcni releases whose loading differs, as containerd vendors them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rules {
    /// libcni v1.0.1 to v1.1.2 (containerd 1.6 and 1.7): a list's
    /// `disableCheck` is a bool; `cniVersions` and `disableGC` are not
    /// read; `plugins` is required.
    V1_1,
    /// libcni v1.2.3 (containerd 2.0): `disableCheck` and `disableGC` a
    /// bool or the string "true"/"false" in any case (`readBool`);
    /// `cniVersions` a list of versions that parse (`version.ParseVersion`),
    /// and then `cniVersion` too; a plugin's
    /// `cni.dev/valid-attachments` typed.
    V1_2,
    /// libcni v1.3.0 (containerd 2.1 to 2.3): also `loadOnlyInlinedPlugins`;
    /// a list's plugins are its `plugins` (now optional) followed by
    /// `<its dir>/<its name>/*.conf` unless `loadOnlyInlinedPlugins`
    /// (`NetworkConfFromFile`, `NetworkPluginConfsFromFiles`); none at
    /// all refuses it.
    V1_3,
}

impl Rules {
    pub const ALL: [Rules; 3] = [Rules::V1_1, Rules::V1_2, Rules::V1_3];

    /// The libcni containerd `version` (`v2.0.11`, `1.6.20~ds1`) vendors:
    /// 1.6.x and 1.7.x libcni 1.0/1.1, 2.0.x 1.2.3, 2.1.x to 2.3.x 1.3.0
    /// (go.mod at each tag). `None` for a line not read.
    pub fn of_containerd(version: &str) -> Option<Rules> {
        let mut parts = version.trim().trim_start_matches('v').split('.');
        let major = parts.next()?;
        let minor: String = parts
            .next()?
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        match (major, minor.as_str()) {
            ("1", "6" | "7") => Some(Rules::V1_1),
            ("2", "0") => Some(Rules::V1_2),
            ("2", "1" | "2" | "3") => Some(Rules::V1_3),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Rules::V1_1 => "libcni 1.1 (containerd 1.6, 1.7)",
            Rules::V1_2 => "libcni 1.2 (containerd 2.0)",
            Rules::V1_3 => "libcni 1.3 (containerd 2.1 to 2.3)",
        }
    }
}

const IPAM: &[(&str, Shape)] = &[("type", Shape::Str)];
const DNS: &[(&str, Shape)] = &[
    ("nameservers", Shape::StrList),
    ("domain", Shape::Str),
    ("search", Shape::StrList),
    ("options", Shape::StrList),
];
const GC_ATTACHMENT: Shape = Shape::Struct(&[("containerID", Shape::Str), ("ifname", Shape::Str)]);
/// libcni's types.NetConf (pkg/types/types.go): its first seven fields
/// from v1.0.1 to v1.1.2; types.NetConfType (v1.2.3) and types.PluginConf
/// (v1.3.0) add `ValidAttachments []GCAttachment`.
static NET_CONF: [(&str, Shape); 8] = [
    ("cniVersion", Shape::Str),
    ("name", Shape::Str),
    ("type", Shape::Str),
    ("capabilities", Shape::BoolMap),
    ("ipam", Shape::Struct(IPAM)),
    ("dns", Shape::Struct(DNS)),
    ("prevResult", Shape::AnyMap),
    ("cni.dev/valid-attachments", Shape::List(&GC_ATTACHMENT)),
];

/// One plugin of a network as the plugin itself is handed it: libcni
/// marshals each plugin's config again (`InjectConf`, the name and
/// cniVersion set) before it runs, so its keys are read sorted, once each.
#[derive(Debug, Clone, PartialEq)]
pub struct Plugin {
    /// `type`: the plugin binary.
    pub kind: String,
    /// The IPAM section as the main plugin (types.NetConf's `IPAM` struct)
    /// reads its `type`.
    pub ipam_type: Option<String>,
    /// The IPAM section as host-local reads it (its `Net.IPAM` is a
    /// pointer: a later `null` drops it): `dataDir`, `ranges`...
    pub ipam: Option<GoJson>,
}

/// A network CRI would load from one file.
#[derive(Debug, Clone, PartialEq)]
pub struct Network {
    pub name: String,
    pub plugins: Vec<Plugin>,
}

impl Network {
    /// host-local's store for this network, when a plugin's IPAM is
    /// host-local: `filepath.Join(dataDir, name)` (backend/disk `New`;
    /// `dataDir` empty is `/var/lib/cni/networks`), and that IPAM section.
    pub fn host_local(&self) -> Option<(PathBuf, &GoJson)> {
        let plugin = self
            .plugins
            .iter()
            .find(|p| p.ipam_type.as_deref() == Some("host-local"))?;
        let ipam = plugin.ipam.as_ref()?;
        let data_dir = ipam.string_field("dataDir").filter(|d| !d.is_empty());
        let data_dir = data_dir.unwrap_or(crate::model::cni::DEFAULT_HOST_LOCAL_DIR);
        Some((go_join(Path::new(data_dir), &self.name), ipam))
    }
}

/// Go's `filepath.Join(dir, name)`: joined with `/` and cleaned lexically
/// (`..` removed with the component before it, never past `/`).
pub fn go_join(dir: &Path, name: &str) -> PathBuf {
    let joined = PathBuf::from(format!("{}/{name}", dir.display()));
    let mut clean = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                if !clean.pop() && !joined.is_absolute() {
                    clean.push("..");
                }
            }
            Component::CurDir => {}
            other => clean.push(other),
        }
    }
    clean
}

/// What go-cni's `loadFromConfDir` decides for a directory's
/// files: for each, the network libcni makes of it or why it refuses it;
/// and which CRI loads (the first `max_conf_num` in order, 0 or less every
/// one), or, when one of those is refused, the error that fails the whole
/// load (CRI then has no network from the directory).
#[derive(Debug, Clone, PartialEq)]
pub struct DirLoad {
    pub files: Vec<Result<Network, String>>,
    pub loaded: Result<Vec<usize>, String>,
}

/// A file of the directory: its path and its bytes (or why it could not be
/// read).
pub type ConfFile = (PathBuf, Result<Vec<u8>, String>);

/// Lists a plugin directory (libcni 1.3's `<dir>/<name>/`) as libcni's
/// `ConfFiles(dir, [".conf"])`: its `.conf` entries, sorted, read; absent
/// is none, any other failure an error.
pub type ListPlugins<'a> = dyn FnMut(&Path) -> Result<Vec<ConfFile>, String> + 'a;

/// Whether libcni's `ConfFiles` lists an entry named `name` for
/// `extensions`: its extension as Go's `filepath.Ext` takes it, from the
/// last dot of the name (a file called `.conf` has one).
pub fn has_extension(name: &[u8], extensions: &[&str]) -> bool {
    let extension = name
        .iter()
        .rposition(|&b| b == b'.')
        .map_or(&[][..], |dot| &name[dot..]);
    extensions.iter().any(|e| e.as_bytes() == extension)
}

/// The extensions go-cni asks `ConfFiles` for.
pub const CONF_EXTENSIONS: &[&str] = &[".conf", ".conflist", ".json"];

/// [`DirLoad`] of `files` (sorted bytewise, as go-cni's `sort.Strings`).
pub fn load_dir(
    files: &[ConfFile],
    max_conf_num: i64,
    rules: Rules,
    plugins: &mut ListPlugins,
) -> DirLoad {
    let judged: Vec<Result<Network, String>> = files
        .iter()
        .map(|(path, bytes)| {
            let bytes = bytes.as_ref().map_err(String::clone)?;
            // go-cni: `strings.HasSuffix(confFile, ".conflist")`.
            if path.as_os_str().as_encoded_bytes().ends_with(b".conflist") {
                conf_list(path, bytes, rules, plugins)
            } else {
                conf(bytes, rules)
            }
        })
        .collect();
    let mut loaded = Vec::new();
    let mut failed = None;
    for (index, network) in judged.iter().enumerate() {
        if let Err(why) = network {
            failed = Some(format!("{}: {why}", files[index].0.display()));
            break;
        }
        loaded.push(index);
        if i64::try_from(loaded.len()) == Ok(max_conf_num) {
            break;
        }
    }
    DirLoad {
        loaded: failed.map_or(Ok(loaded), Err),
        files: judged,
    }
}

/// `ConfFromBytes` on `value` (one plugin's config): Go's type check into
/// `types.NetConf`, and a non-empty `type`.
fn plugin_conf(value: &GoJson, rules: Rules) -> Result<(), String> {
    let fields = if rules == Rules::V1_1 {
        &NET_CONF[..7]
    } else {
        &NET_CONF[..]
    };
    check(value, &Shape::Struct(fields), "config")?;
    match value.string_field("type") {
        Some(kind) if !kind.is_empty() => Ok(()),
        _ => Err("missing 'type'".to_string()),
    }
}

/// The plugin as it runs (see [`Plugin`]).
fn plugin(config: &GoJson) -> Plugin {
    let sorted = config.remarshalled();
    let ipam_type = sorted
        .struct_field("ipam", false)
        .and_then(|ipam| ipam.string_field("type").map(str::to_string));
    Plugin {
        kind: sorted.string_field("type").unwrap_or_default().to_string(),
        ipam_type,
        ipam: sorted.struct_field("ipam", true),
    }
}

/// A single plugin's file (`.conf`, `.json`): go-cni's `ConfFromFile`,
/// its `type` check, then `ConfListFromConf` (a list named by the plugin's
/// `name`, whose one plugin is the file decoded into a map and marshalled
/// again, checked once more in that order).
fn conf(bytes: &[u8], rules: Rules) -> Result<Network, String> {
    let value = parse(bytes)?;
    plugin_conf(&value, rules)?;
    let again = value.remarshalled();
    plugin_conf(&again, rules).map_err(|why| format!("plugin config 0: {why}"))?;
    Ok(Network {
        name: value.string_field("name").unwrap_or_default().to_string(),
        plugins: vec![plugin(&value)],
    })
}

/// libcni's `readBool` (v1.2.3 on): a bool, or a string that lowercases to
/// "true" or "false"; absent is false.
fn read_bool(list: &GoJson, key: &str) -> Result<bool, String> {
    match list.exact(key) {
        None => Ok(false),
        Some(GoJson::Bool(b)) => Ok(*b),
        Some(GoJson::String(s)) if s.eq_ignore_ascii_case("true") => Ok(true),
        Some(GoJson::String(s)) if s.eq_ignore_ascii_case("false") => Ok(false),
        Some(other) => Err(format!("invalid {key}: a {}", other.kind())),
    }
}

/// libcni's `version.ParseVersion`: "" (0.1.0), or up to three
/// dot-separated `strconv.Atoi` numbers.
pub fn parses_as_version(version: &str) -> bool {
    let atoi = |part: &str| {
        let digits = part.strip_prefix(['+', '-']).unwrap_or(part);
        !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && part.parse::<i64>().is_ok()
    };
    version.is_empty() || (version.split('.').count() <= 3 && version.split('.').all(atoi))
}

/// A list's file (`.conflist`): `ConfListFromFile`. Its top level is
/// decoded into a map (exact keys); each plugin into `types.NetConf`
/// after a marshal (sorted keys).
fn conf_list(
    path: &Path,
    bytes: &[u8],
    rules: Rules,
    list_plugins: &mut ListPlugins,
) -> Result<Network, String> {
    let list = parse(bytes)?;
    if !matches!(list, GoJson::Object(_) | GoJson::Null) {
        return Err(format!("a {} where Go wants an object", list.kind()));
    }
    let name = match list.exact("name") {
        None => return Err("no name".to_string()),
        Some(GoJson::String(name)) => name.clone(),
        Some(other) => return Err(format!("invalid name type: a {}", other.kind())),
    };
    let cni_version = match list.exact("cniVersion") {
        None => String::new(),
        Some(GoJson::String(v)) => v.clone(),
        Some(other) => return Err(format!("invalid cniVersion type: a {}", other.kind())),
    };
    let mut load_only_inlined = false;
    if rules == Rules::V1_1 {
        // `rawDisableCheck.(bool)`: nothing else, not even null.
        match list.exact("disableCheck") {
            None | Some(GoJson::Bool(_)) => {}
            Some(other) => return Err(format!("invalid disableCheck type: a {}", other.kind())),
        }
    } else {
        if let Some(versions) = list.exact("cniVersions") {
            let GoJson::Array(versions) = versions else {
                return Err(format!(
                    "invalid type for cniVersions: a {}",
                    versions.kind()
                ));
            };
            for (i, version) in versions.iter().enumerate() {
                match version {
                    GoJson::String(v) if parses_as_version(v) => {}
                    GoJson::String(v) => {
                        return Err(format!("invalid cniVersions entry {v:?} at index {i}"))
                    }
                    other => {
                        return Err(format!(
                            "invalid type for cniVersions index {i}: a {}",
                            other.kind()
                        ))
                    }
                }
            }
            if !parses_as_version(&cni_version) {
                return Err(format!("invalid cniVersion {cni_version:?}"));
            }
        }
        read_bool(&list, "disableCheck")?;
        read_bool(&list, "disableGC")?;
        if rules == Rules::V1_3 {
            load_only_inlined = read_bool(&list, "loadOnlyInlinedPlugins")?;
        }
    }
    let mut plugins = Vec::new();
    match list.exact("plugins") {
        None if rules == Rules::V1_3 && load_only_inlined => {
            return Err("`loadOnlyInlinedPlugins` is true, and no 'plugins' key".to_string())
        }
        None if rules == Rules::V1_3 => {}
        None => return Err("no 'plugins' key".to_string()),
        Some(GoJson::Array(inline)) if inline.is_empty() => {
            return Err("no plugins in list".to_string())
        }
        Some(GoJson::Array(inline)) => {
            for (i, config) in inline.iter().enumerate() {
                let again = config.remarshalled();
                plugin_conf(&again, rules).map_err(|why| format!("plugin config {i}: {why}"))?;
                plugins.push(plugin(&again));
            }
        }
        Some(other) => return Err(format!("invalid 'plugins' type: a {}", other.kind())),
    }
    if rules == Rules::V1_3 && !load_only_inlined {
        // NetworkConfFromFile: `filepath.Join(filepath.Dir(filename), name)`.
        let dir = go_join(path.parent().unwrap_or(Path::new("/")), &name);
        for (file, bytes) in list_plugins(&dir)? {
            let bytes = bytes.map_err(|why| format!("{}: {why}", file.display()))?;
            let config = parse(&bytes).map_err(|why| format!("{}: {why}", file.display()))?;
            plugin_conf(&config, rules).map_err(|why| format!("{}: {why}", file.display()))?;
            plugins.push(plugin(&config));
        }
        if plugins.is_empty() {
            return Err("no plugin configs found".to_string());
        }
    }
    Ok(Network { name, plugins })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DIR: &str = "/etc/cni/net.d";

    /// One file judged under `rules`, with no plugin directory.
    fn judge(name: &str, config: &str, rules: Rules) -> Result<Network, String> {
        judge_with(name, config, rules, &mut |_| Ok(Vec::new()))
    }

    fn judge_with(
        name: &str,
        config: &str,
        rules: Rules,
        plugins: &mut ListPlugins,
    ) -> Result<Network, String> {
        let files = [(Path::new(DIR).join(name), Ok(config.as_bytes().to_vec()))];
        load_dir(&files, 0, rules, plugins).files.remove(0)
    }

    /// Which of the rules load `config` as the file `name`.
    fn loaded_by(name: &str, config: &str) -> Vec<Rules> {
        Rules::ALL
            .into_iter()
            .filter(|&r| judge(name, config, r).is_ok())
            .collect()
    }

    fn list_with(plugin: serde_json::Value) -> String {
        json!({"cniVersion": "1.0.0", "name": "pods", "plugins": [plugin]}).to_string()
    }

    const ALL: [Rules; 3] = Rules::ALL;
    const NONE: [Rules; 0] = [];

    #[test]
    fn a_plugin_s_keys_in_any_case_are_its_fields_on_every_line() {
        let caps = list_with(json!({"Type": "bridge",
            "IPAM": {"TYPE": "host-local", "DataDir": "/run/caps", "Ranges": [[{"Subnet": "10.0.0.0/29"}]]}}));
        for rules in ALL {
            let network = judge("10-caps.conflist", &caps, rules).unwrap();
            assert_eq!(network.plugins[0].kind, "bridge");
            let (store, ipam) = network.host_local().expect("host-local");
            assert_eq!(store, Path::new("/run/caps/pods"), "{rules:?}");
            assert!(ipam.last_field("ranges").is_some());
        }
        // A single plugin's file too; its name is its network's.
        let single =
            json!({"NAME": "one", "TYPE": "bridge", "ipam": {"type": "host-local"}}).to_string();
        for rules in ALL {
            let network = judge("10-one.conf", &single, rules).unwrap();
            assert_eq!(network.name, "one");
            assert_eq!(
                network.host_local().unwrap().0,
                Path::new("/var/lib/cni/networks/one")
            );
        }
    }

    #[test]
    fn a_list_s_own_keys_are_exact() {
        let plugins = json!([{"type": "bridge"}]);
        let named_in_caps = json!({"Name": "pods", "plugins": plugins}).to_string();
        assert_eq!(loaded_by("10-a.conflist", &named_in_caps), NONE);
        let plugins_in_caps = json!({"name": "pods", "Plugins": plugins}).to_string();
        assert_eq!(loaded_by("10-a.conflist", &plugins_in_caps), NONE);
        let err = judge("10-a.conflist", &plugins_in_caps, Rules::V1_3).unwrap_err();
        assert!(err.contains("no plugin configs found"), "{err}");
    }

    #[test]
    fn a_value_of_the_wrong_type_refuses_the_file_and_null_fits_any() {
        for plugin in [
            json!({"type": "bridge", "capabilities": {"portMappings": "true"}}),
            json!({"type": "bridge", "capabilities": ["portMappings"]}),
            json!({"type": "bridge", "dns": {"nameservers": "8.8.8.8"}}),
            json!({"type": "bridge", "DNS": {"Search": [1]}}),
            json!({"type": "bridge", "ipam": "host-local"}),
            json!({"type": "bridge", "ipam": {"type": 5}}),
            json!({"type": 5}),
            json!({"type": "bridge", "name": true}),
            json!({"type": "bridge", "prevResult": []}),
            json!({"type": ""}),
            json!({"ipam": {"type": "host-local"}}),
            json!("bridge"),
        ] {
            assert_eq!(
                loaded_by("10-a.conflist", &list_with(plugin.clone())),
                NONE,
                "{plugin}"
            );
            assert_eq!(
                loaded_by("10-a.conf", &plugin.to_string()),
                NONE,
                "{plugin}"
            );
        }
        let nulls = json!({"type": "bridge", "ipam": null, "dns": {"nameservers": null},
            "capabilities": {"portMappings": null}, "prevResult": null, "name": null, "unknown": [1, {}]});
        assert_eq!(loaded_by("10-a.conflist", &list_with(nulls.clone())), ALL);
        assert_eq!(loaded_by("10-a.conf", &nulls.to_string()), ALL);
    }

    #[test]
    fn valid_attachments_are_typed_from_libcni_1_2() {
        let plugin = json!({"type": "bridge", "cni.dev/valid-attachments": "all"});
        let rules = [Rules::V1_1];
        assert_eq!(loaded_by("10-a.conflist", &list_with(plugin)), rules);
        let typed = json!({"type": "bridge", "cni.dev/valid-attachments": [{"containerID": "c", "IFNAME": "eth0"}]});
        assert_eq!(loaded_by("10-a.conflist", &list_with(typed)), ALL);
    }

    #[test]
    fn disable_check_is_a_bool_on_1_x_and_also_a_string_on_2_x() {
        let list = |value: serde_json::Value| {
            json!({"name": "pods", "disableCheck": value, "plugins": [{"type": "bridge"}]})
                .to_string()
        };
        assert_eq!(loaded_by("10-a.conflist", &list(json!(true))), ALL);
        assert_eq!(
            loaded_by("10-a.conflist", &list(json!("true"))),
            [Rules::V1_2, Rules::V1_3]
        );
        assert_eq!(
            loaded_by("10-a.conflist", &list(json!("FALSE"))),
            [Rules::V1_2, Rules::V1_3]
        );
        assert_eq!(loaded_by("10-a.conflist", &list(json!("yes"))), NONE);
        assert_eq!(loaded_by("10-a.conflist", &list(json!(null))), NONE);
        assert_eq!(loaded_by("10-a.conflist", &list(json!(1))), NONE);
        let gc = json!({"name": "pods", "disableGC": "nope", "plugins": [{"type": "bridge"}]})
            .to_string();
        assert_eq!(loaded_by("10-a.conflist", &gc), [Rules::V1_1]);
        let inlined =
            json!({"name": "pods", "loadOnlyInlinedPlugins": 1, "plugins": [{"type": "bridge"}]});
        assert_eq!(
            loaded_by("10-a.conflist", &inlined.to_string()),
            [Rules::V1_1, Rules::V1_2]
        );
    }

    #[test]
    fn cni_versions_must_be_versions_from_libcni_1_2() {
        let list = |versions: serde_json::Value, version: &str| {
            json!({"name": "pods", "cniVersion": version, "cniVersions": versions,
                "plugins": [{"type": "bridge"}]})
            .to_string()
        };
        assert_eq!(
            loaded_by(
                "10-a.conflist",
                &list(json!(["1.0.0", "0.4.0", "9.9"]), "1.0.0")
            ),
            ALL
        );
        let on_1_x = [Rules::V1_1];
        assert_eq!(
            loaded_by("10-a.conflist", &list(json!(["one"]), "1.0.0")),
            on_1_x
        );
        assert_eq!(
            loaded_by("10-a.conflist", &list(json!("1.0.0"), "1.0.0")),
            on_1_x
        );
        assert_eq!(
            loaded_by("10-a.conflist", &list(json!([1]), "1.0.0")),
            on_1_x
        );
        assert_eq!(
            loaded_by("10-a.conflist", &list(json!(null), "1.0.0")),
            on_1_x
        );
        assert_eq!(loaded_by("10-a.conflist", &list(json!([]), "x")), on_1_x);
        // Without cniVersions, cniVersion is not parsed when loading.
        let plain = json!({"name": "pods", "cniVersion": "x", "plugins": [{"type": "bridge"}]});
        assert_eq!(loaded_by("10-a.conflist", &plain.to_string()), ALL);
        let numeric = json!({"name": "pods", "cniVersion": 1, "plugins": [{"type": "bridge"}]});
        assert_eq!(loaded_by("10-a.conflist", &numeric.to_string()), NONE);
        for (version, parses) in [
            ("1.0.0", true),
            ("1", true),
            ("0.4", true),
            ("", true),
            ("+1.-0", true),
            ("1.0.0.0", false),
            ("1..0", false),
            ("1.x", false),
            ("v1", false),
            ("99999999999999999999", false),
        ] {
            assert_eq!(parses_as_version(version), parses, "{version}");
        }
    }

    #[test]
    fn duplicate_keys_the_last_wins_a_plugin_s_keys_read_sorted() {
        // The last of a key: in a list's plugin (decoded into a map first)
        // an earlier value is gone before the type check.
        let dup = r#"{"name": "pods", "plugins": [{"type": "bridge", "capabilities": "x", "capabilities": {}}]}"#;
        assert_eq!(loaded_by("10-a.conflist", dup), ALL);
        // A single plugin's file is decoded as written first: checked.
        let single = r#"{"type": "bridge", "capabilities": "x", "capabilities": {}}"#;
        assert_eq!(loaded_by("10-a.conf", single), NONE);
        // Marshalled again, "TYPE" sorts before "type": the empty one wins.
        let sorted = r#"{"type": "", "TYPE": "bridge"}"#;
        let err = judge("10-a.conf", sorted, Rules::V1_3).unwrap_err();
        assert!(err.contains("plugin config 0: missing 'type'"), "{err}");
        let written = r#"{"TYPE": "", "type": "bridge"}"#;
        assert_eq!(loaded_by("10-a.conf", written), ALL);
        let list = r#"{"name": "pods", "name": 5, "plugins": [{"type": "bridge"}]}"#;
        assert_eq!(loaded_by("10-a.conflist", list), NONE);
        // ipam sections merge (a struct); host-local's drops at a null.
        let merged = list_with(
            json!({"type": "bridge", "ipam": {"type": "host-local", "dataDir": "/a"},
            "IPAM": {"dataDir": "/b"}}),
        );
        let network = judge("10-a.conflist", &merged, Rules::V1_1).unwrap();
        assert_eq!(network.host_local().unwrap().0, Path::new("/a/pods"));
        let dropped =
            list_with(json!({"type": "bridge", "IPAM": {"type": "host-local"}, "ipam": null}));
        let network = judge("10-a.conflist", &dropped, Rules::V1_1).unwrap();
        assert_eq!(network.plugins[0].ipam_type.as_deref(), Some("host-local"));
        assert_eq!(network.host_local(), None);
    }

    #[test]
    fn the_extension_picks_the_reader() {
        let list = list_with(json!({"type": "bridge"}));
        assert_eq!(
            loaded_by("10-a.json", &list),
            NONE,
            "a list in a plugin's file"
        );
        assert_eq!(loaded_by("10-a.conf", &list), NONE);
        let single = json!({"type": "bridge"}).to_string();
        assert_eq!(loaded_by("10-a.conflist", &single), NONE);
        assert_eq!(
            loaded_by("10-a.json", &single),
            ALL,
            "a nameless plugin loads"
        );
        assert_eq!(loaded_by("10-a.conflist", "[]"), NONE);
        assert_eq!(loaded_by("10-a.conflist", "{not json"), NONE);
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
            assert_eq!(
                has_extension(name.as_bytes(), CONF_EXTENSIONS),
                listed,
                "{name}"
            );
        }
    }

    #[test]
    fn libcni_1_3_takes_plugins_from_the_network_s_directory() {
        let asked = std::cell::RefCell::new(Vec::new());
        let plugin = |config: &str| Ok(config.as_bytes().to_vec());
        let mut dir = |path: &Path| -> Result<Vec<ConfFile>, String> {
            asked.borrow_mut().push(path.to_path_buf());
            Ok(vec![(
                path.join("10-bridge.conf"),
                plugin(r#"{"type": "bridge", "ipam": {"type": "host-local"}}"#),
            )])
        };
        let split = json!({"cniVersion": "1.0.0", "name": "split"}).to_string();
        let network = judge_with("10-split.conflist", &split, Rules::V1_3, &mut dir).unwrap();
        assert_eq!(
            asked.borrow().as_slice(),
            [PathBuf::from("/etc/cni/net.d/split")]
        );
        assert_eq!(
            network.host_local().unwrap().0,
            Path::new("/var/lib/cni/networks/split")
        );
        for rules in [Rules::V1_1, Rules::V1_2] {
            assert!(judge_with("10-split.conflist", &split, rules, &mut dir).is_err());
        }
        // Appended to the inline ones, unless only those are to be loaded.
        let both = json!({"name": "split", "plugins": [{"type": "ptp"}]}).to_string();
        let network = judge_with("10-split.conflist", &both, Rules::V1_3, &mut dir).unwrap();
        let kinds: Vec<&str> = network.plugins.iter().map(|p| p.kind.as_str()).collect();
        assert_eq!(kinds, ["ptp", "bridge"]);
        let inline = json!({"name": "split", "loadOnlyInlinedPlugins": "TRUE", "plugins": [{"type": "ptp"}]});
        let network = judge_with(
            "10-split.conflist",
            &inline.to_string(),
            Rules::V1_3,
            &mut dir,
        )
        .unwrap();
        assert_eq!(network.plugins.len(), 1);
        let none = json!({"name": "split", "loadOnlyInlinedPlugins": true}).to_string();
        assert!(judge_with("10-split.conflist", &none, Rules::V1_3, &mut dir).is_err());
        // A plugin file libcni refuses, or a directory it cannot list,
        // refuses the network.
        let mut bad = |path: &Path| {
            Ok(vec![(
                path.join("a.conf"),
                plugin(r#"{"type": "bridge", "dns": []}"#),
            )])
        };
        assert!(judge_with("10-split.conflist", &split, Rules::V1_3, &mut bad).is_err());
        let mut unlistable = |_: &Path| Err("not a directory".to_string());
        assert!(judge_with("10-split.conflist", &both, Rules::V1_3, &mut unlistable).is_err());
        // The directory is Go's filepath.Join: cleaned, never absolute.
        asked.borrow_mut().clear();
        let climbing = json!({"name": "../../x"}).to_string();
        let _ = judge_with("10-split.conflist", &climbing, Rules::V1_3, &mut dir);
        assert_eq!(asked.borrow().as_slice(), [PathBuf::from("/etc/x")]);
    }

    #[test]
    fn go_cni_loads_the_first_max_conf_num_and_nothing_past_a_refused_one() {
        let list = |name: &str| list_with(json!({"type": "bridge"})).replace("pods", name);
        let file = |name: &str, text: String| (Path::new(DIR).join(name), Ok(text.into_bytes()));
        let files = vec![
            file("10-containerd.conflist", list("pods")),
            file("87-podman.conflist", list("podman")),
            file(
                "99-single.conf",
                json!({"name": "single", "type": "bridge"}).to_string(),
            ),
        ];
        let loaded = |files: &[ConfFile], max| {
            load_dir(files, max, Rules::V1_1, &mut |_| Ok(Vec::new())).loaded
        };
        assert_eq!(loaded(&files, 1), Ok(vec![0]));
        assert_eq!(loaded(&files, 2), Ok(vec![0, 1]));
        for every in [0, -1, 9] {
            assert_eq!(loaded(&files, every), Ok(vec![0, 1, 2]));
        }
        let mut broken = files.clone();
        broken.insert(0, file("05-broken.conflist", "{not json".to_string()));
        let err = loaded(&broken, 1).unwrap_err();
        assert!(err.contains("05-broken.conflist"), "{err}");
        broken.swap(0, 1);
        assert_eq!(loaded(&broken, 1), Ok(vec![0]));
        assert!(loaded(&broken, 2).is_err());
        broken[1].1 = Err("permission denied".to_string());
        assert!(loaded(&broken, 2)
            .unwrap_err()
            .contains("permission denied"));
        assert_eq!(loaded(&[], 1), Ok(vec![]));
    }

    #[test]
    fn each_containerd_line_has_its_libcni() {
        for (version, rules) in [
            ("1.6.20~ds1", Some(Rules::V1_1)),
            ("v1.7.34", Some(Rules::V1_1)),
            ("v2.0.11", Some(Rules::V1_2)),
            ("v2.1.4", Some(Rules::V1_3)),
            ("2.2.0", Some(Rules::V1_3)),
            ("v2.3.4", Some(Rules::V1_3)),
            ("v1.5.18", None),
            ("v2.4.0", None),
            ("", None),
        ] {
            assert_eq!(Rules::of_containerd(version), rules, "{version}");
        }
    }

    #[test]
    fn paths_join_as_go_joins_them() {
        for (dir, name, joined) in [
            (
                "/var/lib/cni/networks",
                "pods",
                "/var/lib/cni/networks/pods",
            ),
            ("/d", "/abs", "/d/abs"),
            ("/d", "../x", "/x"),
            ("/", "../..", "/"),
            ("/d", "", "/d"),
            ("/d", "a/./b/", "/d/a/b"),
        ] {
            assert_eq!(
                go_join(Path::new(dir), name),
                Path::new(joined),
                "{dir} {name}"
            );
        }
    }
}
