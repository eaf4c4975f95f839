//! Ties a root or state to the running daemon by identity: what it holds
//! open under it, else a config unchanged since it started.

use std::path::{Path, PathBuf};

use super::{config, Kernel};
use crate::sources::daemon_proof;

/// What containerd keeps open under its root on every line (1.6 to 2.3,
/// measured): bbolt's metadata database (`metadata.NewDB`, the
/// `io.containerd.metadata.v1.bolt` plugin), held for the daemon's life.
pub(super) const ROOT_HELD: &[&str] = &["io.containerd.metadata.v1.bolt/meta.db"];
/// What containerd keeps open under its state: 2.3's mount manager
/// database (`io.containerd.mount-manager.v1.bolt`); 1.6 to 2.2 hold
/// nothing there (measured, no pod running).
pub(super) const STATE_HELD: &[&str] = &["io.containerd.mount-manager.v1.bolt/mounts.db"];

/// How a root or state the daemon's config names was tied to it.
pub(super) enum Tie {
    /// The daemon holds open, under it, the very file (by device and inode)
    /// it keeps there; or it holds nothing there and its config has not
    /// changed since it started.
    Tied,
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
/// candidates. Holding none (a state on 1.6 to 2.2), the config must be
/// unchanged since the daemon started: then it read these very files.
pub(super) fn tie(
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
        (Ok(()), _) => Tie::Tied,
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
pub(super) fn config_unchanged(
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
