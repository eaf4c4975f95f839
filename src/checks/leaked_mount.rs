//! `leaked-mount`: a task rootfs, a sandbox shm or an image volume still
//! mounted for an id containerd no longer knows.
//!
//! The shim unmounts a task's rootfs in its delete, and CRI unmounts a pod's
//! shm when it stops the sandbox; a delete that timed out or a shim that died
//! mid-way leaves them behind, pinning the snapshot and its disk space.

use std::borrow::Cow;
use std::os::unix::ffi::OsStrExt;

use serde_json::json;

use std::collections::HashSet;

use crate::checks::shared::{served_ids, short, Records};
use crate::inert::inert_bytes;
use crate::model::{Basis, Finding, Kind, Mount, Names, Severity, Snapshot, CRI_NAMESPACE};

pub fn check(snapshot: &Snapshot) -> Vec<Finding> {
    let joins = Joins::of(snapshot);
    snapshot
        .mounts
        .iter()
        .filter_map(|mount| judge(snapshot, &joins, mount))
        .collect()
}

/// What a mount is judged against, each built once for every mount (a
/// node's table holds tens of thousands): the records by id, the ids shims
/// serve, whether procfs and the records on disk were read, the names.
struct Joins<'a> {
    records: Records<'a>,
    served: HashSet<&'a str>,
    sources_read: bool,
    names: Names<'a>,
}

impl<'a> Joins<'a> {
    fn of(snapshot: &'a Snapshot) -> Joins<'a> {
        Joins {
            records: Records::indexed(snapshot),
            served: served_ids(snapshot),
            sources_read: snapshot.processes_read() && snapshot.disk_records_read(),
            names: snapshot.names(),
        }
    }
}

/// What a mount below containerd's directories belongs to. Its parts are
/// the path's bytes: a part that is not UTF-8 is no id containerd makes,
/// and is reported as such rather than passed over.
#[derive(Debug, PartialEq)]
enum Owner<'a> {
    /// `<state>/io.containerd.runtime.v2.task/<ns>/<id>/rootfs`
    TaskRootfs { namespace: &'a [u8], id: &'a [u8] },
    /// `<state>/io.containerd.grpc.v1.cri/sandboxes/<id>/shm`
    SandboxShm { id: &'a [u8] },
    /// `<state>/io.containerd.grpc.v1.cri/image-volumes/<sandbox id>/<image id>`:
    /// an image mounted as a pod volume (containerd 2.1+), unmounted by
    /// StopPodSandbox (`cleanupImageMounts`); one left means that never
    /// finished.
    ImageVolume { id: &'a [u8] },
}

impl<'a> Owner<'a> {
    /// The containerd namespace, the id and what the mount is. CRI's
    /// sandboxes (their shm, their image volumes) are always in
    /// [`CRI_NAMESPACE`], whatever namespace `-n` names for tasks.
    fn parts(&self) -> (&'a [u8], &'a [u8], &'static str) {
        match *self {
            Owner::TaskRootfs { namespace, id } => (namespace, id, TASK_ROOTFS),
            Owner::SandboxShm { id } => (CRI_NAMESPACE.as_bytes(), id, "sandbox shm"),
            Owner::ImageVolume { id } => (CRI_NAMESPACE.as_bytes(), id, "image volume"),
        }
    }
}

/// The owner of `mount`, from its path below the state directory as
/// nodectl spells it (the table may spell it otherwise: a symlink, a bind
/// mount; see `Mount::as_given`).
fn owner<'a>(snapshot: &Snapshot, mount: &'a Mount) -> Option<Owner<'a>> {
    let below_state = mount
        .path_as_given()
        .strip_prefix(&snapshot.paths.state.path)
        .ok()?;
    owner_below_state(below_state.as_os_str().as_bytes())
}

/// [`owner`] of a mount point relative to the state directory, cut at `/`
/// as a path's components are (no `.`, no empty part): thousands of mounts
/// went through three component-wise prefix strips each.
fn owner_below_state(rest: &[u8]) -> Option<Owner<'_>> {
    let mut parts = rest
        .split(|&b| b == b'/')
        .filter(|p| !p.is_empty() && *p != b".");
    let mut next = || parts.next();
    let owner = match (next()?, next()?) {
        (b"io.containerd.runtime.v2.task", namespace) => match (next()?, next()?) {
            (id, b"rootfs") => Owner::TaskRootfs { namespace, id },
            _ => return None,
        },
        (b"io.containerd.grpc.v1.cri", b"sandboxes") => match (next()?, next()?) {
            (id, b"shm") => Owner::SandboxShm { id },
            _ => return None,
        },
        (b"io.containerd.grpc.v1.cri", b"image-volumes") => {
            let (id, _image) = (next()?, next()?);
            Owner::ImageVolume { id }
        }
        _ => return None,
    };
    // Nothing further down: a mount inside a rootfs is the container's own.
    next().is_none().then_some(owner)
}

/// What [`mount_owner`] calls a task's rootfs.
pub const TASK_ROOTFS: &str = "task rootfs";

/// The containerd namespace and id a mount below containerd's state belongs
/// to, and what it is (`task rootfs`, `sandbox shm`, `image volume`); `None`
/// for a mount containerd does not make, among them one whose namespace or
/// id is not UTF-8 (containerd's are ASCII).
pub fn mount_owner<'a>(
    snapshot: &Snapshot,
    mount: &'a Mount,
) -> Option<(&'a str, &'a str, &'static str)> {
    let (namespace, id, what) = owner(snapshot, mount)?.parts();
    Some((
        std::str::from_utf8(namespace).ok()?,
        std::str::from_utf8(id).ok()?,
        what,
    ))
}

/// The leaked-mount finding for `mount`, if it is one.
pub fn leaked_mount(snapshot: &Snapshot, mount: &Mount) -> Option<Finding> {
    judge(snapshot, &Joins::of(snapshot), mount)
}

/// A part of a mount's path as text: itself when UTF-8, else escaped
/// (`\x80`), which no containerd namespace or id can equal.
fn text(part: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(part) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => Cow::Owned(inert_bytes(part)),
    }
}

/// [`leaked_mount`], with what it is judged against looked up in `joins`.
fn judge(snapshot: &Snapshot, joins: &Joins, mount: &Mount) -> Option<Finding> {
    let (namespace, id, what) = owner(snapshot, mount)?.parts();
    let could_be_containerds =
        std::str::from_utf8(namespace).is_ok() && std::str::from_utf8(id).is_ok();
    let (namespace, id) = (text(namespace), text(id));
    let (namespace, id) = (namespace.as_ref(), id.as_ref());
    let (owned, basis) = joins.records.has(namespace, id);
    if owned {
        return None;
    }
    let inferred = basis == Basis::Disk;
    // Without the API, a shim still serving the id is as good as a record;
    // without procfs too, whether one does cannot be told; and without the
    // records on disk (CRI's store, the bundles) no record is no evidence:
    // `kubectl debug node` showed every live rootfs as leaked from a pod
    // that sees containerd's mount table (hostPID) but not its directories.
    if inferred && (!joins.sources_read || joins.served.contains(id)) {
        return None;
    }
    let pod = joins.names.of_in(namespace, id);
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
    let point = mount.mount_point.display();
    let (cause, remedy) = if could_be_containerds {
        (
            "The unmount that should have come with the task's delete or the sandbox's \
             stop did not happen: the delete timed out or the shim went away mid-way."
                .to_string(),
            format!(
                "`nodectl leaked-mounts --unmount` shows what it would do, `--unmount --yes` \
                 re-checks and unmounts it (by hand: check nothing uses it, `fuser -vm {point}`, \
                 then `umount {point}`); the snapshot's space is only freed after that."
            ),
        )
    } else {
        (
            "Its id is not UTF-8, so containerd did not make it (its ids are ASCII): \
             something else mounted it where containerd keeps its mounts."
                .to_string(),
            format!(
                "Find out who mounted it and whether anything uses it (`fuser -vm {point}`), \
                 then unmount it by hand: nodectl unmounts only what containerd makes."
            ),
        )
    };
    Some(Finding {
        kind: Kind::LeakedMount,
        severity: Severity::Warning,
        id: id.to_string(),
        summary: format!(
            "{what} of {} is still mounted but containerd has no record of it{}{}",
            short(id),
            if could_be_containerds {
                ""
            } else {
                " (no id containerd makes)"
            },
            if inferred { " (inferred)" } else { "" }
        ),
        evidence,
        cause,
        remedy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{Gap, Mount, Source};
    use serde_json::Value;
    use std::path::{Path, PathBuf};

    fn mount(point: &str) -> Mount {
        Mount {
            mount_point: PathBuf::from(point),
            fs_type: "overlay".to_string(),
            source: Some("overlay".to_string()),
            options: vec!["rw".to_string()],
            ..Mount::default()
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

    /// The owner as paths' components give it, the state directory and
    /// each part stripped as one prefix: what [`owner`] must agree with.
    fn owner_by_components<'a>(state: &Path, mount_point: &'a Path) -> Option<Owner<'a>> {
        let parts_below = |prefix: &str| -> Option<Vec<&'a [u8]>> {
            mount_point
                .strip_prefix(state.join(prefix))
                .ok()
                .map(|r| r.iter().map(|part| part.as_bytes()).collect())
        };
        if let Some([namespace, id, b"rootfs"]) =
            parts_below("io.containerd.runtime.v2.task").as_deref()
        {
            return Some(Owner::TaskRootfs { namespace, id });
        }
        if let Some([id, b"shm"]) = parts_below("io.containerd.grpc.v1.cri/sandboxes").as_deref() {
            return Some(Owner::SandboxShm { id });
        }
        if let Some([id, _image]) =
            parts_below("io.containerd.grpc.v1.cri/image-volumes").as_deref()
        {
            return Some(Owner::ImageVolume { id });
        }
        None
    }

    #[test]
    fn a_mounts_owner_is_what_its_paths_components_say() {
        use proptest::prelude::*;
        // Each owner's own shape, then parts put in, taken out or changed:
        // empty parts and `.` (which a path's components drop), one part
        // more or less, a word where a fixed one belongs, a part that is
        // not UTF-8.
        let shape = prop::sample::select(vec![
            ["io.containerd.runtime.v2.task", "k8s.io", "abc", "rootfs"],
            ["io.containerd.grpc.v1.cri", "sandboxes", "abc", "shm"],
            ["io.containerd.grpc.v1.cri", "image-volumes", "abc", "img"],
        ]);
        let word = prop::sample::select(vec![
            &b""[..],
            b".",
            b"x",
            b"rootfs",
            b"shm",
            b"sandboxes",
            b"\x80\xff",
        ]);
        let edit = (0..6usize, 0..3u8, word);
        proptest!(|(shape in shape, edits in prop::collection::vec(edit, 0..3))| {
            let mut parts: Vec<&[u8]> = shape.iter().map(|p| p.as_bytes()).collect();
            for (at, how, word) in edits {
                let at = at.min(parts.len());
                match how {
                    0 => parts.insert(at, word),
                    1 if at < parts.len() => { parts.remove(at); }
                    _ if at < parts.len() => parts[at] = word,
                    _ => parts.push(word),
                }
            }
            let s = snapshot();
            let below = std::ffi::OsStr::from_bytes(&parts.join(&b'/')).to_owned();
            let mount = Mount {
                mount_point: s.paths.state.path.join(below),
                ..Mount::default()
            };
            prop_assert_eq!(
                owner(&s, &mount),
                owner_by_components(&s.paths.state.path, &mount.mount_point)
            );
        });
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

    fn shm(sandbox: &str) -> String {
        format!("/run/containerd/io.containerd.grpc.v1.cri/sandboxes/{sandbox}/shm")
    }

    fn image_volume(sandbox: &str) -> String {
        format!(
            "/run/containerd/io.containerd.grpc.v1.cri/image-volumes/{sandbox}/{}",
            id('9')
        )
    }

    /// `-n moby`: containerd answered for moby (no records) and for k8s.io,
    /// which knows sandbox `s`; `d`'s pod is gone, CRI still names it.
    fn looked_at_in_moby() -> Snapshot {
        let mut s = looked_at_in(&id('s'), "moby");
        s.cri = Some(crate::model::CriView {
            sandboxes: Some(vec![cri_sandbox(&id('d'), "batch", "job-1")]),
            ..Default::default()
        });
        for point in [shm(&id('s')), image_volume(&id('s')), shm(&id('d'))] {
            s.mounts.push(mount(&point));
        }
        s
    }

    #[test]
    fn cris_mounts_are_judged_in_k8s_io_whatever_namespace_tasks_are_read_in() {
        let s = looked_at_in_moby();
        let findings = check(&s);
        let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(
            ids,
            [id('d')],
            "the live pod's shm and volume are not leaked"
        );
        let evidence = &findings[0].evidence;
        assert_eq!(evidence["namespace"], "k8s.io");
        assert_eq!(
            evidence["pod_name"], "job-1",
            "CRI names its pods in k8s.io"
        );
        // One by one (as the re-check before an unmount asks) the same.
        assert!(leaked_mount(&s, &s.mounts[0]).is_none());
        assert!(leaked_mount(&s, &s.mounts[1]).is_none());
        assert_eq!(
            mount_owner(&s, &s.mounts[2]),
            Some(("k8s.io", id('d').as_str(), "sandbox shm"))
        );
    }

    #[test]
    fn a_mount_below_an_id_that_is_not_utf8_is_reported_not_skipped() {
        use std::ffi::OsStr;
        let mut s = snapshot();
        with_records(&mut s, &[]);
        let state = s.paths.state.path.clone();
        let below = |parts: &[&[u8]]| Mount {
            mount_point: state.join(OsStr::from_bytes(&parts.join(&b'/'))),
            ..mount("")
        };
        s.mounts.push(below(&[
            b"io.containerd.runtime.v2.task",
            b"k8s.io",
            b"ab\x80\x1b]0;x\x07",
            b"rootfs",
        ]));
        s.mounts.push(below(&[
            b"io.containerd.grpc.v1.cri",
            b"sandboxes",
            b"\xff",
            b"shm",
        ]));
        s.mounts.push(below(&[
            b"io.containerd.runtime.v2.task",
            b"\xfe",
            b"c",
            b"rootfs",
        ]));
        let findings = check(&s);
        let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        // Escaped as inert shows it: no byte of it reaches a terminal raw.
        assert_eq!(ids, [r"ab\x80\x1b]0;x\x07", r"\xff", "c"]);
        assert_eq!(findings[2].evidence["namespace"], r"\xfe");
        for finding in &findings {
            assert!(
                finding.summary.contains("no id containerd makes"),
                "{finding:?}"
            );
            assert!(finding.remedy.contains("by hand"), "{finding:?}");
        }
        // Nothing containerd made: no owner to act for.
        assert!(s.mounts.iter().all(|m| mount_owner(&s, m).is_none()));
    }

    #[test]
    fn a_mount_is_judged_by_the_state_directory_as_given_whatever_the_table_spells() {
        // `--state /srv/link` with the mount table's `/run/containerd`
        // (a symlink, a bind mount): the source spells it both ways.
        let mut s = snapshot();
        s.paths.state.path = PathBuf::from("/srv/link");
        with_records(&mut s, &[id('b')]);
        for id in [id('a'), id('b')] {
            s.mounts.push(Mount {
                as_given: Some(PathBuf::from(format!(
                    "/srv/link/io.containerd.runtime.v2.task/k8s.io/{id}/rootfs"
                ))),
                ..mount(&rootfs(&id))
            });
        }
        let findings = check(&s);
        let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, [id('a')]);
        assert_eq!(
            findings[0].evidence["mount_point"],
            rootfs(&id('a')),
            "the mount point the kernel has, the one to unmount"
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

    #[test]
    fn without_api_nor_the_records_on_disk_nothing_is_inferred_leaked() {
        for unread in [Source::Bundles, Source::CriStore] {
            let mut s = snapshot();
            s.mounts.push(mount(&rootfs(&id('a'))));
            assert_eq!(check(&s).len(), 1, "inferred from the records on disk");
            s.gaps
                .push(Gap::source(unread, "/hidden", "No such file or directory"));
            assert!(check(&s).is_empty(), "{unread:?} unread");
            // An item's gap (one unreadable status file) leaves the rest.
            s.gaps = vec![Gap::item(unread, "/hidden/x", "corrupt")];
            assert_eq!(check(&s).len(), 1);
        }
    }
}
