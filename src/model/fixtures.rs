//! Hand-made snapshots, for the tests of every layer (test builds only).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::model::*;

pub const NOW: i64 = 1_766_900_000_000_000_000;
pub const SEC: i64 = 1_000_000_000;
pub const ADDRESS: &str = "/run/containerd/containerd.sock";

pub fn id(c: char) -> String {
    c.to_string().repeat(64)
}

pub fn snapshot() -> Snapshot {
    let at = |p: &str| Located {
        path: PathBuf::from(p),
        origin: Origin::Default,
    };
    let paths = Paths::at(
        at("/var/lib/containerd"),
        at("/run/containerd"),
        at(ADDRESS),
    );
    Snapshot::empty(NOW, paths, "k8s.io".to_string())
}

/// `s` as the scan of a containerd proven to be the daemon (pid 812, its
/// own root and state): what an action needs before it acts at all.
pub fn of_proven_daemon(mut s: Snapshot) -> Snapshot {
    s.paths.process = Some(crate::model::ContainerdProcess {
        pid: 812,
        exe: PathBuf::from("/usr/bin/containerd"),
        ..Default::default()
    });
    s
}

/// The gap of a look whose procfs did not answer (by the deadline, or at all).
pub fn procfs_unread() -> Gap {
    Gap::source(
        Source::Procfs,
        "/proc",
        "blocked: no answer after 3s reading /proc/42/task",
    )
}

pub fn running(id: &str, pid: i64, started_at: i64) -> CriContainer {
    CriContainer {
        id: id.to_string(),
        status_path: PathBuf::from(format!("/var/lib/containerd/{id}/status")),
        status_written_at: started_at,
        status: CriStatus {
            version: "v1".to_string(),
            pid,
            created_at: started_at.saturating_sub(SEC),
            started_at,
            ..CriStatus::default()
        },
        status_file: None,
    }
}

pub fn exited(id: &str, finished_at: i64, written_at: i64) -> CriContainer {
    let mut c = running(id, 0, finished_at.saturating_sub(10 * SEC));
    c.status.finished_at = finished_at;
    c.status.exit_code = 0;
    c.status.reason = "Completed".to_string();
    c.status_written_at = written_at;
    c
}

pub fn process(pid: i32, state: char, started_at: i64) -> ProcessInfo {
    ProcessInfo {
        pid,
        ppid: 1,
        comm: "sh".to_string(),
        state,
        started_at,
        rss_bytes: 0,
    }
}

/// containerd's API answered: these are the container records of k8s.io.
pub fn with_records(s: &mut Snapshot, ids: &[String]) {
    let mut view = ContainerdView::default();
    view.namespaces.insert(
        "k8s.io".to_string(),
        NamespaceView {
            containers: Some(ids.iter().cloned().collect()),
            tasks: Some(Vec::new()),
            ..Default::default()
        },
    );
    s.containerd = Some(view);
}

/// A look with `-n namespace`: containerd answered for it (no records)
/// and for `k8s.io`, which knows `known`.
pub fn looked_at_in(known: &str, namespace: &str) -> Snapshot {
    let mut s = snapshot();
    s.namespace = namespace.to_string();
    with_records(&mut s, &[known.to_string()]);
    let empty = NamespaceView {
        containers: Some(Default::default()),
        tasks: Some(Vec::new()),
        ..Default::default()
    };
    let view = s.containerd.as_mut().expect("with_records answered");
    view.namespaces.insert(namespace.to_string(), empty);
    s
}

/// The naming labels kubelet sets (CRI adds the kind); `container`
/// `None` for a sandbox.
pub fn labels(namespace: &str, pod: &str, container: Option<&str>) -> BTreeMap<String, String> {
    let kind = if container.is_some() {
        "container"
    } else {
        "sandbox"
    };
    [
        (POD_NAMESPACE_LABEL, Some(namespace)),
        (POD_NAME_LABEL, Some(pod)),
        (CONTAINER_NAME_LABEL, container),
        (KIND_LABEL, Some(kind)),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_string(), v?.to_string())))
    .collect()
}

/// containerd's record of `id` in k8s.io carries `labels` (after
/// [`with_records`], which lists the ids).
pub fn with_labels(s: &mut Snapshot, id: &str, labels: BTreeMap<String, String>) {
    let view = s.containerd.as_mut().expect("with_records first");
    let namespace = view
        .namespaces
        .get_mut("k8s.io")
        .expect("with_records first");
    namespace.labels.insert(id.to_string(), labels);
}

/// A sandbox as CRI's ListPodSandbox shows it.
pub fn cri_sandbox(id: &str, namespace: &str, name: &str) -> CriItem {
    CriItem {
        id: id.to_string(),
        state: CriApiState::SandboxReady,
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        ..CriItem::default()
    }
}

/// CRI's answer (ListPodSandbox only) with one sandbox, of pod shop/cart,
/// for each pod uid of `uids`: what the checks of kubelet's objects judge by.
pub fn cri_listing_pod_uids(uids: &[&str]) -> CriView {
    CriView {
        sandboxes: Some(
            uids.iter()
                .map(|uid| CriItem {
                    uid: Some(uid.to_string()),
                    ..cri_sandbox(&id('a'), "shop", "cart")
                })
                .collect(),
        ),
        ..CriView::default()
    }
}

/// A container as CRI's ListContainers shows it.
pub fn cri_container(id: &str, sandbox: &str, name: &str, state: CriApiState) -> CriItem {
    CriItem {
        id: id.to_string(),
        sandbox_id: Some(sandbox.to_string()),
        state,
        name: Some(name.to_string()),
        ..CriItem::default()
    }
}

pub fn child(pid: i32, ppid: i32, state: char) -> ProcessInfo {
    ProcessInfo {
        ppid,
        ..process(pid, state, NOW - 100 * SEC)
    }
}

pub fn bundle(container: &str, sandbox: &str, name: &str) -> Bundle {
    let annotations = [
        ("io.kubernetes.cri.container-name", name),
        ("io.kubernetes.cri.sandbox-name", "web-0"),
        ("io.kubernetes.cri.sandbox-namespace", "shop"),
        ("io.kubernetes.cri.sandbox-id", sandbox),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    Bundle {
        id: container.to_string(),
        path: PathBuf::from(format!(
            "/run/containerd/io.containerd.runtime.v2.task/k8s.io/{container}"
        )),
        annotations,
        spec_error: None,
        shim_pid: None,
        shim_socket: None,
    }
}

pub fn shim(pid: i32, sandbox: &str, address: &str, syscalls: &[&str]) -> Shim {
    Shim {
        pid,
        binary: "containerd-shim-runc-v2".to_string(),
        namespace: Some("k8s.io".to_string()),
        id: Some(sandbox.to_string()),
        address: Some(address.to_string()),
        action: None,
        cwd: None,
        proof: None,
        threads: syscalls
            .iter()
            .enumerate()
            .map(|(i, s)| ThreadSample {
                tid: pid + i as i32,
                state: Some('S'),
                syscall: Some(s.to_string()),
                wchan: None,
            })
            .collect(),
    }
}

/// `shim`, with its process as procfs shows a live shim.
pub fn with_live_shim(s: &mut Snapshot, shim: Shim) {
    let process = ProcessInfo {
        comm: "containerd-shim".to_string(),
        ..process(shim.pid, 'S', NOW - 60 * SEC)
    };
    s.processes.insert(shim.pid, process);
    s.shims.push(shim);
}

pub(crate) const NS: NamespaceIds = NamespaceIds {
    user: 1,
    pid: 2,
    mnt: 3,
};
pub(crate) const SOCKET: FileId = FileId { dev: 8, ino: 99 };

/// A shim whose facts are containerd's.
pub(crate) fn proven(mut shim: Shim) -> Shim {
    shim.proof = Some(ShimProof {
        exe: Some("/usr/bin/containerd-shim-runc-v2".into()),
        exe_regular: true,
        exe_uid: Some(0),
        exe_mode: Some(0o755),
        uids: vec![0, 0, 0, 0],
        namespaces: Some(NS),
        address_file: Some(SOCKET),
        listens: None,
        unreadable: Vec::new(),
        reference: ProofReference {
            described: "containerd pid 812".to_string(),
            uid: 0,
            namespaces: Some(NS),
            address_file: Some(SOCKET),
        },
    });
    shim
}

/// CNI as libcni's cache leaves it for a pod of uid `uid` (shop/cart) whose
/// network teardown never ran.
pub fn named_in_cache(uid: &str) -> crate::model::CniView {
    crate::model::CniView {
        attachments: vec![crate::model::CachedAttachment {
            network: "pods".into(),
            container_id: "a".repeat(64),
            ifname: "eth0".into(),
            netns: None,
            pod_namespace: Some("shop".into()),
            pod_name: Some("cart".into()),
            pod_uid: Some(uid.into()),
        }],
        ..crate::model::CniView::default()
    }
}
