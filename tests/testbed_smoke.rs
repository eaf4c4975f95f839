//! The test bed itself: a pod runs on the isolated containerd and teardown
//! leaves nothing behind; and the failure nodectl exists for reproduces
//! here — a container exits while its shim's umount2 is held, CRI's exit
//! handling times out and keeps saying RUNNING (a zombie), and once the
//! unmount is let go the exit is recorded late.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_cri::v1::ContainerState;
use serde_json::Value;
use support::{is_running, procs, Line, TestBed};

/// CRI's status file of a container, parsed.
fn status_file(bed: &TestBed, container_id: &str) -> Value {
    let path = bed.status_file(container_id);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn ns_to_time(ns: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(u64::try_from(ns).expect("a time after 1970"))
}

/// Processes alive (not Z) that name `address` as their `-address`.
fn alive_with_address(address: &Path) -> Vec<(i32, Vec<String>)> {
    procs::with_flag("-address", &address.display().to_string())
        .into_iter()
        .filter(|(pid, _)| is_running(*pid))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_pod_runs_and_teardown_leaves_nothing() {
    let Some(bed) = TestBed::start("healthy_pod_runs_and_teardown_leaves_nothing").await else {
        return;
    };
    let pod = bed
        .run_pod("healthy", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    assert!(
        bed.wait_container_state(
            &pod.container_id,
            ContainerState::ContainerRunning,
            Duration::from_secs(30)
        )
        .await,
        "CRI reports the container RUNNING"
    );
    let shim = bed.shim_pid(&pod.sandbox_id);
    let shim_stat = procs::stat(shim).unwrap();
    // The shim daemonizes away from containerd; the test process, a child
    // subreaper, inherits it.
    assert_eq!(
        shim_stat.ppid,
        std::process::id() as i32,
        "the shim is reparented to us"
    );
    let pid = status_file(&bed, &pod.container_id)["Pid"]
        .as_i64()
        .unwrap() as i32;
    let pid_stat = procs::stat(pid).unwrap();
    assert!(is_running(pid), "the container's process {pid} runs");
    assert!(
        procs::descendants(&[shim]).contains(&pid),
        "the container's process descends from its pod's shim"
    );

    // Isolation: the pod's cgroup, runc's state and the rootfs mount are
    // all the test bed's own.
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    assert!(cgroups.contains(bed.cgroup_parent()), "{cgroups}");
    assert!(
        bed.dir()
            .join("runc/k8s.io")
            .join(&pod.container_id)
            .is_dir(),
        "runc keeps its state in the temp dir"
    );
    let rootfs = bed
        .state()
        .join("io.containerd.runtime.v2.task/k8s.io")
        .join(&pod.container_id)
        .join("rootfs");
    assert!(
        support::mounts_below(bed.dir()).contains(&rootfs),
        "{} is mounted",
        rootfs.display()
    );
    // The bundle records the shim's socket: 1.x in `address`, 2.x in
    // `bootstrap.json` (and no `address`).
    let bundle = rootfs.parent().unwrap();
    let (written, absent) = match bed.line() {
        Line::V1_6 | Line::V1_7 => ("address", "bootstrap.json"),
        Line::V2_0 | Line::V2_3 => ("bootstrap.json", "address"),
    };
    assert!(
        bundle.join(written).is_file(),
        "{:?} writes {written}",
        bed.line()
    );
    assert!(
        !bundle.join(absent).exists(),
        "{:?} writes no {absent}",
        bed.line()
    );
    // Outside the temp dir, containerd only puts the shim's socket.
    let socket = support::shim_address(bundle).unwrap();
    let socket = PathBuf::from(socket.trim_start_matches("unix://"));
    assert!(socket.exists(), "{}", socket.display());

    let address = bed.address().to_path_buf();
    let dir = bed.dir().to_path_buf();
    let cgroup = bed.cgroup_parent().to_string();
    let dropped = Instant::now();
    drop(bed);
    eprintln!("teardown took {:.1} s", dropped.elapsed().as_secs_f64());

    assert_eq!(
        alive_with_address(&address),
        vec![],
        "no shim of ours is alive"
    );
    assert!(
        !procs::is_running_since(shim, shim_stat.starttime),
        "the shim is gone"
    );
    assert!(
        !procs::is_running_since(pid, pid_stat.starttime),
        "the container's process is gone"
    );
    let leftover = |pid: i32, since: u64| procs::stat(pid).filter(|s| s.starttime == since);
    assert_eq!(
        leftover(shim, shim_stat.starttime),
        None,
        "the shim was reaped"
    );
    assert_eq!(
        leftover(pid, pid_stat.starttime),
        None,
        "the container's process was reaped"
    );
    assert!(!dir.exists(), "{} is removed", dir.display());
    assert_eq!(
        support::mounts_below(&dir),
        Vec::<PathBuf>::new(),
        "no mounts are left"
    );
    assert!(
        !socket.exists(),
        "the shim's socket {} is removed",
        socket.display()
    );
    let memory = Path::new("/sys/fs/cgroup/memory").join(cgroup.trim_start_matches('/'));
    let unified = Path::new("/sys/fs/cgroup").join(cgroup.trim_start_matches('/'));
    assert!(
        !memory.exists() && !unified.exists(),
        "the pods' cgroup is removed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zombie_reproduces_then_exit_is_recorded_late() {
    let Some(bed) = TestBed::start("zombie_reproduces_then_exit_is_recorded_late").await else {
        return;
    };
    let pod = bed
        .run_pod("stuck", "init", &["/bin/sh", "-c", "sleep 4"])
        .await;
    let started = Instant::now();
    let id = &pod.container_id;
    let shim = bed.shim_pid(&pod.sandbox_id);
    let mut strace = bed.delay_umount2(shim, Duration::from_secs(40));
    let attached = started.elapsed();
    let pid = status_file(&bed, id)["Pid"].as_i64().unwrap() as i32;
    let since = procs::stat(pid)
        .expect("the container's process runs")
        .starttime;

    // The container's process ends by itself after ~4 s; the shim reaps it.
    let deadline = started + Duration::from_secs(15);
    while procs::is_running_since(pid, since) {
        assert!(
            Instant::now() < deadline,
            "the container's process {pid} never ended"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let exited = started.elapsed();

    // CRI's exit handler calls task.Delete with a 10 s timeout; the shim
    // sits in the held umount2 of the rootfs, so the handler gives up and
    // the container stays RUNNING in CRI with no process behind it.
    tokio::time::sleep((exited + Duration::from_secs(11)).saturating_sub(started.elapsed())).await;
    let state = bed.container_state(id).await;
    let zombie_at = started.elapsed();
    assert_eq!(
        state,
        ContainerState::ContainerRunning,
        "CRI still says RUNNING"
    );
    assert!(
        !procs::is_running_since(pid, since),
        "while the container's process {pid} is gone or defunct"
    );
    let log = std::fs::read_to_string(bed.log_path()).unwrap_or_default();
    let handler = log.lines().find(|l| {
        l.contains("failed to handle container TaskExit event")
            && l.contains(id.as_str())
            && l.contains("deadline exceeded")
    });
    assert!(
        handler.is_some(),
        "containerd logged its exit handler timing out in task.Delete"
    );

    // Let the held unmount take as long as a slow disk would (the first
    // umount2 would end by itself 40 s after the exit), then let it go. Let
    // go right away instead, CRI's next retry records the exit within a
    // second, some 11 s after it happened: too early to tell from a
    // normal exit. (Kept held instead, the shim's UnmountAll needs a
    // second, also delayed, umount2 to see the rootfs unmounted: > 80 s.)
    tokio::time::sleep((exited + Duration::from_secs(40)).saturating_sub(started.elapsed())).await;
    strace.detach();
    let detached = started.elapsed();
    assert!(
        bed.wait_container_state(
            id,
            ContainerState::ContainerExited,
            Duration::from_secs(180)
        )
        .await,
        "CRI records the exit once the shim's delete completes"
    );
    let recorded = started.elapsed();

    let status = status_file(&bed, id);
    let finished = ns_to_time(status["FinishedAt"].as_i64().unwrap());
    let run = finished
        .duration_since(ns_to_time(status["StartedAt"].as_i64().unwrap()))
        .unwrap();
    let written = std::fs::metadata(bed.status_file(id))
        .unwrap()
        .modified()
        .unwrap();
    let lag = written.duration_since(finished).unwrap_or_default();
    eprintln!(
        "strace attached at +{:.1} s; process ended at +{:.1} s; zombie detected at +{:.1} s; \
         strace detached at +{:.1} s; exit recorded at +{:.1} s; \
         FinishedAt - StartedAt {:.1} s; lag (status mtime - FinishedAt) {:.1} s",
        attached.as_secs_f64(),
        exited.as_secs_f64(),
        zombie_at.as_secs_f64(),
        detached.as_secs_f64(),
        recorded.as_secs_f64(),
        run.as_secs_f64(),
        lag.as_secs_f64()
    );
    assert_eq!(status["ExitCode"], 0, "{status}");
    assert!(
        run > Duration::from_secs(3) && run < Duration::from_secs(10),
        "FinishedAt is the real exit (~4 s after start), not the late one: {status}"
    );
    assert!(
        lag > Duration::from_secs(30),
        "the exit is recorded late: lag {lag:?}, {status}"
    );
}
