//! `leaked-netns`: a pod network namespace CRI mounted that no sandbox
//! record names and no process is in.
//!
//! CRI makes a pod's network namespace (an nsfs bind mount, `cni-<uuid>`,
//! in its netns directory) before the pod's network, names it in the
//! sandbox's record (`NetNSPath`), and removes it in the sandbox's
//! teardown, before the record goes. A record removed any other way (`ctr
//! containers rm`, `ctr sandboxes rm` on a stuck sandbox, a metadata store
//! lost or restored) leaves the mount, and with it the pod's veth and,
//! through CNI, its address: nothing in containerd will ever remove it.
//!
//! Judged by containerd's records of CRI's namespace (sandbox containers
//! and, from 2.x, the sandbox store: both must have answered), by the
//! kernel (no process's `/proc/<pid>/ns/net` is that namespace) and past
//! the grace on the namespace's creation (it exists a moment before its
//! record names it).

use serde::Serialize;
use serde_json::Value;

use crate::checks::settings::Settings;
use crate::checks::shared::{of_pod, short};
use crate::model::{timestamp, Finding, Kind, NetnsMount, Severity, Snapshot, CRI_NAMESPACE};

#[derive(Serialize)]
pub struct Evidence {
    pub path: String,
    /// The namespace's inode, as `/proc/<pid>/ns/net` would name it.
    pub inode: u64,
    pub netns_dir: String,
    pub created_at: Value,
    pub age_seconds: f64,
    /// The sandbox and pod it was made for, from libcni's cache of the
    /// pod's ADD (it outlives the records; none when the ADD never ended).
    pub sandbox_id: Option<String>,
    pub pod_namespace: Option<String>,
    pub pod_name: Option<String>,
    /// How "no sandbox" was established.
    pub basis: &'static str,
}

/// The leaked namespaces of `snapshot`: what [`check`] reports.
pub fn leaked<'a>(snapshot: &'a Snapshot, settings: &Settings) -> Vec<&'a NetnsMount> {
    let Some(view) = &snapshot.netns else {
        return Vec::new();
    };
    let Some(containerd) = &snapshot.containerd else {
        return Vec::new();
    };
    // Both kinds of record must have answered: 2.x names a sandbox's
    // namespace in its store entry before any container exists.
    let answered = containerd
        .namespaces
        .get(CRI_NAMESPACE)
        .is_some_and(|ns| ns.containers.is_some() && ns.sandboxes_created.is_some());
    if !answered || !view.users_looked_for {
        return Vec::new();
    }
    let named = containerd.netns_files_named(CRI_NAMESPACE);
    view.mounts
        .iter()
        .filter(|m| !m.path.file_name().is_some_and(|n| named.contains(n)))
        .filter(|m| !view.users.contains_key(&m.inode))
        .filter(|m| {
            m.created_at > 0 && snapshot.is_older_than(m.created_at, settings.sandbox_grace)
        })
        .collect()
}

pub fn check(snapshot: &Snapshot, settings: &Settings) -> Vec<Finding> {
    let Some(view) = &snapshot.netns else {
        return Vec::new();
    };
    leaked(snapshot, settings)
        .into_iter()
        .map(|mount| {
            let cached = mount
                .path
                .file_name()
                .and_then(|name| snapshot.cni.as_ref()?.attachment_in_netns(name));
            let evidence = Evidence {
                sandbox_id: cached.map(|c| c.container_id.clone()),
                pod_namespace: cached.and_then(|c| c.pod_namespace.clone()),
                pod_name: cached.and_then(|c| c.pod_name.clone()),
                path: mount.path.display().to_string(),
                inode: mount.inode,
                netns_dir: view.dir.display().to_string(),
                created_at: timestamp(mount.created_at),
                age_seconds: snapshot.seconds_since(mount.created_at),
                basis: "containerd-api",
            };
            Finding {
                kind: Kind::LeakedNetns,
                severity: Severity::Warning,
                id: mount
                    .path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                summary: format!(
                    "pod network namespace {} (net:[{}]){} is named by no sandbox record and no process is in it",
                    evidence.path,
                    mount.inode,
                    whose(&evidence)
                ),
                cause: "CRI removes a pod's network namespace in the sandbox's teardown, \
                        before its record; a record removed any other way (`ctr containers \
                        rm` or `ctr sandboxes rm` on a stuck sandbox, a metadata store lost) \
                        leaves the mount, with the pod's veth and, through CNI, its address \
                        (see leaked-ip). Nothing in containerd removes it later."
                    .to_string(),
                remedy: format!(
                    "Check that nothing uses it (`ip netns identify` finds no process; no \
                     pod's sandbox names it), then release it as CRI does: `umount {path} && \
                     rm {path}`; release the pod's address too (`nodectl leaked-ips`).",
                    path = evidence.path
                ),
                evidence: serde_json::to_value(&evidence).unwrap_or(Value::Null),
            }
        })
        .collect()
}

/// " of pod <ns>/<name> (sandbox <id>)", as far as the cache tells.
fn whose(evidence: &Evidence) -> String {
    let pod = of_pod(&evidence.pod_namespace, &evidence.pod_name);
    match &evidence.sandbox_id {
        Some(id) => format!("{pod} (sandbox {})", short(id)),
        None => pod,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{CachedAttachment, CniView, ContainerdView, NamespaceView, NetnsView};
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::PathBuf;
    use std::time::Duration;

    const HOUR: i64 = 3600 * SEC;

    fn mount(name: &str, inode: u64, created_at: i64) -> NetnsMount {
        NetnsMount {
            path: PathBuf::from(format!("/var/run/netns/{name}")),
            inode,
            created_at,
        }
    }

    /// A node whose records name `named` (as `/run/netns/<name>`: another
    /// spelling of the same directory) and where `used` inodes have a
    /// process.
    fn node(mounts: Vec<NetnsMount>, named: &[&str], used: &[u64]) -> Snapshot {
        let mut s = snapshot();
        s.netns = Some(NetnsView {
            dir: PathBuf::from("/var/run/netns"),
            mounts,
            users: used.iter().map(|&i| (i, 100)).collect(),
            users_looked_for: true,
        });
        let mut view = ContainerdView::default();
        view.namespaces.insert(
            CRI_NAMESPACE.to_string(),
            NamespaceView {
                containers: Some(BTreeSet::new()),
                sandboxes_created: Some(BTreeMap::new()),
                netns_paths: named
                    .iter()
                    .enumerate()
                    .map(|(n, name)| (format!("sb{n}"), format!("/run/netns/{name}")))
                    .collect(),
                ..NamespaceView::default()
            },
        );
        s.containerd = Some(view);
        s
    }

    #[test]
    fn a_namespace_no_record_names_and_no_process_is_in_is_leaked() {
        let s = node(
            vec![
                mount("cni-named", 1, NOW - HOUR),
                mount("cni-used", 2, NOW - HOUR),
                mount("cni-lost", 3, NOW - HOUR),
            ],
            &["cni-named"],
            &[2],
        );
        let findings = check(&s, &Settings::default());
        assert_eq!(findings.len(), 1, "{findings:?}");
        let f = &findings[0];
        assert_eq!((f.kind, f.id.as_str()), (Kind::LeakedNetns, "cni-lost"));
        assert_eq!(f.evidence["inode"], 3);
        assert_eq!(f.evidence["path"], "/var/run/netns/cni-lost");
        assert!(
            f.remedy.contains("umount /var/run/netns/cni-lost"),
            "{}",
            f.remedy
        );
        assert!(f.evidence["pod_name"].is_null(), "no cache names it");
    }

    #[test]
    fn the_pod_is_named_by_libcnis_cache_of_its_add() {
        let mut s = node(vec![mount("cni-lost", 3, NOW - HOUR)], &[], &[]);
        s.cni = Some(CniView {
            attachments: vec![
                CachedAttachment {
                    network: "pods".into(),
                    container_id: "b".repeat(64),
                    ifname: "eth0".into(),
                    netns: Some("/var/run/netns/cni-other".into()),
                    pod_namespace: Some("batch".into()),
                    pod_name: Some("job-1".into()),
                    pod_uid: None,
                },
                CachedAttachment {
                    network: "pods".into(),
                    container_id: "a".repeat(64),
                    ifname: "eth0".into(),
                    // Another spelling of the same directory.
                    netns: Some("/run/netns/cni-lost".into()),
                    pod_namespace: Some("shop".into()),
                    pod_name: Some("cart-7d9".into()),
                    pod_uid: None,
                },
            ],
            cri_networks: vec!["pods".into()],
            ..CniView::default()
        });
        let findings = check(&s, &Settings::default());
        let f = &findings[0];
        assert_eq!(f.evidence["pod_namespace"], "shop");
        assert_eq!(f.evidence["pod_name"], "cart-7d9");
        assert_eq!(f.evidence["sandbox_id"], "a".repeat(64));
        assert!(
            f.summary
                .contains("of pod shop/cart-7d9 (sandbox aaaaaaaaaaaaa)"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn within_the_grace_or_without_the_records_or_procfs_nothing_is_leaked() {
        let s = node(vec![mount("cni-new", 3, NOW - 10 * SEC)], &[], &[]);
        assert!(check(&s, &Settings::default()).is_empty());
        let none = Settings {
            sandbox_grace: Duration::ZERO,
            ..Settings::default()
        };
        assert_eq!(check(&s, &none).len(), 1);
        let mut s = node(vec![mount("cni-lost", 3, NOW - HOUR)], &[], &[]);
        s.containerd
            .as_mut()
            .unwrap()
            .namespaces
            .get_mut(CRI_NAMESPACE)
            .unwrap()
            .sandboxes_created = None;
        assert!(
            check(&s, &Settings::default()).is_empty(),
            "the store did not answer"
        );
        let mut s = node(vec![mount("cni-lost", 3, NOW - HOUR)], &[], &[]);
        s.netns.as_mut().unwrap().users_looked_for = false;
        assert!(
            check(&s, &Settings::default()).is_empty(),
            "no process looked for"
        );
        let mut s = node(vec![mount("cni-lost", 3, NOW - HOUR)], &[], &[]);
        s.containerd = None;
        assert!(check(&s, &Settings::default()).is_empty());
    }
}
