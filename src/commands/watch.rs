//! `nodectl watch`: what `check` finds, told as it appears and as it
//! clears, driven by containerd's event stream.
//!
//! It looks at the whole node at start, after each (re)connect of the
//! stream (the stream has no replay: what was published meanwhile is
//! gone), when an event calls for it (see [`watch_state`]) and at least
//! once per `--interval`. Each look is `check`'s, with its bounds and its
//! proof of the daemon; the stream is subscribed to only at the address of
//! a daemon a look proved, and an event only ever makes it look sooner.
//! One line per change (`-o json`: one JSON document per line); SIGINT or
//! SIGTERM ends it, after a last summary, with status 0.

use std::io::{self, Write};
use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::cli::{GlobalArgs, WatchArgs};
use crate::commands::check;
use crate::commands::recorder_file::Keeper;
use crate::commands::watch_state::{Change, Next, Watched};
use crate::exit_codes::{exit, COULD_NOT_CHECK, NOTHING_FOUND};
use crate::gather;
use crate::inert;
use crate::model::{ExitReading, ExitsToRead, Paths, Reads, Sample};
use crate::render::Format;
use crate::report::Report;
use crate::sources::events::{self, Reconnects, StreamNews};

/// What the loop hears.
enum Heard {
    Stream(StreamNews),
    Looked(Box<Result<Report, String>>),
    Sampled(Box<Sample>),
    ExitsRead(Box<ExitReading>),
    Signalled,
}

/// How often, at most, a stream that keeps failing is said to be down.
const DOWN_SAID_EVERY: Duration = Duration::from_secs(60);

/// Tells `watch` what a stream heard; false once `watch` has ended.
pub type Teller = Box<dyn Fn(StreamNews) -> bool + Send>;

/// A stand-in for containerd's stream (the benchmark's replay of a churning
/// node's events), started at once and told through the [`Teller`].
pub type Replay = Box<dyn FnOnce(Teller) + Send>;

pub fn run(global: &GlobalArgs, args: &WatchArgs) -> ExitCode {
    run_with(global, args, None)
}

/// `watch` fed by `replay` instead of containerd's stream: what
/// bench/run measures the cost of events with.
pub fn run_replaying(global: &GlobalArgs, args: &WatchArgs, replay: Replay) -> ExitCode {
    run_with(global, args, Some(replay))
}

fn run_with(global: &GlobalArgs, args: &WatchArgs, replay: Option<Replay>) -> ExitCode {
    super::few_malloc_arenas();
    let (tell, heard) = mpsc::channel::<Heard>();
    if let Err(err) = on_signal(tell.clone()) {
        eprintln!("nodectl: watch: {err}");
        return exit(COULD_NOT_CHECK);
    }
    let mut quiet = global.clone();
    quiet.quiet = true;
    let mut out = io::stdout().lock();
    let mut watched = Watched::reading_exits();
    let mut recorder_file = Keeper::start(args.recorder_file.clone(), global.quiet);
    let mut counts = Counts::default();
    let mut streaming = false;
    // A replay stands in for a proven daemon's stream.
    let replaying = replay.is_some();
    if let Some(replay) = replay {
        let tell = tell.clone();
        let teller: Teller = Box::new(move |news| tell.send(Heard::Stream(news)).is_ok());
        streaming = std::thread::Builder::new()
            .name("replay".into())
            .spawn(move || replay(teller))
            .is_ok();
    }
    let proven_daemon = events::ProvenDaemon::default();
    let mut down_said: Option<Instant> = None;
    // A look or a sample is under way (one at a time).
    let mut looking = true;
    // The paths the last look resolved and proved: where samples and
    // readings of exits read (none proven: a look instead).
    let mut looked_at: Option<Paths> = None;
    counts.cpu = super::cpu_used();
    start_look(&quiet, args, &tell);
    let mut next_periodic = Instant::now() + args.interval;
    loop {
        let now = Instant::now();
        let wake = match watched.next_look() {
            Some(at) if !looking => at.min(next_periodic),
            _ => next_periodic,
        };
        match heard.recv_timeout(wake.saturating_duration_since(now)) {
            Ok(Heard::Signalled) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Ok(Heard::Looked(result)) => {
                looking = false;
                counts.looks += 1;
                // What the process used since the last look ended (this
                // look, and the events heard meanwhile) paces the next.
                let cpu = super::cpu_used();
                watched.looked(cpu.saturating_sub(counts.cpu), Instant::now());
                counts.cpu = cpu;
                next_periodic = Instant::now() + args.interval;
                let report = match *result {
                    Ok(report) => report,
                    Err(reason) => {
                        say(global, &format!("a look failed: {}", inert::shown(&reason)));
                        continue;
                    }
                };
                let proven = replaying || proves_the_daemon(&report);
                // Samples and readings follow only a daemon a look proved.
                looked_at = proven.then(|| report.paths.clone());
                if streaming && !proven {
                    let was_heeding = watched.heeding();
                    let wait = watched.reprove_soon(Instant::now());
                    if was_heeding {
                        say(
                            global,
                            &format!(
                                "the look did not prove the daemon at the socket ({}): its \
                                 events are held until one does; looking again in {} s, then \
                                 less often",
                                inert::shown(&why_unproven(&report)),
                                wait.as_secs()
                            ),
                        );
                    }
                }
                watched.heed(proven);
                if let Some(daemon) = report.paths.process.as_ref().filter(|_| proven) {
                    proven_daemon.store(daemon.pid, Ordering::Relaxed);
                }
                if !streaming {
                    streaming = subscribe(global, &report, &proven_daemon, &tell);
                }
                for change in watched.update(&report, Instant::now()) {
                    if tell_change(&mut out, global.output, &change).is_err() {
                        // The reader went away (a broken pipe): done.
                        return exit(NOTHING_FOUND);
                    }
                }
                recorder_file.keep(watched.recorder());
            }
            Ok(Heard::Sampled(sample)) => {
                looking = false;
                counts.samples += 1;
                watched.sampled(&sample, Instant::now());
                recorder_file.keep(watched.recorder());
            }
            Ok(Heard::ExitsRead(reading)) => {
                looking = false;
                counts.exit_readings += 1;
                watched.exits_read(&reading, Instant::now());
            }
            Ok(Heard::Stream(StreamNews::Up)) => {
                down_said = None;
                if counts.stream.up() {
                    say(global, "event stream up again: looking at the whole node");
                }
                watched.look_now(Instant::now());
            }
            Ok(Heard::Stream(StreamNews::Down(reason))) => {
                counts.stream.down();
                if down_said.is_none_or(|at| at.elapsed() > DOWN_SAID_EVERY) {
                    say(
                        global,
                        &format!(
                            "event stream down ({}); reconnecting",
                            inert::shown(&reason)
                        ),
                    );
                    down_said = Some(Instant::now());
                }
            }
            Ok(Heard::Stream(StreamNews::NotTheDaemon(reason))) => {
                counts.stream.down();
                if down_said.is_none_or(|at| at.elapsed() > DOWN_SAID_EVERY) {
                    say(
                        global,
                        &format!(
                            "event stream not subscribed ({}); looking to prove the daemon",
                            inert::shown(&reason)
                        ),
                    );
                    down_said = Some(Instant::now());
                }
                // containerd restarted (a new pid), or another serves its
                // socket: a look proves which, and the retry uses its pid.
                watched.look_now(Instant::now());
            }
            Ok(Heard::Stream(StreamNews::Events(batch))) => {
                counts.events += batch.len() as u64;
                let heard = Instant::now();
                for event in &batch {
                    watched.heard(event, heard);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let now = Instant::now();
        if looking {
            continue;
        }
        match (watched.take_due(now), &looked_at) {
            (Some(Next::Sample), Some(paths)) if now < next_periodic => {
                looking = true;
                start_sample(&quiet, paths, watched.sample_basis(), &tell);
            }
            (Some(Next::ReadExits(exits)), Some(paths)) if now < next_periodic => {
                looking = true;
                start_exit_reading(&quiet, paths, exits, &tell);
            }
            (Some(_), _) => {
                looking = true;
                start_look(&quiet, args, &tell);
            }
            (None, _) if now >= next_periodic => {
                looking = true;
                start_look(&quiet, args, &tell);
            }
            (None, _) => {}
        }
    }
    let _ = summary(&mut out, global.output, &watched, &counts);
    exit(NOTHING_FOUND)
}

#[derive(Default)]
struct Counts {
    looks: u64,
    /// The flight recorder's samples between looks.
    samples: u64,
    /// Readings of exited containers' status files between looks.
    exit_readings: u64,
    /// The process's CPU when the last look ended.
    cpu: Duration,
    events: u64,
    stream: Reconnects,
}

/// Runs `work` on a thread of its own named `name` (a look, a sample, a
/// reading: a stalled disk holds that thread, not the loop) and tells the
/// loop what it heard; `failed` says what to tell when no thread starts.
fn on_its_own_thread(
    name: &str,
    tell: &mpsc::Sender<Heard>,
    work: impl FnOnce() -> Heard + Send + 'static,
    failed: impl FnOnce(io::Error) -> Heard,
) {
    let told = tell.clone();
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _ = told.send(work());
        });
    if let Err(err) = spawned {
        let _ = tell.send(failed(err));
    }
}

/// One look, `check`'s, on a thread of its own (it runs its own runtime).
fn start_look(global: &GlobalArgs, args: &WatchArgs, tell: &mpsc::Sender<Heard>) {
    let (global, check_args) = (global.clone(), args.look.check_args());
    let work = move || {
        let result = panic::catch_unwind(AssertUnwindSafe(|| {
            check::run(&global, &check_args).map_err(|err| format!("{err:#}"))
        }))
        .unwrap_or_else(|_| Err("the check panicked (see the message above)".to_string()));
        Heard::Looked(Box::new(result))
    };
    on_its_own_thread("look", tell, work, |err| {
        Heard::Looked(Box::new(Err(format!("starting a look: {err}"))))
    });
}

/// The flight recorder's sample of `basis` (see `gather::sample`).
fn start_sample(
    global: &GlobalArgs,
    paths: &Paths,
    basis: &crate::model::SampleBasis,
    tell: &mpsc::Sender<Heard>,
) {
    let options = global.gather_options(Reads::NOTHING);
    let (paths, basis) = (paths.clone(), basis.clone());
    let work = move || Heard::Sampled(Box::new(gather::sample(&paths, &options, &basis)));
    // No sample this time: the next look samples instead.
    on_its_own_thread("sample", tell, work, |_| Heard::Sampled(Box::default()));
}

/// The reading of `exits`' status files and processes (see
/// `gather::read_exits`).
fn start_exit_reading(
    global: &GlobalArgs,
    paths: &Paths,
    exits: ExitsToRead,
    tell: &mpsc::Sender<Heard>,
) {
    let options = global.gather_options(Reads::NOTHING);
    let paths = paths.clone();
    let work = move || Heard::ExitsRead(Box::new(gather::read_exits(&paths, &options, &exits)));
    // Not read: a look tells instead.
    on_its_own_thread("exits", tell, work, |err| {
        Heard::ExitsRead(Box::new(ExitReading {
            unsure: Some(format!("starting the reading: {err}")),
            ..ExitReading::default()
        }))
    });
}

/// Subscribes to the events of the daemon `report`'s look proved; none
/// when it proved none (then only the periodic looks run).
fn subscribe(
    global: &GlobalArgs,
    report: &Report,
    daemon: &events::ProvenDaemon,
    tell: &mpsc::Sender<Heard>,
) -> bool {
    let paths = &report.paths;
    if !proves_the_daemon(report) {
        say(
            global,
            "no proven containerd serves the socket: no event stream, looking every --interval",
        );
        return false;
    }
    let address = paths.address.path.clone();
    let tell = tell.clone();
    let started = events::stream(
        address.clone(),
        daemon.clone(),
        report.namespace.clone(),
        global.timeout,
        move |news| tell.send(Heard::Stream(news)).is_ok(),
    );
    match started {
        Ok(_) => {
            say(
                global,
                &format!(
                    "watching containerd's events at {}",
                    inert::shown(&address.display().to_string())
                ),
            );
            true
        }
        Err(err) => {
            say(global, &format!("no event stream: {err}"));
            false
        }
    }
}

/// Whether `report`'s look proved the containerd serving its socket, and
/// that root and state are that daemon's own.
pub fn proves_the_daemon(report: &Report) -> bool {
    report.paths.process.is_some() && report.paths.unproven.is_empty()
}

/// Why [`proves_the_daemon`] said no, in the look's own words.
fn why_unproven(report: &Report) -> String {
    match report.paths.process {
        None => "no containerd process was found serving it".to_string(),
        Some(_) => report.paths.unproven.join("; "),
    }
}

fn on_signal(tell: mpsc::Sender<Heard>) -> io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            runtime.block_on(async {
                use tokio::signal::unix::{signal, SignalKind};
                let (Ok(mut terminate), Ok(mut interrupt)) = (
                    signal(SignalKind::terminate()),
                    signal(SignalKind::interrupt()),
                ) else {
                    return;
                };
                tokio::select! {
                    _ = terminate.recv() => {}
                    _ = interrupt.recv() => {}
                }
                let _ = tell.send(Heard::Signalled);
            });
        })?;
    Ok(())
}

fn say(global: &GlobalArgs, what: &str) {
    if !global.quiet {
        eprintln!("nodectl: watch: {what}");
    }
}

fn now_text() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn tell_change(out: &mut impl Write, format: Format, change: &Change) -> io::Result<()> {
    let (what, finding) = match change {
        Change::Found(f) => ("found", f),
        Change::Cleared(f) => ("cleared", f),
    };
    if format == Format::Json {
        let line = json!({"at": now_text(), "change": what, "finding": finding});
        writeln!(out, "{line}")?;
    } else {
        // What the flight recorder kept says why (a late exit it saw stuck).
        let why = finding.evidence["why"]
            .as_str()
            .map(|why| format!(": {}", inert::shown(why)))
            .unwrap_or_default();
        writeln!(
            out,
            "{} {what:<7} {:<8} {} {}{why}",
            now_text(),
            severity(finding),
            finding.kind.as_str(),
            inert::shown(&finding.summary)
        )?;
    }
    out.flush()
}

fn severity(finding: &crate::model::Finding) -> &'static str {
    match finding.severity {
        crate::model::Severity::Critical => "critical",
        crate::model::Severity::Warning => "warning",
    }
}

fn summary(
    out: &mut impl Write,
    format: Format,
    watched: &Watched,
    counts: &Counts,
) -> io::Result<()> {
    let open: Vec<_> = watched.open().collect();
    if format == Format::Json {
        let line = json!({
            "at": now_text(),
            "change": "summary",
            "open": open,
            "looks": counts.looks,
            "samples": counts.samples,
            "exit_readings": counts.exit_readings,
            "cpu_seconds": super::cpu_used().as_secs_f64(),
            "events": counts.events,
            "reconnects": counts.stream.count,
        });
        writeln!(out, "{line}")?;
    } else {
        writeln!(
            out,
            "{} summary: {} open after {} looks ({} samples and {} readings of exits between \
             them) and {} events ({} reconnects, {:.1} s of CPU)",
            now_text(),
            open.len(),
            counts.looks,
            counts.samples,
            counts.exit_readings,
            counts.events,
            counts.stream.count,
            super::cpu_used().as_secs_f64()
        )?;
        for finding in open {
            writeln!(
                out,
                "  {:<8} {} {}",
                severity(finding),
                finding.kind.as_str(),
                inert::shown(&finding.summary)
            )?;
        }
    }
    out.flush()
}
