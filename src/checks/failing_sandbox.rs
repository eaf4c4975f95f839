//! `failing-sandbox`: a pod kubelet has (its directory, its log directory)
//! that CRI lists no sandbox of, past the grace: Pending behind a
//! RunPodSandbox that keeps failing.
//!
//! kubelet's `SyncPod` makes the pod cgroup (`pcm.EnsureExists`), the pod's
//! directories (`makePodDataDirs`) and mounts its volumes before
//! kuberuntime's `createPodSandbox` makes the pod's log directory
//! (`<podLogsDir>/<namespace>_<name>_<uid>`) and calls RunPodSandbox. When
//! that fails (CNI ADD: "failed to setup network for sandbox"; a
//! RuntimeClass naming a handler containerd has none for), containerd
//! cleans the sandbox up and CRI lists none, and kubelet's pod worker
//! syncs the pod again 10 to 15 s after each failure (`pod_workers.go`:
//! `backOffPeriod`, 10 s, jittered by half; kubelet logs each try as "Error
//! syncing pod, skipping" with the uid) for as long as the failure lasts,
//! the pod Pending with its cgroup, directory and volumes. Those are
//! kubelet's, never leaked (`leaked-pod-cgroup`, `orphan-pod-dir` say so):
//! this is the finding, the pod and how long. containerd keeps no failed
//! sandbox, so its error is in its log and the pod's events, not CRI's
//! answer.

use serde::Serialize;
use serde_json::Value;

use crate::checks::settings::Settings;
use crate::checks::shared::{pod_dirs_without_sandbox, KUBELET_RELEASES};
use crate::model::{timestamp, Finding, Kind, PodDir, PodLogDir, Severity, Snapshot};

#[derive(Serialize)]
pub struct Evidence {
    pub pod_uid: String,
    pub pod_namespace: String,
    pub pod_name: String,
    /// kubelet's pod directory and its log directory.
    pub pod_dir: String,
    pub log_dir: String,
    /// When kuberuntime first made its log directory (its first
    /// RunPodSandbox), and how long ago.
    pub since: Value,
    pub age_seconds: f64,
    /// Volumes mounted below its directory (kubelet mounts them first).
    pub mounts: Vec<String>,
    /// CRI's own word when its network is not ready (its Status:
    /// `NetworkReady` false, "<reason>: <message>"): every RunPodSandbox
    /// then fails on it. Absent when ready or not known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cri_network_not_ready: Option<String>,
}

/// The pods kubelet has and CRI lists no sandbox of, their log directory
/// older than the grace. Nothing without CRI's list. A log directory is
/// anyone's who can write the pod log directory, so one kubelet's word
/// says is no pod of its own (its pod-resources API answered, not listing
/// the pod it names) makes no failing sandbox: that directory is an
/// `orphan-pod-dir`. Without kubelet's word, the pod is both (the orphan
/// unconfirmed, saying why).
pub fn failing<'a>(
    snapshot: &'a Snapshot,
    settings: &Settings,
) -> Vec<(&'a PodDir, &'a PodLogDir)> {
    let Some((kubelet, dirs)) = pod_dirs_without_sandbox(snapshot) else {
        return Vec::new();
    };
    let kubelet = kubelet.index();
    dirs.into_iter()
        .filter_map(|dir| Some((dir, kubelet.pod_log(&dir.uid)?)))
        .filter(|(dir, _)| kubelet.lists(&dir.uid) != Ok(false))
        .filter(|(_, log)| snapshot.is_older_than(log.modified_at, settings.sandbox_grace))
        .collect()
}

pub fn check(snapshot: &Snapshot, settings: &Settings) -> Vec<Finding> {
    let network_not_ready = snapshot
        .cri
        .as_ref()
        .and_then(|cri| cri.network.as_ref())
        .filter(|network| !network.status)
        .map(|network| format!("{}: {}", network.reason, network.message));
    failing(snapshot, settings)
        .into_iter()
        .map(|(dir, log)| {
            let evidence = Evidence {
                pod_uid: dir.uid.clone(),
                pod_namespace: log.namespace.clone(),
                pod_name: log.name.clone(),
                pod_dir: dir.path.display().to_string(),
                log_dir: format!("{}_{}_{}", log.namespace, log.name, log.uid),
                since: timestamp(log.modified_at),
                age_seconds: snapshot.seconds_since(log.modified_at),
                mounts: dir.mounts.clone(),
                cri_network_not_ready: network_not_ready.clone(),
            };
            let minutes = (evidence.age_seconds / 60.0).floor();
            let why = match &network_not_ready {
                Some(network) => format!("; CRI says its network is not ready ({network})"),
                None => String::new(),
            };
            Finding {
                kind: Kind::FailingSandbox,
                severity: Severity::Warning,
                id: dir.uid.clone(),
                summary: format!(
                    "pod {}/{} (uid {}) has had no sandbox for {minutes:.0} min: kubelet keeps \
                     calling RunPodSandbox and it keeps failing{why}",
                    log.namespace, log.name, dir.uid
                ),
                cause: "kubelet made the pod's cgroup, directory and volumes, then its log \
                        directory right before RunPodSandbox; containerd cleans a failed \
                        sandbox up, so CRI lists none, and kubelet retries with back-off while \
                        the pod stays Pending (a CNI ADD that fails, a runtime handler \
                        containerd has none for, a pause image it cannot pull)."
                    .to_string(),
                remedy: format!(
                    "Read the failure: `kubectl -n {ns} describe pod {name}` (events \
                     FailedCreatePodSandBox, \"Failed to create pod sandbox: ...\"), or \
                     `journalctl -u kubelet | grep {uid}`: {releases} log each try as \
                     \"Error syncing pod, skipping\" err=\"failed to \\\"CreatePodSandbox\\\" \
                     for \\\"{name}_{ns}({uid})\\\" with CreatePodSandboxError: ...\" (after \
                     \"CreatePodSandbox for pod failed\" pod=\"{ns}/{name}\"), and containerd \
                     \"RunPodSandbox for ... failed\". kubelet itself retries: its pod worker \
                     syncs the pod again 10 to 15 s after each failure for as long as the pod \
                     exists. Fix the cause (the CNI plugin and its config, the RuntimeClass, the \
                     pause image) and the next retry starts the pod. Its cgroup and directory are \
                     kubelet's: remove nothing by hand.",
                    ns = log.namespace,
                    name = log.name,
                    uid = dir.uid,
                    releases = KUBELET_RELEASES,
                ),
                evidence: serde_json::to_value(&evidence).unwrap_or(Value::Null),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{CriCondition, KubeletView, KubeletWord, Located, Origin};
    use std::path::PathBuf;

    const HOUR: i64 = 3600 * SEC;

    fn node(pods: &[(&str, i64)], sandbox_uids: &[&str]) -> Snapshot {
        let mut s = snapshot();
        s.kubelet = Some(KubeletView {
            root: Located {
                path: PathBuf::from("/var/lib/kubelet"),
                origin: Origin::Default,
            },
            pod_dirs: pods
                .iter()
                .map(|(uid, _)| PodDir {
                    uid: uid.to_string(),
                    path: PathBuf::from(format!("/var/lib/kubelet/pods/{uid}")),
                    modified_at: NOW - HOUR,
                    mounts: Vec::new(),
                })
                .collect(),
            pod_logs: Some(
                pods.iter()
                    .map(|(uid, since)| {
                        PodLogDir::parse(&format!("shop_cart_{uid}"), *since).unwrap()
                    })
                    .collect(),
            ),
            pod_logs_dir: None,
            word: KubeletWord::default(),
        });
        s.cri = Some(cri_listing_pod_uids(sandbox_uids));
        s
    }

    #[test]
    fn a_pod_kubelet_has_with_no_sandbox_past_the_grace_is_failing() {
        let s = node(
            &[
                ("pending", NOW - HOUR),
                ("running", NOW - HOUR),
                ("new", NOW - 10 * SEC),
            ],
            &["running"],
        );
        let findings = check(&s, &Settings::default());
        let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["pending"]);
        let f = &findings[0];
        assert_eq!(f.kind, Kind::FailingSandbox);
        assert_eq!(f.evidence["pod_name"], "cart");
        assert!(f.summary.contains("no sandbox for 60 min"), "{}", f.summary);
        assert!(f.remedy.contains("describe pod cart"), "{}", f.remedy);
        assert!(!f.summary.contains("network"), "{}", f.summary);
        assert!(f.evidence.get("cri_network_not_ready").is_none());
        // kubelet's word answered without the pod its log directory names
        // (a tenant's `mkdir`): no failing sandbox, an orphan instead.
        let mut unlisted = s.clone();
        unlisted.kubelet.as_mut().unwrap().word = KubeletWord::Listed { pods: Vec::new() };
        assert!(check(&unlisted, &Settings::default()).is_empty());
        // kubelet's own lines for the pod, as its journal has them, and
        // what kubelet does next.
        for line in [
            "events FailedCreatePodSandBox, \"Failed to create pod sandbox: ...\"",
            "`journalctl -u kubelet | grep pending`: kubelet 1.26-1.35 log each try",
            "\"Error syncing pod, skipping\" err=\"failed to \\\"CreatePodSandbox\\\" for \
             \\\"cart_shop(pending)\\\" with CreatePodSandboxError: ...\"",
            "\"CreatePodSandbox for pod failed\" pod=\"shop/cart\"",
            "syncs the pod again 10 to 15 s after each failure",
        ] {
            assert!(f.remedy.contains(line), "{line:?} in {}", f.remedy);
        }
        assert!(f.remedy.is_ascii(), "{}", f.remedy);
        // Without CRI's answer, nothing.
        let mut s = s;
        s.cri.as_mut().unwrap().sandboxes = None;
        assert!(check(&s, &Settings::default()).is_empty());
    }

    #[test]
    fn cri_s_network_not_ready_is_named_as_the_failure() {
        let mut s = node(&[("pending", NOW - HOUR)], &[]);
        let network = |status: bool| CriCondition {
            status,
            reason: "NetworkPluginNotReady".to_string(),
            message: "cni plugin not initialized".to_string(),
        };
        s.cri.as_mut().unwrap().network = Some(network(false));
        let findings = check(&s, &Settings::default());
        let f = &findings[0];
        let said = "NetworkPluginNotReady: cni plugin not initialized";
        assert!(f.summary.contains(said), "{}", f.summary);
        assert_eq!(f.evidence["cri_network_not_ready"], said);
        // A ready network is not named.
        s.cri.as_mut().unwrap().network = Some(network(true));
        let f = &check(&s, &Settings::default())[0];
        assert!(!f.summary.contains("cni plugin"), "{}", f.summary);
    }
}
