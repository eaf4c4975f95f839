//! The containerd API: which containers and tasks containerd believes exist.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use containerd_client::services::v1::containers_client::ContainersClient;
use containerd_client::services::v1::sandbox::store_client::StoreClient;
use containerd_client::services::v1::sandbox::StoreListRequest;
use containerd_client::services::v1::tasks_client::TasksClient;
use containerd_client::services::v1::version_client::VersionClient;
use containerd_client::services::v1::{ListContainersRequest, ListTasksRequest};
use tokio::time::Instant;
use tonic::transport::Channel;

use crate::model::{
    name_labels, Api, ApiCall, ContainerdView, Gap, Method, Source, TaskStatus, TaskView,
};
use crate::sources::api::{connect_recorded, namespaced, status_text, timed};
use crate::sources::api_gaps;

const SOURCE: Source = Source::ContainerdApi;

/// Asks containerd for its version and, per namespace, its containers and
/// tasks. Calls run concurrently and all end by `deadline`.
pub async fn query(
    address: &Path,
    namespaces: &BTreeSet<String>,
    deadline: Instant,
) -> ContainerdView {
    let mut view = ContainerdView {
        address: address.to_path_buf(),
        ..ContainerdView::default()
    };
    let Some(channel) = connect_recorded(Api::Containerd, address, deadline, &mut view.calls).await
    else {
        return view;
    };

    let mut calls = tokio::task::JoinSet::new();
    let version_channel = channel.clone();
    calls.spawn(async move {
        let (version, call) = timed(
            (Api::Containerd, Method::Version, None),
            deadline,
            async move {
                let response = VersionClient::new(version_channel).version(()).await;
                response
                    .map(|r| r.into_inner().version)
                    .map_err(status_text)
            },
        )
        .await;
        (Answer::Version(version), call)
    });
    for ns in namespaces {
        let (ns, channel) = (ns.clone(), channel.clone());
        calls.spawn(async move {
            let call = (Api::Containerd, Method::ContainersList, Some(ns.as_str()));
            let (records, call) = timed(call, deadline, list_containers(channel, &ns)).await;
            (Answer::Containers(ns, records), call)
        });
    }
    for ns in namespaces {
        let (ns, channel) = (ns.clone(), channel.clone());
        calls.spawn(async move {
            let call = (Api::Containerd, Method::SandboxesList, Some(ns.as_str()));
            let (created, call) = timed(call, deadline, list_sandboxes(channel, &ns)).await;
            (Answer::Sandboxes(ns, created), call)
        });
    }
    for ns in namespaces {
        let (ns, channel) = (ns.clone(), channel.clone());
        calls.spawn(async move {
            let call = (Api::Containerd, Method::TasksList, Some(ns.as_str()));
            let (tasks, call) = timed(call, deadline, list_tasks(channel, &ns)).await;
            (Answer::Tasks(ns, tasks), call)
        });
    }
    while let Some(joined) = calls.join_next().await {
        // Every call is bounded by `timed`; a panicking task is the only error.
        let Ok((answer, call)) = joined else { continue };
        view.calls.push(call);
        match answer {
            Answer::Version(version) => view.version = version,
            Answer::Containers(ns, records) => {
                let namespace = view.namespaces.entry(ns).or_default();
                if let Some((ids, labels)) = records {
                    namespace.containers = Some(ids);
                    namespace.labels = labels;
                }
            }
            Answer::Tasks(ns, tasks) => view.namespaces.entry(ns).or_default().tasks = tasks,
            Answer::Sandboxes(ns, created) => {
                view.namespaces.entry(ns).or_default().sandboxes_created = created
            }
        }
    }
    view.calls.sort_by_key(ApiCall::text);
    view
}

/// Gaps for what containerd did not answer.
pub fn gaps(view: &ContainerdView, gaps: &mut Vec<Gap>) {
    api_gaps(SOURCE, &view.address, &view.calls, gaps);
}

enum Answer {
    Version(Option<String>),
    Containers(String, Option<Records>),
    Tasks(String, Option<Vec<TaskView>>),
    Sandboxes(String, Option<BTreeMap<String, i64>>),
}

/// The ids of a namespace's container records, and their naming labels.
type Records = (BTreeSet<String>, BTreeMap<String, BTreeMap<String, String>>);

async fn list_containers(channel: Channel, namespace: &str) -> Result<Records, String> {
    let request = namespaced(ListContainersRequest::default(), namespace)?;
    let response = ContainersClient::new(channel)
        .list(request)
        .await
        .map_err(status_text)?;
    let mut records: Records = Default::default();
    for container in response.into_inner().containers {
        let labels = name_labels(container.labels);
        if !labels.is_empty() {
            records.1.insert(container.id.clone(), labels);
        }
        records.0.insert(container.id);
    }
    Ok(records)
}

/// When each sandbox of the sandbox store was created. 1.6 serves no
/// store: none there, not a failure.
async fn list_sandboxes(
    channel: Channel,
    namespace: &str,
) -> Result<BTreeMap<String, i64>, String> {
    let request = namespaced(StoreListRequest::default(), namespace)?;
    let response = match StoreClient::new(channel).list(request).await {
        Ok(response) => response,
        Err(status) if status.code() == tonic::Code::Unimplemented => return Ok(BTreeMap::new()),
        Err(status) => return Err(status_text(status)),
    };
    Ok(response
        .into_inner()
        .list
        .into_iter()
        .map(|sandbox| {
            let created = sandbox
                .created_at
                .map(|at| {
                    at.seconds
                        .saturating_mul(1_000_000_000)
                        .saturating_add(i64::from(at.nanos))
                })
                .unwrap_or_default();
            (sandbox.sandbox_id, created)
        })
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

fn task_status(code: i32) -> TaskStatus {
    use containerd_client::types::v1::Status;
    match Status::try_from(code) {
        Ok(Status::Unknown) => TaskStatus::Unknown,
        Ok(Status::Created) => TaskStatus::Created,
        Ok(Status::Running) => TaskStatus::Running,
        Ok(Status::Stopped) => TaskStatus::Stopped,
        Ok(Status::Paused) => TaskStatus::Paused,
        Ok(Status::Pausing) => TaskStatus::Pausing,
        Err(_) => TaskStatus::Unrecognised(code),
    }
}
