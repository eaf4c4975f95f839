//! Checks: pure functions from the snapshot (the model) to findings, one
//! file per finding kind, each registered once in [`registry::CHECKS`].

pub mod api_unreachable;
pub mod cri_drift;
pub mod cri_slow;
pub mod duplicate_sandbox_name;
pub mod failing_sandbox;
pub mod late_exit;
pub mod leaked_ip;
pub mod leaked_mount;
pub mod leaked_netns;
pub mod leaked_pod_cgroup;
pub mod leaked_sandbox;
pub mod leaked_shim;
pub mod leaked_snapshot;
pub mod orphan_bundle;
pub mod orphan_pod_dir;
pub mod registry;
pub mod settings;
pub mod shared;
pub mod shim_blocked;
pub mod zombie;

pub use registry::{run_all, sort, suspects};
pub use settings::Settings;
