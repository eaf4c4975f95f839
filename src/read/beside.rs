//! The atomic write beside a file: a new file next to the one to replace,
//! written whole and then renamed over it, so a reader sees the old file or
//! the new one, never half of one; in a directory opened once and checked,
//! relative to its descriptor ([`CheckedDir`]).

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use nix::fcntl::AtFlags;
use nix::sys::stat::{fstat, fstatat, SFlag};
use nix::unistd::UnlinkatFlags;

/// Replaces `path` whole with `bytes` (mode `mode`): written in its
/// directory, opened once and checked ([`CheckedDir::open`]), relative to
/// that descriptor: beside it under a fresh name (never through a symlink,
/// never into another's file), flushed to disk, then renamed over it (a
/// rename replaces a symlink at `path` itself, never its target). A reader
/// sees the old file or the new one, never half of one. Errors name `path`.
pub(crate) fn replace(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let (dir, name) = split(path).map_err(named)?;
    CheckedDir::open(dir)
        .and_then(|dir| dir.replace(name, bytes, mode))
        .map_err(named)
}

/// `path`'s directory (`.` for a bare name) and file name.
pub(crate) fn split(path: &Path) -> io::Result<(&Path, &std::ffi::OsStr)> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    Ok((dir, name))
}

/// A directory nodectl writes in, opened once and checked, every file
/// written relative to its descriptor: whoever renames, swaps
/// (`renameat2(RENAME_EXCHANGE)`) or links the path's components afterwards
/// changes nothing of where the files go. It is reached from `/` one
/// component at a time, never through a symlink, and every directory on the
/// way is one no one else could have swapped what follows in: owned by root
/// or this user, and writable by group or others only with the sticky bit
/// (`/tmp`), which keeps others from renaming what is not theirs.
pub(crate) struct CheckedDir {
    fd: OwnedFd,
}

impl CheckedDir {
    /// `dir` as it is (node_exporter's textfile directory may be another
    /// user's: its entries are its owner's to change, not where nodectl's
    /// writes go).
    pub(crate) fn open(dir: &Path) -> io::Result<CheckedDir> {
        Ok(CheckedDir {
            fd: walk(dir, false)?,
        })
    }

    /// `dir` as a directory only this user can write to: made (0700, its
    /// parent must exist) when missing; refused when it is a symlink, not a
    /// directory, another user's, or writable by group or others (someone
    /// else could then swap the files in it).
    pub(crate) fn own(dir: &Path) -> io::Result<CheckedDir> {
        Ok(CheckedDir {
            fd: walk(dir, true)?,
        })
    }

    /// `dir` held to the rules of the directories on the way to it: owned
    /// by root or this user, writable by group or others only with the
    /// sticky bit (`/tmp`), never a symlink. Where a file is placed under a
    /// name the user chose (`collect`'s archive).
    pub(crate) fn safe(dir: &Path) -> io::Result<CheckedDir> {
        let fd = walk(dir, false)?;
        if let Some(refused) = swappable(&fstat(&fd)?, dir) {
            return Err(refused);
        }
        Ok(CheckedDir { fd })
    }

    /// `name` in this directory as it is (a symlink not followed).
    pub(crate) fn stat(&self, name: &std::ffi::OsStr) -> io::Result<nix::sys::stat::FileStat> {
        Ok(fstatat(&self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW)?)
    }

    /// A new file in this directory with `mode`, under a fresh name beside
    /// `name` (a dot first, `.tmp` last: no reader of `name`'s kind takes it
    /// for one), that did not exist before and is no link; with that name.
    pub(crate) fn create_beside(
        &self,
        name: &std::ffi::OsStr,
        mode: u32,
    ) -> io::Result<(String, File)> {
        use nix::fcntl::OFlag;
        use nix::sys::stat::Mode;
        let shown = name.to_string_lossy();
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        for attempt in 0..100 {
            let tmp = format!(".{shown}.{}.{attempt}.tmp", std::process::id());
            match nix::fcntl::openat(
                &self.fd,
                tmp.as_str(),
                flags,
                Mode::from_bits_truncate(mode),
            ) {
                Ok(fd) => {
                    let file = File::from(fd);
                    // The mode asked for, whatever the umask took off.
                    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
                    return Ok((tmp, file));
                }
                Err(nix::Error::EEXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "no fresh name to write beside it",
        ))
    }

    /// Renames `from` over `to`, both in this directory.
    pub(crate) fn rename(&self, from: &str, to: &std::ffi::OsStr) -> io::Result<()> {
        Ok(nix::fcntl::renameat(&self.fd, from, &self.fd, to)?)
    }

    /// Links `from` as `to`, both in this directory: fails on any existing
    /// `to`, a symlink included.
    pub(crate) fn link(&self, from: &str, to: &std::ffi::OsStr) -> io::Result<()> {
        Ok(nix::unistd::linkat(
            &self.fd,
            from,
            &self.fd,
            to,
            AtFlags::empty(),
        )?)
    }

    /// Removes the file `name` of this directory.
    pub(crate) fn remove(&self, name: &str) -> io::Result<()> {
        Ok(nix::unistd::unlinkat(
            &self.fd,
            name,
            UnlinkatFlags::NoRemoveDir,
        )?)
    }

    /// Replaces `name` in this directory whole with `bytes` (see [`replace`]).
    pub(crate) fn replace(
        &self,
        name: &std::ffi::OsStr,
        bytes: &[u8],
        mode: u32,
    ) -> io::Result<()> {
        if fstatat(&self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW)
            .is_ok_and(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR)
        {
            return Err(io::Error::other("is a directory"));
        }
        let (tmp, mut file) = self.create_beside(name, mode)?;
        let placed = file
            .write_all(bytes)
            .and_then(|()| file.sync_all())
            .and_then(|()| self.rename(&tmp, name));
        if placed.is_err() {
            let _ = self.remove(&tmp);
        }
        placed
    }
}

/// Opens `dir` from `/` (or the working directory, for a relative one), one
/// component at a time (see [`CheckedDir`]); with `own`, makes the last one
/// when missing and holds it to [`CheckedDir::own`]'s rules.
fn walk(dir: &Path, own: bool) -> io::Result<OwnedFd> {
    use nix::fcntl::{open, openat, OFlag};
    use nix::sys::stat::Mode;
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let refused = |why: String| io::Error::new(io::ErrorKind::PermissionDenied, why);
    let me = nix::unistd::geteuid().as_raw();
    let start = match dir.is_absolute() {
        true => Path::new("/"),
        false => Path::new("."),
    };
    let mut fd = open(start, flags, Mode::empty())?;
    let mut reached = PathBuf::from(start);
    let components: Vec<Component> = dir
        .components()
        .filter(|c| !matches!(c, Component::RootDir | Component::CurDir))
        .collect();
    for (n, component) in components.iter().enumerate() {
        // What is reached so far decides whether what follows can be
        // swapped by someone else.
        if let Some(refused) = swappable(&fstat(&fd)?, &reached) {
            return Err(refused);
        }
        let name = component.as_os_str();
        reached.push(name);
        let last = n + 1 == components.len();
        if last && own {
            match nix::sys::stat::mkdirat(&fd, name, Mode::from_bits_truncate(0o700)) {
                Ok(()) | Err(nix::Error::EEXIST) => {}
                Err(e) => return Err(io::Error::from(e)),
            }
        }
        fd = openat(&fd, name, flags, Mode::empty()).map_err(|e| match e {
            nix::Error::ELOOP | nix::Error::ENOTDIR => refused(format!(
                "{} is not a directory (a symlink is not followed)",
                reached.display()
            )),
            e => io::Error::from(e),
        })?;
    }
    if own {
        let st = fstat(&fd)?;
        if st.st_uid != me {
            return Err(refused("owned by another user".to_string()));
        }
        if st.st_mode & 0o022 != 0 {
            return Err(refused("writable by group or others".to_string()));
        }
    }
    Ok(fd)
}

/// Why what is below `reached` (its `st`) could be swapped by someone
/// else, if it could: another user owns it, or group or others may write
/// to it without the sticky bit.
fn swappable(st: &nix::sys::stat::FileStat, reached: &Path) -> Option<io::Error> {
    let refused = |why: String| Some(io::Error::new(io::ErrorKind::PermissionDenied, why));
    let me = nix::unistd::geteuid().as_raw();
    if st.st_uid != 0 && st.st_uid != me {
        return refused(format!(
            "{} is owned by uid {}, who could swap what is below it",
            reached.display(),
            st.st_uid
        ));
    }
    if st.st_mode & 0o022 != 0 && st.st_mode & 0o1000 == 0 {
        return refused(format!(
            "{} is writable by group or others (mode {:o}) without the sticky bit: they could swap what is below it",
            reached.display(),
            st.st_mode & 0o7777
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn own(dir: &Path) -> io::Result<()> {
        CheckedDir::own(dir).map(|_| ())
    }

    #[test]
    fn a_directory_is_ours_only_when_no_one_else_can_swap_its_files() {
        let top = tempfile::tempdir().unwrap();
        let made = top.path().join("nodectl");
        own(&made).unwrap();
        let mode = fs::metadata(&made).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        own(&made).unwrap();
        let link = top.path().join("link");
        symlink(&made, &link).unwrap();
        let err = own(&link).unwrap_err().to_string();
        assert!(err.contains("not a directory"), "{err}");
        // A symlink anywhere on the way is not followed either.
        let err = own(&link.join("below")).unwrap_err().to_string();
        assert!(err.contains("a symlink is not followed"), "{err}");
        fs::set_permissions(&made, fs::Permissions::from_mode(0o777)).unwrap();
        let err = own(&made).unwrap_err().to_string();
        assert!(err.contains("writable by group or others"), "{err}");
        assert!(own(&top.path().join("no/such")).is_err());
    }

    #[test]
    fn no_directory_on_the_way_may_be_one_others_could_swap_below() {
        let top = tempfile::tempdir().unwrap();
        let shared = top.path().join("shared");
        fs::create_dir(&shared).unwrap();
        fs::set_permissions(&shared, fs::Permissions::from_mode(0o777)).unwrap();
        // Writable by others without the sticky bit: refused.
        let err = own(&shared.join("nodectl")).unwrap_err().to_string();
        assert!(err.contains("without the sticky bit"), "{err}");
        let err = replace(&shared.join("x/f"), b"x", 0o600)
            .unwrap_err()
            .to_string();
        assert!(err.contains("without the sticky bit"), "{err}");
        // With it (as /tmp): others cannot rename what is not theirs.
        fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).unwrap();
        own(&shared.join("nodectl")).unwrap();
        // Another user's directory on the way: refused (only root can
        // give one away to test).
        if nix::unistd::geteuid().is_root() {
            let theirs = top.path().join("theirs");
            fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let err = own(&theirs.join("nodectl")).unwrap_err().to_string();
            assert!(err.contains("owned by uid 65534"), "{err}");
        }
    }

    #[test]
    fn files_go_where_the_directory_was_opened_whatever_is_swapped_in_after() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("nodectl");
        let checked = CheckedDir::own(&dir).unwrap();
        // The path now names another directory (a rename, or
        // renameat2(RENAME_EXCHANGE) in a loop).
        let moved = top.path().join("moved");
        fs::rename(&dir, &moved).unwrap();
        let decoy = top.path().join("decoy");
        fs::create_dir(&decoy).unwrap();
        symlink(&decoy, &dir).unwrap();
        checked
            .replace(std::ffi::OsStr::new("f.json"), b"new", 0o600)
            .unwrap();
        assert_eq!(fs::read_to_string(moved.join("f.json")).unwrap(), "new");
        assert_eq!(fs::read_dir(&decoy).unwrap().count(), 0);
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
