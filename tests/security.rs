//! What nodectl does with hostile input, as a user meets it: flags out of
//! bounds are usage errors (never a panic, never a wrap), `collect` writes a
//! private archive without following links or clobbering its inputs and
//! without the registry credentials, and `check --from` refuses an archive
//! no node could have written before it costs memory.

mod support;

use std::fs;
use std::io::Write;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Node {
        let dir = support::hand_made_node();
        fs::write(
            dir.path().join("config.toml"),
            r#"version = 2
[plugins."io.containerd.grpc.v1.cri".registry]
config_path = "/etc/containerd/certs.d"
[plugins."io.containerd.grpc.v1.cri".registry.configs."registry.example".auth]
username = "robot"
password = "hunter2"
auth = """cm9ib3Q6
aHVudGVyMg=="""
identitytoken = 'eyJhbGciOi'
[plugins."io.containerd.grpc.v1.cri".registry.configs."registry.example".tls]
key_file = "/etc/ssl/robot.key"
"#,
        )
        .unwrap();
        Node { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn run(&self, args: &[&str]) -> Output {
        let dir = self.dir.path();
        Command::new(env!("CARGO_BIN_EXE_nodectl"))
            .args(args)
            .arg("--root")
            .arg(dir.join("root"))
            .arg("--state")
            .arg(dir.join("state"))
            .arg("--address")
            .arg(dir.join("nothing-listens.sock"))
            .arg("--config")
            .arg(dir.join("config.toml"))
            .args(["--timeout", "1s"])
            .output()
            .unwrap()
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn out_of_bounds_flags_are_usage_errors_not_panics() {
    let node = Node::new();
    for args in [
        &["check", "--timeout", "9223372036854775807s"][..],
        &["check", "--timeout", "11m"],
        &["zombies", "--late-after", "10000000000h"],
        &["zombies", "--since", "11years"],
        &["zombies", "--settle", "2m"],
        &[
            "leaked-shims",
            "--kill",
            "--yes",
            "--grace",
            "1000000000000s",
        ],
        &["zombies", "-n", "../../../../etc"],
        &["zombies", "-n", "k8s.io/../../x"],
    ] {
        let output = node.run(args);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("error: invalid value"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // The bounds themselves are accepted.
    let output = node.run(&[
        "zombies",
        "--late-after",
        "3652days",
        "--settle",
        "1m",
        "-n",
        "a",
    ]);
    assert_ne!(output.status.code(), Some(101), "{}", stderr(&output));
    assert!(
        !stderr(&output).contains("invalid value"),
        "{}",
        stderr(&output)
    );
}

fn archive_files(path: &Path) -> Vec<(String, Vec<u8>, u32)> {
    let file = fs::File::open(path).unwrap();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    archive
        .entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = e.path().unwrap().display().to_string();
            let mode = e.header().mode().unwrap();
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut bytes).unwrap();
            (name, bytes, mode)
        })
        .collect()
}

#[test]
fn collect_writes_a_private_redacted_archive_and_exits_0_with_the_api_down() {
    let node = Node::new();
    let out = node.path("evidence.tar.gz");
    let output = node.run(&["collect", out.to_str().unwrap()]);
    let err = stderr(&output);
    // containerd is down (nothing listens): the archive is still written,
    // and the gap goes to stderr and into the archive.
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(err.contains("containerd-api"), "{err}");
    let mode = fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "archive mode {mode:o}");
    let files = archive_files(&out);
    let (_, config, config_mode) = files
        .iter()
        .find(|(name, ..)| name == "files/containerd-config.toml")
        .expect("config archived");
    assert_eq!(config_mode & 0o077, 0);
    let config = String::from_utf8(config.clone()).unwrap();
    for secret in ["hunter2", "cm9ib3Q6", "aHVudGVyMg", "eyJhbGciOi"] {
        assert!(!config.contains(secret), "{secret} archived: {config}");
    }
    assert!(config.contains("<redacted>"), "{config}");
    assert!(
        config.contains("/etc/ssl/robot.key"),
        "paths stay: {config}"
    );
    assert!(config.contains("config_path"), "{config}");
    let snapshots = &files
        .iter()
        .find(|(n, ..)| n == "snapshots.json")
        .unwrap()
        .1;
    assert!(!String::from_utf8_lossy(snapshots).contains("hunter2"));
}

#[test]
fn collect_never_replaces_a_file_unless_forced_and_never_follows_a_symlink() {
    let node = Node::new();
    // An existing file is an error without --force.
    let out = node.path("evidence.tar.gz");
    fs::write(&out, b"keep me").unwrap();
    let output = node.run(&["collect", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("--force"), "{}", stderr(&output));
    assert_eq!(fs::read(&out).unwrap(), b"keep me");

    // A symlink planted at the output path: the target is never written,
    // with or without --force.
    let target = node.path("precious");
    fs::write(&target, b"precious").unwrap();
    let link = node.path("link.tar.gz");
    symlink(&target, &link).unwrap();
    let output = node.run(&["collect", link.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let output = node.run(&["collect", "--force", link.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(fs::read(&target).unwrap(), b"precious");
    assert!(!fs::symlink_metadata(&link).unwrap().is_symlink());

    // The config it collects is never the output, even with --force, nor
    // through a link to it.
    let config = node.path("config.toml");
    let before = fs::read(&config).unwrap();
    let output = node.run(&["collect", "--force", config.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("collected"), "{}", stderr(&output));
    let hard = node.path("hard.tar.gz");
    fs::hard_link(&config, &hard).unwrap();
    let output = node.run(&["collect", "--force", hard.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(fs::read(&config).unwrap(), before);
    // Nothing half-written is left behind.
    let leftovers: Vec<_> = fs::read_dir(node.dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn archive_with(path: &Path, snapshots: impl std::io::Read, size: u64) {
    let file = fs::File::create(path).unwrap();
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        file,
        flate2::Compression::fast(),
    ));
    let mut header = tar::Header::new_gnu();
    header.set_size(size);
    header.set_mode(0o600);
    tar.append_data(&mut header, "snapshots.json", snapshots)
        .unwrap();
    tar.into_inner().unwrap().finish().unwrap().flush().unwrap();
}

/// Runs `check --from`; with the peak RSS of the children so far (KiB).
fn check_from(path: &Path) -> (Output, u64) {
    let child = Command::new(env!("CARGO_BIN_EXE_nodectl"))
        .args(["check", "--from"])
        .arg(path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let output = child.wait_with_output().unwrap();
    // The largest of this process's waited-for children: every nodectl
    // these tests start is meant to stay small, so the largest bounds this one.
    let mut usage: nix::libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { nix::libc::getrusage(nix::libc::RUSAGE_CHILDREN, &mut usage) },
        0
    );
    (output, usage.ru_maxrss as u64)
}

#[test]
fn check_from_refuses_what_no_node_writes_before_it_costs_memory() {
    let dir = tempfile::tempdir().unwrap();
    // A gzip bomb: 600 MiB of spaces inflating from a few hundred KB; the
    // header claims 600 MiB. And one whose header lies (claims 1 KB).
    let big: u64 = 600 << 20;
    let bomb = dir.path().join("bomb.tar.gz");
    archive_with(&bomb, std::io::repeat(b' ').take_bytes(big), big);
    let (output, _) = check_from(&bomb);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains("snapshots.json is larger than 256 MiB")
            && err.contains("not a nodectl evidence archive"),
        "{err}"
    );

    // Millions of tiny values: each costs far more parsed than as text.
    let values = dir.path().join("values.tar.gz");
    let mut json = b"{\"junk\": [".to_vec();
    json.extend(std::iter::repeat_n(&b"\"\","[..], 6_000_000).flatten());
    json.extend_from_slice(b"\"\"]}");
    let len = json.len() as u64;
    archive_with(&values, &json[..], len);
    let (output, rss_kib) = check_from(&values);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("not a nodectl evidence archive"), "{err}");
    assert!(rss_kib < 100 << 10, "peak RSS {rss_kib} KiB");
}

trait TakeBytes: std::io::Read + Sized {
    fn take_bytes(self, n: u64) -> std::io::Take<Self> {
        std::io::Read::take(self, n)
    }
}
impl<R: std::io::Read> TakeBytes for R {}
