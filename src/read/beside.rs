//! The atomic write beside a file: a new file next to the one to replace,
//! written whole and then renamed over it, so a reader sees the old file or
//! the new one, never half of one.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A new file beside `path` with `mode`, that did not exist before and is no
/// link (O_EXCL, O_NOFOLLOW), to be renamed over `path` once whole. Its name
/// starts with a dot and ends in `.tmp`, so no reader of `path`'s kind (an
/// archive, node_exporter's `*.prom`) takes it for one.
pub(crate) fn create_beside(path: &Path, mode: u32) -> io::Result<(PathBuf, File)> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?
        .to_string_lossy();
    for attempt in 0.. {
        let tmp = dir.join(format!(".{name}.{}.{attempt}.tmp", std::process::id()));
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .open(&tmp)
        {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => continue,
            Err(e) => return Err(e),
        }
    }
    unreachable!()
}
