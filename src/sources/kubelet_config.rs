//! kubelet's own configuration, read as kubelet reads it, for the cgroup
//! settings its pod cgroups are named by. kubelet (cmd/kubelet/app/server.go,
//! `NewKubeletCommand`, 1.26 to 1.35) loads the file of `--config` (YAML or
//! JSON, a relative path taken from its working directory: `loadConfigFile`),
//! then merges every `*.conf` below `--config-dir` over it, walked in
//! lexical order, subdirectories included (`mergeKubeletConfigurations`: a
//! JSON merge patch each), then parses its command line again over both
//! (`kubeletConfigFlagPrecedence`): a flag always wins. `cgroupRoot`,
//! `cgroupDriver` and `cgroupsPerQOS` are fields of that configuration;
//! their flags are deprecated, so a node's kubelet usually sets them in the
//! file.

use std::fmt;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use rustix::fs::OFlags;
use serde_json::{Map, Value};

use crate::model::{Gap, Source};
use crate::peers;
use crate::peers::kubelet::{heap, Budget, Held, Refused, DECODED_LIMIT};
use crate::read::bounded::{read_opened, read_regular, FileRead, Links};
use crate::read::deadline;
use crate::sources::host_view::open_in_root;

/// Where a kubelet's files are, as nodectl reaches them: its working
/// directory (where a relative path it was given starts), and, when it
/// runs in another mount namespace than nodectl (nodectl in a DaemonSet
/// pod), its root (`/proc/<pid>/root`, open), in which every path it names
/// is resolved with `RESOLVE_IN_ROOT`: the files it reads, not those
/// nodectl's container has at the same paths, and no symlink there leading
/// out into nodectl's.
#[derive(Debug, Clone)]
pub struct KubeletFiles {
    /// In nodectl's own view (`/proc/<pid>/cwd`), or, with `root`, the
    /// path kubelet's `/proc/<pid>/cwd` names in its own.
    pub cwd: PathBuf,
    pub root: Option<Arc<File>>,
}

/// What kubelet's files are looked at from: a [`KubeletFiles`], or a plain
/// directory of nodectl's own view (its working directory).
pub trait FilesView {
    fn view(&self) -> (&Path, Option<&File>);
}

impl FilesView for Path {
    fn view(&self) -> (&Path, Option<&File>) {
        (self, None)
    }
}

impl FilesView for KubeletFiles {
    fn view(&self) -> (&Path, Option<&File>) {
        (&self.cwd, self.root.as_deref())
    }
}

/// Reads the regular file at `path` (bounded, symlinks followed as kubelet
/// follows them), inside `root` when there is one.
pub(crate) fn read_file(root: Option<&File>, path: &Path, limit: u64) -> io::Result<FileRead> {
    match root {
        None => read_regular(path, limit, Links::Follow),
        // O_NONBLOCK: a FIFO there opens at once and is refused by fstat.
        Some(root) => read_opened(
            open_in_root(root, path, OFlags::RDONLY | OFlags::NONBLOCK)?,
            limit,
        ),
    }
}

/// The entries of the directory `dir` (each path, and whether it is a
/// directory), inside `root` when there is one; at most `limit`.
pub(crate) fn list_dir(
    root: Option<&File>,
    dir: &Path,
    limit: usize,
) -> io::Result<Vec<(PathBuf, bool)>> {
    let Some(root) = root else {
        return Ok(fs::read_dir(dir)?
            .flatten()
            .take(limit)
            .map(|e| (e.path(), e.file_type().is_ok_and(|t| t.is_dir())))
            .collect());
    };
    let opened = open_in_root(root, dir, OFlags::RDONLY | OFlags::DIRECTORY)?;
    let mut entries = Vec::new();
    for entry in rustix::fs::Dir::read_from(&opened)?.flatten() {
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if entries.len() >= limit {
            break;
        }
        let name = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name);
        let is_dir = match entry.file_type() {
            rustix::fs::FileType::Unknown => {
                rustix::fs::statat(&opened, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok_and(
                    |st| {
                        rustix::fs::FileType::from_raw_mode(st.st_mode)
                            == rustix::fs::FileType::Directory
                    },
                )
            }
            kind => kind == rustix::fs::FileType::Directory,
        };
        entries.push((dir.join(name), is_dir));
    }
    Ok(entries)
}

/// Gaps here are the kubelet source's.
const SOURCE: Source = Source::Kubelet;
/// A kubelet configuration is a few KB.
const FILE_LIMIT: u64 = 1024 * 1024;
/// Drop-ins read at most, and how deep below `--config-dir`.
const DROP_IN_LIMIT: usize = 64;
/// Entries of one `--config-dir` directory listed at most: kubelet walks
/// them all, so past this the drop-ins are a gap, never a silent first few.
pub(crate) const LIST_LIMIT: usize = 10_000;
const DEPTH_LIMIT: usize = 8;

/// A setting and the file that set it (`None`: kubelet's command line).
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    pub value: Value,
    pub from: Option<PathBuf>,
}

/// The value kubelet runs with for the configuration `field` (its JSON
/// name) whose flag is `flag`: the flag on its command line `args` if given,
/// else the last of its config file and drop-ins that sets it; `None` when
/// nothing sets it (kubelet's default then). `cwd` is kubelet's working
/// directory as nodectl reaches it. What cannot be read is a gap, and the
/// rest is still read: a drop-in kubelet could not read would have stopped
/// kubelet, so it is the file that changed since, not the setting. Past
/// the reading's budget, or once it is given up, the reading stops there
/// (see `each_file`), a gap naming the file.
pub fn setting(
    args: &[String],
    cwd: &(impl FilesView + ?Sized),
    field: &str,
    flag: &str,
    gaps: &mut Vec<Gap>,
) -> Option<Setting> {
    if let Some(value) = flag_value(args, flag) {
        return Some(Setting { value, from: None });
    }
    configured(args, cwd, field, gaps)
}

/// The value kubelet's config file and drop-ins set for `field`, for a
/// setting kubelet has no flag for (`podLogsDir`): as [`setting`] reads
/// them.
pub fn configured(
    args: &[String],
    cwd: &(impl FilesView + ?Sized),
    field: &str,
    gaps: &mut Vec<Gap>,
) -> Option<Setting> {
    let mut found = None;
    // Each file's field taken, the rest of it dropped before the next.
    each_file(args, cwd, gaps, |path, mut config| {
        match config.remove(field) {
            // A merge patch's null takes the field away: the default.
            Some(Value::Null) => found = None,
            Some(value) => {
                found = Some(Setting {
                    value,
                    from: Some(path),
                })
            }
            None => {}
        }
    });
    found
}

/// kubelet's flags whose value is a boolean (of those nodectl reads).
const BOOLEAN_FLAGS: &[&str] = &["--cgroups-per-qos"];

/// The flag `flag` on kubelet's command line `args`, as the config field's
/// JSON value, read as pflag reads it ([`peers::kubelet`]): an empty value
/// is a value (`--cgroup-root=` sets the field to ""). A boolean flag's
/// text is read as Go's `strconv.ParseBool` reads it; a value that is none
/// stays a string (kubelet would not start with it). Any other flag's value
/// is a string.
fn flag_value(args: &[String], flag: &str) -> Option<Value> {
    if !BOOLEAN_FLAGS.contains(&flag) {
        return peers::kubelet::flag_value(args, flag).map(Value::String);
    }
    let text = peers::kubelet::bool_flag_text(args, flag)?;
    Some(go_bool(&text).map_or_else(|| Value::String(text), Value::Bool))
}

/// A boolean as Go's `strconv.ParseBool` reads one.
fn go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// kubelet's config file, then its drop-ins in the order it merges them,
/// each parsed to its top-level fields and handed to `each`, within one
/// [`Budget`] for them all (kubelet merges them into one configuration, so
/// they are one input). The reading stops, with a gap naming the file, when
/// it would go past the budget, or once the thread's waiter gave up on it
/// (see [`deadline::given_up`]): a look's deadline passed, nobody will use
/// what it reads, and an abandoned reader must not go on allocating.
fn each_file(
    args: &[String],
    cwd: &(impl FilesView + ?Sized),
    gaps: &mut Vec<Gap>,
    each: impl FnMut(PathBuf, Map<String, Value>),
) {
    let stop = deadline::given_up();
    each_file_within(args, cwd, DECODED_LIMIT, stop.as_deref(), gaps, each);
}

/// [`each_file`] within `limit` bytes, stopped by `stop`; the most it had
/// charged and held at once.
fn each_file_within(
    args: &[String],
    cwd: &(impl FilesView + ?Sized),
    limit: usize,
    stop: Option<&AtomicBool>,
    gaps: &mut Vec<Gap>,
    mut each: impl FnMut(PathBuf, Map<String, Value>),
) -> usize {
    let (cwd, root) = cwd.view();
    let budget = Budget::new(limit, stop);
    let mut paths = Vec::new();
    if let Some(file) = arg_in(args, "--config") {
        paths.push(cwd.join(file));
    }
    if let Some(dir) = arg_in(args, "--config-dir") {
        drop_ins(root, &cwd.join(dir), 0, &budget, &mut paths, gaps);
    }
    for path in paths {
        match read_settings(root, &path, FILE_LIMIT, &budget) {
            Ok(config) => each(path, config),
            Err(why) if why.stops_the_reading() => {
                let why = format!("{why}; no kubelet config file after it was read either");
                gaps.push(Gap::item(SOURCE, &path, why));
                break;
            }
            Err(why) => gaps.push(Gap::item(SOURCE, &path, why.to_string())),
        }
    }
    budget.most()
}

/// The `*.conf` files below `dir`, as Go's `filepath.WalkDir` visits them:
/// each directory's names sorted, a subdirectory walked where it sorts.
fn drop_ins(
    root: Option<&File>,
    dir: &Path,
    depth: usize,
    budget: &Budget,
    found: &mut Vec<PathBuf>,
    gaps: &mut Vec<Gap>,
) {
    let (mut entries, _listed) = match list_within(root, dir, budget) {
        Ok((entries, _)) if entries.len() > LIST_LIMIT => {
            gaps.push(Gap::item(
                SOURCE,
                dir,
                format!(
                    "kubelet's --config-dir holds more than {LIST_LIMIT} entries: \
                     its drop-ins were not read"
                ),
            ));
            return;
        }
        Ok(listed) => listed,
        Err(err) => {
            gaps.push(Gap::item(
                SOURCE,
                dir,
                format!("kubelet's --config-dir: {err}"),
            ));
            return;
        }
    };
    entries.sort();
    for (path, is_dir) in entries {
        if found.len() >= DROP_IN_LIMIT {
            gaps.push(Gap::item(
                SOURCE,
                dir,
                format!("more than {DROP_IN_LIMIT} kubelet drop-ins: the rest were not read"),
            ));
            return;
        }
        match is_dir {
            true if depth < DEPTH_LIMIT => drop_ins(root, &path, depth + 1, budget, found, gaps),
            true => gaps.push(Gap::item(
                SOURCE,
                &path,
                format!("kubelet drop-ins nested over {DEPTH_LIMIT} deep: not read"),
            )),
            false if path.file_name().is_some_and(peers::kubelet::is_drop_in) => found.push(path),
            false => {}
        }
    }
}

/// What listing one directory may take, held while its entries are kept:
/// each of [`LIST_LIMIT`] + 1 paths (the directory's, and a name of at most
/// 255 bytes), three entries' room for each (the list's buffer doubling,
/// then the sort's), and the directory stream's own buffer.
fn listing_cost(dir: &Path) -> usize {
    let entry = std::mem::size_of::<(PathBuf, bool)>();
    let path = heap(dir.as_os_str().len() + 1 + 255);
    (LIST_LIMIT + 1) * (path + 3 * entry) + 64 * 1024
}

/// The entries of `dir` ([`list_dir`]: at most [`LIST_LIMIT`] + 1, more
/// than the bound for the caller to say), with what listing them took held
/// in `budget` until the guard is dropped; refused before listing when the
/// budget has not room for it, or the reading was given up.
pub(crate) fn list_within<'b, 's>(
    root: Option<&File>,
    dir: &Path,
    budget: &'b Budget<'s>,
) -> Result<(Vec<(PathBuf, bool)>, Held<'b, 's>), Unread> {
    let held = budget.hold(listing_cost(dir)).map_err(Unread::Refused)?;
    let entries = list_dir(root, dir, LIST_LIMIT + 1).map_err(Unread::Io)?;
    Ok((entries, held))
}

/// Why one of kubelet's config files (or k3s's) was not read.
#[derive(Debug)]
pub(crate) enum Unread {
    Io(io::Error),
    /// Not text, or not a mapping of settings.
    Invalid(&'static str),
    /// Not decoded (see [`Refused`]).
    Refused(Refused),
}

impl Unread {
    /// Whether the whole reading stops here (over its budget, or given up),
    /// rather than going on without this one file.
    pub(crate) fn stops_the_reading(&self) -> bool {
        matches!(self, Unread::Refused(refused) if refused.stops_the_reading())
    }
}

impl fmt::Display for Unread {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Unread::Io(err) => err.fmt(f),
            Unread::Invalid(why) => f.write_str(why),
            Unread::Refused(refused) => refused.fmt(f),
        }
    }
}

/// One config file's top-level fields (YAML, JSON being YAML too), at most
/// `limit` bytes of it read, within `budget`: what reading it takes (its
/// bytes, and as much again while a file that grew since its `fstat` is
/// read) is held until it is decoded.
pub(crate) fn read_settings(
    root: Option<&File>,
    path: &Path,
    limit: u64,
    budget: &Budget,
) -> Result<Map<String, Value>, Unread> {
    let read_cost = 2 * heap(usize::try_from(limit).unwrap_or(usize::MAX / 4) + 1);
    let _reading = budget.hold(read_cost).map_err(Unread::Refused)?;
    let read = read_file(root, path, limit).map_err(Unread::Io)?;
    let text = String::from_utf8(read.bytes).map_err(|_| Unread::Invalid("not UTF-8"))?;
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match budget.decode(&text).map_err(Unread::Refused)? {
        Value::Object(fields) => Ok(fields),
        _ => Err(Unread::Invalid("not a mapping of settings")),
    }
}

/// The value of `name` (`--name=value` or `--name value`) in `args`; the
/// last one given wins, as in kubelet.
pub(crate) fn arg_in(args: &[String], name: &str) -> Option<String> {
    // kubelet ignores an empty `--config`, `--config-dir` or path flag
    // (`len(...) > 0` in cmd/kubelet/app/server.go), so none is a path.
    peers::kubelet::flag_value(args, name).filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn a_flag_wins_then_the_last_drop_in_then_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(
            &d.join("config.yaml"),
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupRoot: /from-file\ncgroupDriver: systemd\ncgroupsPerQOS: false\n",
        );
        write(&d.join("conf.d/10-a.conf"), "cgroupRoot: /ten\n");
        // Walked where it sorts, before 20-b.conf: its value is overridden.
        write(
            &d.join("conf.d/15-dir/x.conf"),
            "{\"cgroupRoot\": \"/fifteen\"}\n",
        );
        write(&d.join("conf.d/20-b.conf"), "cgroupRoot: /twenty\n");
        // Not a drop-in: only `.conf` files are.
        write(&d.join("conf.d/30-c.yaml"), "cgroupRoot: /thirty\n");
        let mut gaps = Vec::new();
        let kubelet = args(&["kubelet", "--config=config.yaml", "--config-dir", "conf.d"]);
        let root = setting(&kubelet, d, "cgroupRoot", "--cgroup-root", &mut gaps).unwrap();
        assert_eq!(root.value, "/twenty");
        assert_eq!(
            root.from.as_deref(),
            Some(d.join("conf.d/20-b.conf").as_path())
        );
        let driver = setting(&kubelet, d, "cgroupDriver", "--cgroup-driver", &mut gaps).unwrap();
        assert_eq!(
            (driver.value, driver.from),
            ("systemd".into(), Some(d.join("config.yaml")))
        );
        let qos = setting(&kubelet, d, "cgroupsPerQOS", "--cgroups-per-qos", &mut gaps).unwrap();
        assert_eq!(qos.value, Value::Bool(false));
        assert!(gaps.is_empty(), "{gaps:?}");

        let flagged = args(&["kubelet", "--config", "config.yaml", "--cgroup-root=/flag"]);
        let root = setting(&flagged, d, "cgroupRoot", "--cgroup-root", &mut gaps).unwrap();
        assert_eq!((root.value, root.from), ("/flag".into(), None));
    }

    #[test]
    fn nothing_set_is_kubelets_default_and_a_bad_file_is_a_gap() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(&d.join("config.yaml"), "kind: KubeletConfiguration\n");
        write(&d.join("conf.d/10.conf"), "cgroupRoot: [unclosed\n");
        write(&d.join("conf.d/20.conf"), "cgroupRoot: null\n");
        let mut gaps = Vec::new();
        let kubelet = args(&["kubelet", "--config=config.yaml", "--config-dir=conf.d"]);
        assert_eq!(
            setting(&kubelet, d, "cgroupRoot", "--cgroup-root", &mut gaps),
            None
        );
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(gaps[0].path.ends_with("conf.d/10.conf"), "{gaps:?}");

        let mut gaps = Vec::new();
        let missing = args(&["kubelet", "--config=/nonexistent/config.yaml"]);
        assert_eq!(
            setting(&missing, d, "cgroupRoot", "--cgroup-root", &mut gaps),
            None
        );
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert_eq!(
            setting(
                &args(&["kubelet"]),
                d,
                "cgroupRoot",
                "--cgroup-root",
                &mut gaps
            ),
            None
        );
    }

    /// Each spelling kubelet takes and nodectl once ignored (issue: an
    /// empty `--cgroup-root=`, `--cgroup_root`, `--config_dir`, a drop-in
    /// named `.conf`, the real drop-in among hundreds of other entries).
    #[test]
    fn flags_and_drop_ins_are_read_as_kubelet_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(&d.join("config.yaml"), "cgroupRoot: /from-file\n");
        let root = |list: &[&str], gaps: &mut Vec<Gap>| {
            setting(&args(list), d, "cgroupRoot", "--cgroup-root", gaps).map(|s| (s.value, s.from))
        };
        let mut gaps = Vec::new();
        // An empty value is the flag's, over the file's.
        assert_eq!(
            root(
                &["kubelet", "--config=config.yaml", "--cgroup-root="],
                &mut gaps
            ),
            Some(("".into(), None))
        );
        assert_eq!(
            root(
                &["kubelet", "--config=config.yaml", "--cgroup_root=/x"],
                &mut gaps
            ),
            Some(("/x".into(), None))
        );
        // A drop-in named just `.conf`, found through `--config_dir`, after
        // more entries than nodectl once listed (it read the first 256).
        // 3,000, as the issue measured: listed whole, both drop-ins are read
        // wherever the directory's order puts them.
        for n in 0..3000 {
            write(
                &d.join(format!("conf.d/{n:03}-other.yaml")),
                "cgroupRoot: /no\n",
            );
        }
        write(&d.join("conf.d/.conf"), "cgroupRoot: /dot-conf\n");
        write(&d.join("conf.d/zz.conf"), "cgroupDriver: systemd\n");
        assert_eq!(
            root(
                &["kubelet", "--config=config.yaml", "--config_dir=conf.d"],
                &mut gaps
            ),
            Some(("/dot-conf".into(), Some(d.join("conf.d/.conf"))))
        );
        let driver = setting(
            &args(&["kubelet", "--config_dir=conf.d"]),
            d,
            "cgroupDriver",
            "--cgroup-driver",
            &mut gaps,
        );
        assert_eq!(driver.map(|s| s.value), Some("systemd".into()));
        assert!(gaps.is_empty(), "{gaps:?}");
    }

    #[test]
    fn a_config_dir_past_the_listing_bound_is_a_gap_not_its_first_entries() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(&d.join("conf.d/00.conf"), "cgroupRoot: /first\n");
        for n in 0..LIST_LIMIT {
            fs::write(d.join(format!("conf.d/{n}")), "").unwrap();
        }
        let mut gaps = Vec::new();
        let kubelet = args(&["kubelet", "--config-dir=conf.d"]);
        assert_eq!(
            setting(&kubelet, d, "cgroupRoot", "--cgroup-root", &mut gaps),
            None
        );
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(gaps[0].error.contains("more than"), "{gaps:?}");
    }

    /// `--config` and drop-ins that each alias `aliases` times an anchor of
    /// `anchor` bytes, each setting `cgroupRoot` to its own name.
    fn alias_bombs(d: &Path, drop_ins: usize, anchor: usize, aliases: usize) -> Vec<String> {
        let bomb = |name: &str| {
            format!(
                "cgroupRoot: /{name}\nanchor: &a \"{}\"\nlist:\n{}",
                "x".repeat(anchor),
                "- *a\n".repeat(aliases)
            )
        };
        write(&d.join("config.yaml"), &bomb("main"));
        for n in 0..drop_ins {
            write(
                &d.join(format!("conf.d/{n:02}.conf")),
                &bomb(&format!("{n:02}")),
            );
        }
        args(&["kubelet", "--config=config.yaml", "--config-dir=conf.d"])
    }

    /// The reading, its gaps, the most it accounted at once and the most it
    /// allocated at once (measured).
    fn read_measured(
        kubelet: &[String],
        d: &Path,
        stop: Option<&AtomicBool>,
        each: impl FnMut(PathBuf, Map<String, Value>),
    ) -> (Vec<Gap>, usize, usize) {
        let mut gaps = Vec::new();
        let (most, peak) = peers::kubelet::counting::peak_of(|| {
            each_file_within(kubelet, d, DECODED_LIMIT, stop, &mut gaps, each)
        });
        (gaps, most, peak)
    }

    /// The issue's input split across `--config` and 9 drop-ins: an anchor
    /// of 9 KB aliased 100,000 times in all (900 KB). One budget for the
    /// whole reading: refused in the first file, nothing after it read, and
    /// never more than 64 MiB accounted or allocated.
    #[test]
    fn the_issues_alias_bomb_split_across_files_is_a_gap_within_64_mib() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let kubelet = alias_bombs(d, 9, 9_000, 10_000);
        let mut read = Vec::new();
        let (gaps, most, peak) = read_measured(&kubelet, d, None, |path, _| read.push(path));
        assert!(read.is_empty(), "{read:?}");
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(gaps[0].path.ends_with("config.yaml"), "{gaps:?}");
        assert!(gaps[0].error.contains("more than 64 MiB"), "{gaps:?}");
        assert!(most <= DECODED_LIMIT, "accounted {most}");
        assert!(peak <= most, "allocated {peak}, accounted {most}");
    }

    /// Files that each decode well within 64 MiB, together past it: the
    /// budget is the reading's, not each file's. The file that goes over is
    /// the gap, the ones before it are kept, none after it is read.
    #[test]
    fn one_budget_holds_for_the_config_and_every_drop_in_together() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // Each about 9.5 MiB expanded, 64 KB of text: 10 files, 95 MiB.
        let kubelet = alias_bombs(d, 9, 64 * 1024, 150);
        let alone = args(&["kubelet", "--config=config.yaml"]);
        let (gaps, most, _) = read_measured(&alone, d, None, |_, _| {});
        assert!(
            gaps.is_empty() && most < DECODED_LIMIT / 4,
            "{most} {gaps:?}"
        );

        let mut read = Vec::new();
        let (gaps, most, peak) = read_measured(&kubelet, d, None, |path, _| read.push(path));
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(gaps[0].error.contains("more than 64 MiB"), "{gaps:?}");
        let over = read.len();
        assert!((3..10).contains(&over), "{over} files read");
        // The first not read is the gap: drop-in `over - 1` (the main
        // config is the first read).
        assert_eq!(gaps[0].path, d.join(format!("conf.d/{:02}.conf", over - 1)));
        assert_eq!(read[0], d.join("config.yaml"));
        assert!(most <= DECODED_LIMIT, "accounted {most}");
        assert!(peak <= most, "allocated {peak}, accounted {most}");
        // As a setting: the last file read before the gap sets it.
        let mut gaps = Vec::new();
        let root = setting(&kubelet, d, "cgroupRoot", "--cgroup-root", &mut gaps).unwrap();
        assert_eq!(root.value, format!("/{:02}", over - 2), "{gaps:?}");
    }

    /// A reading whose waiter gave up (its look's deadline passed) stops
    /// before the next file: nothing more is read, decoded or allocated
    /// for an answer nobody takes.
    #[test]
    fn a_reading_given_up_stops_before_the_next_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(&d.join("config.yaml"), "cgroupRoot: /main\n");
        write(&d.join("conf.d/10.conf"), "cgroupRoot: /ten\n");
        write(&d.join("conf.d/20.conf"), "cgroupRoot: /twenty\n");
        let kubelet = args(&["kubelet", "--config=config.yaml", "--config-dir=conf.d"]);
        let stop = AtomicBool::new(false);
        let mut read = Vec::new();
        // Given up while the first file is handed on.
        let (gaps, _, _) = read_measured(&kubelet, d, Some(&stop), |path, _| {
            read.push(path);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        assert_eq!(read, [d.join("config.yaml")]);
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert_eq!(gaps[0].path, d.join("conf.d/10.conf"));
        assert!(gaps[0].error.contains("deadline passed"), "{gaps:?}");
        // Given up before it starts: nothing listed or read.
        let mut read = Vec::new();
        let (gaps, most, _) = read_measured(&kubelet, d, Some(&stop), |path, _| read.push(path));
        assert!(read.is_empty() && most == 0, "{read:?} {most}");
        assert!(
            gaps.iter().all(|g| g.error.contains("deadline passed")),
            "{gaps:?}"
        );
    }

    #[test]
    fn through_kubelets_root_its_files_are_read_and_no_symlink_leads_out() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        // nodectl's own file, at a path kubelet's root does not have.
        let outside = tmp.path().join("outside.yaml");
        write(&outside, "cgroupRoot: /escaped\n");
        write(
            &root.join("etc/kubelet/conf.d/10.conf"),
            "cgroupRoot: /inside\n",
        );
        // An absolute symlink in kubelet's root to nodectl's file's path.
        std::os::unix::fs::symlink(&outside, root.join("etc/kubelet/config.yaml")).unwrap();
        let files = KubeletFiles {
            cwd: PathBuf::from("/etc/kubelet"),
            root: Some(Arc::new(File::open(&root).unwrap())),
        };
        let mut gaps = Vec::new();
        let kubelet = args(&["kubelet", "--config=config.yaml", "--config-dir=conf.d"]);
        let found = setting(&kubelet, &files, "cgroupRoot", "--cgroup-root", &mut gaps).unwrap();
        // The drop-in, found inside its root (nodectl has no /etc/kubelet).
        assert_eq!(found.value, "/inside");
        // The link resolved inside its root, where it names nothing: a gap,
        // never nodectl's file.
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(gaps[0].path.ends_with("config.yaml"), "{gaps:?}");
        let mut gaps = Vec::new();
        let file_only = args(&["kubelet", "--config=config.yaml"]);
        assert_eq!(
            setting(&file_only, &files, "cgroupRoot", "--cgroup-root", &mut gaps),
            None
        );
    }
}
