//! What kubelet keeps on disk for its pods: `<root>/pods/<uid>`, one
//! directory per pod it runs or ran, with the pod's volumes mounted below
//! `volumes/`. kubelet removes a directory once its pod is gone and every
//! volume is unmounted; one that stays has outlived its pod. Beside them,
//! the pods' log directories (`/var/log/pods/<namespace>_<name>_<uid>`),
//! which name each uid's pod.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::model::cri_status::UnixNanos;
use crate::model::paths::Located;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KubeletView {
    /// kubelet's root (`--root-dir`), with where nodectl found it.
    pub root: Located,
    /// Every directory of `<root>/pods`.
    pub pod_dirs: Vec<PodDir>,
    /// Every pod log directory kubelet made (`<podLogsDir>/<ns>_<name>_<uid>`);
    /// `None` when they could not be read (a gap says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_logs: Option<Vec<PodLogDir>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodDir {
    /// The directory's name: the pod's uid.
    pub uid: String,
    #[serde(with = "crate::model::path_json")]
    pub path: PathBuf,
    /// The directory's last change (unix ns): kubelet creates it before
    /// the pod's sandbox, and it changes as volumes come and go.
    pub modified_at: UnixNanos,
    /// Mount points below it (volumes still mounted), from the mount table.
    #[serde(default)]
    pub mounts: Vec<String>,
}

/// A pod's log directory: kuberuntime makes it right before each
/// RunPodSandbox (`createPodSandbox`), and kubelet's container GC
/// (`evictPodLogsDirectories`) removes it once the pod's content may go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodLogDir {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The directory's last change (unix ns): its making, for a pod whose
    /// sandbox never ran (no container's directory was added below it).
    pub modified_at: UnixNanos,
}

impl PodLogDir {
    /// The log directory named `name` (`<namespace>_<name>_<uid>`, as
    /// kubelet's `BuildPodLogsDirectory` writes it: none of the three has a
    /// `_`), if it is one.
    pub fn parse(name: &str, modified_at: UnixNanos) -> Option<PodLogDir> {
        let mut parts = name.split('_');
        let (namespace, pod, uid) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || [namespace, pod, uid].iter().any(|p| p.is_empty()) {
            return None;
        }
        Some(PodLogDir {
            namespace: namespace.to_string(),
            name: pod.to_string(),
            uid: uid.to_string(),
            modified_at,
        })
    }
}

impl KubeletView {
    /// The pod directory of `uid`, if kubelet still has one.
    pub fn pod_dir(&self, uid: &str) -> Option<&PodDir> {
        self.pod_dirs.iter().find(|dir| dir.uid == uid)
    }

    /// The log directory of `uid`, if kubelet still has one (`None` also
    /// when they were not read).
    pub fn pod_log(&self, uid: &str) -> Option<&PodLogDir> {
        self.pod_logs.iter().flatten().find(|log| log.uid == uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_directory_names_its_pod_in_three_parts() {
        let log = PodLogDir::parse("shop_cart-7f9c_0f1e2d3c-aaaa-bbbb", 5).unwrap();
        assert_eq!(
            (log.namespace.as_str(), log.name.as_str(), log.uid.as_str()),
            ("shop", "cart-7f9c", "0f1e2d3c-aaaa-bbbb")
        );
        for not_one in [
            "shop_cart",
            "a_b_c_d",
            "_cart_uid",
            "shop__uid",
            "lost+found",
        ] {
            assert_eq!(PodLogDir::parse(not_one, 0), None, "{not_one}");
        }
    }
}
