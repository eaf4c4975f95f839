//! Sources: each reads one kind of evidence from the node into the snapshot
//! and records what it could not read as a gap.

pub mod api;
pub mod bundles;
pub mod cni;
pub mod containerd_api;
pub mod containerd_proc;
pub mod containerd_snapshots;
pub mod cri_api;
pub mod cri_store;
pub mod daemon_proof;
pub mod daemon_version;
pub mod events;
pub mod host_view;
pub mod kubelet;
pub mod kubelet_config;
pub mod kubelet_runners;
pub mod kubelet_runtime;
pub mod mountinfo;
pub mod netns;
pub mod node;
pub mod pod_cgroups;
pub mod pod_resources;
pub mod proc_scan;
mod proc_stat;
pub mod shim_proof;
mod shim_threads;

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::model::{ApiCall, FileVersion, Gap, Source};
use crate::read::bounded::nanos;
use crate::read::deadline::DeadlineThread;

/// The version of the very file a bounded read read, from its own metadata.
pub(crate) fn file_version(metadata: &std::fs::Metadata) -> FileVersion {
    FileVersion {
        dev: metadata.dev(),
        ino: metadata.ino(),
        size: metadata.size(),
        mtime_nanos: nanos(metadata.mtime(), metadata.mtime_nsec()),
        ctime_nanos: nanos(metadata.ctime(), metadata.ctime_nsec()),
    }
}

/// The version of the regular file `name` is below `dir` now (not
/// following a symlink there), without opening it; `None` when it is gone,
/// not a regular file or cannot be looked at: read it to find out why.
pub(crate) fn version_at(dir: &File, name: &Path) -> Option<FileVersion> {
    let stat = nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).ok()?;
    if stat.st_mode & nix::libc::S_IFMT != nix::libc::S_IFREG {
        return None;
    }
    Some(FileVersion {
        dev: stat.st_dev,
        ino: stat.st_ino,
        size: u64::try_from(stat.st_size).ok()?,
        mtime_nanos: nanos(stat.st_mtime, stat.st_mtime_nsec),
        ctime_nanos: nanos(stat.st_ctime, stat.st_ctime_nsec),
    })
}

/// Gaps for the calls an API did not answer: a failed connect or version call
/// makes the whole API unavailable; other failures are single gaps.
pub(crate) fn api_gaps(source: Source, address: &Path, calls: &[ApiCall], gaps: &mut Vec<Gap>) {
    let unreachable = calls
        .iter()
        .find(|c| c.method.reaches_the_api() && c.error.is_some());
    if let Some(call) = unreachable {
        let error = format!(
            "{}: {}",
            call.text(),
            call.error.as_deref().unwrap_or_default()
        );
        gaps.push(Gap::source(source, address, error));
        return;
    }
    for call in calls.iter().filter(|c| c.error.is_some()) {
        let error = format!(
            "{}: {}",
            call.text(),
            call.error.as_deref().unwrap_or_default()
        );
        gaps.push(Gap::item(source, address, error));
    }
}

/// A source running on a thread of its own, to be waited for until a
/// deadline and abandoned after it (see [`DeadlineThread`]); its gaps come
/// back with its answer.
pub(crate) struct SourceThread<T> {
    source: Source,
    thread: DeadlineThread<(T, Vec<Gap>)>,
}

impl<T: Send + 'static> SourceThread<T> {
    pub(crate) fn spawn(
        source: Source,
        path: &Path,
        read: impl FnOnce(&mut Vec<Gap>) -> T + Send + 'static,
    ) -> SourceThread<T> {
        let thread = DeadlineThread::spawn(&source.to_string(), path, move || {
            let mut gaps = Vec::new();
            let value = read(&mut gaps);
            (value, gaps)
        });
        SourceThread { source, thread }
    }

    /// The source's answer (its gaps added to `gaps`), or `None` and a gap
    /// saying what it was stuck in and for how long.
    pub(crate) fn wait(self, until: Instant, started: Instant, gaps: &mut Vec<Gap>) -> Option<T> {
        let source = self.source;
        match self.answer(until, started) {
            Ok((value, mut source_gaps)) => {
                gaps.append(&mut source_gaps);
                Some(value)
            }
            Err((path, error)) => {
                gaps.push(Gap::source(source, path, error));
                None
            }
        }
    }

    /// The source's answer and gaps, or the path it is stuck in (else the
    /// one it was given) and what to say about it.
    pub(crate) fn answer(
        self,
        until: Instant,
        started: Instant,
    ) -> Result<(T, Vec<Gap>), (PathBuf, String)> {
        self.thread.answer(until, started)
    }
}

#[cfg(test)]
mod bounded_tests {
    use super::*;
    use crate::read::deadline::reading;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn a_source_that_blocks_is_a_gap_naming_what_it_reads_and_for_how_long() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("status");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let path = fifo.clone();
        // Opening a FIFO for reading blocks until a writer comes: none will.
        let source = SourceThread::spawn(Source::CriStore, dir.path(), move |_| {
            reading(&path);
            std::fs::read(&path)
        });
        let started = Instant::now();
        // On a thread of its own, so that a wait that does not end fails
        // this test instead of hanging it.
        let (send, waited_for) = mpsc::channel();
        std::thread::spawn(move || {
            let mut gaps = Vec::new();
            let answer = source.wait(started + Duration::from_millis(300), started, &mut gaps);
            send.send((answer.is_none(), gaps))
        });
        let (no_answer, gaps) = waited_for
            .recv_timeout(Duration::from_secs(10))
            .expect("the wait ends by its deadline");
        assert!(no_answer);
        let waited = started.elapsed();
        assert!(waited < Duration::from_secs(2), "waited {waited:?}");
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert_eq!(gaps[0].path, fifo);
        assert!(gaps[0].source_unavailable);
        // The time said is the time waited: 300 ms, or a little more on a
        // busy machine (303ms was seen).
        let said = gaps[0].error.strip_prefix("blocked: no answer after ");
        let waited_ms = said
            .and_then(|rest| rest.split_once("ms reading"))
            .and_then(|(ms, _)| ms.parse::<u64>().ok());
        assert!(
            waited_ms.is_some_and(|ms| (300..2000).contains(&ms)),
            "{}",
            gaps[0].error
        );
    }

    #[test]
    fn a_source_that_answers_in_time_gives_its_value_and_gaps() {
        let dir = tempfile::tempdir().unwrap();
        let source = SourceThread::spawn(Source::Bundles, dir.path(), |gaps| {
            gaps.push(Gap::item(Source::Bundles, "/x/config.json", "corrupt"));
            42
        });
        let started = Instant::now();
        let mut gaps = Vec::new();
        let answer = source.wait(started + Duration::from_secs(5), started, &mut gaps);
        assert_eq!(answer, Some(42));
        assert_eq!(
            gaps,
            vec![Gap::item(Source::Bundles, "/x/config.json", "corrupt")]
        );
    }

    #[test]
    fn a_source_that_panics_is_a_gap_not_a_crash() {
        let source: SourceThread<()> =
            SourceThread::spawn(Source::Procfs, Path::new("/proc"), |_| {
                panic!("a bug in a source")
            });
        let started = Instant::now();
        let mut gaps = Vec::new();
        assert!(source
            .wait(started + Duration::from_secs(5), started, &mut gaps)
            .is_none());
        assert_eq!(gaps.len(), 1);
        assert_eq!(gaps[0].path, Path::new("/proc"));
        assert!(gaps[0].error.starts_with("failed"), "{}", gaps[0].error);
    }
}
