//! The test bed: one isolated containerd per test, everything it writes kept
//! in a fresh temp dir (plus what containerd insists on putting elsewhere,
//! which teardown removes: shim sockets and pod cgroups). Which containerd
//! runs is [`Containerd::from_env`]'s choice: the system's, or a release.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use super::cni::{self, Cni};
use super::image::{self, IMAGE};
use super::line::{Containerd, Line};
use super::neighbourhood::Neighbourhood;
use super::procs;
use super::strace::{self, Strace};
use super::{run_bounded, skip, which};

/// The CRI plugin's containerd namespace.
pub const NAMESPACE: &str = "k8s.io";
/// Taken from PATH whichever containerd runs (its own binaries are checked
/// by [`Containerd::from_env`]).
const BINARIES: &[&str] = &["runc", "strace"];
/// How many lines of containerd's log a failure shows.
const LOG_TAIL: usize = 60;
/// How much of each log line a failure shows.
const LOG_LINE: usize = 500;

pub struct TestBed {
    pub(crate) test: String,
    pub(crate) dir: PathBuf,
    pub(crate) root: PathBuf,
    pub(crate) state: PathBuf,
    pub(crate) address: PathBuf,
    pub(crate) config: PathBuf,
    pub(crate) log: PathBuf,
    pub(crate) cgroup_parent: String,
    pub(crate) containerd: Child,
    /// Which containerd this is, and its release line.
    pub(crate) release: Containerd,
    /// Every sandbox run_pod created, for teardown.
    pub(crate) sandboxes: Mutex<BTreeSet<String>>,
    /// Every strace delay_umount2 started, for teardown.
    pub(crate) straces: Mutex<Vec<strace::Slot>>,
    /// Shim sockets outside the temp dir that no bundle records (see
    /// [`TestBed::start_orphan_shim`]), for teardown.
    pub(crate) extra_sockets: Mutex<Vec<PathBuf>>,
    /// Every shim seen, pid → starttime: once dead, a shim's argv is empty,
    /// so teardown could not tell our zombie shims from others without it.
    pub(crate) seen_shims: Mutex<BTreeMap<i32, u64>>,
    /// Set once [`TestBed::teardown`] ran outside `Drop` (a failed start).
    pub(crate) torn_down: bool,
    /// Real CNI networking ([`TestBed::start_networked`]); None: host
    /// network pods only.
    pub(crate) cni: Option<Cni>,
    /// What a real node has beside containerd (see [`Neighbourhood`]).
    pub(crate) neighbourhood: Neighbourhood,
}

/// Says why the test bed cannot run: in CI that fails the test, elsewhere
/// the test is skipped, visibly (see [`skip`]).
fn unavailable(test: &str, why: &str) -> Option<TestBed> {
    skip(
        test,
        &format!("the real-containerd test bed cannot run: {why}"),
    );
    None
}

impl TestBed {
    /// Starts an isolated containerd in a fresh temp dir, imports the busybox
    /// image and waits until CRI serves it.
    ///
    /// Prerequisites: root; containerd, containerd-shim-runc-v2, ctr, runc
    /// and strace on PATH; /bin/busybox (Debian's busybox-static). When one
    /// is missing, the test is skipped (None, reason on stderr), except with
    /// CI set, where that panics. A start that fails panics either way,
    /// with the tail of containerd's log.
    pub async fn start(test: &str) -> Option<TestBed> {
        TestBed::start_with(test, None, None).await
    }

    /// [`TestBed::start`] with real CNI networking: containerd runs in a
    /// network namespace of its own (loopback up, nothing else), where the
    /// bed's conflist (bridge + host-local on [`cni::SUBNET`], a chained
    /// plugin whose faults a test switches on: see [`Cni`]) wires every pod
    /// to a bridge that touches nothing of the machine. Pods get their own
    /// network namespace, mounted under containerd's state dir
    /// (`netns_mounts_under_state_dir`), not /var/run/netns.
    ///
    /// One more prerequisite: the plugins of Debian's
    /// containernetworking-plugins in /usr/lib/cni.
    pub async fn start_networked(test: &str) -> Option<TestBed> {
        TestBed::start_with(test, Some(cni::SUBNET), None).await
    }

    /// [`TestBed::start_networked`] whose shims' every `runc exec` waits
    /// `exec_delay` before runc runs (None: runc as it is), through a
    /// wrapper named as the runtime's `BinaryName`: upstream's own
    /// regression test for containerd#10589 holds `runc exec` back so
    /// (runc-fp's delayExec), and a node whose disk stalls makes runc slow
    /// the same way. It widens the time an exec is being started, nothing
    /// else: runc does the work.
    pub async fn start_networked_delaying_exec(
        test: &str,
        exec_delay: Option<Duration>,
    ) -> Option<TestBed> {
        TestBed::start_with(test, Some(cni::SUBNET), exec_delay).await
    }

    /// [`TestBed::start_networked`] with host-local handing out `subnet`.
    pub async fn start_networked_on(test: &str, subnet: &'static str) -> Option<TestBed> {
        TestBed::start_with(test, Some(subnet), None).await
    }

    async fn start_with(
        test: &str,
        networked: Option<&'static str>,
        exec_delay: Option<Duration>,
    ) -> Option<TestBed> {
        if !nix::unistd::geteuid().is_root() {
            return unavailable(test, "needs root (containerd, runc and strace -p)");
        }
        let release = match Containerd::from_env() {
            Ok(release) => release,
            Err(why) => return unavailable(test, &format!("{why} (scripts/test installs it)")),
        };
        let mut missing: Vec<&str> = BINARIES.iter().copied().filter(|b| !which(b)).collect();
        if release.dir.is_none() {
            missing.extend(
                ["containerd-shim-runc-v2", "ctr"]
                    .iter()
                    .filter(|b| !which(b)),
            );
        }
        if !missing.is_empty() {
            let why = format!(
                "missing {} (scripts/test installs them)",
                missing.join(", ")
            );
            return unavailable(test, &why);
        }
        if !Path::new(image::BUSYBOX).is_file() {
            let why = format!("missing {} (package busybox-static)", image::BUSYBOX);
            return unavailable(test, &why);
        }
        if networked.is_some() {
            if let Err(why) = cni::plugins_present() {
                return unavailable(test, &why);
            }
        }
        // Shims daemonize (their starter exits), so they would be reparented
        // to PID 1, which reaps late here. As a child subreaper the test
        // process inherits them, and their container processes if a shim
        // dies first, and teardown reaps them.
        if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
            eprintln!("{test}: PR_SET_CHILD_SUBREAPER failed ({e}); teardown cannot reap shims");
        }
        eprintln!(
            "{test}: containerd {} ({:?} line) from {}",
            release.version,
            release.line,
            release
                .dir
                .as_deref()
                .map(|d| d.display().to_string())
                .unwrap_or_else(|| "PATH".to_string())
        );
        match TestBed::launch(test, release, networked, exec_delay).await {
            Ok(bed) => Some(bed),
            Err(why) => panic!("{test}: starting the test bed failed: {why}"),
        }
    }

    async fn launch(
        test: &str,
        release: Containerd,
        networked: Option<&'static str>,
        exec_delay: Option<Duration>,
    ) -> Result<TestBed, String> {
        let dir = tempfile::Builder::new()
            .prefix("nodectl-testbed-")
            .tempdir()
            .map_err(|e| format!("creating the temp dir: {e}"))?
            // Removed by teardown, after the mounts in it are gone.
            .keep();
        let bed = TestBed::spawn(test, dir.clone(), release, networked, exec_delay);
        let mut bed = match bed {
            Ok(bed) => bed,
            Err(e) => {
                let _ = fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        // From here on, a failed start tears the bed down here (ending
        // containerd, removing the temp dir) and says what was left along
        // with why it failed.
        let setup = async {
            bed.wait_cri_ready(Duration::from_secs(30)).await?;
            bed.import_image()?;
            bed.wait_image_known(Duration::from_secs(30)).await
        };
        match setup.await {
            Ok(()) => Ok(bed),
            Err(e) => {
                let mut why = format!("{e}\n{}", bed.log_tail(LOG_TAIL));
                bed.torn_down = true;
                let problems = bed.teardown();
                if !problems.is_empty() {
                    why.push_str(&format!("\nteardown:\n  {}", problems.join("\n  ")));
                }
                Err(why)
            }
        }
    }

    fn spawn(
        test: &str,
        dir: PathBuf,
        release: Containerd,
        networked: Option<&'static str>,
        exec_delay: Option<Duration>,
    ) -> Result<TestBed, String> {
        let address = dir.join("containerd.sock");
        // sun_path holds 108 bytes; a long TMPDIR would make bind fail late.
        if address.as_os_str().len() > 100 {
            return Err(format!("socket path too long: {}", address.display()));
        }
        write_owner(&dir)?;
        for sub in [
            "root", "state", "opt", "runc", "cni/bin", "cni/conf", "pod-logs",
        ] {
            fs::create_dir_all(dir.join(sub))
                .map_err(|e| format!("{}: {e}", dir.join(sub).display()))?;
        }
        let config = dir.join("config.toml");
        let log = dir.join("containerd.log");
        let name = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let cgroup_parent = format!("/{name}");
        // Before containerd starts: the bed's every mount comes after it.
        let mut neighbourhood = match Neighbourhood::build(&dir) {
            Ok(neighbourhood) => neighbourhood,
            Err(e) => {
                let left = super::teardown::unmount_below(&dir);
                return Err(format!("{e} (still mounted: {left:?})"));
            }
        };
        let runc = match exec_delay.map(|delay| write_exec_delaying_runc(&dir, delay)) {
            Some(Err(e)) => return Err(neighbourhood.abandon(&dir, e)),
            Some(Ok(runc)) => Some(runc),
            None => None,
        };
        let (main, drop_in) = config_toml(&dir, release.line, networked.is_some(), runc.as_deref());
        let drop_in_path = dir.join(DROP_IN);
        let written = fs::create_dir_all(drop_in_path.parent().unwrap_or(&dir))
            .and_then(|()| fs::write(&drop_in_path, drop_in))
            .map_err(|e| format!("{}: {e}", drop_in_path.display()))
            .and_then(|()| {
                fs::write(&config, main).map_err(|e| format!("{}: {e}", config.display()))
            })
            .and_then(|()| match networked {
                Some(subnet) => Cni::write(&dir, subnet).map(Some),
                None => Ok(None),
            });
        let cni = match written {
            Ok(cni) => cni,
            Err(e) => return Err(neighbourhood.abandon(&dir, e)),
        };
        let spawned = spawn_containerd(&release, &config, &dir, &log, cni.as_ref());
        let (containerd, cni) = match (spawned, cni) {
            (Ok(containerd), None) => (containerd, None),
            (Ok(mut containerd), Some(mut cni)) => {
                match cni.hold_netns(containerd.id()).and_then(|()| {
                    cni.start_neighbours(&dir.join("state/io.containerd.grpc.v1.cri/netns"))
                }) {
                    Ok(()) => (containerd, Some(cni)),
                    Err(e) => {
                        let _ = containerd.kill();
                        let _ = containerd.wait();
                        cni.teardown(&BTreeSet::new());
                        return Err(neighbourhood.abandon(&dir, e));
                    }
                }
            }
            (Err(e), cni) => {
                if let Some(mut cni) = cni {
                    cni.teardown(&BTreeSet::new());
                }
                return Err(neighbourhood.abandon(&dir, e));
            }
        };
        Ok(TestBed {
            test: test.to_string(),
            root: dir.join("root"),
            state: dir.join("state"),
            address,
            config,
            log,
            cgroup_parent,
            containerd,
            release,
            dir,
            sandboxes: Default::default(),
            straces: Default::default(),
            extra_sockets: Default::default(),
            seen_shims: Default::default(),
            torn_down: false,
            cni,
            neighbourhood,
        })
    }

    /// `ctr images import` of the busybox image built for the test bed.
    fn import_image(&self) -> Result<(), String> {
        let archive = self.dir.join("busybox-oci.tar");
        image::write_archive(&archive).map_err(|e| format!("building the image: {e}"))?;
        let output = run_bounded(
            Command::new(self.release.binary("ctr"))
                .arg("--address")
                .arg(&self.address)
                .args(["-n", NAMESPACE, "images", "import"])
                .arg(&archive),
            Duration::from_secs(120),
        )?;
        if !output.status.success() {
            return Err(format!(
                "ctr images import failed ({}): {}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        // ctr names the image it imports (1.x: "unpacking <name> (sha256:…)…",
        // 2.x: "saved" after a progress display that names it); another name
        // means the archive's annotations were not read as intended (see
        // image::write_archive). wait_image_known then asks CRI by name.
        // 2.x's progress display may print nothing at all when the import
        // ends before its first refresh (2.3.4 in CI: empty stdout, the
        // image created in containerd's log): then CRI's answer by name
        // below is the only word.
        let said = String::from_utf8_lossy(&output.stdout);
        let imported = match self.line() {
            Line::V1_6 | Line::V1_7 => said.contains(&format!("unpacking {IMAGE} ")),
            Line::V2_0 | Line::V2_3 => {
                said.trim().is_empty() || (said.contains(IMAGE) && said.contains("saved"))
            }
        };
        if !imported {
            return Err(format!("ctr images import did not import {IMAGE}: {said}"));
        }
        Ok(())
    }

    /// The containerd release line running here: what differs between
    /// lines is asserted per line.
    pub fn line(&self) -> Line {
        self.release.line
    }
    /// The containerd version running here, e.g. `1.6.20` or `2.3.4`.
    pub fn containerd_version(&self) -> &str {
        &self.release.version
    }
    /// The containerd release running here as numbers, e.g. `(2, 0, 6)`.
    pub fn containerd_release(&self) -> (u32, u32, u32) {
        self.release.release()
    }
    /// The path of the `ctr` matching the containerd under test.
    pub fn ctr(&self) -> PathBuf {
        self.release.binary("ctr")
    }
    /// The temp dir holding everything of this test bed.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// containerd's `root` (persistent data: CRI's status files, snapshots).
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// containerd's `state` (bundles, CRI sandbox shm mounts).
    pub fn state(&self) -> &Path {
        &self.state
    }
    /// Where containerd keeps the task bundles of CRI's namespace.
    pub fn bundles(&self) -> PathBuf {
        self.state
            .join("io.containerd.runtime.v2.task")
            .join(NAMESPACE)
    }
    /// containerd's gRPC socket (CRI and the containerd API).
    pub fn address(&self) -> &Path {
        &self.address
    }
    pub fn config_path(&self) -> &Path {
        &self.config
    }
    pub fn log_path(&self) -> &Path {
        &self.log
    }
    /// The cgroup every pod of this test bed runs under (cgroupfs path).
    pub fn cgroup_parent(&self) -> &str {
        &self.cgroup_parent
    }
    /// A path in the test bed's temp dir, removed with it.
    pub fn scratch(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
    pub fn containerd_pid(&self) -> i32 {
        self.containerd.id() as i32
    }
    /// CRI's status file of a container: JSON with Pid, StartedAt,
    /// FinishedAt (unix ns), ExitCode..., rewritten on every status change.
    pub fn status_file(&self, container_id: &str) -> PathBuf {
        self.root
            .join("io.containerd.grpc.v1.cri/containers")
            .join(container_id)
            .join("status")
    }

    /// [`Self::status_file`], parsed.
    pub fn status(&self, container_id: &str) -> serde_json::Value {
        let path = self.status_file(container_id);
        let bytes = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The last `lines` lines of containerd's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        // Debug lines carry whole OCI specs: cut them to stay readable.
        let tail: Vec<String> = all[all.len().saturating_sub(lines)..]
            .iter()
            .map(|line| match line.char_indices().nth(LOG_LINE) {
                Some((cut, _)) => format!("{}…", &line[..cut]),
                None => line.to_string(),
            })
            .collect();
        let tail = tail.join("\n");
        format!(
            "--- {} (last {lines} lines) ---\n{tail}\n--- end of containerd log ---",
            self.log.display()
        )
    }

    /// Panics with `why`; the log tail is printed by drop while panicking.
    pub(crate) fn fail(&self, why: &str) -> ! {
        panic!("{}: {why}", self.test)
    }

    pub(crate) fn must<T>(&self, result: Result<T, String>) -> T {
        result.unwrap_or_else(|why| self.fail(&why))
    }

    /// The pid of the long-running shim serving the pod (one per pod: the
    /// shim of the sandbox also runs the pod's containers). Waits up to 10 s.
    pub fn shim_pid(&self, sandbox_id: &str) -> i32 {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(pid) = self
                .shims()
                .into_iter()
                .find(|(_, args)| procs::flag(args, "-id") == Some(sandbox_id))
            {
                return pid.0;
            }
            if std::time::Instant::now() > deadline {
                self.fail(&format!(
                    "no shim with -id {sandbox_id} and -address {}",
                    self.address.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Every running long-lived shim of this containerd, with its argv.
    /// Shims detach from containerd, so they are found by their `-address`;
    /// the one-shot `... start` / `... delete` invocations are left out.
    pub fn shims(&self) -> Vec<(i32, Vec<String>)> {
        let shims: Vec<(i32, Vec<String>)> =
            procs::with_flag("-address", &self.address.display().to_string())
                .into_iter()
                .filter(|(pid, args)| {
                    args.first().is_some_and(|a| a.contains("containerd-shim"))
                        && !matches!(args.last().map(String::as_str), Some("start" | "delete"))
                        && procs::is_running(*pid)
                })
                .collect();
        let mut seen = self.seen_shims.lock().unwrap_or_else(|e| e.into_inner());
        for (pid, _) in &shims {
            if let Some(stat) = procs::stat(*pid) {
                seen.insert(*pid, stat.starttime);
            }
        }
        shims
    }

    /// Holds every `umount2` of `shim_pid` (and of what it forks, e.g. runc)
    /// for `delay` on syscall entry, as a slow overlay unmount would. Returns
    /// once strace traces every thread. The trace goes to
    /// `strace-<pid>.log` in the temp dir.
    ///
    /// Note: a container started in the pod while this runs is delayed too
    /// (runc init unmounts the old root).
    pub fn delay_umount2(&self, shim_pid: i32, delay: Duration) -> Strace {
        let log = self.dir.join(format!("strace-{shim_pid}.log"));
        let strace = self.must(Strace::delay_umount2(shim_pid, delay, &log));
        self.straces
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(strace.slot());
        strace
    }

    /// Runs the nodectl binary with `args` followed by `--root <root> --state
    /// <state> --address <socket> --config <config>`; killed after 60 s.
    pub fn nodectl(&self, args: &[&str]) -> Output {
        let paths = [&self.root, &self.state, &self.address, &self.config];
        super::nodectl_at(args, paths.map(PathBuf::as_path))
            .unwrap_or_else(|e| self.fail(&format!("nodectl {args:?}: {e}")))
    }

    /// Copies a container's status file into `$NODECTL_CAPTURE_TESTDATA`,
    /// when set: that is how testdata/status was captured.
    pub fn capture_status(&self, name: &str, container_id: &str) {
        let Some(dir) = std::env::var_os("NODECTL_CAPTURE_TESTDATA") else {
            return;
        };
        let from = self.status_file(container_id);
        fs::copy(&from, Path::new(&dir).join(name))
            .unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    }
}

impl Drop for TestBed {
    fn drop(&mut self) {
        if self.torn_down {
            return;
        }
        if std::thread::panicking() {
            eprintln!(
                "{}: failed; containerd's log:\n{}",
                self.test,
                self.log_tail(LOG_TAIL)
            );
        }
        let problems = self.teardown();
        if problems.is_empty() {
            return;
        }
        let report = format!(
            "{}: test bed teardown:\n  {}",
            self.test,
            problems.join("\n  ")
        );
        super::teardown_failed(&report);
    }
}

/// Starts containerd on `config`, appending to `log`; with `cni`, in the
/// test bed's own network namespace (a new one while the bed holds none).
fn spawn_containerd(
    release: &Containerd,
    config: &Path,
    cwd: &Path,
    log: &Path,
    cni: Option<&Cni>,
) -> Result<Child, String> {
    let log_file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let log_err = log_file.try_clone().map_err(|e| e.to_string())?;
    let mut command = Command::new(release.binary("containerd"));
    // containerd before 1.6.29 and 1.7.16 globs a relative import from its
    // working directory, later ones from the importing file's (upstream's
    // "Fix config import relative path glob", `resolveImports`): run from
    // the config's directory (the bed's), every line reads its drop-in. Else
    // 1.6.20 reads none and runs on /var/lib/containerd and /run/containerd.
    command.current_dir(cwd);
    command
        .env("PATH", release.path_env())
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(log_err);
    if let Some(cni) = cni {
        cni.own_netns(&mut command);
    }
    command
        .spawn()
        .map_err(|e| format!("spawning containerd: {e}"))
}

impl TestBed {
    /// Stops containerd (SIGTERM, as a service manager would; shims live on)
    /// and starts it again on the same config, waiting until CRI answers.
    pub async fn restart_containerd(&mut self) {
        self.stop_containerd();
        self.start_containerd().await;
    }

    /// Sets runc's `SystemdCgroup` in the bed's drop-in (the cgroup driver
    /// of containerd's runtime: kubelet's must match it) and restarts
    /// containerd on it; the shims running live on, in the cgroups they
    /// were given.
    pub async fn set_systemd_cgroup(&mut self, on: bool) {
        const SET: &str = "\n        SystemdCgroup = true";
        let path = self.dir.join(DROP_IN);
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let root_line = format!("Root = \"{}/runc\"", self.dir.display());
        let without = text.replace(SET, "");
        let text = match on {
            true => without.replace(&root_line, &format!("{root_line}{SET}")),
            false => without,
        };
        assert_eq!(
            text.contains(SET),
            on,
            "runc's options in {}",
            path.display()
        );
        fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        self.restart_containerd().await;
    }

    /// Stops containerd (SIGTERM, as a service manager would; shims live
    /// on), killing it after 30 s, and removes its socket: nothing serves
    /// [`TestBed::address`] until [`TestBed::start_containerd`].
    pub fn stop_containerd(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.containerd_pid());
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while matches!(self.containerd.try_wait(), Ok(None)) {
            if std::time::Instant::now() > deadline {
                let _ = self.containerd.kill();
                let _ = self.containerd.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = fs::remove_file(&self.address);
    }

    /// Starts containerd again on the same config after
    /// [`TestBed::stop_containerd`] and waits up to `limit` for it to exit,
    /// as it does when its start-up fails. Returns what it logged in that
    /// start; an error (containerd stopped again) if it kept running.
    pub fn start_containerd_expecting_exit(&mut self, limit: Duration) -> Result<String, String> {
        let logged_before = fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0);
        let dir = self.dir.clone();
        self.spawn_containerd_in(&dir);
        let deadline = std::time::Instant::now() + limit;
        let exited = loop {
            match self.containerd.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                _ => break None,
            }
        };
        let log = fs::read(&self.log).unwrap_or_default();
        let start = usize::try_from(logged_before).unwrap_or(0).min(log.len());
        let logged = String::from_utf8_lossy(&log[start..]).into_owned();
        match exited {
            Some(_) => Ok(logged),
            None => {
                self.stop_containerd();
                Err(format!("containerd still ran after {limit:?}:\n{logged}"))
            }
        }
    }

    /// Starts containerd again on the same config, `cwd` its working
    /// directory, waiting for nothing.
    fn spawn_containerd_in(&mut self, cwd: &Path) {
        let spawned = spawn_containerd(
            &self.release,
            &self.config,
            cwd,
            &self.log,
            self.cni.as_ref(),
        );
        self.containerd = self.must(spawned);
    }

    /// Starts containerd again on the same config after
    /// [`TestBed::stop_containerd`], waiting until CRI answers.
    pub async fn start_containerd(&mut self) {
        let dir = self.dir.clone();
        self.start_containerd_in(&dir).await;
    }

    /// [`TestBed::start_containerd`] for a config that disables CRI:
    /// waits until containerd's own API answers (`Version`).
    pub async fn start_containerd_without_cri(&mut self) {
        let dir = self.dir.clone();
        self.spawn_containerd_in(&dir);
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut last = "socket not created".to_string();
        loop {
            if let Ok(Some(status)) = self.containerd.try_wait() {
                self.fail(&format!("containerd exited during start-up ({status})"));
            }
            if self.address().exists() {
                let asked = tokio::time::timeout(Duration::from_secs(5), async {
                    let channel = containerd_client::connect(self.address())
                        .await
                        .map_err(|e| e.to_string())?;
                    containerd_client::services::v1::version_client::VersionClient::new(channel)
                        .version(())
                        .await
                        .map_err(|e| e.to_string())
                })
                .await;
                match asked {
                    Ok(Ok(_)) => return,
                    Ok(Err(e)) => last = e,
                    Err(_) => last = "Version: no answer within 5 s".to_string(),
                }
            }
            if std::time::Instant::now() > deadline {
                self.fail(&format!(
                    "containerd's API did not answer within 60 s: {last}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// [`TestBed::start_containerd`] with `cwd` as containerd's working
    /// directory (where containerd before 1.6.29 and 1.7.16 globs a
    /// relative import from).
    pub async fn start_containerd_in(&mut self, cwd: &Path) {
        self.spawn_containerd_in(cwd);
        let ready = self.wait_cri_ready(Duration::from_secs(60)).await;
        self.must(ready);
    }
}

/// containerd's config: everything in `dir`, suited to the test machines.
/// Version 2 for every line: 2.x migrates it on load, as it does on nodes
/// upgraded from 1.x (the `cni` table and `netns_mounts_under_state_dir`
/// move to `io.containerd.cri.v1.runtime`, `bin_dir` becomes `bin_dirs`).
/// The bed's drop-in, below its dir: what a node's installer writes.
pub const DROP_IN: &str = "conf.d/50-node.toml";

/// The bed's config as a node's often is (NVIDIA's toolkit, installers):
/// a main file importing `conf.d/*.toml` (relative: from its own
/// directory), and a drop-in holding root, state and CRI's section, so
/// nodectl must read both as containerd does to find the bed's state.
/// Returns (main, drop-in).
fn config_toml(dir: &Path, line: Line, networked: bool, runc: Option<&Path>) -> (String, String) {
    let d = dir.display();
    let binary_name = match runc {
        Some(runc) => format!(
            "\n        # runc behind a wrapper that delays `runc exec` (see\n        \
             # TestBed::start_networked_delaying_exec).\n        BinaryName = \"{}\"",
            runc.display()
        ),
        None => String::new(),
    };
    // Pod network namespaces are bind mounts, in /var/run/netns unless
    // told otherwise: under the state dir they go with the bed.
    let netns = match networked {
        true => "\n  netns_mounts_under_state_dir = true",
        false => "",
    };
    let cni = match networked {
        true => "# The bed's own conflist and plugins (tests/support/cni.rs).",
        false => "# No CNI on the test machines: empty dirs, host-network pods only.",
    };
    // NRI (1.7+; on by default in 2.x) listens on /var/run/nri/nri.sock
    // unless told otherwise: a second test bed would fail to start on it.
    let nri = match line {
        Line::V1_6 => String::new(),
        Line::V1_7 | Line::V2_0 | Line::V2_3 => {
            format!("\n[plugins.\"io.containerd.nri.v1.nri\"]\n  socket_path = \"{d}/nri.sock\"\n")
        }
    };
    let main = format!(
        r#"version = 2
imports = ["conf.d/*.toml"]
# Snapshotters whose backing filesystems or tools do not exist here: they
# only fail at start-up and clutter the log.
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
]

[grpc]
  address = "{d}/containerd.sock"

# Shims publish events back over ttrpc: keep that socket ours too.
[ttrpc]
  address = "{d}/containerd.sock.ttrpc"

# No debug (pprof) socket and no metrics listener: nothing shared with a
# node-wide containerd or another test bed.
[debug]
  address = ""
  level = "debug"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/opt"
{nri}"#
    );
    let drop_in = format!(
        r#"version = 2
root = "{d}/root"
state = "{d}/state"

[plugins."io.containerd.grpc.v1.cri"]
  # No registry: the "pause" image is our imported busybox, whose default
  # command sleeps forever.
  sandbox_image = "{IMAGE}"
  # runc cannot lower oom_score_adj on these machines; without this every
  # sandbox fails with "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  # Exec/attach streaming: loopback, a port of the kernel's choosing.
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"{netns}
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # runc's state would otherwise go to /run/containerd/runc and stay
        # there when teardown SIGKILLs the shims.
        Root = "{d}/runc"{binary_name}
  {cni}
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{d}/cni/bin"
    conf_dir = "{d}/cni/conf"
"#
    );
    (main, drop_in)
}

/// Writes `dir/runc-delaying-exec`: runc found on PATH, every `runc exec`
/// held `delay` first. The shim calls `runc [global flags] exec …`; no
/// other runc command, and no container id here (hex), is "exec".
fn write_exec_delaying_runc(dir: &Path, delay: Duration) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let runc = super::locate("runc").ok_or("runc is not on PATH")?;
    let wrapper = dir.join("runc-delaying-exec");
    let script = format!(
        "#!/bin/sh\nfor arg; do\n  if [ \"$arg\" = exec ]; then sleep {:.3}; break; fi\ndone\n\
         exec {} \"$@\"\n",
        delay.as_secs_f64(),
        runc.display()
    );
    fs::write(&wrapper, script)
        .and_then(|()| fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755)))
        .map_err(|e| format!("{}: {e}", wrapper.display()))?;
    Ok(wrapper)
}

/// Names this test process as the bed's owner (its pid, start time and pid
/// namespace):
/// scripts/sweep-beds removes a bed whose owner is gone, what a test run
/// killed in the middle leaves behind.
fn write_owner(dir: &Path) -> Result<(), String> {
    let stat =
        fs::read_to_string("/proc/self/stat").map_err(|e| format!("/proc/self/stat: {e}"))?;
    // Field 22, counted after the command's closing parenthesis (field 2).
    let started = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.split(' ').nth(19))
        .ok_or_else(|| format!("/proc/self/stat: no start time in {stat:?}"))?;
    // Its pid namespace too: inside one of its own (systemd's), the pid is
    // that namespace's, and scripts/sweep-beds must not judge it by the
    // host's process of that number.
    let pidns =
        fs::read_link("/proc/self/ns/pid").map_err(|e| format!("/proc/self/ns/pid: {e}"))?;
    let owner = dir.join("owner");
    fs::write(
        &owner,
        format!("{} {started} {}\n", std::process::id(), pidns.display()),
    )
    .map_err(|e| format!("{}: {e}", owner.display()))
}
