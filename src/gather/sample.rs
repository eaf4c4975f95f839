//! What `watch` reads between its looks at the whole node, each naming
//! the few files and processes it needs: on a node of 1,000 containers a
//! look costs about half a second of CPU, these a few files.
//!
//! - The flight recorder's sample ([`sample`]) of the last look's zombies:
//!   each one's status file (a change calls for a look), its shim's
//!   threads, whether its rootfs is still mounted, and the node's IO
//!   pressure and dirty pages.
//! - The reading of exits ([`read_exits`]): the status files of containers
//!   whose init exit was heard, and the processes of those CRI still says
//!   run: a look only when one is a zombie.
//!
//! Their gaps say why they could not tell; they are no findings (a look
//! makes those).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

use super::{now_nanos, GatherOptions, DEADLINE_GRACE};
use crate::checks::zombie;
use crate::model::{
    CriContainer, CriState, ExitReading, ExitsToRead, Gap, Observation, Paths, Sample, SampleBasis,
    Shim, Snapshot, Source, ThreadSample,
};
use crate::sources::{cri_store, mountinfo, node, proc_scan, SourceThread};

/// The blocked threads an observation keeps, as the zombie check's
/// evidence lists them.
const BLOCKED_THREADS_KEPT: usize = 8;

/// One sample of `basis`'s zombies, within the look's own deadline
/// (`--timeout` and [`DEADLINE_GRACE`]): a source that does not answer in
/// time is a gap, and the sample goes out without it.
pub fn sample(paths: &Paths, options: &GatherOptions, basis: &SampleBasis) -> Sample {
    let started = Instant::now();
    let deadline = started + options.timeout + DEADLINE_GRACE;
    let mut gaps = Vec::new();
    let dir = paths.cri_containers_dir();
    let ids: BTreeSet<String> = basis
        .zombies
        .iter()
        .map(|z| z.container.id.clone())
        .collect();
    let earlier: Vec<_> = basis.zombies.iter().map(|z| z.container.clone()).collect();
    let listed = basis.cri_store_listed;
    // Each file unchanged since the look is not read again (its version
    // compared), and what is read is held to the directory the look listed.
    let records = SourceThread::spawn(cri_store::SOURCE, &dir.clone(), move |gaps| {
        cri_store::reread(&dir, listed, &ids, earlier, gaps)
    });
    let shim_pids: BTreeSet<i32> = basis
        .zombies
        .iter()
        .filter_map(|z| z.shim)
        .map(|k| k.pid)
        .collect();
    let root = options.proc_root.clone();
    let processes = SourceThread::spawn(Source::Procfs, &root.clone(), move |gaps| {
        let scan = proc_scan::rescan(&root, &shim_pids, true, gaps);
        let context = node::read(&root, gaps);
        (scan, context)
    });
    // The table the look read (the daemon's own, unless `--mountinfo`),
    // below the state directory as the look spells it.
    let (table, state) = (options.mount_table(paths), paths.state.path.clone());
    let mounts = SourceThread::spawn(Source::Mountinfo, &table.clone(), move |gaps| {
        mountinfo::points_below(&table, &[state.as_path()], gaps)
    });
    let records = records.wait(deadline, started, &mut gaps);
    let procfs = processes.wait(deadline, started, &mut gaps);
    let mounts = mounts.wait(deadline, started, &mut gaps);
    // The store read whole: a record missing from it is gone. Unread (not
    // in time, or a file that could not be read), a missing record says
    // nothing: on a stalled disk every sample would otherwise call a look,
    // one every five seconds, each reading the whole node.
    let store_read = records.is_some() && !gaps.iter().any(|g| g.source == cri_store::SOURCE);
    let records: HashMap<&str, _> = records
        .iter()
        .flatten()
        .map(|c| (c.id.as_str(), c))
        .collect();
    let mounted: Option<HashSet<PathBuf>> = mounts.map(|points| points.into_iter().collect());
    let (scan, context) = match procfs {
        Some((scan, context)) => (Some(scan), Some(context)),
        None => (None, None),
    };
    let mut taken = Sample {
        taken_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        context,
        ..Sample::default()
    };
    for zombie in &basis.zombies {
        let id = &zombie.container.id;
        // Changed or gone: a look tells what became of it. Unread: the
        // rest is still sampled, and the paced looks tell.
        let changed = match records.get(id.as_str()) {
            Some(record) => *record != &zombie.container,
            None => store_read,
        };
        if changed {
            taken.changed.push(id.clone());
            continue;
        }
        // The look's shim only while it is the same process.
        let shim: Option<&Shim> = zombie.shim.and_then(|key| {
            let scan = scan.as_ref()?;
            let process = scan.processes.get(&key.pid)?;
            key.is(process)
                .then(|| scan.shims.iter().find(|s| s.pid == key.pid))
                .flatten()
        });
        let blocked: Vec<ThreadSample> = shim
            .map(|s| {
                s.threads_blocked()
                    .take(BLOCKED_THREADS_KEPT)
                    .map(ThreadSample::bounded)
                    .collect()
            })
            .unwrap_or_default();
        taken.observations.push(Observation {
            container_id: id.clone(),
            shim_pid: shim.map(|s| i64::from(s.pid)),
            in_umount2: shim.is_some_and(|s| s.threads_in_umount2().next().is_some()),
            blocked,
            rootfs_mounted: mounted.as_ref().map(|m| m.contains(&zombie.rootfs)),
        });
    }
    taken.gaps = gaps;
    taken
}

/// The status files of `exits` (containers whose init exit was heard, or
/// the whole store), and the processes of those CRI still says run: which
/// are dead (zombies, for a look to tell), judged as the zombie check
/// judges. A container with no status file (a sandbox, a container removed
/// since, an id no store holds: a forged event) is no zombie. Within the
/// look's deadline.
pub fn read_exits(paths: &Paths, options: &GatherOptions, exits: &ExitsToRead) -> ExitReading {
    let started = Instant::now();
    let deadline = started + options.timeout + DEADLINE_GRACE;
    let mut gaps = Vec::new();
    let dir = paths.cri_containers_dir();
    let (these, passed_over) = match exits {
        ExitsToRead::These(ids) => (Some(ids.iter().cloned().collect::<BTreeSet<_>>()), None),
        ExitsToRead::All { exited } => (None, Some(exited.clone())),
    };
    let records = SourceThread::spawn(cri_store::SOURCE, &dir.clone(), move |gaps| {
        // One listing of the store, not a lookup per id: a daemon forging
        // thousands of exits of ids no store holds costs a listing, not
        // thousands of failed opens.
        let wanted = |name: &String| these.as_ref().is_none_or(|ids| ids.contains(name));
        let (mut listed, mut still_exited) = (BTreeSet::new(), BTreeSet::new());
        match std::fs::read_dir(&dir) {
            Ok(entries) => {
                for name in entries
                    .flatten()
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(wanted)
                {
                    match passed_over.as_ref().is_some_and(|ids| ids.contains(&name)) {
                        true => still_exited.insert(name),
                        false => listed.insert(name),
                    };
                }
            }
            Err(err) => {
                gaps.push(Gap::source(cri_store::SOURCE, &dir, err));
                return (Vec::new(), still_exited);
            }
        };
        if listed.is_empty() {
            return (Vec::new(), still_exited);
        }
        let records = cri_store::reread(&dir, None, &listed, Vec::new(), gaps);
        (records, still_exited)
    })
    .wait(deadline, started, &mut gaps);
    let unsure = |why: &str, gaps: Vec<Gap>| ExitReading {
        unsure: Some(why.to_string()),
        gaps,
        ..ExitReading::default()
    };
    let Some((records, mut exited)) = records else {
        return unsure("the status files were not read in time", gaps);
    };
    // A status file of an exit heard that could not be read: a look
    // tells. Of the whole store, only the store itself unread does: a
    // corrupt file of another container is the look's gap already, and a
    // look would read it no better (on a node with one, every reading of
    // the store called a look).
    let whole = matches!(exits, ExitsToRead::All { .. });
    if gaps
        .iter()
        .any(|g| g.source == cri_store::SOURCE && (g.source_unavailable || !whole))
    {
        return unsure("a status file could not be read", gaps);
    }
    exited.extend(
        records
            .iter()
            .filter(|c| c.status.state() == CriState::Exited)
            .map(|c| c.id.clone()),
    );
    let exited = whole.then_some(exited);
    let running: Vec<CriContainer> = records
        .into_iter()
        .filter(|c| c.status.state() == CriState::Running)
        .collect();
    if running.is_empty() {
        return ExitReading {
            exited,
            gaps,
            ..ExitReading::default()
        };
    }
    let pids: BTreeSet<i32> = running
        .iter()
        .filter_map(|c| i32::try_from(c.status.pid).ok())
        .collect();
    let root = options.proc_root.clone();
    let scan = SourceThread::spawn(Source::Procfs, &root.clone(), move |gaps| {
        proc_scan::rescan(&root, &pids, false, gaps)
    })
    .wait(deadline, started, &mut gaps);
    let Some(scan) = scan else {
        return unsure("their processes were not read in time", gaps);
    };
    let looked = Snapshot {
        cri_containers: running,
        processes: scan.processes,
        unread_pids: scan.unread_pids,
        gaps,
        ..Snapshot::empty(now_nanos(), paths.clone(), options.namespace.clone())
    };
    let dead = zombie::dead_ids(&looked).into_iter().collect();
    // A process listed but unread may be dead or alive: a look tells.
    let unsure = (!looked.unread_pids.is_empty() || !looked.processes_read())
        .then(|| "a process could not be read".to_string());
    ExitReading {
        dead,
        exited,
        unsure,
        gaps: looked.gaps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CriStatus, ProcessKey, ZombieTarget};
    use std::fs;
    use std::path::Path;

    const ID: &str = "z1";
    /// The fake procfs's boot time, and a process's start (777 ticks in).
    const BOOT: i64 = 1_700_000_000_000_000_000;
    const STARTED: i64 = BOOT + 7_770_000_000;

    fn stat_line(pid: i32, comm: &str) -> String {
        format!(
            "{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0 \
             18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
        )
    }

    /// A node: procfs with the shim 40 (a thread of it in `umount2`) and
    /// the process 50, CRI's store, the mount table with the zombie's
    /// rootfs mounted.
    fn node(dir: &Path) -> (Paths, GatherOptions) {
        let proc_root = dir.join("proc");
        fs::create_dir_all(&proc_root).unwrap();
        fs::write(proc_root.join("stat"), "btime 1700000000\n").unwrap();
        fs::write(proc_root.join("meminfo"), "Dirty: 8 kB\nWriteback: 0 kB\n").unwrap();
        let shim = proc_root.join("40");
        fs::create_dir_all(shim.join("task/41")).unwrap();
        fs::create_dir_all(shim.join("task/40")).unwrap();
        fs::write(shim.join("stat"), stat_line(40, "containerd-shim")).unwrap();
        fs::write(
            shim.join("cmdline"),
            "/usr/bin/containerd-shim-runc-v2\0-namespace\0k8s.io\0-id\0z1\0",
        )
        .unwrap();
        #[cfg(target_arch = "x86_64")]
        let (umount2, futex) = ("166", "202");
        #[cfg(not(target_arch = "x86_64"))]
        let (umount2, futex) = ("39", "98");
        fs::write(shim.join("task/40/syscall"), format!("{futex} 0x1 0x0")).unwrap();
        fs::write(
            shim.join("task/41/syscall"),
            format!("{umount2} 0x1 0x0 0x0"),
        )
        .unwrap();
        fs::write(
            shim.join("task/41/stat"),
            stat_line(41, "containerd-shim").replace(" S ", " D "),
        )
        .unwrap();
        fs::create_dir_all(proc_root.join("50")).unwrap();
        fs::write(proc_root.join("50/stat"), stat_line(50, "sleep")).unwrap();
        let mut paths = crate::model::fixtures::snapshot().paths;
        paths.root.path = dir.join("root");
        paths.state.path = dir.join("state");
        paths.process = None;
        let rootfs = paths.bundles_dir("k8s.io").join(ID).join("rootfs");
        fs::create_dir_all(&rootfs).unwrap();
        fs::write(
            dir.join("mountinfo"),
            format!("90 1 0:50 / {} rw - overlay overlay rw\n", rootfs.display()),
        )
        .unwrap();
        let mut options = crate::gather::tests::options("k8s.io", true);
        options.proc_root = proc_root;
        options.mountinfo = Some(dir.join("mountinfo"));
        (paths, options)
    }

    /// Writes `id`'s status file: running as `pid` since `STARTED`, or
    /// exited.
    fn status(paths: &Paths, id: &str, pid: i64, finished: bool) {
        let dir = paths.cri_containers_dir().join(id);
        fs::create_dir_all(&dir).unwrap();
        let status = CriStatus {
            version: "v1".into(),
            pid,
            created_at: STARTED - 1_000_000_000,
            started_at: STARTED,
            finished_at: if finished { STARTED + 5_000_000_000 } else { 0 },
            ..CriStatus::default()
        };
        fs::write(dir.join("status"), serde_json::to_vec(&status).unwrap()).unwrap();
    }

    /// The zombie as a look saw it: its status file read, its shim 40.
    fn basis(paths: &Paths, shim_started_at: i64) -> SampleBasis {
        let (containers, listed) = cri_store::read(&paths.cri_containers_dir(), &mut Vec::new());
        let container = containers.into_iter().find(|c| c.id == ID).unwrap();
        SampleBasis {
            cri_store_listed: listed,
            zombies: vec![ZombieTarget {
                rootfs: paths.bundles_dir("k8s.io").join(ID).join("rootfs"),
                shim: Some(ProcessKey {
                    pid: 40,
                    started_at: shim_started_at,
                }),
                container,
            }],
        }
    }

    #[test]
    fn a_sample_reads_the_zombies_shim_rootfs_and_status_file_and_calls_a_look_when_it_changed() {
        let dir = tempfile::tempdir().unwrap();
        let (paths, options) = node(dir.path());
        status(&paths, ID, 99, false);
        let basis = basis(&paths, STARTED);
        let taken = sample(&paths, &options, &basis);
        assert!(taken.changed.is_empty(), "{taken:?}");
        let seen = &taken.observations[0];
        assert_eq!(seen.shim_pid, Some(40), "{taken:?}");
        assert!(seen.in_umount2, "{taken:?}");
        assert_eq!(seen.blocked.len(), 1, "{taken:?}");
        assert_eq!(seen.blocked[0].state, Some('D'));
        assert_eq!(seen.rootfs_mounted, Some(true));
        assert_eq!(taken.context.as_ref().unwrap().dirty_bytes, Some(8 << 10));
        // Another process at pid 40 (started elsewhen) is not its shim.
        let taken = sample(&paths, &options, &self::basis(&paths, BOOT));
        assert_eq!(taken.observations[0].shim_pid, None, "{taken:?}");
        assert!(!taken.observations[0].in_umount2);
        // CRI recorded the exit: no observation, a look is called for.
        status(&paths, ID, 99, true);
        let taken = sample(&paths, &options, &basis);
        assert_eq!(taken.changed, [ID], "{taken:?}");
        assert!(taken.observations.is_empty());
        // Removed: the same.
        fs::remove_dir_all(paths.cri_containers_dir().join(ID)).unwrap();
        assert_eq!(sample(&paths, &options, &basis).changed, [ID]);
    }

    #[test]
    fn a_status_file_that_cannot_be_read_calls_no_look_and_the_rest_is_sampled() {
        let dir = tempfile::tempdir().unwrap();
        let (paths, options) = node(dir.path());
        status(&paths, ID, 99, false);
        let basis = basis(&paths, STARTED);
        // Not a file CRI wrote (as a status read that failed): unread, not
        // changed; a stalled store must not call a look every sample.
        let status_file = paths.cri_containers_dir().join(ID).join("status");
        fs::remove_file(&status_file).unwrap();
        fs::create_dir(&status_file).unwrap();
        let taken = sample(&paths, &options, &basis);
        assert!(taken.changed.is_empty(), "{taken:?}");
        assert_eq!(taken.observations.len(), 1, "{taken:?}");
        assert!(taken.observations[0].in_umount2, "{taken:?}");
        assert!(
            taken.gaps.iter().any(|g| g.source == cri_store::SOURCE),
            "{taken:?}"
        );
    }

    #[test]
    fn an_exit_is_a_zombie_to_look_at_only_when_cri_still_says_it_runs_and_its_process_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let (paths, options) = node(dir.path());
        // Dead: its pid is no process. Alive: 50, started when recorded.
        // Recorded: exited. Forged: no status file at all.
        status(&paths, "dead", 99, false);
        status(&paths, "alive", 50, false);
        status(&paths, "recorded", 0, true);
        let ids = ["dead", "alive", "recorded", "forged"].map(String::from);
        let ids = ids.to_vec();
        let reading = read_exits(&paths, &options, &ExitsToRead::These(ids.clone()));
        assert_eq!(reading.dead, ["dead"], "{reading:?}");
        // The whole store: the same.
        let reading = read_exits(
            &paths,
            &options,
            &ExitsToRead::All {
                exited: Default::default(),
            },
        );
        assert_eq!(reading.dead, ["dead"], "{reading:?}");
        // A corrupt status file: unsure when its exit was heard; in the
        // whole store, a gap, and the rest is judged.
        let corrupt = paths.cri_containers_dir().join("corrupt");
        fs::create_dir_all(&corrupt).unwrap();
        fs::write(corrupt.join("status"), "{not json").unwrap();
        let reading = read_exits(
            &paths,
            &options,
            &ExitsToRead::These(vec!["corrupt".into()]),
        );
        assert!(reading.unsure.is_some(), "{reading:?}");
        let reading = read_exits(
            &paths,
            &options,
            &ExitsToRead::All {
                exited: Default::default(),
            },
        );
        assert_eq!(
            (reading.dead.as_slice(), &reading.unsure),
            (["dead".to_string()].as_slice(), &None),
            "{reading:?}"
        );
        assert!(!reading.gaps.is_empty(), "{reading:?}");
        fs::remove_dir_all(&corrupt).unwrap();
        // What it read as exited, the next reading of the store passes
        // over (an exited container never runs again), and still names.
        let exited = reading.exited.clone().unwrap();
        assert_eq!(exited, BTreeSet::from(["recorded".to_string()]));
        status(&paths, "recorded", 98, false);
        let all = ExitsToRead::All {
            exited: std::sync::Arc::new(exited.clone()),
        };
        let reading = read_exits(&paths, &options, &all);
        assert_eq!(reading.dead, ["dead"], "{reading:?}");
        assert_eq!(reading.exited, Some(exited));
        status(&paths, "recorded", 0, true);
        assert_eq!(reading.unsure, None, "{reading:?}");
        // Only ids no store holds (a daemon forging exits): nothing to read.
        let forged: Vec<String> = (0..100).map(|n| format!("forged-{n}")).collect();
        let reading = read_exits(&paths, &options, &ExitsToRead::These(forged));
        assert!(
            reading.dead.is_empty() && reading.unsure.is_none(),
            "{reading:?}"
        );
        // CRI's store unreadable: unsure, a look tells.
        let mut elsewhere = paths.clone();
        elsewhere.root.path = dir.path().join("nowhere");
        let reading = read_exits(&elsewhere, &options, &ExitsToRead::These(ids));
        assert!(reading.unsure.is_some(), "{reading:?}");
    }
}
