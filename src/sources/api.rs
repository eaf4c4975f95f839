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
/// recorded in `calls`: every API source starts this way.
pub async fn connect_recorded(
    api: Api,
    address: &Path,
    deadline: Instant,
    calls: &mut Vec<ApiCall>,
) -> Option<Channel> {
    let (channel, call) = timed((api, Method::Connect, None), deadline, connect(address)).await;
    calls.push(call);
    channel
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
