//! `leaked-ip`: an address host-local holds for a pod sandbox that no
//! longer exists.
//!
//! CRI gives a sandbox its address through CNI (ADD) and takes it back in
//! the sandbox's teardown (DEL), which host-local answers by removing the
//! file `<dataDir>/<network>/<ip>` holding the sandbox's id. When DEL
//! failed or never ran (a plugin of the chain missing or failing, as in
//! containerd#12130; containerd killed or restarted in between; a
//! RunPodSandbox that failed after the network was set up), the file
//! outlives the sandbox, and containerd has no CNI garbage collection to
//! find it later (#12130, #5768). Once the range is used up, every new pod
//! on the node fails with "failed to allocate for range 0: no IP addresses
//! available in range set".
//!
//! Only the networks CRI loads are judged (see `CniView::cri_networks`):
//! CRI sets pods up with the first `max_conf_num` configs of its
//! `conf_dir` alone, and another network's reservations there belong to
//! whoever else uses CNI.
//!
//! A sandbox is gone only when containerd's records say so (its sandbox is
//! a container of CRI's namespace there), never by the files alone; when
//! CRI's own list answered, it must not list it either; nothing on disk
//! (CRI's sandbox directories, a shim started for it) may refer to it.

use std::collections::HashSet;

use serde::Serialize;
use serde_json::Value;

use crate::checks::settings::Settings;
use crate::checks::shared::{served_ids, short};
use crate::model::{
    timestamp, Basis, CniNetwork, Finding, IpReservation, Kind, Severity, Snapshot, CRI_NAMESPACE,
};

#[derive(Serialize)]
pub struct Evidence {
    pub ip: String,
    pub network: String,
    /// The sandbox it was given to.
    pub sandbox_id: String,
    pub ifname: Option<String>,
    /// host-local's reservation file.
    pub file: String,
    pub reserved_at: Value,
    pub age_seconds: f64,
    /// The pod, from libcni's result cache, when it kept it.
    pub pod_namespace: Option<String>,
    pub pod_name: Option<String>,
    /// Addresses the network holds reserved, and how many it has.
    pub network_reserved: usize,
    pub network_capacity: Option<u64>,
    /// How "no sandbox" was established: containerd's records (and CRI's
    /// list when it answered), never the files alone.
    pub basis: Basis,
}

/// Every reservation older than the grace whose sandbox neither API knows.
/// Without containerd's records of CRI's namespace nothing is judged: a
/// file alone cannot tell a leak from a sandbox being set up.
pub fn check(snapshot: &Snapshot, settings: &Settings) -> Vec<Finding> {
    leaked(snapshot, settings)
        .into_iter()
        .map(|(network, reservation)| finding(snapshot, network, reservation))
        .collect()
}

/// The leaked reservations of `snapshot`, each with its network: what
/// [`check`] reports and what a release re-judges on a fresh look.
pub fn leaked<'a>(
    snapshot: &'a Snapshot,
    settings: &Settings,
) -> Vec<(&'a CniNetwork, &'a IpReservation)> {
    let Some(cni) = &snapshot.cni else {
        return Vec::new();
    };
    let Some(records) = snapshot
        .containerd
        .as_ref()
        .and_then(|view| view.containers(CRI_NAMESPACE))
    else {
        return Vec::new();
    };
    let cri_listed: Option<HashSet<&str>> = snapshot
        .cri
        .as_ref()
        .and_then(|cri| cri.sandboxes.as_ref())
        .map(|sandboxes| sandboxes.iter().map(|s| s.id.as_str()).collect());
    let served = served_ids(snapshot);
    let known = |id: &str| {
        records.contains(id)
            || cri_listed
                .as_ref()
                .is_some_and(|listed| listed.contains(id))
            || snapshot.cri_sandboxes.contains(id)
            || served.contains(id)
    };
    // Only CRI's networks: another CNI user's addresses in the same
    // directory (podman's, a second network CRI does not load) are held
    // for ids containerd never had, and are not its to judge.
    cni.cri_networks()
        .flat_map(|network| network.reservations.iter().map(move |r| (network, r)))
        .filter(|(_, reservation)| {
            let old_enough = snapshot.is_older_than(reservation.reserved_at, settings.ip_grace);
            !reservation.container_id.is_empty() && old_enough && !known(&reservation.container_id)
        })
        .collect()
}

fn finding(snapshot: &Snapshot, network: &CniNetwork, reservation: &IpReservation) -> Finding {
    let evidence = Evidence {
        ip: reservation.ip.clone(),
        network: network.name.clone(),
        sandbox_id: reservation.container_id.clone(),
        ifname: reservation.ifname.clone(),
        file: network.store.join(&reservation.ip).display().to_string(),
        reserved_at: timestamp(reservation.reserved_at),
        age_seconds: snapshot.seconds_since(reservation.reserved_at),
        pod_namespace: reservation.pod_namespace.clone(),
        pod_name: reservation.pod_name.clone(),
        network_reserved: network.reservations.len(),
        network_capacity: network.capacity,
        basis: Basis::ContainerdApi,
    };
    let pod = match (&evidence.pod_namespace, &evidence.pod_name) {
        (Some(namespace), Some(name)) => format!(" (pod {namespace}/{name})"),
        (None, Some(name)) => format!(" (pod {name})"),
        _ => String::new(),
    };
    let use_of_range = match network.capacity {
        Some(capacity) => format!(
            "; {} of its {capacity} addresses are reserved",
            evidence.network_reserved
        ),
        None => String::new(),
    };
    Finding {
        kind: Kind::LeakedIp,
        severity: Severity::Warning,
        id: reservation.container_id.clone(),
        summary: format!(
            "{} of network {} is held for sandbox {}{pod}, which no longer exists{use_of_range}",
            evidence.ip,
            evidence.network,
            short(&evidence.sandbox_id)
        ),
        cause: "The pod's network teardown (CNI DEL) failed or never ran: a plugin of the \
                chain missing or failing, containerd killed or restarted in between, or a \
                RunPodSandbox that failed after its network was set up. host-local keeps the \
                address until DEL comes, and containerd has no CNI garbage collection \
                (containerd#12130), so it stays reserved. Once the range is used up, every \
                new pod on the node fails with \"failed to allocate for range 0: no IP \
                addresses available in range set\"."
            .to_string(),
        remedy: format!(
            "Check that no pod uses it (`crictl pods --id {id}` lists nothing), then \
             release it as host-local does, under the network's lock: `flock {lock} rm {file}`. \
             Then find why DEL failed in containerd's log (\"Failed to destroy network for \
             sandbox\").",
            id = short(&evidence.sandbox_id),
            lock = network.store.join("lock").display(),
            file = evidence.file,
        ),
        evidence: serde_json::to_value(&evidence).unwrap_or(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{CniView, CriView};
    use std::path::PathBuf;
    use std::time::Duration;

    fn reserved(ip: &str, id: &str, at: i64) -> IpReservation {
        IpReservation {
            ip: ip.to_string(),
            container_id: id.to_string(),
            ifname: Some("eth0".to_string()),
            reserved_at: at,
            pod_namespace: Some("shop".to_string()),
            pod_name: Some("cart".to_string()),
        }
    }

    /// A node whose network `pods` (a /29: 5 addresses) holds `reservations`,
    /// and whose containerd knows the sandboxes `live`.
    fn node(reservations: Vec<IpReservation>, live: &[String]) -> Snapshot {
        let mut s = snapshot();
        with_records(&mut s, live);
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
                reservations,
                loaded_by_cri: true,
            }],
        });
        s
    }

    const HOUR: i64 = 3600 * SEC;

    #[test]
    fn an_address_held_for_a_sandbox_containerd_no_longer_has_is_leaked() {
        let s = node(
            vec![
                reserved("10.251.0.2", &id('a'), NOW - HOUR),
                reserved("10.251.0.3", &id('b'), NOW - HOUR),
            ],
            &[id('b')],
        );
        let findings = check(&s, &Settings::default());
        assert_eq!(findings.len(), 1, "{findings:?}");
        let f = &findings[0];
        assert_eq!((f.kind, f.id.as_str()), (Kind::LeakedIp, id('a').as_str()));
        let e = &f.evidence;
        assert_eq!(e["ip"], "10.251.0.2");
        assert_eq!(e["network"], "pods");
        assert_eq!(e["file"], "/var/lib/cni/networks/pods/10.251.0.2");
        assert_eq!(
            (e["pod_namespace"].as_str(), e["pod_name"].as_str()),
            (Some("shop"), Some("cart"))
        );
        assert_eq!(
            (
                e["network_reserved"].as_u64(),
                e["network_capacity"].as_u64()
            ),
            (Some(2), Some(5))
        );
        assert!(
            f.summary.contains("pod shop/cart") && f.summary.contains("2 of its 5"),
            "{}",
            f.summary
        );
        assert!(
            f.remedy.contains(
                "flock /var/lib/cni/networks/pods/lock rm /var/lib/cni/networks/pods/10.251.0.2"
            ),
            "{}",
            f.remedy
        );
        assert!(f.cause.contains("no IP addresses available in range set"));
    }

    #[test]
    fn another_network_s_addresses_are_never_leaked() {
        let mut s = node(vec![reserved("10.251.0.2", &id('a'), NOW - HOUR)], &[]);
        let podman = CniNetwork {
            name: "podman".to_string(),
            conf_file: PathBuf::from("/etc/cni/net.d/87-podman.conflist"),
            store: PathBuf::from("/var/lib/cni/networks/podman"),
            capacity: Some(5),
            reservations: vec![reserved("10.88.9.2", &id('p'), NOW - HOUR)],
            loaded_by_cri: false,
        };
        s.cni.as_mut().unwrap().networks.push(podman.clone());
        let ids = |s: &Snapshot| -> Vec<String> {
            check(s, &Settings::default())
                .into_iter()
                .map(|f| f.id)
                .collect()
        };
        assert_eq!(ids(&s), [id('a')], "CRI's network alone is judged");
        // A store CRI's network shares with another's: told apart by
        // nothing, judged not at all.
        let cni = s.cni.as_mut().unwrap();
        cni.networks[1].store = cni.networks[0].store.clone();
        assert!(ids(&s).is_empty());
        // No network CRI loads (go-cni fails on the directory): none.
        let mut s = node(vec![reserved("10.251.0.2", &id('a'), NOW - HOUR)], &[]);
        s.cni.as_mut().unwrap().networks[0].loaded_by_cri = false;
        assert!(ids(&s).is_empty());
    }

    #[test]
    fn a_sandbox_anything_still_refers_to_is_not_leaked() {
        let reservations = || vec![reserved("10.251.0.2", &id('a'), NOW - HOUR)];
        // Listed by CRI though containerd's list missed it.
        let mut s = node(reservations(), &[]);
        s.cri = Some(CriView {
            sandboxes: Some(vec![cri_sandbox(&id('a'), "shop", "cart")]),
            ..CriView::default()
        });
        assert!(check(&s, &Settings::default()).is_empty());
        // CRI keeps its directory.
        let mut s = node(reservations(), &[]);
        s.cri_sandboxes.insert(id('a'));
        assert!(check(&s, &Settings::default()).is_empty());
        // A shim of ours was started for it.
        let mut s = node(reservations(), &[]);
        with_live_shim(&mut s, shim(40, &id('a'), ADDRESS, &["futex"]));
        assert!(check(&s, &Settings::default()).is_empty());
    }

    #[test]
    fn without_containerd_s_records_or_within_the_grace_nothing_is_called_leaked() {
        // The API did not answer: the file alone says nothing.
        let mut s = node(vec![reserved("10.251.0.2", &id('a'), NOW - HOUR)], &[]);
        s.containerd = None;
        assert!(check(&s, &Settings::default()).is_empty());
        // Reserved a moment ago: a sandbox being set up has its address
        // before its record.
        let s = node(vec![reserved("10.251.0.2", &id('a'), NOW - 10 * SEC)], &[]);
        assert!(check(&s, &Settings::default()).is_empty());
        let none = Settings {
            ip_grace: Duration::ZERO,
            ..Settings::default()
        };
        assert_eq!(check(&s, &none).len(), 1);
        // No CNI read: nothing to judge.
        let mut s = node(vec![reserved("10.251.0.2", &id('a'), NOW - HOUR)], &[]);
        s.cni = None;
        assert!(check(&s, &Settings::default()).is_empty());
    }
}
