//! Sources: each reads one kind of evidence from the node into the snapshot
//! and records what it could not read as a gap.

pub mod api;
pub mod bundles;
pub mod containerd_api;
pub mod containerd_proc;
pub mod cri_api;
pub mod cri_store;
pub mod mountinfo;
pub mod node;
pub mod procfs;
pub mod shim_proof;

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use crate::snapshot::Gap;

/// Reads a small file whole, refusing anything over `limit` bytes: a corrupt or
/// hostile file must not make a diagnostic tool on a sick node eat memory.
pub(crate) fn read_capped(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    File::open(path)?.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes"),
        ));
    }
    Ok(bytes)
}

/// Modification time of a file as unix nanoseconds.
pub(crate) fn mtime_nanos(metadata: &std::fs::Metadata) -> io::Result<i64> {
    let modified = metadata.modified()?;
    let since_epoch = modified
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "mtime before 1970"))?;
    i64::try_from(since_epoch.as_nanos())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "mtime out of range"))
}

/// Gaps for the calls an API did not answer: a failed connect or version call
/// makes the whole API unavailable; other failures are single gaps.
pub(crate) fn api_gaps(source: &str, address: &Path, calls: &[api::ApiCall], gaps: &mut Vec<Gap>) {
    let unreachable = calls
        .iter()
        .find(|c| (c.call == "connect" || c.call == "Version") && c.error.is_some());
    if let Some(call) = unreachable {
        let error = format!(
            "{}: {}",
            call.call,
            call.error.as_deref().unwrap_or_default()
        );
        gaps.push(Gap::source(source, address, error));
        return;
    }
    for call in calls.iter().filter(|c| c.error.is_some()) {
        let error = format!(
            "{}: {}",
            call.call,
            call.error.as_deref().unwrap_or_default()
        );
        gaps.push(Gap::item(source, address, error));
    }
}
