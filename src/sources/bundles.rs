//! Task bundles: `<state>/io.containerd.runtime.v2.task/<namespace>/<id>/`.
//!
//! The CRI plugin puts the pod and container names into the OCI spec as
//! `io.kubernetes.cri.*` annotations; the bundle is the only place on disk
//! where the names of a container's task live next to its id, until the task
//! is deleted (the APIs keep them longer: see `Snapshot::names_in`).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::model::{Bundle, Gap, Source, RUNC_GROUP_ANNOTATION};
use crate::read::bounded::{open_dir, read_regular_at, Links};
use crate::read::deadline::reading;

pub(crate) const SOURCE: Source = Source::Bundles;
const CRI_ANNOTATION_PREFIX: &str = "io.kubernetes.cri.";
/// OCI specs are tens of KiB; a few MiB leaves room for huge env lists.
const SPEC_SIZE_LIMIT: u64 = 16 << 20;
/// `shim.pid`, `address`: a number or a socket path.
const SMALL_FILE_LIMIT: u64 = 4096;

#[derive(Deserialize)]
struct SpecAnnotations {
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

/// Reads every bundle of one namespace, with its `address` when `sockets`
/// asks. A namespace without a directory has no tasks, which is not a gap;
/// a state directory that is missing is.
pub fn read(bundles_dir: &Path, sockets: bool, gaps: &mut Vec<Gap>) -> BTreeMap<String, Bundle> {
    let mut bundles = BTreeMap::new();
    reading(bundles_dir);
    let entries = match fs::read_dir(bundles_dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            // The runtime creates the per-namespace directory with its first task.
            if let Some(runtime_dir) = bundles_dir.parent().filter(|p| !p.exists()) {
                gaps.push(Gap::source(
                    SOURCE,
                    runtime_dir,
                    format!("{err} (wrong --state, or containerd has never run with it)"),
                ));
            }
            return bundles;
        }
        Err(err) => {
            gaps.push(Gap::source(SOURCE, bundles_dir, err));
            return bundles;
        }
    };
    // Each bundle's files are opened relative to the open directory, not by
    // a path walked again from `/` for each.
    let dir = match open_dir(&nix::fcntl::AT_FDCWD, bundles_dir) {
        Ok(dir) => dir,
        Err(err) => {
            gaps.push(Gap::source(SOURCE, bundles_dir, err));
            return bundles;
        }
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = PathBuf::from(entry.file_name());
        // The type from the directory entry (no `stat`, which would follow
        // a symlink planted here to wherever it points).
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let id = entry.file_name().to_string_lossy().into_owned();
        // containerd deletes a bundle by renaming it to `.<id>` first and then
        // removing that: a hidden directory is a bundle on its way out.
        if id.starts_with('.') {
            continue;
        }
        let spec_path = path.join("config.json");
        let (annotations, spec_error) =
            match read_annotations(&dir, &name.join("config.json"), &spec_path) {
                Ok(annotations) => (annotations, None),
                // Deleted while we looked: the task is gone.
                Err(err) if err.kind() == io::ErrorKind::NotFound && !path.exists() => continue,
                Err(err) => {
                    let why = err.to_string();
                    gaps.push(Gap::item(SOURCE, &spec_path, err));
                    (BTreeMap::new(), Some(why))
                }
            };
        // Missing or odd (a 2.x bundle has no `address`): no gap, as before.
        let small = |file: &str| {
            let shown = path.join(file);
            read_regular_at(
                &dir,
                &name.join(file),
                &shown,
                SMALL_FILE_LIMIT,
                Links::Refuse,
            )
            .ok()
            .and_then(|file| String::from_utf8(file.bytes).ok())
        };
        let shim_pid = small("shim.pid").and_then(|text| text.trim().parse().ok());
        let shim_socket = sockets
            .then(|| small("address"))
            .flatten()
            .map(|text| text.trim().to_string())
            .filter(|text| !text.is_empty());
        bundles.insert(
            id.clone(),
            Bundle {
                id,
                path,
                annotations,
                spec_error,
                shim_pid,
                shim_socket,
            },
        );
    }
    bundles
}

/// The CRI annotations of the spec at `name` in `dir` (`spec_path`).
fn read_annotations(
    dir: &File,
    name: &Path,
    spec_path: &Path,
) -> io::Result<BTreeMap<String, String>> {
    let bytes = read_regular_at(dir, name, spec_path, SPEC_SIZE_LIMIT, Links::Refuse)?.bytes;
    let spec: SpecAnnotations = serde_json::from_slice(&bytes).map_err(|err| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("corrupt OCI spec: {err}"),
        )
    })?;
    Ok(spec
        .annotations
        .into_iter()
        .filter(|(key, _)| key.starts_with(CRI_ANNOTATION_PREFIX) || key == RUNC_GROUP_ANNOTATION)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_cri_annotations() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = dir.path().join("c1");
        fs::create_dir(&bundle).unwrap();
        fs::write(
            bundle.join("config.json"),
            r#"{"ociVersion":"1.0.2","process":{"args":["sh"]},"annotations":{
                "io.kubernetes.cri.container-name":"init-proxy",
                "io.kubernetes.cri.sandbox-name":"web-0",
                "io.kubernetes.cri.sandbox-namespace":"shop",
                "io.kubernetes.cri.sandbox-id":"s1",
                "io.kubernetes.pod.uid":"not-kept"}}"#,
        )
        .unwrap();
        fs::write(bundle.join("shim.pid"), "4711").unwrap();

        let mut gaps = Vec::new();
        let bundles = read(dir.path(), true, &mut gaps);
        assert!(gaps.is_empty(), "{gaps:?}");
        let b = &bundles["c1"];
        assert_eq!(b.container_name(), Some("init-proxy"));
        assert_eq!(b.pod_name(), Some("web-0"));
        assert_eq!(b.pod_namespace(), Some("shop"));
        assert_eq!(b.sandbox_id(), Some("s1"));
        assert_eq!(b.shim_pid, Some(4711));
        assert_eq!(b.annotations.len(), 4);
    }

    #[test]
    fn runcs_group_is_kept_and_a_spec_not_read_is_told_from_one_without_annotations() {
        let dir = tempfile::tempdir().unwrap();
        let spec = |id: &str, text: &str| {
            fs::create_dir(dir.path().join(id)).unwrap();
            fs::write(dir.path().join(id).join("config.json"), text).unwrap();
        };
        spec(
            "grouped",
            r#"{"annotations":{"io.containerd.runc.v2.group":"g1",
                "io.kubernetes.cri.sandbox-id":"s1"}}"#,
        );
        spec("plain", r#"{"annotations":{"org.example":"x"}}"#);
        spec("corrupt", "{");
        fs::create_dir(dir.path().join("specless")).unwrap();
        let mut gaps = Vec::new();
        let bundles = read(dir.path(), false, &mut gaps);
        let group = |id: &str| bundles[id].shim_group();
        assert_eq!(group("grouped"), Ok("g1"));
        assert_eq!(group("plain"), Ok("plain"));
        assert!(group("corrupt").is_err_and(|why| why.contains("corrupt")));
        assert!(group("specless").is_err());
        assert_eq!(gaps.len(), 2, "{gaps:?}");
    }

    #[test]
    fn the_shims_socket_is_read_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = dir.path().join("c1");
        fs::create_dir(&bundle).unwrap();
        fs::write(bundle.join("config.json"), "{}").unwrap();
        fs::write(bundle.join("address"), "unix:///run/containerd/s/0e0e\n").unwrap();
        let socket = |sockets| {
            let mut gaps = Vec::new();
            let bundles = read(dir.path(), sockets, &mut gaps);
            assert!(gaps.is_empty(), "{gaps:?}");
            bundles["c1"].shim_socket.clone()
        };
        assert_eq!(
            socket(true).as_deref(),
            Some("unix:///run/containerd/s/0e0e")
        );
        assert_eq!(socket(false), None);
    }

    #[test]
    fn bundle_being_deleted_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join(".c3")).unwrap();
        let mut gaps = Vec::new();
        assert!(read(dir.path(), true, &mut gaps).is_empty());
        assert!(gaps.is_empty(), "{gaps:?}");
    }

    #[test]
    fn corrupt_spec_is_a_gap_and_the_bundle_is_still_listed() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = dir.path().join("c2");
        fs::create_dir(&bundle).unwrap();
        fs::write(bundle.join("config.json"), "{\"annotations\": {").unwrap();

        let mut gaps = Vec::new();
        let bundles = read(dir.path(), true, &mut gaps);
        assert!(bundles.contains_key("c2"));
        assert_eq!(gaps.len(), 1);
        assert_eq!(gaps[0].path, bundle.join("config.json"));
        assert!(
            gaps[0].error.contains("corrupt OCI spec"),
            "{}",
            gaps[0].error
        );
    }

    #[test]
    fn namespace_without_tasks_is_not_a_gap_but_missing_state_is() {
        let dir = tempfile::tempdir().unwrap();
        let mut gaps = Vec::new();
        assert!(read(&dir.path().join("k8s.io"), true, &mut gaps).is_empty());
        assert!(gaps.is_empty());

        read(&dir.path().join("missing/k8s.io"), true, &mut gaps);
        assert_eq!(gaps.len(), 1);
        assert!(gaps[0].source_unavailable);
        assert_eq!(gaps[0].path, dir.path().join("missing"));
    }
}
