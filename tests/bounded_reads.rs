//! Every read is bounded: whatever tenants or a sick disk left where
//! containerd keeps its files (a FIFO, a huge file, a device behind a
//! symlink, a symlink loop, a file system whose reads never return), nodectl
//! answers within `--timeout` + 1 s, with valid JSON, the exit code of the
//! contract and a gap naming the path and what was wrong with it.

mod support;

use std::fs::{self, File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

/// README's bound: `--timeout` (1 s, as [`Node::run`] passes) + 1 s.
const PROMISED: Duration = Duration::from_secs(2);
/// What a loaded CI machine may add to it (process start, a busy core).
const MARGIN: Duration = Duration::from_secs(2);

const GOOD_ID: &str = "1111111111111111111111111111111111111111111111111111111111111111";
const BAD_ID: &str = "2222222222222222222222222222222222222222222222222222222222222222";

/// A containerd root and state made by hand, as in tests/cli.rs.
struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Node {
        let node = Node {
            dir: support::hand_made_node(),
        };
        fs::write(node.config(), "version = 2\n").unwrap();
        node
    }

    fn containers(&self) -> PathBuf {
        self.dir.path().join(support::HAND_MADE_CONTAINERS)
    }

    fn bundles(&self) -> PathBuf {
        self.dir.path().join(support::HAND_MADE_BUNDLES)
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    /// `<containers>/<id>/status`, its directory created.
    fn status(&self, id: &str) -> PathBuf {
        let dir = self.containers().join(id);
        fs::create_dir_all(&dir).unwrap();
        dir.join("status")
    }

    /// A container whose process is long gone while CRI says RUNNING.
    fn add_zombie(&self, id: &str) {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let started = chrono::Utc::now().timestamp_nanos_opt().unwrap() - 60_000_000_000;
        let status = format!(
            r#"{{"Version":"v1","Pid":{pid},"CreatedAt":{},"StartedAt":{started},"FinishedAt":0,"ExitCode":0,"Reason":"","Message":""}}"#,
            started - 100_000_000
        );
        fs::write(self.status(id), status).unwrap();
    }

    /// Runs nodectl on this tree with `-o json --timeout 1s`, killed after
    /// a minute (a hang fails the test instead of hanging it); the time it
    /// took, printed.
    fn run(&self, args: &[&str]) -> (Output, Duration) {
        self.run_with_config(args, &self.config())
    }

    fn run_with_config(&self, args: &[&str], config: &Path) -> (Output, Duration) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_nodectl"));
        command
            .args(args)
            .args(["-o", "json", "--timeout", "1s"])
            .arg("--root")
            .arg(self.dir.path().join("root"))
            .arg("--state")
            .arg(self.dir.path().join("state"))
            .arg("--address")
            .arg(self.dir.path().join("containerd.sock"))
            .arg("--config")
            .arg(config);
        let started = Instant::now();
        let output = support::run_bounded(&mut command, Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{e}"));
        let took = started.elapsed();
        eprintln!("nodectl {args:?}: answered in {took:.2?}");
        (output, took)
    }
}

/// Answered in time, exited `code`, printed a report valid against the
/// schema; returns it.
fn answered(output: &Output, took: Duration, code: i32) -> Value {
    in_time(took);
    assert_eq!(
        output.status.code(),
        Some(code),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    support::report(output)
}

/// Answered within README's bound (and what a loaded machine adds).
fn in_time(took: Duration) {
    assert!(
        took <= PROMISED + MARGIN,
        "took {took:?}; README promises --timeout + 1 s = {PROMISED:?}"
    );
}

/// The gap for `path`, whose error says `says`.
fn gap_for<'a>(doc: &'a Value, path: &Path, says: &str) -> &'a Value {
    let gaps = doc["gaps"].as_array().unwrap();
    let gap = gaps
        .iter()
        .find(|g| g["path"] == path.to_str().unwrap())
        .unwrap_or_else(|| panic!("no gap for {}: {gaps:#?}", path.display()));
    let error = gap["error"].as_str().unwrap();
    assert!(error.contains(says), "{}: {error}", path.display());
    gap
}

#[test]
fn a_fifo_as_status_is_a_gap_and_the_zombie_beside_it_is_still_found() {
    let node = Node::new();
    let fifo = node.status(BAD_ID);
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    node.add_zombie(GOOD_ID);
    let (output, took) = node.run(&["zombies", "--settle", "0s"]);
    let doc = answered(&output, took, 1);
    gap_for(&doc, &fifo, "a FIFO");
    assert_eq!(
        support::finding_keys(&doc),
        [("zombie".to_string(), GOOD_ID.to_string())]
    );
}

#[test]
fn a_50_mb_status_file_is_a_gap_not_an_allocation() {
    let node = Node::new();
    let huge = node.status(BAD_ID);
    File::create(&huge)
        .unwrap()
        .set_len(50 * 1024 * 1024)
        .unwrap();
    let (output, took) = node.run(&["zombies", "--settle", "0s"]);
    let doc = answered(&output, took, 2);
    gap_for(&doc, &huge, "52428800 bytes, larger than");
}

#[test]
fn devices_symlinked_as_status_files_are_not_followed() {
    let node = Node::new();
    let zero = node.status(BAD_ID);
    symlink("/dev/zero", &zero).unwrap();
    let urandom = node.status(GOOD_ID);
    symlink("/dev/urandom", &urandom).unwrap();
    let (output, took) = node.run(&["zombies", "--settle", "0s"]);
    let doc = answered(&output, took, 2);
    gap_for(&doc, &zero, "a symlink");
    gap_for(&doc, &urandom, "a symlink");
}

#[test]
fn a_symlink_loop_and_a_directory_as_status_are_gaps() {
    let node = Node::new();
    let looped = node.status(BAD_ID);
    symlink("status", &looped).unwrap();
    let dir = node.status(GOOD_ID);
    fs::create_dir(&dir).unwrap();
    let (output, took) = node.run(&["zombies", "--settle", "0s"]);
    let doc = answered(&output, took, 2);
    gap_for(&doc, &looped, "a symlink");
    gap_for(&doc, &dir, "a directory");
}

#[test]
fn fifos_as_bundle_files_and_as_the_config_are_gaps() {
    let node = Node::new();
    let bundle = node.bundles().join(BAD_ID);
    fs::create_dir(&bundle).unwrap();
    let fifo = |path: &Path| {
        nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap()
    };
    for name in ["config.json", "shim.pid", "address"] {
        fifo(&bundle.join(name));
    }
    fs::remove_file(node.config()).unwrap();
    fifo(&node.config());
    let (output, took) = node.run(&["leaked-mounts"]);
    let doc = answered(&output, took, 2);
    gap_for(&doc, &bundle.join("config.json"), "a FIFO");
    gap_for(&doc, &node.config(), "a FIFO");
}

#[test]
fn a_fifo_or_dev_zero_as_collects_mount_table_is_a_gap_in_time() {
    let node = Node::new();
    let fifo = node.dir.path().join("mountinfo-fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    for (mountinfo, says) in [
        (fifo.as_path(), "a FIFO, where a regular file belongs"),
        (
            Path::new("/dev/zero"),
            "a character device, where a regular file belongs",
        ),
    ] {
        let archive = node.dir.path().join("evidence.tar.gz");
        let _ = fs::remove_file(&archive);
        let (output, took) = node.run(&[
            "collect",
            archive.to_str().unwrap(),
            "--mountinfo",
            mountinfo.to_str().unwrap(),
        ]);
        // The archive is written (collect's 0), with what it could not read.
        answered(&output, took, 0);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let said = format!(
            "could not read (recorded in the archive): mountinfo {}: {says}",
            mountinfo.display()
        );
        assert!(stderr.contains(&said), "{stderr}");
        let entries = support::archive_files(&archive);
        let names: Vec<&str> = entries.iter().map(|(name, ..)| name.as_str()).collect();
        assert!(!names.contains(&"files/mountinfo"), "{names:?}");
        let snapshots: Value = serde_json::from_slice(&entries[0].1).unwrap();
        gap_for(&snapshots["first"], mountinfo, says);
        // Not the 2.1 GB /dev/zero once grew it to.
        let size = fs::metadata(&archive).unwrap().len();
        assert!(size < 1 << 20, "{} bytes", size);
    }
}

#[test]
fn check_from_a_fifo_is_refused_in_time_naming_it() {
    let node = Node::new();
    let fifo = node.dir.path().join("evidence.tar.gz");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let (output, took) = node.run(&["check", "--from", fifo.to_str().unwrap()]);
    in_time(took);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    let said = format!(
        "nodectl: {}: a FIFO, where a regular file belongs: not read",
        fifo.display()
    );
    assert!(stderr.contains(&said), "{stderr}");
}

/// A FUSE file system that never answers: `/dev/fuse` is opened and
/// mounted (as root, mount(2) takes the descriptor directly, no libfuse or
/// fusermount needed) and nobody ever reads the kernel's requests. The
/// kernel sends INIT in the background, so the mount succeeds; every
/// request after it (lookup, opendir, read) waits for INIT's answer,
/// killably, forever: what a stalled FUSE or NFS server looks like.
struct StuckFuse {
    mount_point: PathBuf,
    device: Option<File>,
}

impl StuckFuse {
    fn mount(mount_point: &Path) -> Result<StuckFuse, String> {
        if !nix::unistd::geteuid().is_root() {
            return Err("mounting FUSE needs root".to_string());
        }
        let device = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .map_err(|e| format!("/dev/fuse: {e}"))?;
        fs::create_dir_all(mount_point).unwrap();
        let data = format!(
            "fd={},rootmode=40000,user_id=0,group_id=0",
            device.as_raw_fd()
        );
        nix::mount::mount(
            Some("nodectl-stuck"),
            mount_point,
            Some("fuse"),
            nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV,
            Some(data.as_str()),
        )
        .map_err(|e| format!("mounting FUSE at {}: {e}", mount_point.display()))?;
        Ok(StuckFuse {
            mount_point: mount_point.to_path_buf(),
            device: Some(device),
        })
    }
}

impl Drop for StuckFuse {
    fn drop(&mut self) {
        // Lazy: a plain unmount of a busy FUSE mount fails. Closing the
        // device then aborts the connection, failing any request still
        // waiting (ENOTCONN), so nothing stays stuck in it.
        let _ = nix::mount::umount2(&self.mount_point, nix::mount::MntFlags::MNT_DETACH);
        drop(self.device.take());
        if mounted(&self.mount_point) {
            support::teardown_failed(&format!("{} is still mounted", self.mount_point.display()));
        }
    }
}

fn mounted(path: &Path) -> bool {
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(path.to_str().unwrap()))
}

#[test]
fn a_file_system_that_never_answers_blocks_no_command() {
    let node = Node::new();
    // A container's directory whose status file lookup never returns, and a
    // namespace's bundle directory whose readdir never returns.
    let stuck_status = node.containers().join(BAD_ID);
    let fuse = match (
        StuckFuse::mount(&stuck_status),
        StuckFuse::mount(&node.bundles()),
    ) {
        (Ok(a), Ok(b)) => [a, b],
        (Err(why), _) | (_, Err(why)) => {
            return support::skip("a_file_system_that_never_answers_blocks_no_command", &why)
        }
    };
    for (args, code) in [
        (&["zombies", "--settle", "0s"][..], 2),
        (&["leaked-shims"][..], 2),
        (&["leaked-mounts"][..], 2),
        (&["leaked-snapshots"][..], 2),
        (&["shims"][..], 2),
        (&["check"][..], 2),
    ] {
        let (output, took) = node.run(args);
        let doc = answered(&output, took, code);
        let gap = gap_for(
            &doc,
            &stuck_status.join("status"),
            "blocked: no answer after",
        );
        assert_eq!(gap["source"], "cri-store", "{args:?}");
        let gap = gap_for(&doc, &node.bundles(), "blocked: no answer after");
        assert_eq!(gap["source"], "bundles", "{args:?}");
    }
    // An archive on such a file system: `check --from` gives up once it
    // has read nothing for `--timeout` + 1 s.
    let archive = node.bundles().join("evidence.tar.gz");
    let (output, took) = node.run(&["check", "--from", archive.to_str().unwrap()]);
    in_time(took);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    assert!(
        stderr.contains(&format!(
            "{}: blocked: nothing read for 2s",
            archive.display()
        )),
        "{stderr}"
    );

    let evidence = node.dir.path().join("evidence.tar.gz");
    let (output, took) = node.run(&["collect", evidence.to_str().unwrap()]);
    // collect's status says whether the archive was written (0); what it
    // could not read goes into the archive and onto stderr.
    in_time(took);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stderr: {stderr}");
    assert!(stderr.contains("blocked: no answer after"), "{stderr}");
    assert!(evidence.exists(), "collect wrote no evidence");

    // The config file, read before the rest, has a second of its own.
    let etc = node.dir.path().join("etc");
    let stuck_config = match StuckFuse::mount(&etc) {
        Ok(fuse) => fuse,
        Err(why) => panic!("mounted FUSE twice, not a third time: {why}"),
    };
    let config = etc.join("config.toml");
    let (output, took) = node.run_with_config(&["zombies", "--settle", "0s"], &config);
    let doc = answered(&output, took - Duration::from_secs(1), 2);
    assert!(took > Duration::from_secs(1), "took {took:?}");
    let gap = gap_for(&doc, &config, "blocked: no answer after 1s");
    assert_eq!(gap["source"], "config");
    gap_for(
        &doc,
        &stuck_status.join("status"),
        "blocked: no answer after",
    );

    drop((fuse, stuck_config));
    assert!(!mounted(&stuck_status) && !mounted(&node.bundles()) && !mounted(&etc));
}
