//! kubelet's steps for a new pod, in the order its source takes them (the
//! bed runs no kubelet; kubernetes/kubernetes 1.26–1.35):
//!
//! 1. `Kubelet.SyncPod` (kubelet.go): the pod cgroup,
//!    `pcm.EnsureExists` (cgroupfs driver:
//!    `<cgroup root>/kubepods/burstable/pod<uid>`, in every v1 hierarchy);
//! 2. then `makePodDataDirs`: `<root>/pods/<uid>`, its `volumes` and
//!    `plugins`;
//! 3. then `WaitForAttachAndMount`: here an emptyDir of medium Memory, a
//!    tmpfs at `volumes/kubernetes.io~empty-dir/<name>`
//!    (`emptyDir.setupTmpfs`);
//! 4. then `kubeGenericRuntimeManager.SyncPod` → `createPodSandbox`
//!    (kuberuntime_sandbox.go): `MkdirAll` of the pod's log directory,
//!    `<podLogsDir>/<namespace>_<name>_<uid>` (`BuildPodLogsDirectory`),
//!    right before each RunPodSandbox;
//! 5. then RunPodSandbox through CRI, with that log directory and the pod
//!    cgroup as the sandbox's cgroup parent; on failure kubelet's pod
//!    worker retries the whole sync (its back-off), the steps above
//!    finding their work done.

use std::path::{Path, PathBuf};

use super::cri::{Pids, SandboxFailure};
use super::teardown::cgroup_dirs;
use super::TestBed;

/// A pod kubelet started: what each step made, and RunPodSandbox's last
/// answer.
#[derive(Debug)]
pub struct KubeletPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The pod cgroup in each hierarchy (v2: one).
    pub cgroups: Vec<PathBuf>,
    pub dir: PathBuf,
    pub volume: PathBuf,
    pub log_dir: PathBuf,
    pub sandbox: Result<String, SandboxFailure>,
}

impl TestBed {
    /// kubelet's steps for pod `name` (namespace "default") under kubelet
    /// root `root` and pod log directory `pod_logs`, RunPodSandbox tried
    /// `attempts` times with the runtime handler `handler` ("" the
    /// default; one containerd has no runtime for fails every attempt, as
    /// a RuntimeClass naming a missing handler does).
    pub async fn kubelet_start_pod(
        &self,
        root: &Path,
        pod_logs: &Path,
        name: &str,
        handler: &str,
        attempts: usize,
    ) -> KubeletPod {
        let mut config = self.sandbox_config(name, Pids::SharedWithSandbox);
        let metadata = config
            .metadata
            .clone()
            .expect("the bed's config has metadata");
        let (namespace, uid) = (metadata.namespace, metadata.uid);
        // 1. pcm.EnsureExists: the pod cgroup, in every hierarchy.
        let relative = format!("kubepods/burstable/pod{uid}");
        let cgroups: Vec<PathBuf> = cgroup_dirs(self.cgroup_parent())
            .into_iter()
            .map(|parent| parent.join(&relative))
            .collect();
        for cgroup in &cgroups {
            std::fs::create_dir_all(cgroup).expect("the pod cgroup (pcm.EnsureExists)");
        }
        // 2. makePodDataDirs.
        let dir = root.join("pods").join(&uid);
        for sub in ["volumes", "plugins"] {
            std::fs::create_dir_all(dir.join(sub)).expect("the pod's data dirs (makePodDataDirs)");
        }
        // 3. WaitForAttachAndMount: an emptyDir of medium Memory.
        let volume = dir.join("volumes/kubernetes.io~empty-dir/cache");
        std::fs::create_dir_all(&volume).unwrap();
        super::mount_tmpfs(&volume);
        // 4. createPodSandbox: the pod's log directory.
        let log_dir = pod_logs.join(format!("{namespace}_{name}_{uid}"));
        if let Some(linux) = config.linux.as_mut() {
            linux.cgroup_parent = format!("{}/{relative}", self.cgroup_parent());
        }
        config.log_directory = log_dir.display().to_string();
        // 5. RunPodSandbox, retried as the pod worker retries.
        let mut sandbox = Err(SandboxFailure {
            message: "never tried".to_string(),
            sandbox_id: None,
        });
        for _ in 0..attempts.max(1) {
            std::fs::create_dir_all(&log_dir).expect("the pod's log directory (createPodSandbox)");
            sandbox = self.try_start_sandbox_with(&config, handler).await;
            if sandbox.is_ok() {
                break;
            }
        }
        KubeletPod {
            namespace,
            name: name.to_string(),
            uid,
            cgroups,
            dir,
            volume,
            log_dir,
            sandbox,
        }
    }
}

/// kubelet's systemd driver's name for its cgroup root `cgroup_root`, the
/// prefix of each of its slices (`CgroupName.ToSystemd`: the root's parts,
/// each `-` escaped `_`, joined with `-`).
pub fn systemd_prefix(cgroup_root: &str) -> String {
    cgroup_root
        .split('/')
        .filter(|part| !part.is_empty())
        .map(|part| part.replace('-', "_"))
        .collect::<Vec<_>>()
        .join("-")
}

/// The unit of a BestEffort pod's slice of uid `uid` under `cgroup_root`,
/// as kubelet's systemd driver names it.
pub fn systemd_besteffort_slice(cgroup_root: &str, uid: &str) -> String {
    format!(
        "{}-kubepods-besteffort-pod{}.slice",
        systemd_prefix(cgroup_root),
        uid.replace('-', "_")
    )
}
