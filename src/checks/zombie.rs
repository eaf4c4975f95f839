//! `zombie`: CRI still says RUNNING but the container's process is dead.
//!
//! CRI records an exit only when the shim publishes it and CRI's exit
//! handler (`handleContainerExit`) gets through `task.Delete`. Two ways it
//! does not, told apart by the evidence:
//!
//! - The delete is slow: the shim's delete unmounts the overlay rootfs, and
//!   when that `umount2` is slow (it syncs the upper dir under I/O pressure)
//!   the handler's 10 s deadline passes, it returns early, and the status
//!   file keeps `FinishedAt = 0` until a retry succeeds, minutes later or
//!   never. A shim thread in `umount2` shows it.
//! - The exit is lost (containerd#10589, 1.7.14 to 1.7.21): the runc shim
//!   holds back an init exit while an exec is being started in the
//!   container, for that exec to publish, and an exec that subscribed to
//!   exits after it never does. The shim never publishes the exit and still
//!   says the task runs: nothing retries. Told by the node's version with
//!   no thread in `umount2`.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::advisories::{self, Applied, Version, EXIT_LOST_TO_EXEC};
use crate::checks::shared::ShimIndex;
use crate::model::{
    timestamp, ApiCall, CriContainer, CriState, Finding, Kind, Names, PodRef, ProcessInfo,
    ProcessKey, SampleBasis, Severity, Snapshot, Suspects, TaskStatus, TaskView, ThreadSample,
    ZombieTarget, CRI_NAMESPACE,
};

/// `/proc/<pid>/stat` start times have tick resolution and the status file's
/// `StartedAt` is taken after runc started the process; this absorbs both.
const START_TIME_SLACK: i64 = 2_000_000_000;

#[derive(Serialize)]
struct Evidence {
    container_id: String,
    #[serde(flatten)]
    pod: PodRef,
    pid: i64,
    /// Why the pid does not count as the container's process.
    process: String,
    started_at: Value,
    running_for_seconds: f64,
    /// `null` when CRI's store was not read and CRI's own ContainerStatus
    /// told it (`recorded_by`).
    status_file: Option<String>,
    /// Where CRI's RUNNING was read: `status_file`, or `cri_api` (its
    /// ContainerStatus, where its store could not be read).
    recorded_by: &'static str,
    shim_pid: Option<i32>,
    /// Threads of the shim blocked in `umount2` when sampled.
    shim_threads_in_umount2: Vec<i32>,
    shim_in_umount2: bool,
    /// The shim's threads in D or in `umount2`, the first
    /// [`BLOCKED_THREADS_SHOWN`] of them (their names bounded), and how
    /// many there were.
    shim_threads_blocked: Vec<ThreadSample>,
    shim_threads_blocked_count: usize,
    /// Whether the container's rootfs (`<bundle>/rootfs`) is still mounted:
    /// the shim's delete unmounts it. `None` when the mount table was not
    /// read.
    rootfs_mounted: Option<bool>,
    /// containerd's word on the container's task: its status (`null` when
    /// containerd was not asked or did not answer, `absent` when it lists
    /// no such task) and, once stopped, when it exited.
    task_status: Option<String>,
    task_exited_at: Value,
}

/// The blocked threads a finding lists: a stuck delete shows one or two.
const BLOCKED_THREADS_SHOWN: usize = 8;

pub fn check(snapshot: &Snapshot) -> Vec<Finding> {
    findings(snapshot, |_| true, usize::MAX).0
}

/// The ids of the containers [`check`] reports, without building their
/// findings (thousands on a node where every container looks dead: the
/// second look and the confirmation need only the ids).
pub fn dead_ids(snapshot: &Snapshot) -> BTreeSet<String> {
    dead(snapshot).map(|(c, _)| c.id.clone()).collect()
}

/// What the flight recorder re-reads of the zombies `ids` between looks
/// (see `model::sample`): each one's status file as this look read it, its
/// rootfs as [`findings`] spells it, and its shim by pid and start time.
pub fn sample_basis<'a>(
    snapshot: &Snapshot,
    ids: impl IntoIterator<Item = &'a str>,
) -> SampleBasis {
    let ids: HashSet<&str> = ids.into_iter().collect();
    let shims = ShimIndex::new(snapshot);
    let bundles = snapshot.paths.bundles_dir(&snapshot.namespace);
    let zombies = snapshot
        .cri_containers
        .iter()
        .filter(|c| ids.contains(c.id.as_str()))
        .map(|container| ZombieTarget {
            container: container.clone(),
            rootfs: bundles.join(&container.id).join("rootfs"),
            shim: shims.shim_of(snapshot, container).and_then(|shim| {
                let process = snapshot.processes.get(&shim.pid)?;
                Some(ProcessKey {
                    pid: shim.pid,
                    started_at: process.started_at,
                })
            }),
        })
        .collect();
    SampleBasis {
        cri_store_listed: snapshot.cri_store_listed,
        zombies,
    }
}

/// The findings [`check`] gives for the containers `keep` accepts, at most
/// `limit` of them in the order of `snapshot.cri_containers` (by id, as
/// read), and how many more there were. A report lists at most
/// `FINDINGS_PER_KIND` findings of a kind, so a command need not build the
/// rest to count them.
pub fn findings(
    snapshot: &Snapshot,
    keep: impl Fn(&str) -> bool,
    limit: usize,
) -> (Vec<Finding>, usize) {
    let shims = ShimIndex::new(snapshot);
    let names = snapshot.names();
    // Whether containerd runs: a look at every process, once for all the
    // findings.
    let down = containerd_down(snapshot);
    let mounted: Option<HashSet<&Path>> = snapshot
        .mounts_read
        .then(|| snapshot.mounts.iter().map(|m| m.path_as_given()).collect());
    let bundles = snapshot.paths.bundles_dir(&snapshot.namespace);
    let mut built = Vec::new();
    let mut more = 0;
    for (container, death) in dead(snapshot).filter(|(c, _)| keep(&c.id)) {
        if built.len() < limit {
            let rootfs = bundles.join(&container.id).join("rootfs");
            let rootfs_mounted = mounted.as_ref().map(|m| m.contains(rootfs.as_path()));
            built.push(finding(
                snapshot,
                &shims,
                &names,
                down,
                container,
                death,
                rootfs_mounted,
            ));
        } else {
            more += 1;
        }
    }
    (built, more)
}

/// The RUNNING containers whose recorded pid is no live process of theirs,
/// with why (see [`why_dead`]). None when procfs was not read: every
/// container would look dead (its gap says why nothing was judged); nor one
/// whose process was listed but could not be read.
fn dead(snapshot: &Snapshot) -> impl Iterator<Item = (&CriContainer, Death<'_>)> {
    let being_recorded = exits_being_recorded(snapshot);
    recorded_running_judged(snapshot)
        .filter(move |c| !being_recorded.contains(c.id.as_str()))
        .filter_map(|c| Some((c, liveness(snapshot, c)??)))
}

/// The containers whose status file says they run, when this look read
/// procfs (without it, none can be judged alive or dead).
fn recorded_running_judged(snapshot: &Snapshot) -> impl Iterator<Item = &CriContainer> {
    records(snapshot)
        .filter(|_| snapshot.processes_read())
        .filter(|c| recorded_running(c))
}

/// CRI's records: its status files and, where its store was not read, its
/// own word on the containers it says run (`CriView::said_running`), judged
/// alike: CRI answers ContainerStatus from the same status it writes.
fn records(snapshot: &Snapshot) -> impl Iterator<Item = &CriContainer> {
    let said = snapshot
        .cri
        .as_ref()
        .and_then(|c| c.said_running.as_deref());
    snapshot
        .cri_containers
        .iter()
        .chain(said.into_iter().flatten())
}

/// Whether `container`'s recorded pid is its live process: `None` when
/// procfs did not say, `Some(None)` when it lives, else why it is dead.
fn liveness<'a>(snapshot: &'a Snapshot, container: &CriContainer) -> Option<Option<Death<'a>>> {
    // A pid past what the kernel gives is no process (not a truncated one
    // that happens to exist).
    let pid = i32::try_from(container.status.pid).ok();
    // Listed but unreadable: alive or not, procfs did not say.
    if pid.is_some_and(|pid| snapshot.unread_pids.contains(&pid)) {
        return None;
    }
    let process = pid.and_then(|pid| snapshot.processes.get(&pid));
    Some(why_dead(container, process))
}

/// How long CRI's exit handler gives `task.Delete` before it gives up and
/// leaves the container RUNNING (`handleEventTimeout`, 10 s on every line
/// nodectl knows).
pub const EXIT_HANDLER_DEADLINE: Duration = Duration::from_secs(10);

/// The containers whose task containerd says stopped less than
/// [`EXIT_HANDLER_DEADLINE`] before the look: CRI's handler may still be in
/// that exit's delete, slowly but within its deadline (a node under load
/// unmounting many rootfs), so CRI still saying RUNNING is no zombie yet.
/// Only containerd's own word (a stopped task with its exit time) counts;
/// without it, or past the deadline, the container is judged as before.
pub fn exits_being_recorded(snapshot: &Snapshot) -> HashSet<&str> {
    cri_tasks(snapshot)
        .into_iter()
        .flatten()
        .filter(|t| t.status == TaskStatus::Stopped && t.exited_at > 0)
        .filter(|t| !snapshot.is_older_than(t.exited_at, EXIT_HANDLER_DEADLINE))
        .map(|t| t.id.as_str())
        .collect()
}

/// Whether a dead container of `snapshot` has a task containerd no longer
/// lists (containerd answered, and its task is gone): its delete is done,
/// and CRI's handler records the exit next, unless that handler gave up
/// on an earlier try and waits for its retry (a zombie). Which of the two
/// only time tells: CRI's handler runs one exit at a time, and under load
/// (many containers exiting, a disk slow to sync the status file) it
/// records one seconds after its delete. Such a container is confirmed by
/// a second look no sooner than [`EXIT_HANDLER_DEADLINE`] after the first.
pub fn awaiting_record(snapshot: &Snapshot) -> bool {
    let Some(tasks) = cri_tasks(snapshot) else {
        return false;
    };
    let listed: HashSet<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
    dead(snapshot).any(|(c, _)| !listed.contains(c.id.as_str()))
}

/// containerd's tasks in CRI's namespace, when it answered for them.
fn cri_tasks(snapshot: &Snapshot) -> Option<&[TaskView]> {
    snapshot
        .containerd
        .as_ref()
        .and_then(|c| c.namespaces.get(CRI_NAMESPACE))
        .and_then(|ns| ns.tasks.as_deref())
}

/// The zombies of `first` whose exit CRI has still not recorded in
/// `second`, a later look (see [`unrecorded_ids`]): a container exiting
/// normally is dead for a few milliseconds before CRI records it; a zombie
/// stays.
pub fn confirmed(first: &Snapshot, second: &Snapshot) -> Vec<Finding> {
    let still = unrecorded_ids(second);
    findings(first, |id| still.contains(id), usize::MAX).0
}

/// The containers whose status file a later look still finds RUNNING with a
/// pid: of a first look's dead ones, those are the zombies. Their processes
/// are not looked at again: a process the first look found gone (or
/// defunct, or its pid another process's) cannot come back, so a second
/// reading of `/proc` could only say so again. What can change is CRI's
/// record.
pub fn unrecorded_ids(second: &Snapshot) -> BTreeSet<String> {
    records(second)
        .filter(|c| recorded_running(c))
        .map(|c| c.id.clone())
        .collect()
}

/// The containers whose status file records them running and whose
/// process this look read alive (its start time the status file's): CRI's
/// RUNNING is true of them, whatever containerd's task list says.
pub fn alive_ids(snapshot: &Snapshot) -> HashSet<&str> {
    recorded_running_judged(snapshot)
        .filter(|c| matches!(liveness(snapshot, c), Some(None)))
        .map(|c| c.id.as_str())
        .collect()
}

/// CRI's status file says the container runs, with a pid.
fn recorded_running(container: &CriContainer) -> bool {
    container.status.state() == CriState::Running && container.status.pid > 0
}

/// What a second look must read again to confirm the zombies of `first`:
/// their status files (see [`unrecorded_ids`]).
pub fn suspects(first: &Snapshot, suspects: &mut Suspects) {
    for (container, _) in dead(first) {
        suspects.containers.insert(container.id.clone());
    }
}

/// Why a container's recorded pid is not its live process; put into words
/// only for the findings a report lists (thousands of containers can look
/// dead, and the ids alone serve the second look and the confirmation).
enum Death<'a> {
    NoProcess(i64),
    Defunct(i64, char),
    Reused(i64, &'a ProcessInfo),
}

impl std::fmt::Display for Death<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Death::NoProcess(pid) => write!(f, "no process with pid {pid}"),
            Death::Defunct(pid, state) => {
                write!(f, "pid {pid} is defunct ({state}), waiting to be reaped")
            }
            Death::Reused(pid, process) => write!(
                f,
                "pid {pid} now belongs to another process ({}, started {})",
                process.comm,
                timestamp(process.started_at).as_str().unwrap_or("?")
            ),
        }
    }
}

/// Returns why the container's recorded pid is not its live process, or
/// `None` when it is. A pid can be reused: the process holding it now must
/// have started between the container's creation and its start.
fn why_dead<'a>(container: &CriContainer, process: Option<&'a ProcessInfo>) -> Option<Death<'a>> {
    let status = &container.status;
    let Some(process) = process else {
        return Some(Death::NoProcess(status.pid));
    };
    if !process.is_running() {
        return Some(Death::Defunct(status.pid, process.state));
    }
    // Saturating: the times are the status file's, whatever it holds.
    let earliest = status
        .created_at
        .min(status.started_at)
        .saturating_sub(START_TIME_SLACK);
    let latest = status.started_at.saturating_add(START_TIME_SLACK);
    if process.started_at < earliest || process.started_at > latest {
        return Some(Death::Reused(status.pid, process));
    }
    None
}

fn finding(
    snapshot: &Snapshot,
    shims: &ShimIndex,
    names: &Names,
    down: Option<usize>,
    container: &CriContainer,
    death: Death,
    rootfs_mounted: Option<bool>,
) -> Finding {
    let pod = names.of(&container.id);
    // Told by CRI's word (its store, and maybe the bundles, unseen): the
    // shim of the sandbox CRI lists it in.
    let shim = shims.shim_of(snapshot, container).or_else(|| {
        if container.from_status_file() {
            return None;
        }
        let listed = snapshot.cri.as_ref()?.containers.as_ref()?;
        let sandbox = listed
            .iter()
            .find(|c| c.id == container.id)?
            .sandbox_id
            .as_deref()?;
        shims.started_for(sandbox)
    });
    // A search of the tasks per finding: a report builds at most
    // FINDINGS_PER_KIND of them.
    let task = cri_tasks(snapshot).map(|tasks| tasks.iter().find(|t| t.id == container.id));
    let blocked: Vec<&ThreadSample> = shim
        .map(|s| s.threads_blocked().collect())
        .unwrap_or_default();
    let in_umount2: Vec<i32> = shim
        .map(|s| s.threads_in_umount2().map(|t| t.tid).collect())
        .unwrap_or_default();
    let exit_lost = if in_umount2.is_empty() {
        let version = snapshot.containerd_version.version.as_deref();
        advisories::applied(EXIT_LOST_TO_EXEC, version)
    } else {
        None
    };
    let (cause, remedy) = match (down, &exit_lost, in_umount2.is_empty()) {
        (Some(others), _, _) => (
            containerd_down_cause(others),
            CONTAINERD_DOWN_REMEDY.to_string(),
        ),
        (None, Some(advisory), _) => lost_exit_story(snapshot, advisory),
        (None, None, false) => (UMOUNT2_CAUSE.to_string(), SLOW_DELETE_REMEDY.to_string()),
        (None, None, true) => (
            SLOW_DELETE_CAUSE.to_string(),
            SLOW_DELETE_REMEDY.to_string(),
        ),
    };
    let summary = format!(
        "{} is RUNNING in CRI but its process is gone ({death})",
        pod.display()
    );
    let evidence = Evidence {
        container_id: container.id.clone(),
        pid: container.status.pid,
        process: death.to_string(),
        started_at: timestamp(container.status.started_at),
        running_for_seconds: snapshot.seconds_since(container.status.started_at),
        status_file: container
            .from_status_file()
            .then(|| container.status_path.display().to_string()),
        recorded_by: match container.from_status_file() {
            true => "status_file",
            false => "cri_api",
        },
        shim_pid: shim.map(|s| s.pid),
        shim_in_umount2: !in_umount2.is_empty(),
        shim_threads_in_umount2: in_umount2,
        shim_threads_blocked_count: blocked.len(),
        shim_threads_blocked: blocked
            .iter()
            .take(BLOCKED_THREADS_SHOWN)
            .map(|t| t.bounded())
            .collect(),
        rootfs_mounted,
        task_status: task.map(|t| t.map_or("absent".to_string(), |t| t.status.to_string())),
        task_exited_at: task
            .flatten()
            .filter(|t| t.exited_at > 0)
            .map_or(Value::Null, |t| timestamp(t.exited_at)),
        pod,
    };
    Finding {
        kind: Kind::Zombie,
        severity: Severity::Critical,
        id: container.id.clone(),
        summary,
        evidence: serde_json::to_value(evidence).unwrap_or(Value::Null),
        cause,
        remedy,
    }
}

/// No containerd runs for the socket: its API did not answer, every
/// process was read and none called containerd runs but those found serving
/// another socket or not the daemon (`paths.other_containerds`: a node's
/// second containerd, docker's or a test bed's, does not handle this one's
/// shims). A name is enough here: it only chooses the words. `Some(n)`: down,
/// with `n` other containerds running.
fn containerd_down(snapshot: &Snapshot) -> Option<usize> {
    let unanswered = snapshot
        .containerd
        .as_ref()
        .is_some_and(|view| ApiCall::first_unanswered(&view.calls).is_some());
    let other = |pid: i32| {
        snapshot
            .paths
            .other_containerds
            .iter()
            .any(|o| o.pid == pid)
    };
    let running: Vec<i32> = snapshot
        .processes
        .values()
        .filter(|p| p.comm == "containerd" && p.is_running())
        .map(|p| p.pid)
        .collect();
    (unanswered
        && snapshot.paths.process.is_none()
        && snapshot.processes_read()
        && snapshot.unread_pids.is_empty()
        && running.iter().all(|&pid| other(pid)))
    .then_some(running.len())
}

/// The cause for an exit while no containerd runs for the socket, naming
/// the others that run, if any.
fn containerd_down_cause(others: usize) -> String {
    let which = match others {
        0 => "on this node".to_string(),
        1 => "for this socket (1 other containerd runs, not serving it)".to_string(),
        n => format!("for this socket ({n} other containerds run, none serving it)"),
    };
    format!("No containerd is running {which}. {CONTAINERD_DOWN_CAUSE}")
}

/// An exit while containerd is down, as measured on each line (a container
/// killed while containerd was stopped for 18 s): its shims live on, but
/// nothing handles their exit events, and a shim drops an exit it could not
/// send after 5 tries (about 15 s).
const CONTAINERD_DOWN_CAUSE: &str = "CRI runs inside containerd and records an exit only when \
    containerd handles the shim's exit event; while containerd is down nothing does, so CRI still \
    says RUNNING (a shim drops an exit it could not send after about 15 s).";

const CONTAINERD_DOWN_REMEDY: &str = "Start containerd (its shims and containers keep \
    running). On start CRI reloads each container from its shim: 1.6 records this exit with its \
    real code and time (nodectl late-exit shows how late); 1.7 and later find no process in the \
    task and record the container EXITED with exit code 255, reason Unknown, the real code and \
    time lost. Either way kubelet then moves the pod on.";

/// The slow delete, seen: a shim thread in `umount2`.
const UMOUNT2_CAUSE: &str = "The shim is blocked in umount2 unmounting the container's overlay \
    rootfs (slow under disk I/O pressure). CRI records an exit only after task.Delete succeeds, \
    and that delete timed out (10 s), so CRI still says RUNNING.";

/// The slow delete, not seen now: no known bug of the node's version loses
/// exits, and the likeliest cause is a delete that timed out earlier.
const SLOW_DELETE_CAUSE: &str = "CRI records an exit only after task.Delete succeeds; the \
    delete failed or timed out (10 s), typically because the shim's unmount of the overlay \
    rootfs was slow under disk I/O pressure, and no retry has succeeded yet.";

const SLOW_DELETE_REMEDY: &str = "The pod is wedged until CRI records the exit: an init \
    container never completes, a restart never happens. Relieve the disk I/O pressure so the \
    shim's unmount finishes; containerd retries the exit and the pod moves on. If it does not \
    within minutes, restarting containerd makes CRI reload the task state (running containers \
    are not stopped). Watch for leaked shims afterwards (nodectl leaked-shims).";

/// containerd#10589's story, for a zombie whose shim is in no `umount2` on
/// a version that has the bug: the exit is lost, not late.
fn lost_exit_story(snapshot: &Snapshot, advisory: &Applied) -> (String, String) {
    // As the advisory applies, the version parses (`v1.7.21` says 1.7.21).
    let version = snapshot
        .containerd_version
        .version
        .as_deref()
        .and_then(Version::parse);
    let named = version.map_or_else(|| "?".to_string(), |v| v.to_string());
    let cause = format!(
        "containerd {named} has {id}: the runc shim lost this container's exit. The init \
         exited while an exec (a probe's ExecSync) was starting; the shim held the exit back for \
         that exec to publish, and it never did. No retry will come: CRI keeps the container \
         RUNNING, every StopContainer fails (\"wait container: context deadline exceeded\", \
         \"context canceled\" under kubelet), a pod being deleted stays Terminating, and probes \
         fail with \"cannot exec in a stopped container\".",
        id = advisory.id,
    );
    let upgrade = match advisory.fix {
        Some(fix) => format!("Upgrade containerd to {fix} or later"),
        None => "Upgrade containerd to a release with the fix".to_string(),
    };
    // 1.7's start-up drops a task whose shim lists no process (taken for a
    // shim whose task was never created, containerd#6860); 1.6's keeps every
    // task its shim answers for.
    let restart_drops_the_task = version.is_some_and(|v| Some(v) >= Version::parse("1.7.0"));
    let clear = if restart_drops_the_task {
        "To clear this container: restart containerd (running containers keep running); on \
         start it finds no process left in the task, drops it, and CRI records the container \
         EXITED (exit code 255, reason Unknown), so kubelet's next StopPodSandbox goes through. \
         The pod's shim then outlives the pod (it still holds the container): end it with \
         nodectl leaked-shims --kill."
    } else {
        "Restarting containerd does not clear this container on 1.6: it keeps the task, which \
         the shim says runs. Ending the pod's shim does: kill -9 its shim_pid (check with nodectl \
         shims that the pid still serves this pod); containerd cleans up after the dead shim and \
         records the exit. Every container of the pod ends with it."
    };
    let remedy =
        format!("{upgrade} (the shim there refuses execs once the init has exited). {clear}");
    (cause, remedy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inert::SHOWN_CAP;
    use crate::model::fixtures::*;
    use crate::model::{
        Api, ContainerdVersion, ContainerdView, CriApiState, Gap, Method, OtherContainerd, Source,
        VersionSource,
    };

    fn zombie_ids(snapshot: &Snapshot) -> Vec<String> {
        check(snapshot).into_iter().map(|f| f.id).collect()
    }

    #[test]
    fn running_container_with_live_process_is_fine() {
        let mut s = snapshot();
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        s.processes
            .insert(100, process(100, 'S', NOW - 60 * SEC - SEC / 2));
        assert!(check(&s).is_empty());
    }

    #[test]
    fn running_container_without_process_is_a_zombie_with_names_and_shim() {
        let mut s = snapshot();
        let sandbox = id('s');
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        s.bundles
            .insert(id('a'), bundle(&id('a'), &sandbox, "init-proxy"));
        s.shims
            .push(shim(42, &sandbox, ADDRESS, &["futex", "umount2"]));

        let findings = check(&s);
        assert_eq!(findings.len(), 1);
        let f = &findings[0];
        assert_eq!(f.kind, Kind::Zombie);
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(f.id, id('a'));
        assert!(f.summary.contains("shop/web-0/init-proxy"), "{}", f.summary);
        assert_eq!(f.evidence["container_id"], id('a'));
        assert_eq!(f.evidence["pod_name"], "web-0");
        assert_eq!(f.evidence["container_name"], "init-proxy");
        assert_eq!(f.evidence["pid"], 100);
        assert_eq!(f.evidence["shim_pid"], 42);
        assert_eq!(f.evidence["shim_in_umount2"], true);
        assert_eq!(
            f.evidence["shim_threads_in_umount2"],
            serde_json::json!([43])
        );
        assert_eq!(f.evidence["running_for_seconds"], 60.0);
        assert!(f.cause.contains("umount2"));
    }

    #[test]
    fn a_zombie_names_its_shims_blocked_threads_and_whether_its_rootfs_is_mounted() {
        let mut s = snapshot();
        let sandbox = id('s');
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        s.bundles.insert(id('a'), bundle(&id('a'), &sandbox, "app"));
        let mut blocked = shim(42, &sandbox, ADDRESS, &["futex", "umount2"]);
        blocked.threads[1].state = Some('D');
        blocked.threads[1].wchan = Some(format!("rwsem_down_write\u{1b}[2J{}", "x".repeat(999)));
        // A thread in D elsewhere (a sync), and ten more: eight are listed.
        for n in 0..11 {
            blocked.threads.push(ThreadSample {
                tid: 50 + n,
                state: Some('D'),
                syscall: Some("syncfs".into()),
                wchan: None,
            });
        }
        s.shims.push(blocked);
        let rootfs =
            |id: &str| format!("/run/containerd/io.containerd.runtime.v2.task/k8s.io/{id}/rootfs");
        s.mounts.push(crate::model::Mount {
            mount_point: rootfs(&id('a')).into(),
            ..Default::default()
        });

        // The mount table not read: whether it is mounted is not known.
        let f = &check(&s)[0];
        assert_eq!(f.evidence["rootfs_mounted"], Value::Null);
        let threads = f.evidence["shim_threads_blocked"].as_array().unwrap();
        assert_eq!(threads.len(), 8);
        assert_eq!(f.evidence["shim_threads_blocked_count"], 12);
        assert_eq!(threads[0]["tid"], 43);
        assert_eq!(threads[0]["state"], "D");
        assert_eq!(threads[0]["syscall"], "umount2");
        let wchan = threads[0]["wchan"].as_str().unwrap();
        assert!(
            wchan.starts_with("rwsem_down_write?[2J") && wchan.len() == 64,
            "{wchan}"
        );
        assert_eq!(threads[1]["syscall"], "syncfs");
        assert_eq!(
            f.evidence["shim_threads_in_umount2"],
            serde_json::json!([43])
        );

        s.mounts_read = true;
        assert_eq!(check(&s)[0].evidence["rootfs_mounted"], true);
        s.mounts.clear();
        assert_eq!(check(&s)[0].evidence["rootfs_mounted"], false);
    }

    /// A zombie of `version` whose pod's shim is sampled in `syscalls`.
    fn zombie_on(version: Option<&str>, syscalls: &[&str]) -> Finding {
        zombie_on_a(version, syscalls, |_| {})
    }

    /// [`zombie_on`]'s node, changed by `node` first.
    fn zombie_on_a(
        version: Option<&str>,
        syscalls: &[&str],
        node: impl FnOnce(&mut Snapshot),
    ) -> Finding {
        let mut s = snapshot();
        node(&mut s);
        s.containerd_version = ContainerdVersion {
            version: version.map(str::to_string),
            source: VersionSource::Api,
        };
        let sandbox = id('s');
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        s.bundles.insert(id('a'), bundle(&id('a'), &sandbox, "app"));
        s.shims.push(shim(42, &sandbox, ADDRESS, syscalls));
        let mut findings = check(&s);
        assert_eq!(findings.len(), 1);
        findings.remove(0)
    }

    fn says(text: &str, words: &[&str]) {
        // `-o wide` shows at most SHOWN_CAP bytes of a string, whole.
        assert!(text.len() <= SHOWN_CAP, "{} bytes: {text}", text.len());
        for word in words {
            assert!(text.contains(word), "{word:?} in: {text}");
        }
    }

    fn never_says(text: &str, words: &[&str]) {
        for word in words {
            assert!(!text.contains(word), "{word:?} in: {text}");
        }
    }

    #[test]
    fn a_shim_in_umount2_tells_the_slow_unmount_even_where_the_exit_can_be_lost() {
        // 1.7.21 has containerd#10589, but the evidence shows a delete held
        // up in umount2: that exit is late, and a retry records it.
        let f = zombie_on(Some("v1.7.21"), &["futex", "umount2"]);
        assert_eq!(f.evidence["shim_in_umount2"], true);
        says(&f.cause, &["blocked in umount2", "task.Delete"]);
        says(
            &f.remedy,
            &["Relieve the disk I/O pressure", "retries the exit"],
        );
        never_says(&f.cause, &["containerd#10589", "No retry"]);
    }

    #[test]
    fn without_umount2_on_a_release_with_10589_the_exit_is_lost_and_a_restart_clears_it() {
        let f = zombie_on(Some("v1.7.21"), &["futex", "epoll_pwait"]);
        assert_eq!(f.evidence["shim_in_umount2"], false);
        says(
            &f.cause,
            &[
                "containerd 1.7.21 has containerd#10589",
                "while an exec (a probe's ExecSync) was starting",
                "No retry will come",
                "every StopContainer fails (\"wait container: context deadline exceeded\", \
                 \"context canceled\" under kubelet)",
                "stays Terminating",
                "\"cannot exec in a stopped container\"",
            ],
        );
        says(
            &f.remedy,
            &[
                "Upgrade containerd to 1.7.22 or later",
                "restart containerd (running containers keep running)",
                "EXITED (exit code 255, reason Unknown)",
                "StopPodSandbox goes through",
                "nodectl leaked-shims --kill",
            ],
        );
        for text in [&f.cause, &f.remedy] {
            never_says(text, &["I/O pressure", "umount2", "retries", "kill -9"]);
        }
    }

    #[test]
    fn on_1_6_the_lost_exit_is_cleared_by_ending_the_shim_not_by_a_restart() {
        let f = zombie_on(Some("1.6.30~ds1-1"), &["futex"]);
        says(&f.cause, &["containerd 1.6.30 has containerd#10589"]);
        says(
            &f.remedy,
            &[
                "Upgrade containerd to 1.6.36 or later",
                "Restarting containerd does not clear this container on 1.6",
                "kill -9 its shim_pid",
            ],
        );
    }

    #[test]
    fn without_umount2_or_the_bug_the_delete_timed_out_earlier() {
        // Fixed, before the bug, or unknown: no advisory to tell another
        // story, so the likeliest one, hedged.
        for version in [Some("1.7.22"), Some("1.6.20"), Some("2.0.6"), None] {
            let f = zombie_on(version, &["futex"]);
            says(
                &f.cause,
                &["typically because", "no retry has succeeded yet"],
            );
            never_says(&f.cause, &["containerd#10589"]);
            says(&f.remedy, &["Relieve the disk I/O pressure"]);
        }
    }

    #[test]
    fn with_containerd_down_the_zombie_says_so_and_to_start_it() {
        let refused = ApiCall {
            api: Api::Containerd,
            method: Method::Connect,
            target: None,
            latency_ms: 0.1,
            error: Some("connection refused".into()),
            timed_out: false,
        };
        let down = |s: &mut Snapshot| {
            s.containerd = Some(ContainerdView {
                calls: vec![refused.clone()],
                ..ContainerdView::default()
            });
        };
        // Down: its API refused, no process of it. Even with the shim in
        // umount2 and a version that loses exits, that is the story.
        for (version, syscalls) in [(Some("1.7.21"), &["futex"]), (None, &["umount2"])] {
            let f = zombie_on_a(version, syscalls, down);
            says(
                &f.cause,
                &["No containerd is running", "records an exit only"],
            );
            says(&f.remedy, &["Start containerd", "255, reason Unknown"]);
        }
        // Its API refused while a containerd runs (frozen, restarting):
        // the usual stories.
        let f = zombie_on_a(Some("1.7.22"), &["futex"], |s| {
            down(s);
            s.processes.insert(
                812,
                ProcessInfo {
                    comm: "containerd".to_string(),
                    ..process(812, 'S', NOW - 600 * SEC)
                },
            );
        });
        says(&f.cause, &["typically because"]);
        // Down while another containerd runs, found serving another socket
        // (docker's, a second runtime's): still down for this one.
        let f = zombie_on_a(Some("1.7.22"), &["futex"], |s| {
            down(s);
            s.processes.insert(
                813,
                ProcessInfo {
                    comm: "containerd".to_string(),
                    ..process(813, 'S', NOW - 600 * SEC)
                },
            );
            s.paths.other_containerds.push(OtherContainerd {
                pid: 813,
                exe: "/usr/bin/containerd".into(),
                reason: "it does not serve /run/containerd/containerd.sock".into(),
            });
        });
        says(
            &f.cause,
            &["No containerd is running for this socket (1 other containerd runs, not serving it)"],
        );
        // Its API answering: the same.
        let f = zombie_on_a(Some("1.7.22"), &["futex"], |_| {});
        says(&f.cause, &["typically because"]);
    }

    #[test]
    fn without_procfs_no_container_is_judged_dead() {
        let mut s = snapshot();
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        s.gaps
            .push(Gap::item(Source::Procfs, "/proc/7/task", "denied"));
        assert_eq!(
            zombie_ids(&s),
            vec![id('a')],
            "one unread item judges the rest"
        );
        s.gaps.push(procfs_unread());
        assert_eq!(zombie_ids(&s), Vec::<String>::new());
        assert!(dead_ids(&s).is_empty());
        let mut suspects = Suspects::default();
        super::suspects(&s, &mut suspects);
        assert!(suspects.is_empty());
    }

    #[test]
    fn a_zombie_is_confirmed_by_its_status_still_running_in_the_second_look_not_by_procfs() {
        let mut first = snapshot();
        first
            .cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        first
            .cri_containers
            .push(running(&id('b'), 200, NOW - 60 * SEC));
        assert_eq!(zombie_ids(&first), [id('a'), id('b')]);
        // The second look: `a`'s exit recorded meanwhile, `b` still RUNNING.
        // Its procfs is not what confirms: here it read none (the shims it
        // went back for did not answer).
        let mut second = first.clone();
        second.cri_containers[0] = exited(&id('a'), NOW, NOW);
        second.gaps.push(procfs_unread());
        let ids: Vec<String> = confirmed(&first, &second)
            .into_iter()
            .map(|f| f.id)
            .collect();
        assert_eq!(ids, [id('b')]);
        // A status file the second look could not read confirms nothing.
        second.cri_containers.remove(1);
        assert!(confirmed(&first, &second).is_empty());
    }

    #[test]
    fn an_exit_cri_s_handler_may_still_be_recording_is_no_zombie_yet() {
        let mut s = snapshot();
        for (c, pid) in [('a', 100), ('b', 101), ('c', 102)] {
            s.cri_containers.push(running(&id(c), pid, NOW - 60 * SEC));
        }
        let task = |c: char, status: TaskStatus, exited: i64| crate::model::TaskView {
            id: id(c),
            pid: 1,
            status,
            exited_at: exited,
        };
        let mut view = ContainerdView::default();
        view.namespaces
            .entry("k8s.io".to_string())
            .or_default()
            .tasks = Some(vec![
            // Stopped 9 s ago: CRI's handler has 10 s for its delete.
            task('a', TaskStatus::Stopped, NOW - 9 * SEC),
            // Stopped past the deadline: the handler gave up.
            task('b', TaskStatus::Stopped, NOW - 10 * SEC),
            // containerd does not say when: judged as before.
            task('c', TaskStatus::Unknown, NOW - SEC),
        ]);
        s.containerd = Some(view);
        assert_eq!(zombie_ids(&s), vec![id('b'), id('c')]);
        assert_eq!(dead_ids(&s), BTreeSet::from([id('b'), id('c')]));
    }

    #[test]
    fn a_dead_container_whose_task_containerd_deleted_waits_for_cri_s_deadline() {
        let mut s = snapshot();
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        // containerd not asked: nothing to wait for.
        assert!(!awaiting_record(&s));
        let mut view = ContainerdView::default();
        let tasks = &mut view
            .namespaces
            .entry("k8s.io".to_string())
            .or_default()
            .tasks;
        *tasks = Some(vec![crate::model::TaskView {
            id: id('a'),
            status: TaskStatus::Unknown,
            ..Default::default()
        }]);
        s.containerd = Some(view.clone());
        // Its task still listed: judged at once.
        assert!(!awaiting_record(&s));
        view.namespaces.get_mut("k8s.io").unwrap().tasks = Some(vec![]);
        s.containerd = Some(view);
        assert!(awaiting_record(&s));
        // Still a zombie once confirmed.
        assert_eq!(zombie_ids(&s), vec![id('a')]);
    }

    #[test]
    fn defunct_process_counts_as_dead() {
        let mut s = snapshot();
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        s.processes.insert(100, process(100, 'Z', NOW - 60 * SEC));
        let findings = check(&s);
        assert_eq!(findings.len(), 1);
        assert!(findings[0].evidence["process"]
            .as_str()
            .unwrap()
            .contains("defunct"));
    }

    #[test]
    fn reused_pid_counts_as_dead() {
        let mut s = snapshot();
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 600 * SEC));
        // Same pid, but started long after the container did.
        s.processes.insert(100, process(100, 'S', NOW - 5 * SEC));
        let findings = check(&s);
        assert_eq!(findings.len(), 1);
        assert!(findings[0].evidence["process"]
            .as_str()
            .unwrap()
            .contains("another process"));
    }

    #[test]
    fn process_started_before_the_container_was_created_is_not_it() {
        let mut s = snapshot();
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        s.processes.insert(100, process(100, 'S', NOW - 3600 * SEC));
        assert_eq!(zombie_ids(&s), vec![id('a')]);
    }

    #[test]
    fn the_start_time_window_is_creation_to_start_with_the_slack_included() {
        let started = NOW - 60 * SEC;
        // `running` has the container created one second before it started.
        let earliest = started - SEC - START_TIME_SLACK;
        let latest = started + START_TIME_SLACK;
        for (process_started, zombie) in [
            (earliest - 1, true),
            (earliest, false),
            (latest, false),
            (latest + 1, true),
        ] {
            let mut s = snapshot();
            s.cri_containers.push(running(&id('a'), 100, started));
            s.processes.insert(100, process(100, 'S', process_started));
            assert_eq!(
                !zombie_ids(&s).is_empty(),
                zombie,
                "a process started {} ns after the container",
                process_started - started
            );
        }
    }

    #[test]
    fn exited_created_and_pidless_containers_are_not_zombies() {
        let mut s = snapshot();
        s.cri_containers
            .push(exited(&id('a'), NOW - 60 * SEC, NOW - 60 * SEC));
        let mut created = running(&id('b'), 0, 0);
        created.status.created_at = NOW - SEC;
        s.cri_containers.push(created);
        s.cri_containers.push(running(&id('c'), 0, NOW - 10 * SEC));
        assert!(zombie_ids(&s).is_empty());
    }

    #[test]
    fn shim_of_another_containerd_is_not_blamed() {
        let mut s = snapshot();
        let sandbox = id('s');
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        s.bundles.insert(id('a'), bundle(&id('a'), &sandbox, "app"));
        s.shims.push(shim(
            42,
            &sandbox,
            "/run/other/containerd.sock",
            &["umount2"],
        ));
        let f = &check(&s)[0];
        assert_eq!(f.evidence["shim_pid"], Value::Null);
        assert_eq!(f.evidence["shim_in_umount2"], false);
    }

    /// A container CRI's ContainerStatus gave (its store unread): no file.
    fn said(id: &str, pid: i64, started_at: i64) -> CriContainer {
        CriContainer {
            status_path: std::path::PathBuf::new(),
            status_written_at: 0,
            ..running(id, pid, started_at)
        }
    }

    #[test]
    fn where_cri_s_store_is_unread_its_own_word_tells_a_zombie_and_confirms_it() {
        let sandbox = id('s');
        let mut first = snapshot();
        // CRI lists `a` and `b` RUNNING in the sandbox `s`, whose shim is
        // in umount2; its ContainerStatus gives their pids, and `b`'s runs.
        first.cri = Some(crate::model::CriView {
            containers: Some(vec![
                cri_container(&id('a'), &sandbox, "app", CriApiState::ContainerRunning),
                cri_container(&id('b'), &sandbox, "side", CriApiState::ContainerRunning),
            ]),
            said_running: Some(vec![
                said(&id('a'), 100, NOW - 60 * SEC),
                said(&id('b'), 200, NOW - 60 * SEC),
            ]),
            ..Default::default()
        });
        first
            .processes
            .insert(200, process(200, 'S', NOW - 60 * SEC));
        first
            .shims
            .push(shim(42, &sandbox, ADDRESS, &["futex", "umount2"]));
        let f = &check(&first)[..];
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].id, id('a'));
        assert_eq!(f[0].evidence["recorded_by"], "cri_api");
        assert_eq!(f[0].evidence["status_file"], Value::Null);
        // Its shim, found by the sandbox CRI lists it in (no bundle read).
        assert_eq!(f[0].evidence["shim_pid"], 42);
        assert_eq!(f[0].evidence["shim_in_umount2"], true);
        let mut suspects = Suspects::default();
        super::suspects(&first, &mut suspects);
        assert_eq!(suspects.containers, [id('a')].into());

        // The second look asked CRI again: still RUNNING, confirmed; its
        // exit recorded meanwhile, or not answered, not.
        let mut second = snapshot();
        let again = |said_running: Vec<CriContainer>| crate::model::CriView {
            said_running: Some(said_running),
            ..Default::default()
        };
        second.cri = Some(again(vec![said(&id('a'), 100, NOW - 60 * SEC)]));
        assert_eq!(confirmed(&first, &second).len(), 1);
        let mut recorded = said(&id('a'), 100, NOW - 60 * SEC);
        recorded.status.finished_at = NOW;
        second.cri = Some(again(vec![recorded]));
        assert!(confirmed(&first, &second).is_empty());
        second.cri = Some(again(Vec::new()));
        assert!(confirmed(&first, &second).is_empty());

        // A status file's reading says which file it was.
        let mut read = snapshot();
        read.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        let f = &check(&read)[0];
        assert_eq!(f.evidence["recorded_by"], "status_file");
        assert!(f.evidence["status_file"]
            .as_str()
            .unwrap()
            .ends_with("/status"));
    }
}
