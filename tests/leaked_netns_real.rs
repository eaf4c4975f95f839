//! `leaked-netns` on a real containerd with real CNI (the networked test
//! bed), two ways on every line:
//! - containerd killed in a pod's CNI ADD leaves a NotReady sandbox holding
//!   the pod's network namespace (see tests/leaked_sandbox_real.rs);
//! - a pod whose ADD went through, its shim and pause killed (a node's OOM
//!   killer), leaves a NotReady sandbox holding its namespace and libcni's
//!   cache entry of the ADD.
//!
//! Both records are then removed with `ctr`, as operators remove a stuck
//! sandbox (1.x: the sandbox container, `ctr containers rm`; 2.x: the
//! sandbox store entry, `ctr sandboxes rm -f`, and the pause container's
//! record where one is left), and containerd restarted. Nothing in
//! containerd removes the mounts after that, on any line (asserted).
//! nodectl must report both namespaces, the second with its pod named from
//! libcni's cache, and not the live pod's, which its record names and its
//! processes are in; nothing within the grace. `leaked-netns --remove`
//! plans, refuses the one a process entered between its scan and its act,
//! releases the other, and releases the first once that process left.
//!
//! Beside them, the bed's neighbours (`support::Neighbours`): an
//! administrator's namespaces in CRI's netns dir (one with a veth into a
//! live process's namespace, one empty), and `cni-<uuid>` namespaces only
//! a live process's open descriptor holds, only a thread (not the main
//! one) of a live process is in, or holding a veth CRI did not put there.
//! None is ever reported or removed, and the live process keeps its
//! interfaces.

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
    let before = netns_mounts();
    let ran = bed.run_sandbox("ran").await;
    // This bed's: another test's bed (another developer's, on a shared
    // machine) may mount one meanwhile.
    let ours = bed.netns_dir().display().to_string();
    let ran_netns: Vec<String> = netns_mounts()
        .into_iter()
        .filter(|m| !before.contains(m) && m.starts_with(&ours))
        .collect();
    assert_eq!(
        ran_netns.len(),
        1,
        "one namespace for the pod: {ran_netns:?}"
    );
    let ran_netns = ran_netns[0].clone();
    // Its shim and pause killed: the sandbox exits, its teardown never runs.
    let shim = bed.shim_pid(&ran);
    for pid in support::procs::descendants(&[shim])
        .into_iter()
        .chain([shim])
    {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        bed.wait_sandbox_not_ready(&ran, std::time::Duration::from_secs(30))
            .await,
        "CRI sees the killed pod's sandbox exit"
    );
    let hung = bed.crash_containerd_in_cni_add("crashed").await;
    for id in [&hung.sandbox_id, &ran] {
        remove_records(&bed, id);
    }
    bed.restart_containerd().await;
    let netns = hung.netns.display().to_string();
    let listed = bed.listed_sandboxes().await;
    assert!(
        !listed.contains(&hung.sandbox_id) && !listed.contains(&ran),
        "CRI no longer lists the sandboxes: {listed:?}"
    );
    for mount in [&netns, &ran_netns] {
        assert!(
            netns_mounts().contains(mount),
            "{}: the namespace stays mounted: {mount}",
            bed.containerd_version()
        );
    }

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
    neighbours_untouched(&bed, &found, "check");
    let name = |path: &str| path.rsplit('/').next().unwrap_or_default().to_string();
    let mut ids: Vec<&str> = found.iter().filter_map(|f| f["id"].as_str()).collect();
    ids.sort_unstable();
    let mut expected = [name(&netns), name(&ran_netns)];
    expected.sort();
    assert_eq!(
        ids, expected,
        "the two pods' namespaces, not the live one's: {doc:#}"
    );
    for finding in &found {
        eprintln!("{TEST}: {}: {finding:#}", bed.containerd_version());
    }
    let of = |path: &str| {
        *found
            .iter()
            .find(|f| f["evidence"]["path"] == path)
            .unwrap_or_else(|| panic!("{path} reported by its path: {doc:#}"))
    };
    // The pod whose ADD went through is named from libcni's cache of its
    // network; the crashed one from the cache of CRI's loopback network
    // (`cni-loopback`, set up before the network whose ADD hung).
    let named = of(&ran_netns);
    assert_eq!(named["evidence"]["sandbox_id"], ran.as_str(), "{named:#}");
    assert_eq!(named["evidence"]["pod_name"], "ran", "{named:#}");
    assert!(named["evidence"]["pod_namespace"].is_string(), "{named:#}");
    assert!(named["summary"]
        .as_str()
        .unwrap_or_default()
        .contains("ran"));
    assert_eq!(of(&netns)["evidence"]["pod_name"], "crashed", "{doc:#}");
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
    assert_eq!(outcomes, ["would-remove", "would-remove"], "{doc:#}");
    assert!(netns_mounts().contains(&netns) && netns_mounts().contains(&ran_netns));

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
    let rows: Vec<&Value> = doc["cleanups"].as_array().into_iter().flatten().collect();
    neighbours_untouched(&bed, &rows, "leaked-netns --remove --yes");
    let row_of = |doc: &Value, path: &str| {
        doc["cleanups"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["path"] == path)
            .cloned()
            .unwrap_or_else(|| panic!("a row for {path}: {doc:#}"))
    };
    let row = row_of(&doc, &netns);
    assert_eq!(row["action"], "remove-netns", "{doc:#}");
    assert_eq!(row["outcome"], "refused", "{doc:#}");
    // The rest is cleaned: the other namespace released.
    assert_eq!(row_of(&doc, &ran_netns)["outcome"], "removed", "{doc:#}");
    assert!(
        !netns_mounts().contains(&ran_netns),
        "unmounted: {ran_netns}"
    );
    let detail = row["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains(&format!("process {}", entered.id())),
        "{detail}"
    );
    assert!(netns_mounts().contains(&netns));

    // Once it left: released, as CRI's teardown does.
    let doc = support::report(&bed.nodectl(&act));
    let rows: Vec<&Value> = doc["cleanups"].as_array().into_iter().flatten().collect();
    neighbours_untouched(&bed, &rows, "leaked-netns --remove --yes, again");
    assert_eq!(row_of(&doc, &netns)["outcome"], "removed", "{doc:#}");
    assert!(!netns_mounts().contains(&netns), "unmounted: {netns}");
    assert!(!hung.netns.exists(), "its file removed: {netns}");
}

/// The bed's neighbours (see `support::Neighbours`) are neither reported
/// (`rows`: findings or cleanup rows, each naming a path) nor touched: an
/// administrator's namespaces (`ip netns add`, not CRI's name), one with a
/// veth into a live process's namespace and one empty; and namespaces
/// named as CRI names them: one only a live process's open descriptor
/// holds, one only a thread (not the main one) of a live process is in,
/// one that nothing holds but that holds a veth CRI did not put there.
/// Their mounts stay and the live process keeps its interfaces.
fn neighbours_untouched(bed: &TestBed, rows: &[&Value], after: &str) {
    let neighbours = bed.neighbours();
    for netns in [
        &neighbours.admin_netns,
        &neighbours.admin_empty_netns,
        &neighbours.held_netns,
        &neighbours.foreign_netns,
        &neighbours.thread_netns,
    ] {
        let path = netns.display().to_string();
        let row =
            |r: &&&Value| r["path"] == path.as_str() || r["evidence"]["path"] == path.as_str();
        assert!(
            !rows.iter().any(|r| row(&r)),
            "{after}: {path} is not CRI's to report or remove: {rows:#?}"
        );
        assert!(
            netns_mounts().contains(&path),
            "{after}: {path} stays mounted"
        );
    }
    let interfaces = neighbours.live_interfaces();
    for interface in ["eth0", "vlive0", "vlive1"] {
        assert!(
            interfaces.iter().any(|i| i == interface),
            "{after}: the live process keeps {interface}: {interfaces:?}"
        );
    }
}

/// Removes the sandbox `id`'s records with `ctr`, as an operator removes a
/// stuck sandbox: 1.x keeps one, the sandbox container; 2.x the sandbox
/// store entry (`sandboxes rm -f` removes a pause container's record with
/// it).
fn remove_records(bed: &TestBed, id: &str) {
    let ctr = |args: &[&str]| {
        std::process::Command::new(bed.ctr())
            .arg("--address")
            .arg(bed.address())
            .args(["-n", "k8s.io"])
            .args(args)
            .output()
            .expect("ctr")
    };
    let removed = if bed.line().is_v2() {
        ctr(&["sandboxes", "rm", "-f", id])
    } else {
        ctr(&["containers", "rm", id])
    };
    assert!(
        removed.status.success(),
        "ctr rm {id}: {}",
        String::from_utf8_lossy(&removed.stderr)
    );
    // Measured on every line: no container record is left behind (2.x's
    // `sandboxes rm -f` removes the pause container's with the entry).
    let left = ctr(&["containers", "ls", "-q"]);
    assert!(
        !String::from_utf8_lossy(&left.stdout)
            .lines()
            .any(|l| l == id),
        "{}: a container record of {id} outlived the removal",
        bed.containerd_version()
    );
}
