//! Issue 26's hostile neighbours, on a real containerd: what nodectl
//! believes, runs or acts on is tied to a kernel identity, never to a name,
//! a spelling or a file that a tenant can place.
//!
//! Beside the test bed's containerd (A), with a pod running and a leak
//! planted (a shim containerd has no record of, a mount left for a task it
//! does not know), run:
//! - an impostor: a process named `containerd` (comm and executable) in
//!   mount and pid namespaces of its own, as a `docker:dind` pod runs one,
//!   whose argv claims A's socket and names decoy root and state; its binary
//!   writes a marker file when anyone runs it with another argv (nodectl used
//!   to run `/proc/<pid>/exe --version`);
//! - a relay socket owned by nobody, mode 0666, relaying to A's socket;
//! - A's socket and state spelled through symlinks and `..`, its state
//!   bind-mounted elsewhere;
//! - a second containerd (B) with its own config, root, state, socket and
//!   a running pod;
//! - while A is down, root's own containerd binary run by `nobody` with a
//!   config of its own (`[grpc]` uid and gid its own; socket, root and state
//!   in its own directory), as issue 36 found one "proven".
//!
//! One pair of test beds serves every assertion (CI time matters), so a
//! broken guarantee is noted and the test goes on: the failure lists every
//! one that broke, not only the first.

mod support;

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use k8s_cri::v1::ContainerState;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use support::{procs, TestBed};

const TEST: &str = "hostile_neighbours_never_pass_for_containerd_nor_make_it_act";
/// Every nodectl run answers within this, whatever it is pointed at.
const BOUND: Duration = Duration::from_secs(60);
const NOBODY: u32 = 65534;
/// How the gap naming a socket no proven containerd serves begins.
const NOT_PROVEN: &str = "no proven containerd serves this socket";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_neighbours_never_pass_for_containerd_nor_make_it_act() {
    // Checked before both test beds start, so that a skip is said once.
    if !nix::unistd::geteuid().is_root() {
        return support::skip(TEST, "needs root (containerd, namespaces, mounts)");
    }
    for (tool, package) in [("cc", "gcc and libc6-dev"), ("unshare", "util-linux")] {
        if !support::have(tool) {
            let why = format!("no {tool} to build and start the impostor (package {package}; scripts/test installs it)");
            return support::skip(TEST, &why);
        }
    }
    let names = [format!("{TEST}-a"), format!("{TEST}-b")];
    let (a, b) = tokio::join!(TestBed::start(&names[0]), TestBed::start(&names[1]));
    let (Some(mut a), Some(b)) = (a, b) else {
        return;
    };
    let (pod_a, pod_b) = tokio::join!(
        a.run_pod("neighbour-a", "app", &["/bin/sh", "-c", "sleep 3600"]),
        b.run_pod("neighbour-b", "app", &["/bin/sh", "-c", "sleep 3600"]),
    );
    let decoys = [a.scratch("decoy-root"), a.scratch("decoy-state")];
    let impostor = Impostor::start(&a, &decoys);
    let mut scene = Scene {
        marker: impostor.marker.clone(),
        impostor: impostor.pid,
        broken: Vec::new(),
    };

    // The real containerd down, the impostor alone in claiming its socket:
    // what `nodectl zombies` met when it was needed most. Only the socket
    // is given: root and state are the impostor's to choose, if anyone's.
    a.stop_containerd();
    let label = "zombies --address <A's socket>, A down";
    let (code, doc) = scene.nodectl(
        label,
        &args(&["zombies", "-o", "json", "--timeout", "2s", "--address"])
            .with(a.address())
            .done(),
    );
    scene.expect(code == Some(2), || {
        format!("{label}: exit {code:?}, not 2 (could not check)")
    });
    scene.expect_not_proven(label, &doc, a.address());
    for (decoy, key) in decoys.iter().zip(["root", "state"]) {
        scene.expect(
            !doc["paths"][key]["path"].eq(decoy.to_str().unwrap()),
            || {
                format!(
                    "{label}: {key} is the impostor's {}: {}",
                    decoy.display(),
                    doc["paths"]
                )
            },
        );
    }
    scene.expect_listed_as_other(label, &doc, impostor.pid, "the impostor");
    scene.expect_listed_as_other(label, &doc, b.containerd_pid(), "containerd B");

    // Still with A down: a user's containerd. Plain `check` never chooses
    // it, and a release at its socket releases nothing.
    let users = UsersContainerd::start();
    let label = "check, a user's containerd up, A down";
    let (code, doc) = scene.nodectl(
        label,
        &args(&["check", "-o", "json", "--timeout", "2s"]).done(),
    );
    scene.expect(doc["paths"]["process"]["pid"] != users.pid, || {
        format!(
            "{label}: exit {code:?}, the user's containerd (pid {}) is the daemon: {}",
            users.pid, doc["paths"]
        )
    });
    let said_why = doc["paths"]["other_containerds"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|other| {
            other["pid"] == users.pid
                && other["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains(&format!("runs as uid {NOBODY}")))
        });
    scene.expect(said_why, || {
        format!(
            "{label}: the user's containerd is not listed as not the daemon, for its uid: {}",
            doc["paths"]
        )
    });
    let label = "leaked-ips --release --yes --address <the user's containerd>";
    let (code, doc) = scene.nodectl(
        label,
        &args(&[
            "leaked-ips",
            "--release",
            "--yes",
            "-o",
            "json",
            "--timeout",
            "2s",
            "--address",
        ])
        .with(&users.socket)
        .done(),
    );
    let acted = doc["cleanups"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|cleanup| cleanup["outcome"] != "refused");
    scene.expect(code == Some(2) && !acted, || {
        format!(
            "{label}: exit {code:?} (not 2), cleanups {}",
            doc["cleanups"]
        )
    });
    scene.expect_not_proven(label, &doc, &users.socket);
    drop(users);
    a.start_containerd().await;

    // A's leak: a shim containerd has no record of, and a tmpfs mounted as
    // the rootfs of a task it does not know.
    let orphan = a.start_orphan_shim(&support::unknown_id('d'));
    let unknown = support::unknown_id('f');
    let rootfs = bundles_dir(&a).join(&unknown).join("rootfs");
    fs::create_dir_all(&rootfs).unwrap();
    support::mount_tmpfs(&rootfs);
    let untouched = Untouched::now(&[&a, &b]);

    // A's socket and state, spelled otherwise.
    let socket_link = a.scratch("socket-link");
    std::os::unix::fs::symlink(a.address(), &socket_link).unwrap();
    let alias = a.scratch("alias");
    std::os::unix::fs::symlink(a.dir(), &alias).unwrap();
    let through_alias = alias.join(a.address().file_name().unwrap());
    let socket_dotdot = a.root().join("..").join(a.address().file_name().unwrap());
    let state_link = a.scratch("state-link");
    std::os::unix::fs::symlink(a.state(), &state_link).unwrap();
    let state_dotdot = a.root().join("..").join(a.state().file_name().unwrap());
    let state_bound = a.scratch("state-bind");
    let _bind = BindMount::new(a.state(), &state_bound);

    let check_a = |address: &Path, state: &Path| {
        args(&["check", "-o", "json", "--root"])
            .with(a.root())
            .with("--state")
            .with(state)
            .with("--address")
            .with(address)
            .with("--config")
            .with(a.config_path())
            .done()
    };
    let label = "check, A's paths as its config spells them";
    let (canonical_code, canonical) = scene.nodectl(label, &check_a(a.address(), a.state()));
    let canonical_keys = support::finding_keys(&canonical);
    let a_pid = a.containerd_pid();
    scene.expect_daemon(label, &canonical, a_pid);
    for planted in [
        ("leaked-shim".to_string(), orphan.id.clone()),
        ("leaked-mount".to_string(), unknown.clone()),
    ] {
        scene.expect(canonical_keys.contains(&planted), || {
            format!("{label}: A's planted {planted:?} is not found: {canonical_keys:?}")
        });
    }
    scene.expect_listed_as_other(label, &canonical, impostor.pid, "the impostor");
    scene.expect_listed_as_other(label, &canonical, b.containerd_pid(), "containerd B");

    for (spelling, address, state) in [
        ("socket through a symlink", socket_link.as_path(), a.state()),
        ("socket through a symlinked dir", &through_alias, a.state()),
        ("socket with ..", &socket_dotdot, a.state()),
        ("state through a symlink", a.address(), &state_link),
        ("state with ..", a.address(), &state_dotdot),
        ("state bind-mounted", a.address(), &state_bound),
    ] {
        let label = format!("check, {spelling}");
        let (code, doc) = scene.nodectl(&label, &check_a(address, state));
        scene.expect_daemon(&label, &doc, a_pid);
        let keys = support::finding_keys(&doc);
        scene.expect(keys == canonical_keys && code == canonical_code, || {
            format!(
                "{label}: exit {code:?} with {keys:?}, where A's own spelling gives \
                 exit {canonical_code:?} with {canonical_keys:?}"
            )
        });
        scene.expect_listed_as_other(&label, &doc, impostor.pid, "the impostor");
    }

    // Whoever serves the socket writes the answers: a relay to A is not A.
    let relay = Relay::start(&a.scratch("relay.sock"), a.address());
    let relayed = support::runtime_version(relay.path()).await;
    assert!(relayed.is_ok(), "the relay reaches A's CRI: {relayed:?}");
    let label = "check --address <relay to A>";
    let (code, doc) = scene.nodectl(label, &check_a(relay.path(), a.state()));
    // Never an all-clear: 2 (could not check), or 1 when something was
    // found anyway (A's planted leaks are still on disk).
    let found = !support::finding_keys(&doc).is_empty();
    scene.expect(code == Some(2) || (code == Some(1) && found), || {
        format!("{label}: exit {code:?}, not 2 (could not check) nor 1 with findings; never 0")
    });
    scene.expect_not_proven(label, &doc, relay.path());
    let mut metrics = check_a(relay.path(), a.state());
    metrics[2] = OsString::from("prometheus");
    let output = support::run_bounded(
        Command::new(env!("CARGO_BIN_EXE_nodectl"))
            .args(&metrics)
            .stdin(Stdio::null()),
        BOUND,
    )
    .unwrap_or_else(|e| panic!("{label} -o prometheus: {e}"));
    let text = String::from_utf8_lossy(&output.stdout);
    scene.expect(text.contains("nodectl_up{command=\"check\"} 0"), || {
        format!("{label} -o prometheus: nodectl_up is not 0:\n{text}")
    });

    // B's config and (through a symlink) A's socket: the paths of one
    // containerd, the answers of the other. Nothing of either is touched.
    let label =
        "leaked-mounts --unmount --remove-bundles --yes --config <B's> --address <A's, linked>";
    let (_, doc) = scene.nodectl(
        label,
        &args(&[support::LEAKED_MOUNTS_CLEAN, &["--config"]].concat())
            .with(b.config_path())
            .with("--address")
            .with(&socket_link)
            .done(),
    );
    let cleanups: Vec<&Value> = doc["cleanups"].as_array().into_iter().flatten().collect();
    for cleanup in &cleanups {
        let refused = cleanup["outcome"] == "refused"
            && cleanup["detail"]
                .as_str()
                .is_some_and(|d| !d.trim().is_empty());
        scene.expect(refused, || {
            format!("{label}: a target not refused with a reason: {cleanup}")
        });
    }
    // B's state is not A's: what is read there is not judged (a gap of the
    // bundles naming it), so B's running pod is no target at all.
    let b_pod_targeted = cleanups.iter().any(|c| {
        let id = c["id"].as_str().unwrap_or_default();
        id == pod_b.sandbox_id || id == pod_b.container_id
    });
    scene.expect(!b_pod_targeted, || {
        format!(
            "{label}: B's running pod is judged through A's answers: {}",
            doc["cleanups"]
        )
    });
    let b_state = b.state().display().to_string();
    let b_state_gap = doc["gaps"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|gap| gap["source"] == "bundles" && gap["path"] == b_state.as_str());
    scene.expect(b_state_gap, || {
        format!(
            "{label}: no gap of the bundles names B's state: {}",
            doc["gaps"]
        )
    });
    for change in untouched.changes(&[&a, &b]) {
        scene.broken.push(format!("{label}: {change}"));
    }
    for (bed, pod, name) in [(&a, &pod_a, "A"), (&b, &pod_b, "B")] {
        let state = bed.try_container_status(&pod.container_id).await;
        let running = state
            .as_ref()
            .is_ok_and(|s| s.state == ContainerState::ContainerRunning as i32);
        scene.expect(running, || {
            format!("{label}: {name}'s pod is no longer running: {state:?}")
        });
    }
    for (bed, pod, name) in [(&a, &pod_a, "A"), (&b, &pod_b, "B")] {
        let stopped = bed.stop_pod(&pod.sandbox_id).await;
        scene.expect(stopped.is_ok(), || {
            format!("after {label}: {name}'s pod cannot be stopped through CRI: {stopped:?}")
        });
    }

    // The impostor ran all along, or "never taken for containerd" would
    // say nothing.
    assert!(
        procs::is_running(impostor.pid),
        "the impostor (pid {}) died during the test",
        impostor.pid
    );
    scene.finish();
}

/// The assertions' bookkeeping: every nodectl run, and every guarantee it
/// broke.
struct Scene {
    /// Written by the impostor's binary when anyone runs it.
    marker: PathBuf,
    impostor: i32,
    broken: Vec<String>,
}

impl Scene {
    /// nodectl with exactly `args`, bounded; after each run, whether it ran
    /// the impostor's binary or took the impostor for containerd.
    fn nodectl(&mut self, label: &str, args: &[OsString]) -> (Option<i32>, Value) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_nodectl"));
        command.args(args).stdin(Stdio::null());
        let started = Instant::now();
        let output =
            support::run_bounded(&mut command, BOUND).unwrap_or_else(|e| panic!("{label}: {e}"));
        let doc = support::report(&output);
        eprintln!(
            "{label}: exit {:?} in {:.0} ms; paths.process {}, other_containerds {}, gaps {}, findings {:?}, cleanups {}",
            output.status.code(),
            started.elapsed().as_secs_f64() * 1e3,
            doc["paths"]["process"],
            doc["paths"]["other_containerds"],
            doc["gaps"],
            support::finding_keys(&doc),
            doc["cleanups"],
        );
        // Removed once seen, so that each run is judged on its own.
        if let Ok(ran) = fs::read_to_string(&self.marker) {
            let _ = fs::remove_file(&self.marker);
            self.broken.push(format!(
                "{label}: the impostor's binary was run, as: {}",
                ran.trim_end()
            ));
        }
        if doc["paths"]["process"]["pid"] == self.impostor {
            self.broken.push(format!(
                "{label}: the impostor is taken for containerd: {}",
                doc["paths"]
            ));
        }
        (output.status.code(), doc)
    }

    fn expect(&mut self, holds: bool, broken: impl FnOnce() -> String) {
        if !holds {
            self.broken.push(broken());
        }
    }

    /// `paths.process` is the containerd with pid `pid`.
    fn expect_daemon(&mut self, label: &str, doc: &Value, pid: i32) {
        let process = &doc["paths"]["process"];
        self.expect(process["pid"] == pid, || {
            format!("{label}: paths.process is not A (pid {pid}): {process}")
        });
    }

    /// The report names `pid` among the processes called containerd that
    /// are not the daemon, with why.
    fn expect_listed_as_other(&mut self, label: &str, doc: &Value, pid: i32, who: &str) {
        let others = &doc["paths"]["other_containerds"];
        let listed = others.as_array().into_iter().flatten().any(|other| {
            other["pid"] == pid
                && other["exe"].is_string()
                && other["reason"]
                    .as_str()
                    .is_some_and(|r| !r.trim().is_empty())
        });
        self.expect(listed, || {
            format!("{label}: {who} (pid {pid}) is not in paths.other_containerds with a reason: {others}")
        });
    }

    /// A containerd-api gap says that no proven containerd serves `socket`
    /// (as given).
    fn expect_not_proven(&mut self, label: &str, doc: &Value, socket: &Path) {
        let said = doc["gaps"].as_array().into_iter().flatten().any(|gap| {
            gap["source"] == "containerd-api"
                && gap["path"] == socket.to_str().unwrap()
                && gap["error"]
                    .as_str()
                    .is_some_and(|e| e.starts_with(NOT_PROVEN))
        });
        self.expect(said, || {
            format!(
                "{label}: no containerd-api gap for {} saying {NOT_PROVEN:?}: {}",
                socket.display(),
                doc["gaps"]
            )
        });
    }

    fn finish(mut self) {
        let broken = std::mem::take(&mut self.broken);
        assert!(
            broken.is_empty(),
            "{} broken:\n  {}",
            broken.len(),
            broken.join("\n  ")
        );
    }
}

impl Drop for Scene {
    /// A failure before [`Scene::finish`] still says what broke until then.
    fn drop(&mut self) {
        if std::thread::panicking() && !self.broken.is_empty() {
            eprintln!(
                "{TEST}: broken before the failure:\n  {}",
                self.broken.join("\n  ")
            );
        }
    }
}

/// Root's own containerd binary run by `nobody`, with a config of its own:
/// `[grpc]` and `[ttrpc]` uid and gid its own, socket, root and state in a
/// directory of its own. Ended when dropped.
struct UsersContainerd {
    child: Child,
    pid: i32,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl UsersContainerd {
    fn start() -> UsersContainerd {
        use std::os::unix::process::CommandExt;
        let line = support::Containerd::from_env().unwrap();
        // In /tmp (sticky), not below the bed's directory: nobody must reach it.
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::os::unix::fs::chown(d, Some(NOBODY), Some(NOBODY)).unwrap();
        let socket = d.join("containerd.sock");
        let config = format!(
            r#"version = 2
root = "{d}/root"
state = "{d}/state"
disabled_plugins = [
  "io.containerd.grpc.v1.cri",
  "io.containerd.nri.v1.nri",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
]

[grpc]
  address = "{d}/containerd.sock"
  uid = {NOBODY}
  gid = {NOBODY}

[ttrpc]
  address = "{d}/containerd.sock.ttrpc"
  uid = {NOBODY}
  gid = {NOBODY}
"#,
            d = d.display()
        );
        let config_path = d.join("config.toml");
        fs::write(&config_path, config).unwrap();
        let log = fs::File::create(d.join("containerd.log")).unwrap();
        std::os::unix::fs::chown(d.join("containerd.log"), Some(NOBODY), Some(NOBODY)).unwrap();
        let child = Command::new(line.binary("containerd"))
            .arg("--config")
            .arg(&config_path)
            .current_dir(d)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .uid(NOBODY)
            .gid(NOBODY)
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut users = UsersContainerd {
            child,
            pid,
            socket,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while UnixStream::connect(&users.socket).is_err() {
            if let Ok(Some(status)) = users.child.try_wait() {
                let logged = fs::read_to_string(users._dir.path().join("containerd.log"));
                panic!("the user's containerd ended ({status}): {logged:?}");
            }
            assert!(
                Instant::now() < deadline,
                "the user's containerd never listened"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        users
    }
}

impl Drop for UsersContainerd {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.pid), Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while matches!(self.child.try_wait(), Ok(None)) {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Command-line arguments, paths among them as they are.
struct Args(Vec<OsString>);

fn args(words: &[&str]) -> Args {
    Args(words.iter().map(OsString::from).collect())
}

impl Args {
    fn with(mut self, arg: impl AsRef<OsStr>) -> Args {
        self.0.push(arg.as_ref().to_os_string());
        self
    }
    fn done(self) -> Vec<OsString> {
        self.0
    }
}

fn bundles_dir(bed: &TestBed) -> PathBuf {
    bed.state()
        .join("io.containerd.runtime.v2.task")
        .join(support::NAMESPACE)
}

/// What a cleanup must not change: every mount below each test bed's state
/// and every bundle directory.
struct Untouched {
    mounts: Vec<Vec<PathBuf>>,
    bundles: Vec<Vec<OsString>>,
}

impl Untouched {
    fn now(beds: &[&TestBed]) -> Untouched {
        Untouched {
            mounts: beds.iter().map(|b| mounts(b)).collect(),
            bundles: beds.iter().map(|b| bundles(b)).collect(),
        }
    }

    /// What is gone since [`Untouched::now`] (or came), said per test bed.
    fn changes(&self, beds: &[&TestBed]) -> Vec<String> {
        let mut changes = Vec::new();
        for (i, bed) in beds.iter().enumerate() {
            let (mounts, bundles) = (mounts(bed), bundles(bed));
            if mounts != self.mounts[i] {
                changes.push(format!(
                    "mounts below {} were {:?}, are {mounts:?}",
                    bed.state().display(),
                    self.mounts[i]
                ));
            }
            if bundles != self.bundles[i] {
                changes.push(format!(
                    "bundles in {} were {:?}, are {bundles:?}",
                    bundles_dir(bed).display(),
                    self.bundles[i]
                ));
            }
        }
        changes
    }
}

fn mounts(bed: &TestBed) -> Vec<PathBuf> {
    let mut mounts = support::mounts_below(bed.state());
    mounts.sort();
    mounts
}

fn bundles(bed: &TestBed) -> Vec<OsString> {
    let mut names: Vec<OsString> = fs::read_dir(bundles_dir(bed))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    names.sort();
    names
}

/// A process named `containerd` in mount and pid namespaces of its own (as
/// `unshare -m -p --fork --mount-proc` makes them), its binary on a tmpfs
/// only that mount namespace sees, at `usr/bin/containerd`, started with
/// `--address <A's socket> --root <decoy> --state <decoy>`. Its binary, a C
/// program built here (an ELF whose behaviour no environment variable
/// changes: nodectl clears the environment of what it runs), pauses when
/// run with exactly that argv, and with any other writes its argv to the
/// marker file and prints a containerd version line.
struct Impostor {
    child: Child,
    /// As the test's pid namespace sees it.
    pid: i32,
    marker: PathBuf,
}

impl Impostor {
    fn start(bed: &TestBed, [root, state]: &[PathBuf; 2]) -> Impostor {
        let marker = bed.scratch("impostor-ran");
        let argv: Vec<&OsStr> = vec![
            "--address".as_ref(),
            bed.address().as_os_str(),
            "--root".as_ref(),
            root.as_os_str(),
            "--state".as_ref(),
            state.as_os_str(),
        ];
        let source = bed.scratch("impostor.c");
        fs::write(&source, impostor_source(&argv, &marker)).unwrap();
        let binary = bed.scratch("impostor");
        let built = support::run_bounded(
            Command::new("cc")
                .arg("-O")
                .arg("-o")
                .arg(&binary)
                .arg(&source),
            Duration::from_secs(60),
        )
        .unwrap_or_else(|e| panic!("building the impostor: {e}"));
        assert!(
            built.status.success(),
            "cc {}: {}",
            source.display(),
            support::stderr(&built)
        );
        let mount_point = bed.scratch("impostor-mnt");
        for dir in [&mount_point, root, state] {
            fs::create_dir_all(dir).unwrap();
        }
        // The tmpfs, the copy and the exec happen in the new namespaces: on
        // the host, the mount point stays an empty directory.
        let script = r#"mnt=$0; bin=$1; shift
mount -t tmpfs tmpfs "$mnt" && mkdir -p "$mnt/usr/bin" && cp "$bin" "$mnt/usr/bin/containerd" && exec "$mnt/usr/bin/containerd" "$@""#;
        let child = Command::new("unshare")
            .args([
                "-m",
                "-p",
                "--fork",
                "--mount-proc",
                "--kill-child",
                "sh",
                "-c",
                script,
            ])
            .arg(&mount_point)
            .arg(&binary)
            .args(&argv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("unshare: {e}"));
        let mut pid = None;
        let started = support::wait_until(Duration::from_secs(10), || {
            pid = procs::with_flag("--state", state.to_str().unwrap())
                .into_iter()
                .map(|(pid, _)| pid)
                .find(|&pid| {
                    fs::read_to_string(format!("/proc/{pid}/comm"))
                        .is_ok_and(|c| c.trim() == "containerd")
                });
            pid.is_some()
        });
        let mut impostor = Impostor {
            child,
            pid: pid.unwrap_or(0),
            marker,
        };
        if !started {
            let _ = impostor.child.kill();
            let mut why = String::new();
            if let Some(mut stderr) = impostor.child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut stderr, &mut why);
            }
            if let Ok(ran) = fs::read_to_string(&impostor.marker) {
                why.push_str(&format!(
                    "it ran as {} and wrote its marker: the argv it pauses on is not the one it got",
                    ran.trim_end()
                ));
            }
            panic!("the impostor did not start: {why}");
        }
        let pid = impostor.pid;
        let exe = fs::read_link(format!("/proc/{pid}/exe")).unwrap();
        assert_eq!(exe.file_name(), Some(OsStr::new("containerd")), "{exe:?}");
        for ns in ["mnt", "pid"] {
            let theirs = fs::read_link(format!("/proc/{pid}/ns/{ns}")).unwrap();
            let ours = fs::read_link(format!("/proc/self/ns/{ns}")).unwrap();
            assert_ne!(theirs, ours, "the impostor has a {ns} namespace of its own");
        }
        assert!(
            !impostor.marker.exists(),
            "the impostor's own start wrote its marker: the argv it expects is not the one it got"
        );
        eprintln!("the impostor: pid {pid}, exe {}", exe.display());
        impostor
    }
}

impl Drop for Impostor {
    fn drop(&mut self) {
        // The init of its pid namespace: only SIGKILL reaches it from
        // outside. Its pid is still its own: unshare has not reaped it.
        if self.pid > 0 {
            let _ = kill(Pid::from_raw(self.pid), Signal::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The impostor's C source: pause when run with exactly `argv`, else write
/// the argv it was run with to `marker` and print a version line.
fn impostor_source(argv: &[&OsStr], marker: &Path) -> String {
    let expected: Vec<String> = argv.iter().map(|a| c_string(a)).collect();
    format!(
        r#"#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static const char *const expected[] = {{ {expected}, 0 }};
static const char marker[] = {marker};

int main(int argc, char **argv) {{
    int i = 0;
    while (expected[i] && i + 1 < argc && strcmp(argv[i + 1], expected[i]) == 0)
        i++;
    if (!expected[i] && argc == i + 1)
        for (;;)
            pause();
    int fd = open(marker, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) {{
        for (int a = 0; a < argc; a++) {{
            (void)!write(fd, argv[a], strlen(argv[a]));
            (void)!write(fd, a + 1 < argc ? " " : "\n", 1);
        }}
        close(fd);
    }}
    static const char version[] = "containerd github.com/containerd/containerd v6.6.6 impostor\n";
    (void)!write(1, version, sizeof version - 1);
    return 0;
}}
"#,
        expected = expected.join(", "),
        marker = c_string(marker.as_os_str()),
    )
}

/// `bytes` as a C string literal, every byte an octal escape.
fn c_string(bytes: &OsStr) -> String {
    use std::os::unix::ffi::OsStrExt;
    let escaped: String = bytes
        .as_bytes()
        .iter()
        .map(|b| format!("\\{b:03o}"))
        .collect();
    format!("\"{escaped}\"")
}

/// A socket owned by nobody, mode 0666, relaying every connection to
/// `upstream`: whoever serves a socket writes the answers.
struct Relay {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    accepting: Option<JoinHandle<()>>,
}

impl Relay {
    fn start(path: &Path, upstream: &Path) -> Relay {
        let listener = UnixListener::bind(path).unwrap();
        std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o666)).unwrap();
        // Polled, so that drop can end the accepting thread.
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let upstream = upstream.to_path_buf();
        let stopping = stop.clone();
        let accepting = std::thread::spawn(move || {
            while !stopping.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => relay(client, &upstream),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Relay {
            path: path.to_path_buf(),
            stop,
            accepting: Some(accepting),
        }
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// Copies each way between `client` and a new connection to `upstream`
/// until either side closes.
fn relay(client: UnixStream, upstream: &Path) {
    let Ok(server) = UnixStream::connect(upstream) else {
        return;
    };
    let _ = client.set_nonblocking(false);
    let pipe = |mut from: UnixStream, mut to: UnixStream| {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut from, &mut to);
            let _ = to.flush();
            let _ = to.shutdown(std::net::Shutdown::Write);
        })
    };
    if let (Ok(client_reader), Ok(server_reader)) = (client.try_clone(), server.try_clone()) {
        pipe(client_reader, server);
        pipe(server_reader, client);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(accepting) = self.accepting.take() {
            let _ = accepting.join();
        }
        let _ = fs::remove_file(&self.path);
    }
}

/// A bind mount of a directory elsewhere, private (so that nothing mounted
/// below the source later shows through it), detached when dropped.
struct BindMount(PathBuf);

impl BindMount {
    fn new(source: &Path, target: &Path) -> BindMount {
        use nix::mount::{mount, MsFlags};
        fs::create_dir_all(target).unwrap();
        mount(
            Some(source),
            target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .unwrap_or_else(|e| panic!("bind-mounting {}: {e}", source.display()));
        let guard = BindMount(target.to_path_buf());
        mount(
            None::<&str>,
            target,
            None::<&str>,
            MsFlags::MS_PRIVATE,
            None::<&str>,
        )
        .unwrap_or_else(|e| panic!("making {} private: {e}", target.display()));
        guard
    }
}

impl Drop for BindMount {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}
