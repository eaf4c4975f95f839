//! Seed 004 (pods stuck Terminating: containerd#10589, see
//! tests/seed_004_real.rs) with a real kubelet driving the pods, each
//! release scripts/peers builds. kubelet does all the work: a static pod of
//! [`CONTAINERS`] containers, each exiting by itself 2 s in and restarted
//! by kubelet (its crash-loop back-off capped at 1 s), each probed by
//! kubelet's own exec liveness and readiness probes every second, so that
//! kubelet's ExecSync calls race the exits; every [`GENERATION`] its
//! manifest is removed and the next pod's added (a fresh pod's first exits
//! lose the exit most often, see below). No ExecSync of the test's own: the
//! test only looks, through crictl and CRI's status files, for a container
//! CRI keeps RUNNING whose process is gone for [`LOST_AFTER`] and whose
//! exit never reached CRI (containerd's log): an exit lost.
//!
//! From 1.7 on, each `runc exec` is held 0.5 s (see [`exec_delay`]): an
//! undelayed start is short, and the race came by chance. Measured on
//! 1.7.21 here undelayed: in 10 of 13 early runs an exit of the first pod
//! was lost, 3.5 to 9.3 s in; later, in CI, none in 605, 640 and 1156 exits
//! (240 and 480 s), and on 1.7.34 kubelet's probes met the race (a probe
//! refused for the init's exit) not once in 128 exits. Held, on 1.7.21
//! both kubelet releases lost an exit of the first pod 3.1 s in; on 1.7.34,
//! 2.0.11 and 2.3.4 61 to 78 probes per run were refused so, and no exit
//! was lost.
//!
//! On a release that carries the bug (1.7.14 to 1.7.21) nodectl must call
//! that container a zombie with the advisory and the race's cause (`check`
//! agreeing), while crictl says `CONTAINER_RUNNING` and kubelet's log shows
//! its probes failing with "cannot exec in a stopped container"; once the
//! static pods are removed, kubelet's StopContainer gives up at its deadline
//! ("Container termination failed with gracePeriod", DeadlineExceeded),
//! containerd's log says "wait container …: context canceled" (kubelet's
//! client deadline ends the call; the seed's "context deadline exceeded"
//! when containerd's own ends it first) and the pod is stuck, its sandbox
//! READY; a restart of containerd, as the finding's remedy says, lets
//! kubelet's teardown through. Each party's word is printed with the time
//! it was seen. On every other release the same churn loses no exit,
//! nodectl names no zombie in it whose exit CRI did not receive (see
//! [`look_in_churn`]) and none after it, and every pod is deleted with no
//! StopContainer reaching its deadline.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::seed_004::{affected, fix_of};
use support::{Kubelet, KubeletSetup, Line, TestBed, NODE_NAME};

/// The pods' names: `probed-<generation>`.
const POD: &str = "probed";
/// Containers in a pod: each exit is one try at the race.
const CONTAINERS: usize = 8;
/// How long each pod lives: its manifest is then removed and the next
/// generation's added.
const GENERATION: Duration = Duration::from_secs(10);
/// How long CRI may keep a container RUNNING after its process is gone
/// before the test counts the exit as lost (a recorded exit takes well
/// under a second on a quiet machine, some seconds on a loaded one).
const LOST_AFTER: Duration = Duration::from_secs(15);
/// How long the churn runs at most on an affected release, waiting for a
/// lost exit: with the exec held, one is lost within seconds; undelayed
/// it once took 480 s and more (see above). Only a run that loses none
/// waits this long.
const AFFECTED_BOUND: Duration = Duration::from_secs(240);
/// How long it runs on any other release.
const CLEAN_CHURN: Duration = Duration::from_secs(45);
/// `zombies --settle` in the churn: CRI's record of a normal exit can
/// come well after the default second once the process is gone there (see
/// [`look_in_churn`]): 2 to 4.5 s in most runs, 10.7 s once on 2.0.11.
const SETTLE_IN_CHURN: &str = "15s";
/// How long each `runc exec` is held before runc runs (see
/// [`TestBed::start_networked_delaying_exec`]), from 1.7 on. The exit is
/// lost only when a second exec starts after the init exited while a first
/// is still being started (upstream's regression test, TestIssue10589, is
/// those steps); an undelayed start takes some tens of ms, so under
/// kubelet's two probes a second the race came by chance: from the first
/// pod in most runs at first, then in CI on 1.7.21 none in 605 and 640
/// exits (240 s), once none in 1156 (480 s). Held 0.5 s, every probe's start
/// spans half its period. Not on 1.6: its shim starts execs one at a time
/// under the lock that also sends exits (`eventSendMu`), so a held start
/// there would queue every probe of the pod's shim behind it and hold back
/// the exits themselves; 1.6.20 predates the bug (1.6.29 to 1.6.35) and
/// its churn stays as kubelet makes it.
fn exec_delay(line: Line) -> Option<Duration> {
    match line {
        Line::V1_6 => None,
        Line::V1_7 | Line::V2_0 | Line::V2_3 => Some(Duration::from_millis(500)),
    }
}
/// kubelet's runtime request timeout: its StopContainer waits this plus
/// the grace period (2 s at least) before it gives up, in place of the
/// default 2 min.
const RUNTIME_REQUEST_TIMEOUT: &str = "15s";

fn pod_name(generation: usize) -> String {
    format!("{POD}-{generation}")
}

/// Whether crictl's `io.kubernetes.pod.name` is one of the test's pods.
fn ours(pod: &Value) -> bool {
    pod.as_str()
        .and_then(|p| p.strip_prefix(POD))
        .is_some_and(|p| p.starts_with('-') && p.ends_with(&format!("-{NODE_NAME}")))
}

fn manifest(name: &str) -> String {
    let image = support::IMAGE;
    let probe = "exec:\n        command: [\"/bin/busybox\", \"true\"]\n      \
                 periodSeconds: 1\n      timeoutSeconds: 1";
    let mut yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n\
         spec:\n  terminationGracePeriodSeconds: 2\n  restartPolicy: Always\n  containers:\n"
    );
    for n in 0..CONTAINERS {
        yaml.push_str(&format!(
            "  - name: c{n}\n    image: {image}\n    imagePullPolicy: Never\n    \
             command: [\"/bin/sh\", \"-c\", \"sleep 2; exit 0\"]\n    \
             livenessProbe:\n      {probe}\n      failureThreshold: 3\n    \
             readinessProbe:\n      {probe}\n"
        ));
    }
    yaml
}

/// kubelet as the test runs it: restarts at most 1 s apart (the crash-loop
/// back-off's cap, KEP-4603), and its runtime request timeout short.
fn setup(timeout_line: &str) -> KubeletSetup<'_> {
    KubeletSetup {
        config_lines: vec![
            "featureGates:\n  KubeletCrashLoopBackOffMax: true",
            "crashLoopBackOff:\n  maxContainerRestartPeriod: 1s",
            timeout_line,
        ],
        ..KubeletSetup::default()
    }
}

/// What the test saw of one container (one id) of the pod.
struct Seen {
    /// Its static pod's name.
    pod: String,
    name: String,
    /// When the test first saw CRI call it EXITED.
    exited: Option<Instant>,
    /// When the test first saw CRI call it RUNNING with its pid gone.
    dead_since: Option<Instant>,
    /// How long CRI took to record the exit after the test first saw the
    /// process gone (when it saw it gone before CRI recorded it).
    recorded_after: Option<Duration>,
}

/// The pod's containers as crictl and CRI's status files show them, looked
/// at again and again.
#[derive(Default)]
struct Churn {
    seen: BTreeMap<String, Seen>,
    /// The exits CRI received but had not recorded [`LOST_AFTER`] after
    /// the process was gone.
    late: std::collections::BTreeSet<String>,
}

impl Churn {
    /// One look; the ids CRI has kept RUNNING for [`LOST_AFTER`] with their
    /// process gone and whose exit never reached CRI (see
    /// [`init_exit_logged`]): the exits lost. Those whose exit did reach
    /// CRI are late, not lost (CRI's task.Delete slow on a loaded machine),
    /// and counted in `late`.
    fn look(&mut self, bed: &TestBed, kubelet: &Kubelet) -> Vec<String> {
        let doc = kubelet.crictl(&["ps", "-a"]);
        let now = Instant::now();
        for c in doc["containers"].as_array().into_iter().flatten() {
            let pod = &c["labels"]["io.kubernetes.pod.name"];
            if !ours(pod) {
                continue;
            }
            let id = c["id"].as_str().unwrap_or_default().to_string();
            let seen = self.seen.entry(id.clone()).or_insert_with(|| Seen {
                pod: pod
                    .as_str()
                    .unwrap_or_default()
                    .trim_end_matches(&format!("-{NODE_NAME}"))
                    .into(),
                name: c["metadata"]["name"].as_str().unwrap_or_default().into(),
                exited: None,
                dead_since: None,
                recorded_after: None,
            });
            match c["state"].as_str() {
                Some("CONTAINER_EXITED") => {
                    seen.exited.get_or_insert(now);
                    if let Some(dead) = seen.dead_since.take() {
                        seen.recorded_after = Some(now - dead);
                    }
                }
                Some("CONTAINER_RUNNING") => {
                    let pid = recorded_pid(bed, &id);
                    if pid > 0 && !support::is_running(pid) {
                        seen.dead_since.get_or_insert(now);
                    } else {
                        seen.dead_since = None;
                    }
                }
                _ => seen.dead_since = None,
            }
        }
        let overdue: Vec<String> = self
            .seen
            .iter()
            .filter(|(_, s)| s.dead_since.is_some_and(|t| now - t >= LOST_AFTER))
            .map(|(id, _)| id.clone())
            .collect();
        let (late, lost): (Vec<String>, Vec<String>) = overdue
            .into_iter()
            .partition(|id| init_exit_logged(bed, id));
        self.late.extend(late);
        lost
    }

    /// The exits CRI recorded, those seen by `by` when given.
    fn exits_by(&self, by: Option<Instant>) -> usize {
        self.seen
            .values()
            .filter(|s| s.exited.is_some_and(|t| by.is_none_or(|by| t <= by)))
            .count()
    }

    /// The longest CRI took to record an exit the test saw happen (to
    /// within its looks, a second apart), and how many it saw so.
    fn slowest_record(&self) -> (Option<Duration>, usize) {
        let times: Vec<Duration> = self
            .seen
            .values()
            .filter_map(|s| s.recorded_after)
            .collect();
        (times.iter().max().copied(), times.len())
    }

    fn exits(&self) -> usize {
        self.exits_by(None)
    }

    /// The ids CRI calls RUNNING whose process the last look found gone.
    fn dead(&self) -> Vec<&str> {
        self.seen
            .iter()
            .filter(|(_, s)| s.dead_since.is_some())
            .map(|(id, _)| id.as_str())
            .collect()
    }
}

/// Whether containerd's log shows CRI receiving the exit of container
/// `id`'s init (as tests/seed_004_real.rs reads it): an exec's exit carries
/// the exec's id; printed `id:"<id>"` by 1.7 and later, `ID:<id>,` by 1.6.
fn init_exit_logged(bed: &TestBed, id: &str) -> bool {
    let log = std::fs::read_to_string(bed.log_path()).unwrap_or_default();
    let ids = [format!(" id:\\\"{id}\\\""), format!(",ID:{id},")];
    log.lines()
        .any(|line| line.contains("exit event") && ids.iter().any(|id| line.contains(id.as_str())))
}

/// The wall clock (UTC), to set beside the times in kubelet's and
/// containerd's logs.
fn clock() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let day = now.as_secs() % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        day / 3600,
        day / 60 % 60,
        day % 60,
        now.subsec_millis()
    )
}

/// The init pid CRI's status file records, 0 when there is none.
fn recorded_pid(bed: &TestBed, id: &str) -> i32 {
    std::fs::read(bed.status_file(id))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|s| s["Pid"].as_i64())
        .unwrap_or(0) as i32
}

fn kubelet_lines(kubelet: &Kubelet, words: &[&str]) -> Vec<String> {
    std::fs::read_to_string(&kubelet.log)
        .unwrap_or_default()
        .lines()
        .filter(|l| words.iter().all(|w| l.contains(w)))
        .map(str::to_string)
        .collect()
}

/// kubelet's probe errors, counted by what refused the exec.
fn probe_refusals(kubelet: &Kubelet) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for line in kubelet_lines(kubelet, &["Probe errored"]) {
        for why in [
            "cannot exec in a stopped container",
            "cannot exec in a stopped state",
            "init process is not running",
            "CONTAINER_EXITED",
        ] {
            if line.contains(why) {
                *counts.entry(why).or_default() += 1;
            }
        }
    }
    counts
}

/// The state `crictl ps -a` gives container `id` (`crictl inspect` takes
/// no flag after its ids).
fn crictl_state(kubelet: &Kubelet, id: &str) -> String {
    kubelet.crictl(&["ps", "-a"])["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["id"] == id)
        .and_then(|c| c["state"].as_str())
        .unwrap_or("not listed")
        .to_string()
}

fn zombies(bed: &TestBed) -> (Option<i32>, Value) {
    zombies_settled(bed, None)
}

/// `nodectl zombies`, its second look `settle` after the first (its
/// default, 1 s, when `None`).
fn zombies_settled(bed: &TestBed, settle: Option<&str>) -> (Option<i32>, Value) {
    let mut args = vec!["zombies", "-o", "json"];
    if let Some(settle) = settle {
        args.extend(["--settle", settle]);
    }
    let output = bed.nodectl(&args);
    (output.status.code(), support::report(&output))
}

/// The containers of the test's pods crictl still calls RUNNING, and
/// their sandboxes crictl still calls READY, by pod and name.
fn still_up(kubelet: &Kubelet) -> (Vec<(String, String)>, Vec<String>) {
    let running = kubelet.crictl(&["ps", "-a"])["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| {
            ours(&c["labels"]["io.kubernetes.pod.name"]) && c["state"] == "CONTAINER_RUNNING"
        })
        .map(|c| {
            let field = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (
                field(&c["labels"]["io.kubernetes.pod.name"]),
                field(&c["metadata"]["name"]),
            )
        })
        .collect();
    let ready = kubelet.crictl(&["pods"])["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| ours(&p["metadata"]["name"]) && p["state"] == "SANDBOX_READY")
        .map(|p| {
            p["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    (running, ready)
}

/// Removes static pod `name`'s manifest unless it is gone already.
fn remove_pod(kubelet: &Kubelet, name: &str) {
    if kubelet.manifests.join(format!("{name}.yaml")).exists() {
        kubelet.remove_static_pod(name);
    }
}

async fn seed_004_under_kubelet(release: &str) {
    let test = format!("seed_004_kubelet_{release}");
    let line = support::Containerd::from_env().map(|release| release.line);
    let delay = line.ok().and_then(exec_delay);
    let Some(mut bed) = TestBed::start_networked_delaying_exec(&test, delay).await else {
        return;
    };
    let timeout_line = format!("runtimeRequestTimeout: {RUNTIME_REQUEST_TIMEOUT}");
    let Some(kubelet) = Kubelet::start_with(&bed, &test, release, setup(&timeout_line)) else {
        return;
    };
    let version = bed.containerd_version().to_string();
    let affected = affected(&version);
    eprintln!("{test}: each runc exec held {delay:?} before runc runs (None: not held)");
    let began = Instant::now();
    let bound = if affected {
        AFFECTED_BOUND
    } else {
        CLEAN_CHURN
    };
    let mut churn = Churn::default();
    let mut lost = Vec::new();
    let mut looked_mid_churn = false;
    let mut generation = 0;
    let mut born = began;
    while began.elapsed() < bound {
        if generation == 0 || born.elapsed() >= GENERATION {
            if generation > 0 {
                remove_pod(&kubelet, &pod_name(generation));
            }
            generation += 1;
            kubelet.add_static_pod(&pod_name(generation), &manifest(&pod_name(generation)));
            born = Instant::now();
        }
        lost = churn.look(&bed, &kubelet);
        if !lost.is_empty() {
            break;
        }
        if !affected && !looked_mid_churn && began.elapsed() > bound / 2 {
            look_in_churn(&bed, &test, &churn, began);
            looked_mid_churn = true;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let churned = began.elapsed();
    let (slowest, timed) = churn.slowest_record();
    eprintln!(
        "{test}: CRI recorded {timed} exits the test saw before it did, the slowest {slowest:.1?} \
         after the process was gone (to within a second); {} received but not recorded {} s \
         after: {:.13?}",
        churn.late.len(),
        LOST_AFTER.as_secs(),
        churn.late
    );
    eprintln!(
        "{test}: containerd {version} ({}): {} exits of {generation} pods in {churned:.1?}, \
         exits lost: {lost:?}; kubelet's probe errors by cause: {:?}",
        if affected { "affected" } else { "not affected" },
        churn.exits(),
        probe_refusals(&kubelet)
    );
    // No exit lost proves nothing unless kubelet churned: CONTAINERS exits
    // recorded. An exit lost proves the churn by itself (a container kubelet
    // ran exited; `lost_exit` below shows it whole, or the unaffected branch
    // fails on it): on 1.7.21 the first loss came with 7 exits recorded and
    // 4 lost (18 s in), and in another CI run with 4 recorded and 3 lost
    // (18.5 s in).
    assert!(
        !lost.is_empty() || churn.exits() >= CONTAINERS,
        "{test}: kubelet ran and restarted the containers: {:?}",
        still_up(&kubelet)
    );
    if affected {
        assert!(
            !lost.is_empty(),
            "{test}: containerd {version} carries containerd#10589, but kubelet's probes lost no \
             exit in {churned:.1?} ({} exits)",
            churn.exits()
        );
        lost_exit(&mut bed, &kubelet, &test, &churn, &lost[0], began).await;
    } else {
        assert!(
            lost.is_empty(),
            "{test}: containerd {version} has no containerd#10589, yet exits were lost: {lost:?}"
        );
        // The race met, and refused: an exec started after the init exited
        // is what loses the exit on an affected release, and what the fix
        // refuses ("container <id> init process is not running", 1.7.22's
        // 686c694, the same text in 2.x). Without one, no loss proves nothing.
        let refusals = probe_refusals(&kubelet);
        if delay.is_some() {
            assert!(
                refusals
                    .get("init process is not running")
                    .is_some_and(|&n| n > 0),
                "{test}: containerd {version}: no probe was refused for the init's exit, so the \
                 churn never started an exec after one ({refusals:?})"
            );
        }
        clean_delete(&bed, &kubelet, &test, &pod_name(generation)).await;
    }
    eprintln!("{test}: test took {:.1?}", began.elapsed());
}

/// nodectl in the churn, where containers exit every second and CRI
/// records each: no zombie whose exit CRI did not receive, its second look
/// [`SETTLE_IN_CHURN`] after the first. With its default second look, 1 s
/// after, it calls a container whose exit CRI received and is still
/// recording a zombie, with the slow-delete cause ("the delete failed or
/// timed out (10 s)") a second or two after the exit: measured here in 9 of
/// 34 looks (5 of 14 on 2.0.x, 2 of 8 on 1.7.34, 2 of 6 on 1.6.20, none of
/// 6 on 2.3.4). That look is made too and printed, not asserted.
fn look_in_churn(bed: &TestBed, test: &str, churn: &Churn, began: Instant) {
    let (code, doc) = zombies(bed);
    let named = support::ids_of_kind(&doc, "zombie");
    eprintln!(
        "{test}: {:.1?} in, {} exits so far: nodectl zombies (1 s settle) exits {code:?}, \
         zombies {named:.13?}; the test sees {:.13?} RUNNING with their process gone; gaps: {}",
        began.elapsed(),
        churn.exits(),
        churn.dead(),
        doc["gaps"]
    );
    let (code, doc) = zombies_settled(bed, Some(SETTLE_IN_CHURN));
    // On a machine loaded enough, CRI records some exits later still (up
    // to 22 s seen on 1.7.34 with a load average of 18): such a container
    // is RUNNING in CRI with its process gone for as long as nodectl
    // looked, as its zombie says; what would be false is one whose exit
    // CRI never received, or its process alive, or the advisory of a bug
    // this release does not have.
    for zombie in support::findings_of_kind(&doc, "zombie") {
        let id = zombie["id"].as_str().unwrap_or_default();
        assert!(
            churn.seen.contains_key(id) && init_exit_logged(bed, id),
            "{test}: nodectl zombies --settle {SETTLE_IN_CHURN} calls {id:.13} a zombie, its \
             exit not received by CRI: {zombie:#}"
        );
        assert!(zombie["evidence"]["advisory"].is_null(), "{zombie:#}");
        eprintln!(
            "{test}: nodectl zombies --settle {SETTLE_IN_CHURN} calls {id:.13} a zombie, its \
             exit received by CRI and not recorded yet: {}",
            zombie["cause"]
        );
    }
    eprintln!(
        "{test}: {:.1?} in: nodectl zombies --settle {SETTLE_IN_CHURN} exits {code:?}, zombies \
         {:.13?}; gaps: {}",
        began.elapsed(),
        support::ids_of_kind(&doc, "zombie"),
        doc["gaps"]
    );
}

/// On a release without the bug: the pod deletes cleanly, and nodectl
/// finds no zombie after it.
async fn clean_delete(bed: &TestBed, kubelet: &Kubelet, test: &str, last: &str) {
    let removed = Instant::now();
    remove_pod(kubelet, last);
    if !kubelet.wait_for(Duration::from_secs(60), |k| {
        let (running, ready) = still_up(k);
        running.is_empty() && ready.is_empty()
    }) {
        kubelet.fail(&format!(
            "{test}: the pod was not deleted cleanly: still up {:?}",
            still_up(kubelet)
        ));
    }
    eprintln!(
        "{test}: kubelet stopped every pod {:.1?} after the last manifest was removed",
        removed.elapsed()
    );
    // Seed 004's StopContainer failure is its deadline. (On 2.0 some
    // StopContainer calls in the churn fail with "ttrpc: closed", the
    // shim gone as a container was stopped; kubelet's next sync gets
    // through, and they are printed, not asserted.)
    let failed = kubelet_lines(kubelet, &["Container termination failed"]);
    let deadline: Vec<&String> = failed
        .iter()
        .filter(|l| l.contains("DeadlineExceeded") || l.contains("context deadline exceeded"))
        .collect();
    assert!(deadline.is_empty(), "{test}: {deadline:#?}");
    if let Some(first) = failed.first() {
        eprintln!(
            "{test}: {} StopContainer calls failed otherwise, kubelet retrying; the first: {first}",
            failed.len()
        );
    }
    let (code, doc) = zombies(bed);
    assert!(
        support::findings_of_kind(&doc, "zombie").is_empty(),
        "{test}: no zombie after the pod: {doc:#}"
    );
    eprintln!(
        "{test}: nodectl zombies exits {code:?}: {:?}; gaps: {}",
        support::finding_keys(&doc),
        doc["gaps"]
    );
}

/// On an affected release: what nodectl, crictl and kubelet say of the
/// container whose exit was lost, each with the time it said it, and what
/// clears it.
async fn lost_exit(
    bed: &mut TestBed,
    kubelet: &Kubelet,
    test: &str,
    churn: &Churn,
    id: &str,
    began: Instant,
) {
    let version = bed.containerd_version().to_string();
    let seen = &churn.seen[id];
    let name = seen.name.clone();
    let pod = format!("{}-{NODE_NAME}", seen.pod);
    let died = seen.dead_since.expect("a lost exit was seen dead");
    let at = |what: &str| eprintln!("{test}: [{} +{:.1?}] {what}", clock(), began.elapsed());
    at(&format!(
        "the test: the exit of {name} ({id:.13}) is lost: its process was gone {:.1?} into the \
         churn, after {} exits CRI recorded ({} by now), and CRI still says RUNNING",
        died - began,
        churn.exits_by(Some(died)),
        churn.exits()
    ));
    // nodectl: the zombie, with the advisory and the race's cause.
    let (code, doc) = zombies(bed);
    assert_eq!(code, Some(1), "{doc:#}");
    let found: Vec<&Value> = support::findings_of_kind(&doc, "zombie")
        .into_iter()
        .filter(|f| f["id"] == id)
        .collect();
    assert_eq!(found.len(), 1, "{test}: {id:.13} is a zombie: {doc:#}");
    let zombie = found[0];
    let evidence = &zombie["evidence"];
    assert_eq!(evidence["container_name"], name.as_str(), "{zombie:#}");
    assert_eq!(evidence["shim_in_umount2"], false, "{zombie:#}");
    assert_eq!(
        evidence["advisory"],
        format!("containerd#10589: fixed in {}, upgrade", fix_of(&version)),
        "{zombie:#}"
    );
    let cause = zombie["cause"].as_str().unwrap_or_default();
    for words in [
        &format!("containerd {version} has containerd#10589"),
        "probe's ExecSync",
        "No retry will come",
        "wait container: context deadline exceeded",
        // What containerd's log said here: kubelet's cancel ended the wait.
        "\"context canceled\" under kubelet",
        "Terminating",
    ] {
        assert!(cause.contains(words), "the cause says {words:?}: {cause}");
    }
    let remedy = zombie["remedy"].as_str().unwrap_or_default();
    assert!(remedy.contains("restart containerd"), "{remedy}");
    at(&format!(
        "nodectl zombies: {} (advisory {})",
        zombie["summary"], evidence["advisory"]
    ));
    // check agrees: for this container, the zombie and nothing else.
    let checked = support::report(&bed.nodectl(&["check", "-o", "json"]));
    let kinds: Vec<&Value> = checked["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["id"] == id)
        .map(|f| &f["kind"])
        .collect();
    assert_eq!(kinds, ["zombie"], "{test}: {checked:#}");
    // crictl: RUNNING.
    let crictl_says = crictl_state(kubelet, id);
    assert_eq!(crictl_says, "CONTAINER_RUNNING", "{test}: crictl");
    at(&format!("crictl ps -a: {name} {crictl_says}"));
    // kubelet: its probes refused by runc, the process being gone.
    let refused = kubelet_lines(
        kubelet,
        &[
            "Probe errored",
            &format!("containerName=\"{name}\""),
            "cannot exec in a stopped container",
        ],
    );
    assert!(
        !refused.is_empty(),
        "{test}: kubelet's probes of {name} fail:\n{}",
        kubelet.log_tail(40)
    );
    at(&format!(
        "kubelet's log: {} probe errors for {name} so far, the first: {}",
        refused.len(),
        refused[0]
    ));

    // The pod deleted: kubelet's StopContainer waits for an exit that never
    // comes and gives up at its deadline; the container stays RUNNING.
    for manifest in std::fs::read_dir(&kubelet.manifests).expect("kubelet's static pod dir") {
        let path = manifest.expect("a static pod manifest").path();
        std::fs::remove_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    at(&format!(
        "the test: the static pods' manifests removed, {}'s among them",
        seen.pod
    ));
    let gave_up = |k: &Kubelet| {
        kubelet_lines(k, &["Container termination failed with gracePeriod", id])
            .into_iter()
            .find(|l| l.contains("DeadlineExceeded") || l.contains("context deadline exceeded"))
    };
    if !kubelet.wait_for(Duration::from_secs(60), |k| gave_up(k).is_some()) {
        kubelet.fail(&format!(
            "{test}: kubelet's StopContainer of {id:.13} never gave up"
        ));
    }
    at(&format!(
        "kubelet's log: {}",
        gave_up(kubelet).unwrap_or_default()
    ));
    let said = std::fs::read_to_string(bed.log_path())
        .unwrap_or_default()
        .lines()
        .find(|l| l.contains("StopContainer for") && l.contains(id) && l.contains("failed"))
        .map(str::to_string)
        .unwrap_or_default();
    // The seed's "wait container: context deadline exceeded" when
    // containerd's own deadline ends the wait; under kubelet its client's
    // deadline (the same one) usually cancels the call first, and CRI
    // logs "context canceled".
    assert!(
        said.contains("wait container")
            && (said.contains("context deadline exceeded") || said.contains("context canceled")),
        "{test}: seed 004's line in containerd's log: {said:?}\n{}",
        bed.log_tail(20)
    );
    at(&format!("containerd's log: {said}"));
    let (running, ready) = still_up(kubelet);
    assert!(
        running.contains(&(pod.clone(), name.clone())) && ready.contains(&pod),
        "{test}: the pod is stuck: {running:?} {ready:?}"
    );
    at(&format!(
        "crictl: still RUNNING {running:?}, sandbox still READY: the pod is stuck Terminating"
    ));

    // What the finding's remedy says clears it: a restart of containerd.
    bed.restart_containerd().await;
    at("the test: containerd restarted");
    if !kubelet.wait_for(Duration::from_secs(90), |k| {
        let (running, ready) = still_up(k);
        running.is_empty() && ready.is_empty()
    }) {
        kubelet.fail(&format!(
            "{test}: kubelet's teardown never went through after a restart: {:?}",
            still_up(kubelet)
        ));
    }
    at("crictl: no container of the pod RUNNING, its sandbox NOTREADY: kubelet got through");
    let (_, doc) = zombies(bed);
    assert!(
        support::findings_of_kind(&doc, "zombie").is_empty(),
        "{test}: no zombie once kubelet's teardown went through: {doc:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_004_under_kubelet_v1_34() {
    seed_004_under_kubelet(support::KUBELET_RELEASES[0]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_004_under_kubelet_v1_37() {
    seed_004_under_kubelet(support::KUBELET_RELEASES[1]).await;
}

#[test]
fn affected_releases_are_1_7_14_to_1_7_21() {
    for version in ["1.7.14", "1.7.21", "1.6.29", "1.6.35"] {
        assert!(affected(version), "{version}");
    }
    for version in ["1.6.20", "1.7.22", "1.7.34", "2.0.6", "2.0.11", "2.3.4"] {
        assert!(!affected(version), "{version}");
    }
}
