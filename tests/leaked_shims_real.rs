//! `nodectl leaked-shims` and `leaked-mounts` against a real containerd
//! reproducing containerd#7496: the shim's umount2 is held up while a pod is
//! stopped and removed; containerd gives up on the shim, forgets the sandbox,
//! and the shim lives on with nothing behind it.

mod support;

use std::time::{Duration, Instant};

use k8s_cri::v1::ContainerState;
use serde_json::Value;
use support::TestBed;

fn ids_of_kind(doc: &Value, kind: &str) -> Vec<String> {
    doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["kind"] == kind)
        .map(|f| f["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaked_shim_is_found_and_killed_healthy_pod_untouched() {
    let Some(bed) = TestBed::start("leaked_shim_is_found_and_killed_healthy_pod_untouched").await
    else {
        return;
    };
    let healthy = bed
        .run_pod("healthy", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    let victim = bed
        .run_pod("victim", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    let healthy_shim = bed.shim_pid(&healthy.sandbox_id);
    let shim = bed.shim_pid(&victim.sandbox_id);

    let started = Instant::now();
    let _strace = bed.delay_umount2(shim, Duration::from_secs(25));
    assert!(
        bed.stop_and_remove_pod(&victim.sandbox_id, Duration::from_secs(420))
            .await,
        "the sandbox is eventually removed from CRI"
    );
    eprintln!(
        "sandbox removed after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        support::is_running(shim),
        "precondition: the shim outlived its sandbox (containerd#7496)"
    );

    let timed = Instant::now();
    let output = bed.nodectl(&["leaked-shims", "-o", "json"]);
    eprintln!(
        "leaked-shims took {:.0} ms",
        timed.elapsed().as_secs_f64() * 1e3
    );
    let doc = support::report(&output);
    assert_eq!(output.status.code(), Some(1), "{doc}");
    assert_eq!(
        ids_of_kind(&doc, "leaked-shim"),
        vec![victim.sandbox_id.clone()]
    );
    let evidence = &doc["findings"][0]["evidence"];
    assert_eq!(evidence["shim_pid"], shim);
    assert_eq!(evidence["basis"], "containerd-api");
    assert_eq!(
        doc["actions"][0]["outcome"], "would-kill",
        "a dry run touches nothing"
    );
    assert!(support::is_running(shim), "the dry run left the shim alone");

    // The evidence travels: checked from a bundle elsewhere, same findings.
    let (live, offline) = support::live_and_offline_check(&bed);
    assert!(
        support::finding_keys(&live)
            .contains(&("leaked-shim".to_string(), victim.sandbox_id.clone())),
        "{live}"
    );
    assert_eq!(
        support::finding_keys(&offline),
        support::finding_keys(&live),
        "{offline}"
    );

    // What a person sees (printed for the README's session).
    let table = bed.nodectl(&["leaked-shims"]);
    eprintln!(
        "$ nodectl leaked-shims\n{}",
        String::from_utf8_lossy(&table.stdout)
    );

    let output = bed.nodectl(&["leaked-shims", "--kill", "--yes", "-o", "json"]);
    let doc = support::report(&output);
    eprintln!(
        "$ nodectl leaked-shims --kill --yes -o json  (actions)\n{:#}",
        doc["actions"]
    );
    let outcome = doc["actions"][0]["outcome"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(outcome == "terminated" || outcome == "killed", "{doc}");
    assert_eq!(doc["actions"][0]["shim_pid"], shim);
    assert!(
        !support::is_running(shim),
        "the leaked shim is gone (or only defunct)"
    );

    assert!(
        support::is_running(healthy_shim),
        "the healthy pod's shim still runs"
    );
    assert_eq!(
        bed.container_state(&healthy.container_id).await,
        ContainerState::ContainerRunning
    );
    let output = bed.nodectl(&["leaked-shims", "-o", "json"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        support::report(&output)
    );

    // What the shim left: a bundle directory nobody owns is orphan-bundle.
    let bundle = bed
        .state()
        .join("io.containerd.runtime.v2.task/k8s.io")
        .join(&victim.sandbox_id);
    let doc = support::report(&bed.nodectl(&["leaked-mounts", "-o", "json"]));
    let orphans = ids_of_kind(&doc, "orphan-bundle");
    eprintln!("bundle left behind after the kill: {}", bundle.exists());
    assert_eq!(
        orphans.contains(&victim.sandbox_id),
        bundle.exists(),
        "{doc}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mount_left_for_an_unknown_task_is_flagged_live_ones_are_not() {
    let Some(bed) =
        TestBed::start("mount_left_for_an_unknown_task_is_flagged_live_ones_are_not").await
    else {
        return;
    };
    let healthy = bed
        .run_pod("healthy", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    let unknown = "f".repeat(64);
    let rootfs = bed
        .state()
        .join("io.containerd.runtime.v2.task/k8s.io")
        .join(&unknown)
        .join("rootfs");
    std::fs::create_dir_all(&rootfs).unwrap();
    support::mount_tmpfs(&rootfs);

    let output = bed.nodectl(&["leaked-mounts", "-o", "json"]);
    let doc = support::report(&output);
    assert_eq!(output.status.code(), Some(1), "{doc}");
    assert_eq!(
        ids_of_kind(&doc, "leaked-mount"),
        vec![unknown.clone()],
        "{doc}"
    );
    assert_eq!(
        ids_of_kind(&doc, "orphan-bundle"),
        vec![unknown.clone()],
        "{doc}"
    );
    for live in [&healthy.container_id, &healthy.sandbox_id] {
        assert!(
            !doc.to_string().contains(live.as_str()),
            "live pod {live} is not flagged: {doc}"
        );
    }
}
