//! `nodectl serve`: `check`'s metrics over HTTP, for Prometheus to scrape
//! the pod directly (no textfile collector, no shell loop).
//!
//! One thread runs `check` once per `--interval` (start to start; at once
//! again when a run took longer), and sooner when containerd's event stream
//! calls for a look (as `watch` does: see `watch_state`; subscribed to only
//! at the daemon a run proved), and renders its metrics once; the HTTP
//! server ([`crate::exporter`]) answers every scrape from those bytes. So
//! the scrape rate never changes how often containerd is asked, and a slow
//! run never makes a scrape wait: it gets the previous result. Nothing is
//! ever killed or changed on the node.
//!
//! A run that produces no report (or panics) keeps the last good series
//! with `nodectl_up` 0 and the error as a comment, as `check --textfile`
//! does. SIGTERM and SIGINT end it with status 0; it exits 2 only when it
//! cannot listen.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::cli::{CheckArgs, GlobalArgs, ServeArgs};
use crate::commands::check;
use crate::commands::watch_state::Watched;
use crate::exit_codes::{exit, COULD_NOT_CHECK, NOTHING_FOUND};
use crate::exporter::{self, Health, Shared};
use crate::inert;
use crate::render::{prometheus, textfile};
use crate::report::Report;
use crate::sources::events::{self, StreamNews};

/// The `command` label of the metrics: the runs are `check`'s, so alert
/// rules and dashboards read them the same whichever way they arrive.
const COMMAND: &str = "check";

pub fn run(global: &GlobalArgs, args: &ServeArgs) -> ExitCode {
    super::few_malloc_arenas();
    let listener = match bind(args.listen) {
        Ok(listener) => listener,
        Err(err) => {
            eprintln!("nodectl: serve: cannot listen on {}: {err}", args.listen);
            return exit(COULD_NOT_CHECK);
        }
    };
    let address = listener
        .local_addr()
        .map_or_else(|_| args.listen.to_string(), |a| a.to_string());
    if !global.quiet {
        eprintln!(
            "nodectl: serving http://{address}/metrics and /healthz, checking every {}",
            humantime::format_duration(args.interval)
        );
    }

    let cap = exporter::connection_cap(open_files_raised());
    if cap < exporter::MAX_CONNECTIONS && !global.quiet {
        eprintln!(
            "nodectl: serve: at most {cap} connections open at once (the open-files limit leaves no more)"
        );
    }

    let latest = Shared::default();
    let health = Health {
        started: Instant::now(),
        stale_after: stale_after(args.interval, global.timeout),
    };
    // No progress lines every interval on a terminal: the loop has no one
    // waiting on it.
    let mut quiet = global.clone();
    quiet.quiet = true;
    let check_args = args.look.check_args();
    let interval = args.interval;
    let loop_latest = latest.clone();
    let spawned = std::thread::Builder::new()
        .name("check-loop".into())
        .spawn(move || check_loop(&quiet, &check_args, interval, &loop_latest));
    if let Err(err) = spawned {
        eprintln!("nodectl: serve: starting the check loop: {err}");
        return exit(COULD_NOT_CHECK);
    }

    let served = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .and_then(|runtime| runtime.block_on(serve_until_signalled(listener, latest, health, cap)));
    match served {
        Ok(()) => exit(NOTHING_FOUND),
        Err(err) => {
            eprintln!("nodectl: serve: {err}");
            exit(COULD_NOT_CHECK)
        }
    }
}

/// Binds `address`; `[::]` (from `:PORT`) falls back to `0.0.0.0` on a
/// node without IPv6.
fn bind(address: SocketAddr) -> io::Result<TcpListener> {
    match TcpListener::bind(address) {
        Err(err)
            if address.ip().is_unspecified()
                && address.is_ipv6()
                && matches!(
                    err.raw_os_error(),
                    Some(nix::libc::EAFNOSUPPORT | nix::libc::EADDRNOTAVAIL)
                ) =>
        {
            TcpListener::bind((Ipv4Addr::UNSPECIFIED, address.port()))
        }
        bound => bound,
    }
}

/// The open-files limit, its soft value raised to the hard one first: each
/// connection is a descriptor, and a soft limit of 1,024 (common) would cap
/// them well below what a flood of idle ones needs to be outlasted.
fn open_files_raised() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    // Linux's default soft limit, should the kernel not say.
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap_or((1024, 1024));
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return hard;
    }
    soft
}

async fn serve_until_signalled(
    listener: TcpListener,
    latest: Shared,
    health: Health,
    cap: usize,
) -> io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    tokio::select! {
        () = exporter::serve(listener, latest, health, cap) => {}
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
    Ok(())
}

/// How long without a finished run before `/healthz` says the loop is
/// stuck: two intervals, plus what a run may take (each API call is bounded
/// by `--timeout`, and a run makes few of them in sequence) with a minute
/// for reading files and procfs.
fn stale_after(interval: Duration, timeout: Duration) -> Duration {
    interval * 2 + timeout * 10 + Duration::from_secs(60)
}

fn check_loop(global: &GlobalArgs, args: &CheckArgs, interval: Duration, latest: &Shared) {
    let mut runs: u64 = 0;
    let mut last_good: Option<String> = None;
    let mut stream = Stream::default();
    loop {
        let started = Instant::now();
        let before = super::cpu_used();
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
            // `{:#}`: the error with each context it went through.
            check::run(global, args)
                .map(Report::within_limits)
                .map_err(|err| format!("{err:#}"))
        }))
        .unwrap_or_else(|_| Err("the check panicked (see the message above)".to_string()));
        let took = started.elapsed();
        stream
            .watched
            .looked(super::cpu_used().saturating_sub(before), Instant::now());
        runs += 1;
        let metrics = match &outcome {
            Ok(report) => {
                stream.start_once(global, report);
                let text = rendered(|out| prometheus::render(report, out));
                last_good = Some(text.clone());
                text
            }
            Err(reason) => {
                eprintln!("nodectl: serve: the check failed: {}", inert::shown(reason));
                textfile::after_failure(last_good.as_deref(), COMMAND, reason)
            }
        };
        let publish = |stream: &Stream| {
            let mut metrics = metrics.clone().into_bytes();
            metrics.extend(
                rendered(|out| prometheus::render_loop(out, COMMAND, took, runs)).into_bytes(),
            );
            metrics.extend(
                rendered(|out| prometheus::render_stream(out, COMMAND, &stream.metrics))
                    .into_bytes(),
            );
            let mut latest = latest
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            latest.metrics = Some(Bytes::from(metrics));
            latest.finished = Some(Instant::now());
        };
        publish(&stream);
        // Until the next run: at the interval, or sooner when an event
        // calls for a look (see `watch_state`); the stream's own metrics
        // are published as they change.
        let periodic = started + interval;
        while let Some(changed) = stream.wait_for_news(periodic) {
            if changed {
                publish(&stream);
            }
        }
    }
}

/// The event stream of the daemon a run proved, as `serve` keeps it.
#[derive(Default)]
struct Stream {
    news: Option<mpsc::Receiver<StreamNews>>,
    watched: Watched,
    metrics: prometheus::StreamMetrics,
    stream: events::Reconnects,
    /// The pid of the daemon the latest run proved: the stream subscribes
    /// only over a connection whose peer it is.
    daemon: events::ProvenDaemon,
}

impl Stream {
    /// Heeds events while `report`'s run proved the daemon at the socket,
    /// and subscribes once, to that daemon; none when no run proved one
    /// (then only the interval's runs).
    fn start_once(&mut self, global: &GlobalArgs, report: &Report) {
        let proven = super::watch::proves_the_daemon(report);
        self.watched.heed(proven);
        let paths = &report.paths;
        if let Some(daemon) = paths.process.as_ref().filter(|_| proven) {
            self.daemon.store(daemon.pid, Ordering::Relaxed);
        }
        if self.news.is_some() || !proven {
            return;
        }
        let (tell, news) = mpsc::channel();
        let started = events::stream(
            paths.address.path.clone(),
            self.daemon.clone(),
            report.namespace.clone(),
            global.timeout,
            move |news| tell.send(news).is_ok(),
        );
        match started {
            Ok(_) => self.news = Some(news),
            Err(err) => eprintln!("nodectl: serve: no event stream: {err}"),
        }
    }

    /// Waits for news until a run is due (`periodic`, or a look an event
    /// called for): `None` when a run is due, else whether the stream's
    /// metrics changed (to be published).
    fn wait_for_news(&mut self, periodic: Instant) -> Option<bool> {
        let now = Instant::now();
        if self.watched.take_due(now).is_some() || now >= periodic {
            return None;
        }
        let until = self
            .watched
            .next_look()
            .map_or(periodic, |at| at.min(periodic));
        let Some(news) = &self.news else {
            std::thread::sleep(until.saturating_duration_since(now));
            return None;
        };
        match news.recv_timeout(until.saturating_duration_since(now)) {
            Ok(StreamNews::Up) => {
                self.metrics.up = true;
                // What the stream missed while down: a run now (a first
                // connect at once follows a run, and needs none).
                if self.stream.up() {
                    self.watched.look_now(Instant::now());
                }
                self.metrics.reconnects = self.stream.count;
                Some(true)
            }
            Ok(StreamNews::Down(_)) => {
                self.stream.down();
                let changed = self.metrics.up;
                self.metrics.up = false;
                Some(changed)
            }
            Ok(StreamNews::NotTheDaemon(_)) => {
                self.stream.down();
                let changed = self.metrics.up;
                self.metrics.up = false;
                // containerd restarted (a new pid), or another serves its
                // socket: a run proves which, and the retry uses its pid.
                self.watched.look_now(Instant::now());
                Some(changed)
            }
            Ok(StreamNews::Events(batch)) => {
                let heard = Instant::now();
                for event in &batch {
                    // Counted without allocating but for a label's first
                    // event; the daemon names the topics, so past what is
                    // listed they are counted together.
                    let events = &mut self.metrics.events;
                    let mut topic = event.topic_label();
                    if !events.contains_key(topic) && events.len() >= prometheus::TOPICS_LISTED - 1
                    {
                        topic = "other";
                    }
                    match events.get_mut(topic) {
                        Some(count) => *count += 1,
                        None => {
                            events.insert(topic.to_string(), 1);
                        }
                    }
                    self.watched.heard(event, heard);
                }
                Some(true)
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Some(false),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                self.news = None;
                self.metrics.up = false;
                Some(true)
            }
        }
    }
}

/// What a renderer writes into memory (which cannot fail).
fn rendered(render: impl FnOnce(&mut dyn io::Write) -> io::Result<()>) -> String {
    let mut out = Vec::new();
    render(&mut out).expect("writing to memory");
    String::from_utf8_lossy(&out).into_owned()
}
