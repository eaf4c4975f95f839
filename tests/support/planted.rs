//! Leftovers made directly where containerd, CRI and the kernel keep them,
//! for the tests that plant several kinds at once (each kind's own real
//! test shows how containerd's own code path leaves it):
//!
//! - [`TestBed::leak_rootfs`]: a task bundle of no record with its rootfs
//!   still mounted (`leaked-mount`, and `orphan-bundle` for its bundle);
//! - [`mount_empty_netns`]: a pod network namespace CRI's `pkg/netns` would
//!   mount, with no record naming it (`leaked-netns`);
//! - [`TestBed::twin_sandbox_record`]: a second sandbox container carrying
//!   a sandbox's CRI name (`duplicate-sandbox-name`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use containerd_client::services::v1::containers_client::ContainersClient;
use containerd_client::services::v1::{CreateContainerRequest, GetContainerRequest};
use serde_json::Value;

use super::testbed::{TestBed, NAMESPACE};

/// A task's spec with no annotation: runc's shim groups it under its own id.
pub const SPEC_OF_NO_POD: &str = r#"{"ociVersion":"1.0.2","annotations":{}}"#;

/// Mounts a network namespace nothing is in at `path`, as containerd's
/// `pkg/netns` `newNS` mounts a pod's (an nsfs bind mount of a new
/// namespace onto a file in CRI's netns directory): `unshare --net=<file>`
/// makes that bind mount, and its process exits at once.
pub fn mount_empty_netns(path: &Path) {
    std::fs::write(path, b"").unwrap();
    let status = std::process::Command::new("unshare")
        .arg(format!("--net={}", path.display()))
        .arg("true")
        .status()
        .unwrap();
    assert!(status.success(), "unshare --net={}", path.display());
}

fn namespaced<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("containerd-namespace", NAMESPACE.parse().unwrap());
    request
}

impl TestBed {
    /// A leaked task bundle `<state>/io.containerd.runtime.v2.task/k8s.io/<id>`
    /// of no pod, with a tmpfs mounted on its rootfs in this (containerd's)
    /// mount namespace; its rootfs. The bed's teardown unmounts it.
    pub fn leak_rootfs(&self, id: &str) -> PathBuf {
        let bundle = self.bundles().join(id);
        let rootfs = bundle.join("rootfs");
        std::fs::create_dir_all(&rootfs).unwrap();
        std::fs::write(bundle.join("config.json"), SPEC_OF_NO_POD).unwrap();
        super::mount_tmpfs(&rootfs);
        rootfs
    }

    /// A second record of the sandbox container `sandbox`, made through
    /// containerd's containers API as a copy under another id (`sandbox`
    /// reversed), its CRI metadata naming its own id: two sandbox
    /// containers carry one CRI name, as a RunPodSandbox whose rollback
    /// left its sandbox container and kubelet's retry leave them
    /// (containerd#13609). No task: a record whose pause is gone. CRI,
    /// which loads sandboxes only at start-up, never lists it. The copy's
    /// id.
    pub async fn twin_sandbox_record(&self, sandbox: &str) -> String {
        let channel = tokio::time::timeout(
            Duration::from_secs(10),
            containerd_client::connect(self.address()),
        )
        .await
        .expect("connect in time")
        .expect("connect");
        let mut containers = ContainersClient::new(channel);
        let record = containers
            .get(namespaced(GetContainerRequest {
                id: sandbox.to_string(),
            }))
            .await
            .expect("the sandbox container's record")
            .into_inner()
            .container
            .expect("a record");
        let twin: String = sandbox.chars().rev().collect();
        let mut copy = record.clone();
        copy.id = twin.clone();
        copy.created_at = None;
        copy.updated_at = None;
        // CRI's metadata names the sandbox's own id: the twin's is its own.
        let metadata = copy
            .extensions
            .get_mut("io.cri-containerd.sandbox.metadata")
            .expect("CRI's sandbox metadata on its container");
        let mut value: Value = serde_json::from_slice(&metadata.value).expect("JSON metadata");
        value["Metadata"]["ID"] = Value::from(twin.as_str());
        metadata.value = serde_json::to_vec(&value).unwrap();
        containers
            .create(namespaced(CreateContainerRequest {
                container: Some(copy),
            }))
            .await
            .expect("containerd takes a second sandbox record");
        twin
    }
}
