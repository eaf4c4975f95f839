//! Seed 000 (an init container stuck in Running) with a real kubelet
//! driving the pod, each release scripts/peers builds on two of the four
//! lines (`support::kubelet_release_on`): a static pod's init
//! container exits while its shim sits in the seed's held umount2, CRI's
//! exit handler gives up in task.Delete and keeps it RUNNING, and kubelet,
//! which learns of containers only through CRI, waits: its app container
//! never starts. nodectl's zombie (with its cause) is shown beside what
//! crictl and kubelet's own log say, and the time of each; once the unmount
//! is let go, CRI records the exit late, kubelet sees it die (its PLEG
//! event) and starts the app container, and nodectl says `late-exit`.

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::{procs, Kubelet, TestBed};

/// How long the init container runs before it exits by itself: time for
/// the test to see it run and hold its shim's unmount, on a busy machine.
const INIT_RUNS: &str = "10";
/// How long the rootfs unmount is held: past the init's exit and CRI's
/// 10 s task.Delete after it, with time to look.
const HOLD: Duration = Duration::from_secs(45);

fn manifest(name: &str) -> String {
    let image = support::IMAGE;
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n\
         spec:\n  terminationGracePeriodSeconds: 1\n  initContainers:\n  - name: init\n    \
         image: {image}\n    imagePullPolicy: Never\n    \
         command: [\"/bin/sh\", \"-c\", \"sleep {INIT_RUNS}\"]\n  containers:\n  - name: app\n    \
         image: {image}\n    imagePullPolicy: Never\n    \
         command: [\"/bin/sh\", \"-c\", \"sleep 3600\"]\n"
    )
}

/// Whether kubelet's log has its PLEG's ContainerDied event for `id`.
fn kubelet_saw_it_die(kubelet: &Kubelet, id: &str) -> bool {
    std::fs::read_to_string(&kubelet.log)
        .unwrap_or_default()
        .lines()
        .any(|line| {
            line.contains("SyncLoop (PLEG)")
                && line.contains(r#""Type":"ContainerDied""#)
                && line.contains(id)
        })
}

fn state(kubelet: &Kubelet, name: &str, container: &str) -> Option<String> {
    kubelet
        .container_states(name)
        .into_iter()
        .find(|(n, _)| n == container)
        .map(|(_, state)| state)
}

fn zombies(bed: &TestBed) -> Value {
    support::report(&bed.nodectl(&["zombies", "-o", "json"]))
}

async fn seed_000_under_kubelet(release: &str) {
    let test = format!("kubelet_seed_000_{release}");
    let Some(bed) = TestBed::start_networked(&test).await else {
        return;
    };
    let Some(kubelet) = Kubelet::start(&bed, &test, release) else {
        return;
    };
    kubelet.add_static_pod("seed", &manifest("seed"));
    let init = kubelet.running_container("seed", "init");
    let sandbox = kubelet.sandboxes("seed")[0].0.clone();
    let mut held = bed.delay_umount2(bed.shim_pid(&sandbox), HOLD);
    let started = Instant::now();
    let pid = bed.status(&init)["Pid"].as_i64().unwrap() as i32;
    let since = procs::stat(pid).expect("the init process runs").starttime;

    // The init container exits by itself; CRI's task.Delete gives up 10 s
    // later and CRI keeps it RUNNING.
    let gave_up = support::wait_until(Duration::from_secs(35), || {
        std::fs::read_to_string(bed.log_path())
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains("failed to handle container TaskExit event") && l.contains(&init))
    });
    assert!(
        gave_up,
        "{test}: CRI's exit handler never gave up on {init:.13}"
    );
    assert!(
        !procs::is_running_since(pid, since),
        "{test}: the init process is gone"
    );
    let doc = zombies(&bed);
    let seen = started.elapsed();
    let found = support::finding_keys(&doc);
    assert_eq!(
        found,
        vec![("zombie".to_string(), init.clone())],
        "{test}: the init container is the one zombie: {doc:#}"
    );
    let zombie = &support::findings_of_kind(&doc, "zombie")[0];
    assert_eq!(zombie["evidence"]["shim_in_umount2"], true, "{zombie:#}");
    assert_eq!(zombie["evidence"]["container_name"], "init", "{zombie:#}");
    // Beside it, what the user's other tools say: crictl, and kubelet (its
    // PLEG learns of exits through CRI, so its pod waits on the init).
    let crictl_says = state(&kubelet, "seed", "init");
    assert_eq!(
        crictl_says.as_deref(),
        Some("CONTAINER_RUNNING"),
        "{test}: crictl"
    );
    assert!(
        !kubelet_saw_it_die(&kubelet, &init),
        "{test}: kubelet saw the exit"
    );
    assert_eq!(
        state(&kubelet, "seed", "app"),
        None,
        "{test}: the app container waits"
    );
    eprintln!(
        "{test}: containerd {}: {seen:.1?} into the hold nodectl says: {}; crictl says init {}; kubelet \
         has seen no exit and has not started the app container",
        bed.containerd_version(),
        zombie["summary"],
        crictl_says.unwrap_or_default(),
    );

    // The unmount let go: CRI's retry records the exit, late; kubelet sees
    // it die and starts the app container.
    tokio::time::sleep((HOLD + Duration::from_secs(4)).saturating_sub(started.elapsed())).await;
    held.detach();
    let released = Instant::now();
    if !kubelet.wait_for(Duration::from_secs(300), |k| {
        state(k, "seed", "app").as_deref() == Some("CONTAINER_RUNNING")
    }) {
        kubelet.fail(&format!(
            "the app container never started once the unmount ended: {:?}",
            kubelet.container_states("seed")
        ));
    }
    assert!(
        kubelet_saw_it_die(&kubelet, &init),
        "{test}: kubelet's PLEG saw the init die"
    );
    let doc = zombies(&bed);
    assert_eq!(
        support::finding_keys(&doc),
        vec![("late-exit".to_string(), init.clone())],
        "{test}: the init's exit was recorded late: {doc:#}"
    );
    eprintln!(
        "{test}: kubelet started the app container {:.1?} after the unmount ended \
         ({:.1?} after the hold began); nodectl: {}",
        released.elapsed(),
        started.elapsed(),
        support::findings_of_kind(&doc, "late-exit")[0]["summary"]
    );
}

/// Each kubelet release on two of the four lines
/// (`support::kubelet_release_on`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_000_under_the_line_s_kubelet() {
    seed_000_under_kubelet(support::kubelet_release_here()).await;
}
