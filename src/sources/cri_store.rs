//! CRI's on-disk container store: `<root>/io.containerd.grpc.v1.cri/containers/<id>/status`.
//!
//! The CRI plugin rewrites this file (atomically) whenever a container's status
//! changes, so its mtime is the moment CRI *recorded* the last transition, while
//! the `FinishedAt` inside is when the process really exited.

use std::collections::{BTreeSet, HashMap};
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::model::{CriContainer, CriStatus, FileVersion, Gap, Source};
use crate::read::bounded::{open_dir, read_regular, read_regular_at, Links};
use crate::read::deadline::reading;
use crate::read::listed::{DirIdentity, ListedDir, MOVED_AWAY};
use crate::sources::{file_version, version_at};

pub(crate) const SOURCE: Source = Source::CriStore;
/// Real status files are a few hundred bytes.
pub(crate) const STATUS_SIZE_LIMIT: u64 = 1 << 20;

/// The status files read, and the identity of their directory as listed.
pub type Listing = (Vec<CriContainer>, Option<DirIdentity>);

/// Reads every container's status file. A container whose file is missing,
/// unreadable or corrupt becomes a gap naming that file. With them, the
/// identity of the directory listed, for a later look to hold its files
/// to ([`reread`]).
pub fn read(containers_dir: &Path, gaps: &mut Vec<Gap>) -> Listing {
    reading(containers_dir);
    // Its identity before it is listed: a directory put in its place
    // after this is not the one listed (see `ListedDir`).
    let entries = match ListedDir::at(containers_dir)
        .and_then(|listed| Ok((listed, fs::read_dir(containers_dir)?)))
    {
        Ok(entries) => entries,
        Err(err) => {
            gaps.push(Gap::source(
                SOURCE,
                containers_dir,
                describe_dir_error(&err),
            ));
            return (Vec::new(), None);
        }
    };
    let (listed, entries) = entries;
    let mut ids = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => {
                gaps.push(Gap::item(SOURCE, containers_dir, err));
                continue;
            }
        };
        // containerd ids are ASCII; a name that is not UTF-8 is no container
        // CRI made, and a lossy id would name a directory that does not exist
        // (read as "removed meanwhile", silently).
        let Ok(id) = entry.file_name().into_string() else {
            gaps.push(Gap::item(
                SOURCE,
                entry.path().join("status"),
                "not a container id (its name is not UTF-8): not read",
            ));
            continue;
        };
        // `<id>.del-status`: a status file being deleted (below).
        if id.ends_with(DELETING_SUFFIX) {
            continue;
        }
        ids.push(id);
    }
    // Sorted before the read, which keeps their order: sorting the readings
    // after it moved thousands of records.
    ids.sort_unstable();
    let containers = read_all(&listed, &ids, &HashMap::new(), gaps)
        .into_iter()
        .filter_map(|reading| match reading {
            Looked::Read(container) => Some(container),
            Looked::Unchanged(_) => None, // nothing was known
        })
        .collect();
    (containers, Some(listed.identity()))
}

/// What a look at a status file found: it read it, or found it still the
/// file an earlier reading was taken from (see [`reread`]).
enum Looked<'a> {
    Read(CriContainer),
    Unchanged(&'a str),
}

/// Below this many status files, one thread reads them all.
const PARALLEL_FROM: usize = 500;

/// The status files of `ids`, on two threads when there are many: a file is
/// a few hundred bytes, so the cost is the kernel's open, read and close of
/// each, which two cores halve. A file whose version `known` holds (an
/// earlier reading's) and that is still that file is not read again.
/// A file gone while `listed` is no longer there (renamed away, unmounted)
/// makes the whole store unknown: one gap for the source, never a
/// container quietly taken for removed.
fn read_all<'a>(
    listed: &ListedDir,
    ids: impl IntoIterator<Item = &'a String>,
    known: &HashMap<&str, FileVersion>,
    gaps: &mut Vec<Gap>,
) -> Vec<Looked<'a>> {
    let containers_dir = listed.path();
    let ids: Vec<&String> = ids.into_iter().collect();
    let mut readings = Vec::with_capacity(ids.len());
    let lost = AtomicBool::new(false);
    for (read, unread) in crate::read::deadline::on_two_threads(&ids, PARALLEL_FROM, |ids| {
        // Each file is opened relative to the directory: a walk of
        // `<id>/status`, not of the whole path again; a descriptor of its
        // own for each piece, so each thread (see `open_dir`). Not a
        // directory (or gone): each file by its path, which then says why it
        // cannot be read. Another directory at its path is not one.
        let dir = open_dir(&nix::fcntl::AT_FDCWD, containers_dir)
            .ok()
            .filter(|dir| listed.is(dir));
        let mut gaps = Vec::new();
        // Room for every reading at once: grown a doubling at a time, the
        // readings (a few hundred bytes each) were copied again and again.
        let mut read: Vec<Looked> = Vec::with_capacity(ids.len());
        read.extend(ids.iter().filter_map(|id| {
            let unchanged = dir
                .as_ref()
                .zip(known.get(id.as_str()))
                .is_some_and(|(dir, known)| {
                    version_at(dir, &Path::new(id.as_str()).join("status")).as_ref() == Some(known)
                });
            if unchanged {
                return Some(Looked::Unchanged(id.as_str()));
            }
            let from = Store {
                listed,
                opened: dir.as_ref(),
                lost: &lost,
            };
            read_one(&from, (*id).clone(), &mut gaps).map(Looked::Read)
        }));
        (read, gaps)
    }) {
        readings.extend(read);
        gaps.extend(unread);
    }
    if lost.into_inner() {
        gaps.push(Gap::source(SOURCE, containers_dir, MOVED_AWAY));
    }
    readings
}

/// Where [`read_one`] reads: the directory as listed, open when it could
/// be, and whether a file was lost with it.
struct Store<'a> {
    listed: &'a ListedDir,
    opened: Option<&'a File>,
    lost: &'a AtomicBool,
}

/// Reads the status files of `ids` again, as [`read`] does, except those
/// that are still the very files `earlier` was read from: a second look at
/// thousands of suspects (every container of a node whose shims stall)
/// then costs a `stat` each, where reading costs an open, a read and a
/// close. containerd replaces a status file whenever the status changes
/// (see [`FileVersion`]).
///
/// `listed` is the directory the first look listed: a file missing now is
/// removed only while the path still names it. Not known (an archive's
/// first look), the directory now stands for it.
pub fn reread(
    containers_dir: &Path,
    listed: Option<DirIdentity>,
    ids: &BTreeSet<String>,
    earlier: Vec<CriContainer>,
    gaps: &mut Vec<Gap>,
) -> Vec<CriContainer> {
    reading(containers_dir);
    let listed = match listed {
        Some(identity) => ListedDir::with(containers_dir, identity),
        None => match ListedDir::at(containers_dir) {
            Ok(listed) => listed,
            Err(err) => {
                gaps.push(Gap::source(
                    SOURCE,
                    containers_dir,
                    describe_dir_error(&err),
                ));
                return Vec::new();
            }
        },
    };
    let versions: HashMap<&str, FileVersion> = earlier
        .iter()
        .filter_map(|c| Some((c.id.as_str(), c.status_file?)))
        .collect();
    let readings = read_all(&listed, ids, &versions, gaps);
    // An unchanged file's earlier reading is kept as it is (moved, not
    // copied).
    let mut earlier: HashMap<String, CriContainer> =
        earlier.into_iter().map(|c| (c.id.clone(), c)).collect();
    readings
        .into_iter()
        .filter_map(|reading| match reading {
            Looked::Read(container) => Some(container),
            Looked::Unchanged(id) => earlier.remove(id),
        })
        .collect()
}

/// RemoveContainer deletes a status file by renaming `<id>/status` to the
/// sibling `<id>.del-status` first, then removing that and the directory
/// (`statusStorage.Delete` in containerd's CRI container store, the same in
/// 1.6 to 2.3).
const DELETING_SUFFIX: &str = ".del-status";

/// One container's status file, or `None` when it cannot be read: a gap, or
/// nothing at all when the container's directory was removed meanwhile or
/// its status file is being deleted (the container is going, which is not a
/// gap). Either only while the store is still the directory listed: gone
/// with it, the file is lost (`from.lost`), not removed.
fn read_one(from: &Store, id: String, gaps: &mut Vec<Gap>) -> Option<CriContainer> {
    let (containers_dir, opened) = (from.listed.path(), from.opened);
    let status_path = containers_dir.join(&id).join("status");
    let file = match opened {
        Some(opened) => read_regular_at(
            opened,
            format!("{id}/status").as_str(),
            &status_path,
            STATUS_SIZE_LIMIT,
            Links::Refuse,
        ),
        None => read_regular(&status_path, STATUS_SIZE_LIMIT, Links::Refuse),
    };
    match file.and_then(|file| Ok((parse_file(&file.bytes)?, file))) {
        Ok((status, file)) => Some(CriContainer {
            id,
            status_path,
            status_written_at: file.modified_nanos,
            status,
            status_file: Some(file_version(&file.metadata)),
        }),
        Err(err) if err.kind() == io::ErrorKind::NotFound && !from.listed.still_there() => {
            from.lost.store(true, Ordering::Relaxed);
            None
        }
        Err(err)
            if err.kind() == io::ErrorKind::NotFound
                && (!containers_dir.join(&id).exists()
                    || being_deleted(containers_dir, &id)
                    || being_created(containers_dir, &id)) =>
        {
            None
        }
        Err(err) => {
            gaps.push(Gap::item(SOURCE, &status_path, err));
            None
        }
    }
}

/// How long CRI's CreateContainer may take, from the container's directory
/// to its status file: kubelet's default `runtimeRequestTimeout`.
const CREATION_WINDOW: std::time::Duration = std::time::Duration::from_secs(120);

/// Whether the container's directory is one CRI's CreateContainer is still
/// filling: it makes the directory first and writes the status file only
/// once containerd's record is made (seconds under load), so a directory
/// without one changed within [`CREATION_WINDOW`] is a container being
/// made, not a lost status.
fn being_created(containers_dir: &Path, id: &str) -> bool {
    containers_dir
        .join(id)
        .symlink_metadata()
        .and_then(|m| m.modified())
        .is_ok_and(|at| at.elapsed().is_ok_and(|age| age < CREATION_WINDOW))
}

fn being_deleted(containers_dir: &Path, id: &str) -> bool {
    containers_dir
        .join(format!("{id}{DELETING_SUFFIX}"))
        .symlink_metadata()
        .is_ok()
}

/// Ids of the pod sandboxes CRI keeps directories for. CRI creates them under
/// both root (hostname, resolv.conf) and state (shm) and removes them with the
/// sandbox, so an id found in either still has CRI's attention.
pub fn sandbox_ids(dirs: &[PathBuf], gaps: &mut Vec<Gap>) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for dir in dirs {
        reading(dir);
        match fs::read_dir(dir) {
            Ok(entries) => ids.extend(
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned()),
            ),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => gaps.push(Gap::item(SOURCE, dir, err)),
        }
    }
    ids
}

fn parse_file(bytes: &[u8]) -> io::Result<CriStatus> {
    parse_status(bytes).map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err))
}

/// Parses a versioned status file. Unknown fields and versions newer than
/// "v1" are accepted as long as the known fields keep their meaning.
pub fn parse_status(bytes: &[u8]) -> Result<CriStatus, String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err("empty status file".to_string());
    }
    serde_json::from_slice::<CriStatus>(bytes).map_err(|err| format!("corrupt status file: {err}"))
}

/// Said of a containers directory that does not exist.
const NO_CONTAINERS_DIR: &str = "(wrong --root, or the CRI plugin has never run with it)";

fn describe_dir_error(err: &io::Error) -> String {
    if err.kind() == io::ErrorKind::NotFound {
        format!("{err} {NO_CONTAINERS_DIR}")
    } else {
        err.to_string()
    }
}

/// Whether `gap` says that the containers directory `dir` does not exist.
/// CRI makes it with its first container (`CreateContainer` makes
/// `containers/<id>`), so a node whose pods never got past their sandbox
/// (Pending behind a failing CNI ADD) has none: with the proven daemon's
/// CRI listing no container, that is an empty store, not a gap.
pub fn is_missing_containers_dir(gap: &Gap, dir: &Path) -> bool {
    gap.source == SOURCE
        && gap.source_unavailable
        && gap.path == dir
        && gap.error.ends_with(NO_CONTAINERS_DIR)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CriState;

    fn testdata(name: &str) -> Vec<u8> {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/status")
            .join(name);
        fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn many_status_files_are_read_on_two_threads_with_every_gap_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<String> = (0..PARALLEL_FROM + 100)
            .map(|i| format!("{i:064x}"))
            .collect();
        for id in &ids {
            fs::create_dir(dir.path().join(id)).unwrap();
            fs::write(dir.path().join(id).join("status"), testdata("running.json")).unwrap();
        }
        // One bad file early and one late, whichever half each falls in.
        for bad in [&ids[3], &ids[ids.len() - 3]] {
            fs::write(
                dir.path().join(bad).join("status"),
                testdata("truncated.json"),
            )
            .unwrap();
        }
        let mut gaps = Vec::new();
        let containers = read(dir.path(), &mut gaps).0;
        let read: Vec<&str> = containers.iter().map(|c| c.id.as_str()).collect();
        let mut want: Vec<&str> = ids.iter().map(String::as_str).collect();
        want.retain(|id| *id != ids[3] && *id != ids[ids.len() - 3]);
        assert_eq!(read, want);
        let mut gap_paths: Vec<_> = gaps.iter().map(|g| g.path.clone()).collect();
        gap_paths.sort();
        assert_eq!(
            gap_paths,
            [&ids[3], &ids[ids.len() - 3]].map(|id| dir.path().join(id).join("status"))
        );
    }

    /// `reread` after `read`, with the first reading's pid changed in
    /// memory: the pid it returns says whether the file was read again.
    fn reread_pid(dir: &Path, earlier_pid: i64) -> i64 {
        let mut gaps = Vec::new();
        let (mut earlier, listed) = read(dir, &mut gaps);
        earlier[0].status.pid = earlier_pid;
        let ids = BTreeSet::from(["a".to_string()]);
        let again = reread(dir, listed, &ids, earlier.clone(), &mut gaps);
        assert!(gaps.is_empty(), "{gaps:?}");
        again[0].status.pid
    }

    /// A store with one running container `a`: the store, its status file
    /// and the pid in it.
    fn one_running_container() -> (tempfile::TempDir, PathBuf, i64) {
        let dir = tempfile::tempdir().unwrap();
        let status = dir.path().join("a/status");
        fs::create_dir(dir.path().join("a")).unwrap();
        fs::write(&status, testdata("running.json")).unwrap();
        let pid = parse_status(&testdata("running.json")).unwrap().pid;
        (dir, status, pid)
    }

    #[test]
    fn reread_keeps_an_unchanged_file_and_reads_a_replaced_one() {
        let (dir, status, on_disk) = one_running_container();

        assert_eq!(
            reread_pid(dir.path(), 4242),
            4242,
            "the same file: not read"
        );

        // As containerd's atomic write does: a new file renamed over it.
        let mut grown = testdata("running.json");
        grown.push(b'\n');
        fs::write(dir.path().join("a/.status.tmp"), &grown).unwrap();
        fs::rename(dir.path().join("a/.status.tmp"), &status).unwrap();
        let mut gaps = Vec::new();
        let earlier = read(dir.path(), &mut gaps).0;
        fs::write(dir.path().join("a/.status.tmp"), testdata("running.json")).unwrap();
        fs::rename(dir.path().join("a/.status.tmp"), &status).unwrap();
        let ids = BTreeSet::from(["a".to_string()]);
        let mut changed = earlier.clone();
        changed[0].status.pid = 4242;
        let again = reread(dir.path(), None, &ids, changed.clone(), &mut gaps);
        assert_eq!(again[0].status.pid, on_disk, "replaced: read again");
        assert_ne!(again[0].status_file, earlier[0].status_file);

        // A reading that does not say which file (an archive's) is no proof.
        let mut unknown = earlier;
        unknown[0].status_file = None;
        unknown[0].status.pid = 4242;
        let again = reread(dir.path(), None, &ids, unknown.clone(), &mut gaps);
        assert_eq!(again[0].status.pid, on_disk, "no version: read again");
        assert!(gaps.is_empty(), "{gaps:?}");
    }

    #[test]
    fn reread_reads_a_file_written_in_place_again() {
        let (dir, status, on_disk) = one_running_container();
        let mut gaps = Vec::new();
        let mut earlier = read(dir.path(), &mut gaps).0;
        earlier[0].status.pid = 4242;
        // The same inode and size, a later mtime (set, not waited for: the
        // kernel's file times move in ticks).
        let file = fs::OpenOptions::new().write(true).open(&status).unwrap();
        file.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
            .unwrap();
        let ids = BTreeSet::from(["a".to_string()]);
        let again = reread(dir.path(), None, &ids, earlier.clone(), &mut gaps);
        assert_eq!(again[0].status.pid, on_disk);
        assert!(gaps.is_empty(), "{gaps:?}");
    }

    #[test]
    fn reread_drops_removed_containers_and_records_corrupt_ones() {
        let dir = tempfile::tempdir().unwrap();
        for (id, file) in [("a", "exited.json"), ("c", "truncated.json")] {
            fs::create_dir(dir.path().join(id)).unwrap();
            fs::write(dir.path().join(id).join("status"), testdata(file)).unwrap();
        }
        let ids = ["a", "b", "c"].map(String::from).into();
        let mut gaps = Vec::new();
        let containers = reread(dir.path(), None, &ids, Vec::new(), &mut gaps);
        let read: Vec<&str> = containers.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(read, ["a"], "b was removed, c is corrupt");
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(gaps[0].path.ends_with("c/status"), "{gaps:?}");
    }

    #[test]
    fn running_status_from_containerd_parses() {
        let status = parse_status(&testdata("running.json")).unwrap();
        assert_eq!(status.version, "v1");
        assert_eq!(status.state(), CriState::Running);
        assert!(status.pid > 0);
        assert!(status.started_at > status.created_at);
        assert_eq!(status.finished_at, 0);
    }

    #[test]
    fn exited_status_from_containerd_parses() {
        let status = parse_status(&testdata("exited.json")).unwrap();
        assert_eq!(status.state(), CriState::Exited);
        assert_eq!(status.pid, 0);
        assert!(status.finished_at > 0);
        // Captured from a container that exited at once: the exit event's
        // time precedes the StartedAt CRI stamps after task.Start returns,
        // and CRI derives "Completed" on read, it does not store a reason.
        assert!(status.finished_at < status.started_at);
        assert_eq!(status.reason, "");
    }

    #[test]
    fn zombie_status_reads_as_running() {
        // Captured while the container's process was already gone.
        let status = parse_status(&testdata("zombie.json")).unwrap();
        assert_eq!(status.state(), CriState::Running);
        assert!(status.pid > 0);
    }

    #[test]
    fn late_exit_status_keeps_the_real_exit_time() {
        let status = parse_status(&testdata("late-exit.json")).unwrap();
        assert_eq!(status.state(), CriState::Exited);
        assert!(status.finished_at > 0);
    }

    #[test]
    fn unknown_fields_and_newer_versions_are_tolerated() {
        let status = parse_status(&testdata("newer-version.json")).unwrap();
        assert_eq!(status.version, "v2");
        assert_eq!(status.pid, 4242);
        assert_eq!(status.state(), CriState::Running);
    }

    #[test]
    fn bad_files_are_errors_not_panics() {
        for (name, expected) in [
            ("empty.json", "empty status file"),
            ("truncated.json", "corrupt status file"),
            ("garbage.bin", "corrupt status file"),
            ("huge-number.json", "corrupt status file"),
        ] {
            let err = parse_status(&testdata(name)).unwrap_err();
            assert!(err.contains(expected), "{name}: {err}");
        }
    }

    #[test]
    fn corrupt_file_becomes_a_gap_naming_it_and_others_still_read() {
        use std::time::Duration;
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("a".repeat(64));
        let bad = dir.path().join("b".repeat(64));
        let missing = dir.path().join("c".repeat(64));
        // A directory CRI's CreateContainer is still filling: no status yet.
        let being_made = dir.path().join("d".repeat(64));
        for d in [&good, &bad, &missing, &being_made] {
            fs::create_dir(d).unwrap();
        }
        fs::write(good.join("status"), testdata("running.json")).unwrap();
        fs::write(bad.join("status"), testdata("truncated.json")).unwrap();
        // Past the creation window: its status is lost, not yet to come.
        let long_ago = std::time::SystemTime::now() - CREATION_WINDOW - Duration::from_secs(1);
        fs::File::open(&missing)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();

        let mut gaps = Vec::new();
        let containers = read(dir.path(), &mut gaps).0;
        assert_eq!(containers.len(), 1);
        assert_eq!(containers[0].id, "a".repeat(64));
        assert!(containers[0].status_written_at > 0);
        let mut gap_paths: Vec<_> = gaps.iter().map(|g| g.path.clone()).collect();
        gap_paths.sort();
        assert_eq!(gap_paths, vec![bad.join("status"), missing.join("status")]);
        assert!(gaps.iter().all(|g| !g.source_unavailable));
    }

    #[test]
    fn a_directory_whose_name_is_not_utf8_is_a_gap_not_silently_skipped() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let odd = dir.path().join(std::ffi::OsStr::from_bytes(b"\x80"));
        fs::create_dir(&odd).unwrap();
        fs::write(odd.join("status"), testdata("running.json")).unwrap();
        let mut gaps = Vec::new();
        assert!(read(dir.path(), &mut gaps).0.is_empty());
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert_eq!(gaps[0].path, odd.join("status"));
        assert!(gaps[0].error.contains("not UTF-8"), "{gaps:?}");
    }

    #[test]
    fn a_status_file_being_deleted_is_not_a_gap() {
        // RemoveContainer mid-way: `<id>/status` renamed to `<id>.del-status`,
        // the directory not yet removed.
        let dir = tempfile::tempdir().unwrap();
        let going = "d".repeat(64);
        fs::create_dir(dir.path().join(&going)).unwrap();
        fs::write(
            dir.path().join(format!("{going}.del-status")),
            testdata("exited.json"),
        )
        .unwrap();
        let live = dir.path().join("e".repeat(64));
        fs::create_dir(&live).unwrap();
        fs::write(live.join("status"), testdata("running.json")).unwrap();

        let mut gaps = Vec::new();
        let containers = read(dir.path(), &mut gaps).0;
        assert_eq!(gaps, vec![]);
        let ids: Vec<&str> = containers.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, vec!["e".repeat(64)]);
        let again = reread(
            dir.path(),
            None,
            &BTreeSet::from([going]),
            Vec::new(),
            &mut gaps,
        );
        assert!(again.is_empty() && gaps.is_empty(), "{gaps:?}");
    }

    #[test]
    fn missing_store_makes_the_source_unavailable() {
        let mut gaps = Vec::new();
        let containers = read(Path::new("/nonexistent/nodectl/containers"), &mut gaps).0;
        assert!(containers.is_empty());
        assert_eq!(gaps.len(), 1);
        assert!(gaps[0].source_unavailable);
        assert!(gaps[0].error.contains("--root"), "{}", gaps[0].error);
    }

    /// A store of running containers `a` and `b`, listed: the store's
    /// path, inside a directory it can be renamed in, and its identity.
    fn listed_store() -> (tempfile::TempDir, PathBuf, DirIdentity) {
        let parent = tempfile::tempdir().unwrap();
        let store = parent.path().join("containers");
        for id in ["a", "b"] {
            fs::create_dir_all(store.join(id)).unwrap();
            fs::write(store.join(id).join("status"), testdata("running.json")).unwrap();
        }
        let listed = ListedDir::at(&store).unwrap().identity();
        (parent, store, listed)
    }

    #[test]
    fn a_store_renamed_away_between_listing_and_reading_is_blind_not_empty() {
        let (parent, store, identity) = listed_store();
        let ids = ["a", "b"].map(String::from);
        // Listed, then moved away (as an unmounted root would leave it)
        // before a file is read.
        fs::rename(&store, parent.path().join("moved")).unwrap();
        let mut gaps = Vec::new();
        let read = read_all(
            &ListedDir::with(&store, identity),
            &ids,
            &HashMap::new(),
            &mut gaps,
        );
        assert!(read.is_empty());
        assert_eq!(
            gaps.len(),
            1,
            "one gap for the store, none per file: {gaps:?}"
        );
        assert!(gaps[0].source_unavailable, "{gaps:?}");
        assert_eq!(gaps[0].path, store);
        // Another, empty directory put at its path is not the one listed.
        fs::create_dir(&store).unwrap();
        let mut gaps = Vec::new();
        let read = read_all(
            &ListedDir::with(&store, identity),
            &ids,
            &HashMap::new(),
            &mut gaps,
        );
        assert!(read.is_empty());
        assert!(gaps.len() == 1 && gaps[0].source_unavailable, "{gaps:?}");
    }

    #[test]
    fn a_store_renamed_away_between_two_looks_is_blind_at_the_second() {
        let (parent, store, _) = listed_store();
        let mut gaps = Vec::new();
        let (earlier, listed) = read(&store, &mut gaps);
        assert_eq!(earlier.len(), 2);
        let ids = ["a", "b"].map(String::from).into();
        fs::rename(&store, parent.path().join("moved")).unwrap();
        let again = reread(&store, listed, &ids, earlier.clone(), &mut gaps);
        assert!(again.is_empty());
        assert!(gaps.len() == 1 && gaps[0].source_unavailable, "{gaps:?}");
        // Back in place: a container removed meanwhile is no gap.
        fs::rename(parent.path().join("moved"), &store).unwrap();
        fs::remove_dir_all(store.join("b")).unwrap();
        let mut gaps = Vec::new();
        let again = reread(&store, listed, &ids, earlier, &mut gaps);
        let read: Vec<&str> = again.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(read, ["a"]);
        assert!(gaps.is_empty(), "{gaps:?}");
    }
}
