//! One second look for every command that confirms what it reports:
//! `check`, `collect` and `zombies` all wait `--settle` after the first look
//! before calling a zombie one, and look at once with `--settle 0s`.
//!
//! The node is made by hand (no containerd): one container CRI's status file
//! calls running, whose process has exited.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const ID: &str = "5e771e5e771e5e771e5e771e5e771e5e771e5e771e5e771e5e771e5e771e5e77";

fn node_with_a_zombie() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let container = dir
        .path()
        .join("root/io.containerd.grpc.v1.cri/containers")
        .join(ID);
    fs::create_dir_all(&container).unwrap();
    fs::create_dir_all(
        dir.path()
            .join("state/io.containerd.runtime.v2.task/k8s.io"),
    )
    .unwrap();
    fs::write(dir.path().join("config.toml"), "version = 2\n").unwrap();
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let now = chrono::Utc::now().timestamp_nanos_opt().unwrap();
    let started = now - 60_000_000_000;
    let status = format!(
        r#"{{"Version":"v1","Pid":{pid},"CreatedAt":{},"StartedAt":{started},"FinishedAt":0,"ExitCode":0,"Reason":"","Message":""}}"#,
        started - 100_000_000
    );
    fs::write(container.join("status"), status).unwrap();
    dir
}

/// Runs nodectl on the node; returns its output and how long it took.
fn run(dir: &Path, args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_nodectl"))
        .args(args)
        .arg("--root")
        .arg(dir.join("root"))
        .arg("--state")
        .arg(dir.join("state"))
        .arg("--address")
        .arg(dir.join("nothing-listens.sock"))
        .arg("--config")
        .arg(dir.join("config.toml"))
        .args(["--timeout", "3s"])
        .output()
        .unwrap();
    (output, started.elapsed())
}

#[test]
fn check_collect_and_zombies_wait_the_one_settle_before_the_second_look() {
    let node = node_with_a_zombie();
    let archive = node.path().join("evidence.tar.gz");
    let archive = archive.to_str().unwrap();
    for command in [
        &["check", "-o", "json"][..],
        &["zombies", "-o", "json"],
        &["collect", archive, "--force", "-o", "json"],
    ] {
        let long = [command, &["--settle", "2500ms"]].concat();
        let (output, took) = run(node.path(), &long);
        assert!(
            took >= Duration::from_millis(2500),
            "{command:?} --settle 2500ms took {took:?}"
        );
        let at_once = [command, &["--settle", "0s"]].concat();
        let (quick, took_at_once) = run(node.path(), &at_once);
        assert!(
            took_at_once < Duration::from_millis(2000),
            "{command:?} --settle 0s took {took_at_once:?}"
        );
        if command[0] != "collect" {
            // Seen twice either way: the zombie is reported.
            for output in [&output, &quick] {
                assert_eq!(output.status.code(), Some(1), "{command:?}");
                let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
                assert_eq!(doc["findings"][0]["kind"], "zombie", "{command:?}");
                assert_eq!(doc["findings"][0]["id"], ID, "{command:?}");
            }
        }
    }
    // The archive holds both looks; checked offline, it is a zombie too.
    let (output, _) = run(node.path(), &["check", "-o", "json", "--from", archive]);
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(doc["findings"][0]["kind"], "zombie");
}
