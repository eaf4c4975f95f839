//! containerd's snapshots, the leases that hold some of them and the
//! snapshot each container record uses, in one namespace: what
//! `leaked-snapshot` is judged on. Every call ends by one deadline.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use containerd_client::services::v1::containers_client::ContainersClient;
use containerd_client::services::v1::leases_client::LeasesClient;
use containerd_client::services::v1::snapshots::snapshots_client::SnapshotsClient;
use containerd_client::services::v1::snapshots::{self, ListSnapshotsRequest};
use containerd_client::services::v1::{ListContainersRequest, ListRequest, ListResourcesRequest};
use tokio::time::Instant;
use tonic::transport::Channel;

use crate::model::{
    Api, ApiCall, ContainerSnapshot, Gap, Lease, LeaseResource, Method, SnapshotInfo, SnapshotKind,
    SnapshotterView, Source, UnixNanos,
};
use crate::sources::api::{connect_recorded, connect_to_daemon, namespaced, status_text, timed};
use crate::sources::api_gaps;

/// Always asked, whatever the records and the config say: containerd's
/// default snapshotter on Linux, on every line.
pub const DEFAULT_SNAPSHOTTER: &str = "overlayfs";

/// Only the labels containerd's garbage collector reads are kept (roots,
/// references, back-references, expiry): the others are tenants' and
/// unbounded.
const GC_LABEL_PREFIX: &str = "containerd.io/gc.";

/// Lists, in `namespace`: the container records (their snapshotter and
/// key) and the leases first, then the snapshots of every snapshotter in
/// use (the records', `configured`, CRI's from the config, and
/// [`DEFAULT_SNAPSHOTTER`]) and each lease's resources.
pub async fn query(
    address: &Path,
    daemon: Option<i32>,
    namespace: &str,
    configured: Option<&str>,
    deadline: Instant,
) -> SnapshotterView {
    let mut view = SnapshotterView {
        address: address.to_path_buf(),
        namespace: namespace.to_string(),
        ..SnapshotterView::default()
    };
    let Some(channel) =
        connect_recorded(Api::Containerd, address, daemon, deadline, &mut view.calls).await
    else {
        return view;
    };

    let ns = Some(namespace);
    let containers = timed(
        (Api::Containerd, Method::ContainersList, ns),
        deadline,
        list_containers(channel.clone(), namespace),
    );
    let leases = timed(
        (Api::Containerd, Method::LeasesList, ns),
        deadline,
        list_leases(channel.clone(), namespace),
    );
    let ((containers, c_call), (leases, l_call)) = tokio::join!(containers, leases);
    view.calls.extend([c_call, l_call]);

    let mut snapshotters: BTreeSet<String> = containers
        .iter()
        .flatten()
        .map(|c| c.snapshotter.clone())
        .filter(|s| !s.is_empty())
        .collect();
    snapshotters.extend(configured.map(str::to_string));
    snapshotters.insert(DEFAULT_SNAPSHOTTER.to_string());
    view.containers = containers;

    let mut calls = tokio::task::JoinSet::new();
    for snapshotter in snapshotters {
        let (channel, namespace) = (channel.clone(), namespace.to_string());
        calls.spawn(async move {
            let target = Some(snapshotter.as_str());
            let call = (Api::Containerd, Method::SnapshotsList, target);
            let list = list_snapshots(channel, &namespace, &snapshotter);
            let (infos, call) = timed(call, deadline, list).await;
            (Answer::Snapshots(snapshotter, infos), call)
        });
    }
    let mut leases: BTreeMap<String, Lease> = leases
        .into_iter()
        .flatten()
        .map(|l| (l.id.clone(), l))
        .collect();
    for id in leases.keys().cloned() {
        let (channel, namespace) = (channel.clone(), namespace.to_string());
        calls.spawn(async move {
            let call = (
                Api::Containerd,
                Method::LeasesListResources,
                Some(id.as_str()),
            );
            let list = list_resources(channel, &namespace, &id);
            let (resources, call) = timed(call, deadline, list).await;
            (Answer::Resources(id, resources), call)
        });
    }
    while let Some(joined) = calls.join_next().await {
        // Every call is bounded by `timed`; a panicking task is the only error.
        let Ok((answer, call)) = joined else { continue };
        view.calls.push(call);
        match answer {
            Answer::Snapshots(snapshotter, infos) => {
                view.snapshots.insert(snapshotter, infos);
            }
            Answer::Resources(id, resources) => {
                if let Some(lease) = leases.get_mut(&id) {
                    lease.resources = resources;
                }
            }
        }
    }
    // Leases.List not answered: `None`, not an empty list (nothing held).
    if view
        .calls
        .iter()
        .any(|c| c.method == Method::LeasesList && c.error.is_none())
    {
        view.leases = Some(leases.into_values().collect());
    }
    view.calls.sort_by_key(ApiCall::text);
    view
}

/// Lists `snapshotter`'s snapshots too, in the view's namespace, when
/// `view` has no list of them: CRI's own word named the snapshotter it
/// uses, and neither the records nor the config as nodectl read it did
/// (a config its line merges apart). Over a connection of its own, to the
/// same daemon, by the same deadline; after the records and leases, as
/// [`query`] lists every snapshotter.
pub async fn list_also(
    view: &mut SnapshotterView,
    daemon: Option<i32>,
    snapshotter: &str,
    deadline: Instant,
) {
    if snapshotter.is_empty() || view.snapshots.contains_key(snapshotter) {
        return;
    }
    let address = view.address.clone();
    let connected =
        connect_recorded(Api::Containerd, &address, daemon, deadline, &mut view.calls).await;
    if let Some(channel) = connected {
        let call = (Api::Containerd, Method::SnapshotsList, Some(snapshotter));
        let list = list_snapshots(channel, &view.namespace, snapshotter);
        let (infos, call) = timed(call, deadline, list).await;
        view.calls.push(call);
        view.snapshots.insert(snapshotter.to_string(), infos);
    }
    view.calls.sort_by_key(ApiCall::text);
}

/// Gaps for what containerd did not answer.
pub fn gaps(view: &SnapshotterView, gaps: &mut Vec<Gap>) {
    api_gaps(Source::ContainerdApi, &view.address, &view.calls, gaps);
}

enum Answer {
    Snapshots(String, Option<Vec<SnapshotInfo>>),
    Resources(String, Option<Vec<LeaseResource>>),
}

fn gc_labels(labels: HashMap<String, String>) -> BTreeMap<String, String> {
    labels
        .into_iter()
        .filter(|(k, _)| k.starts_with(GC_LABEL_PREFIX))
        .collect()
}

/// A protobuf timestamp's (seconds, nanos) as Unix ns; 0 when absent.
fn nanos(at: Option<(i64, i32)>) -> UnixNanos {
    at.map_or(0, |(seconds, nanos)| {
        seconds
            .saturating_mul(1_000_000_000)
            .saturating_add(i64::from(nanos))
    })
}

async fn list_containers(
    channel: Channel,
    namespace: &str,
) -> Result<Vec<ContainerSnapshot>, String> {
    let request = namespaced(ListContainersRequest::default(), namespace)?;
    let response = ContainersClient::new(channel)
        .list(request)
        .await
        .map_err(status_text)?;
    Ok(response
        .into_inner()
        .containers
        .into_iter()
        .map(|c| ContainerSnapshot {
            id: c.id,
            snapshotter: c.snapshotter,
            snapshot_key: c.snapshot_key,
            labels: gc_labels(c.labels),
        })
        .collect())
}

async fn list_leases(channel: Channel, namespace: &str) -> Result<Vec<Lease>, String> {
    let request = namespaced(ListRequest::default(), namespace)?;
    let response = LeasesClient::new(channel)
        .list(request)
        .await
        .map_err(status_text)?;
    Ok(response
        .into_inner()
        .leases
        .into_iter()
        .map(|l| Lease {
            id: l.id,
            labels: gc_labels(l.labels),
            resources: None,
        })
        .collect())
}

async fn list_resources(
    channel: Channel,
    namespace: &str,
    id: &str,
) -> Result<Vec<LeaseResource>, String> {
    let message = ListResourcesRequest { id: id.to_string() };
    let request = namespaced(message, namespace)?;
    let response = LeasesClient::new(channel)
        .list_resources(request)
        .await
        .map_err(status_text)?;
    Ok(response
        .into_inner()
        .resources
        .into_iter()
        .map(|r| LeaseResource {
            r#type: r.r#type,
            id: r.id,
        })
        .collect())
}

async fn list_snapshots(
    channel: Channel,
    namespace: &str,
    snapshotter: &str,
) -> Result<Vec<SnapshotInfo>, String> {
    let message = ListSnapshotsRequest {
        snapshotter: snapshotter.to_string(),
        filters: Vec::new(),
    };
    let request = namespaced(message, namespace)?;
    let mut stream = SnapshotsClient::new(channel)
        .list(request)
        .await
        .map_err(status_text)?
        .into_inner();
    let mut infos = Vec::new();
    while let Some(page) = stream.message().await.map_err(status_text)? {
        infos.extend(page.info.into_iter().map(|i| SnapshotInfo {
            kind: kind(i.kind),
            key: i.name,
            parent: i.parent,
            created_at: nanos(i.created_at.map(|t| (t.seconds, t.nanos))),
            updated_at: nanos(i.updated_at.map(|t| (t.seconds, t.nanos))),
            labels: gc_labels(i.labels),
        }));
    }
    Ok(infos)
}

fn kind(code: i32) -> SnapshotKind {
    match snapshots::Kind::try_from(code) {
        Ok(snapshots::Kind::View) => SnapshotKind::View,
        Ok(snapshots::Kind::Active) => SnapshotKind::Active,
        Ok(snapshots::Kind::Committed) => SnapshotKind::Committed,
        _ => SnapshotKind::Unknown,
    }
}

/// Removes one snapshot (`Snapshots.Remove`, `(snapshotter, key)`) by
/// `deadline`, over a connection whose peer is the containerd `daemon`.
pub async fn remove(
    address: &Path,
    daemon: i32,
    namespace: &str,
    (snapshotter, key): (&str, &str),
    deadline: Instant,
) -> Result<(), String> {
    let call = async {
        let channel = connect_to_daemon(address, daemon).await?;
        let message = snapshots::RemoveSnapshotRequest {
            snapshotter: snapshotter.to_string(),
            key: key.to_string(),
        };
        SnapshotsClient::new(channel)
            .remove(namespaced(message, namespace)?)
            .await
            .map(|_| ())
            .map_err(status_text)
    };
    tokio::time::timeout_at(deadline, call)
        .await
        .unwrap_or_else(|_| Err("no answer before the deadline".to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_and_kinds_are_read_without_overflow() {
        assert_eq!(nanos(None), 0);
        assert_eq!(nanos(Some((2, 5))), 2_000_000_005);
        assert_eq!(nanos(Some((i64::MAX, 999))), i64::MAX);
        assert_eq!(kind(2), SnapshotKind::Active);
        assert_eq!(kind(3), SnapshotKind::Committed);
        assert_eq!(kind(1), SnapshotKind::View);
        assert_eq!(kind(42), SnapshotKind::Unknown);
    }

    #[test]
    fn only_the_labels_gc_reads_are_kept() {
        let labels = HashMap::from([
            ("containerd.io/gc.root".to_string(), "x".to_string()),
            ("tenant/huge".to_string(), "y".repeat(1000)),
        ]);
        assert_eq!(
            gc_labels(labels).into_keys().collect::<Vec<_>>(),
            ["containerd.io/gc.root"]
        );
    }
}
