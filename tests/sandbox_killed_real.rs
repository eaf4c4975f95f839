//! A pod's shim outlives the pod on every 2.x line when the pod's sandbox
//! process dies first (issue 28, item 3; upstream's containerd#10421).
//!
//! Why, from the source of 2.0.0 to 2.3.4: CRI creates a pod's containers
//! `WithSandbox`, so their tasks run in the sandbox's shim and their deletes
//! are "sandboxed": shimTask.delete sends no Shutdown for them. Only the
//! sandbox's task delete sends one, and the runc shim ignores a Shutdown
//! while it still holds any container (`len(s.containers) > 0`). So when the
//! sandbox's process dies while a container of the pod runs (the OOM killer
//! or `kill -9` taking the pause process), its exit is handled at once
//! (`waitSandboxExit`: delete, Shutdown ignored, connection closed: containerd
//! logs "shim disconnected … cleaning up after shim disconnected" while the
//! shim lives on); the container's delete, when the pod is stopped, sends
//! nothing, and the shim runs on with nothing to serve. When every process
//! of the pod dies at once, both exits are handled together and the outcome
//! is a race between the sandbox's Shutdown and the container's delete in
//! the shim. 1.6 and 1.7 create no sandboxed containers (1.7's default CRI
//! sets no sandbox): every delete sends Shutdown, the last one ends the shim.
//!
//! Pods here have a pid namespace per container, as kubelet asks by default
//! (with CRI's default, one for the pod, the kernel kills the container when
//! the sandbox's process, its init, dies: the race of the second recipe).

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_cri::v1::ContainerState;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use support::{procs, LeakedShim, Line, Pids, Pod, TestBed};

/// Pods whose sandbox process alone is killed: the outcome is the same for
/// each (all leak on 2.x, none on 1.x), so two show it.
const SANDBOX_KILLED_PODS: usize = 2;
/// Pods of one round of the race (every process killed at once).
const RACE_PODS: usize = 3;
/// Rounds of the race on 2.x until a shim outlives its pod. Measured with
/// these pods: 1 to 3 of 3 a round (23 of 27 pods in nine rounds on 2.0.6,
/// 2.0.11 and 2.3.4); even at the lowest rate seen, one in three, six rounds
/// leak none about once in 1,500 runs.
const RACE_ROUNDS: usize = 6;
/// How long a killed process's exit may take to reach CRI.
const EXIT_HANDLED: Duration = Duration::from_secs(30);
/// A shim whose pod is removed ends within milliseconds of its last
/// Shutdown; one still running this long after is left for good.
const SETTLE: Duration = Duration::from_secs(3);

/// Whether this line creates a pod's containers in the sandbox's shim with
/// sandboxed deletes (the 2.x lines).
fn sandboxed_containers(bed: &TestBed) -> bool {
    match bed.line() {
        Line::V1_6 | Line::V1_7 => false,
        Line::V2_0 | Line::V2_3 => true,
    }
}

/// A pod of the recipe: sandbox and one container, each in its own pid
/// namespace, with the pod's shim.
struct Victim {
    pod: Pod,
    shim: i32,
}

async fn victims(bed: &TestBed, name: &str, count: usize) -> Vec<Victim> {
    let mut made = Vec::new();
    for n in 0..count {
        let pod = bed
            .run_pod_with(
                &format!("{name}-{n}"),
                "app",
                &["/bin/sh", "-c", "sleep 3600"],
                Pids::OwnPerContainer,
            )
            .await;
        let shim = bed.shim_pid(&pod.sandbox_id);
        made.push(Victim { pod, shim });
    }
    made
}

/// The sandbox's task pid, from the `init.pid` the runc shim writes in the
/// task's bundle (every line).
fn sandbox_pid(bed: &TestBed, sandbox_id: &str) -> i32 {
    let path: PathBuf = bed
        .state()
        .join("io.containerd.runtime.v2.task")
        .join(support::NAMESPACE)
        .join(sandbox_id)
        .join("init.pid");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("{}: {text:?}: {e}", path.display()))
}

/// Stops and removes every victim's pod, then waits up to [`SETTLE`] for
/// their shims to end; returns the victims whose shim still runs.
async fn remove_and_settle<'a>(bed: &TestBed, victims: &'a [Victim]) -> Vec<&'a Victim> {
    for victim in victims {
        assert!(
            bed.stop_and_remove_pod(&victim.pod.sandbox_id, Duration::from_secs(60))
                .await,
            "the pod {} is removed from CRI",
            victim.pod.sandbox_id
        );
    }
    support::wait_until(SETTLE, || {
        victims.iter().all(|v| !procs::is_running(v.shim))
    });
    victims
        .iter()
        .filter(|v| procs::is_running(v.shim))
        .collect()
}

/// When containerd logged "shim disconnected" for the sandbox, seconds after
/// `since` (its log's RFC 3339 times against the wall clock), if it did.
fn disconnected_after(
    bed: &TestBed,
    sandbox_id: &str,
    since: chrono::DateTime<chrono::Utc>,
) -> String {
    let log = std::fs::read_to_string(bed.log_path()).unwrap_or_default();
    let line = log.lines().find(|l| {
        l.contains("msg=\"shim disconnected\"") && l.contains(&format!("id={sandbox_id}"))
    });
    let at = line
        .and_then(|l| l.split("time=\"").nth(1)?.split('"').next())
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    match at {
        Some(at) => format!(
            "\"shim disconnected\" {:.3} s after the kill",
            (at.with_timezone(&chrono::Utc) - since).num_milliseconds() as f64 / 1e3
        ),
        None => "no \"shim disconnected\" logged".to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_shim_outlives_it_when_its_sandbox_process_dies_first_on_2_x() {
    let test = "a_pods_shim_outlives_it_when_its_sandbox_process_dies_first_on_2_x";
    let Some(bed) = TestBed::start(test).await else {
        return;
    };
    let started = Instant::now();
    let version = bed.containerd_version().to_string();
    let healthy = bed
        .run_pod_with(
            "healthy",
            "app",
            &["/bin/sh", "-c", "sleep 3600"],
            Pids::OwnPerContainer,
        )
        .await;
    let mut leaked: Vec<LeakedShim> = Vec::new();

    // 1. The sandbox's process alone is killed, as the OOM killer would take
    //    the pause process; the container runs on. Then kubelet's teardown.
    let pods = victims(&bed, "sandbox-killed", SANDBOX_KILLED_PODS).await;
    let killed_at = chrono::Utc::now();
    for victim in &pods {
        let pid = sandbox_pid(&bed, &victim.pod.sandbox_id);
        kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    }
    for victim in &pods {
        assert!(
            bed.wait_sandbox_not_ready(&victim.pod.sandbox_id, EXIT_HANDLED)
                .await,
            "CRI saw the sandbox's process die"
        );
        assert_eq!(
            bed.container_state(&victim.pod.container_id).await,
            ContainerState::ContainerRunning,
            "the container outlives its sandbox's process (its own pid namespace)"
        );
    }
    let disconnected: Vec<String> = pods
        .iter()
        .map(|v| disconnected_after(&bed, &v.pod.sandbox_id, killed_at))
        .collect();
    let outlived = remove_and_settle(&bed, &pods).await;
    for (victim, said) in pods.iter().zip(&disconnected) {
        eprintln!(
            "{version}: sandbox process killed: pod {} shim {}: {said}; {}",
            &victim.pod.sandbox_id[..13],
            victim.shim,
            if procs::is_running(victim.shim) {
                "the shim outlived its pod"
            } else {
                "the shim ended with its pod"
            }
        );
    }
    if sandboxed_containers(&bed) {
        assert_eq!(
            outlived.len(),
            pods.len(),
            "{version}: every pod's shim outlives it: the sandbox's Shutdown came while \
             the container ran, and the container's delete sends none"
        );
        leaked.extend(outlived.iter().map(|v| LeakedShim {
            sandbox_id: v.pod.sandbox_id.clone(),
            pid: v.shim,
        }));
    } else {
        assert!(
            outlived.is_empty(),
            "{version}: the container's delete sends Shutdown and ends the shim"
        );
    }

    // 2. Every process of every pod killed at once, as `kill -9` of a
    //    cgroup or the OOM killer might: the two exits race in the shim.
    let rounds = if sandboxed_containers(&bed) {
        RACE_ROUNDS
    } else {
        1
    };
    let mut race_leaks = 0;
    for round in 1..=rounds {
        let pods = victims(&bed, &format!("race-{round}"), RACE_PODS).await;
        let shims: Vec<i32> = pods.iter().map(|v| v.shim).collect();
        for pid in procs::descendants(&shims) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        for victim in &pods {
            assert!(
                bed.wait_sandbox_not_ready(&victim.pod.sandbox_id, EXIT_HANDLED)
                    .await,
                "CRI saw the sandbox's process die"
            );
            assert!(
                bed.wait_container_state(
                    &victim.pod.container_id,
                    ContainerState::ContainerExited,
                    EXIT_HANDLED
                )
                .await,
                "CRI saw the container's process die"
            );
        }
        let outlived = remove_and_settle(&bed, &pods).await;
        eprintln!(
            "{version}: every process killed, round {round}: {} of {} shims outlived their pods",
            outlived.len(),
            pods.len()
        );
        race_leaks += outlived.len();
        leaked.extend(outlived.iter().map(|v| LeakedShim {
            sandbox_id: v.pod.sandbox_id.clone(),
            pid: v.shim,
        }));
        if race_leaks > 0 {
            break;
        }
    }
    if sandboxed_containers(&bed) {
        assert!(
            race_leaks > 0,
            "{version}: in {rounds} rounds of {RACE_PODS} pods, no shim outlived its pod \
             (measured: 1 to 3 of 3 a round)"
        );
    } else {
        assert_eq!(
            race_leaks, 0,
            "{version}: the last delete's Shutdown ends the shim"
        );
    }

    if leaked.is_empty() {
        let output = bed.nodectl(&["leaked-shims", "-o", "json"]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "nothing leaked: {}",
            support::report(&output)
        );
    } else {
        bed.leaked_shims_found_and_ended(&leaked, &["containerd#10421"], &healthy)
            .await;
    }
    eprintln!(
        "{version}: {} shims left in all, {:.1} s",
        leaked.len(),
        started.elapsed().as_secs_f64()
    );
}
