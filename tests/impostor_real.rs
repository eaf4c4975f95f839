//! A process that only *looks* like a shim, on a real containerd: argv[0]
//! and `comm` say `containerd-shim-runc-v2`, its argv names the test bed's
//! namespace and socket, its working directory holds a FIFO named `address`;
//! but it runs as `nobody` in user, pid and mount namespaces of its own.
//! nodectl must never report it, block on it or kill it; and a real leaked
//! shim must still be found when `--address` is spelled through a symlink
//! or as a relative path.

mod support;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{procs, TestBed};

/// Every nodectl run must answer within this, FIFO or not.
const BOUND: Duration = Duration::from_secs(30);
const NOBODY: u32 = 65534;

/// nodectl against the bed with `--address` spelled as given, run from `cwd`.
fn nodectl_at(bed: &TestBed, address: &OsStr, cwd: &Path, args: &[&str]) -> (Output, Value) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodectl"));
    command
        .args(args)
        .arg("--root")
        .arg(bed.root())
        .arg("--state")
        .arg(bed.state())
        .arg("--config")
        .arg(bed.config_path())
        .arg("--address")
        .arg(address)
        .current_dir(cwd)
        .stdin(Stdio::null());
    let started = Instant::now();
    let output = support::run_bounded(&mut command, BOUND)
        .unwrap_or_else(|e| panic!("nodectl {args:?} (--address {address:?}): {e}"));
    eprintln!(
        "nodectl {args:?} --address {address:?}: exit {:?} in {:.0} ms",
        output.status.code(),
        started.elapsed().as_secs_f64() * 1e3
    );
    let doc = support::report(&output);
    (output, doc)
}

fn kinds_for(doc: &Value, pid: i32) -> Vec<String> {
    doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["evidence"]["shim_pid"] == pid)
        .map(|f| f["kind"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The forger: a copy of bash named `containerd-shim-runc-v2` (so `comm`
/// says shim too), run as nobody under `unshare -Urpmf`, argv[0] set with
/// `exec -a`, sitting in a builtin `read` on the FIFO (no child process,
/// which would make any shim look busy).
struct Forger {
    child: Child,
    pid: i32,
    _dir: tempfile::TempDir,
}

impl Drop for Forger {
    fn drop(&mut self) {
        // The forged process is the init of its pid namespace: only SIGKILL
        // reaches it from outside. Its pid stays its own meanwhile: unshare,
        // its parent, is alive and has not reaped it.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn forge(bed: &TestBed, id: &str) -> Forger {
    for tool in ["setpriv", "unshare", "bash"] {
        if !support::have(tool) {
            panic!("{tool} is needed (util-linux, bash) and missing");
        }
    }
    let dir = tempfile::Builder::new()
        .prefix("nodectl-forger")
        // Where nobody can reach it (the tests' own temp dir may not be).
        .tempdir_in("/tmp")
        .unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    nix::unistd::mkfifo(
        &dir.path().join("address"),
        nix::sys::stat::Mode::from_bits_truncate(0o666),
    )
    .unwrap();
    // mkfifo's mode passes through the umask; nobody opens it read-write.
    fs::set_permissions(
        dir.path().join("address"),
        fs::Permissions::from_mode(0o666),
    )
    .unwrap();
    let exe = dir.path().join("containerd-shim-runc-v2");
    // bash below execs it, not this spawn: copied so that no ETXTBSY can be.
    support::copy_executable(Path::new("/bin/bash"), &exe);
    let child = Command::new("setpriv")
        .arg(format!("--reuid={NOBODY}"))
        .arg(format!("--regid={NOBODY}"))
        .args([
            "--clear-groups",
            "unshare",
            "-Urpmf",
            "--kill-child",
            "bash",
            "-c",
        ])
        .arg(r#"exec -a containerd-shim-runc-v2 "$0" -c 'read -r _ <> address' "$@""#)
        .arg(&exe)
        .args(["-namespace", support::NAMESPACE, "-id", id, "-address"])
        .arg(bed.address())
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pid = None;
    // By its id and this bed's address: another bed (another line's run of
    // this very test, side by side) forges the same id.
    let address = bed.address().display().to_string();
    let found = support::wait_until(Duration::from_secs(10), || {
        pid = procs::with_flag("-id", id)
            .into_iter()
            .filter(|(_, args)| procs::flag(args, "-address") == Some(address.as_str()))
            .map(|(pid, _)| pid)
            .find(|&pid| {
                fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim() == "containerd-shim")
            });
        pid.is_some()
    });
    if !found {
        let mut child = child;
        let _ = child.kill();
        panic!(
            "the forged shim did not start: {:?}",
            child.wait_with_output()
        );
    }
    let pid = pid.unwrap();
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Uid:") && l.contains(&NOBODY.to_string())),
        "the forger runs as nobody: {status}"
    );
    Forger {
        child,
        pid,
        _dir: dir,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_shim_is_never_reported_nor_killed_and_address_spelling_does_not_matter() {
    let Some(bed) = TestBed::start("a_forged_shim_is_never_reported_nor_killed").await else {
        return;
    };
    // A healthy pod: its shim is proven ours, and never touched.
    let healthy = bed
        .run_pod("healthy", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    let healthy_shim = bed.shim_pid(&healthy.sandbox_id);
    let address = bed.address().as_os_str().to_os_string();
    let here = bed.dir().to_path_buf();
    let forged = forge(&bed, &support::unknown_id('f'));

    let (output, doc) = nodectl_at(&bed, &address, &here, &["leaked-shims", "-o", "json"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "the forgery is no finding: {doc}"
    );
    assert!(kinds_for(&doc, forged.pid).is_empty(), "{doc}");

    let (output, doc) = nodectl_at(
        &bed,
        &address,
        &here,
        &["leaked-shims", "--kill", "--yes", "-o", "json"],
    );
    assert_eq!(output.status.code(), Some(0), "{doc}");
    assert!(
        procs::is_running(forged.pid),
        "--kill left the forgery alone"
    );

    let (_, doc) = nodectl_at(&bed, &address, &here, &["shims", "-o", "json"]);
    support::assert_matches_schema(&doc);
    let row = doc["shims"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["pid"] == forged.pid)
        .unwrap_or_else(|| panic!("the inventory lists the forgery: {doc}"));
    assert_eq!(row["identity"], "impostor", "{row}");
    assert_eq!(row["ours"], false, "{row}");
    let reason = row["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("runs as uid 65534"), "{reason}");
    assert_eq!(
        row["bundle_dir"],
        Value::Null,
        "an impostor has no bundle: {row}"
    );
    let real = doc["shims"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["pid"] == healthy_shim)
        .unwrap_or_else(|| panic!("the inventory lists the pod's shim: {doc}"));
    assert_eq!(real["identity"], "ours", "{real}");

    // A real leaked shim beside it, with --address spelled three ways.
    let orphan = bed.start_orphan_shim(&support::unknown_id('d'));
    let socket = bed.address();
    let alias = bed.scratch("alias");
    std::os::unix::fs::symlink(socket.parent().unwrap(), &alias).unwrap();
    let through_link = alias.join(socket.file_name().unwrap());
    let relative = Path::new(".").join(socket.file_name().unwrap());
    let socket_dir = socket.parent().unwrap().to_path_buf();
    for (spelled, cwd) in [
        (socket.as_os_str(), &here),
        (through_link.as_os_str(), &here),
        (relative.as_os_str(), &socket_dir),
    ] {
        let (output, doc) = nodectl_at(&bed, spelled, cwd, &["leaked-shims", "-o", "json"]);
        if output.status.code() != Some(1) {
            let (_, shims) = nodectl_at(&bed, spelled, cwd, &["shims", "-o", "json"]);
            panic!("{spelled:?}: {doc}\n{}", shims["shims"]);
        }
        assert_eq!(
            kinds_for(&doc, orphan.pid),
            ["leaked-shim"],
            "{spelled:?}: {doc}"
        );
        assert!(kinds_for(&doc, forged.pid).is_empty(), "{spelled:?}: {doc}");
        assert_eq!(doc["actions"][0]["outcome"], "would-kill", "{doc}");
    }
    let (output, doc) = nodectl_at(
        &bed,
        through_link.as_os_str(),
        &here,
        &["leaked-shims", "--kill", "--yes", "-o", "json"],
    );
    assert_eq!(output.status.code(), Some(1), "{doc}");
    let actions = doc["actions"].as_array().unwrap();
    assert_eq!(actions.len(), 1, "only the real shim is acted on: {doc}");
    assert_eq!(actions[0]["shim_pid"], orphan.pid);
    assert_eq!(actions[0]["outcome"], "terminated", "{doc}");
    assert!(
        support::wait_until(Duration::from_secs(10), || !procs::is_running(orphan.pid)),
        "the real leaked shim was ended"
    );
    assert!(procs::is_running(forged.pid), "the forgery still runs");
    assert!(procs::is_running(healthy_shim), "the pod's shim still runs");
}
