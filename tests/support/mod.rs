//! A real, isolated containerd for the tests: its own root, state, socket and
//! config in a temp dir, pods created through CRI, faults injected with strace.
//! Dropping the [`TestBed`] ends every process it started and removes its
//! mounts and files.
#![allow(dead_code)]

mod image;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::*;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tonic::transport::{Channel, Endpoint};

pub use image::IMAGE;

const NAMESPACE: &str = "k8s.io";
/// Bound on every CRI call the harness makes.
const CRI_CALL: Duration = Duration::from_secs(60);
const BINARIES: &[&str] = &[
    "containerd",
    "ctr",
    "runc",
    "strace",
    "containerd-shim-runc-v2",
];

pub struct Pod {
    pub sandbox_id: String,
    pub container_id: String,
}

pub struct TestBed {
    dir: tempfile::TempDir,
    root: PathBuf,
    state: PathBuf,
    address: PathBuf,
    config: PathBuf,
    log: PathBuf,
    containerd: Child,
    sandboxes: std::sync::Mutex<BTreeSet<String>>,
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Says why a real-containerd test cannot run: in CI that fails the test,
/// elsewhere the test is skipped with the reason printed.
fn unavailable(test: &str, why: String) -> Option<TestBed> {
    if in_ci() {
        panic!("{test}: the real-containerd test bed is required in CI: {why}");
    }
    eprintln!("skipping {test}: {why}");
    None
}

fn which(binary: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(binary).is_file()))
        .unwrap_or(false)
}

impl TestBed {
    pub async fn start(test: &str) -> Option<TestBed> {
        if !nix::unistd::geteuid().is_root() {
            return unavailable(test, "needs root (containerd, runc and strace -p)".into());
        }
        let missing: Vec<&str> = BINARIES.iter().copied().filter(|b| !which(b)).collect();
        if !missing.is_empty() {
            return unavailable(
                test,
                format!("missing {} (run scripts/test)", missing.join(", ")),
            );
        }
        if !Path::new("/bin/busybox").is_file() {
            return unavailable(test, "missing /bin/busybox (package busybox-static)".into());
        }
        // Orphaned shims are reparented to us, so they can be reaped on drop.
        let _ = nix::sys::prctl::set_child_subreaper(true);
        match TestBed::launch().await {
            Ok(bed) => Some(bed),
            Err(why) => panic!("{test}: starting containerd failed: {why}"),
        }
    }

    async fn launch() -> Result<TestBed, String> {
        let dir = tempfile::Builder::new()
            .prefix("nodectl-")
            .tempdir_in("/tmp")
            .map_err(|e| e.to_string())?;
        let root = dir.path().join("root");
        let state = dir.path().join("state");
        let address = dir.path().join("containerd.sock");
        let config = dir.path().join("config.toml");
        let log = dir.path().join("containerd.log");
        for sub in ["cni/bin", "cni/conf", "opt", "logs"] {
            fs::create_dir_all(dir.path().join(sub)).map_err(|e| e.to_string())?;
        }
        let d = dir.path().display();
        // Facts of the test machines: runc cannot lower oom_score_adj here
        // (restrict_oom_score_adj), there is no CNI (pods use the host
        // network) and no registry (the sandbox image is imported locally).
        let text = format!(
            r#"version = 2
root = "{d}/root"
state = "{d}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "{d}/containerd.sock"

[debug]
  level = "debug"

[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{IMAGE}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{d}/cni/bin"
    conf_dir = "{d}/cni/conf"
"#
        );
        fs::write(&config, text).map_err(|e| e.to_string())?;
        let log_file = fs::File::create(&log).map_err(|e| e.to_string())?;
        let containerd = Command::new("containerd")
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().map_err(|e| e.to_string())?)
            .stderr(log_file)
            .spawn()
            .map_err(|e| format!("spawning containerd: {e}"))?;
        let bed = TestBed {
            dir,
            root,
            state,
            address,
            config,
            log,
            containerd,
            sandboxes: Default::default(),
        };
        bed.wait_ready()
            .await
            .map_err(|e| format!("{e}\n{}", bed.log_tail()))?;
        bed.import_image()
            .await
            .map_err(|e| format!("{e}\n{}", bed.log_tail()))?;
        Ok(bed)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn state(&self) -> &Path {
        &self.state
    }
    pub fn address(&self) -> &Path {
        &self.address
    }
    pub fn config_path(&self) -> &Path {
        &self.config
    }
    /// A path in the test bed's temp dir, removed with it.
    pub fn scratch(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    pub fn containerd_pid(&self) -> i32 {
        self.containerd.id() as i32
    }

    /// The last lines of containerd's log, for failure messages.
    pub fn log_tail(&self) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(40)..].join("\n");
        format!("--- containerd log (last 40 lines) ---\n{tail}")
    }

    async fn channel(&self) -> Result<Channel, String> {
        let path = self.address.clone();
        let endpoint = Endpoint::try_from("http://[::]:50051").map_err(|e| e.to_string())?;
        let connect = endpoint.connect_with_connector(tower::service_fn(move |_| {
            let path = path.clone();
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(path).await?))
            }
        }));
        match tokio::time::timeout(CRI_CALL, connect).await {
            Ok(Ok(channel)) => Ok(channel),
            Ok(Err(e)) => Err(format!("connecting to {}: {e}", self.address.display())),
            Err(_) => Err(format!(
                "connecting to {}: timed out",
                self.address.display()
            )),
        }
    }

    pub async fn cri(&self) -> RuntimeServiceClient<Channel> {
        RuntimeServiceClient::new(
            self.channel()
                .await
                .unwrap_or_else(|e| panic!("{e}\n{}", self.log_tail())),
        )
    }

    async fn wait_ready(&self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last = String::new();
        while Instant::now() < deadline {
            if self.address.exists() {
                match self.channel().await {
                    Ok(channel) => {
                        let mut client = RuntimeServiceClient::new(channel);
                        let version = client.version(VersionRequest::default());
                        match tokio::time::timeout(Duration::from_secs(5), version).await {
                            Ok(Ok(_)) => return Ok(()),
                            Ok(Err(e)) => last = e.to_string(),
                            Err(_) => last = "Version timed out".to_string(),
                        }
                    }
                    Err(e) => last = e,
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(format!(
            "containerd's CRI did not answer within 30 s: {last}"
        ))
    }

    async fn import_image(&self) -> Result<(), String> {
        let archive = self.dir.path().join("busybox-oci.tar");
        image::write_archive(&archive).map_err(|e| format!("building the image: {e}"))?;
        let output = run_bounded(
            Command::new("ctr")
                .arg("--address")
                .arg(&self.address)
                .args(["-n", NAMESPACE, "images", "import"])
                .arg(&archive),
            Duration::from_secs(120),
        )?;
        if !output.status.success() {
            return Err(format!(
                "ctr images import failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        // CRI learns about images from containerd's events: wait until it does.
        let mut images = ImageServiceClient::new(self.channel().await?);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let request = ImageStatusRequest {
                image: Some(ImageSpec {
                    image: IMAGE.to_string(),
                    ..Default::default()
                }),
                verbose: false,
            };
            if let Ok(Ok(reply)) =
                tokio::time::timeout(CRI_CALL, images.image_status(request)).await
            {
                if reply.into_inner().image.is_some() {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(format!("CRI never listed the imported image {IMAGE}"))
    }

    /// Runs a host-network pod with one container running `command`.
    pub async fn run_pod(&self, pod_name: &str, container_name: &str, command: &[&str]) -> Pod {
        let mut cri = self.cri().await;
        let sandbox_config = PodSandboxConfig {
            metadata: Some(PodSandboxMetadata {
                name: pod_name.to_string(),
                uid: format!("uid-{pod_name}-{}", std::process::id()),
                namespace: "default".to_string(),
                attempt: 0,
            }),
            // Host-network pods share the node's UTS namespace: no hostname.
            log_directory: self
                .dir
                .path()
                .join("logs")
                .join(pod_name)
                .display()
                .to_string(),
            linux: Some(LinuxPodSandboxConfig {
                security_context: Some(LinuxSandboxSecurityContext {
                    namespace_options: Some(NamespaceOption {
                        network: NamespaceMode::Node as i32,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let request = RunPodSandboxRequest {
            config: Some(sandbox_config.clone()),
            runtime_handler: String::new(),
        };
        let sandbox_id = self
            .call("RunPodSandbox", cri.run_pod_sandbox(request))
            .await
            .pod_sandbox_id;
        self.sandboxes.lock().unwrap().insert(sandbox_id.clone());
        let create = CreateContainerRequest {
            pod_sandbox_id: sandbox_id.clone(),
            config: Some(ContainerConfig {
                metadata: Some(ContainerMetadata {
                    name: container_name.to_string(),
                    attempt: 0,
                }),
                image: Some(ImageSpec {
                    image: IMAGE.to_string(),
                    ..Default::default()
                }),
                command: command.iter().map(|s| s.to_string()).collect(),
                log_path: format!("{container_name}.log"),
                ..Default::default()
            }),
            sandbox_config: Some(sandbox_config),
        };
        let container_id = self
            .call("CreateContainer", cri.create_container(create))
            .await
            .container_id;
        let start = StartContainerRequest {
            container_id: container_id.clone(),
        };
        self.call("StartContainer", cri.start_container(start))
            .await;
        Pod {
            sandbox_id,
            container_id,
        }
    }

    async fn call<T>(
        &self,
        name: &str,
        call: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> T {
        match tokio::time::timeout(CRI_CALL, call).await {
            Ok(Ok(reply)) => reply.into_inner(),
            Ok(Err(status)) => panic!("{name}: {status}\n{}", self.log_tail()),
            Err(_) => panic!("{name}: no answer within {CRI_CALL:?}\n{}", self.log_tail()),
        }
    }

    /// StopPodSandbox + RemovePodSandbox, retried until CRI no longer lists
    /// the sandbox; false if it still does at the deadline.
    pub async fn stop_and_remove_pod(&self, sandbox_id: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut cri = self.cri().await;
        while Instant::now() < deadline {
            let stop = StopPodSandboxRequest {
                pod_sandbox_id: sandbox_id.to_string(),
            };
            let stopped = tokio::time::timeout(CRI_CALL, cri.stop_pod_sandbox(stop)).await;
            if matches!(stopped, Ok(Ok(_))) {
                let remove = RemovePodSandboxRequest {
                    pod_sandbox_id: sandbox_id.to_string(),
                };
                let _ = tokio::time::timeout(CRI_CALL, cri.remove_pod_sandbox(remove)).await;
            }
            let list = ListPodSandboxRequest {
                filter: Some(PodSandboxFilter {
                    id: sandbox_id.to_string(),
                    ..Default::default()
                }),
            };
            if let Ok(Ok(reply)) = tokio::time::timeout(CRI_CALL, cri.list_pod_sandbox(list)).await
            {
                if reply.into_inner().items.is_empty() {
                    return true;
                }
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        false
    }

    /// The pid of the shim this containerd started for the pod.
    pub fn shim_pid(&self, sandbox_id: &str) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(pid) = self
                .shims()
                .into_iter()
                .find(|(_, args)| flag(args, "-id") == Some(sandbox_id))
            {
                return pid.0;
            }
            if Instant::now() > deadline {
                panic!("no shim with -id {sandbox_id}\n{}", self.log_tail());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every live shim process started by this containerd, with its argv.
    fn shims(&self) -> Vec<(i32, Vec<String>)> {
        let address = self.address.display().to_string();
        processes()
            .into_iter()
            .filter(|(pid, args)| {
                args.first().is_some_and(|a| a.contains("containerd-shim"))
                    && flag(args, "-address") == Some(address.as_str())
                    && is_running(*pid)
            })
            .collect()
    }

    /// Holds every `umount2` of the process for `delay` on entry, as the
    /// seeds did to reproduce a slow overlay unmount.
    pub fn delay_umount2(&self, pid: i32, delay: Duration) -> Strace {
        let log = self.dir.path().join(format!("strace-{pid}.log"));
        let child = Command::new("strace")
            .args(["-f", "-e", "trace=umount2"])
            .arg("-e")
            .arg(format!("inject=umount2:delay_enter={}", delay.as_micros()))
            .arg("-o")
            .arg(&log)
            .arg("-p")
            .arg(pid.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning strace");
        let strace = Strace { child: Some(child) };
        let tracer = strace
            .child
            .as_ref()
            .map(|c| c.id() as i32)
            .unwrap_or_default();
        // Attached once every thread of the shim names strace as its tracer.
        let deadline = Instant::now() + Duration::from_secs(15);
        while !all_threads_traced_by(pid, tracer) {
            assert!(
                Instant::now() < deadline,
                "strace did not attach to every thread of {pid}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        strace
    }

    pub async fn container_state(&self, container_id: &str) -> ContainerState {
        let mut cri = self.cri().await;
        let request = ContainerStatusRequest {
            container_id: container_id.to_string(),
            verbose: false,
        };
        let reply = self
            .call("ContainerStatus", cri.container_status(request))
            .await;
        let state = reply.status.map(|s| s.state).unwrap_or_default();
        ContainerState::try_from(state).unwrap_or(ContainerState::ContainerUnknown)
    }

    pub async fn wait_container_state(
        &self,
        id: &str,
        want: ContainerState,
        timeout: Duration,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.container_state(id).await == want {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        false
    }

    /// Runs the nodectl binary against this containerd, bounded.
    pub fn nodectl(&self, args: &[&str]) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_nodectl"));
        command
            .args(args)
            .arg("--root")
            .arg(&self.root)
            .arg("--state")
            .arg(&self.state)
            .arg("--address")
            .arg(&self.address)
            .arg("--config")
            .arg(&self.config)
            .stdin(Stdio::null());
        run_bounded(&mut command, Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("nodectl {args:?}: {e}"))
    }

    /// Copies a container's status file into `$NODECTL_CAPTURE_TESTDATA`,
    /// when set: that is how testdata/status was captured.
    pub fn capture_status(&self, name: &str, container_id: &str) {
        let Some(dir) = std::env::var_os("NODECTL_CAPTURE_TESTDATA") else {
            return;
        };
        let from = self
            .root
            .join("io.containerd.grpc.v1.cri/containers")
            .join(container_id)
            .join("status");
        fs::copy(&from, Path::new(&dir).join(name))
            .unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    }

    fn cleanup(&mut self) {
        let _ = self.containerd.kill();
        let _ = self.containerd.wait();
        // Shims and everything below them (the containers' processes).
        let shims: Vec<i32> = self.shims().into_iter().map(|(pid, _)| pid).collect();
        let mut doomed = descendants(&shims);
        doomed.extend(&shims);
        for pid in &doomed {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while doomed.iter().any(|pid| is_running(*pid)) && Instant::now() < deadline {
            reap_orphans();
            std::thread::sleep(Duration::from_millis(50));
        }
        reap_orphans();
        unmount_below(self.dir.path());
        // runc's state and the shims' sockets live outside our directory.
        for id in self.sandboxes.lock().unwrap().iter() {
            let _ = fs::remove_dir_all(Path::new("/run/containerd/runc").join(NAMESPACE).join(id));
        }
    }
}

impl Drop for TestBed {
    fn drop(&mut self) {
        self.cleanup();
    }
}

/// A running strace; detached (the tracee resumes) on [`Strace::detach`] or drop.
pub struct Strace {
    child: Option<Child>,
}

impl Strace {
    pub fn detach(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // On SIGINT strace detaches from its tracees and exits.
        let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGINT);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Strace {
    fn drop(&mut self) {
        self.detach();
    }
}

fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1).map(String::as_str)
}

/// Every process's argv.
fn processes() -> Vec<(i32, Vec<String>)> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let args = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            Some((pid, args))
        })
        .collect()
}

/// The state letter of a process, from `/proc/<pid>/stat`.
fn state_of(pid: i32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

fn ppid_of(pid: i32) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Alive means not gone and not defunct: a killed process may linger as Z.
pub fn is_running(pid: i32) -> bool {
    matches!(state_of(pid), Some(state) if state != 'Z' && state != 'X')
}

fn all_threads_traced_by(pid: i32, tracer: i32) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut any = false;
    for task in tasks.flatten() {
        let status = fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let traced = status
            .lines()
            .find_map(|l| l.strip_prefix("TracerPid:"))
            .and_then(|v| v.trim().parse::<i32>().ok());
        if traced != Some(tracer) {
            return false;
        }
        any = true;
    }
    any
}

fn descendants(roots: &[i32]) -> Vec<i32> {
    let parents: Vec<(i32, i32)> = processes()
        .into_iter()
        .filter_map(|(pid, _)| Some((pid, ppid_of(pid)?)))
        .collect();
    let mut found: Vec<i32> = Vec::new();
    let mut frontier: Vec<i32> = roots.to_vec();
    while let Some(parent) = frontier.pop() {
        for (pid, _) in parents.iter().filter(|(_, ppid)| *ppid == parent) {
            if !found.contains(pid) {
                found.push(*pid);
                frontier.push(*pid);
            }
        }
    }
    found
}

/// Reaps whatever orphans were reparented to this (subreaper) process.
fn reap_orphans() {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    while let Ok(status) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
        if status == WaitStatus::StillAlive {
            break;
        }
    }
}

/// Detaches every mount below `dir`, deepest first.
fn unmount_below(dir: &Path) {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(PathBuf::from)
        .filter(|p| p.starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for point in points {
        let _ = nix::mount::umount2(&point, nix::mount::MntFlags::MNT_DETACH);
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

/// Runs a program's `--version`-like probe: is it installed?
pub fn have(binary: &str) -> bool {
    which(binary)
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

/// Runs a command to completion, killing it after `limit`.
fn run_bounded(command: &mut Command, limit: Duration) -> Result<Output, String> {
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
