//! Ties a root or state to the running daemon by identity: what it holds
//! open under it; a config unchanged since it started only names it (see
//! `Paths::by_config_only`).

use std::path::{Path, PathBuf};

use super::{config, Kernel, DEFAULT_ROOT, DEFAULT_STATE};
use crate::model::{ContainerdProcess, DaemonDir, Located, Origin, Paths, Untied};
use crate::sources::daemon_proof;

/// Ties the root and state in `paths` to the daemon `process` (proven):
/// its own (its flags, its own by construction; else its config, read as
/// it reads it, imports too, or containerd's defaults), each tied to it by
/// what it holds open ([`tie`]). One held under another directory than its
/// config names is replaced when it was taken as the daemon's; any other
/// is compared with its own by identity; one that cannot be tied is
/// unproven.
pub(super) fn own_root_and_state(
    paths: &mut Paths,
    process: &ContainerdProcess,
    default_config: &Path,
    config_by_flag: bool,
    proc_root: Option<&Path>,
    kernel: &dyn Kernel,
) {
    // The daemon's own root and state: its flags (its own by construction),
    // else its config (read as it reads it, imports too) or containerd's
    // defaults, each tied to it by what it holds open (`tie`).
    let config = process.config.as_deref().unwrap_or(default_config);
    let own_config = config::read_seen_by(config, Some(process.pid), proc_root).ok();
    let pid = process.pid;
    let open_files = kernel.open_files(pid);
    let own_config = match own_config {
        Some(read) if read.relative_globs && process.root.is_none() => {
            let older = globbed_as_before(&read, config, pid, proc_root, &open_files, kernel);
            match older {
                Some(older) => {
                    adopt(paths, &older, config_by_flag);
                    let note = "its config was read as containerd before 1.6.29 and 1.7.16 \
                                reads a relative glob import, from its working directory: the \
                                root it names then is the one it holds open"
                        .to_string();
                    add_note(&mut paths.note, note);
                    Some(older)
                }
                None => Some(read),
            }
        }
        other => other,
    };
    let mut unchanged = config_unchanged(own_config.as_ref(), pid, kernel);
    let daemon_flags = [process.root.clone(), process.state.clone()];
    for (what, located, flag, held) in [
        ("root", &mut paths.root, &daemon_flags[0], ROOT_HELD),
        ("state", &mut paths.state, &daemon_flags[1], STATE_HELD),
    ] {
        let from_config = match what {
            "root" => own_config.as_ref().and_then(|c| c.root.clone()),
            _ => own_config.as_ref().and_then(|c| c.state.clone()),
        };
        let default = match what {
            "root" => DEFAULT_ROOT,
            _ => DEFAULT_STATE,
        };
        let given = flag.clone().filter(|p| !p.as_os_str().is_empty());
        let by_flag = given.is_some();
        let named = given.unwrap_or_else(|| from_config.unwrap_or_else(|| PathBuf::from(default)));
        // containerd takes a relative root or state as given (`MkdirAll`,
        // `filepath.Join` into its plugins' dirs): from its working
        // directory, not nodectl's.
        let named = match named.is_relative() {
            false => named,
            true => match kernel.cwd(pid) {
                Ok(cwd) => cwd.join(named),
                Err(why) => {
                    let why = format!(
                        "{what} {} is relative and containerd pid {pid}'s working directory \
                         could not be read: {why}",
                        named.display()
                    );
                    untie(
                        (&mut paths.untied, &mut paths.unproven),
                        what,
                        &located.path,
                        why,
                    );
                    continue;
                }
            },
        };
        let (own, tie) = match by_flag {
            true => (named, Tie::Tied),
            false => {
                let tie = tie(kernel, pid, &named, held, &open_files, &unchanged);
                (named, tie)
            }
        };
        // Taken from the daemon's own flags or from the config it reads
        // (not `--config`'s): its own, once tied. Anything else is compared
        // by identity, never by spelling: the same words may name another
        // directory here.
        let from_daemon = match located.origin {
            Origin::Process | Origin::OpenFile => true,
            Origin::Config | Origin::Default => !config_by_flag,
            // (kubelet's: never a containerd path.)
            Origin::Flag | Origin::KubeletConfig | Origin::K3sConfig | Origin::KubeliteArgs => {
                false
            }
        };
        // Tied by its config alone: judged as the daemon's, acted on only
        // once its own word or a shim of it ties it (gather's settle).
        let by_config_only = match &tie {
            Tie::ByConfig(why) => Some(format!(
                "{what} {} is tied to containerd pid {pid} by nothing but its config: {why}",
                own.display()
            )),
            _ => None,
        };
        let own = match tie {
            Tie::Tied | Tie::ByConfig(_) => own,
            Tie::Untied(why) => {
                let why = format!(
                    "{what} {} could not be tied to containerd pid {pid}: {why}",
                    own.display()
                );
                untie(
                    (&mut paths.untied, &mut paths.unproven),
                    what,
                    &located.path,
                    why,
                );
                continue;
            }
            Tie::Held { real, how } => {
                // The config as nodectl reads it is not what the daemon
                // runs on (edited since, or read by another line's rules:
                // containerd before 1.6.29 and 1.7.16 globs a relative
                // import from its working directory, `resolveImports`):
                // unchanged, it vouches for nothing else.
                unchanged = Err(format!(
                    "its config as nodectl reads it names another {what} ({}) than the one it \
                     holds open ({})",
                    own.display(),
                    real.display()
                ));
                if from_daemon {
                    let note = format!(
                        "{what} {} is containerd pid {pid}'s ({how}); its config names {} \
                         (edited after it started, or a drop-in not read)",
                        real.display(),
                        own.display()
                    );
                    add_note(&mut paths.note, note);
                    *located = Located {
                        path: real,
                        origin: Origin::OpenFile,
                    };
                    continue;
                }
                real
            }
        };
        let dir = match what {
            "root" => DaemonDir::Root,
            _ => DaemonDir::State,
        };
        let mut tied_by_config = |path: &Path| {
            if let Some(why) = by_config_only.clone() {
                paths.by_config_only.push(Untied {
                    dir,
                    path: path.to_path_buf(),
                    why,
                });
            }
        };
        if from_daemon {
            // Its own, spelled from where nodectl reads it.
            if located.path.is_relative() {
                located.path = own;
            }
            tied_by_config(&located.path);
            continue;
        }
        let reason = match (kernel.file_id(&located.path), kernel.file_id_in(pid, &own)) {
            (Ok(ours), Ok(theirs)) if ours == theirs => {
                tied_by_config(&located.path);
                continue;
            }
            (Ok(_), Ok(_)) => format!(
                "{what} {} is not containerd pid {pid}'s (it uses {})",
                located.path.display(),
                own.display()
            ),
            (Err(why), _) | (_, Err(why)) => format!(
                "{what} {} could not be tied to containerd pid {pid}'s ({}): {why}",
                located.path.display(),
                own.display()
            ),
        };
        untie(
            (&mut paths.untied, &mut paths.unproven),
            what,
            &located.path,
            reason,
        );
    }
}

/// Records `path`, containerd's `what` as nodectl has it, as not tied to
/// the proven daemon: nothing is acted on (`unproven`), and nothing found
/// there is judged unless the daemon's own word ties it later.
fn untie(
    (untied, unproven): (&mut Vec<Untied>, &mut Vec<String>),
    what: &str,
    path: &Path,
    why: String,
) {
    let dir = match what {
        "root" => DaemonDir::Root,
        _ => DaemonDir::State,
    };
    untied.push(Untied {
        dir,
        path: path.to_path_buf(),
        why: why.clone(),
    });
    unproven.push(why);
}

/// Adds `note` to the paths' notes, after any said before.
pub(crate) fn add_note(notes: &mut Option<String>, note: String) {
    *notes = Some(match notes.take() {
        Some(before) => format!("{before}; {note}"),
        None => note,
    });
}

/// The daemon's config read as containerd before 1.6.29 and 1.7.16 reads
/// a relative glob import (from its working directory, `resolveImports`),
/// when read as later lines read it names a root the daemon does not hold
/// and read so names the one it holds. `None`: no such reading.
fn globbed_as_before(
    read: &config::ConfigPaths,
    config: &Path,
    pid: i32,
    proc_root: Option<&Path>,
    open_files: &Result<Vec<daemon_proof::OpenFile>, String>,
    kernel: &dyn Kernel,
) -> Option<config::ConfigPaths> {
    let root_of = |c: &config::ConfigPaths| c.root.clone().unwrap_or(PathBuf::from(DEFAULT_ROOT));
    let named = root_of(read);
    let never = Err(String::new());
    if !matches!(
        tie(kernel, pid, &named, ROOT_HELD, open_files, &never),
        Tie::Held { .. }
    ) {
        return None;
    }
    let cwd = kernel.cwd(pid).ok()?;
    let globs = config::GlobsFrom::WorkingDir(cwd);
    let older = config::read_seen_by_globbing(config, Some(pid), proc_root, globs).ok()?;
    let named = root_of(&older);
    matches!(
        tie(kernel, pid, &named, ROOT_HELD, open_files, &never),
        Tie::Tied
    )
    .then_some(older)
}

/// What `paths` took from the daemon's config (not `--config`'s), taken
/// from `older` instead; not the socket, on which the daemon was proven.
fn adopt(paths: &mut Paths, older: &config::ConfigPaths, config_by_flag: bool) {
    if config_by_flag {
        return;
    }
    for (located, from, default) in [
        (&mut paths.root, &older.root, DEFAULT_ROOT),
        (&mut paths.state, &older.state, DEFAULT_STATE),
    ] {
        if matches!(located.origin, Origin::Config | Origin::Default) {
            *located = match from {
                Some(path) => Located {
                    path: path.clone(),
                    origin: Origin::Config,
                },
                None => Located {
                    path: PathBuf::from(default),
                    origin: Origin::Default,
                },
            };
        }
    }
    paths.snapshotter = older.snapshotter.clone();
    paths.cni_conf_dir = older.cni_conf_dir.clone();
    paths.netns_under_state_dir = older.netns_under_state_dir;
}

/// What containerd keeps open under its root on every line (1.6 to 2.3,
/// measured): bbolt's metadata database (`metadata.NewDB`, the
/// `io.containerd.metadata.v1.bolt` plugin), held for the daemon's life.
const ROOT_HELD: &[&str] = &["io.containerd.metadata.v1.bolt/meta.db"];
/// What containerd keeps open under its state: 2.3's mount manager
/// database (`io.containerd.mount-manager.v1.bolt`); 1.6 to 2.2 hold
/// nothing there (measured, no pod running).
const STATE_HELD: &[&str] = &["io.containerd.mount-manager.v1.bolt/mounts.db"];

/// How a root or state the daemon's config names was tied to it.
enum Tie {
    /// The daemon holds open, under it, the very file (by device and inode)
    /// it keeps there.
    Tied,
    /// It holds nothing there and its config has not changed since it
    /// started: named by that config as nodectl reads it, nothing more
    /// (why, in words).
    ByConfig(String),
    /// The daemon holds that file open under another directory: `real`.
    Held {
        real: PathBuf,
        how: String,
    },
    Untied(String),
}

/// Ties `named` (a root or state the daemon's config names, or the
/// default) to daemon `pid` by identity: a file it keeps open under such a
/// directory (`held`, relative to it) is compared, by device and inode,
/// with that file under `named`; the link's spelling only picks the
/// candidates. Holding none (a state on 1.6 to 2.2), an unchanged config
/// since the daemon started names it as nodectl reads it
/// ([`Tie::ByConfig`]), no more.
fn tie(
    kernel: &dyn Kernel,
    pid: i32,
    named: &Path,
    held: &[&str],
    open_files: &Result<Vec<daemon_proof::OpenFile>, String>,
    unchanged: &Result<(), String>,
) -> Tie {
    let candidates: Vec<(&daemon_proof::OpenFile, &str)> = match open_files {
        Ok(files) => files
            .iter()
            .filter_map(|file| {
                held.iter()
                    .find(|relative| file.link.ends_with(relative))
                    .map(|relative| (file, *relative))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    for (file, relative) in &candidates {
        let Ok(open) = kernel.open_file_id(pid, file.fd) else {
            continue;
        };
        if kernel.file_id_in(pid, &named.join(relative)) == Ok(open) {
            return Tie::Tied;
        }
        // Held elsewhere: the directory it is under, if that path (as the
        // daemon resolves it) leads to the very file it holds.
        let depth = Path::new(relative).components().count();
        let Some(real) = file.link.ancestors().nth(depth) else {
            continue;
        };
        if kernel.file_id_in(pid, &real.join(relative)) == Ok(open) {
            return Tie::Held {
                real: real.to_path_buf(),
                how: format!("it holds {} open", real.join(relative).display()),
            };
        }
    }
    match (unchanged, open_files) {
        (Ok(()), Ok(_)) => Tie::ByConfig(
            "it holds nothing open there (containerd before 2.3 keeps nothing open under its \
             state) and its config, unchanged since it started, names it as nodectl reads it"
                .to_string(),
        ),
        (Ok(()), Err(unread)) => Tie::ByConfig(format!(
            "its open files could not be read ({unread}) and its config, unchanged since it \
             started, names it as nodectl reads it"
        )),
        (Err(why), Ok(_)) => Tie::Untied(format!("it holds nothing open there and {why}")),
        (Err(why), Err(unread)) => Tie::Untied(format!(
            "its open files could not be read ({unread}) and {why}"
        )),
    }
}

/// A process's start time is read to a clock tick (and truncated): a file
/// changed within this of it may have been read before it.
const START_SLACK_NANOS: i64 = 20_000_000;

/// Whether the daemon's config (every file and globbed directory of it)
/// is unchanged since the daemon started, by change time (ctime, which no
/// write can set back): then the daemon read what nodectl reads.
fn config_unchanged(
    config: Option<&config::ConfigPaths>,
    pid: i32,
    kernel: &dyn Kernel,
) -> Result<(), String> {
    let Some(config) = config else {
        // No config now: containerd's defaults, as at its start unless a
        // config was removed since (not told by anything left).
        return Ok(());
    };
    let started = kernel
        .started_nanos(pid)
        .map_err(|why| format!("its start time is unknown ({why})"))?;
    if config.changed_nanos <= started.saturating_add(START_SLACK_NANOS) {
        return Ok(());
    }
    Err(format!(
        "its config ({}) changed {:.1} s after it started",
        config
            .files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        (config.changed_nanos - started) as f64 / 1e9
    ))
}
