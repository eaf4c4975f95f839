//! `nodectl check` against a real containerd: seed 001 (a held status lock
//! stalls CRI), a frozen containerd, and a healthy node.

mod support;

use std::time::{Duration, Instant};

use k8s_cri::v1::{LinuxContainerResources, UpdateContainerResourcesRequest};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use support::{Line, TestBed};

/// What a loaded CI machine adds to a frozen containerd's `check` beyond
/// its look's deadline: the zombie's second look, process start and exit.
const FROZEN_MARGIN: Duration = Duration::from_secs(2);

fn finding<'a>(doc: &'a Value, kind: &str, id: &str) -> Option<&'a Value> {
    doc["findings"]
        .as_array()?
        .iter()
        .find(|f| f["kind"] == kind && f["id"] == id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_status_lock_is_pinned_on_its_container_and_frozen_containerd_still_answers() {
    let Some(bed) = TestBed::start("held_status_lock_is_pinned_on_its_container").await else {
        return;
    };
    let healthy = bed
        .run_pod("healthy", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    let stuck = bed
        .run_pod("stuck", "init", &["/bin/sh", "-c", "sleep 4"])
        .await;
    let started = Instant::now();
    let shim = bed.shim_pid(&stuck.sandbox_id);
    let _strace = bed.delay_umount2(shim, Duration::from_secs(40));

    // After the exit (4 s), CRI's task.Delete sits in the shim's umount2 with
    // the process lock held; UpdateContainerResources then holds CRI's status
    // lock of the container while task.Update waits for that process lock.
    // Sent once the shim is in umount2, not at a fixed time: under a loaded
    // CI run on 1.6.20 an update sent 6 s in reached the shim before the
    // delete did, went through, and left no lock held.
    let in_umount2 =
        support::wait_until(Duration::from_secs(30), || support::procs::in_umount2(shim));
    assert!(
        in_umount2,
        "the stuck container's shim never entered umount2"
    );
    tokio::time::sleep(Duration::from_secs(6).saturating_sub(started.elapsed())).await;
    let mut cri = bed.cri().await;
    let stuck_id = stuck.container_id.clone();
    let update = tokio::spawn(async move {
        let request = UpdateContainerResourcesRequest {
            container_id: stuck_id,
            linux: Some(LinuxContainerResources {
                cpu_shares: 512,
                ..Default::default()
            }),
            ..Default::default()
        };
        let _ = tokio::time::timeout(
            Duration::from_secs(50),
            cri.update_container_resources(request),
        )
        .await;
    });
    tokio::time::sleep(Duration::from_secs(2)).await;

    let timed = Instant::now();
    let output = bed.nodectl(&["check", "-o", "json", "--timeout", "3s"]);
    eprintln!(
        "check with a held lock took {:.2} s",
        timed.elapsed().as_secs_f64()
    );
    let doc = support::report(&output);
    assert_eq!(output.status.code(), Some(1), "{doc}");
    let slow = finding(&doc, "cri-slow", &stuck.container_id)
        .unwrap_or_else(|| panic!("the stuck container is named as blocking CRI: {doc}"));
    let evidence = &slow["evidence"];
    match bed.line() {
        // UpdateContainerResources holds the status lock until the shim
        // answers task.Update, i.e. until the umount2 ends (40 s): both
        // calls run into nodectl's 3 s deadline.
        Line::V1_6 | Line::V1_7 | Line::V2_0 => {
            assert_eq!(evidence["container_status_timed_out"], true, "{slow}");
            assert_eq!(evidence["list_containers"]["timed_out"], true, "{slow}");
        }
        // 2.3 gives up on the stuck shim: since containerd#12821 (2.3.0) the
        // tasks service returns the shim's State timeout (2 s) instead of an
        // empty state, so UpdateContainerResources fails with "failed to get
        // task: context deadline exceeded" and releases the lock about 4 s
        // after it started (2 s in NRI's lookup, 2 s under the lock). Earlier
        // lines swallow that timeout and go on to task.Update, which waits
        // for the umount2. nodectl, 2 s in, sees both calls answer late but
        // within its deadline: still cri-slow.
        Line::V2_3 => {
            assert_eq!(evidence["container_status_timed_out"], false, "{slow}");
            assert_eq!(evidence["list_containers"]["timed_out"], false, "{slow}");
            let latency = evidence["container_status_latency_ms"].as_f64().unwrap();
            assert!(
                (1000.0..3000.0).contains(&latency),
                "answered late, within the deadline: {slow}"
            );
        }
    }
    assert!(
        finding(&doc, "cri-slow", &healthy.container_id).is_none(),
        "the healthy container answers: {doc}"
    );
    let blocked = finding(&doc, "shim-blocked", &stuck.sandbox_id)
        .unwrap_or_else(|| panic!("its shim is blocked: {doc}"));
    assert_eq!(blocked["evidence"]["shim_pid"], shim);
    assert_eq!(
        blocked["evidence"]["threads"][0]["syscall"], "umount2",
        "{blocked}"
    );
    assert!(
        finding(&doc, "zombie", &stuck.container_id).is_some(),
        "{doc}"
    );

    // Freeze containerd: check still answers, from the files and procfs,
    // and says the APIs are unreachable. Its look at the node ends within
    // --timeout + 1 s (README); the zombie's second look (its status file
    // and pid read again) and a loaded machine's process start come on
    // top, allowed FROZEN_MARGIN as tests/bounded_reads.rs allows its own. A call without a deadline to a stopped containerd would
    // never answer.
    let containerd = Pid::from_raw(bed.containerd_pid());
    kill(containerd, Signal::SIGSTOP).unwrap();
    let timed = Instant::now();
    let output = bed.nodectl(&["check", "-o", "json", "--timeout", "2s"]);
    let took = timed.elapsed();
    kill(containerd, Signal::SIGCONT).unwrap();
    eprintln!(
        "check with containerd frozen took {:.2} s",
        took.as_secs_f64()
    );
    let doc = support::report(&output);
    let promised = Duration::from_secs(2) + Duration::from_secs(1);
    assert!(
        took < promised + FROZEN_MARGIN,
        "answered in {took:?}, promised {promised:?} and the margin: {doc}"
    );
    let calls = doc["api_calls"].as_array().unwrap();
    let asked: Vec<_> = calls
        .iter()
        .filter(|c| !c["call"].as_str().unwrap().ends_with(" connect"))
        .collect();
    assert!(!asked.is_empty(), "{doc}");
    for call in asked {
        assert_eq!(call["timed_out"], true, "given up at its deadline: {call}");
    }
    assert!(
        finding(&doc, "api-unreachable", "containerd").is_some(),
        "{doc}"
    );
    assert!(finding(&doc, "api-unreachable", "cri").is_some(), "{doc}");
    assert!(
        doc["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "zombie"),
        "file-based findings are still there: {doc}"
    );
    let _ = update.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_node_has_no_findings() {
    let Some(bed) = TestBed::start("healthy_node_has_no_findings").await else {
        return;
    };
    let _pod = bed
        .run_pod("healthy", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    let output = bed.nodectl(&["check", "-o", "json"]);
    let doc = support::report(&output);
    assert_eq!(output.status.code(), Some(0), "{doc}");
    assert!(doc["findings"].as_array().unwrap().is_empty());
    assert!(doc["gaps"].as_array().unwrap().is_empty());
    assert!(doc["context"]["containerd_version"].is_string(), "{doc}");
    let version = doc["containerd"]["version"].as_str().unwrap_or_default();
    assert!(version.contains(bed.containerd_version()), "{doc}");
    assert_eq!(doc["containerd"]["source"], "api", "{doc}");
}
