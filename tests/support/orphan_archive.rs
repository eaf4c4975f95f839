//! A generated `check --from` archive of `n` orphan bundles, each with its
//! rootfs still mounted: containerd answered (no record of any of them), no
//! shim runs, procfs and the mount table were read. Every bundle is an
//! `orphan-bundle` with `has_mounts`, every rootfs a `leaked-mount`: the
//! joins of bundles and mounts at a scale where a search per finding shows
//! (tests/from_archive.rs asserts the findings, bench/run times it).

use std::io::Write;
use std::path::Path;

use nodectl::archive::Archived;
use nodectl::model::{
    Bundle, ContainerdView, Located, Mount, NamespaceView, Origin, Paths, Snapshot,
};

/// Where the generated node's containerd keeps its task bundles.
pub const ARCHIVE_BUNDLES: &str = "/run/containerd/io.containerd.runtime.v2.task/k8s.io";

/// The id of the `n`th bundle (64 hex digits, as containerd makes them).
pub fn orphan_id(n: usize) -> String {
    format!("{n:064x}")
}

/// Writes the archive of `count` orphan bundles to `path` (tar.gz, as
/// `nodectl collect` writes it: `snapshots.json` first).
pub fn write_orphan_archive(path: &Path, count: usize) {
    let mut first = Snapshot::empty(1, archive_paths(), "k8s.io".into());
    first.mounts_read = true;
    let mut namespaces = std::collections::BTreeMap::new();
    namespaces.insert(
        "k8s.io".to_string(),
        NamespaceView {
            containers: Some(Default::default()),
            ..NamespaceView::default()
        },
    );
    first.containerd = Some(ContainerdView {
        address: "/run/containerd/containerd.sock".into(),
        namespaces,
        ..ContainerdView::default()
    });
    for n in 0..count {
        let id = orphan_id(n);
        let dir = Path::new(ARCHIVE_BUNDLES).join(&id);
        first.mounts.push(Mount {
            mount_point: dir.join("rootfs"),
            fs_type: "overlay".into(),
            ..Mount::default()
        });
        first.bundles.insert(
            id.clone(),
            Bundle {
                id,
                path: dir,
                ..Bundle::default()
            },
        );
    }
    write_archive(path, first);
}

/// The generated node's containerd: its default places, nothing else known.
pub fn archive_paths() -> Paths {
    let at = |path: &str| Located {
        path: path.into(),
        origin: Origin::Default,
    };
    Paths::at(
        at("/var/lib/containerd"),
        at("/run/containerd"),
        at("/run/containerd/containerd.sock"),
    )
}

/// Writes `first`, a look with no second, to `path` as `nodectl collect`
/// writes an archive (tar.gz, `snapshots.json` first).
pub fn write_archive(path: &Path, first: Snapshot) {
    let evidence = Archived {
        nodectl_version: env!("CARGO_PKG_VERSION").into(),
        hostname: None,
        first,
        second: None,
        copies_left_out: Vec::new(),
    };
    let json = serde_json::to_vec(&evidence).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        file,
        flate2::Compression::fast(),
    ));
    let mut header = tar::Header::new_gnu();
    header.set_size(json.len() as u64);
    header.set_mode(0o600);
    tar.append_data(&mut header, "snapshots.json", &json[..])
        .unwrap();
    tar.into_inner().unwrap().finish().unwrap().flush().unwrap();
}
