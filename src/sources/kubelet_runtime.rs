//! Whether a running kubelet is the kubelet of the containerd nodectl
//! checks. Its pods, directories and cgroups are judged against this
//! containerd's CRI: a kubelet that runs its pods on another runtime (a
//! second containerd on the same machine, a test bed beside another) would
//! have every pod of its own called one with no sandbox.
//!
//! kubelet's word on its runtime is its `--container-runtime-endpoint`, else
//! its config's `containerRuntimeEndpoint` (files and drop-ins, as kubelet
//! merges them), else its default (`unix:///run/containerd/containerd.sock`,
//! `SetDefaults_KubeletConfiguration` in kubelet 1.27 to 1.37). That path is
//! opened as kubelet resolves it (through its root when it runs in another
//! mount namespace) and compared with the socket nodectl talks to by device
//! and inode, never by spelling: a symlink or a bind mount of the same socket
//! is the same runtime.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rustix::fs::OFlags;

use crate::sources::host_view::open_in_root;
use crate::sources::kubelet::RunningKubelet;
use crate::sources::kubelet_config;

/// kubelet's runtime endpoint when it is given none.
pub const DEFAULT_ENDPOINT: &str = "unix:///run/containerd/containerd.sock";

/// Why `kubelet` runs its pods on another runtime than the containerd whose
/// socket nodectl reaches at `ours`, when the kernel says so: both sockets
/// exist and are different files. `None` when it is ours, or when that
/// cannot be told (its endpoint unreadable, not a unix socket path, or
/// either file missing): then kubelet is taken as before, as the node's.
pub fn other_runtime(kubelet: &RunningKubelet, ours: &Path) -> Option<String> {
    // Its config files were read (and any gap said) for its roots already;
    // a file unreadable here only leaves the endpoint unknown.
    let mut unsaid = Vec::new();
    let endpoint = kubelet_config::setting(
        &kubelet.args,
        &kubelet.cwd,
        "containerRuntimeEndpoint",
        "--container-runtime-endpoint",
        &mut unsaid,
    )
    .and_then(|setting| setting.value.as_str().map(str::to_string))
    .filter(|endpoint| !endpoint.is_empty())
    .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
    let path = socket_path(&endpoint)?;
    let theirs = match &kubelet.cwd.root {
        Some(root) => open_in_root(root, Path::new(path), OFlags::PATH)
            .and_then(|file| file.metadata())
            .ok()?,
        None => fs::metadata(path).ok()?,
    };
    let ours_meta = fs::metadata(ours).ok()?;
    let same = (theirs.dev(), theirs.ino()) == (ours_meta.dev(), ours_meta.ino());
    (!same).then(|| {
        format!(
            "kubelet (pid {}) runs its pods on the runtime at {endpoint}, another socket than \
             containerd's {}",
            kubelet.pid,
            ours.display()
        )
    })
}

/// The file of a unix socket endpoint (`unix:///path` or `/path`), as
/// kubelet's `util.GetAddressAndDialer` takes it; none for another scheme.
fn socket_path(endpoint: &str) -> Option<&str> {
    let path = endpoint.strip_prefix("unix://").unwrap_or(endpoint);
    path.starts_with('/').then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::kubelet_config::KubeletFiles;
    use std::os::unix::net::UnixListener;

    fn kubelet_with(args: &[&str]) -> RunningKubelet {
        RunningKubelet {
            pid: 4242,
            args: args.iter().map(|a| a.to_string()).collect(),
            flags_origin: crate::model::Origin::Process,
            cwd: KubeletFiles {
                cwd: std::env::temp_dir(),
                root: None,
            },
        }
    }

    #[test]
    fn a_kubelet_is_another_runtimes_only_when_its_socket_is_another_file() {
        let dir = tempfile::tempdir().unwrap();
        let ours = dir.path().join("containerd.sock");
        let other = dir.path().join("other.sock");
        let _ours = UnixListener::bind(&ours).unwrap();
        let _other = UnixListener::bind(&other).unwrap();
        let link = dir.path().join("link.sock");
        std::os::unix::fs::symlink(&ours, &link).unwrap();

        let flag = |path: &Path| format!("--container-runtime-endpoint=unix://{}", path.display());
        // Another socket: another runtime, said with its endpoint.
        let why = other_runtime(&kubelet_with(&[&flag(&other)]), &ours).unwrap();
        assert!(why.contains("other.sock"), "{why}");
        // The same socket, spelt the same, through a symlink, or without
        // the scheme: ours.
        assert_eq!(other_runtime(&kubelet_with(&[&flag(&ours)]), &ours), None);
        assert_eq!(other_runtime(&kubelet_with(&[&flag(&link)]), &ours), None);
        let bare = format!("--container-runtime-endpoint={}", ours.display());
        assert_eq!(other_runtime(&kubelet_with(&[&bare]), &ours), None);
        // Cannot be told: a missing socket, another scheme, our own socket
        // missing. kubelet stays the node's.
        let gone = dir.path().join("gone.sock");
        assert_eq!(other_runtime(&kubelet_with(&[&flag(&gone)]), &ours), None);
        let tcp = "--container-runtime-endpoint=tcp://127.0.0.1:1234";
        assert_eq!(other_runtime(&kubelet_with(&[tcp]), &ours), None);
        assert_eq!(other_runtime(&kubelet_with(&[&flag(&other)]), &gone), None);
    }

    #[test]
    fn a_kubelet_without_an_endpoint_runs_on_the_default_socket() {
        assert_eq!(
            socket_path(DEFAULT_ENDPOINT),
            Some("/run/containerd/containerd.sock")
        );
        assert_eq!(socket_path("npipe:////./pipe/containerd"), None);
    }
}
