//! Offline evidence archives: `nodectl collect` writes the two snapshots a
//! `check` needs (plus raw copies of the files they came from, for people),
//! and `nodectl check --from` runs every check on them elsewhere.

mod capped;
mod kept_config;

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use nix::sys::stat::SFlag;
use serde::{Deserialize, Serialize};

use crate::model::recording::RING_FILE_BYTES_MAX;
use crate::model::{RecorderFile, Snapshot};
use crate::paths::config::CONFIG_SIZE_LIMIT;
use crate::read::beside::{split, CheckedDir};
use crate::read::bounded::{open_regular, read_regular, Links, RECORD_CAP};
use crate::read::deadline::each_until;
use crate::sources::cri_store::STATUS_SIZE_LIMIT;
use crate::sources::mountinfo::MOUNTINFO_LIMIT;
use capped::CappedReader;

pub use kept_config::{keep_config, KeptConfig};

const SNAPSHOTS: &str = "snapshots.json";
/// Archives are small (status files, annotations): a synthetic node of
/// 10,000 containers, 16,000 processes and 10,000 mounts writes 30 MB
/// (docs/security.md); refuse what no node writes before parsing it.
const SNAPSHOTS_LIMIT: u64 = 256 << 20;
/// JSON values (strings, numbers, arrays, objects...) in `snapshots.json`.
/// Each costs at least a few dozen bytes once parsed (a `String`, a struct
/// field), far more than its 2 bytes of text (`"",`), so counting them is
/// what bounds memory; that synthetic node makes 1.4 million.
const VALUES_LIMIT: u64 = 5_000_000;

/// What an archive holds for `check --from`: the looks at the node (the
/// findings' own evidence is derived from them again, never stored).
#[derive(Debug, Serialize, Deserialize)]
pub struct Archived {
    pub nodectl_version: String,
    pub hostname: Option<String>,
    /// The snapshot with API answers, and the later look that confirms its
    /// suspects (absent when it had none).
    pub first: Snapshot,
    #[serde(default)]
    pub second: Option<Snapshot>,
    /// What the raw copies under `files/` lack, and why (never a value):
    /// no check reads them, so this is said here rather than as gaps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copies_left_out: Vec<String>,
}

/// What an archive holds besides the snapshots, read from the node: raw
/// copies of the files the snapshots came from, for people.
#[derive(Debug, Default)]
pub struct Copies {
    /// The node's hostname (`/proc/sys/kernel/hostname`).
    pub hostname: Option<String>,
    /// Each copy's name in the archive and its bytes.
    files: Vec<(String, Vec<u8>)>,
    /// What was not copied, and why.
    pub left_out: Vec<String>,
}

/// How long the copies may take, after the look at the node: each is a
/// file that look has just read whole (see [`read_copies`]).
const COPIES_DEADLINE: Duration = Duration::from_secs(1);

/// Reads the node's hostname (below `proc_root`) and the copies an archive
/// of `snapshot` holds: the containerd config (only the keys nodectl keeps,
/// see [`keep_config`]), the mount table at `mountinfo` and CRI's status
/// files. Each goes through the bounded reader (regular files only, each
/// under the cap its source has), all within [`COPIES_DEADLINE`]: what is
/// not read by then is left out, named with the file the read is stuck in.
/// A file the look has a gap for (or a directory it is in, for a source
/// that gave up) is not read again: its gap already says why, and a read
/// that blocked once would block again. `watch`'s flight recorder file at
/// `recorder_file` is archived as it is parsed back (see [`Part::Recorder`]);
/// none there is said, as no `watch` having recorded anything.
pub fn read_copies(
    snapshot: &Snapshot,
    proc_root: &Path,
    mountinfo: &Path,
    recorder_file: &Path,
) -> Copies {
    let started = Instant::now();
    let mut wanted = vec![Copy {
        part: Part::Hostname,
        path: proc_root.join("sys/kernel/hostname"),
        limit: RECORD_CAP as u64,
        links: Links::Follow,
    }];
    if let Some(config) = &snapshot.paths.config {
        wanted.push(Copy {
            part: Part::Config,
            path: config.clone(),
            limit: CONFIG_SIZE_LIMIT,
            links: Links::Follow,
        });
    }
    wanted.push(Copy {
        part: Part::File("files/mountinfo".to_string()),
        path: mountinfo.to_path_buf(),
        limit: MOUNTINFO_LIMIT,
        links: Links::Follow,
    });
    // Before the status files: thousands of them may not all be read in time.
    wanted.push(Copy {
        part: Part::Recorder,
        path: recorder_file.to_path_buf(),
        limit: RING_FILE_BYTES_MAX as u64,
        links: Links::Refuse,
    });
    wanted.extend(snapshot.cri_containers.iter().map(|c| Copy {
        part: Part::File(format!("files/cri-status/{}", c.id)),
        path: c.status_path.clone(),
        limit: STATUS_SIZE_LIMIT,
        links: Links::Refuse,
    }));
    let gap_paths: HashSet<&Path> = snapshot.gaps.iter().map(|g| g.path.as_path()).collect();
    let given_up: Vec<&Path> = snapshot
        .gaps
        .iter()
        .filter(|g| g.source_unavailable)
        .map(|g| g.path.as_path())
        .collect();
    let blocked_before =
        |path: &Path| gap_paths.contains(path) || given_up.iter().any(|dir| path.starts_with(dir));
    wanted.retain(|copy| !blocked_before(&copy.path));

    let read = each_until(&wanted, started + COPIES_DEADLINE, |copy| {
        read_regular(&copy.path, copy.limit, copy.links).map(|file| file.bytes)
    });
    let mut copies = Copies::default();
    let not_read = wanted.get(read.len()..).unwrap_or_default();
    for (copy, bytes) in wanted.iter().zip(read) {
        let bytes = match bytes {
            Ok(bytes) => bytes,
            // A fake `--proc-root` may have none: the archive says so by
            // its `null`, as it always has.
            Err(_) if matches!(copy.part, Part::Hostname) => continue,
            Err(err)
                if matches!(copy.part, Part::Recorder) && err.kind() == io::ErrorKind::NotFound =>
            {
                copies.left_out.push(format!(
                    "{}: no flight recorder file: no `nodectl watch` has recorded a stuck exit \
                     here (normal when none runs)",
                    copy.path.display()
                ));
                continue;
            }
            Err(err) => {
                copies
                    .left_out
                    .push(format!("{}: not archived: {err}", copy.path.display()));
                continue;
            }
        };
        match &copy.part {
            Part::Hostname => {
                copies.hostname = String::from_utf8(bytes).ok().map(|h| h.trim().to_string())
            }
            Part::Config => copies.add_config(&copy.path, &bytes),
            Part::Recorder => copies.add_recorder(&copy.path, &bytes),
            Part::File(name) => copies.files.push((name.clone(), bytes)),
        }
    }
    if let Some(stuck) = not_read.first() {
        copies.left_out.push(format!(
            "{}: not archived, nor the {} files after it: blocked: no answer after {} \
             (a read stuck in the kernel cannot be interrupted: a stalled disk, FUSE or NFS)",
            stuck.path.display(),
            not_read.len() - 1,
            humantime::format_duration(Duration::from_millis(started.elapsed().as_millis() as u64)),
        ));
    }
    copies
}

/// Where the config's copy goes in the archive.
const CONFIG_COPY: &str = "files/containerd-config.toml";

/// A file [`read_copies`] reads: what it goes into, where it is read, and
/// how (see [`read_regular`]).
#[derive(Debug, Clone)]
struct Copy {
    part: Part,
    path: PathBuf,
    limit: u64,
    links: Links,
}

#[derive(Debug, Clone)]
enum Part {
    Hostname,
    /// The config, rebuilt (see [`keep_config`]) as [`CONFIG_COPY`].
    Config,
    /// A copy as it is, under this name in the archive.
    File(String),
    /// `watch`'s flight recorder file, parsed and written again (see
    /// [`Copies::add_recorder`]) as [`RECORDER_COPY`].
    Recorder,
}

/// Where the flight recorder's ring goes in the archive.
pub const RECORDER_COPY: &str = "flight-recorder.json";

impl Copies {
    /// The flight recorder's file as nodectl writes it: parsed and written
    /// again with only the fields nodectl writes, every string and list
    /// within its bound (ids, pids, numbers, times, kernel names: no
    /// secret), or a note that it is left out.
    fn add_recorder(&mut self, path: &Path, bytes: &[u8]) {
        let parsed = serde_json::from_slice::<RecorderFile>(bytes)
            .map(RecorderFile::bounded)
            .and_then(|file| serde_json::to_vec_pretty(&file));
        match parsed {
            Ok(json) => self.files.push((RECORDER_COPY.to_string(), json)),
            Err(e) => self.left_out.push(format!(
                "{}: not archived: not a flight recorder file nodectl writes ({e})",
                path.display()
            )),
        }
    }

    /// The config at `path` as [`keep_config`] rebuilds it, or a note that
    /// it is left out.
    fn add_config(&mut self, path: &Path, bytes: &[u8]) {
        match keep_config(bytes) {
            Ok(kept) => {
                if kept.dropped > 0 {
                    self.left_out.push(format!(
                        "{}: archived with the {} keys nodectl keeps; {} other keys dropped, \
                         their values not archived",
                        path.display(),
                        kept.kept,
                        kept.dropped
                    ));
                }
                self.files.push((CONFIG_COPY.to_string(), kept.toml));
            }
            Err(e) => self.left_out.push(format!(
                "{}: not archived, it could not be parsed to keep only the keys nodectl \
                 keeps: {e}",
                path.display()
            )),
        }
    }
}

/// Writes `evidence` and `copies` to a gzipped tar at `path`. Returns what
/// it left out.
///
/// The archive is private (0600: the config and mount table describe the
/// node) and never written through a symlink or over a file it collects
/// (`mountinfo` and those of the snapshot): it is written under a fresh
/// name in the same directory (`O_CREAT|O_EXCL|O_NOFOLLOW`) and then linked
/// (or, with `force`, renamed) into place; a rename replaces a symlink at
/// `path` itself, never its target.
pub fn write(
    path: &Path,
    evidence: &Archived,
    copies: &Copies,
    mountinfo: &Path,
    force: bool,
) -> anyhow::Result<()> {
    place(path, evidence, copies, mountinfo, force).with_context(|| path.display().to_string())
}

/// `collect`'s archive is placed in its directory opened once and checked
/// ([`CheckedDir::safe`]: no symlink on the way, no directory another user
/// owns or could swap files in), relative to that descriptor: what is
/// renamed or swapped over the path meanwhile changes nothing of where the
/// archive goes, and a directory of another user's choosing is refused.
fn place(
    path: &Path,
    evidence: &Archived,
    copies: &Copies,
    mountinfo: &Path,
    force: bool,
) -> anyhow::Result<()> {
    let (dir, name) = split(path)?;
    let dir = CheckedDir::safe(dir)?;
    place_in(&dir, name, evidence, copies, mountinfo, force)
}

/// [`place`] in `dir`, opened and checked, as `name`.
fn place_in(
    dir: &CheckedDir,
    name: &std::ffi::OsStr,
    evidence: &Archived,
    copies: &Copies,
    mountinfo: &Path,
    force: bool,
) -> anyhow::Result<()> {
    let exists = || anyhow!("already exists (pass --force to replace it)");
    let config = evidence.first.paths.config.as_deref();
    let statuses: Vec<&Path> = evidence
        .first
        .cri_containers
        .iter()
        .map(|c| c.status_path.as_path())
        .collect();
    if let Ok(existing) = dir.stat(name) {
        if !force {
            return Err(exists());
        }
        if SFlag::from_bits_truncate(existing.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR {
            bail!("is a directory");
        }
        let inputs = config.into_iter().chain([mountinfo]).chain(statuses);
        if inputs
            .into_iter()
            .any(|input| same_file((existing.st_dev, existing.st_ino), input))
        {
            bail!("is one of the files collected; not replaced");
        }
    }

    let (tmp, file) = dir.create_beside(name, 0o600)?;
    let written = fill(file, evidence, copies);
    let placed = written.and_then(|()| {
        if force {
            dir.rename(&tmp, name)?;
        } else {
            // link(2) fails on any existing name, a symlink included, so a
            // file that appeared meanwhile is not replaced either.
            dir.link(&tmp, name)?;
            dir.remove(&tmp)?;
        }
        Ok(())
    });
    if placed.is_err() {
        let _ = dir.remove(&tmp);
    }
    placed.map_err(
        |e| match e.downcast_ref::<io::Error>().map(io::Error::kind) {
            // Another run (a second `collect` to the same path) placed its
            // archive after our look above: theirs stays.
            Some(io::ErrorKind::AlreadyExists) if !force => exists(),
            _ => e,
        },
    )
}

fn same_file((dev, ino): (u64, u64), input: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    [fs::metadata(input), fs::symlink_metadata(input)]
        .into_iter()
        .flatten()
        .any(|m| m.dev() == dev && m.ino() == ino)
}

fn fill(file: File, evidence: &Archived, copies: &Copies) -> anyhow::Result<()> {
    let mut tar = tar::Builder::new(GzEncoder::new(file, Compression::default()));
    append(&mut tar, SNAPSHOTS, &serde_json::to_vec_pretty(evidence)?)?;
    for (name, bytes) in &copies.files {
        append(&mut tar, name, bytes)?;
    }
    tar.into_inner()
        .and_then(GzEncoder::finish)
        .context("finishing the archive")?;
    Ok(())
}

fn append<W: io::Write>(tar: &mut tar::Builder<W>, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(bytes.len() as u64);
    header.set_mode(0o600);
    header.set_mtime(0);
    tar.append_data(&mut header, name, bytes)
        .with_context(|| format!("writing {name} into the archive"))
}

/// Reads the snapshots back from an archive written by [`write`].
///
/// The archive is opened by the bounded reader (a FIFO, a device or a
/// directory is an error at once) and read on a thread of its own, given up
/// once it has read nothing for `stall`: a stalled disk, FUSE or NFS under
/// it must not hang nodectl, and a large archive still takes what it takes.
pub fn read(path: &Path, stall: Duration) -> anyhow::Result<Archived> {
    let progress = Arc::new(AtomicU64::new(0));
    let (send, answer) = mpsc::sync_channel(1);
    let (owned, counter) = (path.to_path_buf(), Arc::clone(&progress));
    // Detached, as sources are: a read stuck in the kernel is left behind.
    std::thread::Builder::new()
        .name("nodectl-from".into())
        .spawn(move || {
            let _ = send.send(read_snapshots(&owned, counter));
        })
        .with_context(|| path.display().to_string())?;
    // Looked at ten times a window, so that a stall is told within a
    // tenth of `stall` of its end, wherever it starts.
    let (mut seen, mut last_read) = (0, Instant::now());
    loop {
        match answer.recv_timeout(stall / 10) {
            Ok(read) => return read.with_context(|| path.display().to_string()),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let now = progress.load(Ordering::Relaxed);
                if now != seen {
                    (seen, last_read) = (now, Instant::now());
                } else if last_read.elapsed() >= stall {
                    bail!(
                        "{}: blocked: nothing read for {} (after {seen} bytes); not checked \
                         (a read stuck in the kernel cannot be interrupted: a stalled disk, \
                         FUSE or NFS)",
                        path.display(),
                        humantime::format_duration(stall)
                    );
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => bail!(
                "{}: failed: its reading thread ended without an answer",
                path.display()
            ),
        }
    }
}

fn read_snapshots(path: &Path, progress: Arc<AtomicU64>) -> anyhow::Result<Archived> {
    let file = Counted {
        inner: open_regular(path, Links::Follow)?,
        count: progress,
    };
    // `write` puts snapshots.json first: an archive that inflates past it
    // before reaching it is not one, and inflating a bomb in front of it
    // would hold nodectl for seconds per GiB.
    let cap = SNAPSHOTS_LIMIT + INFLATE_HEADROOM;
    let inflated = Arc::new(AtomicU64::new(0));
    let mut archive = tar::Archive::new(Counted {
        inner: GzDecoder::new(file).take(cap),
        count: Arc::clone(&inflated),
    });
    let not_found = || {
        anyhow!(
            "no {SNAPSHOTS} within its first {} MiB: not a nodectl evidence archive",
            cap >> 20
        )
    };
    // Past the cap the stream ends, which tar reports as a cut archive.
    let fail_read = |e: io::Error| {
        if inflated.load(Ordering::Relaxed) >= cap {
            not_found()
        } else {
            e.into()
        }
    };
    for entry in archive.entries().map_err(fail_read)? {
        let entry = entry.map_err(fail_read)?;
        if entry.path()?.as_os_str() != SNAPSHOTS {
            continue;
        }
        let entry_type = entry.header().entry_type();
        if !entry_type.is_file() {
            // A link or a device has no content of its own, and nothing in
            // an archive is ever followed to the disk: refuse it by name.
            bail!(
                "{SNAPSHOTS} is a {} entry, not a file: not a nodectl evidence archive",
                format!("{entry_type:?}").to_lowercase()
            );
        }
        let too_large = || {
            anyhow!(
                "{SNAPSHOTS} is larger than {} MiB or holds more than {VALUES_LIMIT} values: not a nodectl evidence archive",
                SNAPSHOTS_LIMIT >> 20
            )
        };
        if entry.header().size()? > SNAPSHOTS_LIMIT {
            return Err(too_large());
        }
        // Parsed as it inflates: a small gzip can inflate to gigabytes, and
        // the header's size is only what the archive claims.
        let mut capped = CappedReader::new(io::BufReader::new(entry));
        let parsed = serde_json::from_reader(&mut capped);
        if capped.exceeded {
            return Err(too_large());
        }
        return parsed.context(SNAPSHOTS);
    }
    Err(if inflated.load(Ordering::Relaxed) >= cap {
        not_found()
    } else {
        anyhow!("no {SNAPSHOTS} inside: not a nodectl evidence archive")
    })
}

/// A reader that counts the bytes it hands out, where another thread can
/// see them.
struct Counted<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// What an archive may inflate to in front of and around `snapshots.json`
/// (tar headers and padding) beyond [`SNAPSHOTS_LIMIT`].
const INFLATE_HEADROOM: u64 = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;

    /// Long enough for any archive of these tests.
    const STALL: Duration = Duration::from_secs(10);

    /// `evidence` archived in `dir`, with no copies: the archive's path.
    fn written(dir: &Path, evidence: &Archived) -> PathBuf {
        let path = dir.join("evidence.tar.gz");
        let copies = Copies::default();
        write(&path, evidence, &copies, Path::new("/nonexistent"), false).unwrap();
        path
    }

    #[test]
    fn the_archive_goes_only_into_a_directory_no_one_else_could_swap_it_in() {
        use std::os::unix::fs::{symlink, PermissionsExt};
        let top = tempfile::tempdir().unwrap();
        let evidence = Archived {
            nodectl_version: "test".into(),
            hostname: None,
            first: snapshot(),
            second: None,
            copies_left_out: Vec::new(),
        };
        let collect = |dir: &Path| {
            let path = dir.join("evidence.tar.gz");
            write(
                &path,
                &evidence,
                &Copies::default(),
                Path::new("/nonexistent"),
                false,
            )
            .map_err(|e| format!("{e:#}"))
        };
        // A directory that is a symlink (to one the user chose): not
        // followed, nothing written where it points.
        let elsewhere = top.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        symlink(&elsewhere, top.path().join("out")).unwrap();
        let err = collect(&top.path().join("out")).unwrap_err();
        assert!(err.contains("a symlink is not followed"), "{err}");
        assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
        // Writable by others without the sticky bit: they could swap the
        // archive for a link between its writing and its placing.
        let shared = top.path().join("shared");
        fs::create_dir(&shared).unwrap();
        fs::set_permissions(&shared, fs::Permissions::from_mode(0o777)).unwrap();
        let err = collect(&shared).unwrap_err();
        assert!(err.contains("without the sticky bit"), "{err}");
        assert_eq!(fs::read_dir(&shared).unwrap().count(), 0);
        // With it (as /tmp), it is written.
        fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).unwrap();
        collect(&shared).unwrap();
        // Another user's directory: refused (only root can give one away
        // to test).
        if nix::unistd::geteuid().is_root() {
            let theirs = top.path().join("theirs");
            fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let err = collect(&theirs).unwrap_err();
            assert!(err.contains("owned by uid 65534"), "{err}");
            assert_eq!(fs::read_dir(&theirs).unwrap().count(), 0);
        }
    }

    #[test]
    fn the_archive_goes_into_the_directory_opened_whatever_is_swapped_in_after() {
        use std::os::unix::fs::symlink;
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("out");
        fs::create_dir(&dir).unwrap();
        let opened = CheckedDir::safe(&dir).unwrap();
        // The path now names another directory (a rename, or
        // renameat2(RENAME_EXCHANGE) in a loop).
        let moved = top.path().join("moved");
        fs::rename(&dir, &moved).unwrap();
        let decoy = top.path().join("decoy");
        fs::create_dir(&decoy).unwrap();
        symlink(&decoy, &dir).unwrap();
        let evidence = Archived {
            nodectl_version: "test".into(),
            hostname: None,
            first: snapshot(),
            second: None,
            copies_left_out: Vec::new(),
        };
        let name = std::ffi::OsStr::new("evidence.tar.gz");
        place_in(
            &opened,
            name,
            &evidence,
            &Copies::default(),
            Path::new("/nonexistent"),
            false,
        )
        .unwrap();
        assert!(moved.join("evidence.tar.gz").is_file());
        assert_eq!(fs::read_dir(&decoy).unwrap().count(), 0);
    }

    #[test]
    fn an_archive_round_trips_the_snapshots() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = snapshot();
        first
            .cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        first.shims.push(shim(7, &id('s'), ADDRESS, &["umount2"]));
        let evidence = Archived {
            nodectl_version: "test".into(),
            hostname: None,
            second: Some(first.clone()),
            first,
            copies_left_out: Vec::new(),
        };
        let path = written(dir.path(), &evidence);
        let back = read(&path, STALL).unwrap();
        assert_eq!(back.first.cri_containers, evidence.first.cri_containers);
        assert_eq!(
            back.second.unwrap().shims,
            evidence.second.as_ref().unwrap().shims
        );
        assert_eq!(back.first.taken_at, NOW);
    }

    #[test]
    fn a_node_string_in_an_archive_is_cut_as_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = snapshot();
        // A 2 MB network name in 200 reservations: 9 KB gzipped.
        let name = "n".repeat(2 << 20);
        let reservation = crate::model::IpReservation {
            ip: "10.0.0.2".into(),
            container_id: id('a'),
            ..Default::default()
        };
        first.cni = Some(crate::model::CniView {
            networks: vec![crate::model::CniNetwork {
                name: name.clone(),
                store: PathBuf::from("/var/lib/cni/networks").join(&name),
                reservations: vec![reservation; 200],
                ..Default::default()
            }],
            cri_networks: vec![name],
            ..Default::default()
        });
        let evidence = Archived {
            nodectl_version: "test".into(),
            hostname: None,
            second: None,
            first,
            copies_left_out: Vec::new(),
        };
        let path = written(dir.path(), &evidence);
        assert!(fs::metadata(&path).unwrap().len() < 64 << 10);
        let back = read(&path, STALL).unwrap();
        let cni = back.first.cni.unwrap();
        let network = &cni.networks[0];
        assert_eq!(network.reservations.len(), 200);
        assert_eq!(network.name.len(), capped::ARCHIVE_STRING_CAP);
        assert!(network.store.as_os_str().len() <= capped::ARCHIVE_STRING_CAP);
        assert_eq!(
            cni.cri_networks,
            std::slice::from_ref(&network.name),
            "cut alike"
        );
    }

    #[test]
    fn copies_are_read_bounded_and_what_the_look_could_not_read_is_not_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);
        let fifo = |path: &Path| {
            nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap()
        };
        fs::create_dir_all(at("proc/sys/kernel")).unwrap();
        fs::write(at("proc/sys/kernel/hostname"), "node-17\n").unwrap();
        fs::write(at("config.toml"), "root = \"/r\"\nsecret = \"s-1\"\n").unwrap();
        fs::write(at("status-a"), "{}").unwrap();
        fifo(&at("status-b"));
        fifo(&at("mountinfo"));
        let mut snapshot = snapshot();
        snapshot.paths.config = Some(at("config.toml"));
        for (letter, status) in [('a', "status-a"), ('b', "status-b")] {
            let mut container = running(&id(letter), 100, NOW);
            container.status_path = at(status);
            snapshot.cri_containers.push(container);
        }
        // The look found the mount table unreadable: its gap says why.
        snapshot.gaps.push(crate::model::Gap::source(
            crate::model::Source::Mountinfo,
            at("mountinfo"),
            "a FIFO, where a regular file belongs: not read",
        ));

        // On a thread of its own: a FIFO read as a plain file would block
        // for ever, and fail this test rather than hang it.
        let (send, answer) = std::sync::mpsc::channel();
        let (proc_root, mountinfo) = (at("proc"), at("mountinfo"));
        std::thread::spawn(move || {
            send.send(read_copies(
                &snapshot,
                &proc_root,
                &mountinfo,
                Path::new("/nonexistent"),
            ))
        });
        let copies = answer
            .recv_timeout(Duration::from_secs(10))
            .expect("the copies are read without blocking");
        assert_eq!(copies.hostname.as_deref(), Some("node-17"));
        let names: Vec<&str> = copies.files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                CONFIG_COPY.to_string(),
                format!("files/cri-status/{}", id('a'))
            ]
        );
        assert!(!String::from_utf8_lossy(&copies.files[0].1).contains("s-1"));
        assert_eq!(copies.left_out.len(), 3, "{:#?}", copies.left_out);
        // No watch ran: said, before the status files' notes.
        assert!(
            copies.left_out[1].starts_with("/nonexistent: no flight recorder file"),
            "{}",
            copies.left_out[1]
        );
        assert!(
            copies.left_out[0].contains("1 other keys dropped"),
            "{}",
            copies.left_out[0]
        );
        let fifo_note = format!(
            "{}: not archived: a FIFO, where a regular file belongs",
            at("status-b").display()
        );
        assert!(
            copies.left_out[2].starts_with(&fifo_note),
            "{}",
            copies.left_out[2]
        );
    }

    #[test]
    fn the_flight_recorder_is_archived_as_nodectl_writes_it_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);
        let copies_of =
            |recorder: &Path| read_copies(&snapshot(), &at("proc"), &at("mi"), recorder);
        let recording = serde_json::json!({
            "container_id": format!("{}\u{1b}[2J", id('a')),
            "samples": 3, "shim_pid": 4123, "wchans_seen": ["a", "b", "c", "d", "e", "f"],
            "password": "SECRET-1",
        });
        let file = serde_json::json!({"nodectl_version": "0.1.0", "recordings": [recording],
                                      "token": "SECRET-2"});
        fs::write(at("recorder.json"), file.to_string()).unwrap();
        let copies = copies_of(&at("recorder.json"));
        let (_, json) = copies
            .files
            .iter()
            .find(|(name, _)| name == RECORDER_COPY)
            .expect("archived");
        let text = String::from_utf8(json.clone()).unwrap();
        assert!(!text.contains("SECRET"), "{text}");
        let back: RecorderFile = serde_json::from_str(&text).unwrap();
        assert_eq!(back.recordings[0].container_id, id('a'));
        assert_eq!(back.recordings[0].shim_pid, Some(4123));
        assert_eq!(back.recordings[0].wchans_seen, ["a", "b", "c", "d"]);

        // A symlink, a file larger than any ring, or another kind of file:
        // not archived, and said.
        std::os::unix::fs::symlink(at("recorder.json"), at("link.json")).unwrap();
        fs::write(at("huge.json"), vec![b' '; RING_FILE_BYTES_MAX + 1]).unwrap();
        fs::write(at("other.json"), "[1, 2]").unwrap();
        for (name, why) in [
            ("link.json", "a symlink"),
            ("huge.json", "larger than the 394496 bytes"),
            ("other.json", "not a flight recorder file"),
        ] {
            let copies = copies_of(&at(name));
            assert!(
                copies.files.iter().all(|(n, _)| n != RECORDER_COPY),
                "{name}"
            );
            let note = copies.left_out.last().unwrap();
            assert!(note.contains(&format!("{name}: not archived: ")), "{note}");
            assert!(note.contains(why), "{note}");
        }
    }

    #[test]
    fn archives_from_before_removing_and_unknown_were_dropped_still_read() {
        // Those archives carry `"Removing": false, "Unknown": false` in every
        // CRI status; a strict reader would refuse them.
        let mut first = snapshot();
        first
            .cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        let mut old = serde_json::to_value(Archived {
            nodectl_version: "0.1.0".into(),
            hostname: None,
            first: first.clone(),
            second: None,
            copies_left_out: Vec::new(),
        })
        .unwrap();
        let status = &mut old["first"]["cri_containers"][0]["status"];
        status["Removing"] = false.into();
        status["Unknown"] = false.into();
        let back: Archived = serde_json::from_value(old).unwrap();
        assert_eq!(back.first.cri_containers, first.cri_containers);
    }

    #[test]
    fn a_file_that_is_not_an_archive_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.tar.gz");
        fs::write(&path, b"not gzip").unwrap();
        let err = format!("{:#}", read(&path, STALL).unwrap_err());
        assert!(err.starts_with(&format!("{}: ", path.display())), "{err}");
        // What gzip said, after the path.
        assert!(err.len() > path.display().to_string().len() + 2, "{err}");
    }

    #[test]
    fn an_archive_that_cannot_be_written_says_which_and_why() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = snapshot();
        first.cri_containers.push(running(&id('a'), 100, NOW));
        let evidence = Archived {
            nodectl_version: "test".to_string(),
            hostname: None,
            first,
            second: None,
            copies_left_out: Vec::new(),
        };
        let mountinfo = dir.path().join("mountinfo");
        fs::write(&mountinfo, "").unwrap();
        // /dev/full: every write fails with ENOSPC, as on a full disk.
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
        let Ok(full) = full else { return };
        let err = fill(full, &evidence, &Copies::default()).unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.starts_with("writing snapshots.json into the archive: ")
                || text.starts_with("finishing the archive: "),
            "{text}"
        );
        assert!(text.contains("No space left on device"), "{text}");

        let path = dir.path().join("a-directory");
        fs::create_dir(&path).unwrap();
        let err = format!(
            "{:#}",
            write(&path, &evidence, &Copies::default(), &mountinfo, true).unwrap_err()
        );
        assert_eq!(err, format!("{}: is a directory", path.display()));
        let err = format!(
            "{:#}",
            write(&path, &evidence, &Copies::default(), &mountinfo, false).unwrap_err()
        );
        assert_eq!(
            err,
            format!(
                "{}: already exists (pass --force to replace it)",
                path.display()
            )
        );
    }
}
