//! The HTTP side of `nodectl serve`: `/metrics` answers from the last run
//! (never runs a check itself), `/healthz` says whether the loop keeps
//! running, anything else is 404.
//!
//! A scrape can neither hold the loop nor crowd out another scrape for long:
//! at most [`CONNECTIONS`] connections are served at once (the next ones
//! wait in the kernel's backlog); a client gets [`REQUEST_HEAD`] to send its
//! request and [`CONNECTION`] in all, then is cut off; one request per
//! connection (no keep-alive, so an idle client holds nothing). The answer
//! is a clone of bytes rendered once per run, so a scrape costs no
//! rendering either.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Connections served at once.
pub const CONNECTIONS: usize = 4;
/// How long a client has to send its request line and headers.
pub const REQUEST_HEAD: Duration = Duration::from_secs(5);
/// How long a connection may last in all, answer included.
pub const CONNECTION: Duration = Duration::from_secs(10);

/// Prometheus's text exposition format.
const METRICS_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
const TEXT_TYPE: &str = "text/plain; charset=utf-8";

/// What the loop last produced, read by every scrape.
#[derive(Debug, Default)]
pub struct Latest {
    /// The last run's metrics, rendered (None until the first run ends).
    pub metrics: Option<Bytes>,
    /// When the last run ended.
    pub finished: Option<Instant>,
}

pub type Shared = Arc<Mutex<Latest>>;

/// When `/healthz` says the loop is stuck.
#[derive(Debug, Clone, Copy)]
pub struct Health {
    /// When serving started (the first run is under way from then).
    pub started: Instant,
    /// How long after the last run's end (or the start) a run must have
    /// ended: a few intervals and the longest a run can take.
    pub stale_after: Duration,
}

/// Serves `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, latest: Shared, health: Health) {
    let slots = Arc::new(Semaphore::new(CONNECTIONS));
    loop {
        // Taken before accepting: beyond the limit, clients wait in the
        // backlog and cost nothing here.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(err) => {
                // Out of descriptors, or a connection reset before it was
                // accepted: wait a little rather than spin.
                eprintln!("nodectl: serve: accepting a connection: {err}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let latest = latest.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = service_fn(move |request| {
                let answer = respond(&request, &latest, health);
                async move { Ok::<_, Infallible>(answer) }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(REQUEST_HEAD)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            // A client that reads its answer too slowly is dropped too.
            let _ = tokio::time::timeout(CONNECTION, connection).await;
        });
    }
}

fn respond(
    request: &Request<Incoming>,
    latest: &Mutex<Latest>,
    health: Health,
) -> Response<Full<Bytes>> {
    let path = request.uri().path();
    if path != "/metrics" && path != "/healthz" {
        return text(
            StatusCode::NOT_FOUND,
            "not found: try /metrics or /healthz\n",
        );
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut answer = text(StatusCode::METHOD_NOT_ALLOWED, "GET or HEAD only\n");
        answer
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return answer;
    }
    let (metrics, finished) = {
        let latest = latest
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        (latest.metrics.clone(), latest.finished)
    };
    match path {
        "/metrics" => match metrics {
            Some(metrics) => {
                let mut answer = Response::new(Full::new(metrics));
                answer
                    .headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static(METRICS_TYPE));
                answer
            }
            None => text(
                StatusCode::SERVICE_UNAVAILABLE,
                "the first check has not finished yet\n",
            ),
        },
        _ => {
            let (status, body) = healthz(finished, health, Instant::now());
            text(status, &body)
        }
    }
}

/// `/healthz`: 200 while runs keep ending; 503 before the first one ends
/// (nothing to scrape yet) and once none has ended for `stale_after`.
fn healthz(finished: Option<Instant>, health: Health, now: Instant) -> (StatusCode, String) {
    let since = now.saturating_duration_since(finished.unwrap_or(health.started));
    if since > health.stale_after {
        let what = if finished.is_some() {
            "no check has finished for"
        } else {
            "the first check has not finished after"
        };
        let body = format!("stuck: {what} {}s\n", since.as_secs());
        return (StatusCode::SERVICE_UNAVAILABLE, body);
    }
    match finished {
        Some(_) => (
            StatusCode::OK,
            format!("ok: the last check finished {}s ago\n", since.as_secs()),
        ),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "starting: the first check has not finished yet\n".to_string(),
        ),
    }
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut answer = Response::new(Full::new(Bytes::from(body.to_string())));
    *answer.status_mut() = status;
    answer
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(TEXT_TYPE));
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthz_is_ok_only_while_runs_keep_ending() {
        let started = Instant::now();
        let health = Health {
            started,
            stale_after: Duration::from_secs(300),
        };
        let at = |secs| started + Duration::from_secs(secs);
        assert_eq!(
            healthz(None, health, at(10)).0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        let (status, body) = healthz(None, health, at(301));
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.starts_with("stuck: the first check"), "{body}");
        assert_eq!(healthz(Some(at(20)), health, at(30)).0, StatusCode::OK);
        assert_eq!(healthz(Some(at(20)), health, at(320)).0, StatusCode::OK);
        let (status, body) = healthz(Some(at(20)), health, at(321));
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, "stuck: no check has finished for 301s\n");
    }
}
