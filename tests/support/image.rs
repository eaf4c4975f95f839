//! A one-layer OCI image built from the host's static busybox: no registry is
//! reachable from the test machines, and CRI needs an image for the pods and
//! for the sandbox ("pause") container alike.

use std::fs;
use std::io;
use std::path::Path;

use serde_json::json;
use sha2::{Digest, Sha256};

pub const IMAGE: &str = "docker.io/nodectl/busybox:test";
pub const BUSYBOX: &str = "/bin/busybox";

struct Blob {
    digest: String,
    size: usize,
    bytes: Vec<u8>,
}

fn blob(bytes: Vec<u8>) -> Blob {
    Blob {
        digest: format!("sha256:{:x}", Sha256::digest(&bytes)),
        size: bytes.len(),
        bytes,
    }
}

fn oci_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

fn append_file(
    tar: &mut tar::Builder<Vec<u8>>,
    path: &str,
    mode: u32,
    data: &[u8],
) -> io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(data.len() as u64);
    header.set_mode(mode);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mtime(0);
    tar.append_data(&mut header, path, data)
}

fn layer() -> io::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    for dir in ["bin/", "dev/", "etc/", "proc/", "sys/", "tmp/"] {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_mode(0o755);
        header.set_size(0);
        header.set_mtime(0);
        tar.append_data(&mut header, dir, io::empty())?;
    }
    append_file(&mut tar, "bin/busybox", 0o755, &fs::read(BUSYBOX)?)?;
    let mut link = tar::Header::new_gnu();
    link.set_entry_type(tar::EntryType::Symlink);
    link.set_mode(0o777);
    link.set_size(0);
    link.set_mtime(0);
    tar.append_link(&mut link, "bin/sh", "busybox")?;
    tar.into_inner()
}

/// Writes an OCI image layout archive to `path`, named [`IMAGE`].
///
/// How `ctr images import` (1.6) names what it imports, as measured here:
/// `io.containerd.image.name` is taken verbatim; without it, a full
/// reference in `org.opencontainers.image.ref.name` is too, but a bare tag
/// there becomes `import-<date>:<tag>`, which CRI would never find; with
/// neither annotation, nothing is named (and ctr still exits 0).
pub fn write_archive(path: &Path) -> io::Result<()> {
    let layer = blob(layer()?);
    let config = blob(serde_json::to_vec(&json!({
        "architecture": oci_arch(),
        "os": "linux",
        "config": {
            "Cmd": ["/bin/busybox", "sleep", "2147483647"],
            "Env": ["PATH=/bin"]
        },
        "rootfs": {"type": "layers", "diff_ids": [layer.digest]}
    }))?);
    let manifest = blob(serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config.digest, "size": config.size
        },
        "layers": [{
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": layer.digest, "size": layer.size
        }]
    }))?);
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest.digest, "size": manifest.size,
            "platform": {"architecture": oci_arch(), "os": "linux"},
            "annotations": {
                "io.containerd.image.name": IMAGE,
                // The tag, as the OCI layout spec means this annotation.
                "org.opencontainers.image.ref.name": "test"
            }
        }]
    }))?;

    let mut archive = tar::Builder::new(Vec::new());
    append_file(
        &mut archive,
        "oci-layout",
        0o644,
        br#"{"imageLayoutVersion":"1.0.0"}"#,
    )?;
    append_file(&mut archive, "index.json", 0o644, &index)?;
    for blob in [&layer, &config, &manifest] {
        let name = format!("blobs/sha256/{}", &blob.digest["sha256:".len()..]);
        append_file(&mut archive, &name, 0o644, &blob.bytes)?;
    }
    fs::write(path, archive.into_inner()?)
}
