//! A directory as it was when listed. An entry listed there and gone when
//! read was removed meanwhile only while the path still names that very
//! directory (same device and inode): a store renamed away, unmounted or
//! hidden (a container that does not mount it) loses every entry at once,
//! and a look that took each loss for a removal would read blind as clear.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The device and inode of a directory: what it is, whatever names it.
pub type DirIdentity = (u64, u64);

/// What a gap says of a directory lost so: the look is blind for what it
/// holds.
pub(crate) const MOVED_AWAY: &str = "moved, removed or unmounted while its entries were read: \
                                     none missing from it is taken for removed, and what it holds is unknown";

/// A directory's path and its identity when it was listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListedDir {
    path: PathBuf,
    identity: DirIdentity,
}

impl ListedDir {
    /// The directory `path` names now (symlinks followed, as a listing of
    /// the path follows them).
    pub(crate) fn at(path: &Path) -> io::Result<ListedDir> {
        let metadata = std::fs::metadata(path)?;
        Ok(ListedDir::with(path, (metadata.dev(), metadata.ino())))
    }

    /// `path` as a directory of `identity` (one an earlier look listed).
    pub(crate) fn with(path: &Path, identity: DirIdentity) -> ListedDir {
        ListedDir {
            path: path.to_path_buf(),
            identity,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn identity(&self) -> DirIdentity {
        self.identity
    }

    /// Whether `opened` is this directory (not another put at its path).
    pub(crate) fn is(&self, opened: &File) -> bool {
        opened
            .metadata()
            .is_ok_and(|m| (m.dev(), m.ino()) == self.identity)
    }

    /// Whether the path still names the directory listed: only then is an
    /// entry missing from it removed meanwhile.
    pub(crate) fn still_there(&self) -> bool {
        std::fs::metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.identity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_renamed_away_or_replaced_is_no_longer_there() {
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("store");
        std::fs::create_dir(&store).unwrap();
        let listed = ListedDir::at(&store).unwrap();
        assert!(listed.still_there());
        assert!(listed.is(&File::open(&store).unwrap()));
        std::fs::rename(&store, tmp.path().join("moved")).unwrap();
        assert!(!listed.still_there());
        // Another directory at the same path is not the one listed.
        std::fs::create_dir(&store).unwrap();
        assert!(!listed.still_there());
        assert!(!listed.is(&File::open(&store).unwrap()));
    }
}
