//! Offline evidence bundles: `nodectl collect` writes the two snapshots a
//! `check` needs (plus raw copies of the files they came from, for people),
//! and `nodectl check --from` runs every check on them elsewhere.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::Path;

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use serde::{Deserialize, Serialize};

use crate::snapshot::Snapshot;

const SNAPSHOTS: &str = "snapshots.json";
/// Bundles are small (status files, annotations); refuse absurd ones.
const SNAPSHOTS_LIMIT: u64 = 512 << 20;

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

/// Writes `evidence` to a gzipped tar at `path`, with the containerd config,
/// the CRI status files and the mount table alongside as they were on disk.
pub fn write(path: &Path, evidence: &Evidence, mountinfo: &Path) -> io::Result<()> {
    let file = File::create(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let mut tar = tar::Builder::new(GzEncoder::new(file, Compression::default()));
    append(&mut tar, SNAPSHOTS, &serde_json::to_vec_pretty(evidence)?)?;
    let paths = &evidence.first.paths;
    if let Some(config) = &paths.config {
        if let Ok(bytes) = fs::read(config) {
            append(&mut tar, "files/containerd-config.toml", &bytes)?;
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
    tar.into_inner()?.finish()?;
    Ok(())
}

fn append<W: io::Write>(tar: &mut tar::Builder<W>, name: &str, bytes: &[u8]) -> io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(bytes.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    tar.append_data(&mut header, name, bytes)
}

/// Reads the snapshots back from a bundle written by [`write`].
pub fn read(path: &Path) -> Result<Evidence, String> {
    let fail = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let file = File::open(path).map_err(|e| fail(&e))?;
    let mut archive = tar::Archive::new(GzDecoder::new(file));
    for entry in archive.entries().map_err(|e| fail(&e))? {
        let entry = entry.map_err(|e| fail(&e))?;
        if entry.path().map_err(|e| fail(&e))?.as_os_str() != SNAPSHOTS {
            continue;
        }
        let mut bytes = Vec::new();
        entry
            .take(SNAPSHOTS_LIMIT)
            .read_to_end(&mut bytes)
            .map_err(|e| fail(&e))?;
        return serde_json::from_slice(&bytes).map_err(|e| fail(&format!("{SNAPSHOTS}: {e}")));
    }
    Err(fail(&format!(
        "no {SNAPSHOTS} inside: not a nodectl evidence bundle"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixtures::*;

    #[test]
    fn bundle_round_trips_the_snapshots() {
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
        write(&path, &evidence, Path::new("/nonexistent")).unwrap();
        let back = read(&path).unwrap();
        assert_eq!(back.first.cri_containers, evidence.first.cri_containers);
        assert_eq!(
            back.second.unwrap().shims,
            evidence.second.as_ref().unwrap().shims
        );
        assert_eq!(back.first.taken_at, NOW);
    }

    #[test]
    fn bundles_from_before_removing_and_unknown_were_dropped_still_read() {
        // Those bundles carry `"Removing": false, "Unknown": false` in every
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
    fn a_file_that_is_not_a_bundle_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.tar.gz");
        fs::write(&path, b"not gzip").unwrap();
        let err = read(&path).unwrap_err();
        assert!(err.contains("x.tar.gz"), "{err}");
    }
}
