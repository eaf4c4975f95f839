//! Two nodectl at once on one node, as the DaemonSet and a person run them:
//! two `check`s side by side, two `collect`s to the same archive, and a
//! `collect` beside `leaked-shims --kill --yes`. Neither disturbs the other,
//! and nobody ever sees a half-written archive: `collect` writes a fresh
//! file and renames (or links) it into place.
//!
//! The node is made by hand (no containerd; its socket answers nothing):
//! 2,000 CRI containers, so that writing an archive takes long enough for
//! a reader to catch it half-way if it were written in place.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const CONTAINERS: usize = 2000;

struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Node {
        let dir = support::hand_made_node();
        let exited =
            fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/status/exited.json"))
                .unwrap();
        for i in 0..CONTAINERS {
            let container = dir
                .path()
                .join(support::HAND_MADE_CONTAINERS)
                .join(format!("{i:064x}"));
            fs::create_dir(&container).unwrap();
            fs::write(container.join("status"), &exited).unwrap();
        }
        fs::write(dir.path().join("config.toml"), "version = 2\n").unwrap();
        Node { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn command(&self, args: &[&str]) -> Command {
        support::hand_made_command(self.dir.path(), args)
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }
}

#[test]
fn two_checks_at_once_each_print_the_whole_report() {
    let node = Node::new();
    let alone = support::report(&node.run(&["check", "-o", "json"]));
    let runs: Vec<_> = (0..2)
        .map(|_| {
            node.command(&["check", "-o", "json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for run in runs {
        let output = run.wait_with_output().unwrap();
        // No containerd: exit 2 with its gap, the same as alone.
        assert_eq!(
            output.status.code(),
            Some(2),
            "{}",
            support::stderr(&output)
        );
        let doc = support::report(&output);
        let kinds = |doc: &serde_json::Value| -> Vec<(String, String)> {
            doc["findings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| (f["kind"].to_string(), f["id"].to_string()))
                .collect()
        };
        assert_eq!(kinds(&doc), kinds(&alone));
        assert_eq!(doc["gaps"], alone["gaps"]);
    }
}

/// Whether `path` now holds a whole archive (`Ok(true)`) or none yet
/// (`Ok(false)`); anything else is a partial one. Whole: the gzip stream
/// ends with its checksum and length, and the tar holds every status file.
fn whole_or_absent(path: &Path) -> Result<bool, String> {
    let file = match fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e.to_string()),
    };
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut statuses = 0;
    for entry in tar.entries().map_err(|e| e.to_string())? {
        let mut entry = entry.map_err(|e| e.to_string())?;
        std::io::copy(&mut entry, &mut std::io::sink()).map_err(|e| e.to_string())?;
        if entry.path_bytes().starts_with(b"files/cri-status/") {
            statuses += 1;
        }
    }
    if statuses != CONTAINERS {
        return Err(format!("{statuses} status files of {CONTAINERS}"));
    }
    Ok(true)
}

/// Reads `path` over and over until `stop`, counting whole reads; returns
/// the first partial archive seen.
fn watch(
    path: PathBuf,
    stop: Arc<AtomicBool>,
    reads: Arc<AtomicUsize>,
) -> thread::JoinHandle<Option<String>> {
    thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match whole_or_absent(&path) {
                Ok(true) => {
                    reads.fetch_add(1, Ordering::Relaxed);
                }
                Ok(false) => thread::sleep(Duration::from_millis(1)),
                Err(err) => return Some(err),
            }
        }
        None
    })
}

#[test]
fn collects_to_the_same_archive_never_leave_it_half_written() {
    let node = Node::new();
    let archive = node.path("evidence.tar.gz");
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    let watcher = watch(archive.clone(), Arc::clone(&stop), Arc::clone(&reads));

    // Without --force, of two at once exactly one writes it and the other
    // says it exists; with --force both write, in turn, whole.
    let started = Instant::now();
    let pair = |args: &[&str]| -> Vec<Output> {
        let runs: Vec<_> = (0..2)
            .map(|_| {
                node.command(args)
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        runs.into_iter()
            .map(|run| run.wait_with_output().unwrap())
            .collect()
    };
    let first = pair(&["collect", archive.to_str().unwrap()]);
    let codes: Vec<_> = first.iter().map(|o| o.status.code()).collect();
    assert!(
        codes == [Some(0), Some(2)] || codes == [Some(2), Some(0)],
        "{codes:?}: {:?}",
        first.iter().map(support::stderr).collect::<Vec<_>>()
    );
    let refused = first.iter().find(|o| o.status.code() == Some(2)).unwrap();
    assert!(
        support::stderr(refused).contains("already exists"),
        "{}",
        support::stderr(refused)
    );
    for _ in 0..3 {
        for output in pair(&["collect", "--force", archive.to_str().unwrap()]) {
            assert_eq!(
                output.status.code(),
                Some(0),
                "{}",
                support::stderr(&output)
            );
        }
    }
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let partial = watcher.join().unwrap();
    assert_eq!(partial, None, "a reader saw a half-written archive");
    let reads = reads.load(Ordering::Relaxed);
    eprintln!("8 collects in {took:.2?}; the archive read whole {reads} times meanwhile");
    assert!(
        reads > 8,
        "the reader never overlapped the writers ({reads} reads)"
    );
    assert_eq!(whole_or_absent(&archive), Ok(true));
    let evidence = nodectl::archive::read(&archive, Duration::from_secs(10)).unwrap();
    assert_eq!(evidence.first.cri_containers.len(), CONTAINERS);
    assert_eq!(
        support::temp_files_left_in(node.dir.path()),
        Vec::<String>::new()
    );
}

#[test]
fn collect_beside_a_kill_gets_a_whole_archive_and_both_report() {
    if !nix::unistd::geteuid().is_root() {
        return support::skip(
            "collect_beside_a_kill_gets_a_whole_archive_and_both_report",
            "needs root (--kill)",
        );
    }
    let node = Node::new();
    let archive = node.path("evidence.tar.gz");
    let kill = node
        .command(&["leaked-shims", "--kill", "--yes", "-o", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let collect = node.run(&["collect", archive.to_str().unwrap()]);
    let kill = kill.wait_with_output().unwrap();
    assert_eq!(
        collect.status.code(),
        Some(0),
        "{}",
        support::stderr(&collect)
    );
    assert_eq!(whole_or_absent(&archive), Ok(true));
    // Nothing to kill here (no API to confirm a leak): no action, a whole
    // report, the same as alone.
    assert_ne!(kill.status.code(), Some(101), "{}", support::stderr(&kill));
    let doc = support::report(&kill);
    assert_eq!(doc["actions"], serde_json::Value::Null, "{doc}");
    assert_eq!(
        support::temp_files_left_in(node.dir.path()),
        Vec::<String>::new()
    );
}
