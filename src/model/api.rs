//! Every call nodectl makes to the two APIs (containerd's and CRI's): to
//! what, how long it took and how it ended, and how a call is written (with
//! its API in a report, without it in the view of one API). What the APIs
//! answered is in `api_views.rs`; the two change for different reasons.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Which API a call went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Api {
    Containerd,
    Cri,
}

impl Api {
    pub const ALL: [Api; 2] = [Api::Containerd, Api::Cri];

    pub fn as_str(self) -> &'static str {
        match self {
            Api::Containerd => "containerd",
            Api::Cri => "cri",
        }
    }
}

/// The calls nodectl makes. A name of nodectl's own, never the node's: safe
/// as a Prometheus label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    /// Opening the socket.
    Connect,
    Version,
    /// containerd's Containers.List, per namespace.
    ContainersList,
    /// containerd's Tasks.List, per namespace.
    TasksList,
    /// containerd's sandbox Store.List, per namespace (1.7 and later).
    SandboxesList,
    /// containerd's Snapshots.List, per snapshotter.
    SnapshotsList,
    /// containerd's Leases.List, per namespace.
    LeasesList,
    /// containerd's Leases.ListResources, per lease.
    LeasesListResources,
    /// CRI's ListPodSandbox.
    ListPodSandbox,
    /// CRI's ListContainers.
    ListContainers,
    /// CRI's ContainerStatus, per container.
    ContainerStatus,
    /// CRI's Status: the runtime's and the network's conditions.
    Status,
}

impl Method {
    pub const ALL: [Method; 12] = [
        Method::Connect,
        Method::Version,
        Method::ContainersList,
        Method::TasksList,
        Method::SandboxesList,
        Method::SnapshotsList,
        Method::LeasesList,
        Method::LeasesListResources,
        Method::ListPodSandbox,
        Method::ListContainers,
        Method::ContainerStatus,
        Method::Status,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Method::Connect => "connect",
            Method::Version => "Version",
            Method::ContainersList => "Containers.List",
            Method::TasksList => "Tasks.List",
            Method::SandboxesList => "Sandboxes.List",
            Method::SnapshotsList => "Snapshots.List",
            Method::LeasesList => "Leases.List",
            Method::LeasesListResources => "Leases.ListResources",
            Method::ListPodSandbox => "ListPodSandbox",
            Method::ListContainers => "ListContainers",
            Method::ContainerStatus => "ContainerStatus",
            Method::Status => "Status",
        }
    }

    fn parse(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == name)
    }

    /// A failure of this call means the whole API is unreachable.
    pub fn reaches_the_api(self) -> bool {
        matches!(self, Method::Connect | Method::Version)
    }
}

/// One API call: to what, how long it took and how it ended.
///
/// In a report's JSON, `call` is `<api> <method>[ <target>]`, e.g. `cri
/// ContainerStatus <id>`; inside the view of one API (in the archive) it is
/// `<method>[ <target>]`, the API being the view's.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(into = "WireCall")]
pub struct ApiCall {
    pub api: Api,
    pub method: Method,
    /// What the call was about: the namespace of a List, the container of a
    /// ContainerStatus.
    pub target: Option<String>,
    pub latency_ms: f64,
    /// `None` when it answered; `timed_out` tells a missed deadline apart.
    pub error: Option<String>,
    pub timed_out: bool,
}

impl ApiCall {
    /// The first of `calls` that did not reach the API (its connect or its
    /// Version failed): the API did not answer at all.
    pub fn first_unanswered(calls: &[ApiCall]) -> Option<&ApiCall> {
        calls
            .iter()
            .find(|c| c.method.reaches_the_api() && c.error.is_some())
    }

    /// The call without its API: `ContainerStatus <id>`, `connect`.
    pub fn text(&self) -> String {
        match &self.target {
            Some(target) => format!("{} {target}", self.method.as_str()),
            None => self.method.as_str().to_string(),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct WireCall {
    call: String,
    latency_ms: f64,
    error: Option<String>,
    #[serde(default)]
    timed_out: bool,
}

impl From<ApiCall> for WireCall {
    fn from(call: ApiCall) -> WireCall {
        WireCall {
            call: format!("{} {}", call.api.as_str(), call.text()),
            latency_ms: call.latency_ms,
            error: call.error,
            timed_out: call.timed_out,
        }
    }
}

impl WireCall {
    /// As a view of one API writes it: without the API.
    fn bare(call: &ApiCall) -> WireCall {
        WireCall {
            call: call.text(),
            latency_ms: call.latency_ms,
            error: call.error.clone(),
            timed_out: call.timed_out,
        }
    }
}

impl WireCall {
    /// Reads `call` back; `api` is the one of the view it was found in, for
    /// archives that did not write it.
    fn into_call(self, api: Option<Api>) -> Result<ApiCall, String> {
        let (first, rest) = match self.call.split_once(' ') {
            Some((first, rest)) => (first, Some(rest)),
            None => (self.call.as_str(), None),
        };
        let named = Api::ALL.into_iter().find(|a| a.as_str() == first);
        let (api, text) = match (named, api) {
            (Some(named), _) => (named, rest.unwrap_or_default()),
            (None, Some(api)) => (api, self.call.as_str()),
            (None, None) => return Err(format!("API call {:?} names no API", self.call)),
        };
        let (method, target) = match text.split_once(' ') {
            Some((method, target)) => (method, Some(target.to_string())),
            None => (text, None),
        };
        let method = Method::parse(method)
            .ok_or_else(|| format!("API call {:?} is none nodectl makes", self.call))?;
        Ok(ApiCall {
            api,
            method,
            target,
            latency_ms: self.latency_ms,
            error: self.error,
            timed_out: self.timed_out,
        })
    }
}

impl<'de> Deserialize<'de> for ApiCall {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ApiCall, D::Error> {
        WireCall::deserialize(deserializer)?
            .into_call(None)
            .map_err(serde::de::Error::custom)
    }
}

// How a view of one API writes its calls and reads them back: without the
// API, which is the view's (`serialize_with`/`deserialize_with` in
// api_views.rs).

pub(super) fn bare_calls<S: Serializer>(calls: &[ApiCall], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(calls.iter().map(WireCall::bare))
}

pub(super) fn bare_call<S: Serializer>(call: &ApiCall, s: S) -> Result<S::Ok, S::Error> {
    WireCall::bare(call).serialize(s)
}

fn calls_of<'de, D: Deserializer<'de>>(api: Api, d: D) -> Result<Vec<ApiCall>, D::Error> {
    Vec::<WireCall>::deserialize(d)?
        .into_iter()
        .map(|wire| wire.into_call(Some(api)).map_err(serde::de::Error::custom))
        .collect()
}

pub(super) fn containerd_calls<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ApiCall>, D::Error> {
    calls_of(Api::Containerd, d)
}

pub(super) fn cri_calls<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ApiCall>, D::Error> {
    calls_of(Api::Cri, d)
}

pub(super) fn cri_call<'de, D: Deserializer<'de>>(d: D) -> Result<ApiCall, D::Error> {
    WireCall::deserialize(d)?
        .into_call(Some(Api::Cri))
        .map_err(serde::de::Error::custom)
}
