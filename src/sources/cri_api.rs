//! The CRI API (what kubelet sees): sandboxes, containers, and each
//! container's status, timed one by one.
//!
//! CRI's ListContainers and ContainerStatus read every container's status
//! under that container's lock; UpdateContainerResources holds the lock while
//! task.Update waits on the shim. One stuck shim can thus stall every
//! ListContainers, and kubelet's relist with it (PLEG unhealthy at 3 min,
//! node NotReady). Timing ContainerStatus per container names the one whose
//! lock is held.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::{
    ContainerState, ContainerStatusRequest, ContainerStatusResponse, ListContainersRequest,
    ListPodSandboxRequest, PodSandboxState, RemovePodSandboxRequest, StatusRequest,
    StopPodSandboxRequest, VersionRequest,
};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tonic::transport::Channel;

use crate::model::{
    name_labels, Api, ApiCall, CriApiState, CriCniConfig, CriCondition, CriContainer, CriDirs,
    CriItem, CriSaid, CriStatus, CriView, Gap, Method, Source, StatusProbe,
};
use crate::peers::{cri_cni, cri_dirs};
use crate::sources::api::{connect_recorded, connect_to_daemon, status_text, timed};
use crate::sources::api_gaps;

const SOURCE: Source = Source::CriApi;
/// ContainerStatus calls in flight at once: enough to finish a node's worth
/// within the deadline without piling onto a struggling containerd.
const STATUS_CONCURRENCY: usize = 16;

/// Asks CRI at `address` for its view; every call ends by `deadline`.
/// `container_ids` are probed with ContainerStatus (the ids on disk, so the
/// probes do not depend on ListContainers answering).
pub async fn query(
    address: &Path,
    daemon: Option<i32>,
    lists: bool,
    container_ids: &[String],
    deadline: Instant,
) -> CriView {
    let mut view = CriView {
        address: address.to_path_buf(),
        ..CriView::default()
    };
    let Some(channel) =
        connect_recorded(Api::Cri, address, daemon, deadline, &mut view.calls).await
    else {
        view.cni_config_unread = Some("CRI did not answer: no connection".into());
        return view;
    };
    let client = RuntimeServiceClient::new(channel);

    let version = timed((Api::Cri, Method::Version, None), deadline, {
        let mut client = client.clone();
        async move {
            let reply = client
                .version(VersionRequest::default())
                .await
                .map_err(status_text)?;
            let reply = reply.into_inner();
            Ok(format!("{} {}", reply.runtime_name, reply.runtime_version))
        }
    });
    let sandboxes = timed(
        (Api::Cri, Method::ListPodSandbox, None),
        deadline,
        list_sandboxes(client.clone()),
    );
    let containers = timed(
        (Api::Cri, Method::ListContainers, None),
        deadline,
        list_containers(client.clone()),
    );
    // Verbose only of the proven daemon: its CNI setup is believed only
    // from it (the peer of this very connection), and the rest of the
    // verbose info, CRI's whole config, is asked for only then.
    let verbose = daemon.is_some();
    let network = timed(
        (Api::Cri, Method::Status, None),
        deadline,
        status(client.clone(), verbose),
    );
    let statuses = probe_statuses(client, container_ids, deadline);
    // Futures do nothing until awaited: without `lists`, only Status is
    // sent (its settings are what the look needs of CRI).
    let listed = async {
        match lists {
            true => Some(tokio::join!(version, sandboxes, containers, statuses)),
            false => None,
        }
    };
    let (listed, (network, n_call)) = tokio::join!(listed, network);
    if let Some(((version, v_call), (sandboxes, s_call), (containers, c_call), statuses)) = listed {
        view.runtime_version = version;
        view.sandboxes = sandboxes;
        view.containers = containers;
        view.statuses = statuses;
        view.calls.extend([v_call, s_call, c_call]);
    }
    view.calls.push(n_call);
    match network {
        Some(answer) => {
            view.network = answer.network;
            if let Some((dirs, said)) = answer.config.filter(|_| verbose) {
                view.dirs = Some(dirs);
                view.said = Some(said);
            }
            match answer.cni {
                Ok(config) => view.cni_config = Some(config),
                Err(why) => view.cni_config_unread = Some(why),
            }
        }
        None => {
            view.cni_config_unread = Some("CRI did not answer its Status".into());
        }
    }
    if !verbose {
        view.cni_config_unread =
            Some("CRI's daemon is not proven: its word on its networks is not taken".into());
    }
    view
}

/// What one CRI Status says: its `NetworkReady` condition and, verbose,
/// its CNI setup (or why that is unread).
struct StatusAnswer {
    network: Option<CriCondition>,
    cni: Result<CriCniConfig, String>,
    /// containerd's root and state, and CRI's settings, as CRI's config
    /// says (verbose only).
    config: Option<(CriDirs, CriSaid)>,
}

/// CRI's Status: its `NetworkReady` condition and, when `verbose`, the
/// networks it loaded (`info["cniconfig"]`, see [`cri_cni`]).
async fn status(
    mut client: RuntimeServiceClient<Channel>,
    verbose: bool,
) -> Result<StatusAnswer, String> {
    let reply = client
        .status(StatusRequest { verbose })
        .await
        .map_err(status_text)?
        .into_inner();
    let cni = match reply.info.get(cri_cni::INFO_KEY) {
        Some(text) => cri_cni::decode(text),
        None if verbose => Err(format!(
            "CRI's Status(verbose) has no {}: no CNI plugin for its default runtime handler",
            cri_cni::INFO_KEY
        )),
        None => Err("CRI's Status was not asked to be verbose".into()),
    };
    // Unread, it ties nothing: what it would have tied stays a gap.
    let config = reply
        .info
        .get(cri_dirs::INFO_KEY)
        .and_then(|text| cri_dirs::decode(text).ok());
    let conditions = reply.status.map(|s| s.conditions).unwrap_or_default();
    let network = conditions
        .into_iter()
        .find(|c| c.r#type == "NetworkReady")
        .map(|c| CriCondition {
            status: c.status,
            reason: c.reason,
            message: c.message,
        });
    Ok(StatusAnswer {
        network,
        cni,
        config,
    })
}

/// CRI's own record of the containers `ids` (see `CriView::said_running`),
/// each from its ContainerStatus, asked of the proven `daemon` alone over
/// a connection whose peer it is: the calls, and the containers CRI
/// answered for (whatever state it gives them: a second look asks again
/// to see whether CRI has since recorded the exit). Verbose, since the pid
/// is only in the info; that info holds the container's whole spec, its
/// environment too, of which nothing but the pid is kept.
pub async fn said_running(
    address: &Path,
    daemon: i32,
    ids: &[String],
    deadline: Instant,
) -> (Vec<CriContainer>, Vec<ApiCall>) {
    let mut calls = Vec::new();
    let Some(channel) =
        connect_recorded(Api::Cri, address, Some(daemon), deadline, &mut calls).await
    else {
        return (Vec::new(), calls);
    };
    let client = RuntimeServiceClient::new(channel);
    let mut said = Vec::with_capacity(ids.len());
    for (_, container, call) in ask_each_status(client, ids, true, deadline, record_of).await {
        said.extend(container);
        calls.push(call);
    }
    (said, calls)
}

/// The pid from a ContainerStatus's verbose info (`ContainerInfo.Pid`,
/// `json:"pid"` on every line): the rest of it is not decoded.
#[derive(serde::Deserialize)]
struct InfoPid {
    pid: u32,
}

/// A container as CRI's ContainerStatus states it, in the fields of its
/// status file (the same `containerstore.Status` CRI answers from).
fn record_of(id: &str, reply: ContainerStatusResponse) -> Result<CriContainer, String> {
    let status = reply.status.ok_or("empty status")?;
    if status.id != id {
        return Err(format!("answered for another container, {:.13}", status.id));
    }
    let info = reply
        .info
        .get("info")
        .ok_or("its verbose info has no \"info\"")?;
    let InfoPid { pid } = serde_json::from_str(info).map_err(|e| {
        format!(
            "its verbose info: {}",
            crate::inert::capped(&e.to_string(), crate::inert::STRING_CAP)
        )
    })?;
    Ok(CriContainer {
        id: id.to_string(),
        status_path: PathBuf::new(),
        status_written_at: 0,
        status: CriStatus {
            version: String::new(),
            pid: i64::from(pid),
            created_at: status.created_at,
            started_at: status.started_at,
            finished_at: status.finished_at,
            exit_code: i64::from(status.exit_code),
            reason: String::new(),
            message: String::new(),
        },
        status_file: None,
    })
}

pub fn gaps(view: &CriView, gaps: &mut Vec<Gap>) {
    api_gaps(SOURCE, &view.address, &view.calls, gaps);
}

/// Stops one sandbox (CRI runs its CNI DEL and removes its network
/// namespace) and removes it, as kubelet does, each call by its own
/// `timeout`: a stop waits on CNI plugins, which may be slow. Both calls go
/// over one connection whose peer is the containerd `daemon`: CRI runs
/// inside it, and `--cri-address` may name any socket.
pub async fn remove_sandbox(
    address: &Path,
    daemon: i32,
    id: &str,
    timeout: Duration,
) -> Result<(), String> {
    let connected = connect_to_daemon(address, daemon);
    let channel = within(timeout, "connect", connected)
        .await
        .map_err(|why| format!("CRI: {why}"))?;
    let mut client = RuntimeServiceClient::new(channel);
    let stop = StopPodSandboxRequest {
        pod_sandbox_id: id.to_string(),
    };
    let stopped = async { client.stop_pod_sandbox(stop).await.map_err(status_text) };
    within(timeout, "StopPodSandbox", stopped).await?;
    let remove = RemovePodSandboxRequest {
        pod_sandbox_id: id.to_string(),
    };
    let removed = async { client.remove_pod_sandbox(remove).await.map_err(status_text) };
    within(timeout, "RemovePodSandbox", removed).await?;
    Ok(())
}

/// `call` by `timeout`, its error prefixed with `what`.
async fn within<T>(
    timeout: Duration,
    what: &str,
    call: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    let answer = tokio::time::timeout(timeout, call)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "no answer within {}",
                humantime::format_duration(timeout)
            ))
        });
    answer.map_err(|err| format!("{what}: {err}"))
}

async fn list_sandboxes(mut client: RuntimeServiceClient<Channel>) -> Result<Vec<CriItem>, String> {
    let reply = client
        .list_pod_sandbox(ListPodSandboxRequest::default())
        .await
        .map_err(status_text)?;
    Ok(reply
        .into_inner()
        .items
        .into_iter()
        .map(|s| CriItem {
            state: sandbox_state(s.state),
            id: s.id,
            sandbox_id: None,
            name: s.metadata.as_ref().and_then(|m| non_empty(&m.name)),
            namespace: s.metadata.as_ref().and_then(|m| non_empty(&m.namespace)),
            uid: s.metadata.as_ref().and_then(|m| non_empty(&m.uid)),
            labels: name_labels(s.labels),
            created_at: Some(s.created_at).filter(|&at| at > 0),
        })
        .collect())
}

async fn list_containers(
    mut client: RuntimeServiceClient<Channel>,
) -> Result<Vec<CriItem>, String> {
    let reply = client
        .list_containers(ListContainersRequest::default())
        .await
        .map_err(status_text)?;
    Ok(reply
        .into_inner()
        .containers
        .into_iter()
        .map(|c| CriItem {
            state: container_state_name(c.state),
            id: c.id,
            sandbox_id: Some(c.pod_sandbox_id),
            name: c.metadata.as_ref().and_then(|m| non_empty(&m.name)),
            namespace: None,
            labels: name_labels(c.labels),
            uid: None,
            created_at: Some(c.created_at).filter(|&at| at > 0),
        })
        .collect())
}

fn non_empty(text: &str) -> Option<String> {
    Some(text.to_string()).filter(|t| !t.is_empty())
}

fn container_state_name(state: i32) -> CriApiState {
    match ContainerState::try_from(state) {
        Ok(ContainerState::ContainerCreated) => CriApiState::ContainerCreated,
        Ok(ContainerState::ContainerRunning) => CriApiState::ContainerRunning,
        Ok(ContainerState::ContainerExited) => CriApiState::ContainerExited,
        Ok(ContainerState::ContainerUnknown) => CriApiState::ContainerUnknown,
        Err(_) => CriApiState::Unrecognised(state),
    }
}

fn sandbox_state(state: i32) -> CriApiState {
    match PodSandboxState::try_from(state) {
        Ok(PodSandboxState::SandboxReady) => CriApiState::SandboxReady,
        Ok(PodSandboxState::SandboxNotready) => CriApiState::SandboxNotReady,
        Err(_) => CriApiState::Unrecognised(state),
    }
}

async fn probe_statuses(
    client: RuntimeServiceClient<Channel>,
    ids: &[String],
    deadline: Instant,
) -> Vec<StatusProbe> {
    let state = |_: &str, reply: ContainerStatusResponse| {
        let status = reply.status.ok_or("empty status")?;
        Ok(container_state_name(status.state))
    };
    ask_each_status(client, ids, false, deadline, state)
        .await
        .into_iter()
        .map(|(id, state, call)| StatusProbe { id, call, state })
        .collect()
}

/// ContainerStatus of each of `ids`, [`STATUS_CONCURRENCY`] at a time,
/// every call (and its wait for a turn) ending by `deadline`: what `read`
/// makes of each answer, with the call, in the order of the ids.
async fn ask_each_status<T: Send + 'static>(
    client: RuntimeServiceClient<Channel>,
    ids: &[String],
    verbose: bool,
    deadline: Instant,
    read: fn(&str, ContainerStatusResponse) -> Result<T, String>,
) -> Vec<(String, Option<T>, ApiCall)> {
    let permits = Arc::new(Semaphore::new(STATUS_CONCURRENCY));
    let mut asked = tokio::task::JoinSet::new();
    for id in ids {
        let (mut client, id, permits) = (client.clone(), id.clone(), permits.clone());
        asked.spawn(async move {
            // Waiting for a permit counts against the same deadline.
            let name = (Api::Cri, Method::ContainerStatus, Some(id.as_str()));
            let (answer, call) = timed(name, deadline, async {
                let _permit = permits.acquire().await.map_err(|e| e.to_string())?;
                let request = ContainerStatusRequest {
                    container_id: id.clone(),
                    verbose,
                };
                let reply = client
                    .container_status(request)
                    .await
                    .map_err(status_text)?
                    .into_inner();
                read(&id, reply)
            })
            .await;
            (id, answer, call)
        });
    }
    let mut done = Vec::with_capacity(ids.len());
    while let Some(joined) = asked.join_next().await {
        if let Ok(answered) = joined {
            done.push(answered);
        }
    }
    done.sort_by(|a, b| a.0.cmp(&b.0));
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_cri::v1::ContainerStatus;

    fn reply(id: &str, info: Option<&str>) -> ContainerStatusResponse {
        ContainerStatusResponse {
            status: Some(ContainerStatus {
                id: id.to_string(),
                state: ContainerState::ContainerRunning as i32,
                created_at: 1,
                started_at: 2,
                ..ContainerStatus::default()
            }),
            info: info
                .map(|info| [("info".to_string(), info.to_string())].into())
                .unwrap_or_default(),
        }
    }

    #[test]
    fn a_container_status_gives_its_times_and_the_pid_of_its_info_and_keeps_nothing_else() {
        let info =
            r#"{"sandboxID":"s","pid":4242,"runtimeSpec":{"process":{"env":["TOKEN=secret"]}}}"#;
        let said = record_of("a", reply("a", Some(info))).unwrap();
        assert_eq!(said.status.pid, 4242);
        assert_eq!((said.status.created_at, said.status.started_at), (1, 2));
        assert!(!said.from_status_file());
        assert!(!serde_json::to_string(&said).unwrap().contains("secret"));
        // Not verbose, another container's, or its pid unreadable: none.
        assert!(record_of("a", reply("a", None)).is_err());
        assert!(record_of("a", reply("b", Some(info))).is_err());
        let bad = record_of("a", reply("a", Some(r#"{"pid":"\u001b[2J"}"#))).unwrap_err();
        assert!(!bad.contains('\u{1b}'), "{bad}");
    }
}
