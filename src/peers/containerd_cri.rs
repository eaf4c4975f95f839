//! CRI's settings in containerd's config files (snapshotter, CNI
//! `conf_dir` and `max_conf_num`, `netns_mounts_under_state_dir`), as each
//! release line reads a file and merges the files, beside the upstream
//! function each rule follows, each measured with that line's
//! `containerd config dump` (tests/config_dump_real.rs). Pure:
//! `paths::config` reads the files, bounded, and hands each file's plugins
//! here.

use std::collections::BTreeSet;
use std::path::Path;

use crate::model::{ConfigApart, CriSetting};
use crate::peers::containerd_config::{merges_of, Line};

/// CRI's plugin up to config version 2 (1.x, and 2.x migrating such files).
pub const CRI_PLUGIN: &str = "io.containerd.grpc.v1.cri";
/// The newest version containerd 1.7 accepts (`ValidateV2`).
pub const NEWEST_1X_VERSION: i64 = 2;

/// One file's CRI keys, each read by that file's own version.
#[derive(Debug, Default)]
pub struct CriKeys {
    /// The file has a table for CRI's (pre-3) plugin: 1.x replaces the
    /// whole table with it.
    has_cri_table: bool,
    /// The file's keys as 1.x reads them (a version 1 file's CRI table is
    /// `cri`).
    one_x: Reading,
    /// The file's keys as 2.3 reads them: a version 1 file's table under
    /// CRI's full name when it has one (see [`CriKeys::of`]), else as 1.x.
    two_x: Reading,
    /// The snapshotter as 2.x migrates a file of version 1 or 2: CRI's
    /// images plugin takes `containerd.snapshotter` only when the file has
    /// a `containerd.runtimes` table (plugins/cri/images/plugin.go,
    /// `migrateConfig`, returns before it otherwise; 2.0.11 and 2.3.4).
    snapshotter_2x: Option<Option<String>>,
    /// A file of version 1 or 2 with a `containerd.runtimes` table in
    /// CRI's plugin (see `snapshotter_2x`).
    has_runtimes: bool,
    /// CRI's settings nodectl reads that the file sets.
    sets: BTreeSet<CriSetting>,
    /// A version 1 file with CRI's table both as `cri` and under its full
    /// name: 2.3 renames the first onto the second, and which it keeps is
    /// Go's map order (`v1Migrate` ranges over the plugins).
    both_names: bool,
    /// A version 1 file with CRI's table under its full name, which only
    /// 2.3 reads.
    full_name_in_v1: bool,
}

/// One file's CRI settings read from one plugin table (outer `None`: no
/// key; inner `None`: empty, containerd's default).
#[derive(Debug, Default, Clone)]
struct Reading {
    snapshotter: Option<Option<String>>,
    cni_conf_dir: Option<Option<String>>,
    cni_max_conf_num: Option<i64>,
    netns_under_state_dir: Option<bool>,
}

impl Reading {
    /// `plugin`: CRI's table in a file of `version` up to 2 (from 3 on
    /// the table is the setting's own plugin).
    fn of(plugins: &toml::Table, version: i64, plugin: &str) -> Reading {
        Reading {
            snapshotter: cri_snapshotter(plugins, version, plugin),
            cni_conf_dir: cri_cni_conf_dir(plugins, version, plugin),
            cni_max_conf_num: cri_cni_max_conf_num(plugins, version, plugin),
            netns_under_state_dir: netns_under_state_dir(plugins, version, plugin),
        }
    }

    fn sets(&self) -> impl Iterator<Item = CriSetting> {
        let keys = [
            self.snapshotter.is_some(),
            self.cni_conf_dir.is_some(),
            self.cni_max_conf_num.is_some(),
            self.netns_under_state_dir.is_some(),
        ];
        CriSetting::ALL
            .into_iter()
            .zip(keys)
            .filter(|(_, k)| *k)
            .map(|(s, _)| s)
    }
}

impl CriKeys {
    /// The CRI keys of a file of `version` whose `[plugins]` are `plugins`.
    pub fn of(plugins: &toml::Table, version: i64) -> CriKeys {
        // A version 1 file names CRI's table `cri`; one under CRI's full
        // name there is ignored by 1.x and by 2.0 to 2.2, and read by 2.3
        // (`v1MigratePluginName` keeps a name with a dot, and the CRI
        // plugins' own migrations then move its settings; measured with
        // each line's `config dump`).
        let full_name_in_v1 = version == 1 && plugins.contains_key(CRI_PLUGIN);
        let plugin_1x = cri_plugin(version);
        let plugin_2x = if full_name_in_v1 {
            CRI_PLUGIN
        } else {
            plugin_1x
        };
        let one_x = Reading::of(plugins, version, plugin_1x);
        let two_x = Reading::of(plugins, version, plugin_2x);
        let has_runtimes = version < 3
            && plugins
                .get(plugin_2x)
                .and_then(|cri| cri.get("containerd"))
                .is_some_and(|containerd| containerd.get("runtimes").is_some());
        let mut sets: BTreeSet<CriSetting> = one_x.sets().chain(two_x.sets()).collect();
        // Any of CRI's settings may be in a table only some lines read:
        // said as a difference by line.
        if full_name_in_v1 {
            sets.extend(CriSetting::ALL);
        }
        CriKeys {
            has_cri_table: version < 3 && plugins.get(plugin_1x).is_some(),
            snapshotter_2x: match version {
                3.. => two_x.snapshotter.clone(),
                _ => two_x.snapshotter.clone().filter(|_| has_runtimes),
            },
            sets,
            has_runtimes,
            both_names: full_name_in_v1 && plugins.contains_key(plugin_1x),
            full_name_in_v1,
            one_x,
            two_x,
        }
    }
}

/// CRI's settings from `files` (each file's version and keys, in load
/// order; `main` the first), as nodectl uses them: 1.x's merge when only
/// 1.x can run them (`line_1x` without `line_2x`), else 2.3's; with each
/// reading the lines give apart, naming the lines nodectl's reading is
/// right on.
pub fn merge(
    main: &Path,
    files: &[(i64, &CriKeys)],
    line_1x: bool,
    line_2x: bool,
) -> (CriSettings, Vec<ConfigApart>) {
    let mut apart_by_line = Vec::new();
    // 2.x: key by key, the last file with the key wins.
    let by_key = CriSettings {
        snapshotter: files
            .iter()
            .rev()
            .find_map(|(_, f)| f.snapshotter_2x.clone())
            .flatten(),
        cni_conf_dir: files
            .iter()
            .rev()
            .find_map(|(_, f)| f.two_x.cni_conf_dir.clone())
            .flatten(),
        cni_max_conf_num: files
            .iter()
            .rev()
            .find_map(|(_, f)| f.two_x.cni_max_conf_num),
        netns_under_state_dir: files
            .iter()
            .rev()
            .find_map(|(_, f)| f.two_x.netns_under_state_dir)
            .unwrap_or(false),
    };
    // 1.x: the last file with CRI's table has all of it.
    let by_table = files
        .iter()
        .rev()
        .find(|(_, f)| f.has_cri_table)
        .map(|(_, f)| CriSettings {
            snapshotter: f.one_x.snapshotter.clone().flatten(),
            cni_conf_dir: f.one_x.cni_conf_dir.clone().flatten(),
            cni_max_conf_num: f.one_x.cni_max_conf_num,
            netns_under_state_dir: f.one_x.netns_under_state_dir.unwrap_or(false),
        })
        .unwrap_or_default();
    // 2.0 to 2.2: the files merged first, the whole then migrated
    // (`LoadConfig`, then server.New): the images plugin's migration sees
    // the merged `containerd` table, so a runtimes table in any file of
    // version 1 or 2 lets the last snapshotter set through.
    // A config whose files are all of version 1 is migrated with its
    // plugins renamed but CRI's settings not moved to the plugins that read
    // them since 2.0 (`LoadConfig`: `MigrateConfigTo(out.Version)`, then no
    // plugin migration): CRI's defaults (2.0.11's `config dump`).
    let all_version_1 = files.iter().all(|(version, _)| *version == 1);
    let by_merged = if all_version_1 {
        CriSettings::default()
    } else {
        CriSettings {
            snapshotter: match files
                .iter()
                .all(|(version, _)| *version <= NEWEST_1X_VERSION)
            {
                true => files
                    .iter()
                    .any(|(_, f)| f.has_runtimes)
                    .then(|| {
                        files
                            .iter()
                            .rev()
                            .find_map(|(_, f)| f.two_x.snapshotter.clone())
                    })
                    .flatten()
                    .flatten(),
                false => by_key.snapshotter.clone(),
            },
            ..by_key.clone()
        }
    };
    let lines = [(line_1x, Line::V1_7), (line_2x, Line::V2_0)].map(|(c, l)| c.then_some(l));
    let cri = match merges_of(lines.iter().flatten()) {
        (true, false) => by_table,
        (one_x, _) => {
            // nodectl reads as 2.3 does; the lines that read alike with it.
            let mut right_on = vec![(2, 3)];
            if by_merged == by_key {
                right_on.extend([(2, 0), (2, 1), (2, 2)]);
            }
            if one_x && by_table == by_key {
                right_on.extend([(1, 6), (1, 7)]);
            }
            right_on.sort();
            let mut settings = by_merged.apart_from(&by_key);
            if one_x {
                settings.extend(by_table.apart_from(&by_key));
            }
            if !settings.is_empty() {
                let mut readings = Vec::new();
                if one_x {
                    readings.push(format!(
                        "containerd 1.x (a later file's plugin table replaces the whole table) \
                         reads {by_table}"
                    ));
                }
                readings.push(format!(
                    "2.0 to 2.2 (the files merged, then migrated) read {by_merged}"
                ));
                readings.push(format!(
                    "2.3 (each file migrated, then merged key by key) reads {by_key}"
                ));
                apart_by_line.push(ConfigApart {
                    file: main.to_path_buf(),
                    right_on,
                    settings: settings.into_iter().collect(),
                    said: format!(
                        "its files set CRI's settings apart by line: {}; nodectl used 2.3's",
                        readings.join(", ")
                    ),
                });
            }
            by_key
        }
    };
    apart_by_line.extend(unsettled_by_line(main, files));
    if files.iter().any(|(_, f)| f.both_names) {
        apart_by_line.push(ConfigApart {
            file: main.to_path_buf(),
            right_on: Vec::new(),
            settings: CriSetting::ALL.to_vec(),
            said: format!(
                "a version 1 file has CRI's table both as plugins.cri and as \
                 plugins.\"{CRI_PLUGIN}\": 1.x reads the first, 2.0 to 2.2 neither, and 2.3 \
                 renames the first onto the second, keeping either by Go's map order"
            ),
        });
    }
    (cri, apart_by_line)
}

/// Where the lines that would run these files read CRI's settings in them
/// apart in ways nodectl does not follow (it cannot know the line when it
/// reads them): a problem naming the main file, so that the report says
/// so instead of judging CRI's objects by settings its daemon may not use.
/// Measured against each line's `config dump` (tests/config_dump_real.rs).
fn unsettled_by_line(main: &Path, files: &[(i64, &CriKeys)]) -> Option<ConfigApart> {
    let versions: BTreeSet<i64> = files.iter().map(|(version, _)| *version).collect();
    let settings: Vec<CriSetting> = files
        .iter()
        .flat_map(|(_, f)| f.sets.iter().copied())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let sets_cri = !settings.is_empty();
    // 1.6 starts with a config of any version and reads it as its own:
    // CRI's settings only under its plugin name `io.containerd.grpc.v1.cri`
    // (`Config.Decode`, `p.URI()` from version 2 on). 1.7 refuses a version
    // above 2, so with such a file the daemon is 1.6 or a 2.x line, which
    // reads it as nodectl does. (1.6 also takes the socket only from
    // `[grpc]`, where version 4 moved it: the socket's listener, not the
    // file, proves the daemon, so that one is no silent difference live.)
    if versions.len() == 1 && sets_cri {
        if let Some(&version) = versions.iter().find(|&&v| v >= 3) {
            return Some(ConfigApart {
                file: main.to_path_buf(),
                right_on: vec![(2, 0), (2, 1), (2, 2), (2, 3)],
                settings,
                said: format!(
                    "a version {version} config that sets CRI's settings: containerd 2.x reads \
                     them as nodectl did; 1.6 runs with it but reads CRI's settings only under \
                     plugins.\"io.containerd.grpc.v1.cri\", so its CRI would use the defaults"
                ),
            });
        }
    }
    if !sets_cri {
        return None;
    }
    if versions.len() > 1 {
        // 1.6 reads every file's plugins by the last version set; 2.0 to
        // 2.2 merge the files, then migrate the whole from the last
        // version (`LoadConfig`, server.New); 2.3 migrates each file to
        // its own version first (`LoadConfigWithPlugins`).
        let versions: Vec<String> = versions.iter().map(i64::to_string).collect();
        return Some(ConfigApart {
            file: main.to_path_buf(),
            // nodectl reads each file by its own version, as 2.3 does.
            right_on: vec![(2, 3)],
            settings,
            said: format!(
                "its files are of config versions {} and set CRI's settings: containerd 1.6 \
                 reads them all by the last version set, 2.0 to 2.2 migrate the merged \
                 whole from it, 2.3 migrates each file: CRI's snapshotter and CNI settings \
                 depend on the line, and nodectl read them as 2.3 does",
                versions.join(" and ")
            ),
        });
    }
    // 2.0 to 2.2 migrate a version 1 file to the newest version with its
    // plugins renamed but not CRI's settings moved to the plugins that
    // read them since 2.0 (`LoadConfig`: `MigrateConfigTo(out.Version)`,
    // then no plugin migration as the merged version is the newest).
    // A version 1 table under CRI's full name is read by 2.3 alone.
    let full_name = files.iter().any(|(_, f)| f.full_name_in_v1);
    versions.contains(&1).then(|| match full_name {
        false => ConfigApart {
            file: main.to_path_buf(),
            right_on: vec![(1, 6), (1, 7), (2, 3)],
            settings,
            said: "a version 1 config that sets CRI's settings: containerd 1.x and 2.3 read \
                   them, 2.0 to 2.2 drop them for CRI's defaults; nodectl used them"
                .to_string(),
        },
        true => ConfigApart {
            file: main.to_path_buf(),
            right_on: vec![(2, 3)],
            settings,
            said: format!(
                "a version 1 config with CRI's table as plugins.\"{CRI_PLUGIN}\": containerd \
                 2.3 reads it, 1.x reads only plugins.cri and 2.0 to 2.2 neither; nodectl \
                 read it as 2.3 does"
            ),
        },
    })
}

/// The CRI settings nodectl uses, as one line merges them.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CriSettings {
    pub snapshotter: Option<String>,
    pub cni_conf_dir: Option<String>,
    pub cni_max_conf_num: Option<i64>,
    pub netns_under_state_dir: bool,
}

impl CriSettings {
    /// The settings `self` reads apart from `other`.
    fn apart_from(&self, other: &CriSettings) -> BTreeSet<CriSetting> {
        let apart = [
            self.snapshotter != other.snapshotter,
            self.cni_conf_dir != other.cni_conf_dir,
            self.cni_max_conf_num != other.cni_max_conf_num,
            self.netns_under_state_dir != other.netns_under_state_dir,
        ];
        CriSetting::ALL
            .into_iter()
            .zip(apart)
            .filter(|(_, apart)| *apart)
            .map(|(setting, _)| setting)
            .collect()
    }
}

impl std::fmt::Display for CriSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "snapshotter {}, CNI conf_dir {}, max_conf_num {}, netns_mounts_under_state_dir {}",
            self.snapshotter.as_deref().unwrap_or("(default)"),
            self.cni_conf_dir.as_deref().unwrap_or("(default)"),
            self.cni_max_conf_num
                .map_or("(default)".to_string(), |n| n.to_string()),
            self.netns_under_state_dir
        )
    }
}

/// CRI's snapshotter: `[plugins."io.containerd.grpc.v1.cri".containerd]
/// snapshotter` up to version 2 (containerd 1.x; 2.x migrates it from such
/// a file), `[plugins."io.containerd.cri.v1.images"] snapshotter` from
/// version 3 (2.x reads only that one there). Outer `None`: no key; inner
/// `None`: empty, containerd's default.
fn cri_snapshotter(plugins: &toml::Table, version: i64, cri: &str) -> Option<Option<String>> {
    if version >= 3 {
        plugin_string(plugins, &["io.containerd.cri.v1.images", "snapshotter"])
    } else {
        plugin_string(plugins, &[cri, "containerd", "snapshotter"])
    }
}

/// CRI's plugin in a file of `version` up to 2: version 1 names plugins
/// by id (1.x's `Config.Decode` looks up `p.ID` for it; 2.x's
/// `v1MigratePluginName` renames `cri` to the full name).
fn cri_plugin(version: i64) -> &'static str {
    match version {
        1 => "cri",
        _ => CRI_PLUGIN,
    }
}

/// CRI's CNI config directory: `[plugins."io.containerd.grpc.v1.cri".cni]
/// conf_dir` up to version 2, `[plugins."io.containerd.cri.v1.runtime".cni]
/// conf_dir` from version 3 (2.x's runtime plugin holds the CNI config).
/// Inner `None`: the default, /etc/cni/net.d.
fn cri_cni_conf_dir(plugins: &toml::Table, version: i64, cri: &str) -> Option<Option<String>> {
    if version >= 3 {
        plugin_string(
            plugins,
            &["io.containerd.cri.v1.runtime", "cni", "conf_dir"],
        )
    } else {
        plugin_string(plugins, &[cri, "cni", "conf_dir"])
    }
}

/// CRI's `max_conf_num`, beside `conf_dir` (see [`cri_cni_conf_dir`]).
fn cri_cni_max_conf_num(plugins: &toml::Table, version: i64, cri: &str) -> Option<i64> {
    let plugin = match version >= 3 {
        true => "io.containerd.cri.v1.runtime",
        false => cri,
    };
    plugins
        .get(plugin)?
        .get("cni")?
        .get("max_conf_num")?
        .as_integer()
}

/// CRI's `netns_mounts_under_state_dir`: in `[plugins."io.containerd.grpc.v1.cri"]`
/// up to version 2, `[plugins."io.containerd.cri.v1.runtime"]` from 3.
fn netns_under_state_dir(plugins: &toml::Table, version: i64, cri: &str) -> Option<bool> {
    let plugin = match version >= 3 {
        true => "io.containerd.cri.v1.runtime",
        false => cri,
    };
    plugins
        .get(plugin)
        .and_then(|p| p.get("netns_mounts_under_state_dir"))
        .and_then(|v| v.as_bool())
}

/// The string at `path` below `[plugins]`, if the key is there: `Some(None)`
/// when it is empty (or not a string).
fn plugin_string(plugins: &toml::Table, path: &[&str]) -> Option<Option<String>> {
    let mut value = plugins.get(path[0])?;
    for key in &path[1..] {
        value = value.get(key)?;
    }
    Some(value.as_str().filter(|s| !s.is_empty()).map(str::to_string))
}
