//! Removing a directory tree from file descriptors, for the actions that
//! remove one (an orphan bundle, a leaked pod cgroup): each directory
//! opened below its parent with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV)`, so that the removal never
//! follows a symlink and stops at the first mount point it meets instead of
//! descending into it (or, from a cgroup, out of the cgroup filesystem).

use std::ffi::{CStr, OsStr};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::dir::Dir;
use nix::fcntl::{openat2, AtFlags, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{fstatat, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};

/// What is done with what is not a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Files {
    /// Unlinked (a bundle's files).
    Unlink,
    /// Left: they are the kernel's and go with their directory (a cgroup's
    /// interface files, which no one may unlink).
    GoWithTheirDirectory,
}

/// How the top of a removal is opened (a path): a directory, reached
/// without following any symlink.
pub(crate) fn no_symlinks() -> OpenHow {
    OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS)
}

/// How a directory is opened below its parent: never through a symlink,
/// never across a mount.
pub(crate) fn beneath() -> OpenHow {
    no_symlinks().resolve(
        ResolveFlag::RESOLVE_BENEATH
            | ResolveFlag::RESOLVE_NO_SYMLINKS
            | ResolveFlag::RESOLVE_NO_XDEV,
    )
}

/// Removes `name` (a directory) inside `parent`, and everything below it,
/// at most `max_depth` levels deep; `shown` names it in messages (its path
/// below what is being removed, `what` when that is itself).
pub(crate) fn remove(
    parent: &impl AsFd,
    name: &CStr,
    files: Files,
    max_depth: usize,
    what: &str,
) -> Result<(), String> {
    remove_below(parent, name, Path::new(""), 0, files, max_depth, what)
}

fn remove_below(
    parent: &impl AsFd,
    name: &CStr,
    shown: &Path,
    depth: usize,
    files: Files,
    max_depth: usize,
    what: &str,
) -> Result<(), String> {
    let show = |below: &Path| match below.as_os_str().is_empty() {
        true => what.to_string(),
        false => below.display().to_string(),
    };
    if depth > max_depth {
        return Err(format!(
            "{} is nested deeper than {max_depth} levels",
            show(shown)
        ));
    }
    let at = |place: &Path, e: nix::Error| match e {
        nix::Error::EXDEV | nix::Error::EBUSY => {
            format!("{}: a mount point, not entered", show(place))
        }
        e => format!("{}: {e}", show(place)),
    };
    let fd = openat2(parent, name, beneath()).map_err(|e| at(shown, e))?;
    let mut dir = Dir::from_fd(fd).map_err(|e| at(shown, e))?;
    let mut names = Vec::new();
    for entry in dir.iter() {
        let entry = entry.map_err(|e| at(shown, e))?;
        let child = entry.file_name();
        if child != c"." && child != c".." {
            names.push(child.to_owned());
        }
    }
    for child in names {
        let child_shown = shown.join(OsStr::from_bytes(child.as_bytes()));
        let st = fstatat(&dir, child.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
            .map_err(|e| at(&child_shown, e))?;
        if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR {
            remove_below(
                &dir,
                &child,
                &child_shown,
                depth + 1,
                files,
                max_depth,
                what,
            )?;
        } else if files == Files::Unlink {
            unlinkat(&dir, child.as_c_str(), UnlinkatFlags::NoRemoveDir)
                .map_err(|e| at(&child_shown, e))?;
        }
    }
    drop(dir);
    unlinkat(parent, name, UnlinkatFlags::RemoveDir).map_err(|e| at(shown, e))
}
