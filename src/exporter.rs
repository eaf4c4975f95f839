//! The HTTP side of `nodectl serve`: `/metrics` answers from the last run
//! (never runs a check itself), `/healthz` says whether the loop keeps
//! running, anything else is 404.
//!
//! No client can keep a scrape waiting, however many connections it opens
//! and leaves silent: every connection is accepted at once (none waits for
//! a slot behind silent ones), up to a cap on open connections kept under
//! the descriptor limit. At the cap, the connection that has waited longest
//! without sending its request is closed to make room (only when none is
//! waiting, the oldest being answered: a slow reader), so a flood of idle
//! connections costs its own oldest, never a scraper that sends its request
//! as it connects. A client gets [`REQUEST_HEAD`] from connecting to send
//! its request (at most [`MAX_REQUEST_HEAD`] bytes) and [`CONNECTION`] in
//! all, then is cut off; one request per connection (no keep-alive). The
//! answer is a clone of bytes rendered once per run, so a scrape costs no
//! rendering either.

use std::collections::BTreeMap;
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
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// The most connections held open at once, when the descriptor limit
/// allows (see [`connection_cap`]). Each costs about 1 KiB while silent and
/// at most about 20 KiB once it sends (hyper's buffers, bounded by
/// [`MAX_REQUEST_HEAD`]), so the cap bounds the server's memory to a few
/// tens of MiB, under the DaemonSet's limit beside a check.
pub const MAX_CONNECTIONS: usize = 2048;
/// Descriptors left to the check loop (procfs, the store, the API
/// sockets) beside the connections, so a flood never makes a check fail to
/// open a file.
pub const RESERVED_DESCRIPTORS: u64 = 256;
/// The cap when the descriptor limit is tiny.
const MIN_CONNECTIONS: usize = 8;
/// How long a client has from connecting to send its request line and
/// headers: Prometheus sends them at once.
pub const REQUEST_HEAD: Duration = Duration::from_secs(3);
/// How long a connection may last in all, answer included.
pub const CONNECTION: Duration = Duration::from_secs(10);
/// The largest request head read (hyper's smallest buffer; a scrape's head,
/// a bearer token included, is a few hundred bytes). Larger is 431.
pub const MAX_REQUEST_HEAD: usize = 8192;

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

/// How many connections to hold open with `open_files` descriptors
/// (RLIMIT_NOFILE's soft limit): [`MAX_CONNECTIONS`], less when the limit
/// leaves fewer beside [`RESERVED_DESCRIPTORS`].
pub fn connection_cap(open_files: u64) -> usize {
    let spare =
        usize::try_from(open_files.saturating_sub(RESERVED_DESCRIPTORS)).unwrap_or(usize::MAX);
    spare.clamp(MIN_CONNECTIONS, MAX_CONNECTIONS)
}

/// Serves `listener`, holding at most `cap` connections open, until the
/// task is dropped.
pub async fn serve(listener: TcpListener, latest: Shared, health: Health, cap: usize) {
    let open = Arc::new(Mutex::new(Open::new(cap)));
    loop {
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
        let admitted = lock(&open).admit();
        tokio::spawn(connection(
            stream,
            admitted,
            open.clone(),
            latest.clone(),
            health,
        ));
    }
}

/// One connection, from accepting it to closing it: cut off when made room
/// for, at its deadlines, or once answered.
async fn connection(
    stream: TcpStream,
    admitted: Admitted,
    open: Arc<Mutex<Open>>,
    latest: Shared,
    health: Health,
) {
    let accepted = tokio::time::Instant::now();
    let id = admitted.id;
    let _registered = Registered {
        open: open.clone(),
        id,
    };
    let closing = admitted.closing;
    // Silent until its first byte, a connection costs only its socket and
    // this task: hyper's buffers are made once there is something to read.
    // (A peek, as `readable()` may report a silent socket ready.)
    let head_deadline = accepted + REQUEST_HEAD;
    let mut first_byte = [0u8; 1];
    tokio::select! {
        () = closing.notified() => return,
        peeked = tokio::time::timeout_at(head_deadline, stream.peek(&mut first_byte)) => {
            // Closed before sending anything, or silent until the deadline.
            if !matches!(peeked, Ok(Ok(1..))) {
                return;
            }
        }
    }
    let service = service_fn(move |request| {
        // From here it is closed to make room only after every silent one.
        // (Chosen just as its head came in, it is closed all the same.)
        lock(&open).answering(id);
        let answer = respond(&request, &latest, health);
        async move { Ok::<_, Infallible>(answer) }
    });
    let answered = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(head_deadline.saturating_duration_since(tokio::time::Instant::now()))
        .max_buf_size(MAX_REQUEST_HEAD)
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service);
    // Boxed: the silent phase above keeps the task small.
    let answered = Box::pin(tokio::time::timeout_at(accepted + CONNECTION, answered));
    tokio::select! {
        () = closing.notified() => {}
        _ = answered => {}
    }
}

fn lock(open: &Mutex<Open>) -> std::sync::MutexGuard<'_, Open> {
    open.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The open connections, by the order they were accepted in: those still
/// waiting for their request, and those being answered.
#[derive(Debug)]
struct Open {
    cap: usize,
    next_id: u64,
    waiting: BTreeMap<u64, Arc<Notify>>,
    answering: BTreeMap<u64, Arc<Notify>>,
}

/// A connection let in: its id, and what tells it to close.
struct Admitted {
    id: u64,
    closing: Arc<Notify>,
}

/// Takes a connection off the open ones when its task ends, however.
struct Registered {
    open: Arc<Mutex<Open>>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        lock(&self.open).remove(self.id);
    }
}

impl Open {
    fn new(cap: usize) -> Open {
        Open {
            cap: cap.max(1),
            next_id: 0,
            waiting: BTreeMap::new(),
            answering: BTreeMap::new(),
        }
    }

    fn len(&self) -> usize {
        self.waiting.len() + self.answering.len()
    }

    /// Lets a new connection in, first closing one when at the cap: the
    /// one waiting longest for its request, else the one answered longest
    /// (it reads its answer slowly: a scrape's is sent in one go).
    fn admit(&mut self) -> Admitted {
        while self.len() >= self.cap {
            let oldest = self
                .waiting
                .pop_first()
                .or_else(|| self.answering.pop_first());
            if let Some((_, closing)) = oldest {
                closing.notify_one();
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        let closing = Arc::new(Notify::new());
        self.waiting.insert(id, closing.clone());
        Admitted { id, closing }
    }

    /// `id` has sent its request: it is made room for only after every
    /// connection still waiting.
    fn answering(&mut self, id: u64) {
        if let Some(closing) = self.waiting.remove(&id) {
            self.answering.insert(id, closing);
        }
    }

    fn remove(&mut self, id: u64) {
        self.waiting.remove(&id);
        self.answering.remove(&id);
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

    /// Whether `admitted` has been told to close.
    async fn told_to_close(admitted: &Admitted) -> bool {
        tokio::time::timeout(Duration::ZERO, admitted.closing.notified())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn at_the_cap_the_longest_silent_connection_makes_room() {
        let mut open = Open::new(3);
        let first = open.admit();
        let second = open.admit();
        let third = open.admit();
        // The first has sent its request: the silent second goes first.
        open.answering(first.id);
        let fourth = open.admit();
        assert!(told_to_close(&second).await);
        assert!(!told_to_close(&first).await);
        assert!(!told_to_close(&third).await);
        let fifth = open.admit();
        assert!(told_to_close(&third).await);
        assert!(!told_to_close(&first).await);
        assert_eq!(open.len(), 3);
        // All being answered (slow readers): the one answered longest.
        open.answering(fourth.id);
        open.answering(fifth.id);
        let sixth = open.admit();
        assert!(told_to_close(&first).await);
        assert!(!told_to_close(&fourth).await);
        // A connection that ended leaves room without closing another.
        open.remove(fifth.id);
        let _seventh = open.admit();
        assert!(!told_to_close(&fourth).await);
        assert!(!told_to_close(&sixth).await);
        assert_eq!(open.len(), 3);
    }

    #[test]
    fn the_cap_leaves_descriptors_to_the_check_loop() {
        assert_eq!(connection_cap(1_048_576), MAX_CONNECTIONS);
        assert_eq!(connection_cap(1024), 1024 - RESERVED_DESCRIPTORS as usize);
        assert_eq!(connection_cap(100), MIN_CONNECTIONS);
        assert_eq!(connection_cap(u64::MAX), MAX_CONNECTIONS);
    }

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
