//! A real, isolated containerd for the integration tests: its own root,
//! state, socket and config in a temp dir, pods created through CRI, faults
//! injected with strace. Dropping the [`TestBed`] ends every process it
//! started and removes its mounts, cgroups and files.
//!
//! - [`testbed`]: start-up, config, accessors, nodectl runs;
//! - [`cri`]: pods and container states over CRI;
//! - [`strace`]: holding a shim's `umount2`;
//! - [`teardown`]: the cleanup behind `Drop`;
//! - [`image`]: the busybox image (no registry on the test machines);
//! - [`procs`]: `/proc` reading (liveness by state letter, never existence);
//! - [`stall`]: holding one shim thread at one syscall (ptrace), for races;
//! - [`leaked`]: nodectl finds the shims a test leaked, `--kill` ends them;
//! - [`serve`]: `nodectl serve` as a child, and an HTTP client to scrape it;
//! - [`cni`]: real CNI networking for the networked bed, and a leaked pod IP;
//! - [`kubelet`]: a real kubelet (built by scripts/peers), standalone on
//!   the bed, and crictl beside it;
//! - [`kubelet_steps`]: a pod started in kubelet's order (its cgroup,
//!   directories, an emptyDir tmpfs, its log directory, RunPodSandbox);
//! - [`stand_in_pod_resources`]: a stand-in for kubelet's pod-resources API
//!   (the test process, not a kubelet), only where a real kubelet cannot be
//!   made to do what a test needs (its module says what);
//! - [`neighbourhood`]: what a real node has beside containerd (a mount
//!   table of hundreds of KB before the bed's, an unprivileged user's
//!   processes), built with every bed;
//! - [`cluster`]: a real control plane and a kubelet registered as the
//!   bed's node, built by `scripts/peers`;
//! - [`nodectl_image`]: the DaemonSet's image, built with buildah;
//! - [`planted`]: leftovers made directly (a mounted bundle of no record,
//!   an empty pod netns, a sandbox record's twin);
//! - [`orphan_archive`]: a generated `check --from` archive of orphan
//!   bundles, each with a mount;
//! - [`lost_records_archive`]: one of pods whose records containerd lost
//!   while CRI and kubelet still know them.
//!
//! Below: helpers for the tests' nodectl reports.
// Each test crate includes this module and uses a different part of it
// (re-exports included).
#![allow(dead_code, unused_imports)]

pub mod cluster;
mod cni;
mod cri;
mod fake_daemon;
mod image;
mod kubelet;
mod kubelet_steps;
mod leaked;
mod line;
mod lost_records_archive;
mod neighbourhood;
pub mod nodectl_image;
mod orphan_archive;
mod orphan_shim;
mod planted;
pub mod procs;
pub mod seed_004;
pub mod serve;
mod stall;
mod stand_in_pod_resources;
mod strace;
pub mod systemd;
mod teardown;
mod testbed;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub use cluster::Cluster;
pub use cni::{
    IpFile, LeakedIp, Neighbours, ADMIN_EMPTY_NETNS, ADMIN_NETNS, CHAINED, DEL_NOT_FOUND,
    EXHAUSTED, NEIGHBOUR_CONFLIST, NEIGHBOUR_ID, NEIGHBOUR_NETWORK, NEIGHBOUR_SUBNET,
    POD_ADDRESSES, SUBNET,
};
pub use cri::{exec_sync, runtime_version, Pids, Pod, SandboxFailure};
pub use fake_daemon::{daemon_args, fake_daemon, FakeDaemon};
pub use image::IMAGE;
pub use kubelet::{
    create_cgroup, kubelet_release_here, kubelet_release_on, peer, sleeper_manifest, Kubelet,
    KubeletSetup, CRICTL_RELEASE, KUBELET_RELEASES, NODE_NAME,
};
pub use kubelet_steps::{systemd_besteffort_slice, systemd_prefix, KubeletPod};
pub use leaked::{cleanup_rows, findings_of_kind, ids_of_kind, LeakedShim, LEAKED_MOUNTS_CLEAN};
pub use line::{Containerd, Line, CONTAINERD_DIR_ENV};
pub use lost_records_archive::{
    duplicate_name, lost_id, shim_pid, write_lost_records_archive, Part, Tag, LOST_TAKEN_AT,
};
pub use neighbourhood::TenantShim;
pub use nodectl_image::NODECTL_IMAGE;
pub use orphan_archive::{orphan_id, write_orphan_archive, ARCHIVE_BUNDLES};
pub use orphan_shim::OrphanShim;
pub use planted::{mount_empty_netns, SPEC_OF_NO_POD};
pub use procs::is_running;
pub use stall::Stall;
pub use stand_in_pod_resources::StandInKubeletPodResources;
pub use strace::Strace;
pub use teardown::{mounts_below, shim_address};
pub use testbed::{TestBed, DROP_IN, NAMESPACE};

/// CI sets CI=true: there, a test that cannot run fails instead of skipping.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Skips so far in this test binary (see [`skip`]).
static SKIPPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// For a test whose prerequisite is missing, before it returns: in CI that
/// fails it; elsewhere it says which test is skipped and why, and the test
/// binary ends with how many it skipped.
///
/// Written to the stderr handle, not with `eprintln!`: libtest captures the
/// print macros of a passing test, so a skip would show only as `ok`.
pub fn skip(test: &str, why: &str) {
    use std::io::Write;
    use std::sync::atomic::Ordering;
    if in_ci() {
        panic!("{test}: cannot run, and CI is set: {why}");
    }
    if SKIPPED.fetch_add(1, Ordering::SeqCst) == 0 {
        // SAFETY: registers a plain function with no arguments, run once
        // at exit; it only reads an atomic and writes to fd 2.
        unsafe { nix::libc::atexit(say_how_many_skipped) };
    }
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// The tally of [`skip`], after libtest's own summary.
extern "C" fn say_how_many_skipped() {
    use std::io::Write;
    let n = SKIPPED.load(std::sync::atomic::Ordering::SeqCst);
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {n} test{} of this binary (their `ok` ran nothing; CI=true fails them)",
        if n == 1 { "" } else { "s" }
    );
}

/// What a test's teardown could not clean up (processes, mounts, cgroups,
/// files) breaks the tests after it, so it fails the test; but a second
/// panic while the test is already failing would abort the run and hide
/// the test's own failure, so then it is only printed.
pub fn teardown_failed(report: &str) {
    if std::thread::panicking() {
        eprintln!("{report}");
    } else {
        panic!("{report}");
    }
}

fn which(binary: &str) -> bool {
    locate(binary).is_some()
}

/// Where a program is on PATH.
fn locate(binary: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(binary))
            .find(|path| path.is_file())
    })
}

/// Whether a program is on PATH.
pub fn have(binary: &str) -> bool {
    which(binary)
}

/// `program` run in network namespace `netns` when given (`nsenter --net`,
/// which, without `--fork`, execs `program` itself: the child is it, its
/// pid and its comm), else as it is.
pub fn in_netns(netns: Option<&Path>, program: impl AsRef<std::ffi::OsStr>) -> Command {
    match netns {
        Some(netns) => {
            let mut command = Command::new("nsenter");
            command
                .arg(format!("--net={}", netns.display()))
                .arg("--")
                .arg(program);
            command
        }
        None => Command::new(program),
    }
}

pub fn mount_tmpfs(path: &Path) {
    nix::mount::mount(
        Some("tmpfs"),
        path,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .unwrap_or_else(|e| panic!("mounting tmpfs at {}: {e}", path.display()));
}

/// The nodectl binary with `args` followed by `--root`, `--state`,
/// `--address` and `--config` set to `[root, state, address, config]`, its
/// stdin empty: the one way every test points nodectl at a node.
pub fn nodectl_command(args: &[&str], [root, state, address, config]: [&Path; 4]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodectl"));
    command
        .args(args)
        .arg("--root")
        .arg(root)
        .arg("--state")
        .arg(state)
        .arg("--address")
        .arg(address)
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null());
    command
}

/// Runs [`nodectl_command`]; killed after 60 s.
pub fn nodectl_at(args: &[&str], paths: [&Path; 4]) -> Result<Output, String> {
    run_bounded(&mut nodectl_command(args, paths), Duration::from_secs(60))
}

/// Where a containerd root and state made by hand keep CRI's status files
/// and the `k8s.io` task bundles, below the node's directory.
/// A 64-hex container id for a task no containerd has, unique to this test
/// process: `fill` repeated after the process's pid. nodectl refuses to
/// clean an id while a shim of any containerd is alive for it, and
/// scripts/test runs several lines' beds side by side: an id fixed in the
/// source would be the same in each.
pub fn unknown_id(fill: char) -> String {
    let pid = format!("{:08x}", std::process::id());
    pid.chars().chain(std::iter::repeat_n(fill, 56)).collect()
}

pub const HAND_MADE_CONTAINERS: &str = "root/io.containerd.grpc.v1.cri/containers";
pub const HAND_MADE_BUNDLES: &str = "state/io.containerd.runtime.v2.task/k8s.io";

/// A temp dir holding an empty containerd root and state (CRI's containers
/// directory and the `k8s.io` bundles directory), for tests that need no
/// running containerd.
pub fn hand_made_node() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for sub in [HAND_MADE_CONTAINERS, HAND_MADE_BUNDLES] {
        fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    dir
}

/// The `[root, state, address, config]` of a [`hand_made_node`] in `dir`:
/// its socket is a path nothing listens on, its config `config.toml`.
pub fn hand_made_paths(dir: &Path) -> [PathBuf; 4] {
    ["root", "state", "nothing-listens.sock", "config.toml"].map(|name| dir.join(name))
}

/// nodectl on the hand-made node in `dir`, with a 1 s API deadline (nothing
/// answers there).
pub fn hand_made_command(dir: &Path, args: &[&str]) -> Command {
    let paths = hand_made_paths(dir);
    let mut command = nodectl_command(args, paths.each_ref().map(PathBuf::as_path));
    command.args(["--timeout", "1s"]);
    command
}

/// The temporary files (`*.tmp`) a writer such as `collect` left in `dir`:
/// a whole write renames or links its temporary file into place.
pub fn temp_files_left_in(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect()
}

/// The table's text with its wrapped lines joined again: a line that
/// starts with a space continues the one before it.
pub fn unwrapped(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with(' ') && !out.is_empty() {
            out.pop();
            out.push(' ');
        }
        out.push_str(line.trim_start());
        out.push('\n');
    }
    out
}

/// What a run printed on stderr, as text (for assertion messages).
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs nodectl with no node to look at (as on another machine), bounded.
pub fn nodectl_offline(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodectl"));
    command.args(args).stdin(Stdio::null());
    run_bounded(&mut command, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("nodectl {args:?}: {e}"))
}

/// Parses nodectl's JSON report and checks it against the published schema.
pub fn report(output: &Output) -> serde_json::Value {
    let doc = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "nodectl printed no JSON ({e}):\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert_matches_schema(&doc);
    doc
}

/// Fails unless `doc` is valid against the checked-in JSON schema.
pub fn assert_matches_schema(doc: &serde_json::Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/report-v1.schema.json");
    let schema: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "output does not match {}: {errors:#?}\n{doc}",
        path.display()
    );
}

/// Whether a report's only reason for exit 2 is an API call that found no
/// answer before its deadline: no finding, nothing acted on, and every gap
/// such a call's.
/// On a loaded CI machine a shim busy in a slow umount2 holds containerd's
/// Tasks.List (it asks each task's shim its state in turn, each with a
/// 2 s timeout of containerd's own) past nodectl's deadline: a gap nodectl
/// rightly reports, and not what a test of its findings is about.
pub fn only_slow_api(code: Option<i32>, doc: &serde_json::Value) -> bool {
    let findings = doc["findings"].as_array().map_or(0, Vec::len);
    let cleanups = doc["cleanups"].as_array().map_or(0, Vec::len);
    let gaps = doc["gaps"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    code == Some(2)
        && findings == 0
        && cleanups == 0
        && !gaps.is_empty()
        && gaps.iter().all(|gap| {
            gap["source"].as_str().is_some_and(|s| s.ends_with("-api"))
                && gap["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("no answer before the deadline"))
        })
}

/// `look`'s answer, taken again (up to 4 more times, 3 s apart, each said
/// on stderr) while it is [`only_slow_api`]: any finding, any other gap, is
/// returned at once for the caller to judge.
pub fn look_past_slow_api(
    what: &str,
    mut look: impl FnMut() -> (Option<i32>, serde_json::Value),
) -> (Option<i32>, serde_json::Value) {
    let mut answer = look();
    for _ in 0..4 {
        if !only_slow_api(answer.0, &answer.1) {
            break;
        }
        eprintln!(
            "{what}: an API call found no answer before its deadline, looking again in 3 s: {}",
            answer.1["gaps"]
        );
        std::thread::sleep(std::time::Duration::from_secs(3));
        answer = look();
    }
    answer
}

/// `(kind, id)` of every finding of a JSON report, sorted.
pub fn finding_keys(doc: &serde_json::Value) -> Vec<(String, String)> {
    let mut keys: Vec<(String, String)> = doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            (
                f["kind"].as_str().unwrap_or_default().to_string(),
                f["id"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    keys.sort();
    keys
}

/// Collects an evidence bundle from the test bed and checks it offline;
/// returns the live check's and the offline check's reports.
pub fn live_and_offline_check(bed: &TestBed) -> (serde_json::Value, serde_json::Value) {
    let bundle = bed.scratch("evidence.tar.gz");
    let collected = bed.nodectl(&["collect", bundle.to_str().unwrap()]);
    assert_eq!(
        collected.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&collected.stderr)
    );
    let live = report(&bed.nodectl(&["check", "-o", "json"]));
    let offline = report(&nodectl_offline(&[
        "check",
        "--from",
        bundle.to_str().unwrap(),
        "-o",
        "json",
    ]));
    (live, offline)
}

/// nodectl with `args`, started with the test-only pause after its scan
/// (`NODECTL_TEST_PAUSE_BEFORE_ACT`): returns once it is paused, so that the
/// test can bring an object back to life before removing `pause` lets it
/// re-check and act.
#[allow(dead_code)]
pub fn spawn_paused_before_act(
    args: &[&str],
    paths: [&Path; 4],
    pause: &Path,
) -> std::process::Child {
    let child = nodectl_command(args, paths)
        .env("NODECTL_TEST_PAUSE_BEFORE_ACT", pause)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(60), || pause.exists()),
        "nodectl pauses after its scan"
    );
    child
}

/// Polls `condition` every 100 ms until it holds (true) or `limit` passes.
pub fn wait_until(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs a command to completion, killing it after `limit`.
pub fn run_bounded(command: &mut Command, limit: Duration) -> Result<Output, String> {
    use std::io::Read;
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawning {command:?}: {e}"))?;
    // Drain both pipes so a chatty child cannot block on a full pipe.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + limit;
    // Polling try_wait keeps the child unreaped until we see it exit, so a
    // kill at the deadline can never hit a reused pid.
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{command:?} did not finish within {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// Runs a command to completion; with its own peak RSS in KiB, or `None`
/// (after saying so) where GNU time is missing outside CI.
///
/// A child's `ru_maxrss` counts the process that exec'd it: Linux records the
/// old address space's high-water mark at exec, so anything forked from this
/// test binary starts at the binary's size, which other tests' threads swell
/// (CI saw 120-139 MiB for a nodectl that peaks at 14-32). GNU time forks the
/// command from its own small process and prints that child's peak (busybox's
/// `time -f %M` takes the KiB for pages and prints 4 times too much).
pub fn output_and_peak_rss(command: &Command) -> (Output, Option<u64>) {
    if !have("time") {
        skip(
            "the peak-RSS assertion",
            "GNU time (Debian package time) measures a child's own peak RSS",
        );
        let output = rebuilt(command, Command::new(command.get_program()))
            .output()
            .unwrap();
        return (output, None);
    }
    let mut timed = Command::new("time");
    timed.args(["-f", "%M"]).arg(command.get_program());
    let mut output = rebuilt(command, timed)
        .output()
        .unwrap_or_else(|e| panic!("spawning {command:?} under time: {e}"));
    // time writes last "Command exited with non-zero status N" or
    // "Command terminated by signal N" (when not 0), then the peak in KiB.
    let stderr = std::mem::take(&mut output.stderr);
    let mut lines: Vec<&[u8]> = stderr
        .strip_suffix(b"\n")
        .unwrap_or(&stderr)
        .split(|&b| b == b'\n')
        .collect();
    let peak = lines
        .pop()
        .and_then(|l| std::str::from_utf8(l).ok()?.trim().parse().ok());
    let peak = peak.unwrap_or_else(|| {
        panic!(
            "no peak RSS from time: {}",
            String::from_utf8_lossy(&stderr)
        )
    });
    if lines.last().is_some_and(|l| {
        l.starts_with(b"Command exited with") || l.starts_with(b"Command terminated by")
    }) {
        lines.pop();
    }
    output.stderr = lines
        .iter()
        .flat_map(|l| l.iter().copied().chain([b'\n']))
        .collect();
    (output, Some(peak))
}

/// `into` with `command`'s arguments, environment and directory.
fn rebuilt(command: &Command, mut into: Command) -> Command {
    into.args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => into.env(key, value),
            None => into.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        into.current_dir(dir);
    }
    into
}

/// Copies the program `from` to `to` (mode 0755) for a test to exec, in a
/// `cp` of its own: this process never holds the copy open for writing, so
/// no fork of another thread of it can keep it open until its exec, and an
/// exec of the copy from a grandchild (where [`spawn_fresh_executable`]'s
/// retry cannot reach) never fails with ETXTBSY.
pub fn copy_executable(from: &Path, to: &Path) {
    let copied = Command::new("cp")
        .arg("--")
        .arg(from)
        .arg(to)
        .status()
        .unwrap_or_else(|e| panic!("cp {}: {e}", from.display()));
    assert!(
        copied.success(),
        "cp {} {}: {copied}",
        from.display(),
        to.display()
    );
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(to, fs::Permissions::from_mode(0o755)).unwrap();
}

/// Spawns a program the test has just written: another test's fork may
/// still hold the file open for writing for an instant (ETXTBSY), until
/// that child's exec closes it.
pub fn spawn_fresh_executable(command: &mut Command) -> std::process::Child {
    let mut tries = 0;
    loop {
        match command.spawn() {
            Err(e) if e.raw_os_error() == Some(nix::libc::ETXTBSY) && tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            spawned => return spawned.unwrap_or_else(|e| panic!("spawning {command:?}: {e}")),
        }
    }
}

/// `promtool check metrics` on `text`, when promtool is there.
pub fn promtool_accepts(text: &str) {
    if !have("promtool") {
        return skip("promtool_accepts", "no promtool (package prometheus)");
    }
    use std::io::Write;
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // promtool stops reading at a parse error: its verdict says which.
    if let Err(err) = promtool.stdin.take().unwrap().write_all(text.as_bytes()) {
        assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe, "{err}");
    }
    let verdict = promtool.wait_with_output().unwrap();
    assert!(
        verdict.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&verdict.stdout),
        String::from_utf8_lossy(&verdict.stderr)
    );
}

/// The entries of a `collect` archive: each one's name, bytes and mode.
pub fn archive_files(path: &Path) -> Vec<(String, Vec<u8>, u32)> {
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

/// Set in the copy of a test run by [`in_own_pid_namespace`].
const IN_OWN_PID_NAMESPACE: &str = "NODECTL_TEST_IN_OWN_PID_NAMESPACE";

/// Whether this is the copy of test `name` that runs in a pid namespace of
/// its own, as a child of that namespace's init: a shell that stands for
/// the host (nodectl proves daemons by PID 1's namespaces, and this
/// machine's PID 1 cannot be read). If it is not, runs that copy, asserts
/// it passed, and says false. With `shared_mounts` the init first makes
/// its mounts rshared, as systemd makes a host's (unshare made them
/// private): a pod's `HostToContainer` mounts need a shared source.
pub fn in_own_pid_namespace(name: &str, shared_mounts: bool) -> bool {
    if std::env::var_os(IN_OWN_PID_NAMESPACE).is_some() {
        return true;
    }
    let script = match shared_mounts {
        true => r#"mount --make-rshared / && "$@"; exit $?"#,
        false => r#""$@"; exit $?"#,
    };
    let mut launcher = Command::new("unshare");
    launcher
        .args(["--pid", "--fork", "--mount-proc", "--kill-child"])
        .args(["sh", "-c", script, "sh"]);
    run_again_inside(
        launcher,
        name,
        IN_OWN_PID_NAMESPACE,
        "in its own pid namespace",
    );
    false
}

/// Runs the test `name` of this test binary again, alone, through
/// `launcher` (the way into namespaces of its own: `unshare`, `nsenter`),
/// with `marker` set in its environment for the copy to know where it is,
/// and asserts it passed there; `where_` names the place in the message.
pub fn run_again_inside(mut launcher: Command, name: &str, marker: &str, where_: &str) {
    let output = launcher
        .arg(std::env::current_exe().expect("this test binary"))
        .args(["--exact", name, "--nocapture", "--test-threads", "1"])
        .env(marker, "1")
        .output()
        .unwrap_or_else(|e| panic!("{where_}: {e}"));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    eprintln!("{stderr}");
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{where_}: {}\n{stdout}",
        output.status
    );
}
