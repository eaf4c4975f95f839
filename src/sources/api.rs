//! What the two API sources share: a unix-socket channel, and calls bounded
//! by one deadline and recorded with their latency.
//!
//! A containerd blocked on a stuck shim, or frozen, accepts connections on
//! its socket but never answers, so nothing here waits without a deadline.

use std::future::Future;
use std::path::Path;

use tokio::time::Instant;
use tonic::transport::Channel;

use crate::model::{Api, ApiCall, Method};

/// Runs `call` until `deadline` and records it.
pub async fn timed<T>(
    (api, method, target): (Api, Method, Option<&str>),
    deadline: Instant,
    call: impl Future<Output = Result<T, String>>,
) -> (Option<T>, ApiCall) {
    let start = Instant::now();
    let (result, timed_out) = match tokio::time::timeout_at(deadline, call).await {
        Ok(result) => (result, false),
        Err(_) => (Err("no answer before the deadline".to_string()), true),
    };
    let record = ApiCall {
        api,
        method,
        target: target.map(str::to_string),
        latency_ms: (start.elapsed().as_secs_f64() * 1e4).round() / 10.0,
        error: result.as_ref().err().cloned(),
        timed_out,
    };
    (result.ok(), record)
}

/// [`connect`] to `address` for `api` within `deadline`, the attempt
/// recorded in `calls`: every API source starts this way. With the proven
/// daemon's pid, only over a connection whose peer is that daemon
/// ([`connect_to_daemon`]): whoever serves a socket writes its answers.
pub async fn connect_recorded(
    api: Api,
    address: &Path,
    daemon: Option<i32>,
    deadline: Instant,
    calls: &mut Vec<ApiCall>,
) -> Option<Channel> {
    let connected = async {
        match daemon {
            Some(pid) => connect_to_daemon(address, pid).await,
            None => connect(address).await,
        }
    };
    let (channel, call) = timed((api, Method::Connect, None), deadline, connected).await;
    calls.push(call);
    channel
}

/// A gRPC channel to the containerd `daemon` (its pid, proven) at
/// `address`: one connection is made, its peer read on it (`SO_PEERCRED`),
/// and every call of the channel goes over that connection alone. Checking
/// the path's listener and then dialling the path again would let a process
/// rename another socket over it in between (a fake CRI that listed a live
/// pod as leaked, then the real one to remove it).
pub async fn connect_to_daemon(address: &Path, daemon: i32) -> Result<Channel, String> {
    connect_to_proven(address, daemon)
        .await
        .map_err(|not| match not {
            NotConnected::Unreachable(why) | NotConnected::NotTheDaemon(why) => why,
        })
}

/// Why [`connect_to_proven`] made no channel.
#[derive(Debug)]
pub enum NotConnected {
    /// Nothing (or nothing that answers) at the socket.
    Unreachable(String),
    /// Another process than the daemon serves it.
    NotTheDaemon(String),
}

/// [`connect_to_daemon`], saying whether it was the peer that was refused.
pub async fn connect_to_proven(address: &Path, daemon: i32) -> Result<Channel, NotConnected> {
    let connect = crate::sources::daemon_proof::connect_checked;
    let (stream, peer) = match connect(address) {
        Ok(connected) => connected,
        // nodectl in another mount namespace than the daemon (a `kubectl
        // debug node` pod: hostPID, the host's / at /host) has no file at
        // the daemon's path: the socket as the daemon has it, through its
        // own root. Its listener is held to the daemon below all the same.
        Err(why) if !address.exists() => {
            connect(&through_root(daemon, address)).map_err(|_| NotConnected::Unreachable(why))?
        }
        Err(why) => return Err(NotConnected::Unreachable(why)),
    };
    let me = nix::unistd::geteuid().as_raw();
    if peer.pid != daemon || (peer.uid != 0 && peer.uid != me) {
        return Err(NotConnected::NotTheDaemon(format!(
            "{} is served by pid {} (uid {}), not by containerd pid {daemon}",
            address.display(),
            peer.pid,
            peer.uid
        )));
    }
    over(stream).await.map_err(NotConnected::Unreachable)
}

/// `address` as the process `pid` resolves it: below its root
/// (`/proc/<pid>/root`), whatever mount namespace nodectl is in.
fn through_root(pid: i32, address: &Path) -> std::path::PathBuf {
    let relative = address.strip_prefix("/").unwrap_or(address);
    Path::new("/proc")
        .join(pid.to_string())
        .join("root")
        .join(relative)
}

/// A channel whose every call goes over `stream`, never dialling again: once
/// that connection is closed, calls fail.
pub(crate) async fn over(stream: std::os::unix::net::UnixStream) -> Result<Channel, String> {
    let once = std::sync::Mutex::new(Some(stream));
    tonic::transport::Endpoint::from_static("http://[::]")
        .connect_with_connector(tower::service_fn(move |_| {
            let stream = once.lock().unwrap_or_else(|e| e.into_inner()).take();
            async move {
                let stream = stream.ok_or_else(|| {
                    std::io::Error::other("the checked connection is closed; not dialled again")
                })?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                    tokio::net::UnixStream::from_std(stream)?,
                ))
            }
        }))
        .await
        .map_err(|err| err.to_string())
}

/// What [`connect`] says when there is nothing at the socket's path.
pub use crate::model::NO_SOCKET;

/// A gRPC channel over containerd's unix socket.
pub async fn connect(address: &Path) -> Result<Channel, String> {
    containerd_client::connect(address).await.map_err(|err| {
        if !address.exists() {
            return NO_SOCKET.to_string();
        }
        // Each cause once, `: `-separated: the transport repeats its
        // source's text.
        let mut text = String::new();
        for cause in anyhow::Error::new(err).chain() {
            let cause = cause.to_string();
            if text.is_empty() {
                text = cause;
            } else if !text.contains(&cause) {
                text = format!("{text}: {cause}");
            }
        }
        text
    })
}

/// A request to containerd about one of its namespaces.
pub fn namespaced<T>(message: T, namespace: &str) -> Result<tonic::Request<T>, String> {
    let mut request = tonic::Request::new(message);
    let value = namespace
        .parse()
        .map_err(|_| format!("namespace {namespace:?} is not a valid header value"))?;
    request.metadata_mut().insert("containerd-namespace", value);
    Ok(request)
}

/// A protobuf timestamp as unix nanoseconds (0 when absent).
pub fn unix_nanos(at: Option<&prost_types::Timestamp>) -> crate::model::cri_status::UnixNanos {
    at.map_or(0, |at| {
        at.seconds
            .saturating_mul(1_000_000_000)
            .saturating_add(i64::from(at.nanos))
    })
}

pub fn status_text(status: tonic::Status) -> String {
    format!("{:?}: {}", status.code(), status.message())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect_error(address: &Path) -> String {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime
            .block_on(connect(address))
            .expect_err("nothing listens there")
    }

    #[test]
    fn the_daemons_channel_goes_over_the_connection_checked_never_the_path_again() {
        use std::io::Read;
        use std::os::unix::net::UnixListener;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // A channel's buffer lives on the runtime.
        let _inside = runtime.enter();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("containerd.sock");
        let checked = UnixListener::bind(&path).unwrap();
        let me = std::process::id() as i32;
        // Another pid than the listener's: refused.
        let other = runtime
            .block_on(connect_to_daemon(&path, me + 1))
            .unwrap_err();
        assert!(other.contains(&format!("served by pid {me}")), "{other}");
        drop(checked.accept().unwrap());
        let channel = runtime.block_on(connect_to_daemon(&path, me)).unwrap();
        // Then another socket is renamed over the path.
        let swapped = dir.path().join("swapped.sock");
        let impostor = UnixListener::bind(&swapped).unwrap();
        impostor.set_nonblocking(true).unwrap();
        std::fs::rename(&swapped, &path).unwrap();
        let call = |channel: Channel| {
            let mut client =
                containerd_client::services::v1::version_client::VersionClient::new(channel);
            let asked = async { client.version(()).await };
            runtime.block_on(tokio::time::timeout(
                std::time::Duration::from_millis(500),
                asked,
            ))
        };
        let _ = call(channel.clone());
        // The call went to the listener that was checked...
        let (mut first, _) = checked.accept().unwrap();
        first
            .set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let mut preface = [0; 24];
        first.read_exact(&mut preface).unwrap();
        assert_eq!(&preface, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        // ... and, once that connection is gone, nowhere: never dialled again.
        drop(first);
        let answer = call(channel);
        assert!(!matches!(answer, Ok(Ok(_))), "{answer:?}");
        let dialled = impostor.accept();
        assert!(
            matches!(&dialled, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "the renamed socket was dialled: {dialled:?}"
        );
    }

    #[test]
    fn nothing_at_the_path_is_said_in_three_words() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(connect_error(&dir.path().join("missing.sock")), NO_SOCKET);
    }

    /// A socket file nobody listens on (containerd gone, its socket left):
    /// the transport's error with each cause once.
    #[test]
    fn a_refused_connection_names_each_cause_once() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("stale.sock");
        drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
        let error = connect_error(&socket);
        let causes: Vec<&str> = error.split(": ").collect();
        assert!(
            causes.len() > 1,
            "the transport's error and its cause: {error}"
        );
        for (n, cause) in causes.iter().enumerate() {
            assert!(
                !causes[n + 1..].iter().any(|later| later.contains(cause)),
                "{cause:?} said twice: {error}"
            );
        }
    }
}
