//! `leaked-sandbox`: a pod sandbox CRI keeps NotReady, with no container,
//! long past the time a pod takes to start or stop.
//!
//! Every line writes a sandbox's record before its network: 1.x creates the
//! sandbox container (pkg/cri/server/sandbox_run.go) and 2.x the sandbox
//! store entry (internal/cri/server/sandbox_run.go) before the network
//! namespace and CNI ADD. When RunPodSandbox dies part way (containerd
//! killed or restarted while a pod starts: measured on every line, see
//! tests/leaked_sandbox_real.rs) or its clean-up fails, the record is
//! recovered NotReady on the next start, still holding the pod's network
//! namespace, its address and its name. kubelet removes a NotReady sandbox
//! with no containers only once its pod is gone or a newer sandbox
//! replaced it, and only if RemovePodSandbox succeeds; records that outlive
//! that pile up (containerd#7988; #12390: 36,250 of them made
//! ListPodSandbox exceed gRPC's message limit and the node fell over).
//!
//! Judged on CRI's own lists (sandboxes and containers, both answered),
//! never on files: a sandbox being started is NotReady with no containers
//! for a moment, hence the grace on its age.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::Value;

use crate::checks::settings::Settings;
use crate::checks::shared::short;
use crate::model::{
    timestamp, CniNetwork, CriApiState, CriItem, Finding, IpReservation, Kind, Severity, Snapshot,
    UnixNanos, CRI_NAMESPACE,
};

#[derive(Serialize)]
pub struct Evidence {
    pub sandbox_id: String,
    pub pod_namespace: Option<String>,
    pub pod_name: Option<String>,
    pub pod_uid: Option<String>,
    pub state: &'static str,
    pub created_at: Value,
    pub age_seconds: f64,
    /// Containers CRI lists in it: none, or it would not be reported.
    pub containers: usize,
    /// A sandbox of the same pod created after it: kubelet should have
    /// removed this one.
    pub superseded_by: Option<String>,
    /// What it still holds: the addresses host-local keeps for it
    /// (`<ip> (<network>)`), when CNI was read.
    pub addresses: Vec<String>,
}

/// The NotReady sandboxes of `snapshot` with no container, older than the
/// grace: what [`check`] reports and what a removal re-judges on a fresh
/// look. Nothing without both of CRI's lists.
pub fn leaked<'a>(snapshot: &'a Snapshot, settings: &Settings) -> Vec<&'a CriItem> {
    let Some(cri) = &snapshot.cri else {
        return Vec::new();
    };
    let (Some(sandboxes), Some(containers)) = (&cri.sandboxes, &cri.containers) else {
        return Vec::new();
    };
    // The sandboxes holding a container, a set built once for every
    // sandbox (tens of thousands on a node that piles them up: a search of
    // the containers per sandbox was quadratic).
    let holding: HashSet<&str> = containers
        .iter()
        .filter_map(|c| c.sandbox_id.as_deref())
        .collect();
    sandboxes
        .iter()
        .filter(|sandbox| sandbox.state == CriApiState::SandboxNotReady)
        .filter(|sandbox| {
            // No age known is no age: never called old enough.
            created_at(snapshot, sandbox)
                .is_some_and(|at| snapshot.is_older_than(at, settings.sandbox_grace))
        })
        .filter(|sandbox| !holding.contains(sandbox.id.as_str()))
        .collect()
}

pub fn check(snapshot: &Snapshot, settings: &Settings) -> Vec<Finding> {
    let joins = Joins::of(snapshot);
    leaked(snapshot, settings)
        .into_iter()
        .map(|sandbox| finding(snapshot, &joins, sandbox))
        .collect()
}

/// What a finding is joined to, built once for all of them: CRI's
/// sandboxes by pod uid and host-local's reservations of CRI's networks by
/// sandbox, each in order. Searched through per finding, thousands of
/// leaked sandboxes (containerd#12390 had 36,250) made the check quadratic.
struct Joins<'a> {
    by_uid: HashMap<&'a str, Vec<&'a CriItem>>,
    reserved: HashMap<&'a str, Vec<(&'a CniNetwork, &'a IpReservation)>>,
}

impl<'a> Joins<'a> {
    fn of(snapshot: &'a Snapshot) -> Joins<'a> {
        let mut joins = Joins {
            by_uid: HashMap::new(),
            reserved: HashMap::new(),
        };
        let sandboxes = snapshot
            .cri
            .iter()
            .flat_map(|cri| cri.sandboxes.iter().flatten());
        for sandbox in sandboxes {
            if let Some(uid) = sandbox.uid.as_deref() {
                joins.by_uid.entry(uid).or_default().push(sandbox);
            }
        }
        for network in snapshot.cni.iter().flat_map(|cni| cni.cri_networks()) {
            for reservation in &network.reservations {
                let by = joins.reserved.entry(&reservation.container_id);
                by.or_default().push((network, reservation));
            }
        }
        joins
    }
}

/// When `sandbox` was created: as CRI's list says, else as containerd's
/// sandbox store does. 2.x's CRI lists a sandbox it recovered from the
/// store (one whose start was cut short) with no creation time.
fn created_at(snapshot: &Snapshot, sandbox: &CriItem) -> Option<UnixNanos> {
    let stored = || {
        let view = snapshot.containerd.as_ref()?;
        view.sandbox_created(CRI_NAMESPACE, &sandbox.id)
    };
    sandbox.created_at.or_else(stored).filter(|&at| at > 0)
}

/// The newest sandbox of the same pod (by uid) created after `sandbox`.
fn superseded_by<'a>(
    snapshot: &Snapshot,
    joins: &Joins<'a>,
    sandbox: &CriItem,
) -> Option<&'a CriItem> {
    let uid = sandbox.uid.as_deref()?;
    let created = created_at(snapshot, sandbox)?;
    joins
        .by_uid
        .get(uid)?
        .iter()
        .copied()
        .filter(|other| other.id != sandbox.id)
        .filter(|other| created_at(snapshot, other).is_some_and(|at| at > created))
        .max_by_key(|other| created_at(snapshot, other))
}

fn addresses(joins: &Joins, sandbox_id: &str) -> Vec<String> {
    joins
        .reserved
        .get(sandbox_id)
        .into_iter()
        .flatten()
        .map(|(network, r)| format!("{} ({})", r.ip, network.name))
        .collect()
}

fn finding(snapshot: &Snapshot, joins: &Joins, sandbox: &CriItem) -> Finding {
    let created_at = created_at(snapshot, sandbox).unwrap_or_default();
    let evidence = Evidence {
        sandbox_id: sandbox.id.clone(),
        pod_namespace: sandbox.namespace.clone(),
        pod_name: sandbox.name.clone(),
        pod_uid: sandbox.uid.clone(),
        state: "not-ready",
        created_at: timestamp(created_at),
        age_seconds: snapshot.seconds_since(created_at),
        containers: 0,
        superseded_by: superseded_by(snapshot, joins, sandbox).map(|s| s.id.clone()),
        addresses: addresses(joins, &sandbox.id),
    };
    let pod = match (&evidence.pod_namespace, &evidence.pod_name) {
        (Some(namespace), Some(name)) => format!(" (pod {namespace}/{name})"),
        (None, Some(name)) => format!(" (pod {name})"),
        _ => String::new(),
    };
    let mut summary = format!(
        "sandbox {}{pod} has been NotReady with no container since it was created {:.0} min ago",
        short(&sandbox.id),
        evidence.age_seconds / 60.0
    );
    if let Some(newer) = &evidence.superseded_by {
        summary.push_str(&format!("; its pod has a newer sandbox, {}", short(newer)));
    }
    if !evidence.addresses.is_empty() {
        summary.push_str(&format!("; it holds {}", evidence.addresses.join(", ")));
    }
    Finding {
        kind: Kind::LeakedSandbox,
        severity: Severity::Warning,
        id: sandbox.id.clone(),
        summary,
        cause: "Its RunPodSandbox ended part way (containerd killed or restarted while the \
                pod started, a CNI error) and its clean-up did not finish, or its teardown \
                failed: every line writes the sandbox's record before its network, so the \
                record is recovered NotReady and keeps the pod's network namespace, its \
                address and its name. kubelet removes such a sandbox only once its pod is \
                gone or replaced, and only if RemovePodSandbox succeeds; records left over \
                pile up (containerd#7988; #12390: thousands of them made ListPodSandbox \
                exceed gRPC's message limit)."
            .to_string(),
        remedy: format!(
            "Remove it through CRI, which tears its network down (CNI DEL) and frees its \
             namespace and address: `nodectl leaked-sandboxes --remove --yes`, or `crictl \
             stopp {id} && crictl rmp {id}`. kubelet starts a new sandbox if its pod still \
             exists. If the stop fails, containerd's log says why (\"Failed to destroy \
             network for sandbox\").",
            id = short(&sandbox.id)
        ),
        evidence: serde_json::to_value(&evidence).unwrap_or(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{
        CniNetwork, CniView, ContainerdView, CriView, IpReservation, NamespaceView,
    };
    use std::path::PathBuf;
    use std::time::Duration;

    const HOUR: i64 = 3600 * SEC;

    fn sandbox(which: char, state: CriApiState, created_at: i64) -> CriItem {
        CriItem {
            state,
            uid: Some("uid-cart".to_string()),
            created_at: Some(created_at),
            ..cri_sandbox(&id(which), "shop", "cart")
        }
    }

    fn node(sandboxes: Vec<CriItem>, containers: Vec<CriItem>) -> Snapshot {
        let mut s = snapshot();
        s.cri = Some(CriView {
            sandboxes: Some(sandboxes),
            containers: Some(containers),
            ..CriView::default()
        });
        s
    }

    #[test]
    fn a_not_ready_sandbox_with_no_container_past_the_grace_is_leaked() {
        let mut s = node(
            vec![
                sandbox('a', CriApiState::SandboxNotReady, NOW - HOUR),
                sandbox('b', CriApiState::SandboxReady, NOW - HOUR / 2),
            ],
            vec![],
        );
        s.cni = Some(CniView {
            conf_dir: PathBuf::from("/etc/cni/net.d"),
            attachments: Vec::new(),
            pending: Vec::new(),
            networks_from: Default::default(),
            cri_networks: vec!["pods".to_string()],
            networks: vec![CniNetwork {
                name: "pods".to_string(),
                conf_file: PathBuf::from("/etc/cni/net.d/10-pods.conflist"),
                store: PathBuf::from("/var/lib/cni/networks/pods"),
                capacity: Some(5),
                reservations: vec![IpReservation {
                    ip: "10.251.0.3".to_string(),
                    container_id: id('a'),
                    ifname: None,
                    reserved_at: NOW - HOUR,
                    pod_namespace: None,
                    pod_name: None,
                }],
                loaded_by_cri: true,
            }],
        });
        let findings = check(&s, &Settings::default());
        assert_eq!(findings.len(), 1, "{findings:?}");
        let f = &findings[0];
        assert_eq!(
            (f.kind, f.id.as_str()),
            (Kind::LeakedSandbox, id('a').as_str())
        );
        let e = &f.evidence;
        assert_eq!(e["pod_namespace"], "shop");
        assert_eq!(e["pod_name"], "cart");
        assert_eq!(e["pod_uid"], "uid-cart");
        assert_eq!(e["age_seconds"], 3600.0);
        assert_eq!(e["superseded_by"], id('b'));
        assert_eq!(e["addresses"][0], "10.251.0.3 (pods)");
        assert!(
            f.summary.contains("pod shop/cart")
                && f.summary.contains("60 min")
                && f.summary.contains("newer sandbox")
                && f.summary.contains("10.251.0.3 (pods)"),
            "{}",
            f.summary
        );
        assert!(f.remedy.contains("crictl stopp"), "{}", f.remedy);
    }

    #[test]
    fn the_newest_sandbox_of_its_own_pod_supersedes_it() {
        let other_pod = CriItem {
            uid: Some("uid-other".to_string()),
            ..sandbox('d', CriApiState::SandboxReady, NOW - HOUR / 2)
        };
        let s = node(
            vec![
                sandbox('a', CriApiState::SandboxNotReady, NOW - 3 * HOUR),
                sandbox('c', CriApiState::SandboxReady, NOW - HOUR),
                sandbox('b', CriApiState::SandboxReady, NOW - 2 * HOUR),
                other_pod,
            ],
            vec![],
        );
        let findings = check(&s, &Settings::default());
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(findings[0].evidence["superseded_by"], id('c'));
    }

    #[test]
    fn a_sandbox_ready_holding_a_container_or_within_the_grace_is_not() {
        let old = NOW - HOUR;
        // Ready.
        let s = node(vec![sandbox('a', CriApiState::SandboxReady, old)], vec![]);
        assert!(check(&s, &Settings::default()).is_empty());
        // NotReady, but a container (even exited) is still in it: a
        // finished pod kubelet keeps.
        let exited = cri_container(&id('c'), &id('a'), "app", CriApiState::ContainerExited);
        let s = node(
            vec![sandbox('a', CriApiState::SandboxNotReady, old)],
            vec![exited],
        );
        assert!(check(&s, &Settings::default()).is_empty());
        // Created a moment ago: a pod starting.
        let s = node(
            vec![sandbox('a', CriApiState::SandboxNotReady, NOW - 10 * SEC)],
            vec![],
        );
        assert!(check(&s, &Settings::default()).is_empty());
        let none = Settings {
            sandbox_grace: Duration::ZERO,
            ..Settings::default()
        };
        assert_eq!(check(&s, &none).len(), 1);
        // No age from CRI nor containerd's sandbox store: never old enough.
        let mut unknown = sandbox('a', CriApiState::SandboxNotReady, old);
        unknown.created_at = None;
        let s = node(vec![unknown], vec![]);
        assert!(check(&s, &none).is_empty());
    }

    #[test]
    fn without_cri_s_creation_time_the_sandbox_store_s_ages_it() {
        // 2.x lists a sandbox it recovered from its store with no time.
        let mut recovered = sandbox('a', CriApiState::SandboxNotReady, 0);
        recovered.created_at = None;
        let mut s = node(vec![recovered], vec![]);
        let mut view = ContainerdView::default();
        view.namespaces.insert(
            CRI_NAMESPACE.to_string(),
            NamespaceView {
                sandboxes_created: Some([(id('a'), NOW - HOUR)].into()),
                ..NamespaceView::default()
            },
        );
        s.containerd = Some(view);
        let findings = check(&s, &Settings::default());
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(findings[0].evidence["age_seconds"], 3600.0);
    }

    #[test]
    fn without_both_of_cri_s_lists_nothing_is_judged() {
        let old = NOW - HOUR;
        let mut s = node(
            vec![sandbox('a', CriApiState::SandboxNotReady, old)],
            vec![],
        );
        s.cri.as_mut().unwrap().containers = None;
        assert!(check(&s, &Settings::default()).is_empty());
        s.cri = None;
        assert!(check(&s, &Settings::default()).is_empty());
    }
}
