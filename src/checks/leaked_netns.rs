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
//! Only a namespace CRI made is judged: in its netns directory, named as
//! containerd's `pkg/netns` names them (`cni-<uuid>`) or by libcni's cache
//! of an ADD of one of CRI's networks. An administrator's (`ip netns add`)
//! or another runtime's namespace in the same directory is never reported.
//!
//! Judged by containerd's records of CRI's namespace (sandbox containers
//! and, from 2.x, the sandbox store: both must have answered); by the
//! kernel: no thread of any process is in it and no descriptor holds it
//! open (`/proc/<pid>/task/<tid>/ns/net`, `/proc/<pid>/fd/<n>`, compared
//! by nsfs device and inode), and it holds no interface but `lo` and the
//! pod's own (`eth<i>`, go-cni's names for CRI's networks: a leaked pod
//! namespace keeps its veth end, which goes with it as in CRI's teardown);
//! and past the grace on the namespace's creation (it exists a moment
//! before its record names it).

use serde::Serialize;
use serde_json::Value;

use crate::checks::settings::Settings;
use crate::checks::shared::{of_pod, short};
use crate::model::netns::{foreign_interfaces, is_cri_made};
use crate::model::{
    timestamp, CniView, Finding, Kind, NetnsMount, Severity, Snapshot, CRI_NAMESPACE,
};

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

/// The leaked namespaces of `snapshot`: what [`check`] reports and what a
/// removal re-judges on a fresh look. A namespace is leaked only when CRI
/// made it ([`is_cri_made`]), no sandbox record names it, nothing holds
/// it (no thread in it, no descriptor on it), it holds no interface CRI
/// did not put there, and it is past the grace.
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
    if !answered || !view.holders_looked_for {
        return Vec::new();
    }
    let named = containerd.netns_files_named(CRI_NAMESPACE);
    let cni = snapshot.cni.as_ref();
    let cri_networks = cni.map_or(0, |cni| cni.cri_networks.len());
    let index = cni.map(CniView::index);
    view.mounts
        .iter()
        .filter(|m| {
            m.path
                .file_name()
                .is_some_and(|n| !named.contains(n) && is_cri_made(n, index.as_ref()))
        })
        .filter(|m| !view.holders.contains_key(&m.inode))
        .filter(|m| foreign_interfaces(m, cri_networks).is_some_and(|f| f.is_empty()))
        .filter(|m| {
            m.created_at > 0 && snapshot.is_older_than(m.created_at, settings.sandbox_grace)
        })
        .collect()
}

pub fn check(snapshot: &Snapshot, settings: &Settings) -> Vec<Finding> {
    let Some(view) = &snapshot.netns else {
        return Vec::new();
    };
    let index = snapshot.cni.as_ref().map(CniView::index);
    leaked(snapshot, settings)
        .into_iter()
        .map(|mount| {
            let cached = mount
                .path
                .file_name()
                .and_then(|name| index.as_ref()?.attachment_in_netns(name));
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
                    "pod network namespace {} (net:[{}]){} is named by no sandbox record, and no process is in it or holds it",
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
                    "Check that nothing uses it (no process is in it or holds it open; no \
                     pod's sandbox names it), then release it as CRI does: `umount {path} && \
                     rm {path}`, or `nodectl leaked-netns --remove`; release the pod's \
                     address too (`nodectl leaked-ips`).",
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
    use crate::model::{
        CachedAttachment, CniView, ContainerdView, HeldBy, NamespaceView, NetnsHolder, NetnsView,
    };
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::PathBuf;
    use std::time::Duration;

    const HOUR: i64 = 3600 * SEC;

    fn mount(name: &str, inode: u64, created_at: i64) -> NetnsMount {
        NetnsMount {
            path: PathBuf::from(format!("/var/run/netns/{name}")),
            inode,
            device: 4,
            created_at,
            // A leaked pod's namespace keeps its end of the pod's veth.
            interfaces: Some(vec!["lo".into(), "eth0".into()]),
        }
    }

    /// A node whose records name `named` (as `/run/netns/<name>`: another
    /// spelling of the same directory) and where a thread of a process is
    /// in each of the `used` inodes.
    fn node(mounts: Vec<NetnsMount>, named: &[&str], used: &[u64]) -> Snapshot {
        let mut s = snapshot();
        s.netns = Some(NetnsView {
            dir: PathBuf::from("/var/run/netns"),
            mounts,
            holders: used
                .iter()
                .map(|&i| {
                    (
                        i,
                        NetnsHolder {
                            pid: 100,
                            by: HeldBy::Thread(100),
                        },
                    )
                })
                .collect(),
            holders_looked_for: true,
            ..NetnsView::default()
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
                mount("cni-00000000-0000-0000-0000-00000000000a", 1, NOW - HOUR),
                mount("cni-00000000-0000-0000-0000-00000000000b", 2, NOW - HOUR),
                mount("cni-00000000-0000-0000-0000-00000000000c", 3, NOW - HOUR),
            ],
            &["cni-00000000-0000-0000-0000-00000000000a"],
            &[2],
        );
        let findings = check(&s, &Settings::default());
        assert_eq!(findings.len(), 1, "{findings:?}");
        let f = &findings[0];
        assert_eq!(
            (f.kind, f.id.as_str()),
            (
                Kind::LeakedNetns,
                "cni-00000000-0000-0000-0000-00000000000c"
            )
        );
        assert_eq!(f.evidence["inode"], 3);
        assert_eq!(
            f.evidence["path"],
            "/var/run/netns/cni-00000000-0000-0000-0000-00000000000c"
        );
        assert!(
            f.remedy
                .contains("umount /var/run/netns/cni-00000000-0000-0000-0000-00000000000c"),
            "{}",
            f.remedy
        );
        assert!(f.evidence["pod_name"].is_null(), "no cache names it");
    }

    #[test]
    fn the_pod_is_named_by_libcnis_cache_of_its_add() {
        let mut s = node(
            vec![mount(
                "cni-00000000-0000-0000-0000-00000000000c",
                3,
                NOW - HOUR,
            )],
            &[],
            &[],
        );
        s.cni = Some(CniView {
            attachments: vec![
                CachedAttachment {
                    network: "pods".into(),
                    container_id: "b".repeat(64),
                    ifname: "eth0".into(),
                    netns: Some("/var/run/netns/cni-00000000-0000-0000-0000-00000000000e".into()),
                    pod_namespace: Some("batch".into()),
                    pod_name: Some("job-1".into()),
                    pod_uid: None,
                },
                CachedAttachment {
                    network: "pods".into(),
                    container_id: "a".repeat(64),
                    ifname: "eth0".into(),
                    // Another spelling of the same directory.
                    netns: Some("/run/netns/cni-00000000-0000-0000-0000-00000000000c".into()),
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
        let s = node(
            vec![mount(
                "cni-00000000-0000-0000-0000-00000000000d",
                3,
                NOW - 10 * SEC,
            )],
            &[],
            &[],
        );
        assert!(check(&s, &Settings::default()).is_empty());
        let none = Settings {
            sandbox_grace: Duration::ZERO,
            ..Settings::default()
        };
        assert_eq!(check(&s, &none).len(), 1);
        let mut s = node(
            vec![mount(
                "cni-00000000-0000-0000-0000-00000000000c",
                3,
                NOW - HOUR,
            )],
            &[],
            &[],
        );
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
        let mut s = node(
            vec![mount(
                "cni-00000000-0000-0000-0000-00000000000c",
                3,
                NOW - HOUR,
            )],
            &[],
            &[],
        );
        s.netns.as_mut().unwrap().holders_looked_for = false;
        assert!(
            check(&s, &Settings::default()).is_empty(),
            "no process looked for"
        );
        let mut s = node(
            vec![mount(
                "cni-00000000-0000-0000-0000-00000000000c",
                3,
                NOW - HOUR,
            )],
            &[],
            &[],
        );
        s.containerd = None;
        assert!(check(&s, &Settings::default()).is_empty());
    }

    const ADMIN: &str = "admin-net";
    const HELD: &str = "cni-00000000-0000-0000-0000-0000000000f0";

    fn ids(s: &Snapshot) -> Vec<String> {
        check(s, &Settings::default())
            .into_iter()
            .map(|f| f.id)
            .collect()
    }

    #[test]
    fn a_namespace_cri_did_not_make_is_never_leaked() {
        let lost = "cni-00000000-0000-0000-0000-00000000000c";
        // `ip netns add admin-net`, podman's `netns-<uuid>`: not CRI's names.
        let mut s = node(
            vec![
                mount(ADMIN, 1, NOW - HOUR),
                mount("netns-0b2f3c4d-0a1b-2c3d-4e5f-0123456789ab", 2, NOW - HOUR),
                mount("pod-net", 3, NOW - HOUR),
                mount(lost, 4, NOW - HOUR),
            ],
            &[],
            &[],
        );
        assert_eq!(ids(&s), [lost]);
        // libcni's cache of an ADD of CRI's network names `pod-net`: CRI's;
        // podman's cache entry (its own network) names its namespace: not.
        let cached = |network: &str, netns: &str| CachedAttachment {
            network: network.into(),
            container_id: "c".repeat(64),
            ifname: "eth0".into(),
            netns: Some(format!("/var/run/netns/{netns}")),
            pod_namespace: None,
            pod_name: None,
            pod_uid: None,
        };
        s.cni = Some(CniView {
            attachments: vec![
                cached("pods", "pod-net"),
                cached("podman", "netns-0b2f3c4d-0a1b-2c3d-4e5f-0123456789ab"),
            ],
            cri_networks: vec!["pods".into()],
            ..CniView::default()
        });
        let mut found = ids(&s);
        found.sort();
        assert_eq!(found, [lost, "pod-net"]);
    }

    #[test]
    fn a_namespace_any_thread_or_descriptor_holds_is_not_leaked() {
        for by in [HeldBy::Thread(4243), HeldBy::Descriptor(9)] {
            let mut s = node(vec![mount(HELD, 5, NOW - HOUR)], &[], &[]);
            let view = s.netns.as_mut().unwrap();
            view.holders.insert(5, NetnsHolder { pid: 4242, by });
            assert!(ids(&s).is_empty(), "{by:?}");
            // The same holder of another namespace holds not this one.
            let view = s.netns.as_mut().unwrap();
            let holder = view.holders.remove(&5).unwrap();
            view.holders.insert(6, holder);
            assert_eq!(ids(&s), [HELD], "{by:?}");
        }
    }

    #[test]
    fn a_namespace_holding_an_interface_cri_did_not_put_there_is_not_leaked() {
        let with = |interfaces: Option<&[&str]>| {
            let mut m = mount(HELD, 5, NOW - HOUR);
            m.interfaces = interfaces.map(|i| i.iter().map(|n| n.to_string()).collect());
            node(vec![m], &[], &[])
        };
        assert_eq!(ids(&with(Some(&["lo"]))), [HELD]);
        assert_eq!(ids(&with(Some(&["lo", "eth0"]))), [HELD]);
        // A veth someone moved in (its peer in a live process's namespace).
        assert!(ids(&with(Some(&["lo", "eth0", "vadm0"]))).is_empty());
        // eth1 is a pod's own only when CRI loads a second network.
        assert!(ids(&with(Some(&["lo", "eth1"]))).is_empty());
        // Not seen (the look timed out, or not asked): nothing said.
        assert!(ids(&with(None)).is_empty());
    }
}
