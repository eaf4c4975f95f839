//! `leaked-mount`: a task rootfs, a sandbox shm or an image volume still
//! mounted for an id containerd no longer knows.
//!
//! The shim unmounts a task's rootfs in its delete, and CRI unmounts a pod's
//! shm when it stops the sandbox; a delete that timed out or a shim that died
//! mid-way leaves them behind, pinning the snapshot and its disk space.

use std::path::Path;

use serde_json::json;

use crate::checks::shared::{shim_serves, short, Records};
use crate::model::{Basis, Finding, Kind, Mount, Severity, Snapshot};

pub fn check(snapshot: &Snapshot) -> Vec<Finding> {
    let records = Records::indexed(snapshot);
    snapshot
        .mounts
        .iter()
        .filter_map(|mount| judge(snapshot, &records, mount))
        .collect()
}

/// What a mount below containerd's directories belongs to.
#[derive(Debug, PartialEq)]
enum Owner<'a> {
    /// `<state>/io.containerd.runtime.v2.task/<ns>/<id>/rootfs`
    TaskRootfs { namespace: &'a str, id: &'a str },
    /// `<state>/io.containerd.grpc.v1.cri/sandboxes/<id>/shm`
    SandboxShm { id: &'a str },
    /// `<state>/io.containerd.grpc.v1.cri/image-volumes/<sandbox id>/<image id>`:
    /// an image mounted as a pod volume (containerd 2.1+), unmounted by
    /// StopPodSandbox (`cleanupImageMounts`); one left means that never
    /// finished.
    ImageVolume { id: &'a str },
}

fn owner<'a>(snapshot: &Snapshot, mount_point: &'a Path) -> Option<Owner<'a>> {
    // Below the state directory, then below each of its parts (a prefix
    // stripped in two steps: no path is built for each of thousands of
    // mounts).
    let below_state = mount_point.strip_prefix(&snapshot.paths.state.path).ok()?;
    let name = |p: &'a Path| p.to_str();
    if let Ok(rest) = below_state.strip_prefix("io.containerd.runtime.v2.task") {
        let parts: Vec<&str> = rest.iter().filter_map(|p| name(Path::new(p))).collect();
        if let [namespace, id, "rootfs"] = parts.as_slice() {
            return Some(Owner::TaskRootfs { namespace, id });
        }
    }
    if let Ok(rest) = below_state.strip_prefix("io.containerd.grpc.v1.cri/sandboxes") {
        let parts: Vec<&str> = rest.iter().filter_map(|p| name(Path::new(p))).collect();
        if let [id, "shm"] = parts.as_slice() {
            return Some(Owner::SandboxShm { id });
        }
    }
    if let Ok(rest) = below_state.strip_prefix("io.containerd.grpc.v1.cri/image-volumes") {
        let parts: Vec<&str> = rest.iter().filter_map(|p| name(Path::new(p))).collect();
        if let [id, _image] = parts.as_slice() {
            return Some(Owner::ImageVolume { id });
        }
    }
    None
}

/// The containerd namespace and id a mount below containerd's state belongs
/// to, and what it is (`task rootfs`, `sandbox shm`, `image volume`).
pub fn mount_owner<'a>(
    snapshot: &'a Snapshot,
    mount_point: &'a Path,
) -> Option<(&'a str, &'a str, &'static str)> {
    Some(match owner(snapshot, mount_point)? {
        Owner::TaskRootfs { namespace, id } => (namespace, id, "task rootfs"),
        Owner::SandboxShm { id } => (snapshot.namespace.as_str(), id, "sandbox shm"),
        Owner::ImageVolume { id } => (snapshot.namespace.as_str(), id, "image volume"),
    })
}

/// The leaked-mount finding for `mount`, if it is one.
pub fn leaked_mount(snapshot: &Snapshot, mount: &Mount) -> Option<Finding> {
    judge(snapshot, &Records::of(snapshot), mount)
}

/// [`leaked_mount`], with the records asked through `records`.
fn judge(snapshot: &Snapshot, records: &Records, mount: &Mount) -> Option<Finding> {
    let (namespace, id, what) = mount_owner(snapshot, &mount.mount_point)?;
    let (owned, basis) = records.has(namespace, id);
    if owned {
        return None;
    }
    let inferred = basis == Basis::Disk;
    // Without the API, a shim still serving the id is as good as a record;
    // without procfs too, whether one does cannot be told.
    if inferred && (!snapshot.processes_read() || shim_serves(snapshot, id)) {
        return None;
    }
    let pod = snapshot.names_in(namespace, id);
    let evidence = json!({
        "mount_point": mount.mount_point.display().to_string(),
        "fstype": mount.fs_type,
        "source": mount.source,
        "options": mount.options.join(","),
        "owner": what,
        "owner_id": id,
        "namespace": namespace,
        "pod_namespace": pod.pod_namespace,
        "pod_name": pod.pod_name,
        "container_name": pod.container_name,
        "basis": basis,
        "inferred": inferred,
    });
    Some(Finding {
        kind: Kind::LeakedMount,
        severity: Severity::Warning,
        id: id.to_string(),
        summary: format!(
            "{what} of {} is still mounted but containerd has no record of it{}",
            short(id),
            if inferred { " (inferred)" } else { "" }
        ),
        evidence,
        cause: "The unmount that should have come with the task's delete or the sandbox's \
                stop did not happen: the delete timed out or the shim went away mid-way."
            .to_string(),
        remedy: format!(
            "`nodectl leaked-mounts --unmount` shows what it would do, `--unmount --yes` \
             re-checks and unmounts it (by hand: check nothing uses it, `fuser -vm {}`, \
             then `umount {}`); the snapshot's space is only freed after that.",
            mount.mount_point.display(),
            mount.mount_point.display()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::Mount;
    use serde_json::Value;
    use std::path::PathBuf;

    fn mount(point: &str) -> Mount {
        Mount {
            mount_point: PathBuf::from(point),
            fs_type: "overlay".to_string(),
            source: Some("overlay".to_string()),
            options: vec!["rw".to_string()],
        }
    }

    fn rootfs(id: &str) -> String {
        format!("/run/containerd/io.containerd.runtime.v2.task/k8s.io/{id}/rootfs")
    }

    #[test]
    fn rootfs_and_shm_mounts_of_unknown_ids_are_leaked_known_ones_are_not() {
        let mut s = snapshot();
        s.mounts.push(mount(&rootfs(&id('a'))));
        s.mounts.push(mount(&rootfs(&id('b'))));
        s.mounts.push(mount(&format!(
            "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/{}/shm",
            id('c')
        )));
        let image_volume = |pod: &str| {
            format!(
                "/run/containerd/io.containerd.grpc.v1.cri/image-volumes/{pod}/{}",
                id('9')
            )
        };
        s.mounts.push(mount(&image_volume(&id('d'))));
        s.mounts.push(mount(&image_volume(&id('b'))));
        s.mounts.push(mount("/run/containerd/something/else"));
        with_records(&mut s, &[id('b')]);
        let findings = check(&s);
        let ids: Vec<_> = findings.iter().map(|f| (f.kind, f.id.clone())).collect();
        assert_eq!(
            ids,
            vec![
                (Kind::LeakedMount, id('a')),
                (Kind::LeakedMount, id('c')),
                (Kind::LeakedMount, id('d'))
            ]
        );
        assert_eq!(findings[2].evidence["owner"], "image volume");
        assert_eq!(findings[0].evidence["mount_point"], rootfs(&id('a')));
        assert_eq!(findings[0].evidence["fstype"], "overlay");
        assert_eq!(findings[0].evidence["pod_name"], Value::Null);
        assert_eq!(findings[1].evidence["owner"], "sandbox shm");
    }

    #[test]
    fn without_api_a_status_file_of_the_id_is_a_record() {
        let mut s = snapshot();
        s.mounts.push(mount(&rootfs(&id('a'))));
        s.mounts.push(mount(&rootfs(&id('b'))));
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        // Every mount at once (the status files indexed) and one by one.
        let ids: Vec<String> = check(&s).into_iter().map(|f| f.id).collect();
        assert_eq!(ids, [id('b')]);
        assert!(leaked_mount(&s, &s.mounts[0]).is_none());
        assert!(leaked_mount(&s, &s.mounts[1]).is_some());
    }

    #[test]
    fn a_leaked_mount_is_named_while_something_remembers_its_pod() {
        // The rootfs is mounted inside the bundle, whose spec often outlives
        // the record; CRI may still list a sandbox whose record is gone.
        let mut s = snapshot();
        s.mounts.push(mount(&rootfs(&id('a'))));
        s.bundles.insert(id('a'), bundle(&id('a'), &id('s'), "app"));
        let shm = format!(
            "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/{}/shm",
            id('s')
        );
        s.mounts.push(mount(&shm));
        s.cri = Some(crate::model::CriView {
            sandboxes: Some(vec![cri_sandbox(&id('s'), "batch", "job-1")]),
            ..Default::default()
        });
        with_records(&mut s, &[]);
        let findings = check(&s);
        let names = |f: &Finding| {
            ["pod_namespace", "pod_name", "container_name"].map(|k| f.evidence[k].clone())
        };
        assert_eq!(
            names(&findings[0]),
            ["shop", "web-0", "app"].map(Value::from)
        );
        assert_eq!(
            names(&findings[1]),
            [Value::from("batch"), Value::from("job-1"), Value::Null]
        );
    }

    #[test]
    fn without_api_a_served_mount_is_not_leaked() {
        let mut s = snapshot();
        s.mounts.push(mount(&rootfs(&id('a'))));
        s.shims.push(shim(9, &id('a'), ADDRESS, &[]));
        assert!(check(&s).is_empty());
        s.shims.clear();
        let findings = check(&s);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].evidence["inferred"], true);
        // Nor when procfs was not read: whether a shim serves it is unknown.
        s.gaps.push(procfs_unread());
        assert!(check(&s).is_empty());
        // With the API's answer it is leaked all the same.
        with_records(&mut s, &[]);
        assert_eq!(check(&s).len(), 1);
    }
}
