//! `nodectl serve` against a real containerd (the test bed) with a pod
//! running, scraped over loopback: every source read, no finding, the
//! version from the API, both APIs' calls, and the loop keeps checking at
//! its interval.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use support::serve::{value, Served};
use support::TestBed;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_scrapes_a_real_containerd() {
    let Some(bed) = TestBed::start("serve_scrapes_a_real_containerd").await else {
        return;
    };
    let _pod = bed
        .run_pod("served", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    let paths = [bed.root(), bed.state(), bed.address(), bed.config_path()].map(PathBuf::from);
    let served = Served::start(support::nodectl_command(
        &["serve", "--listen", "127.0.0.1:0", "--interval", "2s"],
        paths.each_ref().map(PathBuf::as_path),
    ));
    let first = served.first_metrics(Duration::from_secs(60));

    assert_eq!(
        value(&first, "nodectl_up{command=\"check\"}"),
        1.0,
        "{first}"
    );
    for line in first.lines().filter(|l| l.starts_with("nodectl_findings{")) {
        assert!(line.ends_with(" 0"), "no finding on a healthy node: {line}");
    }
    let info = first
        .lines()
        .find(|l| l.starts_with("nodectl_containerd_info{"))
        .unwrap();
    assert!(
        info.contains(bed.containerd_version()) && info.contains("source=\"api\""),
        "{info}"
    );
    assert_eq!(
        value(
            &first,
            "nodectl_api_call_failed{api=\"cri\",call=\"ListContainers\"}"
        ),
        0.0,
        "{first}"
    );
    assert!(
        first.contains("nodectl_api_calls{api=\"containerd\","),
        "{first}"
    );
    let health = served.get("/healthz");
    assert_eq!(health.status, 200, "{health:?}");

    // The loop runs again at its interval, with no scrape asking for it.
    let runs = value(&first, "nodectl_checks_total{command=\"check\"}");
    let stamp = value(
        &first,
        "nodectl_last_run_timestamp_seconds{command=\"check\"}",
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let later = loop {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let metrics = served.get("/metrics").body;
        if value(&metrics, "nodectl_checks_total{command=\"check\"}") > runs {
            break metrics;
        }
        assert!(
            Instant::now() < deadline,
            "no second run in 30 s; stderr:\n{}",
            served.log()
        );
    };
    assert!(
        value(
            &later,
            "nodectl_last_run_timestamp_seconds{command=\"check\"}"
        ) > stamp,
        "{later}"
    );
    assert_eq!(
        value(&later, "nodectl_up{command=\"check\"}"),
        1.0,
        "{later}"
    );
}
