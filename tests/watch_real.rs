//! `nodectl watch` against a real containerd of every line: the seeds'
//! zombie (a container exits while its shim's umount2 is held up 40 s, CRI's
//! exit handler gives up at 10 s) told within 15 s of the exit, where a
//! poll every `--interval` (5 min here) would need up to its interval; the
//! zombie cleared and told as a late exit once the unmount is let go, with
//! what the flight recorder kept while it was stuck (the shim in umount2);
//! containerd restarted under it (the stream reconnects and a full look
//! runs, nothing is told twice); SIGTERM ends it with a summary and 0. And
//! the every-line leaked shim (a shim that did not answer across a
//! containerd restart, its pod then removed) told within 15 s of the
//! removal of its sandbox.

mod support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::TestBed;

const TEST: &str = "watch_real";

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
fn start_watch(bed: &TestBed) -> (std::process::Child, Lines, Lines) {
    let paths = [bed.root(), bed.state(), bed.address(), bed.config_path()];
    let mut watch = support::nodectl_command(&["watch", "-o", "json"], paths);
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

/// The pid CRI's status file records for `container_id`.
fn status_pid(bed: &TestBed, container_id: &str) -> i32 {
    let text = std::fs::read_to_string(bed.status_file(container_id)).unwrap_or_default();
    let doc: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    doc["Pid"].as_i64().unwrap_or(0) as i32
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_tells_a_zombie_within_15_s_of_its_exit_and_survives_a_restart() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let Some(mut bed) = TestBed::start(TEST).await else {
        return;
    };
    let _healthy = bed
        .run_pod("healthy", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    let (child, mut out, mut err) = start_watch(&bed);

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
    assert!(latency < Duration::from_secs(15), "{latency:?}: {line}");
    // Not before CRI's exit handler gave up (10 s): it was being handled.
    assert!(latency > Duration::from_secs(10), "{latency:?}: {line}");
    assert_eq!(change(&line)["finding"]["evidence"]["pod_name"], "stuck");

    // Let the unmount go: CRI records the exit, late.
    tokio::time::sleep(Duration::from_secs(46).saturating_sub(exited.elapsed())).await;
    strace.detach();
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
    let Some((_, late)) = late else {
        panic!("told as a late exit: {:?}", out.all(Duration::ZERO))
    };
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
    eprintln!(
        "{TEST}: {}: cleared and told as a late exit {:.1} s after the unmount was let go",
        bed.containerd_version(),
        (exited.elapsed().as_secs_f64() - 46.0).max(0.0)
    );

    // containerd restarted under it: the stream comes back, a full look
    // runs, and nothing is told twice.
    bed.restart_containerd().await;
    let again = err.wait_for(Duration::from_secs(60), |l| {
        l.contains("event stream up again")
    });
    assert!(
        again.is_some(),
        "{}: reconnected: {:?}",
        bed.containerd_version(),
        err.all(Duration::ZERO)
    );
    // The look the reconnect started has time to end.
    std::thread::sleep(Duration::from_secs(5));

    let summary = stop_watch(child, &mut out);
    assert!(summary["reconnects"].as_u64() >= Some(1), "{summary}");
    assert!(summary["looks"].as_u64() >= Some(4), "{summary}");
    let open: Vec<&str> = summary["open"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["kind"].as_str())
        .collect();
    assert!(open.contains(&"late-exit"), "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_tells_a_leaked_shim_within_15_s_of_its_sandbox_s_removal() {
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
    let (child, mut out, mut err) = start_watch(&bed);
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
        panic!(
            "{}: no leaked shim told within 30 s of the removal: {:?} {:?}",
            bed.containerd_version(),
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
    assert!(latency < Duration::from_secs(15), "{latency:?}: {line}");
    assert_eq!(change(&line)["finding"]["evidence"]["shim_pid"], shim);
    let summary = stop_watch(child, &mut out);
    assert!(summary["reconnects"].as_u64() >= Some(1), "{summary}");
    // The leaked shim is the test's to end.
    let _ = nix::sys::signal::kill(stopped, nix::sys::signal::Signal::SIGKILL);
}
