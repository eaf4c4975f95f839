//! The atomic write beside a file: a new file next to the one to replace,
//! written whole and then renamed over it, so a reader sees the old file or
//! the new one, never half of one.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
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

/// Replaces `path` whole with `bytes` (mode `mode`): written beside it
/// ([`create_beside`]: never through a symlink, never into another's file),
/// flushed to disk, then renamed over it (a rename replaces a symlink at
/// `path` itself, never its target). A reader sees the old file or the new
/// one, never half of one. Errors name `path`.
pub(crate) fn replace(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    if fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(named(io::Error::other("is a directory")));
    }
    let (tmp, mut file) = create_beside(path, mode).map_err(named)?;
    let placed = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| fs::rename(&tmp, path));
    if placed.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    placed.map_err(named)
}

/// `dir` as a directory only this user can write to: made (0700, its parent
/// must exist) when missing; refused when it is a symlink, not a
/// directory, another user's, or writable by group or others (someone else
/// could then swap the files in it).
pub(crate) fn own_dir(dir: &Path) -> io::Result<()> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", dir.display()));
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(named(e)),
    }
    let meta = fs::symlink_metadata(dir).map_err(named)?;
    let refused = |why: &str| Err(named(io::Error::new(io::ErrorKind::PermissionDenied, why)));
    if !meta.file_type().is_dir() {
        return refused("not a directory (a symlink is not followed)");
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return refused("owned by another user");
    }
    if meta.mode() & 0o022 != 0 {
        return refused("writable by group or others");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    #[test]
    fn a_directory_is_ours_only_when_no_one_else_can_swap_its_files() {
        let top = tempfile::tempdir().unwrap();
        let made = top.path().join("nodectl");
        own_dir(&made).unwrap();
        let mode = fs::metadata(&made).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        own_dir(&made).unwrap();
        let link = top.path().join("link");
        symlink(&made, &link).unwrap();
        let err = own_dir(&link).unwrap_err().to_string();
        assert!(err.contains("not a directory"), "{err}");
        fs::set_permissions(&made, fs::Permissions::from_mode(0o777)).unwrap();
        let err = own_dir(&made).unwrap_err().to_string();
        assert!(err.contains("writable by group or others"), "{err}");
        assert!(own_dir(&top.path().join("no/such")).is_err());
    }

    #[test]
    fn a_file_is_replaced_whole_and_a_symlink_in_its_place_is_not_followed() {
        let top = tempfile::tempdir().unwrap();
        let target = top.path().join("target");
        fs::write(&target, "kept").unwrap();
        let path = top.path().join("file.json");
        symlink(&target, &path).unwrap();
        replace(&path, b"new", 0o600).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "kept");
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        assert!(!fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink());
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
