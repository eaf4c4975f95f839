//! What the two APIs answered (containerd's and CRI's), as the snapshot
//! keeps it: per namespace, per sandbox and container, with the calls made
//! for it and the states as each API names them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::model::api::{
    bare_call, bare_calls, containerd_calls, cri_call, cri_calls, ApiCall, Method,
};
use crate::model::names::PodRef;

/// A state as CRI's API names it (`runtime.v1.ContainerState` and
/// `PodSandboxState`), compared as a value, written as CRI's name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CriApiState {
    ContainerCreated,
    ContainerRunning,
    ContainerExited,
    #[default]
    ContainerUnknown,
    SandboxReady,
    SandboxNotReady,
    /// A number this nodectl does not know (a newer CRI): `state <n>`.
    Unrecognised(i32),
}

impl CriApiState {
    const NAMED: [CriApiState; 6] = [
        CriApiState::ContainerCreated,
        CriApiState::ContainerRunning,
        CriApiState::ContainerExited,
        CriApiState::ContainerUnknown,
        CriApiState::SandboxReady,
        CriApiState::SandboxNotReady,
    ];

    fn name(self) -> Option<&'static str> {
        Some(match self {
            CriApiState::ContainerCreated => "CONTAINER_CREATED",
            CriApiState::ContainerRunning => "CONTAINER_RUNNING",
            CriApiState::ContainerExited => "CONTAINER_EXITED",
            CriApiState::ContainerUnknown => "CONTAINER_UNKNOWN",
            CriApiState::SandboxReady => "SANDBOX_READY",
            CriApiState::SandboxNotReady => "SANDBOX_NOTREADY",
            CriApiState::Unrecognised(_) => return None,
        })
    }
}

/// containerd's task status (`containerd.v1.types.Status`), compared as a
/// value, written as containerd's name in lower case.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TaskStatus {
    #[default]
    Unknown,
    Created,
    Running,
    Stopped,
    Paused,
    Pausing,
    /// A number this nodectl does not know (a newer containerd): `status <n>`.
    Unrecognised(i32),
}

impl TaskStatus {
    const NAMED: [TaskStatus; 6] = [
        TaskStatus::Unknown,
        TaskStatus::Created,
        TaskStatus::Running,
        TaskStatus::Stopped,
        TaskStatus::Paused,
        TaskStatus::Pausing,
    ];

    fn name(self) -> Option<&'static str> {
        Some(match self {
            TaskStatus::Unknown => "unknown",
            TaskStatus::Created => "created",
            TaskStatus::Running => "running",
            TaskStatus::Stopped => "stopped",
            TaskStatus::Paused => "paused",
            TaskStatus::Pausing => "pausing",
            TaskStatus::Unrecognised(_) => return None,
        })
    }
}

/// Display, Serialize and Deserialize as the name, or `<prefix> <n>` for a
/// number without one.
macro_rules! named_state {
    ($type:ident, $prefix:literal) => {
        impl std::fmt::Display for $type {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match (self.name(), self) {
                    (Some(name), _) => f.write_str(name),
                    (None, $type::Unrecognised(n)) => write!(f, concat!($prefix, " {}"), n),
                    (None, _) => unreachable!("only an unrecognised number has no name"),
                }
            }
        }

        impl Serialize for $type {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $type {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$type, D::Error> {
                let text = String::deserialize(d)?;
                if let Some(named) = $type::NAMED.into_iter().find(|s| s.name() == Some(&text)) {
                    return Ok(named);
                }
                text.strip_prefix(concat!($prefix, " "))
                    .and_then(|n| n.parse().ok())
                    .map($type::Unrecognised)
                    .ok_or_else(|| {
                        serde::de::Error::custom(format!("{text:?} is no {}", stringify!($type)))
                    })
            }
        }
    };
}

named_state!(CriApiState, "state");
named_state!(TaskStatus, "status");

/// What containerd answered, per namespace; `None` where it did not answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ContainerdView {
    #[serde(with = "crate::model::path_json")]
    pub address: PathBuf,
    pub version: Option<String>,
    pub namespaces: BTreeMap<String, NamespaceView>,
    /// Every call made, with how long it took and how it ended.
    #[serde(serialize_with = "bare_calls", deserialize_with = "containerd_calls")]
    pub calls: Vec<ApiCall>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NamespaceView {
    /// Ids of the container records (metadata) in this namespace.
    pub containers: Option<BTreeSet<String>>,
    /// When each of those records was created, by id (a record without a
    /// time is left out).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub containers_created: BTreeMap<String, crate::model::cri_status::UnixNanos>,
    /// The naming labels of those records (see [`crate::model::name_labels`]), by id; a
    /// record without any is left out.
    #[serde(default)]
    pub labels: BTreeMap<String, BTreeMap<String, String>>,
    /// Tasks (running or stopped processes) in this namespace.
    pub tasks: Option<Vec<TaskView>>,
    /// When each sandbox of containerd's sandbox store (2.x's CRI keeps a
    /// pod sandbox's record there) was created, by id; empty where the
    /// store is not served (1.6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandboxes_created: Option<BTreeMap<String, crate::model::cri_status::UnixNanos>>,
    /// The network namespace each sandbox record names (CRI's sandbox
    /// metadata, `NetNSPath`: in 1.x's sandbox container, in 2.x's sandbox
    /// store entry and pause container), by sandbox id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub netns_paths: BTreeMap<String, String>,
    /// CRI's name for each sandbox container (its metadata's `Name`), by
    /// id: the name CRI's start-up reserves for it, one sandbox per name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sandbox_names: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TaskView {
    pub id: String,
    pub pid: u32,
    pub status: TaskStatus,
    /// When a stopped task's process exited, as its shim says (0: unknown,
    /// or the task has not stopped).
    #[serde(default, skip_serializing_if = "crate::model::api_views::is_zero")]
    pub exited_at: crate::model::cri_status::UnixNanos,
}

fn is_zero(at: &crate::model::cri_status::UnixNanos) -> bool {
    *at == 0
}

/// What a failed connect says when there is nothing at the socket's path:
/// the transport's own words add nothing to it.
pub const NO_SOCKET: &str = "socket does not exist";

impl ContainerdView {
    /// Whether connecting found nothing at the socket's path.
    pub fn found_no_socket(&self) -> bool {
        self.calls
            .iter()
            .any(|c| c.method == Method::Connect && c.error.as_deref() == Some(NO_SOCKET))
    }

    /// The container records of a namespace, if containerd listed them.
    pub fn containers(&self, namespace: &str) -> Option<&BTreeSet<String>> {
        self.namespaces.get(namespace)?.containers.as_ref()
    }

    /// The file names (in CRI's netns directory) of the network namespaces
    /// the sandbox records of `namespace` name. A path is compared by its
    /// name there: `/var/run/netns` and `/run/netns` are one directory.
    pub fn netns_files_named(
        &self,
        namespace: &str,
    ) -> std::collections::HashSet<std::ffi::OsString> {
        self.namespaces
            .get(namespace)
            .into_iter()
            .flat_map(|ns| ns.netns_paths.values())
            .filter_map(|path| {
                std::path::Path::new(path)
                    .file_name()
                    .map(|n| n.to_os_string())
            })
            .collect()
    }

    /// When containerd's sandbox store says sandbox `id` of a namespace
    /// was created, if it listed it.
    pub fn sandbox_created(
        &self,
        namespace: &str,
        id: &str,
    ) -> Option<crate::model::cri_status::UnixNanos> {
        self.namespaces
            .get(namespace)?
            .sandboxes_created
            .as_ref()?
            .get(id)
            .copied()
    }

    /// The naming labels of a container record, if containerd listed it.
    pub fn labels(&self, namespace: &str, id: &str) -> Option<&BTreeMap<String, String>> {
        self.namespaces.get(namespace)?.labels.get(id)
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CriView {
    #[serde(with = "crate::model::path_json")]
    pub address: PathBuf,
    pub runtime_version: Option<String>,
    pub sandboxes: Option<Vec<CriItem>>,
    pub containers: Option<Vec<CriItem>>,
    /// One ContainerStatus per container known on disk.
    pub statuses: Vec<StatusProbe>,
    /// CRI's own record of the containers it lists RUNNING while
    /// containerd's task does not run, each from its ContainerStatus
    /// (verbose: the pid is only in its info): asked only when CRI's store
    /// could not be read (a `kubectl debug node` pod sees containerd's
    /// processes but not its root) and only of the proven daemon. The zombie
    /// check judges them as it judges the status files. Each has no
    /// `status_path` ([`crate::model::CriContainer::from_status_file`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub said_running: Option<Vec<crate::model::CriContainer>>,
    /// CRI's `NetworkReady` condition, from its Status (`None`: no answer,
    /// or no such condition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<CriCondition>,
    /// Its CNI setup, from the same Status (verbose), asked only of the
    /// proven daemon; or why there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cni_config: Option<crate::model::CriCniConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cni_config_unread: Option<String>,
    /// containerd's root and state as CRI says its daemon has them, from
    /// the same Status (verbose), asked only of the proven daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirs: Option<CriDirs>,
    /// CRI's settings as its own config says them, from the same Status
    /// (verbose), asked only of the proven daemon; taken with `dirs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub said: Option<CriSaid>,
    #[serde(serialize_with = "bare_calls", deserialize_with = "cri_calls")]
    pub calls: Vec<ApiCall>,
}

/// containerd's root and state as CRI's own config says the running
/// daemon has them (see [`crate::peers::cri_dirs`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CriDirs {
    #[serde(with = "crate::model::path_json")]
    pub root: PathBuf,
    #[serde(with = "crate::model::path_json")]
    pub state: PathBuf,
}

/// CRI's settings that nodectl also reads from containerd's config, as
/// CRI's own config says them (see [`crate::peers::cri_dirs`]): `None`
/// where the daemon's line does not say one.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CriSaid {
    /// `netnsMountsUnderStateDir`: where CRI mounts pods' network
    /// namespaces (every line says it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns_mounts_under_state_dir: Option<bool>,
    /// The snapshotter CRI uses for images, `containerd.snapshotter`
    /// (1.x says it; 2.x's CRI config has none, its images plugin holds
    /// it). Empty: containerd's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshotter: Option<String>,
}

/// A condition of CRI's Status. containerd's CRI sets `NetworkReady` false
/// while it has no CNI network loaded (reason `NetworkPluginNotReady`,
/// message "cni plugin not initialized" or the load's error): then every
/// RunPodSandbox fails the same way.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CriCondition {
    pub status: bool,
    pub reason: String,
    pub message: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CriItem {
    pub id: String,
    /// For containers, the sandbox they belong to.
    pub sandbox_id: Option<String>,
    pub state: CriApiState,
    /// `metadata.name`: the pod's name for a sandbox, the container's for a
    /// container.
    #[serde(default)]
    pub name: Option<String>,
    /// `metadata.namespace`: the pod's namespace (sandboxes only).
    #[serde(default)]
    pub namespace: Option<String>,
    /// The naming labels (see [`crate::model::name_labels`]).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// `metadata.uid`: the pod's uid (sandboxes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// `created_at` (unix ns), when CRI gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<crate::model::cri_status::UnixNanos>,
}

impl CriView {
    /// The pod uids of every sandbox CRI lists, whatever its state; `None`
    /// when its list did not answer.
    pub fn pod_uids(&self) -> Option<std::collections::HashSet<&str>> {
        let sandboxes = self.sandboxes.as_ref()?;
        Some(sandboxes.iter().filter_map(|s| s.uid.as_deref()).collect())
    }

    /// CRI's lists by id, built once for all the ids a check asks about:
    /// on a node of tens of thousands of containers, a search of the lists
    /// per id made a check quadratic.
    pub fn index(&self) -> CriIndex<'_> {
        CriIndex {
            sandboxes: first_by_id(self.sandboxes.iter().flatten()),
            containers: first_by_id(self.containers.iter().flatten()),
        }
    }
}

/// The first item of each id, as a search of the list in order finds it.
fn first_by_id<'a>(items: impl Iterator<Item = &'a CriItem>) -> HashMap<&'a str, &'a CriItem> {
    let mut by_id = HashMap::new();
    for item in items {
        by_id.entry(item.id.as_str()).or_insert(item);
    }
    by_id
}

/// CRI's sandboxes and containers by id ([`CriView::index`]).
pub struct CriIndex<'a> {
    sandboxes: HashMap<&'a str, &'a CriItem>,
    containers: HashMap<&'a str, &'a CriItem>,
}

impl<'a> CriIndex<'a> {
    fn sandbox(&self, id: &str) -> Option<&'a CriItem> {
        self.sandboxes.get(id).copied()
    }

    pub fn is_sandbox(&self, id: &str) -> bool {
        self.sandbox(id).is_some()
    }

    /// The names CRI gives a sandbox or container it lists: its metadata,
    /// else its labels; a container's pod names are its sandbox's.
    pub fn names_of(&self, id: &str) -> Option<PodRef> {
        // A sandbox's labels are its pod's, any key its author chose: only
        // the pod names count.
        let pod = |sandbox: &CriItem| {
            let labels = PodRef::from_labels(&sandbox.labels);
            PodRef {
                pod_namespace: sandbox.namespace.clone().or(labels.pod_namespace),
                pod_name: sandbox.name.clone().or(labels.pod_name),
                container_name: None,
            }
        };
        if let Some(sandbox) = self.sandbox(id) {
            return Some(pod(sandbox));
        }
        let container = self.containers.get(id)?;
        let pod = container
            .sandbox_id
            .as_deref()
            .and_then(|sandbox| self.sandbox(sandbox))
            .map(pod)
            .unwrap_or_default();
        let names = PodRef {
            container_name: container.name.clone(),
            ..pod
        };
        Some(names.or(PodRef::from_labels(&container.labels)))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StatusProbe {
    pub id: String,
    #[serde(serialize_with = "bare_call", deserialize_with = "cri_call")]
    pub call: ApiCall,
    pub state: Option<CriApiState>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::api::Api;

    fn call(api: Api, method: Method, target: Option<&str>) -> ApiCall {
        ApiCall {
            api,
            method,
            target: target.map(str::to_string),
            latency_ms: 1.5,
            error: Some("down".to_string()),
            timed_out: true,
        }
    }

    #[test]
    fn a_report_names_the_api_and_a_view_does_not() {
        let status = call(Api::Cri, Method::ContainerStatus, Some("abc"));
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["call"], "cri ContainerStatus abc");
        assert_eq!(serde_json::from_value::<ApiCall>(json).unwrap(), status);

        let view = CriView {
            calls: vec![call(Api::Cri, Method::Connect, None)],
            statuses: vec![StatusProbe {
                id: "abc".to_string(),
                call: status.clone(),
                state: None,
            }],
            ..CriView::default()
        };
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["calls"][0]["call"], "connect");
        assert_eq!(json["statuses"][0]["call"]["call"], "ContainerStatus abc");
        assert_eq!(serde_json::from_value::<CriView>(json).unwrap(), view);

        let view = ContainerdView {
            calls: vec![call(Api::Containerd, Method::TasksList, Some("k8s.io"))],
            ..ContainerdView::default()
        };
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["calls"][0]["call"], "Tasks.List k8s.io");
        assert_eq!(
            serde_json::from_value::<ContainerdView>(json).unwrap(),
            view
        );
    }

    #[test]
    fn states_are_written_as_cri_and_containerd_name_them() {
        let all = CriApiState::NAMED
            .into_iter()
            .chain([CriApiState::Unrecognised(7)]);
        let names: Vec<String> = all.clone().map(|s| s.to_string()).collect();
        assert_eq!(
            names,
            [
                "CONTAINER_CREATED",
                "CONTAINER_RUNNING",
                "CONTAINER_EXITED",
                "CONTAINER_UNKNOWN",
                "SANDBOX_READY",
                "SANDBOX_NOTREADY",
                "state 7"
            ]
        );
        for state in all {
            let json = serde_json::to_value(state).unwrap();
            assert_eq!(json, serde_json::Value::from(state.to_string()));
            assert_eq!(serde_json::from_value::<CriApiState>(json).unwrap(), state);
        }
        let all = TaskStatus::NAMED
            .into_iter()
            .chain([TaskStatus::Unrecognised(9)]);
        let names: Vec<String> = all.clone().map(|s| s.to_string()).collect();
        assert_eq!(
            names,
            ["unknown", "created", "running", "stopped", "paused", "pausing", "status 9"]
        );
        for status in all {
            let json = serde_json::to_value(status).unwrap();
            assert_eq!(serde_json::from_value::<TaskStatus>(json).unwrap(), status);
        }
        assert!(serde_json::from_str::<CriApiState>("\"RUNNING\"").is_err());
        assert!(serde_json::from_str::<TaskStatus>("\"status x\"").is_err());
    }

    #[test]
    fn a_call_nodectl_never_makes_does_not_read() {
        let wire = |call: &str| serde_json::json!({"call": call, "latency_ms": 1.0, "error": null});
        assert!(serde_json::from_value::<ApiCall>(wire("connect")).is_err());
        assert!(serde_json::from_value::<ApiCall>(wire("cri Frobnicate x")).is_err());
        let view = serde_json::json!({"address": "/s", "version": null, "namespaces": {},
                                      "calls": [wire("rm -rf /")]});
        assert!(serde_json::from_value::<ContainerdView>(view).is_err());
    }
}
