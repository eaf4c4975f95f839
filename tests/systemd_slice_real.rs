//! A systemd driver's pod slice, stopped through a real systemd as kubelet
//! stops it.
//!
//! systemd runs as PID 1 of namespaces of its own (pid, mount, cgroup, uts,
//! ipc, net), with a fresh cgroup2 rooted at a cgroup the test made, `/run`
//! on tmpfs, `container=` set and a unit path holding only default.target.
//! The test runs again inside those namespaces (`nsenter`), where systemd
//! is the "host"'s PID 1, and starts its containerd bed there. Two pod
//! slices are made through systemd under the bed's cgroup root, named as
//! kubelet's systemd driver names them (`ToSystemd`/`ExpandSlice`), of pods
//! with no sandbox that kubelet's word (its pod-resources socket, a
//! stand-in's: `support::StandInKubeletPodResources`) no longer lists: one
//! empty, one with a process in it (a service in the slice).
//! `leaked-pod-cgroups --remove` plans the empty one "stopped through
//! systemd" (and refuses the others in the plan too), and with `--yes`
//! stops it through systemd: the unit inactive
//! (as `systemctl show` says) and its cgroup gone; the busy one is refused
//! and stays active; a directory named as a pod slice that systemd does not
//! own (made behind its back) is refused on systemd's word and left alone.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use support::systemd::{run_inside_systemd, show, systemd_run, wait_until, Hierarchies, SOON};
use support::TestBed;

const TEST: &str = "systemd_slice_real";
const NAME: &str = "a_leaked_pod_slice_is_stopped_through_systemd_and_a_busy_one_is_refused";
/// Set in the run inside systemd's namespaces.
const IN_SYSTEMD: &str = "NODECTL_TEST_IN_SYSTEMD";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaked_pod_slice_is_stopped_through_systemd_and_a_busy_one_is_refused() {
    if std::env::var_os(IN_SYSTEMD).is_none() {
        return run_inside_systemd(TEST, NAME, IN_SYSTEMD, Hierarchies::Unified);
    }
    let Some(bed) = TestBed::start(TEST).await else {
        return;
    };
    let cgroup_root = bed.cgroup_parent().to_string();
    let kubelet_dir = bed.scratch("kubelet");
    std::fs::create_dir_all(kubelet_dir.join("pods")).unwrap();
    let kubelet_root = kubelet_dir.display().to_string();
    let pod_logs_dir = bed.scratch("pod-logs-of-kubelet");
    let pod_logs = pod_logs_dir.display().to_string();
    // kubelet's word: no pod active. A stand-in: a real kubelet with no pod
    // would stop both pod slices itself at its next housekeeping (2 s),
    // killing the busy one's process first, leaving nothing to stop or refuse.
    let _kubelet = support::StandInKubeletPodResources::start(TEST, &kubelet_dir, &[]);

    // The slices, made through systemd where kubelet's systemd driver puts
    // them under the bed's cgroup root (every `-` of a part escaped to `_`).
    let prefix = support::systemd_prefix(&cgroup_root);
    let slice = |uid: &str| support::systemd_besteffort_slice(&cgroup_root, uid);
    let (leaked_uid, busy_uid) = (
        "5d5d5d5d-0000-4000-8000-00000000000a",
        "5d5d5d5d-0000-4000-8000-00000000000b",
    );
    let (leaked, busy) = (slice(leaked_uid), slice(busy_uid));
    // A service that ends at once leaves its slice active and empty, as a
    // pod's slice is once its containers are gone; one that sleeps keeps a
    // process in the other.
    systemd_run(&leaked, "nodectl-test-done", &["true"]);
    systemd_run(&busy, "nodectl-test-busy", &["sleep", "300"]);
    let hierarchy = Path::new("/sys/fs/cgroup");
    let dir_of = |unit: &str| -> PathBuf {
        hierarchy
            .join(format!("{prefix}.slice"))
            .join(format!("{prefix}-kubepods.slice"))
            .join(format!("{prefix}-kubepods-besteffort.slice"))
            .join(unit)
    };
    let (leaked_dir, busy_dir) = (dir_of(&leaked), dir_of(&busy));
    // A directory named as a pod slice that systemd does not own (made
    // behind its back): not systemd's to stop.
    let unowned_uid = "5d5d5d5d-0000-4000-8000-00000000000c";
    let unowned_dir = dir_of(&slice(unowned_uid));
    wait_until("the ended service is gone from its slice", SOON, || {
        std::fs::read_to_string(leaked_dir.join("cgroup.events"))
            .is_ok_and(|events| events.contains("populated 0"))
    });
    assert_eq!(show(&leaked, "ActiveState"), "active");
    assert_eq!(show(&busy, "ActiveState"), "active");
    std::fs::create_dir(&unowned_dir).unwrap();
    // nodectl ages a pod cgroup by its directory's mtime, and a cgroup
    // directory no one has open gets the time its inode is (re)made in the
    // kernel's cache, not its mkdir's (measured: a stat 0.7 s after the
    // mkdir says 0.7 s): held open, its age starts now, and before nodectl
    // looks (otherwise nodectl's own look makes it younger than the
    // snapshot, and the plan missed it in 2 runs of 4).
    let _held = std::fs::File::open(&unowned_dir).unwrap();
    std::thread::sleep(Duration::from_millis(100));

    let remove = |yes: bool| {
        let mut args = vec![
            "leaked-pod-cgroups",
            "--kubelet-root",
            &kubelet_root,
            "--kubelet-pod-logs",
            &pod_logs,
            "--kubelet-cgroup-root",
            &cgroup_root,
            "--grace",
            "0s",
            "--remove",
            "-o",
            "json",
            // systemd is asked over D-Bus within --timeout (3 s by
            // default); on a loaded 2-core CI machine its answer once took
            // longer and the plan said "no answer before the deadline".
            // This test is about what is stopped, not how fast.
            "--timeout",
            "30s",
        ];
        if yes {
            args.push("--yes");
        }
        let doc = support::report(&bed.nodectl(&args));
        support::assert_matches_schema(&doc);
        doc
    };
    let row = |doc: &Value, dir: &Path| -> Value {
        let shown = dir.display().to_string();
        doc["cleanups"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["path"] == shown.as_str())
            .cloned()
            .unwrap_or_else(|| panic!("no cleanup of {shown}: {doc:#}"))
    };

    // The plan: the empty slice would be stopped through systemd; the busy
    // one is refused. Nothing is touched.
    let plan = remove(false);
    eprintln!(
        "{TEST}: {}: plan: {:#}",
        bed.containerd_version(),
        plan["cleanups"]
    );
    let planned = row(&plan, &leaked_dir);
    assert_eq!(planned["outcome"], "would-remove", "{plan:#}");
    let detail = planned["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("stopped through systemd"), "{detail}");
    assert_eq!(row(&plan, &busy_dir)["outcome"], "refused", "{plan:#}");
    let unowned = row(&plan, &unowned_dir);
    assert_eq!(unowned["outcome"], "refused", "systemd's word: {plan:#}");
    let detail = unowned["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("systemd has no unit"), "{detail}");
    assert_eq!(
        show(&leaked, "ActiveState"),
        "active",
        "a plan stops nothing"
    );

    let done = remove(true);
    eprintln!(
        "{TEST}: {}: done: {:#}",
        bed.containerd_version(),
        done["cleanups"]
    );
    let stopped = row(&done, &leaked_dir);
    assert_eq!(stopped["action"], "remove-cgroup");
    assert_eq!(stopped["outcome"], "removed", "{done:#}");
    let detail = stopped["detail"].as_str().unwrap_or_default();
    assert!(detail.contains(&format!("StopUnit {leaked}")), "{detail}");
    // systemd's own word: the unit stopped, its cgroup removed by it.
    assert_eq!(show(&leaked, "ActiveState"), "inactive");
    assert!(
        !leaked_dir.exists(),
        "systemd removed {}",
        leaked_dir.display()
    );
    // The busy one: refused, still active with its process.
    let refused = row(&done, &busy_dir);
    assert_eq!(refused["outcome"], "refused", "{done:#}");
    let detail = refused["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("populated 1"), "{detail}");
    assert_eq!(show(&busy, "ActiveState"), "active");
    assert!(busy_dir.is_dir(), "kept: {}", busy_dir.display());
    // The directory systemd does not own: refused on systemd's word, with
    // the systemctl line, and left alone.
    let refused = row(&done, &unowned_dir);
    assert_eq!(refused["outcome"], "refused", "{done:#}");
    let detail = refused["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("systemd has no unit"), "{detail}");
    assert!(detail.contains("`systemctl stop "), "{detail}");
    assert!(unowned_dir.is_dir(), "kept: {}", unowned_dir.display());
    // The slices go with systemd when the test ends.
}
