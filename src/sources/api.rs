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

/// A gRPC channel over containerd's unix socket.
pub async fn connect(address: &Path) -> Result<Channel, String> {
    containerd_client::connect(address).await.map_err(|err| {
        // Each cause after the error, `: `-separated.
        let mut text = format!("{:#}", anyhow::Error::new(err));
        if !address.exists() {
            text = format!("socket does not exist ({text})");
        }
        text
    })
}

pub fn status_text(status: tonic::Status) -> String {
    format!("{:?}: {}", status.code(), status.message())
}
