//! kubelet's own word on its pods: its pod-resources API
//! (`<kubelet root>/pod-resources/kubelet.sock`, k8s.io/kubelet
//! `pkg/apis/podresources/v1/api.proto`), whose `PodResourcesLister.List`
//! answers with the pods kubelet has active (Pending, Running), by
//! namespace and name, to any root process on the node.
//!
//! Whoever serves the socket writes the answer, and an answer that leaves a
//! pod out lets its cgroup be removed: the listener is proven kubelet's as
//! containerd's is (`SO_PEERCRED` on the very connection the call goes
//! over; the process root, in the host's mount and pid namespaces, from a
//! root-owned executable no one else may write). The call is bounded.

use std::path::Path;
use std::time::Duration;

use crate::model::{Gap, KubeletWord, PodName, Source};
use crate::sources::daemon_proof;

/// Where kubelet serves it below its root (`getPodResourcesDir`).
pub const SOCKET: &str = "pod-resources/kubelet.sock";
/// The gRPC method: package `v1`, service `PodResourcesLister`.
const LIST: &str = "/v1.PodResourcesLister/List";
/// A List answer names every pod of the node with its containers'
/// devices: a few hundred kB on a full node.
const ANSWER_LIMIT: usize = 16 * 1024 * 1024;

/// The few messages of api.proto nodectl reads (fields it does not read
/// are skipped by prost as unknown).
pub mod v1 {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ListPodResourcesRequest {}

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ListPodResourcesResponse {
        #[prost(message, repeated, tag = "1")]
        pub pod_resources: Vec<PodResources>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PodResources {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub namespace: String,
    }
}

/// kubelet's word, asked at `<root>/pod-resources/kubelet.sock` within
/// `timeout`; why not, when it cannot be had. `kubelets` are the pids of
/// the kubelets nodectl believes (see `kubelet::running`): when there are
/// any, only one of them may answer, for the socket is a file below
/// kubelet's root that a pod with a hostPath there can replace with its
/// own listener (and its answer would leave pods out).
///
/// A listener not believed is a gap as well (`gaps`): kubelet's word was
/// there to be had and someone else answers in its place, so what needs it
/// could not be checked. No socket, or no answer in time, is said in the
/// word only (no kubelet runs, or it is the kubelet that is slow).
pub fn ask(
    kubelet_root: &Path,
    proc_root: &Path,
    kubelets: &[i32],
    timeout: Duration,
    gaps: &mut Vec<Gap>,
) -> KubeletWord {
    let socket = kubelet_root.join(SOCKET);
    let unavailable = |why: String| KubeletWord::Unavailable {
        why: format!("kubelet's pod-resources API ({}): {why}", socket.display()),
    };
    let (stream, peer) = match daemon_proof::connect_checked(&socket) {
        Ok(connected) => connected,
        // kubelet not running, or not here: said plainly.
        Err(_) if std::fs::symlink_metadata(&socket).is_err() => {
            return unavailable("it does not exist".to_string())
        }
        Err(why) => return unavailable(why),
    };
    if let Some(why) = not_kubelets(proc_root, peer, kubelets) {
        let why = format!("its listener is not believed: {why}");
        gaps.push(Gap::item(
            Source::Kubelet,
            &socket,
            format!("kubelet's pod-resources API: {why}"),
        ));
        return unavailable(why);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return unavailable(err.to_string()),
    };
    let asked = runtime.block_on(async {
        tokio::time::timeout(timeout, list(stream))
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "no answer within {}",
                    humantime::format_duration(timeout)
                ))
            })
    });
    match asked {
        Ok(pods) => KubeletWord::Listed { pods },
        Err(why) => unavailable(why),
    }
}

/// Why the process listening as `peer` is not one nodectl may believe, if
/// it is not.
fn not_kubelets(proc_root: &Path, peer: daemon_proof::Peer, kubelets: &[i32]) -> Option<String> {
    if peer.pid == 0 {
        return Some("its listener runs in a pid namespace nodectl cannot see".to_string());
    }
    if !kubelets.is_empty() && !kubelets.contains(&peer.pid) {
        let running: Vec<String> = kubelets.iter().map(i32::to_string).collect();
        return Some(format!(
            "pid {} serves it, not the kubelet running (pid {}): a process that can \
             write below kubelet's root (a pod's hostPath) may have put it there",
            peer.pid,
            running.join(", ")
        ));
    }
    let host = daemon_proof::host(proc_root);
    let facts = daemon_proof::facts(proc_root, peer.pid);
    daemon_proof::disqualified(&facts, host.as_ref()).map(|why| format!("pid {}: {why}", peer.pid))
}

async fn list(stream: std::os::unix::net::UnixStream) -> Result<Vec<PodName>, String> {
    let channel = crate::sources::api::over(stream).await?;
    let mut client = tonic::client::Grpc::new(channel).max_decoding_message_size(ANSWER_LIMIT);
    client
        .ready()
        .await
        .map_err(|err| format!("not ready: {err}"))?;
    let codec = tonic_prost::ProstCodec::<v1::ListPodResourcesRequest, v1::ListPodResourcesResponse>::default();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(LIST);
    let request = tonic::Request::new(v1::ListPodResourcesRequest {});
    let answer = client
        .unary(request, path, codec)
        .await
        .map_err(crate::sources::api::status_text)?;
    let mut pods: Vec<PodName> = answer
        .into_inner()
        .pod_resources
        .into_iter()
        .map(|pod| PodName {
            namespace: pod.namespace,
            name: pod.name,
        })
        .collect();
    pods.sort();
    pods.dedup();
    Ok(pods)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(word: KubeletWord) -> String {
        match word {
            KubeletWord::Unavailable { why } => why,
            KubeletWord::Listed { pods } => panic!("listed {pods:?}"),
        }
    }

    #[test]
    fn no_socket_or_no_listener_is_said_so_never_an_empty_list() {
        let root = tempfile::tempdir().unwrap();
        let proc_root = Path::new("/proc");
        let absent = why(ask(
            root.path(),
            proc_root,
            &[],
            Duration::from_secs(1),
            &mut Vec::new(),
        ));
        assert!(
            absent.ends_with("kubelet.sock): it does not exist"),
            "{absent}"
        );
        // kubelet stopped, its socket left behind.
        std::fs::create_dir_all(root.path().join("pod-resources")).unwrap();
        drop(std::os::unix::net::UnixListener::bind(root.path().join(SOCKET)).unwrap());
        let stale = why(ask(
            root.path(),
            proc_root,
            &[],
            Duration::from_secs(1),
            &mut Vec::new(),
        ));
        assert!(stale.contains("connection refused"), "{stale}");
    }

    /// A listener that accepts and never answers (a kubelet frozen): the
    /// ask ends at its timeout, said so. Its listener is this test, root
    /// in the host's namespaces when run as root (as CI runs it).
    #[test]
    fn a_listener_that_never_answers_is_bounded_by_the_timeout() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("pod-resources")).unwrap();
        let _frozen = std::os::unix::net::UnixListener::bind(root.path().join(SOCKET)).unwrap();
        let started = std::time::Instant::now();
        let why = why(ask(
            root.path(),
            Path::new("/proc"),
            &[],
            Duration::from_millis(300),
            &mut Vec::new(),
        ));
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        let expected = match nix::unistd::geteuid().is_root() {
            true => "no answer within 300ms",
            // Not root: this test's process is no kubelet to believe.
            false => "not believed",
        };
        assert!(why.contains(expected), "{why}");
    }
}
