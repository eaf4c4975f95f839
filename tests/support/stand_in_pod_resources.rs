//! A stand-in for kubelet's pod-resources API, not a kubelet: the test
//! process itself serves `PodResourcesLister.List` at
//! `<kubelet root>/pod-resources/kubelet.sock` (k8s.io/kubelet
//! `pkg/apis/podresources/v1/api.proto`, the few messages written by hand),
//! root in the host's namespaces as kubelet is, and answers whatever pods
//! the test tells it to.
//!
//! The project's tests drive the real kubelet (`support::Kubelet`, built by
//! scripts/peers); this belongs only where a real kubelet cannot be made to
//! do what the test needs:
//!
//! - leave, while it answers, what it removes itself of a pod it does not
//!   have: its housekeeping (every 2 s) destroys such a pod's cgroup under
//!   its cgroup root once no volume of the pod is left (killing any process
//!   in it first; a systemd slice stopped through systemd) and removes its
//!   pod directory once nothing is mounted there, and its container GC
//!   (every minute) removes its log directory;
//! - list a pod it never admitted (one the test ran through CRI itself in
//!   kubelet's order), or keep a pod Pending on something a standalone
//!   kubelet ignores (with no API server it has no RuntimeClass manager: a
//!   pod's `runtimeClassName` never reaches RunPodSandbox);
//! - lie: answer for pods that are not what the node holds.
//!
//! Each use says which of these it needs, and the stand-in says in the
//! test's output that the answer is its own.
//! docs/testing.md lists the tests that use it.

use std::convert::Infallible;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tonic::codegen::{http, BoxFuture, Service, StdError};
use tonic::server::{Grpc, NamedService, UnaryService};

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodResourcesRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodResourcesResponse {
    #[prost(message, repeated, tag = "1")]
    pub pod_resources: Vec<PodResources>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PodResources {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub namespace: String,
}

/// The stand-in's listener, and the pods it says kubelet "has active":
/// (namespace, name), as the test sets them.
#[derive(Clone, Default)]
pub struct StandInKubeletPodResources {
    pods: Arc<Mutex<Vec<(String, String)>>>,
    task: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl StandInKubeletPodResources {
    /// Serves the API at `<kubelet_root>/pod-resources/kubelet.sock`, on
    /// the test's runtime, until dropped; says in `test`'s output (once)
    /// that this answer is a stand-in's.
    pub fn start(
        test: &str,
        kubelet_root: &Path,
        pods: &[(&str, &str)],
    ) -> StandInKubeletPodResources {
        let dir = kubelet_root.join("pod-resources");
        std::fs::create_dir_all(&dir).expect("kubelet's pod-resources directory");
        // sun_path holds 108 bytes: bound through the open directory.
        let open = std::fs::File::open(&dir).expect("its directory");
        let short = format!(
            "/proc/self/fd/{}/kubelet.sock",
            std::os::fd::AsRawFd::as_raw_fd(&open)
        );
        let listener =
            std::os::unix::net::UnixListener::bind(&short).expect("binding kubelet.sock");
        listener.set_nonblocking(true).unwrap();
        let listener = tokio::net::UnixListener::from_std(listener).expect("on the runtime");
        eprintln!(
            "{test}: kubelet's pod-resources answer at {} comes from a stand-in (the test \
             process, not a kubelet), listing {pods:?}",
            dir.join("kubelet.sock").display()
        );
        let server = StandInKubeletPodResources::default();
        server.set(pods);
        let service = Lister {
            pods: server.pods.clone(),
        };
        let task = tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming)
                .await;
        });
        *server.task.lock().unwrap() = Some(task);
        server
    }

    /// What List answers from now on.
    pub fn set(&self, pods: &[(&str, &str)]) {
        *self.pods.lock().unwrap() = pods
            .iter()
            .map(|(namespace, name)| (namespace.to_string(), name.to_string()))
            .collect();
    }
}

impl Drop for StandInKubeletPodResources {
    fn drop(&mut self) {
        if Arc::strong_count(&self.task) == 1 {
            if let Some(task) = self.task.lock().unwrap().take() {
                task.abort();
            }
        }
    }
}

#[derive(Clone)]
struct Lister {
    pods: Arc<Mutex<Vec<(String, String)>>>,
}

impl NamedService for Lister {
    const NAME: &'static str = "v1.PodResourcesLister";
}

struct List(Lister);

impl UnaryService<ListPodResourcesRequest> for List {
    type Response = ListPodResourcesResponse;
    type Future = BoxFuture<tonic::Response<ListPodResourcesResponse>, tonic::Status>;

    fn call(&mut self, _: tonic::Request<ListPodResourcesRequest>) -> Self::Future {
        let pod_resources = self
            .0
            .pods
            .lock()
            .unwrap()
            .iter()
            .map(|(namespace, name)| PodResources {
                name: name.clone(),
                namespace: namespace.clone(),
            })
            .collect();
        Box::pin(async move {
            Ok(tonic::Response::new(ListPodResourcesResponse {
                pod_resources,
            }))
        })
    }
}

impl<B> Service<http::Request<B>> for Lister
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let lister = self.clone();
        match request.uri().path() {
            "/v1.PodResourcesLister/List" => Box::pin(async move {
                let mut grpc = Grpc::new(tonic_prost::ProstCodec::default());
                Ok(grpc.unary(List(lister), request).await)
            }),
            _ => Box::pin(async { Ok(tonic::Status::unimplemented("").into_http()) }),
        }
    }
}
