//! Node context for a report: is the disk the likely culprit?
//!
//! Slow overlay unmounts come from write-back under I/O pressure; volatile
//! overlay mounts (containerd >= 1.6.24, kernel >= 5.10) skip the sync.

use std::path::Path;

use procfs::{FromRead, IoPressure, Meminfo};
use serde::{Deserialize, Serialize};

use crate::snapshot::{Gap, Mount};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeContext {
    /// `/proc/pressure/io` "some" and "full" averages over 10 s and 60 s (%).
    pub io_pressure_some_avg10: Option<f32>,
    pub io_pressure_some_avg60: Option<f32>,
    pub io_pressure_full_avg10: Option<f32>,
    pub io_pressure_full_avg60: Option<f32>,
    /// `/proc/meminfo` Dirty and Writeback, in bytes.
    pub dirty_bytes: Option<u64>,
    pub writeback_bytes: Option<u64>,
    /// Overlay task rootfs mounts, and how many of them use `volatile`.
    pub overlay_rootfs_mounts: usize,
    pub overlay_rootfs_volatile: usize,
    pub containerd_version: Option<String>,
}

pub fn read(proc_root: &Path, mounts: &[Mount], gaps: &mut Vec<Gap>) -> NodeContext {
    let mut context = NodeContext::default();
    let pressure_path = proc_root.join("pressure/io");
    match IoPressure::from_file(&pressure_path) {
        Ok(pressure) => {
            context.io_pressure_some_avg10 = Some(pressure.some.avg10);
            context.io_pressure_some_avg60 = Some(pressure.some.avg60);
            context.io_pressure_full_avg10 = Some(pressure.full.avg10);
            context.io_pressure_full_avg60 = Some(pressure.full.avg60);
        }
        // Kernels without PSI (or with psi=0) have no such file: no gap.
        Err(_) if !pressure_path.exists() => {}
        Err(err) => gaps.push(Gap::item("node", &pressure_path, err)),
    }
    let meminfo_path = proc_root.join("meminfo");
    match Meminfo::from_file(&meminfo_path) {
        Ok(meminfo) => {
            context.dirty_bytes = Some(meminfo.dirty);
            context.writeback_bytes = Some(meminfo.writeback);
        }
        Err(err) => gaps.push(Gap::item("node", &meminfo_path, err)),
    }
    let rootfs: Vec<&Mount> = mounts
        .iter()
        .filter(|m| m.fs_type == "overlay" && m.mount_point.ends_with("rootfs"))
        .collect();
    context.overlay_rootfs_mounts = rootfs.len();
    context.overlay_rootfs_volatile = rootfs
        .iter()
        .filter(|m| m.options.iter().any(|o| o == "volatile"))
        .count();
    context
}
