//! The test bed itself: a pod runs on the isolated containerd and teardown
//! leaves nothing behind. That the failure nodectl exists for reproduces
//! here (a container exits while its shim's umount2 is held, CRI's exit
//! handling times out and keeps saying RUNNING, and once the unmount is let
//! go the exit is recorded late) is asserted from the bed's own ground
//! truth in `tests/zombies_real.rs`, on the bed nodectl is judged on.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_cri::v1::ContainerState;
use support::{is_running, procs, Line, TestBed};

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
    let pid = bed.status(&pod.container_id)["Pid"].as_i64().unwrap() as i32;
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
