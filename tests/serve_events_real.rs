//! `nodectl serve` driven by containerd's events, on a real containerd of
//! every line: with `--interval 1h` (a poll would not look again for an
//! hour), the seeds' zombie (a container exits while its shim's umount2 is
//! held up 40 s) shows in `/metrics` within 15 s of its exit, with the
//! stream's own metrics: up, the exit counted by topic.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use support::serve::{value, Served};
use support::TestBed;

const TEST: &str = "serve_events_real";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_counts_a_zombie_within_15_s_of_its_exit_with_an_hour_long_interval() {
    let Some(bed) = TestBed::start(TEST).await else {
        return;
    };
    let _healthy = bed
        .run_pod("healthy", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    let paths = [bed.root(), bed.state(), bed.address(), bed.config_path()].map(PathBuf::from);
    let served = Served::start(support::nodectl_command(
        &["serve", "--listen", "127.0.0.1:0", "--interval", "1h"],
        paths.each_ref().map(PathBuf::as_path),
    ));
    let first = served.first_metrics(Duration::from_secs(60));
    assert_eq!(
        value(
            &first,
            "nodectl_findings{command=\"check\",kind=\"zombie\"}"
        ),
        0.0,
        "{first}"
    );
    let up = "nodectl_event_stream_up{command=\"check\"}";
    assert!(
        support::wait_until(Duration::from_secs(30), || value(
            &served.get("/metrics").body,
            up
        ) == 1.0),
        "the stream is up: {}",
        served.get("/metrics").body
    );

    let stuck = bed
        .run_pod("stuck", "init", &["/bin/sh", "-c", "sleep 4"])
        .await;
    let shim = bed.shim_pid(&stuck.sandbox_id);
    let _strace = bed.delay_umount2(shim, Duration::from_secs(40));
    let status = std::fs::read_to_string(bed.status_file(&stuck.container_id)).unwrap_or_default();
    let status: serde_json::Value = serde_json::from_str(&status).unwrap_or_default();
    let pid = status["Pid"].as_i64().unwrap_or(0) as i32;
    assert!(pid > 0, "the container's pid in its status file");
    assert!(
        support::wait_until(Duration::from_secs(30), || !support::is_running(pid)),
        "the container exits after 4 s"
    );
    let exited = Instant::now();
    let zombies = "nodectl_findings{command=\"check\",kind=\"zombie\"}";
    let mut metrics = String::new();
    let counted = support::wait_until(Duration::from_secs(30), || {
        metrics = served.get("/metrics").body;
        value(&metrics, zombies) == 1.0
    });
    let latency = exited.elapsed();
    assert!(
        counted,
        "{}: no zombie in /metrics 30 s after the exit:\n{metrics}\n{}",
        bed.containerd_version(),
        served.log()
    );
    eprintln!(
        "{TEST}: {}: zombie in /metrics {:.1} s after the exit",
        bed.containerd_version(),
        latency.as_secs_f64()
    );
    assert!(latency < Duration::from_secs(15), "{latency:?}");
    assert!(
        value(
            &metrics,
            "nodectl_events_total{command=\"check\",topic=\"tasks/exit\"}"
        ) >= 1.0,
        "{metrics}"
    );
    assert_eq!(
        value(
            &metrics,
            "nodectl_event_stream_reconnects_total{command=\"check\"}"
        ),
        0.0,
        "{metrics}"
    );
}
