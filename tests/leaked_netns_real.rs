//! `leaked-netns` on a real containerd with real CNI (the networked test
//! bed): containerd killed in a pod's CNI ADD leaves a NotReady sandbox
//! holding the pod's network namespace (see tests/leaked_sandbox_real.rs);
//! its record is then removed with `ctr`, as operators remove a stuck
//! sandbox (1.x: the sandbox container, `ctr containers rm`; 2.x: the
//! sandbox store entry, `ctr sandboxes rm -f`, the only record the crash
//! left there), and containerd restarted. Nothing in containerd removes
//! the mount after that, on any line (asserted). nodectl must report that
//! namespace, and not the live pod's, which its record names and its
//! processes are in; nothing within the grace. `leaked-netns --remove`
//! plans, refuses while a process entered the namespace between its scan
//! and its act, and releases it once that process left.

mod support;

use serde_json::Value;
use support::TestBed;

const TEST: &str = "leaked_netns_real";

fn leaked(doc: &Value) -> Vec<&Value> {
    doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["kind"] == "leaked-netns")
        .collect()
}

fn netns_mounts() -> Vec<String> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    table
        .lines()
        .filter(|line| line.contains(" - nsfs "))
        .filter_map(|line| line.split(' ').nth(4).map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_whose_record_was_removed_is_found_and_the_live_one_is_not() {
    let Some(mut bed) = TestBed::start_networked(TEST).await else {
        return;
    };
    let _live = bed.run_sandbox("live").await;
    let hung = bed.crash_containerd_in_cni_add("crashed").await;
    let (what, args): (&str, Vec<&str>) = if bed.line().is_v2() {
        ("sandboxes", vec!["sandboxes", "rm", "-f", &hung.sandbox_id])
    } else {
        ("containers", vec!["containers", "rm", &hung.sandbox_id])
    };
    let removed = std::process::Command::new(bed.ctr())
        .arg("--address")
        .arg(bed.address())
        .args(["-n", "k8s.io"])
        .args(&args)
        .output()
        .expect("ctr");
    assert!(
        removed.status.success(),
        "ctr {what} rm: {}",
        String::from_utf8_lossy(&removed.stderr)
    );
    bed.restart_containerd().await;
    let netns = hung.netns.display().to_string();
    assert!(
        !bed.listed_sandboxes().await.contains(&hung.sandbox_id),
        "CRI no longer lists the sandbox"
    );
    assert!(
        netns_mounts().contains(&netns),
        "{}: the namespace stays mounted: {netns}",
        bed.containerd_version()
    );

    let check = |grace: &str| {
        bed.nodectl(&[
            "check",
            "--settle",
            "0s",
            "--sandbox-grace",
            grace,
            "--ip-grace",
            grace,
            "-o",
            "json",
        ])
    };
    let doc = support::report(&check("10m"));
    assert!(leaked(&doc).is_empty(), "within the grace: {doc:#}");

    let output = check("0s");
    let doc = support::report(&output);
    support::assert_matches_schema(&doc);
    let found = leaked(&doc);
    assert_eq!(found.len(), 1, "only the crashed pod's namespace: {doc:#}");
    let finding = found[0];
    eprintln!("{TEST}: {}: {finding:#}", bed.containerd_version());
    assert_eq!(finding["evidence"]["path"], netns);
    let name = hung
        .netns
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eq!(finding["id"], name);
    // Its address is leaked too, the sandbox unknown to every record.
    assert!(
        doc["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|f| f["kind"] == "leaked-ip" && f["id"] == hung.sandbox_id.as_str()),
        "{doc:#}"
    );
    assert!(
        netns_mounts().contains(&netns),
        "a report, never an unmount"
    );

    // The plan touches nothing.
    let plan = ["leaked-netns", "--grace", "0s", "--remove", "-o", "json"];
    let doc = support::report(&bed.nodectl(&plan));
    support::assert_matches_schema(&doc);
    let outcomes: Vec<&Value> = doc["cleanups"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| &c["outcome"])
        .collect();
    assert_eq!(outcomes, ["would-remove"], "{doc:#}");
    assert!(netns_mounts().contains(&netns));

    // A process enters it between the scan and the act: refused, naming it.
    let act = [
        "leaked-netns",
        "--grace",
        "0s",
        "--remove",
        "--yes",
        "-o",
        "json",
    ];
    let paths = [bed.root(), bed.state(), bed.address(), bed.config_path()];
    let pause = bed.scratch("pause");
    let child = support::spawn_paused_before_act(&act, paths, &pause);
    let mut entered = std::process::Command::new("nsenter")
        .arg(format!("--net={netns}"))
        .args(["sleep", "60"])
        .spawn()
        .expect("nsenter");
    // nsenter has joined once it runs sleep.
    assert!(support::wait_until(
        std::time::Duration::from_secs(10),
        || {
            std::fs::read_to_string(format!("/proc/{}/comm", entered.id()))
                .is_ok_and(|comm| comm.trim() == "sleep")
        }
    ));
    std::fs::remove_file(&pause).unwrap();
    let output = child.wait_with_output().unwrap();
    let _ = entered.kill();
    let _ = entered.wait();
    let doc = support::report(&output);
    eprintln!(
        "{TEST}: {}: while entered: {:#}",
        bed.containerd_version(),
        doc["cleanups"]
    );
    let row = &doc["cleanups"][0];
    assert_eq!(row["action"], "remove-netns", "{doc:#}");
    assert_eq!(row["outcome"], "refused", "{doc:#}");
    let detail = row["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains(&format!("process {}", entered.id())),
        "{detail}"
    );
    assert!(netns_mounts().contains(&netns));

    // Once it left: released, as CRI's teardown does.
    let doc = support::report(&bed.nodectl(&act));
    assert_eq!(doc["cleanups"][0]["outcome"], "removed", "{doc:#}");
    assert!(!netns_mounts().contains(&netns), "unmounted: {netns}");
    assert!(!hung.netns.exists(), "its file removed: {netns}");
}
