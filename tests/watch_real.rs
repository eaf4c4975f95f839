//! `nodectl watch` against a real containerd of every line, with `nodectl
//! serve --interval 1h` beside it on the same bed: containerd stopped
//! under them while a container's init exits and its shim gives up
//! publishing the exit, then started again (both streams reconnect; the
//! look after the reconnect is the first, and tells the exit as a late
//! exit on 1.6, where CRI records its real time; 1.7 and later record an
//! unknown exit at start-up, and nothing is told); the seeds' zombie (a
//! container exits while its shim's umount2 is held up 40 s, CRI's exit
//! handler gives up at 10 s) told by watch and shown in serve's /metrics
//! by an event's look while the delete is still stuck (within 30 s of the
//! exit: see `bound`), where a poll every `--interval` would need up to its
//! interval; the zombie cleared and told as a late exit once the
//! unmount is let go, with what the flight recorder kept while it was
//! stuck (the shim in umount2); nothing told twice; SIGTERM ends it with a
//! summary and 0. And the every-line leaked shim (a shim that did not
//! answer across a containerd restart, its pod then removed) told within
//! 30 s of the removal of its sandbox, by an event's look.

mod support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use support::serve::{value, Served};
use support::Line;
use support::TestBed;

const TEST: &str = "watch_real";

const ZOMBIES: &str = "nodectl_findings{command=\"check\",kind=\"zombie\"}";
const STREAM_UP: &str = "nodectl_event_stream_up{command=\"check\"}";
const RECONNECTS: &str = "nodectl_event_stream_reconnects_total{command=\"check\"}";
const EXITS_HEARD: &str = "nodectl_events_total{command=\"check\",topic=\"tasks/exit\"}";

/// How long containerd stays down after a container's exit: past the
/// shim's last try to publish it (15 s after it) and --late-after (10 s).
const DOWN_AFTER_THE_EXIT: Duration = Duration::from_secs(18);

/// The tests measure latencies: one bed at a time on the machine's cores.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What `watch` printed, each line with when it arrived.
struct Lines {
    lines: mpsc::Receiver<(Instant, String)>,
    seen: Vec<(Instant, String)>,
}

impl Lines {
    fn from(reader: impl std::io::Read + Send + 'static) -> Lines {
        let (tell, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(reader).lines().map_while(Result::ok) {
                if tell.send((Instant::now(), line)).is_err() {
                    return;
                }
            }
        });
        Lines {
            lines,
            seen: Vec::new(),
        }
    }

    /// The first line (seen or to come within `limit`) that `wanted`
    /// accepts, with when it arrived.
    fn wait_for(
        &mut self,
        limit: Duration,
        wanted: impl Fn(&str) -> bool,
    ) -> Option<(Instant, String)> {
        if let Some(found) = self.seen.iter().find(|(_, l)| wanted(l)) {
            return Some(found.clone());
        }
        let deadline = Instant::now() + limit;
        while let Ok((at, line)) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            self.seen.push((at, line.clone()));
            if wanted(&line) {
                return Some((at, line));
            }
        }
        None
    }

    /// Every line so far (waiting `settle` for stragglers).
    fn all(&mut self, settle: Duration) -> Vec<String> {
        while let Ok(line) = self.lines.recv_timeout(settle) {
            self.seen.push(line);
        }
        self.seen.iter().map(|(_, l)| l.clone()).collect()
    }
}

fn change(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or(Value::Null)
}

fn is(line: &str, what: &str, kind: &str, id: &str) -> bool {
    let doc = change(line);
    doc["change"] == what && doc["finding"]["kind"] == kind && doc["finding"]["id"] == id
}

/// `nodectl watch -o json` on the bed, once it subscribed: the child, its
/// stdout and its stderr.
fn start_watch(bed: &TestBed, more: &[&str]) -> (std::process::Child, Lines, Lines) {
    let paths = [bed.root(), bed.state(), bed.address(), bed.config_path()];
    // The flight recorder's file is the bed's, not the machine's.
    let recorder = recorder_file(bed);
    let args: Vec<&str> = ["watch", "-o", "json", "--recorder-file", &recorder]
        .iter()
        .chain(more)
        .copied()
        .collect();
    let mut watch = support::nodectl_command(&args, paths);
    watch.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = watch.spawn().expect("nodectl watch");
    let out = Lines::from(child.stdout.take().unwrap());
    let mut err = Lines::from(child.stderr.take().unwrap());
    let subscribed = err.wait_for(Duration::from_secs(30), |l| {
        l.contains("watching containerd's events at")
    });
    assert!(
        subscribed.is_some(),
        "watch subscribes to the proven daemon: {:?}",
        err.all(Duration::ZERO)
    );
    (child, out, err)
}

fn recorder_file(bed: &TestBed) -> String {
    bed.scratch("recorder/flight-recorder.json")
        .display()
        .to_string()
}

/// Ends `watch` with SIGTERM: it exits 0 after a summary, which is the last
/// line; nothing was told twice. Returns the summary.
fn stop_watch(mut child: std::process::Child, out: &mut Lines) -> Value {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let status = child.wait().expect("watch ends");
    assert_eq!(status.code(), Some(0), "SIGTERM ends it with 0");
    let lines = out.all(Duration::from_millis(200));
    let mut told: Vec<(String, String, String)> = lines
        .iter()
        .map(|l| change(l))
        .filter(|doc| doc["change"] != "summary")
        .map(|doc| {
            (
                doc["change"].as_str().unwrap_or_default().to_string(),
                doc["finding"]["kind"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                doc["finding"]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    let count = told.len();
    told.sort();
    told.dedup();
    assert_eq!(told.len(), count, "nothing told twice: {lines:#?}");
    let summary = change(lines.last().map(String::as_str).unwrap_or_default());
    assert_eq!(summary["change"], "summary", "{lines:#?}");
    summary
}

/// CRI's status file of a container, parsed (Null when unreadable).
fn status_file(bed: &TestBed, container_id: &str) -> Value {
    let text = std::fs::read_to_string(bed.status_file(container_id)).unwrap_or_default();
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

fn ns_to_time(ns: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(u64::try_from(ns).unwrap_or(0))
}

/// The value of `series` in a metrics text; 0 when absent (a topic not
/// heard yet).
fn counted(text: &str, series: &str) -> f64 {
    text.lines()
        .find(|l| l.rsplit_once(' ').is_some_and(|(s, _)| s == series))
        .map_or(0.0, |_| value(text, series))
}

/// The sample lines of `family` in a metrics text.
fn metric_lines(text: &str, family: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with(family))
        .map(str::to_string)
        .collect()
}

/// `a` less `b` in seconds (negative when `a` is earlier).
fn seconds_from(a: SystemTime, b: SystemTime) -> f64 {
    a.duration_since(b)
        .map(|d| d.as_secs_f64())
        .unwrap_or_else(|e| -e.duration().as_secs_f64())
}

/// A kubelet pod directory (`<kubelet>/pods/<uid>`) last changed an hour
/// ago, of a pod no sandbox has: an `orphan-pod-dir` past the grace.
fn orphan_pod_dir(kubelet: &std::path::Path, uid: &str) -> PathBuf {
    let dir = kubelet.join("pods").join(uid);
    std::fs::create_dir_all(&dir).expect("a pod directory");
    std::fs::File::open(&dir)
        .and_then(|d| d.set_modified(SystemTime::now() - Duration::from_secs(3600)))
        .expect("its mtime");
    dir
}

/// The pid CRI's status file records for `container_id`.
fn status_pid(bed: &TestBed, container_id: &str) -> i32 {
    status_file(bed, container_id)["Pid"].as_i64().unwrap_or(0) as i32
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_finds_an_exit_while_containerd_was_down_once_and_tells_a_zombie_while_its_delete_is_stuck_as_serve_does(
) {
    let _alone = ONE_AT_A_TIME.lock().await;
    let Some(mut bed) = TestBed::start(TEST).await else {
        return;
    };
    let _healthy = bed
        .run_pod("healthy", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    // Its init is killed while containerd is down.
    let down = bed
        .run_pod("down", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    // kubelet pod directories of long-gone pods (orphan-pod-dir), all in
    // watch's first look. One stays, open across the restart (the look
    // after it must not tell it again); one is removed at once: its
    // clearing says the look watch's first connect calls for has run, and
    // none is due after it; one is removed while containerd is down: its
    // clearing is the look after the reconnect.
    let kubelet = bed.scratch("kubelet");
    orphan_pod_dir(&kubelet, "gone-for-good");
    let settled = orphan_pod_dir(&kubelet, "gone-at-once");
    let while_down = orphan_pod_dir(&kubelet, "gone-while-down");
    let kubelet = kubelet.display().to_string();
    // A late exit is one recorded over 10 s after it happened: less than
    // containerd is down below.
    let (child, mut out, mut err) =
        start_watch(&bed, &["--late-after", "10s", "--kubelet-root", &kubelet]);
    // serve beside it, with an interval a poll would not reach in the test.
    let paths = [bed.root(), bed.state(), bed.address(), bed.config_path()].map(PathBuf::from);
    let served = Served::start(support::nodectl_command(
        &["serve", "--listen", "127.0.0.1:0", "--interval", "1h"],
        paths.each_ref().map(PathBuf::as_path),
    ));
    for uid in ["gone-for-good", "gone-at-once", "gone-while-down"] {
        let found = out.wait_for(Duration::from_secs(10), |l| {
            is(l, "found", "orphan-pod-dir", uid)
        });
        assert!(found.is_some(), "{uid}: {:?}", out.all(Duration::ZERO));
    }
    std::fs::remove_dir(&settled).expect("removing a pod directory");
    let cleared = out.wait_for(Duration::from_secs(30), |l| {
        is(l, "cleared", "orphan-pod-dir", "gone-at-once")
    });
    assert!(cleared.is_some(), "{:?}", out.all(Duration::ZERO));
    let first = served.first_metrics(Duration::from_secs(60));
    assert_eq!(counted(&first, ZOMBIES), 0.0, "{first}");
    assert!(
        support::wait_until(Duration::from_secs(30), || counted(
            &served.get("/metrics").body,
            STREAM_UP
        ) == 1.0),
        "serve's stream is up: {}",
        served.get("/metrics").body
    );
    let exits_heard = counted(&served.get("/metrics").body, EXITS_HEARD);

    // No look is due now (no event heard; the interval is 5 min): none
    // runs until the stream is back. containerd is stopped (its shims live
    // on), and meanwhile a container's init exits: its shim cannot publish
    // the exit, retries 1, 2, 3, 4 and 5 s after each failed send and then
    // drops it (the shim's publisher, maxRequeue 5, on every line).
    // containerd stays down past that and past --late-after.
    let down_pid = status_pid(&bed, &down.container_id);
    assert!(down_pid > 0, "the container's pid in its status file");
    bed.stop_containerd();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(down_pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL");
    assert!(
        support::wait_until(Duration::from_secs(10), || !support::is_running(down_pid)),
        "the container's init is gone"
    );
    let killed = SystemTime::now();
    std::fs::remove_dir(&while_down).expect("removing a pod directory");
    // Asked now, nodectl tells the zombie as what it is: containerd down.
    let output = bed.nodectl(&["zombies", "-o", "json"]);
    let doc = support::report(&output);
    let zombie = support::findings_of_kind(&doc, "zombie")
        .into_iter()
        .find(|f| f["id"] == down.container_id.as_str());
    let cause = zombie.and_then(|f| f["cause"].as_str()).unwrap_or_default();
    assert!(
        cause.starts_with("No containerd is running"),
        "{}: the zombie while containerd is down: {doc:#}",
        bed.containerd_version()
    );
    let asked = killed.elapsed().unwrap_or_default();
    std::thread::sleep(DOWN_AFTER_THE_EXIT.saturating_sub(asked));
    let restarted = SystemTime::now();
    bed.start_containerd().await;
    let again = err.wait_for(Duration::from_secs(60), |l| {
        l.contains("event stream up again")
    });
    let Some((again, _)) = again else {
        panic!(
            "{}: reconnected: {:?}",
            bed.containerd_version(),
            err.all(Duration::ZERO)
        )
    };
    // The look after the reconnect, told as one batch (what cleared, then
    // what was found), and everything told before it.
    let look = out.wait_for(Duration::from_secs(30), |l| {
        is(l, "cleared", "orphan-pod-dir", "gone-while-down")
    });
    let Some((looked, _)) = look else {
        panic!(
            "{}: no look after the reconnect: {:?}",
            bed.containerd_version(),
            out.all(Duration::ZERO)
        )
    };
    out.all(Duration::from_millis(500));
    let told: Vec<(String, String, String)> = out
        .seen
        .iter()
        .map(|(_, line)| change(line))
        .map(|doc| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (
                text(&doc["change"]),
                text(&doc["finding"]["kind"]),
                text(&doc["finding"]["id"]),
            )
        })
        .collect();
    let status = status_file(&bed, &down.container_id);
    let finished = ns_to_time(status["FinishedAt"].as_i64().unwrap_or(0));
    let written = std::fs::metadata(bed.status_file(&down.container_id))
        .and_then(|m| m.modified())
        .expect("the status file's mtime");
    eprintln!(
        "{TEST}: {}: exit while containerd was down: ExitCode {} {}, FinishedAt {:+.2} s from the exit, written {:+.2} s from the start; told by the look after the reconnect ({:.1} s after it): {told:?}",
        bed.containerd_version(),
        status["ExitCode"],
        status["Reason"],
        seconds_from(finished, killed),
        seconds_from(written, restarted),
        looked.saturating_duration_since(again).as_secs_f64(),
    );
    let late = |id: &str| ("found".to_string(), "late-exit".to_string(), id.to_string());
    let marker = |what: &str, uid: &str| {
        (
            what.to_string(),
            "orphan-pod-dir".to_string(),
            uid.to_string(),
        )
    };
    // Before the reconnect: only the first looks' (nothing while down).
    let mut expected = vec![
        marker("found", "gone-at-once"),
        marker("found", "gone-for-good"),
        marker("found", "gone-while-down"),
        marker("cleared", "gone-at-once"),
        marker("cleared", "gone-while-down"),
    ];
    assert!(written > restarted, "written at start-up: {status}");
    if bed.line() == Line::V1_6 {
        // CRI's start-up finds the task stopped and records its exit with
        // the shim's exit time and status (restart.go's loadContainer,
        // `case containerd.Stopped`): the look after the reconnect finds
        // it late.
        assert!(seconds_from(finished, killed).abs() < 2.0, "{status}");
        assert_eq!(status["ExitCode"], 137, "SIGKILL: {status}");
        expected.push(late(&down.container_id));
    } else {
        // containerd's start-up takes a task shim that lists no process for
        // one whose task was never created and deletes it (containerd#6866,
        // 1.7.0: "cleaning leaked shim process"); CRI then finds no task
        // and records an unknown exit at start-up (255, "Unknown"): the
        // exit's time is lost, and no look can tell it was late.
        assert!(finished >= restarted, "{status}");
        assert_eq!(status["ExitCode"], 255, "{status}");
        assert_eq!(status["Reason"], "Unknown", "{status}");
    }
    let mut sorted = told.clone();
    sorted.sort();
    expected.sort();
    assert_eq!(sorted, expected, "{told:?}");
    if let Some((_, late)) = out.wait_for(Duration::ZERO, |l| {
        is(l, "found", "late-exit", &down.container_id)
    }) {
        let evidence = &change(&late)["finding"]["evidence"];
        assert_eq!(evidence["exit_code"], 137, "{evidence:#}");
        assert_eq!(evidence["pod_name"], "down", "{evidence:#}");
        // The lag is the status file's mtime − FinishedAt (rounded to a
        // tenth of a second): from the exit (the shim's time, which may
        // trail the test's sight of the process gone by a moment) to the
        // record made after the restart, so past all the time containerd
        // was down since the exit.
        let lag = evidence["lag_seconds"].as_f64().unwrap_or_default();
        let (file_lag, down) = (
            seconds_from(written, finished),
            seconds_from(restarted, finished),
        );
        assert!(
            (lag - file_lag).abs() <= 0.06 && lag >= down - 0.05,
            "lag {lag} s: the file's {file_lag:.2} s, down {down:.2} s since the exit: {evidence:#}"
        );
    }
    // serve is back too, and heard no exit since: the shim dropped it.
    let mut metrics = String::new();
    assert!(
        support::wait_until(Duration::from_secs(60), || {
            metrics = served.get("/metrics").body;
            counted(&metrics, STREAM_UP) == 1.0 && counted(&metrics, RECONNECTS) == 1.0
        }),
        "serve reconnected: {metrics}"
    );
    eprintln!(
        "{TEST}: {}: serve heard {:?}",
        bed.containerd_version(),
        metric_lines(&metrics, "nodectl_events_total")
    );
    assert_eq!(counted(&metrics, EXITS_HEARD), exits_heard, "{metrics}");

    let stuck = bed
        .run_pod("stuck", "init", &["/bin/sh", "-c", "sleep 4"])
        .await;
    let shim = bed.shim_pid(&stuck.sandbox_id);
    let mut strace = bed.delay_umount2(shim, Duration::from_secs(40));
    let pid = status_pid(&bed, &stuck.container_id);
    assert!(pid > 0, "the container's pid in its status file");
    // The exit, as the kernel tells it: the shim publishes TaskExit then.
    assert!(
        support::wait_until(Duration::from_secs(30), || !support::is_running(pid)),
        "the container exits after 4 s"
    );
    let exited = Instant::now();
    // serve's /metrics, scraped beside watch's output.
    let address = served.address;
    let scraped = std::thread::spawn(move || {
        let mut metrics = String::new();
        let seen = support::wait_until(Duration::from_secs(30), || {
            metrics = support::serve::request(address, "GET", "/metrics")
                .map(|answer| answer.body)
                .unwrap_or_else(|e| panic!("GET /metrics: {e}"));
            counted(&metrics, ZOMBIES) == 1.0
        });
        (seen.then(Instant::now), metrics)
    });
    let found = out.wait_for(Duration::from_secs(30), |l| {
        is(l, "found", "zombie", &stuck.container_id)
    });
    let Some((told, line)) = found else {
        panic!(
            "{}: no zombie told within 30 s of the exit: {:?} {:?}",
            bed.containerd_version(),
            out.all(Duration::ZERO),
            err.all(Duration::ZERO)
        )
    };
    let latency = told.duration_since(exited);
    eprintln!(
        "{TEST}: {}: zombie told {:.1} s after the exit",
        bed.containerd_version(),
        latency.as_secs_f64()
    );
    // What is asserted is that an event's look tells it, while the delete
    // is still stuck (40 s) and long before a poll would (1 h, 5 min here):
    // the bound is the wait's. The latency is printed, not bounded tighter
    // (issue 46's 12 s is a benchmark's target): 12.6 s measured on 1.6,
    // 1.7 and 2.0 on a quiet machine, 16.3 s on 1.7.34 once under CI's four
    // lines on 2 cores. 2.3 takes longer: it no longer lists the task while
    // its delete is stuck in umount2, so nodectl takes the dead container
    // for one whose record CRI may still be writing and confirms it a
    // second look 10 s later (20.5 s on 2.3.4). Telling that stuck delete
    // apart (its shim in umount2) made the kubelet churn test fail on
    // 2.3.4: written down, not fixed.
    let bound = Duration::from_secs(30);
    assert!(latency < bound, "{latency:?}: {line}");
    // Not before CRI's exit handler gave up (10 s): it was being handled.
    assert!(latency > Duration::from_secs(10), "{latency:?}: {line}");
    assert_eq!(change(&line)["finding"]["evidence"]["pod_name"], "stuck");

    let (seen, metrics) = scraped.join().expect("scraping serve");
    let Some(seen) = seen else {
        panic!(
            "{}: no zombie in /metrics 30 s after the exit:\n{metrics}\n{}",
            bed.containerd_version(),
            served.log()
        )
    };
    let latency = seen.duration_since(exited);
    eprintln!(
        "{TEST}: {}: zombie in serve's /metrics {:.1} s after the exit",
        bed.containerd_version(),
        latency.as_secs_f64()
    );
    assert!(latency < bound, "{latency:?}");
    assert!(counted(&metrics, EXITS_HEARD) >= 1.0, "{metrics}");
    // From the exit's event, not a reconnect's look: none since the restart.
    assert_eq!(counted(&metrics, RECONNECTS), 1.0, "{metrics}");

    // Let the unmount go: CRI records the exit, late.
    tokio::time::sleep(Duration::from_secs(46).saturating_sub(exited.elapsed())).await;
    strace.detach();
    let let_go = (Instant::now(), SystemTime::now());
    let cleared = out.wait_for(Duration::from_secs(240), |l| {
        is(l, "cleared", "zombie", &stuck.container_id)
    });
    assert!(
        cleared.is_some(),
        "{}: the zombie is cleared once CRI records the exit: {:?}",
        bed.containerd_version(),
        out.all(Duration::ZERO)
    );
    let late = out.wait_for(Duration::from_secs(10), |l| {
        is(l, "found", "late-exit", &stuck.container_id)
    });
    let Some((told_late, late)) = late else {
        panic!("told as a late exit: {:?}", out.all(Duration::ZERO))
    };
    // When CRI wrote the exit down, from the file's mtime: what of the
    // latency is CRI's own (2.x retries a failed exit on a backoff).
    let cri_recorded = std::fs::metadata(bed.status_file(&stuck.container_id))
        .and_then(|m| m.modified())
        .map_or(f64::NAN, |at| seconds_from(at, let_go.1));
    // With what the flight recorder kept while it was stuck: the shim in
    // umount2 (held 40 s from about 4 s in; sampled every 5 s from the
    // zombie on, about 12 s in).
    let evidence = &change(&late)["finding"]["evidence"];
    eprintln!(
        "{TEST}: {}: late exit: {}",
        bed.containerd_version(),
        evidence["why"]
    );
    let recorded = &evidence["recorded"];
    assert_eq!(recorded["shim_pid"], shim, "{evidence:#}");
    assert!(
        recorded["samples_in_umount2"].as_u64() >= Some(3),
        "{evidence:#}"
    );
    assert!(
        recorded["in_umount2_for_at_least_seconds"].as_f64() >= Some(20.0),
        "{evidence:#}"
    );
    assert!(
        evidence["why"]
            .as_str()
            .is_some_and(|why| why.contains(&format!("shim {shim} was in umount2"))),
        "{evidence:#}"
    );
    // The ring as watch wrote it to its file, and as collect archives it.
    let file = recorder_file(&bed);
    let kept = |ring: &Value| {
        ring["recordings"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| {
                r["container_id"] == stuck.container_id.as_str()
                    && r["samples_in_umount2"].as_u64() >= Some(3)
            })
    };
    let written: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert!(kept(&written), "{file}: {written:#}");
    let archive = bed.scratch("collected.tar.gz");
    let collected = bed.nodectl(&[
        "collect",
        archive.to_str().unwrap(),
        "--recorder-file",
        &file,
    ]);
    assert_eq!(
        collected.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&collected.stderr)
    );
    let archived = support::archive_files(&archive)
        .into_iter()
        .find(|(name, ..)| name == "flight-recorder.json")
        .expect("collect archives the flight recorder");
    let archived: Value = serde_json::from_slice(&archived.1).unwrap();
    assert!(kept(&archived), "{archived:#}");
    eprintln!(
        "{TEST}: {}: CRI recorded the exit {cri_recorded:.1} s after the unmount was let go; \
         cleared and told as a late exit {:.1} s after it",
        bed.containerd_version(),
        told_late.duration_since(let_go.0).as_secs_f64()
    );

    // Nothing told twice: the restart's look saw the open orphan pod
    // directory again, later looks the exit while down.
    let summary = stop_watch(child, &mut out);
    assert!(summary["reconnects"].as_u64() >= Some(1), "{summary}");
    assert!(summary["looks"].as_u64() >= Some(4), "{summary}");
    let open: Vec<(&str, &str)> = summary["open"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| Some((f["kind"].as_str()?, f["id"].as_str()?)))
        .collect();
    let mut expected = vec![
        ("late-exit", stuck.container_id.as_str()),
        ("orphan-pod-dir", "gone-for-good"),
    ];
    if bed.line() == Line::V1_6 {
        expected.push(("late-exit", down.container_id.as_str()));
    }
    for open_one in expected {
        assert!(open.contains(&open_one), "{open_one:?}: {summary}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_tells_a_leaked_shim_by_an_event_after_its_sandbox_s_removal() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let Some(mut bed) = TestBed::start("watch_real_leaked_shim").await else {
        return;
    };
    let _healthy = bed
        .run_pod("healthy", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    let victim = bed
        .run_pod("victim", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    let (child, mut out, mut err) = start_watch(&bed, &[]);
    // The recipe of tests/leaked_shims_real.rs: the shim does not answer
    // while containerd restarts, then its pod is removed.
    let shim = bed.shim_pid(&victim.sandbox_id);
    let stopped = nix::unistd::Pid::from_raw(shim);
    nix::sys::signal::kill(stopped, nix::sys::signal::Signal::SIGSTOP).unwrap();
    bed.restart_containerd().await;
    nix::sys::signal::kill(stopped, nix::sys::signal::Signal::SIGCONT).unwrap();
    let again = err.wait_for(Duration::from_secs(60), |l| {
        l.contains("event stream up again")
    });
    assert!(
        again.is_some(),
        "reconnected: {:?}",
        err.all(Duration::ZERO)
    );
    assert!(
        bed.stop_and_remove_pod(&victim.sandbox_id, Duration::from_secs(120))
            .await,
        "the sandbox is removed from CRI"
    );
    let removed = Instant::now();
    let found = out.wait_for(Duration::from_secs(30), |l| {
        is(l, "found", "leaked-shim", &victim.sandbox_id)
    });
    let Some((told, line)) = found else {
        // What a look of its own sees now: whether the recipe leaked the
        // shim at all, and whether the daemon is provable.
        let check = bed.nodectl(&["check", "-o", "json"]);
        let seen: String = String::from_utf8_lossy(&check.stdout)
            .chars()
            .take(4000)
            .collect();
        panic!(
            "{}: no leaked shim told within 30 s of the removal (shim {shim} running: {}; \
             `check` now: {seen}): {:?} {:?}",
            bed.containerd_version(),
            support::is_running(shim),
            out.all(Duration::ZERO),
            err.all(Duration::ZERO)
        )
    };
    let latency = told.saturating_duration_since(removed);
    eprintln!(
        "{TEST}: {}: leaked shim told {:.1} s after its sandbox was removed",
        bed.containerd_version(),
        latency.as_secs_f64()
    );
    // Its bound is the wait's, as for the zombie: an event's look, not a
    // poll (the latency is printed; a benchmark's to bound).
    assert!(latency < Duration::from_secs(30), "{latency:?}: {line}");
    assert_eq!(change(&line)["finding"]["evidence"]["shim_pid"], shim);
    let summary = stop_watch(child, &mut out);
    assert!(summary["reconnects"].as_u64() >= Some(1), "{summary}");
    // The leaked shim is the test's to end.
    let _ = nix::sys::signal::kill(stopped, nix::sys::signal::Signal::SIGKILL);
}
