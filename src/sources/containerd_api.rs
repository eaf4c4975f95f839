//! The containerd API: which containers and tasks containerd believes exist.
//!
//! The node this runs on is sick, and a containerd blocked on a stuck shim (or
//! frozen) accepts connections but never answers. Every call therefore has a
//! deadline, and each call's latency and error are kept as data.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use containerd_client::services::v1::containers_client::ContainersClient;
use containerd_client::services::v1::tasks_client::TasksClient;
use containerd_client::services::v1::version_client::VersionClient;
use containerd_client::services::v1::{ListContainersRequest, ListTasksRequest};
use serde::{Deserialize, Serialize};
use tonic::transport::Channel;
use tonic::Request;

use crate::snapshot::Gap;

const SOURCE: &str = "containerd-api";

/// What containerd answered, per namespace; `None` where it did not answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ContainerdView {
    pub address: PathBuf,
    pub version: Option<String>,
    pub namespaces: BTreeMap<String, NamespaceView>,
    /// Every call made, with how long it took and how it ended.
    pub calls: Vec<ApiCall>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NamespaceView {
    /// Ids of the container records (metadata) in this namespace.
    pub containers: Option<BTreeSet<String>>,
    /// Tasks (running or stopped processes) in this namespace.
    pub tasks: Option<Vec<TaskView>>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TaskView {
    pub id: String,
    pub pid: u32,
    /// containerd's task status: created, running, stopped, paused, pausing, unknown.
    pub status: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ApiCall {
    pub call: String,
    pub latency_ms: f64,
    pub error: Option<String>,
}

impl ContainerdView {
    /// The container records of a namespace, if containerd listed them.
    pub fn containers(&self, namespace: &str) -> Option<&BTreeSet<String>> {
        self.namespaces.get(namespace)?.containers.as_ref()
    }
}

/// Asks containerd at `address` for its version and, per namespace, its
/// containers and tasks. Calls run concurrently, each bounded by `timeout`;
/// failures become gaps and entries in `calls`, never a hang.
pub fn query(
    address: &Path,
    namespaces: &BTreeSet<String>,
    timeout: Duration,
    gaps: &mut Vec<Gap>,
) -> ContainerdView {
    let mut view = ContainerdView {
        address: address.to_path_buf(),
        ..ContainerdView::default()
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            gaps.push(Gap::source(
                SOURCE,
                address,
                format!("starting a runtime: {err}"),
            ));
            return view;
        }
    };
    runtime.block_on(query_async(&mut view, namespaces, timeout));
    // A socket that is missing or refuses makes the whole API unavailable.
    if let Some(failed) = view
        .calls
        .iter()
        .find(|c| c.call == "connect" && c.error.is_some())
    {
        gaps.push(Gap::source(
            SOURCE,
            address,
            failed.error.clone().unwrap_or_default(),
        ));
    } else {
        for call in view.calls.iter().filter(|c| c.error.is_some()) {
            gaps.push(Gap::item(
                SOURCE,
                address,
                format!(
                    "{}: {}",
                    call.call,
                    call.error.as_deref().unwrap_or_default()
                ),
            ));
        }
    }
    view
}

async fn query_async(view: &mut ContainerdView, namespaces: &BTreeSet<String>, timeout: Duration) {
    let (channel, call) = timed("connect", timeout, async {
        containerd_client::connect(&view.address)
            .await
            .map_err(|e| describe_connect_error(&view.address, &e))
    })
    .await;
    view.calls.push(call);
    let Some(channel) = channel else { return };

    let mut calls = tokio::task::JoinSet::new();
    let version_channel = channel.clone();
    calls.spawn(async move {
        let (version, call) = timed("Version", timeout, async move {
            let response = VersionClient::new(version_channel).version(()).await;
            response
                .map(|r| r.into_inner().version)
                .map_err(status_text)
        })
        .await;
        (Answer::Version(version), call)
    });
    for ns in namespaces {
        let (ns, channel) = (ns.clone(), channel.clone());
        calls.spawn(async move {
            let call = format!("Containers.List {ns}");
            let (ids, call) = timed(&call, timeout, list_containers(channel, &ns)).await;
            (Answer::Containers(ns, ids), call)
        });
    }
    for ns in namespaces {
        let (ns, channel) = (ns.clone(), channel.clone());
        calls.spawn(async move {
            let call = format!("Tasks.List {ns}");
            let (tasks, call) = timed(&call, timeout, list_tasks(channel, &ns)).await;
            (Answer::Tasks(ns, tasks), call)
        });
    }
    while let Some(joined) = calls.join_next().await {
        // Every call is bounded by `timed`; a panicking task is the only error.
        let Ok((answer, call)) = joined else { continue };
        view.calls.push(call);
        match answer {
            Answer::Version(version) => view.version = version,
            Answer::Containers(ns, ids) => view.namespaces.entry(ns).or_default().containers = ids,
            Answer::Tasks(ns, tasks) => view.namespaces.entry(ns).or_default().tasks = tasks,
        }
    }
    view.calls.sort_by(|a, b| a.call.cmp(&b.call));
}

enum Answer {
    Version(Option<String>),
    Containers(String, Option<BTreeSet<String>>),
    Tasks(String, Option<Vec<TaskView>>),
}

fn namespaced<T>(message: T, namespace: &str) -> Result<Request<T>, String> {
    let mut request = Request::new(message);
    let value = namespace
        .parse()
        .map_err(|_| format!("namespace {namespace:?} is not a valid header value"))?;
    request.metadata_mut().insert("containerd-namespace", value);
    Ok(request)
}

async fn list_containers(channel: Channel, namespace: &str) -> Result<BTreeSet<String>, String> {
    let request = namespaced(ListContainersRequest::default(), namespace)?;
    let response = ContainersClient::new(channel)
        .list(request)
        .await
        .map_err(status_text)?;
    Ok(response
        .into_inner()
        .containers
        .into_iter()
        .map(|c| c.id)
        .collect())
}

async fn list_tasks(channel: Channel, namespace: &str) -> Result<Vec<TaskView>, String> {
    let request = namespaced(ListTasksRequest::default(), namespace)?;
    let response = TasksClient::new(channel)
        .list(request)
        .await
        .map_err(status_text)?;
    Ok(response
        .into_inner()
        .tasks
        .into_iter()
        .map(|t| TaskView {
            status: task_status(t.status),
            id: t.id,
            pid: t.pid,
        })
        .collect())
}

fn task_status(code: i32) -> String {
    use containerd_client::types::v1::Status;
    match Status::try_from(code) {
        Ok(status) => status.as_str_name().to_ascii_lowercase(),
        Err(_) => format!("status {code}"),
    }
}

/// Runs one call under a deadline and records it.
async fn timed<T>(
    name: &str,
    timeout: Duration,
    call: impl Future<Output = Result<T, String>>,
) -> (Option<T>, ApiCall) {
    let start = Instant::now();
    let result = match tokio::time::timeout(timeout, call).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "no answer within {}",
            humantime::format_duration(timeout)
        )),
    };
    let record = ApiCall {
        call: name.to_string(),
        latency_ms: (start.elapsed().as_secs_f64() * 1e4).round() / 10.0,
        error: result.as_ref().err().cloned(),
    };
    (result.ok(), record)
}

fn status_text(status: tonic::Status) -> String {
    format!("{:?}: {}", status.code(), status.message())
}

fn describe_connect_error(address: &Path, err: &tonic::transport::Error) -> String {
    use std::error::Error;
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    if !address.exists() {
        text = format!("socket does not exist ({text})");
    }
    text
}
