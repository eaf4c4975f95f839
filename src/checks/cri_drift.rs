//! `cri-drift`: CRI, containerd and the processes disagree.
//!
//! What CRI reports is its own cache, updated by event handlers that can fail
//! half-way (the exit handler returns before it records the exit when
//! task.Delete fails). containerd's task list and procfs say what is real.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Duration;

use serde_json::json;

use crate::checks::zombie;

use crate::model::{
    CriApiState, Finding, Kind, Names, Severity, Snapshot, TaskStatus, TaskView, CRI_NAMESPACE,
};

/// kubelet's default `runtimeRequestTimeout`: how long it waits for a CRI
/// call such as CreateContainer.
const CRI_CALL_DEADLINE: Duration = Duration::from_secs(120);

pub fn check(snapshot: &Snapshot) -> Vec<Finding> {
    let (Some(cri), Some(containerd)) = (&snapshot.cri, &snapshot.containerd) else {
        return Vec::new();
    };
    // CRI keeps its pods in containerd's `k8s.io` namespace whatever `-n`
    // names (containerd's CRI plugin hard-codes it): another namespace's
    // tasks are not CRI's, and comparing them called every CRI container
    // drifted (`-n moby check`).
    let Some(namespace) = containerd.namespaces.get(CRI_NAMESPACE) else {
        return Vec::new();
    };
    let (Some(cri_containers), Some(tasks)) = (&cri.containers, &namespace.tasks) else {
        return Vec::new();
    };
    let tasks: BTreeMap<&str, &TaskView> = tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    // Already reported, with more evidence, as zombies.
    let zombies = zombie::dead_ids(snapshot);
    // Exits CRI's handler may still be recording, within its deadline.
    let being_recorded = zombie::exits_being_recorded(snapshot);
    // containerd's ListTasks leaves out a task whose shim does not answer
    // its state call (1.6: its connection closed, taken for a deleted task;
    // 1.7 and 2.0 also unavailable; 2.3 also past the state timeout), so a
    // task missing from the list is not a task gone. With its process alive,
    // CRI's RUNNING is right. A drift seen twice in a real kubelet's churn
    // on 1.6.20 (CRI RUNNING, no task listed, no zombie) fits only this.
    let alive = zombie::alive_ids(snapshot);
    let names = snapshot.names();
    let mut findings = Vec::new();

    for container in cri_containers {
        let task = tasks.get(container.id.as_str());
        let status = task.map(|t| t.status);
        let task_state = status.map_or("absent".to_string(), |s| s.to_string());
        let disagreement = match container.state {
            CriApiState::ContainerRunning
                if !matches!(status, Some(TaskStatus::Running | TaskStatus::Paused)) =>
            {
                let id = container.id.as_str();
                if zombies.contains(id)
                    || being_recorded.contains(id)
                    || (task.is_none() && alive.contains(id))
                {
                    continue;
                }
                format!("CRI says RUNNING, containerd's task is {task_state}")
            }
            CriApiState::ContainerExited if status == Some(TaskStatus::Running) => {
                let pid = task.map_or(0, |t| t.pid);
                let alive = snapshot
                    .processes
                    .get(&(pid as i32))
                    .is_some_and(|p| p.is_running());
                if !alive {
                    continue;
                }
                format!("CRI says EXITED, but its task runs (pid {pid})")
            }
            _ => continue,
        };
        findings.push(drift(
            &names,
            &container.id,
            disagreement,
            json!({
                "cri_state": container.state,
                "task_state": task_state,
                "task_pid": task.map(|t| t.pid),
            }),
        ));
    }

    // Records one side has and the other lacks.
    if let (Some(records), Some(sandboxes)) = (&namespace.containers, &cri.sandboxes) {
        let cri_ids: BTreeSet<&str> = cri_containers
            .iter()
            .chain(sandboxes.iter())
            .map(|c| c.id.as_str())
            .collect();
        // CRI's CreateContainer and RunPodSandbox make containerd's record
        // first and add the container to CRI's store only as they return;
        // under load that is seconds, and kubelet waits for either call up
        // to its runtime request timeout. A record younger than that may be
        // one still being made.
        let being_made = |id: &str| {
            namespace
                .containers_created
                .get(id)
                .is_some_and(|&at| !snapshot.is_older_than(at, CRI_CALL_DEADLINE))
        };
        for id in records
            .iter()
            .filter(|id| !cri_ids.contains(id.as_str()) && !being_made(id))
        {
            findings.push(drift(
                &names,
                id,
                format!(
                    "containerd has container {id:.13} in {} that CRI does not know",
                    snapshot.namespace
                ),
                json!({"in_containerd": true, "in_cri": false}),
            ));
        }
        // 2.x keeps a pod sandbox's record in its sandbox store too: one a
        // crash left there before its pause container was created is
        // recovered NOTREADY with no container record, and is containerd's
        // all the same (`leaked-sandbox` tells its story). CRI's sandbox ids
        // are a set, built once for every one of CRI's ids asked about.
        let cri_sandboxes: HashSet<&str> = sandboxes.iter().map(|s| s.id.as_str()).collect();
        let in_sandbox_store = |id: &str| {
            namespace
                .sandboxes_created
                .as_ref()
                .is_some_and(|store| store.contains_key(id))
                && cri_sandboxes.contains(id)
        };
        // CRI's RemoveContainer and RemovePodSandbox delete containerd's
        // record first, then the status directory, then CRI's entry (1.6 to
        // 2.3; a retry after a failure takes the record's NotFound as done):
        // a stopped container or sandbox CRI still lists whose directory is
        // already gone from the store this look listed is being removed.
        // Seen once in a real kubelet's churn on 2.0.11. An archive keeps no
        // listing: there it stays drift.
        let listed = snapshot.cri_store_listed.is_some();
        let on_disk: HashSet<&str> = snapshot
            .cri_containers
            .iter()
            .map(|c| c.id.as_str())
            .chain(snapshot.cri_sandboxes.iter().map(String::as_str))
            .collect();
        let stopped: HashSet<&str> = cri_containers
            .iter()
            .chain(sandboxes.iter())
            .filter(|item| {
                !matches!(
                    item.state,
                    CriApiState::ContainerRunning | CriApiState::SandboxReady
                )
            })
            .map(|item| item.id.as_str())
            .collect();
        let being_removed = |id: &str| listed && stopped.contains(id) && !on_disk.contains(id);
        for id in cri_ids
            .iter()
            .filter(|id| !records.contains(**id) && !in_sandbox_store(id) && !being_removed(id))
        {
            findings.push(drift(
                &names,
                id,
                format!("CRI knows {id:.13}, containerd has no container record for it"),
                json!({"in_containerd": false, "in_cri": true}),
            ));
        }
    }
    findings
}

fn drift(names: &Names, id: &str, summary: String, mut evidence: serde_json::Value) -> Finding {
    let pod = names.of(id);
    evidence["container_id"] = json!(id);
    evidence["pod_namespace"] = json!(pod.pod_namespace);
    evidence["pod_name"] = json!(pod.pod_name);
    evidence["container_name"] = json!(pod.container_name);
    Finding {
        kind: Kind::CriDrift,
        severity: Severity::Warning,
        id: id.to_string(),
        summary,
        evidence,
        cause: "CRI updates its view from containerd's events; a handler that failed or timed \
                out (a slow shim delete) left it behind, or a record was removed outside CRI \
                (ctr, a crash between steps)."
            .to_string(),
        remedy: "If it persists across runs, restart containerd: CRI rebuilds its view from \
                 containerd's records on start. Records containerd has and CRI lacks can be \
                 inspected with `ctr -n k8s.io containers info <id>`."
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{ContainerdView, CriItem, CriView, NamespaceView};

    fn item(id: &str, state: CriApiState) -> CriItem {
        CriItem {
            id: id.to_string(),
            sandbox_id: None,
            state,
            ..CriItem::default()
        }
    }

    fn task(id: &str, status: TaskStatus, pid: u32) -> TaskView {
        TaskView {
            id: id.to_string(),
            pid,
            status,
            exited_at: 0,
        }
    }

    fn with_views(
        cri: Vec<CriItem>,
        sandboxes: Vec<CriItem>,
        records: &[String],
        tasks: Vec<TaskView>,
    ) -> Snapshot {
        let mut s = snapshot();
        s.cri = Some(CriView {
            containers: Some(cri),
            sandboxes: Some(sandboxes),
            ..CriView::default()
        });
        let mut view = ContainerdView::default();
        view.namespaces.insert(
            "k8s.io".to_string(),
            NamespaceView {
                containers: Some(records.iter().cloned().collect()),
                tasks: Some(tasks),
                ..NamespaceView::default()
            },
        );
        s.containerd = Some(view);
        s
    }

    /// CRI lists containers `a` and `b` RUNNING, containerd has records of
    /// both and `tasks`.
    fn both_running_in_cri(tasks: Vec<TaskView>) -> Snapshot {
        with_views(
            vec![
                item(&id('a'), CriApiState::ContainerRunning),
                item(&id('b'), CriApiState::ContainerRunning),
            ],
            vec![],
            &[id('a'), id('b')],
            tasks,
        )
    }

    #[test]
    fn running_in_cri_with_a_stopped_task_drifts() {
        let s = both_running_in_cri(vec![
            task(&id('a'), TaskStatus::Stopped, 10),
            task(&id('b'), TaskStatus::Running, 11),
        ]);
        let findings = check(&s);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].id, id('a'));
        assert_eq!(findings[0].evidence["task_state"], "stopped");
    }

    #[test]
    fn cri_is_compared_with_its_own_namespace_whatever_n_names() {
        let mut s = both_running_in_cri(vec![
            task(&id('a'), TaskStatus::Running, 10),
            task(&id('b'), TaskStatus::Stopped, 11),
        ]);
        // `-n moby`: moby's namespace has other tasks, none of CRI's.
        s.namespace = "moby".to_string();
        let containerd = s.containerd.as_mut().unwrap();
        containerd.namespaces.insert(
            "moby".to_string(),
            NamespaceView {
                containers: Some(BTreeSet::from([id('m')])),
                tasks: Some(vec![task(&id('m'), TaskStatus::Running, 12)]),
                ..NamespaceView::default()
            },
        );
        let findings = check(&s);
        let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, [id('b')], "{findings:#?}");
    }

    #[test]
    fn running_in_cri_is_running_or_paused_in_containerd_and_states_are_named_as_they_say() {
        // A paused container is RUNNING to CRI; a task state containerd adds
        // later is shown by its number, and is no agreement.
        let s = both_running_in_cri(vec![
            task(&id('a'), TaskStatus::Paused, 10),
            task(&id('b'), TaskStatus::Unrecognised(9), 11),
        ]);
        let findings = check(&s);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].id, id('b'));
        assert_eq!(findings[0].evidence["cri_state"], "CONTAINER_RUNNING");
        assert_eq!(findings[0].evidence["task_state"], "status 9");
        assert!(
            findings[0]
                .summary
                .contains("containerd's task is status 9"),
            "{}",
            findings[0].summary
        );
    }

    #[test]
    fn where_cri_s_store_is_unread_a_zombie_its_own_word_tells_is_no_drift() {
        // `a` RUNNING in CRI, its task gone; no status file read.
        let mut s = both_running_in_cri(vec![task(&id('b'), TaskStatus::Running, 11)]);
        s.processes.insert(11, process(11, 'S', NOW - SEC));
        let ids = |s: &Snapshot| check(s).into_iter().map(|f| f.id).collect::<Vec<_>>();
        assert_eq!(ids(&s), [id('a')]);
        // CRI's ContainerStatus gives its pid, and no process has it: the
        // zombie check tells it.
        let mut said = running(&id('a'), 10, NOW - 60 * SEC);
        said.status_path = std::path::PathBuf::new();
        s.cri.as_mut().unwrap().said_running = Some(vec![said]);
        assert!(zombie::dead_ids(&s).contains(&id('a')));
        assert!(ids(&s).is_empty(), "{:?}", check(&s));
    }

    #[test]
    fn running_in_cri_with_no_task_listed_but_its_process_alive_is_no_drift() {
        // ListTasks leaves out a task whose shim did not answer its state.
        let mut s = both_running_in_cri(vec![task(&id('b'), TaskStatus::Stopped, 11)]);
        s.cri_containers = vec![
            running(&id('a'), 10, NOW - SEC),
            running(&id('b'), 11, NOW - SEC),
        ];
        s.processes.insert(10, process(10, 'S', NOW - SEC));
        s.processes.insert(11, process(11, 'S', NOW - SEC));
        let ids = |s: &Snapshot| check(s).into_iter().map(|f| f.id).collect::<Vec<_>>();
        // A task containerd says stopped is its word, not a gap in its list.
        assert_eq!(ids(&s), [id('b')]);
        // Another process on its pid (started later) is no sign of life:
        // a zombie, told as one.
        s.processes.insert(10, process(10, 'S', NOW + 10 * SEC));
        assert!(zombie::dead_ids(&s).contains(&id('a')));
        // Without procfs nothing says it lives.
        s.processes.insert(10, process(10, 'S', NOW - SEC));
        s.gaps.push(procfs_unread());
        assert_eq!(ids(&s), [id('a'), id('b')]);
    }

    #[test]
    fn exited_in_cri_with_a_live_task_drifts() {
        let mut s = with_views(
            vec![item(&id('a'), CriApiState::ContainerExited)],
            vec![],
            &[id('a')],
            vec![task(&id('a'), TaskStatus::Running, 10)],
        );
        s.processes.insert(10, process(10, 'S', NOW - SEC));
        assert_eq!(check(&s).len(), 1);
        s.processes.insert(10, process(10, 'Z', NOW - SEC));
        assert!(check(&s).is_empty(), "a defunct process is not alive");
        // A stopped task agrees with EXITED, whoever holds its old pid now.
        let mut s = with_views(
            vec![item(&id('a'), CriApiState::ContainerExited)],
            vec![],
            &[id('a')],
            vec![task(&id('a'), TaskStatus::Stopped, 10)],
        );
        s.processes.insert(10, process(10, 'S', NOW - SEC));
        assert!(check(&s).is_empty(), "{:?}", check(&s));
    }

    #[test]
    fn a_stopped_entry_whose_directory_cri_already_removed_is_being_removed_not_drift() {
        // CRI lists an exited container, a created one and a not-ready
        // sandbox, and a running container and a ready sandbox; containerd
        // has no record of any.
        let mut s = with_views(
            vec![
                item(&id('e'), CriApiState::ContainerExited),
                item(&id('c'), CriApiState::ContainerCreated),
                item(&id('r'), CriApiState::ContainerRunning),
            ],
            vec![
                item(&id('n'), CriApiState::SandboxNotReady),
                item(&id('y'), CriApiState::SandboxReady),
            ],
            &[],
            vec![task(&id('r'), TaskStatus::Running, 10)],
        );
        s.processes.insert(10, process(10, 'S', NOW - SEC));
        let drifted = |s: &Snapshot| -> Vec<String> {
            let mut ids: Vec<String> = check(s).into_iter().map(|f| f.id).collect();
            ids.sort();
            ids
        };
        let all = {
            let mut all = vec![id('c'), id('e'), id('n'), id('r'), id('y')];
            all.sort();
            all
        };
        // No store listed (an archive): every one drifts.
        assert_eq!(drifted(&s), all);
        // The store listed, every directory still there: every one drifts.
        s.cri_store_listed = Some((1, 2));
        s.cri_containers = vec![
            running(&id('e'), 0, NOW - 60 * SEC),
            running(&id('c'), 0, NOW - 60 * SEC),
            running(&id('r'), 10, NOW - 60 * SEC),
        ];
        s.cri_sandboxes = [id('n'), id('y')].into_iter().collect();
        assert_eq!(drifted(&s), all);
        // Their directories gone: the stopped ones are being removed; the
        // running container and the ready sandbox still drift.
        s.cri_containers.clear();
        s.cri_sandboxes.clear();
        let mut left = vec![id('r'), id('y')];
        left.sort();
        assert_eq!(drifted(&s), left);
    }

    #[test]
    fn records_on_one_side_only_drift_both_ways() {
        let s = with_views(
            vec![item(&id('a'), CriApiState::ContainerExited)],
            vec![item(&id('s'), CriApiState::SandboxReady)],
            &[id('a'), id('s'), id('x')],
            vec![],
        );
        let mut s = s;
        s.cri
            .as_mut()
            .unwrap()
            .containers
            .as_mut()
            .unwrap()
            .push(item(&id('y'), CriApiState::ContainerCreated));
        let ids: Vec<String> = check(&s).into_iter().map(|f| f.id).collect();
        assert_eq!(ids, vec![id('x'), id('y')]);
    }

    #[test]
    fn a_record_cri_may_still_be_making_or_an_exit_it_may_still_be_recording_is_no_drift() {
        let mut s = with_views(
            vec![
                item(&id('a'), CriApiState::ContainerRunning),
                item(&id('b'), CriApiState::ContainerRunning),
            ],
            vec![],
            &[id('a'), id('b'), id('x'), id('y')],
            vec![
                TaskView {
                    exited_at: NOW - 3 * SEC,
                    ..task(&id('a'), TaskStatus::Stopped, 10)
                },
                TaskView {
                    exited_at: NOW - 11 * SEC,
                    ..task(&id('b'), TaskStatus::Stopped, 11)
                },
            ],
        );
        let ns = s.containerd.as_mut().unwrap().namespaces.get_mut("k8s.io");
        ns.unwrap().containers_created =
            BTreeMap::from([(id('x'), NOW - 119 * SEC), (id('y'), NOW - 121 * SEC)]);
        let ids: Vec<String> = check(&s).into_iter().map(|f| f.id).collect();
        // a's exit is 3 s old (CRI's handler has 10 s), x's record 119 s
        // (kubelet waits 120 s for CreateContainer).
        assert_eq!(ids, vec![id('b'), id('y')]);
    }

    #[test]
    fn drift_is_named_from_cri_and_the_record_without_a_bundle() {
        // No bundle: the task is gone. CRI names the container (its pod
        // from the sandbox's metadata); containerd's record names one CRI
        // has lost.
        let mut s = with_views(
            vec![cri_container(
                &id('a'),
                &id('s'),
                "app",
                CriApiState::ContainerRunning,
            )],
            vec![cri_sandbox(&id('s'), "shop", "web-0")],
            &[id('a'), id('s'), id('x')],
            vec![],
        );
        with_labels(&mut s, &id('x'), labels("batch", "job-1", Some("worker")));
        let findings = check(&s);
        let a = findings.iter().find(|f| f.id == id('a')).unwrap();
        assert_eq!(a.evidence["task_state"], "absent");
        assert_eq!(a.evidence["pod_namespace"], "shop");
        assert_eq!(a.evidence["pod_name"], "web-0");
        assert_eq!(a.evidence["container_name"], "app");
        let x = findings.iter().find(|f| f.id == id('x')).unwrap();
        assert_eq!(x.evidence["in_cri"], false);
        assert_eq!(x.evidence["pod_namespace"], "batch");
        assert_eq!(x.evidence["pod_name"], "job-1");
        assert_eq!(x.evidence["container_name"], "worker");
    }

    #[test]
    fn zombie_is_not_reported_twice() {
        let mut s = with_views(
            vec![item(&id('a'), CriApiState::ContainerRunning)],
            vec![],
            &[id('a')],
            vec![task(&id('a'), TaskStatus::Stopped, 10)],
        );
        s.cri_containers.push(running(&id('a'), 10, NOW - 60 * SEC));
        assert!(check(&s).is_empty());
    }

    #[test]
    fn a_sandbox_only_in_2_x_s_sandbox_store_is_containerd_s_and_no_drift() {
        let sandbox = |c| item(&id(c), CriApiState::SandboxNotReady);
        // A container of CRI's whose id the store holds is no sandbox there:
        // without a container record it drifts.
        let container = vec![item(&id('c'), CriApiState::ContainerCreated)];
        let mut s = with_views(container, vec![sandbox('s'), sandbox('t')], &[], vec![]);
        let view = s.containerd.as_mut().unwrap();
        let namespace = view.namespaces.get_mut("k8s.io").unwrap();
        namespace.sandboxes_created = Some([(id('s'), 1), (id('c'), 1)].into_iter().collect());
        let ids: Vec<String> = check(&s).into_iter().map(|f| f.id).collect();
        assert_eq!(ids, [id('c'), id('t')], "no record anywhere: drift");
    }
}
