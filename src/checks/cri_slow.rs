//! `cri-slow`: CRI answers slowly, and which container's lock is the cause.
//!
//! CRI reads each container's status under that container's lock, and
//! UpdateContainerResources keeps the lock while task.Update waits on the
//! shim. A shim stuck in umount2 thus makes ContainerStatus of that one
//! container hang, and every ListContainers with it; kubelet's relist then
//! passes 3 min and the node goes NotReady (seed 001).

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::checks::shared::ShimIndex;
use crate::checks::shim_blocked;
use crate::model::{ApiCall, CriContainer, Finding, Kind, Method, Severity, Snapshot};

pub fn check(snapshot: &Snapshot, slow: Duration) -> Vec<Finding> {
    let Some(cri) = &snapshot.cri else {
        return Vec::new();
    };
    // An API that does not answer at all is api-unreachable, not slow.
    let answered = |method: Method| {
        cri.calls
            .iter()
            .any(|c| c.method == method && c.error.is_none())
    };
    if !answered(Method::Version) {
        return Vec::new();
    }
    let slow_ms = slow.as_secs_f64() * 1e3;
    let is_slow = |call: &ApiCall| call.timed_out || call.latency_ms > slow_ms;
    let list = cri
        .calls
        .iter()
        .find(|c| c.method == Method::ListContainers);
    let list_evidence = list.map(|c| json!({"latency_ms": c.latency_ms, "timed_out": c.timed_out}));

    let shims = ShimIndex::new(snapshot);
    let names = snapshot.names();
    // The first container of each id, as a scan would find it.
    let mut containers: HashMap<&str, &CriContainer> = HashMap::new();
    for c in &snapshot.cri_containers {
        containers.entry(&c.id).or_insert(c);
    }
    let mut findings: Vec<Finding> = cri
        .statuses
        .iter()
        .filter(|probe| is_slow(&probe.call))
        .map(|probe| {
            let pod = names.of(&probe.id);
            let shim = containers
                .get(probe.id.as_str())
                .and_then(|c| shims.shim_of(snapshot, c));
            let blocked: Vec<Value> = shim
                .map(|s| {
                    s.threads
                        .iter()
                        .filter(|t| shim_blocked::is_stuck(t))
                        .map(shim_blocked::thread_evidence)
                        .collect()
                })
                .unwrap_or_default();
            let how = if probe.call.timed_out {
                format!("did not answer within {:.0} ms", probe.call.latency_ms)
            } else {
                format!("took {:.0} ms", probe.call.latency_ms)
            };
            Finding {
                kind: Kind::CriSlow,
                severity: Severity::Critical,
                id: probe.id.clone(),
                summary: format!(
                    "ContainerStatus of {} {how}: its status lock is held, and ListContainers waits on it",
                    pod.display()
                ),
                evidence: json!({
                    "container_id": probe.id,
                    "pod_namespace": pod.pod_namespace,
                    "pod_name": pod.pod_name,
                    "container_name": pod.container_name,
                    "container_status_latency_ms": probe.call.latency_ms,
                    "container_status_timed_out": probe.call.timed_out,
                    "list_containers": list_evidence,
                    "shim_pid": shim.map(|s| s.pid),
                    "shim_blocked_threads": blocked,
                }),
                cause: "An operation holds this container's status lock while it waits on \
                        the container's shim (typically UpdateContainerResources calling \
                        task.Update while the shim is stuck in umount2 of an overlay rootfs)."
                    .to_string(),
                remedy: "Find what blocks the shim (see shim-blocked: usually disk I/O \
                         pressure stalling an overlay unmount) and relieve it; the lock is \
                         released when the shim answers. Kubelet marks the node NotReady \
                         once its relist exceeds 3 min."
                    .to_string(),
            }
        })
        .collect();

    if findings.is_empty() {
        if let Some(list) = list.filter(|c| is_slow(c)) {
            findings.push(Finding {
                kind: Kind::CriSlow,
                severity: Severity::Warning,
                id: "ListContainers".to_string(),
                summary: format!(
                    "ListContainers {} but no single container's status was slow",
                    if list.timed_out {
                        "did not answer in time".to_string()
                    } else {
                        format!("took {:.0} ms", list.latency_ms)
                    }
                ),
                evidence: json!({"list_containers": list_evidence, "threshold_ms": slow_ms}),
                cause: "containerd is slow as a whole: CPU, memory or disk pressure, or many \
                        containers."
                    .to_string(),
                remedy: "Check containerd's CPU use and log, and the node's I/O pressure."
                    .to_string(),
            });
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{Api, CriView, StatusProbe};

    fn call(method: Method, latency_ms: f64, timed_out: bool) -> ApiCall {
        ApiCall {
            api: Api::Cri,
            method,
            target: None,
            latency_ms,
            error: timed_out.then(|| "no answer before the deadline".to_string()),
            timed_out,
        }
    }

    fn cri(list: ApiCall, probes: Vec<(String, ApiCall)>) -> CriView {
        CriView {
            calls: vec![call(Method::Version, 2.0, false), list],
            statuses: probes
                .into_iter()
                .map(|(id, call)| StatusProbe {
                    id,
                    call,
                    state: None,
                })
                .collect(),
            ..CriView::default()
        }
    }

    #[test]
    fn the_container_whose_status_hangs_is_named_with_its_blocked_shim() {
        let mut s = snapshot();
        s.cri_containers.push(running(&id('a'), 10, NOW - 60 * SEC));
        s.bundles
            .insert(id('a'), bundle(&id('a'), &id('s'), "init"));
        s.shims
            .push(shim(77, &id('s'), ADDRESS, &["futex", "umount2"]));
        s.cri = Some(cri(
            call(Method::ListContainers, 3000.0, true),
            vec![
                (id('a'), call(Method::ContainerStatus, 3000.0, true)),
                (id('b'), call(Method::ContainerStatus, 4.0, false)),
            ],
        ));
        let findings = check(&s, Duration::from_secs(1));
        assert_eq!(findings.len(), 1);
        let f = &findings[0];
        assert_eq!(f.kind, Kind::CriSlow);
        assert_eq!(f.id, id('a'));
        assert_eq!(f.evidence["container_status_timed_out"], true);
        assert_eq!(f.evidence["list_containers"]["timed_out"], true);
        assert_eq!(f.evidence["shim_pid"], 77);
        assert_eq!(f.evidence["shim_blocked_threads"][0]["syscall"], "umount2");
    }

    #[test]
    fn fast_cri_is_fine_and_unreachable_cri_is_not_called_slow() {
        let mut s = snapshot();
        s.cri = Some(cri(
            call(Method::ListContainers, 5.0, false),
            vec![(id('a'), call(Method::ContainerStatus, 3.0, false))],
        ));
        assert!(check(&s, Duration::from_secs(1)).is_empty());

        let mut unreachable = cri(call(Method::ListContainers, 3000.0, true), vec![]);
        unreachable.calls[0] = call(Method::Version, 3000.0, true);
        s.cri = Some(unreachable);
        assert!(check(&s, Duration::from_secs(1)).is_empty());
    }

    #[test]
    fn slow_means_over_the_threshold_in_milliseconds() {
        let mut s = snapshot();
        for (latency_ms, slow) in [(999.0, false), (1000.0, false), (1000.5, true)] {
            s.cri = Some(cri(
                call(Method::ListContainers, 5.0, false),
                vec![(id('a'), call(Method::ContainerStatus, latency_ms, false))],
            ));
            assert_eq!(
                !check(&s, Duration::from_secs(1)).is_empty(),
                slow,
                "{latency_ms} ms against a 1 s threshold"
            );
        }
    }

    #[test]
    fn slow_list_without_a_culprit_is_a_warning() {
        let mut s = snapshot();
        s.cri = Some(cri(call(Method::ListContainers, 1500.0, false), vec![]));
        let findings = check(&s, Duration::from_secs(1));
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].id, "ListContainers");
        assert_eq!(findings[0].severity, Severity::Warning);
    }
}
