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
use crate::sources::api::{connect_recorded, namespaced, status_text, timed, unix_nanos};
use crate::sources::api_gaps;

const SOURCE: Source = Source::ContainerdApi;

/// Asks containerd for its version and, per namespace, its containers and
/// tasks. Calls run concurrently and all end by `deadline`.
pub async fn query(
    address: &Path,
    daemon: Option<i32>,
    namespaces: &BTreeSet<String>,
    deadline: Instant,
) -> ContainerdView {
    let mut view = ContainerdView {
        address: address.to_path_buf(),
        ..ContainerdView::default()
    };
    let Some(channel) =
        connect_recorded(Api::Containerd, address, daemon, deadline, &mut view.calls).await
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
                if let Some(records) = records {
                    namespace.containers = Some(records.ids);
                    namespace.labels = records.labels;
                    namespace.containers_created = records.created;
                    namespace.netns_paths.extend(records.netns);
                    namespace.sandbox_names = records.sandbox_names;
                }
            }
            Answer::Tasks(ns, tasks) => view.namespaces.entry(ns).or_default().tasks = tasks,
            Answer::Sandboxes(ns, listed) => {
                let namespace = view.namespaces.entry(ns).or_default();
                if let Some((created, netns)) = listed {
                    namespace.sandboxes_created = Some(created);
                    namespace.netns_paths.extend(netns);
                }
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
    Sandboxes(String, Option<(BTreeMap<String, i64>, NetnsPaths)>),
}

/// A namespace's container records as nodectl keeps them.
#[derive(Default)]
struct Records {
    ids: BTreeSet<String>,
    /// Their naming labels, by id.
    labels: BTreeMap<String, BTreeMap<String, String>>,
    /// The network namespaces sandbox containers name.
    netns: NetnsPaths,
    /// CRI's name for each sandbox container, by id.
    sandbox_names: BTreeMap<String, String>,
    /// When each record was created, by id.
    created: BTreeMap<String, i64>,
}

/// Sandbox id → the network namespace its record names.
type NetnsPaths = BTreeMap<String, String>;

/// The extension CRI keeps a sandbox's metadata in: on its sandbox
/// container (1.x, and 2.x's pause container), and under `metadata` on 2.x's
/// sandbox store entry.
const SANDBOX_METADATA: &str = "io.cri-containerd.sandbox.metadata";
const STORE_METADATA: &str = "metadata";

/// `NetNSPath` of CRI's sandbox metadata (JSON, versioned:
/// `{"Version":"v1","Metadata":{…}}`), when it names one.
fn netns_path(metadata: &[u8]) -> Option<String> {
    metadata_field(metadata, "NetNSPath")
}

/// A text field of CRI's sandbox metadata, when set.
fn metadata_field(metadata: &[u8], field: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(metadata).ok()?;
    let inner = value.get("Metadata").unwrap_or(&value);
    inner
        .get(field)?
        .as_str()
        .filter(|p| !p.is_empty())
        .map(str::to_string)
}

async fn list_containers(channel: Channel, namespace: &str) -> Result<Records, String> {
    let request = namespaced(ListContainersRequest::default(), namespace)?;
    let response = ContainersClient::new(channel)
        .list(request)
        .await
        .map_err(status_text)?;
    let mut records = Records::default();
    for container in response.into_inner().containers {
        if let Some(metadata) = container.extensions.get(SANDBOX_METADATA) {
            if let Some(path) = netns_path(&metadata.value) {
                records.netns.insert(container.id.clone(), path);
            }
            // The name CRI's start-up reserves for it (`Metadata.Name`:
            // `<pod>_<namespace>_<uid>_<attempt>`).
            if let Some(name) = metadata_field(&metadata.value, "Name") {
                records.sandbox_names.insert(container.id.clone(), name);
            }
        }
        let created = unix_nanos(container.created_at.as_ref());
        if created > 0 {
            records.created.insert(container.id.clone(), created);
        }
        let labels = name_labels(container.labels);
        if !labels.is_empty() {
            records.labels.insert(container.id.clone(), labels);
        }
        records.ids.insert(container.id);
    }
    Ok(records)
}

/// When each sandbox of the sandbox store was created, and the network
/// namespace it names. 1.6 serves no store: none there, not a failure.
async fn list_sandboxes(
    channel: Channel,
    namespace: &str,
) -> Result<(BTreeMap<String, i64>, NetnsPaths), String> {
    let request = namespaced(StoreListRequest::default(), namespace)?;
    let mut listed: (BTreeMap<String, i64>, NetnsPaths) = Default::default();
    let response = match StoreClient::new(channel).list(request).await {
        Ok(response) => response,
        Err(status) if status.code() == tonic::Code::Unimplemented => return Ok(listed),
        Err(status) => return Err(status_text(status)),
    };
    for sandbox in response.into_inner().list {
        let created = unix_nanos(sandbox.created_at.as_ref());
        if let Some(path) = sandbox
            .extensions
            .get(STORE_METADATA)
            .and_then(|any| netns_path(&any.value))
        {
            listed.1.insert(sandbox.sandbox_id.clone(), path);
        }
        listed.0.insert(sandbox.sandbox_id, created);
    }
    Ok(listed)
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
            exited_at: unix_nanos(t.exited_at.as_ref()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_netns_path_is_read_from_cri_s_versioned_metadata() {
        let versioned =
            br#"{"Version":"v1","Metadata":{"ID":"a","NetNSPath":"/var/run/netns/cni-1"}}"#;
        assert_eq!(
            netns_path(versioned).as_deref(),
            Some("/var/run/netns/cni-1")
        );
        let bare = br#"{"ID":"a","NetNSPath":"/var/run/netns/cni-2"}"#;
        assert_eq!(netns_path(bare).as_deref(), Some("/var/run/netns/cni-2"));
        assert_eq!(netns_path(br#"{"Metadata":{"NetNSPath":""}}"#), None);
        assert_eq!(netns_path(b"not json"), None);
        let named = br#"{"Version":"v1","Metadata":{"ID":"a","Name":"web_shop_u1_0"}}"#;
        assert_eq!(
            metadata_field(named, "Name").as_deref(),
            Some("web_shop_u1_0")
        );
    }
}
