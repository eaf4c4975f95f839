//! Actions: the only code that changes the node, and only when asked.
//!
//! Every action re-gathers the node after the scan that found its targets and
//! re-judges each target on that fresh snapshot, with pure functions, right
//! before it acts; whatever came back to life in between is refused.

pub mod kill;
pub mod remove_bundle;
pub mod remove_snapshot;
pub mod unmount;

use crate::model::{CriItem, Snapshot, Source};

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
/// read, and only if that is still the daemon the scan (`before`) found.
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

/// Why `id` (in containerd `namespace`) must be left alone on `fresh`, if
/// anything says it lives: its mount table unread, containerd not answering
/// (its records and tasks are the proof that nothing owns the id), a record
/// or a task for the id, CRI listing it, or any shim process started for it,
/// of any containerd, proven or not. Pure.
pub fn still_dead(fresh: &Snapshot, namespace: &str, id: &str) -> Result<(), String> {
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
    if let Some(shim) = fresh.shims.iter().find(|s| {
        s.id.as_deref() == Some(id) && fresh.processes.get(&s.pid).is_none_or(|p| p.is_running())
    }) {
        return Err(format!("a shim for it is alive (pid {})", shim.pid));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{CriView, Gap, TaskStatus, TaskView};

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
        assert!(still_dead(&s, "k8s.io", &a)
            .unwrap_err()
            .contains("did not list its containers"));
        with_records(&mut s, &[]);
        assert_eq!(still_dead(&s, "k8s.io", &a), Ok(()));

        let mut t = s.clone();
        with_records(&mut t, std::slice::from_ref(&a));
        assert!(still_dead(&t, "k8s.io", &a).unwrap_err().contains("record"));

        let mut t = s.clone();
        let ns = t.containerd.as_mut().unwrap().namespaces.get_mut("k8s.io");
        ns.unwrap().tasks = Some(vec![TaskView {
            id: a.clone(),
            pid: 77,
            status: TaskStatus::Running,
        }]);
        let err = still_dead(&t, "k8s.io", &a).unwrap_err();
        assert!(err.contains("task") && err.contains("running"), "{err}");

        let mut t = s.clone();
        let ns = t.containerd.as_mut().unwrap().namespaces.get_mut("k8s.io");
        ns.unwrap().tasks = None;
        assert!(still_dead(&t, "k8s.io", &a).unwrap_err().contains("tasks"));

        // Any shim started for the id, of this containerd or not.
        let mut t = s.clone();
        t.shims.push(shim(9, &a, "/elsewhere/containerd.sock", &[]));
        let err = still_dead(&t, "k8s.io", &a).unwrap_err();
        assert!(err.contains("shim") && err.contains("pid 9"), "{err}");
        // ... unless it is only a defunct entry.
        t.processes.insert(9, process(9, 'Z', NOW - SEC));
        assert_eq!(still_dead(&t, "k8s.io", &a), Ok(()));

        let mut t = s.clone();
        t.cri = Some(CriView {
            sandboxes: Some(vec![cri_sandbox(&a, "shop", "web-0")]),
            ..Default::default()
        });
        assert!(still_dead(&t, "k8s.io", &a).unwrap_err().contains("CRI"));

        let mut t = s.clone();
        t.gaps.push(Gap::source(
            Source::Mountinfo,
            "/proc/self/mountinfo",
            "EACCES",
        ));
        assert!(still_dead(&t, "k8s.io", &a)
            .unwrap_err()
            .contains("the mount table could not be read"));
        // One line of it unread may be a mount on the path: refused too.
        let mut t = s.clone();
        t.gaps.push(Gap::item(
            Source::Mountinfo,
            "/proc/self/mountinfo",
            "no separator: 310 22 0:52 / /run/containerd/a/rootfs rw",
        ));
        assert!(still_dead(&t, "k8s.io", &a)
            .unwrap_err()
            .contains("a line of the mount table"));
    }
}
