//! containerd's event stream (`containerd.services.events.v1.Events/
//! Subscribe`), for `watch` and `serve`: each event of CRI's namespace
//! decoded into an [`Event`], the stream reconnected with backoff.
//!
//! Subscribed only to the daemon a look proved, over one connection whose
//! peer is that daemon (`api::connect_to_daemon`: the descriptor's
//! `SO_PEERCRED`, never the path resolved again): whoever serves the socket
//! writes the events, and a socket renamed over the path after the check
//! gets no subscription. After a reconnect the peer is checked again, with
//! the pid the latest look proved (containerd restarted has a new one).
//!
//! The stream has no replay: what containerd publishes while nobody
//! listens is gone (and a shim drops an event after 5 failed sends, so a
//! containerd restart of more than about 15 s loses exits). Whoever
//! listens therefore looks at the whole node again after each (re)connect.
//! Connecting is bounded; the stream itself (containerd sends nothing, not
//! even its answer to the subscription, before the first event) may stay
//! silent for as long as nothing happens: the listener's periodic look is
//! what a frozen containerd meets.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use containerd_client::events::{ContainerDelete, SnapshotRemove, TaskDelete, TaskExit, TaskOom};
use containerd_client::services::v1::events_client::EventsClient;
use containerd_client::services::v1::SubscribeRequest;
use containerd_client::types::Envelope;
use prost::Message;
use prost_types::Any;
use tonic::codegen::tokio_stream::Stream;

use crate::model::cri_status::UnixNanos;
use crate::model::event::TOPICS;
use crate::model::Event;
use crate::sources::api::{connect_to_proven, status_text, unix_nanos, NotConnected};

/// What the stream says to whoever listens.
#[derive(Debug)]
pub enum StreamNews {
    /// Subscribed (again): what happened meanwhile was not seen.
    Up,
    /// Events read together, in the order they were published (at most
    /// [`BATCH_MOST`]).
    Events(Vec<Event>),
    /// The stream ended or could not be had; retried after a pause.
    Down(String),
    /// Another process than the daemon the latest look proved serves the
    /// socket (containerd restarted, or someone else): not subscribed to,
    /// retried after a pause; a look must prove who it is first.
    NotTheDaemon(String),
}

/// The pid of the daemon the latest look proved, shared by the listener
/// (who stores it after each such look) and the stream (who subscribes only
/// over a connection whose peer it is).
pub type ProvenDaemon = Arc<AtomicI32>;

/// Which of a stream's connects are reconnects: each that follows a `Down`.
/// Not "every connect after the first": the first connect fails too when
/// containerd restarts right after the subscription was asked for, and
/// what was missed before a later one matters as much.
#[derive(Debug, Default)]
pub struct Reconnects {
    down: bool,
    /// Reconnects so far.
    pub count: u64,
}

impl Reconnects {
    /// The stream is down.
    pub fn down(&mut self) {
        self.down = true;
    }

    /// The stream is up: true when that is a reconnect.
    pub fn up(&mut self) -> bool {
        let again = std::mem::take(&mut self.down);
        self.count += u64::from(again);
        again
    }
}

/// The first pause before a retry, doubled up to [`MOST_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// At most 5 s: a retry is one connect to a local socket, refused at once
/// while containerd is down, and every second of waiting past its return is
/// a second of events lost (the stream has no replay).
const MOST_BACKOFF: Duration = Duration::from_secs(5);

/// Streams `namespace`'s events from `address`, served by `daemon`, to
/// `tell` until it returns false, reconnecting with backoff; connecting
/// takes at most `within`. Runs on its own thread and runtime.
pub fn stream(
    address: PathBuf,
    daemon: ProvenDaemon,
    namespace: String,
    within: Duration,
    tell: impl Fn(StreamNews) -> bool + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("event-stream".into())
        .spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                tell(StreamNews::Down("no runtime for the event stream".into()));
                return;
            };
            runtime.block_on(follow(&address, &daemon, &namespace, within, &tell));
        })
}

async fn follow(
    address: &Path,
    daemon: &ProvenDaemon,
    namespace: &str,
    within: Duration,
    tell: &impl Fn(StreamNews) -> bool,
) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let pid = daemon.load(Ordering::Relaxed);
        let connected = tokio::time::timeout(within, connect_to_proven(address, pid)).await;
        let news = match connected {
            Err(_) => StreamNews::Down(format!("connecting: no answer within {within:?}")),
            Ok(Err(NotConnected::NotTheDaemon(why))) => StreamNews::NotTheDaemon(why),
            Ok(Err(NotConnected::Unreachable(why))) => StreamNews::Down(why),
            // Up once connected: containerd answers a subscription only with
            // its first event, which may be long in coming (an idle node).
            Ok(Ok(channel)) => {
                if !tell(StreamNews::Up) {
                    return;
                }
                backoff = FIRST_BACKOFF;
                match follow_stream(channel, namespace, tell).await {
                    Some(ended) => StreamNews::Down(ended),
                    None => return,
                }
            }
        };
        if !tell(news) {
            return;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MOST_BACKOFF);
    }
}

/// Tells each event until the stream ends (why) or the listener has gone
/// (`None`).
async fn follow_stream(
    channel: tonic::transport::Channel,
    namespace: &str,
    tell: &impl Fn(StreamNews) -> bool,
) -> Option<String> {
    let filter = format!("namespace=={namespace},topic~={TOPICS:?}");
    let request = SubscribeRequest {
        filters: vec![filter],
    };
    let mut events = match EventsClient::new(channel).subscribe(request).await {
        Ok(response) => response.into_inner(),
        Err(status) => return Some(status_text(status)),
    };
    loop {
        // Waits for the next event, then takes every one already here
        // without waiting, tells them as one batch, then pauses: a flood is
        // read in batches (one wake of this thread, and one message to the
        // listener, per batch rather than per event: told one by one, 5,000
        // events a second were 5,000 wakes of the listener, most of its
        // cost); what comes meanwhile waits in the connection.
        let mut batch = Vec::new();
        let next = events.message().await;
        let ended = match take_message(next, &mut batch) {
            Some(ended) => Some(ended),
            None => take_ready(&mut events, &mut batch).await,
        };
        if !batch.is_empty() && !tell(StreamNews::Events(batch)) {
            return None;
        }
        if ended.is_some() {
            return ended;
        }
        tokio::time::sleep(READ_EVERY).await;
    }
}

/// The most events told in one batch: the rest wait for the next read.
pub const BATCH_MOST: usize = 1024;

/// Takes every message `messages` holds ready into `batch`, without waiting
/// for one, up to [`BATCH_MOST`]: `None` once none is (or the batch is
/// full), `Some(why)` when the stream ended.
async fn take_ready<S>(messages: &mut S, batch: &mut Vec<Event>) -> Option<String>
where
    S: Stream<Item = Result<Envelope, tonic::Status>> + Unpin,
{
    // A stream says "not ready" when this task's share of the runtime
    // (tokio's cooperative budget) is spent, ready or not: a message is
    // taken as none only when a fresh share finds none either.
    let mut taken = 0;
    tokio::task::yield_now().await;
    while batch.len() < BATCH_MOST {
        let ready =
            std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *messages).poll_next(cx))).await;
        match ready {
            Poll::Pending if taken == 0 => return None,
            Poll::Pending => {
                taken = 0;
                tokio::task::yield_now().await;
            }
            Poll::Ready(None) => return Some("containerd ended the stream".to_string()),
            Poll::Ready(Some(message)) => {
                taken += 1;
                if let Some(ended) = take_message(message.map(Some), batch) {
                    return Some(ended);
                }
            }
        }
    }
    None
}

/// Events are read at most this often. Looks come seconds after an event
/// (see `watch_state`), so the pause delays none; while it lasts, the
/// connection's flow-control window (64 KiB, some 270 exits) holds what
/// arrives: up to some 13,000 events a second are read in pace.
pub const READ_EVERY: Duration = Duration::from_millis(20);

/// Takes one message of the stream into `batch`: `None` to go on,
/// `Some(why)` when the stream ended.
fn take_message(
    message: Result<Option<Envelope>, tonic::Status>,
    batch: &mut Vec<Event>,
) -> Option<String> {
    match message {
        Ok(Some(envelope)) => {
            if let Some(any) = envelope.event {
                batch.push(decode(
                    &envelope.topic,
                    &envelope.namespace,
                    unix_nanos(envelope.timestamp.as_ref()),
                    &any,
                ));
            }
            None
        }
        Ok(None) => Some("containerd ended the stream".to_string()),
        Err(status) => Some(status_text(status)),
    }
}

fn text(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

/// An envelope's payload as an [`Event`]; one that does not decode (or a
/// type not decoded here: 2.x's sandbox events) keeps its topic (it still
/// says where to look).
pub fn decode(topic: &str, namespace: &str, published_at: UnixNanos, any: &Any) -> Event {
    let mut event = Event {
        topic: topic.to_string(),
        namespace: namespace.to_string(),
        published_at,
        ..Event::default()
    };
    // containerd names the type without the leading `/` of an Any's URL.
    let kind = any.type_url.trim_start_matches('/');
    let value = any.value.as_slice();
    match kind {
        "containerd.events.TaskExit" => {
            if let Ok(exit) = TaskExit::decode(value) {
                event.container_id = text(exit.container_id);
                event.exec_id = text(exit.id);
                event.pid = Some(exit.pid);
                event.exit_status = Some(exit.exit_status);
                event.exited_at = Some(unix_nanos(exit.exited_at.as_ref()));
            }
        }
        "containerd.events.TaskDelete" => {
            if let Ok(delete) = TaskDelete::decode(value) {
                event.container_id = text(delete.container_id);
                event.exec_id = text(delete.id);
                event.pid = Some(delete.pid);
                event.exit_status = Some(delete.exit_status);
                event.exited_at = Some(unix_nanos(delete.exited_at.as_ref()));
            }
        }
        "containerd.events.TaskOOM" => {
            if let Ok(oom) = TaskOom::decode(value) {
                event.container_id = text(oom.container_id);
            }
        }
        "containerd.events.ContainerDelete" => {
            if let Ok(delete) = ContainerDelete::decode(value) {
                event.container_id = text(delete.id);
            }
        }
        "containerd.events.SnapshotRemove" => {
            if let Ok(remove) = SnapshotRemove::decode(value) {
                event.container_id = text(remove.key);
            }
        }
        _ => {}
    }
    event
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_exit_is_decoded_with_its_exec_and_times() {
        let exit = TaskExit {
            container_id: "c1".into(),
            id: "exec-1".into(),
            pid: 42,
            exit_status: 137,
            exited_at: Some(prost_types::Timestamp {
                seconds: 10,
                nanos: 5,
            }),
        };
        let any = Any {
            type_url: "containerd.events.TaskExit".into(),
            value: exit.encode_to_vec(),
        };
        let event = decode("/tasks/exit", "k8s.io", 1, &any);
        assert_eq!(event.container_id.as_deref(), Some("c1"));
        assert_eq!(event.exec_id.as_deref(), Some("exec-1"));
        assert_eq!((event.pid, event.exit_status), (Some(42), Some(137)));
        assert_eq!(event.exited_at, Some(10_000_000_005));
        assert!(!event.is_init_exit());
        // Garbage keeps the topic, and nothing else.
        let junk = Any {
            type_url: "/containerd.events.TaskExit".into(),
            value: vec![0xff, 0xff, 0xff],
        };
        let event = decode("/tasks/exit", "k8s.io", 1, &junk);
        assert_eq!(
            (event.topic.as_str(), event.container_id),
            ("/tasks/exit", None)
        );
    }

    #[test]
    fn every_event_ready_is_taken_into_one_batch_and_none_is_waited_for() {
        use tokio_stream::StreamExt;
        let exit = |n: usize| Envelope {
            topic: "/tasks/exit".into(),
            namespace: "k8s.io".into(),
            event: Some(Any {
                type_url: "containerd.events.TaskExit".into(),
                value: TaskExit {
                    container_id: format!("c{n}"),
                    ..TaskExit::default()
                }
                .encode_to_vec(),
            }),
            ..Envelope::default()
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // The timeouts are made inside the runtime.
        let _inside = runtime.enter();
        let ids = |batch: &[Event]| -> Vec<String> {
            batch
                .iter()
                .map(|e| e.container_id.clone().unwrap())
                .collect()
        };
        let within = Duration::from_secs(5);
        // 500 events arrived together, then a containerd that says nothing
        // more: all 500 taken, in order, and the batch ends without waiting.
        let ready: Vec<Result<Envelope, tonic::Status>> = (0..500).map(|n| Ok(exit(n))).collect();
        let mut quiet = tokio_stream::iter(ready.clone()).chain(tokio_stream::pending());
        let mut batch = Vec::new();
        let went = runtime.block_on(tokio::time::timeout(
            within,
            take_ready(&mut quiet, &mut batch),
        ));
        assert_eq!(went, Ok(None));
        let expected: Vec<String> = (0..500).map(|n| format!("c{n}")).collect();
        assert_eq!(ids(&batch), expected);
        // A stream that ends after them says so.
        let mut ending = tokio_stream::iter(ready);
        let mut batch = Vec::new();
        let went = runtime.block_on(tokio::time::timeout(
            within,
            take_ready(&mut ending, &mut batch),
        ));
        assert_eq!(went, Ok(Some("containerd ended the stream".to_string())));
        assert_eq!(batch.len(), 500);
        // A flood past a batch's bound: the batch is full, the rest wait.
        let flood: Vec<Result<Envelope, tonic::Status>> =
            (0..BATCH_MOST + 10).map(|n| Ok(exit(n))).collect();
        let mut flooding = tokio_stream::iter(flood).chain(tokio_stream::pending());
        let mut batch = Vec::new();
        let went = runtime.block_on(tokio::time::timeout(
            within,
            take_ready(&mut flooding, &mut batch),
        ));
        assert_eq!(went, Ok(None));
        assert_eq!(batch.len(), BATCH_MOST);
        // The rest on the next read (the test's stream says "not ready"
        // every 32 items, as a busy connection may: tried again).
        let mut rest = Vec::new();
        for _ in 0..3 {
            let went = runtime.block_on(tokio::time::timeout(
                within,
                take_ready(&mut flooding, &mut rest),
            ));
            assert_eq!(went, Ok(None));
        }
        let after: Vec<String> = (BATCH_MOST..BATCH_MOST + 10)
            .map(|n| format!("c{n}"))
            .collect();
        assert_eq!(ids(&rest), after);
    }

    #[test]
    fn a_socket_not_served_by_the_proven_daemon_gets_no_subscription() {
        use std::io::Read;
        use std::os::unix::net::UnixListener;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("containerd.sock");
        let listener = UnixListener::bind(&path).unwrap();
        // The pid a look proved is not the listener's (this process).
        let me = std::process::id() as i32;
        let daemon = ProvenDaemon::new(AtomicI32::new(me + 1));
        // The first news told ends the stream.
        let (tell, told) = std::sync::mpsc::channel();
        let teller = move |news| {
            let _ = tell.send(news);
            false
        };
        let within = Duration::from_secs(2);
        let streaming = stream(path.clone(), daemon, "k8s.io".into(), within, teller).unwrap();
        let news = told.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(
            matches!(&news, StreamNews::NotTheDaemon(why) if why.contains(&format!("served by pid {me}"))),
            "{news:?}"
        );
        streaming.join().unwrap();
        // The connection checked was closed without a byte: no subscription.
        let (mut checked, _) = listener.accept().unwrap();
        checked
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut sent = Vec::new();
        checked.read_to_end(&mut sent).unwrap();
        assert!(sent.is_empty(), "subscribed: {sent:?}");
    }

    #[test]
    fn a_socket_renamed_over_the_path_after_the_check_gets_no_subscription() {
        use std::io::Read;
        use std::os::unix::net::UnixListener;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("containerd.sock");
        let checked = UnixListener::bind(&path).unwrap();
        let me = std::process::id() as i32;
        let daemon = ProvenDaemon::new(AtomicI32::new(me));
        // Told Up once the connection is checked; stops at the next news.
        let (up_tx, up) = std::sync::mpsc::channel();
        let swapped = dir.path().join("swapped.sock");
        let impostor = UnixListener::bind(&swapped).unwrap();
        impostor.set_nonblocking(true).unwrap();
        let (renamed_tx, renamed) = std::sync::mpsc::channel::<()>();
        let (swapped_at, path_at) = (swapped.clone(), path.clone());
        let teller = move |news: StreamNews| {
            if matches!(news, StreamNews::Up) {
                // Another socket is renamed over the path after the check,
                // before the subscription is sent.
                std::fs::rename(&swapped_at, &path_at).unwrap();
                let _ = renamed_tx.send(());
                return up_tx.send(()).is_ok();
            }
            false
        };
        let within = Duration::from_secs(2);
        let streaming = stream(path.clone(), daemon, "k8s.io".into(), within, teller).unwrap();
        up.recv_timeout(Duration::from_secs(5)).unwrap();
        renamed.recv_timeout(Duration::from_secs(5)).unwrap();
        // The subscription went over the connection checked...
        checked.set_nonblocking(true).unwrap();
        let (mut first, _) = checked.accept().unwrap();
        first.set_nonblocking(false).unwrap();
        first
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut preface = [0; 24];
        first.read_exact(&mut preface).unwrap();
        assert_eq!(&preface, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        // ... and the stream ends with it, never dialling the path again.
        drop(first);
        for _ in 0..50 {
            if streaming.is_finished() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(streaming.is_finished(), "the stream goes on");
        let dialled = impostor.accept();
        assert!(
            matches!(&dialled, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "the renamed socket was dialled: {dialled:?}"
        );
    }

    #[test]
    fn an_up_after_a_down_is_a_reconnect_even_the_first_up() {
        let mut stream = Reconnects::default();
        assert!(!stream.up(), "the first connect");
        stream.down();
        stream.down();
        assert!(stream.up(), "after retries");
        assert_eq!(stream.count, 1);
        // containerd gone before the first connect: that connect, when it
        // comes, follows a Down.
        let mut stream = Reconnects::default();
        stream.down();
        assert!(stream.up());
        assert!(!stream.up(), "an Up after an Up");
        assert_eq!(stream.count, 1);
    }
}
