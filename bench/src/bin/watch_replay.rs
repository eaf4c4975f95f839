//! `nodectl watch` on a node whose pods churn (issue 30, point 5): its CPU
//! and memory while 50 events a second arrive, on the synthetic node.
//!
//! The synthetic node has no containerd, so no stream to subscribe to:
//! this binary runs nodectl's own `watch` (the library's
//! `commands::watch::run_replaying`, the same loop, looks and pacing) and
//! feeds it a replay in place of containerd's stream: for the node's
//! containers in turn, an init process's exit, its task's delete, its
//! record's removal and its snapshot's removal, at `--rate` events a
//! second. Each event calls for looks at the whole node (see
//! `watch_state`), which are what cost; the stream's own decoding is left
//! out. After `--warmup` (the first look), CPU is measured over
//! `--seconds` (user and system time of the whole process, every thread,
//! from getrusage) and peak RSS over the whole run.
//!
//! Usage (bench/run runs it on the 1,000-container node):
//!
//! ```sh
//! watch_replay --node DIR [--rate 50] [--seconds 60] [--warmup 10] \
//!     [--report FILE] -- watch --recorder-file DIR/ring.json --root DIR/root ... >watch.jsonl
//! ```
//!
//! Targets: at most 2 % of one core and 40 MiB. Exits 1 when one is
//! missed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use nix::sys::resource::{getrusage, UsageWho};
use nix::sys::signal::{raise, Signal};
use nodectl::cli::{Cli, Command};
use nodectl::commands::cpu_used;
use nodectl::commands::watch::{self, Teller};
use nodectl::model::Event;
use nodectl::sources::events::{self, StreamNews};

const TARGET_CORE_PERCENT: f64 = 2.0;
const TARGET_MIB: f64 = 40.0;
/// The topics of one container's end, in the order containerd publishes
/// them.
const CHURN: [&str; 4] = [
    "/tasks/exit",
    "/tasks/delete",
    "/containers/delete",
    "/snapshot/remove",
];

struct Options {
    node: PathBuf,
    rate: u32,
    seconds: u64,
    warmup: u64,
    report: Option<PathBuf>,
    /// Forged exits (of ids no store holds) instead of the node's churn.
    forged: bool,
    /// Events told together, as the stream reads them (`0`: one at a time).
    batch: Duration,
    watch: Vec<String>,
}

fn options() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let mut options = Options {
        node: PathBuf::new(),
        rate: 50,
        seconds: 60,
        warmup: 10,
        report: None,
        forged: false,
        batch: events::READ_EVERY,
        watch: Vec::new(),
    };
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--node" => options.node = value()?.into(),
            "--rate" => options.rate = value()?.parse().map_err(|e| format!("--rate: {e}"))?,
            "--seconds" => {
                options.seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?
            }
            "--warmup" => {
                options.warmup = value()?.parse().map_err(|e| format!("--warmup: {e}"))?
            }
            "--report" => options.report = Some(value()?.into()),
            "--forged" => options.forged = true,
            "--batch-ms" => {
                let ms = value()?.parse().map_err(|e| format!("--batch-ms: {e}"))?;
                options.batch = Duration::from_millis(ms);
            }
            "--" => {
                options.watch = args.by_ref().collect();
                break;
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    if options.node.as_os_str().is_empty()
        || options.watch.first().map(String::as_str) != Some("watch")
    {
        return Err("usage: watch_replay --node DIR [--rate N] [--seconds S] [--warmup S] [--report FILE] [--forged] [--batch-ms MS] -- watch ARGS".into());
    }
    Ok(options)
}

/// The node's containers, by the directories of CRI's store.
fn container_ids(node: &Path) -> Vec<String> {
    let store = node.join("root/io.containerd.grpc.v1.cri/containers");
    let mut ids: Vec<String> = std::fs::read_dir(&store)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

/// The `n`th event: the end of one container after another (its exit,
/// its task's delete, its record's and its snapshot's removal), or with
/// `forged` an init exit of an id no store holds, a new one each time.
fn nth_event(ids: &[String], forged: bool, n: u64) -> Event {
    if forged {
        let id = format!("{n:064x}");
        return Event {
            topic: "/tasks/exit".into(),
            namespace: "k8s.io".into(),
            container_id: Some(id.clone()),
            exec_id: Some(id),
            pid: Some(4_000_000),
            exit_status: Some(137),
            ..Event::default()
        };
    }
    let id = &ids[(n / CHURN.len() as u64) as usize % ids.len()];
    let topic = CHURN[n as usize % CHURN.len()];
    Event {
        topic: topic.into(),
        namespace: "k8s.io".into(),
        container_id: (topic != "/snapshot/remove").then(|| id.clone()),
        exec_id: (topic == "/tasks/exit").then(|| id.clone()),
        ..Event::default()
    }
}

/// Replays `rate` events a second until `watch` ends, told as the stream
/// tells them: every `batch`, what arrived meanwhile in one batch (the stream reads at
/// most every `events::READ_EVERY`), or one at a time with a `batch` of 0.
fn replay(ids: Vec<String>, rate: u32, forged: bool, batch: Duration) -> watch::Replay {
    Box::new(move |tell: Teller| {
        if !tell(StreamNews::Up) {
            return;
        }
        let every = Duration::from_secs(1) / rate.max(1);
        // What a batch holds at this rate, made room for at once.
        let due_per_batch = (batch.as_nanos() / every.as_nanos().max(1) + 1)
            .min(events::BATCH_MOST as u128) as usize;
        let start = Instant::now();
        let mut n = 0u64;
        loop {
            // Every event due by now, as one batch (at most the stream's).
            let mut told = Vec::with_capacity(due_per_batch);
            while (start + every * (n as u32) <= Instant::now() || told.is_empty())
                && told.len() < events::BATCH_MOST
            {
                told.push(nth_event(&ids, forged, n));
                n += 1;
            }
            if !tell(StreamNews::Events(told)) {
                return;
            }
            let next = (start + every * (n as u32)).max(Instant::now() + batch);
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
    })
}

fn main() -> ExitCode {
    let options = match options() {
        Ok(options) => options,
        Err(why) => {
            eprintln!("watch_replay: {why}");
            return ExitCode::from(2);
        }
    };
    let ids = container_ids(&options.node);
    let containers = ids.len();
    if ids.is_empty() {
        eprintln!("watch_replay: no container in {}", options.node.display());
        return ExitCode::from(2);
    }
    let cli = Cli::parse_from(std::iter::once("nodectl".to_string()).chain(options.watch.clone()));
    let Command::Watch(args) = &cli.command else {
        unreachable!("checked: the arguments are watch's");
    };
    let (warmup, seconds) = (options.warmup, options.seconds);
    let measured = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(warmup));
        let (from, at) = (cpu_used(), Instant::now());
        std::thread::sleep(Duration::from_secs(seconds));
        let (used, took) = (cpu_used() - from, at.elapsed());
        // watch ends on SIGTERM, with its summary on stdout.
        let _ = raise(Signal::SIGTERM);
        (used, took)
    });
    let status = watch::run_replaying(
        &cli.global,
        args,
        replay(ids, options.rate, options.forged, options.batch),
    );
    let (used, took) = measured.join().expect("the measuring thread");
    let peak_kib = getrusage(UsageWho::RUSAGE_SELF)
        .map(|u| u.max_rss())
        .unwrap_or(0);
    let percent = 100.0 * used.as_secs_f64() / took.as_secs_f64();
    let mib = peak_kib as f64 / 1024.0;
    let verdict = |v: f64, limit: f64, unit: &str| {
        if v <= limit {
            format!("met ({v:.2} {unit}, budget {limit} {unit})")
        } else {
            format!("missed: {v:.2} {unit} over the {limit} {unit} budget")
        }
    };
    let text = format!(
        "`watch` fed {} events/s ({}) on {} containers: {:.2} s of CPU in {:.0} s after a {} s warm-up, \
         {:.2} % of one core: {}; peak RSS {:.1} MiB: {}; watch {}.\n",
        options.rate,
        if options.forged {
            "forged init exits of ids no store holds"
        } else {
            "a container's exit, task delete, record and snapshot removal in turn"
        },
        containers,
        used.as_secs_f64(),
        took.as_secs_f64(),
        warmup,
        percent,
        verdict(percent, TARGET_CORE_PERCENT, "%"),
        mib,
        verdict(mib, TARGET_MIB, "MiB"),
        if status == ExitCode::SUCCESS {
            "ended with status 0"
        } else {
            "ended with a failure status"
        },
    );
    eprint!("{text}");
    if let Some(path) = &options.report {
        if let Err(err) = std::fs::write(path, &text) {
            eprintln!("watch_replay: {}: {err}", path.display());
            return ExitCode::from(2);
        }
    }
    if percent <= TARGET_CORE_PERCENT && mib <= TARGET_MIB {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
