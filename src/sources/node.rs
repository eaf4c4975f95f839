//! Node context for a report: is the disk the likely culprit?
//!
//! Slow overlay unmounts come from write-back under I/O pressure; volatile
//! overlay mounts (containerd >= 1.6.24, kernel >= 5.10) skip the sync.

use std::path::Path;

use crate::model::{Gap, Mount, NodeContext, Source};
use procfs::{FromRead, IoPressure};

/// `pressure/io` is two lines of numbers.
const PRESSURE_LIMIT: u64 = 4096;

/// The node's I/O pressure and write-back; [`count_rootfs_mounts`] adds
/// what the mount table says, once it is read (the two are read at once).
pub fn read(proc_root: &Path, gaps: &mut Vec<Gap>) -> NodeContext {
    let mut context = NodeContext::default();
    let pressure_path = proc_root.join("pressure/io");
    let pressure = crate::read::bounded::read_proc(&pressure_path, PRESSURE_LIMIT)
        .and_then(|bytes| IoPressure::from_read(bytes.as_slice()).map_err(std::io::Error::other));
    match pressure {
        Ok(pressure) => {
            context.io_pressure_some_avg10 = Some(pressure.some.avg10);
            context.io_pressure_some_avg60 = Some(pressure.some.avg60);
            context.io_pressure_full_avg10 = Some(pressure.full.avg10);
            context.io_pressure_full_avg60 = Some(pressure.full.avg60);
        }
        // Kernels without PSI (or with psi=0) have no such file: no gap.
        Err(_) if !pressure_path.exists() => {}
        Err(err) => gaps.push(Gap::item(Source::Node, &pressure_path, err)),
    }
    let meminfo_path = proc_root.join("meminfo");
    match crate::read::bounded::read_proc_string(&meminfo_path, 1024 * 1024)
        .map_err(|e| e.to_string())
        .and_then(|text| Ok((kib_line(&text, "Dirty")?, kib_line(&text, "Writeback")?)))
    {
        Ok((dirty, writeback)) => {
            context.dirty_bytes = Some(dirty);
            context.writeback_bytes = Some(writeback);
        }
        Err(err) => gaps.push(Gap::item(Source::Node, &meminfo_path, err)),
    }
    context
}

/// How many overlay rootfs mounts there are, and how many of them are
/// volatile (their unmount skips the sync).
pub fn count_rootfs_mounts(context: &mut NodeContext, mounts: &[Mount]) {
    let rootfs: Vec<&Mount> = mounts
        .iter()
        .filter(|m| m.fs_type == "overlay" && m.mount_point.ends_with("rootfs"))
        .collect();
    context.overlay_rootfs_mounts = rootfs.len();
    context.overlay_rootfs_volatile = rootfs
        .iter()
        .filter(|m| m.options.iter().any(|o| o == "volatile"))
        .count();
}

/// The bytes of a `/proc/meminfo` line (`Dirty:    1234 kB`). Read here
/// rather than with procfs's `Meminfo`, which multiplies every line by 1024
/// unchecked (a panic on a fake `--proc-root`) and needs all 50 of them.
fn kib_line(meminfo: &str, key: &str) -> Result<u64, String> {
    meminfo
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|value| value.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
        .and_then(|kib| kib.checked_mul(1024))
        .ok_or_else(|| format!("no {key} line in kB"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirty_and_writeback_are_read_in_bytes_and_odd_lines_are_a_gap() {
        let dir = tempfile::tempdir().unwrap();
        let meminfo = dir.path().join("meminfo");
        std::fs::write(
            &meminfo,
            "MemTotal: 100 kB\nDirty:            233 kB\nWriteback:  0 kB\nWritebackTmp: 9 kB\n",
        )
        .unwrap();
        let mut gaps = Vec::new();
        let context = read(dir.path(), &mut gaps);
        assert_eq!(gaps, vec![]);
        assert_eq!(
            (context.dirty_bytes, context.writeback_bytes),
            (Some(233 * 1024), Some(0))
        );
        // Found by tests/hostile_input.rs: procfs's parser overflowed here.
        std::fs::write(
            &meminfo,
            "Dirty: 18446744073709551615 kB\nWriteback: 0 kB\n",
        )
        .unwrap();
        let context = read(dir.path(), &mut gaps);
        assert_eq!(context.dirty_bytes, None);
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(gaps[0].error.contains("no Dirty line"), "{gaps:?}");
    }
}
