//! The second look, and CRI's own word on the containers a look could not
//! read CRI's store for.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{now_nanos, DEADLINE_GRACE};
use crate::gather::GatherOptions;
use crate::model::{
    ContainerdView, CriApiState, CriView, Snapshot, Source, Suspects, TaskStatus, CRI_NAMESPACE,
};
use crate::sources::{cri_api, cri_store, proc_scan, shim_proof, SourceThread};

/// A later, cheap look to confirm what a first snapshot suggested (a zombie
/// seen twice, a shim thread blocked twice): only the suspects' status files
/// and processes are read again; the APIs are not asked and every other part
/// is left empty, as no check compares them across snapshots. Bounded like
/// [`gather`]: what has not answered by the deadline is a gap. It reads
/// the paths `first` used, with the running containerd it found.
pub fn follow_up(options: &GatherOptions, suspects: Suspects, first: &Snapshot) -> Snapshot {
    let paths = &first.paths;
    let taken_at = now_nanos();
    let started = Instant::now();
    let deadline = started + options.timeout + DEADLINE_GRACE;
    let mut gaps = Vec::new();
    let Suspects {
        containers: mut ids,
        pids,
    } = suspects;
    // Those CRI's own word gave (its store unread) are asked of it again.
    let said: Vec<String> = first
        .cri
        .as_ref()
        .and_then(|c| c.said_running.as_deref())
        .into_iter()
        .flatten()
        .filter(|c| ids.remove(&c.id))
        .map(|c| c.id.clone())
        .collect();
    let cri = match (&first.cri, &paths.process, options.api_timeout) {
        (Some(view), Some(daemon), Some(timeout)) if !said.is_empty() => {
            Some(ask_said_running(&view.address, daemon.pid, &said, timeout))
        }
        _ => None,
    };
    let dir = paths.cri_containers_dir();
    // The first look's readings of the suspects: a file unchanged since is
    // not read again (cri_store::reread).
    let earlier: Vec<_> = first
        .cri_containers
        .iter()
        .filter(|c| ids.contains(&c.id))
        .cloned()
        .collect();
    // Held to the directory the first look listed (see `ListedDir`).
    let listed = first.cri_store_listed;
    let cri_containers = match ids.is_empty() && !said.is_empty() {
        // Nothing of the store to read again (it was not read).
        true => Vec::new(),
        false => SourceThread::spawn(cri_store::SOURCE, &dir.clone(), move |gaps| {
            cri_store::reread(&dir, listed, &ids, earlier, gaps)
        })
        .wait(started + options.timeout, started, &mut gaps)
        .unwrap_or_default(),
    };
    let (root, shim_threads) = (options.proc_root.clone(), options.shim_threads);
    let proof_paths = paths.clone();
    // Zombies are confirmed by their status files alone (see
    // `zombie::unrecorded_ids`): only suspect shims send it to procfs.
    let proc_scan = if pids.is_empty() {
        proc_scan::ProcScan::default()
    } else {
        SourceThread::spawn(Source::Procfs, &root.clone(), move |gaps| {
            let mut scan = proc_scan::rescan(&root, &pids, shim_threads, gaps);
            shim_proof::prove_all(&root, &proof_paths, &mut scan.shims, &scan.processes, gaps);
            scan
        })
        .wait(deadline, started, &mut gaps)
        .unwrap_or_default()
    };
    Snapshot {
        cri_containers,
        processes: proc_scan.processes,
        unread_pids: proc_scan.unread_pids,
        shims: proc_scan.shims,
        cri,
        gaps,
        ..Snapshot::empty(taken_at, paths.clone(), options.namespace.clone())
    }
}

/// CRI's own word again on the containers `ids` its first answer gave (see
/// `cri_api::said_running`), within `timeout`: unanswered, none is confirmed.
fn ask_said_running(address: &Path, daemon: i32, ids: &[String], timeout: Duration) -> CriView {
    let mut view = CriView {
        address: address.to_path_buf(),
        said_running: Some(Vec::new()),
        ..CriView::default()
    };
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return view;
    };
    let (said, calls) = runtime.block_on(async {
        let deadline = tokio::time::Instant::now() + timeout;
        cri_api::said_running(address, daemon, ids, deadline).await
    });
    view.said_running = Some(said);
    view.calls = calls;
    view
}

/// CRI's containers it lists RUNNING whose task containerd does not say
/// runs (or whose tasks it did not answer for): the ones a zombie could be.
pub(super) fn running_without_task(cri: &CriView, containerd: &ContainerdView) -> Vec<String> {
    let tasks = containerd
        .namespaces
        .get(CRI_NAMESPACE)
        .and_then(|ns| ns.tasks.as_deref());
    let runs: HashMap<&str, bool> = tasks
        .into_iter()
        .flatten()
        .map(|t| {
            let runs = matches!(t.status, TaskStatus::Running | TaskStatus::Paused);
            (t.id.as_str(), runs)
        })
        .collect();
    cri.containers
        .iter()
        .flatten()
        .filter(|c| c.state == CriApiState::ContainerRunning)
        .filter(|c| !runs.get(c.id.as_str()).copied().unwrap_or(false))
        .map(|c| c.id.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cri_is_asked_its_word_on_what_it_says_runs_while_its_task_does_not() {
        use crate::model::fixtures::cri_container;
        use crate::model::{NamespaceView, TaskView};
        let running =
            |c: char| cri_container(&c.to_string(), "s", "app", CriApiState::ContainerRunning);
        let exited = cri_container("e", "s", "app", CriApiState::ContainerExited);
        let cri = CriView {
            containers: Some(vec![
                running('r'),
                running('p'),
                running('z'),
                running('g'),
                exited,
            ]),
            ..CriView::default()
        };
        let task = |id: &str, status| TaskView {
            id: id.to_string(),
            pid: 1,
            status,
            exited_at: 0,
        };
        let mut containerd = ContainerdView::default();
        // Another namespace's tasks are not CRI's: no tasks answered for it.
        assert_eq!(
            running_without_task(&cri, &containerd),
            ["r", "p", "z", "g"]
        );
        containerd.namespaces.insert(
            CRI_NAMESPACE.to_string(),
            NamespaceView {
                tasks: Some(vec![
                    task("r", TaskStatus::Running),
                    task("p", TaskStatus::Paused),
                    task("z", TaskStatus::Stopped),
                    task("e", TaskStatus::Stopped),
                ]),
                ..NamespaceView::default()
            },
        );
        // `z` stopped, `g` gone: CRI's word on each.
        assert_eq!(running_without_task(&cri, &containerd), ["z", "g"]);
    }
}
