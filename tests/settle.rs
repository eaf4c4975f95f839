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

/// A container that dies just before CRI records its exit looks like a
/// zombie for a moment: when CRI has recorded the exit by the second look,
/// `check` and `zombies` report nothing.
#[test]
fn a_zombie_gone_by_the_second_look_is_not_reported() {
    for command in [&["check", "-o", "json"][..], &["zombies", "-o", "json"]] {
        let node = node_with_a_zombie();
        let status = node
            .path()
            .join("root/io.containerd.grpc.v1.cri/containers")
            .join(ID)
            .join("status");
        let exited = fs::read_to_string(&status).unwrap().replace(
            r#""FinishedAt":0"#,
            &format!(r#""FinishedAt":{}"#, {
                chrono::Utc::now().timestamp_nanos_opt().unwrap()
            }),
        );
        let dir = node.path().to_path_buf();
        let args: Vec<String> = [command, &["--settle", "3s"]]
            .concat()
            .iter()
            .map(|a| a.to_string())
            .collect();
        let runner = std::thread::spawn(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run(&dir, &args)
        });
        // The first look takes well under a second; CRI records the exit
        // during the settle (containerd writes the status file by rename).
        std::thread::sleep(Duration::from_millis(1200));
        let replacement = status.with_file_name("status.tmp");
        fs::write(&replacement, exited).unwrap();
        fs::rename(&replacement, &status).unwrap();
        let (output, took) = runner.join().unwrap();
        assert!(took >= Duration::from_secs(3), "{command:?} settled");
        let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let kinds: Vec<&str> = doc["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f["kind"].as_str())
            .collect();
        assert!(!kinds.contains(&"zombie"), "{command:?}: {doc}");
    }
}
