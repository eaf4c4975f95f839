//! Talking CRI to the test bed's containerd over its unix socket, as the
//! kubelet would: pods, containers and their states.

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::*;
use tonic::transport::{Channel, Endpoint};

use super::image::IMAGE;
use super::TestBed;

/// Bound on the CRI calls that create things (RunPodSandbox starts a shim).
const CRI_CALL: Duration = Duration::from_secs(60);
/// Bound on the CRI calls that only read (ContainerStatus and the like).
const CRI_READ: Duration = Duration::from_secs(10);

/// A RunPodSandbox that failed: CRI's message, and the sandbox id it names.
#[derive(Clone, Debug)]
pub struct SandboxFailure {
    pub message: String,
    pub sandbox_id: Option<String>,
}

/// The sandbox id a RunPodSandbox error names: `... for sandbox "<id>"`
/// (quoted, or quoted and escaped as tonic prints the message).
fn named_sandbox(message: &str) -> Option<String> {
    message.match_indices("sandbox ").find_map(|(at, word)| {
        let quoted = message[at + word.len()..].trim_start_matches(['\\', '"']);
        let id: String = quoted.chars().take_while(char::is_ascii_hexdigit).collect();
        (id.len() == 64).then_some(id)
    })
}

/// What [`TestBed::run_pod`] created.
#[derive(Clone, Debug)]
pub struct Pod {
    pub sandbox_id: String,
    pub container_id: String,
}

/// Which pid namespace a pod's processes live in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pids {
    /// One for the pod, the sandbox's process its init (CRI's default; a
    /// pod with `shareProcessNamespace`): when the sandbox's process dies,
    /// the kernel kills every process of the pod.
    SharedWithSandbox,
    /// One per container, as kubelet asks for by default: the sandbox's
    /// process can die while the pod's containers run on.
    OwnPerContainer,
}

impl Pids {
    fn mode(self) -> NamespaceMode {
        match self {
            Pids::SharedWithSandbox => NamespaceMode::Pod,
            Pids::OwnPerContainer => NamespaceMode::Container,
        }
    }
}

/// A gRPC channel over a unix socket. The URI is a placeholder tonic needs;
/// the connector ignores it.
pub(crate) async fn connect(address: &Path, limit: Duration) -> Result<Channel, String> {
    let path = address.to_path_buf();
    let endpoint = Endpoint::from_static("http://[::1]:50051").connect_timeout(limit);
    let connect = endpoint.connect_with_connector(tower::service_fn(move |_| {
        let path = path.clone();
        async move {
            Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(path).await?))
        }
    }));
    match tokio::time::timeout(limit, connect).await {
        Ok(Ok(channel)) => Ok(channel),
        Ok(Err(e)) => Err(format!("connecting to {}: {e}", address.display())),
        Err(_) => Err(format!("connecting to {}: timed out", address.display())),
    }
}

/// CRI's Version over the socket at `address`, however it is spelled or
/// relayed: `<runtime name> <runtime version>`, e.g. `containerd v2.3.4`.
pub async fn runtime_version(address: &Path) -> Result<String, String> {
    let mut cri = RuntimeServiceClient::new(connect(address, CRI_READ).await?);
    let reply = bounded("Version", CRI_READ, cri.version(VersionRequest::default())).await?;
    Ok(format!("{} {}", reply.runtime_name, reply.runtime_version))
}

/// A bounded CRI call: the reply, or why there is none.
async fn bounded<T>(
    name: &str,
    limit: Duration,
    call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, call).await {
        Ok(Ok(reply)) => Ok(reply.into_inner()),
        Ok(Err(status)) => Err(format!("{name}: {status}")),
        Err(_) => Err(format!("{name}: no answer within {limit:?}")),
    }
}

impl TestBed {
    /// A RuntimeService client over the test bed's socket.
    pub async fn cri(&self) -> RuntimeServiceClient<Channel> {
        match connect(self.address(), CRI_READ).await {
            Ok(channel) => RuntimeServiceClient::new(channel),
            Err(e) => self.fail(&e),
        }
    }

    /// An ImageService client over the test bed's socket.
    pub async fn images(&self) -> ImageServiceClient<Channel> {
        match connect(self.address(), CRI_READ).await {
            Ok(channel) => ImageServiceClient::new(channel),
            Err(e) => self.fail(&e),
        }
    }

    /// Waits until CRI answers Version, failing fast if containerd exits.
    pub(crate) async fn wait_cri_ready(&mut self, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        let mut last = "socket not created".to_string();
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.containerd.try_wait() {
                return Err(format!("containerd exited during start-up ({status})"));
            }
            if self.address().exists() {
                match connect(self.address(), Duration::from_secs(5)).await {
                    Ok(channel) => {
                        let mut cri = RuntimeServiceClient::new(channel);
                        let version = cri.version(VersionRequest::default());
                        match bounded("Version", Duration::from_secs(5), version).await {
                            Ok(_) => return Ok(()),
                            Err(e) => last = e,
                        }
                    }
                    Err(e) => last = e,
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("CRI did not answer within {limit:?}: {last}"))
    }

    /// Waits until CRI's ImageStatus knows [`IMAGE`]: CRI keeps its own image
    /// cache, filled from containerd's image events, so an image `ctr` just
    /// imported is not necessarily visible to CRI yet.
    pub(crate) async fn wait_image_known(&self, limit: Duration) -> Result<(), String> {
        let channel = connect(self.address(), CRI_READ).await?;
        let mut images = ImageServiceClient::new(channel);
        let deadline = Instant::now() + limit;
        let mut last = String::new();
        while Instant::now() < deadline {
            let request = ImageStatusRequest {
                image: Some(ImageSpec {
                    image: IMAGE.to_string(),
                    ..Default::default()
                }),
                verbose: false,
            };
            match bounded("ImageStatus", CRI_READ, images.image_status(request)).await {
                Ok(reply) if reply.image.is_some() => return Ok(()),
                Ok(_) => last = "not found".to_string(),
                Err(e) => last = e,
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("CRI never listed the image {IMAGE}: {last}"))
    }

    pub(crate) fn sandbox_config(&self, pod_name: &str, pids: Pids) -> PodSandboxConfig {
        // CRI reserves sandbox names per (name, namespace, uid, attempt):
        // a unique uid lets tests reuse pod names.
        static PODS: AtomicU32 = AtomicU32::new(0);
        let uid = format!(
            "{pod_name}-{}-{}",
            std::process::id(),
            PODS.fetch_add(1, Ordering::Relaxed)
        );
        PodSandboxConfig {
            labels: pod_labels(pod_name, "default", &uid),
            metadata: Some(PodSandboxMetadata {
                name: pod_name.to_string(),
                uid,
                namespace: "default".to_string(),
                attempt: 0,
            }),
            log_directory: self
                .dir()
                .join("pod-logs")
                .join(pod_name)
                .display()
                .to_string(),
            linux: Some(LinuxPodSandboxConfig {
                // Every process of the pod lands below our own cgroup, so
                // teardown finds (and removes) exactly ours.
                cgroup_parent: self.cgroup_parent().to_string(),
                security_context: Some(LinuxSandboxSecurityContext {
                    // Without CNI (the default bed) only host-network pods
                    // can start. Such pods share the node's UTS namespace,
                    // so no hostname.
                    namespace_options: Some(NamespaceOption {
                        network: self.pod_network() as i32,
                        pid: pids.mode() as i32,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// RunPodSandbox as kubelet's cgroupfs driver places a burstable pod:
    /// its cgroup parent `<the bed's>/kubepods/burstable/pod<uid>`, which
    /// runc makes and, kubelet's to remove, never removes. Returns the
    /// sandbox id and the pod's uid; panics, with containerd's log tail, if
    /// CRI refuses.
    pub async fn run_sandbox_in_pod_cgroup(&self, pod_name: &str) -> (String, String) {
        let mut config = self.sandbox_config(pod_name, Pids::SharedWithSandbox);
        let uid = config
            .metadata
            .as_ref()
            .map(|m| m.uid.clone())
            .unwrap_or_default();
        if let Some(linux) = config.linux.as_mut() {
            linux.cgroup_parent = format!("{}/kubepods/burstable/pod{uid}", self.cgroup_parent());
        }
        match self.try_start_sandbox(&config).await {
            Ok(id) => (id, uid),
            Err(e) => self.fail(&format!("RunPodSandbox in a pod cgroup: {}", e.message)),
        }
    }

    /// The pods' network: host's, or their own with CNI wiring it
    /// ([`TestBed::start_networked`]).
    fn pod_network(&self) -> NamespaceMode {
        match self.cni {
            Some(_) => NamespaceMode::Pod,
            None => NamespaceMode::Node,
        }
    }

    /// RunPodSandbox (host network unless the bed is networked, namespace
    /// "default", unique uid) and nothing else: a pod whose shim serves its
    /// sandbox alone. Returns the sandbox id; panics, with containerd's log
    /// tail, if CRI refuses.
    pub async fn run_sandbox(&self, pod_name: &str) -> String {
        let config = self.sandbox_config(pod_name, Pids::SharedWithSandbox);
        self.start_sandbox(&config).await
    }

    async fn start_sandbox(&self, config: &PodSandboxConfig) -> String {
        let started = self.try_start_sandbox(config).await;
        self.must(started.map_err(|e| e.message))
    }

    /// [`TestBed::run_sandbox`], its failure returned: CRI's message and
    /// the sandbox id it names (`... for sandbox "<id>"`), if any. Either
    /// id is torn down with the bed.
    pub async fn try_run_sandbox(&self, pod_name: &str) -> Result<String, SandboxFailure> {
        let config = self.sandbox_config(pod_name, Pids::SharedWithSandbox);
        self.try_start_sandbox(&config).await
    }

    async fn try_start_sandbox(&self, config: &PodSandboxConfig) -> Result<String, SandboxFailure> {
        self.try_start_sandbox_with(config, "").await
    }

    /// RunPodSandbox of `config` with the runtime handler `handler` (a
    /// RuntimeClass's; "" for the default).
    pub(crate) async fn try_start_sandbox_with(
        &self,
        config: &PodSandboxConfig,
        handler: &str,
    ) -> Result<String, SandboxFailure> {
        let mut cri = self.cri().await;
        let request = RunPodSandboxRequest {
            config: Some(config.clone()),
            runtime_handler: handler.to_string(),
        };
        let started = bounded("RunPodSandbox", CRI_CALL, cri.run_pod_sandbox(request)).await;
        let id = match &started {
            Ok(reply) => Some(reply.pod_sandbox_id.clone()),
            Err(message) => named_sandbox(message),
        };
        if let Some(id) = &id {
            self.sandboxes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id.clone());
        }
        started
            .map(|reply| reply.pod_sandbox_id)
            .map_err(|message| SandboxFailure {
                message,
                sandbox_id: id,
            })
    }

    /// The ids of every sandbox CRI lists, whatever its state.
    pub async fn listed_sandboxes(&self) -> Vec<String> {
        let mut cri = self.cri().await;
        let request = ListPodSandboxRequest { filter: None };
        let reply = bounded("ListPodSandbox", CRI_READ, cri.list_pod_sandbox(request)).await;
        let mut ids: Vec<String> = self.must(reply).items.into_iter().map(|s| s.id).collect();
        ids.sort();
        ids
    }

    /// CRI's PodSandboxStatus of a sandbox (state, IPs), bounded.
    pub async fn sandbox_status(&self, sandbox_id: &str) -> Result<PodSandboxStatus, String> {
        let mut cri = RuntimeServiceClient::new(connect(self.address(), CRI_READ).await?);
        let request = PodSandboxStatusRequest {
            pod_sandbox_id: sandbox_id.to_string(),
            verbose: false,
        };
        bounded(
            "PodSandboxStatus",
            CRI_READ,
            cri.pod_sandbox_status(request),
        )
        .await?
        .status
        .ok_or_else(|| format!("PodSandboxStatus {sandbox_id}: no status in the reply"))
    }

    /// One RemovePodSandbox: Ok once CRI removed the sandbox (it stops it
    /// first), else CRI's error.
    pub async fn remove_pod(&self, sandbox_id: &str) -> Result<(), String> {
        let mut cri = RuntimeServiceClient::new(connect(self.address(), CRI_READ).await?);
        let remove = RemovePodSandboxRequest {
            pod_sandbox_id: sandbox_id.to_string(),
        };
        bounded("RemovePodSandbox", CRI_CALL, cri.remove_pod_sandbox(remove))
            .await
            .map(drop)
    }

    /// RunPodSandbox (host network, namespace "default", unique uid),
    /// CreateContainer and StartContainer running `command` in the busybox
    /// image, the container in the sandbox's pid namespace (CRI's default).
    /// Panics, with containerd's log tail, if any step fails.
    pub async fn run_pod(&self, pod_name: &str, container_name: &str, command: &[&str]) -> Pod {
        self.run_pod_with(pod_name, container_name, command, Pids::SharedWithSandbox)
            .await
    }

    /// [`TestBed::run_pod`] with the pid namespaces of `pids`.
    pub async fn run_pod_with(
        &self,
        pod_name: &str,
        container_name: &str,
        command: &[&str],
        pids: Pids,
    ) -> Pod {
        let config = self.sandbox_config(pod_name, pids);
        let sandbox_id = self.start_sandbox(&config).await;
        let mut cri = self.cri().await;
        // Kubelet labels a container with its pod's names and its own.
        let mut labels = config.labels.clone();
        labels.insert(
            "io.kubernetes.container.name".to_string(),
            container_name.to_string(),
        );
        let request = CreateContainerRequest {
            pod_sandbox_id: sandbox_id.clone(),
            config: Some(ContainerConfig {
                labels,
                metadata: Some(ContainerMetadata {
                    name: container_name.to_string(),
                    attempt: 0,
                }),
                image: Some(ImageSpec {
                    image: IMAGE.to_string(),
                    ..Default::default()
                }),
                command: command.iter().map(|s| s.to_string()).collect(),
                // Relative to the sandbox's log_directory.
                log_path: format!("{container_name}.log"),
                // The pod's own pid namespace is CRI's default: asked for
                // only otherwise, so that the default pod is as it was.
                linux: (pids != Pids::SharedWithSandbox).then(|| LinuxContainerConfig {
                    security_context: Some(LinuxContainerSecurityContext {
                        namespace_options: Some(NamespaceOption {
                            network: self.pod_network() as i32,
                            pid: pids.mode() as i32,
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            sandbox_config: Some(config),
        };
        let container_id = self
            .must(bounded("CreateContainer", CRI_CALL, cri.create_container(request)).await)
            .container_id;
        let request = StartContainerRequest {
            container_id: container_id.clone(),
        };
        self.must(bounded("StartContainer", CRI_CALL, cri.start_container(request)).await);
        Pod {
            sandbox_id,
            container_id,
        }
    }

    /// CRI's ContainerStatus of a container, bounded.
    pub async fn try_container_status(
        &self,
        container_id: &str,
    ) -> Result<ContainerStatus, String> {
        let channel = connect(self.address(), CRI_READ).await?;
        let mut cri = RuntimeServiceClient::new(channel);
        let request = ContainerStatusRequest {
            container_id: container_id.to_string(),
            verbose: false,
        };
        bounded("ContainerStatus", CRI_READ, cri.container_status(request))
            .await?
            .status
            .ok_or_else(|| format!("ContainerStatus {container_id}: no status in the reply"))
    }

    /// CRI's ContainerStatus of a container; panics if CRI does not answer.
    pub async fn container_status(&self, container_id: &str) -> ContainerStatus {
        let status = self.try_container_status(container_id).await;
        self.must(status)
    }

    /// The state CRI reports for a container; panics if CRI does not answer
    /// within 10 s.
    pub async fn container_state(&self, container_id: &str) -> ContainerState {
        let state = self.container_status(container_id).await.state;
        ContainerState::try_from(state).unwrap_or(ContainerState::ContainerUnknown)
    }

    /// Polls ContainerStatus until CRI reports `want`; false at `timeout`.
    /// Calls that fail or time out in between are retried, not fatal.
    pub async fn wait_container_state(
        &self,
        id: &str,
        want: ContainerState,
        timeout: Duration,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(status) = self.try_container_status(id).await {
                if status.state == want as i32 {
                    return true;
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        false
    }

    /// Polls PodSandboxStatus until CRI reports the sandbox NOTREADY (its
    /// process's exit handled); false at `timeout`. Calls that fail or time
    /// out in between are retried, not fatal.
    pub async fn wait_sandbox_not_ready(&self, sandbox_id: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(channel) = connect(self.address(), CRI_READ).await {
                let mut cri = RuntimeServiceClient::new(channel);
                let request = PodSandboxStatusRequest {
                    pod_sandbox_id: sandbox_id.to_string(),
                    verbose: false,
                };
                let reply = bounded(
                    "PodSandboxStatus",
                    CRI_READ,
                    cri.pod_sandbox_status(request),
                );
                if let Ok(reply) = reply.await {
                    let state = reply.status.map(|s| s.state);
                    if state == Some(PodSandboxState::SandboxNotready as i32) {
                        return true;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// One StopPodSandbox, as the kubelet sends it when a pod is deleted:
    /// Ok once CRI stopped every container of the pod and the sandbox.
    pub async fn stop_pod(&self, sandbox_id: &str) -> Result<(), String> {
        let mut cri = RuntimeServiceClient::new(connect(self.address(), CRI_READ).await?);
        let stop = StopPodSandboxRequest {
            pod_sandbox_id: sandbox_id.to_string(),
        };
        bounded("StopPodSandbox", CRI_CALL, cri.stop_pod_sandbox(stop))
            .await
            .map(drop)
    }

    /// StopPodSandbox + RemovePodSandbox, retried until CRI no longer lists
    /// the sandbox; false if it still does at the deadline.
    pub async fn stop_and_remove_pod(&self, sandbox_id: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(channel) = connect(self.address(), CRI_READ).await {
                let mut cri = RuntimeServiceClient::new(channel);
                if stop_and_remove(&mut cri, sandbox_id, CRI_CALL)
                    .await
                    .is_ok()
                    && listed(&mut cri, sandbox_id).await == Some(false)
                {
                    return true;
                }
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        false
    }

    /// One StopContainer as kubelet sends it: `grace` seconds between the
    /// stop signal and SIGKILL, and a `deadline` containerd enforces
    /// (kubelet's is its runtime request timeout plus the grace). Ok once
    /// CRI says the container stopped, else CRI's error.
    pub async fn stop_container(
        &self,
        container_id: &str,
        grace: i64,
        deadline: Duration,
    ) -> Result<(), String> {
        let mut cri = deadline_client(self.address()).await?;
        let request = with_deadline(
            StopContainerRequest {
                container_id: container_id.to_string(),
                timeout: grace,
            },
            deadline,
        );
        let limit = deadline + Duration::from_secs(10);
        bounded("StopContainer", limit, cri.stop_container(request))
            .await
            .map(drop)
    }

    /// One StopPodSandbox with a `deadline` containerd enforces, as kubelet
    /// sends it when a pod is deleted: Ok once CRI stopped every container
    /// of the pod and the sandbox, else CRI's error.
    pub async fn stop_pod_within(
        &self,
        sandbox_id: &str,
        deadline: Duration,
    ) -> Result<(), String> {
        let mut cri = deadline_client(self.address()).await?;
        let request = with_deadline(
            StopPodSandboxRequest {
                pod_sandbox_id: sandbox_id.to_string(),
            },
            deadline,
        );
        let limit = deadline + Duration::from_secs(10);
        bounded("StopPodSandbox", limit, cri.stop_pod_sandbox(request))
            .await
            .map(drop)
    }
}

/// A CRI client over HTTP/2 of its own, for calls whose deadline containerd
/// is to enforce. tonic's Channel enforces a request's `grpc-timeout` on its
/// side too, so at the deadline the two race: the client's cancel wins as
/// often as not, and containerd says "context canceled" where on a node
/// (seed 004's log) it says "context deadline exceeded". This client sends
/// the header and waits for containerd's answer.
type Http2 = tower::util::BoxService<
    tonic::codegen::http::Request<tonic::body::Body>,
    tonic::codegen::http::Response<hyper::body::Incoming>,
    hyper::Error,
>;

async fn deadline_client(address: &Path) -> Result<RuntimeServiceClient<Http2>, String> {
    let connect = async {
        let stream = tokio::net::UnixStream::connect(address)
            .await
            .map_err(|e| e.to_string())?;
        let executor = hyper_util::rt::TokioExecutor::new();
        hyper::client::conn::http2::handshake(executor, TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())
    };
    let (sender, connection) = tokio::time::timeout(CRI_READ, connect)
        .await
        .map_err(|_| "timed out".to_string())
        .and_then(|connected| connected)
        .map_err(|e| format!("connecting to {}: {e}", address.display()))?;
    tokio::spawn(connection);
    let service = tower::service_fn(move |request| {
        let mut sender = sender.clone();
        async move {
            sender.ready().await?;
            sender.send_request(request).await
        }
    });
    let origin = tonic::codegen::http::Uri::from_static("http://localhost");
    Ok(RuntimeServiceClient::with_origin(
        tower::util::BoxService::new(service),
        origin,
    ))
}

/// `message` with a `grpc-timeout` of `deadline`, which containerd turns
/// into its context's deadline.
fn with_deadline<T>(message: T, deadline: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(deadline);
    request
}

/// One ExecSync of `command` in a container, as kubelet's exec probes
/// send it (`timeout` seconds for the command): its exit code, or why
/// there is none. The caller gives up after `limit`.
pub async fn exec_sync(
    cri: &mut RuntimeServiceClient<Channel>,
    container_id: &str,
    command: &[&str],
    timeout: i64,
    limit: Duration,
) -> Result<i32, String> {
    let request = ExecSyncRequest {
        container_id: container_id.to_string(),
        cmd: command.iter().map(|s| s.to_string()).collect(),
        timeout,
    };
    bounded("ExecSync", limit, cri.exec_sync(request))
        .await
        .map(|reply| reply.exit_code)
}

/// The labels kubelet puts on a pod's sandbox config (besides the pod's own
/// labels, none here); CRI copies them onto containerd's container record.
fn pod_labels(name: &str, namespace: &str, uid: &str) -> HashMap<String, String> {
    [
        ("io.kubernetes.pod.name", name),
        ("io.kubernetes.pod.namespace", namespace),
        ("io.kubernetes.pod.uid", uid),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

async fn stop_and_remove(
    cri: &mut RuntimeServiceClient<Channel>,
    sandbox_id: &str,
    limit: Duration,
) -> Result<(), String> {
    let stop = StopPodSandboxRequest {
        pod_sandbox_id: sandbox_id.to_string(),
    };
    bounded("StopPodSandbox", limit, cri.stop_pod_sandbox(stop)).await?;
    let remove = RemovePodSandboxRequest {
        pod_sandbox_id: sandbox_id.to_string(),
    };
    bounded("RemovePodSandbox", limit, cri.remove_pod_sandbox(remove)).await?;
    Ok(())
}

/// Whether CRI still lists the sandbox; None if it does not answer.
async fn listed(cri: &mut RuntimeServiceClient<Channel>, sandbox_id: &str) -> Option<bool> {
    let request = ListPodSandboxRequest {
        filter: Some(PodSandboxFilter {
            id: sandbox_id.to_string(),
            ..Default::default()
        }),
    };
    let reply = bounded("ListPodSandbox", CRI_READ, cri.list_pod_sandbox(request))
        .await
        .ok()?;
    Some(!reply.items.is_empty())
}

/// Best-effort StopPodSandbox + RemovePodSandbox of `sandboxes`, from a
/// plain thread with its own runtime: it runs from `Drop`, usually on a
/// worker of the test's runtime, where blocking on a future is not allowed.
/// Returns what did not go through; gives up after `budget` whatever state
/// the calls (or the thread) are in.
pub(crate) fn teardown_pods(
    address: PathBuf,
    sandboxes: Vec<String>,
    budget: Duration,
) -> Vec<String> {
    if sandboxes.is_empty() {
        return Vec::new();
    }
    let (done, result) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("testbed-teardown".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = done.send(vec![format!("tokio runtime: {e}")]);
                    return;
                }
            };
            let failures = runtime.block_on(async {
                let work = async {
                    let channel = match connect(&address, Duration::from_secs(5)).await {
                        Ok(channel) => channel,
                        Err(e) => return vec![e],
                    };
                    let mut cri = RuntimeServiceClient::new(channel);
                    let mut failures = Vec::new();
                    for id in &sandboxes {
                        if let Err(e) = stop_and_remove(&mut cri, id, Duration::from_secs(5)).await
                        {
                            failures.push(e);
                        }
                    }
                    failures
                };
                tokio::time::timeout(budget, work)
                    .await
                    .unwrap_or_else(|_| vec![format!("pod teardown over its {budget:?} budget")])
            });
            let _ = done.send(failures);
        });
    if let Err(e) = spawned {
        return vec![format!("spawning the teardown thread: {e}")];
    }
    result
        .recv_timeout(budget + Duration::from_secs(5))
        .unwrap_or_else(|_| vec!["pod teardown thread did not finish".to_string()])
}
