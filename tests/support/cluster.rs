//! A real Kubernetes control plane beside the test bed, built from the
//! project's own Go modules by `scripts/peers` into `target/peers/`: etcd,
//! kube-apiserver, kube-controller-manager (the DaemonSet controller among
//! its controllers), kube-scheduler, and a kubelet registered as the bed's
//! node, with kubectl to drive it. Nothing is a stand-in.
//!
//! Everything runs in the bed's network namespace (containerd's, where the
//! pods' bridge is), so that the API server reaches kubelet and whatever
//! runs there (Prometheus) reaches the pods: that namespace's `lo` gets the
//! node's address ([`NODE_IP`]), since kubelet refuses a loopback node IP
//! and the API server a loopback advertise address.
//! Certificates (a CA, the API server's serving pair, a client pair per
//! component, the service-account key) are made by the test with openssl;
//! every process listens on the node's address or loopback only, and is
//! ended when the [`Cluster`] is dropped, kubelet's pods handed to the
//! bed's own teardown first.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::testbed::TestBed;
use super::{in_ci, run_bounded, skip, wait_until};

/// The Kubernetes release the control plane and kubelet are built at
/// (`peers/<release>/go.mod`).
pub const KUBERNETES: &str = "v1.37.2";
/// etcd's release (`peers/etcd/go.mod`).
pub const ETCD: &str = "v3.6.16";
/// The node's address, on `lo` of the bed's network namespace.
pub const NODE_IP: &str = "10.252.0.1";
/// The node's name.
pub const NODE: &str = "nodectl-bed";
/// The API server's port on [`NODE_IP`].
const API_PORT: u16 = 16443;
/// How long the control plane and kubelet have to come up.
const START_LIMIT: Duration = Duration::from_secs(90);

/// Where `scripts/peers` puts the peers: `NODECTL_PEERS_DIR`, else the
/// workspace's `target/peers`.
pub fn peers_dir() -> PathBuf {
    std::env::var_os("NODECTL_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peers"))
}

/// The peer `name` at `release`, built by `scripts/peers`.
pub fn peer(name: &str, release: &str) -> PathBuf {
    peers_dir().join(format!("{name}-{release}"))
}

pub struct Cluster {
    dir: PathBuf,
    /// containerd's network namespace, where everything runs.
    netns: PathBuf,
    pki: PathBuf,
    pub admin: PathBuf,
    pub kubelet_root: PathBuf,
    /// Started in order; ended in reverse.
    processes: Vec<(String, Child)>,
    logs: PathBuf,
}

impl Cluster {
    /// Starts the control plane and a kubelet registered as [`NODE`]
    /// against `bed`'s containerd, and waits until the node is Ready. None
    /// (skipped, saying why) when a peer is missing outside CI; in CI that
    /// fails the test.
    pub fn start(bed: &TestBed, test: &str) -> Option<Cluster> {
        let binaries = [
            ("etcd", ETCD),
            ("kube-apiserver", KUBERNETES),
            ("kube-controller-manager", KUBERNETES),
            ("kube-scheduler", KUBERNETES),
            ("kubelet", KUBERNETES),
            ("kubectl", KUBERNETES),
        ];
        let missing: Vec<String> = binaries
            .iter()
            .map(|(name, release)| peer(name, release))
            .filter(|path| !path.is_file())
            .map(|path| path.display().to_string())
            .collect();
        if !missing.is_empty() {
            skip(
                test,
                &format!("missing {} (scripts/peers builds them)", missing.join(", ")),
            );
            return None;
        }
        for tool in ["openssl", "nsenter", "ip"] {
            if !super::have(tool) {
                skip(test, &format!("missing {tool}"));
                return None;
            }
        }
        let dir = bed.scratch("cluster");
        let netns = PathBuf::from(format!("/proc/{}/ns/net", bed.containerd_pid()));
        let mut cluster = Cluster {
            pki: dir.join("pki"),
            admin: dir.join("admin.kubeconfig"),
            kubelet_root: dir.join("kubelet"),
            logs: dir.join("logs"),
            dir,
            netns,
            processes: Vec::new(),
        };
        if let Err(why) = cluster.launch(bed) {
            let logs = cluster.log_tails();
            panic!("{test}: starting the cluster failed: {why}\n{logs}");
        }
        Some(cluster)
    }

    fn launch(&mut self, bed: &TestBed) -> Result<(), String> {
        for dir in [
            &self.pki,
            &self.logs,
            &self.kubelet_root,
            &self.dir.join("etcd"),
        ] {
            fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        self.node_interface()?;
        self.certificates()?;
        let server = format!("https://{NODE_IP}:{API_PORT}");
        for (name, cert) in [
            ("admin", "admin"),
            ("controller-manager", "controller-manager"),
            ("scheduler", "scheduler"),
            ("kubelet", "node"),
        ] {
            self.kubeconfig(name, cert, &server)?;
        }
        let d = self.dir.display().to_string();
        let p = self.pki.display().to_string();
        self.spawn(
            "etcd",
            &peer("etcd", ETCD),
            &[
                &format!("--data-dir={d}/etcd"),
                "--listen-client-urls=http://127.0.0.1:12379",
                "--advertise-client-urls=http://127.0.0.1:12379",
                "--listen-peer-urls=http://127.0.0.1:12380",
                "--initial-advertise-peer-urls=http://127.0.0.1:12380",
                "--initial-cluster=default=http://127.0.0.1:12380",
                "--listen-metrics-urls=http://127.0.0.1:12381",
                "--log-level=warn",
            ],
        )?;
        self.spawn(
            "kube-apiserver",
            &peer("kube-apiserver", KUBERNETES),
            &[
                "--etcd-servers=http://127.0.0.1:12379",
                &format!("--bind-address={NODE_IP}"),
                &format!("--advertise-address={NODE_IP}"),
                &format!("--secure-port={API_PORT}"),
                &format!("--client-ca-file={p}/ca.crt"),
                &format!("--tls-cert-file={p}/apiserver.crt"),
                &format!("--tls-private-key-file={p}/apiserver.key"),
                &format!("--service-account-key-file={p}/sa.pub"),
                &format!("--service-account-signing-key-file={p}/sa.key"),
                "--service-account-issuer=https://kubernetes.default.svc",
                "--service-cluster-ip-range=10.96.0.0/24",
                "--authorization-mode=Node,RBAC",
                "--allow-privileged=true",
                // The node's name resolves nowhere here: its address.
                "--kubelet-preferred-address-types=InternalIP",
                &format!("--kubelet-client-certificate={p}/apiserver-kubelet.crt"),
                &format!("--kubelet-client-key={p}/apiserver-kubelet.key"),
                &format!("--kubelet-certificate-authority={p}/ca.crt"),
                &format!("--cert-dir={d}/apiserver-certs"),
            ],
        )?;
        let ready = wait_until(START_LIMIT, || {
            self.kubectl(&["get", "--raw", "/readyz"])
                .is_ok_and(|out| out.status.success())
        });
        if !ready {
            return Err("the API server was not ready within 90 s".into());
        }
        self.spawn(
            "kube-controller-manager",
            &peer("kube-controller-manager", KUBERNETES),
            &[
                &format!("--kubeconfig={d}/controller-manager.kubeconfig"),
                &format!("--authentication-kubeconfig={d}/controller-manager.kubeconfig"),
                &format!("--authorization-kubeconfig={d}/controller-manager.kubeconfig"),
                "--bind-address=127.0.0.1",
                "--secure-port=16444",
                &format!("--service-account-private-key-file={p}/sa.key"),
                &format!("--root-ca-file={p}/ca.crt"),
                "--use-service-account-credentials=true",
                "--leader-elect=false",
            ],
        )?;
        self.spawn(
            "kube-scheduler",
            &peer("kube-scheduler", KUBERNETES),
            &[
                &format!("--kubeconfig={d}/scheduler.kubeconfig"),
                &format!("--authentication-kubeconfig={d}/scheduler.kubeconfig"),
                &format!("--authorization-kubeconfig={d}/scheduler.kubeconfig"),
                "--bind-address=127.0.0.1",
                "--secure-port=16445",
                "--leader-elect=false",
            ],
        )?;
        self.start_kubelet(bed)?;
        let node_ready = wait_until(START_LIMIT, || {
            self.kubectl(&[
                "get",
                "node",
                NODE,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
            ])
            .is_ok_and(|out| out.stdout == b"True")
        });
        if !node_ready {
            let node = self
                .kubectl(&["describe", "node", NODE])
                .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
                .unwrap_or_default();
            return Err(format!("node {NODE} was not Ready within 90 s:\n{node}"));
        }
        Ok(())
    }

    /// The node's address, on `lo` of containerd's network namespace
    /// (which has only `lo` and the pods' bridge): the test machines'
    /// kernels have no dummy links, and an address there is as local as on
    /// any interface.
    fn node_interface(&self) -> Result<(), String> {
        let address = format!("{NODE_IP}/32");
        let args = ["addr", "add", &address, "dev", "lo"];
        let mut command = self.in_netns("ip");
        command.args(args);
        succeeded(&mut command, "ip", &args, Duration::from_secs(10))
    }

    /// A command run in containerd's network namespace.
    fn in_netns(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        super::in_netns(Some(&self.netns), program)
    }

    fn certificates(&self) -> Result<(), String> {
        let pki = &self.pki;
        let openssl = |args: &[&str]| {
            let mut command = Command::new("openssl");
            command.args(args).current_dir(pki);
            succeeded(&mut command, "openssl", args, Duration::from_secs(60))
        };
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-subj",
            "/CN=nodectl-test-ca",
            "-days",
            "2",
        ])?;
        let sans = format!(
            "IP:{NODE_IP},IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,\
             DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:{NODE}"
        );
        for (name, subject, san) in [
            (
                "apiserver",
                "/CN=kube-apiserver".to_string(),
                Some(sans.as_str()),
            ),
            ("admin", "/CN=admin/O=system:masters".to_string(), None),
            (
                "controller-manager",
                "/CN=system:kube-controller-manager".to_string(),
                None,
            ),
            ("scheduler", "/CN=system:kube-scheduler".to_string(), None),
            (
                "node",
                format!("/CN=system:node:{NODE}/O=system:nodes"),
                Some(sans.as_str()),
            ),
            (
                "apiserver-kubelet",
                "/CN=kube-apiserver-kubelet-client/O=system:masters".to_string(),
                None,
            ),
        ] {
            let ext = match san {
                Some(san) => {
                    format!("subjectAltName={san}\nextendedKeyUsage=serverAuth,clientAuth\n")
                }
                None => "extendedKeyUsage=clientAuth\n".to_string(),
            };
            let ext_file = pki.join(format!("{name}.ext"));
            fs::write(&ext_file, ext).map_err(|e| format!("{}: {e}", ext_file.display()))?;
            openssl(&[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
                "-subj",
                &subject,
            ])?;
            openssl(&[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &format!("{name}.crt"),
                "-days",
                "2",
                "-extfile",
                &format!("{name}.ext"),
            ])?;
        }
        openssl(&["genrsa", "-out", "sa.key", "2048"])?;
        openssl(&["rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"])
    }

    fn kubeconfig(&self, name: &str, cert: &str, server: &str) -> Result<(), String> {
        let p = self.pki.display();
        let text = format!(
            "apiVersion: v1\nkind: Config\n\
             clusters: [{{name: bed, cluster: {{server: \"{server}\", certificate-authority: {p}/ca.crt}}}}]\n\
             users: [{{name: {name}, user: {{client-certificate: {p}/{cert}.crt, client-key: {p}/{cert}.key}}}}]\n\
             contexts: [{{name: bed, context: {{cluster: bed, user: {name}}}}}]\n\
             current-context: bed\n"
        );
        let path = self.dir.join(format!("{name}.kubeconfig"));
        fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// kubelet registered as [`NODE`]: the bed's socket as its runtime,
    /// cgroupfs below the bed's cgroup parent, its own root dir, serving on
    /// the node's address with the test's CA.
    fn start_kubelet(&mut self, bed: &TestBed) -> Result<(), String> {
        let p = self.pki.display().to_string();
        let config = format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\n\
             kind: KubeletConfiguration\n\
             address: {NODE_IP}\n\
             port: 16450\n\
             readOnlyPort: 0\n\
             healthzBindAddress: 127.0.0.1\n\
             healthzPort: 16451\n\
             authentication:\n  anonymous: {{enabled: false}}\n  webhook: {{enabled: true}}\n  x509: {{clientCAFile: {p}/ca.crt}}\n\
             authorization: {{mode: Webhook}}\n\
             tlsCertFile: {p}/node.crt\n\
             tlsPrivateKeyFile: {p}/node.key\n\
             containerRuntimeEndpoint: unix://{address}\n\
             cgroupDriver: cgroupfs\n\
             cgroupRoot: {cgroup_root}\n\
             failCgroupV1: false\n\
             failSwapOn: false\n\
             podLogsDir: {logs}\n\
             evictionHard: {{memory.available: 50Mi, nodefs.available: 1%, imagefs.available: 1%}}\n\
             imageGCHighThresholdPercent: 100\n\
             imageGCLowThresholdPercent: 99\n\
             resolvConf: /etc/resolv.conf\n\
             registerNode: true\n",
            address = bed.address().display(),
            cgroup_root = bed.cgroup_parent(),
            logs = bed.dir().join("pod-logs").display(),
        );
        // kubelet wants its cgroupRoot in every hierarchy before it starts
        // (`cgroup ... has some missing paths`); the bed's teardown removes
        // it with what kubelet made below it.
        let hierarchies =
            fs::read_dir("/sys/fs/cgroup").map_err(|e| format!("/sys/fs/cgroup: {e}"))?;
        for hierarchy in hierarchies.flatten().map(|entry| entry.path()) {
            if hierarchy.join("cgroup.procs").is_file() {
                let dir = hierarchy.join(bed.cgroup_parent().trim_start_matches('/'));
                fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            }
        }
        let config_path = self.dir.join("kubelet.yaml");
        fs::write(&config_path, config).map_err(|e| format!("{}: {e}", config_path.display()))?;
        let d = self.dir.display().to_string();
        // Named `kubelet` as on a node (its comm is what nodectl looks for,
        // on the host and in the DaemonSet's pod); the link resolves to
        // the root-owned build.
        let bin = self.dir.join("bin");
        fs::create_dir_all(&bin).map_err(|e| format!("{}: {e}", bin.display()))?;
        let exe = bin.join("kubelet");
        std::os::unix::fs::symlink(peer("kubelet", KUBERNETES), &exe)
            .map_err(|e| format!("{}: {e}", exe.display()))?;
        let turn = super::kubelet::StartTurn::take();
        self.spawn(
            "kubelet",
            &exe,
            &[
                &format!("--config={}", config_path.display()),
                &format!("--kubeconfig={d}/kubelet.kubeconfig"),
                &format!("--root-dir={}", self.kubelet_root.display()),
                &format!("--hostname-override={NODE}"),
                &format!("--node-ip={NODE_IP}"),
                "--v=2",
            ],
        )?;
        if let Some((_, kubelet)) = self.processes.last_mut() {
            turn.until_listening(kubelet);
        }
        Ok(())
    }

    /// Starts `binary` in containerd's network namespace, its output in
    /// the cluster's logs; ended with the cluster.
    pub fn spawn(&mut self, name: &str, binary: &Path, args: &[&str]) -> Result<(), String> {
        let log_path = self.logs.join(format!("{name}.log"));
        let log =
            fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let mut command = self.in_netns(binary);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        let child = command
            .spawn()
            .map_err(|e| format!("starting {name}: {e}"))?;
        self.processes.push((name.to_string(), child));
        Ok(())
    }

    /// kubectl as the cluster's admin, in the bed's network namespace,
    /// within 60 s.
    pub fn kubectl(&self, args: &[&str]) -> Result<Output, String> {
        let mut command = self.in_netns(peer("kubectl", KUBERNETES));
        command
            .arg(format!("--kubeconfig={}", self.admin.display()))
            .args(args);
        run_bounded(&mut command, Duration::from_secs(60))
    }

    /// An HTTP GET from containerd's network namespace (where the pods
    /// and the node's address are), within 10 s: its body, if it answered
    /// 2xx.
    pub fn get(&self, url: &str) -> Option<String> {
        let mut command = self.in_netns("curl");
        command.args(["-fsS", "--max-time", "5", url]);
        let out = run_bounded(&mut command, Duration::from_secs(10)).ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The directory of the cluster's own files (its certificates in `pki`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// [`Cluster::kubectl`] that must succeed; its stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self
            .kubectl(args)
            .unwrap_or_else(|e| panic!("kubectl {args:?}: {e}"));
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The last lines of each component's log, for a failure.
    pub fn log_tails(&self) -> String {
        let mut text = String::new();
        // Whole logs outlive the bed's temp dir where asked.
        if let Some(keep) = std::env::var_os("NODECTL_KEEP_CLUSTER_LOGS") {
            let _ = Command::new("cp")
                .arg("-a")
                .arg(&self.logs)
                .arg(keep)
                .status();
        }
        for (name, _) in &self.processes {
            let log = fs::read_to_string(self.logs.join(format!("{name}.log"))).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(15)..];
            text.push_str(&format!("--- {name}:\n"));
            for line in tail {
                text.push_str(&line.chars().take(400).collect::<String>());
                text.push('\n');
            }
        }
        text
    }

    /// Ends every component, kubelet first, and hands the pods kubelet
    /// made to the bed's teardown (which stops and removes them through
    /// CRI, as it does its own), and unmounts what kubelet left below its
    /// root (its pods' projected volumes).
    pub async fn stop(mut self, bed: &TestBed) {
        self.end_processes();
        for sandbox in bed.listed_sandboxes().await {
            bed.sandboxes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(sandbox);
        }
        let left = super::teardown::unmount_below(&self.kubelet_root);
        if !left.is_empty() {
            eprintln!("cluster: still mounted below kubelet's root: {left:?}");
        }
    }

    fn end_processes(&mut self) {
        while let Some((name, mut child)) = self.processes.pop() {
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() > deadline => {
                        eprintln!("cluster: {name} did not end on SIGTERM within 10 s; killed");
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        }
    }
}

/// Runs `command` (`program args`, as a failure names it) within `limit`;
/// its stderr when it fails.
fn succeeded(
    command: &mut Command,
    program: &str,
    args: &[&str],
    limit: Duration,
) -> Result<(), String> {
    let out = run_bounded(command, limit)?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.end_processes();
        let _ = in_ci();
        let _ = std::io::stderr().flush();
    }
}
