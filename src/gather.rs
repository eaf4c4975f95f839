//! Gather: runs every source once and assembles the snapshot.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use crate::paths::Paths;
use crate::snapshot::{Gap, Snapshot, Suspects};
use crate::sources::containerd_api::ContainerdView;
use crate::sources::cri_api::CriView;
use crate::sources::{
    bundles, containerd_api, containerd_proc, cri_api, cri_store, mountinfo, node, procfs,
    shim_proof,
};

/// How long an API may keep a person waiting before nodectl says so.
const PROGRESS_AFTER: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct GatherOptions {
    pub namespace: String,
    /// Normally `/proc`; another root reads a captured or synthetic procfs.
    pub proc_root: PathBuf,
    /// Normally `/proc/self/mountinfo`.
    pub mountinfo: PathBuf,
    /// Ask the containerd API, every call done within this; `None` skips it.
    pub api_timeout: Option<Duration>,
    /// Also ask CRI (at this socket), within the same deadline.
    pub cri_address: Option<PathBuf>,
    /// Say on stderr when the APIs keep us waiting (a person is watching).
    pub progress: bool,
    /// Sample what every shim thread is blocked in (zombie evidence, blocked
    /// shims, slow CRI); the leak checks do without.
    pub shim_threads: bool,
}

/// Reads the node. Status files are read before procfs so that a container
/// started in between cannot look dead; one that exits in between can, which
/// is why callers confirm zombies with a second snapshot.
pub fn gather(paths: &Paths, options: &GatherOptions, mut gaps: Vec<Gap>) -> Snapshot {
    let taken_at = now_nanos();
    let cri_containers = cri_store::read(&paths.cri_containers_dir(), &mut gaps);
    // procfs is half the reading on a busy node and shares nothing with the
    // other files: scan it on a second thread. It starts after the status
    // files are read, so the order above still holds.
    let mut proc_gaps = Vec::new();
    let (proc_scan, (cri_sandboxes, bundles, mounts)) = std::thread::scope(|scope| {
        let procfs =
            scope.spawn(|| procfs::scan(&options.proc_root, options.shim_threads, &mut proc_gaps));
        let files = (
            cri_store::sandbox_ids(&paths.cri_sandbox_dirs(), &mut gaps),
            bundles::read(&paths.bundles_dir(&options.namespace), &mut gaps),
            mountinfo::read(
                &options.mountinfo,
                &[&paths.root.path, &paths.state.path],
                &mut gaps,
            ),
        );
        let proc_scan = procfs
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (proc_scan, files)
    });
    gaps.append(&mut proc_gaps);
    let mut proc_scan = proc_scan;
    shim_proof::prove_all(
        &options.proc_root,
        paths,
        &mut proc_scan.shims,
        &proc_scan.processes,
    );
    let node = node::read(&options.proc_root, &mounts, &mut gaps);
    // The shims' own namespaces too: a leaked shim is judged against the
    // records of the namespace it was started for.
    let mut namespaces: BTreeSet<String> = proc_scan
        .shims
        .iter()
        .filter(|s| s.serves(&paths.address.path))
        .filter_map(|s| s.namespace.clone())
        .collect();
    namespaces.insert(options.namespace.clone());
    let container_ids: Vec<String> = cri_containers.iter().map(|c| c.id.clone()).collect();
    let (containerd, cri) = match options.api_timeout {
        None => (None, None),
        Some(timeout) => ask_apis(
            paths,
            options,
            timeout,
            &namespaces,
            &container_ids,
            &mut gaps,
        ),
    };
    // The API's answer when asked; otherwise (or when it did not answer) the
    // binary's, so every command's report names the version.
    let containerd_version = containerd_proc::identify(
        containerd.as_ref().and_then(|c| c.version.as_deref()),
        paths.process.as_ref(),
        &options.proc_root,
    );
    Snapshot {
        taken_at,
        paths: paths.clone(),
        namespace: options.namespace.clone(),
        cri_containers,
        bundles,
        processes: proc_scan.processes,
        shims: proc_scan.shims,
        cri_sandboxes,
        mounts,
        containerd,
        cri,
        node,
        containerd_version,
        gaps,
    }
}

/// A later, cheap look to confirm what a first snapshot suggested (a zombie
/// seen twice, a shim thread blocked twice): only the suspects' status files
/// and processes are read again; the APIs are not asked and every other part
/// is left empty, as no check compares them across snapshots.
pub fn follow_up(paths: &Paths, options: &GatherOptions, suspects: &Suspects) -> Snapshot {
    let taken_at = now_nanos();
    let mut gaps = Vec::new();
    let cri_containers =
        cri_store::reread(&paths.cri_containers_dir(), &suspects.containers, &mut gaps);
    let mut proc_scan = procfs::rescan(
        &options.proc_root,
        &suspects.pids,
        options.shim_threads,
        &mut gaps,
    );
    shim_proof::prove_all(
        &options.proc_root,
        paths,
        &mut proc_scan.shims,
        &proc_scan.processes,
    );
    Snapshot {
        cri_containers,
        processes: proc_scan.processes,
        shims: proc_scan.shims,
        gaps,
        ..Snapshot::empty(taken_at, paths.clone(), options.namespace.clone())
    }
}

/// Adds containerd's records (and so the names its container labels carry)
/// to a snapshot gathered without the APIs: a command that found something
/// asks only then, within `timeout`, so a clean node or a frozen containerd
/// costs it nothing more.
pub fn add_containerd_records(
    snapshot: &mut Snapshot,
    paths: &Paths,
    options: &GatherOptions,
    timeout: Duration,
) {
    let namespaces = BTreeSet::from([options.namespace.clone()]);
    let options = GatherOptions {
        cri_address: None,
        ..options.clone()
    };
    let (containerd, _) = ask_apis(
        paths,
        &options,
        timeout,
        &namespaces,
        &[],
        &mut snapshot.gaps,
    );
    snapshot.containerd = containerd;
}

/// Queries containerd and CRI concurrently; everything ends by one deadline.
fn ask_apis(
    paths: &Paths,
    options: &GatherOptions,
    timeout: Duration,
    namespaces: &BTreeSet<String>,
    container_ids: &[String],
    gaps: &mut Vec<Gap>,
) -> (Option<ContainerdView>, Option<CriView>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            let error = format!("starting an async runtime: {err}");
            gaps.push(Gap::source("containerd-api", &paths.address.path, error));
            return (None, None);
        }
    };
    let (containerd, cri) = runtime.block_on(async {
        let deadline = tokio::time::Instant::now() + timeout;
        let containerd = containerd_api::query(&paths.address.path, namespaces, deadline);
        let cri = async {
            match &options.cri_address {
                Some(address) => Some(cri_api::query(address, container_ids, deadline).await),
                None => None,
            }
        };
        let answers = async { tokio::join!(containerd, cri) };
        // Never finishes: it only speaks up if the answers take a while.
        let progress = async {
            tokio::time::sleep(PROGRESS_AFTER).await;
            if options.progress {
                eprintln!(
                    "nodectl: waiting for containerd at {} (at most {})...",
                    paths.address.path.display(),
                    humantime::format_duration(timeout)
                );
            }
            std::future::pending::<()>().await
        };
        tokio::select! {
            answers = answers => answers,
            _ = progress => unreachable!("progress never completes"),
        }
    });
    containerd_api::gaps(&containerd, gaps);
    if let Some(cri) = &cri {
        cri_api::gaps(cri, gaps);
    }
    (Some(containerd), cri)
}

pub fn now_nanos() -> i64 {
    chrono::Utc::now()
        .timestamp_nanos_opt()
        .expect("the clock is between 1677 and 2262")
}
