//! Offline evidence archives: `nodectl collect` writes the two snapshots a
//! `check` needs (plus raw copies of the files they came from, for people),
//! and `nodectl check --from` runs every check on them elsewhere.

mod kept_config;

use std::cell::Cell;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::Path;
use std::rc::Rc;

use anyhow::{anyhow, bail, Context};
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use serde::{Deserialize, Serialize};

use crate::model::Snapshot;

pub use kept_config::{keep_config, KeptConfig};

const SNAPSHOTS: &str = "snapshots.json";
/// Archives are small (status files, annotations): a synthetic node of
/// 10,000 containers, 16,000 processes and 10,000 mounts writes 30 MB
/// (README, "Security"); refuse what no node writes before parsing it.
const SNAPSHOTS_LIMIT: u64 = 256 << 20;
/// JSON values (strings, numbers, arrays, objects...) in `snapshots.json`.
/// Each costs at least a few dozen bytes once parsed (a `String`, a struct
/// field), far more than its 2 bytes of text (`"",`), so counting them is
/// what bounds memory; that synthetic node makes 1.4 million.
const VALUES_LIMIT: u64 = 5_000_000;

#[derive(Debug, Serialize, Deserialize)]
pub struct Evidence {
    pub nodectl_version: String,
    pub hostname: Option<String>,
    /// The snapshot with API answers, and the later look that confirms its
    /// suspects (absent when it had none).
    pub first: Snapshot,
    #[serde(default)]
    pub second: Option<Snapshot>,
}

/// Writes `evidence` to a gzipped tar at `path`, with the containerd config
/// (only the keys nodectl keeps, see [`keep_config`]), the CRI status files and
/// the mount table alongside as they were on disk. Returns what it left out.
///
/// The archive is private (0600: the config and mount table describe the
/// node) and never written through a symlink or over a file it collects:
/// it is written under a fresh name in the same directory (`O_CREAT|O_EXCL|
/// O_NOFOLLOW`) and then linked (or, with `force`, renamed) into place; a
/// rename replaces a symlink at `path` itself, never its target.
pub fn write(
    path: &Path,
    evidence: &Evidence,
    mountinfo: &Path,
    force: bool,
) -> anyhow::Result<Vec<String>> {
    place(path, evidence, mountinfo, force).with_context(|| path.display().to_string())
}

fn place(
    path: &Path,
    evidence: &Evidence,
    mountinfo: &Path,
    force: bool,
) -> anyhow::Result<Vec<String>> {
    let exists = || anyhow!("already exists (pass --force to replace it)");
    let config = evidence.first.paths.config.as_deref();
    let statuses: Vec<&Path> = evidence
        .first
        .cri_containers
        .iter()
        .map(|c| c.status_path.as_path())
        .collect();
    if let Ok(existing) = fs::symlink_metadata(path) {
        if !force {
            return Err(exists());
        }
        if existing.is_dir() {
            bail!("is a directory");
        }
        let inputs = config.into_iter().chain([mountinfo]).chain(statuses);
        if inputs.into_iter().any(|input| same_file(&existing, input)) {
            bail!("is one of the files collected; not replaced");
        }
    }

    let (tmp, file) = create_beside(path, 0o600)?;
    let written = fill(file, evidence, config, mountinfo);
    let placed = written.and_then(|left_out| {
        if force {
            fs::rename(&tmp, path)?;
        } else {
            // link(2) fails on any existing name, a symlink included, so a
            // file that appeared meanwhile is not replaced either.
            fs::hard_link(&tmp, path)?;
            fs::remove_file(&tmp)?;
        }
        Ok(left_out)
    });
    if placed.is_err() {
        let _ = fs::remove_file(&tmp);
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

fn same_file(existing: &fs::Metadata, input: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    [fs::metadata(input), fs::symlink_metadata(input)]
        .into_iter()
        .flatten()
        .any(|m| m.dev() == existing.dev() && m.ino() == existing.ino())
}

/// A new file beside `path` with `mode`, that did not exist before and is no
/// link (O_EXCL, O_NOFOLLOW), to be renamed over `path` once whole. Its name
/// starts with a dot and ends in `.tmp`, so no reader of `path`'s kind (an
/// archive, node_exporter's `*.prom`) takes it for one.
pub fn create_beside(path: &Path, mode: u32) -> io::Result<(std::path::PathBuf, File)> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?
        .to_string_lossy();
    for attempt in 0.. {
        let tmp = dir.join(format!(".{name}.{}.{attempt}.tmp", std::process::id()));
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .open(&tmp)
        {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => continue,
            Err(e) => return Err(e),
        }
    }
    unreachable!()
}

fn fill(
    file: File,
    evidence: &Evidence,
    config: Option<&Path>,
    mountinfo: &Path,
) -> anyhow::Result<Vec<String>> {
    let mut left_out = Vec::new();
    let mut tar = tar::Builder::new(GzEncoder::new(file, Compression::default()));
    append(&mut tar, SNAPSHOTS, &serde_json::to_vec_pretty(evidence)?)?;
    if let Some(config) = config {
        if let Ok(bytes) = fs::read(config) {
            match keep_config(&bytes) {
                Ok(kept) => {
                    if kept.dropped > 0 {
                        left_out.push(format!(
                            "{}: archived with the {} keys nodectl keeps; {} other keys dropped, \
                             their values not archived",
                            config.display(),
                            kept.kept,
                            kept.dropped
                        ));
                    }
                    append(&mut tar, "files/containerd-config.toml", &kept.toml)?
                }
                Err(e) => left_out.push(format!(
                    "{}: not archived, it could not be parsed to keep only the keys nodectl \
                     keeps: {e}",
                    config.display()
                )),
            }
        }
    }
    if let Ok(bytes) = fs::read(mountinfo) {
        append(&mut tar, "files/mountinfo", &bytes)?;
    }
    for container in &evidence.first.cri_containers {
        if let Ok(bytes) = fs::read(&container.status_path) {
            append(
                &mut tar,
                &format!("files/cri-status/{}", container.id),
                &bytes,
            )?;
        }
    }
    tar.into_inner()
        .and_then(GzEncoder::finish)
        .context("finishing the archive")?;
    Ok(left_out)
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
pub fn read(path: &Path) -> anyhow::Result<Evidence> {
    read_snapshots(path).with_context(|| path.display().to_string())
}

fn read_snapshots(path: &Path) -> anyhow::Result<Evidence> {
    let file = File::open(path)?;
    // `write` puts snapshots.json first: an archive that inflates past it
    // before reaching it is not one, and inflating a bomb in front of it
    // would hold nodectl for seconds per GiB.
    let cap = SNAPSHOTS_LIMIT + INFLATE_HEADROOM;
    let inflated = Rc::new(Cell::new(0u64));
    let mut archive = tar::Archive::new(Counted {
        inner: GzDecoder::new(file).take(cap),
        count: Rc::clone(&inflated),
    });
    let not_found = || {
        anyhow!(
            "no {SNAPSHOTS} within its first {} MiB: not a nodectl evidence archive",
            cap >> 20
        )
    };
    // Past the cap the stream ends, which tar reports as a cut archive.
    let fail_read = |e: io::Error| {
        if inflated.get() >= cap {
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
        let mut bounded = Bounded::new(io::BufReader::new(entry));
        let parsed = serde_json::from_reader(&mut bounded);
        if bounded.exceeded {
            return Err(too_large());
        }
        return parsed.context(SNAPSHOTS);
    }
    Err(if inflated.get() >= cap {
        not_found()
    } else {
        anyhow!("no {SNAPSHOTS} inside: not a nodectl evidence archive")
    })
}

/// A reader that counts the bytes it hands out.
struct Counted<R> {
    inner: R,
    count: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }
}

/// What an archive may inflate to in front of and around `snapshots.json`
/// (tar headers and padding) beyond [`SNAPSHOTS_LIMIT`].
const INFLATE_HEADROOM: u64 = 1 << 20;

/// A reader that stops (with an error) past [`SNAPSHOTS_LIMIT`] bytes or
/// [`VALUES_LIMIT`] JSON values; it counts values by the separators and
/// openers outside strings, without parsing.
struct Bounded<R> {
    inner: R,
    bytes: u64,
    values: u64,
    in_string: bool,
    escaped: bool,
    exceeded: bool,
}

impl<R> Bounded<R> {
    fn new(inner: R) -> Self {
        Bounded {
            inner,
            bytes: 0,
            values: 0,
            in_string: false,
            escaped: false,
            exceeded: false,
        }
    }
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes += n as u64;
        for &b in &buf[..n] {
            if self.in_string {
                match b {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => {
                    self.in_string = true;
                    self.values += 1;
                }
                b',' | b'[' | b'{' => self.values += 1,
                _ => {}
            }
        }
        if self.bytes > SNAPSHOTS_LIMIT || self.values > VALUES_LIMIT {
            self.exceeded = true;
            return Err(io::Error::other("too large"));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;

    #[test]
    fn an_archive_round_trips_the_snapshots() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = snapshot();
        first
            .cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        first.shims.push(shim(7, &id('s'), ADDRESS, &["umount2"]));
        let evidence = Evidence {
            nodectl_version: "test".into(),
            hostname: None,
            second: Some(first.clone()),
            first,
        };
        let path = dir.path().join("evidence.tar.gz");
        write(&path, &evidence, Path::new("/nonexistent"), false).unwrap();
        let back = read(&path).unwrap();
        assert_eq!(back.first.cri_containers, evidence.first.cri_containers);
        assert_eq!(
            back.second.unwrap().shims,
            evidence.second.as_ref().unwrap().shims
        );
        assert_eq!(back.first.taken_at, NOW);
    }

    #[test]
    fn archives_from_before_removing_and_unknown_were_dropped_still_read() {
        // Those archives carry `"Removing": false, "Unknown": false` in every
        // CRI status; a strict reader would refuse them.
        let mut first = snapshot();
        first
            .cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        let mut old = serde_json::to_value(Evidence {
            nodectl_version: "0.1.0".into(),
            hostname: None,
            first: first.clone(),
            second: None,
        })
        .unwrap();
        let status = &mut old["first"]["cri_containers"][0]["status"];
        status["Removing"] = false.into();
        status["Unknown"] = false.into();
        let back: Evidence = serde_json::from_value(old).unwrap();
        assert_eq!(back.first.cri_containers, first.cri_containers);
    }

    #[test]
    fn a_file_that_is_not_an_archive_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.tar.gz");
        fs::write(&path, b"not gzip").unwrap();
        let err = format!("{:#}", read(&path).unwrap_err());
        assert!(err.starts_with(&format!("{}: ", path.display())), "{err}");
        // What gzip said, after the path.
        assert!(err.len() > path.display().to_string().len() + 2, "{err}");
    }

    #[test]
    fn an_archive_that_cannot_be_written_says_which_and_why() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = snapshot();
        first.cri_containers.push(running(&id('a'), 100, NOW));
        let evidence = Evidence {
            nodectl_version: "test".to_string(),
            hostname: None,
            first,
            second: None,
        };
        let mountinfo = dir.path().join("mountinfo");
        fs::write(&mountinfo, "").unwrap();
        // /dev/full: every write fails with ENOSPC, as on a full disk.
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
        let Ok(full) = full else { return };
        let err = fill(full, &evidence, None, &mountinfo).unwrap_err();
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
            write(&path, &evidence, &mountinfo, true).unwrap_err()
        );
        assert_eq!(err, format!("{}: is a directory", path.display()));
        let err = format!(
            "{:#}",
            write(&path, &evidence, &mountinfo, false).unwrap_err()
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
