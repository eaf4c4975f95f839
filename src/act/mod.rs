//! Actions: the only code that changes the node, and only when asked.
//!
//! Every action re-gathers the node after the scan that found its targets and
//! re-judges each target on that fresh snapshot, with pure functions, right
//! before it acts; whatever came back to life in between is refused. They
//! all do so through one walk ([`walk::walk`]).

pub mod dbus;
pub mod kill;
pub mod release_ip;
pub mod remove_bundle;
pub mod remove_cgroup;
pub mod remove_netns;
pub mod remove_sandbox;
pub mod remove_snapshot;
pub mod systemd;
mod tree;
pub mod unmount;
pub mod walk;

use crate::checks::shared::short;
use crate::model::shim::{cannot_be_a_shim, SHIM_PREFIX};
use crate::model::{Bundle, CriItem, ProcessInfo, Shim, Snapshot, Source};

/// What the re-verification on a fresh snapshot says about one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Still leaked: act (or, in a dry run, say it would).
    Go,
    /// Not there any more.
    Gone(String),
    /// Must not be touched, and why.
    Refuse(String),
}

/// Why nothing may be acted on with `fresh`, the snapshot an action
/// re-judges its targets on, if anything says so: nodectl acts only for a
/// containerd proven to be the daemon (the host's namespaces, a root-owned
/// binary, the listener of the socket it asks) whose own root and state it
/// read (tied by what it holds open, a shim of it or its own word, not by
/// nodectl's reading of its config alone), and only if that is still the
/// daemon the scan (`before`) found.
/// Without that proof, the records that say a mount or a shim is leaked are
/// whoever's serves the socket, and the files may be another containerd's.
/// Pure.
pub fn daemon_proven(before: &Snapshot, fresh: &Snapshot) -> Result<(), String> {
    let paths = &fresh.paths;
    if !paths.unproven.is_empty() {
        return Err(format!(
            "not acting without a proven containerd: {}",
            paths.unproven.join("; ")
        ));
    }
    if !paths.by_config_only.is_empty() {
        let why: Vec<&str> = paths
            .by_config_only
            .iter()
            .map(|t| t.why.as_str())
            .collect();
        return Err(format!(
            "not acting on what only nodectl's reading of containerd's config ties to it \
             (neither a shim of it working there nor CRI's Status said so): {}",
            why.join("; ")
        ));
    }
    let Some(process) = &paths.process else {
        return Err(format!(
            "not acting without a proven containerd: none was proven to serve {}",
            paths.address.path.display()
        ));
    };
    let then = &before.paths;
    if then.process.as_ref().map(|p| p.pid) != Some(process.pid)
        || (&then.root.path, &then.state.path) != (&paths.root.path, &paths.state.path)
    {
        return Err(format!(
            "the containerd serving {} changed since the scan (now pid {}): scan again",
            paths.address.path.display(),
            process.pid
        ));
    }
    Ok(())
}

/// What a target's path says its id is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    /// A task's (its bundle, its rootfs): a pod's container, or its sandbox.
    Task,
    /// A pod sandbox's (its shm, its image volumes).
    Sandbox,
}

/// A live process with a shim's name on `fresh` whose service cannot be
/// told, which makes [`still_dead`] refuse every target: its command line
/// unread (a process already exiting reads an empty one), or without `-id`
/// (containerd 2.x runs `containerd-shim-runc-v2 -info` as CRI starts, to
/// learn the runtime's features; it ends within milliseconds). Both are
/// usually gone a moment later, so [`walk::walk`] gathers once more before
/// it judges. Pure.
pub fn shim_of_unknown_service(fresh: &Snapshot) -> Option<i32> {
    let live = |pid: &i32| fresh.processes.get(pid).is_none_or(ProcessInfo::is_running);
    let without_id = possible_shims(fresh)
        .filter(|s| s.id.is_none())
        .map(|s| s.pid);
    without_id.filter(live).chain(unread_shims(fresh)).next()
}

/// The shims of `fresh` that may be a containerd's: every one but those
/// the kernel's facts rule out (see [`cannot_be_a_shim`]).
fn possible_shims(fresh: &Snapshot) -> impl Iterator<Item = &Shim> + '_ {
    fresh
        .shims
        .iter()
        .filter(|shim| cannot_be_a_shim(shim).is_none())
}

/// Live processes with a shim's name whose command line was not read. Every
/// shim's comm is the prefix (the kernel cuts it at 15 bytes).
fn unread_shims(fresh: &Snapshot) -> impl Iterator<Item = i32> + '_ {
    let read = |pid: i32| fresh.shims.iter().any(|s| s.pid == pid);
    fresh
        .processes
        .values()
        .filter(move |p| p.comm == SHIM_PREFIX && p.is_running() && !read(p.pid))
        .map(|p| p.pid)
}

/// Why `id` (in containerd `namespace`) must be left alone on `fresh`, if
/// anything says it lives: its mount table unread, containerd not answering
/// (its records and tasks are the proof that nothing owns the id), a record
/// or a task for the id, CRI listing it, or a live shim that serves it or
/// may (see [`no_shim_serves`]), of any containerd, proven or not, unless
/// the kernel's facts say it is none (see [`cannot_be_a_shim`]). Pure.
pub fn still_dead(fresh: &Snapshot, namespace: &str, id: &str, kind: IdKind) -> Result<(), String> {
    // Any line of it unread may be a mount on the very path: refused too.
    if let Some(gap) = fresh.gaps.iter().find(|g| g.source == Source::Mountinfo) {
        let what = if gap.source_unavailable {
            "the mount table"
        } else {
            "a line of the mount table"
        };
        return Err(format!("{what} could not be read: {}", gap.error));
    }
    let view = fresh
        .containerd
        .as_ref()
        .and_then(|v| v.namespaces.get(namespace));
    let Some(records) = view.and_then(|n| n.containers.as_ref()) else {
        return Err(
            "containerd did not list its containers, so its records could not confirm the leak"
                .to_string(),
        );
    };
    if records.contains(id) {
        return Err("containerd has a container record for it again".to_string());
    }
    let Some(tasks) = view.and_then(|n| n.tasks.as_ref()) else {
        return Err("containerd did not list its tasks".to_string());
    };
    if let Some(task) = tasks.iter().find(|t| t.id == id) {
        return Err(format!(
            "containerd has a task for it ({}, pid {})",
            task.status, task.pid
        ));
    }
    if let Some(cri) = &fresh.cri {
        let listed =
            |items: &Option<Vec<CriItem>>| items.iter().flatten().any(|item| item.id == id);
        if listed(&cri.sandboxes) || listed(&cri.containers) {
            return Err("CRI lists it".to_string());
        }
    }
    no_shim_serves(fresh, namespace, id, kind)
}

/// Why a live shim serves `id` or may. runc's v2 shim groups tasks (CRI's:
/// by pod): the shim of a group's first task, the pod's sandbox, serves
/// every task of the group, on every containerd since 1.5, so a shim started
/// with the id itself is only one of the shims that may serve it. The group
/// is the task's spec's (see [`Bundle::shim_group`]); what cannot be told
/// is taken to be served: a process not read may be the shim, and with the
/// group unknown any live shim of the namespace may serve it.
fn no_shim_serves(fresh: &Snapshot, namespace: &str, id: &str, kind: IdKind) -> Result<(), String> {
    if !fresh.processes_read() {
        return Err("no process could be read, so no shim serving it can be ruled out".to_string());
    }
    if let Some(pid) = fresh.unread_pids.first() {
        return Err(format!(
            "process {pid} could not be read, and it may be a shim serving it"
        ));
    }
    if let Some(unread) = unread_shims(fresh).next() {
        return Err(format!(
            "shim pid {unread} could not be read, so what it serves is unknown"
        ));
    }
    // Bundles were read for the snapshot's namespace only.
    let bundle = |id: &str| {
        fresh
            .bundles
            .get(id)
            .filter(|_| namespace == fresh.namespace)
    };
    let group = match bundle(id) {
        Some(bundle) => bundle
            .shim_group()
            .map_err(|why| format!("its pod is unknown (its spec: {why})")),
        None if kind == IdKind::Sandbox || fresh.cri_sandboxes.contains(id) => Ok(id),
        None => Err("its pod is unknown (no bundle of it was read)".to_string()),
    };
    let live = |pid: i32| {
        fresh
            .processes
            .get(&pid)
            .is_none_or(ProcessInfo::is_running)
    };
    for shim in possible_shims(fresh).filter(|s| live(s.pid)) {
        let pid = shim.pid;
        if shim.id.as_deref() == Some(id) {
            return Err(format!("a shim for it is alive (pid {pid})"));
        }
        // A shim serves the one namespace it was started for.
        if shim.namespace.as_deref().is_some_and(|n| n != namespace) {
            continue;
        }
        let Some(shim_id) = shim.id.as_deref() else {
            return Err(format!(
                "shim pid {pid} has no -id, so what it serves is unknown"
            ));
        };
        let group = group.as_deref().map_err(|why| {
            format!(
                "{why}, and shim pid {pid} (-id {}) may serve it",
                short(shim_id)
            )
        })?;
        if shim_id == group {
            return Err(format!(
                "its pod's shim is alive (pid {pid}, -id {}), serving every container of the pod",
                short(shim_id)
            ));
        }
        // A shim with no bundle here leads the group of its own id (CRI
        // starts a pod's sandbox first); one with a bundle, its spec's.
        match bundle(shim_id).map_or(Ok(shim_id), Bundle::shim_group) {
            Ok(served) if served == group => {
                return Err(format!(
                    "the shim of its group {} is alive (pid {pid}, -id {})",
                    short(group),
                    short(shim_id)
                ))
            }
            Ok(_) => {}
            Err(why) => {
                return Err(format!(
                    "shim pid {pid} (-id {}) may serve it: its own spec could not be read \
                     ({why})",
                    short(shim_id)
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{CriView, Gap, ShimProof, TaskStatus, TaskView, RUNC_GROUP_ANNOTATION};

    /// containerd answers and knows none of them; app container `a` of pod
    /// `s` has its bundle (its spec read), and so has the pod's sandbox.
    fn pod_of_a() -> Snapshot {
        let mut s = snapshot();
        with_records(&mut s, &[]);
        for (task, pod) in [(id('a'), id('s')), (id('s'), id('s'))] {
            s.bundles.insert(task.clone(), bundle(&task, &pod, "app"));
        }
        s
    }

    fn refusal(s: &Snapshot, id: &str, kind: IdKind) -> String {
        still_dead(s, "k8s.io", id, kind).expect_err("refused")
    }

    #[test]
    fn the_pods_grouped_shim_serving_an_app_container_is_a_reason_to_refuse() {
        let mut s = pod_of_a();
        assert_eq!(still_dead(&s, "k8s.io", &id('a'), IdKind::Task), Ok(()));
        // Another pod's shim serves neither.
        let mut other = bundle(&id('t'), &id('t'), "app");
        other.path.set_file_name(id('t'));
        s.bundles.insert(id('t'), other);
        with_live_shim(&mut s, shim(71, &id('t'), ADDRESS, &[]));
        assert_eq!(still_dead(&s, "k8s.io", &id('a'), IdKind::Task), Ok(()));

        // The pod's shim, started with `-id <sandbox>`, of any containerd.
        let mut t = s.clone();
        with_live_shim(
            &mut t,
            shim(72, &id('s'), "/elsewhere/containerd.sock", &[]),
        );
        let err = refusal(&t, &id('a'), IdKind::Task);
        assert!(err.contains("its pod's shim is alive (pid 72"), "{err}");
        // Its bundle gone too (the spec kept by no file), the sandbox's shm
        // and image volumes are its pod's: the same shim serves them.
        t.bundles.clear();
        let err = refusal(&t, &id('s'), IdKind::Sandbox);
        assert!(err.contains("shim for it is alive (pid 72"), "{err}");

        // runc's own group annotation first: a shim started for another
        // pod's sandbox serves every task of the group.
        let mut t = s.clone();
        for task in [id('a'), id('t')] {
            let bundle = t.bundles.get_mut(&task).unwrap();
            let group = (RUNC_GROUP_ANNOTATION.to_string(), "shared".to_string());
            bundle.annotations.extend([group]);
        }
        let err = refusal(&t, &id('a'), IdKind::Task);
        assert!(
            err.contains("the shim of its group shared is alive (pid 71"),
            "{err}"
        );
    }

    #[test]
    fn with_its_pod_unknown_any_live_shim_of_its_namespace_is_a_reason_to_refuse() {
        let mut s = pod_of_a();
        let spec_lost = Some("No such file or directory (os error 2)".to_string());
        s.bundles.get_mut(&id('a')).unwrap().spec_error = spec_lost.clone();
        // No live shim at all: nothing can serve it.
        assert_eq!(still_dead(&s, "k8s.io", &id('a'), IdKind::Task), Ok(()));
        // Another namespace's shim serves only that one.
        let mut elsewhere = shim(73, &id('m'), ADDRESS, &[]);
        elsewhere.namespace = Some("moby".to_string());
        with_live_shim(&mut s, elsewhere);
        assert_eq!(still_dead(&s, "k8s.io", &id('a'), IdKind::Task), Ok(()));

        let mut t = s.clone();
        with_live_shim(&mut t, shim(74, &id('u'), ADDRESS, &[]));
        let err = refusal(&t, &id('a'), IdKind::Task);
        assert!(
            err.contains("its pod is unknown (its spec: No such file")
                && err.contains("shim pid 74"),
            "{err}"
        );
        // No bundle of it read (another namespace than the one read).
        let namespaces = &mut t.containerd.as_mut().unwrap().namespaces;
        namespaces.insert("other".to_string(), namespaces["k8s.io"].clone());
        let err = still_dead(&t, "other", &id('a'), IdKind::Task);
        assert_eq!(err, Ok(()), "no shim of namespace other lives");
        let mut untagged = shim(75, &id('v'), ADDRESS, &[]);
        untagged.namespace = None;
        with_live_shim(&mut t, untagged);
        let err = still_dead(&t, "other", &id('a'), IdKind::Task).unwrap_err();
        assert!(
            err.contains("no bundle of it was read") && err.contains("pid 75"),
            "{err}"
        );

        // Its pod known, a live shim whose own spec was not read may lead
        // its group.
        let mut t = pod_of_a();
        t.bundles.insert(id('w'), bundle(&id('w'), &id('w'), "app"));
        t.bundles.get_mut(&id('w')).unwrap().spec_error = spec_lost;
        with_live_shim(&mut t, shim(76, &id('w'), ADDRESS, &[]));
        let err = refusal(&t, &id('a'), IdKind::Task);
        assert!(
            err.contains("shim pid 76") && err.contains("own spec"),
            "{err}"
        );
    }

    #[test]
    fn a_process_not_read_may_be_the_shim_serving_it() {
        let s = pod_of_a();
        let mut t = s.clone();
        t.gaps.push(procfs_unread());
        assert!(refusal(&t, &id('a'), IdKind::Task).contains("no process could be read"));

        let mut t = s.clone();
        t.unread_pids.insert(80);
        assert!(refusal(&t, &id('a'), IdKind::Sandbox).contains("process 80 could not be read"));

        // A shim by its comm whose command line was not read.
        let mut t = s.clone();
        with_live_shim(&mut t, shim(81, &id('t'), ADDRESS, &[]));
        t.shims.clear();
        let err = refusal(&t, &id('a'), IdKind::Task);
        assert!(err.contains("shim pid 81 could not be read"), "{err}");

        // A shim with no `-id`.
        let mut t = s.clone();
        let mut anonymous = shim(82, &id('t'), ADDRESS, &[]);
        anonymous.id = None;
        with_live_shim(&mut t, anonymous);
        let err = refusal(&t, &id('a'), IdKind::Task);
        assert!(err.contains("shim pid 82 has no -id"), "{err}");
    }

    #[test]
    fn a_process_named_like_a_shim_that_the_kernel_says_is_none_refuses_nothing() {
        let s = pod_of_a();
        // A tenant's process, named like a shim, with no -id.
        let mut tenant = proven(shim(83, &id('t'), ADDRESS, &[]));
        tenant.id = None;
        for (what, change) in [
            (
                "another pid namespace",
                (|p: &mut ShimProof| p.namespaces.as_mut().unwrap().pid = 9) as fn(&mut ShimProof),
            ),
            ("another mount namespace", |p| {
                p.namespaces.as_mut().unwrap().mnt = 9
            }),
            ("a binary a user owns", |p| p.exe_uid = Some(1001)),
            // An unprivileged user's `sleep` (root's binary) run through a
            // symlink named like a shim.
            ("another user's credentials", |p| p.uids = vec![65534; 4]),
            ("a saved uid of another user", |p| {
                p.uids = vec![0, 0, 65534, 0]
            }),
            // Root's `sleep` through a symlink named like a shim: no
            // listening socket, so nothing can reach it as a shim.
            ("no listening socket", |p| p.listens = Some(false)),
        ] {
            let mut t = s.clone();
            let mut process = tenant.clone();
            change(process.proof.as_mut().unwrap());
            with_live_shim(&mut t, process);
            assert_eq!(
                still_dead(&t, "k8s.io", &id('a'), IdKind::Task),
                Ok(()),
                "{what}"
            );
            assert_eq!(shim_of_unknown_service(&t), None, "{what}");
        }
        // In the host's namespaces, from root's binary: it may be a shim.
        let mut t = s.clone();
        with_live_shim(&mut t, tenant.clone());
        assert!(refusal(&t, &id('a'), IdKind::Task).contains("shim pid 83 has no -id"));
        assert_eq!(shim_of_unknown_service(&t), Some(83));
        // Holding a listener, or its descriptors unread: it may be a shim.
        for listens in [Some(true), None] {
            let mut t = s.clone();
            let mut process = tenant.clone();
            process.proof.as_mut().unwrap().listens = listens;
            with_live_shim(&mut t, process);
            let err = refusal(&t, &id('a'), IdKind::Task);
            assert!(err.contains("shim pid 83 has no -id"), "{listens:?}: {err}");
        }
        // With -id, what it names is blocked whatever it holds.
        let mut t = s.clone();
        let mut named = proven(shim(84, &id('a'), ADDRESS, &[]));
        named.proof.as_mut().unwrap().listens = Some(false);
        with_live_shim(&mut t, named);
        assert!(still_dead(&t, "k8s.io", &id('a'), IdKind::Task).is_err());
        // Its namespaces unread prove nothing: it may be a shim.
        let mut t = s.clone();
        let mut unread = tenant;
        unread.proof.as_mut().unwrap().namespaces = None;
        with_live_shim(&mut t, unread);
        assert!(refusal(&t, &id('a'), IdKind::Task).contains("shim pid 83 has no -id"));
    }

    #[test]
    fn a_live_shim_unread_or_without_an_id_is_one_whose_service_is_unknown() {
        let s = pod_of_a();
        let mut t = s.clone();
        with_live_shim(&mut t, shim(81, &id('t'), ADDRESS, &[]));
        assert_eq!(
            shim_of_unknown_service(&t),
            None,
            "its -id says what it serves"
        );
        // Its command line not read.
        t.shims.clear();
        assert_eq!(shim_of_unknown_service(&t), Some(81));
        // Read, without `-id` (containerd 2.x's `-info` run).
        let mut t = s.clone();
        let mut info = shim(82, &id('t'), ADDRESS, &[]);
        info.id = None;
        info.namespace = None;
        with_live_shim(&mut t, info);
        assert_eq!(shim_of_unknown_service(&t), Some(82));
        // Ended, waiting to be reaped: it serves nothing.
        t.processes.get_mut(&82).unwrap().state = 'Z';
        assert_eq!(shim_of_unknown_service(&t), None);
    }

    #[test]
    fn nothing_is_acted_on_without_the_proven_daemon_the_scan_found() {
        let before = of_proven_daemon(snapshot());
        assert_eq!(daemon_proven(&before, &before), Ok(()));
        // No containerd proven to serve the socket (a relay, nobody).
        let unserved = snapshot();
        let why = daemon_proven(&before, &unserved).unwrap_err();
        assert!(why.contains("none was proven to serve"), "{why}");
        // Proven, but root or state is another containerd's.
        let mut elsewhere = before.clone();
        elsewhere
            .paths
            .unproven
            .push("state /b is not containerd pid 812's (it uses /a)".to_string());
        let why = daemon_proven(&before, &elsewhere).unwrap_err();
        assert!(
            why.contains("state /b is not containerd pid 812's"),
            "{why}"
        );
        // Its state named by nodectl's reading of its config alone.
        let mut by_config = before.clone();
        by_config.paths.by_config_only.push(crate::model::Untied {
            dir: crate::model::DaemonDir::State,
            path: "/run/containerd".into(),
            why: "state /run/containerd is tied to containerd pid 812 by nothing but its config"
                .to_string(),
        });
        let why = daemon_proven(&before, &by_config).unwrap_err();
        assert!(why.contains("nothing but its config"), "{why}");
        // Another daemon since the scan (restarted, or its socket taken).
        let mut replaced = before.clone();
        replaced.paths.process.as_mut().unwrap().pid = 900;
        let why = daemon_proven(&before, &replaced).unwrap_err();
        assert!(why.contains("changed since the scan"), "{why}");
        let mut moved = before.clone();
        moved.paths.state.path = "/run/other".into();
        assert!(daemon_proven(&before, &moved).is_err());
    }

    #[test]
    fn anything_alive_for_the_id_is_a_reason_to_refuse() {
        let mut s = snapshot();
        let a = id('a');
        // containerd not asked: nothing can be confirmed.
        assert!(still_dead(&s, "k8s.io", &a, IdKind::Task)
            .unwrap_err()
            .contains("did not list its containers"));
        with_records(&mut s, &[]);
        assert_eq!(still_dead(&s, "k8s.io", &a, IdKind::Task), Ok(()));

        let mut t = s.clone();
        with_records(&mut t, std::slice::from_ref(&a));
        assert!(still_dead(&t, "k8s.io", &a, IdKind::Task)
            .unwrap_err()
            .contains("record"));

        let mut t = s.clone();
        let ns = t.containerd.as_mut().unwrap().namespaces.get_mut("k8s.io");
        ns.unwrap().tasks = Some(vec![TaskView {
            id: a.clone(),
            pid: 77,
            status: TaskStatus::Running,
            ..TaskView::default()
        }]);
        let err = still_dead(&t, "k8s.io", &a, IdKind::Task).unwrap_err();
        assert!(err.contains("task") && err.contains("running"), "{err}");

        let mut t = s.clone();
        let ns = t.containerd.as_mut().unwrap().namespaces.get_mut("k8s.io");
        ns.unwrap().tasks = None;
        assert!(still_dead(&t, "k8s.io", &a, IdKind::Task)
            .unwrap_err()
            .contains("tasks"));

        // Any shim started for the id, of this containerd or not.
        let mut t = s.clone();
        t.shims.push(shim(9, &a, "/elsewhere/containerd.sock", &[]));
        let err = still_dead(&t, "k8s.io", &a, IdKind::Task).unwrap_err();
        assert!(err.contains("shim") && err.contains("pid 9"), "{err}");
        // ... unless it is only a defunct entry.
        t.processes.insert(9, process(9, 'Z', NOW - SEC));
        assert_eq!(still_dead(&t, "k8s.io", &a, IdKind::Task), Ok(()));

        let mut t = s.clone();
        t.cri = Some(CriView {
            sandboxes: Some(vec![cri_sandbox(&a, "shop", "web-0")]),
            ..Default::default()
        });
        assert!(still_dead(&t, "k8s.io", &a, IdKind::Task)
            .unwrap_err()
            .contains("CRI"));

        let mut t = s.clone();
        t.gaps.push(Gap::source(
            Source::Mountinfo,
            "/proc/self/mountinfo",
            "EACCES",
        ));
        assert!(still_dead(&t, "k8s.io", &a, IdKind::Task)
            .unwrap_err()
            .contains("the mount table could not be read"));
        // One line of it unread may be a mount on the path: refused too.
        let mut t = s.clone();
        t.gaps.push(Gap::item(
            Source::Mountinfo,
            "/proc/self/mountinfo",
            "no separator: 310 22 0:52 / /run/containerd/a/rootfs rw",
        ));
        assert!(still_dead(&t, "k8s.io", &a, IdKind::Task)
            .unwrap_err()
            .contains("a line of the mount table"));
    }
}
