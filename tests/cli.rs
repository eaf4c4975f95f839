//! The command line as a user meets it, on a containerd tree made from the
//! captured status files (no containerd needed): exit codes, gaps, the paths
//! report, a closed pipe, and each output format read by its consumer's
//! parser (the JSON schema, promtool, node-problem-detector's contract).

mod support;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const RUNNING_ID: &str = "1111111111111111111111111111111111111111111111111111111111111111";
const CORRUPT_ID: &str = "2222222222222222222222222222222222222222222222222222222222222222";

struct Node {
    dir: tempfile::TempDir,
    /// A procfs where this test process is the containerd nodectl proves
    /// (see `support::fake_daemon`), when the node has one.
    daemon: Option<(PathBuf, support::FakeDaemon)>,
}

impl Node {
    /// A node with no containerd nodectl could prove: nothing it finds can
    /// be called all clear, nor acted on.
    fn new() -> Node {
        let dir = support::hand_made_node();
        Node { dir, daemon: None }
    }

    /// A node whose containerd is proven: the socket's listener, in the
    /// host's namespaces, whose own root and state are the node's.
    fn proven() -> Node {
        let mut node = Node::new();
        let proc_root = node.dir.path().join("proc");
        let d = node.dir.path();
        let (socket, root, state) = (d.join("containerd.sock"), d.join("root"), d.join("state"));
        let daemon = support::fake_daemon(
            &proc_root,
            &socket,
            &support::daemon_args(&socket, &root, &state),
        );
        fs::write(proc_root.join("meminfo"), "Dirty: 0 kB\nWriteback: 0 kB\n").unwrap();
        node.daemon = Some((proc_root, daemon));
        node
    }

    fn add_status(&self, id: &str, content: &[u8]) -> PathBuf {
        let container = self
            .dir
            .path()
            .join("root/io.containerd.grpc.v1.cri/containers")
            .join(id);
        fs::create_dir_all(&container).unwrap();
        fs::write(container.join("status"), content).unwrap();
        container.join("status")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_nodectl"));
        command
            .args(args)
            .arg("--root")
            .arg(self.dir.path().join("root"))
            .arg("--state")
            .arg(self.dir.path().join("state"))
            .arg("--address")
            .arg(self.dir.path().join("containerd.sock"))
            .arg("--config")
            .arg(self.dir.path().join("config.toml"));
        if let Some((proc_root, _)) = &self.daemon {
            command.arg("--proc-root").arg(proc_root);
        }
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// [`Node::run`] reading the processes of `proc_root`.
    fn run_on_proc(&self, args: &[&str], proc_root: &Path) -> Output {
        self.command(args)
            .arg("--proc-root")
            .arg(proc_root)
            .output()
            .unwrap()
    }

    fn write_config(&self) {
        fs::write(self.dir.path().join("config.toml"), "version = 2\n").unwrap();
    }
}

fn testdata(name: &str) -> Vec<u8> {
    fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/status")
            .join(name),
    )
    .unwrap()
}

/// The JSON report a run printed, checked against the published schema:
/// every document these tests read is one a consumer could be handed.
fn json(output: &Output) -> Value {
    support::report(output)
}

/// A status file of a running container whose process is long gone: a pid
/// that was just reaped, and a start time a minute ago.
fn dead_running_status() -> Vec<u8> {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let now = chrono::Utc::now().timestamp_nanos_opt().unwrap();
    let started = now - 60_000_000_000;
    format!(
        r#"{{"Version":"v1","Pid":{pid},"CreatedAt":{},"StartedAt":{started},"FinishedAt":0,"ExitCode":0,"Reason":"","Message":""}}"#,
        started - 100_000_000
    )
    .into_bytes()
}

/// A container that exited a moment ago, recorded on time.
fn exited_now_status() -> Vec<u8> {
    let now = chrono::Utc::now().timestamp_nanos_opt().unwrap();
    format!(
        r#"{{"Version":"v1","Pid":0,"CreatedAt":{},"StartedAt":{},"FinishedAt":{now},"ExitCode":0,"Reason":"","Message":""}}"#,
        now - 2_000_000_000,
        now - 1_000_000_000
    )
    .into_bytes()
}

#[test]
fn healthy_node_exits_0_and_says_which_paths_it_used() {
    let node = Node::proven();
    node.write_config();
    node.add_status(RUNNING_ID, &exited_now_status());
    let output = node.run(&["zombies", "--settle", "0s"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.contains("No findings."), "{text}");
    assert!(
        text.contains("[flag]"),
        "the report names where paths came from: {text}"
    );
}

/// `zombies -o json` on `node` with one container CRI calls running whose
/// process is gone: exit 1, and the report.
fn one_zombie_on(node: Node) -> serde_json::Value {
    node.write_config();
    node.add_status(RUNNING_ID, &dead_running_status());
    let output = node.run(&["zombies", "-o", "json", "--settle", "100ms"]);
    assert_eq!(output.status.code(), Some(1));
    json(&output)
}

#[test]
fn zombie_exits_1_with_the_full_id_in_json() {
    let doc = one_zombie_on(Node::new());
    assert_eq!(doc["findings"][0]["kind"], "zombie");
    assert_eq!(doc["findings"][0]["id"], RUNNING_ID);
    assert_eq!(doc["paths"]["root"]["origin"], "flag");
    // What the person on the node acts on: the way out. This node has no
    // containerd at all (nothing at its socket, no process of it).
    let remedy = doc["findings"][0]["remedy"].as_str().unwrap();
    assert!(remedy.starts_with("Start containerd"), "{remedy}");

    // With its containerd running, the way out of a slow delete, and what
    // to check next.
    let doc = one_zombie_on(Node::proven());
    assert_eq!(doc["findings"][0]["id"], RUNNING_ID);
    let remedy = doc["findings"][0]["remedy"].as_str().unwrap();
    assert!(remedy.contains("restarting containerd"), "{remedy}");
    assert!(remedy.contains("nodectl leaked-shims"), "{remedy}");
}

#[test]
fn zombies_past_what_a_report_lists_are_counted_in_every_output() {
    // `zombies` builds only the findings a report lists (200 of a kind):
    // the rest must still be counted, as if built and cut.
    let node = Node::new();
    node.write_config();
    let dead = dead_running_status();
    let ids: Vec<String> = (0..205).map(|i| format!("{i:064x}")).collect();
    for id in &ids {
        node.add_status(id, &dead);
    }
    let output = node.run(&["zombies", "-o", "json", "--settle", "0s"]);
    assert_eq!(output.status.code(), Some(1));
    let doc = json(&output);
    let listed: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ids[..200], "the first 200 by id");
    assert_eq!(doc["findings_omitted"], serde_json::json!({"zombie": 5}));

    let output = node.run(&["zombies", "--settle", "0s"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("… and 5 more zombie finding(s) not listed"),
        "{text}"
    );
    let output = node.run(&["zombies", "-o", "prometheus", "--settle", "0s"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.lines().any(|l| l.starts_with("nodectl_findings{")
            && l.contains("kind=\"zombie\"")
            && l.ends_with(" 205")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("nodectl_findings_by_severity{")
                && l.contains("severity=\"critical\"")
                && l.ends_with(" 205")),
        "{text}"
    );
}

#[test]
fn corrupt_status_file_is_a_gap_naming_the_file_and_exits_2() {
    let node = Node::new();
    node.write_config();
    let bad = node.add_status(CORRUPT_ID, &testdata("truncated.json"));
    let output = node.run(&["zombies", "-o", "json"]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "nothing found, but not everything checked"
    );
    let doc = json(&output);
    assert!(doc["findings"].as_array().unwrap().is_empty());
    assert_eq!(doc["gaps"][0]["path"], bad.display().to_string());
    assert_eq!(doc["gaps"][0]["source"], "cri-store");

    // Findings outrank gaps: still 1 when something was found.
    node.add_status(RUNNING_ID, &dead_running_status());
    let output = node.run(&["zombies", "-o", "json", "--settle", "0s"]);
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn wrong_root_cannot_be_checked_and_exits_2() {
    let node = Node::new();
    node.write_config();
    let output = Command::new(env!("CARGO_BIN_EXE_nodectl"))
        .args(["zombies", "--root", "/nonexistent/containerd", "--config"])
        .arg(node.dir.path().join("config.toml"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("Could not check") && text.contains("/nonexistent/containerd"),
        "{text}"
    );
}

/// A node whose procfs cannot be read (the wrong `--proc-root`, or one that
/// does not answer by the deadline) shows no process at all: that is a
/// check that could not be made, not every running container dead.
#[test]
fn without_procfs_no_container_is_called_a_zombie_and_the_run_exits_2() {
    let node = Node::new();
    node.write_config();
    node.add_status(RUNNING_ID, &dead_running_status());
    let missing = node.dir.path().join("no-proc");
    for command in ["zombies", "check"] {
        let args = [command, "-o", "json", "--settle", "0s", "--timeout", "1s"];
        let output = node.run_on_proc(&args, &missing);
        let doc = json(&output);
        assert_eq!(output.status.code(), Some(2), "{command}: {doc}");
        assert_eq!(doc["findings"], serde_json::json!([]), "{command}");
        let procfs_gap = doc["gaps"].as_array().unwrap().iter().any(|gap| {
            gap["source"] == "procfs"
                && gap["source_unavailable"] == true
                && gap["path"]
                    .as_str()
                    .is_some_and(|path| Path::new(path).starts_with(&missing))
        });
        assert!(procfs_gap, "{command}: {}", doc["gaps"]);
    }
    // The same node with its procfs read: the zombie is found.
    let output = node.run(&["zombies", "-o", "json", "--settle", "0s"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(json(&output)["findings"][0]["id"], RUNNING_ID);
}

/// A process listed in procfs whose `stat` cannot be read (denied by a
/// profile, an I/O error; here a directory where the file belongs) may well
/// be alive: its container is not called a zombie, and the gap says why.
#[test]
fn a_process_whose_stat_cannot_be_read_is_not_called_a_zombie() {
    let node = Node::new();
    node.write_config();
    let status = dead_running_status();
    node.add_status(RUNNING_ID, &status);
    let pid = serde_json::from_slice::<Value>(&status).unwrap()["Pid"]
        .as_i64()
        .unwrap();
    let proc_root = node.dir.path().join("proc");
    fs::create_dir_all(proc_root.join(pid.to_string()).join("stat")).unwrap();
    fs::write(proc_root.join("stat"), "btime 1700000000\n").unwrap();
    let unreadable = proc_root.join(pid.to_string()).join("stat");
    for command in ["zombies", "check"] {
        let args = [command, "-o", "json", "--settle", "0s", "--timeout", "1s"];
        let output = node.run_on_proc(&args, &proc_root);
        let doc = json(&output);
        assert_eq!(doc["findings"], serde_json::json!([]), "{command}: {doc}");
        assert_eq!(output.status.code(), Some(2), "{command}: {doc}");
        let gap = doc["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|gap| gap["path"] == unreadable.display().to_string());
        let gap = gap.unwrap_or_else(|| panic!("{command}: {}", doc["gaps"]));
        assert_eq!(gap["source"], "procfs");
        let error = gap["error"].as_str().unwrap();
        assert!(
            error.ends_with("whether the process lives is unknown"),
            "{error}"
        );
    }
    // The same pid with no directory at all: gone, so a zombie.
    fs::remove_dir_all(proc_root.join(pid.to_string())).unwrap();
    let output = node.run_on_proc(&["zombies", "-o", "json", "--settle", "0s"], &proc_root);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(json(&output)["findings"][0]["id"], RUNNING_ID);
}

#[test]
fn missing_config_given_explicitly_is_reported() {
    let node = Node::new();
    let output = node.run(&["zombies", "-o", "json"]);
    let doc = json(&output);
    assert_eq!(doc["gaps"][0]["source"], "config");
    assert_eq!(output.status.code(), Some(2));
}

/// A process the kernel shows as a shim of this node's containerd: a
/// root-owned copy of sh named `containerd-shim-runc-v2` (a symlink would
/// show sh as its executable), in our namespaces, whose `-address` is the
/// node's socket, which accepts connections and never answers (a frozen
/// containerd). It blocks reading a pipe: no children.
struct FakeShim {
    child: std::process::Child,
    _socket: std::os::unix::net::UnixListener,
}

impl FakeShim {
    fn start(node: &Node, id: &str) -> FakeShim {
        let exe = node.dir.path().join("containerd-shim-runc-v2");
        fs::copy("/bin/sh", &exe).unwrap();
        let socket = node.dir.path().join("containerd.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let child = support::spawn_fresh_executable(
            Command::new(&exe)
                .args([
                    "-c",
                    "read line",
                    "-namespace",
                    "k8s.io",
                    "-id",
                    id,
                    "-address",
                ])
                .arg(&socket)
                .stdin(Stdio::piped()),
        );
        FakeShim {
            child,
            _socket: listener,
        }
    }

    fn is_running(&self) -> bool {
        support::is_running(self.child.id() as i32)
    }
}

impl Drop for FakeShim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `command` as it is, or run as nobody when the tests run as root.
fn not_root(command: Command) -> Command {
    if !nix::unistd::geteuid().is_root() {
        return command;
    }
    let mut as_nobody = Command::new("setpriv");
    as_nobody
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(command.get_program())
        .args(command.get_args());
    as_nobody
}

#[test]
fn kill_needs_root() {
    let node = Node::new();
    node.write_config();
    let output = not_root(node.command(&["leaked-shims", "--kill", "--yes"]))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--kill needs root"), "{stderr}");
}

#[test]
fn kill_asks_first_and_refuses_what_containerd_cannot_confirm() {
    if !nix::unistd::geteuid().is_root() {
        return support::skip(
            "kill_asks_first_and_refuses_what_containerd_cannot_confirm",
            "needs root (--kill)",
        );
    }
    let node = Node::new();
    node.write_config();
    let shim = FakeShim::start(&node, &"e".repeat(64));
    std::thread::sleep(std::time::Duration::from_millis(200));

    // Found, inferred from disk: containerd does not answer on this socket.
    let doc = json(&node.run(&["leaked-shims", "-o", "json", "--timeout", "300ms"]));
    assert_eq!(doc["findings"][0]["evidence"]["shim_pid"], shim.child.id());
    assert_eq!(doc["findings"][0]["evidence"]["inferred"], true);

    // No terminal to ask on and no --yes: nothing is touched.
    let output = node
        .command(&["leaked-shims", "--kill", "--timeout", "300ms"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("without --yes"));
    assert!(shim.is_running());

    // With --yes, the re-check refuses: only containerd can confirm a leak,
    // and none was proven to serve the socket (here a fake shim's).
    let doc = json(&node.run(&[
        "leaked-shims",
        "--kill",
        "--yes",
        "-o",
        "json",
        "--timeout",
        "300ms",
    ]));
    assert_eq!(doc["actions"][0]["outcome"], "refused", "{doc}");
    let detail = doc["actions"][0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("not acting without a proven containerd"),
        "{detail}"
    );
    assert!(shim.is_running(), "a refused shim is left alone");
}

#[test]
fn cleanup_needs_root_to_act() {
    let node = Node::new();
    node.write_config();
    let output = not_root(node.command(&["leaked-mounts", "--unmount", "--yes"]))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--yes needs root"), "{stderr}");
}

/// Without containerd's answer nothing is confirmed leaked: the inferred
/// leaked mount is refused (no containerd is proven to serve the socket,
/// so nothing is acted on at all), and no bundle is an orphan.
#[test]
fn cleanup_refuses_what_containerd_cannot_confirm() {
    if !nix::unistd::geteuid().is_root() {
        return support::skip(
            "cleanup_refuses_what_containerd_cannot_confirm",
            "needs root (mount)",
        );
    }
    let node = Node::new();
    node.write_config();
    let bundle = node
        .dir
        .path()
        .join(support::HAND_MADE_BUNDLES)
        .join("d".repeat(64));
    fs::create_dir_all(bundle.join("rootfs")).unwrap();
    // An image volume of a sandbox no file names (a rootfs would count its
    // bundle as the record).
    let volume = node
        .dir
        .path()
        .join("state/io.containerd.grpc.v1.cri/image-volumes")
        .join("c".repeat(64))
        .join("9".repeat(64));
    fs::create_dir_all(&volume).unwrap();
    support::mount_tmpfs(&volume);
    let output = node.run(&[support::LEAKED_MOUNTS_CLEAN, &["--timeout", "300ms"]].concat());
    let mounted = support::mounts_below(&volume).contains(&volume);
    let _ = nix::mount::umount2(&volume, nix::mount::MntFlags::MNT_DETACH);
    let doc = json(&output);
    support::assert_matches_schema(&doc);
    assert_eq!(doc["findings"][0]["evidence"]["inferred"], true, "{doc}");
    let cleanups = doc["cleanups"].as_array().unwrap();
    assert_eq!(cleanups.len(), 1, "{doc}");
    assert_eq!(cleanups[0]["action"], "unmount");
    assert_eq!(cleanups[0]["outcome"], "refused");
    let detail = cleanups[0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("not acting without a proven containerd"),
        "{detail}"
    );
    assert!(mounted, "the refused mount stays");
    assert!(bundle.is_dir());
}

/// Mounts a test made, undone when it ends however it ends (deepest, that
/// is last made, first).
struct Mounted(Vec<PathBuf>);

impl Mounted {
    fn tmpfs(&mut self, at: &Path) {
        support::mount_tmpfs(at);
        self.0.push(at.to_path_buf());
    }

    fn bind(&mut self, from: &Path, at: &Path) {
        let flags = nix::mount::MsFlags::MS_BIND;
        nix::mount::mount(Some(from), at, None::<&str>, flags, None::<&str>)
            .unwrap_or_else(|e| panic!("binding {} at {}: {e}", from.display(), at.display()));
        self.0.push(at.to_path_buf());
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        for point in self.0.iter().rev() {
            let _ = nix::mount::umount2(point, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

/// `--state` through a symlink, through `..` or as a bind mount of the
/// directory finds the mounts the table lists below the directory itself:
/// the same leaked mount, where the kernel has it.
#[test]
fn every_spelling_of_state_finds_the_same_leaked_mount() {
    if !nix::unistd::geteuid().is_root() {
        return support::skip(
            "every_spelling_of_state_finds_the_same_leaked_mount",
            "needs root (mount)",
        );
    }
    let node = Node::new();
    node.write_config();
    let dir = node.dir.path();
    let state = dir.join("state");
    // An image volume of a sandbox no file names: leaked (inferred).
    let sandbox = "c".repeat(64);
    let volume = state
        .join("io.containerd.grpc.v1.cri/image-volumes")
        .join(&sandbox)
        .join("9".repeat(64));
    fs::create_dir_all(&volume).unwrap();
    let (link, bind) = (dir.join("link"), dir.join("bind"));
    std::os::unix::fs::symlink(&state, &link).unwrap();
    fs::create_dir(&bind).unwrap();
    let mut mounted = Mounted(Vec::new());
    mounted.bind(&state, &bind);
    mounted.tmpfs(&volume);
    let [root, _, address, config] = support::hand_made_paths(dir);
    for given in [state.clone(), link, state.join("../state"), bind] {
        let paths = [root.as_path(), &given, &address, &config];
        let args = ["leaked-mounts", "-o", "json", "--timeout", "300ms"];
        let output = support::nodectl_at(&args, paths).unwrap();
        let doc = json(&output);
        let findings: Vec<_> = doc["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let evidence = &f["evidence"];
                (
                    f["kind"].clone(),
                    f["id"].clone(),
                    evidence["mount_point"].clone(),
                )
            })
            .collect();
        let expected = ("leaked-mount", sandbox.as_str(), volume.to_str().unwrap());
        assert_eq!(
            findings,
            [(expected.0.into(), expected.1.into(), expected.2.into())],
            "--state {}: {doc}",
            given.display()
        );
        assert_eq!(output.status.code(), Some(1), "--state {}", given.display());
    }
}

#[test]
fn closed_pipe_ends_quietly() {
    let node = Node::new();
    node.write_config();
    for n in 0..200 {
        node.add_status(&format!("{n:064}"), &dead_running_status());
    }
    let mut child = node
        .command(&["zombies", "-o", "json", "--settle", "0s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one byte, then hang up, as `| head -c1` would.
    let mut stdout = child.stdout.take().unwrap();
    let mut byte = [0u8; 1];
    stdout.read_exact(&mut byte).unwrap();
    drop(stdout);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.is_empty(), "nothing on stderr: {stderr}");
    assert_eq!(
        output.status.code(),
        Some(1),
        "the findings still decide the exit code"
    );
}

/// `shims` shows the socket a 1.x shim serves, from its bundle's `address`
/// (a file `check` does not read: no check uses it).
#[test]
fn shims_shows_each_shims_socket_from_its_bundle() {
    let node = Node::new();
    node.write_config();
    let id = "e".repeat(64);
    let shim = FakeShim::start(&node, &id);
    let bundle = node
        .dir
        .path()
        .join("state/io.containerd.runtime.v2.task/k8s.io")
        .join(&id);
    fs::create_dir_all(&bundle).unwrap();
    fs::write(bundle.join("config.json"), "{}").unwrap();
    fs::write(bundle.join("address"), "unix:///run/containerd/s/0e0e\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let doc = json(&node.run(&["shims", "-o", "json"]));
    let row = doc["shims"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["pid"] == shim.child.id())
        .unwrap_or_else(|| panic!("the shim is a row: {doc}"));
    assert_eq!(row["socket"], "unix:///run/containerd/s/0e0e", "{row}");
}

/// A node with one of everything the file-based checks find, and a gap.
fn troubled_node() -> Node {
    let node = Node::new();
    node.write_config();
    node.add_status(RUNNING_ID, &dead_running_status());
    node.add_status(CORRUPT_ID, &testdata("truncated.json"));
    node.add_status(&"3".repeat(64), &testdata("late-exit.json"));
    node
}

#[test]
fn every_command_prints_json_that_matches_the_schema() {
    let node = troubled_node();
    // A shim process, so that `shims` has a row and `leaked-shims` a
    // finding and an action for the schema to judge (an empty list would
    // pass whatever the schema says of its items).
    let shim = FakeShim::start(&node, &"e".repeat(64));
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut check = None;
    let mut shims = None;
    let mut leaked = None;
    for args in [
        &[
            "zombies", "-o", "json", "--settle", "0s", "--since", "3650d",
        ][..],
        &[
            "check",
            "-o",
            "json",
            "--timeout",
            "300ms",
            "--since",
            "3650d",
        ],
        &["shims", "-o", "json"],
        &["leaked-shims", "-o", "json", "--timeout", "300ms"],
        &["leaked-mounts", "-o", "json", "--timeout", "300ms"],
    ] {
        let doc = json(&node.run(args));
        assert_eq!(doc["command"], args[0]);
        match args[0] {
            "check" => check = Some(doc),
            "shims" => shims = Some(doc),
            "leaked-shims" => leaked = Some(doc),
            _ => {}
        }
    }
    let shims = shims.expect("shims ran");
    let rows = shims["shims"].as_array().expect("shims lists its rows");
    assert!(
        rows.iter().any(|row| row["pid"] == shim.child.id()),
        "the shim is a row: {shims}"
    );
    let leaked = leaked.expect("leaked-shims ran");
    assert_eq!(leaked["findings"][0]["kind"], "leaked-shim", "{leaked}");
    assert_eq!(
        leaked["actions"][0]["shim_pid"],
        shim.child.id(),
        "{leaked}"
    );
    let doc = check.expect("check ran");
    let kinds: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    for kind in ["zombie", "late-exit"] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    // The shim's socket accepts and never answers: a frozen containerd is
    // there to be unreachable (no containerd at all is a gap: see below).
    let frozen: Vec<&serde_json::Value> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "api-unreachable")
        .collect();
    assert!(
        !frozen.is_empty() && frozen.iter().all(|f| f["evidence"]["timed_out"] == true),
        "{kinds:?} {}",
        doc["findings"]
    );
}

fn widest_line(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// At 80 columns (a terminal's `COLUMNS`, and the width into a pipe), a
/// node with findings and a gap whose path is 170 characters long: no line
/// is wider, each finding is one line, and `-o wide` has the evidence.
#[test]
fn check_fits_80_columns_and_wide_shows_the_evidence() {
    let node = troubled_node();
    let args = ["check", "--timeout", "300ms", "--since", "3650d"];
    for columns in [Some("80"), None] {
        let mut command = node.command(&args);
        match columns {
            Some(columns) => command.env("COLUMNS", columns),
            None => command.env_remove("COLUMNS"),
        };
        let output = command.output().unwrap();
        let text = String::from_utf8(output.stdout).unwrap();
        assert_eq!(output.status.code(), Some(1), "{text}");
        assert!(widest_line(&text) <= 80, "COLUMNS={columns:?}:\n{text}");
        assert!(
            !text.contains('│') && !text.contains('┆'),
            "borderless: {text}"
        );
        let zombie = text.lines().filter(|l| l.starts_with("zombie ")).count();
        assert_eq!(zombie, 1, "{text}");
        assert!(
            !text.contains("pid: "),
            "no evidence without -o wide: {text}"
        );
    }
    let output = node.run(&[&args[..], &["-o", "wide"]].concat());
    let text = String::from_utf8(output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains(&format!("zombie {RUNNING_ID}")), "{text}");
    assert!(text.contains("pid: "), "{text}");
    assert!(text.contains("running for: 1m0"), "an age: {text}");
    assert!(text.contains("What to do"), "{text}");
}

/// Nothing at the socket and no containerd process: could not check
/// (exit 2), said once, in one sentence naming the socket; not two
/// critical api-unreachable findings and exit 1.
#[test]
fn no_containerd_on_the_node_is_could_not_check_in_one_sentence() {
    let dir = support::hand_made_node();
    fs::write(dir.path().join("config.toml"), "version = 2\n").unwrap();
    let socket = support::hand_made_paths(dir.path())[2]
        .display()
        .to_string();
    let output = support::hand_made_command(dir.path(), &["check"])
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout.clone()).unwrap();
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(output.stderr.is_empty(), "{}", support::stderr(&output));
    let said = support::unwrapped(&text);
    assert!(
        said.contains(&format!(
            "containerd-api {socket}: no containerd on this node: no socket there and no containerd process running"
        )),
        "{text}"
    );
    assert_eq!(
        said.matches("no containerd on this node").count(),
        1,
        "once: {text}"
    );
    assert!(!text.contains("api-unreachable"), "{text}");
    assert!(!text.contains("(os error 2)"), "{text}");

    let output = support::hand_made_command(dir.path(), &["check", "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let doc = support::report(&output);
    assert_eq!(doc["findings"], serde_json::json!([]), "{doc}");
    assert_eq!(doc["gaps"].as_array().unwrap().len(), 1, "{doc}");
    assert_eq!(doc["gaps"][0]["path"], socket.as_str());
}

#[test]
fn prometheus_output_passes_promtool() {
    if !support::have("promtool") {
        return support::skip(
            "prometheus_output_passes_promtool",
            "no promtool (package prometheus)",
        );
    }
    let node = troubled_node();
    let output = node.run(&[
        "check",
        "-o",
        "prometheus",
        "--timeout",
        "300ms",
        "--since",
        "3650d",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        text.contains("nodectl_findings{command=\"check\",kind=\"zombie\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("nodectl_up{command=\"check\"} 0"),
        "the API is down here: {text}"
    );
    // Zombies are found without the API; leaked shims are not, and their
    // 0 would be no all-clear.
    assert!(
        text.contains("nodectl_check_ok{command=\"check\",kind=\"zombie\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("nodectl_check_ok{command=\"check\",kind=\"leaked-shim\"} 0"),
        "{text}"
    );
    assert!(
        !text.contains("nodectl_findings{command=\"check\",kind=\"leaked-shim\"}"),
        "{text}"
    );
    support::promtool_accepts(&text);

    // The shipped alerting rules parse, and use the metric names above.
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/nodectl-rules.yaml");
    let verdict = Command::new("promtool")
        .arg("check")
        .arg("rules")
        .arg(&rules)
        .output()
        .unwrap();
    assert!(
        verdict.status.success(),
        "{}",
        String::from_utf8_lossy(&verdict.stdout)
    );
    let rules_text = fs::read_to_string(&rules).unwrap();
    for metric in [
        "nodectl_findings",
        "nodectl_check_ok",
        "nodectl_last_run_timestamp_seconds",
    ] {
        assert!(
            rules_text.contains(metric) && text.contains(metric),
            "{metric}"
        );
    }
}

#[test]
fn shipped_npd_plugin_config_runs_npd_mode() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/node-problem-detector/nodectl-monitor.json");
    let config: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(config["plugin"], "custom");
    for rule in config["rules"].as_array().unwrap() {
        let args: Vec<&str> = rule["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        // The arguments must parse as a nodectl command line in npd mode.
        let mut argv = vec!["nodectl"];
        argv.extend(&args);
        assert!(
            argv.windows(2)
                .any(|w| w == ["-o", "npd"] || w == ["-o", "npd-event"]),
            "{args:?}"
        );
        let output = Command::new(env!("CARGO_BIN_EXE_nodectl"))
            .args(&args)
            .arg("--help")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn npd_mode_is_one_line_with_the_plugin_exit_codes() {
    let node = troubled_node();
    let output = node.run(&["zombies", "-o", "npd", "--settle", "0s"]);
    assert_eq!(
        output.status.code(),
        Some(1),
        "1 = NonOK for node-problem-detector"
    );
    let text = String::from_utf8(output.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("zombie"), "{text}");

    let healthy = Node::proven();
    healthy.write_config();
    let output = healthy.run(&["zombies", "-o", "npd"]);
    assert_eq!(output.status.code(), Some(0), "0 = OK");
    // The same node with no containerd proven to serve its socket: never OK.
    let unproven = Node::new();
    unproven.write_config();
    let output = unproven.run(&["zombies", "-o", "npd"]);
    assert_eq!(output.status.code(), Some(2), "2 = Unknown");

    let output = Command::new(env!("CARGO_BIN_EXE_nodectl"))
        .args([
            "zombies",
            "-o",
            "npd",
            "--root",
            "/nonexistent",
            "--config",
            "/nonexistent.toml",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "2 = Unknown");
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("could not check"));
}

/// Runs nodectl on a pseudo-terminal (`script`, from util-linux; Debian's
/// bsdutils), as a person would.
fn on_terminal(node: &Node, args: &[&str], env: &[(&str, &str)]) -> String {
    let command = node.command(args);
    let line = std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| format!("'{}'", a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ");
    let output = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env_remove("NO_COLOR")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    if let Some((_, value)) = env.iter().find(|(k, _)| *k == "NO_COLOR") {
        text.push_str(&format!("\n(NO_COLOR={value})"));
    }
    text
}

#[test]
fn colour_only_on_a_terminal_and_never_with_no_color_or_term_dumb() {
    if !support::have("script") {
        return support::skip(
            "colour_only_on_a_terminal_and_never_with_no_color_or_term_dumb",
            "no `script` (package bsdutils)",
        );
    }
    let node = troubled_node();
    let args = ["zombies", "--settle", "0s"];
    let coloured = on_terminal(&node, &args, &[("TERM", "xterm-256color")]);
    assert!(
        coloured.contains("\x1b["),
        "colour on a terminal: {coloured}"
    );
    // terminfo's `dumb` has no colours (Emacs shell buffers, CI logs).
    let dumb = on_terminal(&node, &args, &[("TERM", "dumb")]);
    assert!(!dumb.contains("\x1b["), "no colour with TERM=dumb: {dumb}");
    let plain = on_terminal(&node, &args, &[("NO_COLOR", "1")]);
    assert!(!plain.contains("\x1b["), "no colour with NO_COLOR: {plain}");
    let piped = node.run(&args);
    assert!(
        !String::from_utf8_lossy(&piped.stdout).contains("\x1b["),
        "no colour into a pipe"
    );
}

#[test]
fn quiet_prints_nothing_and_keeps_the_exit_status() {
    let node = troubled_node();
    let output = node.run(&["zombies", "--quiet", "--settle", "0s"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty() && output.stderr.is_empty());
}

#[test]
fn a_person_waiting_on_a_silent_containerd_is_told_why() {
    if !support::have("script") {
        return support::skip(
            "a_person_waiting_on_a_silent_containerd_is_told_why",
            "no `script` (package bsdutils)",
        );
    }
    let node = Node::new();
    node.write_config();
    // A socket that accepts connections but never answers, like a frozen containerd.
    let socket = node.dir.path().join("containerd.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let started = std::time::Instant::now();
    let text = on_terminal(&node, &["leaked-shims", "--timeout", "2s"], &[]);
    assert!(text.contains("waiting for containerd"), "{text}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "bounded by --timeout"
    );
    assert!(
        text.contains("containerd-api"),
        "the gap names the API: {text}"
    );
}

/// A fake procfs holding one containerd started k3s-style (this test process,
/// listening on its socket), beside a process that calls itself containerd
/// but runs a script: without path flags, the proven one names the paths,
/// and neither binary is run (the script would leave a mark).
#[test]
fn with_no_path_flags_the_proven_containerd_names_the_paths_and_nothing_is_run() {
    use std::os::unix::fs::{symlink, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let proc_root = d.join("proc");
    fs::create_dir_all(d.join("bin")).unwrap();
    fs::create_dir_all(d.join("root/io.containerd.grpc.v1.cri/containers")).unwrap();
    let mark = d.join("ran");
    let script = d.join("bin/containerd");
    fs::write(
        &script,
        format!(
            "#!/bin/sh\ntouch {}\necho 'containerd github.com/containerd/containerd v1.7.20 8fc6bcff'\n",
            mark.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let config = d.join("config.toml");
    fs::write(
        &config,
        format!("version = 2\nstate = \"{}/state\"\n", d.display()),
    )
    .unwrap();
    let socket = d.join("c.sock");
    let (config_arg, socket_arg, root_arg) = (
        config.display().to_string(),
        socket.display().to_string(),
        format!("--root={}/root", d.display()),
    );
    let daemon = support::fake_daemon(
        &proc_root,
        &socket,
        &["-c", &config_arg, "-a", &socket_arg, &root_arg],
    );
    // Another "containerd" claiming the same socket: a script, in argv only.
    let other = proc_root.join("4242");
    fs::create_dir_all(&other).unwrap();
    fs::write(other.join("comm"), "containerd\n").unwrap();
    fs::write(other.join("stat"), stat_record(4242, "containerd")).unwrap();
    fs::write(
        other.join("cmdline"),
        format!("containerd\0-a\0{socket_arg}\0--root\0/elsewhere\0"),
    )
    .unwrap();
    symlink(&script, other.join("exe")).unwrap();

    let output = Command::new(env!("CARGO_BIN_EXE_nodectl"))
        .args(["shims", "-o", "json", "--proc-root"])
        .arg(&proc_root)
        .output()
        .unwrap();
    let doc = json(&output);
    let at = |path: String, origin: &str| serde_json::json!({"path": path, "origin": origin});
    let d = d.display();
    assert_eq!(
        doc["paths"]["root"],
        at(format!("{d}/root"), "process"),
        "{doc}"
    );
    assert_eq!(
        doc["paths"]["address"],
        at(format!("{d}/c.sock"), "process")
    );
    assert_eq!(doc["paths"]["state"], at(format!("{d}/state"), "config"));
    assert_eq!(doc["paths"]["config"], format!("{d}/config.toml"));
    assert_eq!(doc["paths"]["process"]["pid"], daemon.pid);
    assert_eq!(doc["paths"]["unproven"], serde_json::json!([]), "{doc}");
    let others = &doc["paths"]["other_containerds"];
    assert_eq!(others[0]["pid"], 4242, "{doc}");
    assert!(
        others[0]["reason"]
            .as_str()
            .unwrap()
            .contains("its namespaces could not be read"),
        "{doc}"
    );
    // Its binary records no Go build info: the version is unknown, and
    // neither binary was run to ask.
    assert_eq!(
        doc["containerd"],
        serde_json::json!({"version": null, "source": "unknown"})
    );
    assert!(!mark.exists(), "nodectl ran a binary it found");

    let table = Command::new(env!("CARGO_BIN_EXE_nodectl"))
        .args(["shims", "--proc-root"])
        .arg(&proc_root)
        .output()
        .unwrap();
    let text = support::unwrapped(&String::from_utf8_lossy(&table.stdout));
    assert!(
        text.starts_with(&format!(
            "containerd version unknown: root {d}/root [process]"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("running containerd pid {}", daemon.pid)),
        "{text}"
    );
    assert!(
        text.contains("not the daemon: containerd pid 4242"),
        "{text}"
    );
    assert!(!mark.exists(), "nodectl ran a binary it found");
}

/// A `/proc/<pid>/stat` record as the kernel writes it, for a fake procfs.
fn stat_record(pid: i32, comm: &str) -> String {
    format!(
        "{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 2 0 100 0 0 \
         18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
    )
}

/// With every path given by flag, `check` and `zombies` find the running
/// containerd in their own procfs walk (not in one of their own before):
/// still the one proven to serve `--address`; a process that only claims
/// that socket in its argv is named, never used.
#[test]
fn check_and_zombies_with_every_path_by_flag_still_name_the_proven_containerd() {
    use std::os::unix::fs::symlink;
    let node = Node::new();
    node.write_config();
    let d = node.dir.path();
    let proc_root = d.join("proc");
    fs::write(d.join("mountinfo"), "").unwrap();
    let (socket, root, state) = (d.join("containerd.sock"), d.join("root"), d.join("state"));
    let daemon = support::fake_daemon(
        &proc_root,
        &socket,
        &support::daemon_args(&socket, &root, &state),
    );
    fs::write(proc_root.join("meminfo"), "Dirty: 0 kB\nWriteback: 0 kB\n").unwrap();
    let claimant = |pid: i32, exe: &Path| {
        let dir = proc_root.join(pid.to_string());
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("comm"), "containerd\n").unwrap();
        fs::write(dir.join("stat"), stat_record(pid, "containerd")).unwrap();
        let argv = format!("containerd\0-a\0{}\0", socket.display());
        fs::write(dir.join("cmdline"), argv).unwrap();
        symlink(exe, dir.join("exe")).unwrap();
    };
    // An impostor (its binary is no containerd), and a containerd binary
    // that only claims the socket.
    claimant(4000, Path::new("/bin/sh"));
    claimant(4343, &proc_root.join("daemon-bin/containerd"));
    let run = |command: &str| {
        let output = node
            .command(&[command, "-o", "json", "--settle", "0s", "--timeout", "2s"])
            .arg("--proc-root")
            .arg(&proc_root)
            .arg("--mountinfo")
            .arg(d.join("mountinfo"))
            .output()
            .unwrap();
        json(&output)
    };
    for command in ["check", "zombies"] {
        let doc = run(command);
        assert_eq!(
            doc["paths"]["process"]["pid"], daemon.pid,
            "{command}: {doc}"
        );
        assert_eq!(doc["paths"]["root"]["origin"], "flag");
        assert_eq!(doc["paths"]["note"], Value::Null);
        assert_eq!(doc["paths"]["unproven"], serde_json::json!([]), "{doc}");
        let others: Vec<&Value> = doc["paths"]["other_containerds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| &o["pid"])
            .collect();
        assert_eq!(others, [&Value::from(4343)], "{command}: {doc}");
    }
}

#[test]
fn zombies_does_not_read_the_mount_table() {
    // No zombie or late exit needs it, and on a big node it is megabytes.
    let node = Node::proven();
    node.write_config();
    node.add_status(RUNNING_ID, &exited_now_status());
    let output = node.run(&[
        "zombies",
        "-o",
        "json",
        "--mountinfo",
        "/nonexistent/mountinfo",
    ]);
    let doc = json(&output);
    assert_eq!(doc["gaps"], serde_json::json!([]), "{doc}");
    assert_eq!(output.status.code(), Some(0));
    // `check` does read it: the same flag is a gap there.
    let output = node.run(&[
        "check",
        "-o",
        "json",
        "--settle",
        "0s",
        "--mountinfo",
        "/nonexistent/mountinfo",
    ]);
    let doc = json(&output);
    assert!(
        doc["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["path"] == "/nonexistent/mountinfo"),
        "{doc}"
    );
}

/// A fake procfs in `dir/proc` holding one running shim (pid 4300) with two
/// threads, whose `syscall` files are made by `syscall`.
fn proc_with_a_shim(dir: &Path, syscall: impl Fn(&Path)) -> PathBuf {
    use std::os::unix::fs::symlink;
    let proc_root = dir.join("proc");
    let pid = proc_root.join("4300");
    fs::create_dir_all(&pid).unwrap();
    fs::write(proc_root.join("stat"), "btime 1700000000\n").unwrap();
    fs::write(proc_root.join("meminfo"), "Dirty: 0 kB\nWriteback: 0 kB\n").unwrap();
    fs::create_dir(proc_root.join("self")).unwrap();
    fs::write(proc_root.join("self/mountinfo"), "").unwrap();
    fs::write(pid.join("stat"), stat_record(4300, "containerd-shim")).unwrap();
    fs::write(
        pid.join("cmdline"),
        format!(
            "/usr/bin/containerd-shim-runc-v2\0-namespace\0k8s.io\0-id\0{RUNNING_ID}\0-address\0/run/containerd/containerd.sock\0"
        ),
    )
    .unwrap();
    symlink(dir, pid.join("cwd")).unwrap();
    for tid in [4300, 4301] {
        let task = pid.join("task").join(tid.to_string());
        fs::create_dir_all(&task).unwrap();
        fs::write(task.join("stat"), stat_record(tid, "containerd-shim")).unwrap();
        syscall(&task.join("syscall"));
    }
    proc_root
}

/// A shim's thread files that cannot be read while it runs (an AppArmor
/// profile denying ptrace reads, here a directory in place of a file or a
/// file nobody may read) are one procfs gap for the process, naming the
/// first file and why: exit 2 (could not check) when nothing was found,
/// `nodectl_up` still 1 (one item, not the source).
#[test]
fn a_shims_unreadable_thread_files_are_one_gap_for_the_process() {
    use std::os::unix::fs::PermissionsExt;
    let procfs_gaps = |doc: &Value| -> Vec<Value> {
        doc["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| g["source"] == "procfs")
            .cloned()
            .collect()
    };
    let run = |node: &Node, proc_root: &Path, as_nobody: bool| {
        let mut command = node.command(&["shims", "-o", "json"]);
        command.arg("--proc-root").arg(proc_root);
        let mut command = if as_nobody {
            not_root(command)
        } else {
            command
        };
        let output = command.output().unwrap();
        (output.status.code(), json(&output))
    };

    // Readable: no gap, and the thread's syscall is known.
    let node = Node::new();
    node.write_config();
    let readable = proc_with_a_shim(node.dir.path(), |path| {
        fs::write(path, "202 0x0 0x0 0x0 0x0 0x0 0x0 0x7ffd 0x4").unwrap()
    });
    let d = node.dir.path();
    let (socket, root, state) = (d.join("containerd.sock"), d.join("root"), d.join("state"));
    let _daemon = support::fake_daemon(
        &readable,
        &socket,
        &support::daemon_args(&socket, &root, &state),
    );
    let (code, doc) = run(&node, &readable, false);
    assert_eq!(procfs_gaps(&doc), Vec::<Value>::new(), "{doc}");
    assert_eq!(code, Some(0), "{doc}");

    // What proves the shim is read too: an `exe` that cannot be followed.
    std::os::unix::fs::symlink("exe", readable.join("4300/exe")).unwrap();
    let (code, doc) = run(&node, &readable, false);
    let gaps = procfs_gaps(&doc);
    assert_eq!(gaps.len(), 1, "{doc}");
    assert_eq!(
        gaps[0]["path"],
        readable.join("4300/exe").display().to_string()
    );
    assert_eq!(
        gaps[0]["error"],
        "too many symbolic links encountered (ELOOP)"
    );
    assert_eq!(code, Some(2), "{doc}");

    // A directory where the kernel has a file, on each thread: not read.
    let node = Node::new();
    node.write_config();
    let proc_root = proc_with_a_shim(node.dir.path(), |path| fs::create_dir(path).unwrap());
    // Its proof's failed read is not a second gap.
    std::os::unix::fs::symlink("exe", proc_root.join("4300/exe")).unwrap();
    let (code, doc) = run(&node, &proc_root, false);
    let gaps = procfs_gaps(&doc);
    assert_eq!(gaps.len(), 1, "one gap for the process: {doc}");
    let path = gaps[0]["path"].as_str().unwrap();
    assert!(
        ["4300", "4301"]
            .map(|tid| proc_root.join(format!("4300/task/{tid}/syscall")))
            .contains(&PathBuf::from(path)),
        "the first thread's file: {path}"
    );
    assert_eq!(
        gaps[0]["error"],
        "a directory, where a regular file belongs: not read (and 1 more read of this process)"
    );
    assert_eq!(gaps[0]["source_unavailable"], false);
    assert_eq!(code, Some(2), "could not check: {doc}");
    assert_eq!(doc["shims"][0]["pid"], 4300, "the shim is still listed");

    // Really denied: a file nobody may read, read by nobody (a shim's
    // files as containerd's AppArmor profile leaves them).
    let node = Node::new();
    node.write_config();
    let proc_root = proc_with_a_shim(node.dir.path(), |path| {
        fs::write(path, "202 0x0").unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o000)).unwrap();
    });
    fs::set_permissions(node.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let (code, doc) = run(&node, &proc_root, true);
    let gaps = procfs_gaps(&doc);
    assert_eq!(gaps.len(), 1, "{doc}");
    let error = gaps[0]["error"].as_str().unwrap();
    assert!(error.starts_with("permission denied (EACCES): "), "{error}");
    assert!(error.contains("AppArmor"), "{error}");
    assert_eq!(code, Some(2), "{doc}");
}
