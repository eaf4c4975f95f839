//! A real kubelet on the test bed, standalone (no API server: static pods
//! only), built by scripts/peers from the project's Go modules
//! (peers/go/kubelet-<release>), with crictl beside it. Everything it
//! writes is under the bed's temp dir (its root dir, pod logs, static pod
//! dir, volume plugin dir) but for the `/var/log/containers` links
//! kuberuntime makes (a path kubelet does not let one change), which its
//! container GC removes with their containers; its pods run under the bed's
//! cgroup (its `cgroupRoot`), which the bed's teardown removes. Dropping a
//! [`Kubelet`] kills it and unmounts what it left mounted under its root.

use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};

use super::image::IMAGE;
use super::testbed::TestBed;
use super::{run_bounded, skip};

/// The kubelet releases scripts/peers builds: the oldest and the newest the
/// module proxy serves.
pub const KUBELET_RELEASES: &[&str] = &["v1.34.4", "v1.37.2"];
/// The kubelet release a scenario that runs once a line takes on `line`:
/// each release takes two of the four lines (v1.34 on 1.6 and 2.0, v1.37 on
/// 1.7 and 2.3), so every line runs the scenario and each release runs it
/// whole on two (issue 44: every line for the cgroupfs scenarios, one line
/// for each release's full set). Both releases on every line were the
/// lines' heaviest load on the project's 2 cores.
pub fn kubelet_release_on(line: super::Line) -> &'static str {
    use super::Line;
    match line {
        Line::V1_6 | Line::V2_0 => KUBELET_RELEASES[0],
        Line::V1_7 | Line::V2_3 => KUBELET_RELEASES[1],
    }
}

/// [`kubelet_release_on`] the line of the containerd the environment names,
/// known before a bed starts; the oldest release when it cannot be read
/// (the bed then says why it cannot start).
pub fn kubelet_release_here() -> &'static str {
    super::Containerd::from_env().map_or(KUBELET_RELEASES[0], |c| kubelet_release_on(c.line))
}

/// The crictl release scripts/peers builds.
pub const CRICTL_RELEASE: &str = "v1.37.0";
/// kubelet's node name (`--hostname-override`): a static pod `p` is `p-<it>`.
pub const NODE_NAME: &str = "nodectl-test";

/// A peer scripts/peers built, or why there is none (in CI a failure, else
/// a skip saying so).
pub fn peer(test: &str, name: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/peers")
        .join(name);
    if path.is_file() {
        return Some(path);
    }
    skip(
        test,
        &format!("{} is missing: scripts/peers builds it", path.display()),
    );
    None
}

/// Makes cgroup `name` (`/a/b`) in every hierarchy: kubelet checks that its
/// cgroupRoot exists in each. A bed's teardown removes its own cgroup's
/// tree.
pub fn create_cgroup(name: &str) {
    for d in super::teardown::cgroup_hierarchies() {
        let cgroup = d.join(name.trim_start_matches('/'));
        fs::create_dir_all(&cgroup).unwrap_or_else(|e| panic!("{}: {e}", cgroup.display()));
    }
}

/// A port on loopback nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on loopback")
}

/// How a kubelet is started: again the same way after [`Kubelet::restart`].
struct Launch {
    exe: PathBuf,
    args: Vec<String>,
    dir: PathBuf,
    healthz: u16,
    /// The network namespace it runs in (see [`KubeletSetup::netns`]).
    netns: Option<PathBuf>,
}

impl Launch {
    /// Spawns kubelet in its turn (see [`StartTurn`]).
    fn spawn(&self, log: &Path, append: bool) -> Child {
        let turn = StartTurn::take();
        let mut child = self.spawn_now(log, append);
        turn.until_listening(&mut child);
        child
    }

    fn spawn_now(&self, log: &Path, append: bool) -> Child {
        let log_file = fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(log)
            .expect("kubelet's log");
        super::in_netns(self.netns.as_deref(), &self.exe)
            .args(&self.args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("kubelet's log"))
            .stderr(log_file)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", self.exe.display()))
    }
}

/// kubelet's device-plugin registration socket, a path kubelet does not
/// let one change (`pluginapi.KubeletSocket`).
const DEVICE_PLUGIN_SOCKET: &str = "/var/lib/kubelet/device-plugins/kubelet.sock";
/// The machine-wide lock of [`StartTurn`]: every test process takes it.
const START_LOCK: &str = "/tmp/nodectl-test-kubelet-start.lock";

/// One kubelet starts at a time on the machine. At start kubelet's device
/// manager empties [`DEVICE_PLUGIN_SOCKET`]'s directory, then listens
/// there: two kubelets starting at once (beds of several lines side by
/// side) can both empty it before either listens, and the second then
/// fails "bind: address already in use", "Failed to start
/// ContainerManager", and runs no pod (2.0.11 line in CI).
pub struct StartTurn {
    _lock: Flock<fs::File>,
    before: Option<(u64, u64, i64, i64)>,
}

impl StartTurn {
    /// Waits (up to 3 min: a turn lasts at most a minute) for the turn.
    pub fn take() -> StartTurn {
        let start = Instant::now();
        let mut file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(START_LOCK)
            .unwrap_or_else(|e| panic!("{START_LOCK}: {e}"));
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => {
                    return StartTurn {
                        _lock: lock,
                        before: device_plugin_socket(),
                    }
                }
                Err((back, _)) if start.elapsed() < Duration::from_secs(180) => {
                    file = back;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err((_, e)) => panic!("{START_LOCK}: no turn to start a kubelet in 3 min: {e}"),
            }
        }
    }

    /// Holds the turn until the kubelet just started listens on its
    /// device-plugin socket (one other than before it started), exits, or
    /// a minute has passed.
    pub fn until_listening(self, kubelet: &mut Child) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            let now = device_plugin_socket();
            if (now.is_some() && now != self.before) || !matches!(kubelet.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Which socket file is at [`DEVICE_PLUGIN_SOCKET`]: its device, inode and
/// change time (an inode number can be reused).
fn device_plugin_socket() -> Option<(u64, u64, i64, i64)> {
    let meta = fs::symlink_metadata(DEVICE_PLUGIN_SOCKET).ok()?;
    meta.file_type()
        .is_socket()
        .then(|| (meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec()))
}

pub struct Kubelet {
    child: Child,
    launch: Launch,
    pub release: String,
    /// kubelet's `--root-dir`.
    pub root: PathBuf,
    /// Its `staticPodPath`.
    pub manifests: PathBuf,
    /// Its `podLogsDir`.
    pub pod_logs: PathBuf,
    /// Its `cgroupRoot` (the bed's cgroup).
    pub cgroup_root: String,
    pub config: PathBuf,
    pub log: PathBuf,
    /// Its secure port on loopback (serves /configz, anonymous allowed).
    pub port: u16,
    crictl: PathBuf,
    address: PathBuf,
}

/// What a kubelet is started with beyond the bed's defaults: extra flags,
/// and extra lines of its config file.
#[derive(Default)]
pub struct KubeletSetup<'a> {
    pub flags: Vec<String>,
    pub config_lines: Vec<&'a str>,
    /// Its directory below the bed's scratch (`kubelet-<release>` when
    /// `None`): one a kubelet of the same release has not used.
    pub dir: Option<&'a str>,
    /// The flags naming its config file, in place of `--config=<its
    /// absolute path>` (kubelet's working directory is its directory).
    pub config_args: Vec<String>,
    /// How its root is given: `--root-dir` when `None`.
    pub root_dir_flag: Option<&'a str>,
    /// Files written below its directory before it starts (its drop-ins),
    /// by path relative to it.
    pub files: Vec<(&'a str, String)>,
    /// Its `cgroupDriver` and `cgroupRoot`, when not `cgroupfs` and the
    /// bed's cgroup (the systemd driver's root is a slice's path, `/` for
    /// `kubepods.slice` at the top).
    pub cgroups: Option<(&'a str, &'a str)>,
    /// A network namespace to run it in (the bed's containerd's, where the
    /// pods' bridge is): its HTTP probes then reach the pods' addresses,
    /// as on a node. Its ports are that namespace's loopback's.
    pub netns: Option<PathBuf>,
}

impl Kubelet {
    /// kubelet `release` against `bed`'s containerd, with its own dirs under
    /// the bed's temp dir, waited for until its healthz answers. None when
    /// the peer is missing (see [`peer`]).
    pub fn start(bed: &TestBed, test: &str, release: &str) -> Option<Kubelet> {
        Kubelet::start_with(bed, test, release, KubeletSetup::default())
    }

    pub fn start_with(
        bed: &TestBed,
        test: &str,
        release: &str,
        setup: KubeletSetup,
    ) -> Option<Kubelet> {
        let built = peer(test, &format!("kubelet-{release}"))?;
        let crictl = peer(test, &format!("crictl-{CRICTL_RELEASE}"))?;
        let dir = bed.scratch(setup.dir.unwrap_or(&format!("kubelet-{release}")));
        let (root, manifests, pod_logs, bin) = (
            dir.join("root"),
            dir.join("manifests"),
            dir.join("pod-logs"),
            dir.join("bin"),
        );
        for d in [
            &root,
            &manifests,
            &pod_logs,
            &bin,
            &dir.join("volume-plugins"),
        ] {
            fs::create_dir_all(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        }
        // Named `kubelet` as on a node (its comm is what nodectl looks
        // for); the link resolves to the root-owned build.
        let exe = bin.join("kubelet");
        std::os::unix::fs::symlink(&built, &exe).expect("linking the kubelet peer");
        // kubelet's image GC and eviction are not under test: the bed's
        // only image stays, whatever the machine's disk says.
        let (driver, cgroup_root) = setup.cgroups.unwrap_or(("cgroupfs", bed.cgroup_parent()));
        create_cgroup(cgroup_root);
        // Its ports are picked in its turn: a port picked free and then held
        // unbound while another kubelet starts can become that kubelet's
        // (a 1.7.34 bed in CI polled another's HTTPS port as its healthz).
        let turn = StartTurn::take();
        let (port, healthz) = (free_port(), free_port());
        let config = dir.join("config.yaml");
        let mut text = format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\n\
             kind: KubeletConfiguration\n\
             staticPodPath: {manifests}\n\
             fileCheckFrequency: 1s\n\
             cgroupDriver: {driver}\n\
             cgroupRoot: {cgroup_root}\n\
             failCgroupV1: false\n\
             failSwapOn: false\n\
             containerRuntimeEndpoint: unix://{socket}\n\
             address: 127.0.0.1\n\
             port: {port}\n\
             readOnlyPort: 0\n\
             healthzBindAddress: 127.0.0.1\n\
             healthzPort: {healthz}\n\
             authentication:\n  anonymous:\n    enabled: true\n  webhook:\n    enabled: false\n\
             authorization:\n  mode: AlwaysAllow\n\
             podLogsDir: {logs}\n\
             volumePluginDir: {plugins}\n\
             resolvConf: /etc/resolv.conf\n\
             imageGCHighThresholdPercent: 100\n\
             imageGCLowThresholdPercent: 99\n\
             evictionHard:\n  memory.available: 1Mi\n  nodefs.available: 1%\n  \
             nodefs.inodesFree: 1%\n  imagefs.available: 1%\n  imagefs.inodesFree: 1%\n",
            manifests = manifests.display(),
            socket = bed.address().display(),
            logs = pod_logs.display(),
            plugins = dir.join("volume-plugins").display(),
        );
        for line in &setup.config_lines {
            text.push_str(line);
            text.push('\n');
        }
        fs::write(&config, text).expect("writing kubelet's config");
        for (name, text) in &setup.files {
            let path = dir.join(name);
            fs::create_dir_all(path.parent().expect("a file below kubelet's dir"))
                .and_then(|()| fs::write(&path, text))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
        let log = dir.join("kubelet.log");
        let mut args = match setup.config_args.is_empty() {
            true => vec![format!("--config={}", config.display())],
            false => setup.config_args.clone(),
        };
        // Its own serving certificate: kubelet writes a self-signed pair
        // into its cert dir (`/var/lib/kubelet/pki` when not given), which
        // kubelets of beds side by side would otherwise share.
        args.extend([
            format!("--hostname-override={NODE_NAME}"),
            format!("--cert-dir={}", dir.join("pki").display()),
            "--v=2".into(),
        ]);
        args.extend(setup.flags.iter().cloned());
        args.push(format!(
            "{}={}",
            setup.root_dir_flag.unwrap_or("--root-dir"),
            root.display()
        ));
        let launch = Launch {
            exe,
            args,
            dir: dir.clone(),
            healthz,
            netns: setup.netns.clone(),
        };
        let mut kubelet = Kubelet {
            child: launch.spawn_now(&log, false),
            launch,
            release: release.to_string(),
            root,
            manifests,
            pod_logs,
            cgroup_root: cgroup_root.to_string(),
            config,
            log,
            port,
            crictl,
            address: bed.address().to_path_buf(),
        };
        turn.until_listening(&mut kubelet.child);
        kubelet.wait_healthy(healthz, Duration::from_secs(60));
        // healthz can answer before kubelet has made its data dirs
        // (`setupDataDirs`): a look then finds no `pods` (2.3.4 bed in CI,
        // kubelet v1.34, 4 s in).
        let pods = kubelet.root.join("pods");
        if !kubelet.wait_for(Duration::from_secs(60), |k| k.root.join("pods").is_dir()) {
            kubelet.fail(&format!("{} not made within 60 s", pods.display()));
        }
        Some(kubelet)
    }

    /// SIGKILL: kubelet dies where it is, a pod's teardown left wherever it
    /// had got to.
    pub fn kill_hard(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts kubelet again as it was started (its log appended to), and
    /// waits until its healthz answers.
    pub fn restart(&mut self) {
        self.kill_hard();
        self.child = self.launch.spawn(&self.log, true);
        self.wait_healthy(self.launch.healthz, Duration::from_secs(60));
    }

    fn wait_healthy(&mut self, port: u16, limit: Duration) {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.fail(&format!("kubelet exited at start ({status})"));
            }
            if http_get_in(self.launch.netns.as_deref(), port, "/healthz")
                .is_some_and(|body| body.trim() == "ok")
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        self.fail("kubelet's healthz never said ok");
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Panics with the tail of kubelet's log.
    pub fn fail(&self, why: &str) -> ! {
        panic!("kubelet {}: {why}\n{}", self.release, self.log_tail(60));
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..]
            .iter()
            .map(|l| l.chars().take(400).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// What kubelet's HTTPS port serves at `path` (anonymous, as the bed's
    /// kubelet allows), within 10 s; empty when it does not answer.
    fn https_get(&self, path: &str) -> Vec<u8> {
        run_bounded(
            super::in_netns(self.launch.netns.as_deref(), "curl")
                .args(["-sk", "--max-time", "10"])
                .arg(format!("https://127.0.0.1:{}{path}", self.port)),
            Duration::from_secs(15),
        )
        .unwrap_or_else(|e| self.fail(&format!("curl {path}: {e}")))
        .stdout
    }

    /// kubelet's own merged config, as its /configz serves it (the
    /// `kubeletconfig` object).
    pub fn configz(&self) -> serde_json::Value {
        let body = self.https_get("/configz");
        let doc: serde_json::Value = serde_json::from_slice(&body).unwrap_or_else(|e| {
            self.fail(&format!(
                "/configz is no JSON ({e}): {}",
                String::from_utf8_lossy(&body)
            ))
        });
        doc["kubeletconfig"].clone()
    }

    /// kubelet's own metrics, as its /metrics serves them.
    pub fn metrics(&self) -> String {
        String::from_utf8_lossy(&self.https_get("/metrics")).into_owned()
    }

    /// The id CRI gives container `container` of static pod `pod`.
    pub fn container_id(&self, pod: &str, container: &str) -> Option<String> {
        let pod = format!("{pod}-{NODE_NAME}");
        self.crictl(&["ps", "-a"])["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| {
                c["labels"]["io.kubernetes.pod.name"] == pod.as_str()
                    && c["metadata"]["name"] == container
            })
            .and_then(|c| c["id"].as_str().map(str::to_string))
    }

    /// Waits up to 90 s for container `container` of static pod `pod` to
    /// run (failing the test if it does not); its id.
    pub fn running_container(&self, pod: &str, container: &str) -> String {
        let running = self.wait_for(Duration::from_secs(90), |k| {
            k.container_states(pod)
                .iter()
                .any(|(name, state)| name == container && state == "CONTAINER_RUNNING")
        });
        if !running {
            self.fail(&format!(
                "{pod}'s {container} never ran: {:?}",
                self.container_states(pod)
            ));
        }
        self.container_id(pod, container)
            .unwrap_or_else(|| self.fail(&format!("{pod}'s {container} has no id")))
    }

    /// Writes the static pod manifest `name.yaml`.
    pub fn add_static_pod(&self, name: &str, yaml: &str) {
        let path = self.manifests.join(format!("{name}.yaml"));
        fs::write(&path, yaml).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }

    pub fn remove_static_pod(&self, name: &str) {
        let path = self.manifests.join(format!("{name}.yaml"));
        fs::remove_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }

    /// `crictl <args> -o json` against the bed's socket, parsed.
    pub fn crictl(&self, args: &[&str]) -> serde_json::Value {
        let endpoint = format!("unix://{}", self.address.display());
        let output = run_bounded(
            Command::new(&self.crictl)
                .args([
                    "--runtime-endpoint",
                    &endpoint,
                    "--image-endpoint",
                    &endpoint,
                ])
                .args(["--timeout", "10s"])
                .args(args)
                .args(["-o", "json"]),
            Duration::from_secs(20),
        )
        .unwrap_or_else(|e| self.fail(&format!("crictl {args:?}: {e}")));
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            self.fail(&format!(
                "crictl {args:?} printed no JSON ({e}): {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ))
        })
    }

    /// The states crictl gives the containers of static pod `name` (its
    /// pod name is `name-<node>`), by container name.
    pub fn container_states(&self, name: &str) -> Vec<(String, String)> {
        let pod = format!("{name}-{NODE_NAME}");
        let doc = self.crictl(&["ps", "-a"]);
        doc["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["labels"]["io.kubernetes.pod.name"] == pod.as_str())
            .map(|c| {
                (
                    c["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    c["state"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }

    /// The sandboxes crictl lists for static pod `name`, with their state.
    pub fn sandboxes(&self, name: &str) -> Vec<(String, String)> {
        let pod = format!("{name}-{NODE_NAME}");
        let doc = self.crictl(&["pods"]);
        doc["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["metadata"]["name"] == pod.as_str())
            .map(|p| {
                (
                    p["id"].as_str().unwrap_or_default().to_string(),
                    p["state"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }

    /// The uid CRI's sandboxes of static pod `name` carry (kubelet's uid of
    /// the pod).
    pub fn pod_uid(&self, name: &str) -> Option<String> {
        let pod = format!("{name}-{NODE_NAME}");
        self.crictl(&["pods"])["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["metadata"]["name"] == pod.as_str())
            .and_then(|p| p["metadata"]["uid"].as_str().map(str::to_string))
    }

    /// Polls `done` every 500 ms for at most `limit`; false when it never held.
    pub fn wait_for(&self, limit: Duration, mut done: impl FnMut(&Kubelet) -> bool) -> bool {
        let start = Instant::now();
        loop {
            if done(self) {
                return true;
            }
            if start.elapsed() >= limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The pod cgroup of `uid` in every hierarchy (v2: one), wherever its
    /// QoS class puts it below kubelet's `cgroupRoot` (cgroupfs driver:
    /// `kubepods/pod<uid>`, `kubepods/burstable/pod<uid>`,
    /// `kubepods/besteffort/pod<uid>`); empty when there is none.
    pub fn pod_cgroups(&self, uid: &str) -> Vec<PathBuf> {
        ["kubepods", "kubepods/burstable", "kubepods/besteffort"]
            .iter()
            .flat_map(|qos| {
                super::teardown::cgroup_dirs(&format!("{}/{qos}/pod{uid}", self.cgroup_root))
            })
            .collect()
    }

    /// nodectl's flags naming this kubelet's root, pod logs and cgroup root.
    pub fn nodectl_flags(&self) -> Vec<String> {
        vec![
            "--kubelet-root".into(),
            self.root.display().to_string(),
            "--kubelet-pod-logs".into(),
            self.pod_logs.display().to_string(),
            "--kubelet-cgroup-root".into(),
            self.cgroup_root.clone(),
        ]
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let left = super::teardown::unmount_below(&self.root);
        if !left.is_empty() {
            super::teardown_failed(&format!(
                "kubelet {}: still mounted under its root: {left:?}",
                self.release
            ));
        }
        if std::thread::panicking() {
            eprintln!("kubelet {}'s log:\n{}", self.release, self.log_tail(80));
        }
    }
}

/// A plain HTTP GET on loopback, its body when it answers 200.
/// [`http_get`] from `netns` when given: on a thread of its own that
/// enters it (a network namespace is a thread's own to change).
fn http_get_in(netns: Option<&Path>, port: u16, path: &str) -> Option<String> {
    let Some(netns) = netns else {
        return http_get(port, path);
    };
    let (netns, path) = (netns.to_path_buf(), path.to_string());
    std::thread::spawn(move || {
        let namespace = fs::File::open(&netns).ok()?;
        nix::sched::setns(namespace, nix::sched::CloneFlags::CLONE_NEWNET).ok()?;
        http_get(port, &path)
    })
    .join()
    .ok()
    .flatten()
}

fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect_timeout(
        &([127, 0, 0, 1], port).into(),
        Duration::from_secs(1),
    )
    .ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut reply = String::new();
    stream.take(64 * 1024).read_to_string(&mut reply).ok()?;
    let (head, body) = reply.split_once("\r\n\r\n")?;
    (head.split(' ').nth(1) == Some("200")).then(|| body.to_string())
}

/// A static pod of busybox running `sleep`, for kubelet to make.
pub fn sleeper_manifest(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n\
         spec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: sleep\n    \
         image: {IMAGE}\n    imagePullPolicy: Never\n    command: [\"/bin/sh\", \"-c\", \"sleep 3600\"]\n"
    )
}
