//! What kubelet keeps on disk for its pods: `<root>/pods/<uid>`, one
//! directory per pod it runs or ran, with the pod's volumes mounted below
//! `volumes/`. kubelet removes a directory once its pod is gone and every
//! volume is unmounted; one that stays has outlived its pod.

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
