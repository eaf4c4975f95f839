//! `watch --recorder-file`: the flight recorder's ring, written out after
//! each change so that `collect` (another process) can archive it.
//!
//! Written on a thread of its own, the newest ring only: the write is
//! flushed to disk, and a disk under the very pressure being recorded must
//! not hold up `watch`'s looks. Written safely: into a directory only root
//! (this user) can write to, made 0700 when missing and refused when it is
//! a symlink or anyone else's, opened and checked from `/` with every
//! directory on the way one no one else could swap it in
//! ([`CheckedDir::own`]); as a new file beside the old one
//! (`O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600) renamed over it, relative to
//! that directory's descriptor, so never through a symlink, never
//! elsewhere, and never half written.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};

use crate::commands::flight_recorder::Recorder;
use crate::inert;
use crate::model::RecorderFile;
use crate::read::beside::{split, CheckedDir};

/// Hands the ring to the writing thread when it changed.
pub struct Keeper {
    shared: Arc<Shared>,
    /// The recorder's generation last handed over.
    handed: u64,
}

#[derive(Default)]
struct Shared {
    next: Mutex<Option<Vec<u8>>>,
    ready: Condvar,
}

impl Keeper {
    /// Starts the thread that writes to `path`; what fails is said on
    /// stderr (unless `quiet`), once until it changes.
    pub fn start(path: PathBuf, quiet: bool) -> Keeper {
        let shared = Arc::new(Shared::default());
        let theirs = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name("recorder-file".into())
            .spawn(move || write_each(&path, &theirs, quiet));
        if let Err(err) = spawned {
            say(quiet, &format!("flight recorder file not written: {err}"));
        }
        Keeper { shared, handed: 0 }
    }

    /// Hands `recorder`'s ring over when it changed since last time.
    pub fn keep(&mut self, recorder: &Recorder) {
        if recorder.generation() == self.handed {
            return;
        }
        self.handed = recorder.generation();
        let file = RecorderFile::new(
            env!("CARGO_PKG_VERSION"),
            &chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            recorder.recordings(),
        );
        let Ok(bytes) = serde_json::to_vec(&file) else {
            return;
        };
        if let Ok(mut next) = self.shared.next.lock() {
            *next = Some(bytes);
            self.shared.ready.notify_one();
        }
    }
}

fn write_each(path: &std::path::Path, shared: &Shared, quiet: bool) {
    let mut failing: Option<String> = None;
    loop {
        let bytes = {
            let Ok(mut next) = shared.next.lock() else {
                return;
            };
            loop {
                if let Some(bytes) = next.take() {
                    break bytes;
                }
                next = match shared.ready.wait(next) {
                    Ok(next) => next,
                    Err(_) => return,
                };
            }
        };
        // The directory opened and checked again for each write: made again
        // if removed, and never a descriptor kept on one swapped meanwhile.
        let written = split(path).and_then(|(dir, name)| {
            CheckedDir::own(dir)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?
                .replace(name, &bytes, 0o600)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
        });
        match written {
            Ok(()) => {
                if failing.take().is_some() {
                    say(quiet, "flight recorder file written again");
                }
            }
            Err(err) => {
                let err = err.to_string();
                if failing.as_ref() != Some(&err) {
                    say(quiet, &format!("flight recorder file not written: {err}"));
                    failing = Some(err);
                }
            }
        }
    }
}

fn say(quiet: bool, what: &str) {
    if !quiet {
        eprintln!("nodectl: watch: {}", inert::shown(what));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Finding, Kind, Observation, Severity};
    use std::fs;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::time::{Duration, Instant};

    fn zombie(id: &str) -> Finding {
        Finding {
            kind: Kind::Zombie,
            severity: Severity::Critical,
            id: id.to_string(),
            summary: String::new(),
            evidence: serde_json::json!({"shim_pid": 7, "shim_in_umount2": true}),
            cause: String::new(),
            remedy: String::new(),
        }
    }

    fn seen(id: &str) -> Observation {
        let zombie = zombie(id);
        Observation::of_zombie(&zombie.id, &zombie.evidence)
    }

    fn sampled(id: &str) -> Recorder {
        let mut recorder = Recorder::default();
        recorder.sample(&seen(id), None, Instant::now(), "2026-01-01T00:00:00Z");
        recorder
    }

    /// The file at `path` once it holds `recordings` recordings.
    fn written(path: &std::path::Path, recordings: usize) -> RecorderFile {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let file = fs::read(path)
                .ok()
                .and_then(|b| serde_json::from_slice::<RecorderFile>(&b).ok());
            match file {
                Some(file) if file.recordings.len() == recordings => return file,
                _ if Instant::now() > until => panic!("{} not written", path.display()),
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    #[test]
    fn the_ring_is_written_after_each_change_private_and_in_a_directory_made_for_it() {
        let top = tempfile::tempdir().unwrap();
        let path = top.path().join("nodectl/flight-recorder.json");
        let mut keeper = Keeper::start(path.clone(), true);
        let mut recorder = sampled("c1");
        keeper.keep(&recorder);
        let file = written(&path, 1);
        assert_eq!(file.recordings[0].container_id, "c1");
        assert_eq!(file.recordings[0].samples_in_umount2, 1);
        assert_eq!(file.ring, 256);
        let mode = |p: &std::path::Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        recorder.sample(&seen("c2"), None, Instant::now(), "t");
        keeper.keep(&recorder);
        assert_eq!(written(&path, 2).recordings[1].container_id, "c2");
    }

    #[test]
    fn a_directory_that_is_a_symlink_is_not_written_into() {
        let top = tempfile::tempdir().unwrap();
        let elsewhere = top.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o700)).unwrap();
        symlink(&elsewhere, top.path().join("nodectl")).unwrap();
        let path = top.path().join("nodectl/flight-recorder.json");
        let mut keeper = Keeper::start(path.clone(), true);
        keeper.keep(&sampled("c1"));
        std::thread::sleep(Duration::from_millis(300));
        assert!(!elsewhere.join("flight-recorder.json").exists());
        assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
    }
}
