//! The node's context in a report: is the disk the likely culprit?

use serde::{Deserialize, Serialize};

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
