//! containerd's config file: the three paths nodectl needs, in every config
//! version containerd has had, read with its `imports` as containerd reads
//! them.
//!
//! - 1 (or no `version`, which containerd reads as 1), 2 (containerd 1.x)
//!   and 3 (2.0 to 2.2): top-level `root` and `state`, `[grpc] address`.
//! - 4 (2.3 on): the socket moved to
//!   `[plugins."io.containerd.server.v1.grpc"] address`; containerd only
//!   migrates `[grpc]` into it for files of an older version, so a
//!   version 4 file's `[grpc]` is ignored, by containerd and by us.
//!
//! `imports` (drop-ins), as containerd's `LoadConfig` walks them (1.7:
//! services/server/config/config.go; 2.x: cmd/containerd/server/config,
//! `LoadConfigWithPlugins`): the main file, then its imports, then theirs,
//! breadth first; a path already loaded is skipped (cycles, duplicates).
//! `resolveImports`: each import is `filepath.Clean`ed and, when relative,
//! joined to the importing file's directory; one containing `*` is a
//! `filepath.Glob` (each directory's names sorted; matching nothing is no
//! error), any other is read as named (containerd refuses to start when it
//! cannot be). Each file is merged over what came before (`mergeConfig`):
//! a top-level value a later file sets (non-empty) wins. The lines differ
//! in two ways:
//! - plugin tables: 1.x replaces a plugin's whole table with a later
//!   file's; 2.x merges them key by key (`mergo.Merge` into
//!   `map[string]any`; upstream's TestMergingPluginsWithTwoCriDropInConfigs).
//! - versions: 1.x takes the last version a file sets (1.7 refuses one
//!   above 2; 1.6 runs any); 2.3 refuses a file whose version is above the
//!   first version set (the root's), and migrates each older file to its
//!   own version before the merge, so each file's keys are read by that
//!   file's version; 2.0 to 2.2 merge first and migrate the whole.
//!
//! The line is not known when the config is read (Debian's build records
//! no version, and the API is asked later): a version above 2 anywhere is
//! 2.x's; else where the two merges disagree on a setting nodectl uses,
//! 2.x's is used and the difference is a gap. So are files of different
//! versions that set CRI's settings, and a version 1 file that sets them
//! (CRI's settings by line: `peers::containerd_cri`), each line's `config
//! dump` the oracle (tests/config_dump_real.rs).

use std::collections::BTreeSet;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::model::{ConfigApart, Source};
use crate::peers::containerd_cri::{self, CriKeys, NEWEST_1X_VERSION};
use crate::read::bounded::{read_regular, Links};
use crate::sources::SourceThread;

mod glob;
use glob::{clean, glob};

/// The server plugin that owns the socket from config version 4 on.
const GRPC_PLUGIN: &str = "io.containerd.server.v1.grpc";
/// The newest config version nodectl knows (containerd 2.3).
pub const NEWEST_VERSION: i64 = 4;

/// At most this many files are read (the main one and its imports): real
/// nodes have a handful of drop-ins.
pub(crate) const MAX_FILES: usize = 64;
/// At most this many bytes in all (each file also within
/// [`CONFIG_SIZE_LIMIT`]).
pub(crate) const MAX_TOTAL_BYTES: u64 = 8 << 20;
/// Imports of imports are followed this deep.
pub(crate) const MAX_DEPTH: usize = 8;

/// What a config file (with its imports) sets; `None` where it leaves
/// containerd's default.
#[derive(Debug, Default, PartialEq)]
pub struct ConfigPaths {
    /// The main file's version.
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
    /// Every file read, in containerd's order (the main file first), as
    /// containerd names them.
    pub files: Vec<PathBuf>,
    /// What could not be read as containerd reads it, each naming its file
    /// (an import unread, a limit reached, the lines merging it apart):
    /// the paths above come from the rest.
    pub problems: Vec<(PathBuf, String)>,
    /// Settings the lines that could run the config read apart: which
    /// reading nodectl used, and the lines it is right on.
    pub apart_by_line: Vec<ConfigApart>,
    /// The latest change (ctime, ns since the epoch) of every file read and
    /// of every directory a glob listed: after the daemon's start, the
    /// config is not (all) the one it read.
    pub changed_nanos: i64,
    /// An import is a relative glob: containerd before 1.6.29 and 1.7.16
    /// reads it from its working directory ([`GlobsFrom::WorkingDir`]).
    pub relative_globs: bool,
}

/// Where a relative glob import is read from: the importing file's
/// directory (containerd 1.6.29, 1.7.16, 2.x: upstream's "Fix config import
/// relative path glob"), or, before, the daemon's working directory
/// (`filepath.Glob` of the uncleaned relative pattern).
#[derive(Debug, Clone, PartialEq)]
pub enum GlobsFrom {
    ImportingFile,
    WorkingDir(PathBuf),
}

/// One file's settings, each read by that file's own version (2.x
/// migrates each file to its own version before merging).
#[derive(Debug, Default)]
struct FileSettings {
    /// As written; 0: none.
    declared_version: i64,
    version: i64,
    root: Option<PathBuf>,
    state: Option<PathBuf>,
    address: Option<PathBuf>,
    imports: Vec<String>,
    /// CRI's keys, read by the file's own version.
    cri: CriKeys,
}

#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    version: Option<i64>,
    root: Option<PathBuf>,
    state: Option<PathBuf>,
    grpc: Option<GrpcSection>,
    #[serde(default)]
    imports: Vec<String>,
    #[serde(default)]
    plugins: toml::Table,
}

#[derive(Debug, Default, Deserialize)]
struct GrpcSection {
    address: Option<PathBuf>,
}

/// Reads `path` and its imports. A version nodectl does not know is an
/// error naming it: its keys could mean anything, and a silent default
/// would send every check to the wrong directories. So is the main file
/// unread; an import unread is a problem in the answer.
///
/// Read on a thread of its own and given up after [`CONFIG_DEADLINE`]: it is
/// read before the rest of the node (which has its own deadline), and a
/// stalled disk under it must not hang nodectl either.
pub fn read(path: &Path) -> io::Result<ConfigPaths> {
    read_in(path, None)
}

/// [`read`] of the config as a process sees it, every file (each import
/// too) opened under `root` (its `/proc/<pid>/root`).
pub fn read_in(path: &Path, root: Option<&Path>) -> io::Result<ConfigPaths> {
    read_in_globbing(path, root, GlobsFrom::ImportingFile)
}

fn read_in_globbing(path: &Path, root: Option<&Path>, globs: GlobsFrom) -> io::Result<ConfigPaths> {
    let owned = path.to_path_buf();
    let root = root.map(Path::to_path_buf);
    let started = Instant::now();
    match SourceThread::spawn(Source::Config, path, move |_| {
        load(&owned, root.as_deref(), &globs)
    })
    .answer(started + CONFIG_DEADLINE, started)
    {
        Ok((result, _)) => result,
        Err((_, error)) => Err(io::Error::new(io::ErrorKind::TimedOut, error)),
    }
}

/// Reads a config file; one a running containerd (`read_by`) reads,
/// through its `/proc/<pid>/root` first, its imports too (an absolute
/// drop-in path is the process's): nodectl in a container (the DaemonSet)
/// may not have k3s's config at the same path, and could have another file
/// there.
pub(crate) fn read_seen_by(
    path: &Path,
    read_by: Option<i32>,
    proc_root: Option<&Path>,
) -> io::Result<ConfigPaths> {
    read_seen_by_globbing(path, read_by, proc_root, GlobsFrom::ImportingFile)
}

/// [`read_seen_by`], relative glob imports read from `globs`.
pub(crate) fn read_seen_by_globbing(
    path: &Path,
    read_by: Option<i32>,
    proc_root: Option<&Path>,
    globs: GlobsFrom,
) -> io::Result<ConfigPaths> {
    if let (Some(pid), Some(proc_root), true) = (read_by, proc_root, path.is_absolute()) {
        let root = proc_root.join(pid.to_string()).join("root");
        if let Ok(file) = read_in_globbing(path, Some(&root), globs.clone()) {
            return Ok(file);
        }
    }
    read_in_globbing(path, None, globs)
}

/// A config file is a few KiB on the root disk: one that has not been read
/// (with its drop-ins) in this long will not be.
const CONFIG_DEADLINE: Duration = Duration::from_secs(1);

/// Real configs are a few KiB; TOML this large is not one.
pub(crate) const CONFIG_SIZE_LIMIT: u64 = 4 << 20;

/// Where nodectl opens a path containerd names: under `root` if given.
pub(super) fn opened(path: &Path, root: Option<&Path>) -> PathBuf {
    match root {
        Some(root) => root.join(path.strip_prefix("/").unwrap_or(path)),
        None => path.to_path_buf(),
    }
}

/// containerd's `LoadConfig` walk (see the module's doc), bounded.
fn load(main: &Path, root: Option<&Path>, globs: &GlobsFrom) -> io::Result<ConfigPaths> {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    let mut changed_nanos = 0;
    let mut total_bytes = 0u64;
    let mut loaded = BTreeSet::new();
    let mut relative_globs = false;
    let mut pending = std::collections::VecDeque::from([(main.to_path_buf(), 0usize)]);
    while let Some((path, depth)) = pending.pop_front() {
        if loaded.contains(&path) {
            continue;
        }
        let is_main = files.is_empty() && problems.is_empty();
        if loaded.len() == MAX_FILES {
            problems.push((path, format!("not read: over {MAX_FILES} config files")));
            continue;
        }
        let read = match read_file(
            &path,
            root,
            CONFIG_SIZE_LIMIT.min(MAX_TOTAL_BYTES - total_bytes),
        ) {
            Ok(read) => read,
            // The main file unread is the config unread.
            Err(err) if is_main => return Err(err),
            Err(err) => {
                problems.push((path.clone(), format!("import not read: {err}")));
                loaded.insert(path);
                continue;
            }
        };
        total_bytes += read.0;
        changed_nanos = changed_nanos.max(read.1);
        let settings = match read.2 {
            Ok(settings) => settings,
            Err(err) if is_main => return Err(err),
            Err(err) => {
                problems.push((path.clone(), format!("import not read: {err}")));
                loaded.insert(path);
                continue;
            }
        };
        let imports = settings.imports.clone();
        loaded.insert(path.clone());
        files.push((path.clone(), settings));
        if imports.is_empty() {
            continue;
        }
        if depth == MAX_DEPTH {
            problems.push((
                path,
                format!("its imports were not read: imports nested over {MAX_DEPTH} deep"),
            ));
            continue;
        }
        relative_globs |= imports
            .iter()
            .any(|i| i.contains('*') && !Path::new(i).is_absolute());
        for import in resolve_imports(&path, &imports, globs) {
            match import {
                Import::File(file) => pending.push_back((file, depth + 1)),
                Import::Glob(pattern) => match glob(&pattern, root, &mut changed_nanos) {
                    Ok(matches) => pending.extend(matches.into_iter().map(|m| (m, depth + 1))),
                    Err(err) => problems.push((pattern, format!("import not read: {err}"))),
                },
            }
        }
    }
    let mut paths = merge(files, problems, changed_nanos)?;
    paths.relative_globs = relative_globs;
    Ok(paths)
}

/// One file: its size, change time and settings (or why they are none).
fn read_file(
    path: &Path,
    root: Option<&Path>,
    limit: u64,
) -> io::Result<(u64, i64, io::Result<FileSettings>)> {
    let read = read_regular(&opened(path, root), limit, Links::Follow).map_err(|err| {
        if limit < CONFIG_SIZE_LIMIT && err.kind() == io::ErrorKind::InvalidData {
            io::Error::new(
                err.kind(),
                format!("over the {MAX_TOTAL_BYTES} bytes read of all config files"),
            )
        } else {
            err
        }
    })?;
    let changed = read.metadata.ctime() * 1_000_000_000 + read.metadata.ctime_nsec();
    let size = read.bytes.len() as u64;
    let settings = String::from_utf8(read.bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
        .and_then(|text| parse_file(&text));
    Ok((size, changed, settings))
}

enum Import {
    File(PathBuf),
    Glob(PathBuf),
}

/// containerd's `resolveImports`: cleaned, relative to the importing
/// file's directory, a glob when it holds `*` (only then: `?` and `[` are
/// read as named).
fn resolve_imports(parent: &Path, imports: &[String], globs: &GlobsFrom) -> Vec<Import> {
    imports
        .iter()
        .map(|import| {
            let mut path = clean(Path::new(import));
            match globs {
                GlobsFrom::WorkingDir(cwd) if import.contains('*') && !path.is_absolute() => {
                    path = cwd.join(import);
                }
                _ if !path.is_absolute() => {
                    path = clean(&parent.parent().unwrap_or(Path::new("")).join(path));
                }
                _ => {}
            }
            match import.contains('*') {
                true => Import::Glob(path),
                false => Import::File(path),
            }
        })
        .collect()
}

/// One file's settings, by its own version.
fn parse_file(text: &str) -> io::Result<FileSettings> {
    let invalid = |message: String| io::Error::new(io::ErrorKind::InvalidData, message);
    let file: ConfigFile = toml::from_str(text).map_err(|e| invalid(e.message().to_string()))?;
    let declared_version = file.version.unwrap_or(0);
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
    Ok(FileSettings {
        declared_version,
        version,
        root: nonempty(file.root),
        state: nonempty(file.state),
        address: nonempty(address),
        imports: file.imports,
        cri: CriKeys::of(&file.plugins, version),
    })
}

/// `mergeConfig` over the files in load order (see the module's doc).
fn merge(
    files: Vec<(PathBuf, FileSettings)>,
    problems: Vec<(PathBuf, String)>,
    changed_nanos: i64,
) -> io::Result<ConfigPaths> {
    let invalid = |message: String| io::Error::new(io::ErrorKind::InvalidData, message);
    let Some((main, first)) = files.first() else {
        return Err(invalid("no config file read".to_string()));
    };
    // 2.x: the first version set is the root's; a file above it stops
    // containerd ("drop-in config version %d higher than root config
    // version %d"). 1.x: the last version set, at most 2.
    let root_version = files
        .iter()
        .map(|(_, f)| f.declared_version)
        .find(|v| *v != 0);
    let above_root = files
        .iter()
        .find(|(_, f)| root_version.is_some_and(|root| f.declared_version > root));
    let last_version = files
        .iter()
        .rev()
        .map(|(_, f)| f.declared_version)
        .find(|v| *v != 0)
        .unwrap_or(1);
    let line_1x = last_version <= NEWEST_1X_VERSION
        && files.iter().all(|(_, f)| f.version <= NEWEST_1X_VERSION);
    if let (Some((path, file)), false) = (above_root, line_1x) {
        return Err(invalid(format!(
            "{} has config version {}, above the main config's {}: containerd 2.x \
             refuses to start with it, 1.x with any version above 2",
            path.display(),
            file.declared_version,
            root_version.unwrap_or(1)
        )));
    }
    let line_2x = above_root.is_none();
    let last = |f: fn(&FileSettings) -> Option<PathBuf>| files.iter().rev().find_map(|(_, s)| f(s));
    let mut paths = ConfigPaths {
        version: first.version,
        root: last(|f| f.root.clone()),
        state: last(|f| f.state.clone()),
        address: last(|f| f.address.clone()),
        files: files.iter().map(|(p, _)| p.clone()).collect(),
        changed_nanos,
        ..ConfigPaths::default()
    };
    let cri_files: Vec<(i64, &CriKeys)> = files.iter().map(|(_, f)| (f.version, &f.cri)).collect();
    let (cri, apart_by_line) = containerd_cri::merge(main, &cri_files, line_1x, line_2x);
    paths.snapshotter = cri.snapshotter;
    paths.cni_conf_dir = cri.cni_conf_dir.map(PathBuf::from);
    paths.cni_max_conf_num = cri.cni_max_conf_num;
    paths.netns_under_state_dir = cri.netns_under_state_dir;
    paths.problems = problems;
    paths.apart_by_line = apart_by_line;
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One file, merged alone.
    fn parse(text: &str) -> io::Result<ConfigPaths> {
        let settings = parse_file(text)?;
        let mut paths = merge(vec![(PathBuf::from("/c.toml"), settings)], Vec::new(), 0)?;
        paths.files.clear();
        Ok(paths)
    }

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
            ..ConfigPaths::default()
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
        assert!(
            parse(&format!("version = 2\n{old}"))
                .unwrap()
                .netns_under_state_dir
        );
        // Version 1 names CRI by its id; its full name there is read by
        // 2.3 alone: taken as 2.3 takes it, right on 2.3 only.
        let full_name = parse(old).unwrap();
        assert!(full_name.netns_under_state_dir);
        let said = &full_name.apart_by_line;
        assert!(
            said.iter().any(|a| !a.right_on.contains(&(1, 7))),
            "{said:?}"
        );
        assert!(
            said.iter().all(|a| a.right_on.contains(&(2, 3))),
            "{said:?}"
        );
        assert!(
            parse("[plugins.cri]\nnetns_mounts_under_state_dir = true\n")
                .unwrap()
                .netns_under_state_dir
        );
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
        // Version 1 (or none) names CRI by its id, `cri`; a table under
        // its full name there only 2.3 reads, and nodectl says so.
        assert_eq!(read(old), Some(PathBuf::from("/k3s/cni")));
        let said = &parse(old).unwrap().apart_by_line;
        for line in [(1, 6), (1, 7), (2, 0), (2, 2)] {
            assert!(
                said.iter().any(|a| !a.right_on.contains(&line)),
                "{line:?}: {said:?}"
            );
        }
        assert!(
            said.iter().all(|a| a.right_on.contains(&(2, 3))),
            "{said:?}"
        );
        assert!(
            said.iter()
                .any(|a| a.said.contains("1.x reads only plugins.cri")),
            "{said:?}"
        );
        assert_eq!(
            read("[plugins.cri.cni]\nconf_dir = \"/k3s/cni\"\n"),
            Some(PathBuf::from("/k3s/cni"))
        );
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
        assert_eq!(read(old), Some(0), "2.3 reads a version 1 file's full name");
        assert_eq!(read("[plugins.cri.cni]\nmax_conf_num = 0\n"), Some(0));
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
        let runtime = "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n\
                       runtime_type = \"io.containerd.runc.v2\"\n";
        let read = |text: &str| parse(text).unwrap().snapshotter;
        assert_eq!(
            read(&format!("version = 2\n{old}{runtime}")).as_deref(),
            Some("native")
        );
        // 2.x's migration takes it only beside a runtime table; 1.x reads
        // it anyway: 2.x's reading, the difference said.
        let without_runtime = parse(&format!("version = 2\n{old}")).unwrap();
        assert_eq!(without_runtime.snapshotter, None);
        assert!(
            without_runtime.apart_by_line[0]
                .said
                .contains("reads snapshotter native"),
            "{:?}",
            without_runtime.apart_by_line
        );
        assert_eq!(read(old), None);
        assert_eq!(
            read(
                "[plugins.cri.containerd]\nsnapshotter = \"native\"\n\
                 [plugins.cri.containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n"
            )
            .as_deref(),
            Some("native")
        );
        assert_eq!(read(&format!("version = 3\n{new}")).as_deref(), Some("zfs"));
        assert_eq!(read(&format!("version = 4\n{new}")).as_deref(), Some("zfs"));
        // Each version reads only its own key.
        assert_eq!(read(&format!("version = 3\n{old}")), None);
        assert_eq!(read(&format!("version = 2\n{new}")), None);
        assert_eq!(read("version = 2\n"), None);
    }
}

#[cfg(test)]
mod import_tests {
    use super::*;
    use std::fs;

    /// A directory of config files, each written with its parents.
    struct Files(tempfile::TempDir);

    impl Files {
        fn new() -> Files {
            Files(tempfile::tempdir().unwrap())
        }
        fn write(&self, name: &str, text: &str) -> PathBuf {
            let path = self.0.path().join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, text).unwrap();
            path
        }
        fn path(&self, name: &str) -> PathBuf {
            self.0.path().join(name)
        }
        fn read(&self, main: &str) -> ConfigPaths {
            read(&self.path(main)).unwrap()
        }
    }

    fn root_of(paths: &ConfigPaths) -> &str {
        paths.root.as_deref().unwrap().to_str().unwrap()
    }

    #[test]
    fn a_relative_glob_is_read_from_the_importing_file_s_directory() {
        let files = Files::new();
        files.write(
            "etc/config.toml",
            "version = 2\nroot = \"/main\"\nimports = [\"conf.d/*.toml\"]\n",
        );
        files.write(
            "etc/conf.d/50-paths.toml",
            "version = 2\nroot = \"/dropin/root\"\nstate = \"/dropin/state\"\n",
        );
        files.write("etc/conf.d/60-other.conf", "root = \"/not/toml\"\n");
        let paths = files.read("etc/config.toml");
        assert_eq!(root_of(&paths), "/dropin/root");
        assert_eq!(paths.state, Some(PathBuf::from("/dropin/state")));
        assert_eq!(
            paths.files,
            vec![
                files.path("etc/config.toml"),
                files.path("etc/conf.d/50-paths.toml")
            ]
        );
        assert!(paths.problems.is_empty(), "{:?}", paths.problems);
    }

    #[test]
    fn glob_matches_are_merged_in_sorted_order_and_a_glob_matching_nothing_is_no_problem() {
        let files = Files::new();
        files.write(
            "config.toml",
            "version = 2\nimports = [\"d/*.toml\", \"none/*.toml\", \"e/*.toml\"]\n",
        );
        // Written in an order neither sorted nor reversed: the directory's
        // order (creation, reverse creation or hashed) is not the merge's.
        for name in ["30", "10", "50", "20", "40"] {
            files.write(&format!("d/{name}.toml"), &format!("root = \"/{name}\"\n"));
        }
        files.write("d/00.toml", "root = \"/00\"\nstate = \"/00-state\"\n");
        let paths = files.read("config.toml");
        let sorted: Vec<PathBuf> = std::iter::once(files.path("config.toml"))
            .chain(["00", "10", "20", "30", "40", "50"].map(|n| files.path(&format!("d/{n}.toml"))))
            .collect();
        assert_eq!(paths.files, sorted);
        assert_eq!(root_of(&paths), "/50");
        assert_eq!(paths.state, Some(PathBuf::from("/00-state")));
        assert!(paths.problems.is_empty(), "{:?}", paths.problems);
    }

    #[test]
    fn a_later_file_wins_in_import_order_and_an_empty_value_overrides_nothing() {
        let files = Files::new();
        files.write(
            "config.toml",
            "version = 2\nroot = \"/main\"\nstate = \"/main-state\"\nimports = [\"z.toml\", \"a.toml\"]\n",
        );
        files.write("z.toml", "root = \"/z\"\n");
        files.write("a.toml", "root = \"/a\"\nstate = \"\"\n");
        let paths = files.read("config.toml");
        // The list's order, not the names'.
        assert_eq!(root_of(&paths), "/a");
        assert_eq!(paths.state, Some(PathBuf::from("/main-state")));
    }

    #[test]
    fn imports_of_imports_are_read_breadth_first_relative_to_their_own_file() {
        let files = Files::new();
        files.write(
            "config.toml",
            "version = 2\nimports = [\"sub/a.toml\", \"c.toml\"]\n",
        );
        files.write("sub/a.toml", "root = \"/a\"\nimports = [\"b.toml\"]\n");
        files.write("sub/b.toml", "root = \"/b\"\nstate = \"/b-state\"\n");
        files.write("c.toml", "root = \"/c\"\n");
        let paths = files.read("config.toml");
        // main, a, c, then a's import b: b is merged last.
        assert_eq!(
            paths.files,
            vec![
                files.path("config.toml"),
                files.path("sub/a.toml"),
                files.path("c.toml"),
                files.path("sub/b.toml"),
            ]
        );
        assert_eq!(root_of(&paths), "/b");
    }

    #[test]
    fn a_cycle_and_a_duplicate_are_each_read_once() {
        let files = Files::new();
        files.write(
            "config.toml",
            "version = 2\nroot = \"/main\"\nimports = [\"a.toml\", \"./a.toml\", \"config.toml\"]\n",
        );
        files.write(
            "a.toml",
            "state = \"/a\"\nimports = [\"config.toml\", \"a.toml\"]\n",
        );
        let paths = files.read("config.toml");
        assert_eq!(
            paths.files,
            vec![files.path("config.toml"), files.path("a.toml")]
        );
        assert_eq!(root_of(&paths), "/main");
        assert!(paths.problems.is_empty(), "{:?}", paths.problems);
    }

    #[test]
    fn an_unreadable_import_is_a_problem_naming_it_and_the_rest_is_read() {
        let files = Files::new();
        files.write(
            "config.toml",
            "version = 2\nroot = \"/main\"\nimports = [\"missing.toml\", \"bad.toml\", \"ok.toml\"]\n",
        );
        files.write("bad.toml", "root = [unterminated");
        files.write("ok.toml", "state = \"/ok\"\n");
        let paths = files.read("config.toml");
        let named: Vec<&Path> = paths.problems.iter().map(|(p, _)| p.as_path()).collect();
        assert_eq!(
            named,
            vec![files.path("missing.toml"), files.path("bad.toml")]
        );
        assert_eq!(paths.state, Some(PathBuf::from("/ok")));
        // The main file unread is the config unread.
        assert!(read(&files.path("absent.toml")).is_err());
    }

    #[test]
    fn a_version_2_file_s_import_of_version_3_is_refused_as_containerd_refuses_it() {
        let files = Files::new();
        files.write("config.toml", "version = 2\nimports = [\"d.toml\"]\n");
        files.write("d.toml", "version = 3\nroot = \"/d\"\n");
        let err = read(&files.path("config.toml")).unwrap_err();
        assert!(
            err.to_string().contains("above the main config's 2"),
            "{err}"
        );
    }

    #[test]
    fn each_file_s_keys_are_read_by_its_own_version_and_mixed_versions_said() {
        let files = Files::new();
        // 2.3 migrates the version 2 drop-in before the merge: its old CRI
        // keys count, as the version 3 main file's new ones do. 1.6 and 2.0
        // read them otherwise: said, not settled.
        files.write(
            "config.toml",
            "version = 3\nimports = [\"d.toml\"]\n\
             [plugins.\"io.containerd.cri.v1.images\"]\nsnapshotter = \"native\"\n",
        );
        files.write(
            "d.toml",
            "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\nconf_dir = \"/dropin/cni\"\n",
        );
        let paths = files.read("config.toml");
        assert_eq!(paths.version, 3);
        assert_eq!(paths.snapshotter.as_deref(), Some("native"));
        assert_eq!(paths.cni_conf_dir, Some(PathBuf::from("/dropin/cni")));
        assert!(paths.problems.is_empty(), "{:?}", paths.problems);
        assert_eq!(paths.apart_by_line.len(), 1, "{:?}", paths.apart_by_line);
        assert!(
            paths.apart_by_line[0]
                .said
                .contains("config versions 2 and 3"),
            "{:?}",
            paths.apart_by_line
        );
        assert_eq!(paths.apart_by_line[0].right_on, [(2, 3)]);
    }

    #[test]
    fn version_3_drop_ins_merge_cri_key_by_key() {
        let files = Files::new();
        files.write(
            "config.toml",
            "version = 3\nimports = [\"d.toml\"]\n\
             [plugins.\"io.containerd.cri.v1.runtime\"]\nnetns_mounts_under_state_dir = true\n",
        );
        files.write(
            "d.toml",
            "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".cni]\nconf_dir = \"/d\"\n",
        );
        let paths = files.read("config.toml");
        assert!(paths.netns_under_state_dir);
        assert_eq!(paths.cni_conf_dir, Some(PathBuf::from("/d")));
        assert!(paths.problems.is_empty(), "{:?}", paths.problems);
    }

    #[test]
    fn where_1x_and_2x_merge_version_2_drop_ins_apart_2x_is_used_and_the_difference_said() {
        let files = Files::new();
        files.write(
            "config.toml",
            "version = 2\nimports = [\"d.toml\"]\n\
             [plugins.\"io.containerd.grpc.v1.cri\"]\nnetns_mounts_under_state_dir = true\n",
        );
        // 1.x: this table replaces the main file's whole CRI table.
        files.write(
            "d.toml",
            "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\nconf_dir = \"/d\"\n",
        );
        let paths = files.read("config.toml");
        assert!(paths.netns_under_state_dir);
        assert_eq!(paths.cni_conf_dir, Some(PathBuf::from("/d")));
        assert!(paths.problems.is_empty(), "{:?}", paths.problems);
        assert_eq!(paths.apart_by_line.len(), 1, "{:?}", paths.apart_by_line);
        assert_eq!(paths.apart_by_line[0].file, files.path("config.toml"));
        assert!(
            paths.apart_by_line[0]
                .said
                .contains("netns_mounts_under_state_dir false"),
            "{:?}",
            paths.apart_by_line
        );
        assert_eq!(
            paths.apart_by_line[0].right_on,
            [(2, 0), (2, 1), (2, 2), (2, 3)]
        );
        // The settings read apart, each of which CRI's own word settles:
        // 1.x drops the main file's netns_mounts_under_state_dir (and
        // reads the same conf_dir as 2.x).
        use crate::model::CriSetting;
        assert_eq!(
            paths.apart_by_line[0].settings,
            [CriSetting::NetnsMountsUnderStateDir]
        );
        // A main file of version 1 with a drop-in of 2 above it is 1.x's
        // alone (2.x refuses it): 1.x's merge, and its files' versions
        // differ, which 1.6 and 1.7 read by the last one set: said.
        files.write(
            "config.toml",
            "version = 1\nimports = [\"d.toml\"]\n\
             [plugins.cri]\nnetns_mounts_under_state_dir = true\n",
        );
        let paths = files.read("config.toml");
        assert!(!paths.netns_under_state_dir);
        assert!(paths.problems.is_empty(), "{:?}", paths.problems);
        assert_eq!(paths.apart_by_line.len(), 1, "{:?}", paths.apart_by_line);
        assert!(
            paths.apart_by_line[0]
                .said
                .contains("config versions 1 and 2"),
            "{:?}",
            paths.apart_by_line
        );
        // Those the files set.
        assert_eq!(
            paths.apart_by_line[0].settings,
            [CriSetting::CniConfDir, CriSetting::NetnsMountsUnderStateDir]
        );
    }

    #[test]
    fn a_snapshotter_2_0_lets_through_by_another_file_s_runtime_is_said_as_2_0_s() {
        let files = Files::new();
        files.write(
            "config.toml",
            "version = 2\nimports = [\"d.toml\"]\n\
             [plugins.\"io.containerd.grpc.v1.cri\".containerd]\nsnapshotter = \"native\"\n",
        );
        files.write(
            "d.toml",
            "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n\
             runtime_type = \"io.containerd.runc.v2\"\n",
        );
        // 1.x: the drop-in's table replaces the main file's; 2.3: the main
        // file, migrated alone, has no runtime; 2.0 to 2.2 migrate both
        // merged, and keep it.
        let paths = files.read("config.toml");
        assert_eq!(paths.snapshotter, None);
        assert_eq!(paths.apart_by_line.len(), 1, "{:?}", paths.apart_by_line);
        let apart = &paths.apart_by_line[0];
        assert_eq!(apart.right_on, [(1, 6), (1, 7), (2, 3)]);
        assert!(
            apart
                .said
                .contains("2.0 to 2.2 (the files merged, then migrated) read snapshotter native"),
            "{}",
            apart.said
        );
    }

    #[test]
    fn a_version_3_config_setting_cris_settings_is_said_apart_from_1_6() {
        let files = Files::new();
        files.write(
            "config.toml",
            "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".cni]\nconf_dir = \"/A\"\n",
        );
        let paths = files.read("config.toml");
        assert_eq!(paths.cni_conf_dir.as_deref(), Some(Path::new("/A")));
        assert_eq!(paths.apart_by_line.len(), 1, "{:?}", paths.apart_by_line);
        assert_eq!(
            paths.apart_by_line[0].right_on,
            [(2, 0), (2, 1), (2, 2), (2, 3)]
        );
        assert!(paths.apart_by_line[0].said.contains("1.6 runs with it"));
        // Without CRI's settings, every line reads it alike.
        files.write("config.toml", "version = 3\nroot = \"/r\"\n");
        assert_eq!(files.read("config.toml").apart_by_line, []);
    }

    #[test]
    fn too_many_files_and_too_deep_imports_are_problems_not_hangs() {
        let files = Files::new();
        files.write("config.toml", "version = 2\nimports = [\"many/*.toml\"]\n");
        for i in 0..MAX_FILES + 5 {
            files.write(&format!("many/{i:03}.toml"), "state = \"/s\"\n");
        }
        let paths = files.read("config.toml");
        assert_eq!(paths.files.len(), MAX_FILES);
        assert_eq!(paths.problems.len(), 6, "{:?}", paths.problems);
        assert!(paths.problems[0].1.contains("over 64 config files"));

        let files = Files::new();
        files.write("config.toml", "version = 2\nimports = [\"0.toml\"]\n");
        for i in 0..MAX_DEPTH + 3 {
            files.write(
                &format!("{i}.toml"),
                &format!("root = \"/{i}\"\nimports = [\"{}.toml\"]\n", i + 1),
            );
        }
        let paths = files.read("config.toml");
        assert_eq!(paths.files.len(), MAX_DEPTH + 1);
        assert_eq!(paths.problems.len(), 1, "{:?}", paths.problems);
        assert!(paths.problems[0].1.contains("nested over 8 deep"));
    }

    #[test]
    fn a_fifo_import_and_bytes_over_the_total_are_problems_not_hangs() {
        let files = Files::new();
        files.write(
            "config.toml",
            "version = 2\nimports = [\"fifo.toml\", \"big/*.toml\"]\n",
        );
        nix::unistd::mkfifo(&files.path("fifo.toml"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        // Three files of 3 MiB: each within its own cap, not all within
        // the total.
        let padding = format!("# {}\n", "x".repeat(3 << 20));
        for name in ["a", "b", "c"] {
            files.write(
                &format!("big/{name}.toml"),
                &format!("state = \"/{name}\"\n{padding}"),
            );
        }
        let started = Instant::now();
        let paths = files.read("config.toml");
        assert!(
            started.elapsed() < CONFIG_DEADLINE,
            "{:?}",
            started.elapsed()
        );
        let named: Vec<&Path> = paths.problems.iter().map(|(p, _)| p.as_path()).collect();
        assert_eq!(
            named,
            vec![files.path("fifo.toml"), files.path("big/c.toml")]
        );
        assert!(
            paths.problems[1]
                .1
                .contains("bytes read of all config files"),
            "{:?}",
            paths.problems
        );
        assert_eq!(paths.state, Some(PathBuf::from("/b")));
    }

    #[test]
    fn a_process_s_config_is_read_under_its_root_absolute_imports_too() {
        let files = Files::new();
        files.write(
            "proc-root/etc/c/config.toml",
            "version = 2\nimports = [\"/etc/c/conf.d/*.toml\"]\n",
        );
        files.write("proc-root/etc/c/conf.d/a.toml", "root = \"/inside\"\n");
        let paths = read_in(
            Path::new("/etc/c/config.toml"),
            Some(&files.path("proc-root")),
        )
        .unwrap();
        assert_eq!(root_of(&paths), "/inside");
        assert_eq!(
            paths.files,
            vec![
                PathBuf::from("/etc/c/config.toml"),
                PathBuf::from("/etc/c/conf.d/a.toml")
            ]
        );
    }

    #[test]
    fn only_a_star_makes_a_glob() {
        let imports = resolve_imports(
            Path::new("/etc/c/config.toml"),
            &["d/*.toml".into(), "x?.toml".into(), "/abs/../y.toml".into()],
            &GlobsFrom::ImportingFile,
        );
        let names: Vec<(bool, PathBuf)> = imports
            .into_iter()
            .map(|i| match i {
                Import::Glob(p) => (true, p),
                Import::File(p) => (false, p),
            })
            .collect();
        assert_eq!(
            names,
            vec![
                (true, PathBuf::from("/etc/c/d/*.toml")),
                (false, PathBuf::from("/etc/c/x?.toml")),
                (false, PathBuf::from("/y.toml")),
            ]
        );
    }
}
